//! The derived in-memory index of one repo's metadata: issues and change
//! requests by number, state, label and author; comments by thread; the
//! ACL and settings; the bytes each author's documents hold (what
//! `--max-meta-bytes-per-user` bounds). Rebuilt from the shard trees (plus unfolded log
//! records) at open and updated on every write; never written anywhere.
//! Threads and comments are held with every field but a long body, which
//! is left in the git blob of the version held once it is folded
//! ([`stored`]) and read back on demand ([`crate::bodies`]).

use std::collections::{BTreeMap, BTreeSet, HashMap};

use gix::ObjectId;
use vole_stdx::page::Pagination;

use super::entity::{
    Acl, Change, ChangeState, Comment, Entity, Issue, IssueState, Label, REPO_ACL_PATH, RepoAcl,
    RepoId, Sequence, SerialKind, Settings, ThreadKind, Token, User,
};

mod by_number;
use by_number::ByNumber;
mod facets;
use facets::{Deferred, Facets};
mod thread_ids;
pub(crate) use thread_ids::kept_as_bits as thread_id_kept_as_bits;
use thread_ids::{ThreadIds, note_thread};
pub mod stored;
use stored::{Stored, stored};

/// How many issues and change requests are open.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OpenCounts {
    pub issues: usize,
    pub changes: usize,
}

/// How many of a filtered list are in each state (a list's tabs).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StateCounts<S> {
    pub counts: Vec<(S, usize)>,
}

impl<S: PartialEq> StateCounts<S> {
    pub fn of(&self, state: S) -> usize {
        self.counts
            .iter()
            .find(|(s, _)| *s == state)
            .map_or(0, |(_, n)| *n)
    }
}

/// A page of a filtered list.
#[derive(Debug)]
pub struct Page<T> {
    pub items: Vec<T>,
    pub total: usize,
}

/// List filters; `None` matches everything.
#[derive(Debug, Clone)]
pub struct Filter<S> {
    pub state: Option<S>,
    pub label: Option<String>,
    pub author: Option<String>,
}

impl<S> Default for Filter<S> {
    fn default() -> Self {
        Filter {
            state: None,
            label: None,
            author: None,
        }
    }
}

#[derive(Debug, Default)]
pub struct Index {
    issues: ByNumber<Stored<Issue>>,
    issue_facets: Facets<IssueState>,
    changes: ByNumber<Stored<Change>>,
    change_facets: Facets<ChangeState>,
    /// Thread id -> (kind, number) ([`thread_ids`]).
    threads: ThreadIds,
    /// Thread id -> comment id -> comment (ids are time-ordered).
    comments: HashMap<String, BTreeMap<String, Stored<Comment>>>,
    acl: Option<Acl>,
    /// Incarnation -> its repo's ACL (the system repo's).
    repo_acls: HashMap<String, RepoAcl>,
    settings: Option<Settings>,
    /// Lowercased name -> user (the system repo's).
    users: BTreeMap<String, User>,
    /// ASCII-lowercased email -> the lowercased names of the users that
    /// have it (more than one only for duplicates from before emails were
    /// unique): a sign-in by email costs a lookup, not a scan.
    emails: HashMap<String, BTreeSet<String>>,
    /// Token id -> token (the system repo's).
    tokens: BTreeMap<String, Token>,
    /// Token name -> id.
    token_names: HashMap<String, String>,
    /// Lowercased user name -> the ids of their tokens: a user's tokens
    /// cost a lookup, not a scan of everyone's.
    user_tokens: HashMap<String, BTreeSet<String>>,
    /// Lowercased user name -> how many of the system repo's ACLs name
    /// them (owner or member).
    acl_names: HashMap<String, usize>,
    max_number: u64,
    /// Serial -> label, deleted ones kept ([`Label`]).
    labels: BTreeMap<u64, Label>,
    /// Each kind's numeric id reservation (the system repo's).
    sequences: BTreeMap<SerialKind, Sequence>,
    /// Incarnation -> the repo's numeric id (the system repo's).
    repo_ids: HashMap<String, RepoId>,
    /// Webhooks by id, deleted ones kept (the system repo's).
    pub(crate) hooks: BTreeMap<u64, crate::webhooks::Hook>,
    /// Comment serial -> (thread id, comment id), in serial order: the
    /// repo's comments as Gitea lists them, oldest first.
    comment_serials: BTreeMap<u64, (String, String)>,
    /// Comments people wrote (no event) that are not deleted.
    said_comments: usize,
    /// The same, by thread id.
    said_by_thread: HashMap<String, usize>,
    entities: usize,
    /// Author -> bytes of the documents they authored, as they stand
    /// ([`authored`]).
    authored: HashMap<String, u64>,
    /// The facets' keys of what a background read puts in, gathered
    /// while the facets are deferred, and built into them at its end
    /// ([`Index::defer_facets`]).
    deferred: Option<Box<Deferred>>,
}

