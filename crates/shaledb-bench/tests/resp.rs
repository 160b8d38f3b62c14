//! `shaledb bench resp` against real servers on loopback: an in-process ShaleDB server (port 0), a scripted
//! fake server for error paths, and redis-server when it is installed (a printed skip otherwise). Every run
//! is bounded: a few hundred requests.

use shaledb_bench::db_bench::keygen::make_key;
use shaledb_bench::resp::proto::{parse_reply, push_command, Reply};
use shaledb_bench::resp::workloads::{value_for, Hotspot, Plan};
use shaledb_bench::resp::{run_resp, RespError, RespFlags, RespRun, Workload};
use shaledb_bench::BenchError;
use shaledb_server::{Config, RunningServer};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A reply owned by the test.
#[derive(Debug, PartialEq)]
enum Val {
    Ok,
    Nil,
    Bulk(Vec<u8>),
    Err(String),
    Other(String),
}

/// A blocking connection for checking what the load tool wrote.
struct Probe {
    s: TcpStream,
    buf: Vec<u8>,
}

impl Probe {
    fn new(addr: SocketAddr) -> Probe {
        let s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        Probe { s, buf: Vec::new() }
    }

    fn cmd(&mut self, args: &[&[u8]]) -> Val {
        let mut req = Vec::new();
        push_command(&mut req, args);
        self.s.write_all(&req).unwrap();
        loop {
            if let Some((r, n)) = parse_reply(&self.buf).unwrap() {
                let v = match r {
                    Reply::Simple(b"OK") => Val::Ok,
                    Reply::Null => Val::Nil,
                    Reply::Bulk(b) => Val::Bulk(b.to_vec()),
                    Reply::Error(e) => Val::Err(String::from_utf8_lossy(e).into_owned()),
                    other => Val::Other(format!("{other:?}")),
                };
                self.buf.drain(..n);
                return v;
            }
            let mut chunk = [0u8; 65536];
            let n = self.s.read(&mut chunk).unwrap();
            assert!(n > 0, "server closed");
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }

    /// The value of key number `k`.
    fn get(&mut self, k: u64) -> Val {
        let mut key = Vec::new();
        make_key(k, 16, &mut key);
        self.cmd(&[b"GET", &key])
    }
}

fn expected(k: u64, seed: u64) -> Val {
    let mut v = Vec::new();
    value_for(k, seed, 32, 0.5, &mut v);
    Val::Bulk(v)
}

fn shaledb() -> (RunningServer, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let server = RunningServer::start(Config { port: 0, dir: dir.path().join("db"), ..Config::default() }).unwrap();
    (server, dir)
}

fn flags(addr: SocketAddr, benchmarks: &str) -> RespFlags {
    RespFlags {
        host: addr.ip().to_string(),
        port: addr.port(),
        benchmarks: benchmarks.into(),
        num: 300,
        keys: 300,
        concurrency: 8,
        stats_interval_seconds: 0,
        ..RespFlags::default()
    }
}

fn run(f: &RespFlags) -> (RespRun, String) {
    let mut out = Vec::new();
    let r = run_resp(f, &mut out).unwrap_or_else(|e| panic!("{e}"));
    (r, String::from_utf8(out).unwrap())
}

fn server_knows(addr: SocketAddr, args: &[&[u8]]) -> bool {
    !matches!(Probe::new(addr).cmd(args), Val::Err(e) if e.starts_with("ERR unknown command"))
}

#[test]
fn write_seq_writes_every_key_with_its_value_then_reads_find_them() {
    let (server, _dir) = shaledb();
    let addr = server.addr();
    let f = RespFlags { pipeline: 4, threads: 2, seed: 7, ..flags(addr, "write-seq,read-random") };
    let (r, out) = run(&f);
    assert!(r.failure().is_none(), "{out}");
    let w = &r.results[0];
    assert_eq!((w.bench.name.as_str(), w.bench.ops, w.requests, w.errors), ("write-seq", 300, 300, 0));
    assert_eq!(w.bench.bytes, 300 * 48);
    assert!(w.bench.latency.count == 300 && w.bench.latency.p50 > 0.0);
    let rd = &r.results[1];
    assert_eq!((rd.bench.reads, rd.bench.found), (300, 300), "{out}");
    assert!(out.contains("read-random  :") && out.contains("(300 of 300 found)"), "{out}");
    assert!(out.contains("write-seq    : latency us p50 "), "{out}");
    let mut p = Probe::new(addr);
    for k in 0..300 {
        assert_eq!(p.get(k), expected(k, 7), "key {k}");
    }
    assert_eq!(p.get(300), Val::Nil, "nothing past the last request's keys");
}

#[test]
fn uniform_and_hotspot_writes_land_on_their_keys() {
    let (server, _dir) = shaledb();
    let addr = server.addr();
    // 1000 uniform writes over 40 keys: every key is written (a miss has odds below 1e-7).
    let (r, out) = run(&RespFlags { num: 1000, keys: 40, ..flags(addr, "write-uniform") });
    assert!(r.failure().is_none(), "{out}");
    let mut p = Probe::new(addr);
    for k in 0..40 {
        assert_eq!(p.get(k), expected(k, 1), "key {k}");
    }
    assert_eq!(p.get(40), Val::Nil);
    // Every hotspot write goes to one of 4 hot keys.
    let f = RespFlags { hotspot: "1:4".into(), seed: 3, ..flags(addr, "write-hotspot") };
    let (r, out) = run(&f);
    assert!(r.failure().is_none(), "{out}");
    assert_eq!(r.results[0].bench.ops, 300);
    let plan = Plan::new(Workload::WriteHotspot, &f, Some(Hotspot::parse("1:4").unwrap()));
    assert_eq!(plan.hot.len(), 4);
    for &k in &plan.hot {
        assert_eq!(p.get(k), expected(k, 3), "hot key {k}");
    }
}

#[test]
fn multi_writes_use_mset_and_reads_mget() {
    let (server, _dir) = shaledb();
    let addr = server.addr();
    assert!(server_knows(addr, &[b"MSET", b"k", b"v"]) && server_knows(addr, &[b"MGET", b"k"]));
    let f = RespFlags { multi: 5, num: 100, keys: 500, ..flags(addr, "write-seq,read-random") };
    let (r, out) = run(&f);
    assert!(r.failure().is_none(), "{out}");
    assert_eq!((r.results[0].bench.ops, r.results[0].requests), (500, 100));
    assert_eq!((r.results[1].bench.reads, r.results[1].bench.found), (500, 500));
    let mut p = Probe::new(addr);
    for k in [0, 1, 4, 5, 250, 499] {
        assert_eq!(p.get(k), expected(k, 1));
    }
}

#[test]
fn range_reads_return_ordered_pairs_or_are_not_applicable() {
    let (server, _dir) = shaledb();
    let addr = server.addr();
    let f = RespFlags { keys: 600, num: 600, scanners: 4, scan_len: 32, ..flags(addr, "write-seq,read-range") };
    let (w, out) = run(&RespFlags { benchmarks: "write-seq".into(), ..f.clone() });
    assert!(w.failure().is_none(), "{out}");
    let (r, out) = run(&RespFlags { num: 40, benchmarks: "read-range".into(), ..f.clone() });
    assert!(r.failure().is_none(), "{out}");
    let range = &r.results[0];
    assert_eq!(range.status, "ok", "{out}");
    // 600 keys written, every range starts at most 600-32 so it returns 32 pairs.
    assert_eq!(range.requests, 40);
    assert_eq!(range.bench.ops, 40 * 32, "{out}");
}

#[test]
fn password_is_sent_and_a_wrong_one_is_a_connect_error() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = Config { port: 0, dir: dir.path().join("db"), requirepass: Some("sesame".into()), ..Config::default() };
    let server = RunningServer::start(cfg).unwrap();
    let f = RespFlags { password: Some("sesame".into()), num: 50, ..flags(server.addr(), "write-seq") };
    let (r, out) = run(&f);
    assert!(r.failure().is_none(), "{out}");
    assert_eq!(r.results[0].bench.ops, 50);
    let bad = RespFlags { password: Some("nope".into()), ..f.clone() };
    match run_resp(&bad, &mut Vec::new()) {
        Err(RespError::Connect { cause, .. }) => assert!(cause.to_string().starts_with("AUTH: "), "{cause}"),
        other => panic!("{other:?}"),
    }
    let none = RespFlags { password: None, ..f };
    let (r, _) = run(&none);
    let e = r.failure().expect("writes without AUTH fail").to_string();
    assert!(e.contains("NOAUTH"), "{e}");
}

