//! The ForestDB benchmark pattern (the `rall.sh` of seed 003's author) on plain keys through the [`Engine`]
//! trait: load, then write-only, point-query and range-query steps with and without a rate-limited writer, at
//! 1 and N threads, the database size after every step, in a cached and an IO-bound variant, every engine on
//! a fresh database with the same options.
//!
//! Documents (keys, values, random streams) are in [`docs`], the steps in [`steps`], tables, JSON and plots
//! in [`report`]. What each step does and how each figure is computed: BENCHMARKS.md, "ForestDB pattern
//! suite".

pub mod docs;
pub mod report;
pub mod steps;

use crate::db_bench::flags::BenchFlags;
use crate::engine::{Engine, EngineKind};
use crate::table_suites::harness::{self, human_bytes, open_engine, EngineJob, SuiteFlags};
use crate::table_suites::measure;
use crate::{BenchError, Result};
use report::{EngineRun, ForestdbReport, VariantResult};
use std::io::Write;
use std::path::Path;
use steps::StepSpec;

/// The two shapes of the published ForestDB benchmark runs.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Variant {
    /// The database is smaller than the block cache (as the published 56M-document runs with a ~100 GB cache).
    Cached,
    /// The database is several times larger than the block cache and table files are read with O_DIRECT
    /// (as the published 600M and 2B-document runs with 8 and 32 GB caches).
    Iobound,
}

impl Variant {
    /// The name `--variant` takes.
    pub fn name(self) -> &'static str {
        match self {
            Variant::Cached => "cached",
            Variant::Iobound => "iobound",
        }
    }

    /// The default cache for `logical` bytes of documents: twice the logical size when cached (the database,
    /// compressed on disk, fits with room for space amplification and uncompressed blocks), a quarter of it
    /// when IO-bound (the cache holds uncompressed blocks, so at most a quarter of the documents: about
    /// three point reads in four miss it). At least 1 MiB.
    pub fn default_cache(self, logical: u64) -> u64 {
        let c = match self {
            Variant::Cached => logical.saturating_mul(2),
            Variant::Iobound => logical / 4,
        };
        c.max(1 << 20)
    }
}

/// The seed's write buffer (64 MB), L1 target (512 MB) and file size (32 MB).
pub const SEED_WRITE_BUFFER: u64 = 64 << 20;
/// See [`SEED_WRITE_BUFFER`].
pub const SEED_LEVEL_BASE: u64 = 512 << 20;
/// See [`SEED_WRITE_BUFFER`].
pub const SEED_TARGET_FILE: u64 = 32 << 20;
/// Smallest write buffer the scaling gives (tiny test runs still flush several times).
pub const MIN_WRITE_BUFFER: u64 = 256 << 10;

