//! Numeric ids: every user, repo, issue (pull requests among them),
//! comment, label and token has one, as Gitea's API names each object, handed out
//! by its kind's sequence and never reused. A sequence is a document of
//! the system repo that records how far ids have been reserved: an id is
//! handed out only once a reservation covering it is durable, so ids stay
//! unique across restarts and across repos deleted and made again (an id
//! reserved and not handed out before a restart is skipped, never reused).
//! Ids stay below 2^53, so JavaScript clients read them exactly.
//!
//! Also here: the label document (a repo's labels are entities with ids and
//! colours; issues and pull requests name theirs).

use serde::{Deserialize, Serialize};

/// The kinds that have numeric ids, each its own sequence.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SerialKind {
    /// Issues and pull requests: one sequence, as Gitea's issues table
    /// holds both.
    Issue,
    Comment,
    Label,
    User,
    Repo,
    Token,
    Hook,
}

impl SerialKind {
    pub const ALL: [SerialKind; 7] = [
        SerialKind::Issue,
        SerialKind::Comment,
        SerialKind::Label,
        SerialKind::User,
        SerialKind::Repo,
        SerialKind::Token,
        SerialKind::Hook,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            SerialKind::Issue => "issue",
            SerialKind::Comment => "comment",
            SerialKind::Label => "label",
            SerialKind::User => "user",
            SerialKind::Repo => "repo",
            SerialKind::Token => "token",
            SerialKind::Hook => "hook",
        }
    }
}

/// The largest id a sequence hands out: 2^53 - 1, the largest integer a
/// JavaScript number holds exactly.
pub const MAX_SERIAL: u64 = (1 << 53) - 1;

/// How many ids one reservation covers: one durable write of the system
/// repo per this many ids.
pub const RESERVE_BLOCK: u64 = 64;

/// How far a kind's ids are reserved (the system repo's
/// `sequences/<of>.json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Sequence {
    pub v: u32,
    pub of: SerialKind,
    /// Every id up to this one may have been handed out.
    pub reserved: u64,
    pub updated_at: String,
    pub version: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replaces: Option<u64>,
}

/// A repo's label: issues and pull requests carry its name.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Label {
    pub v: u32,
    pub serial: u64,
    pub name: String,
    /// Six lowercase hex digits, without `#`.
    pub color: String,
    #[serde(default)]
    pub description: String,
    pub created_at: String,
    pub updated_at: String,
    pub version: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replaces: Option<u64>,
    /// Deleted: no longer listed, its name free again (the document stays,
    /// so a later fold cannot bring an older version back).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub deleted: bool,
}

/// A repo's numeric id (the system repo's `repo_ids/<incarnation>.json`):
/// kept by incarnation, so a repo deleted and made again under its name
/// is another repo with another id.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RepoId {
    pub v: u32,
    pub incarnation: String,
    /// The repo's name when the id was given (for readers of the store).
    pub repo: String,
    pub serial: u64,
    pub created_at: String,
    pub version: u64,
}

/// The shard root every label of a repo lives under (a repo's labels are
/// few, and read together).
pub const LABELS_ROOT: &str = "labels";

/// The shard root of the sequences (the system repo's).
pub const SEQUENCES_ROOT: &str = "sequences";

/// The colour a label gets when none is given (and the labels an upgrade
/// makes from the names issues carried).
pub const DEFAULT_LABEL_COLOR: &str = "ededed";

/// A label colour as Gitea's clients send it (`#RRGGBB` or `RRGGBB`, any
/// case), as stored: six lowercase hex digits.
pub fn label_color(color: &str) -> Result<String, crate::entity::Invalid> {
    let hex = color.strip_prefix('#').unwrap_or(color);
    if hex.len() == 6 && hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        Ok(hex.to_ascii_lowercase())
    } else {
        Err(crate::entity::Invalid(format!(
            "label color {color:?} must be six hex digits, as #e11d21"
        )))
    }
}

/// The serial field's `skip_serializing_if`: 0 is "none yet".
pub fn is_unset(serial: &u64) -> bool {
    *serial == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn colours_are_taken_with_or_without_the_hash_and_stored_lowercase() {
        assert_eq!(label_color("#E11D21").unwrap(), "e11d21");
        assert_eq!(label_color("00aabb").unwrap(), "00aabb");
        for bad in ["", "#fff", "red", "#1234567", "#12345g"] {
            assert!(label_color(bad).is_err(), "{bad}");
        }
    }
}
