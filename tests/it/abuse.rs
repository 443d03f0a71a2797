//! What one hostile request or one pushed file may cost, against a real
//! server: hostile URLs are a 4xx (never a 5xx, never a redirect built
//! from them), and bodies that do not decode are a 400.

use crate::support::*;

/// A temp dir, its data dir holding an empty `alice/repo`, and a server on
/// it started with `flags`.
fn forge(flags: &[&str]) -> (tempfile::TempDir, std::path::PathBuf, TestServer) {
    let dir = tempfile::tempdir().unwrap();
    let data = data_with_repo(dir.path());
    let mut builder = TestServer::builder().data(&data);
    for flag in flags {
        builder = builder.arg(flag);
    }
    let server = builder.start();
    (dir, data, server)
}

/// A server with `alice/repo` holding a README, a tag on a blob (a tag may
/// name anything) and a branch whose name needs escaping in links.
fn server_with_history(dir: &std::path::Path) -> TestServer {
    let data = data_with_repo(dir);
    let server = TestServer::builder()
        .data(&data)
        .arg("--anonymous-push")
        .start();
    let work = worktree(dir, "work");
    // A file whose name git would read as pathspec magic.
    std::fs::write(work.join(":(bad-magic)x"), b"a name, not magic\n").unwrap();
    let literal = [("GIT_LITERAL_PATHSPECS", "1")];
    for args in [
        &["add", ":(bad-magic)x"][..],
        &["commit", "-q", "-m", "a file named like pathspec magic"],
    ] {
        let out = git_env(&work, args, &literal);
        assert!(out.status.success(), "{args:?}: {}", text(&out.stderr));
    }
    let blob = git_ok(&work, &["rev-parse", "HEAD:README.md"]);
    git_ok(&work, &["tag", "blob-tag", blob.trim()]);
    git_ok(&work, &["branch", "odd#name"]);
    // A commit that claims the year 11476 (git and fsck take it).
    git_ok(&work, &["checkout", "-q", "-b", "future"]);
    let dated = git_env(
        &work,
        &["commit", "-q", "--allow-empty", "-m", "from the future"],
        &[
            ("GIT_AUTHOR_DATE", "@300000000000 +0000"),
            ("GIT_COMMITTER_DATE", "@300000000000 +0000"),
        ],
    );
    assert!(dated.status.success(), "{}", text(&dated.stderr));
    git_ok(&work, &["checkout", "-q", "-"]);
    git_ok(
        &work,
        &[
            "push",
            "-q",
            &server.url("/alice/repo.git"),
            "HEAD:main",
            "blob-tag",
            "odd#name",
            "future",
        ],
    );
    server
}

