//! The `struct` table scripts see: `struct.pack(fmt, ...)`, `struct.unpack(fmt, data [, pos])` and
//! `struct.size(fmt)`, with the format language of the struct library Redis 7.0 loads (as on x86-64):
//! - `>` big-endian, `<` little-endian (the default, native), `!N` maximum alignment N (a power of 2,
//!   8 without N), spaces ignored;
//! - `b`/`B` 1-byte, `h`/`H` 2-byte, `l`/`L` and `T` 8-byte, `iN`/`IN` N-byte (4 without N, at most 32)
//!   integers, lower case signed; `f` float, `d` double; `x` one zero byte;
//! - `cN` N bytes of a string (`c0`: the whole string when packing, the length read just before when
//!   unpacking), `s` a zero-terminated string.
//!
//! Integers go through 64 bits as in the C library (bytes past the eighth of a wide integer are zero on
//! packing). Nothing is allocated from a size read in the format beyond the strings and data given.

use super::libargs::{
    arg_error, c_i64, c_u64, check_number, check_string, function, library as wrap, opt_integer, to_number, LibResult,
};
use mlua::{Lua, Table, Value};

/// Widest integer format (`i32`).
const MAX_INT_SIZE: u64 = 32;
/// Default maximum alignment (`!` without a number): a double's alignment on x86-64.
const MAX_ALIGN: i64 = 8;
/// Most values one `unpack` returns (Lua's C stack limit).
const MAX_RESULTS: usize = 7_990;

/// The `struct` library of one VM.
pub fn library(lua: &Lua) -> mlua::Result<Table> {
    wrap(
        lua,
        vec![
            ("pack", function(lua, pack)?),
            ("unpack", function(lua, unpack)?),
            ("size", function(lua, |_, args| Ok(size(args).map(|n| vec![Value::Integer(n as i64)])))?),
        ],
    )
}

struct Header {
    big: bool,
    align: u64,
}

impl Header {
    fn new() -> Header {
        Header { big: false, align: 1 }
    }
}

/// Reads a format string left to right.
struct Format<'a> {
    fmt: &'a [u8],
    pos: usize,
}

impl Format<'_> {
    fn next(&mut self) -> Option<u8> {
        let c = *self.fmt.get(self.pos)?;
        self.pos += 1;
        Some(c)
    }

    /// The number written at this point of the format, or `default`.
    fn number(&mut self, default: i64) -> LibResult<i64> {
        if !self.fmt.get(self.pos).is_some_and(u8::is_ascii_digit) {
            return Ok(default);
        }
        let mut a: i64 = 0;
        while let Some(d) = self.fmt.get(self.pos).filter(|d| d.is_ascii_digit()) {
            let d = (d - b'0') as i64;
            if a > i32::MAX as i64 / 10 || a * 10 > i32::MAX as i64 - d {
                return Err("integral size overflow".into());
            }
            a = a * 10 + d;
            self.pos += 1;
        }
        Ok(a)
    }

    /// The size of option `opt` (reading its number, if it takes one).
    fn size(&mut self, opt: u8) -> LibResult<u64> {
        Ok(match opt {
            b'B' | b'b' | b'x' => 1,
            b'H' | b'h' => 2,
            b'L' | b'l' | b'T' | b'd' => 8,
            b'f' => 4,
            b'c' => self.number(1)? as u64,
            b'i' | b'I' => {
                let sz = self.number(4)?;
                if sz as u64 > MAX_INT_SIZE {
                    return Err(format!("integral size {sz} is larger than limit of {MAX_INT_SIZE}").into());
                }
                sz as u64
            }
            _ => 0,
        })
    }

    /// Applies a control option (endianness, alignment, space), or fails on an unknown option.
    fn control(&mut self, opt: u8, h: &mut Header) -> LibResult<()> {
        match opt {
            b' ' => {}
            b'>' => h.big = true,
            b'<' => h.big = false,
            b'!' => {
                let a = self.number(MAX_ALIGN)?;
                if !(a > 0 && a & (a - 1) == 0) {
                    return Err(format!("alignment {a} is not a power of 2").into());
                }
                h.align = a as u64;
            }
            _ => return Err(arg_error(1, &format!("invalid format option '{}'", opt as char))),
        }
        Ok(())
    }
}

/// Padding before an item of `size` bytes at offset `len`.
fn to_align(len: u64, h: &Header, opt: u8, size: u64) -> u64 {
    if size == 0 || opt == b'c' {
        return 0;
    }
    let size = size.min(h.align);
    size.wrapping_sub(len & size.wrapping_sub(1)) & size.wrapping_sub(1)
}

fn is_int_option(opt: u8) -> bool {
    matches!(opt, b'b' | b'B' | b'h' | b'H' | b'l' | b'L' | b'T' | b'i' | b'I')
}