#[test]
fn bad_flags_are_refused_before_connecting() {
    let addr: SocketAddr = "127.0.0.1:1".parse().unwrap();
    for (f, flag) in [
        (RespFlags { concurrency: 0, ..flags(addr, "write-seq") }, "concurrency"),
        (RespFlags { concurrency: 1000, ..flags(addr, "write-seq") }, "concurrency"),
        (RespFlags { host: "192.0.2.1".into(), ..flags(addr, "write-seq") }, "host"),
        (RespFlags { hotspot: "2:5".into(), ..flags(addr, "write-hotspot") }, "hotspot"),
        (RespFlags { ..flags(addr, "write-everything") }, "benchmarks"),
    ] {
        match run_resp(&f, &mut Vec::new()) {
            Err(RespError::Bench(BenchError::BadFlag { flag: got, .. })) => assert_eq!(got, flag),
            other => panic!("{flag}: {other:?}"),
        }
    }
    // A port nobody listens on: a clear connect error, no hang.
    match run_resp(&flags(addr, "write-seq"), &mut Vec::new()) {
        Err(RespError::Connect { addr: a, .. }) => assert_eq!(a, addr),
        other => panic!("{other:?}"),
    }
}

/// A server answering each request with `answer(request number, command name)`; stops after `limit`
/// connections.
fn fake_server(limit: usize, answer: fn(u64, &[u8]) -> Vec<u8>) -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        let counter = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        for s in l.incoming().take(limit) {
            let Ok(mut s) = s else { return };
            let counter = counter.clone();
            std::thread::spawn(move || {
                let _ = s.set_read_timeout(Some(Duration::from_secs(20)));
                let mut buf = Vec::new();
                let mut chunk = [0u8; 65536];
                loop {
                    let mut out = Vec::new();
                    // Requests are arrays of bulk strings, which the reply parser reads as well.
                    while let Ok(Some((req, n))) = parse_reply(&buf) {
                        let name = match req {
                            Reply::Array(a) => match a.first() {
                                Some(Reply::Bulk(b)) => b.to_vec(),
                                _ => Vec::new(),
                            },
                            _ => Vec::new(),
                        };
                        let i = counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        out.extend_from_slice(&answer(i, &name));
                        buf.drain(..n);
                    }
                    if !out.is_empty() && s.write_all(&out).is_err() {
                        return;
                    }
                    match s.read(&mut chunk) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => buf.extend_from_slice(&chunk[..n]),
                    }
                }
            });
        }
    });
    addr
}

