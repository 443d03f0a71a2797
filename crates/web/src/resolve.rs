//! Resolving a revision and a path in one blocking hop: the commit, the
//! node at the path, the listing's entries and the ref menu, and the
//! README of a listed tree; a file's blob for the blob, blame and raw
//! views.

use super::browse::{Entry, Last, MAX_LISTED, REFS_IN_MENU, View};
use super::*;
use vole_access::ResolvedRepo;

pub(super) struct Resolved {
    pub(super) view: View,
    pub(super) commit: gix::ObjectId,
    /// The path inside the revision (after a branch name's slashes).
    pub(super) path: Vec<String>,
    pub(super) node: Node,
    pub(super) readme: Option<(String, Vec<u8>)>,
}

/// The repo, the path's segments and what `rev:path` is, for the tree and
/// blob pages (an empty repo is not found).
pub(super) async fn resolve_path(
    app: &Arc<WebState>,
    name: ResolvedRepo,
    rev: &str,
    path: &str,
) -> Result<(ResolvedRepo, Vec<String>, Resolved), AppError> {
    let segments = segments(path)?;
    let resolved = resolve(app, &name, Some(rev.to_string()), segments.clone(), false)
        .await?
        .ok_or_else(|| AppError::not_found(format!("{name} is empty.")))?;
    Ok((name, segments, resolved))
}

/// Resolves `rev` and `path` in one blocking hop; `Ok(None)` when the
/// repo has no commits at all.
pub(super) async fn resolve(
    app: &Arc<WebState>,
    name: &ResolvedRepo,
    rev: Option<String>,
    path: Vec<String>,
    want_readme: bool,
) -> Result<Option<Resolved>, AppError> {
    let repo_path = app.repos.path(name);
    let incarnation = name.incarnation_id().to_string();
    let repo = name.to_string();
    let rev_for_error = rev.clone();
    let git_binary = app.git.clone();
    let deadline = app.config.reads.deadline;
    let gix = app.gix.clone();
    let resolved = blocking(move || {
        let git = read::open(&gix, &repo_path, &incarnation)?;
        let refs = read::refs(&git)?;
        let rev = match rev {
            Some(rev) => rev,
            None => match refs.head.clone().filter(|h| refs.branches.contains(h)) {
                Some(head) => head,
                None => match refs.branches.first() {
                    Some(first) => first.clone(),
                    None => return Ok(None),
                },
            },
        };
        let (rev, path) = read::split_rev(&git, &rev, &path)?;
        let Some(commit_id) = read::resolve(&git, &rev)? else {
            return Ok(Some(Err(rev)));
        };
        let commit = read::commit(&git, commit_id)?;
        let node = read::lookup(&git, commit.tree, &path)?;
        let readme = if want_readme {
            readme_of(&git, &git_binary, &repo_path, &node, deadline)?
        } else {
            None
        };
        let rev_label = rev_label(&refs, &rev);
        let entries = listed_entries(&format!("/{repo}"), &rev, &path, &node);
        Ok(Some(Ok(Resolved {
            view: View {
                rev_label,
                branch_count: refs.branches.len(),
                tag_count: refs.tags.len(),
                branches: refs.branches.into_iter().take(REFS_IN_MENU).collect(),
                tags: refs.tags.into_iter().take(REFS_IN_MENU).collect(),
                commit_short: commit.id[..12].to_string(),
                commit_id: commit.id,
                commit_summary: commit.summary,
                commit_author: commit.author,
                commit_time: commit.time,
                entries,
                rev,
            },
            commit: commit_id,
            path,
            node,
            readme,
        })))
    })
    .await?;
    match resolved {
        None => Ok(None),
        Some(Ok(resolved)) => Ok(Some(resolved)),
        Some(Err(rev)) => Err(AppError::not_found(format!(
            "{name} has no branch, tag or commit {:?}.",
            rev_for_error.unwrap_or(rev)
        ))),
    }
}

