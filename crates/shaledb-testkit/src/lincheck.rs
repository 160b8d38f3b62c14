//! Linearizability of a server's string commands, checked by Porcupine.
//!
//! [`Recorder::run`] runs concurrent clients against a RESP server (GET, SET, APPEND, INCR and DEL on a few keys,
//! one request per round trip) and records each operation's call and return times on one monotonic clock,
//! with its reply. An operation whose reply never came (a timeout, a closed connection) is kept with no
//! return time: it may have taken effect or not. [`Checker`] runs `tools/lincheck` (Go, on Porcupine,
//! github.com/anishathalye/porcupine), which decides whether some order of the operations, each placed
//! between its call and its return, explains every reply (the history's format is in its `main.go`).
//!
//! A replica group's clients follow it ([`Route::Follow`], [`Recorder::run_routes`]): a client talks to one
//! member, follows `-MOVED <slot> <host:port>` to the member named, and moves on to the next member after
//! `-CLUSTERDOWN`, another error, a lost connection or a timeout. An operation is sent once: whatever its reply
//! was not (an error, including `-MOVED`, since a failed proposal is answered by a redirect too; nothing) is
//! recorded as [`Outcome::Unknown`], never resent. Only finding the leader is retried (nothing was sent yet),
//! for a bounded time; an operation sent nowhere in that time is left out of the history.
//!
//! Where Go is missing or the checker cannot be built (it fetches Porcupine from the Go module proxy the first
//! time), [`Checker::find_or_build`] says why, and the test prints it and skips the check, as the comparisons
//! with redis-server do.

use std::fmt::Write as _;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The command of one operation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Op {
    /// `GET key`.
    Get,
    /// `SET key value`.
    Set(String),
    /// `APPEND key value`.
    Append(String),
    /// `INCR key` (only on keys that never hold anything but integers).
    Incr,
    /// `DEL key`.
    Del,
}

/// What the server answered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// GET of a missing key, or SET's `OK`.
    Nil,
    /// GET's value.
    Value(String),
    /// APPEND's new length, INCR's new value, DEL's count.
    Int(i64),
    /// No reply came: the operation may or may not have taken effect.
    Unknown,
}

/// One recorded operation.
#[derive(Clone, Debug)]
pub struct Operation {
    /// The client (thread) that sent it; a client sends one operation at a time.
    pub client: usize,
    /// The key.
    pub key: String,
    /// The command.
    pub op: Op,
    /// Nanoseconds since the recording began, before the request was written.
    pub call: u64,
    /// Nanoseconds since the recording began, after the reply was read (`None` with [`Outcome::Unknown`]).
    pub ret: Option<u64>,
    /// The reply.
    pub outcome: Outcome,
}

/// A recording's shape.
#[derive(Clone, Debug)]
pub struct Workload {
    /// Concurrent clients, each on its own connection and thread.
    pub clients: usize,
    /// Operations per client.
    pub ops_per_client: usize,
    /// Keys written by GET/SET/APPEND/DEL (`s0`, `s1`, ...): few, so operations overlap often.
    pub string_keys: usize,
    /// Keys written by INCR/GET/DEL (`c0`, `c1`, ...).
    pub counter_keys: usize,
    /// How long one reply may take before the operation is recorded as unknown and the client reconnects.
    pub timeout: Duration,
    /// Seed of the operations' choice.
    pub seed: u64,
    /// A client's sleep after each operation (none by default): spreads a recording over time, so faults
    /// injected meanwhile land in it.
    pub pause: Duration,
    /// Only GETs, on the same keys (clients that keep reading from one member while it is cut off).
    pub reads_only: bool,
    /// When set, each client stops (before its next operation) once it is true, even short of
    /// `ops_per_client`.
    pub stop: Option<Arc<AtomicBool>>,
}

/// Where a client sends its operations.
#[derive(Clone, Debug)]
pub enum Route {
    /// One server; after a failure the client reconnects to it.
    Fixed(SocketAddr),
    /// A replica group's members: start at the first, follow `-MOVED`, move on after a failure (module docs).
    Follow(Vec<SocketAddr>),
}

