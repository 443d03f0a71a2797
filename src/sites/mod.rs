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
//! ([`cache`]); a hit never needs invalidation. The ref -> tree resolution
//! is cached per ref-move feed generation, which the recorder bumps before a
//! push's `committed` hook returns: the first request after a push sees it.
//! Blobs over the stream threshold are not cached: each request streams one
//! from a `git cat-file` child, holding only a buffer. Every repo is public
//! until ACLs exist.

pub mod cache;
pub mod path;
pub mod store;

use std::collections::HashMap;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::body::{Body, Bytes};
use axum::extract::{Path, Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use gix::ObjectId;

use crate::app::App;
use crate::repos::RepoName;
use crate::server::error::AppError;
use path::SitePath;
use store::{Lookup, SiteStore};

const SANDBOX: &str = "sandbox allow-scripts allow-forms allow-popups allow-downloads";

/// The sites' shared state (inside [`App`]).
#[derive(Debug)]
pub struct Sites {
    pub store: Arc<SiteStore>,
    /// `host` -> repo, from `--site-domain`.
    domains: HashMap<String, RepoName>,
    stream_threshold: u64,
    cache_control: HeaderValue,
    /// (root tree, base + request path) -> plan: a warm request reads no git.
    plans: std::sync::Mutex<lru::LruCache<(ObjectId, String), Plan>>,
}

impl Sites {
    pub fn new(config: &crate::config::Config) -> Sites {
        Sites {
            store: Arc::new(SiteStore::new(config.sites.cache_bytes as usize)),
            domains: config.sites.domains.iter().cloned().collect(),
            stream_threshold: config.sites.stream_threshold,
            cache_control: HeaderValue::from_str(&config.sites.cache_control)
                .unwrap_or(HeaderValue::from_static("no-cache")),
            plans: std::sync::Mutex::new(lru::LruCache::new(
                std::num::NonZeroUsize::new(PLAN_CACHE_ENTRIES).expect("non-zero"),
            )),
        }
    }
}

/// Most resolved paths remembered (keyed by root tree, so never stale).
const PLAN_CACHE_ENTRIES: usize = 100_000;

/// What the tree says about a request.
#[derive(Debug, Clone)]
enum Plan {
    NoSite,
    Redirect(String),
    File {
        id: ObjectId,
        size: u64,
        name: String,
        status: StatusCode,
    },
    NotFound,
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

/// `GET /{owner}/{repo}/-/site/` (the site's root).
pub async fn site_index(
    State(app): State<Arc<App>>,
    Path((owner, repo)): Path<(String, String)>,
    method: Method,
    headers: HeaderMap,
) -> Result<Response, AppError> {
    site_path(
        State(app),
        Path((owner, repo, String::new())),
        method,
        headers,
    )
    .await
}

/// `GET /{owner}/{repo}/-/site/{*path}`
pub async fn site_path(
    State(app): State<Arc<App>>,
    Path((owner, repo, path)): Path<(String, String, String)>,
    method: Method,
    headers: HeaderMap,
) -> Result<Response, AppError> {
    let not_found = || AppError::not_found(format!("repository {owner}/{repo} not found"));
    let name = RepoName::from_parts(&owner, &repo).map_err(|_| not_found())?;
    let base = format!("/{owner}/{repo}/-/site/");
    serve(&app, name, &path, &base, &method, &headers, true).await
}

/// Serves the site of a configured domain for any path on that host.
pub async fn by_host(State(app): State<Arc<App>>, request: Request, next: Next) -> Response {
    if app.sites.domains.is_empty() {
        return next.run(request).await;
    }
    let host = request
        .headers()
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .map(|h| {
            h.rsplit_once(':')
                .map_or(h, |(name, _)| name)
                .to_ascii_lowercase()
        });
    let Some(repo) = host.and_then(|h| app.sites.domains.get(&h).cloned()) else {
        return next.run(request).await;
    };
    let decoded = percent_encoding::percent_decode_str(request.uri().path())
        .decode_utf8()
        .map(|p| p.into_owned());
    let Ok(path) = decoded else {
        return AppError::not_found("not found").into_response();
    };
    let method = request.method().clone();
    serve(&app, repo, &path, "/", &method, request.headers(), false)
        .await
        .unwrap_or_else(IntoResponse::into_response)
}

async fn serve(
    app: &Arc<App>,
    repo: RepoName,
    path: &str,
    base: &str,
    method: &Method,
    headers: &HeaderMap,
    sandbox: bool,
) -> Result<Response, AppError> {
    if method != Method::GET && method != Method::HEAD {
        return Err(AppError::new(
            StatusCode::METHOD_NOT_ALLOWED,
            "sites are read-only: use GET or HEAD",
        ));
    }
    let Some(site_path) = SitePath::parse(path) else {
        return Ok(plain_not_found(sandbox));
    };
    let store = app.sites.store.clone();
    let generation = app.recorder.generation();
    let repo_name = repo.to_string();
    let source = app.meta.site(&repo);
    let dir: Vec<String> = source
        .dir
        .split('/')
        .filter(|part| !part.is_empty())
        .map(str::to_string)
        .collect();
    // Warm path: root and plan both cached, no git and no blocking thread.
    let request_key = format!("{base}{path}");
    let key = |root: ObjectId| (root, request_key.clone());
    let cached = store
        .cached_root(&repo_name, &source.ref_name, &dir, generation)
        .flatten()
        .and_then(|root| {
            app.sites
                .plans
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .get(&key(root))
                .cloned()
        });
    let plan = match cached {
        Some(plan) => plan,
        None => {
            // Only on the cold path: a cached plan implies the repo exists.
            if !app.repos.exists(&repo) {
                return Err(AppError::not_found(format!("repository {repo} not found")));
            }
            let repo_path = app.repos.path(&repo);
            let base_owned = base.to_string();
            let ref_name = source.ref_name.clone();
            let (root, plan) = tokio::task::spawn_blocking(move || {
                let source = (ref_name.as_str(), dir.as_slice());
                plan(
                    &store,
                    &repo_name,
                    &repo_path,
                    source,
                    &site_path,
                    &base_owned,
                    generation,
                )
            })
            .await
            .map_err(|e| AppError::internal("site lookup panicked", e))?
            .map_err(|e| AppError::internal("site lookup failed", e))?;
            if let Some(root) = root {
                app.sites
                    .plans
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .put(key(root), plan.clone());
            }
            plan
        }
    };
    match plan {
        Plan::NoSite => Err(AppError::not_found(format!(
            "{repo} has no site: push {} to publish one",
            match (
                source.ref_name.strip_prefix("refs/heads/"),
                source.dir.is_empty()
            ) {
                (Some(branch), true) => format!("a `{branch}` branch"),
                (Some(branch), false) =>
                    format!("a `{branch}` branch with a `{}` directory", source.dir),
                (None, _) => format!("`{}`", source.ref_name),
            }
        ))),
        Plan::Redirect(to) => Ok(moved(&to)),
        Plan::NotFound => Ok(plain_not_found(sandbox)),
        Plan::File {
            id,
            size,
            name,
            status,
        } => {
            file_response(
                app, &repo, id, size, &name, status, method, headers, sandbox,
            )
            .await
        }
    }
}

fn plan(
    store: &SiteStore,
    repo_name: &str,
    repo_path: &std::path::Path,
    (ref_name, dir): (&str, &[String]),
    path: &SitePath,
    base: &str,
    generation: u64,
) -> Result<(Option<ObjectId>, Plan), store::SiteError> {
    let Some(root) = store.root_tree(repo_name, repo_path, ref_name, dir, generation)? else {
        return Ok((None, Plan::NoSite));
    };
    Ok((Some(root), plan_in(store, repo_path, root, path, base)?))
}

fn plan_in(
    store: &SiteStore,
    repo_path: &std::path::Path,
    root: ObjectId,
    path: &SitePath,
    base: &str,
) -> Result<Plan, store::SiteError> {
    let joined = path.segments.join("/");
    let found = match store.lookup(repo_path, root, &path.segments)? {
        Lookup::File { .. } if path.trailing_slash => None,
        Lookup::File { .. } if path.segments.last().is_some_and(|s| s == "index.html") => {
            let parent = &path.segments[..path.segments.len() - 1];
            let dir = if parent.is_empty() {
                String::new()
            } else {
                format!("{}/", parent.join("/"))
            };
            return Ok(Plan::Redirect(format!("{base}{dir}")));
        }
        Lookup::File { id, size } => {
            Some((id, size, path.segments.last().cloned().unwrap_or_default()))
        }
        Lookup::Dir(_) if !path.trailing_slash => {
            return Ok(Plan::Redirect(format!("{base}{joined}/")));
        }
        Lookup::Dir(dir) => match store.lookup(repo_path, dir, &["index.html".to_string()])? {
            Lookup::File { id, size } => Some((id, size, "index.html".to_string())),
            _ => None,
        },
        Lookup::Missing => None,
    };
    if let Some((id, size, name)) = found {
        return Ok(Plan::File {
            id,
            size,
            name,
            status: StatusCode::OK,
        });
    }
    Ok(
        match store.lookup(repo_path, root, &["404.html".to_string()])? {
            Lookup::File { id, size } => Plan::File {
                id,
                size,
                name: "404.html".into(),
                status: StatusCode::NOT_FOUND,
            },
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

#[allow(clippy::too_many_arguments)]
async fn file_response(
    app: &Arc<App>,
    repo: &RepoName,
    id: ObjectId,
    size: u64,
    name: &str,
    status: StatusCode,
    method: &Method,
    headers: &HeaderMap,
    sandbox: bool,
) -> Result<Response, AppError> {
    let etag = format!("\"{id}\"");
    let (content_type, compressible) = content_type(name);
    let mut builder = Response::builder()
        .header(header::ETAG, &etag)
        .header(header::CONTENT_TYPE, content_type)
        .header(header::CACHE_CONTROL, app.sites.cache_control.clone())
        .header(header::X_CONTENT_TYPE_OPTIONS, "nosniff")
        .header(header::ACCEPT_RANGES, "bytes");
    if sandbox {
        builder = builder.header(header::CONTENT_SECURITY_POLICY, SANDBOX);
    }
    if compressible {
        builder = builder.header(header::VARY, "Accept-Encoding");
    }
    let matches_etag = headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|t| t.trim() == etag || t.trim() == "*"));
    if matches_etag && status == StatusCode::OK {
        return builder
            .status(StatusCode::NOT_MODIFIED)
            .body(Body::empty())
            .map_err(|e| AppError::internal("building a site response", e));
    }
    let range = match parse_range(headers, size) {
        Ok(range) if status == StatusCode::OK => range,
        Ok(_) => None,
        Err(()) => {
            return builder
                .status(StatusCode::RANGE_NOT_SATISFIABLE)
                .header(header::CONTENT_RANGE, format!("bytes */{size}"))
                .body(Body::empty())
                .map_err(|e| AppError::internal("building a site response", e));
        }
    };
    let (status, length) = match range {
        Some((start, end)) => {
            builder = builder.header(header::CONTENT_RANGE, format!("bytes {start}-{end}/{size}"));
            (StatusCode::PARTIAL_CONTENT, end - start + 1)
        }
        None => (status, size),
    };
    builder = builder.status(status);
    let repo_path = app.repos.path(repo);

    if size > app.sites.stream_threshold {
        // Too big to cache: stream from a git child, one buffer per client.
        builder = builder.header(header::CONTENT_LENGTH, length);
        if method == Method::HEAD {
            return builder
                .body(Body::empty())
                .map_err(|e| AppError::internal("site response", e));
        }
        let start = range.map_or(0, |(s, _)| s);
        let body = BlobStream::spawn(app, &repo_path, id, start, length)?;
        return builder
            .body(Body::new(body))
            .map_err(|e| AppError::internal("site response", e));
    }

    let wants_gzip = compressible
        && range.is_none()
        && size >= 256
        && headers
            .get(header::ACCEPT_ENCODING)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| {
                v.split(',')
                    .any(|e| e.trim().split(';').next() == Some("gzip"))
            });
    let store = app.sites.store.clone();
    let variant = if wants_gzip {
        cache::Variant::Gzip
    } else {
        cache::Variant::Identity
    };
    let bytes = match store.cached_blob(id, variant) {
        Some(bytes) => bytes,
        None => tokio::task::spawn_blocking(move || {
            if wants_gzip {
                store.gzipped(&repo_path, id)
            } else {
                store.blob(&repo_path, id)
            }
        })
        .await
        .map_err(|e| AppError::internal("site read panicked", e))?
        .map_err(|e| AppError::internal("site read failed", e))?,
    };
    if wants_gzip {
        builder = builder.header(header::CONTENT_ENCODING, "gzip");
    }
    let body = match range {
        Some((start, end)) => Bytes::copy_from_slice(&bytes[start as usize..=end as usize]),
        None => Bytes::from_owner(ArcBytes(bytes)),
    };
    builder = builder.header(header::CONTENT_LENGTH, body.len());
    let body = if method == Method::HEAD {
        Body::empty()
    } else {
        Body::from(body)
    };
    builder
        .body(body)
        .map_err(|e| AppError::internal("site response", e))
}

/// Lets cached bytes back a response without copying them.
struct ArcBytes(Arc<Vec<u8>>);

impl AsRef<[u8]> for ArcBytes {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
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
        app: &App,
        repo: &std::path::Path,
        id: ObjectId,
        skip: u64,
        len: u64,
    ) -> Result<BlobStream, AppError> {
        let mut child = tokio::process::Command::new(app.git.path())
            .env_clear()
            .envs(app.git.child_env())
            .arg("--git-dir")
            .arg(PathBuf::from(repo))
            .args(["cat-file", "blob", &id.to_string()])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| AppError::internal("cannot start git cat-file", e))?;
        let stdout = child.stdout.take().expect("stdout is piped");
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
