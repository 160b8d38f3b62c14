//! Replica groups (issue 43) and slots across them (issue 44): a server started with `--cluster-enabled yes`
//! keeps its data in a raft node (`shaledb-raft`) and serves it as one shard of a Redis Cluster: the group's
//! leader is the master, the other members its replicas.
//!
//! - Which group owns which of the 16384 slots is the cluster map (map.rs), kept in each group's replicated
//!   state and set by `CLUSTER SHALEDB-SETMAP` (what `shaledb cluster create` sends); a command whose keys'
//!   slot ([`slot_of`]) another group owns is answered `-MOVED` to that group's leader, keys in different
//!   slots `-CROSSSLOT`. Other groups' leaders are learned by asking them (peers.rs). A group without a map
//!   (formed by `CLUSTER SHALEDB-INIT` alone) owns every slot.
//!
//! - The node runs on a runtime of its own (two workers, threads `shaledb-raft`), so the server's one-thread
//!   runtime never holds up heartbeats, elections or the transport, and the node never waits on a client.
//! - Its data lives under `--dir` (`node-id`, `log/`, `sm/`); the state machine's live database is what the
//!   server's [`Store`](crate::commit::Store) reads and writes, taken again for every command or group
//!   ([`Cluster::db`]): a snapshot install switches it to a new database.
//! - Writes (commit.rs): the commit step executes a group into one batch and proposes it
//!   ([`Cluster::propose_blocking`]) instead of writing the engine; the state machine's apply writes it.
//! - Reads on the leader are linearizable by a lease ([`Cluster::gate`]); on a follower after `READONLY`
//!   they read its state, possibly stale.
//! - A leader that has not heard from a quorum for `election_timeout_min` refuses writes at once
//!   ([`Cluster::propose_blocking`]); `WAIT` counts the members whose matched log index reaches a connection's
//!   last write ([`Cluster::replicas_at`]); members are added and removed on the leader
//!   ([`Cluster::add_node`], [`Cluster::remove_node`]).
//! - Members are recorded as `host:port@busport` ([`shaledb_raft::MemberAddr`]): the RESP address clients are
//!   sent to and the port the transport dials.

pub mod copy;
pub mod map;
pub mod peers;
pub mod publish;

use crate::commands::{Handler, Spec};
use crate::resp::{Args, Reply};
use openraft::ServerState;
use parking_lot::Mutex;
use shaledb::{Db, WriteBatch};
use shaledb_raft::{MemberAddr, Node, NodeConfig, NodeId, Response};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Redis Cluster's slot count.
pub const SLOTS: u16 = 16384;

/// CRC16 as Redis Cluster computes key slots: CCITT/XMODEM (polynomial 0x1021, initial value 0, no reflection).
pub fn crc16(data: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for &b in data {
        crc ^= u16::from(b) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 { (crc << 1) ^ 0x1021 } else { crc << 1 };
        }
    }
    crc
}

/// The slot of `key` (Redis Cluster's rule): CRC16 of the key modulo 16384, or of the hash tag when the key has
/// a `{...}` with at least one byte between the first `{` and the first `}` after it.
pub fn key_slot(key: &[u8]) -> u16 {
    let hashed = match key.iter().position(|&b| b == b'{') {
        Some(open) => match key[open + 1..].iter().position(|&b| b == b'}') {
            Some(len) if len > 0 => &key[open + 1..open + 1 + len],
            _ => key,
        },
        None => key,
    };
    crc16(hashed) % SLOTS
}

/// The slot a command is redirected by: its first key's (`first_key` of the command table), 0 for a command
/// without one.
pub fn command_slot(spec: &Spec, args: &Args) -> u16 {
    match usize::try_from(spec.first_key) {
        Ok(i) if i > 0 && i < args.len() => key_slot(&args[i]),
        _ => 0,
    }
}

/// Redis Cluster's reply to a command whose keys are in different slots.
pub const CROSSSLOT: &str = "CROSSSLOT Keys in request don't hash to the same slot";

/// Commands a Redis Cluster refuses because it has one database (`Some(reply)`): `SELECT` of another database,
/// `SWAPDB`, `MOVE`, and `COPY ... DB`. A slot move carries database 0 only, so keys elsewhere would be lost.
pub fn one_database_refusal(spec: &Spec, args: &[bytes::Bytes]) -> Option<Reply> {
    match spec.name {
        "select" if args.get(1).is_some_and(|a| &a[..] != b"0") => {
            Some(Reply::err("SELECT is not allowed in cluster mode"))
        }
        "swapdb" => Some(Reply::err("SWAPDB is not allowed in cluster mode")),
        "move" => Some(Reply::err("MOVE is not allowed in cluster mode")),
        "copy" if args.iter().skip(3).any(|a| a.eq_ignore_ascii_case(b"db")) => {
            Some(Reply::err("Copying to another database is not allowed in cluster mode"))
        }
        _ => None,
    }
}

/// The slot of a data command's keys (Redis Cluster's routing rule): `Ok(None)` for a command with no key (it
/// runs on any node), `Err(-CROSSSLOT)` when its keys are in different slots. Keys are found as `COMMAND
/// GETKEYS` finds them (the key specs, and the rules of commands such as EVAL, ZUNIONSTORE and XREAD); a line
/// whose keys cannot be found (bad arity or arguments) runs here and gets its own error.
pub fn slot_of(spec: &Spec, args: &Args) -> Result<Option<u16>, Reply> {
    if matches!(spec.handler, Handler::Conn(_)) {
        return Ok(None);
    }
    // The common case without the key-spec walk: one key at a fixed place.
    if spec.first_key > 0 && spec.first_key == spec.last_key {
        let i = spec.first_key as usize;
        if i < args.len() && crate::commands::server_cmds::facts::one_fixed_key(spec.name, spec.first_key) {
            return Ok(Some(key_slot(&args[i])));
        }
    }
    let Ok(keys) = crate::commands::server_cmds::facts::getkeys(args) else { return Ok(None) };
    let mut slot = None;
    for k in keys {
        let Some(key) = args.get(k.0) else { continue };
        let s = key_slot(key);
        match slot {
            Some(x) if x != s => return Err(Reply::error(CROSSSLOT)),
            _ => slot = Some(s),
        }
    }
    Ok(slot)
}

