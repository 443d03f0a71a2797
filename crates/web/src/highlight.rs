//! Server-side syntax highlighting for blob views (syntect, classed spans
//! styled by `/static/highlight.css`), cached by blob id: a blob's id names
//! its content, so a cached rendering is valid in every repo and never
//! stale.

use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use gix::ObjectId;

use crate::caches::Weigh;
use syntect::html::{ClassStyle, ClassedHTMLGenerator};
use syntect::parsing::SyntaxSet;
use syntect::util::LinesWithEndings;
use tokio::sync::Semaphore;

const CLASS_STYLE: ClassStyle = ClassStyle::SpacedPrefixed { prefix: "hl-" };

/// Highlighted HTML may be at most this many times the text it shows
/// (plus [`OUTPUT_SLACK`]); past it the file is shown plain. Deeply
/// nested input (100,000 `[`) makes a highlighter's open spans re-open on
/// every line, which is quadratic without this bound. Ordinary code is
/// well inside it: vole's own Rust sources highlight to 16x to 22x their
/// bytes (syntect classes every scope of a token, and each line re-opens
/// the spans it is inside); at 8x, every Rust file was shown plain.
pub const MAX_OUTPUT_FACTOR: usize = 32;
/// What a tiny file may take beyond the factor (a few spans).
const OUTPUT_SLACK: usize = 4096;
/// Highlighting one file stops after this long; it is shown plain.
pub const TIME_BUDGET: Duration = Duration::from_secs(1);
/// How long a page waits for a highlighting job before it shows the file
/// plain (not cached: a later view highlights it).
const JOB_WAIT: Duration = Duration::from_secs(2);
/// Lines longer than this are not highlighted (the file is shown plain).
const MAX_HIGHLIGHTED_LINE: usize = 16 << 10;

fn syntaxes() -> &'static SyntaxSet {
    static SET: OnceLock<SyntaxSet> = OnceLock::new();
    SET.get_or_init(SyntaxSet::load_defaults_newlines)
}

/// A blob's lines as HTML, each balanced on its own.
#[derive(Debug)]
pub struct Highlighted {
    pub lines: Vec<String>,
    /// Shown plain because highlighting would have cost too much (bytes
    /// or time), not because the language is unknown.
    pub over_budget: bool,
}

impl Weigh for Highlighted {
    fn weight(&self) -> usize {
        self.lines.weight() + std::mem::size_of::<Highlighted>()
    }
}

/// A cache key weighs its file name and id.
impl Weigh for (ObjectId, String) {
    fn weight(&self) -> usize {
        self.1.weight() + std::mem::size_of::<ObjectId>()
    }
}

/// A blob is highlighted by id and file name (the name picks the
/// language); a blob's id names its content, so an entry is never stale
/// and is the same in every repo: highlighting reads nothing but the
/// bytes and the name (no attributes, no config), and git ignores
/// replacement objects for blobs as for everything (`git::UNTRUSTED_HISTORY_OFF`),
/// so no repo needs to be in the key. The binary verdicts likewise.
type Key = (ObjectId, String);

/// Highlighting with bounded cost: output at most [`MAX_OUTPUT_FACTOR`]
/// times the input, at most [`TIME_BUDGET`] a file, one job per core at a
/// time, one computation per blob (concurrent misses wait for the first
/// and share its rendering), and a cache bounded in bytes.
#[derive(Clone)]
pub struct Highlighter {
    cache: moka::future::Cache<Key, Arc<Highlighted>>,
    jobs: Arc<Semaphore>,
    binary: moka::sync::Cache<ObjectId, bool>,
    /// Highlightings started by [`Highlighter::start`] and not yet done.
    started: Arc<std::sync::atomic::AtomicUsize>,
}

/// Highlightings [`Highlighter::start`] keeps going at once, all pages
/// together; past it, a page's sides are drawn plain and left to a later
/// view.
const MAX_STARTED: usize = 256;

impl std::fmt::Debug for Highlighter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Highlighter")
            .field("cached_bytes", &self.cache.weighted_size())
            .finish_non_exhaustive()
    }
}

/// What a highlighting gives that is not to be kept (a panic, or every
/// job slot busy), shared with the callers that waited for it.
struct NotKept(Arc<Highlighted>);

impl Highlighter {
    /// A highlighter with the bounds of the read-side settings.
    pub fn for_reads(reads: &vole_config::ReadLimits) -> Highlighter {
        Highlighter::new(reads.highlight_cache_bytes, reads.binary_verdicts)
    }

