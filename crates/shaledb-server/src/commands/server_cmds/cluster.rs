//! CLUSTER, ASKING, READONLY and READWRITE on a server that is not part of a cluster: the replies of a Redis
//! 7.0 instance started with `cluster-enabled no`. Each checks its subcommand and arity first (Redis finds the
//! subcommand and checks its arity before running it), then answers that cluster support is disabled. The
//! commands exist so clients and tools that probe for cluster mode (redis-py's `RedisCluster`, `redis-cli -c`,
//! `COMMAND LIST FILTERBY PATTERN cluster*`) get the answer Redis gives, instead of "unknown command".

use super::facts;
use crate::commands::{sub_arity, unknown_subcommand};
use crate::resp::{Args, Reply};
use crate::server::{Session, Shared};
use bytes::Bytes;

const DISABLED: &str = "This instance has cluster support disabled";

/// `CLUSTER <subcommand> ...`.
pub fn cluster(_: &mut Session, _: &Shared, args: &Args) -> Reply {
    reply(args)
}

/// `ASKING`, `READONLY`, `READWRITE`.
pub fn disabled(_: &mut Session, _: &Shared, _: &Args) -> Reply {
    disabled_reply()
}

/// CLUSTER's reply, from a connection or a script.
pub fn reply(args: &[Bytes]) -> Reply {
    let Some(full) = super::stats::full_name("cluster", Some(&args[1])) else {
        return unknown_subcommand("CLUSTER", &args[1]);
    };
    match facts::lookup(&full) {
        Some(f) if !facts::arity_fits(f.arity, args.len()) => {
            sub_arity("cluster", &full.as_bytes()["cluster|".len()..])
        }
        _ => Reply::err(DISABLED),
    }
}

/// The reply of ASKING, READONLY and READWRITE, from a connection or a script.
pub fn disabled_reply() -> Reply {
    Reply::err(DISABLED)
}

// ---- A replica group member (`--cluster-enabled yes`, issue 43): the group is one shard owning every slot. ----

use crate::cluster::{map, node_name, peers, Cluster, SLOTS};
use shaledb_raft::{MemberAddr, NodeId};
use std::sync::Arc;

/// `CLUSTER <subcommand>` on a server that may be a replica group member.
pub fn cluster_cmd(_: &mut Session, shared: &Shared, args: &Args) -> Reply {
    let Some(c) = shared.store.cluster() else { return reply(args) };
    if args[1].eq_ignore_ascii_case(b"shaledb-init") {
        return init(c, &args[2..]);
    }
    if args[1].eq_ignore_ascii_case(b"shaledb-group") {
        return group(c);
    }
    let forwarded = args[1].eq_ignore_ascii_case(b"shaledb-publish");
    if forwarded || args[1].eq_ignore_ascii_case(b"shaledb-spublish") {
        if args.len() != 4 {
            return Reply::err("wrong number of arguments for CLUSTER SHALEDB-PUBLISH: <channel> <message>");
        }
        return crate::commands::pubsub::deliver_forwarded(shared, !forwarded, &args[2], &args[3]);
    }
    if args[1].eq_ignore_ascii_case(b"shaledb-map") {
        // The map this member's group holds (its `self` line first), nil without one.
        return match c.map() {
            Some(st) => Reply::Bulk(Bytes::from(st.encode())),
            None => Reply::Nil,
        };
    }
    if is_membership_change(args) {
        // A connection runs these itself (server.rs); here only from MULTI or a script.
        return Reply::err(format!(
            "CLUSTER {} cannot run inside MULTI or a script",
            String::from_utf8_lossy(&args[1]).to_ascii_uppercase()
        ));
    }
    let Some(full) = super::stats::full_name("cluster", Some(&args[1])) else {
        return unknown_subcommand("CLUSTER", &args[1]);
    };
    if let Some(f) = facts::lookup(&full) {
        if !facts::arity_fits(f.arity, args.len()) {
            return sub_arity("cluster", &full.as_bytes()["cluster|".len()..]);
        }
    }
    let view = View::of(c);
    match &full["cluster|".len()..] {
        "myid" => Reply::bulk(node_name(c.id())),
        "keyslot" => Reply::Int(i64::from(crate::cluster::key_slot(&args[2]))),
        "info" => Reply::bulk(view.info()),
        "slots" => view.slots(),
        "shards" => view.shards(),
        "nodes" => Reply::bulk(view.nodes()),
        "countkeysinslot" | "getkeysinslot" => keys_in_slot(c, args),
        "replicas" | "slaves" => Reply::err("CLUSTER REPLICAS is not supported by a ShaleDB replica group yet"),
        other => Reply::err(format!(
            "CLUSTER {} is not supported by a ShaleDB cluster (groups and slots are set by `shaledb cluster create`; \
             members are added and removed with CLUSTER SHALEDB-ADD-NODE and SHALEDB-REMOVE-NODE)",
            other.to_ascii_uppercase()
        )),
    }
}

