//! The server side of the hooks: [`RefRecorder`] makes every ref move durable in the ref log before git may make it,
//! records the outcome, publishes committed moves on the ref-move feed, and
//! keeps what the log says each ref holds (to reconcile with the disk at
//! start, and to restore a committed ref write the disk lost) and the
//! recent activity of each repo.
//!
//! What it syncs of git's writes: git syncs the pack, its index and each
//! ref lock file itself (`crate::git::DURABLE_WRITES`) but no directory.
//! At `prepared` the recorder syncs `objects/pack` and `objects` (the
//! quarantine's files were linked in there), so no ref can point at
//! objects a power cut would take; at `committed` it syncs the directories
//! of the moved refs before the hook returns, so git reports "ok" to the
//! pusher only once the moves are on disk.

use parking_lot::Mutex;
use std::collections::{HashMap, VecDeque};
use std::path::Path;
use std::sync::Arc;

use serde::Serialize;
use tokio::sync::broadcast;

use super::{Outcome, PushContext, RefUpdate, ZERO_OID, is_zero};
use super::{Phase, RefMove};
use crate::durable;
use crate::git::Git;
use crate::log::{Entry, Log, LogError, now_ns};
use crate::page::Pagination;
use crate::repos::{NameError, RepoName, Repos};

/// Most activity entries kept in memory per repo.
pub const ACTIVITY_PER_REPO: usize = 1000;
/// Ref-move feed capacity; a subscriber that falls further behind lags
/// (skips), it never blocks a push.
const FEED_CAPACITY: usize = 1024;

/// Moves of one committed (or reconciled) transaction, as published.
#[derive(Debug, Clone, Serialize)]
pub struct RefMoveEvent {
    pub repo: String,
    pub seq: u64,
    pub moves: Vec<RefMove>,
}

/// One row of a repo's activity.
#[derive(Debug, Clone, Serialize)]
pub struct ActivityEntry {
    pub seq: u64,
    #[serde(flatten)]
    pub ref_move: RefMove,
}

/// What the log says, rebuilt by replay and kept current.
#[derive(Debug, Default)]
pub struct RefState {
    /// repo -> ref -> oid, as of the last committed, reconciled or
    /// checkpoint record.
    known: HashMap<String, HashMap<String, String>>,
    /// (repo, push id, ref) -> (seq, prepared move) without an outcome yet.
    pending: HashMap<(String, u64, String), (u64, RefMove)>,
    /// repo -> ref -> the last committed (or restored) move's `(old, new)`,
    /// while no later reconciliation overrode it: what a lost write of it
    /// would leave on disk. Moves older than a compaction's checkpoint are
    /// not here.
    last_committed: HashMap<String, HashMap<String, CommittedMove>>,
    activity: HashMap<String, VecDeque<ActivityEntry>>,
}

/// The values a committed move took a ref from and to.
#[derive(Debug, Clone, PartialEq, Eq)]
struct CommittedMove {
    old: Option<String>,
    new: Option<String>,
}

impl RefState {
    /// Folds one replayed log entry in.
    pub fn apply(&mut self, entry: Entry<RefMove>) {
        match entry {
            Entry::Checkpoint(rows) => {
                for row in rows {
                    self.set_known(&row);
                }
            }
            Entry::Txn { seq, rows } => self.apply_txn(seq, &rows),
        }
    }

    fn apply_txn(&mut self, seq: u64, rows: &[RefMove]) {
        for row in rows {
            let key = (row.repo.clone(), row.push_id, row.ref_name.clone());
            match row.phase {
                Phase::Prepared => {
                    self.pending.insert(key, (seq, row.clone()));
                }
                Phase::Aborted => {
                    self.pending.remove(&key);
                }
                Phase::Restored => {
                    self.set_known(row);
                    self.set_last_committed(row);
                }
                Phase::Committed | Phase::Reconciled => {
                    self.pending.remove(&key);
                    self.set_known(row);
                    if row.phase == Phase::Committed {
                        self.set_last_committed(row);
                    } else if let Some(refs) = self.last_committed.get_mut(&row.repo) {
                        refs.remove(&row.ref_name);
                    }
                    let activity = self.activity.entry(row.repo.clone()).or_default();
                    activity.push_back(ActivityEntry {
                        seq,
                        ref_move: row.clone(),
                    });
                    if activity.len() > ACTIVITY_PER_REPO {
                        activity.pop_front();
                    }
                }
                Phase::Checkpoint => self.set_known(row),
            }
        }
    }

