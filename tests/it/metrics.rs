//! `GET /metrics` after real pushes, clones, metadata writes and site
//! requests: each family moves by what was done, no label names a repo or
//! a user, and on the main address only a server admin reads it.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::Duration;

use serde_json::json;

use crate::support::*;

const REPO: &str = "zebra/secretproj";
const UPLOAD: &str = r#"route="/{owner}/{repo}/git-upload-pack""#;
const RECEIVE: &str = r#"route="/{owner}/{repo}/git-receive-pack""#;

/// One scrape: every sample by its name and labels as printed.
struct Scrape {
    text: String,
    samples: HashMap<String, f64>,
}

impl Scrape {
    fn parse(text: String) -> Scrape {
        let samples = text
            .lines()
            .filter(|line| !line.starts_with('#') && !line.is_empty())
            .map(|line| {
                let (key, value) = line.rsplit_once(' ').expect("a sample line");
                (key.to_string(), value.parse::<f64>().expect("a number"))
            })
            .collect();
        Scrape { text, samples }
    }

    /// A sample's value; 0 when absent (a series not yet made).
    fn get(&self, key: &str) -> f64 {
        self.samples.get(key).copied().unwrap_or(0.0)
    }
}

fn scrape(addr: SocketAddr) -> Scrape {
    let r = http(addr, "GET /metrics HTTP/1.1", b"");
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(
        r.header("content-type")
            .is_some_and(|t| t.starts_with("text/plain; version=0.0.4")),
        "{:?}",
        r.headers
    );
    Scrape::parse(r.text())
}

/// How much each of `keys` moved from `before` to `after`.
fn moved(before: &Scrape, after: &Scrape, key: &str) -> f64 {
    after.get(key) - before.get(key)
}

