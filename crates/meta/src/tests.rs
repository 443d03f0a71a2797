//! Tests of the metadata store against real git repos, a real log and real
//! fsync: CAS races, foreign ref moves, numbering under concurrency, the
//! fold-durability ordering and recovery from the log.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::MetaWrite;
use super::fold::{self, PendingWrite};
use super::fold_thread::PARALLEL_FOLD_SHARDS;
use super::repack::count_packs;
use super::*;
use vole_log::{Entry, Log};
use vole_stdx::page::Pagination;

pub(crate) const REPO: &str = "ann/demo";

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("--git-dir")
        .arg(dir)
        .args(args)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HOME", dir)
        .output()
        .expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

pub(crate) struct Fixture {
    _tmp: tempfile::TempDir,
    pub(crate) repos_dir: PathBuf,
    pub(crate) git_dir: PathBuf,
    pub(crate) log_dir: PathBuf,
}

impl Fixture {
    pub(crate) fn new() -> Fixture {
        let tmp = tempfile::tempdir().unwrap();
        let repos_dir = tmp.path().join("repos");
        let git_dir = repos_dir.join("ann/demo.git");
        std::fs::create_dir_all(&git_dir).unwrap();
        git(&git_dir, &["init", "--bare", "-q"]);
        let log_dir = tmp.path().join("log");
        std::fs::create_dir_all(&log_dir).unwrap();
        Fixture {
            _tmp: tmp,
            repos_dir,
            git_dir,
            log_dir,
        }
    }

    pub(crate) fn open(&self, options: StoreOptions) -> (Arc<Log<MetaWrite>>, MetaStore) {
        self.open_with_git(options, None)
    }

    /// Opens with a git binary (for repacks).
    fn open_with_git(
        &self,
        options: StoreOptions,
        git: Option<vole_git::Git>,
    ) -> (Arc<Log<MetaWrite>>, MetaStore) {
        self.open_repos(options, git, &[])
    }

    /// Opens with the fixture's repo and `others` (name, git dir) listed.
    fn open_repos(
        &self,
        options: StoreOptions,
        git: Option<vole_git::Git>,
        others: &[(&str, &Path)],
    ) -> (Arc<Log<MetaWrite>>, MetaStore) {
        let mut replayed = Vec::new();
        let (log, _) = Log::<MetaWrite>::open(&self.log_dir, |entry| {
            if let Entry::Txn { seq, rows } = entry {
                replayed.extend(rows.into_iter().map(|row| (seq, row)));
            }
        })
        .unwrap();
        let log = Arc::new(log);
        let store = MetaStore::open(
            log.clone(),
            &self.repos_dir,
            &std::iter::once((REPO.to_string(), self.git_dir.clone()))
                .chain(
                    others
                        .iter()
                        .map(|(name, dir)| (name.to_string(), dir.to_path_buf())),
                )
                .collect::<Vec<_>>(),
            replayed,
            git,
            options,
        )
        .unwrap();
        (log, store)
    }

    /// Every `*.json` path in every shard ref, with its shard.
    fn documents(&self) -> Vec<(String, String)> {
        let refs = git(
            &self.git_dir,
            &["for-each-ref", "--format=%(refname)", "refs/meta/"],
        );
        let mut out = Vec::new();
        for name in refs.lines() {
            for path in git(&self.git_dir, &["ls-tree", "-r", "--name-only", name]).lines() {
                out.push((name.to_string(), path.to_string()));
            }
        }
        out
    }

    /// The log sequences every fold commit of every shard says it covers.
    fn folded_seqs(&self) -> Vec<u64> {
        let refs = git(
            &self.git_dir,
            &["for-each-ref", "--format=%(refname)", "refs/meta/"],
        );
        let mut seqs = Vec::new();
        for name in refs.lines() {
            for line in git(&self.git_dir, &["log", "--format=%B", name]).lines() {
                if let Some(ranges) = line.strip_prefix("Vole-Log-Seqs: ") {
                    seqs.extend(fold::parse_seq_ranges(ranges));
                }
            }
        }
        seqs
    }
}

pub(crate) fn repo() -> RepoName {
    RepoName::parse(REPO).unwrap()
}

fn new_issue(title: &str) -> NewIssue {
    NewIssue {
        title: title.to_string(),
        body: "body".into(),
        labels: Vec::new(),
    }
}

/// Creates `n` issues titled `{prefix}{i}`, each acknowledged.
pub(crate) fn create_issues(store: &MetaStore, prefix: &str, n: usize) {
    for i in 0..n {
        store
            .create_issue(&repo(), new_issue(&format!("{prefix}{i}")), "ann")
            .unwrap();
    }
}

