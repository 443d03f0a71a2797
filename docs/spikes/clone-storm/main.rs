//! Benchmark harness: a storm of identical clones (a CI fleet cloning one
//! commit) against vole with its pack cache, vole without it
//! (`--pack-cache-size 0`), and `git http-backend` behind nginx +
//! fcgiwrap, in interleaved rounds.
//!
//! `cargo run --release --example clone-storm [-- --rounds 3 --storms 16,32 --single-pairs 21 --files 5000 --commits 2000 --file-bytes 3584]`
//!
//! Needs nginx and fcgiwrap (Debian packages); builds the release `vole`.
//!
//! - The repo: `--files` text files of `--file-bytes` (compressible ~1.4x) and
//!   `--commits` commits, each editing three files; pushed to both voles,
//!   copied into nginx's repos.
//! - A timed client replays the request a `git clone --bare` makes
//!   (protocol v2 `fetch` of every ref, no progress) and reads the answer
//!   to its end without indexing it, so the machine's CPU goes to the
//!   server, as it would with CI runners elsewhere. A storm is N such
//!   clients at once; depth 1 adds `deepen 1`.
//! - CPU: the whole machine's busy time (`/proc/stat`) over the storm
//!   minus this process's own (the clients), per clone: fcgiwrap's
//!   children are not waited for, so process-tree accounting would miss
//!   them.
//! - Verification: every timed answer is 200 and its length is within 1 %
//!   of the arm's first; before the rounds, a real `git clone --bare` of
//!   each arm (full and `--depth 1`) is checked with fsck and its HEAD.
//! - Output: `arm= storm= depth= round= mib_per_s= cpu_s_per_clone=`, then
//!   per storm and depth the medians and the ratios `cache/nginx`, and the
//!   single-clone ratio `vole-nocache/nginx` (median of interleaved pairs).

#![allow(clippy::unwrap_used)] // test and benchmark code: a failed unwrap is a failed run

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

#[path = "../common.rs"]
mod common;
use common::{Server, arg, arg_text, git, median, release_vole, sh, start_nginx};

/// A repo by fast-import, `files` files of `file_bytes`; returns main's
/// commit.
fn make_repo(dir: &Path, files: usize, commits: usize, file_bytes: usize) -> String {
    std::fs::create_dir_all(dir).unwrap();
    sh(git(dir).args(["init", "-q", "-b", "main"]));
    let mut child = git(dir)
        .args(["fast-import", "--quiet"])
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = std::io::BufWriter::new(child.stdin.take().unwrap());
    let mut x: u64 = 0x2545_F491_4F6C_DD1D;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut content = |i: usize, version: usize| {
        // Words from a 64-letter alphabet: ~6 bits of entropy a byte, so
        // it compresses a little, as source text with identifiers does.
        let mut text = format!("// file {i}, version {version}\n");
        while text.len() < file_bytes {
            let v = next();
            for k in 0..8 {
                let c = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_ "
                    [((v >> (k * 6)) & 63) as usize];
                text.push(c as char);
            }
            if v % 7 == 0 {
                text.push('\n');
            }
        }
        text
    };
    for c in 0..commits.max(1) {
        let message = format!("commit {c}\n");
        write!(
            input,
            "commit refs/heads/main\ncommitter b <b@example.org> {} +0000\ndata {}\n{message}",
            1_700_000_000 + c,
            message.len()
        )
        .unwrap();
        let touched: Vec<usize> = if c == 0 {
            (0..files).collect()
        } else {
            (0..3).map(|k| (c * 7 + k * 1031) % files).collect()
        };
        for i in touched {
            let body = content(i, c);
            write!(
                input,
                "M 100644 inline d{}/f{i}.txt\ndata {}\n{body}\n",
                i % 50,
                body.len()
            )
            .unwrap();
        }
    }
    drop(input);
    assert!(child.wait().unwrap().success(), "fast-import failed");
    sh(git(dir).args(["repack", "-adq"]));
    sh(git(dir).args(["rev-parse", "main"]))
}

