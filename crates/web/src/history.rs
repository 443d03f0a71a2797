//! The web UI's history pages: commit log (for a path too), a commit with
//! its diff, branch and tag lists, the push activity from the ref log, and
//! archive downloads streamed from `git archive`.

use std::sync::Arc;

use askama::Template;
use axum::extract::{Path, State};
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use vole_access::ResolvedRepo;
use vole_http::RepoAccess;
use vole_http::repo_access::Read;

use super::WebState;
use std::collections::HashMap;

use super::diff::{FileDiff, Kind};
use super::read::{self, CommitDetail, LogEntry};
use super::{AppError, blocking, filters, render, segments};
use crate::caches::{CommitKey, LogKey, Weigh};
use vole_http::page::WebPage;
use vole_stdx::page::Pagination;

const COMMITS_PER_PAGE: u32 = 50;

// History is immutable once named by a commit id: a log page (commit,
// path, page) and a commit's detail are cached by id (`WebCaches::log`
// and `commits`, bounded by bytes: a page of history can be a megabyte).
// Each key starts with the repo's incarnation: what git reads is the
// repo's own objects (and attributes), so one repo's pages never answer
// for another's, nor for a repo created again under the name.

impl Weigh for LogEntry {
    fn weight(&self) -> usize {
        self.id.weight() + self.summary.weight() + self.author.weight() + self.time.weight()
    }
}

impl Weigh for (Vec<LogEntry>, bool) {
    fn weight(&self) -> usize {
        self.0.weight()
    }
}

impl Weigh for LogKey {
    fn weight(&self) -> usize {
        self.0.weight() + self.2.weight() + std::mem::size_of::<LogKey>()
    }
}

impl Weigh for CommitKey {
    fn weight(&self) -> usize {
        self.0.weight() + std::mem::size_of::<CommitKey>()
    }
}

impl Weigh for read::FileChange {
    fn weight(&self) -> usize {
        self.status.weight()
            + self.path.weight()
            + self.old_path.as_ref().map_or(0, Weigh::weight)
            + self.added.weight()
            + self.removed.weight()
    }
}

impl Weigh for CommitDetail {
    fn weight(&self) -> usize {
        self.id.weight()
            + self.parents.weight()
            + self.author.weight()
            + self.time.weight()
            + self.message.weight()
            + self.files.weight()
            + self.diffs.weight()
    }
}

#[derive(Template)]
#[template(path = "log.html")]
struct LogPage {
    repo: String,
    rev: String,
    path: String,
    entries: Vec<LogEntry>,
    prev_page: Option<usize>,
    next_page: Option<usize>,
}

/// `GET /{owner}/{repo}/-/commits/{rev}?page=`.
pub async fn log_root(
    State(app): State<Arc<WebState>>,
    RepoAccess { repo: name, .. }: RepoAccess<Read>,
    Path((_, _, rev)): Path<(String, String, String)>,
    WebPage(page): WebPage<COMMITS_PER_PAGE>,
) -> Result<Response, AppError> {
    log_page(app, name, rev, String::new(), page).await
}

/// `GET /{owner}/{repo}/-/commits/{rev}/{*path}?page=`: commits touching
/// a path.
pub async fn log_path(
    State(app): State<Arc<WebState>>,
    RepoAccess { repo: name, .. }: RepoAccess<Read>,
    Path((_, _, rev, path)): Path<(String, String, String, String)>,
    WebPage(page): WebPage<COMMITS_PER_PAGE>,
) -> Result<Response, AppError> {
    log_page(app, name, rev, path, page).await
}

