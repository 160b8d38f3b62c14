//! Runs the `--benchmarks` list on one database the way db_bench does: one header, then per benchmark
//! its threads (started together), the merged result line, and the optional histogram, statistics, JSON
//! record and plots.

use crate::db_bench::flags::BenchFlags;
use crate::db_bench::keygen::ValueData;
use crate::db_bench::random::Mt64;
use crate::db_bench::workloads::{Ctx, Kind, RateLimiter};
use crate::engine::{Engine, EngineSample};
use crate::reporting::recorder::{DbCallStats, Merged, Recorder, ThreadStats};
use crate::reporting::report::{self, BenchResult};
use crate::{BenchError, Result};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::fs::File;
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Barrier;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Runs every benchmark of `flags` against engine `E`, printing db_bench's output to `out`; writes the
/// JSON file and plots when asked. Returns the results.
pub fn run_bench<E: Engine>(flags: &BenchFlags, out: &mut dyn Write) -> Result<Vec<BenchResult>> {
    let mut r = Runner::<E>::open(flags.clone(), out)?;
    r.run_all()?;
    let results = r.close()?;
    if let Some(path) = &flags.json {
        write_json(path, E::name(), flags, &results)?;
    }
    Ok(results)
}

/// Writes `{ "engine", "flags", "benchmarks": [...] }` to `path`.
pub fn write_json(path: &Path, engine: &str, flags: &BenchFlags, results: &[BenchResult]) -> Result<()> {
    let doc = serde_json::json!({ "engine": engine, "flags": flags, "benchmarks": results });
    let text = serde_json::to_string_pretty(&doc).map_err(|e| BenchError::Io {
        what: "writing JSON to",
        path: path.to_path_buf(),
        cause: std::io::Error::other(e),
    })?;
    std::fs::write(path, text).map_err(|source| BenchError::Io {
        what: "writing JSON to",
        path: path.to_path_buf(),
        cause: source,
    })
}

/// Fails before any work when a file the run writes cannot be written: `--json` (written at the end),
/// `--plot` (after each benchmark) and `--report_file` (with `--report_interval_seconds`). A missing plot
/// directory is created, as the run would create it.
pub fn check_outputs(flags: &BenchFlags) -> Result<()> {
    if let Some(p) = &flags.json {
        check_output_file("json", p)?;
    }
    if let Some(d) = &flags.plot {
        check_output_dir("plot", d)?;
    }
    if flags.report_interval_seconds > 0 {
        check_output_file("report_file", &flags.report_file)?;
    }
    Ok(())
}

/// Checks that the file `p` given by `--flag` can be written: its directory exists and takes a new file (or
/// the file exists and opens for writing). Leaves no file behind.
pub fn check_output_file(flag: &str, p: &Path) -> Result<()> {
    let bad = |msg: String| BenchError::BadFlag { flag: flag.to_string(), msg };
    if p.is_dir() {
        return Err(bad(format!("{} is a directory", p.display())));
    }
    let dir = match p.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    if !dir.is_dir() {
        let what = if dir.exists() { "is not a directory" } else { "does not exist" };
        return Err(bad(format!("cannot write {}: {} {what}", p.display(), dir.display())));
    }
    let probe = if p.exists() {
        std::fs::OpenOptions::new().append(true).open(p).map(drop)
    } else {
        // A temporary file in the same directory, removed when dropped: `p` itself is not created early.
        tempfile::Builder::new().prefix(".shaledb-bench-check-").tempfile_in(dir).map(drop)
    };
    probe.map_err(|e| bad(format!("cannot write {}: {e}", p.display())))
}

/// Checks that the directory `d` given by `--flag` exists (creating it) and takes new files.
pub fn check_output_dir(flag: &str, d: &Path) -> Result<()> {
    let bad = |msg: String| BenchError::BadFlag { flag: flag.to_string(), msg };
    if d.exists() && !d.is_dir() {
        return Err(bad(format!("{} is not a directory", d.display())));
    }
    std::fs::create_dir_all(d).map_err(|e| bad(format!("cannot create {}: {e}", d.display())))?;
    tempfile::Builder::new()
        .prefix(".shaledb-bench-check-")
        .tempfile_in(d)
        .map(drop)
        .map_err(|e| bad(format!("cannot write in {}: {e}", d.display())))
}

