//! Configuration in two phases: the raw settings as given (flags and `VOLE_*`
//! environment, parsed by clap in [`vole::cli`], and an optional `vole.toml`),
//! then one validated [`Config`] with every default filled in.
//!
//! Precedence, highest first: command-line flag, environment variable, config
//! file, built-in default. Every default is documented once, here, on
//! [`Settings`]; `vole serve --help` prints the same text.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

/// Built-in defaults.
pub mod defaults {
    pub const DATA_DIR: &str = "./data";
    pub const LISTEN: &str = "127.0.0.1:8080";
    pub const METRICS_LISTEN: &str = "127.0.0.1:9090";
    pub const DEFAULT_BRANCH: &str = "main";
    pub const SHUTDOWN_GRACE: &str = "30s";
    pub const QUARANTINE_MAX_AGE: &str = "1h";
    pub const CONFIG_FILE: &str = "vole.toml";
    pub const META_FOLD_INTERVAL: &str = "1s";
    pub const META_FOLD_BATCH: usize = 64;
    pub const META_LOG_COMPACT_SIZE: &str = "64MiB";
    pub const REF_LOG_COMPACT_SIZE: &str = "0";
    pub const API_BODY_LIMIT: &str = "1MiB";
    pub const MAX_PUSH_SIZE: &str = "2GiB";
    /// GitHub's hard limit for one file.
    pub const MAX_BLOB_SIZE: &str = "100MiB";
    pub const MAX_REQUEST_SIZE: &str = "64MiB";
    pub const MAX_SPOOL_TOTAL: &str = "8GiB";
    pub const QUEUE_TIMEOUT: &str = "10s";
    pub const HEADER_READ_TIMEOUT: &str = "30s";
    pub const BODY_IDLE_TIMEOUT: &str = "60s";
    pub const SITE_CACHE_SIZE: &str = "64MiB";
    pub const SITE_STREAM_THRESHOLD: &str = "8MiB";
    pub const SITE_CACHE_CONTROL: &str = "public, max-age=60";
    pub const READ_DEADLINE: &str = "60s";
    pub const ARCHIVE_DEADLINE: &str = "10m";
    pub const MIN_TRANSFER_RATE: &str = "4KiB";
    /// The window a transfer's rate is measured over.
    pub const MIN_TRANSFER_WINDOW: &str = "30s";
    pub const HIGHLIGHT_CACHE_SIZE: &str = "32MiB";
    pub const MAX_CONNECTIONS: usize = 4096;
    pub const AUTH_FAILURES: u32 = 10;
    pub const AUTH_FAILURE_WINDOW: &str = "5m";
    pub const API_RATE: u32 = 600;
    pub const PACK_CACHE_SIZE: &str = "1GiB";
    pub const PACK_CACHE_MAX_AGE: &str = "5m";
    pub const PACK_CACHE_MIN_FREE: &str = "1GiB";
    pub const MAX_REPOS_PER_USER: u64 = 1000;
    pub const META_WRITE_RATE: u32 = 600;
    pub const MAX_META_BYTES_PER_USER: &str = "64MiB";

    /// Concurrent read-side git children (log, show, archive, blob
    /// streams): 2 per core.
    pub fn read_slots() -> usize {
        2 * cores()
    }

    /// Concurrent upload-pack children (clone/fetch): 2 per core, at least 4.
    pub fn upload_pack_limit() -> usize {
        (2 * cores()).max(4)
    }

    /// Concurrent receive-pack children (push): 1 per core, at least 2.
    pub fn receive_pack_limit() -> usize {
        cores().max(2)
    }

    /// Cores this process may use (1 when the OS cannot say): what every
    /// per-core default and bound is counted in.
    pub fn cores() -> usize {
        std::thread::available_parallelism().map_or(1, |n| n.get())
    }
}

