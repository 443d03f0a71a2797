//! The owner-change rule: a repo changes hands only by its owner's (or a
//! server admin's) hand, and only to a user who exists.

use vole_git::repos::RepoName;

use crate::{Access, Principal};

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

impl Access {
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
}
