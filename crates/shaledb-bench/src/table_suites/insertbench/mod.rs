//! The insert benchmark (iibench; from seed 003) on the table layer, measuring inserts into indexed tables:
//! one table with an auto-increment primary key and three secondary indexes whose fields arrive in random
//! order, loaded by `--threads` inserters, then query steps where a rate-limited inserter runs beside covering
//! range queries on the secondary indexes; swept over concurrency x padding, every engine on a fresh database
//! per configuration, through [`harness::run_on`].
//!
//! Values are in [`data`], the load and query steps in `steps.rs`, figures, tables and plots in [`report`];
//! process counters come from [`crate::table_suites::measure`]. What each step runs and how each figure is
//! computed: BENCHMARKS.md, "insert benchmark suite".
//!
//! Secondary-index maintenance is blind: the table layer puts each index entry without reading the index
//! (the seed's point: RocksDB "doesn't read index pages during non-unique secondary index maintenance"). The
//! one read per inserted row is the primary key's uniqueness check
//! ([`Session::insert_many`](crate::table_suites::table::Session::insert_many)), a point read of a new key that is absent
//! by construction (auto-increment). It is kept, as MyRocks and MongoRocks keep it: with bloom filters it is
//! answered without reading a data block, and what it costs is part of what the suite measures (the bytes
//! read per insert show it).

pub mod data;
pub mod report;
mod steps;

use crate::db_bench::flags::BenchFlags;
use crate::engine::{Engine, EngineKind, WriteMode};
use crate::table_suites::harness::{self, human_bytes, open_engine, table_err, EngineJob, SuiteFlags};
use crate::table_suites::measure;
use crate::table_suites::table::Table;
use crate::{BenchError, Result};
use report::{ConfigResult, EngineRun, InsertReport};
use std::io::Write;
use std::path::Path;
use std::sync::atomic::AtomicU64;
use std::time::Instant;
use steps::{load_step, query_step};

/// An inserter keeps its rate when it achieves at least this fraction of it (within 5%).
pub const KEPT_RATE_FRACTION: f64 = 0.95;

/// Default `--engine`: both engines where this build has RocksDB.
const DEFAULT_ENGINES: &str = if cfg!(feature = "rocksdb") { "shaledb,rocksdb" } else { "shaledb" };

/// Which configurations run the query steps after their load.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum QueryConfigs {
    /// Only the first configuration (first thread count x first pad): the query steps once per engine.
    First,
    /// Every configuration.
    All,
    /// None: loads only.
    None,
}

