//! `--cluster`: routing by hash slot. The setup reads `CLUSTER NODES` (the nodes to try after a lost
//! connection) and `CLUSTER SLOTS` (the slot -> master table, [`SlotMap`]); each client keeps a connection per
//! master and sends each request to the master of its key's slot, splitting a pipelined batch by node.

use super::{claim_batch, client_rng, join_all, read_replies, schedule, Read, Sample, Shared};
use crate::reporting::histogram::LatencyHistogram;
use crate::reporting::recorder::ThreadStats;
use crate::resp::client::{ClientError, Conn};
use crate::resp::flags::RespFlags;
use crate::resp::proto::{parse_reply, push_command, Reply};
use crate::resp::slots::{ClusterSlots, SlotMap};
use crate::resp::workloads::{Scratch, Workload};
use crate::resp::RespError;
use crate::BenchError;
use parking_lot::Mutex;
use std::cell::RefCell;
use std::net::SocketAddr;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

/// With --cluster: the nodes to try after a lost connection (`CLUSTER NODES` and `CLUSTER SLOTS`, `addr`
/// first) and the slot table from `CLUSTER SLOTS`. With more than one master, the workloads that cannot be
/// routed by slot are refused here, before anything runs: read-range (an ordered scan of the whole keyspace,
/// which no single group holds) and `--multi` above 1 (an MSET or MGET of random keys spans slots, and a
/// cluster answers it `-CROSSSLOT`).
pub(super) fn cluster_setup(
    flags: &RespFlags,
    addr: SocketAddr,
    workloads: &[Workload],
) -> Result<(Vec<SocketAddr>, SlotMap), RespError> {
    let pw = flags.password.as_deref();
    let mut nodes = cluster_nodes(addr, pw)?;
    let slots = crate::resp::client::query_blocking_with(addr, pw, &[b"CLUSTER", b"SLOTS"], ClusterSlots::parse)
        .map_err(|cause| RespError::Connect { addr, cause: ClientError::Refused(cause) })?;
    for &n in &slots.nodes {
        if !nodes.contains(&n) {
            nodes.push(n);
        }
    }
    let map = SlotMap::new(addr, &slots);
    let masters = map.masters();
    if masters.len() > 1 {
        let list = masters.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ");
        if workloads.contains(&Workload::ReadRange) {
            return Err(RespError::Bench(BenchError::BadFlag {
                flag: "benchmarks".into(),
                msg: format!(
                    "read-range reads the keyspace in order, and with --cluster the slots are split over {} masters ({list}): no node holds a range of it; run read-range against one group",
                    masters.len()
                ),
            }));
        }
        if flags.multi > 1 {
            return Err(RespError::Bench(BenchError::BadFlag {
                flag: "multi".into(),
                msg: format!(
                    "{} keys per request span several slots, which a cluster refuses (-CROSSSLOT), and the slots are split over {} masters ({list}); use --multi 1 with --cluster",
                    flags.multi,
                    masters.len()
                ),
            }));
        }
    }
    Ok((nodes, map))
}

/// The nodes of the group or cluster `addr` belongs to, from its `CLUSTER NODES` (`id host:port@bus ...`
/// per line), `addr` first; only loopback addresses, as everything this tool talks to.
fn cluster_nodes(addr: SocketAddr, password: Option<&str>) -> Result<Vec<SocketAddr>, RespError> {
    let connect_err = |cause: String| RespError::Connect { addr, cause: ClientError::Refused(cause) };
    let text = crate::resp::client::query_blocking(addr, password, &[b"CLUSTER", b"NODES"]).map_err(connect_err)?;
    let mut nodes = vec![addr];
    for line in text.lines() {
        let Some(field) = line.split(' ').nth(1) else { continue };
        let hostport = field.split('@').next().unwrap_or("");
        let Some((host, port)) = hostport.rsplit_once(':') else { continue };
        let Ok(port) = port.parse::<u16>() else { continue };
        match crate::resp::flags::loopback_addr(host, port) {
            Ok(a) if !nodes.contains(&a) => nodes.push(a),
            Ok(_) => {}
            Err(_) => {
                return Err(connect_err(format!(
                    "CLUSTER NODES lists {hostport}, not a loopback address; the load tool only drives servers on this machine"
                )))
            }
        }
    }
    Ok(nodes)
}

