//! Handing out numeric ids ([`crate::numbered`]): each kind's next id
//! comes from a block reserved durably in the system repo, so an id is
//! never handed out twice, across restarts and crashes (the rest of a
//! block a restart cut is skipped). Also the upgrade that gives the
//! documents, users, repos and labels from before numeric ids theirs.

use super::*;
use crate::numbered::{
    DEFAULT_LABEL_COLOR, Label, MAX_SERIAL, RESERVE_BLOCK, RepoId, Sequence, SerialKind,
};

/// A kind's ids in hand: the next to hand out, and how far the system
/// repo has them reserved.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Held {
    next: u64,
    reserved: u64,
}

/// How many writes the upgrade keeps in flight at once: the log commits
/// concurrent writes together, so a large upgrade pays a sync per batch,
/// not per document.
const UPGRADE_WRITERS: usize = 16;

impl MetaStore {
    /// The next numeric id of `kind`, once a reservation covering it is
    /// durable. A store without a system repo (tools, tests of one repo)
    /// hands out none: 0.
    pub fn next_serial(&self, kind: SerialKind) -> Result<u64, MetaError> {
        self.check_failed()?;
        let Ok(system) = self.system() else {
            return Ok(0);
        };
        // Past every id stored too: a system repo restored from an older
        // backup than the repos must not hand one out again. Found once,
        // outside the lock (a retry while repos are still being read).
        let stored = match self.inner.serials.lock().contains_key(&kind) {
            true => 0,
            false => self.max_stored_serial(kind)?,
        };
        let mut serials = self.inner.serials.lock();
        let held = serials.entry(kind).or_insert_with(|| {
            let reserved = system.state.lock().index.reserved(kind);
            Held {
                next: reserved.max(stored) + 1,
                reserved,
            }
        });
        if held.next > held.reserved {
            let upto = (held.next - 1 + RESERVE_BLOCK).min(MAX_SERIAL);
            if held.next > upto {
                return Err(MetaError::Invalid(format!(
                    "every numeric id of a {} has been handed out",
                    kind.as_str()
                )));
            }
            self.write_in(&system, |state| {
                let current = state.index.sequence(kind).map_or(0, |s| s.version);
                Ok(Sequence {
                    v: SCHEMA_V,
                    of: kind,
                    reserved: upto,
                    updated_at: now_text(),
                    version: current + 1,
                    replaces: (current > 0).then_some(current),
                })
            })?;
            held.reserved = upto;
        }
        let serial = held.next;
        held.next += 1;
        Ok(serial)
    }

    /// The largest id of `kind` any repo's documents hold. Issues' and
    /// comments' are in the shards a start may leave to the background:
    /// until every repo's are read, a retry (of a repo whose read failed,
    /// what was read: it takes no writes).
    fn max_stored_serial(&self, kind: SerialKind) -> Result<u64, MetaError> {
        let repos: Vec<Arc<RepoMeta>> = self.inner.repos.read().values().cloned().collect();
        let mut max = 0;
        for meta in repos {
            if matches!(kind, SerialKind::Issue | SerialKind::Comment) && !meta.loading.is_done() {
                return Err(MetaError::Loading(
                    "the server is still reading its repos' issues after its start; \
                     retry in a few seconds"
                        .into(),
                ));
            }
            max = max.max(meta.state.lock().index.max_serial(kind));
        }
        Ok(max)
    }

    /// The numeric id of `repo` as it is now (its incarnation's); `None`
    /// for a repo from before incarnations or a store without accounts.
    pub fn repo_serial(&self, repo: &RepoName) -> Result<Option<u64>, MetaError> {
        Ok(self.repo_id(repo)?.map(|r| r.serial))
    }

    /// The id record of `repo` as it is now (its incarnation's).
    pub fn repo_id(&self, repo: &RepoName) -> Result<Option<RepoId>, MetaError> {
        let Some(incarnation) = self.incarnation(repo)? else {
            return Ok(None);
        };
        let Ok(system) = self.system() else {
            return Ok(None);
        };
        let state = system.state.lock();
        Ok(state.index.repo_id(incarnation.id()).cloned())
    }

