//! The index's secondary sets of issues and change requests: by state,
//! by label, by author, and their intersections. The sets are
//! order-statistic trees (`indexset`): besides their order, they answer
//! the n-th number and a number's rank in about constant time, so a page
//! deep in a list costs what its first page does. A background read
//! gathers the keys of what it applies and builds the sets at its end,
//! in number order ([`gathered`]).

use std::collections::HashMap;
use std::hash::Hash;

use super::{ByNumber, Change, ChangeState, Index, Issue, IssueState};

mod gathered;
pub(super) use gathered::Gathered;

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

/// What the facets hold of an issue or a change request.
pub(super) trait Faceted {
    type State: Eq + Hash + Copy;
    fn number(&self) -> u64;
    fn state(&self) -> Self::State;
    fn labels(&self) -> &[String];
    fn author(&self) -> &str;
}

impl Faceted for Issue {
    type State = IssueState;
    fn number(&self) -> u64 {
        self.number
    }
    fn state(&self) -> IssueState {
        self.state
    }
    fn labels(&self) -> &[String] {
        &self.labels
    }
    fn author(&self) -> &str {
        &self.author
    }
}

impl Faceted for Change {
    type State = ChangeState;
    fn number(&self) -> u64 {
        self.number
    }
    fn state(&self) -> ChangeState {
        self.state
    }
    fn labels(&self) -> &[String] {
        &self.labels
    }
    fn author(&self) -> &str {
        &self.author
    }
}

impl<S: Eq + Hash + Copy> Facets<S> {
    /// `new` in the sets in place of `old`, the version held if any; or,
    /// while the facets are deferred, `old` out of them and `new`'s keys
    /// noted in `gathered` (so the sets never hold a number's keys that
    /// `gathered` holds too).
    pub(super) fn put<T: Faceted<State = S>>(
        &mut self,
        old: Option<&T>,
        new: &T,
        gathered: Option<&mut Gathered<S>>,
    ) {
        if let Some(old) = old {
            self.remove(old);
        }
        match gathered {
            Some(gathered) => gathered.note(new),
            None => self.add(new),
        }
    }

    fn add(&mut self, doc: &impl Faceted<State = S>) {
        let number = doc.number();
        self.by_state.entry(doc.state()).or_default().insert(number);
        for label in doc.labels() {
            add_to(&mut self.by_label, label, number);
        }
        add_to(&mut self.by_author, doc.author(), number);
    }

    fn remove(&mut self, doc: &impl Faceted<State = S>) {
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
        let number = doc.number();
        drop_from(&mut self.by_state, &doc.state(), number);
        for label in doc.labels() {
            drop_from(&mut self.by_label, label, number);
        }
        drop_from(&mut self.by_author, doc.author(), number);
    }

    /// How many numbers match the facets with `state` (no set is copied:
    /// the count of the state's set when nothing else filters).
    pub(super) fn count(
        &self,
        all: &ByNumber<impl Sized>,
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
        all: &ByNumber<impl Sized>,
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
            None => all.keys().rev().collect(),
            Some((smallest, rest)) => smallest
                .iter()
                .rev()
                .filter(|n| rest.iter().all(|s| s.contains(n)))
                .copied()
                .collect(),
        }
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

/// The keys of what is applied while the facets are deferred.
#[derive(Debug, Default)]
pub(super) struct Deferred {
    pub(super) issues: Gathered<IssueState>,
    pub(super) changes: Gathered<ChangeState>,
}

impl Index {
    /// Leaves the facets (by state, label, author) out of what is applied
    /// until [`Index::build_deferred_facets`], gathering the keys of each
    /// document instead: for a background read, whose documents come in
    /// the shards' order, which is no order of numbers. Put in one by
    /// one, each was an insert in the middle of a ranked set's node (a
    /// shift of up to a node's thousand numbers), a fifth of the read;
    /// built at the end, each is an append. The repo is not served until
    /// then (`loading.rs`: every call that reads the facets waits for the
    /// repo to be whole, and a repo given up on, stopped or deleted
    /// during its read never is).
    pub(crate) fn defer_facets(&mut self) {
        self.deferred.get_or_insert_with(Box::default);
    }

    /// The facets with what was gathered while they were deferred, built
    /// in number order, if they were.
    pub(crate) fn build_deferred_facets(&mut self) {
        let Some(deferred) = self.deferred.take() else {
            return;
        };
        let Deferred { issues, changes } = *deferred;
        self.issue_facets = issues.built_into(std::mem::take(&mut self.issue_facets));
        self.change_facets = changes.built_into(std::mem::take(&mut self.change_facets));
    }
}
