//! Replica groups under faults (issue 43): three real server processes (cluster.rs's `node_process`), with
//!
//! - repeated kill -9 of the leader while a writer per type family writes through whichever node leads; every
//!   acknowledged write must survive on every node, the unknown ones (an error, a timeout, a lost connection)
//!   may or may not; failover times (kill to the first write a new leader acknowledges) are printed; beside
//!   them redis-py's RedisCluster (`cluster_py_writer.py`, where python3 has redis-py) writes strings, hashes,
//!   sets and sorted sets through its own redirect and retry handling, and its acknowledged writes are checked
//!   the same way;
//! - network faults on the node-to-node bus through a fault-injecting TCP proxy (helpers/bus_proxy.rs): delay,
//!   severed connections, a one-way partition, the leader isolated from both followers (it must never acknowledge a
//!   write; the majority elects a leader and goes on); after healing, the three nodes converge key by key.
//!
//! Every run prints its seed (`SHALEDB_CLUSTER_SEED` replays one). `SHALEDB_CLUSTER_CYCLES` sets the number of
//! kill -9 cycles: 3 by default (CI, under 60 s); the long run is 100 or more:
//!
//! ```text
//! SHALEDB_CLUSTER_CYCLES=100 cargo test -p shaledb-server --profile test --test server \
//!     cluster_faults::kill_9 -- --nocapture
//! ```

use crate::helpers::bus_proxy::{isolate, start_proxied_group, Rules};
use crate::helpers::cluster::{is_master, leader_of, poll, poll_every, start_group, wait_answering, NodeProc, WAIT};
use crate::helpers::{encode, wire_read, Resp, Rng};
use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufReader, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

fn seed() -> u64 {
    let seed = std::env::var("SHALEDB_CLUSTER_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("clock").as_nanos() as u64
    });
    println!("seed {seed} (replay with SHALEDB_CLUSTER_SEED={seed})");
    seed
}

fn bulk(s: &str) -> Resp {
    Resp::Bulk(s.as_bytes().to_vec())
}

fn ok() -> Resp {
    Resp::Simple("OK".into())
}

// ---------------------------------------------------------------------------------------------------------
// Clients that never panic on I/O: a lost connection or a timeout is an answer (`None`: outcome unknown).

struct Conn {
    r: BufReader<TcpStream>,
}

impl Conn {
    fn open(addr: SocketAddr, timeout: Duration) -> Option<Conn> {
        let s = TcpStream::connect_timeout(&addr, Duration::from_millis(500)).ok()?;
        s.set_read_timeout(Some(timeout)).ok()?;
        s.set_write_timeout(Some(timeout)).ok()?;
        s.set_nodelay(true).ok()?;
        Some(Conn { r: BufReader::new(s) })
    }

    /// A connection for reading a node's own state: `READONLY` when it is not the leader.
    fn reader(addr: SocketAddr) -> Option<Conn> {
        let mut c = Conn::open(addr, Duration::from_secs(10))?;
        (c.cmd(&["READONLY"])? == ok()).then_some(c)
    }

    fn cmd(&mut self, args: &[&str]) -> Option<Resp> {
        let bytes: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        self.r.get_mut().write_all(&encode(&bytes)).ok()?;
        wire_read(&mut self.r)
    }
}

/// Sends writes to whichever node leads: a `-MOVED` names the leader for the next write, `-CLUSTERDOWN` or a
/// lost connection moves on to the next node. A write is never resent (its outcome may be unknown).
struct Router {
    addrs: Vec<SocketAddr>,
    target: SocketAddr,
    conn: Option<Conn>,
    next: usize,
    timeout: Duration,
}

impl Router {
    fn new(addrs: Vec<SocketAddr>) -> Router {
        Router { target: addrs[0], addrs, conn: None, next: 0, timeout: Duration::from_secs(15) }
    }

    fn rotate(&mut self) {
        self.conn = None;
        self.next = (self.next + 1) % self.addrs.len();
        self.target = self.addrs[self.next];
        std::thread::sleep(Duration::from_millis(20));
    }

