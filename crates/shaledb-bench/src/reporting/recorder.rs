//! Measuring one benchmark: per-thread counters and latency histograms ([`ThreadStats`], merged at the end
//! the way db_bench merges its per-thread `Stats`), and the time series behind the plots and the progress
//! bar ([`Recorder`]).
//!
//! Each worker reads the clock once per operation (latency = time since its previous operation finished,
//! as db_bench measures) and keeps a histogram for the current tick of the time series; when the tick
//! changes it hands that histogram to the recorder. So the hot path takes no lock and touches no shared
//! cache line except a batched operation counter.

use crate::engine::{EngineSample, HistogramLine};
use crate::reporting::histogram::{LatencyHistogram, Percentiles};
use parking_lot::Mutex;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

/// Kinds of operations, with db_bench's names (`Microseconds per read:`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum OpType {
    /// Point or sequential read.
    Read = 0,
    /// Put.
    Write = 1,
    /// Delete.
    Delete = 2,
    /// Seek (plus its nexts).
    Seek = 3,
    /// Merge.
    Merge = 4,
    /// Read-modify-write.
    Update = 5,
    /// Anything else (compaction steps).
    Others = 6,
}

const OP_TYPES: usize = 7;

impl OpType {
    /// db_bench's name.
    pub fn name(self) -> &'static str {
        match self {
            OpType::Read => "read",
            OpType::Write => "write",
            OpType::Delete => "delete",
            OpType::Seek => "seek",
            OpType::Merge => "merge",
            OpType::Update => "update",
            OpType::Others => "op",
        }
    }

    fn all() -> [OpType; OP_TYPES] {
        [OpType::Read, OpType::Write, OpType::Delete, OpType::Seek, OpType::Merge, OpType::Update, OpType::Others]
    }
}

/// Throughput and latency of one tick of the time series.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct TickSummary {
    /// Seconds since the benchmark started, at the end of the tick (the end of the run for the last one).
    pub t: f64,
    /// Seconds of the run the tick covers: a whole tick, less for the first and last (the run starts and ends
    /// inside them). Throughput is `ops / secs`.
    pub secs: f64,
    /// Operations completed in the tick.
    pub ops: u64,
    /// Median latency, microseconds.
    pub p50: f64,
    /// 99th percentile, microseconds.
    pub p99: f64,
    /// 99.9th percentile, microseconds.
    pub p999: f64,
    /// Slowest, microseconds.
    pub max: f64,
}

/// The database's shape at one moment.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct LsmPoint {
    /// Seconds since the benchmark started.
    pub t: f64,
    /// Live bytes per level, L0 first.
    pub level_bytes: Vec<u64>,
    /// Compaction debt.
    pub pending_compaction_bytes: u64,
    /// Bytes in memtables.
    pub memtable_bytes: u64,
    /// Cumulative write stall since open, microseconds.
    pub stall_micros: u64,
}

impl LsmPoint {
    /// The point for `sample` taken `t` seconds into the benchmark.
    pub fn from_sample(t: f64, s: &EngineSample) -> LsmPoint {
        LsmPoint {
            t,
            level_bytes: s.levels.iter().map(|l| l.bytes).collect(),
            pending_compaction_bytes: s.pending_compaction_bytes,
            memtable_bytes: s.memtable_bytes,
            stall_micros: s.stall_micros,
        }
    }
}

#[derive(Default)]
struct TickAgg {
    ops: u64,
    hist: Option<LatencyHistogram>,
}

