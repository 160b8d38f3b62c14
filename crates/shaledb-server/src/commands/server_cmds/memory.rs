//! MEMORY: USAGE (an estimate of a key's bytes on the engine), STATS, DOCTOR, MALLOC-STATS, PURGE, HELP.
//!
//! Keys live in the engine's files, not in the process's heap, so `MEMORY USAGE` estimates what a key
//! stores: the bytes of its records (engine key and value) plus the engine's 8-byte sequence-and-kind trailer
//! per record, for the meta record and every member record. With `SAMPLES n` (default 5) a collection's
//! member records are sampled: the first `n` are read and their average size stands for all of them (score
//! index records of a sorted set are estimated from the same sample; a list's records are nodes of up to 32
//! elements, so its sample is the first nodes holding `n` elements); `SAMPLES 0` reads every record. The
//! figure is not Redis's (Redis counts its in-memory encodings), but it grows with what the key holds, so
//! `redis-cli --memkeys` and `--bigkeys` rank keys usefully.

use super::super::{arg_i64, help_reply, sub_arity, syntax_error, unknown_subcommand};
use crate::keys::{self, Coll, Type};
use crate::resp::{Args, Reply};
use crate::server::{Session, Shared};
use crate::store::{now_ms, ReadCtx};
use std::sync::atomic::Ordering;

/// The engine's per-record overhead counted by `MEMORY USAGE` (its internal key's sequence and kind).
const RECORD_OVERHEAD: u64 = 8;
/// Records of the other kinds of a stream (groups, consumers, pending entries) read at most.
const MAX_OTHER_RECORDS: usize = 100_000;

const HELP: &[&str] = &[
    "MEMORY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "DOCTOR",
    "    Return memory problems reports.",
    "MALLOC-STATS",
    "    Return internal statistics report from the memory allocator.",
    "PURGE",
    "    Attempt to purge dirty pages for reclamation by the allocator.",
    "STATS",
    "    Return information about the memory usage of the server.",
    "USAGE <key> [SAMPLES <count>]",
    "    Return memory in bytes used by <key> and its value. Nested values are",
    "    sampled up to <count> times (default: 5, 0 means sample all).",
    "HELP",
    "    Print this help.",
];

pub(super) fn memory(s: &mut Session, shared: &Shared, args: &Args) -> Reply {
    let sub = args[1].to_ascii_lowercase();
    let argc = args.len();
    match sub.as_slice() {
        b"help" if argc == 2 => help_reply(HELP),
        b"usage" if argc >= 3 => {
            let mut samples = 5u64;
            let mut i = 3;
            while i < argc {
                if args[i].eq_ignore_ascii_case(b"samples") && i + 1 < argc {
                    match arg_i64(&args[i + 1]) {
                        Ok(n) if n >= 0 => samples = n as u64,
                        Ok(_) => return syntax_error(),
                        Err(e) => return e,
                    }
                    i += 2;
                } else {
                    return syntax_error();
                }
            }
            let db = shared.store.db();
            let ctx = ReadCtx::new(&db, shared.store.keyspace(), s.db_index, now_ms()).pinned();
            match usage(&ctx, &args[2], samples) {
                Ok(Some(n)) => Reply::Int(i64::try_from(n).unwrap_or(i64::MAX)),
                Ok(None) => Reply::Nil,
                Err(e) => e.into(),
            }
        }
        b"stats" if argc == 2 => stats(shared),
        b"doctor" if argc == 2 => Reply::Verbatim(doctor(shared)),
        b"malloc-stats" if argc == 2 => Reply::Verbatim("Stats not supported for the current allocator\n".into()),
        b"purge" if argc == 2 => Reply::Ok,
        b"help" | b"usage" | b"stats" | b"doctor" | b"malloc-stats" | b"purge" => sub_arity("memory", &sub),
        _ => unknown_subcommand("MEMORY", &args[1]),
    }
}

