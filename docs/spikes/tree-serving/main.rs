//! Benchmark harness: a site served by vole straight from git objects
//! against nginx serving the same files exported to disk.
//!
//! `cargo run --release --example tree-serving [-- --rounds 3 --seconds 10 --files 300]`
//!
//! With `VOLE_BENCH_LOG=info`, vole logs a line a request to a file and
//! nginx keeps its access log (both servers as installed); else neither
//! logs requests.
//!
//! Needs Debian's `nginx` and `wrk`; builds the release `vole` first. Prints
//! `server=<vole|nginx> warm_rps=.. p50_ms=.. p99_ms=.. cpu_us_per_req=.. steal_pct=..` per run,
//! `cold_p50_ms=.. cache_dropped=..`, `cache_bytes=.. sendfile_bytes=..`, then
//! `warm_ratio median=.. min=.. max=..`. Every path is first fetched from
//! both servers and compared with the file committed (verification).

#![allow(clippy::unwrap_used)] // test and benchmark code: a failed unwrap is a failed run
#![allow(unsafe_code)] // libc reads of CPU time, each with a `// SAFETY:` line

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[path = "../common.rs"]
mod common;
use common::{arg, free_port, git, median, release_vole, sh, start_vole};

/// A deterministic site of ~20 MiB: pages, styles, scripts and images.
fn make_site(dir: &Path, count: usize) -> Vec<(String, Vec<u8>)> {
    let mut x: u64 = 0x2545F4914F6CDD1D;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut files = Vec::new();
    for i in 0..count {
        let (name, size, text) = match i % 6 {
            0..=2 => (
                format!("section{}/page{i}.html", i % 10),
                4 << 10 | (next() % (16 << 10)) as usize,
                true,
            ),
            3 => (
                format!("assets/style{i}.css"),
                8 << 10 | (next() % (24 << 10)) as usize,
                true,
            ),
            4 => (
                format!("assets/app{i}.js"),
                16 << 10 | (next() % (48 << 10)) as usize,
                true,
            ),
            _ => (
                format!("img/photo{i}.jpg"),
                100 << 10 | (next() % (300 << 10)) as usize,
                false,
            ),
        };
        let mut body = Vec::with_capacity(size);
        while body.len() < size {
            if text {
                body.extend_from_slice(
                    format!("<p>paragraph {} of page {i}</p>\n", next() % 1000).as_bytes(),
                );
            } else {
                body.extend_from_slice(&next().to_le_bytes());
            }
        }
        body.truncate(size);
        files.push((name, body));
    }
    for (name, body) in &files {
        let path = dir.join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, body).unwrap();
    }
    files
}

/// One GET on a fresh connection; the body, or None on failure.
fn get(port: u16, path: &str) -> Option<Vec<u8>> {
    get_with(port, path, "")
}

/// [`get`] with extra header lines (each ending in `\r\n`).
fn get_with(port: u16, path: &str, headers: &str) -> Option<Vec<u8>> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_nodelay(true).ok()?;
    let mut conn = KeepAlive {
        reader: BufReader::new(stream.try_clone().ok()?),
    };
    // One write: a request split over segments waits on the peer's
    // delayed ACK (~40 ms) under Nagle.
    stream
        .write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\n{headers}\r\n").as_bytes())
        .ok()?;
    conn.read_response()
}

struct KeepAlive {
    reader: BufReader<TcpStream>,
}

impl KeepAlive {
    fn read_response(&mut self) -> Option<Vec<u8>> {
        let mut status = String::new();
        self.reader.read_line(&mut status).ok()?;
        if !status.contains(" 200 ") {
            return None;
        }
        let mut length = 0usize;
        loop {
            let mut line = String::new();
            self.reader.read_line(&mut line).ok()?;
            let line = line.trim_end();
            if line.is_empty() {
                break;
            }
            if let Some((k, v)) = line.split_once(':')
                && k.eq_ignore_ascii_case("content-length")
            {
                length = v.trim().parse().ok()?;
            }
        }
        let mut body = vec![0u8; length];
        self.reader.read_exact(&mut body).ok()?;
        Some(body)
    }
}

/// The machine's CPU ticks since boot, all and stolen by the hypervisor
/// (`/proc/stat`): a run whose share of stolen time is high ran on a
/// busy host. Only the first eight fields (user .. steal) count: the guest
/// fields are already inside user.
fn machine_ticks() -> (u64, u64) {
    let fields = common::cpu_fields();
    (fields.iter().sum(), fields.get(7).copied().unwrap_or(0))
}

/// CPU time (user + system) of `pid` and its direct children (nginx's
/// workers), from /proc.
fn cpu_seconds(pid: u32) -> f64 {
    let ticks = |pid: &str| -> u64 {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|stat| {
                // Fields after the command name, which is in parentheses.
                let rest = stat.rsplit_once(')')?.1;
                let fields: Vec<&str> = rest.split_whitespace().collect();
                Some(fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?)
            })
            .unwrap_or(0)
    };
    let children =
        std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).unwrap_or_default();
    let total: u64 = ticks(&pid.to_string()) + children.split_whitespace().map(ticks).sum::<u64>();
    // SAFETY: sysconf has no preconditions.
    total as f64 / unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64
}

