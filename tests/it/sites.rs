//! Sites served from git trees: every resolution rule, the headers, a push
//! seen by the very next request, the cache's byte bound, traversal, the
//! sandbox, domains, and a big blob streamed to several clients at once.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::time::Duration;

use serde_json::Value;

use crate::support::*;

struct Site {
    server: TestServer,
    _dir: tempfile::TempDir,
    work: PathBuf,
    /// `Authorization` of a server admin (the counters and the repo's
    /// settings are an admin's).
    admin: String,
}

impl Site {
    /// A server with `alice/repo` and a `pages` branch holding `files`.
    fn start(flags: &[&str], files: &[(&str, &[u8])]) -> Site {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        assert!(
            run_vole(&data, &["repo", "create", "alice/repo"])
                .status
                .success()
        );
        let admin = format!(
            "Authorization: Bearer {}",
            user_token(&data, "root", true, "admin", &[])
        );
        let mut builder = TestServer::builder().data(&data).arg("--anonymous-push");
        for flag in flags {
            builder = builder.arg(flag);
        }
        let server = builder.start();
        let work = dir.path().join("work");
        std::fs::create_dir_all(&work).unwrap();
        git_ok(&work, &["init", "-q", "-b", "pages"]);
        let site = Site {
            server,
            _dir: dir,
            work,
            admin,
        };
        site.publish(files);
        site
    }

    /// Writes `files`, commits and pushes `pages`.
    fn publish(&self, files: &[(&str, &[u8])]) {
        for (name, content) in files {
            let path = self.work.join(name);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, content).unwrap();
        }
        git_ok(&self.work, &["add", "-A"]);
        git_ok(
            &self.work,
            &["commit", "-q", "--allow-empty", "-m", "publish"],
        );
        git_ok(
            &self.work,
            &["push", "-q", &self.server.url("/alice/repo.git"), "pages"],
        );
    }

    fn get(&self, path: &str) -> HttpResponse {
        http_get(self.server.addr, &format!("/alice/repo/-/site{path}"))
    }

    fn request(&self, head: &str) -> HttpResponse {
        http(self.server.addr, head, b"")
    }

    /// The server's counters, as its admin.
    fn stats(&self) -> Value {
        let r = http(
            self.server.addr,
            &format!("GET /api/v1/stats HTTP/1.1\r\n{}", self.admin),
            b"",
        );
        assert_eq!(r.status, 200, "{}", r.text());
        serde_json::from_slice(&r.body).unwrap()
    }

    fn blob_id(&self, file: &str) -> String {
        git_ok(&self.work, &["rev-parse", &format!("HEAD:{file}")])
            .trim()
            .to_string()
    }
}

fn basic_files() -> Vec<(&'static str, &'static [u8])> {
    vec![
        ("index.html", b"<h1>home</h1>\n"),
        ("docs/index.html", b"<h1>docs</h1>\n"),
        ("docs/guide.html", b"<h1>guide</h1>\n"),
        ("404.html", b"<h1>lost?</h1>\n"),
        ("data/app.json", b"{\"ok\":true}\n"),
        ("img/logo.png", b"\x89PNG\r\n\x1a\nnot really"),
    ]
}

