//! `shaledb cluster reshard | rebalance | fix`: moving hash slots between replica groups (issue 44), with the
//! server's commands (crates/shaledb-server/src/commands/server_cmds/slot_moves.rs). A batch of slots S moves
//! from group F to group T, the current map M at epoch e, as follows:
//!
//! 1. M1 = M + `copying s F T` for each s in S, epoch e+1, sent to T's leader first, then F's. From F's
//!    acknowledgement on, F's leader records every key it writes in S (cluster/copy.rs) and still serves S.
//! 2. Each slot's keys: `SHALEDB-EXPORT` from F in chunks, `SHALEDB-IMPORT` into T, `first=1` on a slot's first
//!    chunk (also for a slot without keys) so a rerun starts clean.
//! 3. M3 = M + `moving s F T`, epoch e+2, to T then F. From F's acknowledgement on, F refuses writes to S
//!    (`-TRYAGAIN` after a wait) and every write before it is applied.
//! 4. Each slot's keys written since step 1: `SHALEDB-EXPORT-DIRTY` from F, imported with `first=0` (a key gone
//!    is deleted on T); where F answers `NOTRACKED` (its leader changed, or too many keys), the whole slot is
//!    copied again as in step 2.
//! 5. M5 = M with S given to T, no moving lines, epoch e+3, sent to F first, then T, then every other group.
//! 6. `SHALEDB-DROPSLOT s` on F for each s.
//!
//! Every step can be run again: a group answers OK to the map it holds, an import's first chunk wipes what an
//! earlier try left. So `fix` (run first by `reshard` and `rebalance` too) reads the map of every reachable
//! member, takes the newest, H, and finishes: with copying lines, H goes to T and F, then the slots are frozen,
//! copied whole (what was written meanwhile is not known here) and handed over; with moving lines, H goes to
//! the moving groups (T, then F) and steps 2, 5 and 6 run for its slots; without, H goes to every group holding an older map, and a group that owned
//! slots under its older map that H gives elsewhere drops them.
//!
//! A command to a group goes to its leader as far as known, follows `-MOVED`, and tries the group's other
//! members on `-CLUSTERDOWN`, `-TRYAGAIN` or a lost connection, with a short backoff, for at most `--timeout`
//! seconds; any other error ends the run with the reason (the cluster stays consistent: run `fix`).

use super::{parse_ranges, range_text, Conn, Reply, MAX_PAYLOAD, SLOTS};
use anyhow::{anyhow, bail, Result};
use std::collections::{BTreeMap, BTreeSet};
use std::io::BufRead;
use std::time::{Duration, Instant};

/// Slots per map change (one batch).
const BATCH: usize = 32;
/// Keys per `SHALEDB-EXPORT` (the server takes at most 10,000), and the bytes of keys and payloads after which
/// it stops: a chunk is one import of up to 8 MiB, whose records the target group ingests as tables when they
/// are large enough (docs/cluster.md, "Large slots as tables"); fewer, larger chunks pay the per-chunk costs
/// (a read-index round on the source, a commit and an ingestion on the target) less often.
const CHUNK: &str = "10000";
const CHUNK_BYTES: &str = "8388608";
/// Payload bytes per `SHALEDB-IMPORT` (a chunk of large keys goes in several; at least one key each).
const IMPORT_BYTES: usize = 8 << 20;
/// How long one command's reply may take (an import waits for its group's commit).
pub(super) const OP_TIMEOUT: Duration = Duration::from_secs(30);

#[derive(clap::Args, Debug)]
pub struct ReshardArgs {
    /// Any member of the cluster.
    #[arg(value_name = "HOST:PORT")]
    pub node: String,
    /// How many slots to move.
    #[arg(long)]
    pub slots: u32,
    /// A node of the group the slots leave (its id, as CLUSTER NODES lists it; or the group's number), or `all`:
    /// every other group gives its share, in proportion to the slots it owns.
    #[arg(long, value_name = "NODE-ID")]
    pub from: String,
    /// A node of the group that receives them (its id, or the group's number).
    #[arg(long, value_name = "NODE-ID")]
    pub to: String,
    /// Do it without asking.
    #[arg(long)]
    pub yes: bool,
    /// Seconds each step may retry (a group electing a leader) before the run stops.
    #[arg(long, default_value_t = 60)]
    pub timeout: u64,
}

#[derive(clap::Args, Debug)]
pub struct RebalanceArgs {
    /// Any member of the cluster.
    #[arg(value_name = "HOST:PORT")]
    pub node: String,
    /// Do it without asking.
    #[arg(long)]
    pub yes: bool,
    /// Seconds each step may retry before the run stops.
    #[arg(long, default_value_t = 60)]
    pub timeout: u64,
}

#[derive(clap::Args, Debug)]
pub struct FixArgs {
    /// Any member of the cluster.
    #[arg(value_name = "HOST:PORT")]
    pub node: String,
    /// Seconds each step may retry before the run stops.
    #[arg(long, default_value_t = 60)]
    pub timeout: u64,
}

/// One group of a map: id, slot ranges (merged, in order), members `(node id, host:port@busport)`.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct MapGroup {
    id: u64,
    ranges: Vec<(u32, u32)>,
    pub(super) nodes: Vec<(String, String)>,
}

/// The cluster map as the coordinator reads and edits it (the server's grammar: cluster/map.rs).
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Map {
    epoch: u64,
    groups: Vec<MapGroup>,
    /// `(slot, from, to)`, by slot.
    moves: Vec<(u32, u64, u64)>,
    /// `(slot, from, to)` being copied before their move (the source still serves them), by slot.
    copies: Vec<(u32, u64, u64)>,
}

