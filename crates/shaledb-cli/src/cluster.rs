//! `shaledb cluster create HOST:PORT ... [--replicas N]`: forms replica groups of servers started with
//! `--cluster-enabled yes`, taking `redis-cli --cluster create`'s arguments: the nodes form groups of N+1, in
//! the order given (group 1 is the first N+1 nodes, ...), and the 16384 slots are split evenly among the groups as
//! redis-cli splits them among masters (issue 44). It talks RESP to the nodes: `CLUSTER MYID` and `CONFIG GET
//! cluster-port` on each, `CLUSTER SHALEDB-INIT` on each group's first node, `CLUSTER SHALEDB-GROUP` until each
//! group has a leader, `CLUSTER SHALEDB-SETMAP <group> <map>` (epoch 1, also for a single group) to each group's
//! leader, then `CLUSTER INFO`, `SHALEDB-GROUP` and `SLOTS` on each until every one reports `cluster_state:ok`
//! and the map.
//!
//! `shaledb cluster add-node NEW_HOST:PORT EXISTING_HOST:PORT` and `shaledb cluster del-node HOST:PORT NODE_ID`
//! (alias `remove-node`) change the group's members, in redis-cli --cluster's argument order: `CLUSTER
//! SHALEDB-ADD-NODE` / `SHALEDB-REMOVE-NODE` sent to the given member, following its `-MOVED` to the leader.

use anyhow::{anyhow, bail, Context, Result};
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

mod import;
mod reshard;

#[derive(clap::Subcommand, Debug)]
pub enum ClusterCommand {
    /// Form replica groups of the servers at HOST:PORT (each started with --cluster-enabled yes and an empty
    /// --dir) that share the 16384 slots. `--replicas N`: groups of N+1 nodes in the order given, the slots split
    /// evenly among the groups, as redis-cli --cluster create.
    Create(CreateArgs),
    /// Add the server at NEW_HOST:PORT (started with --cluster-enabled yes and an empty --dir) to the group that
    /// EXISTING_HOST:PORT is a member of: it joins as a learner, catches up (a snapshot if the log it needs is
    /// purged), then becomes a voter.
    AddNode(AddNodeArgs),
    /// Remove node NODE_ID (CLUSTER MYID's 40 hex digits, as CLUSTER NODES lists it) from the group that
    /// HOST:PORT is a member of. Stop the removed node's server afterwards.
    #[command(alias = "remove-node")]
    DelNode(DelNodeArgs),
    /// Move N hash slots from one group to another (redis-cli --cluster reshard's arguments): the lowest N slots
    /// of the group of node --from go to the group of node --to, in batches of 32, with their keys. Finishes an
    /// interrupted move first (as `fix`).
    Reshard(reshard::ReshardArgs),
    /// Move slots from the fullest groups to the emptiest until every group owns 16384/groups (the first
    /// 16384 % groups one more). Finishes an interrupted move first (as `fix`).
    Rebalance(reshard::RebalanceArgs),
    /// Finish a slot move that was interrupted (a killed `reshard`, a lost node): every group gets the newest
    /// map, the moving slots' keys are copied again and the move completes.
    Fix(reshard::FixArgs),
    /// Copy the keys of a standalone server (shaledb server or Redis) at --from HOST:PORT into the cluster
    /// (redis-cli --cluster import's arguments): each key is DUMPed from the source and RESTOREd in the group
    /// owning its slot. The source is left unchanged. How a single-node database becomes a cluster's.
    Import(import::ImportArgs),
}

#[derive(clap::Args, Debug)]
pub struct AddNodeArgs {
    /// The new node's client address.
    #[arg(value_name = "NEW_HOST:PORT")]
    pub new_node: String,
    /// A member of the group (any: the command is sent on to the leader).
    #[arg(value_name = "EXISTING_HOST:PORT")]
    pub existing: String,
}

#[derive(clap::Args, Debug)]
pub struct DelNodeArgs {
    /// A member of the group (any: the command is sent on to the leader).
    #[arg(value_name = "HOST:PORT")]
    pub node: String,
    /// The id of the node to remove.
    #[arg(value_name = "NODE_ID")]
    pub node_id: String,
}

#[derive(clap::Args, Debug)]
pub struct CreateArgs {
    /// The nodes' client addresses, HOST:PORT (each is recorded with this HOST): a multiple of --replicas+1,
    /// group 1 the first N+1 of them, group 2 the next N+1, ...; each group's first node forms it.
    #[arg(required = true, value_name = "HOST:PORT")]
    pub nodes: Vec<String>,
    /// Replicas per master: each group has N+1 nodes.
    #[arg(long, default_value_t = 0)]
    pub replicas: usize,
    /// Seconds to wait for the groups' leaders, the slot map, and every node to report cluster_state:ok.
    #[arg(long, default_value_t = 30)]
    pub timeout: u64,
}

