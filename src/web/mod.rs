//! The web UI: server-rendered pages for browsing repos (askama templates
//! compiled from `templates/`, assets from `static/` compiled into the
//! binary). Every page works without JavaScript. Git reads happen in
//! [`read`], on blocking threads; nothing here writes.
//!
//! Routes: `/` (repos), `/{owner}/{repo}` (repo home),
//! `/{owner}/{repo}/-/tree/{rev}[/{path}]`, `/-/blob/{rev}/{path}`,
//! `/-/raw/{rev}/{path}`, `/static/{file}`. A revision is one path segment
//! (a branch or tag without `/`, or a full commit id).

pub mod highlight;
pub mod history;
pub mod read;

use std::collections::HashMap;
use std::sync::Arc;

use askama::Template;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{Html, IntoResponse, Response};

use crate::access::{Access, Action, Denied, Principal};
use crate::config::Config;
use crate::git::Git;
use crate::hooks::recorder::RefRecorder;
use crate::http::page::WebPage;
use crate::page::Pagination;
use crate::repos::{RepoName, Repos};
use crate::tree_path::TreePath;
use read::{EntryKind, Node};

/// What the web pages need of the server.
#[derive(Debug)]
pub struct WebState {
    pub config: Arc<Config>,
    pub git: Git,
    pub repos: Repos,
    pub recorder: Arc<RefRecorder>,
    pub access: Arc<Access>,
}

/// Repos per home page.
const PER_PAGE: u32 = 30;
/// Text blobs longer than this are shown truncated, with a link to raw.
const MAX_SHOWN_BYTES: usize = 512 * 1024;

// ---- errors ---------------------------------------------------------------

/// A page-shaped error: a friendly page with a status; internal detail
/// goes to the log, never to the browser.
pub struct PageError {
    status: StatusCode,
    message: String,
}

impl PageError {
    fn not_found(message: impl Into<String>) -> PageError {
        PageError {
            status: StatusCode::NOT_FOUND,
            message: message.into(),
        }
    }

    fn internal(context: &str, detail: impl std::fmt::Display) -> PageError {
        tracing::error!(error = %detail, "{context}");
        PageError {
            status: StatusCode::INTERNAL_SERVER_ERROR,
            message: "Something went wrong on our side; the details are in the server log.".into(),
        }
    }
}

#[derive(Template)]
#[template(path = "error.html")]
struct ErrorPage<'a> {
    title: &'a str,
    message: &'a str,
}

impl IntoResponse for PageError {
    fn into_response(self) -> Response {
        let title = match self.status {
            StatusCode::NOT_FOUND => "Not found",
            StatusCode::BAD_REQUEST => "Bad request",
            _ => "Server error",
        };
        let page = ErrorPage {
            title,
            message: &self.message,
        };
        match page.render() {
            Ok(html) => (self.status, Html(html)).into_response(),
            Err(_) => (self.status, self.message).into_response(),
        }
    }
}

pub(crate) fn render(page: impl Template) -> Result<Response, PageError> {
    page.render()
        .map(|html| Html(html).into_response())
        .map_err(|e| PageError::internal("cannot render a page", e))
}

pub(crate) async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, read::ReadError> + Send + 'static,
) -> Result<T, PageError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| PageError::internal("git read task failed", e))?
        .map_err(|e| PageError::internal("git read failed", e))
}

/// The repo a page is about, resolved through [`Access`]: one the
/// visitor may not read is answered as a missing one.
pub(crate) fn repo_name(app: &WebState, owner: &str, repo: &str) -> Result<RepoName, PageError> {
    app.access
        .resolve(&Principal::Anonymous, owner, repo, Action::Read)
        .map_err(|denied| match denied {
            Denied::Missing => {
                PageError::not_found(format!("There is no repository {owner}/{repo}."))
            }
            Denied::Unauthenticated(message) => PageError {
                status: StatusCode::UNAUTHORIZED,
                message,
            },
            Denied::Forbidden(message) => PageError {
                status: StatusCode::FORBIDDEN,
                message,
            },
        })
}

// ---- home -----------------------------------------------------------------

struct RepoRow {
    name: String,
    description: String,
    last_push: String,
}

