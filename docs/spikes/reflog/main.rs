//! Benchmark harness for the group-committed ref log (`crates/log`).
//!
//! `cargo run --release --example reflog [-- --txns N --rounds R]`
//!
//! Prints `key=value` lines. Every throughput figure is followed by a
//! verification pass: the log is reopened and every acknowledged
//! transaction must be found with its payload, or the run fails.
//! See README.md beside this file for the questions and the results.

#![allow(clippy::unwrap_used)] // test and benchmark code: a failed unwrap is a failed run

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use vole_hooks::{Phase, RefMove};
use vole_log::{Entry, Log, RecordKind};

#[path = "../common.rs"]
mod common;
use common::{arg, free_port, median, release_vole, sh, start_vole};

fn ref_move(id: u64) -> RefMove {
    RefMove {
        time_ns: vole_log::now_ns(),
        repo: "alice/vole".into(),
        ref_name: "refs/heads/main".into(),
        old: Some(format!("{:040x}", id)),
        new: Some(format!("{:040x}", id + 1)),
        actor: "alice".into(),
        client: "127.0.0.1".into(),
        push_id: id,
        phase: Phase::Prepared,
    }
}

struct Run {
    txn_per_sec: f64,
    wall: Duration,
    sync_nanos: u64,
    lock_wait_nanos: u64,
    syncs: u64,
    mean_group: f64,
    bytes_per_txn: f64,
}

/// `writers` threads commit `total` one-ref transactions between them;
/// then the log is reopened and every acknowledged one must be there.
fn durable_run(dir: &Path, writers: u64, total: u64) -> Run {
    let (log, _) = Log::<RefMove>::open(dir, |_| {}).expect("open");
    let log = Arc::new(log);
    let schema_len = std::fs::metadata(log.path()).unwrap().len();
    let per_writer = total / writers;
    let started = Instant::now();
    let handles: Vec<_> = (0..writers)
        .map(|w| {
            let log = log.clone();
            std::thread::spawn(move || {
                let mut acked = Vec::with_capacity(per_writer as usize);
                for i in 0..per_writer {
                    let id = w * 10_000_000 + i;
                    acked.push((log.commit(&[ref_move(id)]).expect("commit"), id));
                }
                acked
            })
        })
        .collect();
    let acked: Vec<(u64, u64)> = handles
        .into_iter()
        .flat_map(|h| h.join().unwrap())
        .collect();
    let wall = started.elapsed();
    let counters = log.counters();
    let bytes = std::fs::metadata(log.path()).unwrap().len() - schema_len;
    drop(log);
    verify(dir, &acked);
    Run {
        txn_per_sec: acked.len() as f64 / wall.as_secs_f64(),
        wall,
        sync_nanos: counters.sync_nanos,
        lock_wait_nanos: counters.lock_wait_nanos,
        syncs: counters.syncs,
        mean_group: counters.mean_group,
        bytes_per_txn: bytes as f64 / acked.len() as f64,
    }
}

fn verify(dir: &Path, acked: &[(u64, u64)]) {
    let mut found: HashMap<u64, u64> = HashMap::with_capacity(acked.len());
    Log::<RefMove>::open(dir, |entry| {
        if let Entry::Txn { seq, rows } = entry {
            found.insert(seq, rows[0].push_id);
        }
    })
    .expect("reopen for verification");
    let lost = acked
        .iter()
        .filter(|(seq, id)| found.get(seq) != Some(id))
        .count();
    assert_eq!(
        lost,
        0,
        "verification: {lost} of {} acknowledged transactions not found",
        acked.len()
    );
    println!("verified_txns={} lost=0", acked.len());
}

fn filesystem_of(path: &Path) -> String {
    std::process::Command::new("stat")
        .args(["-f", "-c", "%T"])
        .arg(path)
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_else(|| "unknown".into())
}

