//! How sites are served: their cache, the size past which a file is
//! streamed, their Cache-Control, and the hosts that serve one repo's site.

use crate::values::{positive, size};
use crate::{ConfigError, Settings, defaults};

/// How sites are served.
#[derive(Debug, Clone)]
pub struct SiteSettings {
    pub cache_bytes: u64,
    /// Resolved paths remembered in each of the two path caches.
    pub path_cache_entries: usize,
    pub stream_threshold: u64,
    pub cache_control: String,
    /// Host (lower case, no port) -> repo.
    pub domains: Vec<(String, vole_git::repos::RepoName)>,
}

impl SiteSettings {
    pub(crate) fn resolve(raw: &Settings) -> Result<SiteSettings, ConfigError> {
        Ok(SiteSettings {
            cache_bytes: size(
                "site-cache-size",
                raw.site_cache_size.as_deref(),
                defaults::SITE_CACHE_SIZE,
            )?,
            path_cache_entries: positive(
                "site-path-cache",
                raw.site_path_cache.unwrap_or(defaults::SITE_PATH_CACHE),
            )?,
            stream_threshold: size(
                "site-stream-threshold",
                raw.site_stream_threshold.as_deref(),
                defaults::SITE_STREAM_THRESHOLD,
            )?,
            cache_control: raw
                .site_cache_control
                .clone()
                .unwrap_or_else(|| defaults::SITE_CACHE_CONTROL.to_string()),
            domains: raw
                .site_domains
                .clone()
                .unwrap_or_default()
                .iter()
                .map(|entry| site_domain(entry))
                .collect::<Result<_, _>>()?,
        })
    }
}

fn site_domain(entry: &str) -> Result<(String, vole_git::repos::RepoName), ConfigError> {
    let invalid = |reason: String| ConfigError::Invalid {
        setting: "site-domain",
        value: entry.to_string(),
        reason,
    };
    let (host, repo) = entry
        .split_once('=')
        .ok_or_else(|| invalid("write HOST=owner/repo, e.g. docs.example.org=alice/docs".into()))?;
    let repo = vole_git::repos::RepoName::parse(repo.trim()).map_err(|e| invalid(e.to_string()))?;
    Ok((host.trim().to_ascii_lowercase(), repo))
}