async fn log_page(
    app: Arc<WebState>,
    name: ResolvedRepo,
    rev: String,
    path: String,
    page: Pagination,
) -> Result<Response, AppError> {
    let parts = segments(&path)?;
    let repo_path = app.repos.path(&name);
    let incarnation = name.incarnation_id().to_string();
    let rev_for_read = rev.clone();
    // One hop resolves and looks in the cache; only a miss runs git, in a
    // second hop under a read slot.
    let looked = {
        let repo_path = repo_path.clone();
        let incarnation = incarnation.clone();
        let cache = app.caches.log.clone();
        let gix = app.gix.clone();
        blocking(move || {
            let repo = read::open(&gix, &repo_path, &incarnation)?;
            let (rev, parts) = read::split_rev(&repo, &rev_for_read, &parts)?;
            let Some(commit) = read::resolve(&repo, &rev)? else {
                return Ok(None);
            };
            let key = (incarnation, commit, parts, page.page());
            let hit = cache.get(&key);
            Ok(Some((key, hit)))
        })
        .await?
    };
    let found = match looked {
        None => None,
        Some((_, Some(hit))) => Some(hit),
        Some((key, None)) => {
            let slot = app.reads.acquire().await?;
            let git = app.git.clone();
            let deadline = app.config.reads.deadline;
            let found = blocking(move || {
                let _slot = slot;
                read::log(
                    &git,
                    &repo_path,
                    key.1,
                    &key.2,
                    page.offset(),
                    page.per_page(),
                    deadline,
                )
                .map(|found| (key, Arc::new(found)))
            })
            .await?;
            app.caches.log.insert(found.0, found.1.clone());
            Some(found.1)
        }
    };
    let Some(found) = found else {
        return Err(AppError::not_found(format!(
            "{name} has no branch, tag or commit {rev:?}."
        )));
    };
    let (entries, more) = (found.0.clone(), found.1);
    render(LogPage {
        repo: name.to_string(),
        rev,
        path,
        entries,
        prev_page: page.prev(),
        next_page: page.next().filter(|_| more),
    })
}

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
struct Row {
    class: &'static str,
    old: String,
    new: String,
    /// The line's text as HTML (highlighted or escaped).
    html: String,
}

