//! The rules on issues and comments in the JSON API, against a real
//! server: a comment edited (PATCH, its version) and deleted (DELETE) by
//! its author or an admin of the repo and by no one else; labels set by
//! writers only, an author's own issue included.

use serde_json::{Value, json};

use crate::support::*;

/// A client of alice/repo's API with one credential (an `Authorization`
/// header line).
pub(crate) struct Caller {
    pub(crate) addr: std::net::SocketAddr,
    pub(crate) auth: String,
}

impl Caller {
    pub(crate) fn call(&self, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
        let payload = body.map(|b| b.to_string()).unwrap_or_default();
        let head = format!(
            "{method} /api/v1/repos/alice/repo{path} HTTP/1.1\r\n{}\r\nContent-Type: application/json\r\nContent-Length: {}",
            self.auth,
            payload.len()
        );
        let response = http(self.addr, &head, payload.as_bytes());
        // A refusal's body is its message, as text.
        let value = serde_json::from_slice(&response.body)
            .unwrap_or_else(|_| Value::String(response.text()));
        (response.status, value)
    }
}

#[test]
fn comments_are_rewritten_by_their_author_or_an_admin_and_labels_by_writers() {
    let forge = Forge::start(&["alice/repo"], &[]);
    let caller = |user: &str| Caller {
        addr: forge.server().addr,
        auth: basic(user, &user_token(&forge.data, user, false, "admin", &[])),
    };
    let (alice, bob, carol) = (caller("alice"), caller("bob"), caller("carol"));
    let acl = json!({"visibility": "public", "members": [{"name": "carol", "role": "write"}]});
    assert_eq!(alice.call("PUT", "/acl", Some(acl)).0, 200);

    // bob (a reader) files an issue; he may not label it, even his own.
    let (status, body) = bob.call(
        "POST",
        "/issues",
        Some(json!({"title": "t", "labels": ["bug"]})),
    );
    assert_eq!(status, 403, "{body}");
    let (status, issue) = bob.call("POST", "/issues", Some(json!({"title": "t"})));
    assert_eq!(status, 201, "{issue}");
    let (status, body) = bob.call(
        "PATCH",
        "/issues/1",
        Some(json!({"version": 1, "labels": ["bug"]})),
    );
    assert_eq!(status, 403, "an author labelling their own: {body}");
    assert!(body.to_string().contains("may set labels"), "{body}");
    // The same labels again is no relabelling: his title edit goes through.
    let (status, body) = bob.call(
        "PATCH",
        "/issues/1",
        Some(json!({"version": 1, "title": "t2", "labels": []})),
    );
    // An edit is answered 201, as Gitea answers it.
    assert_eq!(status, 201, "{body}");
    let (status, body) = carol.call(
        "PATCH",
        "/issues/1",
        Some(json!({"version": 2, "labels": ["bug"]})),
    );
    assert_eq!(status, 201, "a writer labels: {body}");

    let (status, comment) = bob.call("POST", "/issues/1/comments", Some(json!({"body": "first"})));
    assert_eq!(status, 201, "{comment}");
    let id = comment["id"].as_u64().unwrap();
    let path = format!("/issues/1/comments/{id}");
    // carol may push but is not an admin: not hers to edit or delete.
    let (status, body) = carol.call("PATCH", &path, Some(json!({"version": 1, "body": "carol"})));
    assert_eq!(status, 403, "{body}");
    assert_eq!(carol.call("DELETE", &path, None).0, 403);
    // Without a version, the current one; with a stale one: refused.
    let (status, body) = bob.call("PATCH", &path, Some(json!({"body": "x"})));
    assert_eq!((status, body["version"].as_u64()), (200, Some(2)), "{body}");
    let (status, edited) = bob.call(
        "PATCH",
        &path,
        Some(json!({"version": 2, "body": "second"})),
    );
    assert_eq!(
        (status, edited["body"].as_str()),
        (200, Some("second")),
        "{edited}"
    );
    let (status, body) = bob.call("PATCH", &path, Some(json!({"version": 2, "body": "stale"})));
    assert_eq!(status, 409, "{body}");
    // alice (an admin of the repo) deletes it; it is gone from the list.
    let (status, _) = alice.call("DELETE", &path, None);
    assert_eq!(status, 204);
    let (status, list) = bob.call("GET", "/issues/1/comments", None);
    assert_eq!(status, 200);
    assert_eq!(list, json!([]), "a deleted comment is still listed");
    assert_eq!(
        bob.call("PATCH", &path, Some(json!({"version": 3, "body": "back"})))
            .0,
        404
    );
    // Anti-vacuity: a comment of another thread's id is not this one's.
    let (_, other) = carol.call("POST", "/issues", Some(json!({"title": "o"})));
    let wrong = format!("/issues/{}/comments/{id}", other["number"]);
    assert_eq!(alice.call("DELETE", &wrong, None).0, 404);
    // Moderation needs an admin's credential, not only an admin's role.
    let (_, other_comment) = carol.call("POST", "/issues/1/comments", Some(json!({"body": "c"})));
    let carols = format!(
        "/issues/1/comments/{}",
        other_comment["id"].as_u64().unwrap()
    );
    let write_only = Caller {
        addr: forge.server().addr,
        auth: basic(
            "alice",
            &user_token(&forge.data, "alice", false, "write", &[]),
        ),
    };
    let (status, body) = write_only.call("DELETE", &carols, None);
    assert_eq!(
        status, 403,
        "an admin's write-scope token moderated: {body}"
    );
    assert_eq!(alice.call("DELETE", &carols, None).0, 204);
}

