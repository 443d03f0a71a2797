//! Running `git http-backend` as a CGI child for one request.
//!
//! The child gets a cleared environment plus an allowlist (CGI variables,
//! git config as `GIT_CONFIG_COUNT`/`KEY_n`/`VALUE_n`), runs in its own
//! process group, and dies with the server (parent-death signal). Its stdin
//! is fed from the spooled body while stdout is read (feeding first could
//! deadlock on full pipes); stderr is logged. The CGI headers are parsed and
//! the rest of stdout is streamed to the client. If the client goes away or
//! stops reading, the whole group (http-backend, upload-pack/receive-pack,
//! their hooks) is killed.

#![allow(unsafe_code)] // see the module doc and each `// SAFETY:` line

use std::convert::Infallible;
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{HeaderName, HeaderValue, StatusCode};
use axum::response::Response;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdout};
use tokio::sync::{OwnedSemaphorePermit, mpsc};
use tokio_stream::StreamExt;
use tracing::Instrument;

use super::spool::{Spooled, SpooledContent};
use vole_http::AppError;
use vole_http::stream::RateFloor;

/// Lines of git's stderr kept to explain a refused request.
const MAX_STDERR_LINES_KEPT: usize = 8;

/// Largest CGI header block accepted from http-backend.
const MAX_CGI_HEADERS: usize = 64 << 10;

/// The room of the pipe git's output comes through when `children` git
/// requests may run at once: up to 1 MiB (the kernel's default is 64 KiB),
/// so git writes ahead and the pump reads more at a time, but all of them
/// together within half the user's default pipe budget (64 MiB; past it,
/// every new pipe of the user gets one page).
pub fn pipe_size(children: usize) -> usize {
    ((32 << 20) / children.max(1)).clamp(64 << 10, 1 << 20)
}

/// The most the pump reads (and sends as one chunk) at a time.
const READ_CHUNK: usize = 256 << 10;

/// The least room a read is given before the pump takes a new chunk.
const READ_MIN: usize = 64 << 10;