/// The estimated bytes of `key` (see the module's doc); `None` when it does not exist.
pub fn usage(ctx: &ReadCtx<'_>, key: &[u8], samples: u64) -> Result<Option<u64>, crate::store::Error> {
    let Some((meta, stored)) = ctx.get_meta(key)? else { return Ok(None) };
    let meta_key_len = 2 + key.len() as u64;
    let mut total = meta_key_len + stored.len() as u64 + RECORD_OVERHEAD;
    if meta.typ == Type::String {
        return Ok(Some(total));
    }
    let Some(c) = Coll::decode(&stored).map_err(|e| crate::store::Error::Corrupt(e.to_string()))? else {
        return Ok(Some(total));
    };
    let (seen, bytes) = if c.typ == Type::List {
        // Nodes of up to 32 elements, long elements in records of their own: sampled by elements.
        crate::types::list::sample_bytes(ctx, &c, samples, RECORD_OVERHEAD).map_err(|e| match e {
            crate::types::list::Error::Store(e) => e,
            other => crate::store::Error::Corrupt(other.to_string()),
        })?
    } else {
        sample_members(ctx, &c, keys::SUB_MEMBER, samples)?
    };
    let member_bytes = if seen == 0 {
        0
    } else if samples == 0 || seen >= c.size {
        bytes
    } else {
        bytes / seen * c.size
    };
    total += member_bytes;
    match c.typ {
        // One score-index record per member: the member's key part plus the 8-byte score, no value.
        Type::ZSet if seen > 0 => total += member_bytes / 2 + c.size * (8 + RECORD_OVERHEAD),
        Type::Stream => {
            for sub in 2..=5u8 {
                let (_, b) = sample_members(ctx, &c, sub, MAX_OTHER_RECORDS as u64)?;
                total += b;
            }
        }
        _ => {}
    }
    Ok(Some(total))
}

/// Reads up to `limit` member records of sub-kind `sub` (0: all): how many and their bytes.
fn sample_members(ctx: &ReadCtx<'_>, c: &Coll, sub: u8, limit: u64) -> Result<(u64, u64), crate::store::Error> {
    let (mut n, mut bytes) = (0u64, 0u64);
    for item in ctx.members(c, sub, None, false) {
        let (part, value) = item?;
        n += 1;
        bytes += 11 + part.len() as u64 + value.len() as u64 + RECORD_OVERHEAD;
        if limit != 0 && n >= limit {
            break;
        }
    }
    Ok((n, bytes))
}

fn prop(shared: &Shared, name: &str) -> u64 {
    shared.store.db().property(name).and_then(|v| v.parse().ok()).unwrap_or(0)
}

/// `MEMORY STATS`: the process's memory and the engine's share of it, under Redis's field names where they
/// mean the same thing.
fn stats(shared: &Shared) -> Reply {
    let rss = super::info::rss_bytes().unwrap_or(0);
    let memtables = prop(shared, "shaledb.cur-size-all-mem-tables");
    let cache = prop(shared, "shaledb.block-cache-usage");
    let used = memtables + cache;
    let clients = shared.clients.lock().len() as u64;
    let keys: u64 =
        super::keyspace_scan(&shared.store.db(), now_ms()).map(|v| v.iter().map(|(_, n, _)| n).sum()).unwrap_or(0);
    let int = |n: u64| Reply::Int(i64::try_from(n).unwrap_or(i64::MAX));
    let mut pairs = vec![
        ("peak.allocated", int(used)),
        ("total.allocated", int(used)),
        ("startup.allocated", int(0)),
        ("replication.backlog", int(0)),
        ("clients.slaves", int(0)),
        ("clients.normal", int(clients)),
        ("aof.buffer", int(0)),
        ("keys.count", int(keys)),
        ("dataset.bytes", int(used)),
        ("allocator.resident", int(rss)),
        ("rss-overhead.bytes", int(rss.saturating_sub(used))),
        ("engine.memtables", int(memtables)),
        ("engine.block-cache", int(cache)),
        ("engine.block-cache-capacity", int(prop(shared, "shaledb.block-cache-capacity"))),
        ("commit.groups", int(shared.store.stats.groups.load(Ordering::Relaxed))),
    ];
    if let Some(per_key) = used.checked_div(keys) {
        pairs.push(("keys.bytes-per-key", int(per_key)));
    }
    Reply::Map(pairs.into_iter().map(|(k, v)| (Reply::bulk(k), v)).collect())
}

fn doctor(shared: &Shared) -> String {
    let rss = super::info::rss_bytes().unwrap_or(0);
    let memtables = prop(shared, "shaledb.cur-size-all-mem-tables");
    let cache = prop(shared, "shaledb.block-cache-usage");
    let capacity = prop(shared, "shaledb.block-cache-capacity");
    let mut out = format!(
        "The process uses {} of memory (resident): {} in memtables (writes not yet flushed to table files) and \
         {} in the block cache (capacity {}). Keys live in the engine's files, so their number does not bound \
         the memory used.\n",
        super::info::human(rss),
        super::info::human(memtables),
        super::info::human(cache),
        super::info::human(capacity),
    );
    if capacity > 0 && cache * 10 >= capacity * 9 {
        out.push_str("The block cache is nearly full: reads of data outside it go to the disk (or the page cache).\n");
    } else {
        out.push_str("No memory problem found.\n");
    }
    out
}