#[test]
fn error_replies_are_counted_and_fail_the_run() {
    let addr =
        fake_server(8, |i, _| if i % 10 == 9 { b"-ERR injected failure\r\n".to_vec() } else { b"+OK\r\n".to_vec() });
    let (r, out) = run(&RespFlags { num: 200, concurrency: 4, pipeline: 3, ..flags(addr, "write-uniform") });
    let w = &r.results[0];
    assert_eq!(w.requests, 200);
    assert_eq!(w.errors, 20, "{out}");
    assert_eq!(w.bench.ops, 180);
    assert_eq!(w.first_error.as_deref(), Some("ERR injected failure"));
    assert!(out.contains("first error: ERR injected failure"), "{out}");
    let e = r.failure().unwrap().to_string();
    assert_eq!(e, "20 request(s) failed; first error (write-uniform): ERR injected failure");
}

#[test]
fn a_wait_after_each_write_is_a_second_reply_and_must_count_the_replicas() {
    // WAIT answers 1 replica: every write is done at its WAIT's reply, pipelined or not.
    let addr = fake_server(8, |_, name| if name == b"WAIT" { b":1\r\n".to_vec() } else { b"+OK\r\n".to_vec() });
    for pipeline in [1, 3] {
        let f = RespFlags { num: 90, concurrency: 3, pipeline, wait_replicas: 1, ..flags(addr, "write-uniform") };
        let (r, out) = run(&f);
        assert!(r.failure().is_none(), "{out}");
        let w = &r.results[0];
        assert_eq!((w.requests, w.errors, w.bench.ops, w.bench.latency.count), (90, 0, 90, 90), "{out}");
        assert!(out.contains("Wait:       WAIT 1 0 after each write"), "{out}");
    }
    // Fewer replicas than asked for (WAIT timed out) fails the request; so does a failed write before it.
    let addr = fake_server(8, |_, name| if name == b"WAIT" { b":0\r\n".to_vec() } else { b"+OK\r\n".to_vec() });
    let f = RespFlags { num: 40, concurrency: 2, wait_replicas: 2, wait_timeout: 50, ..flags(addr, "write-seq") };
    let (r, out) = run(&f);
    let w = &r.results[0];
    assert_eq!((w.requests, w.errors, w.bench.latency.count), (40, 40, 0), "{out}");
    assert_eq!(w.first_error.as_deref(), Some("WAIT counted 0 replicas of the 2 asked for (timed out)"), "{out}");
    let addr =
        fake_server(8, |_, name| if name == b"WAIT" { b":2\r\n".to_vec() } else { b"-ERR injected\r\n".to_vec() });
    let (r, out) = run(&RespFlags { port: addr.port(), ..f });
    let w = &r.results[0];
    assert_eq!((w.requests, w.errors, w.bench.latency.count), (40, 40, 0), "{out}");
    assert_eq!(w.first_error.as_deref(), Some("ERR injected"), "{out}");
    // Reads get no WAIT.
    let addr = fake_server(8, |_, name| if name == b"GET" { b"$-1\r\n".to_vec() } else { b"+OK\r\n".to_vec() });
    let f = RespFlags { num: 20, concurrency: 2, wait_replicas: 1, ..flags(addr, "read-random") };
    assert!(f.validate().unwrap_err().to_string().contains("no write workload"));
    let (r, out) = run(&RespFlags { benchmarks: "write-seq,read-random".into(), ..f });
    assert!(r.failure().is_some(), "the fake answers WAIT with +OK: {out}");
    assert_eq!(r.results[1].errors, 0, "{out}");
}

