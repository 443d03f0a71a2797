//! The site routes' handlers: `/{owner}/{repo}/-/site[/...]` and the
//! middleware that answers configured site domains by host.

use super::*;
use std::collections::HashMap;

use axum::extract::Path;
use vole_http::RepoAccess;
use vole_http::repo_access::ReadSite;

/// `GET /{owner}/{repo}/-/site` -> the slashed form, for a site the
/// visitor may read; built from the validated name only, so an owner that
/// is no repo owner (`%2Fevil.example` would make `//evil.example/...`,
/// another host) is a 404, never a redirect.
pub async fn site_root(access: RepoAccess<ReadSite>) -> Response {
    moved(&format!("/{}/-/site/", access.repo))
}

/// `301 Moved Permanently` to `to`.
pub(super) fn moved(to: &str) -> Response {
    match HeaderValue::from_str(to) {
        Ok(location) => (
            StatusCode::MOVED_PERMANENTLY,
            [(header::LOCATION, location)],
        )
            .into_response(),
        Err(_) => AppError::not_found("not found").into_response(),
    }
}

/// `GET /{owner}/{repo}/-/site/` (the site's root) and
/// `GET /{owner}/{repo}/-/site/{*path}` when [`WarmLayer`] had no answer.
pub async fn site_path(
    State(app): State<Arc<SitesState>>,
    access: RepoAccess<ReadSite>,
    Path(params): Path<HashMap<String, String>>,
    request: Request,
) -> Response {
    // Already percent-decoded by the router; empty for the site's root.
    let path = params.get("path").map_or("", String::as_str);
    let base = format!("/{}/-/site/", access.repo);
    let site_request = SiteRequest {
        key: request.uri().path(),
        method: request.method(),
        headers: request.headers(),
        sandbox: true,
        principal: &access.principal,
    };
    site_request
        .resolve_readable(&app, access.repo.name.clone(), path, &base)
        .await
        .unwrap_or_else(IntoResponse::into_response)
}

/// Serves the site of a configured domain for any path on that host.
pub async fn by_host(State(app): State<Arc<SitesState>>, request: Request, next: Next) -> Response {
    let Some((host, repo)) = app.sites.domain_of(request.headers()) else {
        return next.run(request).await;
    };
    // A host has no `/`, a path starts with one: keys of domains and of the
    // UI's `/{owner}/{repo}/-/site/` paths cannot meet.
    let key = format!("{host}{}", request.uri().path());
    let Some(principal) = principal_of(&request) else {
        return AppError::not_found("not found").into_response();
    };
    let site_request = SiteRequest {
        key: &key,
        method: request.method(),
        headers: request.headers(),
        sandbox: false,
        principal,
    };
    if let Some(answer) = site_request.answer_warm(&app).await {
        return answer.unwrap_or_else(IntoResponse::into_response);
    }
    let decoded = percent_encoding::percent_decode_str(request.uri().path())
        .decode_utf8()
        .map(|p| p.into_owned());
    let Ok(path) = decoded else {
        return AppError::not_found("not found").into_response();
    };
    // Site paths are relative to the site's root.
    let path = path.strip_prefix('/').unwrap_or(&path);
    site_request
        .resolve(&app, repo, path, "/")
        .await
        .unwrap_or_else(IntoResponse::into_response)
}
