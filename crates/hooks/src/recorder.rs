//! The server side of the hooks: [`RefRecorder`] makes every ref move durable in the ref log before git may make it,
//! records the outcome, publishes committed moves on the ref-move feed, and
//! keeps what the log says each ref holds (to reconcile with the disk at
//! start, and to restore a committed ref write the disk lost) and the
//! recent activity of each repo.
//!
//! What it syncs of git's writes: git syncs the pack, its index and each
//! ref lock file itself (`vole_git::DURABLE_WRITES`) but no directory.
//! At `prepared` the recorder syncs `objects/pack` and `objects` (the
//! quarantine's files were linked in there), so no ref can point at
//! objects a power cut would take; at `committed` it syncs the directories
//! of the moved refs before the hook returns, so git reports "ok" to the
//! pusher only once the moves are on disk.

use parking_lot::Mutex;
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use serde::Serialize;
use tokio::sync::broadcast;

use super::{Outcome, PushContext, RefUpdate, is_zero};
use super::{Phase, RefMove};
use vole_git::durable;
use vole_git::repos::{Incarnation, NameError, RepoName, Repos};
use vole_log::{Entry, Log, LogError, now_ns};
use vole_stdx::page::Pagination;

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
    pub(super) known: HashMap<String, HashMap<String, String>>,
    /// (repo, push id, ref) -> (seq, prepared move) without an outcome yet.
    pub(super) pending: HashMap<(String, u64, String), (u64, RefMove)>,
    /// repo -> ref -> the value the last committed (or restored) move
    /// took the ref from, while no later reconciliation overrode it: what a
    /// lost write of it would leave on disk. The value it took the ref to
    /// is `known`'s. Moves older than a compaction's checkpoint are not
    /// here.
    pub(super) moved_from: HashMap<String, HashMap<String, Option<String>>>,
    activity: HashMap<String, VecDeque<ActivityEntry>>,
    /// (repo, pull request number) -> the last merge intent recorded for
    /// it and not settled since ([`RefRecorder::settle_merge`]).
    pub(super) merge_intents: HashMap<(String, u64), RefMove>,
    /// repo -> the incarnation the rows above are of (the last `born` or
    /// `adopted` row of the name; absent: rows from before incarnations).
    incarnations: HashMap<String, String>,
}

impl RefState {
    /// repo -> ref -> object id, as the log's last committed (or
    /// reconciled, restored, checkpoint) records left them.
    pub fn known(&self) -> &HashMap<String, HashMap<String, String>> {
        &self.known
    }

    /// Moves prepared but without an outcome yet (a push in flight, or one
    /// a crash interrupted, which the next start settles).
    pub fn pending_moves(&self) -> impl Iterator<Item = &RefMove> {
        self.pending.values().map(|(_, row)| row)
    }

    /// Folds one replayed log entry in.
    pub fn apply(&mut self, entry: Entry<RefMove>) {
        match entry {
            Entry::Checkpoint(rows) => {
                for row in rows {
                    match row.phase {
                        Phase::Born | Phase::Adopted => self.checkpoint_incarnation(&row),
                        // An unsettled merge intent the compaction kept.
                        phase if phase.is_merge_intent() => {
                            self.merge_intents
                                .insert((row.repo.clone(), row.push_id), row);
                        }
                        _ => self.set_known(&row),
                    }
                }
            }
            Entry::Txn { seq, rows } => self.apply_txn(seq, &rows),
        }
    }

    /// repo -> the incarnation its rows are of, as the log says (the last
    /// `born` or `adopted` row of the name).
    pub fn recorded_incarnations(&self) -> &HashMap<String, String> {
        &self.incarnations
    }

    /// Forgets everything of `repo` (deleted, or another repo of the
    /// name from here on).
    pub(super) fn forget(&mut self, repo: &str) {
        self.known.remove(repo);
        self.moved_from.remove(repo);
        self.activity.remove(repo);
        self.incarnations.remove(repo);
        self.pending.retain(|(name, _, _), _| name != repo);
        self.merge_intents.retain(|(name, _), _| name != repo);
    }

