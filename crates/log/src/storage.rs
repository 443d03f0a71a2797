//! The file layer under the log: append, sync, truncate. The real one is a
//! file opened for append; tests substitute layers that count syncs or that,
//! at a simulated crash, lose every byte not yet synced.
//!
//! This module and `compact` are the only places the log calls fsync
//! (ARCHITECTURE.md lists every place vole syncs, git's included).

use std::fs::{File, OpenOptions};
use std::io::{self, IoSlice, Write};
use std::path::Path;
use std::sync::Arc;

/// An append-only file as the log sees it.
pub trait LogStorage: Send + Sync + 'static {
    /// Appends every part at the end, in order (one `writev` where the
    /// kernel takes it all).
    fn append(&self, parts: &[&[u8]]) -> io::Result<()>;
    /// Makes every appended byte durable.
    fn sync(&self) -> io::Result<()>;
    /// Cuts the file back to `len` bytes (undoing a failed partial append).
    fn truncate(&self, len: u64) -> io::Result<()>;
}

/// Opens the storage for a log file path (so compaction can open the file
/// it just renamed into place through the same layer).
pub type StorageOpener = Arc<dyn Fn(&Path) -> io::Result<Arc<dyn LogStorage>> + Send + Sync>;

/// The real layer: `O_APPEND` writes and `fdatasync`. fdatasync is enough:
/// an append changes the file size, which it flushes; only timestamps are
/// skipped.
#[derive(Debug)]
pub struct FileStorage {
    file: File,
}

impl FileStorage {
    pub fn open(path: &Path) -> io::Result<FileStorage> {
        let file = OpenOptions::new().append(true).create(true).open(path)?;
        Ok(FileStorage { file })
    }

    /// The default [`StorageOpener`].
    pub fn opener() -> StorageOpener {
        Arc::new(|path| Ok(Arc::new(FileStorage::open(path)?) as Arc<dyn LogStorage>))
    }
}

impl LogStorage for FileStorage {
    fn append(&self, parts: &[&[u8]]) -> io::Result<()> {
        // `write_all_vectored` is not stable; this is its loop. The parts
        // are written from where they lie: joining them first cost a fresh
        // buffer per append, and its page faults.
        let mut slices: Vec<IoSlice<'_>> = parts.iter().map(|p| IoSlice::new(p)).collect();
        let mut rest = &mut slices[..];
        // One call may write less: std passes at most IOV_MAX (1,024 on
        // Linux) slices to the kernel, which may also stop short.
        while !rest.is_empty() {
            match (&self.file).write_vectored(rest) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => IoSlice::advance_slices(&mut rest, n),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
    fn sync(&self) -> io::Result<()> {
        self.file.sync_data()
    }
    fn truncate(&self, len: u64) -> io::Result<()> {
        self.file.set_len(len)
    }
}

/// fsyncs a directory, making a rename or create inside it durable.
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}
