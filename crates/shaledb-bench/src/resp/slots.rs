//! Routing by hash slot for `shaledb bench resp --cluster`, as cluster clients do: Redis Cluster's 16384 slots
//! (CRC16-XMODEM of the key, or of its `{hash tag}`, modulo 16384), a table of which node serves each slot read
//! from `CLUSTER SLOTS`, and its updates from `-MOVED` replies.
//!
//! The bench does not depend on the server crate (only its tests do), so the slot function is this module's;
//! a test checks it against the server's `key_slot`.
//!
//! The table ([`SlotMap`]) is shared by every client thread and read once per request, so it takes no lock
//! on that path: each slot holds the index of its node in an append-only list of node addresses (an index,
//! once given, names the same address for the whole run, so a client can keep its connections in a vector
//! indexed the same way).

use super::proto::Reply;
use parking_lot::{Mutex, RwLock};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU16, Ordering::Relaxed};
use std::time::{Duration, Instant};

/// Hash slots of Redis Cluster.
pub const SLOTS: usize = 16384;

const CRC16_TABLE: [u16; 256] = crc16_table();

/// CRC16-XMODEM (polynomial 0x1021, initial value 0), one byte at a time through a table.
const fn crc16_table() -> [u16; 256] {
    let mut table = [0u16; 256];
    let mut i = 0;
    while i < 256 {
        let mut crc = (i as u16) << 8;
        let mut bit = 0;
        while bit < 8 {
            crc = if crc & 0x8000 != 0 { (crc << 1) ^ 0x1021 } else { crc << 1 };
            bit += 1;
        }
        table[i] = crc;
        i += 1;
    }
    table
}

/// CRC16-XMODEM of `data`, the checksum Redis Cluster hashes keys with.
pub fn crc16(data: &[u8]) -> u16 {
    data.iter().fold(0u16, |crc, &b| (crc << 8) ^ CRC16_TABLE[usize::from((crc >> 8) as u8 ^ b)])
}

/// The slot of `key`: CRC16 of the key modulo 16384, or of its hash tag when the key has a `{` followed later
/// by a `}` with at least one byte between them (the first `{` and the first `}` after it).
pub fn key_slot(key: &[u8]) -> u16 {
    let hashed = key
        .iter()
        .position(|&b| b == b'{')
        .and_then(|open| {
            let rest = key.get(open + 1..)?;
            let len = rest.iter().position(|&b| b == b'}')?;
            rest.get(..len).filter(|tag| !tag.is_empty())
        })
        .unwrap_or(key);
    crc16(hashed) % SLOTS as u16
}

/// Slot ranges and the node serving each (its master) and every node listed, from a `CLUSTER SLOTS` reply:
/// `[[start, end, [host, port, id...], [replica host, port, id...]...]...]`. Only loopback nodes (the tool
/// drives servers on this machine only).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ClusterSlots {
    /// `(first slot, last slot, master)`.
    pub ranges: Vec<(u16, u16, SocketAddr)>,
    /// Masters and replicas, in the order listed, each once.
    pub nodes: Vec<SocketAddr>,
    /// The nodes of each group (a range's master and replicas), each group once.
    pub groups: Vec<Vec<SocketAddr>>,
}

impl ClusterSlots {
    /// Parses a `CLUSTER SLOTS` reply; the error says what is wrong with it.
    pub fn parse(reply: &Reply<'_>) -> Result<ClusterSlots, String> {
        let Reply::Array(items) = reply else {
            return Err(format!("CLUSTER SLOTS: not an array: {}", super::workloads::brief(reply)));
        };
        let mut out = ClusterSlots::default();
        for item in items {
            let bad = || format!("CLUSTER SLOTS: a malformed range: {}", super::workloads::brief(item));
            let Reply::Array(fields) = item else { return Err(bad()) };
            let (Some(Reply::Integer(a)), Some(Reply::Integer(b))) = (fields.first(), fields.get(1)) else {
                return Err(bad());
            };
            let (Ok(a), Ok(b)) = (u16::try_from(*a), u16::try_from(*b)) else { return Err(bad()) };
            if a > b || usize::from(b) >= SLOTS {
                return Err(bad());
            }
            let mut group = Vec::new();
            for node in fields.get(2..).unwrap_or(&[]) {
                let addr = node_addr(node)?;
                if !out.nodes.contains(&addr) {
                    out.nodes.push(addr);
                }
                if !group.contains(&addr) {
                    group.push(addr);
                }
            }
            // A range without a node has no master to send to: it stays with whoever served it before.
            if let Some(&m) = group.first() {
                out.ranges.push((a, b, m));
                if !out.groups.contains(&group) {
                    out.groups.push(group);
                }
            }
        }
        Ok(out)
    }

