//! [`Guard`]: the addresses a webhook may reach. By default only public
//! ones: loopback, unspecified, link-local, private, shared (CGNAT),
//! unique-local, multicast and broadcast addresses are refused, an IPv6
//! address that carries an IPv4 one (mapped, compatible, NAT64) as that
//! IPv4 address; `--webhook-allow` opens networks. A name is resolved on
//! every check and every address it gives must pass: the caller connects
//! to the addresses [`Guard::resolve`] answers, not to the name.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Duration;

use ipnet::IpNet;

/// How long a target's name may take to resolve.
pub const RESOLVE_TIMEOUT: Duration = Duration::from_secs(5);

/// The most addresses one name may resolve to (each is checked).
pub const MAX_ADDRESSES: usize = 32;

/// The longest target URL taken.
pub const MAX_URL_BYTES: usize = 2048;

/// Why a target is refused, in words a hook's admin can act on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    #[error("the URL is not valid: {0}")]
    Url(String),
    #[error("the URL must be http:// or https://, not {0}://")]
    Scheme(String),
    #[error("the URL names no host")]
    NoHost,
    /// The address itself is not named: a hook's admin learns that a
    /// name resolves to a kind of address the server refuses, not where
    /// an internal name points.
    #[error(
        "{host} resolves to a {kind} address, which a webhook may not reach \
         (the server's --webhook-allow opens networks)"
    )]
    Address {
        host: String,
        address: IpAddr,
        kind: &'static str,
    },
    #[error(
        "the URL carries a user name or password, which every admin of the hook would see: \
         sign deliveries with the hook's secret instead"
    )]
    Credentials,
    #[error("{0} does not resolve: {1}")]
    Resolve(String, String),
    #[error("{0} did not resolve within {1:?}")]
    Timeout(String, Duration),
}

/// A hook's target, parsed: where to connect, and the URL to ask.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub url: url::Url,
    /// The host as the URL names it (a name or an address).
    pub host: String,
    pub port: u16,
}

/// The addresses webhooks may reach.
#[derive(Debug, Clone, Default)]
pub struct Guard {
    allow: Vec<IpNet>,
}

impl Guard {
    /// Public addresses, and those of `allow` (`--webhook-allow`).
    pub fn new(allow: Vec<IpNet>) -> Guard {
        Guard { allow }
    }

    /// `text` as a target: an http(s) URL with a host, at most
    /// [`MAX_URL_BYTES`]. Nothing is resolved.
    pub fn parse(text: &str) -> Result<Target, Refused> {
        if text.len() > MAX_URL_BYTES {
            return Err(Refused::Url(format!("longer than {MAX_URL_BYTES} bytes")));
        }
        let url = url::Url::parse(text.trim()).map_err(|e| Refused::Url(e.to_string()))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(Refused::Scheme(url.scheme().to_string()));
        }
        if !url.username().is_empty() || url.password().is_some() {
            return Err(Refused::Credentials);
        }
        let host = match url.host() {
            Some(url::Host::Domain(name)) => name.to_string(),
            Some(url::Host::Ipv4(v4)) => v4.to_string(),
            Some(url::Host::Ipv6(v6)) => v6.to_string(),
            None => return Err(Refused::NoHost),
        };
        let port = url.port_or_known_default().ok_or(Refused::NoHost)?;
        Ok(Target { url, host, port })
    }

    /// Why `address` may not be reached, if it may not.
    pub fn refusal(&self, address: IpAddr) -> Option<&'static str> {
        let kind = forbidden(address)?;
        // Judged as the address it carries: a network opened for a
        // translation prefix opens nothing behind it.
        let plain = canonical(address);
        let allowed = self.allow.iter().any(|net| net.contains(&plain));
        (!allowed).then_some(kind)
    }

    /// The addresses of `target` to connect to, each checked: a name is
    /// resolved now (within [`RESOLVE_TIMEOUT`]), and one address that
    /// may not be reached refuses the target.
    pub async fn resolve(&self, target: &Target) -> Result<Vec<SocketAddr>, Refused> {
        self.resolve_host(&target.host, target.port).await
    }

    /// [`Guard::resolve`] for a host and port (what an HTTP client's
    /// resolver is asked: deliveries connect to what this returns).
    pub async fn resolve_host(&self, host: &str, port: u16) -> Result<Vec<SocketAddr>, Refused> {
        let bare = host.trim_start_matches('[').trim_end_matches(']');
        let addresses: Vec<SocketAddr> = match bare.parse::<IpAddr>() {
            Ok(address) => vec![SocketAddr::new(address, port)],
            Err(_) => {
                let lookup = tokio::net::lookup_host((host, port));
                match tokio::time::timeout(RESOLVE_TIMEOUT, lookup).await {
                    Err(_) => return Err(Refused::Timeout(host.to_string(), RESOLVE_TIMEOUT)),
                    Ok(Err(e)) => return Err(Refused::Resolve(host.to_string(), e.to_string())),
                    Ok(Ok(found)) => found.take(MAX_ADDRESSES).collect(),
                }
            }
        };
        if addresses.is_empty() {
            return Err(Refused::Resolve(host.to_string(), "no address".into()));
        }
        for address in &addresses {
            if let Some(kind) = self.refusal(address.ip()) {
                return Err(Refused::Address {
                    host: host.to_string(),
                    address: address.ip(),
                    kind,
                });
            }
        }
        Ok(addresses)
    }
}

