//! The `cmsgpack` table scripts see: `pack`, `unpack`, `unpack_one`, `unpack_limit`, producing the same
//! MessagePack bytes as the library Redis 7.0 loads (lua-cmsgpack 0.4.0), so a payload packed by a script
//! on ShaleDB is byte-identical to Redis's:
//! - a number that is an exact 64-bit integer is packed as the smallest integer format (positive or
//!   negative fixnum, 8/16/32/64 bits), any other as a 32-bit float when that is exact, else a double;
//! - a string as fixstr, str 8, str 16 or str 32; true/false; nil, functions and userdata as nil;
//! - a table whose keys are exactly 1..n (n > 0) as an array, any other (the empty table too) as a map in
//!   the table's iteration order; tables nested 16 deep are packed as nil, so cycles end.
//!
//! Unpacking reads every format Redis's library reads (not bin, ext or fixext: `Bad data format in
//! input.`); sizes read from the input never size an allocation beyond what the input could hold, and
//! nesting deeper than [`MAX_DECODE_DEPTH`] is refused.

use super::libargs::{
    arg_error, check_integer, check_string, function, library as wrap, opt_integer, LibError, LibResult,
};
use mlua::{Lua, Table, Value};

/// Tables nested this deep are packed as nil.
const MAX_NESTING: u32 = 16;
/// Deepest nesting unpacking accepts: decoding recurses in the commit step's stack, which must not
/// overflow (Redis's library stops deeper, at Lua's C stack limit, about 2,700 levels).
pub const MAX_DECODE_DEPTH: usize = 128;
/// Most values one call returns (Lua's C stack limit).
const MAX_RESULTS: usize = 7_990;
const TOO_MANY: &str = "stack overflow (too many return values at once; use unpack_one or unpack_limit instead.)";

/// The `cmsgpack` library of one VM.
pub fn library(lua: &Lua) -> mlua::Result<Table> {
    let t = wrap(
        lua,
        vec![
            ("pack", function(lua, pack)?),
            ("unpack", function(lua, |lua, args| unpack(lua, args, 0, 0))?),
            (
                "unpack_one",
                function(lua, |lua, args| match opt_integer(args, 2, 0) {
                    Ok(offset) => unpack(lua, args, 1, offset),
                    Err(e) => Ok(Err(e)),
                })?,
            ),
            (
                "unpack_limit",
                function(lua, |lua, args| {
                    let limit = match check_integer(args, 2) {
                        Ok(l) => l,
                        Err(e) => return Ok(Err(e)),
                    };
                    match opt_integer(args, 3, 0) {
                        Ok(offset) => unpack(lua, args, limit, offset),
                        Err(e) => Ok(Err(e)),
                    }
                })?,
            ),
        ],
    )?;
    t.raw_set("_NAME", "cmsgpack")?;
    t.raw_set("_VERSION", "lua-cmsgpack 0.4.0")?;
    t.raw_set("_COPYRIGHT", "Copyright (C) 2012, Salvatore Sanfilippo")?;
    t.raw_set("_DESCRIPTION", "MessagePack C implementation for Lua")?;
    Ok(t)
}

fn pack(lua: &Lua, args: &[Value]) -> mlua::Result<LibResult<Vec<Value>>> {
    if args.is_empty() {
        return Ok(Err(arg_error(0, "MessagePack pack needs input.")));
    }
    let mut out = Vec::new();
    for v in args {
        encode(v, 0, &mut out)?;
    }
    Ok(Ok(vec![Value::String(lua.create_string(out)?)]))
}

/// Packs one value at nesting `level` (0 for an argument of `pack`).
pub fn encode(v: &Value, level: u32, out: &mut Vec<u8>) -> mlua::Result<()> {
    match v {
        Value::String(s) => encode_bytes(&s.as_bytes(), out),
        Value::Boolean(b) => out.push(if *b { 0xc3 } else { 0xc2 }),
        Value::Integer(i) => encode_number(*i as f64, out),
        Value::Number(n) => encode_number(*n, out),
        Value::Table(t) if level < MAX_NESTING => encode_table(t, level, out)?,
        _ => out.push(0xc0),
    }
    Ok(())
}

fn encode_bytes(s: &[u8], out: &mut Vec<u8>) {
    let len = s.len();
    if len < 32 {
        out.push(0xa0 | len as u8);
    } else if len <= 0xff {
        out.extend_from_slice(&[0xd9, len as u8]);
    } else if len <= 0xffff {
        out.push(0xda);
        out.extend_from_slice(&(len as u16).to_be_bytes());
    } else {
        out.push(0xdb);
        out.extend_from_slice(&(len as u32).to_be_bytes());
    }
    out.extend_from_slice(s);
}

