//! One member of a replica group, as a server embeds it: its storage, its transport and `openraft::Raft`.
//!
//! Files under the node's directory (docs/format/raft-log.md, "The node's files"):
//!
//! ```text
//! node-id   magic:"SHRNODE" version:u8 id:fixed64 crc:fixed32   ; made once, by temp + fsync + rename
//! log/      the LogStore's engine database
//! sm/       the StateMachine's root (CURRENT, data-<gen>/, snapshot)
//! ```

use std::collections::{BTreeMap, BTreeSet};
use std::hash::{BuildHasher, Hasher};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use openraft::error::{CheckIsLeaderError, ClientWriteError, ForwardToLeader, RaftError};
use openraft::{BasicNode, ChangeMembers, Config, LogId, Raft, ServerState, SnapshotPolicy};
use shaledb::{Db, Fs, Options, WriteBatch};

use crate::error::{blocking, Error, Result};
use crate::network::{Network, TransportConfig};
use crate::server::Listener;
use crate::snapshot;
use crate::{LogStore, NodeId, Proposal, Response, StateMachine};

const NODE_ID_FILE: &str = "node-id";
const NODE_ID_MAGIC: &[u8; 7] = b"SHRNODE";
const NODE_ID_VERSION: u8 = 1;
const NODE_ID_LEN: usize = 7 + 1 + 8 + 4;

/// openraft's configuration for a replica group on one LAN (or loopback) and small machines.
///
/// - `heartbeat_interval` 100 ms: openraft also uses it as the timeout of each append RPC, so it must cover a
///   loopback or LAN round trip plus a follower's synced append (a few ms on an SSD, tens under load) with room.
/// - `election_timeout` 1000-2000 ms, ten to twenty heartbeats: a leader stalled by a busy 2-core machine
///   (fuzzers, a compaction, an fsync queue) misses several heartbeats before anyone stands for election, so
///   elections come from dead leaders, not slow ones. openraft also makes followers refuse votes for a leader
///   lease of `election_timeout_max` after the last heartbeat, so a dead leader is replaced after about the lease
///   plus one election timeout: 3-4 s with these values (about 2 s in the tests' 600-1200 ms).
/// - `install_snapshot_timeout` 10 s per chunk: the last chunk of a snapshot also unpacks, syncs and opens the
///   database before it is answered.
/// - `snapshot_policy` every 5000 entries, keeping 1000 entries behind the snapshot for slow followers (openraft's
///   defaults).
pub fn default_raft_config() -> Config {
    Config {
        cluster_name: "shaledb".to_string(),
        heartbeat_interval: 100,
        election_timeout_min: 1000,
        election_timeout_max: 2000,
        install_snapshot_timeout: 10_000,
        snapshot_policy: SnapshotPolicy::LogsSinceLast(5000),
        max_in_snapshot_log_to_keep: 1000,
        ..Config::default()
    }
}

/// What a node is started with.
#[derive(Clone, Debug)]
pub struct NodeConfig {
    /// The node's directory: `node-id`, `log/`, `sm/`.
    pub dir: PathBuf,
    /// The node's id. `None`: the one kept in the directory, or a new random one kept there. A given id must
    /// match the directory's.
    pub id: Option<NodeId>,
    /// Where the transport listens, "host:port" (port 0: any free port; [`Node::addr`] says which).
    pub listen: String,
    /// The address other nodes dial ("host:port"), recorded in the membership. Default: the bound listen address,
    /// which is only dialable when `listen` names an interface: set this when listening on `0.0.0.0` or `[::]`.
    pub advertise: Option<String>,
    /// openraft's configuration. Default [`default_raft_config`].
    pub raft: Config,
    /// The transport's timeouts and limits.
    pub transport: TransportConfig,
    /// The engine options of both databases (log and data).
    pub engine: Options,
    /// How long [`Node::propose`] waits for commit and apply. Default 10 s.
    pub propose_timeout: Duration,
}

impl NodeConfig {
    /// A configuration with the defaults.
    pub fn new(dir: impl Into<PathBuf>, id: Option<NodeId>, listen: impl Into<String>) -> NodeConfig {
        NodeConfig {
            dir: dir.into(),
            id,
            listen: listen.into(),
            advertise: None,
            raft: default_raft_config(),
            transport: TransportConfig::default(),
            engine: Options::default(),
            propose_timeout: Duration::from_secs(10),
        }
    }
}