/// The database calls the workers make, measured one by one for `--statistics` (db_bench's histograms of the
/// same names: RocksDB measures them inside the database, the bench here around each call).
#[derive(Clone, Debug, Default)]
pub struct DbCallStats {
    /// Time of each get, nanoseconds (`rocksdb.db.get.micros`).
    pub get: LatencyHistogram,
    /// Time of each put, delete or merge, nanoseconds (`rocksdb.db.write.micros`).
    pub write: LatencyHistogram,
    /// Time of each iterator seek, nanoseconds (`rocksdb.db.seek.micros`).
    pub seek: LatencyHistogram,
    /// Time of each MultiGet call, nanoseconds (`rocksdb.db.multiget.micros`).
    pub multiget: LatencyHistogram,
    /// Size of the value of each get that found one, bytes (`rocksdb.bytes.per.read`).
    pub bytes_per_read: LatencyHistogram,
    /// Key and value bytes of each write call, bytes (`rocksdb.bytes.per.write`; RocksDB records the encoded
    /// size of each write group).
    pub bytes_per_write: LatencyHistogram,
}

impl DbCallStats {
    /// Adds every sample of `o`.
    pub fn merge(&mut self, o: &DbCallStats) {
        self.get.merge(&o.get);
        self.write.merge(&o.write);
        self.seek.merge(&o.seek);
        self.multiget.merge(&o.multiget);
        self.bytes_per_read.merge(&o.bytes_per_read);
        self.bytes_per_write.merge(&o.bytes_per_write);
    }

    /// The histograms as `--statistics` lines: times in microseconds, sizes in bytes.
    pub fn lines(&self) -> Vec<HistogramLine> {
        let time = |name: &str, h: &LatencyHistogram| HistogramLine {
            name: name.to_string(),
            p50: h.percentile_us(50.0),
            p95: h.percentile_us(95.0),
            p99: h.percentile_us(99.0),
            p100: h.max_raw() as f64 / 1000.0,
            count: h.count(),
            sum: u64::try_from(h.sum_raw() / 1000).unwrap_or(u64::MAX),
        };
        let size = |name: &str, h: &LatencyHistogram| HistogramLine {
            name: name.to_string(),
            p50: h.percentile_raw(50.0) as f64,
            p95: h.percentile_raw(95.0) as f64,
            p99: h.percentile_raw(99.0) as f64,
            p100: h.max_raw() as f64,
            count: h.count(),
            sum: u64::try_from(h.sum_raw()).unwrap_or(u64::MAX),
        };
        vec![
            time("rocksdb.db.get.micros", &self.get),
            time("rocksdb.db.write.micros", &self.write),
            time("rocksdb.db.seek.micros", &self.seek),
            time("rocksdb.db.multiget.micros", &self.multiget),
            size("rocksdb.bytes.per.read", &self.bytes_per_read),
            size("rocksdb.bytes.per.write", &self.bytes_per_write),
        ]
    }
}

/// Shared, per-benchmark collector of the time series and the live operation count.
pub struct Recorder {
    start: Instant,
    tick: Duration,
    ops: AtomicU64,
    open: Mutex<BTreeMap<u64, TickAgg>>,
    closed: Mutex<BTreeMap<u64, TickSummary>>,
    lsm: Mutex<Vec<LsmPoint>>,
}

/// Worker-side batching of the shared operation counter.
const OPS_FLUSH_EVERY: u64 = 64;

impl Recorder {
    /// A recorder whose time series has one point per `tick`.
    pub fn new(tick: Duration) -> Recorder {
        Recorder {
            start: Instant::now(),
            tick: tick.max(Duration::from_millis(10)),
            ops: AtomicU64::new(0),
            open: Mutex::new(BTreeMap::new()),
            closed: Mutex::new(BTreeMap::new()),
            lsm: Mutex::new(Vec::new()),
        }
    }

    /// When the benchmark started.
    pub fn start(&self) -> Instant {
        self.start
    }

    /// Seconds since start.
    pub fn elapsed_secs(&self) -> f64 {
        self.start.elapsed().as_secs_f64()
    }

    /// Operations completed so far (approximate while workers run: they report in batches).
    pub fn ops(&self) -> u64 {
        self.ops.load(Relaxed)
    }

    fn tick_of(&self, at: Instant) -> u64 {
        (at.saturating_duration_since(self.start).as_nanos() / self.tick.as_nanos().max(1)) as u64
    }

