//! [`BlobStream`]: a blob too large to cache, streamed from a `git
//! cat-file` child holding one buffer.

use super::*;

/// A large blob read from `git cat-file` as the client takes it.
pub(super) struct BlobStream {
    _child: tokio::process::Child,
    stdout: tokio::process::ChildStdout,
    skip: u64,
    remaining: u64,
    buf: bytes::BytesMut,
}

impl BlobStream {
    pub(super) fn spawn(
        app: &SitesState,
        repo: &std::path::Path,
        id: ObjectId,
        skip: u64,
        len: u64,
    ) -> Result<BlobStream, AppError> {
        let (child, stdout) = app
            .git
            .spawn_reader(repo, &["cat-file", "blob", &id.to_string()])
            .map_err(|e| AppError::internal("cannot start git cat-file", e))?;
        Ok(BlobStream {
            _child: child,
            stdout,
            skip,
            remaining: len,
            buf: bytes::BytesMut::with_capacity(64 << 10),
        })
    }
}

impl http_body::Body for BlobStream {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, std::io::Error>>> {
        loop {
            if self.remaining == 0 {
                return Poll::Ready(None);
            }
            let this = &mut *self;
            this.buf.clear();
            this.buf.reserve(64 << 10);
            match tokio_util::io::poll_read_buf(Pin::new(&mut this.stdout), cx, &mut this.buf) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Err(e)) => return Poll::Ready(Some(Err(e))),
                Poll::Ready(Ok(0)) => {
                    return Poll::Ready(Some(Err(std::io::Error::other("blob ended early"))));
                }
                Poll::Ready(Ok(_)) => {
                    let mut chunk = this.buf.split().freeze();
                    if this.skip > 0 {
                        let dropped = this.skip.min(chunk.len() as u64);
                        this.skip -= dropped;
                        chunk = chunk.slice(dropped as usize..);
                        if chunk.is_empty() {
                            continue;
                        }
                    }
                    let take = this.remaining.min(chunk.len() as u64);
                    this.remaining -= take;
                    return Poll::Ready(Some(Ok(http_body::Frame::data(
                        chunk.slice(..take as usize),
                    ))));
                }
            }
        }
    }
}