impl Default for Workload {
    fn default() -> Self {
        Workload {
            clients: 4,
            ops_per_client: 200,
            string_keys: 3,
            counter_keys: 2,
            timeout: Duration::from_secs(10),
            seed: 1,
            pause: Duration::ZERO,
            reads_only: false,
            stop: None,
        }
    }
}

/// Records operations on one monotonic clock: every [`Operation`]'s times count from its creation.
pub struct Recorder {
    start: Instant,
}

impl Default for Recorder {
    fn default() -> Self {
        Recorder::new()
    }
}

impl Recorder {
    /// A recorder whose clock starts now.
    pub fn new() -> Recorder {
        Recorder { start: Instant::now() }
    }

    /// Runs `w` against the servers at `addrs` (client `i` talks to `addrs[i % addrs.len()]`) and returns the
    /// operations in call order. A request with no reply (an error reply, a timeout, a closed connection) is
    /// recorded as [`Outcome::Unknown`] and its client reconnects; [`errors`] lists them for the test to judge
    /// (one healthy server gives none).
    pub fn run(&self, addrs: &[SocketAddr], w: &Workload) -> Vec<Operation> {
        assert!(!addrs.is_empty(), "a recording needs an address");
        let routes: Vec<Route> = addrs.iter().map(|&a| Route::Fixed(a)).collect();
        self.run_routes(&routes, w)
    }

    /// Runs `w` with client `i` on `routes[i % routes.len()]` (client numbers are `first_client` on), and
    /// returns the operations in call order.
    pub fn run_routes(&self, routes: &[Route], w: &Workload) -> Vec<Operation> {
        self.run_clients(routes, 0, w)
    }

    /// [`Recorder::run_routes`] with client numbers from `first_client` on (so recordings run side by side
    /// on one clock and merged keep one number per client).
    pub fn run_clients(&self, routes: &[Route], first_client: usize, w: &Workload) -> Vec<Operation> {
        assert!(!routes.is_empty(), "a recording needs a route");
        for r in routes {
            assert!(!matches!(r, Route::Follow(a) if a.is_empty()), "a group route needs an address");
        }
        let w = Arc::new(w.clone());
        let start = self.start;
        let handles: Vec<_> = (0..w.clients)
            .map(|c| {
                let route = routes[c % routes.len()].clone();
                let w = w.clone();
                std::thread::spawn(move || run_client(first_client + c, c, route, &w, start))
            })
            .collect();
        let mut ops: Vec<Operation> =
            handles.into_iter().flat_map(|h| h.join().expect("a client thread panicked")).collect();
        ops.sort_by_key(|o| o.call);
        ops
    }

    /// Nanoseconds since the recording began, on the clock of its operations' times.
    pub fn now(&self) -> u64 {
        self.start.elapsed().as_nanos() as u64
    }

    /// One `GET key` from a new connection as client `client`, recorded on this recorder's clock.
    pub fn get(&self, addr: SocketAddr, key: &str, client: usize, timeout: Duration) -> Operation {
        let call = self.start.elapsed().as_nanos() as u64;
        let reply = Conn::connect(addr, timeout)
            .map_err(|e| e.to_string())
            .and_then(|mut c| c.request(&args(key, &Op::Get)))
            .and_then(|r| outcome(&Op::Get, r));
        let ret = self.start.elapsed().as_nanos() as u64;
        let outcome = reply.unwrap_or(Outcome::Unknown);
        let ret = (outcome != Outcome::Unknown).then_some(ret);
        Operation { client, key: key.into(), op: Op::Get, call, ret, outcome }
    }
}

