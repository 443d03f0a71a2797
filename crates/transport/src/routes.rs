//! The smart-HTTP route table: the ref advertisement and the two
//! services. The router (`vole`'s `server/router.rs`) merges it with the
//! other services'.

use std::sync::Arc;

use axum::Router;
use axum::routing::{get, post};

use crate::Transport;

/// The transport's routes.
pub fn routes(state: Arc<Transport>) -> Router {
    Router::new()
        .route("/{owner}/{repo}/info/refs", get(crate::info_refs))
        .route("/{owner}/{repo}/git-upload-pack", post(crate::upload_pack))
        .route(
            "/{owner}/{repo}/git-receive-pack",
            post(crate::receive_pack),
        )
        .with_state(state)
}
