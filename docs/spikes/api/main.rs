//! Harness: the API's issue list at 10,000 issues, paged, on this build
//! against a build of an earlier commit (the one before the API took
//! Gitea's shapes), in interleaved rounds. See README.md beside this file.
//!
//! `cargo run --release --example api-list -- --baseline PATH [--issues N]
//! [--rounds R] [--requests K] [--limit L]`

#![allow(clippy::unwrap_used)] // test and benchmark code: a failed unwrap is a failed run

#[path = "../common.rs"]
mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use common::{
    Conn, arg, arg_text, free_port, median, release_vole, sh, start_vole_with, user_with_token,
};
use serde_json::{Value, json};

const REPO: &str = "bench/list";

/// The server's flags: no quota stands in the way of making the fixture
/// or of the measured reads.
const FLAGS: &[&str] = &[
    "--api-rate",
    "100000000",
    "--meta-write-rate",
    "0",
    "--max-meta-bytes-per-user",
    "0",
];

/// One build under test: its server and how its list is asked.
struct Build {
    name: &'static str,
    port: u16,
    token: String,
    /// The list's query for a page (each build's own parameter names).
    query: fn(u64, u64) -> String,
    _child: ChildGuard,
}

struct ChildGuard(std::process::Child);

impl Drop for ChildGuard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A data dir with the repo and a user with a write token, the server on
/// it, and `issues` issues made through its API by 8 writers.
fn build(
    name: &'static str,
    vole: &Path,
    dir: &Path,
    issues: u64,
    query: fn(u64, u64) -> String,
) -> Build {
    let data = dir.join(format!("{name}-data"));
    sh(Command::new(vole)
        .args(["repo", "create", REPO, "--data"])
        .arg(&data));
    let token = user_with_token(vole, &data, "bench", "correct horse battery", "write");
    let port = free_port();
    let child = ChildGuard(start_vole_with(vole, &data, port, FLAGS));
    let started = Instant::now();
    std::thread::scope(|scope| {
        for w in 0..8 {
            let token = token.clone();
            scope.spawn(move || {
                let mut conn = Conn::open(port);
                let mut i = w;
                while i < issues {
                    let labels: Vec<&str> = if i % 7 == 0 { vec!["bug"] } else { vec![] };
                    let body = json!({"title": format!("issue {i}: the build is slow"),
                        "body": "It takes ten minutes on a clean checkout, and five on a warm one.",
                        "labels": labels})
                    .to_string();
                    let (status, answer) = conn.request(
                        "POST",
                        &format!("/api/v1/repos/{REPO}/issues"),
                        &format!(
                            "Authorization: Bearer {token}\r\nContent-Type: application/json\r\n"
                        ),
                        body.as_bytes(),
                    );
                    assert_eq!(status, 201, "{}", String::from_utf8_lossy(&answer));
                    i += 8;
                }
            });
        }
    });
    println!(
        "# {name}: made {issues} issues in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    Build {
        name,
        port,
        token,
        query,
        _child: child,
    }
}

/// `requests` list pages of `limit`, cycling through every page; each
/// answer checked (its first issue's number is the page's newest). The
/// microseconds of each.
fn measure(build: &Build, issues: u64, limit: u64, requests: u64) -> Vec<f64> {
    let mut conn = Conn::open(build.port);
    let pages = issues.div_ceil(limit);
    let mut times = Vec::new();
    for r in 0..requests {
        let page = 1 + (r * 37) % pages;
        let path = format!("/api/v1/repos/{REPO}/issues?{}", (build.query)(page, limit));
        let started = Instant::now();
        let (status, body) = conn.get(&path, &format!("Authorization: Bearer {}\r\n", build.token));
        times.push(started.elapsed().as_secs_f64() * 1e6);
        assert_eq!(status, 200, "{}: {path}", build.name);
        let list: Value = serde_json::from_slice(&body).unwrap();
        let items = list.as_array().unwrap();
        let newest = issues - (page - 1) * limit;
        assert_eq!(
            items.len() as u64,
            limit.min(newest),
            "verification: {} page {page}",
            build.name
        );
        assert_eq!(
            items[0]["number"].as_u64(),
            Some(newest),
            "verification: {} page {page} starts elsewhere",
            build.name
        );
    }
    times
}

fn main() {
    let baseline = PathBuf::from(
        arg_text("--baseline").expect("--baseline PATH: the vole binary of the earlier commit"),
    );
    let issues = arg("--issues", 10_000);
    let rounds = arg("--rounds", 5);
    let requests = arg("--requests", 300);
    let limit = arg("--limit", 50);
    let current = release_vole();
    let dir = tempfile::tempdir().unwrap();
    println!(
        "# api-list issues={issues} rounds={rounds} requests={requests} limit={limit} cpus={}",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    let builds = [
        build("baseline", &baseline, dir.path(), issues, |page, limit| {
            format!("per_page={limit}&page={page}")
        }),
        build("current", &current, dir.path(), issues, |page, limit| {
            format!("type=issues&limit={limit}&page={page}")
        }),
    ];
    // A warm-up pass of each, not counted.
    for build in &builds {
        measure(build, issues, limit, requests / 3);
    }
    let mut speeds = Vec::new();
    let mut p50s: [Vec<f64>; 2] = [Vec::new(), Vec::new()];
    for round in 0..rounds {
        let order: [usize; 2] = if round % 2 == 0 { [0, 1] } else { [1, 0] };
        let mut round_p50 = [0.0; 2];
        for i in order {
            round_p50[i] = median(measure(&builds[i], issues, limit, requests));
        }
        let speed = round_p50[0] / round_p50[1];
        println!(
            "round={round} baseline_p50_us={:.0} current_p50_us={:.0} speed={speed:.3}",
            round_p50[0], round_p50[1]
        );
        speeds.push(speed);
        p50s[0].push(round_p50[0]);
        p50s[1].push(round_p50[1]);
    }
    println!(
        "result baseline_p50_us={:.0} current_p50_us={:.0} speed_median={:.3} speed_range={:.3}-{:.3}",
        median(p50s[0].clone()),
        median(p50s[1].clone()),
        median(speeds.clone()),
        speeds.iter().cloned().fold(f64::INFINITY, f64::min),
        speeds.iter().cloned().fold(0.0, f64::max),
    );
}
