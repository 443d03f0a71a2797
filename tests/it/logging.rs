//! Structured logs: with `--log-format json` every line is one JSON object,
//! and every line logged while a request is handled carries its id (the
//! request's own plain `X-Request-Id`, sent back; else a new ULID).

use std::collections::HashMap;
use std::time::Duration;

use serde_json::Value;

use crate::support::*;

/// The request id of a JSON log line, if it was logged inside a request.
fn request_id(line: &Value) -> Option<&str> {
    line["span"]["id"].as_str()
}

#[test]
fn json_lines_carry_the_request_id_on_every_line_of_a_request() {
    let dir = tempfile::tempdir().unwrap();
    let data = data_with_repo(dir.path());
    let token = user_token(&data, "alice", false, "write", &[]);
    let server = TestServer::builder()
        .data(&data)
        .args([
            "--log-format",
            "json",
            "--anonymous-push",
            "--protected-branch",
            "main",
        ])
        .start();
    // A request whose git child complains on stderr: two lines, one id.
    let garbage = b"0014command=nonsense\n0000";
    let r = http(
        server.addr,
        &format!(
            "POST /alice/repo.git/git-upload-pack HTTP/1.1\r\nX-Request-Id: probe-42\r\nGit-Protocol: version=2\r\nContent-Type: application/x-git-upload-pack-request\r\nContent-Length: {}",
            garbage.len()
        ),
        garbage,
    );
    assert_eq!(r.header("x-request-id"), Some("probe-42"));
    // An id that could forge a line is replaced (and, not the request's
    // own, not sent back: a response stays the same for the same request).
    let forged = http(
        server.addr,
        "GET /healthz HTTP/1.1\r\nX-Request-Id: a\"b}",
        b"",
    );
    assert_eq!(forged.header("x-request-id"), None);
    // Work done on a blocking thread logs in its request's span too.
    let body = br#"{"name":"made"}"#;
    let made = http(
        server.addr,
        &format!(
            "POST /api/v1/user/repos HTTP/1.1\r\nX-Request-Id: make-9\r\nAuthorization: Bearer {token}\r\nContent-Type: application/json\r\nContent-Length: {}",
            body.len()
        ),
        body,
    );
    assert_eq!(made.status, 201, "{}", made.text());
    // A push's hook reports are handled over the control socket, in the
    // push request's span: a refused delete of a protected branch.
    let work = worktree(dir.path(), "work");
    let url = server.url("/alice/repo.git");
    git_ok(&work, &["push", "-q", &url, "main"]);
    let refused = git(&work, &["push", "-q", &url, ":main"]);
    assert!(
        !refused.status.success(),
        "deleting a protected branch was allowed"
    );
    // A clone: its requests each get their own id.
    let clone = dir.path().join("clone");
    git_ok(
        dir.path(),
        &[
            "clone",
            "-q",
            &server.url("/alice/repo.git"),
            clone.to_str().unwrap(),
        ],
    );
    assert!(
        server
            .log
            .wait_for(
                &["\"status\":200", "git-upload-pack"],
                Duration::from_secs(10)
            )
            .is_some(),
        "no request line of the clone"
    );
    std::thread::sleep(Duration::from_millis(200));
    let all = server.log.all();
    let lines: Vec<Value> = all
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}")))
        .collect();
    let mut by_id: HashMap<&str, Vec<&Value>> = HashMap::new();
    for line in &lines {
        if let Some(id) = request_id(line) {
            by_id.entry(id).or_default().push(line);
        }
    }
    let probe = by_id.get("probe-42").expect("no line names the request id");
    assert!(
        probe.len() >= 2,
        "the probe's git complaint and its request line should both carry its id: {probe:?}"
    );
    assert!(
        probe.iter().any(|l| l["fields"]["message"] == "request"),
        "{probe:?}"
    );
    // git's own complaint, read from its stderr by another task.
    assert!(
        probe.iter().any(|l| l["fields"]["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("git http-backend: "))),
        "git's stderr line does not carry the request id: {probe:?}\n{}",
        server.log.all()
    );
    assert!(
        by_id.keys().any(|id| id.len() == 26 && by_id[id]
            .iter()
            .any(|l| l["fields"]["path"] == "/healthz")),
        "the request with a forged id got no ULID of its own"
    );
    assert!(!by_id.contains_key("a\"b}"));
    let make = by_id.get("make-9").expect("no line of the repo creation");
    assert!(
        make.iter().any(|l| l["fields"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("created"))),
        "the repo creation's own line does not carry its request id: {make:?}"
    );
    let refusal = lines
        .iter()
        .find(|l| l["fields"]["message"] == "push refused by pre-receive checks")
        .expect("no refusal line");
    let push_id = request_id(refusal).expect("the refusal line carries no request id");
    assert!(
        by_id[push_id]
            .iter()
            .any(|l| l["fields"]["message"] == "request"
                && l["fields"]["path"] == "/alice/repo.git/git-receive-pack"),
        "the refusal's id is not its push request's: {:?}",
        by_id[push_id]
    );
    // Every request line is inside its request's span.
    for line in &lines {
        if line["fields"]["message"] == "request" {
            assert!(
                request_id(line).is_some(),
                "a request line without an id: {line}"
            );
        }
    }
    // Anti-vacuity: the clone's requests were logged, under ids of their own.
    assert!(by_id.len() >= 4, "{} request ids in:\n{all}", by_id.len());
}

#[test]
fn text_lines_name_the_request_too() {
    let server = TestServer::start();
    let r = http(
        server.addr,
        "GET /healthz HTTP/1.1\r\nX-Request-Id: text-7",
        b"",
    );
    assert_eq!(r.status, 200);
    let line = server
        .log
        .wait_for(&["request{id=\"text-7\"}"], Duration::from_secs(10));
    assert!(line.is_some(), "{}", server.log.all());
}
