//! The full-file bloom filter over user keys: cache-line blocked, so one lookup touches one 64-byte line.
//!
//! ```text
//! filter     := line{num_lines} kind:u8 num_probes:u8 num_lines:fixed32
//! line       := byte{64}                    ; 512 bits; bit b is byte b/8, mask 1 << (b%8)
//! kind       := 0x01 xxh3 cache-line bloom  ; FROZEN
//! num_probes := 1..=30
//! h          := xxh3_64(user_key)           ; seedless: the bits are an on-disk format
//! line_index := ((h >> 32) * num_lines) >> 32
//! p_0        := h mod 2^32
//! p_i+1      := p_i * 0x9e3779b9 mod 2^32   ; probe i sets/tests bit p_i >> 23 of the line
//! ```
//!
//! A filter with `num_lines = 0` was built from no keys and matches nothing.

use crate::coding::{get_fixed32, put_fixed32};
use crate::{Error, Result};

/// Filter kind byte of this layout. FROZEN.
pub const KIND_XXH3_CACHE_LINE: u8 = 1;

const LINE_BYTES: usize = 64;
const LINE_BITS: u32 = 512;
const TRAILER_LEN: usize = 6;
const MAX_PROBES: u8 = 30;
const PROBE_MUL: u32 = 0x9e37_79b9;

/// The hash a filter stores for `user_key`. The engine computes it once per lookup and asks every table.
#[inline]
pub fn key_hash(user_key: &[u8]) -> u64 {
    xxhash_rust::xxh3::xxh3_64(user_key)
}

/// Collects key hashes and lays out a filter.
#[derive(Debug, Clone)]
pub struct BloomBuilder {
    bits_per_key: f64,
    hashes: Vec<u64>,
}

impl BloomBuilder {
    /// A builder spending about `bits_per_key` bits per distinct key (clamped to 1..=100; 10 gives ~1% false
    /// positives).
    pub fn new(bits_per_key: f64) -> BloomBuilder {
        let bits_per_key = if bits_per_key.is_nan() { 10.0 } else { bits_per_key.clamp(1.0, 100.0) };
        BloomBuilder { bits_per_key, hashes: Vec::new() }
    }

    /// Adds a key's [`key_hash`]. Consecutive repeats (versions of one user key) are stored once.
    pub fn add_hash(&mut self, h: u64) {
        if self.hashes.last() != Some(&h) {
            self.hashes.push(h);
        }
    }

    /// Number of hashes collected (after dropping consecutive repeats).
    pub fn num_hashes(&self) -> usize {
        self.hashes.len()
    }

    /// Lays out the filter for every hash added so far and empties the builder.
    pub fn finish(&mut self) -> Vec<u8> {
        let n = self.hashes.len();
        let num_probes = ((self.bits_per_key * 0.69).round() as u8).clamp(1, MAX_PROBES);
        let total_bits = (n as f64 * self.bits_per_key).ceil();
        let num_lines =
            if n == 0 { 0 } else { ((total_bits / LINE_BITS as f64).ceil() as u64).clamp(1, u32::MAX as u64) };
        let mut out = vec![0u8; num_lines as usize * LINE_BYTES];
        for &h in &self.hashes {
            let base = line_index(h, num_lines as u32) * LINE_BYTES;
            let mut p = h as u32;
            for _ in 0..num_probes {
                let bit = (p >> 23) as usize;
                out[base + bit / 8] |= 1 << (bit % 8);
                p = p.wrapping_mul(PROBE_MUL);
            }
        }
        out.push(KIND_XXH3_CACHE_LINE);
        out.push(num_probes);
        put_fixed32(&mut out, num_lines as u32);
        self.hashes.clear();
        out
    }
}

#[inline]
fn line_index(h: u64, num_lines: u32) -> usize {
    (((h >> 32) * num_lines as u64) >> 32) as usize
}

/// A parsed filter.
#[derive(Debug, Clone)]
pub struct BloomReader {
    /// The lines, without the trailer.
    lines: Vec<u8>,
    num_lines: u32,
    num_probes: u8,
}

impl BloomReader {
    /// Parses a filter (copying it). A malformed filter is `Corruption` (offset relative to the filter).
    pub fn new(filter: &[u8]) -> Result<BloomReader> {
        BloomReader::from_vec(filter.to_vec())
    }

    /// Parses a filter, taking ownership of its bytes.
    pub fn from_vec(mut filter: Vec<u8>) -> Result<BloomReader> {
        let len = filter.len();
        let Some(at) = len.checked_sub(TRAILER_LEN) else {
            return Err(Error::corruption("", 0, format!("bloom filter of {len} bytes is shorter than its trailer")));
        };
        let trailer = &filter[at..];
        let (kind, num_probes) = (trailer[0], trailer[1]);
        let num_lines = get_fixed32(&trailer[2..]).unwrap_or(u32::MAX);
        if kind != KIND_XXH3_CACHE_LINE {
            return Err(Error::corruption("", at as u64, format!("unknown bloom filter kind {kind}")));
        }
        if num_probes == 0 || num_probes > MAX_PROBES {
            return Err(Error::corruption("", at as u64 + 1, format!("bloom filter with {num_probes} probes")));
        }
        if num_lines as u64 * LINE_BYTES as u64 != at as u64 {
            return Err(Error::corruption(
                "",
                at as u64 + 2,
                format!("bloom filter claims {num_lines} lines but holds {at} bytes"),
            ));
        }
        filter.truncate(at);
        Ok(BloomReader { lines: filter, num_lines, num_probes })
    }

