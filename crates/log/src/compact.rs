//! Compaction: the only code that replaces a log file while the log is
//! open (`upgrade.rs` rewrites one at open, before it has a writer). It
//! writes a
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
    /// an open log's file is replaced.
    ///
    /// Appends go on while most of it runs: the kept frames written before
    /// it began are copied without the writer mutex (complete in the file:
    /// a sequence is taken once its frame is written). Only the frames
    /// appended meanwhile, the sync and the swap hold the writer mutex and
    /// the gate; it renames the synced new file over the old one and
    /// re-binds the gate, so no later sync can land on the old, unlinked
    /// inode. One compaction runs at a time.
    pub fn compact(&self, drop_through: u64, checkpoint: &[K]) -> Result<CompactReport, LogError> {
        let applied = self.applied();
        if drop_through > applied {
            return Err(LogError::NotApplied {
                requested: drop_through,
                applied,
            });
        }
        let _one_at_a_time = self.compacting.lock();
        let drop_through = self.droppable_through(drop_through);
        let failed = |why: &Failure| LogError::Failed {
            path: self.path.clone(),
            why: why.clone(),
        };
        let (base_seq, written_before) = {
            let writer = self.writer.lock();
            if let Some(why) = &writer.failed {
                return Err(failed(why));
            }
            (writer.base_seq, writer.next_seq - 1)
        };
        let drop_through = drop_through.max(base_seq - 1);
        let tmp = self.path.with_extension("arrow.compact");
        let new_base = drop_through + 1;
        let checkpoint_frames = u64::from(!checkpoint.is_empty());
        let mut encoder = FrameEncoder::new();
        let mut out: Vec<u8> = encoder.schema(&K::schema(new_base, checkpoint_frames));
        if !checkpoint.is_empty() {
            out.extend(encoder.batch(&K::batch(checkpoint)?)?);
        }
        let cleanup = |e: std::io::Error| {
            let _ = std::fs::remove_file(&tmp);
            io(&self.path, e)
        };
        // Phase 1, appends going on: the kept frames through
        // `written_before`.
        let old = self.replay_header().map_err(cleanup)?;
        let mut copy = KeptFrames {
            old_base: old.base_seq,
            old_checkpoint_frames: old.checkpoint_frames,
            drop_through,
            batch_index: 0,
            resume_at: 0,
        };
        let phase1 = (|| -> std::io::Result<_> {
            let _ = std::fs::remove_file(&tmp);
            let storage = (self.opener)(&tmp)?;
            storage.append(&[&out])?;
            let len = out.len() as u64 + copy.copy(&self.path, &*storage, written_before)?;
            Ok((storage, len))
        })();
        let (new_storage, mut new_len) = phase1.map_err(cleanup)?;
        if let Some(hook) = self.between_phases.lock().as_mut() {
            hook();
        }
        // Phase 2, appends held: what came meanwhile, then the swap.
        let mut writer = self.writer.lock();
        if let Some(why) = &writer.failed {
            let _ = std::fs::remove_file(&tmp);
            return Err(failed(why));
        }
        let hold = self.gate.hold();
        let written = writer.next_seq - 1;
        let phase2 = (|| -> std::io::Result<u64> {
            let len = copy.copy(&self.path, &*new_storage, written)?;
            new_storage.sync()?;
            std::fs::rename(&tmp, &self.path)?;
            if let Some(parent) = self.path.parent() {
                storage::sync_dir(parent)?;
            }
            Ok(len)
        })();
        new_len += phase2.map_err(cleanup)?;
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
            copied_while_appending = written_before,
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

/// Where a compaction's copy of the old file has got to.
struct KeptFrames {
    old_base: u64,
    old_checkpoint_frames: u64,
    drop_through: u64,
    /// Record batches of the old file seen so far (its checkpoint's too).
    batch_index: u64,
    /// The old file's offset to go on from.
    resume_at: u64,
}

impl KeptFrames {
    /// Appends to `out`, verbatim, the old file's transactions after
    /// `drop_through` through `through`, from where the last call stopped;
    /// returns the bytes appended. Stops after `through`'s frame, so it
    /// never reads a frame still being written.
    fn copy(&mut self, path: &Path, out: &dyn LogStorage, through: u64) -> std::io::Result<u64> {
        use std::io::Seek;
        let mut file = File::open(path)?;
        file.seek(std::io::SeekFrom::Start(self.resume_at))?;
        let mut frames = FrameReader::at(BufReader::with_capacity(1 << 16, file), self.resume_at);
        let mut appended = 0u64;
        loop {
            let in_checkpoint = self.batch_index < self.old_checkpoint_frames;
            let seq = self.old_base + self.batch_index.saturating_sub(self.old_checkpoint_frames);
            // Not a frame further: the next transaction is past `through`
            // (and may still be being written).
            if !in_checkpoint && seq > through {
                break;
            }
            let Some(frame) = frames.next_frame().map_err(std::io::Error::other)? else {
                break;
            };
            self.resume_at = frames.offset();
            if frame.header != MessageHeader::RecordBatch {
                continue;
            }
            self.batch_index += 1;
            if !in_checkpoint && seq > self.drop_through {
                out.append(&[&frame.bytes])?;
                appended += frame.bytes.len() as u64;
            }
        }
        Ok(appended)
    }
}
