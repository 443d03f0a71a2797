//! Clone and push over smart HTTP with real git (and libgit2): protocol v0
//! and v2, shallow and partial clones, gzip and chunked bodies, the push
//! switch, 404s and traversal, malformed bodies, 503 under saturation, 413
//! on both cap paths, aborted clients, hook stderr, slow clients, and a
//! graceful stop with a push in flight.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::support::*;

#[test]
fn every_basic_operation_works_over_protocol_v2_and_v0() {
    let forge = Forge::start(&["alice/repo"], &["--anonymous-push"]);
    let work = worktree(&forge.dir, "work");
    for (version, url) in [("2", repo_url(&forge, ".git")), ("0", repo_url(&forge, ""))] {
        let v = format!("protocol.version={version}");
        let branch = format!("topic-v{version}");
        let tag = format!("v{version}.0");
        commit_file(&work, &format!("file-{version}.txt"), version.as_bytes());
        // push: a new branch and a tag, traced to see the protocol.
        let pushed = git_env(
            &work,
            &[
                "-c",
                &v,
                "push",
                &url,
                &format!("HEAD:refs/heads/{branch}"),
                "HEAD:refs/heads/main",
            ],
            &[("GIT_TRACE_PACKET", "1")],
        );
        assert!(
            pushed.status.success(),
            "v{version} push: {}",
            text(&pushed.stderr)
        );
        git_ok(&work, &["tag", &tag]);
        git_ok(&work, &["-c", &v, "push", &url, &tag]);
        let head = git_ok(&work, &["rev-parse", "HEAD"]).trim().to_string();
        assert_eq!(
            ref_value(&forge.bare("alice/repo"), &format!("refs/heads/{branch}")),
            Some(head.clone())
        );
        assert_eq!(
            ref_value(&forge.bare("alice/repo"), &format!("refs/tags/{tag}")),
            Some(head.clone())
        );

        // clone, traced: v2 must really be v2, v0 really v0.
        let clone_dir = format!("clone-v{version}");
        let cloned = git_env(
            &forge.dir,
            &["-c", &v, "clone", "-q", &url, &clone_dir],
            &[("GIT_TRACE_PACKET", "1")],
        );
        assert!(
            cloned.status.success(),
            "v{version} clone: {}",
            text(&cloned.stderr)
        );
        let trace = text(&cloned.stderr);
        let spoke_v2 = trace.contains("version 2");
        assert_eq!(
            spoke_v2,
            version == "2",
            "v{version} clone: protocol v2 {} in the packet trace; is Git-Protocol passed as GIT_PROTOCOL?",
            if spoke_v2 { "seen" } else { "not seen" }
        );
        let clone = forge.dir.join(&clone_dir);
        assert_eq!(git_ok(&clone, &["rev-parse", "HEAD"]).trim(), head);

        // fetch and ls-remote
        let next = commit_file(&work, "more.txt", version.as_bytes());
        git_ok(&work, &["-c", &v, "push", &url, "HEAD:main"]);
        git_ok(&clone, &["-c", &v, "fetch", "-q", "origin"]);
        assert_eq!(git_ok(&clone, &["rev-parse", "origin/main"]).trim(), next);
        let listed = git_ok(&forge.dir, &["-c", &v, "ls-remote", &url]);
        assert!(
            listed.contains(&format!("{next}\trefs/heads/main")),
            "{listed}"
        );
        assert!(listed.contains(&format!("refs/tags/{tag}")), "{listed}");

        // force-push (rewind) and delete
        git_ok(&work, &["-c", &v, "push", "--force", &url, "HEAD~1:main"]);
        assert_eq!(
            ref_value(&forge.bare("alice/repo"), "refs/heads/main"),
            Some(head.clone())
        );
        git_ok(
            &work,
            &["-c", &v, "push", &url, &format!(":refs/heads/{branch}")],
        );
        assert_eq!(
            ref_value(&forge.bare("alice/repo"), &format!("refs/heads/{branch}")),
            None
        );
        git_ok(&work, &["reset", "-q", "--hard", &next]);
    }
}

