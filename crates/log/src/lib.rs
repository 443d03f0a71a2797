//! The group-committed Arrow IPC log: every ref move and every metadata
//! write is appended here and acknowledged only once it is durable.
//!
//! # Format and guarantees
//!
//! - One **Arrow IPC stream** file per record kind under `data/log/`
//!   (`refs.arrow` for the hooks' ref moves, `meta.arrow` for the metadata
//!   store's writes; the kinds live with their owners). Each
//!   file starts with its schema message, whose metadata names the kind
//!   (`vole.kind`), its schema version (`vole.schema_version`), the sequence
//!   number of the file's first transaction (`vole.base_seq`) and how many
//!   leading batches are a compaction checkpoint (`vole.checkpoint_frames`).
//! - **One record batch per transaction** (a push that moves three refs is
//!   one batch of three rows), written with **8-byte alignment**
//!   ([`frame::ALIGNMENT`]). pyarrow and any other IPC stream reader reads
//!   the file as it is.
//! - **Sequence numbers are derived, not stored**: the n-th transaction
//!   batch after the checkpoint has sequence `base_seq + n`. Sequences are
//!   per kind, start at 1, never repeat, and survive compaction (which
//!   raises `base_seq`).
//! - **Durability**: [`Log::commit`] returns only once the transaction's
//!   bytes are synced; a failed write or sync is returned to every waiter
//!   above the durable watermark and the log refuses appends until reopened.
//! - **Open = replay**, one frame in memory at a time. A torn tail (a frame
//!   cut short, or a zero-filled tail) is reported and truncated; a frame
//!   that does not parse with real data after it is corruption, and open
//!   fails naming the offset.
//!
//! # Adding a kind
//!
//! A new kind (e.g. audit events) is a new [`RecordKind`] with its own file:
//! old files are never rewritten, and a reader that does not know the kind
//! never opens its file. A new column at the end of an existing kind bumps
//! its `SCHEMA_VERSION`, and `previous_fields` names the columns before it:
//! a file of the previous schema is read (the new column at its default)
//! and rewritten to the new schema when the log opens (`upgrade.rs`). (Why not one file with a kind column: every null column still
//! costs ~80 bytes of IPC metadata per batch, which would double the size of
//! a one-ref transaction.)
//!
//! # What lives where
//!
//! [`record`] (the kind trait and column helpers), [`frame`] (IPC encoding
//! and framing), [`gate`] (group commit, no I/O in its state machine),
//! [`storage`] (the file layer and its fsync), [`counters`], [`tail`]
//! (readers that follow the file), `replay.rs` (reading a file back,
//! torn tails), `compact.rs` (which replaces a file while the log is
//! open), `upgrade.rs` (which rewrites a file of a kind's previous schema
//! at open), and
//! here the [`Log`] that ties them: open, the writer mutex, append and
//! commit.

pub mod columns;
mod compact;
pub mod counters;
pub mod frame;
pub mod gate;
pub mod record;
mod replay;
pub mod storage;
pub mod tail;
mod upgrade;

use parking_lot::Mutex;
use std::fs::File;
use std::io::BufReader;
use std::marker::PhantomData;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use arrow_array::RecordBatch;
use arrow_ipc::MessageHeader;
use arrow_schema::ArrowError;

pub use compact::CompactReport;
pub use counters::{CounterSnapshot, Counters};
pub use gate::{Failure, SyncGate};
pub use record::RecordKind;
use replay::{AcceptError, accept_frame};
pub use replay::{Entry, Replay, TornTail, length_through, replay, replay_with_ends};
pub use storage::{FileStorage, LogStorage, StorageOpener};
pub use tail::Tail;

use frame::{FrameDecoder, FrameEncoder, FrameError, FrameReader, RawFrame};
use record::meta_keys;

