//! The sbtest schema and sysbench's values (oltp_common.lua): `c` and `pad` are groups of 11 random decimal
//! digits separated by `-` (10 groups = 119 characters for `c`, 5 groups = 59 characters for `pad`, stored in
//! `CHAR(120)` and `CHAR(60)`), `k` is a random integer in `1..=table_size`, and ids are drawn from the
//! uniform distribution (`--rand-type=uniform`, as the seed's scripts pass it).

use crate::table_suites::table::{Row, TableDef, Value};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

/// Groups of digits in `c`.
pub const C_GROUPS: usize = 10;
/// Groups of digits in `pad`.
pub const PAD_GROUPS: usize = 5;
/// Digits per group.
pub const GROUP_DIGITS: usize = 11;
/// Length of a generated `c` (`###########-` x 9 + `###########`).
pub const C_LEN: usize = C_GROUPS * GROUP_DIGITS + C_GROUPS - 1;
/// Length of a generated `pad`.
pub const PAD_LEN: usize = PAD_GROUPS * GROUP_DIGITS + PAD_GROUPS - 1;
/// Declared width of `c` (`CHAR(120)`).
pub const C_WIDTH: u16 = 120;
/// Declared width of `pad` (`CHAR(60)`).
pub const PAD_WIDTH: u16 = 60;

/// Column positions in a row.
pub const COL_ID: usize = 0;
/// `k`.
pub const COL_K: usize = 1;
/// `c`.
pub const COL_C: usize = 2;
/// `pad`.
pub const COL_PAD: usize = 3;

/// The schema of `sbtest<n>` (n from 1): `id INT` primary key, `k INT` with a secondary index, `c CHAR(120)`,
/// `pad CHAR(60)` (the table layer's [`TableDef::sbtest`]; index ids distinct across tables).
pub fn sbtest_def(n: u16) -> TableDef {
    TableDef::sbtest(n)
}

/// A client's random numbers: sysbench's `rand.uniform`, `rand.default` (uniform here) and `rand.string`.
pub struct SbRand {
    rng: SmallRng,
}

impl SbRand {
    /// A generator seeded with `seed`.
    pub fn new(seed: u64) -> SbRand {
        SbRand { rng: SmallRng::seed_from_u64(seed) }
    }

    /// Uniform in `lo..=hi` (`lo` when `hi < lo`).
    pub fn uniform(&mut self, lo: i64, hi: i64) -> i64 {
        if hi <= lo {
            lo
        } else {
            self.rng.gen_range(lo..=hi)
        }
    }

    /// `groups` groups of 11 random digits separated by `-` (sysbench's `rand.string` of a `#` template).
    pub fn digit_groups(&mut self, groups: usize) -> Vec<u8> {
        let mut s = Vec::with_capacity(groups * (GROUP_DIGITS + 1));
        for g in 0..groups {
            if g > 0 {
                s.push(b'-');
            }
            for _ in 0..GROUP_DIGITS {
                s.push(b'0' + self.rng.gen_range(0..10u8));
            }
        }
        s
    }

    /// A value for `c`.
    pub fn c_value(&mut self) -> Vec<u8> {
        self.digit_groups(C_GROUPS)
    }

    /// A value for `pad`.
    pub fn pad_value(&mut self) -> Vec<u8> {
        self.digit_groups(PAD_GROUPS)
    }
}

/// A row as sysbench's prepare writes it: `(id, k = rand(1, table_size), c, pad)`.
pub fn prepare_row(r: &mut SbRand, id: i64, table_size: i64) -> Row {
    let c = r.c_value();
    let pad = r.pad_value();
    let k = r.uniform(1, table_size);
    vec![Value::Int(id), Value::Int(k), Value::Str(c), Value::Str(pad)]
}

