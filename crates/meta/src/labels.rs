//! A repo's labels as entities (Gitea's: an id, a name, a colour, a
//! description): create, edit, delete, list. Issues and pull requests
//! carry their labels' names; a name one is given that is no label of the
//! repo yet becomes one (default colour), and a rename carries the new
//! name onto every thread that had the old one.

use super::*;
use crate::numbered::{DEFAULT_LABEL_COLOR, Label, SerialKind, label_color};
use crate::serials::new_label;

/// The most threads a label's rename rewrites; past it the rename is
/// refused (make a new label and move threads to it in steps).
pub const MAX_RENAMED_THREADS: usize = 1_000;

/// The most labels a repo holds (deleted ones not counted).
pub const MAX_LABELS_PER_REPO: usize = 1_000;

/// Which of a thread's comments a list shows: those whose update time is
/// within `since` and `before` (RFC 3339 in UTC, compared as text), past
/// the first `skip`, at most `take`, and no more once `max_bytes` of
/// bodies are shown (at least one).
#[derive(Debug, Clone, Copy)]
pub struct CommentWindow<'a> {
    pub since: Option<&'a str>,
    pub before: Option<&'a str>,
    pub skip: usize,
    pub take: usize,
    pub max_bytes: usize,
}

/// What a label write sets (absent: as it is, or the default).
#[derive(Debug, Clone, Default)]
pub struct LabelPut {
    pub name: Option<String>,
    pub color: Option<String>,
    pub description: Option<String>,
}

fn check_label_fields(put: &LabelPut) -> Result<(Option<String>, Option<String>), MetaError> {
    if let Some(name) = &put.name {
        entity::check_labels(std::slice::from_ref(name))?;
    }
    if let Some(description) = &put.description {
        entity::check_description(description)?;
    }
    let color = put.color.as_deref().map(label_color).transpose()?;
    Ok((put.name.as_ref().map(|n| n.trim().to_string()), color))
}

impl MetaStore {
    /// The repo's labels, by id (read at open: no wait).
    pub fn labels(&self, repo: &RepoName) -> Result<Vec<Label>, MetaError> {
        self.read_repo_level(repo, |state| Ok(state.index.labels().cloned().collect()))
    }

    /// The repo's label `serial` (labels are read at open: no wait).
    pub fn label(&self, repo: &RepoName, serial: u64) -> Result<Label, MetaError> {
        self.read_repo_level(repo, |state| {
            state
                .index
                .label(serial)
                .cloned()
                .ok_or_else(|| MetaError::NotFound(format!("label {serial} not found")))
        })
    }

    /// Makes every name in `names` that is no label of `repo` one, and
    /// answers the names as the labels spell them. A store without a system repo (tools, tests of one repo) gives no
    /// ids, so it makes no labels: the names stay on the threads, and the
    /// upgrade makes them labels once there are ids.
    pub(crate) fn ensure_labels(
        &self,
        repo: &RepoName,
        names: &[String],
    ) -> Result<Vec<String>, MetaError> {
        // For an issue or pull request's write, which needs the repo's
        // whole index: told to retry before any label is made, not after.
        self.ask_read(repo)?;
        if self.system().is_err() {
            return Ok(names.to_vec());
        }
        let missing = |names: &[String]| -> Result<Vec<String>, MetaError> {
            self.read_repo_level(repo, |state| {
                Ok(names
                    .iter()
                    .map(|n| n.trim())
                    .filter(|n| state.index.label_named(n).is_none())
                    .map(str::to_string)
                    .collect())
            })
        };
        if !missing(names)?.is_empty() {
            let _gate = self.inner.label_gate.lock();
            for name in missing(names)? {
                if self
                    .read_repo_level(repo, |state| Ok(state.index.label_named(&name).is_some()))?
                {
                    continue;
                }
                self.create_label_locked(
                    repo,
                    LabelPut {
                        name: Some(name),
                        ..LabelPut::default()
                    },
                )?;
            }
        }
        // Each name as its label spells it: a thread carries the label's
        // own name, which a rename finds.
        self.read(repo, |state| {
            Ok(names
                .iter()
                .map(|n| {
                    state
                        .index
                        .label_named(n.trim())
                        .map_or_else(|| n.trim().to_string(), |l| l.name.clone())
                })
                .collect())
        })
    }

