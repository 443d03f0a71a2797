//! How a repo's pull requests may be merged: the methods, as Gitea names
//! them, and the settings that choose which are offered (a part of the
//! repo's **settings** document, re-exported by [`crate::entity`]).

use serde::{Deserialize, Serialize};

use crate::entity::Invalid;

/// A way to merge a pull request, as Gitea names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum MergeMethod {
    /// A merge commit with the target and the source as parents, always.
    Merge,
    /// The target moved to the source's head; refused unless it is an
    /// ancestor of it.
    FastForwardOnly,
    /// One new commit on the target with the merged tree, authored by the
    /// pull request's author.
    Squash,
}

impl MergeMethod {
    pub const ALL: [MergeMethod; 3] = [
        MergeMethod::Merge,
        MergeMethod::FastForwardOnly,
        MergeMethod::Squash,
    ];

    /// Its name in settings, forms and Gitea's API.
    pub fn as_str(self) -> &'static str {
        match self {
            MergeMethod::Merge => "merge",
            MergeMethod::FastForwardOnly => "fast-forward-only",
            MergeMethod::Squash => "squash",
        }
    }

    pub fn parse(text: &str) -> Option<MergeMethod> {
        MergeMethod::ALL.into_iter().find(|m| m.as_str() == text)
    }

    /// How a person reads it on a button.
    pub fn named(self) -> &'static str {
        match self {
            MergeMethod::Merge => "Create a merge commit",
            MergeMethod::FastForwardOnly => "Fast-forward only",
            MergeMethod::Squash => "Squash and merge",
        }
    }
}

/// Which merge methods a repo offers, and the one chosen by default.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MergeSettings {
    pub methods: Vec<MergeMethod>,
    pub default: MergeMethod,
}

impl Default for MergeSettings {
    fn default() -> Self {
        MergeSettings {
            methods: MergeMethod::ALL.to_vec(),
            default: MergeMethod::Merge,
        }
    }
}

/// The merge settings are usable: at least one method, no method twice,
/// the default among them.
pub fn check_merge_settings(merge: &MergeSettings) -> Result<(), Invalid> {
    if merge.methods.is_empty() {
        return Err(Invalid(
            "merge methods must name at least one of merge, fast-forward-only, squash".into(),
        ));
    }
    let mut seen = merge.methods.clone();
    seen.sort_by_key(|m| m.as_str());
    seen.dedup();
    if seen.len() != merge.methods.len() {
        return Err(Invalid("merge methods name a method twice".into()));
    }
    if !merge.methods.contains(&merge.default) {
        return Err(Invalid(format!(
            "the default merge method {} is not one of the methods offered",
            merge.default.as_str()
        )));
    }
    Ok(())
}
