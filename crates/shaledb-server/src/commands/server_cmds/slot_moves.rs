//! Moving a slot between replica groups (issue 44): the cluster map's changes, the slot's keys out of one
//! group and into another, and the keys a group no longer owns dropped. `shaledb cluster reshard` drives a
//! move with these commands (docs/cluster.md has the protocol and why each step is safe):
//!
//! - `CLUSTER SHALEDB-SETMAP <group> <map>`: records a map (cluster/map.rs) in the group's log.
//! - `CLUSTER SHALEDB-EXPORT <slot> <after> <count> [<max-bytes>]`: on the source group's leader, while the map
//!   says the slot moves from it: up to `count` keys of the slot after key `after` ("" from the start), each
//!   with its absolute expiry (0: none) and its DUMP payload, stopping after the key that brings the keys and
//!   payloads to `max-bytes`; and the key to go on from ("" when done).
//! - `CLUSTER SHALEDB-IMPORT <slot> <first> [key expiry payload] ...`: on the target group's leader, while the
//!   map says the slot moves to it: `first` (1) removes what the group holds of the slot first, so a move run
//!   again starts clean; then each key is restored (RESTORE REPLACE ABSTTL). The slot's records reach the
//!   group as tables every member ingests when they are large enough (store/tables.rs), else in the batch.
//! - `CLUSTER SHALEDB-DROPSLOT <slot>`: on a group that does not own the slot (and is not moving it): removes
//!   its keys of the slot, what is left behind after the slot moved away.
//! - `CLUSTER SHALEDB-EXPORT-DIRTY <slot>`: on the source group's leader once the slot is frozen (`moving`)
//!   after a copy (`copying`): the keys written to the slot since the copy began (cluster/copy.rs), each as
//!   EXPORT gives it, or with expiry `-1` and an empty payload when it is gone; an error starting `NOTRACKED`
//!   when this member did not keep that record (the coordinator then copies the whole slot).
//!
//! EXPORT and IMPORT serve a slot being copied (`copying`: the source still serves writes) as well as one
//! being moved; an import triple with expiry `-1` deletes its key.
//!
//! Each change of state runs in the commit step as an internal write command (the `*_JOB` specs below, not in
//! the command table), so it is ordered with every client write: the writes the commit step executed before
//! a map are in the log before it, and every write after it is checked against it (commit.rs). That is what
//! makes the freeze exact: once the map with `moving <slot> <me> <to>` is acknowledged, no write to the slot
//! can be applied here after the export reads it.

use crate::cluster::map::{SlotMap, Stored, MAP_KEY};
use crate::cluster::{key_slot, Cluster, SLOTS};
use crate::commands::Spec;
use crate::keys;
use crate::resp::{Args, Reply};
use crate::server::Shared;
use crate::store::{ReadCtx, WriteCtx};
use bytes::Bytes;
use std::sync::Arc;

/// `shaledb-setmap <group> <map>`.
pub static SETMAP_JOB: Spec =
    cmd! { "shaledb-setmap", 3, 0, [0, 0, 0], Write(setmap_in_commit), "Records the cluster map (internal)." };
/// `shaledb-import <slot> <first> [key expiry payload] ...`.
pub static IMPORT_JOB: Spec = cmd! { "shaledb-import", -3, 0, [0, 0, 0], Write(import_in_commit), "Restores keys of a slot moving here (internal)." };
/// `shaledb-dropslot <slot>`.
pub static DROPSLOT_JOB: Spec = cmd! { "shaledb-dropslot", 2, 0, [0, 0, 0], Write(dropslot_in_commit), "Removes the keys of a slot owned elsewhere (internal)." };

/// Most keys one `SHALEDB-EXPORT` answers with.
const MAX_EXPORT: usize = 10_000;

fn parse_slot(a: &[u8]) -> Result<u16, Reply> {
    match std::str::from_utf8(a).ok().and_then(|s| s.parse::<u16>().ok()) {
        Some(s) if s < SLOTS => Ok(s),
        _ => Err(Reply::err(format!("'{}' is not a slot (0-{})", String::from_utf8_lossy(a), SLOTS - 1))),
    }
}

