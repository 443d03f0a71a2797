//! Durable git writes, observed: the syncs of a real push and of a real
//! repo creation, seen with strace over `vole` and every process it
//! starts (git included); refs whose committed write the disk lost,
//! restored at start; a repo a crash left half-created, finished at start;
//! a git too old to sync references, refused at start.
//!
//! A power cut cannot be staged here, so the tests check the order of the
//! system calls that make the writes durable, which is what a power cut
//! depends on: each file synced before it is renamed into place, each
//! directory synced after the rename into it, and both before the pusher
//! hears "ok".

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::support::*;

/// One traced system call: where in the trace it started and ended.
#[derive(Debug, Clone)]
struct Call {
    pid: u32,
    name: String,
    /// Arguments as strace printed them (paths shown by `-y`).
    args: String,
    result: String,
    start: usize,
    end: usize,
}

impl Call {
    fn ok(&self) -> bool {
        !self.result.trim_start().starts_with('-')
    }
}

const TRACED: &str =
    "trace=fsync,fdatasync,rename,renameat,renameat2,link,linkat,unlink,unlinkat,write";

/// strace's options for a run whose trace goes to `out`: every process,
/// paths of file descriptors shown, strings long enough for a pkt-line.
fn strace_args(out: &Path) -> Vec<String> {
    [
        "strace",
        "-f",
        "-qq",
        "-y",
        "-s",
        "256",
        "-e",
        TRACED,
        "-o",
        out.to_str().unwrap(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

/// Parses strace -f output: `PID name(args) = result`, or a call split
/// over `PID name(args <unfinished ...>` and `PID <... name resumed>...) = result`.
fn parse_trace(text: &str) -> Vec<Call> {
    let mut calls: Vec<Call> = Vec::new();
    let mut open: std::collections::HashMap<u32, usize> = Default::default();
    for (index, line) in text.lines().enumerate() {
        let Some((pid, rest)) = line.split_once(' ') else {
            continue;
        };
        let Ok(pid) = pid.trim().parse::<u32>() else {
            continue;
        };
        let rest = rest.trim_start();
        if let Some(resumed) = rest.strip_prefix("<... ") {
            if let Some(i) = open.remove(&pid) {
                let tail = resumed.split_once("resumed>").map_or("", |(_, t)| t);
                calls[i].args.push_str(tail);
                calls[i].result = tail.rsplit_once(") = ").map_or("", |(_, r)| r).into();
                calls[i].end = index;
            }
            continue;
        }
        let Some((name, args)) = rest.split_once('(') else {
            continue;
        };
        if name.starts_with('+') || name.starts_with('-') {
            continue; // exits and signals
        }
        let unfinished = args.ends_with("<unfinished ...>");
        let result = if unfinished {
            String::new()
        } else {
            args.rsplit_once(") = ").map_or("", |(_, r)| r).into()
        };
        calls.push(Call {
            pid,
            name: name.to_string(),
            args: args.to_string(),
            result,
            start: index,
            end: index,
        });
        if unfinished {
            open.insert(pid, calls.len() - 1);
        }
    }
    calls
}

fn is_sync(call: &Call) -> bool {
    (call.name == "fsync" || call.name == "fdatasync") && call.ok()
}

/// The path inside `<...>` of a call's first (fd) argument.
fn fd_path(call: &Call) -> &str {
    call.args
        .split_once('<')
        .and_then(|(_, rest)| rest.split_once('>'))
        .map_or("", |(path, _)| path)
}

/// The quoted paths of a rename or link call: (from, to).
fn two_paths(call: &Call) -> (String, String) {
    let quoted: Vec<&str> = call.args.split('"').skip(1).step_by(2).collect();
    (
        quoted.first().copied().unwrap_or("").to_string(),
        quoted.get(1).copied().unwrap_or("").to_string(),
    )
}

/// Resolves a path strace printed relative to a process's cwd (git runs
/// in the repo) against `repo`.
fn absolute(path: &str, repo: &Path) -> PathBuf {
    let path = path.trim_start_matches("./");
    if path.starts_with('/') {
        PathBuf::from(path)
    } else {
        repo.join(path)
    }
}

fn renames(calls: &[Call]) -> impl Iterator<Item = &Call> {
    calls
        .iter()
        .filter(|c| c.name.starts_with("rename") || c.name.starts_with("link"))
        .filter(|c| c.ok())
}

/// strace is installed and may trace here (ptrace can be forbidden in
/// containers).
fn strace_available() -> bool {
    std::process::Command::new("strace")
        .args(["-f", "-qq", "-o", "/dev/null", "true"])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// `alice/repo` served with `--anonymous-push` under strace: the scratch
/// dir, the data dir, the trace file and the server.
fn traced_server() -> (tempfile::TempDir, PathBuf, PathBuf, TestServer) {
    let dir = tempfile::tempdir().unwrap();
    let data = data_with_repo(dir.path());
    let trace = dir.path().join("push.trace");
    let args = strace_args(&trace);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let server = TestServer::builder()
        .data(&data)
        .arg("--anonymous-push")
        .wrapped_in(&args)
        .start();
    (dir, data, trace, server)
}

#[test]
fn a_push_is_synced_pack_and_index_then_ref_lock_then_its_directory_before_ok() {
    assert!(
        strace_available(),
        "strace is needed and must be allowed to trace (Debian's strace; scripts/test installs it)"
    );
    let (dir, data, trace, server) = traced_server();
    let work = worktree(dir.path(), "work");
    commit_file(&work, "big.bin", &random_bytes(64 * 1024, 7));
    let url = server.url("/alice/repo.git");
    git_ok(&work, &["push", &url, "HEAD:refs/heads/topic/durable"]);
    let pushed = git_ok(&work, &["rev-parse", "HEAD"]).trim().to_string();
    server.stop();

    let repo = std::fs::canonicalize(data.join("repos/alice/repo.git")).unwrap();
    assert_eq!(
        ref_value(&repo, "refs/heads/topic/durable").as_deref(),
        Some(pushed.as_str())
    );
    let text = std::fs::read_to_string(&trace).unwrap();
    let calls = parse_trace(&text);
    let shown = || {
        calls
            .iter()
            .filter(|c| c.name != "write")
            .map(|c| format!("{} {} {}", c.pid, c.name, c.args))
            .collect::<Vec<_>>()
            .join("\n")
    };
    let ref_file = repo.join("refs/heads/topic/durable");
    let lock = PathBuf::from(format!("{}.lock", ref_file.display()));

    // The ref's rename: its lock file over the ref.
    let ref_rename = renames(&calls)
        .find(|c| {
            let (from, to) = two_paths(c);
            absolute(&from, &repo) == lock && absolute(&to, &repo) == ref_file
        })
        .unwrap_or_else(|| panic!("no rename of {} in the trace:\n{}", lock.display(), shown()));

    // 1. The pack and its index, synced before they are renamed, and the
    //    directory they land in (objects/pack) synced before the ref moves.
    let mut pack_files = Vec::new();
    for ext in ["pack", "idx"] {
        let landed = renames(&calls)
            .filter(|c| {
                let (_, to) = two_paths(c);
                let to = absolute(&to, &repo);
                to.parent() == Some(&repo.join("objects/pack"))
                    && to.extension().is_some_and(|x| x == ext)
            })
            .max_by_key(|c| c.end)
            .unwrap_or_else(|| {
                panic!(
                    "no .{ext} moved into objects/pack before the ref:\n{}",
                    shown()
                )
            });
        // index-pack writes tmp_pack_*/tmp_idx_* in the quarantine,
        // syncs, renames to pack-<hash>.*; receive-pack then links those
        // into objects/pack.
        let quarantine_name = format!("tmp_{ext}_");
        let synced = calls
            .iter()
            .filter(|c| is_sync(c))
            .any(|c| fd_path(c).contains(&quarantine_name) && c.end < landed.start);
        assert!(
            synced,
            "the .{ext} was not synced before it was moved into place (core.fsync objects/derived-metadata):\n{}",
            shown()
        );
        assert!(
            landed.end < ref_rename.start,
            "the .{ext} landed after the ref moved"
        );
        pack_files.push(landed.end);
    }
    let pack_dir = repo.join("objects/pack");
    let last_landed = *pack_files.iter().max().unwrap();
    assert!(
        calls.iter().filter(|c| is_sync(c)).any(|c| {
            Path::new(fd_path(c)) == pack_dir && c.start > last_landed && c.end < ref_rename.start
        }),
        "objects/pack was not synced between the pack's arrival and the ref's move (vole's prepared hook):\n{}",
        shown()
    );

    // 2. The ref's lock file, synced before its rename.
    assert!(
        calls
            .iter()
            .filter(|c| is_sync(c))
            .any(|c| Path::new(fd_path(c)) == lock && c.end < ref_rename.start),
        "the ref lock file was not synced before its rename (core.fsync=reference):\n{}",
        shown()
    );

    // 3. The ref's directory (new: topic/) and the ones above it synced
    //    after the rename and before receive-pack reports "ok" to the client.
    let report = calls
        .iter()
        .filter(|c| c.name == "write" && c.start > ref_rename.end)
        .find(|c| c.args.contains("ok refs/heads/topic/durable"))
        .unwrap_or_else(|| panic!("receive-pack's report-status is not in the trace"));
    for dir in [
        repo.join("refs/heads/topic"),
        repo.join("refs/heads"),
        repo.join("refs"),
    ] {
        assert!(
            calls.iter().filter(|c| is_sync(c)).any(|c| {
                Path::new(fd_path(c)) == dir && c.start > ref_rename.end && c.end < report.start
            }),
            "{} was not synced between the ref's rename and the report to the pusher (vole's committed hook):\n{}",
            dir.display(),
            shown()
        );
    }
}

#[test]
fn an_update_and_a_deletion_in_one_push_are_synced_before_ok() {
    assert!(
        strace_available(),
        "strace is needed and must be allowed to trace"
    );
    let (dir, data, trace, server) = traced_server();
    let work = worktree(dir.path(), "work");
    let url = server.url("/alice/repo.git");
    git_ok(&work, &["push", &url, "HEAD:main", "HEAD:refs/heads/old"]);
    commit_file(&work, "second.txt", b"second");
    // One push, two refs: main moves on, old is deleted.
    git_ok(
        &work,
        &["push", "--atomic", &url, "HEAD:main", ":refs/heads/old"],
    );
    server.stop();

    let repo = std::fs::canonicalize(data.join("repos/alice/repo.git")).unwrap();
    assert_eq!(ref_value(&repo, "refs/heads/old"), None);
    let calls = parse_trace(&std::fs::read_to_string(&trace).unwrap());
    let shown = || {
        calls
            .iter()
            .filter(|c| c.name != "write")
            .map(|c| format!("{} {} {}", c.pid, c.name, c.args))
            .collect::<Vec<_>>()
            .join("\n")
    };
    let main = repo.join("refs/heads/main");
    let lock = repo.join("refs/heads/main.lock");
    // The second push's rename of main (the last one in the trace).
    let update = renames(&calls)
        .filter(|c| {
            let (from, to) = two_paths(c);
            absolute(&from, &repo) == lock && absolute(&to, &repo) == main
        })
        .max_by_key(|c| c.end)
        .unwrap_or_else(|| panic!("no rename of main.lock:\n{}", shown()));
    let first_report = calls
        .iter()
        .find(|c| c.name == "write" && c.args.contains("ok refs/heads/old"))
        .expect("the first push's report");
    assert!(
        update.start > first_report.end,
        "anti-vacuity: the rename found is the second push's"
    );
    assert!(
        calls.iter().filter(|c| is_sync(c)).any(|c| {
            Path::new(fd_path(c)) == lock && c.start > first_report.end && c.end < update.start
        }),
        "main's lock file was not synced before its rename:\n{}",
        shown()
    );
    let deletion = calls
        .iter()
        .filter(|c| c.name.starts_with("unlink") && c.ok() && c.start > first_report.end)
        .find(|c| {
            c.args
                .split('"')
                .nth(1)
                .is_some_and(|p| absolute(p, &repo) == repo.join("refs/heads/old"))
        })
        .unwrap_or_else(|| {
            panic!(
                "the deletion of refs/heads/old is not in the trace:\n{}",
                shown()
            )
        });
    let report = calls
        .iter()
        .filter(|c| c.name == "write" && c.start > update.end.max(deletion.end))
        .find(|c| c.args.contains("ok refs/heads/main"))
        .unwrap_or_else(|| panic!("the second push's report-status is not in the trace"));
    let moved = update.end.max(deletion.end);
    for dir in [repo.join("refs/heads"), repo.clone()] {
        assert!(
            calls.iter().filter(|c| is_sync(c)).any(|c| {
                Path::new(fd_path(c)) == dir && c.start > moved && c.end < report.start
            }),
            "{} was not synced between the update and deletion and the report to the pusher:\n{}",
            dir.display(),
            shown()
        );
    }
}

#[test]
fn repo_creation_syncs_every_file_and_directory_and_the_directories_above() {
    assert!(strace_available(), "strace is needed");
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    // The data dir first, so the traced run only creates the repo.
    assert!(run_vole(&data, &["repo", "list"]).status.success());
    let trace = dir.path().join("create.trace");
    let mut command = std::process::Command::new("strace");
    command
        .args(strace_args(&trace))
        .arg(vole_bin())
        .arg("--data")
        .arg(&data)
        .args(["repo", "create", "alice/durable", "--description", "kept"])
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default());
    let output = wait_output(
        command
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap(),
        Duration::from_secs(60),
    );
    assert!(output.status.success(), "{}", text(&output.stderr));
    let data = std::fs::canonicalize(&data).unwrap();
    let repo = data.join("repos/alice/durable.git");
    let calls = parse_trace(&std::fs::read_to_string(&trace).unwrap());
    let shown = || {
        calls
            .iter()
            .filter(|c| c.name != "write")
            .map(|c| format!("{} {}", c.name, c.args))
            .collect::<Vec<_>>()
            .join("\n")
    };
    let rename = renames(&calls)
        .find(|c| absolute(&two_paths(c).1, &data) == repo)
        .unwrap_or_else(|| panic!("the repo was not renamed into place:\n{}", shown()));
    let staged = PathBuf::from(two_paths(rename).0);

    // Everything the repo holds was synced (where it was built) before
    // the rename.
    let mut expected = vec![staged.clone()];
    let mut stack = vec![repo.clone()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap().flatten() {
            let path = entry.path();
            expected.push(staged.join(path.strip_prefix(&repo).unwrap()));
            if path.is_dir() {
                stack.push(path);
            }
        }
    }
    for name in [
        "HEAD",
        "config",
        "description",
        "objects",
        "refs/heads",
        "hooks",
    ] {
        assert!(
            expected.contains(&staged.join(name)),
            "anti-vacuity: the new repo has no {name}"
        );
    }
    for path in &expected {
        assert!(
            calls
                .iter()
                .filter(|c| is_sync(c))
                .any(|c| Path::new(fd_path(c)) == path && c.end < rename.start),
            "{} was not synced before the repo was renamed into place:\n{}",
            path.display(),
            shown()
        );
    }
    // And the directories the rename changed, after it.
    for dir in [data.join("repos/alice"), data.join("repos")] {
        assert!(
            calls
                .iter()
                .filter(|c| is_sync(c))
                .any(|c| Path::new(fd_path(c)) == dir && c.start > rename.end),
            "{} was not synced after the repo was renamed into it:\n{}",
            dir.display(),
            shown()
        );
    }
}

#[test]
fn a_repo_left_half_created_by_a_crash_is_finished_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    for repo in ["alice/empty", "alice/pushed"] {
        assert!(run_vole(&data, &["repo", "create", repo]).status.success());
    }
    let server = TestServer::builder()
        .data(&data)
        .arg("--anonymous-push")
        .start();
    let work = worktree(dir.path(), "work");
    git_ok(
        &work,
        &["push", &server.url("/alice/pushed.git"), "HEAD:main"],
    );
    let pushed = git_ok(&work, &["rev-parse", "HEAD"]).trim().to_string();
    server.stop();
    // What a power cut left of repos created by a vole that synced
    // nothing: HEAD and config renamed into place with no bytes.
    let empty = data.join("repos/alice/empty.git");
    let with_refs = data.join("repos/alice/pushed.git");
    for repo in [&empty, &with_refs] {
        std::fs::write(repo.join("HEAD"), b"").unwrap();
        std::fs::write(repo.join("config"), b"").unwrap();
    }
    std::fs::remove_dir_all(empty.join("refs/tags")).unwrap();
    assert!(
        !git(&empty, &["rev-parse", "--git-dir"]).status.success(),
        "anti-vacuity: git must choke on the broken repo"
    );

    let server = TestServer::builder()
        .data(&data)
        .arg("--anonymous-push")
        .start();
    for repo in ["alice/empty", "alice/pushed"] {
        assert!(
            server
                .log
                .wait_for(&["half-created", repo], Duration::from_secs(5))
                .is_some(),
            "no warning for {repo}: {}",
            server.log.all()
        );
    }
    for repo in [&empty, &with_refs] {
        let fsck = git(repo, &["fsck", "--no-dangling"]);
        assert!(fsck.status.success(), "{}", text(&fsck.stderr));
        assert_eq!(
            git_ok(repo, &["symbolic-ref", "HEAD"]).trim(),
            "refs/heads/main"
        );
    }
    assert!(empty.join("refs/tags").is_dir());
    assert_eq!(ref_value(&with_refs, "refs/heads/main"), Some(pushed));
    // Cloneable and pushable again.
    let clone = dir.path().join("clone");
    git_ok(
        dir.path(),
        &[
            "clone",
            "-q",
            &server.url("/alice/pushed.git"),
            clone.to_str().unwrap(),
        ],
    );
    git_ok(
        &work,
        &["push", &server.url("/alice/empty.git"), "HEAD:main"],
    );
}

#[test]
fn a_git_older_than_the_minimum_is_refused_at_start_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let fake = dir.path().join("old-git");
    write_script(&fake, "#!/bin/sh\necho 'git version 2.34.1'\n");
    let data = dir.path().join("data");
    let child = vole(&data)
        .args(["serve", "--listen", "127.0.0.1:0", "--git"])
        .arg(&fake)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let output = wait_output(child, Duration::from_secs(30));
    assert!(!output.status.success(), "vole served with git 2.34.1");
    let stderr = text(&output.stderr);
    assert!(
        stderr.contains("git version 2.34.1") && stderr.contains("vole needs git 2.39.3 or later"),
        "{stderr}"
    );
}

#[test]
fn a_push_whose_ref_directory_cannot_be_synced_is_not_confirmed_to_the_pusher() {
    assert!(
        strace_available(),
        "strace is needed and must be allowed to trace"
    );
    let dir = tempfile::tempdir().unwrap();
    let data = data_with_repo(dir.path());
    let heads = std::fs::canonicalize(data.join("repos/alice/repo.git/refs/heads")).unwrap();
    // Every fsync of refs/heads (and only of it) fails with EIO: the
    // committed hook's directory sync, after git has moved the ref.
    let server = server_with_failing(&data, &heads, "fsync", "EIO");
    let work = worktree(dir.path(), "work");
    let pushed = git(
        &work,
        &["push", &server.url("/alice/repo.git"), "HEAD:main"],
    );
    let stderr = text(&pushed.stderr);
    assert!(
        !pushed.status.success(),
        "git reported a push whose ref directory was not synced as successful: {stderr}"
    );
    assert!(
        stderr.contains("could not be made durable, so the push is not confirmed"),
        "{stderr}"
    );
    assert!(
        server
            .log
            .wait_for(&["refs/heads"], Duration::from_secs(5))
            .is_some_and(|line| line.contains("durable")),
        "the server must log the failed sync: {}",
        server.log.all()
    );
    server.stop();
}

#[test]
fn a_metadata_write_the_log_cannot_take_is_a_503_that_shows_no_internals() {
    assert!(
        strace_available(),
        "strace is needed and must be allowed to trace"
    );
    let dir = tempfile::tempdir().unwrap();
    let data = data_with_repo(dir.path());
    let meta_log = std::fs::canonicalize(data.join("log/meta.arrow")).unwrap();
    // Every write to the meta log fails with EIO (opening an existing
    // log writes nothing to it): the log fails, as on a dying disk.
    let server = server_with_failing(&data, &meta_log, "write,writev,pwrite64,pwritev", "EIO");
    let body = r#"{"title":"lost?"}"#;
    let response = http(
        server.addr,
        &format!(
            "POST /api/v1/repos/alice/repo/issues HTTP/1.1\r\nContent-Type: application/json\r\nContent-Length: {}",
            body.len()
        ),
        body.as_bytes(),
    );
    assert_eq!(response.status, 503, "{}", response.text());
    assert!(response.header("retry-after").is_some());
    let text = response.text();
    for internal in ["os error", "Input/output", "sync", "restart", ".arrow"] {
        assert!(
            !text.contains(internal),
            "the client saw {internal:?}: {text}"
        );
    }
    assert!(
        server
            .log
            .wait_for(
                &[
                    "metadata store refused",
                    "metadata log failed",
                    "Input/output"
                ],
                Duration::from_secs(5)
            )
            .is_some(),
        "the detail, down to the io error, must be in the server log: {}",
        server.log.all()
    );
    // Nothing was acknowledged, so nothing is listed.
    let list = http_get(server.addr, "/api/v1/repos/alice/repo/issues");
    assert!(!list.text().contains("lost?"), "{}", list.text());
    server.stop();
}