/// The 40-hex-digit id Redis Cluster tools show for node `id` (the u64 zero-padded).
pub fn node_name(id: NodeId) -> String {
    format!("{id:040x}")
}

/// What [`Cluster::gate`] decided for one command.
pub enum Gate {
    /// Run it here.
    Go,
    /// A read on the leader whose lease ran out: confirm leadership first ([`Cluster::linearize`]).
    Linearize,
    /// Answer this instead (`-MOVED`, `-CLUSTERDOWN`).
    Refuse(Reply),
}

/// The running member: its raft node, the runtime it runs on, and the read lease.
pub struct Cluster {
    node: Mutex<Option<Arc<Node>>>,
    /// Kept for the node's calls; the node's own copy keeps it alive.
    node_ref: Arc<Node>,
    runtime: Mutex<Option<tokio::runtime::Runtime>>,
    handle: tokio::runtime::Handle,
    /// This member's `host:port@busport`.
    pub myself: String,
    /// The read lease: reads on the leader need no round until this instant, in this term.
    lease: Mutex<Option<(Instant, u64)>>,
    /// How long a confirmed quorum ack covers reads: half of `election_timeout_min`.
    lease_for: Duration,
    /// How long a leader may go without a quorum's acknowledgement before it refuses writes at once instead of
    /// proposing them (and gives up on proposals in flight): `election_timeout_max`, so a heartbeat round that
    /// a loaded machine delays past the minimum election timeout does not refuse writes a quorum would take
    /// (a refusal is always safe; this only trades how soon a cut-off leader says so).
    quorum_grace: Duration,
    /// The highest log index a write proposed here committed at (`WAIT` waits for the followers to match it).
    last_index: AtomicU64,
    /// The last leader this member saw (`CLUSTER SLOTS` names it during an election, as a Redis Cluster names
    /// a failed master until a replica takes over).
    last_leader: Mutex<Option<NodeId>>,
    /// The cluster map this member's group holds (issue 44), read again from the state machine's database
    /// every 100 ms and after a `CLUSTER SHALEDB-SETMAP` here. `None`: no map, the group owns every slot
    /// (a group formed by `CLUSTER SHALEDB-INIT` alone, as in issue 43).
    map: arc_swap::ArcSwapOption<map::Stored>,
    /// The stored bytes `map` was read from, and why they could not be read, if they could not.
    map_raw: Mutex<(Option<Vec<u8>>, Option<String>)>,
    /// What this member learned of the other groups (peers.rs).
    peers: Mutex<std::collections::HashMap<u64, peers::Peer>>,
    /// The password sent to other groups' members before asking them (this server's `requirepass`).
    peer_auth: Option<String>,
    /// The writes to slots this member copies out before their move, while it leads (copy.rs).
    pub copies: Arc<copy::Tracker>,
    /// PUBLISH's messages on their way to the other nodes (publish.rs).
    publishers: publish::Forwarders,
}

/// Redis's reply to `WAIT` on a replica.
pub const WAIT_ON_REPLICA: &str = "WAIT cannot be used with replica instances. Please also note that since Redis \
                                   4.0 if a replica is configured to be writable (which is not the default) writes \
                                   to replicas are just local and are not propagated.";

fn clusterdown(why: Option<&str>) -> Reply {
    match why {
        Some(w) => Reply::error(format!("CLUSTERDOWN The cluster is down ({w})")),
        None => Reply::error("CLUSTERDOWN The cluster is down"),
    }
}

/// Refuses a `--dir` that holds the other kind of server's data, before anything is created there.
pub fn check_dir(dir: &Path, cluster: bool) -> Result<(), String> {
    let node_id = dir.join("node-id").exists();
    let plain = dir.join("CURRENT").exists();
    if cluster && plain && !node_id {
        return Err(format!(
            "{} holds a standalone ShaleDB server database, not a replica group member's: a cluster node starts in \
             an empty directory (or one of its own, with node-id, log/ and sm/), as a member stores its keys slot \
             first. To bring this database's keys into a cluster, serve it with `shaledb server --dir {}` and run \
             `shaledb cluster import CLUSTER_HOST:PORT --from HOST:PORT`",
            dir.display(),
            dir.display()
        ));
    }
    if !cluster && node_id {
        return Err(format!(
            "{} holds a replica group member's data (node-id, log/, sm/): start it with --cluster-enabled yes",
            dir.display()
        ));
    }
    Ok(())
}