fn put_integer(n: f64, big: bool, size: u64, out: &mut Vec<u8>) {
    let mut value = if n < 0.0 { c_i64(n) as u64 } else { c_u64(n) };
    let mut buf = [0u8; MAX_INT_SIZE as usize];
    let size = size as usize;
    for i in 0..size {
        let at = if big { size - 1 - i } else { i };
        buf[at] = (value & 0xff) as u8;
        value >>= 8;
    }
    out.extend_from_slice(&buf[..size]);
}

fn get_integer(bytes: &[u8], big: bool, signed: bool) -> f64 {
    let size = bytes.len();
    let mut l: u64 = 0;
    for i in 0..size {
        let b = if big { bytes[i] } else { bytes[size - 1 - i] };
        l = (l << 8) | b as u64;
    }
    if !signed {
        return l as f64;
    }
    // As the C library on x86-64: the shift count is taken modulo 64.
    let mask = u64::MAX.wrapping_shl((size as i64 * 8 - 1) as u32);
    if l & mask != 0 {
        l |= mask;
    }
    l as i64 as f64
}

fn pack(lua: &Lua, args: &[Value]) -> mlua::Result<LibResult<Vec<Value>>> {
    let fmt = match check_string(args, 1) {
        Ok(f) => f,
        Err(e) => return Ok(Err(e)),
    };
    // The C library pushes a nil after its arguments: a missing one is reported as `got nil`.
    let mut with_mark = args.to_vec();
    with_mark.push(Value::Nil);
    let args = &with_mark[..];
    let r = (|| -> LibResult<Vec<u8>> {
        let mut f = Format { fmt: &fmt, pos: 0 };
        let mut h = Header::new();
        let mut arg = 2;
        let mut total: u64 = 0;
        let mut out = Vec::new();
        while let Some(opt) = f.next() {
            let mut size = f.size(opt)?;
            let pad = to_align(total, &h, opt, size);
            total = total.wrapping_add(pad);
            out.resize(out.len() + pad as usize, 0);
            match opt {
                o if is_int_option(o) => {
                    let n = check_number(args, arg)?;
                    arg += 1;
                    put_integer(n, h.big, size, &mut out);
                }
                b'x' => out.push(0),
                b'f' => {
                    let n = check_number(args, arg)? as f32;
                    arg += 1;
                    out.extend_from_slice(&if h.big { n.to_be_bytes() } else { n.to_le_bytes() });
                }
                b'd' => {
                    let n = check_number(args, arg)?;
                    arg += 1;
                    out.extend_from_slice(&if h.big { n.to_be_bytes() } else { n.to_le_bytes() });
                }
                b'c' | b's' => {
                    let s = check_string(args, arg)?;
                    arg += 1;
                    if size == 0 {
                        size = s.len() as u64;
                    }
                    if (s.len() as u64) < size {
                        return Err(arg_error(arg, "string too short"));
                    }
                    out.extend_from_slice(&s[..size as usize]);
                    if opt == b's' {
                        out.push(0);
                        size += 1;
                    }
                }
                _ => f.control(opt, &mut h)?,
            }
            total = total.wrapping_add(size);
        }
        Ok(out)
    })();
    Ok(match r {
        Ok(bytes) => Ok(vec![Value::String(lua.create_string(bytes)?)]),
        Err(e) => Err(e),
    })
}

fn unpack(lua: &Lua, args: &[Value]) -> mlua::Result<LibResult<Vec<Value>>> {
    let fmt = match check_string(args, 1) {
        Ok(f) => f,
        Err(e) => return Ok(Err(e)),
    };
    let data = match check_string(args, 2) {
        Ok(d) => d,
        Err(e) => return Ok(Err(e)),
    };
    let pos = match opt_integer(args, 3, 1) {
        Ok(p) => p as u64,
        Err(e) => return Ok(Err(e)),
    };
    if pos == 0 {
        return Ok(Err(arg_error(3, "offset must be 1 or greater")));
    }
    let mut pos = pos - 1;
    let ld = data.len() as u64;
    let mut f = Format { fmt: &fmt, pos: 0 };
    let mut h = Header::new();
    let mut out: Vec<Value> = Vec::new();
    let short = || arg_error(2, "data string too short");
    while let Some(opt) = f.next() {
        let mut size = match f.size(opt) {
            Ok(s) => s,
            Err(e) => return Ok(Err(e)),
        };
        pos = pos.wrapping_add(to_align(pos, &h, opt, size));
        if !(size <= ld && pos <= ld - size) {
            return Ok(Err(short()));
        }
        if out.len() >= MAX_RESULTS {
            return Ok(Err("stack overflow (too many results)".into()));
        }
        let at = pos as usize;
        match opt {
            o if is_int_option(o) => {
                let bytes = &data[at..at + size as usize];
                out.push(Value::Number(get_integer(bytes, h.big, o.is_ascii_lowercase())));
            }
            b'x' => {}
            b'f' => {
                let mut b = [0u8; 4];
                b.copy_from_slice(&data[at..at + 4]);
                let v = if h.big { f32::from_be_bytes(b) } else { f32::from_le_bytes(b) };
                out.push(Value::Number(v as f64));
            }
            b'd' => {
                let mut b = [0u8; 8];
                b.copy_from_slice(&data[at..at + 8]);
                let v = if h.big { f64::from_be_bytes(b) } else { f64::from_le_bytes(b) };
                out.push(Value::Number(v));
            }
            b'c' => {
                if size == 0 {
                    let Some(n) = to_number(out.last()) else {
                        return Ok(Err("format 'c0' needs a previous size".into()));
                    };
                    out.pop();
                    size = c_u64(n);
                    if !(size <= ld && pos <= ld - size) {
                        return Ok(Err(short()));
                    }
                }
                out.push(Value::String(lua.create_string(&data[at..at + size as usize])?));
            }
            b's' => {
                let Some(len) = data[at..].iter().position(|b| *b == 0) else {
                    return Ok(Err("unfinished string in data".into()));
                };
                size = len as u64 + 1;
                out.push(Value::String(lua.create_string(&data[at..at + len])?));
            }
            _ => {
                if let Err(e) = f.control(opt, &mut h) {
                    return Ok(Err(e));
                }
            }
        }
        pos = pos.wrapping_add(size);
    }
    out.push(Value::Integer(pos.wrapping_add(1) as i64));
    Ok(Ok(out))
}

