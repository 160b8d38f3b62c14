//! The two random number generators db_bench uses, reimplemented so that `shaledb bench` draws the same key
//! numbers and generates the same value bytes as RocksDB's db_bench for the same `--seed`:
//! [`LegacyRandom`] (the Park-Miller "minimal standard" generator, used for value data) and [`Mt64`]
//! (the 64-bit Mersenne Twister, `std::mt19937_64`, used for key choice per thread).

/// Park-Miller multiplicative congruential generator modulo 2^31-1 with multiplier 16807.
#[derive(Clone, Debug)]
pub struct LegacyRandom {
    seed: u32,
}

const PM_MODULUS: u32 = 2_147_483_647;

impl LegacyRandom {
    /// A generator seeded with `s` (0, a fixed point, becomes 1, as in RocksDB's `Random`).
    pub fn new(s: u32) -> LegacyRandom {
        let s = s & PM_MODULUS;
        LegacyRandom { seed: if s != 0 { s } else { 1 } }
    }

    /// Next value in `1..2^31-1`.
    pub fn next_u32(&mut self) -> u32 {
        let product = u64::from(self.seed) * 16807;
        // (x << 31) % M == x, so the high part folds onto the low part.
        let mut s = ((product >> 31) + (product & u64::from(PM_MODULUS))) as u32;
        if s > PM_MODULUS {
            s -= PM_MODULUS;
        }
        self.seed = s;
        s
    }

    /// Uniform in `0..n`. REQUIRES: `n > 0`.
    pub fn uniform(&mut self, n: u32) -> u32 {
        self.next_u32() % n
    }
}

const MT_N: usize = 312;
const MT_M: usize = 156;
const MT_MATRIX_A: u64 = 0xB502_6F5A_A966_19E9;
const MT_UPPER: u64 = 0xFFFF_FFFF_8000_0000;
const MT_LOWER: u64 = 0x7FFF_FFFF;

/// The 64-bit Mersenne Twister with the standard parameters and seeding (`std::mt19937_64`).
#[derive(Clone)]
pub struct Mt64 {
    state: Box<[u64; MT_N]>,
    index: usize,
}

impl std::fmt::Debug for Mt64 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mt64").field("index", &self.index).finish_non_exhaustive()
    }
}

impl Mt64 {
    /// A generator seeded as `std::mt19937_64(seed)` is.
    pub fn new(seed: u64) -> Mt64 {
        let mut state = Box::new([0u64; MT_N]);
        let mut prev = seed;
        state[0] = seed;
        for (i, slot) in state.iter_mut().enumerate().skip(1) {
            prev = 6_364_136_223_846_793_005u64.wrapping_mul(prev ^ (prev >> 62)).wrapping_add(i as u64);
            *slot = prev;
        }
        Mt64 { state, index: MT_N }
    }

    fn twist(&mut self) {
        let s = &mut self.state;
        for i in 0..MT_N {
            let x = (s[i] & MT_UPPER) | (s[(i + 1) % MT_N] & MT_LOWER);
            let mut xa = x >> 1;
            if x & 1 != 0 {
                xa ^= MT_MATRIX_A;
            }
            s[i] = s[(i + MT_M) % MT_N] ^ xa;
        }
        self.index = 0;
    }

    /// Next 64-bit output.
    pub fn next_u64(&mut self) -> u64 {
        if self.index >= MT_N {
            self.twist();
        }
        let mut x = self.state[self.index];
        self.index += 1;
        x ^= (x >> 29) & 0x5555_5555_5555_5555;
        x ^= (x << 17) & 0x71D6_7FFF_EDA6_0000;
        x ^= (x << 37) & 0xFFF7_EEE0_0000_0000;
        x ^= x >> 43;
        x
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mt19937_64_matches_the_standard_reference_value() {
        // The C++ standard requires the 10000th output of a default-constructed (seed 5489) mt19937_64
        // to be this value.
        let mut r = Mt64::new(5489);
        let mut v = 0;
        for _ in 0..10_000 {
            v = r.next_u64();
        }
        assert_eq!(v, 9_981_545_732_273_789_042);
    }

    #[test]
    fn park_miller_matches_the_minimal_standard_check_value() {
        // Park & Miller's published check: seed 1, after 10000 steps the state is 1043618065.
        let mut r = LegacyRandom::new(1);
        let mut v = 0;
        for _ in 0..10_000 {
            v = r.next_u32();
        }
        assert_eq!(v, 1_043_618_065);
    }

    #[test]
    fn zero_park_miller_seed_is_replaced() {
        assert_eq!(LegacyRandom::new(0).next_u32(), LegacyRandom::new(1).next_u32());
    }
}
