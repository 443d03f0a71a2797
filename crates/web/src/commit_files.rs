//! Each changed file of a commit as the commit page draws it: its diff
//! highlighted side by side within a page budget, collapsed when long,
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
/// Time one commit page spends highlighting its diffs, at most; files
/// after it are drawn plain (and highlighted on a later view).
const PAGE_HIGHLIGHT_BUDGET: std::time::Duration = std::time::Duration::from_secs(2);

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
/// in that repo), collapsed when long, not drawn when large or binary.
pub(crate) async fn file_views(
    app: &WebState,
    incarnation: &str,
    commit: gix::ObjectId,
    detail: &CommitDetail,
) -> Vec<FileView> {
    let started = std::time::Instant::now();
    // A file's part of the patch, found by path: a change of type (a file
    // become a link) is one line of the file list and two parts, its
    // deletion and its creation, drawn as one.
    let mut by_path: HashMap<&str, Vec<&FileDiff>> = HashMap::new();
    for diff in &detail.diffs {
        by_path.entry(diff.path.as_str()).or_default().push(diff);
    }
    let mut rows_left = MAX_ROWS_DRAWN;
    let mut views = Vec::with_capacity(detail.files.len());
    for (index, file) in detail.files.iter().enumerate() {
        let parts = by_path
            .get(file.path.as_str())
            .filter(|_| index < MAX_FILES_DRAWN);
        let merged = parts.map(|parts| merge(parts));
        let diff = merged.as_deref();
        let body = match diff {
            None => Body::NotShown,
            Some(diff) if diff.binary => Body::Binary,
            Some(diff) if diff.lines.is_empty() => Body::NoLines,
            // Bytes of text and rows both cost: a diff of many short
            // lines is as large as one of few long ones.
            Some(diff)
                if diff.bytes + diff.lines.len() * ROW_COST > LARGE_FILE_DIFF
                    || diff.lines.len() > rows_left =>
            {
                Body::Large {
                    lines: diff.lines.len(),
                }
            }
            Some(diff) => {
                let sides =
                    highlighted_sides(app, incarnation, commit, &file.path, diff, started).await;
                rows_left -= diff.lines.len();
                Body::Lines {
                    rows: rows(diff, &sides),
                    open: diff.lines.len() <= COLLAPSED_LINES,
                }
            }
        };
        views.push(FileView {
            anchor: format!("file-{}", index + 1),
            file: file.clone(),
            mode_change: diff.and_then(|d| d.mode_change.clone()),
            cut: diff.is_some_and(|d| d.cut),
            body,
        });
    }
    views
}

/// The old and the new side of a file's diff, highlighted: each side as
/// its own text (the old file's context and removed lines, the new
/// file's context and added lines), so a removed line opening a comment
/// does not colour the added lines after it. A side is taken from the
/// highlighter's cache, or highlighted if the page's budget (counted from
/// `started`) allows and the diff was not cut, or left plain (`None`).
async fn highlighted_sides(
    app: &WebState,
    incarnation: &str,
    commit: gix::ObjectId,
    path: &str,
    diff: &FileDiff,
    started: std::time::Instant,
) -> [Option<Arc<Highlighted>>; 2] {
    let side = |old: bool| {
        diff.lines
            .iter()
            .filter(|l| on_side(l.kind, old))
            .map(|l| l.text.as_str())
            .collect::<Vec<&str>>()
            .join("\n")
    };
    let mut sides = [None, None];
    for (slot, (old, prefix)) in sides.iter_mut().zip([(true, "old:"), (false, "new:")]) {
        // The prefix keeps the two apart in the cache; the language still
        // comes from the path's extension.
        let key = format!("{incarnation}\0{prefix}{path}");
        *slot = match app.highlighter.cached(commit, &key).await {
            Some(hit) => Some(hit),
            None if started.elapsed() < PAGE_HIGHLIGHT_BUDGET && !diff.cut => {
                Some(app.highlighter.highlight(commit, &key, side(old)).await)
            }
            None => None,
        };
    }
    sides
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
