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
//! folded is never folded twice.
//!
//! What lives elsewhere: the document schemas and tree layout
//! ([`entity`]), the shard function ([`shard`]), the JSON API
//! (`crate::api::meta`). The on-disk format is in `docs/metadata-format.md`.

pub mod entity;
pub mod fold;
pub mod index;
pub mod record;
pub mod shard;

use parking_lot::{Condvar, Mutex, RwLock};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use gix::ObjectId;
use serde::{Deserialize, Serialize};

use crate::git::Git;
use crate::log::{EncodedTxn, Log, now_ns};
use crate::page::Pagination;
use crate::repos::RepoName;
use entity::{
    Acl, Change, ChangeState, Comment, Entity, Invalid, Issue, IssueState, Member, SCHEMA_V,
    Settings, SiteSettings, ThreadKind, Visibility,
};
pub use fold::{FoldHook, FoldStage, PendingWrite};
pub use index::{Filter, Page};
pub use record::MetaWrite;

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
    /// Test seam: called at each stage of a fold cycle.
    pub fold_hook: Option<FoldHook>,
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
            fold_hook: None,
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

/// Why a metadata call failed; each maps to one HTTP status.
#[derive(Debug, thiserror::Error)]
pub enum MetaError {
    #[error("repository {0} not found")]
    NoRepo(String),
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    Invalid(String),
    /// The edit replaces a version that is no longer current.
    #[error("{0}")]
    Stale(String),
    /// The log failed (a write or sync error); nothing more is accepted
    /// until the server restarts and replays it.
    #[error("metadata is unavailable: {0}")]
    Unavailable(String),
}

impl From<Invalid> for MetaError {
    fn from(e: Invalid) -> Self {
        MetaError::Invalid(e.0)
    }
}

// ---- requests -------------------------------------------------------------

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewIssue {
    pub title: String,
    #[serde(default)]
    pub body: String,
    #[serde(default)]
    pub labels: Vec<String>,
}

