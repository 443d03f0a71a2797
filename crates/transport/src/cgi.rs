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

mod child;
mod headers;
mod output;

use std::time::Duration;

use axum::response::Response;
use tokio::sync::OwnedSemaphorePermit;

use super::spool::Spooled;
use vole_http::AppError;

pub use headers::{CgiHead, find_header_end, parse_cgi_headers};

/// The room of the pipe git's output comes through when `children` git
/// requests may run at once: up to 1 MiB (the kernel's default is 64 KiB),
/// so git writes ahead and the pump reads more at a time, but all of them
/// together within half the user's default pipe budget (64 MiB; past it,
/// every new pipe of the user gets one page).
pub fn pipe_size(children: usize) -> usize {
    ((32 << 20) / children.max(1)).clamp(64 << 10, 1 << 20)
}

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
    /// The client's socket, corked while git's output streams (`output::Cork`).
    pub connection: Option<vole_http::ConnectionFd>,
}

/// Runs http-backend and returns the response whose body streams its
/// output. `permit` is held until the child has exited.
pub async fn run(
    mut request: CgiRequest,
    permit: OwnedSemaphorePermit,
) -> Result<Response, AppError> {
    let child::Spawned {
        mut group,
        stdin,
        mut stdout,
        stderr,
    } = child::spawn(&request)?;
    let push = request.push.take();
    child::feed_stdin(stdin, request.body.take());
    let stderr_task = child::log_stderr(stderr, request.repo.clone());

    let (head, mut first) =
        headers::read_in_time(&mut stdout, &mut group, request.idle_timeout, &request.repo).await?;
    let mut response = Response::builder().status(head.status);
    for (name, value) in head.headers {
        response = response.header(name, value);
    }

    // Hold the success status back until git has said something: a request
    // git refuses outright (a malformed body) ends with no output and a
    // failed exit, and must become a 400 with git's reason, never an empty
    // 200.
    if first.is_empty() && head.status.is_success() {
        match output::first_output(&mut stdout, &mut group, request.idle_timeout).await? {
            Some(bytes) => first = bytes,
            None => {
                let status = group.wait().await;
                let said = child::stderr_said(stderr_task).await;
                drop(permit);
                drop(push);
                return output::ended_without_output(response, status, &said, &request);
            }
        }
    }
    // The slot and the push's registration are held until the child has
    // exited.
    output::stream(response, group, stdout, first, (permit, push), request)
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::StatusCode;

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