#[test]
fn every_resolution_rule() {
    let site = Site::start(&[], &basic_files());
    let ok = |path: &str, body: &str| {
        let r = site.get(path);
        assert_eq!((r.status, r.text()), (200, body.to_string()), "{path}");
    };
    ok("/", "<h1>home</h1>\n");
    ok("/docs/", "<h1>docs</h1>\n");
    ok("/docs/guide.html", "<h1>guide</h1>\n");
    let moved = |path: &str, to: &str| {
        let r = site.get(path);
        assert_eq!(r.status, 301, "{path}");
        assert_eq!(r.header("location"), Some(to), "{path}");
    };
    moved("", "/alice/repo/-/site/");
    moved("/docs", "/alice/repo/-/site/docs/");
    moved("/docs/index.html", "/alice/repo/-/site/docs/");
    moved("/index.html", "/alice/repo/-/site/");
    // Not found: the site's own 404.html, with status 404.
    let missing = site.get("/no/such/page");
    assert_eq!(
        (missing.status, missing.text().as_str()),
        (404, "<h1>lost?</h1>\n")
    );
    let file_as_dir = site.get("/docs/guide.html/");
    assert_eq!(file_as_dir.status, 404);
    let dir_without_index = site.get("/img/");
    assert_eq!(dir_without_index.status, 404);

    // A symlink (even one pointing inside) and a submodule are not served.
    std::os::unix::fs::symlink("index.html", site.work.join("link.html")).unwrap();
    std::os::unix::fs::symlink("/etc/passwd", site.work.join("passwd")).unwrap();
    let head = git_ok(&site.work, &["rev-parse", "HEAD"]);
    git_ok(
        &site.work,
        &[
            "update-index",
            "--add",
            "--cacheinfo",
            &format!("160000,{},sub", head.trim()),
        ],
    );
    site.publish(&[]);
    for path in ["/link.html", "/passwd", "/sub", "/sub/"] {
        assert_eq!(site.get(path).status, 404, "{path} was served");
    }

    // Without a 404.html: a plain 404.
    git_ok(&site.work, &["rm", "-q", "404.html"]);
    site.publish(&[]);
    let plain = site.get("/nothing");
    assert_eq!((plain.status, plain.text().as_str()), (404, "not found\n"));
}

#[test]
fn no_path_escapes_the_tree() {
    let site = Site::start(&[], &basic_files());
    let long = format!("/{}", "a/".repeat(80));
    for path in [
        "/../../../etc/passwd",
        "/docs/../../../../etc/passwd",
        "/%2e%2e/%2e%2e/etc/passwd",
        "/docs%2f..%2f..%2fdata",
        "/docs/%2e/guide.html",
        "/docs//guide.html",
        "/docs%5cguide.html",
        "/index.html%00.png",
        long.as_str(),
    ] {
        let r = site.get(path);
        assert!(
            r.status == 404 || r.status == 400,
            "{path} answered {} {:?}",
            r.status,
            r.text()
        );
        assert!(!r.text().contains("root:"), "{path} leaked a file");
    }
}

