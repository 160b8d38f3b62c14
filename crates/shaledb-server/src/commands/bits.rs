//! Bit commands on strings: SETBIT, GETBIT, BITCOUNT, BITPOS, BITOP, BITFIELD, BITFIELD_RO; and LCS.
//!
//! Redis 7.0's arguments, replies, error texts and the order it checks them in (e.g. BITCOUNT and BITPOS
//! look the key up before reading their range, so a missing key answers before a bad range is noticed;
//! BITFIELD reads all its operations before the key). These handlers parse and reply; the bit arithmetic
//! and the writes are [`crate::types::bits`], on the string's own record ([`crate::types::string`]).

use super::{arg_i64, syntax_error, Spec};
use crate::resp::{Args, Reply};
use crate::store::{self, ReadCtx, WriteCtx};
use crate::types::bits::{self, BitOp, Field, FieldOp, FieldType, Overflow, MAX_BIT_OFFSET};
use crate::types::string;

pub static COMMANDS: &[Spec] = &[
    cmd! { "setbit", 4, WRITE | DENYOOM, [1, 1, 1], Write(setbit), "Sets or clears the bit at an offset of a string, creating or growing it." },
    cmd! { "getbit", 3, READONLY | FAST, [1, 1, 1], Read(getbit), "Returns the bit at an offset of a string." },
    cmd! { "bitcount", -2, READONLY, [1, 1, 1], Read(bitcount), "Counts the set bits of a string, or of a range of its bytes or bits." },
    cmd! { "bitpos", -3, READONLY, [1, 1, 1], Read(bitpos), "Finds the first set or clear bit of a string, or of a range of its bytes or bits." },
    cmd! { "bitop", -4, WRITE | DENYOOM, [2, -1, 1], Write(bitop), "Stores the AND, OR, XOR or NOT of strings in a key." },
    cmd! { "bitfield", -2, WRITE | DENYOOM, [1, 1, 1], Write(bitfield), "Gets, sets and increments integer fields of arbitrary width and offset in a string." },
    cmd! { "bitfield_ro", -2, READONLY | FAST, [1, 1, 1], Read(bitfield_ro), "Gets integer fields of arbitrary width and offset in a string." },
    cmd! { "lcs", -3, READONLY, [1, 2, 1], Read(lcs), "Finds the longest common subsequence of two strings." },
];

fn offset_error() -> Reply {
    Reply::err("bit offset is not an integer or out of range")
}

/// A bit offset as Redis reads it: a non-negative integer whose byte lies within 512 MB. With `field_bits`
/// (BITFIELD), `#n` means the n-th field of that width.
fn bit_offset(a: &[u8], field_bits: Option<u32>) -> Result<u64, Reply> {
    let (digits, times) = match (a.first(), field_bits) {
        (Some(b'#'), Some(w)) => (&a[1..], i64::from(w)),
        _ => (a, 1),
    };
    let v = crate::resp::parse_i64(digits).and_then(|v| v.checked_mul(times)).ok_or_else(offset_error)?;
    match u64::try_from(v) {
        Ok(v) if v <= MAX_BIT_OFFSET => Ok(v),
        _ => Err(offset_error()),
    }
}

/// `BIT` or `BYTE` (the unit of a BITCOUNT or BITPOS range): true for bits.
fn range_unit(a: &[u8]) -> Result<bool, Reply> {
    super::either(a, b"BIT", b"BYTE").ok_or_else(syntax_error)
}

fn setbit(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    let offset = tri!(bit_offset(&args[2], None));
    let on = match crate::resp::parse_i64(&args[3]) {
        Some(0) => false,
        Some(1) => true,
        _ => return Reply::err("bit is not an integer or out of range"),
    };
    // Redis's event is for a change: a new key, a longer string, or a bit that flips.
    let grows = ctx.notify_flags != 0
        && match string::get_stored_mut(ctx, &args[1]) {
            Ok(found) => string::value_of(found).is_none_or(|v| (offset >> 3) as usize >= v.len()),
            Err(_) => false,
        };
    let old = tri!(bits::set_bit(ctx, &args[1], offset, on));
    if grows || old != on {
        ctx.notify(crate::notify::STRING, "setbit", &args[1]);
    }
    Reply::Int(i64::from(old))
}

