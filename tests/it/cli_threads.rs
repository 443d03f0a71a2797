//! `vole issue` and `vole pr` in a plain clone that fetched `refs/meta/*`,
//! with no server and no data dir: the list as JSON equals the API's once
//! the fold has caught up, the filters are the API's, and text output
//! carries no terminal control characters from what people wrote.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::*;

fn vole_in(dir: &Path, args: &[&str]) -> (bool, String, String) {
    let out = Command::new(vole_bin())
        .args(args)
        .current_dir(dir)
        .env_remove("VOLE_DATA")
        .output()
        .unwrap();
    (out.status.success(), text(&out.stdout), text(&out.stderr))
}

#[test]
fn issues_and_pull_requests_are_read_from_a_clone_alone() {
    let forge = Forge::start(&["alice/repo"], &[]);
    let token = user_token(&forge.data, "alice", false, "admin", &[]);
    let addr = forge.server().addr;
    let api = |method: &str, path: &str, body: Value| {
        let payload = body.to_string();
        let head = format!(
            "{method} /api/v1/repos/alice/repo{path} HTTP/1.1\r\n{}\r\nContent-Type: application/json\r\nContent-Length: {}",
            basic("alice", &token),
            payload.len()
        );
        let response = http(addr, &head, payload.as_bytes());
        (
            response.status,
            serde_json::from_slice::<Value>(&response.body).unwrap_or(Value::Null),
        )
    };
    let work = worktree(&forge.dir, "work");
    let url = format!("http://alice:{token}@{addr}/alice/repo.git");
    git_ok(&work, &["push", "-q", &url, "main", "main:topic"]);
    for (title, labels) in [
        ("First", json!(["bug"])),
        ("red <script>alert(1)</script>", json!([])),
        ("Third", json!(["bug", "ui"])),
    ] {
        assert_eq!(
            api("POST", "/issues", json!({"title": title, "labels": labels})).0,
            201
        );
    }
    // Titles take no control characters; bodies may hold escape sequences.
    let escape = "a comment \u{1b}[31mred\u{1b}[0m\u{7} \u{9b}31m c1 \u{202e}desrever";
    let commented = api("POST", "/issues/1/comments", json!({"body": escape}));
    assert_eq!(commented.0, 201, "{}", commented.1);
    assert_eq!(
        api(
            "PATCH",
            "/issues/3",
            json!({"version": 1, "state": "closed"})
        )
        .0,
        201
    );
    let pr = json!({"title": "Topic", "head": "topic", "base": "main"});
    assert_eq!(api("POST", "/pulls", pr).0, 201);

    let clone = forge.dir.join("clone");
    // The API's objects are Gitea's, the CLI's the documents: the same
    // issues, with the same numbers, titles, states and labels.
    let summary = |list: &Value,
                   labels_of: &dyn Fn(&Value) -> Vec<String>|
     -> Vec<(u64, String, String, Vec<String>)> {
        list.as_array()
            .map(|items| {
                items
                    .iter()
                    .map(|i| {
                        (
                            i["number"].as_u64().unwrap_or(0),
                            i["title"].as_str().unwrap_or_default().to_string(),
                            i["state"].as_str().unwrap_or_default().to_string(),
                            labels_of(i),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default()
    };
    let (_, from_api) = api("GET", "/issues?state=open&type=issues", Value::Null);
    let expected = summary(&from_api, &|i| {
        i["labels"]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| l["name"].as_str().unwrap().to_string())
            .collect()
    });
    let matched = (0..100).find_map(|_| {
        let _ = std::fs::remove_dir_all(&clone);
        git_ok(
            &forge.dir,
            &[
                "clone",
                "-q",
                &format!("http://{addr}/alice/repo.git"),
                "clone",
            ],
        );
        git_ok(
            &clone,
            &["fetch", "-q", "origin", "refs/meta/*:refs/meta/*"],
        );
        let (ok, listed, _) = vole_in(&clone, &["issue", "list", "--json"]);
        let listed: Value = serde_json::from_str(&listed).unwrap_or(Value::Null);
        let names = |i: &Value| {
            i["labels"]
                .as_array()
                .map(|ls| {
                    ls.iter()
                        .map(|l| l.as_str().unwrap_or_default().to_string())
                        .collect()
                })
                .unwrap_or_default()
        };
        if ok && summary(&listed, &names) == expected {
            return Some(listed);
        }
        std::thread::sleep(Duration::from_millis(100));
        None
    });
    let listed = matched
        .unwrap_or_else(|| panic!("the clone's list never equalled the API's: {expected:?}"));
    assert_eq!(
        listed.as_array().unwrap().len(),
        2,
        "anti-vacuity: {listed}"
    );

    let (ok, labelled, _) = vole_in(
        &clone,
        &[
            "issue", "list", "--state", "all", "--label", "bug", "--json",
        ],
    );
    assert!(ok);
    let numbers: Vec<u64> = serde_json::from_str::<Value>(&labelled)
        .unwrap()
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["number"].as_u64().unwrap())
        .collect();
    assert_eq!(numbers, vec![3, 1]);
    let (ok, text_out, _) = vole_in(&clone, &["issue", "list"]);
    assert!(
        ok && text_out.contains("<script>alert(1)</script>") && text_out.contains("red"),
        "{text_out}"
    );
    let (ok, shown, _) = vole_in(&clone, &["issue", "show", "1"]);
    assert!(ok && shown.contains("a comment [31mred"), "{shown:?}");
    assert!(
        !shown.contains('\u{1b}') && !shown.contains('\u{7}'),
        "a control character reached the terminal: {shown:?}"
    );
    assert!(
        shown.contains("c1 desrever") && !shown.contains('\u{9b}') && !shown.contains('\u{202e}'),
        "a C1 control or a bidi override reached the terminal: {shown:?}"
    );
    // In JSON they are escapes, and a JSON reader gets them back.
    let (ok, json_out, _) = vole_in(&clone, &["issue", "show", "1", "--json"]);
    assert!(ok, "{json_out}");
    assert!(
        !json_out.contains('\u{9b}')
            && !json_out.contains('\u{202e}')
            && !json_out.contains('\u{1b}'),
        "--json printed a raw control character: {json_out:?}"
    );
    let parsed: Value = serde_json::from_str(&json_out).unwrap();
    assert_eq!(
        parsed["comments"][0]["body"], escape,
        "--json changed the text"
    );
    let (ok, pulls, _) = vole_in(&clone, &["pr", "list", "--json"]);
    assert!(ok);
    assert_eq!(
        serde_json::from_str::<Value>(&pulls).unwrap()[0]["source_branch"],
        "topic"
    );
    let (ok, _, err) = vole_in(&clone, &["issue", "list", "--state", "merged"]);
    assert!(
        !ok && err.contains("--state must be one of open, closed, all"),
        "{err}"
    );
    let bare = forge.dir.join("bare-clone");
    git_ok(
        &forge.dir,
        &[
            "clone",
            "-q",
            &format!("http://{addr}/alice/repo.git"),
            "bare-clone",
        ],
    );
    let (ok, _, err) = vole_in(&bare, &["issue", "list"]);
    assert!(!ok && err.contains("fetch them first"), "{err}");
}
