//! The pack cache: what `git pack-objects` wrote for a clone or fetch,
//! kept on disk (`data/cache/packs/`) and served again to identical
//! requests, so a storm of CI clones of one commit costs one pack.
//!
//! git runs vole's pack-objects hook (`cli::hook::pack_objects`, through
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
//!   (`cli::hook::resume_uncached`).
//! - **Bounded** by bytes on disk and by age, least recently used first;
//!   an entry being read is never evicted. An entry being made sets aside
//!   its repo's pack size towards the bound until it is whole, and one is
//!   started only where the disk keeps `--pack-cache-min-free` beside it
//!   ([`PackCache::admit`]); otherwise the request bypasses. The directory
//!   is emptied at start, so a partly written entry is never served after
//!   a crash.
//!
//! What does not live here: the hook's side (`cli/hook.rs` in `vole`),
//! the control connection that carries the reader (`vole-control`'s
//! `server.rs`), the transport that turns the cache on (`vole-transport`).
//! Both services use the cache; neither knows the other.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use serde::Serialize;
use sha2::{Digest, Sha256};
use tokio::io::AsyncWriteExt;
use tokio::sync::watch;

use vole_config::PackCacheSettings;
use vole_git::Git;

/// Arguments of `git pack-objects` that are keyed (each changes the
/// pack), besides `--filter=<spec>`. Any argument not here nor in
/// [`UNKEYED`] (`--uri-protocol`, `--all`, ...), and any git option but
/// `--shallow-file`, makes the request bypass the cache.
pub const KEYED: &[&str] = &[
    "--revs",
    "--thin",
    "--stdout",
    "--delta-base-offset",
    "--include-tag",
    // The shallow commits come on stdin (keyed with it).
    "--shallow",
];

/// Arguments that change only what pack-objects says on stderr: not
/// keyed, not passed to the producer.
pub const UNKEYED: &[&str] = &["--progress", "-q"];

/// Largest stdin (wants and haves) a cached request may have; a larger
/// one (an incremental fetch with a very long history of haves) bypasses.
pub const MAX_STDIN: usize = 512 * 1024;

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

/// Why a pack was not made, and whose fault it was (see [`State`]).
struct Failure {
    cache: bool,
    why: String,
}

/// A scratch file removed however its scope ends.
struct RemoveOnDrop(PathBuf);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Files removed when it is dropped.
struct RemoveAllOnDrop(Vec<PathBuf>);

impl Drop for RemoveAllOnDrop {
    fn drop(&mut self) {
        for path in &self.0 {
            let _ = std::fs::remove_file(path);
        }
    }
}

/// A request's answer: stream `tmp` (or `pack`, once renamed) and wait
/// for the state to be `Done`.
pub struct Reader {
    pub tmp: PathBuf,
    pub pack: PathBuf,
    pub state: watch::Receiver<State>,
    /// It joined a pack another request's producer was making (not the
    /// request that started it, nor a hit, counted as it opened): what it
    /// is sent counts as served from the cache once the pack is done.
    pub follower: bool,
    readers: Arc<AtomicUsize>,
    stop: Arc<tokio::sync::Notify>,
    cache: Arc<PackCache>,
}

impl Drop for Reader {
    fn drop(&mut self) {
        // Under the entries' lock, as `open` joins: no request can join a
        // pack whose producer this stops.
        let last = {
            let _entries = self.cache.entries.lock();
            let last = self.readers.fetch_sub(1, Ordering::AcqRel) == 1;
            if last && *self.state.borrow() == State::Producing {
                // No one is left to read what is being made.
                self.stop.notify_one();
            }
            last
        };
        if last {
            self.cache.evict();
        }
    }
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

