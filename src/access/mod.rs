//! Who may do what: the one place access is decided. Every surface (the
//! smart-HTTP transport and its pre-receive check, the web pages, raw
//! files and archives, the JSON API's reads and writes, activity, sites by
//! path and by domain) resolves its repo with [`Access::resolve`] and asks
//! [`Access::check`] (or [`Access::check_ref_updates`] for the refs of a
//! push) before it does anything; the server's own surfaces (the stats)
//! ask [`Access::check_server`]; none decides on its own.
//!
//! Today every request is [`Principal::Anonymous`] (there are no accounts
//! yet), and the rules are the ones vole has always had:
//!
//! - reading is open to anyone, except a site, whose repo's ACL must say
//!   `public` ([`Action::ReadSite`]); the ACL is applied to sites only for
//!   now, the accounts issue extends it to every read;
//! - pushing and API writes need the server's `--anonymous-push` switch;
//! - `refs/meta/*` is the server's own, and a repo's protected branches
//!   take neither deletion nor a non-fast-forward.
//!
//! A repo the principal may not see is [`Denied::Missing`], which every
//! surface answers exactly as it answers a repo that does not exist.
//!
//! What does not live here: the response each surface gives (a 404 page,
//! a `text/plain` 403 for git, JSON for the API) is the surface's own.

pub mod client;

use std::path::PathBuf;
use std::sync::Arc;

use serde::Serialize;

use crate::hooks::RefUpdate;
use crate::meta::MetaStore;
use crate::meta::entity::Visibility;
use crate::repos::{RepoName, Repos};

/// Who is asking.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Principal {
    /// A request without credentials (every request, until accounts exist).
    Anonymous,
}

/// What the principal wants to do to a repo.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Clone, fetch, browse, raw files, archives, API reads, activity.
    Read,
    /// Read the repo's site (by path or by domain).
    ReadSite,
    /// Push (the receive-pack advertisement and the push itself).
    Push,
    /// Write the repo's metadata through the API (issues, change
    /// requests, comments, ACL, settings).
    WriteMeta,
}

/// What the principal wants to do that concerns no one repo.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerAction {
    /// Read the server's run-time counters (`/api/v1/stats`).
    ReadStats,
}

/// Why a request is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Denied {
    /// The repo does not exist, its name is not valid, or the principal may
    /// not know it exists: answered as a missing repo.
    Missing,
    /// Credentials are needed (and none were given).
    Unauthenticated(String),
    /// The principal is known and may not do this.
    Forbidden(String),
}

/// Why the pre-receive check refused a ref.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Refusal {
    #[serde(rename = "ref")]
    pub ref_name: String,
    pub reason: String,
}

/// The message a push gets while anonymous push is off.
pub const PUSH_DISABLED: &str = "push is disabled on this server: there are no accounts yet. \
     For development, restart vole with --anonymous-push (or VOLE_ANONYMOUS_PUSH=true).";

/// The message an API write gets while anonymous push is off.
pub const WRITES_DISABLED: &str = "API writes are off until accounts exist; start the server with \
     --anonymous-push to allow them (development only)";

/// The access decisions of one server; see the module doc.
#[derive(Debug)]
pub struct Access {
    repos: Repos,
    /// `data/repos`, canonical.
    repos_root: PathBuf,
    meta: Arc<MetaStore>,
    anonymous_push: bool,
    /// Protected branches of a repo that stores no settings of its own.
    default_protected: Vec<String>,
}

impl Access {
    pub fn new(
        repos: Repos,
        meta: Arc<MetaStore>,
        anonymous_push: bool,
        default_protected: Vec<String>,
    ) -> std::io::Result<Access> {
        // Resolved once: the repos dir exists before anything is served
        // (and if it cannot be resolved, nothing could be served).
        let repos_root = repos.root().canonicalize()?;
        Ok(Access {
            repos_root,
            repos,
            meta,
            anonymous_push,
            default_protected,
        })
    }

    /// The one repo resolver: `owner`/`name` is a valid repo name, the repo
    /// exists inside `data/repos` (a symlink leading out is refused), and
    /// the principal may do `action` on it.
    pub fn resolve(
        &self,
        principal: &Principal,
        owner: &str,
        name: &str,
        action: Action,
    ) -> Result<RepoName, Denied> {
        let repo = RepoName::from_parts(owner, name).map_err(|_| Denied::Missing)?;
        if !self.exists(&repo) {
            return Err(Denied::Missing);
        }
        self.check(principal, action, &repo)?;
        Ok(repo)
    }

