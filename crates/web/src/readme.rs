//! README rendering: markdown to HTML with pulldown-cmark, links made
//! relative to the repo, everything sanitized by ammonia.

use super::*;

/// What is escaped in a link's fragment (the URL standard's fragment set).
const FRAGMENT: &percent_encoding::AsciiSet = &percent_encoding::CONTROLS
    .add(b' ')
    .add(b'"')
    .add(b'<')
    .add(b'>')
    .add(b'`');

/// Rewrites a README's relative links into the repo: images to raw,
/// everything else to the blob view, both at the README's revision.
pub(super) struct RepoLinks {
    repo: String,
    rev: String,
}

impl ammonia::UrlRelativeEvaluate<'_> for RepoLinks {
    fn evaluate<'a>(&self, url: &'a str) -> Option<std::borrow::Cow<'a, str>> {
        if url.starts_with('#') {
            return Some(url.into());
        }
        // A path in the repo (by the one tree-path rule, percent-decoded
        // as a browser would), its fragment kept; a query means nothing
        // to a file and is dropped; a link that names no path is dropped.
        let (path, fragment) = match url.split_once('#') {
            Some((path, fragment)) => (path, Some(fragment)),
            None => (url, None),
        };
        let path = path.split('?').next().unwrap_or_default();
        let path = path.trim_start_matches("./").trim_start_matches('/');
        let decoded = percent_encoding::percent_decode_str(path)
            .decode_utf8()
            .ok()?;
        let tree_path = TreePath::parse(&decoded).ok().filter(|p| !p.is_root())?;
        let segments = tree_path.segments();
        let view = if is_image(segments.last().map_or("", String::as_str)) {
            "raw"
        } else {
            "blob"
        };
        let mut link = format!(
            "/{}/-/{view}/{}/{}",
            self.repo,
            rev_path(&self.rev),
            encode_path(segments)
        );
        if let Some(fragment) = fragment {
            link.push('#');
            link.push_str(&percent_encoding::utf8_percent_encode(fragment, FRAGMENT).to_string());
        }
        Some(link.into())
    }
}

/// A README as sanitized HTML: CommonMark for `.md`, else preformatted
/// text. Scripts, event attributes, `javascript:` URLs and any other markup
/// that could run are removed by ammonia.
pub(super) fn render_readme(repo: &str, rev: &str, file: &str, bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(&bytes[..bytes.len().min(MAX_SHOWN_BYTES)]);
    if !file.to_lowercase().ends_with(".md") {
        return format!("<pre>{}</pre>", ammonia::clean_text(&text));
    }
    let parser = pulldown_cmark::Parser::new_ext(
        &text,
        pulldown_cmark::Options::ENABLE_TABLES
            | pulldown_cmark::Options::ENABLE_STRIKETHROUGH
            | pulldown_cmark::Options::ENABLE_TASKLISTS,
    );
    // The page has its own h1: the README's headings move one level down.
    let parser = parser.map(|event| match event {
        pulldown_cmark::Event::Start(pulldown_cmark::Tag::Heading {
            level,
            id,
            classes,
            attrs,
        }) => pulldown_cmark::Event::Start(pulldown_cmark::Tag::Heading {
            level: demote(level),
            id,
            classes,
            attrs,
        }),
        pulldown_cmark::Event::End(pulldown_cmark::TagEnd::Heading(level)) => {
            pulldown_cmark::Event::End(pulldown_cmark::TagEnd::Heading(demote(level)))
        }
        other => other,
    });
    let mut html = String::new();
    pulldown_cmark::html::push_html(&mut html, parser);
    ammonia::Builder::default()
        .url_relative(ammonia::UrlRelative::Custom(Box::new(RepoLinks {
            repo: repo.to_string(),
            rev: rev.to_string(),
        })))
        .link_rel(Some("noopener noreferrer nofollow"))
        .clean(&html)
        .to_string()
}

pub(super) fn demote(level: pulldown_cmark::HeadingLevel) -> pulldown_cmark::HeadingLevel {
    use pulldown_cmark::HeadingLevel::*;
    match level {
        H1 => H2,
        H2 => H3,
        H3 => H4,
        H4 => H5,
        _ => H6,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn md(text: &str) -> String {
        render_readme("alice/repo", "main", "README.md", text.as_bytes())
    }

    #[test]
    fn relative_links_point_into_the_repo_at_the_readmes_revision() {
        let html =
            md("[guide](docs/guide.md) [up](./x.txt) ![logo](img/logo.png) [anchor](#usage)");
        assert!(
            html.contains(r#"href="/alice/repo/-/blob/main/docs/guide.md""#),
            "{html}"
        );
        assert!(
            html.contains(r#"href="/alice/repo/-/blob/main/x.txt""#),
            "{html}"
        );
        assert!(
            html.contains(r#"src="/alice/repo/-/raw/main/img/logo.png""#),
            "{html}"
        );
        assert!(html.contains("href=\"#usage\""), "{html}");
        // Absolute links stay, with rel set; a way out of the repo is dropped.
        let html = md("[site](https://example.org/) [out](../../etc/passwd)");
        assert!(html.contains(r#"href="https://example.org/""#), "{html}");
        assert!(html.contains("noopener noreferrer nofollow"), "{html}");
        assert!(!html.contains("etc/passwd\""), "{html}");
        // Encoded escapes are escapes; a name with spaces, a fragment and
        // a query; a revision that needs escaping in a link.
        let html = md("[a](%2e%2e/%2e%2e/secret) [b](my%20notes.md#part-2) [c](x.md?plain=1)");
        assert!(!html.contains("secret"), "{html}");
        assert!(
            html.contains(r#"href="/alice/repo/-/blob/main/my%20notes.md#part-2""#),
            "{html}"
        );
        assert!(
            html.contains(r#"href="/alice/repo/-/blob/main/x.md""#),
            "{html}"
        );
        let html = render_readme("a/b", "odd#rev", "README.md", b"[g](guide.md)");
        assert!(
            html.contains(r#"href="/a/b/-/blob/odd%23rev/guide.md""#),
            "{html}"
        );
    }

    #[test]
    fn nothing_that_runs_survives_and_headings_move_down() {
        let html = md(
            "# Title\n\n<script>alert(1)</script>\n\n<a href=\"javascript:alert(1)\" onclick=\"x()\">x</a>\n\n<img src=x onerror=alert(1)>",
        );
        assert!(html.contains("<h2>Title</h2>"), "{html}");
        for bad in ["<script", "javascript:", "onclick", "onerror"] {
            assert!(!html.contains(bad), "{bad} survived: {html}");
        }
        let text = render_readme("a/b", "main", "README", b"<b>not markdown</b>");
        assert_eq!(text, "<pre>&lt;b&gt;not&#32;markdown&lt;&#47;b&gt;</pre>");
    }
}