impl Cluster {
    /// Starts the raft node under `config.dir` on a runtime of its own, its transport on `bind:bus_port`.
    /// Called on the server's runtime.
    pub async fn start(config: &crate::Config) -> Result<Arc<Cluster>, String> {
        let bus_port = config.cluster_bus_port().map_err(|e| e.to_string())?;
        if config.port == 0 {
            return Err("a cluster node needs a fixed --port (its address is recorded in the group)".into());
        }
        check_dir(&config.dir, true)?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("shaledb-raft")
            .enable_all()
            .build()
            .map_err(|e| format!("starting the raft runtime: {e}"))?;
        let myself = MemberAddr::format(&config.bind, config.port, bus_port);
        let mut nc = NodeConfig::new(&config.dir, None, format!("{}:{bus_port}", config.bind));
        nc.advertise = Some(myself.clone());
        let mut opts =
            shaledb::Options { create_if_missing: true, use_direct_reads: config.use_direct_reads, ..nc.engine };
        if let Some(n) = config.block_cache_size {
            opts.block_cache_size = n;
        }
        if let Some(tune) = config.engine_options {
            tune(&mut opts);
        }
        nc.engine = opts;
        let lease_for = Duration::from_millis(nc.raft.election_timeout_min / 2);
        let quorum_grace = Duration::from_millis(nc.raft.election_timeout_max);
        let handle = runtime.handle().clone();
        let started = handle.spawn(Node::start(nc)).await.map_err(|e| format!("starting the raft node: {e}"))?;
        let node = match started {
            Ok(n) => Arc::new(n),
            Err(e) => {
                // The runtime cannot be dropped on this (async) thread.
                std::thread::spawn(move || runtime.shutdown_timeout(Duration::from_secs(5)));
                return Err(format!("starting the raft node in {}: {e}", config.dir.display()));
            }
        };
        eprintln!(
            "# replica group member {} ({}), transport on {}:{bus_port}",
            node_name(node.id()),
            myself,
            config.bind
        );
        // A fatal error stops openraft's core for good (a full disk, a failed fsync: the log cannot take an
        // entry it could make durable): say so once, where the operator looks, with what to do.
        let mut watch = node.raft().metrics();
        handle.spawn(async move {
            loop {
                if let Err(e) = &watch.borrow_and_update().running_state {
                    eprintln!(
                        "# raft stopped: {e}. This member answers -CLUSTERDOWN and takes no part in the group until \
                         it is restarted (fix the cause first, e.g. free disk space); the others go on while a \
                         majority of the group is up"
                    );
                    return;
                }
                if watch.changed().await.is_err() {
                    return;
                }
            }
        });
        let c = Arc::new(Cluster {
            node: Mutex::new(Some(node.clone())),
            node_ref: node,
            runtime: Mutex::new(Some(runtime)),
            handle: handle.clone(),
            myself,
            lease: Mutex::new(None),
            lease_for,
            quorum_grace,
            last_index: AtomicU64::new(0),
            last_leader: Mutex::new(None),
            map: arc_swap::ArcSwapOption::empty(),
            map_raw: Mutex::new((None, None)),
            peers: Mutex::new(std::collections::HashMap::new()),
            peer_auth: config.requirepass.clone(),
            publishers: publish::Forwarders::new(handle.clone(), config.requirepass.clone()),
            copies: Arc::default(),
        });
        // Keys are stored slot first on a member (keys.rs): data written otherwise is refused, not misread.
        if let Err(why) = crate::layout::check_member(&c.db(), &config.dir) {
            c.shutdown().await;
            return Err(why);
        }
        c.reload_map();
        c.spawn_map_watch();
        Ok(c)
    }

    /// Every 100 ms: reads the map again (a follower applies a new one without telling the server), and about
    /// once a second (every 300 ms while some group's leader is not known) asks the other groups about
    /// themselves. Stops when the member is dropped.
    fn spawn_map_watch(self: &Arc<Self>) {
        let me = Arc::downgrade(self);
        self.handle.spawn(async move {
            let mut tick: u64 = 0;
            loop {
                tokio::time::sleep(Duration::from_millis(100)).await;
                let Some(c) = me.upgrade() else { return };
                c.reload_map();
                tick += 1;
                let Some(stored) = c.map.load_full() else { continue };
                let missing = stored.map.groups.iter().any(|g| g.id != stored.me && c.peer_leader(g.id).is_none());
                if tick.is_multiple_of(10) || (missing && tick.is_multiple_of(3)) {
                    let auth = c.peer_auth.clone();
                    peers::poll(&stored.map, stored.me, auth.as_deref(), &c.peers).await;
                }
            }
        });
    }

    /// Reads the stored map again, if it changed.
    pub fn reload_map(&self) {
        let got = self.db().get(map::MAP_KEY);
        let mut raw = self.map_raw.lock();
        match got {
            Ok(v) if v == raw.0 => {}
            Ok(None) => {
                *raw = (None, None);
                self.map.store(None);
            }
            Ok(Some(v)) => match map::Stored::decode(&v) {
                Ok(st) => {
                    *raw = (Some(v), None);
                    self.map.store(Some(Arc::new(st)));
                }
                Err(e) => {
                    if raw.1.is_none() {
                        eprintln!("# the stored cluster map cannot be read: {e}; this member answers -CLUSTERDOWN");
                    }
                    *raw = (Some(v), Some(e));
                }
            },
            Err(_) => {} // The database is being switched (a snapshot install): next time.
        }
    }

    /// Sends a message published here to the other nodes' subscribers: every node of every group for
    /// `PUBLISH`, this group's other members for `SPUBLISH` (`shard`). See publish.rs.
    pub fn forward_publish(&self, shard: bool, channel: &[u8], message: &[u8]) {
        let me = self.id();
        let mut targets: Vec<String> = Vec::new();
        let mut add = |id: NodeId, addr: &str| {
            if id != me {
                if let Ok(a) = MemberAddr::parse(addr) {
                    if !targets.contains(&a.resp) {
                        targets.push(a.resp);
                    }
                }
            }
        };
        {
            let m = self.node_ref.raft().metrics();
            let m = m.borrow();
            for (id, n) in m.membership_config.membership().nodes() {
                add(*id, &n.addr);
            }
        }
        if !shard {
            if let Some(st) = self.map() {
                for g in st.map.groups.iter().filter(|g| g.id != st.me) {
                    let (_, nodes, _) = self.peer(&st, g.id);
                    for (id, a) in &nodes {
                        add(*id, a);
                    }
                }
            }
        }
        if targets.is_empty() {
            return;
        }
        let sub: &[u8] = if shard { b"SHALEDB-SPUBLISH" } else { b"SHALEDB-PUBLISH" };
        let f = publish::frame(&[b"CLUSTER", sub, channel, message]);
        for t in &targets {
            self.publishers.send(t, f.clone());
        }
    }

    /// Tables of slots copied in that this member ingested since it started, and their bytes (issue 44).
    pub fn tables_ingested(&self) -> (u64, u64) {
        self.node_ref.tables_ingested()
    }

