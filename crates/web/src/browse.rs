//! The repo, tree, blob and raw views: resolving a revision and a path in
//! one blocking hop, and rendering what is there.

use super::*;
use vole_access::ResolvedRepo;

use super::last_commit;

/// Entries of a tree listed at most (a tree of a million entries is a
/// page of this many; the rest are reached by path).
const MAX_LISTED: usize = 5000;

/// Branches and tags listed in a page's ref menu; the branches and tags
/// pages list them all, a page at a time.
const REFS_IN_MENU: usize = 50;

pub struct Entry {
    kind: &'static str,
    name: String,
    href: String,
    note: &'static str,
    /// A file's size, for people ("1.2 KiB"); empty for the rest.
    size: String,
    last: Last,
}

/// The last commit that touched an entry, as the listing shows it.
pub enum Last {
    /// Not looked for (the page shows no such column).
    Unknown,
    Commit(last_commit::Touch),
    /// Not among the commits the walk looked at.
    Older(usize),
}

/// What every page inside a repo shows: the revision, its refs, its
/// latest commit, and (for trees) the listing.
pub struct View {
    pub(super) rev: String,
    pub(super) rev_label: String,
    /// The first [`REFS_IN_MENU`] branches and tags (the menu on every
    /// page), and how many there are.
    pub(super) branches: Vec<String>,
    pub(super) tags: Vec<String>,
    pub(super) branch_count: usize,
    pub(super) tag_count: usize,
    pub(super) commit_id: String,
    pub(super) commit_short: String,
    pub(super) commit_summary: String,
    pub(super) commit_author: String,
    pub(super) commit_time: String,
    pub(super) entries: Vec<Entry>,
}

#[derive(Template)]
#[template(path = "repo.html")]
pub(super) struct RepoPage {
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
pub(super) struct TreePage {
    repo: String,
    rev: String,
    repo_name: String,
    path: String,
    view: View,
    crumbs: Vec<Crumb>,
}

pub enum BlobContent {
    /// Lines as HTML (highlighted or escaped by [`highlight::Highlighter`]).
    Text {
        lines: Arc<highlight::Highlighted>,
        truncated: bool,
    },
    Image,
    Binary,
}

#[derive(Template)]
#[template(path = "blob.html")]
pub(super) struct BlobPage {
    blame_href: String,
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

pub(super) struct Resolved {
    pub(super) view: View,
    pub(super) commit: gix::ObjectId,
    /// The path inside the revision (after a branch name's slashes).
    pub(super) path: Vec<String>,
    pub(super) node: Node,
    readme: Option<(String, Vec<u8>)>,
}

/// The repo, the path's segments and what `rev:path` is, for the tree and
/// blob pages (an empty repo is not found).
pub(super) async fn resolve_path(
    app: &Arc<WebState>,
    name: ResolvedRepo,
    rev: &str,
    path: &str,
) -> Result<(ResolvedRepo, Vec<String>, Resolved), AppError> {
    let segments = segments(path)?;
    let resolved = resolve(app, &name, Some(rev.to_string()), segments.clone(), false)
        .await?
        .ok_or_else(|| AppError::not_found(format!("{name} is empty.")))?;
    Ok((name, segments, resolved))
}

/// Resolves `rev` and `path` in one blocking hop; `Ok(None)` when the
/// repo has no commits at all.
pub(super) async fn resolve(
    app: &Arc<WebState>,
    name: &ResolvedRepo,
    rev: Option<String>,
    path: Vec<String>,
    want_readme: bool,
) -> Result<Option<Resolved>, AppError> {
    let repo_path = app.repos.path(name);
    let incarnation = name.incarnation_id().to_string();
    let repo = name.to_string();
    let rev_for_error = rev.clone();
    let git_binary = app.git.clone();
    let deadline = app.config.reads.deadline;
    let gix = app.gix.clone();
    let resolved = blocking(move || {
        let git = read::open(&gix, &repo_path, &incarnation)?;
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
            // In-process and capped: a README over the in-process bound
            // is not rendered (the listing still links to it).
            let size = git.find_header(entry.id)?.size();
            if size <= read::IN_PROCESS_BLOB {
                let (bytes, _) = read::blob_prefix(
                    &git_binary,
                    &repo_path,
                    &git,
                    entry.id,
                    size,
                    MAX_SHOWN_BYTES,
                    deadline,
                )?;
                readme = Some((entry.name.clone(), bytes));
            }
        }
        let rev_label = if refs.branches.contains(&rev) {
            format!("Branch: {rev}")
        } else if refs.tags.contains(&rev) {
            format!("Tag: {rev}")
        } else {
            format!("Commit: {}", &rev[..rev.len().min(12)])
        };
        let base = format!("/{repo}");
        let rev_in_links = rev_path(&rev);
        let dir = encode_path(&path);
        let entries = match &node {
            Node::Tree(entries) => entries
                .iter()
                .take(MAX_LISTED)
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
                            format!("{base}/-/{view}/{rev_in_links}/{child}")
                        },
                        note,
                        size: String::new(),
                        last: Last::Unknown,
                    }
                })
                .collect(),
            _ => Vec::new(),
        };
        Ok(Some(Ok(Resolved {
            view: View {
                rev_label,
                branch_count: refs.branches.len(),
                tag_count: refs.tags.len(),
                branches: refs.branches.into_iter().take(REFS_IN_MENU).collect(),
                tags: refs.tags.into_iter().take(REFS_IN_MENU).collect(),
                commit_short: commit.id[..12].to_string(),
                commit_id: commit.id,
                commit_summary: commit.summary,
                commit_author: commit.author,
                commit_time: commit.time,
                entries,
                rev,
            },
            commit: commit_id,
            path,
            node,
            readme,
        })))
    })
    .await?;
    match resolved {
        None => Ok(None),
        Some(Ok(resolved)) => Ok(Some(resolved)),
        Some(Err(rev)) => Err(AppError::not_found(format!(
            "{name} has no branch, tag or commit {:?}.",
            rev_for_error.unwrap_or(rev)
        ))),
    }
}

