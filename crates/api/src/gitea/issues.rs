//! Issues, pull requests, their comments and the repo's labels at
//! Gitea's paths, with Gitea's parameters, bodies and objects. The writes
//! go through `crate::threads`' helpers, the ones the web's forms use, so
//! who may do what is decided in one place.

use std::collections::HashMap;
use std::sync::Arc;

use axum::Json;
use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::Value;

use super::objects::Base;
use super::shape::Shaper;
use crate::ApiState;
use crate::meta::{body, thread_number};
use crate::threads::{create_thread, edit_thread};
use vole_access::{Principal, ResolvedRepo};
use vole_http::page::ApiPage;
use vole_http::repo_access::{Read, WriteMeta};
use vole_http::{AppError, RepoAccess};
use vole_meta::entity::{Change, ChangeState, Issue, IssueState, ThreadKind};
use vole_meta::index::{MAX_QUERY_BYTES, ThreadKinds, ThreadQuery, ThreadState};
use vole_meta::{ChangePatch, IssuePatch, NewIssue};
use vole_stdx::page::Pagination;

/// A numeric id in a path (a comment's, a label's): a whole number from
/// 1, or a 400 naming `what`.
pub(crate) fn path_id(text: &str, what: &str) -> Result<u64, AppError> {
    text.parse::<u64>()
        .ok()
        .filter(|n| *n >= 1)
        .ok_or_else(|| AppError::bad_request(format!("{text:?} is not a {what} id")))
}

/// A commit message as an answer carries it: at most 64 KiB, cut on a
/// character boundary.
pub(crate) fn cut_message(mut message: String) -> String {
    const MAX_MESSAGE_BYTES: usize = 64 * 1024;
    let kept = vole_stdx::prefix(&message, MAX_MESSAGE_BYTES).len();
    message.truncate(kept);
    message
}

/// Runs `f` with a [`Shaper`] on the async worker: for answers read
/// from the store's memory alone (labels, users), which a hop to the
/// blocking pool would only make slower. Issues, pull requests and
/// comments are not: a long body is read back from git.
pub(crate) async fn shaped<T: Send + 'static>(
    app: &Arc<ApiState>,
    base: Base,
    viewer: Principal,
    f: impl FnOnce(&Shaper<'_>) -> Result<T, AppError> + Send + 'static,
) -> Result<T, AppError> {
    f(&Shaper::new(app, base, &viewer))
}

/// Runs `f` with a [`Shaper`] on the blocking pool: for answers that read
/// files (a repo's refs and description, a branch's tip, the bodies of
/// issues, pull requests and comments the index left in git).
pub(crate) async fn shaped_blocking<T: Send + 'static>(
    app: &Arc<ApiState>,
    base: Base,
    viewer: Principal,
    f: impl FnOnce(&Shaper<'_>) -> Result<T, AppError> + Send + 'static,
) -> Result<T, AppError> {
    let app = app.clone();
    vole_http::spawn_blocking(move || f(&Shaper::new(&app, base, &viewer)))
        .await
        .map_err(|e| AppError::internal("an API read failed", e))?
}

/// [`shaped`] under one of the read slots (an answer that runs git or
/// walks a tree): waits for one as the web's pages do, then a 503.
pub(crate) async fn shaped_reading<T: Send + 'static>(
    app: &Arc<ApiState>,
    base: Base,
    viewer: Principal,
    f: impl FnOnce(&Shaper<'_>) -> Result<T, AppError> + Send + 'static,
) -> Result<T, AppError> {
    let _slot = app.reads.acquire().await?;
    shaped_blocking(app, base, viewer, f).await
}

/// A list page in Gitea's shape: `X-Total-Count` and a `Link` header of
/// absolute URLs with `page` and `limit` (and the filters).
pub(crate) fn gitea_page<T: serde::Serialize>(
    items: Vec<T>,
    url: &str,
    filters: &str,
    page: Pagination,
    total: usize,
) -> Response {
    let mut response = crate::paginated(items, url, filters, page, total);
    // Gitea's `limit` takes at most 50: a larger `per_page` stays so.
    if page.per_page() > vole_http::page::GITEA_MAX_LIMIT as usize {
        return response;
    }
    if let Some(link) = response.headers().get(axum::http::header::LINK).cloned()
        && let Ok(text) = link.to_str()
        && let Ok(value) = axum::http::HeaderValue::from_str(&text.replace("&per_page=", "&limit="))
    {
        response
            .headers_mut()
            .insert(axum::http::header::LINK, value);
    }
    response
}

