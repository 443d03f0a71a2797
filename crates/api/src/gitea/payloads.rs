//! Gitea's webhook payloads (`push`, `create`, `delete`, `issues`,
//! `issue_comment`, `pull_request`), built from the objects the API
//! answers with ([`Shaper`]) so a receiver written for Gitea parses them.
//! A push's commits are read with one bounded `git log` (at most
//! [`MAX_COMMITS`], each with at most [`MAX_PATHS`] paths a list).
//! Blocking (store reads, a git child).

use serde_json::{Value, json};
use vole_access::ResolvedRepo;
use vole_git::Bounds;
use vole_meta::MetaError;
use vole_meta::entity::{Change, ChangeState, Comment, Issue, ThreadKind};

use super::shape::Shaper;

/// Commits a push payload lists (`total_commits` counts them all).
pub const MAX_COMMITS: usize = 20;
/// Paths each of a commit's `added`, `removed`, `modified` lists.
pub const MAX_PATHS: usize = 100;
/// A commit message's bytes a payload keeps.
pub const MAX_MESSAGE: usize = 16 << 10;
/// A push payload's bytes at most: past it, its oldest commits are left
/// out (`total_commits` still counts them).
pub const MAX_PUSH_PAYLOAD: usize = 256 << 10;

const GIT_BOUNDS: Bounds = Bounds {
    max_output: 1 << 20,
    deadline: std::time::Duration::from_secs(20),
};

/// One ref's move, as a push's events need it.
pub struct RefChange<'a> {
    pub ref_name: &'a str,
    pub old: Option<&'a str>,
    pub new: Option<&'a str>,
    pub pusher: &'a str,
}

const ZERO: &str = "0000000000000000000000000000000000000000";

/// `push`: the ref's move, its new commits (newest first), who pushed.
pub fn push(s: &Shaper<'_>, repo: &ResolvedRepo, change: &RefChange<'_>) -> Value {
    let shaped = s.repo(repo).map(|r| json!(r)).unwrap_or(Value::Null);
    let html = s.base.html(&repo.to_string());
    let (commits, total) = match change.new {
        Some(new) if change.ref_name.starts_with("refs/heads/") => {
            commits(s, repo, change.ref_name, change.old, new)
        }
        _ => (Vec::new(), 0),
    };
    let before = change.old.unwrap_or(ZERO);
    let after = change.new.unwrap_or(ZERO);
    let mut shaped_commits: Vec<Value> = commits.iter().map(|c| c.json(&html)).collect();
    // Bounded: the oldest commits go first (the newest is `head_commit`).
    let mut bytes: usize = shaped_commits.iter().map(|c| c.to_string().len()).sum();
    while bytes > MAX_PUSH_PAYLOAD && shaped_commits.len() > 1 {
        bytes -= shaped_commits.pop().map_or(0, |c| c.to_string().len());
    }
    let sender = json!(s.user(change.pusher));
    json!({
        "ref": change.ref_name,
        "before": before,
        "after": after,
        "compare_url": format!("{html}/compare/{before}...{after}"),
        "head_commit": shaped_commits.first().cloned().unwrap_or(Value::Null),
        "commits": shaped_commits,
        "total_commits": total,
        "repository": shaped,
        "pusher": sender,
        "sender": sender,
    })
}

/// `create` (a branch or tag made) and `delete` (one deleted).
pub fn create_or_delete(s: &Shaper<'_>, repo: &ResolvedRepo, change: &RefChange<'_>) -> Value {
    let shaped = s.repo(repo).map(|r| json!(r)).unwrap_or(Value::Null);
    let (short, ref_type) = short_ref(change.ref_name);
    let sender = json!(s.user(change.pusher));
    match change.new {
        Some(new) => json!({
            "sha": new,
            "ref": short,
            "ref_type": ref_type,
            "repository": shaped,
            "sender": sender,
        }),
        None => json!({
            "ref": short,
            "ref_type": ref_type,
            "pusher_type": "user",
            "repository": shaped,
            "sender": sender,
        }),
    }
}

