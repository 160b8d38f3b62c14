//! What the C libraries Redis loads into Lua (`cmsgpack`, `struct`) share: reading arguments the way Lua's
//! auxiliary library does (`luaL_checkstring`, `luaL_checknumber`, `luaL_optinteger`) with its error texts,
//! and the wrapper that turns a library's failures into plain Lua errors (a string, no position), as a C
//! function's `luaL_error` gives.

use mlua::{Function, Lua, MultiValue, Table, Value};

/// A failure of a library function: the message scripts see, positioned at the calling line unless it
/// starts with [`UNPOSITIONED`] (which is dropped).
pub type LibResult<T> = Result<T, String>;

/// Marks a message raised without a position (`table index is nil`, as the VM says it).
pub const UNPOSITIONED: char = '\0';

/// Wraps each function of `raw` so that a `(false, message, level)` answer raises `message` as a Lua error
/// (level 3: positioned at the wrapper's caller, as `luaL_error` does, past the tail call to `check`;
/// level 0: no position, as the VM's own errors), and a `(true, values...)` answer returns the values.
/// NB: a script's `return cmsgpack.unpack(...)` is itself a tail call into the wrapper, so its errors name
/// no line, where Redis's C function would name the script's.
const WRAP: &str = r#"
local raw = ...
local error = error
local function check(ok, ...)
  if not ok then
    local msg, level = ...
    error(msg, level)
  end
  return ...
end
local t = {}
for name, f in pairs(raw) do
  t[name] = function(...) return check(f(...)) end
end
return t
"#;

/// Builds the library table of `fns` (name, Rust function returning `LibResult` of its values).
pub fn library(lua: &Lua, fns: Vec<(&'static str, Function)>) -> mlua::Result<Table> {
    let raw = lua.create_table()?;
    for (name, f) in fns {
        raw.raw_set(name, f)?;
    }
    lua.load(WRAP).set_name("=shaledb").call::<Table>(raw)
}

/// A Rust function for [`library`]: `f` gets the arguments and answers its values or a message.
pub fn function<F>(lua: &Lua, f: F) -> mlua::Result<Function>
where
    F: Fn(&Lua, &[Value]) -> mlua::Result<LibResult<Vec<Value>>> + Send + 'static,
{
    lua.create_function(move |lua, args: MultiValue| {
        let args: Vec<Value> = args.into_iter().collect();
        let mut out = MultiValue::new();
        match f(lua, &args)? {
            Ok(values) => {
                out.push_back(Value::Boolean(true));
                out.extend(values);
            }
            Err(msg) => {
                let (msg, level) = match msg.strip_prefix(UNPOSITIONED) {
                    Some(m) => (m, 0),
                    None => (msg.as_str(), 3),
                };
                out.push_back(Value::Boolean(false));
                out.push_back(Value::String(lua.create_string(msg)?));
                out.push_back(Value::Integer(level));
            }
        }
        Ok(out)
    })
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

/// `bad argument #N to 'NAME' (MSG)`.
pub fn arg_error(n: usize, fname: &str, msg: &str) -> String {
    format!("bad argument #{n} to '{fname}' ({msg})")
}

fn type_error(args: &[Value], n: usize, fname: &str, expected: &str) -> String {
    arg_error(n, fname, &format!("{expected} expected, got {}", type_name(args.get(n - 1))))
}

/// A number as Lua 5.1 parses a string (`tonumber`): decimal or hexadecimal, surrounding spaces allowed,
/// read up to the first zero byte.
pub fn str_to_number(s: &[u8]) -> Option<f64> {
    // Lua 5.1 reads the string as a C string: it ends at the first zero byte.
    let s = s.split(|b| *b == 0).next().unwrap_or_default();
    let s = std::str::from_utf8(s).ok()?;
    let t = s.trim_matches(|c: char| c.is_ascii_whitespace());
    if t.is_empty() {
        return None;
    }
    if let Some(hex) = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        return u64::from_str_radix(hex, 16).ok().map(|v| v as f64);
    }
    if t.bytes().any(|b| !(b.is_ascii_alphanumeric() || b == b'.' || b == b'+' || b == b'-')) {
        return None;
    }
    t.parse::<f64>().ok()
}

/// A number as Lua prints it (`%.14g`).
pub fn number_text(n: f64) -> String {
    super::cjson::format_g14(n)
}

/// Argument `n` (1-based) as a string; numbers are converted as Lua does.
pub fn check_string(args: &[Value], n: usize, fname: &str) -> LibResult<Vec<u8>> {
    match args.get(n - 1) {
        Some(Value::String(s)) => Ok(s.as_bytes().to_vec()),
        Some(Value::Integer(i)) => Ok(number_text(*i as f64).into_bytes()),
        Some(Value::Number(x)) => Ok(number_text(*x).into_bytes()),
        _ => Err(type_error(args, n, fname, "string")),
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
pub fn check_number(args: &[Value], n: usize, fname: &str) -> LibResult<f64> {
    to_number(args.get(n - 1)).ok_or_else(|| type_error(args, n, fname, "number"))
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
pub fn check_integer(args: &[Value], n: usize, fname: &str) -> LibResult<i64> {
    check_number(args, n, fname).map(c_i64)
}

/// Argument `n` as an integer, `default` when missing or nil.
pub fn opt_integer(args: &[Value], n: usize, fname: &str, default: i64) -> LibResult<i64> {
    match args.get(n - 1) {
        None | Some(Value::Nil) => Ok(default),
        _ => check_integer(args, n, fname),
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
