//! Runs the workloads: connections spread over client threads (each a current-thread tokio runtime whose
//! one task joins its connections), a progress line per interval, then per workload db_bench's result line,
//! a latency line, the JSON record and the plots of `shaledb bench`.
//!
//! Each request is timed from the moment its batch is written, or with `--rate` from its intended send
//! time `t0 + i / rate` (a shared schedule: a client stuck on a slow reply does not delay the schedule, so
//! the requests queued behind a stall show the stall in their latency).

mod cluster;

use super::client::{join_all, ClientError, Conn};
use super::flags::RespFlags;
use super::proto::{parse_reply, Reply};
use super::slots::SlotMap;
use super::workloads::{Outcome, Plan, Scratch, Workload};
use super::RespError;
use crate::reporting::histogram::LatencyHistogram;
use crate::reporting::recorder::{Merged, Recorder, ThreadStats};
use crate::reporting::report::BenchResult;
use crate::BenchError;
use bytes::Buf;
use cluster::{cluster_setup, run_cluster_client, Redirects};
use parking_lot::{Condvar, Mutex};
use rand::rngs::SmallRng;
use rand::SeedableRng;
use std::cell::RefCell;
use std::io::Write;
use std::net::SocketAddr;
use std::ops::Range;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

/// One workload's figures.
#[derive(Clone, Debug, serde::Serialize)]
pub struct RespResult {
    /// The figures `shaledb bench` records (name, ops, ops/s, MB/s, latency, timeline).
    #[serde(flatten)]
    pub bench: BenchResult,
    /// `ok`, or `n/a` when the server lacks the workload's command (read-range against Redis).
    pub status: &'static str,
    /// Why the workload is n/a.
    pub note: Option<String>,
    /// Requests sent (a request carries --multi keys, or is one range read).
    pub requests: u64,
    /// Requests that failed: error replies, replies of the wrong shape, broken connections.
    pub errors: u64,
    /// The first failure's message.
    pub first_error: Option<String>,
    /// With --cluster: requests answered by a redirect (`-MOVED`, `-CLUSTERDOWN`, `-TRYAGAIN`) or cut off by
    /// a lost connection, their outcome unknown; not counted in `errors`.
    pub redirected: u64,
    /// Connections.
    pub clients: usize,
    /// Requests per batch.
    pub pipeline: usize,
    /// Keys per request.
    pub multi: usize,
    /// 95th percentile latency, microseconds.
    pub p95: f64,
}

/// Every workload's result.
#[derive(Clone, Debug, Default)]
pub struct RespRun {
    /// In the order run.
    pub results: Vec<RespResult>,
}

impl RespRun {
    /// The error to exit with when a request failed: the total and the first failure.
    pub fn failure(&self) -> Option<RespError> {
        let failed: u64 = self.results.iter().map(|r| r.errors).sum();
        let first = self.results.iter().find(|r| r.errors > 0)?;
        Some(RespError::Failed {
            failed,
            workload: first.bench.name.clone(),
            first: first.first_error.clone().unwrap_or_default(),
        })
    }
}