/// The query's filters as they are repeated in the `Link` header.
pub(crate) fn repeat(query: &HashMap<String, String>, keys: &[&str]) -> String {
    keys.iter()
        .filter_map(|key| {
            query.get(*key).map(|value| {
                format!(
                    "{key}={}",
                    percent_encoding::utf8_percent_encode(
                        value,
                        percent_encoding::NON_ALPHANUMERIC
                    )
                )
            })
        })
        .collect::<Vec<_>>()
        .join("&")
}

/// `state`, as Gitea reads it: `closed` or `all`, anything else open.
pub(crate) fn thread_state(query: &HashMap<String, String>) -> ThreadState {
    match query.get("state").map(String::as_str) {
        Some("closed") => ThreadState::Closed,
        Some("all") => ThreadState::All,
        _ => ThreadState::Open,
    }
}

pub(crate) fn rfc3339(
    query: &HashMap<String, String>,
    key: &str,
) -> Result<Option<String>, AppError> {
    let Some(text) = query.get(key).filter(|t| !t.is_empty()) else {
        return Ok(None);
    };
    let utc = vole_stdx::time::parse_rfc3339_utc(text).ok_or_else(|| {
        AppError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            format!("{key} must be a time in RFC 3339 (2024-01-02T15:04:05Z), got {text:?}"),
        )
    })?;
    Ok(Some(utc))
}

/// The labels a query names (`labels=a,b`), any of which an item has.
fn label_names(query: &HashMap<String, String>) -> Result<Vec<String>, AppError> {
    let names: Vec<String> = query
        .get("labels")
        .map(|l| {
            l.split(',')
                .map(str::trim)
                .filter(|n| !n.is_empty())
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default();
    filter_labels(names)
}

/// The most label names a list's filter takes.
pub const MAX_FILTER_LABELS: usize = 50;

/// The names a `labels` filter asks for, at most [`MAX_FILTER_LABELS`]
/// once each (ASCII case aside).
pub(crate) fn filter_labels(mut names: Vec<String>) -> Result<Vec<String>, AppError> {
    let mut seen = std::collections::HashSet::new();
    names.retain(|n| seen.insert(n.to_ascii_lowercase()));
    if names.len() > MAX_FILTER_LABELS {
        return Err(AppError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            format!("labels names at most {MAX_FILTER_LABELS} labels"),
        ));
    }
    Ok(names)
}

/// Runs a list's `f` on the blocking pool (a page's long bodies are read
/// back from git); under a read slot too when it scans the repo's
/// threads (a filter), as any answer of unbounded reading does.
pub(crate) async fn listed<T: Send + 'static>(
    app: &Arc<ApiState>,
    base: Base,
    viewer: Principal,
    scans: bool,
    f: impl FnOnce(&Shaper<'_>) -> Result<T, AppError> + Send + 'static,
) -> Result<T, AppError> {
    if scans {
        shaped_reading(app, base, viewer, f).await
    } else {
        shaped_blocking(app, base, viewer, f).await
    }
}

/// `GET /repos/{o}/{r}/issues`: issues and pull requests (`type=issues`
/// or `pulls` for one kind), newest first, `state` open by default,
/// `labels`, `q`, `created_by`, `since`, `before`, paged.
pub async fn list(
    State(app): State<Arc<ApiState>>,
    RepoAccess {
        repo, principal, ..
    }: RepoAccess<Read>,
    base: Base,
    Query(query): Query<HashMap<String, String>>,
    ApiPage(page): ApiPage,
) -> Result<Response, AppError> {
    // As Gitea reads it: `issues` or `pulls`, anything else both.
    let kinds = match query.get("type").map(String::as_str) {
        Some("issues") => ThreadKinds::Issues,
        Some("pulls") => ThreadKinds::Changes,
        _ => ThreadKinds::Both,
    };
    let text = query.get("q").filter(|q| !q.is_empty()).cloned();
    if text.as_ref().is_some_and(|q| q.len() > MAX_QUERY_BYTES) {
        return Err(AppError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            format!("q is longer than {MAX_QUERY_BYTES} bytes"),
        ));
    }
    let filter = ThreadQuery {
        kinds,
        state: thread_state(&query),
        labels: label_names(&query)?,
        author: query.get("created_by").filter(|a| !a.is_empty()).cloned(),
        since: rfc3339(&query, "since")?,
        before: rfc3339(&query, "before")?,
        text,
    };
    let url = base.api(&format!("repos/{repo}/issues"));
    let filters = repeat(
        &query,
        &[
            "state",
            "labels",
            "type",
            "q",
            "created_by",
            "since",
            "before",
        ],
    );
    let scans = !filter.by_state_only();
    let (items, total) = listed(&app, base, principal, scans, move |shaper| {
        let found = shaper.app.meta.list_threads(&repo, &filter, page)?;
        let meta = shaper.repo_meta(&repo);
        let items: Vec<_> = found
            .items
            .iter()
            .map(|t| shaper.listed_issue(&repo, &meta, t))
            .collect();
        Ok((items, found.total))
    })
    .await?;
    Ok(gitea_page(items, &url, &filters, page, total))
}