    /// `Some(reply)` for a reply that is not an error; `None` when the outcome is unknown.
    fn write(&mut self, args: &[&str]) -> Option<Resp> {
        if self.conn.is_none() {
            self.conn = Conn::open(self.target, self.timeout);
            if self.conn.is_none() {
                self.rotate();
                return None;
            }
        }
        let reply = self.conn.as_mut().and_then(|c| c.cmd(args));
        match reply {
            Some(Resp::Error(e)) => {
                // A failed proposal is answered by a redirect too, so even -MOVED leaves the outcome unknown.
                let moved = e.strip_prefix("MOVED ").and_then(|m| m.split(' ').nth(1)).and_then(|a| a.parse().ok());
                match moved {
                    Some(addr) if self.addrs.contains(&addr) => {
                        self.target = addr;
                        self.conn = None;
                    }
                    _ => self.rotate(),
                }
                None
            }
            Some(r) => Some(r),
            None => {
                self.rotate();
                None
            }
        }
    }

    /// Sends an idempotent write until it is acknowledged with `want` (bounded by [`WAIT`]).
    fn write_until(&mut self, args: &[&str], want: &Resp) {
        poll_every(Duration::from_millis(20), WAIT, &format!("{args:?} acknowledged"), || {
            self.write(args).filter(|r| r == want)
        });
    }
}

// ---------------------------------------------------------------------------------------------------------
// kill -9 of the leader, repeated

/// What one writer did: the item numbers whose write was acknowledged and those whose outcome is unknown, in
/// the order they were sent (item numbers grow).
#[derive(Default, Clone, Debug)]
struct Record {
    acked: Vec<u64>,
    unknown: Vec<u64>,
    /// INCR only: the counter values the acknowledged INCRs answered.
    replies: Vec<i64>,
}

/// A writer's kind of write. Item `i` of each is recognisable when read back: the ordered families (APPEND,
/// RPUSH, XADD) must hold the acknowledged items in the order sent (an unknown one may sit between them), the
/// others hold them in any order, INCR's counter counts them.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Family {
    Set,
    Incr,
    Append,
    List,
    Hash,
    Sadd,
    Zadd,
    Stream,
}

const FAMILIES: [Family; 8] =
    [Family::Set, Family::Incr, Family::Append, Family::List, Family::Hash, Family::Sadd, Family::Zadd, Family::Stream];

impl Family {
    /// The command writing item `i`.
    fn command(self, i: u64) -> Vec<String> {
        let n = i.to_string();
        let v: Vec<&str> = match self {
            Family::Set => return vec!["SET".into(), format!("str:{i}"), format!("v{i}")],
            Family::Incr => vec!["INCR", "ctr"],
            Family::Append => return vec!["APPEND".into(), "app".into(), format!("{i},")],
            Family::List => vec!["RPUSH", "list", &n],
            Family::Hash => return vec!["HSET".into(), "hash".into(), format!("f{i}"), n.clone()],
            Family::Sadd => vec!["SADD", "set", &n],
            Family::Zadd => return vec!["ZADD".into(), "zset".into(), n.clone(), format!("m{i}")],
            Family::Stream => vec!["XADD", "stream", "*", "n", &n],
        };
        v.into_iter().map(String::from).collect()
    }

    /// True when `r` (not an error) is the reply of an applied write.
    fn acknowledged(self, r: &Resp) -> bool {
        match self {
            Family::Set => *r == ok(),
            Family::Stream => matches!(r, Resp::Bulk(_)),
            Family::Incr | Family::Append | Family::List | Family::Hash | Family::Sadd | Family::Zadd => {
                matches!(r, Resp::Int(_))
            }
        }
    }

    fn ordered(self) -> bool {
        matches!(self, Family::Append | Family::List | Family::Stream)
    }

