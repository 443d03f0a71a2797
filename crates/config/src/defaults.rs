//! Built-in defaults: every setting's value when no flag, environment
//! variable or config file line sets it.

pub const DATA_DIR: &str = "./data";
pub const LISTEN: &str = "127.0.0.1:8080";
pub const METRICS_LISTEN: &str = "127.0.0.1:9090";
pub const DEFAULT_BRANCH: &str = "main";
pub const SHUTDOWN_GRACE: &str = "30s";
pub const QUARANTINE_MAX_AGE: &str = "1h";
pub const CONFIG_FILE: &str = "vole.toml";
pub const META_FOLD_INTERVAL: &str = "1s";
/// How long a start reads metadata before it serves (the rest is read in
/// the background).
pub const META_READ_AT_OPEN: &str = "250ms";
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
pub const WEB_CACHE_SIZE: &str = "16MiB";
pub const MAX_OPEN_REPOS: usize = 1024;
pub const SITE_PATH_CACHE: usize = 100_000;
pub const BINARY_VERDICTS: usize = 16_384;
pub const MAX_CONNECTIONS: usize = 4096;
pub const AUTH_FAILURES: u32 = 10;
pub const AUTH_FAILURE_WINDOW: &str = "5m";
pub const API_RATE: u32 = 600;
pub const SESSION_IDLE: &str = "14d";
pub const SESSION_ABSOLUTE: &str = "90d";
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
pub const WEBHOOK_RETRY: &str = "1m,5m,30m,2h,6h";
pub const WEBHOOK_TIMEOUT: &str = "10s";
