//! The fold thread: when it wakes, which repos and shards a cycle folds
//! (one or two lanes), and settling a cycle (marking its writes applied
//! in the log once their pack and refs are synced).

use super::*;

// ---- the fold thread --------------------------------------------------------

/// What the fold thread is woken for. Writers signal it only when it has
/// something to act on: a full shard or a flush (`now`), or a first pending
/// write while it sleeps without a timer (`idle`). Signalling on every
/// write cost every write a futex call and, while a cycle waited out its
/// minimum gap, a context switch of the fold thread.
pub(super) struct FoldWake {
    /// A shard filled, a flush was asked or the store stops.
    pub(super) now: bool,
    /// The fold thread sleeps with nothing pending (no timer running).
    pub(super) idle: bool,
}

impl Inner {
    /// Called after a write is queued (`pending_total` already counts it)
    /// or when a fold is wanted at once (`now`).
    pub(super) fn wake(&self, now: bool) {
        let mut wake = self.wake.lock();
        if now {
            wake.now = true;
            self.wake_cv.notify_one();
        } else if wake.idle {
            self.wake_cv.notify_one();
        }
    }
}

/// One thread folds every repo: the gix handles it keeps are not `Sync`,
/// and folding is I/O-bound on fsync, which one thread per data dir
/// already batches (a cycle takes everything that queued during the last).
pub(super) fn fold_loop(inner: Arc<Inner>) {
    let mut handles: HashMap<String, gix::Repository> = HashMap::new();
    let interval = inner.options.fold_interval;
    let min_gap = (interval / 10).min(Duration::from_millis(100));
    let mut last_cycle = Instant::now();
    loop {
        {
            let mut wake = inner.wake.lock();
            if !wake.now && !inner.stop.load(Ordering::SeqCst) {
                // Checked under the wake lock: a writer counts its write
                // before it takes this lock, so it either is seen here or
                // finds `idle` set and signals.
                if inner.pending_total.load(Ordering::SeqCst) == 0 {
                    wake.idle = true;
                    inner.wake_cv.wait(&mut wake);
                    wake.idle = false;
                } else {
                    inner.wake_cv.wait_for(&mut wake, interval / 2);
                }
            }
            wake.now = false;
        }
        // Stopping folds nothing more: `close` flushes first; a plain drop
        // leaves the queue to the log, as a crash would.
        if inner.stop.load(Ordering::SeqCst) {
            return;
        }
        let mut force = inner.flush_requested.swap(false, Ordering::SeqCst);
        // Cycles start at most every `interval / 10` (at most 100 ms apart;
        // a flush or a stop cuts the wait short): a shard that fills
        // right after a cycle waits for its neighbours, so one cycle (one
        // pack, one ref transaction) carries several full shards instead
        // of one each.
        let since_last = last_cycle.elapsed();
        if !force && since_last < min_gap {
            let mut wake = inner.wake.lock();
            let _ = inner.wake_cv.wait_while_for(
                &mut wake,
                |_| {
                    !inner.flush_requested.load(Ordering::SeqCst)
                        && !inner.stop.load(Ordering::SeqCst)
                },
                min_gap - since_last,
            );
            if inner.stop.load(Ordering::SeqCst) {
                return;
            }
            force = inner.flush_requested.swap(false, Ordering::SeqCst);
        }
        last_cycle = Instant::now();
        let repos: Vec<Arc<RepoMeta>> = inner.repos.read().values().cloned().collect();
        for repo in repos {
            fold_repo(&inner, &repo, &mut handles, force);
        }
    }
}