/// An IPv6 address that carries an IPv4 one, as that IPv4 address.
fn canonical(address: IpAddr) -> IpAddr {
    match address {
        IpAddr::V6(v6) => embedded_v4(v6).map_or(address, IpAddr::V4),
        v4 => v4,
    }
}

/// The IPv4 address an IPv6 one carries: mapped (`::ffff:a.b.c.d`),
/// translated (`::ffff:0:a.b.c.d`), compatible (`::a.b.c.d`, deprecated
/// but still routed by some stacks), NAT64's well-known prefix
/// (`64:ff9b::a.b.c.d`) or 6to4 (`2002:aabb:ccdd::`).
fn embedded_v4(v6: Ipv6Addr) -> Option<Ipv4Addr> {
    if let Some(v4) = v6.to_ipv4_mapped() {
        return Some(v4);
    }
    let s = v6.segments();
    let v4 = |hi: u16, lo: u16| Ipv4Addr::new((hi >> 8) as u8, hi as u8, (lo >> 8) as u8, lo as u8);
    let tail = v4(s[6], s[7]);
    if s[..6] == [0, 0, 0, 0, 0, 0] && !v6.is_loopback() && !v6.is_unspecified() {
        return Some(tail);
    }
    if s[..6] == [0, 0, 0, 0, 0xffff, 0] || s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        return Some(tail);
    }
    if s[0] == 0x2002 {
        return Some(v4(s[1], s[2]));
    }
    None
}

/// What kind of address a webhook may not reach `address` is, if it is
/// one.
fn forbidden(address: IpAddr) -> Option<&'static str> {
    match canonical(address) {
        IpAddr::V4(v4) => forbidden_v4(v4),
        IpAddr::V6(v6) => forbidden_v6(v6),
    }
}

fn forbidden_v4(v4: Ipv4Addr) -> Option<&'static str> {
    let [a, b, ..] = v4.octets();
    Some(if v4.is_loopback() {
        "loopback"
    } else if v4.is_unspecified() || a == 0 {
        "unspecified"
    } else if v4.is_link_local() {
        "link-local"
    } else if v4.is_private() {
        "private"
    } else if a == 100 && (64..128).contains(&b) {
        "shared (carrier-grade NAT)"
    } else if (a, b) == (192, 0) && v4.octets()[2] == 0 || a == 198 && (b == 18 || b == 19) {
        "reserved (IETF protocol or benchmarking)"
    } else if v4.is_multicast() || a >= 240 {
        "multicast or reserved"
    } else {
        return None;
    })
}

