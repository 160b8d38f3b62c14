//! The insert benchmark's figures (JSON), its tables (the seed's rows/s table by concurrency and padding with
//! the ratio of the first engine over the second, and per configuration the cost of each step) and its plots
//! (insert rate over time during each load, rows/s per configuration).

use super::KEPT_RATE_FRACTION;
use crate::reporting::plot::{create_plot_dir, write_pair};
use crate::table_suites::harness::human_bytes;
use crate::table_suites::measure::EngineDelta;
use crate::table_suites::measure::ProcDelta;
use crate::table_suites::table::SessionStats;
use crate::Result;
use plotters::prelude::*;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// Rows per second over one `--report_interval` of a load.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct Interval {
    /// Seconds since the load began, at the end of the interval.
    pub t: f64,
    /// Rows inserted by then.
    pub rows: u64,
    /// Rows per second in the interval.
    pub rate: f64,
}

/// What a step cost, from the process and engine counters over the step.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct StepCost {
    /// Rows inserted.
    pub rows: u64,
    /// Logical bytes inserted: key + value bytes of every record written (the row's primary-key record and its
    /// three index entries).
    pub logical_bytes: u64,
    /// Write amplification: bytes the engine wrote by flushes and compactions over `logical_bytes` (the WAL
    /// is not in it: it is written once per byte whatever the engine's shape).
    pub write_amp: Option<f64>,
    /// /proc/self/io `write_bytes` (flushes, compactions and WAL as they reached storage) over
    /// `logical_bytes`.
    pub proc_write_amp: Option<f64>,
    /// /proc/self/io `read_bytes` over `rows`: bytes read from storage per row inserted (queries included in a
    /// query step).
    pub read_bytes_per_row: Option<f64>,
    /// CPU microseconds (all threads of the process: inserters, queries, flushes, compactions) per row.
    pub cpu_us_per_row: Option<f64>,
    /// `du` of the database directory at the end of the step.
    pub db_bytes: u64,
    /// The process counters' deltas.
    pub process: ProcDelta,
    /// The engine counters' deltas.
    pub engine: EngineDelta,
}

impl StepCost {
    /// The figures of a step that inserted `rows` rows of `logical_bytes` bytes.
    pub fn new(rows: u64, logical_bytes: u64, process: ProcDelta, engine: EngineDelta, db_bytes: u64) -> StepCost {
        let per = |x: f64, n: u64| if n > 0 { Some(x / n as f64) } else { None };
        StepCost {
            rows,
            logical_bytes,
            write_amp: per((engine.flush_bytes + engine.compaction_bytes_written) as f64, logical_bytes),
            proc_write_amp: process.write_bytes.and_then(|b| per(b as f64, logical_bytes)),
            read_bytes_per_row: process.read_bytes.and_then(|b| per(b as f64, rows)),
            cpu_us_per_row: process.cpu_secs.and_then(|s| per(s * 1e6, rows)),
            db_bytes,
            process,
            engine,
        }
    }
}

/// An index's logical size at the end of a step.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct IndexSize {
    /// The index (`PRIMARY`, `marketsegment`, ...).
    pub name: String,
    /// Entries.
    pub entries: u64,
    /// Key + value bytes of its entries, counted by a scan of its key range.
    pub bytes: u64,
}

/// The load step.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct LoadStep {
    /// Rows inserted.
    pub rows: u64,
    /// Seconds the inserts took.
    pub seconds: f64,
    /// Rows per second (the seed's figure).
    pub rows_per_sec: f64,
    /// Seconds then spent waiting for flushes and compactions (in `cost`, not in `rows_per_sec`).
    pub compaction_wait_secs: f64,
    /// The insert rate every `--report_interval`.
    pub intervals: Vec<Interval>,
    /// What the inserters asked of the engine.
    pub session: SessionStats,
    /// The cost of the inserts and the compaction wait.
    pub cost: StepCost,
    /// Index sizes after the load.
    pub index_sizes: Vec<IndexSize>,
}