mod authored;
mod serials;
mod threads;
pub(crate) use threads::ThreadPick;
pub use threads::{AnyThread, MAX_QUERY_BYTES, ThreadKinds, ThreadQuery, ThreadState};

impl Index {
    /// Folds a document in if it is newer than what the index holds;
    /// returns whether it was. A body is held whole until
    /// [`Index::body_folded`] says its version is in git.
    pub fn apply(&mut self, entity: Entity) -> bool {
        self.apply_doc(entity, None, 0)
    }

    /// [`Index::apply`] of a document read from the blob `blob`: a long
    /// body is left there ([`stored`]).
    pub fn apply_folded(&mut self, entity: Entity, blob: ObjectId) -> bool {
        self.apply_doc(entity, Some(blob), 0)
    }

    /// [`Index::apply_folded`] for a document read from the persisted
    /// index, whose body (`body_left` bytes) was left in `blob`, not in
    /// `entity` (0: the document is whole).
    pub fn apply_persisted(&mut self, entity: Entity, blob: ObjectId, body_left: u32) -> bool {
        self.apply_doc(entity, Some(blob), body_left)
    }

    fn apply_doc(&mut self, entity: Entity, blob: Option<ObjectId>, body_left: u32) -> bool {
        let entity = match entity {
            Entity::Issue(issue) => match self.apply_new_issue(issue, blob, body_left) {
                None => return true,
                Some(held) => Entity::Issue(held),
            },
            entity => entity,
        };
        // One lookup of what the index holds when it holds nothing (a
        // start's read, where nearly every document is new).
        let current = self.current_version(&entity);
        if current.is_some_and(|v| entity.version() <= v) {
            return false;
        }
        if current.is_none() && !matches!(entity, Entity::Removed(_)) {
            self.entities += 1;
        }
        self.count_authored(&entity, current.is_some(), body_left);
        match entity {
            Entity::Issue(issue) => self.put_issue(issue, blob, body_left),
            Entity::Change(change) => {
                let old = self.changes.get(&change.number).map(Stored::fields);
                let gathered = self.deferred.as_mut().map(|d| &mut d.changes);
                self.change_facets.put(old, &change, gathered);
                note_thread(
                    &mut self.threads,
                    &mut self.max_number,
                    (&change.id, ThreadKind::Change, change.number),
                );
                self.changes
                    .insert(change.number, stored(change, blob, body_left));
            }
            Entity::Comment(comment) => self.apply_comment(stored(comment, blob, body_left)),
            Entity::Acl(acl) => self.acl = Some(acl),
            Entity::RepoAcl(repo_acl) => self.apply_repo_acl(repo_acl),
            Entity::Removed(removed) => {
                if removed.path == REPO_ACL_PATH && self.acl.take().is_some() {
                    self.entities -= 1;
                }
            }
            Entity::Settings(settings) => self.settings = Some(settings),
            Entity::Label(label) => {
                self.labels.insert(label.serial, label);
            }
            Entity::Sequence(sequence) => {
                self.sequences.insert(sequence.of, sequence);
            }
            Entity::RepoId(repo_id) => {
                self.repo_ids.insert(repo_id.incarnation.clone(), repo_id);
            }
            Entity::Hook(hook) => {
                self.hooks.insert(hook.serial, hook);
            }
            Entity::User(user) => self.apply_user(user),
            Entity::Token(token) => {
                self.token_names
                    .insert(token.name.clone(), token.id.clone());
                self.user_tokens
                    .entry(User::id_of(&token.user))
                    .or_default()
                    .insert(token.id.clone());
                self.tokens.insert(token.id.clone(), token);
            }
        }
        true
    }