/// Seed of a client: distinct per run seed, configuration, engine-independent (both engines draw the same
/// numbers), test and thread.
pub fn client_seed(base: u64, config: usize, test: usize, thread: usize) -> u64 {
    // SplitMix64 finaliser over the packed inputs, so nearby inputs give unrelated streams.
    let mut z = base
        ^ (config as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)
        ^ (test as u64).wrapping_mul(0xC2B2_AE3D_27D4_EB4F)
        ^ (thread as u64).wrapping_mul(0x1656_67B1_9E37_79F9);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn is_digit_groups(s: &[u8], groups: usize) -> bool {
        let parts: Vec<&[u8]> = s.split(|b| *b == b'-').collect();
        parts.len() == groups && parts.iter().all(|p| p.len() == GROUP_DIGITS && p.iter().all(u8::is_ascii_digit))
    }

    #[test]
    fn c_and_pad_have_sysbench_format() {
        assert_eq!(C_LEN, 119);
        assert_eq!(PAD_LEN, 59);
        let mut r = SbRand::new(7);
        for _ in 0..100 {
            let c = r.c_value();
            let pad = r.pad_value();
            assert_eq!(c.len(), C_LEN);
            assert_eq!(pad.len(), PAD_LEN);
            assert!(is_digit_groups(&c, 10), "{}", String::from_utf8_lossy(&c));
            assert!(is_digit_groups(&pad, 5), "{}", String::from_utf8_lossy(&pad));
            assert!(c.len() <= C_WIDTH as usize && pad.len() <= PAD_WIDTH as usize);
        }
    }

    #[test]
    fn digits_are_spread() {
        let mut r = SbRand::new(1);
        let mut seen = [0u32; 10];
        for _ in 0..200 {
            for b in r.c_value() {
                if b != b'-' {
                    seen[(b - b'0') as usize] += 1;
                }
            }
        }
        // 22,000 digits: each digit about 2,200 times.
        assert!(seen.iter().all(|n| (1_800..2_600).contains(n)), "{seen:?}");
    }

    #[test]
    fn prepare_rows_follow_the_schema() {
        let mut r = SbRand::new(3);
        let mut ks = std::collections::BTreeSet::new();
        for id in 1..=500 {
            let row = prepare_row(&mut r, id, 1000);
            assert_eq!(row.len(), 4);
            assert_eq!(row[COL_ID], Value::Int(id));
            let Value::Int(k) = row[COL_K] else { panic!("k is not an Int: {:?}", row[COL_K]) };
            assert!((1..=1000).contains(&k));
            ks.insert(k);
            assert!(matches!(&row[COL_C], Value::Str(c) if c.len() == C_LEN));
            assert!(matches!(&row[COL_PAD], Value::Str(p) if p.len() == PAD_LEN));
        }
        // Uniform k over 1..=1000: 500 draws give roughly 390 distinct values; a constant would give 1.
        assert!(ks.len() > 300, "{}", ks.len());
    }

    #[test]
    fn schema_matches_the_column_positions() {
        use crate::table_suites::table::ColumnType;
        let a = sbtest_def(1);
        let b = sbtest_def(2);
        assert_eq!(a.name, "sbtest1");
        let ids = [a.primary.id, a.secondary[0].id, b.primary.id, b.secondary[0].id];
        let set: std::collections::BTreeSet<_> = ids.iter().collect();
        assert_eq!(set.len(), 4);
        assert_eq!(a.columns[COL_ID].name, "id");
        assert_eq!(a.columns[COL_K].name, "k");
        assert_eq!(a.primary.columns, vec![COL_ID]);
        assert_eq!(a.columns[COL_C].ty, ColumnType::Char(120));
        assert_eq!(a.columns[COL_PAD].ty, ColumnType::Char(60));
        assert_eq!(a.secondary[0].columns, vec![COL_K]);
    }

    #[test]
    fn uniform_bounds_and_seeds() {
        let mut r = SbRand::new(9);
        for _ in 0..1000 {
            let v = r.uniform(5, 8);
            assert!((5..=8).contains(&v));
        }
        assert_eq!(r.uniform(4, 4), 4);
        assert_eq!(r.uniform(4, 1), 4);
        assert_ne!(client_seed(1, 0, 0, 0), client_seed(1, 0, 0, 1));
        assert_ne!(client_seed(1, 0, 1, 0), client_seed(1, 1, 0, 0));
        assert_eq!(client_seed(1, 2, 3, 4), client_seed(1, 2, 3, 4));
    }
}
