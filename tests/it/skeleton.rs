//! The skeleton: start and stop, the data dir lock, `repo create`/`list` with
//! and without a server, the name rules, start-up cleanup, the control
//! socket, clear start-up errors, a command's answer without log lines, and
//! the Dockerfile's command.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::{Duration, SystemTime};

use crate::support::{TestServer, data_with_repo, http_get, run_vole, vole};

fn stderr(output: &std::process::Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn stdout(output: &std::process::Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// Started with a soft open-file limit of 256, the server raises it (every
/// connection, git pipe and sealed site buffer takes a descriptor).
#[test]
fn serve_raises_a_low_soft_open_file_limit() {
    let server = TestServer::builder().soft_fd_limit(256).start();
    let limits = std::fs::read_to_string(format!("/proc/{}/limits", server.pid())).unwrap();
    let line = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .expect("an open-file limit");
    let fields: Vec<&str> = line.split_whitespace().collect();
    let (soft, hard) = (fields[3], fields[4]);
    let expected = match hard.parse::<u64>() {
        Ok(hard) => hard.min(65_536).to_string(),
        Err(_) => "65536".to_string(), // unlimited
    };
    assert_eq!(soft, expected, "soft open-file limit not raised: {line}");
}

#[test]
fn serve_answers_healthz_logs_the_request_and_stops_on_sigterm() {
    let server = TestServer::start();
    let response = http_get(server.addr, "/healthz?token=secret");
    assert_eq!(response.status, 200);
    assert_eq!(response.text(), "ok\n");
    let line = server
        .log
        .wait_for(
            &[
                "request",
                "method=GET",
                "path=/healthz",
                "status=200",
                "bytes=3",
            ],
            Duration::from_secs(5),
        )
        .unwrap_or_else(|| panic!("no request log line; log:\n{}", server.log.all()));
    assert!(
        !line.contains("secret"),
        "the query (which may hold a token) was logged: {line}"
    );
    assert!(line.contains("duration_ms="), "{line}");

    let missing = http_get(server.addr, "/no/such/thing");
    assert_eq!(missing.status, 404);

    let log = server.log.clone();
    let status = server.stop();
    assert!(
        status.success(),
        "SIGTERM must exit 0, got {status}; log:\n{}",
        log.all()
    );
    assert!(
        log.wait_for(&["vole stopped"], Duration::from_secs(1))
            .is_some()
    );
}

#[test]
fn a_second_serve_on_a_locked_data_dir_names_the_holder() {
    let server = TestServer::start();
    let output = run_vole(&server.data, &["serve", "--listen", "127.0.0.1:0"]);
    assert!(!output.status.success());
    let err = stderr(&output);
    let expected = format!("is in use by process {} (vole serve)", server.pid());
    assert!(err.contains(&expected), "expected {expected:?} in:\n{err}");
    assert_eq!(server.stop().code(), Some(0));
}

#[test]
fn repo_create_works_with_and_without_a_running_server_and_both_are_visible() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");

    let offline = run_vole(
        &data,
        &[
            "repo",
            "create",
            "alice/offline",
            "--description",
            "made without a server",
        ],
    );
    assert!(offline.status.success(), "{}", stderr(&offline));
    assert!(data.join("repos/alice/offline.git/HEAD").is_file());
    let head = std::fs::read_to_string(data.join("repos/alice/offline.git/HEAD")).unwrap();
    assert_eq!(head.trim(), "ref: refs/heads/main", "HEAD must be on main");

    let server = TestServer::builder().data(&data).start();
    let online = run_vole(&data, &["repo", "create", "alice/online"]);
    assert!(online.status.success(), "{}", stderr(&online));
    // It went through the server (the server logged it), not around it.
    server
        .log
        .wait_for(
            &["repository created", "alice/online"],
            Duration::from_secs(5),
        )
        .unwrap_or_else(|| {
            panic!(
                "the running server did not create the repo; log:\n{}",
                server.log.all()
            )
        });

    let listed = run_vole(&data, &["repo", "list"]);
    assert!(listed.status.success(), "{}", stderr(&listed));
    let text = stdout(&listed);
    assert!(
        text.contains("alice/offline\tmade without a server"),
        "{text}"
    );
    assert!(text.contains("alice/online"), "{text}");

    let again = run_vole(&data, &["repo", "create", "alice/online"]);
    assert!(!again.status.success());
    assert!(
        stderr(&again).contains("repository alice/online already exists"),
        "{}",
        stderr(&again)
    );

    assert_eq!(server.stop().code(), Some(0));
    let json = run_vole(&data, &["repo", "list", "--json"]);
    let repos: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    let names: Vec<&str> = repos
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["alice/offline", "alice/online"]);
}

