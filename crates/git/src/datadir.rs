//! The data directory: its layout, the exclusive lock that makes one process
//! its only writer, and the start-up sweep of what a killed predecessor left.
//!
//! Layout (under the data dir):
//! - `vole.lock`  held (flock) by the one process that writes here; holds its pid
//! - `run/vole.sock`  the control socket of a running server (`vole_control`),
//!   in a directory only the owner may enter, made before the socket is bound
//! - `repos/<owner>/<name>.git`  bare repositories
//! - `system.git` the server's own documents: users and tokens
//! - `trash/<owner>/<name>.git.<unix-seconds>`  deleted repos, until an operator removes them
//! - `cache/packs/` packs of recent clones and fetches, served again to identical ones; emptied at start
//! - `log/`       the group-committed ref and metadata log (`vole_log`)
//! - `sessions.jsonl` browser sessions, by their secrets' hashes (`vole_sessions`);
//!   not in backups (a restore signs everyone out, and brings back no ended session)
//! - `tmp/`       scratch (repos being created, spooled push bodies); emptied at start

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, Write};
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// Paths inside one data directory.
#[derive(Debug, Clone)]
pub struct DataDir {
    root: PathBuf,
}

/// Why the data directory cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum DataDirError {
    #[error("data dir {path} cannot be used: {source}")]
    Unusable {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("data dir {path} is in use by {holder}; stop it, or point --data elsewhere")]
    Locked { path: PathBuf, holder: String },
}

impl DataDir {
    pub fn new(root: impl Into<PathBuf>) -> DataDir {
        DataDir { root: root.into() }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }
    pub fn repos_dir(&self) -> PathBuf {
        self.root.join("repos")
    }
    pub fn log_dir(&self) -> PathBuf {
        self.root.join("log")
    }
    pub fn tmp_dir(&self) -> PathBuf {
        self.root.join("tmp")
    }
    /// The system repo: the server's own documents (users, tokens),
    /// outside `repos/` so nothing that serves repos can reach it.
    pub fn system_repo(&self) -> PathBuf {
        self.root.join("system.git")
    }
    /// Packs kept for repeated clones (`vole-pack-cache`); emptied
    /// at start.
    pub fn pack_cache_dir(&self) -> PathBuf {
        self.root.join("cache").join("packs")
    }
    /// Where deleted repos go, so an operator can restore one.
    pub fn trash_dir(&self) -> PathBuf {
        self.root.join("trash")
    }
    /// The control socket's directory: owner-only (0700) before the socket
    /// is bound in it ([`DataDir::prepare_run_dir`]).
    pub fn run_dir(&self) -> PathBuf {
        self.root.join("run")
    }
    pub fn socket_path(&self) -> PathBuf {
        self.run_dir().join("vole.sock")
    }
    pub fn lock_path(&self) -> PathBuf {
        self.root.join("vole.lock")
    }
    /// Browser sessions (`vole_sessions`).
    pub fn sessions_file(&self) -> PathBuf {
        self.root.join("sessions.jsonl")
    }
    /// There once the upgrade to incarnations is done: from then on a repo
    /// found without an incarnation (copied in by hand) is given a new
    /// one, which adopts nothing recorded before it.
    pub fn incarnations_marker(&self) -> PathBuf {
        self.root.join("vole-incarnations")
    }

    /// Creates the directory tree (owner-only) if missing; what it created
    /// is durable (the data dir and its parent synced) when it returns.
    pub fn prepare(&self) -> Result<(), DataDirError> {
        let mut created = false;
        for dir in [
            self.root.clone(),
            self.repos_dir(),
            self.log_dir(),
            self.tmp_dir(),
        ] {
            if dir.is_dir() {
                continue;
            }
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(&dir)
                .map_err(|source| self.unusable(source))?;
            created = true;
        }
        if created {
            let parent = self
                .root
                .parent()
                .filter(|p| !p.as_os_str().is_empty())
                .unwrap_or(Path::new("."));
            crate::durable::sync_dir(&self.root)
                .and_then(|()| crate::durable::sync_dir(parent))
                .map_err(|source| self.unusable(source))?;
        }
        Ok(())
    }

