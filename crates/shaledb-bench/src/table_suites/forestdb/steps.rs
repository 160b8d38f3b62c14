//! The steps of `rall.sh`, in its order and with the seed's short names, and how each runs.
//!
//! Every timed step runs its threads for `--warmup` + `--duration` seconds; an operation counts when it
//! completes inside the measured window (after the warm-up, before the deadline), and the process and engine
//! counters are read at the window's two ends, so warm-up work is in neither the rate nor the per-operation
//! figures.

use super::docs::{doc_key, stream_seed, DocRng};
use super::report::{StepResult, WriterResult};
use crate::db_bench::keygen::ValueData;
use crate::engine::{Engine, EngineBatch, EngineIter, IterOptions, WriteMode};
use crate::reporting::histogram::LatencyHistogram;
use crate::table_suites::measure::{self, EngineDelta, OpCost};
use crate::{BenchError, Result};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// What a step does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Insert every document, in batches, WAL off.
    Load,
    /// Overwrite uniform random documents, one per write; `sync`: fsync per write (ows), else WAL without
    /// fsync (owa).
    Overwrite {
        /// fsync per write.
        sync: bool,
    },
    /// Get one uniform random document per operation (batch size 1: the seed's debugging section shows that
    /// the benchmark's batches of consecutive document numbers favour an engine whose file keeps them
    /// adjacent).
    Point,
    /// Seek to a uniform random document's key and read `--range_len` more documents with next.
    Range,
}

/// One step of the pattern.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StepSpec {
    /// The seed's name.
    pub name: &'static str,
    /// What it does.
    pub kind: Kind,
    /// N threads (`.n`) rather than 1 (`.1`).
    pub many: bool,
    /// One extra writer thread limited to `--writer_rate` (pqw, rqw).
    pub writer: bool,
}

const fn spec(name: &'static str, kind: Kind, many: bool, writer: bool) -> StepSpec {
    StepSpec { name, kind, many, writer }
}

/// The seed's pattern, in its order (owa.* last: the seed moved them there because they pushed ForestDB's
/// compaction far behind).
pub const SEED_ORDER: [StepSpec; 13] = [
    spec("load", Kind::Load, true, false),
    spec("ows.1", Kind::Overwrite { sync: true }, false, false),
    spec("ows.n", Kind::Overwrite { sync: true }, true, false),
    spec("pqw.1", Kind::Point, false, true),
    spec("pqw.n", Kind::Point, true, true),
    spec("rqw.1", Kind::Range, false, true),
    spec("rqw.n", Kind::Range, true, true),
    spec("pq.1", Kind::Point, false, false),
    spec("pq.n", Kind::Point, true, false),
    spec("rq.1", Kind::Range, false, false),
    spec("rq.n", Kind::Range, true, false),
    spec("owa.1", Kind::Overwrite { sync: false }, false, false),
    spec("owa.n", Kind::Overwrite { sync: false }, true, false),
];

/// The steps `names` selects, in the seed's order (all when empty). Every engine and variant starts from an
/// empty database, so a selection without `load` is an error.
pub fn select(names: &[String]) -> std::result::Result<Vec<StepSpec>, String> {
    if names.is_empty() {
        return Ok(SEED_ORDER.to_vec());
    }
    for n in names {
        if !SEED_ORDER.iter().any(|s| s.name == n.trim()) {
            return Err(format!(
                "unknown step '{n}' (known: {})",
                SEED_ORDER.iter().map(|s| s.name).collect::<Vec<_>>().join(", ")
            ));
        }
    }
    let picked: Vec<StepSpec> =
        SEED_ORDER.iter().filter(|s| names.iter().any(|n| n.trim() == s.name)).copied().collect();
    if picked.first().map(|s| s.kind) != Some(Kind::Load) {
        return Err("the steps run on a fresh database per engine and variant: include `load`".into());
    }
    Ok(picked)
}

/// What the steps share.
pub struct Ctx {
    /// Documents.
    pub docs: u64,
    /// N.
    pub threads: usize,
    /// Measured seconds per timed step.
    pub duration: f64,
    /// Warm-up seconds per timed step.
    pub warmup: f64,
    /// Documents per load batch.
    pub load_batch: usize,
    /// Writes/s of the pqw/rqw writer.
    pub writer_rate: f64,
    /// fsync each write of the pqw/rqw writer.
    pub writer_sync: bool,
    /// Documents per range query.
    pub range_len: usize,
    /// Base seed.
    pub seed: u64,
    /// Variant index (for the streams).
    pub variant: usize,
    /// The value buffer.
    pub values: ValueData,
}

