//! `vole issue list|show` and `vole pr list|show`: the issues and pull
//! requests of the clone in the current directory, read from the
//! `refs/meta/shards/*` it fetched, as docs/metadata-format.md describes
//! them: no server, no data dir. The filters are the pages' (state,
//! label, author), newest first; `--json` prints the documents (a list
//! equals the API's once the server's fold has caught up). Text output
//! has terminal control characters taken out of everything a person
//! wrote.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, ExitCode, Stdio};

use anyhow::{Context, bail};
use serde_json::Value;
use vole_meta::entity::ThreadKind;

use super::ThreadCommand;

/// One document of the clone's shards: its path and its JSON.
struct Document {
    path: String,
    value: Value,
}

fn git(args: &[&str]) -> anyhow::Result<String> {
    let out = Command::new("git")
        .args(args)
        .stderr(Stdio::inherit())
        .output()
        .context("cannot run git")?;
    if !out.status.success() {
        bail!("`git {}` failed: is this a git repository?", args.join(" "));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Every document under `prefix` (`issues/`, `changes/`) of every shard.
fn documents(prefix: &str) -> anyhow::Result<Vec<Document>> {
    let refs = git(&["for-each-ref", "--format=%(refname)", "refs/meta/shards/"])?;
    if refs.trim().is_empty() {
        bail!(
            "this clone has no refs/meta/shards/*: fetch them first with git fetch origin 'refs/meta/*:refs/meta/*'"
        );
    }
    let mut wanted = Vec::new();
    for shard in refs.lines() {
        let paths = git(&["ls-tree", "-r", "--name-only", "-z", shard, "--", prefix])?;
        // A path with a line break would end its `cat-file --batch` line
        // early (and pair every later answer with the wrong path); the
        // server never writes one.
        for path in paths
            .split('\0')
            .filter(|p| p.ends_with(".json") && !p.contains('\n'))
        {
            wanted.push((shard.to_string(), path.to_string()));
        }
    }
    // One `cat-file --batch` for them all.
    let mut child = Command::new("git")
        .args(["cat-file", "--batch"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .context("cannot run git cat-file")?;
    let mut stdin = child.stdin.take().expect("piped");
    let asked: Vec<String> = wanted.iter().map(|(s, p)| format!("{s}:{p}\n")).collect();
    let writer = std::thread::spawn(move || {
        for line in asked {
            if stdin.write_all(line.as_bytes()).is_err() {
                break;
            }
        }
    });
    let mut out = BufReader::new(child.stdout.take().expect("piped"));
    let mut found = Vec::with_capacity(wanted.len());
    for (_, path) in wanted {
        let mut header = String::new();
        out.read_line(&mut header)?;
        let size: usize = header
            .split_whitespace()
            .nth(2)
            .and_then(|s| s.parse().ok())
            .with_context(|| format!("git cat-file: {header:?}"))?;
        let mut body = vec![0; size + 1];
        std::io::Read::read_exact(&mut out, &mut body)?;
        body.pop();
        // A reader skips what it does not know (docs/metadata-format.md).
        if let Ok(mut value) = serde_json::from_slice::<Value>(&body) {
            // The document's `kind` is its path's to say; the API's
            // objects do not carry it.
            if let Some(object) = value.as_object_mut() {
                object.remove("kind");
            }
            found.push(Document { path, value });
        }
    }
    let _ = writer.join();
    let _ = child.wait();
    Ok(found)
}

/// Characters that reorder the text around them on a terminal (bidi
/// marks, embeddings, overrides and isolates).
fn reorders(c: char) -> bool {
    matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// `text` with terminal control characters (escape sequences, carriage
/// returns, C1 controls, ...) and bidi reordering taken out; line breaks
/// and tabs kept.
fn printable(text: &str) -> String {
    text.chars()
        .filter(|c| (!c.is_control() || *c == '\n' || *c == '\t') && !reorders(*c))
        .collect()
}

/// [`printable`] on one line: line breaks and tabs as spaces, so a field
/// cannot forge the next row of a list.
fn one_line(text: &str) -> String {
    printable(text).replace(['\n', '\t'], " ")
}

/// `value` as JSON that is safe on a terminal: the control and bidi
/// characters serde_json leaves raw in strings (DEL, C1, U+202E, ...)
/// written as `\u` escapes, which JSON readers take back as they were.
fn terminal_json(value: &impl serde::Serialize) -> anyhow::Result<String> {
    let text = serde_json::to_string_pretty(value)?;
    Ok(text
        .chars()
        .map(|c| {
            if c.is_control() && c != '\n' || reorders(c) {
                format!("\\u{:04x}", c as u32)
            } else {
                c.to_string()
            }
        })
        .collect())
}

fn field<'a>(value: &'a Value, key: &str) -> &'a str {
    value[key].as_str().unwrap_or_default()
}

/// A thread's state as the pages name it: a change request marked merged
/// before merges recorded their commit says so.
fn state_of(thread: &Value) -> String {
    let state = one_line(field(thread, "state"));
    if state == "merged" && thread.get("merge_commit").is_none_or(Value::is_null) {
        return "merged (no merge commit recorded)".into();
    }
    state
}

/// The threads of `kind` (their main documents), newest first.
fn threads(kind: ThreadKind) -> anyhow::Result<(Vec<Value>, Vec<Document>)> {
    let (prefix, main) = match kind {
        ThreadKind::Issue => ("issues/", "issue.json"),
        ThreadKind::Change => ("changes/", "change.json"),
    };
    let (mut mains, comments): (Vec<Document>, Vec<Document>) = documents(prefix)?
        .into_iter()
        .partition(|d| d.path.ends_with(&format!("/{main}")));
    mains.sort_by_key(|d| std::cmp::Reverse(d.value["number"].as_u64().unwrap_or(0)));
    Ok((mains.into_iter().map(|d| d.value).collect(), comments))
}

pub fn thread_command(kind: ThreadKind, command: &ThreadCommand) -> anyhow::Result<ExitCode> {
    let (all, comments) = threads(kind)?;
    let noun = match kind {
        ThreadKind::Issue => "issue",
        ThreadKind::Change => "pull request",
    };
    match command {
        ThreadCommand::List {
            state,
            label,
            author,
            json,
        } => {
            let states: &[&str] = match kind {
                ThreadKind::Issue => &["open", "closed", "all"],
                ThreadKind::Change => &["open", "merged", "closed", "all"],
            };
            if !states.contains(&state.as_str()) {
                bail!(
                    "--state must be one of {}, got {state:?}",
                    states.join(", ")
                );
            }
            let listed: Vec<&Value> = all
                .iter()
                .filter(|t| state == "all" || field(t, "state") == state)
                .filter(|t| {
                    label.as_ref().is_none_or(|l| {
                        t["labels"]
                            .as_array()
                            .is_some_and(|ls| ls.iter().any(|x| x.as_str() == Some(l)))
                    })
                })
                .filter(|t| author.as_ref().is_none_or(|a| field(t, "author") == a))
                .collect();
            if *json {
                println!("{}", terminal_json(&listed)?);
            } else {
                for t in listed {
                    let labels: Vec<&str> = t["labels"]
                        .as_array()
                        .map(|ls| ls.iter().filter_map(Value::as_str).collect())
                        .unwrap_or_default();
                    println!(
                        "#{}\t{}\t{}\t{}{}",
                        t["number"].as_u64().unwrap_or_default(),
                        state_of(t),
                        one_line(field(t, "author")),
                        one_line(field(t, "title")),
                        if labels.is_empty() {
                            String::new()
                        } else {
                            format!("\t[{}]", one_line(&labels.join(", ")))
                        }
                    );
                }
            }
        }
        ThreadCommand::Show { number, json } => {
            let Some(thread) = all.iter().find(|t| t["number"].as_u64() == Some(*number)) else {
                bail!("there is no {noun} #{number} in this clone's refs/meta");
            };
            let id = field(thread, "id");
            let mut said: Vec<&Value> = comments
                .iter()
                .map(|d| &d.value)
                .filter(|c| field(c, "thread") == id && c["deleted"] != Value::Bool(true))
                .collect();
            said.sort_by(|a, b| field(a, "id").cmp(field(b, "id")));
            if *json {
                let shown = serde_json::json!({"thread": thread, "comments": said});
                println!("{}", terminal_json(&shown)?);
            } else {
                println!(
                    "#{} {} [{}] by {}",
                    number,
                    one_line(field(thread, "title")),
                    state_of(thread),
                    one_line(field(thread, "author"))
                );
                println!("\n{}", printable(field(thread, "body")));
                for c in said {
                    println!(
                        "\n--- {} at {}\n{}",
                        one_line(field(c, "author")),
                        one_line(field(c, "created_at")),
                        printable(field(c, "body"))
                    );
                }
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