    /// The items a node holds (for `Incr`: the counter, as one number), `Err` for a malformed value.
    fn read(self, c: &mut Conn, rec: &Record) -> Result<Vec<u64>, String> {
        let num = |s: &str| s.parse::<u64>().map_err(|_| format!("{self:?}: '{s}' is not an item"));
        let reply = |c: &mut Conn, args: &[&str]| c.cmd(args).ok_or_else(|| format!("{self:?}: no reply to {args:?}"));
        let text = |r: &Resp| match r {
            Resp::Bulk(b) => Ok(String::from_utf8_lossy(b).into_owned()),
            other => Err(format!("{self:?}: {other:?} is not a string")),
        };
        let items = |r: Resp| match r {
            Resp::Array(v) | Resp::Set(v) => Ok(v),
            other => Err(format!("{self:?}: {other:?} is not an array")),
        };
        match self {
            Family::Set => {
                let mut out = Vec::new();
                // Every key this writer could have written; one more past the end must be absent.
                for i in rec.acked.iter().chain(&rec.unknown).copied() {
                    match reply(c, &["GET", &format!("str:{i}")])? {
                        Resp::Nil => {}
                        r if r == bulk(&format!("v{i}")) => out.push(i),
                        r => return Err(format!("str:{i} holds {r:?}")),
                    }
                }
                let beyond = rec.acked.iter().chain(&rec.unknown).max().map_or(0, |m| m + 1);
                let r = reply(c, &["EXISTS", &format!("str:{beyond}")])?;
                if r != Resp::Int(0) {
                    return Err(format!("str:{beyond} was never written but EXISTS gives {r:?}"));
                }
                out.sort_unstable();
                Ok(out)
            }
            Family::Incr => match reply(c, &["GET", "ctr"])? {
                Resp::Nil => Ok(vec![0]),
                r => Ok(vec![num(&text(&r)?)?]),
            },
            Family::Append => match reply(c, &["GET", "app"])? {
                Resp::Nil => Ok(Vec::new()),
                r => {
                    let t = text(&r)?;
                    let body = t.strip_suffix(',').ok_or_else(|| format!("app ends oddly: {t:?}"))?;
                    body.split(',').map(num).collect()
                }
            },
            Family::List => items(reply(c, &["LRANGE", "list", "0", "-1"])?)?.iter().map(|r| num(&text(r)?)).collect(),
            Family::Hash => {
                let flat = items(reply(c, &["HGETALL", "hash"])?)?;
                let mut out = Vec::new();
                for pair in flat.chunks(2) {
                    let (f, v) = (text(&pair[0])?, text(&pair[1])?);
                    if f != format!("f{v}") {
                        return Err(format!("hash field {f} holds {v}"));
                    }
                    out.push(num(&v)?);
                }
                out.sort_unstable();
                Ok(out)
            }
            Family::Sadd => {
                let mut out: Vec<u64> =
                    items(reply(c, &["SMEMBERS", "set"])?)?.iter().map(|r| num(&text(r)?)).collect::<Result<_, _>>()?;
                out.sort_unstable();
                Ok(out)
            }
            Family::Zadd => {
                let flat = items(reply(c, &["ZRANGE", "zset", "0", "-1", "WITHSCORES"])?)?;
                let mut out = Vec::new();
                for pair in flat.chunks(2) {
                    let (m, s) = (text(&pair[0])?, text(&pair[1])?);
                    if m != format!("m{s}") {
                        return Err(format!("zset member {m} has score {s}"));
                    }
                    out.push(num(&s)?);
                }
                Ok(out)
            }
            Family::Stream => {
                let mut out = Vec::new();
                let mut last_id = (0u64, 0u64);
                for e in items(reply(c, &["XRANGE", "stream", "-", "+"])?)? {
                    let e = items(e)?;
                    let id = text(&e[0])?;
                    let (ms, seq) = id.split_once('-').ok_or_else(|| format!("stream id {id}"))?;
                    let id_n = (num(ms)?, num(seq)?);
                    if id_n <= last_id {
                        return Err(format!("stream ids out of order: {id} after {last_id:?}"));
                    }
                    last_id = id_n;
                    let fields = items(e[1].clone())?;
                    if fields.len() != 2 || text(&fields[0])? != "n" {
                        return Err(format!("stream entry {id}: {fields:?}"));
                    }
                    out.push(num(&text(&fields[1])?)?);
                }
                Ok(out)
            }
        }
    }

    /// Checks what a node holds against the writer's record.
    fn check(self, seen: &[u64], rec: &Record) -> Result<(), String> {
        let acked: BTreeSet<u64> = rec.acked.iter().copied().collect();
        let maybe: BTreeSet<u64> = rec.unknown.iter().copied().collect();
        if self == Family::Incr {
            let (v, lo, hi) = (seen[0], rec.acked.len() as u64, (rec.acked.len() + rec.unknown.len()) as u64);
            if v < lo || v > hi {
                return Err(format!("ctr is {v}: {lo} INCRs acknowledged, {} unknown", rec.unknown.len()));
            }
            let distinct: BTreeSet<i64> = rec.replies.iter().copied().collect();
            if distinct.len() != rec.replies.len() || rec.replies.iter().any(|&r| r < 1 || r as u64 > v) {
                return Err(format!("INCR replies repeat or exceed the counter {v}: {:?}", rec.replies));
            }
            return Ok(());
        }
        if self.ordered() && seen.windows(2).any(|w| w[0] >= w[1]) {
            return Err(format!("{self:?}: items out of the order they were sent, or repeated: {seen:?}"));
        }
        let have: BTreeSet<u64> = seen.iter().copied().collect();
        if have.len() != seen.len() {
            return Err(format!("{self:?}: an item is held twice: {seen:?}"));
        }
        if let Some(lost) = acked.difference(&have).next() {
            return Err(format!(
                "{self:?}: acknowledged item {lost} is missing ({} acknowledged, {} held)",
                acked.len(),
                have.len()
            ));
        }
        if let Some(extra) = have.iter().find(|i| !acked.contains(i) && !maybe.contains(i)) {
            return Err(format!("{self:?}: item {extra} was never sent"));
        }
        Ok(())
    }
}

