//! Sites served straight from git trees: no export step, no checkout.
//!
//! A repo's site is a directory of a ref's tree, `refs/heads/pages` and its
//! root unless the repo's settings (`site.ref`, `site.dir`) say otherwise,
//! served at `/{owner}/{repo}/-/site/...`, and at `/...` for a host
//! configured with `--site-domain HOST=owner/repo`.
//!
//! # Resolution rules
//!
//! - A path names a file in the tree: it is served.
//! - A directory with a trailing slash serves its `index.html`; without the
//!   slash it answers `301` to the slashed form.
//! - A request for `.../index.html` answers `301` to its directory.
//! - Anything else is not found: the site's own `/404.html` is served with
//!   status 404 when it exists, else a plain 404.
//! - Paths with `..`, `.`, empty segments, NUL, backslashes, a leading
//!   `/`, more than 1 KiB or more than 64 segments are refused (404) before
//!   git is read (`tree_path::TreePath`, the rule every surface uses); the
//!   path is matched segment by segment against tree entries, so it cannot
//!   leave the tree. Symlinks in the tree are never followed and submodule
//!   entries have no content here: both are not found.
//!
//! # Headers
//!
//! `Content-Type` by extension (`charset=utf-8` for text), `ETag` = the blob
//! id (and `304` on `If-None-Match`), `Cache-Control` (configurable),
//! `X-Content-Type-Options: nosniff`, `Content-Length`, `Accept-Ranges`;
//! gzip for compressible types when accepted (compressed once, cached,
//! `Vary: Accept-Encoding`); `Range` (206/416) on uncompressed responses.
//!
//! # Isolation from the UI
//!
//! A site served under vole's own origin carries
//! `Content-Security-Policy: sandbox allow-scripts allow-forms allow-popups
//! allow-downloads` (no `allow-same-origin`): its pages run as an opaque
//! origin, so their scripts cannot read vole's cookies or call vole as the
//! signed-in user. A site on its own configured domain is a different
//! origin already and is served without the sandbox.
//!
//! # Cache
//!
//! Blob bytes (and gzip forms) are cached by blob id, bounded in bytes
//! ([`cache`]); a hit never needs invalidation. Blobs of 4 KiB and more are
//! kept in sealed memfds and go out with `sendfile` (`http::zero_copy`). The ref -> tree resolution
//! is cached per ref-move feed generation, which the recorder bumps before a
//! push's `committed` hook returns: the first request after a push sees it.
//! Blobs over the stream threshold are not cached: each request streams one
//! from a `git cat-file` child, holding only a buffer. A site the visitor
//! may not read (a private repo's, to anyone without a role in it) is
//! answered 404, as a repo that does not exist; on a site domain the
//! answer does not name the repo. Only anonymous requests meet the warm
//! map, and it remembers only what they may read.
//!
//! # Where each part lives
//!
//! Here: the state, the caches' owner ([`Sites`]), what a plan is.
//! `handlers.rs` (routes and by-host), `warm.rs` ([`WarmLayer`]),
//! `plan.rs` (request -> plan), `response.rs` (plan -> response),
//! `blob.rs` (streamed big blobs), [`store`] (gix reads), [`cache`].

mod routes;
pub use routes::routes;
mod blob;
pub mod cache;
mod handlers;
mod plan;
mod response;
pub mod store;
mod warm;

use handlers::moved;
pub use handlers::{by_host, site_path, site_root};
use response::{content_type, plain_not_found};
pub use warm::{WarmLayer, Warmed};

use parking_lot::RwLock;
use std::collections::HashMap;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use gix::ObjectId;

use cache::ClockCache;
use store::{Lookup, SiteStore};
use vole_access::{Access, Action, Principal};
use vole_git::repos::{RepoName, Repos};
use vole_git::tree_path::TreePath;
use vole_hooks::recorder::RefRecorder;
use vole_http::AppError;
use vole_meta::MetaStore;

const SANDBOX: &str = "sandbox allow-scripts allow-forms allow-popups allow-downloads";

/// What the site handlers need: the caches, and the parts of the server
/// they read (ref-move generation, settings, access, repo paths).
#[derive(Debug)]
pub struct SitesState {
    pub sites: Sites,
    pub git: vole_git::Git,
    pub recorder: Arc<RefRecorder>,
    pub meta: Arc<MetaStore>,
    pub repos: Repos,
    pub access: Arc<Access>,
    /// Slots of read-side git children (shared with the web UI).
    pub reads: Arc<vole_http::slots::ReadSlots>,
    pub read_limits: vole_config::ReadLimits,
    /// Who a session cookie stands for, on the UI-origin sites (a site's
    /// own domain never gets the UI's host-only cookie).
    pub sessions: Arc<vole_http::browser::Sessions>,
}

/// The sites' answer to a refused repo on a `/{owner}/{repo}/-/site`
/// route: the plain 404 of a missing repo, signed in or not.
impl vole_http::RepoSurface for SitesState {
    fn access(&self) -> &Access {
        &self.access
    }
    fn refuse(&self, denied: vole_access::Denied, owner: &str, repo: &str) -> AppError {
        AppError::denied_page(denied, || format!("repository {owner}/{repo} not found"))
    }
}

