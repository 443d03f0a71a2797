//! The metadata entities (issue, comment, change request, ACL, repo
//! settings): their versioned JSON schemas, their validation, and where each
//! lives in its shard's tree. No I/O here.
//!
//! Every stored document carries `"kind"` and `"v"` (the schema version of
//! that kind), its `version` (1 when created, +1 per edit) and `replaces`
//! (the version it replaced; absent on creation). The format is described
//! for outside readers in `docs/metadata-format.md`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Schema version written into every new document.
pub const SCHEMA_V: u32 = 1;

/// Root id of the per-repo singletons (ACL, settings): they share a shard.
pub const REPO_ROOT_ID: &str = "repo";

/// A metadata document, tagged by kind.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Entity {
    Issue(Issue),
    Comment(Comment),
    Change(Change),
    Acl(Acl),
    Settings(Settings),
    /// A server account (system repo only).
    User(User),
    /// An access token of a user (system repo only).
    Token(Token),
    /// A repo's ACL (system repo only, keyed by the repo's incarnation):
    /// who may read a repo is not in the repo, whose shard refs every
    /// reader may fetch.
    RepoAcl(RepoAcl),
    /// A document taken out of its shard's tree (the ACL a repo from
    /// before kept in its own shards, once it is in the system repo).
    Removed(Removed),
    /// A repo's label.
    Label(Label),
    /// How far a kind's numeric ids are reserved (system repo only).
    Sequence(Sequence),
    /// A repo's numeric id, by incarnation (system repo only).
    RepoId(RepoId),
    /// A webhook of a repo's incarnation, or of the server (system repo
    /// only: its secret is a credential, and readers may fetch a repo's
    /// shards).
    Hook(Hook),
}

pub use crate::numbered::{Label, RepoId, Sequence, SerialKind};
pub use crate::webhooks::{Hook, HookContent};

/// Each document kind as an [`Entity`]: a write builds the kind it writes
/// and gets it back, so no caller takes a kind back out of an `Entity`.
macro_rules! entity_kinds {
    ($($kind:ident),* $(,)?) => {
        $(impl From<$kind> for Entity {
            fn from(document: $kind) -> Entity {
                Entity::$kind(document)
            }
        })*
    };
}

entity_kinds!(
    Issue, Comment, Change, Acl, Settings, User, Token, RepoAcl, Removed, Label, Sequence, RepoId,
    Hook
);

/// A repo's ACL as the system repo keeps it: the repo it was written for
/// and that repo's incarnation, so an ACL never applies to another repo of
/// the name.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RepoAcl {
    pub repo: String,
    pub incarnation: String,
    pub acl: Acl,
}

/// A document removed from a shard's tree: its path.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Removed {
    pub path: String,
}

