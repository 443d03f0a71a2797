//! Webhooks kept by a repo's admins at Gitea's paths: a target the guard
//! refuses (loopback, private, through a name too) is a 422 saying why;
//! `--webhook-allow` opens it; the secret is never shown; a repo deleted
//! and made again under its name has none of the old one's hooks.

use serde_json::Value;

use crate::support::*;

const PASSWORD: &str = "correct horse battery staple";

/// `METHOD path` (under /api/v1) as `auth` ("": none) with a JSON
/// `body`: the status and the JSON.
fn api_call(
    addr: std::net::SocketAddr,
    auth: &str,
    (method, path): (&str, &str),
    body: Option<&str>,
) -> (u16, Value) {
    let mut head = format!("{method} /api/v1{path} HTTP/1.1");
    if !auth.is_empty() {
        head.push_str(&format!("\r\nAuthorization: {auth}"));
    }
    if let Some(body) = body {
        head.push_str(&format!(
            "\r\nContent-Type: application/json\r\nContent-Length: {}",
            body.len()
        ));
    }
    let answer = http(addr, &head, body.unwrap_or("").as_bytes());
    let json = serde_json::from_slice(&answer.body).unwrap_or(Value::Null);
    (answer.status, json)
}

/// [`api_call`] on `alice/repo`'s `path`.
fn call(
    addr: std::net::SocketAddr,
    auth: &str,
    (method, path): (&str, &str),
    body: Option<&str>,
) -> (u16, Value) {
    api_call(
        addr,
        auth,
        (method, &format!("/repos/alice/repo{path}")),
        body,
    )
}

fn hook(url: &str) -> String {
    format!(
        r#"{{"type":"gitea","config":{{"url":"{url}","content_type":"json","secret":"hush-hush"}},"events":["push","issues"],"active":true,"branch_filter":"main"}}"#
    )
}