/// A forged stale read to append to a linearizable history: `current` is a read of its key made after every
/// operation of `ops` returned; the forgery, right after it, claims a value an acknowledged `SET` of `ops`
/// wrote that `current` did not see. No order explains it (only that `SET` writes that value, and it returned
/// before `current` began; operations of unknown outcome may land anywhere later, but none writes it), so the
/// checker must refuse the history with it. `None` when no such `SET` was acknowledged.
pub fn forge_stale_read(ops: &[Operation], current: &Operation) -> Option<Operation> {
    let t = current.ret?;
    let earlier = ops
        .iter()
        .filter(|o| o.key == current.key && o.ret.is_some_and(|r| r < current.call))
        .filter_map(|o| match &o.op {
            Op::Set(v) => Some(v.clone()),
            _ => None,
        })
        .find(|v| current.outcome != Outcome::Value(v.clone()))?;
    Some(Operation {
        client: current.client,
        key: current.key.clone(),
        op: Op::Get,
        call: t + 1_000,
        ret: Some(t + 2_000),
        outcome: Outcome::Value(earlier),
    })
}

/// The operations of a recording that got no reply, one line each.
pub fn errors(ops: &[Operation]) -> Vec<String> {
    ops.iter()
        .filter(|o| o.outcome == Outcome::Unknown)
        .map(|o| format!("client {} {:?} {} at {} ns: no reply", o.client, o.op, o.key, o.call))
        .collect()
}

/// How many members a group client asks for the leader in a round ([`Client::connected`]).
const CONNECT_TRIES: usize = 6;

/// A group client's sleep after an operation whose outcome is unknown: an election or a restart takes a
/// while, and each unknown operation makes the check harder.
const BACKOFF: Duration = Duration::from_millis(100);

/// Where a client is connected and where it goes next.
struct Client {
    route: Route,
    target: SocketAddr,
    next: usize,
    conn: Option<Conn>,
    timeout: Duration,
    /// A member that just failed a request other than by `-MOVED` (`-CLUSTERDOWN`, a lost connection, a
    /// timeout), and until when a group client passes it by: a leader cut off from its majority still calls
    /// itself master, and its followers may still name it.
    avoid: Option<(SocketAddr, Instant)>,
}

/// How long a group client passes by a member that failed a request ([`Client::avoid`]).
const AVOID: Duration = Duration::from_secs(1);

impl Client {
    fn new(route: Route, seq: usize, timeout: Duration) -> Client {
        let (target, next) = match &route {
            Route::Fixed(a) => (*a, 0),
            Route::Follow(addrs) => (addrs[seq % addrs.len()], seq % addrs.len()),
        };
        Client { route, target, next, conn: None, timeout, avoid: None }
    }

    /// The next member after a failure (a fixed client stays where it is).
    fn move_on(&mut self) {
        self.conn = None;
        if let Route::Follow(addrs) = &self.route {
            self.next = (self.next + 1) % addrs.len();
            self.target = addrs[self.next];
        }
    }

    /// Connects if not connected. A fixed client tries once. A group client looks for the leader first, so
    /// operations seldom meet a follower's `-MOVED` (each would be one more of unknown outcome): it asks the
    /// member it would talk to (`INFO replication`), goes to the `master_host:master_port` a follower names,
    /// or to the next member when it names none, does not answer, or is one it avoids ([`Client::avoid`]);
    /// [`CONNECT_TRIES`] members a round, with [`BACKOFF`] between rounds, for at most the workload's timeout.
    /// Nothing is sent meanwhile.
    fn connected(&mut self, stop: Option<&AtomicBool>) -> Option<&mut Conn> {
        if self.conn.is_some() {
            return self.conn.as_mut();
        }
        if let Route::Fixed(a) = self.route {
            self.conn = Conn::connect(a, self.timeout).ok();
            return self.conn.as_mut();
        }
        let started = Instant::now();
        while started.elapsed() < self.timeout && !stop.is_some_and(|s| s.load(Ordering::Relaxed)) {
            for _ in 0..CONNECT_TRIES {
                if self.avoid.is_some_and(|(a, until)| a == self.target && Instant::now() < until) {
                    self.move_on();
                    continue;
                }
                let Ok(mut c) = Conn::connect(self.target, self.timeout) else {
                    self.move_on();
                    continue;
                };
                let info = match c.request(&["INFO".to_string(), "replication".to_string()]) {
                    Ok(Reply::Bulk(Some(text))) => text,
                    _ => {
                        self.move_on();
                        continue;
                    }
                };
                let field = |name: &str| {
                    info.lines().find_map(|l| l.strip_prefix(name)?.strip_prefix(':')).map(|v| v.trim().to_string())
                };
                if field("role").as_deref() == Some("master") {
                    self.conn = Some(c);
                    return self.conn.as_mut();
                }
                let leader = match (field("master_host"), field("master_port")) {
                    (Some(h), Some(p)) if !h.is_empty() && p != "0" => format!("{h}:{p}").parse().ok(),
                    _ => None,
                };
                match leader {
                    Some(addr) if addr != self.target => self.target = addr,
                    _ => self.move_on(),
                }
            }
            std::thread::sleep(BACKOFF);
        }
        None
    }

