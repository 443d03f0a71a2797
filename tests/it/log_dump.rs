//! `vole log dump`: text and JSON Lines, while a server runs, and `--follow`.

use std::io::BufRead;
use std::process::Stdio;
use std::time::{Duration, Instant};

use vole_hooks::{Phase, RefMove};
use vole_log::Log;
use vole_meta::MetaWrite;

use crate::support::{TestServer, run_vole, vole};

fn ref_move(i: u64, phase: Phase) -> RefMove {
    RefMove {
        time_ns: 1_764_000_000_000_000_000,
        repo: "alice/vole".into(),
        ref_name: format!("refs/heads/b{i}"),
        old: None,
        new: Some(format!("{:040x}", 0xabc0 + i)),
        actor: "alice".into(),
        client: "127.0.0.1".into(),
        push_id: 7,
        phase,
    }
}

#[test]
fn dump_prints_text_and_json_lines_while_the_server_runs() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    {
        let (refs, _) = Log::<RefMove>::open(&data.join("log"), |_| {}).unwrap();
        refs.commit(&[ref_move(1, Phase::Prepared), ref_move(2, Phase::Prepared)])
            .unwrap();
        refs.commit(&[ref_move(1, Phase::Committed)]).unwrap();
        let (meta, _) = Log::<MetaWrite>::open(&data.join("log"), |_| {}).unwrap();
        meta.commit(&[MetaWrite {
            time_ns: 1_764_000_000_000_000_000,
            repo: "alice/vole".into(),
            entity_id: "01JABC".into(),
            shard: 0x2a,
            kind: "issue".into(),
            body: "{\"title\":\"hi\"}".into(),
            incarnation: String::new(),
        }])
        .unwrap();
    }
    let server = TestServer::builder().data(&data).start();

    let text = run_vole(&data, &["log", "dump"]);
    assert!(
        text.status.success(),
        "{}",
        String::from_utf8_lossy(&text.stderr)
    );
    let text = String::from_utf8(text.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 4, "{text}");
    assert!(
        lines[0].starts_with("refs seq=1 2025-11-24T"),
        "{}",
        lines[0]
    );
    assert!(
        lines[0].contains("alice/vole refs/heads/b1 0000000..")
            && lines[0].contains("prepared actor=alice@127.0.0.1 push=7"),
        "{}",
        lines[0]
    );
    assert!(lines[1].starts_with("refs seq=1 ") && lines[1].contains("refs/heads/b2"));
    assert!(lines[2].starts_with("refs seq=2 ") && lines[2].contains("committed"));
    assert!(
        lines[3].starts_with("meta seq=1 ") && lines[3].contains("issue 01JABC shard=2a"),
        "{}",
        lines[3]
    );

    let json = run_vole(&data, &["log", "dump", "--json"]);
    let rows: Vec<serde_json::Value> = String::from_utf8(json.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(rows.len(), 4);
    assert_eq!(rows[2]["seq"], 2);
    assert_eq!(rows[2]["phase"], "committed");
    assert_eq!(rows[2]["ref"], "refs/heads/b1");
    assert_eq!(rows[2]["old"], serde_json::Value::Null);
    assert_eq!(rows[2]["new"], format!("{:040x}", 0xabc1));
    assert_eq!(rows[3]["log"], "meta");
    assert_eq!(rows[3]["body"], "{\"title\":\"hi\"}");
    server.stop();
}

#[test]
fn dump_follow_prints_records_as_they_are_appended() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let (refs, _) = Log::<RefMove>::open(&data.join("log"), |_| {}).unwrap();
    refs.commit(&[ref_move(1, Phase::Prepared)]).unwrap();
    let mut child = vole(&data)
        .args(["log", "dump", "--follow"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let stdout = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
        {
            let _ = tx.send(line);
        }
    });
    let first = rx
        .recv_timeout(Duration::from_secs(30))
        .expect("first line");
    assert!(first.starts_with("refs seq=1 "), "{first}");
    refs.commit(&[ref_move(2, Phase::Committed)]).unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let second = rx
        .recv_timeout(deadline - Instant::now())
        .expect("--follow did not print the record appended after it started");
    assert!(
        second.starts_with("refs seq=2 ") && second.contains("committed"),
        "{second}"
    );
    let _ = child.kill();
    let _ = child.wait();
}
