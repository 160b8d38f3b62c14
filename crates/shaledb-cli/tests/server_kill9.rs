//! kill -9 of `shaledb server` under `--appendfsync always` loses no acknowledged write (issue 11).
//!
//! The real binary runs on a directory; four client threads write over raw TCP RESP (a small client of our
//! own, so the test depends on no client library): `SET k<t>-<i> v<i>`, with an `INCR` of a per-thread counter
//! and an `MSET` of two keys mixed in when the server has those commands. Each thread records every
//! acknowledged write, in order, in a [`History`]. After 50-500 ms the server gets SIGKILL; it is restarted on
//! the same directory and, for each thread, the keys it touched must be the state after a prefix of its writes
//! that holds every acknowledged one, plus at most the one in flight at the kill (the testkit's no-holes
//! oracle). Every round writes under its own key names, and every restart checks the earlier rounds' states
//! again. Five rounds by default; `SHALEDB_TORTURE_BUDGET=N` runs N times as many. The seed of the kill
//! moments is printed (`SHALEDB_TEST_SEED` replays the schedule, the timing itself is the OS's).
//!
//! A second test does the same with MULTI/EXEC transactions (issue 12): each writes two strings, a counter
//! and one member of every collection type the server has (probed with COMMAND INFO: lists, sets, hashes,
//! sorted sets, streams), and a plain collection write follows each transaction. After each restart every
//! thread's strings and transaction collections hold exactly the transactions its counter counts (every
//! acknowledged one, and the one in flight wholly or not at all), every plain collection holds its
//! acknowledged writes (plus at most the one in flight), and for every collection the size its meta value
//! gives (LLEN, SCARD, HLEN, ZCARD, XLEN) equals the number of its member records (LRANGE, SMEMBERS, HGETALL,
//! ZRANGE, XRANGE over the whole collection).

use shaledb_testkit::rand::Rng;
use shaledb_testkit::{History, Model, Mutation, Write};
use std::io::{BufRead, BufReader, Read, Write as _};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

const THREADS: usize = 4;
/// Most writes one thread makes in a round (the kill comes long before on any sane machine).
const MAX_WRITES_PER_THREAD: usize = 200_000;
/// Longest a bulk reply may be in this test (values are short).
const MAX_BULK: usize = 1 << 20;
/// Most elements of an array reply in this test.
const MAX_ARRAY: usize = 1 << 16;

// ---- a small RESP2 client ----------------------------------------------------------------------------------

#[derive(Debug, Clone, PartialEq, Eq)]
enum Reply {
    Simple(String),
    Error(String),
    Int(i64),
    Bulk(Option<Vec<u8>>),
    Array(Option<Vec<Reply>>),
}

struct Client {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
}

impl Client {
    fn connect(port: u16) -> std::io::Result<Client> {
        let stream = TcpStream::connect(("127.0.0.1", port))?;
        stream.set_read_timeout(Some(Duration::from_secs(20)))?;
        stream.set_write_timeout(Some(Duration::from_secs(20)))?;
        stream.set_nodelay(true)?;
        Ok(Client { reader: BufReader::new(stream.try_clone()?), writer: stream })
    }

    fn encode(out: &mut Vec<u8>, args: &[&[u8]]) {
        out.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
        for a in args {
            out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
            out.extend_from_slice(a);
            out.extend_from_slice(b"\r\n");
        }
    }

    fn send(&mut self, commands: &[Vec<&[u8]>]) -> std::io::Result<()> {
        let mut out = Vec::new();
        for c in commands {
            Client::encode(&mut out, c);
        }
        self.writer.write_all(&out)
    }

    fn call(&mut self, args: &[&[u8]]) -> std::io::Result<Reply> {
        self.send(&[args.to_vec()])?;
        self.read_reply()
    }

