//! Endpoints only Gitea's clients ask for, answered as Gitea answers them
//! (its published OpenAPI document): `GET /api/v1/version`.

use axum::Json;
use serde::Serialize;

/// The Gitea API version vole answers as: clients (Gitea's Go SDK, tea,
/// IDE plugins) read it to decide which endpoints they may call.
pub const GITEA_API_VERSION: &str = "1.22.0";

#[derive(Debug, Serialize)]
pub struct ServerVersion {
    pub version: String,
}

/// `GET /api/v1/version`: the Gitea API version vole follows, with vole's
/// own as semver build metadata (`1.22.0+vole-0.1.0`), as Forgejo names
/// the Gitea version it follows in its own.
pub async fn version() -> Json<ServerVersion> {
    Json(ServerVersion {
        version: format!("{GITEA_API_VERSION}+vole-{}", env!("CARGO_PKG_VERSION")),
    })
}