#[derive(Template)]
#[template(path = "home.html")]
struct HomePage {
    query: String,
    query_encoded: String,
    repos: Vec<RepoRow>,
    prev_page: Option<usize>,
    next_page: Option<usize>,
}

/// `GET /?q=&page=`: every repo, filtered by a name substring.
pub async fn home(
    State(app): State<Arc<WebState>>,
    Query(query): Query<HashMap<String, String>>,
    WebPage(page): WebPage<PER_PAGE>,
) -> Result<Response, PageError> {
    let filter = query
        .get("q")
        .map(|q| q.trim().to_string())
        .unwrap_or_default();
    let needle = filter.to_lowercase();
    let matching: Vec<_> = app
        .repos
        .list()
        .into_iter()
        .filter(|info| {
            app.access
                .check(&Principal::Anonymous, Action::Read, &info.name)
                .is_ok()
        })
        .filter(|info| info.name.to_string().to_lowercase().contains(&needle))
        .collect();
    let total = matching.len();
    let repos = page
        .slice(matching)
        .map(|info| {
            let name = info.name.to_string();
            let last_push = app
                .recorder
                .activity(&name, Pagination::first(1))
                .0
                .first()
                .map(|entry| crate::time::nanos_to_seconds(entry.ref_move.time_ns))
                .unwrap_or_default();
            RepoRow {
                name,
                description: info.description,
                last_push,
            }
        })
        .collect();
    render(HomePage {
        query_encoded: percent_encoding::utf8_percent_encode(
            &filter,
            percent_encoding::NON_ALPHANUMERIC,
        )
        .to_string(),
        query: filter,
        repos,
        prev_page: page.prev(),
        next_page: page
            .next()
            .filter(|_| page.offset() + page.per_page() < total),
    })
}

// ---- repo, tree and blob views -------------------------------------------

pub struct Entry {
    kind: &'static str,
    name: String,
    href: String,
    note: &'static str,
}

/// What every page inside a repo shows: the revision, its refs, its
/// latest commit, and (for trees) the listing.
pub struct View {
    rev: String,
    rev_label: String,
    branches: Vec<String>,
    tags: Vec<String>,
    commit_id: String,
    commit_short: String,
    commit_summary: String,
    commit_author: String,
    commit_time: String,
    entries: Vec<Entry>,
}

pub struct Crumb {
    name: String,
    href: String,
}

#[derive(Template)]
#[template(path = "repo.html")]
struct RepoPage {
    repo: String,
    rev: String,
    description: String,
    clone_url: String,
    default_branch: String,
    view: Option<View>,
    readme: Option<String>,
}

#[derive(Template)]
#[template(path = "tree.html")]
struct TreePage {
    repo: String,
    rev: String,
    repo_name: String,
    path: String,
    view: View,
    crumbs: Vec<Crumb>,
}

pub enum BlobContent {
    /// Lines as HTML (highlighted or escaped by [`highlight::lines`]).
    Text {
        lines: Arc<Vec<String>>,
        truncated: bool,
    },
    Image,
    Binary,
}

#[derive(Template)]
#[template(path = "blob.html")]
struct BlobPage {
    repo: String,
    rev: String,
    repo_name: String,
    path: String,
    file_name: String,
    view: View,
    crumbs: Vec<Crumb>,
    size: u64,
    raw_href: String,
    content: BlobContent,
}

/// Path segments of a repo path, refused when they could not name a tree
/// entry (empty, `.`, `..`, NUL).
pub(crate) fn segments(path: &str) -> Result<Vec<String>, PageError> {
    TreePath::parse(path)
        .map(TreePath::into_segments)
        .map_err(|_| PageError::not_found("There is no such path."))
}

fn encode_path(segments: &[String]) -> String {
    segments
        .iter()
        .map(|s| percent_encoding::utf8_percent_encode(s, PATH_SEGMENT).to_string())
        .collect::<Vec<_>>()
        .join("/")
}

/// Characters escaped in one URL path segment.
const PATH_SEGMENT: &percent_encoding::AsciiSet = &percent_encoding::CONTROLS
    .add(b' ')
    .add(b'"')
    .add(b'#')
    .add(b'%')
    .add(b'/')
    .add(b'<')
    .add(b'>')
    .add(b'?')
    .add(b'`')
    .add(b'{')
    .add(b'}');

