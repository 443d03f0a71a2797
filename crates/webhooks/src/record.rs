//! The webhooks log's record kind: [`HookRecord`], in `webhooks.arrow`.
//! One stream holds the events in the one order deliveries follow, how
//! far the feed has read the ref and meta logs, each hook's cursor (moved
//! after a 2xx) and each delivery attempt (the history its admins see).

use vole_log::record::RecordKind;

/// What a row is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum RowKind {
    /// An event: `id` its number in the one order, `body` its payload.
    Event = 0,
    /// Hook `hook` is done with every event through `id` (delivered, or
    /// not for it).
    Delivered = 1,
    /// One attempt to deliver event `id` to hook `hook`: `body` is the
    /// attempt as JSON ([`crate::history::Attempt`]).
    Attempt = 2,
    /// The feed has read the ref log through `ref_seq` and the meta log
    /// through `meta_seq` (every row carries them; this one says it
    /// alone, when a read found no event).
    Fed = 3,
    /// Events through `id` were dropped for hook `hook` (its queue past
    /// its bound, or older than the log keeps): counted, not delivered.
    Dropped = 4,
}

impl RowKind {
    fn from_u8(value: u8) -> Option<RowKind> {
        Some(match value {
            0 => RowKind::Event,
            1 => RowKind::Delivered,
            2 => RowKind::Attempt,
            3 => RowKind::Fed,
            4 => RowKind::Dropped,
            _ => return None,
        })
    }
}

/// One row of the webhooks log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HookRecord {
    pub time_ns: i64,
    pub kind: RowKind,
    /// The event's number.
    pub id: u64,
    /// The hook's id (0 for an event or a feed position).
    pub hook: u64,
    /// The event's repo's incarnation and name.
    pub incarnation: String,
    pub repo: String,
    /// Gitea's event name (`push`, `issues`, ...).
    pub event: String,
    /// The ref a push, create or delete names (what a branch filter is
    /// matched against); empty for the others.
    pub ref_name: String,
    /// An event's payload (JSON), an attempt's record (JSON).
    pub body: String,
    /// How far the feed had read the ref log and the meta log.
    pub ref_seq: u64,
    pub meta_seq: u64,
}

impl HookRecord {
    /// A row of `kind` with nothing else set.
    pub fn new(kind: RowKind) -> HookRecord {
        HookRecord {
            time_ns: vole_log::now_ns(),
            kind,
            id: 0,
            hook: 0,
            incarnation: String::new(),
            repo: String::new(),
            event: String::new(),
            ref_name: String::new(),
            body: String::new(),
            ref_seq: 0,
            meta_seq: 0,
        }
    }
}

impl RecordKind for HookRecord {
    const KIND: &'static str = "webhook";
    const FILE_NAME: &'static str = "webhooks.arrow";
    const SCHEMA_VERSION: u32 = 1;

    vole_log::record_columns! {
        |r| {
            time: Time("time") = r.time_ns,
            kind: U8("kind") = r.kind as u8,
            id: U64("id") = r.id,
            hook: U64("hook") = r.hook,
            incarnation: Utf8("incarnation") = &r.incarnation,
            repo: Utf8("repo") = &r.repo,
            event: Utf8("event") = &r.event,
            ref_name: Utf8("ref") = &r.ref_name,
            body: Utf8("body") = &r.body,
            ref_seq: U64("ref_seq") = r.ref_seq,
            meta_seq: U64("meta_seq") = r.meta_seq,
        }
        |row| Ok(HookRecord {
            time_ns: time,
            kind: RowKind::from_u8(kind).ok_or_else(|| vole_log::record::BatchError::Value {
                column: "kind",
                row,
                reason: format!("unknown row kind {kind}"),
            })?,
            id,
            hook,
            incarnation: incarnation.to_string(),
            repo: repo.to_string(),
            event: event.to_string(),
            ref_name: ref_name.to_string(),
            body: body.to_string(),
            ref_seq,
            meta_seq,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_row_kind_round_trips_through_its_batch() {
        let rows: Vec<HookRecord> = [
            RowKind::Event,
            RowKind::Delivered,
            RowKind::Attempt,
            RowKind::Fed,
            RowKind::Dropped,
        ]
        .into_iter()
        .enumerate()
        .map(|(i, kind)| HookRecord {
            id: i as u64 + 7,
            hook: 3,
            repo: "ann/app".into(),
            body: "{\"ref\":\"refs/heads/main\"}".into(),
            ref_seq: 11,
            meta_seq: 12,
            ..HookRecord::new(kind)
        })
        .collect();
        let batch = HookRecord::batch(&rows).unwrap();
        assert_eq!(HookRecord::rows(&batch).unwrap(), rows);
    }
}
