//! The metadata store and the logs: how writes are folded into git, when
//! the server compacts the logs, and the API's body limit.

use std::time::Duration;

use crate::values::{duration, positive, size};
use crate::{ConfigError, Settings, defaults};

pub(crate) fn meta_fold_interval(raw: &Settings) -> Result<Duration, ConfigError> {
    duration(
        "meta-fold-interval",
        raw.meta_fold_interval.as_deref(),
        defaults::META_FOLD_INTERVAL,
    )
}

pub(crate) fn meta_read_at_open(raw: &Settings) -> Result<Duration, ConfigError> {
    duration(
        "meta-read-at-open",
        raw.meta_read_at_open.as_deref(),
        defaults::META_READ_AT_OPEN,
    )
}

pub(crate) fn meta_fold_batch(raw: &Settings) -> Result<usize, ConfigError> {
    positive(
        "meta-fold-batch",
        raw.meta_fold_batch.unwrap_or(defaults::META_FOLD_BATCH),
    )
}

pub(crate) fn meta_log_compact_size(raw: &Settings) -> Result<u64, ConfigError> {
    size(
        "meta-log-compact-size",
        raw.meta_log_compact_size.as_deref(),
        defaults::META_LOG_COMPACT_SIZE,
    )
}

pub(crate) fn ref_log_compact_size(raw: &Settings) -> Result<u64, ConfigError> {
    size(
        "ref-log-compact-size",
        raw.ref_log_compact_size.as_deref(),
        defaults::REF_LOG_COMPACT_SIZE,
    )
}

pub(crate) fn api_body_limit(raw: &Settings) -> Result<u64, ConfigError> {
    size(
        "api-body-limit",
        raw.api_body_limit.as_deref(),
        defaults::API_BODY_LIMIT,
    )
}
