//! What the webhooks log says, in memory ([`State`]): the events kept,
//! each hook's place (its cursor, how many events it wants past it, what
//! it wants), the hooks' last attempts and the feed's place; how a
//! transaction's rows change it, and the bounds that drop events. No
//! I/O: [`crate::queue::Queue`] writes the rows and applies them here
//! under one lock, so memory and the log never disagree for a compaction.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use crate::history::Attempt;
use crate::queue::{Bounds, Event, HISTORY, Wants};
use crate::record::{HookRecord, RowKind};

/// One hook's place in the events.
pub(crate) struct Place {
    /// Done through (durable once a `delivered` or `dropped` row is).
    pub(crate) cursor: u64,
    /// Events past the cursor it wants (counted once it is live).
    pub(crate) pending: u64,
    /// What it wants; none until the deliveries say (at start, replay
    /// knows cursors only).
    pub(crate) wants: Option<Wants>,
    /// The cursor last written to the log.
    pub(crate) persisted: u64,
}

#[derive(Default)]
pub(crate) struct State {
    pub(crate) events: VecDeque<Arc<Event>>,
    pub(crate) bytes: usize,
    pub(crate) next_id: u64,
    pub(crate) places: HashMap<u64, Place>,
    /// Events dropped per hook, since start.
    pub(crate) dropped: HashMap<u64, u64>,
    pub(crate) dropped_total: u64,
    pub(crate) history: HashMap<u64, VecDeque<Arc<Attempt>>>,
    /// The deliveries have said which hooks are live: rows of others are
    /// no longer taken.
    pub(crate) live_known: bool,
    pub(crate) fed_ref: u64,
    pub(crate) fed_meta: u64,
}

impl State {
    pub(crate) fn head(&self) -> u64 {
        self.next_id - 1
    }

    /// Position of the first kept event after `after`.
    pub(crate) fn index_after(&self, after: u64) -> usize {
        match self.events.front() {
            Some(first) if after >= first.id => {
                ((after - first.id + 1) as usize).min(self.events.len())
            }
            _ => 0,
        }
    }

    /// Events after `after` that `wants` takes.
    pub(crate) fn count_wanted(&self, after: u64, wants: &Wants) -> u64 {
        let start = self.index_after(after);
        self.events.range(start..).filter(|e| wants(e)).count() as u64
    }

    fn pop_front(&mut self) {
        if let Some(event) = self.events.pop_front() {
            self.bytes -= event.payload.len();
        }
    }

    /// Takes one transaction's rows (`txn` 0: a checkpoint's).
    pub(crate) fn replay(&mut self, txn: u64, rows: Vec<HookRecord>) {
        for row in rows {
            self.fed_ref = self.fed_ref.max(row.ref_seq);
            self.fed_meta = self.fed_meta.max(row.meta_seq);
            match row.kind {
                RowKind::Event => self.take_event(txn, row),
                RowKind::Delivered | RowKind::Dropped => {
                    if self.live_known && !self.places.contains_key(&row.hook) {
                        // A hook deleted while its write was under way.
                        continue;
                    }
                    let place = self.places.entry(row.hook).or_insert(Place {
                        cursor: 0,
                        pending: 0,
                        wants: None,
                        persisted: 0,
                    });
                    place.cursor = place.cursor.max(row.id);
                    place.persisted = place.persisted.max(row.id);
                }
                RowKind::Attempt => self.take_attempt(row),
                RowKind::Fed => self.next_id = self.next_id.max(row.id + 1),
            }
        }
    }

    fn take_event(&mut self, txn: u64, row: HookRecord) {
        self.next_id = self.next_id.max(row.id + 1);
        self.bytes += row.body.len();
        let event = Arc::new(Event {
            id: row.id,
            incarnation: row.incarnation,
            repo: row.repo,
            event: row.event,
            ref_name: row.ref_name,
            payload: row.body.into(),
            txn,
        });
        for place in self.places.values_mut() {
            if place.cursor < event.id && place.wants.as_ref().is_some_and(|w| w(&event)) {
                place.pending += 1;
            }
        }
        self.events.push_back(event);
    }