/// Where a repo from before kept its ACL in its own shards.
pub const REPO_ACL_PATH: &str = "repo/acl.json";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IssueState {
    Open,
    Closed,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ChangeState {
    Open,
    Merged,
    Closed,
}

/// What a comment hangs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ThreadKind {
    Issue,
    Change,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Issue {
    pub v: u32,
    /// Its numeric id ([`SerialKind`]'s sequence; 0: from before numeric
    /// ids, until the upgrade at start gives it one).
    #[serde(default, skip_serializing_if = "crate::numbered::is_unset")]
    pub serial: u64,
    pub id: String,
    pub number: u64,
    pub title: String,
    pub body: String,
    pub state: IssueState,
    pub labels: Vec<String>,
    pub author: String,
    pub created_at: String,
    pub updated_at: String,
    pub version: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replaces: Option<u64>,
    /// When its state last changed (closed, reopened, merged): the
    /// write that changed it has `updated_at` equal to it, which is how
    /// a reader of the log (the webhooks' feed) tells a close from an
    /// edit with nothing but the document. None until its first change.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state_changed_at: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Comment {
    pub v: u32,
    /// Its numeric id ([`SerialKind`]'s sequence; 0: from before numeric
    /// ids, until the upgrade at start gives it one).
    #[serde(default, skip_serializing_if = "crate::numbered::is_unset")]
    pub serial: u64,
    pub id: String,
    /// Id of the issue or change request this comment is on.
    pub thread: String,
    pub thread_kind: ThreadKind,
    pub body: String,
    pub author: String,
    pub created_at: String,
    pub updated_at: String,
    pub version: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replaces: Option<u64>,
    /// Deleted by its author or an admin: the body is emptied and the
    /// comment is no longer listed (the document stays, so a later fold
    /// cannot bring an older version back).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub deleted: bool,
    /// Not a person's words but something that happened to the thread
    /// (its body says it in words too, for readers that do not know it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event: Option<ThreadEvent>,
}

/// Something that happened to a thread, in its timeline.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum ThreadEvent {
    /// The pull request's source branch moved: `before` (none: made) to
    /// `after`, with `commits` new commits on it.
    Pushed {
        before: Option<String>,
        after: String,
        commits: u64,
    },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Change {
    pub v: u32,
    /// Its numeric id ([`SerialKind`]'s sequence; 0: from before numeric
    /// ids, until the upgrade at start gives it one).
    #[serde(default, skip_serializing_if = "crate::numbered::is_unset")]
    pub serial: u64,
    pub id: String,
    pub number: u64,
    pub title: String,
    pub body: String,
    pub source_branch: String,
    pub target_branch: String,
    pub state: ChangeState,
    /// Absent in documents from before pull requests had labels.
    #[serde(default)]
    pub labels: Vec<String>,
    pub author: String,
    pub created_at: String,
    pub updated_at: String,
    pub version: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replaces: Option<u64>,
    /// When its state last changed (closed, reopened, merged): the
    /// write that changed it has `updated_at` equal to it, which is how
    /// a reader of the log (the webhooks' feed) tells a close from an
    /// edit with nothing but the document. None until its first change.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state_changed_at: Option<String>,
    /// The commit the merge put on the target branch (absent: not merged
    /// by the server, or merged before merges were recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub merge_commit: Option<String>,
    /// Who merged it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub merged_by: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub merged_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub merge_method: Option<MergeMethod>,
    /// The target's commit just before the merge: with `merge_commit`,
    /// what the pull request brought to it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub merged_onto: Option<String>,
    /// The source branch's commit the merge took (absent: merged before
    /// this was recorded, or marked at start from a cut merge's intent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub merged_head: Option<String>,
}

/// What a merge did, as [`Change`] keeps it once merged.
#[derive(Debug, Clone, Copy)]
pub struct MergeMark<'a> {
    /// The commit the target branch now points at.
    pub commit: &'a str,
    pub method: MergeMethod,
    /// The target's commit just before.
    pub onto: &'a str,
    /// The source's commit merged (`None`: not known).
    pub head: Option<&'a str>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Visibility {
    Public,
    Private,
}

