//! DUMP and RESTORE: a value as Redis 7.0's DUMP payload, and back (the payload format, its checks and
//! the storage are [`crate::types::rdb`]). RESTORE's options and checks come in Redis's order: options,
//! BUSYKEY, the TTL, the payload's footer, then its body.

use super::{arg_i64, syntax_error, Spec};
use crate::resp::{Args, Reply};
use crate::store::{ReadCtx, WriteCtx};
use crate::types::rdb;
use bytes::Bytes;

pub static COMMANDS: &[Spec] = &[
    cmd! { "dump", 2, READONLY, [1, 1, 1], Read(dump), "Returns a serialized representation of the value stored at a key." },
    cmd! { "restore", -4, WRITE | DENYOOM, [1, 1, 1], Write(restore), "Creates a key from the serialized representation of a value." },
];

super::coll::reply_from!(rdb::Error: Store, Coll, List, Hash, ZSet, Stream, String);

/// `DUMP key`: the payload, or nil for a missing key.
fn dump(ctx: &ReadCtx<'_>, args: &Args) -> Reply {
    match tri!(rdb::read(ctx, &args[1])) {
        Some(v) => Reply::Bulk(Bytes::from(rdb::encode(&v))),
        None => Reply::Nil,
    }
}

/// RESTORE's options after the payload.
#[derive(Debug, Default, PartialEq, Eq)]
struct Options {
    replace: bool,
    absttl: bool,
    /// Accepted and checked as Redis does; ShaleDB keeps no LRU or LFU data to set.
    idletime: Option<i64>,
    freq: Option<i64>,
}

fn parse_options(args: &[Bytes]) -> Result<Options, Reply> {
    let mut o = Options::default();
    let mut j = 0;
    while j < args.len() {
        let a = &args[j];
        let more = j + 1 < args.len();
        if a.eq_ignore_ascii_case(b"REPLACE") {
            o.replace = true;
        } else if a.eq_ignore_ascii_case(b"ABSTTL") {
            o.absttl = true;
        } else if a.eq_ignore_ascii_case(b"IDLETIME") && more && o.freq.is_none() {
            let v = arg_i64(&args[j + 1])?;
            if v < 0 {
                return Err(Reply::err("Invalid IDLETIME value, must be >= 0"));
            }
            o.idletime = Some(v);
            j += 1;
        } else if a.eq_ignore_ascii_case(b"FREQ") && more && o.idletime.is_none() {
            let v = arg_i64(&args[j + 1])?;
            if !(0..=255).contains(&v) {
                return Err(Reply::err("Invalid FREQ value, must be >= 0 and <= 255"));
            }
            o.freq = Some(v);
            j += 1;
        } else {
            return Err(syntax_error());
        }
        j += 1;
    }
    Ok(o)
}

/// `RESTORE key ttl payload [REPLACE] [ABSTTL] [IDLETIME seconds] [FREQ frequency]`.
pub(crate) fn restore(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    let key = &args[1];
    let o = tri!(parse_options(&args[4..]));
    let existing = tri!(ctx.get_meta(key));
    if !o.replace && existing.is_some() {
        return Reply::error("BUSYKEY Target key name already exists.");
    }
    let ttl = tri!(arg_i64(&args[2]));
    if ttl < 0 {
        return Reply::err("Invalid TTL value, must be >= 0");
    }
    let payload = &args[3];
    tri!(rdb::verify(payload));
    let value = tri!(rdb::decode(payload));
    tri!(rdb::check_sizes(key, &value));
    let expire_at = match ttl {
        0 => None,
        t if o.absttl => Some(t as u64),
        t => Some(ctx.now_ms.saturating_add(t as u64)),
    };
    if let Some((_, stored)) = existing {
        ctx.delete_stored(ctx.db_index, key, &stored);
    }
    if expire_at.is_some_and(|t| t <= ctx.now_ms) {
        // Already expired: Redis stores nothing (the old value is gone with REPLACE).
        return Reply::Ok;
    }
    tri!(rdb::restore(ctx, key, &value, expire_at));
    ctx.notify(crate::notify::GENERIC, "restore", key);
    Reply::Ok
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(ws: &[&str]) -> Vec<Bytes> {
        ws.iter().map(|w| Bytes::copy_from_slice(w.as_bytes())).collect()
    }

    #[test]
    fn options_parse_as_redis_does() {
        assert_eq!(parse_options(&words(&[])), Ok(Options::default()));
        let o = parse_options(&words(&["replace", "ABSTTL", "idletime", "5"])).unwrap();
        assert_eq!(o, Options { replace: true, absttl: true, idletime: Some(5), freq: None });
        assert_eq!(parse_options(&words(&["FREQ", "255"])).unwrap().freq, Some(255));
        assert_eq!(parse_options(&words(&["invalid-option"])), Err(syntax_error()));
        assert_eq!(parse_options(&words(&["IDLETIME"])), Err(syntax_error()));
        assert_eq!(parse_options(&words(&["IDLETIME", "1", "FREQ", "1"])), Err(syntax_error()));
        assert_eq!(parse_options(&words(&["IDLETIME", "-1"])), Err(Reply::err("Invalid IDLETIME value, must be >= 0")));
        assert_eq!(
            parse_options(&words(&["FREQ", "256"])),
            Err(Reply::err("Invalid FREQ value, must be >= 0 and <= 255"))
        );
        assert_eq!(parse_options(&words(&["FREQ", "x"])), Err(super::super::not_an_integer()));
    }
}
