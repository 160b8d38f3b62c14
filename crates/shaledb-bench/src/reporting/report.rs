//! db_bench's text output, the JSON record of every figure, and a scraper that reads the text back with the
//! awk field positions of RocksDB's `tools/benchmark.sh`.

use crate::db_bench::flags::BenchFlags;
use crate::engine::EngineSample;
use crate::reporting::histogram::Percentiles;
use crate::reporting::recorder::{DbCallStats, LsmPoint, Merged, TickSummary};
use std::fmt::Write as _;

/// Everything measured in one benchmark.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct BenchResult {
    /// Benchmark name.
    pub name: String,
    /// Threads whose operations are counted (readwhilewriting: the readers).
    pub threads: usize,
    /// Operations.
    pub ops: u64,
    /// Wall seconds.
    pub seconds: f64,
    /// Sum of thread seconds / operations, as db_bench reports it.
    pub micros_per_op: f64,
    /// Operations / wall seconds.
    pub ops_per_sec: f64,
    /// Key+value bytes moved per second, MiB/s; absent when the benchmark moves none.
    pub mb_per_sec: Option<f64>,
    /// Key+value bytes moved.
    pub bytes: u64,
    /// Point reads or seeks attempted.
    pub reads: u64,
    /// Of which found.
    pub found: u64,
    /// db_bench's message (`(F of N found)`, `( updates:N)`, ...).
    pub message: String,
    /// The result line exactly as printed.
    pub line: String,
    /// Latency of all operations together, microseconds.
    pub latency: Percentiles,
    /// Latency per kind of operation (`read`, `write`, ...), microseconds.
    pub latency_by_op: Vec<(String, Percentiles)>,
    /// The database's counters after the benchmark (cumulative since open).
    pub db_after: EngineSample,
    /// Write amplification since open: bytes written by flushes and compactions / bytes flushed.
    pub w_amp: f64,
    /// Write stall during the benchmark, microseconds.
    pub stall_micros: u64,
    /// Throughput and latency over time.
    pub timeline: Vec<TickSummary>,
    /// Bytes per level over time.
    pub lsm: Vec<LsmPoint>,
    /// Seconds per timeline point.
    pub tick_secs: f64,
}

/// Write amplification as RocksDB's Compaction Stats `Sum` row computes it.
pub fn w_amp(s: &EngineSample) -> f64 {
    let l0 = s.l0_write_bytes().max(s.flush_bytes);
    if l0 == 0 {
        0.0
    } else {
        s.sum_write_bytes() as f64 / l0 as f64
    }
}

impl BenchResult {
    /// Builds the result of benchmark `name` from the merged thread measurements.
    pub fn from_merged(name: &str, threads: usize, m: &Merged) -> BenchResult {
        // db_bench pretends one operation was done by benchmarks that count none.
        let done = m.done.max(1);
        let elapsed = if m.elapsed > 0.0 { m.elapsed } else { 1e-9 };
        let mb = (m.bytes > 0).then(|| m.bytes as f64 / 1_048_576.0 / elapsed);
        let micros_per_op = m.thread_seconds * 1e6 / done as f64;
        let ops_per_sec = done as f64 / elapsed;
        let line = result_line(name, micros_per_op, ops_per_sec, elapsed, done, mb, &m.message);
        BenchResult {
            name: name.to_string(),
            threads,
            ops: done,
            seconds: elapsed,
            micros_per_op,
            ops_per_sec,
            mb_per_sec: mb,
            bytes: m.bytes,
            reads: m.reads,
            found: m.found,
            message: m.message.clone(),
            line,
            latency: m.overall(),
            latency_by_op: m.hists.iter().map(|(op, h)| (op.name().to_string(), h.percentiles())).collect(),
            ..BenchResult::default()
        }
    }
}

