//! A repo's files at Gitea's paths: `GET .../contents/{path}?ref=` (a
//! file as Gitea's `ContentsResponse`, its bytes in base64 up to
//! [`MAX_INLINE_BYTES`]; a directory as the list of its entries) and
//! `GET .../raw/{path}?ref=` (the bytes; past [`MAX_INLINE_BYTES`] a
//! redirect to the web's raw view, which streams them under a read
//! slot). Read with gix (replacement refs not followed), entry by entry,
//! so a path cannot leave the tree it names.

use std::collections::HashMap;
use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use base64::Engine;
use serde::Serialize;

use super::issues::shaped_reading;
use super::objects::Base;
use super::shape::Shaper;
use crate::ApiState;
use vole_access::ResolvedRepo;
use vole_http::repo_access::Read;
use vole_http::{AppError, RepoAccess};

/// The most bytes of a file an answer carries (base64 in `content`, or
/// the body of `raw`); a larger file's `content` is null and its `raw` a
/// redirect to the web's raw view.
pub const MAX_INLINE_BYTES: u64 = 1024 * 1024;

/// The most entries of a directory listed.
pub const MAX_ENTRIES: usize = 10_000;

/// Gitea's `FileLinksResponse`.
#[derive(Debug, Serialize)]
pub struct FileLinks {
    #[serde(rename = "self")]
    pub this: String,
    pub git: String,
    pub html: String,
}

/// Gitea's `ContentsResponse`.
#[derive(Debug, Serialize)]
pub struct ContentsResponse {
    pub name: String,
    pub path: String,
    pub sha: String,
    /// vole does not compute the last commit of a path here: empty.
    pub last_commit_sha: String,
    /// `file`, `dir`, `symlink` or `submodule`.
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub size: u64,
    pub encoding: Option<&'static str>,
    pub content: Option<String>,
    /// A symlink's target.
    pub target: Option<String>,
    pub url: String,
    pub html_url: String,
    pub git_url: String,
    pub download_url: Option<String>,
    pub submodule_git_url: Option<String>,
    #[serde(rename = "_links")]
    pub links: FileLinks,
}

pub(crate) fn read_error(e: impl std::fmt::Display) -> AppError {
    AppError::internal("the repository could not be read", e.to_string())
}

/// The commit `rev` names (a branch, a tag, or a full commit id); the
/// default branch's when it is empty.
pub(crate) fn resolve(
    repo: &gix::Repository,
    rev: &str,
) -> Result<Option<gix::ObjectId>, AppError> {
    let rev = if rev.is_empty() {
        match repo.head_name().map_err(read_error)? {
            Some(name) => name.shorten().to_string(),
            None => return Ok(None),
        }
    } else {
        rev.to_string()
    };
    vole_git::revision::resolve(repo, &rev).map_err(read_error)
}

/// What a path names in a tree.
enum Found {
    Dir(gix::ObjectId),
    Entry(gix::objs::tree::EntryMode, gix::ObjectId),
    Missing,
}

/// Follows `segments` from `tree`, entry by entry.
fn find(repo: &gix::Repository, tree: gix::ObjectId, segments: &[&str]) -> Result<Found, AppError> {
    let mut current = Found::Dir(tree);
    for segment in segments {
        let Found::Dir(id) = current else {
            return Ok(Found::Missing);
        };
        let tree = repo.find_tree(id).map_err(read_error)?;
        let decoded = tree.decode().map_err(read_error)?;
        let Some(entry) = decoded
            .entries
            .iter()
            .find(|e| e.filename == segment.as_bytes())
        else {
            return Ok(Found::Missing);
        };
        current = if entry.mode.is_tree() {
            Found::Dir(entry.oid.to_owned())
        } else {
            Found::Entry(entry.mode, entry.oid.to_owned())
        };
    }
    Ok(current)
}

