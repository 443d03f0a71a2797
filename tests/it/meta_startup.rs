//! A start that leaves the repos' issues to its background reader
//! (`--meta-read-at-open 0s`), after a kill -9 that lands while the server
//! compacts its meta log: clones and the repo's settings are served at
//! once, a read of an issue before it is read is a 503 with `Retry-After`
//! (never a 404 or a wrong answer), and every acknowledged issue is there;
//! after a stop, `vole check` finds the persisted index right and the
//! next start reads every shard tree from it.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::support::*;

const REPO: &str = "alice/repo";

/// An issue's body: long enough that the index leaves it in git once
/// folded, and read back from there after the restart.
fn body_of(title: &str) -> String {
    format!("{title}: {}", "the text of a long issue body. ".repeat(4))
}

/// Creates an issue; its number once acknowledged (`None`: refused, or
/// the server went away).
fn try_create(addr: SocketAddr, token: &str, title: &str) -> Option<u64> {
    let body = serde_json::json!({ "title": title, "body": body_of(title) }).to_string();
    let head = format!(
        "POST /api/v1/repos/{REPO}/issues HTTP/1.1\r\nAuthorization: Bearer {token}\r\nContent-Type: application/json\r\nContent-Length: {}",
        body.len()
    );
    let r = try_http(addr, &head, body.as_bytes())?;
    let value: serde_json::Value = serde_json::from_slice(&r.body).ok()?;
    (r.status == 201).then(|| value["number"].as_u64())?
}

#[test]
fn after_a_kill_9_during_compaction_a_start_that_reads_in_the_background_keeps_every_issue() {
    let dir = tempfile::tempdir().unwrap();
    let data = data_with_repo(dir.path());
    let token = user_token(&data, "alice", false, "write", &[]);
    let server = TestServer::builder()
        .data(&data)
        .arg("--meta-fold-interval")
        .arg("200ms")
        .arg("--meta-log-compact-size")
        .arg("16KiB")
        .arg("--api-rate")
        .arg("100000000")
        // Writes that keep coming (the quotas would refuse most of them),
        // so some are only in the log whenever the kill lands.
        .arg("--meta-write-rate")
        .arg("0")
        .arg("--max-meta-bytes-per-user")
        .arg("0")
        .start();
    let addr = server.addr;
    let acked: Arc<Mutex<Vec<(u64, String)>>> = Arc::new(Mutex::new(Vec::new()));
    let stop = Arc::new(AtomicBool::new(false));
    let writers: Vec<_> = (0..2)
        .map(|w| {
            let (acked, stop, token) = (acked.clone(), stop.clone(), token.clone());
            std::thread::spawn(move || {
                for i in 0..3000 {
                    if stop.load(Ordering::SeqCst) {
                        break;
                    }
                    let title = format!("w{w} #{i}");
                    if let Some(number) = try_create(addr, &token, &title) {
                        acked.lock().unwrap().push((number, title));
                    }
                }
            })
        })
        .collect();
    // The kill lands while a compaction's new log is being written.
    let compacting = data.join("log/meta.arrow.compact");
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut caught = false;
    while Instant::now() < deadline {
        if acked.lock().unwrap().len() >= 100 && compacting.exists() {
            signal(server.pid(), 9);
            caught = true;
            break;
        }
        std::hint::spin_loop();
    }
    if !caught {
        signal(server.pid(), 9);
    }
    stop.store(true, Ordering::SeqCst);
    for writer in writers {
        writer.join().unwrap();
    }
    drop(server);
    let acked = acked.lock().unwrap().clone();
    assert!(
        caught,
        "no compaction was under way in 60 s of writes ({} acknowledged)",
        acked.len()
    );

    let server = start_reading_in_background(&data);
    let opened = server
        .log
        .wait_for(&["metadata index rebuilt"], Duration::from_secs(10))
        .expect("the open's line");
    assert!(
        opened.contains("read_in_background=1"),
        "the open read every issue itself: {opened}"
    );
    // Writes acknowledged but only in the log at the kill, put back.
    let requeued: u64 = opened
        .split_whitespace()
        .find_map(|field| field.strip_prefix("requeued="))
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    assert!(
        requeued > 0,
        "no write was only in the log at the kill: {opened}"
    );
    // Served at once, read or not: the repo's settings and a clone.
    let settings = http(
        server.addr,
        &format!("GET /api/v1/repos/{REPO}/settings HTTP/1.1\r\nAuthorization: Bearer {token}"),
        b"",
    );
    assert_eq!(settings.status, 200, "{}", settings.text());
    let clone = dir.path().join("clone");
    let url = server.url(&format!("/{REPO}.git"));
    git_ok(dir.path(), &["clone", "-q", &url, clone.to_str().unwrap()]);

    let retried = every_issue_there(server.addr, &token, &acked);
    eprintln!(
        "{} acknowledged issues all there; {retried} reads told to retry",
        acked.len()
    );

    // A stop writes the persisted index of the tips as they stand (the
    // start wrote one of the trees it read; the replayed writes folded
    // since); `vole check` finds it right, and the next start reads every
    // shard tree from it.
    let status = server.stop();
    assert!(status.success(), "{status:?}");
    let out = run_vole(&data, &["check"]);
    let said = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "{said}");
    assert!(
        said.contains("persisted metadata index:") && !said.contains(" 0 shard tips read from it"),
        "vole check said nothing of the persisted index, or found no tip in it: {said}"
    );
    let server = start_reading_in_background(&data);
    let count = |line: &str, field: &str| -> u64 {
        line.split_whitespace()
            .find_map(|f| f.strip_prefix(field)?.strip_prefix('='))
            .and_then(|n| n.parse().ok())
            .unwrap_or(u64::MAX)
    };
    let opened = server
        .log
        .wait_for(&["metadata index rebuilt"], Duration::from_secs(10))
        .expect("the open's line");
    let whole = server
        .log
        .wait_for(&["metadata index whole"], Duration::from_secs(30))
        .expect("the background read's end");
    // The open reads the repo-level shards (and the issues on them) from
    // git before it listens; everything the background read took is from
    // the file.
    let at_open = count(&opened, "docs_from_git");
    assert!(
        count(&whole, "docs_from_git") == at_open
            && (count(&whole, "docs_from_file") + at_open) as usize > acked.len(),
        "the background read after a stop read shard trees from git, not from the persisted index ({} issues acknowledged):\n{opened}\n{whole}",
        acked.len()
    );
    every_issue_there(server.addr, &token, &acked);
}