    /// Makes the control socket's directory owner-only (0700), creating it
    /// if missing, and returns the socket's path. The socket is bound
    /// inside it afterwards, so no other user can reach the socket whatever
    /// mode the process's umask gives it while it is bound (its own chmod
    /// to 0600 comes after the bind). A symlink or a directory of another
    /// user there is refused.
    pub fn prepare_run_dir(&self) -> std::io::Result<PathBuf> {
        use std::os::unix::fs::{MetadataExt, PermissionsExt};
        let dir = self.run_dir();
        match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e),
        }
        let meta = std::fs::symlink_metadata(&dir)?;
        if !meta.is_dir() || meta.uid() != rustix::process::geteuid().as_raw() {
            return Err(std::io::Error::other(format!(
                "{} is not a directory of this user",
                dir.display()
            )));
        }
        // The umask may have taken bits off, or an older directory may
        // have more: exactly 0700.
        if meta.permissions().mode() & 0o777 != 0o700 {
            std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700))?;
        }
        Ok(self.socket_path())
    }

    /// Makes the data dir, `system.git` (password hashes, token digests)
    /// and `log/` owner-only (0700) where group or other users may read or
    /// enter them (a volume made 0755, as Docker makes `/data`), with a
    /// warning naming each one. What cannot be changed is warned about and
    /// left. Called when the lock is taken; returns the paths tightened.
    pub fn tighten(&self, _lock: &DataDirLock) -> Vec<PathBuf> {
        use std::os::unix::fs::PermissionsExt;
        let mut tightened = Vec::new();
        for dir in [self.root.clone(), self.system_repo(), self.log_dir()] {
            // Followed: a data dir that is a link to a directory keeps its
            // secrets in that directory.
            let Ok(meta) = std::fs::metadata(&dir) else {
                continue;
            };
            let mode = meta.permissions().mode() & 0o777;
            if !meta.is_dir() || mode & 0o077 == 0 {
                continue;
            }
            match std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)) {
                Ok(()) => {
                    tracing::warn!(
                        path = %dir.display(),
                        "{} was mode {mode:o}, open to other users; made owner-only (700)",
                        dir.display()
                    );
                    tightened.push(dir);
                }
                Err(e) => tracing::warn!(
                    path = %dir.display(),
                    error = %e,
                    "{} is mode {mode:o}, open to other users, and cannot be made owner-only",
                    dir.display()
                ),
            }
        }
        tightened
    }

    /// Takes the exclusive lock, recording `pid` and `what` (e.g. `vole serve`)
    /// so a refused process can name the holder, and tightens what other
    /// users may read ([`DataDir::tighten`]). The lock lasts as long as the
    /// returned guard.
    pub fn lock(&self, what: &str) -> Result<DataDirLock, DataDirError> {
        let path = self.lock_path();
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(|source| self.unusable(source))?;
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                let mut holder = String::new();
                let _ = file.read_to_string(&mut holder);
                let holder = holder.trim();
                return Err(DataDirError::Locked {
                    path: self.root.clone(),
                    holder: if holder.is_empty() {
                        "another process".to_string()
                    } else {
                        holder.to_string()
                    },
                });
            }
            Err(TryLockError::Error(source)) => return Err(self.unusable(source)),
        }
        let record = format!("process {} ({what})\n", std::process::id());
        file.set_len(0)
            .and_then(|()| file.rewind())
            .and_then(|()| file.write_all(record.as_bytes()))
            .map_err(|source| self.unusable(source))?;
        let lock = DataDirLock { _file: file };
        self.tighten(&lock);
        Ok(lock)
    }

    fn unusable(&self, source: std::io::Error) -> DataDirError {
        DataDirError::Unusable {
            path: self.root.clone(),
            source,
        }
    }

    /// Removes what a killed predecessor left behind: the stale control socket,
    /// everything in `tmp/` (half-created repos, push spools), git lock files
    /// in repos (no git child can be running while we hold the data dir lock),
    /// and git quarantine directories older than `quarantine_max_age`. Each
    /// removal is logged. Must be called with the lock held.
    pub fn clean_leftovers(&self, _lock: &DataDirLock, quarantine_max_age: Duration) -> Cleanup {
        let mut cleanup = Cleanup::default();
        // Where the socket was before it had a directory of its own, too.
        for socket in [self.socket_path(), self.root.join("vole.sock")] {
            if std::fs::symlink_metadata(&socket).is_ok() && std::fs::remove_file(&socket).is_ok() {
                cleanup.record(&socket, "stale control socket");
            }
        }
        if let Ok(entries) = std::fs::read_dir(self.tmp_dir()) {
            for entry in entries.flatten() {
                if remove_any(&entry.path()).is_ok() {
                    cleanup.record(&entry.path(), "leftover temporary file");
                }
            }
        }
        let system = Some(self.system_repo()).filter(|p| p.is_dir());
        for repo in bare_repo_dirs(&self.repos_dir()).into_iter().chain(system) {
            for lock in git_lock_files(&repo) {
                if std::fs::remove_file(&lock).is_ok() {
                    cleanup.record(&lock, "stale git lock file");
                }
            }
            let Ok(entries) = std::fs::read_dir(repo.join("objects")) else {
                continue;
            };
            for entry in entries.flatten() {
                let name = entry.file_name();
                if !name.to_string_lossy().starts_with("tmp_objdir-incoming-") {
                    continue;
                }
                let age = entry
                    .metadata()
                    .and_then(|m| m.modified())
                    .ok()
                    .and_then(|modified| SystemTime::now().duration_since(modified).ok())
                    .unwrap_or_default();
                if age >= quarantine_max_age && remove_any(&entry.path()).is_ok() {
                    cleanup.record(&entry.path(), "leftover push quarantine");
                }
            }
        }
        cleanup
    }
}

