//! What the web UI reads from a repo, through gix: refs, a revision's
//! commit, the tree or blob at a path. Blocking calls, made from
//! `spawn_blocking`; nothing here writes.

use std::path::Path;

use gix::ObjectId;
use gix::bstr::ByteSlice;

use vole_git::Lookup;

/// What a read of the repo failed with.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// gix's error (the one type its reads give).
    #[error(transparent)]
    Gix(#[from] gix::Error),
    /// A git child failed, or ran past its deadline.
    #[error(transparent)]
    Git(#[from] vole_git::BoundedError),
    /// The repo on disk is not the one the request was decided for
    /// (deleted, or created again under its name meanwhile).
    #[error("the repository was deleted or replaced while the request ran")]
    Replaced,
}

/// Blobs up to this size are read in-process (gix inflates one whole);
/// larger ones through a `git cat-file` child cut at the bytes wanted, so
/// no view holds more of a blob than it shows.
pub const IN_PROCESS_BLOB: u64 = 1 << 20;

/// The first `limit` bytes of blob `id` (`size` bytes long), and whether
/// the blob holds more. A child is used above [`IN_PROCESS_BLOB`]; the
/// caller holds a read slot for it.
pub fn blob_prefix(
    git: &vole_git::Git,
    repo_path: &Path,
    repo: &gix::Repository,
    id: ObjectId,
    size: u64,
    limit: usize,
    deadline: std::time::Duration,
) -> Result<(Vec<u8>, bool), ReadError> {
    if size <= IN_PROCESS_BLOB {
        let mut data = repo.find_blob(id)?.take_data();
        let more = data.len() > limit;
        data.truncate(limit);
        return Ok((data, more));
    }
    let out = git.run_bounded(
        repo_path,
        &["cat-file", "blob", &id.to_string()],
        vole_git::Bounds {
            max_output: limit,
            deadline,
        },
    )?;
    Ok((out.stdout, out.truncated || size > limit as u64))
}

/// Branches and tags (short names, sorted) and the branch HEAD names.
pub struct Refs {
    pub branches: Vec<String>,
    pub tags: Vec<String>,
    pub head: Option<String>,
}

/// A handle on the repo at `path` of incarnation `incarnation` (see
/// [`vole_git::GixHandles`]).
pub fn open(
    handles: &vole_git::GixHandles,
    path: &Path,
    incarnation: &str,
) -> Result<gix::Repository, ReadError> {
    handles.open(path, incarnation)?.ok_or(ReadError::Replaced)
}

pub fn refs(repo: &gix::Repository) -> Result<Refs, ReadError> {
    let mut branches = Vec::new();
    let mut tags = Vec::new();
    let platform = repo.references()?;
    for reference in platform.all()? {
        let reference = reference?;
        let name = reference.name().as_bstr().to_str_lossy().into_owned();
        if let Some(branch) = name.strip_prefix("refs/heads/") {
            branches.push(branch.to_string());
        } else if let Some(tag) = name.strip_prefix("refs/tags/") {
            tags.push(tag.to_string());
        }
    }
    branches.sort();
    tags.sort();
    let head = repo
        .head_name()?
        .map(|name| name.shorten().to_str_lossy().into_owned());
    Ok(Refs {
        branches,
        tags,
        head,
    })
}

/// The commit a revision names: a branch, a tag, or a full commit id
/// ([`vole_git::revision::resolve`]).
pub fn resolve(repo: &gix::Repository, rev: &str) -> Result<Option<ObjectId>, ReadError> {
    Ok(vole_git::revision::resolve(repo, rev)?)
}

/// Splits a URL's `rev/path...` where the branch or tag name itself has
/// slashes (`feature/x`): the longest `rev/seg...` that names a branch or a
/// tag wins; otherwise `rev` stands alone.
pub fn split_rev(
    repo: &gix::Repository,
    rev: &str,
    path: &[String],
) -> Result<(String, Vec<String>), ReadError> {
    for k in (1..=path.len()).rev() {
        let candidate = format!("{rev}/{}", path[..k].join("/"));
        for prefix in ["refs/heads/", "refs/tags/"] {
            if vole_git::revision::find_ref(repo, &format!("{prefix}{candidate}"))?.is_some() {
                return Ok((candidate, path[k..].to_vec()));
            }
        }
    }
    Ok((rev.to_string(), path.to_vec()))
}

pub struct CommitInfo {
    pub id: String,
    pub summary: String,
    pub author: String,
    pub time: String,
    pub tree: ObjectId,
}

pub fn commit(repo: &gix::Repository, id: ObjectId) -> Result<CommitInfo, ReadError> {
    let commit = repo.find_commit(id)?;
    let message = commit.message_raw()?.to_str_lossy().into_owned();
    let summary = message.lines().next().unwrap_or_default().to_string();
    let author = commit.author()?;
    let seconds = author.time()?.seconds;
    let time = vole_stdx::time::seconds(seconds);
    Ok(CommitInfo {
        id: id.to_string(),
        summary,
        author: author.name.to_str_lossy().into_owned(),
        time,
        tree: commit.tree_id()?.detach(),
    })
}

/// One entry of a tree listing.
#[derive(Clone)]
pub struct TreeEntry {
    /// The name for people (invalid UTF-8 replaced).
    pub name: String,
    /// The name as the tree holds it.
    pub raw_name: gix::bstr::BString,
    pub kind: EntryKind,
    pub id: ObjectId,
}

#[derive(Clone, Copy, PartialEq, Eq)]
pub enum EntryKind {
    Dir,
    File,
    Link,
    Submodule,
}

pub enum Node {
    Tree(Vec<TreeEntry>),
    Blob { id: ObjectId, size: u64 },
    Missing,
}

/// Follows `segments` from `tree`; a listing has directories first.
pub fn lookup(
    repo: &gix::Repository,
    tree: ObjectId,
    segments: &[String],
) -> Result<Node, ReadError> {
    let current = match vole_git::lookup(repo, tree, segments)? {
        Lookup::Dir(id) => id,
        Lookup::File { id, size } => return Ok(Node::Blob { id, size }),
        Lookup::Missing => return Ok(Node::Missing),
    };
    let tree = repo.find_tree(current)?;
    let mut entries: Vec<TreeEntry> = tree
        .decode()?
        .entries
        .iter()
        .map(|e| TreeEntry {
            name: e.filename.to_str_lossy().into_owned(),
            raw_name: e.filename.to_owned(),
            kind: if e.mode.is_tree() {
                EntryKind::Dir
            } else if e.mode.is_link() {
                EntryKind::Link
            } else if e.mode.is_commit() {
                EntryKind::Submodule
            } else {
                EntryKind::File
            },
            id: e.oid.to_owned(),
        })
        .collect();
    entries.sort_by(|a, b| {
        (a.kind != EntryKind::Dir, a.name.as_str())
            .cmp(&(b.kind != EntryKind::Dir, b.name.as_str()))
    });
    Ok(Node::Tree(entries))
}

pub fn blob(repo: &gix::Repository, id: ObjectId) -> Result<Vec<u8>, ReadError> {
    Ok(repo.find_blob(id)?.take_data())
}

// ---- history, through the git CLI ----------------------------------------
//
// Commit history and diffs come from `git log` / `git show` (rename
// detection and diff output exactly as git computes them); everything above
// reads objects in-process.

/// One commit of a log page.
#[derive(Clone)]
pub struct LogEntry {
    pub id: String,
    pub summary: String,
    pub author: String,
    pub time: String,
}

/// A history command's output, cut at `max_output` bytes (the bool says
/// it was), killed at `deadline`.
pub(crate) fn run_git(
    git: &vole_git::Git,
    repo: &Path,
    args: &[&str],
    max_output: usize,
    deadline: std::time::Duration,
) -> Result<(String, bool), ReadError> {
    let out = git.run_bounded(
        repo,
        args,
        vole_git::Bounds {
            max_output,
            deadline,
        },
    )?;
    Ok((
        String::from_utf8_lossy(&out.stdout).into_owned(),
        out.truncated,
    ))
}

/// Most bytes of a log page's `git log` output (50 commits of subjects).
pub(crate) const MAX_LOG_BYTES: usize = 1 << 20;
/// Most bytes of a commit's file list (`--name-status` or `--numstat`).
const MAX_FILE_LIST_BYTES: usize = 4 << 20;

fn format_time(seconds: &str) -> String {
    vole_stdx::time::seconds(seconds.trim().parse().unwrap_or(0))
}

/// The `--format` of a log page's `git log`: id, author, time, subject.
pub(crate) const LOG_FORMAT: &str = "--format=%H%x00%an%x00%at%x00%s";

/// Up to `limit` commits reachable from `commit`, after skipping `skip`,
/// touching `path` when given; the bool says whether more follow.
pub fn log(
    git: &vole_git::Git,
    repo: &Path,
    commit: ObjectId,
    path: &[String],
    skip: usize,
    limit: usize,
    deadline: std::time::Duration,
) -> Result<(Vec<LogEntry>, bool), ReadError> {
    let count = format!("-n{}", limit + 1);
    let skip = format!("--skip={skip}");
    let commit = commit.to_string();
    let joined = path.join("/");
    let mut args = vec![
        "log",
        LOG_FORMAT,
        count.as_str(),
        skip.as_str(),
        commit.as_str(),
        "--",
    ];
    if !joined.is_empty() {
        args.push(joined.as_str());
    }
    let (out, _) = run_git(git, repo, &args, MAX_LOG_BYTES, deadline)?;
    Ok(log_entries(&out, limit))
}

/// `git log` output in [`LOG_FORMAT`] as entries, at most `limit`; the
/// bool says whether more were printed (ask for `limit + 1`).
pub(crate) fn log_entries(out: &str, limit: usize) -> (Vec<LogEntry>, bool) {
    let mut entries: Vec<LogEntry> = out
        .lines()
        .filter_map(|line| {
            let mut parts = line.splitn(4, '\0');
            Some(LogEntry {
                id: parts.next()?.to_string(),
                author: parts.next()?.to_string(),
                time: format_time(parts.next()?),
                summary: parts.next().unwrap_or_default().to_string(),
            })
        })
        .collect();
    let more = entries.len() > limit;
    entries.truncate(limit);
    (entries, more)
}

/// A file a commit changed.
#[derive(Clone)]
pub struct FileChange {
    pub status: String,
    pub path: String,
    pub old_path: Option<String>,
    pub added: String,
    pub removed: String,
}

#[derive(Clone)]
pub struct CommitDetail {
    pub id: String,
    pub parents: Vec<String>,
    pub author: String,
    pub time: String,
    pub message: String,
    pub files: Vec<FileChange>,
    /// The diff split per file, in the order of `files` (fewer when the
    /// patch was cut at [`MAX_PATCH_BYTES`]).
    pub diffs: Vec<super::diff::FileDiff>,
    pub patch_truncated: bool,
    /// More files changed than [`MAX_FILES_SHOWN`] (or than the file list's
    /// byte bound held).
    pub files_truncated: bool,
}

/// Changed files listed on a commit page at most.
pub const MAX_FILES_SHOWN: usize = 3000;

/// Largest patch text shown on a commit page.
pub const MAX_PATCH_BYTES: usize = 1024 * 1024;

/// A commit with its changed files (renames detected) and its unified diff
/// against its first parent.
pub fn commit_detail(
    git: &vole_git::Git,
    repo: &Path,
    handle: &gix::Repository,
    commit: ObjectId,
    deadline: std::time::Duration,
) -> Result<CommitDetail, ReadError> {
    // One deadline for the page's git runs together.
    let started = std::time::Instant::now();
    let left = || deadline.saturating_sub(started.elapsed());
    let id = commit.to_string();
    // The commit itself, in-process (a git run here was a third of a
    // first view's time): what `git show -s --format=%P %an %at %B` says.
    let found = handle.find_commit(commit)?;
    let parents: Vec<String> = found.parent_ids().map(|p| p.to_string()).collect();
    // An author line gix cannot read is drawn empty, as the page is
    // still worth drawing (git shows what it can of such a commit).
    let signature = found.author().ok();
    let author = signature
        .as_ref()
        .map_or(String::new(), |s| s.name.to_str_lossy().into_owned());
    let seconds = signature
        .and_then(|s| s.time().ok())
        .map_or(0, |t| t.seconds);
    let time = vole_stdx::time::seconds(seconds);
    let raw = found.message_raw()?.to_str_lossy();
    let message = vole_stdx::prefix(raw.trim_end(), MAX_LOG_BYTES).to_string();
    // The change against the first parent (`--first-parent -m`: a merge
    // too), renames detected, in the form `what` asks for.
    let diff = |what: &[&str], max_output| {
        let mut args = vec!["show", "--format=", "-M", "--first-parent", "-m"];
        args.extend_from_slice(what);
        args.push(&id);
        run_git(git, repo, &args, max_output, left())
    };
    let changes = changes(diff)?;
    Ok(CommitDetail {
        id,
        parents,
        author,
        time,
        message,
        files: changes.files,
        diffs: changes.diffs,
        patch_truncated: changes.patch_truncated,
        files_truncated: changes.files_truncated,
    })
}

/// The files a diff changed, with their counts and their patch, each
/// within its bound.
pub struct Changes {
    pub files: Vec<FileChange>,
    pub diffs: Vec<super::diff::FileDiff>,
    pub patch_truncated: bool,
    pub files_truncated: bool,
}

/// What `diff` (a git diff command, given its output options and byte
/// bound) changed: the file list, the counts and the patch, from one git
/// run (`--raw --numstat -z -p`: the records, an empty field, the patch),
/// cut while it streams at the three bounds together. One run, not three:
/// a first view waited for git's start and the repo's opening each time,
/// and on two cores three at once were no faster than one after another.
pub fn changes(
    diff: impl Fn(&[&str], usize) -> Result<(String, bool), ReadError>,
) -> Result<Changes, ReadError> {
    let (output, cut) = diff(
        &["--raw", "--numstat", "-z", "--no-color", "-p"],
        2 * MAX_FILE_LIST_BYTES + MAX_PATCH_BYTES,
    )?;
    let (records, patch) = match output.find("\0\0") {
        Some(at) => (&output[..=at], &output[at + 2..]),
        None => (output.as_str(), ""),
    };
    // Cut before the patch began: the list itself is cut.
    let status_cut = cut && patch.is_empty();
    let patch_truncated = cut || patch.len() > MAX_PATCH_BYTES;
    let patch = vole_stdx::prefix(patch, MAX_PATCH_BYTES);
    let (status, numstat) = split_raw(records);
    let mut files = parse_name_status(&status);
    let files_truncated = status_cut || files.len() > MAX_FILES_SHOWN;
    files.truncate(MAX_FILES_SHOWN);
    let counts = parse_numstat(&numstat);
    for (file, (added, removed)) in files.iter_mut().zip(counts) {
        file.added = added;
        file.removed = removed;
    }
    let diffs = super::diff::split(patch, patch_truncated);
    Ok(Changes {
        files,
        diffs,
        patch_truncated,
        files_truncated,
    })
}

/// `--raw -z` records followed by `--numstat -z` ones (one git run): the
/// raw records as `--name-status -z` gives them (the status, the last
/// word of `:mode mode id id status`, and its one or two paths), and the
/// numstat records after them.
fn split_raw(text: &str) -> (String, String) {
    let mut fields = text.split('\0').peekable();
    let mut status = String::new();
    while let Some(header) = fields.next_if(|f| f.starts_with(':')) {
        let code = header.rsplit(' ').next().unwrap_or_default();
        let paths = if code.starts_with(['R', 'C']) { 2 } else { 1 };
        status.push_str(code);
        status.push('\0');
        for path in fields.by_ref().take(paths) {
            status.push_str(path);
            status.push('\0');
        }
    }
    (status, fields.collect::<Vec<_>>().join("\0"))
}

/// `--name-status -z`: `S\0path\0` or, for renames and copies,
/// `R100\0old\0new\0`.
fn parse_name_status(text: &str) -> Vec<FileChange> {
    let mut fields = text.split('\0').filter(|f| !f.is_empty());
    let mut files = Vec::new();
    while let Some(status) = fields.next() {
        let renamed = status.starts_with('R') || status.starts_with('C');
        let first = fields.next().unwrap_or_default().to_string();
        let (old_path, path) = if renamed {
            (Some(first), fields.next().unwrap_or_default().to_string())
        } else {
            (None, first)
        };
        files.push(FileChange {
            status: status.chars().next().unwrap_or('M').to_string(),
            path,
            old_path,
            added: String::new(),
            removed: String::new(),
        });
    }
    files
}

/// `--numstat -z`: `added\tremoved\tpath\0`, or for a rename
/// `added\tremoved\t\0old\0new\0`; `-` counts for binaries.
fn parse_numstat(text: &str) -> Vec<(String, String)> {
    let mut fields = text.split('\0');
    let mut counts = Vec::new();
    while let Some(field) = fields.next() {
        if field.is_empty() {
            continue;
        }
        let mut parts = field.splitn(3, '\t');
        let added = parts.next().unwrap_or("-").to_string();
        let removed = parts.next().unwrap_or("-").to_string();
        if parts.next().unwrap_or_default().is_empty() {
            // A rename: the two paths follow as their own fields.
            fields.next();
            fields.next();
        }
        counts.push((added, removed));
    }
    counts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_raw_and_numstat_run_says_what_name_status_and_numstat_say() {
        let dir = tempfile::tempdir().unwrap();
        let git = |args: &[&str]| crate::test_git::git(dir.path(), args, 0);
        git(&["init", "-q"]);
        let body: String = (0..50).map(|i| format!("line {i}\n")).collect();
        std::fs::write(dir.path().join("old name.txt"), &body).unwrap();
        std::fs::write(dir.path().join(":colon"), "x\n").unwrap();
        std::fs::write(dir.path().join("gone.bin"), [0u8, 1, 2]).unwrap();
        git(&["add", "-A"]);
        git(&["commit", "-q", "-m", "one"]);
        git(&["mv", "old name.txt", "new\tname.txt"]);
        std::fs::write(dir.path().join("new\tname.txt"), format!("{body}more\n")).unwrap();
        std::fs::write(dir.path().join(":colon"), "y\n").unwrap();
        git(&["rm", "-q", "gone.bin"]);
        std::fs::write(dir.path().join("added.txt"), "a\n").unwrap();
        git(&["add", "-A"]);
        git(&["commit", "-q", "-m", "two"]);
        let show = |what: &[&str]| {
            let mut args = vec!["show", "--format=", "-M", "--first-parent", "-m"];
            args.extend_from_slice(what);
            git(&args)
        };
        let whole = show(&["--raw", "--numstat", "-z", "--no-color", "-p"]);
        let at = whole.find("\0\0").expect("records, then the patch");
        assert_eq!(
            &whole[at + 2..],
            show(&["--no-color", "-p"]),
            "the patch part"
        );
        let (status, numstat) = split_raw(&whole[..=at]);
        assert_eq!(status, show(&["--name-status", "-z"]));
        assert_eq!(
            parse_numstat(&numstat),
            parse_numstat(&show(&["--numstat", "-z"]))
        );
        let files = parse_name_status(&status);
        assert_eq!(files.len(), 4, "{status:?}");
        assert!(
            files
                .iter()
                .any(|f| f.old_path.as_deref() == Some("old name.txt"))
        );
    }

    #[test]
    fn name_status_and_numstat_line_up_across_renames() {
        let files = parse_name_status("M\0a.txt\0R090\0old.txt\0new.txt\0A\0b.bin\0");
        assert_eq!(files.len(), 3);
        assert_eq!(files[1].status, "R");
        assert_eq!(files[1].old_path.as_deref(), Some("old.txt"));
        assert_eq!(files[1].path, "new.txt");
        let counts =
            parse_numstat("1\t2\ta.txt\u{0}3\t0\t\u{0}old.txt\u{0}new.txt\u{0}-\t-\tb.bin\u{0}");
        assert_eq!(
            counts,
            vec![
                ("1".into(), "2".into()),
                ("3".into(), "0".into()),
                ("-".into(), "-".into())
            ]
        );
    }
}
