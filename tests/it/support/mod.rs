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

/// Waits for a child with a bound; kills it if the bound passes.
pub fn wait_output(mut child: Child, bound: Duration) -> Output {
    let deadline = Instant::now() + bound;
    loop {
        if child.try_wait().expect("try_wait").is_some() {
            return child.wait_with_output().expect("collect output");
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let output = child.wait_with_output().expect("collect output");
            panic!(
                "command did not finish within {bound:?}; stderr:\n{}",
                String::from_utf8_lossy(&output.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(10));
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
}

/// A running `vole serve`, killed when dropped.
pub struct TestServer {
    child: Option<Child>,
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

    /// Sends SIGTERM and waits (bounded) for the exit.
    pub fn stop(mut self) -> ExitStatus {
        let mut child = self.child.take().expect("running");
        signal(child.id(), libc_sigterm());
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

    pub fn arg(mut self, arg: &str) -> Self {
        self.args.push(arg.to_string());
        self
    }

    pub fn env(mut self, key: &str, value: &str) -> Self {
        self.env.push((key.into(), value.into()));
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
        let mut command = vole(&data);
        command
            .arg("serve")
            .arg("--listen")
            .arg("127.0.0.1:0")
            .args(&self.args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        for (key, value) in &self.env {
            command.env(key, value);
        }
        let mut child = command.spawn().expect("spawn vole serve");
        let log = LogLines::default();
        log.clone().collect(child.stderr.take().expect("stderr"));
        let Some(line) = log.wait_for(&["vole listening on http://"], Duration::from_secs(30))
        else {
            let _ = child.kill();
            panic!("vole serve did not start; its log:\n{}", log.all());
        };
        let addr = line
            .split("http://")
            .nth(1)
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|addr| addr.parse().ok())
            .unwrap_or_else(|| panic!("no address in {line:?}"));
        TestServer {
            child: Some(child),
            addr,
            data,
            log,
            _tempdir: tempdir,
        }
    }
}

pub fn libc_sigterm() -> i32 {
    15
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

pub fn http_get(addr: SocketAddr, path: &str) -> HttpResponse {
    http(addr, &format!("GET {path} HTTP/1.1"), b"")
}

fn parse_response(raw: &[u8]) -> HttpResponse {
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
