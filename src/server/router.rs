//! Every HTTP route vole serves, registered in one place. Each service's
//! routes get that service's own state; `/api/v1/stats`, which reads every
//! part of the server, is answered here.

use std::sync::Arc;

use axum::extract::{DefaultBodyLimit, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::{Json, Router};

use crate::app::App;
use vole_access::{Principal, ServerAction};
use vole_http::AppError;

/// The whole HTTP application, ready to serve (tests call it too).
pub fn router(app: Arc<App>) -> Router {
    use vole_api::meta;
    let meta_api = Router::new()
        .route(
            "/api/v1/repos/{owner}/{repo}/issues",
            get(meta::list_issues).post(meta::create_issue),
        )
        .route(
            "/api/v1/repos/{owner}/{repo}/issues/{number}",
            get(meta::get_issue).patch(meta::edit_issue),
        )
        .route(
            "/api/v1/repos/{owner}/{repo}/issues/{number}/comments",
            get(meta::list_issue_comments).post(meta::add_issue_comment),
        )
        .route(
            "/api/v1/repos/{owner}/{repo}/changes",
            get(meta::list_changes).post(meta::create_change),
        )
        .route(
            "/api/v1/repos/{owner}/{repo}/changes/{number}",
            get(meta::get_change).patch(meta::edit_change),
        )
        .route(
            "/api/v1/repos/{owner}/{repo}/changes/{number}/comments",
            get(meta::list_change_comments).post(meta::add_change_comment),
        )
        .route(
            "/api/v1/repos/{owner}/{repo}/acl",
            get(meta::get_acl).put(meta::put_acl),
        )
        .route(
            "/api/v1/repos/{owner}/{repo}/settings",
            get(meta::get_settings).put(meta::put_settings),
        )
        .layer(DefaultBodyLimit::max(
            usize::try_from(app.config.api_body_limit).unwrap_or(usize::MAX),
        ))
        .route(
            "/api/v1/repos",
            get(vole_api::repos::list).post(vole_api::repos::create),
        )
        .route(
            "/api/v1/repos/{owner}/{repo}",
            get(vole_api::repos::get).delete(vole_api::repos::delete),
        )
        .route(
            "/api/v1/repos/{owner}/{repo}/activity",
            get(vole_api::repo_activity),
        )
        .with_state(app.api.clone());
    let web_routes = Router::new()
        .route("/", get(vole_web::home))
        .route("/static/{file}", get(vole_web::static_file))
        .route("/{owner}/{repo}", get(vole_web::repo_home))
        .route("/{owner}/{repo}/-/tree/{rev}", get(vole_web::tree_root))
        .route("/{owner}/{repo}/-/tree/{rev}/{*path}", get(vole_web::tree))
        .route("/{owner}/{repo}/-/blob/{rev}/{*path}", get(vole_web::blob))
        .route(
            "/{owner}/{repo}/-/blame/{rev}/{*path}",
            get(vole_web::blame::blame),
        )
        .route("/{owner}/{repo}/-/raw/{rev}/{*path}", get(vole_web::raw))
        .route(
            "/{owner}/{repo}/-/commits/{rev}",
            get(vole_web::history::log_root),
        )
        .route(
            "/{owner}/{repo}/-/commits/{rev}/{*path}",
            get(vole_web::history::log_path),
        )
        .route(
            "/{owner}/{repo}/-/commit/{id}",
            get(vole_web::history::commit),
        )
        .route(
            "/{owner}/{repo}/-/branches",
            get(vole_web::history::branches),
        )
        .route("/{owner}/{repo}/-/tags", get(vole_web::history::tags))
        .route(
            "/{owner}/{repo}/-/activity",
            get(vole_web::history::activity),
        )
        .route(
            "/{owner}/{repo}/-/archive/{file}",
            get(vole_web::history::archive),
        )
        .layer(axum::middleware::map_response(vole_web::as_page))
        .with_state(app.web.clone());
    let site_routes = Router::new()
        .route("/{owner}/{repo}/-/site", get(vole_sites::site_root))
        .route("/{owner}/{repo}/-/site/", get(vole_sites::site_path))
        .route("/{owner}/{repo}/-/site/{*path}", get(vole_sites::site_path))
        .with_state(app.sites.clone());
    let git_routes = Router::new()
        .route("/{owner}/{repo}/info/refs", get(vole_transport::info_refs))
        .route(
            "/{owner}/{repo}/git-upload-pack",
            post(vole_transport::upload_pack),
        )
        .route(
            "/{owner}/{repo}/git-receive-pack",
            post(vole_transport::receive_pack),
        )
        .with_state(app.transport.clone());
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
            "highlight_cache_bytes": app.web.highlighter.cached_bytes(),
        },
    })))
}

async fn healthz() -> &'static str {
    "ok\n"
}

async fn not_found() -> (StatusCode, &'static str) {
    (StatusCode::NOT_FOUND, "not found\n")
}
