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
use crate::meta::{blocking, body, thread_number};
use crate::threads::{comment_on, create_thread, edit_thread, rewrite_comment};
use vole_access::{Principal, ResolvedRepo};
use vole_http::page::ApiPage;
use vole_http::repo_access::{Read, WriteMeta};
use vole_http::{AppError, RepoAccess};
use vole_meta::entity::{Change, ChangeState, Issue, IssueState, ThreadKind};
use vole_meta::index::{MAX_QUERY_BYTES, ThreadKinds, ThreadQuery, ThreadState};
use vole_meta::labels::LabelPut;
use vole_meta::{ChangePatch, IssuePatch, NewChange, NewComment, NewIssue};
use vole_stdx::page::Pagination;

/// Runs `f` with a [`Shaper`] on the blocking pool.
pub(crate) async fn shaped<T: Send + 'static>(
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
fn repeat(query: &HashMap<String, String>, keys: &[&str]) -> String {
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

fn thread_state(query: &HashMap<String, String>) -> Result<ThreadState, AppError> {
    match query.get("state").map(String::as_str) {
        None | Some("") | Some("open") => Ok(ThreadState::Open),
        Some("closed") => Ok(ThreadState::Closed),
        Some("all") => Ok(ThreadState::All),
        Some(other) => Err(AppError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            format!("state must be open, closed or all, got {other:?}"),
        )),
    }
}

