//! Stream commands: XADD, XLEN, XRANGE, XREVRANGE, XDEL, XTRIM, XREAD (with BLOCK) and XINFO STREAM.
//! Consumer groups (XGROUP, XREADGROUP, XACK, XPENDING, XCLAIM, XAUTOCLAIM, XINFO GROUPS/CONSUMERS) answer
//! an error naming them as not supported yet.
//!
//! Layout (docs/format/server-keys.md, "Streams"): one member record per entry, `sub 0x00`, part =
//! `ms:u64be seq:u64be` (so the records are in id order and XRANGE is one ordered scan), value =
//! `node:u64be count:u32be (len:u32be bytes){2*count}` (the field/value pairs in order; `node` is the
//! entry's emulated Redis node, see below). The collection's `extra` holds seven u64be slots:
//! `last_ms last_seq max_deleted_ms max_deleted_seq entries_added tail_node tail_node_fill`.
//!
//! Redis keeps an empty stream (after XDEL or XTRIM of every entry), so a stream's meta value is written
//! even when its size is 0, unlike the other collections.
//!
//! Approximate trimming (`MAXLEN ~` / `MINID ~`) in Redis removes only whole radix-tree nodes of up to
//! `stream-node-max-entries` (100) entries. To answer the same, each entry records the node it would be in:
//! a stream starts node 0 with its first entry and opens the next node after 100 entries were added to the
//! current one (`tail_node`, `tail_node_fill`), and an emptied stream starts a fresh node. Redis also closes a
//! node at `stream-node-max-bytes` (4096 bytes); that limit is not emulated, so with large entries `~`
//! trims in larger steps than Redis would.

use super::flags::*;
use super::strings::spec;
use super::{arg_i64, syntax_error, Handler, Spec};
use crate::keys::{Coll, Type, SUB_MEMBER};
use crate::resp::{Args, Reply};
use crate::store::{ReadCtx, WriteCtx};
use bytes::Bytes;
use std::time::Duration;

pub static COMMANDS: &[Spec] = &[
    spec!("xadd", -5, WRITE | DENYOOM | FAST, 1, 1, 1, Handler::Write(xadd), "Appends a new message to a stream. Creates the key if it doesn't exist."),
    spec!("xlen", 2, READONLY | FAST, 1, 1, 1, Handler::Read(xlen), "Return the number of messages in a stream."),
    spec!("xrange", -4, READONLY, 1, 1, 1, Handler::Read(xrange), "Returns the messages from a stream within a range of IDs."),
    spec!("xrevrange", -4, READONLY, 1, 1, 1, Handler::Read(xrevrange), "Returns the messages from a stream within a range of IDs in reverse order."),
    spec!("xdel", -3, WRITE | FAST, 1, 1, 1, Handler::Write(xdel), "Returns the number of messages after removing them from a stream."),
    spec!("xtrim", -4, WRITE, 1, 1, 1, Handler::Write(xtrim), "Deletes messages from the beginning of a stream."),
    spec!("xread", -4, READONLY | BLOCKING, 0, 0, 0, Handler::Read(xread), "Returns messages from multiple streams with IDs greater than the ones requested. Blocks until a message is available otherwise."),
    spec!("xinfo", -2, 0, 0, 0, 0, Handler::Read(xinfo), "A container for stream introspection commands."),
    spec!("xgroup", -2, 0, 0, 0, 0, Handler::Write(groups_unsupported), "A container for consumer groups commands (not supported yet)."),
    spec!("xreadgroup", -7, WRITE | BLOCKING, 0, 0, 0, Handler::Write(groups_unsupported), "Returns new or historical messages from a stream for a consumer in a group (not supported yet)."),
    spec!("xack", -4, WRITE | FAST, 1, 1, 1, Handler::Write(groups_unsupported), "Returns the number of messages that were successfully acknowledged by the consumer group member of a stream (not supported yet)."),
    spec!("xpending", -3, READONLY, 1, 1, 1, Handler::Read(groups_unsupported_r), "Returns the information and entries from a stream consumer group's pending entries list (not supported yet)."),
    spec!("xclaim", -6, WRITE | FAST, 1, 1, 1, Handler::Write(groups_unsupported), "Changes, or acquires, ownership of a message in a consumer group (not supported yet)."),
    spec!("xautoclaim", -6, WRITE | FAST, 1, 1, 1, Handler::Write(groups_unsupported), "Changes, or acquires, ownership of messages in a consumer group (not supported yet)."),
];