/// A query step: covering range queries beside an inserter held at `target_rate`.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct QueryStep {
    /// `q.<rate>`.
    pub name: String,
    /// Rows per second the inserter was asked for.
    pub target_rate: u64,
    /// Wall seconds.
    pub seconds: f64,
    /// Queries, all threads.
    pub queries: u64,
    /// Queries per secondary index, in index order (marketsegment, registersegment, pdc).
    pub queries_per_index: [u64; 3],
    /// Index entries the queries returned.
    pub rows_read: u64,
    /// Queries per second.
    pub qps: f64,
    /// Rows the inserter inserted.
    pub rows_inserted: u64,
    /// Rows per second it achieved.
    pub insert_rate: f64,
    /// Whether it achieved at least 95% of `target_rate`.
    pub kept_rate: bool,
    /// Storage bytes read per query (/proc/self/io `read_bytes` over the step / queries; the inserter's reads
    /// are in it).
    pub read_bytes_per_query: Option<f64>,
    /// CPU microseconds per query (all threads, the inserter's included).
    pub cpu_us_per_query: Option<f64>,
    /// The step's cost, per row inserted.
    pub cost: StepCost,
    /// What the inserter asked of the engine.
    pub inserter_session: SessionStats,
    /// What the query threads asked of the engine.
    pub query_session: SessionStats,
    /// Index sizes at the end of the step.
    pub index_sizes: Vec<IndexSize>,
}

impl QueryStep {
    /// Fills the per-query figures from `cost.process` and `queries`.
    pub fn set_per_query(&mut self) {
        let n = self.queries;
        let per = |x: f64| if n > 0 { Some(x / n as f64) } else { None };
        self.read_bytes_per_query = self.cost.process.read_bytes.and_then(|b| per(b as f64));
        self.cpu_us_per_query = self.cost.process.cpu_secs.and_then(|s| per(s * 1e6));
    }
}

/// Whether an inserter that achieved `achieved` rows/s kept `target`.
pub fn kept_rate(achieved: f64, target: u64) -> bool {
    achieved >= KEPT_RATE_FRACTION * target as f64
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
    /// The load.
    pub load: LoadStep,
    /// The query steps, in `--query_insert_rates` order (empty when this configuration has none).
    pub queries: Vec<QueryStep>,
    /// Rows in the table at the end.
    pub rows_end: u64,
    /// `du` of the database after closing it.
    pub db_bytes_end: u64,
}

/// A configuration: inserter threads x pad bytes, every engine on a fresh database.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct ConfigResult {
    /// Inserter threads of the load.
    pub threads: usize,
    /// Bytes of the padding column.
    pub pad: usize,
    /// One run per engine, in `--engine` order.
    pub runs: Vec<EngineRun>,
    /// The first engine's load rows/s over the second's, when two engines ran.
    pub load_ratio: Option<f64>,
}

impl ConfigResult {
    /// The configuration `threads` x `pad` of `runs` (one per engine, in `--engine` order), its ratio computed.
    pub fn of_runs(threads: usize, pad: usize, runs: Vec<EngineRun>) -> ConfigResult {
        let mut c = ConfigResult { threads, pad, runs, load_ratio: None };
        c.compute_ratio();
        c
    }

    /// `t1/pad16`.
    pub fn label(&self) -> String {
        format!("t{}/pad{}", self.threads, self.pad)
    }

    /// Computes `load_ratio` from the first two runs.
    pub fn compute_ratio(&mut self) {
        self.load_ratio = match self.runs.as_slice() {
            [a, b, ..] if b.load.rows_per_sec > 0.0 => Some(a.load.rows_per_sec / b.load.rows_per_sec),
            _ => None,
        };
    }
}

crate::table_suites::harness::grid_report!(InsertReport, ConfigResult, config_table);

/// Everything the suite measured.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct InsertReport {
    /// The command's arguments.
    pub args: serde_json::Value,
    /// The random seed used.
    pub seed: u64,
    /// Engine options common to every run (name, value).
    pub engine_options: Vec<(String, String)>,
    /// The configurations, in run order.
    pub configs: Vec<ConfigResult>,
}

/// `x` with `prec` decimals, `-` for none (kept here, where the suites first found it).
pub use crate::table_suites::harness::opt;

/// `indexes: PRIMARY 1000 entries 60 KiB, ...`.
pub fn index_line(v: &[IndexSize]) -> String {
    let parts: Vec<String> =
        v.iter().map(|i| format!("{} {} entries {}", i.name, i.entries, human_bytes(i.bytes))).collect();
    format!("indexes (entries, key+value bytes by scan): {}", parts.join(", "))
}