/// An edit: `version` is the version it replaces; absent fields keep
/// their value.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IssuePatch {
    pub version: u64,
    pub title: Option<String>,
    pub body: Option<String>,
    pub state: Option<IssueState>,
    pub labels: Option<Vec<String>>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewChange {
    pub title: String,
    #[serde(default)]
    pub body: String,
    pub source_branch: String,
    pub target_branch: String,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChangePatch {
    pub version: u64,
    pub title: Option<String>,
    pub body: Option<String>,
    pub state: Option<ChangeState>,
    pub target_branch: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewComment {
    pub body: String,
}

/// A whole new ACL; `version` is the one it replaces (0 when none is
/// stored yet).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AclPut {
    #[serde(default)]
    pub version: u64,
    pub visibility: Visibility,
    #[serde(default)]
    pub members: Vec<Member>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SettingsPut {
    #[serde(default)]
    pub version: u64,
    #[serde(default)]
    pub description: String,
    pub default_branch: String,
    #[serde(default)]
    pub protected_branches: Vec<String>,
    #[serde(default)]
    pub site: SiteSettings,
    #[serde(default)]
    pub site_domains: Vec<String>,
}

/// Run-time figures of the store.
#[derive(Debug, Clone, Default, Serialize)]
pub struct MetaStats {
    pub repos: usize,
    pub entities: usize,
    pub pending: usize,
    pub applied_seq: u64,
    pub fold_cycles: u64,
    pub fold_commits: u64,
    pub fold_objects: u64,
    pub folded_writes: u64,
    pub foreign_moves: u64,
    pub fold_errors: u64,
    pub repacks: u64,
    /// Time the fold cycles spent per stage (see [`fold::FoldReport`]).
    pub fold_build_ms: f64,
    pub fold_pack_ms: f64,
    pub fold_refs_ms: f64,
    pub fold_sync_ms: f64,
    pub index_rebuild_ms: f64,
}

// ---- internals ------------------------------------------------------------

struct ShardQueue {
    writes: Vec<PendingWrite>,
    since: Instant,
}

struct RepoState {
    index: index::Index,
    /// The next write's place in the append order (see [`Appender`]).
    next_ticket: u64,
    pending: BTreeMap<u8, ShardQueue>,
}

struct RepoMeta {
    name: String,
    git_dir: PathBuf,
    state: Mutex<RepoState>,
    /// What the fold last saw each shard ref hold (the fold thread's).
    tips: Mutex<HashMap<u8, Option<ObjectId>>>,
    packs_since_check: AtomicUsize,
    repacking: Arc<AtomicBool>,
    appender: Appender,
}

/// Appends writers' frames to the log in the order their tickets were
/// drawn. A writer deposits its encoded frame; a writer that finds no
/// append under way appends every deposited frame that is next in ticket
/// order, back to back, waits at the log's sync gate until they are
/// durable, and wakes exactly their writers with their results. (Waking
/// writers in turn, one append each, made every acknowledged write wait
/// behind a chain of thread hand-offs; waking them once when appended and
/// again when durable doubled the context switches.)
#[derive(Default)]
struct Appender {
    state: Mutex<AppenderState>,
}

#[derive(Default)]
struct AppenderState {
    /// The next ticket to append.
    turn: u64,
    appending: bool,
    deposited: HashMap<u64, Deposit>,
    results: HashMap<u64, Result<Appended, String>>,
    parked: HashMap<u64, std::thread::Thread>,
}

/// A writer's encoded frame (or why it could not be encoded) and where its
/// document goes.
struct Deposit {
    encoded: Result<(EncodedTxn<MetaWrite>, Vec<u8>), String>,
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
    failed: Mutex<Option<String>>,
    counters: Counters,
    index_rebuild_ms: f64,
    /// Cores available to fold on (see `PARALLEL_FOLD_SHARDS`).
    cores: usize,
    /// Bumped after every settings or ACL write (once the index has it),
    /// so caches of what they decide can tell they are out of date.
    settings_generation: AtomicU64,
}

fn now_text() -> String {
    crate::time::now_millis()
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

impl MetaStore {
    /// Opens the store: reads every repo's shard trees into its index,
    /// re-queues the log records not yet folded (`replayed`: the meta log's
    /// transactions, as replayed at open), and starts the fold thread.
    pub fn open(
        log: Arc<Log<MetaWrite>>,
        repos_dir: &Path,
        repos: &[(String, PathBuf)],
        replayed: Vec<(u64, MetaWrite)>,
        git: Option<Git>,
        options: StoreOptions,
    ) -> Result<MetaStore, MetaError> {
        let started = Instant::now();
        let mut loaded: HashMap<String, (RepoMeta, HashMap<u8, u64>)> = HashMap::new();
        for (name, git_dir) in repos {
            let (meta, folded) = load_repo(name, git_dir, options.shards).map_err(|e| {
                MetaError::Unavailable(format!("cannot read the metadata of {name}: {e}"))
            })?;
            loaded.insert(name.clone(), (meta, folded));
        }
        let mut unfolded = Unfolded {
            max_seen: log.watermarks().0,
            ..Unfolded::default()
        };
        let mut requeued = 0usize;
        let mut orphaned = 0usize;
        for (seq, row) in replayed {
            let Some((meta, folded)) = loaded.get_mut(&row.repo) else {
                orphaned += 1;
                continue;
            };
            if seq <= folded.get(&row.shard).copied().unwrap_or(0) {
                continue;
            }
            let entity: Entity = match serde_json::from_str(&row.body) {
                Ok(entity) => entity,
                Err(e) => {
                    tracing::error!(seq, repo = row.repo, error = %e, "meta log record does not parse; skipped");
                    continue;
                }
            };
            let state = meta.state.get_mut();
            let path = entity.tree_path();
            state.index.apply(entity);
            state
                .pending
                .entry(row.shard)
                .or_insert_with(|| ShardQueue {
                    writes: Vec::new(),
                    since: Instant::now(),
                })
                .writes
                .push(PendingWrite {
                    seq,
                    shard: row.shard,
                    path,
                    body: row.body.into_bytes(),
                });
            unfolded.seqs.insert(seq);
            requeued += 1;
        }
        let mut map = HashMap::new();
        let mut entities = 0;
        for (name, (mut meta, _)) in loaded {
            let state = meta.state.get_mut();
            entities += state.index.len();
            map.insert(name, Arc::new(meta));
        }
        log.mark_applied(unfolded.applied());
        let index_rebuild_ms = started.elapsed().as_secs_f64() * 1e3;
        tracing::info!(
            repos = map.len(),
            entities,
            requeued,
            orphaned,
            index_rebuild_ms,
            "metadata index rebuilt"
        );
        let inner = Arc::new(Inner {
            log,
            repos_dir: repos_dir.to_path_buf(),
            git,
            options,
            repos: RwLock::new(map),
            unfolded: Mutex::new(unfolded),
            pending_total: AtomicUsize::new(requeued),
            wake: Mutex::new(FoldWake {
                now: requeued > 0,
                idle: false,
            }),
            wake_cv: Condvar::new(),
            flush_requested: AtomicBool::new(false),
            stop: AtomicBool::new(false),
            ids: Mutex::new(ulid::Generator::new()),
            cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
            failed: Mutex::new(None),
            counters: Counters::default(),
            index_rebuild_ms,
            settings_generation: AtomicU64::new(0),
        });
        let folder_inner = inner.clone();
        let folder = std::thread::Builder::new()
            .name("vole-meta-fold".into())
            .spawn(move || fold_loop(folder_inner))
            .map_err(|e| MetaError::Unavailable(format!("cannot start the fold thread: {e}")))?;
        Ok(MetaStore {
            inner,
            folder: Mutex::new(Some(folder)),
        })
    }

    // ---- issues ----

    pub fn create_issue(
        &self,
        repo: &RepoName,
        new: NewIssue,
        author: &str,
    ) -> Result<Issue, MetaError> {
        entity::check_title(&new.title)?;
        entity::check_body(&new.body)?;
        entity::check_labels(&new.labels)?;
        let id = self.new_id();
        let entity = self.write(repo, |state| {
            let now = now_text();
            let number = state.take_number();
            Ok(Entity::Issue(Issue {
                v: SCHEMA_V,
                id,
                number,
                title: new.title,
                body: new.body,
                state: IssueState::Open,
                labels: dedup(new.labels),
                author: author.to_string(),
                created_at: now.clone(),
                updated_at: now,
                version: 1,
                replaces: None,
            }))
        })?;
        let Entity::Issue(issue) = entity else {
            unreachable!("built as an issue")
        };
        Ok(issue)
    }

    pub fn edit_issue(
        &self,
        repo: &RepoName,
        number: u64,
        patch: IssuePatch,
    ) -> Result<Issue, MetaError> {
        if let Some(title) = &patch.title {
            entity::check_title(title)?;
        }
        if let Some(body) = &patch.body {
            entity::check_body(body)?;
        }
        if let Some(labels) = &patch.labels {
            entity::check_labels(labels)?;
        }
        let entity = self.write(repo, |state| {
            let current = state.issue(number)?;
            check_version("issue", number, current.version, patch.version)?;
            let mut next = current.clone();
            next.title = patch.title.unwrap_or(next.title);
            next.body = patch.body.unwrap_or(next.body);
            next.state = patch.state.unwrap_or(next.state);
            next.labels = patch.labels.map(dedup).unwrap_or(next.labels);
            next.replaces = Some(current.version);
            next.version = current.version + 1;
            next.updated_at = now_text();
            Ok(Entity::Issue(next))
        })?;
        let Entity::Issue(issue) = entity else {
            unreachable!("built as an issue")
        };
        Ok(issue)
    }

    pub fn issue(&self, repo: &RepoName, number: u64) -> Result<Issue, MetaError> {
        self.read(repo, |state| state.issue(number).cloned())
    }

    pub fn list_issues(
        &self,
        repo: &RepoName,
        filter: &Filter<IssueState>,
        page: Pagination,
    ) -> Result<Page<Issue>, MetaError> {
        self.read(repo, |state| Ok(state.index.issues(filter, page)))
    }

    // ---- change requests ----

    pub fn create_change(
        &self,
        repo: &RepoName,
        new: NewChange,
        author: &str,
    ) -> Result<Change, MetaError> {
        entity::check_title(&new.title)?;
        entity::check_body(&new.body)?;
        entity::check_branch("source branch", &new.source_branch)?;
        entity::check_branch("target branch", &new.target_branch)?;
        if new.source_branch == new.target_branch {
            return Err(MetaError::Invalid(
                "source and target branch are the same branch".into(),
            ));
        }
        let id = self.new_id();
        let entity = self.write(repo, |state| {
            let now = now_text();
            let number = state.take_number();
            Ok(Entity::Change(Change {
                v: SCHEMA_V,
                id,
                number,
                title: new.title,
                body: new.body,
                source_branch: new.source_branch,
                target_branch: new.target_branch,
                state: ChangeState::Open,
                author: author.to_string(),
                created_at: now.clone(),
                updated_at: now,
                version: 1,
                replaces: None,
            }))
        })?;
        let Entity::Change(change) = entity else {
            unreachable!("built as a change")
        };
        Ok(change)
    }

    pub fn edit_change(
        &self,
        repo: &RepoName,
        number: u64,
        patch: ChangePatch,
    ) -> Result<Change, MetaError> {
        if let Some(title) = &patch.title {
            entity::check_title(title)?;
        }
        if let Some(body) = &patch.body {
            entity::check_body(body)?;
        }
        if let Some(target) = &patch.target_branch {
            entity::check_branch("target branch", target)?;
        }
        let entity = self.write(repo, |state| {
            let current = state.change(number)?;
            check_version("change request", number, current.version, patch.version)?;
            let mut next = current.clone();
            next.title = patch.title.unwrap_or(next.title);
            next.body = patch.body.unwrap_or(next.body);
            next.state = patch.state.unwrap_or(next.state);
            next.target_branch = patch.target_branch.unwrap_or(next.target_branch);
            if next.target_branch == next.source_branch {
                return Err(MetaError::Invalid(
                    "source and target branch are the same branch".into(),
                ));
            }
            next.replaces = Some(current.version);
            next.version = current.version + 1;
            next.updated_at = now_text();
            Ok(Entity::Change(next))
        })?;
        let Entity::Change(change) = entity else {
            unreachable!("built as a change")
        };
        Ok(change)
    }

    pub fn change(&self, repo: &RepoName, number: u64) -> Result<Change, MetaError> {
        self.read(repo, |state| state.change(number).cloned())
    }

    pub fn list_changes(
        &self,
        repo: &RepoName,
        filter: &Filter<ChangeState>,
        page: Pagination,
    ) -> Result<Page<Change>, MetaError> {
        self.read(repo, |state| Ok(state.index.changes(filter, page)))
    }

    // ---- comments ----

    /// Comments on the issue or change request `number` (`kind` says
    /// which the caller addressed).
    pub fn comment(
        &self,
        repo: &RepoName,
        kind: ThreadKind,
        number: u64,
        new: NewComment,
        author: &str,
    ) -> Result<Comment, MetaError> {
        if new.body.trim().is_empty() {
            return Err(MetaError::Invalid("comment body must not be empty".into()));
        }
        entity::check_body(&new.body)?;
        let id = self.new_id();
        let entity = self.write(repo, |state| {
            let thread = state.thread_id(kind, number)?;
            let now = now_text();
            Ok(Entity::Comment(Comment {
                v: SCHEMA_V,
                id,
                thread,
                thread_kind: kind,
                body: new.body,
                author: author.to_string(),
                created_at: now.clone(),
                updated_at: now,
                version: 1,
                replaces: None,
            }))
        })?;
        let Entity::Comment(comment) = entity else {
            unreachable!("built as a comment")
        };
        Ok(comment)
    }

    pub fn comments(
        &self,
        repo: &RepoName,
        kind: ThreadKind,
        number: u64,
        page: Pagination,
    ) -> Result<Page<Comment>, MetaError> {
        self.read(repo, |state| {
            let thread = state.thread_id(kind, number)?;
            Ok(state.index.comments(&thread, page))
        })
    }

    // ---- ACL and settings ----

    /// The repo's ACL (the default, public with no members, at version 0
    /// when none is stored).
    pub fn acl(&self, repo: &RepoName) -> Result<Acl, MetaError> {
        self.read(repo, |state| {
            Ok(state
                .index
                .acl()
                .cloned()
                .unwrap_or_else(Acl::default_for_repo))
        })
    }

    pub fn put_acl(&self, repo: &RepoName, put: AclPut) -> Result<Acl, MetaError> {
        entity::check_members(&put.members)?;
        let written = self.write(repo, |state| {
            let current = state.index.acl().map_or(0, |a| a.version);
            check_version("ACL", 0, current, put.version)?;
            Ok(Entity::Acl(Acl {
                v: SCHEMA_V,
                visibility: put.visibility,
                members: put.members,
                updated_at: now_text(),
                version: current + 1,
                replaces: (current > 0).then_some(current),
            }))
        });
        // Even a failed write may have reached the index.
        self.inner
            .settings_generation
            .fetch_add(1, Ordering::AcqRel);
        let Entity::Acl(acl) = written? else {
            unreachable!("built as an ACL")
        };
        Ok(acl)
    }

    /// Whether a request without credentials may read the repo: its ACL
    /// says public (the default when none is stored, or when the store has
    /// no entry for the repo). No request carries credentials until
    /// accounts exist, so a private repo is readable by no one; a store
    /// that cannot answer (its log failed) answers no.
    pub fn readable_anonymously(&self, repo: &RepoName) -> bool {
        match self.acl(repo) {
            Ok(acl) => acl.visibility == entity::Visibility::Public,
            Err(MetaError::NoRepo(_)) => true,
            Err(_) => false,
        }
    }

    /// The repo's settings (defaults from the server's config, at version
    /// 0, when none are stored).
    pub fn settings(&self, repo: &RepoName) -> Result<Settings, MetaError> {
        self.read(repo, |state| {
            Ok(state
                .index
                .settings()
                .cloned()
                .unwrap_or_else(|| self.default_settings()))
        })
    }

    pub fn put_settings(&self, repo: &RepoName, put: SettingsPut) -> Result<Settings, MetaError> {
        entity::check_branch("default branch", &put.default_branch)?;
        for branch in &put.protected_branches {
            entity::check_branch("protected branch", branch)?;
        }
        entity::check_site(&put.site, &put.site_domains)?;
        if put.description.len() > 1024 || put.description.chars().any(char::is_control) {
            return Err(MetaError::Invalid(
                "description must be one line of at most 1024 bytes".into(),
            ));
        }
        let written = self.write(repo, |state| {
            let current = state.index.settings().map_or(0, |s| s.version);
            check_version("settings", 0, current, put.version)?;
            Ok(Entity::Settings(Settings {
                v: SCHEMA_V,
                description: put.description,
                default_branch: put.default_branch,
                protected_branches: put.protected_branches,
                site: put.site,
                site_domains: put.site_domains,
                updated_at: now_text(),
                version: current + 1,
                replaces: (current > 0).then_some(current),
            }))
        });
        // Even a failed write may have reached the index.
        self.inner
            .settings_generation
            .fetch_add(1, Ordering::AcqRel);
        let Entity::Settings(settings) = written? else {
            unreachable!("built as settings")
        };
        Ok(settings)
    }

    /// Deposits a writer's frame and returns once it is in the log and
    /// durable. A writer that finds no append under way and the next ticket
    /// deposited appends every deposit that is next in ticket order (its
    /// own among them, or not yet), waits until they are durable, and only
    /// then hands each writer its result: a writer that parks is woken once,
    /// with its write acknowledged, instead of once to hear its frame was
    /// written and again at the sync gate.
    fn append_durably(
        &self,
        meta: &RepoMeta,
        ticket: u64,
        deposit: Deposit,
    ) -> Result<Appended, String> {
        let mut state = meta.appender.state.lock();
        state.deposited.insert(ticket, deposit);
        loop {
            if let Some(result) = state.results.remove(&ticket) {
                return result;
            }
            if !state.appending && state.deposited.contains_key(&state.turn) {
                // Append while deposits are ready: a deposit that arrives
                // during an append sees one under way and parks, so it is
                // taken by the next round of this loop.
                let mut appended = Vec::new();
                while !state.appending && state.deposited.contains_key(&state.turn) {
                    let mut batch = Vec::new();
                    loop {
                        let turn = state.turn;
                        let Some(deposit) = state.deposited.remove(&turn) else {
                            break;
                        };
                        batch.push((turn, deposit));
                        state.turn += 1;
                    }
                    state.appending = true;
                    drop(state);
                    appended.extend(self.append_batch(meta, batch));
                    state = meta.appender.state.lock();
                    state.appending = false;
                }
                // Later deposits find no append under way and append
                // themselves while these wait for the sync gate.
                drop(state);
                let last = appended
                    .iter()
                    .filter_map(|(_, result)| result.as_ref().ok().map(|(seq, _)| *seq))
                    .max();
                let durable = match last {
                    Some(seq) => self.inner.log.wait_durable(seq).map_err(|e| e.to_string()),
                    None => Ok(()),
                };
                state = meta.appender.state.lock();
                for (done, result) in appended {
                    let result = match (&durable, result) {
                        (Err(why), Ok(_)) => Err(why.clone()),
                        (_, result) => result,
                    };
                    if let Some(writer) = state.parked.remove(&done) {
                        writer.unpark();
                    }
                    state.results.insert(done, result);
                }
                continue;
            }
            state.parked.insert(ticket, std::thread::current());
            drop(state);
            // A wake-up for nothing, or a spurious one, loops to the checks.
            std::thread::park();
            state = meta.appender.state.lock();
        }
    }

    /// Appends deposits (consecutive tickets) in order and queues each
    /// appended write for its shard's fold.
    fn append_batch(
        &self,
        meta: &RepoMeta,
        batch: Vec<(u64, Deposit)>,
    ) -> Vec<(u64, Result<Appended, String>)> {
        let inner = &self.inner;
        let mut frames = Vec::with_capacity(batch.len());
        let mut writes = Vec::with_capacity(batch.len());
        let mut results = Vec::with_capacity(batch.len());
        for (ticket, deposit) in batch {
            match deposit.encoded {
                Ok((frame, body)) => {
                    frames.push(frame);
                    writes.push((ticket, deposit.shard, deposit.path, body));
                }
                Err(why) => results.push((ticket, Err(why))),
            }
        }
        if frames.is_empty() {
            return results;
        }
        // The log write holds `unfolded` (so `applied()` never passes a
        // sequence being written) but not the repo's state, which writers
        // deciding their next version wait on; appends are serial (one
        // append under way at a time), so each shard's queue still grows
        // in log order.
        let first = {
            let mut unfolded = inner.unfolded.lock();
            // One write for the whole batch; each frame is its own
            // transaction.
            match inner.log.append_encoded_all(frames) {
                Ok(first) => {
                    let last = first + writes.len() as u64 - 1;
                    unfolded.seqs.extend(first..=last);
                    unfolded.max_seen = unfolded.max_seen.max(last);
                    first
                }
                Err(e) => {
                    let why = e.to_string();
                    results.extend(writes.into_iter().map(|(t, ..)| (t, Err(why.clone()))));
                    return results;
                }
            }
        };
        let mut state = meta.state.lock();
        for (seq, (ticket, shard, path, body)) in (first..).zip(writes) {
            let queue = state.pending.entry(shard).or_insert_with(|| ShardQueue {
                writes: Vec::new(),
                since: Instant::now(),
            });
            queue.writes.push(PendingWrite {
                seq,
                shard,
                path,
                body,
            });
            inner.pending_total.fetch_add(1, Ordering::SeqCst);
            results.push((
                ticket,
                Ok((seq, queue.writes.len() >= inner.options.fold_batch)),
            ));
        }
        results
    }

    /// Changes whenever any repo's settings or ACL change.
    pub fn settings_generation(&self) -> u64 {
        self.inner.settings_generation.load(Ordering::Acquire)
    }

    /// Where the repo's site is served from (the default, `refs/heads/pages`
    /// at its root, for a repo without settings or without a store entry).
    pub fn site(&self, repo: &RepoName) -> SiteSettings {
        self.read(repo, |state| {
            Ok(state
                .index
                .settings()
                .map(|s| s.site.clone())
                .unwrap_or_default())
        })
        .unwrap_or_default()
    }

    fn default_settings(&self) -> Settings {
        let options = &self.inner.options;
        Settings {
            v: SCHEMA_V,
            description: String::new(),
            default_branch: options.default_branch.clone(),
            protected_branches: options.protected_branches.clone(),
            site: SiteSettings::default(),
            site_domains: Vec::new(),
            updated_at: String::new(),
            version: 0,
            replaces: None,
        }
    }

    // ---- maintenance ----

    /// Folds everything pending now and waits (at most `bound`) until it
    /// is folded and synced; returns whether it was.
    pub fn flush(&self, bound: Duration) -> bool {
        let deadline = Instant::now() + bound;
        loop {
            if self.inner.pending_total.load(Ordering::SeqCst) == 0 {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            self.inner.flush_requested.store(true, Ordering::SeqCst);
            self.inner.wake(true);
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// Folds what is pending (waiting at most `bound`) and stops the fold
    /// thread. Whatever is left is folded again at the next open.
    pub fn close(&self, bound: Duration) {
        let flushed = self.flush(bound);
        self.inner.stop.store(true, Ordering::SeqCst);
        self.inner.wake(true);
        if let Some(folder) = self.folder.lock().take() {
            let _ = folder.join();
        }
        if !flushed {
            tracing::warn!(
                pending = self.inner.pending_total.load(Ordering::SeqCst),
                "metadata writes left unfolded at stop; they are folded at the next start"
            );
        }
    }

    /// Compacts the meta log: drops the records already folded and synced
    /// (applied), except the last `keep` transactions.
    pub fn compact_log(
        &self,
        keep: u64,
    ) -> Result<crate::log::CompactReport, crate::log::LogError> {
        let (written, _) = self.inner.log.watermarks();
        let drop_through = self.inner.log.applied().min(written.saturating_sub(keep));
        self.inner.log.compact(drop_through, &[])
    }

    pub fn stats(&self) -> MetaStats {
        let repos = self.inner.repos.read();
        let entities = repos.values().map(|r| r.state.lock().index.len()).sum();
        let c = &self.inner.counters;
        MetaStats {
            repos: repos.len(),
            entities,
            pending: self.inner.pending_total.load(Ordering::SeqCst),
            applied_seq: self.inner.log.applied(),
            fold_cycles: c.fold_cycles.load(Ordering::Relaxed),
            fold_commits: c.fold_commits.load(Ordering::Relaxed),
            fold_objects: c.fold_objects.load(Ordering::Relaxed),
            folded_writes: c.folded_writes.load(Ordering::Relaxed),
            foreign_moves: c.foreign_moves.load(Ordering::Relaxed),
            fold_errors: c.fold_errors.load(Ordering::Relaxed),
            repacks: c.repacks.load(Ordering::Relaxed),
            fold_build_ms: c.build_nanos.load(Ordering::Relaxed) as f64 / 1e6,
            fold_pack_ms: c.pack_nanos.load(Ordering::Relaxed) as f64 / 1e6,
            fold_refs_ms: c.refs_nanos.load(Ordering::Relaxed) as f64 / 1e6,
            fold_sync_ms: c.sync_nanos.load(Ordering::Relaxed) as f64 / 1e6,
            index_rebuild_ms: self.inner.index_rebuild_ms,
        }
    }

    // ---- the write path ----

    fn new_id(&self) -> String {
        let mut ids = self.inner.ids.lock();
        // The monotonic generator fails only when 2^80 ids were made in
        // one millisecond; a fresh random one is still unique.
        ids.generate()
            .unwrap_or_else(|_| ulid::Ulid::new())
            .to_string()
    }

    fn check_failed(&self) -> Result<(), MetaError> {
        match &*self.inner.failed.lock() {
            Some(why) => Err(MetaError::Unavailable(why.clone())),
            None => Ok(()),
        }
    }

    fn read<T>(
        &self,
        repo: &RepoName,
        f: impl FnOnce(&RepoState) -> Result<T, MetaError>,
    ) -> Result<T, MetaError> {
        self.check_failed()?;
        let meta = self.repo(repo)?;
        let state = meta.state.lock();
        f(&state)
    }

    /// Builds the new document under the repo's lock (so versions and
    /// numbers are decided in one order), encodes its log frame outside
    /// every lock, appends it in the order decided, and returns once the
    /// log has it durably.
    fn write(
        &self,
        repo: &RepoName,
        build: impl FnOnce(&mut RepoState) -> Result<Entity, MetaError>,
    ) -> Result<Entity, MetaError> {
        self.check_failed()?;
        let meta = self.repo(repo)?;
        let inner = &self.inner;
        // 1. Decide: the new version, its number, its place in the order.
        // Readers see it from here on (their own writes included).
        let (ticket, entity) = {
            let mut state = meta.state.lock();
            let entity = build(&mut state)?;
            state.index.apply(entity.clone());
            let ticket = state.next_ticket;
            state.next_ticket += 1;
            (ticket, entity)
        };
        // 2. Encode in parallel with other writers.
        let shard = shard::shard_of(entity.root_id(), inner.options.shards);
        let path = entity.tree_path();
        let encoded = serde_json::to_string(&entity)
            .map_err(|e| format!("cannot encode the document: {e}"))
            .and_then(|body| {
                let row = MetaWrite {
                    time_ns: now_ns(),
                    repo: meta.name.clone(),
                    entity_id: entity.id().to_string(),
                    shard,
                    kind: entity.kind().to_string(),
                    body,
                };
                let frame = inner
                    .log
                    .encode(std::slice::from_ref(&row))
                    .map_err(|e| e.to_string())?;
                Ok((frame, row.body.into_bytes()))
            });
        // 3. Append in decision order: per shard (and per entity) the log
        // order is the order versions were decided in, which the folds and
        // recovery rely on.
        let deposit = Deposit {
            encoded,
            shard,
            path,
        };
        match self.append_durably(&meta, ticket, deposit) {
            Ok((_, full)) => {
                inner.wake(full);
                Ok(entity)
            }
            Err(e) => {
                // The index already shows a document the log may not hold:
                // stop serving until a restart rebuilds both from disk.
                let why = format!("the metadata log failed ({e}); restart the server to replay it");
                tracing::error!("{why}");
                *inner.failed.lock() = Some(why.clone());
                Err(MetaError::Unavailable(why))
            }
        }
    }

    fn repo(&self, name: &RepoName) -> Result<Arc<RepoMeta>, MetaError> {
        let key = name.to_string();
        if let Some(meta) = self.inner.repos.read().get(&key) {
            return Ok(meta.clone());
        }
        let git_dir = self.inner.repos_dir.join(name.relative_path());
        if !git_dir.is_dir() {
            return Err(MetaError::NoRepo(key));
        }
        let mut repos = self.inner.repos.write();
        if let Some(meta) = repos.get(&key) {
            return Ok(meta.clone());
        }
        // A repo created after open: its shard refs are read once here.
        let (meta, _) = load_repo(&key, &git_dir, self.inner.options.shards).map_err(|e| {
            MetaError::Unavailable(format!("cannot read the metadata of {key}: {e}"))
        })?;
        let meta = Arc::new(meta);
        repos.insert(key, meta.clone());
        Ok(meta)
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

    fn issue(&self, number: u64) -> Result<&Issue, MetaError> {
        self.index
            .issue(number)
            .ok_or_else(|| match self.index.kind_of_number(number) {
                Some(ThreadKind::Change) => {
                    MetaError::NotFound(format!("#{number} is a change request, not an issue"))
                }
                _ => MetaError::NotFound(format!("issue #{number} not found")),
            })
    }

    fn change(&self, number: u64) -> Result<&Change, MetaError> {
        self.index
            .change(number)
            .ok_or_else(|| match self.index.kind_of_number(number) {
                Some(ThreadKind::Issue) => {
                    MetaError::NotFound(format!("#{number} is an issue, not a change request"))
                }
                _ => MetaError::NotFound(format!("change request #{number} not found")),
            })
    }

    fn thread_id(&self, kind: ThreadKind, number: u64) -> Result<String, MetaError> {
        Ok(match kind {
            ThreadKind::Issue => self.issue(number)?.id.clone(),
            ThreadKind::Change => self.change(number)?.id.clone(),
        })
    }
}

fn check_version(what: &str, number: u64, current: u64, replaces: u64) -> Result<(), MetaError> {
    if current == replaces {
        return Ok(());
    }
    let name = if number > 0 {
        format!("{what} #{number}")
    } else {
        what.to_string()
    };
    Err(MetaError::Stale(format!(
        "{name} is at version {current} but this edit replaces version {replaces}; \
         read it again and reapply the change"
    )))
}

fn dedup(labels: Vec<String>) -> Vec<String> {
    let mut seen = BTreeSet::new();
    labels
        .into_iter()
        .map(|l| l.trim().to_string())
        .filter(|l| seen.insert(l.clone()))
        .collect()
}

/// Reads a repo's shard trees into a fresh index; returns each shard's
/// folded sequence too.
fn load_repo(
    name: &str,
    git_dir: &Path,
    shards: u16,
) -> Result<(RepoMeta, HashMap<u8, u64>), String> {
    let repo = crate::git::open_gix(git_dir).map_err(|e| e.to_string())?;
    let mut index = index::Index::default();
    let mut folded = HashMap::new();
    let mut tips = HashMap::new();
    for shard in 0..shards {
        let shard = shard as u8;
        let tip = fold::read_shard(&repo, shard)?;
        tips.insert(shard, tip);
        let Some(tip) = tip else { continue };
        folded.insert(shard, fold::folded_seq(&repo, tip)?);
        let tree = repo
            .find_commit(tip)
            .map_err(|e| e.to_string())?
            .tree_id()
            .map_err(|e| e.to_string())?
            .detach();
        read_tree(&repo, tree, &mut index)?;
    }
    Ok((
        RepoMeta {
            name: name.to_string(),
            git_dir: git_dir.to_path_buf(),
            state: Mutex::new(RepoState {
                index,
                next_ticket: 0,
                pending: BTreeMap::new(),
            }),
            tips: Mutex::new(tips),
            packs_since_check: AtomicUsize::new(0),
            repacking: Arc::new(AtomicBool::new(false)),
            appender: Appender::default(),
        },
        folded,
    ))
}

fn read_tree(
    repo: &gix::Repository,
    tree: ObjectId,
    index: &mut index::Index,
) -> Result<(), String> {
    let tree = repo.find_tree(tree).map_err(|e| e.to_string())?;
    let entries: Vec<(bool, bool, Vec<u8>, ObjectId)> = tree
        .decode()
        .map_err(|e| e.to_string())?
        .entries
        .iter()
        .map(|e| {
            (
                e.mode.is_tree(),
                e.mode.is_blob(),
                e.filename.to_vec(),
                e.oid.to_owned(),
            )
        })
        .collect();
    for (is_tree, is_blob, filename, id) in entries {
        if is_tree {
            read_tree(repo, id, index)?;
        } else if is_blob && filename.ends_with(b".json") {
            let blob = repo.find_blob(id).map_err(|e| e.to_string())?;
            match serde_json::from_slice::<Entity>(&blob.data) {
                Ok(entity) => {
                    index.apply(entity);
                }
                Err(e) => {
                    tracing::warn!(blob = %id, error = %e, "metadata document does not parse; skipped")
                }
            }
        }
    }
    Ok(())
}

// ---- the fold thread --------------------------------------------------------

/// What the fold thread is woken for. Writers signal it only when it has
/// something to act on: a full shard or a flush (`now`), or a first pending
/// write while it sleeps without a timer (`idle`). Signalling on every
/// write cost every write a futex call and, while a cycle waited out its
/// minimum gap, a context switch of the fold thread.
struct FoldWake {
    /// A shard filled, a flush was asked or the store stops.
    now: bool,
    /// The fold thread sleeps with nothing pending (no timer running).
    idle: bool,
}

impl Inner {
    /// Called after a write is queued (`pending_total` already counts it)
    /// or when a fold is wanted at once (`now`).
    fn wake(&self, now: bool) {
        let mut wake = self.wake.lock();
        if now {
            wake.now = true;
            self.wake_cv.notify_one();
        } else if wake.idle {
            self.wake_cv.notify_one();
        }
    }
}

/// One thread folds every repo: the gix handles it keeps are not `Sync`,
/// and folding is I/O-bound on fsync, which one thread per data dir
/// already batches (a cycle takes everything that queued during the last).
fn fold_loop(inner: Arc<Inner>) {
    let mut handles: HashMap<String, gix::Repository> = HashMap::new();
    let interval = inner.options.fold_interval;
    let min_gap = (interval / 10).min(Duration::from_millis(100));
    let mut last_cycle = Instant::now();
    loop {
        {
            let mut wake = inner.wake.lock();
            if !wake.now && !inner.stop.load(Ordering::SeqCst) {
                // Checked under the wake lock: a writer counts its write
                // before it takes this lock, so it either is seen here or
                // finds `idle` set and signals.
                if inner.pending_total.load(Ordering::SeqCst) == 0 {
                    wake.idle = true;
                    inner.wake_cv.wait(&mut wake);
                    wake.idle = false;
                } else {
                    inner.wake_cv.wait_for(&mut wake, interval / 2);
                }
            }
            wake.now = false;
        }
        // Stopping folds nothing more: `close` flushes first; a plain drop
        // leaves the queue to the log, as a crash would.
        if inner.stop.load(Ordering::SeqCst) {
            return;
        }
        let mut force = inner.flush_requested.swap(false, Ordering::SeqCst);
        // Cycles start at most every `interval / 10` (at most 100 ms apart;
        // a flush or a stop cuts the wait short): a shard that fills
        // right after a cycle waits for its neighbours, so one cycle (one
        // pack, one ref transaction) carries several full shards instead
        // of one each.
        let since_last = last_cycle.elapsed();
        if !force && since_last < min_gap {
            let mut wake = inner.wake.lock();
            let _ = inner.wake_cv.wait_while_for(
                &mut wake,
                |_| {
                    !inner.flush_requested.load(Ordering::SeqCst)
                        && !inner.stop.load(Ordering::SeqCst)
                },
                min_gap - since_last,
            );
            if inner.stop.load(Ordering::SeqCst) {
                return;
            }
            force = inner.flush_requested.swap(false, Ordering::SeqCst);
        }
        last_cycle = Instant::now();
        let repos: Vec<Arc<RepoMeta>> = inner.repos.read().values().cloned().collect();
        for repo in repos {
            fold_repo(&inner, &repo, &mut handles, force);
        }
    }
}

fn fold_repo(
    inner: &Inner,
    meta: &RepoMeta,
    handles: &mut HashMap<String, gix::Repository>,
    force: bool,
) {
    let options = &inner.options;
    let durable = inner.log.watermarks().1;
    let now = Instant::now();
    let batch: Vec<(u8, Vec<PendingWrite>)> = {
        let state = meta.state.lock();
        state
            .pending
            .iter()
            .filter(|(_, q)| {
                force
                    || q.writes.len() >= options.fold_batch
                    || now.duration_since(q.since) >= options.fold_interval
            })
            .map(|(shard, q)| {
                (
                    *shard,
                    q.writes
                        .iter()
                        .take_while(|w| w.seq <= durable)
                        .cloned()
                        .collect::<Vec<_>>(),
                )
            })
            .filter(|(_, writes)| !writes.is_empty())
            .collect()
    };
    if batch.is_empty() {
        return;
    }
    let repo = match handles.entry(meta.name.clone()) {
        std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
        std::collections::hash_map::Entry::Vacant(e) => match fold::open_repo(&meta.git_dir) {
            Ok(repo) => e.insert(repo),
            Err(why) => {
                tracing::error!(
                    repo = meta.name,
                    error = why,
                    "cannot open the repo to fold"
                );
                inner.counters.fold_errors.fetch_add(1, Ordering::Relaxed);
                return;
            }
        },
    };
    // A cycle that moves many shards is built on two threads, each with its
    // own repo handle and pack: the shards are independent, and most of
    // such a cycle is per-shard work (tree edits, hashing, packing) that
    // one thread does while the other core waits, as at a flush after a
    // burst. Its refs still move in one transaction.
    let lanes = if batch.len() >= PARALLEL_FOLD_SHARDS && inner.cores > 1 {
        2
    } else {
        1
    };
    let tips: HashMap<u8, Option<ObjectId>> = meta.tips.lock().clone();
    let mut expected = |shard: u8| tips.get(&shard).copied();
    let result = fold::commit_shards(
        repo,
        &meta.name,
        &batch,
        options.fold_batch,
        lanes,
        &mut expected,
        options.fold_hook.as_ref(),
    );
    if settle_fold(inner, meta, &batch, result, now) {
        inner.counters.fold_cycles.fetch_add(1, Ordering::Relaxed);
    } else {
        // Reopen next time.
        handles.remove(&meta.name);
    }
}

/// Cycles moving at least this many shards are built on two threads.
const PARALLEL_FOLD_SHARDS: usize = 128;

/// Records what a fold of `batch` did: on success the new tips, the
/// counters and the writes marked applied; on failure the writes stay
/// queued and wait an interval. Returns whether it succeeded.
fn settle_fold(
    inner: &Inner,
    meta: &RepoMeta,
    batch: &[(u8, Vec<PendingWrite>)],
    result: Result<(fold::FoldReport, Vec<(u8, ObjectId)>), fold::FoldError>,
    now: Instant,
) -> bool {
    match result {
        Ok((report, new_tips)) => {
            {
                let mut tips = meta.tips.lock();
                for (shard, tip) in new_tips {
                    tips.insert(shard, Some(tip));
                }
            }
            let c = &inner.counters;
            c.fold_commits
                .fetch_add(report.commits as u64, Ordering::Relaxed);
            c.fold_objects
                .fetch_add(report.objects as u64, Ordering::Relaxed);
            c.folded_writes
                .fetch_add(report.writes as u64, Ordering::Relaxed);
            c.foreign_moves
                .fetch_add(report.foreign_moves as u64, Ordering::Relaxed);
            for (counter, took) in [
                (&c.build_nanos, report.build),
                (&c.pack_nanos, report.pack),
                (&c.refs_nanos, report.refs),
                (&c.sync_nanos, report.sync),
            ] {
                counter.fetch_add(took.as_nanos() as u64, Ordering::Relaxed);
            }
            // Synced: now, and only now, the writes count as applied.
            // The two locks are taken one after the other, never nested
            // (appends take `unfolded` alone around the log write): a
            // write leaves `pending` first and `unfolded` after, so
            // `applied()` never passes it early.
            {
                let mut state = meta.state.lock();
                for (shard, writes) in batch {
                    if let Some(queue) = state.pending.get_mut(shard) {
                        queue.writes.drain(..writes.len());
                        if queue.writes.is_empty() {
                            state.pending.remove(shard);
                        } else {
                            queue.since = now;
                        }
                    }
                }
            }
            let applied = {
                let mut unfolded = inner.unfolded.lock();
                for write in batch.iter().flat_map(|(_, writes)| writes) {
                    unfolded.seqs.remove(&write.seq);
                }
                unfolded.applied()
            };
            inner
                .pending_total
                .fetch_sub(report.writes, Ordering::SeqCst);
            inner.log.mark_applied(applied);
            if meta
                .packs_since_check
                .fetch_add(report.packs, Ordering::Relaxed)
                + report.packs
                >= inner.options.max_packs / 2
            {
                meta.packs_since_check.store(0, Ordering::Relaxed);
                maybe_repack(inner, meta);
            }
            true
        }
        Err(e) => {
            inner.counters.fold_errors.fetch_add(1, Ordering::Relaxed);
            tracing::error!(error = %e, "fold failed; the writes stay queued and are tried again");
            // Wait an interval before retrying (the caller reopens).
            let mut state = meta.state.lock();
            for (shard, _) in batch {
                if let Some(queue) = state.pending.get_mut(shard) {
                    queue.since = now;
                }
            }
            false
        }
    }
}

/// Keeps the number of packs bounded: each fold cycle writes one, so once
/// a repo holds more than `max_packs`, a geometric repack
/// (`git repack --geometric=2 -d`) merges the small ones, leaving a number
/// of packs logarithmic in the object count. It runs on its own thread
/// (git's repack is safe beside readers and writers).
fn maybe_repack(inner: &Inner, meta: &RepoMeta) {
    let Some(git) = inner.git.clone() else {
        return;
    };
    let pack_dir = meta.git_dir.join("objects").join("pack");
    let max_packs = inner.options.max_packs;
    let packs = count_packs(&pack_dir);
    if packs <= max_packs || meta.repacking.swap(true, Ordering::SeqCst) {
        return;
    }
    let repacking = meta.repacking.clone();
    let git_dir = meta.git_dir.clone();
    let name = meta.name.clone();
    inner.counters.repacks.fetch_add(1, Ordering::Relaxed);
    let _ = std::thread::Builder::new()
        .name("vole-repack".into())
        .spawn(move || {
            // Folds that ran during a repack found it running and left
            // their packs to it: look again once it is done (bounded), or
            // the count could stay above the bound until the next fold.
            let mut packs_before = packs;
            for _round in 0..4 {
                let output = git
                    .command()
                    .arg("--git-dir")
                    .arg(&git_dir)
                    .args(["repack", "-d", "-q", "--geometric=2"])
                    .output();
                match output {
                    Ok(out) if out.status.success() => {
                        tracing::info!(repo = name, packs_before, "metadata packs repacked")
                    }
                    Ok(out) => {
                        tracing::warn!(
                            repo = name,
                            stderr = %String::from_utf8_lossy(&out.stderr).trim(),
                            "git repack failed"
                        );
                        break;
                    }
                    Err(e) => {
                        tracing::warn!(repo = name, error = %e, "cannot run git repack");
                        break;
                    }
                }
                packs_before = count_packs(&pack_dir);
                if packs_before <= max_packs {
                    break;
                }
            }
            repacking.store(false, Ordering::SeqCst);
        });
}

fn count_packs(pack_dir: &Path) -> usize {
    std::fs::read_dir(pack_dir)
        .map(|dir| {
            dir.filter_map(Result::ok)
                .filter(|e| e.path().extension().is_some_and(|x| x == "pack"))
                .count()
        })
        .unwrap_or(0)
}

#[cfg(test)]
mod tests;
