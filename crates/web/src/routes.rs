//! The web UI's route table: the repo list, static files and every page
//! of a repo, each handler with the web state, under the layer that
//! renders a refusal as a page. The router (`vole`'s `server/router.rs`)
//! merges it with the other services'.

use std::sync::Arc;

use axum::Router;
use axum::routing::{get, post};

use crate::WebState;

/// The web UI's routes.
pub fn routes(state: Arc<WebState>) -> Router {
    Router::new()
        .route("/", get(crate::home))
        .route("/static/{file}", get(crate::static_file))
        .route(
            "/-/login",
            get(crate::sign_in::sign_in_page).post(crate::sign_in::sign_in),
        )
        .route("/-/logout", post(crate::sign_in::sign_out))
        .route(
            "/-/register",
            get(crate::register::register_page).post(crate::register::register),
        )
        .route(
            "/-/user/tokens",
            get(crate::tokens::tokens_page).post(crate::tokens::create_token),
        )
        .route("/-/user/tokens/revoke", post(crate::tokens::revoke_token))
        .route(
            "/-/user/settings",
            get(crate::account::account_page).post(crate::account::save_profile),
        )
        .route("/-/user/password", post(crate::account::change_password))
        .route(
            "/-/new",
            get(crate::new_repo::new_repo_page).post(crate::new_repo::create_repo),
        )
        .route("/{owner}/{repo}", get(crate::repo_home))
        .route("/{owner}/{repo}/-/tree/{rev}", get(crate::tree_root))
        .route("/{owner}/{repo}/-/tree/{rev}/{*path}", get(crate::tree))
        .route("/{owner}/{repo}/-/blob/{rev}/{*path}", get(crate::blob))
        .route(
            "/{owner}/{repo}/-/blame/{rev}/{*path}",
            get(crate::blame::blame),
        )
        .route("/{owner}/{repo}/-/raw/{rev}/{*path}", get(crate::raw))
        .route("/{owner}/{repo}/-/commits/{rev}", get(crate::log::log_root))
        .route(
            "/{owner}/{repo}/-/commits/{rev}/{*path}",
            get(crate::log::log_path),
        )
        .route("/{owner}/{repo}/-/commit/{id}", get(crate::commit::commit))
        .route("/{owner}/{repo}/-/branches", get(crate::refs::branches))
        .route("/{owner}/{repo}/-/tags", get(crate::refs::tags))
        .route("/{owner}/{repo}/-/activity", get(crate::refs::activity))
        .route(
            "/{owner}/{repo}/-/settings",
            get(crate::settings::settings_page).post(crate::settings::save_general),
        )
        .route(
            "/{owner}/{repo}/-/settings/access",
            post(crate::settings::save_access),
        )
        .route(
            "/{owner}/{repo}/-/settings/hooks",
            post(crate::settings_hooks::save_hooks),
        )
        .route(
            "/{owner}/{repo}/-/settings/delete",
            post(crate::settings::delete_repo),
        )
        .route(
            "/{owner}/{repo}/-/archive/{file}",
            get(crate::archive::archive),
        )
        .merge(thread_routes())
        .layer(axum::middleware::map_response(crate::as_page))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            crate::sign_in::session_layer,
        ))
        .with_state(state)
}

/// The routes of issues and pull requests.
fn thread_routes() -> Router<Arc<WebState>> {
    Router::new()
        .route("/{owner}/{repo}/-/issues", get(crate::issues::issues))
        .route(
            "/{owner}/{repo}/-/issues/new",
            get(crate::issues::new_issue).post(crate::issues::create_issue),
        )
        .route(
            "/{owner}/{repo}/-/issues/{number}",
            get(crate::issue::issue).post(crate::issue::post_issue),
        )
        .route(
            "/{owner}/{repo}/-/issues/{number}/comments/{id}",
            post(crate::issue::post_comment),
        )
        .route(
            "/{owner}/{repo}/-/pulls/{number}/comments/{id}",
            post(crate::issue::post_comment),
        )
        .route("/{owner}/{repo}/-/pulls", get(crate::issues::pulls))
        .route(
            "/{owner}/{repo}/-/pulls/new",
            get(crate::pull::new_pull).post(crate::pull::create_pull),
        )
        .route(
            "/{owner}/{repo}/-/pulls/{number}",
            get(crate::pull::pull).post(crate::pull::post_pull),
        )
        .route(
            "/{owner}/{repo}/-/pulls/{number}/merge",
            post(crate::pull::merge_pull),
        )
        .route(
            "/{owner}/{repo}/-/pulls/{number}/{file}",
            get(crate::pull_files::pull_files),
        )
}
