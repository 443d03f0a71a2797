//! The index persisted beside the meta log (`meta-index.arrow`): every
//! document of the shard trees last read, keyed by the id of the tree
//! that holds it, so a start reads a shard tree it holds from the file
//! rather than from git.
//!
//! **Why it is right whatever happened since it was written.** A tree id
//! names its content: the rows of tree T are the documents of T, in any
//! repo, at any time. A start takes a shard's rows from the file only
//! when the shard tip's tree is one the file holds, or, inside a shard
//! tree it does not hold, a thread's directory (`issues/<bucket>/<id>`)
//! whose tree it holds (among the rows of the tree it holds of the same
//! repo and shard); everything else is read from git, and the log
//! records above the tips are replayed on top as ever. A crash, a
//! compaction, a repo deleted and made again, a file from an older
//! start: each only makes more of the read come from git. The file is
//! written whole beside its place and renamed in, synced; one of
//! another format version is not read.
//!
//! **When it is written.** A start writes it as it reads (the rows of
//! every shard tree read from git; those it took whole from the old file
//! copied at the end), and moves it in once every repo is read, unless it
//! holds the same shard trees as the old one. A stop writes it again if
//! the shard tips moved since, within a time bound, reusing the rows of
//! the old file for every tree it still holds
//! ([`MetaStore::persist_index`]). The file is read a shard tree at a
//! time (`file.rs`): what it holds costs no memory but the few shards
//! being read and applied (at most 4: one read, two queued, one being
//! applied, `loading/apply.rs`); the open finds where each tree's rows
//! are in its footer, and reads them as it reads the trees, within its
//! budget and then on the background reader. Bodies longer than the
//! index keeps are left out of a row (`body_left` says how long they
//! are), so the file holds what the index holds.

mod check;
mod file;

pub use check::{CheckedIndex, check};

pub use file::{FILE_NAME, FORMAT_VERSION, PersistError, Persisted, Row, ShardRows, Writing};

use std::collections::{HashMap, HashSet};
use std::ops::Range;
use std::sync::Arc;
use std::time::{Duration, Instant};

use gix::ObjectId;

use crate::{MetaStore, RepoMeta};

use crate::entity::Entity;
use crate::fold::MetaRepoError;
use crate::index::stored::INLINE_BODY_BYTES;

/// The depth of a thread's directory in a shard tree
/// (`issues/<bucket>/<id>`): the unit the file is looked up by inside a
/// shard tree it does not hold.
const UNIT_DEPTH: usize = 3;

/// What a start's read of the shard trees does with the file.
#[derive(Default)]
pub(crate) struct Persisting {
    /// The file as the last start or stop wrote it.
    pub(crate) previous: Option<Persisted>,
    /// The next file, written as the trees are read.
    pub(crate) writing: Option<Writing>,
    /// Documents read from git, and from the file.
    pub(crate) from_git: usize,
    pub(crate) from_file: usize,
    /// Shard trees read whole from `previous`, with their repo and shard:
    /// their rows are copied into the next file only if it is written.
    hits: HashMap<ObjectId, (String, u8)>,
}

impl Persisting {
    /// The next file begun at `path`, and the one there opened (its
    /// footer says where each shard tree's rows are; they are read as the
    /// trees are). One that cannot be read is logged and read around: the
    /// trees come from git.
    pub(crate) fn begin(path: &std::path::Path) -> Persisting {
        let previous = Persisted::read(path).unwrap_or_else(|e| {
            tracing::warn!(error = %e, "the persisted metadata index is not used; the shard trees are read from git");
            None
        });
        remove_unfinished(path);
        let writing = match Writing::begin(path) {
            Ok(writing) => Some(writing),
            Err(e) => {
                tracing::warn!(error = %e, "cannot write the persisted metadata index");
                None
            }
        };
        Persisting {
            previous,
            writing,
            ..Persisting::default()
        }
    }

    /// Reads shard tree `tree`, the tip of `place` (see [`read_shard`]),
    /// its rows added to the next file.
    pub(crate) fn read_shard(
        &mut self,
        repo: &gix::Repository,
        place: (&str, u8),
        tree: ObjectId,
        found: &mut Vec<Found>,
    ) -> Result<ShardRead, MetaRepoError> {
        let hit = self.previous.as_ref().is_some_and(|p| p.has_shard(&tree));
        let mut rows = self.writing.as_ref().filter(|_| !hit).map(|_| Vec::new());
        let read = read_shard(
            repo,
            place,
            tree,
            self.previous.as_ref(),
            rows.as_mut(),
            found,
        )?;
        if hit && read.whole_from_file {
            self.hits.insert(tree, (place.0.to_string(), place.1));
        }
        self.from_git += read.from_git;
        self.from_file += read.from_file;
        if let (Some(writing), Some(rows)) = (self.writing.as_mut(), rows)
            && let Err(e) = writing.shard(place.0, place.1, tree, &rows)
        {
            tracing::warn!(error = %e, "cannot write the persisted metadata index");
            self.writing = None;
        }
        Ok(read)
    }

