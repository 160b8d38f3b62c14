//! Keyspace commands: DEL, UNLINK, EXISTS, TYPE, OBJECT, RENAME, RENAMENX, MOVE, COPY, EXPIRE, PEXPIRE,
//! EXPIREAT, PEXPIREAT, TTL, PTTL, PERSIST, EXPIRETIME, PEXPIRETIME, SCAN, KEYS, RANDOMKEY, DBSIZE, FLUSHDB,
//! FLUSHALL, and the ordered range read `SHALEDB.RANGE` (a ShaleDB extension; docs/format/server-keys.md).
//!
//! On collections (keys.rs has the layout): DEL, UNLINK and EXPIRE are one write of the meta key (the
//! version's members go to the collector, gc.rs); RENAME moves the meta value and rewrites the version's
//! registry record to the new name; MOVE and COPY copy the member records under a new version (O(members),
//! in bounded chunks), since members are keyed by database and version.
//!
//! SCAN's cursor: a key-ordered keyspace has no hash-table slot to put in a cursor, and clients parse the
//! cursor as an integer, so the cursor is an id in a server-wide table ([`Cursors`]) that maps it to the
//! database and the user key the next call starts at. The table is bounded (least recently used ids are
//! dropped beyond [`MAX_CURSORS`] entries or [`MAX_CURSOR_BYTES`] bytes of keys); a dropped or unknown id is
//! answered `ERR invalid cursor`. Ids are random 63-bit numbers, so an old id is very unlikely to name another
//! scan. Guarantees are Redis's: a key present for the whole scan is returned at least once (here exactly
//! once), and the scan ends (cursor 0).

use super::flags::*;
use super::strings::spec;
use super::{arg_i64, Handler, Spec};
use crate::keys::{self, Coll, Meta, Type, DATABASES};
use crate::resp::{Args, Reply};
use crate::store::{ReadCtx, WriteCtx};
use bytes::Bytes;
use parking_lot::Mutex;
use shaledb::ReadOptions;
use std::collections::{BTreeMap, HashMap};
use std::sync::OnceLock;

