//! The metadata JSON API: the ACL and the settings of a repo, under
//! `/api/v1/repos/{owner}/{repo}/`, and the helpers the issues' and change
//! requests' handlers share with them ([`super::threads`]).
//! Handlers translate HTTP to [`vole_meta::MetaStore`] calls and back;
//! writes run on the blocking pool (they wait for the log's fsync), each
//! counted against its user's `--meta-write-rate` ([`super::quota`]).

use std::sync::Arc;

use axum::Json;
use axum::extract::rejection::JsonRejection;
use axum::extract::{ConnectInfo, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use super::ApiState;
use vole_access::{Principal, ResolvedRepo};
use vole_accounts::audit::{AuditEvent, AuditKind};
use vole_http::AppError;
use vole_http::RepoAccess;
use vole_http::repo_access::{Administer, Read};
use vole_meta::entity::{Acl, Settings};
use vole_meta::{AclPut, MetaError, SettingsPut};

/// A JSON body, or the reason it was refused (bad JSON, an unknown field,
/// a wrong content type, over the size cap), as a 4xx a person can act on.
pub(crate) fn body<T>(payload: Result<Json<T>, JsonRejection>) -> Result<T, AppError> {
    payload.map(|Json(value)| value).map_err(|rejection| {
        let status = rejection.status();
        let message = match (&rejection, status) {
            (_, StatusCode::PAYLOAD_TOO_LARGE) => {
                "request body is larger than the API accepts (see --api-body-limit)".to_string()
            }
            // Reading the body failed (the connection, not the JSON): its
            // error is the transport's, not the client's to read.
            (JsonRejection::BytesRejection(_), _) => {
                "the request body could not be read: the connection failed or its framing was malformed".to_string()
            }
            // What is wrong with the JSON, or its content type.
            _ => rejection.body_text(),
        };
        AppError::new(status, message)
    })
}

pub(crate) fn thread_number(text: &str) -> Result<u64, AppError> {
    text.parse::<u64>().ok().filter(|n| *n >= 1).ok_or_else(|| {
        AppError::bad_request(format!(
            "{text:?} is not an issue or change request number (a whole number from 1)"
        ))
    })
}

/// The repo the access decision was about is still the one under its
/// name: a repo deleted and created again meanwhile (a request body can
/// take long to arrive after the decision) is another repo, answered as a
/// missing one, and nothing is written to it.
pub fn still_the_decided_repo(app: &ApiState, repo: &ResolvedRepo) -> Result<(), AppError> {
    let now = app.meta.incarnation(repo).map_err(AppError::from)?;
    if now.as_ref().map(|i| i.id()) != repo.incarnation.as_ref().map(|i| i.id()) {
        return Err(AppError::not_found(format!("repository {repo} not found")));
    }
    Ok(())
}

/// Runs a store write of `repo`'s on the blocking pool, once it is still
/// the repo the access decision was about.
pub(crate) async fn blocking<T: Send + 'static>(
    app: &Arc<ApiState>,
    repo: &ResolvedRepo,
    f: impl FnOnce(&ApiState) -> Result<T, MetaError> + Send + 'static,
) -> Result<T, AppError> {
    let (app, repo) = (app.clone(), repo.clone());
    vole_http::spawn_blocking(move || {
        still_the_decided_repo(&app, &repo)?;
        f(&app).map_err(AppError::from)
    })
    .await
    .map_err(|e| AppError::internal("metadata write task failed", e))?
}

// ---- ACL and settings ----

pub async fn get_acl(
    State(app): State<Arc<ApiState>>,
    RepoAccess { repo: name, .. }: RepoAccess<Administer>,
) -> Result<Response, AppError> {
    // Who the members are is the repo's admins' to know.
    Ok(Json(app.meta.acl(&name)?).into_response())
}

pub async fn put_acl(
    State(app): State<Arc<ApiState>>,
    RepoAccess {
        repo: name,
        principal,
        ..
    }: RepoAccess<Administer>,
    ConnectInfo(peer): ConnectInfo<std::net::SocketAddr>,
    payload: Result<Json<AclPut>, JsonRejection>,
) -> Result<Response, AppError> {
    let put = body(payload)?;
    let acl = write_acl(&app, &principal, name, put, &peer.ip().to_string()).await?;
    Ok(Json(acl).into_response())
}

