//! Issues and change requests listed together, as Gitea's issue list
//! answers (`type` absent): one number space, newest first, filtered by
//! state, any of some labels, author, update time and a text.

use super::*;

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

/// Two runs of numbers, each newest first, as one, newest first.
struct Newest<A: Iterator<Item = u64>, B: Iterator<Item = u64>> {
    a: std::iter::Peekable<A>,
    b: std::iter::Peekable<B>,
}

impl<A: Iterator<Item = u64>, B: Iterator<Item = u64>> Newest<A, B> {
    fn of(a: A, b: B) -> Self {
        Newest {
            a: a.peekable(),
            b: b.peekable(),
        }
    }
}

impl<A: Iterator<Item = u64>, B: Iterator<Item = u64>> Iterator for Newest<A, B> {
    type Item = u64;

    fn next(&mut self) -> Option<u64> {
        match (self.a.peek(), self.b.peek()) {
            (Some(x), Some(y)) if x >= y => self.a.next(),
            (_, Some(_)) => self.b.next(),
            (Some(_), None) => self.a.next(),
            (None, None) => None,
        }
    }
}

impl ThreadQuery {
    /// Whether nothing but the kinds and the state filters.
    pub(super) fn by_state_only(&self) -> bool {
        self.labels.is_empty()
            && self.author.is_none()
            && self.since.is_none()
            && self.before.is_none()
            && self.text.is_none()
    }

    fn keeps(
        &self,
        author: &str,
        labels: &[String],
        updated: &str,
        title: &str,
        body: &str,
    ) -> bool {
        // Names as Gitea matches them: ASCII case aside.
        if self
            .author
            .as_deref()
            .is_some_and(|a| !a.eq_ignore_ascii_case(author))
        {
            return false;
        }
        if !self.labels.is_empty()
            && !labels
                .iter()
                .any(|l| self.labels.iter().any(|w| w.eq_ignore_ascii_case(l)))
        {
            return false;
        }
        if self.since.as_deref().is_some_and(|s| updated < s) {
            return false;
        }
        if self.before.as_deref().is_some_and(|b| updated > b) {
            return false;
        }
        if let Some(text) = &self.text {
            return contains_ignoring_case(title, text) || contains_ignoring_case(body, text);
        }
        true
    }
}

/// Whether `haystack` holds `needle`, ASCII case aside, without copying
/// either.
fn contains_ignoring_case(haystack: &str, needle: &str) -> bool {
    let (hay, needle) = (haystack.as_bytes(), needle.as_bytes());
    needle.is_empty()
        || hay
            .windows(needle.len())
            .any(|window| window.eq_ignore_ascii_case(needle))
}

impl Index {
    /// A page of the issues and change requests `query` keeps, newest
    /// first.
    pub fn threads(&self, query: &ThreadQuery, page: Pagination) -> Page<AnyThread> {
        if query.by_state_only() {
            return self.threads_by_state(query, page);
        }
        let issues: Vec<u64> = if query.kinds == ThreadKinds::Changes {
            Vec::new()
        } else {
            self.issues
                .values()
                .rev()
                .filter(|i| match query.state {
                    ThreadState::Open => i.state == IssueState::Open,
                    ThreadState::Closed => i.state == IssueState::Closed,
                    ThreadState::All => true,
                })
                .filter(|i| query.keeps(&i.author, &i.labels, &i.updated_at, &i.title, &i.body))
                .map(|i| i.number)
                .collect()
        };
        let changes: Vec<u64> = if query.kinds == ThreadKinds::Issues {
            Vec::new()
        } else {
            self.changes
                .values()
                .rev()
                .filter(|c| match query.state {
                    ThreadState::Open => c.state == ChangeState::Open,
                    ThreadState::Closed => c.state != ChangeState::Open,
                    ThreadState::All => true,
                })
                .filter(|c| query.keeps(&c.author, &c.labels, &c.updated_at, &c.title, &c.body))
                .map(|c| c.number)
                .collect()
        };
        // One number space: newest first across both.
        let mut numbers = issues;
        numbers.extend(changes);
        numbers.sort_unstable_by(|a, b| b.cmp(a));
        paginate(&numbers, page, |n| {
            self.issues
                .get(n)
                .cloned()
                .map(AnyThread::Issue)
                .or_else(|| self.changes.get(n).cloned().map(AnyThread::Change))
        })
    }

    /// [`Index::threads`] when only the kinds and the state filter: the
    /// index's sets by state give the numbers in order and their count,
    /// so a page costs its offset and its length, not every thread.
    fn threads_by_state(&self, query: &ThreadQuery, page: Pagination) -> Page<AnyThread> {
        let empty = BTreeSet::new();
        let issue_set = |state| self.issue_facets.by_state.get(&state).unwrap_or(&empty);
        let change_set = |state| self.change_facets.by_state.get(&state).unwrap_or(&empty);
        type Numbers<'a> = Box<dyn Iterator<Item = u64> + 'a>;
        let none = || -> (Numbers<'_>, usize) { (Box::new(std::iter::empty()), 0) };
        let (issues, issue_count): (Numbers<'_>, usize) = match (query.kinds, query.state) {
            (ThreadKinds::Changes, _) => none(),
            (_, ThreadState::All) => (
                Box::new(self.issues.keys().rev().copied()),
                self.issues.len(),
            ),
            (_, ThreadState::Open) => {
                let set = issue_set(IssueState::Open);
                (Box::new(set.iter().rev().copied()), set.len())
            }
            (_, ThreadState::Closed) => {
                let set = issue_set(IssueState::Closed);
                (Box::new(set.iter().rev().copied()), set.len())
            }
        };
        let (changes, change_count): (Numbers<'_>, usize) = match (query.kinds, query.state) {
            (ThreadKinds::Issues, _) => none(),
            (_, ThreadState::All) => (
                Box::new(self.changes.keys().rev().copied()),
                self.changes.len(),
            ),
            (_, ThreadState::Open) => {
                let set = change_set(ChangeState::Open);
                (Box::new(set.iter().rev().copied()), set.len())
            }
            (_, ThreadState::Closed) => {
                let (merged, closed) = (
                    change_set(ChangeState::Merged),
                    change_set(ChangeState::Closed),
                );
                (
                    Box::new(Newest::of(
                        merged.iter().rev().copied(),
                        closed.iter().rev().copied(),
                    )),
                    merged.len() + closed.len(),
                )
            }
        };
        let items = Newest::of(issues, changes)
            .skip(page.offset())
            .take(page.per_page())
            .filter_map(|n| {
                self.issues
                    .get(&n)
                    .cloned()
                    .map(AnyThread::Issue)
                    .or_else(|| self.changes.get(&n).cloned().map(AnyThread::Change))
            })
            .collect();
        Page {
            items,
            total: issue_count + change_count,
        }
    }

    /// The open change request from `source` into `target`, if one is.
    pub fn open_change_between(&self, source: &str, target: &str) -> Option<u64> {
        self.change_facets
            .by_state
            .get(&ChangeState::Open)?
            .iter()
            .find(|n| {
                self.changes
                    .get(n)
                    .is_some_and(|c| c.source_branch == source && c.target_branch == target)
            })
            .copied()
    }

    /// How many comments people wrote on a thread (events and the
    /// deleted left out), as Gitea counts them.
    pub fn comment_count(&self, thread_id: &str) -> usize {
        self.said_comments(thread_id).count()
    }
}
