//! Metadata over the JSON API against a real server: every endpoint and
//! its errors, a fresh clone carrying the same entities the API returns,
//! and kill -9 in the middle of a burst of writes.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::Write;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::*;

fn api(
    addr: SocketAddr,
    method: &str,
    path: &str,
    body: Option<&Value>,
) -> (u16, Value, HttpResponse) {
    let payload = body.map(|b| b.to_string()).unwrap_or_default();
    let head = if body.is_some() {
        format!(
            "{method} {path} HTTP/1.1\r\nContent-Type: application/json\r\nContent-Length: {}",
            payload.len()
        )
    } else {
        format!("{method} {path} HTTP/1.1")
    };
    let head = match token_for(addr) {
        Some(token) => format!("{head}\r\nAuthorization: Bearer {token}"),
        None => head,
    };
    let response = http(addr, &head, payload.as_bytes());
    let value = serde_json::from_slice(&response.body).unwrap_or(Value::Null);
    (response.status, value, response)
}

/// The token [`api`] sends to each server (the servers of one test run
/// live on distinct ports).
static TOKENS: Mutex<Vec<(SocketAddr, String)>> = Mutex::new(Vec::new());

fn token_for(addr: SocketAddr) -> Option<String> {
    let tokens = TOKENS.lock().unwrap();
    tokens
        .iter()
        .find(|(a, _)| *a == addr)
        .map(|(_, t)| t.clone())
}

/// A server with the repo `ann/demo`; [`api`] calls it as `ann`, its
/// owner and a server admin (so the counters are hers to read).
fn forge(flags: &[&str]) -> (tempfile::TempDir, TestServer) {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    assert!(
        run_vole(&data, &["repo", "create", "ann/demo"])
            .status
            .success()
    );
    let token = user_token(&data, "ann", true, "admin", &[]);
    let mut builder = TestServer::builder().data(&data);
    for flag in flags {
        builder = builder.arg(flag);
    }
    let server = builder.start();
    TOKENS.lock().unwrap().push((server.addr, token));
    (dir, server)
}

const BASE: &str = "/api/v1/repos/ann/demo";