/// What the cost figures are, printed once before the first step: the detail lines and the tables use the
/// same names, units and denominators.
pub const LEGEND: &str = "\
figures: a step's totals per unit, the unit being a row inserted (load) or a query (q.N steps, whose inserter
  works beside the queries): rd B = bytes read from storage (/proc/self/io read_bytes), CPU us = CPU time of
  every thread of the process (inserters, queries, flushes, compactions);
  wamp = bytes the engine wrote by flushes and compactions / key+value bytes inserted (0.00 while nothing has
  been flushed yet; the WAL is not in it); wamp /proc = bytes the process wrote to storage (/proc/self/io
  write_bytes: WAL, flushes, compactions) / key+value bytes inserted.";

/// A load's detail line.
pub fn load_line(l: &LoadStep, cache_bytes: u64) -> String {
    format!(
        "load: {} rows in {:.1} s = {:.0} rows/s, then {:.1} s of compaction; wamp {}, wamp /proc {}, rd {} B/row, \
         CPU {} us/row; database {} (du), {:.1}x the cache",
        l.rows,
        l.seconds,
        l.rows_per_sec,
        l.compaction_wait_secs,
        opt(l.cost.write_amp, 2),
        opt(l.cost.proc_write_amp, 2),
        opt(l.cost.read_bytes_per_row, 0),
        opt(l.cost.cpu_us_per_row, 1),
        human_bytes(l.cost.db_bytes),
        l.cost.db_bytes as f64 / cache_bytes.max(1) as f64,
    )
}

/// A query step's detail line.
pub fn query_line(q: &QueryStep) -> String {
    format!(
        "{}: {:.0} queries/s ({} per index {:?}, {} rows), inserter {:.0}/{} rows/s {}; rd {} B/query, CPU {} \
         us/query, wamp {}, wamp /proc {}; database {}",
        q.name,
        q.qps,
        q.queries,
        q.queries_per_index,
        q.rows_read,
        q.insert_rate,
        q.target_rate,
        if q.kept_rate { "kept" } else { "NOT kept" },
        opt(q.read_bytes_per_query, 0),
        opt(q.cpu_us_per_query, 1),
        opt(q.cost.write_amp, 2),
        opt(q.cost.proc_write_amp, 2),
        human_bytes(q.cost.db_bytes),
    )
}

/// Per configuration: each step on each engine with its rate, the figures of its cost per unit (a row
/// inserted for the load, a query for a query step: the same figures as the detail lines, see [`LEGEND`])
/// and the database size.
pub fn config_table(c: &ConfigResult) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{:<8} {:<8} {:>12} {:<22} {:>6} {:>11} {:>10} {:>11} {:>10}",
        "step", "engine", "rate", "unit / inserter", "wamp", "wamp /proc", "rd B/unit", "CPU us/unit", "du"
    );
    for r in &c.runs {
        let l = &r.load;
        let _ = writeln!(
            s,
            "{:<8} {:<8} {:>12.0} {:<22} {:>6} {:>11} {:>10} {:>11} {:>10}",
            "load",
            r.name,
            l.rows_per_sec,
            "rows/s (unit: row)",
            opt(l.cost.write_amp, 2),
            opt(l.cost.proc_write_amp, 2),
            opt(l.cost.read_bytes_per_row, 0),
            opt(l.cost.cpu_us_per_row, 1),
            human_bytes(l.cost.db_bytes),
        );
    }
    let steps: Vec<&str> =
        c.runs.first().map(|r| r.queries.iter().map(|q| q.name.as_str()).collect()).unwrap_or_default();
    for name in &steps {
        for r in &c.runs {
            let Some(q) = r.queries.iter().find(|q| q.name == *name) else { continue };
            let ins =
                format!("q/s, {:.0}/{} {}", q.insert_rate, q.target_rate, if q.kept_rate { "kept" } else { "MISSED" });
            let _ = writeln!(
                s,
                "{:<8} {:<8} {:>12.0} {:<22} {:>6} {:>11} {:>10} {:>11} {:>10}",
                q.name,
                r.name,
                q.qps,
                ins,
                opt(q.cost.write_amp, 2),
                opt(q.cost.proc_write_amp, 2),
                opt(q.read_bytes_per_query, 0),
                opt(q.cpu_us_per_query, 1),
                human_bytes(q.cost.db_bytes),
            );
        }
    }
    if let Some(ratio) = c.load_ratio {
        let _ = writeln!(s, "load rows/s {} / {}: {ratio:.2}", c.runs[0].name, c.runs[1].name);
    }
    let mut qr = Vec::new();
    if let [a, b, ..] = c.runs.as_slice() {
        for q in &a.queries {
            if let Some(u) = b.queries.iter().find(|u| u.name == q.name) {
                if u.qps > 0.0 {
                    qr.push(format!("{} {:.2}", q.name, q.qps / u.qps));
                }
            }
        }
        if !qr.is_empty() {
            let _ = writeln!(s, "queries/s {} / {}: {}", a.name, b.name, qr.join(", "));
        }
    }
    s
}

