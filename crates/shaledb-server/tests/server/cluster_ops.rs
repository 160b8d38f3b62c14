//! Replica group operations (issue 43): `WAIT numreplicas timeout` on the leader, and membership changes with
//! `CLUSTER SHALEDB-ADD-NODE` / `SHALEDB-REMOVE-NODE`, with real server processes on 127.0.0.1 (this test binary
//! run again as a server, `cluster::node_process`, so a node can be SIGKILLed and restarted on its ports).
//!
//! One test walks it all (one start of the processes): a group of 3; WAIT 2 0 after a write; a 4th node added
//! (it reads every earlier write after READONLY and takes later ones) and removed again; a follower killed
//! (WAIT 2 500 answers 1 after the timeout); that follower removed, its directory wiped, restarted with a
//! fresh id and added back, catching up. A second adds a node to a group whose log was purged behind a snapshot,
//! so the node catches up from the snapshot.

use crate::helpers::{encode, Client, Resp};
use std::io::BufReader;
use std::io::Write as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

// Nodes run as `cluster::node_process` (the test binary re-run as a server), on ports below the ephemeral range.
use crate::helpers::cluster::{free_port, NODE_ENV};

/// A server process on fixed ports (kept across restarts), SIGKILLed when dropped.
struct Node {
    child: Option<Child>,
    dir: PathBuf,
    port: u16,
    bus: u16,
}

impl Node {
    fn new(dir: &Path) -> Node {
        let mut n = Node { child: None, dir: dir.to_path_buf(), port: free_port(), bus: free_port() };
        n.start();
        n
    }

    fn start(&mut self) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.with_extension("log"))
            .expect("log file");
        let child = Command::new(std::env::current_exe().expect("test binary"))
            .args(["--exact", "cluster::node_process", "--nocapture", "--test-threads", "1"])
            .env(NODE_ENV, format!("{}|{}|{}", self.dir.display(), self.port, self.bus))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("spawn a node");
        self.child = Some(child);
        poll(Duration::from_secs(20), "a node answers PING", || try_cmd(self.addr(), &["PING"]));
    }

    fn addr(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.port))
    }

    fn member(&self) -> String {
        format!("127.0.0.1:{}@{}", self.port, self.bus)
    }

    fn id(&self) -> String {
        try_cmd(self.addr(), &["CLUSTER", "MYID"]).expect("CLUSTER MYID").text()
    }

    fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Polls `f` every 100 ms until it gives `Some`, at most `limit`.
fn poll<T>(limit: Duration, what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let start = Instant::now();
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(start.elapsed() < limit, "{what}: not within {limit:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// One command on a new connection waiting up to 60 s for its reply, `None` when the node does not answer.
fn try_cmd(addr: SocketAddr, args: &[&str]) -> Option<Resp> {
    let s = std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(500)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(60))).ok()?;
    let mut w = s.try_clone().ok()?;
    let bytes: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
    w.write_all(&encode(&bytes)).ok()?;
    crate::helpers::wire_read(&mut BufReader::new(s))
}

fn is_master(addr: SocketAddr) -> bool {
    matches!(try_cmd(addr, &["ROLE"]), Some(Resp::Array(v)) if v.first() == Some(&Resp::Bulk(b"master".to_vec())))
}

fn bulk(s: &str) -> Resp {
    Resp::Bulk(s.as_bytes().to_vec())
}

fn ok() -> Resp {
    Resp::Simple("OK".into())
}

fn err_has(r: &Resp, what: &str) -> bool {
    matches!(r, Resp::Error(m) if m.contains(what))
}

/// The ids CLUSTER NODES lists on `addr`.
fn listed(addr: SocketAddr) -> Vec<String> {
    let text = try_cmd(addr, &["CLUSTER", "NODES"]).expect("CLUSTER NODES").text();
    text.lines().filter_map(|l| l.split(' ').next().map(str::to_string)).collect()
}

