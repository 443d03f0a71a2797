//! The web UI: server-rendered pages for browsing repos (askama templates
//! compiled from `templates/`, assets from `static/` compiled into the
//! binary). Every page works without JavaScript. Git reads happen in
//! [`read`], on blocking threads; the forms write only through
//! `vole-api`'s operations (one path, with its quotas and audit, for both
//! surfaces). It knows no other service's modules and no store's
//! internals.
//!
//! Routes: `/` (repos), `/{owner}/{repo}` (repo home),
//! `/{owner}/{repo}/-/tree/{rev}[/{path}]`, `/-/blob/{rev}/{path}`,
//! `/-/raw/{rev}/{path}`, `/static/{file}`. A revision is one path segment
//! (a branch or tag without `/`, or a full commit id).
//!
//! Here: the state and the helpers every page uses (render, the blocking
//! hop). `error.rs` ([`AppError`]), `home.rs`, `browse.rs` (repo home,
//! tree), `blob.rs` (blob, raw), `issues.rs`, `issue.rs`, `pull.rs`
//! (issues and pull requests), `paths.rs` (tree paths, links,
//! breadcrumbs), `readme.rs`, `assets.rs`, `log.rs`, `commit.rs` and
//! `commit_files.rs` (a commit and its drawn diffs), `refs.rs` (branches,
//! tags, activity), `archive.rs`, [`highlight`], [`read`].

mod routes;
pub use routes::routes;
pub mod account;
mod archive;
mod assets;
pub mod blame;
mod blob;
mod browse;
pub mod caches;
mod commit;
mod commit_files;
mod dates;
pub mod diff;
mod error;
mod forms;
pub mod highlight;
mod home;
mod issue;
mod issues;
pub mod last_commit;
mod listing;
pub mod listing_warm;
mod log;
mod markdown;
mod new_repo;
mod paths;
mod pull;
mod pull_files;
pub mod read;
mod readme;
mod refs;
pub mod register;
mod resolve;
mod settings;
mod settings_hooks;
pub mod sign_in;
#[cfg(test)]
mod test_git;
pub mod tokens;

pub use assets::static_file;
use blob::is_image;
pub use blob::{blob, raw};
pub use browse::{repo_home, tree, tree_root};
pub use error::as_page;
pub use home::home;
use paths::{Crumb, crumbs, encode_path, filters, redirect, rev_path, segments};
use readme::render_readme;

use std::collections::HashMap;
use std::sync::Arc;

use askama::Template;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{Html, IntoResponse, Response};

use read::{EntryKind, Node};
use vole_access::{Access, Principal};
use vole_config::Config;
use vole_git::Git;
use vole_git::repos::{RepoName, Repos};
use vole_git::tree_path::TreePath;
use vole_hooks::recorder::RefRecorder;
use vole_http::page::WebPage;
use vole_http::repo_access::Read;
use vole_http::{AppError, RepoAccess};
use vole_stdx::page::Pagination;

/// What the web pages need of the server.
#[derive(Debug)]
pub struct WebState {
    pub config: Arc<Config>,
    pub git: Git,
    pub repos: Repos,
    pub recorder: Arc<RefRecorder>,
    pub access: Arc<Access>,
    /// Slots of read-side git children (shared with sites).
    pub reads: Arc<vole_http::slots::ReadSlots>,
    pub highlighter: Arc<highlight::Highlighter>,
    /// The caches of the pages' git reads.
    pub caches: Arc<caches::WebCaches>,
    /// The repos' gix handles (shared with sites).
    pub gix: Arc<vole_git::GixHandles>,
    /// Sign-in (the same throttle as HTTP Basic's).
    pub authn: Arc<vole_http::auth::Authn>,
    /// Who a session cookie stands for.
    pub sessions: Arc<vole_http::browser::Sessions>,
    /// Users and tokens (the account and tokens pages).
    pub accounts: Arc<vole_accounts::Accounts>,
    /// The API's writes, which the forms go through (new repo, settings,
    /// members, deletion): one path for both surfaces.
    pub api: Arc<vole_api::ApiState>,
    /// The account forms' hourly limits.
    pub form_limits: FormLimits,
}

/// The hourly limits of the account forms.
#[derive(Debug, Default)]
pub struct FormLimits {
    /// How many accounts `/-/register` has made lately.
    pub registrations: register::Registrations,
    /// How many new emails each user tried lately.
    pub email_changes: account::EmailChanges,
}

/// A quota of `n` an hour, all of which may be spent at once (0 is taken
/// as 1).
fn hourly_quota(n: u32) -> governor::Quota {
    let n = std::num::NonZeroU32::new(n).unwrap_or(std::num::NonZeroU32::MIN);
    governor::Quota::per_hour(n).allow_burst(n)
}

impl FormLimits {
    /// Forgets the addresses and users whose counts are full again (the
    /// maintenance task calls it), so the maps stay as large as the last
    /// hour's.
    pub fn retain_recent(&self) {
        self.registrations.retain_recent();
        self.email_changes.retain_recent();
    }
}

/// Repos per home page.
const PER_PAGE: u32 = 30;
/// Text blobs longer than this are shown truncated, with a link to raw.
const MAX_SHOWN_BYTES: usize = 512 * 1024;

pub(crate) fn render(page: impl Template) -> Result<Response, AppError> {
    page.render()
        .map(|html| Html(html).into_response())
        .map_err(|e| AppError::internal("cannot render a page", e))
}

/// A read of the metadata store on the blocking pool: issues, pull
/// requests and comments whose long bodies it reads back from git.
pub(crate) async fn meta_read<T: Send + 'static>(
    app: &WebState,
    f: impl FnOnce(&vole_meta::MetaStore) -> Result<T, vole_meta::MetaError> + Send + 'static,
) -> Result<T, AppError> {
    let meta = app.api.meta.clone();
    vole_http::spawn_blocking(move || f(&meta))
        .await
        .map_err(|e| AppError::internal("metadata read task failed", e))?
        .map_err(AppError::from)
}

pub(crate) async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, read::ReadError> + Send + 'static,
) -> Result<T, AppError> {
    // If the client goes away, this future is dropped with the guard,
    // which kills whatever bounded git child the closure is running.
    let cancel = vole_git::Cancel::default();
    let guard = cancel.guard();
    let done = vole_http::spawn_blocking(move || cancel.scope(f)).await;
    guard.disarm();
    done.map_err(|e| AppError::internal("git read task failed", e))?
        .map_err(|e| match e {
            // A read that ran out of time is the server being busy or the
            // repo being big, not a fault: try again later.
            read::ReadError::Git(vole_git::BoundedError::TimedOut { .. }) => {
                AppError::unavailable("a git read ran past its deadline", &e)
            }
            read::ReadError::Replaced => AppError::not_found("There is no such repository."),
            e => AppError::internal("git read failed", vole_stdx::error_chain::Chain(&e)),
        })
}

/// The pages' answer to a refused repo: one the visitor may not read is
/// answered as a missing one, the page's plain 404, signed in or not.
impl vole_http::RepoSurface for WebState {
    fn access(&self) -> &Access {
        &self.access
    }
    fn refuse(&self, denied: vole_access::Denied, owner: &str, repo: &str) -> AppError {
        AppError::denied_page(denied, || format!("There is no repository {owner}/{repo}."))
    }
}
