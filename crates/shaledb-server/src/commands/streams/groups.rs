//! Consumer-group commands: XGROUP, XREADGROUP, XACK, XPENDING, XCLAIM, XAUTOCLAIM, and XINFO GROUPS,
//! CONSUMERS and STREAM FULL. They parse the arguments in Redis's order (the key's type and the group are
//! checked where Redis checks them) and reply; the records are [`crate::types::stream::groups`].

use super::{entry_reply, id_reply, parse_bound, parse_id, parse_xread, Reading};
use crate::commands::{arg_i64, syntax_error};
use crate::notify;
use crate::resp::{Args, Reply};
use crate::store::{ReadCtx, WriteCtx};
use crate::types::stream::groups::{self, Claim, Counters, Delivered, Group, Refused, Start};
use crate::types::stream::{self, Id};
use bytes::Bytes;

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn bulk(s: &str) -> Reply {
    Reply::Bulk(Bytes::copy_from_slice(s.as_bytes()))
}

fn nogroup(key: &[u8], group: &[u8]) -> Reply {
    Reply::Error(format!("NOGROUP No such key '{}' or consumer group '{}'", text(key), text(group)))
}

fn nogroup_for_key(key: &[u8], group: &[u8]) -> Reply {
    Reply::Error(format!("NOGROUP No such consumer group '{}' for key name '{}'", text(group), text(key)))
}

fn subcommand_error(cmd: &str, sub: &[u8]) -> Reply {
    Reply::err(format!(
        "unknown subcommand or wrong number of arguments for '{}'. Try {cmd} HELP.",
        text(sub).chars().take(128).collect::<String>()
    ))
}

/// An id accepted where Redis parses a plain (non-strict) id: `-` and `+` too.
fn parse_loose_id(a: &[u8]) -> Result<Id, Reply> {
    match a {
        b"-" => Ok(Id::default()),
        b"+" => Ok(Id::MAX),
        _ => parse_id(a, 0),
    }
}

fn delivered_reply(d: Vec<Delivered>) -> Reply {
    Reply::Array(
        d.into_iter()
            .map(|(id, pairs)| match pairs {
                Some(p) => entry_reply(stream::Entry { id, pairs: p }),
                None => Reply::Array(vec![id_reply(id), Reply::NilArray]),
            })
            .collect(),
    )
}

fn int(n: u64) -> Reply {
    Reply::Int(i64::try_from(n).unwrap_or(i64::MAX))
}

fn opt_int(n: Option<u64>) -> Reply {
    n.map_or(Reply::Nil, int)
}

// ---------------------------------------------------------------------------------------------------------
// XGROUP

const XGROUP_HELP: &[&str] = &[
    "XGROUP <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "CREATE <key> <groupname> <id|$> [option]",
    "    Create a new consumer group. Options are:",
    "    * MKSTREAM",
    "      Create the empty stream if it does not exist.",
    "    * ENTRIESREAD entries_read",
    "      Set the group's entries_read counter (internal use).",
    "CREATECONSUMER <key> <groupname> <consumer>",
    "    Create a new consumer in the specified group.",
    "DELCONSUMER <key> <groupname> <consumer>",
    "    Remove the specified consumer.",
    "DESTROY <key> <groupname>",
    "    Remove the specified group.",
    "SETID <key> <groupname> <id|$> [ENTRIESREAD entries_read]",
    "    Set the current group ID and entries_read counter.",
    "HELP",
    "    Prints this help.",
];

