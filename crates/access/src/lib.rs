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
//!   does not exist: [`Denied::Hidden`] to the anonymous (git answers
//!   401, so a client asks for credentials; the API and the pages the
//!   missing repo's 404), [`Denied::Missing`]
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

mod acl_change;
pub mod pushes;
mod ref_updates;
mod rules;

pub use acl_change::AclChangeRefused;
pub use ref_updates::Refusal;

use std::path::PathBuf;
use std::sync::Arc;

use vole_accounts::Identity;
use vole_git::repos::{Incarnation, RepoName, Repos};
use vole_meta::MetaStore;
use vole_meta::entity::Scope;

use rules::hidden;

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
    /// The same, for the anonymous: credentials might show it (git
    /// answers 401 with [`HIDDEN`]; the API, the web and sites a 404).
    Hidden,
    /// Credentials are needed (and none were given).
    Unauthenticated(String),
    /// The principal is known and may not do this.
    Forbidden(String),
}

/// The one message of [`Denied::Hidden`], the same for a private repo
/// and a missing one.
pub const HIDDEN: &str = "authentication required: sign in with your user name and a token";

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
