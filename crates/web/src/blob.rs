//! The blob and raw views: a file's text (highlighted, cached by blob
//! id) or its being binary or an image, and the raw bytes served inert,
//! with ranges and `If-None-Match`.

use super::browse::View;
use super::resolve::file_at;
use super::*;
use axum::extract::{Path, State};
use vole_access::ResolvedRepo;

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
pub(super) const MAX_SHOWN_LINES: usize = 10_000;

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
    let found = blob_at(&app, &name, &rev, &segments).await?;
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
    let content_type = raw_content_type(&lower, binary);
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

/// The blob at `rev:segments`, if that names one (`None`: no such
/// revision, or no file there).
pub(super) async fn blob_at(
    app: &Arc<WebState>,
    name: &ResolvedRepo,
    rev: &str,
    segments: &[String],
) -> Result<Option<(gix::ObjectId, u64)>, AppError> {
    let repo_path = app.repos.path(name);
    let incarnation = name.incarnation_id().to_string();
    let (rev, segments) = (rev.to_string(), segments.to_vec());
    let gix = app.gix.clone();
    blocking(move || {
        let git = read::open(&gix, &repo_path, &incarnation)?;
        let (rev, segments) = read::split_rev(&git, &rev, &segments)?;
        let Some(commit) = read::resolve(&git, &rev)? else {
            return Ok(None);
        };
        let tree = read::commit(&git, commit)?.tree;
        match read::lookup(&git, tree, &segments)? {
            Node::Blob { id, size } => Ok(Some((id, size))),
            _ => Ok(None),
        }
    })
    .await
}

/// The type a raw file is served as: an image as its type (SVG too: the
/// response is inert, see [`inert`]), text as plain text, anything
/// binary as bytes.
pub(super) fn raw_content_type(lower_name: &str, binary: bool) -> String {
    if lower_name.ends_with(".svg") {
        "image/svg+xml".to_string()
    } else if is_image(lower_name) {
        mime_guess::from_path(lower_name)
            .first_or_octet_stream()
            .to_string()
    } else if binary {
        "application/octet-stream".to_string()
    } else {
        "text/plain; charset=utf-8".to_string()
    }
}

/// The first `limit` bytes of blob `id` (`size` bytes long): in-process
/// up to [`read::IN_PROCESS_BLOB`], else from a bounded `cat-file` child
/// under a read slot. The slot goes into the blocking hop, so it is held
/// while the child runs even if the client has gone (and the child is then
/// killed, by `blocking`'s guard).
pub(super) async fn read_prefix(
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
pub(super) const BINARY_PROBE: usize = 8000;
