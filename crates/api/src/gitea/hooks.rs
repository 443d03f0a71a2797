//! A repo's webhooks at Gitea's paths, kept by its admins, and the
//! server's (`/admin/hooks`, every repo's events), kept by server admins:
//! listed, made, read, edited, deleted. A hook's URL must name an address the server's
//! guard lets a hook reach (`vole-webhooks`), checked after resolving it,
//! as each delivery checks it again. The secret is never shown.

use std::collections::HashMap;
use std::sync::Arc;

use axum::Json;
use axum::extract::rejection::JsonRejection;
use axum::extract::{Extension, Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::issues::path_id;
use super::objects::time;
use crate::ApiState;
use crate::meta::{blocking, body};
use vole_access::{Principal, ResolvedRepo};
use vole_http::repo_access::Administer;
use vole_http::{AppError, RepoAccess};
use vole_meta::webhooks::{Hook, HookContent, HookPut};

/// Gitea's `Hook`.
#[derive(Debug, Serialize)]
pub struct GiteaHook {
    pub id: u64,
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub branch_filter: String,
    /// `url`, `content_type`, `http_method`: never the secret.
    pub config: HashMap<&'static str, String>,
    pub events: Vec<String>,
    pub authorization_header: String,
    pub active: bool,
    pub updated_at: String,
    pub created_at: String,
}

impl GiteaHook {
    fn of(hook: &Hook) -> GiteaHook {
        let content = match hook.content_type {
            HookContent::Json => "json",
            HookContent::Form => "form",
        };
        GiteaHook {
            id: hook.serial,
            kind: "gitea",
            branch_filter: hook.branch_filter.clone(),
            config: HashMap::from([
                ("url", hook.url.clone()),
                ("content_type", content.to_string()),
                ("http_method", "post".to_string()),
            ]),
            events: hook.events.clone(),
            authorization_header: String::new(),
            active: hook.active,
            updated_at: time(&hook.updated_at),
            created_at: time(&hook.created_at),
        }
    }
}

/// Gitea's `CreateHookOption` and `EditHookOption`: unknown fields are
/// ignored; `type` is Gitea's kind of receiver (vole delivers Gitea's
/// payloads, whatever kind a client names of those that take them).
#[derive(Default, Deserialize)]
pub struct HookOption {
    #[serde(default, rename = "type")]
    pub kind: Option<String>,
    #[serde(default)]
    pub config: Option<HashMap<String, Value>>,
    #[serde(default)]
    pub events: Option<Vec<String>>,
    #[serde(default)]
    pub branch_filter: Option<String>,
    #[serde(default)]
    pub active: Option<bool>,
}

/// Leaves `config` (which holds the secret) out.
impl std::fmt::Debug for HookOption {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HookOption")
            .field("kind", &self.kind)
            .field("events", &self.events)
            .field("active", &self.active)
            .finish_non_exhaustive()
    }
}

impl HookOption {
    /// An active Gitea hook to `url` (the settings page's form).
    pub fn gitea(
        (url, secret, content_type): (&str, &str, &str),
        events: Vec<String>,
        branch_filter: &str,
    ) -> HookOption {
        let config = [
            ("url", url),
            ("secret", secret),
            ("content_type", content_type),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), Value::from(v)))
        .collect();
        HookOption {
            kind: Some("gitea".into()),
            config: Some(config),
            events: Some(events),
            branch_filter: Some(branch_filter.to_string()),
            active: Some(true),
        }
    }
}

/// The receivers whose payloads are Gitea's.
const KINDS: &[&str] = &["gitea", "forgejo", "gogs"];

fn unprocessable(message: impl Into<String>) -> AppError {
    AppError::new(StatusCode::UNPROCESSABLE_ENTITY, message.into())
}