pub fn run(c: ClusterCommand) -> Result<i32> {
    match c {
        ClusterCommand::Create(a) => create(&a).map(|()| 0),
        ClusterCommand::AddNode(a) => add_node(&a).map(|()| 0),
        ClusterCommand::DelNode(a) => del_node(&a).map(|()| 0),
        ClusterCommand::Reshard(a) => reshard::reshard(&a).map(|()| 0),
        ClusterCommand::Rebalance(a) => reshard::rebalance(&a).map(|()| 0),
        ClusterCommand::Fix(a) => reshard::fix(&a).map(|()| 0),
        ClusterCommand::Import(a) => import::import(&a).map(|()| 0),
    }
}

/// A RESP reply, as much of it as this tool reads.
#[derive(Debug, Clone, PartialEq)]
enum Reply {
    Simple(String),
    Error(String),
    Int(i64),
    Bulk(Option<Vec<u8>>),
    Array(Option<Vec<Reply>>),
}

impl Reply {
    fn text(&self) -> Option<String> {
        match self {
            Reply::Simple(s) => Some(s.clone()),
            Reply::Bulk(Some(b)) => Some(String::from_utf8_lossy(b).into_owned()),
            Reply::Int(n) => Some(n.to_string()),
            _ => None,
        }
    }
}

/// Most bytes of one bulk string or elements of one array this tool accepts from a node.
const MAX_LEN: usize = 16 << 20;
/// The same for a slot move's exports: a key's DUMP payload may be as long as a string value (Redis's
/// `proto-max-bulk-len`, 512 MiB).
const MAX_PAYLOAD: usize = 512 << 20;

struct Conn {
    addr: String,
    r: BufReader<TcpStream>,
    /// The longest bulk string or array accepted in a reply.
    max_len: usize,
}

impl Conn {
    fn open(addr: &str) -> Result<Conn> {
        // CLUSTER SHALEDB-ADD-NODE answers once the new node caught up: at most 120 s on the server's side.
        Conn::open_for(addr, Duration::from_secs(150))
    }

    /// A connection whose replies may take up to `read_timeout`.
    fn open_for(addr: &str, read_timeout: Duration) -> Result<Conn> {
        let sock = addr
            .to_socket_addrs()
            .with_context(|| format!("resolving {addr}"))?
            .next()
            .ok_or_else(|| anyhow!("{addr} resolves to no address"))?;
        let s = TcpStream::connect_timeout(&sock, Duration::from_secs(5))
            .with_context(|| format!("connecting to {addr}"))?;
        s.set_read_timeout(Some(read_timeout))?;
        s.set_write_timeout(Some(Duration::from_secs(5)))?;
        Ok(Conn { addr: addr.to_string(), r: BufReader::new(s), max_len: MAX_LEN })
    }

    fn cmd(&mut self, args: &[&str]) -> Result<Reply> {
        let bin: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        self.cmd_bin(&bin)
    }

    /// Commands sent in one write, their replies read in order (a failed connection fails them all).
    fn pipeline(&mut self, cmds: &[Vec<&[u8]>]) -> Result<Vec<Reply>> {
        let mut out = Vec::new();
        for c in cmds {
            encode_command(c, &mut out);
        }
        self.r
            .get_mut()
            .write_all(&out)
            .with_context(|| format!("sending {} commands to {}", cmds.len(), self.addr))?;
        (0..cmds.len())
            .map(|i| {
                read_reply_max(&mut self.r, 0, self.max_len)
                    .with_context(|| format!("reading reply {} of {} from {}", i + 1, cmds.len(), self.addr))
            })
            .collect()
    }

    /// A command whose arguments may be any bytes (a DUMP payload).
    fn cmd_bin(&mut self, args: &[&[u8]]) -> Result<Reply> {
        let mut out = Vec::new();
        encode_command(args, &mut out);
        // What the errors name: the command and its first arguments, never a payload.
        let what = || {
            args.iter().take(3).map(|a| String::from_utf8_lossy(&a[..a.len().min(40)])).collect::<Vec<_>>().join(" ")
        };
        self.r.get_mut().write_all(&out).with_context(|| format!("sending {} to {}", what(), self.addr))?;
        read_reply_max(&mut self.r, 0, self.max_len)
            .with_context(|| format!("reading the reply of {} from {}", what(), self.addr))
    }
}

