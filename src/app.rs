//! [`App`]: the one shared state of a running vole (or of a CLI command that
//! holds the data dir lock because no server runs). HTTP handlers and the
//! control socket both call into it; it owns the config, the git binary and
//! the repository store.

use crate::config::Config;
use crate::datadir::DataDir;
use crate::git::Git;
use crate::repos::{RepoError, RepoInfo, RepoName, Repos};

/// Shared state; lives behind an `Arc`.
#[derive(Debug)]
pub struct App {
    pub config: Config,
    pub data: DataDir,
    pub git: Git,
    pub repos: Repos,
}

impl App {
    /// Assembles the app over a prepared, locked data dir.
    pub fn new(config: Config, git: Git) -> App {
        let data = DataDir::new(config.data_dir.clone());
        App {
            repos: Repos::new(data.clone()),
            data,
            git,
            config,
        }
    }

    /// Creates `owner/name` (blocking: runs git).
    pub fn create_repo(
        &self,
        name: &str,
        description: Option<&str>,
    ) -> Result<RepoInfo, RepoError> {
        let name = RepoName::parse(name)?;
        let info = self
            .repos
            .create(&self.git, &name, description, &self.config.default_branch)?;
        tracing::info!(repo = %name, "repository created");
        Ok(info)
    }

    pub fn list_repos(&self) -> Vec<RepoInfo> {
        self.repos.list()
    }
}
