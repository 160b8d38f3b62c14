//! Prefix extractors: RocksDB's `SliceTransform`s that map a user key to the prefix its prefix bloom and
//! prefix seeks work on.
//!
//! ```text
//! name := "rocksdb.FixedPrefix." decimal     ; Fixed(n): the first n bytes; keys shorter than n are outside
//!                                            ;   the domain (no prefix)
//!       | "rocksdb.CappedPrefix." decimal    ; Capped(n): the first min(n, len) bytes; every key has one
//! ```
//!
//! The names are RocksDB's, so a table's `prefix_extractor` property reads the same in both engines. A table
//! records the name of the extractor its filter was built with; a reader uses the prefix part of that filter
//! only when its own extractor has the same name (RocksDB's rule), so changing the extractor never makes a
//! lookup miss: tables built with another one just are not skipped by prefix.

use std::fmt;

/// Maps user keys to prefixes. Keys with the same prefix are contiguous in bytewise order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PrefixExtractor {
    /// The first `n` bytes; a key shorter than `n` has no prefix (RocksDB `NewFixedPrefixTransform(n)`).
    Fixed(usize),
    /// The first `min(n, key length)` bytes (RocksDB `NewCappedPrefixTransform(n)`).
    Capped(usize),
}

const FIXED: &str = "rocksdb.FixedPrefix.";
const CAPPED: &str = "rocksdb.CappedPrefix.";

impl PrefixExtractor {
    /// The prefix of `key`, or `None` when `key` is outside the extractor's domain.
    #[inline]
    pub fn prefix<'a>(&self, key: &'a [u8]) -> Option<&'a [u8]> {
        match *self {
            PrefixExtractor::Fixed(n) => key.get(..n),
            PrefixExtractor::Capped(n) => Some(&key[..n.min(key.len())]),
        }
    }

    /// The user keys whose prefix is `prefix` (a value [`prefix`](Self::prefix) returned) form the range
    /// `[prefix, end)` in bytewise order; this returns `end`, or `None` when the range has no end (every
    /// key from `prefix` on, when `prefix` is all 0xff bytes).
    ///
    /// For `Fixed(n)` and for `Capped(n)` with a full-length prefix, the range is every key starting with
    /// `prefix`. A `Capped(n)` prefix shorter than `n` is a whole key (longer keys have longer prefixes), so
    /// its range holds that one key: `end` is `prefix ++ 0x00`.
    pub fn range_end(&self, prefix: &[u8]) -> Option<Vec<u8>> {
        if let PrefixExtractor::Capped(n) = *self {
            if prefix.len() < n {
                let mut end = Vec::with_capacity(prefix.len() + 1);
                end.extend_from_slice(prefix);
                end.push(0);
                return Some(end);
            }
        }
        let mut end = prefix.to_vec();
        while let Some(last) = end.last_mut() {
            if *last < 0xff {
                *last += 1;
                return Some(end);
            }
            end.pop();
        }
        None
    }

    /// RocksDB's name of the extractor, as stored in table properties.
    pub fn name(&self) -> String {
        self.to_string()
    }

    /// Parses a name [`name`](Self::name) wrote. `None` for any other text (an extractor ShaleDB does not
    /// have, such as a user-defined RocksDB one).
    pub fn parse(name: &str) -> Option<PrefixExtractor> {
        let num = |s: &str| -> Option<usize> {
            if s.is_empty() || s.len() > 9 || !s.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            s.parse().ok()
        };
        if let Some(n) = name.strip_prefix(FIXED) {
            num(n).filter(|&n| n > 0).map(PrefixExtractor::Fixed)
        } else if let Some(n) = name.strip_prefix(CAPPED) {
            num(n).filter(|&n| n > 0).map(PrefixExtractor::Capped)
        } else {
            None
        }
    }

    /// The prefix length `n`.
    pub fn len(&self) -> usize {
        match *self {
            PrefixExtractor::Fixed(n) | PrefixExtractor::Capped(n) => n,
        }
    }

    /// Always false: an extractor of length 0 is refused by the options that take one.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl fmt::Display for PrefixExtractor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            PrefixExtractor::Fixed(n) => write!(f, "{FIXED}{n}"),
            PrefixExtractor::Capped(n) => write!(f, "{CAPPED}{n}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::PrefixExtractor::{Capped, Fixed};
    use super::*;

    #[test]
    fn fixed_prefix_has_a_domain() {
        assert_eq!(Fixed(3).prefix(b"abcd"), Some(&b"abc"[..]));
        assert_eq!(Fixed(3).prefix(b"abc"), Some(&b"abc"[..]));
        assert_eq!(Fixed(3).prefix(b"ab"), None);
    }

    #[test]
    fn capped_prefix_covers_every_key() {
        assert_eq!(Capped(3).prefix(b"abcd"), Some(&b"abc"[..]));
        assert_eq!(Capped(3).prefix(b"ab"), Some(&b"ab"[..]));
        assert_eq!(Capped(3).prefix(b""), Some(&b""[..]));
    }

    #[test]
    fn range_end_bounds_exactly_the_keys_of_a_prefix() {
        assert_eq!(Fixed(2).range_end(b"ab"), Some(b"ac".to_vec()));
        assert_eq!(Fixed(2).range_end(b"a\xff"), Some(b"b".to_vec()));
        assert_eq!(Fixed(2).range_end(b"\xff\xff"), None);
        assert_eq!(Capped(3).range_end(b"abc"), Some(b"abd".to_vec()));
        // A short capped prefix is one whole key.
        assert_eq!(Capped(3).range_end(b"ab"), Some(b"ab\x00".to_vec()));
        // Checked against the definition over every key of up to 3 bytes from a small alphabet.
        let alphabet = [0u8, 1, 0xfe, 0xff];
        let mut keys = vec![Vec::new()];
        for len in 1..=3 {
            let mut more = Vec::new();
            for k in keys.iter().filter(|k| k.len() == len - 1) {
                for &b in &alphabet {
                    let mut k = k.clone();
                    k.push(b);
                    more.push(k);
                }
            }
            keys.extend(more);
        }
        for ex in [Fixed(1), Fixed(2), Capped(1), Capped(2)] {
            for k in &keys {
                let Some(p) = ex.prefix(k) else { continue };
                let end = ex.range_end(p);
                for other in &keys {
                    let in_range =
                        other.as_slice() >= p && end.as_ref().is_none_or(|e| other.as_slice() < e.as_slice());
                    assert_eq!(in_range, ex.prefix(other) == Some(p), "{ex} {k:?} {other:?}");
                }
            }
        }
    }

    #[test]
    fn names_round_trip_and_others_are_refused() {
        for ex in [Fixed(8), Capped(12)] {
            assert_eq!(PrefixExtractor::parse(&ex.name()), Some(ex));
        }
        assert_eq!(Fixed(8).name(), "rocksdb.FixedPrefix.8");
        for bad in [
            "",
            "rocksdb.FixedPrefix.",
            "rocksdb.FixedPrefix.0",
            "rocksdb.FixedPrefix.-1",
            "rocksdb.Noop",
            "rocksdb.CappedPrefix.99999999999",
        ] {
            assert_eq!(PrefixExtractor::parse(bad), None, "{bad}");
        }
    }
}
