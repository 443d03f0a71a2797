//! The API's route table: every route under `/api/v1`, each
//! handler with the API's state. The router (`vole`'s `server/router.rs`)
//! merges it with the other services'. Where Gitea names a thing, the
//! path is Gitea's (`crate::gitea`); vole's own features (ACL, settings,
//! activity) keep theirs.

use std::sync::Arc;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::routing::{delete, get, post};

use crate::ApiState;
use crate::gitea::{branches, issues, users};
use vole_meta::entity::{Change, Issue};

/// The API's routes; metadata writes take bodies of at most `body_limit`
/// bytes (`--api-body-limit`).
pub fn routes(state: Arc<ApiState>, body_limit: u64) -> Router {
    Router::new()
        .route("/api/v1/version", get(crate::gitea::version))
        // vole's shapes still (they move to Gitea's with their tests).
        .route(
            "/api/v1/repos/{owner}/{repo}/issues",
            get(crate::threads::list::<Issue>).post(crate::threads::create::<Issue>),
        )
        .route(
            "/api/v1/repos/{owner}/{repo}/issues/{number}",
            get(crate::threads::get::<Issue>).patch(crate::threads::edit::<Issue>),
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
            axum::routing::patch(crate::threads::edit_comment::<Change>)
                .delete(crate::threads::delete_comment::<Change>),
        )
        .route(
            "/api/v1/repos/{owner}/{repo}/changes/{number}/comments",
            get(crate::threads::list_comments::<Change>)
                .post(crate::threads::add_comment::<Change>),
        )
        .route(
            "/api/v1/repos/{owner}/{repo}/issues/comments",
            get(issues::repo_comments),
        )
        .route(
            "/api/v1/repos/{owner}/{repo}/issues/comments/{id}",
            get(issues::get_comment)
                .patch(issues::edit_comment)
                .delete(issues::delete_comment),
        )
        .route(
            "/api/v1/repos/{owner}/{repo}/issues/{number}/comments",
            get(crate::threads::list_comments::<Issue>).post(crate::threads::add_comment::<Issue>),
        )
        .route(
            "/api/v1/repos/{owner}/{repo}/issues/{number}/comments/{id}",
            axum::routing::patch(crate::threads::edit_comment::<Issue>)
                .delete(crate::threads::delete_comment::<Issue>),
        )
        .route(
            "/api/v1/repos/{owner}/{repo}/issues/{number}/labels",
            get(issues::issue_labels)
                .post(issues::add_issue_labels)
                .put(issues::replace_issue_labels)
                .delete(issues::clear_issue_labels),
        )
        .route(
            "/api/v1/repos/{owner}/{repo}/issues/{number}/labels/{id}",
            delete(issues::remove_issue_label),
        )
        .route(
            "/api/v1/repos/{owner}/{repo}/labels",
            get(issues::list_labels).post(issues::create_label),
        )
        .route(
            "/api/v1/repos/{owner}/{repo}/labels/{id}",
            get(issues::get_label)
                .patch(issues::edit_label)
                .delete(issues::delete_label),
        )
        .route(
            "/api/v1/repos/{owner}/{repo}/pulls",
            get(issues::list_pulls).post(issues::create_pull),
        )
        .route(
            "/api/v1/repos/{owner}/{repo}/pulls/{number}",
            get(issues::get_pull).patch(issues::edit_pull),
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
        .route("/api/v1/user", get(users::me))
        .route(
            "/api/v1/user/repos",
            get(users::my_repos).post(users::create_mine),
        )
        .route("/api/v1/users/{name}", get(users::user))
        .route("/api/v1/users/{name}/repos", get(users::user_repos))
        .route("/api/v1/orgs/{org}/repos", post(users::create_in_org))
        .route("/api/v1/repos/search", get(users::search))
        .route(
            "/api/v1/repos",
            get(crate::repos::list).post(crate::repos::create),
        )
        .route(
            "/api/v1/repos/{owner}/{repo}",
            get(users::get).patch(users::edit).delete(users::delete),
        )
        .route("/api/v1/repos/{owner}/{repo}/branches", get(branches::list))
        .route(
            "/api/v1/repos/{owner}/{repo}/branches/{*branch}",
            get(branches::get),
        )
        .route(
            "/api/v1/repos/{owner}/{repo}/activity",
            get(crate::repo_activity),
        )
        .layer(axum::middleware::map_response(crate::gitea::as_json))
        .with_state(state)
}
