//! Configuration in two phases: the raw settings as given (flags and `VOLE_*`
//! environment, parsed by clap in `vole`'s `cli`, and an optional `vole.toml`),
//! then one validated [`Config`] with every default filled in.
//!
//! Precedence, highest first: command-line flag, environment variable, config
//! file, built-in default. Every default is documented once, here, on
//! [`Settings`]; `vole serve --help` prints the same text.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

mod auth;
mod branches;
mod caches;
pub mod defaults;
mod meta;
mod pack_cache;
mod reads;
mod server;
mod settings;
mod sites;
mod transport;
mod values;

pub use auth::{AuthSettings, QuotaSettings};
pub use caches::CacheSettings;
pub use pack_cache::PackCacheSettings;
pub use reads::ReadLimits;
pub use settings::Settings;
pub use sites::SiteSettings;
pub use transport::TransportLimits;

/// The validated configuration every part of vole reads.
#[derive(Debug, Clone)]
pub struct Config {
    pub data_dir: PathBuf,
    pub listen: SocketAddr,
    /// `None`: no metrics listener (`off`).
    pub metrics_listen: Option<SocketAddr>,
    /// `None`: the first `git` on `PATH`.
    pub git: Option<PathBuf>,
    pub default_branch: String,
    pub shutdown_grace: Duration,
    pub quarantine_max_age: Duration,
    pub anonymous_push: bool,
    pub auth: AuthSettings,
    pub quotas: QuotaSettings,
    pub pack_cache: PackCacheSettings,
    /// Branch names protected in every repo (until repo settings hold them).
    pub protected_branches: Vec<String>,
    pub meta_fold_interval: Duration,
    pub meta_fold_batch: usize,
    /// How long a start reads metadata before it serves.
    pub meta_read_at_open: Duration,
    /// Log size past which the server compacts it by itself; 0: never.
    pub meta_log_compact_size: u64,
    pub ref_log_compact_size: u64,
    pub api_body_limit: u64,
    pub transport: TransportLimits,
    pub sites: SiteSettings,
    pub reads: ReadLimits,
    pub caches: CacheSettings,
    pub max_connections: usize,
    /// Peers whose `X-Forwarded-For` is believed (`access::client`).
    pub trusted_proxies: Vec<ipnet::IpNet>,
    /// `--webhook-allow`: the loopback, link-local, private or unique-local
    /// networks a webhook may target (none by default).
    pub webhook_allow: Vec<ipnet::IpNet>,
    /// `--webhook-retry`: the delays between a delivery's attempts.
    pub webhook_retry: Vec<std::time::Duration>,
    /// `--webhook-timeout`: one delivery's time at most.
    pub webhook_timeout: std::time::Duration,
    /// `scheme://host[:port]`, no trailing slash.
    pub public_url: Option<String>,
}

/// A setting that cannot be used, named so the operator can fix it.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config file {path}: {source}")]
    ReadFile {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("config file {path} is not valid: {message}")]
    ParseFile { path: PathBuf, message: String },
    #[error("{setting} = {value:?} is not valid: {reason}")]
    Invalid {
        setting: &'static str,
        value: String,
        reason: String,
    },
}

