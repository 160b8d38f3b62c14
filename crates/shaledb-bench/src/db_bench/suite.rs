//! The suites made of db_bench steps: RocksDB's benchmark.sh sequence and the merge-operator comparison.
//!
//! `rocksdb` is RocksDB's `tools/benchmark.sh` sequence on one database (from seed 000): bulkload (fillrandom
//! with the WAL off and automatic compaction deferred, then a full compaction), overwrite,
//! readwhilewriting and readrandom, each a separate open of the database as benchmark.sh runs a separate
//! db_bench per step, then benchmark.sh's summary table. `merge` measures counter updates by
//! read-modify-write against a merge operator (from seed 004): updaterandom against mergerandom with
//! `uint64add` on fresh databases, one thread, WAL off, 8-byte values.

use crate::db_bench::flags::{parse_bool, BenchFlags};
use crate::db_bench::runner::Runner;
use crate::db_bench::workloads::Kind;
use crate::engine::{Engine, EngineSample};
use crate::reporting::report::{self, BenchResult};
use crate::{BenchError, Result};
use std::fmt::Write as _;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// Which suite.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum SuiteKind {
    /// RocksDB's benchmark.sh sequence: bulkload, overwrite, readwhilewriting, readrandom, and its summary table.
    Rocksdb,
    /// Counter updates: updaterandom (read, add, write back) against mergerandom (a uint64add merge operand).
    Merge,
}

/// `shaledb bench suite` arguments. The sizes take benchmark.sh's environment variables too; defaults are
/// benchmark.sh's scaled to a 2-core machine with a few GB of RAM.
#[derive(clap::Args, Clone, Debug, serde::Serialize)]
#[command(rename_all = "snake_case")]
pub struct SuiteArgs {
    /// The suite to run (the subcommand's name).
    #[arg(skip = SuiteKind::Rocksdb)]
    pub suite: SuiteKind,
    /// Engines to run the suite on, one after the other: shaledb, rocksdb (comma-separated).
    #[arg(long, value_enum, value_delimiter = ',', default_value = "shaledb")]
    pub engine: Vec<crate::engine::EngineKind>,
    /// Keys (benchmark.sh NUM_KEYS). Default: 2000000 (rocksdb), 1000000 (merge).
    #[arg(long, visible_alias = "num", env = "NUM_KEYS")]
    pub num_keys: Option<u64>,
    /// Threads of the multi-threaded steps (NUM_THREADS). Default: 2.
    #[arg(long, env = "NUM_THREADS")]
    pub num_threads: Option<usize>,
    /// Block cache bytes (CACHE_SIZE). Default: 64 MiB.
    #[arg(long, env = "CACHE_SIZE")]
    pub cache_size: Option<u64>,
    /// Seconds per timed step; 0 runs each step by count (DURATION). Default: 30.
    #[arg(long, env = "DURATION")]
    pub duration: Option<u64>,
    /// Value bytes (VALUE_SIZE). Default: 400 (rocksdb), 8 (merge).
    #[arg(long, visible_alias = "value_size", env = "VALUE_SIZE")]
    pub value_size: Option<usize>,
    /// Key bytes (KEY_SIZE). Default: 20 (rocksdb), 16 (merge).
    #[arg(long, visible_alias = "key_size", env = "KEY_SIZE")]
    pub key_size: Option<usize>,
    /// Data block bytes (BLOCK_SIZE). Default: 8192 (rocksdb), 65536 (merge).
    #[arg(long, visible_alias = "block_size", env = "BLOCK_SIZE")]
    pub block_size: Option<usize>,
    /// Compression (COMPRESSION_TYPE). Default: zstd (rocksdb), snappy (merge).
    #[arg(long, visible_alias = "compression_type", env = "COMPRESSION_TYPE")]
    pub compression: Option<String>,
    /// readwhilewriting's writer limit in MB/s; 0 is unlimited (MB_WRITE_PER_SEC). Default: 0.
    #[arg(long, env = "MB_WRITE_PER_SEC")]
    pub mb_write_per_sec: Option<u64>,
    /// Do not fsync the multi-threaded steps' writes (DB_BENCH_NO_SYNC; benchmark.sh syncs by default).
    #[arg(long, env = "DB_BENCH_NO_SYNC", num_args = 0..=1, default_missing_value = "true", value_parser = parse_bool)]
    pub no_sync: Option<bool>,
    /// Memtable bytes. Default: 32 MiB (benchmark.sh's 128 MiB / 4).
    #[arg(long)]
    pub write_buffer_size: Option<usize>,
    /// Compaction output file bytes. Default: 32 MiB.
    #[arg(long)]
    pub target_file_size_base: Option<u64>,
    /// L1 target bytes. Default: 256 MiB (benchmark.sh's 1 GiB / 4).
    #[arg(long)]
    pub max_bytes_for_level_base: Option<u64>,
    /// Background jobs. Default: 2.
    #[arg(long)]
    pub max_background_jobs: Option<usize>,
    /// Seed base; 0 derives it from the clock.
    #[arg(long, default_value_t = 0, allow_negative_numbers = true)]
    pub seed: i64,
    /// Database directory. Default: a new temporary one, removed at the end. A --db that holds a database is
    /// refused unless --use_existing_db=0 is given; one holding other files is refused.
    #[arg(long)]
    pub db: Option<PathBuf>,
    /// 0: delete the database at --db first (only its files), saying so once. Without it a --db holding a
    /// database is refused and nothing is deleted. 1 is refused: the suite loads its own data.
    #[arg(long, num_args = 0..=1, default_missing_value = "true", value_parser = parse_bool)]
    pub use_existing_db: Option<bool>,
    /// Set after the first engine's run on the same --db: that database is the suite's own. Not a flag.
    #[arg(skip)]
    #[serde(skip)]
    pub db_made_by_bench: bool,
    /// Write every step's figures and the summary rows here as JSON.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Write each step's plots into this directory.
    #[arg(long)]
    pub plot: Option<PathBuf>,
    /// Progress bar on stderr.
    #[arg(long, default_value_t = true, num_args = 0..=1, default_missing_value = "true", value_parser = parse_bool)]
    pub progress: bool,
}