/// How long `CLUSTER SHALEDB-ADD-NODE` waits for the new node to catch up before it answers (the node stays a
/// learner and keeps catching up; the command run again finishes the change).
const ADD_NODE_CATCH_UP: std::time::Duration = std::time::Duration::from_secs(120);
/// How long `CLUSTER SHALEDB-REMOVE-NODE` waits for the change to commit.
const REMOVE_NODE_LIMIT: std::time::Duration = std::time::Duration::from_secs(30);

/// `CLUSTER SHALEDB-ADD-NODE` or `CLUSTER SHALEDB-REMOVE-NODE`: the membership changes a connection runs
/// without holding up the others (see [`membership_change`]).
pub fn is_membership_change(args: &Args) -> bool {
    args.len() >= 2
        && (args[1].eq_ignore_ascii_case(b"shaledb-add-node")
            || args[1].eq_ignore_ascii_case(b"shaledb-remove-node")
            || super::slot_moves::is_slot_move(args))
}

/// `CLUSTER SHALEDB-ADD-NODE <id> <host:port@busport>` and `CLUSTER SHALEDB-REMOVE-NODE <id>`, on the leader
/// (elsewhere `-MOVED 0 <leader>`). The node id is CLUSTER MYID's 40 hex digits (or decimal).
pub async fn membership_change(shared: &Shared, args: &Args) -> Reply {
    let Some(c) = shared.store.cluster() else { return reply(args) };
    if super::slot_moves::is_slot_move(args) {
        return super::slot_moves::run(shared, c, args).await;
    }
    let add = args[1].eq_ignore_ascii_case(b"shaledb-add-node");
    let name = if add { "SHALEDB-ADD-NODE" } else { "SHALEDB-REMOVE-NODE" };
    let usage = if add { "<node-id> <host:port@busport>" } else { "<node-id>" };
    if args.len() != if add { 4 } else { 3 } {
        return Reply::err(format!("wrong number of arguments for CLUSTER {name}: CLUSTER {name} {usage}"));
    }
    let id_s = String::from_utf8_lossy(&args[2]).into_owned();
    let Some(id) = crate::cluster::parse_node_id(&id_s) else {
        return Reply::err(format!("'{id_s}' is not a node id (CLUSTER MYID's 40 hex digits)"));
    };
    let addr = if add {
        let Ok(a) = std::str::from_utf8(&args[3]) else { return Reply::err("the address is not text") };
        if let Err(e) = MemberAddr::parse(a) {
            return Reply::err(e);
        }
        Some(a.to_string())
    } else {
        None
    };
    if !c.is_leader() {
        return c.to_leader();
    }
    let c = c.clone();
    let r = match addr {
        Some(a) => c.add_node(id, &a, ADD_NODE_CATCH_UP).await,
        None => c.remove_node(id, REMOVE_NODE_LIMIT).await,
    };
    match r {
        Ok(()) => Reply::Ok,
        Err(e) => Reply::err(format!("CLUSTER {name} failed: {e}")),
    }
}