/// Runs every workload of `flags` against the server, printing the report to `out` and progress lines
/// to stderr; writes the JSON file and the plots when asked. Failed requests are counted in the results
/// (see [`RespRun::failure`]), not returned as an error.
pub fn run_resp(flags: &RespFlags, out: &mut dyn Write) -> Result<RespRun, RespError> {
    flags.validate()?;
    let addr = flags.addr()?;
    let workloads = flags.workloads()?;
    let (nodes, slots) = if flags.cluster {
        let (nodes, map) = cluster_setup(flags, addr, &workloads)?;
        (nodes, Some(map))
    } else {
        (Vec::new(), None)
    };
    let hotspot = if workloads.contains(&Workload::WriteHotspot) { Some(flags.hotspot()?) } else { None };
    let _ = write!(out, "{}", header(flags, addr, slots.as_ref()));
    let mut run = RespRun::default();
    for (i, &w) in workloads.iter().enumerate() {
        let plan = Plan::new(w, flags, hotspot);
        let r = run_workload(flags, addr, &nodes, slots.as_ref(), plan)?;
        if r.status == "ok" {
            let _ = writeln!(out, "{}", r.bench.line);
            let l = &r.bench.latency;
            let _ = writeln!(
                out,
                "{:<12} : latency us p50 {:.1} p95 {:.1} p99 {:.1} p99.9 {:.1} max {:.1}; {} requests, {} errors",
                r.bench.name, l.p50, r.p95, l.p99, l.p999, l.max, r.requests, r.errors
            );
            if let Some(e) = &r.first_error {
                let _ = writeln!(out, "{:<12} : first error: {e}", r.bench.name);
            }
            if r.redirected > 0 {
                let _ = writeln!(
                    out,
                    "{:<12} : {} request(s) redirected or cut off by a failover (outcome unknown)",
                    r.bench.name, r.redirected
                );
            }
            if let Some(dir) = &flags.plot_dir {
                std::fs::create_dir_all(dir).map_err(io_err("creating", dir))?;
                crate::reporting::plot::write_plots(dir, i + 1, &r.bench)?;
            }
        } else {
            let _ = writeln!(out, "{:<12} : n/a ({})", r.bench.name, r.note.as_deref().unwrap_or(""));
        }
        let _ = out.flush();
        run.results.push(r);
    }
    if let Some(path) = &flags.json {
        let doc = serde_json::json!({
            "tool": "shaledb bench resp",
            "server": addr.to_string(),
            "flags": flags,
            "workloads": run.results,
        });
        let text = serde_json::to_string_pretty(&doc).map_err(std::io::Error::other);
        text.and_then(|t| std::fs::write(path, t)).map_err(io_err("writing JSON to", path))?;
    }
    Ok(run)
}

fn io_err<'p>(what: &'static str, path: &'p Path) -> impl FnOnce(std::io::Error) -> RespError + 'p {
    move |source| RespError::Bench(BenchError::Io { what, path: path.to_path_buf(), cause: source })
}

fn header(f: &RespFlags, addr: SocketAddr, slots: Option<&SlotMap>) -> String {
    let random = ((f.value_size as f64 * f.compression_ratio).ceil() as usize).clamp(1, f.value_size.max(1));
    let mut s = format!("shaledb bench resp: {addr}\n");
    s += &format!("Keys:       {} bytes each\n", f.key_size);
    s += &format!("Values:     {} bytes each ({random} random, the rest repeated)\n", f.value_size);
    if f.duration > 0 {
        s += &format!("Duration:   {} seconds per workload\n", f.duration);
    } else {
        s += &format!("Requests:   {} per workload\n", f.num);
    }
    s += &format!("Key space:  {} keys\n", f.keys);
    s += &format!(
        "Clients:    {} (read-range: {} scanners x {} keys), pipeline {}, {} key(s) per request, {} client thread(s)\n",
        f.concurrency, f.scanners, f.scan_len, f.pipeline, f.multi, f.threads
    );
    if let Some(map) = slots {
        let masters = map.masters();
        let list = masters.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ");
        s += &format!(
            "Cluster:    {} master(s) by CLUSTER SLOTS ({list}); each request goes to its key's slot's master\n",
            masters.len()
        );
    }
    if f.wait_replicas > 0 {
        s += &format!(
            "Wait:       WAIT {} {} after each write (latency to its reply)\n",
            f.wait_replicas, f.wait_timeout
        );
    }
    if f.rate > 0.0 {
        s += &format!("Rate:       {} keys/second (latency from the intended send time)\n", f.rate);
    } else {
        s += "Rate:       unlimited\n";
    }
    s += "------------------------------------------------\n";
    s
}

