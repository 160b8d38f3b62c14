//! Storage faults in a replica group: a full disk on the leader and on a follower, and a follower restarted
//! from an old copy of its directory (a restored backup).
//!
//! - Disk full: each node runs on a `MemFs` of its own (`NodeConfig::engine.fs`: the log, the state machine,
//!   its snapshots and the node-id file all go through it), and the full node's writes fail with ENOSPC from
//!   then on. The full node never acknowledges a write (its proposal fails, its raft stops with a storage
//!   error that names the lack of space), the two others go on committing; then the disk is freed, the node is
//!   crashed (a power loss: what it had not synced is gone) and restarted, and it catches up. Every
//!   acknowledged write ends on all three, and nothing that was not proposed.
//! - Restored from an old copy: a follower's directory is copied while it is down, more writes are
//!   acknowledged by all three, and the follower comes back from the copy: its log is shorter than the leader
//!   knew it was. It rejoins and catches up, the leader survives that (openraft's
//!   `loosen-follower-log-revert`), nothing acknowledged is lost.
//! - Restored, plus a second failure: the hazard that makes "restore a member" mean remove-node, wipe, add-node.
//!   A restored member has forgotten acknowledgements Raft counted on; with the leader down, it and a lagging
//!   member are a majority without the writes it forgot, and they go on without them.

use std::path::PathBuf;
use std::sync::Arc;

use shaledb_vfs::{FaultError, FaultPlan, FsOp, MemFs, PowerLoss};

use super::*;

/// Where each node's directory lives on its `MemFs`.
const MEM_ROOT: &str = "/raft";

fn mem_config(fs: &MemFs, id: NodeId, listen: &str) -> NodeConfig {
    let mut c = config_in(Path::new(MEM_ROOT), id, listen);
    c.engine = shaledb::Options { fs: Arc::new(fs.clone()), ..shaledb::Options::default() };
    c
}

/// Three nodes, each on a `MemFs` of its own, formed into a group.
async fn start_on_memfs() -> (BTreeMap<NodeId, Node>, BTreeMap<NodeId, MemFs>) {
    let mut nodes = BTreeMap::new();
    let mut disks = BTreeMap::new();
    for id in [1, 2, 3] {
        let fs = MemFs::new();
        nodes.insert(id, Node::start(mem_config(&fs, id, "127.0.0.1:0")).await.expect("start node"));
        disks.insert(id, fs);
    }
    nodes[&1].initialize(members(&nodes)).await.expect("initialize");
    (nodes, disks)
}

/// Waits until `node`'s raft has stopped on its own and returns the fatal error it reports.
async fn stopped_with(node: &Node) -> String {
    wait_for("the full node's raft to stop", WAIT, || match &node.raft().metrics().borrow().running_state {
        Ok(()) => None,
        Err(fatal) => Some(fatal.to_string()),
    })
    .await
}

/// Waits until every node holds exactly `acked`, or `acked` plus the one write whose outcome is unknown (its
/// proposal failed on the full node, but the entry may have reached a follower and been committed by the next
/// leader: Raft's "outcome unknown", never a lost acknowledged write).
async fn converge_allowing(nodes: &BTreeMap<NodeId, Node>, acked: &[usize], unknown: usize) {
    let with_unknown = expected(acked.iter().copied().chain([unknown]));
    let start = Instant::now();
    loop {
        let all: Vec<Contents> = nodes.values().map(contents).collect();
        if let Some(first) = all.first() {
            if all.iter().all(|c| c == first) && (first == &expected(acked.iter().copied()) || first == &with_unknown) {
                let outcome = if first == &with_unknown { "committed" } else { "not committed" };
                println!("the write refused by the full node was in the end {outcome}");
                return;
            }
        }
        if start.elapsed() > WAIT {
            // The usual, detailed message.
            converge(nodes, &expected(acked.iter().copied())).await;
        }
        tokio::time::sleep(POLL).await;
    }
}

/// Proposes `keys` on whichever of `nodes` leads, recording each acknowledged one.
async fn propose_all(nodes: &BTreeMap<NodeId, Node>, keys: std::ops::Range<usize>, acked: &mut Vec<usize>) {
    for i in keys {
        assert_eq!(propose_anywhere(nodes, &put(i)).await, Response::Applied);
        acked.push(i);
    }
}