    /// A `born` row starts a new repo of the name: what the rows before it
    /// said is another repo's, so it is forgotten (also when a checkpoint
    /// already named this incarnation: the transactions a compaction kept
    /// after its checkpoint may hold the earlier repo's rows, and every
    /// row of this one comes after its `born` row). An `adopted` row names
    /// the incarnation of the rows before it.
    fn mark_incarnation(&mut self, row: &RefMove) {
        if row.phase == Phase::Born {
            self.forget(&row.repo);
        }
        self.incarnations
            .insert(row.repo.clone(), row.ref_name.clone());
    }

    /// A checkpoint's `born` row: the name's rows in the checkpoint (and
    /// after it) are of this incarnation.
    fn checkpoint_incarnation(&mut self, row: &RefMove) {
        self.incarnations
            .insert(row.repo.clone(), row.ref_name.clone());
    }

    /// After replay: the state of each repo on disk is kept only when its
    /// rows are of the incarnation it is (`incarnation_of` tells); the
    /// rows of a name whose repo is another (a `born` row lost to a crash
    /// between the creation and its record) or gone are forgotten, so
    /// nothing of a deleted repo reaches one created under its name.
    pub fn settle(&mut self, incarnation_of: impl Fn(&str) -> Option<Incarnation>) {
        let names: Vec<String> = self
            .known
            .keys()
            .chain(self.activity.keys())
            .chain(self.moved_from.keys())
            .chain(self.pending.keys().map(|(name, _, _)| name))
            .cloned()
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect();
        for name in names {
            let recorded = self.incarnations.get(&name).map(String::as_str);
            match incarnation_of(&name) {
                Some(on_disk) if on_disk.owns(recorded) => {
                    self.incarnations.insert(name, on_disk.id().to_string());
                }
                Some(_) => self.forget(&name),
                // No repo there: its rows stay (the start-up restore and
                // `vole check` skip what is not on disk).
                None => {}
            }
        }
    }

