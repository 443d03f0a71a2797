//! The events in their one order, and where each hook stands in them:
//! [`Queue`] keeps the webhooks log (`webhooks.arrow`) and what it says in
//! memory: the events not yet delivered to every hook (bounded in count
//! and bytes, oldest dropped first, counted), each hook's cursor (moved
//! only once a 2xx is durable), each hook's last attempts, and how far the
//! feed has read the ref and meta logs. A restart replays the file and
//! goes on from there: an event recorded is delivered, an event delivered
//! and acknowledged is not sent again unless asked.

use std::collections::{HashMap, HashSet, VecDeque};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;
use vole_log::{Entry, Log, LogError};

use crate::history::Attempt;
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
    pub time_ns: i64,
    pub incarnation: String,
    pub repo: String,
    pub event: String,
    pub ref_name: String,
    pub payload: Arc<str>,
    /// The log transaction that holds it (what a compaction may drop).
    txn: u64,
}

/// An event the feed found, before it has a number.
#[derive(Debug, Clone)]
pub struct NewEvent {
    pub incarnation: String,
    pub repo: String,
    pub event: String,
    pub ref_name: String,
    pub payload: String,
}

#[derive(Default)]
struct State {
    events: VecDeque<Arc<Event>>,
    bytes: usize,
    next_id: u64,
    /// Done through, per hook (durable: a `delivered` or `dropped` row).
    cursors: HashMap<u64, u64>,
    /// Events dropped per hook, since start.
    dropped: HashMap<u64, u64>,
    history: HashMap<u64, VecDeque<Arc<Attempt>>>,
    /// The live hooks (what events are kept for).
    live: HashSet<u64>,
    fed_ref: u64,
    fed_meta: u64,
    txns_since_compaction: u64,
}