/// Polls `done` every few milliseconds until it holds or `bound` passes;
/// returns whether it held.
fn wait_until(bound: Duration, mut done: impl FnMut() -> bool) -> bool {
    let deadline = std::time::Instant::now() + bound;
    loop {
        if done() {
            return true;
        }
        if std::time::Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// A store that folds only when flushed: writes stay in the log alone.
pub(crate) fn only_on_flush() -> StoreOptions {
    StoreOptions {
        fold_interval: Duration::from_secs(3600),
        fold_batch: 1_000_000,
        ..StoreOptions::default()
    }
}

pub(crate) fn quick() -> StoreOptions {
    StoreOptions {
        fold_interval: Duration::from_millis(5),
        ..StoreOptions::default()
    }
}

#[test]
fn a_cas_race_between_two_writers_on_one_shard_loses_nothing() {
    let fx = Fixture::new();
    let rounds = 40;
    let barrier = Arc::new(std::sync::Barrier::new(2));
    let lost_races = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let writers: Vec<_> = ["a", "b"]
        .into_iter()
        .map(|who| {
            let git_dir = fx.git_dir.clone();
            let barrier = barrier.clone();
            let lost_races = lost_races.clone();
            std::thread::spawn(move || {
                let mut repo = fold::open_repo(&git_dir).unwrap();
                for round in 0..rounds {
                    barrier.wait();
                    let writes = vec![PendingWrite {
                        seq: round + 1,
                        shard: 7,
                        path: format!("{who}/{round}.json"),
                        body: format!("{{\"by\":\"{who}\",\"round\":{round}}}").into_bytes(),
                    }];
                    let (report, _) = fold::commit_shards(
                        &mut repo,
                        REPO,
                        &[(7, writes)],
                        64,
                        1,
                        &mut |_| None,
                        None,
                    )
                    .unwrap();
                    lost_races.fetch_add(report.foreign_moves, std::sync::atomic::Ordering::SeqCst);
                }
            })
        })
        .collect();
    for writer in writers {
        writer.join().unwrap();
    }
    let paths: BTreeSet<String> = fx.documents().into_iter().map(|(_, p)| p).collect();
    let missing: Vec<String> = ["a", "b"]
        .iter()
        .flat_map(|who| (0..rounds).map(move |r| format!("{who}/{r}.json")))
        .filter(|p| !paths.contains(p))
        .collect();
    assert!(
        missing.is_empty(),
        "compare-and-swap lost {} of {} writes to a racing writer: {missing:?}",
        missing.len(),
        2 * rounds
    );
    // Anti-vacuity: the two writers really raced on the ref.
    assert!(
        lost_races.load(std::sync::atomic::Ordering::SeqCst) > 0,
        "the writers never collided, so the CAS path was not exercised"
    );
}

#[test]
fn a_foreign_move_of_a_shard_ref_is_detected_and_built_upon() {
    let fx = Fixture::new();
    let (_log, store) = fx.open(quick());
    let issue = store
        .create_issue(&repo(), new_issue("first"), "ann")
        .unwrap();
    assert!(store.flush(Duration::from_secs(10)));
    let shard_name = shard::shard_ref(shard::shard_of(&issue.id, shard::SHARDS));
    // Someone moves the shard ref behind vole's back: a commit that adds a
    // file on top of vole's.
    let tip = git(&fx.git_dir, &["rev-parse", &shard_name])
        .trim()
        .to_string();
    let blob = {
        let mut child = Command::new("git")
            .arg("--git-dir")
            .arg(&fx.git_dir)
            .args(["hash-object", "-w", "--stdin"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        use std::io::Write;
        child.stdin.take().unwrap().write_all(b"foreign\n").unwrap();
        String::from_utf8(child.wait_with_output().unwrap().stdout)
            .unwrap()
            .trim()
            .to_string()
    };
    let mut tree_listing = git(&fx.git_dir, &["ls-tree", &format!("{tip}^{{tree}}")]);
    tree_listing.push_str(&format!("100644 blob {blob}\tforeign.txt\n"));
    let tree = {
        let mut child = Command::new("git")
            .arg("--git-dir")
            .arg(&fx.git_dir)
            .arg("mktree")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        use std::io::Write;
        child
            .stdin
            .take()
            .unwrap()
            .write_all(tree_listing.as_bytes())
            .unwrap();
        String::from_utf8(child.wait_with_output().unwrap().stdout)
            .unwrap()
            .trim()
            .to_string()
    };
    let foreign = Command::new("git")
        .arg("--git-dir")
        .arg(&fx.git_dir)
        .args(["commit-tree", &tree, "-p", &tip, "-m", "foreign"])
        .env("GIT_AUTHOR_NAME", "x")
        .env("GIT_AUTHOR_EMAIL", "x@x")
        .env("GIT_COMMITTER_NAME", "x")
        .env("GIT_COMMITTER_EMAIL", "x@x")
        .output()
        .unwrap();
    let foreign = String::from_utf8(foreign.stdout)
        .unwrap()
        .trim()
        .to_string();
    git(&fx.git_dir, &["update-ref", &shard_name, &foreign, &tip]);

    // A comment lives in its issue's shard: the next fold meets the move.
    store
        .comment(
            &repo(),
            ThreadKind::Issue,
            issue.number,
            NewComment {
                body: "second".into(),
            },
            "bob",
        )
        .unwrap();
    assert!(store.flush(Duration::from_secs(10)));
    assert!(
        store.stats().foreign_moves >= 1,
        "the shard ref moved outside vole and the fold did not notice"
    );
    let paths: Vec<String> = git(&fx.git_dir, &["ls-tree", "-r", "--name-only", &shard_name])
        .lines()
        .map(str::to_string)
        .collect();
    assert!(
        paths.iter().any(|p| p == "foreign.txt"),
        "the foreign commit was overwritten instead of re-read: {paths:?}"
    );
    assert_eq!(
        paths.iter().filter(|p| p.ends_with(".json")).count(),
        2,
        "{paths:?}"
    );
    let parent = git(&fx.git_dir, &["rev-parse", &format!("{shard_name}^")]);
    assert_eq!(
        parent.trim(),
        foreign,
        "the fold did not build on the foreign commit"
    );
}

#[test]
fn numbers_are_unique_under_concurrent_creation() {
    let fx = Fixture::new();
    let (_log, store) = fx.open(quick());
    let store = Arc::new(store);
    let threads = 8;
    let each = 25;
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let store = store.clone();
            std::thread::spawn(move || {
                (0..each)
                    .map(|i| {
                        if (t + i) % 3 == 0 {
                            store
                                .create_change(
                                    &repo(),
                                    NewChange {
                                        title: format!("cr {t}/{i}"),
                                        body: String::new(),
                                        source_branch: format!("topic-{t}-{i}"),
                                        target_branch: "main".into(),
                                        labels: Vec::new(),
                                    },
                                    "ann",
                                )
                                .unwrap()
                                .number
                        } else {
                            store
                                .create_issue(&repo(), new_issue(&format!("{t}/{i}")), "ann")
                                .unwrap()
                                .number
                        }
                    })
                    .collect::<Vec<u64>>()
            })
        })
        .collect();
    let mut numbers: Vec<u64> = handles
        .into_iter()
        .flat_map(|h| h.join().unwrap())
        .collect();
    numbers.sort_unstable();
    let expected: Vec<u64> = (1..=(threads * each) as u64).collect();
    assert_eq!(
        numbers, expected,
        "issue/change numbers were handed out twice or skipped under concurrent creation"
    );
    // And they survive a reopen: the next number continues the sequence.
    assert!(store.flush(Duration::from_secs(10)));
    drop(Arc::try_unwrap(store).expect("sole owner"));
    let (_log, store) = fx.open(quick());
    let next = store
        .create_issue(&repo(), new_issue("after"), "ann")
        .unwrap();
    assert_eq!(next.number, (threads * each) as u64 + 1);
}

#[test]
fn a_stale_edit_is_refused_and_changes_nothing() {
    let fx = Fixture::new();
    let (_log, store) = fx.open(quick());
    let issue = store.create_issue(&repo(), new_issue("t"), "ann").unwrap();
    let closed = store
        .edit_issue(
            &repo(),
            issue.number,
            IssuePatch {
                version: Some(1),
                state: Some(IssueState::Closed),
                ..IssuePatch::default()
            },
        )
        .unwrap();
    assert_eq!((closed.version, closed.replaces), (2, Some(1)));
    let stale = store.edit_issue(
        &repo(),
        issue.number,
        IssuePatch {
            version: Some(1),
            title: Some("overwrite".into()),
            ..IssuePatch::default()
        },
    );
    assert!(
        matches!(stale, Err(MetaError::Stale(_))),
        "an edit of version 1 after version 2 was not refused: {stale:?}"
    );
    let now = store.issue(&repo(), issue.number).unwrap();
    assert_eq!((now.title.as_str(), now.version), ("t", 2));
}

#[test]
fn a_fold_is_marked_applied_only_after_its_refs_are_synced() {
    let fx = Fixture::new();
    let seen: Arc<Mutex<Vec<(u64, u64)>>> = Arc::new(Mutex::new(Vec::new()));
    let log_slot: Arc<Mutex<Option<Arc<Log<MetaWrite>>>>> = Arc::new(Mutex::new(None));
    let hook: FoldHook = {
        let seen = seen.clone();
        let log_slot = log_slot.clone();
        Arc::new(move |stage| {
            if let FoldStage::RefsMoved { last_seq } = stage
                && let Some(log) = log_slot.lock().unwrap().as_ref()
            {
                seen.lock().unwrap().push((last_seq, log.applied()));
            }
        })
    };
    let (log, store) = fx.open(StoreOptions {
        fold_hook: Some(hook),
        ..quick()
    });
    *log_slot.lock().unwrap() = Some(log.clone());
    for i in 0..20 {
        store
            .create_issue(&repo(), new_issue(&format!("{i}")), "ann")
            .unwrap();
        if i % 5 == 4 {
            assert!(store.flush(Duration::from_secs(10)));
        }
    }
    assert!(store.flush(Duration::from_secs(10)));
    let seen = seen.lock().unwrap().clone();
    assert!(!seen.is_empty(), "no fold reached the refs-moved stage");
    for (last_seq, applied) in &seen {
        assert!(
            applied < last_seq,
            "writes through seq {applied} were marked applied before the fold covering seq {last_seq} synced its refs"
        );
    }
    assert_eq!(
        log.applied(),
        20,
        "every folded write is applied after the syncs"
    );
}

#[test]
fn reopening_refolds_what_was_not_folded_and_nothing_twice() {
    let fx = Fixture::new();
    {
        let (_log, store) = fx.open(quick());
        create_issues(&store, "folded ", 10);
        assert!(store.flush(Duration::from_secs(10)));
    }
    {
        // Nothing is folded: the writes exist only in the log when the
        // store goes away (as after a crash).
        let (_log, store) = fx.open(only_on_flush());
        create_issues(&store, "unfolded ", 10);
        assert_eq!(
            store.stats().pending,
            10,
            "records already folded (at or below their shard's Vole-Log-Seq) were queued again"
        );
    }
    assert_eq!(
        fx.documents().len(),
        10,
        "the unfolded writes reached git before the reopen"
    );
    let (_log, store) = fx.open(quick());
    let listed = store
        .list_issues(
            &repo(),
            &Filter::default(),
            Pagination::new(1, 100).unwrap(),
        )
        .unwrap();
    assert_eq!(listed.total, 20, "a reopened store lost log-only writes");
    assert!(store.flush(Duration::from_secs(10)));
    assert_eq!(fx.documents().len(), 20);
    let seqs = fx.folded_seqs();
    let mut counts: HashMap<u64, usize> = HashMap::new();
    for seq in &seqs {
        *counts.entry(*seq).or_default() += 1;
    }
    let twice: Vec<_> = counts.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "log records folded twice: {twice:?}");
    assert_eq!(
        counts.keys().copied().collect::<BTreeSet<u64>>(),
        (1..=20).collect::<BTreeSet<u64>>()
    );
}

#[test]
fn one_fold_cycle_writes_one_pack_and_no_loose_objects() {
    let fx = Fixture::new();
    let (_log, store) = fx.open(only_on_flush());
    create_issues(&store, "", 50);
    assert!(store.flush(Duration::from_secs(10)));
    let counts = git(&fx.git_dir, &["count-objects", "-v"]);
    assert!(
        counts.contains("count: 0\n"),
        "loose objects written: {counts}"
    );
    assert!(
        counts.contains("packs: 1\n"),
        "one cycle, one pack: {counts}"
    );
    git(&fx.git_dir, &["fsck", "--strict", "--no-dangling"]);
    assert_eq!(fx.documents().len(), 50);
}

#[test]
fn compacting_the_meta_log_keeps_every_write_not_yet_folded() {
    let fx = Fixture::new();
    {
        let (_log, store) = fx.open(quick());
        create_issues(&store, "folded ", 10);
        assert!(store.flush(Duration::from_secs(10)));
    }
    {
        let (log, store) = fx.open(only_on_flush());
        create_issues(&store, "unfolded ", 5);
        let report = store.compact_log(0).unwrap();
        assert!(report.bytes_after < report.bytes_before, "{report:?}");
        assert_eq!(report.base_seq, 11, "only the folded records may go");
        drop(store);
        drop(log);
    }
    let (_log, store) = fx.open(quick());
    let listed = store
        .list_issues(
            &repo(),
            &Filter::default(),
            Pagination::new(1, 100).unwrap(),
        )
        .unwrap();
    assert_eq!(
        listed.total, 15,
        "compaction dropped writes that were only in the log"
    );
}

#[test]
fn the_pack_count_stays_bounded_by_geometric_repacks() {
    let fx = Fixture::new();
    let (_log, store) = fx.open_with_git(
        StoreOptions {
            max_packs: 4,
            ..quick()
        },
        Some(vole_git::Git::locate(None).unwrap()),
    );
    let packs = || count_packs(&fx.git_dir.join("objects/pack"));
    let mut most = 0;
    for i in 0..24 {
        store
            .create_issue(&repo(), new_issue(&format!("{i}")), "ann")
            .unwrap();
        assert!(store.flush(Duration::from_secs(10)));
        most = most.max(packs());
    }
    // Each flush above was one fold cycle, one pack.
    assert_eq!(store.stats().fold_cycles, 24);
    wait_until(Duration::from_secs(20), || packs() <= 4);
    assert!(
        store.stats().repacks >= 1,
        "24 packs were written and no repack ran"
    );
    assert!(
        packs() <= 4 && most < 24,
        "the pack count was not kept bounded: {} now, {most} at most",
        packs()
    );
    git(&fx.git_dir, &["fsck", "--strict", "--no-dangling"]);
    assert_eq!(fx.documents().len(), 24);
}

#[test]
fn per_entity_the_log_holds_versions_in_the_order_they_were_decided() {
    let fx = Fixture::new();
    let (_log, store) = fx.open(quick());
    let store = Arc::new(store);
    let issue = store.create_issue(&repo(), new_issue("t"), "ann").unwrap();
    let edits_per_thread = 40;
    let threads: Vec<_> = (0..8)
        .map(|t| {
            let store = store.clone();
            std::thread::spawn(move || {
                let mut landed = 0;
                while landed < edits_per_thread {
                    let current = store.issue(&repo(), issue.number).unwrap();
                    let edit = store.edit_issue(
                        &repo(),
                        issue.number,
                        IssuePatch {
                            version: Some(current.version),
                            title: Some(format!("t{t}-{landed}")),
                            ..IssuePatch::default()
                        },
                    );
                    match edit {
                        Ok(_) => landed += 1,
                        Err(MetaError::Stale(_)) => {}
                        Err(e) => panic!("{e}"),
                    }
                }
            })
        })
        .collect();
    for thread in threads {
        thread.join().unwrap();
    }
    assert!(store.flush(Duration::from_secs(10)));
    drop(Arc::try_unwrap(store).expect("sole owner"));
    // Replay the log: this issue's versions must come in increasing order,
    // or a fold (and a recovery) would end on an older version.
    let mut versions = Vec::new();
    let (_log, _) = Log::<MetaWrite>::open(&fx.log_dir, |entry| {
        if let Entry::Txn { rows, .. } = entry {
            for row in rows.into_iter().filter(|r| r.entity_id == issue.id) {
                let doc: serde_json::Value = serde_json::from_str(&row.body).unwrap();
                versions.push(doc["version"].as_u64().unwrap());
            }
        }
    })
    .unwrap();
    let expected: Vec<u64> = (1..=1 + 8 * edits_per_thread as u64).collect();
    assert_eq!(
        versions, expected,
        "the log holds this issue's versions out of the order they were decided in"
    );
    let shard = shard::shard_ref(shard::shard_of(&issue.id, shard::SHARDS));
    let path = format!(
        "{shard}:{}",
        entity::Entity::Issue(issue.clone()).tree_path()
    );
    let folded: serde_json::Value =
        serde_json::from_str(&git(&fx.git_dir, &["show", &path])).unwrap();
    assert_eq!(folded["version"], 1 + 8 * edits_per_thread as u64);
}

#[test]
fn a_write_made_while_the_fold_thread_sleeps_is_folded_without_a_flush() {
    let fx = Fixture::new();
    let (_log, store) = fx.open(quick());
    for round in 0..3 {
        // Nothing pending: the fold thread sleeps with no timer running,
        // so only the writer can wake it.
        let idle = wait_until(Duration::from_secs(5), || store.inner.wake.lock().idle);
        assert!(idle, "the fold thread never went idle (round {round})");
        create_issues(&store, &format!("round{round}-"), 1);
        assert!(
            wait_until(Duration::from_secs(5), || store.stats().pending == 0),
            "a write made while the fold thread slept was not folded within 5 s (round {round}): the writer did not wake it"
        );
    }
    assert_eq!(fx.documents().len(), 3, "every write is in a shard ref");
}

#[test]
fn no_write_is_acknowledged_before_the_log_has_it_durably() {
    let fx = Fixture::new();
    let (log, store) = fx.open(only_on_flush());
    let store = Arc::new(store);
    let writers = 8;
    let acked = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let (written_before, durable_before) = log.watermarks();
    // No sync can start while the gate is held: every frame can reach the
    // file, none can become durable.
    let hold = log.gate().hold();
    let threads: Vec<_> = (0..writers)
        .map(|w| {
            let store = store.clone();
            let acked = acked.clone();
            std::thread::spawn(move || {
                create_issues(&store, &format!("w{w}-"), 1);
                acked.fetch_add(1, Ordering::SeqCst);
            })
        })
        .collect();
    let all_written = wait_until(Duration::from_secs(5), || {
        log.watermarks().0 >= written_before + writers as u64
    });
    assert!(
        all_written,
        "the writers' frames never reached the log (written {:?})",
        log.watermarks()
    );
    // Give an early acknowledgement time to show.
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(
        acked.load(Ordering::SeqCst),
        0,
        "a write was acknowledged while no sync could run: acknowledged before durable"
    );
    assert_eq!(log.watermarks().1, durable_before, "nothing became durable");
    drop(hold);
    for thread in threads {
        thread.join().unwrap();
    }
    assert_eq!(acked.load(Ordering::SeqCst), writers);
    assert!(log.watermarks().1 >= written_before + writers as u64);
}

#[test]
fn a_cycle_over_many_shards_is_folded_on_two_threads_and_loses_nothing() {
    let fx = Fixture::new();
    let (_log, store) = fx.open(only_on_flush());
    let n = 300;
    create_issues(&store, "wide-", n);
    let shards: BTreeSet<String> = (1..=3)
        .flat_map(|page| {
            store
                .list_issues(
                    &repo(),
                    &Filter::default(),
                    Pagination::new(page, 100).unwrap(),
                )
                .unwrap()
                .items
        })
        .map(|issue| shard::shard_ref(shard::shard_of(&issue.id, shard::SHARDS)))
        .collect();
    assert!(
        shards.len() >= PARALLEL_FOLD_SHARDS,
        "the writes span only {} shards: too few to split the cycle",
        shards.len()
    );
    assert!(store.flush(Duration::from_secs(30)));
    let stats = store.stats();
    assert_eq!(stats.fold_cycles, 1, "one flush, one cycle");
    let packs = count_packs(&fx.git_dir.join("objects/pack"));
    let lanes = if store.inner.cores > 1 { 2 } else { 1 };
    assert_eq!(packs, lanes, "each lane of the cycle writes its own pack");
    let documents = fx.documents();
    assert_eq!(
        documents.len(),
        n,
        "every write is in its shard ref after a split cycle"
    );
    let seqs = fx.folded_seqs();
    let unique: BTreeSet<u64> = seqs.iter().copied().collect();
    assert_eq!(seqs.len(), n, "each write folded once");
    assert_eq!(unique.len(), n);
    assert_eq!(stats.pending, 0);
    assert_eq!(store.inner.log.applied(), *unique.last().unwrap());
    git(&fx.git_dir, &["fsck", "--strict", "--no-dangling"]);
}

/// Opens the fixture's store with a system repo beside `ann/demo`.
fn open_with_system(fixture: &Fixture, system: &Path) -> MetaStore {
    let mut replayed = Vec::new();
    let (log, _) = Log::<MetaWrite>::open(&fixture.log_dir, |entry| {
        if let Entry::Txn { seq, rows } = entry {
            replayed.extend(rows.into_iter().map(|row| (seq, row)));
        }
    })
    .unwrap();
    MetaStore::open(
        Arc::new(log),
        &fixture.repos_dir,
        &[
            (REPO.to_string(), fixture.git_dir.clone()),
            (SYSTEM.to_string(), system.to_path_buf()),
        ],
        replayed,
        None,
        StoreOptions::default(),
    )
    .unwrap()
}

fn members_acl(version: u64) -> requests::AclPut {
    requests::AclPut {
        version,
        visibility: entity::Visibility::Private,
        owner: None,
        members: vec![entity::Member {
            name: "zelda".into(),
            role: entity::Role::Write,
        }],
    }
}

#[test]
fn an_acl_kept_in_the_repos_shards_moves_to_the_system_repo_and_leaves_the_tips() {
    let fixture = Fixture::new();
    vole_git::repos::Incarnation::mint_adopting_legacy()
        .write(&fixture.git_dir)
        .unwrap();
    let system = fixture.repos_dir.parent().unwrap().join("system.git");
    git(&system, &["init", "--bare", "-q"]);
    let repo = RepoName::parse(REPO).unwrap();
    // As a store without a system repo (and vole before) kept it: in the
    // repo's own shards.
    {
        let (_log, store) = fixture.open(StoreOptions::default());
        store.put_acl(&repo, members_acl(0)).unwrap();
        assert!(store.flush(Duration::from_secs(10)));
        store.close(Duration::from_secs(10));
    }
    let acl_paths = |fixture: &Fixture| {
        fixture
            .documents()
            .into_iter()
            .filter(|(_, path)| path == entity::REPO_ACL_PATH)
            .count()
    };
    assert_eq!(
        acl_paths(&fixture),
        1,
        "the ACL is not in the shards to begin with"
    );

    let store = open_with_system(&fixture, &system);
    let before = store.acl(&repo).unwrap();
    assert_eq!(before.members[0].name, "zelda");
    assert_eq!(store.move_acls_to_system().unwrap(), vec![REPO.to_string()]);
    assert!(store.flush(Duration::from_secs(10)));
    let after = store.acl(&repo).unwrap();
    assert_eq!(
        (after.version, after.visibility),
        (before.version, before.visibility)
    );
    // Whom a moved ACL names is known, so no one registers the name.
    assert!(store.acls_name("ZELDA").unwrap(), "the member is not found");
    assert!(!store.acls_name("zeld").unwrap());
    assert_eq!(after.members, before.members);
    assert_eq!(
        acl_paths(&fixture),
        0,
        "the ACL is still at the repo's shard tips"
    );
    // The next write goes to the system repo and stays out of the repo.
    let next = store.put_acl(&repo, members_acl(after.version)).unwrap();
    assert_eq!(next.version, after.version + 1);
    assert!(store.acls_name("zelda").unwrap(), "still a member");
    assert!(store.flush(Duration::from_secs(10)));
    assert_eq!(acl_paths(&fixture), 0);
    store.close(Duration::from_secs(10));

    // Read back from the system repo after a restart; moved once only.
    let store = open_with_system(&fixture, &system);
    assert_eq!(store.acl(&repo).unwrap().version, next.version);
    assert!(store.move_acls_to_system().unwrap().is_empty());
    // Replayed at open; and an ACL without the member no longer names her.
    assert!(store.acls_name("zelda").unwrap(), "not replayed at open");
    let mut none = members_acl(next.version);
    none.members.clear();
    store.put_acl(&repo, none).unwrap();
    assert!(
        !store.acls_name("zelda").unwrap(),
        "a member removed is still counted as named"
    );
    let in_system = git(
        &system,
        &["for-each-ref", "--format=%(refname)", "refs/meta/"],
    );
    let found = in_system.lines().any(|name| {
        git(&system, &["ls-tree", "-r", "--name-only", name])
            .lines()
            .any(|path| path.starts_with("acls/") && path.ends_with(".json"))
    });
    assert!(found, "the system repo holds no ACL document");
    store.close(Duration::from_secs(10));
}

#[test]
fn the_pending_writes_of_a_forgotten_repo_hold_up_no_flush_and_no_compaction() {
    let fixture = Fixture::new();
    let (log, store) = fixture.open(only_on_flush());
    create_issues(&store, "left behind ", 3);
    assert_eq!(
        log.applied(),
        0,
        "the writes were folded before the repo went"
    );
    store.forget_repo(&repo());
    assert!(
        store.flush(Duration::from_millis(500)),
        "a flush waits on the writes of a repo that is gone"
    );
    assert_eq!(log.applied(), 3, "the applied watermark stops at them");
    store.close(Duration::from_secs(1));
}

#[test]
fn a_deleted_comment_is_no_longer_listed_and_stays_deleted_after_a_reopen() {
    let fx = Fixture::new();
    let page = Pagination::new(1, 100).unwrap();
    let (number, kept, gone) = {
        let (_log, store) = fx.open(quick());
        let issue = store.create_issue(&repo(), new_issue("t"), "ann").unwrap();
        let say = |body: &str| {
            store
                .comment(
                    &repo(),
                    ThreadKind::Issue,
                    issue.number,
                    NewComment { body: body.into() },
                    "bob",
                )
                .unwrap()
        };
        let (kept, gone) = (say("first"), say("second"));
        let edited = store
            .edit_comment(
                &repo(),
                ThreadKind::Issue,
                issue.number,
                &kept.id,
                CommentPatch {
                    version: Some(1),
                    body: "first, edited".into(),
                },
            )
            .unwrap();
        assert_eq!((edited.version, edited.replaces), (2, Some(1)));
        let stale = store.edit_comment(
            &repo(),
            ThreadKind::Issue,
            issue.number,
            &kept.id,
            CommentPatch {
                version: Some(1),
                body: "overwrite".into(),
            },
        );
        assert!(
            matches!(stale, Err(MetaError::Stale(_))),
            "a comment edit of version 1 after version 2 was not refused: {stale:?}"
        );
        store
            .delete_comment(&repo(), ThreadKind::Issue, issue.number, &gone.id, Some(1))
            .unwrap();
        assert!(store.flush(Duration::from_secs(10)));
        (issue.number, kept, gone)
    };
    // The deletion is a document of its own (folded into git), so the
    // reopened store, which reads the trees, does not list it either.
    let (_log, store) = fx.open(quick());
    let listed = store
        .comments(&repo(), ThreadKind::Issue, number, page)
        .unwrap();
    let bodies: Vec<&str> = listed.items.iter().map(|c| c.body.as_str()).collect();
    assert_eq!(
        (bodies, listed.total),
        (vec!["first, edited"], 1),
        "the deleted comment is listed after a reopen"
    );
    assert!(matches!(
        store.thread_comment(&repo(), ThreadKind::Issue, number, &gone.id),
        Err(MetaError::NotFound(_))
    ));
    assert!(matches!(
        store.delete_comment(&repo(), ThreadKind::Issue, number, &gone.id, Some(2)),
        Err(MetaError::NotFound(_))
    ));
    assert_eq!(
        store
            .thread_comment(&repo(), ThreadKind::Issue, number, &kept.id)
            .unwrap()
            .version,
        2
    );
}

#[test]
fn a_comment_page_is_cut_by_its_bodies_bytes_as_well_as_by_its_count() {
    let fx = Fixture::new();
    let (_log, store) = fx.open(quick());
    let issue = store.create_issue(&repo(), new_issue("t"), "ann").unwrap();
    // Bodies of 10, 10, 30, 10, 10, 10 bytes; one deleted between them.
    let mut ids = Vec::new();
    for (i, len) in [10, 10, 30, 10, 10, 10].into_iter().enumerate() {
        let body = format!("{i}{}", "x".repeat(len - 1));
        let made = store
            .comment(
                &repo(),
                ThreadKind::Issue,
                issue.number,
                NewComment { body },
                "bob",
            )
            .unwrap();
        ids.push(made.id);
    }
    let gone = store
        .comment(
            &repo(),
            ThreadKind::Issue,
            issue.number,
            NewComment {
                body: "deleted".repeat(20),
            },
            "bob",
        )
        .unwrap();
    store
        .delete_comment(&repo(), ThreadKind::Issue, issue.number, &gone.id, Some(1))
        .unwrap();
    let page = |n: usize| {
        let found = store
            .comment_page(&repo(), (ThreadKind::Issue, issue.number), n, (3, 25))
            .unwrap();
        let firsts: String = found.items.iter().map(|c| &c.body[..1]).collect();
        (firsts, found.pages)
    };
    // At most 3 a page and 25 bytes, a page holding at least one: [0 1]
    // (the 30-byte one does not fit), [2] (alone, over the bound), [3 4]
    // (the third would make 30 bytes), [5].
    assert_eq!(
        page(1),
        ("01".to_string(), 4),
        "page 1 is not cut at 25 bytes"
    );
    assert_eq!(
        page(2),
        ("2".to_string(), 4),
        "a body over the bound is not a page of its own"
    );
    assert_eq!(page(3), ("34".to_string(), 4));
    assert_eq!(
        page(4),
        ("5".to_string(), 4),
        "the deleted comment was counted"
    );
    assert_eq!(page(5), (String::new(), 4));
    // Without the byte bound, the count alone cuts.
    let found = store
        .comment_page(
            &repo(),
            (ThreadKind::Issue, issue.number),
            2,
            (3, usize::MAX),
        )
        .unwrap();
    assert_eq!((found.items.len(), found.pages), (3, 2));
}

/// The system repo beside `fx`'s repo, made on first use.
fn system_dir(fx: &Fixture) -> PathBuf {
    let dir = fx.repos_dir.parent().unwrap().join("system.git");
    if !dir.exists() {
        std::fs::create_dir_all(&dir).unwrap();
        git(&dir, &["init", "--bare", "-q"]);
    }
    dir
}

#[test]
fn older_documents_get_ids_at_start_and_no_id_is_handed_out_twice_across_restarts() {
    let fx = Fixture::new();
    // Made before numeric ids: a store without sequences hands out none.
    {
        let (_log, store) = fx.open(quick());
        for title in ["one", "two"] {
            let mut new = new_issue(title);
            new.labels = vec!["bug".into()];
            store.create_issue(&repo(), new, "ann").unwrap();
        }
        store
            .comment(
                &repo(),
                ThreadKind::Issue,
                1,
                NewComment { body: "hi".into() },
                "ann",
            )
            .unwrap();
        assert_eq!(store.issue(&repo(), 1).unwrap().serial, 0);
        assert!(store.flush(Duration::from_secs(10)));
    }
    let store = open_with_system(&fx, &system_dir(&fx));
    // Two issues, a comment, and the label their names made.
    assert_eq!(store.give_serials().unwrap(), 4, "the upgrade's writes");
    let serials: BTreeSet<u64> = [1, 2]
        .iter()
        .map(|n| store.issue(&repo(), *n).unwrap().serial)
        .collect();
    assert_eq!(serials.len(), 2, "two issues, two ids: {serials:?}");
    assert!(!serials.contains(&0));
    let labels = store.labels(&repo()).unwrap();
    assert_eq!(
        labels.iter().map(|l| l.name.as_str()).collect::<Vec<_>>(),
        ["bug"]
    );
    let comments = store
        .comments(
            &repo(),
            ThreadKind::Issue,
            1,
            Pagination::new(1, 10).unwrap(),
        )
        .unwrap();
    assert_ne!(comments.items[0].serial, 0, "the comment got no id");
    // Once is enough: a second start writes nothing, and a label deleted
    // since stays deleted though the issues still carry its name.
    store.delete_label(&repo(), labels[0].serial).unwrap();
    assert_eq!(store.issue(&repo(), 1).unwrap().labels, ["bug"]);
    assert_eq!(
        store.give_serials().unwrap(),
        0,
        "a second start wrote: a deleted label made again?"
    );
    assert!(
        store.labels(&repo()).unwrap().is_empty(),
        "a deleted label came back at a start"
    );
    let before_restart = store
        .create_issue(&repo(), new_issue("three"), "ann")
        .unwrap()
        .serial;
    assert!(serials.iter().all(|s| *s < before_restart));
    let reserved = store
        .read_system(|s| Ok(s.index.reserved(entity::SerialKind::Issue)))
        .unwrap();
    assert!(
        reserved >= before_restart,
        "handed out past its reservation"
    );
    assert!(store.flush(Duration::from_secs(10)));
    drop(store);
    // A restart skips the rest of the block: nothing is handed out twice.
    let store = open_with_system(&fx, &system_dir(&fx));
    let after_restart = store
        .create_issue(&repo(), new_issue("four"), "ann")
        .unwrap()
        .serial;
    assert!(
        after_restart > reserved,
        "{after_restart} handed out again after a restart (reserved up to {reserved})"
    );
    assert!(after_restart < (1 << 53));
}

#[test]
fn a_threads_comment_list_is_windowed_by_count_and_bytes_and_counts_them_all() {
    let fx = Fixture::new();
    let (_log, store) = fx.open(quick());
    store
        .create_issue(&repo(), new_issue("one"), "ann")
        .unwrap();
    for n in 0..5 {
        let body = format!("comment {n:02}"); // 10 bytes each
        store
            .comment(&repo(), ThreadKind::Issue, 1, NewComment { body }, "ann")
            .unwrap();
    }
    let window = |skip, take, max_bytes| labels::CommentWindow {
        since: None,
        before: None,
        skip,
        take,
        max_bytes,
    };
    let shown = |w: labels::CommentWindow<'_>| {
        let (comments, total) = store
            .said_comments(&repo(), ThreadKind::Issue, 1, &w)
            .unwrap();
        let bodies: Vec<String> = comments.into_iter().map(|c| c.body).collect();
        (bodies, total)
    };
    let all = shown(window(0, 100, 1 << 20));
    assert_eq!(all.0.len(), 5);
    assert_eq!(all.1, 5);
    assert_eq!(shown(window(0, 3, 1 << 20)).0.len(), 3, "take");
    assert_eq!(
        shown(window(3, 10, 1 << 20)),
        (vec!["comment 03".to_string(), "comment 04".into()], 5),
        "skip"
    );
    // Bytes: stops once the bodies shown reach the bound, one at least.
    assert_eq!(shown(window(0, 10, 15)).0.len(), 2, "bytes");
    assert_eq!(shown(window(0, 10, 1)).0.len(), 1, "one at least");
    assert_eq!(shown(window(0, 10, 1)).1, 5, "the total counts them all");
}