    pub(super) fn apply_txn(&mut self, seq: u64, rows: &[RefMove]) {
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
                    self.set_moved_from(row);
                }
                Phase::Committed | Phase::Reconciled => {
                    self.pending.remove(&key);
                    self.set_known(row);
                    if row.phase == Phase::Committed {
                        self.set_moved_from(row);
                    } else if let Some(refs) = self.moved_from.get_mut(&row.repo) {
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
                // HEAD's target is read from HEAD itself; the row is the
                // log's record of the change.
                Phase::Head => {}
                Phase::Born | Phase::Adopted => self.mark_incarnation(row),
                // Objects were pruned; no ref moved.
                Phase::Gc => {}
                Phase::MergeIntent | Phase::FastForwardIntent | Phase::SquashIntent => {
                    self.merge_intents
                        .insert((row.repo.clone(), row.push_id), row.clone());
                }
                Phase::MergeSettled => {
                    self.merge_intents.remove(&(row.repo.clone(), row.push_id));
                }
            }
        }
    }

    fn set_moved_from(&mut self, row: &RefMove) {
        self.moved_from
            .entry(row.repo.clone())
            .or_default()
            .insert(row.ref_name.clone(), row.old.clone());
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
pub enum RecorderError {
    #[error(transparent)]
    Log(#[from] LogError),
    #[error("the push names no valid repository: {0}")]
    Repo(#[from] NameError),
    /// What was asked is under way already (a second merge of one pull
    /// request).
    #[error("{0}")]
    Busy(String),
    #[error("cannot make the repository's new {what} durable: {source}")]
    Sync {
        what: &'static str,
        #[source]
        source: std::io::Error,
    },
}

/// Records ref moves; see the module doc.
pub struct RefRecorder {
    pub(super) log: Arc<Log<RefMove>>,
    /// Where each repo lives, for the directory syncs.
    repos: Repos,
    state: Mutex<RefState>,
    feed: broadcast::Sender<Arc<RefMoveEvent>>,
    /// Bumped (before subscribers hear of it) on every published move:
    /// caches keyed by it see a push the moment its hook returns.
    generation: std::sync::atomic::AtomicU64,
    /// Read by every prepared record; written by a backup's cut, which so
    /// sees no push begin to move refs while it reads them.
    pub(super) cut: parking_lot::RwLock<()>,
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
            cut: parking_lot::RwLock::new(()),
        }
    }

    pub(super) fn state(&self) -> parking_lot::MutexGuard<'_, RefState> {
        self.state.lock()
    }

    /// A new subscriber to committed ref moves.
    pub fn subscribe(&self) -> broadcast::Receiver<Arc<RefMoveEvent>> {
        self.feed.subscribe()
    }

    pub fn log(&self) -> &Arc<Log<RefMove>> {
        &self.log
    }

    /// Whether `ref_name` exists in `repo` as the ref log knows it.
    pub fn has_ref(&self, repo: &str, ref_name: &str) -> bool {
        self.state()
            .known()
            .get(repo)
            .is_some_and(|refs| refs.contains_key(ref_name))
    }

    fn git_dir(&self, push: &PushContext) -> Result<std::path::PathBuf, RecorderError> {
        Ok(self.repos.path(&RepoName::parse(&push.repo)?))
    }

    /// Waits for prepared records under way and keeps new ones from being
    /// taken while the guard lives (a backup's cut): a ref a push is about
    /// to move has its prepared record in the log already.
    pub fn hold_moves(&self) -> parking_lot::RwLockWriteGuard<'_, ()> {
        self.cut.write()
    }

    /// reference-transaction `prepared`: the push's objects and the moves
    /// durable before git may move the refs. Blocking (waits for syncs).
    pub fn prepared(&self, push: &PushContext, moves: &[RefUpdate]) -> Result<u64, RecorderError> {
        let git_dir = self.git_dir(push)?;
        durable::sync_object_dirs(&git_dir).map_err(|source| RecorderError::Sync {
            what: "objects",
            source,
        })?;
        let rows = rows(push, moves, Phase::Prepared);
        let _cut = self.cut.read();
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
    ) -> Result<u64, RecorderError> {
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
        synced.map_err(|source| RecorderError::Sync {
            what: "refs",
            source,
        })?;
        Ok(seq)
    }

    /// The branches of `repo` the log knows (short names, unsorted).
    pub fn branches(&self, repo: &str) -> Vec<String> {
        self.state()
            .known
            .get(repo)
            .map(|refs| {
                refs.keys()
                    .filter_map(|r| r.strip_prefix("refs/heads/"))
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Points `repo`'s HEAD at `branch` (synced: `repos::set_head_branch`),
    /// then records it in the log ([`Phase::Head`]) and publishes it, so
    /// whatever is keyed by the feed's generation sees the new default
    /// branch. Blocking. The caller checked that the branch exists.
    pub fn point_head(
        &self,
        repo: &RepoName,
        branch: &str,
        actor: &str,
        client: &str,
        push_id: u64,
    ) -> Result<u64, RecorderError> {
        let dir = self.repos.path(repo);
        vole_git::repos::set_head_branch(&dir, branch).map_err(|source| RecorderError::Sync {
            what: "HEAD",
            source,
        })?;
        let repo = repo.to_string();
        let ref_name = format!("refs/heads/{branch}");
        let tip = self
            .state()
            .known
            .get(&repo)
            .and_then(|refs| refs.get(&ref_name))
            .cloned();
        let rows = vec![RefMove {
            time_ns: now_ns(),
            repo,
            ref_name,
            old: None,
            new: tip,
            actor: actor.to_string(),
            client: client.to_string(),
            push_id,
            phase: Phase::Head,
        }];
        let seq = self.log.commit(&rows)?;
        self.state().apply_txn(seq, &rows);
        self.publish(seq, rows);
        Ok(seq)
    }

    /// Records that repo `repo` is now incarnation `incarnation`: a `born`
    /// row for a repo just created (what the log held of the name before
    /// is forgotten), an `adopted` one for a repo given an incarnation at
    /// the upgrade. Durable before it returns. Blocking.
    pub fn mark_incarnation(
        &self,
        repo: &RepoName,
        incarnation: &Incarnation,
        phase: Phase,
        actor: &str,
        client: &str,
    ) -> Result<u64, RecorderError> {
        debug_assert!(matches!(phase, Phase::Born | Phase::Adopted));
        self.record_marker(repo, incarnation.id(), phase, actor, client)
    }

    /// Records that `repo`'s unreachable objects were pruned
    /// ([`Phase::Gc`]), durably. Nothing is published: no ref moved.
    pub fn record_gc(
        &self,
        repo: &RepoName,
        actor: &str,
        client: &str,
    ) -> Result<u64, RecorderError> {
        self.record_marker(repo, "", Phase::Gc, actor, client)
    }

    /// One row that moves no ref (`old` and `new` none), durable.
    fn record_marker(
        &self,
        repo: &RepoName,
        ref_name: &str,
        phase: Phase,
        actor: &str,
        client: &str,
    ) -> Result<u64, RecorderError> {
        let rows = vec![RefMove {
            time_ns: now_ns(),
            repo: repo.to_string(),
            ref_name: ref_name.to_string(),
            old: None,
            new: None,
            actor: actor.to_string(),
            client: client.to_string(),
            push_id: 0,
            phase,
        }];
        let seq = self.log.commit(&rows)?;
        self.state().apply_txn(seq, &rows);
        Ok(seq)
    }

    /// Forgets a deleted repo: its refs, activity and pushes under way as
    /// the log told them (the log keeps its rows).
    pub fn forget_repo(&self, repo: &RepoName) {
        self.state().forget(&repo.to_string());
    }

    /// The feed's generation: changes whenever a ref move is published.
    pub fn generation(&self) -> u64 {
        self.generation.load(std::sync::atomic::Ordering::Acquire)
    }

    pub(super) fn publish(&self, seq: u64, moves: Vec<RefMove>) {
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

    /// Compacts the ref log: a checkpoint of every known ref value, then the
    /// last `keep` transactions (never a prepared one still waiting).
    pub fn compact(&self, keep: u64) -> Result<vole_log::CompactReport, LogError> {
        let (checkpoint, oldest_pending) = {
            let state = self.state();
            let mut rows = Vec::new();
            // Each repo's incarnation first (a row sorting before its refs):
            // what the checkpoint says of a name is of that incarnation.
            for (repo, incarnation) in &state.incarnations {
                rows.push(RefMove {
                    time_ns: now_ns(),
                    repo: repo.clone(),
                    ref_name: incarnation.clone(),
                    old: None,
                    new: None,
                    actor: "vole-checkpoint".into(),
                    client: "local".into(),
                    push_id: 0,
                    phase: Phase::Born,
                });
            }
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
            // The merge intents not settled yet: a merge whose last step
            // failed is settled at the next start, compacted or not.
            rows.extend(state.merge_intents.values().map(|intent| RefMove {
                actor: intent.actor.clone(),
                ..intent.clone()
            }));
            // A repo's `born` row before its refs.
            rows.sort_by(|a, b| {
                (&a.repo, a.phase != Phase::Born, &a.ref_name).cmp(&(
                    &b.repo,
                    b.phase != Phase::Born,
                    &b.ref_name,
                ))
            });
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
        let repos = Repos::new(vole_git::datadir::DataDir::new(dir.path()));
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
