//! sysbench OLTP on the table layer (from seed 002, the MyRocks sysbench report): the sbtest tables stored as
//! keys (as MyRocks stores them), the seed's tests in its order, each engine on a fresh database per
//! configuration (compression setting x client threads), the same generic code for every engine through
//! [`harness::run_on`].
//!
//! Statement shapes are in [`workload`], values in [`data`], a client thread and how it runs each statement in
//! `client.rs`, process and engine counters in [`measure`], tables, JSON and
//! plots in [`report`]. This file holds the arguments, the engine options and the run: configurations, the
//! load, the timed tests and the scans. What
//! each test runs and how each figure is computed: BENCHMARKS.md, "sysbench suite".

mod client;
pub mod data;
pub mod report;
pub mod workload;

use crate::db_bench::flags::BenchFlags;
use crate::engine::{Engine, EngineKind, WriteMode};
use crate::table_suites::harness::{self, open_engine, table_err, EngineJob, SuiteFlags};
use crate::table_suites::measure::{self, EngineDelta, OpCost};
use crate::table_suites::table::{Row, Session, SessionStats, Table, TableResult};
use crate::{BenchError, Result};
use client::{client, str_len, ClientTotals};
use data::{SbRand, COL_PAD};
use report::{ConfigResult, EngineRun, Interval, LoadResult, SysbenchReport, TestResult, Unit};
use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::time::{Duration, Instant};
use workload::{Kind, Shape, TestSpec};

/// Rows per multi-row INSERT of the load (sysbench's prepare sends multi-row INSERTs of about this many
/// sbtest rows per statement).
pub const LOAD_BATCH_ROWS: usize = 1000;

/// The compression settings of the seed.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum CompressionSetting {
    /// No compression on any level.
    None,
    /// None on L0 and L1, LZ4 on the middle levels, Zstandard on the bottommost level (MyRocks' setting).
    #[value(name = "lz4-zstd")]
    #[serde(rename = "lz4-zstd")]
    Lz4Zstd,
}

impl CompressionSetting {
    /// The name `--compression` takes.
    pub fn name(self) -> &'static str {
        match self {
            CompressionSetting::None => "none",
            CompressionSetting::Lz4Zstd => "lz4-zstd",
        }
    }

    /// `--compression_per_level` and `--bottommost_compression` for `levels` levels.
    pub fn per_level(self, levels: usize) -> (String, String) {
        match self {
            CompressionSetting::None => (String::new(), String::new()),
            CompressionSetting::Lz4Zstd => {
                let list: Vec<&str> = (0..levels).map(|l| if l < 2 { "none" } else { "lz4" }).collect();
                (list.join(":"), "zstd".into())
            }
        }
    }
}

