//! The site caches: blob bytes (and their gzip form) keyed by content, so a
//! hit never needs invalidation, bounded in bytes; and the generic
//! [`ClockCache`] under both it and the warm-request map. The byte cache's
//! own accounting ([`SiteCache::bytes`]) is what its bound is checked
//! against.

use std::borrow::Borrow;
use std::collections::{HashMap, VecDeque};
use std::hash::Hash;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use bytes::Bytes;
use gix::ObjectId;

use vole_http::zero_copy::footprint;

/// What a cache entry holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Variant {
    Identity,
    Gzip,
}

/// Cached bytes of one blob in one encoding (a clone shares them).
pub type CachedBytes = Bytes;

/// The form a blob's bytes are cached in: a sealed memfd when large enough
/// (sent with `sendfile`, see `http::zero_copy`), else the heap.
pub fn keep(data: Vec<u8>) -> CachedBytes {
    vole_http::zero_copy::sealed(&data).unwrap_or_else(|| Bytes::from(data))
}

/// A cost-bounded cache whose lookups take `&self`, so it can sit behind a
/// read lock and hits on two threads never wait for each other (an LRU
/// reorders on every hit and needs an exclusive lock). Eviction is CLOCK
/// (second chance): entries leave in insertion order, except that one read
/// since the hand last passed goes round once more.
///
/// Written here because the crates at hand (`lru`, `clru`) take `&mut self`
/// on a hit.
#[derive(Debug)]
pub struct ClockCache<K, V> {
    entries: HashMap<K, (V, usize, AtomicBool)>,
    ring: VecDeque<K>,
    cost: usize,
    limit: usize,
    /// Entries evicted so far.
    evicted: u64,
}

impl<K: Hash + Eq + Clone, V> ClockCache<K, V> {
    pub fn new(limit: usize) -> ClockCache<K, V> {
        ClockCache {
            entries: HashMap::new(),
            ring: VecDeque::new(),
            cost: 0,
            limit,
            evicted: 0,
        }
    }

    /// The entry for `key`, marked as used.
    pub fn get<Q>(&self, key: &Q) -> Option<&V>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let (value, _, used) = self.entries.get(key)?;
        if !used.load(Ordering::Relaxed) {
            used.store(true, Ordering::Relaxed);
        }
        Some(value)
    }

    /// Stores `value` at `cost` unless that alone exceeds the bound, then
    /// evicts until the total fits.
    pub fn insert(&mut self, key: K, value: V, cost: usize) {
        if cost > self.limit {
            return;
        }
        match self
            .entries
            .insert(key.clone(), (value, cost, AtomicBool::new(false)))
        {
            Some((_, old_cost, _)) => self.cost -= old_cost,
            None => self.ring.push_back(key),
        }
        self.cost += cost;
        while self.cost > self.limit {
            let Some(key) = self.ring.pop_front() else {
                break;
            };
            let Some((_, cost, used)) = self.entries.get(&key) else {
                continue;
            };
            if used.swap(false, Ordering::Relaxed) {
                self.ring.push_back(key);
            } else {
                self.cost -= cost;
                self.entries.remove(&key);
                self.evicted += 1;
            }
        }
    }

    /// The summed cost of what is held (never above the limit).
    pub fn cost(&self) -> usize {
        self.cost
    }

    pub fn limit(&self) -> usize {
        self.limit
    }

    /// Entries evicted since it was made.
    pub fn evicted(&self) -> u64 {
        self.evicted
    }
}

/// Blob contents bounded in bytes (counted by the memory they hold: whole
/// pages for a sealed buffer).
pub struct SiteCache {
    entries: ClockCache<(ObjectId, Variant), CachedBytes>,
    hits: AtomicU64,
    misses: AtomicU64,
}

/// What [`SiteCache::counts`] reports (for the stats and the metrics).
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct SiteCacheCounts {
    pub hits: u64,
    pub misses: u64,
    pub evictions: u64,
    pub bytes: usize,
    pub limit: usize,
}

impl SiteCache {
    pub fn new(limit: usize) -> SiteCache {
        SiteCache {
            entries: ClockCache::new(limit),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
        }
    }

    pub fn get(&self, id: ObjectId, variant: Variant) -> Option<CachedBytes> {
        let found = self.entries.get(&(id, variant)).cloned();
        let counter = if found.is_some() {
            &self.hits
        } else {
            &self.misses
        };
        counter.fetch_add(1, Ordering::Relaxed);
        found
    }

    /// [`SiteCache::get`] without counting a hit or miss: for a second
    /// look within the same request.
    pub fn peek(&self, id: ObjectId, variant: Variant) -> Option<CachedBytes> {
        self.entries.get(&(id, variant)).cloned()
    }

    pub fn counts(&self) -> SiteCacheCounts {
        SiteCacheCounts {
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
            evictions: self.entries.evicted(),
            bytes: self.bytes(),
            limit: self.limit(),
        }
    }

    /// Stores `data` unless it alone exceeds the bound; evicts until the
    /// total fits.
    pub fn insert(&mut self, id: ObjectId, variant: Variant, data: CachedBytes) {
        let size = footprint(&data);
        self.entries.insert((id, variant), data, size);
    }

    /// Bytes held now (never above the limit).
    pub fn bytes(&self) -> usize {
        self.entries.cost()
    }

    pub fn limit(&self) -> usize {
        self.entries.limit()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(n: u8) -> ObjectId {
        ObjectId::from_bytes_or_panic(&[n; 20])
    }

    #[test]
    fn the_byte_bound_holds_and_entries_read_since_the_last_sweep_stay() {
        let mut cache = SiteCache::new(100);
        cache.insert(id(1), Variant::Identity, Bytes::from(vec![0; 40]));
        cache.insert(id(2), Variant::Identity, Bytes::from(vec![0; 40]));
        assert!(cache.get(id(1), Variant::Identity).is_some()); // 1 is now used
        cache.insert(id(3), Variant::Identity, Bytes::from(vec![0; 40]));
        assert!(cache.bytes() <= 100, "{} bytes held", cache.bytes());
        assert!(
            cache.get(id(2), Variant::Identity).is_none(),
            "the entry nobody read stayed and the one read went"
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
