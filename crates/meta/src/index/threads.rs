//! Issues and change requests listed together, as Gitea's issue list
//! answers (`type` absent): one number space, newest first, filtered by
//! state, any of some labels, author, update time and a text.

use super::facets::Numbers;
use super::*;
use crate::MetaError;
use crate::bodies::DocReader;

/// An issue or a change request.
#[derive(Debug, Clone)]
pub enum AnyThread {
    Issue(Issue),
    Change(Change),
}

impl AnyThread {
    pub fn number(&self) -> u64 {
        match self {
            AnyThread::Issue(i) => i.number,
            AnyThread::Change(c) => c.number,
        }
    }
}

/// Which kinds a list holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ThreadKinds {
    #[default]
    Both,
    Issues,
    Changes,
}

/// A state as Gitea's lists take it: a merged change request is closed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ThreadState {
    #[default]
    Open,
    Closed,
    All,
}

/// The most bytes of a list's text filter (it is matched against every
/// title and body the filters leave).
pub const MAX_QUERY_BYTES: usize = 256;

/// The most bodies one text filter reads back from git (the index holds
/// bodies up to [`super::stored::INLINE_BODY_BYTES`]): the newest
/// threads' first; past them, a thread matches by its title alone.
pub const MAX_TEXT_BODY_READS: usize = 10_000;

/// The most bytes of bodies one text filter reads back from git: with
/// [`MAX_TEXT_BODY_READS`] alone, 10,000 bodies of up to 256 KiB each
/// would be 2.5 GiB of blobs inflated and parsed for one request. Past
/// it, as past the count, threads match by title.
pub const MAX_TEXT_BODY_BYTES: u64 = 32 << 20;

/// A text filter's candidate: its number, and the blob its body is left
/// in with that body's length (`None`: kept already, by its title or a
/// body the index holds).
pub(crate) type TextCandidate = (u64, Option<(ObjectId, u64)>);

/// An issue or a change request as the index holds it (a long body left
/// in git), picked under the repo's lock and made whole after it.
#[derive(Debug, Clone)]
pub(crate) enum StoredThread {
    Issue(Stored<Issue>),
    Change(Stored<Change>),
}

impl StoredThread {
    /// Whole, a body read with `repo` if need be ([`DocReader::whole_in`]).
    pub(crate) fn whole(
        self,
        docs: &DocReader,
        repo: &mut Option<gix::Repository>,
    ) -> Result<AnyThread, MetaError> {
        Ok(match self {
            StoredThread::Issue(i) => AnyThread::Issue(docs.whole_in(repo, i)?),
            StoredThread::Change(c) => AnyThread::Change(docs.whole_in(repo, c)?),
        })
    }
}

/// What a list picked under the repo's lock.
pub(crate) enum ThreadPick {
    /// Its page, to be made whole.
    Page(Page<StoredThread>),
    /// A text filter's candidates, newest first: `None`, kept (by its
    /// title or a body the index holds); `Some(blob)`, kept if the body
    /// in that blob has the text ([`ThreadPick::decide`]).
    Text {
        text: TextMatch,
        candidates: Vec<TextCandidate>,
    },
}

impl ThreadPick {
    /// The numbers a text filter keeps, newest first: the bodies in git
    /// read back (at most [`MAX_TEXT_BODY_READS`] of them and
    /// [`MAX_TEXT_BODY_BYTES`] in all, the newest threads'; from the first
    /// past either bound on, a thread is kept by its title alone), outside
    /// the repo's lock.
    pub(crate) fn decide(
        text: &TextMatch,
        candidates: Vec<TextCandidate>,
        docs: &DocReader,
    ) -> Result<Vec<u64>, MetaError> {
        Self::decide_reading(
            text,
            candidates,
            docs,
            MAX_TEXT_BODY_READS,
            MAX_TEXT_BODY_BYTES,
        )
    }

    /// [`ThreadPick::decide`] reading at most `max_reads` bodies and
    /// `max_bytes` of them.
    pub(crate) fn decide_reading(
        text: &TextMatch,
        candidates: Vec<TextCandidate>,
        docs: &DocReader,
        max_reads: usize,
        max_bytes: u64,
    ) -> Result<Vec<u64>, MetaError> {
        let mut repo = None;
        let mut reads_left = max_reads;
        let mut bytes_left = max_bytes;
        let mut kept = Vec::new();
        for (number, blob) in candidates {
            let keep = match blob {
                None => true,
                Some((_, len)) if reads_left == 0 || len > bytes_left => {
                    // Read no further: past a bound, the rest by title.
                    reads_left = 0;
                    false
                }
                Some((blob, len)) => {
                    reads_left -= 1;
                    bytes_left -= len;
                    text.is_match(&*docs.body(&mut repo, blob)?)
                }
            };
            if keep {
                kept.push(number);
            }
        }
        Ok(kept)
    }
}

