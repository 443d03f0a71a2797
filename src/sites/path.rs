//! Request paths of a site, checked before any git object is read: split
//! into segments, with everything that could step outside the tree refused
//! (`..`, `.`, empty segments, NUL, backslashes, over-long paths).

/// Longest request path accepted, in bytes.
pub const MAX_PATH_BYTES: usize = 1024;
/// Most path segments accepted.
pub const MAX_SEGMENTS: usize = 64;

/// A checked site path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SitePath {
    pub segments: Vec<String>,
    /// The request ended in `/` (or was the root).
    pub trailing_slash: bool,
}

impl SitePath {
    /// `path` is the part after the site prefix, already percent-decoded,
    /// e.g. `docs/guide.html` or `` (the root).
    pub fn parse(path: &str) -> Option<SitePath> {
        if path.len() > MAX_PATH_BYTES || path.contains(['\0', '\\']) {
            return None;
        }
        let trimmed = path.trim_start_matches('/');
        let trailing_slash = trimmed.is_empty() || trimmed.ends_with('/');
        let body = trimmed.strip_suffix('/').unwrap_or(trimmed);
        let segments: Vec<String> = if body.is_empty() {
            Vec::new()
        } else {
            body.split('/').map(str::to_string).collect()
        };
        if segments.len() > MAX_SEGMENTS
            || segments
                .iter()
                .any(|s| s.is_empty() || s == "." || s == "..")
        {
            return None;
        }
        Some(SitePath {
            segments,
            trailing_slash,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_and_oddities_are_refused() {
        for bad in [
            "..",
            "a/../b",
            "a/./b",
            "a//b",
            "a\\b",
            "a\0b",
            "./x",
            &"x/".repeat(70),
            &"y".repeat(2000),
        ] {
            assert_eq!(SitePath::parse(bad), None, "{bad:?} was accepted");
        }
    }

    #[test]
    fn ordinary_paths_split_into_segments() {
        let p = SitePath::parse("docs/guide.html").unwrap();
        assert_eq!(p.segments, ["docs", "guide.html"]);
        assert!(!p.trailing_slash);
        let root = SitePath::parse("").unwrap();
        assert!(root.segments.is_empty() && root.trailing_slash);
        let dir = SitePath::parse("docs/").unwrap();
        assert_eq!(dir.segments, ["docs"]);
        assert!(dir.trailing_slash);
    }
}
