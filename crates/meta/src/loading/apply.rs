//! The background read's second thread: the documents the reader took
//! from a shard tree go into the repo's index here while the reader
//! takes the next shard's. At a million issues the read is about as much
//! index inserts (and the fresh memory they fault in) as parsing and
//! checking rows, and a server has more than one core: the two halves
//! overlap. Steps are applied in the order they were handed on, so a
//! repo's log records still go in after all of its shards.

use std::sync::mpsc;
use std::thread::JoinHandle;

use super::*;
use crate::persisted::Found;

/// What the reader hands on.
pub(super) enum Step {
    /// A shard tree's documents, into the repo's index.
    Docs(Arc<RepoMeta>, Vec<Found>),
    /// Every shard of the repo is handed on: its log records next, and
    /// the index is whole.
    Finish(Arc<RepoMeta>),
}

/// Shards handed on and not yet applied, at most: each is one shard
/// tree's documents in memory.
const QUEUED: usize = 2;

/// The thread that applies, fed by the reader.
pub(super) struct Applier {
    to_apply: Option<mpsc::SyncSender<Step>>,
    thread: Option<JoinHandle<()>>,
    /// Buffers emptied into an index, for the next shards' documents (a
    /// shard's worth of capacity, not allocated afresh for each).
    emptied: mpsc::Receiver<Vec<Found>>,
    give_back: mpsc::Sender<Vec<Found>>,
}

impl Applier {
    /// The thread started; if it cannot be, the reader applies each step
    /// itself.
    pub(super) fn start() -> Applier {
        let (give_back, emptied) = mpsc::channel();
        let (to_apply, steps) = mpsc::sync_channel(QUEUED);
        let back = give_back.clone();
        let thread = std::thread::Builder::new()
            .name("vole-meta-apply".into())
            .spawn(move || {
                for step in steps {
                    // Caught whole (`apply` catches its own; this is for a
                    // panic in giving up): the thread outlives any step,
                    // so none queued behind it is lost.
                    let applied =
                        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| apply(step)));
                    if let Ok(Some(buffer)) = applied {
                        let _ = back.send(buffer);
                    }
                }
            });
        let (to_apply, thread) = match thread {
            Ok(thread) => (Some(to_apply), Some(thread)),
            Err(e) => {
                tracing::warn!(error = %e, "the metadata index is applied on the reader's thread");
                (None, None)
            }
        };
        Applier {
            to_apply,
            thread,
            emptied,
            give_back,
        }
    }

    /// An empty buffer for a shard's documents.
    pub(super) fn buffer(&self) -> Vec<Found> {
        self.emptied.try_recv().unwrap_or_default()
    }

    /// Hands `step` on, waiting while [`QUEUED`] steps wait already.
    pub(super) fn hand_on(&self, step: Step) {
        let step = match &self.to_apply {
            Some(to_apply) => match to_apply.send(step) {
                Ok(()) => return,
                // The thread is gone (only if its start failed late:
                // each step is caught), so the step is applied here.
                Err(mpsc::SendError(step)) => step,
            },
            None => step,
        };
        if let Some(buffer) = apply(step) {
            let _ = self.give_back.send(buffer);
        }
    }

    /// Returns once every step handed on is applied; later steps are
    /// applied by the reader itself.
    pub(super) fn drain(&mut self) {
        drop(self.to_apply.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for Applier {
    fn drop(&mut self) {
        self.drain();
    }
}

/// Applies one step; a panic gives up on the repo (its calls are
/// refused), not on the read of every other. The emptied buffer back.
fn apply(step: Step) -> Option<Vec<Found>> {
    let (meta, buffer) = match step {
        Step::Docs(meta, mut found) => {
            // Given up on, or deleted, meanwhile: nothing to apply.
            if meta.loading.is_done() {
                found.clear();
                return Some(found);
            }
            // The shards left are about as big as this one (a document's
            // shard is a hash of its id): room for all their threads. The
            // reader may be up to `QUEUED + 1` shards ahead of this one.
            let (mut issues, mut changes, mut first_id) = (0usize, 0usize, None);
            for (entity, _, _) in &found {
                let id = match entity {
                    Entity::Issue(i) => {
                        issues += 1;
                        &i.id
                    }
                    Entity::Change(c) => {
                        changes += 1;
                        &c.id
                    }
                    _ => continue,
                };
                first_id.get_or_insert(id.as_str());
            }
            let ids_as_bits = first_id.is_some_and(index::thread_id_kept_as_bits);
            let shards = meta.loading.left_mut().trees.len() + 1 + QUEUED + 1;
            let applied = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                let mut state = meta.state.lock();
                state.index.defer_facets();
                let expected = (
                    issues.saturating_mul(shards),
                    changes.saturating_mul(shards),
                );
                state.index.expect_threads(expected, ids_as_bits);
                for (entity, blob, left) in found.drain(..) {
                    state.index.apply_persisted(entity, blob, left);
                }
            }));
            match applied {
                Ok(()) => return Some(found),
                Err(_) => (meta, None),
            }
        }
        Step::Finish(meta) => {
            let finished =
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| finish_read(&meta)));
            match finished {
                Ok(()) => return None,
                Err(_) => (meta, None),
            }
        }
    };
    give_up(&meta, fold::MetaRepoError::Panicked("metadata index"));
    buffer
}

/// The repo's log records above its shard tips, and what folds wrote
/// while it was read; then its index is whole. Under the repo's lock
/// throughout, as the fold settles: a fold either finds the records
/// applied and the read finished, or leaves what it wrote to
/// `folded_early`.
fn finish_read(meta: &RepoMeta) {
    let mut state = meta.state.lock();
    state.index.build_deferred_facets();
    let (replays, folded_early) = {
        let mut left = meta.loading.left_mut();
        (
            std::mem::take(&mut left.replays),
            std::mem::take(&mut left.folded_early),
        )
    };
    for entity in replays {
        state.index.apply(entity);
    }
    for doc in &folded_early {
        state.index.body_folded(doc);
    }
    meta.loading.finish(Ok(()));
}
