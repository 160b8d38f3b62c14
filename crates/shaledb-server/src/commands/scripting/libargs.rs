//! What the C libraries Redis loads into Lua (`cjson`, `cmsgpack`, `struct`, `bit`) share: reading
//! arguments the way Lua's auxiliary library does (`luaL_checkstring`, `luaL_checknumber`,
//! `luaL_optinteger`) with its error texts, C's `strtod` (how Lua 5.1 and lua_cjson read numbers), and the
//! C wrapper (trampoline.rs) that raises a library's failures as a C function's `luaL_error` or
//! `luaL_argerror` would: positioned at the calling line, also in tail position, and named as called.

use super::trampoline::{status, status_wrapper};
use mlua::{Function, Lua, MultiValue, Table, Value};

/// How a library function fails.
#[derive(Debug, Clone, PartialEq)]
pub enum LibError {
    /// `luaL_error`: the message, positioned at the caller's line (`user_script:1: ...`).
    Message(String),
    /// Raised without a position (`table index is nil`, as the VM says it).
    Unpositioned(String),
    /// `luaL_argerror`: `bad argument #N to 'NAME' (MESSAGE)`, NAME as the caller called the function.
    Argument(usize, String),
}

impl From<String> for LibError {
    fn from(s: String) -> Self {
        LibError::Message(s)
    }
}

impl From<&str> for LibError {
    fn from(s: &str) -> Self {
        LibError::Message(s.to_string())
    }
}

/// A library function's values, or how it fails.
pub type LibResult<T> = Result<T, LibError>;

/// Builds the library table of `fns` (name, function made by [`function`]): each one a C function.
pub fn library(lua: &Lua, fns: Vec<(&'static str, Function)>) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    for (name, f) in fns {
        t.raw_set(name, f)?;
    }
    Ok(t)
}

/// A library function: `f` gets the arguments and answers its values or how it fails; scripts call it as a
/// C function.
pub fn function<F>(lua: &Lua, f: F) -> mlua::Result<Function>
where
    F: Fn(&Lua, &[Value]) -> mlua::Result<LibResult<Vec<Value>>> + Send + 'static,
{
    let inner = lua.create_function(move |lua, args: MultiValue| {
        let args: Vec<Value> = args.into_iter().collect();
        let mut out = MultiValue::new();
        match f(lua, &args)? {
            Ok(values) => {
                out.push_back(Value::Boolean(true));
                out.extend(values);
            }
            Err(e) => {
                out.push_back(Value::Boolean(false));
                match e {
                    LibError::Message(m) => {
                        out.push_back(Value::Integer(status::POSITIONED));
                        out.push_back(Value::String(lua.create_string(m)?));
                    }
                    LibError::Unpositioned(m) => {
                        out.push_back(Value::Integer(status::RAW));
                        out.push_back(Value::String(lua.create_string(m)?));
                    }
                    LibError::Argument(n, m) => {
                        out.push_back(Value::Integer(status::ARGUMENT));
                        out.push_back(Value::Integer(n as i64));
                        out.push_back(Value::String(lua.create_string(m)?));
                    }
                }
            }
        }
        Ok(out)
    })?;
    status_wrapper(lua, inner)
}

/// Lua's name of a value's type, `no value` for a missing argument.
pub fn type_name(v: Option<&Value>) -> &'static str {
    match v {
        None => "no value",
        Some(Value::Nil) => "nil",
        Some(Value::Boolean(_)) => "boolean",
        Some(Value::Integer(_) | Value::Number(_)) => "number",
        Some(Value::String(_)) => "string",
        Some(Value::Table(_)) => "table",
        Some(Value::Function(_)) => "function",
        Some(Value::Thread(_)) => "thread",
        Some(_) => "userdata",
    }
}

/// `luaL_argerror(n, msg)`.
pub fn arg_error(n: usize, msg: &str) -> LibError {
    LibError::Argument(n, msg.to_string())
}