/// `shaledb bench suite sysbench` arguments.
///
/// The defaults are the seed's shape scaled to this machine: 2 tables x 10M rows (about 4.4 GB of rows and
/// index entries before compression) against a 512 MiB cache with direct reads, 1 and 2 clients, 60 s per
/// test (the seed ran 600 s). A default run on 2 cores takes several hours per engine (BENCHMARKS.md).
#[derive(clap::Args, Clone, Debug, serde::Serialize)]
#[command(rename_all = "snake_case")]
pub struct SysbenchArgs {
    /// Engines, alternated per configuration: shaledb, rocksdb (comma-separated).
    #[arg(long, value_enum, value_delimiter = ',', default_value = "shaledb")]
    pub engine: Vec<EngineKind>,
    /// Tables (sbtest1..sbtestN).
    #[arg(long, default_value_t = 2)]
    pub tables: usize,
    /// Rows per table.
    #[arg(long, default_value_t = 10_000_000)]
    pub table_size: i64,
    /// Client threads per configuration (comma-separated): each count is a configuration.
    #[arg(long, value_delimiter = ',', default_value = "1,2")]
    pub threads: Vec<usize>,
    /// Seconds each test runs (scans run one full pass instead).
    #[arg(long, default_value_t = 60.0)]
    pub duration: f64,
    /// Compression settings (comma-separated): none, lz4-zstd (none on L0-L1, lz4 on the middle levels,
    /// zstd bottommost).
    #[arg(long, value_enum, value_delimiter = ',', default_value = "none,lz4-zstd")]
    pub compression: Vec<CompressionSetting>,
    /// Block cache bytes.
    #[arg(long, default_value_t = 512 << 20)]
    pub cache_size: u64,
    /// Keep index and filter blocks in the block cache (MyRocks' setting). With a cache of a few MiB RocksDB's
    /// LRU shards (512 KiB each) are smaller than one file's index and filter, so every read reloads them: use
    /// 0 there (they are then held by the open table files, outside the cache).
    #[arg(long, default_value_t = true, num_args = 0..=1, default_missing_value = "true",
          value_parser = crate::db_bench::flags::parse_bool)]
    pub cache_index_and_filter_blocks: bool,
    /// Iterator readahead bytes of the readahead scans (scan.ra*), which also reopen the database with
    /// advise_random_on_open=0.
    #[arg(long, default_value_t = 2 << 20)]
    pub readahead_size: usize,
    /// Tests to run (comma-separated names), always in sysbench's all_small.sh order; default all.
    #[arg(long, value_delimiter = ',')]
    pub tests: Vec<String>,
    /// Values per IN-list of random-points, hot-points and update-inlist (sysbench's all_small.sh passes 100).
    #[arg(long, default_value_t = 100)]
    pub random_points: usize,
    /// The flags every table suite takes: --db, --use_existing_db, --progress, --json, --plot, --seed.
    #[command(flatten)]
    #[serde(flatten)]
    pub common: SuiteFlags,
    /// Print statements per second every N seconds of each test to stderr (and keep them in the JSON); 0:
    /// off.
    #[arg(long, default_value_t = 0.0)]
    pub report_interval: f64,
}

impl SysbenchArgs {
    /// Checks the values; the error names the flag.
    pub fn validate(&self) -> Result<Vec<TestSpec>> {
        let bad = |flag: &str, msg: String| Err(BenchError::BadFlag { flag: flag.into(), msg });
        if self.engine.is_empty() {
            return bad("engine", "no engine given".into());
        }
        harness::check_available(&self.engine)?;
        if !(1..=1024).contains(&self.tables) {
            return bad("tables", format!("must be in 1..=1024, got {}", self.tables));
        }
        if !(1..=i64::from(i32::MAX) / 2).contains(&self.table_size) {
            return bad(
                "table_size",
                format!("must be in 1..={} (id is an INT), got {}", i32::MAX / 2, self.table_size),
            );
        }
        if self.threads.is_empty() || self.threads.iter().any(|t| !(1..=1024).contains(t)) {
            return bad("threads", format!("each count must be in 1..=1024, got {:?}", self.threads));
        }
        if !(self.duration.is_finite() && self.duration > 0.0 && self.duration <= 86_400.0) {
            return bad("duration", format!("must be a number of seconds in (0, 86400], got {}", self.duration));
        }
        if self.compression.is_empty() {
            return bad("compression", "no compression setting given".into());
        }
        if self.cache_size == 0 {
            return bad("cache_size", "must be at least 1 byte".into());
        }
        if self.readahead_size > 256 << 20 {
            return bad("readahead_size", format!("must be at most 256 MiB, got {}", self.readahead_size));
        }
        if !(1..=100_000).contains(&self.random_points) {
            return bad("random_points", format!("must be in 1..=100000, got {}", self.random_points));
        }
        if !(self.report_interval.is_finite() && self.report_interval >= 0.0) {
            return bad("report_interval", format!("must be a number of seconds >= 0, got {}", self.report_interval));
        }
        workload::select_tests(&self.tests).map_err(|msg| BenchError::BadFlag { flag: "tests".into(), msg })
    }
}

