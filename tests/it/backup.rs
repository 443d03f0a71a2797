//! `vole backup` during a burst of pushes and metadata writes, restored
//! into an empty data dir: every write acknowledged before the backup began
//! is there, `vole check` passes, and the server starts on it; a restore
//! refuses a non-empty data dir and a damaged backup.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::json;

use crate::support::*;

/// An issue write, acknowledged (201) at `at`.
struct Acked {
    number: u64,
    title: String,
    at: Instant,
}

fn create_issue(addr: std::net::SocketAddr, token: &str, title: &str) -> Option<u64> {
    let body = json!({ "title": title }).to_string();
    let r = http(
        addr,
        &format!(
            "POST /api/v1/repos/alice/repo/issues HTTP/1.1\r\nAuthorization: Bearer {token}\r\nContent-Type: application/json\r\nContent-Length: {}",
            body.len()
        ),
        body.as_bytes(),
    );
    (r.status == 201).then(|| {
        serde_json::from_slice::<serde_json::Value>(&r.body).unwrap()["number"]
            .as_u64()
            .unwrap()
    })
}

#[test]
fn a_backup_during_a_burst_restores_every_write_acknowledged_before_it() {
    let dir = tempfile::tempdir().unwrap();
    let data = data_with_repo(dir.path());
    let token = user_token(&data, "alice", false, "write", &[]);
    let server = TestServer::builder()
        .data(&data)
        .args(["--anonymous-push", "--meta-fold-interval", "20ms"])
        .start();
    let url = server.url("/alice/repo.git");
    let work = worktree(dir.path(), "work");
    git_ok(&work, &["push", "-q", &url, "main"]);

    let stop = Arc::new(AtomicBool::new(false));
    let pushes: Arc<Mutex<Vec<(String, Instant)>>> = Arc::default();
    let issues: Arc<Mutex<Vec<Acked>>> = Arc::default();
    let pusher = {
        let (stop, pushes, work, url) = (stop.clone(), pushes.clone(), work.clone(), url.clone());
        std::thread::spawn(move || {
            for i in 0..400 {
                if stop.load(Ordering::SeqCst) {
                    break;
                }
                let commit = commit_file(&work, "burst.txt", format!("{i}\n").as_bytes());
                let out = git(&work, &["push", "-q", &url, "main"]);
                if out.status.success() {
                    pushes.lock().unwrap().push((commit, Instant::now()));
                }
            }
        })
    };
    let writer = {
        let (stop, issues, token, addr) =
            (stop.clone(), issues.clone(), token.clone(), server.addr);
        std::thread::spawn(move || {
            for i in 0..4000 {
                if stop.load(Ordering::SeqCst) {
                    break;
                }
                let title = format!("burst {i}");
                if let Some(number) = create_issue(addr, &token, &title) {
                    issues.lock().unwrap().push(Acked {
                        number,
                        title,
                        at: Instant::now(),
                    });
                }
            }
        })
    };
    // Into the burst, then the backup, then more burst.
    assert!(
        eventually(Duration::from_secs(30), || {
            pushes.lock().unwrap().len() >= 3 && issues.lock().unwrap().len() >= 30
        }),
        "the burst did not get going"
    );
    let backup = dir.path().join("backup");
    let began = Instant::now();
    let out = run_vole(&data, &["backup", backup.to_str().unwrap()]);
    assert!(out.status.success(), "vole backup: {}", text(&out.stderr));
    let ended = Instant::now();
    std::thread::sleep(Duration::from_millis(300));
    stop.store(true, Ordering::SeqCst);
    pusher.join().unwrap();
    writer.join().unwrap();
    let said = text(&out.stdout);
    assert!(said.contains("backed up"), "{said}");
    let pushes = pushes.lock().unwrap();
    let issues = issues.lock().unwrap();
    // Anti-vacuity: writes were acknowledged before, during and after it.
    let before = |at: &Instant| *at < began;
    assert!(pushes.iter().filter(|(_, at)| before(at)).count() >= 3);
    assert!(issues.iter().filter(|i| before(&i.at)).count() >= 30);
    assert!(
        issues.iter().any(|i| i.at > ended),
        "no write was acknowledged after the backup: the burst was over"
    );

    // Restored into an empty data dir.
    let restored = dir.path().join("restored");
    let out = run_vole(&restored, &["restore", backup.to_str().unwrap()]);
    assert!(out.status.success(), "vole restore: {}", text(&out.stderr));
    // Owner only, as a data dir is (the system repo holds credential
    // hashes).
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&restored.join("system.git")), 0o700);
        assert_eq!(mode(&restored.join("log/meta.arrow")), 0o600);
        assert_eq!(mode(&backup.join("manifest.json")), 0o600);
    }
    let (ok, checked) = {
        let out = run_vole(&restored, &["check"]);
        (out.status.success(), text(&out.stdout))
    };
    assert!(ok, "vole check failed on the restored data dir:\n{checked}");
    let again = TestServer::builder().data(&restored).start();
    // Every issue acknowledged before the backup began is there, as written.
    for issue in issues.iter().filter(|i| before(&i.at)) {
        let r = http(
            again.addr,
            &format!(
                "GET /api/v1/repos/alice/repo/issues/{} HTTP/1.1\r\nAuthorization: Bearer {token}",
                issue.number
            ),
            b"",
        );
        assert_eq!(
            r.status, 200,
            "issue #{} ({}), acknowledged before the backup, is not in it",
            issue.number, issue.title
        );
        let body: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
        assert_eq!(body["title"], issue.title.as_str());
    }
    // main holds every push acknowledged before the backup began.
    let clone = dir.path().join("clone");
    git_ok(
        dir.path(),
        &[
            "clone",
            "-q",
            "--bare",
            &again.url("/alice/repo.git"),
            clone.to_str().unwrap(),
        ],
    );
    let (last_before, _) = pushes.iter().rev().find(|(_, at)| before(at)).unwrap();
    let out = git(
        &clone,
        &["merge-base", "--is-ancestor", last_before, "main"],
    );
    assert!(
        out.status.success(),
        "push {last_before}, acknowledged before the backup, is not on the restored main"
    );
    let out = git(&clone, &["fsck", "--strict"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    drop(again);

    // A restore refuses a data dir that is not empty, and a damaged copy.
    let out = run_vole(&restored, &["restore", backup.to_str().unwrap()]);
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("is not empty"),
        "{}",
        text(&out.stderr)
    );
    damage_a_pack(&backup);
    let elsewhere = dir.path().join("elsewhere");
    let out = run_vole(&elsewhere, &["restore", backup.to_str().unwrap()]);
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("does not match its manifest"),
        "{}",
        text(&out.stderr)
    );
    // A restore that failed leaves nothing behind: it can be run again.
    assert!(
        !elsewhere.exists() || std::fs::read_dir(&elsewhere).unwrap().next().is_none(),
        "a failed restore left files in the data dir"
    );
    assert!(!dir.path().join(".elsewhere.restoring").exists());
}

/// Flips one byte of a pack in the backup.
fn damage_a_pack(backup: &Path) {
    let pack_dir = backup.join("repos/alice/repo.git/objects/pack");
    let pack = files_in(&pack_dir)
        .into_iter()
        .find(|p| p.extension().is_some_and(|e| e == "pack"))
        .expect("a pack in the backup");
    let mut bytes = std::fs::read(&pack).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0xFF;
    std::fs::write(&pack, bytes).unwrap();
}