/// Inclusive ranges of a set of slots, merged.
fn to_ranges(slots: &BTreeSet<u32>) -> Vec<(u32, u32)> {
    let mut out: Vec<(u32, u32)> = Vec::new();
    for &s in slots {
        match out.last_mut() {
            Some(last) if last.1 + 1 == s => last.1 = s,
            _ => out.push((s, s)),
        }
    }
    out
}

/// Slot ranges as the map writes them: `a-b,c`, `-` for none.
fn ranges_text(r: &[(u32, u32)]) -> String {
    if r.is_empty() {
        return "-".into();
    }
    r.iter().map(|&x| range_text(x)).collect::<Vec<_>>().join(",")
}

/// Ranges written as slots compactly for the messages: `0-31,40 (33 slots)`.
fn slots_text(slots: &[u32]) -> String {
    let set: BTreeSet<u32> = slots.iter().copied().collect();
    let n = set.len();
    format!("{} ({n} slot{})", ranges_text(&to_ranges(&set)), if n == 1 { "" } else { "s" })
}

impl Map {
    /// The map text, with or without the stored form's `self G` line first: (self, map).
    fn parse(text: &str) -> Result<(Option<u64>, Map)> {
        let (mut me, mut epoch) = (None, None);
        let (mut groups, mut moves): (Vec<MapGroup>, Vec<(u32, u64, u64)>) = (Vec::new(), Vec::new());
        let mut copies: Vec<(u32, u64, u64)> = Vec::new();
        let num = |s: &str| s.parse::<u64>().map_err(|_| anyhow!("'{s}' in the map is not a number"));
        for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
            let w: Vec<&str> = line.split_ascii_whitespace().collect();
            match w.as_slice() {
                ["self", g] => me = Some(num(g)?),
                ["epoch", e] => epoch = Some(num(e)?),
                ["group", g, r] => groups.push(MapGroup {
                    id: num(g)?,
                    ranges: parse_ranges(r).ok_or_else(|| anyhow!("map line '{line}': bad slot ranges"))?,
                    nodes: Vec::new(),
                }),
                ["node", g, id, addr] => {
                    let g = num(g)?;
                    let group = groups
                        .iter_mut()
                        .find(|x| x.id == g)
                        .ok_or_else(|| anyhow!("map line '{line}': a node of a group not named before"))?;
                    group.nodes.push((id.to_string(), addr.to_string()));
                }
                [kind @ ("moving" | "copying"), s, f, t] => {
                    let s = u32::try_from(num(s)?).ok().filter(|&s| s < SLOTS);
                    let m = (s.ok_or_else(|| anyhow!("map line '{line}': not a slot"))?, num(f)?, num(t)?);
                    if *kind == "moving" {
                        moves.push(m);
                    } else {
                        copies.push(m);
                    }
                }
                _ => bail!("map line '{line}' is not one this tool knows"),
            }
        }
        let epoch = epoch.ok_or_else(|| anyhow!("the map has no epoch line"))?;
        if groups.is_empty() {
            bail!("the map names no group");
        }
        groups.sort_by_key(|g| g.id);
        moves.sort_unstable();
        copies.sort_unstable();
        Ok((me, Map { epoch, groups, moves, copies }))
    }

    /// The text `CLUSTER SHALEDB-SETMAP` takes.
    fn text(&self) -> String {
        let mut lines = vec![format!("epoch {}", self.epoch)];
        for g in &self.groups {
            lines.push(format!("group {} {}", g.id, ranges_text(&g.ranges)));
            lines.extend(g.nodes.iter().map(|(id, addr)| format!("node {} {id} {addr}", g.id)));
        }
        lines.extend(self.moves.iter().map(|(s, f, t)| format!("moving {s} {f} {t}")));
        lines.extend(self.copies.iter().map(|(s, f, t)| format!("copying {s} {f} {t}")));
        lines.join("\n") + "\n"
    }

    /// The group that owns `slot` by this map (a moving slot's owner is the group it leaves).
    pub(super) fn owner(&self, slot: u32) -> Option<u64> {
        self.groups.iter().find(|g| g.ranges.iter().any(|&(a, b)| (a..=b).contains(&slot))).map(|g| g.id)
    }

    pub(super) fn group(&self, id: u64) -> Result<&MapGroup> {
        self.groups.iter().find(|g| g.id == id).ok_or_else(|| anyhow!("the map names no group {id}"))
    }

    /// Group `id`'s slots, in order.
    fn slots_of(&self, id: u64) -> BTreeSet<u32> {
        self.groups.iter().filter(|g| g.id == id).flat_map(|g| g.ranges.iter().flat_map(|&(a, b)| a..=b)).collect()
    }

    /// The group a node id (or a group number) names.
    fn group_named(&self, name: &str) -> Result<u64> {
        if let Some(g) = self.groups.iter().find(|g| g.nodes.iter().any(|(id, _)| id.eq_ignore_ascii_case(name))) {
            return Ok(g.id);
        }
        match name.parse::<u64>() {
            Ok(id) if self.groups.iter().any(|g| g.id == id) => Ok(id),
            _ => bail!("'{name}' is neither a node id of the cluster map nor a group number of it"),
        }
    }

    /// Step 1's map: `slots` of group `from` copied to `to` (still served by `from`), one epoch later.
    /// REQUIRES: `from` owns every slot of `slots`, no move in progress.
    fn begin(&self, from: u64, to: u64, slots: &[u32]) -> Map {
        let mut m = self.clone();
        m.epoch += 1;
        m.copies = slots.iter().map(|&s| (s, from, to)).collect();
        m.copies.sort_unstable();
        m
    }

    /// Step 3's map: the slots being copied frozen for their move (`moving`), one epoch later.
    fn freeze(&self) -> Map {
        let mut m = self.clone();
        m.epoch += 1;
        m.moves.append(&mut m.copies);
        m.moves.sort_unstable();
        m
    }

    /// Step 5's map: every moving slot given to its receiver, no moving lines, one epoch later.
    fn finish(&self) -> Map {
        let mut owned: BTreeMap<u64, BTreeSet<u32>> = self.groups.iter().map(|g| (g.id, self.slots_of(g.id))).collect();
        for &(s, f, t) in &self.moves {
            owned.entry(f).or_default().remove(&s);
            owned.entry(t).or_default().insert(s);
        }
        let mut m = self.clone();
        m.epoch += 1;
        m.moves.clear();
        for g in &mut m.groups {
            g.ranges = to_ranges(&owned[&g.id]);
        }
        m
    }
}

