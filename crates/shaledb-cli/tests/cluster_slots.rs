//! Several replica groups sharing the 16384 slots (issue 44), with the real binary: six `shaledb server
//! --cluster-enabled yes` processes on 127.0.0.1 made into two groups of three by `shaledb cluster create ...
//! --replicas 2`. What a Redis Cluster client sees (CLUSTER SLOTS / NODES / INFO on every node, -MOVED to the
//! owning group's leader, -CROSSSLOT), Redis's own clients routing by slot (`redis-cli -c`, redis-py's
//! `RedisCluster`, `redis-benchmark --cluster`; each a printed skip where it is not installed), and a group's
//! leader killed with SIGKILL: the group elects another within 30 s, every write redis-py saw acknowledged reads
//! back, and the other group keeps taking writes.
//!
//! The tests run one at a time (each starts its own six servers; the machine may have two cores).

mod common;

use common::cluster::{cmd, is_master, query, query_following, start_answering, wait_master, Node, Resp};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

static SERIAL: Mutex<()> = Mutex::new(());

const CROSSSLOT: &str = "CROSSSLOT Keys in request don't hash to the same slot";

/// Two groups of three: group 0 is `nodes[0..3]` with slots 0-8191, group 1 `nodes[3..6]` with 8192-16383.
struct TwoGroups {
    tmp: tempfile::TempDir,
    nodes: Vec<Node>,
    addrs: Vec<String>,
}

impl TwoGroups {
    fn create() -> TwoGroups {
        let tmp = tempfile::tempdir().unwrap();
        let (nodes, addrs) = start_answering(tmp.path(), 6);
        let mut args = vec!["cluster", "create"];
        args.extend(addrs.iter().map(String::as_str));
        args.extend(["--replicas", "2", "--timeout", "60"]);
        let started = Instant::now();
        let out = common::ok(&args);
        println!("{out}cluster create took {:?}", started.elapsed());
        assert!(out.contains("[OK] All 6 nodes agree about slots configuration."), "{out}");
        assert!(out.contains("[OK] All 16384 slots covered."), "{out}");
        assert!(out.contains("Slots 0 - 8191") && out.contains("Slots 8192 - 16383"), "{out}");
        TwoGroups { tmp, nodes, addrs }
    }

    fn group(&self, g: usize) -> Vec<&Node> {
        self.nodes[3 * g..3 * g + 3].iter().collect()
    }

    /// The index in `nodes` of group `g`'s leader (waits up to 30 s for one).
    fn leader(&self, g: usize) -> usize {
        3 * g + wait_master(&self.group(g), Duration::from_secs(30)).unwrap_or_else(|| panic!("group {g}: no leader"))
    }

    fn id(&self, i: usize) -> String {
        cmd(self.nodes[i].port, &["CLUSTER", "MYID"]).unwrap()
    }
}

fn slot(port: u16, key: &str) -> u16 {
    let r = query(port, &["CLUSTER", "KEYSLOT", key]).unwrap();
    r.int().and_then(|s| u16::try_from(s).ok()).unwrap_or_else(|| panic!("CLUSTER KEYSLOT {key}: {r:?}"))
}

/// The first key `prefix0`, `prefix1` ... whose slot is in group `g` and not `but`.
fn key_in(port: u16, prefix: &str, g: usize, but: Option<u16>) -> (String, u16) {
    (0..10_000)
        .map(|i| format!("{prefix}{i}"))
        .map(|k| {
            let s = slot(port, &k);
            (k, s)
        })
        .find(|(_, s)| usize::from(*s >= 8192) == g && Some(*s) != but)
        .unwrap()
}

fn moved(slot: u16, port: u16) -> Resp {
    Resp::Err(format!("MOVED {slot} 127.0.0.1:{port}"))
}

fn ok() -> Option<Resp> {
    Some(Resp::Simple("OK".into()))
}

fn bulk(s: &str) -> Option<Resp> {
    Some(Resp::Bulk(Some(s.into())))
}