/// Raw settings: what one source (flags+env, or the config file) said.
/// `None` means "this source did not say".
#[derive(Debug, Default, Clone, Deserialize, clap::Args)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Settings {
    /// Address the HTTP server listens on [default: 127.0.0.1:8080].
    #[arg(long, env = "VOLE_LISTEN", value_name = "ADDR")]
    pub listen: Option<String>,

    /// Address of the metrics listener (`GET /metrics`, no sign-in: keep it
    /// on loopback or a private network), or `off`; server admins can also
    /// read `/metrics` on the main address [default: 127.0.0.1:9090].
    #[arg(long, env = "VOLE_METRICS_LISTEN", value_name = "ADDR")]
    pub metrics_listen: Option<String>,

    /// Branch HEAD points at in a newly created repository [default: main].
    #[arg(long, env = "VOLE_DEFAULT_BRANCH", value_name = "NAME")]
    pub default_branch: Option<String>,

    /// How long a stopping server waits for in-flight requests before it
    /// exits anyway [default: 30s].
    #[arg(long, env = "VOLE_SHUTDOWN_GRACE", value_name = "DURATION")]
    pub shutdown_grace: Option<String>,

    /// Age after which git's leftover quarantine directories
    /// (`objects/tmp_objdir-incoming-*`) are removed at start [default: 1h].
    #[arg(long, env = "VOLE_QUARANTINE_MAX_AGE", value_name = "DURATION")]
    pub quarantine_max_age: Option<String>,

    /// Allow pushes without an account (development only; a warning is logged
    /// at start) [default: off].
    #[arg(long, env = "VOLE_ANONYMOUS_PUSH", num_args = 0..=1, default_missing_value = "true", value_name = "BOOL")]
    pub anonymous_push: Option<bool>,

    /// Accept a user's password in HTTP Basic, not only a token (git and
    /// the API) [default: off].
    #[arg(long, env = "VOLE_PASSWORD_AUTH", num_args = 0..=1, default_missing_value = "true", value_name = "BOOL")]
    pub password_auth: Option<bool>,

    /// Failed sign-ins one client address (and, separately, one user name
    /// from one address) may make per --auth-failure-window; past it,
    /// passwords and refused tokens from there get 429 with Retry-After (a
    /// valid token still works) [default: 10].
    #[arg(long, env = "VOLE_AUTH_FAILURES", value_name = "N")]
    pub auth_failures: Option<u32>,

    /// The window --auth-failures is counted over (it refills evenly)
    /// [default: 5m].
    #[arg(long, env = "VOLE_AUTH_FAILURE_WINDOW", value_name = "DURATION")]
    pub auth_failure_window: Option<String>,

    /// API requests one token (or one password-signed-in user) may make
    /// per minute; past it, 429 with Retry-After [default: 600].
    #[arg(long, env = "VOLE_API_RATE", value_name = "N")]
    pub api_rate: Option<u32>,

    /// Repositories one user may have under their name: creating one more
    /// through the API (`POST /api/v1/repos`) gets 403 naming this
    /// setting (the CLI is not held to it); 0: no limit [default: 1000].
    #[arg(long, env = "VOLE_MAX_REPOS_PER_USER", value_name = "N")]
    pub max_repos_per_user: Option<u64>,

    /// Metadata writes (issues, change requests, comments, ACL, settings)
    /// one user may make through the API per minute; past it, 429 with
    /// Retry-After naming this setting; 0: no limit [default: 600].
    #[arg(long, env = "VOLE_META_WRITE_RATE", value_name = "N")]
    pub meta_write_rate: Option<u32>,

    /// Bytes of metadata one user may have authored in one repo (the
    /// titles, bodies and labels of their issues, change requests and
    /// comments, as they stand); a write that would take them past it gets
    /// 403 naming this setting; 0: no limit [default: 64MiB].
    #[arg(long, env = "VOLE_MAX_META_BYTES_PER_USER", value_name = "SIZE")]
    pub max_meta_bytes_per_user: Option<String>,

    /// Bytes of packs kept on disk (`data/cache/packs`) for repeated
    /// identical clones and fetches; 0 turns the pack cache off
    /// [default: 1GiB].
    #[arg(long, env = "VOLE_PACK_CACHE_SIZE", value_name = "SIZE")]
    pub pack_cache_size: Option<String>,

    /// A cached pack older than this is not served again [default: 5m].
    #[arg(long, env = "VOLE_PACK_CACHE_MAX_AGE", value_name = "DURATION")]
    pub pack_cache_max_age: Option<String>,

    /// Free disk space the pack cache leaves: a pack is cached only when
    /// the disk keeps this much free beside it [default: 1GiB].
    #[arg(long, env = "VOLE_PACK_CACHE_MIN_FREE", value_name = "SIZE")]
    pub pack_cache_min_free: Option<String>,

    /// Largest push body accepted, e.g. 512MiB; larger pushes get 413
    /// [default: 2GiB].
    #[arg(long, env = "VOLE_MAX_PUSH_SIZE", value_name = "SIZE")]
    pub max_push_size: Option<String>,

    /// Largest file (blob) a push may carry, e.g. 50MiB; a push with a
    /// larger one is refused, naming its path [default: 100MiB].
    #[arg(long, env = "VOLE_MAX_BLOB_SIZE", value_name = "SIZE")]
    pub max_blob_size: Option<String>,

    /// Largest clone/fetch request body accepted [default: 64MiB].
    #[arg(long, env = "VOLE_MAX_REQUEST_SIZE", value_name = "SIZE")]
    pub max_request_size: Option<String>,

    /// Most request-body bytes spooled to disk at once, over all requests;
    /// beyond it new requests get 503 [default: 8GiB].
    #[arg(long, env = "VOLE_MAX_SPOOL_TOTAL", value_name = "SIZE")]
    pub max_spool_total: Option<String>,

    /// Concurrent clone/fetch git processes [default: 2 per core, at least 4].
    #[arg(long, env = "VOLE_UPLOAD_PACK_LIMIT", value_name = "N")]
    pub upload_pack_limit: Option<usize>,

    /// Concurrent push git processes [default: 1 per core, at least 2].
    #[arg(long, env = "VOLE_RECEIVE_PACK_LIMIT", value_name = "N")]
    pub receive_pack_limit: Option<usize>,

    /// How long a git request waits for a free process slot before it gets
    /// 503 with Retry-After [default: 10s].
    #[arg(long, env = "VOLE_QUEUE_TIMEOUT", value_name = "DURATION")]
    pub queue_timeout: Option<String>,

    /// Concurrent read-side git processes of the web UI and sites (log,
    /// show, archive, blob streams); beyond them requests wait, then get
    /// 503 [default: 2 per core].
    #[arg(long, env = "VOLE_READ_SLOTS", value_name = "N")]
    pub read_slots: Option<usize>,

    /// A read-side git process (log, show, blob streams) is killed after
    /// this long [default: 60s].
    #[arg(long, env = "VOLE_READ_DEADLINE", value_name = "DURATION")]
    pub read_deadline: Option<String>,

    /// An archive download is cut after this long [default: 10m].
    #[arg(long, env = "VOLE_ARCHIVE_DEADLINE", value_name = "DURATION")]
    pub archive_deadline: Option<String>,

    /// A download (clone, archive, raw file, site file) that the client
    /// takes slower than this per second, over --min-transfer-window, is
    /// cut and its slot freed [default: 4KiB].
    #[arg(long, env = "VOLE_MIN_TRANSFER_RATE", value_name = "SIZE")]
    pub min_transfer_rate: Option<String>,

    /// The time of waiting on a client over which --min-transfer-rate is
    /// measured [default: 30s].
    #[arg(long, env = "VOLE_MIN_TRANSFER_WINDOW", value_name = "DURATION")]
    pub min_transfer_window: Option<String>,

    /// Bytes of highlighted source kept in memory [default: 32MiB].
    #[arg(long, env = "VOLE_HIGHLIGHT_CACHE_SIZE", value_name = "SIZE")]
    pub highlight_cache_size: Option<String>,

    /// Open connections at most; beyond it new ones get 503 with
    /// Retry-After [default: 4096].
    #[arg(long, env = "VOLE_MAX_CONNECTIONS", value_name = "N")]
    pub max_connections: Option<usize>,

    /// A reverse proxy whose `X-Forwarded-For` names the client (CIDR,
    /// e.g. 10.0.0.0/8); repeat for more, comma-separated in the
    /// environment. From anyone else the header is ignored [default: none].
    #[arg(
        long = "trusted-proxy",
        env = "VOLE_TRUSTED_PROXIES",
        value_delimiter = ',',
        value_name = "CIDR"
    )]
    pub trusted_proxies: Option<Vec<String>>,

    /// The URL clients reach vole at (e.g. https://git.example.org), for
    /// clone URLs and links, instead of the request's Host header
    /// [default: the Host header].
    #[arg(long, env = "VOLE_PUBLIC_URL", value_name = "URL")]
    pub public_url: Option<String>,

    /// A client must send its request headers within this [default: 30s].
    #[arg(long, env = "VOLE_HEADER_READ_TIMEOUT", value_name = "DURATION")]
    pub header_read_timeout: Option<String>,

    /// A request body that sends nothing for this long is dropped; so is a
    /// response the client stops reading [default: 60s].
    #[arg(long, env = "VOLE_BODY_IDLE_TIMEOUT", value_name = "DURATION")]
    pub body_idle_timeout: Option<String>,

    /// Branch protected in every repo: no force-push, no delete. Repeat the
    /// flag for more; in the environment, comma-separated [default: none].
    #[arg(
        long = "protected-branch",
        env = "VOLE_PROTECTED_BRANCHES",
        value_delimiter = ',',
        value_name = "BRANCH"
    )]
    pub protected_branches: Option<Vec<String>>,

    /// A metadata write waits at most this long before it is folded into
    /// its shard's git ref [default: 1s].
    #[arg(long, env = "VOLE_META_FOLD_INTERVAL", value_name = "DURATION")]
    pub meta_fold_interval: Option<String>,

    /// Metadata writes per fold commit; a shard with this many pending is
    /// folded at once [default: 64].
    #[arg(long, env = "VOLE_META_FOLD_BATCH", value_name = "N")]
    pub meta_fold_batch: Option<usize>,

    /// Past this size the server compacts the meta log in the background
    /// (dropping the writes already folded into git), so start-up replays
    /// only the rest; 0: only `vole log compact` does [default: 64MiB].
    #[arg(long, env = "VOLE_META_LOG_COMPACT_SIZE", value_name = "SIZE")]
    pub meta_log_compact_size: Option<String>,

    /// Past this size the server compacts the ref log (a checkpoint of
    /// every ref, then the last 10,000 transactions); the ref log is the
    /// audit trail, so 0, the default, keeps it whole [default: 0].
    #[arg(long, env = "VOLE_REF_LOG_COMPACT_SIZE", value_name = "SIZE")]
    pub ref_log_compact_size: Option<String>,

    /// Largest JSON request body the API accepts [default: 1MiB].
    #[arg(long, env = "VOLE_API_BODY_LIMIT", value_name = "SIZE")]
    pub api_body_limit: Option<String>,

    /// Bytes of site content kept in memory [default: 64MiB].
    #[arg(long, env = "VOLE_SITE_CACHE_SIZE", value_name = "SIZE")]
    pub site_cache_size: Option<String>,

    /// Site files larger than this are streamed from git, never cached
    /// [default: 8MiB].
    #[arg(long, env = "VOLE_SITE_STREAM_THRESHOLD", value_name = "SIZE")]
    pub site_stream_threshold: Option<String>,

    /// Cache-Control of site responses [default: "public, max-age=60"].
    #[arg(long, env = "VOLE_SITE_CACHE_CONTROL", value_name = "VALUE")]
    pub site_cache_control: Option<String>,

    /// Serve a repo's site at the root of its own host: HOST=owner/repo.
    /// Repeat for more; in the environment, comma-separated [default: none].
    #[arg(
        long = "site-domain",
        env = "VOLE_SITE_DOMAINS",
        value_delimiter = ',',
        value_name = "HOST=OWNER/REPO"
    )]
    pub site_domains: Option<Vec<String>>,

    /// Data directory (repos, log, socket). Set in the file as `data`; on the
    /// command line it is the global `--data`.
    #[arg(skip)]
    pub data: Option<PathBuf>,

    /// git binary. Set in the file as `git`; on the command line it is the
    /// global `--git`.
    #[arg(skip)]
    pub git: Option<PathBuf>,
}

