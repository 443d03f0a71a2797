//! Webhook deliveries when the receiver misbehaves: an answer of 500, one
//! past the timeout, a connection closed mid-answer (each retried with
//! the same delivery id and body, the next event only after the 2xx); a
//! receiver down while vole is killed -9 and started again (every event
//! delivered, in order, repeats with their ids); a target the guard
//! refuses at delivery, through a name too. The misbehaving receiver is
//! this file's own, a few lines over a socket: the faults are its.

use std::collections::VecDeque;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::*;
use crate::webhook_deliveries::Team;

/// What the receiver does with one request.
#[derive(Debug, Clone, Copy)]
enum Answer {
    Status(u16),
    /// Waits this long, then 200.
    Slow(Duration),
    /// Half a status line, then the connection closed.
    HangUp,
    /// A 302 to this address.
    Redirect(SocketAddr),
}

/// One request as received: its delivery id, event, body (as JSON, or
/// a form's `payload` field), raw body, content type and signature.
#[derive(Debug, Clone)]
struct Seen {
    delivery: String,
    event: String,
    body: Value,
    raw: Vec<u8>,
    content_type: String,
    signature: String,
}

struct Flaky {
    addr: SocketAddr,
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl Flaky {
    /// Listens on `addr` ("127.0.0.1:0" for any port), answering as
    /// `plan` says and then 200.
    fn start(addr: &str, plan: &[Answer]) -> Flaky {
        let listener = TcpListener::bind(addr).unwrap();
        let addr = listener.local_addr().unwrap();
        let seen: Arc<Mutex<Vec<Seen>>> = Arc::default();
        let plan = Arc::new(Mutex::new(plan.iter().copied().collect::<VecDeque<_>>()));
        let kept = seen.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let answer = plan.lock().unwrap().pop_front();
                let kept = kept.clone();
                std::thread::spawn(move || {
                    serve(stream, answer.unwrap_or(Answer::Status(200)), &kept)
                });
            }
        });
        Flaky { addr, seen }
    }

    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }

    fn wait_for(&self, count: usize, bound: Duration) -> Vec<Seen> {
        let deadline = Instant::now() + bound;
        while self.seen().len() < count && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        self.seen()
    }
}

fn serve(mut stream: TcpStream, answer: Answer, seen: &Mutex<Vec<Seen>>) {
    stream.set_read_timeout(Some(Duration::from_secs(10))).ok();
    let mut raw = Vec::new();
    let mut buf = [0u8; 8192];
    let head_end = loop {
        let Ok(n) = stream.read(&mut buf) else { return };
        if n == 0 {
            return;
        }
        raw.extend_from_slice(&buf[..n]);
        if let Some(at) = raw.windows(4).position(|w| w == b"\r\n\r\n") {
            break at + 4;
        }
    };
    let head = String::from_utf8_lossy(&raw[..head_end]).to_string();
    let header = |name: &str| {
        head.lines()
            .find_map(|l| {
                let (k, v) = l.split_once(':')?;
                k.eq_ignore_ascii_case(name).then(|| v.trim().to_string())
            })
            .unwrap_or_default()
    };
    let length: usize = header("content-length").parse().unwrap_or(0);
    while raw.len() < head_end + length {
        let Ok(n) = stream.read(&mut buf) else { return };
        if n == 0 {
            break;
        }
        raw.extend_from_slice(&buf[..n]);
    }
    let body = &raw[head_end..];
    let parsed = serde_json::from_slice(body).unwrap_or_else(|_| {
        // A form: its `payload` field.
        form_payload(body)
            .and_then(|json| serde_json::from_str(&json).ok())
            .unwrap_or(Value::Null)
    });
    seen.lock().unwrap().push(Seen {
        delivery: header("x-gitea-delivery"),
        event: header("x-gitea-event"),
        body: parsed,
        raw: body.to_vec(),
        content_type: header("content-type"),
        signature: header("x-gitea-signature"),
    });
    let ok = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok";
    match answer {
        Answer::Status(code) => {
            let _ = write!(
                stream,
                "HTTP/1.1 {code} Status\r\nContent-Length: 4\r\nConnection: close\r\n\r\nfail"
            );
        }
        Answer::Slow(wait) => {
            std::thread::sleep(wait);
            let _ = stream.write_all(ok.as_bytes());
        }
        Answer::HangUp => {
            let _ = stream.write_all(b"HTTP/1.1 20");
        }
        Answer::Redirect(to) => {
            let _ = write!(
                stream,
                "HTTP/1.1 302 Found\r\nLocation: http://{to}/elsewhere\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
            );
        }
    }
}