#[test]
fn shallow_and_partial_clones_work_over_v2_and_v0() {
    let forge = Forge::start(&["alice/repo"], &["--anonymous-push"]);
    let work = worktree(&forge.dir, "work");
    for i in 0..3 {
        commit_file(
            &work,
            &format!("f{i}.txt"),
            format!("content {i}").as_bytes(),
        );
    }
    git_ok(&work, &["push", &repo_url(&forge, ".git"), "HEAD:main"]);
    for version in ["2", "0"] {
        let v = format!("protocol.version={version}");
        let shallow = format!("shallow-v{version}");
        git_ok(
            &forge.dir,
            &[
                "-c",
                &v,
                "clone",
                "-q",
                "--depth",
                "1",
                &repo_url(&forge, ".git"),
                &shallow,
            ],
        );
        let count = git_ok(&forge.dir.join(&shallow), &["rev-list", "--count", "HEAD"]);
        assert_eq!(
            count.trim(),
            "1",
            "v{version}: --depth 1 gave {count} commits"
        );

        let partial = format!("partial-v{version}");
        git_ok(
            &forge.dir,
            &[
                "-c",
                &v,
                "clone",
                "-q",
                "--filter=blob:none",
                "--no-checkout",
                &repo_url(&forge, ".git"),
                &partial,
            ],
        );
        let dir = forge.dir.join(&partial);
        let missing = git_ok(&dir, &["rev-list", "--objects", "--missing=print", "HEAD"]);
        assert!(
            missing.lines().any(|l| l.starts_with('?')),
            "v{version}: a blob:none clone fetched every blob"
        );
        // The lazy fetch of a missing blob (v0 needs allowReachableSHA1InWant).
        let checkout = git(&dir, &["-c", &v, "checkout", "-q", "main"]);
        assert!(
            checkout.status.success(),
            "v{version} lazy fetch: {}",
            text(&checkout.stderr)
        );
        assert_eq!(
            std::fs::read_to_string(dir.join("f2.txt")).unwrap(),
            "content 2"
        );
    }
}

#[test]
fn gzip_request_bodies_and_chunked_pushes_larger_than_the_post_buffer() {
    let forge = Forge::start(&["alice/repo"], &["--anonymous-push"]);
    let work = worktree(&forge.dir, "work");
    // ~3 MiB of incompressible data: over http.postBuffer, so chunked.
    let big = commit_file(&work, "big.bin", &random_bytes(3 << 20, 7));
    let pushed = git_env(
        &work,
        &["push", &repo_url(&forge, ".git"), "HEAD:main"],
        &[("GIT_TRACE_CURL", "1"), ("GIT_TRACE_CURL_NO_DATA", "1")],
    );
    assert!(pushed.status.success(), "{}", text(&pushed.stderr));
    let trace = text(&pushed.stderr);
    assert!(
        trace.contains("Transfer-Encoding: chunked"),
        "the push was not chunked; the test would not cover chunked bodies"
    );
    assert_eq!(
        ref_value(&forge.bare("alice/repo"), "refs/heads/main"),
        Some(big)
    );

    // Many branches with distinct tips: the clone's want list passes 1 KiB
    // and git gzips the request body.
    for i in 0..40 {
        let oid = git_ok(
            &work,
            &[
                "commit-tree",
                "HEAD^{tree}",
                "-p",
                "HEAD",
                "-m",
                &format!("b{i}"),
            ],
        );
        git_ok(&work, &["branch", &format!("b{i:03}"), oid.trim()]);
    }
    git_ok(&work, &["push", "-q", &repo_url(&forge, ".git"), "--all"]);
    for version in ["2", "0"] {
        let clone = forge.dir.join(format!("clone-v{version}"));
        let cloned = git_env(
            &forge.dir,
            &[
                "-c",
                &format!("protocol.version={version}"),
                "clone",
                "--mirror",
                &repo_url(&forge, ".git"),
                clone.to_str().unwrap(),
            ],
            &[("GIT_TRACE_CURL", "1"), ("GIT_TRACE_CURL_NO_DATA", "1")],
        );
        assert!(cloned.status.success(), "{}", text(&cloned.stderr));
        assert!(
            text(&cloned.stderr).contains("Content-Encoding: gzip"),
            "v{version}: no gzip-encoded request body was sent; the test would not cover gzip"
        );
        let branches = git_ok(
            &clone,
            &["for-each-ref", "--format=%(refname)", "refs/heads/"],
        );
        assert_eq!(branches.lines().count(), 41, "v{version}: {branches}");
    }
}

