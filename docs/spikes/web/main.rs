//! Benchmark harness for the web UI (`crates/web`) against cgit (Debian's
//! package, its cache off, behind nginx + fcgiwrap) on the same repo.
//!
//! `cargo run --release --example web [-- --files 5000 --commits 2000 --requests 200 --flat 0]`
//!
//! Builds a repo of `--files` files and `--commits` commits, pushes it to a
//! fresh vole and points cgit at the same bare repo. For each page (root
//! tree, deep tree, a highlighted blob, the log, a commit) it measures the
//! first request after start (cold) and `--requests` sequential requests on
//! one connection (warm), every response checked for the page's content
//! first. Prints `page=<name> server=<vole|cgit> state=<cold|warm>
//! p50_ms=.. p99_ms=..` and `ratio page=<name> warm_median=..` (vole/cgit).
//!
//! `--after-push N` then makes N pushes of one commit each and times the
//! first view of the root tree, the deep tree and the new commit's page
//! right after each, on vole and on cgit (`after_push.rs`).
//!
//! `--against <path to another build's vole>` compares two builds of vole
//! instead (each on its own data, the same repo pushed to both): each
//! page's requests alternate between the two in `--batches` batches, and
//! `paired page=<name> ... speed_batch_median=..` is the other build's p50
//! over this one's (`VOLE_BIN`'s), the median of the batch pairs; then
//! each page's first views at `--first-views` other commits, each asked of
//! both builds in turn (`first_views page=<name> ... speed_median=..`).

#![allow(clippy::unwrap_used)] // test and benchmark code: a failed unwrap is a failed run

use std::process::Command;

#[path = "../common.rs"]
mod common;
use common::{arg, free_port, git, median, release_vole, sh, start_vole};

mod after_push;
mod fixture;
use fixture::{Children, make_repo, percentile, start_cgit, timed};

/// One page on two vole builds (`--against`): `requests` requests to each,
/// in `batches` batches that alternate between the two, so a drift in the
/// machine's speed during the run falls on both alike. Prints each one's
/// warm p50 and `speed` = the other's p50 / this build's (above 1: this
/// build is faster), and the same for each batch pair, whose median is
/// the figure to quote.
fn paired(page: &str, path: &str, expect: &str, ports: [u16; 2], requests: usize, batches: usize) {
    let urls = ports.map(|port| format!("http://127.0.0.1:{port}{path}"));
    let cold = urls.clone().map(|url| timed(&[url], expect)[0]);
    let per_batch = requests.div_ceil(batches).max(1);
    let mut all = [Vec::new(), Vec::new()];
    let mut speeds = Vec::new();
    for batch in 0..batches {
        // Which build goes first alternates too.
        let order = if batch % 2 == 0 { [0, 1] } else { [1, 0] };
        let mut p50 = [0.0; 2];
        for side in order {
            let times = timed(&vec![urls[side].clone(); per_batch], expect);
            p50[side] = median(times.clone());
            all[side].extend(times);
        }
        speeds.push(p50[1] / p50[0]);
    }
    let [this, other] = all.map(median);
    println!(
        "paired page={page} cold_ms={:.3}/{:.3} this_p50_ms={this:.3} against_p50_ms={other:.3} \
         speed_overall={:.3} speed_batch_median={:.3} batches={batches}x{per_batch}",
        cold[0],
        cold[1],
        other / this,
        median(speeds),
    );
}

/// First views on two builds (`--against`): the page at each of `ids`
/// (other commits of the same history, so nothing a cache holds answers
/// it), each asked of both builds in turn, which one goes first
/// alternating. Prints each one's median and `speed`, the median over the
/// views of the other's time / this build's.
fn first_views(page: &str, path: &str, commit: &str, ports: [u16; 2], ids: &[String]) {
    let mut times = [Vec::new(), Vec::new()];
    let mut speeds = Vec::new();
    for (n, id) in ids.iter().enumerate() {
        let at = if page == "commit" {
            path.replace(commit, id)
        } else {
            path.replacen("/main", &format!("/{id}"), 1)
        };
        let order = if n % 2 == 0 { [0, 1] } else { [1, 0] };
        let mut took = [0.0; 2];
        for side in order {
            let url = format!("http://127.0.0.1:{}{at}", ports[side]);
            took[side] = timed(&[url], "</html>")[0];
            times[side].push(took[side]);
        }
        speeds.push(took[1] / took[0]);
    }
    let [this, other] = times.map(median);
    println!(
        "first_views page={page} this_p50_ms={this:.3} against_p50_ms={other:.3} \
         speed_median={:.3} views={}",
        median(speeds),
        ids.len()
    );
}