/// Redis's `stream-node-max-entries` default (see the module comment on `~` trimming).
pub const NODE_MAX_ENTRIES: u64 = 100;

/// A stream entry id.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct Id {
    pub ms: u64,
    pub seq: u64,
}

impl Id {
    pub const MAX: Id = Id { ms: u64::MAX, seq: u64::MAX };

    pub fn part(self) -> [u8; 16] {
        let mut p = [0u8; 16];
        p[..8].copy_from_slice(&self.ms.to_be_bytes());
        p[8..].copy_from_slice(&self.seq.to_be_bytes());
        p
    }

    pub fn from_part(p: &[u8]) -> Option<Id> {
        (p.len() == 16).then(|| Id { ms: crate::keys::be_u64(&p[..8]), seq: crate::keys::be_u64(&p[8..]) })
    }

    fn next(self) -> Option<Id> {
        match self.seq.checked_add(1) {
            Some(seq) => Some(Id { ms: self.ms, seq }),
            None => self.ms.checked_add(1).map(|ms| Id { ms, seq: 0 }),
        }
    }

    fn prev(self) -> Option<Id> {
        match self.seq.checked_sub(1) {
            Some(seq) => Some(Id { ms: self.ms, seq }),
            None => self.ms.checked_sub(1).map(|ms| Id { ms, seq: u64::MAX }),
        }
    }

    pub fn text(self) -> String {
        format!("{}-{}", self.ms, self.seq)
    }

    fn reply(self) -> Reply {
        Reply::Bulk(Bytes::from(self.text()))
    }
}

fn invalid_id() -> Reply {
    Reply::err("Invalid stream ID specified as stream command argument")
}

fn parse_u64(s: &[u8]) -> Option<u64> {
    if s.is_empty() || s.len() > 20 || !s.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(s).ok()?.parse().ok()
}

/// `ms[-seq]`; a missing seq is `missing_seq`.
fn parse_id(a: &[u8], missing_seq: u64) -> Result<Id, Reply> {
    match a.iter().position(|&b| b == b'-') {
        None => Ok(Id { ms: parse_u64(a).ok_or_else(invalid_id)?, seq: missing_seq }),
        Some(d) => Ok(Id {
            ms: parse_u64(&a[..d]).ok_or_else(invalid_id)?,
            seq: parse_u64(&a[d + 1..]).ok_or_else(invalid_id)?,
        }),
    }
}

/// An XRANGE bound: `-`, `+`, `ms[-seq]` or `(ms[-seq]` (exclusive). `None` when the exclusive bound
/// leaves nothing (the caller answers the interval error).
fn parse_bound(a: &[u8], start: bool) -> Result<Id, Reply> {
    if a == b"-" {
        return Ok(Id::default());
    }
    if a == b"+" {
        return Ok(Id::MAX);
    }
    let missing = if start { 0 } else { u64::MAX };
    if let Some(rest) = a.strip_prefix(b"(") {
        let id = parse_id(rest, missing)?;
        let moved = if start { id.next() } else { id.prev() };
        return moved.ok_or_else(|| {
            Reply::err(if start { "invalid start ID for the interval" } else { "invalid end ID for the interval" })
        });
    }
    parse_id(a, missing)
}

/// The stream's fields kept in `extra`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Header {
    last: Id,
    max_deleted: Id,
    entries_added: u64,
    tail_node: u64,
    tail_fill: u64,
}