/// State the clients of one workload share.
struct Shared<'a> {
    plan: Plan,
    rec: &'a Recorder,
    addr: SocketAddr,
    /// With --cluster: the nodes to go to after a redirect or a lost connection (empty otherwise).
    nodes: &'a [SocketAddr],
    /// With --cluster: which node serves each slot.
    slots: Option<&'a SlotMap>,
    password: Option<String>,
    pipeline: u64,
    /// Requests claimed so far (also the index of the next request in the rate schedule).
    issued: AtomicU64,
    /// Requests to send (`u64::MAX` with --duration).
    num: u64,
    /// Nanoseconds between intended sends with --rate.
    interval_nanos: Option<f64>,
    duration: Option<Duration>,
    /// Set once every connection is up; the schedule's origin.
    t0: Mutex<Option<Instant>>,
    stop: AtomicBool,
    requests: AtomicU64,
    errors: AtomicU64,
    redirected: AtomicU64,
    first_error: Mutex<Option<String>>,
    unsupported: Mutex<Option<String>>,
    setup_error: Mutex<Option<ClientError>>,
    /// Per client thread: latencies since the last progress line.
    interval: Vec<Mutex<LatencyHistogram>>,
    gate: Gate,
}

impl Shared<'_> {
    fn fail(&self, requests: u64, msg: String) {
        self.errors.fetch_add(requests, Relaxed);
        let mut f = self.first_error.lock();
        if f.is_none() {
            *f = Some(msg);
        }
    }
}

/// Holds client threads until every connection is up (or setup failed).
struct Gate {
    state: Mutex<(usize, Option<bool>)>,
    cv: Condvar,
}

impl Gate {
    /// Reports this thread ready and waits for the verdict: `true` to run.
    fn arrive(&self) -> bool {
        let mut st = self.state.lock();
        st.0 += 1;
        self.cv.notify_all();
        loop {
            if let Some(go) = st.1 {
                return go;
            }
            self.cv.wait(&mut st);
        }
    }

    fn wait_ready(&self, n: usize) {
        let mut st = self.state.lock();
        while st.0 < n {
            self.cv.wait(&mut st);
        }
    }

    fn open(&self, go: bool) {
        self.state.lock().1 = Some(go);
        self.cv.notify_all();
    }
}

fn run_workload(
    f: &RespFlags,
    addr: SocketAddr,
    nodes: &[SocketAddr],
    slots: Option<&SlotMap>,
    plan: Plan,
) -> Result<RespResult, RespError> {
    let workload = plan.workload;
    let clients = if workload == Workload::ReadRange { f.scanners } else { f.concurrency };
    let nthreads = f.threads.clamp(1, clients);
    let tick = if f.duration > 0 {
        Duration::from_secs_f64((f.duration as f64 / 300.0).clamp(0.1, 5.0))
    } else {
        Duration::from_millis(100)
    };
    let rec = Recorder::new(tick);
    let keys_per_request = plan.keys_per_request() as f64;
    let sh = Shared {
        plan,
        rec: &rec,
        addr,
        nodes,
        slots,
        password: f.password.clone(),
        pipeline: f.pipeline as u64,
        issued: AtomicU64::new(0),
        num: if f.duration > 0 { u64::MAX } else { f.num },
        interval_nanos: (f.rate > 0.0).then(|| 1e9 * keys_per_request / f.rate),
        duration: (f.duration > 0).then(|| Duration::from_secs(f.duration)),
        t0: Mutex::new(None),
        stop: AtomicBool::new(false),
        requests: AtomicU64::new(0),
        errors: AtomicU64::new(0),
        redirected: AtomicU64::new(0),
        first_error: Mutex::new(None),
        unsupported: Mutex::new(None),
        setup_error: Mutex::new(None),
        interval: (0..nthreads).map(|_| Mutex::new(LatencyHistogram::coarse())).collect(),
        gate: Gate { state: Mutex::new((0, None)), cv: Condvar::new() },
    };
    let stats = std::thread::scope(|s| -> Result<Vec<ThreadStats<'_>>, RespError> {
        let mut handles = Vec::with_capacity(nthreads);
        for t in 0..nthreads {
            let range = (t * clients / nthreads)..((t + 1) * clients / nthreads);
            let sh = &sh;
            let spawned = std::thread::Builder::new()
                .name(format!("resp-client-{t}"))
                .spawn_scoped(s, move || client_thread(sh, t, range));
            match spawned {
                Ok(h) => handles.push(h),
                Err(e) => {
                    sh.gate.open(false);
                    for h in handles {
                        let _ = h.join();
                    }
                    return Err(RespError::Thread(e));
                }
            }
        }
        sh.gate.wait_ready(nthreads);
        if let Some(e) = sh.setup_error.lock().take() {
            sh.gate.open(false);
            for h in handles {
                let _ = h.join();
            }
            return Err(RespError::Connect { addr, cause: e });
        }
        *sh.t0.lock() = Some(Instant::now());
        sh.gate.open(true);
        progress(&sh, f, workload.name(), &handles);
        let mut stats = Vec::with_capacity(nthreads);
        for h in handles {
            match h.join() {
                Ok(ts) => stats.push(ts),
                Err(p) => std::panic::resume_unwind(p),
            }
        }
        Ok(stats)
    })?;
    let mut merged = Merged::from_threads(&stats);
    drop(stats);
    let requests = sh.requests.load(Relaxed);
    merged.message = match workload {
        Workload::ReadRandom => format!("({} of {} found)", merged.found, merged.reads),
        Workload::ReadRange => format!("({requests} ranges)"),
        _ => format!("({requests} requests)"),
    };
    let mut bench = BenchResult::from_merged(workload.name(), clients, &merged);
    bench.timeline = rec.ticks(merged.window);
    bench.tick_secs = rec.tick_secs();
    let all = merged.hists.iter().fold(LatencyHistogram::new(), |mut a, (_, h)| {
        a.merge(h);
        a
    });
    let note = sh.unsupported.lock().take();
    let first_error = sh.first_error.lock().take();
    Ok(RespResult {
        bench,
        status: if note.is_some() { "n/a" } else { "ok" },
        note,
        requests,
        errors: sh.errors.load(Relaxed),
        redirected: sh.redirected.load(Relaxed),
        first_error,
        clients,
        pipeline: f.pipeline,
        multi: if workload == Workload::ReadRange { 1 } else { f.multi },
        p95: all.percentile_us(95.0),
    })
}

