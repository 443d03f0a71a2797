//! Benchmark harness: how long the browser sessions' store takes to open
//! (replay its file) as it grows, against reading the same file's bytes
//! (the baseline: what any replay must at least pay), interleaved.
//!
//! `cargo run --release --example sessions [-- --sessions 100000 --churn 2 --rounds 5]`
//!
//! - Fill: `--sessions` sessions of distinct users, then `--churn` times as
//!   many sign-ins that end an older session of a churning user (each one
//!   a `begin` and an `end` line), so the file holds what a busy server's
//!   does between compactions; then a copy compacted.
//! - Timed, per round and file (order alternating): `SessionStore::open`
//!   of the file, and `std::fs::read` of it.
//! - Verification: after each open, every filled session resolves to its
//!   user and the churned ones do not.
//!
//! Prints `file=<raw|compacted> bytes=.. sessions=.. open_ms=.. read_ms=..
//! round=..` and `median file=.. open_ms=.. read_ms=..`.

#![allow(clippy::unwrap_used)] // benchmark code: a failed unwrap is a failed run

use std::time::{Duration, Instant, SystemTime};

#[path = "../common.rs"]
mod common;
use common::{arg, median};
use vole_sessions::{Expiry, SessionSecret, SessionStore};

fn expiry() -> Expiry {
    Expiry {
        idle: Duration::from_secs(14 * 86_400),
        absolute: Duration::from_secs(90 * 86_400),
    }
}

fn main() {
    let sessions = arg("--sessions", 100_000) as usize;
    let churn = arg("--churn", 2) as usize;
    let rounds = arg("--rounds", 5) as usize;
    let dir = tempfile::tempdir().unwrap();
    let raw = dir.path().join("raw.jsonl");
    let now = SystemTime::now();
    let store = SessionStore::open(&raw, expiry(), now).unwrap();
    let filled: Vec<(String, SessionSecret)> = (0..sessions)
        .map(|i| {
            let user = format!("user{i}");
            let secret = store.begin(&user, 0, now).unwrap();
            (user, secret)
        })
        .collect();
    let churned: Vec<SessionSecret> = (0..sessions * churn)
        .map(|_| store.begin("churn", 0, now).unwrap())
        .collect();
    drop(store);
    let compacted = dir.path().join("compacted.jsonl");
    std::fs::copy(&raw, &compacted).unwrap();
    let store = SessionStore::open(&compacted, expiry(), now).unwrap();
    assert!(store.compact(now, true).unwrap());
    drop(store);
    println!(
        "sessions={sessions} churned={} cpus={}",
        churned.len(),
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    let mut results: Vec<(&str, f64, f64)> = Vec::new();
    for round in 0..rounds {
        let mut files = vec![("raw", &raw), ("compacted", &compacted)];
        if round % 2 == 1 {
            files.reverse();
        }
        for (name, path) in files {
            let began = Instant::now();
            let bytes = std::fs::read(path).unwrap();
            let read_ms = began.elapsed().as_secs_f64() * 1e3;
            let began = Instant::now();
            let store = SessionStore::open(path, expiry(), now).unwrap();
            let open_ms = began.elapsed().as_secs_f64() * 1e3;
            verify(&store, &filled, &churned);
            println!(
                "file={name} bytes={} sessions={} open_ms={open_ms:.1} read_ms={read_ms:.1} round={round}",
                bytes.len(),
                store.len()
            );
            results.push((name, open_ms, read_ms));
        }
    }
    for name in ["raw", "compacted"] {
        let of = |pick: fn(&(&str, f64, f64)) -> f64| {
            median(results.iter().filter(|r| r.0 == name).map(pick).collect())
        };
        println!(
            "median file={name} open_ms={:.1} read_ms={:.1}",
            of(|r| r.1),
            of(|r| r.2)
        );
    }
}

/// Every filled session is its user's; of the churning user's, only the
/// last [`vole_sessions::MAX_PER_USER`] are live.
fn verify(store: &SessionStore, filled: &[(String, SessionSecret)], churned: &[SessionSecret]) {
    let now = SystemTime::now();
    for (user, secret) in filled {
        let session = store.resolve(secret.expose(), now);
        assert_eq!(session.map(|s| s.user).as_deref(), Some(user.as_str()));
    }
    let live = churned.len() - vole_sessions::MAX_PER_USER;
    for (i, secret) in churned.iter().enumerate() {
        assert_eq!(
            store.resolve(secret.expose(), now).is_some(),
            i >= live,
            "churned {i}"
        );
    }
    assert_eq!(store.len(), filled.len() + vole_sessions::MAX_PER_USER);
}