/// A member's view of the group, from openraft's metrics.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Status {
    /// This node.
    pub id: NodeId,
    /// Leader, Follower, Candidate, Learner (or Shutdown).
    pub role: ServerState,
    /// The current term.
    pub term: u64,
    /// The leader this node knows of.
    pub leader: Option<NodeId>,
    /// The leader's transport address, from the membership.
    pub leader_addr: Option<String>,
    /// The last log index this node holds.
    pub last_log_index: Option<u64>,
    /// The last log id applied to the state machine.
    pub last_applied: Option<LogId<NodeId>>,
    /// The last log id in the current snapshot.
    pub snapshot: Option<LogId<NodeId>>,
    /// The last purged log id.
    pub purged: Option<LogId<NodeId>>,
    /// The voters of the effective membership (both configurations' while a change is joint).
    pub voters: BTreeSet<NodeId>,
    /// The learners of the effective membership.
    pub learners: BTreeSet<NodeId>,
}

/// One running member of a replica group. Stop it with [`Node::shutdown`]: dropping it stops the listener but
/// leaves openraft's tasks (and the databases they hold) running until the tokio runtime ends.
pub struct Node {
    id: NodeId,
    addr: String,
    raft: Raft<crate::TypeConfig>,
    sm: StateMachine,
    log: LogStore,
    network: Network,
    listener: Listener,
    propose_timeout: Duration,
}

impl std::fmt::Debug for Node {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Node").field("id", &self.id).field("addr", &self.addr).finish()
    }
}

fn encode_node_id(id: NodeId) -> Vec<u8> {
    let mut out = Vec::with_capacity(NODE_ID_LEN);
    out.extend_from_slice(NODE_ID_MAGIC);
    out.push(NODE_ID_VERSION);
    out.extend_from_slice(&id.to_le_bytes());
    let crc = crc32c::crc32c(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

fn decode_node_id(path: &Path, data: &[u8]) -> Result<NodeId> {
    let bad = |what: String| Error::corruption(path, what);
    if data.len() != NODE_ID_LEN {
        return Err(bad(format!("{NODE_ID_FILE} holds {} bytes, not {NODE_ID_LEN}", data.len())));
    }
    if &data[..7] != NODE_ID_MAGIC {
        return Err(bad(format!("{NODE_ID_FILE} does not start with {NODE_ID_MAGIC:?}")));
    }
    if data[7] != NODE_ID_VERSION {
        return Err(bad(format!("{NODE_ID_FILE} version {} is not the supported {NODE_ID_VERSION}", data[7])));
    }
    let stored = u32::from_le_bytes([data[16], data[17], data[18], data[19]]);
    let computed = crc32c::crc32c(&data[..16]);
    if stored != computed {
        return Err(bad(format!("{NODE_ID_FILE} checksum mismatch: stored {stored:#010x}, computed {computed:#010x}")));
    }
    let mut id = [0u8; 8];
    id.copy_from_slice(&data[8..16]);
    Ok(u64::from_le_bytes(id))
}

/// A node id nobody else is likely to hold: 63 random bits (std's per-process random hash keys, mixed with
/// the time), never 0.
fn random_node_id() -> NodeId {
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos()));
    h.write_u32(std::process::id());
    (h.finish() >> 1).max(1)
}

/// The node's id: the one kept in `dir`, else `given` or a random one, kept there durably.
fn resolve_node_id(fs: &dyn Fs, dir: &Path, given: Option<NodeId>) -> Result<NodeId> {
    fs.create_dir_all(dir)?;
    let path = dir.join(NODE_ID_FILE);
    if fs.exists(&path) {
        // Sized before it is read: a damaged file of any size costs no allocation.
        let size = fs.file_size(&path)?;
        if size != NODE_ID_LEN as u64 {
            return Err(Error::corruption(&path, format!("{NODE_ID_FILE} holds {size} bytes, not {NODE_ID_LEN}")));
        }
        let kept = decode_node_id(&path, &fs.read_all(&path)?)?;
        if let Some(g) = given.filter(|&g| g != kept) {
            return Err(Error::InvalidArgument(format!("{} belongs to node {kept}, not to node {g}", dir.display())));
        }
        return Ok(kept);
    }
    let id = given.unwrap_or_else(random_node_id);
    snapshot::replace_file(fs, dir, NODE_ID_FILE, &encode_node_id(id))?;
    Ok(id)
}

