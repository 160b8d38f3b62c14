//! Random keys and values shaped to reach the interesting paths of an LSM tree: colliding keys (overwrites,
//! deletes of live keys, merges), shared prefixes, the bytes `0x00` and `0xff`, empty and compressible values.

use rand::Rng;

/// Letters of the small alphabet: few enough that short keys collide often.
const SMALL_ALPHABET: &[u8] = b"abcd";

/// A random key of 1 to `max_len` bytes (empty when `max_len` is 0).
///
/// With `alphabet_small`, bytes come from `abcd` and lengths favour short keys, so the same key comes back
/// often and keys share prefixes: the key space of `max_len = 3` is 84 keys. Otherwise every byte value is
/// possible, with `0x00` and `0xff` drawn more often than chance to exercise ordering at the extremes.
pub fn random_key<R: Rng + ?Sized>(rng: &mut R, max_len: usize, alphabet_small: bool) -> Vec<u8> {
    if max_len == 0 {
        return Vec::new();
    }
    let len = if alphabet_small {
        // Short keys half the time, so collisions stay frequent even for a larger max_len.
        if rng.gen_bool(0.5) {
            rng.gen_range(1..=max_len.min(2))
        } else {
            rng.gen_range(1..=max_len)
        }
    } else {
        rng.gen_range(1..=max_len)
    };
    (0..len)
        .map(|_| {
            if alphabet_small {
                SMALL_ALPHABET[rng.gen_range(0..SMALL_ALPHABET.len())]
            } else {
                match rng.gen_range(0..16) {
                    0 => 0x00,
                    1 => 0xff,
                    _ => rng.gen(),
                }
            }
        })
        .collect()
}

/// A random value of 0 to `max_len` bytes: random bytes half the time, a repeated short pattern (so
/// compression has something to do) the other half.
pub fn random_value<R: Rng + ?Sized>(rng: &mut R, max_len: usize) -> Vec<u8> {
    let len = rng.gen_range(0..=max_len);
    if rng.gen_bool(0.5) {
        (0..len).map(|_| rng.gen()).collect()
    } else {
        let pattern: [u8; 4] = rng.gen();
        pattern.iter().copied().cycle().take(len).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng;
    use std::collections::HashSet;

    #[test]
    fn small_alphabet_keys_collide_often() {
        let mut r = rng(1);
        let keys: Vec<Vec<u8>> = (0..1000).map(|_| random_key(&mut r, 3, true)).collect();
        let distinct: HashSet<&Vec<u8>> = keys.iter().collect();
        assert!(distinct.len() <= 84);
        assert!(distinct.len() > 20, "still covers the key space");
        assert!(keys.iter().all(|k| (1..=3).contains(&k.len()) && k.iter().all(|b| SMALL_ALPHABET.contains(b))));
    }

    #[test]
    fn full_alphabet_keys_respect_length_and_reach_extreme_bytes() {
        let mut r = rng(2);
        let keys: Vec<Vec<u8>> = (0..500).map(|_| random_key(&mut r, 8, false)).collect();
        assert!(keys.iter().all(|k| (1..=8).contains(&k.len())));
        assert!(keys.iter().any(|k| k.contains(&0x00)));
        assert!(keys.iter().any(|k| k.contains(&0xff)));
        assert!(random_key(&mut r, 0, false).is_empty());
    }

    #[test]
    fn keys_replay_from_seed() {
        let draw = |seed| {
            let mut r = rng(seed);
            (0..50).map(|_| random_key(&mut r, 6, false)).collect::<Vec<_>>()
        };
        assert_eq!(draw(3), draw(3));
        assert_ne!(draw(3), draw(4));
    }

    #[test]
    fn values_respect_length_and_include_empty_and_patterned() {
        let mut r = rng(5);
        let values: Vec<Vec<u8>> = (0..500).map(|_| random_value(&mut r, 16)).collect();
        assert!(values.iter().all(|v| v.len() <= 16));
        assert!(values.iter().any(Vec::is_empty));
        assert!(values.iter().any(|v| v.len() >= 8 && v[..4] == v[4..8]));
    }
}
