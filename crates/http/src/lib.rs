//! What the HTTP services share and nothing else: the one error type at
//! the boundary ([`AppError`]), the one extractor of a repo a handler acts
//! on ([`repo_access::RepoAccess`]), and the sealed-memfd buffers with the
//! connection that sends them with `sendfile` ([`zero_copy`]), the
//! pagination extractors ([`page`]). No handler
//! lives here: each service has its handlers and its `routes.rs`, and
//! `vole`'s `server/router.rs` merges them. It knows no service, no
//! store's internals and no page: a service tells it how a denial reads
//! ([`RepoSurface`]).

pub mod acked;
pub mod auth;
pub mod browser;
pub mod client;
pub mod conditional;
mod credential;
pub mod error;
pub mod page;
pub mod repo_access;
pub mod slots;
pub mod stream;
pub mod zero_copy;

pub use error::AppError;
pub use repo_access::{RepoAccess, RepoSurface};

/// The raw descriptor of the socket a request came on (a request
/// extension, set by the server): open while the request's handler runs,
/// since the connection waits for its response. Whoever needs the socket
/// longer duplicates it then.
#[derive(Debug, Clone, Copy)]
pub struct ConnectionFd(pub std::os::fd::RawFd);

pub use vole_stdx::spawn_blocking;
