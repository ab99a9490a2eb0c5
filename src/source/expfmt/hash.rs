//! A small, fast, non-cryptographic 64-bit hash of series identities, used to
//! spot duplicate series and to follow histogram series without allocating.
//!
//! A series is hashed through its canonical text: `name{a="1",b="2",le="0.5"}`
//! with label values still escaped, labels sorted by name except that a bound
//! label (`le`, then `quantile`) comes last, no blanks and no trailing comma.
//! Encoders write exactly this (client_golang appends `le`/`quantile` to sorted
//! labels), so the hash of a usual line is one pass over its raw bytes; other
//! spellings are rewritten into the canonical text first.

use std::hash::{BuildHasherDefault, Hasher};

const P0: u64 = 0xa076_1d64_78bd_642f;
const P1: u64 = 0xe703_7ed1_a0b4_28db;
const P2: u64 = 0x8ebc_6af0_9c88_c6e3;

#[inline]
fn mum(a: u64, b: u64) -> u64 {
    let r = u128::from(a) * u128::from(b);
    (r as u64) ^ ((r >> 64) as u64)
}

#[inline]
fn word(c: &[u8]) -> u64 {
    let mut w = [0u8; 8];
    w[..c.len()].copy_from_slice(c);
    u64::from_le_bytes(w)
}

/// An 8-byte chunk as a word (`c` always has 8 bytes here).
#[inline]
fn word8(c: &[u8]) -> u64 {
    <[u8; 8]>::try_from(c).map_or(0, u64::from_le_bytes)
}

#[inline]
fn finish(state: u64, tail: &[u8], len: usize) -> u64 {
    let h = if tail.is_empty() {
        state
    } else {
        mum(state ^ word(tail), P2)
    };
    mum(h ^ (len as u64).wrapping_mul(P0), P1 ^ P2)
}

/// Hashes `bytes`.
#[cfg(test)]
pub(super) fn hash_bytes(bytes: &[u8]) -> u64 {
    hash_split(bytes, 0).1
}

/// The hash state after the whole 8-byte chunks of a prefix, from which the
/// hash of any text starting with that prefix can be finished.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Resume {
    state: u64,
    at: usize,
}

/// Hashes `bytes[..split]` and `bytes` in one pass: `(prefix, full, resume)`,
/// the first two equal to hashing that slice alone; `resume` continues any
/// text that starts with `bytes[..split]` (see [`hash_resume`]).
pub(super) fn hash_split(bytes: &[u8], split: usize) -> (u64, u64, Resume) {
    let split = split.min(bytes.len());
    let mut h = P0;
    let mut at = 0;
    while at + 8 <= split {
        h = mum(h ^ word8(&bytes[at..at + 8]), P1);
        at += 8;
    }
    let prefix = finish(h, &bytes[at..split], split);
    let resume = Resume { state: h, at };
    (prefix, hash_resume(bytes, resume), resume)
}

/// Hash of `bytes`, whose start was already absorbed into `r`.
pub(super) fn hash_resume(bytes: &[u8], r: Resume) -> u64 {
    let mut h = r.state;
    let mut at = r.at.min(bytes.len());
    while at + 8 <= bytes.len() {
        h = mum(h ^ word8(&bytes[at..at + 8]), P1);
        at += 8;
    }
    finish(h, &bytes[at..], bytes.len())
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
    fn split_hashes_equal_separate_hashes() {
        let text = b"apiserver_request_duration_seconds_bucket{verb=\"GET\",le=\"0.5\"}";
        let other = b"apiserver_request_duration_seconds_bucket{verb=\"GET\",le=\"+Inf\"}";
        for split in 0..=text.len() {
            let (p, f, r) = hash_split(text, split);
            assert_eq!(p, hash_bytes(&text[..split]), "split {split}");
            assert_eq!(f, hash_bytes(text), "split {split}");
            if text[..split] == other[..split] {
                assert_eq!(hash_resume(other, r), hash_bytes(other), "split {split}");
            }
        }
    }

    #[test]
    fn every_byte_and_the_length_count() {
        let base = hash_bytes(b"abcdefghijk");
        assert_ne!(base, hash_bytes(b"abcdefghijl"));
        assert_ne!(base, hash_bytes(b"bbcdefghijk"));
        assert_ne!(hash_bytes(b"a"), hash_bytes(b"a\0"));
        assert_ne!(hash_bytes(b""), hash_bytes(b"\0"));
        assert_ne!(hash_bytes(b"abcdefgh"), hash_bytes(b"abcdefgh\0"));
    }
}