/// `luaL_typerror`: `EXPECTED expected, got TYPE`.
pub fn type_error(args: &[Value], n: usize, expected: &str) -> LibError {
    arg_error(n, &format!("{expected} expected, got {}", type_name(args.get(n - 1))))
}

/// The byte at `i` of a string read as a C string (0 past its end).
pub fn byte_at(s: &[u8], i: usize) -> u8 {
    s.get(i).copied().unwrap_or(0)
}

/// C's `isspace` in the C locale.
fn is_c_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

fn starts_with_ci(s: &[u8], at: usize, word: &str) -> bool {
    s.get(at..at + word.len()).is_some_and(|w| w.eq_ignore_ascii_case(word.as_bytes()))
}

/// C's `strtod` (glibc, C locale) on the C string `s`: the number and how many bytes it took, or `None`
/// where it converts nothing. Leading spaces, a sign, `inf`/`infinity`/`nan(...)` in any case, hexadecimal
/// (`0x1.8p3`) and decimal forms; the value correctly rounded.
pub fn strtod(s: &[u8]) -> Option<(f64, usize)> {
    let mut i = 0;
    while is_c_space(byte_at(s, i)) {
        i += 1;
    }
    let neg = match byte_at(s, i) {
        b'-' => {
            i += 1;
            true
        }
        b'+' => {
            i += 1;
            false
        }
        _ => false,
    };
    let sign = |v: f64| if neg { -v } else { v };
    if starts_with_ci(s, i, "inf") {
        let len = if starts_with_ci(s, i, "infinity") { 8 } else { 3 };
        return Some((sign(f64::INFINITY), i + len));
    }
    if starts_with_ci(s, i, "nan") {
        let mut end = i + 3;
        if byte_at(s, end) == b'(' {
            let mut k = end + 1;
            while byte_at(s, k).is_ascii_alphanumeric() || byte_at(s, k) == b'_' {
                k += 1;
            }
            if byte_at(s, k) == b')' {
                end = k + 1;
            }
        }
        return Some((sign(f64::NAN), end));
    }
    if byte_at(s, i) == b'0' && byte_at(s, i + 1) | 0x20 == b'x' {
        if let Some((v, end)) = hex_float(s, i + 2) {
            return Some((sign(v), end));
        }
    }
    let start = i;
    let mut digits = 0;
    while byte_at(s, i).is_ascii_digit() {
        i += 1;
        digits += 1;
    }
    if byte_at(s, i) == b'.' {
        i += 1;
        while byte_at(s, i).is_ascii_digit() {
            i += 1;
            digits += 1;
        }
    }
    if digits == 0 {
        return None;
    }
    if byte_at(s, i) | 0x20 == b'e' {
        let mut k = i + 1;
        if matches!(byte_at(s, k), b'+' | b'-') {
            k += 1;
        }
        if byte_at(s, k).is_ascii_digit() {
            while byte_at(s, k).is_ascii_digit() {
                k += 1;
            }
            i = k;
        }
    }
    // Only ASCII digits, '.', 'e' and a sign were taken: a form Rust's parser reads, correctly rounded.
    let text = std::str::from_utf8(&s[start..i]).ok()?;
    text.parse::<f64>().ok().map(|v| (sign(v), i))
}