/// `CLUSTER COUNTKEYSINSLOT slot` and `CLUSTER GETKEYSINSLOT slot count`: the live keys of database 0 (the only
/// one a Redis Cluster has) in `slot`, on this member's state: a range read of the slot's meta keys (keys are
/// stored slot first on a cluster member, keys.rs), on the runtime's thread as INFO keyspace is.
fn keys_in_slot(c: &Cluster, args: &Args) -> Reply {
    let slot = match std::str::from_utf8(&args[2]).ok().and_then(|s| s.parse::<i64>().ok()) {
        Some(n) if (0..i64::from(SLOTS)).contains(&n) => n as u16,
        _ => return Reply::err("Invalid slot"),
    };
    let limit = if args.len() > 3 {
        match std::str::from_utf8(&args[3]).ok().and_then(|s| s.parse::<i64>().ok()) {
            Some(n) if n >= 0 => Some(n as u64),
            _ => return Reply::err("Invalid number of keys"),
        }
    } else {
        None
    };
    let db = c.db();
    let ks = crate::keys::Keyspace::Slots;
    let (lower, upper) = ks.slot_meta_range(0, slot);
    let mut it = db.cursor_opt(&shaledb::ReadOptions {
        iterate_lower_bound: Some(lower.clone()),
        iterate_upper_bound: Some(upper),
        fill_cache: false,
        ..shaledb::ReadOptions::default()
    });
    it.seek(&lower);
    let now = crate::store::now_ms();
    let (mut n, mut found) = (0i64, Vec::new());
    while it.valid() && limit.is_none_or(|l| (found.len() as u64) < l) {
        if let Some(k) = ks.user_key(0, it.key()) {
            if crate::cluster::key_slot(k) == slot
                && crate::keys::decode_meta(it.value()).is_ok_and(|m| !m.expired(now))
            {
                n += 1;
                if limit.is_some() {
                    found.push(Reply::Bulk(Bytes::copy_from_slice(k)));
                }
            }
        }
        it.next();
    }
    if let Err(e) = it.status() {
        return Reply::err(format!("read failed: {e}"));
    }
    if limit.is_some() {
        Reply::Array(found)
    } else {
        Reply::Int(n)
    }
}

/// `CLUSTER SHALEDB-GROUP`: this member's group as another group's members ask for it (cluster/peers.rs):
/// `[group id (0 without a map), map epoch, leader id or "", [[id, host:port@busport] ...], slot ranges]`.
fn group(c: &Cluster) -> Reply {
    let v = View::of(c);
    let nodes: Vec<(NodeId, String)> = v
        .members
        .iter()
        .filter_map(|m| m.addr.as_ref().map(|a| (m.id, format!("{}@{}", a.resp, a.bus_port))))
        .collect();
    let (gid, epoch, slots) = match &v.map {
        Some(st) => (st.me, st.map.epoch, map::ranges_text(&st.mine().ranges)),
        None => (0, 0, if v.initialized { format!("0-{}", SLOTS - 1) } else { "-".into() }),
    };
    peers::group_reply(gid, epoch, v.leader, &nodes, &slots)
}

/// `CLUSTER SHALEDB-INIT <id> <host:port@bus> ...`: forms the group on this node.
fn init(c: &Cluster, args: &[Bytes]) -> Reply {
    let members = match crate::cluster::parse_init_members(args) {
        Ok(m) => m,
        Err(e) => return Reply::err(e),
    };
    match c.initialize_blocking(members) {
        Ok(()) => Reply::Ok,
        Err(e) => Reply::err(format!("CLUSTER SHALEDB-INIT failed: {e}")),
    }
}

/// `READONLY`, `READWRITE`, `ASKING`.
pub fn conn_mode(s: &mut Session, shared: &Shared, args: &Args) -> Reply {
    if shared.store.cluster().is_none() {
        return disabled_reply();
    }
    if args[0].eq_ignore_ascii_case(b"readonly") {
        s.readonly = true;
    } else if args[0].eq_ignore_ascii_case(b"readwrite") {
        s.readonly = false;
    }
    Reply::Ok
}

/// One member as the cluster commands show it.
struct Member {
    id: NodeId,
    addr: Option<MemberAddr>,
    /// The last log index known applied (this member's own), or matched (a follower's, on the leader); 0 for
    /// another group's members.
    offset: u64,
}

/// One group as the cluster commands show it.
struct Group {
    ranges: Vec<(u16, u16)>,
    /// Its leader: known now (this member's group), or the last one another group named.
    leader: Option<NodeId>,
    /// The master to list: `leader`, or during an election the last leader seen; for another group whose
    /// leader was never learned, its first node (which sends clients on).
    shown_master: Option<NodeId>,
    /// Whether the leader is known now (this group) or was named within `peers::FRESH` (another group).
    fresh: bool,
    /// Master first, then the others by id.
    members: Vec<Member>,
}