/// The webhooks log and its state.
pub struct Queue {
    log: Arc<Log<HookRecord>>,
    bounds: Bounds,
    state: Mutex<State>,
    /// What the feed has durably read: the ref and meta logs keep what is
    /// after it through their compactions ([`Log::hold_for_reader`]).
    pub ref_hold: Arc<AtomicU64>,
    pub meta_hold: Arc<AtomicU64>,
    /// The newest event's number, watched by the deliveries.
    recorded: tokio::sync::watch::Sender<u64>,
    dropped_total: AtomicU64,
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
        let queue = Queue {
            log: Arc::new(log),
            bounds,
            ref_hold: Arc::new(AtomicU64::new(state.fed_ref)),
            meta_hold: Arc::new(AtomicU64::new(state.fed_meta)),
            recorded: tokio::sync::watch::Sender::new(state.next_id - 1),
            state: Mutex::new(state),
            dropped_total: AtomicU64::new(0),
        };
        Ok(queue)
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
        self.state.lock().next_id - 1
    }

    /// Records `events` (in this order) and that the feed has read
    /// through `fed`, durably, in one transaction; blocking.
    pub fn record(&self, events: Vec<NewEvent>, fed: (u64, u64)) -> Result<(), LogError> {
        // One feed writes: numbers are taken here, in order.
        let first = self.state.lock().next_id;
        let mut rows: Vec<HookRecord> = events
            .iter()
            .enumerate()
            .map(|(i, event)| HookRecord {
                id: first + i as u64,
                incarnation: event.incarnation.clone(),
                repo: event.repo.clone(),
                event: event.event.clone(),
                ref_name: event.ref_name.clone(),
                body: event.payload.clone(),
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
        let txn = self.log.commit(&rows)?;
        {
            let mut state = self.state.lock();
            state.replay(txn, rows);
            self.trim(&mut state);
        }
        self.ref_hold.store(fed.0, Ordering::Release);
        self.meta_hold.store(fed.1, Ordering::Release);
        if !events.is_empty() {
            self.recorded.send_replace(self.head());
        }
        Ok(())
    }

    /// The hooks events are kept for; a hook new to the queue starts
    /// after the newest event (it gets what happens from now on), which
    /// is durable before this returns (a restart does not move its start
    /// past events it has not had). Blocking.
    pub fn set_live(&self, hooks: impl IntoIterator<Item = u64>) -> Result<(), LogError> {
        let starts: Vec<HookRecord> = {
            let mut guard = self.state.lock();
            let state = &mut *guard;
            let head = state.next_id - 1;
            state.live = hooks.into_iter().collect();
            let mut starts = Vec::new();
            for hook in &state.live {
                if !state.cursors.contains_key(hook) {
                    state.cursors.insert(*hook, head);
                    starts.push(HookRecord {
                        id: head,
                        hook: *hook,
                        ..HookRecord::new(RowKind::Delivered)
                    });
                }
            }
            state.cursors.retain(|hook, _| state.live.contains(hook));
            state.history.retain(|hook, _| state.live.contains(hook));
            self.trim(state);
            starts
        };
        if !starts.is_empty() {
            self.log.commit(&starts)?;
        }
        Ok(())
    }

    /// Hook `hook`'s cursor: the events through it are done.
    pub fn cursor(&self, hook: u64) -> Option<u64> {
        self.state.lock().cursors.get(&hook).copied()
    }

    /// Hook `hook` is past event `through` (it wanted none of those it
    /// has not taken): in memory only; after a restart it passes over
    /// them again.
    pub fn pass(&self, hook: u64, through: u64) {
        let mut state = self.state.lock();
        if let Some(cursor) = state.cursors.get_mut(&hook)
            && *cursor < through
        {
            *cursor = through;
            self.trim(&mut state);
        }
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
    /// returns, with the attempt. Blocking.
    pub fn delivered(&self, hook: u64, through: u64, attempt: Attempt) -> Result<(), LogError> {
        let rows = vec![
            attempt_row(hook, &attempt),
            HookRecord {
                id: through,
                hook,
                ..HookRecord::new(RowKind::Delivered)
            },
        ];
        let txn = self.log.commit(&rows)?;
        let mut state = self.state.lock();
        state.replay(txn, rows);
        self.trim(&mut state);
        Ok(())
    }

    /// An attempt that did not deliver (kept in the history; written
    /// without waiting for the disk: losing one loses no event). Blocking.
    pub fn failed(&self, hook: u64, attempt: Attempt) -> Result<(), LogError> {
        let rows = vec![attempt_row(hook, &attempt)];
        let txn = self.log.append(&rows)?;
        self.state.lock().replay(txn, rows);
        Ok(())
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
            self.dropped_total.load(Ordering::Relaxed),
        )
    }

    /// Events waiting past `hook`'s cursor (matching or not), a bound on
    /// its backlog.
    pub fn waiting(&self, hook: u64) -> u64 {
        let state = self.state.lock();
        let cursor = state.cursors.get(&hook).copied().unwrap_or(0);
        (state.next_id - 1).saturating_sub(cursor)
    }

    /// Drops what no live hook needs and what the bounds do not keep:
    /// a hook whose queue is past its bound loses its oldest (counted,
    /// logged, a `dropped` row at the next write).
    fn trim(&self, state: &mut State) {
        let head = state.next_id - 1;
        let floor = head.saturating_sub(self.bounds.per_hook);
        let mut dropped_rows = Vec::new();
        let hooks: Vec<(u64, u64)> = state.cursors.iter().map(|(h, c)| (*h, *c)).collect();
        for (hook, cursor) in hooks {
            if cursor < floor {
                self.drop_for(state, hook, cursor, floor, &mut dropped_rows);
            }
        }
        while state.events.len() > self.bounds.events || state.bytes > self.bounds.bytes {
            let Some(oldest) = state.events.front().map(|e| e.id) else {
                break;
            };
            let behind: Vec<(u64, u64)> = state
                .cursors
                .iter()
                .filter(|(_, c)| **c < oldest)
                .map(|(h, c)| (*h, *c))
                .collect();
            for (hook, cursor) in behind {
                self.drop_for(state, hook, cursor, oldest, &mut dropped_rows);
            }
            state.pop_front();
        }
        let needed = state.cursors.values().copied().min().unwrap_or(head);
        while state.events.front().is_some_and(|e| e.id <= needed) {
            state.pop_front();
        }
        if !dropped_rows.is_empty() {
            // Appended without a wait: the cursor it moves is a loss
            // already counted; a crash before it is durable delivers more.
            if let Err(e) = self.log.append(&dropped_rows) {
                tracing::warn!(error = %e, "webhooks: could not record dropped events");
            }
        }
    }

    fn drop_for(
        &self,
        state: &mut State,
        hook: u64,
        cursor: u64,
        through: u64,
        rows: &mut Vec<HookRecord>,
    ) {
        let count = through - cursor;
        *state.dropped.entry(hook).or_default() += count;
        self.dropped_total.fetch_add(count, Ordering::Relaxed);
        state.cursors.insert(hook, through);
        tracing::warn!(
            hook,
            dropped = count,
            through,
            "webhooks: a hook's queue was past its bound; its oldest events were dropped"
        );
        rows.push(HookRecord {
            id: through,
            hook,
            ..HookRecord::new(RowKind::Dropped)
        });
    }

    /// Rewrites the log without what nothing needs: the transactions
    /// before the oldest kept event, with a checkpoint of the cursors,
    /// the histories and the feed's position. Blocking.
    pub fn compact(&self) -> Result<(), LogError> {
        let (checkpoint, drop_through) = {
            let mut state = self.state.lock();
            if state.txns_since_compaction < 1024 {
                return Ok(());
            }
            state.txns_since_compaction = 0;
            let (written, _) = self.log.watermarks();
            let drop_through = state
                .events
                .front()
                .map_or(written, |e| e.txn.saturating_sub(1));
            let mut rows = vec![HookRecord {
                id: state.next_id - 1,
                ref_seq: state.fed_ref,
                meta_seq: state.fed_meta,
                ..HookRecord::new(RowKind::Fed)
            }];
            for (hook, cursor) in &state.cursors {
                rows.push(HookRecord {
                    id: *cursor,
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

impl State {
    /// Position of the first kept event after `after`.
    fn index_after(&self, after: u64) -> usize {
        match self.events.front() {
            Some(first) if after >= first.id => {
                ((after - first.id + 1) as usize).min(self.events.len())
            }
            _ => 0,
        }
    }

    fn pop_front(&mut self) {
        if let Some(event) = self.events.pop_front() {
            self.bytes -= event.payload.len();
        }
    }

    /// Takes one transaction's rows (`txn` 0: a checkpoint's).
    fn replay(&mut self, txn: u64, rows: Vec<HookRecord>) {
        self.txns_since_compaction += 1;
        for row in rows {
            self.fed_ref = self.fed_ref.max(row.ref_seq);
            self.fed_meta = self.fed_meta.max(row.meta_seq);
            match row.kind {
                RowKind::Event => {
                    self.next_id = self.next_id.max(row.id + 1);
                    self.bytes += row.body.len();
                    self.events.push_back(Arc::new(Event {
                        id: row.id,
                        time_ns: row.time_ns,
                        incarnation: row.incarnation,
                        repo: row.repo,
                        event: row.event,
                        ref_name: row.ref_name,
                        payload: row.body.into(),
                        txn,
                    }));
                }
                RowKind::Delivered | RowKind::Dropped => {
                    let cursor = self.cursors.entry(row.hook).or_default();
                    *cursor = (*cursor).max(row.id);
                }
                RowKind::Attempt => {
                    if let Ok(attempt) = serde_json::from_str::<Attempt>(&row.body) {
                        let history = self.history.entry(row.hook).or_default();
                        // A checkpoint's attempts may come again after it.
                        if !history.iter().any(|a| a.same_as(&attempt)) {
                            history.push_back(Arc::new(attempt));
                        }
                        while history.len() > HISTORY {
                            history.pop_front();
                        }
                    }
                }
                RowKind::Fed => self.next_id = self.next_id.max(row.id + 1),
            }
        }
    }
}
