//! The index's lookups by numeric id and of labels: a repo's labels, a
//! comment by its serial, a kind's reservation.

use super::*;
use crate::webhooks::Hook;

impl Index {
    /// The repo's labels that are not deleted, by serial.
    pub fn labels(&self) -> impl Iterator<Item = &Label> {
        self.labels.values().filter(|l| !l.deleted)
    }

    /// A label by serial, not deleted.
    pub fn label(&self, serial: u64) -> Option<&Label> {
        self.labels.get(&serial).filter(|l| !l.deleted)
    }

    /// A label by name, ASCII case aside (names are unique so), not
    /// deleted.
    pub fn label_named(&self, name: &str) -> Option<&Label> {
        self.labels().find(|l| l.name.eq_ignore_ascii_case(name))
    }

    /// How far `kind`'s ids are reserved (0: none yet).
    pub fn reserved(&self, kind: SerialKind) -> u64 {
        self.sequences.get(&kind).map_or(0, |s| s.reserved)
    }

    pub fn sequence(&self, kind: SerialKind) -> Option<&Sequence> {
        self.sequences.get(&kind)
    }

    /// A comment by its serial, deleted or not.
    pub fn comment_by_serial(&self, serial: u64) -> Option<&Stored<Comment>> {
        let (thread, id) = self.comment_serials.get(&serial)?;
        self.comment(thread, id)
    }

    /// Every issue and change request, for the upgrade that gives them
    /// serials.
    pub fn all_threads(&self) -> (impl Iterator<Item = &Issue>, impl Iterator<Item = &Change>) {
        (
            self.issues.values().map(Stored::fields),
            self.changes.values().map(Stored::fields),
        )
    }

    /// Every comment of every thread, deleted or not.
    pub fn all_comments(&self) -> impl Iterator<Item = &Comment> {
        self.comments
            .values()
            .flat_map(BTreeMap::values)
            .map(Stored::fields)
    }

    /// The comments people wrote (no event) that are not deleted, by
    /// serial (oldest first), and how many there are: walked, never
    /// sorted or copied.
    pub fn comments_by_serial(&self) -> (impl Iterator<Item = &Stored<Comment>>, usize) {
        let walk = self
            .comment_serials
            .values()
            .filter_map(|(thread, id)| self.comment(thread, id))
            .filter(|c| !c.fields().deleted && c.fields().event.is_none());
        (walk, self.said_comments)
    }

    /// The kind and number of the thread of id `thread_id`.
    pub fn thread_of(&self, thread_id: &str) -> Option<(ThreadKind, u64)> {
        self.threads.get(thread_id)
    }
}

impl Index {
    /// A webhook by id, deleted or not (the system repo's).
    pub fn hook(&self, serial: u64) -> Option<&Hook> {
        self.hooks.get(&serial)
    }

    /// The live webhooks of the repo of `incarnation` ("": the server's),
    /// by id.
    pub fn hooks_of<'a>(&'a self, incarnation: &'a str) -> impl Iterator<Item = &'a Hook> + 'a {
        self.hooks
            .values()
            .filter(move |h| !h.deleted && h.incarnation == incarnation)
    }

    /// The numeric id of the repo of `incarnation` (the system repo's).
    pub fn repo_id(&self, incarnation: &str) -> Option<&RepoId> {
        self.repo_ids.get(incarnation)
    }

    /// Every repo id the system repo holds.
    pub fn repo_ids(&self) -> impl Iterator<Item = &RepoId> {
        self.repo_ids.values()
    }

    /// Every label, deleted ones too (the upgrade's view).
    pub fn all_labels(&self) -> impl Iterator<Item = &Label> {
        self.labels.values()
    }
}

impl Index {
    /// The numbers of the issues and of the change requests that carry
    /// label `name` (exactly so named).
    pub fn labelled(&self, name: &str) -> (Vec<u64>, Vec<u64>) {
        let of = |sets: &HashMap<String, facets::Numbers>| {
            sets.get(name)
                .map(|set| set.iter().copied().collect())
                .unwrap_or_default()
        };
        (
            of(&self.issue_facets.by_label),
            of(&self.change_facets.by_label),
        )
    }
}

impl Index {
    /// Every token, revoked ones too (the upgrade's view).
    pub fn all_tokens(&self) -> impl Iterator<Item = &Token> {
        self.tokens.values()
    }
}

impl Index {
    /// The largest id of `kind` this index holds (0: none).
    pub fn max_serial(&self, kind: SerialKind) -> u64 {
        let max = |ids: &mut dyn Iterator<Item = u64>| ids.max().unwrap_or(0);
        match kind {
            SerialKind::Issue => max(&mut self
                .issues
                .values()
                .map(|i| i.fields().serial)
                .chain(self.changes.values().map(|c| c.fields().serial))),
            SerialKind::Comment => max(&mut self.comment_serials.keys().copied()),
            SerialKind::Label => max(&mut self.labels.keys().copied()),
            SerialKind::User => max(&mut self.users.values().map(|u| u.serial)),
            SerialKind::Repo => max(&mut self.repo_ids.values().map(|r| r.serial)),
            SerialKind::Token => max(&mut self.tokens.values().map(|t| t.serial)),
            SerialKind::Hook => max(&mut self.hooks.keys().copied()),
        }
    }
}
