//! Dev-only helpers for ShaleDB's tests: temporary directories, seeded randomness that replays from an
//! environment variable, random keys and values that collide often, a `BTreeMap` oracle ([`Model`]), the
//! crash oracle ([`history::History`]: is a recovered state a prefix of the acknowledged writes?), random
//! write workloads run against the engine ([`workload`]), the grammar-matches-docs check of every format
//! ([`grammar`]), the frozen fixture database ([`fixture`]), the db_stress-like driver behind `shaledb stress`
//! and the kill-loop test ([`stress`]), the fuzz drivers of every decoder ([`fuzz`]), and the recorder of
//! concurrent histories of a server checked for linearizability by Porcupine ([`lincheck`]).
//!
//! Replaying a failure: every test that draws its seed with [`seed_from_env`] prints it on stderr (shown when
//! the test fails); run it again with `SHALEDB_TEST_SEED=<seed>`. Longer runs: raise budgets read with
//! [`budget_from_env`], e.g. `SHALEDB_TORTURE_BUDGET=100000`.

#![deny(missing_docs)]

mod datagen;
pub mod fixture;
pub mod fuzz;
pub mod fuzz_db;
pub mod fuzz_ops;
pub mod grammar;
pub mod history;
pub mod lincheck;
mod model;
pub mod net;
pub mod stress;
pub mod workload;

pub use datagen::{random_key, random_value};
pub use history::{History, Mutation, Write};
pub use model::Model;
pub use rand;
pub use shaledb_vfs::{FaultError, FaultPlan, FsOp, MemFs, PowerLoss, Recorded};
pub use tempfile;

use rand::rngs::StdRng;
use rand::SeedableRng;

/// Environment variable that overrides the seed of [`seed_from_env`].
pub const SEED_VAR: &str = "SHALEDB_TEST_SEED";

/// A fresh temporary directory, removed when the returned guard drops.
///
/// # Panics
/// When the OS cannot make one: a test cannot run without it.
pub fn tempdir() -> tempfile::TempDir {
    match tempfile::tempdir() {
        Ok(dir) => dir,
        Err(e) => panic!("cannot create a temporary directory: {e}"),
    }
}

/// A deterministic random generator seeded with `seed`.
pub fn rng(seed: u64) -> StdRng {
    StdRng::seed_from_u64(seed)
}

/// The test seed: `SHALEDB_TEST_SEED` when set (decimal, or hex with `0x`), else `default`. The seed is
/// printed on stderr so a failing run can be replayed.
///
/// # Panics
/// When the variable is set but is not a number: silently ignoring a mistyped seed would replay the wrong run.
pub fn seed_from_env(default: u64) -> u64 {
    let seed = match std::env::var(SEED_VAR) {
        Ok(text) => match parse_u64(&text) {
            Some(seed) => seed,
            None => panic!("{SEED_VAR}={text:?} is not a decimal or 0x-hex u64"),
        },
        Err(_) => default,
    };
    eprintln!("{SEED_VAR}={seed}");
    seed
}

/// A work budget (operation count, iterations) read from environment variable `name`, else `default`; lets
/// CI run short and a soak run long with the same test.
///
/// # Panics
/// When the variable is set but is not a number.
pub fn budget_from_env(name: &str, default: u64) -> u64 {
    match std::env::var(name) {
        Ok(text) => match parse_u64(&text) {
            Some(budget) => budget,
            None => panic!("{name}={text:?} is not a decimal or 0x-hex u64"),
        },
        Err(_) => default,
    }
}

fn parse_u64(text: &str) -> Option<u64> {
    let text = text.trim().replace('_', "");
    match text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => text.parse().ok(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::Rng;

    #[test]
    fn rng_is_deterministic_per_seed() {
        let draw = |seed| {
            let mut r = rng(seed);
            (0..4).map(|_| r.gen()).collect::<Vec<u64>>()
        };
        assert_eq!(draw(7), draw(7));
        assert_ne!(draw(7), draw(8));
    }

    #[test]
    fn parse_accepts_decimal_hex_and_underscores() {
        assert_eq!(parse_u64("42"), Some(42));
        assert_eq!(parse_u64(" 0x2A "), Some(42));
        assert_eq!(parse_u64("1_000"), Some(1000));
        assert_eq!(parse_u64("forty"), None);
        assert_eq!(parse_u64(""), None);
    }

    // Each env test uses its own variable name: tests run in parallel threads of one process.
    #[test]
    fn budget_reads_the_named_variable() {
        let name = "SHALEDB_TESTKIT_SELFTEST_BUDGET";
        assert_eq!(budget_from_env(name, 5), 5);
        std::env::set_var(name, "123");
        assert_eq!(budget_from_env(name, 5), 123);
        std::env::remove_var(name);
    }

    #[test]
    #[should_panic(expected = "is not a decimal")]
    fn malformed_budget_panics() {
        let name = "SHALEDB_TESTKIT_SELFTEST_BAD_BUDGET";
        std::env::set_var(name, "lots");
        budget_from_env(name, 5);
    }

    #[test]
    fn seed_defaults_when_unset() {
        // SHALEDB_TEST_SEED may be set by whoever runs the suite; then it wins, as intended.
        let expected = std::env::var(SEED_VAR).ok().and_then(|t| parse_u64(&t)).unwrap_or(99);
        assert_eq!(seed_from_env(99), expected);
    }

    #[test]
    fn tempdir_exists_until_dropped() {
        let dir = tempdir();
        let path = dir.path().to_path_buf();
        assert!(path.is_dir());
        drop(dir);
        assert!(!path.exists());
    }
}
