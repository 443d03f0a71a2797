//! Thread id -> the kind and number of the issue or change request, as
//! the index keeps it for every thread. The store names threads with
//! ULIDs it makes, so a canonical ULID (26 upper-case Crockford
//! characters) is kept as its 128 bits and the kind and number packed in
//! one word: 24 bytes a slot, no allocation, where a `String` key was
//! 40 bytes a slot and a 32-byte allocation (over 100 bytes a thread at
//! a million). Any other id (none the store makes) keeps its text.

use std::collections::HashMap;

use super::{Index, ThreadKind};

/// The kind bit of a packed value; numbers at or past it are kept as
/// text ids are.
const CHANGE_BIT: u64 = 1 << 63;

type FastMap<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

/// Hashed with foldhash (seeded per process), not SipHash: a start's
/// read inserts every thread, and hashing was a twentieth of it; the ids
/// inserted are the store's own (ULIDs it made), not text a user picks
/// (a look-up may be any text: it finds nothing).
#[derive(Debug, Default)]
pub(super) struct ThreadIds {
    /// A canonical ULID's two halves -> kind bit | number.
    ulids: FastMap<(u64, u64), u64>,
    /// Every other id.
    other: FastMap<String, (ThreadKind, u64)>,
}

/// `id` as the 128 bits of a canonical ULID: only the text that ULID
/// prints as (the decoder also takes lower case, which would make two
/// ids one key).
fn ulid_bits(id: &str) -> Option<(u64, u64)> {
    let ulid = ulid::Ulid::from_string(id).ok()?;
    let mut text = [0u8; ulid::ULID_LEN];
    if ulid.array_to_str(&mut text) != id {
        return None;
    }
    let bits = ulid.0;
    Some(((bits >> 64) as u64, bits as u64))
}

/// Whether `id` is kept as its bits (a canonical ULID), not as text.
pub(crate) fn kept_as_bits(id: &str) -> bool {
    ulid_bits(id).is_some()
}

fn pack(kind: ThreadKind, number: u64) -> Option<u64> {
    let packed = match kind {
        ThreadKind::Issue => number,
        ThreadKind::Change => number | CHANGE_BIT,
    };
    (number < CHANGE_BIT).then_some(packed)
}

fn unpack(packed: u64) -> (ThreadKind, u64) {
    if packed & CHANGE_BIT == 0 {
        (ThreadKind::Issue, packed)
    } else {
        (ThreadKind::Change, packed & !CHANGE_BIT)
    }
}

impl ThreadIds {
    pub(super) fn insert(&mut self, id: &str, kind: ThreadKind, number: u64) {
        // An id is in one map only, whatever it was before.
        let bits = ulid_bits(id);
        match (bits, pack(kind, number)) {
            (Some(bits), Some(packed)) => {
                self.ulids.insert(bits, packed);
                if !self.other.is_empty() {
                    self.other.remove(id);
                }
            }
            _ => {
                if let Some(bits) = bits {
                    self.ulids.remove(&bits);
                }
                self.other.insert(id.to_string(), (kind, number));
            }
        }
    }

    pub(super) fn get(&self, id: &str) -> Option<(ThreadKind, u64)> {
        if let Some(bits) = ulid_bits(id)
            && let Some(packed) = self.ulids.get(&bits)
        {
            return Some(unpack(*packed));
        }
        self.other.get(id).copied()
    }

    /// Room for `more` ids kept as bits besides those held.
    pub(super) fn reserve(&mut self, more: usize) {
        self.ulids.reserve(more);
    }

    /// Every id with its kind and number, in no order (for comparing
    /// indexes).
    #[cfg(test)]
    pub(super) fn iter(&self) -> impl Iterator<Item = (String, (ThreadKind, u64))> + '_ {
        let ulids = self.ulids.iter().map(|((high, low), packed)| {
            let bits = (u128::from(*high) << 64) | u128::from(*low);
            (ulid::Ulid(bits).to_string(), unpack(*packed))
        });
        ulids.chain(self.other.iter().map(|(id, at)| (id.clone(), *at)))
    }
}

/// A thread put in the index: its id's kind and number, and the highest
/// number in use (fields, not `&mut Index`: the caller may hold an entry
/// of the map of issues).
pub(super) fn note_thread(
    threads: &mut ThreadIds,
    max_number: &mut u64,
    thread: (&str, ThreadKind, u64),
) {
    let (id, kind, number) = thread;
    threads.insert(id, kind, number);
    *max_number = (*max_number).max(number);
}

impl Index {
    /// Room for `more` issues and change requests besides those held,
    /// made at once (for a background read): the thread map grown by
    /// doubling rehashed every id it held and faulted in a fresh table
    /// each time (a tenth of a background read of a million); each
    /// kind's slots by number, and the facet keys gathered. The thread
    /// map gets room only for ids `kept_as_bits` (the store's ULIDs);
    /// others are kept as text.
    pub(crate) fn expect_threads(&mut self, more: (usize, usize), kept_as_bits: bool) {
        let (issues, changes) = more;
        if kept_as_bits {
            self.threads.reserve(issues.saturating_add(changes));
        }
        self.issues.expect(issues);
        self.changes.expect(changes);
        if let Some(deferred) = &mut self.deferred {
            deferred.issues.reserve(issues);
            deferred.changes.reserve(changes);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ulids_are_kept_as_bits_and_everything_else_as_text() {
        let mut ids = ThreadIds::default();
        let ulid = ulid::Ulid::new().to_string();
        ids.insert(&ulid, ThreadKind::Change, 7);
        assert_eq!(ids.ulids.len(), 1, "a canonical ULID is kept as its bits");
        assert_eq!(ids.get(&ulid), Some((ThreadKind::Change, 7)));
        // Lower case decodes to the same bits: it must stay another id.
        let lower = ulid.to_ascii_lowercase();
        assert_eq!(ids.get(&lower), None, "a lower-case ULID is another id");
        ids.insert(&lower, ThreadKind::Issue, 8);
        ids.insert("not-a-ulid", ThreadKind::Issue, 9);
        ids.insert(&ulid::Ulid::new().to_string(), ThreadKind::Issue, u64::MAX);
        assert_eq!(ids.other.len(), 3, "text ids and unpackable numbers");
        assert_eq!(ids.get(&ulid), Some((ThreadKind::Change, 7)));
        assert_eq!(ids.get(&lower), Some((ThreadKind::Issue, 8)));
        assert_eq!(ids.get("not-a-ulid"), Some((ThreadKind::Issue, 9)));
        let all: Vec<_> = ids.iter().collect();
        assert_eq!(all.len(), 4);
        assert!(all.contains(&(ulid.clone(), (ThreadKind::Change, 7))));
        assert!(
            all.iter()
                .any(|(_, at)| *at == (ThreadKind::Issue, u64::MAX))
        );
        // A second insert of an id replaces what it says, whichever map
        // either is in.
        ids.insert(&ulid, ThreadKind::Issue, u64::MAX);
        assert_eq!(ids.get(&ulid), Some((ThreadKind::Issue, u64::MAX)));
        ids.insert(&ulid, ThreadKind::Issue, 3);
        assert_eq!(ids.get(&ulid), Some((ThreadKind::Issue, 3)));
        assert_eq!(ids.iter().count(), 4, "each id once");
    }
}