#[test]
fn each_family_moves_by_what_was_done_and_no_label_names_a_repo() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    assert!(run_vole(&data, &["repo", "create", REPO]).status.success());
    let admin = user_token(&data, "rootadmin7", true, "admin", &[]);
    let server = TestServer::builder()
        .data(&data)
        .args([
            "--anonymous-push",
            "--metrics-listen",
            "127.0.0.1:0",
            "--max-push-size",
            "1MiB",
        ])
        .start();
    let line = server
        .log
        .wait_for(&["metrics on http://"], Duration::from_secs(10))
        .expect("the metrics listener's address is logged");
    let metrics: SocketAddr = line
        .split("http://")
        .nth(1)
        .and_then(|rest| rest.split('/').next())
        .and_then(|addr| addr.parse().ok())
        .unwrap_or_else(|| panic!("no address in {line:?}"));
    let url = server.url(&format!("/{REPO}.git"));
    let before = scrape(metrics);

    // Two pushes: main, then the site's branch.
    let work = worktree(dir.path(), "work");
    commit_file(&work, "big.bin", &random_bytes(200_000, 3));
    git_ok(&work, &["push", "-q", &url, "main"]);
    git_ok(&work, &["checkout", "-q", "-b", "pages"]);
    commit_file(&work, "page.html", b"<h1>site</h1>\n");
    git_ok(&work, &["push", "-q", &url, "pages"]);
    // A push over the size limit: 413, before any git runs.
    let r = http(
        server.addr,
        &format!(
            "POST /{REPO}.git/git-receive-pack HTTP/1.1\r\nContent-Type: application/x-git-receive-pack-request\r\nContent-Length: 2000000"
        ),
        b"",
    );
    assert_eq!(r.status, 413, "{}", r.text());
    // Two clones of the same commit: the second from the pack cache.
    for target in ["c1", "c2"] {
        git_ok(
            dir.path(),
            &["clone", "-q", "--bare", "-b", "main", &url, target],
        );
    }
    // Three metadata writes.
    for title in ["one", "two", "three"] {
        let body = json!({ "title": title }).to_string();
        let r = http(
            server.addr,
            &format!(
                "POST /api/v1/repos/{REPO}/issues HTTP/1.1\r\nAuthorization: Bearer {admin}\r\nContent-Type: application/json\r\nContent-Length: {}",
                body.len()
            ),
            body.as_bytes(),
        );
        assert_eq!(r.status, 201, "{}", r.text());
    }
    // The same site file twice: a miss, then a hit.
    for _ in 0..2 {
        let r = http_get(server.addr, &format!("/{REPO}/-/site/page.html"));
        assert_eq!(r.status, 200, "{}", r.text());
    }
    // Folded before the second scrape.
    assert!(
        eventually(Duration::from_secs(10), || {
            scrape(metrics).get("vole_meta_fold_lag_writes") == 0.0
        }),
        "the metadata writes were never folded"
    );
    let after = scrape(metrics);
    let d = |key: &str| moved(&before, &after, key);
    let expect = |key: &str, want: f64| {
        assert_eq!(
            d(key),
            want,
            "{key} moved by {} where {want} was done",
            d(key)
        );
    };

    // Requests by route and status: a protocol v2 clone posts twice
    // (ls-refs, fetch); a push posts once.
    expect(
        &format!("vole_http_requests_total{{{UPLOAD},status=\"200\"}}"),
        4.0,
    );
    expect(
        &format!("vole_http_requests_total{{{RECEIVE},status=\"200\"}}"),
        2.0,
    );
    expect(
        &format!("vole_http_requests_total{{{RECEIVE},status=\"413\"}}"),
        1.0,
    );
    expect(
        &format!("vole_http_request_duration_seconds_count{{{UPLOAD}}}"),
        4.0,
    );
    let site = |route: &str| {
        d(&format!(
            "vole_http_requests_total{{route=\"{route}\",status=\"200\"}}"
        ))
    };
    assert_eq!(
        site("/{owner}/{repo}/-/site/{*path}") + site("site (warm)"),
        2.0,
        "{}",
        after.text
    );
    assert!(d("vole_push_bytes_total") >= 200_000.0, "{}", after.text);
    for service in ["upload-pack", "receive-pack"] {
        assert_eq!(
            after.get(&format!(
                "vole_git_children_running{{service=\"{service}\"}}"
            )),
            0.0
        );
        assert!(after.get(&format!("vole_git_children_limit{{service=\"{service}\"}}")) >= 1.0);
    }
    // The logs: every fsync is in the histogram, each write is a frame.
    for log in ["refs", "meta"] {
        let fsyncs = d(&format!("vole_log_fsyncs_total{{log=\"{log}\"}}"));
        assert!(fsyncs >= 1.0, "no {log} log fsync counted");
        assert_eq!(
            d(&format!("vole_log_fsync_seconds_count{{log=\"{log}\"}}")),
            fsyncs
        );
    }
    // Three writes, and the one reservation of issue ids the first took.
    expect("vole_log_frames_total{log=\"meta\"}", 4.0);
    expect("vole_log_group_frames_sum{log=\"meta\"}", 4.0);
    assert!(d("vole_log_frames_total{log=\"refs\"}") >= 2.0);
    // The fold: three writes, in at least one commit.
    expect("vole_meta_folded_writes_total", 4.0);
    expect("vole_meta_fold_batch_writes_sum", 4.0);
    assert!(d("vole_meta_fold_commits_total") >= 1.0);
    // The caches.
    expect("vole_site_cache_misses_total", 1.0);
    expect("vole_site_cache_hits_total", 1.0);
    assert!(after.get("vole_site_cache_bytes") > 0.0);
    expect("vole_pack_cache_misses_total", 1.0);
    expect("vole_pack_cache_hits_total", 1.0);
    assert!(d("vole_pack_cache_served_bytes_total") >= 200_000.0);

    // No label names a repo or a user.
    for name in ["zebra", "secretproj", "rootadmin7"] {
        assert!(
            !after.text.contains(name),
            "the metrics name {name:?}:\n{}",
            after.text
        );
    }
    // On the main address: a server admin only.
    let anonymous = http(server.addr, "GET /metrics HTTP/1.1", b"");
    assert_ne!(anonymous.status, 200, "{}", anonymous.text());
    let admin_scrape = http(
        server.addr,
        &format!("GET /metrics HTTP/1.1\r\nAuthorization: Bearer {admin}"),
        b"",
    );
    assert_eq!(admin_scrape.status, 200, "{}", admin_scrape.text());
    assert!(admin_scrape.text().contains("vole_pack_cache_hits_total"));
}
