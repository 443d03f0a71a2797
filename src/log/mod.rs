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
//! never opens its file. A new nullable column in an existing kind bumps its
//! `SCHEMA_VERSION`; files are rewritten to the new schema only by a
//! compaction. (Why not one file with a kind column: every null column still
//! costs ~80 bytes of IPC metadata per batch, which would double the size of
//! a one-ref transaction.)
//!
//! # What lives where
//!
//! [`record`] (the kind trait and column helpers), [`frame`] (IPC encoding and framing),
//! [`gate`] (group commit, no I/O in its state machine), [`storage`] (the
//! only fsync calls), [`counters`], and here the [`Log`] that ties them:
//! writer mutex, replay, compaction.

pub mod counters;
pub mod frame;
pub mod gate;
pub mod record;
pub mod storage;
pub mod tail;

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

pub use counters::{CounterSnapshot, Counters};
pub use gate::SyncGate;
pub use record::RecordKind;
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
    Failed { path: PathBuf, why: String },
    #[error("log record could not be encoded: {0}")]
    Encode(#[from] ArrowError),
    #[error("cannot compact through seq {requested}: only records through {applied} are applied")]
    NotApplied { requested: u64, applied: u64 },
    #[error("a transaction needs at least one row")]
    EmptyTransaction,
}

/// A torn tail found (and cut off) at open.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TornTail {
    pub offset: u64,
    pub dropped_bytes: u64,
    pub reason: String,
}

/// One replayed entry.
#[derive(Debug)]
pub enum Entry<K> {
    /// Rows of a compaction checkpoint (no sequence number).
    Checkpoint(Vec<K>),
    /// A transaction.
    Txn { seq: u64, rows: Vec<K> },
}

/// What a replay saw.
#[derive(Debug, Clone, Default)]
pub struct Replay {
    /// Bytes of complete frames (where appending continues).
    pub valid_len: u64,
    pub base_seq: u64,
    pub checkpoint_frames: u64,
    /// Transactions replayed.
    pub txns: u64,
    pub torn: Option<TornTail>,
    /// The file had no complete schema message.
    pub empty: bool,
}

impl Replay {
    /// The last transaction's sequence (0 when none).
    pub fn last_seq(&self) -> u64 {
        (self.base_seq + self.txns).saturating_sub(1)
    }
}

/// Reads a log stream from `reader`, calling `visit` for every entry, in
/// constant memory. Never writes; [`Log::open`] truncates what it reports.
pub fn replay<K: RecordKind, R: std::io::Read>(
    path: &Path,
    reader: R,
    mut visit: impl FnMut(Entry<K>),
) -> Result<Replay, LogError> {
    let mut frames = FrameReader::new(reader);
    let mut decoder = FrameDecoder::default();
    let mut replay = Replay {
        base_seq: 1,
        empty: true,
        ..Replay::default()
    };
    let mut batches_seen = 0u64;
    let corrupt = |offset, reason: String| LogError::Corrupt {
        path: path.to_path_buf(),
        offset,
        reason,
    };
    loop {
        let frame_start = frames.offset();
        let bad = match frames.next_frame() {
            Ok(None) => break,
            Ok(Some(frame)) => match accept_frame::<K>(path, &frame, &mut decoder, &mut replay) {
                Ok(Some(batch)) => {
                    let rows = K::rows(&batch).map_err(|e| corrupt(frame.offset, e.to_string()));
                    let rows = match rows {
                        Ok(rows) => rows,
                        Err(e) => {
                            // Decoded but nonsensical values: judged like any
                            // other bad frame below.
                            if frames.rest_is_zero().map_err(|source| io(path, source))? {
                                replay.torn = Some(TornTail {
                                    offset: frame.offset,
                                    dropped_bytes: frames.offset() - frame.offset,
                                    reason: e.to_string(),
                                });
                                break;
                            }
                            return Err(e);
                        }
                    };
                    if batches_seen < replay.checkpoint_frames {
                        visit(Entry::Checkpoint(rows));
                    } else {
                        visit(Entry::Txn {
                            seq: replay.base_seq + replay.txns,
                            rows,
                        });
                        replay.txns += 1;
                    }
                    batches_seen += 1;
                    replay.valid_len = frame.end();
                    continue;
                }
                Ok(None) => {
                    replay.valid_len = frame.end();
                    continue;
                }
                Err(AcceptError::Fatal(e)) => return Err(e),
                Err(AcceptError::Bad(reason)) => (frame.offset, reason),
            },
            Err(FrameError::Io(source)) => return Err(io(path, source)),
            Err(FrameError::Incomplete { offset, reason }) => {
                replay.torn = Some(TornTail {
                    offset,
                    dropped_bytes: frames.offset() - offset,
                    reason,
                });
                break;
            }
            Err(FrameError::Malformed { offset, reason }) => (offset, reason),
        };
        // A frame that is not valid: a torn tail only if nothing but zeros
        // follows it; anything else is corruption in the middle.
        let (offset, reason) = bad;
        debug_assert!(offset >= frame_start);
        if frames.rest_is_zero().map_err(|source| io(path, source))? {
            replay.torn = Some(TornTail {
                offset,
                dropped_bytes: frames.offset() - offset,
                reason,
            });
            break;
        }
        return Err(corrupt(offset, reason));
    }
    Ok(replay)
}