    fn line(&mut self) -> std::io::Result<Vec<u8>> {
        let mut line = Vec::new();
        // A line longer than a bulk could be is a broken server, not a reason to grow without bound.
        let n = (&mut self.reader).take(MAX_BULK as u64).read_until(b'\n', &mut line)?;
        if n == 0 {
            return Err(std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "connection closed"));
        }
        if !line.ends_with(b"\r\n") {
            return Err(bad(format!("reply line without CRLF: {:?}", String::from_utf8_lossy(&line))));
        }
        line.truncate(line.len() - 2);
        Ok(line)
    }

    fn read_reply(&mut self) -> std::io::Result<Reply> {
        let line = self.line()?;
        let (kind, rest) = line.split_first().ok_or_else(|| bad("empty reply line".into()))?;
        let text = String::from_utf8_lossy(rest).into_owned();
        let int = |t: &str| t.parse::<i64>().map_err(|_| bad(format!("bad integer {t:?}")));
        match kind {
            b'+' => Ok(Reply::Simple(text)),
            b'-' => Ok(Reply::Error(text)),
            b':' => Ok(Reply::Int(int(&text)?)),
            b'$' => {
                let n = int(&text)?;
                if n < 0 {
                    return Ok(Reply::Bulk(None));
                }
                let n = usize::try_from(n).map_err(|_| bad(format!("bulk length {n}")))?;
                if n > MAX_BULK {
                    return Err(bad(format!("bulk of {n} bytes")));
                }
                let mut buf = vec![0; n + 2];
                self.reader.read_exact(&mut buf)?;
                if !buf.ends_with(b"\r\n") {
                    return Err(bad("bulk without CRLF".into()));
                }
                buf.truncate(n);
                Ok(Reply::Bulk(Some(buf)))
            }
            b'*' => {
                let n = int(&text)?;
                if n < 0 {
                    return Ok(Reply::Array(None));
                }
                let n = usize::try_from(n).map_err(|_| bad(format!("array length {n}")))?;
                if n > MAX_ARRAY {
                    return Err(bad(format!("array of {n} elements")));
                }
                let mut items = Vec::with_capacity(n);
                for _ in 0..n {
                    items.push(self.read_reply()?);
                }
                Ok(Reply::Array(Some(items)))
            }
            other => Err(bad(format!("unknown reply type byte {other:#04x}"))),
        }
    }
}

fn bad(msg: String) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, msg)
}

// ---- the server process ------------------------------------------------------------------------------------

/// A running `shaledb server`; SIGKILLed when dropped (a failing test leaves no process behind).
struct Server {
    child: Child,
    port: u16,
    log: Arc<Mutex<String>>,
}

