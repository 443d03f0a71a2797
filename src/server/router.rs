//! Every HTTP route vole serves, registered in one place. Each service's
//! routes get that service's own state; `/api/v1/stats`, which reads every
//! part of the server, is answered here.

use std::sync::Arc;

use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use axum::{Json, Router};

use crate::app::App;
use vole_access::{Principal, ServerAction};
use vole_http::AppError;

/// The whole HTTP application, ready to serve (tests call it too).
pub fn router(app: Arc<App>) -> Router {
    let meta_api = vole_api::routes(app.api.clone(), app.config.api_body_limit);
    let web_routes = vole_web::routes(app.web.clone());
    let site_routes = vole_sites::routes(app.sites.clone());
    let git_routes = vole_transport::routes(app.transport.clone());
    let routes = Router::new()
        .merge(meta_api)
        .merge(web_routes)
        .merge(site_routes)
        .merge(git_routes)
        .route("/healthz", get(healthz))
        .route("/api/v1/stats", get(stats).with_state(app.clone()))
        .route(
            "/metrics",
            get(super::metrics::admin_metrics).with_state(app.clone()),
        )
        // A repo route answers only through `RepoAccess` (a handler that
        // looked its repo up otherwise gets a 500, not its answer).
        .route_layer(axum::middleware::from_fn(
            vole_http::repo_access::require_repo_access,
        ))
        // Every matched route names its template for the metrics.
        .route_layer(axum::middleware::from_fn(route_template))
        .fallback(not_found);
    // Only a server with site domains looks at every request's host.
    let routes = if app.sites.sites.has_domains() {
        routes.layer(axum::middleware::from_fn_with_state(
            app.sites.clone(),
            vole_sites::by_host,
        ))
    } else {
        routes
    };
    // Warm site requests are answered before routing.
    let warm = vole_sites::WarmLayer {
        app: app.sites.clone(),
    };
    // Who the request is, decided before anything answers it (the warm
    // site layer included).
    Router::new()
        .fallback_service(tower::Layer::layer(&warm, routes))
        .layer(axum::middleware::from_fn_with_state(
            app.authn.clone(),
            vole_http::auth::authenticate,
        ))
        .layer(axum::middleware::from_fn(api_errors_as_json))
        .layer(super::request_log::RequestLogLayer {
            metrics: app.http_metrics.clone(),
        })
}

/// Puts the matched route's template in the response's extensions, where
/// the request log finds it ([`vole_stdx::metrics::Route`]).
async fn route_template(
    matched: axum::extract::MatchedPath,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    let route = vole_stdx::metrics::Route(matched.as_str().into());
    let mut response = next.run(request).await;
    response.extensions_mut().insert(route);
    response
}

/// `GET /api/v1/stats`: run-time counters of the logs, the site cache and
/// the metadata store.
async fn stats(
    State(app): State<Arc<App>>,
    axum::Extension(principal): axum::Extension<Principal>,
) -> Result<Json<serde_json::Value>, AppError> {
    app.access
        .check_server(&principal, ServerAction::ReadStats)
        .map_err(|denied| AppError::denied(denied, || "not found".to_string()))?;
    let (site_cache_bytes, site_cache_limit) = app.sites.sites.store.cache_bytes();
    let highlight_cache_bytes = app.web.highlighter.cached_bytes().await;
    Ok(Json(serde_json::json!({
        "log": {
            "refs": app.logs.refs.counters(),
            "meta": app.logs.meta.counters(),
        },
        "site_cache": {
            "bytes": site_cache_bytes,
            "limit": site_cache_limit,
            "sendfile_bytes": vole_http::zero_copy::sent_bytes(),
        },
        "meta": app.meta.stats(),
        "pack_cache": app.control.pack_cache.stats(),
        "reads": {
            "slots_in_use": app.web.reads.in_use(),
            "highlight_cache_bytes": highlight_cache_bytes,
        },
    })))
}

/// Every refusal of an `/api/` path in Gitea's JSON (`{"message",
/// "url"}`): the API's own, and those made before a request reaches it
/// (credentials, rate limits), a path no route has, a method a route
/// does not take.
async fn api_errors_as_json(
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    if !request.uri().path().starts_with("/api/") {
        return next.run(request).await;
    }
    let response = next.run(request).await;
    let status = response.status();
    let json = response
        .headers()
        .get(axum::http::header::CONTENT_TYPE)
        .is_some_and(|t| t.as_bytes().starts_with(b"application/json"));
    if !(status.is_client_error() || status.is_server_error()) || json {
        return response;
    }
    let response = if response
        .extensions()
        .get::<vole_http::error::ErrorMessage>()
        .is_some()
    {
        response
    } else {
        let message = match status {
            StatusCode::NOT_FOUND => "not found".to_string(),
            StatusCode::METHOD_NOT_ALLOWED => "this path does not take this method".to_string(),
            other => other
                .canonical_reason()
                .unwrap_or("refused")
                .to_ascii_lowercase(),
        };
        let (mut parts, _) = response.into_parts();
        parts
            .extensions
            .insert(vole_http::error::ErrorMessage(message));
        axum::response::Response::from_parts(parts, axum::body::Body::empty())
    };
    vole_api::gitea::as_json(response).await
}

async fn healthz() -> &'static str {
    "ok\n"
}

async fn not_found() -> (StatusCode, &'static str) {
    (StatusCode::NOT_FOUND, "not found\n")
}