#[test]
fn repo_create_honours_the_configured_default_branch() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let config = dir.path().join("vole.toml");
    std::fs::write(&config, "default-branch = \"trunk\"\n").unwrap();
    let output = run_vole(
        &data,
        &[
            "--config",
            config.to_str().unwrap(),
            "repo",
            "create",
            "a/b",
        ],
    );
    assert!(output.status.success(), "{}", stderr(&output));
    let head = std::fs::read_to_string(data.join("repos/a/b.git/HEAD")).unwrap();
    assert_eq!(head.trim(), "ref: refs/heads/trunk");
}

#[test]
fn every_name_rule_is_enforced_with_a_message_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let long = format!("a/{}", "x".repeat(101));
    let cases: &[(&str, &str)] = &[
        ("noslash", "must be written owner/name"),
        ("a/b/c", "must be written owner/name"),
        ("/b", "owner is empty"),
        ("a/", "repository name is empty"),
        (&long, "longer than 100 characters"),
        ("a/b c", "contains ' '"),
        ("a/b%2f", "contains '%'"),
        ("a/ü", "contains 'ü'"),
        ("a/.hidden", "starts with a dot"),
        ("a/b..c", "contains \"..\""),
        ("a/repo.git", "ends in \".git\""),
        ("a/REPO.GIT", "ends in \".git\""),
        ("api/x", "reserved"),
        ("a/static", "reserved"),
        ("a/healthz", "reserved"),
        ("metrics/x", "reserved"),
        ("-/x", "reserved"),
        ("a/login", "reserved"),
        ("a/logout", "reserved"),
        ("settings/x", "reserved"),
    ];
    for (name, rule) in cases {
        let output = run_vole(&data, &["repo", "create", "--", name]);
        let err = stderr(&output);
        assert!(!output.status.success(), "{name:?} was accepted");
        assert!(err.contains(rule), "{name:?}: expected {rule:?} in {err:?}");
        let lines: Vec<&str> = err
            .lines()
            .filter(|l| l.starts_with("vole: error:"))
            .collect();
        assert_eq!(
            lines.len(),
            1,
            "{name:?}: one error line expected, got {err:?}"
        );
    }
    let repos = data.join("repos");
    let created: Vec<_> = std::fs::read_dir(&repos)
        .map(|d| d.flatten().collect())
        .unwrap_or_default();
    assert!(created.is_empty(), "a refused name left {created:?} behind");
    let ok = run_vole(&data, &["repo", "create", "a-1/b_2.c"]);
    assert!(
        ok.status.success(),
        "a valid name was refused: {}",
        stderr(&ok)
    );
}

fn set_mtime(path: &Path, age: Duration) {
    let file = std::fs::File::open(path).unwrap();
    file.set_modified(SystemTime::now() - age).unwrap();
}

#[test]
fn start_up_cleanup_removes_what_a_killed_server_left_and_keeps_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    assert!(run_vole(&data, &["repo", "create", "a/r"]).status.success());
    let repo = data.join("repos/a/r.git");

    let old_quarantine = repo.join("objects/tmp_objdir-incoming-OLD");
    let young_quarantine = repo.join("objects/tmp_objdir-incoming-YOUNG");
    std::fs::create_dir_all(old_quarantine.join("pack")).unwrap();
    std::fs::create_dir_all(&young_quarantine).unwrap();
    set_mtime(&old_quarantine, Duration::from_secs(2 * 3600));
    let ref_lock = repo.join("refs/heads/main.lock");
    std::fs::write(&ref_lock, "0000\n").unwrap();
    let packed_lock = repo.join("packed-refs.lock");
    std::fs::write(&packed_lock, "").unwrap();
    let spool = data.join("tmp/spool-123");
    std::fs::write(&spool, "half a push").unwrap();
    let stale_socket = data.join("run/vole.sock");
    std::fs::create_dir_all(data.join("run")).unwrap();
    std::fs::write(&stale_socket, "").unwrap();

    let server = TestServer::builder().data(&data).start();
    for (path, what) in [
        (&old_quarantine, "leftover push quarantine"),
        (&ref_lock, "stale git lock file"),
        (&packed_lock, "stale git lock file"),
        (&spool, "leftover temporary file"),
    ] {
        assert!(!path.exists(), "{} was not removed", path.display());
        let name = path.file_name().unwrap().to_str().unwrap();
        assert!(
            server
                .log
                .wait_for(
                    &["start-up cleanup removed", what, name],
                    Duration::from_secs(1)
                )
                .is_some(),
            "no cleanup line for {name}; log:\n{}",
            server.log.all()
        );
    }
    assert!(
        young_quarantine.exists(),
        "a young quarantine (maybe a live push) was removed"
    );
    assert!(repo.join("HEAD").is_file(), "the repo itself was touched");
    // The stale socket file was replaced by the live one.
    assert!(std::os::unix::net::UnixStream::connect(&stale_socket).is_ok());
    server.stop();
}

