//! Benchmark harness: what a credential costs a request. The same API
//! read (`GET /api/v1/repos/alice/demo/issues`, a private repo for the
//! signed-in cases and a public twin for the anonymous baseline) asked
//! anonymously, with a Bearer token, with a token in HTTP Basic, and with
//! a password (argon2id), in interleaved rounds on one keep-alive
//! connection each.
//!
//! `cargo run --release --example auth [-- --rounds 5 --requests 2000 --password-requests 40]`
//!
//! Builds the release `vole` first. Prints `credential=.. round=..
//! p50_us=.. p99_us=.. rps=..` per run, then `ratio credential=..
//! median=..` against the anonymous run of the same round. Every response
//! is checked (status 200 and the repo's one issue) before its time
//! counts (verification).

#![allow(clippy::unwrap_used)] // test and benchmark code: a failed unwrap is a failed run

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[path = "../common.rs"]
mod common;
use common::{Conn, arg, free_port, median, release_vole, sh, user_with_token};

fn basic(user: &str, secret: &str) -> String {
    use base64::Engine;
    let encoded = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{secret}"));
    format!("Authorization: Basic {encoded}\r\n")
}

fn main() {
    let rounds = arg("--rounds", 5);
    let requests = arg("--requests", 2000) as usize;
    let password_requests = arg("--password-requests", 40) as usize;
    let vole = release_vole();
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let cli = |args: &[&str]| sh(Command::new(&vole).args(args).arg("--data").arg(&data));
    cli(&["repo", "create", "alice/demo", "--private"]);
    cli(&["repo", "create", "alice/open"]);
    let token = user_with_token(
        &vole,
        &data,
        "alice",
        "correct horse battery staple",
        "write",
    );
    let port = free_port();
    let mut server = Command::new(&vole)
        .args([
            "serve",
            "--password-auth",
            "--api-rate",
            "100000000",
            "--listen",
        ])
        .arg(format!("127.0.0.1:{port}"))
        .arg("--data")
        .arg(&data)
        .env("VOLE_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "vole did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
    // One issue in each repo, so every answer has a body to check.
    for repo in ["demo", "open"] {
        let body = r#"{"title":"bench"}"#;
        let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
        write!(
            stream,
            "POST /api/v1/repos/alice/{repo}/issues HTTP/1.1\r\nHost: x\r\nConnection: close\r\nAuthorization: Bearer {token}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        )
        .unwrap();
        let mut answer = String::new();
        stream.read_to_string(&mut answer).unwrap();
        assert!(answer.starts_with("HTTP/1.1 201"), "{answer}");
    }

    let cases: [(&str, &str, String, usize); 4] = [
        ("anonymous", "open", String::new(), requests),
        (
            "bearer_token",
            "demo",
            format!("Authorization: Bearer {token}\r\n"),
            requests,
        ),
        ("basic_token", "demo", basic("alice", &token), requests),
        (
            "basic_password",
            "demo",
            basic("alice", "correct horse battery staple"),
            password_requests,
        ),
    ];
    let mut ratios: Vec<(&str, Vec<f64>)> = cases[1..].iter().map(|c| (c.0, Vec::new())).collect();
    for round in 0..rounds {
        let mut p50s = Vec::new();
        // Interleaved: each round starts with the next case.
        let start = round as usize % cases.len();
        let order: Vec<usize> = (0..cases.len())
            .map(|i| (start + i) % cases.len())
            .collect();
        for i in order {
            let (name, repo, auth, n) = &cases[i];
            let path = format!("/api/v1/repos/alice/{repo}/issues");
            let mut conn = Conn::open(port);
            let mut times = Vec::with_capacity(*n);
            let started = Instant::now();
            for _ in 0..*n {
                let t = Instant::now();
                let (status, body) = conn.get(&path, auth);
                times.push(t.elapsed().as_secs_f64() * 1e6);
                assert_eq!(status, 200, "{name}: {}", String::from_utf8_lossy(&body));
                assert!(
                    String::from_utf8_lossy(&body).contains("\"title\":\"bench\""),
                    "{name}: the answer is not the repo's issue list"
                );
            }
            let rps = *n as f64 / started.elapsed().as_secs_f64();
            times.sort_by(|a, b| a.partial_cmp(b).unwrap());
            let p99 = times[(times.len() * 99 / 100).min(times.len() - 1)];
            let p50 = median(times);
            println!(
                "credential={name} round={round} p50_us={p50:.1} p99_us={p99:.1} rps={rps:.0}"
            );
            p50s.push((*name, p50));
        }
        let base = p50s.iter().find(|p| p.0 == "anonymous").unwrap().1;
        for (name, values) in &mut ratios {
            let p = p50s.iter().find(|p| p.0 == *name).unwrap().1;
            values.push(p / base);
        }
    }
    for (name, values) in ratios {
        println!(
            "ratio credential={name} vs=anonymous median={:.3}",
            median(values)
        );
    }
    server.kill().unwrap();
    let _ = server.wait();
}
