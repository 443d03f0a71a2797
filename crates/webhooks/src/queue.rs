//! The events in their one order, and where each hook stands in them:
//! [`Queue`] keeps the webhooks log (`webhooks.arrow`) and what it says in
//! memory: the events not yet delivered to every hook (bounded in count
//! and bytes, oldest dropped first, counted), each hook's cursor (moved
//! only once a 2xx is durable), each hook's last attempts, and how far the
//! feed has read the ref and meta logs. A restart replays the file and
//! goes on from there: an event recorded is delivered, an event delivered
//! and acknowledged is not sent again unless asked.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;
use vole_log::{Entry, Log, LogError};

use crate::history::Attempt;
use crate::queue_state::{Place, State};
use crate::record::{HookRecord, RowKind};

/// Attempts kept per hook (its history).
pub const HISTORY: usize = 20;

/// What the queue keeps at most.
#[derive(Debug, Clone, Copy)]
pub struct Bounds {
    /// Events held for hooks that have not taken them, in all.
    pub events: usize,
    /// Their payloads' bytes, in all.
    pub bytes: usize,
    /// Events waiting for one hook; past it its oldest are dropped.
    pub per_hook: u64,
}

impl Default for Bounds {
    fn default() -> Bounds {
        Bounds {
            events: 100_000,
            bytes: 256 << 20,
            per_hook: 10_000,
        }
    }
}

/// One event, as recorded.
#[derive(Debug)]
pub struct Event {
    pub id: u64,
    pub incarnation: String,
    pub repo: String,
    pub event: String,
    pub ref_name: String,
    pub payload: Arc<str>,
    /// The log transaction that holds it (what a compaction may drop).
    pub(crate) txn: u64,
}

/// What a hook wants of the events (its repo, events, branches).
pub type Wants = Arc<dyn Fn(&Event) -> bool + Send + Sync>;

/// A hook's cursor written again after it passed this many events it
/// did not want (so a restart does not count them dropped).
const PERSIST_PASSED: u64 = 1000;

/// An event the feed found, before it has a number.
#[derive(Debug, Clone)]
pub struct NewEvent {
    pub incarnation: String,
    pub repo: String,
    pub event: String,
    pub ref_name: String,
    pub payload: String,
}

/// The webhooks log and its state.
pub struct Queue {
    log: Arc<Log<HookRecord>>,
    bounds: Bounds,
    /// Held while a transaction is appended and applied: memory is what
    /// the log holds, for every reader and a compaction.
    state: Mutex<State>,
    /// What the feed has durably read: the ref and meta logs keep what is
    /// after it through their compactions ([`Log::hold_for_reader`]).
    pub ref_hold: Arc<AtomicU64>,
    pub meta_hold: Arc<AtomicU64>,
    /// The newest event's number, watched by the deliveries.
    recorded: tokio::sync::watch::Sender<u64>,
    /// The last record not yet made durable, and the place it covers.
    unsynced: Mutex<Option<(u64, (u64, u64))>>,
}

impl Queue {
    /// Opens (making it if need be) the webhooks log in `dir` and replays
    /// it.
    pub fn open(dir: &Path, bounds: Bounds) -> Result<Queue, LogError> {
        let mut state = State {
            next_id: 1,
            ..State::default()
        };
        let (log, _) = Log::<HookRecord>::open(dir, |entry| match entry {
            Entry::Checkpoint(rows) => state.replay(0, rows),
            Entry::Txn { seq, rows } => state.replay(seq, rows),
        })?;
        Ok(Queue {
            log: Arc::new(log),
            bounds,
            ref_hold: Arc::new(AtomicU64::new(state.fed_ref)),
            meta_hold: Arc::new(AtomicU64::new(state.fed_meta)),
            recorded: tokio::sync::watch::Sender::new(state.head()),
            unsynced: Mutex::new(None),
            state: Mutex::new(state),
        })
    }

    /// Appends `rows` and applies them to memory, under the state lock;
    /// not waiting for the disk. Their transaction.
    fn append(&self, state: &mut State, rows: Vec<HookRecord>) -> Result<u64, LogError> {
        let txn = self.log.append(&rows)?;
        state.replay(txn, rows);
        Ok(txn)
    }

    /// Drops what the bounds do not keep, recording the moved cursors
    /// (without waiting: a loss already counted).
    fn trim(&self, state: &mut State) {
        let rows = state.trim(&self.bounds);
        if !rows.is_empty()
            && let Err(e) = self.append(state, rows)
        {
            tracing::warn!(error = %e, "webhooks: could not record dropped events");
        }
    }

    /// Where the feed stands: the ref and meta log sequences read through,
    /// or `None` when it never ran (it then starts at the logs' ends).
    pub fn fed(&self) -> Option<(u64, u64)> {
        let state = self.state.lock();
        let never = state.fed_ref == 0 && state.fed_meta == 0 && state.next_id == 1;
        (!never).then_some((state.fed_ref, state.fed_meta))
    }

