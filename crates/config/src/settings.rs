//! The raw settings as one source gave them (flags and environment through
//! clap, or the config file through serde), and how two sources layer.

use std::path::PathBuf;

use serde::Deserialize;

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

    /// Take an API token from the query string too (`?token=` or
    /// `?access_token=`, as some Gitea clients send it); off, such a
    /// request is refused, since a query string ends up in proxies' and
    /// browsers' logs [default: off].
    #[arg(long, env = "VOLE_API_QUERY_TOKENS", num_args = 0..=1, default_missing_value = "true", value_name = "BOOL")]
    pub api_query_tokens: Option<bool>,

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

    /// A browser's session ends when it was not used for this long
    /// [default: 14d].
    #[arg(long, env = "VOLE_SESSION_IDLE", value_name = "DURATION")]
    pub session_idle: Option<String>,

    /// A browser's session ends this long after its sign-in, used or not
    /// [default: 90d].
    #[arg(long, env = "VOLE_SESSION_ABSOLUTE", value_name = "DURATION")]
    pub session_absolute: Option<String>,

    /// Whether anyone may make an account at `/-/register` (`open`) or
    /// only an admin from the CLI (`closed`) [default: closed].
    #[arg(long, env = "VOLE_REGISTRATION", value_name = "closed|open")]
    pub registration: Option<String>,

    /// API requests one token (or one password-signed-in user) may make
    /// per minute; past it, 429 with Retry-After [default: 600].
    #[arg(long, env = "VOLE_API_RATE", value_name = "N")]
    pub api_rate: Option<u32>,

    /// Repositories one user may have under their name: creating one more
    /// through the API (`POST /api/v1/user/repos` and the admin and
    /// organization paths) gets 403 naming this setting (the CLI is not
    /// held to it); 0: no limit [default: 1000].
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
    /// measured; the window slides, so a download that starts fast and then
    /// crawls is cut one window after it slowed. What counts is what the
    /// client's TCP acknowledged (the buffers between take megabytes at
    /// first) [default: 30s].
    #[arg(long, env = "VOLE_MIN_TRANSFER_WINDOW", value_name = "DURATION")]
    pub min_transfer_window: Option<String>,

    /// Bytes of highlighted source kept in memory [default: 32MiB].
    #[arg(long, env = "VOLE_HIGHLIGHT_CACHE_SIZE", value_name = "SIZE")]
    pub highlight_cache_size: Option<String>,

    /// Blobs whose binary-or-text verdict the highlighter remembers, by
    /// count [default: 16384].
    #[arg(long, env = "VOLE_BINARY_VERDICTS", value_name = "N")]
    pub binary_verdicts: Option<usize>,

    /// Bytes of each cache of the web pages' git reads (the listings' last
    /// commits, logs, commits, blames) [default: 16MiB].
    #[arg(long, env = "VOLE_WEB_CACHE_SIZE", value_name = "SIZE")]
    pub web_cache_size: Option<String>,

    /// Repositories whose gix handles (and the files and mappings they
    /// hold) the web UI and sites keep open at once [default: 1024].
    #[arg(long, env = "VOLE_MAX_OPEN_REPOS", value_name = "N")]
    pub max_open_repos: Option<usize>,

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

    /// Addresses a webhook may target though they are loopback,
    /// link-local, private or unique-local (CIDR, e.g. 10.0.0.0/8); repeat
    /// for more, comma-separated in the environment [default: none: a hook
    /// reaches public addresses only].
    #[arg(
        long = "webhook-allow",
        env = "VOLE_WEBHOOK_ALLOW",
        value_delimiter = ',',
        value_name = "CIDR"
    )]
    pub webhook_allow: Option<Vec<String>>,

    /// How long a webhook delivery waits between its attempts, one delay
    /// per retry; after the last the hook is marked failing and tried
    /// again at the last delay [default: 1m,5m,30m,2h,6h].
    #[arg(
        long = "webhook-retry",
        env = "VOLE_WEBHOOK_RETRY",
        value_delimiter = ',',
        value_name = "DURATIONS"
    )]
    pub webhook_retry: Option<Vec<String>>,

    /// How long one webhook delivery may take, connection to the end of
    /// the answer [default: 10s].
    #[arg(long, env = "VOLE_WEBHOOK_TIMEOUT", value_name = "DURATION")]
    pub webhook_timeout: Option<String>,

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

    /// How long a start waits for the background read of the repos'
    /// issues, pull requests and comments before it serves; what is left
    /// is read on in the background
    /// (a request that needs it meanwhile is answered 503 with
    /// `Retry-After`) [default: 250ms].
    #[arg(long, env = "VOLE_META_READ_AT_OPEN", value_name = "DURATION")]
    pub meta_read_at_open: Option<String>,

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

    /// Site paths remembered resolved, by count, in each of the sites'
    /// two path caches (by tree and by request) [default: 100000].
    #[arg(long, env = "VOLE_SITE_PATH_CACHE", value_name = "N")]
    pub site_path_cache: Option<usize>,

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
    pub(crate) fn or(self, lower: Settings) -> Settings {
        Settings {
            listen: self.listen.or(lower.listen),
            metrics_listen: self.metrics_listen.or(lower.metrics_listen),
            default_branch: self.default_branch.or(lower.default_branch),
            shutdown_grace: self.shutdown_grace.or(lower.shutdown_grace),
            quarantine_max_age: self.quarantine_max_age.or(lower.quarantine_max_age),
            anonymous_push: self.anonymous_push.or(lower.anonymous_push),
            password_auth: self.password_auth.or(lower.password_auth),
            api_query_tokens: self.api_query_tokens.or(lower.api_query_tokens),
            auth_failures: self.auth_failures.or(lower.auth_failures),
            auth_failure_window: self.auth_failure_window.or(lower.auth_failure_window),
            session_idle: self.session_idle.or(lower.session_idle),
            session_absolute: self.session_absolute.or(lower.session_absolute),
            registration: self.registration.or(lower.registration),
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
            meta_read_at_open: self.meta_read_at_open.or(lower.meta_read_at_open),
            meta_log_compact_size: self.meta_log_compact_size.or(lower.meta_log_compact_size),
            ref_log_compact_size: self.ref_log_compact_size.or(lower.ref_log_compact_size),
            api_body_limit: self.api_body_limit.or(lower.api_body_limit),
            site_cache_size: self.site_cache_size.or(lower.site_cache_size),
            site_path_cache: self.site_path_cache.or(lower.site_path_cache),
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
            binary_verdicts: self.binary_verdicts.or(lower.binary_verdicts),
            web_cache_size: self.web_cache_size.or(lower.web_cache_size),
            max_open_repos: self.max_open_repos.or(lower.max_open_repos),
            max_connections: self.max_connections.or(lower.max_connections),
            trusted_proxies: self.trusted_proxies.or(lower.trusted_proxies),
            webhook_allow: self.webhook_allow.or(lower.webhook_allow),
            webhook_retry: self.webhook_retry.or(lower.webhook_retry),
            webhook_timeout: self.webhook_timeout.or(lower.webhook_timeout),
            public_url: self.public_url.or(lower.public_url),
            header_read_timeout: self.header_read_timeout.or(lower.header_read_timeout),
            body_idle_timeout: self.body_idle_timeout.or(lower.body_idle_timeout),
            data: self.data.or(lower.data),
            git: self.git.or(lower.git),
        }
    }
}
