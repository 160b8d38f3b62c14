//! Operation latencies: recorded in nanoseconds in an HDR histogram, reported in microseconds in the
//! layout of RocksDB's `HistogramImpl::ToString` (the block db_bench prints with `--histogram=1`), whose
//! `Percentiles:` line benchmark.sh scrapes.
//!
//! The HDR histogram keeps each value to 3 (or 2) significant digits and reports a bucket's highest value;
//! the exact minimum, maximum and sum are kept beside it, and every percentile is clamped to the recorded
//! minimum and maximum as RocksDB's `HistogramStat::Percentile` does, so no percentile exceeds `Max`.

use hdrhistogram::Histogram;
use std::fmt::Write as _;

/// Latency distribution of one kind of operation.
#[derive(Clone, Debug)]
pub struct LatencyHistogram {
    h: Histogram<u64>,
    /// Smallest value recorded, nanoseconds (`u64::MAX` when empty).
    min_ns: u64,
    /// Largest value recorded, nanoseconds.
    max_ns: u64,
    /// Sum of the values recorded, nanoseconds.
    sum_ns: u128,
}

impl Default for LatencyHistogram {
    fn default() -> Self {
        LatencyHistogram::new()
    }
}

/// The percentiles every report carries, in microseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct Percentiles {
    /// Operations recorded.
    pub count: u64,
    /// Mean.
    pub avg: f64,
    /// Standard deviation.
    pub stddev: f64,
    /// Fastest.
    pub min: f64,
    /// Median.
    pub p50: f64,
    /// 75th percentile.
    pub p75: f64,
    /// 99th percentile.
    pub p99: f64,
    /// 99.9th percentile.
    pub p999: f64,
    /// 99.99th percentile.
    pub p9999: f64,
    /// Slowest.
    pub max: f64,
}

impl LatencyHistogram {
    /// An empty histogram (3 significant digits, range grows as needed).
    pub fn new() -> LatencyHistogram {
        // NB: `new(3)` auto-resizes, so recording never fails for lack of range.
        let h = Histogram::new(3).unwrap_or_else(|_| unreachable_histogram());
        LatencyHistogram::with(h)
    }

    /// A cheaper histogram (2 significant digits) for the per-tick series.
    pub fn coarse() -> LatencyHistogram {
        let h = Histogram::new(2).unwrap_or_else(|_| unreachable_histogram());
        LatencyHistogram::with(h)
    }

    fn with(h: Histogram<u64>) -> LatencyHistogram {
        LatencyHistogram { h, min_ns: u64::MAX, max_ns: 0, sum_ns: 0 }
    }

    /// Records one operation of `nanos`.
    #[inline]
    pub fn record(&mut self, nanos: u64) {
        // `record` grows the range; `saturating_record` would clamp to it.
        if self.h.record(nanos).is_err() {
            self.h.saturating_record(nanos);
        }
        self.min_ns = self.min_ns.min(nanos);
        self.max_ns = self.max_ns.max(nanos);
        self.sum_ns += u128::from(nanos);
    }

    /// Adds every sample of `other`.
    pub fn merge(&mut self, other: &LatencyHistogram) {
        // Auto-resizing histograms accept any other histogram's values.
        let _ = self.h.add(&other.h);
        self.min_ns = self.min_ns.min(other.min_ns);
        self.max_ns = self.max_ns.max(other.max_ns);
        self.sum_ns += other.sum_ns;
    }

    /// Operations recorded.
    pub fn count(&self) -> u64 {
        self.h.len()
    }

    /// The `q`-th percentile (0..=100) in microseconds, within the recorded minimum and maximum.
    pub fn percentile_us(&self, q: f64) -> f64 {
        if self.h.is_empty() {
            return 0.0;
        }
        let v = self.h.value_at_quantile(q / 100.0).clamp(self.min_ns, self.max_ns.max(self.min_ns));
        v as f64 / 1000.0
    }

    /// The `q`-th percentile (0..=100) in the unit recorded, within the recorded minimum and maximum.
    pub fn percentile_raw(&self, q: f64) -> u64 {
        if self.h.is_empty() {
            return 0;
        }
        self.h.value_at_quantile(q / 100.0).clamp(self.min_ns, self.max_ns.max(self.min_ns))
    }

