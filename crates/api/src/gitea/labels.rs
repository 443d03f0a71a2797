//! Labels at Gitea's paths: the repo's (listed, read; made, edited and
//! deleted by those who may push) and an issue's or pull request's
//! (listed, added, replaced, removed).

use std::sync::Arc;

use axum::Json;
use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::Value;

use super::issues::*;
use super::objects::Base;
use crate::ApiState;
use crate::meta::{blocking, body, thread_number};
use vole_access::{Principal, ResolvedRepo};
use vole_http::page::ApiPage;
use vole_http::repo_access::{Read, WriteMeta};
use vole_http::{AppError, RepoAccess};
use vole_meta::entity::ThreadKind;
use vole_meta::labels::LabelPut;

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

/// `GET /repos/{o}/{r}/labels/{id}`.
pub async fn get_label(
    State(app): State<Arc<ApiState>>,
    RepoAccess {
        repo, principal, ..
    }: RepoAccess<Read>,
    base: Base,
    Path((_, _, id)): Path<(String, String, String)>,
) -> Result<Response, AppError> {
    let id = path_id(&id, "label")?;
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
    let id = path_id(&id, "label")?;
    let option = body(payload)?;
    may_label(&app, &principal, &repo)?;
    app.quotas.meta_write(&principal)?;
    // A rename rewrites every thread that has the label: one more write
    // of the caller's rate per 50 of them.
    if option.name.is_some() {
        for _ in 0..app.meta.label_use(&repo, id)?.div_ceil(50) {
            app.quotas.meta_write(&principal)?;
        }
    }
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
    let id = path_id(&id, "label")?;
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
    Ok(versioned_labels_of(app, repo, number)?.0)
}

/// The same, with the version of the document that carries them.
fn versioned_labels_of(
    app: &ApiState,
    repo: &ResolvedRepo,
    number: u64,
) -> Result<(Vec<String>, u64), AppError> {
    Ok(match kind_of(app, repo, number)? {
        ThreadKind::Issue => {
            let issue = app.meta.issue(repo, number)?;
            (issue.labels, issue.version)
        }
        ThreadKind::Change => {
            let change = app.meta.change(repo, number)?;
            (change.labels, change.version)
        }
    })
}

/// Tries of a label edit that another write to the same issue beat.
const LABEL_EDIT_TRIES: usize = 8;

/// Edits the labels of issue `number` with `edit` (from the names it
/// carries to the names it will): read, edited and written against the
/// version read, again when another write came between, so that two
/// clients adding a label each at once both land.
async fn edit_labels(
    app: &Arc<ApiState>,
    principal: &Principal,
    repo: &ResolvedRepo,
    number: u64,
    edit: impl Fn(Vec<String>) -> Vec<String>,
) -> Result<(), AppError> {
    for attempt in 1..=LABEL_EDIT_TRIES {
        let (names, version) = versioned_labels_of(app, repo, number)?;
        let option = EditIssueOption {
            label_names: Some(edit(names)),
            version: Some(version),
            ..EditIssueOption::default()
        };
        match apply_edit(app, principal, repo, number, option).await {
            Err(e) if e.status() == StatusCode::CONFLICT && attempt < LABEL_EDIT_TRIES => {}
            done => return done.map(drop),
        }
    }
    unreachable!("the last try returns")
}

/// The labels of issue `number` as Gitea lists them.
async fn shown_labels(
    app: &Arc<ApiState>,
    base: Base,
    principal: Principal,
    repo: ResolvedRepo,
    number: u64,
) -> Result<Vec<super::objects::GiteaLabel>, AppError> {
    // On the blocking pool: the thread is read whole (its body from git).
    shaped_blocking(app, base, principal, move |s| {
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
    edit_labels(&app, &principal, &repo, number, |carried| {
        let mut names = if replace { Vec::new() } else { carried };
        for name in &named {
            if !names.iter().any(|n| n.eq_ignore_ascii_case(name)) {
                names.push(name.clone());
            }
        }
        names
    })
    .await?;
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
    edit_labels(&app, &principal, &repo, number, |_| Vec::new()).await?;
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
    let id = path_id(&id, "label")?;
    let label = app.meta.label(&repo, id)?;
    edit_labels(&app, &principal, &repo, number, |carried| {
        carried
            .into_iter()
            .filter(|n| !n.eq_ignore_ascii_case(&label.name))
            .collect()
    })
    .await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}
