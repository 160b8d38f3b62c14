//! Replica groups over real TCP on 127.0.0.1: election, replication, redirects, failover and restart, learners
//! by log and by snapshot, membership change, network faults through a proxy (delay, severed connections, one-way
//! loss, the leader isolated) and message faults (request frames lost, duplicated, reordered), and storage faults
//! in `cluster/storage.rs` (a full disk, a member restored from an old copy). Every wait is a bounded poll.

#[path = "cluster/proxy.rs"]
mod proxy;
#[path = "cluster/storage.rs"]
mod storage;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::{Duration, Instant};

use openraft::ServerState;
use proxy::{Mode, Proxy};
use shaledb::WriteBatch;
use shaledb_raft::{Error, Node, NodeConfig, NodeId, Response, TransportConfig};
use tempfile::TempDir;

/// Bounds every wait of these tests.
const WAIT: Duration = Duration::from_secs(20);
const POLL: Duration = Duration::from_millis(20);
const SNAPSHOT_CHUNK: u64 = 1024;

type Contents = Vec<(Vec<u8>, Vec<u8>)>;

fn config(dir: &TempDir, id: NodeId, listen: &str) -> NodeConfig {
    config_in(dir.path(), id, listen)
}

/// [`config`] for a node whose directory is `root/n<id>` (on the engine's file system: a real one by default).
fn config_in(root: &Path, id: NodeId, listen: &str) -> NodeConfig {
    let mut c = NodeConfig::new(root.join(format!("n{id}")), Some(id), listen);
    // Shorter than the production defaults so the tests end soon; still 6x the heartbeat, for a loaded machine.
    c.raft.heartbeat_interval = 100;
    c.raft.election_timeout_min = 600;
    c.raft.election_timeout_max = 1200;
    // Small chunks, so a snapshot travels as many install_snapshot requests (openraft's chunked transfer).
    c.raft.snapshot_max_chunk_size = SNAPSHOT_CHUNK;
    c.transport = TransportConfig {
        connect_timeout: Duration::from_millis(300),
        io_timeout: Duration::from_secs(2),
        backoff: Duration::from_millis(50),
        max_backoff: Duration::from_millis(300),
        ..TransportConfig::default()
    };
    c.propose_timeout = Duration::from_secs(3);
    c
}

/// Polls `f` until it returns `Some`, at most `limit` (and so a bounded number of times).
async fn wait_for<T>(what: &str, limit: Duration, mut f: impl FnMut() -> Option<T>) -> T {
    let start = Instant::now();
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(start.elapsed() < limit, "timed out after {limit:?} waiting for {what}");
        tokio::time::sleep(POLL).await;
    }
}

fn contents(node: &Node) -> Contents {
    node.db().iter().collect::<Result<Vec<_>, _>>().expect("read the state machine")
}

fn key(i: usize) -> String {
    format!("key{i:05}")
}

fn put(i: usize) -> WriteBatch {
    let mut b = WriteBatch::new();
    b.put(key(i), format!("value{i}"));
    b
}

fn expected(keys: impl IntoIterator<Item = usize>) -> Contents {
    let mut v: Contents = keys.into_iter().map(|i| (key(i).into_bytes(), format!("value{i}").into_bytes())).collect();
    v.sort();
    v
}

/// The node every live node agrees is the leader (and that says so itself).
async fn agreed_leader(nodes: &BTreeMap<NodeId, Node>) -> NodeId {
    wait_for("one agreed leader", WAIT, || {
        let statuses: Vec<_> = nodes.values().map(|n| n.status()).collect();
        let leader = statuses.iter().find(|s| s.role == ServerState::Leader)?.id;
        statuses.iter().all(|s| s.leader == Some(leader)).then_some(leader)
    })
    .await
}

/// Waits until every node in `nodes` holds exactly `want`, compared key by key.
async fn converge(nodes: &BTreeMap<NodeId, Node>, want: &Contents) {
    let start = Instant::now();
    loop {
        let differing: Vec<NodeId> = nodes.iter().filter(|(_, n)| &contents(n) != want).map(|(id, _)| *id).collect();
        if differing.is_empty() {
            return;
        }
        if start.elapsed() > WAIT {
            if let Some(&id) = differing.first() {
                let got = contents(&nodes[&id]);
                let first = got.iter().zip(want.iter()).position(|(a, b)| a != b);
                panic!(
                    "node {id} holds {} keys, {} expected; first difference at {first:?}; status {:?}",
                    got.len(),
                    want.len(),
                    nodes[&id].status()
                );
            }
        }
        tokio::time::sleep(POLL).await;
    }
}

