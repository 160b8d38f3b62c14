//! The harness the three table suites share ([`crate::table_suites::forestdb`],
//! [`crate::table_suites::insertbench`], [`crate::table_suites::sysbench`]), so that each suite holds only what
//! is its own (its configurations, steps, figures and table layouts):
//!
//! - the flags every suite takes alike, [`SuiteFlags`]: `--db`, `--use_existing_db`, `--progress`, `--json`,
//!   `--plot`, `--seed`;
//! - the run: [`SuiteFlags::start`] resolves the seed and the database directory ([`SuiteDir`]) after
//!   [`check_available`] has checked the engines; [`print_options`] prints the run header, with the options
//!   listed by [`option_list`]; [`print_heading`] a heading per configuration; [`run_on`] runs a suite's
//!   [`EngineJob`] on one engine on a fresh database ([`open_engine`], [`remove_db`]); [`StepBar`] is the
//!   `--progress` bar of one engine's run; [`SuiteFlags::save_json`] rewrites the JSON after each
//!   configuration and [`SuiteFlags::finish`] ends the run (the JSON once more, then the plots);
//! - the report: [`cost_table`], the per-operation table of storage bytes and CPU; `bar_chart`, a bar chart
//!   of ratios (two engines) or figures (one engine); figures printed with [`opt`] and [`human_bytes`].
//!
//! The plots' SVG/PNG pairs are drawn by [`crate::reporting::plot`].