/// The hexadecimal digits (and binary exponent) of a `0x` number from `at`: its value and end, or `None`
/// when no digit follows.
fn hex_float(s: &[u8], at: usize) -> Option<(f64, usize)> {
    let hex = |b: u8| (b as char).to_digit(16).map(u64::from);
    let (mut mant, mut exp, mut sticky, mut any) = (0u64, 0i64, false, false);
    let mut i = at;
    let mut fraction = false;
    loop {
        let b = byte_at(s, i);
        if b == b'.' && !fraction {
            fraction = true;
            i += 1;
            continue;
        }
        let Some(d) = hex(b) else { break };
        any = true;
        if mant >> 60 == 0 {
            mant = mant << 4 | d;
            if fraction {
                exp -= 4;
            }
        } else {
            sticky |= d != 0;
            if !fraction {
                exp += 4;
            }
        }
        i += 1;
    }
    if !any {
        return None;
    }
    if byte_at(s, i) | 0x20 == b'p' {
        let mut k = i + 1;
        let neg = match byte_at(s, k) {
            b'-' => {
                k += 1;
                true
            }
            b'+' => {
                k += 1;
                false
            }
            _ => false,
        };
        if byte_at(s, k).is_ascii_digit() {
            let mut e: i64 = 0;
            while byte_at(s, k).is_ascii_digit() {
                e = (e * 10 + i64::from(byte_at(s, k) - b'0')).min(1 << 20);
                k += 1;
            }
            exp += if neg { -e } else { e };
            i = k;
        }
    }
    if sticky {
        mant |= 1;
    }
    let mut v = mant as f64;
    while exp > 0 && v != 0.0 && v.is_finite() {
        let step = exp.min(512);
        v *= 2f64.powi(step as i32);
        exp -= step;
    }
    while exp < 0 && v != 0.0 {
        let step = (-exp).min(512);
        v /= 2f64.powi(step as i32);
        exp += step;
    }
    Some((v, i))
}

/// A number as Lua 5.1 reads a string (`tonumber`, `luaL_checknumber`): `strtod` on the C string (it ends
/// at the first zero byte), then nothing but spaces.
pub fn str_to_number(s: &[u8]) -> Option<f64> {
    let (v, mut end) = strtod(s)?;
    while is_c_space(byte_at(s, end)) {
        end += 1;
    }
    (byte_at(s, end) == 0).then_some(v)
}

/// A number as Lua prints it (`%.14g`).
pub fn number_text(n: f64) -> String {
    super::cjson::format_g14(n)
}

/// Argument `n` (1-based) as a string; numbers are converted as Lua does.
pub fn check_string(args: &[Value], n: usize) -> LibResult<Vec<u8>> {
    match args.get(n - 1) {
        Some(Value::String(s)) => Ok(s.as_bytes().to_vec()),
        Some(Value::Integer(i)) => Ok(number_text(*i as f64).into_bytes()),
        Some(Value::Number(x)) => Ok(number_text(*x).into_bytes()),
        _ => Err(type_error(args, n, "string")),
    }
}

/// The number a value converts to (a number, or a string holding one).
pub fn to_number(v: Option<&Value>) -> Option<f64> {
    match v {
        Some(Value::Integer(i)) => Some(*i as f64),
        Some(Value::Number(x)) => Some(*x),
        Some(Value::String(s)) => str_to_number(&s.as_bytes()),
        _ => None,
    }
}

/// Argument `n` as a number.
pub fn check_number(args: &[Value], n: usize) -> LibResult<f64> {
    to_number(args.get(n - 1)).ok_or_else(|| type_error(args, n, "number"))
}

/// A double converted to a 64-bit integer as C does on x86-64: truncated, and `i64::MIN` when out of range
/// or NaN.
pub fn c_i64(x: f64) -> i64 {
    if (-9_223_372_036_854_775_808.0..9_223_372_036_854_775_808.0).contains(&x) {
        x as i64
    } else {
        i64::MIN
    }
}

/// A double converted to an unsigned 64-bit integer as C does on x86-64 (values from 2^63 go through the
/// signed conversion of `x - 2^63`).
pub fn c_u64(x: f64) -> u64 {
    const TWO_63: f64 = 9_223_372_036_854_775_808.0;
    if x >= TWO_63 {
        (c_i64(x - TWO_63) as u64) ^ (1 << 63)
    } else {
        c_i64(x) as u64
    }
}