/// The map this group holds, as the commit step sees it (its group's earlier writes included).
fn stored_map(ctx: &mut WriteCtx<'_>) -> Result<Option<Stored>, Reply> {
    match ctx.run_read(|v| v.get_raw(MAP_KEY)) {
        Ok(None) => Ok(None),
        Ok(Some(v)) => Stored::decode(&v).map(Some).map_err(|e| Reply::err(format!("the stored cluster map: {e}"))),
        Err(e) => Err(Reply::err(format!("reading the cluster map failed: {e}"))),
    }
}

fn setmap_in_commit(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    let gid = match std::str::from_utf8(&args[1]).ok().and_then(|g| g.parse::<u64>().ok()) {
        Some(g) if g > 0 => g,
        _ => return Reply::err(format!("'{}' is not a group id (a number from 1)", String::from_utf8_lossy(&args[1]))),
    };
    let Ok(text) = std::str::from_utf8(&args[2]) else { return Reply::err("the map is not text") };
    let map = match SlotMap::parse(text) {
        Ok(m) => m,
        Err(e) => return Reply::err(e),
    };
    if map.group(gid).is_none() {
        return Reply::err(format!("the map names no group {gid}"));
    }
    let new = Stored { me: gid, map };
    match tri!(stored_map(ctx)) {
        Some(old) if old == new => return Reply::Ok,
        Some(old) if old.me != gid => {
            return Reply::err(format!("this group is group {} of the map it holds, not {gid}", old.me))
        }
        Some(old) if old.map.epoch >= new.map.epoch => {
            return Reply::err(format!(
                "the group holds a map of epoch {}: a different map needs a higher epoch than that (it has {})",
                old.map.epoch, new.map.epoch
            ))
        }
        _ => {}
    }
    ctx.put_raw(MAP_KEY, &new.encode());
    // The slots this group starts copying out: from here on in the commit order, the keys written there are
    // recorded (cluster/copy.rs).
    if let Some(t) = &ctx.copy_tracker {
        t.start(new.map.copies.iter().filter(|c| c.1 == gid).map(|c| c.0));
    }
    Reply::Ok
}

/// The live keys of database 0 in `slot`, as `view` sees them, from just after `after`, at most `limit`: a
/// range read of the slot's meta keys (a cluster member keeps its keys slot first, keys.rs).
fn slot_keys(view: &ReadCtx<'_>, slot: u16, after: &[u8], limit: usize) -> Result<Vec<Bytes>, Reply> {
    let ks = view.keyspace;
    let (first, upper) = ks.slot_meta_range(0, slot);
    let lower = if after.is_empty() {
        first
    } else {
        let mut k = ks.meta_key(0, after);
        k.push(0);
        k.max(first)
    };
    let mut out = Vec::new();
    for item in view.scan(&lower, &upper, false) {
        let (k, v) = item.map_err(|e| Reply::err(format!("read failed: {e}")))?;
        let Some(user) = ks.user_key(0, &k) else { continue };
        if key_slot(user) == slot && keys::decode_meta(&v).is_ok_and(|m| !m.expired(view.now_ms)) {
            out.push(Bytes::copy_from_slice(user));
            if out.len() == limit {
                break;
            }
        }
    }
    Ok(out)
}

/// Deletes every key of database 0 in `slot` (in the commit step's batch).
fn drop_slot(ctx: &mut WriteCtx<'_>, slot: u16) -> Result<u64, Reply> {
    let found = ctx.run_read(|v| slot_keys(v, slot, b"", usize::MAX))?;
    let mut n = 0;
    for k in found {
        if let Some((_, stored)) = ctx.get_meta_in(0, &k).map_err(|e| Reply::err(format!("read failed: {e}")))? {
            ctx.delete_stored(0, &k, &stored);
            n += 1;
        }
    }
    Ok(n)
}

