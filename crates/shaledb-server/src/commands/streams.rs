//! Stream commands: XADD, XLEN, XRANGE, XREVRANGE, XDEL, XTRIM, XSETID, XREAD (with BLOCK) and XINFO STREAM;
//! the consumer-group commands (XGROUP, XREADGROUP, XACK, XPENDING, XCLAIM, XAUTOCLAIM, XINFO GROUPS,
//! CONSUMERS and STREAM FULL) are in its `groups` module.
//!
//! These handlers parse the arguments and build the replies; the stream's layout (ids, header slots, entry
//! records, emulated nodes, group records) and the operations on its records are [`crate::types::stream`].

mod groups;

use super::{arg_i64, syntax_error, Spec};
use crate::resp::{Args, Reply};
use crate::store::{ReadCtx, WriteCtx};
use crate::types::stream::{self, Entry, Id, NewId, Threshold, Trim};
use bytes::Bytes;
use std::time::Duration;

pub static COMMANDS: &[Spec] = &[
    cmd! { "xadd", -5, WRITE | DENYOOM | FAST, [1, 1, 1], Write(xadd), "Appends a new message to a stream. Creates the key if it doesn't exist." },
    cmd! { "xlen", 2, READONLY | FAST, [1, 1, 1], Read(xlen), "Return the number of messages in a stream." },
    cmd! { "xrange", -4, READONLY, [1, 1, 1], Read(xrange), "Returns the messages from a stream within a range of IDs." },
    cmd! { "xrevrange", -4, READONLY, [1, 1, 1], Read(xrevrange), "Returns the messages from a stream within a range of IDs in reverse order." },
    cmd! { "xdel", -3, WRITE | FAST, [1, 1, 1], Write(xdel), "Returns the number of messages after removing them from a stream." },
    cmd! { "xtrim", -4, WRITE, [1, 1, 1], Write(xtrim), "Deletes messages from the beginning of a stream." },
    cmd! { "xsetid", -3, WRITE | DENYOOM | FAST, [1, 1, 1], Write(xsetid), "An internal command for replicating stream values." },
    cmd! { "xread", -4, READONLY | BLOCKING, [0, 0, 0], Read(xread), "Returns messages from multiple streams with IDs greater than the ones requested. Blocks until a message is available otherwise." },
    cmd! { "xinfo", -2, 0, [0, 0, 0], Read(xinfo), "A container for stream introspection commands." },
    cmd! { "xgroup", -2, 0, [0, 0, 0], Write(groups::xgroup), "A container for consumer groups commands." },
    cmd! { "xreadgroup", -7, WRITE | BLOCKING, [0, 0, 0], Write(groups::xreadgroup), "Returns new or historical messages from a stream for a consumer in a group. Blocks until a message is available otherwise." },
    cmd! { "xack", -4, WRITE | FAST, [1, 1, 1], Write(groups::xack), "Returns the number of messages that were successfully acknowledged by the consumer group member of a stream." },
    cmd! { "xpending", -3, READONLY, [1, 1, 1], Read(groups::xpending), "Returns the information and entries from a stream consumer group's pending entries list." },
    cmd! { "xclaim", -6, WRITE | FAST, [1, 1, 1], Write(groups::xclaim), "Changes, or acquires, ownership of a message in a consumer group, as if the message was delivered a consumer group member." },
    cmd! { "xautoclaim", -6, WRITE | FAST, [1, 1, 1], Write(groups::xautoclaim), "Changes, or acquires, ownership of messages in a consumer group, as if the messages were delivered to as consumer group member." },
];

/// What a blocked XREADGROUP runs when one of its keys changed (not in the table: only `blocking.rs`
/// uses it): the same command, except that a key that no longer holds a stream, or a group that is gone,
/// ends the wait with Redis's error instead of Redis's immediate-call error.
pub static XREADGROUP_BLOCKED: Spec = cmd! { "xreadgroup", -7, WRITE | BLOCKING, [0, 0, 0], Write(groups::xreadgroup_blocked), "XREADGROUP, run again for a blocked client." };

