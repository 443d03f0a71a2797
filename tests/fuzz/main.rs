//! Fuzzing on stable: every parser that reads bytes from outside gets
//! random and mutated input for a bounded time, and must neither panic nor
//! break its own rules. Targets: the CGI response-header parser, the
//! control socket's line protocol, `Range`/`If-Range`/`If-None-Match`
//! handling, `TreePath`, and log replay over garbage and truncated frames.
//!
//! A mutation fuzzer without coverage feedback (cargo-fuzz needs a nightly
//! toolchain, which CI does not have): seeds of valid input are mutated
//! (byte flips, interesting bytes, insertions, deletions, splices,
//! truncations) or replaced by random bytes. Every input that ever failed
//! is kept under `tests/fuzz/regressions/<target>/` and replayed first.
//!
//! `VOLE_FUZZ_SECS` (default 0.3) bounds each target's run; `VOLE_FUZZ_SEED`
//! replays a run. `scripts/fuzz` runs each for longer and prints
//! `target=.. seconds=.. executions=.. crashes=..` lines.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed run

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use axum::http::{HeaderMap, HeaderValue, header};

/// xorshift64*: fast, seedable, good enough to pick mutations.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }
}

const INTERESTING: &[u8] = b"\0\xff\n\r:;,-=/\\.\"*@{}~^%\x7f 0 9";

fn mutate(rng: &mut Rng, seeds: &[Vec<u8>]) -> Vec<u8> {
    if rng.below(16) == 0 || seeds.is_empty() {
        let n = rng.below(256);
        return (0..n).map(|_| rng.next() as u8).collect();
    }
    let mut data = seeds[rng.below(seeds.len())].clone();
    for _ in 0..=rng.below(4) {
        let len = data.len();
        match rng.below(7) {
            0 if len > 0 => {
                let i = rng.below(len);
                data[i] ^= 1 << rng.below(8);
            }
            1 if len > 0 => {
                let i = rng.below(len);
                data[i] = INTERESTING[rng.below(INTERESTING.len())];
            }
            2 => {
                let i = rng.below(len + 1);
                data.insert(i, INTERESTING[rng.below(INTERESTING.len())]);
            }
            3 if len > 0 => {
                let i = rng.below(len);
                let j = (i + rng.below(16)).min(len);
                data.drain(i..j);
            }
            4 if len > 0 => {
                let i = rng.below(len);
                let j = (i + rng.below(32)).min(len);
                let copy = data[i..j].to_vec();
                let at = rng.below(data.len() + 1);
                data.splice(at..at, copy);
            }
            5 => {
                let other = &seeds[rng.below(seeds.len())];
                let cut = rng.below(other.len() + 1);
                let at = rng.below(len + 1);
                data.truncate(at);
                data.extend_from_slice(&other[cut..]);
            }
            _ => {
                let at = rng.below(len + 1);
                data.truncate(at);
            }
        }
    }
    data
}

fn regressions_dir(target: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fuzz/regressions")
        .join(target)
}

/// Runs `check` on the kept regressions, then on generated input for the
/// time bound; a panic is a crash, kept as a regression and a failure.
fn fuzz(target: &str, seeds: Vec<Vec<u8>>, check: impl Fn(&[u8])) {
    let secs: f64 = std::env::var("VOLE_FUZZ_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0.3);
    let seed: u64 = std::env::var("VOLE_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(1, |d| d.as_nanos() as u64)
                | 1
        });
    let mut rng = Rng(seed);
    // Panics are counted, not printed: the decoders under test catch some
    // themselves (arrow's, in log replay), which would flood the output.
    std::panic::set_hook(Box::new(|_| {}));
    let mut crashes: Vec<Vec<u8>> = Vec::new();
    let mut run = |input: &[u8]| {
        if catch_unwind(AssertUnwindSafe(|| check(input))).is_err() {
            crashes.push(input.to_vec());
        }
    };
    let kept = regressions_dir(target);
    let mut replayed = 0;
    if let Ok(entries) = std::fs::read_dir(&kept) {
        for entry in entries.flatten() {
            run(&std::fs::read(entry.path()).unwrap());
            replayed += 1;
        }
    }
    for seed_input in &seeds {
        run(seed_input);
    }
    let started = Instant::now();
    let bound = Duration::from_secs_f64(secs);
    let mut executions = 0u64;
    while started.elapsed() < bound {
        let input = mutate(&mut rng, &seeds);
        run(&input);
        executions += 1;
    }
    // The smallest few are kept: one input per way of failing is enough.
    let mut smallest = crashes.clone();
    smallest.sort_by_key(Vec::len);
    for crash in smallest.iter().take(8) {
        std::fs::create_dir_all(&kept).unwrap();
        let name = format!("crash-{:016x}", fnv(crash));
        std::fs::write(kept.join(name), crash).unwrap();
    }
    println!(
        "target={target} seconds={:.1} executions={executions} regressions={replayed} crashes={} seed={seed}",
        started.elapsed().as_secs_f64(),
        crashes.len()
    );
    assert!(
        executions > 0 || bound.is_zero(),
        "anti-vacuity: {target} ran no input"
    );
    assert!(
        crashes.is_empty(),
        "{target}: {} input(s) crashed; kept under {} (replay with VOLE_FUZZ_SEED={seed})",
        crashes.len(),
        kept.display()
    );
}

fn fnv(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x100_0000_01b3)
    })
}