    /// Messages PUBLISH could not pass on to another node (it was down, or its queue full).
    pub fn publish_dropped(&self) -> u64 {
        self.publishers.dropped.load(Ordering::Relaxed)
    }

    /// The map this member's group holds, if any.
    pub fn map(&self) -> Option<Arc<map::Stored>> {
        self.map.load_full()
    }

    /// Why the stored map could not be read, if it could not.
    fn map_error(&self) -> Option<String> {
        self.map_raw.lock().1.clone()
    }

    /// The leader another group last named, if any.
    pub fn peer_leader(&self, group: u64) -> Option<NodeId> {
        self.peers.lock().get(&group).and_then(|p| p.leader)
    }

    /// What this member knows of group `group` (not its own): `(leader, nodes, leader fresh)`, from the last
    /// answer, else from the map.
    pub fn peer(&self, stored: &map::Stored, group: u64) -> (Option<NodeId>, Vec<(NodeId, String)>, bool) {
        let from_map = stored.map.group(group).map(|g| g.nodes.clone()).unwrap_or_default();
        match self.peers.lock().get(&group) {
            Some(p) => {
                let nodes = if p.nodes.is_empty() { from_map } else { p.nodes.clone() };
                let fresh = p.led_at.is_some_and(|t| t.elapsed() < peers::FRESH);
                (p.leader, nodes, fresh)
            }
            None => (None, from_map, false),
        }
    }

    /// `-MOVED <slot> <addr>` to the group that owns `slot` by the map (its leader's address when known, else
    /// one of its nodes, which sends the client on), or `-CLUSTERDOWN Hash slot not served`.
    fn moved_to_owner(&self, stored: &map::Stored, slot: u16) -> Reply {
        let Some(owner) = stored.map.owner(slot) else {
            return Reply::error("CLUSTERDOWN Hash slot not served");
        };
        let (leader, nodes, _) = self.peer(stored, owner.id);
        let addr = leader
            .and_then(|l| nodes.iter().find(|(id, _)| *id == l))
            .or_else(|| nodes.first())
            .and_then(|(_, a)| MemberAddr::parse(a).ok());
        match addr {
            Some(a) => Reply::error(format!("MOVED {slot} {}", a.resp)),
            None => Reply::error("CLUSTERDOWN Hash slot not served"),
        }
    }

    /// Why a command on `slot` does not run here by map `st`, if it does not: `-MOVED` to the owner's group,
    /// `-TRYAGAIN` while the slot moves (the source refuses writes, the target everything), `-CLUSTERDOWN`
    /// for a slot of no group.
    pub fn slot_refusal(&self, st: &map::Stored, slot: u16, write: bool) -> Option<Reply> {
        if let Some((from, to)) = st.map.moving(slot) {
            if to == st.me || (from == st.me && write) {
                return Some(Reply::error(format!(
                    "TRYAGAIN Slot {slot} is being moved from group {from} to group {to}; try again shortly"
                )));
            }
        }
        if st.owns(slot) {
            return None;
        }
        Some(self.moved_to_owner(st, slot))
    }

    /// The commit step's check of one write before it executes (the gate's may be stale: a map may have
    /// been recorded since): `Some(reply)` to answer instead. A transaction's queued commands are checked
    /// one by one.
    pub fn commit_check(&self, st: &map::Stored, spec: &Spec, args: &Args) -> Option<Reply> {
        // The commit step's own WATCH bookkeeping (its first argument is a client id, not a key).
        if matches!(spec.name, "watch" | "unwatch") {
            return None;
        }
        if let Some(r) = one_database_refusal(spec, args) {
            return Some(r);
        }
        if spec.name == "exec" {
            for line in crate::commands::multi::queued_lines(args) {
                let Some(inner) = crate::commands::lookup(&line[0]) else { continue };
                if let Some(r) = one_database_refusal(inner, line) {
                    return Some(r);
                }
                match slot_of(inner, &line.to_vec()) {
                    Err(r) => return Some(r),
                    Ok(Some(slot)) => {
                        if let Some(r) = self.slot_refusal(st, slot, true) {
                            return Some(r);
                        }
                    }
                    Ok(None) => {}
                }
            }
            return None;
        }
        match slot_of(spec, args) {
            Err(r) => Some(r),
            Ok(Some(slot)) => self.slot_refusal(st, slot, true),
            Ok(None) => None,
        }
    }