fn engine_err(what: String) -> impl FnOnce(crate::engine::EngineError) -> BenchError {
    move |e| BenchError::engine(what, e)
}

fn panicked(step: &str) -> BenchError {
    BenchError::engine(format!("{step}: a thread"), "panicked".into())
}

/// The load: `threads` loaders, each writing a contiguous share of the document numbers in batches of
/// `--load_batch` with the WAL off (the seed's load ran without periodic_commit: no WAL in RocksDB), then
/// one flush, the equivalent of ForestDB's commit at the end of such a load; counted in the load's time. The
/// suite does not wait for compactions afterwards: the seed let an engine's IO debt fall on the steps that
/// follow. The N loaders mirror the benchmark's multi-threaded population phase.
pub fn run_load<E: Engine>(engine: &E, ctx: &Ctx) -> Result<StepResult> {
    let threads = ctx.threads.min(usize::try_from(ctx.docs).unwrap_or(usize::MAX)).max(1);
    let mode = WriteMode { sync: false, disable_wal: true };
    let (p0, e0) = (measure::sample(), engine.sample());
    let start = Instant::now();
    let stop = AtomicBool::new(false);
    let results: Vec<std::thread::Result<Result<LatencyHistogram>>> = std::thread::scope(|sc| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let stop = &stop;
                let lo = ctx.docs * t as u64 / threads as u64;
                let hi = ctx.docs * (t as u64 + 1) / threads as u64;
                sc.spawn(move || {
                    let mut rng = DocRng::new(stream_seed(ctx.seed, ctx.variant, usize::MAX, t), ctx.docs, &ctx.values);
                    let mut hist = LatencyHistogram::new();
                    let mut batch = engine.new_batch();
                    let mut key = Vec::with_capacity(64);
                    let mut doc = lo;
                    while doc < hi && !stop.load(Ordering::Relaxed) {
                        batch.clear();
                        let end = (doc + ctx.load_batch as u64).min(hi);
                        for d in doc..end {
                            doc_key(d, &mut key);
                            batch.put(&key, rng.value());
                        }
                        let t0 = Instant::now();
                        if let Err(e) = engine.write(mode, &batch) {
                            stop.store(true, Ordering::Relaxed);
                            return Err(BenchError::engine(format!("load: writing documents {doc}..{end}"), e));
                        }
                        hist.record(t0.elapsed().as_nanos() as u64);
                        doc = end;
                    }
                    Ok(hist)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join()).collect()
    });
    let mut hist = LatencyHistogram::new();
    for r in results {
        hist.merge(&r.map_err(|_| panicked("load"))??);
    }
    engine.flush().map_err(engine_err("load: flushing the memtables".into()))?;
    let seconds = start.elapsed().as_secs_f64();
    let r = StepResult {
        name: "load".into(),
        threads,
        seconds,
        ops: ctx.docs,
        queries: ctx.docs,
        ops_per_sec: ctx.docs as f64 / seconds.max(1e-9),
        p50_us: Some(hist.percentile_us(50.0)),
        p99_us: Some(hist.percentile_us(99.0)),
        per_op: OpCost::new(
            measure::ProcDelta::between(&p0, &measure::sample()),
            EngineDelta::between(&e0, &engine.sample()),
            ctx.docs,
        ),
        ..StepResult::default()
    };
    Ok(r)
}

/// The measured window of a timed step.
#[derive(Clone, Copy)]
struct Window {
    from: Instant,
    to: Instant,
}

impl Window {
    fn counts(&self, t: Instant) -> bool {
        t >= self.from && t < self.to
    }
}

/// What one thread did in the window.
struct Totals {
    ops: u64,
    queries: u64,
    missing: u64,
    hist: LatencyHistogram,
}

impl Totals {
    fn new() -> Totals {
        Totals { ops: 0, queries: 0, missing: 0, hist: LatencyHistogram::new() }
    }
}

