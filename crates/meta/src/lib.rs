//! Metadata in git: issues, comments, change requests, ACLs and repo
//! settings, stored as JSON documents on 256 sharded refs
//! (`refs/meta/shards/00`..`ff`) inside each repo, so a clone that fetches
//! `refs/meta/*` carries them along.
//!
//! # Write path
//!
//! validate (under the repo's lock: versions, numbers) -> append to the
//! meta log -> wait until the log is durable -> acknowledge. The write is
//! in the derived [`index::Index`] from the moment it is appended, so the
//! next read sees it before any git object exists. A fold thread then
//! folds the pending writes of each shard into commits (at `fold_batch`
//! writes, or once the oldest has waited `fold_interval`) through the one
//! CAS commit helper in [`fold`], and marks them applied in the log only
//! once their pack and refs are synced.
//!
//! # Recovery
//!
//! At open, each repo's shard trees are read into its index, and every log
//! record above its shard tip's `Vole-Log-Seq` is put back in the index and
//! the fold queue: an acknowledged write is never lost, and one already
//! folded is never folded twice. With `read_at_open` (the server's way)
//! the open reads the repo-level shards and leaves the rest to a
//! background reader (`loading.rs`), waiting for it a bounded time, so a
//! start does not grow with the issues stored.
//!
//! # Where each part lives
//!
//! Here: the store's options and its shared state (`Inner`, each repo's
//! `RepoMeta`). `error.rs` (its errors), `write.rs` (the write helpers
//! every operation uses), `requests.rs` (what the API sends), `entities.rs` (create, edit, read
//! and list each kind of document), `append.rs` (the ordered appender; its decisions
//! are the I/O-free state machine in `append_order.rs`),
//! `recovery.rs` (opening: index rebuild and re-folding), `loading.rs`
//! (the rest of each repo's documents, read after the open; applied on a
//! thread of its own, `loading/apply.rs`), `fold_thread.rs`
//! (when and what a fold cycle folds, and settling it), [`fold`] (the one
//! CAS commit helper; the commits it builds in `fold_build.rs`), `pack.rs` (its pack writer), `repack.rs`, `stats.rs` (flush,
//! close, compaction, figures), [`entity`] (document schemas and tree
//! layout), [`index`], [`shard`], [`record`] (the meta log's record kind).
//! The JSON API is `vole_api::threads` (issues, change requests and their
//! comments) and `vole_api::meta` (ACL, settings); the on-disk format is in
//! `docs/metadata-format.md`.

mod append;
mod append_order;
pub mod bodies;
mod checks;
mod comments;
mod entities;
pub mod entity;
mod error;
pub mod fold;
mod fold_build;
mod fold_thread;
pub mod index;
pub mod labels;
mod loading;
mod merge_settings;
pub mod numbered;
mod pack;
pub mod persisted;
mod reads;
pub mod record;
mod recovery;
mod repack;
mod requests;
mod serials;
pub mod shard;
mod stats;
mod system;
pub mod webhooks;
mod write;

use parking_lot::{Condvar, Mutex, RwLock};
use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use gix::ObjectId;
use serde::{Deserialize, Serialize};

pub use comments::CommentPage;
use entity::{
    Acl, Change, ChangeState, Comment, Entity, Issue, IssueState, Member, SCHEMA_V, Settings,
    SiteSettings, ThreadKind, Token, User, Visibility,
};
pub use error::{AppendError, MetaError, Unavailable};
pub use fold::{FoldHook, FoldStage, MetaRepoError, PendingWrite};
use index::stored::Stored;
pub use index::{Filter, OpenCounts, Page, StateCounts};
pub use loading::LoadHook;
pub use record::MetaWrite;
pub use recovery::folded_users;
pub use requests::{
    AclPut, ChangePatch, CommentPatch, IssuePatch, NewChange, NewComment, NewIssue, SettingsPut,
};
pub use stats::MetaStats;
pub use system::TokenLimits;
use vole_git::Git;
use vole_git::repos::RepoName;
use vole_log::{EncodedTxn, Log, now_ns};
use vole_stdx::page::Pagination;

