//! A file written with its kind's previous schema (one column fewer) is
//! rewritten to the current schema when the log opens, before anything is
//! appended: an IPC stream has one schema, so a batch of the new one
//! cannot follow batches of the old. Every complete transaction and
//! checkpoint is kept, with the same sequence numbers; the new file is
//! synced and renamed over the old one, and the directory synced. Besides
//! compaction, this is the only code that replaces a log file, and it runs
//! before the log has a writer.

use super::*;

/// Rewrites the file at `path` (of `K`'s previous schema, as `header`, its
/// replay, found) to `K`'s current schema; returns the new file's length.
pub(super) fn rewrite_to_current<K: RecordKind>(
    path: &Path,
    opener: &StorageOpener,
    header: &Replay,
) -> Result<u64, LogError> {
    let tmp = path.with_extension("arrow.upgrade");
    let failed = |e: std::io::Error| {
        let _ = std::fs::remove_file(&tmp);
        io(path, e)
    };
    let _ = std::fs::remove_file(&tmp);
    let storage = opener(&tmp).map_err(failed)?;
    let mut encoder = FrameEncoder::new();
    let schema = encoder.schema(&K::schema(header.base_seq, header.checkpoint_frames));
    storage.append(&[&schema]).map_err(failed)?;
    let mut len = schema.len() as u64;
    let mut written: Result<(), LogError> = Ok(());
    let file = File::open(path).map_err(failed)?;
    replay::<K, _>(path, BufReader::with_capacity(1 << 16, file), |entry| {
        if written.is_err() {
            return;
        }
        let rows = match entry {
            Entry::Checkpoint(rows) => rows,
            Entry::Txn { rows, .. } => rows,
        };
        written = K::batch(&rows)
            .and_then(|batch| encoder.batch(&batch))
            .map_err(LogError::from)
            .and_then(|frame| {
                len += frame.len() as u64;
                storage.append(&[&frame]).map_err(|e| io(&tmp, e))
            });
    })?;
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    storage.sync().map_err(failed)?;
    drop(storage);
    std::fs::rename(&tmp, path).map_err(failed)?;
    if let Some(parent) = path.parent() {
        storage::sync_dir(parent).map_err(|e| io(parent, e))?;
    }
    tracing::warn!(
        log = %path.display(),
        kind = K::KIND,
        schema_version = K::SCHEMA_VERSION,
        txns = header.txns,
        "upgrade: the log was written with the previous schema; rewrote it to the current one, every transaction kept"
    );
    Ok(len)
}