/// Prints a line per `--stats-interval-seconds` until every client thread has finished, and keeps the
/// recorder's time series closing.
fn progress<T>(sh: &Shared<'_>, f: &RespFlags, name: &str, handles: &[std::thread::ScopedJoinHandle<'_, T>]) {
    let start = Instant::now();
    let every = Duration::from_secs(f.stats_interval_seconds.max(1));
    let mut next = start + every;
    let (mut last_ops, mut last_at) = (0u64, start);
    while !handles.iter().all(|h| h.is_finished()) {
        std::thread::sleep(Duration::from_millis(20));
        sh.rec.close_ticks(false);
        let now = Instant::now();
        if f.stats_interval_seconds == 0 || now < next {
            continue;
        }
        next += every;
        let mut h = LatencyHistogram::coarse();
        for m in &sh.interval {
            let part = std::mem::replace(&mut *m.lock(), LatencyHistogram::coarse());
            h.merge(&part);
        }
        let ops = sh.rec.ops();
        let secs = now.saturating_duration_since(last_at).as_secs_f64().max(1e-9);
        eprintln!(
            "{name:<14} {:>7.1} s {:>11.0} ops/s  p50 {:>9.1} us  p99 {:>9.1} us  errors {}",
            now.saturating_duration_since(start).as_secs_f64(),
            ops.saturating_sub(last_ops) as f64 / secs,
            h.percentile_us(50.0),
            h.percentile_us(99.0),
            sh.errors.load(Relaxed)
        );
        (last_ops, last_at) = (ops, now);
    }
}