impl Server {
    fn start(dir: &Path) -> Server {
        let mut child = Command::new(env!("CARGO_BIN_EXE_shaledb"))
            .arg("server")
            .arg("--dir")
            .arg(dir)
            .args(["--port", "0", "--bind", "127.0.0.1", "--appendfsync", "always"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn shaledb server");
        let stderr = child.stderr.take().expect("piped stderr");
        let log = Arc::new(Mutex::new(String::new()));
        let (tx, rx) = mpsc::channel();
        let sink = log.clone();
        // Reads the log to the end (the pipe never fills), sending the port of the startup line.
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                if let Some(port) = startup_port(&line) {
                    let _ = tx.send(port);
                }
                let mut log = sink.lock().unwrap_or_else(|e| e.into_inner());
                if log.len() < 1 << 20 {
                    log.push_str(&line);
                    log.push('\n');
                }
            }
        });
        match rx.recv_timeout(Duration::from_secs(60)) {
            Ok(port) => Server { child, port, log },
            Err(_) => {
                let _ = child.kill();
                let status = child.wait();
                let log = log.lock().unwrap_or_else(|e| e.into_inner()).clone();
                panic!("shaledb server printed no startup line in 60 s (status {status:?}); log:\n{log}");
            }
        }
    }

    fn log(&self) -> String {
        self.log.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    fn kill9(&mut self) {
        // Child::kill is SIGKILL on Unix.
        self.child.kill().expect("SIGKILL the server");
        let status = self.child.wait().expect("wait for the killed server");
        assert!(!status.success(), "the server exited cleanly instead of being killed: {status:?}");
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// The port of `# shaledb server 0.1.0 on 127.0.0.1:PORT (dir ..., appendfsync ...)`.
fn startup_port(line: &str) -> Option<u16> {
    let rest = line.strip_prefix("# shaledb server ")?;
    let addr = rest.split(" on ").nth(1)?.split_whitespace().next()?;
    addr.rsplit_once(':')?.1.parse().ok()
}

// ---- the writers -------------------------------------------------------------------------------------------

/// Which of INCR and MSET the server has (probed once per round; SET and GET are required).
#[derive(Clone, Copy, Debug)]
struct Commands {
    incr: bool,
    mset: bool,
}

fn probe(port: u16, round: usize) -> Commands {
    let mut c = Client::connect(port).expect("connect to probe");
    let known = |r: &Reply| !matches!(r, Reply::Error(e) if e.starts_with("ERR unknown command"));
    let incr_key = format!("probe-{round}-ctr");
    let incr = c.call(&[b"INCR", incr_key.as_bytes()]).expect("INCR probe");
    if known(&incr) {
        assert_eq!(incr, Reply::Int(1), "INCR of a new key");
    }
    let (a, b) = (format!("probe-{round}-a"), format!("probe-{round}-b"));
    let mset = c.call(&[b"MSET", a.as_bytes(), b"1", b.as_bytes(), b"2"]).expect("MSET probe");
    if known(&mset) {
        assert_eq!(mset, Reply::Simple("OK".into()), "MSET");
    }
    Commands { incr: known(&incr), mset: known(&mset) }
}

/// What one writer thread leaves: its acknowledged writes, in order, and the one in flight at the kill.
struct Outcome {
    history: History,
    in_flight: Option<Write>,
    /// Every key the thread may have written.
    keys: Vec<Vec<u8>>,
}

fn put(key: &str, value: &str) -> Mutation {
    Mutation::Put { key: key.as_bytes().to_vec(), value: value.as_bytes().to_vec() }
}

fn writer(port: u16, round: usize, thread: usize, cmds: Commands, stop: &AtomicBool) -> Outcome {
    let mut history = History::new(shaledb_testkit::history::string_append());
    let mut keys = Vec::new();
    let mut client = Client::connect(port).expect("writer connects");
    let counter = format!("r{round}-c{thread}");
    let mut count: i64 = 0;
    for i in 0..MAX_WRITES_PER_THREAD {
        if stop.load(Ordering::Relaxed) {
            // The kill did not break the connection yet; nothing is in flight.
            return Outcome { history, in_flight: None, keys };
        }
        let (write, args): (Write, Vec<Vec<u8>>) = if cmds.incr && i % 5 == 4 {
            let next = count + 1;
            let w = Write { mutations: vec![put(&counter, &next.to_string())], sync: true, batch: false };
            (w, vec![b"INCR".to_vec(), counter.clone().into_bytes()])
        } else if cmds.mset && i % 7 == 6 {
            let (a, b) = (format!("r{round}-m{thread}-{i}-a"), format!("r{round}-m{thread}-{i}-b"));
            let (va, vb) = (format!("a{i}"), format!("b{i}"));
            let w = Write { mutations: vec![put(&a, &va), put(&b, &vb)], sync: true, batch: true };
            let args = [b"MSET".as_slice(), a.as_bytes(), va.as_bytes(), b.as_bytes(), vb.as_bytes()];
            (w, args.iter().map(|x| x.to_vec()).collect())
        } else {
            let (k, v) = (format!("r{round}-k{thread}-{i}"), format!("v{i}"));
            let w = Write { mutations: vec![put(&k, &v)], sync: true, batch: false };
            (w, vec![b"SET".to_vec(), k.into_bytes(), v.into_bytes()])
        };
        for m in &write.mutations {
            keys.push(m.key().to_vec());
        }
        let refs: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
        let reply = match client.call(&refs) {
            Ok(r) => r,
            // The server died under us: this write may or may not have reached the WAL.
            Err(_) => return Outcome { history, in_flight: Some(write), keys },
        };
        let expected = if args[0] == b"INCR" { Reply::Int(count + 1) } else { Reply::Simple("OK".into()) };
        assert_eq!(reply, expected, "thread {thread} write {i} ({:?})", String::from_utf8_lossy(&args[0]));
        if args[0] == b"INCR" {
            count += 1;
        }
        history.push(write);
    }
    panic!("thread {thread} made {MAX_WRITES_PER_THREAD} writes and the server was never killed");
}

/// Reads `keys` back with pipelined GETs into a model (absent keys stay absent).
fn read_back(port: u16, keys: &[Vec<u8>]) -> Model {
    let mut c = Client::connect(port).expect("connect to read back");
    let mut model = Model::new();
    for chunk in keys.chunks(512) {
        let commands: Vec<Vec<&[u8]>> = chunk.iter().map(|k| vec![b"GET".as_slice(), k.as_slice()]).collect();
        c.send(&commands).expect("send GETs");
        for k in chunk {
            match c.read_reply().expect("GET reply") {
                Reply::Bulk(Some(v)) => {
                    model.put(k, &v);
                }
                Reply::Bulk(None) => {}
                other => panic!("GET {:?} answered {other:?}", String::from_utf8_lossy(k)),
            }
        }
    }
    model
}

/// One thread's writes of one round, as verified after its kill.
struct Verified {
    round: usize,
    thread: usize,
    keys: Vec<Vec<u8>>,
    state: Model,
}

#[test]
fn kill9_under_appendfsync_always_loses_no_acknowledged_write() {
    let budget = shaledb_testkit::budget_from_env("SHALEDB_TORTURE_BUDGET", 1).max(1);
    let rounds = usize::try_from(5u64.saturating_mul(budget)).unwrap_or(usize::MAX);
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let seed = shaledb_testkit::seed_from_env(now);
    let mut rng = shaledb_testkit::rng(seed);
    let tmp = shaledb_testkit::tempdir();
    let dir = tmp.path().join("db");
    let mut verified: Vec<Verified> = Vec::new();
    let mut server = Server::start(&dir);
    let mut acked_total = 0usize;
    for round in 0..rounds {
        let started = Instant::now();
        let cmds = probe(server.port, round);
        if round == 0 && (!cmds.incr || !cmds.mset) {
            eprintln!("server_kill9: the server lacks {cmds:?}; those writes are left out");
        }
        let stop = Arc::new(AtomicBool::new(false));
        let handles: Vec<_> = (0..THREADS)
            .map(|t| {
                let stop = stop.clone();
                let port = server.port;
                std::thread::spawn(move || writer(port, round, t, cmds, &stop))
            })
            .collect();
        std::thread::sleep(Duration::from_millis(rng.gen_range(50..=500)));
        server.kill9();
        stop.store(true, Ordering::Relaxed);
        let killed_log = server.log();
        let outcomes: Vec<Outcome> =
            handles.into_iter().map(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e))).collect();

        server = Server::start(&dir);
        for (thread, o) in outcomes.into_iter().enumerate() {
            let acked = o.history.len();
            acked_total += acked;
            let mut candidates = o.history.clone();
            let hi = match o.in_flight {
                Some(w) => {
                    candidates.push(w);
                    acked + 1
                }
                None => acked,
            };
            let observed = read_back(server.port, &o.keys);
            // Under appendfsync always every acknowledged write is synced: lo = acked.
            if let Err(e) = candidates.check(&observed, acked, hi) {
                panic!(
                    "round {round} thread {thread} (seed {seed}): {e}\nlog of the killed server:\n{killed_log}\nlog \
                     after restart:\n{}",
                    server.log()
                );
            }
            verified.push(Verified { round, thread, keys: o.keys, state: observed });
        }
        // Earlier rounds' states survive this kill and restart too.
        for v in &verified {
            let again = read_back(server.port, &v.keys);
            assert!(
                again == v.state,
                "round {round}: the state of round {} thread {} changed after a later kill (seed {seed})",
                v.round,
                v.thread
            );
        }
        eprintln!(
            "server_kill9: round {round}: {} acknowledged writes checked, {:.1} s",
            acked_total,
            started.elapsed().as_secs_f64()
        );
        assert!(started.elapsed() < Duration::from_secs(300), "round {round} took over 5 minutes");
    }
    assert!(acked_total > 0, "no write was acknowledged in {rounds} rounds: the test checked nothing");
    server.kill9();
}

