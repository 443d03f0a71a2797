//! Each listed entry's size and last commit, from one bounded walk of
//! history per (commit, directory) under a read slot, one walk per key at
//! a time (`caches::WebCaches::listings`); drawn without them when no
//! slot frees in time.

use super::browse::{Last, MAX_LISTED};
use super::resolve::Resolved;
use super::*;
use vole_access::ResolvedRepo;

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
            walk_listing(
                app,
                name,
                (resolved.commit, resolved.path.clone()),
                shown,
                full_bounds(app),
            ),
        )
        .await;
    let Some(facts) = walked else {
        return;
    };
    for (index, entry) in resolved.view.entries.iter_mut().enumerate() {
        if let Some(Some(size)) = facts.sizes.get(index) {
            // For people: "512 B", "1.2 KiB", "3.4 MiB".
            entry.size = bytesize::ByteSize::b(*size).display().iec().to_string();
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
pub(super) async fn walk_listing(
    app: &Arc<WebState>,
    name: &ResolvedRepo,
    (commit, path): (gix::ObjectId, Vec<String>),
    shown: Vec<read::TreeEntry>,
    bounds: last_commit::Bounds,
) -> Option<Arc<last_commit::Facts>> {
    let slot = app.reads.acquire_within(LISTING_SLOT_WAIT).await?;
    let repo_path = app.repos.path(name);
    let incarnation = name.incarnation_id().to_string();
    let facts_path = path.clone();
    let gix = app.gix.clone();
    let (listings, runtime) = (
        app.caches.listings.clone(),
        tokio::runtime::Handle::current(),
    );
    let walked = blocking(move || {
        let _slot = slot;
        let mut repo = read::open(&gix, &repo_path, &incarnation)?;
        // Each version of the directory is read twice, as a commit's and
        // then as its parent's, one right after the other: a small cache
        // of decoded objects on this walk's own handle saves the second.
        repo.object_cache_size(last_commit::OBJECT_CACHE_BYTES);
        // The index the walk stops at: this directory's listings already
        // walked (a view before a push, or the warming after it).
        // One key, its commit changed for each lookup.
        let key = std::cell::RefCell::new((incarnation.clone(), commit, path.clone()));
        let known = |at: gix::ObjectId| {
            let mut key = key.borrow_mut();
            key.1 = at;
            runtime.block_on(listings.get(&*key))
        };
        last_commit::walk(&repo, commit, &path, &shown, bounds, &known).map(Arc::new)
    })
    .await;
    match walked {
        Ok(facts) => {
            app.caches
                .viewed
                .note(name.incarnation_id(), commit, &facts_path);
            Some(facts)
        }
        Err(e) => {
            tracing::warn!(repo = %name, error = ?e, "the listing's last commits could not be found; drawn without them");
            None
        }
    }
}

/// A view's walk: as far as the bounds of a walk go.
pub(super) fn full_bounds(app: &WebState) -> last_commit::Bounds {
    last_commit::Bounds {
        commits: last_commit::MAX_WALKED,
        time: last_commit::WALK_BUDGET.min(app.config.reads.deadline),
    }
}

/// How long a listing waits for a read slot for its last-commit walk.
pub(super) const LISTING_SLOT_WAIT: std::time::Duration = std::time::Duration::from_millis(250);

#[cfg(test)]
mod tests {
    #[test]
    fn sizes_for_people_are_bytes_then_binary_units_with_one_decimal() {
        let size = |n: u64| bytesize::ByteSize::b(n).display().iec().to_string();
        assert_eq!(size(512), "512 B");
        assert_eq!(size(1536), "1.5 KiB");
        assert_eq!(size(3 << 20), "3.0 MiB");
        assert_eq!(size(5 << 30), "5.0 GiB");
    }
}