    /// [`Index::apply_doc`] of an issue the index does not hold (nearly
    /// every document of a start's read), without the look-ups the
    /// general path makes for a document it may hold. The issue back,
    /// not applied, if the index holds its number.
    fn apply_new_issue(
        &mut self,
        issue: Issue,
        blob: Option<ObjectId>,
        body_left: u32,
    ) -> Option<Issue> {
        if self.issues.contains_key(&issue.number) {
            return Some(issue);
        }
        self.entities += 1;
        let bytes = authored::issue_bytes(&issue) + u64::from(body_left);
        authored::add(&mut self.authored, &issue.author, bytes);
        self.put_issue(issue, blob, body_left);
        None
    }

    /// `issue` in the map, its sets and the thread ids, in place of the
    /// version held if any.
    fn put_issue(&mut self, issue: Issue, blob: Option<ObjectId>, body_left: u32) {
        let old = self.issues.get(&issue.number).map(Stored::fields);
        let gathered = self.deferred.as_mut().map(|d| &mut d.issues);
        self.issue_facets.put(old, &issue, gathered);
        note_thread(
            &mut self.threads,
            &mut self.max_number,
            (&issue.id, ThreadKind::Issue, issue.number),
        );
        self.issues
            .insert(issue.number, stored(issue, blob, body_left));
    }

    /// Stores a comment, keeping the counts of what people wrote.
    fn apply_comment(&mut self, stored: Stored<Comment>) {
        let comment = stored.fields();
        if comment.serial != 0 {
            self.comment_serials
                .insert(comment.serial, (comment.thread.clone(), comment.id.clone()));
        }
        let said = |c: &Comment| !c.deleted && c.event.is_none();
        let live = said(comment);
        let thread = comment.thread.clone();
        let id = comment.id.clone();
        let was_live = self
            .comments
            .entry(thread.clone())
            .or_default()
            .insert(id, stored)
            .is_some_and(|old| said(old.fields()));
        self.said_comments =
            (self.said_comments + usize::from(live)).saturating_sub(usize::from(was_live));
        let count = self.said_by_thread.entry(thread).or_default();
        *count = (*count + usize::from(live)).saturating_sub(usize::from(was_live));
    }

    /// Stores a user (the system repo's), keeping users by email.
    fn apply_user(&mut self, user: User) {
        let id = User::id_of(&user.name);
        if let Some(old) = self.users.get(&id) {
            let key = old.email.to_ascii_lowercase();
            if let Some(names) = self.emails.get_mut(&key) {
                names.remove(&id);
                if names.is_empty() {
                    self.emails.remove(&key);
                }
            }
        }
        if !user.email.is_empty() {
            self.emails
                .entry(user.email.to_ascii_lowercase())
                .or_default()
                .insert(id.clone());
        }
        self.users.insert(id, user);
    }

    /// Stores a repo's ACL (the system repo's), keeping the count of the
    /// names ACLs grant something.
    fn apply_repo_acl(&mut self, repo_acl: RepoAcl) {
        if let Some(old) = self.repo_acls.get(&repo_acl.incarnation) {
            for name in acl_named(&old.acl) {
                if let Some(count) = self.acl_names.get_mut(&name) {
                    *count -= 1;
                    if *count == 0 {
                        self.acl_names.remove(&name);
                    }
                }
            }
        }
        for name in acl_named(&repo_acl.acl) {
            *self.acl_names.entry(name).or_default() += 1;
        }
        self.repo_acls
            .insert(repo_acl.incarnation.clone(), repo_acl);
    }

