//! Comments at Gitea's paths: an issue's or pull request's (listed,
//! added), the repo's (listed), one by its numeric id (read, edited,
//! deleted by its author or an admin).

use std::collections::HashMap;
use std::sync::Arc;

use axum::Json;
use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;

use super::issues::*;
use super::objects::Base;
use crate::ApiState;
use crate::meta::{body, thread_number};
use crate::threads::{comment_on, rewrite_comment};
use vole_access::{Principal, ResolvedRepo};
use vole_http::page::ApiPage;
use vole_http::repo_access::{Read, WriteMeta};
use vole_http::{AppError, RepoAccess};
use vole_meta::NewComment;
use vole_meta::entity::{Change, Issue, ThreadKind};

/// `GET /repos/{o}/{r}/issues/{n}/comments?since=&before=`: oldest first,
/// every one (at most [`MAX_LISTED_COMMENTS`] and [`MAX_LISTED_BYTES`] of
/// bodies; `X-Total-Count` says how many there are) unless a page is
/// asked for.
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
    // Gitea's list is every comment (only `since` and `before` narrow
    // it); a client that asks for a page gets one.
    let paged = ["page", "limit", "per_page"]
        .iter()
        .any(|k| query.contains_key(*k));
    let url = base.api(&format!("repos/{repo}/issues/{number}/comments"));
    let (items, total) = shaped_blocking(&app, base, principal, move |s| {
        let kind = kind_of(s.app, &repo, number)?;
        let window = vole_meta::labels::CommentWindow {
            since: since.as_deref(),
            before: before.as_deref(),
            skip: if paged { page.offset() } else { 0 },
            take: if paged {
                page.per_page()
            } else {
                MAX_LISTED_COMMENTS
            },
            max_bytes: MAX_LISTED_BYTES,
        };
        let (kept, total) = s.app.meta.said_comments(&repo, kind, number, &window)?;
        let shown: Vec<_> = kept
            .iter()
            .map(|c| s.comment(&repo, (kind, number), c))
            .collect();
        Ok((shown, total))
    })
    .await?;
    if paged {
        Ok(gitea_page(items, &url, "", page, total))
    } else {
        let mut response = Json(items).into_response();
        response
            .headers_mut()
            .insert("x-total-count", axum::http::HeaderValue::from(total));
        Ok(response)
    }
}

/// The most comments of one thread an unpaged list answers with.
pub const MAX_LISTED_COMMENTS: usize = 1000;

/// The most bytes of comment bodies one list answers with (a list holds
/// one comment at least): 1,000 comments of 256 KiB would be 256 MB.
pub const MAX_LISTED_BYTES: usize = 4 * 1024 * 1024;

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
    // Shaped from the comment in hand (no body to read back): on the
    // async worker.
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
    let (items, total) = shaped_blocking(&app, base, principal, move |s| {
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

/// `GET /repos/{o}/{r}/issues/comments/{id}`.
pub async fn get_comment(
    State(app): State<Arc<ApiState>>,
    RepoAccess {
        repo, principal, ..
    }: RepoAccess<Read>,
    base: Base,
    Path((_, _, id)): Path<(String, String, String)>,
) -> Result<Response, AppError> {
    let id = path_id(&id, "comment")?;
    let shown = shaped_blocking(&app, base, principal, move |s| {
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
    on: Option<u64>,
) -> Result<(vole_meta::entity::Comment, ThreadKind, u64), AppError> {
    let (comment, kind, number) = app.meta.comment_by_serial(repo, id)?;
    // Under an issue's number (Gitea's older path): that issue's only.
    if on.is_some_and(|on| on != number) {
        return Err(AppError::not_found(format!("comment {id} not found")));
    }
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
    let id = path_id(&path_param(&params, "id"), "comment")?;
    let option = body(payload)?;
    let (comment, kind, number) = rewrite(
        &app,
        &principal,
        &repo,
        id,
        (option.version, Some(option.body)),
        on_thread(&params)?,
    )
    .await?;
    // Shaped from the comment in hand (no body to read back): on the
    // async worker.
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
    let id = path_id(&path_param(&params, "id"), "comment")?;
    rewrite(
        &app,
        &principal,
        &repo,
        id,
        (None, None),
        on_thread(&params)?,
    )
    .await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// The issue number a comment's path names, if it names one.
fn on_thread(params: &[(String, String)]) -> Result<Option<u64>, AppError> {
    params
        .iter()
        .find(|(k, _)| k == "number")
        .map(|(_, n)| thread_number(n))
        .transpose()
}

pub(crate) fn path_param(params: &[(String, String)], key: &str) -> String {
    params
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.clone())
        .unwrap_or_default()
}
