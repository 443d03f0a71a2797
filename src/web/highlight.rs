//! Server-side syntax highlighting for blob views (syntect, classed spans
//! styled by `/static/highlight.css`), cached by blob id: a blob's id names
//! its content, so a cached rendering is valid in every repo and never
//! stale.

use parking_lot::Mutex;
use std::num::NonZeroUsize;
use std::sync::{Arc, OnceLock};

use gix::ObjectId;
use syntect::html::{ClassStyle, ClassedHTMLGenerator};
use syntect::parsing::SyntaxSet;
use syntect::util::LinesWithEndings;

const CLASS_STYLE: ClassStyle = ClassStyle::SpacedPrefixed { prefix: "hl-" };
/// Rendered blobs kept; each is at most the blob view's size cap.
const CACHED_BLOBS: usize = 256;

fn syntaxes() -> &'static SyntaxSet {
    static SET: OnceLock<SyntaxSet> = OnceLock::new();
    SET.get_or_init(SyntaxSet::load_defaults_newlines)
}

fn cache() -> &'static Mutex<lru::LruCache<ObjectId, Arc<Vec<String>>>> {
    static CACHE: OnceLock<Mutex<lru::LruCache<ObjectId, Arc<Vec<String>>>>> = OnceLock::new();
    CACHE.get_or_init(|| {
        Mutex::new(lru::LruCache::new(
            NonZeroUsize::new(CACHED_BLOBS).expect("non-zero"),
        ))
    })
}

/// The lines of `text` (blob `id`, named `file_name`) as HTML: highlighted
/// spans when the language is known (by file name, else by first line),
/// escaped text otherwise. Every line is balanced HTML on its own.
pub fn lines(id: ObjectId, file_name: &str, text: &str) -> Arc<Vec<String>> {
    if let Some(hit) = cache().lock().get(&id) {
        return hit.clone();
    }
    let rendered = Arc::new(render(file_name, text));
    cache().lock().put(id, rendered.clone());
    rendered
}

fn render(file_name: &str, text: &str) -> Vec<String> {
    let set = syntaxes();
    let extension = file_name.rsplit('.').next().unwrap_or_default();
    let syntax = set
        .find_syntax_by_extension(file_name)
        .or_else(|| set.find_syntax_by_extension(extension))
        .or_else(|| set.find_syntax_by_first_line(text.lines().next().unwrap_or_default()));
    let plain = || text.lines().map(escape).collect();
    let Some(syntax) = syntax.filter(|s| s.name != "Plain Text") else {
        return plain();
    };
    let mut generator = ClassedHTMLGenerator::new_with_class_style(syntax, set, CLASS_STYLE);
    for line in LinesWithEndings::from(text) {
        if generator
            .parse_html_for_line_which_includes_newline(line)
            .is_err()
        {
            return plain();
        }
    }
    split_lines(&generator.finalize())
}

/// Text as HTML: `&`, `<`, `>`, `"` and `'` escaped.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// Splits highlighted HTML (escaped text and `<span class=..>`/`</span>`
/// only) into lines, closing the spans open at each line end and opening
/// them again on the next line, so each line stands alone in its table row.
fn split_lines(html: &str) -> Vec<String> {
    let mut lines = Vec::new();
    let mut open: Vec<&str> = Vec::new();
    let mut line = String::new();
    // Whether the current line holds any text (a trailing line of only
    // re-opened and closed spans is not a line).
    let mut has_text = false;
    let mut rest = html;
    while !rest.is_empty() {
        if rest.starts_with("<span") {
            let end = rest.find('>').map_or(rest.len(), |i| i + 1);
            open.push(&rest[..end]);
            line.push_str(&rest[..end]);
            rest = &rest[end..];
        } else if let Some(after) = rest.strip_prefix("</span>") {
            open.pop();
            line.push_str("</span>");
            rest = after;
        } else if let Some(after) = rest.strip_prefix('\n') {
            line.push_str(&"</span>".repeat(open.len()));
            lines.push(std::mem::take(&mut line));
            has_text = false;
            for tag in &open {
                line.push_str(tag);
            }
            rest = after;
        } else {
            let next = rest.find(['<', '\n']).unwrap_or(rest.len()).max(1);
            line.push_str(&rest[..next]);
            has_text = true;
            rest = &rest[next..];
        }
    }
    if has_text {
        line.push_str(&"</span>".repeat(open.len()));
        lines.push(line);
    }
    lines
}

/// The stylesheet for the highlight classes: a light theme, and a dark one
/// under `prefers-color-scheme: dark`.
pub fn stylesheet() -> &'static str {
    static CSS: OnceLock<String> = OnceLock::new();
    CSS.get_or_init(|| {
        let themes = syntect::highlighting::ThemeSet::load_defaults();
        let css = |name: &str| {
            themes
                .themes
                .get(name)
                .and_then(|theme| {
                    syntect::html::css_for_theme_with_class_style(theme, CLASS_STYLE).ok()
                })
                .unwrap_or_default()
        };
        format!(
            "{}\n@media (prefers-color-scheme: dark) {{\n{}\n}}\n",
            css("InspiredGitHub"),
            css("base16-ocean.dark")
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_line_is_balanced_and_the_text_survives() {
        let source = "fn main() {\n    let s = \"a <b> & c\";\n}\n/* one\ntwo */\n";
        let lines = render("main.rs", source);
        assert_eq!(lines.len(), 5, "{lines:?}");
        for line in &lines {
            assert_eq!(
                line.matches("<span").count(),
                line.matches("</span>").count(),
                "unbalanced: {line}"
            );
            assert!(!line.contains('\n'));
        }
        assert!(lines[1].contains("&lt;b&gt; &amp; c"), "{}", lines[1]);
        assert!(lines[0].contains("hl-"), "not highlighted: {}", lines[0]);
        // The comment spans two lines: both are inside a comment span.
        assert!(lines[4].contains("hl-comment"), "{}", lines[4]);
    }

    #[test]
    fn unknown_languages_are_escaped_text() {
        let lines = render("notes.unknownext", "<script>x</script>\nsecond");
        assert_eq!(lines, vec!["&lt;script&gt;x&lt;/script&gt;", "second"]);
    }
}