/// A list's filters; empty ones match everything.
#[derive(Debug, Clone, Default)]
pub struct ThreadQuery {
    pub kinds: ThreadKinds,
    pub state: ThreadState,
    /// Any of these labels (names, exactly).
    pub labels: Vec<String>,
    pub author: Option<String>,
    /// Updated at or after / at or before (RFC 3339, compared as text:
    /// the store writes UTC to the millisecond).
    pub since: Option<String>,
    pub before: Option<String>,
    /// In the title or body, ASCII case aside.
    pub text: Option<String>,
}

/// The number `skip` places from the newest of the union of `sets`
/// (disjoint), found by rank: in one set by its position; in several by
/// a search over the numbers for the highest that has more than `skip`
/// of the union at or above it (each step a rank in each set).
fn newest_at(sets: &[&Numbers], skip: usize) -> Option<u64> {
    let total: usize = sets.iter().map(|set| set.len()).sum();
    if skip >= total {
        return None;
    }
    if let [set] = sets {
        return set.get_index(set.len() - 1 - skip).copied();
    }
    // How many of the union are at or above `n`.
    let at_or_above = |n: u64| -> usize { sets.iter().map(|set| set.len() - set.rank(&n)).sum() };
    let (mut low, mut high) = (
        0u64,
        sets.iter().filter_map(|set| set.last()).copied().max()?,
    );
    // Invariant: at_or_above(low) > skip, at_or_above(high + 1) <= skip.
    while low < high {
        let mid = low + (high - low).div_ceil(2);
        if at_or_above(mid) > skip {
            low = mid;
        } else {
            high = mid - 1;
        }
    }
    Some(low)
}

impl ThreadQuery {
    /// Whether nothing but the kinds and the state filters (a list the
    /// index's sets answer by rank, without a scan).
    pub fn by_state_only(&self) -> bool {
        self.labels.is_empty()
            && self.author.is_none()
            && self.since.is_none()
            && self.before.is_none()
            && self.text.is_none()
    }

    /// Whether a thread passes the filters its fields answer (the
    /// labels are answered by the index's sets, the text once the rest
    /// have filtered, in [`Index::threads`]).
    fn keeps(&self, author: &str, updated: &str) -> bool {
        // Names as Gitea matches them: ASCII case aside.
        if self
            .author
            .as_deref()
            .is_some_and(|a| !a.eq_ignore_ascii_case(author))
        {
            return false;
        }
        if self.since.as_deref().is_some_and(|s| updated < s) {
            return false;
        }
        self.before.as_deref().is_none_or(|b| updated <= b)
    }
}

/// `q` matched ASCII case aside, in time linear in the text searched
/// (an automaton, not a window at every byte), without copying it.
pub(crate) type TextMatch = aho_corasick::AhoCorasick;

fn text_match(text: &str) -> Option<TextMatch> {
    aho_corasick::AhoCorasick::builder()
        .ascii_case_insensitive(true)
        .build([text])
        .ok()
}

impl Index {
    /// A page of the issues and change requests `query` keeps, newest
    /// first.
    pub(crate) fn pick_threads(&self, query: &ThreadQuery, page: Pagination) -> ThreadPick {
        if query.by_state_only() {
            return ThreadPick::Page(self.threads_by_state(query, page));
        }
        let text = query
            .text
            .as_deref()
            .filter(|t| !t.is_empty())
            .and_then(text_match);
        // The numbers that carry one of the labels asked for, from the
        // index's sets by label (names ASCII case aside): one look at
        // each of the repo's label names, not one per thread.
        let labelled: Option<std::collections::HashSet<u64>> =
            (!query.labels.is_empty()).then(|| {
                let wanted =
                    |name: &String| query.labels.iter().any(|w| w.eq_ignore_ascii_case(name));
                self.issue_facets
                    .by_label
                    .iter()
                    .chain(self.change_facets.by_label.iter())
                    .filter(|(name, _)| wanted(name))
                    .flat_map(|(_, numbers)| numbers.iter().copied())
                    .collect()
            });
        let labelled = |n: u64| labelled.as_ref().is_none_or(|set| set.contains(&n));
        let issues: Vec<u64> = if query.kinds == ThreadKinds::Changes {
            Vec::new()
        } else {
            self.issues
                .values()
                .rev()
                .filter(|s| match query.state {
                    ThreadState::Open => s.fields().state == IssueState::Open,
                    ThreadState::Closed => s.fields().state == IssueState::Closed,
                    ThreadState::All => true,
                })
                .filter(|s| labelled(s.fields().number))
                .filter(|s| query.keeps(&s.fields().author, &s.fields().updated_at))
                .map(|s| s.fields().number)
                .collect()
        };
        let changes: Vec<u64> = if query.kinds == ThreadKinds::Issues {
            Vec::new()
        } else {
            self.changes
                .values()
                .rev()
                .filter(|s| match query.state {
                    ThreadState::Open => s.fields().state == ChangeState::Open,
                    ThreadState::Closed => s.fields().state != ChangeState::Open,
                    ThreadState::All => true,
                })
                .filter(|s| labelled(s.fields().number))
                .filter(|s| query.keeps(&s.fields().author, &s.fields().updated_at))
                .map(|s| s.fields().number)
                .collect()
        };
        // One number space: newest first across both.
        let mut numbers = issues;
        numbers.extend(changes);
        numbers.sort_unstable_by(|a, b| b.cmp(a));
        // The text last, newest first across both kinds: what it leaves
        // to bodies in git is read back after the lock is let go.
        let Some(text) = text else {
            return ThreadPick::Page(Page {
                items: self.stored_threads(page.slice(&numbers).copied()),
                total: numbers.len(),
            });
        };
        let mut candidates = Vec::new();
        for n in numbers {
            let (title, held, blob, len) = match (self.issues.get(&n), self.changes.get(&n)) {
                (Some(i), _) => (
                    &i.fields().title,
                    i.held_body(),
                    i.body_blob(),
                    i.body_len(),
                ),
                (None, Some(c)) => (
                    &c.fields().title,
                    c.held_body(),
                    c.body_blob(),
                    c.body_len(),
                ),
                (None, None) => continue,
            };
            if text.is_match(title) || held.is_some_and(|body| text.is_match(body)) {
                candidates.push((n, None));
            } else if let Some(blob) = blob {
                candidates.push((n, Some((blob, len))));
            }
        }
        ThreadPick::Text { text, candidates }
    }