    /// The masters that serve at least one slot, each once.
    pub fn masters(&self) -> Vec<SocketAddr> {
        let mut m: Vec<SocketAddr> = Vec::new();
        for &(_, _, a) in &self.ranges {
            if !m.contains(&a) {
                m.push(a);
            }
        }
        m
    }
}

/// One node entry of a `CLUSTER SLOTS` range, `[host, port, ...]`: its loopback address.
fn node_addr(node: &Reply<'_>) -> Result<SocketAddr, String> {
    let bad = || format!("CLUSTER SLOTS: a malformed node: {}", super::workloads::brief(node));
    let Reply::Array(f) = node else { return Err(bad()) };
    let (Some(Reply::Bulk(host) | Reply::Simple(host)), Some(Reply::Integer(port))) = (f.first(), f.get(1)) else {
        return Err(bad());
    };
    let host = String::from_utf8_lossy(host);
    let port = u16::try_from(*port).map_err(|_| bad())?;
    super::flags::loopback_addr(&host, port).map_err(|_| {
        format!(
            "CLUSTER SLOTS lists {host}:{port}, not a loopback address; the load tool only drives servers on this machine"
        )
    })
}

/// Which node serves each slot, shared by every client of a run; updated by `-MOVED` and by reading
/// `CLUSTER SLOTS` again (at most once per [`REFRESH_EVERY`]).
///
/// A `-MOVED` to a node of the same group as the slot's master means that the group has a new leader (a
/// failover): every slot of the old master goes to it, as a client whose connection follows the leader would
/// see, rather than one `-MOVED` per slot until the next reading. A `-MOVED` to another group (a slot that
/// was moved) changes that slot only.
#[derive(Debug)]
pub struct SlotMap {
    /// Node addresses; append-only, so an index names one address for the whole run.
    nodes: RwLock<Vec<SocketAddr>>,
    /// Each group's nodes, as `CLUSTER SLOTS` last listed them (a group it left out is kept).
    groups: RwLock<Vec<Vec<SocketAddr>>>,
    /// Per slot, its node's index in `nodes`.
    owner: Vec<AtomicU16>,
    /// When the table was last read from `CLUSTER SLOTS`.
    refreshed: Mutex<Instant>,
}

/// Least time between two readings of `CLUSTER SLOTS` after `-MOVED` replies.
pub const REFRESH_EVERY: Duration = Duration::from_secs(1);

impl SlotMap {
    /// Every slot served by `fallback` but those `slots` assigns (a slot no group serves goes to the node the
    /// tool was given, which then answers for it).
    pub fn new(fallback: SocketAddr, slots: &ClusterSlots) -> SlotMap {
        let map = SlotMap {
            nodes: RwLock::new(vec![fallback]),
            groups: RwLock::new(Vec::new()),
            owner: (0..SLOTS).map(|_| AtomicU16::new(0)).collect(),
            refreshed: Mutex::new(Instant::now()),
        };
        map.apply(slots);
        map
    }

    /// The index of `addr` in the node list, added if new.
    pub fn index_of(&self, addr: SocketAddr) -> u16 {
        if let Some(i) = self.nodes.read().iter().position(|&a| a == addr) {
            return i as u16;
        }
        let mut nodes = self.nodes.write();
        if let Some(i) = nodes.iter().position(|&a| a == addr) {
            return i as u16;
        }
        // INVARIANT: fewer than 65536 nodes; every address is a loopback one a server named.
        nodes.push(addr);
        (nodes.len() - 1) as u16
    }

    /// The index of the node serving `slot`.
    pub fn owner(&self, slot: u16) -> u16 {
        self.owner.get(usize::from(slot)).map_or(0, |o| o.load(Relaxed))
    }

    /// The address of node `idx` (`None` for an index never given).
    pub fn addr(&self, idx: u16) -> Option<SocketAddr> {
        self.nodes.read().get(usize::from(idx)).copied()
    }