/// The lowest `n` slots of group `from`, to move to `to`.
fn plan_reshard(map: &Map, from: u64, to: u64, n: u32) -> Result<Vec<u32>> {
    if from == to {
        bail!("--from and --to name the same group ({from})");
    }
    map.group(to)?;
    let have = map.slots_of(map.group(from)?.id);
    if n == 0 {
        bail!("--slots 0: nothing to move");
    }
    if (have.len() as u64) < u64::from(n) {
        bail!("group {from} owns {} slots, fewer than the {n} asked for", have.len());
    }
    Ok(have.into_iter().take(n as usize).collect())
}

/// `--from all`: `n` slots taken from every group but `to` in proportion to what each owns (largest remainders
/// get the rounding's leftovers), each giving its lowest: `(from, slots)`, groups giving none left out.
fn plan_from_all(map: &Map, to: u64, n: u32) -> Result<Vec<(u64, Vec<u32>)>> {
    map.group(to)?;
    let owned: Vec<(u64, BTreeSet<u32>)> =
        map.groups.iter().filter(|g| g.id != to).map(|g| (g.id, map.slots_of(g.id))).collect();
    let total: usize = owned.iter().map(|(_, s)| s.len()).sum();
    let n = n as usize;
    if n == 0 {
        bail!("--slots 0: nothing to move");
    }
    if total < n {
        bail!("the other groups own {total} slots, fewer than the {n} asked for");
    }
    let mut shares: Vec<usize> = owned.iter().map(|(_, s)| n * s.len() / total).collect();
    // The largest remainders first, then the groups owning most.
    let mut by_size: Vec<usize> = (0..owned.len()).collect();
    by_size.sort_by_key(|&i| {
        let len = owned[i].1.len();
        (std::cmp::Reverse(n * len % total), std::cmp::Reverse(len), owned[i].0)
    });
    let mut left = n - shares.iter().sum::<usize>();
    while left > 0 {
        for &i in &by_size {
            if left > 0 && shares[i] < owned[i].1.len() {
                shares[i] += 1;
                left -= 1;
            }
        }
    }
    Ok(owned
        .iter()
        .zip(shares)
        .filter(|(_, k)| *k > 0)
        .map(|((g, s), k)| (*g, s.iter().take(k).copied().collect()))
        .collect())
}

/// What each group (by id) owns once balanced: 16384/groups, the first 16384 % groups one more.
fn rebalance_targets(ids: &[u64]) -> Vec<(u64, usize)> {
    let n = ids.len().max(1);
    let (each, extra) = (SLOTS as usize / n, SLOTS as usize % n);
    ids.iter().enumerate().map(|(i, &id)| (id, each + usize::from(i < extra))).collect()
}

/// The moves that balance the map: `(from, to, slots)`, the fullest group (over its target) giving its lowest
/// slots to the emptiest, until every group has its target. Unowned slots stay unowned.
fn plan_rebalance(map: &Map) -> Vec<(u64, u64, Vec<u32>)> {
    let ids: Vec<u64> = map.groups.iter().map(|g| g.id).collect();
    let targets: BTreeMap<u64, usize> = rebalance_targets(&ids).into_iter().collect();
    let mut owned: BTreeMap<u64, BTreeSet<u32>> = ids.iter().map(|&g| (g, map.slots_of(g))).collect();
    let mut plan = Vec::new();
    loop {
        let excess = |g: &u64| owned[g].len() as i64 - targets[g] as i64;
        // Ties: the lowest group id (max_by_key keeps the last maximum, so compare on the reverse id).
        let from = ids.iter().filter(|g| excess(g) > 0).max_by_key(|g| (excess(g), std::cmp::Reverse(**g)));
        let to = ids.iter().filter(|g| excess(g) < 0).min_by_key(|g| (excess(g), **g));
        let (Some(&from), Some(&to)) = (from, to) else { break };
        let k = excess(&from).min(-excess(&to)) as usize;
        let slots: Vec<u32> = owned[&from].iter().take(k).copied().collect();
        for s in &slots {
            owned.get_mut(&from).map(|x| x.remove(s));
            owned.get_mut(&to).map(|x| x.insert(*s));
        }
        plan.push((from, to, slots));
    }
    plan
}

/// Whether a command refused with `e` may work when tried again, on this member or another of its group.
pub(super) fn retryable(e: &str) -> bool {
    ["MOVED ", "CLUSTERDOWN", "TRYAGAIN", "LOADING"].iter().any(|p| e.starts_with(p))
        || ["the commit step did not answer", "shutting down", "confirming leadership"].iter().any(|p| e.contains(p))
}

