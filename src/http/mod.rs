//! What the HTTP services share and nothing else: the one error type at
//! the boundary ([`AppError`]), and the sealed-memfd buffers with the
//! connection that sends them with `sendfile` ([`zero_copy`]), the
//! pagination extractors ([`page`]). No handler
//! lives here; routes are in `server/router.rs`, handlers in the services.

pub mod auth;
pub mod conditional;
pub mod error;
pub mod page;
pub mod slots;
pub mod stream;
pub mod zero_copy;

pub use error::AppError;

/// The raw descriptor of the socket a request came on (a request
/// extension, set by the server): open while the request's handler runs,
/// since the connection waits for its response. Whoever needs the socket
/// longer duplicates it then.
#[derive(Debug, Clone, Copy)]
pub struct ConnectionFd(pub std::os::fd::RawFd);

/// `tokio::task::spawn_blocking`, in the caller's tracing span: what the
/// blocking work logs names the request it does it for.
pub fn spawn_blocking<F, R>(f: F) -> tokio::task::JoinHandle<R>
where
    F: FnOnce() -> R + Send + 'static,
    R: Send + 'static,
{
    let span = tracing::Span::current();
    tokio::task::spawn_blocking(move || span.in_scope(f))
}
