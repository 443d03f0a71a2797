//! Harness: pushes in a burst with 3 webhooks each to a receiver that
//! never answers, against the same build with no hooks, in interleaved
//! rounds (push throughput); then the same burst with 3 hooks to a fast
//! receiver (delivery throughput, and the lag from a push's
//! acknowledgement to its delivery). See README.md beside this file.
//!
//! `cargo run --release --example webhooks -- [--pushes N] [--rounds R]
//! [--pushers P]`

#![allow(clippy::unwrap_used)] // test and benchmark code: a failed unwrap is a failed run

#[path = "../common.rs"]
mod common;

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{
    Conn, arg, free_port, git, median, release_vole, sh, start_vole_with, user_with_token,
};
use serde_json::json;

const REPO: &str = "bench/hooked";
const HOOKS: usize = 3;

struct Server {
    port: u16,
    token: String,
    child: Child,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A server with the repo, and `hooks` hooks of `push` to `target`.
fn server(vole: &Path, dir: &Path, name: &str, hooks: usize, target: &str) -> Server {
    let data = dir.join(format!("{name}-data"));
    let token = user_with_token(vole, &data, "bench", "correct horse battery", "admin");
    sh(Command::new(vole)
        .args(["repo", "create", REPO, "--data"])
        .arg(&data));
    let port = free_port();
    let flags = [
        "--webhook-allow",
        "127.0.0.0/8",
        "--api-rate",
        "100000000",
        "--meta-write-rate",
        "0",
        "--receive-pack-limit",
        "16",
    ];
    let child = start_vole_with(vole, &data, port, &flags);
    let mut conn = Conn::open(port);
    for _ in 0..hooks {
        let body = json!({"type": "gitea", "events": ["push"], "active": true,
            "config": {"url": target, "content_type": "json", "secret": "s"}})
        .to_string();
        let (status, said) = conn.request(
            "POST",
            &format!("/api/v1/repos/{REPO}/hooks"),
            &format!("Authorization: token {token}\r\nContent-Type: application/json\r\n"),
            body.as_bytes(),
        );
        assert_eq!(status, 201, "{}", String::from_utf8_lossy(&said));
    }
    Server { port, token, child }
}

/// A local repo with `pushers` chains of `per` commits each (branch
/// `b<w>`), made once; every burst pushes them again to new branches.
fn commits(dir: &Path, pushers: usize, per: usize) -> (PathBuf, Vec<Vec<String>>) {
    let work = dir.join("work");
    std::fs::create_dir_all(&work).unwrap();
    sh(git(&work).args(["init", "-q", "-b", "main"]));
    let mut chains = Vec::new();
    for w in 0..pushers {
        let mut chain = Vec::new();
        let mut parent: Option<String> = None;
        for i in 0..per {
            let tree = sh(git(&work)
                .args(["mktree"])
                .stdin(std::process::Stdio::null()));
            let mut commit = git(&work);
            commit.args(["commit-tree", &tree, "-m", &format!("{w}-{i}")]);
            if let Some(p) = &parent {
                commit.args(["-p", p]);
            }
            let id = sh(&mut commit);
            chain.push(id.clone());
            parent = Some(id);
        }
        sh(git(&work).args([
            "update-ref",
            &format!("refs/heads/b{w}"),
            chain.last().unwrap(),
        ]));
        chains.push(chain);
    }
    (work, chains)
}

/// Every chain pushed commit by commit to `branch<w>-<round>` by its own
/// pusher at once; pushes a second, and each push's acknowledgement time
/// by its commit.
fn burst(
    server: &Server,
    work: &Path,
    chains: &[Vec<String>],
    round: usize,
) -> (f64, HashMap<String, Instant>) {
    let url = format!(
        "http://bench:{}@127.0.0.1:{}/{REPO}.git",
        server.token, server.port
    );
    let acked: Mutex<HashMap<String, Instant>> = Mutex::default();
    let started = Instant::now();
    std::thread::scope(|scope| {
        for (w, chain) in chains.iter().enumerate() {
            let (url, acked) = (&url, &acked);
            scope.spawn(move || {
                for id in chain {
                    let refspec = format!("{id}:refs/heads/r{round}-b{w}");
                    sh(git(work).args(["push", "-q", url, &refspec]));
                    acked.lock().unwrap().insert(id.clone(), Instant::now());
                }
            });
        }
    });
    let pushes: usize = chains.iter().map(Vec::len).sum();
    (
        pushes as f64 / started.elapsed().as_secs_f64(),
        acked.into_inner().unwrap(),
    )
}

/// A receiver that takes connections and never answers.
fn silent_receiver() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/never", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in listener.incoming().flatten() {
            held.push(stream);
        }
    });
    url
}

/// A receiver that answers 200 at once, recording when each push's
/// delivery (by its `after`) arrived, every time.
/// Each delivery's push (its `after`) and when it arrived.
type Arrivals = Arc<Mutex<Vec<(String, Instant)>>>;