    /// Every repo is read: the next file moved into place, unless it holds
    /// the same shard trees as the old one.
    /// Whether a file was written.
    pub(crate) fn finish(self, started: Instant) -> bool {
        let Some(mut writing) = self.writing else {
            return false;
        };
        // The same trees: the same rows (a tree id names its content).
        // Trees read from git may be ones the old file holds (the open
        // reads some from git before the file is read).
        let same = self.previous.as_ref().is_some_and(|p| {
            writing.shards.iter().all(|t| p.has_shard(t))
                && self.hits.len()
                    + writing
                        .shards
                        .iter()
                        .filter(|t| !self.hits.contains_key(*t))
                        .count()
                    == p.shards.len()
        });
        if same {
            return false;
        }
        if let Some(previous) = &self.previous {
            for (tree, (repo, shard)) in &self.hits {
                let Some(old) = previous.shard_rows(tree) else {
                    continue;
                };
                let rows: Vec<Row> = (0..old.len()).map(|i| old.row(i)).collect();
                if let Err(e) = writing.shard(repo, *shard, *tree, &rows) {
                    tracing::warn!(error = %e, "cannot write the persisted metadata index");
                    return false;
                }
            }
        }
        let rows = writing.rows;
        match writing.finish() {
            Ok(()) => {
                tracing::info!(
                    rows,
                    from_git = self.from_git,
                    from_file = self.from_file,
                    ms = started.elapsed().as_secs_f64() * 1e3,
                    "persisted metadata index written"
                );
                true
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot write the persisted metadata index");
                false
            }
        }
    }
}

/// How long a stop spends writing the persisted index at most.
pub const PERSIST_AT_STOP: Duration = Duration::from_secs(3);

impl MetaStore {
    /// Writes the persisted index of every repo's shard tips as they
    /// stand, if they moved since the file was written: the old file's
    /// rows for every tree it still holds, git for the rest. Gives up
    /// past `bound` (the old file stays; the next start reads from git
    /// what it does not hold, and writes the file as it reads), or while
    /// a repo is still being read. Whether a file was written.
    pub fn persist_index(&self, bound: Duration) -> Result<bool, PersistError> {
        let started = Instant::now();
        let repos: Vec<Arc<RepoMeta>> = self.inner.repos.read().values().cloned().collect();
        if !self.inner.options.persist_index || repos.iter().any(|r| !r.loading.is_whole()) {
            return Ok(false);
        }
        let path = crate::recovery::persisted_path(&self.inner.log);
        let previous = Persisted::read(&path).unwrap_or_else(|e| {
            tracing::warn!(error = %e, "the persisted metadata index is written again");
            None
        });
        let mut trees = Vec::new();
        for meta in &repos {
            match shard_trees(&meta.git_dir, self.inner.options.shards) {
                Ok(found) => trees.push((meta.name.clone(), meta.git_dir.clone(), found)),
                // Deleted meanwhile, or unreadable: its rows are left out.
                Err(e) => {
                    tracing::debug!(repo = meta.name, error = %e, "repo left out of the persisted index")
                }
            }
        }
        let all: HashSet<ObjectId> = trees
            .iter()
            .flat_map(|(_, _, t)| t.iter().map(|(_, tree)| *tree))
            .collect();
        if previous
            .as_ref()
            .is_some_and(|p| p.shards.len() == all.len() && all.iter().all(|t| p.has_shard(t)))
        {
            return Ok(false);
        }
        let mut persisting = Persisting {
            previous,
            writing: Some(Writing::begin(&path)?),
            ..Persisting::default()
        };
        // What the read parses is not kept: only its rows are.
        let mut parsed = Vec::new();
        for (name, git_dir, shard_trees) in trees {
            let Ok(repo) = crate::fold::open_repo(&git_dir) else {
                continue;
            };
            for (shard, tree) in shard_trees {
                if started.elapsed() > bound {
                    tracing::info!(
                        bound_ms = bound.as_millis() as u64,
                        "the persisted metadata index was not written in its time; the next start writes it"
                    );
                    return Ok(false);
                }
                // A tree the old file holds is copied at the end, unread.
                if persisting
                    .previous
                    .as_ref()
                    .is_some_and(|p| p.has_shard(&tree))
                {
                    persisting.hits.insert(tree, (name.clone(), shard));
                    continue;
                }
                if let Err(e) = persisting.read_shard(&repo, (&name, shard), tree, &mut parsed) {
                    tracing::debug!(error = %e, "shard left out of the persisted index");
                }
                parsed.clear();
            }
        }
        Ok(persisting.finish(started))
    }
}

