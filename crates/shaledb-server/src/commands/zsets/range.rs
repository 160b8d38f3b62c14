//! ZRANGE (BYSCORE/BYLEX/REV/LIMIT/WITHSCORES), its older forms (ZRANGEBYSCORE, ZREVRANGEBYSCORE, ZRANGEBYLEX,
//! ZREVRANGEBYLEX, ZREVRANGE) and ZRANGESTORE.

use super::parse::double;
use crate::commands::{arg_i64, syntax_error};
use crate::keys::Coll;
use crate::resp::{Args, Reply};
use crate::store::{ReadCtx, WriteCtx};
use crate::types::zset::{self, Items, LexRange, Limit, Range, ScoreRange};
use bytes::Bytes;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum By {
    Rank,
    Score,
    Lex,
}

/// A parsed range request.
#[derive(Debug)]
pub(super) struct RangeReq {
    pub(super) by: By,
    pub(super) rev: bool,
    pub(super) withscores: bool,
    pub(super) limit: Option<Limit>,
    /// The range arguments, already swapped for REV of BYSCORE/BYLEX (`a` is the low end).
    pub(super) a: Bytes,
    pub(super) b: Bytes,
}

/// Which command is parsing (what options it takes).
#[derive(Clone, Copy, PartialEq, Eq)]
enum RangeCmd {
    /// ZRANGE and ZRANGESTORE (`store`): every option.
    Generic { store: bool },
    /// ZRANGEBYSCORE / ZREVRANGEBYSCORE / ZRANGEBYLEX / ZREVRANGEBYLEX / ZRANGE / ZREVRANGE of old.
    Fixed { by: By, rev: bool },
}

/// Parses `key min max [options]` from `args[first..]` (first = the key's index + 1).
fn parse_range(args: &Args, first: usize, cmd: RangeCmd) -> Result<RangeReq, Reply> {
    let (mut by, mut rev, generic, store) = match cmd {
        RangeCmd::Generic { store } => (None, false, true, store),
        RangeCmd::Fixed { by, rev } => (Some(by), rev, false, false),
    };
    let mut withscores = false;
    let mut limit = None;
    let mut j = first + 2;
    while j < args.len() {
        let o = args[j].to_ascii_uppercase();
        let left = args.len() - j - 1;
        match &o[..] {
            b"WITHSCORES" if !store => withscores = true,
            b"LIMIT" if left >= 2 => {
                let offset = crate::commands::arg_i64(&args[j + 1])?;
                let count = crate::commands::arg_i64(&args[j + 2])?;
                limit = Some(Limit { offset, count });
                j += 2;
            }
            b"REV" if generic && !rev => rev = true,
            b"BYSCORE" if generic && by.is_none() => by = Some(By::Score),
            b"BYLEX" if generic && by.is_none() => by = Some(By::Lex),
            _ => return Err(syntax_error()),
        }
        j += 1;
    }
    let by = by.unwrap_or(By::Rank);
    // As Redis: LIMIT with a count other than -1 needs BYSCORE or BYLEX; `LIMIT n -1` is ignored by index.
    if limit.is_some_and(|l| l.count != -1) && by == By::Rank {
        return Err(Reply::err("syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX"));
    }
    if withscores && by == By::Lex {
        return Err(Reply::err("syntax error, WITHSCORES not supported in combination with BYLEX"));
    }
    let (mut a, mut b) = (args[first].clone(), args[first + 1].clone());
    if rev && by != By::Rank {
        std::mem::swap(&mut a, &mut b);
    }
    Ok(RangeReq { by, rev, withscores, limit, a, b })
}

/// The range a request names, ready to run.
fn range_spec(q: &RangeReq) -> Result<Range, Reply> {
    Ok(match q.by {
        By::Rank => Range::Rank(arg_i64(&q.a)?, arg_i64(&q.b)?),
        By::Score => Range::Score(ScoreRange::parse(&q.a, &q.b)?),
        By::Lex => Range::Lex(LexRange::parse(&q.a, &q.b)?),
    })
}

/// The items of a range, in reply order.
fn run_range(ctx: &ReadCtx<'_>, c: &Coll, q: &RangeReq, spec: &Range) -> Result<Items, zset::Error> {
    zset::run(ctx, c, spec, q.rev, q.limit.unwrap_or(Limit::ALL))
}

pub(super) fn items_reply(items: Items, withscores: bool) -> Reply {
    if withscores {
        Reply::Pairs(items.into_iter().map(|(m, s)| (Reply::Bulk(m.into()), double(s))).collect())
    } else {
        Reply::Array(items.into_iter().map(|(m, _)| Reply::Bulk(m.into())).collect())
    }
}

fn range_read(ctx: &ReadCtx<'_>, args: &Args, cmd: RangeCmd) -> Reply {
    let q = tri!(parse_range(args, 2, cmd));
    let spec = tri!(range_spec(&q));
    let ctx = ctx.pinned();
    let Some(c) = tri!(zset::get(&ctx, &args[1])) else { return Reply::Array(Vec::new()) };
    items_reply(tri!(run_range(&ctx, &c, &q, &spec)), q.withscores)
}

pub(super) fn zrange(ctx: &ReadCtx<'_>, args: &Args) -> Reply {
    range_read(ctx, args, RangeCmd::Generic { store: false })
}

pub(super) fn zrevrange(ctx: &ReadCtx<'_>, args: &Args) -> Reply {
    range_read(ctx, args, RangeCmd::Fixed { by: By::Rank, rev: true })
}

pub(super) fn zrangebyscore(ctx: &ReadCtx<'_>, args: &Args) -> Reply {
    range_read(ctx, args, RangeCmd::Fixed { by: By::Score, rev: false })
}

pub(super) fn zrevrangebyscore(ctx: &ReadCtx<'_>, args: &Args) -> Reply {
    range_read(ctx, args, RangeCmd::Fixed { by: By::Score, rev: true })
}

pub(super) fn zrangebylex(ctx: &ReadCtx<'_>, args: &Args) -> Reply {
    range_read(ctx, args, RangeCmd::Fixed { by: By::Lex, rev: false })
}

pub(super) fn zrevrangebylex(ctx: &ReadCtx<'_>, args: &Args) -> Reply {
    range_read(ctx, args, RangeCmd::Fixed { by: By::Lex, rev: true })
}

pub(super) fn zrangestore(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    let q = tri!(parse_range(args, 3, RangeCmd::Generic { store: true }));
    let spec = tri!(range_spec(&q));
    let items = match tri!(zset::get_mut(ctx, &args[2])) {
        Some(c) => tri!(run_range(&ctx.view(), &c, &q, &spec)),
        None => {
            ctx.note_miss(&args[2]);
            Vec::new()
        }
    };
    let existed = ctx.notify_flags != 0 && ctx.stored_now(&args[1]);
    ctx.replacing = existed.then(|| args[1].clone());
    let stored = zset::store(ctx, &args[1], &items);
    ctx.replacing = None;
    let n = tri!(stored);
    super::notify_store(ctx, &args[1], n > 0, existed, "zrangestore");
    Reply::Int(n as i64)
}
