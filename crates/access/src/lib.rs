//! Who may do what: the one place access is decided. Every surface (the
//! smart-HTTP transport and its pre-receive check, the web pages, raw
//! files and archives, the JSON API's reads and writes, activity, sites by
//! path and by domain, the repo list) resolves its repo with
//! [`Access::resolve`] (or asks [`Access::check`]) before it does
//! anything, [`Access::check_ref_updates`] decides the refs of a push, and
//! the server's own surfaces ask [`Access::check_server`]; none decides
//! on its own.
//!
//! The rules:
//!
//! - A repo is public or private (its ACL; public when none is stored).
//!   Anyone may read a public repo; a private one only its owner, its
//!   members and server admins. A principal's role in a repo: server
//!   admin and owner are `admin`, a member has their role.
//! - Pushing needs `write`; issues, change requests and comments need an
//!   account that may read the repo; the ACL, the settings and deleting
//!   the repo need `admin`. A token adds two limits: its scope (read,
//!   write, admin) caps what it may do, and a token limited to some repos
//!   is, anywhere else, no more than anonymous.
//! - A repo the principal may not read is answered exactly as one that
//!   does not exist: [`Denied::Hidden`] to the anonymous (git and the API
//!   answer 401, so a client asks for credentials), [`Denied::Missing`]
//!   to a signed-in user (404). Existence and the ACL are checked on one
//!   path, and no git repository is opened before the decision.
//! - `--anonymous-push` (development only) lets the anonymous push to
//!   and write the metadata of the repos they may read.
//! - `refs/meta/*` is the server's own; a repo's protected branches take
//!   neither deletion nor a non-fast-forward, and, when its settings say
//!   so, pushes from its admins only.
//!
//! What does not live here: the response each surface gives (a 404 page,
//! a `text/plain` 401/403 for git, JSON for the API) is the surface's own.

pub mod pushes;

use std::path::PathBuf;
use std::sync::Arc;

use serde::Serialize;

use vole_accounts::Identity;
use vole_git::repos::{Incarnation, RepoName, Repos};
use vole_hooks::RefUpdate;
use vole_meta::MetaStore;
use vole_meta::entity::{Acl, Role, Scope, Visibility};

/// Who is asking.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Principal {
    /// A request without credentials.
    Anonymous,
    /// A request whose credential checked out.
    User(Arc<Identity>),
}

impl Principal {
    /// The name the logs record: the user's, or `anonymous`.
    pub fn name(&self) -> &str {
        match self {
            Principal::Anonymous => "anonymous",
            Principal::User(identity) => &identity.user,
        }
    }

    pub fn identity(&self) -> Option<&Identity> {
        match self {
            Principal::Anonymous => None,
            Principal::User(identity) => Some(identity),
        }
    }

    /// A server admin, with a credential that carries admin power over
    /// the whole server (admin scope, limited to no repos).
    pub fn is_server_admin(&self) -> bool {
        self.identity()
            .is_some_and(|id| id.admin && id.scope() == Scope::Admin && id.unlimited())
    }
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
    /// Write the repo's issues, change requests and comments.
    WriteMeta,
    /// Change the ACL or the settings, delete the repo.
    Administer,
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
    /// The repo does not exist, its name is not valid, or the signed-in
    /// principal may not know it exists: answered as a missing repo (404).
    Missing,
    /// The same, for the anonymous: credentials might show it (git and
    /// the API answer 401 with [`HIDDEN`], the web and sites a 404).
    Hidden,
    /// Credentials are needed (and none were given).
    Unauthenticated(String),
    /// The principal is known and may not do this.
    Forbidden(String),
}

/// Why [`Access::check_owner_change`] refused.
#[derive(Debug, thiserror::Error)]
pub enum OwnerChangeRefused {
    /// Not the owner's or a server admin's hand.
    #[error("{0}")]
    Forbidden(String),
    /// The new owner is no user.
    #[error("{0}")]
    NoSuchUser(String),
    /// The repo's ACL could not be read.
    #[error(transparent)]
    Meta(vole_meta::MetaError),
    /// The new owner could not be looked up.
    #[error("cannot look a user up: {0}")]
    Accounts(vole_accounts::AccountError),
}

/// The one message of [`Denied::Hidden`], the same for a private repo
/// and a missing one.
pub const HIDDEN: &str = "authentication required: sign in with your user name and a token";

/// Why the pre-receive check refused a ref.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Refusal {
    #[serde(rename = "ref")]
    pub ref_name: String,
    pub reason: String,
}

/// The message an anonymous push to a repo it may read gets.
pub const PUSH_NEEDS_CREDENTIALS: &str = "pushing needs credentials: use your user name and a token \
     made with `vole token create NAME --user YOU --scope write`";