    /// The resolver's existence rule alone: the repo is a bare repo inside
    /// the repos dir. For callers that resolved the name already and check
    /// existence only when they must (the site cache's cold path).
    pub fn exists(&self, repo: &RepoName) -> bool {
        let path = self.repos.path(repo);
        let Ok(canonical) = path.canonicalize() else {
            return false;
        };
        if !canonical.starts_with(&self.repos_root) {
            tracing::warn!(repo = %repo, target = %canonical.display(), "repository path leads outside the repos dir; refused");
            return false;
        }
        canonical.join("HEAD").is_file()
    }

    /// May `principal` do `action` on `repo` (which exists)?
    pub fn check(
        &self,
        principal: &Principal,
        action: Action,
        repo: &RepoName,
    ) -> Result<(), Denied> {
        match (principal, action) {
            // The ACL is not applied to plain reads yet (module doc).
            (Principal::Anonymous, Action::Read) => Ok(()),
            (Principal::Anonymous, Action::ReadSite) => {
                if self.public(repo) {
                    Ok(())
                } else {
                    Err(Denied::Missing)
                }
            }
            (Principal::Anonymous, Action::Push) => self
                .anonymous_push
                .then_some(())
                .ok_or_else(|| Denied::Forbidden(PUSH_DISABLED.into())),
            (Principal::Anonymous, Action::WriteMeta) => self
                .anonymous_push
                .then_some(())
                .ok_or_else(|| Denied::Forbidden(WRITES_DISABLED.into())),
        }
    }

    /// May `principal` do `action`, which concerns the server rather than a
    /// repo? Today the counters are open to anyone (they name no repo);
    /// accounts will keep them for administrators.
    pub fn check_server(&self, principal: &Principal, action: ServerAction) -> Result<(), Denied> {
        match (principal, action) {
            (Principal::Anonymous, ServerAction::ReadStats) => Ok(()),
        }
    }

    /// The repo's ACL says public (the default when none is stored); a
    /// store that cannot answer says no.
    fn public(&self, repo: &RepoName) -> bool {
        match self.meta.acl(repo) {
            Ok(acl) => acl.visibility == Visibility::Public,
            Err(crate::meta::MetaError::NoRepo(_)) => true,
            Err(_) => false,
        }
    }

    /// The pre-receive rules, per ref: `refs/meta/*` is the server's, and
    /// the repo's protected branches (its settings, else the server's
    /// `--protected-branch` list) take neither deletion nor a
    /// non-fast-forward. Returns what is refused, and why.
    pub fn check_ref_updates(
        &self,
        _principal: &Principal,
        repo: &RepoName,
        updates: &[RefUpdate],
    ) -> Vec<Refusal> {
        // A store that cannot say which branches are protected refuses the
        // push (fails closed): the server's defaults are not the repo's.
        let protected = match self.meta.settings(repo) {
            Ok(settings) => settings.protected_branches,
            Err(crate::meta::MetaError::NoRepo(_)) => self.default_protected.clone(),
            Err(e) => {
                tracing::warn!(repo = %repo, error = %crate::error_chain::Chain(&e), "cannot read the protected branches; the push is refused");
                return updates
                    .iter()
                    .map(|update| Refusal {
                        ref_name: update.ref_name.clone(),
                        reason: "the server cannot read this repository's settings right now; nothing was changed, try again later".into(),
                    })
                    .collect();
            }
        };
        let mut refused = Vec::new();
        for update in updates {
            let name = &update.ref_name;
            let refuse = |reason: String| Refusal {
                ref_name: name.clone(),
                reason,
            };
            if name.starts_with("refs/meta/") {
                refused.push(refuse(
                    "refs/meta/* holds the forge's metadata and is written only by the server; push elsewhere".into(),
                ));
                continue;
            }
            let Some(branch) = name.strip_prefix("refs/heads/") else {
                continue;
            };
            if !protected.iter().any(|p| p == branch) {
                continue;
            }
            if update.is_deletion() {
                refused.push(refuse(format!(
                    "branch {branch} is protected: it cannot be deleted"
                )));
            } else if !update.is_creation() && update.fast_forward != Some(true) {
                refused.push(refuse(format!(
                    "branch {branch} is protected: only fast-forward pushes are allowed (pull and merge, then push again)"
                )));
            }
        }
        refused
    }
}