impl Settings {
    /// Fills every field this source left unset from `lower`.
    fn or(self, lower: Settings) -> Settings {
        Settings {
            listen: self.listen.or(lower.listen),
            metrics_listen: self.metrics_listen.or(lower.metrics_listen),
            default_branch: self.default_branch.or(lower.default_branch),
            shutdown_grace: self.shutdown_grace.or(lower.shutdown_grace),
            quarantine_max_age: self.quarantine_max_age.or(lower.quarantine_max_age),
            anonymous_push: self.anonymous_push.or(lower.anonymous_push),
            password_auth: self.password_auth.or(lower.password_auth),
            auth_failures: self.auth_failures.or(lower.auth_failures),
            auth_failure_window: self.auth_failure_window.or(lower.auth_failure_window),
            api_rate: self.api_rate.or(lower.api_rate),
            max_repos_per_user: self.max_repos_per_user.or(lower.max_repos_per_user),
            meta_write_rate: self.meta_write_rate.or(lower.meta_write_rate),
            max_meta_bytes_per_user: self
                .max_meta_bytes_per_user
                .or(lower.max_meta_bytes_per_user),
            pack_cache_size: self.pack_cache_size.or(lower.pack_cache_size),
            pack_cache_max_age: self.pack_cache_max_age.or(lower.pack_cache_max_age),
            pack_cache_min_free: self.pack_cache_min_free.or(lower.pack_cache_min_free),
            protected_branches: self.protected_branches.or(lower.protected_branches),
            meta_fold_interval: self.meta_fold_interval.or(lower.meta_fold_interval),
            meta_fold_batch: self.meta_fold_batch.or(lower.meta_fold_batch),
            meta_log_compact_size: self.meta_log_compact_size.or(lower.meta_log_compact_size),
            ref_log_compact_size: self.ref_log_compact_size.or(lower.ref_log_compact_size),
            api_body_limit: self.api_body_limit.or(lower.api_body_limit),
            site_cache_size: self.site_cache_size.or(lower.site_cache_size),
            site_stream_threshold: self.site_stream_threshold.or(lower.site_stream_threshold),
            site_cache_control: self.site_cache_control.or(lower.site_cache_control),
            site_domains: self.site_domains.or(lower.site_domains),
            max_push_size: self.max_push_size.or(lower.max_push_size),
            max_blob_size: self.max_blob_size.or(lower.max_blob_size),
            max_request_size: self.max_request_size.or(lower.max_request_size),
            max_spool_total: self.max_spool_total.or(lower.max_spool_total),
            upload_pack_limit: self.upload_pack_limit.or(lower.upload_pack_limit),
            receive_pack_limit: self.receive_pack_limit.or(lower.receive_pack_limit),
            queue_timeout: self.queue_timeout.or(lower.queue_timeout),
            read_slots: self.read_slots.or(lower.read_slots),
            read_deadline: self.read_deadline.or(lower.read_deadline),
            archive_deadline: self.archive_deadline.or(lower.archive_deadline),
            min_transfer_rate: self.min_transfer_rate.or(lower.min_transfer_rate),
            min_transfer_window: self.min_transfer_window.or(lower.min_transfer_window),
            highlight_cache_size: self.highlight_cache_size.or(lower.highlight_cache_size),
            max_connections: self.max_connections.or(lower.max_connections),
            trusted_proxies: self.trusted_proxies.or(lower.trusted_proxies),
            public_url: self.public_url.or(lower.public_url),
            header_read_timeout: self.header_read_timeout.or(lower.header_read_timeout),
            body_idle_timeout: self.body_idle_timeout.or(lower.body_idle_timeout),
            data: self.data.or(lower.data),
            git: self.git.or(lower.git),
        }
    }
}

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
    /// Log size past which the server compacts it by itself; 0: never.
    pub meta_log_compact_size: u64,
    pub ref_log_compact_size: u64,
    pub api_body_limit: u64,
    pub transport: TransportLimits,
    pub sites: SiteSettings,
    pub reads: ReadLimits,
    pub max_connections: usize,
    /// Peers whose `X-Forwarded-For` is believed (`access::client`).
    pub trusted_proxies: Vec<ipnet::IpNet>,
    /// `scheme://host[:port]`, no trailing slash.
    pub public_url: Option<String>,
}

