//! A repo's creation and deletion, the one path of each for the API
//! (`crate::gitea::users`) and the web's forms (the repo goes to the
//! trash, where an operator can restore it). Creation and
//! deletion are `vole_control`'s, shared with the CLI.

use std::sync::Arc;

use axum::http::StatusCode;
use serde::Deserialize;

use super::ApiState;
use vole_access::Principal;
use vole_control::{Actor, LifecycleError, NewRepo};
use vole_git::repos::{RepoError, RepoName};
use vole_http::AppError;

/// A repo to create (what the web's form and Gitea's creation bodies
/// become).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateRepo {
    /// The repo's name (without owner).
    pub name: String,
    /// The owner segment; default: the caller. Only a server admin may
    /// name another.
    #[serde(default)]
    pub owner: Option<String>,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub private: bool,
}

/// What a refused creation, deletion or default-branch move tells the
/// client.
pub(crate) fn lifecycle_error(e: LifecycleError) -> AppError {
    {
        match &e {
            LifecycleError::Repo(RepoError::Name(_))
            | LifecycleError::NoSuchOwner(_)
            | LifecycleError::NoSuchBranch { .. } => {
                AppError::new(StatusCode::UNPROCESSABLE_ENTITY, e.to_string())
            }
            LifecycleError::Repo(RepoError::AlreadyExists(_) | RepoError::CaseTwin { .. }) => {
                AppError::new(StatusCode::CONFLICT, e.to_string())
            }
            LifecycleError::Repo(RepoError::NotFound(_)) => AppError::not_found(e.to_string()),
            LifecycleError::Held(_) => AppError::busy(e.to_string(), 5),
            LifecycleError::Meta(_) => {
                AppError::unavailable("a repo's ACL could not be written", &e)
            }
            LifecycleError::Record(_) => {
                AppError::internal("HEAD could not be moved and recorded durably", &e)
            }
            _ => AppError::internal("a repo could not be created or deleted", &e),
        }
    }
}

/// Creates a repo as `principal` asks from `client`: the name checked,
/// the creation allowed by `access` and counted in the owner's quota,
/// then made by `vole_control` (as the CLI's is). The one path of a new
/// repo, for the API and the web's form.
pub async fn create_repo(
    app: &Arc<ApiState>,
    principal: &Principal,
    create: CreateRepo,
    client: &str,
) -> Result<RepoName, AppError> {
    let Some(identity) = principal.identity() else {
        return Err(AppError::unauthenticated(
            vole_access::WRITES_NEED_CREDENTIALS,
        ));
    };
    let owner = create
        .owner
        .clone()
        .unwrap_or_else(|| identity.user.clone());
    let full = format!("{owner}/{}", create.name);
    let name = RepoName::parse_new(&full)
        .map_err(|e| AppError::new(StatusCode::UNPROCESSABLE_ENTITY, e.to_string()))?;
    if let Some(description) = &create.description {
        vole_meta::entity::check_description(description)
            .map_err(|e| AppError::new(StatusCode::UNPROCESSABLE_ENTITY, e.0))?;
    }
    app.access
        .check_create(principal, &name)
        .map_err(|denied| AppError::denied(denied, || "not found".into()))?;
    // The caller owns what they create under their own name; under
    // another (a server admin's doing) the user named like it does.
    let owning_user = identity
        .user
        .eq_ignore_ascii_case(name.owner())
        .then(|| identity.user.clone());
    let actor = identity.user.clone();
    let client = client.to_string();
    let app2 = app.clone();
    let new = NewRepo {
        name: name.to_string(),
        description: create.description,
        private: create.private,
        owner: owning_user,
    };
    let counted = name.clone();
    vole_http::spawn_blocking(move || {
        // Counted and created under one guard (--max-repos-per-user).
        let _creating = app2.quotas.repo_create(&app2.repos, &counted)?;
        app2.control
            .create_repo(
                new,
                Actor {
                    name: &actor,
                    client: &client,
                },
            )
            .map_err(lifecycle_error)
    })
    .await
    .map_err(|e| AppError::internal("repo creation task failed", e))??;
    Ok(name)
}

/// Moves a repo to the trash as `principal` (an admin of it, which the
/// caller's extractor checked) asks from `client`, through `vole_control`
/// (as the CLI's deletion). The one path of a deletion, for the API and
/// the web's settings page.
pub async fn delete_repo(
    app: &Arc<ApiState>,
    principal: &Principal,
    name: vole_access::ResolvedRepo,
    client: &str,
) -> Result<(), AppError> {
    let actor = principal.name().to_string();
    let client = client.to_string();
    let app2 = app.clone();
    vole_http::spawn_blocking(move || -> Result<(), AppError> {
        crate::meta::still_the_decided_repo(&app2, &name)?;
        app2.control
            .delete_repo(
                &name,
                Actor {
                    name: &actor,
                    client: &client,
                },
            )
            .map_err(lifecycle_error)?;
        // Its hooks stop delivering (they stay with its incarnation).
        crate::gitea::hooks::deliver_to_current_hooks(&app2);
        Ok(())
    })
    .await
    .map_err(|e| AppError::internal("repo deletion task failed", e))?
}