/// The cluster as this member sees it: its own group from openraft's metrics, the others from the map and
/// what they last said (cluster/peers.rs).
struct View {
    me: NodeId,
    /// This member's group's leader, known now.
    leader: Option<NodeId>,
    term: u64,
    initialized: bool,
    /// This member's group: leader first, then the others by id.
    members: Vec<Member>,
    applied: u64,
    map: Option<Arc<map::Stored>>,
    /// Every group, this member's among them, in group id order.
    groups: Vec<Group>,
}

impl View {
    fn of(c: &Cluster) -> View {
        let m = c.metrics();
        let membership = m.membership_config.membership();
        let applied = m.last_applied.map_or(0, |l| l.index);
        let matched = |id: NodeId| -> u64 {
            if id == c.id() {
                return applied;
            }
            m.replication.as_ref().and_then(|r| r.get(&id).cloned().flatten()).map_or(0, |l| l.index)
        };
        let leader = m.current_leader.filter(|l| membership.get_node(l).is_some());
        // A member whose raft stopped knows no current leader: it names none (other members do).
        let shown_master =
            c.leader_or_last(leader).filter(|l| membership.get_node(l).is_some() && c.stopped().is_none());
        let mut members: Vec<Member> = membership
            .nodes()
            .map(|(id, n)| Member { id: *id, addr: MemberAddr::parse(&n.addr).ok(), offset: matched(*id) })
            .collect();
        members.sort_by_key(|x| (Some(x.id) != shown_master, x.id));
        let initialized = membership.nodes().next().is_some();
        let map = c.map();
        let own = |ranges: Vec<(u16, u16)>| Group {
            ranges,
            leader,
            shown_master,
            fresh: leader.is_some(),
            members: members.iter().map(|x| Member { id: x.id, addr: x.addr.clone(), offset: x.offset }).collect(),
        };
        let groups = match &map {
            None => {
                let ranges = if initialized { vec![(0, SLOTS - 1)] } else { Vec::new() };
                vec![own(ranges)]
            }
            Some(st) => st
                .map
                .groups
                .iter()
                .map(|g| {
                    if g.id == st.me {
                        return own(g.ranges.clone());
                    }
                    let (peer_leader, nodes, fresh) = c.peer(st, g.id);
                    let peer_leader = peer_leader.filter(|l| nodes.iter().any(|(id, _)| id == l));
                    let shown = peer_leader.or_else(|| nodes.first().map(|n| n.0));
                    let mut members: Vec<Member> = nodes
                        .iter()
                        .map(|(id, a)| Member { id: *id, addr: MemberAddr::parse(a).ok(), offset: 0 })
                        .collect();
                    members.sort_by_key(|x| (Some(x.id) != shown, x.id));
                    Group { ranges: g.ranges.clone(), leader: peer_leader, shown_master: shown, fresh, members }
                })
                .collect(),
        };
        View { me: c.id(), leader, term: m.current_term, initialized, members, applied, map, groups }
    }

    /// `cluster_state:ok`: this group has a leader and, with a map, every slot is assigned and every other
    /// group owning slots named its leader lately.
    fn ok(&self) -> bool {
        if !self.initialized || self.leader.is_none() {
            return false;
        }
        match &self.map {
            None => true,
            Some(st) => {
                st.map.assigned() == usize::from(SLOTS) && self.groups.iter().all(|g| g.ranges.is_empty() || g.fresh)
            }
        }
    }

    fn assigned(&self) -> usize {
        match &self.map {
            Some(st) => st.map.assigned(),
            None if self.initialized => usize::from(SLOTS),
            None => 0,
        }
    }