/// Runs `c` with stdout and stderr in files under `dir`, killed after `limit`: (exit success, stdout, stderr).
fn run_bounded(c: &mut Command, dir: &Path, name: &str, limit: Duration) -> (bool, String, String) {
    let (out, err) = (dir.join(format!("{name}.out")), dir.join(format!("{name}.err")));
    let mut child = c
        .stdout(std::fs::File::create(&out).unwrap())
        .stderr(std::fs::File::create(&err).unwrap())
        .spawn()
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    let started = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break Some(s);
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let (out, err) = (std::fs::read_to_string(out).unwrap(), std::fs::read_to_string(err).unwrap());
    assert!(status.is_some(), "{name} still ran after {limit:?}:\n{out}\n{err}");
    (status.is_some_and(|s| s.success()), out, err)
}

/// Where python3 has redis-py, `Some(python3 -c <cluster_slots_client.py>)`; else a printed reason.
fn redis_py() -> Option<Command> {
    let has = Command::new("python3")
        .args(["-c", "import redis.cluster"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !has {
        println!("SKIPPED: redis-py (python3 -c 'import redis.cluster') is not installed");
        return None;
    }
    let mut c = Command::new("python3");
    c.arg("-c").arg(include_str!("cluster_slots_client.py")).stdin(Stdio::null());
    Some(c)
}

fn tool(path: &str) -> bool {
    let there = Path::new(path).exists();
    if !there {
        println!("SKIPPED: {path} is missing (Debian's redis-tools)");
    }
    there
}

#[test]
fn two_groups_share_the_slots_and_redirect() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let c = TwoGroups::create();
    let leaders = [c.leader(0), c.leader(1)];
    let ids: Vec<String> = (0..6).map(|i| c.id(i)).collect();
    let ports: Vec<u16> = c.nodes.iter().map(|n| n.port).collect();

    for (i, n) in c.nodes.iter().enumerate() {
        // CLUSTER SLOTS: two ranges, each served by its group's three nodes, the leader first.
        let r = query(n.port, &["CLUSTER", "SLOTS"]).unwrap();
        let mut ranges: Vec<&[Resp]> = r.items().iter().map(Resp::items).collect();
        ranges.sort_by_key(|x| x.first().and_then(Resp::int));
        assert_eq!(ranges.len(), 2, "node {i}: {r:?}");
        for (g, range) in ranges.iter().enumerate() {
            let (a, b) = (range[0].int(), range[1].int());
            assert_eq!((a, b), (Some(8192 * g as i64), Some(8192 * g as i64 + 8191)), "node {i}: {r:?}");
            let served: Vec<u16> = range[2..].iter().map(|e| e.items()[1].int().unwrap().try_into().unwrap()).collect();
            assert_eq!(served.len(), 3, "node {i}: {r:?}");
            let mut sorted = served.clone();
            sorted.sort_unstable();
            let mut want = ports[3 * g..3 * g + 3].to_vec();
            want.sort_unstable();
            assert_eq!(sorted, want, "node {i}: range {g} not served by group {g}: {r:?}");
            assert!(is_master(served[0]), "node {i}: range {g} lists {} first, not a master: {r:?}", served[0]);
            assert_eq!(served[0], ports[leaders[g]], "node {i}: {r:?}");
            for e in &range[2..] {
                let id = e.items()[2].text().unwrap();
                assert!(ids.contains(&id), "node {i}: unknown id {id}: {r:?}");
            }
        }

        // CLUSTER NODES: six lines, two masters with their slots, four replicas naming their master.
        let text = cmd(n.port, &["CLUSTER", "NODES"]).unwrap();
        let lines: Vec<Vec<&str>> = text.lines().map(|l| l.split(' ').collect()).collect();
        assert_eq!(lines.len(), 6, "node {i}:\n{text}");
        assert_eq!(lines.iter().filter(|l| l[2].contains("myself")).count(), 1, "node {i}:\n{text}");
        let mut masters: Vec<(String, String)> = lines
            .iter()
            .filter(|l| l[2].split(',').any(|f| f == "master"))
            .map(|l| (l[0].to_string(), l[8..].join(" ")))
            .collect();
        masters.sort_by(|x, y| x.1.cmp(&y.1));
        assert_eq!(
            masters,
            [(ids[leaders[0]].clone(), "0-8191".to_string()), (ids[leaders[1]].clone(), "8192-16383".to_string())],
            "node {i}:\n{text}"
        );
        for l in lines.iter().filter(|l| l[2].split(',').any(|f| f == "slave")) {
            let g = ids.iter().position(|id| id == l[0]).unwrap() / 3;
            assert_eq!(l[3], ids[leaders[g]], "node {i}:\n{text}");
            assert_eq!(l.len(), 8, "a replica with slots, node {i}:\n{text}");
        }

        // CLUSTER INFO.
        let info = cmd(n.port, &["CLUSTER", "INFO"]).unwrap();
        for want in ["cluster_state:ok", "cluster_known_nodes:6", "cluster_size:2", "cluster_slots_assigned:16384"] {
            assert!(info.lines().any(|l| l == want), "node {i}: no {want}:\n{info}");
        }

        // CLUSTER SHALEDB-GROUP: its group, the map's epoch, the leader, three members, the group's slots.
        let g = i / 3;
        let r = query(n.port, &["CLUSTER", "SHALEDB-GROUP"]).unwrap();
        let v = r.items();
        assert_eq!(v.len(), 5, "node {i}: {r:?}");
        assert_eq!((v[0].int(), v[1].int()), (Some(g as i64 + 1), Some(1)), "node {i}: {r:?}");
        assert_eq!(v[2].text(), Some(ids[leaders[g]].clone()), "node {i}: {r:?}");
        assert_eq!(v[3].items().len(), 3, "node {i}: {r:?}");
        assert_eq!(v[4].text().as_deref(), Some(["0-8191", "8192-16383"][g]), "node {i}: {r:?}");
    }

    // A second create finds the nodes in groups already and changes nothing.
    let mut args = vec!["cluster", "create"];
    args.extend(c.addrs.iter().map(String::as_str));
    args.extend(["--replicas", "2"]);
    let (code, _, err) = common::shaledb(&args);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("already a member") && err.contains("cluster_size:2"), "{err}");

    // A key of each group: written on its leader, redirected by the other group's leader and by followers.
    let p = |i: usize| c.nodes[i].port;
    for g in 0..2 {
        let (key, s) = key_in(p(0), "key", g, None);
        let (own, other) = (leaders[g], leaders[1 - g]);
        assert_eq!(query(p(own), &["SET", &key, "v"]), ok(), "{key} (slot {s}) on group {g}'s leader");
        assert_eq!(query(p(own), &["GET", &key]), bulk("v"));
        assert_eq!(query(p(other), &["SET", &key, "w"]), Some(moved(s, p(own))), "{key} (slot {s})");
        assert_eq!(query(p(other), &["GET", &key]), Some(moved(s, p(own))), "{key} (slot {s})");
        for f in (3 * g..3 * g + 3).filter(|&f| f != own) {
            assert_eq!(query(p(f), &["GET", &key]), Some(moved(s, p(own))), "{key} (slot {s}) on a follower");
        }
        for f in (3 * (1 - g)..3 * (1 - g) + 3).filter(|&f| f != other) {
            assert_eq!(query(p(f), &["GET", &key]), Some(moved(s, p(own))), "{key} (slot {s}), other group");
        }
        assert_eq!(query_following(p(other), &["GET", &key]), bulk("v"));

        // Keys of two slots of this group, and of both groups: CROSSSLOT on the owner.
        let (key2, s2) = key_in(p(0), "other", g, Some(s));
        let (key3, _) = key_in(p(0), "far", 1 - g, None);
        for keys in [[&key, &key2], [&key, &key3]] {
            let r = query(p(own), &["MSET", keys[0], "1", keys[1], "2"]);
            assert_eq!(r, Some(Resp::Err(CROSSSLOT.into())), "MSET {keys:?} (slots {s}, {s2})");
            let r = query(p(own), &["MGET", keys[0], keys[1]]);
            assert_eq!(r, Some(Resp::Err(CROSSSLOT.into())), "MGET {keys:?}");
        }
        assert_eq!(query(p(own), &["GET", &key]), bulk("v"), "a refused MSET wrote");

        // One hash tag: one slot, so MSET works on its owner.
        let tag = (0..1000).map(|i| format!("t{i}")).find(|t| usize::from(slot(p(0), t) >= 8192) == g).unwrap();
        let (a, b) = (format!("{{{tag}}}a"), format!("{{{tag}}}b"));
        assert_eq!(query(p(own), &["MSET", &a, "1", &b, "2"]), ok(), "MSET {a} {b}");
        let r = query(p(own), &["MGET", &a, &b]).unwrap();
        assert_eq!(r, Resp::Array(Some(vec![Resp::Bulk(Some("1".into())), Resp::Bulk(Some("2".into()))])));
        let s = slot(p(0), &a);
        assert_eq!(query(p(other), &["MSET", &a, "1", &b, "2"]), Some(moved(s, p(own))), "MSET {a} {b}");
    }
}