fn io_err<'p>(what: &'static str, path: &'p Path) -> impl FnOnce(std::io::Error) -> BenchError + 'p {
    move |source| BenchError::Io { what, path: path.to_path_buf(), cause: source }
}

/// One database and the benchmarks run on it.
pub struct Runner<'o, E: Engine> {
    flags: BenchFlags,
    path: PathBuf,
    tmp: Option<tempfile::TempDir>,
    db: Option<E>,
    seed_base: i64,
    threads_started: i64,
    values: ValueData,
    out: &'o mut dyn Write,
    results: Vec<BenchResult>,
    report_file: Option<File>,
    plot_base: usize,
    /// The database calls measured for `--statistics` since the database was opened.
    calls: DbCallStats,
}

impl<'o, E: Engine> Runner<'o, E> {
    /// Opens the database and prints the header. The database is a new temporary one unless `--db`; a
    /// `--db` holding a database is deleted first only with `--use_existing_db=0` (said once, with the count
    /// of files) or when a suite made it ([`BenchFlags::db_made_by_bench`]), used as it is with
    /// `--use_existing_db=1`, and refused without the flag ([`crate::db_bench::dbdir::prepare`]).
    pub fn open(flags: BenchFlags, out: &'o mut dyn Write) -> Result<Runner<'o, E>> {
        flags.validate()?;
        // Before anything is created, printed or removed.
        let prepare = match &flags.db {
            Some(p) => crate::db_bench::dbdir::prepare(
                p,
                "db",
                flags.use_existing_db,
                flags.db_made_by_bench,
                crate::db_bench::dbdir::Caller::Bench,
            )?,
            None => crate::db_bench::dbdir::Prepare::Keep,
        };
        check_outputs(&flags)?;
        // The engine's own checks of the options the flags make, before anything is created or removed.
        E::check_options(&flags)
            .map_err(|e| BenchError::Usage(format!("the flags give options {} refuses: {e}", E::name())))?;
        let (path, tmp) = match &flags.db {
            Some(p) => (p.clone(), None),
            None => {
                let t = tempfile::Builder::new()
                    .prefix("shaledb-bench-")
                    .tempdir()
                    .map_err(io_err("creating a temporary directory in", &std::env::temp_dir()))?;
                (t.path().to_path_buf(), Some(t))
            }
        };
        let seed_base = if flags.seed == 0 {
            let now = SystemTime::now().duration_since(UNIX_EPOCH).map_or(1, |d| d.as_micros() as i64);
            let _ = writeln!(out, "Set seed to {now} because --seed was 0");
            now
        } else {
            flags.seed
        };
        for note in flags.compatibility_notes() {
            eprintln!("note: {note}");
        }
        crate::db_bench::dbdir::apply::<E>(&path, prepare)?;
        let db = E::open(&path, &flags).map_err(|e| BenchError::engine(format!("opening {}", path.display()), e))?;
        let _ = write!(out, "{}", report::header(&flags, E::name(), &db.version()));
        let values = ValueData::new(flags.value_size, flags.compression_ratio);
        Ok(Runner {
            flags,
            path,
            tmp,
            db: Some(db),
            seed_base,
            threads_started: 0,
            values,
            out,
            results: Vec::new(),
            report_file: None,
            plot_base: 0,
            calls: DbCallStats::default(),
        })
    }

    /// Numbers this runner's plot files after `n` earlier ones (a suite's steps share one plot directory).
    pub fn set_plot_index_base(&mut self, n: usize) {
        self.plot_base = n;
    }

    /// The database directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The open database.
    pub fn db(&self) -> Option<&E> {
        self.db.as_ref()
    }

    /// Runs every benchmark of `--benchmarks` in order.
    pub fn run_all(&mut self) -> Result<()> {
        for name in self.flags.benchmark_list() {
            let kind = Kind::from_name(&name).ok_or_else(|| BenchError::BadFlag {
                flag: "benchmarks".into(),
                msg: format!("unknown benchmark '{name}'"),
            })?;
            self.run_one(kind)?;
        }
        Ok(())
    }

    /// Closes the database (removing it when temporary) and returns the results.
    pub fn close(mut self) -> Result<Vec<BenchResult>> {
        if let Some(db) = self.db.take() {
            db.close().map_err(|e| BenchError::engine("closing the database", e))?;
        }
        if let Some(t) = self.tmp.take() {
            let p = t.path().to_path_buf();
            t.close().map_err(io_err("removing", &p))?;
        }
        Ok(std::mem::take(&mut self.results))
    }

    /// A fill benchmark's fresh start: deletes the database this run opened (made by bench, or emptied by
    /// `--use_existing_db=0` at open) without a message, and opens it anew.
    fn reopen_empty(&mut self) -> Result<()> {
        if let Some(db) = self.db.take() {
            db.close().map_err(|e| BenchError::engine("closing the database", e))?;
        }
        E::destroy(&self.path).map_err(|e| BenchError::engine(format!("destroying {}", self.path.display()), e))?;
        self.calls = DbCallStats::default();
        let db = E::open(&self.path, &self.flags)
            .map_err(|e| BenchError::engine(format!("opening {}", self.path.display()), e))?;
        self.db = Some(db);
        Ok(())
    }

    fn db_ref(&self) -> Result<&E> {
        self.db.as_ref().ok_or_else(|| BenchError::engine("database", "the database is closed".into()))
    }

    fn print_property(&mut self, name: &str) -> Result<()> {
        let text = self.db_ref()?.property(name).unwrap_or_else(|| "(failed)".into());
        let _ = writeln!(self.out, "\n{text}");
        Ok(())
    }

    /// With `--num_column_families` > 1: the engine's stats text above is the default family's, so a table of
    /// every family follows (files per level, table bytes, estimated keys, memtable bytes).
    fn print_families(&mut self) -> Result<()> {
        let db = self.db_ref()?;
        let n = db.num_families();
        if n <= 1 {
            return Ok(());
        }
        let text = family_table(db, self.flags.num_levels);
        let _ = write!(self.out, "\n{text}");
        Ok(())
    }

    /// Runs one benchmark or step; returns its result when it prints a result line.
    pub fn run_one(&mut self, kind: Kind) -> Result<Option<BenchResult>> {
        let name = kind.name();
        if kind.needs_merge_operator() && self.flags.merge_operator.is_empty() {
            // db_bench's message; the other benchmarks run.
            let _ = writeln!(self.out, "{name:<12} : skipped (--merge_operator is unknown)");
            return Ok(None);
        }
        if kind.fresh_db() {
            if self.flags.uses_existing_db() {
                let _ = writeln!(self.out, "{name:<12} : skipped (--use_existing_db is true)");
                return Ok(None);
            }
            self.reopen_empty()?;
        }
        match kind {
            Kind::Flush => {
                self.db_ref()?.flush().map_err(|e| BenchError::engine("flush", e))?;
                return Ok(None);
            }
            Kind::WaitForCompaction => {
                self.db_ref()?.wait_for_compaction().map_err(|e| BenchError::engine("waitforcompaction", e))?;
                return Ok(None);
            }
            Kind::Stats => {
                self.print_property("rocksdb.stats")?;
                self.print_families()?;
                return Ok(None);
            }
            Kind::LevelStats => {
                self.print_property("rocksdb.levelstats")?;
                self.print_families()?;
                return Ok(None);
            }
            Kind::Compact0 | Kind::Compact1 => {
                let level = usize::from(kind == Kind::Compact1);
                let done = self.db_ref()?.compact_level(level).map_err(|e| BenchError::engine(name, e))?;
                let _ = match done {
                    Some((files, from, to)) => {
                        writeln!(self.out, "{name} compacted {files} files from L{from} to L{to}")
                    }
                    None => writeln!(self.out, "{name} found no files to compact"),
                };
                return Ok(None);
            }
            Kind::MemStats => {
                // db_bench's `memstats`: each property as `name: value`.
                for p in [
                    "rocksdb.num-immutable-mem-table",
                    "rocksdb.cur-size-active-mem-table",
                    "rocksdb.cur-size-all-mem-tables",
                    "rocksdb.size-all-mem-tables",
                    "rocksdb.num-entries-active-mem-table",
                    "rocksdb.num-entries-imm-mem-tables",
                ] {
                    let db = self.db.as_ref().ok_or_else(|| BenchError::engine("database", "closed".into()))?;
                    let n = db.num_families();
                    if n <= 1 {
                        let v = db.property(p).unwrap_or_else(|| "(failed)".into());
                        let _ = writeln!(self.out, "{p}: {v}");
                        continue;
                    }
                    // One line per family, named, with `--num_column_families`.
                    for cf in 0..n {
                        let v = db.property_cf(cf, p).unwrap_or_else(|| "(failed)".into());
                        let _ = writeln!(self.out, "{p} [{}]: {v}", crate::engine::column_family_name(cf));
                    }
                }
                return Ok(None);
            }
            _ => {}
        }
        let _ = writeln!(self.out, "DB path: [{}]", self.path.display());
        let result = self.run_workers(kind)?;
        let _ = writeln!(self.out, "{}", result.0.line);
        if self.flags.histogram {
            let _ = write!(self.out, "{}", report::histogram_block(&result.1));
        }
        if self.flags.statistics {
            self.print_property("rocksdb.stats")?;
            self.print_families()?;
            if let Some(c) = &result.1.calls {
                self.calls.merge(c);
            }
            let _ = writeln!(self.out, "{}", report::statistics_block(&result.0.db_after, &self.calls));
        }
        if kind == Kind::RandomTransaction && (self.flags.transaction_db || self.flags.optimistic_transaction_db) {
            // db_bench's RandomTransactionVerify, run after the benchmark.
            let sums =
                crate::db_bench::randomtxn::random_transaction_sums(self.db_ref()?, self.flags.transaction_sets)?;
            if sums.windows(2).all(|w| w[0] == w[1]) {
                let _ = writeln!(self.out, "RandomTransactionVerify Success.");
            } else {
                let _ = writeln!(self.out, "RandomTransactionVerify FAILED!!");
                return Err(BenchError::engine(
                    "randomtransaction",
                    format!("the sets' sums differ: {sums:?} (a transaction was applied in part)").into(),
                ));
            }
        }
        let _ = self.out.flush();
        if let Some(dir) = self.flags.plot.clone() {
            std::fs::create_dir_all(&dir).map_err(io_err("creating", &dir))?;
            crate::reporting::plot::write_plots(&dir, self.plot_base + self.results.len() + 1, &result.0)?;
        }
        self.results.push(result.0.clone());
        Ok(Some(result.0))
    }

    fn ctx_counts(&self, kind: Kind) -> (u64, u64, u64, u64, u64, u64) {
        let f = &self.flags;
        let num = f.num as u64;
        let or_num = |v: i64| if v < 0 { num } else { v as u64 };
        let reads = or_num(f.reads);
        let writes = or_num(f.writes);
        let readwrites = if f.writes < 0 && f.reads < 0 { num } else { f.writes.max(f.reads) as u64 };
        let key_space = if kind == Kind::FillSync { (num / 1000).max(1) } else { num };
        (key_space, reads, writes, or_num(f.deletes), readwrites, or_num(f.merge_keys).max(1))
    }

    /// Operations the progress bar expects when the benchmark is bounded by count.
    fn expected_ops(&self, kind: Kind, readers: usize) -> Option<u64> {
        let (key_space, reads, writes, deletes, readwrites, _) = self.ctx_counts(kind);
        let t = readers as u64;
        Some(match kind {
            Kind::FillSync => key_space * t,
            Kind::FillSeq | Kind::FillUniqueRandom | Kind::FillRandom | Kind::Overwrite => writes * t,
            // The threads share the key space (`crate::db_bench::fillingest`).
            Kind::FillIngest => writes,
            Kind::ReadSeq | Kind::ReadReverse | Kind::ReadRandom | Kind::ReadMissing | Kind::SeekRandom => reads * t,
            Kind::MultiReadRandom => reads * t,
            Kind::ReadWhileWriting | Kind::ReadWhileMerging => reads * t,
            Kind::SeekRandomWhileWriting | Kind::SeekRandomWhileMerging => reads * t,
            Kind::DeleteSeq | Kind::DeleteRandom => deletes * t,
            Kind::UpdateRandom | Kind::MergeRandom | Kind::ReadRandomWriteRandom => readwrites * t,
            Kind::RandomTransaction => readwrites * t,
            _ => return None,
        })
    }

    fn run_workers(&mut self, kind: Kind) -> Result<(BenchResult, Merged)> {
        let f = self.flags.clone();
        let (key_space, reads, writes, deletes, readwrites, merge_keys) = self.ctx_counts(kind);
        let readers = if kind == Kind::Compact { 1 } else { f.threads };
        let n_threads = if kind.has_background_writer() { readers + 1 } else { readers };
        let mode = crate::engine::WriteMode { sync: f.sync || kind == Kind::FillSync, disable_wal: f.disable_wal };
        let limiter = (f.benchmark_write_rate_limit > 0 && !kind.has_background_writer())
            .then(|| RateLimiter::new(f.benchmark_write_rate_limit));
        let readers_left = AtomicUsize::new(readers);
        let seeds: Vec<u64> = (0..n_threads)
            .map(|_| {
                self.threads_started += 1;
                self.seed_base.wrapping_add(self.threads_started) as u64
            })
            .collect();
        let expected = if f.duration > 0
            && !matches!(
                kind,
                Kind::FillSeq
                    | Kind::FillUniqueRandom
                    | Kind::FillIngest
                    | Kind::DeleteSeq
                    | Kind::ReadSeq
                    | Kind::ReadReverse
            ) {
            None
        } else {
            self.expected_ops(kind, readers)
        };
        let tick = if f.duration > 0 {
            Duration::from_secs_f64((f.duration as f64 / 300.0).clamp(0.1, 5.0))
        } else {
            Duration::from_millis(100)
        };
        if f.report_interval_seconds > 0 && self.report_file.is_none() {
            let mut file = File::create(&f.report_file).map_err(io_err("creating", &f.report_file))?;
            writeln!(file, "secs_elapsed,interval_qps").map_err(io_err("writing", &f.report_file))?;
            self.report_file = Some(file);
        }
        // fillingest's files: beside the database, on its file system, so that ingesting moves them by hard link.
        let ingest_dir = if kind == Kind::FillIngest {
            let parent = match self.path.parent() {
                Some(p) if !p.as_os_str().is_empty() => p,
                _ => Path::new("."),
            };
            let d = tempfile::Builder::new()
                .prefix("shaledb-bench-ingest-")
                .tempdir_in(parent)
                .map_err(io_err("creating a directory for fillingest's files in", parent))?;
            Some(d)
        } else {
            None
        };
        let db = self.db.as_ref().ok_or_else(|| BenchError::engine("database", "the database is closed".into()))?;
        let before = db.sample();
        let rec = Recorder::new(tick);
        let ctx = Ctx {
            db,
            kind,
            num: f.num as u64,
            key_space,
            reads,
            writes,
            deletes,
            readwrites,
            merge_keys,
            duration: f.duration,
            key_size: if kind == Kind::ReadMissing { f.key_size + 1 } else { f.key_size },
            prefix_size: f.prefix_size,
            keys_per_prefix: f.keys_per_prefix,
            transaction_sets: f.transaction_sets,
            transactions: f.transaction_db || f.optimistic_transaction_db,
            value_size: f.value_size,
            families: f.column_families() as u64,
            mode,
            seek_nexts: f.seek_nexts,
            batch_size: f.batch_size.max(1) as u64,
            multiread_stride: f.multiread_stride.max(0) as u64,
            reverse: f.reverse_iterator,
            read_percent: f.readwritepercent,
            values: &self.values,
            write_limiter: limiter.as_ref(),
            write_rate: f.benchmark_write_rate_limit,
            range_dels: crate::db_bench::range_dels::RangeDelPlan::from_flags(&f),
            threads: readers,
            ingest_keys_per_file: f.ingest_keys_per_file,
            ingest_dir: ingest_dir.as_ref().map(|d| d.path()),
            seed_base: self.seed_base,
            readers_left: &readers_left,
        };
        let barrier = Barrier::new(n_threads);
        let measure_calls = f.statistics;
        let finished = AtomicBool::new(false);
        let mut report_file = self.report_file.take();
        let (stats, outcome) = std::thread::scope(|s| {
            let sampler = s.spawn(|| {
                sample_loop(db, &rec, &f, kind.name(), expected, &finished, report_file.as_mut());
            });
            let handles: Vec<_> = seeds
                .iter()
                .enumerate()
                .map(|(tid, &seed)| {
                    let (ctx, rec, barrier) = (&ctx, &rec, &barrier);
                    s.spawn(move || {
                        let mut ts = ThreadStats::new(rec, tid);
                        if measure_calls {
                            ts.measure_calls();
                        }
                        let mut rng = Mt64::new(seed);
                        barrier.wait();
                        ts.start();
                        let r = ctx.run_thread(&mut ts, &mut rng);
                        ts.stop();
                        (ts, r)
                    })
                })
                .collect();
            let mut stats = Vec::with_capacity(handles.len());
            let mut outcome = Ok(());
            for h in handles {
                match h.join() {
                    Ok((ts, r)) => {
                        if outcome.is_ok() {
                            outcome = r;
                        }
                        stats.push(ts);
                    }
                    Err(p) => std::panic::resume_unwind(p),
                }
            }
            finished.store(true, Ordering::Release);
            if let Err(p) = sampler.join() {
                std::panic::resume_unwind(p);
            }
            (stats, outcome)
        });
        self.report_file = report_file;
        outcome?;
        if let Some(d) = ingest_dir {
            let p = d.path().to_path_buf();
            d.close().map_err(io_err("removing", &p))?;
        }
        // db_bench prints this line at the end of each writing thread.
        for ts in stats.iter().filter(|t| t.range_deletions > 0) {
            println!("Number of range deletions: {}", ts.range_deletions);
        }
        let mut merged = Merged::from_threads(&stats);
        merged.message = crate::db_bench::workloads::message(kind, &merged);
        drop(stats);
        let after = db.sample();
        rec.record_lsm(&after);
        let mut result = BenchResult::from_merged(kind.name(), readers, &merged);
        result.w_amp = report::w_amp(&after);
        result.stall_micros = after.stall_micros.saturating_sub(before.stall_micros);
        result.timeline = rec.ticks(merged.window);
        result.lsm = rec.lsm();
        result.tick_secs = rec.tick_secs();
        result.db_after = after;
        Ok((result, merged))
    }
}

fn sample_loop<E: Engine>(
    db: &E,
    rec: &Recorder,
    f: &BenchFlags,
    name: &str,
    expected: Option<u64>,
    finished: &AtomicBool,
    mut report: Option<&mut File>,
) {
    let show_progress = f.progress && std::io::stderr().is_terminal();
    let mut bar: Option<ProgressBar> = None;
    let start = rec.start();
    let tick = Duration::from_secs_f64(rec.tick_secs());
    let mut next_sample = start;
    let mut next_report = start + Duration::from_secs(f.report_interval_seconds.max(1));
    let mut next_stats = start + Duration::from_secs(f.stats_interval_seconds.max(1));
    let (mut last_report_ops, mut last_stats_ops, mut last_stats_at) = (0u64, 0u64, start);
    let mut stats_interval_mark = 0u64;
    while !finished.load(Ordering::Acquire) {
        std::thread::sleep(tick.min(Duration::from_millis(50)));
        let now = Instant::now();
        if now >= next_sample {
            rec.close_ticks(false);
            rec.record_lsm(&db.sample());
            next_sample += tick;
        }
        let ops = rec.ops();
        if f.report_interval_seconds > 0 && now >= next_report {
            if let Some(file) = report.as_deref_mut() {
                let secs = now.saturating_duration_since(start).as_secs();
                let qps = (ops - last_report_ops) / f.report_interval_seconds.max(1);
                let _ = writeln!(file, "{secs},{qps}");
            }
            last_report_ops = ops;
            next_report += Duration::from_secs(f.report_interval_seconds);
        }
        let by_time = f.stats_interval_seconds > 0 && now >= next_stats;
        let by_ops = f.stats_interval > 0 && ops / f.stats_interval > stats_interval_mark;
        if by_time || by_ops {
            stats_interval_mark = ops.checked_div(f.stats_interval).unwrap_or(0);
            let secs = now.saturating_duration_since(last_stats_at).as_secs_f64().max(1e-9);
            let total = now.saturating_duration_since(start).as_secs_f64().max(1e-9);
            let line = format!(
                "{name} ... thread 0: ({},{}) ops and ({:.1},{:.1}) ops/second in ({:.6},{:.6}) seconds",
                ops - last_stats_ops,
                ops,
                (ops - last_stats_ops) as f64 / secs,
                ops as f64 / total,
                secs,
                total
            );
            emit(&bar, &line);
            if f.stats_per_interval {
                if let Some(s) = db.property("rocksdb.stats") {
                    emit(&bar, &s);
                }
            }
            last_stats_ops = ops;
            last_stats_at = now;
            if by_time {
                next_stats += Duration::from_secs(f.stats_interval_seconds);
            }
        }
        if show_progress {
            update_bar(&mut bar, name, expected, f.duration, now.saturating_duration_since(start), ops);
        }
    }
    if let Some(b) = bar {
        b.finish_and_clear();
    }
}

fn update_bar(
    bar: &mut Option<ProgressBar>,
    name: &str,
    expected: Option<u64>,
    duration: u64,
    elapsed: Duration,
    ops: u64,
) {
    if bar.is_none() && elapsed < Duration::from_secs(2) {
        return;
    }
    let rate = ops as f64 / elapsed.as_secs_f64().max(1e-9);
    // Our own ETA from the whole run's rate: indicatif's estimator would see the jump from 0 when the bar
    // appears two seconds in.
    let eta = match expected {
        Some(n) if rate > 0.0 => Duration::from_secs_f64(n.saturating_sub(ops) as f64 / rate),
        _ => Duration::from_secs(duration).saturating_sub(elapsed),
    };
    let msg = format!("{} ops/s  ETA {}", human_count(rate), indicatif::HumanDuration(eta));
    let pos = match expected {
        Some(_) => ops,
        None => elapsed.as_secs().min(duration.max(1)),
    };
    if let Some(b) = bar {
        b.set_position(pos);
        b.set_message(msg);
        return;
    }
    let (len, template) = match expected {
        Some(n) => (n, "{prefix:>16} [{elapsed_precise}] {wide_bar:.cyan/blue} {human_pos}/{human_len} ops  {msg}"),
        None => (duration.max(1), "{prefix:>16} [{elapsed_precise}] {wide_bar:.cyan/blue} {pos}/{len} s  {msg}"),
    };
    let b = ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::hidden()).with_elapsed(elapsed);
    if let Ok(style) = ProgressStyle::with_template(template) {
        b.set_style(style.progress_chars("=> "));
    }
    b.set_prefix(name.to_string());
    b.set_position(pos);
    b.set_message(msg);
    b.set_draw_target(ProgressDrawTarget::stderr());
    *bar = Some(b);
}

