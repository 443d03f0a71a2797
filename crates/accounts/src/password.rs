//! Passwords, hashed with argon2id (the `argon2` crate's defaults: 19 MiB,
//! 2 passes) into PHC strings with a random salt. A password is never
//! stored or logged in clear; `verify` takes the time argon2 takes
//! whatever the outcome.

use argon2::Argon2;
use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};

/// Why a password could not be hashed.
#[derive(Debug, thiserror::Error)]
#[error("cannot hash the password: {0}")]
pub struct HashError(String);

/// The PHC string of `password` (`$argon2id$v=19$...`).
pub fn hash(password: &str) -> Result<String, HashError> {
    // 16 bytes from rand's thread generator (a CSPRNG seeded from the
    // OS), as the salt's B64.
    let bytes: [u8; 16] = rand::random();
    let salt = SaltString::encode_b64(&bytes).map_err(|e| HashError(e.to_string()))?;
    Argon2::default()
        .hash_password(password.as_bytes(), &salt)
        .map(|hash| hash.to_string())
        // The crate's error is a plain enum without a source; its text
        // names the parameter at fault.
        .map_err(|e| HashError(e.to_string()))
}

/// `password` is the one `stored` was made of. A stored string that is not
/// a PHC hash matches nothing.
pub fn verify(stored: &str, password: &str) -> bool {
    PasswordHash::new(stored).is_ok_and(|hash| {
        Argon2::default()
            .verify_password(password.as_bytes(), &hash)
            .is_ok()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_password_verifies_and_nothing_else_does() {
        let stored = hash("correct horse battery staple").unwrap();
        assert!(stored.starts_with("$argon2id$"), "{stored}");
        assert!(!stored.contains("correct horse"), "never in clear");
        assert!(verify(&stored, "correct horse battery staple"));
        assert!(!verify(&stored, "correct horse battery stapl"));
        assert!(!verify(&stored, ""));
        assert!(!verify("not a hash", "correct horse battery staple"));
        assert_ne!(hash("same").unwrap(), hash("same").unwrap(), "salted");
    }
}