#[test]
fn hostile_urls_are_a_4xx_never_a_5xx() {
    let dir = tempfile::tempdir().unwrap();
    let server = server_with_history(dir.path());
    // Anti-vacuity: the same surfaces answer 200 for a good request.
    for good in [
        "/alice/repo/-/tree/main",
        "/alice/repo/-/blob/main/README.md",
        "/alice/repo/-/raw/main/README.md",
        "/alice/repo/-/commits/main",
        "/alice/repo/-/archive/main.zip",
        "/alice/repo/-/tree/odd%23name",
        "/alice/repo/-/tree/future",
        "/alice/repo/-/commits/future",
        "/alice/repo/-/commits/main/%3A(bad-magic)x",
    ] {
        let response = http_get(server.addr, good);
        assert_eq!(response.status, 200, "{good}: {}", response.text());
    }
    let revs = [
        "a~1",
        "main~1",
        "HEAD%5E%7Btree%7D",
        "main@%7B0%7D",
        "..",
        "a..b",
        "a%20b",
        "a%00b",
        "%2Fetc",
        "a%5Cb",
        "--output=x",
        "-n1",
        "blob-tag",
        "ffffffffffffffffffffffffffffffffffffffff",
        &"a".repeat(5000),
    ];
    let mut urls: Vec<String> = Vec::new();
    for rev in revs {
        for view in [
            format!("/alice/repo/-/tree/{rev}"),
            format!("/alice/repo/-/tree/{rev}/x"),
            format!("/alice/repo/-/blob/{rev}/README.md"),
            format!("/alice/repo/-/raw/{rev}/README.md"),
            format!("/alice/repo/-/commits/{rev}"),
            format!("/alice/repo/-/commits/{rev}/README.md"),
            format!("/alice/repo/-/commit/{rev}"),
            format!("/alice/repo/-/commit/{rev}.patch"),
            format!("/alice/repo/-/blame/{rev}/README.md"),
            format!("/alice/repo/-/archive/{rev}.zip"),
            format!("/alice/repo/-/archive/{rev}.tar.gz"),
        ] {
            urls.push(view);
        }
    }
    // A history of a path that is not there is an empty list, so the
    // commits view may answer 200 for the well-formed ones: it is checked
    // for "never a 5xx" below, the others for a 4xx.
    let mut lenient: Vec<String> = Vec::new();
    for path in [
        "..",
        "a/../b",
        "a%00b",
        "a%2F..%2Fb",
        "a%5C..%5Cb",
        "a//b",
        "%20",
        ".git/config",
    ] {
        for view in ["tree", "blob", "raw", "blame"] {
            urls.push(format!("/alice/repo/-/{view}/main/{path}"));
        }
        lenient.push(format!("/alice/repo/-/commits/main/{path}"));
        urls.push(format!("/alice/repo/-/site/{path}"));
    }
    // The web UI shows page 1 for a page number it cannot use.
    lenient.push("/alice/repo/-/commits/main?page=18446744073709551615".into());
    lenient.push("/alice/repo/-/commits/main?page=-1&per_page=99999999999".into());
    for owner in ["%2Fevil.example", "%5Cevil.example", "..", "a%00", "%20"] {
        urls.push(format!("/{owner}/x/-/site"));
        urls.push(format!("/{owner}/x/-/site/"));
        urls.push(format!("/{owner}/x"));
        urls.push(format!("/{owner}/x.git/info/refs?service=git-upload-pack"));
        urls.push(format!("/api/v1/repos/{owner}/x/issues"));
    }
    urls.extend(
        [
            "/alice/repo/-/archive/main.rar",
            "/alice/repo/-/archive/.zip",
            "/alice/repo.git/info/refs?service=git-evil",
            "/alice/repo.git/info/refs",
            "/alice/repo/-/nothing-here",
            "/alice/repo/-/tree",
            "/no/such/route/at/all",
            "/static/..%2F..%2Fetc%2Fpasswd",
            "/static/nothing.css",
            "/api/v1/repos/alice/repo/issues/18446744073709551616",
            "/api/v1/repos/alice/repo/issues/-1",
            "/api/v1/repos/alice/repo/activity?page=18446744073709551615",
        ]
        .map(String::from),
    );
    let mut wrong = Vec::new();
    let shown = |url: &str| url.chars().take(120).collect::<String>();
    for (url, must_refuse) in urls
        .iter()
        .map(|u| (u, true))
        .chain(lenient.iter().map(|u| (u, false)))
    {
        let response = http_get(server.addr, url);
        let refused = (400..500).contains(&response.status);
        if (must_refuse && !refused) || response.status >= 500 {
            wrong.push(format!(
                "{}: {} {}",
                shown(url),
                response.status,
                response.text().chars().take(200).collect::<String>()
            ));
        }
        if let Some(location) = response.header("location")
            && (location.starts_with("//") || location.contains('\\'))
        {
            wrong.push(format!(
                "{}: redirects off the server to {location}",
                shown(url)
            ));
        }
    }
    // Conditions no valid entity tag makes are taken as malformed, and
    // answered (the headers crate asserts on them).
    for condition in [
        "If-None-Match: \"a b\"",
        "If-Range: \"a\tb\"\r\nRange: bytes=0-1",
    ] {
        let response = http(
            server.addr,
            &format!("GET /alice/repo/-/raw/main/README.md HTTP/1.1\r\n{condition}"),
            b"",
        );
        if response.status != 200 {
            wrong.push(format!("raw with {condition:?}: {}", response.status));
        }
    }
    assert!(
        wrong.is_empty(),
        "{} of {} hostile URLs were not a 4xx:\n{}",
        wrong.len(),
        urls.len() + lenient.len(),
        wrong.join("\n")
    );
    server.stop();
}

