//! Test support: [`TestServer`] (a real `vole serve` on an ephemeral port with
//! a temporary data dir), the CLI runner, and a minimal HTTP/1.1 client over a
//! raw socket (tests need to control every byte a client sends).

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

mod browser;
mod forge;
pub use browser::Browser;
pub use forge::Forge;

/// The vole binary cargo built for this test run.
pub fn vole_bin() -> &'static str {
    env!("CARGO_BIN_EXE_vole")
}

/// A `vole` command with a clean environment (no VOLE_* from the caller) and
/// the given data dir.
pub fn vole(data: &Path) -> Command {
    let mut command = Command::new(vole_bin());
    command.env_clear();
    command.env("PATH", std::env::var_os("PATH").unwrap_or_default());
    command.env("VOLE_LOG", "info");
    command.arg("--data").arg(data);
    command
}

/// A data dir under `dir` holding the empty repo `alice/repo`, made with
/// `vole repo create` (no server runs).
pub fn data_with_repo(dir: &Path) -> PathBuf {
    let data = dir.join("data");
    let created = run_vole(&data, &["repo", "create", "alice/repo"]);
    assert!(created.status.success(), "{}", text(&created.stderr));
    data
}

/// `vole serve --anonymous-push` on `data` under strace, injecting
/// `error` into every `syscalls` call that touches `path` (and only
/// those): a failing disk, deterministically.
pub fn server_with_failing(data: &Path, path: &Path, syscalls: &str, error: &str) -> TestServer {
    let path = path.to_str().expect("a UTF-8 path").to_string();
    let trace = format!("trace={syscalls}");
    let inject = format!("inject={syscalls}:error={error}");
    TestServer::builder()
        .data(data)
        .arg("--anonymous-push")
        .wrapped_in(&[
            "strace",
            "-f",
            "-qq",
            "-o",
            "/dev/null",
            "-P",
            &path,
            "-e",
            &trace,
            "-e",
            &inject,
        ])
        .start()
}

/// Adds `user` (`--admin` when `admin`) through `vole user add`, unless it
/// exists, and makes it a token with `vole token create NAME --user USER
/// --scope SCOPE` plus `extra` (e.g. `--repo`, `--expires`); returns the
/// token's text (the last line the command printed). Works with or without
/// a server on `data`.
pub fn user_token(data: &Path, user: &str, admin: bool, scope: &str, extra: &[&str]) -> String {
    let email = format!("{user}@example.org");
    let mut add = vec!["user", "add", user, "--email", &email];
    if admin {
        add.push("--admin");
    }
    let added = run_vole(data, &add);
    assert!(
        added.status.success() || text(&added.stderr).contains("is taken"),
        "vole user add {user}: {}",
        text(&added.stderr)
    );
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    let name = format!(
        "{user}-{scope}-{}",
        NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    );
    let mut create = vec!["token", "create", &name, "--user", user, "--scope", scope];
    create.extend_from_slice(extra);
    let made = run_vole(data, &create);
    assert!(
        made.status.success(),
        "vole token create: {}",
        text(&made.stderr)
    );
    let token = text(&made.stdout)
        .lines()
        .last()
        .unwrap_or_default()
        .to_string();
    assert!(
        token.starts_with("vole_"),
        "no token on the last line: {token:?}"
    );
    token
}

