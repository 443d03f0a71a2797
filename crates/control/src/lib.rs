//! The local control socket: how CLI commands (and, later, git hooks) reach a
//! running server, so a change takes effect at once and the server stays the
//! only writer of its data dir.
//!
//! # Protocol, version 1
//!
//! - Transport: a Unix stream socket at `<data>/run/vole.sock`, mode
//!   `0600`, in a directory of mode `0700` made before the bind (owner
//!   only). The server removes a stale one at start.
//! - Framing: one JSON object per line (UTF-8, `\n`-terminated, at most
//!   [`MAX_LINE`] bytes). Each request gets exactly one reply line, in order;
//!   a connection may carry many requests.
//! - Request: `{"v":1,"op":"<op>", ...fields}`.
//! - Reply: `{"v":1,"ok":true,"data":<value>}` or
//!   `{"v":1,"ok":false,"error":"<message for a person>"}`.
//! - A request whose `v` the server does not speak, or that does not parse,
//!   gets an error reply naming the problem; the connection stays usable.
//!
//! Operations:
//!
//! | op            | fields                                  | data on success |
//! |---------------|-----------------------------------------|-----------------|
//! | `ping`        | -                                       | `{"server":"vole","version":"…"}` |
//! | `repo_create` | `repo` (`owner/name`), `description`?   | `{"name":"owner/name","description":"…"}` |
//! | `repo_list`   | -                                       | array of the above |
//! | `hook_pre_receive` | `push` {repo, push_id, actor, client}, `updates` [{ref, old, new, fast_forward?}] | `{"refused":[{"ref","reason"}]}` |
//! | `hook_ref_prepared` | `push`, `moves` [{ref, old, new}] | `{"seq":n}` once durable |
//! | `hook_ref_outcome` | `push`, `moves`, `outcome` (`committed`/`aborted`) | `{"seq":n}` once durable and published |
//! | `repo_gc` | `repo` | [`gc::GcReport`] once the repo's unreachable objects are pruned |
//! | `log_compact` | `keep` | `{"bytes_before","bytes_after","base_seq","meta":{..same..}}` |
//! | `backup` | `dest` | `{"progress":{"done","total"}}` lines, then the summary of [`backup::Manifest`] |
//!
//! A new operation is added as a new `op` (old clients keep working); a
//! change to an existing one bumps `v`.
//!
//! When no server runs, the CLI takes the data dir lock itself and calls
//! [`dispatch`] in-process: one code path for both.

pub mod backup;
pub mod check;
pub mod client;
pub mod gc;
pub mod protocol;
pub mod server;

pub use protocol::{MAX_LINE, PROTOCOL_VERSION, Reply, Request};

use std::sync::Arc;

use vole_access::Access;
use vole_accounts::audit::{AuditEvent, AuditKind};
use vole_accounts::{AccountError, Accounts, NewTokenRequest, NewUser};
use vole_config::Config;
use vole_git::Git;
use vole_git::repos::{RepoError, RepoInfo, RepoName, Repos};
use vole_hooks::recorder::RefRecorder;
use vole_meta::entity::Visibility;
use vole_meta::{AclPut, MetaError, MetaStore};

/// What the control operations need of the server.
#[derive(Debug)]
pub struct ControlState {
    pub config: Arc<Config>,
    pub git: Git,
    pub repos: Repos,
    pub recorder: Arc<RefRecorder>,
    pub meta: Arc<MetaStore>,
    pub access: Arc<Access>,
    pub accounts: Arc<Accounts>,
    pub pack_cache: Arc<vole_pack_cache::PackCache>,
    /// The repos' gix handles, dropped for a repo deleted or pruned.
    pub gix: Arc<vole_git::GixHandles>,
    /// What else the server keeps of a repo by its incarnation (the web
    /// UI's caches), dropped when the repo is deleted: set by the
    /// assembly, as no service knows another.
    pub forget: Forget,
}

/// Drops what the server keeps of a deleted repo's incarnation.
#[derive(Clone)]
pub struct Forget(pub Arc<dyn Fn(&vole_git::repos::Incarnation) + Send + Sync>);

impl std::fmt::Debug for Forget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Forget")
    }
}