/// Waits until `n` (after READONLY) holds every `(key, value)`.
fn caught_up(n: &Node, data: &[(String, String)]) {
    let mut c = Client::connect(n.addr());
    assert_eq!(c.cmd(&["READONLY"]), ok());
    poll(Duration::from_secs(20), "the node holds every write", || {
        data.iter().all(|(k, v)| c.cmd(&["GET", k]) == bulk(v)).then_some(())
    });
}

#[test]
fn cluster_wait_add_and_remove_nodes() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let mut nodes: Vec<Node> = (0..4).map(|i| Node::new(&tmp.path().join(format!("n{i}")))).collect();
    let ids: Vec<String> = nodes.iter().map(Node::id).collect();
    let mut init: Vec<String> = vec!["CLUSTER".into(), "SHALEDB-INIT".into()];
    for (id, n) in ids.iter().zip(&nodes).take(3) {
        init.push(id.clone());
        init.push(n.member());
    }
    let init: Vec<&str> = init.iter().map(String::as_str).collect();
    assert_eq!(try_cmd(nodes[0].addr(), &init), Some(ok()));
    let leader = poll(Duration::from_secs(15), "a leader", || (0..3).find(|&i| is_master(nodes[i].addr())));
    let followers: Vec<usize> = (0..3).filter(|&i| i != leader).collect();
    let la = nodes[leader].addr();
    let mut l = Client::connect(la);

    // WAIT: a connection that wrote nothing has every follower; after writes, both followers hold them.
    assert_eq!(l.cmd(&["WAIT", "0", "0"]), Resp::Int(2));
    let mut data: Vec<(String, String)> = Vec::new();
    for i in 0..30 {
        let (k, v) = (format!("k{i}"), format!("v{i}"));
        assert_eq!(l.cmd(&["SET", &k, &v]), ok());
        data.push((k, v));
    }
    let started = Instant::now();
    assert_eq!(l.cmd(&["WAIT", "2", "0"]), Resp::Int(2));
    println!("WAIT 2 0 answered 2 after {:?}", started.elapsed());
    assert_eq!(l.cmd(&["SET", "w", "1"]), ok());
    assert_eq!(l.cmd(&["WAIT", "2", "5000"]), Resp::Int(2));
    data.push(("w".into(), "1".into()));
    // Bad arguments as Redis answers them; a follower refuses WAIT as a Redis replica does.
    assert!(err_has(&l.cmd(&["WAIT", "x", "0"]), "not an integer"), "WAIT x 0");
    assert!(err_has(&l.cmd(&["WAIT", "1", "-1"]), "timeout is negative"), "WAIT 1 -1");
    let mut f0 = Client::connect(nodes[followers[0]].addr());
    assert!(err_has(&f0.cmd(&["WAIT", "1", "0"]), "WAIT cannot be used with replica instances"));

    // Membership commands: clear errors for bad input, -MOVED from a follower.
    let d = 3;
    let e = f0.cmd(&["CLUSTER", "SHALEDB-ADD-NODE", &ids[d], &nodes[d].member()]);
    assert_eq!(e, Resp::Error(format!("MOVED 0 127.0.0.1:{}", nodes[leader].port)));
    assert!(err_has(&l.cmd(&["CLUSTER", "SHALEDB-ADD-NODE", "nope", &nodes[d].member()]), "not a node id"));
    assert!(err_has(&l.cmd(&["CLUSTER", "SHALEDB-ADD-NODE", &ids[d], "127.0.0.1:1"]), "host:port@busport"));
    assert!(err_has(&l.cmd(&["CLUSTER", "SHALEDB-ADD-NODE", &ids[d]]), "wrong number of arguments"));
    let e = l.cmd(&["CLUSTER", "SHALEDB-ADD-NODE", &ids[followers[0]], &nodes[followers[0]].member()]);
    assert!(err_has(&e, "already a voter"), "{e:?}");
    let e = l.cmd(&["CLUSTER", "SHALEDB-ADD-NODE", &ids[d], &nodes[followers[0]].member()]);
    assert!(err_has(&e, "is recorded at"), "{e:?}");
    assert!(err_has(&l.cmd(&["CLUSTER", "SHALEDB-REMOVE-NODE", "0"]), "not a node id"));
    let unknown = format!("{:040x}", 77u64);
    assert!(err_has(&l.cmd(&["CLUSTER", "SHALEDB-REMOVE-NODE", &unknown]), "not a member"));
    assert!(err_has(&l.cmd(&["CLUSTER", "SHALEDB-REMOVE-NODE", &ids[leader]]), "is the leader"));

    // The group grows to 4: the new node has every earlier write and takes later ones.
    let started = Instant::now();
    assert_eq!(try_cmd(la, &["CLUSTER", "SHALEDB-ADD-NODE", &ids[d], &nodes[d].member()]), Some(ok()));
    println!("node added (caught up, voter) after {:?}", started.elapsed());
    let mut members = listed(la);
    members.sort();
    let mut want: Vec<String> = ids.clone();
    want.sort();
    assert_eq!(members, want);
    caught_up(&nodes[d], &data);
    assert_eq!(l.cmd(&["SET", "later", "x"]), ok());
    data.push(("later".into(), "x".into()));
    assert_eq!(l.cmd(&["WAIT", "3", "5000"]), Resp::Int(3));
    caught_up(&nodes[d], &data);
    let nodes_line = try_cmd(nodes[d].addr(), &["CLUSTER", "NODES"]).expect("nodes").text();
    assert!(nodes_line.lines().any(|x| x.starts_with(&ids[d]) && x.contains("myself,slave")), "{nodes_line}");

    // ... and shrinks back to 3.
    assert_eq!(try_cmd(la, &["CLUSTER", "SHALEDB-REMOVE-NODE", &ids[d]]), Some(ok()));
    poll(Duration::from_secs(10), "CLUSTER NODES lists 3 nodes", || (listed(la).len() == 3).then_some(()));
    assert!(!listed(la).contains(&ids[d]));
    nodes[d].kill();
    assert_eq!(l.cmd(&["SET", "after-removal", "y"]), ok());
    data.push(("after-removal".into(), "y".into()));
    assert_eq!(l.cmd(&["WAIT", "2", "5000"]), Resp::Int(2));

    // A follower killed: its write still commits (2 of 3), WAIT 2 500 answers 1 after the timeout.
    let gone = followers[1];
    nodes[gone].kill();
    assert_eq!(l.cmd(&["SET", "one-follower", "z"]), ok());
    data.push(("one-follower".into(), "z".into()));
    let started = Instant::now();
    assert_eq!(l.cmd(&["WAIT", "2", "500"]), Resp::Int(1));
    let took = started.elapsed();
    println!("WAIT 2 500 with a follower down answered 1 after {took:?}");
    assert!(took >= Duration::from_millis(450) && took < Duration::from_secs(10), "{took:?}");
    // A blocking pop served by another client's push is this connection's write too: a fresh connection
    // (nothing written before) waits for it, and only one follower holds it.
    let mut popper = Client::connect(la);
    let mut pusher = Client::connect(la);
    let pop = std::thread::spawn(move || {
        let r = popper.cmd(&["BLPOP", "queue", "10"]);
        (r, popper)
    });
    poll(Duration::from_secs(10), "BLPOP parked", || {
        let info = try_cmd(la, &["INFO", "clients"])?.text();
        (crate::helpers::cluster::info_field(&info, "blocked_clients")? == "1").then_some(())
    });
    assert_eq!(pusher.cmd(&["RPUSH", "queue", "job"]), Resp::Int(1));
    let (popped, mut popper) = pop.join().expect("the popping client");
    assert_eq!(popped, Resp::Array(vec![bulk("queue"), bulk("job")]));
    assert_eq!(popper.cmd(&["WAIT", "2", "300"]), Resp::Int(1), "WAIT after a served BLPOP");

    // That follower's directory is lost: it is removed under its old id, restarted empty (a fresh id) on the
    // same ports, and added back; it catches up.
    assert_eq!(try_cmd(la, &["CLUSTER", "SHALEDB-REMOVE-NODE", &ids[gone]]), Some(ok()));
    std::fs::remove_dir_all(&nodes[gone].dir).expect("wipe the node's directory");
    nodes[gone].start();
    let fresh = nodes[gone].id();
    assert_ne!(fresh, ids[gone], "a wiped node has a fresh id");
    assert_eq!(try_cmd(la, &["CLUSTER", "SHALEDB-ADD-NODE", &fresh, &nodes[gone].member()]), Some(ok()));
    caught_up(&nodes[gone], &data);
    let members = listed(la);
    assert_eq!(members.len(), 3, "{members:?}");
    assert!(members.contains(&fresh) && !members.contains(&ids[gone]), "{members:?}");
    assert_eq!(l.cmd(&["SET", "last", "1"]), ok());
    assert_eq!(l.cmd(&["WAIT", "2", "5000"]), Resp::Int(2));
}