/// `shaledb bench suite forestdb` arguments.
///
/// The defaults fit a full run (both variants, both engines) in about 20 minutes on a 2-core machine:
/// 2M documents (about 1.1 GB logical, ~0.6 GB on disk with snappy), 5 s of warm-up and 15 s measured per
/// timed step (the seed: 600 s and 3600 s). BENCHMARKS.md has the cost.
#[derive(clap::Args, Clone, Debug, serde::Serialize)]
#[command(rename_all = "snake_case")]
pub struct ForestdbArgs {
    /// Engines, run one after the other on fresh databases in each variant (comma-separated: shaledb,
    /// rocksdb); default: every engine of this build.
    #[arg(long, value_enum, value_delimiter = ',')]
    pub engine: Vec<EngineKind>,
    /// Variants (comma-separated): cached (database smaller than the cache), iobound (several times larger,
    /// direct reads).
    #[arg(long, value_enum, value_delimiter = ',', default_value = "cached,iobound")]
    pub variant: Vec<Variant>,
    /// Documents loaded (keys ~32 bytes, values ~512 bytes).
    #[arg(long, default_value_t = 2_000_000)]
    pub docs: u64,
    /// Threads of the `.n` steps (the published runs used 10 and 20 on 24 hardware threads); default: the machine's
    /// available parallelism, at least 2.
    #[arg(long)]
    pub threads: Option<usize>,
    /// Seconds measured per timed step (every step but the load).
    #[arg(long, default_value_t = 15.0, allow_negative_numbers = true)]
    pub duration: f64,
    /// Seconds each timed step runs before its measured window; operations then are not counted.
    #[arg(long, default_value_t = 5.0, allow_negative_numbers = true)]
    pub warmup: f64,
    /// Documents per write batch of the load.
    #[arg(long, default_value_t = 4096)]
    pub load_batch: usize,
    /// Writes per second of the writer of the pqw and rqw steps.
    #[arg(long, default_value_t = 1000.0, allow_negative_numbers = true)]
    pub writer_rate: f64,
    /// fsync each write of the pqw/rqw writer, as the ows steps do (the benchmark's write_type=sync); 0: WAL
    /// without fsync, as owa. A disk whose fsync takes over 1 ms cannot keep 1000 synced writes/s from one
    /// thread: the report's verdict then says NO for every engine.
    #[arg(long, default_value_t = true, num_args = 0..=1, default_missing_value = "true",
          value_parser = crate::db_bench::flags::parse_bool)]
    pub writer_sync: bool,
    /// Documents read by each range query after its seek (each counted as one operation).
    #[arg(long, default_value_t = 20)]
    pub range_len: usize,
    /// Block cache bytes per variant, in --variant order (one value per variant); default: 2x the documents'
    /// logical size for cached, 1/4 of it for iobound.
    #[arg(long, value_delimiter = ',')]
    pub cache_size: Vec<u64>,
    /// Steps to run (comma-separated names), always in the benchmark's order; default all. Steps after `load`
    /// need it (the database is loaded fresh per engine and variant).
    #[arg(long, value_delimiter = ',')]
    pub steps: Vec<String>,
    /// The flags every table suite takes: --db, --use_existing_db, --progress, --json, --plot, --seed.
    #[command(flatten)]
    #[serde(flatten)]
    pub common: SuiteFlags,
}

/// The arguments after validation and defaults.
#[derive(Clone, Debug)]
pub struct Plan {
    /// Engines in run order.
    pub engines: Vec<EngineKind>,
    /// Steps in the seed's order.
    pub steps: Vec<StepSpec>,
    /// Threads of the `.n` steps.
    pub threads: usize,
    /// (variant, cache bytes) in run order.
    pub variants: Vec<(Variant, u64)>,
    /// docs x [`docs::DOC_BYTES`].
    pub logical_bytes: u64,
}

/// The default N: the machine's hardware threads, so the `.n` steps load every core as the seed's N=10 and
/// N=20 did on 24 hardware threads; at least 2 so that `.n` always differs from `.1`.
pub fn default_threads() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get()).max(2)
}