/// One entry as Gitea's `ContentsResponse` (`content` filled only when
/// `with_content` and the file is small enough).
fn describe(
    s: &Shaper<'_>,
    (repo, git): (&ResolvedRepo, &gix::Repository),
    (rev, path): (&str, &str),
    (mode, id): (Option<gix::objs::tree::EntryMode>, gix::ObjectId),
    with_content: bool,
) -> Result<ContentsResponse, AppError> {
    let full = repo.to_string();
    let name = path.rsplit('/').next().unwrap_or(path).to_string();
    let kind = match mode {
        None => "dir",
        Some(m) if m.is_link() => "symlink",
        Some(m) if m.is_commit() => "submodule",
        Some(_) => "file",
    };
    let size = if kind == "file" || kind == "symlink" {
        git.find_header(id).map_err(read_error)?.size()
    } else {
        0
    };
    let bytes = |limit: u64| -> Result<Option<Vec<u8>>, AppError> {
        if size > limit {
            return Ok(None);
        }
        Ok(Some(git.find_blob(id).map_err(read_error)?.take_data()))
    };
    let content = if with_content && kind == "file" {
        bytes(MAX_INLINE_BYTES)?.map(|b| base64::engine::general_purpose::STANDARD.encode(b))
    } else {
        None
    };
    let target = if kind == "symlink" {
        bytes(4096)?.map(|b| String::from_utf8_lossy(&b).into_owned())
    } else {
        None
    };
    let query = format!("?ref={}", percent(rev));
    let (rev_part, path_part) = (percent(rev), percent_path(path));
    let url = s
        .base
        .api(&format!("repos/{full}/contents/{path_part}{query}"));
    let html_url = s.base.html(&format!(
        "{full}/-/{}/{rev_part}/{path_part}",
        if kind == "dir" { "tree" } else { "blob" }
    ));
    let git_url = s.base.api(&format!(
        "repos/{full}/git/{}/{id}",
        if kind == "dir" { "trees" } else { "blobs" }
    ));
    Ok(ContentsResponse {
        name,
        path: path.to_string(),
        sha: id.to_string(),
        last_commit_sha: String::new(),
        kind,
        size,
        encoding: content.as_ref().map(|_| "base64"),
        content,
        target,
        download_url: (kind == "file")
            .then(|| s.base.html(&format!("{full}/-/raw/{rev_part}/{path_part}"))),
        submodule_git_url: None,
        links: FileLinks {
            this: url.clone(),
            git: git_url.clone(),
            html: html_url.clone(),
        },
        url,
        html_url,
        git_url,
    })
}

/// What a URL's path segment keeps as it is.
const SEGMENT: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// `text` as one segment of a URL's path (or a query's value).
fn percent(text: &str) -> String {
    percent_encoding::utf8_percent_encode(text, SEGMENT).to_string()
}

/// A path in a repo as a URL's path: each segment encoded, `/` kept.
fn percent_path(path: &str) -> String {
    path.split('/').map(percent).collect::<Vec<_>>().join("/")
}

/// The path's segments: no empty one, no `.` or `..`.
fn segments(path: &str) -> Result<Vec<&str>, AppError> {
    let path = path.trim_matches('/');
    if path.is_empty() {
        return Ok(Vec::new());
    }
    let segments: Vec<&str> = path.split('/').collect();
    if segments
        .iter()
        .any(|s| s.is_empty() || *s == "." || *s == "..")
    {
        return Err(AppError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            format!("{path:?} is not a path in a repository"),
        ));
    }
    Ok(segments)
}

