//! A small, fast, non-cryptographic 64-bit hash of series identities, used to
//! spot duplicate series and to follow histogram series without allocating.
//! The label part is order-independent: `{a="1",b="2"}` and `{b="2",a="1"}`
//! are the same series.

use std::hash::{BuildHasherDefault, Hasher};

const P0: u64 = 0xa076_1d64_78bd_642f;
const P1: u64 = 0xe703_7ed1_a0b4_28db;
const P2: u64 = 0x8ebc_6af0_9c88_c6e3;

#[inline]
fn mum(a: u64, b: u64) -> u64 {
    let r = u128::from(a) * u128::from(b);
    (r as u64) ^ ((r >> 64) as u64)
}

/// Hashes `bytes` with `seed`.
pub(super) fn hash_bytes(bytes: &[u8], seed: u64) -> u64 {
    let mut h = seed ^ (bytes.len() as u64).wrapping_mul(P1);
    let mut chunks = bytes.chunks_exact(8);
    for c in &mut chunks {
        let mut w = [0u8; 8];
        w.copy_from_slice(c);
        h = mum(h ^ u64::from_le_bytes(w), P1);
    }
    let rest = chunks.remainder();
    if !rest.is_empty() {
        let mut w = [0u8; 8];
        w[..rest.len()].copy_from_slice(rest);
        h = mum(h ^ u64::from_le_bytes(w), P2);
    }
    mum(h ^ P0, P2)
}

/// Hash of one label pair in its canonical spelling `name="raw value"` (raw:
/// still escaped). Pair hashes are summed, so the label order does not matter.
#[inline]
pub(super) fn pair_hash(canonical: &[u8]) -> u64 {
    hash_bytes(canonical, P0)
}

/// Identity of the series `name{labels}` given the sum of its pair hashes.
#[inline]
pub(super) fn series_key(name: &str, labels_hash: u64) -> u64 {
    mum(hash_bytes(name.as_bytes(), P2) ^ labels_hash, P1)
}

/// A hasher for keys that already are good 64-bit hashes.
#[derive(Default)]
pub(super) struct IdentityHasher(u64);

impl Hasher for IdentityHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 << 8) | u64::from(b);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

pub(super) type BuildIdentity = BuildHasherDefault<IdentityHasher>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_of_pairs_identify_series_regardless_of_order() {
        let a = pair_hash(b"a=\"1\"").wrapping_add(pair_hash(b"b=\"2\""));
        let b = pair_hash(b"b=\"2\"").wrapping_add(pair_hash(b"a=\"1\""));
        assert_eq!(series_key("m", a), series_key("m", b));
        let c = pair_hash(b"a=\"2\"").wrapping_add(pair_hash(b"b=\"1\""));
        assert_ne!(series_key("m", a), series_key("m", c));
        assert_ne!(series_key("m", a), series_key("n", a));
    }

    #[test]
    fn every_byte_and_the_length_count() {
        let base = hash_bytes(b"abcdefghijk", 1);
        assert_ne!(base, hash_bytes(b"abcdefghijl", 1));
        assert_ne!(base, hash_bytes(b"bbcdefghijk", 1));
        assert_ne!(hash_bytes(b"a", 1), hash_bytes(b"a\0", 1));
        assert_ne!(base, hash_bytes(b"abcdefghijk", 2));
    }
}