pub(super) fn fold_repo(
    inner: &Inner,
    meta: &RepoMeta,
    handles: &mut HashMap<String, gix::Repository>,
    force: bool,
) {
    let options = &inner.options;
    let durable = inner.log.watermarks().1;
    let now = Instant::now();
    let batch: Vec<(u8, Vec<PendingWrite>)> = {
        let state = meta.state.lock();
        state
            .pending
            .iter()
            .filter(|(_, q)| {
                force
                    || q.writes.len() >= options.fold_batch
                    || now.duration_since(q.since) >= options.fold_interval
            })
            .map(|(shard, q)| {
                (
                    *shard,
                    q.writes
                        .iter()
                        .take_while(|w| w.seq <= durable)
                        .cloned()
                        .collect::<Vec<_>>(),
                )
            })
            .filter(|(_, writes)| !writes.is_empty())
            .collect()
    };
    if batch.is_empty() {
        return;
    }
    // Through settling: a backup's cut sees every shard ref before or
    // after this fold, never between.
    let _gate = inner.fold_gate.lock();
    // A repo deleted and created again under the name is another repo:
    // what was written to the first is never folded into the second.
    if meta.incarnation.is_some()
        && vole_git::repos::Incarnation::read(&meta.git_dir)
            .ok()
            .flatten()
            != meta.incarnation
    {
        tracing::warn!(
            repo = meta.name,
            "the repository was deleted (or replaced) with metadata writes pending; they stay in the log, folded nowhere"
        );
        handles.remove(&handle_key(meta));
        return;
    }
    let repo = match handles.entry(handle_key(meta)) {
        std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
        std::collections::hash_map::Entry::Vacant(e) => match fold::open_repo(&meta.git_dir) {
            Ok(repo) => e.insert(repo),
            Err(why) => {
                tracing::error!(
                    repo = meta.name,
                    error = %vole_stdx::error_chain::Chain(&why),
                    "cannot open the repo to fold"
                );
                inner.counters.fold_errors.fetch_add(1, Ordering::Relaxed);
                return;
            }
        },
    };
    // A cycle that moves many shards is built on two threads, each with its
    // own repo handle and pack: the shards are independent, and most of
    // such a cycle is per-shard work (tree edits, hashing, packing) that
    // one thread does while the other core waits, as at a flush after a
    // burst. Its refs still move in one transaction.
    let lanes = if batch.len() >= PARALLEL_FOLD_SHARDS && inner.cores > 1 {
        2
    } else {
        1
    };
    let tips: HashMap<u8, Option<ObjectId>> = meta.tips.lock().clone();
    let mut expected = |shard: u8| tips.get(&shard).copied();
    let result = fold::commit_shards(
        repo,
        &meta.name,
        &batch,
        options.fold_batch,
        lanes,
        &mut expected,
        options.fold_hook.as_ref(),
    );
    if !settle_fold(inner, meta, &batch, result, now) {
        // Reopen next time.
        handles.remove(&handle_key(meta));
    }
}

/// The fold's handle on a repo belongs to one incarnation of its name.
fn handle_key(meta: &RepoMeta) -> String {
    match &meta.incarnation {
        Some(incarnation) => format!("{}#{incarnation}", meta.name),
        None => meta.name.clone(),
    }
}

/// Cycles moving at least this many shards are built on two threads.
pub(super) const PARALLEL_FOLD_SHARDS: usize = 128;

