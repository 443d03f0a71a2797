//! Reading a repo's documents after the store has opened. The open reads
//! each repo's repo-level shards (ACL, settings, labels: what every clone,
//! push and site request needs) and waits a bounded time
//! ([`StoreOptions::read_at_open`]) for the rest, which is read by one
//! background thread, a shard at a time, the repos
//! calls ask for first (a second puts what it read in the index:
//! `apply.rs`), so a start costs the same whatever the repos hold. A
//! call that needs a repo's whole index before it is read is told at
//! once to retry ([`MetaError::Loading`], a 503 with `Retry-After`):
//! requests run on the server's few async threads, and a wait there would
//! stall every other request. Work off a request's path waits instead
//! ([`MetaStore::wait_read`], [`MetaStore::wait_until_read`]).

use super::*;

/// A repo with at most this many shards left to read is waited for
/// ([`SHORT_WAIT`]) rather than answered with a retry at once.
const FEW_SHARDS_LEFT: usize = 8;

/// How long a call waits for a repo with few shards left.
const SHORT_WAIT: Duration = Duration::from_millis(100);

/// The shards every repo reads at open: those of its repo-level
/// documents (ACL, settings, labels).
pub(crate) fn eager_shard(shard: u8, shards: u16) -> bool {
    shard == shard::shard_of(entity::REPO_ROOT_ID, shards)
        || shard == shard::shard_of(numbered::LABELS_ROOT, shards)
}

/// What is left to read of one repo: shard trees, then the log records of
/// those shards that their tips had not folded (in log order), and the
/// folds of those records that settled before the read applied them.
#[derive(Default)]
pub(crate) struct Left {
    /// Shard trees left, with their shard.
    pub(crate) trees: Vec<(u8, ObjectId)>,
    pub(crate) replays: Vec<Entity>,
    /// What folds wrote of documents the index did not hold yet: applied
    /// after `replays`, so a long body folded while the read went on is
    /// left in its blob as it would be in a repo read whole at open.
    pub(crate) folded_early: Vec<index::stored::FoldedDoc>,
}

/// A repo's background read: what is left, and how it ended.
#[derive(Default)]
pub(crate) struct Loading {
    left: Mutex<Left>,
    /// `None` while reading; `Some(Ok)` once the index is whole.
    outcome: Mutex<Option<Result<(), Unavailable>>>,
    whole: AtomicBool,
    /// Whole, or given up on (a tree that cannot be read).
    done: AtomicBool,
    /// Every shard read and handed on to be applied ([`apply`]): the
    /// reader has nothing left of it.
    handed_on: AtomicBool,
    ended: Condvar,
}

impl Loading {
    /// A repo read whole at open.
    pub(crate) fn whole() -> Loading {
        let loading = Loading::default();
        loading.finish(Ok(()));
        loading
    }

    pub(crate) fn is_whole(&self) -> bool {
        self.whole.load(Ordering::Acquire)
    }

    /// A repo with `left` to read in the background.
    pub(crate) fn to_read(left: Left) -> Loading {
        Loading {
            left: Mutex::new(left),
            ..Loading::default()
        }
    }

    /// Whole, or given up on.
    pub(crate) fn is_done(&self) -> bool {
        self.done.load(Ordering::Acquire)
    }

    /// Whether the reader has more of it to read.
    fn to_read_more(&self) -> bool {
        !self.is_done() && !self.handed_on.load(Ordering::Acquire)
    }

    pub(crate) fn left_mut(&self) -> parking_lot::MutexGuard<'_, Left> {
        self.left.lock()
    }

    /// Ends the read, once: a later outcome (a delete after the last
    /// shard, or the last shard after a delete) changes nothing.
    fn finish(&self, outcome: Result<(), Unavailable>) {
        let mut ended = self.outcome.lock();
        if ended.is_some() {
            return;
        }
        if outcome.is_ok() {
            self.whole.store(true, Ordering::Release);
        }
        self.done.store(true, Ordering::Release);
        *ended = Some(outcome);
        self.ended.notify_all();
    }

    /// Waits until the index is whole, at most `bound`.
    pub(crate) fn wait(&self, repo: &str, bound: Option<Duration>) -> Result<(), MetaError> {
        let deadline = bound.map(|b| Instant::now() + b);
        let mut ended = self.outcome.lock();
        loop {
            match &*ended {
                Some(Ok(())) => return Ok(()),
                Some(Err(Unavailable::Forgotten(name))) => {
                    return Err(MetaError::NoRepo(name.clone()));
                }
                Some(Err(e)) => return Err(MetaError::Unavailable(e.clone())),
                None => match deadline {
                    Some(deadline) => {
                        if self.ended.wait_until(&mut ended, deadline).timed_out()
                            && ended.is_none()
                        {
                            return Err(MetaError::Loading(format!(
                                "the issues and pull requests of {repo} are still being read \
                                 after the server's start; retry in a few seconds"
                            )));
                        }
                    }
                    None => self.ended.wait(&mut ended),
                },
            }
        }
    }
}

