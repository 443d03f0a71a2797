//! Benchmark harness for the metadata store (`crates/meta`): entity writes
//! as commits on CAS-moved refs, vole's store against the ref-CAS spike's
//! own method (one `git` process per step) on the same machine.
//!
//! `cargo run --release --example ref-cas -- -n 2000,20000,200000 [--modes m1,m2] [--writers W] [--rounds R] [--settle-secs S]`
//!
//! Modes: `shared-naive`, `sharded-naive`, `shared-batched`,
//! `sharded-batched` (vole's real store with 1 or 256 shards and 1 or 64
//! writes per fold commit; acknowledged once the log is durable) and
//! `git-subprocess` (256 shards, 8 batchers of 64, hash-object / mktree /
//! commit-tree / update-ref with the old value, as the spike did).
//!
//! One line per run: `mode= n= writers= entities_per_sec= ack_per_sec=
//! p50_ms= p99_ms= lost=`, after a verification pass that reads every
//! shard ref's tree and finds every acknowledged entity; a run with a lost
//! write exits non-zero. See README.md beside this file for the results.

#![allow(clippy::unwrap_used)] // test and benchmark code: a failed unwrap is a failed run
#![allow(unsafe_code)] // libc reads of CPU time, each with a `// SAFETY:` line

use std::collections::{HashMap, HashSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use vole_git::repos::RepoName;
use vole_log::Log;
use vole_meta::MetaWrite;
use vole_meta::{MetaStore, NewIssue, StoreOptions};

/// The allocator the `vole` binary runs the store with (see `src/main.rs`):
/// the harness measures the store in-process, so it must not fall back to
/// glibc's malloc, which took 17% of a 20k run's CPU.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[path = "../common.rs"]
mod common;
use common::{arg, arg_text, git, median, sh};

const REPO: &str = "bench/ref-cas";
/// The spike's method is capped here (one process per step is slow).
const SUBPROCESS_CAP: usize = 20_000;

struct Outcome {
    acked: Vec<String>,
    /// CPU seconds (this process and its waited-for children) from the
    /// first write until everything was folded.
    cpu: f64,
    latencies_ms: Vec<f64>,
    all_acked: Duration,
    folded: Duration,
    extra: String,
}

/// CPU seconds used so far by this process and its waited-for children
/// (the `git` processes of the subprocess mode), user and system.
fn cpu_seconds() -> f64 {
    let used = |who| {
        // SAFETY: rusage is plain integers; all zeros is a valid value.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: getrusage only writes the struct it is given.
        unsafe { libc::getrusage(who, &mut usage) };
        let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
        secs(usage.ru_utime) + secs(usage.ru_stime)
    };
    used(libc::RUSAGE_SELF) + used(libc::RUSAGE_CHILDREN)
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

/// A ~450-byte body, like the spike's entity documents.
fn body(i: usize) -> String {
    format!("entity {i}: {}", "lorem ipsum dolor sit amet ".repeat(9))
}

fn fresh_repo(root: &Path) -> PathBuf {
    let git_dir = root.join("repos/bench/ref-cas.git");
    std::fs::create_dir_all(&git_dir).unwrap();
    sh(Command::new("git")
        .arg("--git-dir")
        .arg(&git_dir)
        .args(["init", "--bare", "-q"]));
    git_dir
}

fn vole_mode(root: &Path, n: usize, writers: usize, shards: u16, batch: usize) -> Outcome {
    let defaults = StoreOptions::default();
    let interval_ms = arg(
        "--fold-interval-ms",
        defaults.fold_interval.as_millis() as u64,
    );
    let git_dir = fresh_repo(root);
    let log_dir = root.join("log");
    std::fs::create_dir_all(&log_dir).unwrap();
    let (log, _) = Log::<MetaWrite>::open(&log_dir, |_| {}).unwrap();
    let store = MetaStore::open(
        Arc::new(log),
        &root.join("repos"),
        &[(REPO.to_string(), git_dir)],
        Vec::new(),
        vole_git::Git::locate(None).ok(),
        StoreOptions {
            shards,
            fold_batch: batch,
            fold_interval: Duration::from_millis(interval_ms),
            ..defaults
        },
    )
    .unwrap();
    let store = Arc::new(store);
    let next = Arc::new(AtomicUsize::new(0));
    let cpu_started = cpu_seconds();
    let started = Instant::now();
    let handles: Vec<_> = (0..writers)
        .map(|_| {
            let store = store.clone();
            let next = next.clone();
            std::thread::spawn(move || {
                let repo = RepoName::parse(REPO).unwrap();
                let mut acked = Vec::with_capacity(n / writers + 64);
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= n {
                        return acked;
                    }
                    let t = Instant::now();
                    let issue = store
                        .create_issue(
                            &repo,
                            NewIssue {
                                title: format!("issue {i}"),
                                body: body(i),
                                labels: vec!["bench".into()],
                            },
                            "bench",
                        )
                        .expect("write acknowledged");
                    acked.push((issue.id, t.elapsed().as_secs_f64() * 1e3));
                }
            })
        })
        .collect();
    let mut acked = Vec::with_capacity(n);
    let mut latencies = Vec::with_capacity(n);
    for handle in handles {
        for (id, ms) in handle.join().unwrap() {
            acked.push(id);
            latencies.push(ms);
        }
    }
    let all_acked = started.elapsed();
    assert!(
        store.flush(Duration::from_secs(600)),
        "the store did not fold within 10 minutes"
    );
    let folded = started.elapsed();
    let cpu = cpu_seconds() - cpu_started;
    let stats = store.stats();
    // Index rebuild at open: drop the store and open it again on the same
    // log and repo (every entity read back from the shard trees).
    drop(store);
    let (log, _) = Log::<MetaWrite>::open(&log_dir, |_| {}).unwrap();
    let reopened = MetaStore::open(
        Arc::new(log),
        &root.join("repos"),
        &[(REPO.to_string(), root.join("repos/bench/ref-cas.git"))],
        Vec::new(),
        None,
        StoreOptions::default(),
    )
    .unwrap();
    let rebuilt = reopened.stats();
    assert_eq!(rebuilt.entities, n, "the reopened index lost entities");
    Outcome {
        acked,
        cpu,
        latencies_ms: latencies,
        all_acked,
        folded,
        extra: format!(
            "fold_cycles={} fold_commits={} fold_objects={} cas_retries={} repacks={} fold_ms=build:{:.0},pack:{:.0},refs:{:.0},sync:{:.0} index_rebuild_ms={:.0}",
            stats.fold_cycles,
            stats.fold_commits,
            stats.fold_objects,
            stats.foreign_moves,
            stats.repacks,
            stats.fold_build_ms,
            stats.fold_pack_ms,
            stats.fold_refs_ms,
            stats.fold_sync_ms,
            rebuilt.index_rebuild_ms
        ),
    }
}

/// The spike's method: writers queue entities per shard; 8 batchers each
/// take up to 64 of one shard and run one `git` per step, moving the ref
/// with `update-ref <ref> <new> <old>` and retrying a lost race.
fn subprocess_mode(root: &Path, n: usize, writers: usize) -> Outcome {
    let git_dir = fresh_repo(root);
    let files = root.join("blobs");
    std::fs::create_dir_all(&files).unwrap();
    type Queued = (String, Instant);
    let queues: Arc<Vec<Mutex<Vec<Queued>>>> =
        Arc::new((0..256).map(|_| Mutex::new(Vec::new())).collect());
    let acked: Arc<Mutex<Vec<(String, f64)>>> = Arc::new(Mutex::new(Vec::with_capacity(n)));
    let produced = Arc::new(AtomicUsize::new(0));
    let retries = Arc::new(AtomicUsize::new(0));
    let commits = Arc::new(AtomicUsize::new(0));
    let cpu_started = cpu_seconds();
    let started = Instant::now();
    let producers: Vec<_> = (0..writers)
        .map(|_| {
            let queues = queues.clone();
            let produced = produced.clone();
            std::thread::spawn(move || {
                loop {
                    let i = produced.fetch_add(1, Ordering::Relaxed);
                    if i >= n {
                        return;
                    }
                    let id = ulid::Ulid::new().to_string();
                    let shard = vole_meta::shard::shard_of(&id, 256) as usize;
                    queues[shard].lock().unwrap().push((id, Instant::now()));
                }
            })
        })
        .collect();
    let batchers: Vec<_> = (0..8)
        .map(|b| {
            let queues = queues.clone();
            let acked = acked.clone();
            let retries = retries.clone();
            let commits = commits.clone();
            let git_dir = git_dir.clone();
            let files = files.join(format!("b{b}"));
            std::fs::create_dir_all(&files).unwrap();
            std::thread::spawn(move || {
                // One `git` process per step, in the bare repo.
                let run = |args: &[&str], stdin: Option<&str>| -> (bool, String) {
                    let mut child = git(&git_dir)
                        .args(args)
                        .stdin(Stdio::piped())
                        .stdout(Stdio::piped())
                        .stderr(Stdio::null())
                        .spawn()
                        .expect("spawn git");
                    let mut input = child.stdin.take().unwrap();
                    if let Some(text) = stdin {
                        input.write_all(text.as_bytes()).unwrap();
                    }
                    drop(input);
                    let out = child.wait_with_output().unwrap();
                    (
                        out.status.success(),
                        String::from_utf8_lossy(&out.stdout).trim().to_string(),
                    )
                };
                let mut idle_since = Instant::now();
                let mut cursor = b * 32;
                loop {
                    // Take up to 64 queued entities of the next shard with any.
                    let mut taken = None;
                    for step in 0..256 {
                        let shard = (cursor + step) % 256;
                        let mut queue = queues[shard].lock().unwrap();
                        if !queue.is_empty() {
                            let k = queue.len().min(64);
                            taken = Some((shard, queue.drain(..k).collect::<Vec<_>>()));
                            cursor = shard + 1;
                            break;
                        }
                    }
                    let Some((shard, batch)) = taken else {
                        if acked.lock().unwrap().len() >= n
                            || idle_since.elapsed() > Duration::from_secs(5)
                        {
                            return;
                        }
                        std::thread::sleep(Duration::from_millis(1));
                        continue;
                    };
                    idle_since = Instant::now();
                    let paths: Vec<String> = batch
                        .iter()
                        .enumerate()
                        .map(|(k, (id, _))| {
                            let path = files.join(format!("{k}.json"));
                            std::fs::write(&path, body(id.len() + k)).unwrap();
                            path.display().to_string()
                        })
                        .collect();
                    let name = format!("refs/meta/shards/{shard:02x}");
                    for attempt in 0..200 {
                        let (exists, old) = run(&["rev-parse", "--verify", "-q", &name], None);
                        let mut listing = if exists {
                            run(&["ls-tree", &old], None).1
                        } else {
                            String::new()
                        };
                        let (_, blobs) = run(
                            &["hash-object", "-w", "--stdin-paths"],
                            Some(&paths.join("\n")),
                        );
                        for ((id, _), blob) in batch.iter().zip(blobs.lines()) {
                            if !listing.is_empty() {
                                listing.push('\n');
                            }
                            listing.push_str(&format!("100644 blob {blob}\t{id}.json"));
                        }
                        let (_, tree) = run(&["mktree"], Some(&(listing + "\n")));
                        let mut commit_args = vec!["commit-tree", tree.as_str(), "-m", "batch"];
                        if exists {
                            commit_args.extend(["-p", old.as_str()]);
                        }
                        let (_, commit) = run(&commit_args, None);
                        let expected = if exists { old.clone() } else { "0".repeat(40) };
                        let (moved, _) = run(&["update-ref", &name, &commit, &expected], None);
                        if moved {
                            commits.fetch_add(1, Ordering::Relaxed);
                            let now = Instant::now();
                            let mut acked = acked.lock().unwrap();
                            for (id, queued) in &batch {
                                acked.push((
                                    id.clone(),
                                    now.duration_since(*queued).as_secs_f64() * 1e3,
                                ));
                            }
                            break;
                        }
                        retries.fetch_add(1, Ordering::Relaxed);
                        assert!(attempt < 199, "update-ref kept losing on {name}");
                        std::thread::sleep(Duration::from_micros(
                            200 + (attempt as u64 * 97) % 800,
                        ));
                    }
                }
            })
        })
        .collect();
    for p in producers {
        p.join().unwrap();
    }
    for b in batchers {
        b.join().unwrap();
    }
    let all_acked = started.elapsed();
    let cpu = cpu_seconds() - cpu_started;
    let acked = Arc::try_unwrap(acked).unwrap().into_inner().unwrap();
    Outcome {
        cpu,
        latencies_ms: acked.iter().map(|(_, ms)| *ms).collect(),
        acked: acked.into_iter().map(|(id, _)| id).collect(),
        all_acked,
        // Acknowledged here means its ref moved: folded already.
        folded: all_acked,
        extra: format!(
            "commits={} cas_retries={}",
            commits.load(Ordering::Relaxed),
            retries.load(Ordering::Relaxed)
        ),
    }
}

/// Reads every shard ref's tree (in-process, no blob reads) and returns
/// the entity ids found, with how often each occurs.
fn entities_in_refs(git_dir: &Path) -> HashMap<String, usize> {
    let repo = vole_git::open_gix(git_dir).expect("open repo");
    let mut found: HashMap<String, usize> = HashMap::new();
    // Each tree is decoded once: a directory holding `issue.json` is one
    // entity (vole: issues/<bucket>/<id>/issue.json), any other is walked.
    type Entries = Vec<(bool, String, gix::ObjectId)>;
    fn entries(repo: &gix::Repository, tree: gix::ObjectId) -> Entries {
        repo.find_tree(tree)
            .expect("tree")
            .decode()
            .expect("decode")
            .entries
            .iter()
            .map(|e| (e.mode.is_tree(), e.filename.to_string(), e.oid.to_owned()))
            .collect()
    }
    fn walk(repo: &gix::Repository, tree: Entries, found: &mut HashMap<String, usize>) {
        for (is_tree, name, id) in tree {
            if is_tree {
                let child = entries(repo, id);
                if child.iter().any(|(t, n, _)| !t && n == "issue.json") {
                    *found.entry(name).or_default() += 1;
                } else {
                    walk(repo, child, found);
                }
            } else if let Some(id) = name.strip_suffix(".json") {
                // the spike's layout: <id>.json at the shard root
                *found.entry(id.to_string()).or_default() += 1;
            }
        }
    }
    for shard in 0..=255u8 {
        let name = format!("refs/meta/shards/{shard:02x}");
        let Some(reference) = repo.try_find_reference(name.as_str()).expect("ref") else {
            continue;
        };
        let commit = reference.into_fully_peeled_id().expect("peel").detach();
        let tree = repo
            .find_commit(commit)
            .expect("commit")
            .tree_id()
            .expect("tree")
            .detach();
        walk(&repo, entries(&repo, tree), &mut found);
    }
    found
}

fn main() {
    let sizes: Vec<usize> = arg_text("-n")
        .unwrap_or_else(|| "2000".into())
        .split(',')
        .map(|s| s.trim().parse().expect("-n takes numbers, e.g. 2000,20000"))
        .collect();
    let modes: Vec<String> = arg_text("--modes")
        .unwrap_or_else(|| {
            "shared-naive,sharded-naive,shared-batched,sharded-batched,git-subprocess".into()
        })
        .split(',')
        .map(str::to_string)
        .collect();
    let writers = arg("--writers", 32) as usize;
    let rounds = arg("--rounds", 1).max(1) as usize;
    // Seconds to wait before each run, so the inodes the previous run
    // deleted (git one temporary file per loose object, vole one per ref
    // move) age out of ext4's ~30 s "recently deleted" window (see `dirs`).
    let settle = Duration::from_secs(arg("--settle-secs", 0));
    let tmp_root = std::env::temp_dir();
    println!(
        "# ref-cas: sizes={sizes:?} modes={modes:?} writers={writers} rounds={rounds} settle_secs={} tmp={} cpus={}",
        settle.as_secs(),
        tmp_root.display(),
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    // Every run's directory is kept until the end: on ext4 without a
    // journal, each file created within ~30 s of a deletion in its block
    // group scans past every recently deleted inode, so removing one run's
    // tens of thousands of files would tax the next run's file creations.
    let mut dirs = Vec::new();
    // Rates per (mode, n), one per round, in round order.
    let mut rates: HashMap<(String, usize), Vec<f64>> = HashMap::new();
    let mut failed = false;
    for round in 0..rounds {
        // Alternate the order of modes so neither always runs first.
        let mut order = modes.clone();
        if round % 2 == 1 {
            order.reverse();
        }
        for &n_asked in &sizes {
            for mode in &order {
                // The naive and unsharded modes rewrite a tree that grows with
                // n on every commit (quadratic); they cap their own n.
                let cap = match mode.as_str() {
                    "shared-naive" => 2_000,
                    "sharded-naive" | "shared-batched" | "git-subprocess" => SUBPROCESS_CAP,
                    "sharded-batched" => usize::MAX,
                    other => panic!("unknown mode {other}"),
                };
                let n = n_asked.min(cap);
                std::thread::sleep(settle);
                let dir = tempfile::tempdir_in(&tmp_root).unwrap();
                let outcome = match mode.as_str() {
                    "shared-naive" => vole_mode(dir.path(), n, writers, 1, 1),
                    "sharded-naive" => vole_mode(dir.path(), n, writers, 256, 1),
                    "shared-batched" => vole_mode(dir.path(), n, writers, 1, 64),
                    "sharded-batched" => vole_mode(dir.path(), n, writers, 256, 64),
                    _ => subprocess_mode(dir.path(), n, writers),
                };
                // Verification: every acknowledged entity, in some ref, once.
                // Its time counts: end to end is first write until every write
                // is folded and verified.
                let verify_started = Instant::now();
                let found = entities_in_refs(&dir.path().join("repos/bench/ref-cas.git"));
                let acked: HashSet<&String> = outcome.acked.iter().collect();
                let lost = acked.iter().filter(|id| !found.contains_key(**id)).count();
                let twice = found.values().filter(|c| **c > 1).count();
                let end_to_end = outcome.folded + verify_started.elapsed();
                let mut latencies = outcome.latencies_ms.clone();
                latencies.sort_by(|a, b| a.partial_cmp(b).unwrap());
                let entities_per_sec = outcome.acked.len() as f64 / end_to_end.as_secs_f64();
                println!(
                    "mode={mode} n={n} writers={writers} entities_per_sec={entities_per_sec:.0} ack_per_sec={:.0} p50_ms={:.2} p99_ms={:.2} lost={lost} twice={twice} acked={} found={} round={round} cpu_us_per_write={:.1} tail_ms=fold:{:.0},verify:{:.0}{} {}",
                    outcome.acked.len() as f64 / outcome.all_acked.as_secs_f64(),
                    percentile(&latencies, 0.50),
                    percentile(&latencies, 0.99),
                    outcome.acked.len(),
                    found.len(),
                    outcome.cpu * 1e6 / outcome.acked.len().max(1) as f64,
                    (outcome.folded - outcome.all_acked).as_secs_f64() * 1e3,
                    (end_to_end - outcome.folded).as_secs_f64() * 1e3,
                    if n < n_asked {
                        format!(" capped_from={n_asked}")
                    } else {
                        String::new()
                    },
                    outcome.extra
                );
                if lost > 0 || twice > 0 || outcome.acked.len() != n {
                    failed = true;
                }
                rates
                    .entry((mode.clone(), n))
                    .or_default()
                    .push(entities_per_sec);
                dirs.push(dir);
            }
        }
    }
    let runs = |mode: &str, n: usize| -> Vec<f64> {
        rates
            .get(&(mode.to_string(), n))
            .cloned()
            .unwrap_or_default()
    };
    let summary = |values: &[f64]| -> String {
        let min = values.iter().copied().fold(f64::INFINITY, f64::min);
        let max = values.iter().copied().fold(0.0, f64::max);
        format!(
            "median={:.2} min={min:.2} max={max:.2}",
            median(values.to_vec())
        )
    };
    for &n in sizes.iter().filter(|n| **n <= SUBPROCESS_CAP) {
        // Each round's ratio compares the two modes of that round.
        let ratios: Vec<f64> = runs("sharded-batched", n)
            .iter()
            .zip(runs("git-subprocess", n))
            .map(|(vole, spike)| vole / spike)
            .collect();
        if !ratios.is_empty() {
            println!(
                "ratio n={n} sharded_batched_vs_git_subprocess {} rounds={} target_entities_per_sec=25637 sharded_batched_median_entities_per_sec={:.0}",
                summary(&ratios),
                ratios.len(),
                median(runs("sharded-batched", n))
            );
        }
    }
    let big = runs("sharded-batched", 200_000);
    let base = runs("sharded-batched", 20_000);
    if !big.is_empty() && !base.is_empty() {
        println!(
            "ratio sharded_batched_200k_vs_20k={:.2} (medians of {} and {} runs)",
            median(big.clone()) / median(base.clone()),
            big.len(),
            base.len()
        );
    }
    drop(dirs);
    if failed {
        eprintln!("a run lost, duplicated or failed to acknowledge writes");
        std::process::exit(1);
    }
}
