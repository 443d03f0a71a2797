//! [`ByteLru`]: an LRU cache bounded by the bytes its entries hold, not
//! by their count (a count bounds nothing when one entry can be a
//! megabyte). Entries say what they weigh ([`Weigh`]). Used by the web
//! UI's highlighting and history caches; it knows nothing of them.

use std::hash::Hash;
use std::sync::Arc;

/// Bytes an entry holds (its heap data and its fixed size).
pub trait Weigh {
    fn weight(&self) -> usize;
}

impl<T: Weigh> Weigh for Arc<T> {
    fn weight(&self) -> usize {
        T::weight(self)
    }
}

/// At most `limit` bytes of keys and values; an entry over a quarter of
/// the bound is not kept at all (it would evict everything else).
#[derive(Debug)]
pub struct ByteLru<K: Hash + Eq, V> {
    entries: lru::LruCache<K, V>,
    bytes: usize,
    limit: usize,
}

impl<K: Hash + Eq + Weigh, V: Weigh + Clone> ByteLru<K, V> {
    pub fn new(limit: usize) -> ByteLru<K, V> {
        ByteLru {
            entries: lru::LruCache::unbounded(),
            bytes: 0,
            limit,
        }
    }

    pub fn get(&mut self, key: &K) -> Option<V> {
        self.entries.get(key).cloned()
    }

    pub fn put(&mut self, key: K, value: V) {
        let cost = key.weight() + value.weight();
        if cost > self.limit / 4 {
            return;
        }
        if let Some((old_key, old)) = self.entries.pop_entry(&key) {
            self.bytes -= old_key.weight() + old.weight();
        }
        self.entries.put(key, value);
        self.bytes += cost;
        while self.bytes > self.limit {
            let Some((old_key, old)) = self.entries.pop_lru() else {
                break;
            };
            self.bytes -= old_key.weight() + old.weight();
        }
    }

    /// Bytes held now.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn it_holds_at_most_its_bytes_and_keeps_no_giant() {
        let mut cache: ByteLru<String, String> = ByteLru::new(10_000);
        for i in 0..100 {
            cache.put(format!("k{i}"), "x".repeat(1000));
            assert!(cache.bytes() <= 10_000, "{} bytes held", cache.bytes());
        }
        assert!(cache.len() >= 5, "anti-vacuity: it holds some");
        assert!(cache.get(&"k99".to_string()).is_some(), "the newest stays");
        assert!(cache.get(&"k0".to_string()).is_none(), "the oldest went");
        cache.put("giant".into(), "x".repeat(5000));
        assert!(cache.get(&"giant".to_string()).is_none());
        // Replacing an entry does not count it twice.
        let before = cache.bytes();
        cache.put("k99".into(), "x".repeat(1000));
        assert_eq!(cache.bytes(), before);
    }
}