impl Header {
    fn of(c: &Coll) -> Header {
        Header {
            last: Id { ms: c.extra_u64(0), seq: c.extra_u64(1) },
            max_deleted: Id { ms: c.extra_u64(2), seq: c.extra_u64(3) },
            entries_added: c.extra_u64(4),
            tail_node: c.extra_u64(5),
            tail_fill: c.extra_u64(6),
        }
    }

    fn store(&self, c: &mut Coll) {
        for (i, v) in [
            self.last.ms,
            self.last.seq,
            self.max_deleted.ms,
            self.max_deleted.seq,
            self.entries_added,
            self.tail_node,
            self.tail_fill,
        ]
        .into_iter()
        .enumerate()
        {
            c.set_extra_u64(i, v);
        }
    }
}

/// Encodes an entry's value: `node:u64be count:u32be (len:u32be bytes)*`.
pub fn encode_entry(node: u64, pairs: &[Bytes]) -> Result<Vec<u8>, Reply> {
    let too_big = || Reply::err("stream entry too large");
    let n = u32::try_from(pairs.len() / 2).map_err(|_| too_big())?;
    let mut v = Vec::with_capacity(12 + pairs.iter().map(|p| p.len() + 4).sum::<usize>());
    v.extend_from_slice(&node.to_be_bytes());
    v.extend_from_slice(&n.to_be_bytes());
    for p in pairs {
        let len = u32::try_from(p.len()).map_err(|_| too_big())?;
        v.extend_from_slice(&len.to_be_bytes());
        v.extend_from_slice(p);
    }
    Ok(v)
}

fn corrupt() -> Reply {
    Reply::err("corrupt stream entry record")
}

/// The node of an encoded entry.
fn entry_node(v: &[u8]) -> Result<u64, Reply> {
    v.get(..8).map(crate::keys::be_u64).ok_or_else(corrupt)
}

/// Decodes an entry's field/value pairs.
pub fn decode_entry(v: &[u8]) -> Result<Vec<Bytes>, Reply> {
    let n = v.get(8..12).ok_or_else(corrupt)?;
    let n = u32::from_be_bytes([n[0], n[1], n[2], n[3]]) as usize;
    let mut out = Vec::with_capacity((2 * n).min(v.len() / 4));
    let mut at = 12;
    for _ in 0..2 * n {
        let l = v.get(at..at + 4).ok_or_else(corrupt)?;
        let l = u32::from_be_bytes([l[0], l[1], l[2], l[3]]) as usize;
        at += 4;
        out.push(Bytes::copy_from_slice(v.get(at..at + l).ok_or_else(corrupt)?));
        at += l;
    }
    if at != v.len() {
        return Err(corrupt());
    }
    Ok(out)
}

/// `[id, [field, value, ...]]`.
fn entry_reply(part: &[u8], v: &[u8]) -> Result<Reply, Reply> {
    let id = Id::from_part(part).ok_or_else(corrupt)?;
    let pairs = decode_entry(v)?;
    Ok(Reply::Array(vec![id.reply(), Reply::Array(pairs.into_iter().map(Reply::Bulk).collect())]))
}

/// Writes a stream's meta value, whatever its size (Redis keeps empty streams).
fn store_stream(ctx: &mut WriteCtx<'_>, key: &[u8], c: &Coll) -> Result<(), Reply> {
    let v = c.encode();
    ctx.put_meta_in(ctx.db_index, key, &v)
}

/// A trim request: `MAXLEN|MINID [=|~] threshold [LIMIT n]`.
#[derive(Clone, Copy, Debug)]
enum Threshold {
    MaxLen(u64),
    MinId(Id),
}

#[derive(Clone, Copy, Debug)]
struct Trim {
    threshold: Threshold,
    approx: bool,
    /// Most entries removed (approximate trims only); 0: no limit.
    limit: u64,
}