    fn info(&self) -> String {
        let mut out = String::new();
        let ok = self.ok();
        let assigned = self.assigned();
        let known: usize = self.groups.iter().map(|g| g.members.len()).sum();
        let size = self.groups.iter().filter(|g| !g.ranges.is_empty()).count();
        let epoch = self.map.as_ref().map_or(self.term, |st| st.map.epoch.max(self.term));
        for (k, v) in [
            ("cluster_state", if ok { "ok".to_string() } else { "fail".to_string() }),
            ("cluster_slots_assigned", assigned.to_string()),
            ("cluster_slots_ok", if ok { assigned.to_string() } else { "0".into() }),
            ("cluster_slots_pfail", "0".into()),
            ("cluster_slots_fail", if ok { "0".into() } else { assigned.to_string() }),
            ("cluster_known_nodes", known.max(1).to_string()),
            ("cluster_size", if self.initialized { size.to_string() } else { "0".into() }),
            ("cluster_current_epoch", epoch.to_string()),
            ("cluster_my_epoch", self.term.to_string()),
            ("cluster_stats_messages_sent", "0".into()),
            ("cluster_stats_messages_received", "0".into()),
            ("total_cluster_links_buffer_limit_exceeded", "0".into()),
        ] {
            out.push_str(&format!("{k}:{v}\r\n"));
        }
        out
    }

    fn node_entry(m: &Member) -> Option<Reply> {
        let a = m.addr.as_ref()?;
        Some(Reply::Array(vec![
            Reply::bulk(a.host.trim_start_matches('[').trim_end_matches(']').to_string()),
            Reply::Int(i64::from(a.port)),
            Reply::bulk(node_name(m.id)),
            Reply::Map(vec![]),
        ]))
    }

    /// `CLUSTER SLOTS`: each group's ranges with its master (the leader) first, then its replicas. During an
    /// election a group's slots stay with the last leader seen, as a Redis Cluster keeps listing a failed master
    /// until a replica is promoted: cluster clients keep their map and retry, where a missing range makes
    /// redis-py's RedisCluster refuse to start ("All slots are not covered").
    fn slots(&self) -> Reply {
        if !self.initialized {
            return Reply::Array(vec![]);
        }
        let mut out = Vec::new();
        for g in &self.groups {
            if g.shown_master.is_none() {
                continue;
            }
            let nodes: Vec<Reply> = g.members.iter().filter_map(View::node_entry).collect();
            for &(a, b) in &g.ranges {
                let mut range = vec![Reply::Int(i64::from(a)), Reply::Int(i64::from(b))];
                range.extend(nodes.iter().cloned());
                out.push(range);
            }
        }
        out.sort_by_key(|r| match r.first() {
            Some(Reply::Int(n)) => *n,
            _ => 0,
        });
        Reply::Array(out.into_iter().map(Reply::Array).collect())
    }

    /// `CLUSTER SHARDS`: one shard per group.
    fn shards(&self) -> Reply {
        if !self.initialized {
            return Reply::Array(vec![]);
        }
        let shards = self
            .groups
            .iter()
            .map(|g| {
                let slots = if g.fresh {
                    g.ranges.iter().flat_map(|&(a, b)| [Reply::Int(i64::from(a)), Reply::Int(i64::from(b))]).collect()
                } else {
                    vec![]
                };
                let nodes = g
                    .members
                    .iter()
                    .filter_map(|m| {
                        let a = m.addr.as_ref()?;
                        let ip = a.host.trim_start_matches('[').trim_end_matches(']').to_string();
                        let role = if Some(m.id) == g.leader { "master" } else { "replica" };
                        Some(Reply::Map(vec![
                            (Reply::bulk("id"), Reply::bulk(node_name(m.id))),
                            (Reply::bulk("port"), Reply::Int(i64::from(a.port))),
                            (Reply::bulk("ip"), Reply::bulk(ip.clone())),
                            (Reply::bulk("endpoint"), Reply::bulk(ip)),
                            (Reply::bulk("role"), Reply::bulk(role)),
                            (Reply::bulk("replication-offset"), Reply::Int(m.offset as i64)),
                            (Reply::bulk("health"), Reply::bulk(if g.fresh { "online" } else { "loading" })),
                        ]))
                    })
                    .collect();
                Reply::Map(vec![
                    (Reply::bulk("slots"), Reply::Array(slots)),
                    (Reply::bulk("nodes"), Reply::Array(nodes)),
                ])
            })
            .collect();
        Reply::Array(shards)
    }