/// One writer of a family: writes items 0, 1, 2 ... through a [`Router`] until `stop` (or a bound).
fn writer(family: Family, addrs: Vec<SocketAddr>, stop: Arc<AtomicBool>) -> JoinHandle<Record> {
    std::thread::spawn(move || {
        let mut router = Router::new(addrs);
        let mut rec = Record::default();
        for i in 0..100_000u64 {
            if stop.load(Ordering::Relaxed) {
                break;
            }
            let cmd = family.command(i);
            let args: Vec<&str> = cmd.iter().map(String::as_str).collect();
            match router.write(&args) {
                Some(r) if family.acknowledged(&r) => {
                    if let Resp::Int(n) = r {
                        if family == Family::Incr {
                            rec.replies.push(n);
                        }
                    }
                    rec.acked.push(i);
                }
                Some(r) => panic!("{family:?} item {i}: unexpected reply {r:?}"),
                None => {
                    rec.unknown.push(i);
                    // No leader to take it yet (an election, a restart): back off, so the unknown stay few.
                    std::thread::sleep(Duration::from_millis(100));
                }
            }
            // Room on a shared 2-core machine: about a hundred writes a second per writer.
            std::thread::sleep(Duration::from_millis(8));
        }
        rec
    })
}

/// redis-py's RedisCluster writing through the kill cycles (`cluster_py_writer.py`): SET, HSET, SADD and ZADD
/// of item 0, 1, 2 ... in turn. `None` (with a printed reason) where python3 has no redis-py.
struct PyWriter {
    child: std::process::Child,
    stop_file: std::path::PathBuf,
    lines: JoinHandle<Vec<String>>,
}

/// What redis-py's writer did, by item number.
struct PyRecord {
    acked: Vec<u64>,
    unknown: Vec<u64>,
    /// The exceptions behind the unknown outcomes, each once.
    reasons: BTreeSet<String>,
}

impl PyWriter {
    fn start(tmp: &std::path::Path, nodes: &[NodeProc]) -> Option<PyWriter> {
        use std::io::BufRead;
        let has = std::process::Command::new("python3")
            .args(["-c", "import redis.cluster"])
            .output()
            .is_ok_and(|o| o.status.success());
        if !has {
            println!("redis-py (import redis.cluster) is not available: its writer is skipped");
            return None;
        }
        let stop_file = tmp.join("py-writer.stop");
        let mut child = std::process::Command::new("python3")
            .arg("-c")
            .arg(include_str!("cluster_py_writer.py"))
            .arg(&stop_file)
            .args(nodes.iter().map(|n| n.port.to_string()))
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("python3");
        let out = child.stdout.take().expect("stdout");
        let lines = std::thread::spawn(move || BufReader::new(out).lines().map_while(Result::ok).collect());
        Some(PyWriter { child, stop_file, lines })
    }