/// An issue or pull request by number, as Gitea's issue endpoints show
/// either.
pub(crate) fn any_issue(
    shaper: &Shaper<'_>,
    repo: &ResolvedRepo,
    number: u64,
) -> Result<super::objects::GiteaIssue, AppError> {
    let meta = shaper.repo_meta(repo);
    match kind_of(shaper.app, repo, number)? {
        ThreadKind::Issue => Ok(shaper.issue(repo, &meta, &shaper.app.meta.issue(repo, number)?)),
        ThreadKind::Change => {
            Ok(shaper.change_issue(repo, &meta, &shaper.app.meta.change(repo, number)?))
        }
    }
}

/// What kind of thread `number` is; a 404 when none.
pub(crate) fn kind_of(
    app: &ApiState,
    repo: &ResolvedRepo,
    number: u64,
) -> Result<ThreadKind, AppError> {
    app.meta
        .thread_kinds(repo, &[number])?
        .get(&number)
        .copied()
        .ok_or_else(|| AppError::not_found(format!("issue #{number} not found")))
}

/// `GET /repos/{o}/{r}/issues/{n}`.
pub async fn get(
    State(app): State<Arc<ApiState>>,
    RepoAccess {
        repo, principal, ..
    }: RepoAccess<Read>,
    base: Base,
    Path((_, _, number)): Path<(String, String, String)>,
) -> Result<Response, AppError> {
    let number = thread_number(&number)?;
    let issue =
        shaped_blocking(&app, base, principal, move |s| any_issue(s, &repo, number)).await?;
    Ok(Json(issue).into_response())
}

/// Gitea's `CreateIssueOption` (assignees, milestone, due date and ref
/// are taken and ignored: vole has none of them).
#[derive(Debug, Deserialize)]
pub struct CreateIssueOption {
    pub title: String,
    #[serde(default)]
    pub body: Option<String>,
    #[serde(default)]
    pub labels: Option<Vec<Value>>,
    #[serde(default)]
    pub closed: Option<bool>,
}

/// Label ids (or names, as later Gitea versions take) as the names the
/// Labels as a request names them, as the names the documents carry: a
/// number (or a string of digits) is a label's id and must be one of the
/// repo's (422 otherwise); another string is a name, the label's own
/// spelling when the repo has it, else a new label of that name (made
/// with the write, by those who may set labels).
pub(crate) fn label_refs(
    app: &ApiState,
    repo: &ResolvedRepo,
    refs: &[Value],
) -> Result<Vec<String>, AppError> {
    // Refused before any is looked up: each costs a look at the repo's
    // labels.
    if refs.len() > vole_meta::entity::MAX_LABELS {
        return Err(AppError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            format!("at most {} labels", vole_meta::entity::MAX_LABELS),
        ));
    }
    let labels = app.meta.labels(repo)?;
    let no_such = |r: &Value| {
        AppError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            format!("label {r} is no label of {repo}"),
        )
    };
    refs.iter()
        .map(|r| {
            let by_id = |id: u64| {
                labels
                    .iter()
                    .find(|l| l.serial == id)
                    .map(|l| l.name.clone())
                    .ok_or_else(|| no_such(r))
            };
            match r {
                Value::Number(n) => n.as_u64().map_or_else(|| Err(no_such(r)), by_id),
                Value::String(s) => match s.parse::<u64>() {
                    Ok(id) => by_id(id),
                    Err(_) => Ok(labels
                        .iter()
                        .find(|l| l.name.eq_ignore_ascii_case(s.trim()))
                        .map_or_else(|| s.trim().to_string(), |l| l.name.clone())),
                },
                _ => Err(no_such(r)),
            }
        })
        .collect()
}

