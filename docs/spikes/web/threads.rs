//! Benchmark harness for issues, pull requests and merges in the web UI
//! and the API (crates/web/src/issues.rs, issue.rs, pull.rs;
//! crates/control/src/merge.rs).
//!
//! `cargo run --release --example web-threads [-- --issues 10000 --comments 500
//! --requests 200 --restarts 3 --files 5000 --commits 200 --prs 8 --merges 5
//! --merge-commits 100 --worst-comments 200 --worst-merge-commits 1000]`
//!
//! One repo (the web harness's, `--files` files in a 3-level tree) on a
//! fresh vole, with `--issues` issues made through the API (one in ten
//! closed, one in seven labelled `bug`), one issue with `--comments`
//! comments, and one with `--worst-comments` comments of the largest body
//! the API takes (the page shows 200 at most). Then:
//! - the lists and the issue pages, each asked first after a restart
//!   (cold, `--restarts` times) and `--requests` times on one keep-alive
//!   connection (warm);
//! - `--prs` pull requests, each from a commit of the history to its
//!   parent (so its diff is that commit's), each one's page and then its
//!   diff page asked once (first views; then a pause, while the diff
//!   page's background highlighting finishes), each against cgit's commit
//!   page of the same commit asked in turn (cgit caches nothing, so each
//!   of its requests is a first view); and the worst: one commit that
//!   rewrites every file;
//! - `--merges` rounds of a merge, a squash and a fast-forward of a fresh
//!   branch of `--merge-commits` commits, each POST timed to its answer
//!   (the target has moved, durably, when it answers) and checked with
//!   `git ls-remote`; and the worst: a squash of `--worst-merge-commits`.
//!
//! Every body is checked for the content its page must show before its
//! time counts. Prints `page=.. state=.. p50_ms=.. p99_ms=..`,
//! `first_view page=.. vole_ms=.. cgit_ms=.. ratio=..` and `merge
//! method=.. ms=..`, then medians.

#![allow(clippy::unwrap_used)] // test and benchmark code: a failed unwrap is a failed run

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use serde_json::{Value, json};

#[path = "../common.rs"]
mod common;
use common::{
    Conn, arg, free_port, git, median, release_vole, sh, start_vole_with, user_with_token,
};

mod fixture;
use fixture::{Children, fast_import, file_path, make_repo, percentile, start_cgit, timed};

/// The repo's name on vole.
const REPO: &str = "alice/big";

/// The largest comment body the API takes (vole_meta's MAX_BODY_BYTES),
/// less a margin.
const WORST_BODY_BYTES: usize = 250 * 1024;

/// The server's flags: no quota stands in the way of making the fixture.
const FLAGS: &[&str] = &[
    "--password-auth",
    "--api-rate",
    "100000000",
    "--meta-write-rate",
    "0",
    "--max-meta-bytes-per-user",
    "0",
];

struct Api {
    port: u16,
    auth: String,
}

impl Api {
    /// One API call on `conn`; panics on an answer not in `expect`.
    fn call(&self, conn: &mut Conn, method: &str, path: &str, body: &Value, expect: u16) -> Value {
        let headers = format!("{}Content-Type: application/json\r\n", self.auth);
        let (status, answer) = conn.request(
            method,
            &format!("/api/v1/repos/{REPO}{path}"),
            &headers,
            body.to_string().as_bytes(),
        );
        assert_eq!(
            status,
            expect,
            "{method} {path}: {}",
            String::from_utf8_lossy(&answer)
        );
        serde_json::from_slice(&answer).unwrap_or(Value::Null)
    }