#[test]
fn anonymous_push_is_asked_for_credentials_unless_anonymous_push_is_on() {
    let forge = Forge::start(&["alice/repo"], &[]);
    let work = worktree(&forge.dir, "work");
    let pushed = git(&work, &["push", &repo_url(&forge, ".git"), "HEAD:main"]);
    assert!(!pushed.status.success());
    let err = text(&pushed.stderr);
    // git was asked for credentials (a 401), and, prompts being off here,
    // says it could not get them.
    assert!(err.contains("could not read Username"), "{err}");
    let advertised = http_get(
        forge.server().addr,
        "/alice/repo.git/info/refs?service=git-receive-pack",
    );
    assert_eq!(advertised.status, 401, "{}", advertised.text());
    assert_eq!(
        advertised.header("www-authenticate"),
        Some("Basic realm=\"vole\"")
    );
    assert!(
        advertised.text().contains("vole token create"),
        "the pusher is not told how to get credentials: {}",
        advertised.text()
    );
    assert_eq!(
        ref_value(&forge.bare("alice/repo"), "refs/heads/main"),
        None
    );
    // Clone still works.
    let clone = git(&forge.dir, &["clone", "-q", &repo_url(&forge, ".git"), "c"]);
    assert!(clone.status.success(), "{}", text(&clone.stderr));
}

#[test]
fn unknown_repos_dumb_http_and_traversal_attempts_get_404() {
    let forge = Forge::start(&["alice/repo"], &["--anonymous-push"]);
    let addr = forge.server().addr;
    // Asked anonymously, a missing repo asks for credentials (a private
    // one answers the same).
    let missing = http_get(addr, "/alice/nope.git/info/refs?service=git-upload-pack");
    assert_eq!(missing.status, 401);
    assert!(
        missing.text().contains("authentication required"),
        "{}",
        missing.text()
    );

    // A symlink inside repos/ that leads outside it.
    let outside = forge.dir.join("outside.git");
    git_ok(
        &forge.dir,
        &["init", "-q", "--bare", outside.to_str().unwrap()],
    );
    std::os::unix::fs::symlink(&outside, forge.server().data.join("repos/alice/escape.git"))
        .unwrap();

    for path in [
        "/alice/repo.git/HEAD",
        "/alice/repo.git/config",
        "/alice/repo.git/objects/info/packs",
        "/alice/repo.git/info/refs",
        "/alice/repo/info/refs",
        "/alice/repo.git/description",
        "/alice/..%2f..%2fetc/info/refs?service=git-upload-pack",
        "/%2e%2e/repo/info/refs?service=git-upload-pack",
        "/alice/%2e%2e/info/refs?service=git-upload-pack",
        "/alice/repo.git%2f..%2f..%2frepo/info/refs?service=git-upload-pack",
        "/..%2f..%2f..%2fetc/passwd/info/refs?service=git-upload-pack",
        "//etc/passwd",
        "/alice/escape.git/info/refs?service=git-upload-pack",
        "/alice/repo.git/../../../etc/passwd",
        "/alice/repo.git/info/refs%00?service=git-upload-pack",
    ] {
        let response = http_get(addr, path);
        // 401: a name the resolver refused, answered as a repo the
        // anonymous may not see.
        assert!(
            [400, 401, 404].contains(&response.status),
            "{path} answered {} {:?}",
            response.status,
            response.text()
        );
    }
    let unknown = http_get(addr, "/alice/repo.git/info/refs?service=git-upload-archive");
    assert_eq!(unknown.status, 400);
}

