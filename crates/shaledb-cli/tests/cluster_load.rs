//! The load tool against a replica group while its leader is killed (issue 43): `shaledb bench resp --cluster`
//! writes db_bench-style keys through three `shaledb server --cluster-enabled yes` processes; the leader is
//! killed with SIGKILL twice during the run (and restarted). The tool follows `-MOVED` and lost connections to
//! the new leader and ends without error, counting the requests cut off as redirected; then every node holds
//! the tool's value, or nothing, under each key it could have written, and at least as many keys as the tool
//! saw acknowledged. (The tool reports counts, not which request was acknowledged: the per-write check of
//! acknowledged writes is `cluster_faults` in the server's tests, with writers per type and redis-py.)

mod common;

use common::cluster::{cmd, start_answering, start_on, Node};
use shaledb_bench::db_bench::keygen::make_key;
use shaledb_bench::resp::proto::{parse_reply, push_command, Reply};
use shaledb_bench::resp::workloads::value_for;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const KEYS: u64 = 4000;

fn leader(nodes: &[Node]) -> usize {
    let started = Instant::now();
    loop {
        // A master's ROLE is an array of 3, a replica's of 5.
        if let Some(i) = nodes.iter().position(|n| cmd(n.port, &["ROLE"]).is_some_and(|r| r == "*3")) {
            return i;
        }
        assert!(started.elapsed() < Duration::from_secs(30), "no leader within 30 s");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Binary-safe GETs on a node after READONLY: for each key number, the value or `None`.
fn read_all(port: u16) -> Vec<Option<Vec<u8>>> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut req = Vec::new();
    push_command(&mut req, &[b"READONLY"]);
    let mut key = Vec::new();
    for k in 0..KEYS {
        make_key(k, 16, &mut key);
        push_command(&mut req, &[b"GET", &key]);
    }
    s.write_all(&req).unwrap();
    let mut buf = Vec::new();
    let mut chunk = [0u8; 65536];
    let mut out = Vec::new();
    let mut first = true;
    while out.len() < KEYS as usize {
        while let Some((r, n)) = parse_reply(&buf).unwrap() {
            let v = match r {
                Reply::Simple(b"OK") if first => None,
                Reply::Bulk(b) => Some(Some(b.to_vec())),
                Reply::Null => Some(None),
                other => panic!("node {port}: {other:?}"),
            };
            first = false;
            buf.drain(..n);
            out.extend(v);
        }
        if out.len() == KEYS as usize {
            break;
        }
        let n = s.read(&mut chunk).unwrap();
        assert!(n > 0, "node {port} closed the connection");
        buf.extend_from_slice(&chunk[..n]);
    }
    out
}

#[test]
fn bench_resp_cluster_follows_the_group_through_leader_kills() {
    let tmp = tempfile::tempdir().unwrap();
    let (mut nodes, addrs) = start_answering(tmp.path(), 3);
    let a: Vec<&str> = addrs.iter().map(String::as_str).collect();
    common::ok(&["cluster", "create", a[0], a[1], a[2], "--replicas", "2", "--timeout", "30"]);
    let first = leader(&nodes);
    let json = tmp.path().join("run.json");
    // 4000 writes at 500 a second: about 8 s of writing, plus the two failovers.
    let mut bench = Command::new(env!("CARGO_BIN_EXE_shaledb"))
        .args(["bench", "resp", "--cluster", "--port", &nodes[(first + 1) % 3].port.to_string()])
        .args(["--benchmarks", "write-seq", "--num", &KEYS.to_string(), "--keys", &KEYS.to_string()])
        .args(["-c", "4", "--rate", "500", "--stats-interval-seconds", "0", "--json"])
        .arg(&json)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("shaledb bench resp");
    for round in 0..2 {
        std::thread::sleep(Duration::from_millis(1500));
        let l = leader(&nodes);
        let (dir, port, bus) = (tmp.path().join(format!("n{l}")), nodes[l].port, nodes[l].bus);
        nodes[l].child.kill().unwrap();
        nodes[l].child.wait().unwrap();
        let killed = Instant::now();
        let new = leader(&nodes);
        println!("round {round}: killed node {l}, node {new} leads {:?} later", killed.elapsed());
        nodes[l] = start_on(&dir, port, bus);
    }
    let started = Instant::now();
    let status = loop {
        if let Some(s) = bench.try_wait().unwrap() {
            break s;
        }
        assert!(started.elapsed() < Duration::from_secs(120), "the load tool did not finish");
        std::thread::sleep(Duration::from_millis(100));
    };
    let mut out = String::new();
    bench.stdout.take().unwrap().read_to_string(&mut out).unwrap();
    let mut err = String::new();
    bench.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    assert!(status.success(), "{out}\n{err}");
    let doc: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let w = &doc["workloads"][0];
    let (acked, requests, redirected) =
        (w["ops"].as_u64().unwrap(), w["requests"].as_u64().unwrap(), w["redirected"].as_u64().unwrap());
    println!("{out}");
    assert_eq!(w["errors"], 0, "{out}");
    assert_eq!(requests, KEYS, "{out}");
    assert!(redirected > 0, "two leader kills cut off no request: {out}");
    assert_eq!(acked + redirected, requests, "{out}");
    assert!(out.contains("redirected or cut off by a failover"), "{out}");

    // Every node, once it holds the last write: the tool's value or nothing under each key, and at least as
    // many keys as were acknowledged.
    let l = leader(&nodes);
    let mut want = Vec::new();
    let views: Vec<Vec<Option<Vec<u8>>>> = nodes
        .iter()
        .enumerate()
        .map(|(i, n)| {
            let started = Instant::now();
            loop {
                let view = read_all(n.port);
                let leaders = read_all(nodes[l].port);
                if i == l || view == leaders {
                    return view;
                }
                assert!(started.elapsed() < Duration::from_secs(30), "node {i} did not catch up");
                std::thread::sleep(Duration::from_millis(200));
            }
        })
        .collect();
    for (i, view) in views.iter().enumerate() {
        let mut present = 0;
        for (k, v) in view.iter().enumerate() {
            if let Some(v) = v {
                value_for(k as u64, 1, 32, 0.5, &mut want);
                assert_eq!(v, &want, "node {i}, key {k}");
                present += 1;
            }
        }
        assert!(present >= acked, "node {i} holds {present} keys, {acked} were acknowledged");
        println!("node {i}: {present} keys present, {acked} acknowledged, {redirected} of unknown outcome");
    }
}
