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
//! - Paths with `..`, `.`, empty segments, NUL, backslashes, more than 1 KiB
//!   or more than 64 segments are refused (404) before git is read; the
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
//! from a `git cat-file` child, holding only a buffer. A private repo's
//! site (its ACL's visibility) is answered 404, as a repo that does not
//! exist: no request carries credentials until accounts exist.

pub mod cache;
pub mod store;

use parking_lot::RwLock;
use std::collections::HashMap;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::RequestExt;
use axum::body::{Body, Bytes};
use axum::extract::{Path, RawPathParams, Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use gix::ObjectId;

use crate::access::{Access, Action, Principal};
use crate::hooks::recorder::RefRecorder;
use crate::http::AppError;
use crate::meta::MetaStore;
use crate::repos::{RepoName, Repos};
use crate::tree_path::TreePath;
use cache::ClockCache;
use store::{Lookup, SiteStore};

const SANDBOX: &str = "sandbox allow-scripts allow-forms allow-popups allow-downloads";

/// What the site handlers need: the caches, and the parts of the server
/// they read (ref-move generation, settings, access, repo paths).
#[derive(Debug)]
pub struct SitesState {
    pub sites: Sites,
    pub git: crate::git::Git,
    pub recorder: Arc<RefRecorder>,
    pub meta: Arc<MetaStore>,
    pub repos: Repos,
    pub access: Arc<Access>,
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
    /// every ref whose site has that tree.
    plans: RwLock<ClockCache<(ObjectId, String), Arc<Plan>>>,
    /// Request key -> the plan last answered, valid while neither the
    /// ref-move generation nor any repo's settings changed: a warm request
    /// is one lookup here and one in the byte cache.
    warm: RwLock<ClockCache<String, Warm>>,
}

impl Sites {
    pub fn new(config: &crate::config::Config) -> Sites {
        Sites {
            store: Arc::new(SiteStore::new(config.sites.cache_bytes as usize)),
            domains: config.sites.domains.iter().cloned().collect(),
            stream_threshold: config.sites.stream_threshold,
            cache_control: HeaderValue::from_str(&config.sites.cache_control)
                .unwrap_or(HeaderValue::from_static("no-cache")),
            plans: RwLock::new(ClockCache::new(PLAN_CACHE_ENTRIES)),
            warm: RwLock::new(ClockCache::new(PLAN_CACHE_ENTRIES)),
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

/// Most resolved paths remembered per cache (keyed by content or checked
/// against versions, so never stale).
const PLAN_CACHE_ENTRIES: usize = 100_000;

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

/// `GET /{owner}/{repo}/-/site` -> the slashed form.
pub async fn site_root(Path((owner, repo)): Path<(String, String)>) -> Response {
    moved(&format!("/{owner}/{repo}/-/site/"))
}

/// `301 Moved Permanently` to `to`.
fn moved(to: &str) -> Response {
    match HeaderValue::from_str(to) {
        Ok(location) => (
            StatusCode::MOVED_PERMANENTLY,
            [(header::LOCATION, location)],
        )
            .into_response(),
        Err(_) => AppError::not_found("not found").into_response(),
    }
}

/// `GET /{owner}/{repo}/-/site/` (the site's root) and
/// `GET /{owner}/{repo}/-/site/{*path}` when [`WarmLayer`] had no answer.
pub async fn site_path(State(app): State<Arc<SitesState>>, mut request: Request) -> Response {
    let params = match request.extract_parts::<RawPathParams>().await {
        Ok(params) => params,
        Err(rejection) => return rejection.into_response(),
    };
    let param = |name: &str| {
        params
            .iter()
            .find(|(key, _)| *key == name)
            .map_or("", |(_, value)| value)
    };
    // Already percent-decoded by the router.
    let (owner, repo, path) = (param("owner"), param("repo"), param("path"));
    let Ok(name) = RepoName::from_parts(owner, repo) else {
        return AppError::not_found(format!("repository {owner}/{repo} not found")).into_response();
    };
    let base = format!("/{owner}/{repo}/-/site/");
    let site_request = SiteRequest {
        key: request.uri().path(),
        method: request.method(),
        headers: request.headers(),
        sandbox: true,
    };
    site_request
        .resolve(&app, name, path, &base)
        .await
        .unwrap_or_else(IntoResponse::into_response)
}

/// Serves the site of a configured domain for any path on that host.
pub async fn by_host(State(app): State<Arc<SitesState>>, request: Request, next: Next) -> Response {
    let Some((host, repo)) = app.sites.domain_of(request.headers()) else {
        return next.run(request).await;
    };
    // A host has no `/`, a path starts with one: keys of domains and of the
    // UI's `/{owner}/{repo}/-/site/` paths cannot meet.
    let key = format!("{host}{}", request.uri().path());
    let site_request = SiteRequest {
        key: &key,
        method: request.method(),
        headers: request.headers(),
        sandbox: false,
    };
    if let Some(answer) = site_request.answer_warm(&app).await {
        return answer.unwrap_or_else(IntoResponse::into_response);
    }
    let decoded = percent_encoding::percent_decode_str(request.uri().path())
        .decode_utf8()
        .map(|p| p.into_owned());
    let Ok(path) = decoded else {
        return AppError::not_found("not found").into_response();
    };
    // Site paths are relative to the site's root.
    let path = path.strip_prefix('/').unwrap_or(&path);
    site_request
        .resolve(&app, repo, path, "/")
        .await
        .unwrap_or_else(IntoResponse::into_response)
}

/// Answers warm requests for UI-origin sites before routing: a raw path
/// found in the warm map was routed to [`site_path`] when it was
/// remembered, and routes do not change, so the router (and its parameter
/// extraction) is skipped. Everything else, and any request to a
/// configured site domain, goes on to the router.
#[derive(Clone)]
pub struct WarmLayer {
    pub app: Arc<SitesState>,
}

impl<S> tower::Layer<S> for WarmLayer {
    type Service = Warmed<S>;

    fn layer(&self, inner: S) -> Warmed<S> {
        Warmed {
            app: self.app.clone(),
            inner,
        }
    }
}

#[derive(Clone)]
pub struct Warmed<S> {
    app: Arc<SitesState>,
    inner: S,
}

impl<S> tower::Service<Request> for Warmed<S>
where
    S: tower::Service<Request, Response = Response, Error = std::convert::Infallible>,
    S::Future: Send + 'static,
{
    type Response = Response;
    type Error = std::convert::Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request) -> Self::Future {
        let warm = (request.method() == Method::GET || request.method() == Method::HEAD)
            && self.app.sites.domain_of(request.headers()).is_none();
        let hit = warm
            .then(|| {
                self.app
                    .sites
                    .warm_plan(request.uri().path(), Versions::now(&self.app))
            })
            .flatten();
        let Some(hit) = hit else {
            return Box::pin(self.inner.call(request));
        };
        let app = self.app.clone();
        Box::pin(async move {
            let site_request = SiteRequest {
                key: request.uri().path(),
                method: request.method(),
                headers: request.headers(),
                sandbox: true,
            };
            Ok(site_request
                .answer(&app, &hit.plan, &hit.repo_path)
                .await
                .unwrap_or_else(IntoResponse::into_response))
        })
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
}

impl SiteRequest<'_> {
    /// The answer from the warm cache, touching no git and no blocking
    /// thread when its blob is cached too; `None` when the plan is not
    /// remembered for the current versions.
    async fn answer_warm(&self, app: &Arc<SitesState>) -> Option<Result<Response, AppError>> {
        if self.method != Method::GET && self.method != Method::HEAD {
            return Some(Err(read_only()));
        }
        let warm = app.sites.warm_plan(self.key, Versions::now(app))?;
        Some(self.answer(app, &warm.plan, &warm.repo_path).await)
    }

    /// Resolves the request against the repo's current site (cached per
    /// root tree), remembers the plan, answers.
    async fn resolve(
        &self,
        app: &Arc<SitesState>,
        repo: RepoName,
        path: &str,
        base: &str,
    ) -> Result<Response, AppError> {
        if self.method != Method::GET && self.method != Method::HEAD {
            return Err(read_only());
        }
        let Ok(site_path) = TreePath::parse(path) else {
            return Ok(plain_not_found(self.sandbox));
        };
        // Read before resolving: a push or a settings change during the
        // resolution leaves the remembered plan already out of date.
        let versions = Versions::now(app);
        let repo_path: Arc<std::path::Path> = app.repos.path(&repo).into();
        let readable = app
            .access
            .check(&Principal::Anonymous, Action::ReadSite, &repo)
            .is_ok();
        let plan = if readable {
            Self::site_plan(app, repo, site_path, path, base, versions, &repo_path).await?
        } else {
            // Remembered like any plan: an ACL change moves the settings
            // generation, so the next request decides again.
            Arc::new(Plan::Hidden(format!("repository {repo} not found")))
        };
        app.sites.remember(
            self.key,
            Warm {
                versions,
                repo_path: repo_path.clone(),
                plan: plan.clone(),
            },
        );
        self.answer(app, &plan, &repo_path).await
    }

    /// The plan for `site_path` in the repo's current site: from the plan
    /// cache when its root tree is known, else looked up in git (off the
    /// async workers) and cached by root tree.
    async fn site_plan(
        app: &Arc<SitesState>,
        repo: RepoName,
        site_path: TreePath,
        path: &str,
        base: &str,
        versions: Versions,
        repo_path: &Arc<std::path::Path>,
    ) -> Result<Arc<Plan>, AppError> {
        let store = app.sites.store.clone();
        let repo_name = repo.to_string();
        let source = app.meta.site(&repo);
        let dir: Vec<String> = source
            .dir
            .split('/')
            .filter(|part| !part.is_empty())
            .map(str::to_string)
            .collect();
        // The plan depends on the base (redirects) and the path; a base
        // holds no newline, so the pair is read back unambiguously.
        let request_key = format!("{base}\n{path}");
        let cached = store
            .cached_root(&repo_name, &source.ref_name, &dir, versions.refs)
            .flatten()
            .and_then(|root| {
                app.sites
                    .plans
                    .read()
                    .get(&(root, request_key.clone()))
                    .cloned()
            });
        if let Some(plan) = cached {
            return Ok(plan);
        }
        // Only here: a cached plan implies the repo exists.
        if !app.access.exists(&repo) {
            return Err(AppError::not_found(format!("repository {repo} not found")));
        }
        let base_owned = base.to_string();
        let ref_name = source.ref_name.clone();
        let lookup_path = repo_path.clone();
        let resolved = tokio::task::spawn_blocking(move || {
            let source = (ref_name.as_str(), dir.as_slice());
            plan(
                &store,
                &repo_name,
                &lookup_path,
                source,
                &site_path,
                &base_owned,
                versions.refs,
            )
        })
        .await
        .map_err(|e| AppError::internal("site lookup panicked", e))?
        .map_err(|e| AppError::internal("site lookup failed", e))?;
        Ok(match resolved {
            None => Arc::new(Plan::NoSite(no_site_message(&repo, &source))),
            Some((root, plan)) => {
                let plan = Arc::new(plan);
                app.sites
                    .plans
                    .write()
                    .insert((root, request_key), plan.clone(), 1);
                plan
            }
        })
    }

    async fn answer(
        &self,
        app: &Arc<SitesState>,
        plan: &Plan,
        repo_path: &Arc<std::path::Path>,
    ) -> Result<Response, AppError> {
        match plan {
            Plan::NoSite(message) | Plan::Hidden(message) => {
                Err(AppError::not_found(message.clone()))
            }
            Plan::Redirect(to) => Ok(moved(to)),
            Plan::NotFound => Ok(plain_not_found(self.sandbox)),
            Plan::File(head) => self.file_response(app, repo_path, head).await,
        }
    }
}

fn read_only() -> AppError {
    AppError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "sites are read-only: use GET or HEAD",
    )
}

fn no_site_message(repo: &RepoName, source: &crate::meta::entity::SiteSettings) -> String {
    let what = match (
        source.ref_name.strip_prefix("refs/heads/"),
        source.dir.is_empty(),
    ) {
        (Some(branch), true) => format!("a `{branch}` branch"),
        (Some(branch), false) => format!("a `{branch}` branch with a `{}` directory", source.dir),
        (None, _) => format!("`{}`", source.ref_name),
    };
    format!("{repo} has no site: push {what} to publish one")
}

/// The site's root tree and what it says about `path`; `None` when the repo
/// has no such ref or directory.
fn plan(
    store: &SiteStore,
    repo_name: &str,
    repo_path: &std::path::Path,
    (ref_name, dir): (&str, &[String]),
    path: &TreePath,
    base: &str,
    generation: u64,
) -> Result<Option<(ObjectId, Plan)>, store::SiteError> {
    let Some(root) = store.root_tree(repo_name, repo_path, ref_name, dir, generation)? else {
        return Ok(None);
    };
    Ok(Some((root, plan_in(store, repo_path, root, path, base)?)))
}

fn plan_in(
    store: &SiteStore,
    repo_path: &std::path::Path,
    root: ObjectId,
    path: &TreePath,
    base: &str,
) -> Result<Plan, store::SiteError> {
    let segments = path.segments();
    let joined = segments.join("/");
    let found = match store.lookup(repo_path, root, segments)? {
        Lookup::File { .. } if path.trailing_slash() => None,
        Lookup::File { .. } if segments.last().is_some_and(|s| s == "index.html") => {
            let parent = &segments[..segments.len() - 1];
            let dir = if parent.is_empty() {
                String::new()
            } else {
                format!("{}/", parent.join("/"))
            };
            return Ok(Plan::Redirect(format!("{base}{dir}")));
        }
        Lookup::File { id, size } => Some((id, size, segments.last().map_or("", |s| s))),
        Lookup::Dir(_) if !path.trailing_slash() => {
            return Ok(Plan::Redirect(format!("{base}{joined}/")));
        }
        Lookup::Dir(dir) => match store.lookup(repo_path, dir, &["index.html".to_string()])? {
            Lookup::File { id, size } => Some((id, size, "index.html")),
            _ => None,
        },
        Lookup::Missing => None,
    };
    if let Some((id, size, name)) = found {
        return Ok(Plan::File(FileHead::new(id, size, name, StatusCode::OK)));
    }
    Ok(
        match store.lookup(repo_path, root, &["404.html".to_string()])? {
            Lookup::File { id, size } => {
                Plan::File(FileHead::new(id, size, "404.html", StatusCode::NOT_FOUND))
            }
            _ => Plan::NotFound,
        },
    )
}

fn plain_not_found(sandbox: bool) -> Response {
    let mut response = (StatusCode::NOT_FOUND, "not found\n").into_response();
    if sandbox {
        response.headers_mut().insert(
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static(SANDBOX),
        );
    }
    response
}

fn content_type(name: &str) -> (String, bool) {
    let mime = mime_guess::from_path(name).first_or_octet_stream();
    let essence = mime.essence_str().to_string();
    let textual = mime.type_() == mime_guess::mime::TEXT
        || matches!(
            essence.as_str(),
            "application/javascript" | "application/json" | "application/xml" | "image/svg+xml"
        );
    let compressible = textual || essence == "application/wasm";
    let value = if textual {
        format!("{essence}; charset=utf-8")
    } else {
        essence
    };
    (value, compressible)
}

/// A single `bytes=` range against `size`: `Ok(None)` when absent or not
/// understood (serve whole), `Err(())` when unsatisfiable.
fn parse_range(headers: &HeaderMap, size: u64) -> Result<Option<(u64, u64)>, ()> {
    let Some(spec) = headers
        .get(header::RANGE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("bytes="))
    else {
        return Ok(None);
    };
    if spec.contains(',') {
        return Ok(None); // multiple ranges: serve the whole file
    }
    let Some((start, end)) = spec.trim().split_once('-') else {
        return Ok(None);
    };
    let range = match (start.parse::<u64>().ok(), end.parse::<u64>().ok()) {
        (Some(s), Some(e)) if s <= e => (s, e.min(size.saturating_sub(1))),
        (Some(s), None) if end.is_empty() => (s, size.saturating_sub(1)),
        (None, Some(n)) if start.is_empty() && n > 0 => {
            (size.saturating_sub(n), size.saturating_sub(1))
        }
        _ => return Ok(None),
    };
    if size == 0 || range.0 >= size {
        return Err(());
    }
    Ok(Some(range))
}

impl SiteRequest<'_> {
    async fn file_response(
        &self,
        app: &Arc<SitesState>,
        repo_path: &Arc<std::path::Path>,
        file: &FileHead,
    ) -> Result<Response, AppError> {
        let mut response = Response::new(Body::empty());
        let headers = response.headers_mut();
        headers.reserve(10);
        headers.insert(header::ETAG, file.etag.clone());
        headers.insert(header::CONTENT_TYPE, file.content_type.clone());
        headers.insert(header::CACHE_CONTROL, app.sites.cache_control.clone());
        headers.insert(
            header::X_CONTENT_TYPE_OPTIONS,
            HeaderValue::from_static("nosniff"),
        );
        headers.insert(header::ACCEPT_RANGES, HeaderValue::from_static("bytes"));
        if self.sandbox {
            headers.insert(
                header::CONTENT_SECURITY_POLICY,
                HeaderValue::from_static(SANDBOX),
            );
        }
        if file.compressible {
            headers.insert(header::VARY, HeaderValue::from_static("Accept-Encoding"));
        }
        let matches_etag = self
            .headers
            .get(header::IF_NONE_MATCH)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| {
                v.split(',')
                    .any(|t| t.trim().as_bytes() == file.etag.as_bytes() || t.trim() == "*")
            });
        if matches_etag && file.status == StatusCode::OK {
            *response.status_mut() = StatusCode::NOT_MODIFIED;
            return Ok(response);
        }
        let size = file.size;
        let range = match parse_range(self.headers, size) {
            Ok(range) if file.status == StatusCode::OK => range,
            Ok(_) => None,
            Err(()) => {
                *response.status_mut() = StatusCode::RANGE_NOT_SATISFIABLE;
                response.headers_mut().insert(
                    header::CONTENT_RANGE,
                    number_header(format!("bytes */{size}")),
                );
                return Ok(response);
            }
        };
        let (status, length) = match range {
            Some((start, end)) => {
                response.headers_mut().insert(
                    header::CONTENT_RANGE,
                    number_header(format!("bytes {start}-{end}/{size}")),
                );
                (StatusCode::PARTIAL_CONTENT, end - start + 1)
            }
            None => (file.status, size),
        };
        *response.status_mut() = status;

        if size > app.sites.stream_threshold {
            // Too big to cache: stream from a git child, one buffer per client.
            response
                .headers_mut()
                .insert(header::CONTENT_LENGTH, HeaderValue::from(length));
            if self.method != Method::HEAD {
                let start = range.map_or(0, |(s, _)| s);
                let body = BlobStream::spawn(app, repo_path, file.id, start, length)?;
                *response.body_mut() = Body::new(body);
            }
            return Ok(response);
        }

        let wants_gzip = file.compressible
            && range.is_none()
            && size >= 256
            && self
                .headers
                .get(header::ACCEPT_ENCODING)
                .and_then(|v| v.to_str().ok())
                .is_some_and(|v| {
                    v.split(',')
                        .any(|e| e.trim().split(';').next() == Some("gzip"))
                });
        let variant = if wants_gzip {
            cache::Variant::Gzip
        } else {
            cache::Variant::Identity
        };
        let store = &app.sites.store;
        let bytes = match store.cached_blob(file.id, variant) {
            Some(bytes) => bytes,
            None => {
                let (store, repo_path, id) = (store.clone(), repo_path.clone(), file.id);
                tokio::task::spawn_blocking(move || {
                    if wants_gzip {
                        store.gzipped(&repo_path, id)
                    } else {
                        store.blob(&repo_path, id)
                    }
                })
                .await
                .map_err(|e| AppError::internal("site read panicked", e))?
                .map_err(|e| AppError::internal("site read failed", e))?
            }
        };
        let headers = response.headers_mut();
        if wants_gzip {
            headers.insert(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
        }
        let body = match range {
            Some((start, end)) => bytes.slice(start as usize..=end as usize),
            None => bytes,
        };
        headers.insert(header::CONTENT_LENGTH, HeaderValue::from(body.len()));
        if self.method != Method::HEAD {
            *response.body_mut() = Body::from(body);
        }
        Ok(response)
    }
}

/// A header value made of digits, spaces, `-`, `/` and `*`: always valid.
fn number_header(text: String) -> HeaderValue {
    HeaderValue::try_from(text).expect("digits and punctuation make a valid header")
}

/// A large blob read from `git cat-file` as the client takes it.
struct BlobStream {
    _child: tokio::process::Child,
    stdout: tokio::process::ChildStdout,
    skip: u64,
    remaining: u64,
    buf: bytes::BytesMut,
}

impl BlobStream {
    fn spawn(
        app: &SitesState,
        repo: &std::path::Path,
        id: ObjectId,
        skip: u64,
        len: u64,
    ) -> Result<BlobStream, AppError> {
        let (child, stdout) = app
            .git
            .spawn_reader(repo, &["cat-file", "blob", &id.to_string()])
            .map_err(|e| AppError::internal("cannot start git cat-file", e))?;
        Ok(BlobStream {
            _child: child,
            stdout,
            skip,
            remaining: len,
            buf: bytes::BytesMut::with_capacity(64 << 10),
        })
    }
}

impl http_body::Body for BlobStream {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, std::io::Error>>> {
        loop {
            if self.remaining == 0 {
                return Poll::Ready(None);
            }
            let this = &mut *self;
            this.buf.clear();
            this.buf.reserve(64 << 10);
            match tokio_util::io::poll_read_buf(Pin::new(&mut this.stdout), cx, &mut this.buf) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Err(e)) => return Poll::Ready(Some(Err(e))),
                Poll::Ready(Ok(0)) => {
                    return Poll::Ready(Some(Err(std::io::Error::other("blob ended early"))));
                }
                Poll::Ready(Ok(_)) => {
                    let mut chunk = this.buf.split().freeze();
                    if this.skip > 0 {
                        let dropped = this.skip.min(chunk.len() as u64);
                        this.skip -= dropped;
                        chunk = chunk.slice(dropped as usize..);
                        if chunk.is_empty() {
                            continue;
                        }
                    }
                    let take = this.remaining.min(chunk.len() as u64);
                    this.remaining -= take;
                    return Poll::Ready(Some(Ok(http_body::Frame::data(
                        chunk.slice(..take as usize),
                    ))));
                }
            }
        }
    }
}