/// Sets `user`'s password through `vole user passwd --password-stdin`
/// (with or without a server on `data`).
pub fn set_password(data: &Path, user: &str, password: &str) {
    let mut set = vole(data)
        .args(["user", "passwd", user, "--password-stdin"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = set.stdin.take().unwrap();
    stdin.write_all(format!("{password}\n").as_bytes()).unwrap();
    drop(stdin);
    let set = wait_output(set, Duration::from_secs(30));
    assert!(
        set.status.success(),
        "vole user passwd: {}",
        text(&set.stderr)
    );
}

/// The value of the hidden form field `name` in `html`.
pub fn hidden_field(html: &str, name: &str) -> String {
    let marker = format!("name=\"{name}\" value=\"");
    let start = html
        .find(&marker)
        .unwrap_or_else(|| panic!("no hidden {name} in {html}"))
        + marker.len();
    html[start..].split('"').next().unwrap().to_string()
}

/// The value a response's `Set-Cookie` gives `name`.
pub fn set_cookie(response: &HttpResponse, name: &str) -> Option<String> {
    response
        .headers
        .iter()
        .filter(|(k, _)| k.eq_ignore_ascii_case("set-cookie"))
        .filter_map(|(_, v)| v.split(';').next()?.split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v.to_string())
}

/// Signs `user` in through the sign-in form (a password without `&`, `=`
/// or `+`) and returns the session's secret.
pub fn web_sign_in(addr: SocketAddr, user: &str, password: &str) -> String {
    let form = http_get(addr, "/-/login");
    let pre = set_cookie(&form, "vole_pre").expect("no pre-session cookie");
    let csrf = hidden_field(&form.text(), "csrf");
    let body = format!(
        "user={user}&password={}&csrf={csrf}",
        password.replace(' ', "+")
    );
    let signed = http(
        addr,
        &format!(
            "POST /-/login HTTP/1.1\r\nCookie: vole_pre={pre}\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: {}",
            body.len()
        ),
        body.as_bytes(),
    );
    assert_eq!(signed.status, 303, "sign-in of {user}: {}", signed.text());
    set_cookie(&signed, "vole_session").expect("no session cookie")
}

/// Signs the session `secret` out through the sign-out form.
pub fn web_sign_out(addr: SocketAddr, secret: &str) {
    let cookie = format!("Cookie: vole_session={secret}");
    let page = http(addr, &format!("GET / HTTP/1.1\r\n{cookie}"), b"");
    assert!(
        page.text().contains("action=\"/-/logout\""),
        "the session cookie did not sign the home page in (no sign-out form):\n{}",
        page.text()
    );
    let csrf = hidden_field(&page.text(), "csrf");
    let body = format!("csrf={csrf}");
    let out = http(
        addr,
        &format!(
            "POST /-/logout HTTP/1.1\r\n{cookie}\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: {}",
            body.len()
        ),
        body.as_bytes(),
    );
    assert_eq!(out.status, 303, "sign-out: {}", out.text());
}

/// `Authorization: Basic` of `user` and `secret`.
pub fn basic(user: &str, secret: &str) -> String {
    use base64::Engine;
    format!(
        "Authorization: Basic {}",
        base64::engine::general_purpose::STANDARD.encode(format!("{user}:{secret}"))
    )
}

/// Runs a vole CLI command to completion (30 s bound).
pub fn run_vole(data: &Path, args: &[&str]) -> Output {
    let child = vole(data)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn vole");
    wait_output(child, Duration::from_secs(30))
}

/// Waits for a child with a bound; kills it if the bound passes. Its
/// stdout and stderr are drained while it runs (a child that fills a pipe
/// nobody reads would never exit).
pub fn wait_output(mut child: Child, bound: Duration) -> Output {
    fn drain(pipe: Option<impl Read + Send + 'static>) -> std::thread::JoinHandle<Vec<u8>> {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            if let Some(mut pipe) = pipe {
                let _ = pipe.read_to_end(&mut bytes);
            }
            bytes
        })
    }
    let stdout = drain(child.stdout.take());
    let stderr = drain(child.stderr.take());
    let deadline = Instant::now() + bound;
    let status = loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "command did not finish within {bound:?}; stderr:\n{}",
                String::from_utf8_lossy(&stderr.join().unwrap_or_default())
            );
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    Output {
        status,
        stdout: stdout.join().unwrap_or_default(),
        stderr: stderr.join().unwrap_or_default(),
    }
}

/// Lines a child wrote to stderr, collected by a reader thread.
#[derive(Clone, Default)]
pub struct LogLines {
    inner: Arc<(Mutex<Vec<String>>, Condvar)>,
}

impl LogLines {
    fn collect(self, stream: impl Read + Send + 'static) -> std::thread::JoinHandle<()> {
        std::thread::spawn(move || {
            for line in BufReader::new(stream).lines() {
                let Ok(line) = line else { break };
                self.push(line);
            }
        })
    }

    pub fn push(&self, line: String) {
        let (lines, changed) = &*self.inner;
        lines.lock().unwrap().push(line);
        changed.notify_all();
    }

    /// Waits until a line contains every one of `needles`; returns it.
    pub fn wait_for(&self, needles: &[&str], bound: Duration) -> Option<String> {
        let deadline = Instant::now() + bound;
        let (lines, changed) = &*self.inner;
        let mut guard = lines.lock().unwrap();
        loop {
            if let Some(line) = guard.iter().find(|l| needles.iter().all(|n| l.contains(n))) {
                return Some(line.clone());
            }
            let now = Instant::now();
            if now >= deadline {
                return None;
            }
            guard = changed.wait_timeout(guard, deadline - now).unwrap().0;
        }
    }