struct Resolved {
    view: View,
    node: Node,
    readme: Option<(String, Vec<u8>)>,
}

/// The repo, the path's segments and what `rev:path` is, for the tree and
/// blob pages (an empty repo is not found).
async fn resolve_path(
    app: &Arc<WebState>,
    owner: &str,
    repo: &str,
    rev: &str,
    path: &str,
) -> Result<(RepoName, Vec<String>, Resolved), PageError> {
    let name = repo_name(app, owner, repo)?;
    let segments = segments(path)?;
    let resolved = resolve(app, &name, Some(rev.to_string()), segments.clone(), false)
        .await?
        .ok_or_else(|| PageError::not_found(format!("{name} is empty.")))?;
    Ok((name, segments, resolved))
}

/// Resolves `rev` and `path` in one blocking hop; `Ok(None)` when the
/// repo has no commits at all.
async fn resolve(
    app: &Arc<WebState>,
    name: &RepoName,
    rev: Option<String>,
    path: Vec<String>,
    want_readme: bool,
) -> Result<Option<Resolved>, PageError> {
    let repo_path = app.repos.path(name);
    let repo = name.to_string();
    let rev_for_error = rev.clone();
    let resolved = blocking(move || {
        let git = read::open(&repo_path)?;
        let refs = read::refs(&git)?;
        let rev = match rev {
            Some(rev) => rev,
            None => match refs.head.clone().filter(|h| refs.branches.contains(h)) {
                Some(head) => head,
                None => match refs.branches.first() {
                    Some(first) => first.clone(),
                    None => return Ok(None),
                },
            },
        };
        let (rev, path) = read::split_rev(&git, &rev, &path)?;
        let Some(commit_id) = read::resolve(&git, &rev)? else {
            return Ok(Some(Err(rev)));
        };
        let commit = read::commit(&git, commit_id)?;
        let node = read::lookup(&git, commit.tree, &path)?;
        let mut readme = None;
        if want_readme
            && let Node::Tree(entries) = &node
            && let Some(entry) = entries.iter().find(|e| {
                e.kind == EntryKind::File && {
                    let lower = e.name.to_lowercase();
                    lower == "readme.md" || lower == "readme" || lower == "readme.txt"
                }
            })
        {
            readme = Some((entry.name.clone(), read::blob(&git, entry.id)?));
        }
        let rev_label = if refs.branches.contains(&rev) {
            format!("Branch: {rev}")
        } else if refs.tags.contains(&rev) {
            format!("Tag: {rev}")
        } else {
            format!("Commit: {}", &rev[..rev.len().min(12)])
        };
        let base = format!("/{repo}");
        let dir = encode_path(&path);
        let entries = match &node {
            Node::Tree(entries) => entries
                .iter()
                .map(|e| {
                    let child = if dir.is_empty() {
                        encode_path(std::slice::from_ref(&e.name))
                    } else {
                        format!("{dir}/{}", encode_path(std::slice::from_ref(&e.name)))
                    };
                    let (kind, view, note) = match e.kind {
                        EntryKind::Dir => ("dir", "tree", ""),
                        EntryKind::File => ("file", "blob", ""),
                        EntryKind::Link => ("link", "blob", "symbolic link"),
                        EntryKind::Submodule => ("submodule", "tree", "submodule"),
                    };
                    Entry {
                        kind,
                        name: e.name.clone(),
                        href: if e.kind == EntryKind::Submodule {
                            String::new()
                        } else {
                            format!("{base}/-/{view}/{rev}/{child}")
                        },
                        note,
                    }
                })
                .collect(),
            _ => Vec::new(),
        };
        Ok(Some(Ok(Resolved {
            view: View {
                rev_label,
                branches: refs.branches,
                tags: refs.tags,
                commit_short: commit.id[..12].to_string(),
                commit_id: commit.id,
                commit_summary: commit.summary,
                commit_author: commit.author,
                commit_time: commit.time,
                entries,
                rev,
            },
            node,
            readme,
        })))
    })
    .await?;
    match resolved {
        None => Ok(None),
        Some(Ok(resolved)) => Ok(Some(resolved)),
        Some(Err(rev)) => Err(PageError::not_found(format!(
            "{name} has no branch, tag or commit {:?}.",
            rev_for_error.unwrap_or(rev)
        ))),
    }
}