/// A form body's `payload` field.
fn form_payload(body: &[u8]) -> Option<String> {
    url::form_urlencoded::parse(body)
        .find(|(name, _)| name == "payload")
        .map(|(_, value)| value.into_owned())
}

/// HMAC-SHA256 of `body` with `secret`, hex, as Python's hmac computes it
/// (the receivers' side, not vole's code).
fn python_hmac(secret: &str, body: &[u8]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("body");
    std::fs::write(&path, body).unwrap();
    let out = std::process::Command::new("python3")
        .args([
            "-c",
            "import hmac,hashlib,sys;print(hmac.new(sys.argv[1].encode(),open(sys.argv[2],'rb').read(),hashlib.sha256).hexdigest())",
            secret,
        ])
        .arg(&path)
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// Retries 200 ms apart, a delivery 1 s at most.
const FAST_RETRIES: &[&str] = &[
    "--webhook-retry",
    "200ms,200ms,200ms,200ms,200ms,200ms",
    "--webhook-timeout",
    "1s",
];

fn pushed_after(seen: &Seen) -> String {
    seen.body["after"].as_str().unwrap_or_default().to_string()
}

#[test]
fn a_failed_delivery_is_tried_again_with_its_id_until_a_2xx_and_only_then_the_next() {
    let team = Team::new(FAST_RETRIES);
    let receiver = Flaky::start(
        "127.0.0.1:0",
        &[
            Answer::Status(500),
            Answer::Slow(Duration::from_secs(3)),
            Answer::HangUp,
        ],
    );
    let hook = team.hook(&format!("http://{}/hook", receiver.addr), r#"["push"]"#);
    team.push("main:main");
    let first = git_ok(&team.work, &["rev-parse", "HEAD"])
        .trim()
        .to_string();
    let second = commit_file(&team.work, "two.txt", b"two\n");
    team.push("main:main");
    let seen = receiver.wait_for(5, Duration::from_secs(30));
    assert!(seen.len() >= 5, "{seen:?}");
    // The first event four times (500, timed out, cut, taken), one id and
    // one body; only then the second.
    for attempt in &seen[..4] {
        assert_eq!(
            attempt.delivery, seen[0].delivery,
            "a retry changed the delivery id"
        );
        assert_eq!(attempt.body, seen[0].body, "a retry changed the body");
        assert_eq!(pushed_after(attempt), first);
    }
    assert_eq!(
        pushed_after(&seen[4]),
        second,
        "the next event came before the first was taken"
    );
    assert_ne!(seen[4].delivery, seen[0].delivery);
    assert_eq!(seen[0].event, "push");
    // The history says what happened, newest first.
    let history = team.deliveries(hook);
    let codes: Vec<u64> = history
        .iter()
        .rev()
        .map(|d| d["status_code"].as_u64().unwrap())
        .collect();
    assert_eq!(codes, [500, 0, 0, 200, 200], "{history:?}");
    let oldest: Vec<&Value> = history.iter().rev().collect();
    assert!(
        oldest[1]["status"].as_str().unwrap().contains("timed out"),
        "{}",
        oldest[1]
    );
    assert_eq!(oldest[3]["attempt"], 4);
    assert_eq!(
        oldest[3]["request"]["headers"]["X-Gitea-Delivery"],
        seen[0].delivery.as_str()
    );
}

#[test]
fn events_pending_when_vole_is_killed_are_all_delivered_after_the_restart_in_order() {
    let mut team = Team::new(FAST_RETRIES);
    // A port that refuses connections until the receiver starts on it.
    let port = free_port();
    let hook = team.hook(&format!("http://127.0.0.1:{port}/hook"), r#"["push"]"#);
    team.push("main:main");
    let mut heads = vec![
        git_ok(&team.work, &["rev-parse", "HEAD"])
            .trim()
            .to_string(),
    ];
    for i in 0..3 {
        heads.push(commit_file(&team.work, &format!("f{i}.txt"), b"x\n"));
        team.push("main:main");
    }
    // Tried and failed (the receiver is down), then vole killed -9.
    let deadline = Instant::now() + Duration::from_secs(20);
    while team.deliveries(hook).is_empty() {
        assert!(Instant::now() < deadline, "no attempt was made");
        std::thread::sleep(Duration::from_millis(50));
    }
    let failed = team.deliveries(hook);
    assert!(
        failed[0]["status_code"] == 0 && failed[0]["delivered"] == false,
        "{failed:?}"
    );
    drop(team.forge.take_server()); // SIGKILL
    team.forge.restart();
    let receiver = Flaky::start(&format!("127.0.0.1:{port}"), &[]);
    let seen = receiver.wait_for(heads.len(), Duration::from_secs(30));
    // Every push, in order (a repeat allowed, with its delivery id).
    let mut order: Vec<String> = Vec::new();
    let mut ids: std::collections::HashMap<String, String> = Default::default();
    for s in &seen {
        let after = pushed_after(s);
        if let Some(id) = ids.get(&after) {
            assert_eq!(
                id, &s.delivery,
                "a repeat of {after} had another delivery id"
            );
            continue;
        }
        ids.insert(after.clone(), s.delivery.clone());
        order.push(after);
    }
    assert_eq!(
        order, heads,
        "an acknowledged push was lost or came out of order"
    );
}

#[test]
fn a_target_the_guard_refuses_is_refused_at_delivery_through_a_name_too() {
    let mut team = Team::new(FAST_RETRIES);
    let receiver = Flaky::start("127.0.0.1:0", &[]);
    let port = receiver.addr.port();
    let by_name = team.hook(&format!("http://localhost:{port}/hook"), r#"["push"]"#);
    let by_address = team.hook(&format!("http://127.0.0.1:{port}/hook"), r#"["push"]"#);
    team.push("main:main");
    assert_eq!(
        receiver.wait_for(2, Duration::from_secs(20)).len(),
        2,
        "allowed, delivered"
    );
    // Loopback no longer allowed: the hooks stay, their deliveries refused.
    let mut flags = vec!["--webhook-allow", "192.0.2.0/24"];
    flags.extend_from_slice(FAST_RETRIES);
    team.forge.restart_with(&flags);
    commit_file(&team.work, "more.txt", b"more\n");
    team.push("main:main");
    for hook in [by_name, by_address] {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let history = team.deliveries(hook);
            if history.len() >= 2 {
                let status = history[0]["status"].as_str().unwrap_or_default();
                assert!(status.contains("loopback"), "hook {hook}: {status}");
                assert_eq!(history[0]["status_code"], 0);
                break;
            }
            assert!(
                Instant::now() < deadline,
                "hook {hook}: no refused attempt: {history:?}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(receiver.seen().len(), 2, "a refused target was reached");
}

#[test]
fn a_push_of_many_refs_gives_events_up_to_a_bound_then_one_that_counts_the_rest() {
    let team = Team::new(FAST_RETRIES);
    let receiver = Flaky::start("127.0.0.1:0", &[]);
    team.hook(&format!("http://{}/hook", receiver.addr), r#"["push"]"#);
    team.push("main:main");
    assert_eq!(receiver.wait_for(1, Duration::from_secs(20)).len(), 1);
    for i in 0..130 {
        git_ok(&team.work, &["tag", &format!("t{i:03}")]);
    }
    team.push("refs/tags/*:refs/tags/*");
    // 100 tags' pushes, then one that says how many it left out.
    let seen = receiver.wait_for(1 + 101, Duration::from_secs(60));
    std::thread::sleep(Duration::from_millis(500));
    let seen = receiver.seen().len().max(seen.len());
    let all = receiver.seen();
    assert_eq!(seen, 102, "not 100 events and a count: {}", all.len());
    let tags = all[1..101]
        .iter()
        .filter(|s| {
            s.body["ref"]
                .as_str()
                .is_some_and(|r| r.starts_with("refs/tags/t"))
        })
        .count();
    assert_eq!(tags, 100);
    assert_eq!(all[101].body["refs_left_out"], 30, "{}", all[101].body);
}

#[test]
fn the_settings_page_shows_a_failing_hook_its_deliveries_and_sends_one_again() {
    let mut team = Team::new(&["--webhook-retry", "100ms", "--webhook-timeout", "1s"]);
    let port = free_port();
    let hook = team.hook(&format!("http://127.0.0.1:{port}/hook"), r#"["push"]"#);
    team.push("main:main");
    // One retry, then failing.
    let deadline = Instant::now() + Duration::from_secs(20);
    while team.deliveries(hook).len() < 2 {
        assert!(Instant::now() < deadline, "the hook was not tried twice");
        std::thread::sleep(Duration::from_millis(50));
    }
    set_password(&team.forge.data, "alice", "correct horse battery staple");
    let mut alice = Browser::at(&team.forge, 1);
    assert_eq!(
        alice
            .sign_in("alice", "correct horse battery staple", "/")
            .status,
        303
    );
    let page = alice.get("/alice/repo/-/settings");
    let html = page.text();
    assert!(
        html.contains("failing:"),
        "the page does not say the hook is failing: {html}"
    );
    assert!(
        html.contains("Connection refused") || html.contains("connect"),
        "{html}"
    );
    let delivery = team.deliveries(hook)[0]["id"].as_str().unwrap().to_string();
    assert!(
        html.contains(&delivery),
        "the page does not list the delivery"
    );
    // The receiver comes up; Redeliver sends it at once, with its id.
    let receiver = Flaky::start(&format!("127.0.0.1:{port}"), &[]);
    let csrf = hidden_field(&html, "csrf");
    let id = hook.to_string();
    let sent = alice.post(
        "/alice/repo/-/settings/hooks",
        &[
            ("csrf", csrf.as_str()),
            ("action", "redeliver"),
            ("id", &id),
            ("delivery", &delivery),
        ],
        "",
    );
    assert_eq!(sent.status, 303, "{}", sent.text());
    let seen = receiver.wait_for(1, Duration::from_secs(10));
    assert_eq!(seen[0].delivery, delivery, "a redelivery changed its id");
    let history = team.deliveries(hook);
    assert!(
        history
            .iter()
            .any(|d| d["redelivery"] == true && d["status_code"] == 200)
    );
    drop(team.forge.take_server());
}

#[test]
fn a_form_hook_is_signed_over_its_json_a_branch_filter_holds_and_a_redirect_is_not_followed() {
    let team = Team::new(FAST_RETRIES);
    let receiver = Flaky::start("127.0.0.1:0", &[]);
    let elsewhere = Flaky::start("127.0.0.1:0", &[]);
    let redirecting = Flaky::start("127.0.0.1:0", &[Answer::Redirect(elsewhere.addr)]);
    let body = |url: String, content: &str, filter: &str| {
        serde_json::json!({"type": "gitea", "active": true, "events": ["push"],
            "branch_filter": filter,
            "config": {"url": url, "content_type": content, "secret": "form secret"}})
    };
    let api = team.caller();
    for made in [
        body(format!("http://{}/form", receiver.addr), "form", "rel*"),
        body(format!("http://{}/moved", redirecting.addr), "json", ""),
    ] {
        let (status, said) = api.call("POST", "/hooks", Some(made));
        assert_eq!(status, 201, "{said}");
    }
    team.push("main:main");
    team.push("main:refs/heads/release-1");
    let seen = receiver.wait_for(1, Duration::from_secs(20));
    std::thread::sleep(Duration::from_millis(500));
    let seen_all = receiver.seen();
    assert_eq!(
        seen_all.len(),
        1,
        "the branch filter let another branch through: {seen:?}"
    );
    let form = &seen_all[0];
    assert_eq!(form.body["ref"], "refs/heads/release-1");
    assert_eq!(form.content_type, "application/x-www-form-urlencoded");
    assert!(form.raw.starts_with(b"payload="), "not a form");
    // Gitea signs the JSON the form carries, not the form.
    let json = form_payload(&form.raw).unwrap();
    assert_eq!(form.signature, python_hmac("form secret", json.as_bytes()));
    // The redirect was answered, not followed: a failed attempt, retried.
    let redirected = redirecting.wait_for(2, Duration::from_secs(20));
    assert!(redirected.len() >= 2, "a 302 was taken as delivered");
    assert!(elsewhere.seen().is_empty(), "a redirect was followed");
}