#[test]
fn a_malformed_request_body_gets_a_4xx_with_gits_reason_never_an_empty_success() {
    let forge = Forge::start(&["alice/repo"], &["--anonymous-push"]);
    let addr = forge.server().addr;
    for (service, ctype) in [
        ("git-upload-pack", "application/x-git-upload-pack-request"),
        ("git-receive-pack", "application/x-git-receive-pack-request"),
    ] {
        for body in [&b"garbage!"[..], b"00", b"\xff\xfe\x00\x01zzzz"] {
            let response = http(
                addr,
                &format!(
                    "POST /alice/repo.git/{service} HTTP/1.1\r\nContent-Type: {ctype}\r\nContent-Length: {}",
                    body.len()
                ),
                body,
            );
            assert!(
                (400..500).contains(&response.status),
                "{service} {body:?}: {} {:?}",
                response.status,
                response.text()
            );
            assert!(
                !response.text().is_empty(),
                "{service}: a 4xx needs a message"
            );
        }
    }
    let bad_type = http(
        addr,
        "POST /alice/repo.git/git-upload-pack HTTP/1.1\r\nContent-Type: text/plain\r\nContent-Length: 4",
        b"0000",
    );
    assert_eq!(bad_type.status, 415);
    let bad_encoding = http(
        addr,
        "POST /alice/repo.git/git-upload-pack HTTP/1.1\r\nContent-Type: application/x-git-upload-pack-request\r\nContent-Encoding: br\r\nContent-Length: 4",
        b"0000",
    );
    assert_eq!(bad_encoding.status, 415);
}

#[test]
fn hook_stderr_reaches_the_pusher_as_remote_lines() {
    let forge = Forge::start(&["alice/repo"], &["--anonymous-push"]);
    let state = forge.dir.join("hook-state");
    std::fs::create_dir_all(&state).unwrap();
    std::fs::write(state.join("release"), "").unwrap(); // never block
    install_blocking_hook(&forge.bare("alice/repo"), &state);
    let work = worktree(&forge.dir, "work");
    let pushed = git(&work, &["push", &repo_url(&forge, ".git"), "HEAD:main"]);
    assert!(pushed.status.success(), "{}", text(&pushed.stderr));
    assert!(
        text(&pushed.stderr).contains("remote: hook here: checking your push"),
        "hook stderr did not reach the pusher: {}",
        text(&pushed.stderr)
    );
}

/// Starts a push that blocks in the pre-receive hook; returns the running
/// git push and the hook-state dir.
fn blocked_push(forge: &Forge, name: &str) -> (std::process::Child, PathBuf) {
    let state = forge.dir.join(format!("hook-{name}"));
    std::fs::create_dir_all(&state).unwrap();
    install_blocking_hook(&forge.bare("alice/repo"), &state);
    let work = worktree(&forge.dir, name);
    // Its own process group, so the test can kill the whole client (git
    // push runs git-remote-http as a child, which holds the connection).
    use std::os::unix::process::CommandExt;
    let child = git_command(&work)
        .args(["push", &repo_url(forge, ".git"), "HEAD:refs/heads/blocked"])
        .process_group(0)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    assert!(
        eventually(Duration::from_secs(30), || state.join("hook.pid").exists()),
        "the push never reached its hook"
    );
    (child, state)
}

#[test]
fn a_saturated_service_answers_503_with_retry_after() {
    let forge = Forge::start(
        &["alice/repo"],
        &[
            "--anonymous-push",
            "--receive-pack-limit",
            "1",
            "--queue-timeout",
            "1s",
        ],
    );
    let (push, state) = blocked_push(&forge, "first");
    // The one receive-pack slot is held by the blocked push.
    let started = Instant::now();
    let refused = http_get(
        forge.server().addr,
        "/alice/repo.git/info/refs?service=git-receive-pack",
    );
    assert_eq!(refused.status, 503, "{:?}", refused.text());
    assert_eq!(refused.header("retry-after"), Some("1"));
    assert!(
        started.elapsed() >= Duration::from_millis(900),
        "503 came before the queue timeout"
    );
    assert!(refused.text().contains("busy"), "{}", refused.text());
    // Clones use the other semaphore and are not affected.
    let clone = git(&forge.dir, &["clone", "-q", &repo_url(&forge, ".git"), "c"]);
    assert!(clone.status.success(), "{}", text(&clone.stderr));
    std::fs::write(state.join("release"), "").unwrap();
    let output = wait_output(push, Duration::from_secs(60));
    assert!(output.status.success(), "{}", text(&output.stderr));
}

