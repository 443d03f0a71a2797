//! Tokens: `vole_<id>_<secret>`, where `<id>` names the token (16
//! lowercase hex digits, public: it is what a token is listed and revoked
//! by) and `<secret>` is 43 characters of base62 (256 bits from rand's thread
//! generator, a CSPRNG seeded from the OS). The fixed prefix lets secret scanners find a leaked
//! token. The server keeps only the SHA-256 of the secret and compares it
//! in constant time; argon2 is for passwords, since a token is checked on
//! every git and API request.

use rand::Rng;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// What every token starts with.
pub const PREFIX: &str = "vole_";
/// Hex digits of a token's id.
const ID_LEN: usize = 16;
/// Base62 characters of a secret: 43 x log2(62) > 256 bits.
const SECRET_LEN: usize = 43;

/// A token's public name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TokenId(String);

impl TokenId {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for TokenId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// What the server stores of a token's secret.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecretHash([u8; 32]);

impl SecretHash {
    pub fn of(secret: &str) -> SecretHash {
        SecretHash(Sha256::digest(secret.as_bytes()).into())
    }

    pub fn to_hex(&self) -> String {
        hex::encode(self.0)
    }

    pub fn from_hex(text: &str) -> Option<SecretHash> {
        let bytes = hex::decode(text).ok()?;
        Some(SecretHash(bytes.try_into().ok()?))
    }

    /// `secret` is the one this hash was made of, compared in constant
    /// time (the time says nothing of how much of it matched).
    pub fn matches(&self, secret: &str) -> bool {
        let presented = SecretHash::of(secret);
        self.0.ct_eq(&presented.0).into()
    }
}

/// A freshly made token: the text to show once, and what to store.
#[derive(Debug)]
pub struct NewToken {
    pub id: TokenId,
    /// `vole_<id>_<secret>`: shown to its owner once, never stored.
    pub text: String,
    pub hash: SecretHash,
}

/// Makes a token from rand's thread generator (a CSPRNG seeded from
/// the OS).
pub fn generate() -> NewToken {
    let mut rng = rand::rng();
    let id: String = (0..ID_LEN)
        .map(|_| char::from(b"0123456789abcdef"[rng.random_range(0..16)]))
        .collect();
    let secret: String = (0..SECRET_LEN)
        .map(|_| char::from(rng.sample(rand::distr::Alphanumeric)))
        .collect();
    NewToken {
        hash: SecretHash::of(&secret),
        text: format!("{PREFIX}{id}_{secret}"),
        id: TokenId(id),
    }
}

/// A presented token's id and secret, if `text` has a token's shape.
pub fn parse(text: &str) -> Option<(TokenId, &str)> {
    let rest = text.strip_prefix(PREFIX)?;
    let (id, secret) = rest.split_once('_')?;
    let id_ok = id.len() == ID_LEN
        && id
            .bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase());
    let secret_ok = secret.len() == SECRET_LEN && secret.bytes().all(|b| b.is_ascii_alphanumeric());
    (id_ok && secret_ok).then(|| (TokenId(id.to_string()), secret))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_parses_back_and_only_its_secret_matches() {
        let token = generate();
        assert!(token.text.starts_with("vole_"));
        assert_eq!(token.text.len(), PREFIX.len() + ID_LEN + 1 + SECRET_LEN);
        let (id, secret) = parse(&token.text).unwrap();
        assert_eq!(id, token.id);
        assert!(token.hash.matches(secret));
        let mut wrong = secret.to_string();
        let last = wrong.pop().unwrap();
        wrong.push(if last == 'a' { 'b' } else { 'a' });
        assert!(
            !token.hash.matches(&wrong),
            "one character off must not match"
        );
        assert_eq!(
            SecretHash::from_hex(&token.hash.to_hex()),
            Some(token.hash.clone())
        );
        assert_ne!(generate().text, token.text, "two tokens differ");
    }

    #[test]
    fn text_of_another_shape_is_no_token() {
        let good = generate().text;
        for bad in [
            "",
            "vole_",
            "ghp_0123456789abcdef_xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
            &good[..good.len() - 1],
            &good.replacen("vole_", "VOLE_", 1),
            &format!("{good}x"),
            &good.replace('_', "-"),
        ] {
            assert!(parse(bad).is_none(), "{bad:?}");
        }
        let upper = format!("vole_{}_{}", "A".repeat(16), "a".repeat(43));
        assert!(parse(&upper).is_none(), "ids are lowercase hex");
    }
}