fn import_in_commit(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    let slot = tri!(parse_slot(&args[1]));
    let Some(st) = tri!(stored_map(ctx)) else { return Reply::err("this group holds no cluster map") };
    if st.map.transfer(slot).map(|m| m.1) != Some(st.me) {
        return Reply::err(format!("slot {slot} is not moving to this group (group {}) by its map", st.me));
    }
    if !(args.len() - 3).is_multiple_of(3) {
        return Reply::err("SHALEDB-IMPORT takes <slot> <first> then triples of <key> <expiry> <payload>");
    }
    for t in args[3..].chunks(3) {
        if key_slot(&t[0]) != slot {
            return Reply::err(format!("key '{}' is not in slot {slot}", String::from_utf8_lossy(&t[0])));
        }
    }
    if &args[2][..] == b"1" {
        tri!(drop_slot(ctx, slot));
    }
    // The slot's records go to the group as tables, not through every member's WAL (store/tables.rs).
    if !ctx.table_slots.contains(&slot) {
        ctx.table_slots.push(slot);
    }
    for t in args[3..].chunks(3) {
        if &t[1][..] == b"-1" {
            // Gone from the source since the copy read it.
            if let Some((_, stored)) =
                tri!(ctx.get_meta_in(0, &t[0]).map_err(|e| Reply::err(format!("read failed: {e}"))))
            {
                ctx.delete_stored(0, &t[0], &stored);
            }
            continue;
        }
        let restore: Args = vec![
            Bytes::from_static(b"restore"),
            t[0].clone(),
            t[1].clone(),
            t[2].clone(),
            Bytes::from_static(b"REPLACE"),
            Bytes::from_static(b"ABSTTL"),
        ];
        let r = crate::commands::dump::restore(ctx, &restore);
        if matches!(r, Reply::Error(_)) {
            return r;
        }
    }
    Reply::Int(((args.len() - 3) / 3) as i64)
}

fn dropslot_in_commit(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    let slot = tri!(parse_slot(&args[1]));
    let Some(st) = tri!(stored_map(ctx)) else { return Reply::err("this group holds no cluster map") };
    if st.owns(slot) || st.map.transfer(slot).is_some() {
        return Reply::err(format!("slot {slot} is this group's or is moving: its keys stay"));
    }
    Reply::Int(tri!(drop_slot(ctx, slot)) as i64)
}

/// Runs one internal job in the commit step and waits for its reply.
async fn run_job(shared: &Shared, spec: &'static Spec, args: Args) -> Reply {
    let (tx, rx) = tokio::sync::oneshot::channel();
    let job = crate::commit::Job { db_index: 0, cmds: vec![(spec, args)], reply: tx, block: None, client: 0 };
    if !shared.store.submit(job) {
        return Reply::err("the server is shutting down");
    }
    match rx.await {
        Ok(mut r) if !r.is_empty() => r.swap_remove(0),
        _ => Reply::err("the commit step did not answer"),
    }
}

/// Whether `args[1]` names one of the commands of this file that a connection runs (not from MULTI or a
/// script: they wait for the commit step).
pub fn is_slot_move(args: &Args) -> bool {
    args.len() >= 2
        && [&b"shaledb-setmap"[..], b"shaledb-export", b"shaledb-export-dirty", b"shaledb-import", b"shaledb-dropslot"]
            .iter()
            .any(|n| args[1].eq_ignore_ascii_case(n))
}

