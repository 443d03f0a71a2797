//! The rules on an ACL change beyond its shape: a repo changes hands only
//! by its owner's (or a server admin's) hand and only to a user who
//! exists, and a member added is a user who exists. A name that is no
//! user's today may be registered tomorrow; granting it a role now would
//! hand that role to whoever takes the name.

use vole_git::repos::RepoName;
use vole_meta::AclPut;
use vole_meta::entity::Acl;

use crate::{Access, Principal};

/// Why [`Access::check_acl_change`] refused.
#[derive(Debug, thiserror::Error)]
pub enum AclChangeRefused {
    /// Not the owner's or a server admin's hand.
    #[error("{0}")]
    Forbidden(String),
    /// The new owner, or a member added, is no user.
    #[error("{0}")]
    NoSuchUser(String),
    /// The repo's ACL could not be read.
    #[error(transparent)]
    Meta(vole_meta::MetaError),
    /// A user could not be looked up.
    #[error("cannot look a user up: {0}")]
    Accounts(vole_accounts::AccountError),
}

impl Access {
    /// May `principal` store `put` as `repo`'s ACL, as far as who is named
    /// in it goes? Ownership moves only by the owner's (or a server
    /// admin's) hand, and only to a user who exists: a member admin, who
    /// may change the rest of the ACL, cannot take the repo over or orphan
    /// it. Naming the owner the repo has is no change and always allowed.
    /// Every member the stored ACL does not list already must be a user
    /// (members listed already stay, so an admin can still edit an ACL
    /// that names someone since disabled).
    pub fn check_acl_change(
        &self,
        principal: &Principal,
        repo: &RepoName,
        put: &AclPut,
        accounts: &vole_accounts::Accounts,
    ) -> Result<(), AclChangeRefused> {
        let current = self.meta.acl(repo).map_err(AclChangeRefused::Meta)?;
        if let Some(new_owner) = &put.owner {
            check_owner_change(principal, repo, &current, new_owner, accounts)?;
        }
        let listed: std::collections::HashSet<String> = current
            .members
            .iter()
            .map(|m| m.name.to_ascii_lowercase())
            .collect();
        let added = put
            .members
            .iter()
            .filter(|m| !listed.contains(&m.name.to_ascii_lowercase()));
        for added in added {
            if !is_user(accounts, &added.name)? {
                return Err(AclChangeRefused::NoSuchUser(format!(
                    "there is no user named {:?}: a member must have an account first",
                    added.name
                )));
            }
        }
        Ok(())
    }
}

fn check_owner_change(
    principal: &Principal,
    repo: &RepoName,
    current: &Acl,
    new_owner: &str,
    accounts: &vole_accounts::Accounts,
) -> Result<(), AclChangeRefused> {
    let owner_now = current.owner.as_deref().unwrap_or(repo.owner());
    if new_owner.eq_ignore_ascii_case(owner_now) {
        return Ok(());
    }
    let is_owner = principal
        .identity()
        .is_some_and(|id| id.user.eq_ignore_ascii_case(owner_now));
    if !is_owner && !principal.is_server_admin() {
        return Err(AclChangeRefused::Forbidden(format!(
            "only {owner_now}, the owner, or a server admin may give {repo} another owner"
        )));
    }
    if is_user(accounts, new_owner)? {
        Ok(())
    } else {
        Err(AclChangeRefused::NoSuchUser(format!(
            "no user named {new_owner:?}"
        )))
    }
}

fn is_user(accounts: &vole_accounts::Accounts, name: &str) -> Result<bool, AclChangeRefused> {
    match accounts.user(name) {
        Ok(found) => Ok(found.is_some()),
        Err(e) => Err(AclChangeRefused::Accounts(e)),
    }
}