/// One row of benchmark.sh's summary table.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct SummaryRow {
    /// Step name.
    pub test: String,
    /// `ops/sec`.
    pub ops_sec: u64,
    /// `mb/sec`.
    pub mb_sec: f64,
    /// `Size-GB`: live bytes in all levels.
    pub size_gb: f64,
    /// `L0_GB`: bytes written by flushes.
    pub l0_gb: f64,
    /// `Sum_GB`: bytes written by flushes and compactions.
    pub sum_gb: f64,
    /// `W-Amp`: Sum_GB / L0_GB.
    pub w_amp: f64,
    /// `W-MB/s`: Sum_GB * 1024 / uptime.
    pub w_mb_s: f64,
    /// `usec/op`.
    pub usec_op: f64,
    /// `p50` (of the last histogram printed).
    pub p50: f64,
    /// `p75`.
    pub p75: f64,
    /// `p99`.
    pub p99: f64,
    /// `p99.9`.
    pub p999: f64,
    /// `p99.99`.
    pub p9999: f64,
    /// `Uptime`: seconds the database was open for the step.
    pub uptime: f64,
    /// `Stall-time`.
    pub stall_time: String,
    /// `Stall%`.
    pub stall_pct: f64,
    /// `du -s -k`.
    pub du_k: u64,
}

const GB: f64 = 1024.0 * 1024.0 * 1024.0;

/// Computes a summary row as benchmark.sh does from db_bench's output (see BENCHMARKS.md).
pub fn summary_row(
    test: &str,
    r: &BenchResult,
    last_op_latency: crate::reporting::histogram::Percentiles,
    s: &EngineSample,
    du_k: u64,
) -> SummaryRow {
    let uptime = s.uptime_secs.max(1e-3);
    let sum_gb = s.sum_write_bytes() as f64 / GB;
    SummaryRow {
        test: test.to_string(),
        ops_sec: r.ops_per_sec as u64,
        mb_sec: r.mb_per_sec.unwrap_or(0.0),
        size_gb: s.total_bytes() as f64 / GB,
        l0_gb: s.l0_write_bytes() as f64 / GB,
        sum_gb,
        w_amp: report::w_amp(s),
        w_mb_s: sum_gb * 1024.0 / uptime,
        usec_op: r.micros_per_op,
        p50: last_op_latency.p50,
        p75: last_op_latency.p75,
        p99: last_op_latency.p99,
        p999: last_op_latency.p999,
        p9999: last_op_latency.p9999,
        uptime,
        stall_time: report::human_micros(s.stall_micros).trim_end_matches(" H:M:S").to_string(),
        stall_pct: s.stall_micros as f64 / 10_000.0 / uptime,
        du_k,
    }
}

/// The table in the seed report's layout, one row per step.
pub fn summary_table(rows: &[SummaryRow]) -> String {
    let mut s = String::from(
        "Test | ops/sec | mb/sec | Size-GB | L0_GB | Sum_GB | W-Amp | W-MB/s | usec/op | p50 | p75 | p99 | p99.9 | p99.99 | Uptime | Stall-time | Stall% | du -s -k |\n",
    );
    s.push_str(&"---|".repeat(18));
    s.push('\n');
    for r in rows {
        let _ = writeln!(
            s,
            "{} | {} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {:.0} | {:.0} | {:.0} | {:.0} | {} | {:.1} | {} |",
            r.test, r.ops_sec, r.mb_sec, r.size_gb, r.l0_gb, r.sum_gb, r.w_amp, r.w_mb_s, r.usec_op, r.p50, r.p75, r.p99,
            r.p999, r.p9999, r.uptime, r.stall_time, r.stall_pct, r.du_k
        );
    }
    s
}