impl Config {
    /// Resolves flags/env over the config file over the defaults.
    ///
    /// `config_file`: the file named by `--config`/`VOLE_CONFIG` (must exist),
    /// or `None` to use `./vole.toml` when it exists.
    pub fn resolve(flags: Settings, config_file: Option<&Path>) -> Result<Config, ConfigError> {
        let file = match config_file {
            Some(path) => read_file(path)?,
            None if Path::new(defaults::CONFIG_FILE).is_file() => {
                read_file(Path::new(defaults::CONFIG_FILE))?
            }
            None => Settings::default(),
        };
        let raw = flags.or(file);
        // Each group in the order its errors are reported.
        let quotas = QuotaSettings::resolve(&raw)?;
        let listen = server::listen(&raw)?;
        let metrics_listen = server::metrics_listen(&raw)?;
        let default_branch = branches::default_branch(&raw)?;
        let protected_branches = branches::protected_branches(&raw)?;
        Ok(Config {
            listen,
            metrics_listen,
            default_branch,
            shutdown_grace: server::shutdown_grace(&raw)?,
            quarantine_max_age: values::duration(
                "quarantine-max-age",
                raw.quarantine_max_age.as_deref(),
                defaults::QUARANTINE_MAX_AGE,
            )?,
            anonymous_push: raw.anonymous_push.unwrap_or(false),
            auth: AuthSettings::resolve(&raw)?,
            quotas,
            pack_cache: PackCacheSettings::resolve(&raw)?,
            protected_branches,
            meta_fold_interval: meta::meta_fold_interval(&raw)?,
            meta_fold_batch: meta::meta_fold_batch(&raw)?,
            meta_read_at_open: meta::meta_read_at_open(&raw)?,
            meta_log_compact_size: meta::meta_log_compact_size(&raw)?,
            ref_log_compact_size: meta::ref_log_compact_size(&raw)?,
            api_body_limit: meta::api_body_limit(&raw)?,
            sites: SiteSettings::resolve(&raw)?,
            transport: TransportLimits::resolve(&raw)?,
            reads: ReadLimits::resolve(&raw)?,
            max_connections: server::max_connections(&raw)?,
            trusted_proxies: server::trusted_proxies(&raw)?,
            webhook_allow: server::webhook_allow(&raw)?,
            webhook_retry: server::webhook_retry(&raw)?,
            webhook_timeout: crate::values::positive_duration(
                "webhook-timeout",
                raw.webhook_timeout.as_deref(),
                defaults::WEBHOOK_TIMEOUT,
            )?,
            public_url: server::public_url_of(&raw)?,
            caches: CacheSettings::resolve(&raw)?,
            data_dir: raw.data.unwrap_or_else(|| defaults::DATA_DIR.into()),
            git: raw.git,
        })
    }
}