/// Parses a trim clause at `args[*i]` (the MAXLEN/MINID word); advances `*i` past it.
fn parse_trim(args: &Args, i: &mut usize) -> Result<Trim, Reply> {
    let maxlen = args[*i].eq_ignore_ascii_case(b"maxlen");
    *i += 1;
    let mut approx = false;
    if let Some(a) = args.get(*i) {
        if a.as_ref() == b"~" {
            approx = true;
            *i += 1;
        } else if a.as_ref() == b"=" {
            *i += 1;
        }
    }
    let t = args.get(*i).ok_or_else(syntax_error)?;
    let threshold = if maxlen {
        let n = arg_i64(t)?;
        if n < 0 {
            return Err(Reply::err("The MAXLEN argument must be >= 0."));
        }
        Threshold::MaxLen(n as u64)
    } else {
        Threshold::MinId(parse_id(t, 0)?)
    };
    *i += 1;
    let mut limit = None;
    if args.get(*i).is_some_and(|a| a.eq_ignore_ascii_case(b"limit")) {
        let l = args.get(*i + 1).ok_or_else(syntax_error)?;
        let n = arg_i64(l)?;
        if n < 0 {
            return Err(Reply::err("The LIMIT argument must be >= 0."));
        }
        limit = Some(n as u64);
        *i += 2;
    }
    if limit.is_some() && !approx {
        return Err(Reply::err("syntax error, LIMIT cannot be used without the special ~ option"));
    }
    Ok(Trim { threshold, approx, limit: limit.unwrap_or(if approx { 100 * NODE_MAX_ENTRIES } else { 0 }) })
}

/// Applies a trim: removes entries from the head. Returns how many were removed.
fn apply_trim(ctx: &mut WriteCtx<'_>, c: &mut Coll, t: Trim) -> Result<u64, Reply> {
    let size = c.size;
    // The entries to remove, in id order: (part, node).
    let mut doomed: Vec<[u8; 16]> = Vec::new();
    {
        let view = ctx.view();
        let mut it = view.members(c, SUB_MEMBER, None, false).peekable();
        if !t.approx {
            for r in it.by_ref() {
                let (p, _) = r?;
                let id = Id::from_part(&p).ok_or_else(corrupt)?;
                let go = match t.threshold {
                    Threshold::MaxLen(m) => size - (doomed.len() as u64) > m,
                    Threshold::MinId(min) => id < min,
                };
                if !go {
                    break;
                }
                doomed.push(id.part());
            }
        } else {
            // Whole emulated nodes only, as Redis removes whole radix-tree nodes.
            loop {
                let Some(first) = it.next() else { break };
                let (p, v) = first?;
                let node = entry_node(&v)?;
                let mut group = vec![Id::from_part(&p).ok_or_else(corrupt)?];
                while let Some(Ok((p2, v2))) = it.peek() {
                    if entry_node(v2)? != node {
                        break;
                    }
                    group.push(Id::from_part(p2).ok_or_else(corrupt)?);
                    it.next();
                }
                let live = group.len() as u64;
                let left = size - doomed.len() as u64;
                let ok = match t.threshold {
                    Threshold::MaxLen(m) => left - live >= m,
                    Threshold::MinId(min) => group.last().is_some_and(|last| *last < min),
                };
                if !ok || (t.limit != 0 && doomed.len() as u64 + live > t.limit) {
                    break;
                }
                doomed.extend(group.iter().map(|id| id.part()));
            }
        }
    }
    for p in &doomed {
        ctx.delete_member(c, SUB_MEMBER, p);
    }
    let n = doomed.len() as u64;
    c.size -= n;
    Ok(n)
}

