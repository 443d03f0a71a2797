//! The repo lifecycle: creation with its ACL, the default branch, the
//! visibility, and deletion to the trash; each audited.

use vole_accounts::AccountError;
use vole_accounts::audit::{AuditEvent, AuditKind};
use vole_git::repos::{RepoError, RepoInfo, RepoName};
use vole_meta::entity::Visibility;
use vole_meta::{AclPut, MetaError};

use crate::ControlState;

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
        // Its numeric id; the repo is made whatever becomes of it (a
        // failure or a crash before it leaves it to the upgrade at the
        // next start).
        if let Err(e) = self.meta.give_repo_serial(&name) {
            tracing::warn!(repo = %name, error = %e, "the repository's numeric id was not stored; the next start gives it one");
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