/// `shaledb bench suite insert` arguments.
///
/// The defaults reproduce the seed's sweep (concurrency 1, 2, 4, 8 x padding 16, 64, 256, 1024 bytes) with
/// 500K rows per configuration against a 16 MiB block cache, so every configuration's database outgrows the
/// cache (from about 60 MB at pad 16 to 570 MB at pad 1024 before compression), with query steps of 30 s
/// at 100, 500 and 1000 inserted rows/s after the first configuration's load. A default run of both
/// engines on 2 cores takes about 20 minutes (BENCHMARKS.md).
#[derive(clap::Args, Clone, Debug, serde::Serialize)]
#[command(rename_all = "snake_case")]
pub struct InsertArgs {
    /// Engines, alternated per configuration (comma-separated): shaledb, rocksdb. Default: shaledb,rocksdb in a
    /// build with RocksDB, shaledb otherwise.
    #[arg(long, value_enum, value_delimiter = ',', default_value = DEFAULT_ENGINES)]
    pub engine: Vec<EngineKind>,
    /// Rows the load inserts per configuration.
    #[arg(long, default_value_t = 500_000)]
    pub rows: u64,
    /// Inserter threads of the load (comma-separated): each count is a configuration (with each --pad).
    #[arg(long, value_delimiter = ',', default_value = "1,2,4,8")]
    pub threads: Vec<usize>,
    /// Bytes of the padding column (comma-separated): each size is a configuration (with each --threads).
    /// Half of each pad is random bytes, half a repeated byte.
    #[arg(long, value_delimiter = ',', default_value = "16,64,256,1024")]
    pub pad: Vec<usize>,
    /// Rows per insert batch (one multi-row INSERT, one atomic write); iibench's default.
    #[arg(long, default_value_t = 1000)]
    pub rows_per_commit: usize,
    /// Seconds between insert-rate samples of the load (printed to stderr, kept in the JSON, plotted).
    #[arg(long, default_value_t = 1.0, allow_negative_numbers = true)]
    pub report_interval: f64,
    /// Rows per second of the background inserter, one query step per rate (comma-separated).
    #[arg(long, value_delimiter = ',', default_value = "100,500,1000")]
    pub query_insert_rates: Vec<u64>,
    /// Query threads of each query step.
    #[arg(long, default_value_t = 2)]
    pub query_threads: usize,
    /// Seconds each query step runs (the same flag as the other suites' `--duration`; `--query_duration` is a
    /// deprecated alias).
    #[arg(
        long = "duration",
        alias = "query_duration",
        value_name = "DURATION",
        default_value_t = 30.0,
        allow_negative_numbers = true
    )]
    pub query_duration: f64,
    /// Rows per query (iibench's LIMIT).
    #[arg(long, default_value_t = 10)]
    pub rows_per_query: usize,
    /// Configurations whose load is followed by the query steps: first (default: the first thread count
    /// with the first pad, so a default run is not 16 times as long), all, or none.
    #[arg(long, value_enum, default_value = "first")]
    pub query_configs: QueryConfigs,
    /// Block cache bytes (default small enough that every default configuration outgrows it).
    #[arg(long, default_value_t = 16 << 20)]
    pub cache_size: u64,
    /// fsync the WAL at each commit (default: WAL written, not synced).
    #[arg(long, default_value_t = false, num_args = 0..=1, default_missing_value = "true",
          value_parser = crate::db_bench::flags::parse_bool)]
    pub sync: bool,
    /// The flags every table suite takes: --db, --use_existing_db, --progress, --json, --plot, --seed.
    #[command(flatten)]
    #[serde(flatten)]
    pub common: SuiteFlags,
}

impl InsertArgs {
    /// Checks the values; the error names the flag.
    pub fn validate(&self) -> Result<()> {
        let bad = |flag: &str, msg: String| Err(BenchError::BadFlag { flag: flag.into(), msg });
        if self.engine.is_empty() {
            return bad("engine", "no engine given".into());
        }
        harness::check_available(&self.engine)?;
        for (i, e) in self.engine.iter().enumerate() {
            if self.engine[..i].contains(e) {
                return bad("engine", format!("{} listed twice", e.flag_name()));
            }
        }
        if !(1..=i64::MAX as u64 / 2).contains(&self.rows) {
            return bad("rows", format!("must be at least 1, got {}", self.rows));
        }
        if self.threads.is_empty() || self.threads.iter().any(|t| !(1..=1024).contains(t)) {
            return bad("threads", format!("each count must be in 1..=1024, got {:?}", self.threads));
        }
        if self.pad.is_empty() || self.pad.iter().any(|p| *p > data::MAX_PAD) {
            return bad("pad", format!("each size must be in 0..={}, got {:?}", data::MAX_PAD, self.pad));
        }
        if !(1..=1_000_000).contains(&self.rows_per_commit) {
            return bad("rows_per_commit", format!("must be in 1..=1000000, got {}", self.rows_per_commit));
        }
        if !(self.report_interval.is_finite() && self.report_interval >= 0.01 && self.report_interval <= 3600.0) {
            return bad(
                "report_interval",
                format!("must be a number of seconds in [0.01, 3600], got {}", self.report_interval),
            );
        }
        if self.query_insert_rates.is_empty() || self.query_insert_rates.iter().any(|r| !(1..=10_000_000).contains(r)) {
            return bad(
                "query_insert_rates",
                format!("each rate must be in 1..=10000000 rows/s, got {:?}", self.query_insert_rates),
            );
        }
        if !(1..=1024).contains(&self.query_threads) {
            return bad("query_threads", format!("must be in 1..=1024, got {}", self.query_threads));
        }
        if !(self.query_duration.is_finite() && self.query_duration > 0.0 && self.query_duration <= 86_400.0) {
            return bad("duration", format!("must be a number of seconds in (0, 86400], got {}", self.query_duration));
        }
        if !(1..=1_000_000).contains(&self.rows_per_query) {
            return bad("rows_per_query", format!("must be in 1..=1000000, got {}", self.rows_per_query));
        }
        if self.cache_size == 0 {
            return bad("cache_size", "must be at least 1 byte".into());
        }
        Ok(())
    }

