//! Which address a request comes from. Behind a reverse proxy the TCP
//! peer is the proxy; the client is in `X-Forwarded-For`, which anyone can
//! send. So the header is read only when the peer is a trusted proxy
//! (`--trusted-proxy CIDR`), and then from the right: the first address
//! that is not itself a trusted proxy is the client (addresses left of it
//! were written by the client and prove nothing).
//!
//! Every address is taken in its canonical form first: an IPv4 peer of a
//! dual-stack listener (`--listen [::]:P`) arrives as `::ffff:a.b.c.d`,
//! and is matched, counted and recorded as `a.b.c.d`, as are forwarded
//! hops written that way.

use std::net::IpAddr;

use axum::http::HeaderMap;
use ipnet::{IpNet, Ipv4Net};

/// The client's address for a request from `peer` with `headers`, in its
/// canonical form (an IPv4-mapped address is its IPv4 address).
pub fn client_ip(peer: IpAddr, headers: &HeaderMap, trusted: &[IpNet]) -> IpAddr {
    let peer = peer.to_canonical();
    let is_trusted = |ip: &IpAddr| trusted.iter().any(|net| canonical_net(*net).contains(ip));
    if !is_trusted(&peer) {
        return peer;
    }
    // Every hop, in order; `None` for one that is no address.
    let mut hops: Vec<Option<IpAddr>> = Vec::new();
    for value in headers.get_all("x-forwarded-for") {
        match value.to_str() {
            Ok(text) => hops.extend(text.split(',').map(|part| {
                part.trim()
                    .parse::<IpAddr>()
                    .ok()
                    .map(|ip| ip.to_canonical())
            })),
            Err(_) => hops.push(None),
        }
    }
    // From the right (what the trusted proxies appended): the first hop
    // that is not a trusted proxy is the client. A hop that is no address
    // was written by someone no proxy vouches for, so the last trusted hop
    // right of it is the client as far as anyone can tell; what the
    // client wrote further left proves nothing either way.
    let mut last_trusted = peer;
    for hop in hops.iter().rev() {
        match hop {
            Some(ip) if is_trusted(ip) => last_trusted = *ip,
            Some(ip) => return *ip,
            None => return last_trusted,
        }
    }
    last_trusted
}

/// A net as it matches canonical addresses: one written in the
/// IPv4-mapped form (`::ffff:10.0.0.0/104`) is the IPv4 net it maps
/// (`10.0.0.0/8`). A wider IPv6 net (`::/0`) holds IPv6 addresses only:
/// an IPv4 proxy is named by an IPv4 net, whichever listener it reaches.
fn canonical_net(net: IpNet) -> IpNet {
    let IpNet::V6(v6) = net else {
        return net;
    };
    match (
        v6.network().to_ipv4_mapped(),
        v6.prefix_len().checked_sub(96),
    ) {
        (Some(v4), Some(len)) => Ipv4Net::new(v4, len).map_or(net, IpNet::V4),
        _ => net,
    }
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

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    #[test]
    fn a_mapped_peer_is_matched_and_returned_as_its_ipv4_address() {
        // An IPv4 proxy reaching a dual-stack listener.
        let proxy = ip("::ffff:10.0.0.2");
        let trusted: Vec<IpNet> = vec!["10.0.0.0/24".parse().unwrap()];
        assert_eq!(
            client_ip(proxy, &xff(&["198.51.100.7"]), &trusted),
            ip("198.51.100.7"),
            "a mapped proxy must match its IPv4 net"
        );
        assert_eq!(
            client_ip(proxy, &HeaderMap::new(), &trusted),
            ip("10.0.0.2"),
            "the proxy itself, as IPv4"
        );
        // Not a proxy: the peer, as IPv4, and its header ignored.
        let stranger = ip("::ffff:203.0.113.9");
        assert_eq!(
            client_ip(stranger, &xff(&["198.51.100.7"]), &trusted),
            ip("203.0.113.9")
        );
        assert_eq!(
            client_ip(stranger, &HeaderMap::new(), &[]),
            ip("203.0.113.9")
        );
        // A real IPv6 peer stays as it is.
        assert_eq!(
            client_ip(ip("2001:db8::5"), &HeaderMap::new(), &trusted),
            ip("2001:db8::5")
        );
    }

    #[test]
    fn mapped_hops_are_matched_and_returned_as_ipv4_addresses() {
        let proxy = ip("10.0.0.2");
        let trusted: Vec<IpNet> = vec!["10.0.0.0/24".parse().unwrap()];
        // A proxy that writes mapped addresses: the one right of the
        // client is a proxy and is skipped, the client is IPv4.
        let mapped = xff(&["::ffff:1.2.3.4, ::ffff:198.51.100.7, ::ffff:10.0.0.5"]);
        assert_eq!(client_ip(proxy, &mapped, &trusted), ip("198.51.100.7"));
        // Every hop a proxy: the leftmost, as IPv4.
        let all_proxies = xff(&["::ffff:10.0.0.9, 10.0.0.5"]);
        assert_eq!(client_ip(proxy, &all_proxies, &trusted), ip("10.0.0.9"));
    }

    #[test]
    fn a_trusted_net_in_the_mapped_form_is_its_ipv4_net() {
        let mapped_net: Vec<IpNet> = vec!["::ffff:10.0.0.0/120".parse().unwrap()];
        let claimed = xff(&["198.51.100.7"]);
        for peer in ["10.0.0.2", "::ffff:10.0.0.2"] {
            assert_eq!(
                client_ip(ip(peer), &claimed, &mapped_net),
                ip("198.51.100.7"),
                "{peer} is in ::ffff:10.0.0.0/120"
            );
        }
        assert_eq!(
            client_ip(ip("10.0.1.2"), &claimed, &mapped_net),
            ip("10.0.1.2"),
            "outside the net"
        );
        let all_v4: Vec<IpNet> = vec!["::ffff:0:0/96".parse().unwrap()];
        assert_eq!(
            client_ip(ip("192.0.2.1"), &claimed, &all_v4),
            ip("198.51.100.7")
        );
        // A wider IPv6 net names IPv6 proxies only.
        let v6_only: Vec<IpNet> = vec!["::/0".parse().unwrap()];
        assert_eq!(
            client_ip(ip("::ffff:192.0.2.1"), &claimed, &v6_only),
            ip("192.0.2.1")
        );
        assert_eq!(
            client_ip(ip("2001:db8::1"), &claimed, &v6_only),
            ip("198.51.100.7")
        );
    }

    #[test]
    fn a_hop_that_is_no_address_left_of_the_client_does_not_hide_it() {
        let proxy: IpAddr = "10.0.0.2".parse().unwrap();
        let trusted: Vec<IpNet> = vec!["10.0.0.0/24".parse().unwrap()];
        let client: IpAddr = "203.0.113.10".parse().unwrap();
        // Written by the client, left of what the proxy appended.
        assert_eq!(
            client_ip(proxy, &xff(&["garbage, 203.0.113.10"]), &trusted),
            client
        );
        assert_eq!(
            client_ip(
                proxy,
                &xff(&["garbage", "203.0.113.10, 10.0.0.5"]),
                &trusted
            ),
            client
        );
        // Right of every real hop (what the trusted peer appended is no
        // address): the peer is the client as far as anyone can tell.
        assert_eq!(
            client_ip(proxy, &xff(&["203.0.113.10, 10.0.0.5, garbage"]), &trusted),
            proxy
        );
        assert_eq!(
            client_ip(proxy, &xff(&["203.0.113.10, garbage"]), &trusted),
            proxy
        );
    }
}
