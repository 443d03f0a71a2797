//! The rules by repo: what a principal's role in a repo, its token's scope
//! and the repos its token reaches, and the repo's visibility let it do;
//! creating repos, editing documents and the server's own surfaces.

use vole_accounts::Identity;
use vole_git::repos::{Incarnation, RepoName};
use vole_meta::entity::{Acl, Role, Scope, Visibility};

use crate::{
    Access, Action, Denied, PUSH_NEEDS_CREDENTIALS, Principal, ServerAction,
    WRITES_NEED_CREDENTIALS,
};

impl Access {
    /// [`Access::check`], returning the incarnation of the repo the
    /// decision was made about (read with its ACL, in one step).
    pub(crate) fn decide(
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

    /// Whether `repo` is private (its stored ACL's visibility, or how it
    /// was created): what a listing marks. A store that cannot answer
    /// counts as private.
    pub fn is_private(&self, repo: &RepoName) -> bool {
        self.meta
            .acl(repo)
            .map(|acl| self.visibility_of(repo, &acl) == Visibility::Private)
            .unwrap_or(true)
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

    /// May `principal` label or unlabel issues and pull requests of
    /// `repo`? Those who may push there (an author may not label their own).
    pub fn check_label(&self, principal: &Principal, repo: &RepoName) -> Result<(), Denied> {
        self.check_role(
            principal,
            repo,
            Role::Write,
            format!("only someone who may push to {repo} may set labels"),
        )
    }

    /// May `principal` merge pull requests of `repo`? Those who may push
    /// there (the target's protection is asked of the merge's ref update
    /// too, as of a push's).
    pub fn check_merge(&self, principal: &Principal, repo: &RepoName) -> Result<(), Denied> {
        self.check_role(
            principal,
            repo,
            Role::Write,
            format!("only someone who may push to {repo} may merge its pull requests"),
        )
    }

    /// May `principal` edit or delete a comment on `repo` written by
    /// `author`? Its author, or an admin of the repo.
    pub fn check_comment_edit(
        &self,
        principal: &Principal,
        repo: &RepoName,
        author: &str,
    ) -> Result<(), Denied> {
        if principal
            .identity()
            .is_some_and(|id| id.user.eq_ignore_ascii_case(author))
        {
            return Ok(());
        }
        // Another's comment is moderation: an admin's, with a credential
        // that may administer (a session, or a token of admin scope).
        if self.administers(principal, repo) {
            return Ok(());
        }
        match principal {
            Principal::Anonymous => Err(Denied::Unauthenticated(WRITES_NEED_CREDENTIALS.into())),
            Principal::User(_) => Err(Denied::Forbidden(format!(
                "only its author or an admin of {repo} (signed in, or with an admin-scope token) may edit or delete a comment"
            ))),
        }
    }

    /// `principal` has at least `role` in `repo` (`WriteMeta` on the repo
    /// is asked first); else forbidden with `why`.
    fn check_role(
        &self,
        principal: &Principal,
        repo: &RepoName,
        role: Role,
        why: String,
    ) -> Result<(), Denied> {
        match principal {
            Principal::Anonymous => Err(Denied::Unauthenticated(WRITES_NEED_CREDENTIALS.into())),
            Principal::User(_) if self.role(principal, repo) >= Some(role) => Ok(()),
            Principal::User(_) => Err(Denied::Forbidden(why)),
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
}

/// How a repo the principal may not read is refused (see [`Denied`]).
pub(crate) fn hidden(principal: &Principal) -> Denied {
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