    /// Gives `repo` (as it is now, its incarnation) a numeric id if it has
    /// none; returns it. Called as a repo is made, and by the upgrade.
    pub fn give_repo_serial(&self, repo: &RepoName) -> Result<Option<u64>, MetaError> {
        if let Some(serial) = self.repo_serial(repo)? {
            return Ok(Some(serial));
        }
        let Some(incarnation) = self.incarnation(repo)? else {
            return Ok(None);
        };
        let serial = self.next_serial(SerialKind::Repo)?;
        if serial == 0 {
            return Ok(None);
        }
        let name = repo.to_string();
        let given = self.write_system(|state| {
            // Given by another caller meanwhile: theirs stands.
            if let Some(given) = state.index.repo_id(incarnation.id()) {
                return Ok(given.clone());
            }
            Ok(RepoId {
                v: SCHEMA_V,
                incarnation: incarnation.id().to_string(),
                repo: name,
                serial,
                created_at: now_text(),
                version: 1,
            })
        })?;
        Ok(Some(given.serial))
    }

    /// The upgrade, at start: every user, repo, issue, pull request and
    /// comment without a numeric id gets one (a new version of its
    /// document), and every label name an issue or pull request carries
    /// that is no label of its repo becomes one (default colour). Returns
    /// how many documents it wrote. Run before the server serves.
    pub fn give_serials(&self) -> Result<usize, MetaError> {
        if self.system().is_err() {
            return Ok(0);
        }
        let mut written = 0;
        let users: Vec<String> = self.read_system(|state| {
            Ok(state
                .index
                .users()
                .filter(|u| u.serial == 0)
                .map(|u| u.name.clone())
                .collect())
        })?;
        for name in users {
            let serial = self.next_serial(SerialKind::User)?;
            self.write_system(|state| {
                let mut user = state
                    .index
                    .user(&name)
                    .cloned()
                    .ok_or_else(|| MetaError::NotFound(format!("no user named {name:?}")))?;
                user.serial = serial;
                user.replaces = Some(user.version);
                user.version += 1;
                Ok(user)
            })?;
            written += 1;
        }
        let tokens: Vec<String> = self.read_system(|state| {
            Ok(state
                .index
                .all_tokens()
                .filter(|t| t.serial == 0)
                .map(|t| t.id.clone())
                .collect())
        })?;
        for id in tokens {
            let serial = self.next_serial(SerialKind::Token)?;
            self.write_system(|state| {
                let mut token = state
                    .index
                    .token(&id)
                    .cloned()
                    .ok_or_else(|| MetaError::NotFound(format!("no token {id}")))?;
                token.serial = serial;
                token.replaces = Some(token.version);
                token.version += 1;
                Ok(token)
            })?;
            written += 1;
        }
        let repos: Vec<Arc<RepoMeta>> = self
            .inner
            .repos
            .read()
            .values()
            .filter(|m| m.name != SYSTEM)
            .cloned()
            .collect();
        // The repos' documents once every repo's are read: those a start
        // left to the background get theirs from `give_serials_once_read`.
        let all_read = repos.iter().all(|m| m.loading.is_whole());
        for meta in repos {
            let Ok(name) = RepoName::parse(&meta.name) else {
                continue;
            };
            if meta.incarnation.is_some() && self.repo_serial(&name)?.is_none() {
                self.give_repo_serial(&name)?;
                written += 1;
            }
            if all_read {
                written += self.give_repo_document_serials(&meta)?;
            }
        }
        if written > 0 {
            tracing::warn!(
                documents = written,
                "upgrade: users, repos, issues, pull requests, comments and labels got numeric ids"
            );
        }
        Ok(written)
    }

    /// The part of [`MetaStore::give_serials`] that needs every repo's
    /// documents, where the start left some to its background reader: run
    /// on a thread of its own once they are read.
    pub fn give_serials_once_read(self: &Arc<Self>) -> std::io::Result<()> {
        let repos: Vec<Arc<RepoMeta>> = self.inner.repos.read().values().cloned().collect();
        if repos.iter().all(|m| m.loading.is_whole()) {
            return Ok(());
        }
        let store = Arc::downgrade(self);
        std::thread::Builder::new()
            .name("vole-meta-upgrade".into())
            .spawn(move || {
                if let Some(store) = store.upgrade() {
                    if !store.wait_until_read() {
                        return;
                    }
                    if let Err(e) = store.give_serials() {
                        tracing::error!(error = %vole_stdx::error_chain::Chain(&e), "upgrade: cannot give the documents read after the start their numeric ids; the next start tries again");
                    }
                }
            })
            .map(drop)
    }

