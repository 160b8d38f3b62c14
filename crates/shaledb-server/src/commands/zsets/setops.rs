//! ZUNION, ZINTER, ZDIFF, their STORE forms, and ZINTERCARD.

use super::parse::parse_score;
use super::range::items_reply;
use crate::commands::{arg_i64, syntax_error, wrong_type};
use crate::keys::Type;
use crate::resp::{Args, Reply};
use crate::store::{ReadCtx, WriteCtx};
use crate::types::zset::{self, Items};
use bytes::Bytes;

#[derive(Clone, Copy, PartialEq, Eq)]
enum SetOp {
    Union,
    Inter,
    Diff,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Aggregate {
    Sum,
    Min,
    Max,
}

/// A parsed ZUNION/ZINTER/ZDIFF request.
struct SetOpReq {
    keys: Vec<Bytes>,
    weights: Vec<f64>,
    aggregate: Aggregate,
    withscores: bool,
}

/// Parses `numkeys key... [WEIGHTS w...] [AGGREGATE SUM|MIN|MAX] [WITHSCORES]` from `args[at..]`. In
/// Redis's order: `check_key` (the key's type) runs on each key before the options are read, so a key of
/// another type answers WRONGTYPE even when an option is bad.
fn parse_setop(
    args: &Args,
    at: usize,
    op: SetOp,
    store: bool,
    cmd: &str,
    check_key: &mut dyn FnMut(&[u8]) -> Result<(), Reply>,
) -> Result<SetOpReq, Reply> {
    let n = arg_i64(&args[at])?;
    if n < 1 {
        return Err(Reply::err(format!("at least 1 input key is needed for '{cmd}' command")));
    }
    let first = at + 1;
    if n as u64 > (args.len() - first) as u64 {
        return Err(syntax_error());
    }
    let n = n as usize;
    let keys: Vec<Bytes> = args[first..first + n].to_vec();
    for k in &keys {
        check_key(k)?;
    }
    let mut req = SetOpReq { keys, weights: vec![1.0; n], aggregate: Aggregate::Sum, withscores: false };
    let mut j = first + n;
    while j < args.len() {
        let o = args[j].to_ascii_uppercase();
        let left = args.len() - j - 1;
        match &o[..] {
            b"WEIGHTS" if op != SetOp::Diff && left >= n => {
                for (i, w) in args[j + 1..j + 1 + n].iter().enumerate() {
                    req.weights[i] = parse_score(w).ok_or_else(|| Reply::err("weight value is not a float"))?;
                }
                j += n;
            }
            b"AGGREGATE" if op != SetOp::Diff && left >= 1 => {
                req.aggregate = match &args[j + 1].to_ascii_uppercase()[..] {
                    b"SUM" => Aggregate::Sum,
                    b"MIN" => Aggregate::Min,
                    b"MAX" => Aggregate::Max,
                    _ => return Err(syntax_error()),
                };
                j += 1;
            }
            b"WITHSCORES" if !store => req.withscores = true,
            _ => return Err(syntax_error()),
        }
        j += 1;
    }
    Ok(req)
}

fn aggregate(a: Aggregate, acc: &mut f64, v: f64) {
    match a {
        Aggregate::Sum => {
            *acc += v;
            if acc.is_nan() {
                *acc = 0.0;
            }
        }
        Aggregate::Min => *acc = acc.min(v),
        Aggregate::Max => *acc = acc.max(v),
    }
}

/// Runs a set operation: the result in sorted-set order.
fn run_setop(ctx: &ReadCtx<'_>, req: &SetOpReq, op: SetOp) -> Result<Items, zset::Error> {
    // Inputs are read (and type-checked) first, all of them, as Redis does.
    let mut inputs: Vec<(Items, f64)> = Vec::with_capacity(req.keys.len());
    for (k, w) in req.keys.iter().zip(&req.weights) {
        inputs.push((zset::load_scored(ctx, k)?.unwrap_or_default(), *w));
    }
    let weighted = |s: f64, w: f64| {
        let v = s * w;
        if v.is_nan() {
            0.0
        } else {
            v
        }
    };
    let mut out: Items = match op {
        SetOp::Union => {
            // Smallest inputs first, as Redis orders them (this decides the order of the sums).
            inputs.sort_by_key(|(i, _)| i.len());
            let mut acc: std::collections::HashMap<Vec<u8>, f64> = std::collections::HashMap::new();
            for (items, w) in inputs {
                for (m, s) in items {
                    let v = weighted(s, w);
                    match acc.get_mut(&m) {
                        Some(a) => aggregate(req.aggregate, a, v),
                        None => {
                            acc.insert(m, v);
                        }
                    }
                }
            }
            acc.into_iter().collect()
        }
        SetOp::Inter => {
            inputs.sort_by_key(|(i, _)| i.len());
            let mut it = inputs.into_iter();
            let Some((first, w0)) = it.next() else { return Ok(Vec::new()) };
            let others: Vec<(std::collections::HashMap<Vec<u8>, f64>, f64)> =
                it.map(|(items, w)| (items.into_iter().collect(), w)).collect();
            let mut res = Vec::new();
            'members: for (m, s) in first {
                let mut acc = weighted(s, w0);
                for (o, w) in &others {
                    match o.get(&m) {
                        Some(&s) => aggregate(req.aggregate, &mut acc, weighted(s, *w)),
                        None => continue 'members,
                    }
                }
                res.push((m, acc));
            }
            res
        }
        SetOp::Diff => {
            let mut it = inputs.into_iter();
            let Some((first, _)) = it.next() else { return Ok(Vec::new()) };
            let others: Vec<std::collections::HashSet<Vec<u8>>> =
                it.map(|(items, _)| items.into_iter().map(|(m, _)| m).collect()).collect();
            first.into_iter().filter(|(m, _)| !others.iter().any(|o| o.contains(m))).collect()
        }
    };
    for item in out.iter_mut() {
        if item.1 == 0.0 {
            item.1 = 0.0;
        }
    }
    out.sort_by(|a, b| a.1.total_cmp(&b.1).then_with(|| a.0.cmp(&b.0)));
    Ok(out)
}