fn getbit(ctx: &ReadCtx<'_>, args: &Args) -> Reply {
    let offset = tri!(bit_offset(&args[2], None));
    let v = tri!(string::get(ctx, &args[1])).unwrap_or_default();
    Reply::Int(i64::from(bits::bit_at(&v, offset)))
}

fn bitcount(ctx: &ReadCtx<'_>, args: &Args) -> Reply {
    let Some(v) = tri!(string::get(ctx, &args[1])) else { return Reply::Int(0) };
    let range = match args.len() {
        2 => bits::bit_range(v.len(), 0, -1, false),
        4 | 5 => {
            let start = tri!(arg_i64(&args[2]));
            let end = tri!(arg_i64(&args[3]));
            if start < 0 && end < 0 && start > end {
                return Reply::Int(0);
            }
            let in_bits = if args.len() == 5 { tri!(range_unit(&args[4])) } else { false };
            bits::bit_range(v.len(), start, end, in_bits)
        }
        _ => return syntax_error(),
    };
    Reply::Int(range.map_or(0, |(a, b)| bits::count(&v, a, b) as i64))
}

fn bitpos(ctx: &ReadCtx<'_>, args: &Args) -> Reply {
    let bit = match tri!(arg_i64(&args[2])) {
        0 => false,
        1 => true,
        _ => return Reply::err("The bit argument must be 1 or 0."),
    };
    // A missing key is an endless run of clear bits.
    let Some(v) = tri!(string::get(ctx, &args[1])) else { return Reply::Int(if bit { -1 } else { 0 }) };
    let (range, end_given) = match args.len() {
        3 => (bits::bit_range(v.len(), 0, -1, false), false),
        4..=6 => {
            let start = tri!(arg_i64(&args[3]));
            let in_bits = if args.len() == 6 { tri!(range_unit(&args[5])) } else { false };
            let end = if args.len() >= 5 { Some(tri!(arg_i64(&args[4]))) } else { None };
            (bits::bit_range(v.len(), start, end.unwrap_or(-1), in_bits), end.is_some())
        }
        _ => return syntax_error(),
    };
    Reply::Int(range.map_or(-1, |(a, b)| bits::position(&v, bit, a, b, end_given)))
}

fn bitop(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    let op = match &args[1].to_ascii_uppercase()[..] {
        b"AND" => BitOp::And,
        b"OR" => BitOp::Or,
        b"XOR" => BitOp::Xor,
        b"NOT" => BitOp::Not,
        _ => return syntax_error(),
    };
    if op == BitOp::Not && args.len() != 4 {
        return Reply::err("BITOP NOT must be called with a single source key.");
    }
    let existed = ctx.notify_flags != 0 && ctx.stored_now(&args[2]);
    ctx.replacing = existed.then(|| args[2].clone());
    let stored = bits::bitop_store(ctx, op, &args[2], &args[3..]);
    ctx.replacing = None;
    let len = tri!(stored);
    if len > 0 {
        ctx.notify(crate::notify::STRING, "set", &args[2]);
    } else if existed {
        ctx.notify(crate::notify::GENERIC, "del", &args[2]);
    }
    Reply::Int(len as i64)
}

/// A BITFIELD type: `i1`..`i64` or `u1`..`u63`.
fn field_type(a: &[u8]) -> Result<FieldType, Reply> {
    let bad =
        || Reply::err("Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but i64 is.");
    let signed = match a.first() {
        Some(b'i') => true,
        Some(b'u') => false,
        _ => return Err(bad()),
    };
    match crate::resp::parse_i64(&a[1..]) {
        Some(n) if n >= 1 && n <= if signed { 64 } else { 63 } => Ok(FieldType { signed, bits: n as u32 }),
        _ => Err(bad()),
    }
}