/// `POST /repos/{o}/{r}/issues`: 201 with the issue.
pub async fn create(
    State(app): State<Arc<ApiState>>,
    RepoAccess {
        repo, principal, ..
    }: RepoAccess<WriteMeta>,
    base: Base,
    payload: Result<Json<CreateIssueOption>, JsonRejection>,
) -> Result<Response, AppError> {
    let option = body(payload)?;
    let labels = match &option.labels {
        Some(refs) if !refs.is_empty() => label_refs(&app, &repo, refs)?,
        _ => Vec::new(),
    };
    let new = NewIssue {
        title: option.title,
        body: option.body.unwrap_or_default(),
        labels,
    };
    let mut issue: Issue = create_thread(&app, &principal, repo.clone(), new).await?;
    if option.closed == Some(true) {
        let patch = IssuePatch {
            state: Some(IssueState::Closed),
            ..IssuePatch::default()
        };
        issue = edit_thread(&app, &principal, repo.clone(), issue.number, patch).await?;
    }
    // Shaped from the issue in hand (no body to read back): on the async
    // worker, as before bodies were left in git.
    let shown = shaped(&app, base, principal, move |s| {
        Ok(s.issue(&repo, &s.repo_meta(&repo), &issue))
    })
    .await?;
    Ok((StatusCode::CREATED, Json(shown)).into_response())
}

/// Gitea's `EditIssueOption` (and the part of `EditPullRequestOption`
/// vole takes).
#[derive(Debug, Default, Deserialize)]
pub struct EditIssueOption {
    #[serde(default)]
    pub title: Option<String>,
    #[serde(default)]
    pub body: Option<String>,
    #[serde(default)]
    pub state: Option<String>,
    /// A pull request's new target branch.
    #[serde(default)]
    pub base: Option<String>,
    /// Label ids (a pull request's edit).
    #[serde(default)]
    pub labels: Option<Vec<Value>>,
    /// vole's optimistic concurrency: the version this edit replaces.
    #[serde(default)]
    pub version: Option<u64>,
    /// The labels' names, resolved already (the label endpoints'), in
    /// place of `labels`.
    #[serde(skip)]
    pub label_names: Option<Vec<String>>,
}

pub(crate) fn open_or_closed(state: Option<&str>) -> Result<Option<bool>, AppError> {
    match state {
        None => Ok(None),
        Some("open") => Ok(Some(true)),
        Some("closed") => Ok(Some(false)),
        Some(other) => Err(AppError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            format!("state must be open or closed, got {other:?}"),
        )),
    }
}

/// Applies a Gitea edit to issue or pull request `number`.
pub(crate) async fn apply_edit(
    app: &Arc<ApiState>,
    principal: &Principal,
    repo: &ResolvedRepo,
    number: u64,
    option: EditIssueOption,
) -> Result<ThreadKind, AppError> {
    let open = open_or_closed(option.state.as_deref())?;
    let labels = match (option.label_names, &option.labels) {
        (Some(names), _) => Some(names),
        (None, Some(refs)) => Some(label_refs(app, repo, refs)?),
        (None, None) => None,
    };
    let kind = kind_of(app, repo, number)?;
    match kind {
        ThreadKind::Issue => {
            let patch = IssuePatch {
                version: option.version,
                title: option.title,
                body: option.body,
                state: open.map(|o| {
                    if o {
                        IssueState::Open
                    } else {
                        IssueState::Closed
                    }
                }),
                labels,
            };
            edit_thread::<Issue>(app, principal, repo.clone(), number, patch).await?;
        }
        ThreadKind::Change => {
            let current = app.meta.change(repo, number)?;
            // Closing a merged one is no change (Gitea answers it so).
            let state = match open {
                Some(_) if current.state == ChangeState::Merged => None,
                Some(true) => Some(ChangeState::Open),
                Some(false) => Some(ChangeState::Closed),
                None => None,
            };
            let patch = ChangePatch {
                version: option.version,
                title: option.title,
                body: option.body,
                state,
                target_branch: option.base.filter(|b| *b != current.target_branch),
                labels,
            };
            edit_thread::<Change>(app, principal, repo.clone(), number, patch).await?;
        }
    }
    Ok(kind)
}

/// `PATCH /repos/{o}/{r}/issues/{n}`: 201 with the issue, as Gitea.
pub async fn edit(
    State(app): State<Arc<ApiState>>,
    RepoAccess {
        repo, principal, ..
    }: RepoAccess<WriteMeta>,
    base: Base,
    Path((_, _, number)): Path<(String, String, String)>,
    payload: Result<Json<EditIssueOption>, JsonRejection>,
) -> Result<Response, AppError> {
    let number = thread_number(&number)?;
    let option = body(payload)?;
    apply_edit(&app, &principal, &repo, number, option).await?;
    let issue =
        shaped_blocking(&app, base, principal, move |s| any_issue(s, &repo, number)).await?;
    Ok((StatusCode::CREATED, Json(issue)).into_response())
}