impl RepoMeta {
    /// A repo deleted: the loader reads it no further, and whoever waits
    /// for it is told there is no such repo.
    pub(crate) fn forget_loading(&self) {
        if !self.loading.is_done() {
            *self.loading.left_mut() = Left::default();
            self.loading
                .finish(Err(Unavailable::Forgotten(self.name.clone())));
        }
    }

    /// The repo's state once its index is whole; until then, a retry
    /// (and the repo read next).
    pub(crate) fn whole_state(
        &self,
        inner: &Inner,
    ) -> Result<parking_lot::MutexGuard<'_, RepoState>, MetaError> {
        self.ask_whole(inner)?;
        Ok(self.state.lock())
    }

    /// Whether the index is whole; if not, the repo is read next and the
    /// caller told to retry.
    pub(crate) fn ask_whole(&self, inner: &Inner) -> Result<(), MetaError> {
        if self.loading.is_whole() {
            return Ok(());
        }
        // A repo with a few shards left (one nearly read) is read in a
        // moment: worth a short wait rather than a retry.
        let few_left = self.loading.left_mut().trees.len() <= FEW_SHARDS_LEFT;
        self.want(inner);
        // Only when the loader takes it next (nothing else asked first).
        let next = inner.loads.wanted.lock().front() == Some(&self.name);
        let wait = if few_left && next {
            SHORT_WAIT
        } else {
            Duration::ZERO
        };
        self.loading.wait(&self.name, Some(wait))
    }

    /// Waits until the index is whole, however long it takes, the repo
    /// read next.
    pub(crate) fn wait_whole(&self, inner: &Inner) -> Result<(), MetaError> {
        if self.loading.is_whole() {
            return Ok(());
        }
        self.want(inner);
        self.loading.wait(&self.name, None)
    }

    /// Asks the loader to read this repo next.
    fn want(&self, inner: &Inner) {
        let mut wanted = inner.loads.wanted.lock();
        if !wanted.contains(&self.name) {
            wanted.push_back(self.name.clone());
        }
    }
}

impl MetaStore {
    /// Waits until `repo`'s documents are read, however long it takes
    /// (its repo read next): for work off a request's path that must not
    /// be told to retry (a merge recovered at start).
    pub fn wait_read(&self, repo: &RepoName) -> Result<(), MetaError> {
        self.repo(repo)?.wait_whole(&self.inner)
    }