/// Small pushes through the whole path (http-backend + hooks + log) at
/// `pushers` concurrent pushers, each to its own branch; returns pushes/s
/// and the summed hook wall time over the summed push wall time.
fn e2e_run(vole: &Path, dir: &Path, pushers: u64, pushes_each: u64) -> (f64, f64) {
    use std::process::Command;
    let data = dir.join(format!("e2e-{pushers}"));
    let git = |cwd: &Path, args: &[&str]| sh(common::git(cwd).args(args));
    let created = Command::new(vole)
        .args(["repo", "create", "bench/e2e", "--data"])
        .arg(&data)
        .output()
        .unwrap();
    assert!(created.status.success());
    let port = free_port();
    let mut server = start_vole(vole, &data, port);
    // Time every hook run: wrap vole's hook scripts (written at start).
    let timing = data.join("hook-nanos");
    for hook in ["pre-receive", "reference-transaction"] {
        let path = data.join("hooks").join(hook);
        let original = std::fs::read_to_string(&path).unwrap();
        let exec_line = original.lines().find(|l| l.starts_with("exec ")).unwrap();
        let command = exec_line.trim_start_matches("exec ");
        std::fs::write(
            &path,
            format!(
                "#!/bin/sh\nt0=$(date +%s%N)\n{command}\nrc=$?\necho $(( $(date +%s%N) - t0 )) >> {}\nexit $rc\n",
                timing.display()
            ),
        )
        .unwrap();
    }
    // One work tree per pusher, with its commits made in advance.
    let url = format!("http://127.0.0.1:{port}/bench/e2e.git");
    let mut plans = Vec::new();
    for p in 0..pushers {
        let work = data.join(format!("work-{p}"));
        std::fs::create_dir_all(&work).unwrap();
        git(&work, &["init", "-q", "-b", "main"]);
        let mut commits = Vec::new();
        for i in 0..pushes_each {
            std::fs::write(work.join("f.txt"), format!("{p} {i}\n")).unwrap();
            git(&work, &["add", "f.txt"]);
            git(&work, &["commit", "-q", "-m", &format!("{p} {i}")]);
            commits.push(git(&work, &["rev-parse", "HEAD"]));
        }
        plans.push((work, commits));
    }
    let started = Instant::now();
    let handles: Vec<_> = plans
        .into_iter()
        .enumerate()
        .map(|(p, (work, commits))| {
            let url = url.clone();
            std::thread::spawn(move || {
                let mut push_nanos = 0u128;
                for commit in &commits {
                    let t = Instant::now();
                    let out = Command::new("git")
                        .current_dir(&work)
                        .args(["push", "-q", &url, &format!("{commit}:refs/heads/p{p}")])
                        .env("GIT_CONFIG_NOSYSTEM", "1")
                        .env("GIT_CONFIG_GLOBAL", "/dev/null")
                        .output()
                        .unwrap();
                    assert!(
                        out.status.success(),
                        "{}",
                        String::from_utf8_lossy(&out.stderr)
                    );
                    push_nanos += t.elapsed().as_nanos();
                }
                (commits, push_nanos)
            })
        })
        .collect();
    let results: Vec<(Vec<String>, u128)> =
        handles.into_iter().map(|h| h.join().unwrap()).collect();
    let wall = started.elapsed();
    let _ = server.kill();
    let _ = server.wait();
    // Verification: every acknowledged push is a committed move in the log.
    let mut committed: HashMap<String, Vec<String>> = HashMap::new();
    Log::<RefMove>::open(&data.join("log"), |entry| {
        if let Entry::Txn { rows, .. } = entry {
            for row in rows.into_iter().filter(|r| r.phase == Phase::Committed) {
                committed
                    .entry(row.ref_name)
                    .or_default()
                    .push(row.new.unwrap_or_default());
            }
        }
    })
    .unwrap();
    let total: u64 = results.iter().map(|(c, _)| c.len() as u64).sum();
    for (p, (commits, _)) in results.iter().enumerate() {
        assert_eq!(
            committed.get(&format!("refs/heads/p{p}")),
            Some(commits),
            "verification: pusher {p}'s acknowledged pushes are not all in the log"
        );
    }
    println!("verified_pushes={total} lost=0");
    let push_nanos: u128 = results.iter().map(|(_, n)| *n).sum();
    let hook_nanos: u128 = std::fs::read_to_string(&timing)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().parse::<u128>().ok())
        .sum();
    (
        total as f64 / wall.as_secs_f64(),
        hook_nanos as f64 / push_nanos as f64,
    )
}

