//! `shaledb stress`: db_stress-like random operations on a real directory, with an expected-state file that
//! survives the process (see `shaledb_testkit::stress`). Every start first verifies the database against that
//! file, so killing the process with SIGKILL and starting it again checks the recovery; `scripts/crash-loop`
//! does that for hours.
//!
//! A directory holding a database the driver did not create (a key it never writes, or keys without an
//! expected-state file) is refused in one line, "not a stress database", before anything is opened for
//! writing; `--destroy` does not delete such a database either. Verification failures are printed up to
//! `--max-problems`, then counted. `--verify-only` on a directory without a database (or a missing one) is
//! refused in one line too, creating nothing.
//!
//! Exit codes: 0 success, 1 the database does not hold what it must, 2 an error (I/O, engine, not a stress
//! database).

use anyhow::Context;
use shaledb_testkit::stress::{self, StressConfig, StressError};
use std::path::PathBuf;
use std::time::Duration;

/// Arguments of `shaledb stress`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The database directory (created when missing). `--path DB`, the old spelling, is accepted until the
    /// next release.
    pub path: PathBuf,
    /// The expected-state file [default: PATH.expected].
    #[arg(long)]
    pub expected: Option<PathBuf>,
    /// Writer threads.
    #[arg(long, default_value_t = 4)]
    pub threads: usize,
    /// Size of the key space.
    #[arg(long, default_value_t = 10_000)]
    pub keys: u32,
    /// Operations per thread (0: until --duration ends or the process is killed).
    #[arg(long, default_value_t = 10_000)]
    pub ops: u64,
    /// Stop after this many seconds (0: no time limit).
    #[arg(long, default_value_t = 0.0)]
    pub duration: f64,
    /// Seed of the operation mix.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Largest value in bytes.
    #[arg(long, default_value_t = 100)]
    pub max_value: usize,
    /// One write in this many is synced (0: none).
    #[arg(long, default_value_t = 100)]
    pub sync_one_in: u32,
    /// Memtable size in bytes (small: flushes and compactions all the time).
    #[arg(long, default_value_t = 64 << 10)]
    pub write_buffer_size: usize,
    /// Close and reopen the database this many times during the run.
    #[arg(long, default_value_t = 0)]
    pub reopen: u32,
    /// Only open the database and verify it against the expected state.
    #[arg(long)]
    pub verify_only: bool,
    /// Delete the database and its expected-state file first (only a database this command created).
    #[arg(long)]
    pub destroy: bool,
    /// Write the tables of flushes and compactions with O_DIRECT, and read compaction inputs with it (the
    /// engine's `use_direct_io_for_flush_and_compaction`); a file system that refuses O_DIRECT is an error.
    #[arg(long)]
    pub direct_io_for_flush_and_compaction: bool,
    /// Column families besides the default one (`cf1`, `cf2`, ...): key `k` lives in family
    /// `k % (N + 1)`, multi-key writes are batches across families. A database must keep the same number
    /// across runs.
    #[arg(long, default_value_t = 0)]
    pub column_families: u32,
    /// Print at most this many verification failures, then their count (0: all).
    #[arg(long, default_value_t = 20)]
    pub max_problems: usize,
}

impl Args {
    /// The driver's configuration.
    pub fn config(&self) -> StressConfig {
        StressConfig {
            path: self.path.clone(),
            expected: self.expected.clone(),
            threads: self.threads,
            keys: self.keys,
            ops_per_thread: self.ops,
            duration: (self.duration > 0.0).then(|| Duration::from_secs_f64(self.duration)),
            seed: self.seed,
            max_value: self.max_value,
            sync_one_in: self.sync_one_in,
            write_buffer_size: self.write_buffer_size,
            reopens: self.reopen,
            verify_only: self.verify_only,
            direct_io_for_flush_and_compaction: self.direct_io_for_flush_and_compaction,
            column_families: self.column_families,
        }
    }
}

