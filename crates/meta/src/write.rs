//! The write path every operation uses: reads and writes under a repo's
//! lock, the log frame encoded and appended in decision order, the
//! per-author quota, and a repo's metadata loaded on first use.

use super::*;

impl MetaStore {
    // ---- the write path ----

    pub(crate) fn new_id(&self) -> String {
        let mut ids = self.inner.ids.lock();
        // The monotonic generator fails only when 2^80 ids were made in
        // one millisecond; a fresh random one is still unique.
        ids.generate()
            .unwrap_or_else(|_| ulid::Ulid::new())
            .to_string()
    }

    pub(crate) fn check_failed(&self) -> Result<(), MetaError> {
        match &*self.inner.failed.lock() {
            Some(why) => Err(MetaError::Unavailable(why.clone())),
            None => Ok(()),
        }
    }

    pub(crate) fn read<T>(
        &self,
        repo: &RepoName,
        f: impl FnOnce(&RepoState) -> Result<T, MetaError>,
    ) -> Result<T, MetaError> {
        self.check_failed()?;
        let meta = self.repo(repo)?;
        let state = meta.whole_state(&self.inner)?;
        f(&state)
    }

    /// [`MetaStore::read`] of documents the index may hold without their
    /// bodies: `pick` takes them under the repo's lock, `fill` reads their
    /// bodies back once it is let go (a body not cached is a git read,
    /// which no other call on the repo, nor the fold, should wait for).
    /// What `pick` took is a version as it stood: its blob stays.
    pub(crate) fn read_bodies<S, T>(
        &self,
        repo: &RepoName,
        pick: impl FnOnce(&RepoState) -> Result<S, MetaError>,
        fill: impl FnOnce(&bodies::DocReader, S) -> Result<T, MetaError>,
    ) -> Result<T, MetaError> {
        self.check_failed()?;
        let meta = self.repo(repo)?;
        let (docs, picked) = {
            let state = meta.whole_state(&self.inner)?;
            (state.docs.clone(), pick(&state)?)
        };
        fill(&docs, picked)
    }

    /// [`MetaStore::read`] of the repo-level documents only (ACL,
    /// settings, labels), which the store reads at open: no wait for the
    /// rest (`loading.rs`).
    pub(crate) fn read_repo_level<T>(
        &self,
        repo: &RepoName,
        f: impl FnOnce(&RepoState) -> Result<T, MetaError>,
    ) -> Result<T, MetaError> {
        self.check_failed()?;
        let meta = self.repo(repo)?;
        let state = meta.state.lock();
        f(&state)
    }

    /// [`MetaStore::read`] of the system repo.
    pub(crate) fn read_system<T>(
        &self,
        f: impl FnOnce(&RepoState) -> Result<T, MetaError>,
    ) -> Result<T, MetaError> {
        self.check_failed()?;
        let meta = self.system()?;
        let state = meta.state.lock();
        f(&state)
    }

    /// [`MetaStore::write`] of the system repo.
    pub(crate) fn write_system<D: Into<Entity> + Clone>(
        &self,
        build: impl FnOnce(&mut RepoState) -> Result<D, MetaError>,
    ) -> Result<D, MetaError> {
        self.check_failed()?;
        let meta = self.system()?;
        self.write_in(&meta, build)
    }

    /// The system repo, if the store was opened with one.
    pub(crate) fn system(&self) -> Result<Arc<RepoMeta>, MetaError> {
        self.inner
            .repos
            .read()
            .get(SYSTEM)
            .cloned()
            .ok_or_else(|| MetaError::NotFound("this store holds no accounts".into()))
    }

    /// Builds the new document under the repo's lock (so versions and
    /// numbers are decided in one order), encodes its log frame outside
    /// every lock, appends it in the order decided, and returns it once the
    /// log has it durably.
    pub(crate) fn write<D: Into<Entity> + Clone>(
        &self,
        repo: &RepoName,
        build: impl FnOnce(&mut RepoState) -> Result<D, MetaError>,
    ) -> Result<D, MetaError> {
        self.check_failed()?;
        let meta = self.repo(repo)?;
        meta.ask_whole(&self.inner)?;
        self.write_in(&meta, build)
    }

    /// A retry, before anything is written, while `repo`'s documents are
    /// still being read after a start (a write that makes labels first).
    pub(crate) fn ask_read(&self, repo: &RepoName) -> Result<(), MetaError> {
        self.repo(repo)?.ask_whole(&self.inner)
    }

    /// [`MetaStore::write`] of a repo-level document (settings), which the
    /// store reads at open: no wait for the rest (`loading.rs`).
    pub(crate) fn write_repo_level<D: Into<Entity> + Clone>(
        &self,
        repo: &RepoName,
        build: impl FnOnce(&mut RepoState) -> Result<D, MetaError>,
    ) -> Result<D, MetaError> {
        self.check_failed()?;
        let meta = self.repo(repo)?;
        self.write_in(&meta, build)
    }

