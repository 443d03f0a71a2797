//! Benchmark harness: the other harnesses, run against two builds of vole in
//! interleaved rounds: this checkout and a baseline (a build of an earlier
//! commit), so that a change that should not alter behaviour shows what it
//! costs.
//!
//! `cargo run --release --example before-after -- --baseline-target DIR [--current-target DIR] [--rounds 3] [--warmup 1] [--harnesses web,auth,...] [--web-args "..."]`
//!
//! `DIR` is the baseline's Cargo target directory, holding `release/vole`
//! and, for the harnesses that link the library instead of starting the
//! server (reflog, ref-cas), `release/examples/<name>` built from the
//! baseline commit. See README.md beside this file for how to build one.
//!
//! - Each round runs every harness twice, once per build, the order
//!   alternating from round to round. The server harnesses are this
//!   checkout's, pointed at the build's `vole` by `VOLE_BIN`; the library
//!   harnesses are each build's own.
//! - From a run's output, a figure is every `key=value` line that carries
//!   one of the harness's measured keys and its required tokens (the vole
//!   side, not nginx or cgit); its name is the line's naming tokens (page,
//!   server, storm size...) and bare words.
//!   A figure seen several times in a run counts by its median.
//! - Prints `harness=.. build=.. round=.. <figure>=<value>` per figure and
//!   run, then `speed harness=.. <figure> median=.. min=.. max=..`: the
//!   baseline's time over this build's (or this build's rate over the
//!   baseline's), so above 1 is faster, one ratio per round.
//! - Verification: every harness checks its own results (a clone's head, a
//!   page's content, every acknowledged write found) and fails the run if
//!   one is wrong; this harness fails if a run fails, or if a measured key
//!   of a harness shows none of its measured keys (nothing observed).

#![allow(clippy::unwrap_used)] // benchmark code: a failed unwrap is a failed run

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

#[path = "../common.rs"]
mod common;
use common::{arg, arg_text, median};

/// One harness and what to read from its output.
struct Harness {
    name: &'static str,
    /// Its arguments unless `--<name>-args` says otherwise: sized so a round
    /// of every harness takes minutes, not hours.
    args: &'static str,
    /// Links vole's library (each build runs its own example), rather than
    /// starting the `vole` binary.
    library: bool,
    /// `(key, higher_is_faster)` of each measured figure.
    keys: &'static [(&'static str, bool)],
    /// Tokens (prefixes) a line must carry to count.
    require: &'static [&'static str],
    /// Keys whose values name a figure (with the line's bare words, such as
    /// `reflog_append`), rather than measure it.
    naming: &'static [&'static str],
}

const HARNESSES: &[Harness] = &[
    Harness {
        name: "web",
        args: "--files 2000 --commits 400 --requests 200",
        library: false,
        keys: &[("p50_ms", false)],
        require: &["server=vole"],
        naming: &["page", "server", "state"],
    },
    Harness {
        name: "auth",
        args: "--rounds 3 --requests 2000 --password-requests 40",
        library: false,
        keys: &[("p50_us", false), ("rps", true)],
        require: &["credential="],
        naming: &["credential"],
    },
    Harness {
        name: "tree-serving",
        args: "--rounds 3 --seconds 5",
        library: false,
        keys: &[("warm_rps", true), ("cpu_us_per_req", false)],
        require: &["server=vole"],
        naming: &["server"],
    },
    Harness {
        name: "smart-http",
        args: "--rounds 3 --cases clone,push-small",
        library: false,
        keys: &[("mib_per_s", true), ("pushes_per_s", true)],
        require: &["server=vole"],
        naming: &["case", "server"],
    },
    Harness {
        name: "clone-storm",
        args: "--rounds 1 --storms 16 --single-pairs 5 --files 1000 --commits 300",
        library: false,
        keys: &[("mib_per_s", true), ("cpu_s_per_clone", false)],
        require: &["arm=vole"],
        naming: &["arm", "storm", "depth"],
    },
    Harness {
        name: "startup",
        args: "--issues 20000 --writers 16 --starts 3",
        library: false,
        keys: &[("ms", false)],
        require: &["start="],
        naming: &["start"],
    },
    Harness {
        name: "reflog",
        args: "--txns 20000 --rounds 3",
        library: true,
        keys: &[("txn_per_sec", true), ("txn_per_sec_16", true)],
        require: &["reflog_"],
        naming: &[],
    },
    Harness {
        name: "ref-cas",
        args: "-n 20000 --modes sharded-batched --rounds 2",
        library: true,
        keys: &[("entities_per_sec", true), ("cpu_us_per_write", false)],
        require: &["mode=sharded-batched"],
        naming: &["mode", "n", "writers"],
    },
];

