//! Maintenance and figures: flushing and closing the fold thread,
//! compacting the meta log, and the run-time figures ([`MetaStats`]).

use super::*;

/// The longest a maintenance hold waits for a repack under way.
pub const REPACK_WAIT: Duration = Duration::from_secs(120);

/// Run-time figures of the store.
#[derive(Debug, Clone, Default, Serialize)]
pub struct MetaStats {
    pub repos: usize,
    /// Of them, those whose issues, change requests and comments are
    /// still being read after the start (`loading.rs`).
    pub repos_being_read: usize,
    /// Documents in the index (those read so far).
    pub entities: usize,
    pub pending: usize,
    pub applied_seq: u64,
    pub fold_cycles: u64,
    pub fold_commits: u64,
    pub fold_objects: u64,
    pub folded_writes: u64,
    pub foreign_moves: u64,
    pub fold_errors: u64,
    pub repacks: u64,
    /// Time the fold cycles spent per stage (see [`fold::FoldReport`]).
    pub fold_build_ms: f64,
    pub fold_pack_ms: f64,
    pub fold_refs_ms: f64,
    pub fold_sync_ms: f64,
    pub index_rebuild_ms: f64,
    /// Documents the reads of shard trees since the open took from git,
    /// and from the persisted index ([`crate::persisted`]).
    pub docs_from_git: u64,
    pub docs_from_file: u64,
}

impl MetaStore {
    /// After a push: repacks the repo (on its own thread) if it holds more
    /// than `max_packs` packs (each push through vole writes one).
    pub fn repack_if_needed(&self, repo: &RepoName) {
        if let Ok(meta) = self.repo(repo) {
            maybe_repack(&self.inner, &meta);
        }
    }

    // ---- maintenance ----

    /// Lets go of the repo handles the body readers opened more than 5 s
    /// ago (the server's upkeep, every few seconds): a repo whose bodies
    /// are read no more keeps no pack mapped for them. No repo's lock is
    /// taken; a reader opening a handle is waited for.
    pub fn release_idle_handles(&self) {
        let repos: Vec<Arc<RepoMeta>> = self.inner.repos.read().values().cloned().collect();
        for meta in repos {
            meta.docs.release_older_than(bodies::HANDLE_KEPT);
        }
    }

    /// Lets go of the handle `repo`'s body reader holds, at once: after a
    /// `gc` deleted the packs it maps (their space is freed only once no
    /// handle maps them).
    pub fn release_handles(&self, repo: &RepoName) {
        if let Some(meta) = self.inner.repos.read().get(&repo.to_string()).cloned() {
            meta.docs.release_older_than(Duration::ZERO);
        }
    }

    /// Drops the repo from the store, for a repo moved out of `data/repos`
    /// (deleted; [`MetaStore::flush`] first, so its copy is whole): a repo
    /// created under the name later starts afresh, and caches of what the
    /// settings decide (the warm site map) are out of date.
    pub fn forget_repo(&self, repo: &RepoName) {
        let forgotten = self.inner.repos.write().remove(&repo.to_string());
        self.inner
            .settings_generation
            .fetch_add(1, Ordering::AcqRel);
        // Writes still waiting for a fold (they came after the delete's
        // flush) are folded nowhere now: they stay in the log, no longer
        // counted as pending, so flushes and the applied watermark (and so
        // compaction) do not wait on them.
        let Some(meta) = forgotten else {
            return;
        };
        // Read no further: whoever waits for it is told it is gone.
        meta.forget_loading();
        // No fold of it is between taking its writes and settling them.
        let _folds = self.inner.fold_gate.lock();
        let dropped: Vec<u64> = std::mem::take(&mut meta.state.lock().pending)
            .into_values()
            .flat_map(|queue| queue.writes)
            .map(|write| write.seq)
            .collect();
        if dropped.is_empty() {
            return;
        }
        let applied = {
            let mut unfolded = self.inner.unfolded.lock();
            for seq in &dropped {
                unfolded.seqs.remove(seq);
            }
            unfolded.applied()
        };
        self.inner
            .pending_total
            .fetch_sub(dropped.len(), Ordering::SeqCst);
        self.inner.log.mark_applied(applied);
        tracing::warn!(
            repo = %repo,
            writes = dropped.len(),
            "metadata writes of a deleted repository were not folded; they stay in the log"
        );
    }