/// The slot and loopback node a `-MOVED slot host:port` names.
fn moved_target(msg: &str) -> Option<(u16, SocketAddr)> {
    let mut words = msg.strip_prefix("MOVED ")?.split(' ');
    let slot = words.next()?.parse::<u16>().ok().filter(|&s| usize::from(s) < crate::resp::slots::SLOTS)?;
    let (host, port) = words.next()?.rsplit_once(':')?;
    Some((slot, crate::resp::flags::loopback_addr(host, port.parse().ok()?).ok()?))
}

/// The redirect replies one connection got in a batch (with --cluster).
#[derive(Debug, Default)]
pub(super) struct Redirects {
    /// `-MOVED`: slot and node.
    moved: Vec<(u16, SocketAddr)>,
    /// `-CLUSTERDOWN`: the node cannot serve now (no leader, cut off from its majority, slot not served).
    down: bool,
    /// `-TRYAGAIN` (a slot being moved) or `-ASK`: the same node, a little later.
    retry: bool,
}

impl Redirects {
    pub(super) fn note(&mut self, msg: &str) {
        if let Some(m) = moved_target(msg) {
            self.moved.push(m);
        } else if msg.starts_with("CLUSTERDOWN") {
            self.down = true;
        } else {
            self.retry = true;
        }
    }
}

/// Most time a --cluster connection looks for a node that answers before it gives up (an election takes
/// seconds; a group that stays down ends the client, not the run).
const RECONNECT_LIMIT: Duration = Duration::from_secs(60);

/// A new connection for a --cluster client: to `first` if given, else to the nodes in turn from `next`, a
/// pause between tries; with the address it went to.
async fn reconnect(sh: &Shared<'_>, first: Option<SocketAddr>, next: &mut usize) -> Option<(Conn, SocketAddr)> {
    let started = Instant::now();
    let mut target = first;
    while !sh.stop.load(Relaxed) && started.elapsed() < RECONNECT_LIMIT {
        let addr = match target.take() {
            Some(a) => a,
            None => {
                tokio::time::sleep(Duration::from_millis(50)).await;
                *next = (*next + 1) % sh.nodes.len();
                sh.nodes[*next]
            }
        };
        let attempt = Conn::connect(addr, sh.password.as_deref());
        if let Ok(Ok(c)) = tokio::time::timeout(Duration::from_secs(2), attempt).await {
            return Some((c, addr));
        }
    }
    None
}

