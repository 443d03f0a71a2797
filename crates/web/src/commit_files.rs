//! Each changed file of a commit as the commit page draws it: its diff
//! highlighted side by side as far as a short wait allows (the rest in
//! the background, for the next view), collapsed when long,
//! not drawn when large, binary or past the page's bounds.

use std::collections::HashMap;
use std::sync::Arc;

use crate::WebState;
use crate::diff::{FileDiff, Kind};
use crate::highlight::Highlighted;
use crate::read::{self, CommitDetail};

/// A file's diff over this many bytes is not drawn: the page links to
/// the raw patch instead.
const LARGE_FILE_DIFF: usize = 128 << 10;
/// A file's diff over this many lines is drawn collapsed (a closed
/// `<details>`, opened without JavaScript).
const COLLAPSED_LINES: usize = 400;
/// Files whose diff a page draws at most; the rest are listed above with
/// their counts and are in the raw patch.
const MAX_FILES_DRAWN: usize = 300;
/// What a drawn row costs beyond its text, in the byte bound above (its
/// table row, line numbers and classes).
const ROW_COST: usize = 96;
/// Rows of diff one page draws at most, all files together; a file
/// that would pass it is not drawn (the raw patch has it).
const MAX_ROWS_DRAWN: usize = 20_000;
/// How long a page waits for its diffs' highlighting, all sides
/// together (they are highlighted in parallel, on the highlighter's job
/// slots): a side not done by then is drawn plain, and goes on being
/// highlighted in the background into the cache, for the next view. A
/// first view after a push costs its git work and this, not the
/// highlighting of every file.
const HIGHLIGHT_WAIT: std::time::Duration = std::time::Duration::from_millis(2);
/// Sides one page starts highlighting, at most; the rest are drawn plain
/// (a later view starts them).
const MAX_SIDES_STARTED: usize = 64;

/// One row of a file's diff.
pub(crate) struct Row {
    pub(crate) class: &'static str,
    pub(crate) old: String,
    pub(crate) new: String,
    /// The line's text as HTML (highlighted or escaped).
    pub(crate) html: String,
}

pub(crate) enum Body {
    Lines {
        rows: Vec<Row>,
        open: bool,
    },
    Binary,
    /// A change of mode or an empty file: no lines.
    NoLines,
    Large {
        lines: usize,
    },
    /// The patch was cut before this file, or the page draws no more.
    NotShown,
}

pub(crate) struct FileView {
    pub(crate) anchor: String,
    pub(crate) file: read::FileChange,
    pub(crate) mode_change: Option<String>,
    pub(crate) body: Body,
    pub(crate) cut: bool,
}

/// Each changed file with its diff as the page draws it: highlighted
/// (cached by the repo's incarnation, commit and path: the diff is git's
/// in that repo) as far as [`HIGHLIGHT_WAIT`] allows, collapsed when
/// long, not drawn when large or binary.
pub(crate) async fn file_views(
    app: &WebState,
    incarnation: &str,
    commit: gix::ObjectId,
    detail: &CommitDetail,
) -> Vec<FileView> {
    // A file's part of the patch, found by path: a change of type (a file
    // become a link) is one line of the file list and two parts, its
    // deletion and its creation, drawn as one.
    let mut by_path: HashMap<&str, Vec<&FileDiff>> = HashMap::new();
    for diff in &detail.diffs {
        by_path.entry(diff.path.as_str()).or_default().push(diff);
    }
    let mut rows_left = MAX_ROWS_DRAWN;
    // Each file, its diff, and whether its lines are drawn.
    let mut planned = Vec::with_capacity(detail.files.len());
    for (index, file) in detail.files.iter().enumerate() {
        let parts = by_path
            .get(file.path.as_str())
            .filter(|_| index < MAX_FILES_DRAWN);
        let merged = parts.map(|parts| merge(parts));
        // Bytes of text and rows both cost: a diff of many short lines is
        // as large as one of few long ones.
        let drawn = merged.as_deref().is_some_and(|d| {
            !d.binary
                && !d.lines.is_empty()
                && d.bytes + d.lines.len() * ROW_COST <= LARGE_FILE_DIFF
                && d.lines.len() <= rows_left
        });
        if let (true, Some(diff)) = (drawn, merged.as_deref()) {
            rows_left -= diff.lines.len();
        }
        planned.push((index, file, merged, drawn));
    }
    let mut sides = Sides::default();
    for (_, file, merged, drawn) in &planned {
        if let (true, Some(diff)) = (drawn, merged.as_deref()) {
            sides
                .start(app, (incarnation, commit), &file.path, diff)
                .await;
        }
    }
    let mut ready = sides.wait().await.into_iter();
    planned
        .into_iter()
        .map(|(index, file, merged, drawn)| {
            let diff = merged.as_deref();
            let body = match diff {
                None => Body::NotShown,
                Some(diff) if diff.binary => Body::Binary,
                Some(diff) if diff.lines.is_empty() => Body::NoLines,
                Some(diff) if !drawn => Body::Large {
                    lines: diff.lines.len(),
                },
                Some(diff) => Body::Lines {
                    rows: rows(diff, &ready.next().unwrap_or_default()),
                    open: diff.lines.len() <= COLLAPSED_LINES,
                },
            };
            FileView {
                anchor: format!("file-{}", index + 1),
                file: file.clone(),
                mode_change: diff.and_then(|d| d.mode_change.clone()),
                cut: diff.is_some_and(|d| d.cut),
                body,
            }
        })
        .collect()
}