#[test]
fn pushes_over_the_cap_get_413_on_both_paths_and_move_nothing() {
    let forge = Forge::start(
        &["alice/repo"],
        &["--anonymous-push", "--max-push-size", "1MiB"],
    );
    let addr = forge.server().addr;
    // Declared too large: refused before a byte of body is read.
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    write!(
        stream,
        "POST /alice/repo.git/git-receive-pack HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-git-receive-pack-request\r\nContent-Length: {}\r\n\r\n",
        5 << 20
    )
    .unwrap();
    let mut response = vec![0u8; 4096];
    let n = stream.read(&mut response).unwrap();
    let head = text(&response[..n]);
    assert!(head.starts_with("HTTP/1.1 413"), "{head}");
    assert!(head.contains("--max-push-size"), "{head}");
    drop(stream);

    // Chunked (no Content-Length): refused while spooling.
    let work = worktree(&forge.dir, "work");
    commit_file(&work, "big.bin", &random_bytes(3 << 20, 11));
    let pushed = git(&work, &["push", &repo_url(&forge, ".git"), "HEAD:main"]);
    assert!(!pushed.status.success());
    assert!(
        text(&pushed.stderr).contains("HTTP 413")
            || text(&pushed.stderr).contains("returned error: 413"),
        "{}",
        text(&pushed.stderr)
    );
    assert_eq!(
        ref_value(&forge.bare("alice/repo"), "refs/heads/main"),
        None,
        "a refused push moved a ref"
    );
    assert!(
        eventually(Duration::from_secs(5), || files_in(
            &forge.server().data.join("tmp")
        )
        .is_empty()),
        "spool files left: {:?}",
        files_in(&forge.server().data.join("tmp"))
    );
}

#[test]
fn a_client_that_disconnects_mid_body_leaves_no_process_spool_or_ref() {
    let forge = Forge::start(&["alice/repo"], &["--anonymous-push"]);
    let mut stream = TcpStream::connect(forge.server().addr).unwrap();
    write!(
        stream,
        "POST /alice/repo.git/git-receive-pack HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-git-receive-pack-request\r\nContent-Length: {}\r\n\r\n",
        8 << 20
    )
    .unwrap();
    let chunk = vec![b'x'; 1 << 20];
    for _ in 0..2 {
        stream.write_all(&chunk).unwrap();
    }
    // The body is over the in-memory bound: it is being spooled to a file.
    let tmp = forge.server().data.join("tmp");
    assert!(
        eventually(Duration::from_secs(10), || !files_in(&tmp).is_empty()),
        "no spool file while the body arrives; the test would not observe its removal"
    );
    assert!(
        descendants(forge.server().pid()).is_empty(),
        "a git child started before the body was complete"
    );
    drop(stream);
    assert!(
        eventually(Duration::from_secs(10), || files_in(&tmp).is_empty()),
        "spool file left after the client went away: {:?}",
        files_in(&tmp)
    );
    assert!(descendants(forge.server().pid()).is_empty());
    let refs = git_ok(&forge.bare("alice/repo"), &["for-each-ref"]);
    assert!(refs.is_empty(), "refs moved: {refs}");
}

#[test]
fn a_client_that_goes_away_mid_push_leaves_no_git_process_behind() {
    let forge = Forge::start(&["alice/repo"], &["--anonymous-push"]);
    let (mut push, state) = blocked_push(&forge, "aborted");
    // The hook writes its pid as it starts: read it once it is whole.
    let hook_pid: u32 = (0..250)
        .find_map(|_| {
            let pid = std::fs::read_to_string(state.join("hook.pid")).ok()?;
            let pid = pid.trim().parse().ok();
            if pid.is_none() {
                std::thread::sleep(Duration::from_millis(20));
            }
            pid
        })
        .expect("the hook never wrote its pid");
    let children = descendants(forge.server().pid());
    assert!(
        children.iter().any(|(_, cmd)| cmd.contains("receive-pack")),
        "no receive-pack under the server while the push waits: {children:?}"
    );
    signal_group(push.id(), 9); // the client (git and its remote helper) goes away
    push.wait().unwrap();
    assert!(
        eventually(Duration::from_secs(10), || descendants(
            forge.server().pid()
        )
        .is_empty()
            && !Path::new(&format!("/proc/{hook_pid}")).exists()),
        "git processes left after the client went away: {:?}",
        descendants(forge.server().pid())
    );
    std::fs::write(state.join("release"), "").unwrap();
    assert_eq!(
        ref_value(&forge.bare("alice/repo"), "refs/heads/blocked"),
        None,
        "an aborted push moved a ref"
    );
}