/// What a suite produced.
#[derive(Clone, Debug, serde::Serialize)]
pub struct SuiteReport {
    /// The suite.
    pub suite: SuiteKind,
    /// One row per step.
    pub rows: Vec<SummaryRow>,
    /// Every step's full result.
    pub results: Vec<BenchResult>,
    /// merge: mergerandom ops/sec over updaterandom ops/sec.
    pub speedup: Option<f64>,
}

struct Step {
    test: &'static str,
    flags: BenchFlags,
}

fn base_flags(a: &SuiteArgs, path: &Path) -> BenchFlags {
    let merge = a.suite == SuiteKind::Merge;
    let mut f = BenchFlags {
        db: Some(path.to_path_buf()),
        num: a.num_keys.unwrap_or(if merge { 1_000_000 } else { 2_000_000 }).max(1) as i64,
        key_size: a.key_size.unwrap_or(if merge { 16 } else { 20 }),
        value_size: a.value_size.unwrap_or(if merge { 8 } else { 400 }),
        block_size: a.block_size.unwrap_or(if merge { 65536 } else { 8192 }),
        cache_size: a.cache_size.unwrap_or(64 << 20),
        compression_type: a.compression.clone().unwrap_or_else(|| if merge { "snappy" } else { "zstd" }.into()),
        compression_ratio: 0.5,
        write_buffer_size: a.write_buffer_size.unwrap_or(32 << 20),
        target_file_size_base: a.target_file_size_base.unwrap_or(32 << 20),
        max_bytes_for_level_base: a.max_bytes_for_level_base.unwrap_or(256 << 20),
        max_background_jobs: a.max_background_jobs.unwrap_or(2),
        seed: a.seed,
        // run_suite has checked --db (or made the directory); from then on the database is the suite's.
        db_made_by_bench: true,
        histogram: true,
        progress: a.progress,
        plot: a.plot.clone(),
        ..BenchFlags::default()
    };
    if merge {
        // Seed 004's options.
        f.num_levels = 6;
        f.level0_file_num_compaction_trigger = 4;
        f.level0_slowdown_writes_trigger = 8;
        f.level0_stop_writes_trigger = 12;
        f.max_bytes_for_level_base = a.max_bytes_for_level_base.unwrap_or(10 << 20);
        f.min_level_to_compress = 2;
        f.disable_wal = true;
        f.threads = 1;
    } else {
        // benchmark.sh's const_params.
        f.num_levels = 6;
        f.level_compaction_dynamic_level_bytes = true;
        f.max_bytes_for_level_multiplier = 8.0;
        f.bloom_bits = 10.0;
        f.open_files = -1;
    }
    f
}

fn rocksdb_steps(a: &SuiteArgs, path: &Path) -> Vec<Step> {
    let base = base_flags(a, path);
    let threads = a.num_threads.unwrap_or(2).max(1);
    let duration = a.duration.unwrap_or(30);
    let sync = !a.no_sync.unwrap_or(false);
    // params_w: the L0 configuration of the timed steps.
    let params_w = |mut f: BenchFlags| {
        f.level0_file_num_compaction_trigger = 4;
        f.level0_slowdown_writes_trigger = 20;
        f.level0_stop_writes_trigger = 20;
        f.max_write_buffer_number = 8;
        f
    };
    let mut bulk = base.clone();
    bulk.benchmarks = "fillrandom".into();
    bulk.use_existing_db = None;
    bulk.disable_auto_compactions = true;
    bulk.sync = false;
    bulk.disable_wal = true;
    bulk.threads = 1;
    bulk.max_write_buffer_number = 8;
    bulk.level0_file_num_compaction_trigger = 10_000_000;
    bulk.level0_slowdown_writes_trigger = 10_000_000;
    bulk.level0_stop_writes_trigger = 10_000_000;
    let mut compact = params_w(base.clone());
    compact.benchmarks = "compact".into();
    compact.use_existing_db = Some(true);
    compact.disable_auto_compactions = true;
    compact.threads = 1;
    let timed = |name: &str, sync: bool| {
        let mut f = params_w(base.clone());
        f.benchmarks = name.into();
        f.use_existing_db = Some(true);
        f.sync = sync;
        f.threads = threads;
        f.duration = duration;
        f.merge_operator = "put".into();
        f
    };
    let mut rww = timed("readwhilewriting", sync);
    rww.benchmark_write_rate_limit = a.mb_write_per_sec.unwrap_or(0) * 1024 * 1024;
    vec![
        Step { test: "bulkload", flags: bulk },
        Step { test: "compact", flags: compact },
        Step { test: "overwrite", flags: timed("overwrite", sync) },
        Step { test: "readwhilewriting", flags: rww },
        Step { test: "readrandom", flags: timed("readrandom", false) },
    ]
}

