//! Endpoints only Gitea's clients ask for, answered as Gitea answers them
//! (its published OpenAPI document): `GET /api/v1/version`; and the API's
//! errors in Gitea's shape ([`as_json`]).

pub mod branches;
pub mod comments;
pub mod commits;
pub mod contents;
pub mod git_objects;
pub mod hook_deliveries;
pub mod hooks;
pub mod issues;
pub mod labels;
pub mod objects;
pub mod payloads;
pub mod pull_object;
pub mod pulls;
pub mod shape;
pub mod tokens;
pub mod users;

use axum::Json;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use vole_http::error::ErrorMessage;

/// Where an API error points its reader: Gitea points to its API's
/// documentation page; vole serves none (docs/api.md is in its source),
/// so the field is there, empty, for the clients that read it.
pub const ERROR_URL: &str = "";

/// An error as Gitea's API answers it (its `APIError`).
#[derive(Debug, Serialize)]
struct ApiError<'a> {
    message: &'a str,
    url: &'a str,
}

/// Renders an error response of the API's routes as Gitea's JSON error
/// (`{"message", "url"}`), the status and every other header kept.
pub async fn as_json(response: Response) -> Response {
    let Some(ErrorMessage(message)) = response.extensions().get::<ErrorMessage>().cloned() else {
        return response;
    };
    let (mut parts, _) = response.into_parts();
    parts.headers.remove(header::CONTENT_LENGTH);
    parts.headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    let body = Json(ApiError {
        message: &message,
        url: ERROR_URL,
    })
    .into_response()
    .into_body();
    Response::from_parts(parts, body)
}

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