#[test]
fn a_site_redirect_never_leaves_the_server_and_links_escape_names() {
    let dir = tempfile::tempdir().unwrap();
    let server = server_with_history(dir.path());
    let good = http_get(server.addr, "/alice/repo/-/site");
    assert_eq!(good.status, 301, "{}", good.text());
    assert_eq!(good.header("location"), Some("/alice/repo/-/site/"));
    for owner in ["%2Fevil.example", "%5Cevil.example", "%2F%2Fevil.example"] {
        let response = http_get(server.addr, &format!("/{owner}/x/-/site"));
        assert_eq!(response.status, 404, "{owner}: {:?}", response.headers);
        assert_eq!(response.header("location"), None, "{owner}");
    }
    // A branch name with `#` is escaped in the links that name it.
    let branches = http_get(server.addr, "/alice/repo/-/branches").text();
    assert!(branches.contains("odd%23name"), "{branches}");
    assert!(!branches.contains("/odd#name"), "{branches}");
    server.stop();
}

#[test]
fn a_request_body_that_does_not_inflate_is_a_400_and_a_gzip_bomb_a_413() {
    use std::io::Write;
    let dir = tempfile::tempdir().unwrap();
    let server = server_with_history(dir.path());
    let post = |body: &[u8]| {
        http(
            server.addr,
            &format!(
                "POST /alice/repo.git/git-upload-pack HTTP/1.1\r\n\
                 Content-Type: application/x-git-upload-pack-request\r\n\
                 Content-Encoding: gzip\r\nContent-Length: {}",
                body.len()
            ),
            body,
        )
    };
    let gzip = |plain: &[u8]| {
        let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        encoder.write_all(plain).unwrap();
        encoder.finish().unwrap()
    };
    // Anti-vacuity: a well-formed gzip request is served (a flush-only
    // request: git answers with nothing to send, but answers).
    let good = post(&gzip(b"0000"));
    assert_eq!(good.status, 200, "{}", good.text());
    for (what, body) in [
        (
            "not gzip at all",
            b"0032want 0000000000000000000000000000000000000000\n".to_vec(),
        ),
        (
            "a truncated gzip stream",
            gzip(&[b'x'; 4096])[..20].to_vec(),
        ),
        ("a gzip header and garbage", {
            let mut bad = gzip(b"0000");
            let n = bad.len();
            bad[10..n - 8].fill(0xff);
            bad
        }),
    ] {
        let response = post(&body);
        assert_eq!(response.status, 400, "{what}: {}", response.text());
        assert!(
            response.text().contains("not valid gzip"),
            "{what}: {}",
            response.text()
        );
    }
    // 100 MiB of zeros gzip to ~100 KiB: past the 64 MiB request cap once
    // inflated, so refused as too large, not handed to git.
    let bomb = gzip(&vec![0u8; 100 << 20]);
    assert!(bomb.len() < 1 << 20);
    let response = post(&bomb);
    assert_eq!(response.status, 413, "{}", response.text());
    server.stop();
}

