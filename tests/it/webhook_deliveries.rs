//! Webhook deliveries against a receiver no one here wrote: Debian's
//! `webhook` (adnanh/webhook), started on loopback with a rule that
//! checks vole's `X-Gitea-Signature` (`payload-hmac-sha256`) and a
//! command that records what it parsed from each payload. A push, a tag,
//! a branch delete, an issue opened, commented and closed, a pull request
//! opened and merged: each arrives once, in order, signed. Then faults:
//! the receiver down (retried, all arrive in order), answering 500,
//! answering past the timeout, vole killed -9 with deliveries pending (every
//! event delivered after the restart, a repeat with the same delivery
//! id); a target the guard refuses at delivery; the history and a
//! redelivery.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::*;
use crate::threads_api::Caller;

const SECRET: &str = "a receiver's shared secret";
const ALL_EVENTS: &str = r#"["push","create","delete","issues","issue_comment","pull_request"]"#;

/// Debian's `webhook` on a loopback port, recording every request its
/// rule lets through to `log` (event, delivery, action, ref, repo,
/// merged), one line each.
pub(crate) struct Receiver {
    child: Option<Child>,
    pub(crate) port: u16,
    dir: PathBuf,
}

impl Receiver {
    pub(crate) fn start(parent: &Path) -> Receiver {
        let port = free_port();
        Receiver::on(parent, port)
    }

    /// On `port` (again, after [`Receiver::stop`]).
    pub(crate) fn on(parent: &Path, port: u16) -> Receiver {
        let dir = parent.join("receiver");
        std::fs::create_dir_all(&dir).unwrap();
        let log = dir.join("received.log");
        let script = dir.join("record.sh");
        std::fs::write(
            &script,
            format!(
                "#!/bin/sh\nprintf '%s\\t%s\\t%s\\t%s\\t%s\\t%s\\n' \"$1\" \"$2\" \"$3\" \"$4\" \"$5\" \"$6\" >> '{}'\n",
                log.display()
            ),
        )
        .unwrap();
        std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
        let arg = |source: &str, name: &str| json!({"source": source, "name": name});
        let hooks = json!([{
            "id": "vole",
            "execute-command": script,
            "command-working-directory": dir,
            "include-command-output-in-response": true,
            "trigger-rule-mismatch-http-response-code": 403,
            "pass-arguments-to-command": [
                arg("header", "X-Gitea-Event"),
                arg("header", "X-Gitea-Delivery"),
                arg("payload", "action"),
                arg("payload", "ref"),
                arg("payload", "repository.full_name"),
                arg("payload", "pull_request.merged"),
            ],
            "trigger-rule": {"match": {
                "type": "payload-hmac-sha256",
                "secret": SECRET,
                "parameter": {"source": "header", "name": "X-Gitea-Signature"},
            }},
        }]);
        let config = dir.join("hooks.json");
        std::fs::write(&config, hooks.to_string()).unwrap();
        let child = Command::new("webhook")
            .args(["-hooks", &config.to_string_lossy(), "-ip", "127.0.0.1"])
            .args(["-port", &port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("Debian's webhook package (apt install webhook; scripts/test installs it)");
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "webhook did not listen");
            std::thread::sleep(Duration::from_millis(20));
        }
        Receiver {
            child: Some(child),
            port,
            dir,
        }
    }

    pub(crate) fn url(&self) -> String {
        format!("http://127.0.0.1:{}/hooks/vole", self.port)
    }

    /// What it recorded, a line split at tabs each.
    pub(crate) fn received(&self) -> Vec<Vec<String>> {
        std::fs::read_to_string(self.dir.join("received.log"))
            .unwrap_or_default()
            .lines()
            .map(|l| l.split('\t').map(str::to_string).collect())
            .collect()
    }

