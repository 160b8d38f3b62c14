//! `shaledb cluster import HOST:PORT --from HOST:PORT`: copies the keys of a standalone server (a ShaleDB
//! server, or Redis) into a cluster, as `redis-cli --cluster import` does. It is how a single-node database
//! becomes a cluster's: a cluster member stores its keys slot first (docs/format/server-keys.md), so a
//! standalone server's directory is not opened as a member; its keys are loaded through the cluster's groups
//! instead, each write through its group's log like any client's.
//!
//! The source is read with `SCAN` (1,000 keys a call), then `DUMP` and `PEXPIRETIME` of each key, pipelined.
//! Each key goes to the group that owns its slot by the cluster map as `RESTORE key expiry payload ABSTTL`
//! (`REPLACE` with `--replace`), pipelined per group (up to 500 keys or 8 MiB of payload at a time), so each
//! group commits many keys per fsync. A command answered `-MOVED`, `-TRYAGAIN` or `-CLUSTERDOWN` (a leader
//! change, a slot being moved) is sent again, to the leader, for at most `--timeout` seconds.
//!
//! Unlike redis-cli, which deletes each key it moved unless `--cluster-copy` is given, nothing is deleted from
//! the source: a tool changes only what it was asked to. Delete the source once the cluster is checked.
//! A key that exists in the cluster already stops the import (naming it) unless `--replace`. A key that
//! disappeared from the source between SCAN and DUMP is skipped and counted; one written meanwhile is copied
//! as DUMP read it (stop the source's writers first for an exact copy).

use super::reshard::{client_addr, retryable, Coord, OP_TIMEOUT};
use super::{expect_ok, Conn, Reply, MAX_PAYLOAD};
use anyhow::{anyhow, bail, Result};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// Keys per SCAN call on the source.
const SCAN_COUNT: &str = "1000";
/// Most keys and payload bytes sent to a group in one pipeline.
const PIPELINE_KEYS: usize = 500;
const PIPELINE_BYTES: usize = 8 << 20;

#[derive(clap::Args, Debug)]
pub struct ImportArgs {
    /// Any member of the cluster.
    #[arg(value_name = "HOST:PORT")]
    pub node: String,
    /// The standalone server whose keys are copied (a `shaledb server`, or a Redis server).
    #[arg(long, value_name = "HOST:PORT")]
    pub from: String,
    /// The source's database to copy (a cluster has one database).
    #[arg(long, default_value_t = 0)]
    pub from_db: u8,
    /// The source's user (with --from-pass: `AUTH user pass`).
    #[arg(long)]
    pub from_user: Option<String>,
    /// The source's password.
    #[arg(long)]
    pub from_pass: Option<String>,
    /// Overwrite keys the cluster holds already (otherwise such a key stops the import).
    #[arg(long)]
    pub replace: bool,
    /// Accepted for redis-cli's arguments: the source is never changed, with or without it.
    #[arg(long)]
    pub copy: bool,
    /// Seconds each batch may retry (a group electing a leader) before the run stops.
    #[arg(long, default_value_t = 60)]
    pub timeout: u64,
}

/// One key read from the source: name, absolute expiry in Unix ms (0: none), DUMP payload.
struct Item {
    key: Vec<u8>,
    expire_at: i64,
    payload: Vec<u8>,
}

/// What an import did.
#[derive(Default, Debug)]
struct Counts {
    copied: u64,
    gone: u64,
    bytes: u64,
}

pub fn import(a: &ImportArgs) -> Result<()> {
    if a.from_db > 15 {
        bail!("--from-db {}: a database number is 0 to 15", a.from_db);
    }
    let started = Instant::now();
    let mut coord = Coord::open(&a.node, a.timeout)?;
    let mut src = open_source(a)?;
    println!(">>> Importing the keys of {} (database {}) into the cluster at {}", a.from, a.from_db, a.node);
    let mut counts = Counts::default();
    let mut cursor = b"0".to_vec();
    loop {
        let r = expect_ok(src.cmd_bin(&[b"SCAN", &cursor, b"COUNT", SCAN_COUNT.as_bytes()])?, "SCAN", &a.from)?;
        let (next, keys) = scan_reply(r).ok_or_else(|| anyhow!("{}: SCAN gave an unexpected reply", a.from))?;
        let items = read_items(&mut src, &a.from, &keys, &mut counts)?;
        copy_items(&mut coord, items, a.replace, &mut counts)?;
        if next == b"0" {
            break;
        }
        cursor = next;
    }
    println!(
        "[OK] {} keys copied ({} bytes of DUMP payload) in {} ms; {} keys gone from the source before they were read",
        counts.copied,
        counts.bytes,
        started.elapsed().as_millis(),
        counts.gone
    );
    for (db, n) in other_databases(&mut src, a.from_db) {
        println!("note: database {db} of the source holds {n} keys, not copied (a cluster has one database; --from-db {db} copies them)");
    }
    println!("The source is unchanged: delete its keys yourself once the cluster is checked.");
    Ok(())
}