#[test]
fn headers_etag_304_head_gzip_and_ranges() {
    let css = "body { color: red; }\n".repeat(100);
    let mut files = basic_files();
    files.push(("style.css", css.as_bytes()));
    let site = Site::start(&[], &files);

    let page = site.get("/docs/guide.html");
    let etag = format!("\"{}\"", site.blob_id("docs/guide.html"));
    assert_eq!(page.header("etag"), Some(etag.as_str()));
    assert_eq!(
        page.header("content-type"),
        Some("text/html; charset=utf-8")
    );
    assert_eq!(page.header("x-content-type-options"), Some("nosniff"));
    assert_eq!(page.header("cache-control"), Some("public, max-age=60"));
    assert_eq!(page.header("content-length"), Some("15"));
    assert_eq!(
        site.get("/data/app.json").header("content-type"),
        Some("application/json; charset=utf-8")
    );
    assert_eq!(
        site.get("/img/logo.png").header("content-type"),
        Some("image/png")
    );

    let cached = site.request(&format!(
        "GET /alice/repo/-/site/docs/guide.html HTTP/1.1\r\nIf-None-Match: {etag}"
    ));
    assert_eq!(cached.status, 304);
    assert!(cached.body.is_empty());

    let head = site.request("HEAD /alice/repo/-/site/docs/guide.html HTTP/1.1");
    assert_eq!(head.status, 200);
    assert_eq!(head.header("content-length"), Some("15"));
    assert!(head.body.is_empty(), "HEAD sent a body");

    let gz = site.request("GET /alice/repo/-/site/style.css HTTP/1.1\r\nAccept-Encoding: gzip, br");
    assert_eq!(gz.header("content-encoding"), Some("gzip"));
    assert_eq!(
        gz.header("vary"),
        Some("Accept-Encoding, Authorization, Cookie")
    );
    assert!(
        gz.body.len() < css.len() / 4,
        "gzip did not compress: {} bytes",
        gz.body.len()
    );
    let mut plain = String::new();
    flate2::read::GzDecoder::new(&gz.body[..])
        .read_to_string(&mut plain)
        .unwrap();
    assert_eq!(plain, css);
    let identity = site.get("/style.css");
    assert_eq!(identity.header("content-encoding"), None);
    // Two representations, two entity tags; each revalidates itself only.
    let gz_tag = gz.header("etag").unwrap().to_string();
    let plain_tag = identity.header("etag").unwrap().to_string();
    assert_ne!(gz_tag, plain_tag, "the gzip coding has its own entity tag");
    let again = site.request(&format!(
        "GET /alice/repo/-/site/style.css HTTP/1.1\r\nAccept-Encoding: gzip\r\nIf-None-Match: {gz_tag}"
    ));
    assert_eq!(again.status, 304);
    let crossed = site.request(&format!(
        "GET /alice/repo/-/site/style.css HTTP/1.1\r\nIf-None-Match: {gz_tag}"
    ));
    assert_eq!(
        crossed.status, 200,
        "the gzip tag does not validate the identity bytes"
    );
    assert_eq!(identity.text(), css);

    let part = site.request("GET /alice/repo/-/site/style.css HTTP/1.1\r\nRange: bytes=5-9");
    assert_eq!(part.status, 206);
    assert_eq!(
        part.header("content-range"),
        Some(format!("bytes 5-9/{}", css.len()).as_str())
    );
    assert_eq!(part.text(), &css[5..10]);
    let tail = site.request("GET /alice/repo/-/site/style.css HTTP/1.1\r\nRange: bytes=-4");
    assert_eq!(tail.text(), &css[css.len() - 4..]);
    let beyond = site.request("GET /alice/repo/-/site/style.css HTTP/1.1\r\nRange: bytes=999999-");
    assert_eq!(beyond.status, 416);
    assert_eq!(
        beyond.header("content-range"),
        Some(format!("bytes */{}", css.len()).as_str())
    );
}

#[test]
fn ranges_of_a_streamed_blob_are_the_right_bytes() {
    // Over the stream threshold, a file is read from a git child, and a
    // range skips the bytes before it in the child's output.
    let blob = random_bytes(300_000, 7);
    let mut files = basic_files();
    files.push(("big.bin", &blob));
    let site = Site::start(&["--site-stream-threshold", "64KiB"], &files);
    let whole = site.get("/big.bin");
    assert_eq!(whole.status, 200);
    assert!(whole.body == blob, "the whole streamed blob differs");
    for (range, start, end) in [
        ("bytes=0-9", 0, 9),
        ("bytes=200000-200099", 200_000, 200_099),
        ("bytes=-5", 299_995, 299_999),
        ("bytes=299990-", 299_990, 299_999),
    ] {
        let part = site.request(&format!(
            "GET /alice/repo/-/site/big.bin HTTP/1.1\r\nRange: {range}"
        ));
        assert_eq!(part.status, 206, "{range}");
        assert_eq!(
            part.header("content-range"),
            Some(format!("bytes {start}-{end}/300000").as_str()),
            "{range}"
        );
        assert!(
            part.body == blob[start..=end],
            "{range}: the body is not those bytes of the blob"
        );
    }
    let head = site.request("HEAD /alice/repo/-/site/big.bin HTTP/1.1");
    assert_eq!(head.header("content-length"), Some("300000"));
    assert!(head.body.is_empty(), "HEAD sent a body");
}

