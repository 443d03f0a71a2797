//! A pull request's merge, at Gitea's path and with Gitea's body:
//! `POST .../pulls/{n}/merge` (`Do` or `do`: `merge`, `fast-forward-only`,
//! `squash`; `head_commit_id`; `merge_title_field`,
//! `merge_message_field`) answers 200 when merged, 405 when it cannot be
//! merged (not open, a method the repo does not offer, nothing to merge,
//! no fast-forward), 409 on a conflict or a moved branch, 403 when the
//! user may not merge or the target is protected against them; and
//! `GET .../pulls/{n}/merge`: 204 when merged, 404 when not. A merge is
//! answered with the merged pull request in Gitea's shape.
//!
//! The merge itself is `vole_control::merge`'s, which the web's merge
//! form calls too: one path for both.

use std::sync::Arc;

use axum::Json;
use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;

use crate::ApiState;
use crate::meta::{body, thread_number};
use vole_access::{Principal, ResolvedRepo};
pub use vole_control::merge::{MergeAsk, MergeRefused, Preview, Tips};
use vole_http::repo_access::{Read, WriteMeta};
use vole_http::{AppError, RepoAccess};
use vole_meta::entity::{Change, ChangeState, MergeMethod};

/// Gitea's `MergePullRequestOption`; fields vole does not use (for
/// example `delete_branch_after_merge`) are accepted and ignored, as a
/// Gitea client sends them.
#[derive(Debug, Deserialize)]
pub struct MergeOption {
    #[serde(rename = "Do", alias = "do")]
    pub method: String,
    #[serde(default)]
    pub head_commit_id: Option<String>,
    #[serde(default, rename = "MergeTitleField", alias = "merge_title_field")]
    pub title: Option<String>,
    #[serde(default, rename = "MergeMessageField", alias = "merge_message_field")]
    pub message: Option<String>,
}

/// A refused merge as the response it is.
pub fn refusal(refused: MergeRefused) -> AppError {
    let status = match refused {
        MergeRefused::Denied(denied) => return AppError::denied(denied, || "not found".into()),
        MergeRefused::Meta(e) => return e.into(),
        MergeRefused::Failed(_) => return AppError::internal("a merge failed", &refused),
        MergeRefused::NotOpen(..)
        | MergeRefused::MethodOff(_)
        | MergeRefused::NoBranch(_)
        | MergeRefused::NotFastForward { .. }
        | MergeRefused::Unrelated
        | MergeRefused::NothingToMerge => StatusCode::METHOD_NOT_ALLOWED,
        MergeRefused::Moved { .. } | MergeRefused::Conflicts(_) | MergeRefused::Busy(_) => {
            StatusCode::CONFLICT
        }
        MergeRefused::Protected(_) => StatusCode::FORBIDDEN,
        MergeRefused::Held(_) => StatusCode::SERVICE_UNAVAILABLE,
    };
    AppError::new(status, refused.to_string())
}

/// What merging `change` now would give (the web's merge box), within
/// `deadline`. Blocking.
pub fn preview(
    app: &ApiState,
    repo: &ResolvedRepo,
    change: &Change,
    deadline: std::time::Duration,
) -> Result<Preview, MergeRefused> {
    app.control.preview(repo, change, deadline)
}

/// Where `change`'s branches are. Blocking.
pub fn tips(app: &ApiState, repo: &ResolvedRepo, change: &Change) -> Result<Tips, MergeRefused> {
    app.control.tips(repo, change)
}

/// A merge by `principal` of pull request `ask.number` (who has
/// `WriteMeta` on the repo; `access` decides who may merge).
pub async fn merge_as(
    app: &Arc<ApiState>,
    principal: &Principal,
    name: &ResolvedRepo,
    ask: MergeAsk,
    client: &str,
) -> Result<Change, AppError> {
    app.quotas.meta_write(principal)?;
    app.control
        .merge_pull(principal, name, ask, client)
        .await
        .map_err(refusal)
}

/// `POST /api/v1/repos/{o}/{r}/pulls/{n}/merge`.
pub async fn merge(
    State(app): State<Arc<ApiState>>,
    RepoAccess {
        repo: name,
        principal,
        ..
    }: RepoAccess<WriteMeta>,
    base: crate::gitea::objects::Base,
    Path((_, _, number)): Path<(String, String, String)>,
    request: axum::extract::Request,
) -> Result<Response, AppError> {
    let number = thread_number(&number)?;
    let client = vole_http::auth::client_address(request.extensions()).to_string();
    let payload: Result<Json<MergeOption>, JsonRejection> =
        <Json<MergeOption> as axum::extract::FromRequest<()>>::from_request(request, &()).await;
    let option = body(payload)?;
    let method = MergeMethod::parse(&option.method).ok_or_else(|| {
        AppError::new(
            StatusCode::METHOD_NOT_ALLOWED,
            format!(
                "merge method {:?} is not one vole does (merge, fast-forward-only, squash)",
                option.method
            ),
        )
    })?;
    let ask = MergeAsk {
        number,
        method: Some(method),
        head: option.head_commit_id.filter(|h| !h.trim().is_empty()),
        target: None,
        target_branch: None,
        title: option.title.filter(|t| !t.trim().is_empty()),
        message: option.message,
    };
    let merged = merge_as(&app, &principal, &name, ask, &client).await?;
    // Gitea answers an empty 200; vole the merged pull request, which
    // Gitea's clients ignore.
    let shown = crate::gitea::issues::shaped_blocking(&app, base, principal, move |s| {
        s.pull(&name, &s.repo_meta(&name), &merged, false)
    })
    .await?;
    Ok(Json(shown).into_response())
}

/// `GET /api/v1/repos/{o}/{r}/pulls/{n}/merge`: 204 when merged, 404 when
/// not (or when there is no such pull request).
pub async fn is_merged(
    State(app): State<Arc<ApiState>>,
    RepoAccess { repo: name, .. }: RepoAccess<Read>,
    Path((_, _, number)): Path<(String, String, String)>,
) -> Result<Response, AppError> {
    let number = thread_number(&number)?;
    // On the blocking pool: the pull request is read whole (its body
    // from git).
    let meta = app.meta.clone();
    let found = vole_http::spawn_blocking(move || meta.change(&name, number))
        .await
        .map_err(|e| AppError::internal("a pull request read failed", e))?;
    match found {
        Ok(change) if change.state == ChangeState::Merged => {
            Ok(StatusCode::NO_CONTENT.into_response())
        }
        Ok(_) => Err(AppError::not_found(format!(
            "pull request {number} is not merged"
        ))),
        Err(e) => Err(e.into()),
    }
}