    pub fn all(&self) -> String {
        self.inner.0.lock().unwrap().join("\n")
    }
}

/// Builds a [`TestServer`].
pub struct TestServerBuilder {
    data: Option<PathBuf>,
    args: Vec<String>,
    env: Vec<(String, String)>,
    soft_fd_limit: Option<u64>,
    file_size_limit: Option<u64>,
    wrapper: Vec<String>,
    listen: String,
}

/// A running `vole serve`, killed when dropped.
pub struct TestServer {
    child: Option<Child>,
    /// Started under a wrapper (strace): signals go to vole, not to it.
    wrapped: bool,
    pub addr: SocketAddr,
    pub data: PathBuf,
    pub log: LogLines,
    _tempdir: Option<tempfile::TempDir>,
}

impl TestServer {
    pub fn builder() -> TestServerBuilder {
        TestServerBuilder {
            data: None,
            args: Vec::new(),
            env: Vec::new(),
            soft_fd_limit: None,
            file_size_limit: None,
            wrapper: Vec::new(),
            listen: "127.0.0.1:0".into(),
        }
    }

    pub fn start() -> TestServer {
        TestServer::builder().start()
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("running").id()
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.addr, path)
    }

    /// The `vole serve` process (under a wrapper, the wrapper's child).
    pub fn vole_pid(&self) -> u32 {
        let pid = self.pid();
        if !self.wrapped {
            return pid;
        }
        descendants(pid)
            .into_iter()
            .find(|(_, cmd)| cmd.starts_with(vole_bin()) && cmd.contains(" serve "))
            .map(|(p, _)| p)
            .expect("vole serve runs under its wrapper")
    }

    /// Sends SIGTERM (to vole) and waits (bounded) for the exit.
    pub fn stop(mut self) -> ExitStatus {
        signal(self.vole_pid(), 15); // SIGTERM
        let mut child = self.child.take().expect("running");
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(status) = child.try_wait().expect("try_wait") {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "server did not exit within 30 s of SIGTERM; log:\n{}",
                self.log.all()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        if self.wrapped && self.child.is_some() {
            // Killing the wrapper (strace) would leave vole running.
            if let Some((pid, _)) = descendants(self.pid())
                .into_iter()
                .find(|(_, cmd)| cmd.starts_with(vole_bin()))
            {
                let _ = Command::new("kill").arg("-9").arg(pid.to_string()).status();
            }
        }
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl TestServerBuilder {
    /// Use this data dir instead of a fresh temporary one.
    pub fn data(mut self, data: &Path) -> Self {
        self.data = Some(data.to_path_buf());
        self
    }

    pub fn args<const N: usize>(mut self, args: [&str; N]) -> Self {
        for arg in args {
            self = self.arg(arg);
        }
        self
    }

    pub fn arg(mut self, arg: &str) -> Self {
        self.args.push(arg.to_string());
        self
    }

    pub fn env(mut self, key: &str, value: &str) -> Self {
        self.env.push((key.into(), value.into()));
        self
    }

    /// Listens on `addr` instead of 127.0.0.1:0. A wildcard address is
    /// reached at 127.0.0.1 (so on `[::]:0`, a dual-stack listener, the
    /// peer is `::ffff:127.0.0.1`).
    pub fn listen(mut self, addr: &str) -> Self {
        self.listen = addr.into();
        self
    }

    /// Runs `vole serve` as the last argument of `command` (e.g. strace
    /// with its options).
    pub fn wrapped_in(mut self, command: &[&str]) -> Self {
        self.wrapper = command.iter().map(|a| a.to_string()).collect();
        self
    }

    /// Starts the server with this soft open-file limit.
    pub fn soft_fd_limit(mut self, limit: u64) -> Self {
        self.soft_fd_limit = Some(limit);
        self
    }

    /// Starts the server (and so its git children) with this file-size
    /// limit (`ulimit -f`): a write past it fails as on a full disk.
    pub fn file_size_limit(mut self, bytes: u64) -> Self {
        self.file_size_limit = Some(bytes);
        self
    }

    /// Starts the server and waits (bounded) for its listening line.
    pub fn start(self) -> TestServer {
        let (tempdir, data) = match self.data {
            Some(data) => (None, data),
            None => {
                let dir = tempfile::tempdir().expect("tempdir");
                let data = dir.path().join("data");
                (Some(dir), data)
            }
        };
        let mut command = match self.wrapper.split_first() {
            None => vole(&data),
            Some((program, args)) => {
                let mut command = Command::new(program);
                command.env_clear();
                command.env("PATH", std::env::var_os("PATH").unwrap_or_default());
                command.env("VOLE_LOG", "info");
                command.args(args).arg(vole_bin()).arg("--data").arg(&data);
                command
            }
        };
        command
            .arg("serve")
            .arg("--listen")
            .arg(&self.listen)
            // Servers run side by side: none takes the default metrics
            // port unless a test asks (`--metrics-listen`).
            .env("VOLE_METRICS_LISTEN", "off")
            .args(&self.args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        for (key, value) in &self.env {
            command.env(key, value);
        }
        let limits: Vec<(rustix::process::Resource, u64)> = [
            self.soft_fd_limit
                .map(|limit| (rustix::process::Resource::Nofile, limit)),
            self.file_size_limit
                .map(|limit| (rustix::process::Resource::Fsize, limit)),
        ]
        .into_iter()
        .flatten()
        .collect();
        if !limits.is_empty() {
            use std::os::unix::process::CommandExt;
            // SAFETY: only setrlimit system calls between fork and exec.
            #[allow(unsafe_code)]
            unsafe {
                command.pre_exec(move || {
                    for (resource, limit) in &limits {
                        let old = rustix::process::getrlimit(*resource);
                        rustix::process::setrlimit(
                            *resource,
                            rustix::process::Rlimit {
                                current: Some(*limit),
                                maximum: old.maximum,
                            },
                        )
                        .map_err(std::io::Error::from)?;
                    }
                    Ok(())
                });
            }
        }
        let mut child = command.spawn().expect("spawn vole serve");
        let log = LogLines::default();
        log.clone().collect(child.stderr.take().expect("stderr"));
        let Some(line) = log.wait_for(&["vole listening on http://"], Duration::from_secs(30))
        else {
            let _ = child.kill();
            panic!("vole serve did not start; its log:\n{}", log.all());
        };
        // The address ends where an address's characters do (a text line
        // goes on with a space, a JSON one with a quote).
        let addr = line
            .split("http://")
            .nth(1)
            .and_then(|rest| {
                rest.split(|c: char| !(c.is_ascii_hexdigit() || ".:[]".contains(c)))
                    .next()
            })
            .and_then(|addr| addr.parse::<SocketAddr>().ok())
            .unwrap_or_else(|| panic!("no address in {line:?}"));
        let addr = if addr.ip().is_unspecified() {
            SocketAddr::from(([127, 0, 0, 1], addr.port()))
        } else {
            addr
        };
        TestServer {
            child: Some(child),
            wrapped: !self.wrapper.is_empty(),
            addr,
            data,
            log,
            _tempdir: tempdir,
        }
    }
}

/// Sends a signal with the `kill` command (keeps the tests free of unsafe).
pub fn signal(pid: u32, signal: i32) {
    let status = Command::new("kill")
        .arg(format!("-{signal}"))
        .arg(pid.to_string())
        .status()
        .expect("run kill");
    assert!(status.success(), "kill -{signal} {pid} failed");
}

/// Sends a signal to a whole process group.
pub fn signal_group(pgid: u32, signal: i32) {
    let status = Command::new("kill")
        .arg(format!("-{signal}"))
        .arg("--")
        .arg(format!("-{pgid}"))
        .status()
        .expect("run kill");
    assert!(status.success(), "kill -{signal} -- -{pgid} failed");
}

/// Bytes (git's stdout or stderr) as text.
pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A response read by [`http`].
#[derive(Debug)]
pub struct HttpResponse {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl HttpResponse {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// One HTTP/1.1 request over a fresh connection (`Connection: close`), read
/// to EOF. `head` is the request line and headers without the final blank
/// line, e.g. `"GET /healthz HTTP/1.1"`.
pub fn http(addr: SocketAddr, head: &str, body: &[u8]) -> HttpResponse {
    let mut stream = TcpStream::connect(addr).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let request = format!("{head}\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).unwrap();
    stream.write_all(body).unwrap();
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).expect("read response");
    parse_response(&raw)
}

/// [`http`] that does not panic when the server is gone (killed mid-run):
/// `None` if the request could not be sent or its answer read whole.
pub fn try_http(addr: SocketAddr, head: &str, body: &[u8]) -> Option<HttpResponse> {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(2)).ok()?;
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .ok()?;
    let request = format!("{head}\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).ok()?;
    stream.write_all(body).ok()?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).ok()?;
    raw.windows(4)
        .any(|w| w == b"\r\n\r\n")
        .then(|| parse_response(&raw))
}

/// Sends exactly `request` (head and body, as given) and reads to EOF.
pub fn http_raw(addr: SocketAddr, request: &[u8]) -> HttpResponse {
    let mut stream = TcpStream::connect(addr).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    stream.write_all(request).unwrap();
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).expect("read response");
    parse_response(&raw)
}

pub fn http_get(addr: SocketAddr, path: &str) -> HttpResponse {
    http(addr, &format!("GET {path} HTTP/1.1"), b"")
}

pub fn parse_response(raw: &[u8]) -> HttpResponse {
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or_else(|| panic!("no header end in {:?}", String::from_utf8_lossy(raw)));
    let head = String::from_utf8_lossy(&raw[..split]).into_owned();
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|s| s.parse().ok())
        .expect("status line");
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect();
    let mut body = raw[split + 4..].to_vec();
    let chunked = headers
        .iter()
        .any(|(k, v)| k.eq_ignore_ascii_case("transfer-encoding") && v.contains("chunked"));
    if chunked {
        body = dechunk(&body);
    }
    HttpResponse {
        status,
        headers,
        body,
    }
}

fn dechunk(mut raw: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let Some(eol) = raw.windows(2).position(|w| w == b"\r\n") else {
            return out;
        };
        let size_text = String::from_utf8_lossy(&raw[..eol]);
        let size = usize::from_str_radix(size_text.split(';').next().unwrap().trim(), 16)
            .expect("chunk size");
        if size == 0 {
            return out;
        }
        out.extend_from_slice(&raw[eol + 2..eol + 2 + size]);
        raw = &raw[eol + 2 + size + 2..];
    }
}

/// A git command with an isolated environment: no user or system config,
/// frozen author/committer dates, never prompting.
pub fn git_command(cwd: &Path) -> Command {
    let mut command = Command::new("git");
    command
        .current_dir(cwd)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", cwd)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_AUTHOR_NAME", "Test Author")
        .env("GIT_AUTHOR_EMAIL", "author@example.org")
        .env("GIT_AUTHOR_DATE", "2026-01-01T00:00:00Z")
        .env("GIT_COMMITTER_NAME", "Test Committer")
        .env("GIT_COMMITTER_EMAIL", "committer@example.org")
        .env("GIT_COMMITTER_DATE", "2026-01-01T00:00:00Z")
        .stdin(Stdio::null());
    command
}