fn forbidden_v6(v6: Ipv6Addr) -> Option<&'static str> {
    let first = v6.segments()[0];
    Some(if v6.is_loopback() {
        "loopback"
    } else if v6.is_unspecified() {
        "unspecified"
    } else if first & 0xffc0 == 0xfe80 {
        "link-local"
    } else if first & 0xfe00 == 0xfc00 {
        "unique-local"
    } else if first & 0xffc0 == 0xfec0 {
        "site-local"
    } else if v6.segments()[..3] == [0x64, 0xff9b, 1] {
        "local-use NAT64"
    } else if v6.segments()[..2] == [0x2001, 0] {
        "Teredo"
    } else if v6.is_multicast() {
        "multicast"
    } else {
        return None;
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    #[test]
    fn only_public_addresses_pass_by_default() {
        let guard = Guard::default();
        for refused in [
            "127.0.0.1",
            "127.255.0.9",
            "0.0.0.0",
            "0.1.2.3",
            "10.1.2.3",
            "172.16.0.1",
            "172.31.255.255",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "224.0.0.1",
            "255.255.255.255",
            "::1",
            "::",
            "fe80::1",
            "fc00::1",
            "fd12:3456::1",
            "ff02::1",
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
            "::127.0.0.1",
            "64:ff9b::a9fe:a9fe",
            "::ffff:0:7f00:1",
            "64:ff9b:1::7f00:1",
            "2002:7f00:1::",
            "2002:a00:1::1",
            "2001:0:4136:e378::1",
            "192.0.0.8",
            "198.18.0.1",
        ] {
            assert!(guard.refusal(ip(refused)).is_some(), "{refused} passed");
        }
        for public in [
            "93.184.216.34",
            "1.1.1.1",
            "172.32.0.1",
            "100.128.0.1",
            "2606:4700::1111",
            "::ffff:1.1.1.1",
            "2002:101:101::1",
            "198.20.0.1",
        ] {
            assert_eq!(guard.refusal(ip(public)), None, "{public} refused");
        }
    }

    #[test]
    fn allowed_networks_open_what_they_hold_and_nothing_else() {
        let guard = Guard::new(vec!["127.0.0.0/8".parse().unwrap()]);
        assert_eq!(guard.refusal(ip("127.0.0.1")), None);
        // The same address carried in IPv6 is the same address.
        assert_eq!(guard.refusal(ip("::ffff:127.0.0.1")), None);
        assert!(guard.refusal(ip("10.0.0.1")).is_some());
        assert!(guard.refusal(ip("::1")).is_some());
        // A translation prefix opened opens nothing private behind it.
        let nat64 = Guard::new(vec!["64:ff9b::/96".parse().unwrap()]);
        assert!(nat64.refusal(ip("64:ff9b::a00:1")).is_some());
    }

    #[test]
    fn a_target_is_an_http_url_with_a_host() {
        let target = Guard::parse("https://ci.example.org/hook?x=1").unwrap();
        assert_eq!((target.host.as_str(), target.port), ("ci.example.org", 443));
        assert_eq!(Guard::parse("http://[::1]:8080/").unwrap().host, "::1");
        for bad in [
            "ftp://x/",
            "file:///etc/passwd",
            "not a url",
            "http://",
            "https://user:pw@ci.example.org/",
            "https://token@ci.example.org/",
        ] {
            assert!(Guard::parse(bad).is_err(), "{bad}");
        }
        assert!(Guard::parse(&format!("http://x/{}", "a".repeat(MAX_URL_BYTES))).is_err());
    }

    #[tokio::test]
    async fn a_name_is_checked_by_every_address_it_resolves_to() {
        let guard = Guard::default();
        // `localhost` resolves to loopback: refused through its name too.
        let target = Guard::parse("http://localhost:9/").unwrap();
        match guard.resolve(&target).await {
            Err(Refused::Address { kind, .. }) => assert_eq!(kind, "loopback"),
            other => panic!("localhost was not refused as loopback: {other:?}"),
        }
        let open = Guard::new(vec![
            "127.0.0.0/8".parse().unwrap(),
            "::1/128".parse().unwrap(),
        ]);
        let addresses = open.resolve(&target).await.unwrap();
        assert!(
            addresses
                .iter()
                .all(|a| a.ip().is_loopback() && a.port() == 9),
            "{addresses:?}"
        );
    }
}