#[test]
fn redis_clients_route_by_slot_across_two_groups() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let c = TwoGroups::create();
    let leaders = [c.leader(0), c.leader(1)];
    let port = c.nodes[1].port;
    let dir = c.tmp.path();

    // redis-cli -c: 100 SETs and GETs through one node, following -MOVED; both groups get some keys.
    if tool("/usr/bin/redis-cli") {
        let mut script = String::new();
        for i in 0..100 {
            script.push_str(&format!("SET cli:{i} v{i}\n"));
        }
        for i in 0..100 {
            script.push_str(&format!("GET cli:{i}\n"));
        }
        std::fs::write(dir.join("cli.txt"), &script).unwrap();
        let (ok, out, err) = run_bounded(
            Command::new("/usr/bin/redis-cli")
                .args(["-c", "-h", "127.0.0.1", "-p", &port.to_string()])
                .stdin(std::fs::File::open(dir.join("cli.txt")).unwrap()),
            dir,
            "redis-cli",
            Duration::from_secs(60),
        );
        assert!(ok, "{out}\n{err}");
        let replies: Vec<&str> =
            out.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with("-> Redirected")).collect();
        let mut want: Vec<String> = vec!["OK".into(); 100];
        want.extend((0..100).map(|i| format!("v{i}")));
        assert_eq!(replies, want, "redis-cli -c:\n{out}\n{err}");
        let sizes: Vec<i64> =
            leaders.iter().map(|&l| query(c.nodes[l].port, &["DBSIZE"]).and_then(|r| r.int()).unwrap()).collect();
        println!("redis-cli -c: DBSIZE on the two leaders {sizes:?}");
        assert_eq!(sizes[0] + sizes[1], 100, "{sizes:?}");
        assert!(sizes[0] > 0 && sizes[1] > 0, "{sizes:?}");
    }

    // redis-py's RedisCluster from one startup node: 300 keys of four types written and read back.
    if let Some(mut py) = redis_py() {
        let (ok, out, err) =
            run_bounded(py.args(["mixed", &port.to_string(), "300"]), dir, "redis-py-mixed", Duration::from_secs(60));
        println!("redis-py: {out}");
        assert!(ok, "redis-py RedisCluster:\n{out}\n{err}");
        assert!(out.starts_with("ok 300 keys"), "{out}\n{err}");
    }

    // redis-benchmark --cluster: the default suite and -t set,get, no error, a rate per test.
    if tool("/usr/bin/redis-benchmark") {
        for (name, extra) in [("default", &[][..]), ("set-get", &["-t", "set,get"][..])] {
            let (ok, out, err) = run_bounded(
                Command::new("/usr/bin/redis-benchmark")
                    .args(["--cluster", "-h", "127.0.0.1", "-p", &port.to_string()])
                    .args(["-n", "2000", "-c", "10", "-q"])
                    .args(extra)
                    .stdin(Stdio::null()),
                dir,
                &format!("redis-benchmark-{name}"),
                Duration::from_secs(180),
            );
            // -q rewrites a progress line with "\r" until the test's result.
            let lines: Vec<&str> =
                out.lines().filter_map(|l| l.rsplit('\r').next()).map(str::trim).filter(|l| !l.is_empty()).collect();
            println!("redis-benchmark --cluster ({name}):\n{}\n{err}", lines.join("\n"));
            assert!(ok, "redis-benchmark ({name}) failed:\n{out}\n{err}");
            let all = format!("{out}\n{err}").to_ascii_lowercase();
            assert!(!all.contains("error") && !all.contains("invalid"), "redis-benchmark ({name}):\n{out}\n{err}");
            let rates: Vec<&str> = lines
                .iter()
                .filter(|l| l.contains(" requests per second"))
                // "MSET (10 keys): ...", "LPUSH (needed to benchmark LRANGE): ...": the command's name.
                .map(|l| l.split([':', ' ']).next().unwrap())
                .collect();
            if name == "set-get" {
                assert_eq!(rates, ["SET", "GET"], "{out}");
            } else {
                for t in ["PING_INLINE", "SET", "GET", "INCR", "LPUSH", "SADD", "HSET", "ZADD", "LRANGE_100", "MSET"] {
                    assert!(rates.contains(&t), "no rate for {t}:\n{out}");
                }
            }
            // Nothing but the cluster's description and the results.
            for l in &lines {
                let known = l.contains(" requests per second")
                    || l.starts_with("Cluster has ")
                    || l.starts_with("Master ")
                    || l.contains("rps=");
                assert!(known, "redis-benchmark ({name}) printed '{l}'");
            }
        }
    }
}

