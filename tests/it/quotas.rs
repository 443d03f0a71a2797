//! Per-user quotas of the API: repos under one's name
//! (`--max-repos-per-user`, 403), metadata writes a minute
//! (`--meta-write-rate`, 429 with `Retry-After`), bytes of metadata one
//! authored in one repo (`--max-meta-bytes-per-user`, 403, counted again
//! at start); each refusal names its setting, and the CLI is held to none.

use std::net::SocketAddr;
use std::path::Path;

use serde_json::{Value, json};

use crate::support::*;

/// One API call as the holder of `token`.
fn call(addr: SocketAddr, token: &str, method: &str, path: &str, body: &Value) -> HttpResponse {
    let payload = body.to_string();
    let head = format!(
        "{method} {path} HTTP/1.1\r\nAuthorization: Bearer {token}\r\n\
         Content-Type: application/json\r\nContent-Length: {}",
        payload.len()
    );
    http(addr, &head, payload.as_bytes())
}

fn json_of(response: &HttpResponse) -> Value {
    serde_json::from_slice(&response.body).unwrap_or(Value::Null)
}

/// A data dir with the public repos `alice/one` and `alice/two` and write
/// tokens of alice and bob; a server on it with `flags`.
fn forge(dir: &Path, flags: &[&str]) -> (TestServer, String, String) {
    let data = dir.join("data");
    for repo in ["alice/one", "alice/two"] {
        assert!(run_vole(&data, &["repo", "create", repo]).status.success());
    }
    let alice = user_token(&data, "alice", false, "write", &[]);
    let bob = user_token(&data, "bob", false, "write", &[]);
    (serve(&data, flags), alice, bob)
}

fn serve(data: &Path, flags: &[&str]) -> TestServer {
    let mut builder = TestServer::builder().data(data);
    for flag in flags {
        builder = builder.arg(flag);
    }
    builder.start()
}

#[test]
fn creating_past_max_repos_per_user_is_a_403_naming_it_and_the_cli_is_not_held_to_it() {
    let dir = tempfile::tempdir().unwrap();
    // alice holds two repos already (made by the CLI).
    let (server, alice, bob) = forge(dir.path(), &["--max-repos-per-user", "3"]);
    let create = |token: &str, name: &str| {
        call(
            server.addr,
            token,
            "POST",
            "/api/v1/user/repos",
            &json!({ "name": name }),
        )
    };
    assert_eq!(create(&alice, "three").status, 201);
    let refused = create(&alice, "four");
    assert_eq!(refused.status, 403, "{}", refused.text());
    assert!(
        refused.text().contains("max-repos-per-user") && refused.text().contains("alice has 3"),
        "{}",
        refused.text()
    );
    assert!(!server.data.join("repos/alice/four.git").exists());
    // Per user: bob's own name holds none.
    assert_eq!(create(&bob, "mine").status, 201);
    // Deleting does not make room while the deleted repo is in the trash
    // (create and delete in a loop would fill the disk).
    let admin = user_token(&server.data, "alice", false, "admin", &[]);
    let deleted = call(
        server.addr,
        &admin,
        "DELETE",
        "/api/v1/repos/alice/three",
        &json!({}),
    );
    assert_eq!(deleted.status, 204, "{}", deleted.text());
    let again = create(&alice, "again");
    assert_eq!(again.status, 403, "{}", again.text());
    assert!(
        again.text().contains("1 deleted ones in the trash"),
        "{}",
        again.text()
    );
    // The operator is not held to it.
    let by_cli = run_vole(&server.data, &["repo", "create", "alice/four"]);
    assert!(by_cli.status.success(), "{}", text(&by_cli.stderr));
    server.stop();
}

#[test]
fn metadata_writes_past_meta_write_rate_are_a_429_with_retry_after_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let (server, alice, bob) = forge(dir.path(), &["--meta-write-rate", "3"]);
    let issues = "/api/v1/repos/alice/one/issues";
    let write = |token: &str, title: &str| {
        call(
            server.addr,
            token,
            "POST",
            issues,
            &json!({ "title": title }),
        )
    };
    for n in 0..3 {
        let made = write(&alice, &format!("issue {n}"));
        assert_eq!(made.status, 201, "{}", made.text());
    }
    let refused = write(&alice, "one too many");
    assert_eq!(refused.status, 429, "{}", refused.text());
    assert!(
        refused.text().contains("meta-write-rate"),
        "{}",
        refused.text()
    );
    let retry: u64 = refused.header("retry-after").unwrap().parse().unwrap();
    assert!((1..=60).contains(&retry), "Retry-After: {retry}");
    // Comments count too; reads do not; bob has his own minute.
    let comment = call(
        server.addr,
        &alice,
        "POST",
        &format!("{issues}/1/comments"),
        &json!({ "body": "me too" }),
    );
    assert_eq!(comment.status, 429, "{}", comment.text());
    let listed = http(
        server.addr,
        &format!("GET {issues} HTTP/1.1\r\nAuthorization: Bearer {alice}"),
        b"",
    );
    assert_eq!(listed.status, 200);
    assert_eq!(json_of(&listed).as_array().map(Vec::len), Some(3));
    assert_eq!(write(&bob, "from bob").status, 201);
    server.stop();
}

#[test]
fn a_write_past_max_meta_bytes_per_user_is_a_403_naming_it_and_counted_again_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let flags = ["--max-meta-bytes-per-user", "1KiB"];
    let (server, alice, bob) = forge(dir.path(), &flags);
    let issues = |repo: &str| format!("/api/v1/repos/alice/{repo}/issues");
    let write = |server: &TestServer, token: &str, repo: &str, body: &str| {
        let issue = json!({ "title": "t", "body": body });
        call(server.addr, token, "POST", &issues(repo), &issue)
    };
    let big = "x".repeat(600);
    let first = write(&server, &alice, "one", &big);
    assert_eq!(first.status, 201, "{}", first.text());
    let refused = write(&server, &alice, "one", &big);
    assert_eq!(refused.status, 403, "{}", refused.text());
    assert!(
        refused.text().contains("max-meta-bytes-per-user") && refused.text().contains("1202"),
        "{}",
        refused.text()
    );
    // Per user and per repo.
    assert_eq!(write(&server, &bob, "one", &big).status, 201);
    assert_eq!(write(&server, &alice, "two", &big).status, 201);
    // What adds nothing passes: closing it; a shorter body frees room.
    let issue = json_of(&first);
    let edit = |server: &TestServer, patch: Value| {
        let path = format!("{}/{}", issues("one"), issue["number"]);
        call(server.addr, &alice, "PATCH", &path, &patch)
    };
    let closed = edit(
        &server,
        json!({ "version": issue["version"], "state": "closed" }),
    );
    assert_eq!(closed.status, 201, "{}", closed.text());
    let grown = edit(
        &server,
        json!({ "version": json_of(&closed)["version"], "body": "x".repeat(1100) }),
    );
    assert_eq!(grown.status, 403, "{}", grown.text());
    let data = server.data.clone();
    server.stop();

    // Rebuilt from the documents at start: still 601 bytes of alice's.
    let server = serve(&data, &flags);
    let refused = write(&server, &alice, "one", &big);
    assert_eq!(refused.status, 403, "after a restart: {}", refused.text());
    assert_eq!(write(&server, &alice, "one", "small").status, 201);
    server.stop();
}