/// A build under test: where its `vole` and its examples are.
struct Build {
    name: &'static str,
    target: PathBuf,
}

fn main() {
    let baseline = arg_text("--baseline-target")
        .map(PathBuf::from)
        .expect("--baseline-target DIR: the baseline build's Cargo target directory");
    let rounds = arg("--rounds", 3) as usize;
    // `--warmup N`: rounds run first and not counted. The first run after
    // the machine was idle was seen up to three times faster on its first
    // pages, whichever build it was (run 4 below in the README): a measured
    // run then always follows another.
    let warmup = arg("--warmup", 0) as usize;
    let chosen: Vec<&Harness> = match arg_text("--harnesses") {
        Some(list) => list
            .split(',')
            .map(|name| {
                HARNESSES
                    .iter()
                    .find(|h| h.name == name)
                    .unwrap_or_else(|| panic!("no harness {name:?}"))
            })
            .collect(),
        None => HARNESSES.iter().collect(),
    };
    // `--current-target DIR`: this side's build is another directory's
    // (a build kept from earlier), not this checkout's, which is not built.
    let here = match arg_text("--current-target") {
        Some(dir) => PathBuf::from(dir),
        None => {
            build_current(&chosen);
            this_target()
        }
    };
    let builds = [
        Build {
            name: "baseline",
            target: baseline,
        },
        Build {
            name: "current",
            target: here,
        },
    ];
    for build in &builds {
        check_build(build, &chosen);
    }
    println!(
        "# before-after: rounds={rounds} warmup={warmup} harnesses={} cpus={}",
        chosen.iter().map(|h| h.name).collect::<Vec<_>>().join(","),
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    // speeds[harness][figure] = one ratio per round
    let mut speeds: BTreeMap<(&str, String), Vec<f64>> = BTreeMap::new();
    for pass in 0..warmup + rounds {
        let counted = pass >= warmup;
        // Warm-up passes are numbered below 0 in the output; counted
        // rounds from 0, each alternating the order of the builds.
        let round = pass as i64 - warmup as i64;
        for harness in &chosen {
            let order: Vec<&Build> = if round.rem_euclid(2) == 0 {
                builds.iter().collect()
            } else {
                builds.iter().rev().collect()
            };
            let mut figures: BTreeMap<&str, BTreeMap<String, f64>> = BTreeMap::new();
            for build in order {
                let start = std::time::Instant::now();
                let out = run(harness, build, &builds[1].target);
                eprintln!(
                    "# {} against {} (round {round}) took {:.0} s",
                    harness.name,
                    build.name,
                    start.elapsed().as_secs_f64()
                );
                let found = read_figures(harness, &out);
                for (figure, value) in &found {
                    println!(
                        "harness={} build={} round={round} {figure}={value:.3}",
                        harness.name, build.name
                    );
                }
                figures.insert(build.name, found);
            }
            if !counted {
                continue;
            }
            let common = figures["current"]
                .keys()
                .filter(|figure| figures["baseline"].contains_key(*figure))
                .count();
            assert!(
                common > 0,
                "harness {}: the two builds share no figure (current {:?}, baseline {:?})",
                harness.name,
                figures["current"].keys(),
                figures["baseline"].keys()
            );
            for (figure, current) in &figures["current"] {
                let Some(base) = figures["baseline"].get(figure) else {
                    continue;
                };
                let faster = harness
                    .keys
                    .iter()
                    .find(|(key, _)| figure.ends_with(&format!(" {key}")) || figure == key)
                    .is_some_and(|(_, higher)| *higher);
                let speed = if faster {
                    current / base
                } else {
                    base / current
                };
                speeds
                    .entry((harness.name, figure.clone()))
                    .or_default()
                    .push(speed);
            }
        }
    }
    let mut worst = f64::INFINITY;
    for ((harness, figure), list) in &speeds {
        let min = list.iter().cloned().fold(f64::INFINITY, f64::min);
        let max = list.iter().cloned().fold(0.0, f64::max);
        let m = median(list.clone());
        worst = worst.min(m);
        println!(
            "speed harness={harness} {figure} median={m:.3} min={min:.3} max={max:.3} rounds={}",
            list.len()
        );
    }
    println!("speed worst_median={worst:.3}");
}

/// The target directory this harness was built in (`.../release/examples/`
/// holds it).
fn this_target() -> PathBuf {
    let exe = std::env::current_exe().expect("the harness's own path");
    exe.ancestors()
        .nth(3)
        .expect("the harness runs from <target>/release/examples/")
        .to_path_buf()
}

/// Builds this checkout's `vole` and the chosen harnesses, in release.
fn build_current(chosen: &[&Harness]) {
    let mut cargo = Command::new(env!("CARGO"));
    cargo.args(["build", "--release", "--quiet", "--bin", "vole"]);
    for harness in chosen {
        cargo.args(["--example", harness.name]);
    }
    common::sh(cargo.current_dir(env!("CARGO_MANIFEST_DIR")));
}

fn check_build(build: &Build, chosen: &[&Harness]) {
    let vole = build.target.join("release/vole");
    assert!(
        vole.is_file(),
        "{} has no release/vole",
        build.target.display()
    );
    for harness in chosen.iter().filter(|h| h.library) {
        let example = build.target.join("release/examples").join(harness.name);
        assert!(
            example.is_file(),
            "{} build has no release/examples/{} (the {} harness links the library: build it from that commit)",
            build.name,
            harness.name,
            harness.name
        );
    }
}

/// Runs `harness` against `build` and returns what it printed; panics with
/// its output if it failed. Its output goes to files, not pipes, and only
/// the harness itself is waited for: a worker it leaked would otherwise
/// hold the pipe open after it exits.
fn run(harness: &Harness, build: &Build, current: &Path) -> String {
    let home = if harness.library {
        &build.target
    } else {
        current
    };
    let exe = home.join("release/examples").join(harness.name);
    let args = arg_text(&format!("--{}-args", harness.name)).unwrap_or(harness.args.to_string());
    let logs = tempfile::tempdir().unwrap();
    let (out_path, err_path) = (logs.path().join("stdout"), logs.path().join("stderr"));
    let status = Command::new(&exe)
        .args(args.split_whitespace())
        .env("VOLE_BIN", build.target.join("release/vole"))
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out_path).unwrap())
        .stderr(std::fs::File::create(&err_path).unwrap())
        .status()
        .unwrap_or_else(|e| panic!("running {}: {e}", exe.display()));
    let stdout = std::fs::read_to_string(&out_path).unwrap_or_default();
    assert!(
        status.success(),
        "harness {} against the {} build failed ({status}):\n{stdout}\n{}",
        harness.name,
        build.name,
        std::fs::read_to_string(&err_path).unwrap_or_default()
    );
    stdout
}