    /// Waits (bounded) until it recorded `count` requests.
    pub(crate) fn wait_for(&self, count: usize, bound: Duration) -> Vec<Vec<String>> {
        let deadline = Instant::now() + bound;
        loop {
            let got = self.received();
            if got.len() >= count || Instant::now() > deadline {
                return got;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub(crate) fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.stop();
    }
}

/// alice/repo on a server that lets hooks reach loopback, a work tree,
/// and alice's admin token.
pub(crate) struct Team {
    pub(crate) forge: Forge,
    pub(crate) work: PathBuf,
    token: String,
}

impl Team {
    pub(crate) fn new(flags: &[&str]) -> Team {
        let mut forge = Forge::new(&["alice/repo"]);
        let token = user_token(&forge.data, "alice", false, "admin", &[]);
        let mut all = vec!["--webhook-allow", "127.0.0.0/8"];
        all.extend_from_slice(flags);
        forge.serve(&all);
        Team {
            work: worktree(&forge.dir, "work"),
            forge,
            token,
        }
    }

    pub(crate) fn caller(&self) -> Caller {
        Caller {
            addr: self.forge.server().addr,
            auth: basic("alice", &self.token),
        }
    }

    /// `git push` of `refspec` as alice.
    pub(crate) fn push(&self, refspec: &str) {
        let url = format!(
            "http://alice:{}@{}/alice/repo.git",
            self.token,
            self.forge.server().addr
        );
        git_ok(&self.work, &["push", "-q", &url, refspec]);
    }

    /// A hook of every event to `url`; its id.
    pub(crate) fn hook(&self, url: &str, events: &str) -> u64 {
        let body = format!(
            r#"{{"type":"gitea","config":{{"url":"{url}","content_type":"json","secret":"{SECRET}"}},"events":{events},"active":true}}"#
        );
        let (status, made) =
            self.caller()
                .call("POST", "/hooks", Some(serde_json::from_str(&body).unwrap()));
        assert_eq!(status, 201, "{made}");
        made["id"].as_u64().unwrap()
    }

    pub(crate) fn deliveries(&self, hook: u64) -> Vec<Value> {
        let (status, listed) =
            self.caller()
                .call("GET", &format!("/hooks/{hook}/deliveries"), None);
        assert_eq!(status, 200, "{listed}");
        listed.as_array().cloned().unwrap_or_default()
    }
}

/// (event, action or ref) of each line, to compare with what was done.
fn story(lines: &[Vec<String>]) -> Vec<(String, String)> {
    lines
        .iter()
        .map(|l| {
            let what = if l[2].is_empty() { &l[3] } else { &l[2] };
            (l[0].clone(), what.clone())
        })
        .collect()
}

fn pairs(expected: &[(&str, &str)]) -> Vec<(String, String)> {
    expected
        .iter()
        .map(|(e, w)| (e.to_string(), w.to_string()))
        .collect()
}

#[test]
fn a_gitea_receiver_gets_every_event_once_in_order_signed() {
    let team = Team::new(&[]);
    let receiver = Receiver::start(&team.forge.dir);
    // The rule is live: an unsigned request is refused, nothing recorded.
    let unsigned = http(
        format!("127.0.0.1:{}", receiver.port).parse().unwrap(),
        "POST /hooks/vole HTTP/1.1\r\nContent-Type: application/json\r\nX-Gitea-Signature: 00\r\nContent-Length: 2",
        b"{}",
    );
    // (webhook 2.8 answers a signature that does not match with a 500.)
    assert!(
        unsigned.status >= 400,
        "the receiver's rule let a bad signature through: {}",
        unsigned.status
    );
    assert!(receiver.received().is_empty());
    team.hook(&receiver.url(), ALL_EVENTS);
    let api = team.caller();

    team.push("main:main");
    git_ok(&team.work, &["tag", "v1"]);
    team.push("refs/tags/v1:refs/tags/v1");
    team.push("main:refs/heads/topic");
    team.push(":refs/heads/topic");
    let (status, issue) = api.call("POST", "/issues", Some(json!({"title": "It breaks"})));
    assert_eq!(status, 201, "{issue}");
    let (status, _) = api.call("POST", "/issues/1/comments", Some(json!({"body": "how?"})));
    assert_eq!(status, 201);
    let (status, closed) = api.call("PATCH", "/issues/1", Some(json!({"state": "closed"})));
    assert!(matches!(status, 200 | 201), "{status} {closed}");
    git_ok(&team.work, &["checkout", "-q", "-b", "feature"]);
    commit_file(&team.work, "feature.txt", b"new\n");
    team.push("feature:feature");
    let (status, pull) = api.call(
        "POST",
        "/pulls",
        Some(json!({"title": "Land it", "head": "feature", "base": "main"})),
    );
    assert_eq!(status, 201, "{pull}");
    let number = pull["number"].as_u64().unwrap();
    let (status, said) = api.call(
        "POST",
        &format!("/pulls/{number}/merge"),
        Some(json!({"Do": "merge"})),
    );
    assert_eq!(status, 200, "{said}");

    let expected = pairs(&[
        ("create", "main"),
        ("push", "refs/heads/main"),
        ("create", "v1"),
        ("push", "refs/tags/v1"),
        ("create", "topic"),
        ("push", "refs/heads/topic"),
        ("delete", "topic"),
        ("issues", "opened"),
        ("issue_comment", "created"),
        ("issues", "closed"),
        ("create", "feature"),
        ("push", "refs/heads/feature"),
        ("pull_request", "opened"),
        ("push", "refs/heads/main"),
        ("pull_request", "closed"),
    ]);
    let got = receiver.wait_for(expected.len(), Duration::from_secs(60));
    // Nothing more comes after them.
    std::thread::sleep(Duration::from_millis(500));
    let got = receiver.received().len().max(got.len());
    let lines = receiver.received();
    assert_eq!(got, lines.len());
    assert_eq!(
        story(&lines),
        expected,
        "not every event, once, in order: {lines:?}"
    );
    for line in &lines {
        assert_eq!(
            line[4], "alice/repo",
            "the receiver parsed no repository: {line:?}"
        );
        assert_eq!(line[1].len(), 36, "a delivery id is a UUID: {line:?}");
    }
    assert_eq!(
        lines.last().unwrap()[5],
        "true",
        "the merge's event says merged"
    );
    let ids: std::collections::HashSet<&String> = lines.iter().map(|l| &l[1]).collect();
    assert_eq!(ids.len(), lines.len(), "two deliveries shared an id");
}
