//! The parsers every group shares: durations, sizes and counts, each
//! error naming its setting and how to write a valid value.

use std::time::Duration;

use crate::ConfigError;

pub(crate) fn duration(
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

/// A duration that must be more than nothing.
pub(crate) fn positive_duration(
    setting: &'static str,
    value: Option<&str>,
    default: &str,
) -> Result<Duration, ConfigError> {
    let parsed = duration(setting, value, default)?;
    if parsed.is_zero() {
        return Err(ConfigError::Invalid {
            setting,
            value: value.unwrap_or(default).to_string(),
            reason: "must be more than 0s".into(),
        });
    }
    Ok(parsed)
}

pub(crate) fn size(
    setting: &'static str,
    value: Option<&str>,
    default: &str,
) -> Result<u64, ConfigError> {
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

/// [`positive`] for the counts governor takes.
pub(crate) fn positive_u32(
    setting: &'static str,
    value: u32,
) -> Result<std::num::NonZeroU32, ConfigError> {
    std::num::NonZeroU32::new(value).ok_or(ConfigError::Invalid {
        setting,
        value: "0".into(),
        reason: "must be at least 1".into(),
    })
}

pub(crate) fn positive(setting: &'static str, value: usize) -> Result<usize, ConfigError> {
    if value == 0 {
        return Err(ConfigError::Invalid {
            setting,
            value: "0".into(),
            reason: "must be at least 1".into(),
        });
    }
    Ok(value)
}