/// Engine options of the suite: BenchFlags' defaults with the seed's MyRocks-like settings, the same for every
/// engine; `readahead` gives the readahead scans' reopen (advise_random_on_open=0 and iterator readahead).
pub fn engine_flags(a: &SysbenchArgs, c: CompressionSetting, path: &Path, readahead: bool) -> BenchFlags {
    let mut f = BenchFlags {
        db: Some(path.to_path_buf()),
        num: (a.tables as i64).saturating_mul(a.table_size).max(1),
        block_size: 16 << 10,
        bloom_bits: 10.0,
        cache_size: a.cache_size,
        cache_index_and_filter_blocks: a.cache_index_and_filter_blocks,
        write_buffer_size: 64 << 20,
        level_compaction_dynamic_level_bytes: true,
        use_direct_reads: a.common.use_direct_reads,
        compression_type: "none".into(),
        advise_random_on_open: !readahead,
        readahead_size: if readahead { a.readahead_size } else { 0 },
        progress: false,
        ..BenchFlags::default()
    };
    let (levels, bottom) = c.per_level(f.num_levels);
    f.compression_per_level = levels;
    f.bottommost_compression = bottom;
    f
}

/// The options printed once and kept in the JSON.
fn option_list(f: &BenchFlags) -> Vec<(String, String)> {
    let names = "block_size bloom_bits cache_size cache_index_and_filter_blocks write_buffer_size \
         max_write_buffer_number level_compaction_dynamic_level_bytes max_bytes_for_level_base \
         max_bytes_for_level_multiplier target_file_size_base num_levels level0_file_num_compaction_trigger \
         max_background_jobs use_direct_reads";
    let notes = [
        ("advise_random_on_open", "1 (0 for scan.ra*)".into()),
        ("wal", "on, no fsync (the seed: binlog and redo log without fsync)".into()),
    ];
    harness::option_list(f, names, &notes)
}

/// Runs the suite, printing its tables to `out`.
pub fn run_sysbench(a: &SysbenchArgs, out: &mut dyn Write) -> Result<SysbenchReport> {
    let tests = a.validate()?;
    let (seed, dir) = a.common.start("shaledb-sysbench-", &a.engine)?;
    let base = dir.path();
    let sample_flags = engine_flags(a, CompressionSetting::None, base, false);
    sample_flags.validate()?;
    let mut report = SysbenchReport {
        args: serde_json::to_value(a).unwrap_or(serde_json::Value::Null),
        seed,
        engine_options: option_list(&sample_flags),
        configs: Vec::new(),
    };
    let _ = writeln!(
        out,
        "sysbench OLTP suite (the MyRocks sysbench report): {} tables x {} rows, threads {:?}, {} s per test, compression {:?}, engines {:?}, seed {seed}",
        a.tables,
        a.table_size,
        a.threads,
        a.duration,
        a.compression.iter().map(|c| c.name()).collect::<Vec<_>>(),
        a.engine.iter().map(|e| e.flag_name()).collect::<Vec<_>>(),
    );
    harness::print_options(out, "engine options (every engine):", &report.engine_options);
    let _ = writeln!(out, "tests: {}", tests.iter().map(|t| t.name).collect::<Vec<_>>().join(", "));
    harness::run_grid(
        &a.common,
        &a.engine,
        base,
        out,
        &mut report,
        (&a.compression, &a.threads),
        |comp, threads| format!("compression {} / {threads} client thread(s)", comp.name()),
        |cfg, comp, threads| SysbenchJob { a, tests: &tests, seed, cfg, comp, threads },
        |comp, threads, runs| ConfigResult::of_runs(comp.name(), threads, runs),
    )?;
    let summary = ("summary", report::summary_table(&report));
    a.common.finish(out, Some(summary), &report, report::write_plots)?;
    Ok(report)
}

struct SysbenchJob<'a> {
    a: &'a SysbenchArgs,
    tests: &'a [TestSpec],
    seed: u64,
    cfg: usize,
    comp: CompressionSetting,
    threads: usize,
}