fn setop_read(ctx: &ReadCtx<'_>, args: &Args, op: SetOp, cmd: &str) -> Reply {
    let ctx = ctx.pinned();
    let req = tri!(parse_setop(args, 1, op, false, cmd, &mut |k| match ctx.get_meta(k)? {
        Some((m, _)) if m.typ != Type::ZSet && m.typ != Type::Set => Err(wrong_type()),
        _ => Ok(()),
    }));
    // The inputs were looked up (and any miss reported) above; reading them again reports nothing.
    let items = tri!(run_setop(&ctx.pinned().reporting_misses(None), &req, op));
    items_reply(items, req.withscores)
}

fn setop_store(ctx: &mut WriteCtx<'_>, args: &Args, op: SetOp, cmd: &'static str) -> Reply {
    // Expired inputs are deleted on access, as in Redis; then everything is read through the view.
    let req = tri!(parse_setop(args, 2, op, true, cmd, &mut |k| match ctx.get_meta_to_read(k)? {
        Some((m, _)) if m.typ != Type::ZSet && m.typ != Type::Set => Err(wrong_type()),
        _ => Ok(()),
    }));
    let items = tri!(run_setop(&ctx.view(), &req, op));
    let existed = ctx.notify_flags != 0 && ctx.stored_now(&args[1]);
    ctx.replacing = existed.then(|| args[1].clone());
    let stored = zset::store(ctx, &args[1], &items);
    ctx.replacing = None;
    let n = tri!(stored);
    super::notify_store(ctx, &args[1], n > 0, existed, cmd);
    Reply::Int(n as i64)
}

pub(super) fn zunion(ctx: &ReadCtx<'_>, args: &Args) -> Reply {
    setop_read(ctx, args, SetOp::Union, "zunion")
}

pub(super) fn zinter(ctx: &ReadCtx<'_>, args: &Args) -> Reply {
    setop_read(ctx, args, SetOp::Inter, "zinter")
}

pub(super) fn zdiff(ctx: &ReadCtx<'_>, args: &Args) -> Reply {
    setop_read(ctx, args, SetOp::Diff, "zdiff")
}

pub(super) fn zunionstore(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    setop_store(ctx, args, SetOp::Union, "zunionstore")
}

pub(super) fn zinterstore(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    setop_store(ctx, args, SetOp::Inter, "zinterstore")
}

pub(super) fn zdiffstore(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    setop_store(ctx, args, SetOp::Diff, "zdiffstore")
}

pub(super) fn zintercard(ctx: &ReadCtx<'_>, args: &Args) -> Reply {
    // Redis's order and texts (those of ZINTER, not SINTERCARD's): numkeys, each key's type, then LIMIT.
    let n = tri!(arg_i64(&args[1]));
    if n < 1 {
        return Reply::err("at least 1 input key is needed for 'zintercard' command");
    }
    if n as u64 > (args.len() - 2) as u64 {
        return syntax_error();
    }
    let n = n as usize;
    let ctx = ctx.pinned();
    let keys = &args[2..2 + n];
    for k in keys {
        if let Some((m, _)) = tri!(ctx.get_meta(k)) {
            if m.typ != Type::ZSet && m.typ != Type::Set {
                return wrong_type();
            }
        }
    }
    let mut limit = 0u64;
    let mut j = 2 + n;
    while j < args.len() {
        if args[j].eq_ignore_ascii_case(b"LIMIT") && j + 1 < args.len() {
            match crate::resp::parse_i64(&args[j + 1]) {
                Some(l) if l >= 0 => limit = l as u64,
                _ => return Reply::err("LIMIT can't be negative"),
            }
            j += 2;
        } else {
            return syntax_error();
        }
    }
    let req = SetOpReq { keys: keys.to_vec(), weights: vec![1.0; n], aggregate: Aggregate::Sum, withscores: false };
    let items = tri!(run_setop(&ctx, &req, SetOp::Inter));
    let len = items.len() as u64;
    Reply::Int(if limit > 0 { len.min(limit) } else { len } as i64)
}