/// The seed's table: one line per engine and pad (`shaledb.sz16`), one column per inserter thread count, the
/// load's rows/s; with two engines a `ratio.szN` line of the first over the second under each pad.
pub fn seed_table(r: &InsertReport) -> String {
    let mut s = String::new();
    let mut threads: Vec<usize> = Vec::new();
    let mut pads: Vec<usize> = Vec::new();
    for c in &r.configs {
        if !threads.contains(&c.threads) {
            threads.push(c.threads);
        }
        if !pads.contains(&c.pad) {
            pads.push(c.pad);
        }
    }
    let engines: Vec<(String, String)> = r
        .configs
        .first()
        .map(|c| c.runs.iter().map(|x| (x.engine.clone(), x.name.clone())).collect())
        .unwrap_or_default();
    let find = |t: usize, p: usize| r.configs.iter().find(|c| c.threads == t && c.pad == p);
    for t in &threads {
        let _ = write!(s, "{t:>10}");
    }
    let _ = writeln!(s, "  concurrency");
    for &p in &pads {
        for (i, (engine, _)) in engines.iter().enumerate() {
            for &t in &threads {
                let v = find(t, p).and_then(|c| c.runs.get(i)).map(|x| format!("{:.0}", x.load.rows_per_sec));
                let _ = write!(s, "{:>10}", v.unwrap_or_else(|| "-".into()));
            }
            let _ = writeln!(s, "  {engine}.sz{p}");
        }
        if engines.len() >= 2 {
            for &t in &threads {
                let _ = write!(s, "{:>10}", opt(find(t, p).and_then(|c| c.load_ratio), 2));
            }
            let _ = writeln!(s, "  ratio.sz{p} ({}/{})", engines[0].1, engines[1].1);
        }
    }
    s
}

/// Writes the plots into `dir`: per configuration `insert-rate-NN-tT-padP` (rows/s over the load, one line
/// per engine), and `insert-rows-per-sec` (the load's rows/s per configuration and engine).
pub fn write_plots(dir: &Path, r: &InsertReport) -> Result<Vec<PathBuf>> {
    create_plot_dir(dir)?;
    let mut files = Vec::new();
    for (i, c) in r.configs.iter().enumerate() {
        let stem = format!("insert-rate-{:02}-t{}-pad{}", i + 1, c.threads, c.pad);
        files.extend(write_pair(dir, &stem, (1200, 700), &|a| draw_rate(a, c), &|a| draw_rate(a, c))?);
    }
    if !r.configs.is_empty() {
        files.extend(write_pair(dir, "insert-rows-per-sec", (1200, 900), &|a| draw_bars(a, r), &|a| draw_bars(a, r))?);
    }
    Ok(files)
}

fn engine_color(i: usize) -> RGBColor {
    [RGBColor(40, 120, 200), RGBColor(220, 90, 60), RGBColor(60, 160, 80)][i % 3]
}

fn e<T: std::fmt::Display>(x: T) -> String {
    x.to_string()
}

fn draw_rate<DB: DrawingBackend>(
    root: &DrawingArea<DB, plotters::coord::Shift>,
    c: &ConfigResult,
) -> std::result::Result<(), String> {
    let family = crate::reporting::plot::FAMILY;
    root.fill(&WHITE).map_err(e)?;
    let t_end = c.runs.iter().flat_map(|r| r.load.intervals.last().map(|i| i.t)).fold(1e-3, f64::max);
    let top = c.runs.iter().flat_map(|r| r.load.intervals.iter().map(|i| i.rate)).fold(1.0, f64::max) * 1.1;
    let cache = c.runs.first().map_or(0, |r| r.cache_bytes);
    let title = format!(
        "insert rate during the load: {} inserter thread(s), pad {} B, cache {}",
        c.threads,
        c.pad,
        human_bytes(cache)
    );
    let mut ch = ChartBuilder::on(root)
        .caption(title, (family, 22))
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(90)
        .build_cartesian_2d(0.0..t_end, 0.0..top)
        .map_err(e)?;
    ch.configure_mesh()
        .x_desc("seconds since the load began")
        .y_desc("rows/s")
        .label_style((family, 14))
        .draw()
        .map_err(e)?;
    for (i, run) in c.runs.iter().enumerate() {
        let color = engine_color(i);
        let label = format!(
            "{}: {:.0} rows/s, database {} after the load",
            run.name,
            run.load.rows_per_sec,
            human_bytes(run.load.cost.db_bytes)
        );
        ch.draw_series(LineSeries::new(run.load.intervals.iter().map(|p| (p.t, p.rate)), color.stroke_width(2)))
            .map_err(e)?
            .label(label)
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 14, y + 5)], color.filled()));
    }
    ch.configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font((family, 14))
        .draw()
        .map_err(e)?;
    Ok(())
}

