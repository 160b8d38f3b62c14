//! The steps of an engine's run: the load ([`load_step`]: inserter threads sharing the auto-increment, the
//! rate sampled by a monitor) and the query steps ([`query_step`]: a rate-held inserter beside covering range
//! queries on the secondary indexes), each with its cost from the process and engine counters.

use super::data::{self, IiRand};
use super::report::{self, IndexSize, Interval, LoadStep, QueryStep, StepCost};
use super::InsertArgs;
use crate::engine::{Engine, WriteMode};
use crate::table_suites::harness::table_err;
use crate::table_suites::measure;
use crate::table_suites::measure::EngineDelta;
use crate::table_suites::table::{Row, Session, SessionStats, Table, TableError, TableResult, Value};
use crate::{BenchError, Result};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Process and engine counters at the start of a step.
struct Mark {
    proc: measure::ProcSample,
    engine: crate::engine::EngineSample,
}

impl Mark {
    fn now<E: Engine>(engine: &E) -> Mark {
        Mark { proc: measure::sample(), engine: engine.sample() }
    }

    /// The step's cost: `rows` inserted with `logical_bytes` of keys and values, the database at `path`.
    fn cost<E: Engine>(&self, engine: &E, rows: u64, logical_bytes: u64, path: &Path) -> StepCost {
        let process = measure::ProcDelta::between(&self.proc, &measure::sample());
        let engine = EngineDelta::between(&self.engine, &engine.sample());
        StepCost::new(rows, logical_bytes, process, engine, measure::du_bytes(path))
    }
}

/// Sizes of the three secondary indexes and the primary key, by [`Session::index_extent`] (the Engine trait
/// has no approximate size of a key range, so the entries are counted by a scan that bypasses the cache).
fn index_sizes<E: Engine>(engine: &E, t: &Table) -> Result<Vec<IndexSize>> {
    let mut s = Session::new(engine, WriteMode::default());
    let mut v = Vec::new();
    let which = std::iter::once(None).chain((0..t.def().secondary.len()).map(Some));
    for i in which {
        let name = match i {
            None => t.def().primary.name.clone(),
            Some(i) => t.def().secondary[i].name.clone(),
        };
        let (entries, bytes) = s.index_extent(t, i).map_err(table_err(format!("sizing index {name}")))?;
        v.push(IndexSize { name, entries, bytes });
    }
    Ok(v)
}

/// Seconds-resolution time of a batch: the seed's epoch plus the seconds since the engine's first step began.
fn batch_time(started: Instant) -> i64 {
    data::EPOCH_BASE + started.elapsed().as_secs() as i64
}

/// One load thread: takes `rows_per_commit` ids at a time from the shared auto-increment until `rows` ids are
/// taken, inserting each batch with [`Session::insert_many`].
fn load_thread<E: Engine>(
    engine: &E,
    t: &Table,
    a: &InsertArgs,
    seed: u64,
    pad: usize,
    next_id: &AtomicU64,
    counter: &AtomicU64,
    stop: &AtomicBool,
    started: Instant,
) -> TableResult<SessionStats> {
    let mut s = Session::new(engine, a.write_mode());
    let mut r = IiRand::new(seed);
    let mut rows: Vec<Row> = Vec::with_capacity(a.rows_per_commit);
    let batch = a.rows_per_commit as u64;
    while !stop.load(Ordering::Relaxed) {
        let first = next_id.fetch_add(batch, Ordering::Relaxed);
        if first > a.rows {
            break;
        }
        let n = batch.min(a.rows - first + 1) as usize;
        let when = batch_time(started);
        rows.resize_with(n, Vec::new);
        for (i, row) in rows.iter_mut().enumerate() {
            r.fill_row(row, (first + i as u64) as i64, when, pad);
        }
        let done = s.insert_many(t, &rows[..n])?;
        if done != n {
            return Err(TableError::Invalid(format!(
                "inserted {done} of {n} rows from id {first}: new auto-increment ids were found as duplicates"
            )));
        }
        counter.fetch_add(n as u64, Ordering::Relaxed);
    }
    Ok(s.stats())
}