#[test]
fn a_hook_reaches_only_what_the_guard_allows_and_keeps_its_secret() {
    let mut forge = Forge::new(&["alice/repo"]);
    let admin = format!(
        "token {}",
        user_token(&forge.data, "alice", false, "admin", &[])
    );
    let writer = format!(
        "token {}",
        user_token(&forge.data, "alice", false, "write", &[])
    );
    forge.serve(&[]);
    let addr = forge.server().addr;
    // Loopback, by address and through a name that resolves to it, and a
    // private network: each refused, saying why.
    for (url, says) in [
        ("http://127.0.0.1:9/hook", "loopback"),
        ("http://localhost:9/hook", "loopback"),
        ("http://[::ffff:127.0.0.1]:9/hook", "loopback"),
        ("http://10.1.2.3/hook", "private"),
        ("http://169.254.169.254/latest/meta-data", "link-local"),
        ("ftp://ci.example.org/", "http"),
    ] {
        let (status, said) = call(addr, &admin, ("POST", "/hooks"), Some(&hook(url)));
        assert_eq!(status, 422, "{url}: {said}");
        assert!(
            said["message"].as_str().is_some_and(|m| m.contains(says)),
            "{url}: {said}"
        );
    }
    assert_eq!(
        call(addr, &admin, ("GET", "/hooks"), None).1,
        serde_json::json!([]),
        "a refused hook was kept"
    );

    forge.restart_with(&["--webhook-allow", "127.0.0.0/8,::1"]);
    let addr = forge.server().addr;
    let (status, made) = call(
        addr,
        &admin,
        ("POST", "/hooks"),
        Some(&hook("http://localhost:9/hook")),
    );
    assert_eq!(status, 201, "{made}");
    assert_eq!(made["config"]["url"], "http://localhost:9/hook");
    assert_eq!(made["config"]["content_type"], "json");
    assert_eq!(made["events"], serde_json::json!(["push", "issues"]));
    assert_eq!(
        (&made["active"], &made["type"]),
        (&Value::Bool(true), &Value::from("gitea"))
    );
    let id = made["id"].as_u64().unwrap();
    assert!(id > 0 && id < (1 << 53));
    let path = format!("/hooks/{id}");
    let (status, listed) = call(addr, &admin, ("GET", "/hooks"), None);
    assert_eq!(status, 200);
    assert_eq!(listed[0]["id"], id);
    let (status, edited) = call(
        addr,
        &admin,
        ("PATCH", &path),
        Some(r#"{"active":false,"events":["pull_request"]}"#),
    );
    assert_eq!(status, 200, "{edited}");
    assert_eq!(
        (&edited["active"], &edited["events"][0]),
        (&Value::Bool(false), &Value::from("pull_request"))
    );
    let (status, said) = call(
        addr,
        &admin,
        ("PATCH", &path),
        Some(r#"{"events":["release"]}"#),
    );
    assert_eq!(status, 422, "an event vole has no payload for: {said}");
    // The secret is in no answer, to its admins either.
    for (method, p) in [("GET", "/hooks"), ("GET", path.as_str())] {
        let (_, shown) = call(addr, &admin, (method, p), None);
        assert!(!shown.to_string().contains("hush-hush"), "{shown}");
    }
    // Not the business of a write token or of the anonymous.
    for auth in [writer.as_str(), ""] {
        for (method, p, body) in [
            ("GET", "/hooks", None),
            ("GET", path.as_str(), None),
            ("POST", "/hooks", Some(hook("http://localhost:9/x"))),
            ("DELETE", path.as_str(), None),
        ] {
            let (status, said) = call(addr, auth, (method, p), body.as_deref());
            assert!(
                (400..500).contains(&status) && status != 422,
                "{auth:?} {method} {p}: {status} {said}"
            );
        }
    }
    assert_eq!(call(addr, &admin, ("DELETE", &path), None).0, 204);
    assert_eq!(call(addr, &admin, ("GET", &path), None).0, 404);

    // A repo made again under the name has none of the old one's hooks.
    call(
        addr,
        &admin,
        ("POST", "/hooks"),
        Some(&hook("http://localhost:9/again")),
    );
    assert_eq!(
        call(addr, &admin, ("GET", "/hooks"), None)
            .1
            .as_array()
            .map(Vec::len),
        Some(1)
    );
    if let Some(server) = forge.take_server() {
        server.stop();
    }
    let deleted = run_vole(&forge.data, &["repo", "delete", "alice/repo"]);
    assert!(deleted.status.success(), "{}", text(&deleted.stderr));
    forge.create_repo(&["alice/repo"]);
    forge.restart();
    let addr = forge.server().addr;
    assert_eq!(
        call(addr, &admin, ("GET", "/hooks"), None),
        (200, serde_json::json!([])),
        "a re-made repo has the old one's hooks"
    );
}

#[test]
fn the_settings_page_adds_and_deletes_webhooks_through_the_apis_rules() {
    let mut forge = Forge::new(&["alice/repo"]);
    user_token(&forge.data, "alice", false, "write", &[]);
    user_token(&forge.data, "bob", false, "read", &[]);
    set_password(&forge.data, "alice", PASSWORD);
    set_password(&forge.data, "bob", PASSWORD);
    forge.serve(&["--webhook-allow", "127.0.0.0/8"]);
    let mut alice = Browser::at(&forge, 1);
    assert_eq!(alice.sign_in("alice", PASSWORD, "/").status, 303);
    let page = alice.get("/alice/repo/-/settings");
    assert_eq!(page.status, 200, "{}", page.text());
    assert!(page.text().contains("No webhooks."), "{}", page.text());
    let csrf = hidden_field(&page.text(), "csrf");
    let add = |browser: &mut Browser, url: &str| {
        browser.post(
            "/alice/repo/-/settings/hooks",
            &[
                ("csrf", csrf.as_str()),
                ("action", "add"),
                ("url", url),
                ("secret", "page-secret"),
                ("content_type", "json"),
                ("event_push", "on"),
                ("event_issues", "on"),
                ("branch_filter", ""),
            ],
            "",
        )
    };
    // A private address the server does not open: refused, saying why.
    let refused = add(&mut alice, "http%3A%2F%2F10.0.0.1%2Fhook");
    assert_eq!(refused.status, 422, "{}", refused.text());
    assert!(refused.text().contains("private"), "{}", refused.text());
    let added = add(&mut alice, "http%3A%2F%2F127.0.0.1%3A9%2Fhook");
    assert_eq!(added.status, 303, "{}", added.text());
    let page = alice.get("/alice/repo/-/settings?saved=hooks");
    let html = page.text();
    assert!(
        html.contains("http://127.0.0.1:9/hook") && html.contains("push, issues"),
        "{html}"
    );
    assert!(!html.contains("page-secret"), "the secret is shown");
    // What the API lists is what the page made.
    let admin = format!(
        "token {}",
        user_token(&forge.data, "alice", false, "admin", &[])
    );
    let (_, listed) = call(forge.server().addr, &admin, ("GET", "/hooks"), None);
    assert_eq!(listed[0]["config"]["url"], "http://127.0.0.1:9/hook");
    let id = listed[0]["id"].to_string();
    // A reader's forged POST is refused before any form is read.
    let mut bob = Browser::at(&forge, 2);
    assert_eq!(bob.sign_in("bob", PASSWORD, "/").status, 303);
    let bob_csrf = bob.sign_out_token();
    let forged = bob.post(
        "/alice/repo/-/settings/hooks",
        &[("csrf", &bob_csrf), ("action", "delete"), ("id", &id)],
        "",
    );
    assert_eq!(forged.status, 403, "{}", forged.text());
    let deleted = alice.post(
        "/alice/repo/-/settings/hooks",
        &[("csrf", &csrf), ("action", "delete"), ("id", &id)],
        "",
    );
    assert_eq!(deleted.status, 303, "{}", deleted.text());
    assert!(
        alice
            .get("/alice/repo/-/settings")
            .text()
            .contains("No webhooks.")
    );
}

#[test]
fn the_servers_hooks_are_a_server_admins_and_no_repos() {
    let mut forge = Forge::new(&["alice/repo"]);
    let root = format!(
        "token {}",
        user_token(&forge.data, "root", true, "admin", &[])
    );
    let alice = format!(
        "token {}",
        user_token(&forge.data, "alice", false, "admin", &[])
    );
    forge.serve(&["--webhook-allow", "127.0.0.0/8"]);
    let addr = forge.server().addr;
    let admin_call = |auth: &str, method: &str, path: &str, body: Option<&str>| {
        api_call(addr, auth, (method, &format!("/admin/hooks{path}")), body)
    };
    let body = hook("http://127.0.0.1:9/everything");
    let (status, made) = admin_call(&root, "POST", "", Some(&body));
    assert_eq!(status, 201, "{made}");
    let id = made["id"].to_string();
    assert_eq!(admin_call(&root, "GET", "", None).1[0]["id"], made["id"]);
    assert_eq!(admin_call(&root, "GET", &format!("/{id}"), None).0, 200);
    // A repo's admin is no server admin; the anonymous are asked who.
    assert_eq!(admin_call(&alice, "GET", "", None).0, 403);
    assert_eq!(admin_call(&alice, "POST", "", Some(&body)).0, 403);
    assert_eq!(admin_call("", "GET", "", None).0, 401);
    // The guard holds here too.
    let (status, said) = admin_call(&root, "POST", "", Some(&hook("http://10.0.0.1/x")));
    assert_eq!(status, 422, "{said}");
    // Not a repo's hook, nor reachable through one.
    assert_eq!(
        call(addr, &alice, ("GET", "/hooks"), None).1,
        serde_json::json!([])
    );
    assert_eq!(
        call(addr, &alice, ("GET", &format!("/hooks/{id}")), None).0,
        404
    );
    assert_eq!(admin_call(&root, "DELETE", &format!("/{id}"), None).0, 204);
    assert_eq!(admin_call(&root, "GET", &format!("/{id}"), None).0, 404);
}
