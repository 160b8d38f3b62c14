//! Keyspace commands: DEL, UNLINK, EXISTS, TYPE, OBJECT, RENAME, RENAMENX, MOVE, COPY, EXPIRE, PEXPIRE,
//! EXPIREAT, PEXPIREAT, TTL, PTTL, PERSIST, EXPIRETIME, PEXPIRETIME, SCAN, KEYS, RANDOMKEY, DBSIZE, FLUSHDB,
//! FLUSHALL, SWAPDB, and the ordered range read `SHALEDB.RANGE` (a ShaleDB extension;
//! docs/format/server-keys.md).
//!
//! On collections (src/keys.rs has the layout): DEL, UNLINK and EXPIRE are one write of the meta key (the
//! version's members go to the collector, gc.rs); RENAME moves the meta value and rewrites the version's
//! registry record to the new name; MOVE and COPY copy the member records under a new version (O(members),
//! in bounded chunks), since members are keyed by database and version.
//!
//! Files by role: this one has the command table, DEL/EXISTS/TYPE/RENAME/MOVE/COPY, OBJECT and
//! FLUSHDB/FLUSHALL; `expiry.rs` the expiry commands, `scan.rs` SCAN/KEYS/RANDOMKEY/DBSIZE, `swap.rs`
//! SWAPDB, `range.rs` SHALEDB.RANGE.

use super::{arg_i64, Spec};
use crate::keys::{self, Coll, Meta, Type, DATABASES};
use crate::resp::{Args, Reply};
use crate::store::{ReadCtx, WriteCtx};
use shaledb::ReadOptions;

mod expiry;
mod range;
mod scan;
mod swap;

use expiry::{expire, expireat, expiretime, persist, pexpire, pexpireat, pexpiretime, pttl, ttl};
use range::range;
pub use range::{parse_bound, Bound, RANGE_DEFAULT_COUNT, RANGE_MAX_COUNT, RANGE_MAX_REPLY_BYTES};
pub use scan::{count_keys, glob_match, literal_prefix, Cursors, MAX_CURSORS, MAX_CURSOR_BYTES};
use scan::{dbsize, keys_cmd, randomkey, scan};
use swap::swapdb;