use fold_thread::{FoldWake, fold_loop};
use recovery::load_repo;
use repack::maybe_repack;
use write::{fold_body, now_text};

/// The store's key of the system repo, which holds the server's own
/// documents (users, tokens) outside `data/repos`: it is no repo name
/// (`@` is not allowed in one), so no route can name it.
pub const SYSTEM: &str = "@system";

/// How the store folds; the defaults are what `vole serve` runs with.
#[derive(Clone)]
pub struct StoreOptions {
    /// Shards per repo: 256 ([`shard::SHARDS`]); the `ref-cas` harness
    /// runs 1 to reproduce the unsharded baseline.
    pub shards: u16,
    /// Writes per fold commit; a shard with this many pending is folded
    /// at once.
    pub fold_batch: usize,
    /// A pending write waits at most this long before its shard is folded
    /// (reads see it at once; this is how soon clones do). 1 s by default:
    /// at 200 ms a busy repo moved every shard ref five times a second,
    /// five small commits of audit history each, and on a journal-less
    /// ext4 each ref move's lock file costs more the more files were
    /// deleted in the last ~30 s (the `ref-cas` README has the figures).
    pub fold_interval: Duration,
    /// More packs than this in a repo starts a geometric `git repack`.
    pub max_packs: usize,
    /// Defaults of a repo without stored settings.
    pub default_branch: String,
    pub protected_branches: Vec<String>,
    /// Bytes of documents one author may hold in one repo
    /// (`Index::over_authored_limit`); `None`: no limit.
    pub max_authored_bytes: Option<u64>,
    /// `Some(d)`: the open reads each repo's repo-level documents and
    /// leaves its issues, change requests and comments to a background
    /// reader (`loading.rs`), which it waits for at most `d` in all (a
    /// store read by then is whole when served), so a start does not grow
    /// with what is stored; `None`: the open reads everything (tools,
    /// tests).
    pub read_at_open: Option<Duration>,
    /// Test seam: called at each stage of a fold cycle.
    pub fold_hook: Option<FoldHook>,
    /// Test seam: called before each step of the background read.
    pub load_hook: Option<LoadHook>,
    /// Whether the open reads the shard trees the persisted index beside
    /// the meta log holds from it, and writes it ([`persisted`]); on by
    /// default.
    pub persist_index: bool,
}

impl Default for StoreOptions {
    fn default() -> Self {
        StoreOptions {
            shards: shard::SHARDS,
            fold_batch: 64,
            fold_interval: Duration::from_secs(1),
            max_packs: 32,
            default_branch: "main".into(),
            protected_branches: Vec::new(),
            max_authored_bytes: None,
            read_at_open: None,
            fold_hook: None,
            load_hook: None,
            persist_index: true,
        }
    }
}

impl std::fmt::Debug for StoreOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoreOptions")
            .field("shards", &self.shards)
            .field("fold_batch", &self.fold_batch)
            .field("fold_interval", &self.fold_interval)
            .field("max_packs", &self.max_packs)
            .finish_non_exhaustive()
    }
}

// ---- internals ------------------------------------------------------------

struct ShardQueue {
    writes: Vec<PendingWrite>,
    since: Instant,
}

struct RepoState {
    index: index::Index,
    /// Reads back the bodies the index leaves in git (shared with the
    /// reads that do it after the lock is let go).
    docs: Arc<bodies::DocReader>,
    /// The next write's place in the append order (see [`Appender`]).
    next_ticket: u64,
    pending: BTreeMap<u8, ShardQueue>,
}

struct RepoMeta {
    name: String,
    git_dir: PathBuf,
    /// The repo's incarnation as it was when its metadata was loaded
    /// (`None`: the system repo): its writes carry it, and only records
    /// that carry it are its.
    incarnation: Option<vole_git::repos::Incarnation>,
    state: Mutex<RepoState>,
    /// What the fold last saw each shard ref hold (the fold thread's).
    tips: Mutex<HashMap<u8, Option<ObjectId>>>,
    packs_since_check: AtomicUsize,
    repacking: Arc<AtomicBool>,
    appender: Appender,
    /// What of its documents is still to be read after the open.
    loading: loading::Loading,
    /// The reader of its bodies (the one its state holds), reached
    /// without the repo's lock by the upkeep that lets go of its handle.
    docs: Arc<bodies::DocReader>,
}