#[test]
fn a_killed_server_leaves_no_git_process_behind() {
    let forge = Forge::start(&["alice/repo"], &["--anonymous-push"]);
    let (push, state) = blocked_push(&forge, "orphan");
    let git_pids: Vec<u32> = descendants(forge.server().pid())
        .into_iter()
        .map(|(p, _)| p)
        .collect();
    assert!(!git_pids.is_empty());
    signal(forge.server().pid(), 9);
    let alive = || {
        git_pids
            .iter()
            .filter(|p| {
                Path::new(&format!("/proc/{p}/cmdline")).exists()
                    && std::fs::read_to_string(format!("/proc/{p}/stat"))
                        .is_ok_and(|s| !s.contains(") Z "))
            })
            .count()
    };
    assert!(
        eventually(Duration::from_secs(10), || alive() == 0),
        "{} git processes outlived the killed server (the sentinel kills every process carrying its mark)",
        alive()
    );
    std::fs::write(state.join("release"), "").unwrap();
    let _ = wait_output(push, Duration::from_secs(30));
    assert_eq!(
        ref_value(&forge.bare("alice/repo"), "refs/heads/blocked"),
        None
    );
}

#[test]
fn a_slow_client_neither_delays_a_clone_nor_holds_its_connection_forever() {
    let forge = Forge::start(
        &["alice/repo"],
        &[
            "--anonymous-push",
            "--header-read-timeout",
            "2s",
            "--upload-pack-limit",
            "1",
        ],
    );
    let work = worktree(&forge.dir, "work");
    git_ok(&work, &["push", &repo_url(&forge, ".git"), "HEAD:main"]);
    // A client trickling its headers, and one trickling a body.
    let mut slow_headers = TcpStream::connect(forge.server().addr).unwrap();
    slow_headers
        .write_all(b"GET /alice/repo.git/info/refs?service=git-upl")
        .unwrap();
    let mut slow_body = TcpStream::connect(forge.server().addr).unwrap();
    slow_body
        .write_all(b"POST /alice/repo.git/git-upload-pack HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-git-upload-pack-request\r\nContent-Length: 1000\r\n\r\n0032want ")
        .unwrap();
    let started = Instant::now();
    let clone = git(&forge.dir, &["clone", "-q", &repo_url(&forge, ".git"), "c"]);
    assert!(clone.status.success(), "{}", text(&clone.stderr));
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "the clone waited behind slow clients"
    );
    // The header trickler is cut off by the header-read timeout.
    slow_headers
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut buf = [0u8; 256];
    let read = slow_headers.read(&mut buf);
    let still_open = matches!(&read, Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut));
    assert!(
        !still_open,
        "the slow-header connection is still open after 10 s; the header-read timeout did not cut it off"
    );
}
#[test]
fn sigterm_drains_a_push_in_flight_and_exits_0() {
    let mut forge = Forge::start(&["alice/repo"], &["--anonymous-push"]);
    let (push, state) = blocked_push(&forge, "inflight");
    signal(forge.server().pid(), 15);
    assert!(
        forge
            .server()
            .log
            .wait_for(&["shutting down"], Duration::from_secs(10))
            .is_some()
    );
    // New connections are refused while the push drains.
    assert!(
        eventually(Duration::from_secs(5), || TcpStream::connect(
            forge.server().addr
        )
        .is_err()),
        "the server still accepts connections after SIGTERM"
    );
    std::fs::write(state.join("release"), "").unwrap();
    let output = wait_output(push, Duration::from_secs(60));
    assert!(
        output.status.success(),
        "the in-flight push failed: {}",
        text(&output.stderr)
    );
    assert!(ref_value(&forge.bare("alice/repo"), "refs/heads/blocked").is_some());
    let log = forge.server().log.clone();
    let status = forge.take_server().expect("it runs").stop();
    assert_eq!(status.code(), Some(0), "{}", log.all());
}

