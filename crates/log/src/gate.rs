//! Group commit: the sync gate. Writers append under the writer mutex, then
//! wait here outside it. The first to arrive when no sync is running leads:
//! it reads the written watermark, syncs once, and publishes that watermark
//! as durable; everyone at or below it returns without syncing.
//!
//! Commit delay: when a leader is chosen while other commits are in flight
//! (announced, encoding or writing, not yet at the gate), it waits for them
//! to reach the kernel (bounded by the last sync's duration, at most 1 ms)
//! before it reads the watermark, so one sync covers them too. Without it,
//! two writers ping-pong: each sync covers exactly one transaction, because
//! the other's frame always lands just after the leader read the watermark.
//!
//! [`GateState`] is the whole decision (watermarks, who leads, who waits) as
//! a state machine with no I/O, so it is tested without threads or files.
//! [`SyncGate`] is the thin layer that parks threads on a condvar and calls
//! the storage's sync.

use parking_lot::{Condvar, Mutex, MutexGuard};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::counters::Counters;
use super::storage::LogStorage;

/// What an arriving waiter must do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Arrival {
    /// Its sequence is durable: acknowledge.
    Durable,
    /// Sync the storage, covering every sequence up to `upto`, then report
    /// with [`GateState::sync_finished`].
    Lead { upto: u64 },
    /// A sync is running (or the gate is held): wait and arrive again.
    Wait,
    /// A sync or write failed; nothing above the durable watermark will
    /// ever be acknowledged by this log instance.
    Failed(Failure),
}

/// Why a log stopped taking appends. Every waiter gets a copy, so the io
/// error is shared. Its text is part of the message: this goes to the
/// server's log and the operator; the HTTP boundary never shows it.
#[derive(Debug, Clone, thiserror::Error)]
pub enum Failure {
    #[error("a sync of the log failed: {0}")]
    Sync(Arc<std::io::Error>),
    #[error("a write to the log failed: {0}")]
    Write(Arc<std::io::Error>),
}

impl Failure {
    pub fn io(&self) -> &std::io::Error {
        match self {
            Failure::Sync(e) | Failure::Write(e) => e,
        }
    }
}

/// Same kind, same io error (by kind and text): what tests compare.
impl PartialEq for Failure {
    fn eq(&self, other: &Failure) -> bool {
        std::mem::discriminant(self) == std::mem::discriminant(other)
            && self.io().kind() == other.io().kind()
            && self.io().to_string() == other.io().to_string()
    }
}
impl Eq for Failure {}

/// Watermarks and leadership; no I/O.
#[derive(Debug, Default)]
pub struct GateState {
    written: u64,
    durable: u64,
    syncing: bool,
    held: u32,
    failed: Option<Failure>,
    waiting: usize,
    in_flight: usize,
    /// Times a parked waiter was woken (every wake-up is a context switch;
    /// on few cores they are what limits group commit).
    wakeups: u64,
}

impl GateState {
    /// A gate whose sequences up to `durable` are already on disk.
    pub fn new(durable: u64) -> GateState {
        GateState {
            written: durable,
            durable,
            ..GateState::default()
        }
    }

    /// A commit began (it will append, then arrive).
    pub fn commit_started(&mut self) {
        self.in_flight += 1;
    }

    /// A commit that began has appended (or given up).
    pub fn commit_reached_gate(&mut self) {
        self.in_flight = self.in_flight.saturating_sub(1);
    }

    /// A leader should hold its sync back while commits are in flight.
    pub fn should_delay_sync(&self) -> bool {
        self.in_flight > 0
    }

    /// The frame for `seq` reached the kernel (called under the writer mutex).
    pub fn frame_written(&mut self, seq: u64) {
        self.written = self.written.max(seq);
    }

    pub fn arrive(&mut self, seq: u64) -> Arrival {
        if seq <= self.durable {
            return Arrival::Durable;
        }
        if let Some(why) = &self.failed {
            return Arrival::Failed(why.clone());
        }
        if self.syncing || self.held > 0 {
            return Arrival::Wait;
        }
        self.syncing = true;
        Arrival::Lead { upto: self.written }
    }

    /// The leader's sync returned. On success everything up to `upto` is
    /// durable; on failure the gate is poisoned.
    pub fn sync_finished(&mut self, upto: u64, result: Result<(), Failure>) {
        self.syncing = false;
        match result {
            Ok(()) => self.durable = self.durable.max(upto),
            Err(why) => {
                self.failed.get_or_insert(why);
            }
        }
    }

