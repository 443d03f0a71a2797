//! `/{owner}/{repo}/-/pulls/{n}/files`: a pull request's combined diff,
//! per file, drawn as commit pages draw theirs and with their bounds: an
//! open one's against the merge base of its branches, a merged one's what
//! its merge brought to the target (the target before it to the merge's
//! commit); `files.diff` the same as a raw diff, `files.patch` as the
//! range's commits in mail form (`git format-patch`), as Gitea's `.diff`
//! and `.patch` are.

use std::sync::Arc;

use vole_access::ResolvedRepo;
use vole_meta::entity::{Change, ChangeState};

use super::*;
use crate::commit_files::{Body, FileView, file_views};
use crate::issues::tabs_rev;
use crate::pull::pull_number;
use crate::read::CommitDetail;

/// A merged pull request's range: the target's commit before the merge
/// and the merge's commit (none for one merged before merges recorded
/// both).
pub(crate) fn merged_range(change: &Change) -> Option<(gix::ObjectId, gix::ObjectId)> {
    if change.state != ChangeState::Merged {
        return None;
    }
    let id = |hex: &Option<String>| gix::ObjectId::from_hex(hex.as_deref()?.as_bytes()).ok();
    Some((id(&change.merged_onto)?, id(&change.merge_commit)?))
}

/// A pull request's changes as text.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Raw {
    /// One diff of the whole range.
    Diff,
    /// The range's commits as mails.
    Patch,
}

#[derive(Template)]
#[template(path = "pull_files.html")]
struct FilesPage {
    repo: String,
    rev: String,
    change: Change,
    detail: Arc<CommitDetail>,
    files: Vec<FileView>,
    patch_link: String,
}

/// `GET /{owner}/{repo}/-/pulls/{n}.diff` or `.patch` (Gitea's links):
/// the pull request's changes as text, as `files.diff` and `files.patch`.
pub(crate) async fn pull_raw(
    app: &Arc<WebState>,
    name: &ResolvedRepo,
    number: u64,
    raw: Raw,
) -> Result<Response, AppError> {
    let repo = name.clone();
    let change = crate::meta_read(app, move |meta| meta.change(&repo, number)).await?;
    let range = changes_range(app, name, &change).await?;
    stream_raw(app, name, range, raw).await
}

/// What a pull request brings: an open one's merge base and source
/// head, a merged one's target before and after its merge.
async fn changes_range(
    app: &Arc<WebState>,
    name: &ResolvedRepo,
    change: &Change,
) -> Result<(gix::ObjectId, gix::ObjectId), AppError> {
    let (app2, name2, change2) = (app.clone(), name.clone(), change.clone());
    let slot = app.reads.acquire().await?;
    vole_http::spawn_blocking(move || {
        let _slot = slot;
        if let Some(range) = merged_range(&change2) {
            return Some(range);
        }
        let tips = vole_api::pulls::tips(&app2.api, &name2, &change2).ok()?;
        let base = app2
            .git
            .merge_base(
                &app2.repos.path(&name2),
                (tips.target, tips.source),
                app2.config.reads.deadline,
            )
            .ok()??;
        Some((base, tips.source))
    })
    .await
    .map_err(|e| AppError::internal("pull request read task failed", e))?
    .ok_or_else(|| {
        AppError::not_found("This pull request's branches are gone or have no common history.")
    })
}

/// The changes from `base` to `head` as one diff or as mails, streamed
/// under a read slot with the archive's bounds.
async fn stream_raw(
    app: &Arc<WebState>,
    name: &ResolvedRepo,
    (base, head): (gix::ObjectId, gix::ObjectId),
    raw: Raw,
) -> Result<Response, AppError> {
    let (base, head) = (base.to_string(), head.to_string());
    match raw {
        Raw::Diff => {
            crate::commit::stream_text(app, name, &["diff", "-M", "--no-color", "-p", &base, &head])
                .await
        }
        Raw::Patch => {
            let range = format!("{base}..{head}");
            crate::commit::stream_text(
                app,
                name,
                &[
                    "format-patch",
                    "--stdout",
                    "--no-notes",
                    "-M",
                    "--no-color",
                    &range,
                ],
            )
            .await
        }
    }
}

/// `GET /{owner}/{repo}/-/pulls/{n}/files`: see the module doc.
pub async fn pull_files(
    State(app): State<Arc<WebState>>,
    RepoAccess { repo: name, .. }: RepoAccess<Read>,
    Path((_, _, number, file)): Path<(String, String, String, String)>,
) -> Result<Response, AppError> {
    let number = pull_number(&number)?;
    let raw = match file.as_str() {
        "files" => None,
        "files.diff" => Some(Raw::Diff),
        "files.patch" => Some(Raw::Patch),
        _ => return Err(AppError::not_found("There is no such page.")),
    };
    let repo = name.clone();
    let change = crate::meta_read(&app, move |meta| meta.change(&repo, number)).await?;
    let range = changes_range(&app, &name, &change).await?;
    if let Some(raw) = raw {
        return stream_raw(&app, &name, range, raw).await;
    }
    let base = range.0.to_string();
    let detail = range_detail(&app, &name, range).await?;
    let scope = format!("{}\0base={base}", name.incarnation_id());
    let files = file_views(&app, &scope, range.1, &detail).await;
    render(FilesPage {
        repo: name.to_string(),
        rev: tabs_rev(&app, &name),
        patch_link: format!("/{name}/-/pulls/{number}/files.diff"),
        change,
        detail,
        files,
    })
}

/// The changes from `base` to `head`, cached as a commit's detail is (by
/// the repo's incarnation and both ends).
async fn range_detail(
    app: &Arc<WebState>,
    name: &ResolvedRepo,
    (base, head): (gix::ObjectId, gix::ObjectId),
) -> Result<Arc<CommitDetail>, AppError> {
    let key = (format!("{}\0base={base}", name.incarnation_id()), head);
    if let Some(hit) = app.caches.commits.get(&key) {
        return Ok(hit);
    }
    let slot = app.reads.acquire().await?;
    let (git, path, deadline) = (
        app.git.clone(),
        app.repos.path(name),
        app.config.reads.deadline,
    );
    let detail = blocking(move || {
        let _slot = slot;
        let (base, head) = (base.to_string(), head.to_string());
        let changes = read::changes(|what: &[&str], max_output| {
            let mut args = vec!["diff", "-M"];
            args.extend_from_slice(what);
            args.extend([base.as_str(), head.as_str()]);
            read::run_git(&git, &path, &args, max_output, deadline)
        })?;
        Ok(Arc::new(CommitDetail {
            id: head.clone(),
            parents: vec![base.clone()],
            author: String::new(),
            time: String::new(),
            message: String::new(),
            files: changes.files,
            diffs: changes.diffs,
            patch_truncated: changes.patch_truncated,
            files_truncated: changes.files_truncated,
        }))
    })
    .await?;
    app.caches.commits.insert(key, detail.clone());
    Ok(detail)
}
