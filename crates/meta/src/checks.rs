//! The rules a document's fields are checked by before it is written
//! (titles, bodies, labels, branch and user names, members, sites), and
//! [`Invalid`], what a refusal says; re-exported by [`crate::entity`].

use vole_git::tree_path::TreePath;

use crate::entity::{Member, SiteSettings};

/// Why a document was refused.
#[derive(Debug, thiserror::Error, PartialEq)]
#[error("{0}")]
pub struct Invalid(pub String);

pub const MAX_TITLE_CHARS: usize = 256;
pub const MAX_BODY_BYTES: usize = 256 * 1024;
pub const MAX_LABELS: usize = 32;
pub const MAX_LABEL_CHARS: usize = 64;
pub const MAX_MEMBERS: usize = 1000;

pub fn check_title(title: &str) -> Result<(), Invalid> {
    let trimmed = title.trim();
    if trimmed.is_empty() {
        return Err(Invalid("title must not be empty".into()));
    }
    if title.chars().count() > MAX_TITLE_CHARS {
        return Err(Invalid(format!(
            "title is longer than {MAX_TITLE_CHARS} characters"
        )));
    }
    if title.chars().any(char::is_control) {
        return Err(Invalid(
            "title must be one line without control characters".into(),
        ));
    }
    Ok(())
}

pub fn check_body(body: &str) -> Result<(), Invalid> {
    if body.len() > MAX_BODY_BYTES {
        return Err(Invalid(format!(
            "body is larger than {} KiB",
            MAX_BODY_BYTES / 1024
        )));
    }
    Ok(())
}

pub fn check_labels(labels: &[String]) -> Result<(), Invalid> {
    if labels.len() > MAX_LABELS {
        return Err(Invalid(format!("at most {MAX_LABELS} labels")));
    }
    for label in labels {
        if label.trim().is_empty() || label.chars().count() > MAX_LABEL_CHARS {
            return Err(Invalid(format!(
                "label {label:?} must be 1 to {MAX_LABEL_CHARS} characters"
            )));
        }
        if label.chars().any(|c| c.is_control() || c == ',') {
            return Err(Invalid(format!(
                "label {label:?} must not contain commas or control characters"
            )));
        }
    }
    Ok(())
}

/// Longest repo description, in bytes.
pub const MAX_DESCRIPTION_BYTES: usize = 1024;

/// A repo's description: one line of at most [`MAX_DESCRIPTION_BYTES`]
/// (the settings' and a new repo's alike).
pub fn check_description(description: &str) -> Result<(), Invalid> {
    if description.len() > MAX_DESCRIPTION_BYTES || description.chars().any(char::is_control) {
        return Err(Invalid(format!(
            "description must be one line of at most {MAX_DESCRIPTION_BYTES} bytes"
        )));
    }
    Ok(())
}

/// A branch name by git's rules ([`vole_git::is_branch_name`]).
pub fn check_branch(what: &str, name: &str) -> Result<(), Invalid> {
    if !vole_git::is_branch_name(name) {
        return Err(Invalid(format!(
            "{what} {name:?} is not a valid branch name"
        )));
    }
    Ok(())
}

/// Member and author names: what a login name may be.
pub fn check_user_name(name: &str) -> Result<(), Invalid> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        && !name.starts_with('.');
    if ok {
        Ok(())
    } else {
        Err(Invalid(format!(
            "user name {name:?} must be 1 to 64 letters, digits, '-', '_' or '.'"
        )))
    }
}

pub fn check_members(members: &[Member]) -> Result<(), Invalid> {
    if members.len() > MAX_MEMBERS {
        return Err(Invalid(format!("at most {MAX_MEMBERS} members")));
    }
    let mut seen = std::collections::HashSet::new();
    for member in members {
        check_user_name(&member.name)?;
        if !seen.insert(member.name.as_str()) {
            return Err(Invalid(format!("member {:?} is listed twice", member.name)));
        }
    }
    Ok(())
}

pub fn check_site(site: &SiteSettings, domains: &[String]) -> Result<(), Invalid> {
    // A branch or a tag: any other ref (refs/meta/*, refs/notes/*, a
    // change request's head) is not the repo's to publish.
    let ok_ref = ["refs/heads/", "refs/tags/"].iter().any(|prefix| {
        site.ref_name
            .strip_prefix(prefix)
            .is_some_and(|short| check_branch("site ref", short).is_ok())
    });
    if !ok_ref {
        return Err(Invalid(format!(
            "site ref {:?} must be a branch or a tag, written in full: refs/heads/pages or refs/tags/v1",
            site.ref_name
        )));
    }
    if !site.dir.is_empty() && !TreePath::parse(&site.dir).is_ok_and(|dir| !dir.trailing_slash()) {
        return Err(Invalid(format!(
            "site dir {:?} must be a relative path without '.' or '..' parts",
            site.dir
        )));
    }
    for domain in domains {
        let ok = !domain.is_empty()
            && domain.len() <= 253
            && domain
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.')
            && !domain.starts_with('.')
            && !domain.ends_with('.');
        if !ok {
            return Err(Invalid(format!(
                "site domain {domain:?} is not a host name"
            )));
        }
    }
    Ok(())
}
