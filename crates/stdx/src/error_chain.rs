//! How an error and its sources are written as one line, for the server's
//! log and the CLI: `outer: inner: innermost`. Nothing here decides what a
//! client is told; that is `vole_http::error`.

use std::fmt;

/// Displays an error with its whole source chain, skipping a link whose
/// text its outer link already contains (errors that repeat their source).
pub struct Chain<'a>(pub &'a (dyn std::error::Error + 'static));

impl fmt::Display for Chain<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts: Vec<String> = Vec::new();
        let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(self.0);
        while let Some(error) = cause {
            let text = error.to_string();
            if !parts.last().is_some_and(|last| last.contains(&text)) {
                parts.push(text);
            }
            cause = error.source();
        }
        f.write_str(&parts.join(": "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("reading the shard")]
    struct Outer(#[source] std::io::Error);

    #[derive(Debug, thiserror::Error)]
    #[error("log: {0}")]
    struct Repeats(#[source] std::io::Error);

    #[test]
    fn chains_join_sources_and_skip_repeats() {
        let io = || std::io::Error::other("disk on fire");
        assert_eq!(
            Chain(&Outer(io())).to_string(),
            "reading the shard: disk on fire"
        );
        assert_eq!(Chain(&Repeats(io())).to_string(), "log: disk on fire");
    }
}
