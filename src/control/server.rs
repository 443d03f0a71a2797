//! The server's side of the control socket: accepts connections on the Unix
//! socket and answers each request line through [`super::dispatch`].

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::Arc;

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};

use super::ControlState;
use super::protocol::{MAX_LINE, Reply};

/// Binds the socket with owner-only permissions.
pub fn bind(path: &Path) -> std::io::Result<UnixListener> {
    let listener = UnixListener::bind(path)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
    Ok(listener)
}

/// Serves connections until the task is dropped.
pub async fn serve(listener: UnixListener, app: Arc<ControlState>) {
    loop {
        match listener.accept().await {
            Ok((stream, _)) => {
                tokio::spawn(handle_connection(stream, app.clone()));
            }
            Err(e) => {
                tracing::warn!(error = %e, "control socket accept failed");
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            }
        }
    }
}

async fn handle_connection(stream: UnixStream, app: Arc<ControlState>) {
    let (read, mut write) = stream.into_split();
    let mut reader = BufReader::new(read);
    let mut line = String::new();
    loop {
        line.clear();
        let read = match (&mut reader)
            .take(MAX_LINE as u64)
            .read_line(&mut line)
            .await
        {
            Ok(0) => return,
            Ok(n) => n,
            Err(e) => {
                tracing::debug!(error = %e, "control connection read failed");
                return;
            }
        };
        let reply = if read == MAX_LINE && !line.ends_with('\n') {
            Reply::error(format!("request longer than {MAX_LINE} bytes"))
        } else {
            match Reply::parse_request(&line) {
                Err(reply) => reply,
                Ok(request) => {
                    let op = format!("{request:?}");
                    let app = app.clone();
                    tokio::task::spawn_blocking(move || super::dispatch(&app, request))
                        .await
                        .unwrap_or_else(|e| {
                            tracing::error!(error = %e, op, "control request panicked");
                            Reply::error("internal error; see the server log")
                        })
                }
            }
        };
        let mut out = serde_json::to_vec(&reply).unwrap_or_else(|_| b"{}".to_vec());
        out.push(b'\n');
        if write.write_all(&out).await.is_err() {
            return;
        }
        if read == MAX_LINE && !line.ends_with('\n') {
            return; // the rest of the oversized line would be misread as requests
        }
    }
}