/// Appends writers' frames to the log in the order their tickets were
/// drawn. A writer deposits its encoded frame; a writer that finds no
/// append under way appends every deposited frame that is next in ticket
/// order, back to back, waits at the log's sync gate until they are
/// durable, and wakes exactly their writers with their results. (Waking
/// writers in turn, one append each, made every acknowledged write wait
/// behind a chain of thread hand-offs; waking them once when appended and
/// again when durable doubled the context switches.)
/// The decisions are [`append_order::AppendOrder`]'s; this is its lock.
#[derive(Default)]
struct Appender {
    state: Mutex<
        append_order::AppendOrder<Deposit, Result<Appended, AppendError>, std::thread::Thread>,
    >,
}

/// A writer's encoded frame (or why it could not be encoded) and where its
/// document goes.
struct Deposit {
    encoded: Result<(EncodedTxn<MetaWrite>, Vec<u8>), AppendError>,
    shard: u8,
    path: String,
}

/// A write in the log: its sequence, and whether its shard is now full.
type Appended = (u64, bool);

/// Log sequences appended but not yet folded. Appends happen with this
/// lock held, so every sequence at or below `max_seen` is either here or
/// folded: `applied()` never passes an unfolded write.
#[derive(Default)]
struct Unfolded {
    seqs: BTreeSet<u64>,
    max_seen: u64,
}

impl Unfolded {
    fn applied(&self) -> u64 {
        match self.seqs.first() {
            Some(first) => first - 1,
            None => self.max_seen,
        }
    }
}

#[derive(Default)]
struct Counters {
    fold_cycles: AtomicU64,
    fold_commits: AtomicU64,
    fold_objects: AtomicU64,
    folded_writes: AtomicU64,
    foreign_moves: AtomicU64,
    fold_errors: AtomicU64,
    repacks: AtomicU64,
    build_nanos: AtomicU64,
    pack_nanos: AtomicU64,
    refs_nanos: AtomicU64,
    sync_nanos: AtomicU64,
    /// Documents the reads of shard trees took from git, and from the
    /// persisted index.
    docs_from_git: AtomicU64,
    docs_from_file: AtomicU64,
    /// Writes folded per cycle, for the metrics.
    fold_batch: FoldBatch,
}

/// The histogram of writes per fold cycle.
#[derive(Debug, Clone)]
pub struct FoldBatch(pub prometheus_client::metrics::histogram::Histogram);

impl Default for FoldBatch {
    fn default() -> FoldBatch {
        FoldBatch(vole_stdx::metrics::size_histogram())
    }
}

struct Inner {
    log: Arc<Log<MetaWrite>>,
    repos_dir: PathBuf,
    git: Option<Git>,
    options: StoreOptions,
    repos: RwLock<HashMap<String, Arc<RepoMeta>>>,
    unfolded: Mutex<Unfolded>,
    pending_total: AtomicUsize,
    /// Wakes the fold thread (see [`FoldWake`]).
    wake: Mutex<FoldWake>,
    wake_cv: Condvar,
    flush_requested: AtomicBool,
    stop: AtomicBool,
    ids: Mutex<ulid::Generator>,
    failed: Mutex<Option<Unavailable>>,
    counters: Counters,
    /// How long the open took, its wait for the loader included (an
    /// `f64`'s bits: set once the wait is over).
    index_rebuild_ms: AtomicU64,
    /// Cores available to fold on (see `PARALLEL_FOLD_SHARDS`).
    cores: usize,
    /// Bumped after every settings or ACL write (once the index has it),
    /// so caches of what they decide can tell they are out of date.
    settings_generation: AtomicU64,
    /// Held by each repo's fold (from building its commits to marking them
    /// applied) and by a backup's cut, which so sees no shard ref move.
    fold_gate: Mutex<()>,
    /// Backups under way: while any is, nothing rewrites what they copy
    /// (no repack of shard packs, no log compaction).
    maintenance_holds: Arc<AtomicUsize>,
    /// Each kind's numeric ids in hand (`serials.rs`).
    serials: Mutex<HashMap<entity::SerialKind, serials::Held>>,
    /// Held while labels are made, renamed or deleted, so two writers
    /// cannot make two labels of one name.
    label_gate: Mutex<()>,
    /// The repos calls wait for, which the loader reads first.
    loads: loading::Loads,
    /// The bodies the indexes left in git, as last read back.
    bodies: bodies::BodyCache,
    /// The persisted index while the background read goes on (read from,
    /// and written as the shard trees are read), and when the open began.
    persisting: Mutex<Option<(persisted::Persisting, Instant)>>,
}

