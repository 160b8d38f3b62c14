//! The cluster map (issue 44): which replica group owns which hash slots, and who the groups' members are.
//!
//! Every group keeps the map in its own replicated state, under one engine key outside every database's range
//! (docs/format/server-keys.md, "The cluster map"), written through openraft like any write
//! (`CLUSTER SHALEDB-SETMAP`), so a member has it after a restart and a new member gets it with the log or a
//! snapshot. Each group's copy says which group it is (`self`); the rest is the same text on every group. The
//! `epoch` orders maps: a group takes a map only with a higher epoch than the one it holds (or the same map
//! again), so an old map sent late cannot undo a newer one.
//!
//! ```text
//! stored   := "self " group_id "\n" map
//! map      := "epoch " u64 "\n" (group "\n" (node "\n")*)+ ((move | copy) "\n")*
//! group    := "group " group_id " " ranges          group ids are 1.. and unique
//! ranges   := "-" | range ("," range)*              range := slot | slot "-" slot, slots 0..=16383
//! node     := "node " group_id " " node_id " " host ":" port "@" busport
//! move     := "moving " slot " " from_group " " to_group   a slot being moved (moves.rs): from_group owns it
//! copy     := "copying " slot " " from_group " " to_group  a slot being copied before its move: from_group owns
//!                                                         and serves it, and records what it writes there
//! ```
//!
//! Every number is checked before it is used; ranges may not overlap between groups; a node belongs to one
//! group. The text form is the one the tools send and CLUSTER SHALEDB-GROUP shows, so an operator can read it.

use super::{node_name, parse_node_id, SLOTS};
use shaledb_raft::{MemberAddr, NodeId};
use std::fmt::Write as _;

/// The engine key the map is stored under (outside every database's range, 0..=15, and apart from the layout
/// marker `0xff` and the function libraries `0xfe`).
pub const MAP_KEY: &[u8] = b"\xfdshaledb-cluster-map";

/// Longest map text accepted (a map of 16384 single-slot ranges over many groups fits).
const MAX_TEXT: usize = 4 << 20;
/// Most groups, and most nodes per group, a map may name.
const MAX_GROUPS: usize = 1024;
const MAX_NODES: usize = 1024;

/// A slot of no group.
const NONE: u16 = u16::MAX;

/// One group as the map records it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupSpec {
    pub id: u64,
    /// Inclusive ranges, in slot order, merged.
    pub ranges: Vec<(u16, u16)>,
    /// `(node id, host:port@busport)`, in the order given.
    pub nodes: Vec<(NodeId, String)>,
}

/// A parsed map, with a slot -> group index for the routing of every command.
#[derive(Clone, Debug)]
pub struct SlotMap {
    pub epoch: u64,
    /// The groups, in id order.
    pub groups: Vec<GroupSpec>,
    /// For each slot, the index in `groups` of its owner, or `NONE`.
    owner: Vec<u16>,
    /// Slots being moved: `(slot, from group, to group)`, in slot order. The owner (`from`) refuses writes
    /// to them (`-TRYAGAIN`) and the receiver refuses every command on them until the move's last map.
    pub moves: Vec<(u16, u64, u64)>,
    /// Slots being copied before their move: `(slot, from group, to group)`, in slot order. The owner serves
    /// them as any of its slots and records the keys it writes there, so the move's freeze only waits for
    /// those (docs/cluster.md, "Moving slots").
    pub copies: Vec<(u16, u64, u64)>,
}

impl PartialEq for SlotMap {
    fn eq(&self, other: &SlotMap) -> bool {
        self.epoch == other.epoch
            && self.groups == other.groups
            && self.moves == other.moves
            && self.copies == other.copies
    }
}

/// What a member holds: the map and which of its groups this member's group is.
#[derive(Clone, Debug, PartialEq)]
pub struct Stored {
    pub me: u64,
    pub map: SlotMap,
}