/// `option` as a hook's write, its URL (when given) checked against the
/// guard: parsed, resolved, every address one a hook may reach.
async fn hook_put(app: &ApiState, option: HookOption) -> Result<HookPut, AppError> {
    if let Some(kind) = option.kind.as_deref()
        && !KINDS.contains(&kind)
    {
        return Err(unprocessable(format!(
            "vole delivers Gitea's payloads: type must be one of {}, not {kind:?}",
            KINDS.join(", ")
        )));
    }
    let config = option.config.unwrap_or_default();
    let text = |key: &str| -> Result<Option<String>, AppError> {
        match config.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(other) => Err(unprocessable(format!(
                "config.{key} must be a string, not {other}"
            ))),
        }
    };
    let url = match text("url")? {
        Some(url) => {
            let target = vole_webhooks::guard::Guard::parse(&url)
                .map_err(|e| unprocessable(format!("config.url: {e}")))?;
            app.hook_guard
                .resolve(&target)
                .await
                .map_err(|e| unprocessable(format!("config.url: {e}")))?;
            Some(target.url.to_string())
        }
        None => None,
    };
    let content_type = match text("content_type")?.as_deref() {
        None | Some("") => None,
        Some("json") => Some(HookContent::Json),
        Some("form") => Some(HookContent::Form),
        Some(other) => {
            return Err(unprocessable(format!(
                "config.content_type must be json or form, not {other:?}"
            )));
        }
    };
    if let Some(method) = text("http_method")?
        && !method.eq_ignore_ascii_case("post")
    {
        return Err(unprocessable(
            "vole delivers with POST: config.http_method must be post",
        ));
    }
    if let Some(filter) = &option.branch_filter {
        vole_webhooks::deliver::HookTarget::branch_glob(filter).map_err(unprocessable)?;
    }
    Ok(HookPut {
        url,
        content_type,
        secret: text("secret")?,
        events: option.events,
        branch_filter: option.branch_filter,
        active: option.active,
    })
}

/// `GET /repos/{o}/{r}/hooks`: the repo's admins'.
pub async fn list_hooks(
    State(app): State<Arc<ApiState>>,
    RepoAccess { repo, .. }: RepoAccess<Administer>,
) -> Result<Response, AppError> {
    let hooks = listed(&app, &repo).await?;
    let shown: Vec<GiteaHook> = hooks.iter().map(GiteaHook::of).collect();
    Ok(Json(shown).into_response())
}

/// `POST /repos/{o}/{r}/hooks`: 201 with the hook.
pub async fn create_hook(
    State(app): State<Arc<ApiState>>,
    RepoAccess {
        repo, principal, ..
    }: RepoAccess<Administer>,
    payload: Result<Json<HookOption>, JsonRejection>,
) -> Result<Response, AppError> {
    let made = add(&app, &principal, &repo, body(payload)?).await?;
    Ok((StatusCode::CREATED, Json(GiteaHook::of(&made))).into_response())
}

/// A new hook of `repo` as `option` asks, by `principal` (who may
/// administer it): counted against its metadata writes, its URL checked
/// by the guard. The API's and the settings page's one path.
pub async fn add(
    app: &Arc<ApiState>,
    principal: &Principal,
    repo: &ResolvedRepo,
    option: HookOption,
) -> Result<Hook, AppError> {
    if option.kind.is_none() {
        return Err(unprocessable("a hook needs a type (gitea)"));
    }
    app.quotas.meta_write(principal)?;
    let put = hook_put(app, option).await?;
    if put.url.is_none() {
        return Err(unprocessable("a hook needs config.url"));
    }
    write(app, repo, move |app, repo| {
        app.meta
            .create_hook((repo.incarnation_id(), &repo.to_string()), put)
    })
    .await
}

/// The hooks of `repo`, for one who may administer it.
pub async fn listed(app: &Arc<ApiState>, repo: &ResolvedRepo) -> Result<Vec<Hook>, AppError> {
    read(app, repo, |app, repo| app.meta.hooks(repo.incarnation_id())).await
}

/// Deletes hook `id` of `repo`, by `principal` (who may administer it).
pub async fn remove(
    app: &Arc<ApiState>,
    principal: &Principal,
    repo: &ResolvedRepo,
    id: u64,
) -> Result<(), AppError> {
    app.quotas.meta_write(principal)?;
    write(app, repo, move |app, repo| {
        app.meta.delete_hook(repo.incarnation_id(), id)
    })
    .await
}

/// `GET /repos/{o}/{r}/hooks/{id}`.
pub async fn get_hook(
    State(app): State<Arc<ApiState>>,
    RepoAccess { repo, .. }: RepoAccess<Administer>,
    Path((_, _, id)): Path<(String, String, String)>,
) -> Result<Response, AppError> {
    let id = path_id(&id, "hook")?;
    let hook = read(&app, &repo, move |app, repo| {
        app.meta.hook(repo.incarnation_id(), id)
    })
    .await?;
    Ok(Json(GiteaHook::of(&hook)).into_response())
}