fn wrk(port: u16, prefix: &str, paths_file: &Path, seconds: u64) -> (f64, f64, f64) {
    let script = paths_file.with_extension("lua");
    std::fs::write(
        &script,
        format!(
            "local paths = {{}}\nfor line in io.lines(\"{}\") do paths[#paths + 1] = line end\n\
             local i = 0\nrequest = function()\n  i = i % #paths + 1\n  return wrk.format(\"GET\", \"{prefix}\" .. paths[i])\nend\n",
            paths_file.display()
        ),
    )
    .unwrap();
    let out = sh(Command::new("wrk")
        .args(["-t2", "-c50", &format!("-d{seconds}s"), "--latency", "-s"])
        .arg(&script)
        .arg(format!("http://127.0.0.1:{port}/")));
    let rps = out
        .lines()
        .find(|l| l.starts_with("Requests/sec:"))
        .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        .unwrap_or(0.0);
    let pct = |p: &str| -> f64 {
        out.lines()
            .find(|l| l.trim_start().starts_with(p))
            .and_then(|l| l.split_whitespace().nth(1))
            .map(|v| {
                let (num, unit) =
                    v.split_at(v.find(|c: char| c.is_alphabetic()).unwrap_or(v.len()));
                let n: f64 = num.parse().unwrap_or(0.0);
                match unit {
                    "us" => n / 1000.0,
                    "ms" => n,
                    "s" => n * 1000.0,
                    _ => n,
                }
            })
            .unwrap_or(0.0)
    };
    assert!(!out.contains("Non-2xx"), "wrk saw errors: {out}");
    (rps, pct("50%"), pct("99%"))
}