    /// False only when no key with hash `h` was added.
    #[inline]
    pub fn may_contain(&self, h: u64) -> bool {
        if self.num_lines == 0 {
            return false;
        }
        let Some(line) = self.lines.get(line_index(h, self.num_lines) * LINE_BYTES..) else {
            return true;
        };
        let mut p = h as u32;
        for _ in 0..self.num_probes {
            let bit = (p >> 23) as usize;
            // `bit / 8 < 64` always; an out-of-range read would answer "maybe", never a false negative.
            if line.get(bit / 8).is_some_and(|b| b & (1 << (bit % 8)) == 0) {
                return false;
            }
            p = p.wrapping_mul(PROBE_MUL);
        }
        true
    }

    /// Size of the filter's bit array in bytes.
    pub fn size(&self) -> usize {
        self.lines.len()
    }

    /// Number of probes per key.
    pub fn num_probes(&self) -> u8 {
        self.num_probes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn build(n: u32, bits: f64) -> BloomReader {
        let mut b = BloomBuilder::new(bits);
        for i in 0..n {
            b.add_hash(key_hash(format!("key{i}").as_bytes()));
        }
        BloomReader::from_vec(b.finish()).unwrap()
    }

    #[test]
    fn no_false_negatives() {
        for n in [1u32, 10, 1000, 20_000] {
            let r = build(n, 10.0);
            for i in 0..n {
                assert!(r.may_contain(key_hash(format!("key{i}").as_bytes())), "n={n} i={i}");
            }
        }
    }

    #[test]
    fn false_positive_rate_near_one_percent() {
        let n = 50_000u32;
        let r = build(n, 10.0);
        let probes = 100_000u32;
        let fp = (0..probes).filter(|i| r.may_contain(key_hash(format!("absent{i}").as_bytes()))).count();
        let rate = fp as f64 / probes as f64;
        assert!(rate < 0.02 && rate > 0.002, "false positive rate {rate}");
        // Fewer bits, more false positives.
        let r6 = build(n, 6.0);
        let fp6 = (0..probes).filter(|i| r6.may_contain(key_hash(format!("absent{i}").as_bytes()))).count();
        assert!(fp6 > fp);
    }

    #[test]
    fn hash_is_stable() {
        // The filter bits are on disk: the hash of a key must never change.
        assert_eq!(key_hash(b""), 0x2d06_8005_38d3_94c2);
        assert_eq!(key_hash(b"shaledb"), xxhash_rust::xxh3::xxh3_64(b"shaledb"));
    }

    #[test]
    fn layout_is_stable() {
        let mut b = BloomBuilder::new(10.0);
        b.add_hash(key_hash(b"hello"));
        let f = b.finish();
        assert_eq!(f.len(), 64 + 6);
        assert_eq!(&f[64..], &[KIND_XXH3_CACHE_LINE, 7, 1, 0, 0, 0]);
        assert_eq!(f[..64].iter().map(|b| b.count_ones()).sum::<u32>(), 7 - collisions(key_hash(b"hello"), 7));
    }

    fn collisions(h: u64, k: u32) -> u32 {
        let mut seen = std::collections::HashSet::new();
        let mut p = h as u32;
        for _ in 0..k {
            seen.insert(p >> 23);
            p = p.wrapping_mul(PROBE_MUL);
        }
        k - seen.len() as u32
    }

    #[test]
    fn empty_filter_matches_nothing() {
        let r = build(0, 10.0);
        assert!(!r.may_contain(key_hash(b"x")));
    }

    #[test]
    fn repeated_hashes_stored_once() {
        let mut b = BloomBuilder::new(10.0);
        for _ in 0..5 {
            b.add_hash(7);
        }
        assert_eq!(b.num_hashes(), 1);
    }

    #[test]
    fn truncated_filter_is_corruption() {
        assert!(BloomReader::new(&[1, 2, 3]).unwrap_err().is_corruption());
        let mut f = BloomBuilder::new(10.0);
        f.add_hash(1);
        let f = f.finish();
        assert!(BloomReader::new(&f[1..]).unwrap_err().is_corruption());
    }

    #[test]
    fn bad_kind_is_corruption() {
        let mut b = BloomBuilder::new(10.0);
        b.add_hash(1);
        let mut f = b.finish();
        f[64] = 9;
        let e = BloomReader::new(&f).unwrap_err();
        assert!(matches!(e, Error::Corruption { offset: 64, .. }), "{e}");
    }

    #[test]
    fn bad_probe_count_is_corruption() {
        let mut b = BloomBuilder::new(10.0);
        b.add_hash(1);
        let mut f = b.finish();
        for bad in [0, 31, 255] {
            f[65] = bad;
            assert!(BloomReader::new(&f).unwrap_err().is_corruption());
        }
    }

    #[test]
    fn bad_line_count_is_corruption() {
        let mut b = BloomBuilder::new(10.0);
        b.add_hash(1);
        let mut f = b.finish();
        f[66] = 2;
        let e = BloomReader::new(&f).unwrap_err();
        assert!(matches!(e, Error::Corruption { offset: 66, .. }), "{e}");
    }
}