/// A worker of a timed step: overwrites, point or range queries until the deadline (or another thread's
/// failure).
fn worker<E: Engine>(
    engine: &E,
    kind: Kind,
    ctx: &Ctx,
    seed: u64,
    w: Window,
    stop: &AtomicBool,
) -> std::result::Result<Totals, crate::engine::EngineError> {
    let mut rng = DocRng::new(seed, ctx.docs, &ctx.values);
    let mut t = Totals::new();
    let mut key = Vec::with_capacity(64);
    let mut buf = Vec::with_capacity(1024);
    loop {
        let begin = Instant::now();
        if begin >= w.to || stop.load(Ordering::Relaxed) {
            return Ok(t);
        }
        let doc = rng.doc();
        doc_key(doc, &mut key);
        let (ops, missing) = match kind {
            Kind::Overwrite { sync } => {
                engine.put(WriteMode { sync, disable_wal: false }, &key, rng.value())?;
                (1, 0)
            }
            Kind::Point => {
                let found = engine.get(&key, &mut buf)?;
                std::hint::black_box(buf.len());
                (1, u64::from(!found))
            }
            Kind::Range => {
                // A fresh cursor per query, as the benchmark opens an iterator per range batch.
                let mut it = engine.iter_with(&IterOptions::bounded(None, None));
                it.seek(&key);
                let missing = u64::from(!(it.valid() && it.key() == key.as_slice()));
                if it.valid() {
                    std::hint::black_box(it.value().len());
                }
                let mut n = 0u64;
                while it.valid() && n < ctx.range_len as u64 {
                    it.next();
                    if !it.valid() {
                        break;
                    }
                    std::hint::black_box(it.value().len());
                    n += 1;
                }
                it.status()?;
                (n, missing)
            }
            Kind::Load => return Ok(t),
        };
        let end = Instant::now();
        if w.counts(end) {
            t.ops += ops;
            t.queries += 1;
            t.missing += missing;
            t.hist.record(end.duration_since(begin).as_nanos() as u64);
        }
    }
}

/// The writer of pqw/rqw: one overwrite (fsync per write as ows, unless `--writer_sync=0`) every 1/`--writer_rate` seconds on a fixed
/// schedule, so sleep overshoot does not accumulate. When writes take longer than the interval it falls
/// behind; it may catch up at most 100 ms of backlog, so a stalled writer shows as a lower achieved rate
/// rather than as a burst that hides the stall.
fn rate_limited_writer<E: Engine>(
    engine: &E,
    ctx: &Ctx,
    seed: u64,
    start: Instant,
    w: Window,
    stop: &AtomicBool,
) -> std::result::Result<Totals, crate::engine::EngineError> {
    let mut rng = DocRng::new(seed, ctx.docs, &ctx.values);
    let mut t = Totals::new();
    let mut key = Vec::with_capacity(64);
    let interval = Duration::from_secs_f64(1.0 / ctx.writer_rate);
    let max_backlog = Duration::from_millis(100);
    let mut due = start;
    loop {
        let now = Instant::now();
        if now >= w.to || stop.load(Ordering::Relaxed) {
            return Ok(t);
        }
        if due > now {
            std::thread::sleep((due - now).min(w.to - now));
            continue;
        }
        if now.duration_since(due) > max_backlog {
            due = now - max_backlog;
        }
        let doc = rng.doc();
        doc_key(doc, &mut key);
        let begin = Instant::now();
        engine.put(WriteMode { sync: ctx.writer_sync, disable_wal: false }, &key, rng.value())?;
        let end = Instant::now();
        if w.counts(end) {
            t.ops += 1;
            t.queries += 1;
            t.hist.record(end.duration_since(begin).as_nanos() as u64);
        }
        due += interval;
    }
}

