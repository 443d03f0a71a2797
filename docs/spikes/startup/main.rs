//! Benchmark harness: how long `vole serve` takes to start on a data dir
//! holding `--issues` issues, against the same start on an empty data dir
//! (the baseline, interleaved), and where the time goes (log replay, index
//! rebuild).
//!
//! `cargo run --release --example startup [-- --issues 1000000 --writers 32 --starts 3]`
//!
//! - Fill: `--writers` keep-alive connections create the issues through the
//!   API (one repo, one token; `--api-rate`, `--meta-write-rate` and
//!   `--max-meta-bytes-per-user` lifted), each acknowledged
//!   with its 201; the server runs with its defaults otherwise, so the meta
//!   log is compacted in the background past 64 MiB as it would be.
//! - Verification: after the fill, the server is stopped (SIGTERM: the
//!   fold flushes) and started again; the last issue of every writer and a
//!   sample of 1,000 others are read back by number.
//! - Starts: `--starts` rounds, each an empty data dir's start then the full
//!   one's, timed from spawn to the "listening" line; the log's own
//!   `replay_ms` and `index_rebuild_ms` (the part of the index read before
//!   listening) are reported too, and for the full one `issue_ms`: from
//!   spawn to the first 200 of a read of its last issue (the repo's issues
//!   are read in the background; a read before they are is answered 503
//!   with `Retry-After`, and the harness asks again 50 ms later); each
//!   start's resident memory (the full one's once its issues are read),
//!   all of it and its anonymous part, and from the anonymous part's
//!   medians the bytes an issue costs.
//! - Output: `fill_per_s=`, `meta_log_bytes=`, per start `start= ms=`,
//!   then the medians and `ratio full/empty`.

#![allow(clippy::unwrap_used)] // benchmark code: a failed unwrap is a failed run

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Instant;

#[path = "../common.rs"]
mod common;
use common::{arg, free_port, median, release_vole, sh};

/// A started server: its child, address, and the start's figures.
struct Started {
    child: Child,
    port: u16,
    began: Instant,
    ms: f64,
    replay_ms: f64,
    index_rebuild_ms: f64,
    /// The background read's end, once logged: documents it took from
    /// git and from the persisted index.
    read_from: Arc<Mutex<Option<(u64, u64)>>>,
}

fn start(vole: &Path, data: &Path) -> Started {
    let port = free_port();
    let began = Instant::now();
    let mut child = Command::new(vole)
        .args([
            "--log-format",
            "json",
            "serve",
            "--api-rate",
            "100000000",
            "--meta-write-rate",
            "0",
            "--max-meta-bytes-per-user",
            "0",
            "--listen",
        ])
        .arg(format!("127.0.0.1:{port}"))
        .arg("--data")
        .arg(data)
        .env("VOLE_LOG", "info")
        .env("VOLE_METRICS_LISTEN", "off")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let (mut replay_ms, mut index_rebuild_ms) = (0.0, 0.0);
    // Where the background read took its documents from: its line can
    // come before the server listens (a read done within the open's
    // wait) or after.
    let whole_read = |fields: &serde_json::Value| {
        let count = |k: &str| fields[k].as_u64().unwrap_or(0);
        (fields["message"] == "metadata index whole")
            .then(|| (count("docs_from_git"), count("docs_from_file")))
    };
    let mut read_before_listening = None;
    loop {
        let line = lines
            .next()
            .expect("the server stopped before listening")
            .unwrap();
        let value: serde_json::Value = serde_json::from_str(&line).unwrap_or_default();
        let fields = &value["fields"];
        if fields["log"] == "meta.arrow" {
            replay_ms = fields["replay_ms"].as_f64().unwrap_or(0.0);
        }
        if let Some(ms) = fields["index_rebuild_ms"].as_f64() {
            index_rebuild_ms = ms;
        }
        read_before_listening = read_before_listening.or(whole_read(fields));
        if fields["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("vole listening"))
        {
            break;
        }
    }
    let ms = began.elapsed().as_secs_f64() * 1e3;
    // Keep draining its log so it never blocks on a full pipe, noting
    // where the background read took its documents from.
    let read_from = Arc::new(Mutex::new(read_before_listening));
    let noted = read_from.clone();
    std::thread::spawn(move || {
        for line in lines.map_while(Result::ok) {
            let value: serde_json::Value = serde_json::from_str(&line).unwrap_or_default();
            if let Some(read) = whole_read(&value["fields"]) {
                *noted.lock().unwrap() = Some(read);
            }
        }
    });
    Started {
        child,
        port,
        began,
        ms,
        replay_ms,
        index_rebuild_ms,
        read_from,
    }
}

/// Stops the server (SIGTERM: it folds what is queued and writes the
/// persisted index within its bound); how long it took, in ms.
fn stop(mut started: Started) -> f64 {
    let began = Instant::now();
    sh(Command::new("kill").arg(started.child.id().to_string()));
    started.child.wait().unwrap();
    began.elapsed().as_secs_f64() * 1e3
}

/// The resident memory of process `pid`, in bytes: all of it (`VmRSS`)
/// and its anonymous part (`RssAnon`, the heap, where the index lives;
/// the rest is file pages mapped, the packs a reader had open, which the
/// kernel takes back as it needs and which a sample right after the
/// background read can catch by the gigabyte).
fn rss_bytes(pid: u32) -> (u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .map_or(0, |kb| kb * 1024)
    };
    (field("VmRSS:"), field("RssAnon:"))
}

