//! `shaledb cluster import` (issue 44): a standalone server's keys copied into a cluster of two groups, with
//! the real binary on 127.0.0.1. A cluster member stores its keys slot first, so a standalone directory is not
//! opened as a member (the refusal names this command); the import is how its keys get into a cluster.
//! Checked: every key of every type reads back the same from the cluster (value and absolute expiry), each
//! group's CLUSTER COUNTKEYSINSLOT agrees with the source's keys (a range read of the slot), the source is
//! unchanged, a second run stops at the first key the cluster holds unless --replace, and a real Redis server
//! can be the source (skipped where redis-server is not installed).

mod common;

use common::cluster::{free_port, query, query_following, start_answering, Node, Resp};
use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

static SERIAL: Mutex<()> = Mutex::new(());

/// A standalone `shaledb server` on `port` over `dir`, SIGKILLed when dropped.
fn standalone(dir: &Path, port: u16) -> Node {
    let child = Command::new(env!("CARGO_BIN_EXE_shaledb"))
        .args(["server", "--dir", common::p(dir), "--port", &port.to_string()])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let node = Node { child, port, bus: 0 };
    wait_pong(port);
    node
}

fn wait_pong(port: u16) {
    let started = Instant::now();
    while query(port, &["PING"]) != Some(Resp::Simple("PONG".into())) {
        assert!(started.elapsed() < Duration::from_secs(30), "port {port} does not answer");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn must(port: u16, args: &[&str]) -> Resp {
    let r = query(port, args).unwrap_or_else(|| panic!("{args:?}: no answer"));
    assert!(!matches!(r, Resp::Err(_)), "{args:?}: {r:?}");
    r
}

/// Keys of every type in database 0 of the server on `port` (some with an expiry, some with a hash tag), and
/// one key in database 3: the keys of database 0.
fn fill(port: u16) -> Vec<String> {
    let mut keys = Vec::new();
    let far = (std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() + 3_600_000)
        .to_string();
    for i in 0..60 {
        let (s, h, l, z, t, x) = (
            format!("str:{i}"),
            format!("hash:{i}"),
            format!("list:{i}"),
            format!("set:{i}"),
            format!("zset:{{tag}}:{i}"),
            format!("stream:{i}"),
        );
        let n = i.to_string();
        must(port, &["SET", &s, &format!("value {i}")]);
        must(port, &["HSET", &h, "f1", &n, "f2", "two"]);
        must(port, &["RPUSH", &l, "a", &n, "c"]);
        must(port, &["SADD", &z, "m1", &n]);
        must(port, &["ZADD", &t, "1.5", "one", &n, "other"]);
        must(port, &["XADD", &x, "*", "field", &n]);
        if i % 4 == 0 {
            must(port, &["PEXPIREAT", &s, &far]);
            must(port, &["PEXPIREAT", &h, &far]);
        }
        keys.extend([s, h, l, z, t, x]);
    }
    // The helper opens a connection per command, so SELECT and the write go in one pipeline of their own.
    let mut c = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    std::io::Write::write_all(
        &mut c,
        b"*2\r\n$6\r\nSELECT\r\n$1\r\n3\r\n*3\r\n$3\r\nSET\r\n$5\r\nin-db\r\n$1\r\n3\r\n",
    )
    .unwrap();
    let mut buf = [0u8; 10];
    let mut got = 0;
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    while got < 10 {
        got += std::io::Read::read(&mut c, &mut buf[got..]).unwrap();
    }
    assert_eq!(&buf, b"+OK\r\n+OK\r\n");
    keys
}

/// What a key holds, read type by type, and its absolute expiry.
fn read_key(port: u16, key: &str, follow: bool) -> (Resp, Resp, Resp) {
    let q = |args: &[&str]| if follow { query_following(port, args) } else { query(port, args) }.unwrap();
    let typ = q(&["TYPE", key]);
    let value = match typ.text().as_deref() {
        Some("string") => q(&["GET", key]),
        Some("hash") => q(&["HGETALL", key]),
        Some("list") => q(&["LRANGE", key, "0", "-1"]),
        Some("set") => q(&["SMEMBERS", key]),
        Some("zset") => q(&["ZRANGE", key, "0", "-1", "WITHSCORES"]),
        Some("stream") => q(&["XRANGE", key, "-", "+"]),
        other => panic!("{key}: TYPE {other:?}"),
    };
    (typ, value, q(&["PEXPIRETIME", key]))
}

fn slot(port: u16, key: &str) -> i64 {
    must(port, &["CLUSTER", "KEYSLOT", key]).int().unwrap()
}

fn two_groups(root: &Path) -> (Vec<Node>, Vec<String>) {
    let (nodes, addrs) = start_answering(root, 2);
    let out = common::ok(&["cluster", "create", &addrs[0], &addrs[1], "--replicas", "0", "--timeout", "60"]);
    assert!(out.contains("[OK] All 16384 slots covered."), "{out}");
    (nodes, addrs)
}

#[test]
fn a_standalone_servers_keys_are_imported_into_two_groups() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let tmp = tempfile::tempdir().unwrap();
    let src_dir = tmp.path().join("standalone");
    let src_port = free_port();
    let src = standalone(&src_dir, src_port);
    let keys = fill(src_port);

    // The standalone directory cannot be opened as a member: the refusal names the import.
    let out = Command::new(env!("CARGO_BIN_EXE_shaledb"))
        .args(["server", "--dir", common::p(&src_dir), "--port", &free_port().to_string()])
        .args(["--cluster-enabled", "yes", "--cluster-port", &free_port().to_string()])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("shaledb cluster import"), "{err}");

    let (nodes, addrs) = two_groups(&tmp.path().join("cluster"));
    let src_addr = format!("127.0.0.1:{src_port}");
    let out = common::ok(&["cluster", "import", &addrs[0], "--from", &src_addr, "--timeout", "60"]);
    println!("{out}");
    assert!(out.contains(&format!("[OK] {} keys copied", keys.len())), "{out}");
    assert!(out.contains("note: database 3 of the source holds 1 keys, not copied"), "{out}");

    // Every key reads the same from the cluster; the source still holds it.
    for k in &keys {
        let want = read_key(src_port, k, false);
        assert_eq!(read_key(nodes[0].port, k, true), want, "{k}");
    }
    assert_eq!(must(src_port, &["DBSIZE"]).int(), Some(keys.len() as i64));
    let sizes: i64 = nodes.iter().map(|n| must(n.port, &["DBSIZE"]).int().unwrap()).sum();
    assert_eq!(sizes, keys.len() as i64);

    // Per slot: the owning group's count (a range read of the slot) is the number of source keys in it.
    let mut per_slot: BTreeMap<i64, i64> = BTreeMap::new();
    for k in &keys {
        *per_slot.entry(slot(nodes[0].port, k)).or_default() += 1;
    }
    for (s, n) in &per_slot {
        let owner = &nodes[usize::from(*s >= 8192)];
        let st = s.to_string();
        assert_eq!(must(owner.port, &["CLUSTER", "COUNTKEYSINSLOT", &st]).int(), Some(*n), "slot {s}");
        let listed = must(owner.port, &["CLUSTER", "GETKEYSINSLOT", &st, "1000"]);
        assert_eq!(listed.items().len() as i64, *n, "slot {s}");
    }
    // The 60 hash-tagged keys share one slot (another key may hash there too).
    let tag = slot(nodes[0].port, "{tag}");
    assert!(keys.iter().filter(|k| k.contains("{tag}")).all(|k| slot(nodes[0].port, k) == tag));
    assert!(per_slot[&tag] >= 60, "{}", per_slot[&tag]);

    // Again: the cluster holds the keys now, so the run stops at the first, naming --replace.
    let (code, out2, err2) = common::shaledb(&["cluster", "import", &addrs[1], "--from", &src_addr]);
    assert_eq!(code, Some(1), "{out2}{err2}");
    assert!(err2.contains("exists in the cluster already: rerun with --replace"), "{err2}");
    // With --replace, a changed source value overwrites the cluster's.
    must(src_port, &["SET", "str:1", "changed"]);
    let out3 = common::ok(&["cluster", "import", &addrs[1], "--from", &src_addr, "--replace"]);
    assert!(out3.contains(&format!("[OK] {} keys copied", keys.len())), "{out3}");
    assert_eq!(query_following(nodes[0].port, &["GET", "str:1"]), Some(Resp::Bulk(Some("changed".into()))));
    drop(src);

    // A source that is itself a cluster member is refused.
    let (code, _, err4) = common::shaledb(&["cluster", "import", &addrs[0], "--from", &addrs[1]]);
    assert_eq!(code, Some(1));
    assert!(err4.contains("is a cluster member"), "{err4}");
}

