//! The pack cache's bounds: its bytes on disk, the age of a servable pack,
//! the free space it leaves.

use std::time::Duration;

use crate::values::{duration, size};
use crate::{ConfigError, Settings, defaults};

/// The pack cache's bounds.
#[derive(Debug, Clone)]
pub struct PackCacheSettings {
    /// Bytes on disk; 0: no cache.
    pub max_bytes: u64,
    pub max_age: Duration,
    /// Free bytes a new entry must leave on the cache's disk.
    pub min_free: u64,
}

impl PackCacheSettings {
    pub(crate) fn resolve(raw: &Settings) -> Result<PackCacheSettings, ConfigError> {
        Ok(PackCacheSettings {
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
        })
    }
}
