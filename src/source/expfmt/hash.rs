//! A small, fast, non-cryptographic 64-bit hash of series identities, used to
//! spot duplicate series and to follow histogram series without allocating.
//! The label part is order-independent: `{a="1",b="2"}` and `{b="2",a="1"}`
//! are the same series.

use std::hash::{BuildHasherDefault, Hasher};

use super::LabelRef;

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
    let mut h = seed ^ mum(bytes.len() as u64 ^ P0, P1);
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

/// Identity of the series `name{labels}`, leaving out the label `skip` (e.g.
/// `le`, to group the buckets of one histogram series).
pub(super) fn series_hash(name: &str, labels: &[LabelRef<'_>], skip: Option<&str>) -> u64 {
    let mut acc: u64 = 0;
    for l in labels {
        if Some(l.name) == skip {
            continue;
        }
        let hn = hash_bytes(l.name.as_bytes(), P0);
        let hv = hash_bytes(l.value.as_bytes(), hn);
        acc = acc.wrapping_add(hv);
    }
    mum(hash_bytes(name.as_bytes(), P2) ^ acc, P1)
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
    use std::borrow::Cow;

    fn l<'a>(n: &'a str, v: &'a str) -> LabelRef<'a> {
        LabelRef {
            name: n,
            value: Cow::Borrowed(v),
        }
    }

    #[test]
    fn label_order_does_not_matter_but_content_does() {
        let a = series_hash("m", &[l("a", "1"), l("b", "2")], None);
        let b = series_hash("m", &[l("b", "2"), l("a", "1")], None);
        assert_eq!(a, b);
        assert_ne!(a, series_hash("m", &[l("a", "2"), l("b", "1")], None));
        assert_ne!(a, series_hash("n", &[l("a", "1"), l("b", "2")], None));
        assert_ne!(
            series_hash("m", &[l("ab", "")], None),
            series_hash("m", &[l("a", "b")], None)
        );
    }

    #[test]
    fn skipped_label_is_ignored() {
        let a = series_hash("h", &[l("x", "1"), l("le", "0.5")], Some("le"));
        let b = series_hash("h", &[l("le", "+Inf"), l("x", "1")], Some("le"));
        assert_eq!(a, b);
    }
}
