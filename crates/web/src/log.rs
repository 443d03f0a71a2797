//! The commit log page (of a revision, or of a path in it), its history
//! cached by commit id.

use std::sync::Arc;

use askama::Template;
use axum::extract::{Path, State};
use axum::response::Response;
use vole_access::ResolvedRepo;
use vole_http::RepoAccess;
use vole_http::page::WebPage;
use vole_http::repo_access::Read;
use vole_stdx::page::Pagination;

use crate::caches::{CommitKey, LogKey, Weigh};
use crate::read::{self, CommitDetail, LogEntry};
use crate::{AppError, WebState, blocking, filters, render, segments};

const COMMITS_PER_PAGE: u32 = 50;

// History is immutable once named by a commit id: a log page (commit,
// path, page) and a commit's detail are cached by id (`WebCaches::log`
// and `commits`, bounded by bytes: a page of history can be a megabyte).
// Each key starts with the repo's incarnation: what git reads is the
// repo's own objects (and attributes), so one repo's pages never answer
// for another's, nor for a repo created again under the name.

impl Weigh for LogEntry {
    fn weight(&self) -> usize {
        self.id.weight() + self.summary.weight() + self.author.weight() + self.time.weight()
    }
}

impl Weigh for (Vec<LogEntry>, bool) {
    fn weight(&self) -> usize {
        self.0.weight()
    }
}

impl Weigh for LogKey {
    fn weight(&self) -> usize {
        self.0.weight() + self.2.weight() + std::mem::size_of::<LogKey>()
    }
}

impl Weigh for CommitKey {
    fn weight(&self) -> usize {
        self.0.weight() + std::mem::size_of::<CommitKey>()
    }
}

impl Weigh for read::FileChange {
    fn weight(&self) -> usize {
        self.status.weight()
            + self.path.weight()
            + self.old_path.as_ref().map_or(0, Weigh::weight)
            + self.added.weight()
            + self.removed.weight()
    }
}

impl Weigh for CommitDetail {
    fn weight(&self) -> usize {
        self.id.weight()
            + self.parents.weight()
            + self.author.weight()
            + self.time.weight()
            + self.message.weight()
            + self.files.weight()
            + self.diffs.weight()
    }
}

#[derive(Template)]
#[template(path = "log.html")]
struct LogPage {
    repo: String,
    rev: String,
    path: String,
    entries: Vec<LogEntry>,
    prev_page: Option<usize>,
    next_page: Option<usize>,
}

/// `GET /{owner}/{repo}/-/commits/{rev}?page=`.
pub async fn log_root(
    State(app): State<Arc<WebState>>,
    RepoAccess { repo: name, .. }: RepoAccess<Read>,
    Path((_, _, rev)): Path<(String, String, String)>,
    WebPage(page): WebPage<COMMITS_PER_PAGE>,
) -> Result<Response, AppError> {
    log_page(app, name, rev, String::new(), page).await
}

/// `GET /{owner}/{repo}/-/commits/{rev}/{*path}?page=`: commits touching
/// a path.
pub async fn log_path(
    State(app): State<Arc<WebState>>,
    RepoAccess { repo: name, .. }: RepoAccess<Read>,
    Path((_, _, rev, path)): Path<(String, String, String, String)>,
    WebPage(page): WebPage<COMMITS_PER_PAGE>,
) -> Result<Response, AppError> {
    log_page(app, name, rev, path, page).await
}

async fn log_page(
    app: Arc<WebState>,
    name: ResolvedRepo,
    rev: String,
    path: String,
    page: Pagination,
) -> Result<Response, AppError> {
    let parts = segments(&path)?;
    let repo_path = app.repos.path(&name);
    let incarnation = name.incarnation_id().to_string();
    let rev_for_read = rev.clone();
    // One hop resolves and looks in the cache; only a miss runs git, in a
    // second hop under a read slot.
    let looked = {
        let repo_path = repo_path.clone();
        let incarnation = incarnation.clone();
        let cache = app.caches.log.clone();
        let gix = app.gix.clone();
        blocking(move || {
            let repo = read::open(&gix, &repo_path, &incarnation)?;
            let (rev, parts) = read::split_rev(&repo, &rev_for_read, &parts)?;
            let Some(commit) = read::resolve(&repo, &rev)? else {
                return Ok(None);
            };
            let key = (incarnation, commit, parts, page.page());
            let hit = cache.get(&key);
            Ok(Some((key, hit)))
        })
        .await?
    };
    let found = match looked {
        None => None,
        Some((_, Some(hit))) => Some(hit),
        Some((key, None)) => {
            let slot = app.reads.acquire().await?;
            let git = app.git.clone();
            let deadline = app.config.reads.deadline;
            let found = blocking(move || {
                let _slot = slot;
                read::log(
                    &git,
                    &repo_path,
                    key.1,
                    &key.2,
                    page.offset(),
                    page.per_page(),
                    deadline,
                )
                .map(|found| (key, Arc::new(found)))
            })
            .await?;
            app.caches.log.insert(found.0, found.1.clone());
            Some(found.1)
        }
    };
    let Some(found) = found else {
        return Err(AppError::not_found(format!(
            "{name} has no branch, tag or commit {rev:?}."
        )));
    };
    let (entries, more) = (found.0.clone(), found.1);
    render(LogPage {
        repo: name.to_string(),
        rev,
        path,
        entries,
        prev_page: page.prev(),
        next_page: page.next().filter(|_| more),
    })
}
