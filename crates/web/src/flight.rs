//! One computation per key at a time: requests that miss a cache for the
//! same key while it is being computed wait for that one computation
//! instead of each running their own (a page viewed by many right after
//! a push walks its history once). What does not live here: the caches
//! the results go into (each page's own).

use std::collections::HashMap;
use std::future::Future;
use std::hash::Hash;
use std::sync::Arc;

use parking_lot::Mutex;
use tokio::sync::OnceCell;

/// Computations under way, by key.
pub struct Flights<K, V> {
    inflight: Mutex<HashMap<K, Arc<OnceCell<V>>>>,
}

impl<K: Hash + Eq + Clone, V: Clone> Default for Flights<K, V> {
    fn default() -> Self {
        Flights {
            inflight: Mutex::new(HashMap::new()),
        }
    }
}

impl<K: Hash + Eq + Clone, V: Clone> Flights<K, V> {
    /// `compute`'s value for `key`, run once for every caller that comes
    /// while it runs; a caller that comes after it ended runs it again
    /// (the caller's cache answers those). If the caller running it goes
    /// away, a waiting one runs it instead.
    pub async fn run<F, Fut>(&self, key: K, compute: F) -> V
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = V>,
    {
        let cell = self.inflight.lock().entry(key.clone()).or_default().clone();
        let value = cell.get_or_init(compute).await.clone();
        let mut inflight = self.inflight.lock();
        if inflight.get(&key).is_some_and(|c| Arc::ptr_eq(c, &cell)) {
            inflight.remove(&key);
        }
        value
    }

    /// Keys being computed now.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.inflight.lock().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[tokio::test]
    async fn callers_at_once_share_one_computation_and_later_ones_run_again() {
        let flights: Arc<Flights<u32, usize>> = Arc::default();
        let runs = Arc::new(AtomicUsize::new(0));
        let (release, wait) = tokio::sync::watch::channel(false);
        let mut callers = Vec::new();
        for _ in 0..8 {
            let (flights, runs, mut wait) = (flights.clone(), runs.clone(), wait.clone());
            callers.push(tokio::spawn(async move {
                flights
                    .run(1, || async move {
                        let _ = wait.wait_for(|go| *go).await;
                        runs.fetch_add(1, Ordering::SeqCst) + 1
                    })
                    .await
            }));
        }
        // A current-thread runtime: while this sleeps, every caller runs
        // up to the one computation and waits on it.
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        assert_eq!(flights.len(), 1);
        release.send(true).unwrap();
        for caller in callers {
            assert_eq!(caller.await.unwrap(), 1, "a caller ran its own computation");
        }
        assert_eq!(runs.load(Ordering::SeqCst), 1);
        assert_eq!(flights.len(), 0, "the finished computation was not retired");
        let again = flights.run(1, || async { 7 }).await;
        assert_eq!(again, 7, "a later caller got the old value");
    }
}