/// BITFIELD's operations, all read before the key is looked up, as Redis does.
fn parse_fields(args: &Args) -> Result<Vec<Field>, Reply> {
    let mut fields = Vec::new();
    let mut overflow = Overflow::default();
    let mut j = 2;
    while j < args.len() {
        let rest = args.len() - j - 1;
        let sub = args[j].to_ascii_uppercase();
        let op = match &sub[..] {
            b"GET" if rest >= 2 => FieldOp::Get,
            b"SET" if rest >= 3 => FieldOp::Set(0),
            b"INCRBY" if rest >= 3 => FieldOp::IncrBy(0),
            b"OVERFLOW" if rest >= 1 => {
                overflow = match &args[j + 1].to_ascii_uppercase()[..] {
                    b"WRAP" => Overflow::Wrap,
                    b"SAT" => Overflow::Sat,
                    b"FAIL" => Overflow::Fail,
                    _ => return Err(Reply::err("Invalid OVERFLOW type specified")),
                };
                j += 2;
                continue;
            }
            _ => return Err(syntax_error()),
        };
        let ty = field_type(&args[j + 1])?;
        let offset = bit_offset(&args[j + 2], Some(ty.bits))?;
        let op = match op {
            FieldOp::Get => op,
            FieldOp::Set(_) => FieldOp::Set(arg_i64(&args[j + 3])?),
            FieldOp::IncrBy(_) => FieldOp::IncrBy(arg_i64(&args[j + 3])?),
        };
        fields.push(Field { op, ty, offset, overflow });
        j += if op == FieldOp::Get { 3 } else { 4 };
    }
    Ok(fields)
}

fn field_replies(replies: impl Iterator<Item = Option<i64>>) -> Reply {
    Reply::Array(replies.map(|r| r.map_or(Reply::Nil, Reply::Int)).collect())
}

fn bitfield(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    let fields = tri!(parse_fields(args));
    if fields.iter().all(|f| f.op == FieldOp::Get) {
        let found = tri!(string::get_stored_mut(ctx, &args[1]));
        if found.is_none() {
            ctx.note_miss(&args[1]);
        }
        let v = string::value_of(found).unwrap_or_default();
        return field_replies(fields.iter().map(|f| Some(bits::get_field(&v, f))));
    }
    let results = tri!(bits::bitfield(ctx, &args[1], &fields));
    if fields.iter().zip(&results).any(|(f, r)| f.op != FieldOp::Get && r.is_some()) {
        ctx.notify(crate::notify::STRING, "setbit", &args[1]);
    }
    field_replies(results.into_iter())
}

fn bitfield_ro(ctx: &ReadCtx<'_>, args: &Args) -> Reply {
    let fields = tri!(parse_fields(args));
    if fields.iter().any(|f| f.op != FieldOp::Get) {
        return Reply::err("BITFIELD_RO only supports the GET subcommand");
    }
    let v = tri!(string::get(ctx, &args[1])).unwrap_or_default();
    field_replies(fields.iter().map(|f| Some(bits::get_field(&v, f))))
}

/// A string for LCS: empty when missing; another type is LCS's own error.
fn lcs_input(ctx: &ReadCtx<'_>, key: &[u8]) -> Result<bytes::Bytes, Reply> {
    match string::get(ctx, key) {
        Ok(v) => Ok(v.unwrap_or_default()),
        Err(string::Error::Store(store::Error::WrongType)) => {
            Err(Reply::err("The specified keys must contain string values"))
        }
        Err(e) => Err(e.into()),
    }
}