pub(super) fn xgroup(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    let sub = text(&args[1]).to_ascii_lowercase();
    let n = args.len();
    // Redis's arities of the subcommands.
    let arity_ok = match sub.as_str() {
        "help" => n == 2,
        "create" | "setid" => n >= 5,
        "destroy" => n == 4,
        "createconsumer" | "delconsumer" => n == 5,
        _ => {
            return Reply::err(format!(
                "unknown subcommand '{}'. Try XGROUP HELP.",
                text(&args[1]).chars().take(128).collect::<String>()
            ))
        }
    };
    if !arity_ok {
        return super::super::wrong_arity(&format!("xgroup|{sub}"));
    }
    if sub == "help" {
        return Reply::Array(XGROUP_HELP.iter().map(|s| Reply::Simple((*s).into())).collect());
    }
    // Options after the id (CREATE and SETID), checked before the key.
    let mut mkstream = false;
    let mut entries_read: Option<u64> = None;
    let mut i = 5;
    while i < n {
        let a = &args[i];
        if sub == "create" && a.eq_ignore_ascii_case(b"mkstream") {
            mkstream = true;
            i += 1;
        } else if (sub == "create" || sub == "setid") && a.eq_ignore_ascii_case(b"entriesread") && i + 1 < n {
            let v = tri!(arg_i64(&args[i + 1]));
            if v < -1 {
                return Reply::err("value for ENTRIESREAD must be positive or -1");
            }
            entries_read = u64::try_from(v).ok();
            i += 2;
        } else {
            return subcommand_error("XGROUP", &args[1]);
        }
    }
    let key = &args[2];
    let name = &args[3];
    let c = tri!(stream::get_mut(ctx, key));
    if !mkstream {
        let Some(c) = &c else {
            return Reply::err(
                "The XGROUP subcommand requires the key to exist. Note that for CREATE you may want to use the \
                 MKSTREAM option to create an empty stream automatically.",
            );
        };
        if sub != "create" && sub != "destroy" && tri!(groups::group(&ctx.view(), c, name)).is_none() {
            return nogroup_for_key(key, name);
        }
    }
    match sub.as_str() {
        "create" if n <= 8 => {
            let start = if args[4].as_ref() == b"$" { Start::Last } else { Start::Id(tri!(parse_id(&args[4], 0))) };
            match tri!(groups::create_group(ctx, key, name, start, mkstream, entries_read)) {
                Ok(()) => {
                    ctx.notify(notify::STREAM, "xgroup-create", key);
                    Reply::Ok
                }
                Err(Refused::Exists) => Reply::Error("BUSYGROUP Consumer Group name already exists".into()),
                Err(_) => Reply::err("internal: the stream vanished"),
            }
        }
        "setid" if n == 5 || n == 7 => {
            let Some(c) = c else { return Reply::err("internal: the stream vanished") };
            let id =
                if args[4].as_ref() == b"$" { stream::Header::of(&c).last } else { tri!(parse_loose_id(&args[4])) };
            let Some(g) = tri!(groups::group(&ctx.view(), &c, name)) else { return nogroup_for_key(key, name) };
            tri!(groups::set_group_id(ctx, &c, g, id, entries_read));
            ctx.notify(notify::STREAM, "xgroup-setid", key);
            Reply::Ok
        }
        "destroy" => {
            let Some(c) = c else { return Reply::err("internal: the stream vanished") };
            let gone = tri!(groups::destroy_group(ctx, &c, name));
            if gone {
                // Clients blocked on this group get -NOGROUP.
                ctx.signal_key(key);
                ctx.notify(notify::STREAM, "xgroup-destroy", key);
            }
            Reply::Int(gone as i64)
        }
        "createconsumer" => {
            let Some(c) = c else { return Reply::err("internal: the stream vanished") };
            let created = tri!(groups::create_consumer(ctx, &c, name, &args[4]));
            if created {
                ctx.notify(notify::STREAM, "xgroup-createconsumer", key);
            }
            Reply::Int(created as i64)
        }
        "delconsumer" => {
            let Some(c) = c else { return Reply::err("internal: the stream vanished") };
            let pending = tri!(groups::delete_consumer(ctx, &c, name, &args[4]));
            if pending.is_some() {
                ctx.notify(notify::STREAM, "xgroup-delconsumer", key);
            }
            Reply::Int(pending.unwrap_or(0) as i64)
        }
        _ => subcommand_error("XGROUP", &args[1]),
    }
}

/// Whether the consumer `name` of `group` exists, when stream events are published (else `true`: nothing
/// to compare, see [`notify_if_created`]).
fn consumer_seen(ctx: &mut WriteCtx<'_>, c: &crate::keys::Coll, group: &[u8], name: &[u8]) -> bool {
    ctx.notify_flags & notify::STREAM == 0 || groups::consumer(&ctx.view(), c, group, name).ok().flatten().is_some()
}

/// The `xgroup-createconsumer` event of a command that created the consumer `name` of `group` on its way
/// (XREADGROUP, XCLAIM, XAUTOCLAIM): `had` is [`consumer_seen`] before the command.
fn notify_if_created(ctx: &mut WriteCtx<'_>, key: &[u8], c: &crate::keys::Coll, group: &[u8], name: &[u8], had: bool) {
    if !had && consumer_seen(ctx, c, group, name) {
        ctx.notify(notify::STREAM, "xgroup-createconsumer", key);
    }
}

// ---------------------------------------------------------------------------------------------------------
// XREADGROUP