#[test]
fn a_thread_carries_a_labels_own_spelling_so_a_rename_finds_it() {
    let fx = Fixture::new();
    let store = open_with_system(&fx, &system_dir(&fx));
    let label = store
        .create_label(
            &repo(),
            labels::LabelPut {
                name: Some("crash".into()),
                ..labels::LabelPut::default()
            },
        )
        .unwrap();
    let mut new = new_issue("one");
    new.labels = vec!["CRASH".into()];
    let issue = store.create_issue(&repo(), new, "ann").unwrap();
    assert_eq!(
        issue.labels,
        ["crash"],
        "the name as asked, not the label's"
    );
    let patch = IssuePatch {
        labels: Some(vec!["Crash".into()]),
        ..IssuePatch::default()
    };
    store.edit_issue(&repo(), issue.number, patch).unwrap();
    store
        .edit_label(
            &repo(),
            label.serial,
            labels::LabelPut {
                name: Some("panic".into()),
                ..labels::LabelPut::default()
            },
        )
        .unwrap();
    assert_eq!(
        store.issue(&repo(), issue.number).unwrap().labels,
        ["panic"],
        "a rename missed a thread that spelled the label otherwise"
    );
}

#[test]
fn hooks_are_kept_by_incarnation_in_the_system_repo_across_a_restart() {
    let fx = Fixture::new();
    let store = open_with_system(&fx, &system_dir(&fx));
    let put = |url: &str| webhooks::HookPut {
        url: Some(url.into()),
        secret: Some("s3cret".into()),
        events: Some(vec!["push".into(), "issues".into()]),
        ..webhooks::HookPut::default()
    };
    let made = store
        .create_hook(("inc-a", "ann/repo"), put("https://ci.example.org/a"))
        .unwrap();
    assert_ne!(made.serial, 0);
    assert_eq!(
        (made.active, made.content_type),
        (true, webhooks::HookContent::Json)
    );
    // Another incarnation of the name sees none of them.
    assert!(store.hooks("inc-b").unwrap().is_empty());
    assert!(store.hook("inc-b", made.serial).is_err());
    let unknown = webhooks::HookPut {
        events: Some(vec!["release".into()]),
        ..put("https://x.example.org")
    };
    let refused = store
        .create_hook(("inc-a", "ann/repo"), unknown)
        .unwrap_err();
    assert!(refused.to_string().contains("release"), "{refused}");
    let edited = store
        .edit_hook(
            "inc-a",
            made.serial,
            webhooks::HookPut {
                active: Some(false),
                ..webhooks::HookPut::default()
            },
        )
        .unwrap();
    assert_eq!((edited.active, edited.secret.as_str()), (false, "s3cret"));
    assert!(store.flush(Duration::from_secs(10)));
    drop(store);
    let store = open_with_system(&fx, &system_dir(&fx));
    let kept = store.hooks("inc-a").unwrap();
    assert_eq!(kept.len(), 1);
    assert_eq!((kept[0].serial, kept[0].active), (made.serial, false));
    store.delete_hook("inc-a", made.serial).unwrap();
    assert!(store.hooks("inc-a").unwrap().is_empty());
    // At most MAX_HOOKS live ones a repo.
    for n in 0..webhooks::MAX_HOOKS {
        store
            .create_hook(
                ("inc-a", "ann/repo"),
                put(&format!("https://ci.example.org/{n}")),
            )
            .unwrap();
    }
    assert!(
        store
            .create_hook(("inc-a", "ann/repo"), put("https://one.more"))
            .is_err()
    );
}

