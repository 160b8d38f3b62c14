//! Pieces shared by the collection commands (hashes, sets, and whoever wants them): the member cursors of
//! HSCAN/SSCAN/ZSCAN, the count checks of random picks, and the replies of collection errors.
//!
//! ## Member cursors
//! Members are stored in byte order under their collection's version, so a scan goes on from a member,
//! not from a hash-table slot. As SCAN does (commands/keys/scan.rs), the cursor a client sees is an id in a
//! bounded, server-wide table mapping it to the member the next call starts at; an unknown or evicted id is
//! `ERR invalid cursor`. A cursor names a position in member order, not a version: used on a collection
//! that was replaced meanwhile it still goes on in order. Guarantees are Redis's (a member present for the
//! whole scan is returned, here exactly once; the scan ends with cursor 0). COUNT is the number of members
//! examined per call (MATCH filters after), and a collection of at most [`coll::SMALL_SCAN`] members is returned
//! whole by the first call with cursor 0, as Redis does for its small (listpack/intset) encodings.
//!
//! ## Random picks
//! HRANDFIELD, SRANDMEMBER and SPOP pick with [`crate::types::coll`] (the method is described there); this
//! module reads and bounds their counts ([`pick_count`], [`pick_bound`]).

use super::keys::{glob_match, Cursors};
use super::{arg_i64, syntax_error};
use crate::keys::Coll;
use crate::resp::{Args, Reply};
use crate::store::ReadCtx;
use crate::types::coll;
use bytes::Bytes;
use parking_lot::Mutex;
use std::sync::OnceLock;

/// `reply_from!(list::Error: Store)`: `impl From<list::Error> for Reply` for the error enum of a `types/`
/// module: the variants named (wrapping the store's or another module's error) answer as that error does
/// (`From<store::Error> for Reply` gives Redis's texts where Redis has one), the type's own cases as
/// `-ERR <text>`, their `Display`.
macro_rules! reply_from {
    ($t:ident::Error: $($wrap:ident),+) => {
        impl From<$t::Error> for $crate::resp::Reply {
            fn from(e: $t::Error) -> $crate::resp::Reply {
                match e {
                    $($t::Error::$wrap(e) => e.into(),)+
                    #[allow(unreachable_patterns)]
                    other => $crate::resp::Reply::err(other),
                }
            }
        }
    };
}
pub(crate) use reply_from;

reply_from!(coll::Error: Store);

/// Most elements a random pick with repetitions (negative count) answers: bounds the reply's memory.
pub const MAX_PICK: u64 = 1 << 22;

fn cursors() -> &'static Mutex<Cursors> {
    static C: OnceLock<Mutex<Cursors>> = OnceLock::new();
    C.get_or_init(Default::default)
}

/// Parsed `cursor [MATCH pattern] [COUNT count]` of HSCAN/SSCAN/ZSCAN.
pub struct ScanArgs {
    pub cursor: u64,
    pub pattern: Option<Bytes>,
    pub count: u64,
}

/// Parses the cursor at `args[at]` and the options after it.
pub fn parse_scan_args(args: &Args, at: usize) -> Result<ScanArgs, Reply> {
    let cursor = std::str::from_utf8(&args[at])
        .ok()
        .and_then(|s| s.parse::<u64>().ok())
        .ok_or_else(|| Reply::err("invalid cursor"))?;
    let mut sa = ScanArgs { cursor, pattern: None, count: 10 };
    let mut j = at + 1;
    while j < args.len() {
        if j + 1 >= args.len() {
            return Err(syntax_error());
        }
        let opt = args[j].to_ascii_uppercase();
        match &opt[..] {
            b"MATCH" => sa.pattern = Some(args[j + 1].clone()),
            b"COUNT" => {
                let n = arg_i64(&args[j + 1])?;
                if n < 1 {
                    return Err(syntax_error());
                }
                sa.count = n as u64;
            }
            _ => return Err(syntax_error()),
        }
        j += 2;
    }
    Ok(sa)
}

