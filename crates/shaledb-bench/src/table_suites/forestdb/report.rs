//! The suite's figures (JSON), its tables (the seed's "operations/second for each step" and "Size in GB after
//! each step" side by side, per variant) and its plots (per variant: throughput ratio and size per step).

use crate::reporting::plot::{create_plot_dir, BarStyle};
use crate::table_suites::harness::{bar_chart, cost_table, human_bytes, opt, CostWidths};
use crate::table_suites::measure::OpCost;
use crate::Result;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// A writer's achieved rate is "kept" when at least this share of the target.
pub const WRITER_KEPT_SHARE: f64 = 0.95;

/// The rate-limited writer of a `pqw`/`rqw` step.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct WriterResult {
    /// Writes per second asked (`--writer_rate`).
    pub target: f64,
    /// Writes completed in the measured window.
    pub writes: u64,
    /// writes / measured seconds.
    pub rate: f64,
    /// Whether `rate` >= [`WRITER_KEPT_SHARE`] x `target`.
    pub kept: bool,
    /// 99th percentile write latency, microseconds.
    pub p99_us: f64,
}

impl WriterResult {
    /// The verdict for `writes` in `seconds` against `target`/s.
    pub fn new(target: f64, writes: u64, seconds: f64, p99_us: f64) -> WriterResult {
        let rate = writes as f64 / seconds.max(1e-9);
        WriterResult { target, writes, rate, kept: rate >= WRITER_KEPT_SHARE * target, p99_us }
    }
}

/// One step on one engine.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct StepResult {
    /// The seed's name (`load`, `ows.1`, ...).
    pub name: String,
    /// Threads doing the step's operations (the rate-limited writer not included).
    pub threads: usize,
    /// Seconds of warm-up before the measured window (0 for the load).
    pub warmup_secs: f64,
    /// Seconds measured (the load: its whole time, final flush included).
    pub seconds: f64,
    /// Operations counted: documents written (load, overwrites), point queries, or documents read by range
    /// queries (`--range_len` per query).
    pub ops: u64,
    /// Range queries (seeks) completed; for other steps equal to `ops`.
    pub queries: u64,
    /// ops / seconds.
    pub ops_per_sec: f64,
    /// Point or range queries whose document was not found: always 0 unless the engine lost data.
    pub missing: u64,
    /// Median latency of one operation (load: one batch; range step: one whole range query), microseconds.
    pub p50_us: Option<f64>,
    /// 99th percentile, as `p50_us`.
    pub p99_us: Option<f64>,
    /// The rate-limited writer (`pqw`, `rqw` steps).
    pub writer: Option<WriterResult>,
    /// `du` of the database directory after the step, bytes.
    pub db_bytes: u64,
    /// Storage bytes and CPU per operation (process counters: background work included) and the counters'
    /// deltas over the measured window (flattened into this record's JSON).
    #[serde(flatten)]
    pub per_op: OpCost,
}

/// One engine's run of one variant, on a fresh database.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct EngineRun {
    /// `--engine` name.
    pub engine: String,
    /// Display name.
    pub name: String,
    /// Database directory.
    pub db: PathBuf,
    /// The steps in the seed's order.
    pub steps: Vec<StepResult>,
}

impl EngineRun {
    /// The step named `name`.
    pub fn step(&self, name: &str) -> Option<&StepResult> {
        self.steps.iter().find(|s| s.name == name)
    }
}

/// A variant (cached or IO-bound): every engine on a fresh database with the same options.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct VariantResult {
    /// `cached` or `iobound`.
    pub variant: String,
    /// Block cache bytes.
    pub cache_bytes: u64,
    /// Whether table files were read with O_DIRECT.
    pub use_direct_reads: bool,
    /// One run per engine, in `--engine` order.
    pub runs: Vec<EngineRun>,
}

