//! Helpers shared by the benchmark harnesses under `docs/spikes/`: running
//! commands, an isolated git, the release vole binary, ports and arguments.

#![allow(dead_code)] // each harness uses a different subset

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Runs a command to success and returns its stdout.
pub fn sh(cmd: &mut Command) -> String {
    let out = cmd.output().expect("spawn");
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// git in `dir` with no user or system config and frozen identities/dates.
pub fn git(dir: &Path) -> Command {
    let mut c = Command::new("git");
    c.current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_AUTHOR_NAME", "b")
        .env("GIT_AUTHOR_EMAIL", "b@example.org")
        .env("GIT_COMMITTER_NAME", "b")
        .env("GIT_COMMITTER_EMAIL", "b@example.org")
        .env("GIT_AUTHOR_DATE", "2026-01-01T00:00:00Z")
        .env("GIT_COMMITTER_DATE", "2026-01-01T00:00:00Z");
    c
}

/// Builds (if needed) and returns the release `vole` binary.
pub fn release_vole() -> PathBuf {
    sh(Command::new(env!("CARGO")).args(["build", "--release", "--quiet", "--bin", "vole"]));
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/release/vole")
}

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The value after `--name` on the command line.
pub fn arg_text(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
}

/// A numeric `--name N`, or `default`.
pub fn arg(name: &str, default: u64) -> u64 {
    arg_text(name)
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The median; of an even count, the mean of the two middle values.
pub fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let mid = values.len() / 2;
    if values.len().is_multiple_of(2) {
        (values[mid - 1] + values[mid]) / 2.0
    } else {
        values[mid]
    }
}

/// Starts `vole serve --anonymous-push` on `port` with `data`, and waits
/// until it answers `/healthz` (the port is bound before the logs are
/// replayed and the hooks written; the answer comes only after both).
pub fn start_vole(vole: &Path, data: &Path, port: u16) -> Child {
    let child = Command::new(vole)
        .args([
            "serve",
            "--anonymous-push",
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--data",
        ])
        .arg(data)
        .env("VOLE_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start vole");
    let deadline = Instant::now() + Duration::from_secs(30);
    while !healthy(port) {
        assert!(
            Instant::now() < deadline,
            "vole on port {port} did not start"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    child
}

fn healthy(port: u16) -> bool {
    let Ok(mut stream) = std::net::TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
    let mut answer = String::new();
    stream
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .and_then(|()| stream.read_to_string(&mut answer))
        .is_ok()
        && answer.starts_with("HTTP/1.1 200")
}