/// One step of a member scan of `c` (HSCAN, SSCAN): calls `emit(part, value)` for each member examined that
/// matches the pattern, and returns the cursor of the next call (0: done).
pub fn scan_members(
    ctx: &ReadCtx<'_>,
    c: &Coll,
    sa: &ScanArgs,
    mut emit: impl FnMut(Vec<u8>, Vec<u8>),
) -> Result<u64, Reply> {
    let start: Option<Bytes> = if sa.cursor == 0 {
        None
    } else {
        match cursors().lock().get(sa.cursor) {
            Some((db, part)) if db == ctx.db_index => Some(part),
            _ => return Err(Reply::err("invalid cursor")),
        }
    };
    let budget = if start.is_none() && c.size <= coll::SMALL_SCAN { u64::MAX } else { sa.count };
    let pattern = sa.pattern.as_deref();
    let next = coll::scan_step(ctx, c, start.as_deref(), budget, |part, value| {
        if pattern.is_none_or(|p| glob_match(p, &part)) {
            emit(part, value);
        }
    })?;
    Ok(match next {
        Some(part) => cursors().lock().insert(ctx.db_index, Bytes::from(part)),
        None => 0,
    })
}

/// The `[cursor, [items]]` reply of a scan.
pub fn scan_reply(next: u64, items: Vec<Reply>) -> Reply {
    Reply::Array(vec![Reply::bulk(next.to_string()), Reply::Array(items)])
}

/// Reads the count of HRANDFIELD/SRANDMEMBER/ZRANDMEMBER as Redis does: an integer within
/// ±(2^63 - 1). Checked before the key is looked up, as Redis does.
pub fn pick_count(a: &[u8]) -> Result<i64, Reply> {
    match arg_i64(a)? {
        i64::MIN => {
            Err(Reply::err("value is out of range, value must between -9223372036854775807 and 9223372036854775807"))
        }
        n => Ok(n),
    }
}

/// With WITHVALUES/WITHSCORES Redis refuses a count beyond ±2^62 (the reply has twice as many items).
pub fn check_pairs_count(n: i64) -> Result<(), Reply> {
    if !(-(i64::MAX / 2)..=i64::MAX / 2).contains(&n) {
        return Err(Reply::err("value is out of range"));
    }
    Ok(())
}

/// A count read by [`pick_count`] as `(count, distinct)`, once the key is known to exist: refuses a
/// negative count whose magnitude is above [`MAX_PICK`] (Redis would build a reply that large in memory).
pub fn pick_bound(n: i64) -> Result<(u64, bool), Reply> {
    if n >= 0 {
        return Ok((n as u64, true));
    }
    let m = n.unsigned_abs();
    if m > MAX_PICK {
        return Err(Reply::err(format!("value is out of range, ShaleDB answers at most {MAX_PICK} random elements")));
    }
    Ok((m, false))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(words: &[&str]) -> Args {
        words.iter().map(|w| Bytes::copy_from_slice(w.as_bytes())).collect()
    }

    #[test]
    fn scan_arguments_parse_like_redis() {
        let sa = parse_scan_args(&args(&["HSCAN", "k", "0", "MATCH", "a*", "COUNT", "5"]), 2).unwrap();
        assert_eq!((sa.cursor, sa.pattern.as_deref(), sa.count), (0, Some(&b"a*"[..]), 5));
        let bad = |w: &[&str]| match parse_scan_args(&args(w), 2) {
            Err(Reply::Error(e)) => e,
            _ => panic!("{w:?} parsed"),
        };
        assert_eq!(bad(&["HSCAN", "k", "-1"]), "ERR invalid cursor");
        assert_eq!(bad(&["HSCAN", "k", "0", "COUNT", "0"]), "ERR syntax error");
        assert_eq!(bad(&["HSCAN", "k", "0", "COUNT"]), "ERR syntax error");
        assert_eq!(bad(&["HSCAN", "k", "0", "BOGUS", "1"]), "ERR syntax error");
        assert_eq!(bad(&["HSCAN", "k", "0", "COUNT", "x"]), "ERR value is not an integer or out of range");
        assert_eq!(pick_count(b"-3").map(pick_bound), Ok(Ok((3, false))));
        assert_eq!(pick_count(b"3").map(pick_bound), Ok(Ok((3, true))));
        assert!(pick_count(b"-9223372036854775808").is_err());
        assert!(pick_count(b"x").is_err());
        assert!(pick_bound(-(MAX_PICK as i64) - 1).is_err());
        assert!(check_pairs_count(i64::MAX / 2).is_ok());
        assert_eq!(check_pairs_count(-9223372036854770000), Err(Reply::err("value is out of range")));
    }
}
