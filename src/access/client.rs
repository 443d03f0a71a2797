//! Which address a request comes from. Behind a reverse proxy the TCP
//! peer is the proxy; the client is in `X-Forwarded-For`, which anyone can
//! send. So the header is read only when the peer is a trusted proxy
//! (`--trusted-proxy CIDR`), and then from the right: the first address
//! that is not itself a trusted proxy is the client (addresses left of it
//! were written by the client and prove nothing).

use std::net::IpAddr;

use axum::http::HeaderMap;
use ipnet::IpNet;

/// The client's address for a request from `peer` with `headers`.
pub fn client_ip(peer: IpAddr, headers: &HeaderMap, trusted: &[IpNet]) -> IpAddr {
    let is_trusted = |ip: &IpAddr| trusted.iter().any(|net| net.contains(ip));
    if !is_trusted(&peer) {
        return peer;
    }
    let mut hops: Vec<IpAddr> = Vec::new();
    for value in headers.get_all("x-forwarded-for") {
        let Ok(text) = value.to_str() else {
            return peer;
        };
        for part in text.split(',') {
            match part.trim().parse::<IpAddr>() {
                Ok(ip) => hops.push(ip),
                // A hop that is no address: nothing right of the peer can
                // be trusted to be the client.
                Err(_) => return peer,
            }
        }
    }
    hops.iter()
        .rev()
        .find(|ip| !is_trusted(ip))
        .copied()
        .or_else(|| hops.first().copied())
        .unwrap_or(peer)
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn xff(values: &[&str]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for v in values {
            headers.append("x-forwarded-for", HeaderValue::from_str(v).unwrap());
        }
        headers
    }

    #[test]
    fn forwarded_for_counts_only_from_a_trusted_proxy() {
        let proxy: IpAddr = "10.0.0.2".parse().unwrap();
        let stranger: IpAddr = "203.0.113.9".parse().unwrap();
        let trusted: Vec<IpNet> = vec!["10.0.0.0/24".parse().unwrap()];
        let claimed = xff(&["198.51.100.7"]);
        assert_eq!(
            client_ip(stranger, &claimed, &trusted),
            stranger,
            "untrusted peer: header ignored"
        );
        assert_eq!(
            client_ip(proxy, &claimed, &[]),
            proxy,
            "no trusted proxies: header ignored"
        );
        assert_eq!(
            client_ip(proxy, &claimed, &trusted),
            "198.51.100.7".parse::<IpAddr>().unwrap()
        );
        // The client may write anything left of what the proxies append:
        // the rightmost address that is not a proxy is the client.
        let spoofed = xff(&["1.2.3.4, 198.51.100.7, 10.0.0.5"]);
        assert_eq!(
            client_ip(proxy, &spoofed, &trusted),
            "198.51.100.7".parse::<IpAddr>().unwrap()
        );
        let split = xff(&["1.2.3.4", "198.51.100.7"]);
        assert_eq!(
            client_ip(proxy, &split, &trusted),
            "198.51.100.7".parse::<IpAddr>().unwrap(),
            "repeated headers are one list"
        );
        assert_eq!(client_ip(proxy, &xff(&["not-an-ip"]), &trusted), proxy);
        assert_eq!(client_ip(proxy, &HeaderMap::new(), &trusted), proxy);
        assert_eq!(
            client_ip(proxy, &xff(&["2001:db8::1"]), &trusted),
            "2001:db8::1".parse::<IpAddr>().unwrap()
        );
    }
}
