//! Archive downloads (`.tar.gz`, `.zip`) streamed from `git archive`
//! under a read slot and the stream's bounds.

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use vole_http::RepoAccess;
use vole_http::repo_access::Read;

use crate::{AppError, WebState, blocking, read};

/// `GET /{owner}/{repo}/-/archive/{rev}.tar.gz` or `.zip`: streamed from
/// `git archive` as it is produced, under a read slot, cut at
/// `--archive-deadline` or when the client reads slower than
/// `--min-transfer-rate` (the child is killed then, and when the client
/// goes away).
pub async fn archive(
    State(app): State<Arc<WebState>>,
    RepoAccess { repo: name, .. }: RepoAccess<Read>,
    Path((_, _, file)): Path<(String, String, String)>,
) -> Result<Response, AppError> {
    let (rev, format, content_type) = if let Some(rev) = file.strip_suffix(".tar.gz") {
        (rev.to_string(), "tar.gz", "application/gzip")
    } else if let Some(rev) = file.strip_suffix(".zip") {
        (rev.to_string(), "zip", "application/zip")
    } else {
        return Err(AppError::not_found(
            "Archives are .tar.gz or .zip, e.g. main.tar.gz.",
        ));
    };
    let repo_path = app.repos.path(&name);
    let incarnation = name.incarnation_id().to_string();
    let rev_for_read = rev.clone();
    let gix = app.gix.clone();
    let commit = blocking(move || {
        read::resolve(&read::open(&gix, &repo_path, &incarnation)?, &rev_for_read)
    })
    .await?
    .ok_or_else(|| AppError::not_found(format!("{name} has no branch, tag or commit {rev:?}.")))?;
    let prefix = format!("{}-{}/", name.name(), sanitize(&rev));
    // The slot is held until the archive is sent (or cut).
    let slot = app.reads.acquire().await?;
    let output = app
        .git
        .spawn_reader(
            &app.repos.path(&name),
            &[
                "archive",
                &format!("--format={format}"),
                &format!("--prefix={prefix}"),
                &commit.to_string(),
            ],
        )
        .map_err(|e| AppError::internal("cannot run git archive", e))?;
    let limits = &app.config.reads;
    let bounds = vole_http::stream::StreamBounds::of(limits, limits.archive_deadline);
    let mut response =
        vole_http::stream::pumped(output, Some(slot), bounds, "archive").into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    if let Ok(value) = HeaderValue::from_str(&format!(
        "attachment; filename=\"{}-{}.{format}\"",
        name.name(),
        sanitize(&rev)
    )) {
        headers.insert(header::CONTENT_DISPOSITION, value);
    }
    Ok(response)
}

/// A revision as it may appear in a file name.
fn sanitize(rev: &str) -> String {
    rev.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "._-".contains(c) {
                c
            } else {
                '-'
            }
        })
        .collect()
}