fn not_leader(f: ForwardToLeader<NodeId, BasicNode>) -> Error {
    Error::NotLeader { leader_id: f.leader_id, leader_addr: f.leader_node.map(|n| n.addr) }
}

fn write_error(e: RaftError<NodeId, ClientWriteError<NodeId, BasicNode>>) -> Error {
    match e {
        RaftError::APIError(ClientWriteError::ForwardToLeader(f)) => not_leader(f),
        RaftError::APIError(ClientWriteError::ChangeMembershipError(m)) => Error::Membership(Box::new(m)),
        RaftError::Fatal(f) => f.into(),
    }
}

impl Node {
    /// Opens the node's storage under `config.dir` (`log/`, `sm/`), binds the transport, and starts raft. A
    /// new node has no membership: [`Node::initialize`] one node of a new group, or add it from the leader
    /// ([`Node::add_learner`]).
    pub async fn start(config: NodeConfig) -> Result<Node> {
        let raft_config =
            Arc::new(config.raft.clone().validate().map_err(|e| Error::InvalidArgument(format!("raft config: {e}")))?);
        let (dir, given, engine) = (config.dir.clone(), config.id, config.engine.clone());
        let (id, log, sm) = blocking(move || {
            let id = resolve_node_id(engine.fs.as_ref(), &dir, given)?;
            let log = LogStore::open(dir.join("log"), engine.clone())?;
            let sm = StateMachine::open(dir.join("sm"), engine)?;
            Ok((id, log, sm))
        })
        .await?;
        let socket = tokio::net::TcpListener::bind(&config.listen).await.map_err(|source| Error::Io {
            op: "binding the raft transport to",
            addr: config.listen.clone(),
            source,
        })?;
        let bound = socket.local_addr().map_err(|source| Error::Io {
            op: "reading the address of",
            addr: config.listen.clone(),
            source,
        })?;
        let addr = config.advertise.clone().unwrap_or_else(|| bound.to_string());
        let network = Network::new(id, config.transport.clone());
        let raft = Raft::new(id, raft_config, network.clone(), log.clone(), sm.clone()).await?;
        let listener = Listener::spawn(socket, id, raft.clone(), config.transport.clone());
        Ok(Node { id, addr, raft, sm, log, network, listener, propose_timeout: config.propose_timeout })
    }

    /// This node's id.
    pub fn id(&self) -> NodeId {
        self.id
    }

    /// The address other nodes reach this node's transport at.
    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// openraft itself, for what this type does not wrap (metrics streams, `wait`, runtime config).
    pub fn raft(&self) -> &Raft<crate::TypeConfig> {
        &self.raft
    }

    /// The state machine's live data. Read it only after [`Node::ensure_linearizable`] for a linearizable read;
    /// after a snapshot install a new database is live, so take it again for each read.
    pub fn db(&self) -> Arc<Db> {
        self.sm.db()
    }

    /// Tables this member ingested from proposals since it started, and their bytes.
    pub fn tables_ingested(&self) -> (u64, u64) {
        self.sm.tables_ingested()
    }

    /// Forms a new group of `members` (node id -> transport address), this node among them. Call it on one node
    /// (calling it on several with the same members is safe); refused ([`Error::Initialize`]) once the node has
    /// a log.
    pub async fn initialize(&self, members: BTreeMap<NodeId, String>) -> Result<()> {
        let nodes: BTreeMap<NodeId, BasicNode> =
            members.into_iter().map(|(id, addr)| (id, BasicNode { addr })).collect();
        self.raft.initialize(nodes).await.map_err(|e| match e {
            RaftError::APIError(e) => Error::Initialize(Box::new(e)),
            RaftError::Fatal(f) => f.into(),
        })
    }

    /// Proposes `batch` and returns what applying it did, once it is committed (on a majority, each synced) and
    /// applied here. Not the leader: [`Error::NotLeader`] with the leader's id and address when known. No
    /// answer within the propose timeout: [`Error::Timeout`], and the outcome is unknown (a leader cut off
    /// from its majority never acknowledges, but the entry may still commit if it reconnects in time).
    pub async fn propose(&self, batch: &WriteBatch) -> Result<Response> {
        self.propose_at(batch).await.map(|(r, _)| r)
    }

