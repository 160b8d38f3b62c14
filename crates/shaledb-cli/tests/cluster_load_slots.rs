//! The load tool against two replica groups that split the slots (issue 44): `shaledb cluster create` with six
//! `shaledb server --cluster-enabled yes` processes and `--replicas 2` makes two groups of three (slots 0-8191
//! and 8192-16383), and `shaledb bench resp --cluster` runs seed 001's write-uniform and read-random against
//! them, one request per batch and then 16. The tool reads `CLUSTER SLOTS` and sends each request to its
//! slot's master, so the run ends with no error and (nearly) no redirect; afterwards both leaders hold keys,
//! each key on the group that owns its slot with the tool's value, and their DBSIZEs add up to the keys found.
//! Reads see the writes: read-random finds about the share of the key space that was written. The read-range
//! workload (an ordered scan, which no group holds across slots) and `--multi` above 1 are refused, exit 2.

mod common;

use common::cluster::{is_master, query, start_answering, Resp};
use shaledb_bench::db_bench::keygen::make_key;
use shaledb_bench::resp::proto::{parse_reply, push_command, Reply};
use shaledb_bench::resp::workloads::value_for;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const KEYS: u64 = 4000;

/// Each group's slot range and leader port, from `CLUSTER SLOTS` of `port` (leader first), checked against ROLE.
fn groups(port: u16) -> Vec<(u16, u16, u16)> {
    let started = Instant::now();
    loop {
        let reply = query(port, &["CLUSTER", "SLOTS"]).expect("CLUSTER SLOTS");
        let g: Vec<(u16, u16, u16)> = reply
            .items()
            .iter()
            .filter_map(|r| {
                let f = r.items();
                let (a, b) = (f.first()?.int()?, f.get(1)?.int()?);
                let leader = f.get(2)?.items().get(1)?.int()?;
                Some((a as u16, b as u16, leader as u16))
            })
            .collect();
        if g.len() == 2 && g.iter().all(|&(_, _, p)| is_master(p)) {
            return g;
        }
        assert!(started.elapsed() < Duration::from_secs(30), "no two groups with leaders: {reply:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The integer reply of a command.
fn int(port: u16, args: &[&str]) -> i64 {
    match query(port, args) {
        Some(Resp::Int(n)) => n,
        other => panic!("{args:?} on {port}: {other:?}"),
    }
}

/// Binary-safe GETs of `keys` on the leader at `port`: each key number with its value, if present.
fn read_keys(port: u16, keys: &[u64]) -> Vec<(u64, Option<Vec<u8>>)> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut req = Vec::new();
    let mut key = Vec::new();
    for &k in keys {
        make_key(k, 16, &mut key);
        push_command(&mut req, &[b"GET", &key]);
    }
    s.write_all(&req).unwrap();
    let (mut buf, mut chunk, mut out) = (Vec::new(), [0u8; 65536], Vec::new());
    while out.len() < keys.len() {
        while let Some((r, n)) = parse_reply(&buf).unwrap() {
            let k = keys[out.len()];
            out.push((
                k,
                match r {
                    Reply::Bulk(b) => Some(b.to_vec()),
                    Reply::Null => None,
                    other => panic!("GET of key {k} on {port}: {other:?}"),
                },
            ));
            buf.drain(..n);
        }
        if out.len() == keys.len() {
            break;
        }
        let n = s.read(&mut chunk).unwrap();
        assert!(n > 0, "node {port} closed the connection");
        buf.extend_from_slice(&chunk[..n]);
    }
    out
}

/// Runs `shaledb bench resp --cluster ...` against `port` (at most two minutes): exit code, stdout, stderr.
fn bench(port: u16, extra: &[&str]) -> (Option<i32>, String, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_shaledb"))
        .args(["bench", "resp", "--cluster", "--port", &port.to_string(), "--stats-interval-seconds", "0"])
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("shaledb bench resp");
    let started = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if started.elapsed() > Duration::from_secs(120) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the load tool did not finish within 120 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let (mut out, mut err) = (String::new(), String::new());
    child.stdout.take().unwrap().read_to_string(&mut out).unwrap();
    child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    (status.code(), out, err)
}

#[test]
fn bench_resp_cluster_routes_by_slot_over_two_groups() {
    let tmp = tempfile::tempdir().unwrap();
    let (nodes, addrs) = start_answering(tmp.path(), 6);
    let a: Vec<&str> = addrs.iter().map(String::as_str).collect();
    let mut create = vec!["cluster", "create"];
    create.extend(&a);
    create.extend(["--replicas", "2", "--timeout", "30"]);
    common::ok(&create);
    let g = groups(nodes[0].port);
    assert_eq!((g[0].0, g[0].1, g[1].0, g[1].1), (0, 8191, 8192, 16383), "{g:?}");
    // The key numbers each group owns.
    let mut key = Vec::new();
    let owned: Vec<Vec<u64>> = g
        .iter()
        .map(|&(lo, hi, _)| {
            (0..KEYS)
                .filter(|&k| {
                    make_key(k, 16, &mut key);
                    (lo..=hi).contains(&shaledb_server::cluster::key_slot(&key))
                })
                .collect()
        })
        .collect();
    // A follower of group 1 is the address given: the tool still routes from its CLUSTER SLOTS.
    let given = nodes.iter().map(|n| n.port).find(|&p| p != g[0].2 && p != g[1].2).unwrap();

    for (seed, pipeline) in [(1u64, "1"), (2, "16")] {
        let json = tmp.path().join(format!("run{seed}.json"));
        let (code, out, err) = bench(
            given,
            &[
                "--benchmarks",
                "write-uniform,read-random",
                "-c",
                "8",
                "-P",
                pipeline,
                "--num",
                &KEYS.to_string(),
                "--keys",
                &KEYS.to_string(),
                "--seed",
                &seed.to_string(),
                "--json",
                json.to_str().unwrap(),
            ],
        );
        println!("-P {pipeline}:\n{out}{err}");
        assert_eq!(code, Some(0), "{out}\n{err}");
        assert!(out.contains("Cluster:    2 master(s)"), "{out}");
        let doc: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        for w in doc["workloads"].as_array().unwrap() {
            let (requests, redirected) = (w["requests"].as_u64().unwrap(), w["redirected"].as_u64().unwrap());
            assert_eq!(w["errors"], 0, "{out}");
            assert_eq!(requests, KEYS, "{out}");
            // A redirect only if a group elects a new leader during the run.
            assert!(redirected <= KEYS / 100, "{redirected} redirects: {out}");
            assert_eq!(w["ops"].as_u64().unwrap() + redirected, requests, "{out}");
        }

        // Each key on its slot's group, with the value of one of the runs so far; the leaders' DBSIZEs add up.
        let mut present = 0;
        let mut this_run = 0;
        let (mut want1, mut want2) = (Vec::new(), Vec::new());
        for (i, &(_, _, leader)) in g.iter().enumerate() {
            let size = int(leader, &["DBSIZE"]);
            assert!(size > 0, "group {} holds no key after -P {pipeline}", i + 1);
            let mut here = 0;
            for (k, v) in read_keys(leader, &owned[i]) {
                let Some(v) = v else { continue };
                value_for(k, 1, 32, 0.5, &mut want1);
                value_for(k, 2, 32, 0.5, &mut want2);
                assert!(v == want1 || (seed == 2 && v == want2), "key {k} on group {}: {v:?}", i + 1);
                here += 1;
                let mine = if seed == 1 { &want1 } else { &want2 };
                this_run += u64::from(&v == mine);
            }
            assert_eq!(size, here, "group {}: DBSIZE against the keys it holds", i + 1);
            present += here;
            println!("-P {pipeline}: group {} (leader {leader}) holds {here} keys", i + 1);
        }
        // 4000 uniform writes over 4000 keys write about 63% of them.
        assert!((2200..=2850).contains(&this_run), "{this_run} keys hold this run's value");
        let read = &doc["workloads"][1];
        let (reads, found) = (read["reads"].as_u64().unwrap(), read["found"].as_u64().unwrap());
        let expect = present as f64 / KEYS as f64;
        let got = found as f64 / reads.max(1) as f64;
        assert!((got - expect).abs() < 0.06, "read-random found {found} of {reads}; {present} of {KEYS} keys exist");
    }

    // What cannot be routed by slot is refused before anything runs.
    let (code, out, err) = bench(given, &["--benchmarks", "write-seq,read-range", "--num", "10"]);
    assert_eq!(code, Some(2), "{out}\n{err}");
    assert!(err.contains("read-range") && err.contains("2 masters"), "{err}");
    assert!(!out.contains("write-seq"), "{out}");
    let (code, out, err) = bench(given, &["--benchmarks", "write-seq", "--multi", "4", "--num", "10"]);
    assert_eq!(code, Some(2), "{out}\n{err}");
    assert!(err.contains("--multi") && err.contains("CROSSSLOT"), "{err}");
}
