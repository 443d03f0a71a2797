//! The bodies the index leaves in git ([`index::stored`]), read back on
//! demand from their blobs through one bounded cache per store.
//!
//! The cache is keyed by the blob's id alone: a blob's content is its id,
//! so the body it holds cannot change under a key, whichever repo asks.
//! A reader keeps the repo handle it opened for a few seconds, and the
//! readers of a store keep at most [`MAX_KEPT_HANDLES`] together.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use gix::ObjectId;

use super::error::{MetaError, Unavailable};
use super::fold::MetaRepoError;
use super::index::stored::{HasBody, Stored};

/// What the cache may hold, in bytes of bodies, by default.
pub const BODY_CACHE_BYTES: u64 = 32 << 20;

/// The most repo handles the body readers of one store keep between
/// reads, all repos together: a crawl of one long body in each of
/// thousands of repos within seconds would otherwise keep a handle (and
/// the pack indexes it maps) for each. Past it a read opens a handle for
/// itself and lets it go when done.
pub const MAX_KEPT_HANDLES: usize = 64;

/// Bodies by the id of the blob they were read from, bounded by their
/// bytes (a clone shares the cache), and the count of repo handles the
/// readers sharing it keep.
#[derive(Clone)]
pub struct BodyCache {
    bodies: moka::sync::Cache<ObjectId, Arc<str>>,
    kept_handles: Arc<std::sync::atomic::AtomicUsize>,
}

impl BodyCache {
    pub fn new(max_bytes: u64) -> Self {
        BodyCache {
            bodies: moka::sync::Cache::builder()
                .max_capacity(max_bytes)
                // Each entry costs its text and, in the cache's own
                // structures, its key and links, about 160 bytes.
                .weigher(|_, body: &Arc<str>| {
                    u32::try_from(body.len().saturating_add(160)).unwrap_or(u32::MAX)
                })
                .build(),
            kept_handles: Arc::default(),
        }
    }

    /// Takes one of the [`MAX_KEPT_HANDLES`] places, if one is free.
    fn keep_handle(&self) -> bool {
        use std::sync::atomic::Ordering;
        self.kept_handles
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < MAX_KEPT_HANDLES).then_some(n + 1)
            })
            .is_ok()
    }

    fn let_go_of_handle(&self) {
        self.kept_handles
            .fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
    }

    /// How many handles its readers keep now.
    #[cfg(test)]
    pub(crate) fn kept_handles(&self) -> usize {
        self.kept_handles.load(std::sync::atomic::Ordering::Acquire)
    }
}

impl std::fmt::Debug for BodyCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BodyCache")
            .field("entries", &self.bodies.entry_count())
            .finish()
    }
}

/// How long a reader keeps the repo handle it opened: reads close
/// together (a write's read under the repo's lock, a label rename's
/// threads) share one, and no pack stays mapped for longer (the open's
/// handle, kept, held every pack the start read resident; a handle kept
/// for good would hold the packs a `gc` deleted).
pub(crate) const HANDLE_KEPT: Duration = Duration::from_secs(5);

/// Reads one repo's bodies back.
pub(crate) struct DocReader {
    repo_name: String,
    git_dir: PathBuf,
    /// The handle last opened, and when.
    handle: parking_lot::Mutex<Option<(gix::ThreadSafeRepository, Instant)>>,
    cache: BodyCache,
}

impl Drop for DocReader {
    fn drop(&mut self) {
        if self.handle.get_mut().is_some() {
            self.cache.let_go_of_handle();
        }
    }
}

/// The one field of a document read back for its body.
#[derive(serde::Deserialize)]
struct BodyOnly {
    body: String,
}

impl DocReader {
    pub(crate) fn new(repo_name: &str, git_dir: &Path, cache: BodyCache) -> Self {
        DocReader {
            repo_name: repo_name.to_string(),
            git_dir: git_dir.to_path_buf(),
            handle: parking_lot::Mutex::new(None),
            cache,
        }
    }

    /// A handle on the repo, for one batch of reads: the one opened in
    /// the last [`HANDLE_KEPT`], or a new one (kept for the next reads
    /// while fewer than [`MAX_KEPT_HANDLES`] are).
    fn open(&self) -> Result<gix::Repository, MetaError> {
        let mut handle = self.handle.lock();
        if let Some((repo, opened)) = handle.as_ref()
            && opened.elapsed() < HANDLE_KEPT
        {
            return Ok(repo.to_thread_local());
        }
        if handle.take().is_some() {
            self.cache.let_go_of_handle();
        }
        let repo = vole_git::open_gix(&self.git_dir)
            .map_err(|e| {
                MetaError::Unavailable(Unavailable::unreadable_repo(
                    &self.repo_name,
                    MetaRepoError::Open(e),
                ))
            })?
            .into_sync();
        let local = repo.to_thread_local();
        if self.cache.keep_handle() {
            *handle = Some((repo, Instant::now()));
        }
        Ok(local)
    }