#[test]
fn wrong_replies_and_broken_connections_are_errors() {
    // A GET answered with an integer: the wrong shape.
    let addr = fake_server(2, |_, _| b":5\r\n".to_vec());
    let (r, _) = run(&RespFlags { num: 10, concurrency: 2, ..flags(addr, "read-random") });
    assert_eq!(r.results[0].errors, 10);
    assert!(r.results[0].first_error.as_deref().unwrap().starts_with("unexpected reply to read-random"));
    // Garbage: the connection is given up, its requests counted as failed, the run still ends.
    let addr = fake_server(2, |_, _| b"?garbage\r\n".to_vec());
    let (r, _) = run(&RespFlags { num: 10, concurrency: 2, ..flags(addr, "write-seq") });
    assert!(r.results[0].errors >= 2, "{:?}", r.results[0]);
    assert!(r.results[0].first_error.as_deref().unwrap().starts_with("protocol error: unknown reply type"));
}

#[test]
fn range_against_a_server_without_the_command_is_not_applicable() {
    let addr = fake_server(64, |_, name| {
        if name == b"SHALEDB.RANGE" {
            b"-ERR unknown command 'SHALEDB.RANGE', with args beginning with: \r\n".to_vec()
        } else {
            b"+OK\r\n".to_vec()
        }
    });
    let (r, out) = run(&flags(addr, "read-range,write-seq"));
    assert!(r.failure().is_none(), "{out}");
    assert_eq!(r.results[0].status, "n/a");
    assert_eq!(r.results[0].errors, 0);
    assert_eq!(r.results[1].status, "ok");
    assert_eq!(r.results[1].bench.ops, 300);
}

#[test]
fn fixed_rate_paces_requests_and_duration_bounds_the_run() {
    let addr = fake_server(64, |_, _| b"+OK\r\n".to_vec());
    let t = Instant::now();
    let (r, out) = run(&RespFlags { num: 200, rate: 1000.0, ..flags(addr, "write-uniform") });
    // 200 keys at 1000/s: the last is due at 0.199 s.
    assert!(t.elapsed() >= Duration::from_millis(190), "{:?}", t.elapsed());
    assert_eq!(r.results[0].bench.ops, 200, "{out}");
    assert!(out.contains("Rate:       1000 keys/second"), "{out}");
    let t = Instant::now();
    let (r, _) = run(&RespFlags { num: 0, duration: 1, ..flags(addr, "write-seq") });
    assert!(t.elapsed() >= Duration::from_millis(900) && t.elapsed() < Duration::from_secs(10));
    assert!(r.results[0].bench.ops > 0);
    assert!(r.results[0].bench.timeline.len() >= 5);
}