/// The body of a protocol v2 `fetch` for `wants` (what `git clone --bare
/// -q` sends).
fn fetch_body(wants: &[String], depth: Option<u32>) -> Vec<u8> {
    let pkt = |line: &str| format!("{:04x}{line}", line.len() + 4);
    let mut body = String::new();
    body.push_str(&pkt("command=fetch\n"));
    body.push_str(&pkt("object-format=sha1\n"));
    body.push_str("0001");
    body.push_str(&pkt("thin-pack\n"));
    body.push_str(&pkt("no-progress\n"));
    body.push_str(&pkt("ofs-delta\n"));
    if let Some(depth) = depth {
        body.push_str(&pkt(&format!("deepen {depth}\n")));
    }
    for want in wants {
        body.push_str(&pkt(&format!("want {want}\n")));
    }
    body.push_str(&pkt("done\n"));
    body.push_str("0000");
    body.into_bytes()
}

/// One timed clone: the answer's status and length in bytes.
fn clone_once(port: u16, body: &[u8]) -> (u16, u64) {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(300)))
        .unwrap();
    write!(
        stream,
        "POST /bench/storm.git/git-upload-pack HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\
         Git-Protocol: version=2\r\nContent-Type: application/x-git-upload-pack-request\r\n\
         Accept: application/x-git-upload-pack-result\r\nContent-Length: {}\r\n\r\n",
        body.len()
    )
    .unwrap();
    stream.write_all(body).unwrap();
    let mut head = [0u8; 12];
    stream.read_exact(&mut head).unwrap();
    let status = String::from_utf8_lossy(&head[9..12]).parse().unwrap_or(0);
    let mut total = 12u64;
    let mut buf = vec![0u8; 256 << 10];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => total += n as u64,
            Err(e) => panic!("reading a clone: {e}"),
        }
    }
    (status, total)
}

/// Busy and total jiffies of the whole machine.
fn machine_ticks() -> (u64, u64) {
    let cpu = common::cpu_fields();
    let idle = cpu[3] + cpu.get(4).copied().unwrap_or(0);
    let total: u64 = cpu.iter().sum();
    (total - idle, total)
}

/// This process's own CPU seconds (the clients).
fn own_cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
    let rest = stat.rsplit_once(')').unwrap().1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = fields[11].parse::<f64>().unwrap() + fields[12].parse::<f64>().unwrap();
    ticks / 100.0
}

/// A storm of `n` clones at once: aggregate MiB/s and server CPU seconds
/// per clone. Every answer is checked against `expect` (the arm's length).
fn storm(port: u16, body: &[u8], n: usize, expect: &mut Option<u64>) -> (f64, f64) {
    let (busy0, _) = machine_ticks();
    let own0 = own_cpu_seconds();
    let started = Instant::now();
    let answers: Vec<(u16, u64)> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..n)
            .map(|_| scope.spawn(|| clone_once(port, body)))
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let took = started.elapsed().as_secs_f64();
    let (busy1, _) = machine_ticks();
    let own = own_cpu_seconds() - own0;
    let mut bytes = 0u64;
    for (status, len) in &answers {
        assert_eq!(*status, 200, "verification: a clone's status");
        let want = *expect.get_or_insert(*len);
        assert!(
            (*len as f64 - want as f64).abs() <= want as f64 * 0.01,
            "verification: a clone of {len} bytes where the arm's first had {want}"
        );
        bytes += len;
    }
    let machine = (busy1 - busy0) as f64 / 100.0;
    let server_cpu = (machine - own).max(0.0) / n as f64;
    (bytes as f64 / (1 << 20) as f64 / took, server_cpu)
}

/// Per arm: the storms' MiB/s and server CPU seconds per clone.
type Samples = (Vec<f64>, Vec<f64>);

fn port_of(server: &Server) -> u16 {
    server.base.rsplit(':').next().unwrap().parse().unwrap()
}

