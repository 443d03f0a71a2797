//! The API's route table: every route under `/api/v1`, each
//! handler with the API's state. The router (`vole`'s `server/router.rs`)
//! merges it with the other services'.

use std::sync::Arc;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::routing::{get, patch};

use crate::ApiState;
use vole_meta::entity::{Change, Issue};

/// The API's routes; metadata writes take bodies of at most `body_limit`
/// bytes (`--api-body-limit`).
pub fn routes(state: Arc<ApiState>, body_limit: u64) -> Router {
    Router::new()
        .route("/api/v1/version", get(crate::gitea::version))
        .route(
            "/api/v1/repos/{owner}/{repo}/issues",
            get(crate::threads::list::<Issue>).post(crate::threads::create::<Issue>),
        )
        .route(
            "/api/v1/repos/{owner}/{repo}/issues/{number}",
            get(crate::threads::get::<Issue>).patch(crate::threads::edit::<Issue>),
        )
        .route(
            "/api/v1/repos/{owner}/{repo}/issues/{number}/comments/{id}",
            patch(crate::threads::edit_comment::<Issue>)
                .delete(crate::threads::delete_comment::<Issue>),
        )
        .route(
            "/api/v1/repos/{owner}/{repo}/issues/{number}/comments",
            get(crate::threads::list_comments::<Issue>).post(crate::threads::add_comment::<Issue>),
        )
        .route(
            "/api/v1/repos/{owner}/{repo}/changes",
            get(crate::threads::list::<Change>).post(crate::threads::create::<Change>),
        )
        .route(
            "/api/v1/repos/{owner}/{repo}/changes/{number}",
            get(crate::threads::get::<Change>).patch(crate::threads::edit::<Change>),
        )
        .route(
            "/api/v1/repos/{owner}/{repo}/changes/{number}/comments/{id}",
            patch(crate::threads::edit_comment::<Change>)
                .delete(crate::threads::delete_comment::<Change>),
        )
        .route(
            "/api/v1/repos/{owner}/{repo}/changes/{number}/comments",
            get(crate::threads::list_comments::<Change>)
                .post(crate::threads::add_comment::<Change>),
        )
        .route(
            "/api/v1/repos/{owner}/{repo}/pulls/{number}/merge",
            get(crate::pulls::is_merged).post(crate::pulls::merge),
        )
        .route(
            "/api/v1/repos/{owner}/{repo}/acl",
            get(crate::meta::get_acl).put(crate::meta::put_acl),
        )
        .route(
            "/api/v1/repos/{owner}/{repo}/settings",
            get(crate::meta::get_settings).put(crate::meta::put_settings),
        )
        .layer(DefaultBodyLimit::max(
            usize::try_from(body_limit).unwrap_or(usize::MAX),
        ))
        .route(
            "/api/v1/repos",
            get(crate::repos::list).post(crate::repos::create),
        )
        .route(
            "/api/v1/repos/{owner}/{repo}",
            get(crate::repos::get).delete(crate::repos::delete),
        )
        .route(
            "/api/v1/repos/{owner}/{repo}/activity",
            get(crate::repo_activity),
        )
        .layer(axum::middleware::map_response(crate::gitea::as_json))
        .with_state(state)
}
