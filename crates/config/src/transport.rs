//! The bounds of the smart-HTTP transport: body sizes, the spool, the git
//! children of clones and pushes, and how long a client may take.

use std::time::Duration;

use crate::values::{duration, positive, size};
use crate::{ConfigError, Settings, defaults};

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

impl TransportLimits {
    pub(crate) fn resolve(raw: &Settings) -> Result<TransportLimits, ConfigError> {
        Ok(TransportLimits {
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
        })
    }
}