/// `PATCH /repos/{o}/{r}/hooks/{id}`: 200 with the hook.
pub async fn edit_hook(
    State(app): State<Arc<ApiState>>,
    RepoAccess {
        repo, principal, ..
    }: RepoAccess<Administer>,
    Path((_, _, id)): Path<(String, String, String)>,
    payload: Result<Json<HookOption>, JsonRejection>,
) -> Result<Response, AppError> {
    let id = path_id(&id, "hook")?;
    let option = body(payload)?;
    app.quotas.meta_write(&principal)?;
    let put = hook_put(&app, option).await?;
    let edited = write(&app, &repo, move |app, repo| {
        app.meta.edit_hook(repo.incarnation_id(), id, put)
    })
    .await?;
    Ok(Json(GiteaHook::of(&edited)).into_response())
}

/// `DELETE /repos/{o}/{r}/hooks/{id}`: 204.
pub async fn delete_hook(
    State(app): State<Arc<ApiState>>,
    RepoAccess {
        repo, principal, ..
    }: RepoAccess<Administer>,
    Path((_, _, id)): Path<(String, String, String)>,
) -> Result<Response, AppError> {
    let id = path_id(&id, "hook")?;
    remove(&app, &principal, &repo, id).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// The server's hooks (of every repo's events) are a server admin's: an
/// admin-scope token of an admin, limited to no repos.
fn server_admin(principal: &Principal) -> Result<(), AppError> {
    if principal.identity().is_none() {
        return Err(AppError::unauthenticated(
            "the server's hooks need credentials: send Authorization: token <token>",
        ));
    }
    if !principal.is_server_admin() {
        return Err(AppError::new(
            StatusCode::FORBIDDEN,
            "the server's hooks are a server admin's (an admin-scope token)",
        ));
    }
    Ok(())
}

/// A read or write of the server's hooks (incarnation "") on the
/// blocking pool, by a server admin.
async fn server_hooks<T: Send + 'static>(
    app: &Arc<ApiState>,
    (principal, changes_hooks): (&Principal, bool),
    f: impl FnOnce(&ApiState) -> Result<T, vole_meta::MetaError> + Send + 'static,
) -> Result<T, AppError> {
    server_admin(principal)?;
    let app = app.clone();
    vole_http::spawn_blocking(move || {
        let done = f(&app).map_err(AppError::from)?;
        if changes_hooks {
            deliver_to_current_hooks(&app);
        }
        Ok(done)
    })
    .await
    .map_err(|e| AppError::internal("a hooks task failed", e))?
}

/// `GET /admin/hooks`: the server's hooks.
pub async fn admin_list(
    State(app): State<Arc<ApiState>>,
    Extension(principal): Extension<Principal>,
) -> Result<Response, AppError> {
    let hooks = server_hooks(&app, (&principal, false), |app| app.meta.hooks("")).await?;
    let shown: Vec<GiteaHook> = hooks.iter().map(GiteaHook::of).collect();
    Ok(Json(shown).into_response())
}

/// `POST /admin/hooks`: 201 with the hook.
pub async fn admin_create(
    State(app): State<Arc<ApiState>>,
    Extension(principal): Extension<Principal>,
    payload: Result<Json<HookOption>, JsonRejection>,
) -> Result<Response, AppError> {
    server_admin(&principal)?;
    let option = body(payload)?;
    if option.kind.is_none() {
        return Err(unprocessable("a hook needs a type (gitea)"));
    }
    let put = hook_put(&app, option).await?;
    if put.url.is_none() {
        return Err(unprocessable("a hook needs config.url"));
    }
    let made = server_hooks(&app, (&principal, true), move |app| {
        app.meta.create_hook(("", ""), put)
    })
    .await?;
    Ok((StatusCode::CREATED, Json(GiteaHook::of(&made))).into_response())
}

/// `GET /admin/hooks/{id}`.
pub async fn admin_get(
    State(app): State<Arc<ApiState>>,
    Extension(principal): Extension<Principal>,
    Path(id): Path<String>,
) -> Result<Response, AppError> {
    let id = path_id(&id, "hook")?;
    let hook = server_hooks(&app, (&principal, false), move |app| app.meta.hook("", id)).await?;
    Ok(Json(GiteaHook::of(&hook)).into_response())
}