#[test]
fn every_endpoint_works_and_every_bad_request_gets_a_4xx_that_writes_nothing() {
    let (_dir, server) = forge(&["--anonymous-push", "--api-body-limit", "4KiB"]);
    let addr = server.addr;
    let p = |rest: &str| format!("{BASE}{rest}");

    let (status, bug, _) = api(
        addr,
        "POST",
        &p("/issues"),
        Some(&json!({"title": "It crashes", "body": "on start", "labels": ["bug"]})),
    );
    assert_eq!(status, 201, "{bug}");
    assert_eq!(
        (bug["number"].as_u64(), bug["version"].as_u64()),
        (Some(1), Some(1))
    );
    assert_eq!(bug["labels"][0]["name"], "bug", "a new label's name: {bug}");
    let (status, _, _) = api(
        addr,
        "POST",
        &p("/issues"),
        Some(&json!({"title": "Docs", "labels": ["docs"]})),
    );
    assert_eq!(status, 201);
    let (status, change, _) = api(
        addr,
        "POST",
        &p("/pulls"),
        Some(&json!({"title": "Fix crash", "head": "fix", "base": "main"})),
    );
    assert_eq!(status, 201, "{change}");
    assert_eq!(
        change["number"], 3,
        "issues and change requests share one numbering"
    );
    let (status, comment, _) = api(
        addr,
        "POST",
        &p("/issues/1/comments"),
        Some(&json!({"body": "me too"})),
    );
    assert_eq!(status, 201, "{comment}");
    assert!(
        comment["issue_url"]
            .as_str()
            .unwrap()
            .ends_with("/ann/demo/-/issues/1"),
        "{comment}"
    );
    let (status, _, _) = api(
        addr,
        "POST",
        &p("/issues/3/comments"),
        Some(&json!({"body": "lgtm"})),
    );
    assert_eq!(status, 201);

    // Reads see the writes at once (before any fold could have landed).
    let (status, list, response) = api(addr, "GET", &p("/issues?state=open&labels=bug"), None);
    assert_eq!(status, 200);
    assert_eq!(list.as_array().map(Vec::len), Some(1), "{list}");
    assert_eq!(response.header("x-total-count"), Some("1"));
    let (_, page, response) = api(addr, "GET", &p("/issues?type=issues&limit=1&page=1"), None);
    assert_eq!(page[0]["number"], 2, "newest first");
    let link = response.header("link").unwrap_or_default().to_string();
    assert!(
        link.contains("page=2&limit=1&type=issues>; rel=\"next\""),
        "{link}"
    );
    // Without a type, pull requests are listed too (Gitea's default).
    let (_, both, _) = api(addr, "GET", &p("/issues"), None);
    assert_eq!(both[0]["number"], 3, "{both}");
    assert!(both[0]["pull_request"].is_object(), "{both}");
    assert!(link.contains("rel=\"last\""), "{link}");

    // Edits carry the version they replace; a stale one gets 409.
    let (status, closed, _) = api(
        addr,
        "PATCH",
        &p("/issues/1"),
        Some(&json!({"version": 1, "state": "closed"})),
    );
    assert_eq!(status, 201, "{closed}");
    assert_eq!(
        (closed["version"].as_u64(), closed["state"].as_str()),
        (Some(2), Some("closed"))
    );
    let (status, _, response) = api(
        addr,
        "PATCH",
        &p("/issues/1"),
        Some(&json!({"version": 1, "title": "x"})),
    );
    assert_eq!(status, 409);
    assert!(response.text().contains("version 2"), "{}", response.text());
    // Merged only by a merge, which moves the target: never by an edit.
    let (status, _, response) = api(
        addr,
        "PATCH",
        &p("/pulls/3"),
        Some(&json!({"version": 1, "state": "merged"})),
    );
    assert_eq!(status, 422, "{}", response.text());
    assert!(
        response.text().contains("open or closed"),
        "{}",
        response.text()
    );
    let (status, closed, _) = api(
        addr,
        "PATCH",
        &p("/pulls/3"),
        Some(&json!({"version": 1, "state": "closed"})),
    );
    assert_eq!((status, closed["state"].as_str()), (201, Some("closed")));
    assert_eq!(closed["merged"], false);

    // ACL and settings: defaults at version 0, then a replacing PUT.
    let (status, acl, _) = api(addr, "GET", &p("/acl"), None);
    assert_eq!((status, acl["version"].as_u64()), (200, Some(0)));
    let (status, acl, _) = api(
        addr,
        "PUT",
        &p("/acl"),
        Some(
            &json!({"version": 0, "visibility": "private", "members": [{"name": "ann", "role": "admin"}]}),
        ),
    );
    assert_eq!((status, acl["version"].as_u64()), (200, Some(1)), "{acl}");
    let settings = json!({"version": 0, "description": "demo", "default_branch": "main",
        "protected_branches": ["main"], "site": {"ref": "refs/heads/gh-pages", "dir": "public"}});
    let (status, stored, _) = api(addr, "PUT", &p("/settings"), Some(&settings));
    assert_eq!(
        (status, stored["version"].as_u64()),
        (200, Some(1)),
        "{stored}"
    );
    let (status, _, _) = api(addr, "PUT", &p("/settings"), Some(&settings));
    assert_eq!(
        status, 409,
        "a second PUT replacing version 0 must be stale"
    );

    // Every kind of bad request: a 4xx with a message, and nothing written.
    let before = api(addr, "GET", "/api/v1/stats", None).1["meta"]["entities"].clone();
    let cases: Vec<(&str, String, Option<Value>, u16, &str)> = vec![
        (
            // vole's own documents stay strict (a thread's write ignores
            // what it does not know, as Gitea's do).
            "PUT",
            p("/acl"),
            Some(json!({"version": 99, "visibility": "public", "colour": "red"})),
            422,
            "unknown field",
        ),
        (
            "POST",
            p("/issues"),
            Some(json!({"title": "  "})),
            422,
            "title must not be empty",
        ),
        (
            "POST",
            p("/issues"),
            Some(json!({"title": "x", "body": "y".repeat(8 * 1024)})),
            413,
            "--api-body-limit",
        ),
        (
            "POST",
            p("/issues/9/comments"),
            Some(json!({"body": "x"})),
            404,
            "issue #9 not found",
        ),
        ("GET", p("/pulls/1"), None, 404, "#1 is an issue"),
        (
            "GET",
            p("/issues/zero"),
            None,
            400,
            "not an issue or change request number",
        ),
        (
            "GET",
            "/api/v1/repos/ann/nope/issues".into(),
            None,
            404,
            "repository ann/nope not found",
        ),
        (
            // A field of the wrong type (unknown fields are ignored).
            "PATCH",
            p("/issues/2"),
            Some(json!({"title": 7})),
            422,
            "invalid type",
        ),
        (
            "PATCH",
            p("/issues/2"),
            Some(json!({"version": 1, "state": "resolved"})),
            422,
            "state must be open or closed",
        ),
        ("GET", p("/issues?since=yesterday"), None, 422, "RFC 3339"),
        (
            "POST",
            p("/pulls"),
            Some(json!({"title": "x", "head": "a..b", "base": "main"})),
            422,
            "not a valid branch name",
        ),
        (
            "POST",
            p("/issues"),
            Some(json!({"title": "x", "labels": [999]})),
            422,
            "no label of",
        ),
        (
            "PUT",
            p("/acl"),
            Some(
                json!({"version": 1, "visibility": "public", "members": [{"name": "a b", "role": "read"}]}),
            ),
            422,
            "user name",
        ),
    ];
    for (method, path, body, want, needle) in cases {
        let (status, _, response) = api(addr, method, &path, body.as_ref());
        assert_eq!(status, want, "{method} {path}: {}", response.text());
        assert!(
            response.text().contains(needle),
            "{method} {path}: message {:?} does not say {needle:?}",
            response.text()
        );
    }
    let auth = format!("Authorization: Bearer {}", token_for(addr).unwrap());
    let raw = http(
        addr,
        &format!(
            "POST {} HTTP/1.1\r\n{auth}\r\nContent-Type: application/json\r\nContent-Length: 9",
            p("/issues")
        ),
        b"{\"title\":",
    );
    assert_eq!(raw.status, 400, "truncated JSON: {}", raw.text());
    let raw = http(
        addr,
        &format!(
            "POST {} HTTP/1.1\r\n{auth}\r\nContent-Length: 13",
            p("/issues")
        ),
        b"{\"title\":\"x\"}",
    );
    assert_eq!(raw.status, 415, "no JSON content type: {}", raw.text());
    let after = api(addr, "GET", "/api/v1/stats", None).1["meta"]["entities"].clone();
    assert_eq!(before, after, "a refused request wrote something");

    // Comments list, oldest first.
    let (_, comments, _) = api(addr, "GET", &p("/issues/1/comments"), None);
    assert_eq!(comments[0]["body"], "me too");
}