    /// A highlighter keeping `cache_bytes` of renderings and the binary
    /// verdicts of `verdicts` blobs.
    pub fn new(cache_bytes: u64, verdicts: usize) -> Highlighter {
        let cores = vole_config::defaults::cores();
        Highlighter {
            cache: moka::future::Cache::builder()
                .max_capacity(cache_bytes)
                .weigher(crate::caches::weigh)
                .build(),
            jobs: Arc::new(Semaphore::new(cores)),
            binary: moka::sync::Cache::new(verdicts as u64),
            started: Arc::default(),
        }
    }

    /// [`Highlighter::highlight`] as a task of its own, which goes on (and
    /// fills the cache) when its caller stops waiting for it; `None` when
    /// [`MAX_STARTED`] are already going.
    pub fn start(
        &self,
        id: ObjectId,
        file_name: String,
        text: String,
    ) -> Option<tokio::task::JoinHandle<Arc<Highlighted>>> {
        use std::sync::atomic::Ordering::Relaxed;
        let taken = self
            .started
            .fetch_update(Relaxed, Relaxed, |n| (n < MAX_STARTED).then_some(n + 1));
        taken.ok()?;
        let this = self.clone();
        Some(tokio::spawn(async move {
            let done = this.highlight(id, &file_name, text).await;
            this.started.fetch_sub(1, Relaxed);
            done
        }))
    }

    /// A cached rendering, without touching the blob.
    pub async fn cached(&self, id: ObjectId, file_name: &str) -> Option<Arc<Highlighted>> {
        self.cache.get(&(id, file_name.to_string())).await
    }

    /// Whether a blob was found binary (remembered: its id names its
    /// content), without touching the blob.
    pub fn binary_verdict(&self, id: ObjectId) -> Option<bool> {
        self.binary.get(&id)
    }

    pub fn remember_binary(&self, id: ObjectId, binary: bool) {
        self.binary.insert(id, binary);
    }

    /// The lines of `text` (blob `id`, named `file_name`) as HTML.
    pub async fn highlight(&self, id: ObjectId, file_name: &str, text: String) -> Arc<Highlighted> {
        let key = (id, file_name.to_string());
        let name = file_name.to_string();
        let jobs = self.jobs.clone();
        let computed = self
            .cache
            .try_get_with(key, async move {
                match tokio::time::timeout(JOB_WAIT, jobs.acquire_owned()).await {
                    Ok(Ok(permit)) => {
                        let rendered = vole_http::spawn_blocking(move || {
                            let _permit = permit;
                            render(&name, &text, TIME_BUDGET)
                        })
                        .await;
                        match rendered {
                            Ok(rendered) => Ok(Arc::new(rendered)),
                            // A panic in the highlighter: nothing shown
                            // now, nothing remembered.
                            Err(_) => Err(NotKept(Arc::new(plain_of_nothing()))),
                        }
                    }
                    // Every job slot busy: plain now, highlighted later.
                    _ => Err(NotKept(Arc::new(Highlighted {
                        lines: text.lines().map(escape).collect(),
                        over_budget: true,
                    }))),
                }
            })
            .await;
        computed.unwrap_or_else(|not_kept| not_kept.0.clone())
    }

    /// Bytes the cache holds, its pending inserts and evictions applied
    /// first (moka counts them in its maintenance, not as they happen).
    pub async fn cached_bytes(&self) -> usize {
        self.cache.run_pending_tasks().await;
        usize::try_from(self.cache.weighted_size()).unwrap_or(usize::MAX)
    }
}

fn plain_of_nothing() -> Highlighted {
    Highlighted {
        lines: Vec::new(),
        over_budget: true,
    }
}