/// The README of a listed tree, when it has one within the in-process
/// bound (a README over it is not rendered; the listing still links to
/// it), cut at what a page shows.
pub(super) fn readme_of(
    git: &gix::Repository,
    git_binary: &vole_git::Git,
    repo_path: &std::path::Path,
    node: &Node,
    deadline: std::time::Duration,
) -> Result<Option<(String, Vec<u8>)>, read::ReadError> {
    let Node::Tree(entries) = node else {
        return Ok(None);
    };
    let Some(entry) = entries.iter().find(|e| {
        e.kind == EntryKind::File && {
            let lower = e.name.to_lowercase();
            lower == "readme.md" || lower == "readme" || lower == "readme.txt"
        }
    }) else {
        return Ok(None);
    };
    let size = git.find_header(entry.id)?.size();
    if size > read::IN_PROCESS_BLOB {
        return Ok(None);
    }
    let (bytes, _) = read::blob_prefix(
        git_binary,
        repo_path,
        git,
        entry.id,
        size,
        MAX_SHOWN_BYTES,
        deadline,
    )?;
    Ok(Some((entry.name.clone(), bytes)))
}

/// What the ref menu says `rev` is.
pub(super) fn rev_label(refs: &read::Refs, rev: &str) -> String {
    if refs.branches.iter().any(|b| b == rev) {
        format!("Branch: {rev}")
    } else if refs.tags.iter().any(|t| t == rev) {
        format!("Tag: {rev}")
    } else {
        format!("Commit: {}", &rev[..rev.len().min(12)])
    }
}

/// A tree's entries as the listing links them (at most [`MAX_LISTED`]);
/// none for a blob.
pub(super) fn listed_entries(base: &str, rev: &str, path: &[String], node: &Node) -> Vec<Entry> {
    let Node::Tree(entries) = node else {
        return Vec::new();
    };
    let rev_in_links = rev_path(rev);
    let dir = encode_path(path);
    entries
        .iter()
        .take(MAX_LISTED)
        .map(|e| {
            let child = if dir.is_empty() {
                encode_path(std::slice::from_ref(&e.name))
            } else {
                format!("{dir}/{}", encode_path(std::slice::from_ref(&e.name)))
            };
            let (kind, view, note) = match e.kind {
                EntryKind::Dir => ("dir", "tree", ""),
                EntryKind::File => ("file", "blob", ""),
                EntryKind::Link => ("link", "blob", "symbolic link"),
                EntryKind::Submodule => ("submodule", "tree", "submodule"),
            };
            Entry {
                kind,
                name: e.name.clone(),
                href: if e.kind == EntryKind::Submodule {
                    String::new()
                } else {
                    format!("{base}/-/{view}/{rev_in_links}/{child}")
                },
                note,
                size: String::new(),
                last: Last::Unknown,
            }
        })
        .collect()
}

/// A file a URL names: repo, path segments, view, blob id, size.
pub(super) type FileAt = (ResolvedRepo, Vec<String>, Resolved, gix::ObjectId, u64);

/// What a file URL (`/-/blob/...`, `/-/blame/...`) names: the repo, the
/// path's segments, the resolved view and the blob's id and size; or, for
/// a directory, the redirect to its tree page. A missing path is a 404.
pub(super) async fn file_at(
    app: &Arc<WebState>,
    name: ResolvedRepo,
    rev: &str,
    path: &str,
) -> Result<Result<FileAt, Response>, AppError> {
    let (name, segments, resolved) = resolve_path(app, name, rev, path).await?;
    match resolved.node {
        Node::Blob { id, size } => Ok(Ok((name, segments, resolved, id, size))),
        Node::Tree(_) => {
            let to = format!(
                "/{name}/-/tree/{}/{}",
                rev_path(rev),
                encode_path(&segments)
            );
            Ok(Err(redirect(&to)))
        }
        Node::Missing => Err(AppError::not_found(format!(
            "There is no file {path} in {name} at {rev}."
        ))),
    }
}
