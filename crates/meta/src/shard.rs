//! Which `refs/meta/shards/xx` an entity lives on: FNV-1a 32-bit over the
//! UTF-8 bytes of its root id, mod the shard count (256 in every repo; the
//! `ref-cas` harness also runs the store with one shard to reproduce the
//! unsharded baseline).

/// Shards per repo.
pub const SHARDS: u16 = 256;

/// Prefix of every shard ref.
pub const SHARD_REF_PREFIX: &str = "refs/meta/shards/";

/// FNV-1a, 32 bit (offset basis 2166136261, prime 16777619). Written out
/// because the shard function is part of the on-disk format and must not
/// change with a hashing crate's defaults (the `fnv` crate offers only the
/// 64-bit variant).
pub fn fnv1a_32(bytes: &[u8]) -> u32 {
    let mut hash: u32 = 0x811c_9dc5;
    for byte in bytes {
        hash ^= u32::from(*byte);
        hash = hash.wrapping_mul(0x0100_0193);
    }
    hash
}

/// The shard of a root id among `shards` shards (1..=256).
pub fn shard_of(root_id: &str, shards: u16) -> u8 {
    (fnv1a_32(root_id.as_bytes()) % u32::from(shards.clamp(1, SHARDS))) as u8
}

/// `refs/meta/shards/xx`, two lower-case hex digits.
pub fn shard_ref(shard: u8) -> String {
    format!("{SHARD_REF_PREFIX}{shard:02x}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv1a_32_matches_the_reference_vectors() {
        // From the FNV reference test suite (Noll, "FNV-1a 32 bit").
        assert_eq!(fnv1a_32(b""), 0x811c_9dc5);
        assert_eq!(fnv1a_32(b"a"), 0xe40c_292c);
        assert_eq!(fnv1a_32(b"foobar"), 0xbf9c_f968);
        assert_eq!(fnv1a_32(b"chongo was here!\n"), 0xd49930d5);
    }

    #[test]
    fn shard_is_the_low_byte_and_names_its_ref() {
        assert_eq!(shard_of("foobar", SHARDS), 0x68);
        assert_eq!(shard_of("a", SHARDS), 0x2c);
        assert_eq!(shard_of("anything", 1), 0);
        assert_eq!(shard_ref(0x2c), "refs/meta/shards/2c");
        assert_eq!(shard_ref(0), "refs/meta/shards/00");
    }
}