/// The index of one repo of the store, part by part ([`index::parts`]).
pub(crate) fn index_parts(store: &MetaStore, name: &str) -> Vec<String> {
    let meta = store.inner.repos.read().get(name).cloned().unwrap();
    index::parts::parts(&meta.state.lock().index)
}

/// A bare repo made at `dir` with a new incarnation, as vole makes one.
fn make_incarnation(dir: &Path) -> vole_git::repos::Incarnation {
    std::fs::create_dir_all(dir).unwrap();
    git(dir, &["init", "--bare", "-q"]);
    let incarnation = vole_git::repos::Incarnation::mint();
    incarnation.write_new(dir).unwrap();
    incarnation
}

#[test]
fn an_index_read_in_the_background_or_from_the_persisted_index_is_the_one_read_from_git_after_writes_a_crash_a_compaction_and_a_repo_delete()
 {
    let fx = Fixture::new();
    // A second repo, deleted and made again under its name in the
    // log-only part: the new one must hold none of the old one's writes.
    const AGAIN: &str = "ann/again";
    let again = RepoName::parse(AGAIN).unwrap();
    let again_dir = fx.repos_dir.join("ann/again.git");
    let first = make_incarnation(&again_dir);
    let create = |store: &MetaStore, repo: &RepoName, title: &str, labels: &[&str]| {
        let new = NewIssue {
            title: title.into(),
            body: format!("the body of {title}"),
            labels: labels.iter().map(|l| l.to_string()).collect(),
        };
        store.create_issue(repo, new, "ann").unwrap()
    };
    let issue =
        |store: &MetaStore, title: &str, labels: &[&str]| create(store, &repo(), title, labels);
    let comment = |store: &MetaStore, number: u64, body: &str| {
        let new = requests::NewComment { body: body.into() };
        store
            .comment(&repo(), ThreadKind::Issue, number, new, "bob")
            .unwrap()
    };
    let edit = |store: &MetaStore, number: u64, state: IssueState| {
        let patch = IssuePatch {
            version: None,
            title: Some(format!("edited {number}")),
            body: None,
            state: Some(state),
            labels: Some(vec!["triaged".into()]),
        };
        store.edit_issue(&repo(), number, patch).unwrap();
    };
    {
        // Folded: issues on many shards, labels, comments, an ACL kept
        // in the repo's own shards, edits and a deleted comment.
        let (_log, store) = fx.open(quick());
        for i in 0..80 {
            let labels: &[&str] = if i % 3 == 0 { &["bug"] } else { &[] };
            let made = issue(&store, &format!("folded {i}"), labels);
            if i % 4 == 0 {
                comment(&store, made.number, &format!("on {i}"));
            }
        }
        let gone = comment(&store, 2, "to delete");
        store
            .delete_comment(&repo(), ThreadKind::Issue, 2, &gone.id, None)
            .unwrap();
        edit(&store, 5, IssueState::Closed);
        store.put_acl(&repo(), members_acl(0)).unwrap();
        for i in 0..12 {
            create(
                &store,
                &again,
                &format!("first incarnation, folded {i}"),
                &["old"],
            );
        }
        // Long bodies, which the persisted index leaves in their blobs.
        comment(
            &store,
            3,
            &"a long comment folded before the stop ".repeat(4),
        );
        let patch = IssuePatch {
            version: None,
            title: None,
            body: Some("a long body folded before the stop ".repeat(4)),
            state: None,
            labels: None,
        };
        store.edit_issue(&repo(), 13, patch).unwrap();
        // A stop: the persisted index is written with these shard tips.
        store.close(Duration::from_secs(10));
        assert!(fx.log_dir.join(persisted::FILE_NAME).exists());
    }
    {
        // Folded after the persisted index was written: shard tips it
        // does not hold (an edit with a long body, a new comment).
        let (log, store) = fx.open(only_on_flush());
        let patch = IssuePatch {
            version: None,
            title: None,
            body: Some("a body longer than the index keeps, folded after the stop ".repeat(3)),
            state: None,
            labels: None,
        };
        store.edit_issue(&repo(), 11, patch).unwrap();
        comment(&store, 12, "folded after the stop");
        assert!(store.flush(Duration::from_secs(10)));
        // Only in the log (the store goes as in a crash): new issues,
        // edits of folded ones, comments; the folded records compacted away.
        for i in 0..30 {
            issue(&store, &format!("logged {i}"), &["bug", "later"]);
        }
        edit(&store, 7, IssueState::Closed);
        edit(&store, 90, IssueState::Closed);
        comment(&store, 9, "logged comment");
        // On a shard read at open, so replayed there: settings.
        let settings = requests::SettingsPut {
            version: 0,
            description: "logged settings".into(),
            default_branch: "trunk".into(),
            protected_branches: vec!["trunk".into()],
            protected_admins_only: false,
            site: Default::default(),
            site_domains: Vec::new(),
            merge: Default::default(),
        };
        store.put_settings(&repo(), settings).unwrap();
        // The second repo: writes of its first incarnation left in the log
        // only, then deleted (as `vole repo delete` moves it out and
        // forgets it) and made again, whose writes are only logged too.
        for i in 0..6 {
            create(
                &store,
                &again,
                &format!("first incarnation, logged {i}"),
                &["old"],
            );
        }
        std::fs::remove_dir_all(&again_dir).unwrap();
        store.forget_repo(&again);
        let second = make_incarnation(&again_dir);
        assert_ne!(first.id(), second.id());
        for i in 0..4 {
            create(&store, &again, &format!("second incarnation {i}"), &["new"]);
        }
        let report = store.compact_log(0).unwrap();
        assert!(report.base_seq > 1, "nothing was compacted: {report:?}");
        assert!(store.stats().pending > 30, "the writes were folded");
        drop(store);
        drop(log);
    }
    let listed: &[(&str, &Path)] = &[(AGAIN, &again_dir)];
    // Rebuilt from git alone.
    let at_open = {
        let options = StoreOptions {
            persist_index: false,
            ..only_on_flush()
        };
        let (_log, store) = fx.open_repos(options, None, listed);
        assert_eq!(store.stats().docs_from_file, 0);
        [index_parts(&store, REPO), index_parts(&store, AGAIN)]
    };
    let same = |read: &[Vec<String>; 2], how: &str| {
        for (name, (at_open, read)) in [REPO, AGAIN].iter().zip(at_open.iter().zip(read)) {
            for (i, (open, later)) in at_open.iter().zip(read).enumerate() {
                assert_eq!(
                    open, later,
                    "{name}: part {i} of the index differs between a read from git at open and {how}"
                );
            }
            assert_eq!(
                at_open.len(),
                read.len(),
                "{name}: the indexes hold different numbers of documents ({how})"
            );
        }
    };
    {
        // In the background, the shard trees the persisted index holds
        // from it, the others from git; the file is written again.
        let (_log, store) = fx.open_repos(
            StoreOptions {
                read_at_open: Some(Duration::ZERO),
                ..only_on_flush()
            },
            None,
            listed,
        );
        let meta = store.inner.repos.read().get(REPO).cloned().unwrap();
        // What the open read is answered before the rest is read.
        assert_eq!(store.settings(&repo()).unwrap().default_branch, "trunk");
        assert!(store.wait_until_read());
        assert!(meta.loading.is_whole());
        let stats = store.stats();
        assert!(
            stats.docs_from_file > 50 && stats.docs_from_git > 0,
            "the read took {} documents from the persisted index and {} from git: \
             it should take the shard trees it holds from it, and the moved ones from git",
            stats.docs_from_file,
            stats.docs_from_git
        );
        same(
            &[index_parts(&store, REPO), index_parts(&store, AGAIN)],
            "one in the background, partly from the persisted index",
        );
    }
    // The file the background read wrote holds every shard tree.
    let (_log, store) = fx.open_repos(only_on_flush(), None, listed);
    let stats = store.stats();
    assert_eq!(
        stats.docs_from_git, 0,
        "a shard tree was read from git although the persisted index written by the last start holds every tip"
    );
    same(
        &[index_parts(&store, REPO), index_parts(&store, AGAIN)],
        "one from the persisted index alone",
    );
    // The repo made again holds its own writes, none of the deleted one's.
    let titles: Vec<String> = store
        .list_issues(&again, &Filter::default(), Pagination::new(1, 100).unwrap())
        .unwrap()
        .items
        .into_iter()
        .map(|issue| issue.title.clone())
        .collect();
    assert_eq!(
        titles.len(),
        4,
        "the repo made again under the name holds {titles:?}, not its own 4 issues"
    );
    assert!(
        titles.iter().all(|t| t.starts_with("second incarnation")),
        "a write of the deleted repo of the name is in the new one's index: {titles:?}"
    );
    // Not two empty indexes: every issue and comment is there.
    let all = store
        .list_issues(
            &repo(),
            &Filter::default(),
            Pagination::new(1, 100).unwrap(),
        )
        .unwrap();
    assert_eq!(all.total, 110);
    assert_eq!(store.issue(&repo(), 90).unwrap().state, IssueState::Closed);
    let page = Pagination::new(1, 10).unwrap();
    let comments = store.comments(&repo(), ThreadKind::Issue, 9, page).unwrap();
    assert_eq!(
        comments.total, 2,
        "issue #9: its folded comment and its logged one"
    );
}