/// A connection to the source, authenticated and on `--from-db`; refused when the source is a cluster member.
fn open_source(a: &ImportArgs) -> Result<Conn> {
    let mut c = Conn::open_for(&a.from, OP_TIMEOUT)?;
    c.max_len = MAX_PAYLOAD;
    match (&a.from_user, &a.from_pass) {
        (Some(u), Some(p)) => {
            expect_ok(c.cmd(&["AUTH", u, p])?, "AUTH", &a.from)?;
        }
        (None, Some(p)) => {
            expect_ok(c.cmd(&["AUTH", p])?, "AUTH", &a.from)?;
        }
        (Some(_), None) => bail!("--from-user needs --from-pass"),
        (None, None) => {}
    }
    if let Some(info) = expect_ok(c.cmd(&["INFO", "cluster"])?, "INFO cluster", &a.from)?.text() {
        if info.lines().any(|l| l.trim() == "cluster_enabled:1") {
            bail!(
                "{} is a cluster member: import copies a standalone server's keys (move slots between groups with \
                 `shaledb cluster reshard`)",
                a.from
            );
        }
    }
    if a.from_db != 0 {
        expect_ok(c.cmd(&["SELECT", &a.from_db.to_string()])?, "SELECT", &a.from)?;
    }
    Ok(c)
}

/// SCAN's reply: the next cursor and the keys.
fn scan_reply(r: Reply) -> Option<(Vec<u8>, Vec<Vec<u8>>)> {
    let Reply::Array(Some(v)) = r else { return None };
    let [Reply::Bulk(Some(next)), Reply::Array(Some(keys))] = v.as_slice() else { return None };
    let keys: Option<Vec<Vec<u8>>> =
        keys.iter().map(|k| if let Reply::Bulk(Some(k)) = k { Some(k.clone()) } else { None }).collect();
    Some((next.clone(), keys?))
}

/// DUMP and PEXPIRETIME of `keys`, pipelined; keys gone meanwhile are counted in `counts.gone`.
fn read_items(src: &mut Conn, from: &str, keys: &[Vec<u8>], counts: &mut Counts) -> Result<Vec<Item>> {
    let cmds: Vec<Vec<&[u8]>> =
        keys.iter().flat_map(|k| [vec![&b"DUMP"[..], k.as_slice()], vec![&b"PEXPIRETIME"[..], k.as_slice()]]).collect();
    let replies = src.pipeline(&cmds)?;
    let mut out = Vec::with_capacity(keys.len());
    for (k, pair) in keys.iter().zip(replies.chunks(2)) {
        let name = || String::from_utf8_lossy(k).into_owned();
        match pair {
            [Reply::Bulk(None), _] | [_, Reply::Int(-2)] => counts.gone += 1,
            [Reply::Bulk(Some(p)), Reply::Int(t)] if *t == -1 || *t > 0 => {
                out.push(Item { key: k.clone(), expire_at: (*t).max(0), payload: p.clone() })
            }
            [Reply::Error(e), _] | [_, Reply::Error(e)] => bail!("{from}: reading key '{}': {e}", name()),
            other => bail!("{from}: DUMP/PEXPIRETIME of '{}' gave {other:?}", name()),
        }
    }
    Ok(out)
}

/// Sends `items` to the groups owning their slots, in pipelines.
fn copy_items(coord: &mut Coord, items: Vec<Item>, replace: bool, counts: &mut Counts) -> Result<()> {
    let mut by_group: BTreeMap<u64, Vec<Item>> = BTreeMap::new();
    for it in items {
        let slot = u32::from(shaledb_server::cluster::key_slot(&it.key));
        let gid = coord.map.owner(slot).ok_or_else(|| anyhow!("the cluster map gives slot {slot} to no group"))?;
        by_group.entry(gid).or_default().push(it);
    }
    for (gid, items) in by_group {
        let mut start = 0;
        while start < items.len() {
            let (mut end, mut bytes) = (start, 0usize);
            while end < items.len() && end - start < PIPELINE_KEYS && (end == start || bytes < PIPELINE_BYTES) {
                bytes += items[end].payload.len();
                end += 1;
            }
            restore_all(coord, gid, &items[start..end], replace)?;
            counts.copied += (end - start) as u64;
            counts.bytes += bytes as u64;
            start = end;
        }
    }
    Ok(())
}

