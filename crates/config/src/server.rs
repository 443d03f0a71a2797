//! The server's front: the addresses it listens on, the connections it
//! takes, whom it believes about the client, the URL it is reached at, and
//! how long a stopping server waits.

use std::net::SocketAddr;
use std::time::Duration;

use crate::values::{duration, positive};
use crate::{ConfigError, Settings, defaults};

pub(crate) fn shutdown_grace(raw: &Settings) -> Result<Duration, ConfigError> {
    duration(
        "shutdown-grace",
        raw.shutdown_grace.as_deref(),
        defaults::SHUTDOWN_GRACE,
    )
}

pub(crate) fn max_connections(raw: &Settings) -> Result<usize, ConfigError> {
    positive(
        "max-connections",
        raw.max_connections.unwrap_or(defaults::MAX_CONNECTIONS),
    )
}

pub(crate) fn public_url_of(raw: &Settings) -> Result<Option<String>, ConfigError> {
    raw.public_url.as_deref().map(public_url).transpose()
}

pub(crate) fn listen(raw: &Settings) -> Result<SocketAddr, ConfigError> {
    let listen_text = raw.listen.as_deref().unwrap_or(defaults::LISTEN);
    listen_text.parse().map_err(|_| ConfigError::Invalid {
        setting: "listen",
        value: listen_text.to_string(),
        reason: "expected IP:PORT, e.g. 127.0.0.1:8080".into(),
    })
}

/// `None`: `off`.
pub(crate) fn metrics_listen(raw: &Settings) -> Result<Option<SocketAddr>, ConfigError> {
    let metrics_text = raw
        .metrics_listen
        .as_deref()
        .unwrap_or(defaults::METRICS_LISTEN);
    Ok(match metrics_text {
        "off" => None,
        text => Some(text.parse().map_err(|_| ConfigError::Invalid {
            setting: "metrics-listen",
            value: text.to_string(),
            reason: "expected IP:PORT, e.g. 127.0.0.1:9090, or off".into(),
        })?),
    })
}

pub(crate) fn trusted_proxies(raw: &Settings) -> Result<Vec<ipnet::IpNet>, ConfigError> {
    networks("trusted-proxy", raw.trusted_proxies.as_deref())
}

pub(crate) fn webhook_allow(raw: &Settings) -> Result<Vec<ipnet::IpNet>, ConfigError> {
    networks("webhook-allow", raw.webhook_allow.as_deref())
}

pub(crate) fn webhook_retry(raw: &Settings) -> Result<Vec<std::time::Duration>, ConfigError> {
    let texts: Vec<String> = match &raw.webhook_retry {
        Some(texts) => texts.clone(),
        None => defaults::WEBHOOK_RETRY
            .split(',')
            .map(str::to_string)
            .collect(),
    };
    if texts.is_empty() || texts.len() > 16 {
        return Err(ConfigError::Invalid {
            setting: "webhook-retry",
            value: texts.join(","),
            reason: "expected 1 to 16 delays, e.g. 1m,5m,30m,2h,6h".into(),
        });
    }
    texts
        .iter()
        .map(|text| crate::values::positive_duration("webhook-retry", Some(text.trim()), "1m"))
        .collect()
}

/// A setting's CIDRs (or bare addresses, networks of one).
fn networks(
    setting: &'static str,
    texts: Option<&[String]>,
) -> Result<Vec<ipnet::IpNet>, ConfigError> {
    texts
        .unwrap_or_default()
        .iter()
        .map(|text| {
            text.trim().parse::<ipnet::IpNet>().or_else(|_| {
                // A bare address is a network of one.
                text.trim()
                    .parse::<std::net::IpAddr>()
                    .map(ipnet::IpNet::from)
                    .map_err(|_| ConfigError::Invalid {
                        setting,
                        value: text.clone(),
                        reason: "expected a CIDR such as 10.0.0.0/8 or an IP address".into(),
                    })
            })
        })
        .collect()
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