    /// The write mode of every insert.
    pub fn write_mode(&self) -> WriteMode {
        WriteMode { sync: self.sync, disable_wal: false }
    }

    /// Whether configuration number `cfg` (run order) runs the query steps.
    pub fn queries_after(&self, cfg: usize) -> bool {
        match self.query_configs {
            QueryConfigs::First => cfg == 0,
            QueryConfigs::All => true,
            QueryConfigs::None => false,
        }
    }
}

/// Engine options of the suite, the same for every engine: MongoRocks' settings of 2015 (the RocksDB the
/// seed's insert benchmark ran, `rocks_engine.cpp`): 16 KiB blocks (not the 8 KiB of the seed's ForestDB
/// runs: MongoRocks chose 16), bloom filters of 10 bits per key, 64 MiB write buffers (4 of them),
/// level0_slowdown_writes_trigger 8, 64 MiB files, dynamic level sizes with a 512 MiB base, no compression
/// on L0 and L1 and Snappy below (MongoRocks' default `compression: snappy`), index and filter blocks held by
/// the open files rather than the cache (its table options' default). The block cache is `--cache_size`.
pub fn engine_flags(a: &InsertArgs, path: &Path) -> BenchFlags {
    let mut f = BenchFlags {
        db: Some(path.to_path_buf()),
        num: i64::try_from(a.rows).unwrap_or(i64::MAX).max(1),
        block_size: 16 << 10,
        bloom_bits: 10.0,
        cache_size: a.cache_size,
        cache_index_and_filter_blocks: false,
        write_buffer_size: 64 << 20,
        max_write_buffer_number: 4,
        level0_slowdown_writes_trigger: 8,
        target_file_size_base: 64 << 20,
        max_bytes_for_level_base: 512 << 20,
        level_compaction_dynamic_level_bytes: true,
        use_direct_reads: a.common.use_direct_reads,
        compression_type: "snappy".into(),
        sync: a.sync,
        progress: false,
        ..BenchFlags::default()
    };
    let levels: Vec<&str> = (0..f.num_levels).map(|l| if l < 2 { "none" } else { "snappy" }).collect();
    f.compression_per_level = levels.join(":");
    f
}

/// The options printed once and kept in the JSON.
fn option_list(f: &BenchFlags, a: &InsertArgs) -> Vec<(String, String)> {
    let names = "block_size bloom_bits cache_size cache_index_and_filter_blocks write_buffer_size \
         max_write_buffer_number level_compaction_dynamic_level_bytes max_bytes_for_level_base \
         target_file_size_base level0_file_num_compaction_trigger level0_slowdown_writes_trigger \
         level0_stop_writes_trigger compression_per_level max_background_jobs use_direct_reads";
    let wal = if a.sync { "on, fsync at each commit (--sync)" } else { "on, no fsync (--sync to fsync)" };
    harness::option_list(f, names, &[("wal", wal.into())])
}

