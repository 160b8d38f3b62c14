//! The suite's figures (JSON), its tables (the seed's per-test table per configuration, the per-statement
//! costs, the summary across configurations) and its plots (one bar chart per configuration).

use crate::reporting::plot::{create_plot_dir, BarStyle};
use crate::table_suites::harness::{bar_chart, cost_table, opt, CostWidths};
use crate::table_suites::measure::{EngineDelta, OpCost, ProcDelta};
use crate::table_suites::table::SessionStats;
use crate::Result;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// What a test's main figure counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, serde::Serialize)]
pub enum Unit {
    /// Statements per second (BEGIN/COMMIT included), as sysbench's `queries:` line.
    #[default]
    #[serde(rename = "QPS")]
    Qps,
    /// Million rows read per second (full scans).
    #[serde(rename = "Mrps")]
    Mrps,
}

impl Unit {
    /// As printed.
    pub fn label(self) -> &'static str {
        match self {
            Unit::Qps => "QPS",
            Unit::Mrps => "Mrps",
        }
    }

    fn format(self, v: f64) -> String {
        match self {
            Unit::Qps => format!("{v:.0}"),
            Unit::Mrps => format!("{v:.3}"),
        }
    }
}

/// Statements per second over one `--report_interval`.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct Interval {
    /// Seconds since the test began, at the end of the interval.
    pub t: f64,
    /// Statements (or rows, for scans) per second in the interval.
    pub rate: f64,
}

/// One test on one engine.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct TestResult {
    /// The test.
    pub name: String,
    /// What `value` counts.
    pub unit: Unit,
    /// QPS, or Mrps for scans.
    pub value: f64,
    /// Client threads (scans: one per table).
    pub threads: usize,
    /// Wall seconds.
    pub seconds: f64,
    /// Events (sysbench's transactions; scans: tables scanned).
    pub events: u64,
    /// Statements, BEGIN/COMMIT included.
    pub statements: u64,
    /// Rows read by scans.
    pub rows: u64,
    /// The unit of the per-operation figures: statements, or rows for scans.
    pub ops: u64,
    /// Storage bytes and CPU per operation, and the counters' deltas (flattened into this record's JSON).
    #[serde(flatten)]
    pub per_op: OpCost,
    /// What the sessions asked of the engine.
    pub session: SessionStats,
    /// Per-interval rates with `--report_interval`.
    pub intervals: Vec<Interval>,
}

/// The load (sysbench's prepare).
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct LoadResult {
    /// Rows inserted, all tables.
    pub rows: u64,
    /// Seconds the inserts took.
    pub seconds: f64,
    /// Rows per second.
    pub rows_per_sec: f64,
    /// Seconds then spent waiting for flushes and compactions to finish, before the tests.
    pub compaction_wait_secs: f64,
    /// Process counters over inserts and wait.
    pub process: ProcDelta,
    /// Engine counters over inserts and wait.
    pub engine: EngineDelta,
}

/// One engine's run of one configuration.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct EngineRun {
    /// `--engine` name.
    pub engine: String,
    /// Display name.
    pub name: String,
    /// Database directory.
    pub db: PathBuf,
    /// Block cache bytes.
    pub cache_bytes: u64,
    /// `du` of the database after the load.
    pub db_bytes_after_load: u64,
    /// `du` of the database after the last test.
    pub db_bytes_end: u64,
    /// The load.
    pub load: LoadResult,
    /// The tests, in order.
    pub tests: Vec<TestResult>,
}

impl EngineRun {
    fn test(&self, name: &str) -> Option<&TestResult> {
        self.tests.iter().find(|t| t.name == name)
    }
}

/// A configuration: compression setting x client threads, every engine on a fresh database.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct ConfigResult {
    /// The compression setting.
    pub compression: String,
    /// Client threads.
    pub threads: usize,
    /// One run per engine, in `--engine` order.
    pub runs: Vec<EngineRun>,
    /// First engine over second per test (load: rows/s), when two engines ran.
    pub ratios: Vec<Ratio>,
}

/// A ratio of the first engine's figure over the second's.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct Ratio {
    /// The test (`load` for the load's rows/s).
    pub test: String,
    /// The ratio; `None` when the second engine's figure is 0.
    pub ratio: Option<f64>,
}

impl ConfigResult {
    /// The configuration `compression` x `threads` of `runs` (one per engine, in `--engine` order), its ratios
    /// computed.
    pub fn of_runs(compression: &str, threads: usize, runs: Vec<EngineRun>) -> ConfigResult {
        let mut c = ConfigResult { compression: compression.into(), threads, runs, ratios: Vec::new() };
        c.compute_ratios();
        c
    }

    /// `none/t1`.
    pub fn label(&self) -> String {
        format!("{}/t{}", self.compression, self.threads)
    }

