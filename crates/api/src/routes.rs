//! The API's route table: every route under `/api/v1`, each
//! handler with the API's state. The router (`vole`'s `server/router.rs`)
//! merges it with the other services'. Where Gitea names a thing, the
//! path is Gitea's (`crate::gitea`); vole's own features (ACL, settings,
//! activity) keep theirs.

use std::sync::Arc;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::routing::{delete, get, patch, post};

use crate::ApiState;
use crate::gitea::{
    branches, comments, commits, contents, git_objects, hook_deliveries, hooks, issues, labels,
    pulls, tokens, users,
};

/// The API's routes; metadata writes take bodies of at most `body_limit`
/// bytes (`--api-body-limit`).
pub fn routes(state: Arc<ApiState>, body_limit: u64) -> Router {
    metadata_routes()
        .layer(DefaultBodyLimit::max(
            usize::try_from(body_limit).unwrap_or(usize::MAX),
        ))
        .merge(server_routes())
        .layer(axum::middleware::map_response(crate::gitea::as_json))
        .with_state(state)
}

/// Issues, pull requests, comments, labels, the ACL and the settings:
/// the writes whose bodies `--api-body-limit` bounds.
fn metadata_routes() -> Router<Arc<ApiState>> {
    Router::new()
        .route(
            "/api/v1/repos/{owner}/{repo}/issues",
            get(issues::list).post(issues::create),
        )
        .route(
            "/api/v1/repos/{owner}/{repo}/issues/{number}",
            get(issues::get).patch(issues::edit),
        )
        .route(
            "/api/v1/repos/{owner}/{repo}/issues/comments",
            get(comments::repo_comments),
        )
        .route(
            "/api/v1/repos/{owner}/{repo}/issues/comments/{id}",
            get(comments::get_comment)
                .patch(comments::edit_comment)
                .delete(comments::delete_comment),
        )
        .route(
            "/api/v1/repos/{owner}/{repo}/issues/{number}/comments",
            get(comments::list_comments).post(comments::add_comment),
        )
        // Gitea's older path of a comment's edit and deletion.
        .route(
            "/api/v1/repos/{owner}/{repo}/issues/{number}/comments/{id}",
            patch(comments::edit_comment).delete(comments::delete_comment),
        )
        .route(
            "/api/v1/repos/{owner}/{repo}/issues/{number}/labels",
            get(labels::issue_labels)
                .post(labels::add_issue_labels)
                .put(labels::replace_issue_labels)
                .delete(labels::clear_issue_labels),
        )
        .route(
            "/api/v1/repos/{owner}/{repo}/issues/{number}/labels/{id}",
            delete(labels::remove_issue_label),
        )
        .route(
            "/api/v1/repos/{owner}/{repo}/labels",
            get(labels::list_labels).post(labels::create_label),
        )
        .route(
            "/api/v1/repos/{owner}/{repo}/labels/{id}",
            get(labels::get_label)
                .patch(labels::edit_label)
                .delete(labels::delete_label),
        )
        .route(
            "/api/v1/repos/{owner}/{repo}/pulls",
            get(pulls::list_pulls).post(pulls::create_pull),
        )
        .route(
            "/api/v1/repos/{owner}/{repo}/pulls/{number}",
            get(pulls::get_pull).patch(pulls::edit_pull),
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
}

/// Users, repos, branches and the rest.
fn server_routes() -> Router<Arc<ApiState>> {
    Router::new()
        .route("/api/v1/version", get(crate::gitea::version))
        .route("/api/v1/user", get(users::me))
        .route(
            "/api/v1/user/repos",
            get(users::my_repos).post(users::create_mine),
        )
        .route("/api/v1/users/{name}", get(users::user))
        .route("/api/v1/users/{name}/repos", get(users::user_repos))
        .route(
            "/api/v1/users/{name}/tokens",
            get(tokens::list).post(tokens::create),
        )
        .route(
            "/api/v1/users/{name}/tokens/{token}",
            delete(tokens::delete),
        )
        .route("/api/v1/orgs/{org}/repos", post(users::create_in_org))
        .route(
            "/api/v1/admin/users/{username}/repos",
            post(users::create_for_user),
        )
        .route(
            "/api/v1/admin/hooks",
            get(hooks::admin_list).post(hooks::admin_create),
        )
        .route(
            "/api/v1/admin/hooks/{id}",
            get(hooks::admin_get)
                .patch(hooks::admin_edit)
                .delete(hooks::admin_delete),
        )
        .route("/api/v1/repos/search", get(users::search))
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
            "/api/v1/repos/{owner}/{repo}/hooks",
            get(hooks::list_hooks).post(hooks::create_hook),
        )
        .route(
            "/api/v1/repos/{owner}/{repo}/hooks/{id}",
            get(hooks::get_hook)
                .patch(hooks::edit_hook)
                .delete(hooks::delete_hook),
        )
        .route(
            "/api/v1/repos/{owner}/{repo}/hooks/{id}/tests",
            post(hook_deliveries::test),
        )
        .route(
            "/api/v1/repos/{owner}/{repo}/hooks/{id}/deliveries",
            get(hook_deliveries::list),
        )
        .route(
            "/api/v1/repos/{owner}/{repo}/hooks/{id}/deliveries/{delivery}/attempts",
            post(hook_deliveries::redeliver),
        )
        .route("/api/v1/repos/{owner}/{repo}/commits", get(commits::list))
        .route(
            "/api/v1/repos/{owner}/{repo}/git/commits/{sha}",
            get(commits::one),
        )
        .route(
            "/api/v1/repos/{owner}/{repo}/git/blobs/{sha}",
            get(git_objects::blob),
        )
        .route(
            "/api/v1/repos/{owner}/{repo}/git/trees/{sha}",
            get(git_objects::tree),
        )
        .route(
            "/api/v1/repos/{owner}/{repo}/languages",
            get(commits::languages),
        )
        .route(
            "/api/v1/repos/{owner}/{repo}/contents",
            get(contents::contents),
        )
        .route(
            "/api/v1/repos/{owner}/{repo}/contents/{*path}",
            get(contents::contents),
        )
        .route(
            "/api/v1/repos/{owner}/{repo}/raw/{*path}",
            get(contents::raw),
        )
        .route(
            "/api/v1/repos/{owner}/{repo}/activity",
            get(crate::repo_activity),
        )
}
