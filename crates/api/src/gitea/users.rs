//! Users and repos at Gitea's paths: `/user`, `/users/{name}`, their
//! repos, repo creation for oneself (`/user/repos`) and under an owner
//! namespace that is no user (`/orgs/{org}/repos`, server admins only),
//! `/repos/search`, and one repo read, edited and deleted.

use std::collections::HashMap;
use std::sync::Arc;

use axum::Json;
use axum::extract::rejection::JsonRejection;
use axum::extract::{ConnectInfo, Extension, Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;

use super::issues::{gitea_page, shaped, shaped_blocking};
use super::objects::Base;
use crate::ApiState;
use crate::meta::body;
use crate::repos::{CreateRepo, create_repo, delete_repo};
use vole_access::Principal;
use vole_control::Actor;
use vole_git::repos::RepoName;
use vole_http::page::ApiPage;
use vole_http::repo_access::{Administer, Read};
use vole_http::{AppError, RepoAccess};
use vole_meta::SettingsPut;

/// `GET /user`: the caller (401 to the anonymous).
pub async fn me(
    State(app): State<Arc<ApiState>>,
    Extension(principal): Extension<Principal>,
    base: Base,
) -> Result<Response, AppError> {
    let Some(identity) = principal.identity() else {
        return Err(AppError::unauthenticated(
            "GET /user needs credentials: send Authorization: token <token>",
        ));
    };
    let name = identity.user.clone();
    shown_user(&app, base, principal, name).await
}

/// User `name` as `principal` sees it; a 404 when there is none.
async fn shown_user(
    app: &Arc<ApiState>,
    base: Base,
    principal: Principal,
    name: String,
) -> Result<Response, AppError> {
    let user = shaped(app, base, principal, move |s| {
        let user = s
            .app
            .meta
            .user(&name)?
            .ok_or_else(|| AppError::not_found(format!("user {name:?} not found")))?;
        Ok(s.user_of(&user))
    })
    .await?;
    Ok(Json(user).into_response())
}

/// `GET /users/{name}`: 404 when there is no such user.
pub async fn user(
    State(app): State<Arc<ApiState>>,
    Extension(principal): Extension<Principal>,
    base: Base,
    Path(name): Path<String>,
) -> Result<Response, AppError> {
    shown_user(&app, base, principal, name).await
}

/// The repos `viewer` may list that `keep` keeps, by name.
fn visible_repos(
    app: &ApiState,
    viewer: &Principal,
    keep: impl Fn(&RepoName) -> bool,
) -> Vec<RepoName> {
    app.repos
        .list()
        .into_iter()
        .map(|info| info.name)
        .filter(|name| keep(name) && app.access.may_list(viewer, name))
        .collect()
}

/// A page of repos as Gitea's `Repository` list.
async fn repo_page(
    app: &Arc<ApiState>,
    base: Base,
    principal: Principal,
    page: vole_stdx::page::Pagination,
    keep: impl Fn(&ApiState, &Principal, &RepoName) -> bool + Send + 'static,
) -> Result<(Vec<super::objects::GiteaRepo>, usize), AppError> {
    shaped_blocking(app, base, principal.clone(), move |s| {
        let names = visible_repos(s.app, &principal, |n| keep(s.app, &principal, n));
        let total = names.len();
        // A repo deleted since it was listed is left out, not the page's
        // failure.
        let items = page
            .slice(names.iter())
            .filter_map(|n| match s.repo(n) {
                Err(e) if e.status() == axum::http::StatusCode::NOT_FOUND => None,
                shaped => Some(shaped),
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok((items, total))
    })
    .await
}

/// `GET /users/{name}/repos`: the repos under that owner the caller may
/// see.
pub async fn user_repos(
    State(app): State<Arc<ApiState>>,
    Extension(principal): Extension<Principal>,
    base: Base,
    Path(owner): Path<String>,
    ApiPage(page): ApiPage,
) -> Result<Response, AppError> {
    let url = base.api(&format!("users/{owner}/repos"));
    let wanted = owner.clone();
    let (items, total) = repo_page(&app, base, principal, page, move |_, _, n| {
        n.owner().eq_ignore_ascii_case(&wanted)
    })
    .await?;
    // A name that is no user is a 404, as Gitea answers; an owner
    // namespace that is no user lists the repos there the caller may
    // see, and is a 404 when it may see none (whether it holds private
    // ones is not told).
    if total == 0 && app.meta.user(&owner)?.is_none() {
        return Err(AppError::not_found(format!("user {owner:?} not found")));
    }
    Ok(gitea_page(items, &url, "", page, total))
}

/// `GET /user/repos`: the repos the caller owns or has a role in.
pub async fn my_repos(
    State(app): State<Arc<ApiState>>,
    Extension(principal): Extension<Principal>,
    base: Base,
    ApiPage(page): ApiPage,
) -> Result<Response, AppError> {
    if principal.identity().is_none() {
        return Err(AppError::unauthenticated(
            "GET /user/repos needs credentials: send Authorization: token <token>",
        ));
    }
    let url = base.api("user/repos");
    let (items, total) = repo_page(&app, base, principal, page, |app, viewer, n| {
        n.owner().eq_ignore_ascii_case(viewer.name()) || app.access.role(viewer, n).is_some()
    })
    .await?;
    Ok(gitea_page(items, &url, "", page, total))
}

/// `GET /repos/search?q=&page=&limit=`: the repos the caller may see
/// whose name has `q` (ASCII case aside), in Gitea's
/// `{"ok": true, "data": [...]}`.
pub async fn search(
    State(app): State<Arc<ApiState>>,
    Extension(principal): Extension<Principal>,
    base: Base,
    Query(query): Query<HashMap<String, String>>,
    ApiPage(page): ApiPage,
) -> Result<Response, AppError> {
    let q = query
        .get("q")
        .cloned()
        .unwrap_or_default()
        .to_ascii_lowercase();
    if q.len() > 256 {
        return Err(AppError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "q is longer than 256 bytes",
        ));
    }
    let url = base.api("repos/search");
    let filters = if q.is_empty() {
        String::new()
    } else {
        format!(
            "q={}",
            percent_encoding::utf8_percent_encode(&q, percent_encoding::NON_ALPHANUMERIC)
        )
    };
    let (items, total) = repo_page(&app, base, principal, page, move |_, _, n| {
        n.to_string().to_ascii_lowercase().contains(&q)
    })
    .await?;
    // The list in Gitea's wrapper, the paging headers as a list's.
    let headers = gitea_page(Vec::<()>::new(), &url, &filters, page, total)
        .headers()
        .clone();
    let mut response = Json(serde_json::json!({"ok": true, "data": items})).into_response();
    for name in [
        axum::http::header::LINK,
        axum::http::header::ACCESS_CONTROL_EXPOSE_HEADERS,
    ] {
        if let Some(value) = headers.get(&name) {
            response.headers_mut().insert(name, value.clone());
        }
    }
    if let Some(value) = headers.get("x-total-count") {
        response
            .headers_mut()
            .insert("x-total-count", value.clone());
    }
    Ok(response)
}

/// Gitea's `CreateRepoOption` (what vole does not do, as `auto_init`,
/// `gitignores`, `license`, `readme`, is taken and ignored).
#[derive(Debug, Deserialize)]
pub struct CreateRepoOption {
    pub name: String,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub private: Option<bool>,
}

async fn create_under(
    app: Arc<ApiState>,
    principal: Principal,
    base: Base,
    peer: std::net::SocketAddr,
    owner: Option<String>,
    option: CreateRepoOption,
) -> Result<Response, AppError> {
    let create = CreateRepo {
        name: option.name,
        owner,
        description: option.description,
        private: option.private.unwrap_or(false),
    };
    let name = create_repo(&app, &principal, create, &peer.ip().to_string()).await?;
    let repo = shaped_blocking(&app, base, principal, move |s| s.repo(&name)).await?;
    Ok((StatusCode::CREATED, Json(repo)).into_response())
}

/// `POST /user/repos`: a repo of the caller's; 201 with it, 409 when the
/// name is taken.
pub async fn create_mine(
    State(app): State<Arc<ApiState>>,
    Extension(principal): Extension<Principal>,
    ConnectInfo(peer): ConnectInfo<std::net::SocketAddr>,
    base: Base,
    payload: Result<Json<CreateRepoOption>, JsonRejection>,
) -> Result<Response, AppError> {
    let option = body(payload)?;
    create_under(app, principal, base, peer, None, option).await
}

/// `POST /orgs/{org}/repos`: a repo under an owner namespace that is no
/// user (vole has no organizations); server admins only.
pub async fn create_in_org(
    State(app): State<Arc<ApiState>>,
    Extension(principal): Extension<Principal>,
    ConnectInfo(peer): ConnectInfo<std::net::SocketAddr>,
    base: Base,
    Path(org): Path<String>,
    payload: Result<Json<CreateRepoOption>, JsonRejection>,
) -> Result<Response, AppError> {
    let option = body(payload)?;
    if app.meta.user(&org)?.is_some() {
        return Err(AppError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            format!("{org:?} is a user, not an organization: use POST /user/repos as them"),
        ));
    }
    create_under(app, principal, base, peer, Some(org), option).await
}

/// `POST /admin/users/{username}/repos`: a repo under another user's
/// name, made by a server admin (Gitea's admin endpoint).
pub async fn create_for_user(
    State(app): State<Arc<ApiState>>,
    Extension(principal): Extension<Principal>,
    ConnectInfo(peer): ConnectInfo<std::net::SocketAddr>,
    base: Base,
    Path(owner): Path<String>,
    payload: Result<Json<CreateRepoOption>, JsonRejection>,
) -> Result<Response, AppError> {
    let option = body(payload)?;
    if app.meta.user(&owner)?.is_none() {
        return Err(AppError::not_found(format!("user {owner:?} not found")));
    }
    create_under(app, principal, base, peer, Some(owner), option).await
}

/// `GET /repos/{o}/{r}`.
pub async fn get(
    State(app): State<Arc<ApiState>>,
    RepoAccess {
        repo, principal, ..
    }: RepoAccess<Read>,
    base: Base,
) -> Result<Response, AppError> {
    let shown = shaped_blocking(&app, base, principal, move |s| s.repo(&repo)).await?;
    Ok(Json(shown).into_response())
}

/// Gitea's `EditRepoOption`, the part vole has: description, private,
/// default_branch (a name other than the repo's own is refused; the rest
/// is taken and ignored).
#[derive(Debug, Deserialize)]
pub struct EditRepoOption {
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub private: Option<bool>,
    #[serde(default)]
    pub default_branch: Option<String>,
    /// What vole cannot do is refused, not dropped: an archive, a repo
    /// without issues or pull requests.
    #[serde(default)]
    pub archived: Option<bool>,
    #[serde(default)]
    pub has_issues: Option<bool>,
    #[serde(default)]
    pub has_pull_requests: Option<bool>,
}

/// `PATCH /repos/{o}/{r}`: an admin of the repo; 200 with it.
pub async fn edit(
    State(app): State<Arc<ApiState>>,
    RepoAccess {
        repo, principal, ..
    }: RepoAccess<Administer>,
    ConnectInfo(peer): ConnectInfo<std::net::SocketAddr>,
    base: Base,
    payload: Result<Json<EditRepoOption>, JsonRejection>,
) -> Result<Response, AppError> {
    let option = body(payload)?;
    if option.name.as_deref().is_some_and(|n| n != repo.name()) {
        return Err(AppError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "vole does not rename repositories: make a new one and push to it",
        ));
    }
    for (asked, what) in [
        (option.archived == Some(true), "archive repositories"),
        (option.has_issues == Some(false), "turn issues off"),
        (
            option.has_pull_requests == Some(false),
            "turn pull requests off",
        ),
    ] {
        if asked {
            return Err(AppError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                format!("vole does not {what}; nothing was changed"),
            ));
        }
    }
    let client = peer.ip().to_string();
    if option.description.is_some() || option.default_branch.is_some() {
        let current = crate::meta::read_settings(&app, &repo)?;
        let put = SettingsPut {
            version: current.version,
            description: option.description.unwrap_or(current.description),
            default_branch: option.default_branch.unwrap_or(current.default_branch),
            protected_branches: current.protected_branches,
            protected_admins_only: current.protected_admins_only,
            site: current.site,
            site_domains: current.site_domains,
            merge: current.merge,
        };
        crate::meta::write_settings(&app, &principal, repo.clone(), put, &client).await?;
    }
    if let Some(private) = option.private {
        let app2 = app.clone();
        let (name, actor) = (repo.clone(), principal.name().to_string());
        vole_http::spawn_blocking(move || {
            crate::meta::still_the_decided_repo(&app2, &name)?;
            app2.control
                .set_visibility(
                    &name,
                    private,
                    Actor {
                        name: &actor,
                        client: &client,
                    },
                )
                .map(drop)
                .map_err(crate::repos::lifecycle_error)
        })
        .await
        .map_err(|e| AppError::internal("visibility change failed", e))??;
    }
    let shown = shaped_blocking(&app, base, principal, move |s| s.repo(&repo)).await?;
    Ok(Json(shown).into_response())
}

/// `DELETE /repos/{o}/{r}`: an admin of it moves it to the trash; 204.
pub async fn delete(
    State(app): State<Arc<ApiState>>,
    RepoAccess {
        repo, principal, ..
    }: RepoAccess<Administer>,
    ConnectInfo(peer): ConnectInfo<std::net::SocketAddr>,
) -> Result<Response, AppError> {
    delete_repo(&app, &principal, repo, &peer.ip().to_string()).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}