/// Holds off repacks and log compaction while it lives
/// ([`MetaStore::hold_maintenance`]).
#[derive(Debug)]
pub struct MaintenanceHold(Arc<AtomicUsize>);

impl Drop for MaintenanceHold {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The metadata store of every repo in a data dir.
pub struct MetaStore {
    inner: Arc<Inner>,
    folder: Mutex<Option<std::thread::JoinHandle<()>>>,
}

impl std::fmt::Debug for MetaStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MetaStore")
            .field("options", &self.inner.options)
            .finish_non_exhaustive()
    }
}

impl Drop for MetaStore {
    fn drop(&mut self) {
        self.inner.stop.store(true, Ordering::SeqCst);
        self.inner.wake(true);
        if let Some(folder) = self.folder.lock().take() {
            let _ = folder.join();
        }
    }
}

impl RepoState {
    /// The next issue or change request number. Derived, not stored: the
    /// write that takes it puts its document in the index under the same
    /// lock, so the index's highest number is always the last handed out.
    fn take_number(&self) -> u64 {
        self.index.max_number() + 1
    }

    /// Issue `number`, whole.
    fn issue(&self, number: u64) -> Result<Issue, MetaError> {
        self.docs.whole(self.stored_issue(number)?)
    }

    fn stored_issue(&self, number: u64) -> Result<&Stored<Issue>, MetaError> {
        self.index
            .issue(number)
            .ok_or_else(|| match self.index.kind_of_number(number) {
                Some(ThreadKind::Change) => {
                    MetaError::NotFound(format!("#{number} is a change request, not an issue"))
                }
                _ => MetaError::NotFound(format!("issue #{number} not found")),
            })
    }

    /// Change request `number`, whole.
    fn change(&self, number: u64) -> Result<Change, MetaError> {
        self.docs.whole(self.stored_change(number)?)
    }

    fn stored_change(&self, number: u64) -> Result<&Stored<Change>, MetaError> {
        self.index
            .change(number)
            .ok_or_else(|| match self.index.kind_of_number(number) {
                Some(ThreadKind::Issue) => {
                    MetaError::NotFound(format!("#{number} is an issue, not a change request"))
                }
                _ => MetaError::NotFound(format!("change request #{number} not found")),
            })
    }

    /// Comment `id` of thread `number`, whole (a deleted one is not
    /// found).
    fn comment(&self, kind: ThreadKind, number: u64, id: &str) -> Result<Comment, MetaError> {
        self.docs.whole(self.stored_comment(kind, number, id)?)
    }

    fn stored_comment(
        &self,
        kind: ThreadKind,
        number: u64,
        id: &str,
    ) -> Result<&Stored<Comment>, MetaError> {
        let thread = self.thread_id(kind, number)?;
        self.index
            .comment(&thread, id)
            .filter(|c| !c.fields().deleted)
            .ok_or_else(|| MetaError::NotFound(format!("comment {id} not found on #{number}")))
    }

    fn thread_id(&self, kind: ThreadKind, number: u64) -> Result<String, MetaError> {
        Ok(match kind {
            ThreadKind::Issue => self.stored_issue(number)?.fields().id.clone(),
            ThreadKind::Change => self.stored_change(number)?.fields().id.clone(),
        })
    }
}

#[cfg(test)]
mod tests;
