//! The points of one stored series, compressed as they arrive.
//!
//! An hour of a large control plane at 15 s is tens of millions of points; as
//! 16-byte `(time, value)` pairs they would need about a gigabyte. cptriage keeps
//! them the way Prometheus's own TSDB does (the Gorilla encoding of Pelkonen et
//! al., VLDB 2015, as in Prometheus's XOR chunks):
//!
//! - **times** as delta-of-delta: one bit when the scrape interval did not change,
//!   14, 17 or 20 bits (plus a 2–4 bit tag) for jitter, 64 bits otherwise;
//! - **values** as the XOR with the previous value's bits: one bit for an
//!   unchanged value, otherwise only the meaningful bits of the XOR (integer
//!   counters that grow by little need a dozen bits).
//!
//! The encoding is exact: every bit pattern round-trips, including NaN payloads
//! (the staleness marker), signed zeros and infinities. Points are appended in
//! strictly increasing time order ([`Points::push`] refuses anything else; the
//! store keeps such points aside and merges them once loading is done). Readers
//! decode sequentially with [`Points::iter`] or into a buffer with
//! [`Points::decode_into`]; a series is read a handful of times per diagnosis.

use super::{Millis, Sample};

/// Sentinel for "no XOR window yet".
const NO_WINDOW: u8 = 0xff;

/// Compressed, time-ordered points of one series.
#[derive(Clone, Debug, Default)]
pub struct Points {
    bytes: Vec<u8>,
    /// Bits written into `bytes`.
    bits: u64,
    len: u32,
    last_t: Millis,
    last_v: u64,
    last_delta: i64,
    leading: u8,
    trailing: u8,
}

impl PartialEq for Points {
    fn eq(&self, other: &Self) -> bool {
        self.len == other.len
            && self
                .iter()
                .zip(other.iter())
                .all(|(a, b)| a.t == b.t && a.v.to_bits() == b.v.to_bits())
    }
}

impl Points {
    /// No points.
    pub fn new() -> Self {
        Points {
            leading: NO_WINDOW,
            ..Points::default()
        }
    }

    /// Encodes points that are already in strictly increasing time order;
    /// a point not later than the one before it is dropped.
    pub fn from_sorted(samples: impl IntoIterator<Item = Sample>) -> Self {
        let mut p = Points::new();
        for s in samples {
            p.push(s);
        }
        p.shrink();
        p
    }

    /// Number of points.
    pub fn len(&self) -> usize {
        self.len as usize
    }

    /// Whether there are no points.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The latest point.
    pub fn last(&self) -> Option<Sample> {
        (self.len > 0).then(|| Sample {
            t: self.last_t,
            v: f64::from_bits(self.last_v),
        })
    }

    /// The earliest point.
    pub fn first(&self) -> Option<Sample> {
        self.iter().next()
    }

    /// Bytes held by the encoded points (for memory accounting).
    pub fn heap_bytes(&self) -> usize {
        self.bytes.capacity()
    }

    /// Releases spare capacity (after loading).
    pub fn shrink(&mut self) {
        self.bytes.shrink_to_fit();
    }

    /// Appends `s` if it is later than the last point; returns `false` (and
    /// changes nothing) otherwise, or when the series already holds
    /// `u32::MAX` points.
    pub fn push(&mut self, s: Sample) -> bool {
        if self.len == u32::MAX || (self.len > 0 && s.t <= self.last_t) {
            return false;
        }
        let v = s.v.to_bits();
        match self.len {
            0 => {
                self.write(s.t as u64, 64);
                self.write(v, 64);
                self.leading = NO_WINDOW;
            }
            _ => {
                let delta = s.t.wrapping_sub(self.last_t);
                let dod = delta.wrapping_sub(self.last_delta);
                self.write_dod(dod);
                self.write_xor(v ^ self.last_v);
                self.last_delta = delta;
            }
        }
        self.last_t = s.t;
        self.last_v = v;
        self.len += 1;
        true
    }