/// The command a blocked client's waiter runs (see [`XREADGROUP_BLOCKED`]).
pub fn waiting_spec(spec: &'static Spec) -> &'static Spec {
    if spec.name == "xreadgroup" {
        &XREADGROUP_BLOCKED
    } else {
        spec
    }
}

super::coll::reply_from!(stream::Error: Store);

/// An id as a bulk string.
fn id_reply(id: Id) -> Reply {
    Reply::Bulk(Bytes::from(id.text()))
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

/// `[id, [field, value, ...]]`.
fn entry_reply(e: Entry) -> Reply {
    Reply::Array(vec![id_reply(e.id), Reply::Array(e.pairs.into_iter().map(Reply::Bulk).collect())])
}

/// Parses a trim clause at `args[*i]` (the MAXLEN/MINID word); advances `*i` past it.
/// `node_max` is `stream-node-max-entries`, which sizes the default LIMIT of a `~` trim.
fn parse_trim(args: &Args, i: &mut usize, node_max: u64) -> Result<Trim, Reply> {
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
    Ok(Trim {
        threshold,
        approx,
        limit: limit.unwrap_or(if approx { stream::default_approx_limit(node_max) } else { 0 }),
    })
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
            trim = Some(tri!(parse_trim(args, &mut i, ctx.stream_node_max_entries)));
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
    let want = if id_arg.as_ref() == b"*" {
        NewId::Auto
    } else if let Some(ms) = id_arg.strip_suffix(b"-*") {
        NewId::Ms(tri!(parse_u64(ms).ok_or_else(invalid_id)))
    } else {
        NewId::Exact(tri!(parse_id(id_arg, 0)))
    };
    if let NewId::Exact(id) = want {
        if id == Id::default() {
            return Reply::err("The ID specified in XADD must be greater than 0-0");
        }
    }
    match tri!(stream::add_and_trim(ctx, key, want, pairs, nomkstream, trim)) {
        Some((id, trimmed)) => {
            ctx.notify(crate::notify::STREAM, "xadd", key);
            if trimmed > 0 {
                ctx.notify(crate::notify::STREAM, "xtrim", key);
            }
            id_reply(id)
        }
        None => Reply::Nil,
    }
}

fn xtrim(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    let key = &args[1];
    let mut i = 2;
    if !(args[2].eq_ignore_ascii_case(b"maxlen") || args[2].eq_ignore_ascii_case(b"minid")) {
        return syntax_error();
    }
    let t = tri!(parse_trim(args, &mut i, ctx.stream_node_max_entries));
    if i != args.len() {
        return syntax_error();
    }
    let n = tri!(stream::trim(ctx, key, t));
    if n > 0 {
        ctx.notify(crate::notify::STREAM, "xtrim", key);
    }
    Reply::Int(n as i64)
}

fn xdel(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    let key = &args[1];
    // Redis's order: a missing key answers 0 and another type WRONGTYPE before any id is parsed.
    if tri!(stream::get_mut(ctx, key)).is_none() {
        return Reply::Int(0);
    }
    let mut ids = Vec::with_capacity((args.len() - 2).min(1024));
    for a in &args[2..] {
        ids.push(tri!(parse_id(a, 0)));
    }
    let n = tri!(stream::delete(ctx, key, &ids));
    if n > 0 {
        ctx.notify(crate::notify::STREAM, "xdel", key);
    }
    Reply::Int(n as i64)
}

fn xsetid(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    let id = tri!(parse_id(&args[2], 0));
    let mut entries_added = None;
    let mut max_deleted = None;
    let mut i = 3;
    while i < args.len() {
        let a = &args[i];
        let more = i + 1 < args.len();
        if a.eq_ignore_ascii_case(b"entriesadded") && more {
            let n = tri!(arg_i64(&args[i + 1]));
            if n < 0 {
                return Reply::err("entries_added must be positive");
            }
            entries_added = Some(n as u64);
        } else if a.eq_ignore_ascii_case(b"maxdeletedid") && more {
            let m = tri!(parse_id(&args[i + 1], 0));
            if id < m {
                return Reply::err("The ID specified in XSETID is smaller than the provided max_deleted_entry_id");
            }
            max_deleted = Some(m);
        } else {
            return syntax_error();
        }
        i += 2;
    }
    match stream::set_id(ctx, &args[1], id, entries_added, max_deleted) {
        Ok(()) => {
            ctx.notify(crate::notify::STREAM, "xsetid", &args[1]);
            Reply::Ok
        }
        Err(stream::Error::NoSuchKey) => Reply::err("no such key"),
        Err(e) => e.into(),
    }
}

fn xlen(ctx: &ReadCtx<'_>, args: &Args) -> Reply {
    match tri!(stream::get(ctx, &args[1])) {
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
    let Some(c) = tri!(stream::get(&ctx, &args[1])) else { return Reply::Array(vec![]) };
    if count == Some(0) {
        return Reply::NilArray;
    }
    if start > end {
        return Reply::Array(vec![]);
    }
    let entries = tri!(stream::range(&ctx, &c, start, end, rev, count));
    Reply::Array(entries.into_iter().map(entry_reply).collect())
}

fn xrange(ctx: &ReadCtx<'_>, args: &Args) -> Reply {
    range_generic(ctx, args, false)
}

fn xrevrange(ctx: &ReadCtx<'_>, args: &Args) -> Reply {
    range_generic(ctx, args, true)
}

/// Which command's arguments [`parse_xread`] reads.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Reading {
    Plain,
    Group,
}

/// XREAD's and XREADGROUP's parsed arguments.
struct XRead {
    count: u64,
    block: Option<Option<Duration>>,
    /// Index of the first key in `args`.
    keys_at: usize,
    n: usize,
    /// XREADGROUP's GROUP group consumer.
    group: Option<(Bytes, Bytes)>,
    noack: bool,
}

fn parse_xread(args: &Args, reading: Reading) -> Result<XRead, Reply> {
    let mut x = XRead { count: 0, block: None, keys_at: 0, n: 0, group: None, noack: false };
    let mut i = 1;
    while i < args.len() {
        let a = &args[i];
        let more = args.len() - i - 1;
        if a.eq_ignore_ascii_case(b"block") && more > 0 {
            let ms = crate::resp::parse_i64(&args[i + 1])
                .ok_or_else(|| Reply::err("timeout is not an integer or out of range"))?;
            if ms < 0 {
                return Err(Reply::err("timeout is negative"));
            }
            x.block = Some((ms > 0).then(|| Duration::from_millis(ms as u64)));
            i += 2;
        } else if a.eq_ignore_ascii_case(b"count") && more > 0 {
            x.count = arg_i64(&args[i + 1])?.max(0) as u64;
            i += 2;
        } else if a.eq_ignore_ascii_case(b"streams") && more > 0 {
            if !more.is_multiple_of(2) {
                return Err(Reply::err(
                    "Unbalanced XREAD list of streams: for each stream key an ID or '$' must be specified.",
                ));
            }
            x.keys_at = i + 1;
            x.n = more / 2;
            break;
        } else if a.eq_ignore_ascii_case(b"group") && more >= 2 {
            if reading == Reading::Plain {
                return Err(Reply::err("The GROUP option is only supported by XREADGROUP. You called XREAD instead."));
            }
            x.group = Some((args[i + 1].clone(), args[i + 2].clone()));
            i += 3;
        } else if a.eq_ignore_ascii_case(b"noack") {
            if reading == Reading::Plain {
                return Err(Reply::err("The NOACK option is only supported by XREADGROUP. You called XREAD instead."));
            }
            x.noack = true;
            i += 1;
        } else {
            return Err(syntax_error());
        }
    }
    if x.keys_at == 0 {
        return Err(syntax_error());
    }
    if reading == Reading::Group && x.group.is_none() {
        return Err(Reply::err("Missing GROUP option for XREADGROUP"));
    }
    Ok(x)
}

fn xread(ctx: &ReadCtx<'_>, args: &Args) -> Reply {
    let x = tri!(parse_xread(args, Reading::Plain));
    let ctx = ctx.pinned();
    // Check every key's type and id first, as Redis does.
    let mut plan = Vec::with_capacity(x.n);
    for k in 0..x.n {
        let key = &args[x.keys_at + k];
        let id_arg = &args[x.keys_at + x.n + k];
        let c = tri!(stream::get(&ctx, key));
        let after =
            match id_arg.as_ref() {
                b"$" => c.as_ref().map_or(Id::default(), |c| stream::Header::of(c).last),
                b">" => return Reply::err(
                    "The > ID can be specified only when calling XREADGROUP using the GROUP <group> <consumer> option.",
                ),
                a => tri!(parse_id(a, 0)),
            };
        plan.push((key, c, after));
    }
    let mut out = Vec::new();
    for (key, c, after) in plan {
        let Some(c) = c else { continue };
        let entries = tri!(stream::read_after(&ctx, &c, after, x.count));
        if !entries.is_empty() {
            let entries = entries.into_iter().map(entry_reply).collect();
            out.push(Reply::Array(vec![Reply::Bulk(key.clone()), Reply::Array(entries)]));
        }
    }
    if out.is_empty() {
        Reply::NilArray
    } else {
        Reply::Array(out)
    }
}

/// XREAD BLOCK and XREADGROUP BLOCK: the keys and the timeout (`None`: forever); `None` without BLOCK.
pub fn blocking_keys(args: &Args) -> Option<(Vec<Bytes>, Option<Duration>)> {
    let reading = if args[0].eq_ignore_ascii_case(b"xreadgroup") { Reading::Group } else { Reading::Plain };
    let x = parse_xread(args, reading).ok()?;
    let timeout = x.block?;
    Some((args[x.keys_at..x.keys_at + x.n].to_vec(), timeout))
}

/// Replaces each `$` id of an XREAD by the stream's last id now (0-0 for a missing stream), so that a
/// blocked XREAD returns only entries added after it blocked. Malformed requests are returned unchanged
/// (the command itself answers the error).
pub fn resolve_dollar(ctx: &ReadCtx<'_>, mut args: Args) -> Result<Args, Reply> {
    let Ok(x) = parse_xread(&args, Reading::Plain) else { return Ok(args) };
    for k in 0..x.n {
        if args[x.keys_at + x.n + k].as_ref() != b"$" {
            continue;
        }
        let last = stream::last_id(ctx, &args[x.keys_at + k])?;
        args[x.keys_at + x.n + k] = Bytes::from(last.text());
    }
    Ok(args)
}

fn xinfo(ctx: &ReadCtx<'_>, args: &Args) -> Reply {
    let sub = String::from_utf8_lossy(&args[1]).to_ascii_lowercase();
    let n = args.len();
    match sub.as_str() {
        "stream" if n == 3 => xinfo_stream(ctx, &args[2]),
        "stream" if n > 3 => {
            let full_ok = n == 4 || (n == 6 && args[4].eq_ignore_ascii_case(b"count"));
            if !full_ok || !args[3].eq_ignore_ascii_case(b"full") {
                return Reply::err(format!(
                    "unknown subcommand or wrong number of arguments for '{}'. Try XINFO HELP.",
                    String::from_utf8_lossy(&args[1])
                ));
            }
            let mut count = 10u64;
            if n == 6 {
                let c = tri!(arg_i64(&args[5]));
                count = if c < 0 { 10 } else { c as u64 };
            }
            groups::xinfo_stream_full(ctx, &args[2], count)
        }
        "groups" if n == 3 => groups::xinfo_groups(ctx, &args[2]),
        "consumers" if n == 4 => groups::xinfo_consumers(ctx, &args[2], &args[3]),
        "help" if n == 2 => Reply::Array(
            [
                "XINFO <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
                "CONSUMERS <key> <groupname>",
                "    Show consumers of <groupname>.",
                "GROUPS <key>",
                "    Show the stream consumer groups.",
                "STREAM <key> [FULL [COUNT <count>]",
                "    Show information about the stream.",
                "HELP",
                "    Prints this help.",
            ]
            .into_iter()
            .map(|s| Reply::Simple(s.into()))
            .collect(),
        ),
        "stream" | "help" | "groups" | "consumers" => super::wrong_arity(&format!("xinfo|{sub}")),
        _ => Reply::err(format!(
            "unknown subcommand '{}'. Try XINFO HELP.",
            String::from_utf8_lossy(&args[1]).chars().take(128).collect::<String>()
        )),
    }
}

fn xinfo_stream(ctx: &ReadCtx<'_>, key: &[u8]) -> Reply {
    let ctx = ctx.pinned();
    let Some(c) = tri!(stream::get(&ctx, key)) else { return stream::Error::NoSuchKey.into() };
    let h = stream::Header::of(&c);
    let (first, last) = tri!(stream::edges(&ctx, &c));
    let first_id = first.as_ref().map(|e| e.id).unwrap_or_default();
    let groups = tri!(groups::group_count(&ctx, &c));
    let entry = |e: Option<Entry>| e.map_or(Reply::Nil, entry_reply);
    let s = |t: &str| Reply::Bulk(Bytes::copy_from_slice(t.as_bytes()));
    Reply::Map(vec![
        (s("length"), Reply::Int(c.size as i64)),
        // No radix tree here: one engine record per entry; both count the entry records.
        (s("radix-tree-keys"), Reply::Int(c.size as i64)),
        (s("radix-tree-nodes"), Reply::Int(c.size as i64)),
        (s("last-generated-id"), id_reply(h.last)),
        (s("max-deleted-entry-id"), id_reply(h.max_deleted)),
        (s("entries-added"), Reply::Int(h.entries_added as i64)),
        (s("recorded-first-entry-id"), id_reply(first_id)),
        (s("groups"), Reply::Int(groups as i64)),
        (s("first-entry"), entry(first)),
        (s("last-entry"), entry(last)),
    ])
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
}