    /// Folds everything pending now and waits (at most `bound`) until it
    /// is folded and synced; returns whether it was.
    pub fn flush(&self, bound: Duration) -> bool {
        let deadline = Instant::now() + bound;
        loop {
            if self.inner.pending_total.load(Ordering::SeqCst) == 0 {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            self.inner.flush_requested.store(true, Ordering::SeqCst);
            self.inner.wake(true);
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// Folds what is pending (waiting at most `bound`) and stops the fold
    /// thread. Whatever is left is folded again at the next open.
    pub fn close(&self, bound: Duration) {
        let flushed = self.flush(bound);
        self.inner.stop.store(true, Ordering::SeqCst);
        self.inner.wake(true);
        if let Some(folder) = self.folder.lock().take() {
            let _ = folder.join();
        }
        if !flushed {
            tracing::warn!(
                pending = self.inner.pending_total.load(Ordering::SeqCst),
                "metadata writes left unfolded at stop; they are folded at the next start"
            );
        }
        if let Err(e) = self.persist_index(crate::persisted::PERSIST_AT_STOP) {
            tracing::warn!(error = %e, "cannot write the persisted metadata index at stop");
        }
    }

    /// Compacts the meta log: drops the records already folded and synced
    /// (applied), except the last `keep` transactions.
    pub fn compact_log(&self, keep: u64) -> Result<vole_log::CompactReport, vole_log::LogError> {
        let (written, _) = self.inner.log.watermarks();
        let drop_through = self.inner.log.applied().min(written.saturating_sub(keep));
        self.inner.log.compact(drop_through, &[])
    }

    /// Waits for the fold under way (if any) to finish and keeps any other
    /// from starting while the guard lives: no shard ref moves meanwhile.
    pub fn hold_folds(&self) -> parking_lot::MutexGuard<'_, ()> {
        self.inner.fold_gate.lock()
    }

    /// Holds off repacks and log compaction (a backup copying files): none
    /// starts while the hold lives, and one under way is waited for (a
    /// repack at most [`REPACK_WAIT`]) before this returns.
    pub fn hold_maintenance(&self) -> MaintenanceHold {
        self.inner.maintenance_holds.fetch_add(1, Ordering::SeqCst);
        let hold = MaintenanceHold(self.inner.maintenance_holds.clone());
        self.inner.log.wait_compaction();
        let deadline = Instant::now() + REPACK_WAIT;
        while Instant::now() < deadline
            && self
                .inner
                .repos
                .read()
                .values()
                .any(|repo| repo.repacking.load(Ordering::SeqCst))
        {
            std::thread::sleep(Duration::from_millis(20));
        }
        hold
    }

    /// The meta log.
    pub fn log(&self) -> &Arc<vole_log::Log<MetaWrite>> {
        &self.inner.log
    }

    /// Whether a [`MaintenanceHold`] lives.
    pub fn maintenance_held(&self) -> bool {
        self.inner.maintenance_holds.load(Ordering::SeqCst) > 0
    }

    /// Writes folded per cycle (a histogram, for the metrics).
    pub fn fold_batches(&self) -> FoldBatch {
        self.inner.counters.fold_batch.clone()
    }

    pub fn stats(&self) -> MetaStats {
        let repos = self.inner.repos.read();
        let entities = repos.values().map(|r| r.state.lock().index.len()).sum();
        let repos_being_read = repos.values().filter(|r| !r.loading.is_whole()).count();
        let c = &self.inner.counters;
        MetaStats {
            repos: repos.len(),
            repos_being_read,
            entities,
            pending: self.inner.pending_total.load(Ordering::SeqCst),
            applied_seq: self.inner.log.applied(),
            fold_cycles: c.fold_cycles.load(Ordering::Relaxed),
            fold_commits: c.fold_commits.load(Ordering::Relaxed),
            fold_objects: c.fold_objects.load(Ordering::Relaxed),
            folded_writes: c.folded_writes.load(Ordering::Relaxed),
            foreign_moves: c.foreign_moves.load(Ordering::Relaxed),
            fold_errors: c.fold_errors.load(Ordering::Relaxed),
            repacks: c.repacks.load(Ordering::Relaxed),
            fold_build_ms: c.build_nanos.load(Ordering::Relaxed) as f64 / 1e6,
            fold_pack_ms: c.pack_nanos.load(Ordering::Relaxed) as f64 / 1e6,
            fold_refs_ms: c.refs_nanos.load(Ordering::Relaxed) as f64 / 1e6,
            fold_sync_ms: c.sync_nanos.load(Ordering::Relaxed) as f64 / 1e6,
            index_rebuild_ms: f64::from_bits(self.inner.index_rebuild_ms.load(Ordering::Relaxed)),
            docs_from_git: c.docs_from_git.load(Ordering::Relaxed),
            docs_from_file: c.docs_from_file.load(Ordering::Relaxed),
        }
    }
}