/// db_bench's result line:
/// `name : X micros/op N ops/sec S seconds N operations; M MB/s (message)`.
pub fn result_line(
    name: &str,
    micros_per_op: f64,
    ops_per_sec: f64,
    seconds: f64,
    ops: u64,
    mb_per_sec: Option<f64>,
    message: &str,
) -> String {
    let mut extra = String::new();
    if let Some(mb) = mb_per_sec {
        let _ = write!(extra, "{mb:6.1} MB/s");
    }
    if !message.is_empty() {
        if !extra.is_empty() {
            extra.push(' ');
        }
        extra.push_str(message);
    }
    format!(
        "{:<12} : {:>11.3} micros/op {} ops/sec {:.3} seconds {} operations;{}{}",
        name,
        micros_per_op,
        ops_per_sec as i64,
        seconds,
        ops,
        if extra.is_empty() { "" } else { " " },
        extra
    )
}

/// db_bench's header (the part describing the data; environment lines go to stderr in db_bench), for `engine`
/// at `version` ([`crate::engine::Engine::version`]).
pub fn header(f: &BenchFlags, engine: &str, version: &str) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "{engine}:    version {version}");
    // In UTC; db_bench prints local time (the same on a machine whose zone is UTC).
    let _ = writeln!(s, "Date:       {}", shaledb::ctime_utc(std::time::SystemTime::now()));
    let _ = writeln!(s, "Keys:       {} bytes each (+ 0 bytes user-defined timestamp)", f.key_size);
    let _ = writeln!(
        s,
        "Values:     {} bytes each ({} bytes after compression)",
        f.value_size,
        (f.value_size as f64 * f.compression_ratio + 0.5) as i64
    );
    let _ = writeln!(s, "Entries:    {}", f.num);
    let _ = writeln!(s, "Prefix:    {} bytes", f.prefix_size);
    let _ = writeln!(s, "Keys per prefix:    {}", f.keys_per_prefix);
    let _ = writeln!(
        s,
        "RawSize:    {:.1} MB (estimated)",
        ((f.key_size + f.value_size) as f64 * f.num as f64) / 1_048_576.0
    );
    let _ = writeln!(
        s,
        "FileSize:   {:.1} MB (estimated)",
        ((f.key_size as f64 + f.value_size as f64 * f.compression_ratio) * f.num as f64) / 1_048_576.0
    );
    let _ = writeln!(s, "Write rate: {} bytes/second", f.benchmark_write_rate_limit);
    let _ = writeln!(s, "Read rate: 0 ops/second");
    let _ = writeln!(s, "Compression: {}", f.compression().map_or("?", |c| c.name()));
    let _ = writeln!(s, "Compression sampling rate: 0");
    let rep = if f.memtablerep == "vector" { "VectorRepFactory" } else { "SkipListFactory" };
    let _ = writeln!(s, "Memtablerep: {rep}");
    let _ = writeln!(s, "Perf Level: 1");
    if cfg!(debug_assertions) {
        let _ = writeln!(s, "WARNING: Optimization is disabled: benchmarks unnecessarily slow");
    }
    let _ = writeln!(s, "------------------------------------------------");
    s
}

/// The block printed after a benchmark with `--histogram=1`: one histogram per kind of operation.
pub fn histogram_block(m: &Merged) -> String {
    let mut s = String::new();
    for (op, h) in &m.hists {
        let _ = writeln!(s, "Microseconds per {}:\n{}", op.name(), h.rocksdb_text());
    }
    s
}