    /// The points in time order.
    pub fn iter(&self) -> PointsIter<'_> {
        PointsIter {
            r: BitReader::new(&self.bytes),
            left: self.len,
            started: false,
            t: 0,
            v: 0,
            delta: 0,
            leading: 0,
            trailing: 0,
        }
    }

    /// Replaces the contents of `out` with the points.
    pub fn decode_into(&self, out: &mut Vec<Sample>) {
        out.clear();
        out.reserve(self.len());
        out.extend(self.iter());
    }

    /// The points as a vector.
    pub fn to_vec(&self) -> Vec<Sample> {
        let mut v = Vec::new();
        self.decode_into(&mut v);
        v
    }

    fn write_dod(&mut self, dod: i64) {
        if dod == 0 {
            self.write(0, 1);
            return;
        }
        for (tag, tag_bits, n) in [(0b10u64, 2u32, 14u32), (0b110, 3, 17), (0b1110, 4, 20)] {
            let lim = 1i64 << (n - 1);
            if (-lim..lim).contains(&dod) {
                self.write(tag, tag_bits);
                self.write(dod as u64 & ((1u64 << n) - 1), n);
                return;
            }
        }
        self.write(0b1111, 4);
        self.write(dod as u64, 64);
    }

    fn write_xor(&mut self, x: u64) {
        if x == 0 {
            self.write(0, 1);
            return;
        }
        // At most 31 leading zeros fit the 5-bit field.
        let lz = (x.leading_zeros() as u8).min(31);
        let tz = x.trailing_zeros() as u8;
        if self.leading != NO_WINDOW && lz >= self.leading && tz >= self.trailing {
            let sig = 64 - u32::from(self.leading) - u32::from(self.trailing);
            self.write(0b10, 2);
            self.write(x >> self.trailing, sig);
            return;
        }
        let sig = 64 - u32::from(lz) - u32::from(tz);
        self.write(0b11, 2);
        self.write(u64::from(lz), 5);
        // 64 significant bits are written as 0 in the 6-bit field.
        self.write(u64::from(sig) & 63, 6);
        self.write(x >> tz, sig);
        self.leading = lz;
        self.trailing = tz;
    }

    /// Writes the low `n` bits of `v` (1 ≤ n ≤ 64), most significant first.
    fn write(&mut self, v: u64, n: u32) {
        let mut n = n;
        while n > 0 {
            let off = (self.bits & 7) as u32;
            if off == 0 {
                if self.bytes.len() == self.bytes.capacity() {
                    // Grow by a quarter, not by doubling: the store holds
                    // hundreds of thousands of these while loading.
                    self.bytes.reserve_exact((self.bytes.len() / 4).max(16));
                }
                self.bytes.push(0);
            }
            let free = 8 - off;
            let take = free.min(n);
            let chunk = ((v >> (n - take)) & ((1u64 << take) - 1)) as u8;
            if let Some(b) = self.bytes.last_mut() {
                *b |= chunk << (free - take);
            }
            n -= take;
            self.bits += u64::from(take);
        }
    }
}

/// Reads bits most significant first through a 64-bit window refilled a word
/// at a time. Past the end it reads zeros (never panics).
struct BitReader<'a> {
    bytes: &'a [u8],
    /// Next byte of `bytes` to load into `buf`.
    next: usize,
    /// Unread bits, left-aligned.
    buf: u64,
    /// Number of unread bits in `buf`.
    nbuf: u32,
}

impl<'a> BitReader<'a> {
    fn new(bytes: &'a [u8]) -> Self {
        BitReader {
            bytes,
            next: 0,
            buf: 0,
            nbuf: 0,
        }
    }

