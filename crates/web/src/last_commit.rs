//! The last commit that touched each entry of a tree listing, and the
//! size of each file: one bounded walk of history per (commit, directory),
//! in-process through gix, cached by that pair (history named by a commit
//! id never changes: `caches::WebCaches::listings`). What does not live here: the listing itself
//! (`read::lookup`) and how it is drawn (`browse.rs`, `listing.html`).
//!
//! The walk goes from the listed commit to older commits, newest commit
//! time first, as `git log` does, each entry following its own line of
//! history as `git log -1 -- entry` would: at a commit where the entry is
//! the same as in a parent, it goes on to that parent only (the first
//! such: git's history simplification); where it differs from every
//! parent, that commit is the entry's. A commit whose whole directory is
//! the same as a parent's passes every entry on without reading it. The walk stops once every entry is found, or at
//! [`MAX_WALKED`] commits or [`WALK_BUDGET`]; entries not found by then
//! are shown as older than the walk went, not guessed.

use std::collections::{BinaryHeap, HashMap};
use std::sync::Arc;

use std::time::{Duration, Instant};

use gix::ObjectId;
use gix::bstr::BStr;

use super::read::{EntryKind, ReadError, TreeEntry};
use crate::caches::Weigh;
use vole_git::Lookup;

/// How far one walk may go.
#[derive(Clone, Copy)]
pub struct Bounds {
    pub commits: usize,
    pub time: Duration,
}

/// Commits one walk looks at, at most.
pub const MAX_WALKED: usize = 10_000;
/// Time one walk may take, at most (and never more than the read
/// deadline).
pub const WALK_BUDGET: Duration = Duration::from_secs(2);
/// Bytes of the object cache one walk's repo handle has (a directory of
/// 5,000 entries is a tree of some 215 KB).
pub const OBJECT_CACHE_BYTES: usize = 8 << 20;

/// A commit that last touched some entry.
#[derive(Clone)]
pub struct Touch {
    pub id: String,
    pub summary: String,
    pub author: String,
    /// RFC 3339, UTC (what the `when` filter takes).
    pub time: String,
}

/// What a listing shows beside its entries, in the listing's order.
pub struct Facts {
    /// The entries' names as the tree holds them (what a later walk that
    /// reaches this commit matches its entries by).
    pub names: Vec<gix::bstr::BString>,
    /// The file's size (`None` for directories, submodules, links).
    pub sizes: Vec<Option<u64>>,
    /// Index into `commits` of the commit that last touched the entry.
    pub last: Vec<Option<u32>>,
    pub commits: Vec<Touch>,
    /// Commits the walk looked at.
    pub walked: usize,
    /// The walk stopped at its bound with entries still not found.
    pub cut: bool,
    /// It was the time bound that stopped it.
    pub out_of_time: bool,
    /// When the walk ended.
    pub made: Instant,
}

impl Weigh for Touch {
    fn weight(&self) -> usize {
        self.id.weight() + self.summary.weight() + self.author.weight() + self.time.weight()
    }
}

impl Weigh for Facts {
    fn weight(&self) -> usize {
        self.names.iter().map(|n| n.len() + 24).sum::<usize>()
            + self.sizes.len() * std::mem::size_of::<Option<u64>>()
            + self.last.len() * std::mem::size_of::<Option<u32>>()
            + self.commits.weight()
            + std::mem::size_of::<Facts>()
    }
}

/// (the repo's incarnation, commit, directory): the walk reads the
/// repo's objects, so a walk in one repo never answers for another (nor for
/// a repo created again under the name).
pub type Key = (String, ObjectId, Vec<String>);

impl Weigh for Key {
    fn weight(&self) -> usize {
        self.0.weight() + self.2.weight() + std::mem::size_of::<Key>()
    }
}

/// A walk the clock cut depends on the load it ran under: it is kept
/// (so the views after it cost what a cached listing costs) but walked
/// again once it is this old (`caches::WebCaches::listings` expires it).
pub const RETRY_CUT_WALK: Duration = Duration::from_secs(60);