impl VariantResult {
    fn run(&self, engine: &str) -> Option<&EngineRun> {
        self.runs.iter().find(|r| r.engine == engine)
    }

    /// The runs as the seed's table orders its columns: RocksDB first, then the others in run order.
    pub fn columns(&self) -> Vec<&EngineRun> {
        let mut v: Vec<&EngineRun> = self.runs.iter().filter(|r| r.engine == "rocksdb").collect();
        v.extend(self.runs.iter().filter(|r| r.engine != "rocksdb"));
        v
    }

    /// The step names of the first run (every run has the same).
    pub fn step_names(&self) -> Vec<String> {
        self.runs.first().map(|r| r.steps.iter().map(|s| s.name.clone()).collect()).unwrap_or_default()
    }

    /// ShaleDB's figure over RocksDB's for `step`, when both ran and RocksDB's is not 0.
    pub fn ratio(&self, step: &str, f: impl Fn(&StepResult) -> f64) -> Option<f64> {
        let s = f(self.run("shaledb")?.step(step)?);
        let r = f(self.run("rocksdb")?.step(step)?);
        (r > 0.0).then(|| s / r)
    }
}

/// Everything the suite measured.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct ForestdbReport {
    /// The command's arguments.
    pub args: serde_json::Value,
    /// The base random seed used.
    pub seed: u64,
    /// Documents loaded.
    pub docs: u64,
    /// Threads of the `.n` steps.
    pub threads: usize,
    /// docs x (mean key + mean value): the size the cache and LSM options are derived from.
    pub logical_bytes: u64,
    /// Engine options common to every run (name, value).
    pub engine_options: Vec<(String, String)>,
    /// The variants, in run order.
    pub variants: Vec<VariantResult>,
}

fn writer_cell(s: Option<&StepResult>) -> String {
    match s.and_then(|s| s.writer.as_ref()) {
        Some(w) => format!("{} {:.0}/s", if w.kept { "yes" } else { "NO" }, w.rate),
        None => String::new(),
    }
}

/// The seed's table for one variant: per step each engine's operations/s (RocksDB first, as the seed's
/// columns), ShaleDB/RocksDB, each engine's database size after the step and the size ratio, and whether
/// each rate-limited writer kept its rate; then per step and engine the storage bytes read and written and
/// the CPU per operation and the p99 latency.
pub fn variant_table(v: &VariantResult) -> String {
    let mut s = String::new();
    let cols = v.columns();
    let two = v.run("shaledb").is_some() && v.run("rocksdb").is_some();
    let _ = write!(s, "{:<7}", "step");
    for r in &cols {
        let _ = write!(s, " {:>13}", format!("{} op/s", r.name));
    }
    if two {
        let _ = write!(s, " {:>7}", "S/R");
    }
    for r in &cols {
        let _ = write!(s, " {:>13}", format!("{} size", r.name));
    }
    if two {
        let _ = write!(s, " {:>7}", "size S/R");
    }
    let any_writer = cols.iter().any(|r| r.steps.iter().any(|x| x.writer.is_some()));
    if any_writer {
        let target = cols.iter().flat_map(|r| &r.steps).find_map(|x| x.writer.as_ref()).map_or(0.0, |w| w.target);
        for r in &cols {
            let _ = write!(s, " {:>14}", format!("{} kept {target:.0}", r.name));
        }
    }
    let _ = writeln!(s);
    for name in v.step_names() {
        let _ = write!(s, "{name:<7}");
        for r in &cols {
            let _ = write!(s, " {:>13}", opt(r.step(&name).map(|x| x.ops_per_sec), 0));
        }
        if two {
            let _ = write!(s, " {:>7}", opt(v.ratio(&name, |x| x.ops_per_sec), 2));
        }
        for r in &cols {
            let _ = write!(s, " {:>13}", r.step(&name).map_or("-".into(), |x| human_bytes(x.db_bytes)));
        }
        if two {
            let _ = write!(s, " {:>8}", opt(v.ratio(&name, |x| x.db_bytes as f64), 2));
        }
        if any_writer {
            for r in &cols {
                let _ = write!(s, " {:>14}", writer_cell(r.step(&name)));
            }
        }
        let _ = writeln!(s);
    }
    let names: Vec<&str> = cols.iter().map(|r| r.name.as_str()).collect();
    let steps = v.step_names();
    let steps: Vec<&str> = steps.iter().map(String::as_str).collect();
    cost_table(
        &mut s,
        "per operation: storage bytes read, written, CPU microseconds, p99 microseconds",
        "step",
        CostWidths { label: 7, read: 10, write: 8, cpu: 7, p99: Some(8) },
        &names,
        &steps,
        |step, i| cols.get(i).and_then(|r| r.step(step)).map(|x| (&x.per_op, x.p99_us)),
    );
    let lost: Vec<String> = cols
        .iter()
        .flat_map(|r| {
            r.steps.iter().filter(|x| x.missing > 0).map(move |x| format!("{} {}: {}", r.name, x.name, x.missing))
        })
        .collect();
    if !lost.is_empty() {
        let _ = writeln!(s, "\nWARNING: documents not found (the engine lost data): {}", lost.join(", "));
    }
    s
}