    /// The labels an edit leaves a thread that carries `current` with,
    /// asked for `wanted`: a name the thread has whose label was deleted
    /// is dropped (it is no label any more, and is not made again); a new
    /// name becomes a label ([`MetaStore::ensure_labels`]); each as its
    /// label spells it.
    pub(crate) fn settle_labels(
        &self,
        repo: &RepoName,
        current: &[String],
        wanted: Vec<String>,
    ) -> Result<Vec<String>, MetaError> {
        if self.system().is_err() {
            return Ok(wanted);
        }
        let kept: Vec<String> = self.read(repo, |state| {
            Ok(wanted
                .into_iter()
                .filter(|name| {
                    state.index.label_named(name.trim()).is_some()
                        || !current.iter().any(|c| c.trim() == name.trim())
                })
                .collect())
        })?;
        self.ensure_labels(repo, &kept)
    }

    /// A new label; its name must be free in the repo (ASCII case aside).
    pub fn create_label(&self, repo: &RepoName, put: LabelPut) -> Result<Label, MetaError> {
        let _gate = self.inner.label_gate.lock();
        self.create_label_locked(repo, put)
    }

    fn create_label_locked(&self, repo: &RepoName, put: LabelPut) -> Result<Label, MetaError> {
        let (name, color) = check_label_fields(&put)?;
        let name = name.ok_or_else(|| MetaError::Invalid("a label needs a name".into()))?;
        self.read_repo_level(repo, |state| {
            if let Some(taken) = state.index.label_named(&name) {
                return Err(MetaError::Taken(format!(
                    "label {:?} exists (id {})",
                    taken.name, taken.serial
                )));
            }
            if state.index.labels().count() >= MAX_LABELS_PER_REPO {
                return Err(MetaError::Invalid(format!(
                    "a repo holds at most {MAX_LABELS_PER_REPO} labels"
                )));
            }
            Ok(())
        })?;
        let serial = self.next_serial(SerialKind::Label)?;
        if serial == 0 {
            return Err(MetaError::Invalid(
                "this store holds no accounts, so it gives labels no ids".into(),
            ));
        }
        let label = new_label(
            serial,
            name,
            color.as_deref().unwrap_or(DEFAULT_LABEL_COLOR),
            put.description.as_deref().unwrap_or(""),
        );
        self.write_repo_level(repo, |_| Ok(label))
    }

    /// Label `serial` edited; a new name is carried onto every issue and
    /// pull request that had the old one.
    pub fn edit_label(
        &self,
        repo: &RepoName,
        serial: u64,
        put: LabelPut,
    ) -> Result<Label, MetaError> {
        let (name, color) = check_label_fields(&put)?;
        let gate = self.inner.label_gate.lock();
        let current = self.label(repo, serial)?;
        let renamed = name.clone().filter(|n| *n != current.name);
        let (issues, changes) = match &renamed {
            Some(new) => self.read(repo, |state| {
                if state
                    .index
                    .label_named(new)
                    .is_some_and(|l| l.serial != serial)
                {
                    return Err(MetaError::Taken(format!("label {new:?} exists")));
                }
                let (issues, changes) = state.index.labelled(&current.name);
                if issues.len() + changes.len() > MAX_RENAMED_THREADS {
                    return Err(MetaError::Invalid(format!(
                        "label {:?} is on more than {MAX_RENAMED_THREADS} issues and pull \
                         requests, too many to rename at once; make a new label instead",
                        current.name
                    )));
                }
                Ok((issues, changes))
            })?,
            None => (Vec::new(), Vec::new()),
        };
        let edited = self.write(repo, |state| {
            let mut next = state
                .index
                .label(serial)
                .cloned()
                .ok_or_else(|| MetaError::NotFound(format!("label {serial} not found")))?;
            next.name = name.unwrap_or(next.name);
            next.color = color.unwrap_or(next.color);
            next.description = put.description.unwrap_or(next.description);
            next.replaces = Some(next.version);
            next.version += 1;
            next.updated_at = now_text();
            Ok(next)
        })?;
        // The threads are rewritten without the gate: other repos' labels
        // do not wait for them.
        drop(gate);
        if renamed.is_some() {
            let rename = |labels: &[String]| -> Vec<String> {
                labels
                    .iter()
                    .map(|l| {
                        if *l == current.name {
                            edited.name.clone()
                        } else {
                            l.clone()
                        }
                    })
                    .collect()
            };
            for number in issues {
                self.write(repo, |state| {
                    let mut next = state.issue(number)?;
                    next.labels = entities::dedup(rename(&next.labels));
                    next.replaces = Some(next.version);
                    next.version += 1;
                    next.updated_at = now_text();
                    Ok(next)
                })?;
            }
            for number in changes {
                self.write(repo, |state| {
                    let mut next = state.change(number)?;
                    next.labels = entities::dedup(rename(&next.labels));
                    next.replaces = Some(next.version);
                    next.version += 1;
                    next.updated_at = now_text();
                    Ok(next)
                })?;
            }
        }
        Ok(edited)
    }