    /// The largest value recorded, in the unit recorded (0 when empty).
    pub fn max_raw(&self) -> u64 {
        self.max_ns
    }

    /// The sum of the values recorded, in the unit recorded.
    pub fn sum_raw(&self) -> u128 {
        self.sum_ns
    }

    /// The standard summary.
    pub fn percentiles(&self) -> Percentiles {
        if self.h.is_empty() {
            return Percentiles::default();
        }
        Percentiles {
            count: self.h.len(),
            avg: self.sum_ns as f64 / self.h.len() as f64 / 1000.0,
            stddev: self.h.stdev() / 1000.0,
            min: self.min_ns as f64 / 1000.0,
            p50: self.percentile_us(50.0),
            p75: self.percentile_us(75.0),
            p99: self.percentile_us(99.0),
            p999: self.percentile_us(99.9),
            p9999: self.percentile_us(99.99),
            max: self.max_ns as f64 / 1000.0,
        }
    }

    /// The text block db_bench prints under `Microseconds per <op>:`. db_bench records whole microseconds and
    /// prints `Min` and `Max` as integers; ours are measured in nanoseconds, so they keep two decimals, as
    /// the percentiles do (an integer `Max: 61` under `P99.9: 61.57` read as a percentile above the maximum).
    pub fn rocksdb_text(&self) -> String {
        let p = self.percentiles();
        let mut r = String::new();
        let _ = writeln!(r, "Count: {} Average: {:.4}  StdDev: {:.2}", p.count, p.avg, p.stddev);
        let _ = writeln!(r, "Min: {:.2}  Median: {:.4}  Max: {:.2}", p.min, p.p50, p.max);
        let _ = writeln!(
            r,
            "Percentiles: P50: {:.2} P75: {:.2} P99: {:.2} P99.9: {:.2} P99.99: {:.2}",
            p.p50, p.p75, p.p99, p.p999, p.p9999
        );
        r.push_str("------------------------------------------------------\n");
        if p.count == 0 {
            return r;
        }
        let limits = shaledb::stats::bucket_limits();
        let mut counts = vec![0u64; limits.len()];
        for v in self.h.iter_recorded() {
            let micros = v.value_iterated_to() / 1000;
            let idx = limits.partition_point(|&l| l < micros).min(limits.len() - 1);
            if let Some(c) = counts.get_mut(idx) {
                *c += v.count_at_value();
            }
        }
        let mult = 100.0 / p.count as f64;
        let mut cumulative = 0u64;
        for (b, &n) in counts.iter().enumerate() {
            if n == 0 {
                continue;
            }
            cumulative += n;
            let left = if b == 0 { 0 } else { limits.get(b - 1).copied().unwrap_or(0) };
            let right = limits.get(b).copied().unwrap_or(u64::MAX);
            let _ = write!(
                r,
                "{} {:>7}, {:>7} ] {:>8} {:>7.3}% {:>7.3}% ",
                if b == 0 { '[' } else { '(' },
                left,
                right,
                n,
                mult * n as f64,
                mult * cumulative as f64
            );
            let marks = (mult * n as f64 / 5.0 + 0.5) as usize;
            r.push_str(&"#".repeat(marks));
            r.push('\n');
        }
        r
    }
}

