//! Sign-in and the per-user quotas: how credentials are taken, how often
//! they may fail, and what one user may make through the API.

use std::time::Duration;

use crate::values::{duration, positive_duration, positive_u32, size};
use crate::{ConfigError, Settings, defaults};

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

/// How credentials are taken, and how often they may fail.
#[derive(Debug, Clone)]
pub struct AuthSettings {
    /// HTTP Basic may carry a password, not only a token.
    pub password_auth: bool,
    /// The API takes a token from `?token=` or `?access_token=` too.
    pub api_query_tokens: bool,
    /// Failures per address (and per user and address) per `failure_window`.
    pub failures: std::num::NonZeroU32,
    pub failure_window: Duration,
    /// API requests per token per minute.
    pub api_rate: std::num::NonZeroU32,
    /// A browser session ends unused for this long...
    pub session_idle: Duration,
    /// ...or this long after it began.
    pub session_absolute: Duration,
    /// Anyone may make an account in the browser (`--registration open`).
    pub registration_open: bool,
}

impl AuthSettings {
    pub(crate) fn resolve(raw: &Settings) -> Result<AuthSettings, ConfigError> {
        Ok(AuthSettings {
            password_auth: raw.password_auth.unwrap_or(false),
            api_query_tokens: raw.api_query_tokens.unwrap_or(false),
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
            session_idle: positive_duration(
                "session-idle",
                raw.session_idle.as_deref(),
                defaults::SESSION_IDLE,
            )?,
            session_absolute: positive_duration(
                "session-absolute",
                raw.session_absolute.as_deref(),
                defaults::SESSION_ABSOLUTE,
            )?,
            registration_open: match raw.registration.as_deref() {
                None | Some("closed") => false,
                Some("open") => true,
                Some(other) => {
                    return Err(ConfigError::Invalid {
                        setting: "registration",
                        value: other.to_string(),
                        reason: "it takes closed or open".into(),
                    });
                }
            },
        })
    }
}

impl QuotaSettings {
    /// The per-user quotas; 0 is no limit.
    pub(crate) fn resolve(raw: &Settings) -> Result<QuotaSettings, ConfigError> {
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
}
