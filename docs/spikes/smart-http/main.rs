//! Benchmark harness: clone and push through vole against the baseline a
//! user would pick instead, `git http-backend` behind nginx + fcgiwrap, with
//! the same git binary and the same git settings.
//!
//! `cargo run --release --example smart-http [-- --rounds 3 --cases clone,push-150m,push-1g,push-small --baseline-sync off]`
//!
//! Needs nginx and fcgiwrap (Debian packages) and builds the release
//! `vole` binary first. Prints one line per measurement, then the median
//! vole/baseline ratio per case. Every measurement is verified: a clone must
//! have the source's head, a push must have moved the server's ref to it.
//!
//! `--baseline-sync off` (the default) gives nginx's git the settings
//! without `vole_git::DURABLE_WRITES`, i.e. git's default `core.fsync`
//! (packs and indexes, no refs), as both servers ran before vole synced
//! refs: the vole/nginx ratio then carries the whole cost of vole's syncs
//! (git's ref lock files, and vole's directory syncs at prepared and
//! committed). `on` gives nginx the same `core.fsync` as vole, leaving
//! only vole's own directory syncs in the ratio.
//!
//! `--vole-prev PATH` adds a third server, another vole binary (an older
//! build), measured in the same interleaved rounds, and prints the
//! vole/vole-prev ratio too: what a change between the two builds costs.

#![allow(clippy::unwrap_used)] // test and benchmark code: a failed unwrap is a failed run

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[path = "../common.rs"]
mod common;
use common::{Server, arg_text, descendants, git, release_vole, sh, start_nginx};

/// A repo made by fast-import: `files` blobs of `size` bytes each, either
/// incompressible or text-like (compresses ~4x).
fn make_repo(dir: &Path, files: usize, size: usize, compressible: bool, seed: u64) -> String {
    std::fs::create_dir_all(dir).unwrap();
    sh(git(dir).args(["init", "-q", "-b", "main"]));
    let mut child = git(dir)
        // Keep fast-import's pack even for few objects (it would unpack
        // below 100 objects into loose files).
        .args(["-c", "fastimport.unpackLimit=1", "fast-import", "--quiet"])
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut x = seed | 1;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for i in 0..files {
        let mut blob = Vec::with_capacity(size);
        while blob.len() < size {
            if compressible {
                let word = next() % 5000;
                blob.extend_from_slice(
                    format!("line {word} of file {i}: lorem ipsum dolor\n").as_bytes(),
                );
            } else {
                blob.extend_from_slice(&next().to_le_bytes());
            }
        }
        blob.truncate(size);
        write!(stdin, "blob\nmark :{}\ndata {}\n", i + 1, blob.len()).unwrap();
        stdin.write_all(&blob).unwrap();
        stdin.write_all(b"\n").unwrap();
    }
    write!(
        stdin,
        "commit refs/heads/main\ncommitter b <b@example.org> 1767225600 +0000\ndata 5\nbench\n"
    )
    .unwrap();
    for i in 0..files {
        writeln!(stdin, "M 100644 :{} f{i}.bin", i + 1).unwrap();
    }
    drop(stdin);
    assert!(child.wait().unwrap().success());
    sh(git(dir).args(["rev-parse", "main"]))
}

fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

/// Samples RSS every 10 ms: peak of the server processes' sum, and peak of
/// the sum of the git children under `child_roots`.
struct Sampler {
    stop: Arc<AtomicBool>,
    peaks: Arc<Mutex<(u64, u64)>>,
    handle: std::thread::JoinHandle<()>,
}

impl Sampler {
    fn start(server_pids: Vec<u32>, child_roots: Vec<u32>) -> Sampler {
        let stop = Arc::new(AtomicBool::new(false));
        let peaks = Arc::new(Mutex::new((0, 0)));
        let (s, p) = (stop.clone(), peaks.clone());
        let handle = std::thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                let server: u64 = server_pids.iter().map(|&pid| rss_kib(pid)).sum();
                let children: u64 = child_roots
                    .iter()
                    .flat_map(|&r| descendants(r))
                    .map(rss_kib)
                    .sum();
                let mut peaks = p.lock().unwrap();
                peaks.0 = peaks.0.max(server);
                peaks.1 = peaks.1.max(children);
                drop(peaks);
                std::thread::sleep(Duration::from_millis(10));
            }
        });
        Sampler {
            stop,
            peaks,
            handle,
        }
    }

    fn finish(self) -> (f64, f64) {
        self.stop.store(true, Ordering::Relaxed);
        self.handle.join().unwrap();
        let (s, c) = *self.peaks.lock().unwrap();
        (s as f64 / 1024.0, c as f64 / 1024.0)
    }
}

