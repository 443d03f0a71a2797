//! The one-file size limit of a push (`--max-blob-size`), checked by
//! pre-receive over the objects the push brings (every kind: a commit with
//! a message of a gigabyte, or a tree of a million entries, is refused
//! like a file of that size): `git rev-list --objects`
//! from the pushed values, not from any existing ref, piped straight into
//! `git cat-file --batch-check`, in the hook's environment (the push's
//! quarantine, where the new objects are). Cost: one pass over the new
//! objects' headers, two git processes, memory for the few paths reported.

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
    let mut rev_list = crate::git::hook_command(git)
        .args(["rev-list", "--objects", "--stdin", "--not", "--all"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()?;
    let objects = rev_list
        .stdout
        .take()
        .ok_or_else(|| std::io::Error::other("rev-list has no stdout"))?;
    let mut check = crate::git::hook_command(git)
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
    Ok(found)
}
