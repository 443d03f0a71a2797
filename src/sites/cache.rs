//! The site cache: blob bytes (and their gzip form) keyed by content, so a
//! hit never needs invalidation, bounded in bytes by evicting the least
//! recently used entries. Its own accounting ([`SiteCache::bytes`]) is what
//! the bound is checked against.

use bytes::Bytes;

use crate::server::zero_copy::footprint;
use gix::ObjectId;
use lru::LruCache;

/// What a cache entry holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Variant {
    Identity,
    Gzip,
}

/// Cached bytes of one blob in one encoding (a clone shares them).
pub type CachedBytes = Bytes;

/// The form a blob's bytes are cached in: a sealed memfd when large enough
/// (sent with `sendfile`, see `server::zero_copy`), else the heap.
pub fn keep(data: Vec<u8>) -> CachedBytes {
    crate::server::zero_copy::sealed(&data).unwrap_or_else(|| Bytes::from(data))
}

/// A byte-bounded LRU of blob contents (counted by the memory they hold:
/// whole pages for a sealed buffer).
pub struct SiteCache {
    entries: LruCache<(ObjectId, Variant), CachedBytes>,
    bytes: usize,
    limit: usize,
}

impl SiteCache {
    pub fn new(limit: usize) -> SiteCache {
        SiteCache {
            entries: LruCache::unbounded(),
            bytes: 0,
            limit,
        }
    }

    pub fn get(&mut self, id: ObjectId, variant: Variant) -> Option<CachedBytes> {
        self.entries.get(&(id, variant)).cloned()
    }

    /// Stores `data` unless it alone exceeds the bound; evicts the least
    /// recently used entries until the total fits.
    pub fn insert(&mut self, id: ObjectId, variant: Variant, data: CachedBytes) {
        let size = footprint(&data);
        if size > self.limit {
            return;
        }
        if let Some(old) = self.entries.put((id, variant), data) {
            self.bytes -= footprint(&old);
        }
        self.bytes += size;
        while self.bytes > self.limit {
            match self.entries.pop_lru() {
                Some((_, evicted)) => self.bytes -= footprint(&evicted),
                None => break,
            }
        }
    }

    /// Bytes held now (never above the limit).
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    pub fn limit(&self) -> usize {
        self.limit
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(n: u8) -> ObjectId {
        ObjectId::from_bytes_or_panic(&[n; 20])
    }

    #[test]
    fn the_byte_bound_holds_and_the_least_recently_used_go_first() {
        let mut cache = SiteCache::new(100);
        cache.insert(id(1), Variant::Identity, Bytes::from(vec![0; 40]));
        cache.insert(id(2), Variant::Identity, Bytes::from(vec![0; 40]));
        assert!(cache.get(id(1), Variant::Identity).is_some()); // 1 is now recent
        cache.insert(id(3), Variant::Identity, Bytes::from(vec![0; 40]));
        assert!(cache.bytes() <= 100, "{} bytes held", cache.bytes());
        assert!(
            cache.get(id(2), Variant::Identity).is_none(),
            "the LRU entry stayed"
        );
        assert!(cache.get(id(1), Variant::Identity).is_some());
        cache.insert(id(4), Variant::Identity, Bytes::from(vec![0; 101]));
        assert!(
            cache.get(id(4), Variant::Identity).is_none(),
            "an entry over the bound was kept"
        );
        assert_eq!(cache.bytes(), 80);
    }
}