enum Body {
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

struct FileView {
    anchor: String,
    file: read::FileChange,
    mode_change: Option<String>,
    body: Body,
    cut: bool,
}

#[derive(Template)]
#[template(path = "commit.html")]
struct CommitPage {
    repo: String,
    rev: String,
    summary: String,
    body: String,
    detail: Arc<CommitDetail>,
    files: Vec<FileView>,
}

/// `GET /{owner}/{repo}/-/commit/{id}`: message, changed files with added
/// and removed line counts (renames shown as such), and each file's diff
/// against the first parent, highlighted; `{id}.patch` is the raw patch.
pub async fn commit(
    State(app): State<Arc<WebState>>,
    RepoAccess { repo: name, .. }: RepoAccess<Read>,
    Path((_, _, id)): Path<(String, String, String)>,
) -> Result<Response, AppError> {
    if let Some(stripped) = id.strip_suffix(".patch") {
        // `X.patch` is X's raw patch, unless a branch or tag is named
        // `X.patch` itself.
        let (repo_path, full) = (app.repos.path(&name), id.clone());
        let incarnation = name.incarnation_id().to_string();
        let gix = app.gix.clone();
        let names_a_rev = blocking(move || {
            Ok(read::resolve(&read::open(&gix, &repo_path, &incarnation)?, &full)?.is_some())
        })
        .await?;
        if !names_a_rev {
            return raw_patch(app, name, stripped.to_string()).await;
        }
    }
    let repo_path = app.repos.path(&name);
    let incarnation = name.incarnation_id().to_string();
    let rev = id.clone();
    let looked = {
        let repo_path = repo_path.clone();
        let incarnation = incarnation.clone();
        let cache = app.caches.commits.clone();
        let gix = app.gix.clone();
        blocking(move || {
            let repo = read::open(&gix, &repo_path, &incarnation)?;
            let Some(commit) = read::resolve(&repo, &rev)? else {
                return Ok(None);
            };
            Ok(Some((commit, cache.get(&(incarnation, commit)))))
        })
        .await?
    };
    let (commit, detail) = match looked {
        None => None,
        Some((commit, Some(hit))) => Some((commit, hit)),
        Some((commit, None)) => {
            let slot = app.reads.acquire().await?;
            let git = app.git.clone();
            let deadline = app.config.reads.deadline;
            let detail = blocking(move || {
                let _slot = slot;
                read::commit_detail(&git, &repo_path, commit, deadline).map(Arc::new)
            })
            .await?;
            app.caches
                .commits
                .insert((name.incarnation_id().to_string(), commit), detail.clone());
            Some((commit, detail))
        }
    }
    .ok_or_else(|| AppError::not_found(format!("{name} has no commit {id:?}.")))?;
    let (summary, body) = match detail.message.split_once('\n') {
        Some((summary, body)) => (summary.to_string(), body.trim().to_string()),
        None => (detail.message.clone(), String::new()),
    };
    let files = file_views(&app, name.incarnation_id(), commit, &detail).await;
    render(CommitPage {
        repo: name.to_string(),
        rev: detail.id.clone(),
        summary,
        body,
        detail,
        files,
    })
}

/// Each changed file with its diff as the page draws it: highlighted
/// (cached by the repo's incarnation, commit and path: the diff is git's
/// in that repo), collapsed when long, not drawn when large or binary.
async fn file_views(
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
                // Each side is highlighted as its own text (the old file's
                // context and removed lines, the new file's context and
                // added lines), so a removed line opening a comment does
                // not colour the added lines after it.
                let side = |old: bool| {
                    diff.lines
                        .iter()
                        .filter(|l| on_side(l.kind, old))
                        .map(|l| l.text.as_str())
                        .collect::<Vec<&str>>()
                        .join("\n")
                };
                let mut sides = Vec::with_capacity(2);
                for (old, prefix) in [(true, "old:"), (false, "new:")] {
                    // The prefix keeps the two apart in the cache; the
                    // language still comes from the path's extension.
                    let key = format!("{incarnation}\0{prefix}{}", file.path);
                    sides.push(match app.highlighter.cached(commit, &key).await {
                        Some(hit) => Some(hit),
                        None if started.elapsed() < PAGE_HIGHLIGHT_BUDGET && !diff.cut => {
                            Some(app.highlighter.highlight(commit, &key, side(old)).await)
                        }
                        None => None,
                    });
                }
                let (mut old_index, mut new_index) = (0, 0);
                let rows = diff
                    .lines
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
                                .unwrap_or_else(|| super::highlight::escape(&line.text));
                            *index += 1;
                            if line.kind == Kind::Context {
                                old_index += 1;
                            }
                            html
                        } else {
                            super::highlight::escape(&line.text)
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
                    .collect();
                rows_left -= diff.lines.len();
                Body::Lines {
                    rows,
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

/// `GET /{owner}/{repo}/-/commit/{id}.patch`: the commit as a mail with
/// its patch against the first parent (`git show --format=email`),
/// streamed under a read slot with the archive's bounds, as plain text.
async fn raw_patch(
    app: Arc<WebState>,
    name: vole_access::ResolvedRepo,
    id: String,
) -> Result<Response, AppError> {
    let repo_path = app.repos.path(&name);
    let incarnation = name.incarnation_id().to_string();
    let rev = id.clone();
    let gix = app.gix.clone();
    let commit =
        blocking(move || read::resolve(&read::open(&gix, &repo_path, &incarnation)?, &rev))
            .await?
            .ok_or_else(|| AppError::not_found(format!("{name} has no commit {id:?}.")))?;
    let slot = app.reads.acquire().await?;
    let output = app
        .git
        .spawn_reader(
            &app.repos.path(&name),
            &[
                "show",
                "--no-notes",
                "--format=email",
                "--first-parent",
                "-m",
                "-M",
                "--no-color",
                "-p",
                &commit.to_string(),
            ],
        )
        .map_err(|e| AppError::internal("cannot run git show", e))?;
    let limits = &app.config.reads;
    let bounds = vole_http::stream::StreamBounds::of(limits, limits.archive_deadline);
    let mut response =
        vole_http::stream::pumped(output, Some(slot), bounds, "patch").into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    super::blob::inert(headers);
    Ok(response)
}

struct RefRow {
    name: String,
    /// The name as one URL path segment (a `/` in it escaped).
    encoded: String,
    summary: String,
    time: String,
}

#[derive(Template)]
#[template(path = "refs_page.html")]
struct RefsPage {
    repo: String,
    rev: String,
    heading: &'static str,
    rows: Vec<RefRow>,
    prev_page: Option<usize>,
    next_page: Option<usize>,
}

/// Branches or tags a page: each row reads its commit.
const REFS_PER_PAGE: u32 = 50;

/// `GET /{owner}/{repo}/-/branches`.
pub async fn branches(
    State(app): State<Arc<WebState>>,
    RepoAccess { repo: name, .. }: RepoAccess<Read>,
    WebPage(page): WebPage<REFS_PER_PAGE>,
) -> Result<Response, AppError> {
    refs_page(app, name, true, page).await
}

/// `GET /{owner}/{repo}/-/tags`.
pub async fn tags(
    State(app): State<Arc<WebState>>,
    RepoAccess { repo: name, .. }: RepoAccess<Read>,
    WebPage(page): WebPage<REFS_PER_PAGE>,
) -> Result<Response, AppError> {
    refs_page(app, name, false, page).await
}

async fn refs_page(
    app: Arc<WebState>,
    name: ResolvedRepo,
    branches: bool,
    page: Pagination,
) -> Result<Response, AppError> {
    let repo_path = app.repos.path(&name);
    let incarnation = name.incarnation_id().to_string();
    let gix = app.gix.clone();
    let (rows, head, total) = blocking(move || {
        let repo = read::open(&gix, &repo_path, &incarnation)?;
        let refs = read::refs(&repo)?;
        let names = if branches { refs.branches } else { refs.tags };
        let total = names.len();
        let mut rows = Vec::with_capacity(page.per_page());
        for name in page.slice(names) {
            let Some(commit) = read::resolve(&repo, &name)? else {
                continue;
            };
            let info = read::commit(&repo, commit)?;
            rows.push(RefRow {
                encoded: vole_git::tree_path::encode_segments(std::slice::from_ref(&name)),
                name,
                summary: info.summary,
                time: info.time,
            });
        }
        Ok((rows, refs.head, total))
    })
    .await?;
    render(RefsPage {
        repo: name.to_string(),
        rev: head.unwrap_or_else(|| app.config.default_branch.clone()),
        heading: if branches { "Branches" } else { "Tags" },
        rows,
        prev_page: page.prev(),
        next_page: page.next().filter(|&next| next <= page.last(total)),
    })
}

struct ActivityRow {
    actor: String,
    action: &'static str,
    ref_name: String,
    new: String,
    time: String,
}

#[derive(Template)]
#[template(path = "activity.html")]
struct ActivityPage {
    repo: String,
    rev: String,
    rows: Vec<ActivityRow>,
}

/// `GET /{owner}/{repo}/-/activity`: the last ref moves from the ref log.
pub async fn activity(
    State(app): State<Arc<WebState>>,
    RepoAccess { repo: name, .. }: RepoAccess<Read>,
) -> Result<Response, AppError> {
    let (entries, _) = app
        .recorder
        .activity(&name.to_string(), Pagination::first(100));
    let rows = entries
        .into_iter()
        .map(|entry| {
            let m = entry.ref_move;
            let action = m.action();
            ActivityRow {
                actor: m.actor,
                action,
                ref_name: m.ref_name,
                new: m.new.unwrap_or_default(),
                time: vole_stdx::time::nanos_to_seconds(m.time_ns),
            }
        })
        .collect();
    // The tabs' links follow the repo's default branch (HEAD).
    let rev = vole_git::repos::head_branch(&app.repos.path(&name))
        .unwrap_or_else(|| app.config.default_branch.clone());
    render(ActivityPage {
        repo: name.to_string(),
        rev,
        rows,
    })
}

/// `GET /{owner}/{repo}/-/archive/{rev}.tar.gz` or `.zip`: streamed from
/// `git archive` as it is produced, under a read slot, cut at
/// `--archive-deadline` or when the client reads slower than
/// `--min-transfer-rate` (the child is killed then, and when the client
/// goes away).
pub async fn archive(
    State(app): State<Arc<WebState>>,
    RepoAccess { repo: name, .. }: RepoAccess<Read>,
    Path((_, _, file)): Path<(String, String, String)>,
) -> Result<Response, AppError> {
    let (rev, format, content_type) = if let Some(rev) = file.strip_suffix(".tar.gz") {
        (rev.to_string(), "tar.gz", "application/gzip")
    } else if let Some(rev) = file.strip_suffix(".zip") {
        (rev.to_string(), "zip", "application/zip")
    } else {
        return Err(AppError::not_found(
            "Archives are .tar.gz or .zip, e.g. main.tar.gz.",
        ));
    };
    let repo_path = app.repos.path(&name);
    let incarnation = name.incarnation_id().to_string();
    let rev_for_read = rev.clone();
    let gix = app.gix.clone();
    let commit = blocking(move || {
        read::resolve(&read::open(&gix, &repo_path, &incarnation)?, &rev_for_read)
    })
    .await?
    .ok_or_else(|| AppError::not_found(format!("{name} has no branch, tag or commit {rev:?}.")))?;
    let prefix = format!("{}-{}/", name.name(), sanitize(&rev));
    // The slot is held until the archive is sent (or cut).
    let slot = app.reads.acquire().await?;
    let output = app
        .git
        .spawn_reader(
            &app.repos.path(&name),
            &[
                "archive",
                &format!("--format={format}"),
                &format!("--prefix={prefix}"),
                &commit.to_string(),
            ],
        )
        .map_err(|e| AppError::internal("cannot run git archive", e))?;
    let limits = &app.config.reads;
    let bounds = vole_http::stream::StreamBounds::of(limits, limits.archive_deadline);
    let mut response =
        vole_http::stream::pumped(output, Some(slot), bounds, "archive").into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    if let Ok(value) = HeaderValue::from_str(&format!(
        "attachment; filename=\"{}-{}.{format}\"",
        name.name(),
        sanitize(&rev)
    )) {
        headers.insert(header::CONTENT_DISPOSITION, value);
    }
    Ok(response)
}

/// A revision as it may appear in a file name.
fn sanitize(rev: &str) -> String {
    rev.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "._-".contains(c) {
                c
            } else {
                '-'
            }
        })
        .collect()
}