/// Runs git (60 s bound) and returns its output, whatever the exit.
pub fn git(cwd: &Path, args: &[&str]) -> Output {
    git_env(cwd, args, &[])
}

pub fn git_env(cwd: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut command = git_command(cwd);
    command
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in env {
        command.env(k, v);
    }
    wait_output(command.spawn().expect("spawn git"), Duration::from_secs(60))
}

/// Runs git, panicking with its stderr unless it succeeds; returns stdout.
pub fn git_ok(cwd: &Path, args: &[&str]) -> String {
    let output = git(cwd, args);
    assert!(
        output.status.success(),
        "git {args:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// A fresh work tree with one commit on `main`.
pub fn worktree(parent: &Path, name: &str) -> PathBuf {
    let dir = parent.join(name);
    std::fs::create_dir_all(&dir).unwrap();
    git_ok(&dir, &["init", "-q", "-b", "main"]);
    std::fs::write(dir.join("README.md"), "# hello\n").unwrap();
    git_ok(&dir, &["add", "README.md"]);
    git_ok(&dir, &["commit", "-q", "-m", "first"]);
    dir
}

/// Adds a commit touching `file` and returns its id.
pub fn commit_file(dir: &Path, file: &str, content: &[u8]) -> String {
    let path = dir.join(file);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, content).unwrap();
    git_ok(dir, &["add", file]);
    git_ok(dir, &["commit", "-q", "-m", &format!("change {file}")]);
    git_ok(dir, &["rev-parse", "HEAD"]).trim().to_string()
}

/// `n` incompressible bytes (xorshift), the same for the same seed.
pub fn random_bytes(n: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

/// Value of a ref in a bare repo, or None.
pub fn ref_value(repo: &Path, name: &str) -> Option<String> {
    let output = git(repo, &["rev-parse", "--verify", "--quiet", name]);
    output
        .status
        .success()
        .then(|| String::from_utf8_lossy(&output.stdout).trim().to_string())
}

/// A `/proc/PID/status` field in KiB (`VmRSS:`, `VmHWM:`, ...).
pub fn status_kib(pid: u32, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap()
        .lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        .unwrap_or_else(|| panic!("no {field} in /proc/{pid}/status"))
}

/// Every live descendant process of `pid` (from /proc), with its command,
/// but a server's sentinel (`vole sentinel`, which lives as long as the
/// server and starts nothing): the tests that use this look for the git
/// processes a request left.
pub fn descendants(pid: u32) -> Vec<(u32, String)> {
    let mut parent_of = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(p) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{p}/stat")) else {
            continue;
        };
        // pid (comm) state ppid ...: comm may hold spaces, so split after ')'.
        let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) else {
            continue;
        };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        if fields.first() == Some(&"Z") {
            continue; // exited, awaiting reaping
        }
        if let Some(ppid) = fields.get(1).and_then(|f| f.parse::<u32>().ok()) {
            let cmd = std::fs::read_to_string(format!("/proc/{p}/cmdline"))
                .unwrap_or_default()
                .replace('\0', " ");
            parent_of.push((p, ppid, cmd));
        }
    }
    let mut found = Vec::new();
    let mut frontier = vec![pid];
    while let Some(parent) = frontier.pop() {
        for (p, ppid, cmd) in &parent_of {
            let sentinel = cmd.split(' ').nth(1) == Some("sentinel");
            if *ppid == parent && !sentinel {
                found.push((*p, cmd.clone()));
                frontier.push(*p);
            }
        }
    }
    found
}