/// Runs `shaledb stress`.
pub fn run(args: Args) -> anyhow::Result<i32> {
    let cfg = args.config();
    if args.verify_only && !cfg.path.join("CURRENT").exists() {
        // Verifying reads what an earlier run left: with nothing there, nothing is created to verify.
        let what = if cfg.path.exists() { "holds no database (no CURRENT)" } else { "does not exist" };
        eprintln!(
            "stress: {} {what}: --verify-only checks an existing stress database and creates nothing",
            cfg.path.display()
        );
        return Ok(2);
    }
    if let Some(why) = not_a_stress_db(&cfg, !args.destroy) {
        eprintln!("stress: {} is not a stress database: {why}", cfg.path.display());
        return Ok(2);
    }
    if args.destroy {
        stress::destroy(&cfg)
            .with_context(|| format!("destroying {} and {}", cfg.path.display(), cfg.expected_path().display()))?;
    }
    match stress::run(&cfg) {
        Ok(s) => {
            let opens: Vec<String> = s.open_times.iter().map(|t| format!("{:.1}", t.as_secs_f64() * 1e3)).collect();
            println!("stress: ok, {} ops, open ms [{}]", s.ops, opens.join(", "));
            Ok(0)
        }
        Err(StressError::Verify(problems)) => {
            print_problems(&problems, args.max_problems);
            Ok(1)
        }
        Err(e) => {
            eprintln!("stress: error: {e}");
            Ok(2)
        }
    }
}

/// The first `max` problems (0: all), a count of the rest, and the total.
fn print_problems(problems: &[String], max: usize) {
    let shown = if max == 0 { problems.len() } else { max.min(problems.len()) };
    for p in &problems[..shown] {
        println!("stress: FAIL {p}");
    }
    if shown < problems.len() {
        println!("stress: ... {} more problems not shown (--max-problems {max}; 0 shows all)", problems.len() - shown);
    }
    println!("stress: verification failed: {} problems", problems.len());
}

/// Why the directory of `cfg` holds a database this driver did not create, in one line; `None` when it holds
/// none, or one with only the driver's keys (and, with `need_expected`, its expected-state file). The check
/// reads through a read-only open, so it writes nothing; a database that cannot be opened that way is left to
/// the driver's own open, which reports why.
fn not_a_stress_db(cfg: &StressConfig, need_expected: bool) -> Option<String> {
    if !cfg.path.join("CURRENT").exists() {
        return None;
    }
    // The driver's options: its merge operator, without which a key holding merges ends the scan.
    let db = shaledb::Db::open_read_only(&cfg.path, cfg.options()).ok()?;
    let mut it = db.cursor();
    it.seek_to_first();
    let mut any = false;
    while it.valid() {
        if stress::key_index(it.key()).is_none() {
            let key = String::from_utf8_lossy(it.key());
            return Some(format!("it holds the key {key:?}, which stress never writes (keys are s<number>)"));
        }
        any = true;
        it.next();
    }
    if need_expected && any && !cfg.expected_path().exists() {
        return Some(format!("it holds keys and there is no expected-state file {}", cfg.expected_path().display()));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: Args,
    }

    #[test]
    fn flags_map_to_the_config() {
        let cli = Cli::parse_from(["x", "/tmp/s", "--threads", "2", "--duration", "1.5", "--verify-only"]);
        let c = cli.args.config();
        assert_eq!(c.path, PathBuf::from("/tmp/s"));
        assert_eq!(c.expected_path(), PathBuf::from("/tmp/s.expected"));
        assert_eq!(c.threads, 2);
        assert_eq!(c.duration, Some(Duration::from_millis(1500)));
        assert!(c.verify_only);
        let c = Cli::parse_from(["x", "p"]).args.config();
        assert_eq!((c.duration, c.ops_per_thread), (None, 10_000));
    }

    #[test]
    fn run_and_verify_exit_codes() {
        let dir = std::env::temp_dir().join(format!("shaledb-cli-stress-{}", std::process::id()));
        let path = dir.join("db");
        let base = ["x", path.to_str().unwrap_or("db"), "--keys", "200", "--threads", "2"];
        let run_with = |extra: &[&str]| {
            let argv: Vec<&str> = base.iter().chain(extra).copied().collect();
            run(Cli::parse_from(argv).args).unwrap()
        };
        assert_eq!(run_with(&["--ops", "200", "--destroy"]), 0);
        assert_eq!(run_with(&["--verify-only"]), 0);
        // A different key space than the expected state was written for: a verification failure.
        let argv = ["x", path.to_str().unwrap_or("db"), "--keys", "100", "--verify-only"];
        assert_eq!(run(Cli::parse_from(argv).args).unwrap(), 1);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