use crate::db_bench::flags::{parse_bool, BenchFlags};
use crate::engine::{with_engine, Engine, EngineKind, EngineVisitor};
use crate::reporting::plot::{draw_bar_chart, write_pair, BarScale, BarStyle};
use crate::table_suites::measure::OpCost;
use crate::table_suites::table::TableError;
use crate::{BenchError, Result};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::fmt::Write as _;
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The flags every table suite takes, with the same names, parsing and meaning (flattened into each suite's
/// arguments and into the `args` of its JSON).
#[derive(clap::Args, Clone, Debug, Default, serde::Serialize)]
#[command(rename_all = "snake_case")]
pub struct SuiteFlags {
    /// Directory for the databases: one subdirectory per engine (DB/shaledb, DB/rocksdb), made and
    /// removed after each run; default: a new temporary directory under the current one. A subdirectory that
    /// already holds a database is refused unless --use_existing_db=0 is given; files that are not a
    /// database's are never deleted.
    #[arg(long)]
    pub db: Option<PathBuf>,
    /// 0: delete the databases already in --db's engine subdirectories first (only their files), saying so
    /// once each. Without it such a database is refused and nothing is deleted. 1 is refused: the suite loads
    /// its own data.
    #[arg(long, num_args = 0..=1, default_missing_value = "true", value_parser = parse_bool)]
    pub use_existing_db: Option<bool>,
    /// Progress bar on stderr, as `shaledb bench --progress[=BOOL]` draws it: one bar per engine run over its
    /// steps, drawn only when stderr is a terminal.
    #[arg(long, default_value_t = true, num_args = 0..=1, default_missing_value = "true", value_parser = parse_bool)]
    pub progress: bool,
    /// Write every figure as JSON to this file (rewritten after each configuration).
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Write the suite's plots (SVG and PNG) into this directory.
    #[arg(long)]
    pub plot: Option<PathBuf>,
    /// Read table files with O_DIRECT, so the OS page cache does not hide the disk (forestdb: in its iobound
    /// variant only; the cached variant reads through the page cache, as the published runs did); an engine
    /// that cannot is an error (use --use_direct_reads=0 there).
    #[arg(long, default_value_t = true, num_args = 0..=1, default_missing_value = "true", value_parser = parse_bool)]
    pub use_direct_reads: bool,
    /// Random seed; 0 derives one from the clock (printed). Every engine of a configuration draws the same
    /// numbers.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
}

impl SuiteFlags {
    /// The seed ([`resolve_seed`]) and the directory of the engines' databases ([`SuiteDir::create`], a
    /// temporary one named `prefix...` without `--db`).
    pub fn start(&self, prefix: &str, engines: &[EngineKind]) -> Result<(u64, SuiteDir)> {
        let seed = resolve_seed(self.seed);
        Ok((seed, SuiteDir::create(self.db.as_deref(), prefix, engines, self.use_existing_db)?))
    }

    /// [`save_json`] to `--json`.
    pub fn save_json<T: serde::Serialize>(&self, report: &T) -> Result<()> {
        save_json(self.json.as_deref(), report)
    }

    /// The end of a suite: its `summary` (a heading and a table) if it has one, then [`finish`] with `--json`
    /// and `--plot`.
    pub fn finish<T: serde::Serialize>(
        &self,
        out: &mut dyn Write,
        summary: Option<(&str, String)>,
        report: &T,
        write_plots: impl FnOnce(&Path, &T) -> Result<Vec<PathBuf>>,
    ) -> Result<()> {
        if let Some((heading, table)) = summary {
            print_heading(out, heading);
            let _ = writeln!(out, "{table}");
        }
        finish(out, self.json.as_deref(), self.plot.as_deref(), report, write_plots)
    }

    /// The `--progress` bar of one engine's run of `steps` steps, labelled `label`.
    pub fn step_bar(&self, label: &str, steps: usize) -> StepBar {
        StepBar::new(self.progress, label, steps)
    }
}

/// One engine's run of one configuration of a suite: written once, generic over the engine, and run on the
/// engine `--engine` names by [`run_on`].
pub trait EngineJob {
    /// What the run returns.
    type Run;
    /// Runs on engine `E` with a fresh database at `db`, printing to `out`.
    fn run<E: Engine>(self, db: &Path, out: &mut dyn Write) -> Result<Self::Run>;
}

/// Runs `job` on engine `kind` on a fresh database at `db`: the one a previous run left there is removed
/// first, and the run's own after it when the run succeeds (each without a message: the job says what it
/// leaves).
pub fn run_on<J: EngineJob>(kind: EngineKind, db: &Path, out: &mut dyn Write, job: J) -> Result<J::Run> {
    with_engine(kind, Visit { job, db, out })?
}

/// Runs one configuration on each of `engines` in turn, each on a fresh database in `base/<engine>`
/// ([`run_on`]) with the job `job` makes for that directory; the runs in `engines` order.
pub fn run_engines<J: EngineJob>(
    engines: &[EngineKind],
    base: &Path,
    out: &mut dyn Write,
    mut job: impl FnMut(&Path) -> J,
) -> Result<Vec<J::Run>> {
    let mut runs = Vec::with_capacity(engines.len());
    for &kind in engines {
        let path = base.join(kind.flag_name());
        runs.push(run_on(kind, &path, &mut *out, job(&path))?);
    }
    Ok(runs)
}

/// A suite's report as [`run_grid`] fills it: one entry per configuration, each printed as a table. Implemented
/// with the `grid_report!` macro next to it.
pub trait GridReport: serde::Serialize {
    /// One configuration's result.
    type Config;
    /// The table printed after the configuration ran.
    fn table(config: &Self::Config) -> String;
    /// Adds the configuration to the report.
    fn push(&mut self, config: Self::Config);
}

/// `grid_report!(Report, Config, table_fn)`: [`GridReport`] for a report whose `configs` field holds the
/// configurations, each printed by `table_fn`.
macro_rules! grid_report {
    ($report:ty, $config:ty, $table:path) => {
        impl $crate::table_suites::harness::GridReport for $report {
            type Config = $config;

            fn table(config: &$config) -> String {
                $table(config)
            }

            fn push(&mut self, config: $config) {
                self.configs.push(config);
            }
        }
    };
}
pub(crate) use grid_report;

/// A suite's grid of configurations, `outer` x `inner` (outer slowest), each run on every engine of `engines` in
/// turn ([`run_engines`], databases in `base/<engine>`). Per configuration, numbered from 0 in grid order: the
/// heading `heading` makes is printed, `job` makes each engine's job, `result` makes the configuration's result of
/// the runs, whose table is printed before it is added to `report` and the JSON is rewritten ([`config_done`]).
pub fn run_grid<O: Copy, I: Copy, J: EngineJob, R: GridReport>(
    flags: &SuiteFlags,
    engines: &[EngineKind],
    base: &Path,
    out: &mut dyn Write,
    report: &mut R,
    (outer, inner): (&[O], &[I]),
    heading: impl Fn(O, I) -> String,
    job: impl Fn(usize, O, I) -> J,
    result: impl Fn(O, I, Vec<J::Run>) -> R::Config,
) -> Result<()> {
    let mut cfg = 0;
    for &o in outer {
        for &i in inner {
            print_heading(out, &heading(o, i));
            let runs = run_engines(engines, base, out, |_: &Path| job(cfg, o, i))?;
            let config = result(o, i, runs);
            let table = R::table(&config);
            report.push(config);
            config_done(out, &table, flags, report)?;
            cfg += 1;
        }
    }
    Ok(())
}

/// The end of one configuration: its table printed after a blank line, then the JSON rewritten
/// ([`SuiteFlags::save_json`]) with the configuration in `report`.
pub fn config_done<T: serde::Serialize>(
    out: &mut dyn Write,
    table: &str,
    flags: &SuiteFlags,
    report: &T,
) -> Result<()> {
    let _ = writeln!(out, "\n{table}");
    flags.save_json(report)
}

struct Visit<'a, J> {
    job: J,
    db: &'a Path,
    out: &'a mut dyn Write,
}