    /// After a failed request: a fixed client reconnects; a group client follows `-MOVED` to the member it
    /// names, else moves on.
    fn failed(&mut self, why: &str) {
        self.conn = None;
        if !matches!(self.route, Route::Follow(_)) {
            return;
        }
        let moved =
            why.strip_prefix("error reply: MOVED ").and_then(|m| m.split(' ').nth(1)).and_then(|a| a.parse().ok());
        match moved {
            Some(addr) => self.target = addr,
            None => {
                self.avoid = Some((self.target, Instant::now() + AVOID));
                self.move_on();
            }
        }
        std::thread::sleep(BACKOFF);
    }
}

fn run_client(client: usize, seq: usize, route: Route, w: &Workload, start: Instant) -> Vec<Operation> {
    let mut rng = crate::rand::SeedableRng::seed_from_u64(w.seed.wrapping_mul(1_000_003).wrapping_add(client as u64));
    let mut c = Client::new(route, seq, w.timeout);
    let mut out = Vec::with_capacity(w.ops_per_client);
    for i in 0..w.ops_per_client {
        if w.stop.as_ref().is_some_and(|s| s.load(Ordering::Relaxed)) {
            break;
        }
        let (key, op) = choose(&mut rng, client, i, w);
        let args = args(&key, &op);
        let call = start.elapsed().as_nanos() as u64;
        let fixed = matches!(c.route, Route::Fixed(_));
        let reply = match c.connected(w.stop.as_deref()) {
            Some(conn) => conn.request(&args),
            None if fixed => Err("connect failed".into()),
            // A group client that found no leader sent nothing: the operation is not part of the history.
            None => continue,
        };
        let ret = start.elapsed().as_nanos() as u64;
        let outcome = match reply.and_then(|r| outcome(&op, r)) {
            Ok(o) => o,
            Err(why) => {
                c.failed(&why);
                Outcome::Unknown
            }
        };
        let ret = (outcome != Outcome::Unknown).then_some(ret);
        out.push(Operation { client, key, op, call, ret, outcome });
        if !w.pause.is_zero() {
            std::thread::sleep(w.pause);
        }
    }
    out
}

fn choose(rng: &mut crate::rand::rngs::StdRng, client: usize, i: usize, w: &Workload) -> (String, Op) {
    use crate::rand::Rng;
    if w.reads_only {
        let n = w.string_keys + w.counter_keys;
        let k = rng.gen_range(0..n.max(1));
        let key = if k < w.string_keys { format!("s{k}") } else { format!("c{}", k - w.string_keys) };
        return (key, Op::Get);
    }
    let counters = w.counter_keys > 0 && (w.string_keys == 0 || rng.gen_range(0..3) == 0);
    if counters {
        let key = format!("c{}", rng.gen_range(0..w.counter_keys));
        let op = match rng.gen_range(0..10) {
            0..=4 => Op::Incr,
            5..=8 => Op::Get,
            _ => Op::Del,
        };
        return (key, op);
    }
    let key = format!("s{}", rng.gen_range(0..w.string_keys.max(1)));
    // Values are unique per operation, so a read names the write it saw.
    let op = match rng.gen_range(0..10) {
        0..=3 => Op::Get,
        4..=6 => Op::Set(format!("v{client}-{i}")),
        7..=8 => Op::Append(format!("+{client}-{i}")),
        _ => Op::Del,
    };
    (key, op)
}