/// Runs the suite, printing its tables to `out`.
pub fn run_insert(a: &InsertArgs, out: &mut dyn Write) -> Result<InsertReport> {
    a.validate()?;
    let (seed, dir) = a.common.start("shaledb-insert-", &a.engine)?;
    let base = dir.path();
    let sample_flags = engine_flags(a, base);
    sample_flags.validate()?;
    let mut report = InsertReport {
        args: serde_json::to_value(a).unwrap_or(serde_json::Value::Null),
        seed,
        engine_options: option_list(&sample_flags, a),
        configs: Vec::new(),
    };
    let _ = writeln!(
        out,
        "insert benchmark suite (the insert benchmark of the RocksDB, ForestDB and MongoDB report): {} rows per configuration, threads {:?} x pad {:?}, {} rows per \
         commit, engines {:?}, seed {seed}",
        a.rows,
        a.threads,
        a.pad,
        a.rows_per_commit,
        a.engine.iter().map(|e| e.flag_name()).collect::<Vec<_>>(),
    );
    let after = match a.query_configs {
        QueryConfigs::First => "after the first configuration's load",
        QueryConfigs::All => "after every configuration's load",
        QueryConfigs::None => "none (--query_configs none)",
    };
    let _ = writeln!(
        out,
        "query steps {after}: inserter at {:?} rows/s, {} query threads, {} s each, LIMIT {}",
        a.query_insert_rates, a.query_threads, a.query_duration, a.rows_per_query
    );
    harness::print_options(out, "engine options (every engine):", &report.engine_options);
    let _ = writeln!(out, "{}", report::LEGEND);
    harness::run_grid(
        &a.common,
        &a.engine,
        base,
        out,
        &mut report,
        (&a.pad, &a.threads),
        |pad, threads| format!("{threads} inserter thread(s) / pad {pad} bytes"),
        |cfg, pad, threads| InsertJob { a, seed, cfg, threads, pad, queries: a.queries_after(cfg) },
        |pad, threads, runs| ConfigResult::of_runs(threads, pad, runs),
    )?;
    let summary = ("insert rate (rows/s), the report's table", report::seed_table(&report));
    a.common.finish(out, Some(summary), &report, report::write_plots)?;
    Ok(report)
}

struct InsertJob<'a> {
    a: &'a InsertArgs,
    seed: u64,
    cfg: usize,
    threads: usize,
    pad: usize,
    queries: bool,
}

impl EngineJob for InsertJob<'_> {
    type Run = EngineRun;

    fn run<E: Engine>(self, path: &Path, out: &mut dyn Write) -> Result<EngineRun> {
        let InsertJob { a, seed, cfg, threads, pad, queries } = self;
        let flags = engine_flags(a, path);
        flags.validate()?;
        let table = Table::new(data::purchases_def(pad)).map_err(table_err("purchases_index schema"))?;
        let mut run = EngineRun {
            engine: E::name().to_lowercase(),
            name: E::name().into(),
            db: path.to_path_buf(),
            cache_bytes: a.cache_size,
            ..EngineRun::default()
        };
        let _ = writeln!(out, "--- {} ({threads} thread(s), pad {pad}) at {}", E::name(), path.display());
        let engine: E = open_engine(path, &flags)?;
        // Which library ran, as db_bench's header says it (RocksDB: the linked library's own version).
        let _ = writeln!(out, "{}:    version {}", E::name(), engine.version());
        let next_id = AtomicU64::new(1);
        let started = Instant::now();
        let bar = a.common.step_bar(E::name(), 1 + if queries { a.query_insert_rates.len() } else { 0 });

        bar.step("load");
        run.load = load_step(&engine, &table, a, seed, cfg, threads, pad, &next_id, started, path)?;
        let l = &run.load;
        let _ = writeln!(out, "{}", report::load_line(l, a.cache_size));
        let _ = writeln!(out, "{}", report::index_line(&l.index_sizes));
        bar.done();

        if queries {
            for (si, &rate) in a.query_insert_rates.iter().enumerate() {
                bar.step(&format!("q.{rate}"));
                let q = query_step(&engine, &table, a, seed, cfg, si + 1, rate, pad, &next_id, started, path)?;
                let _ = writeln!(out, "{}", report::query_line(&q));
                let _ = writeln!(out, "{}", report::index_line(&q.index_sizes));
                run.queries.push(q);
                bar.done();
            }
        }
        drop(bar);
        engine.close().map_err(|e| BenchError::engine("closing", e))?;
        run.db_bytes_end = measure::du_bytes(path);
        run.rows_end = run.load.rows + run.queries.iter().map(|q| q.rows_inserted).sum::<u64>();
        let _ = writeln!(out, "database at the end: {} (du); removed", human_bytes(run.db_bytes_end));
        Ok(run)
    }
}

#[cfg(test)]
mod tests;