/// Holds the data dir's exclusive lock until dropped.
#[derive(Debug)]
pub struct DataDirLock {
    _file: File,
}

/// What [`DataDir::clean_leftovers`] removed.
#[derive(Debug, Default)]
pub struct Cleanup {
    pub removed: Vec<PathBuf>,
}

impl Cleanup {
    fn record(&mut self, path: &Path, what: &str) {
        tracing::info!(path = %path.display(), "start-up cleanup removed {what}");
        self.removed.push(path.to_path_buf());
    }
}

fn remove_any(path: &Path) -> std::io::Result<()> {
    if path.is_dir() && !path.is_symlink() {
        std::fs::remove_dir_all(path)
    } else {
        std::fs::remove_file(path)
    }
}

/// `repos/<owner>/<name>.git` directories that hold a `HEAD` (what git
/// itself takes for a repo).
pub fn bare_repo_dirs(repos_dir: &Path) -> Vec<PathBuf> {
    let mut repos = Vec::new();
    let Ok(owners) = std::fs::read_dir(repos_dir) else {
        return repos;
    };
    for owner in owners.flatten() {
        if !owner.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        let Ok(names) = std::fs::read_dir(owner.path()) else {
            continue;
        };
        for name in names.flatten() {
            let is_repo = name.file_type().is_ok_and(|t| t.is_dir())
                && name.file_name().to_string_lossy().ends_with(".git")
                && name.path().join("HEAD").is_file();
            if is_repo {
                repos.push(name.path());
            }
        }
    }
    repos.sort();
    repos
}

/// Lock files git leaves when killed mid-update: `*.lock` under `refs/`,
/// and the top-level ones (`HEAD.lock`, `packed-refs.lock`, `config.lock`, ...).
fn git_lock_files(repo: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut stack = vec![repo.join("refs")];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "lock") {
                found.push(path);
            }
        }
    }
    if let Ok(entries) = std::fs::read_dir(repo) {
        for entry in entries.flatten() {
            let path = entry.path();
            if entry.file_type().is_ok_and(|t| t.is_file())
                && path.extension().is_some_and(|e| e == "lock")
            {
                found.push(path);
            }
        }
    }
    found
}