/// The harness's figures in one run's output, each by its median.
fn read_figures(harness: &Harness, out: &str) -> BTreeMap<String, f64> {
    let mut seen: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for line in out.lines() {
        let tokens: Vec<&str> = line.split_whitespace().collect();
        if !harness
            .require
            .iter()
            .all(|r| tokens.iter().any(|t| t.starts_with(r)))
        {
            continue;
        }
        let name: Vec<&str> = tokens
            .iter()
            .filter(|t| match t.split_once('=') {
                Some((key, _)) => harness.naming.contains(&key),
                None => t.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'),
            })
            .copied()
            .collect();
        for (key, _) in harness.keys {
            let value = tokens.iter().find_map(|t| {
                t.strip_prefix(key)
                    .and_then(|rest| rest.strip_prefix('='))
                    .and_then(|v| v.parse::<f64>().ok())
            });
            if let Some(value) = value {
                seen.entry(format!("{} {key}", name.join(" ")))
                    .or_default()
                    .push(value);
            }
        }
    }
    assert!(
        !seen.is_empty(),
        "harness {}: no line with any of {:?} and {:?} in its output (nothing measured):\n{out}",
        harness.name,
        harness.keys,
        harness.require
    );
    seen.into_iter()
        .map(|(figure, values)| (figure, median(values)))
        .collect()
}