#[test]
fn the_request_right_after_a_push_serves_the_new_bytes() {
    let site = Site::start(&[], &basic_files());
    assert_eq!(site.get("/").text(), "<h1>home</h1>\n");
    for round in 0..5 {
        let body = format!("<h1>version {round}</h1>\n");
        site.publish(&[("index.html", body.as_bytes())]);
        // No sleep: the push's committed hook returned before git said ok.
        assert_eq!(
            site.get("/").text(),
            body,
            "round {round} served stale content"
        );
    }
}

#[test]
fn the_cache_never_exceeds_its_byte_bound() {
    let mut owned: Vec<(String, Vec<u8>)> = Vec::new();
    for i in 0..40 {
        owned.push((format!("f{i}.bin"), random_bytes(8 << 10, i as u64 + 1)));
    }
    let files: Vec<(&str, &[u8])> = owned
        .iter()
        .map(|(n, b)| (n.as_str(), b.as_slice()))
        .collect();
    let site = Site::start(&["--site-cache-size", "64KiB"], &files);
    let stats = |site: &Site| -> (u64, u64) {
        let v = site.stats();
        (
            v["site_cache"]["bytes"].as_u64().unwrap(),
            v["site_cache"]["limit"].as_u64().unwrap(),
        )
    };
    let mut peak = 0;
    for round in 0..2 {
        for (name, content) in &owned {
            let r = site.get(&format!("/{name}"));
            assert_eq!(&r.body, content, "round {round} {name}");
            let (bytes, limit) = stats(&site);
            assert_eq!(limit, 64 << 10);
            assert!(
                bytes <= limit,
                "cache holds {bytes} bytes over its {limit}-byte bound"
            );
            peak = peak.max(bytes);
        }
    }
    // The workload (320 KiB) is 5x the bound: the cache filled and evicted.
    assert!(
        peak > 48 << 10,
        "the cache never filled (peak {peak}); the bound was not exercised"
    );
}

/// Files large enough to be cached in sealed memfds go out with sendfile:
/// byte for byte (also after their entries were evicted and refilled), all
/// of them counted by the server, within the cache's byte bound.
#[test]
fn large_cached_files_are_sent_with_sendfile_byte_for_byte() {
    let owned: Vec<(String, Vec<u8>)> = (0..12)
        .map(|i| {
            (
                format!("big{i}.bin"),
                random_bytes((40 << 10) + i * 1000, i as u64 + 7),
            )
        })
        .collect();
    let files: Vec<(&str, &[u8])> = owned
        .iter()
        .map(|(n, b)| (n.as_str(), b.as_slice()))
        .collect();
    let site = Site::start(&["--site-cache-size", "256KiB"], &files);
    let stats = |site: &Site| -> Value { site.stats() };
    let before = stats(&site)["site_cache"]["sendfile_bytes"]
        .as_u64()
        .unwrap();
    let mut served = 0;
    for round in 0..2 {
        for (name, content) in &owned {
            let r = site.get(&format!("/{name}"));
            assert_eq!(r.status, 200);
            assert!(&r.body == content, "round {round}: {name} arrived altered");
            served += content.len() as u64;
            let cache = &stats(&site)["site_cache"];
            assert!(
                cache["bytes"].as_u64() <= cache["limit"].as_u64(),
                "{cache}"
            );
        }
    }
    // A range is sent from its offset in the memfd.
    let (name, content) = &owned[3];
    let r = site.request(&format!(
        "GET /alice/repo/-/site/{name} HTTP/1.1\r\nRange: bytes=1000-30999"
    ));
    assert_eq!(r.status, 206);
    assert!(r.body == content[1000..31000], "the range arrived altered");
    served += 30000;
    let sent = stats(&site)["site_cache"]["sendfile_bytes"]
        .as_u64()
        .unwrap()
        - before;
    assert!(
        sent >= served,
        "{sent} of {served} body bytes were sent with sendfile from the sealed cache"
    );
}

