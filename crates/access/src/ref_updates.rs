//! The pre-receive rules, per ref: `refs/meta/*` and `refs/replace/*`,
//! the default branch, and the repo's protected branches.

use serde::Serialize;
use vole_git::repos::RepoName;
use vole_hooks::RefUpdate;

use crate::{Access, Principal};

/// Why the pre-receive check refused a ref.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Refusal {
    #[serde(rename = "ref")]
    pub ref_name: String,
    pub reason: String,
}

impl Access {
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