/// The lines of the redis-py writer's output so far: (acknowledged (item, slot), unknown, wrong replies).
fn writer_lines(out: &Path) -> (Vec<(u64, u16)>, usize, Vec<String>) {
    let text = std::fs::read_to_string(out).unwrap_or_default();
    let (mut acked, mut unknown, mut wrong) = (Vec::new(), 0, Vec::new());
    // The last line may be half written.
    for l in text.lines().take(text.matches('\n').count()) {
        let f: Vec<&str> = l.split(' ').collect();
        match f[..] {
            ["A", i, s] => acked.push((i.parse().unwrap(), s.parse().unwrap())),
            ["U", ..] => unknown += 1,
            _ => wrong.push(l.to_string()),
        }
    }
    (acked, unknown, wrong)
}

#[test]
fn a_group_elects_a_new_leader_after_its_leader_is_killed() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut c = TwoGroups::create();
    let dir = c.tmp.path().to_path_buf();
    let l1 = c.leader(0);
    let l2 = c.leader(1);
    let l2_port = c.nodes[l2].port;
    let ports: Vec<String> = c.nodes.iter().map(|n| n.port.to_string()).collect();

    // redis-py writing SET w:I vI through the whole run, where it is installed.
    let stop = dir.join("stop");
    let out = dir.join("writer.out");
    let mut writer = redis_py().map(|mut py| {
        py.arg("writer")
            .arg(&stop)
            .args(&ports)
            .stdout(std::fs::File::create(&out).unwrap())
            .stderr(std::fs::File::create(dir.join("writer.err")).unwrap())
            .spawn()
            .expect("python3")
    });
    let wait_acks = |at_least: usize, low: bool, what: &str| {
        let started = Instant::now();
        loop {
            let (acked, _, _) = writer_lines(&out);
            if acked.iter().filter(|(_, s)| !low || *s < 8192).count() >= at_least {
                return;
            }
            let err = std::fs::read_to_string(dir.join("writer.err")).unwrap_or_default();
            assert!(started.elapsed() < Duration::from_secs(30), "redis-py: {what} within 30 s\n{err}");
            std::thread::sleep(Duration::from_millis(100));
        }
    };
    if writer.is_some() {
        wait_acks(50, true, "50 acknowledged writes to group 1 before the kill");
    }

    // Group 2 takes writes on its leader throughout; a tag of its slots.
    let tag = (0..1000).map(|i| format!("g2t{i}")).find(|t| slot(l2_port, t) >= 8192).unwrap();
    let mut g2_writes = 0u32;
    let mut g2_write = |what: &str| {
        let k = format!("{{{tag}}}:{g2_writes}");
        let r = query(l2_port, &["SET", &k, "x"]);
        assert_eq!(r, ok(), "group 2's leader refused {k} {what}");
        g2_writes += 1;
    };
    g2_write("before the kill");

    // SIGKILL group 1's leader.
    c.nodes[l1].child.kill().unwrap();
    c.nodes[l1].child.wait().unwrap();
    let killed = Instant::now();
    let before_acks = writer_lines(&out).0.len();
    let rest: Vec<&Node> = (0..3).filter(|&i| i != l1).map(|i| &c.nodes[i]).collect();
    let new = loop {
        if let Some(i) = rest.iter().position(|n| is_master(n.port)) {
            break i;
        }
        assert!(killed.elapsed() < Duration::from_secs(30), "group 1 elected no leader within 30 s of the kill");
        g2_write("during group 1's election");
        std::thread::sleep(Duration::from_millis(50));
    };
    let new_port = rest[new].port;
    println!("group 1: node on port {new_port} leads {:?} after the kill", killed.elapsed());

    // The other group names the new leader for group 1's slots (within 30 s).
    let (key, s) = key_in(l2_port, "k", 0, None);
    let started = Instant::now();
    while query(l2_port, &["GET", &key]) != Some(moved(s, new_port)) {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "group 2's leader still answers {:?} for {key} (slot {s}), not -MOVED to {new_port}",
            query(l2_port, &["GET", &key])
        );
        g2_write("after group 1's election");
        std::thread::sleep(Duration::from_millis(100));
    }
    // Every node left reports cluster_state:ok (within 30 s).
    let started = Instant::now();
    for (i, n) in c.nodes.iter().enumerate().filter(|(i, _)| *i != l1) {
        loop {
            let info = cmd(n.port, &["CLUSTER", "INFO"]).unwrap_or_default();
            if info.lines().any(|l| l == "cluster_state:ok") {
                break;
            }
            assert!(started.elapsed() < Duration::from_secs(30), "node {i} after the kill:\n{info}");
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    assert!(is_master(l2_port), "group 2's leader lost its leadership when group 1's leader died");
    g2_write("at the end");
    println!("group 2: {g2_writes} writes on its leader, all acknowledged");

    // redis-py went on writing to both groups; every write it saw acknowledged reads back.
    if let Some(mut w) = writer.take() {
        wait_acks(before_acks + 50, false, "50 more acknowledged writes after the kill");
        let low_before = writer_lines(&out).0.iter().filter(|(_, s)| *s < 8192).count();
        wait_acks(low_before + 20, true, "20 more acknowledged writes to group 1 after its new leader");
        std::fs::write(&stop, b"").unwrap();
        let started = Instant::now();
        while w.try_wait().unwrap().is_none() {
            if started.elapsed() > Duration::from_secs(20) {
                let _ = w.kill();
                let _ = w.wait();
                panic!("the redis-py writer did not stop");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let (acked, unknown, wrong) = writer_lines(&out);
        assert!(wrong.is_empty(), "redis-py saw replies that are neither OK nor an error: {wrong:?}");
        let mut lost = Vec::new();
        for (i, _) in &acked {
            let got = query_following(new_port, &["GET", &format!("w:{i}")]);
            if got != bulk(&format!("v{i}")) {
                lost.push(format!("w:{i}: {got:?}"));
            }
        }
        println!("redis-py: {} writes acknowledged, {unknown} of unknown outcome", acked.len());
        assert!(
            lost.is_empty(),
            "{} acknowledged writes do not read back: {:?}",
            lost.len(),
            &lost[..lost.len().min(20)]
        );
    }
    // Group 2's writes read back too.
    for i in 0..g2_writes {
        assert_eq!(query(l2_port, &["GET", &format!("{{{tag}}}:{i}")]), bulk("x"));
    }
}
