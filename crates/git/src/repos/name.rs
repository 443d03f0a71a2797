//! Repo names: `owner/name`, each part checked against git's and the
//! router's rules (length, characters, `.git`, reserved words).

use std::fmt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// Longest owner or repo name accepted.
pub const MAX_NAME_LEN: usize = 100;

/// Words the router uses at the top level of a path; no owner or repo may
/// take them.
pub const RESERVED_NAMES: &[&str] = &[
    "api", "static", "healthz", "metrics", "-", "login", "logout", "settings",
];

/// Words no owner may take either (compared case-insensitively): the
/// account and administration pages a forge has or will have at the top
/// level, and names that would read as the server's own.
pub const RESERVED_OWNERS: &[&str] = &[
    "admin",
    "administrator",
    "assets",
    "explore",
    "help",
    "issues",
    "new",
    "notifications",
    "org",
    "orgs",
    "pulls",
    "repo",
    "repos",
    "search",
    "signup",
    "site",
    "sites",
    "system",
    "user",
    "users",
    "vole",
];

/// A validated `owner/name`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct RepoName {
    owner: String,
    name: String,
}

/// The rule an `owner/name` broke.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    #[error("repository must be written owner/name, got {0:?}")]
    NotOwnerSlashName(String),
    #[error("{part} is empty")]
    Empty { part: &'static str },
    #[error("{part} {value:?} is longer than {MAX_NAME_LEN} characters")]
    TooLong { part: &'static str, value: String },
    #[error("{part} {value:?} contains {bad:?}; use only letters, digits, '.', '_' and '-'")]
    BadCharacter {
        part: &'static str,
        value: String,
        bad: char,
    },
    #[error("{part} {value:?} starts with a dot")]
    LeadingDot { part: &'static str, value: String },
    #[error("{part} {value:?} contains \"..\"")]
    DoubleDot { part: &'static str, value: String },
    #[error("{part} {value:?} ends in \".git\"; leave the suffix off")]
    GitSuffix { part: &'static str, value: String },
    #[error("{part} {value:?} is reserved for vole's own routes")]
    Reserved { part: &'static str, value: String },
}

impl RepoName {
    pub fn parse(text: &str) -> Result<RepoName, NameError> {
        let Some((owner, name)) = text.split_once('/') else {
            return Err(NameError::NotOwnerSlashName(text.to_string()));
        };
        if name.contains('/') {
            return Err(NameError::NotOwnerSlashName(text.to_string()));
        }
        Self::from_parts(owner, name)
    }

    pub fn from_parts(owner: &str, name: &str) -> Result<RepoName, NameError> {
        validate_part("owner", owner)?;
        validate_part("repository name", name)?;
        Ok(RepoName {
            owner: owner.to_string(),
            name: name.to_string(),
        })
    }

    /// [`RepoName::parse`] plus the rules only a new repo must meet: an
    /// owner none of [`RESERVED_OWNERS`]. (An existing repo under such an
    /// owner stays reachable.)
    pub fn parse_new(text: &str) -> Result<RepoName, NameError> {
        let name = RepoName::parse(text)?;
        if RESERVED_OWNERS.contains(&name.owner.to_ascii_lowercase().as_str()) {
            return Err(NameError::Reserved {
                part: "owner",
                value: name.owner,
            });
        }
        Ok(name)
    }

    /// Unchecked: for names read back from a store that checked them.
    pub(super) fn unchecked(owner: &str, name: &str) -> RepoName {
        RepoName {
            owner: owner.to_string(),
            name: name.to_string(),
        }
    }

    pub fn owner(&self) -> &str {
        &self.owner
    }
    pub fn name(&self) -> &str {
        &self.name
    }

    /// `<owner>/<name>.git`, relative to `data/repos`.
    pub fn relative_path(&self) -> PathBuf {
        Path::new(&self.owner).join(format!("{}.git", self.name))
    }
}

impl fmt::Display for RepoName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.owner, self.name)
    }
}
impl TryFrom<String> for RepoName {
    type Error = NameError;
    fn try_from(text: String) -> Result<Self, Self::Error> {
        RepoName::parse(&text)
    }
}
impl From<RepoName> for String {
    fn from(name: RepoName) -> String {
        name.to_string()
    }
}

fn validate_part(part: &'static str, value: &str) -> Result<(), NameError> {
    let owned = || value.to_string();
    if value.is_empty() {
        return Err(NameError::Empty { part });
    }
    if value.chars().count() > MAX_NAME_LEN {
        return Err(NameError::TooLong {
            part,
            value: owned(),
        });
    }
    if let Some(bad) = value
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
    {
        return Err(NameError::BadCharacter {
            part,
            value: owned(),
            bad,
        });
    }
    if value.starts_with('.') {
        return Err(NameError::LeadingDot {
            part,
            value: owned(),
        });
    }
    if value.contains("..") {
        return Err(NameError::DoubleDot {
            part,
            value: owned(),
        });
    }
    if value.to_ascii_lowercase().ends_with(".git") {
        return Err(NameError::GitSuffix {
            part,
            value: owned(),
        });
    }
    if RESERVED_NAMES.contains(&value.to_ascii_lowercase().as_str()) {
        return Err(NameError::Reserved {
            part,
            value: owned(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn good_names_pass() {
        for ok in ["alice/vole", "a-b/c_d.e", "A1/x", "o/-dash-first"] {
            RepoName::parse(ok).unwrap_or_else(|e| panic!("{ok}: {e}"));
        }
    }
}