/// Waits (bounded) until `check` holds; returns whether it did.
pub fn eventually(bound: Duration, mut check: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + bound;
    loop {
        if check() {
            return true;
        }
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Files in a directory (empty when it does not exist).
pub fn files_in(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .map(|entries| entries.flatten().map(|e| e.path()).collect())
        .unwrap_or_default()
}

/// A pre-receive hook that says something on stderr, records its pid, and
/// waits until `release` exists (at most 30 s).
/// Writes an executable script at `path` from a child shell, so this
/// process never holds a file open for writing that a concurrent test's
/// fork could inherit: exec'ing such a file fails with "Text file busy".
pub fn write_script(path: &Path, script: &str) {
    let mut child = Command::new("/bin/sh")
        .args(["-c", "cat > \"$1\" && chmod 755 \"$1\"", "sh"])
        .arg(path)
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(script.as_bytes())
        .unwrap();
    assert!(
        child.wait().unwrap().success(),
        "writing {}",
        path.display()
    );
}

pub fn install_blocking_hook(repo: &Path, state: &Path) {
    let hook = repo.join("hooks/pre-receive");
    std::fs::create_dir_all(hook.parent().unwrap()).unwrap();
    let script = format!(
        "#!/bin/sh\necho \"hook here: checking your push\" >&2\necho $$ > {state}/hook.pid\n\
         i=0\nwhile [ ! -e {state}/release ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); done\nexit 0\n",
        state = state.display()
    );
    write_script(&hook, &script);
}

/// Runs the browser journey `tests/clients/<script>` in headless Chromium
/// (node and playwright-core) with `args`, its screenshots going to
/// `shots` (emptied first); fails with what it printed unless it passed.
pub fn browser_journey(script: &str, base: &str, shots: &Path, args: &[&str]) -> String {
    let chromium = std::env::var("CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into());
    assert!(
        Path::new(&chromium).exists(),
        "{chromium} is missing: install Debian's chromium (scripts/test does) or set CHROMIUM"
    );
    let _ = std::fs::remove_dir_all(shots);
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/clients")
        .join(script);
    let child = Command::new("node")
        .arg(&script)
        .arg(base)
        .arg(shots)
        .args(args)
        .env("CHROMIUM", &chromium)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("node runs");
    let out = wait_output(child, Duration::from_secs(120));
    assert!(
        out.status.success(),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    text(&out.stdout)
}

/// A loopback port nothing listens on (it was free a moment ago).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}