    fn current_version(&self, entity: &Entity) -> Option<u64> {
        match entity {
            Entity::Issue(e) => self.issues.get(&e.number).map(|i| i.fields().version),
            Entity::Change(e) => self.changes.get(&e.number).map(|c| c.fields().version),
            Entity::Comment(e) => self
                .comments
                .get(&e.thread)
                .and_then(|t| t.get(&e.id))
                .map(|c| c.fields().version),
            Entity::Acl(_) => self.acl.as_ref().map(|a| a.version),
            Entity::Settings(_) => self.settings.as_ref().map(|s| s.version),
            Entity::User(e) => self.users.get(&User::id_of(&e.name)).map(|u| u.version),
            Entity::Token(e) => self.tokens.get(&e.id).map(|t| t.version),
            Entity::RepoAcl(e) => self.repo_acls.get(&e.incarnation).map(|r| r.acl.version),
            Entity::Label(e) => self.labels.get(&e.serial).map(|l| l.version),
            Entity::Sequence(e) => self.sequences.get(&e.of).map(|q| q.version),
            Entity::RepoId(e) => self.repo_ids.get(&e.incarnation).map(|r| r.version),
            Entity::Hook(e) => self.hooks.get(&e.serial).map(|h| h.version),
            // A removal always applies.
            Entity::Removed(_) => None,
        }
    }

    /// Highest issue or change number in use (0 when none).
    pub fn max_number(&self) -> u64 {
        self.max_number
    }

    /// Distinct entities held.
    pub fn len(&self) -> usize {
        self.entities
    }

    pub fn is_empty(&self) -> bool {
        self.entities == 0
    }

    pub fn issue(&self, number: u64) -> Option<&Stored<Issue>> {
        self.issues.get(&number)
    }

    pub fn change(&self, number: u64) -> Option<&Stored<Change>> {
        self.changes.get(&number)
    }

    /// What kind of thread `number` is, if any.
    pub fn kind_of_number(&self, number: u64) -> Option<ThreadKind> {
        if self.issues.contains_key(&number) {
            Some(ThreadKind::Issue)
        } else if self.changes.contains_key(&number) {
            Some(ThreadKind::Change)
        } else {
            None
        }
    }

    pub fn issues(&self, filter: &Filter<IssueState>, page: Pagination) -> Page<Stored<Issue>> {
        let numbers = self.issue_facets.select(
            &self.issues,
            filter.state,
            filter.label.as_deref(),
            filter.author.as_deref(),
        );
        paginate(&numbers, page, |n| self.issues.get(n).cloned())
    }

    pub fn changes(&self, filter: &Filter<ChangeState>, page: Pagination) -> Page<Stored<Change>> {
        let numbers = self.change_facets.select(
            &self.changes,
            filter.state,
            filter.label.as_deref(),
            filter.author.as_deref(),
        );
        paginate(&numbers, page, |n| self.changes.get(n).cloned())
    }

    /// How many issues match `filter`'s label and author in each state.
    pub fn issue_counts(&self, filter: &Filter<IssueState>) -> StateCounts<IssueState> {
        let (label, author) = (filter.label.as_deref(), filter.author.as_deref());
        StateCounts {
            counts: [IssueState::Open, IssueState::Closed]
                .into_iter()
                .map(|s| (s, self.issue_facets.count(&self.issues, s, label, author)))
                .collect(),
        }
    }

    /// How many change requests match `filter`'s label and author in each state.
    pub fn change_counts(&self, filter: &Filter<ChangeState>) -> StateCounts<ChangeState> {
        let (label, author) = (filter.label.as_deref(), filter.author.as_deref());
        StateCounts {
            counts: [ChangeState::Open, ChangeState::Merged, ChangeState::Closed]
                .into_iter()
                .map(|s| (s, self.change_facets.count(&self.changes, s, label, author)))
                .collect(),
        }
    }

    pub fn open_counts(&self) -> OpenCounts {
        OpenCounts {
            issues: self.issue_facets.in_state(IssueState::Open),
            changes: self.change_facets.in_state(ChangeState::Open),
        }
    }