fn read_file(path: &Path) -> Result<Settings, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|source| ConfigError::ReadFile {
        path: path.to_path_buf(),
        source,
    })?;
    toml::from_str(&text).map_err(|e| ConfigError::ParseFile {
        path: path.to_path_buf(),
        message: e.message().to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_win_over_file_and_defaults_fill_the_rest() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("vole.toml");
        std::fs::write(
            &file,
            "listen = \"127.0.0.1:9000\"\ndefault-branch = \"trunk\"\ndata = \"/srv/vole\"\n",
        )
        .unwrap();
        let flags = Settings {
            listen: Some("127.0.0.1:9001".into()),
            ..Settings::default()
        };
        let config = Config::resolve(flags, Some(&file)).unwrap();
        assert_eq!(
            config.listen.port(),
            9001,
            "the flag must win over the file"
        );
        assert_eq!(
            config.default_branch, "trunk",
            "the file must win over the default"
        );
        assert_eq!(config.data_dir, PathBuf::from("/srv/vole"));
        assert_eq!(config.shutdown_grace, Duration::from_secs(30));
    }

    #[test]
    fn an_unknown_key_in_the_file_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("vole.toml");
        std::fs::write(&file, "lissen = \"x\"\n").unwrap();
        let err = Config::resolve(Settings::default(), Some(&file)).unwrap_err();
        assert!(err.to_string().contains("lissen"), "{err}");
    }

    #[test]
    fn public_url_and_trusted_proxies_are_checked() {
        let with = |public: Option<&str>, proxies: &[&str]| {
            let settings = Settings {
                public_url: public.map(str::to_string),
                trusted_proxies: Some(proxies.iter().map(|p| p.to_string()).collect()),
                ..Settings::default()
            };
            Config::resolve(settings, None)
        };
        let config = with(
            Some("https://git.example.org/"),
            &["10.0.0.0/8", "192.0.2.1"],
        )
        .unwrap();
        assert_eq!(
            config.public_url.as_deref(),
            Some("https://git.example.org")
        );
        assert_eq!(config.trusted_proxies.len(), 2);
        for bad in [
            "git.example.org",
            "ftp://x",
            "https://x/forge",
            "https://x/?a=1",
        ] {
            assert!(with(Some(bad), &[]).is_err(), "{bad}");
        }
        assert!(with(None, &["10.0.0.0/33"]).is_err());
        assert!(with(None, &["proxy.local"]).is_err());
    }

    #[test]
    fn webhook_allow_takes_networks_and_addresses_and_names_a_bad_one() {
        let with = |networks: &[&str]| {
            let settings = Settings {
                webhook_allow: Some(networks.iter().map(|p| p.to_string()).collect()),
                ..Settings::default()
            };
            Config::resolve(settings, None)
        };
        let config = with(&["127.0.0.0/8", "::1", "10.1.2.3"]).unwrap();
        assert_eq!(config.webhook_allow.len(), 3);
        assert!(
            Config::resolve(Settings::default(), None)
                .unwrap()
                .webhook_allow
                .is_empty()
        );
        let err = with(&["localhost"]).unwrap_err();
        assert!(err.to_string().contains("webhook-allow"), "{err}");
    }

    #[test]
    fn sizes_take_binary_units() {
        let flags = Settings {
            max_push_size: Some("512MiB".into()),
            ..Settings::default()
        };
        let config = Config::resolve(flags, None).unwrap();
        assert_eq!(config.transport.max_push_size, 512 << 20);
        assert_eq!(config.transport.max_request_size, 64 << 20);
        let bad = Settings {
            max_push_size: Some("lots".into()),
            ..Settings::default()
        };
        let err = Config::resolve(bad, None).unwrap_err().to_string();
        assert!(
            err.contains("max-push-size") && err.contains("512MiB"),
            "{err}"
        );
    }

    #[test]
    fn quotas_have_defaults_and_0_is_no_limit() {
        let config = Config::resolve(Settings::default(), None).unwrap();
        assert_eq!(config.quotas.max_repos_per_user, Some(1000));
        assert_eq!(config.quotas.meta_write_rate.map(|n| n.get()), Some(600));
        assert_eq!(config.quotas.max_meta_bytes_per_user, Some(64 << 20));
        let off = Settings {
            max_repos_per_user: Some(0),
            meta_write_rate: Some(0),
            max_meta_bytes_per_user: Some("0".into()),
            ..Settings::default()
        };
        let config = Config::resolve(off, None).unwrap();
        assert_eq!(config.quotas.max_repos_per_user, None);
        assert_eq!(config.quotas.meta_write_rate, None);
        assert_eq!(config.quotas.max_meta_bytes_per_user, None);
    }

    #[test]
    fn the_cache_bounds_have_defaults_and_read_a_set_value() {
        let config = Config::resolve(Settings::default(), None).unwrap();
        assert_eq!(config.caches.web_cache_bytes, 16 << 20);
        assert_eq!(config.caches.max_open_repos, 1024);
        assert_eq!(config.sites.path_cache_entries, 100_000);
        assert_eq!(config.reads.binary_verdicts, 16_384);
        let set = Settings {
            web_cache_size: Some("4MiB".into()),
            max_open_repos: Some(64),
            site_path_cache: Some(500),
            binary_verdicts: Some(32),
            ..Settings::default()
        };
        let config = Config::resolve(set, None).unwrap();
        assert_eq!(config.caches.web_cache_bytes, 4 << 20);
        assert_eq!(config.caches.max_open_repos, 64);
        assert_eq!(config.sites.path_cache_entries, 500);
        assert_eq!(config.reads.binary_verdicts, 32);
        for (setting, zero) in [
            (
                "max-open-repos",
                Settings {
                    max_open_repos: Some(0),
                    ..Settings::default()
                },
            ),
            (
                "site-path-cache",
                Settings {
                    site_path_cache: Some(0),
                    ..Settings::default()
                },
            ),
            (
                "binary-verdicts",
                Settings {
                    binary_verdicts: Some(0),
                    ..Settings::default()
                },
            ),
        ] {
            let err = Config::resolve(zero, None).unwrap_err().to_string();
            assert!(err.contains(setting), "{err}");
        }
    }

    #[test]
    fn a_bad_duration_says_how_to_write_one() {
        let flags = Settings {
            shutdown_grace: Some("soon".into()),
            ..Settings::default()
        };
        let err = Config::resolve(flags, None).unwrap_err().to_string();
        assert!(
            err.contains("shutdown-grace") && err.contains("30s"),
            "{err}"
        );
    }
}
