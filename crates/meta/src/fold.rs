//! The one CAS commit helper: folds pending metadata writes into commits on
//! their shard refs, in-process with gix, and makes them durable.
//!
//! One call, [`commit_shards`], folds a set of shards of one repo (a fold
//! cycle). A wide cycle is built on two threads ("lanes"), each with its
//! own repo handle and pack; the refs of both move in one transaction:
//!
//! 1. For every shard with pending writes, read the ref, apply the writes
//!    to its tree (chunks of `batch` writes per commit, in log order) and
//!    write the commits, all in memory.
//! 2. Write every object of the lane as **one pack** (with its index),
//!    fsync both and the pack directory ([`super::pack`]). One pack per lane and cycle
//!    instead of ~2 loose files per write; [`super::repack`] keeps the
//!    pack count bounded.
//! 3. Move every shard ref in one gix transaction with compare-and-swap
//!    (`MustExistAndMatch(old)` / `MustNotExist`): if any ref moved since
//!    step 1 nothing moves, and the cycle re-reads and starts again. The
//!    lock files holding the new values are fsynced before they are
//!    renamed over the refs (gix syncs nothing).
//! 4. fsync the ref directories.
//!
//! Only after step 4 may the caller mark the writes applied in the log.
//! Each commit's message carries the log sequences it covers
//! (`Vole-Log-Seq:` the last, `Vole-Log-Seqs:` all, as ranges); recovery
//! reads the tip's `Vole-Log-Seq` to know what to fold again.
//!
//! Nothing else in vole moves a `refs/meta/*` ref.

use std::fs::File;
use std::path::Path;

use gix::ObjectId;
use gix::bstr::ByteSlice;
use gix::refs::transaction::{Change, LogChange, PreviousValue, RefEdit, RefLog};

use super::fold_build::{NewObjects, build_commits};
use super::shard::shard_ref;

/// One acknowledged write waiting to be folded.
#[derive(Debug, Clone)]
pub struct PendingWrite {
    pub seq: u64,
    pub shard: u8,
    /// Path of the document in the shard tree.
    pub path: String,
    /// The document; empty: the path is removed from the tree.
    pub body: Vec<u8>,
}

/// Moments of a fold cycle a test can hold (see [`FoldHook`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FoldStage {
    /// The pack is written, not yet synced.
    PackWritten,
    /// The refs are moved, not yet synced; `last_seq` is the highest log
    /// sequence the cycle covers.
    RefsMoved { last_seq: u64 },
}

/// Called at each [`FoldStage`]; tests use it to observe the ordering of
/// syncs and "applied" (production passes none).
pub type FoldHook = std::sync::Arc<dyn Fn(FoldStage) + Send + Sync>;

/// What a cycle did.
#[derive(Debug, Default, Clone)]
pub struct FoldReport {
    pub writes: usize,
    pub commits: usize,
    pub objects: usize,
    /// CAS attempts that found a shard ref moved by someone else.
    pub foreign_moves: usize,
    pub packs: usize,
    /// Where the cycle's time went: building objects in memory, writing
    /// and syncing the pack, moving the refs, syncing the refs.
    pub build: std::time::Duration,
    pub pack: std::time::Duration,
    pub refs: std::time::Duration,
    pub sync: std::time::Duration,
}

impl FoldReport {
    /// Adds `other`'s counts and times to these.
    fn add(&mut self, other: &FoldReport) {
        self.writes += other.writes;
        self.commits += other.commits;
        self.objects += other.objects;
        self.foreign_moves += other.foreign_moves;
        self.packs += other.packs;
        self.build += other.build;
        self.pack += other.pack;
        self.refs += other.refs;
        self.sync += other.sync;
    }
}

/// A fold cycle of one repo that failed, and the step that failed.
#[derive(Debug, thiserror::Error)]
#[error("fold of {repo}")]
pub struct FoldError {
    pub repo: String,
    #[source]
    pub step: MetaRepoError,
}