fn xadd(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    let key = &args[1];
    let mut i = 2;
    let mut nomkstream = false;
    let mut trim = None;
    loop {
        let Some(a) = args.get(i) else { return syntax_error() };
        if a.eq_ignore_ascii_case(b"nomkstream") {
            nomkstream = true;
            i += 1;
        } else if a.eq_ignore_ascii_case(b"maxlen") || a.eq_ignore_ascii_case(b"minid") {
            trim = Some(tri!(parse_trim(args, &mut i)));
        } else {
            break;
        }
    }
    let id_arg = &args[i];
    let pairs = &args[i + 1..];
    if pairs.is_empty() || !pairs.len().is_multiple_of(2) {
        return super::wrong_arity("xadd");
    }
    // The requested id: explicit, `ms-*` (seq chosen), or `*`.
    enum Want {
        Auto,
        Ms(u64),
        Exact(Id),
    }
    let want = if id_arg.as_ref() == b"*" {
        Want::Auto
    } else if let Some(ms) = id_arg.strip_suffix(b"-*") {
        Want::Ms(tri!(parse_u64(ms).ok_or_else(invalid_id)))
    } else {
        Want::Exact(tri!(parse_id(id_arg, 0)))
    };
    if let Want::Exact(id) = want {
        if id == Id::default() {
            return Reply::err("The ID specified in XADD must be greater than 0-0");
        }
    }
    let existing = tri!(ctx.get_coll(key, Type::Stream));
    if existing.is_none() && nomkstream {
        return Reply::Nil;
    }
    let mut c = match existing {
        Some(c) => c,
        None => ctx.create_coll(key, Type::Stream),
    };
    let mut h = Header::of(&c);
    if h.last == Id::MAX {
        return Reply::err("The stream has exhausted the last possible ID, unable to add more items");
    }
    let smaller = || Reply::err("The ID specified in XADD is equal or smaller than the target stream top item");
    let id = match want {
        Want::Auto => {
            let ms = ctx.now_ms.max(h.last.ms);
            if ms == h.last.ms {
                tri!(h.last.next().ok_or_else(smaller))
            } else {
                Id { ms, seq: 0 }
            }
        }
        Want::Ms(ms) => {
            if ms < h.last.ms {
                return smaller();
            }
            if ms == h.last.ms {
                if h.last.seq == u64::MAX {
                    return smaller();
                }
                Id { ms, seq: h.last.seq + 1 }
            } else {
                Id { ms, seq: 0 }
            }
        }
        Want::Exact(id) => {
            if id <= h.last {
                return smaller();
            }
            id
        }
    };
    if c.size == 0 || h.tail_fill >= NODE_MAX_ENTRIES {
        if c.size == 0 && h.entries_added == 0 {
            h.tail_node = 0;
        } else {
            h.tail_node += 1;
        }
        h.tail_fill = 0;
    }
    let v = tri!(encode_entry(h.tail_node, pairs));
    tri!(ctx.put_member(&c, SUB_MEMBER, &id.part(), &v));
    h.tail_fill += 1;
    h.last = id;
    h.entries_added += 1;
    c.size += 1;
    if let Some(t) = trim {
        tri!(apply_trim(ctx, &mut c, t));
    }
    h.store(&mut c);
    tri!(store_stream(ctx, key, &c));
    ctx.signal_key(key);
    id.reply()
}

fn xtrim(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    let key = &args[1];
    let mut i = 2;
    if !(args[2].eq_ignore_ascii_case(b"maxlen") || args[2].eq_ignore_ascii_case(b"minid")) {
        return syntax_error();
    }
    let t = tri!(parse_trim(args, &mut i));
    if i != args.len() {
        return syntax_error();
    }
    let Some(mut c) = tri!(ctx.get_coll(key, Type::Stream)) else { return Reply::Int(0) };
    let n = tri!(apply_trim(ctx, &mut c, t));
    if n > 0 {
        tri!(store_stream(ctx, key, &c));
    }
    Reply::Int(n as i64)
}

fn xdel(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    let key = &args[1];
    let mut ids = Vec::with_capacity((args.len() - 2).min(1024));
    for a in &args[2..] {
        ids.push(tri!(parse_id(a, 0)));
    }
    let Some(mut c) = tri!(ctx.get_coll(key, Type::Stream)) else { return Reply::Int(0) };
    let mut h = Header::of(&c);
    let mut n = 0;
    for id in ids {
        if tri!(ctx.get_member(&c, SUB_MEMBER, &id.part())).is_some() {
            ctx.delete_member(&c, SUB_MEMBER, &id.part());
            c.size -= 1;
            n += 1;
            if id > h.max_deleted {
                h.max_deleted = id;
            }
        }
    }
    if n > 0 {
        h.store(&mut c);
        tri!(store_stream(ctx, key, &c));
    }
    Reply::Int(n)
}

