//! Run-time counters of a log: frames, bytes, syncs, sync time, writer-lock
//! wait, group sizes, and the histograms of sync time and group size the
//! metrics show. Lock-free; read with [`Counters::snapshot`].

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde::Serialize;

#[derive(Debug)]
pub struct Counters {
    pub frames: AtomicU64,
    pub bytes: AtomicU64,
    pub syncs: AtomicU64,
    pub sync_nanos: AtomicU64,
    pub lock_wait_nanos: AtomicU64,
    /// Frames made durable by syncs (sum of group sizes).
    pub synced_frames: AtomicU64,
    pub max_group: AtomicU64,
    /// Each sync's time, for the metrics.
    pub sync_seconds: prometheus_client::metrics::histogram::Histogram,
    /// Each sync's group (frames it made durable), for the metrics.
    pub group_frames: prometheus_client::metrics::histogram::Histogram,
}

impl Default for Counters {
    fn default() -> Counters {
        Counters {
            frames: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
            syncs: AtomicU64::new(0),
            sync_nanos: AtomicU64::new(0),
            lock_wait_nanos: AtomicU64::new(0),
            synced_frames: AtomicU64::new(0),
            max_group: AtomicU64::new(0),
            sync_seconds: vole_stdx::metrics::latency_histogram(),
            group_frames: vole_stdx::metrics::size_histogram(),
        }
    }
}

/// A point-in-time copy of [`Counters`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct CounterSnapshot {
    pub frames: u64,
    pub bytes: u64,
    pub syncs: u64,
    pub sync_nanos: u64,
    pub lock_wait_nanos: u64,
    pub max_group: u64,
    pub mean_group: f64,
}

impl Counters {
    pub fn record_frame(&self, bytes: usize, lock_wait: Duration) {
        self.frames.fetch_add(1, Ordering::Relaxed);
        self.bytes.fetch_add(bytes as u64, Ordering::Relaxed);
        self.lock_wait_nanos
            .fetch_add(lock_wait.as_nanos() as u64, Ordering::Relaxed);
    }

    pub fn record_sync(&self, took: Duration, group: u64) {
        self.syncs.fetch_add(1, Ordering::Relaxed);
        self.sync_nanos
            .fetch_add(took.as_nanos() as u64, Ordering::Relaxed);
        self.synced_frames.fetch_add(group, Ordering::Relaxed);
        self.max_group.fetch_max(group, Ordering::Relaxed);
        self.sync_seconds.observe(took.as_secs_f64());
        self.group_frames.observe(group as f64);
    }

    pub fn snapshot(&self) -> CounterSnapshot {
        let syncs = self.syncs.load(Ordering::Relaxed);
        let synced = self.synced_frames.load(Ordering::Relaxed);
        CounterSnapshot {
            frames: self.frames.load(Ordering::Relaxed),
            bytes: self.bytes.load(Ordering::Relaxed),
            syncs,
            sync_nanos: self.sync_nanos.load(Ordering::Relaxed),
            lock_wait_nanos: self.lock_wait_nanos.load(Ordering::Relaxed),
            max_group: self.max_group.load(Ordering::Relaxed),
            mean_group: if syncs == 0 {
                0.0
            } else {
                synced as f64 / syncs as f64
            },
        }
    }
}
