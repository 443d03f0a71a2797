//! Compaction: the only code that replaces a log file. It writes a
//! checkpoint and the kept transactions to a new file, syncs it, and
//! renames it over the old one while holding the sync gate.

use super::*;

/// What a compaction did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CompactReport {
    pub bytes_before: u64,
    pub bytes_after: u64,
    pub base_seq: u64,
}

impl<K: RecordKind> Log<K> {
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
            while let Some(frame) = frames.next_frame().map_err(std::io::Error::other)? {
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
    pub(super) fn replay_header(&self) -> std::io::Result<Replay> {
        let file = BufReader::new(File::open(&self.path)?);
        let mut frames = FrameReader::new(file);
        let mut decoder = FrameDecoder::default();
        let mut header = Replay {
            base_seq: 1,
            empty: true,
            ..Replay::default()
        };
        if let Some(frame) = frames.next_frame().map_err(std::io::Error::other)? {
            accept_frame::<K>(&self.path, &frame, &mut decoder, &mut header)
                .map_err(|_| std::io::Error::other("log schema message unreadable"))?;
        }
        Ok(header)
    }
}
