//! Start-up reconciliation of the ref log with the refs on disk: prepared
//! transactions left without outcome are resolved from the disk; a ref
//! whose last committed write the disk lost (the file empty or garbled,
//! gone, or back at the move's old value) is restored from the log when
//! its objects are there; any other difference is recorded as moved
//! outside vole.

use std::collections::HashMap;
use std::path::Path;

use serde::Serialize;

use super::recorder::RefRecorder;
use super::{Phase, RefMove, ZERO_OID};
use vole_git::Git;
use vole_git::durable;
use vole_log::{LogError, now_ns};

impl RefRecorder {
    /// At start: resolves prepared transactions that have no outcome (a
    /// crash in between) against the refs on disk, then appends any
    /// `refs/heads`/`refs/tags` ref that disagrees with the log (moved
    /// outside vole) as reconciled. `repos` are `(owner/name, path)`.
    pub fn reconcile(
        &self,
        git: &Git,
        repos: &[(String, std::path::PathBuf)],
    ) -> Result<ReconcileReport, LogError> {
        let mut report = ReconcileReport::default();
        let paths: HashMap<&str, &Path> = repos
            .iter()
            .map(|(n, p)| (n.as_str(), p.as_path()))
            .collect();
        let mut disk: HashMap<String, HashMap<String, String>> = HashMap::new();
        for (name, path) in repos {
            // A repo whose refs cannot be listed is left alone: an empty
            // listing would read as every ref deleted.
            if let Some(refs) = refs_on_disk(git, path) {
                disk.insert(name.clone(), refs);
            }
        }

        self.resolve_pending(git, &paths, &disk, &mut report)?;
        for (name, on_disk) in &disk {
            self.reconcile_repo(git, name, paths[name.as_str()], on_disk, &mut report)?;
        }
        Ok(report)
    }

    /// Step 1: each prepared transaction without an outcome is resolved
    /// against the refs on disk (committed, aborted, or reconciled to what
    /// the disk holds).
    fn resolve_pending(
        &self,
        git: &Git,
        paths: &HashMap<&str, &Path>,
        disk: &HashMap<String, HashMap<String, String>>,
        report: &mut ReconcileReport,
    ) -> Result<(), LogError> {
        let pending: Vec<(u64, RefMove)> = self.state().pending.values().cloned().collect();
        let mut resolved: HashMap<(String, u64, Phase), Vec<RefMove>> = HashMap::new();
        for (seq, prepared) in pending {
            let Some(&repo_path) = paths.get(prepared.repo.as_str()) else {
                continue;
            };
            let on_disk = disk
                .get(&prepared.repo)
                .and_then(|refs| refs.get(&prepared.ref_name))
                .cloned();
            let on_disk = on_disk.or_else(|| ref_value(git, repo_path, &prepared.ref_name));
            // An unreadable ref file says nothing of where the move got:
            // the pusher was never told "ok", so it is taken as not done,
            // and step 2 writes the last committed value back.
            let unreadable = on_disk.is_none()
                && loose_ref(repo_path, &prepared.ref_name) == LooseRef::Unreadable;
            let phase = if unreadable {
                Phase::Aborted
            } else if on_disk == prepared.new {
                Phase::Committed
            } else if on_disk == prepared.old {
                Phase::Aborted
            } else {
                Phase::Reconciled
            };
            tracing::info!(
                repo = prepared.repo,
                ref_name = prepared.ref_name,
                seq,
                push_id = prepared.push_id,
                outcome = phase.as_str(),
                "resolved a prepared ref transaction left without outcome (crash) from the refs on disk"
            );
            let mut row = prepared.clone();
            row.time_ns = now_ns();
            row.phase = phase;
            if phase == Phase::Reconciled {
                row.new = on_disk;
            }
            resolved
                .entry((row.repo.clone(), row.push_id, phase))
                .or_default()
                .push(row);
        }
        for ((_, _, phase), rows) in resolved {
            let seq = self.log.commit(&rows)?;
            self.state().apply_txn(seq, &rows);
            if phase != Phase::Aborted {
                self.publish(seq, rows.clone());
            }
            report.resolved += rows.len();
        }
        Ok(())
    }