/// `args` as a RESP array of bulk strings, appended to `out`.
fn encode_command(args: &[&[u8]], out: &mut Vec<u8>) {
    out.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
    for a in args {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
}

fn read_line(r: &mut impl BufRead) -> Result<String> {
    let mut line = Vec::new();
    let n = std::io::Read::take(&mut *r, 64 << 10).read_until(b'\n', &mut line)?;
    if n == 0 {
        bail!("connection closed");
    }
    if !line.ends_with(b"\r\n") {
        bail!("a reply line without CRLF");
    }
    line.truncate(line.len() - 2);
    String::from_utf8(line).map_err(|_| anyhow!("a reply line that is not UTF-8"))
}

#[cfg(test)]
fn read_reply(r: &mut impl BufRead, depth: usize) -> Result<Reply> {
    read_reply_max(r, depth, MAX_LEN)
}

/// A reply whose bulk strings and arrays are at most `max` long.
fn read_reply_max(r: &mut impl BufRead, depth: usize, max: usize) -> Result<Reply> {
    if depth > 8 {
        bail!("a reply nested too deep");
    }
    let line = read_line(r)?;
    let (kind, rest) = line.split_at(line.char_indices().nth(1).map_or(line.len(), |(i, _)| i));
    let len = |rest: &str| -> Result<Option<usize>> {
        let n: i64 = rest.parse().map_err(|_| anyhow!("bad length '{rest}'"))?;
        if n < 0 {
            return Ok(None);
        }
        let n = usize::try_from(n).map_err(|_| anyhow!("bad length '{rest}'"))?;
        if n > max {
            bail!("length {n} over the limit");
        }
        Ok(Some(n))
    };
    Ok(match kind {
        "+" => Reply::Simple(rest.to_string()),
        "-" => Reply::Error(rest.to_string()),
        ":" => Reply::Int(rest.parse().map_err(|_| anyhow!("bad integer '{rest}'"))?),
        "$" => match len(rest)? {
            None => Reply::Bulk(None),
            Some(n) => {
                let mut b = vec![0u8; n + 2];
                std::io::Read::read_exact(r, &mut b)?;
                b.truncate(n);
                Reply::Bulk(Some(b))
            }
        },
        "*" => match len(rest)? {
            None => Reply::Array(None),
            Some(n) => Reply::Array(Some((0..n).map(|_| read_reply_max(r, depth + 1, max)).collect::<Result<_>>()?)),
        },
        _ => bail!("an unknown reply type '{kind}'"),
    })
}

/// The error text of an error reply, else the reply itself.
fn expect_ok(r: Reply, what: &str, addr: &str) -> Result<Reply> {
    match r {
        Reply::Error(e) => bail!("{addr}: {what}: {e}"),
        r => Ok(r),
    }
}

/// `HOST:PORT` split (an IPv6 host in brackets).
fn split_host_port(s: &str) -> Result<(String, u16)> {
    let (host, port) = s.rsplit_once(':').ok_or_else(|| anyhow!("'{s}' is not HOST:PORT"))?;
    let port: u16 = port.parse().ok().filter(|&p| p > 0).ok_or_else(|| anyhow!("'{s}': '{port}' is not a port"))?;
    if host.is_empty() {
        bail!("'{s}' has no host");
    }
    Ok((host.to_string(), port))
}

/// The hash slots of a Redis Cluster.
const SLOTS: u32 = 16384;

/// The checks before anything is sent: the node count is a multiple of `--replicas`+1, no node is given twice.
/// The number of groups.
fn check_layout(nodes: &[String], replicas: usize) -> Result<usize> {
    let per_group = replicas.checked_add(1).ok_or_else(|| anyhow!("--replicas {replicas} is too large"))?;
    if nodes.is_empty() || !nodes.len().is_multiple_of(per_group) {
        bail!(
            "{} node(s) given with --replicas {replicas}: the nodes form groups of {per_group} (--replicas N: N+1 \
             nodes per group), so give a multiple of {per_group}",
            nodes.len()
        );
    }
    let groups = nodes.len() / per_group;
    if groups > SLOTS as usize {
        bail!("{groups} groups: more groups than the {SLOTS} slots");
    }
    for (i, n) in nodes.iter().enumerate() {
        split_host_port(n)?;
        if nodes[..i].contains(n) {
            bail!("{n} is given twice");
        }
    }
    Ok(groups)
}

/// The slots of group `g` (0-based) of `groups`, first and last: as redis-cli --cluster create splits them,
/// 16384/groups each, each end rounded to the nearest slot, so the ranges are contiguous, differ by at most one
/// slot in size, and the last ends at 16383 (3 groups: 0-5460, 5461-10922, 10923-16383).
/// REQUIRES: 1 <= groups <= 16384, g < groups.
fn slot_range(g: usize, groups: usize) -> (u32, u32) {
    let (n, slots) = (groups as u64, u64::from(SLOTS));
    // round((i+1) * slots/n - 1) in integers: (2(i+1)slots - n) / 2n.
    let end = |i: usize| -> u32 {
        if i + 1 == groups {
            SLOTS - 1
        } else {
            ((2 * (i as u64 + 1) * slots - n) / (2 * n)) as u32
        }
    };
    (if g == 0 { 0 } else { end(g - 1) + 1 }, end(g))
}

/// A slot range as the map text and redis-cli write it: `a-b`, or `a` for one slot.
fn range_text((a, b): (u32, u32)) -> String {
    if a == b {
        a.to_string()
    } else {
        format!("{a}-{b}")
    }
}

/// Slot ranges written as the map text writes them: comma-separated `a-b` or `a`; `-` or nothing for none.
fn parse_ranges(s: &str) -> Option<Vec<(u32, u32)>> {
    let s = s.trim();
    if s.is_empty() || s == "-" {
        return Some(Vec::new());
    }
    s.split(',')
        .map(|r| {
            let (a, b) = r.split_once('-').unwrap_or((r, r));
            let (a, b): (u32, u32) = (a.trim().parse().ok()?, b.trim().parse().ok()?);
            (a <= b && b < SLOTS).then_some((a, b))
        })
        .collect()
}

/// One group of the cluster being created.
struct Group {
    /// 1-based, as the map names it.
    gid: usize,
    slots: (u32, u32),
    /// (client address as given, node id, `host:port@busport`), the first one forms the group.
    members: Vec<(String, String, String)>,
}

/// The cluster map that `CLUSTER SHALEDB-SETMAP` takes: `epoch E`, then per group `group G RANGES` and a
/// `node G ID HOST:PORT@BUSPORT` line per member, separated by "\n".
fn map_text(epoch: u64, groups: &[Group]) -> String {
    let mut lines = vec![format!("epoch {epoch}")];
    for g in groups {
        lines.push(format!("group {} {}", g.gid, range_text(g.slots)));
        for (_, id, addr) in &g.members {
            lines.push(format!("node {} {id} {addr}", g.gid));
        }
    }
    lines.join("\n")
}

/// The id and `host:port@busport` of the server at `n` (started with --cluster-enabled yes).
fn identify(n: &str) -> Result<(String, String)> {
    let (host, port) = split_host_port(n)?;
    let mut c = Conn::open(n)?;
    let id = expect_ok(c.cmd(&["CLUSTER", "MYID"])?, "CLUSTER MYID (is it started with --cluster-enabled yes?)", n)?
        .text()
        .ok_or_else(|| anyhow!("{n}: CLUSTER MYID gave no id"))?;
    let bus = match expect_ok(c.cmd(&["CONFIG", "GET", "cluster-port"])?, "CONFIG GET cluster-port", n)? {
        Reply::Array(Some(v)) if v.len() == 2 => v[1].text().and_then(|t| t.parse::<u16>().ok()),
        _ => None,
    }
    .filter(|&p| p > 0)
    .ok_or_else(|| anyhow!("{n}: CONFIG GET cluster-port gave no bus port"))?;
    Ok((id, format!("{host}:{port}@{bus}")))
}

/// Sends `args` to `first`, following `-MOVED <slot> <addr>` to the leader (at most 3 times).
fn to_leader(first: &str, args: &[&str]) -> Result<(String, Reply)> {
    let mut addr = first.to_string();
    for _ in 0..4 {
        let r = Conn::open(&addr)?.cmd(args)?;
        match &r {
            Reply::Error(e) if e.starts_with("MOVED ") => {
                let to = e.split_whitespace().nth(2).ok_or_else(|| anyhow!("{addr}: a bad redirect '{e}'"))?;
                println!(">>> {addr} sends it to the leader, {to}");
                addr = to.to_string();
            }
            _ => return Ok((addr, r)),
        }
    }
    bail!("{first}: still redirected after 3 hops (an election in progress? try again)")
}

fn add_node(a: &AddNodeArgs) -> Result<()> {
    split_host_port(&a.existing)?;
    if a.new_node == a.existing {
        bail!("the new node and the existing one are both {}", a.new_node);
    }
    let (id, addr) = identify(&a.new_node)?;
    println!(">>> adding {} as node {id} ({addr}); it catches up before it votes", a.new_node);
    let (leader, r) = to_leader(&a.existing, &["CLUSTER", "SHALEDB-ADD-NODE", &id, &addr])?;
    expect_ok(r, "CLUSTER SHALEDB-ADD-NODE", &leader)?;
    println!("[OK] Node {id} ({}) is a voting member of the group.", a.new_node);
    Ok(())
}

fn del_node(a: &DelNodeArgs) -> Result<()> {
    split_host_port(&a.node)?;
    let (leader, r) = to_leader(&a.node, &["CLUSTER", "SHALEDB-REMOVE-NODE", &a.node_id])?;
    expect_ok(r, "CLUSTER SHALEDB-REMOVE-NODE", &leader)?;
    println!("[OK] Node {} left the group; stop its server (its directory is no longer a member's).", a.node_id);
    Ok(())
}

/// `CLUSTER SHALEDB-GROUP`'s answer: the group a member belongs to as it knows it.
#[derive(Debug)]
struct GroupView {
    /// 0 while the member has no map.
    gid: i64,
    epoch: i64,
    /// The leader's id, empty while none is known.
    leader: String,
    /// (id, address).
    members: Vec<(String, String)>,
    slots: Vec<(u32, u32)>,
}

fn group_view(n: &str) -> Result<GroupView> {
    let r =
        expect_ok(Conn::open_for(n, POLL_TIMEOUT)?.cmd(&["CLUSTER", "SHALEDB-GROUP"])?, "CLUSTER SHALEDB-GROUP", n)?;
    let bad = || anyhow!("{n}: CLUSTER SHALEDB-GROUP gave an unexpected reply: {r:?}");
    let Reply::Array(Some(v)) = &r else { return Err(bad()) };
    let [Reply::Int(gid), Reply::Int(epoch), leader, Reply::Array(Some(members)), slots] = v.as_slice() else {
        return Err(bad());
    };
    let members = members
        .iter()
        .map(|m| match m {
            Reply::Array(Some(p)) if p.len() == 2 => Some((p[0].text()?, p[1].text()?)),
            _ => None,
        })
        .collect::<Option<Vec<_>>>()
        .ok_or_else(bad)?;
    let slots = slots.text().and_then(|s| parse_ranges(&s)).ok_or_else(bad)?;
    Ok(GroupView { gid: *gid, epoch: *epoch, leader: leader.text().unwrap_or_default(), members, slots })
}

/// How long one poll of a node may take before it counts as not answering.
const POLL_TIMEOUT: Duration = Duration::from_secs(5);

/// The client address of group `g`'s leader, once one of its members names one (`CLUSTER SHALEDB-GROUP`, or
/// `ROLE` where a node does not know that command).
fn wait_leader(g: &Group, deadline: Instant) -> Result<String> {
    let mut last = String::from("no member answered");
    loop {
        for (n, _, _) in &g.members {
            match group_view(n) {
                Ok(v) => match g.members.iter().find(|(_, id, _)| !v.leader.is_empty() && *id == v.leader) {
                    Some((addr, _, _)) => return Ok(addr.clone()),
                    None => last = format!("{n} knows no leader yet"),
                },
                Err(e) => {
                    last = format!("{e:#}");
                    let role = Conn::open_for(n, POLL_TIMEOUT).and_then(|mut c| c.cmd(&["ROLE"]));
                    if let Ok(Reply::Array(Some(v))) = role {
                        if v.first().and_then(Reply::text).as_deref() == Some("master") {
                            return Ok(n.clone());
                        }
                    }
                }
            }
        }
        if Instant::now() >= deadline {
            bail!("group {}: no leader elected in time ({last})", g.gid);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Sends the map to group `g`'s leader (first `leader`), following `-MOVED` and retrying `-CLUSTERDOWN` and
/// lost connections until `deadline`; the leader that committed it.
fn set_map(g: &Group, mut leader: String, text: &str, deadline: Instant, timeout: Duration) -> Result<String> {
    let gid = g.gid.to_string();
    let args = ["CLUSTER", "SHALEDB-SETMAP", gid.as_str(), text];
    loop {
        let last = match Conn::open_for(&leader, timeout.max(POLL_TIMEOUT)).and_then(|mut c| c.cmd(&args)) {
            Ok(Reply::Error(e)) if e.starts_with("MOVED ") => match e.split_whitespace().nth(2) {
                Some(to) if to != leader => {
                    println!(">>> group {}: {leader} sends the map on to its leader, {to}", g.gid);
                    leader = to.to_string();
                    continue;
                }
                _ => e,
            },
            Ok(Reply::Error(e)) if e.starts_with("CLUSTERDOWN") => e,
            Ok(Reply::Error(e)) => bail!("{leader}: CLUSTER SHALEDB-SETMAP for group {}: {e}", g.gid),
            Ok(_) => return Ok(leader),
            Err(e) => {
                let e = format!("{e:#}");
                // The leader may be gone: ask the group again.
                if let Ok(l) = wait_leader(g, Instant::now()) {
                    leader = l;
                }
                e
            }
        };
        if Instant::now() >= deadline {
            bail!("group {}: the slot map was not committed in time (last: {last})", g.gid);
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// `CLUSTER SLOTS` as (first slot, last slot, the node ids serving it, sorted), adjacent ranges of the same
/// nodes merged, by first slot.
fn slot_table(n: &str) -> Result<Vec<(u32, u32, Vec<String>)>> {
    let r = expect_ok(Conn::open_for(n, POLL_TIMEOUT)?.cmd(&["CLUSTER", "SLOTS"])?, "CLUSTER SLOTS", n)?;
    let bad = || anyhow!("{n}: CLUSTER SLOTS gave an unexpected reply: {r:?}");
    let Reply::Array(Some(ranges)) = &r else { return Err(bad()) };
    let mut out: Vec<(u32, u32, Vec<String>)> = Vec::new();
    for range in ranges {
        let Reply::Array(Some(v)) = range else { return Err(bad()) };
        let [Reply::Int(a), Reply::Int(b), nodes @ ..] = v.as_slice() else { return Err(bad()) };
        let mut ids = nodes
            .iter()
            .map(|x| match x {
                Reply::Array(Some(e)) => e.get(2).and_then(Reply::text),
                _ => None,
            })
            .collect::<Option<Vec<_>>>()
            .ok_or_else(bad)?;
        ids.sort();
        let (a, b) = (u32::try_from(*a).map_err(|_| bad())?, u32::try_from(*b).map_err(|_| bad())?);
        out.push((a, b, ids));
    }
    out.sort();
    let mut merged: Vec<(u32, u32, Vec<String>)> = Vec::new();
    for (a, b, ids) in out {
        match merged.last_mut() {
            Some(last) if last.1 + 1 == a && last.2 == ids => last.1 = b,
            _ => merged.push((a, b, ids)),
        }
    }
    Ok(merged)
}

/// Why node `n` of group `g` does not (yet) show the cluster as created, or `Ok` when it does: it reports
/// `cluster_state:ok`, its group and map are `g` at `epoch`, and its `CLUSTER SLOTS` is `want`.
fn node_agrees(n: &str, g: &Group, epoch: u64, want: &[(u32, u32, Vec<String>)]) -> Result<()> {
    let info = expect_ok(Conn::open_for(n, POLL_TIMEOUT)?.cmd(&["CLUSTER", "INFO"])?, "CLUSTER INFO", n)?;
    let state = info.text().unwrap_or_default();
    let state = state.lines().find_map(|l| l.trim().strip_prefix("cluster_state:")).unwrap_or("?").to_string();
    if state != "ok" {
        bail!("{n}: cluster_state:{state}");
    }
    let v = group_view(n)?;
    let mut ids: Vec<&str> = v.members.iter().map(|(id, _)| id.as_str()).collect();
    ids.sort_unstable();
    let mut want_ids: Vec<&str> = g.members.iter().map(|(_, id, _)| id.as_str()).collect();
    want_ids.sort_unstable();
    if v.gid != g.gid as i64 || v.epoch != epoch as i64 || v.slots != [g.slots] || ids != want_ids {
        bail!("{n}: CLUSTER SHALEDB-GROUP shows {v:?}, not group {} at epoch {epoch} with slots {:?}", g.gid, g.slots);
    }
    let table = slot_table(n)?;
    if table != want {
        bail!("{n}: CLUSTER SLOTS shows {table:?}, expected {want:?}");
    }
    Ok(())
}

fn create(a: &CreateArgs) -> Result<()> {
    let ngroups = check_layout(&a.nodes, a.replicas)?;
    let per_group = a.replicas + 1;
    println!(">>> Performing hash slots allocation on {} nodes ({ngroups} group(s) of {per_group})...", a.nodes.len());
    let mut groups: Vec<Group> =
        (0..ngroups).map(|g| Group { gid: g + 1, slots: slot_range(g, ngroups), members: Vec::new() }).collect();
    for (i, n) in a.nodes.iter().enumerate() {
        let (id, addr) = identify(n)?;
        let info = expect_ok(Conn::open(n)?.cmd(&["CLUSTER", "INFO"])?, "CLUSTER INFO", n)?.text().unwrap_or_default();
        if let Some(size) = info.lines().find_map(|l| l.trim().strip_prefix("cluster_size:")).filter(|s| *s != "0") {
            bail!("{n} is already a member of a group (CLUSTER INFO shows cluster_size:{size})");
        }
        groups[i / per_group].members.push((n.clone(), id, addr));
    }
    for g in &groups {
        let (a, b) = g.slots;
        let names: Vec<&str> = g.members.iter().map(|(n, _, _)| n.as_str()).collect();
        println!("Group {} -> Slots {a} - {b} ({} slots): {}", g.gid, b - a + 1, names.join(" "));
    }
    for g in &groups {
        let mut init: Vec<&str> = vec!["CLUSTER", "SHALEDB-INIT"];
        for (_, id, addr) in &g.members {
            init.push(id);
            init.push(addr);
        }
        let first = &g.members[0].0;
        expect_ok(Conn::open(first)?.cmd(&init)?, "CLUSTER SHALEDB-INIT", first)?;
        println!(">>> group {} formed on {first}", g.gid);
    }
    let timeout = Duration::from_secs(a.timeout);
    let deadline = Instant::now() + timeout;
    let epoch = 1;
    let text = map_text(epoch, &groups);
    for g in &groups {
        let leader = wait_leader(g, deadline)?;
        let leader = set_map(g, leader, &text, deadline, timeout)?;
        println!(">>> group {}: the slot map (epoch {epoch}) is committed by its leader {leader}", g.gid);
    }
    println!(">>> waiting for every node to report cluster_state:ok and the map");
    let mut want: Vec<(u32, u32, Vec<String>)> = groups
        .iter()
        .map(|g| {
            let mut ids: Vec<String> = g.members.iter().map(|(_, id, _)| id.clone()).collect();
            ids.sort();
            (g.slots.0, g.slots.1, ids)
        })
        .collect();
    want.sort();
    let mut waiting: Vec<(&Group, &str)> =
        groups.iter().flat_map(|g| g.members.iter().map(move |(n, _, _)| (g, n.as_str()))).collect();
    loop {
        let mut still = Vec::new();
        let mut reasons = Vec::new();
        for (g, n) in waiting {
            if let Err(e) = node_agrees(n, g, epoch, &want) {
                reasons.push(format!("{e:#}"));
                still.push((g, n));
            }
        }
        waiting = still;
        if waiting.is_empty() {
            break;
        }
        if Instant::now() >= deadline {
            bail!("after {} s these nodes do not agree yet:\n  {}", a.timeout, reasons.join("\n  "));
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    for g in &groups {
        let leader = group_view(&g.members[0].0).map(|v| v.leader).unwrap_or_default();
        for (n, id, _) in &g.members {
            if *id == leader {
                println!("M: {id} {n}");
                println!(
                    "   slots:[{}] ({} slots) master, group {}",
                    range_text(g.slots),
                    g.slots.1 - g.slots.0 + 1,
                    g.gid
                );
            } else {
                println!("S: {id} {n}");
                println!("   replicates {leader}, group {}", g.gid);
            }
        }
    }
    println!("[OK] All {} nodes agree about slots configuration.", a.nodes.len());
    println!("[OK] All {SLOTS} slots covered.");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_counts_must_be_whole_groups() {
        let n = |k: usize| (1..=k).map(|i| format!("h:{i}")).collect::<Vec<_>>();
        assert_eq!(check_layout(&n(3), 2).unwrap(), 1);
        assert_eq!(check_layout(&n(3), 0).unwrap(), 3);
        assert_eq!(check_layout(&n(6), 2).unwrap(), 2);
        assert_eq!(check_layout(&n(6), 1).unwrap(), 3);
        assert_eq!(check_layout(&n(9), 2).unwrap(), 3);
        for (k, r) in [(4, 2), (5, 2), (2, 2), (7, 1)] {
            let e = check_layout(&n(k), r).unwrap_err().to_string();
            assert!(e.contains(&format!("a multiple of {}", r + 1)), "{e}");
        }
        assert!(check_layout(&[], 0).is_err());
        assert!(check_layout(&n(2), usize::MAX).unwrap_err().to_string().contains("too large"));
        let n = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert!(check_layout(&n(&["h:1", "h:1"]), 1).unwrap_err().to_string().contains("twice"));
        assert!(check_layout(&n(&["h:1", "h:2", "h:3", "h:1"]), 1).unwrap_err().to_string().contains("twice"));
        assert!(check_layout(&n(&["h1", "h:2"]), 1).unwrap_err().to_string().contains("HOST:PORT"));
    }

    #[test]
    fn slots_split_as_redis_cli_splits_them() {
        let split = |n: usize| (0..n).map(|g| slot_range(g, n)).collect::<Vec<_>>();
        assert_eq!(split(1), [(0, 16383)]);
        assert_eq!(split(2), [(0, 8191), (8192, 16383)]);
        assert_eq!(split(3), [(0, 5460), (5461, 10922), (10923, 16383)]);
        assert_eq!(split(4), [(0, 4095), (4096, 8191), (8192, 12287), (12288, 16383)]);
        assert_eq!(split(5), [(0, 3276), (3277, 6553), (6554, 9829), (9830, 13106), (13107, 16383)]);
        assert_eq!(split(16384)[..3], [(0, 0), (1, 1), (2, 2)]);
        assert_eq!(split(16384)[16383], (16383, 16383));
        // Any count: contiguous from 0 to 16383, no range empty, sizes within one slot of each other.
        for n in (1..=300).chain([1000, 4095, 8191, 8192, 16383, 16384]) {
            let s = split(n);
            assert_eq!(s[0].0, 0, "{n}");
            assert_eq!(s[n - 1].1, 16383, "{n}");
            for w in s.windows(2) {
                assert_eq!(w[0].1 + 1, w[1].0, "{n}");
            }
            let sizes: Vec<u32> = s.iter().map(|(a, b)| b + 1 - a).collect();
            let (lo, hi) = (sizes.iter().min().unwrap(), sizes.iter().max().unwrap());
            assert!(*lo >= 1 && hi - lo <= 1, "{n}: {lo}..{hi}");
        }
    }

    #[test]
    fn map_text_lists_groups_and_nodes() {
        let node =
            |p: u16, id: char| (format!("127.0.0.1:{p}"), id.to_string().repeat(40), format!("127.0.0.1:{p}@1{p}"));
        let groups = vec![
            Group { gid: 1, slots: (0, 8191), members: vec![node(7000, 'a'), node(7001, 'b')] },
            Group { gid: 2, slots: (8192, 16383), members: vec![node(7002, 'c'), node(7003, 'd')] },
        ];
        let a = "a".repeat(40);
        let (b, c, d) = ("b".repeat(40), "c".repeat(40), "d".repeat(40));
        assert_eq!(
            map_text(1, &groups),
            format!(
                "epoch 1\ngroup 1 0-8191\nnode 1 {a} 127.0.0.1:7000@17000\nnode 1 {b} 127.0.0.1:7001@17001\n\
                 group 2 8192-16383\nnode 2 {c} 127.0.0.1:7002@17002\nnode 2 {d} 127.0.0.1:7003@17003"
            )
        );
        let one = vec![Group { gid: 1, slots: (0, 16383), members: vec![node(7000, 'a')] }];
        assert_eq!(map_text(3, &one), format!("epoch 3\ngroup 1 0-16383\nnode 1 {a} 127.0.0.1:7000@17000"));
        assert_eq!(range_text((5, 5)), "5");
    }

    #[test]
    fn slot_ranges_parse() {
        assert_eq!(parse_ranges("0-8191"), Some(vec![(0, 8191)]));
        assert_eq!(parse_ranges("0-10,12,20-30"), Some(vec![(0, 10), (12, 12), (20, 30)]));
        assert_eq!(parse_ranges("-"), Some(vec![]));
        assert_eq!(parse_ranges(""), Some(vec![]));
        assert_eq!(parse_ranges("5-4"), None);
        assert_eq!(parse_ranges("0-16384"), None);
        assert_eq!(parse_ranges("x"), None);
    }

    #[test]
    fn replies_parse() {
        let mut r =
            std::io::Cursor::new(b"*2\r\n$12\r\ncluster-port\r\n$5\r\n17000\r\n-ERR x\r\n:5\r\n+OK\r\n".to_vec());
        let a = read_reply(&mut r, 0).unwrap();
        assert_eq!(
            a,
            Reply::Array(Some(vec![Reply::Bulk(Some(b"cluster-port".to_vec())), Reply::Bulk(Some(b"17000".to_vec()))]))
        );
        assert_eq!(read_reply(&mut r, 0).unwrap(), Reply::Error("ERR x".into()));
        assert_eq!(read_reply(&mut r, 0).unwrap(), Reply::Int(5));
        assert_eq!(read_reply(&mut r, 0).unwrap(), Reply::Simple("OK".into()));
        assert!(read_reply(&mut std::io::Cursor::new(b"$99999999999\r\n".to_vec()), 0).is_err());
    }
}