/// Writes an object exactly as given (no format checks), returning its id.
fn hash_literally(work: &std::path::Path, kind: &str, bytes: &[u8]) -> String {
    use std::io::Write;
    let mut child = git_command(work)
        .args(["hash-object", "--literally", "-t", kind, "-w", "--stdin"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(bytes).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// A tree holding one entry `mode name` -> `id` (a hex id).
fn tree_with(work: &std::path::Path, mode: &str, name: &str, id: &str) -> String {
    let mut entry = format!("{mode} {name}\0").into_bytes();
    entry.extend(hex_bytes(id));
    hash_literally(work, "tree", &entry)
}

fn hex_bytes(id: &str) -> Vec<u8> {
    (0..id.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&id[i..i + 2], 16).unwrap())
        .collect()
}

fn commit_of(work: &std::path::Path, tree: &str, author_line: &str) -> String {
    let body = format!(
        "tree {tree}\nauthor {author_line}\ncommitter C <c@example.org> 1700000000 +0000\n\nmade by hand\n"
    );
    hash_literally(work, "commit", body.as_bytes())
}

#[test]
fn pushed_objects_are_fsck_checked_but_old_histories_quirks_pass() {
    let (dir, data, server) = forge(&["--anonymous-push"]);
    let repo = data.join("repos/alice/repo.git");
    let url = server.url("/alice/repo.git");
    let work = worktree(dir.path(), "work");
    let readme = git_ok(&work, &["rev-parse", "HEAD:README.md"]);
    let readme = readme.trim();
    let empty_tree = hash_literally(&work, "tree", b"");

    // What old real histories carry: a zero-padded mode, a two-digit
    // time zone, no space before the date. Accepted.
    let padded = tree_with(
        &work,
        "040000",
        "docs",
        &tree_with(&work, "100644", "a.md", readme),
    );
    let quirky = commit_of(&work, &padded, "Old Tool <old@example.org> 1200000000 +05");
    let quirky = {
        let body = format!(
            "tree {padded}\nparent {quirky}\nauthor Older <older@example.org>1100000000 +0000\ncommitter C <c@example.org> 1700000000 +0000\n\nno space before the date\n"
        );
        hash_literally(&work, "commit", body.as_bytes())
    };
    git_ok(&work, &["update-ref", "refs/heads/quirky", &quirky]);
    let pushed = git(&work, &["push", "-q", &url, "quirky"]);
    assert!(
        pushed.status.success(),
        "a history with harmless quirks must push: {}",
        text(&pushed.stderr)
    );
    assert_eq!(
        ref_value(&repo, "refs/heads/quirky").as_deref(),
        Some(quirky.as_str())
    );

    // What could hurt whoever clones or browses it: refused with git's
    // own reason, and nothing moves.
    for (what, tree, reason) in [
        (
            ".git entry",
            tree_with(&work, "40000", ".git", &empty_tree),
            "hasDotgit",
        ),
        (
            "'..' entry",
            tree_with(&work, "40000", "..", &empty_tree),
            "hasDotdot",
        ),
        (
            ".GIT entry",
            tree_with(&work, "40000", ".GIT", &empty_tree),
            "hasDotgit",
        ),
        (
            "a '/' in a name",
            tree_with(&work, "100644", "a/b", readme),
            "fullPathname",
        ),
        (
            "a name twice",
            {
                let mut entries = Vec::new();
                for _ in 0..2 {
                    entries.extend(b"100644 twice\0");
                    entries.extend(hex_bytes(readme));
                }
                hash_literally(&work, "tree", &entries)
            },
            "duplicateEntries",
        ),
        (
            "a .gitmodules whose url is an option",
            {
                let modules = hash_literally(
                    &work,
                    "blob",
                    b"[submodule \"x\"]\n\tpath = x\n\turl = --upload-pack=touch$IFS/tmp/owned\n",
                );
                tree_with(&work, "100644", ".gitmodules", &modules)
            },
            "gitmodulesUrl",
        ),
    ] {
        let commit = commit_of(&work, &tree, "A <a@example.org> 1700000000 +0000");
        let branch = format!(
            "refs/heads/bad-{}",
            what.replace([' ', '\'', '.', '/'], "-")
        );
        git_ok(&work, &["update-ref", &branch, &commit]);
        let refused = git(&work, &["push", "-q", &url, &branch]);
        let said = text(&refused.stderr);
        assert!(!refused.status.success(), "{what}: the push went through");
        assert!(
            said.contains(reason),
            "{what}: git's reason {reason} must reach the pusher: {said}"
        );
        assert_eq!(
            ref_value(&repo, &branch),
            None,
            "{what}: a refused push moved a ref"
        );
    }
    server.stop();
}

#[test]
fn a_file_over_the_blob_limit_is_refused_by_name_and_moves_nothing() {
    let (dir, data, server) = forge(&["--anonymous-push"]);
    let repo = data.join("repos/alice/repo.git");
    let url = server.url("/alice/repo.git");
    let work = worktree(dir.path(), "work");
    git_ok(&work, &["push", "-q", &url, "HEAD:main"]);
    let before = ref_value(&repo, "refs/heads/main");
    // 150 MiB of zeros: a push of a few hundred KiB on the wire, over the
    // default limit of 100 MiB once stored.
    std::fs::create_dir_all(work.join("assets")).unwrap();
    let file = std::fs::File::create(work.join("assets/zeros.bin")).unwrap();
    file.set_len(150 << 20).unwrap();
    drop(file);
    commit_file(&work, "small.txt", b"small\n");
    git_ok(&work, &["add", "assets/zeros.bin"]);
    git_ok(&work, &["commit", "-q", "-m", "a big file"]);
    let refused = git(&work, &["push", &url, "HEAD:main", "HEAD:refs/heads/other"]);
    let said = text(&refused.stderr);
    assert!(!refused.status.success(), "the push went through: {said}");
    for needle in [
        "assets/zeros.bin",
        "150.0 MiB",
        "100.0 MiB",
        "--max-blob-size",
    ] {
        assert!(
            said.contains(needle),
            "the refusal must say {needle:?}: {said}"
        );
    }
    assert_eq!(ref_value(&repo, "refs/heads/main"), before, "main moved");
    assert_eq!(
        ref_value(&repo, "refs/heads/other"),
        None,
        "other was created"
    );
    // Every kind of object counts: a commit whose message is 150 MiB
    // (a few hundred KiB on the wire).
    let message = dir.path().join("message.txt");
    std::fs::write(&message, vec![b'a'; 150 << 20]).unwrap();
    let tree = git_ok(&work, &["rev-parse", "HEAD~1^{tree}"]);
    let long = git_ok(
        &work,
        &["commit-tree", tree.trim(), "-F", message.to_str().unwrap()],
    );
    let refused = git(
        &work,
        &["push", &url, &format!("{}:refs/heads/long", long.trim())],
    );
    let said = text(&refused.stderr);
    assert!(
        !refused.status.success(),
        "a 150 MiB commit went through: {said}"
    );
    assert!(
        said.contains("a commit (") && said.contains("one object"),
        "{said}"
    );
    assert_eq!(ref_value(&repo, "refs/heads/long"), None);
    server.stop();

    // The limit is the server's to set; under it the same push goes through.
    let server = TestServer::builder()
        .data(&data)
        .arg("--anonymous-push")
        .arg("--max-blob-size")
        .arg("200MiB")
        .start();
    let url = server.url("/alice/repo.git");
    let pushed = git(&work, &["push", "-q", &url, "HEAD:main"]);
    assert!(pushed.status.success(), "{}", text(&pushed.stderr));
    server.stop();
}

/// How far the server's peak RSS rose above its RSS while `probe` ran
/// (the peak is reset first, by writing 5 to `clear_refs`), in MiB.
fn peak_growth_mib(pid: u32, probe: impl FnOnce()) -> u64 {
    std::fs::write(format!("/proc/{pid}/clear_refs"), "5").unwrap();
    let before = status_kib(pid, "VmRSS:");
    probe();
    let peak = status_kib(pid, "VmHWM:");
    peak.saturating_sub(before) / 1024
}

/// GETs `path` and counts the body's bytes without keeping them; returns
/// (status, body bytes).
fn get_counting(addr: std::net::SocketAddr, path: &str) -> (u16, u64) {
    use std::io::{BufRead, BufReader, Read, Write};
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(std::time::Duration::from_secs(60)))
        .unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut reader = BufReader::new(stream);
    let mut status_line = String::new();
    reader.read_line(&mut status_line).unwrap();
    let status = status_line
        .split_whitespace()
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).unwrap();
        if line == "\r\n" || line.is_empty() {
            break;
        }
    }
    let mut counted = 0u64;
    let mut buf = vec![0u8; 1 << 16];
    loop {
        match reader.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => counted += n as u64,
            Err(e) => panic!("reading {path}: {e}"),
        }
    }
    (status, counted)
}