/// A commit as the walk needs it.
struct Node {
    time: i64,
    parents: Vec<ObjectId>,
    /// The walked directory's tree in this commit (none: not there).
    dir: Option<ObjectId>,
}

/// What an earlier walk of the same directory found at a commit, if there
/// was one: the last-commit index a walk stops at. An entry whose line of
/// history reaches that commit has the answer found from there, since
/// `git log -1 -- entry` from any commit on that line is the same one.
pub type Known<'a> = &'a dyn Fn(ObjectId) -> Option<Arc<Facts>>;

/// Walks history from `commit` for the last commit of each of `entries`
/// (the listing of `path` at `commit`) and reads each file's size; an
/// entry that reaches a commit `known` has facts for takes its answer from
/// them (a push's first view walks only the new commits). Blocking.
pub fn walk(
    repo: &gix::Repository,
    commit: ObjectId,
    path: &[String],
    entries: &[TreeEntry],
    bounds: Bounds,
    known: Known<'_>,
) -> Result<Facts, ReadError> {
    let started = Instant::now();
    let sizes = sizes_of(repo, entries)?;
    let mut last: Vec<Option<u32>> = vec![None; entries.len()];
    let mut commits = Touches::default();
    let mut nodes: HashMap<ObjectId, Node> = HashMap::new();
    // Each entry not yet found follows one line of history, as `git log
    // -1 -- entry` does: it waits on exactly one queued commit.
    let mut queue: BinaryHeap<(i64, ObjectId)> = BinaryHeap::new();
    let mut waiting: HashMap<ObjectId, Vec<usize>> = HashMap::new();
    load(repo, path, &mut nodes, commit)?;
    queue.push((nodes[&commit].time, commit));
    waiting.insert(commit, (0..entries.len()).collect());
    let mut pending = entries.len();
    let mut walked = 0;
    let mut cut = false;
    let mut out_of_time = false;
    while let Some((_, id)) = queue.pop() {
        if pending == 0 {
            break;
        }
        if walked >= bounds.commits {
            cut = true;
            break;
        }
        if started.elapsed() >= bounds.time {
            cut = true;
            out_of_time = true;
            break;
        }
        let mut here = waiting.remove(&id).unwrap_or_default();
        if id != commit
            && let Some(facts) = known(id)
        {
            let taken;
            (taken, here) = commits.take_known(&facts, entries, here, &mut last);
            pending -= taken;
            if here.is_empty() {
                continue;
            }
        }
        walked += 1;
        let parents = nodes[&id].parents.clone();
        for parent in &parents {
            load(repo, path, &mut nodes, *parent)?;
        }
        let dir = nodes[&id].dir;
        // Where each entry goes on: the parent it is the same in.
        let mut onward: Vec<(ObjectId, Vec<usize>)> = Vec::new();
        match parents.iter().find(|p| nodes[*p].dir == dir) {
            // The same directory as a parent's: nothing in it changed
            // here; every entry follows that parent.
            Some(same) => onward.push((*same, here)),
            None => {
                let (found, follow) = match dir {
                    Some(dir) => split(repo, dir, &parents, &nodes, entries, here)?,
                    None => (Vec::new(), Vec::new()),
                };
                if !found.is_empty() {
                    pending -= found.len();
                    let index = commits.add(touch(repo, id)?);
                    for entry in found {
                        last[entry] = Some(index);
                    }
                }
                onward = follow;
            }
        }
        for (parent, followers) in onward {
            if followers.is_empty() {
                continue;
            }
            match waiting.get_mut(&parent) {
                Some(already) => already.extend(followers),
                None => {
                    waiting.insert(parent, followers);
                    queue.push((nodes[&parent].time, parent));
                }
            }
        }
    }
    Ok(Facts {
        names: entries.iter().map(|e| e.raw_name.clone()).collect(),
        sizes,
        last,
        commits: commits.list,
        walked,
        cut: cut && pending > 0,
        out_of_time: out_of_time && pending > 0,
        made: Instant::now(),
    })
}