enum AcceptError {
    /// The frame is bad (torn or corrupt; the caller decides which).
    Bad(String),
    /// The file is a valid stream of something else.
    Fatal(LogError),
}

fn accept_frame<K: RecordKind>(
    path: &Path,
    frame: &RawFrame,
    decoder: &mut FrameDecoder,
    replay: &mut Replay,
) -> Result<Option<RecordBatch>, AcceptError> {
    let is_first = replay.empty;
    match (is_first, frame.header) {
        (true, MessageHeader::Schema) | (false, MessageHeader::RecordBatch) => {}
        (true, header) => {
            return Err(AcceptError::Bad(format!(
                "expected the schema message first, found {header:?}"
            )));
        }
        (false, header) => {
            return Err(AcceptError::Bad(format!(
                "expected a record batch, found {header:?}"
            )));
        }
    }
    let batch = decoder
        .decode(frame)
        .map_err(|e| AcceptError::Bad(e.to_string()))?;
    if is_first {
        let schema = decoder
            .schema()
            .ok_or_else(|| AcceptError::Bad("schema message did not decode".into()))?;
        let metadata = schema.metadata();
        let found = metadata
            .get(meta_keys::KIND)
            .cloned()
            .unwrap_or_else(|| "(no vole.kind)".into());
        let same_fields = schema.fields().len() == K::fields().len()
            && schema
                .fields()
                .iter()
                .zip(K::fields())
                .all(|(a, b)| a.name() == b.name() && a.data_type() == b.data_type());
        let kind_ok = metadata.get(meta_keys::KIND).is_none_or(|k| k == K::KIND);
        if !same_fields || !kind_ok {
            return Err(AcceptError::Fatal(LogError::WrongKind {
                path: path.to_path_buf(),
                found,
                expected: K::KIND,
            }));
        }
        let number = |key: &str, default: u64| {
            metadata
                .get(key)
                .map_or(Ok(default), |v| v.parse::<u64>())
                .map_err(|e| AcceptError::Bad(format!("schema metadata {key}: {e}")))
        };
        replay.base_seq = number(meta_keys::BASE_SEQ, 1)?;
        replay.checkpoint_frames = number(meta_keys::CHECKPOINT_FRAMES, 0)?;
        replay.empty = false;
    }
    Ok(batch)
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
    failed: Option<String>,
}

