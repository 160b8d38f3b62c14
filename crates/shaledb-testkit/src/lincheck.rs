//! Linearizability of a server's string commands, checked by Porcupine.
//!
//! [`Recorder::run`] runs concurrent clients against a RESP server (GET, SET, APPEND, INCR and DEL on a few keys,
//! one request per round trip) and records each operation's call and return times on one monotonic clock,
//! with its reply. An operation whose reply never came (a timeout, a closed connection) is kept with no
//! return time: it may have taken effect or not. [`Checker`] runs `tools/lincheck` (Go, on Porcupine,
//! github.com/anishathalye/porcupine), which decides whether some order of the operations, each placed
//! between its call and its return, explains every reply (the history's format is in its `main.go`).
//!
//! Where Go is missing or the checker cannot be built (it fetches Porcupine from the Go module proxy the first
//! time), [`Checker::find_or_build`] says why, and the test prints it and skips the check, as the comparisons
//! with redis-server do.

use std::fmt::Write as _;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
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
        let w = Arc::new(w.clone());
        let start = self.start;
        let handles: Vec<_> = (0..w.clients)
            .map(|c| {
                let addr = addrs[c % addrs.len()];
                let w = w.clone();
                std::thread::spawn(move || run_client(c, addr, &w, start))
            })
            .collect();
        let mut ops: Vec<Operation> =
            handles.into_iter().flat_map(|h| h.join().expect("a client thread panicked")).collect();
        ops.sort_by_key(|o| o.call);
        ops
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

/// The operations of a recording that got no reply, one line each.
pub fn errors(ops: &[Operation]) -> Vec<String> {
    ops.iter()
        .filter(|o| o.outcome == Outcome::Unknown)
        .map(|o| format!("client {} {:?} {} at {} ns: no reply", o.client, o.op, o.key, o.call))
        .collect()
}

fn run_client(client: usize, addr: SocketAddr, w: &Workload, start: Instant) -> Vec<Operation> {
    let mut rng = crate::rand::SeedableRng::seed_from_u64(w.seed.wrapping_mul(1_000_003).wrapping_add(client as u64));
    let mut conn: Option<Conn> = None;
    let mut out = Vec::with_capacity(w.ops_per_client);
    for i in 0..w.ops_per_client {
        let (key, op) = choose(&mut rng, client, i, w);
        let args = args(&key, &op);
        if conn.is_none() {
            conn = Conn::connect(addr, w.timeout).ok();
        }
        let call = start.elapsed().as_nanos() as u64;
        let reply = match conn.as_mut() {
            Some(c) => c.request(&args),
            None => Err("connect failed".into()),
        };
        let ret = start.elapsed().as_nanos() as u64;
        let outcome = match reply.and_then(|r| outcome(&op, r)) {
            Ok(o) => o,
            Err(_) => {
                conn = None;
                Outcome::Unknown
            }
        };
        let ret = (outcome != Outcome::Unknown).then_some(ret);
        out.push(Operation { client, key, op, call, ret, outcome });
    }
    out
}

fn choose(rng: &mut crate::rand::rngs::StdRng, client: usize, i: usize, w: &Workload) -> (String, Op) {
    use crate::rand::Rng;
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
    /// `dir/name.html`). Returns the verdict and the checker's output.
    pub fn check(&self, ops: &[Operation], dir: &Path, name: &str) -> (Verdict, String) {
        let history = dir.join(format!("{name}.jsonl"));
        std::fs::write(&history, to_jsonl(ops)).expect("write the history");
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
}