pub(super) fn xreadgroup(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    read_group(ctx, args, false)
}

/// XREADGROUP of a blocked client, run again when one of its keys changed: a key that no longer holds a
/// stream, or a group that is gone, ends the wait with an error (Redis's replies).
pub(super) fn xreadgroup_blocked(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    read_group(ctx, args, true)
}

fn read_group(ctx: &mut WriteCtx<'_>, args: &Args, blocked: bool) -> Reply {
    let x = tri!(parse_xread(args, Reading::Group));
    let Some((gname, cname)) = x.group.clone() else { return Reply::err("Missing GROUP option for XREADGROUP") };
    // Check every key's type, group and id first, as Redis does.
    let mut plan: Vec<(&Bytes, Option<Id>)> = Vec::with_capacity(x.n);
    for k in 0..x.n {
        let key = &args[x.keys_at + k];
        let id_arg = &args[x.keys_at + x.n + k];
        if blocked {
            let meta = tri!(ctx.get_meta(key));
            if meta.is_none_or(|(m, _)| m.typ != crate::keys::Type::Stream) {
                return Reply::Error("UNBLOCKED the stream key no longer exists".into());
            }
        }
        match tri!(groups::stream_and_group(ctx, key, &gname)) {
            Ok(_) => {}
            Err(_) if blocked => {
                return Reply::Error("NOGROUP the consumer group this client was blocked on no longer exists".into())
            }
            Err(_) => {
                return Reply::Error(format!(
                    "NOGROUP No such key '{}' or consumer group '{}' in XREADGROUP with GROUP option",
                    text(key),
                    text(&gname)
                ))
            }
        }
        let after = match id_arg.as_ref() {
            b"$" => {
                return Reply::err(
                    "The $ ID is meaningless in the context of XREADGROUP: you want to read the history of this \
                     consumer by specifying a proper ID, or use the > ID to get new messages. The $ ID would just \
                     return an empty result set.",
                )
            }
            b">" => None,
            a => Some(tri!(parse_id(a, 0))),
        };
        plan.push((key, after));
    }
    let mut out = Vec::new();
    for (key, after) in plan {
        let Ok((c, g)) = tri!(groups::stream_and_group(ctx, key, &gname)) else { continue };
        let had = consumer_seen(ctx, &c, &gname, &cname);
        let read = tri!(groups::read_group(ctx, &c, g, &cname, after, x.count, x.noack));
        notify_if_created(ctx, key, &c, &gname, &cname, had);
        if let Some(d) = read {
            out.push(Reply::Array(vec![Reply::Bulk(key.clone()), delivered_reply(d)]));
        }
    }
    if out.is_empty() {
        Reply::NilArray
    } else {
        Reply::Array(out)
    }
}

// ---------------------------------------------------------------------------------------------------------
// XACK, XPENDING

pub(super) fn xack(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    let found = tri!(groups::stream_and_group(ctx, &args[1], &args[2]));
    let Ok((c, g)) = found else { return Reply::Int(0) };
    let mut ids = Vec::with_capacity((args.len() - 3).min(1024));
    for a in &args[3..] {
        ids.push(tri!(parse_id(a, 0)));
    }
    Reply::Int(tri!(groups::ack(ctx, &c, &g.name, &ids)) as i64)
}

