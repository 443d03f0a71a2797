//! The one-file size limit of a push (`--max-blob-size`), checked by
//! pre-receive over the objects the push brings (every kind: a commit with
//! a message of a gigabyte, or a tree of a million entries, is refused
//! like a file of that size): `git rev-list --objects`
//! from the pushed values, not from any existing ref, piped straight into
//! `git cat-file --batch-check`, in the hook's environment (the push's
//! quarantine, where the new objects are); when that finds none, every
//! object of the quarantine is looked at too (a pack may bring objects no
//! pushed ref reaches). Cost: two passes over the new objects' headers,
//! three git processes, memory for the few paths reported.

use std::io::{BufRead, BufReader, Write};
use std::process::Stdio;

use super::RefUpdate;

/// A pushed object over the limit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Oversized {
    /// `blob`, `tree`, `commit` or `tag`.
    pub kind: String,
    /// Where the push has it (the first path `rev-list` names it by).
    pub path: String,
    pub id: String,
    pub size: u64,
}

/// Blobs reported at most; the push is refused at the first.
const MAX_REPORTED: usize = 10;

/// Blobs larger than `limit` bytes among the objects `updates` bring (at
/// most [`MAX_REPORTED`]).
pub fn oversized_blobs(
    git: &str,
    updates: &[RefUpdate],
    limit: u64,
) -> std::io::Result<Vec<Oversized>> {
    let news: Vec<&str> = updates
        .iter()
        .filter(|u| !u.is_deletion())
        .map(|u| u.new.as_str())
        .collect();
    if news.is_empty() {
        return Ok(Vec::new());
    }
    // The pushed values on stdin (positive: read where `--stdin` stands),
    // then everything any ref already reaches excluded.
    let mut rev_list = vole_git::hook_command(git)
        .args(["rev-list", "--objects", "--stdin", "--not", "--all"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()?;
    let objects = rev_list
        .stdout
        .take()
        .ok_or_else(|| std::io::Error::other("rev-list has no stdout"))?;
    let mut check = vole_git::hook_command(git)
        .args([
            "cat-file",
            "--batch-check=%(objecttype) %(objectsize) %(objectname) %(rest)",
        ])
        .stdin(Stdio::from(objects))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()?;
    if let Some(mut stdin) = rev_list.stdin.take() {
        let mut input = news.join("\n");
        input.push('\n');
        stdin.write_all(input.as_bytes())?;
    }
    let headers = check
        .stdout
        .take()
        .ok_or_else(|| std::io::Error::other("cat-file has no stdout"))?;
    let mut found = over_the_limit(headers, limit)?;
    // Enough found (or all read): the children are not needed further.
    let _ = rev_list.kill();
    let _ = check.kill();
    let listed = rev_list.wait()?;
    let checked = check.wait()?;
    if found.is_empty() && !(listed.success() && checked.success()) {
        return Err(std::io::Error::other(format!(
            "listing the pushed objects failed (rev-list {listed}, cat-file {checked})"
        )));
    }
    if found.is_empty() {
        found = unreachable_oversized(git, limit)?;
    }
    Ok(found)
}

/// Objects larger than `limit` that the push brings but no pushed ref
/// reaches: a pack may carry any object, and git keeps every one (anyone
/// may then fetch it by id). Every object in the push's quarantine
/// (`GIT_QUARANTINE_PATH`, its alternates, the repo's own objects, left
/// out) is looked at; a push without one (only deletions) brought none.
fn unreachable_oversized(git: &str, limit: u64) -> std::io::Result<Vec<Oversized>> {
    let Some(quarantine) = std::env::var_os("GIT_QUARANTINE_PATH") else {
        return Ok(Vec::new());
    };
    let mut check = vole_git::hook_command(git)
        .args([
            "cat-file",
            "--batch-all-objects",
            "--batch-check=%(objecttype) %(objectsize) %(objectname)",
        ])
        .env("GIT_OBJECT_DIRECTORY", &quarantine)
        .env_remove("GIT_ALTERNATE_OBJECT_DIRECTORIES")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()?;
    let headers = check
        .stdout
        .take()
        .ok_or_else(|| std::io::Error::other("cat-file has no stdout"))?;
    let found = over_the_limit(headers, limit)?;
    let _ = check.kill();
    let checked = check.wait()?;
    if found.is_empty() && !checked.success() {
        return Err(std::io::Error::other(format!(
            "listing the pushed objects failed (cat-file {checked})"
        )));
    }
    Ok(found)
}

/// The objects over `limit` among `cat-file --batch-check` lines
/// `TYPE SIZE ID [PATH]`, at most [`MAX_REPORTED`] (reading stops there).
fn over_the_limit(headers: impl std::io::Read, limit: u64) -> std::io::Result<Vec<Oversized>> {
    let mut found = Vec::new();
    for line in BufReader::new(headers).lines() {
        let line = line?;
        let mut fields = line.splitn(4, ' ');
        let (Some(kind), Some(size), Some(id)) = (fields.next(), fields.next(), fields.next())
        else {
            continue;
        };
        let Ok(size) = size.parse::<u64>() else {
            continue;
        };
        if size > limit {
            found.push(Oversized {
                kind: kind.to_string(),
                path: fields.next().unwrap_or_default().to_string(),
                id: id.to_string(),
                size,
            });
            if found.len() == MAX_REPORTED {
                break;
            }
        }
    }
    Ok(found)
}
