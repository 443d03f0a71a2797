//! The data dir as a whole: `vole backup`, `vole restore` and `vole check`.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;

use super::control_client::decode;
use super::progress::Progress;
use vole_config::Config;
use vole_control::{Request, client::Client};
use vole_git::Git;
use vole_git::datadir::DataDir;

/// `vole backup DEST`: by the running server (which holds the cut), or
/// here under the data dir lock when none runs.
pub(super) fn backup(config: &Config, dest: &std::path::Path) -> anyhow::Result<ExitCode> {
    let dest =
        std::path::absolute(dest).with_context(|| format!("cannot resolve {}", dest.display()))?;
    let data = DataDir::new(config.data_dir.clone());
    let mut bar = Progress::new("backing up");
    let summary = if let Some(mut client) = Client::connect(&data.socket_path())? {
        let mut reply = client.call(Request::Backup {
            dest: dest.display().to_string(),
        })?;
        let mut pending = String::new();
        loop {
            let progress = reply.data.as_ref().and_then(|d| d.get("progress")).cloned();
            match progress {
                Some(p) if reply.ok => {
                    bar.set(
                        p["done"].as_u64().unwrap_or(0),
                        p["total"].as_u64().unwrap_or(0),
                    );
                }
                _ => break,
            }
            reply = loop {
                if let Some(next) = client.next_reply(&mut pending, Duration::from_secs(600))? {
                    break next;
                }
            };
        }
        decode::<serde_json::Value>(reply)?
    } else {
        let _lock = data.lock("vole backup")?;
        let cut = vole_control::backup::cut_offline(&data)?;
        let manifest = vole_control::backup::write(&data, cut, &dest, &mut |done, total| {
            bar.set(done, total)
        })?;
        vole_control::backup::summary(&manifest)
    };
    bar.finish();
    println!(
        "backed up {} files, {} bytes, {} repos into {}",
        summary["files"],
        summary["bytes"],
        summary["repos"],
        dest.display()
    );
    for log in summary["logs"].as_array().into_iter().flatten() {
        println!(
            "  {} through sequence {}",
            log["file"].as_str().unwrap_or("?"),
            log["seq"]
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// `vole restore SRC`: a backup into the (empty) data dir.
pub(super) fn restore(config: &Config, src: &std::path::Path) -> anyhow::Result<ExitCode> {
    let data = DataDir::new(config.data_dir.clone());
    let mut bar = Progress::new("restoring");
    let manifest =
        vole_control::backup::restore(src, &data, &mut |done, total| bar.set(done, total))?;
    bar.finish();
    println!(
        "restored {} files ({} repos) into {}; start the server on it, and `vole check` it",
        manifest.files.len(),
        manifest.repos.len(),
        data.root().display()
    );
    Ok(ExitCode::SUCCESS)
}

/// `vole check`: every repo and log frame checked; fails on a problem.
pub(super) fn check(config: &Config) -> anyhow::Result<ExitCode> {
    let git = Git::locate(config.git.as_deref())?;
    let report = vole_control::check::check(&DataDir::new(config.data_dir.clone()), &git);
    for problem in &report.problems {
        println!("{problem}");
    }
    for note in &report.notes {
        println!("note: {note}");
    }
    println!(
        "checked {} repos and {} log frames: {}",
        report.repos,
        report.log_frames,
        match report.problems.len() {
            0 => "no problems".to_string(),
            1 => "1 problem".to_string(),
            n => format!("{n} problems"),
        }
    );
    Ok(if report.problems.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
