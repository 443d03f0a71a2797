//! The blame page: which commit last changed each line of a file at a
//! revision, lines grouped by commit, each group linked to its commit.
//! `git blame --porcelain` under a read slot and the read deadline, for
//! the lines the blob page shows (at most its first 10,000), output cut
//! at a byte bound, cached by (commit, path); the lines themselves are
//! the blob page's (highlighted, cached by blob id).

use std::sync::Arc;

use axum::extract::{Path, State};
use vole_http::RepoAccess;
use vole_http::repo_access::Read;

use super::blob::{BlobContent, blob_content};
use super::browse::View;
use super::last_commit::Touch;
use super::resolve::file_at;
use super::*;
use crate::caches::Weigh;

/// Most bytes of `git blame --porcelain` output read (a line costs its
/// text and about 50 bytes; a commit's first line some 300 more).
const MAX_BLAME_BYTES: usize = 16 << 20;

/// Lines `start..start + count` (1-based) last changed by `commits[commit]`.
#[derive(Clone, Copy)]
pub struct Group {
    pub start: usize,
    pub count: usize,
    pub commit: usize,
}

pub struct Blame {
    pub groups: Vec<Group>,
    pub commits: Vec<Touch>,
    /// The output was cut at [`MAX_BLAME_BYTES`]: lines after the last
    /// group are not blamed.
    pub cut: bool,
}

impl Weigh for Blame {
    fn weight(&self) -> usize {
        self.groups.len() * std::mem::size_of::<Group>() + self.commits.weight()
    }
}

/// (the repo's incarnation, commit, file): blame reads the repo's
/// objects, so one repo's never answers for another's.
pub type Key = (String, gix::ObjectId, Vec<String>);

/// Parses `git blame --porcelain`: a line `SHA ORIG FINAL [COUNT]` per
/// line of the file, the commit's headers (`author`, `author-time`,
/// `summary`, ...) the first time it appears, then `\t` and the line.
pub fn parse_porcelain(out: &str) -> Blame {
    let mut commits: Vec<Touch> = Vec::new();
    let mut index_of: HashMap<String, usize> = HashMap::new();
    let mut groups: Vec<Group> = Vec::new();
    let mut current: Option<usize> = None;
    for line in out.lines() {
        if line.starts_with('\t') {
            continue;
        }
        let mut words = line.split(' ');
        let first = words.next().unwrap_or_default();
        if first.len() == 40 && first.bytes().all(|b| b.is_ascii_hexdigit()) {
            let Some(final_line) = words.nth(1).and_then(|n| n.parse::<usize>().ok()) else {
                continue;
            };
            let next = commits.len();
            let commit = *index_of.entry(first.to_string()).or_insert(next);
            if commit == next {
                commits.push(Touch {
                    id: first.to_string(),
                    summary: String::new(),
                    author: String::new(),
                    time: String::new(),
                });
            }
            current = Some(commit);
            match groups.last_mut() {
                Some(group)
                    if group.commit == commit && group.start + group.count == final_line =>
                {
                    group.count += 1;
                }
                _ => groups.push(Group {
                    start: final_line,
                    count: 1,
                    commit,
                }),
            }
            continue;
        }
        let Some(commit) = current else { continue };
        let value = line.split_once(' ').map_or("", |(_, v)| v);
        let touch = &mut commits[commit];
        match first {
            "author" => touch.author = super::last_commit::short_subject(value),
            "author-time" => touch.time = vole_stdx::time::seconds(value.parse().unwrap_or(0)),
            "summary" => touch.summary = super::last_commit::short_subject(value),
            _ => {}
        }
    }
    Blame {
        groups,
        commits,
        cut: false,
    }
}

/// `git blame --porcelain` of the first `shown` lines of `key`'s file at
/// its commit, under a read slot and the read deadline (cached by the
/// caller).
async fn run_blame(
    app: &WebState,
    git: vole_git::Git,
    repo_path: std::path::PathBuf,
    key: Key,
    shown: usize,
) -> Result<Arc<Blame>, AppError> {
    let slot = app.reads.acquire().await?;
    let deadline = app.config.reads.deadline;
    let (commit, file) = (key.1.to_string(), key.2.join("/"));
    let blame = blocking(move || {
        let _slot = slot;
        let range = format!("1,{shown}");
        let out = git.run_bounded(
            &repo_path,
            &["blame", "--porcelain", "-L", &range, &commit, "--", &file],
            vole_git::Bounds {
                max_output: MAX_BLAME_BYTES,
                deadline,
            },
        )?;
        let mut blame = parse_porcelain(&String::from_utf8_lossy(&out.stdout));
        blame.cut = out.truncated;
        Ok(Arc::new(blame))
    })
    .await?;
    Ok(blame)
}