    /// The comment `id` of a thread, deleted or not.
    pub fn comment(&self, thread_id: &str, id: &str) -> Option<&Stored<Comment>> {
        self.comments.get(thread_id)?.get(id)
    }

    /// A thread's comments that are not deleted, in order.
    pub fn shown_comments(&self, thread_id: &str) -> impl Iterator<Item = &Stored<Comment>> {
        self.comments
            .get(thread_id)
            .into_iter()
            .flat_map(|thread| thread.values())
            .filter(|c| !c.fields().deleted)
    }

    /// A thread's comments that people wrote (no event) and that are not
    /// deleted, in order: what Gitea's API lists and counts.
    pub fn said_comments(&self, thread_id: &str) -> impl Iterator<Item = &Stored<Comment>> {
        self.shown_comments(thread_id)
            .filter(|c| c.fields().event.is_none())
    }

    /// Comments of a thread, oldest first, the deleted left out.
    pub fn comments(&self, thread_id: &str, page: Pagination) -> Page<Stored<Comment>> {
        let Some(thread) = self.comments.get(thread_id) else {
            return Page {
                items: Vec::new(),
                total: 0,
            };
        };
        let shown = || thread.values().filter(|c| !c.fields().deleted);
        Page {
            items: page.slice(shown()).cloned().collect(),
            total: shown().count(),
        }
    }

    pub fn acl(&self) -> Option<&Acl> {
        self.acl.as_ref()
    }

    /// The ACL of the repo of incarnation `incarnation` (the system
    /// repo's).
    pub fn repo_acl(&self, incarnation: &str) -> Option<&RepoAcl> {
        self.repo_acls.get(incarnation)
    }

    /// Does any ACL the system repo holds name `user` (as its owner or a
    /// member), case-insensitively? A lookup.
    pub fn acls_name(&self, user: &str) -> bool {
        self.acl_names.contains_key(&User::id_of(user))
    }

    pub fn settings(&self) -> Option<&Settings> {
        self.settings.as_ref()
    }

    /// A user by name, case-insensitively.
    pub fn user(&self, name: &str) -> Option<&User> {
        self.users.get(&User::id_of(name))
    }

    /// Every user, by lowercased name.
    pub fn users(&self) -> impl Iterator<Item = &User> {
        self.users.values()
    }

    /// The users whose email is `email`, case aside ([`User::has_email`]).
    pub fn users_with_email(&self, email: &str) -> impl Iterator<Item = &User> {
        self.emails
            .get(&email.to_ascii_lowercase())
            .into_iter()
            .flatten()
            .filter_map(|id| self.users.get(id))
    }

    pub fn token(&self, id: &str) -> Option<&Token> {
        self.tokens.get(id)
    }

    pub fn token_named(&self, name: &str) -> Option<&Token> {
        self.token_names
            .get(name)
            .and_then(|id| self.tokens.get(id))
    }

    /// Every token, by id.
    pub fn tokens(&self) -> impl Iterator<Item = &Token> {
        self.tokens.values()
    }

    /// `user`'s tokens, by id (a lookup, then theirs only).
    pub fn tokens_of(&self, user: &str) -> impl Iterator<Item = &Token> {
        self.user_tokens
            .get(&User::id_of(user))
            .into_iter()
            .flatten()
            .filter_map(|id| self.tokens.get(id))
    }
}

/// The lowercased names an ACL grants something: its owner and members,
/// each once.
fn acl_named(acl: &Acl) -> BTreeSet<String> {
    acl.owner
        .iter()
        .chain(acl.members.iter().map(|m| &m.name))
        .map(|name| User::id_of(name))
        .collect()
}

fn paginate<T>(numbers: &[u64], page: Pagination, get: impl Fn(&u64) -> Option<T>) -> Page<T> {
    Page {
        items: page.slice(numbers).filter_map(get).collect(),
        total: numbers.len(),
    }
}

#[cfg(test)]
pub(crate) mod parts;

#[cfg(test)]
mod tests;