/// Why a log operation failed.
#[derive(Debug, thiserror::Error)]
pub enum LogError {
    #[error("log {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("log {path} is corrupt at byte offset {offset}: {reason}")]
    Corrupt {
        path: PathBuf,
        offset: u64,
        reason: String,
    },
    #[error("log {path} holds {found:?} records, expected {expected:?}")]
    WrongKind {
        path: PathBuf,
        found: String,
        expected: &'static str,
    },
    #[error("log {path} refuses appends after an earlier failure ({why}); reopen it")]
    Failed { path: PathBuf, why: Failure },
    #[error("the log's commit task failed")]
    Task(#[source] tokio::task::JoinError),
    #[error("log record could not be encoded: {0}")]
    Encode(#[from] ArrowError),
    #[error("cannot compact through seq {requested}: only records through {applied} are applied")]
    NotApplied { requested: u64, applied: u64 },
    #[error("a transaction needs at least one row")]
    EmptyTransaction,
}

fn io(path: &Path, source: std::io::Error) -> LogError {
    LogError::Io {
        path: path.to_path_buf(),
        source,
    }
}

struct Writer {
    storage: Arc<dyn LogStorage>,
    len: u64,
    next_seq: u64,
    base_seq: u64,
    failed: Option<Failure>,
}

/// One log stream of kind `K`: append, commit (durable), compact.
pub struct Log<K: RecordKind> {
    path: PathBuf,
    opener: StorageOpener,
    writer: Mutex<Writer>,
    gate: SyncGate,
    counters: Arc<Counters>,
    applied: AtomicU64,
    /// Held by a compaction throughout (see `compact`).
    compacting: Mutex<()>,
    /// How far a reader outside the writer (the webhooks' feed) has taken
    /// what it needs: a compaction keeps every transaction after it.
    reader_hold: Mutex<Option<Arc<AtomicU64>>>,
    /// Run by a compaction between its two phases (tests only: see
    /// [`Log::set_between_phases`]).
    between_phases: Mutex<Option<PhaseHook>>,
    _kind: PhantomData<fn() -> K>,
}

/// A test's pause between a compaction's two phases.
pub type PhaseHook = Box<dyn FnMut() + Send>;

impl<K: RecordKind> std::fmt::Debug for Log<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Log")
            .field("path", &self.path)
            .field("kind", &K::KIND)
            .finish_non_exhaustive()
    }
}

impl<K: RecordKind> Log<K> {
    /// Opens (creating if needed) the `K` stream in `dir`, replaying every
    /// entry through `visit` and truncating a torn tail.
    pub fn open(dir: &Path, visit: impl FnMut(Entry<K>)) -> Result<(Log<K>, Replay), LogError> {
        Self::open_with(dir, FileStorage::opener(), visit)
    }

    /// [`Log::open`] through a custom file layer (tests: crash simulation,
    /// sync counting).
    pub fn open_with(
        dir: &Path,
        opener: StorageOpener,
        visit: impl FnMut(Entry<K>),
    ) -> Result<(Log<K>, Replay), LogError> {
        let path = dir.join(K::FILE_NAME);
        std::fs::create_dir_all(dir).map_err(|e| io(dir, e))?;
        let replay = match File::open(&path) {
            Ok(file) => replay::<K, _>(&path, BufReader::with_capacity(1 << 16, file), visit)?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Replay {
                base_seq: 1,
                empty: true,
                ..Replay::default()
            },
            Err(e) => return Err(io(&path, e)),
        };
        // A file of the previous schema is rewritten first (its torn tail,
        // if any, is left behind with it).
        let upgraded_len = if replay.previous_schema {
            Some(upgrade::rewrite_to_current::<K>(&path, &opener, &replay)?)
        } else {
            None
        };
        let storage = opener(&path).map_err(|e| io(&path, e))?;
        if let Some(torn) = &replay.torn {
            tracing::warn!(
                log = %path.display(),
                offset = torn.offset,
                dropped_bytes = torn.dropped_bytes,
                reason = %torn.reason,
                "log tail was torn (a write cut short by a crash); truncated it, every complete transaction before it is kept"
            );
        }
        let mut len = upgraded_len.unwrap_or(replay.valid_len);
        if upgraded_len.is_none() && (replay.torn.is_some() || replay.empty) {
            storage
                .truncate(replay.valid_len)
                .map_err(|e| io(&path, e))?;
        }
        if replay.empty {
            let schema = FrameEncoder::new().schema(&K::schema(1, 0));
            storage.append(&[&schema]).map_err(|e| io(&path, e))?;
            len = schema.len() as u64;
        }
        storage.sync().map_err(|e| io(&path, e))?;
        if replay.empty
            && let Some(parent) = path.parent()
        {
            storage::sync_dir(parent).map_err(|e| io(parent, e))?;
        }
        let last = replay.last_seq();
        let counters = Arc::new(Counters::default());
        let log = Log {
            gate: SyncGate::new(storage.clone(), last, counters.clone()),
            writer: Mutex::new(Writer {
                storage,
                len,
                next_seq: last + 1,
                base_seq: replay.base_seq,
                failed: None,
            }),
            counters,
            applied: AtomicU64::new(replay.base_seq.saturating_sub(1)),
            compacting: Mutex::new(()),
            reader_hold: Mutex::new(None),
            between_phases: Mutex::new(None),
            path,
            opener,
            _kind: PhantomData,
        };
        Ok((log, replay))
    }