fn crumbs(repo: &str, rev: &str, path: &[String]) -> Vec<Crumb> {
    (0..path.len())
        .map(|i| Crumb {
            name: path[i].clone(),
            href: format!("/{repo}/-/tree/{rev}/{}", encode_path(&path[..=i])),
        })
        .collect()
}

fn clone_url(app: &WebState, headers: &HeaderMap, name: &RepoName) -> String {
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .filter(|h| {
            h.chars()
                .all(|c| c.is_ascii_alphanumeric() || ".-:[]".contains(c))
        })
        .map(str::to_string)
        .unwrap_or_else(|| app.config.listen.to_string());
    format!("http://{host}/{name}.git")
}

/// `GET /{owner}/{repo}`: clone URL, refs, latest commit, root listing,
/// README; or how to push to an empty repo.
pub async fn repo_home(
    State(app): State<Arc<WebState>>,
    Path((owner, repo)): Path<(String, String)>,
    headers: HeaderMap,
) -> Result<Response, PageError> {
    let name = repo_name(&app, &owner, &repo)?;
    let description = app.repos.description(&name);
    let resolved = resolve(&app, &name, None, Vec::new(), true).await?;
    let (view, readme) = match resolved {
        None => (None, None),
        Some(resolved) => {
            let readme = resolved.readme.map(|(file, bytes)| {
                render_readme(&name.to_string(), &resolved.view.rev, &file, &bytes)
            });
            (Some(resolved.view), readme)
        }
    };
    render(RepoPage {
        rev: view
            .as_ref()
            .map_or_else(|| app.config.default_branch.clone(), |v| v.rev.clone()),
        repo: name.to_string(),
        description,
        clone_url: clone_url(&app, &headers, &name),
        default_branch: app.config.default_branch.clone(),
        view,
        readme,
    })
}

/// `GET /{owner}/{repo}/-/tree/{rev}`: the root of a revision.
pub async fn tree_root(
    State(app): State<Arc<WebState>>,
    Path((owner, repo, rev)): Path<(String, String, String)>,
) -> Result<Response, PageError> {
    tree_page(app, owner, repo, rev, String::new()).await
}

/// `GET /{owner}/{repo}/-/tree/{rev}/{*path}`.
pub async fn tree(
    State(app): State<Arc<WebState>>,
    Path((owner, repo, rev, path)): Path<(String, String, String, String)>,
) -> Result<Response, PageError> {
    tree_page(app, owner, repo, rev, path).await
}

async fn tree_page(
    app: Arc<WebState>,
    owner: String,
    repo: String,
    rev: String,
    path: String,
) -> Result<Response, PageError> {
    let (name, segments, resolved) = resolve_path(&app, &owner, &repo, &rev, &path).await?;
    match resolved.node {
        Node::Tree(_) => {}
        Node::Blob { .. } => {
            let to = format!("/{name}/-/blob/{rev}/{}", encode_path(&segments));
            return Ok(redirect(&to));
        }
        Node::Missing => {
            return Err(PageError::not_found(format!(
                "There is no directory {path} in {name} at {rev}."
            )));
        }
    }
    render(TreePage {
        rev: resolved.view.rev.clone(),
        repo: name.to_string(),
        repo_name: name.name().to_string(),
        crumbs: crumbs(&name.to_string(), &resolved.view.rev, &segments),
        path: if path.is_empty() { "/".into() } else { path },
        view: resolved.view,
    })
}

fn redirect(to: &str) -> Response {
    let mut response = StatusCode::FOUND.into_response();
    if let Ok(value) = HeaderValue::from_str(to) {
        response.headers_mut().insert(header::LOCATION, value);
    }
    response
}

fn is_image(name: &str) -> bool {
    let lower = name.to_lowercase();
    [
        ".png", ".jpg", ".jpeg", ".gif", ".webp", ".svg", ".ico", ".bmp",
    ]
    .iter()
    .any(|ext| lower.ends_with(ext))
}