    /// Appends to `out` (a client's copy of the node list) the addresses added since it was copied.
    pub fn copy_nodes(&self, out: &mut Vec<SocketAddr>) {
        let nodes = self.nodes.read();
        if let Some(new) = nodes.get(out.len()..) {
            out.extend_from_slice(new);
        }
    }

    /// A `-MOVED slot addr`: the slot is served by `addr` from now on, and so is every slot of its master
    /// when `addr` is in the master's group.
    pub fn moved(&self, slot: u16, addr: SocketAddr) {
        let to = self.index_of(addr);
        let from = self.owner(slot);
        if from == to {
            return;
        }
        let failover =
            self.addr(from).is_some_and(|old| self.groups.read().iter().any(|g| g.contains(&old) && g.contains(&addr)));
        if failover {
            for o in &self.owner {
                let _ = o.compare_exchange(from, to, Relaxed, Relaxed);
            }
        } else if let Some(o) = self.owner.get(usize::from(slot)) {
            o.store(to, Relaxed);
        }
    }

    /// Takes a `CLUSTER SLOTS` reading: each range to its master (slots it does not list keep their node).
    pub fn apply(&self, slots: &ClusterSlots) {
        {
            let mut groups = self.groups.write();
            for g in &slots.groups {
                groups.retain(|old| !old.iter().any(|a| g.contains(a)));
                groups.push(g.clone());
            }
        }
        for &(a, b, m) in &slots.ranges {
            let i = self.index_of(m);
            for o in self.owner.get(usize::from(a)..=usize::from(b)).unwrap_or(&[]) {
                o.store(i, Relaxed);
            }
        }
    }

    /// Whether a reading of `CLUSTER SLOTS` is due: true (and the clock restarted) for the first caller at least
    /// [`REFRESH_EVERY`] after the last one.
    pub fn claim_refresh(&self) -> bool {
        let mut last = self.refreshed.lock();
        if last.elapsed() < REFRESH_EVERY {
            return false;
        }
        *last = Instant::now();
        true
    }

    /// The distinct nodes serving slots now.
    pub fn masters(&self) -> Vec<SocketAddr> {
        let mut idx: Vec<u16> = self.owner.iter().map(|o| o.load(Relaxed)).collect();
        idx.sort_unstable();
        idx.dedup();
        idx.into_iter().filter_map(|i| self.addr(i)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    #[test]
    fn slots_follow_redis_cluster() {
        assert_eq!(crc16(b"123456789"), 0x31c3);
        assert_eq!(crc16(b""), 0);
        assert_eq!(key_slot(b"foo"), 12182);
        assert_eq!(key_slot(b"bar"), 5061);
        assert_eq!(key_slot(b""), 0);
        assert_eq!(key_slot(b"{user1000}.following"), key_slot(b"user1000"));
        // An empty tag hashes the whole key; only the first `{` and the first `}` after it count.
        assert_eq!(key_slot(b"foo{}{bar}"), crc16(b"foo{}{bar}") % 16384);
        assert_eq!(key_slot(b"foo{{bar}}zap"), key_slot(b"{bar"));
        assert_eq!(key_slot(b"foo{bar}{zap}"), key_slot(b"bar"));
        assert_eq!(key_slot(b"{"), crc16(b"{") % 16384);
        assert_eq!(key_slot(b"a}b{"), crc16(b"a}b{") % 16384);
    }

    #[test]
    fn slots_match_the_server() {
        let mut rng = rand::rngs::SmallRng::seed_from_u64(44);
        let mut key = Vec::new();
        for _ in 0..20_000 {
            key.clear();
            let len = rng.gen_range(0..24);
            // Few distinct bytes, so that braces are common.
            key.extend((0..len).map(|_| b"{}ab\x00\xff"[rng.gen_range(0..6)]));
            assert_eq!(key_slot(&key), shaledb_server::cluster::key_slot(&key), "{key:?}");
        }
        let mut k = Vec::new();
        for n in 0..1000 {
            crate::db_bench::keygen::make_key(n, 16, &mut k);
            assert_eq!(key_slot(&k), shaledb_server::cluster::key_slot(&k));
        }
    }

    fn node<'a>(host: &'a [u8], port: i64) -> Reply<'a> {
        Reply::Array(vec![Reply::Bulk(host), Reply::Integer(port), Reply::Bulk(b"0123")])
    }

