//! Reading a log file from outside its writer: [`Tail`] reads the entries
//! appended since its last call, in constant memory, and follows the file
//! across a compaction (new inode) without repeating what it already
//! returned. `vole log dump` is built on it; it never writes.

use std::fs::File;
use std::io::{BufReader, Read, Seek, SeekFrom};
use std::marker::PhantomData;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use arrow_ipc::MessageHeader;

use super::frame::{FrameDecoder, FrameError, FrameReader};
use super::record::RecordKind;
use super::{AcceptError, Entry, LogError, Replay, accept_frame, io};

/// Reads new entries of one log file, call after call.
pub struct Tail<K: RecordKind> {
    path: PathBuf,
    inode: Option<u64>,
    offset: u64,
    decoder: FrameDecoder,
    header: Replay,
    batches: u64,
    /// Highest sequence handed out, so a rewritten file is not repeated.
    last_seq: u64,
    _kind: PhantomData<fn() -> K>,
}

impl<K: RecordKind> Tail<K> {
    pub fn new(path: &Path) -> Tail<K> {
        Tail {
            path: path.to_path_buf(),
            inode: None,
            offset: 0,
            decoder: FrameDecoder::default(),
            header: Replay::default(),
            batches: 0,
            last_seq: 0,
            _kind: PhantomData,
        }
    }

    fn restart(&mut self, inode: u64) {
        self.inode = Some(inode);
        self.offset = 0;
        self.decoder = FrameDecoder::default();
        self.header = Replay {
            base_seq: 1,
            empty: true,
            ..Replay::default()
        };
        self.batches = 0;
    }

    /// Calls `visit` for every complete entry appended since the last call.
    /// A frame still being written is left for the next call. Checkpoint
    /// entries are returned only from the first file read.
    pub fn poll(&mut self, mut visit: impl FnMut(Entry<K>)) -> Result<(), LogError> {
        let mut file = match File::open(&self.path) {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(io(&self.path, e)),
        };
        let meta = file.metadata().map_err(|e| io(&self.path, e))?;
        let first_read = self.inode.is_none();
        if self.inode != Some(meta.ino()) || meta.len() < self.offset {
            self.restart(meta.ino());
        }
        file.seek(SeekFrom::Start(self.offset))
            .map_err(|e| io(&self.path, e))?;
        let limit = meta.len() - self.offset;
        let mut frames = FrameReader::at(BufReader::new(file.take(limit)), self.offset);
        loop {
            let frame = match frames.next_frame() {
                Ok(Some(frame)) => frame,
                Ok(None) | Err(FrameError::Incomplete { .. }) => return Ok(()),
                Err(FrameError::Io(e)) => return Err(io(&self.path, e)),
                Err(FrameError::Malformed { offset, reason }) => {
                    return Err(LogError::Corrupt {
                        path: self.path.clone(),
                        offset,
                        reason,
                    });
                }
            };
            let batch =
                match accept_frame::<K>(&self.path, &frame, &mut self.decoder, &mut self.header) {
                    Ok(batch) => batch,
                    Err(AcceptError::Fatal(e)) => return Err(e),
                    Err(AcceptError::Bad(reason)) => {
                        return Err(LogError::Corrupt {
                            path: self.path.clone(),
                            offset: frame.offset,
                            reason,
                        });
                    }
                };
            self.offset = frame.end();
            let Some(batch) = batch else { continue };
            debug_assert_eq!(frame.header, MessageHeader::RecordBatch);
            let rows = K::rows(&batch).map_err(|e| LogError::Corrupt {
                path: self.path.clone(),
                offset: frame.offset,
                reason: e.to_string(),
            })?;
            let index = self.batches;
            self.batches += 1;
            if index < self.header.checkpoint_frames {
                if first_read {
                    visit(Entry::Checkpoint(rows));
                }
                continue;
            }
            let seq = self.header.base_seq + (index - self.header.checkpoint_frames);
            if seq > self.last_seq {
                self.last_seq = seq;
                visit(Entry::Txn { seq, rows });
            }
        }
    }
}