pub(super) fn xpending(ctx: &ReadCtx<'_>, args: &Args) -> Reply {
    let n = args.len();
    if n != 3 && !(6..=9).contains(&n) {
        return syntax_error();
    }
    let mut range = None;
    if n >= 6 {
        let mut at = 3;
        let mut min_idle = 0i64;
        if args[3].eq_ignore_ascii_case(b"idle") {
            min_idle = tri!(arg_i64(&args[4]));
            if n < 8 {
                return syntax_error();
            }
            at += 2;
        }
        let count = tri!(arg_i64(&args[at + 2])).max(0) as u64;
        let start = tri!(parse_bound(&args[at], true));
        let end = tri!(parse_bound(&args[at + 1], false));
        let consumer = args.get(at + 3).cloned();
        range = Some((min_idle, start, end, count, consumer));
    }
    let ctx = ctx.pinned();
    let Some((c, g)) = tri!(groups::stream_and_group_read(&ctx, &args[1], &args[2])) else {
        return nogroup(&args[1], &args[2]);
    };
    let now = ctx.now_ms;
    let Some((min_idle, start, end, count, consumer)) = range else {
        // The summary: count, smallest and largest id, and the count per consumer.
        let mut total = 0u64;
        let mut first = None;
        let mut last = None;
        let mut per: std::collections::BTreeMap<Bytes, u64> = Default::default();
        tri!(groups::for_pending(&ctx, &c, &g.name, Id::default(), Id::MAX, |nk| {
            total += 1;
            first.get_or_insert(nk.id);
            last = Some(nk.id);
            *per.entry(nk.consumer).or_default() += 1;
            true
        }));
        if total == 0 {
            return Reply::Array(vec![Reply::Int(0), Reply::Nil, Reply::Nil, Reply::NilArray]);
        }
        let per = per
            .into_iter()
            .map(|(name, k)| Reply::Array(vec![Reply::Bulk(name), Reply::Bulk(Bytes::from(k.to_string()))]))
            .collect();
        return Reply::Array(vec![
            int(total),
            first.map_or(Reply::Nil, id_reply),
            last.map_or(Reply::Nil, id_reply),
            Reply::Array(per),
        ]);
    };
    let mut out = Vec::new();
    if count == 0 || start > end {
        return Reply::Array(out);
    }
    let idle_ok = |delivered: u64| min_idle <= 0 || (now.saturating_sub(delivered) as i64) >= min_idle;
    let row = |nk: &groups::Nack| {
        Reply::Array(vec![
            id_reply(nk.id),
            Reply::Bulk(nk.consumer.clone()),
            int(now.saturating_sub(nk.delivered_ms)),
            int(nk.deliveries),
        ])
    };
    match consumer {
        Some(name) => {
            if tri!(groups::consumer(&ctx, &c, &g.name, &name)).is_none() {
                return Reply::Array(out);
            }
            let mut from = start;
            // The consumer's ids in pages; the idle filter may skip some.
            loop {
                let ids = tri!(groups::consumer_pending(&ctx, &c, &g.name, &name, from, end, 1024));
                let Some(&last) = ids.last() else { break };
                for id in &ids {
                    if let Some(nk) = tri!(groups::nack(&ctx, &c, &g.name, *id)) {
                        if idle_ok(nk.delivered_ms) {
                            out.push(row(&nk));
                            if out.len() as u64 >= count {
                                return Reply::Array(out);
                            }
                        }
                    }
                }
                match last.next() {
                    Some(n) if ids.len() == 1024 => from = n,
                    _ => break,
                }
            }
        }
        None => {
            tri!(groups::for_pending(&ctx, &c, &g.name, start, end, |nk| {
                if idle_ok(nk.delivered_ms) {
                    out.push(row(&nk));
                }
                (out.len() as u64) < count
            }));
        }
    }
    Reply::Array(out)
}

// ---------------------------------------------------------------------------------------------------------
// XCLAIM, XAUTOCLAIM

pub(super) fn xclaim(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    let found = tri!(groups::stream_and_group(ctx, &args[1], &args[2]));
    let Ok((c, g)) = found else { return nogroup(&args[1], &args[2]) };
    let min_idle =
        tri!(crate::resp::parse_i64(&args[4]).ok_or_else(|| Reply::err("Invalid min-idle-time argument for XCLAIM")))
            .max(0) as u64;
    // The ids run up to the first argument that is not one; options follow.
    let mut ids = Vec::new();
    let mut j = 5;
    while j < args.len() {
        match parse_id(&args[j], 0) {
            Ok(id) => ids.push(id),
            Err(_) => break,
        }
        j += 1;
    }
    let now = ctx.now_ms as i64;
    let mut o = Claim::default();
    let mut time: Option<i64> = None;
    while j < args.len() {
        let a = &args[j];
        let more = j + 1 < args.len();
        let num = |what: &str| {
            crate::resp::parse_i64(&args[j + 1])
                .ok_or_else(|| Reply::err(format!("Invalid {what} option argument for XCLAIM")))
        };
        if a.eq_ignore_ascii_case(b"force") {
            o.force = true;
        } else if a.eq_ignore_ascii_case(b"justid") {
            o.justid = true;
        } else if a.eq_ignore_ascii_case(b"idle") && more {
            time = Some(now.saturating_sub(tri!(num("IDLE"))));
            j += 1;
        } else if a.eq_ignore_ascii_case(b"time") && more {
            time = Some(tri!(num("TIME")));
            j += 1;
        } else if a.eq_ignore_ascii_case(b"retrycount") && more {
            o.retry_count = Some(tri!(num("RETRYCOUNT")).max(0) as u64);
            j += 1;
        } else if a.eq_ignore_ascii_case(b"lastid") && more {
            o.last_id = Some(tri!(parse_id(&args[j + 1], 0)));
            j += 1;
        } else {
            return Reply::err(format!("Unrecognized XCLAIM option '{}'", text(a)));
        }
        j += 1;
    }
    o.min_idle = min_idle;
    o.delivered_ms = time.map(|t| if t < 0 || t > now { now as u64 } else { t as u64 });
    let justid = o.justid;
    let had = consumer_seen(ctx, &c, &args[2], &args[3]);
    let claimed = tri!(groups::claim(ctx, &c, g, &args[3], &ids, o));
    notify_if_created(ctx, &args[1], &c, &args[2], &args[3], had);
    if justid {
        Reply::Array(claimed.into_iter().map(|(id, _)| id_reply(id)).collect())
    } else {
        delivered_reply(claimed)
    }
}

