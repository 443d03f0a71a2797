//! A repo's branches at Gitea's paths (`GET .../branches`,
//! `.../branches/{name}`), each with its head commit as Gitea's
//! `PayloadCommit`. Read with gix (replacement refs not followed), on the
//! blocking pool; a list reads each listed branch's commit only.

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

use super::issues::{gitea_page, shaped_reading};
use super::objects::Base;
use super::shape::Shaper;
use crate::ApiState;
use vole_http::page::ApiPage;
use vole_http::repo_access::Read;
use vole_http::{AppError, RepoAccess};

/// Gitea's `PayloadUser`.
#[derive(Debug, Clone, Serialize)]
pub struct PayloadUser {
    pub name: String,
    pub email: String,
    pub username: String,
}

/// Gitea's `PayloadCommit`.
#[derive(Debug, Clone, Serialize)]
pub struct PayloadCommit {
    pub id: String,
    pub message: String,
    pub url: String,
    pub author: PayloadUser,
    pub committer: PayloadUser,
    pub verification: Option<serde_json::Value>,
    pub timestamp: String,
    pub added: Vec<String>,
    pub removed: Vec<String>,
    pub modified: Vec<String>,
}

/// Gitea's `Branch`.
#[derive(Debug, Clone, Serialize)]
pub struct GiteaBranch {
    pub name: String,
    pub commit: PayloadCommit,
    pub protected: bool,
    pub required_approvals: u64,
    pub enable_status_check: bool,
    pub status_check_contexts: Vec<String>,
    pub user_can_push: bool,
    pub user_can_merge: bool,
    pub effective_branch_protection_name: String,
}

fn read_error(e: impl std::fmt::Display) -> AppError {
    AppError::internal("the repository could not be read", e.to_string())
}

/// The branches of `repo`, sorted by name.
fn branch_names(repo: &gix::Repository) -> Result<Vec<String>, AppError> {
    let platform = repo.references().map_err(read_error)?;
    let mut names: Vec<String> = platform
        .local_branches()
        .map_err(read_error)?
        .filter_map(Result::ok)
        .map(|r| r.name().shorten().to_string())
        .collect();
    names.sort();
    Ok(names)
}

fn person(signature: gix::actor::SignatureRef<'_>) -> PayloadUser {
    PayloadUser {
        name: signature.name.to_string(),
        email: signature.email.to_string(),
        username: String::new(),
    }
}

/// Branch `name` of `repo` as Gitea shows it; `None` when there is none.
fn branch(
    s: &Shaper<'_>,
    name_of_repo: &vole_git::repos::RepoName,
    repo: &gix::Repository,
    name: &str,
) -> Result<Option<GiteaBranch>, AppError> {
    // One reading of a name for every surface: a name git could not have
    // made, or too long for a file name, names nothing.
    let Some(reference) =
        vole_git::revision::find_ref(repo, &format!("refs/heads/{name}")).map_err(read_error)?
    else {
        return Ok(None);
    };
    let id = reference
        .into_fully_peeled_id()
        .map_err(read_error)?
        .detach();
    // A branch at something that is no commit (a tree or a blob pushed
    // there) is not shown as one.
    let Ok(commit) = repo.find_commit(id) else {
        return Ok(None);
    };
    let decoded = commit.decode().map_err(read_error)?;
    let message = super::issues::cut_message(decoded.message.to_string());
    let author = decoded.author().map_err(read_error)?;
    let committer = decoded.committer().map_err(read_error)?;
    let timestamp = vole_stdx::time::seconds(committer.time().map_or(0, |t| t.seconds));
    let settings = s.app.meta.settings(name_of_repo)?;
    let protected = settings.protected_branches.iter().any(|p| p == name);
    let permission = s.permission(name_of_repo);
    let may_push =
        permission.push && (!protected || !settings.protected_admins_only || permission.admin);
    let full = name_of_repo.to_string();
    Ok(Some(GiteaBranch {
        name: name.to_string(),
        commit: PayloadCommit {
            id: id.to_string(),
            message,
            url: s.base.html(&format!("{full}/-/commit/{id}")),
            author: person(author),
            committer: person(committer),
            verification: None,
            timestamp: super::objects::time(&timestamp),
            added: Vec::new(),
            removed: Vec::new(),
            modified: Vec::new(),
        },
        protected,
        required_approvals: 0,
        enable_status_check: false,
        status_check_contexts: Vec::new(),
        user_can_push: may_push,
        user_can_merge: may_push,
        effective_branch_protection_name: if protected {
            name.to_string()
        } else {
            String::new()
        },
    }))
}

fn open(s: &Shaper<'_>, repo: &vole_access::ResolvedRepo) -> Result<gix::Repository, AppError> {
    vole_git::open_gix(&s.app.repos.path(repo)).map_err(read_error)
}

/// `GET /repos/{o}/{r}/branches`.
pub async fn list(
    State(app): State<Arc<ApiState>>,
    RepoAccess {
        repo, principal, ..
    }: RepoAccess<Read>,
    base: Base,
    ApiPage(page): ApiPage,
) -> Result<Response, AppError> {
    let url = base.api(&format!("repos/{repo}/branches"));
    let (items, total) = shaped_reading(&app, base, principal, move |s| {
        let git = open(s, &repo)?;
        let names = branch_names(&git)?;
        let total = names.len();
        let mut items = Vec::new();
        for name in page.slice(names.iter()) {
            if let Some(shown) = branch(s, &repo, &git, name)? {
                items.push(shown);
            }
        }
        Ok((items, total))
    })
    .await?;
    Ok(gitea_page(items, &url, "", page, total))
}

/// `GET /repos/{o}/{r}/branches/{name}` (a name may hold slashes).
pub async fn get(
    State(app): State<Arc<ApiState>>,
    RepoAccess {
        repo, principal, ..
    }: RepoAccess<Read>,
    base: Base,
    Path((_, _, name)): Path<(String, String, String)>,
) -> Result<Response, AppError> {
    let shown = shaped_reading(&app, base, principal, move |s| {
        let git = open(s, &repo)?;
        branch(s, &repo, &git, &name)?
            .ok_or_else(|| AppError::not_found(format!("branch {name:?} not found")))
    })
    .await?;
    Ok(Json(shown).into_response())
}