    /// Lets go of the handle if it was opened `age` ago or longer
    /// ([`HANDLE_KEPT`] for the upkeep, so a reader that reads no more
    /// keeps nothing open; zero after a `gc` deleted the packs it maps).
    pub(crate) fn release_older_than(&self, age: Duration) {
        let mut handle = self.handle.lock();
        if handle
            .as_ref()
            .is_some_and(|(_, opened)| opened.elapsed() >= age)
        {
            *handle = None;
            self.cache.let_go_of_handle();
        }
    }

    /// Whether it holds a repo handle now.
    #[cfg(test)]
    pub(crate) fn holds_handle(&self) -> bool {
        self.handle.lock().is_some()
    }

    /// `stored` whole: its body read back if the index left it in git.
    pub(crate) fn whole<T: HasBody>(&self, stored: &Stored<T>) -> Result<T, MetaError> {
        let mut repo = None;
        self.whole_in(&mut repo, stored.clone())
    }

    /// Every document of `stored` whole, in order (one repo handle for
    /// all).
    pub(crate) fn all_whole<T: HasBody>(
        &self,
        stored: impl IntoIterator<Item = Stored<T>>,
    ) -> Result<Vec<T>, MetaError> {
        let mut repo = None;
        stored
            .into_iter()
            .map(|s| self.whole_in(&mut repo, s))
            .collect()
    }

    /// A page of documents the index holds, whole.
    pub(crate) fn whole_page<T: HasBody>(
        &self,
        page: crate::Page<Stored<T>>,
    ) -> Result<crate::Page<T>, MetaError> {
        Ok(crate::Page {
            items: self.all_whole(page.items)?,
            total: page.total,
        })
    }

    /// The body of the document in `blob`, from the cache or the blob.
    pub(crate) fn body(
        &self,
        repo: &mut Option<gix::Repository>,
        blob: ObjectId,
    ) -> Result<Arc<str>, MetaError> {
        if let Some(body) = self.cache.bodies.get(&blob) {
            return Ok(body);
        }
        let repo = match repo {
            Some(repo) => repo,
            None => repo.insert(self.open()?),
        };
        let unreadable = |e: gix::Error| {
            MetaError::Unavailable(Unavailable::unreadable_repo(
                &self.repo_name,
                MetaRepoError::ReadObject(blob, e),
            ))
        };
        let object = repo.find_blob(blob).map_err(unreadable)?;
        let body: Arc<str> = serde_json::from_slice::<BodyOnly>(&object.data)
            .map_err(|e| {
                MetaError::Unavailable(Unavailable::unreadable_repo(
                    &self.repo_name,
                    MetaRepoError::Document(blob, Arc::new(e)),
                ))
            })?
            .body
            .into();
        self.cache.bodies.insert(blob, body.clone());
        Ok(body)
    }

    /// `stored` whole, a body not cached read with `repo` (opened at the
    /// first such read of a batch).
    pub(crate) fn whole_in<T: HasBody>(
        &self,
        repo: &mut Option<gix::Repository>,
        stored: Stored<T>,
    ) -> Result<T, MetaError> {
        let (mut doc, blob) = stored.into_parts();
        if let Some(blob) = blob {
            *doc.body_mut() = self.body(repo, blob)?.to_string();
        }
        Ok(doc)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_readers_of_a_store_keep_at_most_their_bound_of_handles_and_still_read_past_it() {
        let dir = tempfile::tempdir().unwrap();
        let cache = BodyCache::new(1 << 20);
        let over = MAX_KEPT_HANDLES + 6;
        let readers: Vec<(DocReader, ObjectId, String)> = (0..over)
            .map(|i| {
                let git_dir = dir.path().join(format!("r{i}.git"));
                let repo = gix::init_bare(&git_dir).unwrap();
                let body = format!("the body of repo {i}");
                let doc = serde_json::to_vec(&serde_json::json!({ "body": body })).unwrap();
                let blob = repo.write_blob(&doc).unwrap().detach();
                let reader = DocReader::new(&format!("ann/r{i}"), &git_dir, cache.clone());
                (reader, blob, body)
            })
            .collect();
        for (reader, blob, body) in &readers {
            let read = reader.body(&mut None, *blob).unwrap();
            assert_eq!(&*read, body, "a read past the bound read the wrong body");
        }
        let holding = readers.iter().filter(|(r, ..)| r.holds_handle()).count();
        assert_eq!(
            (holding, cache.kept_handles()),
            (MAX_KEPT_HANDLES, MAX_KEPT_HANDLES),
            "the readers keep more handles than their bound"
        );
        // A place let go (a gc's release, a reader dropped) is free again.
        readers[0].0.release_older_than(Duration::ZERO);
        assert_eq!(cache.kept_handles(), MAX_KEPT_HANDLES - 1);
        drop(readers);
        assert_eq!(cache.kept_handles(), 0, "dropped readers kept their places");
    }
}