    /// [`Node::propose`], also returning the log index the entry committed at (what `WAIT` compares the
    /// followers' matched indexes with).
    pub async fn propose_at(&self, batch: &WriteBatch) -> Result<(Response, u64)> {
        self.propose_proposal_at(Proposal::new(batch)).await
    }

    /// [`Node::propose_at`] of a whole [`Proposal`]: its tables, if any, are ingested on every member before
    /// its batch is applied.
    pub async fn propose_proposal_at(&self, proposal: Proposal) -> Result<(Response, u64)> {
        match tokio::time::timeout(self.propose_timeout, self.raft.client_write(proposal)).await {
            Ok(Ok(r)) => Ok((r.data, r.log_id.index)),
            Ok(Err(e)) => Err(write_error(e)),
            Err(_) => Err(Error::Timeout { op: "propose", after: self.propose_timeout }),
        }
    }

    /// Confirms this node is the leader with a quorum (openraft's read index) and waits until everything
    /// committed before the call is applied here: a read of [`Node::db`] after it sees every write acknowledged
    /// before it started. Returns the read log id.
    pub async fn ensure_linearizable(&self) -> Result<Option<LogId<NodeId>>> {
        match tokio::time::timeout(self.propose_timeout, self.raft.ensure_linearizable()).await {
            Ok(Ok(id)) => Ok(id),
            Ok(Err(RaftError::APIError(CheckIsLeaderError::ForwardToLeader(f)))) => Err(not_leader(f)),
            Ok(Err(RaftError::APIError(CheckIsLeaderError::QuorumNotEnough(q)))) => {
                Err(Error::QuorumNotEnough(Box::new(q)))
            }
            Ok(Err(RaftError::Fatal(f))) => Err(f.into()),
            Err(_) => Err(Error::Timeout { op: "ensure_linearizable", after: self.propose_timeout }),
        }
    }

    /// Adds node `id` at `addr` as a learner (it receives the log but does not vote). With `blocking`, returns
    /// once the learner has caught up with the leader's log (or a snapshot of it).
    pub async fn add_learner(&self, id: NodeId, addr: impl Into<String>, blocking: bool) -> Result<()> {
        self.raft.add_learner(id, BasicNode { addr: addr.into() }, blocking).await.map(|_| ()).map_err(write_error)
    }

    /// Makes `voters` the voting members (openraft's joint consensus: both configurations commit in turn). The
    /// new voters must be learners already. Removed voters stay learners when `retain`, else leave the group.
    pub async fn change_membership(&self, voters: BTreeSet<NodeId>, retain: bool) -> Result<()> {
        self.raft
            .change_membership(ChangeMembers::ReplaceAllVoters(voters), retain)
            .await
            .map(|_| ())
            .map_err(write_error)
    }

    /// Removes node `id` from the group: a voter through openraft's joint consensus (both configurations commit
    /// in turn) and out of the membership's nodes, a learner at once. The caller checks that voters remain.
    pub async fn remove_node(&self, id: NodeId) -> Result<()> {
        let voter = self.raft.metrics().borrow().membership_config.membership().voter_ids().any(|v| v == id);
        let ids = BTreeSet::from([id]);
        let change = if voter { ChangeMembers::RemoveVoters(ids) } else { ChangeMembers::RemoveNodes(ids) };
        self.raft.change_membership(change, false).await.map(|_| ()).map_err(write_error)
    }

    /// Makes learner `id` a voter too (openraft's joint consensus).
    pub async fn promote(&self, id: NodeId) -> Result<()> {
        self.raft
            .change_membership(ChangeMembers::AddVoterIds(BTreeSet::from([id])), false)
            .await
            .map(|_| ())
            .map_err(write_error)
    }

    /// Builds a snapshot now (it also runs by the snapshot policy) and waits, at most `timeout`, until it exists.
    pub async fn snapshot(&self, timeout: Duration) -> Result<Option<LogId<NodeId>>> {
        let applied = self.raft.metrics().borrow().last_applied;
        self.raft.trigger().snapshot().await?;
        let wait = self.raft.wait(Some(timeout));
        let m = wait
            .metrics(|m| m.snapshot.map(|s| s.index) >= applied.map(|a| a.index), "snapshot built")
            .await
            .map_err(|_| Error::Timeout { op: "snapshot", after: timeout })?;
        Ok(m.snapshot)
    }

