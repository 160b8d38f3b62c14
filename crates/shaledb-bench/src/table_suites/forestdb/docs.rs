//! Documents as the ForestDB benchmark makes them, and the suite's random streams.
//!
//! The benchmark (couchbaselabs/ForestDB-Benchmark, `keygen_seed2key`) turns a document number into a key by
//! hashing the number and drawing ~32 printable characters (normal length, median 32, sd 2) from a generator
//! seeded by that hash; bodies have a normal length around 512 bytes and, in the seed's configuration,
//! `body_length:compressibility=50`. Load and queries share the number-to-key function, so a query for
//! document N finds the key the load wrote for N, and consecutive numbers have unrelated keys (the load is
//! not in key order).
//!
//! Here the key keeps that shape but is unique by construction (the benchmark's keys can collide, rarely): its
//! first [`KEY_HASH_CHARS`] characters are a bijective 64-bit mix of the document number written in base 62
//! (fixed width, so two numbers never share them), followed by characters drawn from a generator seeded by a
//! second hash, to a length of 30..=34 bytes (mean 32). Values are slices of db_bench's value buffer built
//! for a compression ratio of 0.5 ([`crate::db_bench::keygen::ValueData`]: each 100-byte piece is 50 random bytes
//! repeated), of 448..=576 bytes (a triangular distribution with mean 512 and sd ~26, close to the
//! benchmark's normal(512, 32) without its unbounded tails).

use crate::db_bench::keygen::{ValueData, ValueGen};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

/// Characters of a key that encode the document number's hash (62^11 > 2^64).
pub const KEY_HASH_CHARS: usize = 11;
/// Shortest key.
pub const KEY_MIN: usize = 30;
/// Longest key.
pub const KEY_MAX: usize = 34;
/// Mean key length.
pub const KEY_MEAN: usize = 32;
/// Mean value length.
pub const VALUE_MEAN: usize = 512;
/// Largest deviation of a value's length from [`VALUE_MEAN`].
pub const VALUE_SPREAD: usize = 64;
/// Key + value bytes of an average document: the "logical size" per document the cache and LSM sizes are
/// derived from.
pub const DOC_BYTES: u64 = (KEY_MEAN + VALUE_MEAN) as u64;
/// Fraction of its size a value compresses to (the seed's compressibility=50).
pub const COMPRESSION_RATIO: f64 = 0.5;

/// The benchmark's key alphabet, in ascending byte order.
const ALPHABET: &[u8; 62] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/// SplitMix64's finalizer: a bijection on u64 (xor-shifts and multiplications by odd constants are
/// invertible), so distinct inputs give distinct outputs.
pub fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Writes the key of document `doc` into `out` (cleared first).
pub fn doc_key(doc: u64, out: &mut Vec<u8>) {
    out.clear();
    let h = mix64(doc);
    let mut x = h;
    let mut digits = [0u8; KEY_HASH_CHARS];
    for d in digits.iter_mut().rev() {
        *d = ALPHABET[(x % 62) as usize];
        x /= 62;
    }
    out.extend_from_slice(&digits);
    let h2 = mix64(h ^ 0x9e37_79b9_7f4a_7c15);
    let len = KEY_MIN + (h2 % (KEY_MAX - KEY_MIN + 1) as u64) as usize;
    let mut r = SmallRng::seed_from_u64(h2);
    while out.len() < len {
        out.push(ALPHABET[r.gen_range(0..ALPHABET.len())]);
    }
}

/// The suite's value buffer (built once, shared by every thread).
pub fn value_data() -> ValueData {
    ValueData::new(VALUE_MEAN + VALUE_SPREAD, COMPRESSION_RATIO)
}

/// One thread's random stream: which document, how long its value, and the value bytes.
pub struct DocRng {
    rng: SmallRng,
    values: ValueGen,
    docs: u64,
}

impl DocRng {
    /// A stream over `docs` documents seeded with `seed`; the value cursor starts at a seed-dependent place so
    /// threads do not write the same bytes in step.
    pub fn new(seed: u64, docs: u64, data: &ValueData) -> DocRng {
        let mut rng = SmallRng::seed_from_u64(seed);
        let mut values = data.generator();
        let skip = rng.gen_range(0..1usize << 20);
        values.generate(skip);
        DocRng { rng, values, docs: docs.max(1) }
    }