fn merge_steps(a: &SuiteArgs, path: &Path) -> Vec<Step> {
    let base = base_flags(a, path);
    let mut update = base.clone();
    update.benchmarks = "updaterandom".into();
    update.duration = a.duration.unwrap_or(0);
    let mut merge = update.clone();
    merge.benchmarks = "mergerandom".into();
    merge.merge_operator = "uint64add".into();
    vec![Step { test: "updaterandom", flags: update }, Step { test: "mergerandom", flags: merge }]
}

/// Runs suite `a.suite` against engine `E`, printing each step's db_bench output and the summary to `out`.
pub fn run_suite<E: Engine>(a: &SuiteArgs, out: &mut dyn Write) -> Result<SuiteReport> {
    crate::db_bench::dbdir::check_suite_flag(a.use_existing_db)?;
    // A --db of the user's is checked before anything is done, and claimed (emptied with
    // --use_existing_db=0) after the output checks; the steps then empty it as their own.
    let claim = match &a.db {
        Some(p) if !a.db_made_by_bench => {
            crate::db_bench::dbdir::prepare(p, "db", a.use_existing_db, false, crate::db_bench::dbdir::Caller::Suite)?;
            Some(p)
        }
        _ => None,
    };
    if let Some(p) = &a.json {
        crate::db_bench::runner::check_output_file("json", p)?;
    }
    if let Some(d) = &a.plot {
        crate::db_bench::runner::check_output_dir("plot", d)?;
    }
    let tmp;
    let path = match &a.db {
        Some(p) => p.clone(),
        None => {
            tmp = tempfile::Builder::new().prefix("shaledb-suite-").tempdir().map_err(|source| BenchError::Io {
                what: "creating a temporary directory in",
                path: std::env::temp_dir(),
                cause: source,
            })?;
            tmp.path().to_path_buf()
        }
    };
    if let Some(p) = claim {
        crate::db_bench::dbdir::claim::<E>(p, a.use_existing_db)?;
    }
    let steps = match a.suite {
        SuiteKind::Rocksdb => rocksdb_steps(a, &path),
        SuiteKind::Merge => merge_steps(a, &path),
    };
    let mut rows = Vec::new();
    let mut results = Vec::new();
    let mut bulk_started = None;
    for step in steps {
        crate::table_suites::harness::print_heading(out, &format!("{} ({})", step.test, step.flags.benchmarks));
        let started = Instant::now();
        if step.test == "bulkload" {
            bulk_started = Some(started);
        }
        let mut runner = Runner::<E>::open(step.flags.clone(), out)?;
        runner.set_plot_index_base(results.len());
        let kind = Kind::from_name(&step.flags.benchmarks)
            .ok_or_else(|| BenchError::BadFlag { flag: "benchmarks".into(), msg: step.flags.benchmarks.clone() })?;
        let result = runner.run_one(kind)?;
        let sample = runner.db().map(|d| d.sample()).unwrap_or_default();
        runner.close()?;
        if step.test == "compact" {
            if let Some(t) = bulk_started {
                let _ = writeln!(out, "Complete bulkload in {} seconds", t.elapsed().as_secs());
            }
        }
        if let Some(r) = result {
            if step.test != "compact" {
                let last = last_histogram(&r);
                rows.push(summary_row(step.test, &r, last, &sample, crate::table_suites::measure::du_k(&path)));
            }
            results.push(r);
        }
    }
    let speedup = match a.suite {
        SuiteKind::Merge => {
            let ops = |n: &str| results.iter().find(|r| r.name == n).map(|r| r.ops_per_sec);
            match (ops("updaterandom"), ops("mergerandom")) {
                (Some(u), Some(m)) if u > 0.0 => Some(m / u),
                _ => None,
            }
        }
        SuiteKind::Rocksdb => None,
    };
    let _ = writeln!(out);
    let _ = write!(out, "{}", summary_table(&rows));
    if let Some(x) = speedup {
        for r in &results {
            let _ = writeln!(out, "{}", r.line);
        }
        let _ = writeln!(out, "merge operator speed-up (mergerandom / updaterandom ops/sec): {x:.2}x");
    }
    let report = SuiteReport { suite: a.suite, rows, results, speedup };
    crate::table_suites::harness::save_json(a.json.as_deref(), &report)?;
    Ok(report)
}

/// The percentiles benchmark.sh would scrape: the last `Percentiles:` line printed for the step.
fn last_histogram(r: &BenchResult) -> crate::reporting::histogram::Percentiles {
    r.latency_by_op.last().map(|(_, p)| *p).unwrap_or(r.latency)
}