    /// Poisons the gate (a write failed).
    pub fn fail(&mut self, why: Failure) {
        self.failed.get_or_insert(why);
    }

    pub fn written(&self) -> u64 {
        self.written
    }
    pub fn durable(&self) -> u64 {
        self.durable
    }
    pub fn waiting(&self) -> usize {
        self.waiting
    }
    pub fn wakeups(&self) -> u64 {
        self.wakeups
    }
}

/// Parks waiters and runs the leader's sync.
pub struct SyncGate {
    state: Mutex<GateState>,
    wake: Condvar,
    /// Wakes a leader that delays its sync for in-flight commits.
    arrivals: Condvar,
    /// Wakes whoever watches the queue grow (tests and benches through
    /// [`SyncGate::wait_for_waiters`]); kept apart from `wake` so a parking
    /// waiter never wakes the other waiters.
    queue_grew: Condvar,
    last_sync_nanos: std::sync::atomic::AtomicU64,
    storage: Mutex<Arc<dyn LogStorage>>,
    counters: Arc<Counters>,
}

impl SyncGate {
    pub fn new(storage: Arc<dyn LogStorage>, durable: u64, counters: Arc<Counters>) -> SyncGate {
        SyncGate {
            state: Mutex::new(GateState::new(durable)),
            wake: Condvar::new(),
            arrivals: Condvar::new(),
            queue_grew: Condvar::new(),
            last_sync_nanos: std::sync::atomic::AtomicU64::new(100_000),
            storage: Mutex::new(storage),
            counters,
        }
    }

    pub fn state(&self) -> MutexGuard<'_, GateState> {
        self.state.lock()
    }

    /// Blocks until `seq` is durable (or the log failed). Blocking: async
    /// callers go through `spawn_blocking`.
    pub fn wait_durable(&self, seq: u64) -> Result<(), Failure> {
        let mut state = self.state();
        loop {
            match state.arrive(seq) {
                Arrival::Durable => return Ok(()),
                Arrival::Failed(why) => return Err(why),
                Arrival::Wait => {
                    state.waiting += 1;
                    self.queue_grew.notify_all();
                    self.wake.wait(&mut state);
                    state.waiting -= 1;
                    state.wakeups += 1;
                }
                Arrival::Lead { mut upto } => {
                    if state.should_delay_sync() {
                        let bound = Duration::from_nanos(
                            self.last_sync_nanos
                                .load(Ordering::Relaxed)
                                .min(MAX_COMMIT_DELAY_NANOS),
                        );
                        let deadline = Instant::now() + bound;
                        while state.should_delay_sync() {
                            let now = Instant::now();
                            if now >= deadline {
                                break;
                            }
                            self.arrivals.wait_for(&mut state, deadline - now);
                        }
                        // Everything written so far reached the kernel
                        // before the sync below starts: it covers it.
                        upto = state.written();
                    }
                    let covered = upto - state.durable();
                    drop(state);
                    let storage = self.storage.lock().clone();
                    let started = Instant::now();
                    let result = storage.sync().map_err(|e| Failure::Sync(Arc::new(e)));
                    let took = started.elapsed();
                    self.last_sync_nanos
                        .store(took.as_nanos() as u64, Ordering::Relaxed);
                    self.counters.record_sync(took, covered);
                    state = self.state();
                    state.sync_finished(upto, result);
                    self.wake.notify_all();
                }
            }
        }
    }

    /// Announces a commit that is about to append; the returned guard must be
    /// told when its frame is written (or it gives up by being dropped).
    pub fn announce(&self) -> Announced<'_> {
        self.state().commit_started();
        Announced { gate: Some(self) }
    }

    /// Holds the gate shut: no sync starts until the hold is dropped, and
    /// none is running when this returns. Compaction holds it while it swaps
    /// files; tests hold it to build a queue of waiters deterministically.
    pub fn hold(&self) -> GateHold<'_> {
        let mut state = self.state();
        state.held += 1;
        while state.syncing {
            self.wake.wait(&mut state);
        }
        GateHold { gate: self }
    }

    /// Waits (bounded) until `n` waiters are parked; for tests and benches.
    pub fn wait_for_waiters(&self, n: usize, bound: std::time::Duration) -> bool {
        let deadline = Instant::now() + bound;
        let mut state = self.state();
        while state.waiting < n {
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            self.queue_grew.wait_for(&mut state, deadline - now);
        }
        true
    }

    pub(super) fn fail(&self, why: Failure) {
        self.state().fail(why);
        self.wake.notify_all();
    }

    pub(super) fn frame_written(&self, seq: u64) {
        self.state().frame_written(seq);
    }

    pub fn syncs(&self) -> u64 {
        self.counters.syncs.load(Ordering::Relaxed)
    }
}