// ---- transactions and collections under kill -9 ----------------------------------------------------------------

/// A collection type the server may have: its write (one member per call), its size command (the size kept
/// in the collection's meta value), and a read of every member (a scan of the member records).
struct CollType {
    name: &'static str,
    write: fn(key: &str, i: u64) -> Vec<String>,
    size: &'static str,
    members: fn(key: &str) -> Vec<String>,
    /// Reply elements per member in `members` (2 for field/value replies).
    per_member: usize,
}

fn s(v: &[&str]) -> Vec<String> {
    v.iter().map(|x| x.to_string()).collect()
}

const COLL_TYPES: &[CollType] = &[
    CollType {
        name: "list",
        write: |k, i| s(&["RPUSH", k, &i.to_string()]),
        size: "LLEN",
        members: |k| s(&["LRANGE", k, "0", "-1"]),
        per_member: 1,
    },
    CollType {
        name: "set",
        write: |k, i| s(&["SADD", k, &i.to_string()]),
        size: "SCARD",
        members: |k| s(&["SMEMBERS", k]),
        per_member: 1,
    },
    CollType {
        name: "hash",
        write: |k, i| s(&["HSET", k, &format!("f{i}"), &i.to_string()]),
        size: "HLEN",
        members: |k| s(&["HGETALL", k]),
        per_member: 2,
    },
    CollType {
        name: "zset",
        write: |k, i| s(&["ZADD", k, &i.to_string(), &format!("m{i}")]),
        size: "ZCARD",
        members: |k| s(&["ZRANGE", k, "0", "-1"]),
        per_member: 1,
    },
    CollType {
        name: "stream",
        write: |k, i| s(&["XADD", k, &format!("{i}-1"), "f", &i.to_string()]),
        size: "XLEN",
        members: |k| s(&["XRANGE", k, "-", "+"]),
        per_member: 1,
    },
];

