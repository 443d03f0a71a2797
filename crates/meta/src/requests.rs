//! The requests the store takes (what the JSON API deserializes): new and
//! edited issues, change requests and comments, ACL and settings puts.

use super::*;

// ---- requests -------------------------------------------------------------

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewIssue {
    pub title: String,
    #[serde(default)]
    pub body: String,
    #[serde(default)]
    pub labels: Vec<String>,
}

/// An edit: `version` is the version it replaces; absent fields keep
/// their value.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IssuePatch {
    pub version: u64,
    pub title: Option<String>,
    pub body: Option<String>,
    pub state: Option<IssueState>,
    pub labels: Option<Vec<String>>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewChange {
    pub title: String,
    #[serde(default)]
    pub body: String,
    pub source_branch: String,
    pub target_branch: String,
    #[serde(default)]
    pub labels: Vec<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChangePatch {
    pub version: u64,
    pub title: Option<String>,
    pub body: Option<String>,
    pub state: Option<ChangeState>,
    pub target_branch: Option<String>,
    pub labels: Option<Vec<String>>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewComment {
    pub body: String,
}

/// A comment's new body; `version` is the one it replaces.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CommentPatch {
    pub version: u64,
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