/// Fills node `full`'s disk while it is `role`, checks it acknowledges nothing and stops with a clear error while
/// the other two go on, then frees the disk, crashes and restarts it, and checks it catches up.
async fn disk_full(full_role: ServerState) {
    let (mut nodes, disks) = start_on_memfs().await;
    let leader = agreed_leader(&nodes).await;
    let mut acked = Vec::new();
    propose_all(&nodes, 0..20, &mut acked).await;
    converge(&nodes, &expected(acked.iter().copied())).await;
    let full = match full_role {
        ServerState::Leader => leader,
        _ => *nodes.keys().find(|&&id| id != leader).expect("a follower"),
    };
    let full_addr = nodes[&full].addr().to_string();

    // The disk is full from now on: every write(2) fails with ENOSPC (so does every fsync and create).
    let filled = Instant::now();
    disks[&full].set_faults(FaultPlan::from_nth(FsOp::Write, 1, FaultError::Enospc));
    let unknown = 1000;
    if full_role == ServerState::Leader {
        let r = nodes[&full].propose(&put(unknown)).await;
        println!("propose on the full leader: {r:?}");
        assert!(r.is_err(), "the full leader acknowledged a write it could not make durable: {r:?}");
    } else {
        // An idle follower writes nothing, so it notices the full disk with the next append: the leader and the
        // other follower are a majority and acknowledge it.
        propose_all(&nodes, 20..21, &mut acked).await;
    }
    let why = stopped_with(&nodes[&full]).await;
    println!("node {full} ({full_role:?}) stopped {:?} after its disk filled: {why}", filled.elapsed());
    assert!(why.contains("No space left on device"), "the full node's error does not say why: {why}");
    // Stopped, it refuses every later call with the same clear error, never a hang and never an acknowledgement.
    let again = nodes[&full].propose(&put(unknown + 1)).await;
    match &again {
        Err(Error::Stopped(_)) | Err(Error::NotLeader { .. }) => {}
        other => panic!("a stopped node's propose gave {other:?}"),
    }
    println!("a later propose on node {full}: {}", again.unwrap_err());

    // The other two elect (or keep) a leader and go on acknowledging.
    let stopped = nodes.remove(&full).expect("the full node");
    let started = Instant::now();
    let survivors_leader = agreed_leader(&nodes).await;
    propose_all(&nodes, 21..40, &mut acked).await;
    println!(
        "nodes {:?} led by {survivors_leader}: writes acknowledged up to key 39 {:?} after the disk filled",
        nodes.keys(),
        started.elapsed()
    );

    // Shutting the stopped node down is bounded and says what went wrong; then the machine crashes: a power loss
    // drops what was never synced.
    let shut = tokio::time::timeout(WAIT, stopped.shutdown(WAIT)).await.expect("the stopped node shuts down in time");
    println!("shutdown of the stopped node: {shut:?}");
    disks[&full].clear_faults();
    disks[&full].power_loss(PowerLoss::DropUnsynced, 43);
    let restarted_at = Instant::now();
    let back = Node::start(mem_config(&disks[&full], full, &full_addr)).await.expect("restart with room on the disk");
    nodes.insert(full, back);
    converge_allowing(&nodes, &acked, unknown).await;
    println!("node {full} caught up {:?} after its restart", restarted_at.elapsed());
    propose_all(&nodes, 40..45, &mut acked).await;
    converge_allowing(&nodes, &acked, unknown).await;
    shutdown_all(nodes).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn disk_full_on_the_leader_acknowledges_nothing_then_it_rejoins() {
    disk_full(ServerState::Leader).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn disk_full_on_a_follower_stops_it_cleanly_then_it_rejoins() {
    disk_full(ServerState::Follower).await;
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("create the copy's directory");
    for e in std::fs::read_dir(from).expect("list the directory") {
        let e = e.expect("a directory entry");
        let target = to.join(e.file_name());
        if e.file_type().expect("file type").is_dir() {
            copy_tree(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), &target).expect("copy a file");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn follower_restored_from_an_old_copy_of_its_directory_rejoins_and_catches_up() {
    let dir = tempfile::tempdir().unwrap();
    let backup = tempfile::tempdir().unwrap();
    let mut nodes = start(&dir, &[1, 2, 3]).await;
    nodes[&1].initialize(members(&nodes)).await.expect("initialize");
    let leader = agreed_leader(&nodes).await;
    let mut acked = Vec::new();
    propose_all(&nodes, 0..20, &mut acked).await;
    converge(&nodes, &expected(acked.iter().copied())).await;

    // The follower is stopped, its directory copied (a backup), and it comes back.
    let f = *nodes.keys().find(|&&id| id != leader).expect("a follower");
    let f_addr = nodes[&f].addr().to_string();
    let f_dir: PathBuf = dir.path().join(format!("n{f}"));
    nodes.remove(&f).expect("the follower").shutdown(WAIT).await.expect("stop the follower");
    copy_tree(&f_dir, backup.path());
    nodes.insert(f, Node::start(config(&dir, f, &f_addr)).await.expect("restart the follower"));
    converge(&nodes, &expected(acked.iter().copied())).await;

    // More writes, acknowledged by all three: the leader knows the follower holds them.
    propose_all(&nodes, 20..40, &mut acked).await;
    converge(&nodes, &expected(acked.iter().copied())).await;
    let before = nodes[&f].status();

    // The follower is stopped and its directory replaced by the old copy.
    nodes.remove(&f).expect("the follower").shutdown(WAIT).await.expect("stop the follower");
    std::fs::remove_dir_all(&f_dir).expect("remove the follower's directory");
    copy_tree(backup.path(), &f_dir);
    // What the restored log holds, read as the node will read it.
    let log =
        shaledb_raft::LogStore::open(f_dir.join("log"), shaledb::Options::default()).expect("open the copy's log");
    let (_, last) = log.log_state();
    log.close().expect("close the copy's log");
    println!("node {f} restored: its log ends at {last:?}; it had {:?}", before.last_log_index);
    assert!(last.map(|l| l.index) < before.last_log_index, "the copy is not older: {last:?}");
    let restored_at = Instant::now();
    let restored = Node::start(config(&dir, f, &f_addr)).await.expect("start from the old copy");
    nodes.insert(f, restored);

    // It rejoins and catches up; the leader (which knew the follower had more) keeps leading and committing.
    propose_all(&nodes, 40..50, &mut acked).await;
    converge(&nodes, &expected(acked.iter().copied())).await;
    println!("node {f} caught up {:?} after it was restored", restored_at.elapsed());
    for n in nodes.values() {
        let st = n.raft().metrics().borrow().running_state.clone();
        assert!(st.is_ok(), "node {} stopped: {st:?}", n.id());
    }
    // Every node's last applied log id agrees once the group is idle.
    same_last_applied(&nodes).await;
    shutdown_all(nodes).await;
}

/// Why a restored member must rejoin as a new one (remove-node, wipe, add-node) and not from its backup: Raft
/// counts a member's acknowledgements as durable. Node F acknowledges writes that node B never received (B hears
/// nothing from the leader), F is restored from a backup taken before them, and the leader goes down: F and B
/// are a majority that never held those writes, elect a leader and go on acknowledging new writes without them.
/// This test pins that hazard down; a guard that would avoid it needs what a backup cannot tell a node (see
/// crates/shaledb-raft/README.md, "Restoring a member").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restored_member_plus_a_second_failure_loses_acknowledged_writes_so_restore_means_remove_wipe_add() {
    let dir = tempfile::tempdir().unwrap();
    let backup = tempfile::tempdir().unwrap();
    let mut g = Proxied::start(&dir, &[1, 2, 3]).await;
    g.nodes[&1].initialize(members(&g.nodes)).await.expect("initialize");
    let leader = agreed_leader(&g.nodes).await;
    let mut others = g.nodes.keys().copied().filter(|&id| id != leader);
    let (f, b) = (others.next().expect("a follower"), others.next().expect("another follower"));
    for i in 0..10 {
        propose_anywhere(&g.nodes, &put(i)).await;
    }
    converge(&g.nodes, &expected(0..10)).await;

    // F's backup, taken while it is down.
    g.stop(f).await;
    copy_tree(&dir.path().join(format!("n{f}")), backup.path());
    g.restart(f).await;
    converge(&g.nodes, &expected(0..10)).await;

    // B stops hearing the leader: writes 10..20 are committed by the leader and F alone.
    g.set(leader, b, Mode::Blackhole);
    for i in 10..20 {
        g.nodes[&leader].propose(&put(i)).await.expect("acknowledged by the leader and F");
    }
    assert_eq!(contents(&g.nodes[&b]), expected(0..10), "B must not have the writes 10..20");

    // F is restored from its backup, and the leader fails: a second failure.
    g.stop(f).await;
    g.stop(leader).await;
    let f_dir = dir.path().join(format!("n{f}"));
    std::fs::remove_dir_all(&f_dir).expect("remove F's directory");
    copy_tree(backup.path(), &f_dir);
    g.restart(f).await;
    g.heal();

    // F and B are a majority: they elect a leader and acknowledge new writes, without 10..20.
    let started = Instant::now();
    let new = agreed_leader(&g.nodes).await;
    println!("with the leader down, restored node {f} and node {b} elected node {new} in {:?}", started.elapsed());
    propose_anywhere(&g.nodes, &put(20)).await;
    let survived = expected((0..10).chain([20]));
    converge(&g.nodes, &survived).await;
    println!("acknowledged writes 10..20 are on no member of the majority after restoring node {f} from a backup");
    // Not shown here: the old leader, started again, holds 10..20 as committed and applied while the new leader's
    // log has other entries at those indexes. openraft 0.9 then fails a debug assertion in the old leader
    // (`has_log_id`: a committed log id assumed present) and its raft stops; a release build has no such check.
    // Either way the group has diverged: the restore, not the old leader, is what broke Raft's assumption.
    let Proxied { nodes, links, .. } = g;
    drop(links);
    shutdown_all(nodes).await;
}
