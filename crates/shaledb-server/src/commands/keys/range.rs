//! `SHALEDB.RANGE start end [COUNT n] [REV] [WITHVALUES]`: the ordered range read over user keys (a ShaleDB
//! extension; docs/format/server-keys.md).

use super::scan::meta_iter;
use crate::commands::arg_i64;
use crate::keys::{self, Type};
use crate::resp::{Args, Reply};
use crate::store::ReadCtx;
use bytes::Bytes;

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

pub(super) fn range(ctx: &ReadCtx<'_>, args: &Args) -> Reply {
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
            _ => return crate::commands::syntax_error(),
        }
        j += 1;
    }
    // A cluster member keeps its keys slot first (keys.rs): there is no key order to read a range of.
    if ctx.keyspace == keys::Keyspace::Slots {
        return Reply::err(
            "SHALEDB.RANGE reads keys in order, and a cluster member stores them by hash slot: run it on a \
             standalone server",
        );
    }
    // Forward: start is the low end; REV: start is the high end (as ZRANGE ... BYLEX REV).
    let (low, high) = if rev { (&end, &start) } else { (&start, &end) };
    let db = ctx.db_index;
    let mut it = meta_iter(ctx, None, None);
    if rev {
        match high {
            Bound::Max => it.seek_to_last(),
            Bound::Min => return Reply::Array(vec![]),
            Bound::Incl(k) | Bound::Excl(k) => it.seek_for_prev(ctx.keyspace.meta_key(db, k)),
        }
    } else {
        match low {
            Bound::Min => it.seek_to_first(),
            Bound::Max => return Reply::Array(vec![]),
            Bound::Incl(k) | Bound::Excl(k) => it.seek(ctx.keyspace.meta_key(db, k)),
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