/// The integer a number is exactly, if any (as C's `(int64_t)x == x`, with the out-of-range cases of
/// x86-64, where the conversion gives `INT64_MIN`).
fn exact_i64(n: f64) -> Option<i64> {
    if n.is_finite() && (-9_223_372_036_854_775_808.0..9_223_372_036_854_775_808.0).contains(&n) {
        let i = n as i64;
        if i as f64 == n {
            return Some(i);
        }
    }
    None
}

fn encode_number(n: f64, out: &mut Vec<u8>) {
    match exact_i64(n) {
        Some(i) => encode_int(i, out),
        None => {
            let f = n as f32;
            if f as f64 == n {
                out.push(0xca);
                out.extend_from_slice(&f.to_be_bytes());
            } else {
                out.push(0xcb);
                out.extend_from_slice(&n.to_be_bytes());
            }
        }
    }
}

fn encode_int(n: i64, out: &mut Vec<u8>) {
    if n >= 0 {
        if n <= 127 {
            out.push(n as u8);
        } else if n <= 0xff {
            out.extend_from_slice(&[0xcc, n as u8]);
        } else if n <= 0xffff {
            out.push(0xcd);
            out.extend_from_slice(&(n as u16).to_be_bytes());
        } else if n <= 0xffff_ffff {
            out.push(0xce);
            out.extend_from_slice(&(n as u32).to_be_bytes());
        } else {
            out.push(0xcf);
            out.extend_from_slice(&(n as u64).to_be_bytes());
        }
    } else if n >= -32 {
        out.push(n as i8 as u8);
    } else if n >= -128 {
        out.extend_from_slice(&[0xd0, n as i8 as u8]);
    } else if n >= -32768 {
        out.push(0xd1);
        out.extend_from_slice(&(n as i16).to_be_bytes());
    } else if n >= -2_147_483_648 {
        out.push(0xd2);
        out.extend_from_slice(&(n as i32).to_be_bytes());
    } else {
        out.push(0xd3);
        out.extend_from_slice(&n.to_be_bytes());
    }
}

fn encode_len(n: usize, fix: u8, b16: u8, b32: u8, out: &mut Vec<u8>) {
    if n <= 15 {
        out.push(fix | n as u8);
    } else if n <= 0xffff {
        out.push(b16);
        out.extend_from_slice(&(n as u16).to_be_bytes());
    } else {
        out.push(b32);
        out.extend_from_slice(&(n as u32).to_be_bytes());
    }
}

fn encode_table(t: &Table, level: u32, out: &mut Vec<u8>) -> mlua::Result<()> {
    // Two passes over the table, as nothing may hold all its keys at once (each held value takes a slot of
    // Lua's stack): count the keys and see whether they are exactly 1..n, then encode.
    let mut count = 0usize;
    let mut max = 0i64;
    let mut array = true;
    for pair in t.pairs::<Value, Value>() {
        let (k, _) = pair?;
        match k {
            // Keys that are 32-bit positive integers count towards an array.
            Value::Integer(i) if (1..=i32::MAX as i64).contains(&i) => max = max.max(i),
            _ => array = false,
        }
        count += 1;
    }
    if array && max == count as i64 {
        encode_len(count, 0x90, 0xdc, 0xdd, out);
        for j in 1..=count {
            encode(&t.raw_get::<Value>(j)?, level + 1, out)?;
        }
    } else {
        encode_len(count, 0x80, 0xde, 0xdf, out);
        for pair in t.pairs::<Value, Value>() {
            let (k, v) = pair?;
            encode(&k, level + 1, out)?;
            encode(&v, level + 1, out)?;
        }
    }
    Ok(())
}

enum DecodeError {
    Eof,
    BadFormat,
    /// A message of its own (nesting).
    Other(String),
    /// A message of the VM's (a nil or NaN map key), raised without a position.
    Unpositioned(&'static str),
    Lua(mlua::Error),
}

impl From<mlua::Error> for DecodeError {
    fn from(e: mlua::Error) -> Self {
        DecodeError::Lua(e)
    }
}

struct Cursor<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn left(&self) -> usize {
        self.data.len() - self.pos
    }