/// Prints a line to stderr without tearing the progress bar.
fn emit(bar: &Option<ProgressBar>, line: &str) {
    match bar {
        Some(b) => b.suspend(|| eprintln!("{line}")),
        None => eprintln!("{line}"),
    }
}

fn human_count(v: f64) -> String {
    if v >= 1e6 {
        format!("{:.2}M", v / 1e6)
    } else if v >= 1e3 {
        format!("{:.1}K", v / 1e3)
    } else {
        format!("{v:.0}")
    }
}

/// The per-family table `stats` and `levelstats` print with `--num_column_families` > 1: one row per family,
/// from the engine's per-family properties.
pub fn family_table<E: Engine>(db: &E, num_levels: usize) -> String {
    let int = |cf: usize, name: &str| db.property_cf(cf, name).and_then(|v| v.trim().parse::<u64>().ok());
    let mut out =
        format!("** Column families: {} (the figures above are the default family's) **\n", db.num_families());
    out.push_str(&format!(
        "{:<26} {:>24} {:>12} {:>12} {:>12}\n",
        "Family", "Files (L0,L1,...)", "TableMB", "Keys(est)", "MemMB"
    ));
    for cf in 0..db.num_families() {
        let files: Vec<String> = (0..num_levels.max(1))
            .map(|l| int(cf, &format!("rocksdb.num-files-at-level{l}")).map_or("?".into(), |v| v.to_string()))
            .collect();
        let mb = |v: Option<u64>| v.map_or("?".to_string(), |b| format!("{:.1}", b as f64 / 1048576.0));
        out.push_str(&format!(
            "{:<26} {:>24} {:>12} {:>12} {:>12}\n",
            crate::engine::column_family_name(cf),
            files.join(","),
            // The family's current tables (`total-sst-files-size` also counts tables only old versions hold,
            // and ShaleDB before d6a748e counted every family's there).
            mb(int(cf, "rocksdb.live-sst-files-size")),
            int(cf, "rocksdb.estimate-num-keys").map_or("?".into(), |v| v.to_string()),
            mb(int(cf, "rocksdb.cur-size-all-mem-tables")),
        ));
    }
    out
}

/// Counters of the last step, for the suites.
pub fn sample_of<E: Engine>(r: &Runner<'_, E>) -> Option<EngineSample> {
    r.db().map(|d| d.sample())
}