#[test]
fn a_redis_servers_keys_are_imported() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !Path::new("/usr/bin/redis-server").exists() {
        println!("SKIPPED: /usr/bin/redis-server is missing (Debian's redis-server)");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let port = free_port();
    let redis = Command::new("/usr/bin/redis-server")
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
        .arg("--dir")
        .arg(tmp.path())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let redis = Node { child: redis, port, bus: 0 };
    wait_pong(port);
    let keys = fill(port);
    let (nodes, addrs) = two_groups(&tmp.path().join("cluster"));
    let out = common::ok(&["cluster", "import", &addrs[0], "--from", &format!("127.0.0.1:{port}")]);
    assert!(out.contains(&format!("[OK] {} keys copied", keys.len())), "{out}");
    for k in &keys {
        let (t, v, e) = read_key(redis.port, k, false);
        let (ct, cv, ce) = read_key(nodes[0].port, k, true);
        assert_eq!((&ct, &ce), (&t, &e), "{k}");
        // Redis answers HGETALL and SMEMBERS in its hash tables' order; ShaleDB in byte order.
        if matches!(t.text().as_deref(), Some("hash") | Some("set")) {
            let sorted = |r: &Resp| {
                let mut v: Vec<String> = r.items().iter().filter_map(Resp::text).collect();
                v.sort();
                v
            };
            assert_eq!(sorted(&cv), sorted(&v), "{k}");
        } else {
            assert_eq!(cv, v, "{k}");
        }
    }
}
