//! SCAN, KEYS, RANDOMKEY, DBSIZE, and the glob patterns of KEYS and SCAN MATCH.
//!
//! SCAN's cursor: a key-ordered keyspace has no hash-table slot to put in a cursor, and clients parse the
//! cursor as an integer, so the cursor is an id in a server-wide table ([`Cursors`]) that maps it to the
//! database and the user key the next call starts at. The table is bounded (least recently used ids are
//! dropped beyond [`MAX_CURSORS`] entries or [`MAX_CURSOR_BYTES`] bytes of keys); a dropped or unknown id is
//! answered `ERR invalid cursor`. Ids are random 63-bit numbers, so an old id is very unlikely to name another
//! scan. Guarantees are Redis's: a key present for the whole scan is returned at least once (here exactly
//! once), and the scan ends (cursor 0).

use crate::commands::{arg_cursor, arg_i64};
use crate::keys::{self, Keyspace, Type};
use crate::resp::{Args, Reply};
use crate::store::ReadCtx;
use bytes::Bytes;
use parking_lot::Mutex;
use shaledb::ReadOptions;
use std::collections::{BTreeMap, HashMap};
use std::sync::OnceLock;

/// Matches `s` against a Redis glob pattern, case-sensitively (KEYS, SCAN MATCH): the one glob matcher of
/// the server, [`crate::commands::server_cmds::glob_match`].
pub fn glob_match(pattern: &[u8], s: &[u8]) -> bool {
    crate::commands::server_cmds::glob_match(pattern, s, false)
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

    /// Where a scan of database `db` given `cursor` goes on: `None` for cursor 0 (a new scan), Redis's
    /// `invalid cursor` for an id the table does not hold or one of another database.
    pub fn resume(&mut self, cursor: u64, db: u8) -> Result<Option<Bytes>, Reply> {
        if cursor == 0 {
            return Ok(None);
        }
        match self.get(cursor) {
            Some((d, k)) if d == db => Ok(Some(k)),
            _ => Err(Reply::err("invalid cursor")),
        }
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

/// An iterator over the meta keys of the context's database, between two positions (`Keyspace`: a position
/// is the engine key without `db 0x00`; the user key itself in a standalone server's keyspace).
pub(super) fn meta_iter(ctx: &ReadCtx<'_>, lower: Option<&[u8]>, upper: Option<&[u8]>) -> shaledb::Cursor {
    let db = ctx.db_index;
    ctx.db.cursor_opt(&ReadOptions {
        iterate_lower_bound: Some(lower.map_or_else(|| keys::meta_prefix(db).to_vec(), |l| Keyspace::pos_key(db, l))),
        iterate_upper_bound: Some(upper.map_or_else(|| keys::meta_end(db).to_vec(), |u| Keyspace::pos_key(db, u))),
        ..ReadOptions::default()
    })
}

/// The literal prefix of `pattern` as a bound on positions: the prefix itself in the ordered keyspace; none
/// in the slot-first one (keys with a common prefix are spread over the slots, and Redis Cluster reads every
/// key for a pattern too).
fn pos_prefix(ctx: &ReadCtx<'_>, pattern: Option<&[u8]>) -> Vec<u8> {
    match ctx.keyspace {
        Keyspace::Ordered => pattern.map(literal_prefix).unwrap_or_default(),
        Keyspace::Slots => Vec::new(),
    }
}

fn type_by_name(name: &[u8]) -> Option<Type> {
    let n = name.to_ascii_lowercase();
    [Type::String, Type::Hash, Type::List, Type::Set, Type::ZSet, Type::Stream]
        .into_iter()
        .find(|t| t.name().as_bytes() == n)
}

pub(super) fn scan(ctx: &ReadCtx<'_>, args: &Args) -> Reply {
    let cursor = tri!(arg_cursor(&args[1]));
    let mut pattern: Option<Bytes> = None;
    let mut count: i64 = 10;
    let mut typ: Option<Option<Type>> = None;
    let mut j = 2;
    while j < args.len() {
        let opt = args[j].to_ascii_uppercase();
        if j + 1 >= args.len() {
            return crate::commands::syntax_error();
        }
        match &opt[..] {
            b"MATCH" => pattern = Some(args[j + 1].clone()),
            b"COUNT" => {
                count = tri!(arg_i64(&args[j + 1]));
                if count < 1 {
                    return crate::commands::syntax_error();
                }
            }
            b"TYPE" => typ = Some(type_by_name(&args[j + 1])),
            _ => return crate::commands::syntax_error(),
        }
        j += 2;
    }
    let start: Option<Bytes> = tri!(cursors().lock().resume(cursor, ctx.db_index));
    let prefix = pos_prefix(ctx, pattern.as_deref());
    let lower: Vec<u8> = match &start {
        Some(s) if s[..] > prefix[..] => s.to_vec(),
        _ => prefix.clone(),
    };
    let upper = keys::prefix_end(&prefix).filter(|_| !prefix.is_empty());
    let mut it = meta_iter(ctx, Some(&lower), upper.as_deref());
    it.seek(Keyspace::pos_key(ctx.db_index, &lower));
    let mut out = Vec::new();
    let mut examined = 0i64;
    while it.valid() && examined < count {
        examined += 1;
        let k = ctx.keyspace.user_of_pos(&it.key()[2..]);
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

pub(super) fn keys_cmd(ctx: &ReadCtx<'_>, args: &Args) -> Reply {
    let pattern = &args[1];
    let prefix = pos_prefix(ctx, Some(pattern));
    let upper = keys::prefix_end(&prefix).filter(|_| !prefix.is_empty());
    let mut it = meta_iter(ctx, Some(&prefix), upper.as_deref());
    it.seek(Keyspace::pos_key(ctx.db_index, &prefix));
    let all = &pattern[..] == b"*";
    let mut out = Vec::new();
    while it.valid() {
        let k = ctx.keyspace.user_of_pos(&it.key()[2..]);
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
pub(super) fn randomkey(ctx: &ReadCtx<'_>, _: &Args) -> Reply {
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
    it.seek(Keyspace::pos_key(ctx.db_index, &target));
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
            return Reply::Bulk(Bytes::copy_from_slice(ctx.keyspace.user_of_pos(&it.key()[2..])));
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

pub(super) fn dbsize(ctx: &ReadCtx<'_>, _: &Args) -> Reply {
    match count_keys(ctx) {
        Ok(n) => Reply::Int(n),
        Err(e) => e,
    }
}