/// A server that leaves every repo's issues to its background reader.
fn start_reading_in_background(data: &std::path::Path) -> TestServer {
    TestServer::builder()
        .data(data)
        .arg("--meta-read-at-open")
        .arg("0s")
        .arg("--api-rate")
        .arg("100000000")
        .start()
}

/// Reads back every acknowledged issue (title and body), asking again
/// while the background read answers 503; how many reads were retried.
fn every_issue_there(addr: SocketAddr, token: &str, acked: &[(u64, String)]) -> usize {
    let mut retried = 0;
    for (number, title) in acked {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let r = http(
                addr,
                &format!(
                    "GET /api/v1/repos/{REPO}/issues/{number} HTTP/1.1\r\nAuthorization: Bearer {token}"
                ),
                b"",
            );
            if r.status == 503 && Instant::now() < deadline {
                assert!(
                    r.headers
                        .iter()
                        .any(|(k, _)| k.eq_ignore_ascii_case("retry-after")),
                    "a 503 without Retry-After"
                );
                retried += 1;
                std::thread::sleep(Duration::from_millis(20));
                continue;
            }
            assert_eq!(
                r.status,
                200,
                "issue #{number}, acknowledged before the kill: {}",
                r.text()
            );
            let value: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
            assert_eq!(value["title"], title.as_str(), "issue #{number}");
            assert_eq!(
                value["body"],
                body_of(title).as_str(),
                "issue #{number}'s body"
            );
            break;
        }
    }
    retried
}
