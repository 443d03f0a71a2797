//! All git reads of the sites module, through gix in-process: a repo's
//! open handle, the ref -> root tree resolution (valid for one feed
//! generation), tree lookups, and blob bytes through the [`SiteCache`].
//! Everything here blocks; handlers call it from `spawn_blocking`.

use parking_lot::{Mutex, RwLock};
use std::collections::HashMap;
use std::io::Write;
use std::path::Path;

use gix::ObjectId;

use super::cache::{self, CachedBytes, SiteCache, Variant};

/// A git read failed (an internal error, not the client's).
#[derive(Debug, thiserror::Error)]
pub enum SiteError {
    #[error("reading the site from git failed")]
    Git(#[from] gix::Error),
    #[error("compressing a site file failed")]
    Gzip(#[from] std::io::Error),
    /// The repo was deleted or created again under its name meanwhile.
    #[error("the repository was deleted or replaced while the request ran")]
    Replaced,
}

impl SiteError {
    /// What a visitor is told.
    pub fn into_app_error(self, what: &str) -> vole_http::error::AppError {
        match self {
            SiteError::Replaced => vole_http::error::AppError::not_found("not found"),
            e => vole_http::error::AppError::internal(what, vole_stdx::error_chain::Chain(&e)),
        }
    }
}

pub use vole_git::Lookup;

/// repo (`owner/name#incarnation`: a repo created again under a name
/// starts with no roots) -> ref -> (feed generation, root tree): looked up
/// by `&str` without allocating.
/// Bounded: one entry per repo on disk (an earlier incarnation's is
/// dropped when the next one's first root is resolved), at most
/// [`MAX_SOURCES_PER_REPO`] sources in each.
type Roots = HashMap<String, HashMap<String, (u64, Option<ObjectId>)>>;

/// Sources (ref and directory) whose roots one repo keeps at most.
const MAX_SOURCES_PER_REPO: usize = 8;

/// Root resolutions and the byte cache of every site, and the repos' gix
/// handles (the server's, shared with the web UI).
pub struct SiteStore {
    roots: Mutex<Roots>,
    cache: RwLock<SiteCache>,
    gix: std::sync::Arc<vole_git::GixHandles>,
}

impl std::fmt::Debug for SiteStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SiteStore").finish_non_exhaustive()
    }
}

impl SiteStore {
    pub fn new(cache_bytes: usize, gix: std::sync::Arc<vole_git::GixHandles>) -> SiteStore {
        SiteStore {
            roots: Mutex::default(),
            cache: RwLock::new(SiteCache::new(cache_bytes)),
            gix,
        }
    }

    fn repo(&self, path: &Path) -> Result<gix::Repository, SiteError> {
        self.gix.open_current(path)?.ok_or(SiteError::Replaced)
    }

    /// Keeps `root` as `repo_name`'s for `source` (see [`Roots`]).
    fn remember_root(&self, repo_name: &str, source: String, root: (u64, Option<ObjectId>)) {
        let mut roots = self.roots.lock();
        if !roots.contains_key(repo_name)
            && let Some((name, _)) = repo_name.split_once('#')
        {
            // A new incarnation of the name: the earlier ones are deleted,
            // and their roots go with them.
            let earlier = format!("{name}#");
            roots.retain(|key, _| !key.starts_with(&earlier));
        }
        let sources = roots.entry(repo_name.to_string()).or_default();
        // A repo serves one source at a time; the others are its settings'
        // past ones.
        if sources.len() >= MAX_SOURCES_PER_REPO {
            sources.clear();
        }
        sources.insert(source, root);
    }

    /// The tree at `dir` of the commit `ref_name` points at, or `None` when
    /// the repo has no such ref or directory. Cached until `generation`
    /// (the ref-move feed's) changes.
    pub fn root_tree(
        &self,
        repo_name: &str,
        path: &Path,
        ref_name: &str,
        dir: &[String],
        generation: u64,
    ) -> Result<Option<ObjectId>, SiteError> {
        if let Some(root) = self.cached_root(repo_name, ref_name, dir, generation) {
            return Ok(root);
        }
        let repo = self.repo(path)?;
        let root = match repo.try_find_reference(ref_name)? {
            None => None,
            Some(reference) => {
                let id = reference.into_fully_peeled_id()?;
                let commit = repo.find_commit(id)?;
                let tree = commit.tree_id()?.detach();
                match self.lookup(path, tree, dir)? {
                    Lookup::Dir(tree) => Some(tree),
                    _ => None,
                }
            }
        };
        self.remember_root(repo_name, source_key(ref_name, dir), (generation, root));
        Ok(root)
    }