pub static COMMANDS: &[Spec] = &[
    cmd! { "del", -2, WRITE, [1, -1, 1], Write(del), "Deletes one or more keys." },
    cmd! { "unlink", -2, WRITE | FAST, [1, -1, 1], Write(del), "Asynchronously deletes one or more keys." },
    cmd! { "exists", -2, READONLY | FAST, [1, -1, 1], Read(exists), "Determines whether one or more keys exist." },
    cmd! { "touch", -2, READONLY | FAST, [1, -1, 1], Read(touch), "Returns the number of existing keys out of those specified after updating the time they were last accessed." },
    cmd! { "type", 2, READONLY | FAST, [1, 1, 1], Read(type_cmd), "Determines the type of value stored at a key." },
    cmd! { "rename", 3, WRITE, [1, 2, 1], Write(rename), "Renames a key and overwrites the destination." },
    cmd! { "renamenx", 3, WRITE | FAST, [1, 2, 1], Write(renamenx), "Renames a key only when the target key name doesn't exist." },
    cmd! { "move", 3, WRITE | FAST, [1, 1, 1], Write(move_cmd), "Moves a key to another database." },
    cmd! { "copy", -3, WRITE | DENYOOM, [1, 2, 1], Write(copy), "Copies the value of a key to a new key." },
    cmd! { "expire", -3, WRITE | FAST, [1, 1, 1], Write(expire), "Sets the expiration time of a key in seconds." },
    cmd! { "pexpire", -3, WRITE | FAST, [1, 1, 1], Write(pexpire), "Sets the expiration time of a key in milliseconds." },
    cmd! { "expireat", -3, WRITE | FAST, [1, 1, 1], Write(expireat), "Sets the expiration time of a key to a Unix timestamp." },
    cmd! { "pexpireat", -3, WRITE | FAST, [1, 1, 1], Write(pexpireat), "Sets the expiration time of a key to a Unix milliseconds timestamp." },
    cmd! { "ttl", 2, READONLY | FAST, [1, 1, 1], Read(ttl), "Returns the expiration time in seconds of a key." },
    cmd! { "pttl", 2, READONLY | FAST, [1, 1, 1], Read(pttl), "Returns the expiration time in milliseconds of a key." },
    cmd! { "expiretime", 2, READONLY | FAST, [1, 1, 1], Read(expiretime), "Returns the expiration time of a key as a Unix timestamp." },
    cmd! { "pexpiretime", 2, READONLY | FAST, [1, 1, 1], Read(pexpiretime), "Returns the expiration time of a key as a Unix milliseconds timestamp." },
    cmd! { "object", -2, READONLY, [0, 0, 0], Read(object), "A container for object introspection commands." },
    cmd! { "persist", 2, WRITE | FAST, [1, 1, 1], Write(persist), "Removes the expiration time of a key." },
    cmd! { "scan", -2, READONLY, [0, 0, 0], Read(scan), "Iterates over the key names in the database." },
    cmd! { "keys", 2, READONLY, [0, 0, 0], Read(keys_cmd), "Returns all key names that match a pattern." },
    cmd! { "randomkey", 1, READONLY, [0, 0, 0], Read(randomkey), "Returns a random key name from the database." },
    cmd! { "dbsize", 1, READONLY | FAST, [0, 0, 0], Read(dbsize), "Returns the number of keys in the database." },
    cmd! { "flushdb", -1, WRITE, [0, 0, 0], Write(flushdb), "Removes all keys from the current database." },
    cmd! { "flushall", -1, WRITE, [0, 0, 0], Write(flushall), "Removes all keys from all databases." },
    cmd! { "swapdb", 3, WRITE | FAST, [0, 0, 0], Write(swapdb), "Swaps two Redis databases." },
    cmd! { "shaledb.range", -3, READONLY | EXTENSION, [1, 2, 1], Read(range), "ShaleDB: returns up to COUNT string keys (and values) in key order between two bounds, forward or REV." },
];

// ---------------------------------------------------------------------------------------------------------
// DEL, EXISTS, TYPE, RENAME, MOVE, COPY

fn del(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    let mut n = 0;
    for k in &args[1..] {
        if let Some((_, v)) = tri!(ctx.get_meta(k)) {
            // A collection is one write whatever its size: its members go to the collector (gc.rs).
            ctx.delete_stored(ctx.db_index, k, &v);
            ctx.notify(crate::notify::GENERIC, "del", k);
            n += 1;
        }
    }
    Reply::Int(n)
}

/// EXISTS: how many of the keys exist (a key named twice counts twice), without recording an access.
fn exists(ctx: &ReadCtx<'_>, args: &Args) -> Reply {
    let mut n = 0;
    for k in &args[1..] {
        n += tri!(ctx.peek_meta(k)).is_some() as i64;
    }
    Reply::Int(n)
}

/// TOUCH: as EXISTS, recording an access of each key that exists (`access.rs`).
fn touch(ctx: &ReadCtx<'_>, args: &Args) -> Reply {
    let mut n = 0;
    for k in &args[1..] {
        n += tri!(ctx.get_meta(k)).is_some() as i64;
    }
    Reply::Int(n)
}

fn type_cmd(ctx: &ReadCtx<'_>, args: &Args) -> Reply {
    match tri!(ctx.peek_meta(&args[1])) {
        Some((m, _)) => Reply::Simple(m.typ.name().into()),
        None => Reply::Simple("none".into()),
    }
}

/// The collection a stored meta value holds (`None` for a string).
fn coll_of(stored: &[u8]) -> Result<Option<Coll>, Reply> {
    Coll::decode(stored).map_err(Reply::err)
}

/// Most member records copied per pass of [`copy_members`] (bounds the memory of COPY and MOVE).
const COPY_CHUNK: usize = 4096;