fn start_vole(dir: &Path, vole: &Path, name: &'static str) -> Server {
    common::vole_server(dir, vole, name, &[])
}

struct Measure {
    /// MiB/s of pack for clone and the big pushes; pushes/s for push-small.
    mib_per_s: f64,
    peak: f64,
    child_peak: f64,
}

fn pack_bytes(repo: &Path) -> u64 {
    let git_dir = if repo.join(".git").is_dir() {
        repo.join(".git")
    } else {
        repo.to_path_buf()
    };
    std::fs::read_dir(git_dir.join("objects/pack"))
        .map(|d| {
            d.flatten()
                .filter(|e| e.path().extension().is_some_and(|x| x == "pack"))
                .map(|e| e.metadata().unwrap().len())
                .sum()
        })
        .unwrap_or(0)
}

fn measure_clone(server: &Server, scratch: &Path, head: &str) -> Measure {
    let dest = scratch.join(format!("clone-{}", server.name));
    let _ = std::fs::remove_dir_all(&dest);
    let url = format!("{}/bench/clone.git", server.base);
    let bytes = pack_bytes(&server.repos.join("bench/clone.git"));
    let sampler = Sampler::start(server.server_pids.clone(), server.child_roots.clone());
    let started = Instant::now();
    sh(git(scratch)
        .args(["clone", "-q", "--bare", &url])
        .arg(&dest));
    let took = started.elapsed();
    let (peak, child_peak) = sampler.finish();
    assert_eq!(
        sh(git(&dest).args(["rev-parse", "main"])),
        head,
        "verification: clone head"
    );
    let _ = std::fs::remove_dir_all(&dest);
    Measure {
        mib_per_s: bytes as f64 / (1 << 20) as f64 / took.as_secs_f64(),
        peak,
        child_peak,
    }
}

fn measure_push(server: &Server, source: &Path, head: &str) -> Measure {
    let target = server.repos.join("bench/push.git");
    let _ = std::fs::remove_dir_all(&target);
    sh(git(&server.repos)
        .args(["init", "-q", "--bare"])
        .arg(&target));
    let url = format!("{}/bench/push.git", server.base);
    let bytes = pack_bytes(source);
    let sampler = Sampler::start(server.server_pids.clone(), server.child_roots.clone());
    let started = Instant::now();
    // The client skips delta search on big blobs (the same for both servers).
    sh(git(source).args([
        "-c",
        "core.bigFileThreshold=16m",
        "push",
        "-q",
        &url,
        "main",
    ]));
    let took = started.elapsed();
    let (peak, child_peak) = sampler.finish();
    assert_eq!(
        sh(git(&target).args(["rev-parse", "main"])),
        head,
        "verification: pushed ref"
    );
    Measure {
        mib_per_s: bytes as f64 / (1 << 20) as f64 / took.as_secs_f64(),
        peak,
        child_peak,
    }
}

/// Pushes in one push-small measurement.
const SMALL_PUSHES: usize = 20;

/// push-small: `SMALL_PUSHES` pushes of one new commit each (a 1 KiB
/// file) onto a branch of a fresh repo; the rate is pushes per second of
/// the push commands alone (the commits are made between them, untimed).
/// Here a push's fixed costs show: processes, hooks, the ref log's sync,
/// and the ref and directory syncs.
fn measure_small_pushes(server: &Server, source: &Path) -> Measure {
    let target = server.repos.join("bench/small.git");
    let _ = std::fs::remove_dir_all(&target);
    sh(git(&server.repos)
        .args(["init", "-q", "--bare"])
        .arg(&target));
    let url = format!("{}/bench/small.git", server.base);
    sh(git(source).args(["push", "-q", &url, "main"]));
    let sampler = Sampler::start(server.server_pids.clone(), server.child_roots.clone());
    let mut took = Duration::ZERO;
    let mut head = String::new();
    for i in 0..SMALL_PUSHES {
        std::fs::write(
            source.join("small.txt"),
            format!("{i} {}\n", "x".repeat(1000)),
        )
        .unwrap();
        sh(git(source).args(["add", "small.txt"]));
        sh(git(source).args(["commit", "-q", "-m", &format!("small {i}")]));
        head = sh(git(source).args(["rev-parse", "HEAD"]));
        let started = Instant::now();
        sh(git(source).args(["push", "-q", &url, "main"]));
        took += started.elapsed();
    }
    let (peak, child_peak) = sampler.finish();
    assert_eq!(
        sh(git(&target).args(["rev-parse", "main"])),
        head,
        "verification: the last small push moved the ref"
    );
    Measure {
        mib_per_s: SMALL_PUSHES as f64 / took.as_secs_f64(),
        peak,
        child_peak,
    }
}