/// Each file's size (`None` for the rest).
fn sizes_of(repo: &gix::Repository, entries: &[TreeEntry]) -> Result<Vec<Option<u64>>, ReadError> {
    Ok(entries
        .iter()
        .map(|e| match e.kind {
            EntryKind::File => repo.find_header(e.id).map(|h| Some(h.size())),
            _ => Ok(None),
        })
        .collect::<Result<Vec<_>, gix::Error>>()?)
}

/// The commits a walk found, each once.
#[derive(Default)]
struct Touches {
    list: Vec<Touch>,
    by_id: HashMap<String, u32>,
}

impl Touches {
    /// `touch`'s index, added unless it is there.
    fn add(&mut self, touch: Touch) -> u32 {
        let next = self.list.len() as u32;
        *self.by_id.entry(touch.id.clone()).or_insert_with(|| {
            self.list.push(touch);
            next
        })
    }

    /// Of `here` (entries waiting on a commit an earlier walk of this
    /// directory went from), those `facts` answers, recorded in `last`:
    /// how many, and the rest (not listed there, or not found by that
    /// walk before its bound), which walk on.
    fn take_known(
        &mut self,
        facts: &Facts,
        entries: &[TreeEntry],
        here: Vec<usize>,
        last: &mut [Option<u32>],
    ) -> (usize, Vec<usize>) {
        let at: HashMap<&[u8], usize> = facts
            .names
            .iter()
            .enumerate()
            .map(|(i, name)| (name.as_slice(), i))
            .collect();
        let mut taken = 0;
        let mut rest = Vec::new();
        for index in here {
            let known = at.get(entries[index].raw_name.as_slice());
            match known.map(|i| facts.last.get(*i).copied().flatten()) {
                Some(Some(commit)) => {
                    last[index] = Some(self.add(facts.commits[commit as usize].clone()));
                    taken += 1;
                }
                // That walk went all the way without finding it.
                Some(None) if !facts.cut => taken += 1,
                _ => rest.push(index),
            }
        }
        (taken, rest)
    }
}

/// Reads commit `id` into `nodes`, once.
fn load(
    repo: &gix::Repository,
    path: &[String],
    nodes: &mut HashMap<ObjectId, Node>,
    id: ObjectId,
) -> Result<(), ReadError> {
    if nodes.contains_key(&id) {
        return Ok(());
    }
    let found = repo.find_commit(id)?;
    let decoded = found.decode()?;
    let dir = match vole_git::lookup(repo, decoded.tree(), path)? {
        Lookup::Dir(tree) => Some(tree),
        _ => None,
    };
    nodes.insert(
        id,
        Node {
            time: decoded.committer()?.seconds(),
            parents: decoded.parents().collect(),
            dir,
        },
    );
    Ok(())
}

/// Entries going on to each parent: (parent, entry indices).
type Onward = Vec<(ObjectId, Vec<usize>)>;

/// Of `here` (entries waiting on a commit whose directory is `dir`): those
/// whose object differs from every parent's, which this commit last
/// touched, and for each parent the entries that are the same in it (the
/// first such parent: git's simplification), which go on to it.
fn split(
    repo: &gix::Repository,
    dir: ObjectId,
    parents: &[ObjectId],
    nodes: &HashMap<ObjectId, Node>,
    entries: &[TreeEntry],
    here: Vec<usize>,
) -> Result<(Vec<usize>, Onward), ReadError> {
    let ours = repo.find_tree(dir)?;
    let ours = ours.decode()?;
    let parent_trees = parents
        .iter()
        .map(|p| nodes[p].dir.map(|tree| repo.find_tree(tree)).transpose())
        .collect::<Result<Vec<_>, _>>()?;
    let parent_trees = parent_trees
        .iter()
        .map(|tree| tree.as_ref().map(|t| t.decode()).transpose())
        .collect::<Result<Vec<_>, _>>()?;
    let mut found = Vec::new();
    let mut follow: Onward = parents.iter().map(|p| (*p, Vec::new())).collect();
    // Most entries are the same as in the first parent: found in one
    // merge of the two sorted trees, they go on to it as they are, and
    // only the few that differ are looked up in the other parents.
    let mut here = here;
    if let Some(Some(first)) = parent_trees.first() {
        let changed = differing(&ours, first);
        if changed.is_empty() {
            follow[0].1 = here;
            here = Vec::new();
        } else {
            let (rest, same): (Vec<usize>, Vec<usize>) = here
                .into_iter()
                .partition(|i| changed.contains(&entries[*i].raw_name.as_slice()));
            follow[0].1 = same;
            here = rest;
        }
    }
    for index in here.drain(..) {
        let entry = &entries[index];
        let name: &BStr = entry.raw_name.as_ref();
        let is_dir = entry.kind == EntryKind::Dir;
        let Some(mine) = ours.bisect_entry(name, is_dir) else {
            // Not in this commit (it came in by another line of
            // history): nothing to say of it here.
            continue;
        };
        let same = parent_trees.iter().position(|tree| {
            tree.as_ref()
                .and_then(|t| t.bisect_entry(name, is_dir))
                .is_some_and(|theirs| theirs.oid == mine.oid && theirs.mode == mine.mode)
        });
        match same {
            Some(at) => follow[at].1.push(index),
            None => found.push(index),
        }
    }
    Ok((found, follow))
}