fn xlen(ctx: &ReadCtx<'_>, args: &Args) -> Reply {
    match tri!(ctx.get_coll(&args[1], Type::Stream)) {
        Some(c) => Reply::Int(c.size as i64),
        None => Reply::Int(0),
    }
}

fn range_generic(ctx: &ReadCtx<'_>, args: &Args, rev: bool) -> Reply {
    let (a, b) = if rev { (&args[3], &args[2]) } else { (&args[2], &args[3]) };
    let start = tri!(parse_bound(a, true));
    let end = tri!(parse_bound(b, false));
    let mut count: Option<u64> = None;
    match args.len() {
        4 => {}
        6 if args[4].eq_ignore_ascii_case(b"count") => {
            let n = tri!(arg_i64(&args[5]));
            count = Some(n.max(0) as u64);
        }
        _ => return syntax_error(),
    }
    let ctx = ctx.pinned();
    let Some(c) = tri!(ctx.get_coll(&args[1], Type::Stream)) else { return Reply::Array(vec![]) };
    if count == Some(0) {
        return Reply::NilArray;
    }
    if start > end {
        return Reply::Array(vec![]);
    }
    let from = if rev { end } else { start };
    let mut out = Vec::new();
    for r in ctx.members(&c, SUB_MEMBER, Some(&from.part()), rev) {
        let (p, v) = tri!(r);
        let id = tri!(Id::from_part(&p).ok_or_else(corrupt));
        if (!rev && id > end) || (rev && id < start) {
            break;
        }
        out.push(tri!(entry_reply(&p, &v)));
        if count.is_some_and(|n| out.len() as u64 >= n) {
            break;
        }
    }
    Reply::Array(out)
}

fn xrange(ctx: &ReadCtx<'_>, args: &Args) -> Reply {
    range_generic(ctx, args, false)
}

fn xrevrange(ctx: &ReadCtx<'_>, args: &Args) -> Reply {
    range_generic(ctx, args, true)
}

/// XREAD's parsed arguments.
struct XRead {
    count: u64,
    block: Option<Option<Duration>>,
    /// Index of the first key in `args`.
    keys_at: usize,
    n: usize,
}

fn parse_xread(args: &Args) -> Result<XRead, Reply> {
    let mut count = 0u64;
    let mut block = None;
    let mut i = 1;
    while i < args.len() {
        let a = &args[i];
        if a.eq_ignore_ascii_case(b"streams") {
            let rest = args.len() - i - 1;
            if rest == 0 || !rest.is_multiple_of(2) {
                return Err(Reply::err(
                    "Unbalanced XREAD list of streams: for each stream key an ID or '$' must be specified.",
                ));
            }
            return Ok(XRead { count, block, keys_at: i + 1, n: rest / 2 });
        }
        let Some(v) = args.get(i + 1) else { return Err(syntax_error()) };
        if a.eq_ignore_ascii_case(b"count") {
            count = arg_i64(v)?.max(0) as u64;
        } else if a.eq_ignore_ascii_case(b"block") {
            let ms =
                crate::resp::parse_i64(v).ok_or_else(|| Reply::err("timeout is not an integer or out of range"))?;
            if ms < 0 {
                return Err(Reply::err("timeout is negative"));
            }
            block = Some((ms > 0).then(|| Duration::from_millis(ms as u64)));
        } else {
            return Err(syntax_error());
        }
        i += 2;
    }
    Err(syntax_error())
}