    /// Label `serial` deleted: no longer listed, its name free. Threads
    /// keep the name in their documents; it is no label of theirs any
    /// more (shown by [`MetaStore::labels`] only while a label has it).
    pub fn delete_label(&self, repo: &RepoName, serial: u64) -> Result<(), MetaError> {
        let _gate = self.inner.label_gate.lock();
        self.write(repo, |state| {
            let mut next = state
                .index
                .label(serial)
                .cloned()
                .ok_or_else(|| MetaError::NotFound(format!("label {serial} not found")))?;
            next.deleted = true;
            next.replaces = Some(next.version);
            next.version += 1;
            next.updated_at = now_text();
            Ok(next)
        })
        .map(drop)
    }
}

impl MetaStore {
    /// A page of issues and change requests together (Gitea's issue list).
    pub fn list_threads(
        &self,
        repo: &RepoName,
        query: &index::ThreadQuery,
        page: Pagination,
    ) -> Result<Page<index::AnyThread>, MetaError> {
        use index::ThreadPick;
        self.check_failed()?;
        let meta = self.repo(repo)?;
        let (docs, picked) = {
            let state = meta.whole_state(&self.inner)?;
            (state.docs.clone(), state.index.pick_threads(query, page))
        };
        // Bodies are read back from git after the lock is let go; the
        // page is then picked again by number.
        let stored = match picked {
            ThreadPick::Page(page) => page,
            ThreadPick::Text { text, candidates } => {
                let kept = ThreadPick::decide(&text, candidates, &docs)?;
                let state = meta.whole_state(&self.inner)?;
                Page {
                    items: state.index.stored_threads(page.slice(&kept).copied()),
                    total: kept.len(),
                }
            }
        };
        let mut git = None;
        Ok(Page {
            items: stored
                .items
                .into_iter()
                .map(|t| t.whole(&docs, &mut git))
                .collect::<Result<_, _>>()?,
            total: stored.total,
        })
    }

    /// The comments people wrote on thread `number` (events and the
    /// deleted left out), oldest first, as `window` keeps them: Gitea's
    /// list. With how many the window's times keep in all (one pass that
    /// copies nothing; only the comments shown are copied).
    pub fn said_comments(
        &self,
        repo: &RepoName,
        kind: ThreadKind,
        number: u64,
        window: &CommentWindow<'_>,
    ) -> Result<(Vec<Comment>, usize), MetaError> {
        let pick = |state: &RepoState| {
            let thread = state.thread_id(kind, number)?;
            let mut total = 0;
            let (mut shown, mut bytes) = (Vec::new(), 0);
            let kept = state.index.said_comments(&thread).filter(|c| {
                let updated = c.fields().updated_at.as_str();
                window.since.is_none_or(|t| updated >= t)
                    && window.before.is_none_or(|t| updated <= t)
            });
            for comment in kept {
                let room =
                    shown.len() < window.take && (shown.is_empty() || bytes < window.max_bytes);
                if total >= window.skip && room {
                    bytes += comment.body_len() as usize;
                    shown.push(comment.clone());
                }
                total += 1;
            }
            Ok((shown, total))
        };
        self.read_bodies(repo, pick, |docs, (shown, total)| {
            Ok((docs.all_whole(shown)?, total))
        })
    }

