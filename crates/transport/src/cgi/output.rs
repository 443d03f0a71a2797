//! http-backend's output after its headers: the first bytes awaited (a
//! request git refuses ends with none), then the rest streamed to the
//! client through a corked socket, the group killed if the client goes
//! away or reads too slowly.

#![allow(unsafe_code)] // `Cork::new`: see its `// SAFETY:` line

use std::convert::Infallible;
use std::io;
use std::process::ExitStatus;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::StatusCode;
use axum::http::response::Builder;
use axum::response::Response;
use tokio::io::AsyncReadExt;
use tokio::process::ChildStdout;
use tokio::sync::{OwnedSemaphorePermit, mpsc};
use tokio_stream::StreamExt;
use tracing::Instrument;

use super::child::ChildGroup;
use vole_http::AppError;
use vole_http::acked::AckedBytes;
use vole_http::stream::RateFloor;

/// The most the pump reads (and sends as one chunk) at a time.
const READ_CHUNK: usize = 256 << 10;

/// The least room a read is given before the pump takes a new chunk.
const READ_MIN: usize = 64 << 10;

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

/// Waits up to `idle` for git's first output after headers of success:
/// `None` if it ended with none (a request git refuses outright, whose
/// status must not be an empty 200). Past `idle` the group is killed and
/// the client told to try again.
pub(super) async fn first_output(
    stdout: &mut ChildStdout,
    group: &mut ChildGroup,
    idle: Duration,
) -> Result<Option<Vec<u8>>, AppError> {
    let mut buf = vec![0u8; 64 << 10];
    match tokio::time::timeout(idle, stdout.read(&mut buf)).await {
        Ok(Ok(0)) => Ok(None),
        Ok(Ok(n)) => Ok(Some(buf[..n].to_vec())),
        Ok(Err(e)) => Err(AppError::internal(
            "reading git http-backend output failed",
            e,
        )),
        Err(_) => {
            group.kill();
            Err(AppError::new(
                StatusCode::GATEWAY_TIMEOUT,
                format!("git produced no output for {}s; try again", idle.as_secs()),
            ))
        }
    }
}

/// The response to a request whose output ended with none: empty if git
/// succeeded, else git's reason as a 400 (or, for a client reading
/// side-band channels, a channel-3 message).
pub(super) fn ended_without_output(
    response: Builder,
    status: io::Result<ExitStatus>,
    said: &[String],
    request: &super::CgiRequest,
) -> Result<Response, AppError> {
    match status {
        Ok(status) if status.success() => response
            .body(Body::empty())
            .map_err(|e| AppError::internal("bad CGI response header", e)),
        _ => {
            // git's words reach the client (they say what was wrong with
            // the request), without the server's paths; the log keeps them
            // whole.
            tracing::info!(repo = request.repo, stderr = %said.join("; "), "git refused a request");
            let root = request.project_root.display().to_string();
            let said: Vec<String> = said.iter().map(|line| line.replace(&root, "")).collect();
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
    }
}

/// A protocol response carrying `message` on side-band channel 3, which git
/// prints as `remote error: ...` and fails the push with.
fn sideband_error(response: Builder, message: &str) -> Result<Response, AppError> {
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

/// The response whose body streams git's output (`first`, then the rest of
/// stdout) through a corked socket. `held` (the slot and the push's
/// registration) is kept until the child has exited, which is waited for
/// at most 30 s after the output ends before the group is killed.
pub(super) fn stream(
    response: Builder,
    mut group: ChildGroup,
    stdout: ChildStdout,
    first: Vec<u8>,
    held: (
        OwnedSemaphorePermit,
        Option<vole_access::pushes::PushTicket>,
    ),
    request: super::CgiRequest,
) -> Result<Response, AppError> {
    let (tx, rx) = mpsc::channel::<Bytes>(8);
    let idle = request.idle_timeout;
    let peer = request.connection.and_then(AckedBytes::of);
    let floor = RateFloor::new(request.min_rate, request.rate_window, peer);
    let repo = request.repo;
    let cork = request.connection.and_then(Cork::new);
    tokio::spawn(
        async move {
            let _held = held;
            pump(&mut group, stdout, first, tx, idle, floor, &repo).await;
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
                let (waited_s, handed, taken) = floor.account();
                tracing::info!(
                    repo,
                    ?cut,
                    waited_s,
                    handed,
                    taken,
                    "client reads too slowly"
                );
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