#[test]
fn one_pushed_file_cannot_blow_up_a_page_or_the_servers_memory() {
    let (dir, _data, server) = forge(&["--anonymous-push", "--max-blob-size", "1GiB"]);
    let work = worktree(dir.path(), "work");
    // 300 KB of 100,000 `[` and 200,000 newlines; 1 MB of `/*` and
    // 500,000 newlines; 300 MiB of zeros (a few hundred KiB pushed).
    let deep = format!("{}{}", "[".repeat(100_000), "\n".repeat(200_000));
    std::fs::write(work.join("deep.json"), &deep).unwrap();
    std::fs::write(work.join("flat.c"), format!("/*{}", "\n".repeat(500_000))).unwrap();
    let zeros = std::fs::File::create(work.join("zeros.bin")).unwrap();
    zeros.set_len(300 << 20).unwrap();
    drop(zeros);
    git_ok(&work, &["add", "deep.json", "flat.c", "zeros.bin"]);
    git_ok(&work, &["commit", "-q", "-m", "hostile files"]);
    git_ok(
        &work,
        &["push", "-q", &server.url("/alice/repo.git"), "HEAD:main"],
    );
    let pid = server.vole_pid();
    // Warm the server up (templates, syntaxes) so growth is the probe's.
    assert_eq!(
        http_get(server.addr, "/alice/repo/-/blob/main/README.md").status,
        200
    );

    for (page, most_bytes) in [("deep.json", 8 << 20), ("flat.c", 8 << 20)] {
        let path = format!("/alice/repo/-/blob/main/{page}");
        let mut bytes = 0;
        let grew = peak_growth_mib(pid, || {
            let response = http_get(server.addr, &path);
            assert_eq!(response.status, 200, "{page}");
            bytes = response.body.len();
        });
        assert!(
            bytes > 10_000,
            "{page}: anti-vacuity, the page shows the file"
        );
        assert!(
            bytes <= most_bytes,
            "{page}: the blob page is {bytes} bytes of HTML: the highlighting or line bound failed"
        );
        assert!(
            grew < 100,
            "{page}: the server's peak RSS rose {grew} MiB for one page"
        );
    }
    let zeros_views = [
        ("/alice/repo/-/blob/main/zeros.bin", false),
        ("/alice/repo/-/raw/main/zeros.bin", true),
    ];
    for (path, whole) in zeros_views {
        let mut got = (0, 0);
        let grew = peak_growth_mib(pid, || got = get_counting(server.addr, path));
        assert_eq!(got.0, 200, "{path}");
        if whole {
            assert_eq!(
                got.1,
                300 << 20,
                "{path}: the raw view sends the whole blob"
            );
        } else {
            assert!(got.1 < 1 << 20, "{path}: the blob page is {} bytes", got.1);
        }
        assert!(
            grew < 100,
            "{path}: the server's peak RSS rose {grew} MiB for a 300 MiB blob: it was read whole"
        );
    }
    server.stop();
}