    /// A document number, uniform in `0..docs` (the seed used uniform random keys in every step).
    pub fn doc(&mut self) -> u64 {
        self.rng.gen_range(0..self.docs)
    }

    /// The next value: 448..=576 bytes, mean 512.
    pub fn value(&mut self) -> &[u8] {
        let s = VALUE_SPREAD as i64 / 2;
        let dev = self.rng.gen_range(-s..=s) + self.rng.gen_range(-s..=s);
        let len = (VALUE_MEAN as i64 + dev) as usize;
        self.values.generate(len)
    }
}

/// The seed of thread `thread` of step `step` in variant `variant`: every thread gets its own stream (the
/// seed's fork added `seed_per_thread` because identical streams inflate cache hit rates), and the base seed
/// comes from the clock unless `--seed` is given, so a rerun does not replay the same keys either. Both
/// engines of a variant get the same streams.
pub fn stream_seed(base: u64, variant: usize, step: usize, thread: usize) -> u64 {
    let mut h = mix64(base ^ SEED_SALT);
    for x in [variant as u64, step as u64, thread as u64] {
        h = mix64(h ^ x.wrapping_mul(0x9e37_79b9_7f4a_7c15));
    }
    h
}

/// Separates the suite's streams from other users of the same `--seed`.
const SEED_SALT: u64 = 0x0f0d_b5ee_d000_0003;

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn keys_are_unique_about_32_bytes_and_not_in_doc_order() {
        let mut seen = HashSet::new();
        let mut k = Vec::new();
        let mut total = 0usize;
        let mut in_order = 0usize;
        let mut prev: Vec<u8> = Vec::new();
        for doc in 0..20_000u64 {
            doc_key(doc, &mut k);
            assert!((KEY_MIN..=KEY_MAX).contains(&k.len()), "{}", k.len());
            assert!(k.iter().all(|c| c.is_ascii_alphanumeric()));
            total += k.len();
            if k > prev {
                in_order += 1;
            }
            prev.clone_from(&k);
            assert!(seen.insert(k.clone()), "duplicate key for doc {doc}");
        }
        let mean = total as f64 / 20_000.0;
        assert!((31.5..=32.5).contains(&mean), "{mean}");
        // Random order: about half of consecutive documents have increasing keys.
        assert!((8_000..12_000).contains(&in_order), "{in_order}");
        // The same number always gives the same key.
        let mut a = Vec::new();
        doc_key(12345, &mut a);
        doc_key(12345, &mut k);
        assert_eq!(a, k);
    }

    #[test]
    fn values_are_about_512_bytes_and_half_compressible() {
        let data = value_data();
        let mut r = DocRng::new(7, 1000, &data);
        let mut total = 0usize;
        let mut sample = Vec::new();
        for _ in 0..10_000 {
            let v = r.value();
            assert!((VALUE_MEAN - VALUE_SPREAD..=VALUE_MEAN + VALUE_SPREAD).contains(&v.len()));
            total += v.len();
            if sample.len() < 100_000 {
                sample.extend_from_slice(v);
            }
        }
        let mean = total as f64 / 10_000.0;
        assert!((505.0..=519.0).contains(&mean), "{mean}");
        // Half of each 100-byte piece repeats the other half: about half of the 100-byte windows' bytes are
        // repeats of the byte 50 positions back.
        let repeats = sample.windows(51).filter(|w| w[0] == w[50]).count();
        let frac = repeats as f64 / (sample.len() - 50) as f64;
        assert!((0.4..=0.6).contains(&frac), "{frac}");
        for _ in 0..1000 {
            assert!(r.doc() < 1000);
        }
    }

    #[test]
    fn streams_differ_per_thread_step_and_variant() {
        let s: HashSet<u64> =
            [(0, 0, 0), (0, 0, 1), (0, 1, 0), (1, 0, 0)].iter().map(|&(v, st, t)| stream_seed(42, v, st, t)).collect();
        assert_eq!(s.len(), 4);
        assert_ne!(stream_seed(42, 0, 0, 0), stream_seed(43, 0, 0, 0));
        assert_eq!(stream_seed(42, 1, 2, 3), stream_seed(42, 1, 2, 3));
    }
}