/// A member's role; each includes the ones before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    Read,
    Write,
    Admin,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Member {
    pub name: String,
    pub role: Role,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Acl {
    pub v: u32,
    pub visibility: Visibility,
    /// The user who owns the repo (always its admin). `None`: the user
    /// named like the repo's owner segment, if there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    pub members: Vec<Member>,
    pub updated_at: String,
    pub version: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replaces: Option<u64>,
}

impl Acl {
    /// What a repo without a stored ACL behaves as.
    pub fn default_for_repo() -> Acl {
        Acl {
            v: SCHEMA_V,
            visibility: Visibility::Public,
            owner: None,
            members: Vec::new(),
            updated_at: String::new(),
            version: 0,
            replaces: None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SiteSettings {
    /// The ref the site is served from, e.g. `refs/heads/pages`.
    #[serde(rename = "ref")]
    pub ref_name: String,
    /// Directory inside that ref's tree that is the site root ("" = root).
    pub dir: String,
}

impl Default for SiteSettings {
    fn default() -> Self {
        SiteSettings {
            ref_name: "refs/heads/pages".into(),
            dir: String::new(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Settings {
    pub v: u32,
    pub description: String,
    pub default_branch: String,
    pub protected_branches: Vec<String>,
    /// Protected branches take pushes from the repo's admins only.
    #[serde(default)]
    pub protected_admins_only: bool,
    pub site: SiteSettings,
    pub site_domains: Vec<String>,
    /// How pull requests may be merged (absent: every way, a merge commit
    /// by default).
    #[serde(default)]
    pub merge: MergeSettings,
    pub updated_at: String,
    pub version: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replaces: Option<u64>,
}

pub use crate::merge_settings::{MergeMethod, MergeSettings, check_merge_settings};

/// What a token may do (each includes the ones before it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    /// Clone, fetch, API reads.
    Read,
    /// Push and API writes.
    Write,
    /// Repo administration (ACL, settings, deletion), and the server's
    /// when its user is a server admin.
    Admin,
}

/// A server account. Its name is unique case-insensitively (its id is
/// the lowercased name).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct User {
    pub v: u32,
    /// Its numeric id ([`SerialKind`]'s sequence; 0: from before numeric
    /// ids, until the upgrade at start gives it one).
    #[serde(default, skip_serializing_if = "crate::numbered::is_unset")]
    pub serial: u64,
    pub name: String,
    /// The name shown on pages and written as a merge's committer; the
    /// login (`name`) stays fixed. Empty: none given (pages show `name`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub full_name: String,
    /// Unique across users, case-insensitively, for users made or edited
    /// since emails became unique (`vole check` reports older duplicates).
    pub email: String,
    pub admin: bool,
    pub disabled: bool,
    /// The argon2id hash (PHC string) of the password; `None`: the user
    /// signs in with tokens only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub password: Option<String>,
    pub created_at: String,
    pub updated_at: String,
    pub version: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replaces: Option<u64>,
}

impl User {
    /// The id a user is stored and looked up under.
    pub fn id_of(name: &str) -> String {
        name.to_ascii_lowercase()
    }

    /// The name to show: the display name, or the login without one.
    pub fn display_name(&self) -> &str {
        if self.full_name.is_empty() {
            &self.name
        } else {
            &self.full_name
        }
    }

    /// Whether `email` is this user's, as emails compare (ASCII case
    /// aside).
    pub fn has_email(&self, email: &str) -> bool {
        self.email.eq_ignore_ascii_case(email)
    }
}

/// What a token limited to a repo that did not exist when it was made
/// records as that repo's incarnation: it matches no repo, ever.
pub const NO_SUCH_REPO: &str = "none";

/// An access token: its public id, what it may do, and the SHA-256 of
/// its secret (never the secret).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Token {
    pub v: u32,
    /// Its numeric id ([`SerialKind`]'s sequence; 0: from before numeric
    /// ids, until the upgrade at start gives it one).
    #[serde(default, skip_serializing_if = "crate::numbered::is_unset")]
    pub serial: u64,
    /// 16 hex digits, the `<id>` of `vole_<id>_<secret>`.
    pub id: String,
    /// Unique on the server; what `vole token revoke` takes.
    pub name: String,
    pub user: String,
    pub scope: Scope,
    /// Repos (`owner/name`) the token is limited to; empty: every repo
    /// its user may reach.
    pub repos: Vec<String>,
    /// The incarnation of each of `repos` when the token was made
    /// ([`vole_git::repos::Incarnation`]; [`NO_SUCH_REPO`] when there was no
    /// repo of that name): the token reaches that repo only, never a repo
    /// created under the name later. A name without an entry is from a
    /// token made before incarnations existed, and reaches the repo of
    /// that name present at the upgrade.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub incarnations: BTreeMap<String, String>,
    pub secret_sha256: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<String>,
    pub revoked: bool,
    pub created_at: String,
    pub updated_at: String,
    pub version: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replaces: Option<u64>,
}

impl Entity {
    /// The entity's own id (`acl`/`settings` for the singletons).
    pub fn id(&self) -> std::borrow::Cow<'_, str> {
        std::borrow::Cow::Borrowed(match self {
            Entity::Issue(e) => &e.id,
            Entity::Comment(e) => &e.id,
            Entity::Change(e) => &e.id,
            Entity::Acl(_) => "acl",
            Entity::Settings(_) => "settings",
            Entity::User(e) => &e.name,
            Entity::Token(e) => &e.id,
            Entity::RepoAcl(e) => &e.incarnation,
            Entity::Removed(e) => &e.path,
            Entity::Label(e) => return std::borrow::Cow::Owned(e.serial.to_string()),
            Entity::Hook(e) => return std::borrow::Cow::Owned(e.serial.to_string()),
            Entity::Sequence(e) => e.of.as_str(),
            Entity::RepoId(e) => &e.incarnation,
        })
    }

    /// The id whose shard this entity is stored in: a comment lives with
    /// its thread.
    pub fn root_id(&self) -> &str {
        match self {
            Entity::Issue(e) => &e.id,
            Entity::Change(e) => &e.id,
            Entity::Comment(e) => &e.thread,
            Entity::Acl(_) | Entity::Settings(_) => REPO_ROOT_ID,
            Entity::User(e) => &e.name,
            Entity::Token(e) => &e.id,
            Entity::RepoAcl(e) => &e.incarnation,
            // The ACL's shard (the one removal there is).
            Entity::Removed(_) => REPO_ROOT_ID,
            Entity::Label(_) => crate::numbered::LABELS_ROOT,
            Entity::Sequence(_) => crate::numbered::SEQUENCES_ROOT,
            Entity::RepoId(e) => &e.incarnation,
            Entity::Hook(_) => crate::webhooks::HOOKS_ROOT,
        }
    }

    pub fn kind(&self) -> &'static str {
        match self {
            Entity::Issue(_) => "issue",
            Entity::Comment(_) => "comment",
            Entity::Change(_) => "change",
            Entity::Acl(_) => "acl",
            Entity::Settings(_) => "settings",
            Entity::User(_) => "user",
            Entity::Token(_) => "token",
            Entity::RepoAcl(_) => "repo_acl",
            Entity::Removed(_) => "removed",
            Entity::Label(_) => "label",
            Entity::Sequence(_) => "sequence",
            Entity::RepoId(_) => "repo_id",
            Entity::Hook(_) => "hook",
        }
    }

    pub fn version(&self) -> u64 {
        match self {
            Entity::Issue(e) => e.version,
            Entity::Comment(e) => e.version,
            Entity::Change(e) => e.version,
            Entity::Acl(e) => e.version,
            Entity::Settings(e) => e.version,
            Entity::User(e) => e.version,
            Entity::Token(e) => e.version,
            Entity::RepoAcl(e) => e.acl.version,
            Entity::Removed(_) => 0,
            Entity::Label(e) => e.version,
            Entity::Sequence(e) => e.version,
            Entity::RepoId(e) => e.version,
            Entity::Hook(e) => e.version,
        }
    }

    /// Path of the document inside its shard's tree.
    pub fn tree_path(&self) -> String {
        match self {
            Entity::Issue(e) => format!("{}/issue.json", thread_dir(ThreadKind::Issue, &e.id)),
            Entity::Change(e) => format!("{}/change.json", thread_dir(ThreadKind::Change, &e.id)),
            Entity::Comment(e) => format!(
                "{}/comments/{}.json",
                thread_dir(e.thread_kind, &e.thread),
                e.id
            ),
            Entity::Acl(_) => REPO_ACL_PATH.into(),
            Entity::Settings(_) => "repo/settings.json".into(),
            Entity::User(e) => format!("users/{}.json", User::id_of(&e.name)),
            Entity::Token(e) => format!("tokens/{}.json", e.id),
            Entity::RepoAcl(e) => format!("acls/{}.json", e.incarnation),
            Entity::Removed(e) => e.path.clone(),
            Entity::Label(e) => format!("labels/{}.json", e.serial),
            Entity::Sequence(e) => format!("sequences/{}.json", e.of.as_str()),
            Entity::RepoId(e) => format!("repo_ids/{}.json", e.incarnation),
            Entity::Hook(e) => format!("hooks/{}.json", e.serial),
        }
    }
}

/// `issues/<bucket>/<id>` or `changes/<bucket>/<id>`. The bucket is the
/// first five characters of the ULID (its top 23 time bits, ~9.3 hours):
/// new threads land in the newest bucket, so a fold rewrites one small
/// bucket tree instead of a tree holding every thread of the shard, and no
/// tree grows with the total number of threads.
pub fn thread_dir(kind: ThreadKind, id: &str) -> String {
    let top = match kind {
        ThreadKind::Issue => "issues",
        ThreadKind::Change => "changes",
    };
    format!("{top}/{}/{id}", bucket(id))
}

fn bucket(id: &str) -> &str {
    id.get(..5).unwrap_or(id)
}

pub use crate::checks::*;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comments_live_in_their_threads_directory() {
        let issue_id = "01JDQ4Z8W8K3M5N7P9R1T3V5X7";
        let comment = Entity::Comment(Comment {
            v: 1,
            id: "01JDQ4ZAAAAAAAAAAAAAAAAAAA".into(),
            thread: issue_id.into(),
            thread_kind: ThreadKind::Issue,
            body: "hi".into(),
            author: "ann".into(),
            created_at: String::new(),
            updated_at: String::new(),
            version: 1,
            replaces: None,
            deleted: false,
            event: None,
            serial: 1,
        });
        assert_eq!(comment.root_id(), issue_id);
        assert_eq!(
            comment.tree_path(),
            format!("issues/01JDQ/{issue_id}/comments/01JDQ4ZAAAAAAAAAAAAAAAAAAA.json")
        );
    }

    #[test]
    fn branch_rules() {
        for good in ["main", "feature/x", "v1.2"] {
            assert!(check_branch("b", good).is_ok(), "{good}");
        }
        for bad in ["", "a..b", "x.lock", "/a", "a b", ".hidden", "a/.b", "x~1"] {
            assert!(check_branch("b", bad).is_err(), "{bad}");
        }
    }
}