#[test]
fn connections_over_the_cap_get_a_503_with_retry_after() {
    use std::io::Write;
    let (_dir, _data, server) = forge(&["--max-connections", "8"]);
    // Anti-vacuity: under the cap, served.
    assert_eq!(http_get(server.addr, "/healthz").status, 200);
    // Eight connections that send half a request and hold it. A served
    // connection's slot is freed a moment after its client has read the
    // answer, so one of these may be refused while the one above is still
    // counted: each that was answered is opened again.
    let mut idle: Vec<std::net::TcpStream> = Vec::new();
    let started = std::time::Instant::now();
    while idle.len() < 8 {
        assert!(
            started.elapsed() < std::time::Duration::from_secs(10),
            "eight idle connections never all stayed open"
        );
        let mut s = std::net::TcpStream::connect(server.addr).unwrap();
        s.write_all(b"GET /healthz HTTP/1.1\r\n").unwrap();
        s.set_read_timeout(Some(std::time::Duration::from_millis(200)))
            .unwrap();
        let mut byte = [0u8; 1];
        match std::io::Read::read(&mut s, &mut byte) {
            // Answered (refused) or closed: not holding a slot.
            Ok(_) => continue,
            Err(_) => idle.push(s),
        }
    }
    // The ninth: refused (a slot freed late is waited out).
    let mut refused = None;
    let over = eventually(std::time::Duration::from_secs(5), || {
        let answer = http_get(server.addr, "/healthz");
        let is_refused = answer.status == 503;
        refused = Some(answer);
        is_refused
    });
    assert!(
        over,
        "a ninth connection must be refused while eight are open"
    );
    let refused = refused.unwrap();
    assert_eq!(refused.status, 503);
    assert_eq!(refused.header("retry-after"), Some("5"));
    assert!(
        refused.text().contains("too many open connections"),
        "{}",
        refused.text()
    );
    drop(idle);
    assert!(
        eventually(std::time::Duration::from_secs(5), || {
            http_get(server.addr, "/healthz").status == 200
        }),
        "once they close, connections are served again"
    );
    server.stop();
}

/// A request sent in full whose response is never read.
fn stalled_reader(addr: std::net::SocketAddr, head: &str, body: &[u8]) -> std::net::TcpStream {
    use std::io::Write;
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    write!(
        stream,
        "{head}\r\nHost: x\r\nContent-Length: {}\r\n\r\n",
        body.len()
    )
    .unwrap();
    stream.write_all(body).unwrap();
    stream
}

