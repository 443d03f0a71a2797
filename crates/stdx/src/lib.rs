//! Small pieces every layer of vole shares and that know nothing of the
//! rest of it (no git, no repos, no HTTP): the one way a time is written
//! as text, an error and its sources as one line, a bounded page of a
//! list, the Prometheus helpers, blocking work in the caller's tracing
//! span. The crate the others start from, as `stdx` is in rust-analyzer.

pub mod error_chain;
pub mod metrics;
pub mod page;
pub mod time;

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
