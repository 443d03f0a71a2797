//! Opening the store: each repo's shard trees read into its index, and
//! every log record above its shard tip's `Vole-Log-Seq` put back in the
//! index and the fold queue (an acknowledged write is never lost; one
//! already folded is never folded twice).

use super::*;

impl MetaStore {
    /// Opens the store: reads every repo's shard trees into its index,
    /// re-queues the log records not yet folded (`replayed`: the meta log's
    /// transactions, as replayed at open), and starts the fold thread.
    pub fn open(
        log: Arc<Log<MetaWrite>>,
        repos_dir: &Path,
        repos: &[(String, PathBuf)],
        replayed: Vec<(u64, MetaWrite)>,
        git: Option<Git>,
        options: StoreOptions,
    ) -> Result<MetaStore, MetaError> {
        let started = Instant::now();
        // A budget past any instant reads everything here. Within one,
        // only the repo-level shards are read here; the rest is the
        // loader's, whose two threads (a reader and an applier) the open
        // waits for until the budget is spent: read on this thread alone,
        // the same documents took about twice as long.
        let budget_end = options
            .read_at_open
            .and_then(|budget| started.checked_add(budget));
        let bodies = bodies::BodyCache::new(bodies::BODY_CACHE_BYTES);
        let mut persisting = match options.persist_index {
            true => persisted::Persisting::begin(&persisted_path(&log)),
            false => persisted::Persisting::default(),
        };
        let repo_level = budget_end.is_some();
        let mut loaded = load_repos(repos, options.shards, repo_level, &bodies, &mut persisting)?;
        let mut unfolded = Unfolded {
            max_seen: log.watermarks().0,
            ..Unfolded::default()
        };
        let Requeued {
            requeued,
            orphaned,
            other_incarnation,
        } = requeue_unfolded(&mut loaded, replayed, &mut unfolded, options.shards);
        let mut map = HashMap::new();
        let mut partial = 0;
        for (name, (meta, _)) in loaded {
            partial += usize::from(!meta.loading.is_whole());
            map.insert(name, Arc::new(meta));
        }
        let (from_git, from_file) = (persisting.from_git, persisting.from_file);
        log.mark_applied(unfolded.applied());
        if let Err(e) = log.persist_applied() {
            tracing::warn!(error = %e, "cannot write the meta log's applied sequence");
        }
        let index_rebuild_ms = started.elapsed().as_secs_f64() * 1e3;
        let counters = Counters::read_at_open(&persisting);
        let inner = Arc::new(Inner {
            log,
            repos_dir: repos_dir.to_path_buf(),
            git,
            options,
            repos: RwLock::new(map),
            unfolded: Mutex::new(unfolded),
            pending_total: AtomicUsize::new(requeued),
            wake: Mutex::new(FoldWake {
                now: requeued > 0,
                idle: false,
            }),
            wake_cv: Condvar::new(),
            flush_requested: AtomicBool::new(false),
            stop: AtomicBool::new(false),
            ids: Mutex::new(ulid::Generator::new()),
            cores: vole_config::defaults::cores(),
            failed: Mutex::new(None),
            counters,
            index_rebuild_ms: AtomicU64::new(index_rebuild_ms.to_bits()),
            settings_generation: AtomicU64::new(0),
            fold_gate: Mutex::new(()),
            maintenance_holds: Arc::new(AtomicUsize::new(0)),
            serials: Mutex::new(HashMap::new()),
            label_gate: Mutex::new(()),
            loads: loading::Loads::default(),
            bodies,
            persisting: Mutex::new(None),
        });
        loading::start_loader(&inner, partial > 0, persisting, started)?;
        let folder_inner = inner.clone();
        let folder = std::thread::Builder::new()
            .name("vole-meta-fold".into())
            .spawn(move || fold_loop(folder_inner))
            .map_err(|e| MetaError::Unavailable(Unavailable::Thread(Arc::new(e))))?;
        let store = MetaStore {
            inner,
            folder: Mutex::new(Some(folder)),
        };
        store.wait_for_budget(budget_end);
        let opened = Opened {
            requeued,
            orphaned,
            other_incarnation,
            from_git,
            from_file,
        };
        store.log_opened(&opened, started);
        Ok(store)
    }