impl<J: EngineJob> EngineVisitor for Visit<'_, J> {
    type Output = Result<J::Run>;
    fn visit<E: Engine>(self) -> Result<J::Run> {
        remove_db::<E>(self.db, "removing the old database at")?;
        let run = self.job.run::<E>(self.db, self.out)?;
        remove_db::<E>(self.db, "removing the database at")?;
        Ok(run)
    }
}

/// The `--progress` bar of one engine's run: steps done out of the run's steps, the current step's name and
/// the time since the run began, on stderr. Drawn where `shaledb bench` draws its bar: only with `--progress`
/// and when stderr is a terminal; otherwise nothing is drawn. Cleared when dropped.
pub struct StepBar(Option<ProgressBar>);

impl StepBar {
    /// A bar of `steps` steps labelled `label`; `show` is `--progress`.
    pub fn new(show: bool, label: &str, steps: usize) -> StepBar {
        if !(show && std::io::stderr().is_terminal()) {
            return StepBar(None);
        }
        let b = ProgressBar::with_draw_target(Some(steps as u64), ProgressDrawTarget::stderr());
        let template = "{prefix:>16} [{elapsed_precise}] {wide_bar:.cyan/blue} {pos}/{len} steps  {msg}";
        if let Ok(style) = ProgressStyle::with_template(template) {
            b.set_style(style.progress_chars("=> "));
        }
        b.set_prefix(label.to_string());
        b.enable_steady_tick(Duration::from_millis(500));
        StepBar(Some(b))
    }

    /// Step `name` begins.
    pub fn step(&self, name: &str) {
        if let Some(b) = &self.0 {
            b.set_message(name.to_string());
        }
    }

    /// The current step is done.
    pub fn done(&self) {
        if let Some(b) = &self.0 {
            b.inc(1);
        }
    }

    /// Whether the bar is drawn.
    pub fn is_drawn(&self) -> bool {
        self.0.is_some()
    }
}

impl Drop for StepBar {
    fn drop(&mut self) {
        if let Some(b) = self.0.take() {
            b.finish_and_clear();
        }
    }
}

