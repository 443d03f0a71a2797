//! The sites' route table: a repo's site under `/{owner}/{repo}/-/site`,
//! where a browser's session counts as on the web pages (site domains are
//! answered by host, before routing: `by_host`). The
//! router (`vole`'s `server/router.rs`) merges it with the other
//! services'.

use std::sync::Arc;

use axum::Router;
use axum::routing::get;

use crate::SitesState;

/// The sites' routes.
pub fn routes(state: Arc<SitesState>) -> Router {
    Router::new()
        .route("/{owner}/{repo}/-/site", get(crate::site_root))
        .route("/{owner}/{repo}/-/site/", get(crate::site_path))
        .route("/{owner}/{repo}/-/site/{*path}", get(crate::site_path))
        .layer(axum::middleware::from_fn_with_state(
            state.sessions.clone(),
            vole_http::browser::session_principal,
        ))
        .with_state(state)
}
