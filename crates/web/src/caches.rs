//! The web UI's caches, owned by its state ([`WebCaches`], in
//! `WebState`), each bounded in bytes by the configuration
//! (`--web-cache-size` each; docs/configuration.md)
//! and keyed by the repo's incarnation where what it holds was read from
//! the repo's objects, so a repo deleted and created again under its name
//! never sees the first one's entries; [`WebCaches::forget`] drops an
//! incarnation's entries when its repo is deleted.
//!
//! All of them are `moka`'s: bounded by weight (what an entry says it
//! weighs, [`Weigh`]), with per-entry expiry (a walk the clock cut is kept
//! a minute, then walked again), and one computation per key at a time
//! for the walks and blames (`optionally_get_with`, `try_get_with`: the
//! callers that come while it runs wait for it and share its outcome,
//! errors included; if the one computing goes away, a waiting one takes
//! over). Chosen over `quick_cache`, whose lookups are cheaper, because it
//! has neither per-entry expiry nor a shared failed outcome (its waiters
//! each run the computation again after a failure, so a storm of views
//! of a blame that times out would run it once per viewer).

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::blame::{Blame, Key as BlameKey};
use crate::last_commit::{Facts, Key as ListingKey, RETRY_CUT_WALK};
use crate::read::{CommitDetail, LogEntry};

/// Bytes an entry holds (its heap data and its fixed size).
pub trait Weigh {
    fn weight(&self) -> usize;
}

impl<T: Weigh> Weigh for Arc<T> {
    fn weight(&self) -> usize {
        T::weight(self)
    }
}

impl Weigh for String {
    fn weight(&self) -> usize {
        self.len() + std::mem::size_of::<String>()
    }
}

impl<T: Weigh> Weigh for Vec<T> {
    fn weight(&self) -> usize {
        self.iter().map(Weigh::weight).sum::<usize>() + std::mem::size_of::<Vec<T>>()
    }
}

/// A commit id weighs its 20 bytes.
impl Weigh for gix::ObjectId {
    fn weight(&self) -> usize {
        std::mem::size_of::<gix::ObjectId>()
    }
}

/// The weight moka bounds a cache by: the key's and the value's bytes.
pub fn weigh<K: Weigh, V: Weigh>(key: &K, value: &V) -> u32 {
    u32::try_from(key.weight() + value.weight()).unwrap_or(u32::MAX)
}

/// A log page: (incarnation, commit, path, page).
pub type LogKey = (String, gix::ObjectId, Vec<String>, usize);
/// A log page's entries, and whether there is a next page.
pub type LogValue = Arc<(Vec<LogEntry>, bool)>;
/// A commit's detail: (incarnation, commit).
pub type CommitKey = (String, gix::ObjectId);

/// An open pull request's merge box and commits: (incarnation, target,
/// source) -> what a test merge of the two gave.
pub type PreviewKey = (String, gix::ObjectId, gix::ObjectId);

/// What a pull request's page shows of its two tips.
pub struct PreviewParts {
    pub preview: vole_api::pulls::Preview,
    pub commits: Vec<LogEntry>,
    pub more: bool,
}

impl Weigh for PreviewParts {
    fn weight(&self) -> usize {
        let conflicts = match &self.preview.merge {
            vole_git::merge::TestMerge::Conflicts(paths) => paths.weight(),
            _ => 0,
        };
        conflicts + self.commits.weight() + std::mem::size_of::<PreviewParts>()
    }
}

impl Weigh for PreviewKey {
    fn weight(&self) -> usize {
        self.0.weight() + 2 * std::mem::size_of::<gix::ObjectId>()
    }
}

/// The caches of the pages' git reads.
pub struct WebCaches {
    /// Pull requests' merge boxes, by both tips (a push to either makes
    /// another key).
    pub previews: moka::sync::Cache<PreviewKey, Arc<PreviewParts>>,
    /// Log pages (history is immutable once named by a commit id).
    pub log: moka::sync::Cache<LogKey, LogValue>,
    /// Commit pages' details.
    pub commits: moka::sync::Cache<CommitKey, Arc<CommitDetail>>,
    /// Each listing's last commits and sizes (`last_commit`).
    pub listings: moka::future::Cache<ListingKey, Arc<Facts>>,
    /// Blames (`blame`).
    pub blames: moka::future::Cache<BlameKey, Arc<Blame>>,
    /// The directories walked at each commit, which a push warms at the
    /// new tip (`listing_warm`).
    pub viewed: crate::listing_warm::Viewed,
}

/// Keeps a walk the clock cut for [`RETRY_CUT_WALK`] after it ended (it
/// depends on the load it ran under), every other entry until evicted.
struct CutWalksExpire;

impl moka::Expiry<ListingKey, Arc<Facts>> for CutWalksExpire {
    fn expire_after_create(
        &self,
        _key: &ListingKey,
        facts: &Arc<Facts>,
        _created: Instant,
    ) -> Option<Duration> {
        facts
            .out_of_time
            .then(|| RETRY_CUT_WALK.saturating_sub(facts.made.elapsed()))
    }
}

impl std::fmt::Debug for WebCaches {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebCaches")
            .field("log_bytes", &self.log.weighted_size())
            .field("commits_bytes", &self.commits.weighted_size())
            .field("listings_bytes", &self.listings.weighted_size())
            .field("blames_bytes", &self.blames.weighted_size())
            .finish()
    }
}