pub static COMMANDS: &[Spec] = &[
    spec!("del", -2, WRITE, 1, -1, 1, Handler::Write(del), "Deletes one or more keys."),
    spec!("unlink", -2, WRITE | FAST, 1, -1, 1, Handler::Write(del), "Asynchronously deletes one or more keys."),
    spec!("exists", -2, READONLY | FAST, 1, -1, 1, Handler::Read(exists), "Determines whether one or more keys exist."),
    spec!(
        "type",
        2,
        READONLY | FAST,
        1,
        1,
        1,
        Handler::Read(type_cmd),
        "Determines the type of value stored at a key."
    ),
    spec!("rename", 3, WRITE, 1, 2, 1, Handler::Write(rename), "Renames a key and overwrites the destination."),
    spec!(
        "renamenx",
        3,
        WRITE | FAST,
        1,
        2,
        1,
        Handler::Write(renamenx),
        "Renames a key only when the target key name doesn't exist."
    ),
    spec!("move", 3, WRITE | FAST, 1, 1, 1, Handler::Write(move_cmd), "Moves a key to another database."),
    spec!("copy", -3, WRITE | DENYOOM, 1, 2, 1, Handler::Write(copy), "Copies the value of a key to a new key."),
    spec!("expire", -3, WRITE | FAST, 1, 1, 1, Handler::Write(expire), "Sets the expiration time of a key in seconds."),
    spec!(
        "pexpire",
        -3,
        WRITE | FAST,
        1,
        1,
        1,
        Handler::Write(pexpire),
        "Sets the expiration time of a key in milliseconds."
    ),
    spec!(
        "expireat",
        -3,
        WRITE | FAST,
        1,
        1,
        1,
        Handler::Write(expireat),
        "Sets the expiration time of a key to a Unix timestamp."
    ),
    spec!(
        "pexpireat",
        -3,
        WRITE | FAST,
        1,
        1,
        1,
        Handler::Write(pexpireat),
        "Sets the expiration time of a key to a Unix milliseconds timestamp."
    ),
    spec!("ttl", 2, READONLY | FAST, 1, 1, 1, Handler::Read(ttl), "Returns the expiration time in seconds of a key."),
    spec!(
        "pttl",
        2,
        READONLY | FAST,
        1,
        1,
        1,
        Handler::Read(pttl),
        "Returns the expiration time in milliseconds of a key."
    ),
    spec!(
        "expiretime",
        2,
        READONLY | FAST,
        1,
        1,
        1,
        Handler::Read(expiretime),
        "Returns the expiration time of a key as a Unix timestamp."
    ),
    spec!(
        "pexpiretime",
        2,
        READONLY | FAST,
        1,
        1,
        1,
        Handler::Read(pexpiretime),
        "Returns the expiration time of a key as a Unix milliseconds timestamp."
    ),
    spec!("object", -2, READONLY, 0, 0, 0, Handler::Read(object), "A container for object introspection commands."),
    spec!("persist", 2, WRITE | FAST, 1, 1, 1, Handler::Write(persist), "Removes the expiration time of a key."),
    spec!("scan", -2, READONLY, 0, 0, 0, Handler::Read(scan), "Iterates over the key names in the database."),
    spec!("keys", 2, READONLY, 0, 0, 0, Handler::Read(keys_cmd), "Returns all key names that match a pattern."),
    spec!("randomkey", 1, READONLY, 0, 0, 0, Handler::Read(randomkey), "Returns a random key name from the database."),
    spec!("dbsize", 1, READONLY | FAST, 0, 0, 0, Handler::Read(dbsize), "Returns the number of keys in the database."),
    spec!("flushdb", -1, WRITE, 0, 0, 0, Handler::Write(flushdb), "Removes all keys from the current database."),
    spec!("flushall", -1, WRITE, 0, 0, 0, Handler::Write(flushall), "Removes all keys from all databases."),
    spec!(
        "shaledb.range",
        -3,
        READONLY | EXTENSION,
        1,
        2,
        1,
        Handler::Read(range),
        "ShaleDB: returns up to COUNT string keys (and values) in key order between two bounds, forward or REV."
    ),
];

// ---------------------------------------------------------------------------------------------------------
// DEL, EXISTS, TYPE, RENAME, MOVE, COPY

fn del(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    let mut n = 0;
    for k in &args[1..] {
        if let Some((_, v)) = tri!(ctx.get_meta(k)) {
            // A collection is one write whatever its size: its members go to the collector (gc.rs).
            ctx.delete_stored(ctx.db_index, k, &v);
            n += 1;
        }
    }
    Reply::Int(n)
}

fn exists(ctx: &ReadCtx<'_>, args: &Args) -> Reply {
    let mut n = 0;
    for k in &args[1..] {
        n += tri!(ctx.get_meta(k)).is_some() as i64;
    }
    Reply::Int(n)
}