fn main() {
    if std::env::args().any(|a| a == "--e2e") {
        let pushes = arg("--pushes", 40);
        let vole = release_vole();
        let base = tempfile::tempdir().expect("tempdir");
        let mut one = Vec::new();
        let mut eight = Vec::new();
        let mut share = Vec::new();
        for round in 0..arg("--rounds", 3) {
            let (p1, s1) = e2e_run(&vole, &base.path().join(format!("r{round}")), 1, pushes);
            let (p8, s8) = e2e_run(&vole, &base.path().join(format!("r{round}")), 8, pushes / 4);
            println!(
                "round={round} e2e_pushes_per_sec_1={p1:.1} e2e_pushes_per_sec_8={p8:.1} hook_share_1={s1:.3} hook_share_8={s8:.3}"
            );
            one.push(p1);
            eight.push(p8);
            share.push(s1);
        }
        println!(
            "reflog_e2e e2e_pushes_per_sec_1={:.1} e2e_pushes_per_sec_8={:.1} hook_share={:.3}",
            median(one),
            median(eight),
            median(share)
        );
        return;
    }
    let txns = arg("--txns", 4000);
    let rounds = arg("--rounds", 3);
    let base = tempfile::tempdir().expect("tempdir");
    println!("filesystem={}", filesystem_of(base.path()));
    println!("txns={txns} rounds={rounds}");

    // reflog_append: one durable one-ref move, end to end, one writer.
    let mut tps = Vec::new();
    let mut bytes = Vec::new();
    let mut fsync_share = Vec::new();
    // reflog_group_commit: the same work at 1 and 16 writers, interleaved.
    let mut ratio = Vec::new();
    let mut lock_ratio = Vec::new();
    let mut groups16 = Vec::new();
    let mut tps16 = Vec::new();
    for round in 0..rounds {
        let one = durable_run(&base.path().join(format!("one-{round}")), 1, txns);
        let many = durable_run(
            &base.path().join(format!("many-{round}")),
            arg("--writers", 16),
            txns,
        );
        println!(
            "round={round} writers=1 txn_per_sec={:.0} syncs={} wall_ms={:.0} | writers=16 txn_per_sec={:.0} syncs={} mean_group={:.2} wall_ms={:.0} sync_ms={:.0} lock_wait_ms={:.0}",
            one.txn_per_sec,
            one.syncs,
            one.wall.as_secs_f64() * 1e3,
            many.txn_per_sec,
            many.syncs,
            many.mean_group,
            many.wall.as_secs_f64() * 1e3,
            many.sync_nanos as f64 / 1e6,
            many.lock_wait_nanos as f64 / 1e6,
        );
        tps.push(one.txn_per_sec);
        bytes.push(one.bytes_per_txn);
        fsync_share.push(one.sync_nanos as f64 / one.wall.as_nanos() as f64);
        ratio.push(many.txn_per_sec / one.txn_per_sec);
        // Writer-mutex wait per transaction, 16 writers over 1.
        let per_txn = |r: &Run| r.lock_wait_nanos as f64 / txns as f64;
        lock_ratio.push(per_txn(&many) / per_txn(&one).max(1.0));
        groups16.push(many.mean_group);
        tps16.push(many.txn_per_sec);
    }

    // replay_ms_100k: open (replay) a log of 100k transactions.
    let replay_dir = base.path().join("replay");
    {
        let (log, _) = Log::<RefMove>::open(&replay_dir, |_| {}).unwrap();
        let mut last = 0;
        for i in 0..100_000 {
            last = log.append(&[ref_move(i)]).unwrap();
        }
        log.wait_durable(last).unwrap();
    }
    let mut replay_ms = Vec::new();
    for _ in 0..rounds {
        let started = Instant::now();
        let mut count = 0u64;
        Log::<RefMove>::open(&replay_dir, |e| {
            if matches!(e, Entry::Txn { .. }) {
                count += 1
            }
        })
        .unwrap();
        replay_ms.push(started.elapsed().as_secs_f64() * 1e3);
        assert_eq!(
            count, 100_000,
            "replay found {count} of 100000 transactions"
        );
    }

    // Serial section: one append (encode + write) inside the writer mutex,
    // no sync; and one sync on its own.
    let serial_dir = base.path().join("serial");
    let (log, _) = Log::<RefMove>::open(&serial_dir, |_| {}).unwrap();
    let n = 20_000u64;
    let started = Instant::now();
    let mut last = 0;
    for i in 0..n {
        last = log.append(&[ref_move(i)]).unwrap();
    }
    let serial_us = started.elapsed().as_secs_f64() * 1e6 / n as f64;
    log.wait_durable(last).unwrap();
    let mut sync_us = Vec::new();
    for i in 0..200 {
        let seq = log.append(&[ref_move(n + i)]).unwrap();
        let started = Instant::now();
        log.wait_durable(seq).unwrap();
        sync_us.push(started.elapsed().as_secs_f64() * 1e6);
    }
    let sync_us = median(sync_us);

    // The same one-row batch at arrow's default 64-byte alignment.
    let batch = RefMove::batch(&[ref_move(1)]).unwrap();
    let mut wide = Vec::new();
    let mut writer = arrow_ipc::writer::StreamWriter::try_new(&mut wide, &batch.schema()).unwrap();
    let schema_len = writer.get_ref().len();
    writer.write(&batch).unwrap();
    let align64 = writer.get_ref().len() - schema_len;

    println!(
        "reflog_append bytes_per_txn={:.1} bytes_per_txn_align64={align64} txn_per_sec={:.0} fsync_share={:.3} replay_ms_100k={:.1}",
        median(bytes),
        median(tps),
        median(fsync_share),
        median(replay_ms)
    );
    let observable = median(groups16.clone()) > 1.5;
    println!(
        "reflog_group_commit group_commit_x={:.2} min={:.2} max={:.2} txn_per_sec_16={:.0} mean_group_16={:.2} lock_wait_ratio_x={:.2} grouping_observable={}",
        median(ratio.clone()),
        ratio.iter().cloned().fold(f64::MAX, f64::min),
        ratio.iter().cloned().fold(0.0, f64::max),
        median(tps16),
        median(groups16),
        median(lock_ratio),
        u8::from(observable)
    );
    if !observable {
        eprintln!(
            "!!! grouping_observable=0: no writer queued behind a sync (fsync is nearly free on this filesystem); group_commit_x says nothing here"
        );
    }
    println!(
        "reflog_serial append_us={serial_us:.2} sync_us={sync_us:.1} group_ceiling_x={:.1}",
        sync_us / serial_us
    );
}