/// A push of more refs than one push gives events for: how many it left
/// out.
pub fn refs_left_out(s: &Shaper<'_>, repo: &ResolvedRepo, pusher: &str, left_out: usize) -> Value {
    let shaped = s.repo(repo).map(|r| json!(r)).unwrap_or(Value::Null);
    let sender = json!(s.user(pusher));
    json!({
        "ref": "",
        "before": ZERO,
        "after": ZERO,
        "commits": [],
        "total_commits": 0,
        "refs_left_out": left_out,
        "repository": shaped,
        "pusher": sender,
        "sender": sender,
    })
}

/// `issues`: `action` on the issue as this version of it is.
pub fn issue(s: &Shaper<'_>, repo: &ResolvedRepo, action: &str, issue: &Issue) -> Value {
    let meta = s.repo_meta(repo);
    json!({
        "action": action,
        "number": issue.number,
        "issue": s.issue(repo, &meta, issue),
        "repository": s.repo(repo).map(|r| json!(r)).unwrap_or(Value::Null),
        "sender": s.user(&issue.author),
    })
}

/// `pull_request`: `action` on the pull request as this version of it is
/// (a merge is Gitea's `closed` with `merged: true`).
pub fn pull(s: &Shaper<'_>, repo: &ResolvedRepo, action: &str, change: &Change) -> Value {
    let meta = s.repo_meta(repo);
    let sender = match (&change.state, &change.merged_by) {
        (ChangeState::Merged, Some(by)) => by.as_str(),
        _ => change.author.as_str(),
    };
    json!({
        "action": action,
        "number": change.number,
        "pull_request": s.pull(repo, &meta, change, false).map(|p| json!(p)).unwrap_or(Value::Null),
        "repository": s.repo(repo).map(|r| json!(r)).unwrap_or(Value::Null),
        "sender": s.user(sender),
        "requested_reviewer": Value::Null,
        "review": Value::Null,
    })
}

/// What a read for an event's payload found; `None` for a document that
/// is not there, and for one that cannot be read now (its body left in a
/// blob that does not read), which is logged: that event is not sent.
pub(crate) fn read_for_event<T>(
    repo: &ResolvedRepo,
    what: &str,
    read: Result<T, MetaError>,
) -> Option<T> {
    match read {
        Ok(found) => Some(found),
        Err(MetaError::NotFound(_) | MetaError::NoRepo(_)) => None,
        Err(e) => {
            tracing::error!(
                repo = %repo,
                error = %vole_stdx::error_chain::Chain(&e),
                "webhooks: {what} could not be read for an event's payload; the event is not sent"
            );
            None
        }
    }
}

/// `issue_comment`: `action` on a comment of an issue or pull request.
pub fn comment(
    s: &Shaper<'_>,
    repo: &ResolvedRepo,
    action: &str,
    comment: &Comment,
) -> Option<Value> {
    let meta = s.repo_meta(repo);
    let (kind, number) = s.app.meta.thread_number(repo, &comment.thread).ok()??;
    let shaped_issue = match kind {
        ThreadKind::Issue => {
            let issue = read_for_event(repo, "an issue", s.app.meta.issue(repo, number))?;
            json!(s.issue(repo, &meta, &issue))
        }
        ThreadKind::Change => {
            let change = read_for_event(repo, "a pull request", s.app.meta.change(repo, number))?;
            json!(s.change_issue(repo, &meta, &change))
        }
    };
    Some(json!({
        "action": action,
        "issue": shaped_issue,
        "comment": s.comment(repo, (comment.thread_kind, number), comment),
        "repository": s.repo(repo).map(|r| json!(r)).unwrap_or(Value::Null),
        "sender": s.user(&comment.author),
        "is_pull": comment.thread_kind == ThreadKind::Change,
    }))
}

/// `refs/heads/x` as (`x`, `branch`), `refs/tags/v` as (`v`, `tag`).
fn short_ref(ref_name: &str) -> (&str, &'static str) {
    if let Some(tag) = ref_name.strip_prefix("refs/tags/") {
        (tag, "tag")
    } else {
        (
            ref_name.strip_prefix("refs/heads/").unwrap_or(ref_name),
            "branch",
        )
    }
}

struct PushedCommit {
    id: String,
    author: (String, String),
    author_time: String,
    committer: (String, String),
    message: String,
    added: Vec<String>,
    removed: Vec<String>,
    modified: Vec<String>,
}