/// What `path` names at `rev`, as Gitea's contents answer it.
fn contents_of(
    s: &Shaper<'_>,
    repo: &ResolvedRepo,
    rev: &str,
    path: &str,
) -> Result<serde_json::Value, AppError> {
    let parts = segments(path)?;
    let path = parts.join("/");
    let git = vole_git::open_gix(&s.app.repos.path(repo)).map_err(read_error)?;
    let missing = || AppError::not_found(format!("{path:?} is not in {repo} at {rev:?}"));
    let commit = resolve(&git, rev)?.ok_or_else(missing)?;
    let shown_rev = if rev.is_empty() {
        git.head_name()
            .ok()
            .flatten()
            .map(|n| n.shorten().to_string())
            .unwrap_or_default()
    } else {
        rev.to_string()
    };
    let tree = git
        .find_commit(commit)
        .map_err(read_error)?
        .tree_id()
        .map_err(read_error)?
        .detach();
    let at = (shown_rev.as_str(), path.as_str());
    match find(&git, tree, &parts)? {
        Found::Missing => Err(missing()),
        Found::Entry(mode, id) => {
            let file = describe(s, (repo, &git), at, (Some(mode), id), true)?;
            serde_json::to_value(file).map_err(read_error)
        }
        Found::Dir(id) => {
            let tree = git.find_tree(id).map_err(read_error)?;
            let decoded = tree.decode().map_err(read_error)?;
            let mut listed = Vec::new();
            for entry in decoded.entries.iter().take(MAX_ENTRIES) {
                let name = String::from_utf8_lossy(entry.filename).into_owned();
                let entry_path = if path.is_empty() {
                    name
                } else {
                    format!("{path}/{name}")
                };
                let mode = (!entry.mode.is_tree()).then_some(entry.mode);
                listed.push(describe(
                    s,
                    (repo, &git),
                    (&shown_rev, &entry_path),
                    (mode, entry.oid.to_owned()),
                    false,
                )?);
            }
            serde_json::to_value(listed).map_err(read_error)
        }
    }
}

/// `GET .../contents` and `GET .../contents/{*path}` (`?ref=`: a branch,
/// a tag or a commit; the default branch without one).
pub async fn contents(
    State(app): State<Arc<ApiState>>,
    RepoAccess {
        repo, principal, ..
    }: RepoAccess<Read>,
    base: Base,
    path: Option<Path<HashMap<String, String>>>,
    Query(query): Query<HashMap<String, String>>,
) -> Result<Response, AppError> {
    let path = path
        .and_then(|Path(p)| p.get("path").cloned())
        .unwrap_or_default();
    let rev = query.get("ref").cloned().unwrap_or_default();
    let answer = shaped_reading(&app, base, principal, move |s| {
        contents_of(s, &repo, &rev, &path)
    })
    .await?;
    Ok(Json(answer).into_response())
}

/// `GET .../raw/{*path}?ref=`: a file's bytes, as an octet stream that no
/// browser runs; past [`MAX_INLINE_BYTES`], a redirect to the web's raw
/// view of the same file.
pub async fn raw(
    State(app): State<Arc<ApiState>>,
    RepoAccess {
        repo, principal, ..
    }: RepoAccess<Read>,
    base: Base,
    Path(params): Path<HashMap<String, String>>,
    Query(query): Query<HashMap<String, String>>,
) -> Result<Response, AppError> {
    let path = params.get("path").cloned().unwrap_or_default();
    let rev = query.get("ref").cloned().unwrap_or_default();
    let origin = base.0.clone();
    let found = shaped_reading(&app, base, principal, move |s| {
        let file = contents_of(s, &repo, &rev, &path)?;
        if file["type"] != "file" {
            return Err(AppError::not_found(format!("{path:?} is not a file")));
        }
        Ok(match file["content"].as_str() {
            Some(content) => Ok(base64::engine::general_purpose::STANDARD
                .decode(content)
                .map_err(read_error)?),
            None => Err(file["download_url"]
                .as_str()
                .unwrap_or_default()
                .to_string()),
        })
    })
    .await?;
    Ok(match found {
        Ok(bytes) => {
            let mut response = bytes.into_response();
            let headers = response.headers_mut();
            headers.insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/octet-stream"),
            );
            headers.insert(
                header::X_CONTENT_TYPE_OPTIONS,
                HeaderValue::from_static("nosniff"),
            );
            headers.insert(
                header::CONTENT_SECURITY_POLICY,
                HeaderValue::from_static("sandbox"),
            );
            response
        }
        Err(location) => {
            // Relative: the client stays on the scheme and host it asked
            // (an absolute http:// one would carry its credentials out of
            // a TLS proxy).
            let relative = location.strip_prefix(&origin).unwrap_or(&location);
            let mut response = StatusCode::TEMPORARY_REDIRECT.into_response();
            let value = HeaderValue::from_str(relative)
                .map_err(|_| AppError::internal("a raw file's location", relative))?;
            response.headers_mut().insert(header::LOCATION, value);
            response
        }
    })
}
