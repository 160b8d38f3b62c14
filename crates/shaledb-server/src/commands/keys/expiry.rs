//! Expiry commands: EXPIRE, PEXPIRE, EXPIREAT, PEXPIREAT, TTL, PTTL, EXPIRETIME, PEXPIRETIME, PERSIST.

use crate::commands::arg_i64;
use crate::keys::{self, Meta};
use crate::resp::{Args, Reply};
use crate::store::{ReadCtx, WriteCtx};

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
    let invalid = || crate::commands::invalid_expire(cmd);
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
        ctx.notify(crate::notify::GENERIC, "del", &args[1]);
        return Reply::Int(1);
    }
    tri!(set_expiry(ctx, &args[1], &m, &v, Some(when as u64)));
    ctx.notify(crate::notify::GENERIC, "expire", &args[1]);
    Reply::Int(1)
}

/// Rewrites a key's meta value with a new expiry (the payload is kept).
fn set_expiry(ctx: &mut WriteCtx<'_>, key: &[u8], m: &Meta, stored: &[u8], at: Option<u64>) -> Result<(), Reply> {
    let mut v = Vec::with_capacity(stored.len() + 8);
    keys::encode_head_into(m.typ, at, &mut v);
    v.extend_from_slice(&stored[m.payload_at.min(stored.len())..]);
    ctx.put_meta_in(ctx.db_index, key, &v).map_err(Reply::from)
}

pub(super) fn expire(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    expire_generic(ctx, args, Unit::Seconds, false, "expire")
}

pub(super) fn pexpire(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    expire_generic(ctx, args, Unit::Millis, false, "pexpire")
}

pub(super) fn expireat(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    expire_generic(ctx, args, Unit::Seconds, true, "expireat")
}

pub(super) fn pexpireat(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    expire_generic(ctx, args, Unit::Millis, true, "pexpireat")
}

fn ttl_generic(ctx: &ReadCtx<'_>, key: &[u8], millis: bool, absolute: bool) -> Reply {
    let Some((m, _)) = tri!(ctx.peek_meta(key)) else { return Reply::Int(-2) };
    let Some(at) = m.expire_at_ms else { return Reply::Int(-1) };
    let t = if absolute { at } else { at.saturating_sub(ctx.now_ms) };
    let t = t.min(i64::MAX as u64) as i64;
    Reply::Int(if millis { t } else { t.saturating_add(500) / 1000 })
}

pub(super) fn ttl(ctx: &ReadCtx<'_>, args: &Args) -> Reply {
    ttl_generic(ctx, &args[1], false, false)
}

pub(super) fn pttl(ctx: &ReadCtx<'_>, args: &Args) -> Reply {
    ttl_generic(ctx, &args[1], true, false)
}

pub(super) fn expiretime(ctx: &ReadCtx<'_>, args: &Args) -> Reply {
    ttl_generic(ctx, &args[1], false, true)
}

pub(super) fn pexpiretime(ctx: &ReadCtx<'_>, args: &Args) -> Reply {
    ttl_generic(ctx, &args[1], true, true)
}
pub(super) fn persist(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    let Some((m, v)) = tri!(ctx.get_meta(&args[1])) else { return Reply::Int(0) };
    if m.expire_at_ms.is_none() {
        return Reply::Int(0);
    }
    tri!(set_expiry(ctx, &args[1], &m, &v, None));
    ctx.notify(crate::notify::GENERIC, "persist", &args[1]);
    Reply::Int(1)
}