/// The most XAUTOCLAIM COUNT Redis accepts.
const MAX_AUTOCLAIM_COUNT: i64 = i64::MAX / 16;

pub(super) fn xautoclaim(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    let min_idle = tri!(
        crate::resp::parse_i64(&args[4]).ok_or_else(|| Reply::err("Invalid min-idle-time argument for XAUTOCLAIM"))
    )
    .max(0) as u64;
    let start = tri!(parse_bound(&args[5], true));
    let mut count = 100u64;
    let mut justid = false;
    let mut j = 6;
    while j < args.len() {
        let a = &args[j];
        if a.eq_ignore_ascii_case(b"count") && j + 1 < args.len() {
            let n = tri!(crate::resp::parse_i64(&args[j + 1]).ok_or_else(|| Reply::err("COUNT must be > 0")));
            if !(1..=MAX_AUTOCLAIM_COUNT).contains(&n) {
                return Reply::err("COUNT must be > 0");
            }
            count = n as u64;
            j += 1;
        } else if a.eq_ignore_ascii_case(b"justid") {
            justid = true;
        } else {
            return syntax_error();
        }
        j += 1;
    }
    let found = tri!(groups::stream_and_group(ctx, &args[1], &args[2]));
    let Ok((c, g)) = found else { return nogroup(&args[1], &args[2]) };
    let had = consumer_seen(ctx, &c, &args[2], &args[3]);
    let (next, claimed, deleted) = tri!(groups::auto_claim(ctx, &c, &g, &args[3], min_idle, start, count, justid));
    notify_if_created(ctx, &args[1], &c, &args[2], &args[3], had);
    let claimed = if justid {
        Reply::Array(claimed.into_iter().map(|(id, _)| id_reply(id)).collect())
    } else {
        delivered_reply(claimed)
    };
    Reply::Array(vec![id_reply(next), claimed, Reply::Array(deleted.into_iter().map(id_reply).collect())])
}

// ---------------------------------------------------------------------------------------------------------
// XINFO GROUPS, CONSUMERS, STREAM FULL

fn group_summary(ctx: &ReadCtx<'_>, c: &crate::keys::Coll, counters: &Counters, g: &Group) -> Result<Reply, Reply> {
    let consumers = groups::consumers(ctx, c, &g.name)?;
    let mut pending = 0u64;
    groups::for_pending(ctx, c, &g.name, Id::default(), Id::MAX, |_| {
        pending += 1;
        true
    })?;
    Ok(Reply::Map(vec![
        (bulk("name"), Reply::Bulk(g.name.clone())),
        (bulk("consumers"), int(consumers.len() as u64)),
        (bulk("pending"), int(pending)),
        (bulk("last-delivered-id"), id_reply(g.last)),
        (bulk("entries-read"), opt_int(g.entries_read)),
        (bulk("lag"), counters.lag(g).map_or(Reply::Nil, Reply::Int)),
    ]))
}

pub(super) fn xinfo_groups(ctx: &ReadCtx<'_>, key: &[u8]) -> Reply {
    let ctx = ctx.pinned();
    let Some(c) = tri!(stream::get(&ctx, key)) else { return stream::Error::NoSuchKey.into() };
    let counters = tri!(Counters::of(&ctx, &c));
    let mut out = Vec::new();
    for g in tri!(groups::groups(&ctx, &c)) {
        out.push(tri!(group_summary(&ctx, &c, &counters, &g)));
    }
    Reply::Array(out)
}