    /// The threads `numbers` name, in order.
    pub(crate) fn stored_threads(&self, numbers: impl Iterator<Item = u64>) -> Vec<StoredThread> {
        numbers
            .filter_map(|n| match (self.issues.get(&n), self.changes.get(&n)) {
                (Some(issue), _) => Some(StoredThread::Issue(issue.clone())),
                (None, Some(change)) => Some(StoredThread::Change(change.clone())),
                (None, None) => None,
            })
            .collect()
    }

    /// [`Index::threads`] when only the kinds and the state filter: the
    /// index's ranked sets by state hold the numbers in order and their
    /// count, and find a page's first number by rank, so a page costs its
    /// length, however deep it is.
    fn threads_by_state(&self, query: &ThreadQuery, page: Pagination) -> Page<StoredThread> {
        let issue_states: &[IssueState] = match (query.kinds, query.state) {
            (ThreadKinds::Changes, _) => &[],
            (_, ThreadState::Open) => &[IssueState::Open],
            (_, ThreadState::Closed) => &[IssueState::Closed],
            (_, ThreadState::All) => &[IssueState::Open, IssueState::Closed],
        };
        let change_states: &[ChangeState] = match (query.kinds, query.state) {
            (ThreadKinds::Issues, _) => &[],
            (_, ThreadState::Open) => &[ChangeState::Open],
            (_, ThreadState::Closed) => &[ChangeState::Merged, ChangeState::Closed],
            (_, ThreadState::All) => &[ChangeState::Open, ChangeState::Merged, ChangeState::Closed],
        };
        // A number is in one state of one kind: the sets are disjoint.
        let sets: Vec<&Numbers> = issue_states
            .iter()
            .filter_map(|state| self.issue_facets.by_state.get(state))
            .chain(
                change_states
                    .iter()
                    .filter_map(|state| self.change_facets.by_state.get(state)),
            )
            .filter(|set| !set.is_empty())
            .collect();
        let total = sets.iter().map(|set| set.len()).sum();
        let items = match newest_at(&sets, page.offset()) {
            None => Vec::new(),
            Some(first) => {
                // Each set's cursor: how many of its numbers are at or
                // below `first` (by rank and position alone: the crate's
                // range iterators are not relied on).
                let mut below: Vec<usize> = sets.iter().map(|set| set.rank(&(first + 1))).collect();
                let numbers = std::iter::from_fn(|| {
                    // The newest of the sets' next numbers (at most five).
                    let (number, i) = below
                        .iter()
                        .enumerate()
                        .filter(|(_, left)| **left > 0)
                        .filter_map(|(i, left)| Some((*sets[i].get_index(left - 1)?, i)))
                        .max()?;
                    below[i] -= 1;
                    Some(number)
                })
                .take(page.per_page());
                self.stored_threads(numbers)
            }
        };
        Page { items, total }
    }

    /// The open change request from `source` into `target`, if one is.
    pub fn open_change_between(&self, source: &str, target: &str) -> Option<u64> {
        self.change_facets
            .by_state
            .get(&ChangeState::Open)?
            .iter()
            .find(|n| {
                self.changes.get(n).is_some_and(|c| {
                    let c = c.fields();
                    c.source_branch == source && c.target_branch == target
                })
            })
            .copied()
    }

    /// How many comments people wrote on a thread (events and the
    /// deleted left out), as Gitea counts them.
    pub fn comment_count(&self, thread_id: &str) -> usize {
        self.said_by_thread.get(thread_id).copied().unwrap_or(0)
    }
}