/// How an engine option's value is read from the flags.
type ReadOption = fn(&BenchFlags) -> String;

/// The engine options a suite's [`option_list`] reads from its flags: the flag's name and its value.
const FLAG_OPTIONS: &[(&str, ReadOption)] = &[
    ("block_size", |f| f.block_size.to_string()),
    ("bloom_bits", |f| f.bloom_bits.to_string()),
    ("cache_size", |f| f.cache_size.to_string()),
    ("cache_index_and_filter_blocks", |f| f.cache_index_and_filter_blocks.to_string()),
    ("write_buffer_size", |f| f.write_buffer_size.to_string()),
    ("max_write_buffer_number", |f| f.max_write_buffer_number.to_string()),
    ("level_compaction_dynamic_level_bytes", |f| f.level_compaction_dynamic_level_bytes.to_string()),
    ("max_bytes_for_level_base", |f| f.max_bytes_for_level_base.to_string()),
    ("max_bytes_for_level_multiplier", |f| f.max_bytes_for_level_multiplier.to_string()),
    ("target_file_size_base", |f| f.target_file_size_base.to_string()),
    ("num_levels", |f| f.num_levels.to_string()),
    ("level0_file_num_compaction_trigger", |f| f.level0_file_num_compaction_trigger.to_string()),
    ("level0_slowdown_writes_trigger", |f| f.level0_slowdown_writes_trigger.to_string()),
    ("level0_stop_writes_trigger", |f| f.level0_stop_writes_trigger.to_string()),
    ("compression_per_level", |f| f.compression_per_level.clone()),
    ("max_background_jobs", |f| f.background_jobs().to_string()),
    ("use_direct_reads", |f| f.use_direct_reads.to_string()),
    ("max_open_files", |f| f.open_files.to_string()),
];

/// The engine options a suite prints once and keeps in its JSON, in the order of `names` (separated by
/// whitespace): each name is a note of the suite's (`notes`: what it says of a setting that is not one flag,
/// such as the WAL) or an engine option of `f`; notes not named in `names` follow at the end. A name that is
/// neither is listed as `?`.
pub fn option_list(f: &BenchFlags, names: &str, notes: &[(&str, String)]) -> Vec<(String, String)> {
    let value = |name: &str| {
        notes
            .iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.clone())
            .or_else(|| FLAG_OPTIONS.iter().find(|(k, _)| *k == name).map(|(_, v)| v(f)))
            .unwrap_or_else(|| "?".into())
    };
    let names: Vec<&str> = names.split_whitespace().collect();
    let mut list: Vec<(String, String)> = names.iter().map(|n| (n.to_string(), value(n))).collect();
    list.extend(notes.iter().filter(|(k, _)| !names.contains(k)).map(|(k, v)| (k.to_string(), v.clone())));
    list
}

/// A seed from the clock (odd, never 0), for `--seed 0`.
pub fn clock_seed() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(1, |d| d.as_nanos() as u64 | 1)
}

/// `seed`, or [`clock_seed`] when it is 0.
pub fn resolve_seed(seed: u64) -> u64 {
    if seed != 0 {
        seed
    } else {
        clock_seed()
    }
}

/// The directory under which a suite puts each engine's database: `--db`, or a new temporary directory
/// under the current one, removed when this is dropped.
pub struct SuiteDir {
    path: PathBuf,
    _tmp: Option<tempfile::TempDir>,
}