#[test]
fn the_control_socket_is_owner_only_and_refuses_other_protocol_versions() {
    use std::io::{BufRead, BufReader, Write};
    let server = TestServer::start();
    let socket = server.data.join("run/vole.sock");
    let mode = std::fs::metadata(&socket).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "control socket mode {mode:o}");

    let stream = std::os::unix::net::UnixStream::connect(&socket).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut writer = stream;
    let mut ask = |line: &str| {
        writer.write_all(line.as_bytes()).unwrap();
        writer.write_all(b"\n").unwrap();
        let mut reply = String::new();
        reader.read_line(&mut reply).unwrap();
        serde_json::from_str::<serde_json::Value>(&reply).unwrap()
    };
    let reply = ask(r#"{"v":2,"op":"ping"}"#);
    assert_eq!(reply["ok"], false);
    assert!(
        reply["error"]
            .as_str()
            .unwrap()
            .contains("version 2 is not supported"),
        "{reply}"
    );
    let reply = ask("not json");
    assert_eq!(reply["ok"], false);
    // The same connection still works after bad requests.
    let reply = ask(r#"{"v":1,"op":"ping"}"#);
    assert_eq!(reply["ok"], true, "{reply}");
    assert_eq!(reply["data"]["server"], "vole");
    server.stop();
}

#[test]
fn a_data_dir_other_users_can_read_is_made_owner_only_and_the_socket_has_a_dir_of_its_own() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let added = run_vole(&data, &["user", "add", "ann", "--email", "ann@example.org"]);
    assert!(added.status.success(), "{}", stderr(&added));
    // As a volume made 0755 (Docker's /data) or a copy leaves them: the
    // password hashes and token digests readable by every local user.
    let loose = [data.clone(), data.join("system.git"), data.join("log")];
    let mode = |path: &Path| {
        format!(
            "{:o}",
            std::fs::metadata(path).unwrap().permissions().mode() & 0o777
        )
    };
    let open_up = || {
        for path in &loose {
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
    };
    open_up();
    let server = TestServer::builder().data(&data).start();
    for path in &loose {
        assert_eq!(mode(path), "700", "{} was left open", path.display());
        let said = format!("{} was mode 755, open to other users", path.display());
        assert!(
            server
                .log
                .wait_for(&[&said], Duration::from_secs(1))
                .is_some(),
            "no warning for {}; log:\n{}",
            path.display(),
            server.log.all()
        );
    }
    // The socket is bound in a directory only its owner may enter.
    let socket = data.join("run/vole.sock");
    assert_eq!(mode(&data.join("run")), "700");
    assert_eq!(mode(&socket), "600");
    assert!(std::os::unix::net::UnixStream::connect(&socket).is_ok());
    assert!(!data.join("vole.sock").exists(), "a socket beside the data");
    server.stop();

    // A CLI command that takes the lock itself tightens them too.
    open_up();
    let listed = run_vole(&data, &["user", "list"]);
    assert!(listed.status.success(), "{}", stderr(&listed));
    for path in &loose {
        assert_eq!(
            mode(path),
            "700",
            "{} was left open by the CLI",
            path.display()
        );
    }
    assert!(
        stderr(&listed).contains("made owner-only"),
        "{}",
        stderr(&listed)
    );
}

fn assert_one_clear_line(output: &std::process::Output, expected: &str) {
    assert!(!output.status.success(), "expected a failure exit");
    let err = stderr(output);
    assert!(
        !err.contains("panicked") && !err.contains("backtrace"),
        "{err}"
    );
    let lines: Vec<&str> = err
        .lines()
        .filter(|l| l.starts_with("vole: error:"))
        .collect();
    assert_eq!(lines.len(), 1, "one error line expected in {err:?}");
    assert!(
        lines[0].contains(expected),
        "expected {expected:?} in {:?}",
        lines[0]
    );
}

#[test]
fn start_up_errors_are_one_clear_line_and_a_failure_exit() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");

    let no_git = run_vole(
        &data,
        &[
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--git",
            "/nonexistent/git",
        ],
    );
    assert_one_clear_line(&no_git, "git binary not found: /nonexistent/git");

    let busy = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = busy.local_addr().unwrap().port();
    let listen = format!("127.0.0.1:{port}");
    let busy_port = run_vole(&data, &["serve", "--listen", &listen]);
    assert_one_clear_line(&busy_port, &format!("cannot listen on {listen}"));
    assert!(
        stderr(&busy_port)
            .to_lowercase()
            .contains("address already in use")
    );

    let a_file = dir.path().join("a-file");
    std::fs::write(&a_file, "").unwrap();
    let unwritable = run_vole(&a_file.join("data"), &["serve", "--listen", "127.0.0.1:0"]);
    assert_one_clear_line(&unwritable, "cannot be used");

    let bad_listen = run_vole(&data, &["serve", "--listen", "localhost"]);
    assert_one_clear_line(&bad_listen, "listen = \"localhost\" is not valid");
}