/// Copies every member record of `src` (database `src_db`, all sub-kinds) to a new collection `dst_key`
/// of database `dst_db` under a fresh version (registry record included), and returns that collection
/// (same type, size, expiry and extra fields). The caller stores its meta value.
fn copy_members(ctx: &mut WriteCtx<'_>, src_db: u8, src: &Coll, dst_db: u8, dst_key: &[u8]) -> Result<Coll, Reply> {
    let saved = ctx.db_index;
    ctx.db_index = dst_db;
    let mut dst = ctx.create_coll(dst_key, src.typ);
    ctx.db_index = saved;
    dst.size = src.size;
    dst.expire_at_ms = src.expire_at_ms;
    dst.extra = src.extra.clone();
    let prefix = keys::version_prefix(src_db, src.version);
    let upper = keys::prefix_end(&prefix).unwrap_or_default();
    let dst_prefix = keys::version_prefix(dst_db, dst.version);
    let mut lower = prefix.to_vec();
    loop {
        let chunk: Vec<(Vec<u8>, Vec<u8>)> = {
            let view = ctx.view();
            let r: Result<Vec<_>, Reply> =
                view.scan(&lower, &upper, false).take(COPY_CHUNK).map(|r| r.map_err(Reply::from)).collect();
            r?
        };
        let Some((last, _)) = chunk.last() else { break };
        lower = last.clone();
        lower.push(0);
        let mut k = Vec::new();
        for (key, value) in &chunk {
            k.clear();
            k.extend_from_slice(&dst_prefix);
            k.extend_from_slice(&key[prefix.len()..]);
            ctx.put_raw(&k, value);
        }
        if chunk.len() < COPY_CHUNK {
            break;
        }
    }
    Ok(dst)
}

fn rename_generic(ctx: &mut WriteCtx<'_>, args: &Args, nx: bool) -> Reply {
    let (src, dst) = (&args[1], &args[2]);
    let Some((_, v)) = tri!(ctx.get_meta(src)) else { return Reply::err("no such key") };
    if src == dst {
        return if nx { Reply::Int(0) } else { Reply::Ok };
    }
    let coll = tri!(coll_of(&v));
    match tri!(ctx.get_meta(dst)) {
        Some(_) if nx => return Reply::Int(0),
        // The overwritten value: a collection's version goes to the collector.
        Some((_, old)) => ctx.delete_stored(ctx.db_index, dst, &old),
        None => {}
    }
    tri!(ctx.put_meta_in(ctx.db_index, dst, &v));
    ctx.delete_key(src);
    if let Some(c) = coll {
        // The members stay where they are (keyed by version); the registry names the new key, so the
        // collector keeps finding the version alive.
        let rk = keys::registry_key(ctx.db_index, c.version);
        ctx.put_raw(&rk, dst);
    }
    ctx.notify(crate::notify::GENERIC, "rename_from", src);
    ctx.notify(crate::notify::GENERIC, "rename_to", dst);
    if nx {
        Reply::Int(1)
    } else {
        Reply::Ok
    }
}

fn rename(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    rename_generic(ctx, args, false)
}

fn renamenx(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    rename_generic(ctx, args, true)
}

fn parse_db(a: &[u8]) -> Result<u8, Reply> {
    let n = arg_i64(a)?;
    if (0..DATABASES as i64).contains(&n) {
        Ok(n as u8)
    } else {
        Err(Reply::err("DB index is out of range"))
    }
}

fn move_cmd(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    let dst_db = tri!(parse_db(&args[2]));
    if dst_db == ctx.db_index {
        return Reply::err("source and destination objects are the same");
    }
    let Some((_, v)) = tri!(ctx.get_meta(&args[1])) else { return Reply::Int(0) };
    if tri!(ctx.get_meta_in(dst_db, &args[1])).is_some() {
        return Reply::Int(0);
    }
    tri!(put_copy(ctx, &v, dst_db, &args[1]));
    ctx.delete_stored(ctx.db_index, &args[1], &v);
    ctx.notify(crate::notify::GENERIC, "move_from", &args[1]);
    ctx.notify_in(dst_db, crate::notify::GENERIC, "move_to", &args[1]);
    Reply::Int(1)
}