/// The load of one configuration: `threads` [`load_thread`]s until `--rows` rows are in, the rate sampled
/// every `--report_interval`, then the wait for compactions, the step's cost and the index sizes.
pub(super) fn load_step<E: Engine>(
    engine: &E,
    t: &Table,
    a: &InsertArgs,
    seed: u64,
    cfg: usize,
    threads: usize,
    pad: usize,
    next_id: &AtomicU64,
    started: Instant,
    path: &Path,
) -> Result<LoadStep> {
    let counter = AtomicU64::new(0);
    let stop = AtomicBool::new(false);
    let finished = AtomicU64::new(0);
    let mark = Mark::now(engine);
    let start = Instant::now();
    let label = format!("{} load t{threads} pad{pad}", E::name());
    let mut intervals = Vec::new();
    let results: Vec<std::thread::Result<TableResult<SessionStats>>> = std::thread::scope(|sc| {
        let handles: Vec<_> = (0..threads)
            .map(|i| {
                let (counter, stop, finished) = (&counter, &stop, &finished);
                let seed = data::thread_seed(seed, cfg, 0, i);
                sc.spawn(move || {
                    let r = load_thread(engine, t, a, seed, pad, next_id, counter, stop, started);
                    if r.is_err() {
                        stop.store(true, Ordering::Relaxed);
                    }
                    finished.fetch_add(1, Ordering::Relaxed);
                    r
                })
            })
            .collect();
        monitor(&label, start, a.report_interval, &counter, &mut intervals, &|| {
            finished.load(Ordering::Relaxed) == threads as u64
        });
        handles.into_iter().map(|h| h.join()).collect()
    });
    let seconds = start.elapsed().as_secs_f64();
    let mut stats = SessionStats::default();
    for r in results {
        let s = r
            .map_err(|_| BenchError::engine("load", "an inserter thread panicked".into()))?
            .map_err(table_err(format!("{} load", E::name())))?;
        stats.add(&s);
    }
    let rows = counter.load(Ordering::Relaxed);
    if rows != a.rows {
        return Err(BenchError::engine("load", format!("inserted {rows} rows of {}", a.rows).into()));
    }
    let w = Instant::now();
    engine.wait_for_compaction().map_err(|e| BenchError::engine("waiting for compactions after the load", e))?;
    let compaction_wait_secs = w.elapsed().as_secs_f64();
    let cost = mark.cost(engine, rows, stats.bytes_written, path);
    let index_sizes = index_sizes(engine, t)?;
    Ok(LoadStep {
        rows,
        seconds,
        rows_per_sec: rows as f64 / seconds.max(1e-9),
        compaction_wait_secs,
        intervals,
        session: stats,
        cost,
        index_sizes,
    })
}

/// Samples `counter` every `interval` seconds until `done()`, printing the rate to stderr and keeping it;
/// the last, partial interval is kept too when it is at least a tenth of an interval long.
fn monitor(
    label: &str,
    start: Instant,
    interval: f64,
    counter: &AtomicU64,
    intervals: &mut Vec<Interval>,
    done: &dyn Fn() -> bool,
) {
    let tick = Duration::from_secs_f64(interval);
    let mut next = start + tick;
    let mut last = (start, 0u64);
    let mut push = |now: Instant, last: &mut (Instant, u64), print: bool| {
        let c = counter.load(Ordering::Relaxed);
        let secs = now.duration_since(last.0).as_secs_f64().max(1e-9);
        let rate = (c - last.1) as f64 / secs;
        let at = now.duration_since(start).as_secs_f64();
        if print {
            eprintln!("[ {at:.0}s ] {label}: {rate:.0} rows/s, {c} rows");
        }
        intervals.push(Interval { t: at, rows: c, rate });
        *last = (now, c);
    };
    loop {
        let now = Instant::now();
        if done() {
            if now.duration_since(last.0).as_secs_f64() >= interval / 10.0 {
                push(now, &mut last, false);
            }
            return;
        }
        if now >= next {
            push(now, &mut last, true);
            next += tick;
        }
        std::thread::sleep(
            Duration::from_millis(5).min(next.saturating_duration_since(now)).max(Duration::from_millis(1)),
        );
    }
}

/// The background inserter of a query step: `rate` rows/s in batches of `rate / 10` rows (at least 1, at most
/// `--rows_per_commit`), each batch due at `start + rows_before / rate`; a late batch is sent at once, so a
/// slow engine shows as a rate below the target rather than as bursts. (iibench sleeps once per second
/// after `ceil(rate / rows_per_commit)` batches of `rows_per_commit` rows, which sends 1000 rows/s when asked
/// for 100 with its default batch of 1000.)
fn rate_inserter<E: Engine>(
    engine: &E,
    t: &Table,
    a: &InsertArgs,
    seed: u64,
    rate: u64,
    pad: usize,
    next_id: &AtomicU64,
    started: Instant,
    start: Instant,
    deadline: Instant,
    stop: &AtomicBool,
) -> TableResult<(u64, SessionStats)> {
    let mut s = Session::new(engine, a.write_mode());
    let mut r = IiRand::new(seed);
    let batch = (rate / 10).clamp(1, a.rows_per_commit as u64) as usize;
    let mut rows: Vec<Row> = vec![Vec::new(); batch];
    let mut sent = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let due = start + Duration::from_secs_f64(sent as f64 / rate as f64);
        if due >= deadline {
            break;
        }
        let now = Instant::now();
        if due > now {
            std::thread::sleep(due - now);
        }
        if Instant::now() >= deadline {
            break;
        }
        let first = next_id.fetch_add(batch as u64, Ordering::Relaxed);
        let when = batch_time(started);
        for (i, row) in rows.iter_mut().enumerate() {
            r.fill_row(row, (first + i as u64) as i64, when, pad);
        }
        let done = s.insert_many(t, &rows)?;
        if done != batch {
            return Err(TableError::Invalid(format!(
                "inserted {done} of {batch} rows from id {first}: new auto-increment ids were found as duplicates"
            )));
        }
        sent += batch as u64;
    }
    Ok((sent, s.stats()))
}