impl EngineJob for SysbenchJob<'_> {
    type Run = EngineRun;

    fn run<E: Engine>(self, path: &Path, out: &mut dyn Write) -> Result<EngineRun> {
        let SysbenchJob { a, tests, seed, cfg, comp, threads } = self;
        let flags = engine_flags(a, comp, path, false);
        let flags_ra = engine_flags(a, comp, path, true);
        flags.validate()?;
        let tables: Vec<Table> = (1..=a.tables as u16)
            .map(|n| Table::new(data::sbtest_def(n)))
            .collect::<TableResult<_>>()
            .map_err(table_err("sbtest schema"))?;
        let next_ids: Vec<AtomicI64> = (0..a.tables).map(|_| AtomicI64::new(a.table_size + 1)).collect();
        let shape = Shape { tables: a.tables, table_size: a.table_size, points: a.random_points };
        let mut run = EngineRun {
            engine: E::name().to_lowercase(),
            name: E::name().into(),
            db: path.to_path_buf(),
            cache_bytes: a.cache_size,
            ..EngineRun::default()
        };
        let _ =
            writeln!(out, "--- {} (compression {}, {threads} thread(s)) at {}", E::name(), comp.name(), path.display());
        let mut engine: E = open_engine(path, &flags)?;
        // Which library ran, as db_bench's header says it (RocksDB: the linked library's own version).
        let _ = writeln!(out, "{}:    version {}", E::name(), engine.version());
        let bar = a.common.step_bar(E::name(), 1 + tests.len());

        // The load.
        bar.step("load");
        let (p0, e0) = (measure::sample(), engine.sample());
        let t0 = Instant::now();
        let rows = load(&engine, &tables, a.table_size, seed, out)?;
        let seconds = t0.elapsed().as_secs_f64();
        let t1 = Instant::now();
        engine.wait_for_compaction().map_err(|e| BenchError::engine("waiting for compactions after the load", e))?;
        let wait = t1.elapsed().as_secs_f64();
        run.load = LoadResult {
            rows,
            seconds,
            rows_per_sec: rows as f64 / seconds.max(1e-9),
            compaction_wait_secs: wait,
            process: measure::ProcDelta::between(&p0, &measure::sample()),
            engine: EngineDelta::between(&e0, &engine.sample()),
        };
        run.db_bytes_after_load = measure::du_bytes(path);
        bar.done();
        let _ = writeln!(
            out,
            "load: {rows} rows in {seconds:.1} s = {:.0} rows/s, then {wait:.1} s of compaction; database {} (du), \
             cache {}: the database is {:.1}x the cache",
            run.load.rows_per_sec,
            report::human_bytes(run.db_bytes_after_load),
            report::human_bytes(a.cache_size),
            run.db_bytes_after_load as f64 / a.cache_size.max(1) as f64
        );

        for (ti, spec) in tests.iter().enumerate() {
            bar.step(spec.name);
            let r = match spec.kind {
                Kind::Scan { readahead } => {
                    if readahead {
                        engine.close().map_err(|e| BenchError::engine("closing before the readahead scan", e))?;
                        engine = open_engine(path, &flags_ra)?;
                    }
                    let r = run_scan(&engine, &tables, spec, a, readahead);
                    if readahead {
                        engine.close().map_err(|e| BenchError::engine("closing after the readahead scan", e))?;
                        engine = open_engine(path, &flags)?;
                    }
                    r?
                }
                _ => run_timed(&engine, &tables, &next_ids, shape, spec, a, seed, cfg, ti, threads)?,
            };
            let _ = writeln!(
                out,
                "{:<26} {:>12} {:<4}  {:>6} stmts/rows in {:.1} s, rd {} wr {} B/op, CPU {} us/op",
                r.name,
                match r.unit {
                    Unit::Qps => format!("{:.0}", r.value),
                    Unit::Mrps => format!("{:.3}", r.value),
                },
                r.unit.label(),
                r.ops,
                r.seconds,
                r.per_op.read_bytes_per_op.map_or("-".into(), |x| format!("{x:.0}")),
                r.per_op.write_bytes_per_op.map_or("-".into(), |x| format!("{x:.0}")),
                r.per_op.cpu_us_per_op.map_or("-".into(), |x| format!("{x:.1}")),
            );
            run.tests.push(r);
            bar.done();
        }
        drop(bar);
        engine.close().map_err(|e| BenchError::engine("closing", e))?;
        run.db_bytes_end = measure::du_bytes(path);
        let _ = writeln!(out, "database at the end: {} (du); removed", report::human_bytes(run.db_bytes_end));
        Ok(run)
    }
}