fn main() {
    let rounds: usize = arg_text("--rounds")
        .and_then(|r| r.parse().ok())
        .unwrap_or(3);
    let cases = arg_text("--cases").unwrap_or_else(|| "clone,push-150m,push-1g,push-small".into());
    let baseline_sync = match arg_text("--baseline-sync").as_deref() {
        None | Some("off") => false,
        Some("on") => true,
        Some(other) => panic!("--baseline-sync is on or off, not {other:?}"),
    };
    let vole = release_vole();
    let work = tempfile::tempdir().unwrap();
    let dir = work.path();
    println!("git={}", sh(Command::new("git").arg("--version")));
    println!("baseline_sync={}", if baseline_sync { "on" } else { "off" });

    let vole_server = start_vole(dir, &vole, "vole");
    let nginx = start_nginx(dir, baseline_sync);
    let previous =
        arg_text("--vole-prev").map(|path| start_vole(dir, Path::new(&path), "vole-prev"));
    let mut servers = vec![&vole_server, &nginx];
    servers.extend(previous.as_ref());

    let mut ratios: Vec<(String, Vec<f64>)> = Vec::new();
    let mut ratios_prev: Vec<(String, Vec<f64>)> = Vec::new();
    for case in cases.split(',') {
        let (source, head) = match case {
            "clone" => {
                let src = dir.join("src-clone");
                let head = make_repo(&src, 30, 1 << 20, false, 1);
                sh(git(&src).args(["repack", "-adq"]));
                for s in &servers {
                    let target = s.repos.join("bench/clone.git");
                    sh(git(dir)
                        .args(["clone", "-q", "--bare"])
                        .arg(&src)
                        .arg(&target));
                }
                (src, head)
            }
            "push-150m" => {
                let src = dir.join("src-150m");
                let head = make_repo(&src, 150, 1 << 20, true, 2);
                sh(git(&src).args(["repack", "-adq"]));
                (src, head)
            }
            "push-small" => {
                let src = dir.join("src-small");
                let head = make_repo(&src, 10, 4096, true, 4);
                sh(git(&src).args(["reset", "-q", "--hard", "main"]));
                (src, head)
            }
            "push-1g" => {
                // fast-import writes one pack already; no repack (a delta
                // search over 1 GiB of random data would take minutes).
                let src = dir.join("src-1g");
                let head = make_repo(&src, 16, 64 << 20, false, 3);
                (src, head)
            }
            other => panic!("unknown case {other}"),
        };
        println!(
            "case={case} source_pack_mib={:.1} (throughput below is pack bytes over wall time)",
            pack_bytes(&source) as f64 / (1 << 20) as f64
        );
        // One unmeasured run per server first: the first run after the
        // source is built pays for a cold page cache (seen as the first
        // server of every pair being slower).
        let measure = |server: &Server| match case {
            "clone" => measure_clone(server, dir, &head),
            "push-small" => measure_small_pushes(server, &source),
            _ => measure_push(server, &source, &head),
        };
        for server in &servers {
            measure(server);
        }
        let mut r = Vec::new();
        let mut r_prev = Vec::new();
        for round in 0..rounds {
            // Interleaved rounds, alternating which server goes first.
            let order: Vec<&Server> = if round % 2 == 0 {
                servers.clone()
            } else {
                servers.iter().rev().copied().collect()
            };
            let mut pair = std::collections::HashMap::new();
            for server in order {
                let m = measure(server);
                let unit = if case == "push-small" {
                    "pushes_per_s"
                } else {
                    "mib_per_s"
                };
                println!(
                    "case={case} server={} {unit}={:.1} peak_rss_mib={:.1} child_peak_rss_mib={:.1} round={round}",
                    server.name, m.mib_per_s, m.peak, m.child_peak
                );
                pair.insert(server.name, m.mib_per_s);
            }
            r.push(pair["vole"] / pair["nginx"]);
            if let Some(prev) = pair.get("vole-prev") {
                r_prev.push(pair["vole"] / prev);
            }
        }
        let _ = std::fs::remove_dir_all(&source);
        ratios.push((case.to_string(), r));
        if !r_prev.is_empty() {
            ratios_prev.push((case.to_string(), r_prev));
        }
    }
    for (label, list) in [("ratio", ratios), ("ratio_vs_prev", ratios_prev)] {
        for (case, mut r) in list {
            r.sort_by(|a, b| a.partial_cmp(b).unwrap());
            println!(
                "{label} case={case} median={:.3} min={:.3} max={:.3}",
                r[r.len() / 2],
                r[0],
                r[r.len() - 1]
            );
        }
    }
}
