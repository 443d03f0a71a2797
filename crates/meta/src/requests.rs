//! The requests the store takes (what the JSON API deserializes): new and
//! edited issues, change requests and comments, ACL and settings puts.
//!
//! The thread writes take what Gitea's clients send: a field they do not
//! know is ignored, `null` is an absent field, and an edit without a
//! `version` applies to the current one. The ACL and settings (vole's
//! own) stay strict.

use super::*;

/// `null` as the field's default (Gitea's clients send `null` for an
/// optional field they leave out).
fn null_is_default<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}

// ---- requests -------------------------------------------------------------

#[derive(Debug, Clone, Deserialize)]
pub struct NewIssue {
    pub title: String,
    #[serde(default, deserialize_with = "null_is_default")]
    pub body: String,
    #[serde(default, deserialize_with = "null_is_default")]
    pub labels: Vec<String>,
}

/// An edit: `version` is the version it replaces (absent: the current
/// one); absent fields keep their value.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct IssuePatch {
    /// The version it replaces; absent: the current one.
    #[serde(default)]
    pub version: Option<u64>,
    pub title: Option<String>,
    pub body: Option<String>,
    pub state: Option<IssueState>,
    pub labels: Option<Vec<String>>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct NewChange {
    pub title: String,
    #[serde(default, deserialize_with = "null_is_default")]
    pub body: String,
    pub source_branch: String,
    pub target_branch: String,
    #[serde(default, deserialize_with = "null_is_default")]
    pub labels: Vec<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct ChangePatch {
    /// The version it replaces; absent: the current one.
    #[serde(default)]
    pub version: Option<u64>,
    pub title: Option<String>,
    pub body: Option<String>,
    pub state: Option<ChangeState>,
    pub target_branch: Option<String>,
    pub labels: Option<Vec<String>>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct NewComment {
    pub body: String,
}

/// A comment's new body; `version` is the one it replaces (absent: the
/// current one).
#[derive(Debug, Clone, Deserialize)]
pub struct CommentPatch {
    /// The version it replaces; absent: the current one.
    #[serde(default)]
    pub version: Option<u64>,
    pub body: String,
}

/// A whole new ACL; `version` is the one it replaces (0 when none is
/// stored yet).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AclPut {
    #[serde(default)]
    pub version: u64,
    pub visibility: Visibility,
    /// The owning user; absent keeps the current one.
    #[serde(default)]
    pub owner: Option<String>,
    #[serde(default)]
    pub members: Vec<Member>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SettingsPut {
    #[serde(default)]
    pub version: u64,
    #[serde(default)]
    pub description: String,
    pub default_branch: String,
    #[serde(default)]
    pub protected_branches: Vec<String>,
    #[serde(default)]
    pub protected_admins_only: bool,
    #[serde(default)]
    pub site: SiteSettings,
    #[serde(default)]
    pub site_domains: Vec<String>,
    #[serde(default)]
    pub merge: crate::entity::MergeSettings,
}
