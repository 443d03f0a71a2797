//! [`TreePath`]: a path inside a git tree as a request or a setting names
//! it, checked once by one rule before any object is read. Used by the web
//! pages, the sites and the metadata store's site settings alike.
//!
//! The rule: relative (no leading `/`), at most [`MAX_BYTES`] bytes and
//! [`MAX_SEGMENTS`] segments, no NUL, no backslash, no empty segment
//! (`a//b`), no `.` or `..` segment. One trailing `/` is allowed and
//! remembered (it says "a directory"); the empty path is the root. So a
//! file whose name holds a backslash (git allows it) is listed but not
//! served: a `\` in a request path is refused, as some clients and servers
//! read it as a separator.

/// Longest path accepted, in bytes.
pub const MAX_BYTES: usize = 1024;
/// Most segments accepted.
pub const MAX_SEGMENTS: usize = 64;

/// A checked path inside a tree.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TreePath {
    segments: Vec<String>,
    trailing_slash: bool,
}

/// The part of the rule a path broke.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum TreePathError {
    #[error("the path is longer than {MAX_BYTES} bytes")]
    TooLong,
    #[error("the path has more than {MAX_SEGMENTS} segments")]
    TooDeep,
    #[error("the path contains a NUL byte")]
    Nul,
    #[error("the path contains a backslash")]
    Backslash,
    #[error("the path starts with '/'")]
    Absolute,
    #[error("the path has an empty segment ('//')")]
    EmptySegment,
    #[error("the path has a '.' or '..' segment")]
    Dot,
}

/// Characters escaped in one URL path segment: controls, space, the
/// delimiters of a URL (`#`, `?`, `/`), `%` itself, and what HTML
/// attributes and old clients mangle.
const PATH_SEGMENT: &percent_encoding::AsciiSet = &percent_encoding::CONTROLS
    .add(b' ')
    .add(b'"')
    .add(b'#')
    .add(b'%')
    .add(b'/')
    .add(b'<')
    .add(b'>')
    .add(b'?')
    .add(b'\\')
    .add(b'`')
    .add(b'{')
    .add(b'}');

/// `segments` as a URL path: each percent-encoded (a `/` inside one is
/// `%2F`), joined with `/`. What every link and `Location` built from a
/// path or a revision goes through.
pub fn encode_segments<S: AsRef<str>>(segments: &[S]) -> String {
    segments
        .iter()
        .map(|s| percent_encoding::utf8_percent_encode(s.as_ref(), PATH_SEGMENT).to_string())
        .collect::<Vec<_>>()
        .join("/")
}

impl TreePath {
    /// Checks `text` (already percent-decoded) against the rule.
    pub fn parse(text: &str) -> Result<TreePath, TreePathError> {
        if text.len() > MAX_BYTES {
            return Err(TreePathError::TooLong);
        }
        if text.contains('\0') {
            return Err(TreePathError::Nul);
        }
        if text.contains('\\') {
            return Err(TreePathError::Backslash);
        }
        if text.starts_with('/') {
            return Err(TreePathError::Absolute);
        }
        let trailing_slash = text.is_empty() || text.ends_with('/');
        let body = text.strip_suffix('/').unwrap_or(text);
        let mut segments = Vec::new();
        if !body.is_empty() {
            for segment in body.split('/') {
                match segment {
                    "" => return Err(TreePathError::EmptySegment),
                    "." | ".." => return Err(TreePathError::Dot),
                    _ => segments.push(segment.to_string()),
                }
                if segments.len() > MAX_SEGMENTS {
                    return Err(TreePathError::TooDeep);
                }
            }
        }
        Ok(TreePath {
            segments,
            trailing_slash,
        })
    }

    /// The segments, root first; empty for the root.
    pub fn segments(&self) -> &[String] {
        &self.segments
    }

    pub fn into_segments(self) -> Vec<String> {
        self.segments
    }

    /// The path ended in `/`, or is the root.
    pub fn trailing_slash(&self) -> bool {
        self.trailing_slash
    }

    pub fn is_root(&self) -> bool {
        self.segments.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_rule_for_every_oddity() {
        let deep = "x/".repeat(MAX_SEGMENTS + 1);
        let long = "y".repeat(MAX_BYTES + 1);
        for (bad, why) in [
            ("..", TreePathError::Dot),
            ("a/../b", TreePathError::Dot),
            ("a/./b", TreePathError::Dot),
            ("./x", TreePathError::Dot),
            ("a//b", TreePathError::EmptySegment),
            ("a//", TreePathError::EmptySegment),
            ("a\\b", TreePathError::Backslash),
            ("a\0b", TreePathError::Nul),
            ("/etc/passwd", TreePathError::Absolute),
            ("/", TreePathError::Absolute),
            (deep.as_str(), TreePathError::TooDeep),
            (long.as_str(), TreePathError::TooLong),
        ] {
            assert_eq!(TreePath::parse(bad), Err(why), "{bad:?}");
        }
    }

    #[test]
    fn ordinary_paths_split_into_segments() {
        let file = TreePath::parse("docs/guide.html").unwrap();
        assert_eq!(file.segments(), ["docs", "guide.html"]);
        assert!(!file.trailing_slash());
        let root = TreePath::parse("").unwrap();
        assert!(root.is_root() && root.trailing_slash());
        let dir = TreePath::parse("docs/").unwrap();
        assert_eq!(dir.segments(), ["docs"]);
        assert!(dir.trailing_slash());
        // Names git allows are kept as they are.
        let odd = TreePath::parse("a b/..x/ü.txt").unwrap();
        assert_eq!(odd.segments(), ["a b", "..x", "ü.txt"]);
        let at_limit = "x/".repeat(MAX_SEGMENTS - 1) + "x";
        assert_eq!(
            TreePath::parse(&at_limit).unwrap().segments().len(),
            MAX_SEGMENTS
        );
    }
}
