//! `vole repo gc OWNER/NAME`: prunes a repo's unreachable objects now.
//! A force push or a deleted branch leaves its commits unreachable, but
//! still in the repo, where the web UI serves them by full id; git's own
//! gc would keep them two weeks more.
//!
//! `git gc --prune=now` is safe only while nothing writes objects that no
//! ref reaches yet, so it runs with the holds a backup's cut takes, and one
//! more:
//! - the repo's pushes (`access::pushes`): from the moment git moves a
//!   push's objects out of its quarantine until its refs move, they are
//!   unreachable (and a quarantine itself is a `tmp_` directory a prune
//!   removes). Pushes running are waited for (at most [`PUSHES_WAIT`]);
//!   new ones wait for the gc, up to `--queue-timeout`, then get a 503;
//! - the metadata folds (`MetaStore::hold_folds`): a fold's pack is
//!   unreachable until its shard ref moves;
//! - repacks and log compaction (`MetaStore::hold_maintenance`).
//!
//! Refs are left as they are (no `pack-refs`); reflogs, which vole does not
//! write, are expired with the rest. Then every object directory is synced
//! (a pruned pack or loose object stays pruned after a power cut), the
//! server's shared gix handle on the repo is dropped (it would go on
//! reading a deleted pack it has mapped), and the gc is recorded in the ref
//! log (phase `gc`) and the audit log.

use std::path::Path;
use std::time::{Duration, Instant};

use serde::Serialize;

use super::{Actor, ControlState};
use vole_access::pushes::HeldError;
use vole_accounts::AccountError;
use vole_accounts::audit::{AuditEvent, AuditKind};
use vole_git::repos::{RepoError, RepoName};
use vole_hooks::recorder::RecorderError;

/// How long a gc waits for the repo's running pushes to end.
pub const PUSHES_WAIT: Duration = Duration::from_secs(60);

/// What a gc did.
#[derive(Debug, Clone, Serialize)]
pub struct GcReport {
    pub repo: String,
    /// Bytes under `objects/` before and after.
    pub bytes_before: u64,
    pub bytes_after: u64,
    pub millis: u64,
}

/// Why a gc did not run, or did not finish.
#[derive(Debug, thiserror::Error)]
pub enum GcError {
    #[error(transparent)]
    Repo(#[from] RepoError),
    #[error("{0}; try again shortly")]
    Held(#[from] HeldError),
    #[error("cannot run git gc: {0}")]
    Spawn(#[source] std::io::Error),
    #[error("git gc failed: {0}")]
    Git(String),
    #[error("cannot sync the repository's object directories after git gc: {0}")]
    Sync(#[source] std::io::Error),
    #[error(transparent)]
    Record(#[from] RecorderError),
    #[error(transparent)]
    Audit(#[from] AccountError),
}

impl ControlState {
    /// Prunes `name`'s unreachable objects (see the module doc). Blocking.
    pub fn gc_repo(&self, name: &RepoName, actor: Actor<'_>) -> Result<GcReport, GcError> {
        if !self.access.exists(name) {
            return Err(RepoError::NotFound(name.clone()).into());
        }
        let dir = self.repos.path(name);
        let started = Instant::now();
        let bytes_before = object_bytes(&dir.join("objects"));
        {
            let _maintenance = self.meta.hold_maintenance();
            let _pushes = self.access.pushes().hold(name, PUSHES_WAIT)?;
            let _folds = self.meta.hold_folds();
            run_gc(&self.git, &dir)?;
            sync_object_dirs(&dir).map_err(GcError::Sync)?;
        }
        self.gix.forget(&dir);
        self.meta.release_handles(name);
        let report = GcReport {
            repo: name.to_string(),
            bytes_before,
            bytes_after: object_bytes(&dir.join("objects")),
            millis: started.elapsed().as_millis() as u64,
        };
        self.recorder.record_gc(name, actor.name, actor.client)?;
        self.accounts.audit(AuditEvent::new(
            AuditKind::RepoGc,
            actor.name,
            &report.repo,
            actor.client,
            format!(
                "objects {} -> {} bytes",
                report.bytes_before, report.bytes_after
            ),
        ))?;
        tracing::info!(
            repo = %name,
            bytes_before = report.bytes_before,
            bytes_after = report.bytes_after,
            millis = report.millis,
            "unreachable objects pruned"
        );
        Ok(report)
    }
}

/// `git gc --prune=now`, in the foreground, refs left loose or packed as
/// they are, reflogs expired with the objects they alone kept.
fn run_gc(git: &vole_git::Git, dir: &Path) -> Result<(), GcError> {
    let output = git
        .command()
        .arg("--git-dir")
        .arg(dir)
        .args([
            "-c",
            "gc.packRefs=false",
            "-c",
            "gc.autoDetach=false",
            "-c",
            "gc.reflogExpire=now",
            "-c",
            "gc.reflogExpireUnreachable=now",
            "gc",
            "--prune=now",
            "--quiet",
        ])
        .output()
        .map_err(GcError::Spawn)?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr).trim().to_string();
        return Err(GcError::Git(stderr));
    }
    Ok(())
}

/// Every directory under `objects/`: the packs written and deleted, the
/// loose objects pruned (in their fan-out directories, some removed), the
/// commit-graph replaced.
fn sync_object_dirs(dir: &Path) -> std::io::Result<()> {
    let objects = dir.join("objects");
    let mut dirs = vec![objects.clone()];
    while let Some(next) = dirs.pop() {
        for entry in std::fs::read_dir(&next)? {
            let entry = entry?;
            if entry.file_type()?.is_dir() {
                dirs.push(entry.path());
            }
        }
        vole_git::durable::sync_dir(&next)?;
    }
    Ok(())
}

/// Bytes of the files under `dir`.
fn object_bytes(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|entry| match entry.file_type() {
            Ok(kind) if kind.is_dir() => object_bytes(&entry.path()),
            Ok(_) => entry.metadata().map_or(0, |m| m.len()),
            Err(_) => 0,
        })
        .sum()
}
