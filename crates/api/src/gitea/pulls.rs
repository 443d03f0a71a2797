//! Pull requests at Gitea's paths: listed, read (with its test merge and
//! diff counts), made (409 for a second open one of the same branches),
//! edited. Their merge is `crate::pulls`'.

use std::collections::HashMap;
use std::sync::Arc;

use axum::Json;
use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::Value;

use super::issues::*;
use super::objects::Base;
use crate::ApiState;
use crate::meta::{body, thread_number};
use crate::threads::create_thread;
use vole_http::page::ApiPage;
use vole_http::repo_access::{Read, WriteMeta};
use vole_http::{AppError, RepoAccess};
use vole_meta::NewChange;
use vole_meta::entity::{Change, ThreadKind};
use vole_meta::index::{ThreadKinds, ThreadQuery};

/// `GET /repos/{o}/{r}/pulls?state=&labels=&poster=`: newest first;
/// `labels` repeated, each a label's id as Gitea's (a name is taken too),
/// any of which a pull request has.
pub async fn list_pulls(
    State(app): State<Arc<ApiState>>,
    RepoAccess {
        repo, principal, ..
    }: RepoAccess<Read>,
    base: Base,
    Query(pairs): Query<Vec<(String, String)>>,
    ApiPage(page): ApiPage,
) -> Result<Response, AppError> {
    let wanted = filter_labels(
        pairs
            .iter()
            .filter(|(key, _)| key == "labels" || key == "labels[]")
            .flat_map(|(_, value)| value.split(','))
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .map(str::to_string)
            .collect(),
    )?;
    let query: HashMap<String, String> = pairs.into_iter().collect();
    let mut filter = ThreadQuery {
        kinds: ThreadKinds::Changes,
        state: thread_state(&query),
        author: query.get("poster").filter(|a| !a.is_empty()).cloned(),
        ..ThreadQuery::default()
    };
    let url = base.api(&format!("repos/{repo}/pulls"));
    let mut filters = repeat(&query, &["state", "poster"]);
    for label in &wanted {
        let label =
            percent_encoding::utf8_percent_encode(label, percent_encoding::NON_ALPHANUMERIC);
        filters.push_str(&format!(
            "{}labels={label}",
            if filters.is_empty() { "" } else { "&" }
        ));
    }
    // A branch's tip is read for each (a file): on the blocking pool, and
    // under a read slot when a filter scans the threads.
    let scans = !wanted.is_empty() || filter.author.is_some();
    let run = move |s: &crate::gitea::shape::Shaper<'_>| {
        filter.labels = label_ids_to_names(&s.app.meta.labels(&repo)?, &wanted);
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
    };
    let (items, total) = if scans {
        shaped_reading(&app, base, principal, run).await?
    } else {
        shaped_blocking(&app, base, principal, run).await?
    };
    Ok(gitea_page(items, &url, &filters, page, total))
}

/// The names of the labels `wanted` names by id (or by name). An id no
/// label has matches nothing, as Gitea's filter by ids does: it becomes
/// a name no label can have (names hold no control characters).
fn label_ids_to_names(labels: &[vole_meta::numbered::Label], wanted: &[String]) -> Vec<String> {
    wanted
        .iter()
        .map(|w| match w.parse::<u64>() {
            Ok(id) => labels
                .iter()
                .find(|l| l.serial == id)
                .or_else(|| labels.iter().find(|l| l.name == *w))
                .map_or_else(|| "\u{0}".to_string(), |l| l.name.clone()),
            Err(_) => w.clone(),
        })
        .collect()
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
    // Gitea's `/pulls/{n}.diff` and `.patch`: the web's, which streams
    // them (a relative redirect: the client stays on its scheme and host).
    for suffix in [".diff", ".patch"] {
        if let Some(n) = number.strip_suffix(suffix) {
            let n = thread_number(n)?;
            let mut response = StatusCode::TEMPORARY_REDIRECT.into_response();
            let location = format!("/{repo}/-/pulls/{n}{suffix}");
            let value = axum::http::HeaderValue::from_str(&location)
                .map_err(|_| AppError::internal("a pull request's diff location", location))?;
            response
                .headers_mut()
                .insert(axum::http::header::LOCATION, value);
            return Ok(response);
        }
    }
    let number = thread_number(&number)?;
    let pull = shaped_reading(&app, base, principal, move |s| {
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
    let new = NewChange {
        title: option.title.unwrap_or_else(|| head.clone()),
        body: option.body.unwrap_or_default(),
        source_branch: head,
        target_branch: option.base,
        labels,
    };
    let change: Change = create_thread(&app, &principal, repo.clone(), new).await?;
    let pull = shaped_blocking(&app, base, principal, move |s| {
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
    let pull = shaped_blocking(&app, base, principal, move |s| {
        let change = s.app.meta.change(&repo, number)?;
        s.pull(&repo, &s.repo_meta(&repo), &change, false)
    })
    .await?;
    Ok((StatusCode::CREATED, Json(pull)).into_response())
}