fn draw_bars<DB: DrawingBackend>(
    root: &DrawingArea<DB, plotters::coord::Shift>,
    r: &InsertReport,
) -> std::result::Result<(), String> {
    let family = crate::reporting::plot::FAMILY;
    root.fill(&WHITE).map_err(e)?;
    // One bar per configuration and engine, the first configuration on top.
    let mut bars: Vec<(String, usize, f64)> = Vec::new();
    for c in &r.configs {
        for (i, run) in c.runs.iter().enumerate() {
            bars.push((format!("{} {}", c.label(), run.name), i, run.load.rows_per_sec));
        }
    }
    bars.reverse();
    let n = bars.len().max(1);
    let hi = bars.iter().map(|b| b.2).fold(1.0, f64::max) * 1.15;
    let labels: Vec<String> = bars.iter().map(|b| b.0.clone()).collect();
    let label_of = move |v: &f64| crate::reporting::plot::category_label(&labels, *v);
    let slot = |i: usize| (i as f64, (i + 1) as f64);
    let mut ch = ChartBuilder::on(root)
        .caption("insert benchmark: load rows/s per configuration (threads/pad) and engine", (family, 22))
        .margin(15)
        .x_label_area_size(40)
        .y_label_area_size(200)
        .build_cartesian_2d(0.0..hi, crate::reporting::plot::category_axis(n))
        .map_err(e)?;
    ch.configure_mesh()
        .y_label_formatter(&label_of)
        .x_label_formatter(&|v| crate::reporting::plot::human(*v))
        .x_desc("rows/s")
        .label_style((family, 12))
        .draw()
        .map_err(e)?;
    ch.draw_series(
        bars.iter()
            .enumerate()
            .map(|(i, b)| Rectangle::new([(0.0, slot(i).0), (b.2, slot(i).1)], engine_color(b.1).filled())),
    )
    .map_err(e)?;
    ch.draw_series(
        bars.iter()
            .enumerate()
            .map(|(i, b)| Rectangle::new([(0.0, slot(i).0), (b.2, slot(i).1)], WHITE.stroke_width(3))),
    )
    .map_err(e)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(name: &str, rate: f64, queries: bool) -> EngineRun {
        let cost = StepCost::new(
            1000,
            200_000,
            ProcDelta { read_bytes: Some(4096), write_bytes: Some(600_000), cpu_secs: Some(0.5) },
            EngineDelta { flush_bytes: 200_000, compaction_bytes_written: 300_000, ..EngineDelta::default() },
            1 << 20,
        );
        let mut q = QueryStep {
            name: "q.100".into(),
            target_rate: 100,
            seconds: 1.0,
            queries: 50,
            qps: 50.0 * rate / 1000.0,
            insert_rate: 90.0,
            kept_rate: kept_rate(90.0, 100),
            cost: cost.clone(),
            ..QueryStep::default()
        };
        q.set_per_query();
        EngineRun {
            engine: name.to_lowercase(),
            name: name.into(),
            cache_bytes: 1 << 20,
            load: LoadStep {
                rows: 1000,
                seconds: 1000.0 / rate,
                rows_per_sec: rate,
                intervals: (1..=5).map(|i| Interval { t: i as f64, rows: i * 200, rate: rate / i as f64 }).collect(),
                cost,
                ..LoadStep::default()
            },
            queries: if queries { vec![q] } else { Vec::new() },
            ..EngineRun::default()
        }
    }

    fn report(engines: usize) -> InsertReport {
        let mut configs = Vec::new();
        for (i, (t, p)) in [(1, 16), (2, 16), (1, 64), (2, 64)].into_iter().enumerate() {
            let mut c = ConfigResult { threads: t, pad: p, ..ConfigResult::default() };
            c.runs.push(run("ShaleDB", 3000.0 * t as f64, i == 0));
            if engines > 1 {
                c.runs.push(run("RocksDB", 2000.0 * t as f64, i == 0));
            }
            c.compute_ratio();
            configs.push(c);
        }
        InsertReport { configs, ..InsertReport::default() }
    }

    #[test]
    fn cost_figures_follow_their_definitions() {
        let c = &run("x", 1.0, false).load.cost;
        assert_eq!(c.write_amp, Some(2.5));
        assert_eq!(c.proc_write_amp, Some(3.0));
        assert_eq!(c.read_bytes_per_row, Some(4.096));
        assert_eq!(c.cpu_us_per_row, Some(500.0));
        let none = StepCost::new(0, 0, ProcDelta::default(), EngineDelta::default(), 0);
        assert_eq!((none.write_amp, none.read_bytes_per_row, none.cpu_us_per_row), (None, None, None));
        assert!(kept_rate(95.0, 100) && !kept_rate(94.9, 100) && kept_rate(1200.0, 1000));
    }

    #[test]
    fn seed_table_has_engines_pads_threads_and_ratios() {
        let text = seed_table(&report(2));
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0].contains("concurrency"), "{text}");
        let line = |tag: &str| *lines.iter().find(|l| l.contains(tag)).unwrap_or_else(|| panic!("{tag}: {text}"));
        assert!(line("shaledb.sz16").contains("3000") && line("shaledb.sz16").contains("6000"), "{text}");
        assert!(line("rocksdb.sz64").contains("4000"), "{text}");
        assert!(line("ratio.sz16").contains("1.50") && line("ratio.sz64").contains("1.50"), "{text}");
        let one = seed_table(&report(1));
        assert!(!one.contains("ratio") && one.contains("shaledb.sz64"), "{one}");
    }

    #[test]
    fn config_table_lists_every_step() {
        let r = report(2);
        let text = config_table(&r.configs[0]);
        assert!(text.contains("load") && text.contains("q.100") && text.contains("90/100 MISSED"), "{text}");
        assert!(text.contains("2.50") && text.contains("3.00") && text.contains("500.0"), "{text}");
        assert!(text.contains("ShaleDB / RocksDB: 1.50"), "{text}");
        assert!(!config_table(&r.configs[1]).contains("q.100"));
    }

    /// The detail line and the table show a query step's cost with the same unit and denominator (per query),
    /// and a load's per row; the per-row figure of a query step (CPU of the queries over the few rows the
    /// inserter added) is in neither.
    #[test]
    fn detail_lines_and_table_agree() {
        let r = report(1);
        let run = &r.configs[0].runs[0];
        let q = &run.queries[0];
        assert_eq!(q.cpu_us_per_query, Some(10_000.0));
        assert_eq!(q.cost.cpu_us_per_row, Some(500.0));
        let detail = query_line(q);
        assert!(detail.contains("CPU 10000.0 us/query") && detail.contains("rd 82 B/query"), "{detail}");
        assert!(detail.contains("wamp 2.50, wamp /proc 3.00"), "{detail}");
        let table = config_table(&r.configs[0]);
        let header = table.lines().next().unwrap();
        assert!(header.contains("rd B/unit") && header.contains("CPU us/unit"), "{table}");
        let row = table.lines().find(|l| l.starts_with("q.100")).unwrap();
        let cols: Vec<&str> = row.split_whitespace().collect();
        assert!(cols.contains(&"10000.0") && cols.contains(&"82") && !cols.contains(&"500.0"), "{row}");
        let load = table.lines().find(|l| l.starts_with("load")).unwrap();
        assert!(load.contains("500.0") && load_line(&run.load, run.cache_bytes).contains("CPU 500.0 us/row"), "{load}");
        // Every name the lines use is explained in the legend.
        for name in ["rd B", "CPU us", "wamp =", "wamp /proc =", "unit"] {
            assert!(LEGEND.contains(name), "{name}");
        }
    }

    #[test]
    fn plots_are_written() {
        let dir = tempfile::tempdir().unwrap();
        for engines in [1, 2] {
            let files = write_plots(dir.path(), &report(engines)).unwrap();
            assert_eq!(files.len(), 2 * 4 + 2);
            let svg = std::fs::read_to_string(&files[0]).unwrap();
            assert!(svg.contains("<svg") && svg.contains("insert rate"), "{engines}");
            let bars = std::fs::read_to_string(dir.path().join("insert-rows-per-sec.svg")).unwrap();
            assert!(bars.contains("t2/pad64"), "{engines}");
            assert!(std::fs::metadata(&files[1]).unwrap().len() > 5_000);
        }
    }
}