pub(super) fn xinfo_consumers(ctx: &ReadCtx<'_>, key: &[u8], group: &[u8]) -> Reply {
    let ctx = ctx.pinned();
    let Some(c) = tri!(stream::get(&ctx, key)) else { return stream::Error::NoSuchKey.into() };
    let Some(g) = tri!(groups::group(&ctx, &c, group)) else { return nogroup_for_key(key, group) };
    let now = ctx.now_ms;
    let mut out = Vec::new();
    for cons in tri!(groups::consumers(&ctx, &c, &g.name)) {
        let pending = tri!(groups::consumer_pending_count(&ctx, &c, &g.name, &cons.name));
        out.push(Reply::Map(vec![
            (bulk("name"), Reply::Bulk(cons.name)),
            (bulk("pending"), int(pending)),
            (bulk("idle"), int(now.saturating_sub(cons.seen_ms))),
        ]));
    }
    Reply::Array(out)
}

/// XINFO STREAM key FULL [COUNT n]: every field of XINFO STREAM but the edges, the first `count` entries
/// (0: all), and each group with its first `count` pending entries and its consumers.
pub(super) fn xinfo_stream_full(ctx: &ReadCtx<'_>, key: &[u8], count: u64) -> Reply {
    let ctx = ctx.pinned();
    let Some(c) = tri!(stream::get(&ctx, key)) else { return stream::Error::NoSuchKey.into() };
    let h = stream::Header::of(&c);
    let counters = tri!(Counters::of(&ctx, &c));
    let limit = if count == 0 { None } else { Some(count) };
    let entries = tri!(stream::range(&ctx, &c, Id::default(), Id::MAX, false, limit));
    let cap = usize::try_from(count).ok().filter(|n| *n > 0).unwrap_or(usize::MAX);
    let mut groups_out = Vec::new();
    for g in tri!(groups::groups(&ctx, &c)) {
        let mut pel_count = 0u64;
        let mut pending = Vec::new();
        tri!(groups::for_pending(&ctx, &c, &g.name, Id::default(), Id::MAX, |nk| {
            pel_count += 1;
            if pending.len() < cap {
                pending.push(Reply::Array(vec![
                    id_reply(nk.id),
                    Reply::Bulk(nk.consumer),
                    int(nk.delivered_ms),
                    int(nk.deliveries),
                ]));
            }
            true
        }));
        let mut consumers = Vec::new();
        for cons in tri!(groups::consumers(&ctx, &c, &g.name)) {
            let ids = tri!(groups::consumer_pending(&ctx, &c, &g.name, &cons.name, Id::default(), Id::MAX, usize::MAX));
            let mut rows = Vec::new();
            for id in ids.iter().take(cap) {
                if let Some(nk) = tri!(groups::nack(&ctx, &c, &g.name, *id)) {
                    rows.push(Reply::Array(vec![id_reply(nk.id), int(nk.delivered_ms), int(nk.deliveries)]));
                }
            }
            consumers.push(Reply::Map(vec![
                (bulk("name"), Reply::Bulk(cons.name)),
                (bulk("seen-time"), int(cons.seen_ms)),
                (bulk("pel-count"), int(ids.len() as u64)),
                (bulk("pending"), Reply::Array(rows)),
            ]));
        }
        groups_out.push(Reply::Map(vec![
            (bulk("name"), Reply::Bulk(g.name.clone())),
            (bulk("last-delivered-id"), id_reply(g.last)),
            (bulk("entries-read"), opt_int(g.entries_read)),
            (bulk("lag"), counters.lag(&g).map_or(Reply::Nil, Reply::Int)),
            (bulk("pel-count"), int(pel_count)),
            (bulk("pending"), Reply::Array(pending)),
            (bulk("consumers"), Reply::Array(consumers)),
        ]));
    }
    Reply::Map(vec![
        (bulk("length"), int(c.size)),
        (bulk("radix-tree-keys"), int(c.size)),
        (bulk("radix-tree-nodes"), int(c.size)),
        (bulk("last-generated-id"), id_reply(h.last)),
        (bulk("max-deleted-entry-id"), id_reply(h.max_deleted)),
        (bulk("entries-added"), int(h.entries_added)),
        (bulk("recorded-first-entry-id"), id_reply(counters.first)),
        (bulk("entries"), Reply::Array(entries.into_iter().map(entry_reply).collect())),
        (bulk("groups"), Reply::Array(groups_out)),
    ])
}

/// The number of groups of the stream `c` (XINFO STREAM).
pub(super) fn group_count(ctx: &ReadCtx<'_>, c: &crate::keys::Coll) -> Result<u64, Reply> {
    Ok(groups::groups(ctx, c)?.len() as u64)
}
