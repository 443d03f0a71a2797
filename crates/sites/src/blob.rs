//! A blob too large to cache, streamed from a `git cat-file` child as the
//! client takes it, under a read slot, cut when the client reads slower
//! than `--min-transfer-rate` or past the deadline
//! (`vole_http::stream::blob_range`, shared with the raw view).

use super::*;

/// The body of `len` bytes of blob `id` from byte `skip`.
pub(super) async fn stream(
    app: &SitesState,
    repo: &std::path::Path,
    id: ObjectId,
    skip: u64,
    len: u64,
) -> Result<Body, AppError> {
    let slot = app.reads.acquire().await?;
    vole_http::stream::blob_range(
        &app.git,
        repo,
        id,
        (skip, len),
        slot,
        &app.read_limits,
        "site file",
    )
    .await
}