    /// Changes as events are recorded.
    pub fn watch(&self) -> tokio::sync::watch::Receiver<u64> {
        self.recorded.subscribe()
    }

    /// The newest event's number (0: none yet).
    pub fn head(&self) -> u64 {
        self.state.lock().head()
    }

    /// Records `events` (in this order) and that the feed has read
    /// through `fed`, in one transaction, not waiting for the disk
    /// ([`Queue::sync`] does); blocking.
    pub fn record(&self, events: Vec<NewEvent>, fed: (u64, u64)) -> Result<(), LogError> {
        let count = events.len();
        let txn = {
            let mut state = self.state.lock();
            let first = state.next_id;
            let mut rows: Vec<HookRecord> = events
                .into_iter()
                .enumerate()
                .map(|(i, event)| HookRecord {
                    id: first + i as u64,
                    incarnation: event.incarnation,
                    repo: event.repo,
                    event: event.event,
                    ref_name: event.ref_name,
                    body: event.payload,
                    ref_seq: fed.0,
                    meta_seq: fed.1,
                    ..HookRecord::new(RowKind::Event)
                })
                .collect();
            if rows.is_empty() {
                rows.push(HookRecord {
                    ref_seq: fed.0,
                    meta_seq: fed.1,
                    ..HookRecord::new(RowKind::Fed)
                });
            }
            let txn = self.append(&mut state, rows)?;
            self.trim(&mut state);
            txn
        };
        *self.unsynced.lock() = Some((txn, fed));
        if count > 0 {
            self.recorded.send_replace(self.head());
        }
        Ok(())
    }

    /// Makes what [`Queue::record`] wrote durable, then lets the ref and
    /// meta logs drop what it covers. Blocking: one sync for every record
    /// since the last (the feed calls it now and then, not per record, so
    /// its syncs do not take the disk from the pushes'). Until then an
    /// event may already be sent: after a power cut the feed reads its
    /// sources again from the place last made durable and numbers the
    /// same events the same (so the same delivery ids).
    pub fn sync(&self) -> Result<(), LogError> {
        let Some((txn, fed)) = *self.unsynced.lock() else {
            return Ok(());
        };
        self.log.wait_durable(txn)?;
        let mut unsynced = self.unsynced.lock();
        if *unsynced == Some((txn, fed)) {
            *unsynced = None;
        }
        self.ref_hold.fetch_max(fed.0, Ordering::AcqRel);
        self.meta_hold.fetch_max(fed.1, Ordering::AcqRel);
        Ok(())
    }

    /// The feed read through `fed` and found nothing it has not recorded
    /// and made durable: the ref and meta logs may drop what is before
    /// it. (With a record not yet durable, nothing moves.)
    pub fn passed(&self, fed: (u64, u64)) {
        if self.unsynced.lock().is_some() {
            return;
        }
        self.ref_hold.fetch_max(fed.0, Ordering::AcqRel);
        self.meta_hold.fetch_max(fed.1, Ordering::AcqRel);
    }

    /// The hooks events are kept for, with what each wants; a hook new to
    /// the queue starts after the newest event (it gets what happens from
    /// now on), durably before this returns. Blocking.
    pub fn set_live(&self, hooks: Vec<(u64, Wants)>) -> Result<(), LogError> {
        let txn = {
            let mut guard = self.state.lock();
            let state = &mut *guard;
            state.live_known = true;
            let head = state.head();
            let mut starts = Vec::new();
            let live: std::collections::HashSet<u64> = hooks.iter().map(|(id, _)| *id).collect();
            state.places.retain(|hook, _| live.contains(hook));
            state.history.retain(|hook, _| live.contains(hook));
            for (hook, wants) in hooks {
                let pending = match state.places.get(&hook) {
                    Some(place) => state.count_wanted(place.cursor, &wants),
                    None => {
                        starts.push(HookRecord {
                            id: head,
                            hook,
                            ..HookRecord::new(RowKind::Delivered)
                        });
                        0
                    }
                };
                let place = state.places.entry(hook).or_insert(Place {
                    cursor: head,
                    pending: 0,
                    wants: None,
                    persisted: head,
                });
                place.wants = Some(wants);
                place.pending = pending;
            }
            let txn = if starts.is_empty() {
                None
            } else {
                Some(self.append(state, starts)?)
            };
            self.trim(state);
            txn
        };
        if let Some(txn) = txn {
            self.log.wait_durable(txn)?;
        }
        Ok(())
    }

    /// Hook `hook`'s cursor: the events through it are done.
    pub fn cursor(&self, hook: u64) -> Option<u64> {
        self.state.lock().places.get(&hook).map(|p| p.cursor)
    }