#[test]
fn a_repo_forgotten_while_it_is_read_in_the_background_is_no_repo() {
    let fx = Fixture::new();
    {
        let (_log, store) = fx.open(quick());
        create_issues(&store, "folded ", 20);
        assert!(store.flush(Duration::from_secs(10)));
    }
    // Read as an open with a budget leaves it, with no loader to finish
    // it: only the forgetting ends the read.
    let (meta, _) = recovery::load_repo(
        REPO,
        &fx.git_dir,
        shard::SHARDS,
        true,
        &bodies::BodyCache::new(1 << 20),
        &mut persisted::Persisting::default(),
    )
    .unwrap();
    assert!(
        !meta.loading.is_done(),
        "nothing was left to the background"
    );
    meta.forget_loading();
    let waited = meta.loading.wait(REPO, Some(Duration::from_secs(1)));
    assert!(
        matches!(waited, Err(MetaError::NoRepo(ref name)) if name == REPO),
        "a caller waiting for a deleted repo's read got {waited:?}, not no such repo"
    );
    // And a store's delete ends it the same way, its waiters told so.
    let (_log, store) = fx.open(StoreOptions {
        read_at_open: Some(Duration::ZERO),
        ..quick()
    });
    store.settings(&repo()).unwrap();
    store.forget_repo(&repo());
    assert!(
        store.wait_until_read(),
        "a delete during the read hung or stopped it"
    );
}

