//! The pack cache: what `git pack-objects` wrote for a clone or fetch,
//! kept on disk (`data/cache/packs/`) and served again to identical
//! requests, so a storm of CI clones of one commit costs one pack.
//!
//! git runs vole's pack-objects hook (`cli::pack_objects::pack_objects`, through
//! the link `hooks::scripts::pack_objects_hook` names) instead of
//! pack-objects: `uploadpack.packObjectsHook`, which git honours from
//! command-line config only (vole passes it as `GIT_CONFIG_COUNT`
//! settings, which count as such). The hook asks the server over the control socket
//! ([`PackCache::open`]) with the arguments and the request's stdin; the
//! server answers with a file to stream and, on the same connection, when
//! that file is complete.
//!
//! - **Key**: SHA-256 of the repo, the ref state (the ref-move feed's
//!   generation: `--include-tag` makes a pack depend on the repo's tags),
//!   the keyed arguments and stdin (wants, haves, shallow lines; a
//!   `--shallow-file`'s content, not its path). [`KEYED`] lists the
//!   arguments keyed; `--progress` and `-q` only change stderr, are not
//!   keyed and not passed on; anything else makes the request bypass the
//!   cache (the hook runs pack-objects itself).
//! - **One pack per key at a time**: the first request starts a
//!   pack-objects owned by the server (its own process group, not the
//!   client's), writing `<key>.tmp`, renamed `<key>.pack` when complete;
//!   concurrent identical requests follow the file as it grows. The
//!   producer is stopped when no reader is left; when pack-objects fails,
//!   every reader's request fails and the next one starts afresh. When
//!   the cache cannot keep the output (a write fails: a full disk), each
//!   reader sends what was written and runs pack-objects itself for the
//!   rest, checking that its output starts with the bytes already sent
//!   (`cli::pack_objects::resume_uncached`).
//! - **Bounded** by bytes on disk and by age, least recently used first;
//!   an entry being read is never evicted. An entry being made sets aside
//!   its repo's pack size towards the bound until it is whole, and one is
//!   started only where the disk keeps `--pack-cache-min-free` beside it
//!   ([`PackCache::admit`]); otherwise the request bypasses. The directory
//!   is emptied at start, so a partly written entry is never served after
//!   a crash.
//!
//! What does not live here: the hook's side (`cli/pack_objects.rs` in `vole`),
//! the control connection that carries the reader (`vole-control`'s
//! `server.rs`), the transport that turns the cache on (`vole-transport`).
//! Both services use the cache; neither knows the other.

mod bounds;
mod key;
mod produce;
mod serve;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Instant;

use parking_lot::Mutex;
use serde::Serialize;
use tokio::sync::watch;

use vole_config::PackCacheSettings;
use vole_git::Git;

pub use key::{KEYED, MAX_STDIN, UNKEYED};
pub use produce::splice_all;
pub use serve::{READ_DEADLINE, Reader};

/// Where an entry is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    Producing,
    /// Complete, this many bytes.
    Done(u64),
    /// pack-objects failed (`cache: false`: the request fails as it would
    /// without the cache), or the cache could not keep its output
    /// (`cache: true`: a reader that has sent nothing runs pack-objects
    /// itself).
    Failed {
        cache: bool,
    },
}

struct Entry {
    state: watch::Receiver<State>,
    /// Readers holding it (the hooks' control connections).
    readers: Arc<AtomicUsize>,
    /// Tells the producer no reader is left.
    stop: Arc<tokio::sync::Notify>,
    created: Instant,
    last_used: Instant,
    bytes: u64,
    /// While it is being made: the bytes set aside for it ([`PackCache::admit`]).
    reserved: u64,
    /// The file its producer writes (renamed to the key's `.pack`).
    tmp: PathBuf,
}

#[derive(Debug, Default, Serialize)]
pub struct Counters {
    pub hits: AtomicU64,
    pub misses: AtomicU64,
    pub followers: AtomicU64,
    pub bypasses: AtomicU64,
    pub bytes_served: AtomicU64,
    pub evictions: AtomicU64,
    pub failures: AtomicU64,
}

/// The figures of `/api/v1/stats`.
#[derive(Debug, Serialize)]
pub struct PackCacheStats {
    pub enabled: bool,
    pub entries: usize,
    pub bytes: u64,
    pub limit: u64,
    pub hits: u64,
    pub misses: u64,
    pub followers: u64,
    pub bypasses: u64,
    pub bytes_served: u64,
    pub evictions: u64,
    pub failures: u64,
}

/// What [`PackCache::open`] decided.
pub enum Open {
    /// Run pack-objects yourself (and why, for the log).
    Bypass(&'static str),
    Read(Reader),
}

/// A request for a pack, as the hook sends it.
#[derive(Debug, Clone)]
pub struct PackRequest {
    /// The repo's directory.
    pub repo_dir: PathBuf,
    /// `owner/name#incarnation`, keyed.
    pub repo: String,
    /// pack-objects' arguments after `pack-objects`.
    pub args: Vec<String>,
    pub stdin: Vec<u8>,
}

/// The cache of one server; see the module doc.
pub struct PackCache {
    dir: PathBuf,
    settings: PackCacheSettings,
    git: Git,
    /// The settings every git child of an upload runs with.
    child_config: Vec<(String, String)>,
    entries: Mutex<HashMap<String, Entry>>,
    /// Bytes of complete entries on disk.
    bytes: AtomicU64,
    /// Producers started, for their files' names.
    producers: AtomicU64,
    /// Bytes set aside for the entries being made (changed under
    /// `entries`' lock).
    reserved: AtomicU64,
    pub counters: Counters,
}

impl std::fmt::Debug for PackCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PackCache")
            .field("dir", &self.dir)
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

impl PackCache {
    /// A cache in `dir`, emptied now (an entry a crash left half written
    /// must never be served).
    pub fn new(
        dir: PathBuf,
        settings: PackCacheSettings,
        git: Git,
        child_config: Vec<(String, String)>,
    ) -> std::io::Result<PackCache> {
        if dir.exists() {
            std::fs::remove_dir_all(&dir)?;
        }
        if settings.max_bytes > 0 {
            std::fs::create_dir_all(&dir)?;
        }
        Ok(PackCache {
            dir,
            settings,
            git,
            child_config,
            entries: Mutex::new(HashMap::new()),
            bytes: AtomicU64::new(0),
            producers: AtomicU64::new(0),
            reserved: AtomicU64::new(0),
            counters: Counters::default(),
        })
    }

    pub fn enabled(&self) -> bool {
        self.settings.max_bytes > 0
    }

    /// Counts `bytes` served from the cache to a reader that followed the
    /// pack as it was made (a hit is counted as it opens).
    pub fn count_served(&self, bytes: u64) {
        self.counters
            .bytes_served
            .fetch_add(bytes, Ordering::Relaxed);
    }

    pub fn stats(&self) -> PackCacheStats {
        let c = &self.counters;
        PackCacheStats {
            enabled: self.enabled(),
            entries: self.entries.lock().len(),
            bytes: self.bytes.load(Ordering::Acquire),
            limit: self.settings.max_bytes,
            hits: c.hits.load(Ordering::Relaxed),
            misses: c.misses.load(Ordering::Relaxed),
            followers: c.followers.load(Ordering::Relaxed),
            bypasses: c.bypasses.load(Ordering::Relaxed),
            bytes_served: c.bytes_served.load(Ordering::Relaxed),
            evictions: c.evictions.load(Ordering::Relaxed),
            failures: c.failures.load(Ordering::Relaxed),
        }
    }
}