#[test]
fn libgit2_clones_and_pushes() {
    let forge = Forge::start(&["alice/repo"], &["--anonymous-push"]);
    let work = worktree(&forge.dir, "work");
    git_ok(&work, &["push", &repo_url(&forge, ".git"), "HEAD:main"]);
    let target = forge.dir.join("libgit2-clone");
    let repo = git2::Repository::clone(&repo_url(&forge, ".git"), &target).expect("libgit2 clone");
    assert!(target.join("README.md").is_file());
    // Commit with libgit2 and push with it.
    std::fs::write(target.join("lib.txt"), "from libgit2\n").unwrap();
    let mut index = repo.index().unwrap();
    index.add_path(Path::new("lib.txt")).unwrap();
    index.write().unwrap();
    let tree = repo.find_tree(index.write_tree().unwrap()).unwrap();
    let sig =
        git2::Signature::new("L", "l@example.org", &git2::Time::new(1_767_225_600, 0)).unwrap();
    let parent = repo.head().unwrap().peel_to_commit().unwrap();
    let oid = repo
        .commit(Some("HEAD"), &sig, &sig, "from libgit2", &tree, &[&parent])
        .unwrap();
    let mut remote = repo.find_remote("origin").unwrap();
    remote
        .push(&["refs/heads/main:refs/heads/main"], None)
        .expect("libgit2 push");
    assert_eq!(
        ref_value(&forge.bare("alice/repo"), "refs/heads/main"),
        Some(oid.to_string())
    );
}

/// Runs a client script from `tests/clients` (installed by `.ci/run`).
fn client(program: &str, script: &str, args: &[&str]) -> std::process::Output {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/clients")
        .join(script);
    let child = std::process::Command::new(program)
        .arg(path)
        .args(args)
        .env("HOME", std::env::temp_dir())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{program} must be installed (.ci/run installs it): {e}"));
    wait_output(child, Duration::from_secs(120))
}

/// Clone with `program`, commit with git, push with `program`.
fn clone_and_push_with(program: &str, script: &str) {
    let forge = Forge::start(&["alice/repo"], &["--anonymous-push"]);
    let work = worktree(&forge.dir, "work");
    commit_file(&work, "src/lib.txt", b"library\n");
    git_ok(&work, &["push", &repo_url(&forge, ".git"), "HEAD:main"]);

    let clone = forge.dir.join(format!("{script}-clone"));
    let cloned = client(
        program,
        script,
        &["clone", &repo_url(&forge, ".git"), clone.to_str().unwrap()],
    );
    assert!(
        cloned.status.success(),
        "{script} clone: {}",
        text(&cloned.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(clone.join("src/lib.txt")).unwrap(),
        "library\n"
    );

    git_ok(&clone, &["checkout", "-q", "-B", "main"]);
    let pushed_head = commit_file(&clone, "from-client.txt", script.as_bytes());
    let pushed = client(
        program,
        script,
        &[
            "push",
            clone.to_str().unwrap(),
            &repo_url(&forge, ".git"),
            "refs/heads/main",
        ],
    );
    assert!(
        pushed.status.success(),
        "{script} push: {}",
        text(&pushed.stderr)
    );
    assert_eq!(
        ref_value(&forge.bare("alice/repo"), "refs/heads/main"),
        Some(pushed_head)
    );
}

#[test]
fn dulwich_clones_and_pushes() {
    clone_and_push_with("python3", "dulwich_client.py");
}

#[test]
fn isomorphic_git_clones_and_pushes() {
    clone_and_push_with("node", "isogit_client.mjs");
}

#[test]
fn gitoxide_clones_and_fetches() {
    // gitoxide has no push yet: it clones and fetches (protocol v2).
    // Its reqwest is built without a TLS provider (the features vole's
    // webhooks chose), so this client installs one, whatever ran before.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let forge = Forge::start(&["alice/repo"], &["--anonymous-push"]);
    let work = worktree(&forge.dir, "work");
    let first = commit_file(&work, "g.txt", b"gix");
    git_ok(&work, &["push", &repo_url(&forge, ".git"), "HEAD:main"]);

    let target = forge.dir.join("gix-clone.git");
    let interrupt = std::sync::atomic::AtomicBool::new(false);
    let (repo, _) = gix::prepare_clone_bare(repo_url(&forge, ".git").as_str(), &target)
        .expect("gix prepare clone")
        .fetch_only(gix::progress::Discard, &interrupt)
        .expect("gix clone");
    let main = |repo: &gix::Repository| {
        repo.find_reference("refs/heads/main")
            .expect("main was cloned")
            .id()
            .to_string()
    };
    assert_eq!(main(&repo), first);

    let second = commit_file(&work, "g2.txt", b"gix again");
    git_ok(&work, &["push", &repo_url(&forge, ".git"), "HEAD:main"]);
    let remote = repo
        .remote_at(repo_url(&forge, ".git").as_str())
        .expect("remote")
        .with_refspecs(
            Some("+refs/heads/*:refs/heads/*"),
            gix::remote::Direction::Fetch,
        )
        .expect("refspec");
    remote
        .connect(gix::remote::Direction::Fetch)
        .expect("gix connect")
        .prepare_fetch(gix::progress::Discard, Default::default())
        .expect("gix prepare fetch")
        .receive(gix::progress::Discard, &interrupt)
        .expect("gix fetch");
    let repo = gix::open(&target).unwrap();
    assert_eq!(main(&repo), second);
}

#[test]
fn a_stalled_request_body_gets_408_and_holds_no_process() {
    let forge = Forge::start(
        &["alice/repo"],
        &["--anonymous-push", "--body-idle-timeout", "1s"],
    );
    let mut stream = TcpStream::connect(forge.server().addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(15)))
        .unwrap();
    stream
        .write_all(b"POST /alice/repo.git/git-receive-pack HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-git-receive-pack-request\r\nContent-Length: 1000\r\n\r\n0000")
        .unwrap();
    let started = Instant::now();
    let mut response = vec![0u8; 2048];
    let n = stream
        .read(&mut response)
        .expect("a stalled body must be answered, not left hanging");
    let head = text(&response[..n]);
    assert!(head.starts_with("HTTP/1.1 408"), "{head}");
    assert!(head.contains("stalled"), "{head}");
    assert!(started.elapsed() < Duration::from_secs(10));
    assert!(
        descendants(forge.server().pid()).is_empty(),
        "a git child ran for a body that never arrived"
    );
    assert!(files_in(&forge.server().data.join("tmp")).is_empty());
}