    /// Step 2 for one repo: committed writes the disk lost are restored
    /// from the log, and refs moved outside vole recorded as reconciled.
    fn reconcile_repo(
        &self,
        git: &Git,
        name: &str,
        path: &Path,
        on_disk: &HashMap<String, String>,
        report: &mut ReconcileReport,
    ) -> Result<(), LogError> {
        let (known, moved_from) = {
            let state = self.state();
            let known: HashMap<String, String> = state
                .known
                .get(name)
                .map(|refs| {
                    refs.iter()
                        .filter(|(r, _)| is_tracked(r))
                        .map(|(r, o)| (r.clone(), o.clone()))
                        .collect()
                })
                .unwrap_or_default();
            let from = state.moved_from.get(name).cloned().unwrap_or_default();
            (known, from)
        };
        let mut restored = Vec::new();
        let mut rows = Vec::new();
        let mut names: Vec<&String> = on_disk.keys().chain(known.keys()).collect();
        names.sort();
        names.dedup();
        for ref_name in names {
            let log_value = known.get(ref_name);
            // git lists no ref it cannot read (an empty or garbled file,
            // or one naming a missing object): read the file.
            let loose = match on_disk.get(ref_name) {
                Some(oid) => LooseRef::Oid(oid.clone()),
                None => loose_ref(path, ref_name),
            };
            let disk_value = match &loose {
                LooseRef::Oid(oid) => Some(oid),
                _ => None,
            };
            if log_value == disk_value && loose != LooseRef::Unreadable {
                continue;
            }
            let at = RefAt {
                git,
                repo: name,
                path,
                ref_name,
            };
            match at.settle(log_value, &loose, moved_from.get(ref_name)) {
                Settled::Restored(row) => restored.push(row),
                Settled::Reconciled(row) => rows.push(row),
            }
        }
        for (rows, count) in [
            (restored, &mut report.restored),
            (rows, &mut report.reconciled),
        ] {
            if !rows.is_empty() {
                let seq = self.log.commit(&rows)?;
                self.state().apply_txn(seq, &rows);
                *count += rows.len();
                self.publish(seq, rows);
            }
        }
        Ok(())
    }
}

/// One ref of a repo whose log and disk values disagree.
struct RefAt<'a> {
    git: &'a Git,
    repo: &'a str,
    path: &'a Path,
    ref_name: &'a str,
}

/// What step 2 makes of such a ref.
enum Settled {
    /// A lost committed write, written back from the log.
    Restored(RefMove),
    /// The disk taken as it is.
    Reconciled(RefMove),
}

impl RefAt<'_> {
    /// Restores the log's value when the file is unreadable (it says
    /// nothing; the log is all there is, also after a compaction) or the
    /// disk holds the last committed move's old value (`moved_from`), and
    /// the value's object is there; else reconciles to the disk.
    fn settle(
        &self,
        log_value: Option<&String>,
        loose: &LooseRef,
        moved_from: Option<&Option<String>>,
    ) -> Settled {
        let RefAt {
            git,
            repo,
            path,
            ref_name,
        } = *self;
        let unreadable = *loose == LooseRef::Unreadable;
        let disk_value = match loose {
            LooseRef::Oid(oid) => Some(oid),
            _ => None,
        };
        // Both values as the warnings name them.
        let log_shown = log_value.map_or(ZERO_OID, |s| s);
        let disk_shown = if unreadable {
            "unreadable"
        } else {
            disk_value.map_or(ZERO_OID, |s| s)
        };
        let back_at_old_value = moved_from.is_some_and(|old| old.as_ref() == disk_value);
        let restore_to = (unreadable || back_at_old_value).then(|| log_value.cloned());
        let restore_to = restore_to.filter(|new| {
            new.as_ref()
                .is_none_or(|oid| object_present(git, path, oid))
        });
        if let Some(new) = restore_to {
            match restore_ref(git, path, ref_name, new.as_deref(), unreadable) {
                Ok(()) => {
                    tracing::warn!(
                        repo,
                        ref_name,
                        log = log_shown,
                        disk = disk_shown,
                        "a committed ref write was lost on disk (a crash before it was synced); restored it from the log"
                    );
                    return Settled::Restored(start_up_row(
                        repo,
                        ref_name,
                        (disk_value.cloned(), new),
                        Phase::Restored,
                    ));
                }
                Err(e) => tracing::error!(
                    repo,
                    ref_name,
                    error = %e,
                    "cannot restore a lost ref write; reconciling to the disk instead"
                ),
            }
        }
        tracing::warn!(
            repo,
            ref_name,
            log = log_shown,
            disk = disk_shown,
            "ref moved outside vole; recording it as reconciled"
        );
        Settled::Reconciled(start_up_row(
            repo,
            ref_name,
            (log_value.cloned(), disk_value.cloned()),
            Phase::Reconciled,
        ))
    }
}

/// What [`RefRecorder::reconcile`] appended.
#[derive(Debug, Default, Clone, Copy, Serialize)]
pub struct ReconcileReport {
    pub resolved: usize,
    pub restored: usize,
    pub reconciled: usize,
}

/// A row the start-up check appends: `(old, new)` of `ref_name`, by
/// `vole-restore` or `vole-reconcile`.
fn start_up_row(
    repo: &str,
    ref_name: &str,
    (old, new): (Option<String>, Option<String>),
    phase: Phase,
) -> RefMove {
    RefMove {
        time_ns: now_ns(),
        repo: repo.to_string(),
        ref_name: ref_name.to_string(),
        old,
        new,
        actor: if phase == Phase::Restored {
            "vole-restore".into()
        } else {
            "vole-reconcile".into()
        },
        client: "local".into(),
        push_id: 0,
        phase,
    }
}

