//! The ACL is the server's, not the repo's: who the members are is in the
//! system repo, so nothing a reader can fetch (every ref upload-pack
//! advertises, every object reachable from them, the raw view of a shard
//! tip) holds it, while the issues stay in the clone.

use serde_json::{Value, json};

use crate::support::*;

fn call(server: &TestServer, method: &str, path: &str, token: &str, body: &Value) -> HttpResponse {
    let payload = body.to_string();
    let head = format!(
        "{method} {path} HTTP/1.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\nAuthorization: Bearer {token}",
        payload.len()
    );
    http(server.addr, &head, payload.as_bytes())
}

#[test]
fn no_object_a_reader_can_fetch_holds_the_acl_and_the_issues_are_in_the_clone() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let alice = user_token(&data, "alice", false, "admin", &[]);
    for member in ["zelda-the-member", "yorick-the-reader"] {
        let _ = user_token(&data, member, false, "read", &[]);
    }
    let made = run_vole(&data, &["repo", "create", "alice/team"]);
    assert!(made.status.success(), "{}", text(&made.stderr));
    let server = TestServer::builder().data(&data).start();
    // Two versions of the ACL (history, not only a tip), an issue.
    let first = call(
        &server,
        "PUT",
        "/api/v1/repos/alice/team/acl",
        &alice,
        &json!({"version": 0, "visibility": "public", "members": [{"name": "zelda-the-member", "role": "write"}]}),
    );
    assert_eq!(first.status, 200, "{}", first.text());
    let second = call(
        &server,
        "PUT",
        "/api/v1/repos/alice/team/acl",
        &alice,
        &json!({"version": 1, "visibility": "public", "members": [{"name": "yorick-the-reader", "role": "read"}]}),
    );
    assert_eq!(second.status, 200, "{}", second.text());
    let issue = call(
        &server,
        "POST",
        "/api/v1/repos/alice/team/issues",
        &alice,
        &json!({"title": "an issue every reader may see"}),
    );
    assert_eq!(issue.status, 201, "{}", issue.text());
    let work = worktree(dir.path(), "work");
    git_ok(
        &work,
        &[
            "push",
            "-q",
            &server
                .url("/alice/team.git")
                .replace("http://", &format!("http://alice:{alice}@")),
            "HEAD:main",
        ],
    );
    // Folded into the shard refs before anyone fetches.
    assert!(
        eventually(std::time::Duration::from_secs(10), || {
            let refs = git(dir.path(), &["ls-remote", &server.url("/alice/team.git")]);
            text(&refs.stdout).contains("refs/meta/shards/")
        }),
        "no shard ref was advertised"
    );
    std::thread::sleep(std::time::Duration::from_millis(500));

    // Everything an anonymous reader can fetch, by every ref advertised.
    let mirror = dir.path().join("mirror.git");
    git_ok(
        dir.path(),
        &["init", "-q", "--bare", mirror.to_str().unwrap()],
    );
    git_ok(
        &mirror,
        &[
            "fetch",
            "-q",
            &server.url("/alice/team.git"),
            "+refs/*:refs/*",
        ],
    );
    let objects = git_ok(&mirror, &["rev-list", "--objects", "--all"]);
    let ids: Vec<&str> = objects
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert!(ids.len() > 5, "hardly anything was fetched: {objects}");
    let mut everything = Vec::new();
    for id in &ids {
        everything.extend(
            git_command(&mirror)
                .args(["cat-file", "-p", id])
                .output()
                .unwrap()
                .stdout,
        );
        everything.push(b'\n');
    }
    let everything = String::from_utf8_lossy(&everything);
    // Anti-vacuity: the metadata was fetched and read.
    assert!(
        everything.contains("an issue every reader may see"),
        "the issues are not in what a reader fetches"
    );
    for needle in ["zelda-the-member", "yorick-the-reader", "\"members\""] {
        assert!(
            !everything.contains(needle),
            "an object a reader can fetch holds the ACL ({needle:?})"
        );
    }
    // Nor does the raw view of any shard tip serve it.
    let refs = git_ok(
        &mirror,
        &[
            "for-each-ref",
            "--format=%(objectname) %(refname)",
            "refs/meta/",
        ],
    );
    for line in refs.lines() {
        let tip = line.split_whitespace().next().unwrap();
        let raw = http_get(
            server.addr,
            &format!("/alice/team/-/raw/{tip}/repo/acl.json"),
        );
        assert_eq!(raw.status, 404, "{line}: {}", raw.text());
    }
    // The ACL still decides, and its admins still read it.
    let acl = http(
        server.addr,
        &format!("GET /api/v1/repos/alice/team/acl HTTP/1.1\r\nAuthorization: Bearer {alice}"),
        b"",
    );
    assert_eq!(acl.status, 200);
    assert!(acl.text().contains("yorick-the-reader"), "{}", acl.text());
}
