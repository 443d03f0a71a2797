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

/// The raw descriptor of the socket a request came on
/// ([`current_connection`], set by the server): open while the request's
/// handler runs, since the connection waits for its response. Whoever
/// needs the socket longer duplicates it then.
#[derive(Debug, Clone, Copy)]
pub struct ConnectionFd(pub std::os::fd::RawFd);

tokio::task_local! {
    /// The socket of the request the task is handling: set by the server
    /// around each request's future, so a download's pump or a clone's,
    /// made deep in a handler, can cork it and count what the client's TCP
    /// acknowledged ([`acked::AckedBytes`]) without every handler passing
    /// it down.
    static CONNECTION: ConnectionFd;
}

/// Runs `request` (a request's whole handling) with `connection` as its
/// socket ([`current_connection`]).
pub fn on_connection<F: std::future::Future>(
    connection: ConnectionFd,
    request: F,
) -> impl std::future::Future<Output = F::Output> {
    CONNECTION.scope(connection, request)
}

/// The socket of the request being handled, when called from its task.
pub fn current_connection() -> Option<ConnectionFd> {
    CONNECTION.try_with(|c| *c).ok()
}

pub use vole_stdx::spawn_blocking;

#[cfg(test)]
mod connection_tests {
    use super::*;

    #[tokio::test]
    async fn a_request_sees_its_socket_and_nothing_else_does() {
        assert!(current_connection().is_none(), "outside any request");
        let seen = on_connection(ConnectionFd(7), async { current_connection() }).await;
        assert_eq!(seen.map(|c| c.0), Some(7));
        assert!(current_connection().is_none(), "the scope ended with it");
    }
}