/// The charts' caption and label sizes.
const BAR_STYLE: BarStyle = BarStyle { caption: 20, ratio_labels: 90, log_labels: 90 };

/// A chart: file suffix, title, (label, value) bars.
type Chart = (&'static str, String, Vec<(String, f64)>);

/// Writes per variant two bar charts (SVG and PNG) into `dir`: operations/s and database size after each
/// step, as ShaleDB/RocksDB ratios when both engines ran (a line at 1.0), otherwise the one engine's figures
/// (a linear axis from 0, or a log axis when they span 10x or more: `plot::value_axis`).
pub fn write_plots(dir: &Path, r: &ForestdbReport) -> Result<Vec<PathBuf>> {
    create_plot_dir(dir)?;
    let mut files = Vec::new();
    for (i, v) in r.variants.iter().enumerate() {
        let two = v.run("shaledb").is_some() && v.run("rocksdb").is_some();
        let one = v.runs.first();
        let names = v.step_names();
        let charts: [Chart; 2] = if two {
            [
                (
                    "ops",
                    format!("ForestDB benchmark pattern, {}: ShaleDB / RocksDB operations/s per step", v.variant),
                    names.iter().map(|n| (n.clone(), v.ratio(n, |x| x.ops_per_sec).unwrap_or(0.0))).collect(),
                ),
                (
                    "size",
                    format!(
                        "ForestDB benchmark pattern, {}: ShaleDB / RocksDB database size after each step",
                        v.variant
                    ),
                    names.iter().map(|n| (n.clone(), v.ratio(n, |x| x.db_bytes as f64).unwrap_or(0.0))).collect(),
                ),
            ]
        } else {
            let name = one.map_or("", |r| r.name.as_str());
            let fig = |f: &dyn Fn(&StepResult) -> f64| -> Vec<(String, f64)> {
                names.iter().map(|n| (n.clone(), one.and_then(|r| r.step(n)).map_or(0.0, f))).collect()
            };
            [
                (
                    "ops",
                    format!("ForestDB benchmark pattern, {}: {name} operations/s per step", v.variant),
                    fig(&|x| x.ops_per_sec),
                ),
                (
                    "size",
                    format!("ForestDB benchmark pattern, {}: {name} MiB after each step", v.variant),
                    fig(&|x| x.db_bytes as f64 / (1u64 << 20) as f64),
                ),
            ]
        };
        for (what, title, bars) in charts {
            let stem = format!("forestdb-{:02}-{}-{what}", i + 1, v.variant);
            files.extend(bar_chart(dir, &stem, (1000, 700), &title, &bars, two, BAR_STYLE)?);
        }
    }
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(engine: &str, name: &str, scale: f64) -> EngineRun {
        let st = |n: &str, ops: f64, writer: Option<WriterResult>| StepResult {
            name: n.into(),
            threads: 1,
            seconds: 1.0,
            ops: ops as u64,
            queries: ops as u64,
            ops_per_sec: ops * scale,
            db_bytes: (100u64 << 20) * if scale > 1.0 { 2 } else { 1 },
            per_op: OpCost { read_bytes_per_op: Some(4096.0), ..OpCost::default() },
            p99_us: Some(250.0),
            writer,
            ..StepResult::default()
        };
        EngineRun {
            engine: engine.into(),
            name: name.into(),
            steps: vec![
                st("load", 1000.0, None),
                st("pqw.1", 5000.0, Some(WriterResult::new(1000.0, if scale > 1.0 { 700 } else { 990 }, 1.0, 90.0))),
            ],
            ..EngineRun::default()
        }
    }

    fn variant(engines: usize) -> VariantResult {
        let mut v = VariantResult { variant: "cached".into(), cache_bytes: 1 << 30, ..VariantResult::default() };
        v.runs.push(run("shaledb", "ShaleDB", 1.5));
        if engines > 1 {
            v.runs.push(run("rocksdb", "RocksDB", 1.0));
        }
        v
    }

    #[test]
    fn the_seed_table_has_rocksdb_first_ratios_sizes_and_verdicts() {
        let v = variant(2);
        assert_eq!(v.columns()[0].engine, "rocksdb");
        assert!((v.ratio("load", |x| x.ops_per_sec).unwrap() - 1.5).abs() < 1e-9);
        assert!((v.ratio("pqw.1", |x| x.db_bytes as f64).unwrap() - 2.0).abs() < 1e-9);
        let t = variant_table(&v);
        let head = t.lines().next().unwrap();
        assert!(head.find("RocksDB op/s").unwrap() < head.find("ShaleDB op/s").unwrap(), "{t}");
        assert!(t.contains("S/R") && t.contains("1.50") && t.contains("2.00"), "{t}");
        assert!(t.contains("100.0 MiB") && t.contains("200.0 MiB"), "{t}");
        assert!(t.contains("kept 1000") && t.contains("yes 990/s") && t.contains("NO 700/s"), "{t}");
        assert!(t.contains("4096") && t.contains("250"), "{t}");
        assert!(!t.contains("WARNING"));
    }

    #[test]
    fn writer_verdict_is_five_percent() {
        assert!(WriterResult::new(1000.0, 9500, 10.0, 0.0).kept);
        assert!(!WriterResult::new(1000.0, 9499, 10.0, 0.0).kept);
        assert_eq!(WriterResult::new(1000.0, 500, 1.0, 0.0).rate, 500.0);
    }

    #[test]
    fn missing_documents_are_flagged_and_one_engine_has_no_ratio() {
        let mut v = variant(1);
        v.runs[0].steps[1].missing = 3;
        let t = variant_table(&v);
        assert!(!t.contains("S/R"), "{t}");
        assert!(t.contains("WARNING") && t.contains("ShaleDB pqw.1: 3"), "{t}");
        assert_eq!(v.ratio("load", |x| x.ops_per_sec), None);
    }

    #[test]
    fn plots_are_written() {
        let dir = tempfile::tempdir().unwrap();
        for engines in [1, 2] {
            let rep = ForestdbReport { variants: vec![variant(engines)], ..ForestdbReport::default() };
            let files = write_plots(dir.path(), &rep).unwrap();
            assert_eq!(files.len(), 4);
            let svg = std::fs::read_to_string(&files[0]).unwrap();
            assert!(svg.contains("<svg") && svg.contains("pqw.1"), "{engines}");
            assert!(std::fs::metadata(&files[1]).unwrap().len() > 5_000);
        }
    }
}
