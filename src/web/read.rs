//! What the web UI reads from a repo, through gix: refs, a revision's
//! commit, the tree or blob at a path. Blocking calls, made from
//! `spawn_blocking`; nothing here writes.

use std::path::Path;

use gix::ObjectId;
use gix::bstr::ByteSlice;

pub type ReadError = Box<dyn std::error::Error + Send + Sync>;

/// Branches and tags (short names, sorted) and the branch HEAD names.
pub struct Refs {
    pub branches: Vec<String>,
    pub tags: Vec<String>,
    pub head: Option<String>,
}

pub fn open(path: &Path) -> Result<gix::Repository, ReadError> {
    Ok(crate::git::open_gix(path)?)
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

/// The commit a revision names: a branch, a tag, or a full commit id.
pub fn resolve(repo: &gix::Repository, rev: &str) -> Result<Option<ObjectId>, ReadError> {
    for prefix in ["refs/heads/", "refs/tags/"] {
        if let Some(reference) = repo.try_find_reference(format!("{prefix}{rev}").as_str())? {
            let id = reference.into_fully_peeled_id()?.detach();
            return Ok(Some(peel_to_commit(repo, id)?));
        }
    }
    if rev.len() == 40
        && let Ok(id) = ObjectId::from_hex(rev.as_bytes())
        && repo.has_object(id)
    {
        return Ok(Some(peel_to_commit(repo, id)?));
    }
    Ok(None)
}

fn peel_to_commit(repo: &gix::Repository, id: ObjectId) -> Result<ObjectId, ReadError> {
    Ok(repo.find_object(id)?.peel_to_commit()?.id)
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
    let time = humantime::format_rfc3339_seconds(
        std::time::UNIX_EPOCH + std::time::Duration::from_secs(seconds.max(0) as u64),
    )
    .to_string();
    Ok(CommitInfo {
        id: id.to_string(),
        summary,
        author: author.name.to_str_lossy().into_owned(),
        time,
        tree: commit.tree_id()?.detach(),
    })
}

/// One entry of a tree listing.
pub struct TreeEntry {
    pub name: String,
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
    let mut current = tree;
    for (i, segment) in segments.iter().enumerate() {
        let tree = repo.find_tree(current)?;
        let decoded = tree.decode()?;
        let Some(entry) = decoded
            .entries
            .iter()
            .find(|e| e.filename == segment.as_bytes())
        else {
            return Ok(Node::Missing);
        };
        let id = entry.oid.to_owned();
        let last = i + 1 == segments.len();
        if entry.mode.is_tree() {
            current = id;
        } else if entry.mode.is_blob() && last {
            let size = repo.find_header(id)?.size();
            return Ok(Node::Blob { id, size });
        } else {
            return Ok(Node::Missing);
        }
    }
    let tree = repo.find_tree(current)?;
    let mut entries: Vec<TreeEntry> = tree
        .decode()?
        .entries
        .iter()
        .map(|e| TreeEntry {
            name: e.filename.to_str_lossy().into_owned(),
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