    /// The next `n` bytes, consumed.
    fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        if self.left() < n {
            return Err(DecodeError::Eof);
        }
        let s = &self.data[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    fn be(&mut self, n: usize) -> Result<u64, DecodeError> {
        Ok(self.take(n)?.iter().fold(0u64, |acc, b| (acc << 8) | *b as u64))
    }
}

fn decode(lua: &Lua, c: &mut Cursor, depth: usize) -> Result<Value, DecodeError> {
    if c.left() == 0 {
        return Err(DecodeError::Eof);
    }
    if depth > MAX_DECODE_DEPTH {
        return Err(DecodeError::Other(TOO_MANY.into()));
    }
    let tag = c.data[c.pos];
    // Integers: Lua 5.1 numbers are doubles; an unsigned 64-bit value goes through a signed one, as in
    // Redis's library on 64-bit builds.
    let v = match tag {
        0x00..=0x7f => {
            c.pos += 1;
            Value::Number(tag as f64)
        }
        0xe0..=0xff => {
            c.pos += 1;
            Value::Number(tag as i8 as f64)
        }
        0xcc..=0xd3 => {
            let n = [1usize, 2, 4, 8][((tag - 0xcc) % 4) as usize];
            if c.left() < 1 + n {
                return Err(DecodeError::Eof);
            }
            c.pos += 1;
            let raw = c.be(n)?;
            let x = match tag {
                0xcc..=0xcf => raw as i64 as f64,
                0xd0 => raw as u8 as i8 as f64,
                0xd1 => raw as u16 as i16 as f64,
                0xd2 => raw as u32 as i32 as f64,
                _ => raw as i64 as f64,
            };
            Value::Number(x)
        }
        0xc0 => {
            c.pos += 1;
            Value::Nil
        }
        0xc2 | 0xc3 => {
            c.pos += 1;
            Value::Boolean(tag == 0xc3)
        }
        0xca => {
            if c.left() < 5 {
                return Err(DecodeError::Eof);
            }
            c.pos += 1;
            Value::Number(f32::from_bits(c.be(4)? as u32) as f64)
        }
        0xcb => {
            if c.left() < 9 {
                return Err(DecodeError::Eof);
            }
            c.pos += 1;
            Value::Number(f64::from_bits(c.be(8)?))
        }
        0xa0..=0xbf | 0xd9..=0xdb => {
            let (hdr, len) = match tag {
                0xd9 => (2, c.data.get(c.pos + 1).map(|b| *b as usize)),
                0xda => (3, c.data.get(c.pos + 1..c.pos + 3).map(|b| u16::from_be_bytes([b[0], b[1]]) as usize)),
                0xdb => {
                    (5, c.data.get(c.pos + 1..c.pos + 5).map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]) as usize))
                }
                _ => (1, Some((tag & 0x1f) as usize)),
            };
            let len = len.ok_or(DecodeError::Eof)?;
            if c.left() < hdr + len {
                return Err(DecodeError::Eof);
            }
            c.pos += hdr;
            Value::String(lua.create_string(c.take(len)?)?)
        }
        0x90..=0x9f | 0xdc | 0xdd | 0x80..=0x8f | 0xde | 0xdf => {
            let (hdr, len) = match tag {
                0xdc | 0xde => (3, c.data.get(c.pos + 1..c.pos + 3).map(|b| u16::from_be_bytes([b[0], b[1]]) as usize)),
                0xdd | 0xdf => {
                    (5, c.data.get(c.pos + 1..c.pos + 5).map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]) as usize))
                }
                _ => (1, Some((tag & 0x0f) as usize)),
            };
            let len = len.ok_or(DecodeError::Eof)?;
            c.pos += hdr;
            let is_map = matches!(tag, 0x80..=0x8f | 0xde | 0xdf);
            // Every element takes at least one byte of input: the capacity never exceeds what is left.
            let cap = len.min(c.left());
            if is_map {
                let t = lua.create_table_with_capacity(0, cap / 2)?;
                for _ in 0..len {
                    let k = decode(lua, c, depth + 1)?;
                    let v = decode(lua, c, depth + 1)?;
                    match &k {
                        Value::Nil => return Err(DecodeError::Unpositioned("table index is nil")),
                        Value::Number(n) if n.is_nan() => return Err(DecodeError::Unpositioned("table index is NaN")),
                        _ => {}
                    }
                    t.raw_set(k, v)?;
                }
                Value::Table(t)
            } else {
                let t = lua.create_table_with_capacity(cap, 0)?;
                for i in 1..=len {
                    let v = decode(lua, c, depth + 1)?;
                    t.raw_set(i, v)?;
                }
                Value::Table(t)
            }
        }
        _ => return Err(DecodeError::BadFormat),
    };
    Ok(v)
}