    /// The upgrade of one repo's documents (see [`MetaStore::give_serials`]).
    fn give_repo_document_serials(&self, meta: &Arc<RepoMeta>) -> Result<usize, MetaError> {
        let (todo, label_names) = {
            let state = meta.state.lock();
            let index = &state.index;
            let (issues, changes) = index.all_threads();
            let mut todo: Vec<Unnumbered> = Vec::new();
            let mut names = BTreeSet::new();
            for issue in issues {
                if issue.serial == 0 {
                    todo.push(Unnumbered::Issue(issue.number));
                }
                names.extend(issue.labels.iter().cloned());
            }
            for change in changes {
                if change.serial == 0 {
                    todo.push(Unnumbered::Change(change.number));
                }
                names.extend(change.labels.iter().cloned());
            }
            for comment in index.all_comments() {
                if comment.serial == 0 {
                    todo.push(Unnumbered::Comment(
                        comment.thread.clone(),
                        comment.id.clone(),
                    ));
                }
            }
            // One label a name, ASCII case aside (the first spelling), in
            // a repo whose labels were never entities: once one label
            // document is there (a deleted one too), the names threads
            // still carry are of labels deleted or renamed since, which
            // must not come back.
            let mut seen = BTreeSet::new();
            let never_upgraded = index.all_labels().next().is_none();
            let missing: Vec<String> = names
                .into_iter()
                .filter(|_| never_upgraded)
                .filter(|n| seen.insert(n.trim().to_ascii_lowercase()))
                .filter(|n| index.label_named(n).is_none())
                .collect();
            (todo, missing)
        };
        let count = todo.len() + label_names.len();
        // Under the gate every label maker takes, and only names still
        // free: the upgrade of documents read after a start runs while
        // the server serves.
        {
            let _gate = self.inner.label_gate.lock();
            for name in label_names {
                if meta.state.lock().index.label_named(&name).is_some() {
                    continue;
                }
                let serial = self.next_serial(SerialKind::Label)?;
                self.write_in(meta, |_| {
                    Ok(new_label(serial, name, DEFAULT_LABEL_COLOR, ""))
                })?;
            }
        }
        // In parallel, so the log commits the writes in groups.
        let chunk = todo.len().div_ceil(UPGRADE_WRITERS).max(1);
        std::thread::scope(|scope| {
            let workers: Vec<_> = todo
                .chunks(chunk)
                .map(|part| scope.spawn(move || self.number_each(meta, part)))
                .collect();
            workers
                .into_iter()
                .try_for_each(|w| w.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
        })?;
        Ok(count)
    }

    fn number_each(&self, meta: &Arc<RepoMeta>, todo: &[Unnumbered]) -> Result<(), MetaError> {
        for item in todo {
            match item {
                Unnumbered::Issue(number) => {
                    let serial = self.next_serial(SerialKind::Issue)?;
                    self.write_in(meta, |state| {
                        let mut next = state.issue(*number)?;
                        next.serial = serial;
                        next.replaces = Some(next.version);
                        next.version += 1;
                        Ok(next)
                    })?;
                }
                Unnumbered::Change(number) => {
                    let serial = self.next_serial(SerialKind::Issue)?;
                    self.write_in(meta, |state| {
                        let mut next = state.change(*number)?;
                        next.serial = serial;
                        next.replaces = Some(next.version);
                        next.version += 1;
                        Ok(next)
                    })?;
                }
                Unnumbered::Comment(thread, id) => {
                    let serial = self.next_serial(SerialKind::Comment)?;
                    self.write_in(meta, |state| {
                        let stored = state.index.comment(thread, id).ok_or_else(|| {
                            MetaError::NotFound(format!("comment {id} not found"))
                        })?;
                        let mut next = state.docs.whole(stored)?;
                        next.serial = serial;
                        next.replaces = Some(next.version);
                        next.version += 1;
                        Ok(next)
                    })?;
                }
            }
        }
        Ok(())
    }
}

/// A document the upgrade numbers.
enum Unnumbered {
    Issue(u64),
    Change(u64),
    /// Thread id, comment id.
    Comment(String, String),
}

/// A new label document.
pub(crate) fn new_label(serial: u64, name: String, color: &str, description: &str) -> Label {
    let now = now_text();
    Label {
        v: SCHEMA_V,
        serial,
        name,
        color: color.to_string(),
        description: description.to_string(),
        created_at: now.clone(),
        updated_at: now,
        version: 1,
        replaces: None,
        deleted: false,
    }
}