/// Every repo directory on disk with its name, the system repo (as
/// `@system`) first: what `vole check` and a backup go through (the
/// directories themselves, not the names the server knows).
pub fn repos_on_disk(data: &vole_git::datadir::DataDir) -> Vec<(String, std::path::PathBuf)> {
    let mut repos = Vec::new();
    if data.system_repo().is_dir() {
        repos.push((vole_meta::SYSTEM.to_string(), data.system_repo()));
    }
    let root = data.repos_dir();
    for dir in vole_git::datadir::bare_repo_dirs(&root) {
        let Ok(relative) = dir.strip_prefix(&root) else {
            continue;
        };
        let name = relative.to_string_lossy();
        let name = name.strip_suffix(".git").unwrap_or(&name).to_string();
        repos.push((name, dir));
    }
    repos
}

/// A new repo, from the CLI or the API.
#[derive(Debug, Clone, Default)]
pub struct NewRepo {
    pub name: String,
    pub description: Option<String>,
    pub private: bool,
    /// The owning user; `None`: the user named like the owner segment.
    pub owner: Option<String>,
}

/// Who asked for a lifecycle change, for the audit log.
#[derive(Debug, Clone, Copy)]
pub struct Actor<'a> {
    pub name: &'a str,
    pub client: &'a str,
}

impl Actor<'static> {
    /// The operator, over the control socket or holding the lock.
    pub const CLI: Actor<'static> = Actor {
        name: "cli",
        client: "local",
    };
}