/// Counters and histograms in the layout of db_bench's `STATISTICS:` block (RocksDB's names): the counters
/// (`name COUNT : n`), then the histograms (`name P50 : .. P95 : .. P99 : .. P100 : .. COUNT : n SUM : n`)
/// the engine measures and those `calls` measured around each database call (the engine's own first where it
/// measures one of the same name). Only what is measured is printed.
pub fn statistics_block(s: &EngineSample, calls: &DbCallStats) -> String {
    let mut o = String::from("STATISTICS:\n");
    let rows: [(&str, u64); 16] = [
        ("rocksdb.block.cache.hit", s.block_cache_hits),
        ("rocksdb.block.cache.miss", s.block_cache_misses),
        ("rocksdb.bloom.filter.useful", s.bloom_useful),
        ("rocksdb.bloom.filter.full.positive", s.bloom_checked.saturating_sub(s.bloom_useful)),
        ("rocksdb.number.keys.written", s.keys_written),
        ("rocksdb.number.keys.read", s.gets),
        ("rocksdb.number.keys.found", s.gets_found),
        ("rocksdb.bytes.written", s.user_bytes_written),
        ("rocksdb.wal.bytes", s.wal_bytes),
        ("rocksdb.wal.synced", s.wal_syncs),
        ("rocksdb.flush.write.bytes", s.flush_bytes),
        ("rocksdb.compact.read.bytes", s.compaction_bytes_read),
        ("rocksdb.compact.write.bytes", s.compaction_bytes_written),
        ("rocksdb.stall.micros", s.stall_micros),
        ("rocksdb.estimate.pending.compaction.bytes", s.pending_compaction_bytes),
        ("rocksdb.cur.size.all.mem.tables", s.memtable_bytes),
    ];
    for (k, v) in rows {
        let _ = writeln!(o, "{k} COUNT : {v}");
    }
    let mut lines = s.histograms.clone();
    for l in calls.lines() {
        if !lines.iter().any(|e| e.name == l.name) {
            lines.push(l);
        }
    }
    for l in &lines {
        let _ = writeln!(o, "{}", l.text());
    }
    o
}

/// RocksDB's human duration for stall time (`AppendHumanMicros` in fixed format): `HH:MM:S.sss H:M:S`.
pub fn human_micros(micros: u64) -> String {
    format!(
        "{:02}:{:02}:{:05.3} H:M:S",
        micros / 1_000_000 / 3600,
        (micros / 1_000_000 / 60) % 60,
        (micros % 60_000_000) as f64 / 1e6
    )
}

/// Figures read back from db_bench-format text with benchmark.sh's awk field positions (whitespace
/// separated, 1-based as in awk).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Scraped {
    /// `$5` of the result line.
    pub ops_sec: Option<f64>,
    /// `$3`.
    pub usecs_op: Option<f64>,
    /// `$11` of a V2 line (`$8 == "seconds"`), `$7` of a V1 line.
    pub mb_sec: Option<f64>,
    /// `$9` of the result line in V2 (operations).
    pub operations: Option<u64>,
    /// `(F of N found)`.
    pub found: Option<(u64, u64)>,
    /// `$3 $5 $7 $9 $11` of the last `Percentiles:` line.
    pub p50: Option<f64>,
    /// P75.
    pub p75: Option<f64>,
    /// P99.
    pub p99: Option<f64>,
    /// P99.9.
    pub p999: Option<f64>,
    /// P99.99.
    pub p9999: Option<f64>,
    /// `$9` of the last `  L0` row (Write(GB)).
    pub l0_write_gb: Option<f64>,
    /// `$9` of the last ` Sum` row.
    pub sum_write_gb: Option<f64>,
    /// `$12` of the last ` Sum` row (W-Amp).
    pub w_amp: Option<f64>,
    /// `$3` of the last `Cumulative stall` line.
    pub stall_time: Option<String>,
    /// `$5` of it.
    pub stall_pct: Option<f64>,
    /// `$2` of the last `Uptime(secs)` line.
    pub uptime: Option<f64>,
}

fn field(line: &str, n: usize) -> Option<&str> {
    line.split_whitespace().nth(n.checked_sub(1)?)
}

fn num(line: &str, n: usize) -> Option<f64> {
    field(line, n)?.trim_end_matches(',').parse().ok()
}