    #[test]
    fn cluster_slots_replies() {
        let reply = Reply::Array(vec![
            Reply::Array(vec![Reply::Integer(0), Reply::Integer(8191), node(b"127.0.0.1", 7001), node(b"::1", 7002)]),
            Reply::Array(vec![Reply::Integer(8192), Reply::Integer(16383), node(b"localhost", 7004)]),
            Reply::Array(vec![Reply::Integer(100), Reply::Integer(200)]),
        ]);
        let s = ClusterSlots::parse(&reply).unwrap();
        let a = |p| SocketAddr::from(([127, 0, 0, 1], p));
        let v6: SocketAddr = "[::1]:7002".parse().unwrap();
        assert_eq!(s.ranges, vec![(0, 8191, a(7001)), (8192, 16383, a(7004))]);
        assert_eq!(s.nodes, vec![a(7001), v6, a(7004)]);
        assert_eq!(s.groups, vec![vec![a(7001), v6], vec![a(7004)]]);
        assert_eq!(s.masters(), vec![a(7001), a(7004)]);

        let map = SlotMap::new(a(7000), &s);
        assert_eq!(map.addr(map.owner(0)), Some(a(7001)));
        assert_eq!(map.addr(map.owner(8191)), Some(a(7001)));
        assert_eq!(map.addr(map.owner(8192)), Some(a(7004)));
        assert_eq!(map.masters(), vec![a(7001), a(7004)]);
        // A slot moved to another group: that slot only.
        map.moved(5, a(7004));
        assert_eq!(map.addr(map.owner(5)), Some(a(7004)));
        assert_eq!(map.addr(map.owner(6)), Some(a(7001)));
        // A new leader in group 1 (::1 was its replica): every slot of the old leader.
        map.moved(7, v6);
        assert_eq!(map.addr(map.owner(0)), Some(v6));
        assert_eq!(map.addr(map.owner(8191)), Some(v6));
        assert_eq!(map.addr(map.owner(5)), Some(a(7004)));
        assert_eq!(map.addr(map.owner(8192)), Some(a(7004)));
        map.moved(8191, a(7001));
        assert_eq!(map.addr(map.owner(0)), Some(a(7001)));
        let mut copy = vec![];
        map.copy_nodes(&mut copy);
        assert_eq!(copy, vec![a(7000), a(7001), a(7004), v6]);
        map.moved(9000, a(7009));
        map.copy_nodes(&mut copy);
        assert_eq!(copy, vec![a(7000), a(7001), a(7004), v6, a(7009)]);
        assert_eq!(map.index_of(a(7009)), 4);
        assert_eq!(map.addr(map.owner(9000)), Some(a(7009)));
        assert_eq!(map.addr(map.owner(9001)), Some(a(7004)));
        assert!(!map.claim_refresh(), "just read");

        // Slots no range lists go to the fallback.
        let map = SlotMap::new(a(7000), &ClusterSlots::default());
        assert_eq!(map.masters(), vec![a(7000)]);

        for bad in [
            Reply::Integer(1),
            Reply::Array(vec![Reply::Integer(1)]),
            Reply::Array(vec![Reply::Array(vec![Reply::Integer(5), Reply::Integer(4), node(b"127.0.0.1", 1)])]),
            Reply::Array(vec![Reply::Array(vec![Reply::Integer(0), Reply::Integer(16384), node(b"127.0.0.1", 1)])]),
            Reply::Array(vec![Reply::Array(vec![Reply::Integer(0), Reply::Integer(1), node(b"127.0.0.1", 70000)])]),
            Reply::Array(vec![Reply::Array(vec![Reply::Integer(0), Reply::Integer(1), Reply::Integer(3)])]),
        ] {
            assert!(ClusterSlots::parse(&bad).unwrap_err().contains("CLUSTER SLOTS"), "{bad:?}");
        }
        let remote = Reply::Array(vec![Reply::Array(vec![Reply::Integer(0), Reply::Integer(1), node(b"10.0.0.1", 1)])]);
        assert!(ClusterSlots::parse(&remote).unwrap_err().contains("not a loopback"));
    }
}