impl ForestdbArgs {
    /// Checks the values and fills the defaults; the error names the flag.
    pub fn plan(&self) -> Result<Plan> {
        let bad = |flag: &str, msg: String| Err(BenchError::BadFlag { flag: flag.into(), msg });
        let engines = if self.engine.is_empty() {
            [EngineKind::Rocksdb, EngineKind::Shaledb].into_iter().filter(|e| e.available()).collect()
        } else {
            self.engine.clone()
        };
        harness::check_available(&engines)?;
        for (i, e) in engines.iter().enumerate() {
            if engines[..i].contains(e) {
                return bad("engine", format!("{} is listed twice", e.flag_name()));
            }
        }
        if self.variant.is_empty() {
            return bad("variant", "no variant given (cached, iobound)".into());
        }
        for (i, v) in self.variant.iter().enumerate() {
            if self.variant[..i].contains(v) {
                return bad("variant", format!("{} is listed twice", v.name()));
            }
        }
        if !(1..=1_000_000_000_000).contains(&self.docs) {
            return bad("docs", format!("must be in 1..=10^12, got {}", self.docs));
        }
        let threads = self.threads.unwrap_or_else(default_threads);
        if !(1..=1024).contains(&threads) {
            return bad("threads", format!("must be in 1..=1024, got {threads}"));
        }
        if !(self.duration.is_finite() && self.duration > 0.0 && self.duration <= 86_400.0) {
            return bad("duration", format!("must be a number of seconds in (0, 86400], got {}", self.duration));
        }
        if !(self.warmup.is_finite() && self.warmup >= 0.0 && self.warmup <= 86_400.0) {
            return bad("warmup", format!("must be a number of seconds in [0, 86400], got {}", self.warmup));
        }
        if !(1..=1_000_000).contains(&self.load_batch) {
            return bad("load_batch", format!("must be in 1..=1000000, got {}", self.load_batch));
        }
        if !(self.writer_rate.is_finite() && self.writer_rate > 0.0 && self.writer_rate <= 1e7) {
            return bad("writer_rate", format!("must be writes per second in (0, 10^7], got {}", self.writer_rate));
        }
        if !(1..=100_000).contains(&self.range_len) {
            return bad("range_len", format!("must be in 1..=100000, got {}", self.range_len));
        }
        let logical_bytes = self.docs.saturating_mul(docs::DOC_BYTES);
        let caches: Vec<u64> = match self.cache_size.as_slice() {
            [] => self.variant.iter().map(|v| v.default_cache(logical_bytes)).collect(),
            c if c.len() == self.variant.len() => c.to_vec(),
            c => {
                return bad(
                    "cache_size",
                    format!(
                        "give one size per variant in --variant order ({} variant(s): {}), got {} value(s)",
                        self.variant.len(),
                        self.variant.iter().map(|v| v.name()).collect::<Vec<_>>().join(","),
                        c.len()
                    ),
                )
            }
        };
        if let Some(c) = caches.iter().find(|c| **c == 0) {
            return bad("cache_size", format!("must be at least 1 byte, got {c}"));
        }
        let steps = steps::select(&self.steps).map_err(|msg| BenchError::BadFlag { flag: "steps".into(), msg })?;
        Ok(Plan {
            engines,
            steps,
            threads,
            variants: self.variant.iter().copied().zip(caches).collect(),
            logical_bytes,
        })
    }
}

/// The write buffer, L1 target and file size for `logical` bytes of documents.
///
/// The seed ran 64 MB write buffers, a 512 MB L1 and 32 MB files on 30 GB (cached) to 1 TB of documents. On
/// a small data set 64 MB memtables would hold a large share of the documents (reads would be served from
/// memory, and few flushes and compactions would run), so the write buffer is scaled down to 1/64 of the
/// logical size (at most ~3% of the documents in a memtable, two memtables ~6%), between 256 KiB and the
/// seed's 64 MB, and the L1 target and file size keep the seed's proportions to it (8x and 1/2). From 4 GiB
/// of documents (~7.9M) up, these are the seed's values.
pub fn scaled_lsm_sizes(logical: u64) -> (u64, u64, u64) {
    let wb = (logical / 64).clamp(MIN_WRITE_BUFFER, SEED_WRITE_BUFFER);
    let base = wb * (SEED_LEVEL_BASE / SEED_WRITE_BUFFER);
    let file = wb / (SEED_WRITE_BUFFER / SEED_TARGET_FILE);
    (wb, base, file)
}