/// The sites' caches and settings.
#[derive(Debug)]
pub struct Sites {
    pub store: Arc<SiteStore>,
    /// `host` -> repo, from `--site-domain`.
    domains: HashMap<String, RepoName>,
    stream_threshold: u64,
    cache_control: HeaderValue,
    /// (root tree, base + request path) -> plan: never stale, shared by
    /// every ref whose site has that tree, of any repo: a tree id names its
    /// content, and no replace ref or graft is followed in reading it (see
    /// `vole_git`'s trust rules), so the plan cannot differ between repos.
    /// Bounded by `--site-path-cache` entries, as `warm` is.
    plans: RwLock<ClockCache<(ObjectId, String), Arc<Plan>>>,
    /// Request key -> the plan last answered, valid while neither the
    /// ref-move generation nor any repo's settings changed: a warm request
    /// is one lookup here and one in the byte cache.
    warm: RwLock<ClockCache<String, Warm>>,
}

impl Sites {
    pub fn new(config: &vole_config::Config, gix: Arc<vole_git::GixHandles>) -> Sites {
        Sites {
            store: Arc::new(SiteStore::new(config.sites.cache_bytes as usize, gix)),
            domains: config.sites.domains.iter().cloned().collect(),
            stream_threshold: config.sites.stream_threshold,
            cache_control: HeaderValue::from_str(&config.sites.cache_control)
                .unwrap_or(HeaderValue::from_static("no-cache")),
            plans: RwLock::new(ClockCache::new(config.sites.path_cache_entries)),
            warm: RwLock::new(ClockCache::new(config.sites.path_cache_entries)),
        }
    }

    /// The configured site domain a request's `Host` names, and its repo.
    fn domain_of(&self, headers: &HeaderMap) -> Option<(String, RepoName)> {
        if self.domains.is_empty() {
            return None;
        }
        let host = headers.get(header::HOST)?.to_str().ok()?;
        let host = host
            .rsplit_once(':')
            .map_or(host, |(name, _)| name)
            .to_ascii_lowercase();
        let repo = self.domains.get(&host)?.clone();
        Some((host, repo))
    }

    /// Whether any `--site-domain` is configured.
    pub fn has_domains(&self) -> bool {
        !self.domains.is_empty()
    }

    /// The remembered plan for `key` if nothing it depends on has changed.
    fn warm_plan(&self, key: &str, versions: Versions) -> Option<Warm> {
        let warm = self.warm.read();
        match warm.get(key) {
            Some(hit) if hit.versions == versions => Some(hit.clone()),
            _ => None,
        }
    }

    fn remember(&self, key: &str, warm: Warm) {
        self.warm.write().insert(key.to_string(), warm, 1);
    }
}

/// What a plan was resolved against: the ref-move feed's generation and the
/// metadata store's settings generation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Versions {
    refs: u64,
    settings: u64,
}

impl Versions {
    fn now(app: &SitesState) -> Versions {
        Versions {
            refs: app.recorder.generation(),
            settings: app.meta.settings_generation(),
        }
    }
}

/// A remembered answer to one request key.
#[derive(Debug, Clone)]
struct Warm {
    versions: Versions,
    repo_path: Arc<std::path::Path>,
    plan: Arc<Plan>,
}

/// What the tree says about a request.
#[derive(Debug)]
enum Plan {
    /// The repo publishes nothing at its site source; the message says what
    /// to push.
    NoSite(String),
    /// The repo is private: answered as if it did not exist.
    Hidden(String),
    Redirect(String),
    File(FileHead),
    NotFound,
}

/// A file to answer with, and the headers that depend only on it (computed
/// once per plan, not per request).
#[derive(Debug)]
struct FileHead {
    id: ObjectId,
    size: u64,
    status: StatusCode,
    etag: HeaderValue,
    content_type: HeaderValue,
    compressible: bool,
}

impl FileHead {
    fn new(id: ObjectId, size: u64, name: &str, status: StatusCode) -> FileHead {
        let (content_type, compressible) = content_type(name);
        FileHead {
            id,
            size,
            status,
            etag: HeaderValue::from_str(&format!("\"{id}\"")).expect("hex is a valid header"),
            content_type: HeaderValue::from_str(&content_type)
                .unwrap_or(HeaderValue::from_static("application/octet-stream")),
            compressible,
        }
    }
}

/// One request for a site file.
struct SiteRequest<'a> {
    /// What the warm cache knows this request by: the raw request path (with
    /// the host in front for a configured domain).
    key: &'a str,
    method: &'a Method,
    headers: &'a HeaderMap,
    /// Under vole's own origin: answer with the sandbox policy.
    sandbox: bool,
    /// Who asks. Only the anonymous are answered from, and remembered
    /// in, the warm map: what it holds is what anyone may read.
    principal: &'a Principal,
}

/// The request's principal (set by `vole_http::auth`); a request
/// without one is treated as no one in particular: never anonymous, so it
/// never meets the warm map.
fn principal_of(request: &Request) -> Option<&Principal> {
    request.extensions().get::<Principal>()
}