    fn submit(&self, tick: u64, ops: u64, hist: LatencyHistogram) {
        let mut open = self.open.lock();
        if tick_is_closed(&self.closed.lock(), tick) {
            // A worker stalled past the closing grace: keep its operations in the throughput series.
            drop(open);
            if let Some(s) = self.closed.lock().get_mut(&tick) {
                s.ops += ops;
            }
            return;
        }
        let agg = open.entry(tick).or_default();
        agg.ops += ops;
        match &mut agg.hist {
            Some(h) => h.merge(&hist),
            None => agg.hist = Some(hist),
        }
    }

    /// Summarises ticks older than `grace` ticks (all of them when `all`).
    pub fn close_ticks(&self, all: bool) {
        let now_tick = self.tick_of(Instant::now());
        let mut open = self.open.lock();
        let keys: Vec<u64> = open.keys().copied().filter(|&k| all || k + 4 < now_tick).collect();
        let mut closed = self.closed.lock();
        for k in keys {
            if let Some(agg) = open.remove(&k) {
                let p = agg.hist.map(|h| h.percentiles()).unwrap_or_default();
                closed.insert(
                    k,
                    TickSummary {
                        t: (k + 1) as f64 * self.tick.as_secs_f64(),
                        secs: self.tick.as_secs_f64(),
                        ops: agg.ops,
                        p50: p.p50,
                        p99: p.p99,
                        p999: p.p999,
                        max: p.max,
                    },
                );
            }
        }
    }

    /// Records the database's shape now.
    pub fn record_lsm(&self, s: &EngineSample) {
        self.lsm.lock().push(LsmPoint::from_sample(self.elapsed_secs(), s));
    }

    /// The throughput/latency series of the run `window` (its first start and last finish, as
    /// [`Merged::window`] gives it), with empty ticks (nothing completed: a stall) filled in as zeroes. The
    /// first and last ticks are cut to the run, so their `secs` are what they really cover: the last tick of a
    /// run that ends 60 ms into it holds 60 ms of operations, not a whole tick's. A first or last piece shorter
    /// than half a tick joins its neighbour, so that a few operations in a sliver of time make no false spike.
    pub fn ticks(&self, window: Option<(Instant, Instant)>) -> Vec<TickSummary> {
        self.close_ticks(true);
        let closed = self.closed.lock();
        let tick = self.tick.as_secs_f64();
        let (begin, end) = match window {
            Some((b, e)) => (
                b.saturating_duration_since(self.start).as_secs_f64(),
                e.saturating_duration_since(self.start).as_secs_f64(),
            ),
            None => (0.0, closed.keys().next_back().map_or(0.0, |k| (k + 1) as f64 * tick)),
        };
        let first = ((begin / tick).floor() as u64).min(closed.keys().next().copied().unwrap_or(u64::MAX));
        let last = ((end / tick).ceil() as u64).max(closed.keys().next_back().map_or(0, |k| k + 1));
        let mut out = (first..last)
            .map(|k| {
                let lo = (k as f64 * tick).max(begin);
                let hi = ((k + 1) as f64 * tick).min(end.max(begin));
                let mut s = closed.get(&k).copied().unwrap_or_default();
                if hi > lo {
                    s.t = hi;
                    s.secs = hi - lo;
                } else {
                    // A tick outside the measured window (a thread's clock ran past it): keep it whole.
                    s.t = (k + 1) as f64 * tick;
                    s.secs = tick;
                }
                s
            })
            .collect::<Vec<_>>();
        fold_short_ends(&mut out, tick / 2.0);
        out
    }

    /// The LSM series.
    pub fn lsm(&self) -> Vec<LsmPoint> {
        self.lsm.lock().clone()
    }

    /// Seconds per tick.
    pub fn tick_secs(&self) -> f64 {
        self.tick.as_secs_f64()
    }
}

