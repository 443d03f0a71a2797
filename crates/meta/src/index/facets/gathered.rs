//! The facet keys of what a background read applies, gathered as each
//! document is applied (its fields are at hand then) and built into the
//! ranked sets at the read's end. Built by walking the maps instead, the
//! end cost a cache miss or two for every document (a boxed document and
//! its author's string, put in in the shards' order and walked in number
//! order): 310 of a million-issue read's 1,040 ms, on one thread, with
//! nothing else to do.

use std::collections::HashMap;
use std::hash::Hash;

use super::{Faceted, Facets, Numbers};

/// Values by id, each once: a document's keys are kept as an id while
/// gathered.
#[derive(Debug)]
struct Interned<T> {
    ids: HashMap<T, usize, foldhash::fast::RandomState>,
    values: Vec<T>,
    /// The id last given: a read's documents often have the keys of the
    /// one before (no hash then).
    last: usize,
}

impl<T> Default for Interned<T> {
    fn default() -> Self {
        Interned {
            ids: HashMap::default(),
            values: Vec::new(),
            last: 0,
        }
    }
}

impl<T: Eq + Hash + Clone> Interned<T> {
    fn id<Q>(&mut self, value: &Q) -> usize
    where
        T: std::borrow::Borrow<Q>,
        Q: Eq + Hash + ToOwned<Owned = T> + ?Sized,
    {
        if self
            .values
            .get(self.last)
            .is_some_and(|v| v.borrow() == value)
        {
            return self.last;
        }
        let id = match self.ids.get(value) {
            Some(&id) => id,
            None => {
                let id = self.values.len();
                self.values.push(value.to_owned());
                self.ids.insert(value.to_owned(), id);
                id
            }
        };
        self.last = id;
        id
    }
}

/// What the facets hold of a document: its state, author and labels
/// (ids of [`Gathered`]'s names).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Keys<S> {
    state: S,
    author: usize,
    labels: Box<[usize]>,
}

/// The keys of every document of one kind applied since the facets were
/// deferred, in the order applied (a number's last is the version held:
/// the index applies only newer versions). A document costs 16 bytes
/// here, its number and the id of its keys, which documents share.
#[derive(Debug)]
pub(in crate::index) struct Gathered<S> {
    applied: Vec<(u64, usize)>,
    keys: Interned<Keys<S>>,
    authors: Interned<String>,
    labels: Interned<String>,
    /// The labels of the document being noted (a buffer kept).
    label_ids: Vec<usize>,
}

impl<S> Default for Gathered<S> {
    fn default() -> Self {
        Gathered {
            applied: Vec::new(),
            keys: Interned::default(),
            authors: Interned::default(),
            labels: Interned::default(),
            label_ids: Vec::new(),
        }
    }
}

impl<S: Eq + Hash + Copy> Gathered<S> {
    /// Room for `more` documents, with an eighth to spare: the estimate
    /// is made again for each shard, and each move is a copy.
    pub(in crate::index) fn reserve(&mut self, more: usize) {
        if self.applied.capacity() - self.applied.len() < more {
            self.applied.reserve_exact(more + more / 8);
        }
    }

    /// `doc` was applied.
    pub(in crate::index) fn note(&mut self, doc: &impl Faceted<State = S>) {
        self.label_ids.clear();
        for label in doc.labels() {
            let id = self.labels.id(label.as_str());
            // A label twice on one document is one key, as in its set.
            if !self.label_ids.contains(&id) {
                self.label_ids.push(id);
            }
        }
        let author = self.authors.id(doc.author());
        let state = doc.state();
        // `Interned::id`'s own look at the last keys, made before a `Keys`
        // is: making one allocates its labels.
        let last = self.keys.values.get(self.keys.last);
        let keys = match last {
            Some(k)
                if k.state == state && k.author == author && *k.labels == self.label_ids[..] =>
            {
                self.keys.last
            }
            _ => self.keys.id(&Keys {
                state,
                author,
                labels: self.label_ids.as_slice().into(),
            }),
        };
        self.applied.push((doc.number(), keys));
    }

    /// The sets of `facets` (which hold nothing of the numbers gathered:
    /// [`Facets::put`] takes a held version out of them when a newer one
    /// is gathered) with the gathered documents in, each set built anew
    /// in number order, where every insert is an append.
    pub(in crate::index) fn built_into(mut self, facets: Facets<S>) -> Facets<S> {
        // Stable: a number's applications stay in the order applied.
        self.applied.sort_by_key(|(number, _)| *number);
        let Facets {
            by_state: mut held_states,
            by_label: mut held_labels,
            by_author: mut held_authors,
        } = facets;
        let mut states: Vec<(S, Merging)> = Vec::new();
        let mut authors: Vec<Merging> = (self.authors.values.iter())
            .map(|a| Merging::of(held_authors.remove(a)))
            .collect();
        let mut labels: Vec<Merging> = (self.labels.values.iter())
            .map(|l| Merging::of(held_labels.remove(l)))
            .collect();
        for same in self.applied.chunk_by(|a, b| a.0 == b.0) {
            let Some(&(number, keys)) = same.last() else {
                continue;
            };
            let keys = &self.keys.values[keys];
            let state = match states.iter_mut().position(|(s, _)| *s == keys.state) {
                Some(at) => at,
                None => {
                    let held = held_states.remove(&keys.state);
                    states.push((keys.state, Merging::of(held)));
                    states.len() - 1
                }
            };
            states[state].1.push(number);
            authors[keys.author].push(number);
            for &label in &keys.labels {
                labels[label].push(number);
            }
        }
        let mut built = Facets {
            by_state: held_states,
            by_label: held_labels,
            by_author: held_authors,
        };
        let sets = |m: Merging| Some(m.finish()).filter(|s| !s.is_empty());
        for (state, merging) in states {
            built.by_state.extend(sets(merging).map(|s| (state, s)));
        }
        for (author, merging) in self.authors.values.into_iter().zip(authors) {
            built.by_author.extend(sets(merging).map(|s| (author, s)));
        }
        for (label, merging) in self.labels.values.into_iter().zip(labels) {
            built.by_label.extend(sets(merging).map(|s| (label, s)));
        }
        built
    }
}

/// One key's set built anew in number order: the numbers it held (none
/// of them gathered) merged with the gathered ones, as they come.
struct Merging {
    set: Numbers,
    /// What the set held, ascending; `held[next..]` not yet put in.
    held: Vec<u64>,
    next: usize,
}

impl Merging {
    fn of(held: Option<Numbers>) -> Merging {
        Merging {
            set: Numbers::new(),
            held: held.map(|h| h.into_iter().collect()).unwrap_or_default(),
            next: 0,
        }
    }

    /// `number`, greater than any pushed before, in the set.
    fn push(&mut self, number: u64) {
        while let Some(&h) = self.held.get(self.next).filter(|&&h| h < number) {
            self.set.insert(h);
            self.next += 1;
        }
        self.set.insert(number);
    }

    fn finish(mut self) -> Numbers {
        for &h in &self.held[self.next..] {
            self.set.insert(h);
        }
        self.set
    }
}