fn type_cmd(ctx: &ReadCtx<'_>, args: &Args) -> Reply {
    match tri!(ctx.get_meta(&args[1])) {
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
            let r: Result<Vec<_>, Reply> = view.scan(&lower, &upper, false).take(COPY_CHUNK).collect();
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
    let Some((_, v)) = tri!(ctx.get_meta(src)) else { return Reply::Int(0) };
    match tri!(ctx.get_meta_in(dst_db, dst)) {
        Some(_) if !replace => return Reply::Int(0),
        Some((_, old)) => ctx.delete_stored(dst_db, dst, &old),
        None => {}
    }
    tri!(put_copy(ctx, &v, dst_db, dst));
    Reply::Int(1)
}

/// Stores a copy of the value `stored` (of `src` in the current database) as `dst` of `dst_db`: a string's
/// meta value as is, a collection's members under a new version (members are keyed by version and
/// database, so two keys never share them).
fn put_copy(ctx: &mut WriteCtx<'_>, stored: &[u8], dst_db: u8, dst: &[u8]) -> Result<(), Reply> {
    match coll_of(stored)? {
        None => ctx.put_meta_in(dst_db, dst, stored),
        Some(c) => {
            crate::commands::hashes::check_coll_key(dst)?;
            let copy = copy_members(ctx, ctx.db_index, &c, dst_db, dst)?;
            ctx.put_meta_in(dst_db, dst, &copy.encode())
        }
    }
}

// ---------------------------------------------------------------------------------------------------------
// Expiry

#[derive(Clone, Copy)]
enum Unit {
    Seconds,
    Millis,
}

fn expire_generic(ctx: &mut WriteCtx<'_>, args: &Args, unit: Unit, absolute: bool, cmd: &str) -> Reply {
    let (mut nx, mut xx, mut gt, mut lt) = (false, false, false, false);
    for a in &args[3..] {
        match &a.to_ascii_uppercase()[..] {
            b"NX" => nx = true,
            b"XX" => xx = true,
            b"GT" => gt = true,
            b"LT" => lt = true,
            _ => return Reply::err(format!("Unsupported option {}", String::from_utf8_lossy(a))),
        }
    }
    if nx && (xx || gt || lt) {
        return Reply::err("NX and XX, GT or LT options at the same time are not compatible");
    }
    if gt && lt {
        return Reply::err("GT and LT options at the same time are not compatible");
    }
    let mut when = tri!(arg_i64(&args[2]));
    let invalid = || super::strings::invalid_expire(cmd);
    if let Unit::Seconds = unit {
        when = match when.checked_mul(1000) {
            Some(w) => w,
            None => return invalid(),
        };
    }
    if !absolute {
        when = match when.checked_add(ctx.now_ms as i64) {
            Some(w) => w,
            None => return invalid(),
        };
    }
    let Some((m, v)) = tri!(ctx.get_meta(&args[1])) else { return Reply::Int(0) };
    let current = m.expire_at_ms.map(|t| t as i64);
    let refused = match current {
        _ if nx && current.is_some() => true,
        None if xx || gt => true,
        Some(c) if gt && when <= c => true,
        Some(c) if lt && when >= c => true,
        _ => false,
    };
    if refused {
        return Reply::Int(0);
    }
    if when <= ctx.now_ms as i64 {
        ctx.delete_stored(ctx.db_index, &args[1], &v);
        return Reply::Int(1);
    }
    tri!(set_expiry(ctx, &args[1], &m, &v, Some(when as u64)));
    Reply::Int(1)
}

/// Rewrites a key's meta value with a new expiry (the payload is kept).
fn set_expiry(ctx: &mut WriteCtx<'_>, key: &[u8], m: &Meta, stored: &[u8], at: Option<u64>) -> Result<(), Reply> {
    let mut v = Vec::with_capacity(stored.len() + 8);
    keys::encode_head_into(m.typ, at, &mut v);
    v.extend_from_slice(&stored[m.payload_at.min(stored.len())..]);
    ctx.put_meta_in(ctx.db_index, key, &v)
}

fn expire(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    expire_generic(ctx, args, Unit::Seconds, false, "expire")
}

fn pexpire(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    expire_generic(ctx, args, Unit::Millis, false, "pexpire")
}

fn expireat(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    expire_generic(ctx, args, Unit::Seconds, true, "expireat")
}

fn pexpireat(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    expire_generic(ctx, args, Unit::Millis, true, "pexpireat")
}

fn ttl_generic(ctx: &ReadCtx<'_>, key: &[u8], millis: bool, absolute: bool) -> Reply {
    let Some((m, _)) = tri!(ctx.get_meta(key)) else { return Reply::Int(-2) };
    let Some(at) = m.expire_at_ms else { return Reply::Int(-1) };
    let t = if absolute { at } else { at.saturating_sub(ctx.now_ms) };
    let t = t.min(i64::MAX as u64) as i64;
    Reply::Int(if millis { t } else { t.saturating_add(500) / 1000 })
}

fn ttl(ctx: &ReadCtx<'_>, args: &Args) -> Reply {
    ttl_generic(ctx, &args[1], false, false)
}

fn pttl(ctx: &ReadCtx<'_>, args: &Args) -> Reply {
    ttl_generic(ctx, &args[1], true, false)
}

fn expiretime(ctx: &ReadCtx<'_>, args: &Args) -> Reply {
    ttl_generic(ctx, &args[1], false, true)
}

fn pexpiretime(ctx: &ReadCtx<'_>, args: &Args) -> Reply {
    ttl_generic(ctx, &args[1], true, true)
}

// ---------------------------------------------------------------------------------------------------------
// OBJECT

const OBJECT_HELP: &[&str] = &[
    "OBJECT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "ENCODING <key>",
    "    Return the kind of internal representation used in order to store the value",
    "    associated with a <key>.",
    "FREQ <key>",
    "    Return the access frequency index of the <key>. ShaleDB does not track access frequency.",
    "IDLETIME <key>",
    "    Return the idle time of the <key>. ShaleDB does not track access times.",
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
    let name = String::from_utf8_lossy(&sub).into_owned();
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
        return Reply::Error(format!("ERR wrong number of arguments for 'object|{name}' command"));
    }
    if arity == 2 {
        return Reply::Array(OBJECT_HELP.iter().map(|l| Reply::Simple((*l).into())).collect());
    }
    let Some((m, v)) = tri!(ctx.get_meta(&args[2])) else { return Reply::Nil };
    match &sub[..] {
        b"encoding" => Reply::bulk(encoding_name(&m, &v)),
        b"refcount" => Reply::Int(1),
        b"freq" => Reply::err(
            "An LFU maxmemory policy is not selected, access frequency not tracked. Please note that when \
             switching between policies at runtime LRU and LFU data will take some time to adjust.",
        ),
        _ => Reply::err("ShaleDB does not track key access times: OBJECT IDLETIME is not available"),
    }
}