    fn set_last_committed(&mut self, row: &RefMove) {
        self.last_committed
            .entry(row.repo.clone())
            .or_default()
            .insert(
                row.ref_name.clone(),
                CommittedMove {
                    old: row.old.clone(),
                    new: row.new.clone(),
                },
            );
    }

    fn set_known(&mut self, row: &RefMove) {
        let refs = self.known.entry(row.repo.clone()).or_default();
        match &row.new {
            Some(oid) => {
                refs.insert(row.ref_name.clone(), oid.clone());
            }
            None => {
                refs.remove(&row.ref_name);
            }
        }
    }
}

/// Why a hook's request could not be carried out.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    #[error(transparent)]
    Log(#[from] LogError),
    #[error("the push names no valid repository: {0}")]
    Repo(#[from] NameError),
    #[error("cannot make the repository's new {what} durable: {source}")]
    Sync {
        what: &'static str,
        #[source]
        source: std::io::Error,
    },
}

/// Records ref moves; see the module doc.
pub struct RefRecorder {
    log: Arc<Log<RefMove>>,
    /// Where each repo lives, for the directory syncs.
    repos: Repos,
    state: Mutex<RefState>,
    feed: broadcast::Sender<Arc<RefMoveEvent>>,
    /// Bumped (before subscribers hear of it) on every published move:
    /// caches keyed by it see a push the moment its hook returns.
    generation: std::sync::atomic::AtomicU64,
}

impl std::fmt::Debug for RefRecorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RefRecorder").finish_non_exhaustive()
    }
}

fn oid_or_none(oid: &str) -> Option<String> {
    (!is_zero(oid)).then(|| oid.to_string())
}

fn rows(push: &PushContext, moves: &[RefUpdate], phase: Phase) -> Vec<RefMove> {
    let time_ns = now_ns();
    moves
        .iter()
        .map(|m| RefMove {
            time_ns,
            repo: push.repo.clone(),
            ref_name: m.ref_name.clone(),
            old: oid_or_none(&m.old),
            new: oid_or_none(&m.new),
            actor: push.actor.clone(),
            client: push.client.clone(),
            push_id: push.push_id,
            phase,
        })
        .collect()
}

impl RefRecorder {
    pub fn new(log: Arc<Log<RefMove>>, state: RefState, repos: Repos) -> RefRecorder {
        RefRecorder {
            log,
            repos,
            state: Mutex::new(state),
            feed: broadcast::channel(FEED_CAPACITY).0,
            generation: std::sync::atomic::AtomicU64::new(0),
        }
    }