fn lcs(ctx: &ReadCtx<'_>, args: &Args) -> Reply {
    let ctx = ctx.pinned();
    let a = tri!(lcs_input(&ctx, &args[1]));
    let b = tri!(lcs_input(&ctx, &args[2]));
    let (mut len, mut idx, mut with_len, mut min_run) = (false, false, false, 0u64);
    let mut j = 3;
    while j < args.len() {
        match &args[j].to_ascii_uppercase()[..] {
            b"IDX" => idx = true,
            b"LEN" => len = true,
            b"WITHMATCHLEN" => with_len = true,
            b"MINMATCHLEN" if j + 1 < args.len() => {
                j += 1;
                min_run = tri!(arg_i64(&args[j])).max(0) as u64;
            }
            _ => return syntax_error(),
        }
        j += 1;
    }
    if len && idx {
        return Reply::err("If you want both the length and indexes, please just use IDX.");
    }
    let r = match bits::lcs(&a, &b, idx || !len, min_run) {
        Ok(r) => r,
        Err(e) => return Reply::err(e),
    };
    if idx {
        let pair = |p: (u32, u32)| Reply::Array(vec![Reply::Int(i64::from(p.0)), Reply::Int(i64::from(p.1))]);
        let matches = r
            .matches
            .iter()
            .map(|m| {
                let mut item = vec![pair(m.a), pair(m.b)];
                if with_len {
                    item.push(Reply::Int(i64::from(m.run_len())));
                }
                Reply::Array(item)
            })
            .collect();
        Reply::Map(vec![
            (Reply::bulk("matches"), Reply::Array(matches)),
            (Reply::bulk("len"), Reply::Int(i64::from(r.len))),
        ])
    } else if len {
        Reply::Int(i64::from(r.len))
    } else {
        Reply::bulk(r.text)
    }
}

#[cfg(test)]
mod tests {
    use super::super::not_an_integer;
    use super::*;
    use bytes::Bytes;

    fn a(s: &str) -> Args {
        s.split(' ').map(|w| Bytes::copy_from_slice(w.as_bytes())).collect()
    }

    #[test]
    fn offsets_are_checked_before_use() {
        assert_eq!(bit_offset(b"0", None), Ok(0));
        assert_eq!(bit_offset(b"4294967295", None), Ok(MAX_BIT_OFFSET));
        for bad in [&b"4294967296"[..], b"-1", b"x", b"", b"#1", b"1.0"] {
            assert_eq!(bit_offset(bad, None), Err(offset_error()), "{bad:?}");
        }
        assert_eq!(bit_offset(b"#3", Some(8)), Ok(24));
        assert_eq!(bit_offset(b"#", Some(8)), Err(offset_error()));
        assert_eq!(bit_offset(b"#9223372036854775807", Some(2)), Err(offset_error()), "no overflow");
        assert_eq!(bit_offset(b"#536870912", Some(8)), Err(offset_error()), "past 512 MB");
    }

    #[test]
    fn bitfield_arguments_parse_like_redis() {
        let f = parse_fields(&a("bitfield k OVERFLOW SAT INCRBY u8 #2 5 GET i64 0 overflow fail SET i1 1 -1")).unwrap();
        assert_eq!(f.len(), 3);
        assert_eq!(
            f[0],
            Field {
                op: FieldOp::IncrBy(5),
                ty: FieldType { signed: false, bits: 8 },
                offset: 16,
                overflow: Overflow::Sat
            }
        );
        assert_eq!(f[1].op, FieldOp::Get);
        assert_eq!(f[2].overflow, Overflow::Fail);
        let type_err =
            "ERR Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but i64 is.";
        for bad in ["bitfield k GET u64 0", "bitfield k GET i65 0", "bitfield k GET i0 0", "bitfield k GET I8 0"] {
            assert_eq!(parse_fields(&a(bad)), Err(Reply::Error(type_err.into())), "{bad}");
        }
        assert_eq!(parse_fields(&a("bitfield k GET u8")), Err(syntax_error()));
        assert_eq!(parse_fields(&a("bitfield k OVERFLOW up")), Err(Reply::err("Invalid OVERFLOW type specified")));
        assert_eq!(parse_fields(&a("bitfield k SET u8 0 x")), Err(not_an_integer()));
        assert_eq!(parse_fields(&a("bitfield k GET u8 -1")), Err(offset_error()));
    }
}