impl SuiteDir {
    /// `db` (created if missing), or a temporary directory named `prefix...` in the current directory. Each
    /// engine's database goes in `db/<engine>` (`shaledb`, `rocksdb`): one already there is refused unless
    /// `use_existing_db` is `Some(false)` (`--use_existing_db=0`), which deletes it first, saying so once
    /// ([`crate::db_bench::dbdir::claim_all`]). A `db` that is itself a database is refused (the suite would put its
    /// own databases inside it). Everything is checked before anything is created or deleted.
    pub fn create(
        db: Option<&Path>,
        prefix: &str,
        engines: &[EngineKind],
        use_existing_db: Option<bool>,
    ) -> Result<SuiteDir> {
        crate::db_bench::dbdir::check_suite_flag(use_existing_db)?;
        let (path, tmp) = match db {
            Some(p) => {
                if let crate::db_bench::dbdir::Contents::Database { .. } = crate::db_bench::dbdir::inspect(p, "db")? {
                    return Err(BenchError::BadFlag {
                        flag: "db".into(),
                        msg: format!(
                            "{} holds a database; the suite puts each engine's database in a subdirectory of --db \
                             (<db>/shaledb, <db>/rocksdb): choose another directory",
                            p.display()
                        ),
                    });
                }
                let mut engines = engines.to_vec();
                engines.dedup();
                let paths: Vec<(EngineKind, PathBuf)> = engines.iter().map(|&k| (k, p.join(k.flag_name()))).collect();
                crate::db_bench::dbdir::claim_all(&paths, use_existing_db)?;
                (p.to_path_buf(), None)
            }
            None => {
                let tmp = tempfile::Builder::new().prefix(prefix).tempdir_in(".").map_err(|source| BenchError::Io {
                    what: "creating a temporary database directory in",
                    path: ".".into(),
                    cause: source,
                })?;
                (tmp.path().to_path_buf(), Some(tmp))
            }
        };
        std::fs::create_dir_all(&path).map_err(|source| BenchError::Io {
            what: "creating the database directory",
            path: path.clone(),
            cause: source,
        })?;
        Ok(SuiteDir { path, _tmp: tmp })
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// An error naming `--engine` when an engine is not in this build.
pub fn check_available(engines: &[EngineKind]) -> Result<()> {
    match engines.iter().find(|e| !e.available()) {
        Some(e) => Err(BenchError::BadFlag {
            flag: "engine".into(),
            msg: format!("{}: {}", e.flag_name(), crate::engine::ROCKSDB_MISSING),
        }),
        None => Ok(()),
    }
}

/// The engine options of the run header: `heading`, then one `name value` line per option.
pub fn print_options(out: &mut dyn Write, heading: &str, options: &[(String, String)]) {
    let _ = writeln!(out, "{heading}");
    for (k, v) in options {
        let _ = writeln!(out, "  {k:<40} {v}");
    }
}

/// A section of a suite's output: a blank line, then `===== title =====`.
pub fn print_heading(out: &mut dyn Write, title: &str) {
    let _ = writeln!(out, "\n===== {title} =====");
}

/// Opens engine `E` at `path`; a failed O_DIRECT open says how to run without it.
pub fn open_engine<E: Engine>(path: &Path, f: &BenchFlags) -> Result<E> {
    E::open(path, f).map_err(|e| {
        let direct = e.to_string().contains("direct") || e.to_string().contains("O_DIRECT");
        let hint = match (f.use_direct_reads, f.use_direct_io_for_flush_and_compaction) {
            (true, false) if direct => " (this engine cannot read with O_DIRECT here: run with --use_direct_reads=0)",
            (false, true) if direct => {
                " (this engine cannot write tables with O_DIRECT here: run with \
                 --use_direct_io_for_flush_and_compaction=0)"
            }
            (true, true) if direct => {
                " (this engine cannot use O_DIRECT here: run with --use_direct_reads=0 \
                 --use_direct_io_for_flush_and_compaction=0)"
            }
            _ => "",
        };
        BenchError::engine(format!("opening {} at {}{hint}", E::name(), path.display()), e)
    })
}

/// Removes engine `E`'s database at `path`, one the suite made (or claimed with [`SuiteDir::create`]), without
/// a message; the error says `{what} {path}`.
pub fn remove_db<E: Engine>(path: &Path, what: &str) -> Result<()> {
    E::destroy(path).map(drop).map_err(|e| BenchError::engine(format!("{what} {}", path.display()), e))
}

/// Turns a table-layer error into a [`BenchError`] saying what was being done.
pub fn table_err(what: impl Into<String>) -> impl FnOnce(TableError) -> BenchError {
    let what = what.into();
    move |e| BenchError::engine(what, Box::new(e))
}

/// Writes `report` as JSON to `json`, if given (a suite calls this after each configuration, so an
/// interrupted run keeps what it measured).
pub fn save_json<T: serde::Serialize>(json: Option<&Path>, report: &T) -> Result<()> {
    match json {
        Some(p) => crate::reporting::report::write_json_file(p, report),
        None => Ok(()),
    }
}

/// The end of a suite: the JSON once more, then the plots into `plot` (if given) with a line saying how many
/// files were written.
pub fn finish<T: serde::Serialize>(
    out: &mut dyn Write,
    json: Option<&Path>,
    plot: Option<&Path>,
    report: &T,
    write_plots: impl FnOnce(&Path, &T) -> Result<Vec<PathBuf>>,
) -> Result<()> {
    save_json(json, report)?;
    if let Some(dir) = plot {
        let files = write_plots(dir, report)?;
        let _ = writeln!(out, "plots: {} files in {}", files.len(), dir.display());
    }
    Ok(())
}

/// The widths of a [`cost_table`]'s columns.
#[derive(Clone, Copy, Debug)]
pub struct CostWidths {
    /// The row label (a test or step name).
    pub label: usize,
    /// Storage bytes read per operation.
    pub read: usize,
    /// Storage bytes written per operation.
    pub write: usize,
    /// CPU microseconds per operation.
    pub cpu: usize,
    /// The p99 latency in microseconds, when the table has it.
    pub p99: Option<usize>,
}

/// The per-operation table of a configuration: the `heading` line, a header (`label_head`, then per engine
/// `<engine> rd B`, `wr B`, `CPU us` and with `w.p99` `p99 us`), then a line per row label: per engine the
/// storage bytes read and written and the CPU microseconds per operation and the p99 latency that `cell`
/// gives for (row, engine index), `-` where it gives none. Appended to `s`.
pub fn cost_table<'a>(
    s: &mut String,
    heading: &str,
    label_head: &str,
    w: CostWidths,
    engines: &[&str],
    rows: &[&str],
    cell: impl Fn(&str, usize) -> Option<(&'a OpCost, Option<f64>)>,
) {
    let (lw, rw, ww, cw) = (w.label, w.read, w.write, w.cpu);
    let _ = writeln!(s, "\n{heading}");
    let _ = write!(s, "{label_head:<lw$}");
    for n in engines {
        let _ = write!(s, " | {:>rw$} {:>ww$} {:>cw$}", format!("{n} rd B"), "wr B", "CPU us");
        if let Some(pw) = w.p99 {
            let _ = write!(s, " {:>pw$}", "p99 us");
        }
    }
    let _ = writeln!(s);
    for row in rows {
        let _ = write!(s, "{row:<lw$}");
        for i in 0..engines.len() {
            let (rd, wr, cpu, p99) = match cell(row, i) {
                Some((c, p99)) => {
                    (opt(c.read_bytes_per_op, 0), opt(c.write_bytes_per_op, 0), opt(c.cpu_us_per_op, 1), opt(p99, 0))
                }
                None => ("-".into(), "-".into(), "-".into(), "-".into()),
            };
            let _ = write!(s, " | {rd:>rw$} {wr:>ww$} {cpu:>cw$}");
            if let Some(pw) = w.p99 {
                let _ = write!(s, " {p99:>pw$}");
            }
        }
        let _ = writeln!(s);
    }
}

/// Writes one bar chart (SVG and PNG, `stem` in `dir`, `size` pixels): with `ratios` the first engine's
/// figure over the second's per bar, with a line at 1.0; otherwise one engine's figures (a linear axis from
/// 0, or a log axis when they span 10x or more).
pub(crate) fn bar_chart(
    dir: &Path,
    stem: &str,
    size: (u32, u32),
    title: &str,
    bars: &[(String, f64)],
    ratios: bool,
    style: BarStyle,
) -> Result<Vec<PathBuf>> {
    let scale = if ratios { BarScale::Ratio } else { BarScale::Figures };
    write_pair(dir, stem, size, &|a| draw_bar_chart(a, title, bars, scale, style), &|a| {
        draw_bar_chart(a, title, bars, scale, style)
    })
}

/// `x` with `prec` decimals, `-` for none.
pub fn opt(v: Option<f64>, prec: usize) -> String {
    match v {
        Some(x) => format!("{x:.prec$}"),
        None => "-".into(),
    }
}

/// Human-readable bytes: 1.5 GiB, 512 MiB.
pub fn human_bytes(b: u64) -> String {
    let b = b as f64;
    if b >= (1u64 << 30) as f64 {
        format!("{:.2} GiB", b / (1u64 << 30) as f64)
    } else if b >= (1u64 << 20) as f64 {
        format!("{:.1} MiB", b / (1u64 << 20) as f64)
    } else {
        format!("{:.0} KiB", b / 1024.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Options are listed in the order named, a suite's note standing where it is named or after the flags,
    /// and a name that is neither a flag nor a note shows as `?`.
    #[test]
    fn option_list_follows_the_names_and_notes() {
        let f = BenchFlags { block_size: 4096, open_files: -1, ..BenchFlags::default() };
        let notes = [("compression", "snappy on every level".to_string()), ("wal", "off".to_string())];
        let list = option_list(&f, "block_size compression\n max_open_files bogus", &notes);
        let got: Vec<(&str, &str)> = list.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        assert_eq!(
            got,
            [
                ("block_size", "4096"),
                ("compression", "snappy on every level"),
                ("max_open_files", "-1"),
                ("bogus", "?"),
                ("wal", "off")
            ]
        );
        let mut names: Vec<&str> = FLAG_OPTIONS.iter().map(|(k, _)| *k).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), FLAG_OPTIONS.len(), "each option is listed once");
    }

    /// The per-operation table: a header per engine, each cell with the given widths, `-` for a missing row.
    #[test]
    fn cost_table_aligns_each_engine_and_marks_missing_rows() {
        let cost = OpCost { read_bytes_per_op: Some(4096.0), cpu_us_per_op: Some(12.25), ..OpCost::default() };
        let w = CostWidths { label: 6, read: 8, write: 6, cpu: 7, p99: Some(6) };
        let mut s = String::new();
        cost_table(&mut s, "per op", "step", w, &["A", "B"], &["load", "pq.1"], |row, i| {
            (row == "load" || i == 0).then_some((&cost, Some(250.0)))
        });
        let lines: Vec<&str> = s.lines().collect();
        assert_eq!(lines[0], "");
        assert_eq!(lines[1], "per op");
        assert_eq!(
            lines[2],
            format!(
                "{:<6} | {:>8} {:>6} {:>7} {:>6} | {:>8} {:>6} {:>7} {:>6}",
                "step", "A rd B", "wr B", "CPU us", "p99 us", "B rd B", "wr B", "CPU us", "p99 us"
            )
        );
        assert_eq!(
            lines[3],
            format!(
                "{:<6} | {:>8} {:>6} {:>7} {:>6} | {:>8} {:>6} {:>7} {:>6}",
                "load", "4096", "-", "12.2", "250", "4096", "-", "12.2", "250"
            )
        );
        assert_eq!(
            lines[4],
            format!(
                "{:<6} | {:>8} {:>6} {:>7} {:>6} | {:>8} {:>6} {:>7} {:>6}",
                "pq.1", "4096", "-", "12.2", "250", "-", "-", "-", "-"
            )
        );
        let mut no_p99 = String::new();
        let w = CostWidths { p99: None, ..w };
        cost_table(&mut no_p99, "h", "t", w, &["A"], &["x"], |_, _| Some((&cost, Some(1.0))));
        assert!(!no_p99.contains("p99") && no_p99.lines().nth(3).unwrap().ends_with("12.2"), "{no_p99}");
    }

    /// Without `--progress` no bar is drawn, and the calls a suite makes on it do nothing.
    #[test]
    fn step_bar_is_not_drawn_without_progress() {
        let bar = SuiteFlags { progress: false, ..SuiteFlags::default() }.step_bar("ShaleDB", 3);
        assert!(!bar.is_drawn());
        bar.step("load");
        bar.done();
        assert!(!bar.is_drawn());
    }

    #[test]
    fn human_bytes_units() {
        assert_eq!(human_bytes(512 << 20), "512.0 MiB");
        assert_eq!(human_bytes(3 << 30), "3.00 GiB");
        assert_eq!(human_bytes(2048), "2 KiB");
    }

    #[test]
    fn opt_and_seed() {
        assert_eq!(opt(Some(1.26), 1), "1.3");
        assert_eq!(opt(None, 3), "-");
        assert_eq!(resolve_seed(7), 7);
        assert_ne!(resolve_seed(0), 0);
    }

    /// A database in `--db/<engine>` is the user's until `--use_existing_db=0` says otherwise; `--db` that is
    /// itself a database is never used as the parent of the suite's databases.
    #[test]
    fn suite_dir_refuses_a_database_it_did_not_make() {
        let dir = tempfile::tempdir().unwrap();
        let given = dir.path().join("suite");
        let db = given.join("shaledb");
        let engine: crate::engine::shale::ShaleDb = Engine::open(&db, &BenchFlags::default()).unwrap();
        engine.put(crate::engine::WriteMode::default(), b"k", b"v").unwrap();
        engine.close().unwrap();
        let before = std::fs::read_dir(&db).unwrap().count();
        let e = SuiteDir::create(Some(&given), "unused-", &[EngineKind::Shaledb], None).err().unwrap();
        assert!(matches!(e, BenchError::Usage(_)), "{e}");
        assert!(e.to_string().contains("holds a database") && e.to_string().contains("--use_existing_db=0"), "{e}");
        assert_eq!(std::fs::read_dir(&db).unwrap().count(), before, "nothing deleted");
        let e = SuiteDir::create(Some(&db), "unused-", &[EngineKind::Shaledb], Some(false)).err().unwrap();
        assert!(e.to_string().contains("subdirectory"), "{e}");
        assert!(SuiteDir::create(Some(&given), "unused-", &[EngineKind::Shaledb], Some(true)).is_err());
        SuiteDir::create(Some(&given), "unused-", &[EngineKind::Shaledb], Some(false)).unwrap();
        assert!(!db.exists(), "deleted when asked");
        std::fs::create_dir_all(&db).unwrap();
        std::fs::write(db.join("notes.txt"), b"mine").unwrap();
        let e = SuiteDir::create(Some(&given), "unused-", &[EngineKind::Shaledb], Some(false)).err().unwrap();
        assert!(e.to_string().contains("notes.txt"), "{e}");
        assert!(db.join("notes.txt").exists());
    }

    #[test]
    fn suite_dir_creates_the_given_directory_and_options_print_aligned() {
        let dir = tempfile::tempdir().unwrap();
        let given = dir.path().join("a/b");
        let d = SuiteDir::create(Some(&given), "unused-", &[EngineKind::Shaledb], None).unwrap();
        assert!(given.is_dir() && d.path() == given);
        let mut out = Vec::new();
        print_options(&mut out, "engine options:", &[("k".into(), "v".into())]);
        assert_eq!(String::from_utf8(out).unwrap(), format!("engine options:\n  {:<40} v\n", "k"));
    }
}