/// Everything one http-backend run needs.
pub struct CgiRequest {
    /// `git http-backend`: its program and arguments ([`vole_git::Git::http_backend`]).
    pub backend: (std::path::PathBuf, &'static [&'static str]),
    /// The allowlisted base environment (PATH, config isolation, locale).
    pub base_env: Vec<(&'static str, std::ffi::OsString)>,
    pub project_root: std::path::PathBuf,
    pub path_info: String,
    pub query: String,
    pub method: &'static str,
    pub content_type: Option<String>,
    pub git_protocol: Option<String>,
    pub remote_addr: String,
    pub remote_user: Option<String>,
    pub config: Vec<(String, String)>,
    /// The client reads side-band channels: a refusal with no git output is
    /// sent as a channel-3 (fatal error) message it prints, not a bare 400.
    pub error_sideband: bool,
    /// Passed through git to the hooks (push identity, socket).
    pub hook_env: Vec<(&'static str, String)>,
    /// The push's registration, held (like the slot) until the child has
    /// exited: the hooks' reports are taken only while it is held.
    pub push: Option<vole_access::pushes::PushTicket>,
    pub max_request_buffer: u64,
    pub body: Option<Spooled>,
    /// For log lines: `owner/name`.
    pub repo: String,
    pub idle_timeout: Duration,
    /// The slowest a client may take the response (see `RateFloor`).
    pub min_rate: u64,
    pub rate_window: Duration,
    /// The room of the pipe git's output comes through ([`pipe_size`]).
    pub pipe_size: usize,
    /// The client's socket, corked while git's output streams ([`Cork`]).
    pub connection: Option<vole_http::ConnectionFd>,
}

/// The client's socket with `TCP_CORK` set while git's output streams:
/// git writes its pack 16 KiB at a time, and each piece sent on its own
/// wakes the client once; corked, the kernel sends full segments (64 KiB
/// on loopback). Dropping it uncorks, which sends what is held at once;
/// it is dropped as soon as git's output ends, and the kernel itself sends
/// a partial segment held longer than 200 ms (git's progress messages
/// while it counts objects wait at most that). The socket is a duplicate,
/// so a connection gone meanwhile is never confused with a new one.
struct Cork(std::os::fd::OwnedFd);

impl Cork {
    fn new(connection: vole_http::ConnectionFd) -> Option<Cork> {
        // SAFETY: the descriptor is the socket of the request being
        // handled, open while its handler runs (`ConnectionFd`); it is only
        // borrowed here to duplicate it.
        let socket = unsafe { std::os::fd::BorrowedFd::borrow_raw(connection.0) };
        let socket = socket.try_clone_to_owned().ok()?;
        rustix::net::sockopt::set_tcp_cork(&socket, true).ok()?;
        Some(Cork(socket))
    }
}

impl Drop for Cork {
    fn drop(&mut self) {
        let _ = rustix::net::sockopt::set_tcp_cork(&self.0, false);
    }
}

/// The child and its process group: the group is killed when this is
/// dropped before the child was reaped (client gone, request cancelled).
struct ChildGroup {
    child: Child,
    pgid: Option<i32>,
}

impl ChildGroup {
    fn kill(&mut self) {
        if let Some(pgid) = self.pgid.take() {
            // SAFETY: kill(2) has no memory-safety preconditions. The group
            // id is the unreaped child's pid, so it cannot have been reused.
            unsafe {
                libc::kill(-pgid, libc::SIGKILL);
            }
        }
    }

    async fn wait(&mut self) -> std::io::Result<ExitStatus> {
        let status = self.child.wait().await;
        // Reaped: its pid (our group id) may now be reused; never signal it.
        self.pgid = None;
        status
    }
}

impl Drop for ChildGroup {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Runs http-backend and returns the response whose body streams its
/// output. `permit` is held until the child has exited.
pub async fn run(request: CgiRequest, permit: OwnedSemaphorePermit) -> Result<Response, AppError> {
    let mut command = vole_git::grouped(&request.backend.0);
    command
        .args(request.backend.1)
        .env_clear()
        .envs(request.base_env.iter().map(|(k, v)| (*k, v)))
        .env("GIT_PROJECT_ROOT", &request.project_root)
        .env("GIT_HTTP_EXPORT_ALL", "1")
        .env(
            "GIT_HTTP_MAX_REQUEST_BUFFER",
            request.max_request_buffer.to_string(),
        )
        .env("PATH_INFO", &request.path_info)
        .env("QUERY_STRING", &request.query)
        .env("REQUEST_METHOD", request.method)
        .env("REMOTE_ADDR", &request.remote_addr)
        .env("GIT_CONFIG_COUNT", request.config.len().to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    for (i, (key, value)) in request.config.iter().enumerate() {
        command.env(format!("GIT_CONFIG_KEY_{i}"), key);
        command.env(format!("GIT_CONFIG_VALUE_{i}"), value);
    }
    for (key, value) in &request.hook_env {
        command.env(key, value);
    }
    if let Some(content_type) = &request.content_type {
        command.env("CONTENT_TYPE", content_type);
    }
    if let Some(protocol) = &request.git_protocol {
        command.env("GIT_PROTOCOL", protocol);
    }
    if let Some(user) = &request.remote_user {
        command.env("REMOTE_USER", user);
    }
    if let Some(body) = &request.body {
        command.env("CONTENT_LENGTH", body.len.to_string());
    }
    let mut child = command
        .spawn()
        .map_err(|e| AppError::internal("cannot start git http-backend", e))?;
    let pgid = child.id().map(|pid| pid as i32);
    let stdin = child.stdin.take();
    let stdout = child.stdout.take().expect("stdout is piped");
    // A clone's pack comes through this pipe: more room than the default
    // 64 KiB lets git write ahead and the pump read more at a time (fewer
    // wake-ups for both). Best effort: the kernel may refuse it.
    let _ = rustix::pipe::fcntl_setpipe_size(&stdout, request.pipe_size);
    let stderr = child.stderr.take().expect("stderr is piped");
    let mut group = ChildGroup { child, pgid };

    let push = request.push;
    // Feed stdin concurrently with reading stdout.
    let body = request.body;
    tokio::spawn(
        async move {
            let Some(mut stdin) = stdin else { return };
            let fed = match body.map(|b| b.content) {
                None => Ok(()),
                Some(SpooledContent::Memory(bytes)) => stdin.write_all(&bytes).await,
                // A spooled file is copied by a blocking thread with std's copy
                // (which splices file to pipe in the kernel): tokio's file reads
                // go through the blocking pool in small chunks and cost ~0.1 s
                // on a 16 MiB push.
                Some(SpooledContent::File(file)) => match stdin.into_owned_fd() {
                    Ok(fd) => vole_http::spawn_blocking(move || copy_to_pipe(file.path(), fd))
                        .await
                        .unwrap_or_else(|e| Err(std::io::Error::other(e))),
                    Err(e) => Err(e),
                },
            };
            if let Err(e) = fed {
                tracing::debug!(error = %e, "feeding http-backend stopped");
            }
            // Dropping stdin closes it: http-backend sees the end of the body.
        }
        .in_current_span(),
    );
    let repo = request.repo.clone();
    let stderr_task = tokio::spawn(
        async move {
            let mut kept = Vec::new();
            let mut lines = BufReader::new(stderr).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                tracing::warn!(repo, "git http-backend: {line}");
                if kept.len() < MAX_STDERR_LINES_KEPT {
                    kept.push(line);
                }
            }
            kept
        }
        .in_current_span(),
    );

    let mut stdout = stdout;
    let (head, rest) =
        match tokio::time::timeout(request.idle_timeout, read_cgi_headers(&mut stdout)).await {
            Ok(Ok(parsed)) => parsed,
            Ok(Err(e)) => {
                let status = group.wait().await;
                return Err(AppError::internal(
                    "git http-backend gave no usable response",
                    format!("{e}; exit {status:?}"),
                ));
            }
            Err(_) => {
                group.kill();
                return Err(AppError::internal(
                    "git http-backend sent no headers in time",
                    request.repo,
                ));
            }
        };
    let mut response = Response::builder().status(head.status);
    for (name, value) in head.headers {
        response = response.header(name, value);
    }

    // Hold the success status back until git has said something: a request
    // git refuses outright (a malformed body) ends with no output and a
    // failed exit, and must become a 400 with git's reason, never an empty
    // 200.
    let mut rest = rest;
    if rest.is_empty() && head.status.is_success() {
        let mut buf = vec![0u8; 64 << 10];
        match tokio::time::timeout(request.idle_timeout, stdout.read(&mut buf)).await {
            Ok(Ok(0)) => {
                let status = group.wait().await;
                let said = tokio::time::timeout(Duration::from_secs(5), stderr_task)
                    .await
                    .ok()
                    .and_then(Result::ok)
                    .unwrap_or_default();
                drop(permit);
                drop(push);
                return match status {
                    Ok(status) if status.success() => response
                        .body(Body::empty())
                        .map_err(|e| AppError::internal("bad CGI response header", e)),
                    _ => {
                        // git's words reach the client (they say what was
                        // wrong with the request), without the server's
                        // paths; the log keeps them whole.
                        tracing::info!(repo = request.repo, stderr = %said.join("; "), "git refused a request");
                        let root = request.project_root.display().to_string();
                        let said: Vec<String> =
                            said.iter().map(|line| line.replace(&root, "")).collect();
                        let message = if said.is_empty() {
                            "git could not process this request".to_string()
                        } else {
                            format!("git could not process this request: {}", said.join("; "))
                        };
                        if request.error_sideband {
                            sideband_error(response, &message)
                        } else {
                            Err(AppError::bad_request(message))
                        }
                    }
                };
            }
            Ok(Ok(n)) => rest = buf[..n].to_vec(),
            Ok(Err(e)) => {
                return Err(AppError::internal(
                    "reading git http-backend output failed",
                    e,
                ));
            }
            Err(_) => {
                group.kill();
                return Err(AppError::new(
                    StatusCode::GATEWAY_TIMEOUT,
                    format!(
                        "git produced no output for {}s; try again",
                        request.idle_timeout.as_secs()
                    ),
                ));
            }
        }
    }

    let (tx, rx) = mpsc::channel::<Bytes>(8);
    let idle = request.idle_timeout;
    let floor = RateFloor::new(request.min_rate, request.rate_window);
    let repo = request.repo;
    let cork = request.connection.and_then(Cork::new);
    tokio::spawn(
        async move {
            // The slot and the push's registration are held until the child
            // has exited.
            let _held = (permit, push);
            pump(&mut group, stdout, rest, tx, idle, floor, &repo).await;
            drop(cork);
            match tokio::time::timeout(Duration::from_secs(30), group.wait()).await {
                Ok(Ok(status)) if status.success() => {}
                Ok(Ok(status)) => tracing::warn!(repo, %status, "git http-backend failed"),
                Ok(Err(e)) => {
                    tracing::warn!(repo, error = %e, "waiting for git http-backend failed")
                }
                Err(_) => {
                    group.kill();
                    tracing::warn!(
                        repo,
                        "git http-backend did not exit; killed its process group"
                    );
                }
            }
        }
        .in_current_span(),
    );
    response
        .body(Body::from_stream(
            tokio_stream::wrappers::ReceiverStream::new(rx).map(Ok::<_, Infallible>),
        ))
        .map_err(|e| AppError::internal("bad CGI response header", e))
}

/// Copies a file into a pipe, blocking (the pipe is switched back to
/// blocking mode: tokio created it non-blocking). Closes the pipe at the end.
fn copy_to_pipe(source: &std::path::Path, pipe: std::os::fd::OwnedFd) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    // SAFETY: fcntl on a descriptor we own; no memory is shared.
    unsafe {
        let fd = pipe.as_raw_fd();
        let flags = libc::fcntl(fd, libc::F_GETFL);
        if flags < 0 || libc::fcntl(fd, libc::F_SETFL, flags & !libc::O_NONBLOCK) < 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    let mut source = std::fs::File::open(source)?;
    let mut sink = std::fs::File::from(pipe);
    std::io::copy(&mut source, &mut sink).map(drop)
}

/// Streams stdout to the client; kills the group if the client goes away,
/// stops reading for `idle`, or takes it slower than `floor` allows (a
/// slow reader cannot hold an upload-pack slot for long).
async fn pump(
    group: &mut ChildGroup,
    mut stdout: ChildStdout,
    first: Vec<u8>,
    tx: mpsc::Sender<Bytes>,
    idle: Duration,
    mut floor: RateFloor,
    repo: &str,
) {
    use vole_http::stream::Sent;
    // `idle` bounds each send; the floor bounds the pace over a window.
    let mut send = async |bytes: Bytes| {
        let end = tokio::time::Instant::now() + idle;
        match floor.send(&tx, bytes, end).await {
            Sent::Taken => true,
            Sent::Gone => false,
            Sent::Cut(cut) => {
                tracing::info!(repo, ?cut, "client reads too slowly");
                false
            }
        }
    };
    if !first.is_empty() && !send(Bytes::from(first)).await {
        tracing::info!(repo, "client went away; killing the git process group");
        group.kill();
        return;
    }
    // Read straight into the chunk that is sent (no copy), at most
    // READ_CHUNK at a time. Small reads (git writes 8 KiB at a time) share
    // one READ_CHUNK allocation until less than READ_MIN of it is left,
    // rather than taking a fresh one each: an allocation lives until every
    // chunk cut from it is sent, so a request holds at most the channel's
    // 8 of them, plus what hyper is writing, plus the one being filled.
    let mut buf = bytes::BytesMut::new();
    loop {
        if buf.capacity() - buf.len() < READ_MIN {
            buf = bytes::BytesMut::with_capacity(READ_CHUNK);
        }
        let room = (buf.capacity() - buf.len()) as u64;
        let mut limited = (&mut stdout).take(room);
        tokio::select! {
            _ = tx.closed() => {
                tracing::info!(repo, "client went away; killing the git process group");
                group.kill();
                return;
            }
            read = limited.read_buf(&mut buf) => match read {
                Ok(0) => return,
                Ok(_) => {
                    if !send(buf.split().freeze()).await {
                        tracing::info!(repo, "client stopped reading; killing the git process group");
                        group.kill();
                        return;
                    }
                }
                Err(e) => {
                    tracing::warn!(repo, error = %e, "reading git http-backend output failed");
                    group.kill();
                    return;
                }
            }
        }
    }
}

/// A protocol response carrying `message` on side-band channel 3, which git
/// prints as `remote error: ...` and fails the push with.
fn sideband_error(
    response: axum::http::response::Builder,
    message: &str,
) -> Result<Response, AppError> {
    let mut payload = vec![3u8];
    payload.extend_from_slice(message.as_bytes());
    payload.push(b'\n');
    payload.truncate(65515);
    let mut body = format!("{:04x}", payload.len() + 4).into_bytes();
    body.extend_from_slice(&payload);
    body.extend_from_slice(b"0000");
    response
        .body(Body::from(body))
        .map_err(|e| AppError::internal("bad CGI response header", e))
}

/// Parsed CGI header block.
#[derive(Debug)]
pub struct CgiHead {
    pub status: StatusCode,
    pub headers: Vec<(HeaderName, HeaderValue)>,
}

/// Reads up to the blank line ending the CGI headers; returns them and the
/// body bytes read past it.
async fn read_cgi_headers(stdout: &mut ChildStdout) -> std::io::Result<(CgiHead, Vec<u8>)> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 4096];
    loop {
        if let Some((end, sep)) = find_header_end(&buf) {
            let head = parse_cgi_headers(&buf[..end])?;
            return Ok((head, buf[end + sep..].to_vec()));
        }
        if buf.len() > MAX_CGI_HEADERS {
            return Err(std::io::Error::other("CGI headers too long"));
        }
        let n = stdout.read(&mut chunk).await?;
        if n == 0 {
            return Err(std::io::Error::other(format!(
                "output ended before the CGI headers did ({} bytes)",
                buf.len()
            )));
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

pub fn find_header_end(buf: &[u8]) -> Option<(usize, usize)> {
    let crlf = buf
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|i| (i, 4));
    let lf = buf.windows(2).position(|w| w == b"\n\n").map(|i| (i, 2));
    match (crlf, lf) {
        (Some(a), Some(b)) => Some(if a.0 <= b.0 { a } else { b }),
        (a, b) => a.or(b),
    }
}

pub fn parse_cgi_headers(block: &[u8]) -> std::io::Result<CgiHead> {
    let text = std::str::from_utf8(block).map_err(std::io::Error::other)?;
    let mut head = CgiHead {
        status: StatusCode::OK,
        headers: Vec::new(),
    };
    for line in text.lines().map(str::trim_end).filter(|l| !l.is_empty()) {
        let (name, value) = line
            .split_once(':')
            .ok_or_else(|| std::io::Error::other(format!("bad CGI header line {line:?}")))?;
        let value = value.trim();
        if name.eq_ignore_ascii_case("status") {
            let code = value.split_whitespace().next().unwrap_or_default();
            head.status = code
                .parse::<u16>()
                .ok()
                .and_then(|c| StatusCode::from_u16(c).ok())
                .ok_or_else(|| std::io::Error::other(format!("bad CGI status {value:?}")))?;
        } else {
            let name = HeaderName::from_bytes(name.as_bytes()).map_err(std::io::Error::other)?;
            let value = HeaderValue::from_str(value).map_err(std::io::Error::other)?;
            head.headers.push((name, value));
        }
    }
    Ok(head)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn git_pipes_together_stay_within_half_the_users_pipe_budget() {
        assert_eq!(pipe_size(6), 1 << 20, "a small machine gets 1 MiB");
        assert_eq!(pipe_size(0), 1 << 20);
        for children in [6, 48, 96, 400, 10_000] {
            let size = pipe_size(children);
            assert!(size >= 64 << 10, "never below the kernel's default");
            assert!(
                size * children <= (32 << 20) || size == 64 << 10,
                "{children} children x {size} bytes"
            );
        }
    }

    #[test]
    fn cgi_headers_with_status_and_either_line_ending() {
        let head = parse_cgi_headers(b"Status: 404 Not Found\r\nContent-Type: text/plain").unwrap();
        assert_eq!(head.status, StatusCode::NOT_FOUND);
        assert_eq!(head.headers.len(), 1);
        assert_eq!(find_header_end(b"A: b\n\nbody"), Some((4, 2)));
        assert_eq!(find_header_end(b"A: b\r\n\r\nbody"), Some((4, 4)));
        assert!(parse_cgi_headers(b"garbage").is_err());
    }
}