/// sysbench's prepare: each table in turn, rows in PK order in multi-row INSERTs with the secondary index
/// maintained. The rows depend on the seed and the table only, so every engine and configuration loads the
/// same data. Returns the rows inserted.
pub fn load<E: Engine>(engine: &E, tables: &[Table], table_size: i64, seed: u64, out: &mut dyn Write) -> Result<u64> {
    let mut s = Session::new(engine, WriteMode::default());
    let mut total = 0u64;
    let mut batch: Vec<Row> = Vec::with_capacity(LOAD_BATCH_ROWS);
    for (i, t) in tables.iter().enumerate() {
        let started = Instant::now();
        let mut r = SbRand::new(data::client_seed(seed, usize::MAX, usize::MAX, i));
        let mut n = 0u64;
        let what = || format!("loading {}", t.def().name);
        for id in 1..=table_size {
            batch.push(data::prepare_row(&mut r, id, table_size));
            if batch.len() == LOAD_BATCH_ROWS || id == table_size {
                n += s.insert_many(t, &batch).map_err(table_err(what()))? as u64;
                batch.clear();
            }
        }
        if n != table_size as u64 {
            return Err(BenchError::engine(
                what(),
                format!("inserted {n} rows of {table_size}: a fresh table rejected rows as duplicates").into(),
            ));
        }
        total += n;
        let _ = writeln!(out, "loaded {} ({n} rows) in {:.1} s", t.def().name, started.elapsed().as_secs_f64());
    }
    Ok(total)
}

fn run_timed<E: Engine>(
    engine: &E,
    tables: &[Table],
    next_ids: &[AtomicI64],
    shape: Shape,
    spec: &TestSpec,
    a: &SysbenchArgs,
    seed: u64,
    cfg: usize,
    test: usize,
    threads: usize,
) -> Result<TestResult> {
    let stop = AtomicBool::new(false);
    let counter = AtomicU64::new(0);
    let (p0, e0) = (measure::sample(), engine.sample());
    let start = Instant::now();
    let deadline = start + Duration::from_secs_f64(a.duration);
    let mut intervals = Vec::new();
    let results: Vec<std::thread::Result<TableResult<ClientTotals>>> = std::thread::scope(|sc| {
        let handles: Vec<_> = (0..threads)
            .map(|i| {
                let (stop, counter) = (&stop, &counter);
                let seed = data::client_seed(seed, cfg, test, i);
                sc.spawn(move || {
                    let r = client(engine, tables, next_ids, shape, spec.kind, seed, deadline, stop, counter);
                    if r.is_err() {
                        stop.store(true, Ordering::Relaxed);
                    }
                    r
                })
            })
            .collect();
        monitor(&spec_label::<E>(spec), start, deadline, a.report_interval, &stop, &counter, &mut intervals);
        handles.into_iter().map(|h| h.join()).collect()
    });
    let seconds = start.elapsed().as_secs_f64();
    let mut r =
        TestResult { name: spec.name.into(), unit: Unit::Qps, threads, seconds, intervals, ..TestResult::default() };
    for res in results {
        let c = res
            .map_err(|_| BenchError::engine(spec.name, "a client thread panicked".into()))?
            .map_err(table_err(spec.name))?;
        r.events += c.events;
        r.statements += c.statements;
        r.session.add(&c.stats);
    }
    r.ops = r.statements;
    r.value = r.statements as f64 / seconds.max(1e-9);
    let process = measure::ProcDelta::between(&p0, &measure::sample());
    r.per_op = OpCost::new(process, EngineDelta::between(&e0, &engine.sample()), r.ops);
    Ok(r)
}