#[test]
fn a_flood_of_slow_readers_frees_its_slots_and_leaves_pushes_and_clones_working() {
    let dir = tempfile::tempdir().unwrap();
    let data = data_with_repo(dir.path());
    let server = TestServer::builder()
        .data(&data)
        .arg("--anonymous-push")
        .args(["--upload-pack-limit", "2", "--read-slots", "2"])
        .args([
            "--min-transfer-rate",
            "256KiB",
            "--min-transfer-window",
            "2s",
        ])
        .args(["--queue-timeout", "30s"])
        .start();
    let url = server.url("/alice/repo.git");
    let work = worktree(dir.path(), "work");
    // 32 MiB that do not compress: more than the socket buffers hold.
    commit_file(&work, "big.bin", &random_bytes(32 << 20, 9));
    git_ok(&work, &["push", "-q", &url, "HEAD:main"]);
    let head = git_ok(&work, &["rev-parse", "HEAD"]);
    let want = format!("0032want {}\n00000009done\n", head.trim());
    assert_eq!(want.len(), 4 + 46 + 4 + 9);

    // Slow readers on every slot: clones (upload-pack), archives and raw
    // files that are asked for and never read.
    let mut stalled = Vec::new();
    for _ in 0..3 {
        stalled.push(stalled_reader(
            server.addr,
            "POST /alice/repo.git/git-upload-pack HTTP/1.1\r\nContent-Type: application/x-git-upload-pack-request",
            want.as_bytes(),
        ));
        stalled.push(stalled_reader(
            server.addr,
            "GET /alice/repo/-/archive/main.tar.gz HTTP/1.1",
            b"",
        ));
        stalled.push(stalled_reader(
            server.addr,
            "GET /alice/repo/-/raw/main/big.bin HTTP/1.1",
            b"",
        ));
    }
    std::thread::sleep(std::time::Duration::from_millis(500));
    let started = std::time::Instant::now();
    // A push does not wait behind them at all (its own slots and hooks).
    commit_file(&work, "more.txt", b"more\n");
    let pushed = git(&work, &["push", "-q", &url, "HEAD:main"]);
    assert!(pushed.status.success(), "{}", text(&pushed.stderr));
    // A clone and a raw download get slots once the slow readers are cut.
    let clone = dir.path().join("clone");
    let cloned = git(dir.path(), &["clone", "-q", &url, clone.to_str().unwrap()]);
    assert!(cloned.status.success(), "{}", text(&cloned.stderr));
    let (status, bytes) = get_counting(server.addr, "/alice/repo/-/raw/main/big.bin");
    assert_eq!((status, bytes), (200, 32 << 20));
    let took = started.elapsed();
    assert!(
        took < std::time::Duration::from_secs(25),
        "slow readers held the slots for {took:?}: the minimum rate did not cut them"
    );
    // Anti-vacuity: they really were cut (the server logged it).
    assert!(
        server
            .log
            .wait_for(&["too slowly"], std::time::Duration::from_secs(5))
            .is_some()
            || server
                .log
                .wait_for(&["download cut"], std::time::Duration::from_secs(5))
                .is_some(),
        "no slow reader was cut: {}",
        server.log.all()
    );
    drop(stalled);
    server.stop();
}

#[test]
fn long_ref_lists_are_paged_and_menus_bounded() {
    let (dir, _data, server) = forge(&["--anonymous-push"]);
    let work = worktree(dir.path(), "work");
    for i in 0..120 {
        git_ok(&work, &["tag", &format!("v{i:03}")]);
    }
    git_ok(
        &work,
        &[
            "push",
            "-q",
            "--tags",
            &server.url("/alice/repo.git"),
            "HEAD:main",
        ],
    );
    let rows = |page: &str| page.matches("<tr>").count();
    let first = http_get(server.addr, "/alice/repo/-/tags").text();
    assert_eq!(rows(&first), 50, "a page of tags");
    assert!(first.contains("rel=\"next\" href=\"?page=2\""), "{first}");
    let last = http_get(server.addr, "/alice/repo/-/tags?page=3").text();
    assert_eq!(rows(&last), 20);
    assert!(!last.contains("rel=\"next\""), "no page after the last");
    // The ref menu on every page lists a bounded number, and says how many.
    let home = http_get(server.addr, "/alice/repo/-/tree/main").text();
    assert!(
        home.matches("<span class=\"muted\">tag</span>").count() <= 50,
        "the menu is bounded"
    );
    assert!(home.contains("All 120 tags"), "{home}");
    server.stop();
}