impl WebCaches {
    /// Caches of `bytes` each.
    pub fn new(bytes: u64) -> WebCaches {
        WebCaches {
            previews: moka::sync::Cache::builder()
                .max_capacity(bytes)
                .weigher(weigh)
                .support_invalidation_closures()
                .build(),
            log: moka::sync::Cache::builder()
                .max_capacity(bytes)
                .weigher(weigh)
                .support_invalidation_closures()
                .build(),
            commits: moka::sync::Cache::builder()
                .max_capacity(bytes)
                .weigher(weigh)
                .support_invalidation_closures()
                .build(),
            listings: moka::future::Cache::builder()
                .max_capacity(bytes)
                .weigher(weigh)
                .expire_after(CutWalksExpire)
                .support_invalidation_closures()
                .build(),
            blames: moka::future::Cache::builder()
                .max_capacity(bytes)
                .weigher(weigh)
                .support_invalidation_closures()
                .build(),
            viewed: Default::default(),
        }
    }

    /// Drops every entry read from the repo of `incarnation` (deleted).
    pub fn forget(&self, incarnation: &str) {
        let gone = incarnation.to_string();
        // Each cache was built to take closures: these cannot fail.
        let _ = self
            .log
            .invalidate_entries_if(with_key(gone.clone(), |k: &LogKey| &k.0));
        let _ = self
            .commits
            .invalidate_entries_if(with_key(gone.clone(), |k: &CommitKey| &k.0));
        let _ = self
            .previews
            .invalidate_entries_if(with_key(gone.clone(), |k: &PreviewKey| &k.0));
        let _ = self
            .listings
            .invalidate_entries_if(with_key(gone.clone(), |k: &ListingKey| &k.0));
        let _ = self
            .blames
            .invalidate_entries_if(with_key(gone, |k: &BlameKey| &k.0));
        self.viewed.forget(incarnation);
    }
}

/// The predicate "the key's incarnation is `gone`".
fn with_key<K, V>(
    gone: String,
    incarnation: fn(&K) -> &String,
) -> impl Fn(&K, &V) -> bool + Send + Sync + 'static
where
    K: 'static,
    V: 'static,
{
    // A key may name more than the repo after its incarnation (a pull
    // request's diff: `<incarnation>\0base=<commit>`).
    move |key, _| {
        let of = incarnation(key);
        of.strip_prefix(gone.as_str())
            .is_some_and(|rest| rest.is_empty() || rest.starts_with('\0'))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(summary_bytes: usize) -> LogValue {
        let entry = LogEntry {
            id: "a".repeat(40),
            summary: "s".repeat(summary_bytes),
            author: "ann".into(),
            time: "2026-12-04T00:00:00Z".into(),
        };
        Arc::new((vec![entry], false))
    }

    fn key(incarnation: &str, page: usize) -> LogKey {
        (
            incarnation.to_string(),
            gix::ObjectId::null(gix::hash::Kind::Sha1),
            Vec::new(),
            page,
        )
    }

    #[test]
    fn a_cache_holds_at_most_its_bytes_and_no_entry_larger_than_them() {
        let bound = 64 * 1024;
        let caches = WebCaches::new(bound);
        for page in 0..2000 {
            caches.log.insert(key("inc-a", page), entry(1000));
        }
        caches.log.insert(key("inc-a", 9999), entry(200 * 1024));
        caches.log.run_pending_tasks();
        let held = caches.log.weighted_size();
        assert!(
            held <= bound,
            "holds {held} bytes over its bound of {bound}"
        );
        assert!(
            held > bound / 2,
            "anti-vacuity: it holds something ({held} bytes)"
        );
        assert!(
            caches.log.get(&key("inc-a", 9999)).is_none(),
            "an entry over the bound is kept"
        );
    }

    #[test]
    fn forgetting_an_incarnation_drops_its_entries_and_no_others() {
        let caches = WebCaches::new(1 << 20);
        let null = gix::ObjectId::null(gix::hash::Kind::Sha1);
        caches.log.insert(key("inc-a", 1), entry(10));
        caches.log.insert(key("inc-ab", 1), entry(10));
        caches.log.insert(key("inc-a\0base=x", 1), entry(10));
        caches
            .commits
            .insert(("inc-a\0base=x".into(), null), Arc::new(detail()));
        caches.forget("inc-a");
        caches.log.run_pending_tasks();
        caches.commits.run_pending_tasks();
        assert!(caches.log.get(&key("inc-a", 1)).is_none());
        assert!(
            caches.log.get(&key("inc-a\0base=x", 1)).is_none(),
            "a pull request's entry stays"
        );
        assert!(
            caches
                .commits
                .get(&("inc-a\0base=x".into(), null))
                .is_none()
        );
        assert!(
            caches.log.get(&key("inc-ab", 1)).is_some(),
            "another incarnation's entry went too"
        );
    }

    fn detail() -> CommitDetail {
        CommitDetail {
            id: String::new(),
            parents: Vec::new(),
            author: String::new(),
            time: String::new(),
            message: String::new(),
            files: Vec::new(),
            diffs: Vec::new(),
            patch_truncated: false,
            files_truncated: false,
        }
    }
}