/// Records what a fold of `batch` did: on success the new tips, the
/// counters and the writes marked applied; on failure the writes stay
/// queued and wait an interval. Returns whether it succeeded.
pub(super) fn settle_fold(
    inner: &Inner,
    meta: &RepoMeta,
    batch: &[(u8, Vec<PendingWrite>)],
    result: Result<(fold::FoldReport, Vec<(u8, ObjectId)>), fold::FoldError>,
    now: Instant,
) -> bool {
    match result {
        Ok((report, new_tips)) => {
            // The repo's object format, as its new tips have it.
            let hash_kind = new_tips.first().map(|(_, tip)| tip.kind());
            {
                let mut tips = meta.tips.lock();
                for (shard, tip) in new_tips {
                    tips.insert(shard, Some(tip));
                }
            }
            let c = &inner.counters;
            // Counted before its writes leave `pending`: whoever waits for
            // them (a flush) sees the cycle counted.
            c.fold_cycles.fetch_add(1, Ordering::Relaxed);
            c.fold_commits
                .fetch_add(report.commits as u64, Ordering::Relaxed);
            c.fold_objects
                .fetch_add(report.objects as u64, Ordering::Relaxed);
            c.folded_writes
                .fetch_add(report.writes as u64, Ordering::Relaxed);
            c.fold_batch.0.observe(report.writes as f64);
            c.foreign_moves
                .fetch_add(report.foreign_moves as u64, Ordering::Relaxed);
            for (counter, took) in [
                (&c.build_nanos, report.build),
                (&c.pack_nanos, report.pack),
                (&c.refs_nanos, report.refs),
                (&c.sync_nanos, report.sync),
            ] {
                counter.fetch_add(took.as_nanos() as u64, Ordering::Relaxed);
            }
            // Synced: now, and only now, the writes count as applied.
            // The two locks are taken one after the other, never nested
            // (appends take `unfolded` alone around the log write): a
            // write leaves `pending` first and `unfolded` after, so
            // `applied()` never passes it early.
            // Read before the lock is taken: under it, look-ups alone.
            let folded = hash_kind.map_or_else(Vec::new, |kind| folded_docs(batch, kind));
            {
                let mut state = meta.state.lock();
                bodies_folded(meta, &mut state, folded);
                for (shard, writes) in batch {
                    if let Some(queue) = state.pending.get_mut(shard) {
                        queue.writes.drain(..writes.len());
                        if queue.writes.is_empty() {
                            state.pending.remove(shard);
                        } else {
                            queue.since = now;
                        }
                    }
                }
            }
            let applied = {
                let mut unfolded = inner.unfolded.lock();
                for write in batch.iter().flat_map(|(_, writes)| writes) {
                    unfolded.seqs.remove(&write.seq);
                }
                unfolded.applied()
            };
            inner
                .pending_total
                .fetch_sub(report.writes, Ordering::SeqCst);
            inner.log.mark_applied(applied);
            if let Err(e) = inner.log.persist_applied() {
                tracing::warn!(error = %e, "cannot write the meta log's applied sequence");
            }
            if meta
                .packs_since_check
                .fetch_add(report.packs, Ordering::Relaxed)
                + report.packs
                >= inner.options.max_packs / 2
            {
                meta.packs_since_check.store(0, Ordering::Relaxed);
                maybe_repack(inner, meta);
            }
            true
        }
        Err(e) => {
            inner.counters.fold_errors.fetch_add(1, Ordering::Relaxed);
            tracing::error!(error = %vole_stdx::error_chain::Chain(&e), "fold failed; the writes stay queued and are tried again");
            // Wait an interval before retrying (the caller reopens).
            let mut state = meta.state.lock();
            for (shard, _) in batch {
                if let Some(queue) = state.pending.get_mut(shard) {
                    queue.since = now;
                }
            }
            false
        }
    }
}

/// Under the repo's lock: the index leaves in git the long bodies of the
/// versions it holds that a fold wrote. A version the background read has
/// yet to put in the index (a record replayed after its shard's tree) is
/// left to the read, which takes it after its records, under this lock.
fn bodies_folded(meta: &RepoMeta, state: &mut RepoState, folded: Vec<index::stored::FoldedDoc>) {
    for doc in folded {
        if !state.index.body_folded(&doc) && !meta.loading.is_done() {
            meta.loading.left_mut().folded_early.push(doc);
        }
    }
}

/// The documents of `batch` whose long bodies the index may leave in the
/// blobs the fold wrote (a write's blob is its document's bytes), if the
/// versions folded are the ones it holds.
fn folded_docs(
    batch: &[(u8, Vec<PendingWrite>)],
    hash_kind: gix::hash::Kind,
) -> Vec<index::stored::FoldedDoc> {
    batch
        .iter()
        .flat_map(|(_, writes)| writes)
        .filter_map(|w| index::stored::FoldedDoc::read(&w.path, &w.body, hash_kind))
        .collect()
}