/// A blob is binary when its first 8000 bytes hold a NUL (git's rule).
fn is_binary(bytes: &[u8]) -> bool {
    bytes[..bytes.len().min(8000)].contains(&0)
}

/// `GET /{owner}/{repo}/-/blob/{rev}/{*path}`: a file with line numbers
/// and line anchors, an image preview, or a note for binaries.
pub async fn blob(
    State(app): State<Arc<WebState>>,
    Path((owner, repo, rev, path)): Path<(String, String, String, String)>,
) -> Result<Response, PageError> {
    let (name, segments, resolved) = resolve_path(&app, &owner, &repo, &rev, &path).await?;
    let (id, size) = match resolved.node {
        Node::Blob { id, size } => (id, size),
        Node::Tree(_) => {
            let to = format!("/{name}/-/tree/{rev}/{}", encode_path(&segments));
            return Ok(redirect(&to));
        }
        Node::Missing => {
            return Err(PageError::not_found(format!(
                "There is no file {path} in {name} at {rev}."
            )));
        }
    };
    let file_name = segments.last().cloned().unwrap_or_default();
    let content = if is_image(&file_name) {
        BlobContent::Image
    } else {
        let repo_path = app.repos.path(&name);
        let bytes = blocking(move || read::blob(&read::open(&repo_path)?, id)).await?;
        if is_binary(&bytes) {
            BlobContent::Binary
        } else {
            let truncated = bytes.len() > MAX_SHOWN_BYTES;
            let name = file_name.clone();
            // Highlighting is CPU work: off the async workers.
            let lines = tokio::task::spawn_blocking(move || {
                let shown = &bytes[..bytes.len().min(MAX_SHOWN_BYTES)];
                highlight::lines(id, &name, &String::from_utf8_lossy(shown))
            })
            .await
            .map_err(|e| PageError::internal("highlighting failed", e))?;
            BlobContent::Text { lines, truncated }
        }
    };
    render(BlobPage {
        raw_href: format!(
            "/{name}/-/raw/{}/{}",
            resolved.view.rev,
            encode_path(&segments)
        ),
        rev: resolved.view.rev.clone(),
        repo: name.to_string(),
        repo_name: name.name().to_string(),
        crumbs: crumbs(&name.to_string(), &resolved.view.rev, &segments),
        path,
        file_name,
        view: resolved.view,
        size,
        content,
    })
}

/// `GET /{owner}/{repo}/-/raw/{rev}/{*path}`: the bytes. Nothing that a
/// browser would run is served as itself on vole's origin: HTML and other
/// markup go out as `text/plain`, SVG under `Content-Security-Policy:
/// sandbox`, everything with `nosniff`.
pub async fn raw(
    State(app): State<Arc<WebState>>,
    Path((owner, repo, rev, path)): Path<(String, String, String, String)>,
) -> Result<Response, PageError> {
    let name = repo_name(&app, &owner, &repo)?;
    let segments = segments(&path)?;
    let repo_path = app.repos.path(&name);
    let rev_for_read = rev.clone();
    let segments_for_read = segments.clone();
    let bytes = blocking(move || {
        let git = read::open(&repo_path)?;
        let (rev, segments) = read::split_rev(&git, &rev_for_read, &segments_for_read)?;
        let Some(commit) = read::resolve(&git, &rev)? else {
            return Ok(None);
        };
        let tree = read::commit(&git, commit)?.tree;
        match read::lookup(&git, tree, &segments)? {
            Node::Blob { id, .. } => Ok(Some(read::blob(&git, id)?)),
            _ => Ok(None),
        }
    })
    .await?
    .ok_or_else(|| PageError::not_found(format!("There is no file {path} in {name} at {rev}.")))?;
    let file_name = segments.last().cloned().unwrap_or_default();
    let lower = file_name.to_lowercase();
    let content_type = if lower.ends_with(".svg") {
        "image/svg+xml".to_string()
    } else if is_image(&lower) {
        mime_guess::from_path(&lower)
            .first_or_octet_stream()
            .to_string()
    } else if is_binary(&bytes) {
        "application/octet-stream".to_string()
    } else {
        "text/plain; charset=utf-8".to_string()
    };
    let mut response = bytes.into_response();
    let headers = response.headers_mut();
    if let Ok(value) = HeaderValue::from_str(&content_type) {
        headers.insert(header::CONTENT_TYPE, value);
    }
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(
            "sandbox; default-src 'none'; img-src 'self'; style-src 'unsafe-inline'",
        ),
    );
    Ok(response)
}

