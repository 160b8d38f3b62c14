//! Replica-group processes for the cluster tests (cluster.rs, cluster_faults.rs): a node is this test binary
//! run again as a server (`cluster::node_process`, its settings in [`NODE_ENV`]), so it can be SIGKILLed as a
//! crash and restarted from its directory on the same ports; and the small probes the tests poll with.

use super::{encode, ok, wire_read, Resp};
use std::io::{BufReader, Write as _};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Bounds each wait of the cluster tests (a failover, a catch-up, a convergence).
pub const WAIT: Duration = Duration::from_secs(30);

/// The variable that makes `cluster::node_process` run a node: `dir|port|bus`.
pub const NODE_ENV: &str = "SHALEDB_TEST_CLUSTER_NODE";

/// A free loopback port below the ephemeral range (`shaledb_testkit::net::free_port`).
pub fn free_port() -> u16 {
    shaledb_testkit::net::free_port()
}

/// Waits until `n` answers PING; a node whose process ended (a port taken, a bad directory) fails at once,
/// with its log.
pub fn wait_answering(n: &mut NodeProc, limit: Duration) {
    poll(limit, "a node answers PING", || {
        if let Some(Ok(Some(status))) = n.child.as_mut().map(Child::try_wait) {
            let log = std::fs::read_to_string(n.dir.with_extension("log")).unwrap_or_default();
            panic!("node on port {} (bus {}) exited with {status}:\n{log}", n.port, n.bus);
        }
        try_cmd(n.addr(), &["PING"])
    });
}

/// One node's process, its directory and ports (kept for a restart).
pub struct NodeProc {
    pub child: Option<Child>,
    pub dir: PathBuf,
    pub port: u16,
    pub bus: u16,
}

impl NodeProc {
    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.port))
    }

    /// SIGKILL (a crash), then reaps the process.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Starts the node again from its directory on the same ports (after [`NodeProc::kill`]).
    pub fn restart(&mut self) {
        assert!(self.child.is_none(), "restart of a running node");
        self.child = Some(launch(&self.dir, self.port, self.bus));
    }
}

impl Drop for NodeProc {
    fn drop(&mut self) {
        self.kill();
    }
}

fn launch(dir: &Path, port: u16, bus: u16) -> Child {
    // Appended, so a restarted node's log follows the crashed one's.
    let log = std::fs::OpenOptions::new().create(true).append(true).open(dir.with_extension("log")).expect("log file");
    Command::new(std::env::current_exe().expect("test binary"))
        .args(["--exact", "cluster::node_process", "--nocapture", "--test-threads", "1"])
        .env(NODE_ENV, format!("{}|{port}|{bus}", dir.display()))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("spawn a node")
}

/// Starts a node on `dir` with a free client port and a free bus port.
pub fn spawn_node(dir: &Path) -> NodeProc {
    let (port, bus) = (free_port(), free_port());
    NodeProc { child: Some(launch(dir, port, bus)), dir: dir.to_path_buf(), port, bus }
}

/// Polls `f` every 100 ms until it gives `Some`, at most `limit`.
pub fn poll<T>(limit: Duration, what: &str, f: impl FnMut() -> Option<T>) -> T {
    poll_every(Duration::from_millis(100), limit, what, f)
}

/// Polls `f` every `every` until it gives `Some`, at most `limit`.
pub fn poll_every<T>(every: Duration, limit: Duration, what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let start = Instant::now();
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(start.elapsed() < limit, "{what}: not within {limit:?}");
        std::thread::sleep(every);
    }
}

/// One command on a new connection, `None` when the node does not answer.
pub fn try_cmd(addr: SocketAddr, args: &[&str]) -> Option<Resp> {
    let s = std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(500)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    let mut w = s.try_clone().ok()?;
    let bytes: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
    w.write_all(&encode(&bytes)).ok()?;
    wire_read(&mut BufReader::new(s))
}

/// A field of an INFO-style text (`field:value` lines).
pub fn info_field(text: &str, field: &str) -> Option<String> {
    text.lines().find_map(|l| l.strip_prefix(&format!("{field}:")).map(|v| v.trim().to_string()))
}

/// True when the node at `addr` answers ROLE as the master (the group's leader).
pub fn is_master(addr: SocketAddr) -> bool {
    matches!(try_cmd(addr, &["ROLE"]), Some(Resp::Array(v)) if v.first() == Some(&Resp::Bulk(b"master".to_vec())))
}

/// Each node's id (CLUSTER MYID's 40 hex digits).
pub fn node_ids(nodes: &[NodeProc]) -> Vec<String> {
    nodes.iter().map(|n| try_cmd(n.addr(), &["CLUSTER", "MYID"]).expect("myid").text()).collect()
}

/// The `CLUSTER SHALEDB-INIT` command forming a group of `ids` at `addrs` (`host:port@busport`).
pub fn init_command(ids: &[String], addrs: &[String]) -> Vec<String> {
    let mut init = vec!["CLUSTER".to_string(), "SHALEDB-INIT".to_string()];
    for (id, a) in ids.iter().zip(addrs) {
        init.push(id.clone());
        init.push(a.clone());
    }
    init
}

/// Waits until every node reports `cluster_state:ok`.
pub fn wait_cluster_ok(nodes: &[NodeProc], limit: Duration) {
    for n in nodes {
        poll(limit, "every node reports cluster_state:ok", || {
            let t = try_cmd(n.addr(), &["CLUSTER", "INFO"])?.text();
            (info_field(&t, "cluster_state")? == "ok").then_some(())
        });
    }
}

/// The node that says it leads (within [`WAIT`]), among the running ones.
pub fn leader_of(nodes: &[NodeProc]) -> usize {
    poll(WAIT, "a leader", || (0..nodes.len()).find(|&i| nodes[i].child.is_some() && is_master(nodes[i].addr())))
}

/// Starts three nodes under `tmp` (`n0`, `n1`, `n2`) and forms a group of them; `bus_of` gives the bus port
/// each is known by to the others (its own, or a proxy's in front of it). Returns once all report
/// `cluster_state:ok`.
pub fn start_group(tmp: &std::path::Path, mut bus_of: impl FnMut(&NodeProc) -> u16) -> Vec<NodeProc> {
    let mut nodes: Vec<NodeProc> = (0..3).map(|i| spawn_node(&tmp.join(format!("n{i}")))).collect();
    for n in &mut nodes {
        wait_answering(n, Duration::from_secs(20));
    }
    let ids = node_ids(&nodes);
    let addrs: Vec<String> = nodes.iter().map(|n| format!("127.0.0.1:{}@{}", n.port, bus_of(n))).collect();
    let init = init_command(&ids, &addrs);
    let init: Vec<&str> = init.iter().map(String::as_str).collect();
    assert_eq!(try_cmd(nodes[0].addr(), &init), Some(ok()));
    wait_cluster_ok(&nodes, Duration::from_secs(15));
    nodes
}