    /// Hook `hook` is past event `through`: it wanted none of those it has
    /// not taken (`all`: it takes none, being inactive). Written now and
    /// then, without a wait: after a restart it passes them again.
    pub fn pass(&self, hook: u64, through: u64, all: bool) {
        let mut guard = self.state.lock();
        let state = &mut *guard;
        let Some(place) = state.places.get_mut(&hook) else {
            return;
        };
        if place.cursor >= through {
            return;
        }
        place.cursor = through;
        if all {
            place.pending = 0;
        }
        if through - place.persisted >= PERSIST_PASSED {
            place.persisted = through;
            let row = HookRecord {
                id: through,
                hook,
                ..HookRecord::new(RowKind::Delivered)
            };
            if let Err(e) = self.append(state, vec![row]) {
                tracing::warn!(error = %e, "webhooks: could not record a hook's place");
            }
        }
        self.trim(state);
    }

    /// The first event after `after` that `wanted` takes, if one is
    /// recorded; the events it passes over are the hook's to skip.
    pub fn next_after(&self, after: u64, wanted: impl Fn(&Event) -> bool) -> Option<Arc<Event>> {
        let state = self.state.lock();
        let start = state.index_after(after);
        state.events.range(start..).find(|e| wanted(e)).cloned()
    }

    /// Event `id`, if it is still kept.
    pub fn event(&self, id: u64) -> Option<Arc<Event>> {
        let state = self.state.lock();
        let index = state.index_after(id.saturating_sub(1));
        state.events.get(index).filter(|e| e.id == id).cloned()
    }

    /// Hook `hook` took event `through` (a 2xx): durable before it
    /// returns, with the attempt. A hook no longer live records nothing.
    /// Blocking.
    pub fn delivered(&self, hook: u64, through: u64, attempt: Attempt) -> Result<(), LogError> {
        let txn = {
            let mut guard = self.state.lock();
            let state = &mut *guard;
            let Some(place) = state.places.get_mut(&hook) else {
                return Ok(());
            };
            if place.cursor < through {
                place.pending = place.pending.saturating_sub(1);
            }
            let rows = vec![
                attempt_row(hook, &attempt),
                HookRecord {
                    id: through,
                    hook,
                    ..HookRecord::new(RowKind::Delivered)
                },
            ];
            let txn = self.append(state, rows)?;
            self.trim(state);
            txn
        };
        self.log.wait_durable(txn)
    }

    /// An attempt that did not deliver, or one sent outside the queue
    /// (kept in the history; written without waiting for the disk: losing
    /// one loses no event). Blocking.
    pub fn attempted(&self, hook: u64, attempt: Attempt) -> Result<(), LogError> {
        let mut state = self.state.lock();
        self.append(&mut state, vec![attempt_row(hook, &attempt)])
            .map(drop)
    }

    /// Hook `hook`'s last attempts, newest first.
    pub fn history(&self, hook: u64) -> Vec<Arc<Attempt>> {
        let state = self.state.lock();
        state
            .history
            .get(&hook)
            .map(|h| h.iter().rev().cloned().collect())
            .unwrap_or_default()
    }

    /// Events dropped for `hook` since start, and for every hook.
    pub fn dropped(&self, hook: u64) -> (u64, u64) {
        let state = self.state.lock();
        (
            state.dropped.get(&hook).copied().unwrap_or(0),
            state.dropped_total,
        )
    }

    /// Events past `hook`'s cursor that it wants: its queue.
    pub fn waiting(&self, hook: u64) -> u64 {
        let state = self.state.lock();
        state.places.get(&hook).map_or(0, |p| p.pending)
    }

    /// The webhooks log's file, in bytes.
    pub fn file_bytes(&self) -> u64 {
        std::fs::metadata(self.log.path()).map_or(0, |m| m.len())
    }

    /// Rewrites the log without what nothing needs: the transactions
    /// before the oldest kept event, with a checkpoint of the cursors,
    /// the histories and the feed's place. Blocking.
    pub fn compact(&self) -> Result<(), LogError> {
        let (checkpoint, drop_through) = {
            let state = self.state.lock();
            // Every transaction written is applied (both under this lock).
            let (written, _) = self.log.watermarks();
            let drop_through = state
                .events
                .front()
                .map_or(written, |e| e.txn.saturating_sub(1));
            let mut rows = vec![HookRecord {
                id: state.head(),
                ref_seq: state.fed_ref,
                meta_seq: state.fed_meta,
                ..HookRecord::new(RowKind::Fed)
            }];
            for (hook, place) in &state.places {
                rows.push(HookRecord {
                    id: place.cursor,
                    hook: *hook,
                    ..HookRecord::new(RowKind::Delivered)
                });
            }
            for (hook, attempts) in &state.history {
                rows.extend(attempts.iter().map(|a| attempt_row(*hook, a)));
            }
            (rows, drop_through)
        };
        self.log.mark_applied(drop_through);
        self.log.compact(drop_through, &checkpoint).map(drop)
    }
}

fn attempt_row(hook: u64, attempt: &Attempt) -> HookRecord {
    HookRecord {
        id: attempt.event,
        hook,
        body: serde_json::to_string(attempt).unwrap_or_default(),
        ..HookRecord::new(RowKind::Attempt)
    }
}
