//! The cache's bounds: room set aside for packs being made, the disk's
//! free space, and eviction by age and by bytes, least recently used
//! first.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::time::Instant;

use crate::{Entry, PackCache, State};

/// Files removed when it is dropped.
pub(crate) struct RemoveAllOnDrop(pub(crate) Vec<PathBuf>);

impl Drop for RemoveAllOnDrop {
    fn drop(&mut self) {
        for path in &self.0 {
            let _ = std::fs::remove_file(path);
        }
    }
}

impl PackCache {
    pub(crate) fn forget_bytes(&self, entry: &Entry, pack: &Path) {
        let _ = std::fs::remove_file(pack);
        self.bytes.fetch_sub(entry.bytes, Ordering::AcqRel);
        self.reserved.fetch_sub(entry.reserved, Ordering::AcqRel);
    }

    /// Whether a new entry may be made for a pack of the repo in
    /// `repo_dir`, and the bytes set aside for it while it is made: the
    /// size of the repo's packs. pack-objects reuses objects as they are
    /// stored, so a pack of some of a repo's objects is about that size at
    /// most (a shallow pack whose objects were stored as deltas against
    /// ones left out can come out larger; the bound then holds only
    /// roughly). Entries being made so count towards `--pack-cache-size`
    /// as well as complete ones. Idle complete entries are evicted, least
    /// recently used first, to make room (their files are pushed to
    /// `unlink`, for after the lock). With no room, or with less than
    /// `--pack-cache-min-free` left on the disk beside the new entry, the
    /// request bypasses the cache.
    pub(crate) fn admit(
        &self,
        entries: &mut HashMap<String, Entry>,
        repo_dir: &Path,
        unlink: &mut Vec<PathBuf>,
    ) -> Result<u64, &'static str> {
        let estimate = repo_pack_bytes(repo_dir);
        if estimate > self.settings.max_bytes {
            return Err("the repo's packs are larger than the whole pack cache");
        }
        let free = rustix::fs::statvfs(&self.dir)
            .map(|s| s.f_bavail.saturating_mul(s.f_frsize))
            .unwrap_or(0);
        if free < estimate.saturating_add(self.settings.min_free) {
            return Err("the disk is too full to cache a pack");
        }
        let room = self.settings.max_bytes - estimate;
        unlink.extend(self.evict_locked(entries, room));
        let used = self.bytes.load(Ordering::Acquire) + self.reserved.load(Ordering::Acquire);
        if used > room {
            return Err("the pack cache is full of packs being read or made");
        }
        self.reserved.fetch_add(estimate, Ordering::AcqRel);
        Ok(estimate)
    }

    /// Drops entries past their age, failed ones, and the least recently
    /// used complete ones while the bytes are over the bound; never one
    /// being read. Run as readers and producers finish, and every few
    /// seconds by the server's maintenance (so the age bound holds on an
    /// idle server too).
    pub fn evict(&self) {
        let mut entries = self.entries.lock();
        let unlink = self.evict_locked(&mut entries, self.settings.max_bytes);
        drop(entries);
        // Outside the lock: a big file's unlink takes a while.
        for path in unlink {
            let _ = std::fs::remove_file(path);
        }
    }

    /// [`Self::evict`] with the lock held, down to `bound` bytes of
    /// complete and reserved entries; returns the files to remove.
    fn evict_locked(&self, entries: &mut HashMap<String, Entry>, bound: u64) -> Vec<PathBuf> {
        let now = Instant::now();
        let mut drop_keys: Vec<String> = entries
            .iter()
            .filter(|(_, e)| e.readers.load(Ordering::Acquire) == 0)
            .filter(|(_, e)| match *e.state.borrow() {
                State::Failed { .. } => true,
                State::Done(_) => now.duration_since(e.created) >= self.settings.max_age,
                // A producer that is gone without a word.
                State::Producing => e.state.has_changed().is_err(),
            })
            .map(|(k, _)| k.clone())
            .collect();
        let mut bytes = self.bytes.load(Ordering::Acquire) + self.reserved.load(Ordering::Acquire);
        let gone: u64 = drop_keys
            .iter()
            .filter_map(|k| entries.get(k))
            .map(|e| e.bytes + e.reserved)
            .sum();
        bytes = bytes.saturating_sub(gone);
        if bytes > bound {
            let mut idle: Vec<(&String, &Entry)> = entries
                .iter()
                .filter(|(k, e)| {
                    e.readers.load(Ordering::Acquire) == 0
                        && matches!(*e.state.borrow(), State::Done(_))
                        && !drop_keys.contains(k)
                })
                .collect();
            idle.sort_by_key(|(_, e)| e.last_used);
            for (key, entry) in idle {
                if bytes <= bound {
                    break;
                }
                bytes = bytes.saturating_sub(entry.bytes);
                drop_keys.push(key.clone());
            }
        }
        let mut unlink = Vec::new();
        for key in drop_keys {
            if let Some(entry) = entries.remove(&key) {
                if matches!(*entry.state.borrow(), State::Done(_)) {
                    self.counters.evictions.fetch_add(1, Ordering::Relaxed);
                }
                self.bytes.fetch_sub(entry.bytes, Ordering::AcqRel);
                self.reserved.fetch_sub(entry.reserved, Ordering::AcqRel);
                unlink.push(self.dir.join(format!("{key}.pack")));
            }
        }
        unlink
    }
}