/// A fetch's answer streams through a corked socket (`transport::cgi`'s
/// `Cork`): the cork must come off when git's output ends, or the answer's
/// last bytes wait for the kernel's 200 ms timer. Ten small fetch requests
/// (`ls-refs`) one after another on one kept-alive connection would then
/// take two seconds or more; answered promptly, they take milliseconds.
#[test]
fn each_answer_on_a_kept_alive_connection_arrives_whole_at_once() {
    let forge = Forge::start(&["alice/repo"], &["--anonymous-push"]);
    let work = worktree(&forge.dir, "work");
    git_ok(&work, &["push", &repo_url(&forge, ".git"), "HEAD:main"]);
    let pkt = |line: &str| format!("{:04x}{line}", line.len() + 4);
    let body = format!(
        "{}{}0001{}0000",
        pkt("command=ls-refs\n"),
        pkt("object-format=sha1\n"),
        pkt("peel\n")
    );
    let mut stream = TcpStream::connect(forge.server().addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let started = Instant::now();
    for round in 0..10 {
        write!(
            stream,
            "POST /alice/repo.git/git-upload-pack HTTP/1.1\r\nHost: x\r\nGit-Protocol: version=2\r\n\
             Content-Type: application/x-git-upload-pack-request\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        )
        .unwrap();
        let mut answer = Vec::new();
        let mut buf = [0u8; 4096];
        while !answer.ends_with(b"\r\n0\r\n\r\n") {
            let n = stream.read(&mut buf).unwrap();
            assert!(n > 0, "the connection closed in answer {round}");
            answer.extend_from_slice(&buf[..n]);
        }
        let text = String::from_utf8_lossy(&answer);
        assert!(text.starts_with("HTTP/1.1 200"), "{text}");
        assert!(text.contains("refs/heads/main"), "answer {round}: {text}");
    }
    let took = started.elapsed();
    assert!(
        took < Duration::from_secs(1),
        "ten ls-refs answers took {took:?}: an answer's end waited on a socket left corked"
    );
}

/// `alice/repo` followed by `suffix` (`.git`, `.git/info/refs?...`) on the
/// forge's server.
fn repo_url(forge: &Forge, suffix: &str) -> String {
    forge.url(&format!("/alice/repo{suffix}"))
}