    /// [`MetaStore::write`] to a repo already looked up. It does not wait
    /// for the repo's background read (`loading.rs`): for the system repo
    /// (read whole at open) and repo-level documents.
    pub(crate) fn write_in<D: Into<Entity> + Clone>(
        &self,
        meta: &Arc<RepoMeta>,
        build: impl FnOnce(&mut RepoState) -> Result<D, MetaError>,
    ) -> Result<D, MetaError> {
        let inner = &self.inner;
        // 1. Decide: the new version, its number, its place in the order.
        // Readers see it from here on (their own writes included).
        // One copy of the document under the lock, for the index, as ever;
        // the log's copy is made after it.
        let (ticket, document) = {
            let mut state = meta.state.lock();
            let document = build(&mut state)?;
            let entity: Entity = document.clone().into();
            over_quota(
                &meta.name,
                &state.index,
                &entity,
                inner.options.max_authored_bytes,
            )?;
            state.index.apply(entity);
            let ticket = state.next_ticket;
            state.next_ticket += 1;
            (ticket, document)
        };
        let entity: Entity = document.clone().into();
        // 2. Encode in parallel with other writers.
        let shard = shard::shard_of(entity.root_id(), inner.options.shards);
        let path = entity.tree_path();
        let encoded = serde_json::to_string(&entity)
            .map_err(|e| AppendError::Json(Arc::new(e)))
            .and_then(|body| {
                let row = MetaWrite {
                    time_ns: now_ns(),
                    repo: meta.name.clone(),
                    entity_id: entity.id().to_string(),
                    shard,
                    kind: entity.kind().to_string(),
                    body,
                    incarnation: meta
                        .incarnation
                        .as_ref()
                        .map(|i| i.id().to_string())
                        .unwrap_or_default(),
                };
                let frame = inner
                    .log
                    .encode(std::slice::from_ref(&row))
                    .map_err(|e| AppendError::Log(Arc::new(e)))?;
                Ok((frame, fold_body(&entity, row.body)))
            });
        // 3. Append in decision order: per shard (and per entity) the log
        // order is the order versions were decided in, which the folds and
        // recovery rely on.
        let deposit = Deposit {
            encoded,
            shard,
            path,
        };
        match self.append_durably(meta, ticket, deposit) {
            Ok((_, full)) => {
                inner.wake(full);
                Ok(document)
            }
            Err(e) => {
                // The index already shows a document the log may not hold:
                // stop serving until a restart rebuilds both from disk.
                let why = Unavailable::LogFailed(e);
                tracing::error!(error = %vole_stdx::error_chain::Chain(&why), "metadata writes stop");
                *inner.failed.lock() = Some(why.clone());
                Err(MetaError::Unavailable(why))
            }
        }
    }

    pub(crate) fn repo(&self, name: &RepoName) -> Result<Arc<RepoMeta>, MetaError> {
        let key = name.to_string();
        if let Some(meta) = self.inner.repos.read().get(&key) {
            return Ok(meta.clone());
        }
        let git_dir = self.inner.repos_dir.join(name.relative_path());
        if !git_dir.is_dir() {
            return Err(MetaError::NoRepo(key));
        }
        let mut repos = self.inner.repos.write();
        if let Some(meta) = repos.get(&key) {
            return Ok(meta.clone());
        }
        // A repo created after open: its shard refs are read once here.
        let (meta, _) = load_repo(
            &key,
            &git_dir,
            self.inner.options.shards,
            false,
            &self.inner.bodies,
            &mut persisted::Persisting::default(),
        )
        .map_err(|e| Unavailable::unreadable(&key, e))?;
        let meta = Arc::new(meta);
        repos.insert(key, meta.clone());
        Ok(meta)
    }
}

/// Refuses a write that would take its author's documents in `repo` past
/// `limit` bytes (`--max-meta-bytes-per-user`).
fn over_quota(
    repo: &str,
    index: &index::Index,
    entity: &Entity,
    limit: Option<u64>,
) -> Result<(), MetaError> {
    let Some(limit) = limit else {
        return Ok(());
    };
    match index.over_authored_limit(entity, limit) {
        None => Ok(()),
        Some((author, total)) => Err(MetaError::OverQuota(format!(
            "{author}'s issues, change requests and comments in {repo} would hold {total} bytes, \
             past the {limit} one user may write in one repo (max-meta-bytes-per-user)"
        ))),
    }
}

/// What the fold writes for a logged document: the document, or nothing
/// for a removal (the fold takes its path out of the tree).
pub(crate) fn fold_body(entity: &Entity, body: String) -> Vec<u8> {
    match entity {
        Entity::Removed(_) => Vec::new(),
        _ => body.into_bytes(),
    }
}

pub(crate) fn now_text() -> String {
    vole_stdx::time::now_millis()
}