#[test]
fn json_and_plots_are_written() {
    let addr = fake_server(64, |_, _| b"+OK\r\n".to_vec());
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let plots = dir.path().join("plots");
    let f =
        RespFlags { json: Some(json.clone()), plot_dir: Some(plots.clone()), ..flags(addr, "write-seq,write-uniform") };
    run(&f);
    let doc: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(doc["tool"], "shaledb bench resp");
    assert_eq!(doc["workloads"][1]["name"], "write-uniform");
    assert_eq!(doc["workloads"][1]["ops"], 300);
    assert_eq!(doc["workloads"][1]["status"], "ok");
    assert!(doc["workloads"][0]["latency"]["p99"].as_f64().unwrap() > 0.0);
    assert!(doc["flags"].get("password").is_none());
    for name in ["01-write-seq.svg", "01-write-seq.png", "02-write-uniform.svg"] {
        assert!(plots.join(name).is_file(), "{name}");
    }
}

struct Redis {
    child: Child,
    port: u16,
    _dir: tempfile::TempDir,
}

impl Drop for Redis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn redis() -> Option<Redis> {
    redis_with(&[])
}

fn redis_with(extra: &[&str]) -> Option<Redis> {
    let dir = tempfile::tempdir().unwrap();
    let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let child = Command::new("redis-server")
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
        .args(extra)
        .arg("--dir")
        .arg(dir.path())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let r = Redis { child, port, _dir: dir };
    let t = Instant::now();
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(t.elapsed() < Duration::from_secs(10), "redis-server did not start on port {port}");
        std::thread::sleep(Duration::from_millis(20));
    }
    Some(r)
}

#[test]
fn against_redis_server() {
    let Some(r) = redis() else {
        println!("skip: redis-server is not installed");
        return;
    };
    let addr: SocketAddr = ([127, 0, 0, 1], r.port).into();
    let f = RespFlags { keys: 50, num: 1000, ..flags(addr, "write-uniform,read-random,read-range") };
    let (res, out) = run(&f);
    assert!(res.failure().is_none(), "{out}");
    assert_eq!(res.results[0].bench.ops, 1000);
    assert_eq!(res.results[1].bench.found, 1000, "every key of 50 was written by 1000 uniform writes: {out}");
    assert_eq!(res.results[2].status, "n/a", "{out}");
    let mut p = Probe::new(addr);
    for k in 0..50 {
        assert_eq!(p.get(k), expected(k, 1));
    }
    // MSET / MGET with the real thing.
    let (res, out) = run(&RespFlags { multi: 4, num: 50, keys: 200, ..flags(addr, "write-seq,read-random") });
    assert!(res.failure().is_none(), "{out}");
    assert_eq!(res.results[0].bench.ops, 200);
    assert_eq!(res.results[1].bench.found, 50 * 4);
    assert_eq!(p.get(199), expected(199, 1));
}

#[test]
fn wait_after_each_write_against_redis_with_a_replica() {
    let Some(primary) = redis() else {
        println!("skip: redis-server is not installed");
        return;
    };
    let replica = redis_with(&["--replicaof", "127.0.0.1", &primary.port.to_string()]).expect("a second redis-server");
    let addr: SocketAddr = ([127, 0, 0, 1], primary.port).into();
    let t = Instant::now();
    while !matches!(Probe::new(addr).cmd(&[b"INFO", b"replication"]), Val::Bulk(b) if String::from_utf8_lossy(&b).contains("connected_slaves:1"))
    {
        assert!(t.elapsed() < Duration::from_secs(20), "the replica did not connect");
        std::thread::sleep(Duration::from_millis(50));
    }
    let f = RespFlags { num: 300, pipeline: 2, wait_replicas: 1, ..flags(addr, "write-seq") };
    let (res, out) = run(&f);
    assert!(res.failure().is_none(), "{out}");
    assert_eq!(res.results[0].bench.ops, 300);
    // Every write was acknowledged by the replica before its request was done.
    let mut p = Probe::new(([127, 0, 0, 1], replica.port).into());
    for k in [0, 150, 299] {
        assert_eq!(p.get(k), expected(k, 1), "key {k} on the replica");
    }
}