impl SlotMap {
    /// Parses the map text (`map` in the grammar above).
    pub fn parse(text: &str) -> Result<SlotMap, String> {
        if text.len() > MAX_TEXT {
            return Err(format!("the map is {} bytes, more than the {MAX_TEXT} accepted", text.len()));
        }
        let mut epoch = None;
        let mut groups: Vec<GroupSpec> = Vec::new();
        let mut moves: Vec<(u16, u64, u64)> = Vec::new();
        let mut copies: Vec<(u16, u64, u64)> = Vec::new();
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() {
                continue;
            }
            let at = |what: String| format!("map line {}: {what}", n + 1);
            let words: Vec<&str> = line.split_ascii_whitespace().collect();
            match words.as_slice() {
                ["epoch", e] => {
                    if epoch.is_some() {
                        return Err(at("a second epoch line".into()));
                    }
                    epoch = Some(e.parse::<u64>().map_err(|_| at(format!("'{e}' is not an epoch (a number)")))?);
                }
                ["group", id, ranges] => {
                    let id = group_id(id).map_err(at)?;
                    if groups.iter().any(|g| g.id == id) {
                        return Err(at(format!("group {id} is named twice")));
                    }
                    if groups.len() == MAX_GROUPS {
                        return Err(at(format!("more than {MAX_GROUPS} groups")));
                    }
                    groups.push(GroupSpec { id, ranges: parse_ranges(ranges).map_err(at)?, nodes: Vec::new() });
                }
                ["node", gid, node, addr] => {
                    let gid = group_id(gid).map_err(at)?;
                    let node = parse_node_id(node).ok_or_else(|| at(format!("'{node}' is not a node id")))?;
                    MemberAddr::parse(addr).map_err(at)?;
                    if groups.iter().any(|g| g.nodes.iter().any(|(id, _)| *id == node)) {
                        return Err(at(format!("node {} is named twice", node_name(node))));
                    }
                    let Some(g) = groups.iter_mut().find(|g| g.id == gid) else {
                        return Err(at(format!("node of group {gid}, which no group line before it names")));
                    };
                    if g.nodes.len() == MAX_NODES {
                        return Err(at(format!("more than {MAX_NODES} nodes in group {gid}")));
                    }
                    g.nodes.push((node, addr.to_string()));
                }
                [kind @ ("moving" | "copying"), s, from, to] => {
                    let s = slot(s).map_err(at)?;
                    let (from, to) = (group_id(from).map_err(at)?, group_id(to).map_err(at)?);
                    if from == to {
                        return Err(at(format!("slot {s} moves from group {from} to itself")));
                    }
                    if moves.iter().chain(&copies).any(|m| m.0 == s) {
                        return Err(at(format!("slot {s} is moving twice")));
                    }
                    if moves.len() + copies.len() == usize::from(SLOTS) {
                        return Err(at("too many moving and copying lines".into()));
                    }
                    if *kind == "moving" {
                        moves.push((s, from, to));
                    } else {
                        copies.push((s, from, to));
                    }
                }
                _ => {
                    return Err(at(format!(
                        "'{line}' is not 'epoch N', 'group ID RANGES', 'node ID NODE ADDR', 'moving SLOT FROM TO' or \
                         'copying SLOT FROM TO'"
                    )))
                }
            }
        }
        let epoch = epoch.ok_or("the map has no epoch line")?;
        if groups.is_empty() {
            return Err("the map names no group".into());
        }
        groups.sort_by_key(|g| g.id);
        let mut owner = vec![NONE; usize::from(SLOTS)];
        for (i, g) in groups.iter().enumerate() {
            if g.nodes.is_empty() {
                return Err(format!("group {} has no node", g.id));
            }
            for &(a, b) in &g.ranges {
                for s in a..=b {
                    let slot = &mut owner[usize::from(s)];
                    if *slot != NONE {
                        return Err(format!(
                            "slot {s} is given to groups {} and {}",
                            groups[usize::from(*slot)].id,
                            g.id
                        ));
                    }
                    *slot = i as u16;
                }
            }
        }
        moves.sort_unstable();
        copies.sort_unstable();
        for &(s, from, to) in moves.iter().chain(&copies) {
            if groups.iter().all(|g| g.id != to) {
                return Err(format!("slot {s} moves to group {to}, which the map does not name"));
            }
            let owner = owner[usize::from(s)];
            if owner == NONE || groups[usize::from(owner)].id != from {
                return Err(format!("slot {s} moves from group {from}, which does not own it"));
            }
        }
        Ok(SlotMap { epoch, groups, owner, moves, copies })
    }

    /// The map text, in the canonical form `parse` reads back to an equal map.
    pub fn text(&self) -> String {
        let mut out = format!("epoch {}\n", self.epoch);
        for g in &self.groups {
            let _ = writeln!(out, "group {} {}", g.id, ranges_text(&g.ranges));
            for (id, addr) in &g.nodes {
                let _ = writeln!(out, "node {} {} {addr}", g.id, node_name(*id));
            }
        }
        for (s, from, to) in &self.moves {
            let _ = writeln!(out, "moving {s} {from} {to}");
        }
        for (s, from, to) in &self.copies {
            let _ = writeln!(out, "copying {s} {from} {to}");
        }
        out
    }

    /// The group owning `slot`, if any.
    pub fn owner(&self, slot: u16) -> Option<&GroupSpec> {
        match self.owner.get(usize::from(slot)) {
            Some(&i) if i != NONE => self.groups.get(usize::from(i)),
            _ => None,
        }
    }

    /// Group `id`.
    pub fn group(&self, id: u64) -> Option<&GroupSpec> {
        self.groups.iter().find(|g| g.id == id)
    }

    /// `(from, to)` when `slot` is being moved.
    pub fn moving(&self, slot: u16) -> Option<(u64, u64)> {
        if self.moves.is_empty() {
            return None;
        }
        self.moves.binary_search_by_key(&slot, |m| m.0).ok().map(|i| (self.moves[i].1, self.moves[i].2))
    }

    /// `(from, to)` when `slot` is being copied before its move (the owner still serves it).
    pub fn copying(&self, slot: u16) -> Option<(u64, u64)> {
        if self.copies.is_empty() {
            return None;
        }
        self.copies.binary_search_by_key(&slot, |m| m.0).ok().map(|i| (self.copies[i].1, self.copies[i].2))
    }

    /// `(from, to, frozen)` when `slot` is being copied (`frozen` false) or moved (true).
    pub fn transfer(&self, slot: u16) -> Option<(u64, u64, bool)> {
        self.moving(slot).map(|(f, t)| (f, t, true)).or_else(|| self.copying(slot).map(|(f, t)| (f, t, false)))
    }

    /// How many slots some group owns.
    pub fn assigned(&self) -> usize {
        self.owner.iter().filter(|&&o| o != NONE).count()
    }
}