#[test]
fn api_writes_are_refused_without_credentials() {
    let (_dir, server) = forge(&[]);
    TOKENS.lock().unwrap().retain(|(a, _)| *a != server.addr);
    let (status, _, response) = api(
        server.addr,
        "POST",
        &format!("{BASE}/issues"),
        Some(&json!({"title": "x"})),
    );
    assert_eq!(status, 401);
    assert!(
        response.text().contains("Authorization: Bearer"),
        "{}",
        response.text()
    );
    assert_eq!(
        response.header("www-authenticate"),
        Some("Basic realm=\"vole\"")
    );
    let (status, list, _) = api(server.addr, "GET", &format!("{BASE}/issues"), None);
    assert_eq!((status, list), (200, json!([])));
}

/// Every JSON document on every `refs/meta/*` ref of a clone, by path.
fn documents_in_clone(clone: &Path) -> BTreeMap<String, Value> {
    let refs = git_ok(
        clone,
        &["for-each-ref", "--format=%(refname)", "refs/meta/"],
    );
    let mut docs = BTreeMap::new();
    for name in refs.lines() {
        for line in git_ok(clone, &["ls-tree", "-r", name]).lines() {
            let (meta, path) = line.split_once('\t').unwrap();
            let blob = meta.split_whitespace().nth(2).unwrap();
            let body = git(clone, &["cat-file", "blob", blob]).stdout;
            docs.insert(
                format!("{name}:{path}"),
                serde_json::from_slice(&body).unwrap(),
            );
        }
    }
    docs
}