/// The client address of a map node's `host:port@busport`.
pub(super) fn client_addr(addr: &str) -> &str {
    addr.split_once('@').map_or(addr, |(a, _)| a)
}

/// A run against the cluster: the map it works from, and the leader each group last answered from.
pub(super) struct Coord {
    pub(super) map: Map,
    pub(super) leaders: BTreeMap<u64, String>,
    pub(super) timeout: Duration,
}

impl Coord {
    /// The map held by the member at `seed`, then everything `fix` does.
    pub(super) fn open(seed: &str, timeout: u64) -> Result<Coord> {
        super::split_host_port(seed)?;
        let timeout = Duration::from_secs(timeout);
        let deadline = Instant::now() + timeout;
        let map = loop {
            let r = Conn::open_for(seed, OP_TIMEOUT).and_then(|mut c| c.cmd(&["CLUSTER", "SHALEDB-MAP"]));
            match r {
                Ok(Reply::Bulk(Some(b))) => break Map::parse(&String::from_utf8_lossy(&b))?.1,
                Ok(Reply::Bulk(None)) => bail!("{seed} holds no cluster map (run shaledb cluster create first)"),
                Ok(Reply::Error(e)) if !retryable(&e) => bail!("{seed}: CLUSTER SHALEDB-MAP: {e}"),
                other if Instant::now() >= deadline => bail!("{seed}: no cluster map read in time: {other:?}"),
                _ => std::thread::sleep(Duration::from_millis(200)),
            }
        };
        let mut c = Coord { map, leaders: BTreeMap::new(), timeout };
        c.resume()?;
        Ok(c)
    }

