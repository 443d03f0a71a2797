//! Issues and change requests by number: a slot a number, since the
//! server gives numbers in sequence from 1. A start's read puts a million
//! in, in the shards' order (no order of numbers): in a B-tree each was a
//! search down the tree and an insert shifting a node, 13% of a
//! million-issue read; a slot is one write. A number far past the slots
//! (one the server did not give: a hand-made or restored tree) goes to a
//! B-tree beside them instead, so the slots stay within a small multiple
//! of the documents held whatever the numbers.

use std::collections::BTreeMap;

/// Slots are added for a number at most this far past twice the
/// documents held (or expected); past it, the number is kept in the
/// B-tree.
const SLOTS_AHEAD: usize = 4096;

/// A map from number to `V`, iterated in number order.
#[derive(Debug)]
pub(crate) struct ByNumber<V> {
    /// `slots[n]`: number `n`.
    slots: Vec<Option<V>>,
    /// The numbers at or past `slots.len()` (every key is).
    beyond: BTreeMap<u64, V>,
    len: usize,
    /// Documents a read expects to put in: the slots may be made for
    /// them ahead of their arrival.
    expected: usize,
}

impl<V> Default for ByNumber<V> {
    fn default() -> Self {
        ByNumber {
            slots: Vec::new(),
            beyond: BTreeMap::new(),
            len: 0,
            expected: 0,
        }
    }
}

impl<V> ByNumber<V> {
    fn slot(number: u64) -> Option<usize> {
        usize::try_from(number).ok()
    }

    pub(crate) fn get(&self, number: &u64) -> Option<&V> {
        match Self::slot(*number).and_then(|n| self.slots.get(n)) {
            Some(slot) => slot.as_ref(),
            None => self.beyond.get(number),
        }
    }

    pub(crate) fn get_mut(&mut self, number: &u64) -> Option<&mut V> {
        match Self::slot(*number).and_then(|n| self.slots.get_mut(n)) {
            Some(slot) => slot.as_mut(),
            None => self.beyond.get_mut(number),
        }
    }

    pub(crate) fn contains_key(&self, number: &u64) -> bool {
        self.get(number).is_some()
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Room for `more` documents than are held: their slots are made
    /// once, not grown by doubling (each growth a copy).
    pub(crate) fn expect(&mut self, more: usize) {
        self.expected = self.expected.max(self.len.saturating_add(more));
        // An eighth to spare: the estimate is made again for each shard.
        let wanted = self.expected.saturating_add(self.expected / 8);
        if self.slots.capacity() < wanted {
            self.slots.reserve_exact(wanted - self.slots.len());
        }
    }

    /// Puts `value` at `number`; the value it held back.
    pub(crate) fn insert(&mut self, number: u64, value: V) -> Option<V> {
        let old = match Self::slot(number) {
            Some(n) if n < self.slots.len() => self.slots[n].replace(value),
            Some(n) if n < self.reach() => {
                let old = self.beyond.remove(&number);
                self.slots.resize_with(n + 1, || None);
                // The numbers the slots now cover leave the B-tree.
                let beyond = self.beyond.split_off(&(self.slots.len() as u64));
                for (k, v) in std::mem::replace(&mut self.beyond, beyond) {
                    self.slots[k as usize] = Some(v);
                }
                self.slots[n] = Some(value);
                old
            }
            _ => self.beyond.insert(number, value),
        };
        self.len += usize::from(old.is_none());
        old
    }

    /// How far the slots may reach: a small multiple of the documents
    /// held or expected.
    fn reach(&self) -> usize {
        self.len
            .max(self.expected)
            .saturating_mul(2)
            .saturating_add(SLOTS_AHEAD)
    }

    /// The values in number order.
    pub(crate) fn values(&self) -> impl DoubleEndedIterator<Item = &V> {
        self.slots.iter().flatten().chain(self.beyond.values())
    }

    /// The numbers held, in order.
    pub(crate) fn keys(&self) -> impl DoubleEndedIterator<Item = u64> + '_ {
        let slots = self.slots.iter().enumerate();
        slots
            .filter(|(_, v)| v.is_some())
            .map(|(n, _)| n as u64)
            .chain(self.beyond.keys().copied())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_near_and_far_are_kept_in_order_and_far_ones_cost_no_slots() {
        let mut map = ByNumber::default();
        let mut kept = BTreeMap::new();
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for _ in 0..20_000 {
            let number = match next() % 10 {
                0 => next(),                    // anywhere in u64
                1 => 10_000 + next() % 100_000, // past the slots, for now
                _ => next() % 10_000,
            };
            let value = next();
            assert_eq!(map.insert(number, value), kept.insert(number, value));
            assert_eq!(map.len(), kept.len());
        }
        for (number, value) in &kept {
            assert_eq!(map.get(number), Some(value), "number {number}");
        }
        assert_eq!(map.get(&u64::MAX), kept.get(&u64::MAX));
        let keys: Vec<u64> = kept.keys().copied().collect();
        assert_eq!(map.keys().collect::<Vec<_>>(), keys);
        assert_eq!(
            map.keys().rev().collect::<Vec<_>>(),
            keys.iter().rev().copied().collect::<Vec<_>>()
        );
        assert_eq!(
            map.values().collect::<Vec<_>>(),
            kept.values().collect::<Vec<_>>()
        );
        assert_eq!(
            map.values().rev().collect::<Vec<_>>(),
            kept.values().rev().collect::<Vec<_>>()
        );
        assert!(
            map.slots.len() <= 2 * map.len() + SLOTS_AHEAD + 1,
            "{} slots for {} numbers",
            map.slots.len(),
            map.len()
        );
        assert!(
            !map.beyond.is_empty() && map.slots.len() > 10_000,
            "anti-vacuity: both parts are used ({} beyond, {} slots)",
            map.beyond.len(),
            map.slots.len()
        );
        // Every key of the B-tree is past the slots.
        assert!(map.beyond.keys().all(|&k| k >= map.slots.len() as u64));
        if let Some(&far) = map.beyond.keys().next() {
            *map.get_mut(&far).unwrap() = 7;
            assert_eq!(map.get(&far), Some(&7));
        }
    }

    #[test]
    fn numbers_in_descending_order_and_unexpected_end_in_the_slots_as_they_are_reached() {
        let mut map = ByNumber::default();
        for number in (1..=50_000u64).rev() {
            assert_eq!(map.insert(number, number), None);
        }
        // Most came before the slots could reach them; those the slots
        // reached since moved there.
        let slotted = map.slots.iter().flatten().count();
        assert_eq!(slotted + map.beyond.len(), 50_000);
        assert!(slotted > 0 && map.slots.len() <= 2 * 50_000 + SLOTS_AHEAD + 1);
        assert!(map.beyond.keys().all(|&k| k >= map.slots.len() as u64));
        assert!(map.keys().eq(1..=50_000u64));
        assert!(map.values().copied().eq(1..=50_000u64));
    }

    #[test]
    fn an_expected_read_makes_its_slots_once() {
        let mut map = ByNumber::default();
        map.expect(100_000);
        let capacity = map.slots.capacity();
        assert!(capacity >= 100_000, "{capacity}");
        // In the shards' order: a number far ahead first.
        for number in (1..=100_000u64).rev() {
            map.insert(number, number);
        }
        assert_eq!(map.slots.capacity(), capacity, "the slots grew again");
        assert!(map.beyond.is_empty());
    }
}