/// Argument `n` as an integer (truncated, as Lua 5.1 converts).
pub fn check_integer(args: &[Value], n: usize) -> LibResult<i64> {
    check_number(args, n).map(c_i64)
}

/// Argument `n` as an integer, `default` when missing or nil.
pub fn opt_integer(args: &[Value], n: usize, default: i64) -> LibResult<i64> {
    match args.get(n - 1) {
        None | Some(Value::Nil) => Ok(default),
        _ => check_integer(args, n),
    }
}

#[cfg(test)]
mod tests {
    use super::str_to_number;

    #[test]
    fn strings_convert_to_numbers_as_lua_does() {
        assert_eq!(str_to_number(b" 12 "), Some(12.0));
        assert_eq!(str_to_number(b"0x10"), Some(16.0));
        assert_eq!(str_to_number(b"1e3"), Some(1000.0));
        assert_eq!(str_to_number(b"-2.5"), Some(-2.5));
        assert_eq!(str_to_number(b""), None);
        assert_eq!(str_to_number(b"12a"), None);
        assert_eq!(str_to_number(b"1 2"), None);
        assert_eq!(str_to_number(b"3\0abc"), Some(3.0));
        assert_eq!(str_to_number(b"-0x10"), Some(-16.0));
        assert_eq!(str_to_number(b"0x1p4"), Some(16.0));
        assert_eq!(str_to_number(b"inf"), Some(f64::INFINITY));
        assert!(str_to_number(b" nan ").is_some_and(f64::is_nan));
        assert_eq!(str_to_number(b"1e"), None);
        assert_eq!(str_to_number(b"0x"), None);
        assert_eq!(str_to_number(b"\x0b5\x0c"), Some(5.0));
    }

    #[test]
    fn strtod_takes_what_c_takes() {
        use super::strtod;
        assert_eq!(strtod(b"+5,"), Some((5.0, 2)));
        assert_eq!(strtod(b"0x10]"), Some((16.0, 4)));
        assert_eq!(strtod(b"0x.8"), Some((0.5, 4)));
        assert_eq!(strtod(b"0xg"), Some((0.0, 1)));
        assert_eq!(strtod(b"007"), Some((7.0, 3)));
        assert_eq!(strtod(b"1e5x"), Some((100000.0, 3)));
        assert_eq!(strtod(b"1e+x"), Some((1.0, 1)));
        assert_eq!(strtod(b"1.e2"), Some((100.0, 4)));
        assert_eq!(strtod(b".5"), Some((0.5, 2)));
        assert_eq!(strtod(b"-Infinity"), Some((f64::NEG_INFINITY, 9)));
        assert_eq!(strtod(b"infinit"), Some((f64::INFINITY, 3)));
        assert_eq!(strtod(b"NaN(abc)x").map(|(v, n)| (v.is_nan(), n)), Some((true, 8)));
        assert_eq!(strtod(b"nan(ab").map(|(v, n)| (v.is_nan(), n)), Some((true, 3)));
        assert_eq!(strtod(b"1e400").map(|(v, _)| v), Some(f64::INFINITY));
        assert_eq!(strtod(b"9007199254740993").map(|(v, _)| v), Some(9007199254740992.0));
        assert_eq!(strtod(b"-"), None);
        assert_eq!(strtod(b"."), None);
        assert_eq!(strtod(b"- 5"), None);
        assert_eq!(strtod(b"x"), None);
    }

    #[test]
    fn conversions_follow_x86_64() {
        use super::{c_i64, c_u64};
        assert_eq!(c_i64(-1.9), -1);
        assert_eq!(c_i64(f64::NAN), i64::MIN);
        assert_eq!(c_i64(1e30), i64::MIN);
        assert_eq!(c_u64(18446744073709551616.0), 0);
        assert_eq!(c_u64(f64::NAN), 1 << 63);
        assert_eq!(c_u64(9223372036854775808.0), 1 << 63);
    }
}