    /// A read-index round on the node's runtime (openraft's `ensure_linearizable`): once it returns, this
    /// member led after the call started and has applied everything committed before it.
    pub async fn read_barrier(&self) -> Result<(), String> {
        let node = self.node_ref.clone();
        match self.handle.spawn(async move { node.ensure_linearizable().await }).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(e)) => Err(e.to_string()),
            Err(e) => Err(format!("the raft runtime: {e}")),
        }
    }

    /// The leader now, or while none is known (an election), the last one this member saw.
    pub fn leader_or_last(&self, now: Option<NodeId>) -> Option<NodeId> {
        let mut last = self.last_leader.lock();
        if now.is_some() {
            *last = now;
        }
        *last
    }

    /// This member's raft node.
    pub fn node(&self) -> &Node {
        &self.node_ref
    }

    /// This member's id.
    pub fn id(&self) -> NodeId {
        self.node_ref.id()
    }

    /// The state machine's live database (taken again for each command or group: a snapshot install
    /// switches it).
    pub fn db(&self) -> Arc<Db> {
        self.node_ref.db()
    }

    /// The term this member leads in, while it leads (and its raft runs).
    pub fn leading_term(&self) -> Option<u64> {
        let m = self.node_ref.raft().metrics();
        let m = m.borrow();
        (m.state == ServerState::Leader && m.running_state.is_ok()).then_some(m.current_term)
    }

    /// True while this member is the leader (and its raft runs).
    pub fn is_leader(&self) -> bool {
        let m = self.node_ref.raft().metrics();
        let m = m.borrow();
        m.state == ServerState::Leader && m.running_state.is_ok()
    }

    /// Why this member's raft stopped for good (a fatal storage error), if it did.
    pub fn stopped(&self) -> Option<String> {
        self.node_ref.raft().metrics().borrow().running_state.as_ref().err().map(|e| format!("raft stopped: {e}"))
    }

    /// The leader's RESP address, when another member leads and its address parses.
    fn leader_resp(&self) -> Option<String> {
        let m = self.node_ref.raft().metrics().borrow().clone();
        if m.running_state.is_err() {
            return None;
        }
        let leader = m.current_leader.filter(|&l| l != self.id())?;
        let node = m.membership_config.membership().get_node(&leader)?.clone();
        MemberAddr::parse(&node.addr).ok().map(|a| a.resp)
    }

    /// The reply sending a command elsewhere: `-MOVED <slot> <leader>`, or `-CLUSTERDOWN` when no other
    /// member is known to lead (`why` says what failed, if something did).
    pub fn redirect(&self, spec: &Spec, args: &Args, why: Option<&str>) -> Reply {
        match self.leader_resp() {
            Some(addr) => Reply::error(format!("MOVED {} {addr}", command_slot(spec, args))),
            None => clusterdown(why),
        }
    }

    /// Where a data command (a read or a write of the command table) runs. Connection commands (CLUSTER,
    /// INFO, ROLE, CONFIG ...) are never gated.
    ///
    /// - On the leader: writes go to the commit step (which proposes them); reads run here while the lease
    ///   holds, else after a read-index round ([`Cluster::linearize`]).
    /// - Elsewhere: a read on a connection that sent `READONLY` runs on this member's state (possibly stale);
    ///   anything else gets `-MOVED` to the leader, or `-CLUSTERDOWN` when no leader is known.
    ///
    /// `slot` is the slot of the command's keys ([`slot_of`]); with a cluster map, a slot another group owns is
    /// answered `-MOVED` to that group (on any member, before anything else).
    pub fn gate(&self, spec: &Spec, args: &Args, readonly: bool, slot: Option<u16>) -> Gate {
        let write = match spec.handler {
            Handler::Write(_) => true,
            Handler::Read(_) => false,
            Handler::Conn(_) => return self.shard_channel_gate(spec, args),
        };
        let (state, term, running) = {
            let m = self.node_ref.raft().metrics();
            let m = m.borrow();
            (m.state, m.current_term, m.running_state.is_ok())
        };
        if !running {
            // Its state is frozen where the raft stopped: not even a READONLY read is served from it.
            return Gate::Refuse(clusterdown(self.stopped().as_deref()));
        }
        if let Some(why) = self.map_error() {
            return Gate::Refuse(clusterdown(Some(&format!("the stored cluster map cannot be read: {why}"))));
        }
        if let Some(slot) = slot {
            let stored = self.map.load();
            if let Some(r) = stored.as_deref().and_then(|st| self.slot_refusal(st, slot, write)) {
                return Gate::Refuse(r);
            }
        }
        if state == ServerState::Leader {
            if write || self.lease_holds(term) {
                return Gate::Go;
            }
            return Gate::Linearize;
        }
        // A read on a follower after READONLY, or a read of no key (DBSIZE, SCAN, KEYS, RANDOMKEY: each node
        // answers for itself, as a Redis Cluster replica does), runs on this member's state, possibly stale.
        if !write && (readonly || slot.is_none()) {
            return Gate::Go;
        }
        Gate::Refuse(self.redirect(spec, args, None))
    }

    /// Shard channels (SPUBLISH, SSUBSCRIBE, SUNSUBSCRIBE) belong to the slot of their name, as in Redis
    /// Cluster: the command runs on any member of the group that owns it (leader or not: a message is not
    /// data), `-MOVED` to that group's leader from any other group, `-CROSSSLOT` for channels of different
    /// slots. Every other connection command runs here.
    fn shard_channel_gate(&self, spec: &Spec, args: &Args) -> Gate {
        let channels = match spec.name {
            "spublish" => args.get(1..2).unwrap_or_default(),
            "ssubscribe" | "sunsubscribe" => args.get(1..).unwrap_or_default(),
            _ => return Gate::Go,
        };
        let mut slot = None;
        for c in channels {
            let s = key_slot(c);
            if slot.is_some_and(|x| x != s) {
                return Gate::Refuse(Reply::error(CROSSSLOT));
            }
            slot = Some(s);
        }
        let Some(slot) = slot else { return Gate::Go };
        let stored = self.map.load();
        match stored.as_deref().and_then(|st| self.slot_refusal(st, slot, false)) {
            Some(r) => Gate::Refuse(r),
            None => Gate::Go,
        }
    }

    /// The lease (why reads on the leader are cheap): a quorum that acknowledged this leader after instant
    /// `t` (a read-index round or a committed proposal started at `t`) keeps every follower from voting for
    /// another candidate until at least `t + election_timeout_min` by its own clock (openraft's followers
    /// refuse votes while the leader's lease runs), so no other leader can acknowledge a write before then.
    /// Reads are served from local state until `t + election_timeout_min / 2`. The clock assumption: the
    /// members' clocks run at rates within a factor of two of each other (no absolute sync is needed;
    /// `Instant` is monotonic); a paused leader process (SIGSTOP, a VM freeze) longer than the lease could
    /// read stale, which is the usual lease caveat. Everything this leader acknowledged is applied here
    /// before its client hears of it, so the local state holds every acknowledged write.
    fn lease_holds(&self, term: u64) -> bool {
        matches!(*self.lease.lock(), Some((until, t)) if t == term && Instant::now() < until)
    }

    /// Extends the lease after a quorum acknowledged this leader after `started`, in `term`.
    fn extend_lease(&self, started: Instant, term: u64) {
        let until = started + self.lease_for;
        let mut l = self.lease.lock();
        match *l {
            Some((u, t)) if t == term && u >= until => {}
            _ => *l = Some((until, term)),
        }
    }

    fn term(&self) -> u64 {
        self.node_ref.raft().metrics().borrow().current_term
    }

    /// A read-index round (openraft's `ensure_linearizable`: the leader confirms its quorum and waits until
    /// everything committed before is applied here), on the node's runtime; it renews the lease. `Err`: the
    /// reply to give instead (`-MOVED`, `-CLUSTERDOWN`).
    pub async fn linearize(&self, spec: &Spec, args: &Args) -> Result<(), Reply> {
        let started = Instant::now();
        let term = self.term();
        let node = self.node_ref.clone();
        match self.handle.spawn(async move { node.ensure_linearizable().await }).await {
            Ok(Ok(_)) => {
                self.extend_lease(started, term);
                Ok(())
            }
            Ok(Err(e)) => Err(self.redirect(spec, args, Some(&e.to_string()))),
            Err(e) => Err(clusterdown(Some(&format!("the raft runtime: {e}")))),
        }
    }

    /// Proposes `batch` and waits until it is committed on a majority and applied here. Called by the commit
    /// step on a thread that is not a runtime's worker (the blocking pool, or a tool's commit thread). `Err`:
    /// why, as the commit step answers it ([`Cluster::failure_reply`]).
    ///
    /// A leader that has not heard from a quorum for longer than `election_timeout_min` refuses at once
    /// (nothing is proposed), and a proposal in flight is given up when that happens while it waits (its
    /// outcome is then unknown, as after a timeout): a leader cut off from its majority answers `-CLUSTERDOWN`
    /// within about the election timeout instead of the 10 s propose timeout. Only a commit answers OK.
    ///
    /// An empty batch (a group whose writes changed nothing) proposes nothing: `Cluster::confirm_blocking`.
    pub fn propose_blocking(&self, batch: &WriteBatch, tables: Vec<Vec<u8>>) -> Result<(), String> {
        if batch.is_empty() && tables.is_empty() {
            return self.confirm_blocking();
        }
        let started = Instant::now();
        let term = self.term();
        if let Some(why) = self.quorum_lost(Duration::ZERO) {
            return Err(why);
        }
        let proposal = async {
            tokio::select! {
                r = self.node_ref.propose_proposal_at(shaledb_raft::Proposal::with_tables(batch, tables)) => {
                    r.map_err(|e| e.to_string())
                }
                why = self.watch_quorum(started) => Err(why),
            }
        };
        match self.handle.block_on(proposal) {
            Ok((Response::Applied | Response::Recorded, index)) => {
                self.last_index.fetch_max(index, Ordering::AcqRel);
                self.extend_lease(started, term);
                Ok(())
            }
            Ok((Response::Rejected { reason }, _)) => Err(format!("ERR the replica group refused the write: {reason}")),
            Err(e) => Err(e),
        }
    }

    /// Confirms that this member still leads before the commit step answers a group that wrote nothing (its
    /// replies, a DEL's 0 say, are reads of this member's state): the lease ([`Cluster::lease_holds`]), else
    /// a read-index round (which renews it), given up as a proposal is when the quorum is lost. Nothing is
    /// proposed. `Err`: why, as for a failed proposal (the client is sent to the leader or told the cluster
    /// is down).
    fn confirm_blocking(&self) -> Result<(), String> {
        let started = Instant::now();
        let term = self.term();
        if self.is_leader() && self.lease_holds(term) {
            return Ok(());
        }
        if let Some(why) = self.quorum_lost(Duration::ZERO) {
            return Err(why);
        }
        let round = async {
            tokio::select! {
                r = self.node_ref.ensure_linearizable() => r.map(|_| ()).map_err(|e| e.to_string()),
                why = self.watch_quorum(started) => Err(why),
            }
        };
        self.handle.block_on(round)?;
        self.extend_lease(started, term);
        Ok(())
    }

    /// Why this leader should not wait for a quorum any more: none has acknowledged it for longer than the
    /// grace (`None` from openraft, no acknowledgement yet in this term, counts as `waited`). `None` while the
    /// quorum is heard from, and on a member that does not lead (the proposal itself says so).
    fn quorum_lost(&self, waited: Duration) -> Option<String> {
        let m = self.node_ref.raft().metrics();
        let m = m.borrow();
        if m.state != ServerState::Leader {
            return None;
        }
        let since = m.millis_since_quorum_ack.map_or(waited, Duration::from_millis);
        (since > self.quorum_grace).then(|| {
            format!("no quorum: a majority of the group last acknowledged this leader {} ms ago", since.as_millis())
        })
    }

    /// Resolves (with the reason) once [`Cluster::quorum_lost`] says so, polled every 50 ms.
    async fn watch_quorum(&self, started: Instant) -> String {
        loop {
            tokio::time::sleep(Duration::from_millis(50)).await;
            if let Some(why) = self.quorum_lost(started.elapsed()) {
                return why;
            }
        }
    }

    /// The highest log index a write proposed on this member committed at: a connection records it after its
    /// writes are answered, and `WAIT` waits for followers that match it.
    pub fn last_index(&self) -> u64 {
        self.last_index.load(Ordering::Acquire)
    }

    /// On the leader: how many other members (followers and learners) hold the log up to `index` (openraft's
    /// matched log ids). `None` on a member that does not lead.
    pub fn replicas_at(&self, index: u64) -> Option<i64> {
        let m = self.node_ref.raft().metrics();
        let m = m.borrow();
        if m.state != ServerState::Leader {
            return None;
        }
        let me = self.id();
        let matched = m.replication.as_ref().map_or(0, |r| {
            r.iter().filter(|(id, matched)| **id != me && matched.map_or(0, |l| l.index) >= index).count()
        });
        // The metrics' matched indexes trail the commit: an index this member saw commit is, by the commit
        // rule, held by a majority of the voters (of each config, in a joint one) it committed under. When
        // that is the current membership (the index is at or after its entry), those other members count at
        // once, so a WAIT after a write does not sleep until the next metrics update.
        let committed_here = index <= self.last_index();
        let membership = &m.membership_config;
        let since = membership.log_id().map_or(0, |l| l.index);
        let by_quorum = if committed_here && since <= index {
            membership
                .membership()
                .get_joint_config()
                .iter()
                .map(|voters| if voters.contains(&me) { voters.len() / 2 } else { voters.len() / 2 + 1 })
                .max()
                .unwrap_or(0)
        } else {
            0
        };
        Some(matched.max(by_quorum) as i64)
    }

    /// openraft's metrics stream (it changes at least at every heartbeat tick): what `WAIT` sleeps on.
    pub fn metrics_stream(&self) -> tokio::sync::watch::Receiver<openraft::RaftMetrics<NodeId, openraft::BasicNode>> {
        self.node_ref.raft().metrics()
    }

    /// The reply of each command of a group whose proposal failed with `why`: never an OK (the outcome of a
    /// timed-out proposal is unknown; it may still commit).
    pub fn failure_reply(&self, why: &str, spec: &Spec, args: &Args) -> Reply {
        if why.starts_with("ERR ") {
            return Reply::error(why.to_string());
        }
        self.redirect(spec, args, Some(why))
    }

    /// `CLUSTER SHALEDB-INIT`: forms the group of `members` (id -> `host:port@busport`), this member among them.
    /// Runs on the node's runtime; the caller's thread (the server's runtime, for a command) waits at most 10 s:
    /// openraft's initialize only appends the first membership entry locally (one synced write).
    pub fn initialize_blocking(&self, members: BTreeMap<NodeId, String>) -> Result<(), String> {
        if !members.contains_key(&self.id()) {
            return Err(format!("this node ({}) is not among the members", node_name(self.id())));
        }
        let node = self.node_ref.clone();
        let (tx, rx) = std::sync::mpsc::channel();
        self.handle.spawn(async move {
            let _ = tx.send(node.initialize(members).await);
        });
        match rx.recv_timeout(Duration::from_secs(10)) {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(e.to_string()),
            Err(_) => Err("no answer from the raft node within 10 s".into()),
        }
    }

    /// The reply sending a CLUSTER command that only the leader runs there: `-MOVED 0 <leader>` (what
    /// `shaledb cluster add-node` / `del-node` follow), or `-CLUSTERDOWN` when no leader is known.
    pub fn to_leader(&self) -> Reply {
        match self.leader_resp() {
            Some(addr) => Reply::error(format!("MOVED 0 {addr}")),
            None => clusterdown(Some("no leader is known to run the membership change")),
        }
    }

    /// `CLUSTER SHALEDB-ADD-NODE`, on the leader: adds node `id` at `addr` (`host:port@busport`) as a learner,
    /// waits (at most `catch_up`) until its log matches the leader's as it was once the learner was recorded
    /// (openraft sends it a snapshot when the entries it lacks are purged), then makes it a voter through
    /// openraft's joint consensus. A node that is a learner already (an earlier attempt that timed out) goes
    /// on from where it is. `Err`: the reason, as the error line to answer.
    pub async fn add_node(&self, id: NodeId, addr: &str, catch_up: Duration) -> Result<(), String> {
        let parsed = MemberAddr::parse(addr)?;
        {
            let m = self.node_ref.raft().metrics();
            let m = m.borrow();
            let membership = m.membership_config.membership();
            if membership.voter_ids().any(|v| v == id) {
                return Err(format!("node {} is already a voter of the group", node_name(id)));
            }
            for (other, n) in membership.nodes() {
                let same = MemberAddr::parse(&n.addr).is_ok_and(|a| a.resp == parsed.resp || a.bus == parsed.bus);
                if *other != id && same {
                    return Err(format!(
                        "node {} is recorded at {} already: remove it first (CLUSTER SHALEDB-REMOVE-NODE {})",
                        node_name(*other),
                        n.addr,
                        node_name(*other)
                    ));
                }
                if *other == id && n.addr != addr {
                    return Err(format!(
                        "node {} is recorded at {}, not at {addr}: remove it first (CLUSTER SHALEDB-REMOVE-NODE {})",
                        node_name(id),
                        n.addr,
                        node_name(id)
                    ));
                }
            }
        }
        let node = self.node_ref.clone();
        let addr = addr.to_string();
        let run = async move {
            node.add_learner(id, addr, false).await.map_err(|e| format!("adding the learner: {e}"))?;
            let target = node.raft().metrics().borrow().last_log_index.unwrap_or(0);
            let caught_up = node
                .raft()
                .wait(Some(catch_up))
                .metrics(
                    |m| {
                        m.replication.as_ref().and_then(|r| r.get(&id)).and_then(|l| l.as_ref()).map_or(0, |l| l.index)
                            >= target
                    },
                    "the learner caught up",
                )
                .await;
            if caught_up.is_err() {
                return Err(format!(
                    "node {} was added as a learner but has not caught up with log index {target} within {} s (is                      it running, and is its bus port reachable from here?); it stays a learner and keeps catching                      up: run the command again to finish, or remove it with CLUSTER SHALEDB-REMOVE-NODE {}",
                    node_name(id),
                    catch_up.as_secs(),
                    node_name(id)
                ));
            }
            node.promote(id).await.map_err(|e| format!("making it a voter: {e}"))
        };
        match self.handle.spawn(run).await {
            Ok(r) => r,
            Err(e) => Err(format!("the raft runtime: {e}")),
        }
    }

    /// `CLUSTER SHALEDB-REMOVE-NODE`, on the leader: removes node `id` (a voter through joint consensus, waiting
    /// at most `limit` for the change to commit). Refused for a node that is not a member, for this leader
    /// itself, and when no voter would remain.
    pub async fn remove_node(&self, id: NodeId, limit: Duration) -> Result<(), String> {
        {
            let m = self.node_ref.raft().metrics();
            let m = m.borrow();
            let membership = m.membership_config.membership();
            if membership.get_node(&id).is_none() {
                return Err(format!("node {} is not a member of the group (see CLUSTER NODES)", node_name(id)));
            }
            if id == self.id() {
                return Err(format!(
                    "node {} is the leader: a leader does not remove itself; stop its server so another member                      takes over, then remove it there",
                    node_name(id)
                ));
            }
            if membership.voter_ids().all(|v| v == id) {
                return Err(format!("node {} is the last voter of the group: it cannot be removed", node_name(id)));
            }
        }
        let node = self.node_ref.clone();
        let run = async move { tokio::time::timeout(limit, node.remove_node(id)).await };
        match self.handle.spawn(run).await {
            Ok(Ok(r)) => r.map_err(|e| e.to_string()),
            Ok(Err(_)) => Err(format!(
                "the membership change did not commit within {} s (a majority of both the old and the new voters                  must be reachable); it commits once they are",
                limit.as_secs()
            )),
            Err(e) => Err(format!("the raft runtime: {e}")),
        }
    }

    /// Stops the node (its databases closed) and its runtime. Called at the server's shutdown, on its runtime.
    pub async fn shutdown(&self) {
        let node = self.node.lock().take();
        let runtime = self.runtime.lock().take();
        if let Some(node) = node {
            // Our own `node_ref` is one more handle: the node is stopped through openraft and dropped with us.
            let raft = node.raft().clone();
            let _ = self.handle.spawn(async move { raft.shutdown().await }).await;
        }
        if let Some(rt) = runtime {
            let _ = tokio::task::spawn_blocking(move || rt.shutdown_timeout(Duration::from_secs(5))).await;
        }
    }

    /// A snapshot of openraft's metrics. After a fatal error the last ones stay frozen (a stopped leader would
    /// still say it leads): this member then shows no leader and the `Shutdown` state.
    pub fn metrics(&self) -> openraft::RaftMetrics<NodeId, openraft::BasicNode> {
        let mut m = self.node_ref.raft().metrics().borrow().clone();
        if m.running_state.is_err() {
            m.current_leader = None;
            m.state = ServerState::Shutdown;
        }
        m
    }
}

