//! A repo's history at Gitea's path: `GET .../commits?sha=&path=&stat=
//! &files=&page=&limit=`, newest first, each commit as Gitea's `Commit`.
//! The page's commits come from `git rev-list` (with `path`, only those
//! that touch it), their counts and files from one `git log --numstat
//! --summary` of the page; every git child bounded in output and time.
//! At most [`MAX_FILES`] files a commit are listed.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Serialize;

use super::issues::{gitea_page, shaped_reading};
use super::objects::{Base, GiteaUser, time};
use super::shape::Shaper;
use crate::ApiState;
use vole_access::ResolvedRepo;
use vole_git::{BoundedError, Bounds};
use vole_http::page::ApiPage;
use vole_http::repo_access::Read;
use vole_http::{AppError, RepoAccess};
use vole_stdx::page::Pagination;

/// The most files of one commit listed.
pub const MAX_FILES: usize = 300;

/// Bounds of the page's git children.
const BOUNDS: Bounds = Bounds {
    max_output: 8 * 1024 * 1024,
    deadline: Duration::from_secs(10),
};

/// Gitea's `CommitUser`.
#[derive(Debug, Serialize)]
pub struct CommitUser {
    pub name: String,
    pub email: String,
    pub date: String,
}

/// Gitea's `CommitMeta`.
#[derive(Debug, Serialize)]
pub struct CommitMeta {
    pub url: String,
    pub sha: String,
    pub created: String,
}

/// Gitea's `RepoCommit`.
#[derive(Debug, Serialize)]
pub struct RepoCommit {
    pub url: String,
    pub author: CommitUser,
    pub committer: CommitUser,
    pub message: String,
    pub tree: CommitMeta,
    pub verification: Option<serde_json::Value>,
}

/// Gitea's `CommitAffectedFiles`.
#[derive(Debug, Serialize)]
pub struct AffectedFile {
    pub filename: String,
    /// `added`, `modified` or `removed`.
    pub status: &'static str,
}

/// Gitea's `CommitStats`.
#[derive(Debug, Default, Serialize)]
pub struct CommitStats {
    pub total: u64,
    pub additions: u64,
    pub deletions: u64,
}

/// Gitea's `Commit`.
#[derive(Debug, Serialize)]
pub struct GiteaCommit {
    pub url: String,
    pub sha: String,
    pub created: String,
    pub html_url: String,
    pub commit: RepoCommit,
    /// The vole user of the author's email, if one has it.
    pub author: Option<GiteaUser>,
    pub committer: Option<GiteaUser>,
    pub parents: Vec<CommitMeta>,
    pub files: Option<Vec<AffectedFile>>,
    pub stats: Option<CommitStats>,
}

fn git_error(e: impl std::fmt::Display) -> AppError {
    AppError::internal("the repository's history could not be read", e)
}

/// A git child's failure: one past its deadline is a 503 to retry.
fn child_error(e: BoundedError) -> AppError {
    match e {
        BoundedError::TimedOut { .. } => AppError::busy(
            "reading the history took longer than it may; retry later",
            5,
        ),
        e => git_error(e),
    }
}

/// The commits of the page, newest first, and how many there are.
fn page_ids(
    s: &Shaper<'_>,
    repo: &ResolvedRepo,
    start: &str,
    path: Option<&str>,
    page: Pagination,
) -> Result<(Vec<String>, u64), AppError> {
    let dir = s.app.repos.path(repo);
    let git = &s.app.control.git;
    let skip = format!("--skip={}", page.offset());
    let count = format!("--max-count={}", page.per_page());
    let mut list = vec!["rev-list", &skip, &count, start];
    let mut total = vec!["rev-list", "--count", start];
    if let Some(path) = path {
        list.extend(["--", path]);
        total.extend(["--", path]);
    }
    let ids = git.run_bounded(&dir, &list, BOUNDS).map_err(child_error)?;
    let counted = git.run_bounded(&dir, &total, BOUNDS).map_err(child_error)?;
    let ids = String::from_utf8_lossy(&ids.stdout)
        .lines()
        .map(str::to_string)
        .collect();
    let total = String::from_utf8_lossy(&counted.stdout)
        .trim()
        .parse()
        .unwrap_or(0);
    Ok((ids, total))
}

