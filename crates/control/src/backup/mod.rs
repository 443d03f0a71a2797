//! `vole backup DEST` and `vole restore SRC`: a consistent copy of a data
//! dir taken while the server runs and takes writes, and its way back.
//!
//! **The cut.** With the server running, the backup briefly holds new
//! pushes' prepared ref records (`RefRecorder::hold_moves`) and metadata
//! folds (`MetaStore::hold_folds`), then records every repo's refs and
//! `HEAD`, each log's durable sequence and the meta log's applied one, and
//! opens the log files; then lets go. Repacks and log compaction wait for
//! the whole backup (`MetaStore::hold_maintenance`). The copy then holds
//! the refs of the cut (as `packed-refs`), the objects (immutable; ones
//! written later are only unreferenced), and each log through its cut
//! sequence, so it never holds a shard tip above its meta log (a fold
//! writes its log records durably first), nor a ref older than its ref log
//! (a committed move's ref moved before its record). A push prepared but
//! not committed at the cut leaves its ref either way, which the next
//! start settles, as after a crash.
//!
//! Without a server, the CLI holds the data dir lock and the cut is simply
//! what is on disk.
//!
//! **The manifest** (`manifest.json`, written last: a backup without one
//! is incomplete) lists every file with its size and SHA-256, and the
//! cut's sequences. `vole restore` checks each file against it while
//! copying into an empty data dir.
//!
//! What does not live here: the progress bar (`cli`), the connection that
//! carries a running server's backup (`server.rs`).

mod restore;
mod write;

pub use restore::restore;
pub use write::write;

use std::fs::File;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use vole_accounts::audit::AuditEvent;
use vole_git::datadir::DataDir;
use vole_hooks::RefMove;
use vole_log::RecordKind;
use vole_meta::MetaWrite;

/// What a finished backup says: files, bytes, the cut's sequences.
pub fn summary(manifest: &Manifest) -> serde_json::Value {
    serde_json::json!({
        "files": manifest.files.len(),
        "bytes": manifest.files.iter().map(|f| f.bytes).sum::<u64>(),
        "repos": manifest.repos.len(),
        "logs": manifest.logs,
        "meta_applied": manifest.meta_applied,
    })
}

/// The manifest's file name in a backup.
pub const MANIFEST: &str = "manifest.json";