    /// Keeps every transaction after `*read_through` through compactions:
    /// a reader that follows the file from outside the writer ([`Tail`])
    /// and records how far it has read (the webhooks' feed) loses nothing
    /// it has not read, however far behind it is.
    pub fn hold_for_reader(&self, read_through: Arc<AtomicU64>) {
        *self.reader_hold.lock() = Some(read_through);
    }

    /// The highest transaction a compaction may drop, as `drop_through`
    /// asks and the reader hold allows.
    fn droppable_through(&self, drop_through: u64) -> u64 {
        match &*self.reader_hold.lock() {
            Some(hold) => drop_through.min(hold.load(Ordering::Acquire)),
            None => drop_through,
        }
    }

    /// Sets what a compaction runs between its copy and its swap, for a
    /// test that appends while the copy holds no lock; `None` clears it.
    #[doc(hidden)]
    pub fn set_between_phases(&self, hook: Option<PhaseHook>) {
        *self.between_phases.lock() = hook;
    }

    /// Waits for a compaction under way, if any, to finish.
    pub fn wait_compaction(&self) {
        drop(self.compacting.lock());
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Encodes and writes one transaction under the writer mutex and returns
    /// its sequence. Not yet durable: pass the sequence to
    /// [`Log::wait_durable`] (outside any lock of yours) before acknowledging.
    pub fn append(&self, rows: &[K]) -> Result<u64, LogError> {
        let frame = self.encode(rows)?;
        self.append_encoded(frame)
    }

    /// Encodes one transaction's frame without touching the file, so a
    /// caller that must order its appends (see `vole_meta`) can encode
    /// outside its own lock and hold that lock only for
    /// [`Log::append_encoded`].
    pub fn encode(&self, rows: &[K]) -> Result<EncodedTxn<K>, LogError> {
        if rows.is_empty() {
            return Err(LogError::EmptyTransaction);
        }
        let frame = match K::body(rows) {
            Some(body) => ENCODER.with(|encoder| encoder.borrow_mut().body(&body)),
            None => encode_frame(&K::batch(rows)?)?,
        };
        Ok(EncodedTxn(frame, PhantomData))
    }

    /// Appends a frame made by [`Log::encode`]; see [`Log::append`].
    pub fn append_encoded(&self, frame: EncodedTxn<K>) -> Result<u64, LogError> {
        self.append_encoded_all(vec![frame])
    }

    /// Appends frames made by [`Log::encode`] back to back with one write,
    /// each its own transaction, and returns the first one's sequence (the
    /// others follow it). All or none: a failed write appends none of them.
    pub fn append_encoded_all(&self, frames: Vec<EncodedTxn<K>>) -> Result<u64, LogError> {
        // Built and encoded outside the writer mutex: a frame is a
        // self-contained message, so only the write itself is serial.
        if frames.is_empty() {
            return Err(LogError::EmptyTransaction);
        }
        let parts: Vec<&[u8]> = frames.iter().map(|f| f.0.as_slice()).collect();
        let len: usize = parts.iter().map(|p| p.len()).sum();
        let asked = Instant::now();
        let mut writer = self.writer.lock();
        let lock_wait = asked.elapsed();
        if let Some(why) = &writer.failed {
            return Err(LogError::Failed {
                path: self.path.clone(),
                why: why.clone(),
            });
        }
        if let Err(e) = writer.storage.append(&parts) {
            // Undo a partial write so the file stays a valid stream, and
            // refuse further appends: a later success must not be
            // acknowledged past a hole.
            if let Err(undo) = writer.storage.truncate(writer.len) {
                tracing::error!(path = %self.path.display(), error = %undo, "cannot undo a partial log append");
            }
            let why = Failure::Write(Arc::new(e));
            writer.failed = Some(why.clone());
            self.gate.fail(why.clone());
            return Err(LogError::Failed {
                path: self.path.clone(),
                why,
            });
        }
        let first = writer.next_seq;
        writer.next_seq += parts.len() as u64;
        writer.len += len as u64;
        self.gate.frame_written(writer.next_seq - 1);
        for part in parts {
            self.counters.record_frame(part.len(), lock_wait);
        }
        Ok(first)
    }

    /// Blocks until `seq` is durable (group commit: at most one sync runs,
    /// and it covers every frame written before it started).
    pub fn wait_durable(&self, seq: u64) -> Result<(), LogError> {
        self.gate.wait_durable(seq).map_err(|why| {
            self.writer.lock().failed.get_or_insert_with(|| why.clone());
            LogError::Failed {
                path: self.path.clone(),
                why,
            }
        })
    }

    /// Appends one transaction and returns once it is durable.
    pub fn commit(&self, rows: &[K]) -> Result<u64, LogError> {
        let announced = self.gate.announce();
        let seq = self.append(rows)?;
        announced.reached_gate();
        self.wait_durable(seq)?;
        Ok(seq)
    }

    /// [`Log::commit`] from async code. The wait parks a thread on a condvar,
    /// so it runs on tokio's blocking pool, never on a runtime worker.
    pub async fn commit_async(self: &Arc<Self>, rows: Vec<K>) -> Result<u64, LogError> {
        let log = self.clone();
        tokio::task::spawn_blocking(move || log.commit(&rows))
            .await
            .unwrap_or_else(|e| Err(LogError::Task(e)))
    }

    pub fn counters(&self) -> CounterSnapshot {
        self.counters.snapshot()
    }

    /// The live counters, histograms included (for the metrics).
    pub fn live_counters(&self) -> &Counters {
        &self.counters
    }

    /// The gate, for tests and benchmarks that hold it.
    pub fn gate(&self) -> &SyncGate {
        &self.gate
    }

    /// Highest sequence written to the kernel / made durable.
    pub fn watermarks(&self) -> (u64, u64) {
        let state = self.gate.state();
        (state.written(), state.durable())
    }

    /// A consumer marks every record through `seq` as applied (e.g. folded
    /// into git); only applied records may be compacted away.
    pub fn mark_applied(&self, seq: u64) {
        self.applied.fetch_max(seq, Ordering::SeqCst);
    }

    pub fn applied(&self) -> u64 {
        self.applied.load(Ordering::SeqCst)
    }

    /// Writes the applied sequence beside the log (`<file>.applied`), for
    /// readers outside the server (`vole check`). Not synced: after a power
    /// cut it may be older than the truth or missing, and a reader then
    /// under-reports what was applied, never over-reports it (the value
    /// only grows, and the file is replaced whole by a rename).
    pub fn persist_applied(&self) -> std::io::Result<()> {
        let path = applied_path(&self.path);
        let tmp = path.with_extension("applied.tmp");
        std::fs::write(&tmp, format!("{}\n", self.applied()))?;
        std::fs::rename(&tmp, &path)
    }
}

/// Where [`Log::persist_applied`] writes for the log file at `log_file`.
pub fn applied_path(log_file: &Path) -> PathBuf {
    log_file.with_extension("applied")
}

/// The applied sequence last persisted beside `log_file`; 0 when there is
/// none or it does not parse (nothing is claimed applied).
pub fn read_applied(log_file: &Path) -> u64 {
    std::fs::read_to_string(applied_path(log_file))
        .ok()
        .and_then(|text| text.trim().parse().ok())
        .unwrap_or(0)
}

thread_local! {
    /// One encoder per thread (it reuses its flatbuffer builder).
    static ENCODER: std::cell::RefCell<FrameEncoder> = std::cell::RefCell::new(FrameEncoder::new());
}

fn encode_frame(batch: &RecordBatch) -> Result<Vec<u8>, ArrowError> {
    ENCODER.with(|encoder| encoder.borrow_mut().batch(batch))
}

/// One transaction's encoded frame, ready for [`Log::append_encoded`].
#[derive(Debug)]
pub struct EncodedTxn<K>(Vec<u8>, PhantomData<K>);

/// Nanoseconds since the Unix epoch, for record timestamps.
pub fn now_ns() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or(Duration::ZERO)
        .as_nanos() as i64
}