/// Joins a first or last tick covering less than `min_secs` to its neighbour: operations and seconds add up,
/// latencies keep the worse.
fn fold_short_ends(ticks: &mut Vec<TickSummary>, min_secs: f64) {
    let join = |a: &TickSummary, b: &TickSummary| TickSummary {
        t: a.t.max(b.t),
        secs: a.secs + b.secs,
        ops: a.ops + b.ops,
        p50: a.p50.max(b.p50),
        p99: a.p99.max(b.p99),
        p999: a.p999.max(b.p999),
        max: a.max.max(b.max),
    };
    if ticks.len() >= 2 && ticks.last().is_some_and(|t| t.secs < min_secs) {
        if let (Some(last), Some(prev)) = (ticks.pop(), ticks.last_mut()) {
            *prev = join(prev, &last);
        }
    }
    if ticks.len() >= 2 && ticks.first().is_some_and(|t| t.secs < min_secs) {
        let first = ticks.remove(0);
        if let Some(next) = ticks.first_mut() {
            *next = join(&first, next);
        }
    }
}

fn tick_is_closed(closed: &BTreeMap<u64, TickSummary>, tick: u64) -> bool {
    closed.contains_key(&tick)
}

/// One thread's measurements.
pub struct ThreadStats<'r> {
    rec: &'r Recorder,
    /// Thread index in the benchmark.
    pub tid: usize,
    start: Instant,
    finish: Instant,
    last_op: Instant,
    /// Operations done.
    pub done: u64,
    /// Bytes read or written (keys and values), for MB/s.
    pub bytes: u64,
    /// Point reads and seeks attempted, for "(F of N found)".
    pub reads: u64,
    /// Of which found.
    pub found: u64,
    /// Writes done by a mixed benchmark (readrandomwriterandom).
    pub writes: u64,
    /// Read-modify-write or merge iterations.
    pub updates: u64,
    /// A fixed message (fillsync's `(N ops)`).
    pub message: String,
    /// Range deletions made while writing (`crate::db_bench::range_dels`); the runner prints them per thread.
    pub range_deletions: u64,
    /// Excluded from the merged result (readwhilewriting's writer).
    pub exclude: bool,
    /// The database calls, measured when `--statistics` asks (see [`ThreadStats::measure_calls`]).
    pub calls: Option<Box<DbCallStats>>,
    hists: [Option<LatencyHistogram>; OP_TYPES],
    tick: u64,
    tick_ops: u64,
    tick_hist: LatencyHistogram,
    unreported: u64,
}

