//! Replay: reading a log file back frame by frame (one frame in memory at
//! a time), handing each transaction or checkpoint to the caller, and
//! telling a torn tail (cut short, or zero-filled) from corruption.

use super::*;

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
    /// The file was written with the kind's previous schema
    /// ([`RecordKind::previous_fields`]): [`Log::open`] rewrites it.
    pub previous_schema: bool,
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
    replay_with_ends(path, reader, |entry, _| visit(entry))
}

/// The length of the log at `path` through transaction `seq`: whole frames
/// (the schema and any checkpoint included), what a copy of the log as of
/// `seq` holds. `None` when `seq` is not in it (0 asks for the schema and
/// checkpoint alone).
pub fn length_through<K: RecordKind, R: std::io::Read>(
    path: &Path,
    reader: R,
    seq: u64,
) -> Result<Option<u64>, LogError> {
    let mut through = None;
    let mut first_txn_start = None;
    let replay = replay_with_ends::<K, R>(path, reader, |entry, (start, end)| match entry {
        Entry::Txn { seq: s, .. } => {
            first_txn_start.get_or_insert(start);
            if s == seq {
                through = Some(end);
            }
        }
        Entry::Checkpoint(_) => {}
    })?;
    if seq == 0 || seq < replay.base_seq {
        return Ok(Some(first_txn_start.unwrap_or(replay.valid_len)));
    }
    Ok(through)
}

/// [`replay`], telling `visit` each entry's frame's start and end too.
pub fn replay_with_ends<K: RecordKind, R: std::io::Read>(
    path: &Path,
    reader: R,
    mut visit: impl FnMut(Entry<K>, (u64, u64)),
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
                    let span = (frame.offset, frame.end());
                    if batches_seen < replay.checkpoint_frames {
                        visit(Entry::Checkpoint(rows), span);
                    } else {
                        visit(
                            Entry::Txn {
                                seq: replay.base_seq + replay.txns,
                                rows,
                            },
                            span,
                        );
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

pub(super) enum AcceptError {
    /// The frame is bad (torn or corrupt; the caller decides which).
    Bad(String),
    /// The file is a valid stream of something else.
    Fatal(LogError),
}

pub(super) fn accept_frame<K: RecordKind>(
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
        let same_fields = |fields: &[arrow_schema::Field]| {
            schema.fields().len() == fields.len()
                && schema
                    .fields()
                    .iter()
                    .zip(fields)
                    .all(|(a, b)| a.name() == b.name() && a.data_type() == b.data_type())
        };
        let current = same_fields(&K::fields());
        replay.previous_schema = !current && K::previous_fields().is_some_and(|f| same_fields(&f));
        let kind_ok = metadata.get(meta_keys::KIND).is_none_or(|k| k == K::KIND);
        if !(current || replay.previous_schema) || !kind_ok {
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