#[test]
fn the_dockerfile_command_runs_and_answers_healthz() {
    let dockerfile =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/Dockerfile")).unwrap();
    let mut cmd: Vec<String> = Vec::new();
    let mut env: Vec<(String, String)> = Vec::new();
    for line in dockerfile.lines().map(str::trim) {
        if let Some(rest) = line.strip_prefix("CMD ") {
            cmd = serde_json::from_str(rest).expect("CMD must be a JSON array");
        }
        if let Some(rest) = line.strip_prefix("ENV ") {
            for pair in rest.split_whitespace() {
                let (k, v) = pair.split_once('=').expect("ENV KEY=VALUE");
                env.push((k.into(), v.trim_matches('"').into()));
            }
        }
    }
    assert_eq!(
        cmd.first().map(String::as_str),
        Some("vole"),
        "CMD must run vole: {cmd:?}"
    );
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    // As the image makes /data: by `mkdir`, 0755, owned by the server's user.
    std::fs::create_dir(&data).unwrap();
    std::fs::set_permissions(&data, std::fs::Permissions::from_mode(0o755)).unwrap();
    // Exactly the image's arguments, but for the listen address and data dir.
    let mut args = cmd[1..].to_vec();
    let mut replaced = 0;
    for i in 0..args.len().saturating_sub(1) {
        match args[i].as_str() {
            "--listen" => {
                args[i + 1] = "127.0.0.1:0".into();
                replaced += 1;
            }
            "--data" => {
                args[i + 1] = data.to_str().unwrap().into();
                replaced += 1;
            }
            _ => {}
        }
    }
    assert_eq!(replaced, 2, "CMD must name --listen and --data: {cmd:?}");
    assert!(cmd.contains(&"0.0.0.0:8080".to_string()) && cmd.contains(&"/data".to_string()));

    let mut command = std::process::Command::new(crate::support::vole_bin());
    command
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default());
    for (k, v) in &env {
        command.env(k, v);
    }
    let mut child = command
        .args(&args)
        .stderr(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let log = crate::support::LogLines::default();
    let reader = log.clone();
    let stderr = child.stderr.take().unwrap();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
        {
            reader.push(line);
        }
    });
    let line = log.wait_for(&["vole listening on http://"], Duration::from_secs(30));
    let Some(line) = line else {
        let _ = child.kill();
        panic!(
            "the Dockerfile's command did not start; log:\n{}",
            log.all()
        );
    };
    let addr = line
        .split("http://")
        .nth(1)
        .unwrap()
        .split_whitespace()
        .next()
        .unwrap()
        .parse()
        .unwrap();
    let health = http_get(addr, "/healthz");
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(health.status, 200);
    assert!(
        data.join("repos").is_dir(),
        "the data dir from --data was not used"
    );
    let mode = std::fs::metadata(&data).unwrap().permissions().mode() & 0o777;
    assert_eq!(
        format!("{mode:o}"),
        "700",
        "the image's /data was left open"
    );
}

#[test]
fn a_command_prints_its_answer_not_the_log_lines_of_the_store_it_opens() {
    let dir = tempfile::tempdir().unwrap();
    let data = data_with_repo(dir.path());
    // As a person runs it: no VOLE_LOG set.
    let quiet = |args: &[&str]| {
        let mut command = vole(&data);
        command.env_remove("VOLE_LOG").args(args);
        command.stdin(std::process::Stdio::null());
        let out = command.output().unwrap();
        assert!(out.status.success(), "{args:?}: {}", stderr(&out));
        out
    };
    quiet(&["user", "add", "ann", "--email", "ann@example.org"]);
    let made = quiet(&[
        "token", "create", "laptop", "--user", "ann", "--scope", "read",
    ]);
    let printed = format!("{}{}", stdout(&made), stderr(&made));
    assert!(
        stdout(&made).contains("vole_"),
        "no token printed: {printed}"
    );
    assert!(
        !printed.contains("INFO"),
        "a command without a server printed the store's log lines:\n{printed}"
    );
    // `-v` shows them.
    let verbose = quiet(&["-v", "repo", "list"]);
    assert!(
        stderr(&verbose).contains("INFO") || stdout(&verbose).contains("INFO"),
        "anti-vacuity: -v shows no log lines: {}",
        stderr(&verbose)
    );
}