fn call_strs(c: &mut Client, args: &[String]) -> std::io::Result<Reply> {
    let refs: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
    c.call(&refs)
}

/// The collection types whose write command the server has (COMMAND INFO answers a nil for unknown ones).
fn coll_types(port: u16) -> Vec<&'static CollType> {
    let mut c = Client::connect(port).expect("connect to probe");
    COLL_TYPES
        .iter()
        .filter(|t| {
            let w = (t.write)("k", 1);
            matches!(
                call_strs(&mut c, &s(&["COMMAND", "INFO", &w[0]])),
                Ok(Reply::Array(Some(v))) if matches!(v.first(), Some(Reply::Array(Some(_))))
            )
        })
        .collect()
}

/// What one transaction writer leaves.
struct TxOutcome {
    /// Transactions acknowledged (EXEC answered): transaction i wrote the value i.
    acked: u64,
    /// A transaction was sent and not answered when the server died.
    tx_in_flight: bool,
    /// Per collection type: plain (non-transaction) writes acknowledged, and whether one was in flight.
    plain: Vec<(u64, bool)>,
}

fn tx_keys(round: usize, thread: usize) -> (String, String, String) {
    (format!("r{round}-t{thread}-a"), format!("r{round}-t{thread}-b"), format!("r{round}-t{thread}-n"))
}

fn coll_key(round: usize, thread: usize, typ: &str, plain: bool) -> String {
    format!("r{round}-t{thread}-{}{typ}", if plain { "p" } else { "x" })
}

