//! `vole repo gc`: a commit force-pushed away is served by full id until
//! the gc prunes it, then it is gone from every view; the gc is in the ref
//! log and the audit log; pushes racing gcs lose nothing.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::support::*;

/// A server with anonymous pushes and the empty repo `alice/r`.
fn forge() -> (tempfile::TempDir, TestServer, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let created = run_vole(&data, &["repo", "create", "alice/r"]);
    assert!(created.status.success(), "{}", text(&created.stderr));
    let server = TestServer::builder()
        .data(&data)
        .arg("--anonymous-push")
        .start();
    let bare = data.join("repos/alice/r.git");
    (dir, server, bare)
}

fn object_exists(bare: &Path, id: &str) -> bool {
    git(bare, &["cat-file", "-e", id]).status.success()
}

/// The web views of the commit `id` (its tree holds `secret.txt`).
fn views_of(id: &str) -> Vec<String> {
    [
        "raw/{id}/secret.txt",
        "blob/{id}/secret.txt",
        "blame/{id}/secret.txt",
        "tree/{id}",
        "commit/{id}",
        "commit/{id}.patch",
        "commits/{id}",
        "archive/{id}.tar.gz",
    ]
    .iter()
    .map(|view| format!("/alice/r/-/{}", view.replace("{id}", id)))
    .collect()
}

/// `vole log dump` shows a gc of `alice/r` by the CLI in the audit log and
/// the ref log.
fn assert_gc_recorded(data: &Path) {
    let dump = run_vole(data, &["log", "dump"]);
    let dump = text(&dump.stdout);
    let audited = |l: &str| l.contains("repo_gc") && l.contains("target=alice/r");
    assert!(
        dump.lines().any(audited),
        "no audit record of the gc:\n{dump}"
    );
    let logged = |l: &str| l.contains("alice/r") && l.contains(" gc actor=cli@local");
    assert!(
        dump.lines().any(logged),
        "no ref log row of the gc:\n{dump}"
    );
}

#[test]
fn a_force_pushed_commit_is_served_by_full_id_until_vole_repo_gc_prunes_it() {
    let (dir, server, bare) = forge();
    let url = server.url("/alice/r.git");
    let work = worktree(dir.path(), "work");
    let leaked = commit_file(&work, "secret.txt", b"the leaked secret\n");
    git_ok(&work, &["push", "-q", &url, "HEAD:main"]);
    // Taken back: main no longer reaches the commit.
    git_ok(&work, &["reset", "-q", "--hard", "HEAD~1"]);
    let fixed = commit_file(&work, "fixed.txt", b"nothing to see\n");
    git_ok(&work, &["push", "-q", "--force", &url, "HEAD:main"]);
    assert_eq!(
        ref_value(&bare, "refs/heads/main").as_deref(),
        Some(fixed.as_str())
    );

    // Every view of it, by its full id.
    let views = views_of(&leaked);
    for view in &views {
        let served = http_get(server.addr, view);
        assert_eq!(
            served.status,
            200,
            "{view} before the gc: {}",
            served.text()
        );
    }
    assert_eq!(
        http_get(server.addr, &views[0]).text(),
        "the leaked secret\n"
    );
    // git hands it out too, asked for by its full id (protocol v2's
    // upload-pack takes any object it has).
    let fetch_leaked = || {
        let probe = tempfile::tempdir().unwrap();
        git_ok(probe.path(), &["init", "-q", "--bare"]);
        git(probe.path(), &["fetch", "-q", &url, &leaked])
    };
    let fetched = fetch_leaked();
    assert!(fetched.status.success(), "{}", text(&fetched.stderr));

    let gc = run_vole(&server.data, &["repo", "gc", "alice/r"]);
    assert!(gc.status.success(), "vole repo gc: {}", text(&gc.stderr));
    assert!(text(&gc.stdout).contains("pruned"), "{}", text(&gc.stdout));

    assert!(
        !object_exists(&bare, &leaked),
        "the commit is still in the repo"
    );
    assert!(
        !fetch_leaked().status.success(),
        "git fetched it after the gc"
    );
    for view in &views {
        let after = http_get(server.addr, view);
        assert_eq!(after.status, 404, "{view} after the gc: {}", after.text());
        assert!(!after.text().contains("leaked secret"));
    }
    // What refs reach is all there.
    let clone = dir.path().join("clone");
    git_ok(dir.path(), &["clone", "-q", &url, clone.to_str().unwrap()]);
    assert!(clone.join("fixed.txt").is_file() && !clone.join("secret.txt").exists());
    let check = run_vole(&server.data, &["check"]);
    assert!(
        check.status.success(),
        "vole check: {}",
        text(&check.stdout)
    );

    assert_gc_recorded(&server.data);
    let missing = run_vole(&server.data, &["repo", "gc", "alice/nothing"]);
    assert!(!missing.status.success());
    assert!(
        text(&missing.stderr).contains("alice/nothing"),
        "{}",
        text(&missing.stderr)
    );
    let data = server.data.clone();
    server.stop();

    // Without a server, the CLI runs it under the data dir lock.
    let again = run_vole(&data, &["repo", "gc", "alice/r"]);
    assert!(
        again.status.success(),
        "vole repo gc offline: {}",
        text(&again.stderr)
    );
}