/// Per-thread totals of a query thread.
#[derive(Default)]
struct QueryTotals {
    per_index: [u64; 3],
    rows: u64,
    stats: SessionStats,
}

/// One query thread: covering range queries on each secondary index in turn (thread `i` starts at index
/// `i % 3`), from a random start in the index's first column, `--rows_per_query` entries each, as iibench's
/// `generate_market_query` (price >= p), `generate_register_query` (cashregisterid > c) and
/// `generate_pdc_query` (price >= p) ask.
fn query_thread<E: Engine>(
    engine: &E,
    t: &Table,
    limit: usize,
    seed: u64,
    first: usize,
    deadline: Instant,
    stop: &AtomicBool,
    counter: &AtomicU64,
) -> TableResult<QueryTotals> {
    let mut s = Session::new(engine, WriteMode::default());
    let mut r = IiRand::new(seed);
    let mut tot = QueryTotals::default();
    let mut which = first % 3;
    let mut lo = [Value::Int(0)];
    while !stop.load(Ordering::Relaxed) && Instant::now() < deadline {
        lo[0] = Value::Int(match which {
            // registersegment: cashregisterid > c is cashregisterid >= c + 1 on integers.
            1 => r.below(data::CASHREGISTERS) + 1,
            _ => r.query_price(),
        });
        let mut n = 0usize;
        let got = s.scan_index(t, which, &lo, &mut |row| {
            std::hint::black_box(row);
            n += 1;
            n < limit
        })?;
        tot.rows += got as u64;
        tot.per_index[which] += 1;
        counter.fetch_add(1, Ordering::Relaxed);
        which = (which + 1) % 3;
    }
    tot.stats = s.stats();
    Ok(tot)
}

/// A query step: a [`rate_inserter`] at `rate` rows/s beside `--query_threads` [`query_thread`]s for
/// `--query_duration` seconds, then the step's cost and the index sizes.
pub(super) fn query_step<E: Engine>(
    engine: &E,
    t: &Table,
    a: &InsertArgs,
    seed: u64,
    cfg: usize,
    step: usize,
    rate: u64,
    pad: usize,
    next_id: &AtomicU64,
    started: Instant,
    path: &Path,
) -> Result<QueryStep> {
    let stop = AtomicBool::new(false);
    let counter = AtomicU64::new(0);
    let mark = Mark::now(engine);
    let start = Instant::now();
    let deadline = start + Duration::from_secs_f64(a.query_duration);
    type Ins = std::thread::Result<TableResult<(u64, SessionStats)>>;
    type Qs = Vec<std::thread::Result<TableResult<QueryTotals>>>;
    let (ins, qs): (Ins, Qs) = std::thread::scope(|sc| {
        let stop = &stop;
        let ins_seed = data::thread_seed(seed, cfg, step, usize::MAX);
        let inserter = sc.spawn(move || {
            let r = rate_inserter(engine, t, a, ins_seed, rate, pad, next_id, started, start, deadline, stop);
            if r.is_err() {
                stop.store(true, Ordering::Relaxed);
            }
            r
        });
        let handles: Vec<_> = (0..a.query_threads)
            .map(|i| {
                let counter = &counter;
                let seed = data::thread_seed(seed, cfg, step, i);
                sc.spawn(move || {
                    let r = query_thread(engine, t, a.rows_per_query, seed, i, deadline, stop, counter);
                    if r.is_err() {
                        stop.store(true, Ordering::Relaxed);
                    }
                    r
                })
            })
            .collect();
        let qs = handles.into_iter().map(|h| h.join()).collect();
        (inserter.join(), qs)
    });
    let seconds = start.elapsed().as_secs_f64();
    let name = format!("q.{rate}");
    let (rows, ins_stats) = ins
        .map_err(|_| BenchError::engine(name.clone(), "the inserter thread panicked".into()))?
        .map_err(table_err(format!("{} {name} inserter", E::name())))?;
    let mut q = QueryStep {
        name: name.clone(),
        target_rate: rate,
        seconds,
        rows_inserted: rows,
        insert_rate: rows as f64 / seconds.max(1e-9),
        inserter_session: ins_stats,
        ..QueryStep::default()
    };
    for r in qs {
        let t = r
            .map_err(|_| BenchError::engine(name.clone(), "a query thread panicked".into()))?
            .map_err(table_err(format!("{} {name} query", E::name())))?;
        for (a, b) in q.queries_per_index.iter_mut().zip(t.per_index) {
            *a += b;
        }
        q.rows_read += t.rows;
        q.query_session.add(&t.stats);
    }
    q.queries = q.queries_per_index.iter().sum();
    q.qps = q.queries as f64 / seconds.max(1e-9);
    q.kept_rate = report::kept_rate(q.insert_rate, rate);
    q.cost = mark.cost(engine, rows, ins_stats.bytes_written, path);
    q.set_per_query();
    q.index_sizes = index_sizes(engine, t)?;
    Ok(q)
}
