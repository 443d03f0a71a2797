//! The in-memory caches the assembly sizes: the web pages' cached git reads
//! and the repos' open gix handles (the highlighter's and the sites' own
//! bounds are in [`crate::ReadLimits`] and [`crate::SiteSettings`]).

use crate::values::{positive, size};
use crate::{ConfigError, Settings, defaults};

/// The bounds of the caches the web UI and sites share.
#[derive(Debug, Clone)]
pub struct CacheSettings {
    /// Bytes of each of the web pages' caches of git reads.
    pub web_cache_bytes: u64,
    /// Repos whose gix handles stay open at once.
    pub max_open_repos: u64,
}

impl CacheSettings {
    pub(crate) fn resolve(raw: &Settings) -> Result<CacheSettings, ConfigError> {
        Ok(CacheSettings {
            web_cache_bytes: size(
                "web-cache-size",
                raw.web_cache_size.as_deref(),
                defaults::WEB_CACHE_SIZE,
            )?,
            max_open_repos: positive(
                "max-open-repos",
                raw.max_open_repos.unwrap_or(defaults::MAX_OPEN_REPOS),
            )? as u64,
        })
    }
}