/// Pushes `refspec`; a push refused while a gc holds the repo's pushes
/// (a 503) is tried again, a bounded number of times. Any other failure
/// fails the test.
fn push_through(work: &Path, url: &str, refspec: &str) {
    for _ in 0..20 {
        let out = git(work, &["push", "-q", "--force", url, refspec]);
        if out.status.success() {
            return;
        }
        let said = text(&out.stderr);
        assert!(said.contains("503"), "push {refspec} failed: {said}");
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("push {refspec} was refused 20 times");
}

#[test]
fn pushes_racing_vole_repo_gc_lose_no_object() {
    let (dir, server, bare) = forge();
    let url = server.url("/alice/r.git");
    let work = worktree(dir.path(), "work");
    git_ok(&work, &["push", "-q", &url, "HEAD:main"]);
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let gcs = {
        let (data, done) = (server.data.clone(), done.clone());
        std::thread::spawn(move || {
            let mut runs = 0;
            let deadline = Instant::now() + Duration::from_secs(120);
            while !done.load(std::sync::atomic::Ordering::SeqCst) && Instant::now() < deadline {
                let gc = run_vole(&data, &["repo", "gc", "alice/r"]);
                assert!(gc.status.success(), "vole repo gc: {}", text(&gc.stderr));
                runs += 1;
            }
            runs
        })
    };
    let mut tip = String::new();
    for round in 0..12u64 {
        tip = commit_file(
            &work,
            &format!("f{round}.bin"),
            &random_bytes(128 << 10, round + 1),
        );
        push_through(&work, &url, "HEAD:main");
        // Garbage for the next gc: a branch pushed, then deleted.
        git_ok(&work, &["checkout", "-q", "-b", "side"]);
        commit_file(&work, "side.bin", &random_bytes(64 << 10, round + 100));
        push_through(&work, &url, "HEAD:side");
        push_through(&work, &url, ":side");
        git_ok(&work, &["checkout", "-q", "main"]);
        git_ok(&work, &["branch", "-q", "-D", "side"]);
    }
    done.store(true, std::sync::atomic::Ordering::SeqCst);
    let runs = gcs.join().unwrap();
    assert!(runs > 0, "no gc ran");

    assert_eq!(
        ref_value(&bare, "refs/heads/main").as_deref(),
        Some(tip.as_str())
    );
    let fsck = git(&bare, &["fsck", "--full", "--no-dangling"]);
    assert!(
        fsck.status.success(),
        "fsck after {runs} gcs: {}",
        text(&fsck.stderr)
    );
    let clone = dir.path().join("clone");
    git_ok(dir.path(), &["clone", "-q", &url, clone.to_str().unwrap()]);
    for round in 0..12u64 {
        let file = std::fs::read(clone.join(format!("f{round}.bin"))).unwrap();
        assert_eq!(file, random_bytes(128 << 10, round + 1), "f{round}.bin");
    }
    let check = run_vole(&server.data, &["check"]);
    assert!(
        check.status.success(),
        "vole check: {}",
        text(&check.stdout)
    );
    server.stop();
}