/// Engine options of one variant, the same for every engine: the seed's RocksDB configuration (its fork's
/// commits aa467b, 3934e4 and 2b85fa) scaled to the documents.
///
/// - write buffer, `max_bytes_for_level_base`, `target_file_size_base`: [`scaled_lsm_sizes`];
/// - `level_compaction_dynamic_level_bytes`, 8 KiB blocks, bloom filter 10 bits/key, level0 slowdown 12 and
///   stop 16 (compaction trigger 4, RocksDB's default), every table file kept open (the seed: 50000);
/// - compression: snappy on every level, RocksDB's default that the seed ran with. The seed's fork also
///   disabled compression on L0 and L1; that is not reproduced because with dynamic level bytes RocksDB
///   reads `compression_per_level[1..]` relative to the base level while ShaleDB reads it by level number,
///   so one list would not compress the same levels in both engines; snappy everywhere does;
/// - the cache of the variant; O_DIRECT reads in the iobound variant with `--use_direct_reads`.
///
/// Not reproduced: `stats_dump_period_sec` (no stats log), `format_version=2` (RocksDB 7.8's default, 5, is
/// newer), `soft/hard_rate_limit` (removed from RocksDB; db_bench's pending-compaction-bytes limits apply),
/// the vector memtable for the load (neither engine's bench flags select a memtable).
pub fn engine_flags(plan: &Plan, a: &ForestdbArgs, variant: Variant, cache: u64, path: &Path) -> BenchFlags {
    let (wb, base, file) = scaled_lsm_sizes(plan.logical_bytes);
    BenchFlags {
        db: Some(path.to_path_buf()),
        num: i64::try_from(a.docs).unwrap_or(i64::MAX),
        key_size: docs::KEY_MEAN,
        value_size: docs::VALUE_MEAN,
        compression_ratio: docs::COMPRESSION_RATIO,
        compression_type: "snappy".into(),
        block_size: 8 << 10,
        bloom_bits: 10.0,
        cache_size: cache,
        write_buffer_size: usize::try_from(wb).unwrap_or(usize::MAX),
        max_bytes_for_level_base: base,
        target_file_size_base: file,
        level_compaction_dynamic_level_bytes: true,
        level0_slowdown_writes_trigger: 12,
        level0_stop_writes_trigger: 16,
        open_files: -1,
        use_direct_reads: variant == Variant::Iobound && a.common.use_direct_reads,
        progress: false,
        ..BenchFlags::default()
    }
}

/// The options printed once and kept in the JSON (cache and direct reads are per variant).
fn option_list(f: &BenchFlags) -> Vec<(String, String)> {
    let names = "write_buffer_size max_write_buffer_number max_bytes_for_level_base target_file_size_base \
         level_compaction_dynamic_level_bytes max_bytes_for_level_multiplier num_levels block_size bloom_bits \
         compression level0_file_num_compaction_trigger level0_slowdown_writes_trigger \
         level0_stop_writes_trigger max_background_jobs cache_index_and_filter_blocks max_open_files";
    let notes = [
        ("compression", format!("{} on every level", f.compression_type)),
        ("load", "WAL off, one flush at the end, no wait for compactions".into()),
        ("ows.*", "WAL on, fsync per write".into()),
        ("owa.*", "WAL on, no fsync".into()),
    ];
    harness::option_list(f, names, &notes)
}