/// The trees of the shard tips of the repo at `git_dir`, by shard.
pub(crate) fn shard_trees(
    git_dir: &std::path::Path,
    shards: u16,
) -> Result<Vec<(u8, ObjectId)>, MetaRepoError> {
    let repo = crate::fold::open_repo(git_dir)?;
    let mut trees = Vec::new();
    for shard in 0..shards {
        let Some(tip) = crate::fold::read_shard(&repo, shard as u8)? else {
            continue;
        };
        trees.push((shard as u8, crate::fold::tree_of(&repo, tip)?));
    }
    Ok(trees)
}

/// Removes the files a process that ended while writing the index left
/// beside it (one store opens a data dir at a time).
fn remove_unfinished(path: &std::path::Path) {
    let Some(dir) = path.parent() else { return };
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        if entry
            .file_name()
            .to_string_lossy()
            .starts_with(file::TMP_PREFIX)
        {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// How much of one shard tree came from where.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct ShardRead {
    pub(crate) from_git: usize,
    pub(crate) from_file: usize,
    /// The whole tree came from the file.
    pub(crate) whole_from_file: bool,
}

/// Reads shard tree `tree`, the tip of shard `place.1` of repo `place.0`:
/// from `persisted` where it holds the tree; else from git, but for each
/// thread directory the file holds (looked for among the rows of the tree
/// it holds of the same place, which a fold since changed in part). Each
/// document is pushed to `found` with its blob and the bytes of body
/// left out of it (0 for a document read from git, whose body is whole);
/// and to
/// `rows`, if given, as the file holds it. At most one shard tree's rows
/// of the file are in memory at a time.
pub(crate) fn read_shard(
    repo: &gix::Repository,
    place: (&str, u8),
    tree: ObjectId,
    persisted: Option<&Persisted>,
    rows: Option<&mut Vec<Row>>,
    found: &mut Vec<Found>,
) -> Result<ShardRead, MetaRepoError> {
    let mut walk = Walk {
        repo,
        old: None,
        rows,
        found,
        read: ShardRead::default(),
    };
    if let Some(whole) = persisted.and_then(|p| p.shard_rows(&tree))
        && walk.rows_from_file(&whole, 0..whole.len())
    {
        walk.read.whole_from_file = true;
        return Ok(walk.read);
    }
    let old = persisted
        .and_then(|p| p.tree_at(place.0, place.1))
        .and_then(|old| persisted?.shard_rows(&old));
    walk.old = old.as_ref();
    walk.tree(tree, 0, None)?;
    Ok(walk.read)
}

struct Walk<'a> {
    repo: &'a gix::Repository,
    /// The rows of the tree the file holds of the same place.
    old: Option<&'a ShardRows>,
    rows: Option<&'a mut Vec<Row>>,
    found: &'a mut Vec<Found>,
    read: ShardRead,
}