#[test]
fn a_write_whose_body_arrives_after_the_repo_was_made_again_writes_nothing() {
    let forge = Forge::start(&["alice/repo"], &[]);
    let alice = Caller {
        addr: forge.server().addr,
        auth: basic(
            "alice",
            &user_token(&forge.data, "alice", false, "admin", &[]),
        ),
    };
    // Decided on the first alice/repo: the head is in, the body is not.
    let body = json!({"title": "lands where?"}).to_string();
    let mut stalled = std::net::TcpStream::connect(forge.server().addr).unwrap();
    let head = format!(
        "POST /api/v1/repos/alice/repo/issues HTTP/1.1\r\nHost: x\r\n{}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        alice.auth,
        body.len()
    );
    std::io::Write::write_all(&mut stalled, head.as_bytes()).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(300));
    // Deleted and made again under the name meanwhile.
    let deleted = http(
        forge.server().addr,
        &format!("DELETE /api/v1/repos/alice/repo HTTP/1.1\r\n{}", alice.auth),
        b"",
    );
    assert_eq!(deleted.status, 204, "{}", deleted.text());
    let made = json!({"name": "repo"}).to_string();
    let created = http(
        forge.server().addr,
        &format!(
            "POST /api/v1/user/repos HTTP/1.1\r\n{}\r\nContent-Type: application/json\r\nContent-Length: {}",
            alice.auth,
            made.len()
        ),
        made.as_bytes(),
    );
    assert_eq!(created.status, 201, "{}", created.text());
    std::io::Write::write_all(&mut stalled, body.as_bytes()).unwrap();
    let mut answer = Vec::new();
    std::io::Read::read_to_end(&mut stalled, &mut answer).unwrap();
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 404"), "{answer}");
    let (status, issues) = alice.call("GET", "/issues", None);
    assert_eq!(
        (status, issues),
        (200, json!([])),
        "the new repo got the old one's issue"
    );
}

#[test]
fn thread_writes_take_gitea_bodies_unknown_fields_nulls_and_no_version() {
    let forge = Forge::start(&["alice/repo"], &[]);
    let alice = Caller {
        addr: forge.server().addr,
        auth: basic(
            "alice",
            &user_token(&forge.data, "alice", false, "write", &[]),
        ),
    };
    // As Gitea's clients send it: fields vole does not know, nulls.
    let (status, issue) = alice.call(
        "POST",
        "/issues",
        Some(
            json!({"title": "from a Gitea client", "body": null, "labels": null,
                    "assignees": ["bob"], "milestone": 0, "closed": false}),
        ),
    );
    assert_eq!(status, 201, "{issue}");
    assert_eq!(
        (issue["body"].as_str(), issue["version"].as_u64()),
        (Some(""), Some(1))
    );
    // An edit with no version applies to the current one.
    let (status, edited) = alice.call(
        "PATCH",
        "/issues/1",
        Some(json!({"title": "renamed", "body": null, "due_date": null})),
    );
    assert_eq!(status, 201, "{edited}");
    assert_eq!(edited["title"], "renamed");
    assert_eq!(edited["version"], 2);
    // One that names a version still has to name the current one.
    let (status, stale) = alice.call(
        "PATCH",
        "/issues/1",
        Some(json!({"version": 1, "title": "x"})),
    );
    assert_eq!(status, 409, "a stale version was applied: {stale}");
    // A field the server alone writes is one a comment does not take:
    // ignored, not forged.
    let (status, comment) = alice.call(
        "POST",
        "/issues/1/comments",
        Some(json!({"body": "hi", "extra": 1,
                    "event": {"pushed": {"before": "a", "after": "b", "commits": 3}},
                    "author": "mallory"})),
    );
    assert_eq!(status, 201, "{comment}");
    assert!(
        comment.get("event").is_none() && comment["user"]["login"] == "alice",
        "a comment's body set what only the server sets: {comment}"
    );
    let id = comment["id"].as_u64().unwrap();
    let (status, edited) = alice.call(
        "PATCH",
        &format!("/issues/1/comments/{id}"),
        Some(json!({"body": "hello"})),
    );
    assert_eq!(status, 200, "{edited}");
    assert_eq!(
        (edited["body"].as_str(), edited["version"].as_u64()),
        (Some("hello"), Some(2))
    );
}
