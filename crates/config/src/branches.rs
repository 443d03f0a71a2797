//! The branches every repo starts with or keeps: the default branch of a new
//! repo and the branches protected everywhere, each a valid git branch name.

use crate::{ConfigError, Settings, defaults};

pub(crate) fn default_branch(raw: &Settings) -> Result<String, ConfigError> {
    let default_branch = raw
        .default_branch
        .clone()
        .unwrap_or_else(|| defaults::DEFAULT_BRANCH.to_string());
    validate_branch_name("default-branch", &default_branch)?;
    Ok(default_branch)
}

pub(crate) fn protected_branches(raw: &Settings) -> Result<Vec<String>, ConfigError> {
    let protected_branches = raw.protected_branches.clone().unwrap_or_default();
    for branch in &protected_branches {
        validate_branch_name("protected-branch", branch)?;
    }
    Ok(protected_branches)
}

fn validate_branch_name(setting: &'static str, name: &str) -> Result<(), ConfigError> {
    if !vole_git::is_branch_name(name) {
        return Err(ConfigError::Invalid {
            setting,
            value: name.to_string(),
            reason: "not a valid git branch name".into(),
        });
    }
    Ok(())
}