fn persist(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    let Some((m, v)) = tri!(ctx.get_meta(&args[1])) else { return Reply::Int(0) };
    if m.expire_at_ms.is_none() {
        return Reply::Int(0);
    }
    tri!(set_expiry(ctx, &args[1], &m, &v, None));
    Reply::Int(1)
}

/// Matches `s` against a Redis glob pattern, case-sensitively (KEYS, SCAN MATCH): the one glob matcher of
/// the server, [`super::server_cmds::glob_match`].
pub fn glob_match(pattern: &[u8], s: &[u8]) -> bool {
    super::server_cmds::glob_match(pattern, s, false)
}

/// The literal bytes every match of `pattern` starts with (used to seek instead of reading the whole db).
pub fn literal_prefix(pattern: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut p = 0;
    while p < pattern.len() {
        match pattern[p] {
            b'*' | b'?' | b'[' => break,
            b'\\' if p + 1 < pattern.len() => {
                out.push(pattern[p + 1]);
                p += 2;
            }
            b'\\' => break,
            c => {
                out.push(c);
                p += 1;
            }
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------------------
// SCAN, KEYS, RANDOMKEY, DBSIZE

/// Most cursors kept.
pub const MAX_CURSORS: usize = 10_000;
/// Most bytes of keys the cursors hold.
pub const MAX_CURSOR_BYTES: usize = 64 << 20;

/// SCAN's cursor table: id -> (database, the user key the scan goes on at). Least recently used first out.
#[derive(Default)]
pub struct Cursors {
    by_id: HashMap<u64, (u8, Bytes, u64)>,
    by_use: BTreeMap<u64, u64>,
    bytes: usize,
    tick: u64,
    next_id: u64,
}

impl Cursors {
    /// Remembers where a scan goes on; returns the cursor id.
    pub fn insert(&mut self, db: u8, next_key: Bytes) -> u64 {
        if self.next_id == 0 {
            self.next_id = rand::random::<u64>();
        }
        let id = loop {
            self.next_id = self.next_id.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let id = self.next_id >> 1;
            if id != 0 && !self.by_id.contains_key(&id) {
                break id;
            }
        };
        self.tick += 1;
        self.bytes += next_key.len();
        self.by_id.insert(id, (db, next_key, self.tick));
        self.by_use.insert(self.tick, id);
        while self.by_id.len() > MAX_CURSORS || self.bytes > MAX_CURSOR_BYTES {
            let Some((_, old)) = self.by_use.pop_first() else { break };
            if let Some((_, k, _)) = self.by_id.remove(&old) {
                self.bytes -= k.len();
            }
        }
        id
    }

    /// Where the scan of cursor `id` goes on (and marks it recently used).
    pub fn get(&mut self, id: u64) -> Option<(u8, Bytes)> {
        self.tick += 1;
        let tick = self.tick;
        let e = self.by_id.get_mut(&id)?;
        self.by_use.remove(&e.2);
        e.2 = tick;
        self.by_use.insert(tick, id);
        Some((e.0, e.1.clone()))
    }

    pub fn len(&self) -> usize {
        self.by_id.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_id.is_empty()
    }
}

fn cursors() -> &'static Mutex<Cursors> {
    static C: OnceLock<Mutex<Cursors>> = OnceLock::new();
    C.get_or_init(Default::default)
}

/// An iterator over the meta keys of the context's database, between two user-key bounds.
fn meta_iter(ctx: &ReadCtx<'_>, lower: Option<&[u8]>, upper: Option<&[u8]>) -> shaledb::Cursor {
    let db = ctx.db_index;
    ctx.db.cursor_opt(&ReadOptions {
        iterate_lower_bound: Some(lower.map_or_else(|| keys::meta_prefix(db).to_vec(), |l| keys::meta_key(db, l))),
        iterate_upper_bound: Some(upper.map_or_else(|| keys::meta_end(db).to_vec(), |u| keys::meta_key(db, u))),
        ..ReadOptions::default()
    })
}

fn type_by_name(name: &[u8]) -> Option<Type> {
    let n = name.to_ascii_lowercase();
    [Type::String, Type::Hash, Type::List, Type::Set, Type::ZSet, Type::Stream]
        .into_iter()
        .find(|t| t.name().as_bytes() == n)
}

fn scan(ctx: &ReadCtx<'_>, args: &Args) -> Reply {
    let cursor = match std::str::from_utf8(&args[1]).ok().and_then(|s| s.parse::<u64>().ok()) {
        Some(c) => c,
        None => return Reply::err("invalid cursor"),
    };
    let mut pattern: Option<Bytes> = None;
    let mut count: i64 = 10;
    let mut typ: Option<Option<Type>> = None;
    let mut j = 2;
    while j < args.len() {
        let opt = args[j].to_ascii_uppercase();
        if j + 1 >= args.len() {
            return super::syntax_error();
        }
        match &opt[..] {
            b"MATCH" => pattern = Some(args[j + 1].clone()),
            b"COUNT" => {
                count = tri!(arg_i64(&args[j + 1]));
                if count < 1 {
                    return super::syntax_error();
                }
            }
            b"TYPE" => typ = Some(type_by_name(&args[j + 1])),
            _ => return super::syntax_error(),
        }
        j += 2;
    }
    let start: Option<Bytes> = if cursor == 0 {
        None
    } else {
        match cursors().lock().get(cursor) {
            Some((db, k)) if db == ctx.db_index => Some(k),
            _ => return Reply::err("invalid cursor"),
        }
    };
    let prefix = pattern.as_deref().map(literal_prefix).unwrap_or_default();
    let lower: Vec<u8> = match &start {
        Some(s) if s[..] > prefix[..] => s.to_vec(),
        _ => prefix.clone(),
    };
    let upper = keys::prefix_end(&prefix).filter(|_| !prefix.is_empty());
    let mut it = meta_iter(ctx, Some(&lower), upper.as_deref());
    it.seek(keys::meta_key(ctx.db_index, &lower));
    let mut out = Vec::new();
    let mut examined = 0i64;
    while it.valid() && examined < count {
        examined += 1;
        let k = &it.key()[2..];
        if let Ok(m) = keys::decode_meta(it.value()) {
            let live = !m.expired(ctx.now_ms);
            let type_ok = typ.is_none_or(|t| t == Some(m.typ));
            if live && type_ok && pattern.as_deref().is_none_or(|p| glob_match(p, k)) {
                out.push(Reply::Bulk(Bytes::copy_from_slice(k)));
            }
        }
        it.next();
    }
    if let Err(e) = it.status() {
        return Reply::err(format!("read failed: {e}"));
    }
    let next = if it.valid() {
        let k = Bytes::copy_from_slice(&it.key()[2..]);
        cursors().lock().insert(ctx.db_index, k)
    } else {
        0
    };
    Reply::Array(vec![Reply::bulk(next.to_string()), Reply::Array(out)])
}

fn keys_cmd(ctx: &ReadCtx<'_>, args: &Args) -> Reply {
    let pattern = &args[1];
    let prefix = literal_prefix(pattern);
    let upper = keys::prefix_end(&prefix).filter(|_| !prefix.is_empty());
    let mut it = meta_iter(ctx, Some(&prefix), upper.as_deref());
    it.seek(keys::meta_key(ctx.db_index, &prefix));
    let all = &pattern[..] == b"*";
    let mut out = Vec::new();
    while it.valid() {
        let k = &it.key()[2..];
        if keys::decode_meta(it.value()).is_ok_and(|m| !m.expired(ctx.now_ms)) && (all || glob_match(pattern, k)) {
            out.push(Reply::Bulk(Bytes::copy_from_slice(k)));
        }
        it.next();
    }
    if let Err(e) = it.status() {
        return Reply::err(format!("read failed: {e}"));
    }
    Reply::Array(out)
}

/// A random live key: seeks to a random point between the first and the last key and takes the first live
/// key from there (wrapping once). Not uniform (keys after sparse stretches are likelier), as Redis's is
/// not exactly either; at most a few thousand keys are read.
fn randomkey(ctx: &ReadCtx<'_>, _: &Args) -> Reply {
    let mut it = meta_iter(ctx, None, None);
    it.seek_to_first();
    if !it.valid() {
        return Reply::Nil;
    }
    let first = it.key()[2..].to_vec();
    it.seek_to_last();
    let last = if it.valid() { it.key()[2..].to_vec() } else { first.clone() };
    let common = first.iter().zip(&last).take_while(|(a, b)| a == b).count();
    let mut target = first[..common].to_vec();
    let lo = first.get(common).copied().unwrap_or(0);
    let hi = last.get(common).copied().unwrap_or(0xff).max(lo);
    target.push(rand::Rng::gen_range(&mut rand::thread_rng(), lo..=hi));
    for _ in 0..4 {
        target.push(rand::random::<u8>());
    }
    it.seek(keys::meta_key(ctx.db_index, &target));
    let mut wrapped = false;
    for _ in 0..4096 {
        if !it.valid() {
            if wrapped {
                break;
            }
            wrapped = true;
            it.seek_to_first();
            continue;
        }
        if keys::decode_meta(it.value()).is_ok_and(|m| !m.expired(ctx.now_ms)) {
            return Reply::Bulk(Bytes::copy_from_slice(&it.key()[2..]));
        }
        it.next();
    }
    Reply::Nil
}

/// The number of live keys of the context's database (reads every meta key of it).
pub fn count_keys(ctx: &ReadCtx<'_>) -> Result<i64, Reply> {
    let mut it = meta_iter(ctx, None, None);
    it.seek_to_first();
    let mut n = 0;
    while it.valid() {
        n += keys::decode_meta(it.value()).is_ok_and(|m| !m.expired(ctx.now_ms)) as i64;
        it.next();
    }
    it.status().map_err(|e| Reply::err(format!("read failed: {e}")))?;
    Ok(n)
}

fn dbsize(ctx: &ReadCtx<'_>, _: &Args) -> Reply {
    match count_keys(ctx) {
        Ok(n) => Reply::Int(n),
        Err(e) => e,
    }
}

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

/// Default and largest COUNT of SHALEDB.RANGE.
pub const RANGE_DEFAULT_COUNT: i64 = 100;
pub const RANGE_MAX_COUNT: i64 = 100_000;
/// A reply stops growing once its keys and values reach this many bytes (it may then hold fewer than COUNT
/// keys; the range ends when a reply is empty).
pub const RANGE_MAX_REPLY_BYTES: usize = 64 << 20;

/// One end of a range, as ZRANGEBYLEX writes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Bound {
    /// `-`
    Min,
    /// `+`
    Max,
    /// `[key`
    Incl(Bytes),
    /// `(key`
    Excl(Bytes),
}

pub fn parse_bound(a: &Bytes) -> Option<Bound> {
    match a.first()? {
        b'-' if a.len() == 1 => Some(Bound::Min),
        b'+' if a.len() == 1 => Some(Bound::Max),
        b'[' => Some(Bound::Incl(a.slice(1..))),
        b'(' => Some(Bound::Excl(a.slice(1..))),
        _ => None,
    }
}

/// True if `k` is on the inner side of `b` as a lower bound.
fn above(k: &[u8], b: &Bound) -> bool {
    match b {
        Bound::Min => true,
        Bound::Max => false,
        Bound::Incl(x) => k >= &x[..],
        Bound::Excl(x) => k > &x[..],
    }
}

/// True if `k` is on the inner side of `b` as an upper bound.
fn below(k: &[u8], b: &Bound) -> bool {
    match b {
        Bound::Min => false,
        Bound::Max => true,
        Bound::Incl(x) => k <= &x[..],
        Bound::Excl(x) => k < &x[..],
    }
}

fn range(ctx: &ReadCtx<'_>, args: &Args) -> Reply {
    let (Some(start), Some(end)) = (parse_bound(&args[1]), parse_bound(&args[2])) else {
        return Reply::err("min or max not valid string range item");
    };
    let (mut count, mut rev, mut withvalues) = (RANGE_DEFAULT_COUNT, false, false);
    let mut j = 3;
    while j < args.len() {
        let opt = args[j].to_ascii_uppercase();
        match &opt[..] {
            b"REV" => rev = true,
            b"WITHVALUES" => withvalues = true,
            b"COUNT" if j + 1 < args.len() => {
                j += 1;
                count = tri!(arg_i64(&args[j]));
                if !(0..=RANGE_MAX_COUNT).contains(&count) {
                    return Reply::err(format!("COUNT must be between 0 and {RANGE_MAX_COUNT}"));
                }
            }
            _ => return super::syntax_error(),
        }
        j += 1;
    }
    // Forward: start is the low end; REV: start is the high end (as ZRANGE ... BYLEX REV).
    let (low, high) = if rev { (&end, &start) } else { (&start, &end) };
    let db = ctx.db_index;
    let mut it = meta_iter(ctx, None, None);
    if rev {
        match high {
            Bound::Max => it.seek_to_last(),
            Bound::Min => return Reply::Array(vec![]),
            Bound::Incl(k) | Bound::Excl(k) => it.seek_for_prev(keys::meta_key(db, k)),
        }
    } else {
        match low {
            Bound::Min => it.seek_to_first(),
            Bound::Max => return Reply::Array(vec![]),
            Bound::Incl(k) | Bound::Excl(k) => it.seek(keys::meta_key(db, k)),
        }
    }
    let mut out = Vec::new();
    let (mut n, mut bytes) = (0i64, 0usize);
    while it.valid() && n < count && bytes < RANGE_MAX_REPLY_BYTES {
        let k = &it.key()[2..];
        let inside_start = if rev { below(k, high) } else { above(k, low) };
        let inside_end = if rev { above(k, low) } else { below(k, high) };
        if !inside_end {
            break;
        }
        if inside_start {
            if let Ok(m) = keys::decode_meta(it.value()) {
                if m.typ == Type::String && !m.expired(ctx.now_ms) {
                    out.push(Reply::Bulk(Bytes::copy_from_slice(k)));
                    bytes += k.len();
                    if withvalues {
                        let v = &it.value()[m.payload_at.min(it.value().len())..];
                        bytes += v.len();
                        out.push(Reply::Bulk(Bytes::copy_from_slice(v)));
                    }
                    n += 1;
                }
            }
        }
        if rev {
            it.prev();
        } else {
            it.next();
        }
    }
    if let Err(e) = it.status() {
        return Reply::err(format!("read failed: {e}"));
    }
    Reply::Array(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn glob_matches_like_redis() {
        let m = |p: &str, s: &str| glob_match(p.as_bytes(), s.as_bytes());
        assert!(m("*", ""));
        assert!(m("*", "anything"));
        assert!(m("h?llo", "hello") && m("h?llo", "hallo") && !m("h?llo", "hllo"));
        assert!(m("h*llo", "hllo") && m("h*llo", "heeeello") && !m("h*llo", "hellox"));
        assert!(m("h[ae]llo", "hello") && m("h[ae]llo", "hallo") && !m("h[ae]llo", "hillo"));
        assert!(m("h[^e]llo", "hallo") && !m("h[^e]llo", "hello"));
        assert!(m("h[a-b]llo", "hbllo") && !m("h[a-b]llo", "hcllo"));
        assert!(m("h[b-a]llo", "hallo"), "a reversed range is swapped");
        assert!(m("h\\*llo", "h*llo") && !m("h\\*llo", "hello"));
        assert!(m("[\\]]", "]") && m("[\\-]", "-"));
        assert!(m("a*b*c", "axxbyyc") && !m("a*b*c", "axxbyy"));
        assert!(m("**a", "a") && m("*a*", "bab"));
        assert!(m("user:*:name", "user:42:name") && !m("user:*:name", "user:42:age"));
        assert!(!m("abc", "ab") && !m("ab", "abc"));
        assert!(m("[abc", "a"), "an unterminated set ends with the pattern");
        assert!(m("a[-]", "a-"));
        // Long inputs stay fast (no exponential backtracking).
        let s = "a".repeat(5000);
        assert!(!glob_match(b"*a*a*a*a*a*a*a*a*a*b", s.as_bytes()));
    }

    #[test]
    fn literal_prefixes() {
        assert_eq!(literal_prefix(b"user:*"), b"user:");
        assert_eq!(literal_prefix(b"a\\*b?"), b"a*b");
        assert_eq!(literal_prefix(b"[ab]x"), b"");
        assert_eq!(keys::prefix_end(b"ab"), Some(b"ac".to_vec()));
        assert_eq!(keys::prefix_end(b"a\xff"), Some(b"b".to_vec()));
        assert_eq!(keys::prefix_end(b"\xff"), None);
    }

    #[test]
    fn cursor_table_is_bounded_and_lru() {
        let mut c = Cursors::default();
        let first = c.insert(0, Bytes::from_static(b"k0"));
        assert!(first != 0 && first < (1 << 63));
        let mut ids = vec![first];
        for i in 1..MAX_CURSORS + 10 {
            if i == MAX_CURSORS / 2 {
                // Touch the first: it survives the evictions that follow.
                assert!(c.get(first).is_some());
            }
            ids.push(c.insert(1, Bytes::from(format!("k{i}"))));
        }
        assert_eq!(c.len(), MAX_CURSORS);
        assert_eq!(c.get(first), Some((0, Bytes::from_static(b"k0"))));
        assert!(c.get(ids[1]).is_none());
        assert!(c.get(*ids.last().unwrap()).is_some());
    }

    #[test]
    fn bounds_parse() {
        assert_eq!(parse_bound(&Bytes::from_static(b"-")), Some(Bound::Min));
        assert_eq!(parse_bound(&Bytes::from_static(b"+")), Some(Bound::Max));
        assert_eq!(parse_bound(&Bytes::from_static(b"[a")), Some(Bound::Incl(Bytes::from_static(b"a"))));
        assert_eq!(parse_bound(&Bytes::from_static(b"(")), Some(Bound::Excl(Bytes::new())));
        assert_eq!(parse_bound(&Bytes::from_static(b"a")), None);
        assert_eq!(parse_bound(&Bytes::from_static(b"")), None);
        assert_eq!(parse_bound(&Bytes::from_static(b"-x")), None);
    }
}