#[test]
fn a_fresh_clone_with_refs_meta_holds_what_the_api_returns() {
    let (dir, server) = forge(&["--anonymous-push"]);
    let addr = server.addr;
    for i in 0..12 {
        let (status, _, _) = api(
            addr,
            "POST",
            &format!("{BASE}/issues"),
            Some(&json!({"title": format!("issue {i}"), "labels": ["l"]})),
        );
        assert_eq!(status, 201);
    }
    api(
        addr,
        "POST",
        &format!("{BASE}/pulls"),
        Some(&json!({"title": "cr", "head": "x", "base": "main"})),
    );
    for n in [1, 5, 13] {
        let (status, _, _) = api(
            addr,
            "POST",
            &format!("{BASE}/issues/{n}/comments"),
            Some(&json!({"body": format!("on {n}")})),
        );
        assert_eq!(status, 201);
    }
    api(
        addr,
        "PATCH",
        &format!("{BASE}/issues/5"),
        Some(&json!({"version": 1, "state": "closed"})),
    );
    api(
        addr,
        "PUT",
        &format!("{BASE}/settings"),
        Some(&json!({"default_branch": "main", "description": "d"})),
    );
    // The folds land within the fold interval.
    assert!(
        eventually(Duration::from_secs(10), || {
            api(addr, "GET", "/api/v1/stats", None).1["meta"]["pending"] == 0
        }),
        "writes were never folded into the shard refs"
    );

    let clone = dir.path().join("clone");
    let out = git(
        dir.path(),
        &[
            "clone",
            "-q",
            &server.url("/ann/demo"),
            clone.to_str().unwrap(),
        ],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    git_ok(
        &clone,
        &["fetch", "-q", "origin", "refs/meta/*:refs/meta/*"],
    );
    let docs = documents_in_clone(&clone);

    // The API's objects are Gitea's; each document of the clone is one
    // of them, with the same id, number, text, state, labels and version.
    let (_, threads, _) = api(
        addr,
        "GET",
        &format!("{BASE}/issues?state=all&limit=50"),
        None,
    );
    let mut from_api: Vec<Value> = Vec::new();
    for thread in threads.as_array().unwrap() {
        let labels: Vec<Value> = thread["labels"]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| l["name"].clone())
            .collect();
        from_api.push(json!({
            "kind": if thread["pull_request"].is_object() { "change" } else { "issue" },
            "serial": thread["id"], "number": thread["number"], "title": thread["title"],
            "body": thread["body"], "state": thread["state"], "labels": labels,
            "version": thread["version"],
        }));
    }
    for n in [1, 5, 13] {
        let (_, comments, _) = api(addr, "GET", &format!("{BASE}/issues/{n}/comments"), None);
        for c in comments.as_array().unwrap() {
            from_api.push(
                json!({"kind": "comment", "serial": c["id"], "body": c["body"],
                "version": c["version"]}),
            );
        }
    }
    let (_, labels, _) = api(addr, "GET", &format!("{BASE}/labels"), None);
    for l in labels.as_array().unwrap() {
        from_api.push(
            json!({"kind": "label", "serial": l["id"], "name": l["name"],
            "color": l["color"]}),
        );
    }
    let mut settings = api(addr, "GET", &format!("{BASE}/settings"), None).1;
    settings
        .as_object_mut()
        .unwrap()
        .insert("kind".into(), "settings".into());
    from_api.push(settings);
    // The same fields of each document (a merged change is closed to
    // Gitea's clients).
    let mut from_clone: Vec<Value> = docs
        .values()
        .map(|d| match d["kind"].as_str().unwrap() {
            "issue" | "change" => json!({
                "kind": d["kind"], "serial": d["serial"], "number": d["number"],
                "title": d["title"], "body": d["body"],
                "state": if d["state"] == "open" { "open" } else { "closed" },
                "labels": d["labels"], "version": d["version"],
            }),
            "comment" => json!({"kind": "comment", "serial": d["serial"], "body": d["body"],
                "version": d["version"]}),
            "label" => json!({"kind": "label", "serial": d["serial"], "name": d["name"],
                "color": d["color"]}),
            _ => d.clone(),
        })
        .collect();
    let key = |v: &Value| format!("{}|{}|{}", v["kind"], v["serial"], v["version"]);
    from_api.sort_by_key(key);
    from_clone.sort_by_key(key);
    assert_eq!(
        from_clone.len(),
        // The label the issues named is a label document too.
        12 + 1 + 3 + 1 + 1,
        "documents in the clone: {:?}",
        docs.keys()
    );
    assert_eq!(
        from_clone, from_api,
        "the clone's metadata differs from what the API returns"
    );
    // Comments live in their thread's directory, in the thread's shard.
    let comment_paths: Vec<&String> = docs.keys().filter(|k| k.contains("/comments/")).collect();
    assert_eq!(comment_paths.len(), 3);
    for path in comment_paths {
        let thread_dir = path.split("/comments/").next().unwrap();
        assert!(
            docs.keys().any(|k| k.starts_with(thread_dir)
                && (k.ends_with("issue.json") || k.ends_with("change.json"))),
            "{path} is not beside its thread"
        );
    }
}

