//! The commit page (message, changed files, each file's diff as
//! `commit_files.rs` draws it) and the commit's raw patch.

use std::sync::Arc;

use askama::Template;
use axum::extract::{Path, State};
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use vole_http::RepoAccess;
use vole_http::repo_access::Read;

use crate::commit_files::{Body, FileView, file_views};
use crate::read::{self, CommitDetail};
use crate::{AppError, WebState, blocking, filters, render};

#[derive(Template)]
#[template(path = "commit.html")]
struct CommitPage {
    repo: String,
    rev: String,
    summary: String,
    body: String,
    detail: Arc<CommitDetail>,
    files: Vec<FileView>,
    /// Where the raw patch is.
    patch_link: String,
}

/// `GET /{owner}/{repo}/-/commit/{id}`: message, changed files with added
/// and removed line counts (renames shown as such), and each file's diff
/// against the first parent, highlighted; `{id}.patch` is the raw patch.
pub async fn commit(
    State(app): State<Arc<WebState>>,
    RepoAccess { repo: name, .. }: RepoAccess<Read>,
    Path((_, _, id)): Path<(String, String, String)>,
) -> Result<Response, AppError> {
    if let Some(stripped) = id.strip_suffix(".patch") {
        // `X.patch` is X's raw patch, unless a branch or tag is named
        // `X.patch` itself.
        let (repo_path, full) = (app.repos.path(&name), id.clone());
        let incarnation = name.incarnation_id().to_string();
        let gix = app.gix.clone();
        let names_a_rev = blocking(move || {
            Ok(read::resolve(&read::open(&gix, &repo_path, &incarnation)?, &full)?.is_some())
        })
        .await?;
        if !names_a_rev {
            return raw_patch(app, name, stripped.to_string()).await;
        }
    }
    let repo_path = app.repos.path(&name);
    let incarnation = name.incarnation_id().to_string();
    let rev = id.clone();
    let looked = {
        let repo_path = repo_path.clone();
        let incarnation = incarnation.clone();
        let cache = app.caches.commits.clone();
        let gix = app.gix.clone();
        blocking(move || {
            let repo = read::open(&gix, &repo_path, &incarnation)?;
            let Some(commit) = read::resolve(&repo, &rev)? else {
                return Ok(None);
            };
            Ok(Some((commit, cache.get(&(incarnation, commit)))))
        })
        .await?
    };
    let (commit, detail) = match looked {
        None => None,
        Some((commit, Some(hit))) => Some((commit, hit)),
        Some((commit, None)) => {
            let slot = app.reads.acquire().await?;
            let (git, gix) = (app.git.clone(), app.gix.clone());
            let deadline = app.config.reads.deadline;
            let detail = blocking(move || {
                let _slot = slot;
                let handle = read::open(&gix, &repo_path, &incarnation)?;
                read::commit_detail(&git, &repo_path, &handle, commit, deadline).map(Arc::new)
            })
            .await?;
            app.caches
                .commits
                .insert((name.incarnation_id().to_string(), commit), detail.clone());
            Some((commit, detail))
        }
    }
    .ok_or_else(|| AppError::not_found(format!("{name} has no commit {id:?}.")))?;
    let (summary, body) = match detail.message.split_once('\n') {
        Some((summary, body)) => (summary.to_string(), body.trim().to_string()),
        None => (detail.message.clone(), String::new()),
    };
    let files = file_views(&app, name.incarnation_id(), commit, &detail).await;
    render(CommitPage {
        patch_link: format!("/{name}/-/commit/{}.patch", detail.id),
        repo: name.to_string(),
        rev: detail.id.clone(),
        summary,
        body,
        detail,
        files,
    })
}

/// `GET /{owner}/{repo}/-/commit/{id}.patch`: the commit as a mail with
/// its patch against the first parent (`git show --format=email`),
/// streamed under a read slot with the archive's bounds, as plain text.
async fn raw_patch(
    app: Arc<WebState>,
    name: vole_access::ResolvedRepo,
    id: String,
) -> Result<Response, AppError> {
    let repo_path = app.repos.path(&name);
    let incarnation = name.incarnation_id().to_string();
    let rev = id.clone();
    let gix = app.gix.clone();
    let commit =
        blocking(move || read::resolve(&read::open(&gix, &repo_path, &incarnation)?, &rev))
            .await?
            .ok_or_else(|| AppError::not_found(format!("{name} has no commit {id:?}.")))?;
    let commit = commit.to_string();
    stream_text(
        &app,
        &name,
        &[
            "show",
            "--no-notes",
            "--format=email",
            "--first-parent",
            "-m",
            "-M",
            "--no-color",
            "-p",
            &commit,
        ],
    )
    .await
}

/// A git command's output streamed as inert plain text, under a read slot
/// with the archive's bounds: a commit's or a pull request's raw patch.
pub(crate) async fn stream_text(
    app: &WebState,
    name: &vole_access::ResolvedRepo,
    args: &[&str],
) -> Result<Response, AppError> {
    let slot = app.reads.acquire().await?;
    let output = app
        .git
        .spawn_reader(&app.repos.path(name), args)
        .map_err(|e| AppError::internal("cannot run git", e))?;
    let limits = &app.config.reads;
    let bounds = vole_http::stream::StreamBounds::of(limits, limits.archive_deadline);
    let mut response =
        vole_http::stream::pumped(output, Some(slot), bounds, "patch").into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    crate::blob::inert(headers);
    Ok(response)
}