    /// Waits until every repo's documents are read (however long it
    /// takes), in the loader's own order: for work that needs them all
    /// (the webhooks' feed, a pull request's timeline, an upgrade).
    /// `false`: the store closed first, and the caller should stop too.
    pub fn wait_until_read(&self) -> bool {
        let repos: Vec<Arc<RepoMeta>> = self.inner.repos.read().values().cloned().collect();
        for meta in repos {
            // A repo that cannot be read says so to the caller's own call.
            let read = meta.loading.wait(&meta.name, None);
            if let Err(MetaError::Unavailable(Unavailable::Stopped)) = read {
                return false;
            }
        }
        // And the persisted index the read writes is in place.
        while self.inner.persisting.lock().is_some() {
            if self.inner.stop.load(Ordering::SeqCst) {
                return false;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        true
    }
}

/// The background loader's queue: repos a call waits for go first.
#[derive(Default)]
pub(crate) struct Loads {
    wanted: Mutex<VecDeque<String>>,
}

/// Called before each step of the background read (a shard's tree, or
/// handing on a repo's last records); tests hold the reader there (the
/// applying thread may still be applying what was handed on before;
/// production passes none).
pub type LoadHook = Arc<dyn Fn() + Send + Sync>;

/// Starts the background reader if the open left repos to it (`left`),
/// handing it the persisted index it writes; without one, the index the
/// open read is moved in at once.
pub(crate) fn start_loader(
    inner: &Arc<Inner>,
    left: bool,
    persisting: persisted::Persisting,
    started: Instant,
) -> Result<(), MetaError> {
    if !left {
        persisting.finish(started);
        return Ok(());
    }
    *inner.persisting.lock() = Some((persisting, started));
    let loader_inner = inner.clone();
    std::thread::Builder::new()
        .name("vole-meta-load".into())
        .spawn(move || load_loop(loader_inner))
        .map_err(|e| MetaError::Unavailable(Unavailable::Thread(Arc::new(e))))?;
    Ok(())
}

/// Reads every repo's shards left by the open, one shard at a time, the
/// repos calls wait for first; a second thread applies what it read
/// ([`apply`]).
pub(crate) fn load_loop(inner: Arc<Inner>) {
    let started = Instant::now();
    let mut current: Option<Arc<RepoMeta>> = None;
    // The git handle of the repo being read, kept between its shards.
    let mut handle: Option<(Arc<RepoMeta>, gix::Repository)> = None;
    let mut applier = apply::Applier::start();
    loop {
        if inner.stop.load(Ordering::SeqCst) {
            applier.drain();
            // A file of part of the trees is not moved in: the old one
            // still holds what it held.
            if let Some((persisting, began)) = inner.persisting.lock().take()
                && inner.repos.read().values().all(|m| m.loading.is_whole())
            {
                persisting.finish(began);
            }
            // Nobody waits for a read that will not come.
            for meta in inner.repos.read().values() {
                *meta.loading.left_mut() = Left::default();
                meta.loading.finish(Err(Unavailable::Stopped));
            }
            return;
        }
        let wanted = {
            let mut wanted = inner.loads.wanted.lock();
            let mut found = None;
            while let Some(name) = wanted.pop_front() {
                let meta = inner.repos.read().get(&name).cloned();
                if let Some(meta) = meta.filter(|m| m.loading.to_read_more()) {
                    wanted.push_front(name);
                    found = Some(meta);
                    break;
                }
            }
            found
        };
        let next = wanted
            .or_else(|| current.take().filter(|m| m.loading.to_read_more()))
            .or_else(|| {
                inner
                    .repos
                    .read()
                    .values()
                    .find(|m| m.loading.to_read_more())
                    .cloned()
            });
        let Some(meta) = next else {
            applier.drain();
            if let Some((persisting, began)) = inner.persisting.lock().take() {
                persisting.finish(began);
            }
            tracing::info!(
                load_ms = started.elapsed().as_secs_f64() * 1e3,
                docs_from_git = inner.counters.docs_from_git.load(Ordering::Relaxed),
                docs_from_file = inner.counters.docs_from_file.load(Ordering::Relaxed),
                "metadata index whole"
            );
            return;
        };
        // A repo deleted meanwhile is read no further.
        let live = inner
            .repos
            .read()
            .get(&meta.name)
            .is_some_and(|m| Arc::ptr_eq(m, &meta));
        if !live {
            *meta.loading.left_mut() = Left::default();
            meta.loading
                .finish(Err(Unavailable::Forgotten(meta.name.clone())));
            continue;
        }
        // A panic gives up on the repo (its calls are refused), not on
        // every repo left.
        if let Some(hook) = &inner.options.load_hook {
            hook();
        }
        let step = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            load_step(&inner, &meta, &mut handle, &applier)
        }));
        if step.is_err() {
            handle = None;
            give_up(&meta, fold::MetaRepoError::Panicked("metadata reader"));
        }
        current = Some(meta);
    }
}

/// Reads one more shard tree of `meta` and hands its documents on to be
/// applied; after the last, hands on the repo's finish (its log records,
/// and the index whole).
fn load_step(
    inner: &Inner,
    meta: &Arc<RepoMeta>,
    handle: &mut Option<(Arc<RepoMeta>, gix::Repository)>,
    applier: &apply::Applier,
) {
    let tree = meta.loading.left_mut().trees.pop();
    let Some((shard, tree)) = tree else {
        meta.loading.handed_on.store(true, Ordering::Release);
        return applier.hand_on(apply::Step::Finish(meta.clone()));
    };
    if handle.as_ref().is_none_or(|(of, _)| !Arc::ptr_eq(of, meta)) {
        *handle = None;
        match fold::open_repo(&meta.git_dir) {
            Ok(repo) => *handle = Some((meta.clone(), repo)),
            Err(e) => return give_up(meta, e),
        }
    }
    let Some((_, repo)) = handle.as_ref() else {
        return;
    };
    // Parsed here, outside the repo's lock; applied under it.
    let mut found = applier.buffer();
    let read = {
        let mut persisting = inner.persisting.lock();
        let mut none = persisted::Persisting::default();
        let persisting = persisting.as_mut().map_or(&mut none, |(p, _)| p);
        persisting.read_shard(repo, (&meta.name, shard), tree, &mut found)
    };
    match read {
        Ok(read) => {
            let c = &inner.counters;
            c.docs_from_git
                .fetch_add(read.from_git as u64, Ordering::Relaxed);
            c.docs_from_file
                .fetch_add(read.from_file as u64, Ordering::Relaxed);
            applier.hand_on(apply::Step::Docs(meta.clone(), found));
        }
        Err(e) => give_up(meta, e),
    }
}

/// A repo whose documents cannot be read: its calls are refused as the
/// store's open refused them before.
fn give_up(meta: &RepoMeta, e: fold::MetaRepoError) {
    // Moved to the trash before the store forgot it: a delete, no failure.
    if !meta.git_dir.exists() {
        return meta.forget_loading();
    }
    let e = Unavailable::unreadable_repo(&meta.name, e);
    tracing::error!(repo = meta.name, error = %vole_stdx::error_chain::Chain(&e), "cannot read the repo's metadata");
    *meta.loading.left_mut() = Left::default();
    meta.loading.finish(Err(e));
}

mod apply;

#[cfg(test)]
mod tests;
