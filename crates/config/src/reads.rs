//! The bounds of read-side work: the git children of the web UI and sites,
//! their deadlines, the slowest download kept, and the highlighter's cache.

use std::time::Duration;

use crate::values::{duration, positive, size};
use crate::{ConfigError, Settings, defaults};

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
    /// Blobs whose binary verdict the highlighter remembers.
    pub binary_verdicts: usize,
}

impl ReadLimits {
    pub(crate) fn resolve(raw: &Settings) -> Result<ReadLimits, ConfigError> {
        Ok(ReadLimits {
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
            binary_verdicts: positive(
                "binary-verdicts",
                raw.binary_verdicts.unwrap_or(defaults::BINARY_VERDICTS),
            )?,
        })
    }
}