fn rfc3339(query: &HashMap<String, String>, key: &str) -> Result<Option<String>, AppError> {
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
fn label_names(query: &HashMap<String, String>) -> Vec<String> {
    query
        .get("labels")
        .map(|l| {
            l.split(',')
                .map(str::trim)
                .filter(|n| !n.is_empty())
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
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
    let kinds = match query.get("type").map(String::as_str) {
        None | Some("") => ThreadKinds::Both,
        Some("issues") => ThreadKinds::Issues,
        Some("pulls") => ThreadKinds::Changes,
        Some(other) => {
            return Err(AppError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                format!("type must be issues or pulls, got {other:?}"),
            ));
        }
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
        state: thread_state(&query)?,
        labels: label_names(&query),
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
    let (items, total) = shaped(&app, base, principal, move |shaper| {
        let found = shaper.app.meta.list_threads(&repo, &filter, page)?;
        let meta = shaper.repo_meta(&repo);
        let items: Vec<_> = found
            .items
            .iter()
            .map(|t| shaper.any_issue(&repo, &meta, t))
            .collect();
        Ok((items, found.total))
    })
    .await?;
    Ok(gitea_page(items, &url, &filters, page, total))
}

/// An issue or pull request by number, as Gitea's issue endpoints show
/// either.
fn any_issue(
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
    let issue = shaped(&app, base, principal, move |s| any_issue(s, &repo, number)).await?;
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
/// documents carry; an id or name that is no label of the repo is a 422.
fn label_refs(
    app: &ApiState,
    repo: &ResolvedRepo,
    refs: &[Value],
) -> Result<Vec<String>, AppError> {
    let labels = app.meta.labels(repo)?;
    refs.iter()
        .map(|r| {
            let found = match r {
                Value::Number(n) => n
                    .as_u64()
                    .and_then(|id| labels.iter().find(|l| l.serial == id)),
                Value::String(s) => s
                    .parse::<u64>()
                    .ok()
                    .and_then(|id| labels.iter().find(|l| l.serial == id))
                    .or_else(|| labels.iter().find(|l| l.name.eq_ignore_ascii_case(s))),
                _ => None,
            };
            found.map(|l| l.name.clone()).ok_or_else(|| {
                AppError::new(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    format!("label {r} is no label of {repo}"),
                )
            })
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
}

fn open_or_closed(state: Option<&str>) -> Result<Option<bool>, AppError> {
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
async fn apply_edit(
    app: &Arc<ApiState>,
    principal: &Principal,
    repo: &ResolvedRepo,
    number: u64,
    option: EditIssueOption,
) -> Result<ThreadKind, AppError> {
    let open = open_or_closed(option.state.as_deref())?;
    let labels = match &option.labels {
        Some(refs) => Some(label_refs(app, repo, refs)?),
        None => None,
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
    let issue = shaped(&app, base, principal, move |s| any_issue(s, &repo, number)).await?;
    Ok((StatusCode::CREATED, Json(issue)).into_response())
}

// ---- comments ----

/// `GET /repos/{o}/{r}/issues/{n}/comments?since=&before=`: oldest first.
pub async fn list_comments(
    State(app): State<Arc<ApiState>>,
    RepoAccess {
        repo, principal, ..
    }: RepoAccess<Read>,
    base: Base,
    Path((_, _, number)): Path<(String, String, String)>,
    Query(query): Query<HashMap<String, String>>,
    ApiPage(page): ApiPage,
) -> Result<Response, AppError> {
    let number = thread_number(&number)?;
    let since = rfc3339(&query, "since")?;
    let before = rfc3339(&query, "before")?;
    let url = base.api(&format!("repos/{repo}/issues/{number}/comments"));
    let (items, total) = shaped(&app, base, principal, move |s| {
        let kind = kind_of(s.app, &repo, number)?;
        let found = s.app.meta.comments(&repo, kind, number, page)?;
        let items: Vec<_> = found
            .items
            .iter()
            .filter(|c| since.as_deref().is_none_or(|t| c.updated_at.as_str() >= t))
            .filter(|c| before.as_deref().is_none_or(|t| c.updated_at.as_str() <= t))
            .map(|c| s.comment(&repo, (kind, number), c))
            .collect();
        Ok((items, found.total))
    })
    .await?;
    Ok(gitea_page(items, &url, "", page, total))
}

/// `POST /repos/{o}/{r}/issues/{n}/comments`: 201 with the comment.
pub async fn add_comment(
    State(app): State<Arc<ApiState>>,
    RepoAccess {
        repo, principal, ..
    }: RepoAccess<WriteMeta>,
    base: Base,
    Path((_, _, number)): Path<(String, String, String)>,
    payload: Result<Json<NewComment>, JsonRejection>,
) -> Result<Response, AppError> {
    let number = thread_number(&number)?;
    let new = body(payload)?;
    let kind = kind_of(&app, &repo, number)?;
    let comment = match kind {
        ThreadKind::Issue => {
            comment_on::<Issue>(&app, &principal, repo.clone(), number, new).await?
        }
        ThreadKind::Change => {
            comment_on::<Change>(&app, &principal, repo.clone(), number, new).await?
        }
    };
    let shown = shaped(&app, base, principal, move |s| {
        Ok(s.comment(&repo, (kind, number), &comment))
    })
    .await?;
    Ok((StatusCode::CREATED, Json(shown)).into_response())
}

/// `GET /repos/{o}/{r}/issues/comments?since=&before=`: every thread's
/// comments, oldest first.
pub async fn repo_comments(
    State(app): State<Arc<ApiState>>,
    RepoAccess {
        repo, principal, ..
    }: RepoAccess<Read>,
    base: Base,
    Query(query): Query<HashMap<String, String>>,
    ApiPage(page): ApiPage,
) -> Result<Response, AppError> {
    let since = rfc3339(&query, "since")?;
    let before = rfc3339(&query, "before")?;
    let url = base.api(&format!("repos/{repo}/issues/comments"));
    let filters = repeat(&query, &["since", "before"]);
    let (items, total) = shaped(&app, base, principal, move |s| {
        let found = s
            .app
            .meta
            .repo_comments(&repo, since.as_deref(), before.as_deref(), page)?;
        let items: Vec<_> = found
            .items
            .iter()
            .map(|(c, kind, number)| s.comment(&repo, (*kind, *number), c))
            .collect();
        Ok((items, found.total))
    })
    .await?;
    Ok(gitea_page(items, &url, &filters, page, total))
}

fn comment_id(text: &str) -> Result<u64, AppError> {
    text.parse::<u64>()
        .ok()
        .filter(|n| *n >= 1)
        .ok_or_else(|| AppError::bad_request(format!("{text:?} is not a comment id")))
}

/// `GET /repos/{o}/{r}/issues/comments/{id}`.
pub async fn get_comment(
    State(app): State<Arc<ApiState>>,
    RepoAccess {
        repo, principal, ..
    }: RepoAccess<Read>,
    base: Base,
    Path((_, _, id)): Path<(String, String, String)>,
) -> Result<Response, AppError> {
    let id = comment_id(&id)?;
    let shown = shaped(&app, base, principal, move |s| {
        let (comment, kind, number) = s.app.meta.comment_by_serial(&repo, id)?;
        Ok(s.comment(&repo, (kind, number), &comment))
    })
    .await?;
    Ok(Json(shown).into_response())
}

/// Gitea's `EditIssueCommentOption`.
#[derive(Debug, Deserialize)]
pub struct EditCommentOption {
    pub body: String,
    #[serde(default)]
    pub version: Option<u64>,
}

/// Edits (`Some`) or deletes comment `id`: by its author or an admin.
async fn rewrite(
    app: &Arc<ApiState>,
    principal: &Principal,
    repo: &ResolvedRepo,
    id: u64,
    (version, body): (Option<u64>, Option<String>),
) -> Result<(vole_meta::entity::Comment, ThreadKind, u64), AppError> {
    let (comment, kind, number) = app.meta.comment_by_serial(repo, id)?;
    let key = (number, comment.id);
    let version = version.unwrap_or(0);
    let rewritten = match kind {
        ThreadKind::Issue => {
            rewrite_comment::<Issue>(app, principal, repo.clone(), key, version, body).await?
        }
        ThreadKind::Change => {
            rewrite_comment::<Change>(app, principal, repo.clone(), key, version, body).await?
        }
    };
    Ok((rewritten, kind, number))
}

/// `PATCH /repos/{o}/{r}/issues/comments/{id}` (and the same under an
/// issue's number): 200 with the comment.
pub async fn edit_comment(
    State(app): State<Arc<ApiState>>,
    RepoAccess {
        repo, principal, ..
    }: RepoAccess<WriteMeta>,
    base: Base,
    Path(params): Path<Vec<(String, String)>>,
    payload: Result<Json<EditCommentOption>, JsonRejection>,
) -> Result<Response, AppError> {
    let id = comment_id(&path_param(&params, "id"))?;
    let option = body(payload)?;
    let (comment, kind, number) = rewrite(
        &app,
        &principal,
        &repo,
        id,
        (option.version, Some(option.body)),
    )
    .await?;
    let shown = shaped(&app, base, principal, move |s| {
        Ok(s.comment(&repo, (kind, number), &comment))
    })
    .await?;
    Ok(Json(shown).into_response())
}

/// `DELETE /repos/{o}/{r}/issues/comments/{id}`: 204.
pub async fn delete_comment(
    State(app): State<Arc<ApiState>>,
    RepoAccess {
        repo, principal, ..
    }: RepoAccess<WriteMeta>,
    Path(params): Path<Vec<(String, String)>>,
) -> Result<Response, AppError> {
    let id = comment_id(&path_param(&params, "id"))?;
    rewrite(&app, &principal, &repo, id, (None, None)).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

pub(crate) fn path_param(params: &[(String, String)], key: &str) -> String {
    params
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.clone())
        .unwrap_or_default()
}

// ---- labels ----

/// `GET /repos/{o}/{r}/labels`.
pub async fn list_labels(
    State(app): State<Arc<ApiState>>,
    RepoAccess {
        repo, principal, ..
    }: RepoAccess<Read>,
    base: Base,
    ApiPage(page): ApiPage,
) -> Result<Response, AppError> {
    let url = base.api(&format!("repos/{repo}/labels"));
    let (items, total) = shaped(&app, base, principal, move |s| {
        let labels = s.app.meta.labels(&repo)?;
        let total = labels.len();
        let items: Vec<_> = page
            .slice(labels.iter())
            .map(|l| s.label(&repo, l))
            .collect();
        Ok((items, total))
    })
    .await?;
    Ok(gitea_page(items, &url, "", page, total))
}

fn label_id(text: &str) -> Result<u64, AppError> {
    text.parse::<u64>()
        .ok()
        .filter(|n| *n >= 1)
        .ok_or_else(|| AppError::bad_request(format!("{text:?} is not a label id")))
}

/// `GET /repos/{o}/{r}/labels/{id}`.
pub async fn get_label(
    State(app): State<Arc<ApiState>>,
    RepoAccess {
        repo, principal, ..
    }: RepoAccess<Read>,
    base: Base,
    Path((_, _, id)): Path<(String, String, String)>,
) -> Result<Response, AppError> {
    let id = label_id(&id)?;
    let shown = shaped(&app, base, principal, move |s| {
        Ok(s.label(&repo, &s.app.meta.label(&repo, id)?))
    })
    .await?;
    Ok(Json(shown).into_response())
}

/// Gitea's `CreateLabelOption` / `EditLabelOption`.
#[derive(Debug, Deserialize)]
pub struct LabelOption {
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub color: Option<String>,
    #[serde(default)]
    pub description: Option<String>,
}

fn may_label(app: &ApiState, principal: &Principal, repo: &ResolvedRepo) -> Result<(), AppError> {
    app.access
        .check_label(principal, repo)
        .map_err(|d| AppError::denied(d, || "not found".into()))
}

/// `POST /repos/{o}/{r}/labels`: 201; by those who may push.
pub async fn create_label(
    State(app): State<Arc<ApiState>>,
    RepoAccess {
        repo, principal, ..
    }: RepoAccess<WriteMeta>,
    base: Base,
    payload: Result<Json<LabelOption>, JsonRejection>,
) -> Result<Response, AppError> {
    let option = body(payload)?;
    may_label(&app, &principal, &repo)?;
    app.quotas.meta_write(&principal)?;
    if option.color.is_none() {
        return Err(AppError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "a label needs a color, as #e11d21",
        ));
    }
    let put = LabelPut {
        name: option.name,
        color: option.color,
        description: option.description,
    };
    let name = repo.to_string();
    let label = blocking(&app, &repo.clone(), move |app| {
        app.meta.create_label(&repo, put)
    })
    .await?;
    let shown = super::objects::GiteaLabel::of(&base, &name, &label);
    Ok((StatusCode::CREATED, Json(shown)).into_response())
}

/// `PATCH /repos/{o}/{r}/labels/{id}`: by those who may push; a new name
/// is carried onto the issues and pull requests that have the label.
pub async fn edit_label(
    State(app): State<Arc<ApiState>>,
    RepoAccess {
        repo, principal, ..
    }: RepoAccess<WriteMeta>,
    base: Base,
    Path((_, _, id)): Path<(String, String, String)>,
    payload: Result<Json<LabelOption>, JsonRejection>,
) -> Result<Response, AppError> {
    let id = label_id(&id)?;
    let option = body(payload)?;
    may_label(&app, &principal, &repo)?;
    app.quotas.meta_write(&principal)?;
    let put = LabelPut {
        name: option.name,
        color: option.color,
        description: option.description,
    };
    let name = repo.to_string();
    let label = blocking(&app, &repo.clone(), move |app| {
        app.meta.edit_label(&repo, id, put)
    })
    .await?;
    Ok(Json(super::objects::GiteaLabel::of(&base, &name, &label)).into_response())
}

/// `DELETE /repos/{o}/{r}/labels/{id}`: 204; by those who may push.
pub async fn delete_label(
    State(app): State<Arc<ApiState>>,
    RepoAccess {
        repo, principal, ..
    }: RepoAccess<WriteMeta>,
    Path((_, _, id)): Path<(String, String, String)>,
) -> Result<Response, AppError> {
    let id = label_id(&id)?;
    may_label(&app, &principal, &repo)?;
    app.quotas.meta_write(&principal)?;
    blocking(&app, &repo.clone(), move |app| {
        app.meta.delete_label(&repo, id)
    })
    .await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// The label names issue or pull request `number` carries now.
fn labels_of(app: &ApiState, repo: &ResolvedRepo, number: u64) -> Result<Vec<String>, AppError> {
    Ok(match kind_of(app, repo, number)? {
        ThreadKind::Issue => app.meta.issue(repo, number)?.labels,
        ThreadKind::Change => app.meta.change(repo, number)?.labels,
    })
}

/// The labels of issue `number` as Gitea lists them.
async fn shown_labels(
    app: &Arc<ApiState>,
    base: Base,
    principal: Principal,
    repo: ResolvedRepo,
    number: u64,
) -> Result<Vec<super::objects::GiteaLabel>, AppError> {
    shaped(app, base, principal, move |s| {
        let names = labels_of(s.app, &repo, number)?;
        Ok(s.labels(&repo, &names))
    })
    .await
}

/// `GET /repos/{o}/{r}/issues/{n}/labels`.
pub async fn issue_labels(
    State(app): State<Arc<ApiState>>,
    RepoAccess {
        repo, principal, ..
    }: RepoAccess<Read>,
    base: Base,
    Path((_, _, number)): Path<(String, String, String)>,
) -> Result<Response, AppError> {
    let number = thread_number(&number)?;
    Ok(Json(shown_labels(&app, base, principal, repo, number).await?).into_response())
}

/// Gitea's `IssueLabelsOption`: label ids (or names).
#[derive(Debug, Deserialize)]
pub struct IssueLabelsOption {
    #[serde(default)]
    pub labels: Option<Vec<Value>>,
}

/// Sets the labels of issue `number` to `names`.
async fn set_labels(
    app: &Arc<ApiState>,
    principal: &Principal,
    repo: &ResolvedRepo,
    number: u64,
    names: Vec<String>,
) -> Result<(), AppError> {
    let option = EditIssueOption {
        labels: Some(names.into_iter().map(Value::String).collect()),
        ..EditIssueOption::default()
    };
    apply_edit(app, principal, repo, number, option)
        .await
        .map(drop)
}

/// `POST /repos/{o}/{r}/issues/{n}/labels` adds (`replace`: false) and
/// `PUT` replaces: 200 with the issue's labels.
async fn put_labels(
    app: Arc<ApiState>,
    access: RepoAccess<WriteMeta>,
    base: Base,
    number: &str,
    payload: Result<Json<IssueLabelsOption>, JsonRejection>,
    replace: bool,
) -> Result<Response, AppError> {
    let RepoAccess {
        repo, principal, ..
    } = access;
    let number = thread_number(number)?;
    let option = body(payload)?;
    let named = label_refs(&app, &repo, &option.labels.unwrap_or_default())?;
    let mut names = if replace {
        Vec::new()
    } else {
        labels_of(&app, &repo, number)?
    };
    for name in named {
        if !names.iter().any(|n| n.eq_ignore_ascii_case(&name)) {
            names.push(name);
        }
    }
    set_labels(&app, &principal, &repo, number, names).await?;
    Ok(Json(shown_labels(&app, base, principal, repo, number).await?).into_response())
}

pub async fn add_issue_labels(
    State(app): State<Arc<ApiState>>,
    access: RepoAccess<WriteMeta>,
    base: Base,
    Path((_, _, number)): Path<(String, String, String)>,
    payload: Result<Json<IssueLabelsOption>, JsonRejection>,
) -> Result<Response, AppError> {
    put_labels(app, access, base, &number, payload, false).await
}

pub async fn replace_issue_labels(
    State(app): State<Arc<ApiState>>,
    access: RepoAccess<WriteMeta>,
    base: Base,
    Path((_, _, number)): Path<(String, String, String)>,
    payload: Result<Json<IssueLabelsOption>, JsonRejection>,
) -> Result<Response, AppError> {
    put_labels(app, access, base, &number, payload, true).await
}

/// `DELETE /repos/{o}/{r}/issues/{n}/labels`: 204, every label off.
pub async fn clear_issue_labels(
    State(app): State<Arc<ApiState>>,
    RepoAccess {
        repo, principal, ..
    }: RepoAccess<WriteMeta>,
    Path((_, _, number)): Path<(String, String, String)>,
) -> Result<Response, AppError> {
    let number = thread_number(&number)?;
    set_labels(&app, &principal, &repo, number, Vec::new()).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// `DELETE /repos/{o}/{r}/issues/{n}/labels/{id}`: 204.
pub async fn remove_issue_label(
    State(app): State<Arc<ApiState>>,
    RepoAccess {
        repo, principal, ..
    }: RepoAccess<WriteMeta>,
    Path((_, _, number, id)): Path<(String, String, String, String)>,
) -> Result<Response, AppError> {
    let number = thread_number(&number)?;
    let id = label_id(&id)?;
    let label = app.meta.label(&repo, id)?;
    let names: Vec<String> = labels_of(&app, &repo, number)?
        .into_iter()
        .filter(|n| !n.eq_ignore_ascii_case(&label.name))
        .collect();
    set_labels(&app, &principal, &repo, number, names).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

// ---- pull requests ----

/// `GET /repos/{o}/{r}/pulls?state=&labels=`: newest first.
pub async fn list_pulls(
    State(app): State<Arc<ApiState>>,
    RepoAccess {
        repo, principal, ..
    }: RepoAccess<Read>,
    base: Base,
    Query(query): Query<HashMap<String, String>>,
    ApiPage(page): ApiPage,
) -> Result<Response, AppError> {
    let filter = ThreadQuery {
        kinds: ThreadKinds::Changes,
        state: thread_state(&query)?,
        labels: label_names(&query),
        author: query.get("poster").filter(|a| !a.is_empty()).cloned(),
        ..ThreadQuery::default()
    };
    let url = base.api(&format!("repos/{repo}/pulls"));
    let filters = repeat(&query, &["state", "labels", "poster"]);
    let (items, total) = shaped(&app, base, principal, move |s| {
        let found = s.app.meta.list_threads(&repo, &filter, page)?;
        let meta = s.repo_meta(&repo);
        let items = found
            .items
            .iter()
            .filter_map(|t| match t {
                vole_meta::index::AnyThread::Change(c) => Some(s.pull(&repo, &meta, c, false)),
                vole_meta::index::AnyThread::Issue(_) => None,
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok((items, found.total))
    })
    .await?;
    Ok(gitea_page(items, &url, &filters, page, total))
}

/// `GET /repos/{o}/{r}/pulls/{n}`: with whether it merges cleanly now.
pub async fn get_pull(
    State(app): State<Arc<ApiState>>,
    RepoAccess {
        repo, principal, ..
    }: RepoAccess<Read>,
    base: Base,
    Path((_, _, number)): Path<(String, String, String)>,
) -> Result<Response, AppError> {
    let number = thread_number(&number)?;
    let pull = shaped(&app, base, principal, move |s| {
        let change = s.app.meta.change(&repo, number)?;
        s.pull(&repo, &s.repo_meta(&repo), &change, true)
    })
    .await?;
    Ok(Json(pull).into_response())
}

/// Gitea's `CreatePullRequestOption`.
#[derive(Debug, Deserialize)]
pub struct CreatePullOption {
    pub head: String,
    pub base: String,
    #[serde(default)]
    pub title: Option<String>,
    #[serde(default)]
    pub body: Option<String>,
    #[serde(default)]
    pub labels: Option<Vec<Value>>,
}

/// `POST /repos/{o}/{r}/pulls`: 201 with the pull request; 409 when one
/// from `head` into `base` is open already.
pub async fn create_pull(
    State(app): State<Arc<ApiState>>,
    RepoAccess {
        repo, principal, ..
    }: RepoAccess<WriteMeta>,
    base: Base,
    payload: Result<Json<CreatePullOption>, JsonRejection>,
) -> Result<Response, AppError> {
    let option = body(payload)?;
    // `owner:branch` names a fork's branch in Gitea; vole has no forks, so
    // only this repo's owner may be named.
    let head = match option.head.split_once(':') {
        Some((owner, branch)) if owner.eq_ignore_ascii_case(repo.owner()) => branch.to_string(),
        Some(_) => {
            return Err(AppError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                format!(
                    "head {:?} names another repository's branch; vole has no forks: name a branch of {repo}",
                    option.head
                ),
            ));
        }
        None => option.head.clone(),
    };
    let labels = match &option.labels {
        Some(refs) if !refs.is_empty() => label_refs(&app, &repo, refs)?,
        _ => Vec::new(),
    };
    let duplicate = app
        .meta
        .list_threads(
            &repo,
            &ThreadQuery {
                kinds: ThreadKinds::Changes,
                state: ThreadState::Open,
                ..ThreadQuery::default()
            },
            Pagination::new(1, 100).ok_or_else(|| AppError::internal("a page", "1 of 100"))?,
        )?
        .items
        .into_iter()
        .find_map(|t| match t {
            vole_meta::index::AnyThread::Change(c)
                if c.source_branch == head && c.target_branch == option.base =>
            {
                Some(c.number)
            }
            _ => None,
        });
    if let Some(number) = duplicate {
        return Err(AppError::new(
            StatusCode::CONFLICT,
            format!(
                "pull request #{number} from {head} into {} is open already",
                option.base
            ),
        ));
    }
    let new = NewChange {
        title: option.title.unwrap_or_else(|| head.clone()),
        body: option.body.unwrap_or_default(),
        source_branch: head,
        target_branch: option.base,
        labels,
    };
    let change: Change = create_thread(&app, &principal, repo.clone(), new).await?;
    let pull = shaped(&app, base, principal, move |s| {
        s.pull(&repo, &s.repo_meta(&repo), &change, false)
    })
    .await?;
    Ok((StatusCode::CREATED, Json(pull)).into_response())
}

/// `PATCH /repos/{o}/{r}/pulls/{n}`: 201 with the pull request, as Gitea.
pub async fn edit_pull(
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
    if kind_of(&app, &repo, number)? != ThreadKind::Change {
        return Err(AppError::not_found(format!(
            "pull request #{number} not found"
        )));
    }
    apply_edit(&app, &principal, &repo, number, option).await?;
    let pull = shaped(&app, base, principal, move |s| {
        let change = s.app.meta.change(&repo, number)?;
        s.pull(&repo, &s.repo_meta(&repo), &change, false)
    })
    .await?;
    Ok((StatusCode::CREATED, Json(pull)).into_response())
}