fn spec_label<E: Engine>(spec: &TestSpec) -> String {
    format!("{} {}", E::name(), spec.name)
}

/// Waits for the deadline (or a failed client), printing and keeping the rate every `interval` seconds.
fn monitor(
    label: &str,
    start: Instant,
    deadline: Instant,
    interval: f64,
    stop: &AtomicBool,
    counter: &AtomicU64,
    intervals: &mut Vec<Interval>,
) {
    let step = Duration::from_millis(20);
    let tick = (interval > 0.0).then(|| Duration::from_secs_f64(interval));
    let mut next = tick.map(|t| start + t);
    let mut last = (start, 0u64);
    loop {
        let now = Instant::now();
        if now >= deadline || stop.load(Ordering::Relaxed) {
            return;
        }
        if let (Some(n), Some(t)) = (next, tick) {
            if now >= n {
                let c = counter.load(Ordering::Relaxed);
                let rate = (c - last.1) as f64 / now.duration_since(last.0).as_secs_f64().max(1e-9);
                let at = now.duration_since(start).as_secs_f64();
                eprintln!("[ {at:.0}s ] {label}: {rate:.0}/s");
                intervals.push(Interval { t: at, rate });
                last = (now, c);
                next = Some(n + t);
            }
        }
        std::thread::sleep(step.min(deadline.saturating_duration_since(now)));
    }
}

/// A full scan of every table's PK index, one client per table at once (the seed ran one
/// `SELECT count(*) ... WHERE length(pad) < 0` per table in parallel); Mrps = rows read / wall seconds.
fn run_scan<E: Engine>(
    engine: &E,
    tables: &[Table],
    spec: &TestSpec,
    a: &SysbenchArgs,
    readahead: bool,
) -> Result<TestResult> {
    let readahead_size = if readahead { a.readahead_size } else { 0 };
    let counter = AtomicU64::new(0);
    let stop = AtomicBool::new(false);
    let (p0, e0) = (measure::sample(), engine.sample());
    let start = Instant::now();
    let results: Vec<std::thread::Result<TableResult<(u64, SessionStats)>>> = std::thread::scope(|sc| {
        let handles: Vec<_> = tables
            .iter()
            .map(|t| {
                let counter = &counter;
                sc.spawn(move || {
                    let mut s = Session::new(engine, WriteMode::default());
                    let mut matched = 0u64;
                    let mut pending = 0u64;
                    let n = s.full_scan(t, readahead_size, &mut |r| {
                        // `length(pad) < 0` never holds: the rows are read and tested, none returned.
                        if r.get(COL_PAD).map_or(0, str_len) == usize::MAX {
                            matched += 1;
                        }
                        pending += 1;
                        if pending == 4096 {
                            counter.fetch_add(pending, Ordering::Relaxed);
                            pending = 0;
                        }
                    })?;
                    counter.fetch_add(pending, Ordering::Relaxed);
                    std::hint::black_box(matched);
                    Ok((n, s.stats()))
                })
            })
            .collect();
        let mut done = Vec::new();
        for h in handles {
            done.push(h.join());
        }
        stop.store(true, Ordering::Relaxed);
        done
    });
    let seconds = start.elapsed().as_secs_f64();
    let mut r = TestResult {
        name: spec.name.into(),
        unit: Unit::Mrps,
        threads: tables.len(),
        seconds,
        ..TestResult::default()
    };
    for res in results {
        let (n, stats) = res
            .map_err(|_| BenchError::engine(spec.name, "a scan thread panicked".into()))?
            .map_err(table_err(spec.name))?;
        r.rows += n;
        r.events += 1;
        r.statements += 1;
        r.session.add(&stats);
    }
    r.ops = r.rows;
    r.value = r.rows as f64 / seconds.max(1e-9) / 1e6;
    let process = measure::ProcDelta::between(&p0, &measure::sample());
    r.per_op = OpCost::new(process, EngineDelta::between(&e0, &engine.sample()), r.ops);
    Ok(r)
}

#[cfg(test)]
mod tests;