fn main() {
    let rounds = arg("--rounds", 3);
    let seconds = arg("--seconds", 10);
    let vole = release_vole();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();

    // The site, committed to `pages` and pushed to vole.
    let work = dir.join("work");
    std::fs::create_dir_all(&work).unwrap();
    sh(git(&work).args(["init", "-q", "-b", "pages"]));
    let files = make_site(&work, arg("--files", 300) as usize);
    sh(git(&work).args(["add", "-A"]));
    sh(git(&work).args(["commit", "-q", "-m", "site"]));
    let total: usize = files.iter().map(|(_, b)| b.len()).sum();
    println!(
        "site_files={} site_mib={:.1}",
        files.len(),
        total as f64 / (1 << 20) as f64
    );
    let data = dir.join("vole-data");
    sh(Command::new(&vole)
        .args(["repo", "create", "alice/site", "--data"])
        .arg(&data));
    // The counters are a server admin's.
    sh(Command::new(&vole)
        .args([
            "user",
            "add",
            "root",
            "--admin",
            "--email",
            "root@example.org",
            "--data",
        ])
        .arg(&data));
    let admin_token = sh(Command::new(&vole)
        .args([
            "token", "create", "stats", "--user", "root", "--scope", "admin", "--data",
        ])
        .arg(&data))
    .lines()
    .last()
    .unwrap_or_default()
    .to_string();
    let vole_port = free_port();
    let mut vole_child = start_vole(&vole, &data, vole_port);
    sh(git(&work).args([
        "push",
        "-q",
        &format!("http://127.0.0.1:{vole_port}/alice/site.git"),
        "pages",
    ]));

    // The same files exported for nginx.
    let export = dir.join("export");
    std::fs::create_dir_all(&export).unwrap();
    let archive = git(&work)
        .args(["archive", "pages"])
        .output()
        .unwrap()
        .stdout;
    let mut tar = Command::new("tar")
        .arg("-x")
        .arg("-C")
        .arg(&export)
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    tar.stdin.take().unwrap().write_all(&archive).unwrap();
    assert!(tar.wait().unwrap().success());
    let nginx_port = free_port();
    let conf = dir.join("nginx.conf");
    let d = dir.display();
    // With vole logging each request, nginx logs each too (its default).
    let access_log = match std::env::var_os("VOLE_BENCH_LOG") {
        Some(_) => format!("{d}/nginx-access.log"),
        None => "off".to_string(),
    };
    std::fs::write(
        &conf,
        format!(
            "worker_processes auto;\nuser root;\ndaemon off;\nerror_log {d}/nginx-error.log;\npid {d}/nginx.pid;\n\
             events {{ worker_connections 1024; }}\nhttp {{\n access_log {access_log};\n sendfile on;\n include /etc/nginx/mime.types;\n\
             client_body_temp_path {d}/nb;\n proxy_temp_path {d}/np;\n fastcgi_temp_path {d}/nf;\n uwsgi_temp_path {d}/nu;\n scgi_temp_path {d}/ns;\n\
             server {{ listen 127.0.0.1:{nginx_port}; root {root}; }}\n}}\n",
            root = export.display()
        ),
    )
    .unwrap();
    let mut nginx = Command::new("nginx")
        .arg("-c")
        .arg(&conf)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    while get(nginx_port, "/section0/page0.html").is_none() {
        std::thread::sleep(Duration::from_millis(20));
    }

    // Verification (and warm-up): every file, from both servers.
    for (name, body) in &files {
        assert_eq!(
            get(vole_port, &format!("/alice/site/-/site/{name}")).as_ref(),
            Some(body),
            "vole {name}"
        );
        assert_eq!(
            get(nginx_port, &format!("/{name}")).as_ref(),
            Some(body),
            "nginx {name}"
        );
    }
    println!("verified_paths={} mismatches=0", files.len());
    let paths_file = dir.join("paths.txt");
    std::fs::write(
        &paths_file,
        files
            .iter()
            .map(|(n, _)| n.as_str())
            .collect::<Vec<_>>()
            .join("\n")
            + "\n",
    )
    .unwrap();

    let mut ratios = Vec::new();
    for round in 0..rounds {
        let mut pair = Vec::new();
        let order: [(&str, u16, &str, u32); 2] = [
            ("vole", vole_port, "/alice/site/-/site/", vole_child.id()),
            ("nginx", nginx_port, "/", nginx.id()),
        ];
        let order: Vec<_> = if round % 2 == 0 {
            order.to_vec()
        } else {
            order.iter().rev().cloned().collect()
        };
        for (name, port, prefix, pid) in order {
            let (cpu_before, started) = (cpu_seconds(pid), Instant::now());
            let machine_before = machine_ticks();
            let (rps, p50, p99) = wrk(port, prefix, &paths_file, seconds);
            let cpu = cpu_seconds(pid) - cpu_before;
            let (total, steal) = machine_ticks();
            let requests = rps * started.elapsed().as_secs_f64();
            println!(
                "server={name} warm_rps={rps:.0} p50_ms={p50:.3} p99_ms={p99:.3} cpu_us_per_req={:.1} steal_pct={:.1} round={round}",
                cpu * 1e6 / requests,
                100.0 * (steal - machine_before.1) as f64
                    / (total - machine_before.0).max(1) as f64
            );
            pair.push((name, rps));
        }
        let v = pair.iter().find(|p| p.0 == "vole").unwrap().1;
        let n = pair.iter().find(|p| p.0 == "nginx").unwrap().1;
        ratios.push(v / n);
    }
    let stats = get_with(
        vole_port,
        "/api/v1/stats",
        &format!("Authorization: Bearer {admin_token}\r\n"),
    )
    .unwrap();
    let stats: serde_json::Value = serde_json::from_slice(&stats).unwrap();
    let (bytes, limit) = (
        stats["site_cache"]["bytes"].as_u64().unwrap(),
        stats["site_cache"]["limit"].as_u64().unwrap(),
    );
    let sendfile = stats["site_cache"]["sendfile_bytes"].as_u64().unwrap();
    println!("cache_bytes={bytes} cache_limit={limit} sendfile_bytes={sendfile}");
    assert!(bytes <= limit);

    // Cold: a restarted vole, page cache dropped if allowed, first request
    // per path on one keep-alive connection.
    let _ = vole_child.kill();
    let _ = vole_child.wait();
    vole_child = start_vole(&vole, &data, vole_port);
    let _ = Command::new("sync").status();
    let dropped = std::fs::write("/proc/sys/vm/drop_caches", "3").is_ok();
    let stream = TcpStream::connect(("127.0.0.1", vole_port)).unwrap();
    stream.set_nodelay(true).unwrap();
    let mut writer = stream.try_clone().unwrap();
    let mut conn = KeepAlive {
        reader: BufReader::new(stream),
    };
    let mut cold = Vec::new();
    for (name, body) in &files {
        let started = Instant::now();
        writer
            .write_all(
                format!("GET /alice/site/-/site/{name} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes(),
            )
            .unwrap();
        let got = conn.read_response().expect("cold response");
        cold.push(started.elapsed().as_secs_f64() * 1000.0);
        assert_eq!(&got, body, "cold {name}");
    }
    cold.sort_by(|a, b| a.partial_cmp(b).unwrap());
    println!(
        "cold_p50_ms={:.3} cold_p99_ms={:.3} cache_dropped={}",
        cold[cold.len() / 2],
        cold[cold.len() * 99 / 100],
        u8::from(dropped)
    );

    let _ = vole_child.kill();
    // SIGTERM, not SIGKILL: nginx's master then stops its workers (a killed
    // master leaves them running, holding the port and this stdout).
    let _ = Command::new("kill")
        .args(["-TERM", &nginx.id().to_string()])
        .status();
    let _ = vole_child.wait();
    let _ = nginx.wait();
    ratios.sort_by(|a, b| a.partial_cmp(b).unwrap());
    println!(
        "warm_ratio median={:.3} min={:.3} max={:.3}",
        median(ratios.clone()),
        ratios[0],
        ratios[ratios.len() - 1]
    );
}