    /// The cached root tree for this generation, without touching git:
    /// `Some(root)` on a hit (`root` itself is `None` for "no site").
    pub fn cached_root(
        &self,
        repo_name: &str,
        ref_name: &str,
        dir: &[String],
        generation: u64,
    ) -> Option<Option<ObjectId>> {
        let roots = self.roots.lock();
        match roots
            .get(repo_name)
            .and_then(|sources| sources.get(&source_key(ref_name, dir)))
        {
            Some((seen, root)) if *seen == generation => Some(*root),
            _ => None,
        }
    }

    /// Cached bytes of a blob, without touching git (a request's look,
    /// counted as a hit or a miss).
    pub fn cached_blob(&self, id: ObjectId, variant: Variant) -> Option<CachedBytes> {
        self.cache.read().get(id, variant)
    }

    /// Follows `segments` from `tree`.
    pub fn lookup(
        &self,
        path: &Path,
        tree: ObjectId,
        segments: &[String],
    ) -> Result<Lookup, SiteError> {
        vole_git::lookup(&self.repo(path)?, tree, segments).map_err(SiteError::from)
    }

    /// A blob's bytes, through the cache.
    pub fn blob(&self, path: &Path, id: ObjectId) -> Result<CachedBytes, SiteError> {
        // Counted once, by the request's own look (`cached_blob`).
        if let Some(hit) = self.cache.read().peek(id, Variant::Identity) {
            return Ok(hit);
        }
        let repo = self.repo(path)?;
        let data = cache::keep(repo.find_blob(id)?.detach().data);
        self.cache_mut().insert(id, Variant::Identity, data.clone());
        Ok(data)
    }

    /// A blob gzip-compressed, compressed once and cached.
    pub fn gzipped(&self, path: &Path, id: ObjectId) -> Result<CachedBytes, SiteError> {
        if let Some(hit) = self.cache.read().peek(id, Variant::Gzip) {
            return Ok(hit);
        }
        let plain = self.blob(path, id)?;
        let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        encoder.write_all(&plain)?;
        let data = cache::keep(encoder.finish()?);
        self.cache_mut().insert(id, Variant::Gzip, data.clone());
        Ok(data)
    }

    fn cache_mut(&self) -> parking_lot::RwLockWriteGuard<'_, SiteCache> {
        self.cache.write()
    }

    /// Bytes held by the cache now, and its bound.
    pub fn cache_bytes(&self) -> (usize, usize) {
        let cache = self.cache.read();
        (cache.bytes(), cache.limit())
    }

    pub fn cache_counts(&self) -> super::cache::SiteCacheCounts {
        self.cache.read().counts()
    }
}

/// The root cache's key for a site source: a repo's settings may point its
/// site at another ref or directory, and the old entry must not answer.
fn source_key(ref_name: &str, dir: &[String]) -> String {
    format!("{ref_name}\0{}", dir.join("/"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roots_keep_one_incarnation_of_a_name_and_a_few_sources_of_it() {
        let store = SiteStore::new(1 << 20, std::sync::Arc::new(vole_git::GixHandles::new(4)));
        for n in 0..20 {
            store.remember_root("ann/site#first", format!("ref-{n}"), (1, None));
        }
        store.remember_root("ann/other#x", "r".into(), (1, None));
        assert!(store.roots.lock()["ann/site#first"].len() <= MAX_SOURCES_PER_REPO);
        store.remember_root("ann/site#second", "r".into(), (2, None));
        let roots = store.roots.lock();
        assert!(
            !roots.contains_key("ann/site#first"),
            "a deleted incarnation's roots stay"
        );
        assert!(roots.contains_key("ann/site#second") && roots.contains_key("ann/other#x"));
    }
}
