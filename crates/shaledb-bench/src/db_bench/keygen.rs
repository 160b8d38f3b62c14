//! Keys and values as db_bench makes them.
//!
//! A key is the key number in big-endian order, truncated to its `min(key_size, 8)` low-order bytes, then
//! padded with ASCII `'0'` up to `key_size` (db_bench's `GenerateKeyFromInt` without prefixes), so the
//! byte order of keys follows the numeric order for every key number below `256^min(key_size, 8)`.
//!
//! Values come from a 1 MiB (at least `value_size`) buffer of 100-byte pieces, each piece a random run of
//! `100 * compression_ratio` bytes repeated to fill it, so a block of values compresses to about
//! `compression_ratio` of its size; each value is the next `value_size` bytes of the buffer, wrapping to
//! the start. The buffer is built from the same generator, seed (301) and printable alphabet as db_bench's
//! (RocksDB 8.3 switched to binary bytes; the seed reports and Debian's db_bench predate that), so the two
//! tools write byte-identical values.

use crate::db_bench::random::LegacyRandom;
use std::sync::Arc;

/// Writes the key for key number `v` into `out` (cleared first).
pub fn make_key(v: u64, key_size: usize, out: &mut Vec<u8>) {
    out.clear();
    append_key(v, key_size, out);
}

/// Appends the key for key number `v` to `out`.
pub fn append_key(v: u64, key_size: usize, out: &mut Vec<u8>) {
    let start = out.len();
    let n = key_size.min(8);
    for i in 0..n {
        out.push((v >> ((n - i - 1) * 8)) as u8);
    }
    out.resize(start + key_size, b'0');
}

/// How keys are shaped: db_bench's `GenerateKeyFromInt` with and without `--keys_per_prefix`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeyShape {
    /// `--key_size`.
    pub key_size: usize,
    /// `--prefix_size` (used only with `keys_per_prefix > 0`).
    pub prefix_size: usize,
    /// `--keys_per_prefix`; 0: plain keys ([`make_key`]).
    pub keys_per_prefix: u64,
}

impl KeyShape {
    /// Plain keys of `key_size` bytes.
    pub fn plain(key_size: usize) -> KeyShape {
        KeyShape { key_size, prefix_size: 0, keys_per_prefix: 0 }
    }

    /// Writes the key for key number `v` of a key space of `num_keys` into `out` (cleared first). With
    /// prefixes: the first `min(prefix_size, 8)` bytes are `v % (num_keys / keys_per_prefix)` big-endian
    /// (at least one prefix), padded with `'0'` to `prefix_size`; then `v` big-endian in up to 8 bytes,
    /// padded with `'0'` to `key_size`. REQUIRES: `prefix_size <= key_size` (the flags check it).
    pub fn make(&self, v: u64, num_keys: u64, out: &mut Vec<u8>) {
        if self.keys_per_prefix == 0 || self.prefix_size == 0 {
            return make_key(v, self.key_size, out);
        }
        out.clear();
        let num_prefix = (num_keys / self.keys_per_prefix).max(1);
        let prefix = v % num_prefix;
        let n = self.prefix_size.min(8);
        for i in 0..n {
            out.push((prefix >> ((n - i - 1) * 8)) as u8);
        }
        out.resize(self.prefix_size, b'0');
        let n = (self.key_size - self.prefix_size.min(self.key_size)).min(8);
        for i in 0..n {
            out.push((v >> ((n - i - 1) * 8)) as u8);
        }
        out.resize(self.key_size, b'0');
    }
}

/// db_bench's value buffer: shared by every thread, read with a per-thread cursor ([`ValueGen`]).
#[derive(Clone, Debug)]
pub struct ValueData {
    data: Arc<[u8]>,
}

impl ValueData {
    /// Builds the buffer for values of `value_size` bytes compressible to `compression_ratio`.
    pub fn new(value_size: usize, compression_ratio: f64) -> ValueData {
        let want = value_size.max(1 << 20);
        let mut rnd = LegacyRandom::new(301);
        let raw_len = ((100.0 * compression_ratio) as i64).max(1) as usize;
        let mut data = Vec::with_capacity(want + 100);
        let mut raw = Vec::with_capacity(raw_len);
        while data.len() < want {
            raw.clear();
            // Printable bytes ' '..='~', as db_bench up to RocksDB 8.2 (and Debian's 7.8) draws them.
            raw.extend((0..raw_len).map(|_| b' ' + rnd.uniform(95) as u8));
            let start = data.len();
            while data.len() - start < 100 {
                data.extend_from_slice(&raw);
            }
            data.truncate(start + 100);
        }
        ValueData { data: data.into() }
    }

    /// A cursor over the buffer starting at its beginning, as each db_bench thread's generator does.
    pub fn generator(&self) -> ValueGen {
        ValueGen { data: self.data.clone(), pos: 0 }
    }
}

/// Hands out consecutive slices of a [`ValueData`] buffer.
#[derive(Clone, Debug)]
pub struct ValueGen {
    data: Arc<[u8]>,
    pos: usize,
}