/// RESTOREs `items` in group `gid`, pipelined, until each is acknowledged: retryable answers are sent again
/// (to the leader a `-MOVED` names) for at most the run's timeout.
fn restore_all(coord: &mut Coord, gid: u64, items: &[Item], replace: bool) -> Result<()> {
    let deadline = Instant::now() + coord.timeout;
    let expiries: Vec<String> = items.iter().map(|i| i.expire_at.to_string()).collect();
    // Indexes not acknowledged yet, and whether each was sent before (its reply may have been lost).
    let mut pending: Vec<usize> = (0..items.len()).collect();
    let mut sent_before = vec![false; items.len()];
    let mut last = String::new();
    let members: Vec<String> = coord.map.group(gid)?.nodes.iter().map(|(_, a)| client_addr(a).to_string()).collect();
    if members.is_empty() {
        bail!("the map lists no node of group {gid}");
    }
    let mut turn = 0usize;
    while !pending.is_empty() {
        if Instant::now() >= deadline {
            bail!("group {gid}: {} keys not restored within {:?} (last: {last})", pending.len(), coord.timeout);
        }
        let addr = coord.leaders.get(&gid).cloned().unwrap_or_else(|| {
            turn += 1;
            members[(turn - 1) % members.len()].clone()
        });
        let cmds: Vec<Vec<&[u8]>> = pending
            .iter()
            .map(|&i| {
                let mut c: Vec<&[u8]> =
                    vec![b"RESTORE", &items[i].key, expiries[i].as_bytes(), &items[i].payload, b"ABSTTL"];
                if replace {
                    c.push(b"REPLACE");
                }
                c
            })
            .collect();
        let replies = Conn::open_for(&addr, OP_TIMEOUT).and_then(|mut c| {
            c.max_len = MAX_PAYLOAD;
            c.pipeline(&cmds)
        });
        let replies = match replies {
            Ok(r) => r,
            Err(e) => {
                // Some may have been applied: a retry of those finds them (BUSYKEY), checked below.
                last = format!("{e:#}");
                coord.leaders.remove(&gid);
                for &i in &pending {
                    sent_before[i] = true;
                }
                std::thread::sleep(Duration::from_millis(100));
                continue;
            }
        };
        let mut again = Vec::new();
        let mut moved_to = None;
        for (&i, r) in pending.iter().zip(replies) {
            match r {
                Reply::Simple(_) => {}
                Reply::Error(e) if e.starts_with("BUSYKEY") && !replace => {
                    if !(sent_before[i] && same_in_cluster(&addr, &items[i])?) {
                        bail!(
                            "key '{}' exists in the cluster already: rerun with --replace to overwrite it (keys before \
                             it are copied; a rerun copies them again)",
                            String::from_utf8_lossy(&items[i].key)
                        );
                    }
                }
                Reply::Error(e) if retryable(&e) => {
                    if let Some(to) = e.strip_prefix("MOVED ").and_then(|m| m.split_whitespace().nth(1)) {
                        moved_to = Some(to.to_string());
                    }
                    last = format!("{addr}: {e}");
                    sent_before[i] = true;
                    again.push(i);
                }
                Reply::Error(e) => {
                    bail!("group {gid} ({addr}): RESTORE '{}': {e}", String::from_utf8_lossy(&items[i].key))
                }
                other => bail!("group {gid} ({addr}): RESTORE answered {other:?}"),
            }
        }
        match moved_to {
            Some(to) if to != addr => {
                coord.leaders.insert(gid, to);
            }
            _ if again.is_empty() => {
                coord.leaders.insert(gid, addr);
            }
            _ => {
                coord.leaders.remove(&gid);
                std::thread::sleep(Duration::from_millis(100));
            }
        }
        pending = again;
    }
    Ok(())
}

/// Whether the cluster holds `item` exactly as the source gave it (a RESTORE whose reply was lost).
fn same_in_cluster(addr: &str, item: &Item) -> Result<bool> {
    let mut c = Conn::open_for(addr, OP_TIMEOUT)?;
    c.max_len = MAX_PAYLOAD;
    Ok(matches!(c.cmd_bin(&[b"DUMP", &item.key])?, Reply::Bulk(Some(p)) if p == item.payload))
}

/// The source's other databases that hold keys, from `INFO keyspace` (`dbN:keys=K,...` lines).
fn other_databases(src: &mut Conn, copied: u8) -> Vec<(u8, u64)> {
    let Ok(Some(info)) = src.cmd(&["INFO", "keyspace"]).map(|r| r.text()) else { return Vec::new() };
    info.lines()
        .filter_map(|l| {
            let (db, rest) = l.trim().strip_prefix("db")?.split_once(':')?;
            let db: u8 = db.parse().ok()?;
            let keys: u64 = rest.split(',').find_map(|f| f.strip_prefix("keys="))?.parse().ok()?;
            (db != copied && keys > 0).then_some((db, keys))
        })
        .collect()
}