fn main() {
    let rounds = arg("--rounds", 3) as usize;
    // Single clones (~0.16 s each) vary by a few percent from one to the
    // next: the median of more pairs moves less from run to run.
    let single_pairs = arg("--single-pairs", 21) as usize;
    let files = arg("--files", 5000) as usize;
    let commits = arg("--commits", 2000) as usize;
    // 3.5 KiB files make the 28 MiB pack of the measurements.
    let file_bytes = arg("--file-bytes", 3584) as usize;
    let storms: Vec<usize> = arg_text("--storms")
        .unwrap_or_else(|| "16,32".into())
        .split(',')
        .map(|s| s.parse().unwrap())
        .collect();
    let vole = release_vole();
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let source = dir.join("source");
    let head = make_repo(&source, files, commits, file_bytes);
    let pack: u64 = std::fs::read_dir(source.join(".git/objects/pack"))
        .unwrap()
        .flatten()
        .filter(|e| e.path().extension().is_some_and(|x| x == "pack"))
        .map(|e| e.metadata().unwrap().len())
        .sum();
    println!(
        "repo files={files} commits={commits} pack_mib={:.1}",
        pack as f64 / (1 << 20) as f64
    );

    // Its metrics on a port of its own: the cache's counters at the end.
    let metrics = format!("127.0.0.1:{}", common::free_port());
    let cached = common::vole_server(dir, &vole, "vole-cache", &["--metrics-listen", &metrics]);
    let uncached = common::vole_server(dir, &vole, "vole-nocache", &["--pack-cache-size", "0"]);
    let nginx = start_nginx(dir, false);
    for server in [&cached, &uncached] {
        sh(std::process::Command::new(&vole)
            .args(["repo", "create", "bench/storm", "--data"])
            .arg(server.repos.parent().unwrap()));
        sh(git(&source).args([
            "push",
            "-q",
            &format!("{}/bench/storm.git", server.base),
            "main",
        ]));
    }
    sh(git(dir)
        .args(["clone", "-q", "--bare"])
        .arg(&source)
        .arg(nginx.repos.join("bench/storm.git")));
    let arms = [&cached, &uncached, &nginx];
    // Verification with real clones, outside the timed part.
    for server in arms {
        for depth in [None, Some("1")] {
            let target = dir.join(format!(
                "verify-{}-{}",
                server.name,
                depth.unwrap_or("full")
            ));
            let url = format!("{}/bench/storm.git", server.base);
            let mut args = vec!["clone", "-q", "--bare"];
            if let Some(d) = depth {
                args.extend(["--depth", d]);
            }
            args.push(&url);
            sh(git(dir).args(&args).arg(&target));
            sh(git(&target).args(["fsck", "--no-progress"]));
            assert_eq!(
                sh(git(&target).args(["rev-parse", "HEAD"])),
                head,
                "verification: {} HEAD",
                server.name
            );
        }
    }
    let wants = vec![head.clone()];
    let mut expect: std::collections::HashMap<(&str, bool), Option<u64>> = Default::default();
    // A cold cache: a new tag moves the repo's ref state, which every key
    // holds, so the next request of the same commit is a miss again (the
    // timed requests do not ask for tags: the pack is the same).
    let mut tags = 0;
    let mut cool = || {
        tags += 1;
        sh(git(&source).args([
            "push",
            "-q",
            &format!("{}/bench/storm.git", cached.base),
            &format!("{head}:refs/tags/storm-{tags}"),
        ]));
    };
    // Single clones, interleaved: vole without its cache, nginx, and vole
    // with its cache on a miss (what a first clone of a commit costs).
    let full = fetch_body(&wants, None);
    let (mut singles, mut singles_miss) = (Vec::new(), Vec::new());
    let single_arms = [
        (&uncached, "vole-nocache"),
        (&nginx, "nginx"),
        (&cached, "vole-cache-miss"),
    ];
    for round in 0..single_pairs {
        let mut pair = std::collections::HashMap::new();
        for i in 0..3 {
            let (server, label) = single_arms[(round + i) % 3];
            if label == "vole-cache-miss" {
                cool();
            }
            let slot = expect.entry((label, false)).or_default();
            let (mib_s, cpu) = storm(port_of(server), &full, 1, slot);
            println!(
                "arm={label} storm=1 depth=full round={round} mib_per_s={mib_s:.1} cpu_s_per_clone={cpu:.3}"
            );
            pair.insert(label, mib_s);
        }
        singles.push(pair["vole-nocache"] / pair["nginx"]);
        singles_miss.push(pair["vole-cache-miss"] / pair["nginx"]);
    }
    let mut results: std::collections::HashMap<(usize, bool, &str), Samples> = Default::default();
    let storm_arms = [
        (&cached, "vole-cache"),
        (&uncached, "vole-nocache"),
        (&nginx, "nginx"),
        (&cached, "vole-cache-cold"),
    ];
    for round in 0..rounds {
        for &n in &storms {
            for shallow in [false, true] {
                let body = fetch_body(&wants, shallow.then_some(1));
                // Interleaved: each round starts with the next arm. The
                // cache's storms run twice: warm (the pack is cached from
                // the storm before) and cold (the first clone makes it,
                // the others follow it or hit it).
                let order: Vec<(&Server, &str)> =
                    (0..4).map(|i| storm_arms[(round + i) % 4]).collect();
                for (server, label) in order {
                    if label == "vole-cache-cold" {
                        cool();
                    }
                    let slot = expect.entry((label, shallow)).or_default();
                    let (mib_s, cpu) = storm(port_of(server), &body, n, slot);
                    println!(
                        "arm={label} storm={n} depth={} round={round} mib_per_s={mib_s:.1} cpu_s_per_clone={cpu:.3}",
                        if shallow { "1" } else { "full" }
                    );
                    let entry = results.entry((n, shallow, label)).or_default();
                    entry.0.push(mib_s);
                    entry.1.push(cpu);
                }
            }
        }
    }
    for &n in &storms {
        for shallow in [false, true] {
            let depth = if shallow { "1" } else { "full" };
            let get = |arm: &str| results[&(n, shallow, arm)].clone();
            let (c, u, g, k) = (
                get("vole-cache"),
                get("vole-nocache"),
                get("nginx"),
                get("vole-cache-cold"),
            );
            let (cm, um, gm, km) = (
                median(c.0.clone()),
                median(u.0.clone()),
                median(g.0.clone()),
                median(k.0.clone()),
            );
            let (cc, uc, gc, kc) = (
                median(c.1.clone()),
                median(u.1.clone()),
                median(g.1.clone()),
                median(k.1.clone()),
            );
            println!(
                "median storm={n} depth={depth} cache_mib_per_s={cm:.1} cold_cache_mib_per_s={km:.1} nocache_mib_per_s={um:.1} nginx_mib_per_s={gm:.1} \
                 cache_cpu_s={cc:.3} cold_cache_cpu_s={kc:.3} nocache_cpu_s={uc:.3} nginx_cpu_s={gc:.3}"
            );
            println!(
                "ratio storm={n} depth={depth} throughput_cache_vs_nginx={:.2} cpu_cache_vs_nginx={:.2} \
                 throughput_cold_cache_vs_nginx={:.2} cpu_cold_cache_vs_nginx={:.2} throughput_nocache_vs_nginx={:.2}",
                cm / gm,
                cc / gc.max(1e-9),
                km / gm,
                kc / gc.max(1e-9),
                um / gm
            );
        }
    }
    println!(
        "ratio single_clone nocache_vs_nginx median={:.3} cache_miss_vs_nginx median={:.3}",
        median(singles),
        median(singles_miss)
    );
    // What the cache did, from the server's own counters.
    let scrape =
        sh(std::process::Command::new("curl").args(["-s", &format!("http://{metrics}/metrics")]));
    for line in scrape.lines().filter(|l| l.starts_with("vole_pack_cache")) {
        println!("cache_metric {line}");
    }
}