/// Why a backup or restore stopped.
#[derive(Debug, thiserror::Error)]
pub enum BackupError {
    #[error("{what} {path}: {source}")]
    Io {
        what: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{0}")]
    Refused(String),
    #[error(transparent)]
    Log(#[from] vole_log::LogError),
    #[error("{path} in the backup does not match its manifest ({why}); the backup is damaged")]
    Damaged { path: String, why: String },
}

fn io(what: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> BackupError {
    let path = path.to_path_buf();
    move |source| BackupError::Io { what, path, source }
}

/// One repo as the cut saw it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RepoCut {
    /// `owner/name`, or `@system`.
    pub name: String,
    /// Relative to the data dir.
    pub dir: String,
    /// `HEAD` as it was (`ref: refs/heads/main`, or an object id).
    pub head: String,
    /// Every ref but symbolic ones: (name, object id), sorted.
    pub refs: Vec<(String, String)>,
}

/// One log as the cut saw it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LogCut {
    /// The file's name in `log/`.
    pub file: String,
    /// The last durable transaction the copy holds.
    pub seq: u64,
}

/// What a backup holds: the cut and every file.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Manifest {
    pub vole_version: String,
    /// RFC 3339, UTC.
    pub created: String,
    pub logs: Vec<LogCut>,
    /// The meta log's applied sequence at the cut.
    pub meta_applied: u64,
    pub repos: Vec<RepoCut>,
    pub files: Vec<FileEntry>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FileEntry {
    /// Relative to the data dir, `/`-separated.
    pub path: String,
    pub bytes: u64,
    pub sha256: String,
}

/// The cut: the manifest's head, and the log files opened at it (copied
/// through their sequence even if a file is replaced afterwards).
pub struct Cut {
    /// Each log, its file, and its length through the cut when already
    /// known (a cut without a server reads it off its one pass).
    logs: Vec<(LogCut, File, Option<u64>)>,
    meta_applied: u64,
    repos: Vec<RepoCut>,
}

/// The logs a backup copies: (file name, its durable sequence now, its
/// length through that sequence when known).
type LogSeqs = [(&'static str, u64, Option<u64>); 3];

/// Takes the cut of a running server's data dir (see the module doc).
pub fn cut_live(app: &super::ControlState, data: &DataDir) -> Result<Cut, BackupError> {
    let moves = app.recorder.hold_moves();
    let folds = app.meta.hold_folds();
    let seqs: LogSeqs = [
        (RefMove::FILE_NAME, app.recorder.log().watermarks().1, None),
        (MetaWrite::FILE_NAME, app.meta.log().watermarks().1, None),
        (
            AuditEvent::FILE_NAME,
            app.accounts.audit_log().watermarks().1,
            None,
        ),
    ];
    let applied = app.meta.log().applied();
    let cut = read_cut(data, seqs, applied);
    drop(folds);
    drop(moves);
    cut
}

/// The cut of a data dir no server writes to (its lock held): what is on
/// disk, each log through its last whole transaction.
pub fn cut_offline(data: &DataDir) -> Result<Cut, BackupError> {
    let dir = data.log_dir();
    // Its last whole transaction, and the bytes through it (the whole
    // frames: a torn tail is left out).
    fn last<K: RecordKind>(dir: &Path) -> Result<(&'static str, u64, Option<u64>), BackupError> {
        let path = dir.join(K::FILE_NAME);
        match File::open(&path) {
            Ok(file) => {
                let replay =
                    vole_log::replay::<K, _>(&path, std::io::BufReader::new(file), |_| {})?;
                Ok((K::FILE_NAME, replay.last_seq(), Some(replay.valid_len)))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok((K::FILE_NAME, 0, None)),
            Err(e) => Err(io("cannot read", &path)(e)),
        }
    }
    let seqs: LogSeqs = [
        last::<RefMove>(&dir)?,
        last::<MetaWrite>(&dir)?,
        last::<AuditEvent>(&dir)?,
    ];
    let applied = vole_log::read_applied(&dir.join(MetaWrite::FILE_NAME));
    read_cut(data, seqs, applied)
}

fn read_cut(data: &DataDir, seqs: LogSeqs, meta_applied: u64) -> Result<Cut, BackupError> {
    let log_dir = data.log_dir();
    let mut logs = Vec::new();
    for (file, seq, length) in seqs {
        let path = log_dir.join(file);
        match File::open(&path) {
            Ok(opened) => logs.push((
                LogCut {
                    file: file.to_string(),
                    seq,
                },
                opened,
                length,
            )),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(io("cannot open", &path)(e)),
        }
    }
    let mut repos = Vec::new();
    for (name, dir) in super::repos_on_disk(data) {
        repos.push(repo_cut(data, &name, &dir)?);
    }
    Ok(Cut {
        logs,
        meta_applied,
        repos,
    })
}

fn repo_cut(data: &DataDir, name: &str, dir: &Path) -> Result<RepoCut, BackupError> {
    let head = std::fs::read_to_string(dir.join("HEAD"))
        .map_err(io("cannot read", &dir.join("HEAD")))?
        .trim()
        .to_string();
    let repo = vole_git::open_gix(dir)
        .map_err(|e| BackupError::Refused(format!("cannot open {name}: {e}")))?;
    let mut refs = Vec::new();
    let platform = repo
        .references()
        .map_err(|e| BackupError::Refused(format!("cannot list the refs of {name}: {e}")))?;
    let all = platform
        .all()
        .map_err(|e| BackupError::Refused(format!("cannot list the refs of {name}: {e}")))?;
    for reference in all {
        let reference = reference
            .map_err(|e| BackupError::Refused(format!("cannot read a ref of {name}: {e}")))?;
        if let Some(id) = reference.target().try_id() {
            refs.push((reference.name().as_bstr().to_string(), id.to_string()));
        }
    }
    refs.sort();
    Ok(RepoCut {
        name: name.to_string(),
        dir: relative(data.root(), dir),
        head,
        refs,
    })
}

fn relative(root: &Path, path: &Path) -> String {
    path.strip_prefix(root)
        .unwrap_or(path)
        .to_string_lossy()
        .replace('\\', "/")
}

fn create_private_dir(dir: &Path) -> Result<(), BackupError> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(io("cannot create", dir))
}

/// Copies `from` to its end into a new file `to` (its parents made; owner
/// only, as the data dir is: the system repo holds password and token
/// hashes), synced, and returns its manifest entry. `expected`: the bytes
/// it must be.
fn copy_hashed(
    from: &mut dyn Read,
    to: &Path,
    name: &str,
    expected: Option<u64>,
) -> Result<FileEntry, BackupError> {
    use std::os::unix::fs::OpenOptionsExt;
    if let Some(parent) = to.parent() {
        create_private_dir(parent)?;
    }
    let mut out = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(to)
        .map_err(io("cannot create", to))?;
    let mut hash = Sha256::new();
    let mut buf = vec![0u8; 256 << 10];
    let mut copied = 0u64;
    loop {
        let n = from.read(&mut buf).map_err(io("cannot read for", to))?;
        if n == 0 {
            break;
        }
        hash.update(&buf[..n]);
        out.write_all(&buf[..n]).map_err(io("cannot write", to))?;
        copied += n as u64;
    }
    if let Some(bytes) = expected
        && copied != bytes
    {
        return Err(BackupError::Refused(format!(
            "{name} was {copied} bytes where {bytes} were expected (cut short while copying?)"
        )));
    }
    out.sync_all().map_err(io("cannot sync", to))?;
    Ok(FileEntry {
        path: name.to_string(),
        bytes: copied,
        sha256: hex::encode(hash.finalize()),
    })
}

fn refuse_unless_empty(dir: &Path, what: &str) -> Result<(), BackupError> {
    match std::fs::read_dir(dir) {
        Ok(mut entries) => {
            if entries.next().is_some() {
                return Err(BackupError::Refused(format!(
                    "the {what} {} is not empty",
                    dir.display()
                )));
            }
            Ok(())
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(io("cannot read", dir)(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use vole_hooks::Phase;
    use vole_log::Log;

    fn moved(n: u64) -> RefMove {
        RefMove {
            time_ns: n as i64,
            repo: "alice/repo".into(),
            ref_name: "refs/heads/main".into(),
            old: None,
            new: Some(format!("{n:040x}")),
            actor: "alice".into(),
            client: "127.0.0.1".into(),
            push_id: n,
            phase: Phase::Committed,
        }
    }

    fn transactions(path: &Path) -> Vec<u64> {
        let mut seqs = Vec::new();
        let file = File::open(path).unwrap();
        vole_log::replay::<RefMove, _>(path, file, |entry| {
            if let vole_log::Entry::Txn { seq, .. } = entry {
                seqs.push(seq);
            }
        })
        .unwrap();
        seqs
    }

    #[test]
    fn a_log_is_copied_through_the_cut_not_what_came_after() {
        let dir = tempfile::tempdir().unwrap();
        let data = DataDir::new(dir.path().join("data"));
        std::fs::create_dir_all(data.log_dir()).unwrap();
        let (log, _) = Log::<RefMove>::open(&data.log_dir(), |_| {}).unwrap();
        for n in 1..=3 {
            log.commit(&[moved(n)]).unwrap();
        }
        let cut = cut_offline(&data).unwrap();
        // Written after the cut, before the copy.
        for n in 4..=6 {
            log.commit(&[moved(n)]).unwrap();
        }
        let dest = dir.path().join("backup");
        let manifest = write(&data, cut, &dest, &mut |_, _| {}).unwrap();
        let copied = transactions(&dest.join("log").join(RefMove::FILE_NAME));
        assert_eq!(
            copied,
            vec![1, 2, 3],
            "the copy holds what came after its cut"
        );
        assert_eq!(manifest.logs[0].seq, 3);
        // And the live log still holds everything.
        assert_eq!(
            transactions(&data.log_dir().join(RefMove::FILE_NAME)).len(),
            6
        );
        // A running server's cut knows only the sequence: the length is
        // found by reading the log through it.
        let cut = read_cut(
            &data,
            [
                (RefMove::FILE_NAME, 3, None),
                (MetaWrite::FILE_NAME, 0, None),
                (AuditEvent::FILE_NAME, 0, None),
            ],
            0,
        )
        .unwrap();
        let dest = dir.path().join("live-backup");
        write(&data, cut, &dest, &mut |_, _| {}).unwrap();
        let copied = transactions(&dest.join("log").join(RefMove::FILE_NAME));
        assert_eq!(
            copied,
            vec![1, 2, 3],
            "a live cut's copy holds what came after it"
        );
    }
}