/// Each commit's files and line counts, from one `git log` of `ids`.
fn changes_of(
    s: &Shaper<'_>,
    repo: &ResolvedRepo,
    ids: &[String],
) -> Result<HashMap<String, (Vec<AffectedFile>, CommitStats)>, AppError> {
    let mut args = vec![
        "log",
        "--no-walk=unsorted",
        "--no-renames",
        "--format=%x00%H",
        "--numstat",
        "--summary",
    ];
    args.extend(ids.iter().map(String::as_str));
    let out = s
        .app
        .control
        .git
        .run_bounded(&s.app.repos.path(repo), &args, BOUNDS)
        .map_err(child_error)?;
    let text = String::from_utf8_lossy(&out.stdout);
    Ok(parse_changes(whole_records(&text, out.truncated)))
}

/// The records of output cut at its bound (`truncated`) that are whole:
/// the last one was cut inside, so it and those after it are left
/// without files and counts (null), not given wrong ones.
fn whole_records(text: &str, truncated: bool) -> &str {
    if truncated {
        &text[..text.rfind('\0').unwrap_or(0)]
    } else {
        text
    }
}

/// `git log --format=%x00%H --numstat --summary` as each commit's files
/// (at most [`MAX_FILES`]) and counts.
fn parse_changes(text: &str) -> HashMap<String, (Vec<AffectedFile>, CommitStats)> {
    let mut out = HashMap::new();
    for record in text.split('\0').filter(|r| !r.trim().is_empty()) {
        let mut lines = record.lines();
        let Some(sha) = lines.next().map(str::trim) else {
            continue;
        };
        let mut stats = CommitStats::default();
        let mut files: Vec<(String, &'static str)> = Vec::new();
        let mut created = std::collections::HashSet::new();
        let mut deleted = std::collections::HashSet::new();
        for line in lines {
            if let Some(rest) = line.strip_prefix(" create mode ") {
                created.insert(rest.split_once(' ').map_or(rest, |(_, p)| p).to_string());
            } else if let Some(rest) = line.strip_prefix(" delete mode ") {
                deleted.insert(rest.split_once(' ').map_or(rest, |(_, p)| p).to_string());
            } else if let [added, removed, path] = line.splitn(3, '\t').collect::<Vec<_>>()[..] {
                stats.additions += added.parse::<u64>().unwrap_or(0);
                stats.deletions += removed.parse::<u64>().unwrap_or(0);
                files.push((path.to_string(), "modified"));
            }
        }
        stats.total = stats.additions + stats.deletions;
        let files = files
            .into_iter()
            .take(MAX_FILES)
            .map(|(path, status)| {
                let status = if created.contains(&path) {
                    "added"
                } else if deleted.contains(&path) {
                    "removed"
                } else {
                    status
                };
                AffectedFile {
                    filename: path,
                    status,
                }
            })
            .collect();
        out.insert(sha.to_string(), (files, stats));
    }
    out
}

fn person(signature: gix::actor::SignatureRef<'_>) -> CommitUser {
    CommitUser {
        name: signature.name.to_string(),
        email: signature.email.to_string(),
        date: time(&vole_stdx::time::seconds(
            signature.time().map_or(0, |t| t.seconds),
        )),
    }
}

/// `id` as Gitea's `Commit`.
fn commit(
    s: &Shaper<'_>,
    (repo, git): (&ResolvedRepo, &gix::Repository),
    id: &str,
    changes: Option<(Vec<AffectedFile>, CommitStats)>,
) -> Result<GiteaCommit, AppError> {
    let full = repo.to_string();
    let oid = gix::ObjectId::from_hex(id.as_bytes()).map_err(git_error)?;
    let found = git.find_commit(oid).map_err(git_error)?;
    let decoded = found.decode().map_err(git_error)?;
    let message = super::issues::cut_message(decoded.message.to_string());
    let author = decoded.author().map_err(git_error)?;
    let committer = decoded.committer().map_err(git_error)?;
    let (author, committer) = (person(author), person(committer));
    let user_of = |email: &str| {
        s.app
            .meta
            .users_with_email(email)
            .ok()
            .and_then(|users| users.into_iter().next())
            // Which account holds an email is the account's and the
            // admins' to know: a pushed commit may claim any.
            .filter(|u| s.sees_email(&u.name))
            .map(|u| s.user_of(&u))
    };
    let url = s.base.api(&format!("repos/{full}/git/commits/{id}"));
    let created = committer.date.clone();
    let parents = decoded
        .parents()
        .map(|p| CommitMeta {
            url: s.base.api(&format!("repos/{full}/git/commits/{p}")),
            sha: p.to_string(),
            created: created.clone(),
        })
        .collect();
    let tree = decoded.tree().to_string();
    let (files, stats) = match changes {
        Some((files, stats)) => (Some(files), Some(stats)),
        None => (None, None),
    };
    Ok(GiteaCommit {
        url: url.clone(),
        sha: id.to_string(),
        created: created.clone(),
        html_url: s.base.html(&format!("{full}/-/commit/{id}")),
        author: user_of(&author.email),
        committer: user_of(&committer.email),
        commit: RepoCommit {
            url,
            author,
            committer,
            message,
            tree: CommitMeta {
                url: s.base.api(&format!("repos/{full}/git/trees/{tree}")),
                sha: tree,
                created,
            },
            verification: None,
        },
        parents,
        files,
        stats,
    })
}

/// `GET /repos/{o}/{r}/git/commits/{sha}`: one commit (a branch, a tag or
/// a commit id, full or abbreviated), with its files and counts.
pub async fn one(
    State(app): State<Arc<ApiState>>,
    RepoAccess {
        repo, principal, ..
    }: RepoAccess<Read>,
    base: Base,
    Path((_, _, sha)): Path<(String, String, String)>,
) -> Result<Response, AppError> {
    let found = shaped_reading(&app, base, principal, move |s| {
        let git = vole_git::open_gix(&s.app.repos.path(&repo)).map_err(git_error)?;
        let Some(id) = super::contents::resolve(&git, &sha)? else {
            return Err(AppError::not_found(format!(
                "{sha:?} names no commit of {repo}"
            )));
        };
        let id = id.to_string();
        let mut changes = changes_of(s, &repo, std::slice::from_ref(&id))?;
        let changes = changes.remove(&id);
        commit(s, (&repo, &git), &id, changes)
    })
    .await?;
    Ok(Json(found).into_response())
}

/// `GET /repos/{o}/{r}/languages`: Gitea's bytes by language; vole keeps
/// no language statistics, so none (`{}`), as a Gitea that never ran
/// its indexer answers.
pub async fn languages(RepoAccess { .. }: RepoAccess<Read>) -> Response {
    Json(serde_json::json!({})).into_response()
}

/// `GET /repos/{o}/{r}/commits`.
pub async fn list(
    State(app): State<Arc<ApiState>>,
    RepoAccess {
        repo, principal, ..
    }: RepoAccess<Read>,
    base: Base,
    Query(query): Query<HashMap<String, String>>,
    ApiPage(page): ApiPage,
) -> Result<Response, AppError> {
    let start = query.get("sha").cloned().unwrap_or_default();
    // The one tree path rule (no NUL, no `..`, bounded); git children
    // read it as a literal path (`run_bounded`), not a pathspec's magic.
    let path = match query.get("path").filter(|p| !p.is_empty()) {
        Some(path) => Some(
            vole_git::tree_path::TreePath::parse(path.trim_start_matches('/'))
                .map_err(|e| {
                    AppError::new(
                        StatusCode::UNPROCESSABLE_ENTITY,
                        format!("path {path:?} is not a path in a repository: {e}"),
                    )
                })?
                .segments()
                .join("/"),
        ),
        None => None,
    };
    let off = |key: &str| query.get(key).is_some_and(|v| v == "false");
    let (with_stat, with_files) = (!off("stat"), !off("files"));
    let url = base.api(&format!("repos/{repo}/commits"));
    let mut kept = Vec::new();
    for key in ["sha", "path", "stat", "files"] {
        if let Some(value) = query.get(key) {
            kept.push(format!(
                "{key}={}",
                percent_encoding::utf8_percent_encode(value, percent_encoding::NON_ALPHANUMERIC)
            ));
        }
    }
    let (items, total) = shaped_reading(&app, base, principal, move |s| {
        let git = vole_git::open_gix(&s.app.repos.path(&repo)).map_err(git_error)?;
        let rev = if start.is_empty() {
            git.head_name()
                .map_err(git_error)?
                .map(|n| n.shorten().to_string())
                .unwrap_or_default()
        } else {
            start.clone()
        };
        let Some(tip) = super::contents::resolve(&git, &rev)? else {
            // An empty repo is a 409, as Gitea answers it.
            if start.is_empty() {
                return Err(AppError::new(
                    StatusCode::CONFLICT,
                    format!("{repo} is empty: push a branch first"),
                ));
            }
            return Err(AppError::new(
                StatusCode::NOT_FOUND,
                format!("{rev:?} names no branch, tag or commit of {repo}"),
            ));
        };
        let (ids, total) = page_ids(s, &repo, &tip.to_string(), path.as_deref(), page)?;
        let mut changes = if (with_stat || with_files) && !ids.is_empty() {
            changes_of(s, &repo, &ids)?
        } else {
            HashMap::new()
        };
        let items = ids
            .iter()
            .map(|id| {
                let mut found = commit(s, (&repo, &git), id, changes.remove(id))?;
                if !with_files {
                    found.files = None;
                }
                if !with_stat {
                    found.stats = None;
                }
                Ok(found)
            })
            .collect::<Result<Vec<_>, AppError>>()?;
        Ok((items, total as usize))
    })
    .await?;
    Ok(gitea_page(items, &url, &kept.join("&"), page, total))
}

#[cfg(test)]
mod tests {
    #[test]
    fn numstat_and_summary_are_read_as_files_and_counts() {
        let text = "\0aaa\n\n3\t1\tsrc/a.rs\n-\t-\timg.png\n0\t5\told.txt\n create mode 100644 img.png\n delete mode 100644 old.txt\n\0bbb\n\n";
        let parsed = super::parse_changes(text);
        let (files, stats) = &parsed["aaa"];
        assert_eq!((stats.additions, stats.deletions, stats.total), (3, 6, 9));
        let statuses: Vec<(&str, &str)> = files
            .iter()
            .map(|f| (f.filename.as_str(), f.status))
            .collect();
        assert_eq!(
            statuses,
            [
                ("src/a.rs", "modified"),
                ("img.png", "added"),
                ("old.txt", "removed")
            ]
        );
        assert!(parsed["bbb"].0.is_empty());
    }

    #[test]
    fn output_cut_at_its_bound_keeps_only_whole_records() {
        let text = "\0aaa\n\n3\t1\tsrc/a.rs\n\0bbb\n\n1\t0\tsrc/b";
        let parsed = super::parse_changes(super::whole_records(text, true));
        assert!(parsed.contains_key("aaa"));
        assert!(
            !parsed.contains_key("bbb"),
            "a cut record was read: {parsed:?}"
        );
        let whole = super::parse_changes(super::whole_records(text, false));
        assert!(whole.contains_key("bbb"));
    }
}