impl Walk<'_> {
    fn tree(
        &mut self,
        tree: ObjectId,
        depth: usize,
        unit: Option<ObjectId>,
    ) -> Result<(), MetaRepoError> {
        let read = |e| MetaRepoError::ReadObject(tree, e);
        let entries: Vec<(bool, bool, bool, ObjectId)> = self
            .repo
            .find_tree(tree)
            .map_err(read)?
            .decode()
            .map_err(read)?
            .entries
            .iter()
            .map(|e| {
                (
                    e.mode.is_tree(),
                    e.mode.is_blob(),
                    e.filename.ends_with(b".json"),
                    e.oid.to_owned(),
                )
            })
            .collect();
        for (is_tree, is_blob, is_json, id) in entries {
            if is_tree {
                let depth = depth + 1;
                let old = self.old;
                if depth != UNIT_DEPTH {
                    self.tree(id, depth, unit)?;
                } else {
                    let from_file = old
                        .and_then(|o| Some((o, o.unit(&id)?)))
                        .is_some_and(|(o, range)| self.rows_from_file(o, range));
                    if !from_file {
                        self.tree(id, depth, Some(id))?;
                    }
                }
            } else if is_blob && is_json {
                let blob = self
                    .repo
                    .find_blob(id)
                    .map_err(|e| MetaRepoError::ReadObject(id, e))?;
                self.doc_from_git(unit, id, &blob.data);
            }
        }
        Ok(())
    }

    fn doc_from_git(&mut self, unit: Option<ObjectId>, blob: ObjectId, doc: &[u8]) {
        let mut entity = match parse(doc) {
            Ok(entity) => entity,
            Err(e) => {
                tracing::warn!(blob = %blob, error = %e, "metadata document does not parse; skipped");
                return;
            }
        };
        self.read.from_git += 1;
        if let Some(rows) = self.rows.as_mut() {
            rows.push(row_of(&mut entity, unit, blob, doc));
        }
        self.found.push((entity, blob, 0));
    }

    /// The rows `range` of `rows`, each checked: a document whole in its
    /// row must hash to its blob and every row must parse, or none of
    /// them is taken (`false`: the caller reads the tree from git).
    fn rows_from_file(&mut self, rows: &ShardRows, range: Range<usize>) -> bool {
        // Pushed as parsed, and taken back if one is not right.
        let taken = self.found.len();
        self.found.reserve(range.len());
        for i in range.clone() {
            let (_, blob, body_left, doc) = rows.row_ref(i);
            let hashed = body_left > 0
                || gix::objs::compute_hash(gix::hash::Kind::Sha1, gix::objs::Kind::Blob, doc)
                    .is_ok_and(|id| id == blob);
            match parse(doc) {
                Ok(entity) if hashed => self.found.push((entity, blob, body_left)),
                _ => {
                    self.found.truncate(taken);
                    tracing::warn!(blob = %blob, "a persisted metadata document is not its blob's; its tree is read from git");
                    return false;
                }
            }
        }
        self.read.from_file += range.len();
        if let Some(out) = self.rows.as_mut() {
            out.extend(range.map(|i| rows.row(i)));
        }
        true
    }
}

/// A document read, with its blob and the bytes of its body left there
/// (0: whole).
pub(crate) type Found = (Entity, ObjectId, u32);

/// A document's JSON parsed: threads and comments, the bulk of what is
/// stored, straight into their type (the tag is the first field, as the
/// store writes them); anything else through the tagged enum, which
/// first buffers the whole document to find its tag.
pub(crate) fn parse(doc: &[u8]) -> serde_json::Result<Entity> {
    if doc.starts_with(br#"{"kind":"issue","#) {
        return serde_json::from_slice(doc).map(Entity::Issue);
    }
    if doc.starts_with(br#"{"kind":"comment","#) {
        return serde_json::from_slice(doc).map(Entity::Comment);
    }
    if doc.starts_with(br#"{"kind":"change","#) {
        return serde_json::from_slice(doc).map(Entity::Change);
    }
    serde_json::from_slice(doc)
}

/// The body of a thread or comment, if it has one.
fn body_mut(entity: &mut Entity) -> Option<&mut String> {
    match entity {
        Entity::Issue(e) => Some(&mut e.body),
        Entity::Change(e) => Some(&mut e.body),
        Entity::Comment(e) => Some(&mut e.body),
        _ => None,
    }
}

/// `entity` (read from blob `blob`, whose bytes are `doc`) as the file
/// holds it: a body longer than the index keeps is left out, its length
/// kept; `entity` is as it was when this returns.
pub(crate) fn row_of(
    entity: &mut Entity,
    unit: Option<ObjectId>,
    blob: ObjectId,
    doc: &[u8],
) -> Row {
    let long = body_mut(entity)
        .filter(|b| b.len() > INLINE_BODY_BYTES)
        .map(std::mem::take);
    let Some(body) = long else {
        return Row {
            unit,
            blob,
            body_left: 0,
            doc: doc.to_vec(),
        };
    };
    let (doc, body_left) = match serde_json::to_vec(entity) {
        Ok(stripped) => (stripped, u32::try_from(body.len()).unwrap_or(u32::MAX)),
        Err(_) => (doc.to_vec(), 0),
    };
    if let Some(slot) = body_mut(entity) {
        *slot = body;
    }
    Row {
        unit,
        blob,
        body_left,
        doc,
    }
}

#[cfg(test)]
mod tests;