fn main() {
    let files = arg("--files", 5000) as usize;
    let commits = arg("--commits", 2000) as usize;
    let requests = arg("--requests", 200) as usize;
    let vole = release_vole();
    let root = tempfile::tempdir().unwrap();
    let work = root.path().join("work");
    // --flat 1: every file in `src/` itself, so the deep-tree page is a
    // directory of `--files` entries, each commit touching three of them.
    let flat = arg("--flat", 0) != 0;
    let head = make_repo(&work, files, commits, flat);
    // The commit page: one a few back, touching three files.
    let commit = sh(git(&work).args(["rev-parse", "main~5"]));

    let data = root.path().join("data");
    sh(Command::new(&vole)
        .args(["repo", "create", "bench/big", "--data"])
        .arg(&data));
    let vole_port = free_port();
    let mut children = Children(vec![start_vole(&vole, &data, vole_port)]);
    sh(git(&work).args([
        "push",
        "-q",
        &format!("http://127.0.0.1:{vole_port}/bench/big.git"),
        "main",
    ]));
    // --against <vole>: a second build's vole, on its own data with the
    // same pushed repo, in cgit's place (see `paired`).
    let against = std::env::args()
        .skip_while(|a| a != "--against")
        .nth(1)
        .map(std::path::PathBuf::from);
    let other_port = match &against {
        Some(other) => {
            let other_data = root.path().join("other-data");
            sh(Command::new(other)
                .args(["repo", "create", "bench/big", "--data"])
                .arg(&other_data));
            let port = free_port();
            children.0.push(start_vole(other, &other_data, port));
            sh(git(&work).args([
                "push",
                "-q",
                &format!("http://127.0.0.1:{port}/bench/big.git"),
                "main",
            ]));
            port
        }
        None => {
            let bare = data.join("repos/bench/big.git");
            let port = free_port();
            let (nginx, fcgi) = start_cgit(root.path(), &bare, port);
            children.0.push(nginx);
            children.0.push(fcgi);
            port
        }
    };

    let deep = if flat { "src" } else { "src/m3/n4" };
    let blob = format!("{deep}/file43.rs");
    // (page, vole path, cgit path, text both pages must contain)
    let pages: Vec<(&str, String, String, String)> = vec![
        (
            // vole's with each entry's last commit (`src` is the last
            // commit's, `bin` and `data` the first's: the walk goes
            // through the whole history); cgit's tree has no such column.
            "root-tree",
            "/bench/big/-/tree/main".into(),
            "/cgit/big/tree/".into(),
            "src".into(),
        ),
        (
            "deep-tree",
            format!("/bench/big/-/tree/main/{deep}"),
            format!("/cgit/big/tree/{deep}"),
            "file43.rs".into(),
        ),
        (
            "blob",
            format!("/bench/big/-/blob/main/{blob}"),
            format!("/cgit/big/tree/{blob}"),
            "wrapping_mul".into(),
        ),
        (
            "blob-binary",
            "/bench/big/-/blob/main/bin/blob.bin".into(),
            "/cgit/big/tree/bin/blob.bin".into(),
            "blob.bin".into(),
        ),
        (
            "blob-deep",
            "/bench/big/-/blob/main/data/deep.json".into(),
            "/cgit/big/tree/data/deep.json".into(),
            "deep.json".into(),
        ),
        (
            // A file every commit rewrote a line of.
            "blame",
            "/bench/big/-/blame/main/src/long.rs".into(),
            "/cgit/big/blame/src/long.rs".into(),
            "long199".into(),
        ),
        (
            "log",
            "/bench/big/-/commits/main".into(),
            "/cgit/big/log/".into(),
            format!("commit {}", commits - 1),
        ),
        (
            "commit",
            format!("/bench/big/-/commit/{commit}"),
            format!("/cgit/big/commit/?id={commit}"),
            "wrapping_mul".into(),
        ),
    ];
    println!(
        "# web: files={files} commits={commits} requests={requests} flat={flat} head={head} cpus={}",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    if against.is_some() {
        let batches = arg("--batches", 12) as usize;
        for (page, vole_path, _, expect) in &pages {
            let expect = match *page {
                "root-tree" => ">commit 0</a>",
                _ => expect.as_str(),
            };
            paired(
                page,
                vole_path,
                expect,
                [vole_port, other_port],
                requests,
                batches,
            );
        }
        // --first-views N: N commits spread over the history, newest first.
        let views = arg("--first-views", 40) as usize;
        let all = sh(git(&work).args(["rev-list", "main"]));
        let all: Vec<&str> = all.lines().collect();
        let step = (all.len() / views.max(1)).max(1);
        let ids: Vec<String> = all
            .iter()
            .step_by(step)
            .take(views)
            .map(|s| s.to_string())
            .collect();
        for (page, vole_path, _, _) in &pages {
            first_views(page, vole_path, &commit, [vole_port, other_port], &ids);
        }
        drop(children);
        return;
    }
    let cgit_port = other_port;
    let mut ratios = Vec::new();
    for (page, vole_path, cgit_path, expect) in &pages {
        let mut warm = Vec::new();
        for (server, port, path) in [
            ("vole", vole_port, vole_path),
            ("cgit", cgit_port, cgit_path),
        ] {
            let url = format!("http://127.0.0.1:{port}{path}");
            // vole's root tree must show the first commit as the last one
            // of `bin/` and `data/`: the walk went through all history.
            let expect = match (*page, server) {
                ("root-tree", "vole") => ">commit 0</a>",
                _ => expect.as_str(),
            };
            let cold = timed(std::slice::from_ref(&url), expect);
            println!(
                "page={page} server={server} state=cold p50_ms={:.3} p99_ms={:.3}",
                cold[0], cold[0]
            );
            let times = timed(&vec![url; requests], expect);
            let p50 = median(times.clone());
            println!(
                "page={page} server={server} state=warm p50_ms={p50:.3} p99_ms={:.3}",
                percentile(&times, 0.99)
            );
            warm.push(p50);
        }
        let ratio = warm[0] / warm[1];
        ratios.push(ratio);
        println!("ratio page={page} warm_median={ratio:.3}");
    }
    println!(
        "ratio worst={:.3}",
        ratios.iter().cloned().fold(0.0, f64::max)
    );
    let rounds = arg("--after-push", 0) as usize;
    if rounds > 0 {
        after_push::after_pushes(&work, [vole_port, cgit_port], rounds, files, flat);
    }
    drop(children);
}