#[cold]
fn unreachable_histogram() -> Histogram<u64> {
    // `Histogram::new(3)` only fails for sigfig > 5; fall back to an explicit range that cannot fail either.
    Histogram::new_with_bounds(1, u64::MAX / 2, 2).unwrap_or_else(|_| std::process::abort())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bucket_limits_match_rocksdb_shape() {
        let l = shaledb::stats::bucket_limits();
        assert_eq!(&l[..16], &[1, 2, 3, 4, 6, 10, 15, 22, 34, 51, 76, 110, 170, 250, 380, 580]);
        assert!(l.windows(2).all(|w| w[0] <= w[1]));
    }

    #[test]
    fn percentiles_in_micros() {
        let mut h = LatencyHistogram::new();
        for i in 1..=1000u64 {
            h.record(i * 1000);
        }
        let p = h.percentiles();
        assert_eq!(p.count, 1000);
        assert!((p.p50 - 500.0).abs() < 1.0, "{}", p.p50);
        assert!((p.p99 - 990.0).abs() < 1.5, "{}", p.p99);
        assert!((p.max - 1000.0).abs() < 1.0);
        assert!((p.avg - 500.5).abs() < 1.0);
    }

    #[test]
    fn text_block_has_the_rocksdb_lines() {
        let mut h = LatencyHistogram::new();
        h.record(1_500);
        h.record(2_500);
        let mut o = LatencyHistogram::new();
        o.record(100_000);
        h.merge(&o);
        let t = h.rocksdb_text();
        let lines: Vec<&str> = t.lines().collect();
        assert!(lines[0].starts_with("Count: 3 Average: "));
        assert!(lines[1].starts_with("Min: 1.50  Median: "), "{}", lines[1]);
        assert!(lines[1].ends_with("  Max: 100.00"), "{}", lines[1]);
        assert!(lines[2].starts_with("Percentiles: P50: "));
        assert_eq!(lines[3], "------------------------------------------------------");
        assert_eq!(lines.len(), 4 + 3);
        // 1.5 us falls in [0, 1], 2.5 us in (1, 2], 100 us in (76, 110].
        assert!(lines[4].starts_with("[       0,       1 ]        1  33.333%  33.333% #######"), "{}", lines[4]);
        assert!(lines[5].starts_with("(       1,       2 ]        1  33.333%  66.667% "), "{}", lines[5]);
        assert!(lines[6].starts_with("(      76,     110 ]        1  33.333% 100.000% "), "{}", lines[6]);
        assert!(lines.last().unwrap().contains("100.000%"));
    }

    /// HDR buckets report their highest value: 3 significant digits put 61 573 ns in a bucket reported as
    /// 61 599, above the largest value recorded. Every percentile stays within [Min, Max], as db_bench's do.
    #[test]
    fn percentiles_never_exceed_the_recorded_maximum() {
        for mut h in [LatencyHistogram::new(), LatencyHistogram::coarse()] {
            for _ in 0..10 {
                h.record(1_234);
            }
            h.record(61_573);
            let p = h.percentiles();
            assert_eq!((p.min, p.max), (1.234, 61.573));
            for (name, v) in [("p50", p.p50), ("p75", p.p75), ("p99", p.p99), ("p99.9", p.p999), ("p99.99", p.p9999)] {
                assert!(v <= p.max && v >= p.min, "{name} {v} outside [{}, {}]", p.min, p.max);
            }
            assert_eq!(p.p9999, 61.573);
            assert!((p.p50 - 1.234).abs() < 0.015, "{}", p.p50);
            assert!((p.avg - (10.0 * 1.234 + 61.573) / 11.0).abs() < 1e-9, "{}", p.avg);
            assert_eq!(h.percentile_us(100.0), 61.573);
            // Printed, too: the text's percentiles are at most its Max.
            let t = h.rocksdb_text();
            let fields: Vec<&str> = t.lines().nth(1).unwrap().split_whitespace().collect();
            let max: f64 = fields[5].parse().unwrap();
            let pct: Vec<f64> =
                t.lines().nth(2).unwrap().split_whitespace().skip(2).step_by(2).map(|v| v.parse().unwrap()).collect();
            assert!(pct.iter().all(|&v| v <= max), "{t}");
        }
        // A merge keeps the exact extremes of both sides.
        let (mut a, mut b) = (LatencyHistogram::new(), LatencyHistogram::new());
        a.record(5_001);
        b.record(99_999);
        a.merge(&b);
        assert_eq!((a.percentiles().min, a.percentiles().max, a.percentile_us(99.99)), (5.001, 99.999, 99.999));
    }

    #[test]
    fn empty_histogram_prints_zeroes() {
        let t = LatencyHistogram::new().rocksdb_text();
        assert!(t.contains("Count: 0 Average: 0.0000  StdDev: 0.00"));
        assert_eq!(t.lines().count(), 4);
    }
}
