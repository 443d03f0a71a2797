//! How much of a response the client has really taken: the bytes its TCP
//! acknowledged (`TCP_INFO`'s `tcpi_bytes_acked`, Linux 4.1 and later).
//! Counting the bytes handed to the response body instead credits a client
//! with everything the buffers between (the body's channel, hyper's write
//! buffer, both sockets' buffers: megabytes on a fast link) absorb, so a
//! client reading 2 KiB a second looks fast for the first window. What the
//! peer acknowledged leaves out this side's buffers; the client's own
//! receive buffer stays in, and it stops growing once the client stops
//! reading (its kernel acknowledges only what fits).
//!
//! Why not a crate: rustix has no `TCP_INFO`, and this is one call.

#![allow(unsafe_code)] // `bytes_acked`: see its `// SAFETY:` line

use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd};

use crate::ConnectionFd;

/// A duplicate of a connection's socket, read for the bytes its peer has
/// acknowledged since it was taken.
#[derive(Debug)]
pub struct AckedBytes {
    socket: OwnedFd,
    base: u64,
}

impl AckedBytes {
    /// The socket of `connection`, duplicated (the handler's descriptor is
    /// only valid while it runs): `None` if it is not a TCP socket that
    /// reports acknowledged bytes.
    pub fn of(connection: ConnectionFd) -> Option<AckedBytes> {
        // SAFETY: the descriptor is the socket of the request being
        // handled, open while its handler runs (`ConnectionFd`), and this
        // is called from the handler; it is only borrowed to duplicate it.
        let socket = unsafe { BorrowedFd::borrow_raw(connection.0) };
        let socket = socket.try_clone_to_owned().ok()?;
        let base = bytes_acked(&socket)?;
        Some(AckedBytes { socket, base })
    }

    /// Bytes acknowledged since [`Self::of`]; `None` once the socket
    /// cannot tell (it is gone).
    pub fn since_start(&self) -> Option<u64> {
        Some(bytes_acked(&self.socket)?.saturating_sub(self.base))
    }
}

fn bytes_acked(socket: &OwnedFd) -> Option<u64> {
    let mut info = std::mem::MaybeUninit::<libc::tcp_info>::zeroed();
    let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
    // SAFETY: `info` is a zeroed `tcp_info` of `len` bytes that the kernel
    // fills (at most `len` of them) and `len` is updated to what it wrote;
    // the descriptor is owned and open.
    let rc = unsafe {
        libc::getsockopt(
            socket.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            info.as_mut_ptr().cast(),
            &mut len,
        )
    };
    let wrote = usize::try_from(len).ok()?;
    let needs = std::mem::offset_of!(libc::tcp_info, tcpi_bytes_acked) + 8;
    if rc != 0 || wrote < needs {
        return None;
    }
    // SAFETY: zero-initialised, and the kernel wrote a prefix of it: every
    // field is a plain integer, so any bytes are a valid value.
    Some(unsafe { info.assume_init() }.tcpi_bytes_acked)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    #[test]
    fn counts_what_the_peer_acknowledged_and_nothing_for_a_pipe() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let mut client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (mut server, _) = listener.accept().unwrap();
        let acked = AckedBytes::of(ConnectionFd(server.as_raw_fd())).unwrap();
        assert_eq!(acked.since_start(), Some(0));
        server.write_all(&[7u8; 10_000]).unwrap();
        let mut got = vec![0u8; 10_000];
        client.read_exact(&mut got).unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while acked.since_start() != Some(10_000) && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert_eq!(acked.since_start(), Some(10_000));
        let (reader, _writer) = std::io::pipe().unwrap();
        let pipe = ConnectionFd(reader.as_raw_fd());
        assert!(AckedBytes::of(pipe).is_none(), "a pipe reports no acks");
    }
}