    /// `CLUSTER NODES`: Redis's line per node (`id ip:port@cport flags master ping pong epoch link slots`), every
    /// group's.
    fn nodes(&self) -> String {
        let mut out = String::new();
        for g in &self.groups {
            let ranges: String =
                g.ranges.iter().map(|&(a, b)| if a == b { format!(" {a}") } else { format!(" {a}-{b}") }).collect();
            for m in &g.members {
                let addr = m.addr.as_ref().map_or_else(|| ":0@0".to_string(), |a| format!("{}@{}", a.resp, a.bus_port));
                let leads = Some(m.id) == g.shown_master;
                let mut flags = String::new();
                if m.id == self.me {
                    flags.push_str("myself,");
                }
                flags.push_str(if leads || g.shown_master.is_none() { "master" } else { "slave" });
                let master = match g.shown_master {
                    Some(l) if !leads => node_name(l),
                    _ => "-".into(),
                };
                let slots = if leads { ranges.as_str() } else { "" };
                out.push_str(&format!(
                    "{} {addr} {flags} {master} 0 0 {} connected{slots}\n",
                    node_name(m.id),
                    self.term
                ));
            }
        }
        out
    }
}

/// `ROLE` of a replica group member: the leader is a master with its replicas and their matched offsets; the
/// others are replicas of the leader (`connect` while none is known).
pub fn role(c: &Cluster) -> Reply {
    let v = View::of(c);
    if v.leader == Some(v.me) {
        let replicas = v
            .members
            .iter()
            .filter(|m| m.id != v.me)
            .filter_map(|m| {
                let a = m.addr.as_ref()?;
                Some(Reply::Array(vec![
                    Reply::bulk(a.host.clone()),
                    Reply::bulk(a.port.to_string()),
                    Reply::bulk(m.offset.to_string()),
                ]))
            })
            .collect();
        return Reply::Array(vec![Reply::bulk("master"), Reply::Int(v.applied as i64), Reply::Array(replicas)]);
    }
    let leader = v.leader.and_then(|l| v.members.iter().find(|m| m.id == l)).and_then(|m| m.addr.clone());
    let (host, port, state) = match &leader {
        Some(a) => (a.host.clone(), i64::from(a.port), "connected"),
        None => (String::new(), 0, "connect"),
    };
    Reply::Array(vec![
        Reply::bulk("slave"),
        Reply::bulk(host),
        Reply::Int(port),
        Reply::bulk(state),
        Reply::Int(v.applied as i64),
    ])
}

/// `INFO replication` of a replica group member (`master_repl_offset`: the applied log index).
pub fn info_replication(c: &Cluster, out: &mut String, replid: &str) {
    let v = View::of(c);
    let mut kv = |k: &str, val: String| out.push_str(&format!("{k}:{val}\r\n"));
    if v.leader == Some(v.me) {
        kv("role", "master".into());
        let others: Vec<&Member> = v.members.iter().filter(|m| m.id != v.me).collect();
        kv("connected_slaves", others.len().to_string());
        for (i, m) in others.iter().enumerate() {
            if let Some(a) = &m.addr {
                let lag = v.applied.saturating_sub(m.offset);
                kv(
                    &format!("slave{i}"),
                    format!("ip={},port={},state=online,offset={},lag={lag}", a.host, a.port, m.offset),
                );
            }
        }
    } else {
        kv("role", "slave".into());
        let leader = v.leader.and_then(|l| v.members.iter().find(|m| m.id == l)).and_then(|m| m.addr.clone());
        kv("master_host", leader.as_ref().map_or_else(String::new, |a| a.host.clone()));
        kv("master_port", leader.as_ref().map_or(0, |a| a.port).to_string());
        kv("master_link_status", if leader.is_some() { "up" } else { "down" }.into());
        kv("master_last_io_seconds_ago", if leader.is_some() { "0" } else { "-1" }.into());
        kv("master_sync_in_progress", "0".into());
        kv("slave_read_repl_offset", v.applied.to_string());
        kv("slave_repl_offset", v.applied.to_string());
        kv("slave_priority", "100".into());
        kv("slave_read_only", "1".into());
        kv("replica_announced", "1".into());
        kv("connected_slaves", "0".into());
    }
    kv("master_failover_state", "no-failover".into());
    kv("master_replid", replid.to_string());
    kv("master_replid2", "0000000000000000000000000000000000000000".into());
    kv("master_repl_offset", v.applied.to_string());
    kv("second_repl_offset", "-1".into());
    kv("repl_backlog_active", "0".into());
    kv("raft_term", v.term.to_string());
    kv("raft_node_id", node_name(v.me));
}