/// Longest a leader delays its sync for in-flight commits.
const MAX_COMMIT_DELAY_NANOS: u64 = 1_000_000;

/// A commit announced to the gate; see [`SyncGate::announce`].
pub struct Announced<'a> {
    gate: Option<&'a SyncGate>,
}

impl Announced<'_> {
    /// The commit's frame is written (or failed): stop delaying leaders.
    pub fn reached_gate(mut self) {
        self.release();
    }

    fn release(&mut self) {
        if let Some(gate) = self.gate.take() {
            gate.state().commit_reached_gate();
            gate.arrivals.notify_all();
        }
    }
}

impl Drop for Announced<'_> {
    fn drop(&mut self) {
        self.release();
    }
}

/// An open hold on the gate; see [`SyncGate::hold`].
pub struct GateHold<'a> {
    gate: &'a SyncGate,
}

impl GateHold<'_> {
    /// Re-binds the gate to new storage and publishes `durable` (the new file
    /// was synced whole before it replaced the old one). Only compaction
    /// calls this, with the writer mutex held, so no later sync can land on
    /// the unlinked old inode.
    pub(super) fn rebind(&self, storage: Arc<dyn LogStorage>, durable: u64) {
        *self.gate.storage.lock() = storage;
        let mut state = self.gate.state();
        state.durable = state.durable.max(durable);
    }
}

impl Drop for GateHold<'_> {
    fn drop(&mut self) {
        self.gate.state().held -= 1;
        self.gate.wake.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn eio() -> Failure {
        Failure::Sync(Arc::new(std::io::Error::other("EIO")))
    }

    #[test]
    fn a_follower_that_never_syncs_is_still_covered_by_the_leaders_sync() {
        let mut gate = GateState::new(0);
        gate.frame_written(1);
        assert_eq!(gate.arrive(1), Arrival::Lead { upto: 1 });
        // Frame 2 reaches the kernel while the leader syncs: not covered.
        gate.frame_written(2);
        assert_eq!(gate.arrive(2), Arrival::Wait);
        gate.sync_finished(1, Ok(()));
        assert_eq!(gate.durable(), 1);
        // 2 was written after the leader read the watermark: it must lead.
        assert_eq!(gate.arrive(2), Arrival::Lead { upto: 2 });
        gate.frame_written(3);
        gate.sync_finished(2, Ok(()));
        // 3 arrives; a new leader for 3 covers 3 and everything below.
        gate.frame_written(4);
        assert_eq!(gate.arrive(3), Arrival::Lead { upto: 4 });
        gate.sync_finished(4, Ok(()));
        // The follower for 4 never synced, and is durable.
        assert_eq!(
            gate.arrive(4),
            Arrival::Durable,
            "the leader's sync covered seq 4, which had reached the kernel before it read the watermark"
        );
    }

    #[test]
    fn nothing_above_the_durable_watermark_is_acknowledged_after_a_failed_sync() {
        let mut gate = GateState::new(5);
        gate.frame_written(6);
        gate.frame_written(7);
        assert_eq!(gate.arrive(7), Arrival::Lead { upto: 7 });
        gate.sync_finished(7, Err(eio()));
        assert_eq!(gate.arrive(6), Arrival::Failed(eio()));
        assert_eq!(gate.arrive(7), Arrival::Failed(eio()));
        assert_eq!(
            gate.arrive(5),
            Arrival::Durable,
            "already durable stays durable"
        );
    }

    #[test]
    fn a_leader_delays_only_while_commits_are_in_flight() {
        let mut gate = GateState::new(0);
        assert!(!gate.should_delay_sync());
        gate.commit_started();
        gate.commit_started();
        assert!(gate.should_delay_sync());
        gate.commit_reached_gate();
        assert!(gate.should_delay_sync(), "one commit is still in flight");
        gate.commit_reached_gate();
        gate.commit_reached_gate(); // a stray release never underflows
        assert!(!gate.should_delay_sync());
    }

    #[test]
    fn a_held_gate_starts_no_sync() {
        let mut gate = GateState::new(0);
        gate.held = 1;
        gate.frame_written(1);
        assert_eq!(gate.arrive(1), Arrival::Wait);
        gate.held = 0;
        assert_eq!(gate.arrive(1), Arrival::Lead { upto: 1 });
    }
}