fn args(key: &str, op: &Op) -> Vec<String> {
    match op {
        Op::Get => vec!["GET".into(), key.into()],
        Op::Set(v) => vec!["SET".into(), key.into(), v.clone()],
        Op::Append(v) => vec!["APPEND".into(), key.into(), v.clone()],
        Op::Incr => vec!["INCR".into(), key.into()],
        Op::Del => vec!["DEL".into(), key.into()],
    }
}

/// A reply, as far as these commands need.
enum Reply {
    Simple(String),
    Int(i64),
    Bulk(Option<String>),
}

fn outcome(op: &Op, r: Reply) -> Result<Outcome, String> {
    match (op, r) {
        (Op::Get, Reply::Bulk(None)) => Ok(Outcome::Nil),
        (Op::Get, Reply::Bulk(Some(v))) => Ok(Outcome::Value(v)),
        (Op::Set(_), Reply::Simple(s)) if s == "OK" => Ok(Outcome::Nil),
        (Op::Append(_) | Op::Incr | Op::Del, Reply::Int(n)) => Ok(Outcome::Int(n)),
        (op, _) => Err(format!("unexpected reply to {op:?}")),
    }
}

struct Conn {
    r: BufReader<TcpStream>,
}

/// Longest reply line or bulk string accepted (these commands' replies are short).
const MAX_REPLY: usize = 1 << 20;

impl Conn {
    fn connect(addr: SocketAddr, timeout: Duration) -> std::io::Result<Conn> {
        let s = TcpStream::connect_timeout(&addr, timeout)?;
        s.set_read_timeout(Some(timeout))?;
        s.set_write_timeout(Some(timeout))?;
        s.set_nodelay(true)?;
        Ok(Conn { r: BufReader::new(s) })
    }

    fn request(&mut self, args: &[String]) -> Result<Reply, String> {
        let mut req = format!("*{}\r\n", args.len());
        for a in args {
            let _ = write!(req, "${}\r\n{a}\r\n", a.len());
        }
        self.r.get_mut().write_all(req.as_bytes()).map_err(|e| e.to_string())?;
        let line = self.line()?;
        let (tag, rest) = line.split_at(1);
        match tag {
            "+" => Ok(Reply::Simple(rest.to_string())),
            "-" => Err(format!("error reply: {rest}")),
            ":" => rest.parse().map(Reply::Int).map_err(|_| format!("bad integer {rest:?}")),
            "$" if rest == "-1" => Ok(Reply::Bulk(None)),
            "$" => {
                let n: usize = rest.parse().map_err(|_| format!("bad length {rest:?}"))?;
                if n > MAX_REPLY {
                    return Err(format!("bulk of {n} bytes"));
                }
                let mut buf = vec![0; n + 2];
                self.r.read_exact(&mut buf).map_err(|e| e.to_string())?;
                buf.truncate(n);
                String::from_utf8(buf).map(|s| Reply::Bulk(Some(s))).map_err(|_| "a value not UTF-8".to_string())
            }
            "_" => Ok(Reply::Bulk(None)),
            _ => Err(format!("unexpected reply line {line:?}")),
        }
    }

    fn line(&mut self) -> Result<String, String> {
        let mut line = Vec::new();
        let n = (&mut self.r).take(MAX_REPLY as u64).read_until(b'\n', &mut line).map_err(|e| e.to_string())?;
        if n == 0 {
            return Err("connection closed".into());
        }
        if !line.ends_with(b"\r\n") || line.len() < 3 {
            return Err(format!("malformed reply line {line:?}"));
        }
        line.truncate(line.len() - 2);
        String::from_utf8(line).map_err(|_| "a reply line not UTF-8".into())
    }
}