fn client_thread<'r>(sh: &Shared<'r>, tid: usize, clients: Range<usize>) -> ThreadStats<'r> {
    let mut ts = ThreadStats::new(sh.rec, tid);
    let rt = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            sh.setup_error.lock().get_or_insert(ClientError::Io(e));
            sh.gate.arrive();
            return ts;
        }
    };
    let pw = sh.password.as_deref();
    let conns = rt.block_on(join_all(clients.clone().map(|_| Conn::connect(sh.addr, pw)).collect()));
    let mut ok = Vec::with_capacity(conns.len());
    for c in conns {
        match c {
            Ok(c) => ok.push(c),
            Err(e) => {
                sh.setup_error.lock().get_or_insert(e);
            }
        }
    }
    if !sh.gate.arrive() {
        return ts;
    }
    let Some(t0) = *sh.t0.lock() else { return ts };
    ts.start();
    let cell = RefCell::new(ts);
    let interval = sh.interval.get(tid);
    match sh.slots {
        Some(map) => {
            let futures = ok
                .into_iter()
                .zip(clients)
                .map(|(c, idx)| run_cluster_client(sh, map, t0, &cell, interval, c, idx))
                .collect();
            rt.block_on(join_all(futures));
        }
        None => {
            let futures =
                ok.into_iter().zip(clients).map(|(c, idx)| run_client(sh, t0, &cell, interval, c, idx)).collect();
            rt.block_on(join_all(futures));
        }
    }
    let mut ts = cell.into_inner();
    ts.stop();
    ts
}

/// One reply's measurement, recorded after the read buffer is released.
struct Sample {
    nanos: u64,
    ops: u64,
    found: u64,
    bytes: u64,
}

/// A reply that sends the client elsewhere: its request's outcome is unknown (a failed proposal in a replica
/// group is answered so too).
fn is_redirect(msg: &str) -> bool {
    ["MOVED ", "ASK ", "CLUSTERDOWN", "TRYAGAIN"].iter().any(|p| msg.starts_with(p))
}

/// How reading one connection's replies to a batch ended.
enum Read {
    /// Every reply was read.
    All,
    /// The connection broke after `got` of the replies.
    Lost { got: usize, err: ClientError },
    /// The client stops: a broken reply, or the server lacks the workload's command (already recorded).
    Stop,
}

/// Reads the replies to the requests sent at `starts` on `c`, checks and times each, and records them. With
/// `redirects` (--cluster), redirect replies are counted as redirected and noted there, not as errors.
async fn read_replies(
    sh: &Shared<'_>,
    stats: &RefCell<ThreadStats<'_>>,
    interval: Option<&Mutex<LatencyHistogram>>,
    c: &mut Conn,
    starts: &[Instant],
    samples: &mut Vec<Sample>,
    mut redirects: Option<&mut Redirects>,
) -> Read {
    let plan = &sh.plan;
    let op = plan.workload.op_type();
    let is_read = !plan.workload.is_write();
    let per_request = plan.replies_per_request();
    let k = starts.len();
    let mut waiting = false;
    let mut write_reply = Outcome::Done { ops: 0, found: 0, bytes: 0 };
    let mut got = 0usize;
    while got < k {
        if let Err(err) = c.read_more().await {
            return Read::Lost { got, err };
        }
        let now = Instant::now();
        let mut off = 0;
        samples.clear();
        loop {
            let (reply, n) = match parse_reply(c.rbuf.get(off..).unwrap_or(&[])) {
                Ok(Some(x)) => x,
                Ok(None) => break,
                Err(e) => {
                    sh.fail((k - got) as u64, e.to_string());
                    return Read::Stop;
                }
            };
            off += n;
            if matches!(reply, Reply::Push(_)) {
                continue;
            }
            let Some(&sent) = starts.get(got) else {
                sh.fail(1, "the server sent a reply to no request".into());
                return Read::Stop;
            };
            // With a WAIT after each write, the write's own reply comes first: it is checked, and the
            // request is done at the WAIT's reply.
            if per_request == 2 {
                if !waiting {
                    write_reply = plan.check(&reply);
                    waiting = true;
                    continue;
                }
                waiting = false;
                if let Err(m) = plan.check_wait(&reply) {
                    got += 1;
                    sh.fail(1, m);
                    continue;
                }
            }
            got += 1;
            let outcome = if per_request == 2 {
                std::mem::replace(&mut write_reply, Outcome::Done { ops: 0, found: 0, bytes: 0 })
            } else {
                plan.check(&reply)
            };
            match outcome {
                Outcome::Done { ops, found, bytes } => {
                    let nanos = now.saturating_duration_since(sent).as_nanos() as u64;
                    samples.push(Sample { nanos, ops, found, bytes });
                }
                Outcome::Error(m) if redirects.is_some() && is_redirect(&m) => {
                    sh.redirected.fetch_add(1, Relaxed);
                    if let Some(r) = redirects.as_deref_mut() {
                        r.note(&m);
                    }
                }
                Outcome::Error(m) => sh.fail(1, m),
                Outcome::Unsupported(m) => {
                    sh.unsupported.lock().get_or_insert(m);
                    sh.stop.store(true, Relaxed);
                    return Read::Stop;
                }
            }
        }
        c.rbuf.advance(off);
        if samples.is_empty() {
            continue;
        }
        {
            let mut ts = stats.borrow_mut();
            for s in samples.iter() {
                ts.finished_ops_with_latency(now, s.ops, op, s.nanos);
                ts.bytes += s.bytes;
                if is_read {
                    ts.reads += s.ops;
                    ts.found += s.found;
                }
            }
        }
        if let Some(h) = interval {
            let mut h = h.lock();
            for s in samples.iter() {
                h.record(s.nanos);
            }
        }
    }
    Read::All
}