fn size(args: &[Value]) -> LibResult<u64> {
    let fmt = check_string(args, 1)?;
    let mut f = Format { fmt: &fmt, pos: 0 };
    let mut h = Header::new();
    let mut pos: u64 = 0;
    while let Some(opt) = f.next() {
        let size = f.size(opt)?;
        pos = pos.wrapping_add(to_align(pos, &h, opt, size));
        if opt == b's' {
            return Err(arg_error(1, "option 's' has no fixed size"));
        } else if opt == b'c' && size == 0 {
            return Err(arg_error(1, "option 'c0' has no fixed size"));
        }
        if !opt.is_ascii_alphanumeric() {
            f.control(opt, &mut h)?;
        }
        pos = pos.wrapping_add(size);
    }
    Ok(pos)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::commands::scripting::libargs::LibError;

    fn s(lua: &Lua, b: &[u8]) -> Value {
        Value::String(lua.create_string(b).unwrap())
    }

    fn packed(lua: &Lua, args: Vec<Value>) -> Result<Vec<u8>, LibError> {
        pack(lua, &args).unwrap().map(|v| match &v[0] {
            Value::String(s) => s.as_bytes().to_vec(),
            _ => unreachable!(),
        })
    }

    #[test]
    fn pack_aligns_orders_and_checks() {
        let lua = Lua::new();
        let bytes = packed(&lua, vec![s(&lua, b">!4 b i"), Value::Integer(-1), Value::Integer(258)]).unwrap();
        assert_eq!(bytes, [0xff, 0, 0, 0, 0, 0, 1, 2]);
        let bytes = packed(&lua, vec![s(&lua, b"<h s"), Value::Integer(1), s(&lua, b"ab")]).unwrap();
        assert_eq!(bytes, [1, 0, b'a', b'b', 0]);
        assert_eq!(packed(&lua, vec![s(&lua, b"c5"), s(&lua, b"ab")]).unwrap_err(), arg_error(3, "string too short"));
        assert_eq!(
            packed(&lua, vec![s(&lua, b"i33"), Value::Integer(1)]).unwrap_err(),
            LibError::from("integral size 33 is larger than limit of 32")
        );
        assert_eq!(packed(&lua, vec![s(&lua, b"!3")]).unwrap_err(), LibError::from("alignment 3 is not a power of 2"));
        assert_eq!(packed(&lua, vec![s(&lua, b"c99999999999")]).unwrap_err(), LibError::from("integral size overflow"));
        assert_eq!(packed(&lua, vec![s(&lua, b"i")]).unwrap_err(), arg_error(2, "number expected, got nil"));
    }

    #[test]
    fn unpack_reads_back_and_checks_bounds() {
        let lua = Lua::new();
        let args = vec![s(&lua, b">h c0 d"), s(&lua, b"\x00\x02hi\x3f\xf0\x00\x00\x00\x00\x00\x00")];
        let v = unpack(&lua, &args).unwrap().unwrap();
        assert!(matches!(&v[0], Value::String(x) if x.as_bytes().as_ref() == b"hi"));
        assert!(matches!(v[1], Value::Number(n) if n == 1.0));
        assert!(matches!(v[2], Value::Integer(13)));
        let args = vec![s(&lua, b"c9999"), s(&lua, b"abc")];
        assert_eq!(unpack(&lua, &args).unwrap().unwrap_err(), arg_error(2, "data string too short"));
        let args = vec![s(&lua, b"s"), s(&lua, b"abc")];
        assert_eq!(unpack(&lua, &args).unwrap().unwrap_err(), LibError::from("unfinished string in data"));
        assert_eq!(size(&[s(&lua, b"!8 b d")]).unwrap(), 16);
        assert_eq!(size(&[s(&lua, b"s")]).unwrap_err(), arg_error(1, "option 's' has no fixed size"));
    }
}
