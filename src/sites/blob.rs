//! A blob too large to cache, streamed from a `git cat-file` child as the
//! client takes it, under a read slot, cut when the client reads slower
//! than `--min-transfer-rate` or past the deadline (`crate::http::stream`).

use super::*;
use tokio::io::AsyncReadExt;

/// The body of `len` bytes of blob `id` from byte `skip`: the bytes before
/// `skip` are read and dropped before the response starts (`cat-file` has
/// no offset), so a blob shorter than that is a 500, not a short body. A
/// blob that ends before `skip + len` ends the body short of its
/// `Content-Length`, and the connection is closed.
pub(super) async fn stream(
    app: &SitesState,
    repo: &std::path::Path,
    id: ObjectId,
    skip: u64,
    len: u64,
) -> Result<Body, AppError> {
    let slot = app.reads.acquire().await?;
    let mut output = app
        .git
        .spawn_reader(repo, &["cat-file", "blob", &id.to_string()])
        .map_err(|e| AppError::internal("cannot start git cat-file", e))?;
    let skipped = tokio::time::timeout(
        app.read_limits.deadline,
        tokio::io::copy(&mut (&mut output).take(skip), &mut tokio::io::sink()),
    )
    .await
    .map_err(|_| AppError::busy("skipping to the range took too long; retry later", 5))?
    .map_err(|e| AppError::internal("reading a blob from git cat-file failed", e))?;
    if skipped < skip {
        return Err(AppError::internal(
            "git cat-file ended early",
            format!("blob {id}: {skipped} of the {skip} bytes before the range"),
        ));
    }
    let limits = &app.read_limits;
    let bounds = crate::http::stream::StreamBounds {
        deadline: limits.deadline.max(limits.archive_deadline),
        min_rate: limits.min_rate,
        window: limits.rate_window,
    };
    Ok(crate::http::stream::pumped(
        output.take(len),
        Some(slot),
        bounds,
        "site file",
    ))
}