/// Fills in each listed entry's size and last commit, from one bounded
/// walk of history (`last_commit`), cached by commit and path; a miss
/// walks under a read slot. The column is extra: with no slot free
/// within [`LISTING_SLOT_WAIT`], or a walk that fails, the listing is
/// drawn without it (the failure logged), never refused.
pub(super) async fn annotate(app: &Arc<WebState>, name: &ResolvedRepo, resolved: &mut Resolved) {
    let Node::Tree(entries) = &resolved.node else {
        return;
    };
    if entries.is_empty() {
        return;
    }
    let key = (
        name.incarnation_id().to_string(),
        resolved.commit,
        resolved.path.clone(),
    );
    let shown: Vec<read::TreeEntry> = entries.iter().take(MAX_LISTED).cloned().collect();
    // One walk per key at a time: the views that come while it runs wait
    // for it.
    let walked = app
        .caches
        .listings
        .optionally_get_with(
            key,
            walk_listing(app, name, resolved.commit, resolved.path.clone(), shown),
        )
        .await;
    let Some(facts) = walked else {
        return;
    };
    for (index, entry) in resolved.view.entries.iter_mut().enumerate() {
        if let Some(Some(size)) = facts.sizes.get(index) {
            entry.size = human_size(*size);
        }
        entry.last = match facts.last.get(index).copied().flatten() {
            Some(at) => Last::Commit(facts.commits[at as usize].clone()),
            None if facts.cut => Last::Older(facts.walked),
            None => Last::Unknown,
        };
    }
}

