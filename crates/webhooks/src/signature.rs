//! What a delivery carries besides its body: Gitea's headers, which its
//! receivers read, and GitHub's, for receivers written for those. The
//! signature is HMAC-SHA256 of the body with the hook's secret, in hex
//! (`X-Gitea-Signature`, and `X-Hub-Signature-256` as `sha256=<hex>`);
//! a hook without a secret sends neither.

use hmac::{Hmac, Mac};
use sha2::Sha256;

/// HMAC-SHA256 of `body` keyed by `secret`, in lowercase hex.
pub fn sign(secret: &[u8], body: &[u8]) -> String {
    // HMAC takes a key of any length.
    let mut mac = Hmac::<Sha256>::new_from_slice(secret).expect("HMAC takes any key length");
    mac.update(body);
    hex::encode(mac.finalize().into_bytes())
}

/// The headers of one delivery of `event` (Gitea's name: `push`,
/// `issues`, ...), `delivery` its id (the same on every attempt), signed
/// with `secret` when there is one.
pub fn headers(
    event: &str,
    delivery: &str,
    secret: &str,
    body: &[u8],
) -> Vec<(&'static str, String)> {
    let mut headers = vec![
        ("User-Agent", format!("vole/{}", env!("CARGO_PKG_VERSION"))),
        ("X-Gitea-Event", event.to_string()),
        ("X-Gitea-Event-Type", event.to_string()),
        ("X-Gitea-Delivery", delivery.to_string()),
        ("X-GitHub-Event", event.to_string()),
        ("X-GitHub-Delivery", delivery.to_string()),
    ];
    if !secret.is_empty() {
        let signature = sign(secret.as_bytes(), body);
        headers.push(("X-Hub-Signature-256", format!("sha256={signature}")));
        headers.push(("X-Gitea-Signature", signature));
    }
    headers
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signatures_are_hmac_sha256_as_rfc_4231_gives_them() {
        // RFC 4231, test case 2.
        assert_eq!(
            sign(b"Jefe", b"what do ya want for nothing?"),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
        // Test case 6: a key longer than the block.
        assert_eq!(
            sign(
                &[0xaa; 131],
                b"Test Using Larger Than Block-Size Key - Hash Key First"
            ),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"
        );
    }

    #[test]
    fn a_delivery_names_its_event_and_id_and_signs_only_with_a_secret() {
        let signed = headers("push", "d-1", "hush", b"{}");
        let get = |name: &str| {
            signed
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| v.as_str())
        };
        assert_eq!(get("X-Gitea-Event"), Some("push"));
        assert_eq!(get("X-GitHub-Event"), Some("push"));
        assert_eq!(get("X-Gitea-Delivery"), Some("d-1"));
        let hex = sign(b"hush", b"{}");
        assert_eq!(get("X-Gitea-Signature"), Some(hex.as_str()));
        assert_eq!(
            get("X-Hub-Signature-256"),
            Some(format!("sha256={hex}").as_str())
        );
        assert!(get("User-Agent").is_some_and(|ua| ua.starts_with("vole/")));
        let unsigned = headers("push", "d-1", "", b"{}");
        assert!(unsigned.iter().all(|(n, _)| !n.contains("Signature")));
    }
}