/// Scrapes the output of benchmark `bench_name` from `text` as benchmark.sh's `summarize_result` does.
pub fn scrape(text: &str, bench_name: &str) -> Scraped {
    let mut s = Scraped::default();
    for line in text.lines() {
        // benchmark.sh greps `^name`; the first field must be the name itself so that `readrandom` does not
        // also match `readrandomwriterandom`.
        if field(line, 1) == Some(bench_name) && field(line, 2) == Some(":") {
            let v2 = line.split_whitespace().count() >= 10 && field(line, 8) == Some("seconds");
            s.ops_sec = num(line, 5);
            s.usecs_op = num(line, 3);
            s.mb_sec = if v2 { num(line, 11) } else { num(line, 7) };
            s.operations = if v2 { field(line, 9).and_then(|f| f.parse().ok()) } else { None };
            s.found = parse_found(line);
        } else if line.starts_with("Percentiles:") {
            s.p50 = num(line, 3);
            s.p75 = num(line, 5);
            s.p99 = num(line, 7);
            s.p999 = num(line, 9);
            s.p9999 = num(line, 11);
        } else if line.starts_with("  L0") {
            s.l0_write_gb = num(line, 9);
        } else if line.starts_with(" Sum") {
            s.sum_write_gb = num(line, 9);
            s.w_amp = num(line, 12);
        } else if line.starts_with("Cumulative stall") {
            s.stall_time = field(line, 3).map(str::to_string);
            s.stall_pct = num(line, 5);
        } else if line.starts_with("Uptime(secs)") {
            s.uptime = num(line, 2);
        }
    }
    s
}

fn parse_found(line: &str) -> Option<(u64, u64)> {
    let open = line.rfind('(')?;
    let rest = line.get(open + 1..)?;
    let mut w = rest.split_whitespace();
    let f = w.next()?.parse().ok()?;
    (w.next()? == "of").then_some(())?;
    let n = w.next()?.parse().ok()?;
    (w.next()? == "found)").then_some((f, n))
}