    /// Computes `ratios` from the first two runs.
    pub fn compute_ratios(&mut self) {
        self.ratios.clear();
        let [a, b, ..] = self.runs.as_slice() else { return };
        let r = |x: f64, y: f64| if y > 0.0 { Some(x / y) } else { None };
        self.ratios.push(Ratio { test: "load".into(), ratio: r(a.load.rows_per_sec, b.load.rows_per_sec) });
        for t in &a.tests {
            if let Some(u) = b.test(&t.name) {
                self.ratios.push(Ratio { test: t.name.clone(), ratio: r(t.value, u.value) });
            }
        }
    }

    fn ratio(&self, test: &str) -> Option<f64> {
        self.ratios.iter().find(|r| r.test == test).and_then(|r| r.ratio)
    }
}

crate::table_suites::harness::grid_report!(SysbenchReport, ConfigResult, config_table);

/// Everything the suite measured.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct SysbenchReport {
    /// The command's arguments.
    pub args: serde_json::Value,
    /// The random seed used.
    pub seed: u64,
    /// Engine options common to every run (name, value).
    pub engine_options: Vec<(String, String)>,
    /// The configurations, in run order.
    pub configs: Vec<ConfigResult>,
}

/// Human-readable bytes (kept here, where the suites first found it).
pub use crate::table_suites::harness::human_bytes;

/// The seed's table for one configuration: per test its unit, each engine's figure and the ratio; then per
/// test and engine the storage bytes read and written and the CPU per statement (per row for scans).
pub fn config_table(c: &ConfigResult) -> String {
    let mut s = String::new();
    let names: Vec<&str> = c.runs.iter().map(|r| r.name.as_str()).collect();
    let ratio_head = if c.runs.len() >= 2 { format!("{}/{}", names[0], names[1]) } else { String::new() };
    let _ = write!(s, "{:<26} {:<6}", "test", "unit");
    for n in &names {
        let _ = write!(s, " {n:>12}");
    }
    let _ = writeln!(s, " {ratio_head:>16}");
    let _ = write!(s, "{:<26} {:<6}", "load", "rows/s");
    for r in &c.runs {
        let _ = write!(s, " {:>12.0}", r.load.rows_per_sec);
    }
    let _ = writeln!(s, " {:>16}", if c.runs.len() >= 2 { opt(c.ratio("load"), 2) } else { String::new() });
    let Some(first) = c.runs.first() else { return s };
    for t in &first.tests {
        let _ = write!(s, "{:<26} {:<6}", t.name, t.unit.label());
        for r in &c.runs {
            let v = r.test(&t.name).map(|x| x.unit.format(x.value)).unwrap_or_else(|| "-".into());
            let _ = write!(s, " {v:>12}");
        }
        let _ = writeln!(s, " {:>16}", if c.runs.len() >= 2 { opt(c.ratio(&t.name), 2) } else { String::new() });
    }
    let rows: Vec<&str> = first.tests.iter().map(|t| t.name.as_str()).collect();
    cost_table(
        &mut s,
        "per statement (scans: per row): storage bytes read, written, CPU microseconds",
        "test",
        CostWidths { label: 26, read: 10, write: 10, cpu: 9, p99: None },
        &names,
        &rows,
        |test, i| c.runs.get(i).and_then(|r| r.test(test)).map(|x| (&x.per_op, None)),
    );
    s
}

/// Across configurations: per test the ratio (two engines) or the first engine's figure (one engine).
pub fn summary_table(r: &SysbenchReport) -> String {
    let mut s = String::new();
    let Some(first) = r.configs.first() else { return s };
    let two = first.runs.len() >= 2;
    if two {
        let _ =
            writeln!(s, "ratio {}/{} per configuration (compression/threads)", first.runs[0].name, first.runs[1].name);
    } else if let Some(run) = first.runs.first() {
        let _ =
            writeln!(s, "{} per configuration (compression/threads): QPS, Mrps for scans, rows/s for load", run.name);
    }
    let _ = write!(s, "{:<26}", "test");
    for c in &r.configs {
        let _ = write!(s, " {:>14}", c.label());
    }
    let _ = writeln!(s);
    let mut tests = vec!["load".to_string()];
    if let Some(run) = first.runs.first() {
        tests.extend(run.tests.iter().map(|t| t.name.clone()));
    }
    for t in &tests {
        let _ = write!(s, "{t:<26}");
        for c in &r.configs {
            let cell = if two {
                opt(c.ratio(t), 2)
            } else {
                match c.runs.first() {
                    Some(run) if t == "load" => format!("{:.0}", run.load.rows_per_sec),
                    Some(run) => run.test(t).map(|x| x.unit.format(x.value)).unwrap_or_else(|| "-".into()),
                    None => "-".into(),
                }
            };
            let _ = write!(s, " {cell:>14}");
        }
        let _ = writeln!(s);
    }
    s
}