impl Stored {
    /// The stored value (`stored` in the grammar).
    pub fn encode(&self) -> Vec<u8> {
        format!("self {}\n{}", self.me, self.map.text()).into_bytes()
    }

    /// Reads a stored value back; `Err` says what is wrong with it.
    pub fn decode(value: &[u8]) -> Result<Stored, String> {
        let text = std::str::from_utf8(value).map_err(|_| "the stored cluster map is not text".to_string())?;
        let (first, rest) = text.split_once('\n').ok_or("the stored cluster map has no 'self' line")?;
        let me = match first.trim().split_once(' ') {
            Some(("self", id)) => group_id(id.trim())?,
            _ => return Err(format!("the stored cluster map starts with '{first}', not 'self GROUP'")),
        };
        let map = SlotMap::parse(rest)?;
        if map.group(me).is_none() {
            return Err(format!("the stored cluster map names no group {me} (its own)"));
        }
        Ok(Stored { me, map })
    }

    /// This member's group in the map.
    pub fn mine(&self) -> &GroupSpec {
        self.map.group(self.me).expect("checked when built")
    }

    /// Whether this member's group owns `slot`.
    pub fn owns(&self, slot: u16) -> bool {
        self.map.owner(slot).is_some_and(|g| g.id == self.me)
    }
}