/// Writes a suite's report as pretty-printed JSON to `p` (the suites' `--json`).
pub fn write_json_file<T: serde::Serialize>(p: &std::path::Path, r: &T) -> crate::Result<()> {
    let io = |source| crate::BenchError::Io { what: "writing JSON to", path: p.to_path_buf(), cause: source };
    let text = serde_json::to_string_pretty(r).map_err(|e| io(std::io::Error::other(e)))?;
    std::fs::write(p, text).map_err(io)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn result_line_has_db_bench_layout() {
        let l = result_line("readrandom", 3.25, 307_692.9, 3.25, 1_000_000, Some(35.2), "(999 of 1000 found)");
        assert_eq!(
            l,
            "readrandom   :       3.250 micros/op 307692 ops/sec 3.250 seconds 1000000 operations;   35.2 MB/s (999 of 1000 found)"
        );
        let l = result_line("compact", 5.0, 200_000.0, 0.0, 1, None, "");
        assert_eq!(l, "compact      :       5.000 micros/op 200000 ops/sec 0.000 seconds 1 operations;");
    }

    #[test]
    fn scraper_reads_benchmark_sh_positions() {
        let text = "\
overwrite    :       7.854 micros/op 127320 ops/sec 1800.001 seconds 229176999 operations;   51.0 MB/s
Microseconds per write:
Count: 10 Average: 1.0  StdDev: 0.1
Min: 0  Median: 0.5  Max: 3
Percentiles: P50: 0.52 P75: 0.80 P99: 2.10 P99.9: 3.00 P99.99: 3.00
  L0      3/0   190.37 MB   0.8      0.0     0.0      0.0     161.4    161.4       0.0   1.0      0.0    154.7   1068.42
 Sum    540/0    33.77 GB   0.0    580.0   161.4    418.6     739.9    321.3       0.0   4.6    112.7    143.8   5270.57
Uptime(secs): 5400.1 total, 60.0 interval
Cumulative stall: 00:20:18.388 H:M:S, 22.9 percent
";
        let s = scrape(text, "overwrite");
        assert_eq!(s.ops_sec, Some(127320.0));
        assert_eq!(s.usecs_op, Some(7.854));
        assert_eq!(s.mb_sec, Some(51.0));
        assert_eq!(s.operations, Some(229_176_999));
        assert_eq!((s.p50, s.p75, s.p99, s.p999, s.p9999), (Some(0.52), Some(0.8), Some(2.1), Some(3.0), Some(3.0)));
        assert_eq!(s.l0_write_gb, Some(161.4));
        assert_eq!(s.sum_write_gb, Some(739.9));
        assert_eq!(s.w_amp, Some(4.6));
        assert_eq!(s.stall_time.as_deref(), Some("00:20:18.388"));
        assert_eq!(s.stall_pct, Some(22.9));
        assert_eq!(s.uptime, Some(5400.1));
        // V1 lines (older db_bench) keep MB/s at $7.
        let s =
            scrape("readrandom   :      10.218 micros/op 3131616 ops/sec; 1254.3 MB/s (17 of 17 found)", "readrandom");
        assert_eq!(s.mb_sec, Some(1254.3));
        assert_eq!(s.found, Some((17, 17)));
    }

    #[test]
    fn our_result_lines_scrape_back() {
        let l = result_line("readrandom", 12.5, 80_000.0, 2.0, 160_000, Some(8.7), "(150000 of 160000 found)");
        let s = scrape(&l, "readrandom");
        assert_eq!(s.ops_sec, Some(80_000.0));
        assert_eq!(s.usecs_op, Some(12.5));
        assert_eq!(s.mb_sec, Some(8.7));
        assert_eq!(s.operations, Some(160_000));
        assert_eq!(s.found, Some((150_000, 160_000)));
    }

    #[test]
    fn statistics_block_lists_counters_then_each_histogram_once() {
        let engine_get = crate::engine::HistogramLine {
            name: "rocksdb.db.get.micros".into(),
            p50: 7.0,
            count: 5,
            ..Default::default()
        };
        let sample = EngineSample { gets: 5, histograms: vec![engine_get], ..EngineSample::default() };
        let mut calls = DbCallStats::default();
        calls.get.record(2_000);
        calls.write.record(3_000);
        calls.bytes_per_write.record(116);
        let b = statistics_block(&sample, &calls);
        assert!(b.starts_with("STATISTICS:\nrocksdb.block.cache.hit COUNT : 0\n"), "{b}");
        assert!(b.contains("rocksdb.number.keys.read COUNT : 5\n"));
        // The engine's own get histogram wins over the one measured around the calls.
        let gets: Vec<&str> = b.lines().filter(|l| l.starts_with("rocksdb.db.get.micros ")).collect();
        assert_eq!(
            gets,
            ["rocksdb.db.get.micros P50 : 7.000000 P95 : 0.000000 P99 : 0.000000 P100 : 0.000000 COUNT : 5 SUM : 0"]
        );
        assert!(b.contains("rocksdb.db.write.micros P50 : 3.000000 P95 : 3.000000 P99 : 3.000000 P100 : 3.000000 COUNT : 1 SUM : 3\n"), "{b}");
        assert!(b.contains("rocksdb.bytes.per.write P50 : 116.000000 P95 : 116.000000 P99 : 116.000000 P100 : 116.000000 COUNT : 1 SUM : 116\n"), "{b}");
        let first_histogram = b.lines().position(|l| l.contains(" P50 : ")).unwrap();
        assert!(b.lines().skip(first_histogram).all(|l| l.contains(" P50 : ")), "counters come first:\n{b}");
    }

    #[test]
    fn stall_time_in_rocksdb_fixed_format() {
        assert_eq!(human_micros(1_218_388_000), "00:20:18.388 H:M:S");
        // RocksDB pads the seconds to width 5 only, as the seed report shows (`00:13:7.325`).
        assert_eq!(human_micros(0), "00:00:0.000 H:M:S");
        assert_eq!(human_micros(3_600_000_000 + 61_500_000), "01:01:1.500 H:M:S");
    }
}
