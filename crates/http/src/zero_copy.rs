//! Zero-copy sends of cached bytes: immutable buffers kept in sealed
//! memfds ([`sealed`]) and the connection wrapper ([`Connection`]) that
//! sends any part of one with `sendfile(2)` instead of copying it into the
//! socket.
//!
//! Why not a crate: hyper writes a response as `writev` of its head and the
//! body's bytes, and no HTTP crate sends from a page cache. nginx serves a
//! static file with `sendfile`, which hands the file's pages to the socket;
//! a server writing from its own memory copies every byte once more. Here
//! the site cache keeps large blobs in memfds mapped read-only, and the
//! wrapper, handed a slice that lies in one of those mappings, sends it from
//! the memfd at the matching offset.
//!
//! Safety of the pages: a memfd is sealed against writes, shrinking and
//! growing before it is mapped, so its pages never change. The socket holds
//! its own references to the pages it was given, so dropping a buffer (its
//! mapping and its fd) while the kernel still sends from it is safe.
//!
//! What does not live here: what is cached and for how long (`sites`).

#![allow(unsafe_code)] // see the module doc and each `// SAFETY:` line

use parking_lot::RwLock;
use std::collections::BTreeMap;
use std::io::{self, IoSlice};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::pin::Pin;
use std::sync::LazyLock;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll, ready};

use bytes::Bytes;
use tokio::io::{AsyncRead, AsyncWrite, Interest, ReadBuf};
use tokio::net::TcpStream;

/// Smaller buffers stay on the heap: a memfd costs an fd and whole pages,
/// and for a few KiB the copy is cheaper than the extra system calls.
pub const MIN_SEALED_LEN: usize = 4 << 10;

const PAGE: usize = 4096;

/// Live mappings by start address: (length, memfd).
static MAPPINGS: LazyLock<RwLock<BTreeMap<usize, (usize, RawFd)>>> =
    LazyLock::new(|| RwLock::new(BTreeMap::new()));
static LIVE: AtomicUsize = AtomicUsize::new(0);
static SENT: AtomicU64 = AtomicU64::new(0);

/// At most a quarter of the process's fd limit is spent on sealed buffers,
/// so connections never starve for descriptors.
static MAX_LIVE: LazyLock<usize> = LazyLock::new(|| {
    let limit = rustix::process::getrlimit(rustix::process::Resource::Nofile)
        .current
        .unwrap_or(1024);
    usize::try_from(limit / 4).unwrap_or(usize::MAX).min(16_384)
});

/// Bytes sent with `sendfile` since start (for the stats endpoint).
pub fn sent_bytes() -> u64 {
    SENT.load(Ordering::Relaxed)
}

/// A copy of `data` in a sealed, read-only mapped memfd, or `None` when it
/// is too small, the fd budget is spent or the kernel refuses (the caller
/// then keeps the bytes on the heap).
pub fn sealed(data: &[u8]) -> Option<Bytes> {
    if data.len() < MIN_SEALED_LEN || LIVE.load(Ordering::Relaxed) >= *MAX_LIVE {
        return None;
    }
    use rustix::fs::{MemfdFlags, SealFlags};
    let fd = rustix::fs::memfd_create(
        "vole-site-blob",
        MemfdFlags::CLOEXEC | MemfdFlags::ALLOW_SEALING,
    )
    .ok()?;
    let mut written = 0;
    while written < data.len() {
        written += rustix::io::write(&fd, &data[written..]).ok()?;
    }
    rustix::fs::fcntl_add_seals(
        &fd,
        SealFlags::WRITE | SealFlags::SHRINK | SealFlags::GROW | SealFlags::SEAL,
    )
    .ok()?;
    // SAFETY: a fresh shared read-only mapping of a sealed file: nothing can
    // write its pages, and it is unmapped once, by `SealedBuf::drop`.
    let ptr = unsafe {
        rustix::mm::mmap(
            std::ptr::null_mut(),
            data.len(),
            rustix::mm::ProtFlags::READ,
            rustix::mm::MapFlags::SHARED,
            &fd,
            0,
        )
    }
    .ok()?;
    let buf = SealedBuf {
        ptr: ptr.cast(),
        len: data.len(),
        fd,
    };
    MAPPINGS
        .write()
        .insert(buf.ptr as usize, (buf.len, buf.fd.as_raw_fd()));
    LIVE.fetch_add(1, Ordering::Relaxed);
    Some(Bytes::from_owner(buf))
}

/// Memory `bytes` holds: whole pages for a sealed buffer.
pub fn footprint(bytes: &Bytes) -> usize {
    if find(bytes).is_some() {
        bytes.len().div_ceil(PAGE) * PAGE
    } else {
        bytes.len()
    }
}

/// The memfd and offset behind `slice`, when it lies in a live mapping.
fn find(slice: &[u8]) -> Option<(RawFd, u64)> {
    let start = slice.as_ptr() as usize;
    let mappings = MAPPINGS.read();
    let (&base, &(len, fd)) = mappings.range(..=start).next_back()?;
    (start + slice.len() <= base + len).then_some((fd, (start - base) as u64))
}

/// One sealed memfd and its read-only mapping.
struct SealedBuf {
    ptr: *const u8,
    len: usize,
    fd: OwnedFd,
}

// SAFETY: the mapping is read-only and immutable (sealed) for its whole life.
unsafe impl Send for SealedBuf {}
unsafe impl Sync for SealedBuf {}