    fn take_attempt(&mut self, row: HookRecord) {
        if self.live_known && !self.places.contains_key(&row.hook) {
            return;
        }
        let Ok(attempt) = serde_json::from_str::<Attempt>(&row.body) else {
            return;
        };
        let history = self.history.entry(row.hook).or_default();
        // A checkpoint's attempts may come again after it.
        if !history.iter().any(|a| a.same_as(&attempt)) {
            history.push_back(Arc::new(attempt));
        }
        while history.len() > HISTORY {
            history.pop_front();
        }
    }

    /// Drops what no live hook needs and what the bounds do not keep: a
    /// hook wanting more than its bound loses its oldest; past the log's
    /// bounds the oldest event goes, from every hook behind it. Each drop
    /// counted and logged; the rows that record the moved cursors are
    /// returned for the caller to write.
    pub(crate) fn trim(&mut self, bounds: &Bounds) -> Vec<HookRecord> {
        let mut rows = Vec::new();
        let over: Vec<u64> = self
            .places
            .iter()
            .filter(|(_, p)| p.pending > bounds.per_hook)
            .map(|(hook, _)| *hook)
            .collect();
        for hook in over {
            self.drop_oldest_wanted(hook, bounds.per_hook, &mut rows);
        }
        let mut moved: HashMap<u64, u64> = HashMap::new();
        while self.events.len() > bounds.events || self.bytes > bounds.bytes {
            let Some(oldest) = self.events.front().cloned() else {
                break;
            };
            for (hook, place) in self.places.iter_mut() {
                if place.cursor >= oldest.id {
                    continue;
                }
                if place.wants.as_ref().is_some_and(|w| w(&oldest)) {
                    place.pending = place.pending.saturating_sub(1);
                    *self.dropped.entry(*hook).or_default() += 1;
                    self.dropped_total += 1;
                    tracing::warn!(
                        hook,
                        event = oldest.id,
                        "webhooks: the log is past its bounds; a hook's oldest event was dropped"
                    );
                }
                place.cursor = oldest.id;
                moved.insert(*hook, oldest.id);
            }
            self.pop_front();
        }
        rows.extend(
            moved
                .into_iter()
                .map(|(hook, through)| dropped_row(hook, through)),
        );
        let needed = self
            .places
            .values()
            .map(|p| p.cursor)
            .min()
            .unwrap_or(self.head());
        while self.events.front().is_some_and(|e| e.id <= needed) {
            self.pop_front();
        }
        rows
    }

    /// Moves `hook`'s cursor past its oldest wanted events until `keep`
    /// remain.
    fn drop_oldest_wanted(&mut self, hook: u64, keep: u64, rows: &mut Vec<HookRecord>) {
        let Some(place) = self.places.get(&hook) else {
            return;
        };
        let (Some(wants), cursor) = (place.wants.clone(), place.cursor) else {
            return;
        };
        let mut excess = place.pending - keep;
        let mut through = cursor;
        let start = self.index_after(cursor);
        for event in self.events.range(start..) {
            if excess == 0 {
                break;
            }
            through = event.id;
            if wants(event) {
                excess -= 1;
            }
        }
        let dropped = place.pending - keep - excess;
        if let Some(place) = self.places.get_mut(&hook) {
            place.cursor = through;
            place.pending -= dropped;
        }
        *self.dropped.entry(hook).or_default() += dropped;
        self.dropped_total += dropped;
        tracing::warn!(
            hook,
            dropped,
            through,
            "webhooks: a hook's queue was past its bound; its oldest events were dropped"
        );
        rows.push(dropped_row(hook, through));
    }
}

fn dropped_row(hook: u64, through: u64) -> HookRecord {
    HookRecord {
        id: through,
        hook,
        ..HookRecord::new(RowKind::Dropped)
    }
}