    fn state(&self) -> parking_lot::MutexGuard<'_, RefState> {
        self.state.lock()
    }

    /// A new subscriber to committed ref moves.
    pub fn subscribe(&self) -> broadcast::Receiver<Arc<RefMoveEvent>> {
        self.feed.subscribe()
    }

    pub fn log(&self) -> &Arc<Log<RefMove>> {
        &self.log
    }

    fn git_dir(&self, push: &PushContext) -> Result<std::path::PathBuf, RecordError> {
        Ok(self.repos.path(&RepoName::parse(&push.repo)?))
    }

    /// reference-transaction `prepared`: the push's objects and the moves
    /// durable before git may move the refs. Blocking (waits for syncs).
    pub fn prepared(&self, push: &PushContext, moves: &[RefUpdate]) -> Result<u64, RecordError> {
        let git_dir = self.git_dir(push)?;
        durable::sync_object_dirs(&git_dir).map_err(|source| RecordError::Sync {
            what: "objects",
            source,
        })?;
        let rows = rows(push, moves, Phase::Prepared);
        let seq = self.log.commit(&rows)?;
        self.state().apply_txn(seq, &rows);
        Ok(seq)
    }

    /// reference-transaction `committed`/`aborted`: for a commit, the moved
    /// refs' directories synced; then the outcome, durable, and for a
    /// commit published on the feed before this returns. A failed sync is
    /// reported after the outcome is recorded (the refs did move).
    pub fn outcome(
        &self,
        push: &PushContext,
        moves: &[RefUpdate],
        outcome: Outcome,
    ) -> Result<u64, RecordError> {
        let phase = match outcome {
            Outcome::Committed => Phase::Committed,
            Outcome::Aborted => Phase::Aborted,
        };
        let synced = match outcome {
            Outcome::Committed => {
                let git_dir = self.git_dir(push)?;
                durable::sync_ref_dirs(&git_dir, moves.iter().map(|m| m.ref_name.as_str()))
                    .map(drop)
            }
            Outcome::Aborted => Ok(()),
        };
        let rows = rows(push, moves, phase);
        let seq = self.log.commit(&rows)?;
        self.state().apply_txn(seq, &rows);
        if outcome == Outcome::Committed {
            self.publish(seq, rows);
        }
        synced.map_err(|source| RecordError::Sync {
            what: "refs",
            source,
        })?;
        Ok(seq)
    }

    /// The feed's generation: changes whenever a ref move is published.
    pub fn generation(&self) -> u64 {
        self.generation.load(std::sync::atomic::Ordering::Acquire)
    }

    fn publish(&self, seq: u64, moves: Vec<RefMove>) {
        self.generation
            .fetch_add(1, std::sync::atomic::Ordering::AcqRel);
        let repo = moves.first().map(|m| m.repo.clone()).unwrap_or_default();
        // No subscriber is not an error.
        let _ = self.feed.send(Arc::new(RefMoveEvent { repo, seq, moves }));
    }

    /// A repo's recent activity, newest first: one page and the total.
    pub fn activity(&self, repo: &str, page: Pagination) -> (Vec<ActivityEntry>, usize) {
        let state = self.state();
        let Some(entries) = state.activity.get(repo) else {
            return (Vec::new(), 0);
        };
        let page = page.slice(entries.iter().rev()).cloned().collect();
        (page, entries.len())
    }

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

        // 1. prepared without outcome
        let pending: Vec<(u64, RefMove)> = self.state().pending.values().cloned().collect();
        let mut resolved: HashMap<(String, u64, Phase), Vec<RefMove>> = HashMap::new();
        for (seq, prepared) in pending {
            if !paths.contains_key(prepared.repo.as_str()) {
                continue;
            }
            let on_disk = disk
                .get(&prepared.repo)
                .and_then(|refs| refs.get(&prepared.ref_name))
                .cloned();
            let on_disk = on_disk
                .or_else(|| ref_value(git, paths[prepared.repo.as_str()], &prepared.ref_name));
            let phase = if on_disk == prepared.new {
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

        // 2. committed writes the disk lost, and refs moved outside vole
        for (name, on_disk) in &disk {
            let (known, last_committed) = {
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
                let last = state.last_committed.get(name).cloned().unwrap_or_default();
                (known, last)
            };
            let path = paths[name.as_str()];
            let mut restored = Vec::new();
            let mut rows = Vec::new();
            let mut names: Vec<&String> = on_disk.keys().chain(known.keys()).collect();
            names.sort();
            names.dedup();
            for ref_name in names {
                let log_value = known.get(ref_name);
                // git lists no ref it cannot read (an empty or garbled
                // file, or one naming a missing object): read the file.
                let loose = match on_disk.get(ref_name) {
                    Some(oid) => LooseRef::Oid(oid.clone()),
                    None => loose_ref(path, ref_name),
                };
                let unreadable = loose == LooseRef::Unreadable;
                let disk_value = match &loose {
                    LooseRef::Oid(oid) => Some(oid),
                    _ => None,
                };
                if log_value == disk_value && !unreadable {
                    continue;
                }
                let lost = last_committed.get(ref_name).filter(|m| {
                    m.new.as_ref() == log_value
                        && (unreadable || m.old.as_ref() == disk_value)
                        && m.new
                            .as_ref()
                            .is_none_or(|oid| object_present(git, path, oid))
                });
                if let Some(lost) = lost {
                    match restore_ref(git, path, ref_name, lost.new.as_deref()) {
                        Ok(()) => {
                            tracing::warn!(
                                repo = name,
                                ref_name,
                                log = log_value.map_or(ZERO_OID, |s| s),
                                disk = if unreadable {
                                    "unreadable"
                                } else {
                                    disk_value.map_or(ZERO_OID, |s| s)
                                },
                                "a committed ref write was lost on disk (a crash before it was synced); restored it from the log"
                            );
                            restored.push(RefMove {
                                time_ns: now_ns(),
                                repo: name.clone(),
                                ref_name: ref_name.clone(),
                                old: disk_value.cloned(),
                                new: lost.new.clone(),
                                actor: "vole-restore".into(),
                                client: "local".into(),
                                push_id: 0,
                                phase: Phase::Restored,
                            });
                            continue;
                        }
                        Err(e) => tracing::error!(
                            repo = name,
                            ref_name,
                            error = %e,
                            "cannot restore a lost ref write; reconciling to the disk instead"
                        ),
                    }
                }
                tracing::warn!(
                    repo = name,
                    ref_name,
                    log = log_value.map_or(ZERO_OID, |s| s),
                    disk = if unreadable {
                        "unreadable"
                    } else {
                        disk_value.map_or(ZERO_OID, |s| s)
                    },
                    "ref moved outside vole; recording it as reconciled"
                );
                rows.push(RefMove {
                    time_ns: now_ns(),
                    repo: name.clone(),
                    ref_name: ref_name.clone(),
                    old: log_value.cloned(),
                    new: disk_value.cloned(),
                    actor: "vole-reconcile".into(),
                    client: "local".into(),
                    push_id: 0,
                    phase: Phase::Reconciled,
                });
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
        }
        Ok(report)
    }

    /// Compacts the ref log: a checkpoint of every known ref value, then the
    /// last `keep` transactions (never a prepared one still waiting).
    pub fn compact(&self, keep: u64) -> Result<crate::log::CompactReport, LogError> {
        let (checkpoint, oldest_pending) = {
            let state = self.state();
            let mut rows = Vec::new();
            for (repo, refs) in &state.known {
                for (ref_name, oid) in refs {
                    rows.push(RefMove {
                        time_ns: now_ns(),
                        repo: repo.clone(),
                        ref_name: ref_name.clone(),
                        old: None,
                        new: Some(oid.clone()),
                        actor: "vole-checkpoint".into(),
                        client: "local".into(),
                        push_id: 0,
                        phase: Phase::Checkpoint,
                    });
                }
            }
            rows.sort_by(|a, b| (&a.repo, &a.ref_name).cmp(&(&b.repo, &b.ref_name)));
            (rows, state.pending.values().map(|(seq, _)| *seq).min())
        };
        let (written, _) = self.log.watermarks();
        let mut drop_through = written.saturating_sub(keep);
        if let Some(oldest) = oldest_pending {
            drop_through = drop_through.min(oldest.saturating_sub(1));
        }
        self.log.mark_applied(drop_through);
        self.log.compact(drop_through, &checkpoint)
    }
}

/// What [`RefRecorder::reconcile`] appended.
#[derive(Debug, Default, Clone, Copy, Serialize)]
pub struct ReconcileReport {
    pub resolved: usize,
    pub restored: usize,
    pub reconciled: usize,
}

/// Refs compared with the disk at start; `refs/meta/*` is the server's own.
fn is_tracked(ref_name: &str) -> bool {
    ref_name.starts_with("refs/heads/") || ref_name.starts_with("refs/tags/")
}

fn refs_on_disk(git: &Git, repo: &Path) -> Option<HashMap<String, String>> {
    let output = git.run(&[
        std::ffi::OsStr::new("-C"),
        repo.as_os_str(),
        std::ffi::OsStr::new("for-each-ref"),
        std::ffi::OsStr::new("--format=%(objectname) %(refname)"),
        std::ffi::OsStr::new("refs/heads"),
        std::ffi::OsStr::new("refs/tags"),
    ]);
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
fn object_present(git: &Git, repo: &Path, oid: &str) -> bool {
    git.run(&[
        std::ffi::OsStr::new("-C"),
        repo.as_os_str(),
        std::ffi::OsStr::new("cat-file"),
        std::ffi::OsStr::new("-e"),
        std::ffi::OsStr::new(oid),
    ])
    .is_ok()
}

/// A loose ref file as found on disk.
#[derive(Debug, Clone, PartialEq, Eq)]
enum LooseRef {
    Absent,
    /// Holds an object id (whether or not the object is there).
    Oid(String),
    /// Empty, garbled, or a symbolic ref: nothing a lost write of an
    /// object id leaves but the first.
    Unreadable,
}

fn loose_ref(repo: &Path, name: &str) -> LooseRef {
    match std::fs::read(repo.join(name)) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => LooseRef::Absent,
        Err(_) => LooseRef::Unreadable,
        Ok(bytes) => {
            let text = String::from_utf8_lossy(&bytes);
            let text = text.trim_end();
            if matches!(text.len(), 40 | 64) && text.bytes().all(|b| b.is_ascii_hexdigit()) {
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
fn restore_ref(git: &Git, repo: &Path, name: &str, new: Option<&str>) -> Result<(), String> {
    match new {
        Some(oid) => {
            use std::io::Write;
            let target = repo.join(name);
            let lock = repo.join(format!("{name}.lock"));
            if let Some(dir) = target.parent() {
                std::fs::create_dir_all(dir)
                    .map_err(|e| format!("creating {}: {e}", dir.display()))?;
            }
            let mut file = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&lock)
                .map_err(|e| format!("creating {}: {e}", lock.display()))?;
            let written = file
                .write_all(format!("{oid}\n").as_bytes())
                .and_then(|()| file.sync_all())
                .and_then(|()| std::fs::rename(&lock, &target));
            if let Err(e) = written {
                let _ = std::fs::remove_file(&lock);
                return Err(format!("writing {}: {e}", target.display()));
            }
        }
        None => {
            git.run(&[
                std::ffi::OsStr::new("-c"),
                std::ffi::OsStr::new("core.hooksPath=/dev/null"),
                std::ffi::OsStr::new("-C"),
                repo.as_os_str(),
                std::ffi::OsStr::new("update-ref"),
                std::ffi::OsStr::new("--no-deref"),
                std::ffi::OsStr::new("-d"),
                std::ffi::OsStr::new(name),
            ])
            .map_err(|e| e.to_string())?;
        }
    }
    durable::sync_ref_dirs(repo, [name])
        .map(drop)
        .map_err(|e| e.to_string())
}

fn ref_value(git: &Git, repo: &Path, name: &str) -> Option<String> {
    git.run(&[
        std::ffi::OsStr::new("-C"),
        repo.as_os_str(),
        std::ffi::OsStr::new("rev-parse"),
        std::ffi::OsStr::new("--verify"),
        std::ffi::OsStr::new("--quiet"),
        std::ffi::OsStr::new(name),
    ])
    .ok()
    .map(|out| String::from_utf8_lossy(&out).trim().to_string())
    .filter(|s| !s.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn push(i: u64) -> (PushContext, Vec<RefUpdate>) {
        (
            PushContext {
                repo: "a/r".into(),
                push_id: i,
                actor: "anonymous".into(),
                client: "127.0.0.1".into(),
            },
            vec![RefUpdate {
                ref_name: "refs/heads/main".into(),
                old: format!("{:040x}", i),
                new: format!("{:040x}", i + 1),
                fast_forward: None,
            }],
        )
    }

    #[test]
    fn a_subscriber_that_never_reads_does_not_block_pushes() {
        let dir = tempfile::tempdir().unwrap();
        let (log, _) = Log::<RefMove>::open(dir.path(), |_| {}).unwrap();
        let repos = Repos::new(crate::datadir::DataDir::new(dir.path()));
        std::fs::create_dir_all(dir.path().join("repos/a/r.git/refs/heads")).unwrap();
        let recorder = RefRecorder::new(Arc::new(log), RefState::default(), repos);
        let mut stalled = recorder.subscribe();
        let pushes = FEED_CAPACITY as u64 + 50;
        for i in 0..pushes {
            let (ctx, moves) = push(i);
            recorder.outcome(&ctx, &moves, Outcome::Committed).unwrap();
        }
        // The stalled subscriber lost the oldest events instead of holding
        // the pushes back.
        assert!(
            matches!(stalled.try_recv(), Err(broadcast::error::TryRecvError::Lagged(n)) if n == 50),
            "the feed must drop what a slow subscriber cannot take"
        );
        let (page, total) = recorder.activity("a/r", Pagination::new(1, 1).unwrap());
        assert_eq!(total, ACTIVITY_PER_REPO.min(pushes as usize));
        assert_eq!(page[0].ref_move.push_id, pushes - 1);
    }
}