/// Asks for issue `number` until it is served (a 503 while the repo's
/// issues are still being read), at most 600 s.
fn wait_for_issue(stream: &mut BufReader<TcpStream>, token: &str, number: u64) {
    let deadline = Instant::now() + std::time::Duration::from_secs(600);
    loop {
        let (status, _) = request(
            stream,
            &format!(
                "GET /api/v1/repos/bench/issues/issues/{number} HTTP/1.1\r\nAuthorization: Bearer {token}"
            ),
            b"",
        );
        match status {
            200 => return,
            503 if Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(50))
            }
            _ => panic!("issue #{number} answered {status}"),
        }
    }
}

/// One keep-alive connection's request; the status and body.
fn request(stream: &mut BufReader<TcpStream>, head: &str, body: &[u8]) -> (u16, Vec<u8>) {
    // One write (no Nagle wait between a head and its body).
    let mut message = format!(
        "{head}\r\nHost: x\r\nContent-Length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    message.extend_from_slice(body);
    stream.get_mut().write_all(&message).unwrap();
    let mut status_line = String::new();
    stream.read_line(&mut status_line).unwrap();
    let status = status_line
        .split(' ')
        .nth(1)
        .unwrap_or("0")
        .parse()
        .unwrap_or(0);
    let mut length = 0usize;
    loop {
        let mut header = String::new();
        stream.read_line(&mut header).unwrap();
        if header == "\r\n" || header.is_empty() {
            break;
        }
        if let Some(value) = header.to_ascii_lowercase().strip_prefix("content-length:") {
            length = value.trim().parse().unwrap();
        }
    }
    let mut body = vec![0; length];
    stream.read_exact(&mut body).unwrap();
    (status, body)
}

fn connect(port: u16) -> BufReader<TcpStream> {
    let stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream.set_nodelay(true).unwrap();
    BufReader::new(stream)
}

fn main() {
    let issues = arg("--issues", 1_000_000);
    let writers = arg("--writers", 32);
    let starts = arg("--starts", 3) as usize;
    // Each issue's body: this many bytes of text (0: none).
    let body_bytes = arg("--body-bytes", 0) as usize;
    let body_of = |title: &str| -> String {
        let mut body = format!("{title}: ");
        while body.len() < body_bytes {
            body.push_str("the text of an issue, as people write them. ");
        }
        body.truncate(body_bytes);
        body
    };
    let vole = release_vole();
    let dir = tempfile::tempdir().unwrap();
    // `--keep DIR`: the data dirs live in DIR and outlast the run; a run
    // that finds DIR filled (its `filled.json`) skips the fill and the
    // verification and only starts.
    let kept = common::arg_text("--keep").map(PathBuf::from);
    let root = kept.clone().unwrap_or_else(|| dir.path().to_path_buf());
    let full: PathBuf = root.join("full");
    let empty: PathBuf = root.join("empty");
    let filled_note = root.join("filled.json");
    std::fs::create_dir_all(&root).unwrap();
    if let Ok(note) = std::fs::read(&filled_note) {
        let note: serde_json::Value = serde_json::from_slice(&note).unwrap();
        let filled = note["issues"].as_u64().unwrap();
        let token = note["token"].as_str().unwrap().to_string();
        println!("issues={filled} kept={}", root.display());
        return starts_only(&vole, &full, &empty, &token, filled, starts);
    }
    for data in [&full, &empty] {
        sh(Command::new(&vole)
            .args(["repo", "create", "bench/issues", "--data"])
            .arg(data));
    }
    sh(Command::new(&vole)
        .args(["user", "add", "bench", "--email", "b@example.org", "--data"])
        .arg(&full));
    let token = sh(Command::new(&vole)
        .args([
            "token", "create", "fill", "--user", "bench", "--scope", "write", "--data",
        ])
        .arg(&full))
    .lines()
    .last()
    .unwrap()
    .to_string();

    // Fill.
    let server = start(&vole, &full);
    let began = Instant::now();
    let per_writer = issues / writers;
    let lasts: Vec<(u64, String)> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..writers)
            .map(|w| {
                let token = token.clone();
                let port = server.port;
                scope.spawn(move || {
                    let mut stream = connect(port);
                    let mut last = (0, String::new());
                    for i in 0..per_writer {
                        let title = format!("writer {w} issue {i}");
                        let body = if body_bytes == 0 {
                            serde_json::json!({ "title": title })
                        } else {
                            serde_json::json!({ "title": title, "body": body_of(&title) })
                        }
                        .to_string();
                        let (status, answer) = request(
                            &mut stream,
                            &format!(
                                "POST /api/v1/repos/bench/issues/issues HTTP/1.1\r\nAuthorization: Bearer {token}\r\nContent-Type: application/json"
                            ),
                            body.as_bytes(),
                        );
                        assert_eq!(status, 201, "{}", String::from_utf8_lossy(&answer));
                        let value: serde_json::Value = serde_json::from_slice(&answer).unwrap();
                        last = (value["number"].as_u64().unwrap(), title);
                    }
                    last
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let took = began.elapsed().as_secs_f64();
    let filled = per_writer * writers;
    println!(
        "issues={filled} body_bytes={body_bytes} writers={writers} fill_s={took:.1} fill_per_s={:.0}",
        filled as f64 / took
    );
    stop(server);
    let meta_log = std::fs::metadata(full.join("log/meta.arrow"))
        .unwrap()
        .len();
    println!("meta_log_bytes={meta_log}");

    // Verification: read back each writer's last issue and a sample.
    let server = start(&vole, &full);
    let mut stream = connect(server.port);
    let mut checked = 0;
    wait_for_issue(&mut stream, &token, filled);
    let mut check = |number: u64, title: Option<&str>| {
        let (status, body) = request(
            &mut stream,
            &format!(
                "GET /api/v1/repos/bench/issues/issues/{number} HTTP/1.1\r\nAuthorization: Bearer {token}"
            ),
            b"",
        );
        assert_eq!(status, 200, "verification: issue #{number} is gone");
        if let Some(title) = title {
            let value: serde_json::Value = serde_json::from_slice(&body).unwrap();
            assert_eq!(value["title"], title, "verification: issue #{number}");
            let expected = if body_bytes == 0 {
                String::new()
            } else {
                body_of(title)
            };
            assert_eq!(
                value["body"],
                expected.as_str(),
                "verification: issue #{number}'s body"
            );
        }
        checked += 1;
    };
    for (number, title) in &lasts {
        check(*number, Some(title));
    }
    for k in 0..1000u64 {
        check(1 + (k * 7919) % filled, None);
    }
    println!("verified={checked}");
    println!("fill_stop_ms={:.0}", stop(server));
    if kept.is_some() {
        let note = serde_json::json!({ "issues": filled, "token": token });
        std::fs::write(&filled_note, note.to_string()).unwrap();
    }
    starts_only(&vole, &full, &empty, &token, filled, starts);
}

/// The interleaved starts of the empty and the full data dir, and the
/// medians.
fn starts_only(vole: &Path, full: &Path, empty: &Path, token: &str, filled: u64, starts: usize) {
    // Starts, interleaved: empty, then full.
    let (mut empty_ms, mut full_ms, mut issue_ms) = (Vec::new(), Vec::new(), Vec::new());
    let (mut rss_empty, mut rss_full) = (Vec::new(), Vec::new());
    let (mut anon_empty, mut anon_full) = (Vec::new(), Vec::new());
    for round in 0..starts {
        for (name, data) in [("empty", empty), ("full", full)] {
            let started = start(vole, data);
            print!(
                "start={name} round={round} ms={:.0} replay_ms={:.0} index_rebuild_ms={:.0}",
                started.ms, started.replay_ms, started.index_rebuild_ms
            );
            if name == "empty" {
                empty_ms.push(started.ms);
                let (rss, anon) = rss_bytes(started.child.id());
                println!(" rss_bytes={rss} anon_bytes={anon}");
                rss_empty.push(rss as f64);
                anon_empty.push(anon as f64);
            } else {
                full_ms.push(started.ms);
                wait_for_issue(&mut connect(started.port), token, filled);
                let ms = started.began.elapsed().as_secs_f64() * 1e3;
                issue_ms.push(ms);
                // Memory once its one repo's issues are all read (the
                // read above needed them): what the index holds.
                // Where the read took its documents from (logged once the
                // persisted index is written or left, and let go).
                let deadline = Instant::now() + std::time::Duration::from_secs(60);
                while started.read_from.lock().unwrap().is_none() && Instant::now() < deadline {
                    std::thread::sleep(std::time::Duration::from_millis(20));
                }
                let (git, file) = started.read_from.lock().unwrap().unwrap_or_default();
                // What the index holds, once the read let go of the file's
                // rows: sampled after a second.
                std::thread::sleep(std::time::Duration::from_secs(1));
                let (rss, anon) = rss_bytes(started.child.id());
                print!(" issue_ms={ms:.0} rss_bytes={rss} anon_bytes={anon}");
                rss_full.push(rss as f64);
                anon_full.push(anon as f64);
                let stop_ms = stop(started);
                println!(" docs_from_git={git} docs_from_file={file} stop_ms={stop_ms:.0}");
                continue;
            }
            stop(started);
        }
    }
    let (e, f) = (median(empty_ms), median(full_ms));
    println!(
        "median empty_ms={e:.0} full_ms={f:.0} issue_ms={:.0}",
        median(issue_ms)
    );
    println!("ratio full/empty={:.1}", f / e);
    let (re, rf) = (median(rss_empty), median(rss_full));
    let (ae, af) = (median(anon_empty), median(anon_full));
    println!(
        "rss empty_bytes={re:.0} full_bytes={rf:.0} anon_empty_bytes={ae:.0} anon_full_bytes={af:.0} bytes_per_issue={:.0} rss_bytes_per_issue={:.0}",
        (af - ae) / filled as f64,
        (rf - re) / filled as f64
    );
}
