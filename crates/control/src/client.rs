//! The CLI's side of the control socket: a small blocking client.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;

use super::protocol::{MAX_LINE, PROTOCOL_VERSION, Reply, Request, RequestFrame};

/// Why a call over the socket failed (as opposed to the server refusing it,
/// which is an error [`Reply`]).
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("control socket I/O failed: {0}")]
    Io(#[from] std::io::Error),
    #[error("the server closed the control connection without replying")]
    Closed,
    #[error("the server's reply could not be read: {0}")]
    BadReply(String),
}

/// A connection to a running server.
pub struct Client {
    reader: BufReader<UnixStream>,
    writer: UnixStream,
}

impl Client {
    /// Connects, or `Ok(None)` when no server is listening there (no socket,
    /// or a stale one nobody accepts on).
    pub fn connect(socket: &Path) -> Result<Option<Client>, ClientError> {
        match UnixStream::connect(socket) {
            Ok(stream) => Ok(Some(Client {
                reader: BufReader::new(stream.try_clone()?),
                writer: stream,
            })),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::NotFound | std::io::ErrorKind::ConnectionRefused
                ) =>
            {
                Ok(None)
            }
            Err(e) => Err(e.into()),
        }
    }

    /// [`Client::connect`] with read and write timeouts.
    pub fn connect_with_timeout(
        socket: &Path,
        timeout: std::time::Duration,
    ) -> Result<Option<Client>, ClientError> {
        let client = Client::connect(socket)?;
        if let Some(client) = &client {
            client.writer.set_read_timeout(Some(timeout))?;
            client.writer.set_write_timeout(Some(timeout))?;
        }
        Ok(client)
    }

    /// A further reply line the server sends on its own (a `pack_objects`
    /// request's completion), waiting at most `wait`; `Ok(None)` when none
    /// came in that time. A line cut by the timeout is kept for the next
    /// call.
    pub fn next_reply(
        &mut self,
        pending: &mut String,
        wait: std::time::Duration,
    ) -> Result<Option<Reply>, ClientError> {
        self.writer.set_read_timeout(Some(wait))?;
        let read = (&mut self.reader).take(MAX_LINE as u64).read_line(pending);
        match read {
            Ok(0) => Err(ClientError::Closed),
            Ok(_) if pending.ends_with('\n') => {
                let reply =
                    serde_json::from_str(pending).map_err(|e| ClientError::BadReply(e.to_string()));
                pending.clear();
                reply.map(Some)
            }
            Ok(_) => Ok(None),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                Ok(None)
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Sends one request and waits for its reply.
    pub fn call(&mut self, request: Request) -> Result<Reply, ClientError> {
        let mut line = serde_json::to_string(&RequestFrame {
            v: PROTOCOL_VERSION,
            request,
        })
        .map_err(|e| ClientError::BadReply(e.to_string()))?;
        line.push('\n');
        self.writer.write_all(line.as_bytes())?;
        let mut reply = String::new();
        let read = (&mut self.reader)
            .take(MAX_LINE as u64)
            .read_line(&mut reply)?;
        if read == 0 {
            return Err(ClientError::Closed);
        }
        serde_json::from_str(&reply).map_err(|e| ClientError::BadReply(e.to_string()))
    }
}