/// `text` as lines of HTML: highlighted spans when the language is known
/// (by file name, else by first line) and highlighting stays within its
/// bounds (output, `budget` of time), escaped text otherwise.
fn render(file_name: &str, text: &str, budget: Duration) -> Highlighted {
    let plain = |over_budget| Highlighted {
        lines: text.lines().map(escape).collect(),
        over_budget,
    };
    // Loading the syntax set happens once per process: not this file's
    // work, so not on its clock.
    let set = syntaxes();
    let started = Instant::now();
    let extension = file_name.rsplit('.').next().unwrap_or_default();
    let syntax = set
        .find_syntax_by_extension(file_name)
        .or_else(|| set.find_syntax_by_extension(extension))
        .or_else(|| set.find_syntax_by_first_line(text.lines().next().unwrap_or_default()));
    let Some(syntax) = syntax.filter(|s| s.name != "Plain Text") else {
        return plain(false);
    };
    // The time budget is checked between lines: a very long line
    // (minified code) is shown plain instead of parsed in one go.
    if text.lines().any(|line| line.len() > MAX_HIGHLIGHTED_LINE) {
        return plain(true);
    }
    let mut generator = ClassedHTMLGenerator::new_with_class_style(syntax, set, CLASS_STYLE);
    for line in LinesWithEndings::from(text) {
        if started.elapsed() > budget {
            return plain(true);
        }
        if generator
            .parse_html_for_line_which_includes_newline(line)
            .is_err()
        {
            return plain(false);
        }
    }
    let limit = text.len().saturating_mul(MAX_OUTPUT_FACTOR) + OUTPUT_SLACK;
    match split_lines(&generator.finalize(), limit, started + budget) {
        Some(lines) => Highlighted {
            lines,
            over_budget: false,
        },
        None => plain(true),
    }
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
/// them again on the next line, so each line stands alone in its table row;
/// `None` once the lines would exceed `limit` bytes or `deadline` passes.
fn split_lines(html: &str, limit: usize, deadline: Instant) -> Option<Vec<String>> {
    let mut lines = Vec::new();
    let mut total = 0usize;
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
            total += line.len();
            if total > limit || (lines.len() % 256 == 0 && Instant::now() > deadline) {
                return None;
            }
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
        if total + line.len() > limit {
            return None;
        }
        lines.push(line);
    }
    Some(lines)
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
        let rendered = render("main.rs", source, TIME_BUDGET);
        assert!(!rendered.over_budget);
        let lines = rendered.lines;
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
        let lines = render(
            "notes.unknownext",
            "<script>x</script>\nsecond",
            TIME_BUDGET,
        )
        .lines;
        assert_eq!(lines, vec!["&lt;script&gt;x&lt;/script&gt;", "second"]);
    }

    #[test]
    fn ordinary_code_is_highlighted_within_the_output_bound() {
        // vole's own Rust and a template: real files, not a sample line.
        for (name, text) in [
            ("diff.rs", include_str!("diff.rs")),
            ("lib.rs", include_str!("lib.rs")),
            ("commit.html", include_str!("../templates/commit.html")),
        ] {
            let rendered = render(name, text, Duration::from_secs(30));
            assert!(
                !rendered.over_budget,
                "{name} was shown plain: its highlighting is over the output bound"
            );
            assert!(rendered.lines.iter().any(|l| l.contains("class=\"hl-")));
        }
    }

    #[test]
    fn deep_nesting_is_shown_plain_within_the_output_bound() {
        // 20,000 `[` then 20,000 newlines: highlighted, every line would
        // re-open thousands of spans.
        let text = format!("{}{}", "[".repeat(20_000), "\n".repeat(20_000));
        let rendered = render("deep.json", &text, TIME_BUDGET);
        let bytes: usize = rendered.lines.iter().map(String::len).sum();
        assert!(rendered.over_budget, "deep nesting must fall back to plain");
        assert!(
            bytes <= text.len() * MAX_OUTPUT_FACTOR + OUTPUT_SLACK,
            "{bytes} bytes of HTML for {} bytes of text",
            text.len()
        );
        // And the time budget holds too: no budget at all is plain at once.
        let started = Instant::now();
        let rendered = render("main.rs", &"fn f() {}\n".repeat(1000), Duration::ZERO);
        assert!(rendered.over_budget);
        assert!(started.elapsed() < Duration::from_secs(1));
        // One line of 512 KiB (minified code): plain, not parsed whole.
        let minified = format!("{}\n", "[1,".repeat(170_000));
        let started = Instant::now();
        assert!(render("app.js", &minified, TIME_BUDGET).over_budget);
        assert!(
            started.elapsed() < Duration::from_secs(1),
            "{:?}",
            started.elapsed()
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_misses_compute_once_and_the_result_is_kept() {
        let highlighter = Arc::new(Highlighter::new(1 << 20, 64));
        let id = ObjectId::from_bytes_or_panic(&[7; 20]);
        let text = "fn main() {}\n".repeat(200);
        let views: Vec<_> = (0..8)
            .map(|_| {
                let (highlighter, text) = (highlighter.clone(), text.clone());
                tokio::spawn(async move { highlighter.highlight(id, "main.rs", text).await })
            })
            .collect();
        let mut results = Vec::new();
        for view in views {
            results.push(view.await.unwrap());
        }
        assert!(
            results.iter().all(|r| Arc::ptr_eq(r, &results[0])),
            "eight concurrent misses must share one computation"
        );
        assert!(Arc::ptr_eq(
            &highlighter.cached(id, "main.rs").await.unwrap(),
            &results[0]
        ));
    }
}