impl<'r> ThreadStats<'r> {
    /// Starts measuring thread `tid`.
    pub fn new(rec: &'r Recorder, tid: usize) -> ThreadStats<'r> {
        let now = Instant::now();
        ThreadStats {
            rec,
            tid,
            start: now,
            finish: now,
            last_op: now,
            done: 0,
            bytes: 0,
            reads: 0,
            found: 0,
            writes: 0,
            updates: 0,
            message: String::new(),
            range_deletions: 0,
            exclude: false,
            calls: None,
            hists: Default::default(),
            tick: rec.tick_of(now),
            tick_ops: 0,
            tick_hist: LatencyHistogram::coarse(),
            unreported: 0,
        }
    }

    /// Times each database call of this thread from now on, for `--statistics`.
    pub fn measure_calls(&mut self) {
        self.calls = Some(Box::default());
    }

    /// Restarts the clock (after all threads are ready).
    pub fn start(&mut self) {
        let now = Instant::now();
        self.start = now;
        self.finish = now;
        self.last_op = now;
        self.tick = self.rec.tick_of(now);
    }

    /// Records `n` operations of kind `op` completed now.
    #[inline]
    pub fn finished_ops(&mut self, n: u64, op: OpType) {
        let now = Instant::now();
        let nanos = now.saturating_duration_since(self.last_op).as_nanos() as u64;
        self.finished_ops_with_latency(now, n, op, nanos);
    }

    /// Records `n` operations of kind `op` completed at `now` whose latency the caller measured (a network
    /// client times each request from its send, or intended send, time).
    #[inline]
    pub fn finished_ops_with_latency(&mut self, now: Instant, n: u64, op: OpType, nanos: u64) {
        self.last_op = now;
        match &mut self.hists[op as usize] {
            Some(h) => h.record(nanos),
            slot @ None => {
                let mut h = LatencyHistogram::new();
                h.record(nanos);
                *slot = Some(h);
            }
        }
        let tick = self.rec.tick_of(now);
        if tick != self.tick {
            self.flush_tick();
            self.tick = tick;
        }
        self.tick_hist.record(nanos);
        self.tick_ops += n;
        self.done += n;
        self.unreported += n;
        if self.unreported >= OPS_FLUSH_EVERY {
            self.rec.ops.fetch_add(self.unreported, Relaxed);
            self.unreported = 0;
        }
    }

    fn flush_tick(&mut self) {
        if self.tick_ops > 0 {
            let h = std::mem::replace(&mut self.tick_hist, LatencyHistogram::coarse());
            self.rec.submit(self.tick, self.tick_ops, h);
            self.tick_ops = 0;
        }
    }

    /// Excludes time spent waiting (rate limiting) from the next operation's latency.
    pub fn reset_last_op(&mut self) {
        self.last_op = Instant::now();
    }

    /// Stops the clock and hands the pending tick to the recorder.
    pub fn stop(&mut self) {
        self.finish = Instant::now();
        self.flush_tick();
        self.rec.ops.fetch_add(self.unreported, Relaxed);
        self.unreported = 0;
    }
}

/// The threads' measurements merged, as db_bench's `Stats::Merge` does.
#[derive(Clone, Debug)]
pub struct Merged {
    /// Operations.
    pub done: u64,
    /// Bytes.
    pub bytes: u64,
    /// Sum over threads of their running time (db_bench's `seconds_`; micros/op divides it by `done`).
    pub thread_seconds: f64,
    /// Wall time from the first thread's start to the last thread's finish.
    pub elapsed: f64,
    /// Point reads attempted.
    pub reads: u64,
    /// Of which found.
    pub found: u64,
    /// Writes of mixed benchmarks.
    pub writes: u64,
    /// Update or merge iterations.
    pub updates: u64,
    /// The first thread's message.
    pub message: String,
    /// Latency per kind of operation.
    pub hists: Vec<(OpType, LatencyHistogram)>,
    /// The first thread's start and the last thread's finish.
    pub window: Option<(Instant, Instant)>,
    /// The database calls of every thread (excluded ones too: they are calls the database served), when
    /// measured.
    pub calls: Option<DbCallStats>,
}

impl Merged {
    /// Merges every thread not excluded.
    pub fn from_threads(threads: &[ThreadStats<'_>]) -> Merged {
        let mut m = Merged {
            done: 0,
            bytes: 0,
            thread_seconds: 0.0,
            elapsed: 0.0,
            reads: 0,
            found: 0,
            writes: 0,
            updates: 0,
            message: String::new(),
            hists: Vec::new(),
            window: None,
            calls: None,
        };
        for c in threads.iter().filter_map(|t| t.calls.as_deref()) {
            m.calls.get_or_insert_with(DbCallStats::default).merge(c);
        }
        let mut hists: [Option<LatencyHistogram>; OP_TYPES] = Default::default();
        let (mut start, mut finish): (Option<Instant>, Option<Instant>) = (None, None);
        for t in threads.iter().filter(|t| !t.exclude) {
            m.done += t.done;
            m.bytes += t.bytes;
            m.reads += t.reads;
            m.found += t.found;
            m.writes += t.writes;
            m.updates += t.updates;
            m.thread_seconds += t.finish.saturating_duration_since(t.start).as_secs_f64();
            start = Some(start.map_or(t.start, |s| s.min(t.start)));
            finish = Some(finish.map_or(t.finish, |f| f.max(t.finish)));
            if m.message.is_empty() {
                m.message = t.message.clone();
            }
            for (slot, h) in hists.iter_mut().zip(t.hists.iter()) {
                if let Some(h) = h {
                    match slot {
                        Some(s) => s.merge(h),
                        None => *slot = Some(h.clone()),
                    }
                }
            }
        }
        if let (Some(s), Some(f)) = (start, finish) {
            m.elapsed = f.saturating_duration_since(s).as_secs_f64();
            m.window = Some((s, f));
        }
        m.hists = OpType::all().into_iter().zip(hists).filter_map(|(op, h)| h.map(|h| (op, h))).collect();
        m
    }

    /// All operations' latencies together.
    pub fn overall(&self) -> Percentiles {
        let mut all = LatencyHistogram::new();
        for (_, h) in &self.hists {
            all.merge(h);
        }
        all.percentiles()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hist() -> LatencyHistogram {
        let mut h = LatencyHistogram::coarse();
        h.record(1000);
        h
    }

    /// A run that starts 20 ms into its first 100 ms tick and ends 60 ms into its last: those two ticks cover
    /// 80 ms and 60 ms of it, and their throughput is computed over that.
    #[test]
    fn first_and_last_ticks_are_cut_to_the_run() {
        let rec = Recorder::new(Duration::from_millis(100));
        rec.submit(0, 80, hist());
        rec.submit(1, 100, hist());
        rec.submit(2, 60, hist());
        let ms = |n| rec.start() + Duration::from_millis(n);
        let t = rec.ticks(Some((ms(20), ms(260))));
        assert_eq!(t.len(), 3);
        let close = |a: f64, b: f64| (a - b).abs() < 1e-9;
        assert!(close(t[0].secs, 0.08) && close(t[0].t, 0.1), "{:?}", t[0]);
        assert!(close(t[1].secs, 0.1) && close(t[1].t, 0.2), "{:?}", t[1]);
        assert!(close(t[2].secs, 0.06) && close(t[2].t, 0.26), "{:?}", t[2]);
        for s in &t {
            assert!(close(s.ops as f64 / s.secs, 1000.0), "{s:?}");
        }
    }

    /// A run that ends 2 ms into a tick with 5 operations there: alone they would read as 2500 ops/s next to
    /// 1000; joined to the tick before they keep the rate, the total and the end time.
    #[test]
    fn a_sliver_of_a_last_tick_joins_the_one_before() {
        let rec = Recorder::new(Duration::from_millis(100));
        rec.submit(0, 100, hist());
        rec.submit(1, 100, hist());
        let mut slow = LatencyHistogram::coarse();
        slow.record(9_000_000);
        rec.submit(2, 5, slow);
        let t = rec.ticks(Some((rec.start(), rec.start() + Duration::from_millis(202))));
        assert_eq!(t.len(), 2, "{t:?}");
        assert_eq!(t.iter().map(|s| s.ops).sum::<u64>(), 205);
        assert!((t[1].secs - 0.102).abs() < 1e-9 && (t[1].t - 0.202).abs() < 1e-9, "{:?}", t[1]);
        assert!(t[1].max >= 9000.0, "the slow operation's latency stays: {:?}", t[1]);
        // Likewise at the start: a run starting 99 ms into its first tick.
        let rec = Recorder::new(Duration::from_millis(100));
        rec.submit(0, 1, hist());
        rec.submit(1, 100, hist());
        let t = rec.ticks(Some((rec.start() + Duration::from_millis(99), rec.start() + Duration::from_millis(200))));
        assert_eq!(t.len(), 1, "{t:?}");
        assert!((t[0].secs - 0.101).abs() < 1e-9 && t[0].ops == 101, "{:?}", t[0]);
    }

    /// A stalled tick (no operation completed) is in the series as zero operations over its whole length.
    #[test]
    fn empty_ticks_inside_the_run_are_zeroes() {
        let rec = Recorder::new(Duration::from_millis(100));
        rec.submit(0, 10, hist());
        rec.submit(3, 10, hist());
        let t = rec.ticks(Some((rec.start(), rec.start() + Duration::from_millis(380))));
        assert_eq!(t.iter().map(|s| s.ops).collect::<Vec<_>>(), [10, 0, 0, 10]);
        assert!((t[1].secs - 0.1).abs() < 1e-9 && (t[3].secs - 0.08).abs() < 1e-9, "{t:?}");
    }
}