/// Waits until every node reports the same last applied log id (the group is idle).
async fn same_last_applied(nodes: &BTreeMap<NodeId, Node>) {
    let start = Instant::now();
    loop {
        let statuses: Vec<_> = nodes.values().map(|n| n.status()).collect();
        if statuses.windows(2).all(|w| w[0].last_applied == w[1].last_applied) {
            return;
        }
        assert!(start.elapsed() < WAIT, "the nodes' last applied log ids differ after {WAIT:?}: {statuses:#?}");
        tokio::time::sleep(POLL).await;
    }
}

async fn start(dir: &TempDir, ids: &[NodeId]) -> BTreeMap<NodeId, Node> {
    let mut nodes = BTreeMap::new();
    for &id in ids {
        nodes.insert(id, Node::start(config(dir, id, "127.0.0.1:0")).await.expect("start node"));
    }
    nodes
}

fn members(nodes: &BTreeMap<NodeId, Node>) -> BTreeMap<NodeId, String> {
    nodes.iter().map(|(id, n)| (*id, n.addr().to_string())).collect()
}

async fn shutdown_all(nodes: BTreeMap<NodeId, Node>) {
    for (_, n) in nodes {
        n.shutdown(WAIT).await.expect("shutdown");
    }
}

/// Proposes on whichever node leads, following NotLeader redirects and riding out elections (bounded).
async fn propose_anywhere(nodes: &BTreeMap<NodeId, Node>, batch: &WriteBatch) -> Response {
    let start = Instant::now();
    let mut target = *nodes.keys().next().expect("a node");
    loop {
        let e = match nodes[&target].propose(batch).await {
            Ok(r) => return r,
            Err(e) => e,
        };
        assert!(start.elapsed() < WAIT, "no leader took the proposal within {WAIT:?}: {e}");
        tokio::time::sleep(POLL).await;
        target = match e {
            Error::NotLeader { leader_id: Some(l), .. } if nodes.contains_key(&l) => l,
            // No leader known, or a timeout: try the next node (the leader may have changed).
            _ => *nodes.range(target + 1..).next().or_else(|| nodes.iter().next()).expect("a node").0,
        };
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_nodes_elect_replicate_and_redirect() {
    let dir = tempfile::tempdir().unwrap();
    let nodes = start(&dir, &[1, 2, 3]).await;
    nodes[&1].initialize(members(&nodes)).await.expect("initialize");
    let leader = agreed_leader(&nodes).await;
    for i in 0..40 {
        assert_eq!(nodes[&leader].propose(&put(i)).await.expect("propose on the leader"), Response::Applied);
    }
    // Follower: NotLeader with the leader's id and transport address.
    let follower = *nodes.keys().find(|&&id| id != leader).unwrap();
    match nodes[&follower].propose(&put(999)).await {
        Err(Error::NotLeader { leader_id, leader_addr }) => {
            assert_eq!(leader_id, Some(leader));
            assert_eq!(leader_addr.as_deref(), Some(nodes[&leader].addr()));
        }
        other => panic!("a follower's propose gave {other:?}"),
    }
    assert!(nodes[&follower].ensure_linearizable().await.unwrap_err().is_not_leader());
    // A linearizable read on the leader sees every acknowledged write.
    nodes[&leader].ensure_linearizable().await.expect("read index on the leader");
    assert_eq!(contents(&nodes[&leader]), expected(0..40));
    converge(&nodes, &expected(0..40)).await;
    // Connections are pooled: a follower served every append, heartbeat and read-index check on a few.
    for n in nodes.values().filter(|n| n.id() != leader) {
        let [accepted, requests, bad, misdirected] = n.transport_counters();
        println!("node {}: {accepted} connections accepted for {requests} requests", n.id());
        assert!(requests >= 40 && accepted * 4 <= requests, "{accepted} connections for {requests} requests");
        assert_eq!((bad, misdirected), (0, 0));
    }
    // openraft's metrics follow the applied data shortly after (a follower's, after the next heartbeat).
    same_last_applied(&nodes).await;
    for n in nodes.values() {
        let s = n.status();
        assert_eq!(s.voters, BTreeSet::from([1, 2, 3]));
        assert_eq!(s.leader, Some(leader));
        assert!(s.term >= 1);
    }
    shutdown_all(nodes).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_failover_and_restart_catch_up() {
    let dir = tempfile::tempdir().unwrap();
    let mut nodes = start(&dir, &[1, 2, 3]).await;
    nodes[&1].initialize(members(&nodes)).await.expect("initialize");
    let old = agreed_leader(&nodes).await;
    let old_addr = nodes[&old].addr().to_string();
    let mut acked = Vec::new();
    for i in 0..30 {
        nodes[&old].propose(&put(i)).await.expect("propose");
        acked.push(i);
    }
    let stopped_at = Instant::now();
    nodes.remove(&old).unwrap().shutdown(WAIT).await.expect("shut the leader down");
    let new = agreed_leader(&nodes).await;
    println!("leader {old} shut down; node {new} leads after {:?}", stopped_at.elapsed());
    assert_ne!(new, old);
    for i in 30..60 {
        nodes[&new].propose(&put(i)).await.expect("propose on the new leader");
        acked.push(i);
    }
    converge(&nodes, &expected(acked.iter().copied())).await;
    // The old leader comes back from its directory, on its old address, and catches up.
    let restarted = Node::start(config(&dir, old, &old_addr)).await.expect("restart the old leader");
    assert_eq!(restarted.id(), old);
    nodes.insert(old, restarted);
    converge(&nodes, &expected(acked.iter().copied())).await;
    let leader = agreed_leader(&nodes).await;
    nodes[&leader].propose(&put(60)).await.expect("propose after the restart");
    acked.push(60);
    converge(&nodes, &expected(acked.iter().copied())).await;
    shutdown_all(nodes).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn learners_catch_up_by_log_and_by_snapshot_then_vote() {
    let dir = tempfile::tempdir().unwrap();
    let mut nodes = start(&dir, &[1, 2, 3]).await;
    nodes[&1].initialize(members(&nodes)).await.expect("initialize");
    let leader = agreed_leader(&nodes).await;
    for i in 0..20 {
        nodes[&leader].propose(&put(i)).await.expect("propose");
    }
    // Learner 4: the log is whole, so it is replicated entry by entry.
    let n4 = Node::start(config(&dir, 4, "127.0.0.1:0")).await.unwrap();
    nodes[&leader].add_learner(4, n4.addr(), true).await.expect("add learner 4");
    nodes.insert(4, n4);
    converge(&nodes, &expected(0..20)).await;
    // Caught up by log: nothing purged (a snapshot install would have moved its purged mark to the snapshot).
    assert_eq!(nodes[&4].status().purged, None, "learner 4 caught up by log, not by snapshot");
    assert_eq!(nodes[&4].status().learners, BTreeSet::from([4]));
    for i in 20..40 {
        nodes[&leader].propose(&put(i)).await.expect("propose");
    }
    // A snapshot, then the log purged up to it: a new learner can only be sent the snapshot.
    let snap = nodes[&leader].snapshot(WAIT).await.expect("snapshot").expect("a snapshot log id");
    nodes[&leader].purge_log(snap.index).await.expect("purge");
    wait_for("the leader's log purged", WAIT, || {
        (nodes[&leader].status().purged.map(|p| p.index) >= Some(snap.index)).then_some(())
    })
    .await;
    let archive = std::fs::metadata(dir.path().join(format!("n{leader}/sm/snapshot"))).expect("snapshot file").len();
    assert!(archive > 4 * SNAPSHOT_CHUNK, "a {archive}-byte snapshot does not need several chunks");
    let n5 = Node::start(config(&dir, 5, "127.0.0.1:0")).await.unwrap();
    nodes[&leader].add_learner(5, n5.addr(), true).await.expect("add learner 5");
    nodes.insert(5, n5);
    converge(&nodes, &expected(0..40)).await;
    // Caught up by snapshot: its log starts after the snapshot (openraft reports the installed snapshot's last
    // log id as purged), and it applied up to there without ever holding the entries.
    wait_for("learner 5's metrics after the install", WAIT, || {
        let s5 = nodes[&5].status();
        (s5.last_applied.map(|a| a.index) >= Some(snap.index)).then_some(())
    })
    .await;
    let s5 = nodes[&5].status();
    assert!(s5.purged.map(|p| p.index) >= Some(snap.index), "learner 5 did not install the snapshot: {s5:?}");
    // Promotion: all five vote; the group still commits and converges.
    nodes[&leader].change_membership(BTreeSet::from([1, 2, 3, 4, 5]), false).await.expect("promote");
    wait_for("five voters everywhere", WAIT, || {
        nodes.values().all(|n| n.status().voters == BTreeSet::from([1, 2, 3, 4, 5])).then_some(())
    })
    .await;
    for i in 40..50 {
        propose_anywhere(&nodes, &put(i)).await;
    }
    converge(&nodes, &expected(0..50)).await;
    shutdown_all(nodes).await;
}

/// Three nodes whose every directed link goes through a proxy of its own.
struct Proxied {
    nodes: BTreeMap<NodeId, Node>,
    links: BTreeMap<(NodeId, NodeId), Proxy>,
    /// Each node's configuration, to start it again.
    configs: BTreeMap<NodeId, NodeConfig>,
}

impl Proxied {
    async fn start(dir: &TempDir, ids: &[NodeId]) -> Proxied {
        // The proxies first, each holding its port; the nodes on ports of their own (:0), so no port is released
        // and bound again by someone else (tests run in parallel); then each proxy learns its node's address.
        let mut links = BTreeMap::new();
        for &from in ids {
            for &to in ids.iter().filter(|&&to| to != from) {
                // A fixed seed per link: a failing run's fault pattern comes again (up to thread timing).
                let seed = 0x5eed_0000 + from * 16 + to;
                links.insert((from, to), Proxy::start(String::new(), seed).await);
            }
        }
        let (mut nodes, mut configs) = (BTreeMap::new(), BTreeMap::new());
        for &id in ids {
            let mut c = config(dir, id, "127.0.0.1:0");
            c.transport.dial_overrides =
                links.iter().filter(|((f, _), _)| *f == id).map(|((_, t), p)| (*t, p.addr().to_string())).collect();
            // A lost snapshot chunk costs its RPC's whole timeout: keep it short, loopback installs are quick.
            c.raft.install_snapshot_timeout = 1000;
            let node = Node::start(c.clone()).await.expect("start node");
            // A restart binds the same port again.
            c.listen = node.addr().to_string();
            configs.insert(id, c);
            nodes.insert(id, node);
        }
        for ((_, to), p) in &links {
            p.set_target(nodes[to].addr());
        }
        Proxied { nodes, links, configs }
    }

    /// Stops node `id` (its directory stays).
    async fn stop(&mut self, id: NodeId) {
        self.nodes.remove(&id).expect("a running node").shutdown(WAIT).await.expect("shutdown");
    }

    /// Starts node `id` again from its directory, on its address and behind its proxies.
    async fn restart(&mut self, id: NodeId) {
        let node = Node::start(self.configs[&id].clone()).await.expect("restart node");
        self.nodes.insert(id, node);
    }

    fn set(&self, from: NodeId, to: NodeId, mode: Mode) {
        self.links[&(from, to)].set(mode);
    }

    fn isolate(&self, id: NodeId, mode: Mode) {
        for &(f, t) in self.links.keys() {
            if f == id || t == id {
                self.set(f, t, mode);
            }
        }
    }

    /// What all proxies did so far: request frames forwarded, lost, duplicated, delivered late.
    fn fault_totals(&self) -> [u64; 4] {
        self.links.values().fold([0; 4], |mut sum, p| {
            for (k, v) in p.stats().snapshot().iter().enumerate() {
                sum[k] += v;
            }
            sum
        })
    }

    fn heal(&self) {
        for p in self.links.values() {
            p.set(Mode::Pass);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn faults_isolated_leader_never_acknowledges_and_nodes_converge() {
    let dir = tempfile::tempdir().unwrap();
    let g = Proxied::start(&dir, &[1, 2, 3]).await;
    g.nodes[&1].initialize(members(&g.nodes)).await.expect("initialize");
    let mut acked: Vec<usize> = Vec::new();
    let old = agreed_leader(&g.nodes).await;
    for i in 0..10 {
        g.nodes[&old].propose(&put(i)).await.expect("propose");
        acked.push(i);
    }

    // Delay on every link: slower, still committing.
    for p in g.links.values() {
        p.set(Mode::Delay(Duration::from_millis(15)));
    }
    for i in 10..15 {
        propose_anywhere(&g.nodes, &put(i)).await;
        acked.push(i);
    }
    g.heal();

    // The leader cut off (connections dropped both ways): it must never acknowledge.
    let old = agreed_leader(&g.nodes).await;
    g.isolate(old, Mode::Drop);
    let isolated = async {
        let r = g.nodes[&old].propose(&put(1000)).await;
        assert!(r.is_err(), "the isolated leader acknowledged a proposal: {r:?}");
        println!("the isolated leader's proposal: {}", r.unwrap_err());
        let read = g.nodes[&old].ensure_linearizable().await;
        assert!(read.is_err(), "the isolated leader confirmed a linearizable read: {read:?}");
    };
    let majority: BTreeMap<NodeId, &Node> =
        g.nodes.iter().filter(|(id, _)| **id != old).map(|(i, n)| (*i, n)).collect();
    let majority_side = async {
        let started = Instant::now();
        let new = wait_for("a leader in the majority", WAIT, || {
            majority.values().find(|n| n.status().role == ServerState::Leader).map(|n| n.id())
        })
        .await;
        println!("majority elected node {new} after {:?}", started.elapsed());
        let mut done = Vec::new();
        for i in 15..25 {
            let start = Instant::now();
            loop {
                let leader = majority.values().find(|n| n.status().role == ServerState::Leader);
                if let Some(Ok(_)) = match leader {
                    Some(n) => Some(n.propose(&put(i)).await),
                    None => None,
                } {
                    break;
                }
                assert!(start.elapsed() < WAIT, "the majority did not commit key {i}");
                tokio::time::sleep(POLL).await;
            }
            done.push(i);
        }
        done
    };
    let ((), done) = tokio::join!(isolated, majority_side);
    acked.extend(done);

    // One-way: a follower stops hearing the leader (leader -> follower blackholed); the other way works.
    g.heal();
    let leader = agreed_leader(&g.nodes).await;
    let deaf = *g.nodes.keys().find(|&&id| id != leader).unwrap();
    g.set(leader, deaf, Mode::Blackhole);
    for i in 25..35 {
        propose_anywhere(&g.nodes, &put(i)).await;
        acked.push(i);
    }
    g.heal();

    // Healed: all three hold every acknowledged write and nothing else (key 1000 was never acknowledged).
    agreed_leader(&g.nodes).await;
    propose_anywhere(&g.nodes, &put(35)).await;
    acked.push(35);
    converge(&g.nodes, &expected(acked.iter().copied())).await;
    let Proxied { nodes, links, .. } = g;
    drop(links);
    shutdown_all(nodes).await;
}

/// Lost, duplicated and reordered request frames on every link (the proxy's message-level modes), one kind of
/// fault at a time and then all mixed: proposals go on being acknowledged (riding out timeouts and elections),
/// and after healing all three nodes hold exactly the acknowledged writes. A lost append makes the sender's RPC
/// time out and its transport reconnect; a duplicated or late append or vote must never truncate a committed
/// entry or elect a second leader.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn message_faults_lost_duplicated_and_reordered_frames_lose_no_acknowledged_write() {
    const PER_PHASE: usize = 100;
    let dir = tempfile::tempdir().unwrap();
    let g = Proxied::start(&dir, &[1, 2, 3]).await;
    g.nodes[&1].initialize(members(&g.nodes)).await.expect("initialize");
    agreed_leader(&g.nodes).await;
    let mut acked: Vec<usize> = Vec::new();
    let phases: [(&str, Mode); 4] = [
        ("lose 20%", Mode::LoseFrames { percent: 20 }),
        ("duplicate 50%", Mode::Duplicate { percent: 50, after: Duration::from_millis(40) }),
        ("reorder 25%", Mode::Reorder { percent: 25, newer: 3, max_hold: Duration::from_millis(400) }),
        ("mixed 30%", Mode::Mixed { percent: 30 }),
    ];
    let mut next = 0;
    for (name, mode) in phases {
        let before = g.fault_totals();
        for p in g.links.values() {
            p.set(mode);
        }
        let started = Instant::now();
        // Four proposals at a time, so appends carry several entries and a late one overlaps newer ones.
        for _ in 0..PER_PHASE / 4 {
            let (a, b, c, d) = (put(next), put(next + 1), put(next + 2), put(next + 3));
            tokio::join!(
                propose_anywhere(&g.nodes, &a),
                propose_anywhere(&g.nodes, &b),
                propose_anywhere(&g.nodes, &c),
                propose_anywhere(&g.nodes, &d)
            );
            acked.extend(next..next + 4);
            next += 4;
        }
        let now = g.fault_totals();
        let [forwarded, lost, duplicated, late] = [0, 1, 2, 3].map(|k| now[k] - before[k]);
        // Duplicates and late copies are counted when their reply comes, possibly in the next phase.
        println!(
            "{name}: {PER_PHASE} writes acknowledged in {:?}; request frames forwarded {forwarded}, lost {lost}, \
             duplicates answered {duplicated}, late copies answered {late}",
            started.elapsed()
        );
    }
    g.heal();
    // Late copies still in flight arrive after the heal, as old packets would.
    agreed_leader(&g.nodes).await;
    propose_anywhere(&g.nodes, &put(next)).await;
    acked.push(next);
    converge(&g.nodes, &expected(acked.iter().copied())).await;
    let [forwarded, lost, duplicated, late] = g.fault_totals();
    println!("in all: {forwarded} forwarded, {lost} lost, {duplicated} duplicated, {late} delivered late");
    assert!(lost > 0 && duplicated > 0 && late > 0, "a fault never fired: {:?}", g.fault_totals());
    same_last_applied(&g.nodes).await;
    let Proxied { nodes, links, .. } = g;
    drop(links);
    shutdown_all(nodes).await;
}

/// A follower behind a purged log catches up by snapshot while every link loses, duplicates and reorders request
/// frames: snapshot chunks time out and are sent again, and old chunks arrive late on other connections. The
/// follower installs one whole snapshot and ends with exactly the acknowledged writes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn message_faults_on_snapshot_chunks_still_install_a_whole_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let mut g = Proxied::start(&dir, &[1, 2, 3]).await;
    g.nodes[&1].initialize(members(&g.nodes)).await.expect("initialize");
    let leader = agreed_leader(&g.nodes).await;
    let lag = *g.nodes.keys().find(|&&id| id != leader).expect("a follower");
    for i in 0..20 {
        propose_anywhere(&g.nodes, &put(i)).await;
    }
    converge(&g.nodes, &expected(0..20)).await;
    g.stop(lag).await;
    // Ten keys per entry: a snapshot of many chunks, quickly.
    for first in (20..300).step_by(10) {
        let mut b = WriteBatch::new();
        for i in first..first + 10 {
            b.put(key(i), format!("value{i}"));
        }
        propose_anywhere(&g.nodes, &b).await;
    }
    // Both running nodes snapshot and purge, so whichever leads must send the snapshot.
    // The lower of the two: the follower gets one of them.
    let mut snap_index = u64::MAX;
    for n in g.nodes.values() {
        let snap = n.snapshot(WAIT).await.expect("snapshot").expect("a snapshot log id");
        n.purge_log(snap.index).await.expect("purge");
        snap_index = snap_index.min(snap.index);
    }
    wait_for("both logs purged", WAIT, || {
        g.nodes.values().all(|n| n.status().purged.is_some_and(|p| p.index >= snap_index)).then_some(())
    })
    .await;
    let archive = std::fs::metadata(dir.path().join(format!("n{leader}/sm/snapshot"))).expect("snapshot file").len();
    println!("snapshot at index {snap_index}: {archive} bytes, {} chunks", archive.div_ceil(SNAPSHOT_CHUNK));
    for p in g.links.values() {
        p.set(Mode::Mixed { percent: 30 });
    }
    let started = Instant::now();
    g.restart(lag).await;
    converge(&g.nodes, &expected(0..300)).await;
    println!("node {lag} caught up under faults in {:?}", started.elapsed());
    // openraft's metrics follow the install shortly after the data.
    let s = wait_for("the follower's metrics after the install", WAIT, || {
        let s = g.nodes[&lag].status();
        (s.last_applied.map(|a| a.index) >= Some(snap_index)).then_some(s)
    })
    .await;
    let [forwarded, lost, duplicated, late] = g.fault_totals();
    println!("request frames: {forwarded} forwarded, {lost} lost, {duplicated} duplicated, {late} delivered late");
    assert!(s.purged.is_some_and(|p| p.index >= snap_index), "node {lag} did not install the snapshot: {s:?}");
    g.heal();
    propose_anywhere(&g.nodes, &put(300)).await;
    converge(&g.nodes, &expected(0..301)).await;
    let Proxied { nodes, links, .. } = g;
    drop(links);
    shutdown_all(nodes).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listener_closes_a_connection_on_a_bad_frame_and_refuses_a_misdirected_request() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let dir = tempfile::tempdir().unwrap();
    let node = Node::start(config(&dir, 7, "127.0.0.1:0")).await.unwrap();
    let io = Duration::from_secs(5);

    // A hostile length: refused from the header alone, the connection closed, nothing allocated for it.
    let mut s = tokio::net::TcpStream::connect(node.addr()).await.unwrap();
    let mut header = vec![shaledb_raft::wire::VERSION, 0x02];
    header.extend_from_slice(&u32::MAX.to_le_bytes());
    s.write_all(&header).await.unwrap();
    let mut buf = [0u8; 16];
    let n = tokio::time::timeout(io, s.read(&mut buf)).await.expect("closed in time").unwrap_or(0);
    assert_eq!(n, 0, "the listener answered a frame it must refuse");

    // A corrupt checksum: closed too.
    let mut s = tokio::net::TcpStream::connect(node.addr()).await.unwrap();
    let mut f = shaledb_raft::wire::encode(shaledb_raft::wire::Kind::Vote, &(7u64, 1u8), 1 << 20).unwrap();
    let last = f.len() - 1;
    f[last] ^= 0xff;
    s.write_all(&f).await.unwrap();
    let n = tokio::time::timeout(io, s.read(&mut buf)).await.expect("closed in time").unwrap_or(0);
    assert_eq!(n, 0);

    // A well-formed request meant for another node id: a `refused` frame, then the close.
    let vote = openraft::raft::VoteRequest::<NodeId> { vote: openraft::Vote::new(1, 8), last_log_id: None };
    let f = shaledb_raft::wire::encode(shaledb_raft::wire::Kind::Vote, &(8u64, vote), 1 << 20).unwrap();
    let mut s = tokio::net::TcpStream::connect(node.addr()).await.unwrap();
    s.write_all(&f).await.unwrap();
    let (kind, payload) = shaledb_raft::wire::read_frame(&mut s, 1 << 20, Some(io), io).await.expect("a reply");
    assert_eq!(kind, shaledb_raft::wire::Kind::Refused);
    let why: String = shaledb_raft::wire::decode_payload(kind, &payload).unwrap();
    assert!(why.contains("not node 8"), "{why}");

    let [accepted, _, bad, misdirected] = node.transport_counters();
    assert_eq!((accepted, bad, misdirected), (3, 2, 1));
    // Still serving: a proper vote request for node 7 gets a vote reply.
    let vote = openraft::raft::VoteRequest::<NodeId> { vote: openraft::Vote::new(1, 8), last_log_id: None };
    let f = shaledb_raft::wire::encode(shaledb_raft::wire::Kind::Vote, &(7u64, vote), 1 << 20).unwrap();
    let mut s = tokio::net::TcpStream::connect(node.addr()).await.unwrap();
    s.write_all(&f).await.unwrap();
    let (kind, _) = shaledb_raft::wire::read_frame(&mut s, 1 << 20, Some(io), io).await.expect("a reply");
    assert_eq!(kind, shaledb_raft::wire::Kind::VoteReply);
    node.shutdown(WAIT).await.unwrap();
}

/// What each way a peer can fail becomes for openraft: the variant decides whether it backs off.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transport_failures_map_to_openraft_errors() {
    use openraft::error::RPCError;
    use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
    use openraft::BasicNode;
    use shaledb_raft::wire::{self, Kind};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    let cfg = TransportConfig {
        connect_timeout: Duration::from_millis(300),
        io_timeout: Duration::from_millis(300),
        backoff: Duration::from_millis(50),
        max_backoff: Duration::from_millis(300),
        ..TransportConfig::default()
    };
    let vote = || openraft::raft::VoteRequest::<NodeId> { vote: openraft::Vote::new(1, 1), last_log_id: None };
    // A short ttl: the wait for a reply is then io_timeout.
    let opt = || RPCOption::new(Duration::from_millis(100));
    let mut factory = shaledb_raft::Network::new(1, cfg);

    // Nobody listens: unreachable, and openraft's backoff grows to its cap.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().to_string();
    let mut c = factory.new_client(2, &BasicNode { addr: closed }).await;
    let e = c.vote(vote(), opt()).await.unwrap_err();
    assert!(matches!(e, RPCError::Unreachable(_)), "{e}");
    let waits: Vec<Duration> = c.backoff().take(5).collect();
    assert_eq!(waits, [50, 100, 200, 300, 300].map(Duration::from_millis));

    // A fake peer per behaviour: it reads one request, then acts.
    async fn fake(act: fn(Vec<u8>) -> Option<Vec<u8>>) -> String {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap().to_string();
        tokio::spawn(async move {
            loop {
                let Ok((mut s, _)) = l.accept().await else { return };
                tokio::spawn(async move {
                    let io = Duration::from_secs(5);
                    let Ok((_, payload)) = wire::read_frame(&mut s, 1 << 20, Some(io), io).await else { return };
                    // No reply: the connection closes as this task ends.
                    if let Some(reply) = act(payload) {
                        let _ = s.write_all(&reply).await;
                        // Keep the connection open until the client closes it.
                        let _ = s.read(&mut [0u8; 1]).await;
                    }
                });
            }
        });
        addr
    }
    type Check = fn(&RPCError<NodeId, BasicNode, openraft::error::RaftError<NodeId>>) -> bool;
    type Act = fn(Vec<u8>) -> Option<Vec<u8>>;
    let cases: [(&str, Act, Check); 3] = [
        ("closes without a reply", |_| None, |e| matches!(e, RPCError::Network(_))),
        (
            "refuses",
            |_| Some(wire::encode(Kind::Refused, &"not me".to_string(), 1 << 20).unwrap()),
            |e| matches!(e, RPCError::Unreachable(_)),
        ),
        (
            "replies with a corrupt frame",
            |_| {
                let mut f = wire::encode(Kind::VoteReply, &0u8, 1 << 20).unwrap();
                let last = f.len() - 1;
                f[last] ^= 1;
                Some(f)
            },
            |e| matches!(e, RPCError::Network(_)),
        ),
    ];
    for (i, (what, act, check)) in cases.into_iter().enumerate() {
        let addr = fake(act).await;
        let mut c = factory.new_client(10 + i as u64, &BasicNode { addr }).await;
        let e = c.vote(vote(), opt()).await.unwrap_err();
        assert!(check(&e), "a peer that {what} gave {e}");
    }

    // A peer that accepts and never answers: a timeout after io_timeout.
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = silent.local_addr().unwrap().to_string();
    let mut c = factory.new_client(20, &BasicNode { addr }).await;
    let started = Instant::now();
    let e = c.vote(vote(), opt()).await.unwrap_err();
    assert!(matches!(e, RPCError::Timeout(_)), "{e}");
    assert!(started.elapsed() < Duration::from_secs(5));
    drop(silent);
}

/// An SST of `key(i)` = `value{i}` for `i` in `range`, as `SstFileWriter` writes it.
fn table_of(range: std::ops::Range<usize>) -> Vec<u8> {
    let fs = shaledb_vfs::MemFs::new();
    let opts = shaledb::Options { fs: std::sync::Arc::new(fs.clone()), ..shaledb::Options::default() };
    let mut w = shaledb::ingest::SstFileWriter::create(&opts);
    w.open("/t.sst").unwrap();
    for i in range {
        w.put(key(i), format!("value{i}")).unwrap();
    }
    w.finish().unwrap();
    shaledb::Fs::read_all(&fs, std::path::Path::new("/t.sst")).unwrap()
}

/// A proposal with tables (a slot copied in, issue 44) reaches every member: each ingests the tables and
/// applies the batch, and a member that was down gets them from the log after its restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tables_reach_every_member_and_one_that_was_down() {
    let dir = tempfile::tempdir().unwrap();
    let mut nodes = start(&dir, &[1, 2, 3]).await;
    nodes[&1].initialize(members(&nodes)).await.expect("initialize");
    let leader = agreed_leader(&nodes).await;
    for i in 0..10 {
        assert_eq!(nodes[&leader].propose(&put(i)).await.unwrap(), Response::Applied);
    }
    // One follower down while the tables are proposed.
    let down = *nodes.keys().find(|&&id| id != leader).unwrap();
    let down_addr = nodes[&down].addr().to_string();
    nodes.remove(&down).unwrap().shutdown(WAIT).await.expect("shutdown");
    let proposal = shaledb_raft::Proposal::with_tables(&put(10), vec![table_of(100..600), table_of(600..1000)]);
    let (r, _) = nodes[&leader].propose_proposal_at(proposal).await.expect("propose the tables");
    assert_eq!(r, Response::Applied);
    let want = expected((0..11).chain(100..1000));
    converge(&nodes, &want).await;
    // Back: it catches up from the log.
    nodes.insert(down, Node::start(config(&dir, down, &down_addr)).await.expect("restart on its address"));
    converge(&nodes, &want).await;
    same_last_applied(&nodes).await;
    shutdown_all(nodes).await;
}