/// The message an anonymous API write gets.
pub const WRITES_NEED_CREDENTIALS: &str = "API writes need credentials: send Authorization: Bearer <token> \
     (or HTTP Basic with your user name and a token)";

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
    pushes: Arc<pushes::Pushes>,
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
            pushes: Arc::default(),
        })
    }

    /// The pushes under way (see [`pushes`]).
    pub fn pushes(&self) -> &Arc<pushes::Pushes> {
        &self.pushes
    }

    /// The one repo resolver: `owner`/`name` is a valid repo name, the repo
    /// exists inside `data/repos` (a symlink leading out is refused), and
    /// the principal may do `action` on it. A repo that does not exist and
    /// one the principal may not read are refused alike.
    pub fn resolve(
        &self,
        principal: &Principal,
        owner: &str,
        name: &str,
        action: Action,
    ) -> Result<ResolvedRepo, Denied> {
        let repo = RepoName::from_parts(owner, name).map_err(|_| hidden(principal))?;
        if !self.exists(&repo) {
            return Err(hidden(principal));
        }
        let incarnation = self.decide(principal, action, &repo)?;
        Ok(ResolvedRepo {
            name: repo,
            incarnation,
        })
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
        self.decide(principal, action, repo).map(drop)
    }

    /// [`Access::check`], returning the incarnation of the repo the
    /// decision was made about (read with its ACL, in one step).
    fn decide(
        &self,
        principal: &Principal,
        action: Action,
        repo: &RepoName,
    ) -> Result<Option<Incarnation>, Denied> {
        // A store that cannot answer denies (fails closed).
        let (acl, incarnation) = match self.meta.acl_of(repo) {
            Ok(found) => found,
            Err(vole_meta::MetaError::NoRepo(_)) => (Acl::default_for_repo(), None),
            Err(e) => {
                tracing::warn!(repo = %repo, error = %vole_stdx::error_chain::Chain(&e), "cannot read the ACL; access refused");
                return Err(hidden(principal));
            }
        };
        self.decide_on(principal, action, repo, &acl, incarnation.as_ref())?;
        Ok(incarnation)
    }

    fn decide_on(
        &self,
        principal: &Principal,
        action: Action,
        repo: &RepoName,
        acl: &Acl,
        incarnation: Option<&Incarnation>,
    ) -> Result<(), Denied> {
        let public = self.visibility_of(repo, acl) == Visibility::Public;
        let identity = match principal {
            Principal::Anonymous => {
                if !public {
                    return Err(Denied::Hidden);
                }
                return match action {
                    Action::Read | Action::ReadSite => Ok(()),
                    Action::Push if self.anonymous_push => Ok(()),
                    Action::WriteMeta if self.anonymous_push => Ok(()),
                    Action::Push => Err(Denied::Unauthenticated(PUSH_NEEDS_CREDENTIALS.into())),
                    Action::WriteMeta | Action::Administer => {
                        Err(Denied::Unauthenticated(WRITES_NEED_CREDENTIALS.into()))
                    }
                };
            }
            Principal::User(identity) => identity,
        };
        let reaches = identity.reaches(repo, incarnation);
        let role = reaches.then(|| role_of(identity, repo, acl)).flatten();
        if !public && role.is_none() {
            return Err(Denied::Missing);
        }
        let scope = identity.scope();
        let limited = || {
            if reaches {
                None
            } else {
                Some(format!(
                    "this token is limited to other repositories than {repo}; use a token made with --repo {repo}"
                ))
            }
        };
        match action {
            Action::Read | Action::ReadSite => Ok(()),
            Action::Push => {
                if let Some(why) = limited() {
                    return Err(Denied::Forbidden(why));
                }
                if role < Some(Role::Write) {
                    return Err(Denied::Forbidden(format!(
                        "{} may read {repo} but not push to it; ask an admin of the repository for write access",
                        identity.user
                    )));
                }
                if scope < Scope::Write {
                    return Err(Denied::Forbidden(
                        "this token may only read; push with a token made with --scope write"
                            .into(),
                    ));
                }
                Ok(())
            }
            Action::WriteMeta => {
                if let Some(why) = limited() {
                    return Err(Denied::Forbidden(why));
                }
                if scope < Scope::Write {
                    return Err(Denied::Forbidden(
                        "this token may only read; write with a token made with --scope write"
                            .into(),
                    ));
                }
                Ok(())
            }
            Action::Administer => {
                if let Some(why) = limited() {
                    return Err(Denied::Forbidden(why));
                }
                if role < Some(Role::Admin) {
                    return Err(Denied::Forbidden(format!(
                        "only an admin of {repo} may change its settings, its ACL or delete it"
                    )));
                }
                if scope < Scope::Admin {
                    return Err(Denied::Forbidden(
                        "this token may not administer; use a token made with --scope admin".into(),
                    ));
                }
                Ok(())
            }
        }
    }

    /// The repo's visibility: its stored ACL's, else private when it was
    /// created private ([`vole_git::repos::PRIVATE_MARKER`]), else public.
    pub fn visibility_of(&self, repo: &RepoName, acl: &Acl) -> Visibility {
        if acl.version == 0
            && self
                .repos
                .path(repo)
                .join(vole_git::repos::PRIVATE_MARKER)
                .exists()
        {
            return Visibility::Private;
        }
        acl.visibility
    }

    /// May `principal` see `repo` listed (in the repo list, the home
    /// page)? The same rule as reading it.
    pub fn may_list(&self, principal: &Principal, repo: &RepoName) -> bool {
        self.check(principal, Action::Read, repo).is_ok()
    }

    /// May `principal` create `repo`? A user under their own name, a
    /// server admin anywhere; with a credential that may write.
    pub fn check_create(&self, principal: &Principal, repo: &RepoName) -> Result<(), Denied> {
        let Some(identity) = principal.identity() else {
            return Err(Denied::Unauthenticated(WRITES_NEED_CREDENTIALS.into()));
        };
        if identity.scope() < Scope::Write {
            return Err(Denied::Forbidden(
                "this token may only read; create repositories with a token made with --scope write"
                    .into(),
            ));
        }
        if !identity.unlimited() {
            return Err(Denied::Forbidden(
                "this token is limited to some repositories and may not create others; use a token made without --repo".into(),
            ));
        }
        if identity.user.eq_ignore_ascii_case(repo.owner()) || principal.is_server_admin() {
            Ok(())
        } else {
            Err(Denied::Forbidden(format!(
                "{} may create repositories under {}/ only",
                identity.user, identity.user
            )))
        }
    }

    /// May `principal` give `repo` to `new_owner`? Ownership moves only
    /// by the owner's (or a server admin's) hand, and only to a user who
    /// exists: a member admin, who may change the rest of the ACL, cannot
    /// take the repo over or orphan it. Naming the owner the repo has is no
    /// change and always allowed.
    pub fn check_owner_change(
        &self,
        principal: &Principal,
        repo: &RepoName,
        new_owner: &str,
        accounts: &vole_accounts::Accounts,
    ) -> Result<(), OwnerChangeRefused> {
        let current = self.meta.acl(repo).map_err(OwnerChangeRefused::Meta)?;
        let owner_now = current.owner.as_deref().unwrap_or(repo.owner());
        if new_owner.eq_ignore_ascii_case(owner_now) {
            return Ok(());
        }
        let is_owner = principal
            .identity()
            .is_some_and(|id| id.user.eq_ignore_ascii_case(owner_now));
        if !is_owner && !principal.is_server_admin() {
            return Err(OwnerChangeRefused::Forbidden(format!(
                "only {owner_now}, the owner, or a server admin may give {repo} another owner"
            )));
        }
        match accounts.user(new_owner) {
            Ok(Some(_)) => Ok(()),
            Ok(None) => Err(OwnerChangeRefused::NoSuchUser(format!(
                "no user named {new_owner:?}"
            ))),
            Err(e) => Err(OwnerChangeRefused::Accounts(e)),
        }
    }

    /// May `principal` do `action`, which concerns the server rather than a
    /// repo? The counters say how many repos there are, private ones
    /// included: server admins only.
    pub fn check_server(&self, principal: &Principal, action: ServerAction) -> Result<(), Denied> {
        match (principal, action) {
            (Principal::Anonymous, ServerAction::ReadStats) => Err(Denied::Hidden),
            (principal, ServerAction::ReadStats) if principal.is_server_admin() => Ok(()),
            (Principal::User(_), ServerAction::ReadStats) => Err(Denied::Missing),
        }
    }

    /// `principal` may administer `repo`: an admin of it, with a credential
    /// of admin scope that reaches it.
    pub fn administers(&self, principal: &Principal, repo: &RepoName) -> bool {
        principal
            .identity()
            .is_some_and(|id| id.scope() == Scope::Admin)
            && self.role(principal, repo) >= Some(Role::Admin)
    }

    /// May `principal` edit a document of `repo` written by `author` (an
    /// issue, a change request)? Its author, or anyone who may push there;
    /// with `--anonymous-push`, the anonymous too. (`WriteMeta` on the repo
    /// is asked first.)
    pub fn check_edit(
        &self,
        principal: &Principal,
        repo: &RepoName,
        author: &str,
    ) -> Result<(), Denied> {
        match principal {
            Principal::Anonymous if self.anonymous_push => Ok(()),
            Principal::Anonymous => Err(Denied::Unauthenticated(WRITES_NEED_CREDENTIALS.into())),
            Principal::User(identity) => {
                if identity.user.eq_ignore_ascii_case(author)
                    || self.role(principal, repo) >= Some(Role::Write)
                {
                    Ok(())
                } else {
                    Err(Denied::Forbidden(format!(
                        "only its author or someone who may push to {repo} may edit it"
                    )))
                }
            }
        }
    }

    /// `principal`'s role in `repo`: `None` when it has none (it may still
    /// read a public repo).
    pub fn role(&self, principal: &Principal, repo: &RepoName) -> Option<Role> {
        let identity = principal.identity()?;
        let (acl, incarnation) = self.meta.acl_of(repo).ok()?;
        if !identity.reaches(repo, incarnation.as_ref()) {
            return None;
        }
        role_of(identity, repo, &acl)
    }

    /// The pre-receive rules, per ref: `refs/meta/*` is the server's, and
    /// the repo's protected branches (its settings, else the server's
    /// `--protected-branch` list) take neither deletion nor a
    /// non-fast-forward. Returns what is refused, and why.
    pub fn check_ref_updates(
        &self,
        principal: &Principal,
        repo: &RepoName,
        updates: &[RefUpdate],
    ) -> Vec<Refusal> {
        // A store that cannot say which branches are protected refuses the
        // push (fails closed): the server's defaults are not the repo's.
        let (protected, admins_only) = match self.meta.settings(repo) {
            Ok(settings) => (settings.protected_branches, settings.protected_admins_only),
            Err(vole_meta::MetaError::NoRepo(_)) => (self.default_protected.clone(), false),
            Err(e) => {
                tracing::warn!(repo = %repo, error = %vole_stdx::error_chain::Chain(&e), "cannot read the protected branches; the push is refused");
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
        let head = vole_git::repos::head_branch(&self.repos.path(repo));
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
            // A deletion only takes a replacement away (one left on disk
            // by an old version, say).
            if name.starts_with("refs/replace/") && !update.is_deletion() {
                refused.push(refuse(
                    "refs/replace/* would make an object id name another object for every reader; the server ignores replacement objects and takes no push there".into(),
                ));
                continue;
            }
            let Some(branch) = name.strip_prefix("refs/heads/") else {
                continue;
            };
            if !protected.iter().any(|p| p == branch) {
                // A protected branch says why in its own words below.
                if update.is_deletion() && head.as_deref() == Some(branch) {
                    refused.push(refuse(format!(
                        "branch {branch} is this repository's default branch (HEAD): it cannot be deleted; make another branch the default first"
                    )));
                }
                continue;
            }
            if admins_only && !self.administers(principal, repo) {
                refused.push(refuse(format!(
                    "branch {branch} is protected: only admins of {repo} may push to it; push another branch and open a change request"
                )));
            } else if update.is_deletion() {
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

/// A repo the resolver let through: its name, and the incarnation the
/// decision was about, which everything the request opens or caches for
/// the repo must be (a repo deleted and created again under the name in
/// between is another repo). Dereferences to the name.
#[derive(Debug, Clone)]
pub struct ResolvedRepo {
    pub name: RepoName,
    /// `None` only for a repo from before incarnations (none is left once
    /// a server has started).
    pub incarnation: Option<Incarnation>,
}

impl ResolvedRepo {
    /// The incarnation's id, for cache keys and handles (empty for a repo
    /// without one).
    pub fn incarnation_id(&self) -> &str {
        self.incarnation.as_ref().map_or("", |i| i.id())
    }
}

impl std::ops::Deref for ResolvedRepo {
    type Target = RepoName;
    fn deref(&self) -> &RepoName {
        &self.name
    }
}

impl std::fmt::Display for ResolvedRepo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.name.fmt(f)
    }
}

/// How a repo the principal may not read is refused (see [`Denied`]).
fn hidden(principal: &Principal) -> Denied {
    match principal {
        Principal::Anonymous => Denied::Hidden,
        Principal::User(_) => Denied::Missing,
    }
}

/// The role `identity` has in `repo` by the ACL: server admins and the
/// owner are admins, members have theirs.
fn role_of(identity: &Identity, repo: &RepoName, acl: &Acl) -> Option<Role> {
    let owner = acl.owner.as_deref().unwrap_or(repo.owner());
    if identity.admin || identity.user.eq_ignore_ascii_case(owner) {
        return Some(Role::Admin);
    }
    acl.members
        .iter()
        .find(|m| m.name.eq_ignore_ascii_case(&identity.user))
        .map(|m| m.role)
}