#[test]
fn when_every_read_slot_is_taken_a_read_waits_then_gets_a_503_with_retry_after() {
    let (dir, _data, server) = forge(&[
        "--anonymous-push",
        "--read-slots",
        "1",
        "--queue-timeout",
        "1s",
        "--min-transfer-rate",
        "1",
        "--min-transfer-window",
        "60s",
    ]);
    let work = worktree(dir.path(), "work");
    commit_file(&work, "big.bin", &random_bytes(16 << 20, 3));
    git_ok(
        &work,
        &["push", "-q", &server.url("/alice/repo.git"), "HEAD:main"],
    );
    // One download that is never read holds the only slot.
    let holder = stalled_reader(
        server.addr,
        "GET /alice/repo/-/raw/main/big.bin HTTP/1.1",
        b"",
    );
    std::thread::sleep(std::time::Duration::from_millis(500));
    let started = std::time::Instant::now();
    let busy = http_get(server.addr, "/alice/repo/-/raw/main/big.bin");
    assert_eq!(busy.status, 503, "{}", busy.text());
    assert!(busy.header("retry-after").is_some(), "{:?}", busy.headers);
    assert!(
        started.elapsed() >= std::time::Duration::from_millis(900),
        "it waited for the queue timeout"
    );
    // Pages that need no git child are served meanwhile.
    assert_eq!(http_get(server.addr, "/alice/repo/-/tree/main").status, 200);
    drop(holder);
    assert!(
        eventually(std::time::Duration::from_secs(10), || {
            get_counting(server.addr, "/alice/repo/-/raw/main/big.bin") == (200, 16 << 20)
        }),
        "the slot comes back once the holder leaves"
    );
    server.stop();
}

/// The clients the ref log recorded for pushes, in order.
fn logged_clients(data: &std::path::Path) -> Vec<String> {
    let out = run_vole(data, &["log", "dump", "--json"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|row| row["log"] == "refs" && row["phase"] == "committed")
        .map(|row| row["client"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn forwarded_for_is_believed_only_from_a_trusted_proxy_and_public_url_fixes_clone_urls() {
    let dir = tempfile::tempdir().unwrap();
    let data = data_with_repo(dir.path());
    let work = worktree(dir.path(), "work");
    let forwarded = "http.extraHeader=X-Forwarded-For: 198.51.100.7";
    // Not a trusted proxy: the header is the client's claim, ignored.
    let server = TestServer::builder()
        .data(&data)
        .arg("--anonymous-push")
        .start();
    let url = server.url("/alice/repo.git");
    git_ok(
        &work,
        &["-c", forwarded, "push", "-q", &url, "HEAD:refs/heads/one"],
    );
    server.stop();
    // The loopback peer is the trusted proxy: the header names the client.
    let server = TestServer::builder()
        .data(&data)
        .arg("--anonymous-push")
        .args([
            "--trusted-proxy",
            "127.0.0.0/8",
            "--public-url",
            "https://git.example.org",
        ])
        .start();
    let url = server.url("/alice/repo.git");
    git_ok(
        &work,
        &["-c", forwarded, "push", "-q", &url, "HEAD:refs/heads/two"],
    );
    let home = http_get(server.addr, "/alice/repo").text();
    assert!(
        home.contains("https://git.example.org/alice/repo.git"),
        "{home}"
    );
    server.stop();
    assert_eq!(logged_clients(&data), ["127.0.0.1", "198.51.100.7"]);
}

#[test]
fn pushes_one_after_another_leave_the_servers_memory_where_it_was() {
    let (dir, data, server) = forge(&["--anonymous-push"]);
    let work = worktree(dir.path(), "work");
    // 64 MiB that do not compress: a 64 MiB spool per push.
    commit_file(&work, "big.bin", &random_bytes(64 << 20, 11));
    let pid = server.vole_pid();
    let mut rss = Vec::new();
    for i in 0..8 {
        let repo = format!("alice/soak{i}");
        assert!(run_vole(&data, &["repo", "create", &repo]).status.success());
        git_ok(
            &work,
            &[
                "push",
                "-q",
                &server.url(&format!("/{repo}.git")),
                "HEAD:main",
            ],
        );
        rss.push(status_kib(pid, "VmRSS:") / 1024);
    }
    // After the first pushes have sized the pools, more pushes of the
    // same size add nothing that stays.
    let grew = rss[7].saturating_sub(rss[1]);
    assert!(
        grew < 40,
        "the server's RSS kept growing push after push: {rss:?} MiB (+{grew} MiB over six 64 MiB pushes)"
    );
    server.stop();
}