#[test]
fn cgi_response_headers() {
    let seeds = vec![
        b"Status: 404 Not Found\r\nContent-Type: text/plain\r\n\r\nbody".to_vec(),
        b"Content-Type: application/x-git-upload-pack-result\n\n0008NAK\n".to_vec(),
        b"Status: 200\nCache-Control: no-cache\nExpires: Fri, 01 Jan 1980 00:00:00 GMT\n\n"
            .to_vec(),
    ];
    fuzz("cgi_headers", seeds, |input| {
        let end = vole_transport::cgi::find_header_end(input);
        if let Some((at, len)) = end {
            assert!(
                at + len <= input.len(),
                "the header end lies inside the input"
            );
        }
        let block = end.map_or(input, |(at, _)| &input[..at]);
        if let Ok(head) = vole_transport::cgi::parse_cgi_headers(block) {
            let lines = block.split(|b| *b == b'\n').count();
            assert!(head.headers.len() <= lines, "more headers than lines");
        }
    });
}

#[test]
fn control_socket_lines() {
    let seeds = vec![
        br#"{"v":1,"op":"ping"}"#.to_vec(),
        br#"{"v":1,"op":"repo_create","repo":"alice/x","description":"d"}"#.to_vec(),
        br#"{"v":1,"op":"hook_pre_receive","push":{"repo":"a/b","push_id":1,"actor":"x","client":"c"},"updates":[{"ref":"refs/heads/main","old":"0000000000000000000000000000000000000000","new":"1111111111111111111111111111111111111111"}]}"#.to_vec(),
        br#"{"v":2,"op":"ping"}"#.to_vec(),
    ];
    fuzz("control_line", seeds, |input| {
        let line = String::from_utf8_lossy(input);
        if let Err(reply) = vole_control::protocol::Reply::parse_request(&line) {
            serde_json::to_string(&reply).unwrap();
        }
    });
}

#[test]
fn ranges_and_conditions() {
    use vole_http::conditional::{accepts_gzip, not_modified, range_for};
    let seeds = vec![
        b"\x00\x00\x00\x00\x00\x00\x03\xe8bytes=0-99".to_vec(),
        b"\x00\x00\x00\x00\x00\x00\x00\x0abytes=-5".to_vec(),
        b"\x00\x00\x00\x00\x00\x00\x00\x0abytes=5-,0-1".to_vec(),
        b"\xff\xff\xff\xff\xff\xff\xff\xffbytes=18446744073709551614-".to_vec(),
        b"\x00\x00\x00\x00\x00\x00\x00\x00\"abc\", W/\"x\"".to_vec(),
        b"\x00\x00\x00\x00\x00\x00\x01\x00gzip;q=0.5, *;q=0".to_vec(),
    ];
    fuzz("ranges", seeds, |input| {
        if input.len() < 8 {
            return;
        }
        let size = u64::from_be_bytes(input[..8].try_into().unwrap());
        let Ok(value) = HeaderValue::from_bytes(&input[8..]) else {
            return;
        };
        let etag = HeaderValue::from_static("\"abc\"");
        let mut headers = HeaderMap::new();
        headers.insert(header::RANGE, value.clone());
        headers.insert(header::IF_RANGE, value.clone());
        headers.insert(header::IF_NONE_MATCH, value.clone());
        headers.insert(header::ACCEPT_ENCODING, value.clone());
        let _ = not_modified(&headers, &etag);
        let _ = accepts_gzip(&headers);
        let mut ranged = HeaderMap::new();
        ranged.insert(header::RANGE, value);
        if let Ok(Some((start, end))) = range_for(&ranged, size, &etag) {
            assert!(start <= end && end < size, "range {start}-{end} of {size}");
        }
    });
}

#[test]
fn tree_paths() {
    let seeds = vec![
        b"docs/guide.md".to_vec(),
        b"a/b/".to_vec(),
        b"".to_vec(),
        "\u{e9}t\u{e9}/caf\u{e9}.txt".as_bytes().to_vec(),
    ];
    fuzz("tree_path", seeds, |input| {
        let Ok(text) = std::str::from_utf8(input) else {
            return;
        };
        if let Ok(path) = vole_git::tree_path::TreePath::parse(text) {
            for segment in path.segments() {
                assert!(
                    !segment.is_empty()
                        && segment != "."
                        && segment != ".."
                        && !segment.contains(['\0', '\\', '/']),
                    "{text:?} gave the segment {segment:?}"
                );
            }
            let again = vole_git::tree_path::TreePath::parse(&path.segments().join("/")).unwrap();
            assert_eq!(
                again.segments(),
                path.segments(),
                "{text:?} does not round-trip"
            );
        }
    });
}

#[test]
fn log_replay_over_garbage() {
    use vole_hooks::RefMove;
    // A real log, written by the log itself, as the seed.
    let dir = tempfile::tempdir().unwrap();
    let real = {
        let (log, _) = vole_log::Log::<RefMove>::open(dir.path(), |_| {}).unwrap();
        for i in 0..3u64 {
            let row = RefMove {
                time_ns: i as i64,
                repo: "alice/repo".into(),
                ref_name: "refs/heads/main".into(),
                old: None,
                new: Some("1".repeat(40)),
                actor: "anonymous".into(),
                client: "127.0.0.1".into(),
                push_id: i,
                phase: vole_hooks::Phase::Committed,
            };
            let frame = log.encode(std::slice::from_ref(&row)).unwrap();
            log.append_encoded_all(vec![frame]).unwrap();
        }
        drop(log);
        let file = std::fs::read_dir(dir.path())
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .find(|p| p.extension().is_some_and(|x| x == "arrow"))
            .unwrap();
        std::fs::read(file).unwrap()
    };
    let path = Path::new("fuzzed.arrow");
    fuzz("log_replay", vec![real], |input| {
        let replayed = vole_log::replay::<RefMove, _>(path, std::io::Cursor::new(input), |_| {});
        if let Ok(replay) = replayed {
            assert!(
                replay.valid_len <= input.len() as u64,
                "{} valid bytes in an input of {}",
                replay.valid_len,
                input.len()
            );
        }
    });
}