    /// The open's line in the log, once its budget is spent.
    fn log_opened(&self, opened: &Opened, started: Instant) {
        let index_rebuild_ms = started.elapsed().as_secs_f64() * 1e3;
        (self.inner.index_rebuild_ms).store(index_rebuild_ms.to_bits(), Ordering::Relaxed);
        let repos = self.inner.repos.read();
        tracing::info!(
            repos = repos.len(),
            entities = repos
                .values()
                .map(|m| m.state.lock().index.len())
                .sum::<usize>(),
            read_in_background = repos.values().filter(|m| !m.loading.is_whole()).count(),
            requeued = opened.requeued,
            orphaned = opened.orphaned,
            other_incarnation = opened.other_incarnation,
            index_rebuild_ms,
            docs_from_git = opened.from_git,
            docs_from_file = opened.from_file,
            "metadata index rebuilt"
        );
    }

    /// Waits for the loader until `end`, if any: a store it reads whole
    /// by then is whole when it is served, and the persisted index it
    /// writes then is in place (a command run once, whose budget is long,
    /// leaves no write behind when it drops the data dir's lock).
    fn wait_for_budget(&self, end: Option<Instant>) {
        let Some(end) = end else { return };
        let repos: Vec<Arc<RepoMeta>> = self.inner.repos.read().values().cloned().collect();
        for meta in repos {
            let left = end.saturating_duration_since(Instant::now());
            // Not read by then, or not readable: its calls say so.
            let _ = meta.loading.wait(&meta.name, Some(left));
        }
        let all_done = || {
            self.inner
                .repos
                .read()
                .values()
                .all(|m| m.loading.is_done())
        };
        // The loader holds the lock while it writes the file.
        while all_done() && self.inner.persisting.lock().is_some() && Instant::now() < end {
            std::thread::sleep(Duration::from_millis(2));
        }
    }
}

/// What an open did, for its line in the log.
struct Opened {
    requeued: usize,
    orphaned: usize,
    other_incarnation: usize,
    from_git: usize,
    from_file: usize,
}

/// Reads a repo's shard trees into a fresh index; returns each shard's
/// folded sequence too. With `repo_level_only`, only the shards of its
/// repo-level documents (the system repo's all): the rest is left to
/// the loader (`loading.rs`).
pub(super) fn load_repo(
    name: &str,
    git_dir: &Path,
    shards: u16,
    repo_level_only: bool,
    bodies: &bodies::BodyCache,
    persisting: &mut persisted::Persisting,
) -> Result<(RepoMeta, HashMap<u8, u64>), MetaRepoError> {
    let repo_level_only = repo_level_only && name != SYSTEM;
    let repo = fold::open_repo(git_dir)?;
    let docs = Arc::new(bodies::DocReader::new(name, git_dir, bodies.clone()));
    let incarnation = if name == SYSTEM {
        None
    } else {
        vole_git::repos::Incarnation::read(git_dir)?
    };
    let mut index = index::Index::default();
    let mut folded = HashMap::new();
    let mut tips = HashMap::new();
    let mut left = loading::Left::default();
    let mut found = Vec::new();
    for shard in 0..shards {
        let shard = shard as u8;
        let tip = fold::read_shard(&repo, shard)?;
        tips.insert(shard, tip);
        let Some(tip) = tip else { continue };
        folded.insert(shard, fold::folded_seq(&repo, tip)?);
        let tree = fold::tree_of(&repo, tip)?;
        if repo_level_only && !loading::eager_shard(shard, shards) {
            left.trees.push((shard, tree));
            continue;
        }
        persisting.read_shard(&repo, (name, shard), tree, &mut found)?;
        for (entity, blob, left) in found.drain(..) {
            index.apply_persisted(entity, blob, left);
        }
    }
    let loading = if left.trees.is_empty() {
        loading::Loading::whole()
    } else {
        loading::Loading::to_read(left)
    };
    Ok((
        RepoMeta {
            name: name.to_string(),
            git_dir: git_dir.to_path_buf(),
            incarnation,
            state: Mutex::new(RepoState {
                index,
                docs: docs.clone(),
                next_ticket: 0,
                pending: BTreeMap::new(),
            }),
            tips: Mutex::new(tips),
            packs_since_check: AtomicUsize::new(0),
            repacking: Arc::new(AtomicBool::new(false)),
            appender: Appender::default(),
            loading,
            docs,
        },
        folded,
    ))
}