fn tx_writer(port: u16, round: usize, thread: usize, types: &[&CollType], stop: &AtomicBool) -> TxOutcome {
    let mut c = Client::connect(port).expect("writer connects");
    let (ka, kb, kn) = tx_keys(round, thread);
    let mut out = TxOutcome { acked: 0, tx_in_flight: false, plain: vec![(0, false); types.len()] };
    for i in 1..=MAX_WRITES_PER_THREAD as u64 {
        if stop.load(Ordering::Relaxed) {
            return out;
        }
        // One transaction, pipelined: two strings, a counter, and one member of every collection type.
        let mut cmds: Vec<Vec<String>> = vec![s(&["MULTI"])];
        cmds.push(s(&["SET", &ka, &i.to_string()]));
        cmds.push(s(&["SET", &kb, &i.to_string()]));
        cmds.push(s(&["INCR", &kn]));
        for t in types {
            cmds.push((t.write)(&coll_key(round, thread, t.name, false), i));
        }
        cmds.push(s(&["EXEC"]));
        let queued = cmds.len() - 2;
        let refs: Vec<Vec<&[u8]>> = cmds.iter().map(|c| c.iter().map(|a| a.as_bytes()).collect()).collect();
        let mut replies = Vec::new();
        let sent = c.send(&refs).and_then(|()| {
            for _ in 0..cmds.len() {
                replies.push(c.read_reply()?);
            }
            Ok(())
        });
        if sent.is_err() {
            out.tx_in_flight = true;
            return out;
        }
        let exec = replies.last().cloned();
        match exec {
            Some(Reply::Array(Some(items))) if items.len() == queued => {
                assert!(
                    items.iter().all(|r| !matches!(r, Reply::Error(_))),
                    "thread {thread} transaction {i}: {items:?}"
                );
                assert_eq!(items[2], Reply::Int(i as i64), "the counter counts transactions");
            }
            other => panic!("thread {thread} transaction {i}: EXEC answered {other:?} (all replies {replies:?})"),
        }
        out.acked = i;
        // A plain collection write between transactions (types in turn).
        if !types.is_empty() {
            let ti = (i as usize) % types.len();
            let t = types[ti];
            let j = out.plain[ti].0 + 1;
            match call_strs(&mut c, &(t.write)(&coll_key(round, thread, t.name, true), j)) {
                Ok(Reply::Error(e)) => panic!("thread {thread} plain {} write {j}: {e}", t.name),
                Ok(_) => out.plain[ti].0 = j,
                Err(_) => {
                    out.plain[ti].1 = true;
                    return out;
                }
            }
        }
    }
    panic!("thread {thread} made {MAX_WRITES_PER_THREAD} transactions and the server was never killed");
}

fn get_int(c: &mut Client, key: &str) -> Option<u64> {
    match call_strs(c, &s(&["GET", key])).expect("GET") {
        Reply::Bulk(Some(v)) => Some(String::from_utf8_lossy(&v).parse().expect("an integer value")),
        Reply::Bulk(None) => None,
        other => panic!("GET {key}: {other:?}"),
    }
}

/// A collection's size as its meta value says and as its member records count; they must agree.
fn sizes(c: &mut Client, t: &CollType, key: &str) -> u64 {
    let size = match call_strs(c, &s(&[t.size, key])).expect("size") {
        Reply::Int(n) => n as u64,
        other => panic!("{} {key}: {other:?}", t.size),
    };
    let members = match call_strs(c, &(t.members)(key)).expect("members") {
        Reply::Array(Some(v)) => (v.len() / t.per_member) as u64,
        other => panic!("members of {key}: {other:?}"),
    };
    assert_eq!(size, members, "{} {key}: the size in its meta value differs from its member records", t.name);
    size
}

/// What a round left, checked again after every later restart: per thread, the transactions applied and the
/// plain collection sizes.
struct TxState {
    round: usize,
    thread: usize,
    applied: u64,
    plain: Vec<u64>,
}