/// The history file `tools/lincheck` reads: one JSON object per line.
pub fn to_jsonl(ops: &[Operation]) -> String {
    let mut out = String::new();
    for o in ops {
        let (name, value) = match &o.op {
            Op::Get => ("get", None),
            Op::Set(v) => ("set", Some(v)),
            Op::Append(v) => ("append", Some(v)),
            Op::Incr => ("incr", None),
            Op::Del => ("del", None),
        };
        let _ = write!(out, "{{\"client\":{},\"op\":\"{name}\",\"key\":{}", o.client, json_str(&o.key));
        if let Some(v) = value {
            let _ = write!(out, ",\"value\":{}", json_str(v));
        }
        let _ = write!(out, ",\"call\":{}", o.call);
        match o.ret {
            Some(r) => {
                let _ = write!(out, ",\"return\":{r}");
            }
            None => out.push_str(",\"return\":null"),
        }
        match &o.outcome {
            Outcome::Nil | Outcome::Unknown => {}
            Outcome::Value(v) => {
                let _ = write!(out, ",\"found\":true,\"result\":{}", json_str(v));
            }
            Outcome::Int(n) => {
                let _ = write!(out, ",\"result\":{n}");
            }
        }
        out.push_str("}\n");
    }
    out
}

fn json_str(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// The verdict of the checker.
#[derive(Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Some order of the operations explains every reply.
    Linearizable,
    /// None does.
    NotLinearizable,
    /// The checker gave up at its timeout.
    Unknown,
}

/// The built `tools/lincheck`.
pub struct Checker {
    bin: PathBuf,
}