/// Bytes of a repo's stored objects: its packs (`objects/pack/*.pack`)
/// and its loose objects (`objects/xx/*`, each compressed as a pack would
/// hold it, or larger); what cannot be read counts 0.
fn repo_pack_bytes(repo_dir: &Path) -> u64 {
    let objects = repo_dir.join("objects");
    let sizes = |dir: &Path, packs_only: bool| -> u64 {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return 0;
        };
        entries
            .flatten()
            .filter(|e| !packs_only || e.path().extension().is_some_and(|x| x == "pack"))
            .filter_map(|e| e.metadata().ok())
            .filter(|m| m.is_file())
            .map(|m| m.len())
            .sum()
    };
    let mut bytes = sizes(&objects.join("pack"), true);
    for fanout in 0..=255u8 {
        bytes += sizes(&objects.join(format!("{fanout:02x}")), false);
    }
    bytes
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::AtomicUsize;
    use std::time::Duration;

    use tokio::sync::watch;
    use vole_config::PackCacheSettings;
    use vole_git::Git;

    use super::*;

    /// A cache in a fresh directory with these bounds.
    fn cache(max_bytes: u64, min_free: u64) -> (tempfile::TempDir, PackCache) {
        let dir = tempfile::tempdir().unwrap();
        let settings = PackCacheSettings {
            max_bytes,
            max_age: Duration::from_secs(300),
            min_free,
        };
        let git = Git::locate(None).unwrap();
        let cache = PackCache::new(dir.path().join("packs"), settings, git, Vec::new()).unwrap();
        (dir, cache)
    }

    /// A repo directory whose packs come to `bytes`.
    fn repo_of(dir: &Path, name: &str, bytes: u64) -> PathBuf {
        let repo = dir.join(name);
        std::fs::create_dir_all(repo.join("objects/pack")).unwrap();
        let pack = std::fs::File::create(repo.join("objects/pack/pack-1.pack")).unwrap();
        pack.set_len(bytes).unwrap();
        repo
    }

    /// An entry in `state` with `bytes` complete or `reserved` set aside;
    /// its state's sender is returned (a dropped one means a dead producer).
    fn entry(state: State, bytes: u64, reserved: u64) -> (Entry, watch::Sender<State>) {
        let (tx, rx) = watch::channel(state);
        let now = Instant::now();
        let entry = Entry {
            state: rx,
            readers: Arc::new(AtomicUsize::new(0)),
            stop: Arc::new(tokio::sync::Notify::new()),
            created: now,
            last_used: now,
            bytes,
            reserved,
            tmp: PathBuf::from("unused.tmp"),
        };
        (entry, tx)
    }

    #[test]
    fn packs_being_made_count_towards_the_byte_bound() {
        const MIB: u64 = 1 << 20;
        let (dir, cache) = cache(100 * MIB, 0);
        let repo = repo_of(dir.path(), "repo", 60 * MIB);
        let mut unlink = Vec::new();
        let mut entries = HashMap::new();
        // One pack of 60 MiB being made: a second of 60 MiB does not fit.
        let reserved = cache.admit(&mut entries, &repo, &mut unlink).unwrap();
        assert_eq!(reserved, 60 * MIB);
        let (making, _making_tx) = entry(State::Producing, 0, reserved);
        entries.insert("making".into(), making);
        assert_eq!(
            cache.admit(&mut entries, &repo, &mut unlink),
            Err("the pack cache is full of packs being read or made"),
            "a pack being made was not counted"
        );
        // Made: its size replaces what was set aside; an idle complete
        // entry is evicted to make room for the next.
        cache.reserved.fetch_sub(reserved, Ordering::AcqRel);
        cache.bytes.fetch_add(55 * MIB, Ordering::AcqRel);
        let (done, _done_tx) = entry(State::Done(55 * MIB), 55 * MIB, 0);
        entries.insert("making".into(), done);
        assert_eq!(cache.admit(&mut entries, &repo, &mut unlink), Ok(60 * MIB));
        assert!(
            entries.is_empty(),
            "the idle entry was not evicted for room"
        );
        assert_eq!(unlink.len(), 1);
        assert_eq!(cache.bytes.load(Ordering::Acquire), 0);
        assert_eq!(cache.reserved.load(Ordering::Acquire), 60 * MIB);
        // A repo larger than the whole cache never starts an entry.
        let huge = repo_of(dir.path(), "huge", 101 * MIB);
        assert!(cache.admit(&mut entries, &huge, &mut unlink).is_err());
    }

    #[test]
    fn a_pack_is_cached_only_where_the_disk_keeps_its_free_space() {
        let (dir, cache) = cache(1 << 30, u64::MAX / 4);
        let repo = repo_of(dir.path(), "repo", 1000);
        assert_eq!(
            cache.admit(&mut HashMap::new(), &repo, &mut Vec::new()),
            Err("the disk is too full to cache a pack")
        );
        assert_eq!(cache.reserved.load(Ordering::Acquire), 0);
        let (dir, cache) = cache_with_free(0);
        let repo = repo_of(dir.path(), "repo", 1000);
        assert_eq!(
            cache.admit(&mut HashMap::new(), &repo, &mut Vec::new()),
            Ok(1000)
        );
    }

    fn cache_with_free(min_free: u64) -> (tempfile::TempDir, PackCache) {
        cache(1 << 30, min_free)
    }
}