impl AsRef<[u8]> for SealedBuf {
    fn as_ref(&self) -> &[u8] {
        // SAFETY: `ptr..ptr+len` is mapped readable until `drop`.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}

impl Drop for SealedBuf {
    fn drop(&mut self) {
        MAPPINGS.write().remove(&(self.ptr as usize));
        LIVE.fetch_sub(1, Ordering::Relaxed);
        // SAFETY: mapped in `sealed`, unmapped only here; no slice of it
        // outlives the `Bytes` that owns this buffer. The fd closes after.
        unsafe {
            let _ = rustix::mm::munmap(self.ptr as *mut _, self.len);
        }
    }
}

/// A TCP connection that sends slices of sealed buffers with `sendfile`
/// and everything else as usual.
pub struct Connection {
    stream: TcpStream,
}

impl Connection {
    pub fn new(stream: TcpStream) -> Connection {
        Connection { stream }
    }

    /// Runs `send` when the socket is writable, until it does not block.
    fn poll_send(
        &self,
        cx: &mut Context<'_>,
        mut send: impl FnMut(BorrowedFd<'_>) -> rustix::io::Result<usize>,
    ) -> Poll<io::Result<usize>> {
        loop {
            ready!(self.stream.poll_write_ready(cx))?;
            match self.stream.try_io(Interest::WRITABLE, || {
                send(self.stream.as_fd()).map_err(io::Error::from)
            }) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                result => return Poll::Ready(result),
            }
        }
    }
}

impl AsyncRead for Connection {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for Connection {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.poll_write_vectored(cx, &[IoSlice::new(buf)])
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let sealed = bufs
            .iter()
            .enumerate()
            .find_map(|(i, b)| find(b).map(|found| (i, found)));
        match sealed {
            None => Pin::new(&mut self.stream).poll_write_vectored(cx, bufs),
            // The slices before it (a response head) go first, marked as
            // "more to come" so they share a segment with the body.
            Some((i, _)) if i > 0 => self.poll_send(cx, |fd| {
                rustix::net::sendmsg(
                    fd,
                    &bufs[..i],
                    &mut Default::default(),
                    rustix::net::SendFlags::MORE,
                )
            }),
            Some((_, (memfd, offset))) => {
                let len = bufs[0].len();
                let sent = ready!(self.poll_send(cx, |fd| {
                    // SAFETY: the memfd belongs to a buffer that `bufs[0]`
                    // points into, alive while the caller holds the slice.
                    let memfd = unsafe { BorrowedFd::borrow_raw(memfd) };
                    let mut at = offset;
                    rustix::fs::sendfile(fd, memfd, Some(&mut at), len)
                }))?;
                SENT.fetch_add(sent as u64, Ordering::Relaxed);
                Poll::Ready(Ok(sent))
            }
        }
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    fn pattern(len: usize) -> Vec<u8> {
        (0..len).map(|i| (i * 31 % 251) as u8).collect()
    }

    #[test]
    fn small_buffers_stay_on_the_heap_and_large_ones_are_sealed() {
        assert!(sealed(&pattern(MIN_SEALED_LEN - 1)).is_none());
        let data = pattern(MIN_SEALED_LEN * 3 + 5);
        let bytes = sealed(&data).expect("a memfd");
        assert_eq!(&bytes[..], &data[..]);
        assert!(find(&bytes[100..200]).is_some(), "a slice is found");
        assert_eq!(footprint(&bytes), (data.len()).div_ceil(PAGE) * PAGE);
        let heap = Bytes::from(data);
        assert!(find(&heap).is_none());
    }

    /// Head and body slices written as hyper writes them arrive intact, the
    /// body through `sendfile` (counted), and the bytes stay right after the
    /// buffer is dropped with the data still in the socket.
    #[tokio::test]
    async fn sealed_slices_are_sent_from_the_memfd_and_survive_their_buffer() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let client = tokio::spawn(async move { TcpStream::connect(addr).await.unwrap() });
        let (server, _) = listener.accept().await.unwrap();
        let mut client = client.await.unwrap();
        let mut connection = Connection::new(server);

        // Small enough for the two socket buffers: nothing reads until the
        // buffer is gone.
        let data = pattern(96 << 10);
        let body = sealed(&data).expect("a memfd");
        let part = body.slice(1000..60_000);
        let head = b"HTTP/1.1 200 OK\r\n\r\n".to_vec();
        let before = sent_bytes();
        let mut expected = head.clone();
        expected.extend_from_slice(&data[1000..60_000]);

        let mut offset = 0;
        while offset < expected.len() {
            let (head_left, body_left) = if offset < head.len() {
                (&head[offset..], &part[..])
            } else {
                (&head[..0], &part[offset - head.len()..])
            };
            let slices = [IoSlice::new(head_left), IoSlice::new(body_left)];
            let slices: Vec<IoSlice> = slices.into_iter().filter(|s| !s.is_empty()).collect();
            offset += connection.write_vectored(&slices).await.unwrap();
        }
        drop((part, body)); // unmapped and closed while the socket holds the data
        connection.shutdown().await.unwrap();
        let mut received = Vec::new();
        client.read_to_end(&mut received).await.unwrap();
        assert!(received == expected, "the bytes received differ");
        assert!(
            sent_bytes() - before >= (60_000 - 1000) as u64,
            "the body was not sent with sendfile"
        );
    }
}