/// What one user may make through the API (`None`: no limit).
#[derive(Debug, Clone)]
pub struct QuotaSettings {
    /// Repos under one user's name.
    pub max_repos_per_user: Option<u64>,
    /// Metadata writes per user per minute.
    pub meta_write_rate: Option<std::num::NonZeroU32>,
    /// Bytes of metadata one user authored in one repo.
    pub max_meta_bytes_per_user: Option<u64>,
}

/// The pack cache's bounds.
#[derive(Debug, Clone)]
pub struct PackCacheSettings {
    /// Bytes on disk; 0: no cache.
    pub max_bytes: u64,
    pub max_age: Duration,
    /// Free bytes a new entry must leave on the cache's disk.
    pub min_free: u64,
}

/// How credentials are taken, and how often they may fail.
#[derive(Debug, Clone)]
pub struct AuthSettings {
    /// HTTP Basic may carry a password, not only a token.
    pub password_auth: bool,
    /// Failures per address (and per user and address) per `failure_window`.
    pub failures: std::num::NonZeroU32,
    pub failure_window: Duration,
    /// API requests per token per minute.
    pub api_rate: std::num::NonZeroU32,
}

/// The bounds of read-side work: git children of the web UI and sites,
/// downloads, highlighting.
#[derive(Debug, Clone)]
pub struct ReadLimits {
    pub slots: usize,
    pub deadline: Duration,
    pub archive_deadline: Duration,
    /// Bytes per second a download must average over [`Self::rate_window`].
    pub min_rate: u64,
    pub rate_window: Duration,
    pub highlight_cache_bytes: u64,
}

