//! SWAPDB index1 index2: the two databases trade their contents.
//!
//! Every engine key of a database starts with its index (meta keys, member records and the registry:
//! src/keys.rs), so a swap rewrites every record of both databases under the other index: O(records of the
//! two databases) reads and writes, and as much memory in the commit step, since the whole swap is one
//! command's writes and so reaches the engine in its group's single batch (all or nothing after a crash,
//! acknowledged after the group's fsync). Redis swaps two pointers; an O(1) swap here would need a
//! database-to-prefix indirection read by every command (not built).
//!
//! What Redis does around the swap, done here too:
//! - a key that has expired is not carried over (it was already absent): it is deleted, and its version
//!   goes to the collector. So WATCH sees what Redis's SWAPDB shows: a watched key is touched when a live
//!   value appears or goes, not when a stale one is replaced by nothing or by another stale one;
//! - clients blocked on a key of either database are served if the key now holds what they wait for
//!   (every list, sorted set and stream of both databases is signalled once the group is durable; a
//!   waiter that finds nothing, e.g. an expired key, stays blocked).

use crate::keys::{self, Type, DATABASES};
use crate::resp::{Args, Reply};
use crate::store::WriteCtx;

/// Redis reads SWAPDB's indexes as C ints, each with its own error text.
fn index(a: &[u8], what: &str) -> Result<i64, Reply> {
    match crate::resp::parse_i64(a) {
        Some(n) if i32::try_from(n).is_ok() => Ok(n),
        _ => Err(Reply::err(format!("invalid {what} DB index"))),
    }
}

/// An engine record: `(engine key, value)`.
type Record = (Vec<u8>, Vec<u8>);

/// Every record of database `db` as this group sees it, in key order.
fn records(ctx: &WriteCtx<'_>, db: u8) -> Result<Vec<Record>, Reply> {
    let view = ctx.view();
    let r: Result<Vec<_>, _> = view.scan(&[db], &[db + 1], false).collect();
    r.map_err(Reply::from)
}

pub(super) fn swapdb(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    let a = tri!(index(&args[1], "first"));
    let b = tri!(index(&args[2], "second"));
    let range = 0..i64::from(DATABASES);
    if !range.contains(&a) || !range.contains(&b) {
        return Reply::err("DB index is out of range");
    }
    let (a, b) = (a as u8, b as u8);
    if a == b {
        return Reply::Ok;
    }
    let from_a = tri!(records(ctx, a));
    let from_b = tri!(records(ctx, b));
    // Every meta value is read before the first write: a corrupt one refuses the swap with nothing changed.
    let mut moves = Vec::with_capacity(from_a.len() + from_b.len());
    let mut gone = Vec::new();
    // `(db, user key)` of every list, sorted set and stream moved, for blocked clients.
    let mut poppable = Vec::new();
    for (recs, to) in [(&from_a, b), (&from_b, a)] {
        for (k, v) in recs {
            if k.get(1) == Some(&keys::KIND_META) {
                let Ok(m) = keys::decode_meta(v) else {
                    return Reply::err(format!(
                        "corrupt value of key {:?}",
                        String::from_utf8_lossy(ctx.keyspace.user_of_pos(&k[2..]))
                    ));
                };
                if m.expired(ctx.now_ms) {
                    // Absent already: not carried over; its records (moved with the rest) are dead.
                    if let Ok(Some(c)) = keys::Coll::decode(v) {
                        gone.push((to, c.version));
                    }
                    continue;
                }
                if matches!(m.typ, Type::List | Type::ZSet | Type::Stream) {
                    poppable.push((to, ctx.keyspace.user_of_pos(&k[2..]).to_vec()));
                }
            }
            moves.push((to, k, v));
        }
    }
    // What this group already noted under one index now lives under the other.
    let other = |db: u8| {
        if db == a {
            b
        } else if db == b {
            a
        } else {
            db
        }
    };
    for d in &mut ctx.dropped {
        d.0 = other(d.0);
    }
    for s in &mut ctx.signals {
        s.0 = other(s.0);
    }
    ctx.dropped.extend(gone);
    for (k, _) in from_a.iter().chain(&from_b) {
        ctx.delete_raw(k);
    }
    let mut key = Vec::new();
    for (to, k, v) in moves {
        key.clear();
        key.push(to);
        key.extend_from_slice(&k[1..]);
        ctx.put_raw(&key, v);
    }
    // Dead ranges are keyed by database: start afresh (they only speed up pops).
    ctx.forget_dead_ranges();
    let saved = ctx.db_index;
    for (db, key) in poppable {
        ctx.db_index = db;
        ctx.signal_key(&key);
    }
    ctx.db_index = saved;
    Reply::Ok
}