/// The walk of one listing under a read slot (cached by the caller, and
/// when the clock cut it kept a minute); `None` when no slot freed in time
/// or it failed.
async fn walk_listing(
    app: &Arc<WebState>,
    name: &ResolvedRepo,
    commit: gix::ObjectId,
    path: Vec<String>,
    shown: Vec<read::TreeEntry>,
) -> Option<Arc<last_commit::Facts>> {
    let slot = app.reads.acquire_within(LISTING_SLOT_WAIT).await?;
    let repo_path = app.repos.path(name);
    let incarnation = name.incarnation_id().to_string();
    let bounds = last_commit::Bounds {
        commits: last_commit::MAX_WALKED,
        time: last_commit::WALK_BUDGET.min(app.config.reads.deadline),
    };
    let gix = app.gix.clone();
    let walked = blocking(move || {
        let _slot = slot;
        let mut repo = read::open(&gix, &repo_path, &incarnation)?;
        // Each version of the directory is read twice, as a commit's and
        // then as its parent's, one right after the other: a small cache
        // of decoded objects on this walk's own handle saves the second.
        repo.object_cache_size(last_commit::OBJECT_CACHE_BYTES);
        last_commit::walk(&repo, commit, &path, &shown, bounds).map(Arc::new)
    })
    .await;
    match walked {
        Ok(facts) => Some(facts),
        Err(e) => {
            tracing::warn!(repo = %name, error = ?e, "the listing's last commits could not be found; drawn without them");
            None
        }
    }
}

/// How long a listing waits for a read slot for its last-commit walk.
const LISTING_SLOT_WAIT: std::time::Duration = std::time::Duration::from_millis(250);

/// A size for people: bytes below 1 KiB, else KiB, MiB, GiB with one
/// decimal.
pub(super) fn human_size(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut value = bytes as f64 / 1024.0;
    let mut unit = 0;
    // 1023.96 KiB would print as "1024.0 KiB": that is 1.0 MiB.
    while value >= 1023.95 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}

pub(super) fn clone_url(app: &WebState, headers: &HeaderMap, name: &RepoName) -> String {
    if let Some(public) = &app.config.public_url {
        return format!("{public}/{name}.git");
    }
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
    RepoAccess { repo: name, .. }: RepoAccess<Read>,
    headers: HeaderMap,
) -> Result<Response, AppError> {
    let description = app.repos.description(&name);
    let resolved = resolve(&app, &name, None, Vec::new(), true).await?;
    let (view, readme) = match resolved {
        None => (None, None),
        Some(mut resolved) => {
            annotate(&app, &name, &mut resolved).await;
            // Markdown and sanitizing are CPU work on up to 512 KiB: off
            // the async workers (which also carry the hooks' requests).
            let readme = match resolved.readme {
                Some((file, bytes)) => {
                    let (repo, rev) = (name.to_string(), resolved.view.rev.clone());
                    Some(
                        vole_http::spawn_blocking(move || {
                            render_readme(&repo, &rev, &file, &bytes)
                        })
                        .await
                        .map_err(|e| AppError::internal("README rendering failed", e))?,
                    )
                }
                None => None,
            };
            (Some(resolved.view), readme)
        }
    };
    // An empty repo's HEAD still names the branch a first push should
    // bring (the server's default, or the one the settings chose).
    let head = vole_git::repos::head_branch(&app.repos.path(&name))
        .unwrap_or_else(|| app.config.default_branch.clone());
    render(RepoPage {
        rev: view
            .as_ref()
            .map_or_else(|| head.clone(), |v| v.rev.clone()),
        repo: name.to_string(),
        description,
        clone_url: clone_url(&app, &headers, &name),
        default_branch: head,
        view,
        readme,
    })
}

/// `GET /{owner}/{repo}/-/tree/{rev}`: the root of a revision.
pub async fn tree_root(
    State(app): State<Arc<WebState>>,
    RepoAccess { repo: name, .. }: RepoAccess<Read>,
    Path((_, _, rev)): Path<(String, String, String)>,
) -> Result<Response, AppError> {
    tree_page(app, name, rev, String::new()).await
}

/// `GET /{owner}/{repo}/-/tree/{rev}/{*path}`.
pub async fn tree(
    State(app): State<Arc<WebState>>,
    RepoAccess { repo: name, .. }: RepoAccess<Read>,
    Path((_, _, rev, path)): Path<(String, String, String, String)>,
) -> Result<Response, AppError> {
    tree_page(app, name, rev, path).await
}