    /// Purges the log up to `upto` (at most the last snapshot's index; openraft keeps what lagging followers
    /// still need only by the policy's `max_in_snapshot_log_to_keep`).
    pub async fn purge_log(&self, upto: u64) -> Result<()> {
        Ok(self.raft.trigger().purge_log(upto).await?)
    }

    /// This node's view of the group.
    pub fn status(&self) -> Status {
        let m = self.raft.metrics().borrow().clone();
        let membership = m.membership_config.membership();
        let voters: BTreeSet<NodeId> = membership.voter_ids().collect();
        let learners: BTreeSet<NodeId> = membership.learner_ids().collect();
        let leader_addr = m.current_leader.and_then(|l| membership.get_node(&l).map(|n| n.addr.clone()));
        Status {
            id: self.id,
            role: m.state,
            term: m.current_term,
            leader: m.current_leader,
            leader_addr,
            last_log_index: m.last_log_index,
            last_applied: m.last_applied,
            snapshot: m.snapshot,
            purged: m.purged,
            voters,
            learners,
        }
    }

    /// The transport listener's counters: connections accepted, requests served, connections closed for a bad
    /// frame, requests for another node id.
    pub fn transport_counters(&self) -> [u64; 4] {
        let s = self.listener.stats();
        [
            s.accepted.load(Ordering::Relaxed),
            s.requests.load(Ordering::Relaxed),
            s.bad_frames.load(Ordering::Relaxed),
            s.misdirected.load(Ordering::Relaxed),
        ]
    }

    /// Stops the node: closes the listener and its connections (peers see this node as unreachable), stops raft,
    /// closes outgoing connections, then closes both databases, so the directory can be opened again. Waits at
    /// most `timeout` for openraft's tasks to release the storage.
    pub async fn shutdown(self, timeout: Duration) -> Result<()> {
        let Node { mut listener, raft, sm, log, network, .. } = self;
        listener.shutdown().await;
        let stopped = raft.shutdown().await;
        network.close_all();
        drop(raft);
        let start = Instant::now();
        // openraft's state machine worker and log readers end shortly after its core: a bounded poll.
        while sm.handles() > 1 || log.handles() > 1 {
            if start.elapsed() > timeout {
                return Err(Error::Timeout { op: "shutdown (openraft still holds the storage)", after: timeout });
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let closed = blocking(move || {
            sm.close()?;
            log.close()
        })
        .await;
        if let Err(e) = stopped {
            return Err(Error::Task(format!("raft core: {e}")));
        }
        closed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_id_file_round_trip_and_damage() {
        let p = Path::new("node-id");
        let f = encode_node_id(42);
        assert_eq!(decode_node_id(p, &f).unwrap(), 42);
        let mut bad = f.clone();
        bad[10] ^= 1;
        assert!(decode_node_id(p, &bad).unwrap_err().to_string().contains("checksum"));
        let mut bad = f.clone();
        bad[7] = 9;
        assert!(decode_node_id(p, &bad).unwrap_err().to_string().contains("version 9"));
        assert!(decode_node_id(p, &f[..19]).unwrap_err().to_string().contains("19 bytes"));
        let mut bad = f;
        bad[0] = b'X';
        assert!(decode_node_id(p, &bad).unwrap_err().is_corruption());
    }

    #[test]
    fn node_id_is_made_once_and_kept() {
        let dir = tempfile::tempdir().unwrap();
        let fs: Arc<dyn Fs> = Options::default().fs;
        let id = resolve_node_id(fs.as_ref(), dir.path(), None).unwrap();
        assert_ne!(id, 0);
        assert_eq!(resolve_node_id(fs.as_ref(), dir.path(), None).unwrap(), id);
        assert_eq!(resolve_node_id(fs.as_ref(), dir.path(), Some(id)).unwrap(), id);
        let e = resolve_node_id(fs.as_ref(), dir.path(), Some(id ^ 1)).unwrap_err();
        assert!(e.to_string().contains("belongs to node"), "{e}");
    }
}