/// One log stream of kind `K`: append, commit (durable), compact.
pub struct Log<K: RecordKind> {
    path: PathBuf,
    opener: StorageOpener,
    writer: Mutex<Writer>,
    gate: SyncGate,
    counters: Arc<Counters>,
    applied: AtomicU64,
    _kind: PhantomData<fn() -> K>,
}

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
        let mut len = replay.valid_len;
        if replay.torn.is_some() || replay.empty {
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
            path,
            opener,
            _kind: PhantomData,
        };
        Ok((log, replay))
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
    /// caller that must order its appends (see `crate::meta`) can encode
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
            let undo = writer.storage.truncate(writer.len);
            let why = format!("append failed: {e}; undo: {undo:?}");
            writer.failed = Some(why.clone());
            self.gate.fail(why);
            return Err(io(&self.path, e));
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
            .unwrap_or_else(|e| {
                Err(LogError::Failed {
                    path: self.path.clone(),
                    why: format!("commit task failed: {e}"),
                })
            })
    }

    pub fn counters(&self) -> CounterSnapshot {
        self.counters.snapshot()
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

    /// Rewrites the file without the transactions through `drop_through`
    /// (which must be applied), starting with `checkpoint` rows (e.g. the
    /// current value of every ref), and swaps it in. This is the one place
    /// the file is replaced: it holds the writer mutex and the gate, syncs
    /// the new file whole, renames it over the old one, and re-binds the
    /// gate, so no later sync can land on the old, unlinked inode.
    pub fn compact(&self, drop_through: u64, checkpoint: &[K]) -> Result<CompactReport, LogError> {
        let applied = self.applied();
        if drop_through > applied {
            return Err(LogError::NotApplied {
                requested: drop_through,
                applied,
            });
        }
        let mut writer = self.writer.lock();
        if let Some(why) = &writer.failed {
            return Err(LogError::Failed {
                path: self.path.clone(),
                why: why.clone(),
            });
        }
        let hold = self.gate.hold();
        let drop_through = drop_through.max(writer.base_seq - 1);
        let written = writer.next_seq - 1;

        let tmp = self.path.with_extension("arrow.compact");
        let new_base = drop_through + 1;
        let checkpoint_frames = u64::from(!checkpoint.is_empty());
        let mut encoder = FrameEncoder::new();
        let mut out: Vec<u8> = encoder.schema(&K::schema(new_base, checkpoint_frames));
        if !checkpoint.is_empty() {
            out.extend(encoder.batch(&K::batch(checkpoint)?)?);
        }
        let new_storage = (|| -> std::io::Result<_> {
            let _ = std::fs::remove_file(&tmp);
            let storage = (self.opener)(&tmp)?;
            storage.append(&[&out])?;
            let mut len = out.len() as u64;
            // Copy kept frames verbatim (each message carries its lengths,
            // so frames of any alignment stay readable).
            let source = BufReader::with_capacity(1 << 16, File::open(&self.path)?);
            let mut frames = FrameReader::new(source);
            let mut batch_index = 0u64;
            let old = self.replay_header()?;
            while let Some(frame) = frames
                .next_frame()
                .map_err(|e| std::io::Error::other(e.to_string()))?
            {
                if frame.header != MessageHeader::RecordBatch {
                    continue;
                }
                let is_checkpoint = batch_index < old.checkpoint_frames;
                let seq = old.base_seq + batch_index.saturating_sub(old.checkpoint_frames);
                batch_index += 1;
                if is_checkpoint || seq <= drop_through || seq > written {
                    continue;
                }
                storage.append(&[&frame.bytes])?;
                len += frame.bytes.len() as u64;
            }
            storage.sync()?;
            std::fs::rename(&tmp, &self.path)?;
            if let Some(parent) = self.path.parent() {
                storage::sync_dir(parent)?;
            }
            Ok((storage, len))
        })();
        let (new_storage, new_len) = new_storage.map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            io(&self.path, e)
        })?;
        // The renamed file is the same inode the new storage wrote and
        // synced; from here on every append and sync goes to it.
        writer.storage = new_storage.clone();
        writer.base_seq = new_base;
        let old_len = writer.len;
        writer.len = new_len;
        hold.rebind(new_storage, written);
        drop(hold);
        drop(writer);
        tracing::info!(
            log = %self.path.display(),
            dropped_through = drop_through,
            bytes_before = old_len,
            bytes_after = new_len,
            "log compacted"
        );
        Ok(CompactReport {
            bytes_before: old_len,
            bytes_after: new_len,
            base_seq: new_base,
        })
    }

    /// base_seq and checkpoint_frames of the file as it is now.
    fn replay_header(&self) -> std::io::Result<Replay> {
        let file = BufReader::new(File::open(&self.path)?);
        let mut frames = FrameReader::new(file);
        let mut decoder = FrameDecoder::default();
        let mut header = Replay {
            base_seq: 1,
            empty: true,
            ..Replay::default()
        };
        if let Some(frame) = frames
            .next_frame()
            .map_err(|e| std::io::Error::other(e.to_string()))?
        {
            accept_frame::<K>(&self.path, &frame, &mut decoder, &mut header)
                .map_err(|_| std::io::Error::other("log schema message unreadable"))?;
        }
        Ok(header)
    }
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

/// What a compaction did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CompactReport {
    pub bytes_before: u64,
    pub bytes_after: u64,
    pub base_seq: u64,
}

/// Nanoseconds since the Unix epoch, for record timestamps.
pub fn now_ns() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or(Duration::ZERO)
        .as_nanos() as i64
}

#[cfg(test)]
mod tests;
