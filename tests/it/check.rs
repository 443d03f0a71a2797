//! `vole check`: passes on a healthy data dir with metadata writes not yet
//! folded (beside the running server), and finds a corrupt log frame, a
//! shard ref behind a write the meta log marks applied, and a missing
//! object, each in a line naming it; and users that share an email.

use std::path::{Path, PathBuf};

use serde_json::json;

use crate::support::*;

const REPO: &str = "alice/repo";

/// `vole check` on `data`: its exit success and its output.
fn check(data: &Path) -> (bool, String) {
    let out = run_vole(data, &["check"]);
    (
        out.status.success(),
        format!("{}{}", text(&out.stdout), text(&out.stderr)),
    )
}

/// A data dir with `alice/repo`, a push, and `issues` issues (one comment
/// on the first); the server is returned running.
fn forge(dir: &Path, flags: &[&str]) -> (TestServer, String, PathBuf) {
    let data = data_with_repo(dir);
    let token = user_token(&data, "alice", false, "write", &[]);
    let mut builder = TestServer::builder().data(&data).arg("--anonymous-push");
    for flag in flags {
        builder = builder.arg(flag);
    }
    let server = builder.start();
    let work = worktree(dir, "work");
    commit_file(&work, "a.txt", b"one\n");
    git_ok(
        &work,
        &["push", "-q", &server.url("/alice/repo.git"), "main"],
    );
    (server, token, work)
}

fn post(
    server: &TestServer,
    token: &str,
    path: &str,
    body: serde_json::Value,
) -> serde_json::Value {
    let body = body.to_string();
    let r = http(
        server.addr,
        &format!(
            "POST /api/v1/repos/{REPO}/{path} HTTP/1.1\r\nAuthorization: Bearer {token}\r\nContent-Type: application/json\r\nContent-Length: {}",
            body.len()
        ),
        body.as_bytes(),
    );
    assert_eq!(r.status, 201, "{}", r.text());
    serde_json::from_slice(&r.body).unwrap()
}

#[test]
fn a_healthy_data_dir_passes_with_writes_not_yet_folded() {
    let dir = tempfile::tempdir().unwrap();
    // Nothing folds for an hour: the writes stay in the log only.
    let (server, token, _work) = forge(dir.path(), &["--meta-fold-interval", "1h"]);
    for title in ["one", "two"] {
        post(&server, &token, "issues", json!({ "title": title }));
    }
    let (ok, said) = check(&server.data);
    assert!(ok, "vole check failed on a healthy data dir:\n{said}");
    assert!(said.contains("no problems"), "{said}");
    // Anti-vacuity: it saw the repo, the logs, and the unfolded writes.
    assert!(said.contains("not yet folded"), "{said}");
    assert!(said.contains("checked 2 repos"), "{said}");
    let data = server.data.clone();
    server.stop();
    let (ok, said) = check(&data);
    assert!(ok, "vole check failed after a clean stop:\n{said}");
}

#[test]
fn a_corrupt_log_frame_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let (server, _token, work) = forge(dir.path(), &[]);
    for i in 0..4 {
        commit_file(&work, "a.txt", format!("{i}\n").as_bytes());
        git_ok(
            &work,
            &["push", "-q", &server.url("/alice/repo.git"), "main"],
        );
    }
    let data = server.data.clone();
    server.stop();
    let log = data.join("log/refs.arrow");
    let mut bytes = std::fs::read(&log).unwrap();
    // Frames start with the IPC continuation marker; the third one is in
    // the middle, with whole frames after it.
    let starts: Vec<usize> = bytes
        .windows(4)
        .enumerate()
        .filter(|(_, w)| *w == [0xFF; 4])
        .map(|(i, _)| i)
        .collect();
    assert!(starts.len() >= 6, "too few frames: {}", starts.len());
    let at = starts[2];
    bytes[at..at + 8].copy_from_slice(b"garbage!");
    std::fs::write(&log, &bytes).unwrap();
    let (ok, said) = check(&data);
    assert!(!ok, "vole check passed a corrupt ref log:\n{said}");
    assert!(
        said.contains(&format!("refs.arrow is corrupt at byte offset {at}")),
        "{said}"
    );
}

#[test]
fn a_shard_ref_behind_an_applied_write_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let (server, token, _work) = forge(dir.path(), &["--meta-fold-interval", "10ms"]);
    let issue = post(&server, &token, "issues", json!({ "title": "first" }));
    let number = issue["number"].as_u64().unwrap();
    let shard_count = |server: &TestServer| {
        git_ok(
            &server.data.join("repos/alice/repo.git"),
            &["for-each-ref", "refs/meta/shards/"],
        )
        .lines()
        .count()
    };
    assert!(
        eventually(std::time::Duration::from_secs(10), || shard_count(&server)
            == 1),
        "the issue was never folded"
    );
    // A second fold commit on the same shard (the issue's thread).
    post(
        &server,
        &token,
        &format!("issues/{number}/comments"),
        json!({ "body": "a comment" }),
    );
    let data = server.data.clone();
    server.stop();
    let (ok, said) = check(&data);
    assert!(ok, "{said}");
    let repo = data.join("repos/alice/repo.git");
    let shard_ref = git_ok(
        &repo,
        &["for-each-ref", "--format=%(refname)", "refs/meta/shards/"],
    );
    let shard_ref = shard_ref.trim();
    let parents = git_ok(&repo, &["rev-list", "--count", shard_ref]);
    assert_eq!(
        parents.trim(),
        "2",
        "the comment was not a second fold commit"
    );
    // The shard ref loses its last fold commit (a ref write lost to a
    // disk, say): the comment the log marks applied is no longer in it.
    git_ok(&repo, &["update-ref", shard_ref, &format!("{shard_ref}~1")]);
    let (ok, said) = check(&data);
    assert!(
        !ok,
        "vole check passed a shard ref behind an applied write:\n{said}"
    );
    assert!(
        said.contains(&format!("alice/repo: {shard_ref} holds meta log write #"))
            && said.contains("which the meta log marks applied"),
        "{said}"
    );
}

