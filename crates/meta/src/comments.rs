//! The store's operations on comments: add, read, edit and delete one
//! (a deletion empties the body and marks it, so no older version comes
//! back), list a thread's; and what the pages ask of threads in one read
//! (how many are open, what kind each `#N` is).

use super::*;
use crate::entities::check_version;

impl MetaStore {
    /// Records `event` in the timeline of change request `number`, by
    /// `author` (a push to its source branch, by the pusher).
    pub fn record_event(
        &self,
        repo: &RepoName,
        number: u64,
        event: crate::entity::ThreadEvent,
        author: &str,
    ) -> Result<Comment, MetaError> {
        let crate::entity::ThreadEvent::Pushed { commits, .. } = &event;
        let body = format!(
            "pushed {commits} commit{}",
            if *commits == 1 { "" } else { "s" }
        );
        let id = self.new_id();
        let serial = self.next_serial(entity::SerialKind::Comment)?;
        self.write(repo, |state| {
            let thread = state.thread_id(ThreadKind::Change, number)?;
            let now = now_text();
            Ok(Comment {
                v: SCHEMA_V,
                serial,
                id,
                thread,
                thread_kind: ThreadKind::Change,
                body,
                author: author.to_string(),
                created_at: now.clone(),
                updated_at: now,
                version: 1,
                replaces: None,
                deleted: false,
                event: Some(event),
            })
        })
    }

    /// Comments on the issue or change request `number` (`kind` says
    /// which the caller addressed).
    pub fn comment(
        &self,
        repo: &RepoName,
        kind: ThreadKind,
        number: u64,
        new: NewComment,
        author: &str,
    ) -> Result<Comment, MetaError> {
        if new.body.trim().is_empty() {
            return Err(MetaError::Invalid("comment body must not be empty".into()));
        }
        entity::check_body(&new.body)?;
        let id = self.new_id();
        let serial = self.next_serial(entity::SerialKind::Comment)?;
        self.write(repo, |state| {
            let thread = state.thread_id(kind, number)?;
            let now = now_text();
            Ok(Comment {
                v: SCHEMA_V,
                serial,
                id,
                thread,
                thread_kind: kind,
                body: new.body,
                author: author.to_string(),
                created_at: now.clone(),
                updated_at: now,
                version: 1,
                replaces: None,
                deleted: false,
                event: None,
            })
        })
    }

    /// The comment `id` on thread `number` (not found once deleted).
    pub fn thread_comment(
        &self,
        repo: &RepoName,
        kind: ThreadKind,
        number: u64,
        id: &str,
    ) -> Result<Comment, MetaError> {
        self.read_bodies(
            repo,
            |state| state.stored_comment(kind, number, id).cloned(),
            |docs, comment| docs.whole(&comment),
        )
    }

    /// A comment's body replaced; `version` is the one it replaces.
    pub fn edit_comment(
        &self,
        repo: &RepoName,
        kind: ThreadKind,
        number: u64,
        id: &str,
        patch: CommentPatch,
    ) -> Result<Comment, MetaError> {
        if patch.body.trim().is_empty() {
            return Err(MetaError::Invalid(
                "comment body must not be empty; delete the comment instead".into(),
            ));
        }
        entity::check_body(&patch.body)?;
        self.rewrite_comment(repo, kind, number, id, patch.version, Some(patch.body))
    }

    /// A comment deleted: its body emptied, and no longer listed.
    pub fn delete_comment(
        &self,
        repo: &RepoName,
        kind: ThreadKind,
        number: u64,
        id: &str,
        version: Option<u64>,
    ) -> Result<Comment, MetaError> {
        self.rewrite_comment(repo, kind, number, id, version, None)
    }

    fn rewrite_comment(
        &self,
        repo: &RepoName,
        kind: ThreadKind,
        number: u64,
        id: &str,
        version: Option<u64>,
        body: Option<String>,
    ) -> Result<Comment, MetaError> {
        self.write(repo, |state| {
            let current = state.comment(kind, number, id)?;
            if current.event.is_some() {
                return Err(MetaError::Invalid(
                    "this is a timeline entry the server recorded, not a comment: it cannot be edited or deleted".into(),
                ));
            }
            check_version("a comment on", number, current.version, version)?;
            let mut next = current.clone();
            match body {
                Some(body) => next.body = body,
                None => {
                    next.body.clear();
                    next.deleted = true;
                }
            }
            next.replaces = Some(current.version);
            next.version = current.version + 1;
            next.updated_at = now_text();
            Ok(next)
        })
    }

    /// How many issues and change requests of the repo are open (the
    /// repo's tabs show them).
    pub fn open_counts(&self, repo: &RepoName) -> Result<OpenCounts, MetaError> {
        self.read(repo, |state| Ok(state.index.open_counts()))
    }

    /// [`MetaStore::open_counts`] without a wait: `None` when the repo is
    /// not found or its issues are still being read after a start.
    pub fn open_counts_now(&self, repo: &RepoName) -> Option<OpenCounts> {
        let meta = self.repo(repo).ok()?;
        if !meta.loading.is_whole() {
            return None;
        }
        let counts = meta.state.lock().index.open_counts();
        Some(counts)
    }

    /// The kind of each of `numbers` the repo has a thread for (what
    /// `#N` in a text links to), in one read.
    pub fn thread_kinds(
        &self,
        repo: &RepoName,
        numbers: &[u64],
    ) -> Result<std::collections::HashMap<u64, ThreadKind>, MetaError> {
        self.read(repo, |state| {
            Ok(numbers
                .iter()
                .filter_map(|&n| Some((n, state.index.kind_of_number(n)?)))
                .collect())
        })
    }

    pub fn comments(
        &self,
        repo: &RepoName,
        kind: ThreadKind,
        number: u64,
        page: Pagination,
    ) -> Result<Page<Comment>, MetaError> {
        self.read_bodies(
            repo,
            |state| {
                let thread = state.thread_id(kind, number)?;
                Ok(state.index.comments(&thread, page))
            },
            |docs, page| docs.whole_page(page),
        )
    }

    /// Page `page` (from 1) of a thread's comments when each page holds at
    /// most `per_page` of them and at most `max_bytes` of their bodies (a
    /// page holds at least one, however long): what one page costs to
    /// render is bounded by its bytes, not only by its count. Pages are
    /// cut greedily from the first comment, so a page's number names the
    /// same comments until one before it changes.
    pub fn comment_page(
        &self,
        repo: &RepoName,
        (kind, number): (ThreadKind, u64),
        page: usize,
        (per_page, max_bytes): (usize, usize),
    ) -> Result<CommentPage, MetaError> {
        let pick = |state: &RepoState| {
            let thread = state.thread_id(kind, number)?;
            let mut items = Vec::new();
            let (mut pages, mut count, mut bytes) = (0usize, 0usize, 0usize);
            for comment in state.index.shown_comments(&thread) {
                let len = comment.body_len() as usize;
                if pages == 0 || count == per_page || (count > 0 && bytes + len > max_bytes) {
                    pages += 1;
                    (count, bytes) = (0, 0);
                }
                count += 1;
                bytes += len;
                if pages == page {
                    items.push(comment.clone());
                }
            }
            Ok((items, pages.max(1)))
        };
        self.read_bodies(repo, pick, |docs, (items, pages)| {
            Ok(CommentPage {
                items: docs.all_whole(items)?,
                pages,
            })
        })
    }
}

/// One page of a thread's comments ([`MetaStore::comment_page`]).
#[derive(Debug)]
pub struct CommentPage {
    pub items: Vec<Comment>,
    /// How many pages the thread's comments make (at least 1).
    pub pages: usize,
}