/// `CLUSTER SLOTS` of the node at `addr`, on a connection of its own.
async fn read_cluster_slots(addr: SocketAddr, password: Option<&str>) -> Result<ClusterSlots, String> {
    let query = async {
        let mut c = Conn::connect(addr, password).await.map_err(|e| e.to_string())?;
        push_command(&mut c.wbuf, &[b"CLUSTER", b"SLOTS"]);
        c.flush().await.map_err(|e| e.to_string())?;
        loop {
            match parse_reply(&c.rbuf).map_err(|e| e.to_string())? {
                Some((Reply::Error(e), _)) => return Err(String::from_utf8_lossy(e).into_owned()),
                Some((reply, _)) => return ClusterSlots::parse(&reply),
                None => c.read_more().await.map_err(|e| e.to_string())?,
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(2), query).await.map_err(|_| "timed out".to_string())?
}

/// Reads the slot table again after `-MOVED` replies: from the node the last one named, else the node the
/// tool was given, else the others (at most three tries; a failure keeps the table as `-MOVED` left it).
async fn refresh_slots(sh: &Shared<'_>, map: &SlotMap, hint: Option<SocketAddr>) {
    let mut tried = Vec::with_capacity(3);
    for a in hint.into_iter().chain([sh.addr]).chain(sh.nodes.iter().copied()) {
        if tried.contains(&a) {
            continue;
        }
        if tried.len() == 3 {
            return;
        }
        tried.push(a);
        if let Ok(s) = read_cluster_slots(a, sh.password.as_deref()).await {
            if !s.ranges.is_empty() {
                map.apply(&s);
                return;
            }
        }
    }
}

/// A --cluster client's connection to one master (the node of some slots), opened on first use.
#[derive(Default)]
struct Link {
    conn: Option<Conn>,
    /// Whether `conn` goes to the master itself, not to a stand-in (another node, taken after the master's
    /// connection was lost, which answers for it or sends the request on with `-MOVED`).
    direct: bool,
    /// Whether the next connection tries the master itself first (not after it failed).
    try_direct: bool,
    /// This batch's requests to the node, encoded.
    out: Vec<u8>,
    /// Their indexes in the batch.
    reqs: Vec<usize>,
    /// Their send times.
    starts: Vec<Instant>,
    samples: Vec<Sample>,
    redirects: Redirects,
}

impl Link {
    fn new() -> Link {
        Link { try_direct: true, ..Link::default() }
    }

    /// Drops the connection; the next goes to another node first (after a lost connection or `-CLUSTERDOWN`,
    /// as a cluster client moves on).
    fn drop_conn(&mut self) {
        self.conn = None;
        self.try_direct = false;
    }
}

async fn read_link(
    sh: &Shared<'_>,
    stats: &RefCell<ThreadStats<'_>>,
    interval: Option<&Mutex<LatencyHistogram>>,
    l: &mut Link,
) -> Read {
    let Some(c) = l.conn.as_mut() else { return Read::All };
    read_replies(sh, stats, interval, c, &l.starts, &mut l.samples, Some(&mut l.redirects)).await
}

/// One client with --cluster: a connection per master, each request sent to the master of its key's slot
/// (`conn` is the one made at setup, to the node the tool was given). A batch is split by node: each node's
/// share is written, then every node's replies are read at once, so each request is timed by its own node's
/// reply. Redirects and lost connections count the requests as redirected (they are not sent again).
pub(super) async fn run_cluster_client(
    sh: &Shared<'_>,
    map: &SlotMap,
    t0: Instant,
    stats: &RefCell<ThreadStats<'_>>,
    interval: Option<&Mutex<LatencyHistogram>>,
    conn: Conn,
    idx: usize,
) {
    let plan = &sh.plan;
    let mut rng = client_rng(sh, idx);
    let mut scratch = Scratch::default();
    // Indexed as the map's node list.
    let mut addrs: Vec<SocketAddr> = Vec::new();
    let mut links: Vec<Link> = Vec::new();
    let given = usize::from(map.index_of(sh.addr));
    map.copy_nodes(&mut addrs);
    links.resize_with(addrs.len(), Link::new);
    if let Some(l) = links.get_mut(given) {
        (l.conn, l.direct) = (Some(conn), true);
    }
    let mut next_node = idx;
    let mut req: Vec<u8> = Vec::new();
    let mut used: Vec<usize> = Vec::new();
    let mut starts: Vec<Instant> = Vec::with_capacity(sh.pipeline as usize);
    let mut pause = false;
    while !sh.stop.load(Relaxed) {
        if std::mem::take(&mut pause) {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let Some((first, k)) = claim_batch(sh) else { break };
        let mut sent_bytes = 0;
        used.clear();
        for j in 0..k as usize {
            req.clear();
            sent_bytes += plan.push_request(&mut rng, first + j as u64, &mut req, &mut scratch);
            let n = usize::from(map.owner(scratch.slot()));
            if n >= links.len() {
                map.copy_nodes(&mut addrs);
                links.resize_with(addrs.len(), Link::new);
            }
            // INVARIANT: an owner index is given before it is stored, so the copy above holds it.
            let l = &mut links[n];
            if l.reqs.is_empty() {
                used.push(n);
            }
            l.out.extend_from_slice(&req);
            l.reqs.push(j);
        }
        for &n in &used {
            let l = &mut links[n];
            if l.conn.is_none() {
                let addr = addrs[n];
                let Some((c, at)) = reconnect(sh, l.try_direct.then_some(addr), &mut next_node).await else {
                    return;
                };
                (l.conn, l.direct, l.try_direct) = (Some(c), at == addr, true);
            }
        }
        if !schedule(sh, t0, first, k, &mut starts).await {
            break;
        }
        sh.requests.fetch_add(k, Relaxed);
        for &n in &used {
            let l = &mut links[n];
            l.starts.clear();
            l.starts.extend(l.reqs.iter().filter_map(|&j| starts.get(j).copied()));
            l.reqs.clear();
            let Some(c) = l.conn.as_mut() else { continue };
            std::mem::swap(&mut c.wbuf, &mut l.out);
            l.out.clear();
            if c.flush().await.is_err() {
                sh.redirected.fetch_add(l.starts.len() as u64, Relaxed);
                l.starts.clear();
                l.drop_conn();
            }
        }
        let reading: Vec<&mut Link> = links.iter_mut().filter(|l| !l.starts.is_empty()).collect();
        // One node (always so with -P 1) is read in place; several at once, each as its replies come.
        let ends = match <[&mut Link; 1]>::try_from(reading) {
            Ok([l]) => vec![read_link(sh, stats, interval, l).await],
            Err(reading) => join_all(reading.into_iter().map(|l| read_link(sh, stats, interval, l)).collect()).await,
        };
        let mut ends = ends.into_iter();
        let mut moved_to = Vec::new();
        for l in links.iter_mut().filter(|l| !l.starts.is_empty()) {
            match ends.next() {
                Some(Read::All) | None => {}
                Some(Read::Lost { got, .. }) => {
                    sh.redirected.fetch_add(l.starts.len().saturating_sub(got) as u64, Relaxed);
                    l.drop_conn();
                }
                Some(Read::Stop) => return,
            }
            l.starts.clear();
            let r = std::mem::take(&mut l.redirects);
            if r.down {
                l.drop_conn();
            }
            pause |= r.retry;
            for (slot, addr) in r.moved {
                map.moved(slot, addr);
                if !moved_to.contains(&addr) {
                    moved_to.push(addr);
                }
            }
        }
        if let Some(&last) = moved_to.last() {
            map.copy_nodes(&mut addrs);
            links.resize_with(addrs.len(), Link::new);
            // A node a server sends requests to is reached directly, not through a stand-in.
            for l in addrs.iter().zip(links.iter_mut()).filter_map(|(a, l)| moved_to.contains(a).then_some(l)) {
                if l.conn.is_some() && !l.direct {
                    l.conn = None;
                    l.try_direct = true;
                }
            }
            if map.claim_refresh() {
                refresh_slots(sh, map, Some(last)).await;
            }
        }
        stats.borrow_mut().bytes += sent_bytes;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redirect_replies() {
        let mut r = Redirects::default();
        r.note("MOVED 12182 127.0.0.1:7002");
        r.note("MOVED 0 [::1]:7003");
        assert_eq!(
            r.moved,
            vec![(12182, SocketAddr::from(([127, 0, 0, 1], 7002))), (0, "[::1]:7003".parse().unwrap())]
        );
        assert!(!r.down && !r.retry);
        // A MOVED this tool cannot follow (a slot out of range, a node elsewhere) waits and retries.
        for m in ["MOVED 16384 127.0.0.1:7002", "MOVED 1 10.0.0.1:7002", "MOVED x 127.0.0.1:1", "TRYAGAIN Slot 5"] {
            let mut r = Redirects::default();
            r.note(m);
            assert!(r.moved.is_empty() && r.retry && !r.down, "{m}");
        }
        let mut r = Redirects::default();
        r.note("CLUSTERDOWN The cluster is down");
        assert!(r.down && !r.retry);
    }
}