/// Refs compared with the disk at start; `refs/meta/*` is the server's own.
pub(super) fn is_tracked(ref_name: &str) -> bool {
    ref_name.starts_with("refs/heads/") || ref_name.starts_with("refs/tags/")
}

pub(super) fn refs_on_disk(git: &Git, repo: &Path) -> Option<HashMap<String, String>> {
    let output = git.run_in(
        repo,
        &[
            "for-each-ref",
            "--format=%(objectname) %(refname)",
            "refs/heads",
            "refs/tags",
        ],
    );
    match output {
        Ok(out) => Some(
            String::from_utf8_lossy(&out)
                .lines()
                .filter_map(|l| l.split_once(' '))
                .map(|(oid, name)| (name.to_string(), oid.to_string()))
                .collect(),
        ),
        Err(e) => {
            tracing::error!(repo = %repo.display(), error = %e, "cannot list the repo's refs; it is not checked against the log at this start");
            None
        }
    }
}

/// The object is in the repo (`git cat-file -e`).
pub(super) fn object_present(git: &Git, repo: &Path, oid: &str) -> bool {
    git.run_in(repo, &["cat-file", "-e", oid]).is_ok()
}

/// A loose ref file as found on disk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum LooseRef {
    Absent,
    /// Holds an object id (whether or not the object is there).
    Oid(String),
    /// Empty, garbled, or a symbolic ref: nothing a lost write of an
    /// object id leaves but the first.
    Unreadable,
}

pub(super) fn loose_ref(repo: &Path, name: &str) -> LooseRef {
    match std::fs::read(repo.join(name)) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => LooseRef::Absent,
        Err(_) => LooseRef::Unreadable,
        Ok(bytes) => {
            let text = String::from_utf8_lossy(&bytes);
            let text = text.trim_end();
            if vole_git::is_hex_oid(text) {
                LooseRef::Oid(text.to_ascii_lowercase())
            } else {
                LooseRef::Unreadable
            }
        }
    }
}

/// Writes `name` back to `new` (deletes it when `None`), durably and in
/// one step: the new value goes into `<name>.lock`, which is synced and
/// renamed over the ref (as git does), then the ref's directories are
/// synced. A deletion goes through `git update-ref -d` (the ref may also
/// be in `packed-refs`). No hook runs.
pub(super) fn restore_ref(
    git: &Git,
    repo: &Path,
    name: &str,
    new: Option<&str>,
    unreadable: bool,
) -> Result<(), RestoreError> {
    match new {
        // The log says the ref is gone and its file holds nothing git can
        // read: remove the file (git refuses to delete a ref it cannot
        // read).
        None if unreadable => {
            let file = repo.join(name);
            std::fs::remove_file(&file)
                .map_err(|source| RestoreError::Io { path: file, source })?;
        }
        Some(oid) => {
            use std::io::Write;
            let target = repo.join(name);
            let lock = repo.join(format!("{name}.lock"));
            if let Some(dir) = target.parent() {
                std::fs::create_dir_all(dir).map_err(|source| RestoreError::Io {
                    path: dir.to_path_buf(),
                    source,
                })?;
            }
            let mut file = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&lock)
                .map_err(|source| RestoreError::Io {
                    path: lock.clone(),
                    source,
                })?;
            let written = file
                .write_all(format!("{oid}\n").as_bytes())
                .and_then(|()| file.sync_all())
                .and_then(|()| std::fs::rename(&lock, &target));
            if let Err(source) = written {
                let _ = std::fs::remove_file(&lock);
                return Err(RestoreError::Io {
                    path: target,
                    source,
                });
            }
        }
        None => {
            git.run_in(
                repo,
                &[
                    "-c",
                    "core.hooksPath=/dev/null",
                    "update-ref",
                    "--no-deref",
                    "-d",
                    name,
                ],
            )?;
        }
    }
    durable::sync_ref_dirs(repo, [name])
        .map(drop)
        .map_err(RestoreError::Sync)
}

/// Why a lost ref write could not be written back.
#[derive(Debug, thiserror::Error)]
pub(super) enum RestoreError {
    #[error("{}: {source}", path.display())]
    Io {
        path: std::path::PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    Git(#[from] vole_git::GitError),
    #[error("syncing the ref's directories: {0}")]
    Sync(std::io::Error),
}

pub(super) fn ref_value(git: &Git, repo: &Path, name: &str) -> Option<String> {
    git.run_in(repo, &["rev-parse", "--verify", "--quiet", name])
        .ok()
        .map(|out| String::from_utf8_lossy(&out).trim().to_string())
        .filter(|s| !s.is_empty())
}
