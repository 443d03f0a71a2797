//! Small pieces every layer of vole shares and that know nothing of the
//! rest of it (no git, no repos, no HTTP): the one way a time is written
//! as text, an error and its sources as one line, a bounded page of a
//! list, the Prometheus helpers, blocking work in the caller's tracing
//! span, a text cut to a size on a character's boundary. The crate the others start from, as `stdx` is in rust-analyzer.

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

/// `text`'s first `bytes` at most, cut on a character's boundary (the
/// standard library's `floor_char_boundary` is newer than vole's MSRV).
pub fn prefix(text: &str, bytes: usize) -> &str {
    if text.len() <= bytes {
        return text;
    }
    let mut end = bytes;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_prefix_is_cut_on_a_character_boundary() {
        assert_eq!(super::prefix("héllo", 2), "h");
        assert_eq!(super::prefix("héllo", 3), "hé");
        assert_eq!(super::prefix("hi", 10), "hi");
    }
}