/// One line of the page: the group it starts (if it does) and its text.
pub struct BlameLine {
    pub number: usize,
    pub starts: Option<(usize, Touch)>,
    pub html: String,
}

#[derive(Template)]
#[template(path = "blame.html")]
struct BlamePage {
    repo: String,
    repo_name: String,
    rev: String,
    path: String,
    view: View,
    crumbs: Vec<Crumb>,
    blob_href: String,
    lines: Vec<BlameLine>,
    /// Why there is nothing to blame (a binary file, an image, an empty
    /// file), if so.
    none: Option<&'static str>,
    truncated: bool,
}

/// `GET /{owner}/{repo}/-/blame/{rev}/{*path}`.
pub async fn blame(
    State(app): State<Arc<WebState>>,
    RepoAccess { repo: name, .. }: RepoAccess<Read>,
    Path((_, _, rev, path)): Path<(String, String, String, String)>,
) -> Result<Response, AppError> {
    let (name, segments, resolved, id, size) = match file_at(&app, name, &rev, &path).await? {
        Ok(file) => file,
        Err(redirect) => return Ok(redirect),
    };
    let file_name = segments.last().cloned().unwrap_or_default();
    let content = blob_content(&app, &name, id, size, &file_name).await?;
    let (text, mut truncated, none) = match content {
        BlobContent::Text { lines, truncated } if !lines.lines.is_empty() => {
            (Some(lines), truncated, None)
        }
        BlobContent::Text { .. } => (None, false, Some("The file is empty.")),
        BlobContent::Image | BlobContent::Binary => (
            None,
            false,
            Some("A binary file: there are no lines to blame."),
        ),
    };
    let mut lines = Vec::new();
    if let Some(text) = text {
        let shown = text.lines.len();
        let key = (
            name.incarnation_id().to_string(),
            resolved.commit,
            resolved.path.clone(),
        );
        let git = app.git.clone();
        let repo_path = app.repos.path(&name);
        // One blame per key at a time: the views that come while it runs
        // share its outcome, a failure too.
        let blame = app
            .caches
            .blames
            .try_get_with(key.clone(), run_blame(&app, git, repo_path, key, shown))
            .await
            .map_err(|failed| (*failed).clone())?;
        let mut starts: HashMap<usize, &Group> = HashMap::new();
        for group in &blame.groups {
            starts.insert(group.start, group);
        }
        // Only lines a group covers are shown: a row without its commit
        // cell would shift into that column.
        let covered = blame
            .groups
            .iter()
            .map(|g| g.start + g.count - 1)
            .max()
            .unwrap_or(0);
        truncated |= covered < text.lines.len();
        lines = text
            .lines
            .iter()
            .take(covered)
            .enumerate()
            .map(|(index, html)| {
                let number = index + 1;
                BlameLine {
                    number,
                    starts: starts
                        .get(&number)
                        .map(|g| (g.count, blame.commits[g.commit].clone())),
                    html: html.clone(),
                }
            })
            .collect();
    }
    render(BlamePage {
        blob_href: format!(
            "/{name}/-/blob/{}/{}",
            rev_path(&resolved.view.rev),
            encode_path(&segments)
        ),
        rev: resolved.view.rev.clone(),
        repo: name.to_string(),
        repo_name: name.name().to_string(),
        crumbs: crumbs(&name.to_string(), &resolved.view.rev, &segments),
        path,
        view: resolved.view,
        lines,
        none,
        truncated,
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn porcelain_lines_group_by_commit_with_each_commit_described_once() {
        let a = "a".repeat(40);
        let b = "b".repeat(40);
        let out = format!(
            "{a} 1 1 2\nauthor Ann\nauthor-time 1767225600\nsummary first\nfilename f\n\tline 1\n\
             {a} 2 2\n\tline 2\n\
             {b} 3 3 1\nauthor Bo\nauthor-time 1767225700\nsummary second\nfilename f\n\tline 3\n\
             {a} 4 4 1\n\tline 4\n"
        );
        let blame = super::parse_porcelain(&out);
        let groups: Vec<(usize, usize, usize)> = blame
            .groups
            .iter()
            .map(|g| (g.start, g.count, g.commit))
            .collect();
        assert_eq!(groups, [(1, 2, 0), (3, 1, 1), (4, 1, 0)]);
        assert_eq!(blame.commits.len(), 2);
        assert_eq!(blame.commits[0].author, "Ann");
        assert_eq!(blame.commits[1].summary, "second");
        assert_eq!(blame.commits[0].time, "2026-01-01T00:00:00Z");
    }
}
