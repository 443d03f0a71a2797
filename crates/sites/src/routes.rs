//! The sites' route table: a repo's site under `/{owner}/{repo}/-/site`
//! (site domains are answered by host, before routing: `by_host`). The
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
        .with_state(state)
}