/// How sites are served.
#[derive(Debug, Clone)]
pub struct SiteSettings {
    pub cache_bytes: u64,
    pub stream_threshold: u64,
    pub cache_control: String,
    /// Host (lower case, no port) -> repo.
    pub domains: Vec<(String, vole_git::repos::RepoName)>,
}

/// The bounds of the smart-HTTP transport.
#[derive(Debug, Clone)]
pub struct TransportLimits {
    pub max_push_size: u64,
    pub max_blob_size: u64,
    pub max_request_size: u64,
    pub max_spool_total: u64,
    pub upload_pack_limit: usize,
    pub receive_pack_limit: usize,
    pub queue_timeout: Duration,
    pub header_read_timeout: Duration,
    pub body_idle_timeout: Duration,
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
        let quotas = quota_settings(&raw)?;

        let listen_text = raw.listen.as_deref().unwrap_or(defaults::LISTEN);
        let listen = listen_text.parse().map_err(|_| ConfigError::Invalid {
            setting: "listen",
            value: listen_text.to_string(),
            reason: "expected IP:PORT, e.g. 127.0.0.1:8080".into(),
        })?;
        let metrics_text = raw
            .metrics_listen
            .as_deref()
            .unwrap_or(defaults::METRICS_LISTEN);
        let metrics_listen = match metrics_text {
            "off" => None,
            text => Some(text.parse().map_err(|_| ConfigError::Invalid {
                setting: "metrics-listen",
                value: text.to_string(),
                reason: "expected IP:PORT, e.g. 127.0.0.1:9090, or off".into(),
            })?),
        };
        let default_branch = raw
            .default_branch
            .unwrap_or_else(|| defaults::DEFAULT_BRANCH.to_string());
        validate_branch_name("default-branch", &default_branch)?;
        let protected_branches = raw.protected_branches.unwrap_or_default();
        for branch in &protected_branches {
            validate_branch_name("protected-branch", branch)?;
        }

