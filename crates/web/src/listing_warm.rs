//! The last-commit index kept up as pushes land. A listing's facts
//! (`last_commit::Facts`, cached by commit and directory) are an index a
//! later walk of the same directory stops at (`last_commit::Known`): a
//! view right after a push walks only the commits the push brought, then
//! takes the rest from the old tip's facts. This module makes sure the
//! new tip's facts are there too: for each branch a push moved, the
//! directories viewed at its old tip are walked at its new tip, off the
//! push's path (a task following the ref-move feed), one at a time under a
//! read slot, at most [`MAX_WARMED`] a push, each within [`WARM_BOUNDS`]
//! (a walk that needs more, a new tip far from the old, is dropped, not
//! kept cut: its view walks in full).
//!
//! What does not live here: the walk (`last_commit`) and the listing's
//! cache (`listing`, `caches`).

use std::num::NonZeroUsize;
use std::sync::Arc;

use gix::ObjectId;
use parking_lot::Mutex;

use super::last_commit;
use super::listing::walk_listing;
use super::read::{self, Node};
use super::{WebState, blocking};
use vole_access::ResolvedRepo;

/// Directories walked again at new tips, at most, per push.
pub const MAX_WARMED: usize = 64;
/// The bounds of one warming walk.
pub const WARM_BOUNDS: last_commit::Bounds = last_commit::Bounds {
    commits: 1_000,
    time: std::time::Duration::from_millis(250),
};
/// (repo incarnation, commit) pairs whose viewed directories are kept,
/// with at most [`DIRS_KEPT`] directories each, of paths at most
/// [`PATH_KEPT`] bytes long: 4 MiB of paths at the most.
const COMMITS_KEPT: usize = 1024;
const DIRS_KEPT: usize = 16;
const PATH_KEPT: usize = 256;

/// (repo incarnation, commit): a commit of one repo.
type RepoCommit = (String, ObjectId);

/// The directories whose listings were walked at each commit, newest
/// commits kept: what a push to that commit warms.
pub struct Viewed {
    at: Mutex<lru::LruCache<RepoCommit, Vec<Vec<String>>>>,
}

impl Default for Viewed {
    fn default() -> Viewed {
        Viewed {
            at: Mutex::new(lru::LruCache::new(
                NonZeroUsize::new(COMMITS_KEPT).expect("not zero"),
            )),
        }
    }
}

impl Viewed {
    /// `path` was walked at `commit` in the repo of `incarnation`.
    pub fn note(&self, incarnation: &str, commit: ObjectId, path: &[String]) {
        if path.iter().map(|s| s.len() + 1).sum::<usize>() > PATH_KEPT {
            return;
        }
        let mut at = self.at.lock();
        let dirs = at.get_or_insert_mut((incarnation.to_string(), commit), Vec::new);
        if dirs.len() < DIRS_KEPT && !dirs.iter().any(|d| d == path) {
            dirs.push(path.to_vec());
        }
    }

    fn dirs(&self, incarnation: &str, commit: ObjectId) -> Vec<Vec<String>> {
        let mut at = self.at.lock();
        at.get(&(incarnation.to_string(), commit))
            .cloned()
            .unwrap_or_default()
    }

    /// Forgets the repo of `incarnation` (deleted).
    pub fn forget(&self, incarnation: &str) {
        let mut at = self.at.lock();
        let gone: Vec<_> = at
            .iter()
            .filter(|((i, _), _)| i == incarnation)
            .map(|(key, _)| key.clone())
            .collect();
        for key in gone {
            at.pop(&key);
        }
    }
}

/// Follows the ref-move feed for as long as the server runs, warming each
/// moved branch's viewed directories at its new tip. A feed it fell
/// behind on skips what it missed (those views walk on their own).
pub async fn follow_pushes(app: Arc<WebState>) {
    use tokio::sync::broadcast::error::RecvError;
    let mut feed = app.recorder.subscribe();
    loop {
        match feed.recv().await {
            Ok(event) => warm(&app, &event).await,
            Err(RecvError::Lagged(missed)) => {
                tracing::debug!(missed, "listing warming fell behind the ref-move feed");
            }
            Err(RecvError::Closed) => return,
        }
    }
}

async fn warm(app: &Arc<WebState>, event: &vole_hooks::recorder::RefMoveEvent) {
    let Ok(name) = vole_git::repos::RepoName::parse(&event.repo) else {
        return;
    };
    // The repo under that name now: a move of one made since under the
    // same name finds no views of its own old tip, and warms nothing.
    let Ok(Some(incarnation)) = app.repos.incarnation(&name) else {
        return;
    };
    let repo = ResolvedRepo {
        name,
        incarnation: Some(incarnation),
    };
    // (new tip, directory), each once, at most MAX_WARMED a push.
    let mut wanted: Vec<(ObjectId, Vec<String>)> = Vec::new();
    for moved in &event.moves {
        if !moved.ref_name.starts_with("refs/heads/") {
            continue;
        }
        let (Some(old), Some(new)) = (&moved.old, &moved.new) else {
            continue;
        };
        let (Ok(old), Ok(new)) = (
            ObjectId::from_hex(old.as_bytes()),
            ObjectId::from_hex(new.as_bytes()),
        ) else {
            continue;
        };
        for dir in app.caches.viewed.dirs(repo.incarnation_id(), old) {
            if wanted.len() < MAX_WARMED && !wanted.iter().any(|(c, d)| *c == new && *d == dir) {
                wanted.push((new, dir));
            }
        }
    }
    for (new, dir) in wanted {
        warm_one(app, &repo, new, dir).await;
    }
}

/// Walks `dir` at `commit` into the listings' cache, unless it is there.
async fn warm_one(app: &Arc<WebState>, repo: &ResolvedRepo, commit: ObjectId, dir: Vec<String>) {
    let key = (repo.incarnation_id().to_string(), commit, dir.clone());
    if app.caches.listings.contains_key(&key) {
        return;
    }
    let (gix, path, incarnation) = (
        app.gix.clone(),
        app.repos.path(repo),
        repo.incarnation_id().to_string(),
    );
    let segments = dir.clone();
    let listed = blocking(move || {
        let repo = read::open(&gix, &path, &incarnation)?;
        let tree = repo.find_commit(commit)?.tree_id()?.detach();
        read::lookup(&repo, tree, &segments)
    })
    .await;
    let Ok(Node::Tree(entries)) = listed else {
        return;
    };
    if entries.is_empty() {
        return;
    }
    let shown: Vec<read::TreeEntry> = entries
        .into_iter()
        .take(super::browse::MAX_LISTED)
        .collect();
    let walked = walk_listing(app, repo, (commit, dir), shown, WARM_BOUNDS).await;
    if let Some(facts) = walked.filter(|f| !f.cut) {
        app.caches.listings.insert(key, facts).await;
    }
}