#[test]
fn long_bodies_are_left_in_git_once_folded_and_every_reader_reads_them_back_whole() {
    let fx = Fixture::new();
    let long = |what: &str| format!("{what}: {}", "a needle in a long body, ".repeat(20));
    let (_log, store) = fx.open(quick());
    let new_issue = |title: &str, body: String| NewIssue {
        title: title.into(),
        body,
        labels: Vec::new(),
    };
    let long_one = store
        .create_issue(&repo(), new_issue("long", long("issue")), "ann")
        .unwrap();
    let short_one = store
        .create_issue(&repo(), new_issue("short", "short".into()), "ann")
        .unwrap();
    let said = store
        .comment(
            &repo(),
            ThreadKind::Issue,
            long_one.number,
            requests::NewComment {
                body: long("comment"),
            },
            "bob",
        )
        .unwrap();
    let held = |number: u64| {
        let meta = store.inner.repos.read().get(REPO).cloned().unwrap();
        let state = meta.state.lock();
        let issue = state.index.issue(number).unwrap();
        let comment = state.index.comment(&long_one.id, &said.id).unwrap();
        (
            issue.held_body().map(str::to_string),
            issue.body_blob().is_some(),
            comment.held_body().is_some(),
        )
    };
    // Not folded yet: held whole.
    assert_eq!(
        held(long_one.number),
        (Some(long_one.body.clone()), false, true)
    );
    assert!(store.flush(Duration::from_secs(10)));
    // Folded: the long bodies are left in their blobs, the short one kept.
    assert_eq!(
        held(long_one.number),
        (None, true, false),
        "the index still holds a long body its fold wrote to git"
    );
    assert_eq!(held(short_one.number).0.as_deref(), Some("short"));
    // Every reader reads them back whole.
    let page = Pagination::new(1, 10).unwrap();
    assert_eq!(
        store.issue(&repo(), long_one.number).unwrap().body,
        long_one.body,
        "a body left in git was not read back"
    );
    // The reader's repo handle: kept while fresh, let go at a gc's word.
    let docs = {
        let meta = store.inner.repos.read().get(REPO).cloned().unwrap();
        meta.state.lock().docs.clone()
    };
    assert!(docs.holds_handle(), "a body read from git opened no handle");
    store.release_idle_handles();
    assert!(docs.holds_handle(), "a handle opened just now was let go");
    store.release_handles(&repo());
    assert!(
        !docs.holds_handle(),
        "the handle was kept past a gc's release"
    );
    let listed = store
        .list_issues(&repo(), &Filter::default(), page)
        .unwrap();
    assert!(listed.items.iter().any(|i| i.body == long_one.body));
    // A list that shows no body reads none.
    let rows = store
        .list_issue_rows(&repo(), &Filter::default(), page)
        .unwrap();
    assert_eq!(rows.total, listed.total);
    assert!(
        rows.items.iter().all(|i| i.body.is_empty()),
        "a list's rows carry bodies"
    );
    let comments = store
        .comments(&repo(), ThreadKind::Issue, long_one.number, page)
        .unwrap();
    assert_eq!(comments.items[0].body, said.body);
    let one = store
        .thread_comment(&repo(), ThreadKind::Issue, long_one.number, &said.id)
        .unwrap();
    assert_eq!(one.body, said.body);
    // A text filter finds a word only the body has.
    let query = index::ThreadQuery {
        text: Some("NEEDLE in a long".into()),
        state: index::ThreadState::All,
        ..Default::default()
    };
    let found = store.list_threads(&repo(), &query, page).unwrap();
    assert_eq!(
        found.items.iter().map(|t| t.number()).collect::<Vec<_>>(),
        [long_one.number],
        "a body left in git was not searched"
    );
    // An edit of the title (a read, a change, a write back) keeps the body.
    let patch = IssuePatch {
        version: None,
        title: Some("renamed".into()),
        body: None,
        state: None,
        labels: None,
    };
    let edited = store.edit_issue(&repo(), long_one.number, patch).unwrap();
    assert_eq!(edited.body, long_one.body);
    // A long comment deleted once folded: its emptied body is held.
    let gone = store
        .comment(
            &repo(),
            ThreadKind::Issue,
            short_one.number,
            requests::NewComment {
                body: long("to delete"),
            },
            "bob",
        )
        .unwrap();
    assert!(store.flush(Duration::from_secs(10)));
    store
        .delete_comment(&repo(), ThreadKind::Issue, short_one.number, &gone.id, None)
        .unwrap();
    assert!(store.flush(Duration::from_secs(10)));
    assert_eq!(
        store.issue(&repo(), long_one.number).unwrap().body,
        long_one.body
    );
    // The index the folds left is the one read from the trees at open and
    // the one read in the background, entity by entity: the same bodies
    // held, the same left in the same blobs.
    let live = index_parts(&store, REPO);
    drop(store);
    for read_at_open in [None, Some(Duration::ZERO)] {
        let (_log, reopened) = fx.open(StoreOptions {
            read_at_open,
            ..quick()
        });
        assert!(reopened.wait_until_read());
        let read = index_parts(&reopened, REPO);
        assert_eq!(live.len(), read.len());
        for (i, (a, b)) in live.iter().zip(&read).enumerate() {
            assert_eq!(
                a, b,
                "part {i} of the index differs between the live store and a read ({read_at_open:?})"
            );
        }
        assert_eq!(
            reopened.issue(&repo(), long_one.number).unwrap().body,
            long_one.body
        );
        // A new store's first read opened a handle; one older than the
        // age asked for is let go.
        let docs = {
            let meta = reopened.inner.repos.read().get(REPO).cloned().unwrap();
            meta.state.lock().docs.clone()
        };
        assert!(docs.holds_handle(), "a read from git opened no handle");
        std::thread::sleep(Duration::from_millis(20));
        docs.release_older_than(Duration::from_millis(10));
        assert!(!docs.holds_handle(), "a handle older than its age was kept");
    }
}

