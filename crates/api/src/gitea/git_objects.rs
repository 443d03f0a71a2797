//! Git's objects at Gitea's paths, the links other objects carry: a blob
//! by its id (`git/blobs/{sha}`, its bytes in base64 up to the contents'
//! bound) and a tree (`git/trees/{sha}`, of a tree id or of what a
//! revision names; `recursive` walks it, at most [`MAX_WALKED`] entries,
//! paged). Read in-process under a read slot.

use std::collections::HashMap;
use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::response::{IntoResponse, Response};
use base64::Engine;
use serde::Serialize;

use super::contents::{MAX_INLINE_BYTES, read_error, resolve};
use super::issues::shaped_reading;
use super::objects::Base;
use crate::ApiState;
use vole_http::repo_access::Read;
use vole_http::{AppError, RepoAccess};

/// The most entries a recursive tree walks; past it, `truncated`.
pub const MAX_WALKED: usize = 100_000;

/// The most bytes of paths a walk keeps (a deep tree's paths repeat its
/// prefixes); past it, `truncated`.
pub const MAX_WALKED_BYTES: usize = 16 * 1024 * 1024;

/// Entries a tree page holds when the client does not say, and at most.
pub const TREE_PER_PAGE: usize = 1000;

/// Gitea's `GitBlobResponse`.
#[derive(Debug, Serialize)]
pub struct GitBlob {
    /// Base64, `null` past the contents' inline bound (the raw endpoint
    /// streams it).
    pub content: Option<String>,
    pub encoding: Option<&'static str>,
    pub url: String,
    pub sha: String,
    pub size: u64,
}

/// Gitea's `GitEntry`.
#[derive(Debug, Serialize)]
pub struct GitEntry {
    pub path: String,
    pub mode: String,
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub size: u64,
    pub sha: String,
    pub url: String,
}

/// Gitea's `GitTreeResponse`.
#[derive(Debug, Serialize)]
pub struct GitTree {
    pub sha: String,
    pub url: String,
    pub tree: Vec<GitEntry>,
    pub truncated: bool,
    pub page: usize,
    pub total_count: usize,
}

fn object_id(text: &str) -> Result<gix::ObjectId, AppError> {
    gix::ObjectId::from_hex(text.as_bytes())
        .map_err(|_| AppError::not_found(format!("{text:?} is not an object id")))
}

/// `GET /repos/{o}/{r}/git/blobs/{sha}`.
pub async fn blob(
    State(app): State<Arc<ApiState>>,
    RepoAccess {
        repo, principal, ..
    }: RepoAccess<Read>,
    base: Base,
    Path((_, _, sha)): Path<(String, String, String)>,
) -> Result<Response, AppError> {
    let id = object_id(&sha)?;
    let shown = shaped_reading(&app, base, principal, move |s| {
        let git = vole_git::open_gix(&s.app.repos.path(&repo)).map_err(read_error)?;
        let header = git
            .find_header(id)
            .map_err(|_| AppError::not_found(format!("{repo} has no blob {id}")))?;
        if header.kind() != gix::object::Kind::Blob {
            return Err(AppError::not_found(format!("{id} is no blob of {repo}")));
        }
        let size = header.size();
        let content = (size <= MAX_INLINE_BYTES)
            .then(|| git.find_blob(id).map(|mut b| b.take_data()))
            .transpose()
            .map_err(read_error)?
            .map(|bytes| base64::engine::general_purpose::STANDARD.encode(bytes));
        Ok(GitBlob {
            encoding: content.as_ref().map(|_| "base64"),
            content,
            url: s.base.api(&format!("repos/{repo}/git/blobs/{id}")),
            sha: id.to_string(),
            size,
        })
    })
    .await?;
    Ok(Json(shown).into_response())
}