    /// How many comments people wrote on thread `id`.
    pub fn comment_count(&self, repo: &RepoName, thread_id: &str) -> Result<usize, MetaError> {
        self.read(repo, |state| Ok(state.index.comment_count(thread_id)))
    }

    /// How many issues and change requests carry label `serial` (what its
    /// rename would rewrite).
    pub fn label_use(&self, repo: &RepoName, serial: u64) -> Result<usize, MetaError> {
        self.read(repo, |state| {
            let Some(label) = state.index.label(serial) else {
                return Ok(0);
            };
            let (issues, changes) = state.index.labelled(&label.name);
            Ok(issues.len() + changes.len())
        })
    }

    /// A comment by its numeric id, with the kind and number of its thread
    /// (deleted ones are not found).
    pub fn comment_by_serial(
        &self,
        repo: &RepoName,
        serial: u64,
    ) -> Result<(Comment, ThreadKind, u64), MetaError> {
        let pick = |state: &RepoState| {
            let comment = state
                .index
                .comment_by_serial(serial)
                .filter(|c| !c.fields().deleted)
                .ok_or_else(|| MetaError::NotFound(format!("comment {serial} not found")))?;
            let (kind, number) = state
                .index
                .thread_of(&comment.fields().thread)
                .ok_or_else(|| MetaError::NotFound(format!("comment {serial} not found")))?;
            Ok((comment.clone(), kind, number))
        };
        self.read_bodies(repo, pick, |docs, (comment, kind, number)| {
            Ok((docs.whole(&comment)?, kind, number))
        })
    }

    /// The repo's comments on every thread, oldest first (Gitea's
    /// repo-wide comment list), with the kind and number of each one's
    /// thread; `since`/`before` bound their update time.
    pub fn repo_comments(
        &self,
        repo: &RepoName,
        since: Option<&str>,
        before: Option<&str>,
        page: Pagination,
    ) -> Result<Page<(Comment, ThreadKind, u64)>, MetaError> {
        let pick = |state: &RepoState| {
            // By serial, which is Gitea's id order and creation order. A
            // page without `since`/`before` walks only as far as it
            // shows; with them, one pass counts what they keep.
            let (walk, said) = state.index.comments_by_serial();
            let in_window = |c: &&Stored<Comment>| {
                let updated = c.fields().updated_at.as_str();
                since.is_none_or(|s| updated >= s) && before.is_none_or(|b| updated <= b)
            };
            let shown = |c: &Stored<Comment>| {
                let (kind, number) = state.index.thread_of(&c.fields().thread)?;
                Some((c.clone(), kind, number))
            };
            let (items, total) = if since.is_none() && before.is_none() {
                let items = walk
                    .skip(page.offset())
                    .take(page.per_page())
                    .filter_map(shown)
                    .collect();
                (items, said)
            } else {
                let mut total = 0;
                let mut items = Vec::new();
                for c in walk.filter(in_window) {
                    if total >= page.offset() && items.len() < page.per_page() {
                        items.extend(shown(c));
                    }
                    total += 1;
                }
                (items, total)
            };
            Ok(Page { items, total })
        };
        self.read_bodies(repo, pick, |docs, page: Page<(Stored<Comment>, _, _)>| {
            let (stored, places): (Vec<_>, Vec<_>) = page
                .items
                .into_iter()
                .map(|(c, kind, number)| (c, (kind, number)))
                .unzip();
            let items = docs
                .all_whole(stored)?
                .into_iter()
                .zip(places)
                .map(|(c, (kind, number))| (c, kind, number))
                .collect();
            Ok(Page {
                items,
                total: page.total,
            })
        })
    }
}