/// `unpack` (limit 0, offset 0: every value, no offset returned), `unpack_one` and `unpack_limit`: the
/// values of the input from byte `offset`, at most `limit` of them, preceded by the offset of what is left
/// (-1 when all was read).
fn unpack(lua: &Lua, args: &[Value], limit: i64, offset: i64) -> mlua::Result<LibResult<Vec<Value>>> {
    let data = match check_string(args, 1) {
        Ok(d) => d,
        Err(e) => return Ok(Err(e)),
    };
    let decode_all = limit == 0 && offset == 0;
    if offset < 0 || limit < 0 {
        return Ok(Err(format!(
            "Invalid request to unpack with offset of {} and limit of {}.",
            offset as i32,
            data.len() as i32
        )
        .into()));
    }
    if offset as u64 > data.len() as u64 {
        return Ok(Err(
            format!("Start offset {} greater than input length {}.", offset as i32, data.len() as i32).into()
        ));
    }
    let limit = if decode_all { i32::MAX as i64 } else { limit };
    let mut c = Cursor { data: &data, pos: offset as usize };
    let mut out = Vec::new();
    if !decode_all {
        out.push(Value::Nil);
    }
    let mut count = 0i64;
    while c.left() > 0 && count < limit {
        if out.len() >= MAX_RESULTS {
            return Ok(Err(TOO_MANY.into()));
        }
        match decode(lua, &mut c, 0) {
            Ok(v) => out.push(v),
            Err(DecodeError::Eof) => return Ok(Err("Missing bytes in input.".into())),
            Err(DecodeError::BadFormat) => return Ok(Err("Bad data format in input.".into())),
            Err(DecodeError::Other(m)) => return Ok(Err(m.into())),
            Err(DecodeError::Unpositioned(m)) => return Ok(Err(LibError::Unpositioned(m.to_string()))),
            Err(DecodeError::Lua(e)) => return Err(e),
        }
        count += 1;
    }
    if !decode_all {
        out[0] = Value::Integer(if c.left() == 0 { -1 } else { c.pos as i64 });
    }
    Ok(Ok(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(v: &[u8]) -> String {
        v.iter().map(|b| format!("{b:02x}")).collect()
    }

    #[test]
    fn numbers_pack_as_redis_does() {
        for (n, h) in [
            (0.1, "cb3fb999999999999a"),
            (-1099511627776.0, "d3ffffff0000000000"),
            (1.0, "01"),
            (-1.0, "ff"),
            (-33.0, "d0df"),
            (200.0, "ccc8"),
            (65530.0, "cdfffa"),
            (100000.0, "ce000186a0"),
            (-100000.0, "d2fffe7960"),
            (1.5, "ca3fc00000"),
            (-0.0, "00"),
            (2f64.powi(63), "ca5f000000"),
            (9.223372036854777e18, "cb43e0000000000001"),
            (-(2f64.powi(63)), "d38000000000000000"),
        ] {
            let mut out = Vec::new();
            encode_number(n, &mut out);
            assert_eq!(hex(&out), h, "{n}");
        }
    }

    #[test]
    fn strings_use_the_smallest_header() {
        for (len, prefix) in [(0usize, "a0"), (31, "bf"), (32, "d920"), (256, "da0100"), (70000, "db00011170")] {
            let mut out = Vec::new();
            encode_bytes(&vec![b'x'; len], &mut out);
            assert!(hex(&out).starts_with(prefix), "{len}");
            assert_eq!(out.len(), len + prefix.len() / 2);
        }
    }

    #[test]
    fn truncated_and_bad_input_are_errors() {
        let lua = Lua::new();
        for (input, msg) in [
            (&b"\xdb\xff\xff\xff\xff"[..], "Missing bytes in input."),
            (b"\xdd\xff\xff\xff\xff\x01", "Missing bytes in input."),
            (b"\xc1", "Bad data format in input."),
            (b"\x81\xc0\x01", "table index is nil"),
        ] {
            let args = [Value::String(lua.create_string(input).unwrap())];
            let r = unpack(&lua, &args, 0, 0).unwrap();
            let expected =
                if msg.starts_with("table") { LibError::Unpositioned(msg.into()) } else { LibError::from(msg) };
            assert_eq!(r.err(), Some(expected));
        }
        let deep = vec![0x91u8; MAX_DECODE_DEPTH + 10];
        let args = [Value::String(lua.create_string(&deep).unwrap())];
        assert!(unpack(&lua, &args, 0, 0).unwrap().is_err());
    }
}