fn group_id(s: &str) -> Result<u64, String> {
    match s.parse::<u64>() {
        Ok(n) if n > 0 && s.bytes().all(|b| b.is_ascii_digit()) => Ok(n),
        _ => Err(format!("'{s}' is not a group id (a number from 1)")),
    }
}

fn slot(s: &str) -> Result<u16, String> {
    match s.parse::<u16>() {
        Ok(n) if n < SLOTS && s.bytes().all(|b| b.is_ascii_digit()) => Ok(n),
        _ => Err(format!("'{s}' is not a slot (0-{})", SLOTS - 1)),
    }
}

/// Parses `ranges`: `-` (none) or comma-separated `a` / `a-b`; sorted and merged.
pub fn parse_ranges(s: &str) -> Result<Vec<(u16, u16)>, String> {
    if s == "-" {
        return Ok(Vec::new());
    }
    let mut out: Vec<(u16, u16)> = Vec::new();
    for part in s.split(',') {
        let (a, b) = match part.split_once('-') {
            Some((a, b)) => (slot(a)?, slot(b)?),
            None => {
                let a = slot(part)?;
                (a, a)
            }
        };
        if a > b {
            return Err(format!("'{part}' is not a range (its start is after its end)"));
        }
        out.push((a, b));
    }
    out.sort_unstable();
    let mut merged: Vec<(u16, u16)> = Vec::with_capacity(out.len());
    for (a, b) in out {
        match merged.last_mut() {
            Some(last) if a <= last.1 => return Err(format!("slot {a} is named twice in '{s}'")),
            Some(last) if u32::from(a) == u32::from(last.1) + 1 => last.1 = b,
            _ => merged.push((a, b)),
        }
    }
    Ok(merged)
}