/// A node added after the leader's log was compacted: the entries it lacks are gone (openraft's snapshot policy
/// builds a snapshot every 5000 entries and purges all but the last 1000 behind it), so it catches up from a
/// snapshot before it becomes a voter. A group of one keeps the 6000 writes (each its own entry) quick.
#[test]
fn cluster_add_node_after_the_log_is_purged() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let nodes: Vec<Node> = (0..2).map(|i| Node::new(&tmp.path().join(format!("n{i}")))).collect();
    let ids: Vec<String> = nodes.iter().map(Node::id).collect();
    let la = nodes[0].addr();
    assert_eq!(try_cmd(la, &["CLUSTER", "SHALEDB-INIT", &ids[0], &nodes[0].member()]), Some(ok()));
    poll(Duration::from_secs(15), "the lone member leads", || is_master(la).then_some(()));
    let mut l = Client::connect(la);
    let started = Instant::now();
    // One command at a time: each is a proposal, a log entry, of its own.
    for i in 0..6200 {
        assert_eq!(l.cmd(&["SET", &format!("p{}", i % 500), &i.to_string()]), ok());
    }
    println!("6200 writes one at a time in {:?}", started.elapsed());
    let mut data: Vec<(String, String)> = (5700..6200).map(|i| (format!("p{}", i % 500), i.to_string())).collect();
    data.sort();
    data.dedup_by(|a, b| a.0 == b.0);
    // A group of one has no replica: WAIT answers 0 at once for 0, and 0 after its timeout for 1.
    assert_eq!(l.cmd(&["WAIT", "0", "0"]), Resp::Int(0));
    assert_eq!(l.cmd(&["WAIT", "1", "100"]), Resp::Int(0));

    let started = Instant::now();
    assert_eq!(try_cmd(la, &["CLUSTER", "SHALEDB-ADD-NODE", &ids[1], &nodes[1].member()]), Some(ok()));
    println!("node added from a snapshot after {:?}", started.elapsed());
    caught_up(&nodes[1], &data);
    // It caught up from a snapshot: its state machine's live data is a generation after the first (0).
    let current = std::fs::read_to_string(nodes[1].dir.join("sm").join("CURRENT")).expect("sm/CURRENT");
    assert!(current.starts_with("data-") && current.trim() != "data-0", "sm/CURRENT: {current:?}");
    assert_eq!(listed(la).len(), 2);
    // Both vote now: a write commits on both, and WAIT sees the new member.
    assert_eq!(l.cmd(&["SET", "after", "1"]), ok());
    assert_eq!(l.cmd(&["WAIT", "1", "5000"]), Resp::Int(1));
    caught_up(&nodes[1], &[("after".to_string(), "1".to_string())]);
}