/// Why a repo could not be created or deleted.
#[derive(Debug, thiserror::Error)]
pub enum LifecycleError {
    #[error(transparent)]
    Repo(#[from] RepoError),
    #[error("no user named {0:?}; add one with `vole user add`")]
    NoSuchOwner(String),
    #[error(transparent)]
    Meta(#[from] MetaError),
    #[error(transparent)]
    Accounts(#[from] AccountError),
    #[error("there is no branch {branch:?} in {repo}; push it first, or name a branch that exists")]
    NoSuchBranch { repo: RepoName, branch: String },
    #[error(transparent)]
    Record(#[from] vole_hooks::recorder::RecorderError),
    #[error("{0}; try again shortly")]
    Held(#[from] vole_access::pushes::HeldError),
}

impl ControlState {
    /// Creates a repo, durably (blocking: runs git), with its ACL when it
    /// is private or names an owner; audited.
    pub fn create_repo(&self, new: NewRepo, actor: Actor<'_>) -> Result<RepoInfo, LifecycleError> {
        let name = RepoName::parse_new(&new.name).map_err(RepoError::from)?;
        if let Some(owner) = &new.owner
            && self.accounts.user(owner)?.is_none()
        {
            return Err(LifecycleError::NoSuchOwner(owner.clone()));
        }
        // The ref log learns the new repo's incarnation before the repo is
        // there to push to: what it held of the name before is another
        // repo's.
        let incarnation = vole_git::repos::Incarnation::mint();
        let info = self.repos.create(
            &self.git,
            &name,
            new.description.as_deref(),
            &self.config.default_branch,
            new.private,
            &incarnation,
            || {
                // The `born` row also makes the ref state forget the name.
                self.meta.forget_repo(&name);
                self.recorder
                    .mark_incarnation(
                        &name,
                        &incarnation,
                        vole_hooks::Phase::Born,
                        actor.name,
                        actor.client,
                    )
                    .map(drop)
                    .map_err(std::io::Error::other)
            },
        )?;
        if new.private || new.owner.is_some() {
            let put = AclPut {
                version: 0,
                visibility: if new.private {
                    Visibility::Private
                } else {
                    Visibility::Public
                },
                owner: new.owner.clone(),
                members: Vec::new(),
            };
            // Until (unless) this is stored, the repo's private marker
            // keeps it private.
            self.meta.put_acl(&name, put)?;
        } else {
            // Loaded now, so the first request's access decision opens no
            // git repository.
            let _ = self.meta.acl(&name);
        }
        let detail = format!(
            "{}{} incarnation={incarnation}",
            if new.private { "private" } else { "public" },
            new.owner.map(|o| format!(" owner={o}")).unwrap_or_default()
        );
        self.accounts.audit(AuditEvent::new(
            AuditKind::RepoCreated,
            actor.name,
            &name.to_string(),
            actor.client,
            detail,
        ))?;
        tracing::info!(repo = %name, "repository created");
        Ok(info)
    }

    /// The branch HEAD names (the repo's default branch), if it names one.
    pub fn default_branch(&self, name: &RepoName) -> Result<Option<String>, LifecycleError> {
        if !self.access.exists(name) {
            return Err(RepoError::NotFound(name.clone()).into());
        }
        Ok(vole_git::repos::head_branch(&self.repos.path(name)))
    }

    /// Points HEAD, the repo's default branch, at `branch`, which must
    /// exist; synced and recorded in the ref log. Blocking.
    pub fn set_default_branch(
        &self,
        name: &RepoName,
        branch: &str,
        actor: Actor<'_>,
    ) -> Result<(), LifecycleError> {
        if !self.access.exists(name) {
            return Err(RepoError::NotFound(name.clone()).into());
        }
        if !self
            .recorder
            .has_ref(&name.to_string(), &format!("refs/heads/{branch}"))
        {
            return Err(LifecycleError::NoSuchBranch {
                repo: name.clone(),
                branch: branch.to_string(),
            });
        }
        if vole_git::repos::head_branch(&self.repos.path(name)).as_deref() == Some(branch) {
            return Ok(());
        }
        self.recorder
            .point_head(name, branch, actor.name, actor.client, 0)?;
        Ok(())
    }

    /// Makes a repo public or private, keeping its owner and members;
    /// audited.
    pub fn set_visibility(
        &self,
        name: &RepoName,
        private: bool,
        actor: Actor<'_>,
    ) -> Result<vole_meta::entity::Acl, LifecycleError> {
        if !self.access.exists(name) {
            return Err(RepoError::NotFound(name.clone()).into());
        }
        let current = self.meta.acl(name)?;
        let acl = self.meta.put_acl(
            name,
            AclPut {
                version: current.version,
                visibility: if private {
                    Visibility::Private
                } else {
                    Visibility::Public
                },
                owner: current.owner,
                members: current.members,
            },
        )?;
        self.accounts.audit(AuditEvent::new(
            AuditKind::AclChanged,
            actor.name,
            &name.to_string(),
            actor.client,
            format!(
                "visibility={} version={}",
                if private { "private" } else { "public" },
                acl.version
            ),
        ))?;
        Ok(acl)
    }

    /// Moves a repo to `data/trash` (an operator can move it back);
    /// audited.
    pub fn delete_repo(&self, name: &RepoName, actor: Actor<'_>) -> Result<(), LifecycleError> {
        // Its metadata folded first: the trashed copy is whole.
        if !self.meta.flush(std::time::Duration::from_secs(10)) {
            tracing::warn!(repo = %name, "metadata writes still pending as the repo moves to the trash; they stay in the log");
        }
        let incarnation = self.repos.incarnation(name).ok().flatten();
        let repo_dir = self.repos.path(name);
        // No push of this repo runs on, or starts, while it goes: its
        // records would land after the next repo of the name was born.
        let _pushes = self
            .access
            .pushes()
            .hold(name, std::time::Duration::from_secs(60))?;
        let trashed = self.repos.move_to_trash(name)?;
        // Gone from every route from here (the resolver finds no repo); the
        // store, the ref state, the gix handles and the caches forget it
        // (the caches' keys carry its incarnation, so what a cache not told
        // still holds of it answers no request again and ages out).
        self.meta.forget_repo(name);
        self.recorder.forget_repo(name);
        self.gix.forget(&repo_dir);
        if let Some(incarnation) = &incarnation {
            (self.forget.0)(incarnation);
        }
        self.accounts.audit(AuditEvent::new(
            AuditKind::RepoDeleted,
            actor.name,
            &name.to_string(),
            actor.client,
            format!(
                "moved to {} incarnation={}",
                trashed.display(),
                incarnation.as_ref().map_or("", |i| i.id())
            ),
        ))?;
        tracing::info!(repo = %name, trash = %trashed.display(), "repository moved to the trash");
        Ok(())
    }
}

fn reply<T: serde::Serialize, E: std::fmt::Display>(result: Result<T, E>) -> Reply {
    match result {
        Ok(data) => Reply::ok(data),
        Err(e) => Reply::error(e.to_string()),
    }
}

/// Carries out one request. Blocking: call it from `spawn_blocking` in
/// async code.
pub fn dispatch(app: &ControlState, request: Request) -> Reply {
    match request {
        Request::Ping => Reply::ok(serde_json::json!({
            "server": "vole",
            "version": env!("CARGO_PKG_VERSION"),
        })),
        Request::RepoCreate {
            repo,
            description,
            private,
            owner,
        } => reply(app.create_repo(
            NewRepo {
                name: repo,
                description,
                private,
                owner,
            },
            Actor::CLI,
        )),
        Request::RepoList => Reply::ok(app.repos.list()),
        Request::RepoDelete { repo } => match RepoName::parse(&repo) {
            Ok(name) => reply(app.delete_repo(&name, Actor::CLI).map(|()| &repo)),
            Err(e) => Reply::error(e.to_string()),
        },
        Request::RepoVisibility { repo, private } => match RepoName::parse(&repo) {
            Ok(name) => reply(app.set_visibility(&name, private, Actor::CLI)),
            Err(e) => Reply::error(e.to_string()),
        },
        Request::RepoDefaultBranch { repo, branch } => match RepoName::parse(&repo) {
            Ok(name) => match branch {
                Some(branch) => reply(
                    app.set_default_branch(&name, &branch, Actor::CLI)
                        .map(|()| &branch),
                ),
                None => reply(app.default_branch(&name)),
            },
            Err(e) => Reply::error(e.to_string()),
        },
        Request::RepoGc { repo } => match RepoName::parse(&repo) {
            Ok(name) => reply(app.gc_repo(&name, Actor::CLI)),
            Err(e) => Reply::error(e.to_string()),
        },
        Request::UserAdd {
            name,
            email,
            admin,
            password,
        } => reply(app.accounts.add_user(
            NewUser {
                name,
                email,
                admin,
                password,
            },
            "cli",
        )),
        Request::UserList => reply(app.accounts.users()),
        Request::UserPasswd { name, password } => {
            reply(app.accounts.set_password(&name, &password, "cli"))
        }
        Request::UserDisable { name } => reply(app.accounts.disable_user(&name, "cli")),
        Request::TokenCreate {
            name,
            user,
            scope,
            repos,
            expires_in_secs,
        } => reply(
            app.accounts
                .create_token(
                    NewTokenRequest {
                        name,
                        user,
                        scope,
                        repos,
                        expires_in: expires_in_secs.map(std::time::Duration::from_secs),
                    },
                    "cli",
                )
                .map(|(view, text)| serde_json::json!({ "token": view, "text": text })),
        ),
        Request::TokenList { user } => reply(app.accounts.tokens(user.as_deref())),
        Request::TokenRevoke { name } => reply(app.accounts.revoke_token(&name, "cli")),
        Request::HookPreReceive { push, updates } => {
            // Who pushes is what the server registered when the push
            // started, not what the hook's environment says.
            let Some(registered) = app.access.pushes().get(push.push_id, &push.repo) else {
                tracing::warn!(
                    repo = push.repo,
                    push_id = push.push_id,
                    "a pre-receive report names no push under way; refused"
                );
                let refused: Vec<_> = updates
                    .iter()
                    .map(|u| vole_access::Refusal {
                        ref_name: u.ref_name.clone(),
                        reason: "this push was not started by this server".into(),
                    })
                    .collect();
                return Reply::ok(serde_json::json!({ "refused": refused }));
            };
            let _request = registered.span.enter();
            let refused =
                app.access
                    .check_ref_updates(&registered.principal, &registered.repo, &updates);
            if !refused.is_empty() {
                tracing::info!(
                    repo = push.repo,
                    push_id = push.push_id,
                    refused = refused.len(),
                    "push refused by pre-receive checks"
                );
            }
            Reply::ok(serde_json::json!({ "refused": refused }))
        }
        Request::HookRefPrepared { push, moves } => {
            let Some((push, span)) = registered(app, push) else {
                return Reply::error("this push was not started by this server");
            };
            let _request = span.enter();
            hook_ref_prepared(app, push, moves)
        }
        Request::HookRefOutcome {
            push,
            moves,
            outcome,
        } => {
            let Some((push, span)) = registered(app, push) else {
                return Reply::error("this push was not started by this server");
            };
            let _request = span.enter();
            hook_ref_outcome(app, push, moves, outcome)
        }
        Request::LogCompact { keep } => log_compact(app, keep),
        // Served by the connection (`server.rs`), which must hold it.
        Request::PackObjects { .. } => Reply::error("pack_objects is answered by its connection"),
        Request::Backup { .. } => Reply::error("backup is answered by its connection"),
    }
}

/// The hook's push context with the actor and client the server
/// registered for its id, and the push's request span; `None` when no
/// such push is under way.
fn registered(
    app: &ControlState,
    push: vole_hooks::PushContext,
) -> Option<(vole_hooks::PushContext, tracing::Span)> {
    let registered = app.access.pushes().get(push.push_id, &push.repo)?;
    Some((
        vole_hooks::PushContext {
            actor: registered.actor(),
            client: registered.client,
            ..push
        },
        registered.span,
    ))
}

fn hook_ref_prepared(
    app: &ControlState,
    push: vole_hooks::PushContext,
    moves: Vec<vole_hooks::RefUpdate>,
) -> Reply {
    match app.recorder.prepared(&push, &moves) {
        Ok(seq) => Reply::ok(serde_json::json!({ "seq": seq })),
        Err(e) => {
            tracing::error!(repo = push.repo, error = %e, "cannot record a ref transaction; git will abort it");
            Reply::error(
                "the server could not record the update durably; the server log has the detail",
            )
        }
    }
}

fn hook_ref_outcome(
    app: &ControlState,
    push: vole_hooks::PushContext,
    moves: Vec<vole_hooks::RefUpdate>,
    outcome: vole_hooks::Outcome,
) -> Reply {
    match app.recorder.outcome(&push, &moves, outcome) {
        Ok(seq) => {
            if outcome == vole_hooks::Outcome::Committed
                && let Ok(repo) = RepoName::parse(&push.repo)
            {
                point_head_at_a_branch(app, &repo, push.push_id, &moves);
                app.meta.repack_if_needed(&repo);
            }
            Reply::ok(serde_json::json!({ "seq": seq }))
        }
        Err(e) => {
            tracing::error!(repo = push.repo, error = %e, "a ref transaction's outcome is not durable; git is stopped before it reports");
            Reply::error(
                "the server could not make the update durable; the server log has the detail",
            )
        }
    }
}

/// After each committed transaction of a push: a HEAD naming a branch that
/// does not exist (a new repo's `main` when the push brought only
/// `master`, say) is pointed at one the push created
/// (`repos::default_branch_among`), or, when it created none, at one of
/// the repo's (a HEAD left dangling before is mended by the next push),
/// so a clone checks it out. git may
/// commit a push one ref at a time, so the choice is made again over all
/// the branches the push created so far while HEAD is still the push's
/// own choice; all of it before git reports the push done.
fn point_head_at_a_branch(
    app: &ControlState,
    repo: &RepoName,
    push_id: u64,
    moves: &[vole_hooks::RefUpdate],
) {
    let Some(registered) = app.access.pushes().get(push_id, &repo.to_string()) else {
        return;
    };
    let mut created = registered.created.lock();
    created.names.extend(
        moves
            .iter()
            .filter(|m| m.is_creation())
            .filter_map(|m| m.ref_name.strip_prefix("refs/heads/"))
            .map(str::to_string),
    );
    let dir = app.repos.path(repo);
    let head = vole_git::repos::head_branch(&dir);
    let exists = |branch: &str| {
        app.recorder
            .has_ref(&repo.to_string(), &format!("refs/heads/{branch}"))
    };
    if !created.head_set && head.as_deref().is_some_and(exists) {
        return;
    }
    // The branches this push created; if none of them exists (a push to
    // a repo whose HEAD was left dangling before), all of the repo's.
    let mut candidates: Vec<String> = created
        .names
        .iter()
        .filter(|b| exists(b))
        .cloned()
        .collect();
    if candidates.is_empty() {
        candidates = app.recorder.branches(&repo.to_string());
    }
    let Some(branch) = vole_git::repos::default_branch_among(candidates.iter().map(String::as_str))
        .map(str::to_string)
    else {
        return;
    };
    let branch = branch.as_str();
    if head.as_deref() == Some(branch) {
        return;
    }
    match app.recorder.point_head(
        repo,
        branch,
        registered.principal.name(),
        &registered.client,
        push_id,
    ) {
        Ok(_) => {
            created.head_set = true;
            tracing::info!(repo = %repo, branch, "HEAD named no existing branch; it now names one the push created");
        }
        Err(e) => {
            tracing::warn!(repo = %repo, error = %vole_stdx::error_chain::Chain(&e), "cannot point HEAD at the pushed branch")
        }
    }
}

fn log_compact(app: &ControlState, keep: u64) -> Reply {
    if app.meta.maintenance_held() {
        return Reply::error("a backup or a gc is under way; compact the logs once it is done");
    }
    match (app.recorder.compact(keep), app.meta.compact_log(keep)) {
        (Ok(refs), Ok(meta)) => Reply::ok(serde_json::json!({
            "bytes_before": refs.bytes_before,
            "bytes_after": refs.bytes_after,
            "base_seq": refs.base_seq,
            "meta": {
                "bytes_before": meta.bytes_before,
                "bytes_after": meta.bytes_after,
                "base_seq": meta.base_seq,
            },
        })),
        (Err(e), _) => Reply::error(format!("ref log compaction failed: {e}")),
        (_, Err(e)) => Reply::error(format!("meta log compaction failed: {e}")),
    }
}