impl PushedCommit {
    fn json(&self, html: &str) -> Value {
        let person = |(name, email): &(String, String)| json!({ "name": name, "email": email, "username": "" });
        json!({
            "id": self.id,
            "message": self.message,
            "url": format!("{html}/-/commit/{}", self.id),
            "author": person(&self.author),
            "committer": person(&self.committer),
            "verification": Value::Null,
            "timestamp": self.author_time,
            "added": self.added,
            "removed": self.removed,
            "modified": self.modified,
        })
    }
}

/// The commits `new` brings to `ref_name` (from `old`, or for a new
/// branch those on no other branch), newest first, at most
/// [`MAX_COMMITS`], and how many there are.
fn commits(
    s: &Shaper<'_>,
    repo: &ResolvedRepo,
    ref_name: &str,
    old: Option<&str>,
    new: &str,
) -> (Vec<PushedCommit>, u64) {
    let dir = s.app.repos.path(repo);
    let git = &s.app.control.git;
    let range: Vec<String> = match old {
        Some(old) => vec![format!("{old}..{new}")],
        None => vec![
            new.to_string(),
            "--not".into(),
            format!("--exclude={}", ref_name.trim_start_matches("refs/heads/")),
            "--branches".into(),
        ],
    };
    let mut count = vec!["rev-list".to_string(), "--count".into()];
    count.extend(range.iter().cloned());
    // Fields and records split at a mark no commit can hold: it is
    // random for this read, so a message cannot forge paths or fields.
    let mark = format!("vole{:032x}", rand::random::<u128>());
    let max = format!("--max-count={MAX_COMMITS}");
    let format = format!(
        "--format={mark}C%H{mark}F%an{mark}F%ae{mark}F%aI{mark}F%cn{mark}F%ce{mark}F%B{mark}E"
    );
    let mut log = vec![
        "log".to_string(),
        max,
        "--no-renames".into(),
        "--name-status".into(),
        format,
    ];
    log.extend(range);
    let log: Vec<&str> = log.iter().map(String::as_str).collect();
    let Ok(out) = git.run_bounded(&dir, &log, GIT_BOUNDS) else {
        return (Vec::new(), 0);
    };
    let text = String::from_utf8_lossy(&out.stdout);
    let mut records: Vec<&str> = text.split(&format!("{mark}C")).skip(1).collect();
    if out.truncated {
        // The last one was cut inside.
        records.pop();
    }
    let commits: Vec<PushedCommit> = records
        .into_iter()
        .filter_map(|record| parse_commit(record, &mark))
        .collect();
    // Most pushes bring fewer than the list holds: then it is the count,
    // and no second git runs (the feed's git children share the cores
    // with the pushes).
    let total = if commits.len() < MAX_COMMITS && !out.truncated {
        commits.len() as u64
    } else {
        let count: Vec<&str> = count.iter().map(String::as_str).collect();
        git.run_bounded(&dir, &count, GIT_BOUNDS)
            .ok()
            .and_then(|out| String::from_utf8_lossy(&out.stdout).trim().parse().ok())
            .unwrap_or(commits.len() as u64)
    };
    (commits, total)
}

/// One `git log` record: the header fields split at `mark`, then
/// `--name-status` lines. A message is kept to [`MAX_MESSAGE`] bytes.
fn parse_commit(record: &str, mark: &str) -> Option<PushedCommit> {
    let (head, paths) = record.split_once(&format!("{mark}E"))?;
    let field_mark = format!("{mark}F");
    let mut fields = head.split(field_mark.as_str());
    let id = fields.next()?.trim().to_string();
    if id.is_empty() {
        return None;
    }
    let author = (fields.next()?.to_string(), fields.next()?.to_string());
    let author_time = fields.next()?.to_string();
    let committer = (fields.next()?.to_string(), fields.next()?.to_string());
    let message = vole_stdx::prefix(fields.next()?, MAX_MESSAGE).to_string();
    let mut commit = PushedCommit {
        id,
        author,
        author_time,
        committer,
        message,
        added: Vec::new(),
        removed: Vec::new(),
        modified: Vec::new(),
    };
    for line in paths.lines() {
        let Some((status, path)) = line.split_once('\t') else {
            continue;
        };
        let list = match status {
            "A" => &mut commit.added,
            "D" => &mut commit.removed,
            _ => &mut commit.modified,
        };
        if list.len() < MAX_PATHS {
            list.push(path.to_string());
        }
    }
    Some(commit)
}