// ---- README ---------------------------------------------------------------

/// Rewrites a README's relative links into the repo: images to raw,
/// everything else to the blob view, both at the README's revision.
struct RepoLinks {
    repo: String,
    rev: String,
}

impl ammonia::UrlRelativeEvaluate<'_> for RepoLinks {
    fn evaluate<'a>(&self, url: &'a str) -> Option<std::borrow::Cow<'a, str>> {
        if url.starts_with('#') {
            return Some(url.into());
        }
        let path = url.trim_start_matches("./").trim_start_matches('/');
        if path.split('/').any(|p| p == "..") {
            return None;
        }
        let view = if is_image(path.split(['?', '#']).next().unwrap_or(path)) {
            "raw"
        } else {
            "blob"
        };
        Some(format!("/{}/-/{view}/{}/{path}", self.repo, self.rev).into())
    }
}

/// A README as sanitized HTML: CommonMark for `.md`, else preformatted
/// text. Scripts, event attributes, `javascript:` URLs and any other markup
/// that could run are removed by ammonia.
fn render_readme(repo: &str, rev: &str, file: &str, bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(&bytes[..bytes.len().min(MAX_SHOWN_BYTES)]);
    if !file.to_lowercase().ends_with(".md") {
        return format!("<pre>{}</pre>", ammonia::clean_text(&text));
    }
    let parser = pulldown_cmark::Parser::new_ext(
        &text,
        pulldown_cmark::Options::ENABLE_TABLES
            | pulldown_cmark::Options::ENABLE_STRIKETHROUGH
            | pulldown_cmark::Options::ENABLE_TASKLISTS,
    );
    // The page has its own h1: the README's headings move one level down.
    let parser = parser.map(|event| match event {
        pulldown_cmark::Event::Start(pulldown_cmark::Tag::Heading {
            level,
            id,
            classes,
            attrs,
        }) => pulldown_cmark::Event::Start(pulldown_cmark::Tag::Heading {
            level: demote(level),
            id,
            classes,
            attrs,
        }),
        pulldown_cmark::Event::End(pulldown_cmark::TagEnd::Heading(level)) => {
            pulldown_cmark::Event::End(pulldown_cmark::TagEnd::Heading(demote(level)))
        }
        other => other,
    });
    let mut html = String::new();
    pulldown_cmark::html::push_html(&mut html, parser);
    ammonia::Builder::default()
        .url_relative(ammonia::UrlRelative::Custom(Box::new(RepoLinks {
            repo: repo.to_string(),
            rev: rev.to_string(),
        })))
        .link_rel(Some("noopener noreferrer nofollow"))
        .clean(&html)
        .to_string()
}

fn demote(level: pulldown_cmark::HeadingLevel) -> pulldown_cmark::HeadingLevel {
    use pulldown_cmark::HeadingLevel::*;
    match level {
        H1 => H2,
        H2 => H3,
        H3 => H4,
        H4 => H5,
        _ => H6,
    }
}

// ---- static assets ----------------------------------------------------------

fn style_css() -> &'static str {
    static CSS: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    CSS.get_or_init(|| {
        format!(
            "{}\n{}",
            include_str!("../../static/style.css"),
            highlight::stylesheet()
        )
    })
}

/// `GET /static/{file}`: the stylesheet and the copy-button script, built
/// into the binary.
pub async fn static_file(Path(file): Path<String>) -> Response {
    let (body, content_type): (&'static str, &'static str) = match file.as_str() {
        // One stylesheet: the site's own, then the highlight classes.
        "style.css" => (style_css(), "text/css; charset=utf-8"),
        "copy.js" => (
            include_str!("../../static/copy.js"),
            "text/javascript; charset=utf-8",
        ),
        _ => return PageError::not_found("There is no such file.").into_response(),
    };
    let mut response = body.into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("public, max-age=300"),
    );
    response
}