#[test]
fn a_long_body_folded_before_the_background_read_applies_its_record_is_left_in_git() {
    let fx = Fixture::new();
    let long = |i: usize| format!("logged {i}: {}", "a long body, ".repeat(10));
    {
        // Folded trees for the background read to go through first.
        let (_log, store) = fx.open(quick());
        create_issues(&store, "folded ", 40);
        assert!(store.flush(Duration::from_secs(10)));
    }
    let logged: Vec<u64> = {
        // Only in the log, the store gone as in a crash.
        let (log, store) = fx.open(only_on_flush());
        let made = (0..24)
            .map(|i| {
                let new = NewIssue {
                    title: format!("logged {i}"),
                    body: long(i),
                    labels: Vec::new(),
                };
                store.create_issue(&repo(), new, "ann").unwrap().number
            })
            .collect();
        drop(store);
        drop(log);
        made
    };
    // The background read held before its first step until the fold has
    // settled the requeued records.
    let gate = Arc::new((Mutex::new(false), std::sync::Condvar::new()));
    let hook: LoadHook = {
        let gate = gate.clone();
        Arc::new(move || {
            let (open, opened) = &*gate;
            let mut open = open.lock().unwrap();
            while !*open {
                open = opened.wait(open).unwrap();
            }
        })
    };
    let (_log, store) = fx.open(StoreOptions {
        read_at_open: Some(Duration::ZERO),
        load_hook: Some(hook),
        ..only_on_flush()
    });
    let meta = store.inner.repos.read().get(REPO).cloned().unwrap();
    let waiting = meta.loading.left_mut().replays.len();
    assert!(
        waiting > 0,
        "no logged record waits for the background read: the case is not made"
    );
    assert!(
        store.flush(Duration::from_secs(10)),
        "the fold did not settle"
    );
    assert!(!meta.loading.is_done(), "the read ended before the fold");
    *gate.0.lock().unwrap() = true;
    gate.1.notify_all();
    assert!(store.wait_until_read());
    let state = meta.state.lock();
    for number in &logged {
        let issue = state.index.issue(*number).unwrap();
        assert!(
            issue.held_body().is_none() && issue.body_blob().is_some(),
            "issue #{number}, folded before the background read applied its record, holds \
             its body in memory ({waiting} records waited)"
        );
    }
    drop(state);
    for (i, number) in logged.iter().enumerate() {
        assert_eq!(store.issue(&repo(), *number).unwrap().body, long(i));
    }
}