/// Issue numbers in every shard ref of `bare`, with how often each
/// occurs (the documents read in one `git cat-file --batch`).
fn issue_numbers_in_git(bare: &Path) -> HashMap<u64, usize> {
    let mut blobs = String::new();
    for name in git_ok(bare, &["for-each-ref", "--format=%(refname)", "refs/meta/"]).lines() {
        for line in git_ok(bare, &["ls-tree", "-r", name]).lines() {
            let (meta, path) = line.split_once('\t').unwrap();
            if path.ends_with("/issue.json") {
                blobs.push_str(meta.split_whitespace().nth(2).unwrap());
                blobs.push('\n');
            }
        }
    }
    let mut child = std::process::Command::new("git")
        .args(["-C", bare.to_str().unwrap(), "cat-file", "--batch"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let feeder = std::thread::spawn(move || stdin.write_all(blobs.as_bytes()));
    let out = child.wait_with_output().unwrap();
    feeder.join().unwrap().unwrap();
    let mut numbers: HashMap<u64, usize> = HashMap::new();
    let mut rest = out.stdout.as_slice();
    while let Some(end) = rest.iter().position(|b| *b == b'\n') {
        let header = String::from_utf8_lossy(&rest[..end]).to_string();
        let size: usize = header.split_whitespace().nth(2).unwrap().parse().unwrap();
        let body = &rest[end + 1..end + 1 + size];
        let doc: Value = serde_json::from_slice(body).unwrap();
        *numbers.entry(doc["number"].as_u64().unwrap()).or_default() += 1;
        rest = &rest[end + 1 + size + 1..];
    }
    numbers
}

/// POST without panicking when the server is gone: `None` if the request
/// was not acknowledged with a 201.
fn try_create(addr: SocketAddr, title: &str) -> Option<Value> {
    let body = json!({"title": title}).to_string();
    let head = format!(
        "POST {BASE}/issues HTTP/1.1\r\nContent-Type: application/json\r\nContent-Length: {}",
        body.len()
    );
    let r = try_http(addr, &head, body.as_bytes())?;
    (r.status == 201).then(|| serde_json::from_slice(&r.body).ok())?
}

#[test]
fn kill_9_mid_burst_loses_no_acknowledged_write_and_folds_none_twice() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    assert!(
        run_vole(&data, &["repo", "create", "ann/demo"])
            .status
            .success()
    );
    // The counters are an admin's; the writes themselves go anonymously.
    let token = user_token(&data, "root", true, "admin", &[]);
    // A long fold interval keeps the burst's writes only in the log when
    // the kill lands.
    let server = TestServer::builder()
        .data(&data)
        .arg("--anonymous-push")
        .arg("--meta-fold-interval")
        .arg("300ms")
        .start();
    let addr = server.addr;
    TOKENS.lock().unwrap().push((addr, token.clone()));
    // Phase 1: writes folded before the kill (recovery must not fold them
    // again).
    let mut first: Vec<Value> = (0..40)
        .map(|i| try_create(addr, &format!("early {i}")).expect("early write acknowledged"))
        .collect();
    assert!(
        eventually(Duration::from_secs(10), || {
            api(addr, "GET", "/api/v1/stats", None).1["meta"]["pending"] == 0
        }),
        "the early writes were never folded"
    );
    // Phase 2: a burst from 4 writers, killed in the middle.
    let acked: Arc<Mutex<Vec<Value>>> = Arc::new(Mutex::new(Vec::new()));
    let stop = Arc::new(AtomicBool::new(false));
    let writers: Vec<_> = (0..4)
        .map(|w| {
            let acked = acked.clone();
            let stop = stop.clone();
            std::thread::spawn(move || {
                let started = Instant::now();
                for i in 0..500 {
                    if stop.load(Ordering::SeqCst) || started.elapsed() > Duration::from_secs(30) {
                        break;
                    }
                    if let Some(issue) = try_create(addr, &format!("w{w} #{i}")) {
                        acked.lock().unwrap().push(issue);
                    }
                }
            })
        })
        .collect();
    assert!(
        eventually(Duration::from_secs(30), || acked.lock().unwrap().len()
            >= 150),
        "the burst never got going"
    );
    signal(server.pid(), 9);
    stop.store(true, Ordering::SeqCst);
    for writer in writers {
        writer.join().unwrap();
    }
    drop(server);
    let mut acked = acked.lock().unwrap().clone();
    acked.append(&mut first);

    // Anti-vacuity: at the kill git held some acknowledged writes (which a
    // refold could duplicate) and not all (the rest lived only in the log).
    let bare = data.join("repos/ann/demo.git");
    let in_git_at_kill = issue_numbers_in_git(&bare).len();
    assert!(
        in_git_at_kill >= 40 && in_git_at_kill < acked.len(),
        "{in_git_at_kill} of {} acknowledged writes were in git at the kill: recovery was not exercised",
        acked.len()
    );

    let server = TestServer::builder()
        .data(&data)
        .arg("--anonymous-push")
        .start();
    let addr = server.addr;
    TOKENS.lock().unwrap().push((addr, token));
    // What identifies an acknowledged issue and what it said (its links
    // name the server's address, which the restart changed).
    let essence = |v: &Value| {
        (
            v["number"].clone(),
            v["title"].clone(),
            v["version"].clone(),
        )
    };
    let mut by_id: HashMap<u64, Value> = HashMap::new();
    for page in 1..=50 {
        let (_, items, _) = api(
            addr,
            "GET",
            &format!("{BASE}/issues?limit=50&page={page}"),
            None,
        );
        for item in items.as_array().unwrap() {
            by_id.insert(item["id"].as_u64().unwrap(), item.clone());
        }
    }
    let lost: Vec<&Value> = acked
        .iter()
        .filter(|a| by_id.get(&a["id"].as_u64().unwrap()).map(essence) != Some(essence(a)))
        .collect();
    assert!(
        lost.is_empty(),
        "{} of {} acknowledged writes are missing after kill -9 and restart: {:?}",
        lost.len(),
        acked.len(),
        lost.iter().take(3).collect::<Vec<_>>()
    );
    let numbers: BTreeSet<u64> = by_id
        .values()
        .map(|v| v["number"].as_u64().unwrap())
        .collect();
    assert_eq!(numbers.len(), by_id.len(), "a number was handed out twice");

    // The restart folds what the log held; then every document is in git
    // exactly once and every log record was folded exactly once.
    assert!(
        eventually(Duration::from_secs(20), || {
            api(addr, "GET", "/api/v1/stats", None).1["meta"]["pending"] == 0
        }),
        "the requeued writes were never folded"
    );
    let numbers_in_git = issue_numbers_in_git(&bare);
    let mut seq_counts: HashMap<u64, usize> = HashMap::new();
    for name in git_ok(
        &bare,
        &["for-each-ref", "--format=%(refname)", "refs/meta/"],
    )
    .lines()
    {
        for line in git_ok(&bare, &["log", "--format=%B", name]).lines() {
            if let Some(ranges) = line.strip_prefix("Vole-Log-Seqs: ") {
                for part in ranges.split(',') {
                    let (a, b) = part.split_once('-').unwrap_or((part, part));
                    for seq in a.parse::<u64>().unwrap()..=b.parse::<u64>().unwrap() {
                        *seq_counts.entry(seq).or_default() += 1;
                    }
                }
            }
        }
    }
    for issue in &acked {
        let number = issue["number"].as_u64().unwrap();
        assert_eq!(
            numbers_in_git.get(&number),
            Some(&1),
            "acknowledged issue #{number} is not in the shard refs exactly once"
        );
    }
    let twice: Vec<_> = seq_counts.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "log records folded twice: {twice:?}");
    let logged: BTreeSet<u64> = text(&run_vole(&data, &["log", "dump", "--json"]).stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["log"] == "meta" && v["repo"] == "ann/demo")
        .filter_map(|v| v["seq"].as_u64())
        .collect();
    assert_eq!(
        seq_counts.keys().copied().collect::<BTreeSet<u64>>(),
        logged,
        "the folds do not cover exactly the log's records"
    );
}