/// `PATCH /admin/hooks/{id}`: 200 with the hook.
pub async fn admin_edit(
    State(app): State<Arc<ApiState>>,
    Extension(principal): Extension<Principal>,
    Path(id): Path<String>,
    payload: Result<Json<HookOption>, JsonRejection>,
) -> Result<Response, AppError> {
    server_admin(&principal)?;
    let id = path_id(&id, "hook")?;
    let put = hook_put(&app, body(payload)?).await?;
    let edited = server_hooks(&app, (&principal, true), move |app| {
        app.meta.edit_hook("", id, put)
    })
    .await?;
    Ok(Json(GiteaHook::of(&edited)).into_response())
}

/// `DELETE /admin/hooks/{id}`: 204.
pub async fn admin_delete(
    State(app): State<Arc<ApiState>>,
    Extension(principal): Extension<Principal>,
    Path(id): Path<String>,
) -> Result<Response, AppError> {
    let id = path_id(&id, "hook")?;
    server_hooks(&app, (&principal, true), move |app| {
        app.meta.delete_hook("", id)
    })
    .await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// A hook's read or write on the blocking pool, for the repo the request
/// was decided for (not one made again under its name meanwhile), by its
/// incarnation: never "" (the server's hooks), which only a repo from
/// before incarnations could have.
pub(crate) async fn write<T: Send + 'static>(
    app: &Arc<ApiState>,
    repo: &ResolvedRepo,
    f: impl FnOnce(&ApiState, &ResolvedRepo) -> Result<T, vole_meta::MetaError> + Send + 'static,
) -> Result<T, AppError> {
    on_store(app, repo, f, true).await
}

/// [`write`] for a read: the deliveries are not told.
pub(crate) async fn read<T: Send + 'static>(
    app: &Arc<ApiState>,
    repo: &ResolvedRepo,
    f: impl FnOnce(&ApiState, &ResolvedRepo) -> Result<T, vole_meta::MetaError> + Send + 'static,
) -> Result<T, AppError> {
    on_store(app, repo, f, false).await
}

async fn on_store<T: Send + 'static>(
    app: &Arc<ApiState>,
    repo: &ResolvedRepo,
    f: impl FnOnce(&ApiState, &ResolvedRepo) -> Result<T, vole_meta::MetaError> + Send + 'static,
    changes_hooks: bool,
) -> Result<T, AppError> {
    if repo.incarnation_id().is_empty() {
        return Err(AppError::internal(
            "a repo without an incarnation has no hooks",
            repo.to_string(),
        ));
    }
    let decided = repo.clone();
    blocking(app, repo, move |app| {
        let done = f(app, &decided)?;
        if changes_hooks {
            deliver_to_current_hooks(app);
        }
        Ok(done)
    })
    .await
}

/// Gives the deliveries the hooks as they are now (after a hook is made,
/// changed or deleted; before the write's answer, so an event after it
/// reaches a new hook): those of the server and of repos that are still
/// the incarnation they were made for. Blocking.
pub fn deliver_to_current_hooks(app: &ApiState) {
    app.webhooks.refresh(|| {
        let hooks = match app.meta.all_hooks() {
            Ok(hooks) => hooks,
            Err(e) => {
                tracing::error!(error = %e, "webhooks: cannot read the hooks");
                return None;
            }
        };
        let live = |hook: &&Hook| {
            hook.incarnation.is_empty()
                || vole_git::repos::RepoName::parse(&hook.repo)
                    .ok()
                    .and_then(|name| {
                        vole_git::incarnation::Incarnation::read(&app.repos.path(&name)).ok()?
                    })
                    .is_some_and(|on_disk| on_disk.id() == hook.incarnation)
        };
        Some(hooks.iter().filter(live).map(target_of).collect())
    });
}

/// A hook as its deliveries need it.
pub fn target_of(hook: &Hook) -> vole_webhooks::deliver::HookTarget {
    let glob = vole_webhooks::deliver::HookTarget::branch_glob(&hook.branch_filter);
    vole_webhooks::deliver::HookTarget {
        id: hook.serial,
        incarnation: hook.incarnation.clone(),
        url: hook.url.clone(),
        form: hook.content_type == HookContent::Form,
        secret: hook.secret.clone(),
        events: hook.events.clone(),
        // Checked as the hook was written; one that does not parse now
        // sends nothing rather than everything.
        branch_filter: glob.clone().ok().flatten(),
        active: hook.active && glob.is_ok(),
        created_at: hook.created_at.clone(),
        version: hook.version,
    }
}