/// `CLUSTER SHALEDB-SETMAP|EXPORT|IMPORT|DROPSLOT ...` on a cluster member: on the leader, else `-MOVED 0
/// <leader>`.
pub async fn run(shared: &Shared, c: &Arc<Cluster>, args: &Args) -> Reply {
    let sub = String::from_utf8_lossy(&args[1]).to_ascii_lowercase();
    let (want, usage) = match sub.as_str() {
        "shaledb-setmap" => (Some(4), "<group-id> <map>"),
        "shaledb-export" => (None, "<slot> <after-key> <count> [<max-bytes>]"),
        "shaledb-import" => (None, "<slot> <first: 0|1> [<key> <absolute-expiry-ms> <payload>] ..."),
        "shaledb-export-dirty" => (Some(3), "<slot>"),
        _ => (Some(3), "<slot>"),
    };
    let arity_ok = match want {
        Some(n) => args.len() == n,
        None if sub == "shaledb-export" => matches!(args.len(), 5 | 6),
        None => args.len() >= 4 && (args.len() - 4).is_multiple_of(3),
    };
    let name = sub.to_ascii_uppercase();
    if !arity_ok {
        return Reply::err(format!("wrong number of arguments for CLUSTER {name}: CLUSTER {name} {usage}"));
    }
    if !c.is_leader() {
        return c.to_leader();
    }
    if sub == "shaledb-setmap" {
        if let Err(e) = check_members(c, &args[2], &args[3]) {
            return Reply::err(format!("{e} (CLUSTER {name})"));
        }
    }
    let reply = match sub.as_str() {
        "shaledb-setmap" => {
            run_job(shared, &SETMAP_JOB, vec![Bytes::from_static(b"shaledb-setmap"), args[2].clone(), args[3].clone()])
                .await
        }
        "shaledb-import" => {
            if !matches!(&args[3][..], b"0" | b"1") {
                return Reply::err("SHALEDB-IMPORT's <first> is 0 or 1");
            }
            let mut a: Args = vec![Bytes::from_static(b"shaledb-import")];
            a.extend(args[2..].iter().cloned());
            run_job(shared, &IMPORT_JOB, a).await
        }
        "shaledb-dropslot" => {
            run_job(shared, &DROPSLOT_JOB, vec![Bytes::from_static(b"shaledb-dropslot"), args[2].clone()]).await
        }
        "shaledb-export-dirty" => return export_dirty(c, args).await,
        _ => return export(c, args).await,
    };
    // The map may have changed: this member routes by it from its next command.
    c.reload_map();
    match reply {
        Reply::Error(e) => Reply::Error(format!("{e} (CLUSTER {name})")),
        r => r,
    }
}

/// A map sent to this group must say it is this group: the group it is given as lists at least one of the
/// group's members, and no member of the group is listed under another group (else two groups could both
/// think they own the same slots).
fn check_members(c: &Cluster, gid: &[u8], text: &[u8]) -> Result<(), String> {
    let (Some(gid), Ok(text)) =
        (std::str::from_utf8(gid).ok().and_then(|g| g.parse::<u64>().ok()), std::str::from_utf8(text))
    else {
        return Ok(()); // The job refuses it with the reason.
    };
    let Ok(map) = SlotMap::parse(text) else { return Ok(()) };
    let Some(mine) = map.group(gid) else { return Ok(()) };
    let members: Vec<shaledb_raft::NodeId> =
        c.metrics().membership_config.membership().nodes().map(|(id, _)| *id).collect();
    for g in map.groups.iter().filter(|g| g.id != gid) {
        if let Some((id, _)) = g.nodes.iter().find(|(id, _)| members.contains(id)) {
            return Err(format!(
                "node {} is a member of this group but the map lists it in group {}",
                crate::cluster::node_name(*id),
                g.id
            ));
        }
    }
    if !mine.nodes.iter().any(|(id, _)| members.contains(id)) {
        return Err(format!("the map's group {gid} lists none of this group's members"));
    }
    Ok(())
}

/// `CLUSTER SHALEDB-EXPORT <slot> <after> <count>`: see the file's comment.
async fn export(c: &Arc<Cluster>, args: &Args) -> Reply {
    let slot = tri!(parse_slot(&args[2]));
    let count = match std::str::from_utf8(&args[4]).ok().and_then(|s| s.parse::<usize>().ok()) {
        Some(n) if (1..=MAX_EXPORT).contains(&n) => n,
        _ => return Reply::err(format!("the count is a number from 1 to {MAX_EXPORT}")),
    };
    let max_bytes = match args.get(5).map(|a| std::str::from_utf8(a).ok().and_then(|s| s.parse::<usize>().ok())) {
        None => usize::MAX,
        Some(Some(n)) if n >= 1 => n,
        Some(_) => return Reply::err("the byte budget is a number of at least 1"),
    };
    // Everything this group committed before is applied here before the keys are read.
    if let Err(e) = c.read_barrier().await {
        return Reply::err(format!("confirming leadership before the export failed: {e}"));
    }
    c.reload_map();
    let Some(st) = c.map() else { return Reply::err("this group holds no cluster map") };
    if st.map.transfer(slot).map(|m| m.0) != Some(st.me) {
        return Reply::err(format!("slot {slot} is not moving from this group (group {}) by its map", st.me));
    }
    let db = c.db();
    let view = ReadCtx::new(&db, keys::Keyspace::Slots, 0, crate::store::now_ms()).pinned();
    let found = tri!(slot_keys(&view, slot, &args[3], count));
    let (items, used) = tri!(export_items(&view, &found, false, max_bytes));
    // Stopped by the byte budget, or by the count: go on after the last key looked at.
    let next = if used < found.len() || found.len() == count {
        found[..used].last().cloned().unwrap_or_default()
    } else {
        Bytes::new()
    };
    Reply::Array(vec![Reply::Bulk(next), Reply::Array(items)])
}