fn copy(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    let (src, dst) = (&args[1], &args[2]);
    let mut dst_db = ctx.db_index;
    let mut replace = false;
    let mut j = 3;
    while j < args.len() {
        let opt = args[j].to_ascii_uppercase();
        if opt == b"REPLACE" {
            replace = true;
        } else if opt == b"DB" && j + 1 < args.len() {
            j += 1;
            dst_db = tri!(parse_db(&args[j]));
        } else {
            return super::syntax_error();
        }
        j += 1;
    }
    if src == dst && dst_db == ctx.db_index {
        return Reply::err("source and destination objects are the same");
    }
    let Some((_, v)) = tri!(ctx.get_meta_to_read(src)) else { return Reply::Int(0) };
    match tri!(ctx.get_meta_in(dst_db, dst)) {
        Some(_) if !replace => return Reply::Int(0),
        Some((_, old)) => ctx.delete_stored(dst_db, dst, &old),
        None => {}
    }
    tri!(put_copy(ctx, &v, dst_db, dst));
    ctx.notify_in(dst_db, crate::notify::GENERIC, "copy_to", dst);
    Reply::Int(1)
}

/// Stores a copy of the value `stored` (of `src` in the current database) as `dst` of `dst_db`: a string's
/// meta value as is, a collection's members under a new version (members are keyed by version and
/// database, so two keys never share them).
fn put_copy(ctx: &mut WriteCtx<'_>, stored: &[u8], dst_db: u8, dst: &[u8]) -> Result<(), Reply> {
    match coll_of(stored)? {
        None => ctx.put_meta_in(dst_db, dst, stored).map_err(Reply::from),
        Some(c) => {
            crate::types::coll::check_key(dst)?;
            let copy = copy_members(ctx, ctx.db_index, &c, dst_db, dst)?;
            ctx.put_meta_in(dst_db, dst, &copy.encode()).map_err(Reply::from)
        }
    }
}

// ---------------------------------------------------------------------------------------------------------
// Expiry

// ---------------------------------------------------------------------------------------------------------
// OBJECT

const OBJECT_HELP: &[&str] = &[
    "OBJECT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "ENCODING <key>",
    "    Return the kind of internal representation used in order to store the value",
    "    associated with a <key>.",
    "FREQ <key>",
    "    Return the logarithmic access counter of the <key> (with an LFU maxmemory-policy).",
    "IDLETIME <key>",
    "    Return the seconds since the <key> was last read or written (at most the time since the",
    "    server started).",
    "REFCOUNT <key>",
    "    Return the number of references of the value associated with the specified",
    "    <key>: always 1 (values are never shared).",
    "HELP",
    "    Prints this help.",
];

/// OBJECT ENCODING's answer. Strings: Redis's rule on the value (`int` for an integer of at most 20
/// characters, `embstr` up to 44 bytes, else `raw`): the value decides it, and ShaleDB keeps every string
/// inline in its key's record anyway. Collections: the name of the Redis encoding whose properties ours
/// has (one record per member, point access to any member, no rewrite of the whole value on change):
/// `hashtable` for hashes and sets, `skiplist` for sorted sets (an ordered score index beside the member
/// records), `quicklist` for lists, `stream` for streams. Redis's compact small-size encodings (listpack,
/// intset) are never answered: ShaleDB has none.
pub fn encoding_name(m: &Meta, stored: &[u8]) -> &'static str {
    match m.typ {
        Type::String => {
            let v = &stored[m.payload_at.min(stored.len())..];
            if v.len() <= 20 && crate::resp::parse_i64(v).is_some() {
                "int"
            } else if v.len() <= 44 {
                "embstr"
            } else {
                "raw"
            }
        }
        Type::Hash | Type::Set => "hashtable",
        Type::ZSet => "skiplist",
        Type::List => "quicklist",
        Type::Stream => "stream",
    }
}