        Ok(Config {
            data_dir: raw.data.unwrap_or_else(|| defaults::DATA_DIR.into()),
            listen,
            metrics_listen,
            git: raw.git,
            default_branch,
            shutdown_grace: duration(
                "shutdown-grace",
                raw.shutdown_grace.as_deref(),
                defaults::SHUTDOWN_GRACE,
            )?,
            quarantine_max_age: duration(
                "quarantine-max-age",
                raw.quarantine_max_age.as_deref(),
                defaults::QUARANTINE_MAX_AGE,
            )?,
            anonymous_push: raw.anonymous_push.unwrap_or(false),
            auth: AuthSettings {
                password_auth: raw.password_auth.unwrap_or(false),
                failures: positive_u32(
                    "auth-failures",
                    raw.auth_failures.unwrap_or(defaults::AUTH_FAILURES),
                )?,
                failure_window: duration(
                    "auth-failure-window",
                    raw.auth_failure_window.as_deref(),
                    defaults::AUTH_FAILURE_WINDOW,
                )?,
                api_rate: positive_u32("api-rate", raw.api_rate.unwrap_or(defaults::API_RATE))?,
            },
            quotas,
            pack_cache: PackCacheSettings {
                max_bytes: size(
                    "pack-cache-size",
                    raw.pack_cache_size.as_deref(),
                    defaults::PACK_CACHE_SIZE,
                )?,
                max_age: duration(
                    "pack-cache-max-age",
                    raw.pack_cache_max_age.as_deref(),
                    defaults::PACK_CACHE_MAX_AGE,
                )?,
                min_free: size(
                    "pack-cache-min-free",
                    raw.pack_cache_min_free.as_deref(),
                    defaults::PACK_CACHE_MIN_FREE,
                )?,
            },
            protected_branches,
            meta_fold_interval: duration(
                "meta-fold-interval",
                raw.meta_fold_interval.as_deref(),
                defaults::META_FOLD_INTERVAL,
            )?,
            meta_fold_batch: positive(
                "meta-fold-batch",
                raw.meta_fold_batch.unwrap_or(defaults::META_FOLD_BATCH),
            )?,
            meta_log_compact_size: size(
                "meta-log-compact-size",
                raw.meta_log_compact_size.as_deref(),
                defaults::META_LOG_COMPACT_SIZE,
            )?,
            ref_log_compact_size: size(
                "ref-log-compact-size",
                raw.ref_log_compact_size.as_deref(),
                defaults::REF_LOG_COMPACT_SIZE,
            )?,
            api_body_limit: size(
                "api-body-limit",
                raw.api_body_limit.as_deref(),
                defaults::API_BODY_LIMIT,
            )?,
            sites: SiteSettings {
                cache_bytes: size(
                    "site-cache-size",
                    raw.site_cache_size.as_deref(),
                    defaults::SITE_CACHE_SIZE,
                )?,
                stream_threshold: size(
                    "site-stream-threshold",
                    raw.site_stream_threshold.as_deref(),
                    defaults::SITE_STREAM_THRESHOLD,
                )?,
                cache_control: raw
                    .site_cache_control
                    .unwrap_or_else(|| defaults::SITE_CACHE_CONTROL.to_string()),
                domains: raw
                    .site_domains
                    .unwrap_or_default()
                    .iter()
                    .map(|entry| site_domain(entry))
                    .collect::<Result<_, _>>()?,
            },
            transport: TransportLimits {
                max_push_size: size(
                    "max-push-size",
                    raw.max_push_size.as_deref(),
                    defaults::MAX_PUSH_SIZE,
                )?,
                max_blob_size: size(
                    "max-blob-size",
                    raw.max_blob_size.as_deref(),
                    defaults::MAX_BLOB_SIZE,
                )?,
                max_request_size: size(
                    "max-request-size",
                    raw.max_request_size.as_deref(),
                    defaults::MAX_REQUEST_SIZE,
                )?,
                max_spool_total: size(
                    "max-spool-total",
                    raw.max_spool_total.as_deref(),
                    defaults::MAX_SPOOL_TOTAL,
                )?,
                upload_pack_limit: positive(
                    "upload-pack-limit",
                    raw.upload_pack_limit
                        .unwrap_or_else(defaults::upload_pack_limit),
                )?,
                receive_pack_limit: positive(
                    "receive-pack-limit",
                    raw.receive_pack_limit
                        .unwrap_or_else(defaults::receive_pack_limit),
                )?,
                queue_timeout: duration(
                    "queue-timeout",
                    raw.queue_timeout.as_deref(),
                    defaults::QUEUE_TIMEOUT,
                )?,
                header_read_timeout: duration(
                    "header-read-timeout",
                    raw.header_read_timeout.as_deref(),
                    defaults::HEADER_READ_TIMEOUT,
                )?,
                body_idle_timeout: duration(
                    "body-idle-timeout",
                    raw.body_idle_timeout.as_deref(),
                    defaults::BODY_IDLE_TIMEOUT,
                )?,
            },
            reads: ReadLimits {
                slots: positive(
                    "read-slots",
                    raw.read_slots.unwrap_or_else(defaults::read_slots),
                )?,
                deadline: duration(
                    "read-deadline",
                    raw.read_deadline.as_deref(),
                    defaults::READ_DEADLINE,
                )?,
                archive_deadline: duration(
                    "archive-deadline",
                    raw.archive_deadline.as_deref(),
                    defaults::ARCHIVE_DEADLINE,
                )?,
                min_rate: size(
                    "min-transfer-rate",
                    raw.min_transfer_rate.as_deref(),
                    defaults::MIN_TRANSFER_RATE,
                )?,
                rate_window: duration(
                    "min-transfer-window",
                    raw.min_transfer_window.as_deref(),
                    defaults::MIN_TRANSFER_WINDOW,
                )?,
                highlight_cache_bytes: size(
                    "highlight-cache-size",
                    raw.highlight_cache_size.as_deref(),
                    defaults::HIGHLIGHT_CACHE_SIZE,
                )?,
            },
            max_connections: positive(
                "max-connections",
                raw.max_connections.unwrap_or(defaults::MAX_CONNECTIONS),
            )?,
            trusted_proxies: raw
                .trusted_proxies
                .unwrap_or_default()
                .iter()
                .map(|text| {
                    text.trim().parse::<ipnet::IpNet>().or_else(|_| {
                        // A bare address is a network of one.
                        text.trim()
                            .parse::<std::net::IpAddr>()
                            .map(ipnet::IpNet::from)
                            .map_err(|_| ConfigError::Invalid {
                                setting: "trusted-proxy",
                                value: text.clone(),
                                reason: "expected a CIDR such as 10.0.0.0/8 or an IP address"
                                    .into(),
                            })
                    })
                })
                .collect::<Result<_, _>>()?,
            public_url: raw.public_url.map(|url| public_url(&url)).transpose()?,
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

fn duration(
    setting: &'static str,
    value: Option<&str>,
    default: &str,
) -> Result<Duration, ConfigError> {
    let text = value.unwrap_or(default);
    humantime::parse_duration(text).map_err(|e| ConfigError::Invalid {
        setting,
        value: text.to_string(),
        reason: format!("{e} (write e.g. 30s, 5m, 1h)"),
    })
}

fn size(setting: &'static str, value: Option<&str>, default: &str) -> Result<u64, ConfigError> {
    let text = value.unwrap_or(default);
    text.trim()
        .parse::<bytesize::ByteSize>()
        .map(|size| size.as_u64())
        .map_err(|e| ConfigError::Invalid {
            setting,
            value: text.to_string(),
            reason: format!("{e} (write e.g. 512MiB, 2GiB)"),
        })
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

/// The per-user quotas; 0 is no limit.
fn quota_settings(raw: &Settings) -> Result<QuotaSettings, ConfigError> {
    let bytes = size(
        "max-meta-bytes-per-user",
        raw.max_meta_bytes_per_user.as_deref(),
        defaults::MAX_META_BYTES_PER_USER,
    )?;
    Ok(QuotaSettings {
        max_repos_per_user: Some(
            raw.max_repos_per_user
                .unwrap_or(defaults::MAX_REPOS_PER_USER),
        )
        .filter(|n| *n > 0),
        meta_write_rate: std::num::NonZeroU32::new(
            raw.meta_write_rate.unwrap_or(defaults::META_WRITE_RATE),
        ),
        max_meta_bytes_per_user: Some(bytes).filter(|n| *n > 0),
    })
}

/// [`positive`] for the counts governor takes.
fn positive_u32(setting: &'static str, value: u32) -> Result<std::num::NonZeroU32, ConfigError> {
    std::num::NonZeroU32::new(value).ok_or(ConfigError::Invalid {
        setting,
        value: "0".into(),
        reason: "must be at least 1".into(),
    })
}

fn positive(setting: &'static str, value: usize) -> Result<usize, ConfigError> {
    if value == 0 {
        return Err(ConfigError::Invalid {
            setting,
            value: "0".into(),
            reason: "must be at least 1".into(),
        });
    }
    Ok(value)
}

/// `https://host[:port]` (or http), without a path, query or trailing slash.
fn public_url(text: &str) -> Result<String, ConfigError> {
    let invalid = |reason: &str| ConfigError::Invalid {
        setting: "public-url",
        value: text.to_string(),
        reason: reason.into(),
    };
    let url = url::Url::parse(text).map_err(|_| invalid("not a URL"))?;
    let scheme = url.scheme();
    if scheme != "http" && scheme != "https" {
        return Err(invalid("needs http:// or https://"));
    }
    let host = url.host_str().ok_or_else(|| invalid("needs a host"))?;
    if url.path() != "/" || url.query().is_some() || url.fragment().is_some() {
        return Err(invalid("vole is served at the root: no path or query"));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(invalid("no user or password in it"));
    }
    Ok(match url.port() {
        Some(port) => format!("{scheme}://{host}:{port}"),
        None => format!("{scheme}://{host}"),
    })
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