fn xread(ctx: &ReadCtx<'_>, args: &Args) -> Reply {
    let x = tri!(parse_xread(args));
    let ctx = ctx.pinned();
    // Check every key's type and id first, as Redis does.
    let mut plan = Vec::with_capacity(x.n);
    for k in 0..x.n {
        let key = &args[x.keys_at + k];
        let id_arg = &args[x.keys_at + x.n + k];
        let c = tri!(ctx.get_coll(key, Type::Stream));
        let after = if id_arg.as_ref() == b"$" {
            c.as_ref().map_or(Id::default(), |c| Header::of(c).last)
        } else {
            tri!(parse_id(id_arg, 0))
        };
        plan.push((key, c, after));
    }
    let mut out = Vec::new();
    for (key, c, after) in plan {
        let (Some(c), Some(from)) = (c, after.next()) else { continue };
        let mut entries = Vec::new();
        for r in ctx.members(&c, SUB_MEMBER, Some(&from.part()), false) {
            let (p, v) = tri!(r);
            entries.push(tri!(entry_reply(&p, &v)));
            if x.count > 0 && entries.len() as u64 >= x.count {
                break;
            }
        }
        if !entries.is_empty() {
            out.push(Reply::Array(vec![Reply::Bulk(key.clone()), Reply::Array(entries)]));
        }
    }
    if out.is_empty() {
        Reply::NilArray
    } else {
        Reply::Array(out)
    }
}

/// XREAD BLOCK: the keys and the timeout (`None`: forever); `None` without BLOCK.
pub fn blocking_keys(args: &Args) -> Option<(Vec<Bytes>, Option<Duration>)> {
    let x = parse_xread(args).ok()?;
    let timeout = x.block?;
    Some((args[x.keys_at..x.keys_at + x.n].to_vec(), timeout))
}

/// Replaces each `$` id of an XREAD by the stream's last id now (0-0 for a missing stream), so that a
/// blocked XREAD returns only entries added after it blocked. Malformed requests are returned unchanged
/// (the command itself answers the error).
pub fn resolve_dollar(ctx: &ReadCtx<'_>, mut args: Args) -> Result<Args, Reply> {
    let Ok(x) = parse_xread(&args) else { return Ok(args) };
    for k in 0..x.n {
        if args[x.keys_at + x.n + k].as_ref() != b"$" {
            continue;
        }
        let last = match ctx.get_coll(&args[x.keys_at + k], Type::Stream)? {
            Some(c) => Header::of(&c).last,
            None => Id::default(),
        };
        args[x.keys_at + x.n + k] = Bytes::from(last.text());
    }
    Ok(args)
}

fn xinfo(ctx: &ReadCtx<'_>, args: &Args) -> Reply {
    let sub = String::from_utf8_lossy(&args[1]).to_ascii_lowercase();
    match sub.as_str() {
        "stream" if args.len() == 3 => xinfo_stream(ctx, &args[2]),
        "stream" if args.len() > 3 && args[3].eq_ignore_ascii_case(b"full") => {
            Reply::err("XINFO STREAM FULL is not supported by ShaleDB yet (consumer groups are not supported yet)")
        }
        "groups" | "consumers" => groups_unsupported_r(ctx, args),
        "help" if args.len() == 2 => Reply::Array(
            [
                "XINFO <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
                "STREAM <key>",
                "    Show information about the stream.",
                "HELP",
                "    Print this help.",
            ]
            .into_iter()
            .map(|s| Reply::Simple(s.into()))
            .collect(),
        ),
        "stream" | "help" => super::wrong_arity(&format!("xinfo|{sub}")),
        _ => Reply::err(format!(
            "unknown subcommand '{}'. Try XINFO HELP.",
            String::from_utf8_lossy(&args[1]).chars().take(128).collect::<String>()
        )),
    }
}

/// A member record: `(part, value)`.
type Record = (Vec<u8>, Vec<u8>);