/// Stores a repo's ACL as `principal` (an admin of it, which the caller's
/// extractor checked) asks from `client`: counted in their metadata
/// writes, an ownership change and the members checked by `access`,
/// audited. The one path of an ACL change, for the API and the web's
/// settings page.
pub async fn write_acl(
    app: &Arc<ApiState>,
    principal: &Principal,
    name: ResolvedRepo,
    put: AclPut,
    client: &str,
) -> Result<Acl, AppError> {
    app.quotas.meta_write(principal)?;
    // The shape first (a malformed name is said as such), then who is
    // named: an owner change by the owner's hand, members who are users.
    vole_meta::entity::check_members(&put.members).map_err(MetaError::from)?;
    use vole_access::AclChangeRefused as Refused;
    app.access
        .check_acl_change(principal, &name, &put, &app.control.accounts)
        .map_err(|refused| match refused {
            Refused::Forbidden(why) => AppError::new(StatusCode::FORBIDDEN, why),
            Refused::NoSuchUser(why) => AppError::new(StatusCode::UNPROCESSABLE_ENTITY, why),
            Refused::Meta(e) => AppError::from(e),
            Refused::Accounts(e) => AppError::unavailable("cannot look a user up", &e),
        })?;
    let actor = principal.name().to_string();
    let client = client.to_string();
    blocking(app, &name.clone(), move |app| {
        let acl = app.meta.put_acl(&name, put)?;
        let event = AuditEvent::new(
            AuditKind::AclChanged,
            &actor,
            &name.to_string(),
            &client,
            format!(
                "visibility={} members={} version={}",
                serde_json::to_value(acl.visibility)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_string))
                    .unwrap_or_default(),
                acl.members.len(),
                acl.version
            ),
        );
        // The change is made; an audit log that cannot take its record
        // has failed, and the caller hears so (503).
        app.control
            .accounts
            .audit(event)
            .map_err(|e| MetaError::Unavailable(vole_meta::Unavailable::Audit(Arc::new(e))))?;
        Ok(acl)
    })
    .await
}

pub async fn get_settings(
    State(app): State<Arc<ApiState>>,
    RepoAccess { repo: name, .. }: RepoAccess<Read>,
) -> Result<Response, AppError> {
    Ok(Json(read_settings(&app, &name)?).into_response())
}

/// A repo's settings, the default branch as HEAD has it (HEAD is the one
/// record of the default branch).
pub fn read_settings(app: &ApiState, name: &ResolvedRepo) -> Result<Settings, AppError> {
    let mut settings = app.meta.settings(name)?;
    // The description a repo was created with lives in git's file until
    // the settings first store one.
    if settings.version == 0 {
        settings.description = app.control.repos.description(name);
    }
    if let Some(head) = vole_git::repos::head_branch(&app.control.repos.path(name)) {
        settings.default_branch = head;
    }
    Ok(settings)
}

pub async fn put_settings(
    State(app): State<Arc<ApiState>>,
    RepoAccess {
        repo: name,
        principal,
        ..
    }: RepoAccess<Administer>,
    ConnectInfo(peer): ConnectInfo<std::net::SocketAddr>,
    payload: Result<Json<SettingsPut>, JsonRejection>,
) -> Result<Response, AppError> {
    let put = body(payload)?;
    let settings = write_settings(&app, &principal, name, put, &peer.ip().to_string()).await?;
    Ok(Json(settings).into_response())
}

/// Stores a repo's settings as `principal` (an admin of it) asks from
/// `client`, counted in their metadata writes; a new default branch moves
/// HEAD, recorded in the ref log. The one path of a settings change, for
/// the API and the web's settings page.
pub async fn write_settings(
    app: &Arc<ApiState>,
    principal: &Principal,
    name: ResolvedRepo,
    put: SettingsPut,
    client: &str,
) -> Result<Settings, AppError> {
    app.quotas.meta_write(principal)?;
    // The default branch is HEAD: it may name only a branch that exists
    // (checked before the settings are stored), and HEAD moves once they
    // are, recorded in the ref log.
    let head = vole_git::repos::head_branch(&app.control.repos.path(&name));
    let moves_head = head.as_deref() != Some(put.default_branch.as_str());
    if moves_head
        && !app.control.recorder.has_ref(
            &name.to_string(),
            &format!("refs/heads/{}", put.default_branch),
        )
    {
        return Err(super::repos::lifecycle_error(
            vole_control::LifecycleError::NoSuchBranch {
                repo: name.name,
                branch: put.default_branch,
            },
        ));
    }
    let target = name.clone();
    let mut settings = blocking(app, &name.clone(), move |app| {
        app.meta.put_settings(&name, put)
    })
    .await?;
    // What the pages and listings show (git's `description` file) follows
    // the stored settings.
    let (control, described, text) = (
        app.control.clone(),
        target.clone(),
        settings.description.clone(),
    );
    vole_http::spawn_blocking(move || control.repos.set_description(&described, &text))
        .await
        .map_err(|e| AppError::internal("description task failed", e))?
        .map_err(|e| AppError::internal("the description could not be written", e))?;
    if moves_head {
        let branch = settings.default_branch.clone();
        let control = app.control.clone();
        let actor = principal.name().to_string();
        let client = client.to_string();
        vole_http::spawn_blocking(move || {
            control.set_default_branch(
                &target,
                &branch,
                vole_control::Actor {
                    name: &actor,
                    client: &client,
                },
            )
        })
        .await
        .map_err(|e| AppError::internal("moving HEAD failed", e))?
        .map_err(super::repos::lifecycle_error)?;
    } else if let Some(head) = head {
        settings.default_branch = head;
    }
    Ok(settings)
}
