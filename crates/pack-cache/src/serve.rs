//! Serving a request: a hit on a complete entry, a follower of one being
//! made, or a miss that starts its producer; and the reader each gets.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use tokio::sync::watch;

use crate::bounds::RemoveAllOnDrop;
use crate::produce::Failure;
use crate::{Entry, Open, PackCache, PackRequest, State};

/// How long a reader waits, at most, for a pack being made.
pub const READ_DEADLINE: Duration = Duration::from_secs(600);

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

/// A pack being made: what its producer runs, where it writes, and how
/// it tells its readers.
struct Production {
    request: PackRequest,
    /// git's arguments (see [`PackCache::key`]).
    args: Vec<String>,
    key: String,
    tmp: PathBuf,
    pack: PathBuf,
    /// Notified when no reader is left.
    stop: Arc<tokio::sync::Notify>,
    state: watch::Sender<State>,
}

impl PackCache {
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
        if let Some(answer) = self.open_existing(&mut entries, &key, &pack, now) {
            return answer;
        }
        let (reserved, out) = match self.make_room(&mut entries, &request, &tmp, &mut evicted.0) {
            Ok(made) => made,
            Err(bypass) => return bypass,
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
        let production = Production {
            request,
            args: producer_args,
            key,
            tmp: tmp.clone(),
            pack: pack.clone(),
            stop: stop.clone(),
            state: state_tx,
        };
        tokio::spawn(self.clone().make(production, out));
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

    /// The answer the entry already under `key` gives, if it gives one: a
    /// reader of it (a hit or a follower), or a bypass while an older
    /// copy is still being read. `None` when a new entry is to be made
    /// (none was there, or a stale, failed or gone one was dropped).
    fn open_existing(
        self: &Arc<Self>,
        entries: &mut HashMap<String, Entry>,
        key: &str,
        pack: &Path,
        now: Instant,
    ) -> Option<Open> {
        let entry = entries.get_mut(key)?;
        let state = *entry.state.borrow();
        let fresh = now.duration_since(entry.created) < self.settings.max_age;
        let usable = match state {
            // Whole on disk: an entry cut short (a failing disk, a
            // hand in the directory) is made again, never served.
            State::Done(size) => {
                fresh && std::fs::metadata(pack).is_ok_and(|m| m.is_file() && m.len() == size)
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
            return Some(Open::Read(Reader {
                tmp: entry.tmp.clone(),
                pack: pack.to_path_buf(),
                follower: !matches!(state, State::Done(_)),
                state: entry.state.clone(),
                readers: entry.readers.clone(),
                stop: entry.stop.clone(),
                cache: self.clone(),
            }));
        }
        // Stale, failed or gone: dropped, and made again.
        if entry.readers.load(Ordering::Acquire) == 0 {
            let old = entries.remove(key).expect("just found");
            self.forget_bytes(&old, pack);
            None
        } else {
            // Someone still reads the old file: this request goes
            // its own way.
            self.counters.bypasses.fetch_add(1, Ordering::Relaxed);
            Some(Open::Bypass(
                "an older copy of this pack is still being read",
            ))
        }
    }

    /// Room for a new entry ([`PackCache::admit`]) and its file `tmp`,
    /// made before the answer goes out (the reader opens it by name): the
    /// bytes set aside for it and the file; or the bypass that answers
    /// when either cannot be had.
    fn make_room(
        &self,
        entries: &mut HashMap<String, Entry>,
        request: &PackRequest,
        tmp: &Path,
        evicted: &mut Vec<PathBuf>,
    ) -> Result<(u64, std::fs::File), Open> {
        let reserved = match self.admit(entries, &request.repo_dir, evicted) {
            Ok(reserved) => reserved,
            Err(why) => {
                tracing::debug!(repo = request.repo, why, "pack request bypasses the cache");
                self.counters.bypasses.fetch_add(1, Ordering::Relaxed);
                return Err(Open::Bypass(why));
            }
        };
        match std::fs::File::create(tmp) {
            Ok(file) => Ok((reserved, file)),
            Err(e) => {
                tracing::warn!(error = %e, "the pack cache cannot write; serving without it");
                self.reserved.fetch_sub(reserved, Ordering::AcqRel);
                self.counters.bypasses.fetch_add(1, Ordering::Relaxed);
                Err(Open::Bypass("the pack cache cannot write"))
            }
        }
    }

    /// The producer's task: makes the pack into `out`, settles the
    /// entry's bytes and tells its readers how it ended.
    async fn make(self: Arc<Self>, production: Production, out: std::fs::File) {
        let Production {
            request,
            args,
            key,
            tmp,
            pack,
            stop,
            state: state_tx,
        } = production;
        let outcome = self.produce(&request, &args, out, &tmp, &pack, &stop).await;
        self.settle(&key, &stop, &pack, &outcome);
        let state = match outcome {
            Ok(size) => State::Done(size),
            Err(failure) => {
                self.counters.failures.fetch_add(1, Ordering::Relaxed);
                tracing::info!(repo = request.repo, error = %failure.why, cache = failure.cache, "a pack for the cache was not made");
                let _ = std::fs::remove_file(&tmp);
                State::Failed {
                    cache: failure.cache,
                }
            }
        };
        let _ = state_tx.send(state);
        self.evict();
    }

    /// What was set aside for the entry under `key` is given back; a
    /// complete entry counts its size instead. The entry is this
    /// producer's only if it holds the same `stop` signal: one dropped
    /// meanwhile gave its reservation back as it went
    /// (`PackCache::forget_bytes`), and a pack nobody counts is not kept.
    fn settle(
        &self,
        key: &str,
        stop: &Arc<tokio::sync::Notify>,
        pack: &Path,
        outcome: &Result<u64, Failure>,
    ) {
        let mut entries = self.entries.lock();
        match entries.get_mut(key) {
            Some(entry) if Arc::ptr_eq(&entry.stop, stop) => {
                self.reserved.fetch_sub(entry.reserved, Ordering::AcqRel);
                entry.reserved = 0;
                if let Ok(size) = *outcome {
                    self.bytes.fetch_add(size, Ordering::AcqRel);
                    entry.bytes = size;
                    // Its age counts from when it is whole.
                    entry.created = Instant::now();
                }
            }
            _ => {
                if outcome.is_ok() {
                    let _ = std::fs::remove_file(pack);
                }
            }
        }
    }
}
