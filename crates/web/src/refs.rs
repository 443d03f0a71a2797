//! The branch and tag lists, each row with its commit, and the push
//! activity read from the ref log.

use std::sync::Arc;

use askama::Template;
use axum::extract::State;
use axum::response::Response;
use vole_access::ResolvedRepo;
use vole_http::RepoAccess;
use vole_http::page::WebPage;
use vole_http::repo_access::Read;
use vole_stdx::page::Pagination;

use crate::read;
use crate::{AppError, WebState, blocking, filters, render};

struct RefRow {
    name: String,
    /// The name as one URL path segment (a `/` in it escaped).
    encoded: String,
    summary: String,
    time: String,
}

#[derive(Template)]
#[template(path = "refs_page.html")]
struct RefsPage {
    repo: String,
    rev: String,
    heading: &'static str,
    rows: Vec<RefRow>,
    prev_page: Option<usize>,
    next_page: Option<usize>,
}

/// Branches or tags a page: each row reads its commit.
const REFS_PER_PAGE: u32 = 50;

/// `GET /{owner}/{repo}/-/branches`.
pub async fn branches(
    State(app): State<Arc<WebState>>,
    RepoAccess { repo: name, .. }: RepoAccess<Read>,
    WebPage(page): WebPage<REFS_PER_PAGE>,
) -> Result<Response, AppError> {
    refs_page(app, name, true, page).await
}

/// `GET /{owner}/{repo}/-/tags`.
pub async fn tags(
    State(app): State<Arc<WebState>>,
    RepoAccess { repo: name, .. }: RepoAccess<Read>,
    WebPage(page): WebPage<REFS_PER_PAGE>,
) -> Result<Response, AppError> {
    refs_page(app, name, false, page).await
}

async fn refs_page(
    app: Arc<WebState>,
    name: ResolvedRepo,
    branches: bool,
    page: Pagination,
) -> Result<Response, AppError> {
    let repo_path = app.repos.path(&name);
    let incarnation = name.incarnation_id().to_string();
    let gix = app.gix.clone();
    let (rows, head, total) = blocking(move || {
        let repo = read::open(&gix, &repo_path, &incarnation)?;
        let refs = read::refs(&repo)?;
        let names = if branches { refs.branches } else { refs.tags };
        let total = names.len();
        let mut rows = Vec::with_capacity(page.per_page());
        for name in page.slice(names) {
            let Some(commit) = read::resolve(&repo, &name)? else {
                continue;
            };
            let info = read::commit(&repo, commit)?;
            rows.push(RefRow {
                encoded: vole_git::tree_path::encode_segments(std::slice::from_ref(&name)),
                name,
                summary: info.summary,
                time: info.time,
            });
        }
        Ok((rows, refs.head, total))
    })
    .await?;
    render(RefsPage {
        repo: name.to_string(),
        rev: head.unwrap_or_else(|| app.config.default_branch.clone()),
        heading: if branches { "Branches" } else { "Tags" },
        rows,
        prev_page: page.prev(),
        next_page: page.next().filter(|&next| next <= page.last(total)),
    })
}

struct ActivityRow {
    actor: String,
    action: &'static str,
    ref_name: String,
    new: String,
    time: String,
}

#[derive(Template)]
#[template(path = "activity.html")]
struct ActivityPage {
    repo: String,
    rev: String,
    rows: Vec<ActivityRow>,
}

/// `GET /{owner}/{repo}/-/activity`: the last ref moves from the ref log.
pub async fn activity(
    State(app): State<Arc<WebState>>,
    RepoAccess { repo: name, .. }: RepoAccess<Read>,
) -> Result<Response, AppError> {
    let (entries, _) = app
        .recorder
        .activity(&name.to_string(), Pagination::first(100));
    let rows = entries
        .into_iter()
        .map(|entry| {
            let m = entry.ref_move;
            let action = m.action();
            ActivityRow {
                actor: m.actor,
                action,
                ref_name: m.ref_name,
                new: m.new.unwrap_or_default(),
                time: vole_stdx::time::nanos_to_seconds(m.time_ns),
            }
        })
        .collect();
    // The tabs' links follow the repo's default branch (HEAD).
    let rev = vole_git::repos::head_branch(&app.repos.path(&name))
        .unwrap_or_else(|| app.config.default_branch.clone());
    render(ActivityPage {
        repo: name.to_string(),
        rev,
        rows,
    })
}