/// `GET /repos/{o}/{r}/git/trees/{sha}?recursive=&page=&per_page=`.
pub async fn tree(
    State(app): State<Arc<ApiState>>,
    RepoAccess {
        repo, principal, ..
    }: RepoAccess<Read>,
    base: Base,
    Path((_, _, sha)): Path<(String, String, String)>,
    Query(query): Query<HashMap<String, String>>,
) -> Result<Response, AppError> {
    let number = |key: &str, default: usize, most: usize| -> usize {
        query
            .get(key)
            .and_then(|v| v.trim().parse::<usize>().ok())
            .filter(|n| *n > 0)
            .map_or(default, |n| n.min(most))
    };
    let recursive = query
        .get("recursive")
        .is_some_and(|v| v == "true" || v == "1");
    let (page, per_page) = (
        number("page", 1, 10_000),
        number("per_page", TREE_PER_PAGE, TREE_PER_PAGE),
    );
    let shown = shaped_reading(&app, base, principal, move |s| {
        let git = vole_git::open_gix(&s.app.repos.path(&repo)).map_err(read_error)?;
        // A tree's id, or what a revision (a commit's id among them)
        // names: its commit's tree.
        let tree_id = match gix::ObjectId::from_hex(sha.as_bytes()) {
            Ok(id)
                if git
                    .find_header(id)
                    .is_ok_and(|h| h.kind() == gix::object::Kind::Tree) =>
            {
                id
            }
            _ => {
                let commit = resolve(&git, &sha)?.ok_or_else(|| {
                    AppError::not_found(format!("{sha:?} names no tree of {repo}"))
                })?;
                git.find_commit(commit)
                    .map_err(read_error)?
                    .tree_id()
                    .map_err(read_error)?
                    .detach()
            }
        };
        let (walked, truncated) = walk(&git, tree_id, recursive)?;
        let total = walked.len();
        let api =
            |kind: &str, id: &gix::ObjectId| s.base.api(&format!("repos/{repo}/git/{kind}/{id}"));
        let tree = walked
            .into_iter()
            .skip((page - 1).saturating_mul(per_page))
            .take(per_page)
            .map(|(path, mode, id)| {
                let (kind, size) = if mode.is_tree() {
                    ("tree", 0)
                } else if mode.is_commit() {
                    ("commit", 0)
                } else {
                    ("blob", git.find_header(id).map(|h| h.size()).unwrap_or(0))
                };
                GitEntry {
                    path,
                    mode: format!("{:06o}", mode.value()),
                    kind,
                    size,
                    sha: id.to_string(),
                    url: api(if kind == "tree" { "trees" } else { "blobs" }, &id),
                }
            })
            .collect();
        Ok(GitTree {
            sha: tree_id.to_string(),
            url: api("trees", &tree_id),
            tree,
            truncated,
            page,
            total_count: total,
        })
    })
    .await?;
    Ok(Json(shown).into_response())
}

type Walked = Vec<(String, gix::objs::tree::EntryMode, gix::ObjectId)>;

/// The entries of `tree` (and, `recursive`, of every tree below it, each
/// after its tree), at most [`MAX_WALKED`] and [`MAX_WALKED_BYTES`] of
/// paths; and whether some were left.
fn walk(
    git: &gix::Repository,
    tree: gix::ObjectId,
    recursive: bool,
) -> Result<(Walked, bool), AppError> {
    let mut out = Vec::new();
    let mut bytes = 0;
    let mut todo = vec![(String::new(), tree)];
    while let Some((prefix, id)) = todo.pop() {
        let tree = git.find_tree(id).map_err(read_error)?;
        let decoded = tree.decode().map_err(read_error)?;
        let mut below = Vec::new();
        for entry in &decoded.entries {
            let path = format!("{prefix}{}", String::from_utf8_lossy(entry.filename));
            bytes += path.len();
            if out.len() >= MAX_WALKED || bytes > MAX_WALKED_BYTES {
                return Ok((out, true));
            }
            if recursive && entry.mode.is_tree() {
                below.push((format!("{path}/"), entry.oid.to_owned()));
            }
            out.push((path, entry.mode, entry.oid.to_owned()));
        }
        // Depth first, in the tree's order.
        todo.extend(below.into_iter().rev());
    }
    Ok((out, false))
}
