//! The index's secondary sets of issues and change requests: by state,
//! by label, by author, and their intersections. The sets are
//! order-statistic trees (`indexset`): besides their order, they answer
//! the n-th number and a number's rank in about constant time, so a page
//! deep in a list costs what its first page does. A background read
//! leaves them out and builds them whole at its end, in number order.

use std::collections::{BTreeMap, HashMap};
use std::hash::Hash;

use super::{Change, Index, Issue, Stored};

/// A set of issue or change request numbers, ranked.
pub(super) type Numbers = indexset::BTreeSet<u64>;

/// Secondary sets of one numbered kind (issue or change request).
#[derive(Debug)]
pub(super) struct Facets<S> {
    pub(super) by_state: HashMap<S, Numbers>,
    pub(super) by_label: HashMap<String, Numbers>,
    pub(super) by_author: HashMap<String, Numbers>,
}

impl<S> Default for Facets<S> {
    fn default() -> Self {
        Facets {
            by_state: HashMap::new(),
            by_label: HashMap::new(),
            by_author: HashMap::new(),
        }
    }
}

impl<S: Eq + Hash + Copy> Facets<S> {
    pub(super) fn add(&mut self, number: u64, state: S, labels: &[String], author: &str) {
        self.by_state.entry(state).or_default().insert(number);
        for label in labels {
            add_to(&mut self.by_label, label, number);
        }
        add_to(&mut self.by_author, author, number);
    }

    pub(super) fn remove(&mut self, number: u64, state: S, labels: &[String], author: &str) {
        fn drop_from<K, Q>(map: &mut HashMap<K, Numbers>, key: &Q, number: u64)
        where
            K: Eq + Hash + std::borrow::Borrow<Q>,
            Q: Eq + Hash + ?Sized,
        {
            if let Some(set) = map.get_mut(key) {
                set.remove(&number);
                if set.is_empty() {
                    map.remove(key);
                }
            }
        }
        drop_from(&mut self.by_state, &state, number);
        for label in labels {
            drop_from(&mut self.by_label, label, number);
        }
        drop_from(&mut self.by_author, author, number);
    }

    /// How many numbers match the facets with `state` (no set is copied:
    /// the count of the state's set when nothing else filters).
    pub(super) fn count(
        &self,
        all: &BTreeMap<u64, impl Sized>,
        state: S,
        label: Option<&str>,
        author: Option<&str>,
    ) -> usize {
        if label.is_none() && author.is_none() {
            return self.in_state(state);
        }
        self.select(all, Some(state), label, author).len()
    }

    pub(super) fn in_state(&self, state: S) -> usize {
        self.by_state.get(&state).map_or(0, Numbers::len)
    }

    /// Numbers matching every given facet, newest (highest) first.
    pub(super) fn select(
        &self,
        all: &BTreeMap<u64, impl Sized>,
        state: Option<S>,
        label: Option<&str>,
        author: Option<&str>,
    ) -> Vec<u64> {
        let mut sets: Vec<&Numbers> = Vec::new();
        let empty = Numbers::new();
        if let Some(state) = state {
            sets.push(self.by_state.get(&state).unwrap_or(&empty));
        }
        if let Some(label) = label {
            sets.push(self.by_label.get(label).unwrap_or(&empty));
        }
        if let Some(author) = author {
            sets.push(self.by_author.get(author).unwrap_or(&empty));
        }
        sets.sort_by_key(|s| s.len());
        match sets.split_first() {
            None => all.keys().rev().copied().collect(),
            Some((smallest, rest)) => smallest
                .iter()
                .rev()
                .filter(|n| rest.iter().all(|s| s.contains(n)))
                .copied()
                .collect(),
        }
    }
}

/// What a thread's facets are made of: its number, state, labels and
/// author.
type Keys<'a, S> = (u64, S, &'a [String], &'a str);