/// Runs the suite, printing its tables to `out`.
pub fn run_forestdb(a: &ForestdbArgs, out: &mut dyn Write) -> Result<ForestdbReport> {
    let plan = a.plan()?;
    let (seed, dir) = a.common.start("shaledb-forestdb-", &a.engine)?;
    let base = dir.path();
    let sample_flags = engine_flags(&plan, a, Variant::Cached, 1 << 20, base);
    sample_flags.validate()?;
    let mut report = ForestdbReport {
        args: serde_json::to_value(a).unwrap_or(serde_json::Value::Null),
        seed,
        docs: a.docs,
        threads: plan.threads,
        logical_bytes: plan.logical_bytes,
        engine_options: option_list(&sample_flags),
        variants: Vec::new(),
    };
    let _ = writeln!(
        out,
        "ForestDB benchmark pattern suite (from the RocksDB, ForestDB and MongoDB report): {} docs ({} logical), N = {} threads, {} s warm-up + {} s per step, \
         writer {}/s ({}), range {} docs, engines {:?}, seed {seed}",
        a.docs,
        human_bytes(plan.logical_bytes),
        plan.threads,
        a.warmup,
        a.duration,
        a.writer_rate,
        if a.writer_sync { "fsync per write" } else { "no fsync" },
        a.range_len,
        plan.engines.iter().map(|e| e.flag_name()).collect::<Vec<_>>(),
    );
    harness::print_options(out, "engine options (every engine, every variant):", &report.engine_options);
    let _ = writeln!(out, "steps: {}", plan.steps.iter().map(|s| s.name).collect::<Vec<_>>().join(", "));
    for (vi, &(variant, cache)) in plan.variants.iter().enumerate() {
        let direct = variant == Variant::Iobound && a.common.use_direct_reads;
        let heading = format!(
            "variant {} : cache {} ({:.2}x the logical size), direct reads {}",
            variant.name(),
            human_bytes(cache),
            cache as f64 / plan.logical_bytes.max(1) as f64,
            if direct { "on" } else { "off" }
        );
        harness::print_heading(out, &heading);
        let mut vr = VariantResult {
            variant: variant.name().into(),
            cache_bytes: cache,
            use_direct_reads: direct,
            runs: Vec::new(),
        };
        let job = |path: &Path| {
            let flags = engine_flags(&plan, a, variant, cache, path);
            ForestdbJob { a, plan: &plan, flags, seed, variant: vi }
        };
        vr.runs = harness::run_engines(&plan.engines, base, out, job)?;
        let _ = writeln!(out, "\noperations/second and size after each step ({}):", variant.name());
        let _ = writeln!(out, "{}", report::variant_table(&vr));
        report.variants.push(vr);
        a.common.save_json(&report)?;
    }
    a.common.finish(out, None, &report, report::write_plots)?;
    Ok(report)
}

struct ForestdbJob<'a> {
    a: &'a ForestdbArgs,
    plan: &'a Plan,
    flags: BenchFlags,
    seed: u64,
    variant: usize,
}

impl EngineJob for ForestdbJob<'_> {
    type Run = EngineRun;

    fn run<E: Engine>(self, path: &Path, out: &mut dyn Write) -> Result<EngineRun> {
        let ForestdbJob { a, plan, flags, seed, variant } = self;
        flags.validate()?;
        let _ = writeln!(out, "--- {} at {}", E::name(), path.display());
        let engine: E = open_engine(path, &flags)?;
        // Which library ran, as db_bench's header says it (RocksDB: the linked library's own version).
        let _ = writeln!(out, "{}:    version {}", E::name(), engine.version());
        let mut run = EngineRun {
            engine: E::name().to_lowercase(),
            name: E::name().into(),
            db: path.to_path_buf(),
            steps: Vec::new(),
        };
        let ctx = steps::Ctx {
            docs: a.docs,
            threads: plan.threads,
            duration: a.duration,
            warmup: a.warmup,
            load_batch: a.load_batch,
            writer_rate: a.writer_rate,
            writer_sync: a.writer_sync,
            range_len: a.range_len,
            seed,
            variant,
            values: docs::value_data(),
        };
        let bar = a.common.step_bar(E::name(), plan.steps.len());
        for (si, spec) in plan.steps.iter().enumerate() {
            bar.step(spec.name);
            // `steps::select` puts the load first: the timed steps always find the documents in place.
            let mut r = match spec.kind {
                steps::Kind::Load => steps::run_load(&engine, &ctx)?,
                _ => steps::run_timed(&engine, spec, &ctx, si)?,
            };
            r.db_bytes = measure::du_bytes(path);
            let _ = writeln!(out, "{}", steps::step_line(E::name(), &r));
            run.steps.push(r);
            bar.done();
        }
        drop(bar);
        engine.close().map_err(|e| BenchError::engine("closing", e))?;
        let end = measure::du_bytes(path);
        let _ = writeln!(out, "{}: database at the end {} (du); removed", E::name(), human_bytes(end));
        Ok(run)
    }
}

#[cfg(test)]
mod tests;