impl ValueGen {
    /// The next `len` bytes (wrapping to the start when fewer remain). `len` is capped at the buffer size,
    /// which is at least the `value_size` the buffer was built for.
    pub fn generate(&mut self, len: usize) -> &[u8] {
        let len = len.min(self.data.len());
        if self.pos + len > self.data.len() {
            self.pos = 0;
        }
        self.pos += len;
        self.data.get(self.pos - len..self.pos).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn prefixed_keys_follow_db_bench_layout() {
        let shape = super::KeyShape { key_size: 16, prefix_size: 4, keys_per_prefix: 10 };
        let mut k = Vec::new();
        // 100 keys, 10 per prefix: 10 prefixes, key 23 has prefix 3.
        shape.make(23, 100, &mut k);
        assert_eq!(k, b"\x00\x00\x00\x03\x00\x00\x00\x00\x00\x00\x00\x17\x30\x30\x30\x30".to_vec());
        // A prefix longer than 8 bytes is padded with '0'.
        let long = super::KeyShape { key_size: 16, prefix_size: 10, keys_per_prefix: 10 };
        long.make(23, 100, &mut k);
        assert_eq!(&k[..10], b"\x00\x00\x00\x00\x00\x00\x00\x0300");
        assert_eq!(&k[10..], b"\x00\x00\x00\x00\x00\x17");
        // More keys per prefix than keys: one prefix (db_bench would divide by zero).
        shape.make(5, 3, &mut k);
        assert_eq!(&k[..4], b"\x00\x00\x00\x00");
        // No keys_per_prefix: plain keys.
        let mut plain = Vec::new();
        super::make_key(23, 16, &mut plain);
        super::KeyShape::plain(16).make(23, 100, &mut k);
        assert_eq!(k, plain);
    }

    use super::*;

    #[test]
    fn keys_are_big_endian_and_zero_char_padded() {
        let mut k = Vec::new();
        make_key(0x0102, 16, &mut k);
        assert_eq!(k, b"\0\0\0\0\0\0\x01\x0200000000");
        make_key(0x0102_0304_0506_0708, 8, &mut k);
        assert_eq!(k, [1, 2, 3, 4, 5, 6, 7, 8]);
        // Shorter keys keep the low-order bytes, still most significant first.
        make_key(0x0102_0304, 2, &mut k);
        assert_eq!(k, [3, 4]);
        make_key(7, 20, &mut k);
        assert_eq!(k.len(), 20);
        assert_eq!(&k[8..], b"000000000000");
    }

    #[test]
    fn key_order_follows_number_order() {
        let (mut a, mut b) = (Vec::new(), Vec::new());
        for v in [0u64, 1, 255, 256, 65_535, 1 << 40] {
            make_key(v, 16, &mut a);
            make_key(v + 1, 16, &mut b);
            assert!(a < b, "{v}");
        }
    }

    #[test]
    fn values_repeat_runs_to_the_compression_ratio() {
        let d = ValueData::new(100, 0.5);
        let mut g = d.generator();
        let v = g.generate(100).to_vec();
        assert_eq!(v.len(), 100);
        // A 50-byte random run repeated twice.
        assert_eq!(v[..50], v[50..]);
        assert!(v.iter().all(|&b| (b' '..=b'~').contains(&b)));
        let w = g.generate(100).to_vec();
        assert_ne!(v, w);
        // Ratio 1.0: the piece is 100 random bytes, not a repetition.
        let mut g = ValueData::new(100, 1.0).generator();
        let v = g.generate(100).to_vec();
        assert_ne!(v[..50], v[50..]);
    }

    #[test]
    fn value_generator_wraps_and_caps() {
        let d = ValueData::new(10, 0.5);
        let mut g = d.generator();
        // As db_bench's, the buffer is whole 100-byte pieces: 1 MiB rounded up to 1048600 bytes.
        let n = 1_048_600 / 400;
        let first = g.generate(400).to_vec();
        for _ in 1..n {
            g.generate(400);
        }
        assert_eq!(g.generate(400), &first[..]);
        assert_eq!(g.generate(usize::MAX).len(), 1_048_600);
    }

    #[test]
    fn values_are_the_same_for_every_generator() {
        let d = ValueData::new(100, 0.5);
        let (mut a, mut b) = (d.generator(), ValueData::new(100, 0.5).generator());
        assert_eq!(a.generate(100), b.generate(100));
    }
}

#[cfg(test)]
mod db_bench_bytes {
    use super::*;

    /// First values db_bench 7.8.3 writes (`fillseq --value_size=20 --compression_ratio=0.5`), from
    /// `ldb scan --hex` of its database: a 10-byte random run, repeated.
    #[test]
    fn first_values_match_db_bench() {
        let hex = |b: &[u8]| b.iter().map(|x| format!("{x:02X}")).collect::<String>();
        let mut g = ValueData::new(20, 0.5).generator();
        assert_eq!(hex(g.generate(20)), "5E7B56687A22212F25774D5A3B276120462F5245");
        assert_eq!(hex(g.generate(20)), "5A4A34547740254E587879323F2E417256435A32");
        // The third value crosses into the second copy of the 50-byte run.
        assert_eq!(hex(g.generate(20)), "42365B6A6E55642934205E7B56687A22212F2577");
        let mut k = Vec::new();
        make_key(2, 16, &mut k);
        assert_eq!(hex(&k), "00000000000000023030303030303030");
    }
}
