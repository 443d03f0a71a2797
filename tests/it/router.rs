//! The router built by one function (`vole::server::router`) over a real
//! `App` on a temporary data dir, driven in-process with
//! `tower::ServiceExt::oneshot`: the routes that need no git child and no
//! socket. Each answer is checked for status, type and words.

use std::sync::Arc;

use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use http_body_util::BodyExt;
use tower::ServiceExt;

use vole::app::App;
use vole_config::{Config, Settings};
use vole_git::Git;
use vole_git::datadir::DataDir;

struct Routed {
    _dir: tempfile::TempDir,
    app: Arc<App>,
    admin_token: String,
}

fn app() -> Routed {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let config = Config::resolve(
        Settings {
            data: Some(data.clone()),
            ..Settings::default()
        },
        None,
    )
    .unwrap();
    DataDir::new(data).prepare().unwrap();
    let git = Git::locate(None).unwrap();
    let app = Arc::new(App::open(config, git).unwrap());
    app.control
        .create_repo(
            vole_control::NewRepo {
                name: "alice/repo".into(),
                description: Some("a repo".into()),
                ..Default::default()
            },
            vole_control::Actor::CLI,
        )
        .unwrap();
    app.accounts
        .add_user(
            vole_accounts::NewUser {
                name: "root".into(),
                full_name: String::new(),
                email: "root@example.org".into(),
                admin: true,
                password: None,
            },
            "test",
        )
        .unwrap();
    let (_, admin_token) = app
        .accounts
        .create_token(
            vole_accounts::NewTokenRequest {
                name: "root".into(),
                user: "root".into(),
                scope: vole_meta::entity::Scope::Admin,
                repos: Vec::new(),
                expires_in: None,
            },
            "test",
        )
        .unwrap();
    Routed {
        _dir: dir,
        app,
        admin_token,
    }
}

async fn get(routed: &Routed, uri: &str) -> (StatusCode, String, String) {
    get_as(routed, uri, None).await
}

async fn get_as(routed: &Routed, uri: &str, token: Option<&str>) -> (StatusCode, String, String) {
    let mut request = Request::get(uri);
    if let Some(token) = token {
        request = request.header(header::AUTHORIZATION, format!("Bearer {token}"));
    }
    let response = vole::server::router(routed.app.clone())
        .oneshot(request.body(Body::empty()).unwrap())
        .await
        .unwrap();
    let status = response.status();
    let kind = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    (status, kind, String::from_utf8_lossy(&body).into_owned())
}

#[tokio::test]
async fn routes_that_need_no_git_answer_in_process() {
    let routed = app();
    let (status, _, body) = get(&routed, "/healthz").await;
    assert_eq!((status, body.as_str()), (StatusCode::OK, "ok\n"));

    // The counters are a server admin's.
    let (status, _, _) = get(&routed, "/api/v1/stats").await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let (status, kind, body) = get_as(&routed, "/api/v1/stats", Some(&routed.admin_token)).await;
    assert_eq!(status, StatusCode::OK);
    assert!(kind.starts_with("application/json"), "{kind}");
    let stats: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert!(
        stats["log"]["refs"].is_object() && stats["meta"].is_object(),
        "{body}"
    );

    let (status, kind, body) = get(&routed, "/static/style.css").await;
    assert_eq!(status, StatusCode::OK);
    assert!(kind.starts_with("text/css"), "{kind}");
    assert!(!body.is_empty());
    let (status, kind, _) = get(&routed, "/static/nothing.js").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(
        kind.starts_with("text/html"),
        "web errors are pages: {kind}"
    );

    // The home page lists the repo, with its description.
    let (status, kind, body) = get(&routed, "/").await;
    assert_eq!(status, StatusCode::OK);
    assert!(kind.starts_with("text/html"));
    assert!(
        body.contains("alice/repo") && body.contains("a repo"),
        "{body}"
    );
    let (status, _, paged) = get(&routed, "/?page=18446744073709551615").await;
    assert_eq!(
        (status, paged),
        (StatusCode::OK, body),
        "a hostile page is page 1"
    );

    // An empty repo's home says how to push to it.
    let (status, _, body) = get(&routed, "/alice/repo").await;
    assert_eq!(status, StatusCode::OK);
    assert!(body.contains("git push"), "{body}");

    // A missing repo: a page for the web, text for the API, the same status.
    let (status, kind, body) = get(&routed, "/alice/nope/-/tree/main").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(kind.starts_with("text/html") && body.contains("There is no repository alice/nope."));
    // Asked anonymously or by a user, the API says it is not found, as
    // Gitea's does (a private repo answers the same).
    let (status, kind, body) = get(&routed, "/api/v1/repos/alice/nope/issues").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(kind, "application/json");
    let missing = r#"{"message":"repository alice/nope not found","url":""}"#;
    assert_eq!(body, missing);
    let (status, kind, body) = get_as(
        &routed,
        "/api/v1/repos/alice/nope/issues",
        Some(&routed.admin_token),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(kind, "application/json");
    assert_eq!(
        body, missing,
        "a missing repo answers the anonymous and a user alike"
    );

    // The API's lists: empty, paginated, and strict about pages.
    let (status, _, body) = get(&routed, "/api/v1/repos/alice/repo/issues").await;
    assert_eq!((status, body.as_str()), (StatusCode::OK, "[]"));
    let (status, _, body) = get(&routed, "/api/v1/repos/alice/repo/issues?per_page=500").await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(
        body.contains("per_page must be a whole number from 1 to 100"),
        "{body}"
    );

    // Writes need credentials: a 401 that says how.
    let response = vole::server::router(routed.app.clone())
        .oneshot(
            Request::post("/api/v1/repos/alice/repo/issues")
                .header(header::CONTENT_TYPE, "application/json")
                .body(Body::from(r#"{"title":"x"}"#))
                .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(
        response.headers()[header::WWW_AUTHENTICATE],
        "Basic realm=\"vole\""
    );
    let body = response.into_body().collect().await.unwrap().to_bytes();
    assert!(String::from_utf8_lossy(&body).contains("Authorization: Bearer"));

    // Anything else is the router's plain 404.
    let (status, _, body) = get(&routed, "/a/b/c/d/e").await;
    assert_eq!(
        (status, body.as_str()),
        (StatusCode::NOT_FOUND, "not found\n")
    );
}