    /// `count` calls made by `workers` connections in parallel; `make(i)`
    /// is the i-th call's (method, path, body). Returns each answer, in
    /// order.
    fn many(
        &self,
        count: usize,
        workers: usize,
        make: impl Fn(usize) -> (&'static str, String, Value) + Sync,
        expect: u16,
    ) -> Vec<Value> {
        let next = std::sync::atomic::AtomicUsize::new(0);
        let answers = std::sync::Mutex::new(vec![Value::Null; count]);
        std::thread::scope(|scope| {
            for _ in 0..workers {
                scope.spawn(|| {
                    let mut conn = Conn::open(self.port);
                    loop {
                        let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        if i >= count {
                            break;
                        }
                        let (method, path, body) = make(i);
                        let answer = self.call(&mut conn, method, &path, &body, expect);
                        answers.lock().unwrap()[i] = answer;
                    }
                });
            }
        });
        answers.into_inner().unwrap()
    }
}

/// A comment's body as people write them: a paragraph with a link, an
/// issue reference and inline code, and a short list.
fn comment_body(i: usize) -> String {
    format!(
        "Comment {i}: this looks like the same fault as #{} -- see \
         [the log](https://example.org/log/{i}) and `cargo test -p vole-meta`.\n\n\
         - first, the shard's tip\n- then the fold\n",
        i % 97 + 1
    )
}

/// The worst body: the largest the API takes, of markdown that renders
/// to more than itself (emphasis, links and list items in every line).
fn worst_body(i: usize) -> String {
    let line = format!("- *item* of comment {i}, [a link](https://example.org/{i}) and `code`\n");
    line.repeat(WORST_BODY_BYTES / line.len())
}

/// Issues made: `issues` of them (one in ten closed, one in seven
/// labelled `bug`), then the one with `comments` comments and the worst.
/// Returns (numbers of the commented issue and of the worst one, the
/// highest open number, how many are open).
fn make_issues(api: &Api, issues: usize, comments: usize, worst: usize) -> (u64, u64, u64, usize) {
    let started = Instant::now();
    let made = api.many(
        issues,
        8,
        |i| {
            let labels: Vec<&str> = if i % 7 == 0 { vec!["bug"] } else { vec![] };
            (
                "POST",
                "/issues".into(),
                json!({"title": format!("issue {i}: the fold lags"), "body": comment_body(i),
                       "labels": labels}),
            )
        },
        201,
    );
    println!(
        "# made {issues} issues in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    let closed: Vec<&Value> = made.iter().step_by(10).collect();
    api.many(
        closed.len(),
        8,
        |i| {
            let issue = closed[i];
            (
                "PATCH",
                format!("/issues/{}", issue["number"]),
                json!({"version": issue["version"], "state": "closed"}),
            )
        },
        // An edit is answered 201, as Gitea answers it.
        201,
    );
    let mut conn = Conn::open(api.port);
    let mut thread = |title: &str, count: usize, body: &(dyn Fn(usize) -> String + Sync)| {
        let number =
            api.call(&mut conn, "POST", "/issues", &json!({"title": title}), 201)["number"]
                .as_u64()
                .unwrap();
        let started = Instant::now();
        api.many(
            count,
            4,
            |i| {
                let path = format!("/issues/{number}/comments");
                ("POST", path, json!({"body": body(i)}))
            },
            201,
        );
        println!(
            "# made {count} comments on #{number} in {:.1} s",
            started.elapsed().as_secs_f64()
        );
        number
    };
    let commented = thread("five hundred comments", comments, &comment_body);
    let worst = thread("the largest comments", worst, &worst_body);
    let highest_open = made
        .iter()
        .enumerate()
        .filter(|(i, _)| i % 10 != 0)
        .filter_map(|(_, issue)| issue["number"].as_u64())
        .max()
        .unwrap();
    let open = (0..issues).filter(|i| i % 10 != 0).count() + 2;
    (commented, worst, highest_open, open)
}

/// Each page's cold time (the first request after a start, once per
/// restart) and warm times (`requests` on one connection), every body
/// checked for its text.
fn measure_pages(
    vole: &Path,
    data: &Path,
    pages: &[(&str, String, String)],
    restarts: usize,
    requests: usize,
) {
    let mut cold: Vec<Vec<f64>> = vec![Vec::new(); pages.len()];
    let mut warm: Vec<Vec<f64>> = vec![Vec::new(); pages.len()];
    for restart in 0..restarts {
        let port = free_port();
        let _server = Children(vec![start_vole_with(vole, data, port, FLAGS)]);
        let mut conn = Conn::open(port);
        // Which page is asked first turns with each restart.
        for k in 0..pages.len() {
            let i = (k + restart) % pages.len();
            cold[i].push(get_checked(&mut conn, &pages[i]));
        }
        if restart + 1 == restarts {
            for (i, page) in pages.iter().enumerate() {
                for _ in 0..requests {
                    warm[i].push(get_checked(&mut conn, page));
                }
            }
        }
    }
    for (i, (name, _, _)) in pages.iter().enumerate() {
        println!(
            "page={name} state=cold median_ms={:.3} max_ms={:.3} n={}",
            median(cold[i].clone()),
            cold[i].iter().cloned().fold(0.0, f64::max),
            cold[i].len()
        );
        println!(
            "page={name} state=warm p50_ms={:.3} p99_ms={:.3} n={}",
            median(warm[i].clone()),
            percentile(&warm[i], 0.99),
            warm[i].len()
        );
    }
}

/// One GET timed from its write to its last byte; the body must hold the
/// page's text.
fn get_checked(conn: &mut Conn, (name, path, expect): &(&str, String, String)) -> f64 {
    let started = Instant::now();
    let (status, body) = conn.get(path, "");
    let took = started.elapsed().as_secs_f64() * 1e3;
    let body = String::from_utf8_lossy(&body);
    assert_eq!(status, 200, "{name}: {path} answered {status}");
    assert!(
        body.contains(expect.as_str()),
        "{name}: {path} lacks {expect:?}"
    );
    took
}

/// The pull requests' first views against cgit's commit page of the same
/// commit, in turn (which server goes first alternating).
fn measure_pulls(api: &Api, cgit_port: u16, pulls: &[(u64, String, String)]) {
    let mut conn = Conn::open(api.port);
    let mut ratios = [Vec::new(), Vec::new()];
    for (k, (number, commit, expect)) in pulls.iter().enumerate() {
        let cgit = || {
            let url = format!("http://127.0.0.1:{cgit_port}/cgit/big/commit/?id={commit}");
            timed(&[url], expect)[0]
        };
        let vole = |conn: &mut Conn| {
            let diff = (
                "pull-diff",
                format!("/{REPO}/-/pulls/{number}/files"),
                expect.clone(),
            );
            let page = ("pull", format!("/{REPO}/-/pulls/{number}"), "Merge".into());
            let page_ms = get_checked(conn, &page);
            let diff_ms = get_checked(conn, &diff);
            // The diff page goes on highlighting what its short wait did
            // not: let that finish before anything else is timed.
            std::thread::sleep(std::time::Duration::from_millis(500));
            (diff_ms, page_ms)
        };
        let (cgit_ms, (diff_ms, page_ms)) = if k % 2 == 0 {
            (cgit(), vole(&mut conn))
        } else {
            let v = vole(&mut conn);
            (cgit(), v)
        };
        let label = if k + 1 == pulls.len() {
            "worst"
        } else {
            "commit"
        };
        println!(
            "first_view pull=#{number} shape={label} diff_ms={diff_ms:.3} page_ms={page_ms:.3} \
             cgit_ms={cgit_ms:.3} diff_ratio={:.3} page_ratio={:.3}",
            diff_ms / cgit_ms,
            page_ms / cgit_ms
        );
        if label == "commit" {
            ratios[0].push(diff_ms / cgit_ms);
            ratios[1].push(page_ms / cgit_ms);
        }
    }
    let [diff, page] = ratios.map(median);
    println!("first_view median diff_ratio={diff:.3} page_ratio={page:.3}");
}

/// Appends `commits` commits (each adding one file under `topic/`) on
/// top of `from` as branch `branch` of the work repo.
fn make_branch(work: &Path, branch: &str, from: &str, commits: usize) {
    fast_import(work, &["--quiet", "--force"], |input| {
        for c in 0..commits {
            let message = format!("{branch}: step {c}\n");
            write!(
            input,
            "commit refs/heads/{branch}\ncommitter b <b@example.org> {} +0000\ndata {}\n{message}",
            1_800_000_000 + c,
            message.len()
        )
        .unwrap();
            if c == 0 {
                writeln!(input, "from {from}").unwrap();
            }
            let body = format!("{branch} {c}\n");
            write!(
                input,
                "M 100644 inline topic/{branch}/{c}.txt\ndata {}\n{body}\n",
                body.len()
            )
            .unwrap();
        }
    });
}

/// The server's tip of `branch`.
fn remote_tip(work: &Path, url: &str, branch: &str) -> String {
    let out = sh(git(work).args(["ls-remote", url, &format!("refs/heads/{branch}")]));
    out.split_whitespace()
        .next()
        .unwrap_or_default()
        .to_string()
}

/// One merge of a fresh branch of `commits` commits on the server's main
/// by `method`: the POST timed to its answer, then the target checked.
fn one_merge(api: &Api, work: &Path, url: &str, branch: &str, method: &str, commits: usize) -> f64 {
    let main = remote_tip(work, url, "main");
    sh(git(work).args(["fetch", "-q", url, "main"]));
    make_branch(work, branch, &main, commits);
    sh(git(work).args(["push", "-q", url, branch]));
    let head = sh(git(work).args(["rev-parse", branch]));
    let mut conn = Conn::open(api.port);
    let pull = api.call(
        &mut conn,
        "POST",
        "/pulls",
        &json!({"title": format!("land {branch}"), "head": branch, "base": "main"}),
        201,
    );
    let path = format!("/pulls/{}/merge", pull["number"]);
    let started = Instant::now();
    let merged = api.call(
        &mut conn,
        "POST",
        &path,
        &json!({"Do": method, "head_commit_id": head}),
        200,
    );
    let took = started.elapsed().as_secs_f64() * 1e3;
    let tip = remote_tip(work, url, "main");
    assert_eq!(
        merged["merge_commit"].as_str(),
        Some(tip.as_str()),
        "{method}: main is not at the merge commit the answer names"
    );
    sh(git(work).args(["fetch", "-q", url, "main"]));
    let parents = sh(git(work).args(["rev-list", "--parents", "-n1", "FETCH_HEAD"]));
    let parents = parents.split_whitespace().count() - 1;
    match method {
        "merge" => assert_eq!(parents, 2, "a merge commit has two parents"),
        "squash" => {
            assert_eq!(parents, 1, "a squash has one parent");
            let (ours, theirs) = (format!("{tip}^{{tree}}"), format!("{head}^{{tree}}"));
            assert_eq!(
                sh(git(work).args(["rev-parse", &ours])),
                sh(git(work).args(["rev-parse", &theirs])),
                "the squash's tree is not the branch's"
            );
        }
        _ => assert_eq!(tip, head, "a fast-forward puts main at the branch's head"),
    }
    took
}

fn measure_merges(api: &Api, work: &Path, rounds: usize, commits: usize, worst: usize) {
    let url = format!("http://127.0.0.1:{}/{REPO}.git", api.port);
    let methods = ["merge", "squash", "fast-forward-only"];
    let mut times = vec![Vec::new(); methods.len()];
    for round in 0..rounds {
        for (m, method) in methods.iter().enumerate() {
            let branch = format!("topic-{round}-{m}");
            let ms = one_merge(api, work, &url, &branch, method, commits);
            println!("merge method={method} commits={commits} ms={ms:.3}");
            times[m].push(ms);
        }
    }
    for (m, method) in methods.iter().enumerate() {
        println!(
            "merge method={method} commits={commits} median_ms={:.3} max_ms={:.3}",
            median(times[m].clone()),
            times[m].iter().cloned().fold(0.0, f64::max)
        );
    }
    for method in ["squash", "merge"] {
        let ms = one_merge(api, work, &url, &format!("worst-{method}"), method, worst);
        println!("merge method={method} commits={worst} shape=worst ms={ms:.3}");
    }
}

/// A commit on top of `main` that rewrites every one of `files` files
/// (the worst pull request: its diff is the whole tree), as branch `wide`.
fn make_wide(work: &Path, files: usize) {
    fast_import(work, &["--quiet"], |input| {
        let message = "rewrite every file\n";
        write!(
        input,
        "commit refs/heads/wide\ncommitter b <b@example.org> 1750000000 +0000\ndata {}\n{message}\
         from refs/heads/main^0\n",
        message.len()
    )
    .unwrap();
        for i in 0..files {
            let mut body = format!("// file {i}, rewritten\n");
            for line in 0..40 {
                body.push_str(&format!(
                    "pub fn g{line}() -> u64 {{ {i} }} // wrapping_mul\n"
                ));
            }
            let path = file_path(i, false);
            write!(
                input,
                "M 100644 inline {path}\ndata {}\n{body}\n",
                body.len()
            )
            .unwrap();
        }
    });
}

/// The user `alice` with a password, her repo, and a write token of hers.
fn make_user(vole: &Path, data: &Path) -> String {
    let token = user_with_token(vole, data, "alice", "correct horse battery staple", "write");
    sh(Command::new(vole)
        .args(["repo", "create", REPO, "--data"])
        .arg(data));
    token
}

fn main() {
    let issues = arg("--issues", 10_000) as usize;
    let comments = arg("--comments", 500) as usize;
    let worst_comments = arg("--worst-comments", 200) as usize;
    let requests = arg("--requests", 200) as usize;
    let restarts = arg("--restarts", 3) as usize;
    let files = arg("--files", 5000) as usize;
    let commits = arg("--commits", 200) as usize;
    let prs = arg("--prs", 8) as usize;
    let vole = release_vole();
    let root = tempfile::tempdir().unwrap();
    let work = root.path().join("work");
    let head = make_repo(&work, files, commits, false);
    assert!(commits > prs + 1, "--commits must exceed --prs + 1");
    // Pull request k: from main~k to its parent, so its diff is main~k's.
    for k in 1..=prs {
        sh(git(&work).args(["branch", &format!("pr-{k}"), &format!("main~{k}")]));
        sh(git(&work).args(["branch", &format!("base-{k}"), &format!("main~{}", k + 1)]));
    }
    make_wide(&work, files);
    let data = root.path().join("data");
    let token = make_user(&vole, &data);
    let port = free_port();
    let server = Children(vec![start_vole_with(&vole, &data, port, FLAGS)]);
    let url = format!("http://127.0.0.1:{port}/{REPO}.git");
    sh(git(&work).args(["push", "-q", &url, "--all"]));
    let api = Api {
        port,
        auth: format!("Authorization: Bearer {token}\r\n"),
    };
    println!(
        "# web-threads: issues={issues} comments={comments} worst_comments={worst_comments} \
         files={files} commits={commits} head={head} cpus={}",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    let (commented, worst, highest_open, open) =
        make_issues(&api, issues, comments, worst_comments);
    let mut conn = Conn::open(port);
    let mut pulls = Vec::new();
    for k in 1..=prs {
        let body = json!({"title": format!("pull {k}"), "head": format!("pr-{k}"),
                          "base": format!("base-{k}")});
        let made = api.call(&mut conn, "POST", "/pulls", &body, 201);
        let commit = sh(git(&work).args(["rev-parse", &format!("pr-{k}")]));
        pulls.push((
            made["number"].as_u64().unwrap(),
            commit,
            "wrapping_mul".to_string(),
        ));
    }
    let body = json!({"title": "rewrite", "head": "wide", "base": "main"});
    let made = api.call(&mut conn, "POST", "/pulls", &body, 201);
    let commit = sh(git(&work).args(["rev-parse", "wide"]));
    pulls.push((
        made["number"].as_u64().unwrap(),
        commit,
        "wrapping_mul".into(),
    ));
    drop(server);

    let list = format!("/{REPO}/-/issues");
    let last_page = open.div_ceil(50);
    let count = format!("class=\"count\">{open}<");
    let pages: Vec<(&str, String, String)> = vec![
        (
            "issues",
            list.clone(),
            format!("/-/issues/{highest_open}\""),
        ),
        (
            "issues-closed",
            format!("{list}?state=closed"),
            count.clone(),
        ),
        ("issues-label", format!("{list}?label=bug"), "bug".into()),
        (
            "issues-last-page",
            format!("{list}?page={last_page}"),
            count.clone(),
        ),
        (
            "issues-no-author",
            format!("{list}?author=nobody"),
            "class=\"count\">0<".into(),
        ),
        (
            "issue-500",
            format!("{list}/{commented}"),
            "Comment ".into(),
        ),
        (
            "issue-500-last",
            format!("{list}/{commented}?page={}", comments.div_ceil(200)),
            "Comment ".into(),
        ),
        ("issue-worst", format!("{list}/{worst}"), "item".into()),
    ];
    measure_pages(&vole, &data, &pages, restarts, requests);

    let port = free_port();
    let mut children = Children(vec![start_vole_with(&vole, &data, port, FLAGS)]);
    let cgit_port = free_port();
    let (nginx, fcgi) = start_cgit(
        root.path(),
        &data.join(format!("repos/{REPO}.git")),
        cgit_port,
    );
    children.0.extend([nginx, fcgi]);
    let api = Api { port, ..api };
    measure_pulls(&api, cgit_port, &pulls);
    let merges = arg("--merges", 5) as usize;
    let merge_commits = arg("--merge-commits", 100) as usize;
    let worst_merge = arg("--worst-merge-commits", 1000) as usize;
    measure_merges(&api, &work, merges, merge_commits, worst_merge);
}