    /// Loads whole bytes until at least 57 bits are unread or the input ends.
    #[inline]
    fn refill(&mut self) {
        if let Some(w) = self.bytes.get(self.next..self.next + 8) {
            let mut word = [0u8; 8];
            word.copy_from_slice(w);
            let w = u64::from_be_bytes(word);
            // Whole bytes that fit after the unread bits.
            let k = (64 - self.nbuf) / 8;
            let bits = k * 8;
            let top = if bits == 64 { w } else { w >> (64 - bits) };
            self.buf |= top << (64 - self.nbuf - bits);
            self.nbuf += bits;
            self.next += k as usize;
            return;
        }
        while self.nbuf <= 56 {
            let Some(&b) = self.bytes.get(self.next) else {
                return;
            };
            self.buf |= u64::from(b) << (56 - self.nbuf);
            self.nbuf += 8;
            self.next += 1;
        }
    }

    /// Reads `n` bits (0 ≤ n ≤ 64).
    #[inline(always)]
    fn read(&mut self, n: u32) -> u64 {
        if n == 0 {
            return 0;
        }
        if n > 56 {
            return self.read_wide(n);
        }
        if self.nbuf < n {
            self.refill();
        }
        let v = self.buf >> (64 - n);
        self.buf <<= n;
        self.nbuf = self.nbuf.saturating_sub(n);
        v
    }

    /// Reads 57 to 64 bits, in two parts.
    #[cold]
    #[inline(never)]
    fn read_wide(&mut self, n: u32) -> u64 {
        let hi = self.read(32);
        let lo = self.read(n - 32);
        (hi << (n - 32)) | lo
    }

    #[inline(always)]
    fn bit(&mut self) -> bool {
        self.read(1) == 1
    }
}

/// Decodes [`Points`] in time order.
pub struct PointsIter<'a> {
    r: BitReader<'a>,
    left: u32,
    started: bool,
    t: Millis,
    v: u64,
    delta: i64,
    leading: u8,
    trailing: u8,
}

impl PointsIter<'_> {
    fn read_dod(&mut self) -> i64 {
        if !self.r.bit() {
            return 0;
        }
        for n in [14u32, 17, 20] {
            if !self.r.bit() {
                let raw = self.r.read(n);
                // Sign-extend the n-bit two's complement value.
                let shift = 64 - n;
                return ((raw << shift) as i64) >> shift;
            }
        }
        self.r.read(64) as i64
    }

    fn read_xor(&mut self) -> u64 {
        if !self.r.bit() {
            return 0;
        }
        if self.r.bit() {
            self.leading = self.r.read(5) as u8;
            let mut sig = self.r.read(6) as u8;
            if sig == 0 {
                sig = 64;
            }
            self.trailing = 64u8.saturating_sub(self.leading).saturating_sub(sig);
        }
        let sig = 64u32
            .saturating_sub(u32::from(self.leading))
            .saturating_sub(u32::from(self.trailing));
        if sig == 0 {
            return 0;
        }
        let bits = self.r.read(sig);
        if self.trailing >= 64 {
            0
        } else {
            bits << self.trailing
        }
    }
}

impl Iterator for PointsIter<'_> {
    type Item = Sample;

    fn next(&mut self) -> Option<Sample> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        if !self.started {
            self.started = true;
            self.t = self.r.read(64) as Millis;
            self.v = self.r.read(64);
        } else {
            let dod = self.read_dod();
            self.delta = self.delta.wrapping_add(dod);
            self.t = self.t.wrapping_add(self.delta);
            self.v ^= self.read_xor();
        }
        Some(Sample {
            t: self.t,
            v: f64::from_bits(self.v),
        })
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left as usize, Some(self.left as usize))
    }
}