/// Runs a timed step: 1 or N workers (plus the rate-limited writer) for warm-up + duration.
pub fn run_timed<E: Engine>(engine: &E, spec: &StepSpec, ctx: &Ctx, step: usize) -> Result<StepResult> {
    let workers = if spec.many { ctx.threads } else { 1 };
    let stop = AtomicBool::new(false);
    let start = Instant::now();
    let from = start + Duration::from_secs_f64(ctx.warmup);
    let w = Window { from, to: from + Duration::from_secs_f64(ctx.duration) };
    let mut samples = None;
    type Joined = std::thread::Result<std::result::Result<Totals, crate::engine::EngineError>>;
    let (results, writer): (Vec<Joined>, Option<Joined>) = std::thread::scope(|sc| {
        let handles: Vec<_> = (0..workers)
            .map(|t| {
                let stop = &stop;
                let seed = stream_seed(ctx.seed, ctx.variant, step, t);
                sc.spawn(move || {
                    let r = worker(engine, spec.kind, ctx, seed, w, stop);
                    if r.is_err() {
                        stop.store(true, Ordering::Relaxed);
                    }
                    r
                })
            })
            .collect();
        let writer = spec.writer.then(|| {
            let stop = &stop;
            let seed = stream_seed(ctx.seed, ctx.variant, step, usize::MAX);
            sc.spawn(move || {
                let r = rate_limited_writer(engine, ctx, seed, start, w, stop);
                if r.is_err() {
                    stop.store(true, Ordering::Relaxed);
                }
                r
            })
        });
        // The counters at the window's two ends.
        sleep_until(w.from, &stop);
        let first = (measure::sample(), engine.sample());
        sleep_until(w.to, &stop);
        samples = Some((first, (measure::sample(), engine.sample())));
        (handles.into_iter().map(|h| h.join()).collect(), writer.map(|h| h.join()))
    });
    let what = |e| BenchError::engine(spec.name.to_string(), e);
    let mut total = Totals::new();
    for r in results {
        let t = r.map_err(|_| panicked(spec.name))?.map_err(what)?;
        total.ops += t.ops;
        total.queries += t.queries;
        total.missing += t.missing;
        total.hist.merge(&t.hist);
    }
    let Some(((p0, e0), (p1, e1))) = samples else {
        return Err(BenchError::engine(spec.name.to_string(), "the measured window was not sampled".into()));
    };
    // Operations count by their completion time inside the window, so the window is the divisor (a failed
    // thread ended the step with an error above). The counters are read by the main thread at the window's
    // ends, a few milliseconds late at worst.
    let seconds = w.to.duration_since(w.from).as_secs_f64();
    let writer = match writer {
        Some(r) => {
            let t = r.map_err(|_| panicked(spec.name))?.map_err(what)?;
            Some(WriterResult::new(ctx.writer_rate, t.ops, seconds, t.hist.percentile_us(99.0)))
        }
        None => None,
    };
    let r = StepResult {
        name: spec.name.into(),
        threads: workers,
        warmup_secs: ctx.warmup,
        seconds,
        ops: total.ops,
        queries: total.queries,
        ops_per_sec: total.ops as f64 / seconds.max(1e-9),
        missing: total.missing,
        p50_us: (total.hist.count() > 0).then(|| total.hist.percentile_us(50.0)),
        p99_us: (total.hist.count() > 0).then(|| total.hist.percentile_us(99.0)),
        writer,
        per_op: OpCost::new(measure::ProcDelta::between(&p0, &p1), EngineDelta::between(&e0, &e1), total.ops),
        ..StepResult::default()
    };
    Ok(r)
}

fn sleep_until(t: Instant, stop: &AtomicBool) {
    loop {
        let now = Instant::now();
        if now >= t || stop.load(Ordering::Relaxed) {
            return;
        }
        std::thread::sleep((t - now).min(Duration::from_millis(20)));
    }
}

/// The line printed after a step.
pub fn step_line(engine: &str, r: &StepResult) -> String {
    let f = |v: Option<f64>, p: usize| v.map_or("-".to_string(), |x| format!("{x:.p$}"));
    let mut s = format!(
        "{engine} {:<6} {:>10.0} ops/s ({} ops, {} threads, {:.1} s), size {} B, rd {} wr {} B/op, CPU {} us/op, \
         p99 {} us",
        r.name,
        r.ops_per_sec,
        r.ops,
        r.threads,
        r.seconds,
        r.db_bytes,
        f(r.per_op.read_bytes_per_op, 0),
        f(r.per_op.write_bytes_per_op, 0),
        f(r.per_op.cpu_us_per_op, 1),
        f(r.p99_us, 0),
    );
    if let Some(w) = &r.writer {
        s.push_str(&format!(
            "; writer {:.0}/s of {:.0}/s: {}",
            w.rate,
            w.target,
            if w.kept { "kept" } else { "NOT kept" }
        ));
    }
    if r.missing > 0 {
        s.push_str(&format!("; WARNING: {} documents not found", r.missing));
    }
    s
}