/// `ranges` as the map writes them.
pub fn ranges_text(ranges: &[(u16, u16)]) -> String {
    if ranges.is_empty() {
        return "-".into();
    }
    let parts: Vec<String> =
        ranges.iter().map(|&(a, b)| if a == b { a.to_string() } else { format!("{a}-{b}") }).collect();
    parts.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn two_groups() -> String {
        format!(
            "epoch 3\ngroup 2 8192-16383\nnode 2 {} 127.0.0.1:7003@17003\ngroup 1 0-100,101-8191\nnode 1 {} \
             127.0.0.1:7000@17000\nnode 1 5 127.0.0.1:7001@17001\n",
            node_name(9),
            node_name(4)
        )
    }

    #[test]
    fn a_map_parses_routes_and_round_trips() {
        let m = SlotMap::parse(&two_groups()).unwrap();
        assert_eq!(m.epoch, 3);
        assert_eq!(m.groups.iter().map(|g| g.id).collect::<Vec<_>>(), vec![1, 2]);
        assert_eq!(m.groups[0].ranges, vec![(0, 8191)], "adjacent ranges merge");
        assert_eq!(m.owner(0).unwrap().id, 1);
        assert_eq!(m.owner(8191).unwrap().id, 1);
        assert_eq!(m.owner(8192).unwrap().id, 2);
        assert_eq!(m.owner(16383).unwrap().id, 2);
        assert_eq!(m.assigned(), 16384);
        let again = SlotMap::parse(&m.text()).unwrap();
        assert_eq!(again, m);
        let st = Stored { me: 2, map: m };
        let back = Stored::decode(&st.encode()).unwrap();
        assert_eq!(back, st);
        assert!(back.owns(9000) && !back.owns(5));
        assert_eq!(back.mine().nodes, vec![(9, "127.0.0.1:7003@17003".to_string())]);
    }

    #[test]
    fn bad_maps_are_refused_with_the_reason() {
        let bad = |t: &str| SlotMap::parse(t).unwrap_err();
        assert!(bad("group 1 0-5\nnode 1 1 h:1@2\n").contains("no epoch"));
        assert!(bad("epoch x\n").contains("not an epoch"));
        assert!(bad("epoch 1\n").contains("no group"));
        assert!(bad("epoch 1\ngroup 0 0-5\n").contains("not a group id"));
        assert!(bad("epoch 1\ngroup 1 0-16384\nnode 1 1 h:1@2\n").contains("not a slot"));
        assert!(bad("epoch 1\ngroup 1 9-3\nnode 1 1 h:1@2\n").contains("start is after"));
        assert!(bad("epoch 1\ngroup 1 0-5,5\nnode 1 1 h:1@2\n").contains("named twice"));
        assert!(bad("epoch 1\ngroup 1 0-5\nnode 1 1 h:1@2\ngroup 2 5-9\nnode 2 2 h:3@4\n").contains("slot 5"));
        assert!(bad("epoch 1\ngroup 1 0-5\n").contains("no node"));
        assert!(bad("epoch 1\ngroup 1 0-5\nnode 2 1 h:1@2\n").contains("no group line"));
        assert!(bad("epoch 1\ngroup 1 0-5\nnode 1 1 h:1\n").contains("'@'"));
        assert!(bad("epoch 1\ngroup 1 0\nnode 1 1 h:1@2\ngroup 2 1\nnode 2 1 h:3@4\n").contains("twice"));
        assert!(bad("epoch 1\nslots 1\n").contains("is not"));
        assert!(Stored::decode(b"self 3\nepoch 1\ngroup 1 -\nnode 1 1 h:1@2\n").unwrap_err().contains("group 3"));
        assert!(Stored::decode(b"\xff").is_err());
        assert!(Stored::decode(b"epoch 1\n").is_err());
    }

    #[test]
    fn moving_slots_are_checked_and_kept() {
        let base = "epoch 1\ngroup 1 0-9\nnode 1 1 h:1@2\ngroup 2 10-16383\nnode 2 2 h:3@4\n";
        let m = SlotMap::parse(&format!("{base}moving 5 1 2\nmoving 11 2 1\n")).unwrap();
        assert_eq!(m.moving(5), Some((1, 2)));
        assert_eq!(m.moving(11), Some((2, 1)));
        assert_eq!(m.moving(6), None);
        assert_eq!(SlotMap::parse(&m.text()).unwrap(), m);
        let bad = |t: &str| SlotMap::parse(&format!("{base}{t}")).unwrap_err();
        assert!(bad("moving 5 2 1\n").contains("does not own it"));
        assert!(bad("moving 5 1 3\n").contains("does not name"));
        assert!(bad("moving 5 1 1\n").contains("to itself"));
        assert!(bad("moving 5 1 2\nmoving 5 1 2\n").contains("moving twice"));
        assert!(bad("moving 16384 1 2\n").contains("not a slot"));
        // A slot copied before its move: owned and served by its source, one line per slot at most.
        let c = SlotMap::parse(&format!("{base}copying 5 1 2\nmoving 11 2 1\n")).unwrap();
        assert_eq!((c.copying(5), c.moving(5), c.transfer(5)), (Some((1, 2)), None, Some((1, 2, false))));
        assert_eq!(c.transfer(11), Some((2, 1, true)));
        assert_eq!(c.owner(5).map(|g| g.id), Some(1));
        assert_eq!(SlotMap::parse(&c.text()).unwrap(), c);
        assert_ne!(c, SlotMap::parse(&format!("{base}moving 5 1 2\nmoving 11 2 1\n")).unwrap());
        assert!(bad("copying 5 2 1\n").contains("does not own it"));
        assert!(bad("copying 5 1 2\nmoving 5 1 2\n").contains("moving twice"));
    }

    #[test]
    fn ranges_read_and_write() {
        assert_eq!(parse_ranges("-").unwrap(), vec![]);
        assert_eq!(parse_ranges("5,0-3,4").unwrap(), vec![(0, 5)]);
        assert_eq!(parse_ranges("7,0-3").unwrap(), vec![(0, 3), (7, 7)]);
        assert_eq!(ranges_text(&[(0, 3), (7, 7)]), "0-3,7");
        assert_eq!(ranges_text(&[]), "-");
        assert!(parse_ranges("").is_err());
        assert!(parse_ranges("1-").is_err());
    }
}