/// The chart's caption and label sizes.
const BAR_STYLE: BarStyle = BarStyle { caption: 22, ratio_labels: 200, log_labels: 240 };

/// Writes one bar chart per configuration into `dir` (SVG and PNG): with two engines the ratio of the first
/// over the second per test, with a line at 1.0; with one engine its figure per test (a linear axis from 0,
/// or a log axis when the figures span 10x or more).
pub fn write_plots(dir: &Path, r: &SysbenchReport) -> Result<Vec<PathBuf>> {
    create_plot_dir(dir)?;
    let mut files = Vec::new();
    for (i, c) in r.configs.iter().enumerate() {
        let stem = format!("sysbench-{:02}-{}-t{}", i + 1, c.compression, c.threads);
        let two = c.runs.len() >= 2;
        let bars: Vec<(String, f64)> = if two {
            c.ratios.iter().map(|r| (r.test.clone(), r.ratio.unwrap_or(0.0))).collect()
        } else {
            c.runs
                .iter()
                .take(1)
                .flat_map(|run| {
                    std::iter::once(("load (rows/s)".to_string(), run.load.rows_per_sec))
                        .chain(run.tests.iter().map(|t| (format!("{} ({})", t.name, t.unit.label()), t.value)))
                })
                .collect()
        };
        let title = if two {
            format!("sysbench OLTP {}: {} / {} per test", c.label(), c.runs[0].name, c.runs[1].name)
        } else {
            format!("sysbench OLTP {}: {} per test", c.label(), c.runs.first().map_or("", |r| r.name.as_str()))
        };
        files.extend(bar_chart(dir, &stem, (1000, 800), &title, &bars, two, BAR_STYLE)?);
    }
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(name: &str, scale: f64) -> EngineRun {
        let t = |n: &str, unit, v| TestResult {
            name: n.into(),
            unit,
            value: v * scale,
            ops: 100,
            per_op: OpCost { read_bytes_per_op: Some(4096.0), cpu_us_per_op: Some(12.5), ..OpCost::default() },
            ..TestResult::default()
        };
        EngineRun {
            engine: name.to_lowercase(),
            name: name.into(),
            load: LoadResult { rows: 1000, seconds: 1.0, rows_per_sec: 1000.0 * scale, ..LoadResult::default() },
            tests: vec![t("point-query.pre", Unit::Qps, 4000.0), t("scan.pre", Unit::Mrps, 0.8)],
            ..EngineRun::default()
        }
    }

    fn config(engines: usize) -> ConfigResult {
        let mut c = ConfigResult { compression: "none".into(), threads: 1, ..ConfigResult::default() };
        c.runs.push(run("ShaleDB", 1.5));
        if engines > 1 {
            c.runs.push(run("RocksDB", 1.0));
        }
        c.compute_ratios();
        c
    }

    #[test]
    fn ratios_and_tables() {
        let c = config(2);
        assert_eq!(c.ratios.len(), 3);
        assert!(c.ratios.iter().all(|r| (r.ratio.unwrap() - 1.5).abs() < 1e-9));
        let text = config_table(&c);
        assert!(text.contains("ShaleDB/RocksDB"), "{text}");
        assert!(text.contains("point-query.pre") && text.contains("6000") && text.contains("1.50"), "{text}");
        assert!(text.contains("1.200") && text.contains("Mrps"), "{text}");
        assert!(text.contains("4096") && text.contains("12.5"), "{text}");
        let rep = SysbenchReport { configs: vec![c.clone(), c], ..SysbenchReport::default() };
        let sum = summary_table(&rep);
        assert!(sum.contains("none/t1") && sum.contains("scan.pre") && sum.contains("1.50"), "{sum}");
    }

    #[test]
    fn one_engine_has_no_ratio() {
        let c = config(1);
        assert!(c.ratios.is_empty());
        let text = config_table(&c);
        assert!(!text.contains('/') || !text.contains("ShaleDB/"), "{text}");
        let rep = SysbenchReport { configs: vec![c], ..SysbenchReport::default() };
        assert!(summary_table(&rep).contains("6000"));
    }

    #[test]
    fn plots_are_written() {
        let dir = tempfile::tempdir().unwrap();
        for engines in [1, 2] {
            let rep = SysbenchReport { configs: vec![config(engines)], ..SysbenchReport::default() };
            let files = write_plots(dir.path(), &rep).unwrap();
            assert_eq!(files.len(), 2);
            let svg = std::fs::read_to_string(&files[0]).unwrap();
            assert!(svg.contains("<svg") && svg.contains("point-query.pre"), "{engines}");
            assert!(std::fs::metadata(&files[1]).unwrap().len() > 5_000);
        }
    }
}