    /// Stops the writer (bounded) and parses its record.
    fn finish(mut self) -> PyRecord {
        std::fs::write(&self.stop_file, b"stop").expect("the stop file");
        let started = Instant::now();
        let status = loop {
            if let Some(status) = self.child.try_wait().expect("python3") {
                break status;
            }
            if started.elapsed() > WAIT {
                let _ = self.child.kill();
                panic!("redis-py's writer did not stop within {WAIT:?}");
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        // It ends only when told to: an exception it does not expect (its traceback is above) fails the test.
        assert!(status.success(), "redis-py's writer failed: {status}");
        let lines = self.lines.join().expect("the writer's output");
        let mut rec = PyRecord { acked: Vec::new(), unknown: Vec::new(), reasons: BTreeSet::new() };
        for line in &lines {
            let mut parts = line.split(' ');
            let (what, item) = (parts.next(), parts.next().and_then(|n| n.parse::<u64>().ok()));
            match (what, item) {
                (Some("A"), Some(i)) => rec.acked.push(i),
                (Some("U"), Some(i)) => {
                    rec.unknown.push(i);
                    rec.reasons.extend(parts.next().map(String::from));
                }
                _ => panic!("redis-py's writer: {line}"),
            }
        }
        rec
    }

    fn check_item(c: &mut Conn, i: u64) -> Result<bool, String> {
        let (args, want) = match i % 4 {
            0 => (vec!["GET".to_string(), format!("py:str:{i}")], bulk(&format!("v{i}"))),
            1 => (vec!["HGET".into(), "py:hash".into(), format!("f{i}")], bulk(&i.to_string())),
            2 => (vec!["SISMEMBER".into(), "py:set".into(), i.to_string()], Resp::Int(1)),
            _ => (vec!["ZSCORE".into(), "py:zset".into(), format!("m{i}")], bulk(&i.to_string())),
        };
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        match c.cmd(&args) {
            Some(r) if r == want => Ok(true),
            Some(Resp::Nil | Resp::Int(0)) => Ok(false),
            other => Err(format!("{args:?} gives {other:?}")),
        }
    }
}

impl PyRecord {
    /// Every acknowledged item is on the node; nothing past the last item sent is.
    fn check(&self, c: &mut Conn) -> Result<(), String> {
        for &i in &self.acked {
            if !PyWriter::check_item(c, i)? {
                return Err(format!("acknowledged item {i} is missing"));
            }
        }
        let sent = self.acked.iter().chain(&self.unknown).max().map_or(0, |m| m + 1);
        for i in sent..sent + 4 {
            if PyWriter::check_item(c, i)? {
                return Err(format!("item {i} was never sent but is present"));
            }
        }
        Ok(())
    }
}

fn summary(times: &mut [Duration]) -> String {
    times.sort();
    if times.is_empty() {
        return "none".into();
    }
    format!(
        "min {:?} median {:?} max {:?} over {}",
        times[0],
        times[times.len() / 2],
        times[times.len() - 1],
        times.len()
    )
}

#[test]
fn kill_9_of_the_leader_repeated_keeps_every_acknowledged_write() {
    let cycles: usize = std::env::var("SHALEDB_CLUSTER_CYCLES").ok().and_then(|s| s.parse().ok()).unwrap_or(3);
    let mut rng = Rng(seed());
    let tmp = tempfile::tempdir().expect("tempdir");
    let mut nodes = start_group(tmp.path(), |n| n.bus);
    let addrs: Vec<SocketAddr> = nodes.iter().map(NodeProc::addr).collect();
    let stop = Arc::new(AtomicBool::new(false));
    let writers: Vec<(Family, JoinHandle<Record>)> =
        FAMILIES.iter().map(|&f| (f, writer(f, addrs.clone(), stop.clone()))).collect();
    let py = PyWriter::start(tmp.path(), &nodes);

    let mut failover = Vec::new();
    let mut catch_up = Vec::new();
    for cycle in 0..cycles {
        let leader = leader_of(&nodes);
        std::thread::sleep(Duration::from_millis(rng.range(100, 1000) as u64));
        nodes[leader].kill();
        let killed = Instant::now();
        // The time until a new leader acknowledges a write.
        let mut probe = Router::new(addrs.iter().copied().filter(|&a| a != nodes[leader].addr()).collect());
        probe.timeout = Duration::from_secs(5);
        let key = format!("probe:{cycle}");
        probe.write_until(&["SET", &key, "ok"], &ok());
        failover.push(killed.elapsed());
        // Restarted from its directory on the same ports; caught up once it holds the probe.
        nodes[leader].restart();
        let restarted = Instant::now();
        wait_answering(&mut nodes[leader], WAIT);
        let addr = nodes[leader].addr();
        poll_every(Duration::from_millis(50), WAIT, "the restarted node caught up", || {
            (Conn::reader(addr)?.cmd(&["GET", &key])? == bulk("ok")).then_some(())
        });
        catch_up.push(restarted.elapsed());
        println!(
            "cycle {cycle}: killed node {leader}; a write acknowledged {:?} later; restarted and caught up in {:?}",
            failover[cycle], catch_up[cycle]
        );
    }
    stop.store(true, Ordering::Relaxed);
    let py = py.map(PyWriter::finish);
    if let Some(py) = &py {
        println!(
            "redis-py RedisCluster: {} acknowledged, {} unknown ({:?})",
            py.acked.len(),
            py.unknown.len(),
            py.reasons
        );
        assert!(!py.acked.is_empty(), "redis-py: no write acknowledged at all");
    }
    let records: Vec<(Family, Record)> = writers.into_iter().map(|(f, h)| (f, h.join().expect("a writer"))).collect();
    for (f, r) in &records {
        println!("{f:?}: {} acknowledged, {} unknown", r.acked.len(), r.unknown.len());
        assert!(!r.acked.is_empty(), "{f:?}: no write acknowledged at all");
    }
    println!("failover (kill -9 to the first acknowledged write): {}", summary(&mut failover));
    println!("restart to caught up: {}", summary(&mut catch_up));

    // Every node holds every acknowledged write: a last write on the leader, waited for on each node, then
    // each family read back and checked against its writer's record.
    let mut router = Router::new(addrs.clone());
    router.write_until(&["SET", "final", "1"], &ok());
    let leader = leader_of(&nodes);
    let mut views = Vec::new();
    for (i, n) in nodes.iter().enumerate() {
        let addr = n.addr();
        let mut c = poll(WAIT, "the last write on every node", || {
            let mut c = if i == leader { Conn::open(addr, Duration::from_secs(10))? } else { Conn::reader(addr)? };
            (c.cmd(&["GET", "final"])? == bulk("1")).then_some(c)
        });
        let mut view = Vec::new();
        for (f, rec) in &records {
            let seen = f.read(&mut c, rec).unwrap_or_else(|e| panic!("node {i}: {e}"));
            f.check(&seen, rec).unwrap_or_else(|e| panic!("node {i} (leader {leader}): {e}"));
            view.push(seen);
        }
        if i == leader {
            let present: Vec<String> = records
                .iter()
                .zip(&view)
                .filter(|(fr, _)| fr.0 != Family::Incr)
                .map(|((f, r), seen)| {
                    format!("{f:?} {}/{}", r.unknown.iter().filter(|u| seen.contains(u)).count(), r.unknown.len())
                })
                .collect();
            println!("writes of unknown outcome present on the leader: {}", present.join(", "));
        }
        for cycle in 0..cycles {
            assert_eq!(c.cmd(&["GET", &format!("probe:{cycle}")]), Some(bulk("ok")), "node {i}");
        }
        if let Some(py) = &py {
            py.check(&mut c).unwrap_or_else(|e| panic!("node {i} (leader {leader}), redis-py's writes: {e}"));
        }
        views.push(view);
    }
    for (i, v) in views.iter().enumerate().skip(1) {
        assert!(v == &views[0], "node {i} differs from node 0 after every write was applied");
    }
}

// ---------------------------------------------------------------------------------------------------------
// Network faults on the bus, through a proxy per node (helpers/bus_proxy.rs)

/// Every key a node holds, each rendered by type (strings, lists, hashes, sets, sorted sets).
fn dump(c: &mut Conn) -> Option<BTreeMap<String, String>> {
    let mut keys = BTreeSet::new();
    let mut cursor = "0".to_string();
    for _ in 0..10_000 {
        let page = match c.cmd(&["SCAN", &cursor, "COUNT", "100"])? {
            Resp::Array(v) if v.len() == 2 => v,
            _ => return None,
        };
        cursor = page[0].text();
        for k in page[1].clone().array() {
            keys.insert(k.text());
        }
        if cursor == "0" {
            break;
        }
    }
    let mut out = BTreeMap::new();
    for k in keys {
        let t = c.cmd(&["TYPE", &k])?.text();
        let v = match t.as_str() {
            "string" => c.cmd(&["GET", &k])?,
            "list" => c.cmd(&["LRANGE", &k, "0", "-1"])?,
            "hash" => {
                let mut pairs: Vec<Vec<Resp>> =
                    c.cmd(&["HGETALL", &k])?.array().chunks(2).map(<[Resp]>::to_vec).collect();
                pairs.sort_by_key(|p| format!("{p:?}"));
                Resp::Array(pairs.into_iter().flatten().collect())
            }
            "set" => {
                let mut m = c.cmd(&["SMEMBERS", &k])?.array();
                m.sort_by_key(|r| format!("{r:?}"));
                Resp::Array(m)
            }
            "zset" => c.cmd(&["ZRANGE", &k, "0", "-1", "WITHSCORES"])?,
            other => Resp::Simple(format!("type {other}")),
        };
        out.insert(k, format!("{t} {v:?}"));
    }
    Some(out)
}

/// Sends the `i`th write of the network test: SET, HSET, SADD or ZADD (all idempotent, so they may be resent
/// until acknowledged), and remembers what must be there.
fn net_write(router: &mut Router, i: usize, acked: &mut Vec<(String, String)>) {
    let (args, want, key) = match i % 4 {
        0 => (vec!["SET".to_string(), format!("net:{i}"), format!("v{i}")], ok(), format!("net:{i}")),
        1 => (vec!["HSET".into(), "net:hash".into(), format!("f{i}"), i.to_string()], Resp::Int(1), "net:hash".into()),
        2 => (vec!["SADD".into(), "net:set".into(), i.to_string()], Resp::Int(1), "net:set".into()),
        _ => (vec!["ZADD".into(), "net:zset".into(), i.to_string(), format!("m{i}")], Resp::Int(1), "net:zset".into()),
    };
    let args_s: Vec<&str> = args.iter().map(String::as_str).collect();
    // A resent HSET/SADD/ZADD whose first try was applied answers 0: acknowledged all the same.
    poll_every(Duration::from_millis(20), WAIT, &format!("{args:?} acknowledged"), || {
        router.write(&args_s).filter(|r| *r == want || (!i.is_multiple_of(4) && *r == Resp::Int(0)))
    });
    // What identifies the write in the key: the string's value, the hash field, the member.
    let item = if i % 4 == 1 { args[2].clone() } else { args[args.len() - 1].clone() };
    acked.push((key, item));
}

/// True when a node's dump holds acknowledged write `(key, item)`: the string's value, a hash field, a member.
fn holds(view: &BTreeMap<String, String>, key: &str, item: &str) -> bool {
    view.get(key).is_some_and(|v| v.contains(&format!("{:?}", bulk(item))))
}

/// Writes sent to one node and what it answered (`None`: nothing).
type Answers = Vec<(String, Option<Resp>)>;

/// Writes through `router` for at least `least` (and at most 500 writes); how many, and how long it took.
fn writes_for(
    router: &mut Router,
    least: Duration,
    writes: &mut impl FnMut(&mut Router, usize, &mut Vec<(String, String)>) -> Duration,
    acked: &mut Vec<(String, String)>,
) -> (usize, Duration) {
    let started = Instant::now();
    let mut count = 0;
    while started.elapsed() < least && count < 500 {
        writes(router, 1, acked);
        count += 1;
        std::thread::sleep(Duration::from_millis(10));
    }
    (count, started.elapsed())
}

#[test]
fn network_faults_isolated_leader_never_acknowledges_and_the_group_converges() {
    let _ = seed();
    let tmp = tempfile::tempdir().expect("tempdir");
    // A proxy per node in front of its bus port: the group's member addresses name the proxies' ports.
    let (nodes, proxies, ids) = start_proxied_group(tmp.path());
    let addrs: Vec<SocketAddr> = nodes.iter().map(NodeProc::addr).collect();
    let mut router = Router::new(addrs.clone());
    let mut acked: Vec<(String, String)> = Vec::new();
    let mut i = 0;
    let mut writes = |router: &mut Router, n: usize, acked: &mut Vec<(String, String)>| {
        let started = Instant::now();
        for _ in 0..n {
            net_write(router, i, acked);
            i += 1;
        }
        started.elapsed()
    };
    writes(&mut router, 8, &mut acked);

    // Delay: every chunk on the bus held 20 ms both ways; writes are slower, still acknowledged.
    for p in &proxies {
        p.set(|r| r.delay = Duration::from_millis(20));
    }
    println!("delay 20 ms: 8 writes acknowledged in {:?}", writes(&mut router, 8, &mut acked));
    for p in &proxies {
        p.set(|r| r.delay = Duration::ZERO);
    }

    // Severed connections: every bus connection closed at once; the transport reconnects.
    for p in &proxies {
        p.sever();
    }
    println!("connections severed: 8 writes acknowledged in {:?}", writes(&mut router, 8, &mut acked));

    // A follower cut off from both others for longer than an election timeout: the other two go on.
    let leader = leader_of(&nodes);
    let cut = (leader + 1) % 3;
    isolate(&proxies, &ids, cut);
    let (count, took) = writes_for(&mut router, Duration::from_millis(2500), &mut writes, &mut acked);
    println!("node {cut} cut off: {count} writes acknowledged in {took:?}");
    for p in &proxies {
        p.set(|r| r.cut.clear());
    }

    // One way: a follower stops hearing the leader (its requests swallowed) for longer than an election
    // timeout, so it stands for election; the other way works.
    let leader = leader_of(&nodes);
    let deaf = (leader + 1) % 3;
    proxies[deaf].set(|r| {
        r.deaf.insert(ids[leader]);
    });
    let (count, took) = writes_for(&mut router, Duration::from_millis(2500), &mut writes, &mut acked);
    println!("node {deaf} deaf to leader {leader}: {count} writes acknowledged in {took:?}");
    proxies[deaf].set(|r| r.deaf.clear());

    // The leader isolated from both followers: nothing reaches it, nothing from it reaches them.
    let leader = leader_of(&nodes);
    let others: Vec<usize> = (0..3).filter(|&n| n != leader).collect();
    isolate(&proxies, &ids, leader);
    let isolated_at = Instant::now();
    let done = Arc::new(AtomicBool::new(false));
    // Clients of the isolated leader, writing until the partition heals: every reply must be an error.
    let isolated: Vec<JoinHandle<Answers>> = (0..3)
        .map(|w| {
            let (addr, done) = (addrs[leader], done.clone());
            std::thread::spawn(move || {
                let mut replies = Vec::new();
                for k in 0..20 {
                    if done.load(Ordering::Relaxed) && k > 0 {
                        break;
                    }
                    let key = format!("iso:{w}:{k}");
                    let sent = Instant::now();
                    let reply = Conn::open(addr, Duration::from_secs(30)).and_then(|mut c| c.cmd(&["SET", &key, "x"]));
                    println!("isolated leader: {key} answered {reply:?} after {:?}", sent.elapsed());
                    replies.push((key, reply));
                }
                replies
            })
        })
        .collect();
    // The majority side elects a leader and acknowledges writes.
    let mut majority = Router::new(others.iter().map(|&n| addrs[n]).collect());
    let first = writes(&mut majority, 1, &mut acked);
    println!("leader {leader} isolated: the majority acknowledged a write {:?} after the partition", first);
    writes(&mut majority, 7, &mut acked);
    // The isolated node may still call itself master (it has no way to learn otherwise): the majority's
    // leader is one of the others.
    let majority_leader =
        poll(WAIT, "a leader on the majority side", || others.iter().copied().find(|&n| is_master(addrs[n])));
    println!("majority leader: node {majority_leader}");
    // Give the isolated clients a bounded time to hear their refusals (a proposal times out in 10 s).
    std::thread::sleep(Duration::from_millis(500));
    done.store(true, Ordering::Relaxed);
    let refused: Answers = isolated.into_iter().flat_map(|h| h.join().expect("a client")).collect();
    println!("isolated for {:?}; {} writes sent to the isolated leader", isolated_at.elapsed(), refused.len());
    for (key, reply) in &refused {
        assert!(
            matches!(reply, Some(Resp::Error(e)) if e.starts_with("CLUSTERDOWN") || e.starts_with("MOVED")),
            "the isolated leader answered {key} with {reply:?}"
        );
    }

    // Healed: all three converge to the same data, which holds every acknowledged write and none of the writes
    // the isolated leader refused.
    for p in &proxies {
        p.set(|r| *r = Rules::default());
    }
    let healed = Instant::now();
    writes(&mut router, 4, &mut acked);
    let views = poll_every(Duration::from_millis(200), WAIT, "the three nodes hold the same data", || {
        let leader = (0..3).find(|&n| is_master(addrs[n]))?;
        let mut views = Vec::new();
        for (n, &addr) in addrs.iter().enumerate() {
            let mut c = if n == leader { Conn::open(addr, Duration::from_secs(10))? } else { Conn::reader(addr)? };
            views.push(dump(&mut c)?);
        }
        (views[0] == views[1] && views[1] == views[2]).then_some(views)
    });
    println!("converged {:?} after healing: {} keys on each node", healed.elapsed(), views[0].len());
    for (key, item) in &acked {
        assert!(holds(&views[0], key, item), "acknowledged {key} {item} is missing: {:?}", views[0].get(key));
    }
    for (key, _) in &refused {
        assert!(!views[0].contains_key(key), "{key}, refused by the isolated leader, is present");
    }
}