    /// Sends `args` to group `gid`'s leader (see the file's comment for the retries): its reply.
    pub(super) fn send(&mut self, gid: u64, args: &[&[u8]]) -> Result<Reply> {
        let what = args.iter().skip(1).take(2).map(|a| String::from_utf8_lossy(a)).collect::<Vec<_>>().join(" ");
        let members: Vec<String> = self.map.group(gid)?.nodes.iter().map(|(_, a)| client_addr(a).to_string()).collect();
        if members.is_empty() {
            bail!("the map lists no node of group {gid}");
        }
        let deadline = Instant::now() + self.timeout;
        let mut next = self.leaders.get(&gid).cloned();
        let (mut i, mut hops) = (0usize, 0u32);
        let mut last;
        loop {
            let addr = next.take().unwrap_or_else(|| {
                i += 1;
                members[(i - 1) % members.len()].clone()
            });
            let conn = Conn::open_for(&addr, OP_TIMEOUT).map(|mut c| {
                c.max_len = MAX_PAYLOAD;
                c
            });
            match conn.and_then(|mut c| c.cmd_bin(args)) {
                Ok(Reply::Error(e)) if e.starts_with("MOVED ") => {
                    let to = e.split_whitespace().nth(2).map(str::to_string);
                    last = format!("{addr}: {e}");
                    hops += 1;
                    if hops < 4 && to.as_deref().is_some_and(|t| t != addr) {
                        next = to;
                        continue;
                    }
                }
                Ok(Reply::Error(e)) if retryable(&e) => last = format!("{addr}: {e}"),
                Ok(Reply::Error(e)) => bail!("group {gid} ({addr}): CLUSTER {what}: {e}"),
                Ok(r) => {
                    self.leaders.insert(gid, addr);
                    return Ok(r);
                }
                Err(e) => {
                    last = format!("{e:#}");
                    self.leaders.remove(&gid);
                }
            }
            hops = 0;
            if Instant::now() >= deadline {
                bail!("group {gid}: CLUSTER {what} did not succeed within {:?} (last: {last})", self.timeout);
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn set_map(&mut self, gid: u64, m: &Map) -> Result<()> {
        let (g, text) = (gid.to_string(), m.text());
        self.send(gid, &[b"CLUSTER", b"SHALEDB-SETMAP", g.as_bytes(), text.as_bytes()])?;
        Ok(())
    }

    /// Every map the reachable members hold, by group: the newest of each member's group.
    fn read_maps(&self) -> BTreeMap<u64, Map> {
        let mut out: BTreeMap<u64, Map> = BTreeMap::new();
        for g in &self.map.groups {
            for (_, addr) in &g.nodes {
                let addr = client_addr(addr);
                let r = Conn::open_for(addr, super::POLL_TIMEOUT).and_then(|mut c| c.cmd(&["CLUSTER", "SHALEDB-MAP"]));
                let Ok(Reply::Bulk(Some(b))) = r else { continue };
                let Ok((Some(me), m)) = Map::parse(&String::from_utf8_lossy(&b)) else { continue };
                if out.get(&me).is_none_or(|old| old.epoch < m.epoch) {
                    out.insert(me, m);
                }
            }
        }
        out
    }

    /// `fix`: finishes what an interrupted run left (the file's comment). Whether there was anything to do.
    fn resume(&mut self) -> Result<bool> {
        let held = self.read_maps();
        let newest = held.values().max_by_key(|m| m.epoch).cloned();
        let Some(h) = newest.filter(|h| h.epoch >= self.map.epoch) else {
            bail!("no member of the cluster answered with its map");
        };
        self.map = h.clone();
        if !h.copies.is_empty() {
            // A copy whose coordinator stopped: the slots are frozen and copied whole (what was written meanwhile
            // is not known here), then handed over.
            println!(
                ">>> an interrupted copy (map epoch {}): slots {} being copied; freezing and finishing them",
                h.epoch,
                slots_text(&h.copies.iter().map(|m| m.0).collect::<Vec<_>>())
            );
            let (t, f) = (h.copies[0].2, h.copies[0].1);
            self.set_map(t, &h)?;
            self.set_map(f, &h)?;
            let frozen = h.freeze();
            let mut order: Vec<u64> = frozen.moves.iter().map(|m| m.2).collect();
            order.extend(frozen.moves.iter().map(|m| m.1));
            let mut sent = BTreeSet::new();
            for g in order {
                if sent.insert(g) {
                    self.set_map(g, &frozen)?;
                }
            }
            self.map = frozen;
            self.finish_moves()?;
            return Ok(true);
        }
        if !h.moves.is_empty() {
            println!(
                ">>> an interrupted move (map epoch {}): slots {} moving; finishing it",
                h.epoch,
                slots_text(&h.moves.iter().map(|m| m.0).collect::<Vec<_>>())
            );
            let mut order: Vec<u64> = h.moves.iter().map(|m| m.2).collect();
            order.extend(h.moves.iter().map(|m| m.1));
            order.dedup();
            let mut sent = BTreeSet::new();
            for g in order {
                if sent.insert(g) {
                    self.set_map(g, &h)?;
                }
            }
            self.finish_moves()?;
            return Ok(true);
        }
        let behind: Vec<u64> =
            h.groups.iter().map(|g| g.id).filter(|g| held.get(g).is_none_or(|m| m.epoch < h.epoch)).collect();
        for &g in &behind {
            println!(">>> group {g} holds an older map than epoch {}: sending it", h.epoch);
            self.set_map(g, &h)?;
            // What its older map gave it that the newest does not: left behind by a move.
            if let Some(old) = held.get(&g) {
                let mut gone: BTreeSet<u32> = old.slots_of(g);
                gone.extend(old.moves.iter().filter(|m| m.2 == g).map(|m| m.0));
                let now = h.slots_of(g);
                for s in gone.difference(&now) {
                    let s = s.to_string();
                    self.send(g, &[b"CLUSTER", b"SHALEDB-DROPSLOT", s.as_bytes()])?;
                }
            }
        }
        Ok(!behind.is_empty())
    }

    /// The map's moving slots copied whole, then handed over: (keys copied).
    fn finish_moves(&mut self) -> Result<u64> {
        let moves = self.map.moves.clone();
        let mut keys = 0;
        for &(s, f, t) in &moves {
            keys += self.copy_slot(s, f, t)?;
        }
        self.hand_over(&moves)?;
        Ok(keys)
    }

    /// Step 4 for the map's moving slots, copied before their freeze: the keys written since each copy began
    /// (`SHALEDB-EXPORT-DIRTY`), or the whole slot again where the source did not keep that record; then the
    /// hand-over: (keys copied again).
    fn catch_up_moves(&mut self) -> Result<u64> {
        let moves = self.map.moves.clone();
        let mut keys = 0;
        for &(s, f, t) in &moves {
            keys += match self.export_dirty(s, f) {
                Ok(items) => {
                    let triples: Vec<[&Vec<u8>; 3]> = items.iter().map(|[k, e, p]| [k, e, p]).collect();
                    let slot = s.to_string();
                    for part in import_parts(&triples, false) {
                        let mut args: Vec<&[u8]> = vec![b"CLUSTER", b"SHALEDB-IMPORT", slot.as_bytes(), b"0"];
                        args.extend(part.iter().flat_map(|t| t.iter().map(|b| b.as_slice())));
                        match self.send(t, &args)? {
                            Reply::Int(k) if k as usize == part.len() => {}
                            r => bail!("group {t}: CLUSTER SHALEDB-IMPORT {s} answered {r:?}, not :{}", part.len()),
                        }
                    }
                    items.len() as u64
                }
                Err(e) if format!("{e:#}").contains("NOTRACKED") => self.copy_slot(s, f, t)?,
                Err(e) => return Err(e),
            };
        }
        self.hand_over(&moves)?;
        Ok(keys)
    }

    /// The keys of `slot` written on `from` since its copy began: `[key, expiry, payload]` (expiry `-1`: gone).
    fn export_dirty(&mut self, slot: u32, from: u64) -> Result<Vec<[Vec<u8>; 3]>> {
        let s = slot.to_string();
        let r = self.send(from, &[b"CLUSTER", b"SHALEDB-EXPORT-DIRTY", s.as_bytes()])?;
        let bad = || anyhow!("group {from}: CLUSTER SHALEDB-EXPORT-DIRTY {slot} gave an unexpected reply");
        let Reply::Array(Some(items)) = r else { return Err(bad()) };
        if !items.len().is_multiple_of(3) {
            return Err(bad());
        }
        items
            .chunks(3)
            .map(|t| match t {
                [Reply::Bulk(Some(k)), Reply::Bulk(Some(e)), Reply::Bulk(Some(p))] => {
                    Ok([k.clone(), e.clone(), p.clone()])
                }
                _ => Err(bad()),
            })
            .collect()
    }

    /// Step 5 and 6 for `moves`: the map giving them to their receivers, then the old copies dropped.
    fn hand_over(&mut self, moves: &[(u32, u64, u64)]) -> Result<()> {
        let m2 = self.map.finish();
        let mut order: Vec<u64> = moves.iter().map(|m| m.1).collect();
        order.extend(moves.iter().map(|m| m.2));
        order.extend(m2.groups.iter().map(|g| g.id));
        let mut sent = BTreeSet::new();
        for g in order {
            if sent.insert(g) {
                self.set_map(g, &m2)?;
            }
        }
        self.map = m2;
        for &(s, f, _) in moves {
            let s = s.to_string();
            self.send(f, &[b"CLUSTER", b"SHALEDB-DROPSLOT", s.as_bytes()])?;
        }
        Ok(())
    }

    /// Step 2 for one slot: its keys copied from `from` to `to` (the first import wipes the slot on `to`).
    fn copy_slot(&mut self, slot: u32, from: u64, to: u64) -> Result<u64> {
        let s = slot.to_string();
        let (mut after, mut first, mut n) = (Vec::new(), true, 0u64);
        loop {
            let r = self.send(
                from,
                &[b"CLUSTER", b"SHALEDB-EXPORT", s.as_bytes(), &after, CHUNK.as_bytes(), CHUNK_BYTES.as_bytes()],
            )?;
            let bad = || anyhow!("group {from}: CLUSTER SHALEDB-EXPORT {slot} gave an unexpected reply");
            let Reply::Array(Some(v)) = r else { return Err(bad()) };
            let [Reply::Bulk(Some(next)), Reply::Array(Some(items))] = v.as_slice() else { return Err(bad()) };
            if !items.len().is_multiple_of(3) {
                return Err(bad());
            }
            let mut triples = Vec::with_capacity(items.len() / 3);
            for t in items.chunks(3) {
                match t {
                    [Reply::Bulk(Some(k)), Reply::Bulk(Some(e)), Reply::Bulk(Some(p))] => triples.push([k, e, p]),
                    _ => return Err(bad()),
                }
            }
            // The first import of a slot is sent even without keys: it wipes what an earlier try left.
            for part in import_parts(&triples, first) {
                let mut args: Vec<&[u8]> =
                    vec![b"CLUSTER", b"SHALEDB-IMPORT", s.as_bytes(), if first { b"1" } else { b"0" }];
                args.extend(part.iter().flat_map(|t| t.iter().map(|b| b.as_slice())));
                match self.send(to, &args)? {
                    Reply::Int(k) if k as usize == part.len() => n += k as u64,
                    r => bail!("group {to}: CLUSTER SHALEDB-IMPORT {slot} answered {r:?}, not :{}", part.len()),
                }
                first = false;
            }
            if next.is_empty() {
                return Ok(n);
            }
            if *next <= after {
                bail!("group {from}: CLUSTER SHALEDB-EXPORT {slot} does not go on past the key it was given");
            }
            after = next.clone();
        }
    }

    /// Moves `slots` from `from` to `to` in batches, one line each: (keys moved).
    fn move_slots(&mut self, from: u64, to: u64, slots: &[u32]) -> Result<u64> {
        let mut keys = 0;
        for batch in slots.chunks(BATCH) {
            let started = Instant::now();
            // 1-2: copied while the source serves them.
            let m1 = self.map.begin(from, to, batch);
            self.set_map(to, &m1)?;
            self.set_map(from, &m1)?;
            self.map = m1;
            let mut k = 0;
            for &s in batch {
                k += self.copy_slot(s, from, to)?;
            }
            // 3-6: frozen, what was written meanwhile copied again, handed over, dropped.
            let frozen_at = Instant::now();
            let m3 = self.map.freeze();
            self.set_map(to, &m3)?;
            self.set_map(from, &m3)?;
            self.map = m3;
            let again = self.catch_up_moves()?;
            keys += k;
            println!(
                "Moved slots {} from group {from} to group {to}: {k} keys, {} ms (map epoch {}); {again} keys copied \
                 again after the freeze, frozen {} ms",
                slots_text(batch),
                started.elapsed().as_millis(),
                self.map.epoch,
                frozen_at.elapsed().as_millis()
            );
        }
        Ok(keys)
    }
}

/// An export's keys split into imports of at most `IMPORT_BYTES` of payload (at least one key each); one empty
/// import for none when `always`.
fn import_parts<T: AsRef<[u8]>>(triples: &[[T; 3]], always: bool) -> Vec<&[[T; 3]]> {
    let mut parts = Vec::new();
    let (mut start, mut bytes) = (0, 0);
    for (i, t) in triples.iter().enumerate() {
        let size: usize = t.iter().map(|b| b.as_ref().len()).sum();
        if i > start && bytes + size > IMPORT_BYTES {
            parts.push(&triples[start..i]);
            (start, bytes) = (i, 0);
        }
        bytes += size;
    }
    if start < triples.len() || (parts.is_empty() && always) {
        parts.push(&triples[start..]);
    }
    parts
}

/// Asks on stdin, as redis-cli does; `Err` unless the answer is `yes`.
fn confirm(what: &str) -> Result<()> {
    print!("Do you want to proceed with the proposed {what} plan (yes/no)? ");
    std::io::Write::flush(&mut std::io::stdout())?;
    let mut line = String::new();
    std::io::stdin().lock().read_line(&mut line)?;
    if line.trim() != "yes" {
        bail!("{what} aborted: nothing was moved (answer yes, or pass --yes)");
    }
    Ok(())
}

fn group_line(map: &Map, id: u64) -> String {
    let n = map.slots_of(id).len();
    let first = map.group(id).ok().and_then(|g| g.nodes.first()).map(|(nid, a)| format!(", {nid} {a}"));
    format!("group {id} ({n} slots{})", first.unwrap_or_default())
}

pub fn reshard(a: &ReshardArgs) -> Result<()> {
    let started = Instant::now();
    let mut c = Coord::open(&a.node, a.timeout)?;
    let to = c.map.group_named(&a.to)?;
    let plan: Vec<(u64, Vec<u32>)> = if a.from.eq_ignore_ascii_case("all") {
        plan_from_all(&c.map, to, a.slots)?
    } else {
        let from = c.map.group_named(&a.from)?;
        vec![(from, plan_reshard(&c.map, from, to, a.slots)?)]
    };
    println!("Ready to move {} slots.", a.slots);
    for (from, slots) in &plan {
        println!("  Source: {}", group_line(&c.map, *from));
        println!("  Resharding plan: slots {}", slots_text(slots));
    }
    println!("  Destination: {}", group_line(&c.map, to));
    if !a.yes {
        confirm("reshard")?;
    }
    let mut keys = 0;
    for (from, slots) in &plan {
        keys += c.move_slots(*from, to, slots)?;
    }
    let from = match plan.as_slice() {
        [(f, _)] => format!("group {f}"),
        _ => "the other groups".into(),
    };
    println!(
        "[OK] {} slots ({keys} keys) moved from {from} to group {to} in {} ms; map epoch {}.",
        a.slots,
        started.elapsed().as_millis(),
        c.map.epoch
    );
    Ok(())
}

pub fn rebalance(a: &RebalanceArgs) -> Result<()> {
    let started = Instant::now();
    let mut c = Coord::open(&a.node, a.timeout)?;
    let plan = plan_rebalance(&c.map);
    if plan.is_empty() {
        println!("[OK] The slots are balanced already (map epoch {}): nothing to move.", c.map.epoch);
        return Ok(());
    }
    for (f, t, slots) in &plan {
        println!("Moving {} slots from group {f} to group {t}: {}", slots.len(), slots_text(slots));
    }
    if !a.yes {
        confirm("rebalance")?;
    }
    let (mut n, mut keys) = (0, 0);
    for (f, t, slots) in &plan {
        keys += c.move_slots(*f, *t, slots)?;
        n += slots.len();
    }
    println!("[OK] {n} slots ({keys} keys) moved in {} ms; map epoch {}.", started.elapsed().as_millis(), c.map.epoch);
    Ok(())
}

pub fn fix(a: &FixArgs) -> Result<()> {
    let c = Coord::open(&a.node, a.timeout)?;
    let held = c.read_maps();
    let behind: Vec<String> =
        held.iter().filter(|(_, m)| **m != c.map).map(|(g, m)| format!("group {g} (epoch {})", m.epoch)).collect();
    if !behind.is_empty() {
        bail!("after the fix these groups still answer another map than epoch {}: {}", c.map.epoch, behind.join(", "));
    }
    let owned: usize = c.map.groups.iter().map(|g| c.map.slots_of(g.id).len()).sum();
    println!(
        "[OK] Every group answering holds the map of epoch {}; no slot is moving; {owned} of {SLOTS} slots covered.",
        c.map.epoch
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map3() -> Map {
        let text = "self 2\nepoch 4\ngroup 1 0-5460\nnode 1 aa 127.0.0.1:1@11\ngroup 2 5461-10922\n\
                    node 2 bb 127.0.0.1:2@12\nnode 2 cc 127.0.0.1:3@13\ngroup 3 10923-16383\nnode 3 dd h:4@14\n";
        let (me, m) = Map::parse(text).unwrap();
        assert_eq!(me, Some(2));
        m
    }

    #[test]
    fn maps_parse_and_print() {
        let m = map3();
        assert_eq!(m.epoch, 4);
        assert_eq!(
            m.group(2).unwrap().nodes,
            [("bb".into(), "127.0.0.1:2@12".into()), ("cc".into(), "127.0.0.1:3@13".into())]
        );
        let (me, again) = Map::parse(&m.text()).unwrap();
        assert_eq!((me, &again), (None, &m));
        assert!(m.text().starts_with("epoch 4\ngroup 1 0-5460\nnode 1 aa 127.0.0.1:1@11\ngroup 2 5461-10922\n"));
        assert_eq!(m.group_named("cc").unwrap(), 2);
        assert_eq!(m.group_named("3").unwrap(), 3);
        assert!(m.group_named("zz").is_err());
        assert!(m.group_named("4").is_err());
        assert!(Map::parse("group 1 0-5\nnode 1 a h:1@2\n").is_err());
        assert!(Map::parse("epoch 1\nnode 1 a h:1@2\n").is_err());
        assert_eq!(client_addr("127.0.0.1:7000@17000"), "127.0.0.1:7000");
    }

    #[test]
    fn reshard_takes_the_lowest_slots() {
        let m = map3();
        assert_eq!(plan_reshard(&m, 2, 1, 3).unwrap(), [5461, 5462, 5463]);
        assert_eq!(plan_reshard(&m, 1, 3, 5461).unwrap().len(), 5461);
        assert!(plan_reshard(&m, 1, 3, 5462).unwrap_err().to_string().contains("fewer"));
        assert!(plan_reshard(&m, 1, 1, 3).unwrap_err().to_string().contains("same group"));
        assert!(plan_reshard(&m, 1, 9, 3).is_err());
        assert!(plan_reshard(&m, 1, 2, 0).is_err());
    }

    #[test]
    fn a_move_marks_then_gives_the_slots_with_merged_ranges() {
        let m = map3();
        let m1 = m.begin(2, 1, &[5461, 5462, 5463]);
        assert_eq!(m1.epoch, 5);
        assert!(m1.text().ends_with("copying 5461 2 1\ncopying 5462 2 1\ncopying 5463 2 1\n"), "{}", m1.text());
        assert_eq!(m1.groups, m.groups);
        assert_eq!(Map::parse(&m1.text()).unwrap().1, m1);
        let m1 = m1.freeze();
        assert_eq!(m1.epoch, 6);
        assert!(m1.text().ends_with("moving 5461 2 1\nmoving 5462 2 1\nmoving 5463 2 1\n"), "{}", m1.text());
        assert!(m1.copies.is_empty());
        let m2 = m1.finish();
        assert_eq!(m2.epoch, 7);
        assert!(m2.moves.is_empty());
        assert_eq!(m2.group(1).unwrap().ranges, [(0, 5463)]);
        assert_eq!(m2.group(2).unwrap().ranges, [(5464, 10922)]);
        assert_eq!(m2.group(3).unwrap().ranges, [(10923, 16383)]);
        // Slots not adjacent: separate ranges; a group left with none writes "-".
        let m2 = m.begin(3, 1, &[10923, 16383]).freeze().finish();
        assert_eq!(m2.group(1).unwrap().ranges, [(0, 5460), (10923, 10923), (16383, 16383)]);
        assert!(m2.text().contains("group 1 0-5460,10923,16383\n"));
        assert!(m2.text().contains("group 3 10924-16382\n"));
        let all: Vec<u32> = (0..=5460).collect();
        let m2 = m.begin(1, 2, &all).freeze().finish();
        assert!(m2.text().contains("group 1 -\n") && m2.text().contains("group 2 0-10922\n"), "{}", m2.text());
        assert_eq!(Map::parse(&m2.text()).unwrap().1, m2);
    }

    #[test]
    fn from_all_takes_shares() {
        let m = map3();
        let plan = plan_from_all(&m, 1, 100).unwrap();
        // Groups 2 (5462 slots) and 3 (5461): 50 each, the lowest of each.
        assert_eq!(plan.iter().map(|(g, s)| (*g, s.len(), s[0])).collect::<Vec<_>>(), [(2, 50, 5461), (3, 50, 10923)]);
        let plan = plan_from_all(&m, 1, 101).unwrap();
        assert_eq!(plan.iter().map(|(g, s)| (*g, s.len())).collect::<Vec<_>>(), [(2, 51), (3, 50)]);
        // Groups 1 and 3 own 5461 each: the one slot comes from the lower id.
        let plan = plan_from_all(&m, 2, 1).unwrap();
        assert_eq!(plan, [(1, vec![0])]);
        assert_eq!(plan_from_all(&m, 3, 10923).unwrap().iter().map(|p| p.1.len()).sum::<usize>(), 10923);
        assert!(plan_from_all(&m, 3, 10924).unwrap_err().to_string().contains("fewer"));
        assert!(plan_from_all(&m, 3, 0).is_err());
        assert!(plan_from_all(&m, 9, 5).is_err());
    }

    #[test]
    fn rebalance_targets_and_moves() {
        assert_eq!(rebalance_targets(&[1, 2, 3]), [(1, 5462), (2, 5461), (3, 5461)]);
        assert_eq!(rebalance_targets(&[1, 2]), [(1, 8192), (2, 8192)]);
        assert_eq!(rebalance_targets(&[5, 6, 7, 8, 9]).iter().map(|t| t.1).sum::<usize>(), 16384);
        // From create's split (5461/5462/5461) the targets want 5462/5461/5461: group 2 gives group 1 a slot.
        let m = map3();
        assert_eq!(plan_rebalance(&m), [(2, 1, vec![5461])]);
        // Everything on group 1: it gives its lowest slots to 2, then to 3.
        let all: Vec<u32> = (5461..=16383).collect();
        let m = m.begin(2, 1, &all[..5462]).freeze().finish().begin(3, 1, &all[5462..]).freeze().finish();
        assert_eq!(m.slots_of(1).len(), 16384);
        let plan = plan_rebalance(&m);
        assert_eq!(plan.len(), 2);
        assert_eq!((plan[0].0, plan[0].1, plan[0].2.len(), plan[0].2[0]), (1, 2, 5461, 0));
        assert_eq!((plan[1].0, plan[1].1, plan[1].2.len(), plan[1].2[0]), (1, 3, 5461, 5461));
        let mut after = m.clone();
        for (f, t, s) in &plan {
            after = after.begin(*f, *t, s).freeze().finish();
        }
        assert_eq!(plan_rebalance(&after), []);
        assert_eq!([1, 2, 3].map(|g| after.slots_of(g).len()), [5462, 5461, 5461]);
    }

    #[test]
    fn large_chunks_are_imported_in_parts() {
        let t = |n: usize| [vec![b'k'], vec![b'0'], vec![0u8; n]];
        let lens = |v: &[[Vec<u8>; 3]], always| import_parts(v, always).iter().map(|p| p.len()).collect::<Vec<_>>();
        assert_eq!(lens(&[], true), [0]);
        assert!(lens(&[], false).is_empty());
        assert_eq!(lens(&[t(10), t(10)], false), [2]);
        // Two of these fit in one import, three do not; a key larger than the budget goes alone.
        let big = IMPORT_BYTES / 2 - 100;
        assert_eq!(lens(&[t(big), t(10), t(big)], true), [3]);
        assert_eq!(lens(&[t(big), t(big), t(big), t(3 * big)], true), [2, 1, 1]);
        assert_eq!(lens(&[t(3 * big), t(10)], false), [1, 1]);
    }

    #[test]
    fn which_refusals_are_tried_again() {
        assert!(retryable("MOVED 0 127.0.0.1:7000 (CLUSTER SHALEDB-SETMAP)"));
        assert!(retryable("CLUSTERDOWN The cluster is down"));
        assert!(retryable("TRYAGAIN Slot 5 is being moved"));
        assert!(!retryable("ERR the group holds a map of epoch 9: a different map needs a higher epoch"));
        assert!(!retryable("ERR slot 5 is not moving from this group (group 1) by its map"));
    }
}