impl Checker {
    /// The checker named by `SHALEDB_LINCHECK`, or `target/lincheck/lincheck` of this workspace, built there
    /// with `go build` when missing. `Err` says why there is none (no Go, or the build failed).
    pub fn find_or_build() -> Result<Checker, String> {
        if let Ok(p) = std::env::var("SHALEDB_LINCHECK") {
            let bin = PathBuf::from(p);
            return if bin.is_file() {
                Ok(Checker { bin })
            } else {
                Err(format!("SHALEDB_LINCHECK={} is not a file", bin.display()))
            };
        }
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let target = std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from).unwrap_or_else(|| root.join("target"));
        let bin = target.join("lincheck").join("lincheck");
        if bin.is_file() {
            return Ok(Checker { bin });
        }
        let src = root.join("tools/lincheck");
        std::fs::create_dir_all(target.join("lincheck")).map_err(|e| format!("creating {}: {e}", target.display()))?;
        // Built under a name of its own and renamed, so concurrent tests never run a half-written binary.
        let tmp = target.join("lincheck").join(format!("lincheck.{}.tmp", std::process::id()));
        let out = Command::new("go")
            .arg("build")
            .arg("-o")
            .arg(&tmp)
            .arg(".")
            .current_dir(&src)
            .output()
            .map_err(|e| format!("Go is not installed ({e}): tools/lincheck cannot be built"))?;
        if !out.status.success() {
            let _ = std::fs::remove_file(&tmp);
            return Err(format!(
                "`go build` of tools/lincheck failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        std::fs::rename(&tmp, &bin).map_err(|e| format!("renaming the checker: {e}"))?;
        Ok(Checker { bin })
    }

    /// Checks `ops` (written to `dir/name.jsonl`; with a failure, the checker's picture of it goes to
    /// `dir/name.html`). Returns the verdict and the checker's output. A GET of unknown outcome is left out:
    /// it changes nothing and claims nothing, so no order depends on it (and thousands of them, from clients
    /// of a member cut off, would only slow the search).
    pub fn check(&self, ops: &[Operation], dir: &Path, name: &str) -> (Verdict, String) {
        let history = dir.join(format!("{name}.jsonl"));
        let ops: Vec<Operation> =
            ops.iter().filter(|o| !(o.op == Op::Get && o.outcome == Outcome::Unknown)).cloned().collect();
        std::fs::write(&history, to_jsonl(&ops)).expect("write the history");
        let out = Command::new(&self.bin)
            .arg("-timeout")
            .arg("120s")
            .arg("-html")
            .arg(dir.join(format!("{name}.html")))
            .arg(&history)
            .output()
            .expect("run tools/lincheck");
        let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        let verdict = match out.status.code() {
            Some(0) => Verdict::Linearizable,
            Some(1) => Verdict::NotLinearizable,
            Some(2) => Verdict::Unknown,
            _ => panic!("tools/lincheck refused the history {}: {text}", history.display()),
        };
        (verdict, text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn history_lines_name_every_field_the_checker_reads() {
        let ops = vec![
            Operation {
                client: 0,
                key: "s0".into(),
                op: Op::Set("v\"1".into()),
                call: 1,
                ret: Some(2),
                outcome: Outcome::Nil,
            },
            Operation {
                client: 1,
                key: "s0".into(),
                op: Op::Get,
                call: 3,
                ret: Some(4),
                outcome: Outcome::Value("v\"1".into()),
            },
            Operation { client: 1, key: "s1".into(), op: Op::Get, call: 5, ret: Some(6), outcome: Outcome::Nil },
            Operation { client: 2, key: "c0".into(), op: Op::Incr, call: 7, ret: None, outcome: Outcome::Unknown },
            Operation { client: 2, key: "c0".into(), op: Op::Del, call: 8, ret: Some(9), outcome: Outcome::Int(1) },
        ];
        assert_eq!(
            to_jsonl(&ops),
            concat!(
                "{\"client\":0,\"op\":\"set\",\"key\":\"s0\",\"value\":\"v\\\"1\",\"call\":1,\"return\":2}\n",
                "{\"client\":1,\"op\":\"get\",\"key\":\"s0\",\"call\":3,\"return\":4,\"found\":true,\"result\":\"v\\\"1\"}\n",
                "{\"client\":1,\"op\":\"get\",\"key\":\"s1\",\"call\":5,\"return\":6}\n",
                "{\"client\":2,\"op\":\"incr\",\"key\":\"c0\",\"call\":7,\"return\":null}\n",
                "{\"client\":2,\"op\":\"del\",\"key\":\"c0\",\"call\":8,\"return\":9,\"result\":1}\n",
            )
        );
    }

    /// A fake member: answers each command with `reply(args, count of data commands so far)` and keeps the
    /// commands it received.
    type Answer = fn(&[String], usize) -> String;

    struct Fake {
        addr: SocketAddr,
        seen: Arc<std::sync::Mutex<Vec<Vec<String>>>>,
    }

    impl Fake {
        fn start(reply: Answer) -> Fake {
            let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
            let addr = l.local_addr().expect("addr");
            let seen: Arc<std::sync::Mutex<Vec<Vec<String>>>> = Arc::default();
            let log = seen.clone();
            std::thread::spawn(move || {
                for s in l.incoming() {
                    let Ok(s) = s else { return };
                    let log = log.clone();
                    std::thread::spawn(move || {
                        let mut r = BufReader::new(s);
                        while let Some(args) = read_command(&mut r) {
                            let data = {
                                let mut log = log.lock().expect("log");
                                let n = log.iter().filter(|a| a[0] != "INFO").count();
                                log.push(args.clone());
                                n
                            };
                            if r.get_mut().write_all(reply(&args, data).as_bytes()).is_err() {
                                return;
                            }
                        }
                    });
                }
            });
            Fake { addr, seen }
        }

        /// The data commands received (not the INFO probes).
        fn data(&self) -> Vec<Vec<String>> {
            self.seen.lock().expect("log").iter().filter(|a| a[0] != "INFO").cloned().collect()
        }
    }

    fn read_command(r: &mut BufReader<TcpStream>) -> Option<Vec<String>> {
        let mut line = String::new();
        r.read_line(&mut line).ok()?;
        let n: usize = line.trim().strip_prefix('*')?.parse().ok()?;
        let mut args = Vec::new();
        for _ in 0..n {
            line.clear();
            r.read_line(&mut line).ok()?;
            let len: usize = line.trim().strip_prefix('$')?.parse().ok()?;
            let mut buf = vec![0; len + 2];
            r.read_exact(&mut buf).ok()?;
            buf.truncate(len);
            args.push(String::from_utf8(buf).ok()?);
        }
        Some(args)
    }

    fn bulk(s: &str) -> String {
        format!("${}\r\n{s}\r\n", s.len())
    }

    /// A leader's answer to each data command (values need not make sense: nothing is checked here).
    fn applied(args: &[String]) -> String {
        match args[0].as_str() {
            "SET" => "+OK\r\n".into(),
            "GET" => "$-1\r\n".into(),
            _ => ":1\r\n".into(),
        }
    }

    fn commands(ops: &[Operation]) -> Vec<Vec<String>> {
        ops.iter().map(|o| args(&o.key, &o.op)).collect()
    }

    fn group_workload(ops: usize) -> Workload {
        Workload { clients: 1, ops_per_client: ops, timeout: Duration::from_secs(3), ..Workload::default() }
    }

    #[test]
    fn a_group_client_goes_to_the_leader_a_follower_names_and_never_resends_a_failed_operation() {
        // The leader refuses its first data command with -CLUSTERDOWN (the client passes it by for a while,
        // then comes back); the follower names it and would redirect any data command.
        let leader = Fake::start(|args, n| match args[0].as_str() {
            "INFO" => bulk("# Replication\r\nrole:master\r\n"),
            _ if n == 0 => "-CLUSTERDOWN no quorum\r\n".into(),
            _ => applied(args),
        });
        // The follower's answers name the leader's port, known only now: kept in a static for the fn pointer.
        static LEADER_PORT: std::sync::atomic::AtomicU16 = std::sync::atomic::AtomicU16::new(0);
        LEADER_PORT.store(leader.addr.port(), Ordering::Relaxed);
        let follower = Fake::start(|args, _| {
            let port = LEADER_PORT.load(Ordering::Relaxed);
            match args[0].as_str() {
                "INFO" => bulk(&format!("role:slave\r\nmaster_host:127.0.0.1\r\nmaster_port:{port}\r\n")),
                _ => format!("-MOVED 1 127.0.0.1:{port}\r\n"),
            }
        });
        let rec = Recorder::new();
        let ops = rec.run_routes(&[Route::Follow(vec![follower.addr, leader.addr])], &group_workload(12));
        assert_eq!(ops.len(), 12);
        assert_eq!(follower.data(), Vec::<Vec<String>>::new(), "the client asked the follower, sent it nothing");
        assert_eq!(leader.data(), commands(&ops), "each operation sent once, in order");
        assert_eq!(ops[0].outcome, Outcome::Unknown);
        assert_eq!(ops[0].ret, None);
        assert!(ops[1..].iter().all(|o| o.outcome != Outcome::Unknown && o.ret.is_some()), "{ops:?}");
    }

    #[test]
    fn a_group_client_records_a_moved_operation_as_unknown_and_follows_the_redirect() {
        // A deposed leader that still calls itself master answers its first data command with -MOVED.
        static NEW_PORT: std::sync::atomic::AtomicU16 = std::sync::atomic::AtomicU16::new(0);
        let new = Fake::start(|args, _| match args[0].as_str() {
            "INFO" => bulk("role:master\r\n"),
            _ => applied(args),
        });
        NEW_PORT.store(new.addr.port(), Ordering::Relaxed);
        let old = Fake::start(|args, _| match args[0].as_str() {
            "INFO" => bulk("role:master\r\n"),
            _ => format!("-MOVED 7 127.0.0.1:{}\r\n", NEW_PORT.load(Ordering::Relaxed)),
        });
        let rec = Recorder::new();
        let ops = rec.run_routes(&[Route::Follow(vec![old.addr, new.addr])], &group_workload(10));
        assert_eq!(ops.len(), 10);
        assert_eq!(old.data(), commands(&ops[..1]));
        assert_eq!(new.data(), commands(&ops[1..]), "the redirected operation is not resent");
        assert_eq!(ops[0].outcome, Outcome::Unknown);
        assert!(ops[1..].iter().all(|o| o.outcome != Outcome::Unknown));
        // A fixed client (one server) stays: every failure is unknown and it reconnects to the same address.
        let ops = rec.run(&[old.addr], &group_workload(3));
        assert!(ops.iter().all(|o| o.outcome == Outcome::Unknown), "{ops:?}");
        assert_eq!(old.data().len(), 4);
        assert_eq!(new.data().len(), 9);
    }
}