/// The names of `ours` whose entry is not in `theirs` as it is (another
/// object or mode, or missing): one merge of the two trees, both in git's
/// order.
fn differing<'a>(ours: &gix::objs::TreeRef<'a>, theirs: &gix::objs::TreeRef<'_>) -> Changed<'a> {
    let mut changed = Changed::default();
    let (mut i, mut j) = (0, 0);
    while i < ours.entries.len() {
        let mine = &ours.entries[i];
        let Some(other) = theirs.entries.get(j) else {
            changed.insert(mine.filename.as_ref());
            i += 1;
            continue;
        };
        match git_order(
            mine.filename,
            mine.mode.is_tree(),
            other.filename,
            other.mode.is_tree(),
        ) {
            std::cmp::Ordering::Less => {
                changed.insert(mine.filename.as_ref());
                i += 1;
            }
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => {
                if mine.oid != other.oid || mine.mode != other.mode {
                    changed.insert(mine.filename.as_ref());
                }
                i += 1;
                j += 1;
            }
        }
    }
    changed.seal();
    changed
}

/// Names that differ: a commit changes few, so a short list is looked
/// through; a long one is sorted and searched.
#[derive(Default)]
struct Changed<'a> {
    names: Vec<&'a [u8]>,
    sorted: bool,
}

impl<'a> Changed<'a> {
    fn insert(&mut self, name: &'a [u8]) {
        self.names.push(name);
    }

    fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    fn seal(&mut self) {
        if self.names.len() > 16 {
            self.names.sort_unstable();
            self.sorted = true;
        }
    }

    fn contains(&self, name: &&[u8]) -> bool {
        if self.sorted {
            self.names.binary_search(name).is_ok()
        } else {
            self.names.contains(name)
        }
    }
}

/// git's order of tree entries: by name, a tree's name read as if it
/// ended in `/`.
fn git_order(a: &BStr, a_tree: bool, b: &BStr, b_tree: bool) -> std::cmp::Ordering {
    let common = a.len().min(b.len());
    a[..common].cmp(&b[..common]).then_with(|| {
        let next = |name: &BStr, tree: bool| name.get(common).copied().or(tree.then_some(b'/'));
        next(a, a_tree).cmp(&next(b, b_tree))
    })
}

/// Characters of a commit's subject a listing or blame shows at most (a
/// subject may be a megabyte, and a page repeats it on many rows).
pub const MAX_SUBJECT: usize = 200;

/// `subject` cut at [`MAX_SUBJECT`] characters, with an ellipsis if cut.
pub fn short_subject(subject: &str) -> String {
    match subject.char_indices().nth(MAX_SUBJECT) {
        Some((at, _)) => format!("{}…", &subject[..at]),
        None => subject.to_string(),
    }
}

fn touch(repo: &gix::Repository, id: ObjectId) -> Result<Touch, ReadError> {
    let info = super::read::commit(repo, id)?;
    Ok(Touch {
        id: info.id,
        summary: short_subject(&info.summary),
        author: short_subject(&info.author),
        time: info.time,
    })
}

#[cfg(test)]
mod tests;