/// A step of reading or folding a repo's metadata that failed, with the
/// error of gix (or the file system) that failed it.
#[derive(Debug, thiserror::Error)]
pub enum MetaRepoError {
    #[error("opening the repo")]
    Open(#[source] gix::Error),
    #[error("reading {0}")]
    ReadRef(String, #[source] gix::Error),
    #[error("reading object {0}")]
    ReadObject(ObjectId, #[source] gix::Error),
    #[error("the document in blob {0} does not parse")]
    Document(ObjectId, #[source] std::sync::Arc<serde_json::Error>),
    #[error("building the commits of shard {0:02x}")]
    Build(u8, #[source] BuildError),
    #[error("{0} is not a valid ref name")]
    RefName(String, #[source] gix::validate::reference::name::Error),
    #[error("writing the pack")]
    WritePack(#[source] std::io::Error),
    #[error("moving the shard refs")]
    MoveRefs(#[source] gix::Error),
    #[error("syncing {0}")]
    Sync(std::path::PathBuf, #[source] std::io::Error),
    #[error("shard refs kept moving under the fold ({0} attempts)")]
    KeptMoving(usize),
    #[error("a {0} thread panicked")]
    Panicked(&'static str),
    #[error(transparent)]
    Incarnation(#[from] vole_git::repos::IncarnationError),
    #[error("the repository was replaced by another of the same name")]
    Replaced,
}

/// Building a shard's commits in memory failed.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    #[error(transparent)]
    Git(#[from] gix::Error),
    #[error("encoding an object")]
    Encode(#[from] std::io::Error),
    #[error("tree {tree} of shard tip {commit} is missing")]
    MissingTree { tree: ObjectId, commit: ObjectId },
}

/// Give up a cycle after this many lost CAS races in a row (the writes stay
/// pending and the next cycle tries again).
const MAX_ATTEMPTS: usize = 8;

/// Opens a repo for folding (no user or system config is read).
pub fn open_repo(git_dir: &Path) -> Result<gix::Repository, MetaRepoError> {
    vole_git::open_gix(git_dir).map_err(MetaRepoError::Open)
}

fn signature() -> gix::actor::Signature {
    gix::actor::Signature {
        name: "vole".into(),
        email: "vole@localhost".into(),
        time: gix::date::Time {
            seconds: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs() as i64)
                .unwrap_or(0),
            offset: 0,
        },
    }
}

/// The tree of shard commit `tip`.
pub fn tree_of(repo: &gix::Repository, tip: ObjectId) -> Result<ObjectId, MetaRepoError> {
    let read = |e| MetaRepoError::ReadObject(tip, e);
    Ok(repo
        .find_commit(tip)
        .map_err(read)?
        .tree_id()
        .map_err(read)?
        .detach())
}

/// The tip of a shard ref, read from disk (never cached).
pub fn read_shard(repo: &gix::Repository, shard: u8) -> Result<Option<ObjectId>, MetaRepoError> {
    let name = shard_ref(shard);
    match repo
        .try_find_reference(name.as_str())
        .map_err(|e| MetaRepoError::ReadRef(name.clone(), e))?
    {
        None => Ok(None),
        Some(reference) => Ok(reference.target().try_id().map(|id| id.to_owned())),
    }
}

/// The `Vole-Log-Seq` trailer of a fold commit (0 when absent).
pub fn folded_seq(repo: &gix::Repository, id: ObjectId) -> Result<u64, MetaRepoError> {
    let read = |e| MetaRepoError::ReadObject(id, e);
    let commit = repo.find_commit(id).map_err(read)?;
    let message = commit.message_raw().map_err(read)?;
    Ok(message
        .lines()
        .filter_map(|line| line.strip_prefix(b"Vole-Log-Seq: "))
        .filter_map(|n| n.to_str().ok()?.trim().parse::<u64>().ok())
        .next_back()
        .unwrap_or(0))
}

/// Folds `shards` (shard, writes in log order) into their refs. `expected`
/// is what the caller last saw each ref hold (`None`: never looked); a ref
/// found elsewhere counts as a foreign move and is built upon, never
/// overwritten. `lanes` (1 or 2) is how many threads build the commits and
/// write a pack each; the refs of all of them move in one transaction.
/// Returns the new tips.
pub fn commit_shards(
    repo: &mut gix::Repository,
    repo_name: &str,
    shards: &[(u8, Vec<PendingWrite>)],
    batch: usize,
    lanes: usize,
    expected: &mut dyn FnMut(u8) -> Option<Option<ObjectId>>,
    hook: Option<&FoldHook>,
) -> Result<(FoldReport, Vec<(u8, ObjectId)>), FoldError> {
    let fail = |step: MetaRepoError| FoldError {
        repo: repo_name.to_string(),
        step,
    };
    let git_dir = repo.path().to_path_buf();
    let mut report = FoldReport {
        writes: shards.iter().map(|(_, w)| w.len()).sum(),
        ..FoldReport::default()
    };
    report.foreign_moves += foreign_moves(repo, repo_name, shards, expected).map_err(&fail)?;
    // The shards are independent: each lane builds the commits of its half
    // and writes them as its own pack, with its own repo handle (a handle
    // is not shared between threads).
    let parts: Vec<&[(u8, Vec<PendingWrite>)]> = if lanes > 1 && shards.len() > 1 {
        let (first, second) = shards.split_at(shards.len() / 2);
        vec![first, second]
    } else {
        vec![shards]
    };
    let mut side_repo = (parts.len() > 1).then(|| repo.clone());
    for _attempt in 0..MAX_ATTEMPTS {
        let signature = signature();
        let built = build_lanes(repo, side_repo.as_mut(), &parts, batch, &signature);
        let mut edits = Vec::with_capacity(shards.len());
        let mut tips = Vec::with_capacity(shards.len());
        let mut last_seq = 0;
        for lane in built {
            let lane = lane.map_err(&fail)?;
            report.add(&lane.report);
            last_seq = last_seq.max(lane.last_seq);
            edits.extend(lane.edits);
            tips.extend(lane.tips);
        }
        if let Some(hook) = hook {
            hook(FoldStage::PackWritten);
        }
        let started = std::time::Instant::now();
        let moved = move_refs(repo, &git_dir, edits, &signature);
        report.refs += started.elapsed();
        match moved {
            Ok(()) => {
                if let Some(hook) = hook {
                    hook(FoldStage::RefsMoved { last_seq });
                }
                let started = std::time::Instant::now();
                sync_ref_dirs(&git_dir).map_err(|e| {
                    fail(MetaRepoError::Sync(
                        git_dir.join(super::shard::SHARD_REF_PREFIX.trim_end_matches('/')),
                        e,
                    ))
                })?;
                report.sync += started.elapsed();
                return Ok((
                    report,
                    tips.into_iter()
                        .map(|(shard, tip, _)| (shard, tip))
                        .collect(),
                ));
            }
            Err(e) => {
                // Did a ref move under us (a lost CAS race), or is this a
                // real failure?
                if !any_tip_moved(repo, &tips).map_err(&fail)? {
                    return Err(fail(e));
                }
                report.foreign_moves += 1;
                tracing::debug!(
                    repo = repo_name,
                    "lost a shard CAS race; re-reading and retrying"
                );
            }
        }
    }
    Err(fail(MetaRepoError::KeptMoving(MAX_ATTEMPTS)))
}

/// How many of `shards`' refs are not where the caller last saw them
/// (`expected`; `None`: never looked): moves made outside vole.
fn foreign_moves(
    repo: &gix::Repository,
    repo_name: &str,
    shards: &[(u8, Vec<PendingWrite>)],
    expected: &mut dyn FnMut(u8) -> Option<Option<ObjectId>>,
) -> Result<usize, MetaRepoError> {
    let mut moves = 0;
    for (shard, _) in shards {
        let on_disk = read_shard(repo, *shard)?;
        if let Some(last_seen) = expected(*shard)
            && last_seen != on_disk
        {
            moves += 1;
            tracing::warn!(repo = repo_name, shard_ref = %shard_ref(*shard), "shard ref moved outside vole; folding on top of it");
        }
    }
    Ok(moves)
}

/// Steps 1 and 2 for each part of the shards: on `repo` alone, or, with a
/// `side_repo`, the second part on a thread of its own.
fn build_lanes(
    repo: &gix::Repository,
    side_repo: Option<&mut gix::Repository>,
    parts: &[&[(u8, Vec<PendingWrite>)]],
    batch: usize,
    signature: &gix::actor::Signature,
) -> Vec<Result<Lane, MetaRepoError>> {
    match side_repo {
        None => vec![build_and_pack(repo, parts[0], batch, signature)],
        Some(side_repo) => std::thread::scope(|scope| {
            // Moved in: a handle may go to another thread, not be shared.
            let second = parts[1];
            let side = scope.spawn(move || build_and_pack(side_repo, second, batch, signature));
            let here = build_and_pack(repo, parts[0], batch, signature);
            let there = side.join().unwrap_or(Err(MetaRepoError::Panicked("fold")));
            vec![here, there]
        }),
    }
}

/// Whether any of the shard refs the lanes built on (`tips`: shard, new
/// tip, the tip built on) moved meanwhile: a lost CAS race.
fn any_tip_moved(
    repo: &gix::Repository,
    tips: &[(u8, ObjectId, Option<ObjectId>)],
) -> Result<bool, MetaRepoError> {
    let mut raced = false;
    for (shard, _, seen) in tips {
        if read_shard(repo, *shard)? != *seen {
            raced = true;
        }
    }
    Ok(raced)
}

/// What one lane of a fold built and packed.
struct Lane {
    edits: Vec<RefEdit>,
    /// (shard, new tip, the tip it was built on)
    tips: Vec<(u8, ObjectId, Option<ObjectId>)>,
    last_seq: u64,
    /// Its commits, objects, pack, and build and pack times.
    report: FoldReport,
}

/// Steps 1 and 2 for some shards: reads each ref, builds its commits in
/// memory and writes them all as one synced pack.
fn build_and_pack(
    repo: &gix::Repository,
    shards: &[(u8, Vec<PendingWrite>)],
    batch: usize,
    signature: &gix::actor::Signature,
) -> Result<Lane, MetaRepoError> {
    let started = std::time::Instant::now();
    let new = NewObjects::default();
    let mut lane = Lane {
        edits: Vec::with_capacity(shards.len()),
        tips: Vec::with_capacity(shards.len()),
        last_seq: 0,
        report: FoldReport::default(),
    };
    for (shard, writes) in shards {
        let current = read_shard(repo, *shard)?;
        let (tip, commits) = build_commits(repo, &new, current, writes, batch, signature)
            .map_err(|e| MetaRepoError::Build(*shard, e))?;
        lane.report.commits += commits;
        lane.last_seq = lane
            .last_seq
            .max(writes.iter().map(|w| w.seq).max().unwrap_or(0));
        lane.edits.push(RefEdit {
            change: Change::Update {
                log: LogChange {
                    mode: RefLog::AndReference,
                    force_create_reflog: false,
                    message: "vole: fold".into(),
                },
                expected: match current {
                    Some(old) => PreviousValue::MustExistAndMatch(gix::refs::Target::Object(old)),
                    None => PreviousValue::MustNotExist,
                },
                new: gix::refs::Target::Object(tip),
            },
            name: shard_ref(*shard)
                .try_into()
                .map_err(|e| MetaRepoError::RefName(shard_ref(*shard), e))?,
            deref: false,
        });
        lane.tips.push((*shard, tip, current));
    }
    let objects = new.0.into_inner();
    lane.report.objects = objects.len();
    lane.report.build = started.elapsed();
    let started = std::time::Instant::now();
    super::pack::write_pack(repo.path(), &objects).map_err(MetaRepoError::WritePack)?;
    lane.report.packs = usize::from(!objects.is_empty());
    lane.report.pack = started.elapsed();
    Ok(lane)
}

/// Lock timeouts of a ref transaction: git's defaults for
/// `core.filesRefLockTimeout` and `core.packedRefsTimeout`.
const REF_LOCK_TIMEOUT: std::time::Duration = std::time::Duration::from_millis(100);
const PACKED_REFS_LOCK_TIMEOUT: std::time::Duration = std::time::Duration::from_millis(1000);

/// Threads that fsync a cycle's ref lock files. One fsync waits for its
/// own device flush; fsyncs of different files in flight together share
/// flushes (the block layer merges them), so 256 lock files synced on 8
/// threads took a third of the time they took one after the other.
const SYNC_THREADS: usize = 8;

/// Step 3: moves every ref of the cycle in one gix transaction with
/// compare-and-swap. gix writes each new value into the ref's lock file
/// when it prepares and renames the lock files over the refs when it
/// commits, syncing nothing; so the lock files are synced in between, and
/// a crash can never leave a renamed ref whose bytes are not on disk.
fn move_refs(
    repo: &gix::Repository,
    git_dir: &Path,
    edits: Vec<RefEdit>,
    signature: &gix::actor::Signature,
) -> Result<(), MetaRepoError> {
    let names: Vec<String> = edits.iter().map(|e| e.name.as_bstr().to_string()).collect();
    let prepared = repo
        .refs
        .transaction()
        .prepare(
            edits,
            gix::lock::acquire::Fail::AfterDurationWithBackoff(REF_LOCK_TIMEOUT),
            gix::lock::acquire::Fail::AfterDurationWithBackoff(PACKED_REFS_LOCK_TIMEOUT),
        )
        .map_err(MetaRepoError::MoveRefs)?;
    let sync_lock = |name: &String| {
        let lock = git_dir.join(format!("{name}.lock"));
        File::open(&lock)
            .and_then(|file| file.sync_all())
            .map_err(|e| MetaRepoError::Sync(lock, e))
    };
    if let [only] = names.as_slice() {
        sync_lock(only)?;
    } else {
        let per_thread = names.len().div_ceil(SYNC_THREADS).max(1);
        std::thread::scope(|scope| {
            let threads: Vec<_> = names
                .chunks(per_thread)
                .map(|chunk| scope.spawn(move || chunk.iter().try_for_each(sync_lock)))
                .collect();
            threads
                .into_iter()
                .try_for_each(|t| t.join().unwrap_or(Err(MetaRepoError::Panicked("sync"))))
        })?;
    }
    prepared
        .commit(Some(
            signature.to_ref(&mut gix::date::parse::TimeBuf::default()),
        ))
        .map(drop)
        .map_err(MetaRepoError::MoveRefs)
}

/// Parses a `Vole-Log-Seqs:` value (`3-5,9`) into sequences.
pub fn parse_seq_ranges(text: &str) -> Vec<u64> {
    let mut out = Vec::new();
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                if let (Ok(a), Ok(b)) = (a.parse::<u64>(), b.parse::<u64>()) {
                    out.extend(a..=b);
                }
            }
            None => out.extend(part.parse::<u64>().ok()),
        }
    }
    out
}

/// Step 4: fsyncs the directories holding the renamed shard refs (the
/// directories may have been created by this cycle): `refs/meta/shards`
/// and every one above it. `packed-refs` is not touched: a transaction
/// that updates a packed ref writes it loose.
fn sync_ref_dirs(git_dir: &Path) -> std::io::Result<()> {
    vole_git::durable::sync_ref_dirs(git_dir, [shard_ref(0).as_str()]).map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fold_build::fold_message;

    #[test]
    fn seq_ranges_round_trip() {
        let writes: Vec<PendingWrite> = [9u64, 3, 4, 5, 12]
            .iter()
            .map(|&seq| PendingWrite {
                seq,
                shard: 0,
                path: String::new(),
                body: Vec::new(),
            })
            .collect();
        let message = fold_message(&writes);
        assert!(message.contains("Vole-Log-Seq: 12\n"), "{message}");
        assert!(message.contains("Vole-Log-Seqs: 3-5,9,12\n"), "{message}");
        assert_eq!(parse_seq_ranges("3-5,9,12"), vec![3, 4, 5, 9, 12]);
    }
}