/// One side of a drawn file: highlighted, being highlighted, or plain.
enum Side {
    Ready(Arc<Highlighted>),
    Going(tokio::task::JoinHandle<Arc<Highlighted>>),
    Plain,
}

/// The old and the new side of each drawn file's diff, in the files'
/// order, each highlighted as its own text (the old file's context and
/// removed lines, the new file's context and added lines), so a removed
/// line opening a comment does not colour the added lines after it.
#[derive(Default)]
struct Sides {
    files: Vec<[Side; 2]>,
    started: usize,
}

impl Sides {
    /// Takes `diff`'s sides from the highlighter's cache, or starts them
    /// (when the diff was not cut and the page may start more).
    async fn start(
        &mut self,
        app: &WebState,
        (incarnation, commit): (&str, gix::ObjectId),
        path: &str,
        diff: &FileDiff,
    ) {
        let mut both = [Side::Plain, Side::Plain];
        for (slot, (old, prefix)) in both.iter_mut().zip([(true, "old:"), (false, "new:")]) {
            // The prefix keeps the two apart in the cache; the language
            // still comes from the path's extension.
            let key = format!("{incarnation}\0{prefix}{path}");
            if let Some(hit) = app.highlighter.cached(commit, &key).await {
                *slot = Side::Ready(hit);
            } else if !diff.cut && self.started < MAX_SIDES_STARTED {
                let text = diff
                    .lines
                    .iter()
                    .filter(|l| on_side(l.kind, old))
                    .map(|l| l.text.as_str())
                    .collect::<Vec<&str>>()
                    .join("\n");
                if let Some(going) = app.highlighter.start(commit, key, text) {
                    self.started += 1;
                    *slot = Side::Going(going);
                }
            }
        }
        self.files.push(both);
    }

    /// Each file's sides as far as they are highlighted when
    /// [`HIGHLIGHT_WAIT`] has passed (the rest go on without the page).
    async fn wait(self) -> Vec<[Option<Arc<Highlighted>>; 2]> {
        let deadline = tokio::time::Instant::now() + HIGHLIGHT_WAIT;
        let mut out = Vec::with_capacity(self.files.len());
        for both in self.files {
            let mut done = [None, None];
            for (slot, side) in done.iter_mut().zip(both) {
                *slot = match side {
                    Side::Ready(hit) => Some(hit),
                    Side::Going(mut going) => tokio::time::timeout_at(deadline, &mut going)
                        .await
                        .ok()
                        .and_then(Result::ok),
                    Side::Plain => None,
                };
            }
            out.push(done);
        }
        out
    }
}

/// A file's diff as the page's rows: each line numbered on its sides,
/// its text as highlighted HTML where a side was highlighted, escaped
/// otherwise.
fn rows(diff: &FileDiff, sides: &[Option<Arc<Highlighted>>; 2]) -> Vec<Row> {
    let (mut old_index, mut new_index) = (0, 0);
    diff.lines
        .iter()
        .map(|line| {
            let (highlighted, index) = match line.kind {
                Kind::Removed => (&sides[0], &mut old_index),
                _ => (&sides[1], &mut new_index),
            };
            let html = if is_code(line.kind) {
                let html = highlighted
                    .as_ref()
                    .and_then(|h| h.lines.get(*index).cloned())
                    .unwrap_or_else(|| crate::highlight::escape(&line.text));
                *index += 1;
                if line.kind == Kind::Context {
                    old_index += 1;
                }
                html
            } else {
                crate::highlight::escape(&line.text)
            };
            let number = |n: u32| if n == 0 { String::new() } else { n.to_string() };
            Row {
                class: match line.kind {
                    Kind::Hunk => "hunk",
                    Kind::Added => "add",
                    Kind::Removed => "del",
                    Kind::Context => "ctx",
                    Kind::Note => "note",
                },
                old: number(line.old),
                new: number(line.new),
                html,
            }
        })
        .collect()
}

/// A file's parts of the patch as one (usually there is one).
fn merge<'a>(parts: &[&'a FileDiff]) -> std::borrow::Cow<'a, FileDiff> {
    if let [one] = parts {
        return std::borrow::Cow::Borrowed(*one);
    }
    let mut merged = parts[0].clone();
    for part in &parts[1..] {
        merged.lines.extend(part.lines.iter().cloned());
        merged.bytes += part.bytes;
        merged.binary |= part.binary;
        merged.cut |= part.cut;
        merged.mode_change = match (merged.mode_change.take(), &part.mode_change) {
            (Some(a), Some(b)) => Some(format!("{a}; {b}")),
            (a, b) => a.or_else(|| b.clone()),
        };
    }
    std::borrow::Cow::Owned(merged)
}

/// Whether a line is in the old file's text (`old`) or the new one's.
fn on_side(kind: Kind, old: bool) -> bool {
    match kind {
        Kind::Context => true,
        Kind::Removed => old,
        Kind::Added => !old,
        Kind::Hunk | Kind::Note => false,
    }
}

fn is_code(kind: Kind) -> bool {
    matches!(kind, Kind::Context | Kind::Added | Kind::Removed)
}