fn xinfo_stream(ctx: &ReadCtx<'_>, key: &[u8]) -> Reply {
    let ctx = ctx.pinned();
    let Some(c) = tri!(ctx.get_coll(key, Type::Stream)) else { return Reply::err("no such key") };
    let h = Header::of(&c);
    let edge =
        |rev: bool| -> Result<Option<Record>, Reply> { ctx.members(&c, SUB_MEMBER, None, rev).next().transpose() };
    let first = tri!(edge(false));
    let last = tri!(edge(true));
    let first_id = first.as_ref().and_then(|(p, _)| Id::from_part(p)).unwrap_or_default();
    let entry = |e: Option<Record>| -> Result<Reply, Reply> {
        match e {
            Some((p, v)) => entry_reply(&p, &v),
            None => Ok(Reply::Nil),
        }
    };
    let s = |t: &str| Reply::Bulk(Bytes::copy_from_slice(t.as_bytes()));
    Reply::Map(vec![
        (s("length"), Reply::Int(c.size as i64)),
        // No radix tree here: one engine record per entry; both count the entry records.
        (s("radix-tree-keys"), Reply::Int(c.size as i64)),
        (s("radix-tree-nodes"), Reply::Int(c.size as i64)),
        (s("last-generated-id"), h.last.reply()),
        (s("max-deleted-entry-id"), h.max_deleted.reply()),
        (s("entries-added"), Reply::Int(h.entries_added as i64)),
        (s("recorded-first-entry-id"), first_id.reply()),
        (s("groups"), Reply::Int(0)),
        (s("first-entry"), tri!(entry(first))),
        (s("last-entry"), tri!(entry(last))),
    ])
}

fn unsupported(args: &Args) -> Reply {
    let name = String::from_utf8_lossy(&args[0]).to_ascii_uppercase();
    Reply::err(format!(
        "{name}: stream consumer groups (XGROUP, XREADGROUP, XACK, XPENDING, XCLAIM, XAUTOCLAIM, XINFO GROUPS, \
         XINFO CONSUMERS) are not supported by ShaleDB yet"
    ))
}

fn groups_unsupported(_: &mut WriteCtx<'_>, args: &Args) -> Reply {
    unsupported(args)
}

fn groups_unsupported_r(_: &ReadCtx<'_>, args: &Args) -> Reply {
    unsupported(args)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_parse_and_order() {
        assert_eq!(parse_id(b"5", 0).unwrap(), Id { ms: 5, seq: 0 });
        assert_eq!(parse_id(b"5-7", 0).unwrap(), Id { ms: 5, seq: 7 });
        assert!(parse_id(b"5-x", 0).is_err());
        assert!(parse_id(b"-5", 0).is_err());
        assert!(parse_id(b"+5", 0).is_err());
        assert!(parse_id(b"18446744073709551616", 0).is_err());
        assert_eq!(parse_bound(b"(5-0", true).unwrap(), Id { ms: 5, seq: 1 });
        assert_eq!(parse_bound(b"(5-0", false).unwrap(), Id { ms: 4, seq: u64::MAX });
        assert_eq!(parse_bound(b"5", false).unwrap(), Id { ms: 5, seq: u64::MAX });
        assert!(parse_bound(b"(0-0", false).is_err());
        assert!(parse_bound(b"(18446744073709551615-18446744073709551615", true).is_err());
        let a = Id { ms: 1, seq: u64::MAX };
        let b = Id { ms: 2, seq: 0 };
        assert!(a.part() < b.part());
        assert_eq!(Id::from_part(&a.part()), Some(a));
        assert_eq!(a.next(), Some(b));
        assert_eq!(b.prev(), Some(a));
    }

    #[test]
    fn entries_round_trip() {
        let pairs = vec![Bytes::from("f"), Bytes::from(""), Bytes::from("g"), Bytes::from(vec![0u8; 300])];
        let v = encode_entry(7, &pairs).unwrap();
        assert_eq!(entry_node(&v).unwrap(), 7);
        assert_eq!(decode_entry(&v).unwrap(), pairs);
        assert!(decode_entry(&v[..v.len() - 1]).is_err());
        assert!(decode_entry(&[0u8; 5]).is_err());
    }

    #[test]
    fn header_round_trips() {
        let mut c = Coll::new(Type::Stream, 3);
        let h = Header {
            last: Id { ms: 9, seq: 2 },
            max_deleted: Id { ms: 4, seq: 1 },
            entries_added: 12,
            tail_node: 1,
            tail_fill: 2,
        };
        h.store(&mut c);
        let d = Coll::decode(&c.encode()).unwrap().unwrap();
        assert_eq!(Header::of(&d), h);
    }
}