#[test]
fn ui_origin_sites_are_sandboxed_and_own_domains_are_not_and_a_repo_without_acl_is_public() {
    let site = Site::start(
        &["--site-domain", "docs.example.org=alice/repo"],
        &basic_files(),
    );
    let ui = site.get("/");
    let csp = ui.header("content-security-policy").unwrap_or_default();
    assert!(
        csp.starts_with("sandbox"),
        "no sandbox on the UI origin: {csp:?}"
    );
    assert!(!csp.contains("allow-same-origin"), "{csp}");
    assert!(csp.contains("allow-scripts"), "{csp}");
    assert_eq!(
        site.get("/nowhere")
            .header("content-security-policy")
            .map(|c| c.starts_with("sandbox")),
        Some(true)
    );

    let own = http_raw(
        site.server.addr,
        b"GET /docs/guide.html HTTP/1.1\r\nHost: docs.example.org:8080\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(own.status, 200, "{}", own.text());
    assert_eq!(own.text(), "<h1>guide</h1>\n");
    assert_eq!(own.header("content-security-policy"), None);
    // A UI-origin site path, now warm, asked of the domain: the domain's
    // site answers (its own path of that name), not the remembered UI one.
    let on_domain = http_raw(
        site.server.addr,
        b"GET /alice/repo/-/site/ HTTP/1.1\r\nHost: docs.example.org\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(
        (
            on_domain.status,
            on_domain.header("content-security-policy")
        ),
        (404, None),
        "the domain was answered from the UI origin's warm map: {}",
        on_domain.text()
    );
    // A repo without a stored ACL is public: its site is served to a
    // request without any credentials (checked above).
}

#[test]
fn a_private_repos_site_is_answered_as_missing_and_is_public_again_at_once() {
    let site = Site::start(
        &["--site-domain", "docs.example.org=alice/repo"],
        &basic_files(),
    );
    let on_domain = || {
        http_raw(
            site.server.addr,
            b"GET /docs/guide.html HTTP/1.1\r\nHost: docs.example.org\r\nConnection: close\r\n\r\n",
        )
    };
    let put_acl = |body: &str| {
        let put = http(
            site.server.addr,
            &format!(
                "PUT /api/v1/repos/alice/repo/acl HTTP/1.1\r\n{}\r\nContent-Type: application/json\r\nContent-Length: {}",
                site.admin,
                body.len()
            ),
            body.as_bytes(),
        );
        assert_eq!(put.status, 200, "{}", put.text());
    };
    // Warm: both paths are remembered before the ACL changes.
    for _ in 0..2 {
        assert_eq!(site.get("/docs/guide.html").status, 200);
        assert_eq!(on_domain().status, 200);
    }

    put_acl(r#"{"visibility":"private"}"#);
    let missing = http_get(site.server.addr, "/alice/nothing/-/site/docs/guide.html");
    for (what, hidden) in [
        ("UI origin", site.get("/docs/guide.html")),
        ("UI origin, root", site.get("/")),
        ("site domain", on_domain()),
    ] {
        assert_eq!(
            hidden.status,
            404,
            "a private repo's site was served on the {what} (from a plan remembered before the ACL changed?): {}",
            hidden.text()
        );
        if what == "site domain" {
            // The visitor of a domain never named the repo: its name is
            // not told.
            assert!(
                !hidden.text().contains("alice/repo") && hidden.text().contains("not found"),
                "a private repo's domain must not name it: {}",
                hidden.text()
            );
        } else {
            assert!(
                hidden.text().contains("repository alice/repo not found"),
                "a private repo must look like a missing one ({what}): {}",
                hidden.text()
            );
        }
        assert!(
            !hidden.text().contains("guide"),
            "{what}: {}",
            hidden.text()
        );
    }
    assert!(
        missing
            .text()
            .contains("repository alice/nothing not found"),
        "{}",
        missing.text()
    );

    put_acl(r#"{"version":1,"visibility":"public"}"#);
    let served = site.get("/docs/guide.html");
    assert_eq!(
        (served.status, served.text().as_str()),
        (200, "<h1>guide</h1>\n"),
        "public again, the site was not served at once"
    );
    assert_eq!(on_domain().status, 200);
}

#[test]
fn a_100_mib_blob_served_to_4_clients_at_once_is_streamed_not_held() {
    let blob = random_bytes(100 << 20, 42);
    let site = Site::start(&[], &[("big.bin", &blob)]);
    let pid = site.server.pid();
    let before = status_kib(pid, "VmRSS:");
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let peak = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(before));
    let sampler = {
        let (stop, peak) = (stop.clone(), peak.clone());
        std::thread::spawn(move || {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                peak.fetch_max(
                    status_kib(pid, "VmRSS:"),
                    std::sync::atomic::Ordering::Relaxed,
                );
                std::thread::sleep(Duration::from_millis(10));
            }
        })
    };
    let addr = site.server.addr;
    let clients: Vec<_> = (0..4)
        .map(|_| {
            std::thread::spawn(move || {
                let mut stream = TcpStream::connect(addr).unwrap();
                stream.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
                stream.write_all(b"GET /alice/repo/-/site/big.bin HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").unwrap();
                let mut raw = Vec::new();
                stream.read_to_end(&mut raw).unwrap();
                raw
            })
        })
        .collect();
    let expected_tail = &blob[blob.len() - 64..];
    for client in clients {
        let raw = client.join().unwrap();
        let split = raw.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
        let head = String::from_utf8_lossy(&raw[..split]).to_lowercase();
        assert!(
            head.contains(&format!("content-length: {}", 100 << 20)),
            "{head}"
        );
        let body = &raw[split + 4..];
        assert_eq!(body.len(), 100 << 20, "a client got {} bytes", body.len());
        assert_eq!(&body[body.len() - 64..], expected_tail);
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    sampler.join().unwrap();
    let grew_mib = (peak
        .load(std::sync::atomic::Ordering::Relaxed)
        .saturating_sub(before))
        / 1024;
    assert!(
        grew_mib < 100,
        "the server's RSS grew by {grew_mib} MiB serving 4 x 100 MiB: the blob is being held in memory"
    );
}

#[test]
fn the_site_ref_and_directory_come_from_the_repo_settings() {
    let site = Site::start(&[], &basic_files());
    // Another branch, with the site in a subdirectory.
    git_ok(&site.work, &["checkout", "-q", "-b", "gh-pages"]);
    site.publish(&[("public/index.html", b"<h1>from settings</h1>\n")]);
    git_ok(
        &site.work,
        &[
            "push",
            "-q",
            &site.server.url("/alice/repo.git"),
            "gh-pages",
        ],
    );
    assert_eq!(
        site.get("/").text(),
        "<h1>home</h1>\n",
        "default: pages, root"
    );

    // The default branch is HEAD, which the push of gh-pages (the repo's
    // only branch) pointed there; settings may name only a branch that is.
    let body =
        r#"{"default_branch":"gh-pages","site":{"ref":"refs/heads/gh-pages","dir":"public"}}"#;
    let put = http(
        site.server.addr,
        &format!(
            "PUT /api/v1/repos/alice/repo/settings HTTP/1.1\r\n{}\r\nContent-Type: application/json\r\nContent-Length: {}",
            site.admin,
            body.len()
        ),
        body.as_bytes(),
    );
    assert_eq!(put.status, 200, "{}", put.text());
    let served = site.get("/");
    assert_eq!(
        (served.status, served.text().as_str()),
        (200, "<h1>from settings</h1>\n"),
        "the site did not follow the repo's settings at once"
    );
    assert_eq!(
        site.get("/public/index.html").status,
        404,
        "the dir is the root"
    );
}