pub(super) async fn tree_page(
    app: Arc<WebState>,
    name: ResolvedRepo,
    rev: String,
    path: String,
) -> Result<Response, AppError> {
    let (name, segments, mut resolved) = resolve_path(&app, name, &rev, &path).await?;
    match resolved.node {
        Node::Tree(_) => annotate(&app, &name, &mut resolved).await,
        Node::Blob { .. } => {
            let to = format!(
                "/{name}/-/blob/{}/{}",
                rev_path(&rev),
                encode_path(&segments)
            );
            return Ok(redirect(&to));
        }
        Node::Missing => {
            return Err(AppError::not_found(format!(
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

pub(super) fn is_image(name: &str) -> bool {
    let lower = name.to_lowercase();
    [
        ".png", ".jpg", ".jpeg", ".gif", ".webp", ".svg", ".ico", ".bmp",
    ]
    .iter()
    .any(|ext| lower.ends_with(ext))
}

/// A blob is binary when its first 8000 bytes hold a NUL (git's rule).
pub(super) fn is_binary(bytes: &[u8]) -> bool {
    bytes[..bytes.len().min(8000)].contains(&0)
}

/// Lines shown of a text file at most (with [`MAX_SHOWN_BYTES`]): the
/// page's bytes are bounded by both, whatever the file's line lengths.
const MAX_SHOWN_LINES: usize = 10_000;

/// What the blob page shows of blob `id`. Warm, it touches no blob: the
/// binary verdict and the highlighted lines are remembered by id. Cold, it
/// reads at most [`MAX_SHOWN_BYTES`] of the blob (in-process, or from a
/// `git cat-file` child under a read slot for a large one).
pub(super) async fn blob_content(
    app: &Arc<WebState>,
    name: &ResolvedRepo,
    id: gix::ObjectId,
    size: u64,
    file_name: &str,
) -> Result<BlobContent, AppError> {
    if is_image(file_name) {
        return Ok(BlobContent::Image);
    }
    let shown_whole = |lines: &highlight::Highlighted| {
        size <= MAX_SHOWN_BYTES as u64 && lines.lines.len() < MAX_SHOWN_LINES
    };
    match app.highlighter.binary_verdict(id) {
        Some(true) => return Ok(BlobContent::Binary),
        Some(false) => {
            if let Some(lines) = app.highlighter.cached(id, file_name).await {
                let truncated = !shown_whole(&lines);
                return Ok(BlobContent::Text { lines, truncated });
            }
        }
        None => {}
    }
    let bytes = read_prefix(app, name, id, size, MAX_SHOWN_BYTES).await?;
    let binary = is_binary(&bytes);
    app.highlighter.remember_binary(id, binary);
    if binary {
        return Ok(BlobContent::Binary);
    }
    let text = String::from_utf8_lossy(&bytes);
    // At most MAX_SHOWN_LINES lines.
    let text = match text.match_indices('\n').nth(MAX_SHOWN_LINES - 1) {
        Some((at, _)) => text[..at].to_string(),
        None => text.into_owned(),
    };
    let lines = app.highlighter.highlight(id, file_name, text).await;
    let truncated = !shown_whole(&lines);
    Ok(BlobContent::Text { lines, truncated })
}

/// A file a URL names: repo, path segments, view, blob id, size.
pub(super) type FileAt = (ResolvedRepo, Vec<String>, Resolved, gix::ObjectId, u64);

/// What a file URL (`/-/blob/...`, `/-/blame/...`) names: the repo, the
/// path's segments, the resolved view and the blob's id and size; or, for
/// a directory, the redirect to its tree page. A missing path is a 404.
pub(super) async fn file_at(
    app: &Arc<WebState>,
    name: ResolvedRepo,
    rev: &str,
    path: &str,
) -> Result<Result<FileAt, Response>, AppError> {
    let (name, segments, resolved) = resolve_path(app, name, rev, path).await?;
    match resolved.node {
        Node::Blob { id, size } => Ok(Ok((name, segments, resolved, id, size))),
        Node::Tree(_) => {
            let to = format!(
                "/{name}/-/tree/{}/{}",
                rev_path(rev),
                encode_path(&segments)
            );
            Ok(Err(redirect(&to)))
        }
        Node::Missing => Err(AppError::not_found(format!(
            "There is no file {path} in {name} at {rev}."
        ))),
    }
}

/// The headers that keep a response of a repo's bytes inert on vole's
/// origin: no sniffing, and a sandbox that runs nothing.
pub(super) fn inert(headers: &mut HeaderMap) {
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
}

/// `GET /{owner}/{repo}/-/blob/{rev}/{*path}`: a file with line numbers
/// and line anchors, an image preview, or a note for binaries.
pub async fn blob(
    State(app): State<Arc<WebState>>,
    RepoAccess { repo: name, .. }: RepoAccess<Read>,
    Path((_, _, rev, path)): Path<(String, String, String, String)>,
) -> Result<Response, AppError> {
    let (name, segments, resolved, id, size) = match file_at(&app, name, &rev, &path).await? {
        Ok(file) => file,
        Err(redirect) => return Ok(redirect),
    };
    let file_name = segments.last().cloned().unwrap_or_default();
    let content = blob_content(&app, &name, id, size, &file_name).await?;
    render(BlobPage {
        blame_href: format!(
            "/{name}/-/blame/{}/{}",
            rev_path(&resolved.view.rev),
            encode_path(&segments)
        ),
        raw_href: format!(
            "/{name}/-/raw/{}/{}",
            rev_path(&resolved.view.rev),
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
/// sandbox`, everything with `nosniff`. The blob's id is the ETag
/// (`If-None-Match`, `If-Range`), ranges are served; a blob over the
/// in-process bound is streamed from `git cat-file` under a read slot,
/// at the pace of the client (cut below `--min-transfer-rate`).
pub async fn raw(
    State(app): State<Arc<WebState>>,
    RepoAccess { repo: name, .. }: RepoAccess<Read>,
    Path((_, _, rev, path)): Path<(String, String, String, String)>,
    method: axum::http::Method,
    headers: HeaderMap,
) -> Result<Response, AppError> {
    use vole_http::conditional::{not_modified, number_header, range_for};
    let segments = segments(&path)?;
    let repo_path = app.repos.path(&name);
    let incarnation = name.incarnation_id().to_string();
    let rev_for_read = rev.clone();
    let segments_for_read = segments.clone();
    let found = {
        let repo_path = repo_path.clone();
        let incarnation = incarnation.clone();
        let gix = app.gix.clone();
        blocking(move || {
            let git = read::open(&gix, &repo_path, &incarnation)?;
            let (rev, segments) = read::split_rev(&git, &rev_for_read, &segments_for_read)?;
            let Some(commit) = read::resolve(&git, &rev)? else {
                return Ok(None);
            };
            let tree = read::commit(&git, commit)?.tree;
            match read::lookup(&git, tree, &segments)? {
                Node::Blob { id, size } => Ok(Some((id, size))),
                _ => Ok(None),
            }
        })
        .await?
    };
    let (id, size) = found.ok_or_else(|| {
        AppError::not_found(format!("There is no file {path} in {name} at {rev}."))
    })?;
    let etag = HeaderValue::try_from(format!("\"{id}\"")).expect("hex is a valid header");
    let file_name = segments.last().cloned().unwrap_or_default();
    let lower = file_name.to_lowercase();

    if not_modified(&headers, &etag) {
        let mut response = StatusCode::NOT_MODIFIED.into_response();
        response.headers_mut().insert(header::ETAG, etag);
        return Ok(response);
    }
    // The bytes in memory for a small blob; for a large one, the first
    // few KiB only (what the binary rule reads), under a slot held in the
    // blocking hop.
    let small = size <= read::IN_PROCESS_BLOB;
    let verdict = app.highlighter.binary_verdict(id);
    let needs_probe = verdict.is_none() && !is_image(&lower);
    let head = if small || needs_probe {
        let limit = if small { size as usize } else { BINARY_PROBE };
        Some(read_prefix(&app, &name, id, size, limit).await?)
    } else {
        None
    };
    let probed = head.as_deref().map(is_binary);
    if let Some(binary) = probed {
        app.highlighter.remember_binary(id, binary);
    }
    // An image is served as its type without a verdict.
    let binary = verdict.or(probed).unwrap_or(true);
    let content_type = if lower.ends_with(".svg") {
        "image/svg+xml".to_string()
    } else if is_image(&lower) {
        mime_guess::from_path(&lower)
            .first_or_octet_stream()
            .to_string()
    } else if binary {
        "application/octet-stream".to_string()
    } else {
        "text/plain; charset=utf-8".to_string()
    };
    let mut response = Response::new(axum::body::Body::empty());
    let out = response.headers_mut();
    if let Ok(value) = HeaderValue::from_str(&content_type) {
        out.insert(header::CONTENT_TYPE, value);
    }
    out.insert(header::ETAG, etag.clone());
    out.insert(header::ACCEPT_RANGES, HeaderValue::from_static("bytes"));
    inert(out);
    let (start, length) = match range_for(&headers, size, &etag) {
        Ok(Some((start, end))) => {
            *response.status_mut() = StatusCode::PARTIAL_CONTENT;
            response.headers_mut().insert(
                header::CONTENT_RANGE,
                number_header(format!("bytes {start}-{end}/{size}")),
            );
            (start, end - start + 1)
        }
        Ok(None) => (0, size),
        Err(vole_http::conditional::Unsatisfiable) => {
            *response.status_mut() = StatusCode::RANGE_NOT_SATISFIABLE;
            response.headers_mut().insert(
                header::CONTENT_RANGE,
                number_header(format!("bytes */{size}")),
            );
            return Ok(response);
        }
    };
    response
        .headers_mut()
        .insert(header::CONTENT_LENGTH, HeaderValue::from(length));
    if method == axum::http::Method::HEAD {
        return Ok(response);
    }
    *response.body_mut() = match head {
        Some(bytes) if small => {
            let range = start as usize..(start + length) as usize;
            axum::body::Body::from(bytes[range].to_vec())
        }
        _ => {
            let slot = app.reads.acquire().await?;
            vole_http::stream::blob_range(
                &app.git,
                &repo_path,
                id,
                (start, length),
                slot,
                &app.config.reads,
                "raw file",
            )
            .await?
        }
    };
    Ok(response)
}

/// The first `limit` bytes of blob `id` (`size` bytes long): in-process
/// up to [`read::IN_PROCESS_BLOB`], else from a bounded `cat-file` child
/// under a read slot. The slot goes into the blocking hop, so it is held
/// while the child runs even if the client has gone (and the child is then
/// killed, by `blocking`'s guard).
async fn read_prefix(
    app: &WebState,
    name: &ResolvedRepo,
    id: gix::ObjectId,
    size: u64,
    limit: usize,
) -> Result<Vec<u8>, AppError> {
    let slot = if size > read::IN_PROCESS_BLOB {
        Some(app.reads.acquire().await?)
    } else {
        None
    };
    let (git, repo_path) = (app.git.clone(), app.repos.path(name));
    let incarnation = name.incarnation_id().to_string();
    let deadline = app.config.reads.deadline;
    let gix = app.gix.clone();
    let (bytes, _) = blocking(move || {
        let _slot = slot;
        let repo = read::open(&gix, &repo_path, &incarnation)?;
        read::blob_prefix(&git, &repo_path, &repo, id, size, limit, deadline)
    })
    .await?;
    Ok(bytes)
}

/// Bytes of a large blob read to tell text from binary (git's rule reads
/// the first 8000).
const BINARY_PROBE: usize = 8000;