/// Parses `CLUSTER SHALEDB-INIT`'s arguments: pairs of a node id (decimal, or the 40 hex digits of CLUSTER MYID)
/// and `host:port@busport`.
pub fn parse_init_members(args: &[bytes::Bytes]) -> Result<BTreeMap<NodeId, String>, String> {
    if args.is_empty() || !args.len().is_multiple_of(2) {
        return Err("CLUSTER SHALEDB-INIT takes pairs of <node-id> <host:port@busport>".into());
    }
    let mut out = BTreeMap::new();
    for pair in args.chunks(2) {
        let id_s = std::str::from_utf8(&pair[0]).map_err(|_| "a node id is not text".to_string())?;
        let id =
            parse_node_id(id_s).ok_or_else(|| format!("'{id_s}' is not a node id (CLUSTER MYID's 40 hex digits)"))?;
        let addr = std::str::from_utf8(&pair[1]).map_err(|_| "an address is not text".to_string())?;
        MemberAddr::parse(addr)?;
        if out.insert(id, addr.to_string()).is_some() {
            return Err(format!("node {id_s} is named twice"));
        }
    }
    Ok(out)
}

/// A node id as CLUSTER MYID shows it (40 hex digits) or in decimal.
pub fn parse_node_id(s: &str) -> Option<NodeId> {
    if s.len() == 40 && s.bytes().all(|b| b.is_ascii_hexdigit()) {
        let (high, low) = s.split_at(24);
        if high.bytes().any(|b| b != b'0') {
            return None;
        }
        return u64::from_str_radix(low, 16).ok().filter(|&n| n != 0);
    }
    if !s.is_empty() && s.len() <= 20 && s.bytes().all(|b| b.is_ascii_digit()) {
        return s.parse().ok().filter(|&n| n != 0);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_slots_follow_redis_cluster() {
        assert_eq!(key_slot(b"foo"), 12182);
        assert_eq!(key_slot(b"bar"), 5061);
        assert_eq!(key_slot(b""), 0);
        assert_eq!(key_slot(b"{user1000}.following"), key_slot(b"{user1000}.followers"));
        assert_eq!(key_slot(b"{user1000}.following"), key_slot(b"user1000"));
        // An empty tag hashes the whole key; only the first `{` counts.
        assert_eq!(key_slot(b"foo{}{bar}"), crc16(b"foo{}{bar}") % SLOTS);
        assert_eq!(key_slot(b"foo{{bar}}zap"), key_slot(b"{bar"));
        assert_eq!(key_slot(b"foo{bar}{zap}"), key_slot(b"bar"));
        assert_eq!(crc16(b"123456789"), 0x31c3);
    }

    #[test]
    fn node_names_and_init_arguments() {
        assert_eq!(node_name(0xabc), "0000000000000000000000000000000000000abc");
        assert_eq!(parse_node_id(&node_name(u64::MAX)), Some(u64::MAX));
        assert_eq!(parse_node_id("42"), Some(42));
        assert_eq!(parse_node_id("0"), None);
        assert_eq!(parse_node_id("1000000000000000000000000000000000000abc"), None);
        let b = |s: &str| bytes::Bytes::copy_from_slice(s.as_bytes());
        let m = parse_init_members(&[b("1"), b("127.0.0.1:7000@17000"), b(&node_name(2)), b("127.0.0.1:7001@17001")])
            .unwrap();
        assert_eq!(m.len(), 2);
        assert_eq!(m[&2], "127.0.0.1:7001@17001");
        assert!(parse_init_members(&[b("1")]).is_err());
        assert!(parse_init_members(&[b("1"), b("127.0.0.1:7000")]).unwrap_err().contains("'@'"));
        assert!(parse_init_members(&[b("x"), b("127.0.0.1:7000@1")]).unwrap_err().contains("not a node id"));
        assert!(parse_init_members(&[b("1"), b("h:1@2"), b("1"), b("h:3@4")]).unwrap_err().contains("twice"));
    }
}