/// Each repo's metadata by name, with the log sequence each shard has
/// folded through.
type Loaded = HashMap<String, (RepoMeta, HashMap<u8, u64>)>;

/// Each repo's metadata as its shard refs hold it, with the log sequence
/// each shard has folded through.
fn load_repos(
    repos: &[(String, PathBuf)],
    shards: u16,
    repo_level_only: bool,
    bodies: &bodies::BodyCache,
    persisting: &mut persisted::Persisting,
) -> Result<Loaded, MetaError> {
    let mut loaded = HashMap::new();
    for (name, git_dir) in repos {
        let (meta, folded) = load_repo(name, git_dir, shards, repo_level_only, bodies, persisting)
            .map_err(|e| Unavailable::unreadable(name, e))?;
        loaded.insert(name.clone(), (meta, folded));
    }
    Ok(loaded)
}

/// How the log's records above the shard tips were taken back.
struct Requeued {
    /// Put back in the index and the fold queue.
    requeued: usize,
    /// Of a repo not on disk.
    orphaned: usize,
    /// Of another repo of the name, deleted since.
    other_incarnation: usize,
}

/// Puts every replayed record its shard has not folded back in its repo's
/// index and fold queue, and in `unfolded`.
fn requeue_unfolded(
    loaded: &mut Loaded,
    replayed: Vec<(u64, MetaWrite)>,
    unfolded: &mut Unfolded,
    shards: u16,
) -> Requeued {
    let mut requeued = 0usize;
    let mut orphaned = 0usize;
    let mut other_incarnation = 0usize;
    for (seq, row) in replayed {
        let Some((meta, folded)) = loaded.get_mut(&row.repo) else {
            orphaned += 1;
            continue;
        };
        // A record of another repo of this name (deleted since) is not
        // this one's: its shard tips say nothing of it.
        if let Some(incarnation) = &meta.incarnation
            && !incarnation.owns(Some(&row.incarnation))
        {
            other_incarnation += 1;
            continue;
        }
        if seq <= folded.get(&row.shard).copied().unwrap_or(0) {
            continue;
        }
        let entity: Entity = match serde_json::from_str(&row.body) {
            Ok(entity) => entity,
            Err(e) => {
                tracing::error!(seq, repo = row.repo, error = %e, "meta log record does not parse; skipped");
                continue;
            }
        };
        let path = entity.tree_path();
        let body = fold_body(&entity, row.body);
        // A shard the loader has yet to read gets its records after its
        // tree, as here.
        if meta.loading.is_whole() || loading::eager_shard(row.shard, shards) {
            meta.state.get_mut().index.apply(entity);
        } else {
            meta.loading.left_mut().replays.push(entity);
        }
        let state = meta.state.get_mut();
        state
            .pending
            .entry(row.shard)
            .or_insert_with(|| ShardQueue {
                writes: Vec::new(),
                since: Instant::now(),
            })
            .writes
            .push(PendingWrite {
                seq,
                shard: row.shard,
                path,
                body,
            });
        unfolded.seqs.insert(seq);
        requeued += 1;
    }
    Requeued {
        requeued,
        orphaned,
        other_incarnation,
    }
}

/// The users the system repo at `git_dir` holds as its shard refs have
/// them (writes the log holds but no fold has applied yet are not in
/// them), read only: for `vole check`.
pub fn folded_users(git_dir: &Path) -> Result<Vec<User>, MetaRepoError> {
    let bodies = bodies::BodyCache::new(bodies::BODY_CACHE_BYTES);
    let (meta, _) = load_repo(
        SYSTEM,
        git_dir,
        crate::shard::SHARDS,
        false,
        &bodies,
        &mut persisted::Persisting::default(),
    )?;
    let state = meta.state.into_inner();
    Ok(state.index.users().cloned().collect())
}

/// Where the persisted index of the store on `log` lives: beside it.
pub(crate) fn persisted_path(log: &Log<MetaWrite>) -> PathBuf {
    log.path().with_file_name(persisted::FILE_NAME)
}

impl Counters {
    /// The counters of a store whose open read what `persisting` counted.
    fn read_at_open(persisting: &persisted::Persisting) -> Counters {
        let counters = Counters::default();
        counters
            .docs_from_git
            .store(persisting.from_git as u64, Ordering::Relaxed);
        counters
            .docs_from_file
            .store(persisting.from_file as u64, Ordering::Relaxed);
        counters
    }
}
