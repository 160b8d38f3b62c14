//! HyperLogLog commands: PFADD, PFCOUNT, PFMERGE, PFDEBUG (GETREG, DECODE, ENCODING, TODENSE) and PFSELFTEST.
//!
//! The value is a string in Redis's representation ([`crate::types::hll`]). PFCOUNT of one key writes the
//! computed estimate into the value's cache, as Redis does, so it runs in the commit step like the writes;
//! PFDEBUG GETREG and TODENSE store the dense form of a sparse value.

use super::Spec;
use crate::resp::{Args, Reply};
use crate::server::{Session, Shared};
use crate::store::WriteCtx;
use crate::types::hll::{self, Error};

#[rustfmt::skip]
pub static COMMANDS: &[Spec] = &[
    cmd! { "pfadd", -2, WRITE | DENYOOM | FAST, [1, 1, 1], Write(pfadd), "Adds elements to a HyperLogLog key. Creates the key if it doesn't exist." },
    cmd! { "pfcount", -2, READONLY, [1, -1, 1], Write(pfcount), "Returns the approximated cardinality of the set(s) observed by the HyperLogLog key(s)." },
    cmd! { "pfmerge", -2, WRITE | DENYOOM, [1, -1, 1], Write(pfmerge), "Merges one or more HyperLogLog values into a single key." },
    cmd! { "pfdebug", 3, WRITE | DENYOOM | ADMIN, [2, 2, 1], Write(pfdebug), "Internal commands for debugging HyperLogLog values." },
    cmd! { "pfselftest", 1, ADMIN, [0, 0, 0], Conn(pfselftest), "An internal command for testing HyperLogLog values." },
];

impl From<Error> for Reply {
    fn from(e: Error) -> Reply {
        match e {
            Error::Store(s) => s.into(),
            Error::NotHll => Reply::error("WRONGTYPE Key is not a valid HyperLogLog string value."),
            Error::Corrupt => Reply::error("INVALIDOBJ Corrupted HLL object detected"),
        }
    }
}

fn pfadd(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    let updated = tri!(hll::add(ctx, &args[1], &args[2..]));
    if updated {
        ctx.notify(crate::notify::STRING, "pfadd", &args[1]);
    }
    Reply::Int(updated as i64)
}

fn pfcount(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    let n = tri!(hll::count(ctx, &args[1..]));
    // An estimate over 2^63 cannot happen with 16384 registers of at most 63.
    Reply::Int(i64::try_from(n).unwrap_or(i64::MAX))
}

fn pfmerge(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    tri!(hll::merge(ctx, &args[1], &args[2..]));
    ctx.notify(crate::notify::STRING, "pfadd", &args[1]);
    Reply::Ok
}

fn pfdebug(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    let key = &args[2];
    let Some(mut s) = tri!(hll::load_mut(ctx, key)) else {
        return Reply::err("The specified key does not exist");
    };
    let sub = args[1].to_ascii_lowercase();
    match &sub[..] {
        b"getreg" => {
            if hll::is_sparse(&s.value) {
                s.value = tri!(hll::to_dense(&s.value));
                tri!(hll::save(ctx, key, Some(&s.meta), &s.value));
            }
            let regs = &s.value[hll::HDR..];
            Reply::Array((0..hll::REGISTERS).map(|i| Reply::Int(hll::dense_get(regs, i) as i64)).collect())
        }
        b"decode" => {
            if !hll::is_sparse(&s.value) {
                return Reply::err("HLL encoding is not sparse");
            }
            Reply::Bulk(hll::decode_sparse(&s.value).into())
        }
        b"encoding" => Reply::Simple(if hll::is_sparse(&s.value) { "sparse" } else { "dense" }.into()),
        b"todense" => {
            if !hll::is_sparse(&s.value) {
                return Reply::Int(0);
            }
            s.value = tri!(hll::to_dense(&s.value));
            tri!(hll::save(ctx, key, Some(&s.meta), &s.value));
            Reply::Int(1)
        }
        _ => Reply::err(format!("Unknown PFDEBUG subcommand '{}'", String::from_utf8_lossy(&args[1]))),
    }
}

/// Elements PFSELFTEST adds to check the estimator (Redis's figure).
const SELF_TEST_ELEMENTS: u64 = 10_000_000;

fn pfselftest(_: &mut Session, _: &Shared, _: &Args) -> Reply {
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0x5eed);
    // Seconds of CPU on the server's one runtime thread: the other clients wait, as they do in Redis.
    match hll::self_test(SELF_TEST_ELEMENTS, seed) {
        Ok(()) => Reply::Ok,
        Err(why) => Reply::error(format!("TESTFAILED {why}")),
    }
}
