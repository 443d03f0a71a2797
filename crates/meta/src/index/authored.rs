//! What each author's documents in a repo hold, in bytes: the text they
//! wrote (titles, bodies, labels, branch names), as `--max-meta-bytes-per-user`
//! bounds it, kept as documents come and go.

use std::collections::HashMap;

use super::{Change, Entity, Index, Issue};

/// The author of a document a user writes (issue, change request,
/// comment) and the bytes it counts towards theirs: the text they wrote
/// (titles, bodies, labels, branch names), as this version has it.
pub(super) fn authored(entity: &Entity) -> Option<(&str, u64)> {
    match entity {
        Entity::Issue(issue) => Some((&issue.author, issue_bytes(issue))),
        Entity::Change(change) => Some((&change.author, change_bytes(change))),
        Entity::Comment(comment) => Some((&comment.author, comment.body.len() as u64)),
        _ => None,
    }
}

pub(super) fn issue_bytes(issue: &Issue) -> u64 {
    fields_bytes(issue) + issue.body.len() as u64
}

/// An issue's bytes but its body's.
fn fields_bytes(issue: &Issue) -> u64 {
    let labels: usize = issue.labels.iter().map(String::len).sum();
    (issue.title.len() + labels) as u64
}

fn change_bytes(change: &Change) -> u64 {
    change_fields_bytes(change) + change.body.len() as u64
}

/// A change request's bytes but its body's.
fn change_fields_bytes(change: &Change) -> u64 {
    (change.title.len() + change.source_branch.len() + change.target_branch.len()) as u64
}

impl Index {
    /// The version of the document `entity` is a version of that the
    /// index holds: its author and bytes ([`authored`]).
    pub(super) fn current_authored(&self, entity: &Entity) -> Option<(&str, u64)> {
        match entity {
            Entity::Issue(e) => self.issues.get(&e.number).map(|i| {
                let f = i.fields();
                (f.author.as_str(), fields_bytes(f) + i.body_len())
            }),
            Entity::Change(e) => self.changes.get(&e.number).map(|c| {
                let f = c.fields();
                (f.author.as_str(), change_fields_bytes(f) + c.body_len())
            }),
            Entity::Comment(e) => self
                .comments
                .get(&e.thread)
                .and_then(|t| t.get(&e.id))
                .map(|c| (c.fields().author.as_str(), c.body_len())),
            _ => None,
        }
    }

    /// Bytes of the documents `author` authored here, as they stand.
    pub fn authored_bytes(&self, author: &str) -> u64 {
        self.authored.get(author).copied().unwrap_or(0)
    }

    /// When applying `entity` would take its author's bytes up and past
    /// `limit`: the author and the bytes they would have. A write that
    /// does not add to them (an edit that shortens, a state change)
    /// always passes.
    pub fn over_authored_limit(&self, entity: &Entity, limit: u64) -> Option<(String, u64)> {
        let (author, bytes) = authored(entity)?;
        let before = self
            .current_authored(entity)
            .filter(|(a, _)| *a == author)
            .map_or(0, |(_, b)| b);
        let total = self.authored_bytes(author).saturating_sub(before) + bytes;
        (bytes > before && total > limit).then(|| (author.to_string(), total))
    }

    /// Counts `entity` (with `body_left` bytes of body left in its blob)
    /// to its author in place of the version the index holds, if it
    /// `holds` one.
    pub(super) fn count_authored(&mut self, entity: &Entity, holds: bool, body_left: u32) {
        let before = holds
            .then(|| self.current_authored(entity))
            .flatten()
            .map(|(a, b)| (a.to_string(), b));
        if let Some((author, bytes)) = before
            && let Some(total) = self.authored.get_mut(&author)
        {
            *total = total.saturating_sub(bytes);
            if *total == 0 {
                self.authored.remove(&author);
            }
        }
        if let Some((author, bytes)) = authored(entity) {
            add(&mut self.authored, author, bytes + u64::from(body_left));
        }
    }
}

/// Counts `bytes` more to `author` (the key allocated only for a new
/// author).
pub(super) fn add(authored: &mut HashMap<String, u64>, author: &str, bytes: u64) {
    match authored.get_mut(author) {
        Some(total) => *total += bytes,
        None => {
            authored.insert(author.to_string(), bytes);
        }
    }
}