#[test]
fn a_missing_object_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let (server, _token, work) = forge(dir.path(), &[]);
    let data = server.data.clone();
    server.stop();
    let repo = data.join("repos/alice/repo.git");
    // The pushed pack, unpacked into loose objects, then one blob removed.
    let pack_dir = repo.join("objects/pack");
    let aside = dir.path().join("aside");
    std::fs::create_dir_all(&aside).unwrap();
    for pack in files_in(&pack_dir) {
        std::fs::rename(&pack, aside.join(pack.file_name().unwrap())).unwrap();
    }
    for pack in files_in(&aside) {
        if pack.extension().is_some_and(|e| e == "pack") {
            let out = git_command(&repo)
                .args(["unpack-objects", "-q"])
                .stdin(std::fs::File::open(&pack).unwrap())
                .output()
                .unwrap();
            assert!(out.status.success(), "{}", text(&out.stderr));
        }
    }
    let blob = git_ok(&work, &["rev-parse", "HEAD:a.txt"]);
    let blob = blob.trim();
    let loose = repo.join(format!("objects/{}/{}", &blob[..2], &blob[2..]));
    assert!(loose.is_file(), "{} is not loose", loose.display());
    let (ok, said) = check(&data);
    assert!(ok, "unpacked, the repo should still pass:\n{said}");
    std::fs::remove_file(&loose).unwrap();
    let (ok, said) = check(&data);
    assert!(
        !ok,
        "vole check passed a repo with a missing object:\n{said}"
    );
    assert!(
        said.lines()
            .any(|line| line.starts_with("alice/repo: git fsck:") && line.contains(blob)),
        "{said}"
    );
}

#[test]
fn the_server_compacts_the_folded_meta_log_by_itself() {
    let dir = tempfile::tempdir().unwrap();
    let (server, token, _work) = forge(
        dir.path(),
        &[
            "--meta-fold-interval",
            "10ms",
            "--meta-log-compact-size",
            "16KiB",
        ],
    );
    let log = server.data.join("log/meta.arrow");
    let mut numbers = Vec::new();
    for i in 0..60 {
        let issue = post(
            &server,
            &token,
            "issues",
            json!({ "title": format!("issue {i}") }),
        );
        numbers.push(issue["number"].as_u64().unwrap());
    }
    let grown = std::fs::metadata(&log).unwrap().len();
    assert!(
        grown > 16 * 1024,
        "the meta log did not pass its limit: {grown} bytes"
    );
    assert!(
        eventually(std::time::Duration::from_secs(30), || {
            std::fs::metadata(&log).map_or(u64::MAX, |m| m.len()) < 16 * 1024
        }),
        "the meta log was never compacted ({grown} bytes, limit 16 KiB)"
    );
    let data = server.data.clone();
    server.stop();
    let (ok, said) = check(&data);
    assert!(ok, "{said}");
    // Every issue is still there after a restart.
    let again = TestServer::builder().data(&data).start();
    for number in numbers {
        let r = http(
            again.addr,
            &format!(
                "GET /api/v1/repos/{REPO}/issues/{number} HTTP/1.1\r\nAuthorization: Bearer {token}"
            ),
            b"",
        );
        assert_eq!(r.status, 200, "issue #{number} was lost to the compaction");
    }
}

#[test]
fn garbage_inside_a_well_formed_frame_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let (server, _token, _work) = forge(dir.path(), &[]);
    let data = server.data.clone();
    server.stop();
    // The pushed branch's name, as the ref log holds it, overwritten in
    // place with bytes of the same length: every frame still parses.
    let name = b"refs/heads/main";
    let log = data.join("log/refs.arrow");
    let mut bytes = std::fs::read(&log).unwrap();
    let at = bytes
        .windows(name.len())
        .position(|w| w == name)
        .expect("the branch name is in the ref log");
    bytes[at..at + name.len()].copy_from_slice(b"junk/junk/junk!");
    std::fs::write(&log, &bytes).unwrap();
    let (ok, said) = check(&data);
    assert!(!ok, "vole check passed garbage in the ref log:\n{said}");
    assert!(
        said.contains("refs.arrow is corrupt at byte offset") && said.contains("names no ref"),
        "{said}"
    );
}

#[test]
fn users_sharing_an_email_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let (server, _token, _work) = forge(dir.path(), &[]);
    let data = server.data.clone();
    user_token(&data, "carol", false, "read", &[]);
    server.stop();
    let (ok, said) = check(&data);
    assert!(ok, "anti-vacuity: distinct emails pass:\n{said}");
    // carol's email, as the meta log holds her document, turned into
    // alice's (the same length): two users from before emails were
    // unique.
    let (from, to) = (
        b"\"email\":\"carol@example.org\"",
        b"\"email\":\"alice@example.org\"",
    );
    let log = data.join("log/meta.arrow");
    let mut bytes = std::fs::read(&log).unwrap();
    let at = bytes
        .windows(from.len())
        .position(|w| w == from)
        .expect("carol's email is in the meta log");
    bytes[at..at + from.len()].copy_from_slice(to);
    std::fs::write(&log, &bytes).unwrap();
    let (ok, said) = check(&data);
    assert!(!ok, "vole check passed two users with one email:\n{said}");
    assert!(
        said.contains("users alice, carol share the email \"alice@example.org\""),
        "{said}"
    );
}