/// The next batch of a client: its first request number and size, or `None` when the workload is done.
fn claim_batch(sh: &Shared<'_>) -> Option<(u64, u64)> {
    let first = sh.issued.fetch_add(sh.pipeline, Relaxed);
    (first < sh.num).then(|| (first, (sh.num - first).min(sh.pipeline)))
}

/// Fills `starts` with the send time of each request of the batch (with --rate its intended time, after
/// waiting for the last one); `false` when the batch falls after the end of a --duration run.
async fn schedule(sh: &Shared<'_>, t0: Instant, first: u64, k: u64, starts: &mut Vec<Instant>) -> bool {
    let deadline = sh.duration.map(|d| t0 + d);
    starts.clear();
    match sh.interval_nanos {
        Some(ns) => {
            starts.extend((0..k).map(|j| t0 + Duration::from_nanos(((first + j) as f64 * ns) as u64)));
            let last = starts.last().copied().unwrap_or(t0);
            if deadline.is_some_and(|d| last >= d) {
                return false;
            }
            if last > Instant::now() {
                tokio::time::sleep_until(last.into()).await;
            }
        }
        None => {
            let now = Instant::now();
            if deadline.is_some_and(|d| now >= d) {
                return false;
            }
            starts.resize(k as usize, now);
        }
    }
    true
}

fn client_rng(sh: &Shared<'_>, idx: usize) -> SmallRng {
    let plan = &sh.plan;
    SmallRng::seed_from_u64(
        plan.seed.wrapping_mul(0x2545_F491_4F6C_DD1D) ^ ((idx as u64 + 1) << 8) ^ plan.workload as u64,
    )
}

/// One client on one connection (without --cluster): any failure ends it.
async fn run_client(
    sh: &Shared<'_>,
    t0: Instant,
    stats: &RefCell<ThreadStats<'_>>,
    interval: Option<&Mutex<LatencyHistogram>>,
    mut c: Conn,
    idx: usize,
) {
    let plan = &sh.plan;
    let mut rng = client_rng(sh, idx);
    let mut scratch = Scratch::default();
    let mut starts: Vec<Instant> = Vec::with_capacity(sh.pipeline as usize);
    let mut samples: Vec<Sample> = Vec::with_capacity(sh.pipeline as usize);
    while !sh.stop.load(Relaxed) {
        let Some((first, k)) = claim_batch(sh) else { break };
        let mut sent_bytes = 0;
        for j in 0..k {
            sent_bytes += plan.push_request(&mut rng, first + j, &mut c.wbuf, &mut scratch);
        }
        if !schedule(sh, t0, first, k, &mut starts).await {
            break;
        }
        sh.requests.fetch_add(k, Relaxed);
        if let Err(e) = c.flush().await {
            sh.fail(k, format!("writing requests: {e}"));
            return;
        }
        match read_replies(sh, stats, interval, &mut c, &starts, &mut samples, None).await {
            Read::All => {}
            Read::Lost { got, err } => {
                sh.fail(k - got as u64, format!("reading replies: {err}"));
                return;
            }
            Read::Stop => return,
        }
        stats.borrow_mut().bytes += sent_bytes;
    }
}