fn object(ctx: &ReadCtx<'_>, args: &Args) -> Reply {
    let sub = args[1].to_ascii_lowercase();
    let arity = match &sub[..] {
        b"help" => 2,
        b"encoding" | b"freq" | b"idletime" | b"refcount" => 3,
        _ => {
            return Reply::Error(format!(
                "ERR unknown subcommand '{}'. Try OBJECT HELP.",
                String::from_utf8_lossy(&args[1])
            ))
        }
    };
    if args.len() != arity {
        return super::sub_arity("object", &sub);
    }
    if arity == 2 {
        return super::help_reply(OBJECT_HELP);
    }
    let Some((m, v)) = tri!(ctx.peek_meta_quietly(&args[2])) else { return Reply::Nil };
    let server = ctx.db as *const shaledb::Db as usize;
    let lfu = crate::access::lfu_policy(server);
    match &sub[..] {
        b"encoding" => Reply::bulk(encoding_name(&m, &v)),
        b"refcount" => Reply::Int(1),
        b"freq" if lfu.is_none() => Reply::err(
            "An LFU maxmemory policy is not selected, access frequency not tracked. Please note that when \
             switching between policies at runtime LRU and LFU data will take some time to adjust.",
        ),
        b"freq" => Reply::Int(crate::access::freq(server, ctx.db_index, &args[2]) as i64),
        _ if lfu.is_some() => Reply::err(
            "An LFU maxmemory policy is selected, idle time not tracked. Please note that when switching \
             between policies at runtime LRU and LFU data will take some time to adjust.",
        ),
        _ => Reply::Int(crate::access::idle_secs(server, ctx.db_index, &args[2]).min(i64::MAX as u64) as i64),
    }
}

// ---------------------------------------------------------------------------------------------------------
// SCAN, KEYS, RANDOMKEY, DBSIZE
// ---------------------------------------------------------------------------------------------------------
// FLUSHDB, FLUSHALL

/// Deletes applied per step while flushing (the engine has no range delete yet).
const FLUSH_STEP: usize = 10_000;

fn flush_mode(args: &Args) -> Result<(), Reply> {
    match args.len() {
        1 => Ok(()),
        2 if args[1].eq_ignore_ascii_case(b"async") || args[1].eq_ignore_ascii_case(b"sync") => Ok(()),
        _ => Err(super::syntax_error()),
    }
}

/// Deletes every engine key of database `db` (meta keys and collection members), applying the deletes in
/// steps of [`FLUSH_STEP`] so the batch stays bounded.
fn flush_db(ctx: &mut WriteCtx<'_>, db: u8) -> Result<(), Reply> {
    let lower = vec![db];
    let upper = vec![db + 1];
    loop {
        let mut it = ctx.iter_applied(ReadOptions {
            fill_cache: false,
            iterate_lower_bound: Some(lower.clone()),
            iterate_upper_bound: Some(upper.clone()),
            ..ReadOptions::default()
        });
        it.seek(&lower);
        let mut n = 0;
        while it.valid() && n < FLUSH_STEP {
            let k = it.key().to_vec();
            ctx.delete_raw(&k);
            n += 1;
            it.next();
        }
        it.status().map_err(|e| Reply::err(format!("read failed: {e}")))?;
        let more = it.valid();
        drop(it);
        if !more {
            return Ok(());
        }
        ctx.apply_pending();
    }
}

fn flushdb(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    tri!(flush_mode(args));
    tri!(flush_db(ctx, ctx.db_index));
    Reply::Ok
}

fn flushall(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    tri!(flush_mode(args));
    for db in 0..DATABASES {
        tri!(flush_db(ctx, db));
    }
    Reply::Ok
}

// ---------------------------------------------------------------------------------------------------------
// SHALEDB.RANGE start end [COUNT n] [REV] [WITHVALUES]

#[cfg(test)]
mod tests;