/// Below this many threads, the sets are built on one thread (the
/// tests' few thousand are built on two, so that path is the one they
/// check).
const BUILT_ON_TWO: usize = if cfg!(test) { 1_000 } else { 50_000 };

impl<S: Eq + Hash + Copy + Send> Facets<S> {
    /// The sets of every thread of `all`, in number order (each insert an
    /// append), the higher half of the numbers on a second thread: the
    /// walk, a cache miss a thread for its boxed document, is most of
    /// the cost, and the repo's read is done, its reader's core free. The
    /// higher half's sets are then appended to the lower half's.
    fn built<T: super::stored::HasBody + Sync>(
        all: &BTreeMap<u64, Stored<T>>,
        keys: impl Fn(&T) -> Keys<'_, S> + Sync,
    ) -> Facets<S> {
        let half = |range: (std::ops::Bound<u64>, std::ops::Bound<u64>)| {
            let mut facets = Facets::default();
            for stored in all.range(range).map(|(_, s)| s) {
                let (number, state, labels, author) = keys(stored.fields());
                facets.add(number, state, labels, author);
            }
            facets
        };
        use std::ops::Bound::{Excluded, Included, Unbounded};
        let split = (all.len() >= BUILT_ON_TWO)
            .then(|| all.keys().nth(all.len() / 2).copied())
            .flatten();
        let Some(split) = split else {
            return half((Unbounded, Unbounded));
        };
        std::thread::scope(|scope| {
            let higher = std::thread::Builder::new()
                .name("vole-meta-facets".into())
                .spawn_scoped(scope, || half((Included(split), Unbounded)));
            let mut lower = half((Unbounded, Excluded(split)));
            let higher = match higher {
                Ok(thread) => thread
                    .join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic)),
                // No thread to be had: on this one.
                Err(_) => half((Included(split), Unbounded)),
            };
            lower.append(higher);
            lower
        })
    }

    /// Appends `higher`'s sets, every number of which is above each of
    /// this one's.
    fn append(&mut self, higher: Facets<S>) {
        fn join<K: Eq + Hash>(lower: &mut HashMap<K, Numbers>, higher: HashMap<K, Numbers>) {
            for (key, numbers) in higher {
                let set = lower.entry(key).or_default();
                for number in numbers.iter() {
                    set.insert(*number);
                }
            }
        }
        join(&mut self.by_state, higher.by_state);
        join(&mut self.by_label, higher.by_label);
        join(&mut self.by_author, higher.by_author);
    }
}

/// Adds `number` to `key`'s set, the key allocated only for a new set.
fn add_to(map: &mut HashMap<String, Numbers>, key: &str, number: u64) {
    match map.get_mut(key) {
        Some(set) => {
            set.insert(number);
        }
        None => {
            map.insert(key.to_string(), Numbers::from_iter([number]));
        }
    }
}

impl Index {
    /// Leaves the facets (by state, label, author) out of what is applied
    /// until [`Index::build_deferred_facets`]: for a background read,
    /// whose documents come in the shards' order, which is no order of
    /// numbers. Put in one by one, each was an insert in the middle of a
    /// ranked set's node (a shift of up to a node's thousand numbers),
    /// a fifth of the read; built from the maps, each is an append. The
    /// repo is not served until then (`loading.rs`: every call that reads
    /// the facets waits for the repo to be whole, and a repo given up on,
    /// stopped or deleted during its read never is).
    pub(crate) fn defer_facets(&mut self) {
        self.facets_deferred = true;
    }

    /// The facets built whole from the issues and change requests held,
    /// in number order, if they were deferred.
    pub(crate) fn build_deferred_facets(&mut self) {
        if !std::mem::take(&mut self.facets_deferred) {
            return;
        }
        self.issue_facets = Facets::built(&self.issues, |i: &Issue| {
            (i.number, i.state, &i.labels[..], i.author.as_str())
        });
        self.change_facets = Facets::built(&self.changes, |c: &Change| {
            (c.number, c.state, &c.labels[..], c.author.as_str())
        });
    }
}