fn check_tx_state(c: &mut Client, types: &[&CollType], round: usize, thread: usize) -> (u64, Vec<u64>) {
    let (ka, kb, kn) = tx_keys(round, thread);
    let n = get_int(c, &kn).unwrap_or(0);
    // Whole: both strings and every collection hold exactly the transactions the counter counts.
    let (a, b) = (get_int(c, &ka), get_int(c, &kb));
    let want = (n > 0).then_some(n);
    assert_eq!((a, b), (want, want), "round {round} thread {thread}: strings of a partial transaction (n = {n})");
    for t in types {
        let key = coll_key(round, thread, t.name, false);
        assert_eq!(sizes(c, t, &key), n, "round {round} thread {thread}: {key} of a partial transaction");
    }
    let plain = types.iter().map(|t| sizes(c, t, &coll_key(round, thread, t.name, true))).collect();
    (n, plain)
}

#[test]
fn kill9_keeps_every_acknowledged_transaction_whole_and_collection_sizes_exact() {
    let budget = shaledb_testkit::budget_from_env("SHALEDB_TORTURE_BUDGET", 1).max(1);
    let rounds = usize::try_from(3u64.saturating_mul(budget)).unwrap_or(usize::MAX);
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let seed = shaledb_testkit::seed_from_env(now);
    let mut rng = shaledb_testkit::rng(seed);
    let tmp = shaledb_testkit::tempdir();
    let dir = tmp.path().join("db");
    let mut server = Server::start(&dir);
    let types = coll_types(server.port);
    let names: Vec<&str> = types.iter().map(|t| t.name).collect();
    let missing: Vec<&str> = COLL_TYPES.iter().map(|t| t.name).filter(|n| !names.contains(n)).collect();
    eprintln!("server_kill9 transactions: collection types {names:?}; not in this server: {missing:?}");
    let mut states: Vec<TxState> = Vec::new();
    let mut acked_total = 0u64;
    for round in 0..rounds {
        let stop = Arc::new(AtomicBool::new(false));
        let handles: Vec<_> = (0..THREADS)
            .map(|t| {
                let stop = stop.clone();
                let port = server.port;
                let types: Vec<&'static CollType> = types.clone();
                std::thread::spawn(move || tx_writer(port, round, t, &types, &stop))
            })
            .collect();
        std::thread::sleep(Duration::from_millis(rng.gen_range(100..=500)));
        server.kill9();
        stop.store(true, Ordering::Relaxed);
        let outcomes: Vec<TxOutcome> =
            handles.into_iter().map(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e))).collect();
        server = Server::start(&dir);
        let mut c = Client::connect(server.port).expect("connect after restart");
        for (thread, o) in outcomes.iter().enumerate() {
            acked_total += o.acked;
            let (n, plain) = check_tx_state(&mut c, &types, round, thread);
            let hi = o.acked + o.tx_in_flight as u64;
            assert!(
                (o.acked..=hi).contains(&n),
                "round {round} thread {thread} (seed {seed}): {n} transactions applied, {} acknowledged, in flight: \
                 {}",
                o.acked,
                o.tx_in_flight
            );
            for (ti, (&size, &(acked, in_flight))) in plain.iter().zip(&o.plain).enumerate() {
                assert!(
                    (acked..=acked + in_flight as u64).contains(&size),
                    "round {round} thread {thread} (seed {seed}): plain {} has {size} members, {acked} writes \
                     acknowledged",
                    types[ti].name
                );
            }
            states.push(TxState { round, thread, applied: n, plain });
        }
        // Earlier rounds are unchanged by this kill and restart.
        for st in &states {
            let (n, plain) = check_tx_state(&mut c, &types, st.round, st.thread);
            assert_eq!(
                (n, &plain),
                (st.applied, &st.plain),
                "round {} thread {} changed after round {round}",
                st.round,
                st.thread
            );
        }
        eprintln!("server_kill9 transactions: round {round}: {acked_total} acknowledged transactions checked");
    }
    assert!(acked_total > 0, "no transaction was acknowledged in {rounds} rounds: the test checked nothing");
    server.kill9();
}