/// `CLUSTER SHALEDB-EXPORT-DIRTY <slot>`: see the file's comment.
async fn export_dirty(c: &Arc<Cluster>, args: &Args) -> Reply {
    let slot = tri!(parse_slot(&args[2]));
    // Everything committed before (the freeze included) is applied here before the keys are read.
    if let Err(e) = c.read_barrier().await {
        return Reply::err(format!("confirming leadership before the export failed: {e}"));
    }
    c.reload_map();
    let Some(st) = c.map() else { return Reply::err("this group holds no cluster map") };
    if st.map.moving(slot).map(|m| m.0) != Some(st.me) {
        return Reply::err(format!("slot {slot} is not frozen for a move from this group (group {})", st.me));
    }
    let dirty = match c.copies.dirty(slot, c.leading_term()) {
        Ok(d) => d,
        Err(why) => return Reply::error(format!("NOTRACKED {why}")),
    };
    let db = c.db();
    let view = ReadCtx::new(&db, keys::Keyspace::Slots, 0, crate::store::now_ms()).pinned();
    // A member record written names its collection's version: its key is the one the registry names.
    let mut found: std::collections::BTreeSet<Bytes> = dirty.keys.into_iter().collect();
    for v in dirty.versions {
        match view.get_raw(&keys::registry_key(0, v)) {
            Ok(Some(k)) if key_slot(&k) == slot => {
                found.insert(Bytes::from(k));
            }
            Ok(_) => {}
            Err(e) => return Reply::err(format!("read failed: {e}")),
        }
    }
    let found: Vec<Bytes> = found.into_iter().collect();
    Reply::Array(tri!(export_items(&view, &found, true, usize::MAX)).0)
}

/// `key expiry payload` for each of `found` that is live; with `gone`, `key -1 ""` for each that is not. Stops
/// after the key whose payload brings the total to `max_bytes` (at least one key is looked at): the items, and
/// how many keys of `found` were looked at.
fn export_items(
    view: &ReadCtx<'_>,
    found: &[Bytes],
    gone: bool,
    max_bytes: usize,
) -> Result<(Vec<Reply>, usize), Reply> {
    let mut items = Vec::with_capacity(found.len() * 3);
    let mut bytes = 0usize;
    let mut used = 0;
    let push_gone = |items: &mut Vec<Reply>, k: &Bytes| {
        if gone {
            items.extend([Reply::Bulk(k.clone()), Reply::Bulk(Bytes::from_static(b"-1")), Reply::Bulk(Bytes::new())]);
        }
    };
    for k in found {
        if bytes >= max_bytes {
            break;
        }
        used += 1;
        let meta = match view.peek_meta_quietly(k) {
            Ok(Some((m, _))) if !m.expired(view.now_ms) => m,
            Ok(_) => {
                push_gone(&mut items, k);
                continue;
            }
            Err(e) => return Err(Reply::err(format!("read failed: {e}"))),
        };
        let value = match crate::types::rdb::read(view, k) {
            Ok(Some(v)) => v,
            Ok(None) => {
                push_gone(&mut items, k);
                continue;
            }
            Err(e) => return Err(Reply::err(format!("reading key '{}' failed: {e}", String::from_utf8_lossy(k)))),
        };
        items.push(Reply::Bulk(k.clone()));
        items.push(Reply::Bulk(Bytes::from(meta.expire_at_ms.unwrap_or(0).to_string())));
        let payload = crate::types::rdb::encode(&value);
        bytes = bytes.saturating_add(k.len() + payload.len());
        items.push(Reply::Bulk(Bytes::from(payload)));
    }
    Ok((items, used))
}