fn fast_receiver() -> (String, Arrivals) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/fast", listener.local_addr().unwrap());
    let arrived: Arrivals = Arc::default();
    let kept = arrived.clone();
    std::thread::spawn(move || {
        for mut stream in listener.incoming().flatten() {
            let kept = kept.clone();
            std::thread::spawn(move || {
                let mut raw = Vec::new();
                let mut buf = [0u8; 16384];
                loop {
                    let Ok(n) = stream.read(&mut buf) else { return };
                    if n == 0 {
                        return;
                    }
                    raw.extend_from_slice(&buf[..n]);
                    let text = String::from_utf8_lossy(&raw);
                    let Some(head_end) = text.find("\r\n\r\n") else {
                        continue;
                    };
                    let length: usize = text[..head_end]
                        .lines()
                        .find_map(|l| {
                            let (k, v) = l.split_once(':')?;
                            k.eq_ignore_ascii_case("content-length")
                                .then(|| v.trim().parse().ok())?
                        })
                        .unwrap_or(0);
                    if raw.len() >= head_end + 4 + length {
                        let body: serde_json::Value =
                            serde_json::from_slice(&raw[head_end + 4..head_end + 4 + length])
                                .unwrap();
                        let after = body["after"].as_str().unwrap_or_default().to_string();
                        kept.lock().unwrap().push((after, Instant::now()));
                        let _ = stream.write_all(
                            b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                        );
                        return;
                    }
                }
            });
        }
    });
    (url, arrived)
}

fn main() {
    let pushes = arg("--pushes", 1000) as usize;
    let rounds = arg("--rounds", 3) as usize;
    let pushers = arg("--pushers", 4) as usize;
    let vole = release_vole();
    let dir = tempfile::tempdir().unwrap();
    let per = pushes.div_ceil(pushers);
    let rounds_total = rounds + 1;
    println!(
        "# webhooks pushes={} rounds={rounds} pushers={pushers} hooks={HOOKS} cpus={}",
        per * pushers,
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    let (work, chains) = commits(dir.path(), pushers, per);
    let never = silent_receiver();
    let builds = [
        server(&vole, dir.path(), "plain", 0, &never),
        server(&vole, dir.path(), "hooked", HOOKS, &never),
    ];
    let mut ratios = Vec::new();
    let mut rates: [Vec<f64>; 2] = [Vec::new(), Vec::new()];
    for round in 0..rounds {
        let order: [usize; 2] = if round % 2 == 0 { [0, 1] } else { [1, 0] };
        let mut rate = [0.0; 2];
        for i in order {
            rate[i] = burst(&builds[i], &work, &chains, round).0;
        }
        let ratio = rate[1] / rate[0];
        println!(
            "round={round} plain_pushes_per_s={:.1} hooked_never_answers_pushes_per_s={:.1} ratio={ratio:.3}",
            rate[0], rate[1]
        );
        ratios.push(ratio);
        rates[0].push(rate[0]);
        rates[1].push(rate[1]);
    }
    println!(
        "result push_throughput plain={:.1}/s hooked={:.1}/s ratio_median={:.3} ratio_range={:.3}-{:.3}",
        median(rates[0].clone()),
        median(rates[1].clone()),
        median(ratios.clone()),
        ratios.iter().cloned().fold(f64::INFINITY, f64::min),
        ratios.iter().cloned().fold(0.0, f64::max),
    );
    drop(builds);

    // Deliveries to a fast receiver: the burst once more, three hooks.
    let (fast, arrived) = fast_receiver();
    let hooked = server(&vole, dir.path(), "fast", HOOKS, &fast);
    let started = Instant::now();
    let (_, acked) = burst(&hooked, &work, &chains, rounds_total);
    let expected = acked.len() * HOOKS;
    let deadline = Instant::now() + Duration::from_secs(600);
    while arrived.lock().unwrap().len() < expected && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let all_in = started.elapsed().as_secs_f64();
    let arrived = arrived.lock().unwrap().clone();
    // Verification: every push's delivery, to each hook.
    let mut per_push: HashMap<&str, Vec<Instant>> = HashMap::new();
    for (after, at) in &arrived {
        per_push.entry(after.as_str()).or_default().push(*at);
    }
    for id in acked.keys() {
        let got = per_push.get(id.as_str()).map_or(0, Vec::len);
        assert!(
            got >= HOOKS,
            "verification: push {id} reached {got} of {HOOKS} hooks"
        );
    }
    let mut lags: Vec<f64> = Vec::new();
    for (id, ack) in &acked {
        for at in &per_push[id.as_str()] {
            lags.push(at.saturating_duration_since(*ack).as_secs_f64() * 1e3);
        }
    }
    lags.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let p99 = lags[(lags.len() * 99 / 100).min(lags.len() - 1)];
    println!(
        "result deliveries={} in {all_in:.1} s ({:.0}/s) lag_ms_median={:.1} lag_ms_p99={p99:.1} lag_ms_max={:.1}",
        arrived.len(),
        arrived.len() as f64 / all_in,
        median(lags.clone()),
        lags.last().unwrap(),
    );
}