    /// The key of a request, or why it bypasses the cache; with the
    /// arguments the producer runs git with (`git ARGS`).
    ///
    /// `request.args` is the command git would have run, after `git`:
    /// git's own options (only `--shallow-file FILE`, the file's content
    /// keyed), then `pack-objects` and its arguments ([`KEYED`] keyed and
    /// passed on, [`UNKEYED`] dropped, anything else a bypass).
    pub fn key(
        request: &PackRequest,
        generation: u64,
    ) -> Result<(String, Vec<String>), &'static str> {
        if request.stdin.len() > MAX_STDIN {
            return Err("the request's wants and haves are too long to key");
        }
        let mut hash = Sha256::new();
        hash.update(request.repo.as_bytes());
        hash.update([0]);
        hash.update(generation.to_le_bytes());
        let mut producer_args = Vec::new();
        let mut args = request.args.iter();
        // git's own options, up to the subcommand.
        loop {
            match args.next().map(String::as_str) {
                Some("pack-objects") => break,
                Some("--shallow-file") => {
                    let Some(path) = args.next() else {
                        return Err("--shallow-file without a value");
                    };
                    hash.update(b"--shallow-file\0");
                    if !path.is_empty() {
                        // The file is the request's (deleted when its
                        // upload-pack ends): its content is keyed, and the
                        // producer gets a copy (see `produce`).
                        let content =
                            std::fs::read(path).map_err(|_| "the --shallow-file cannot be read")?;
                        hash.update(&content);
                    }
                    hash.update([0]);
                    producer_args.push("--shallow-file".to_string());
                    producer_args.push(path.clone());
                }
                Some(_) => return Err("git was given an option the cache does not key"),
                None => return Err("the command is not git pack-objects"),
            }
        }
        producer_args.push("pack-objects".to_string());
        for arg in args {
            if UNKEYED.contains(&arg.as_str()) {
                continue;
            }
            if arg.starts_with("--filter=") || KEYED.contains(&arg.as_str()) {
                hash.update(arg.as_bytes());
                hash.update([0]);
                producer_args.push(arg.clone());
                continue;
            }
            return Err("pack-objects was asked for something the cache does not key");
        }
        hash.update([1]);
        hash.update(&request.stdin);
        Ok((hex::encode(hash.finalize()), producer_args))
    }

    /// Serves `request` from the cache: a complete entry (a hit), one
    /// being written (a follower), or a new one started now (a miss).
    pub fn open(self: &Arc<Self>, request: PackRequest, generation: u64) -> Open {
        if !self.enabled() {
            // Never reached while the server runs: with the cache off, git
            // is not given the hook. Counted, so a test can tell.
            self.counters.bypasses.fetch_add(1, Ordering::Relaxed);
            return Open::Bypass("the pack cache is off");
        }
        let (key, producer_args) = match Self::key(&request, generation) {
            Ok(key) => key,
            Err(why) => {
                tracing::debug!(repo = request.repo, args = ?request.args, why, "pack request bypasses the cache");
                self.counters.bypasses.fetch_add(1, Ordering::Relaxed);
                return Open::Bypass(why);
            }
        };
        // Each producer writes a file of its own: one being stopped may
        // still write while a new one for the same key starts.
        let tmp = self.dir.join(format!(
            "{key}.{}.tmp",
            self.producers.fetch_add(1, Ordering::Relaxed)
        ));
        let pack = self.dir.join(format!("{key}.pack"));
        // Files evicted to make room: removed once the lock is let go
        // (declared first, so dropped last).
        let mut evicted = RemoveAllOnDrop(Vec::new());
        let mut entries = self.entries.lock();
        let now = Instant::now();
        if let Some(entry) = entries.get_mut(&key) {
            let state = *entry.state.borrow();
            let fresh = now.duration_since(entry.created) < self.settings.max_age;
            let usable = match state {
                // Whole on disk: an entry cut short (a failing disk, a
                // hand in the directory) is made again, never served.
                State::Done(size) => {
                    fresh && std::fs::metadata(&pack).is_ok_and(|m| m.is_file() && m.len() == size)
                }
                // Joined only while someone reads it (with no reader left it
                // is being stopped) and while its producer lives.
                State::Producing => {
                    entry.readers.load(Ordering::Acquire) > 0 && entry.state.has_changed().is_ok()
                }
                State::Failed { .. } => false,
            };
            if usable {
                entry.last_used = now;
                entry.readers.fetch_add(1, Ordering::AcqRel);
                match state {
                    State::Done(size) => {
                        self.counters.hits.fetch_add(1, Ordering::Relaxed);
                        self.counters
                            .bytes_served
                            .fetch_add(size, Ordering::Relaxed);
                    }
                    _ => {
                        self.counters.followers.fetch_add(1, Ordering::Relaxed);
                    }
                }
                return Open::Read(Reader {
                    tmp: entry.tmp.clone(),
                    pack,
                    follower: !matches!(state, State::Done(_)),
                    state: entry.state.clone(),
                    readers: entry.readers.clone(),
                    stop: entry.stop.clone(),
                    cache: self.clone(),
                });
            }
            // Stale, failed or gone: dropped, and made again below.
            if entry.readers.load(Ordering::Acquire) == 0 {
                let old = entries.remove(&key).expect("just found");
                self.forget_bytes(&old, &pack);
            } else {
                // Someone still reads the old file: this request goes
                // its own way.
                self.counters.bypasses.fetch_add(1, Ordering::Relaxed);
                return Open::Bypass("an older copy of this pack is still being read");
            }
        }
        let reserved = match self.admit(&mut entries, &request.repo_dir, &mut evicted.0) {
            Ok(reserved) => reserved,
            Err(why) => {
                tracing::debug!(repo = request.repo, why, "pack request bypasses the cache");
                self.counters.bypasses.fetch_add(1, Ordering::Relaxed);
                return Open::Bypass(why);
            }
        };
        // Made before the answer goes out: the reader opens it by name.
        let out = match std::fs::File::create(&tmp) {
            Ok(file) => file,
            Err(e) => {
                tracing::warn!(error = %e, "the pack cache cannot write; serving without it");
                self.reserved.fetch_sub(reserved, Ordering::AcqRel);
                self.counters.bypasses.fetch_add(1, Ordering::Relaxed);
                return Open::Bypass("the pack cache cannot write");
            }
        };
        self.counters.misses.fetch_add(1, Ordering::Relaxed);
        let (state_tx, state_rx) = watch::channel(State::Producing);
        let readers = Arc::new(AtomicUsize::new(1));
        let stop = Arc::new(tokio::sync::Notify::new());
        entries.insert(
            key.clone(),
            Entry {
                state: state_rx.clone(),
                readers: readers.clone(),
                stop: stop.clone(),
                created: now,
                last_used: now,
                bytes: 0,
                reserved,
                tmp: tmp.clone(),
            },
        );
        drop(entries);
        let cache = self.clone();
        let (tmp2, pack2, key2, stop2) = (tmp.clone(), pack.clone(), key.clone(), stop.clone());
        tokio::spawn(async move {
            let outcome = cache
                .produce(&request, &producer_args, out, &tmp2, &pack2, &stop2)
                .await;
            {
                // What was set aside is given back; a complete entry counts
                // its size instead. The entry is this producer's only if it
                // holds the same stop signal: one dropped meanwhile gave its
                // reservation back as it went (`PackCache::remove`), and a
                // pack nobody counts is not kept.
                let mut entries = cache.entries.lock();
                match entries.get_mut(&key2) {
                    Some(entry) if Arc::ptr_eq(&entry.stop, &stop2) => {
                        cache.reserved.fetch_sub(entry.reserved, Ordering::AcqRel);
                        entry.reserved = 0;
                        if let Ok(size) = outcome {
                            cache.bytes.fetch_add(size, Ordering::AcqRel);
                            entry.bytes = size;
                            // Its age counts from when it is whole.
                            entry.created = Instant::now();
                        }
                    }
                    _ => {
                        if outcome.is_ok() {
                            let _ = std::fs::remove_file(&pack2);
                        }
                    }
                }
            }
            let state = match outcome {
                Ok(size) => State::Done(size),
                Err(failure) => {
                    cache.counters.failures.fetch_add(1, Ordering::Relaxed);
                    tracing::info!(repo = request.repo, error = %failure.why, cache = failure.cache, "a pack for the cache was not made");
                    let _ = std::fs::remove_file(&tmp2);
                    State::Failed {
                        cache: failure.cache,
                    }
                }
            };
            let _ = state_tx.send(state);
            cache.evict();
        });
        Open::Read(Reader {
            tmp,
            pack,
            follower: false,
            state: state_rx,
            readers,
            stop,
            cache: self.clone(),
        })
    }

    /// Runs git (`args`: `[--shallow-file F] pack-objects ...`) for an
    /// entry in its own process group (which the sentinel kills should the
    /// server die): its stdout to `tmp`, renamed `pack` when pack-objects
    /// succeeded. Stops when `stop` is notified (no reader is left).
    async fn produce(
        &self,
        request: &PackRequest,
        args: &[String],
        out: std::fs::File,
        tmp: &Path,
        pack: &Path,
        stop: &tokio::sync::Notify,
    ) -> Result<u64, Failure> {
        let cache_failed = |why: std::io::Error| Failure {
            cache: true,
            why: why.to_string(),
        };
        // A shallow file is the request's, deleted when its upload-pack
        // ends: the producer reads its own copy.
        let mut args = args.to_vec();
        let shallow_copy = tmp.with_extension("shallow");
        let _shallow = RemoveOnDrop(shallow_copy.clone());
        if let Some(i) = args.iter().position(|a| a == "--shallow-file")
            && let Some(path) = args.get(i + 1).filter(|p| !p.is_empty())
        {
            std::fs::copy(path, &shallow_copy).map_err(cache_failed)?;
            args[i + 1] = shallow_copy.display().to_string();
        }
        let mut command = vole_git::grouped(self.git.path());
        command
            .env_clear()
            .envs(self.git.child_env())
            .env("GIT_DIR", &request.repo_dir)
            .env("GIT_CONFIG_COUNT", self.child_config.len().to_string());
        for (i, (key, value)) in self.child_config.iter().enumerate() {
            command.env(format!("GIT_CONFIG_KEY_{i}"), key);
            command.env(format!("GIT_CONFIG_VALUE_{i}"), value);
        }
        let mut child = command
            .args(&args)
            .current_dir(&request.repo_dir)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .process_group(0)
            .spawn()
            .map_err(cache_failed)?;
        let mut stdin = child.stdin.take().expect("stdin is piped");
        let input = request.stdin.clone();
        let feed = tokio::spawn(async move {
            let _ = stdin.write_all(&input).await;
        });
        let stdout = child
            .stdout
            .take()
            .expect("stdout is piped")
            .into_owned_fd()
            .map_err(cache_failed)?;
        // On a blocking thread, pipe to file in the kernel: through tokio's
        // file every write of git's was a hop to the blocking pool, and a
        // miss ran at a fraction of pack-objects' own pace.
        let mut copy = vole_stdx::spawn_blocking(move || splice_to_file(stdout, out));
        // The copy wins a tie with a stop: a pack that is whole is kept.
        let copied = tokio::select! {
            biased;
            copied = &mut copy => copied
                .map_err(|e| cache_failed(std::io::Error::other(e)))?
                .map_err(cache_failed)?,
            () = stop.notified() => {
                // Its output closes, which ends the copy.
                let _ = child.kill().await;
                let _ = copy.await;
                return Err(Failure { cache: true, why: "no reader is left".into() });
            }
        };
        let _ = feed.await;
        let status = child.wait().await.map_err(cache_failed)?;
        if !status.success() {
            return Err(Failure {
                cache: false,
                why: format!("pack-objects {status}"),
            });
        }
        std::fs::rename(tmp, pack).map_err(cache_failed)?;
        Ok(copied)
    }

    fn forget_bytes(&self, entry: &Entry, pack: &Path) {
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
    fn admit(
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

/// Copies a pipe (git's output, switched to blocking mode) into `file`
/// until the pipe's end; returns the bytes copied.
fn splice_to_file(pipe: std::os::fd::OwnedFd, mut file: std::fs::File) -> std::io::Result<u64> {
    rustix::io::ioctl_fionbio(&pipe, false)?;
    splice_all(&mut std::fs::File::from(pipe), &mut file)
}

/// Moves what `from` holds, to its end, into `to`: in the kernel with
/// splice(2) where one side is a pipe (a cache entry into git's stdout,
/// git's output into an entry), a plain copy where splice does not apply
/// and nothing was moved yet. Returns the bytes moved.
pub fn splice_all<R, W>(from: &mut R, to: &mut W) -> std::io::Result<u64>
where
    R: std::io::Read + std::os::fd::AsFd,
    W: std::io::Write + std::os::fd::AsFd,
{
    let mut moved = 0u64;
    loop {
        match rustix::pipe::splice(
            from.as_fd(),
            None,
            to.as_fd(),
            None,
            1 << 20,
            rustix::pipe::SpliceFlags::MOVE,
        ) {
            Ok(0) => return Ok(moved),
            Ok(n) => moved += n as u64,
            Err(rustix::io::Errno::INTR) => {}
            Err(rustix::io::Errno::INVAL) if moved == 0 => return std::io::copy(from, to),
            Err(e) => return Err(e.into()),
        }
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

/// How long a reader waits, at most, for a pack being made.
pub const READ_DEADLINE: Duration = Duration::from_secs(600);

#[cfg(test)]
mod tests {
    use super::*;

    /// A request as git makes it: `pack-objects ARGS` (after `git`).
    fn request(args: &[&str], stdin: &[u8]) -> PackRequest {
        PackRequest {
            repo_dir: PathBuf::from("/nonexistent"),
            repo: "ann/demo".into(),
            args: std::iter::once("pack-objects")
                .chain(args.iter().copied())
                .map(str::to_string)
                .collect(),
            stdin: stdin.to_vec(),
        }
    }

    #[test]
    fn the_key_follows_what_changes_the_pack_and_nothing_else() {
        let base = [
            "--revs",
            "--thin",
            "--stdout",
            "--delta-base-offset",
            "--include-tag",
        ];
        let key = |args: &[&str], stdin: &[u8], generation| {
            PackCache::key(&request(args, stdin), generation).unwrap().0
        };
        let k = key(&base, b"abc\n--not\n\n", 1);
        let mut with_progress = base.to_vec();
        with_progress.push("--progress");
        assert_eq!(
            k,
            key(&with_progress, b"abc\n--not\n\n", 1),
            "progress is not keyed"
        );
        assert_ne!(k, key(&base, b"abd\n--not\n\n", 1), "wants are keyed");
        assert_ne!(
            k,
            key(&base, b"abc\n--not\n\n", 2),
            "the ref state is keyed"
        );
        assert_ne!(
            k,
            key(&base[..4], b"abc\n--not\n\n", 1),
            "--include-tag is keyed"
        );
        let mut filtered = base.to_vec();
        filtered.push("--filter=blob:none");
        assert_ne!(k, key(&filtered, b"abc\n--not\n\n", 1), "filters are keyed");
        let (_, producer) = PackCache::key(&request(&with_progress, b""), 1).unwrap();
        assert!(
            !producer.contains(&"--progress".to_string()),
            "{producer:?}"
        );
        // Unknown arguments and huge stdin bypass.
        assert!(PackCache::key(&request(&["--all"], b""), 1).is_err());
        assert!(PackCache::key(&request(&["--uri-protocol=https"], b""), 1).is_err());
        assert!(PackCache::key(&request(&base, &vec![b'a'; MAX_STDIN + 1]), 1).is_err());
    }

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

    #[test]
    fn a_shallow_file_is_keyed_by_content_not_path() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b, c) = (
            dir.path().join("a"),
            dir.path().join("b"),
            dir.path().join("c"),
        );
        std::fs::write(&a, b"1111\n").unwrap();
        std::fs::write(&b, b"1111\n").unwrap();
        std::fs::write(&c, b"2222\n").unwrap();
        // As git runs it: `git --shallow-file FILE pack-objects ...`.
        let shallow = |path: &str| {
            let mut request = request(&["--revs", "--stdout"], b"x\n");
            request
                .args
                .splice(0..0, ["--shallow-file".to_string(), path.to_string()]);
            request
        };
        let key = |path: &Path| {
            PackCache::key(&shallow(path.to_str().unwrap()), 1)
                .unwrap()
                .0
        };
        assert_eq!(key(&a), key(&b));
        assert_ne!(key(&a), key(&c));
        let (empty, producer) = PackCache::key(&shallow(""), 1).unwrap();
        assert_ne!(empty, key(&a));
        assert_eq!(&producer[..3], ["--shallow-file", "", "pack-objects"]);
        // Any other git option bypasses.
        let mut other = request(&["--revs"], b"");
        other.args.insert(0, "--git-dir=/elsewhere".into());
        assert!(PackCache::key(&other, 1).is_err());
    }
}