impl ExactSizeIterator for PointsIter<'_> {}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::stale_nan;

    fn roundtrip(samples: &[Sample]) -> Points {
        let p = Points::from_sorted(samples.iter().copied());
        let back = p.to_vec();
        assert_eq!(back.len(), samples.len());
        for (a, b) in samples.iter().zip(&back) {
            assert_eq!(a.t, b.t);
            assert_eq!(a.v.to_bits(), b.v.to_bits(), "at t={}: {} vs {}", a.t, a.v, b.v);
        }
        assert_eq!(p.last().map(|s| s.t), samples.last().map(|s| s.t));
        assert_eq!(p.first().map(|s| s.t), samples.first().map(|s| s.t));
        p
    }

    /// xorshift64*, so the test needs no random-number crate and is repeatable.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
        }
    }

    #[test]
    fn special_values_round_trip_bit_for_bit() {
        let vals = [
            0.0,
            -0.0,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::NAN,
            stale_nan(),
            f64::from_bits(0x7ff8_0000_dead_beef),
            f64::MIN_POSITIVE,
            f64::MAX,
            f64::MIN,
            1.0,
            1.0,
            5e-324,
        ];
        let s: Vec<Sample> = vals
            .iter()
            .enumerate()
            .map(|(i, &v)| Sample {
                t: i as i64 * 15_000,
                v,
            })
            .collect();
        roundtrip(&s);
    }

    #[test]
    fn extreme_times_and_irregular_intervals_round_trip() {
        let ts = [
            i64::MIN,
            -1,
            0,
            1,
            2,
            8_193,
            8_194 + (1 << 19),
            1 << 40,
            i64::MAX - 1,
            i64::MAX,
        ];
        let s: Vec<Sample> = ts.iter().map(|&t| Sample { t, v: t as f64 }).collect();
        roundtrip(&s);
    }

    #[test]
    fn random_series_round_trip() {
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        for case in 0..300 {
            let n = (rng.next() % 400) as usize;
            let mut t = (rng.next() % 2_000_000_000_000) as i64 - 1_000_000_000_000;
            let mut v = 0.0f64;
            let mut s = Vec::with_capacity(n);
            for _ in 0..n {
                t += match rng.next() % 6 {
                    0 => 1 + (rng.next() % 3_000_000) as i64,
                    1 => 15_000 + (rng.next() % 200) as i64 - 100,
                    _ => 15_000,
                };
                v = match (case % 4, rng.next() % 5) {
                    (0, _) => f64::from_bits(rng.next()),
                    (1, 0) => 0.0,
                    (1, _) => v + (rng.next() % 50) as f64,
                    (2, _) => v + (rng.next() % 1000) as f64 * 0.001,
                    _ => (rng.next() % 3) as f64,
                };
                s.push(Sample { t, v });
            }
            roundtrip(&s);
        }
    }

    #[test]
    fn out_of_order_and_duplicate_times_are_refused() {
        let mut p = Points::new();
        assert!(p.push(Sample { t: 10, v: 1.0 }));
        assert!(!p.push(Sample { t: 10, v: 2.0 }));
        assert!(!p.push(Sample { t: 5, v: 2.0 }));
        assert!(p.push(Sample { t: 11, v: 3.0 }));
        assert_eq!(
            p.to_vec(),
            vec![Sample { t: 10, v: 1.0 }, Sample { t: 11, v: 3.0 }]
        );
    }

    #[test]
    fn regular_counters_compress_well() {
        // A counter scraped every 15 s growing by small integers: a few bits per point.
        let s: Vec<Sample> = (0..241)
            .map(|i| Sample {
                t: 1_700_000_000_000 + i * 15_000,
                v: 1_000_000.0 + (i * 7 + i % 3) as f64,
            })
            .collect();
        let p = roundtrip(&s);
        assert!(
            p.heap_bytes() < 241 * 3,
            "{} bytes for 241 points",
            p.heap_bytes()
        );
        // A constant series: about one bit per time and one per value.
        let c: Vec<Sample> = (0..241)
            .map(|i| Sample {
                t: i * 15_000,
                v: 42.0,
            })
            .collect();
        assert!(roundtrip(&c).heap_bytes() < 100);
    }
}
