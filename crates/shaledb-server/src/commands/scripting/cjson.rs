//! The `cjson` table scripts see, behaving as the lua_cjson 2.1 Redis loads: `encode`, `decode`
//! (`cjson/decode.rs`), `null`, and the settings (`encode_sparse_array`, `encode_max_depth`,
//! `decode_max_depth`, `encode_number_precision`, `encode_keep_buffer`, `encode_invalid_numbers`,
//! `decode_invalid_numbers`) with their argument checks and error texts.
//!
//! Encoding: a table whose keys are all positive integers is an array up to its largest key (holes are
//! `null`) unless it is excessively sparse; any other table is an object (number keys written as strings);
//! numbers as `%.14g`; strings as bytes with `"`, `\`, `/`, control characters and DEL escaped.

mod decode;

use super::libargs::{arg_error, check_string, function, library as wrap, LibResult};
use decode::DecodeCfg;
use mlua::{Lua, Table, Value};
use std::sync::{Arc, Mutex};

/// Slots of the Lua stack a C function may use (Lua 5.1's `LUAI_MAXCSTACK`).
const MAX_C_STACK: usize = 8000;

#[derive(Debug, Clone)]
struct Settings {
    sparse_convert: bool,
    sparse_ratio: i64,
    sparse_safe: i64,
    encode_max_depth: i64,
    decode_max_depth: i64,
    /// 0 off (an error), 1 on (`nan`, `inf`), 2 `null`.
    encode_invalid_numbers: i64,
    decode_invalid_numbers: bool,
    keep_buffer: bool,
    precision: i64,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            sparse_convert: false,
            sparse_ratio: 2,
            sparse_safe: 10,
            encode_max_depth: 1000,
            decode_max_depth: 1000,
            encode_invalid_numbers: 0,
            decode_invalid_numbers: true,
            keep_buffer: true,
            precision: 14,
        }
    }
}

type Shared = Arc<Mutex<Settings>>;

fn settings(s: &Shared) -> Settings {
    s.lock().map(|g| g.clone()).unwrap_or_default()
}

fn update(s: &Shared, f: impl FnOnce(&mut Settings)) {
    if let Ok(mut g) = s.lock() {
        f(&mut g);
    }
}

/// `json_arg_init`: at most `n` arguments.
fn at_most(args: &[Value], n: usize) -> LibResult<()> {
    if args.len() > n {
        return Err(arg_error(n + 1, "found too many arguments"));
    }
    Ok(())
}

fn is_nil(args: &[Value], n: usize) -> bool {
    matches!(args.get(n - 1), None | Some(Value::Nil))
}

/// An integer setting: unchanged when argument `n` is nil, else a number in `min..=max`.
fn integer_option(args: &[Value], n: usize, min: i64, max: i64) -> LibResult<Option<i64>> {
    if is_nil(args, n) {
        return Ok(None);
    }
    let v = super::libargs::check_integer(args, n)?;
    // luaL_checkinteger's value lands in a C int.
    let v = i64::from(v as i32);
    if v < min || v > max {
        return Err(arg_error(1, &format!("expected integer between {min} and {max}")));
    }
    Ok(Some(v))
}

/// An enumerated setting (`luaL_checkoption`): unchanged when nil, a boolean, or one of `options` by name.
fn enum_option(args: &[Value], n: usize, options: &[&str]) -> LibResult<Option<i64>> {
    match args.get(n - 1) {
        None | Some(Value::Nil) => Ok(None),
        Some(Value::Boolean(b)) => Ok(Some(i64::from(*b))),
        _ => {
            let name = check_string(args, n)?;
            match options.iter().position(|o| o.as_bytes() == name.as_slice()) {
                Some(i) => Ok(Some(i as i64)),
                None => {
                    let shown = String::from_utf8_lossy(name.split(|b| *b == 0).next().unwrap_or_default());
                    Err(arg_error(n, &format!("invalid option '{shown}'")))
                }
            }
        }
    }
}

/// What an enumerated setting answers: a boolean for off/on, else the option's name.
fn enum_value(lua: &Lua, v: i64, options: &[&str]) -> mlua::Result<Value> {
    Ok(match v {
        0 | 1 => Value::Boolean(v == 1),
        _ => Value::String(lua.create_string(options.get(v as usize).copied().unwrap_or("off"))?),
    })
}

const ON_OFF: [&str; 2] = ["off", "on"];
const INVALID_NUMBERS: [&str; 3] = ["off", "on", "null"];

/// The `cjson` library of one VM.
pub fn library(lua: &Lua) -> mlua::Result<Table> {
    let cfg: Shared = Arc::new(Mutex::new(Settings::default()));
    let c = cfg.clone();
    let encode_fn = function(lua, move |lua, args| {
        if args.len() != 1 {
            return Ok(Err(arg_error(1, "expected 1 argument")));
        }
        let s = settings(&c);
        let mut out = Vec::new();
        match encode(lua, &args[0], &s, &mut out)? {
            Ok(()) => Ok(Ok(vec![Value::String(lua.create_string(&out)?)])),
            Err(e) => Ok(Err(e)),
        }
    })?;
    let c = cfg.clone();
    let decode_fn = function(lua, move |lua, args| {
        if args.len() != 1 {
            return Ok(Err(arg_error(1, "expected 1 argument")));
        }
        let data = match check_string(args, 1) {
            Ok(d) => d,
            Err(e) => return Ok(Err(e)),
        };
        let s = settings(&c);
        let cfg =
            DecodeCfg { max_depth: s.decode_max_depth.max(0) as usize, invalid_numbers: s.decode_invalid_numbers };
        Ok(decode::decode(lua, &data, cfg)?.map(|v| vec![v]))
    })?;
    let c = cfg.clone();
    let sparse = function(lua, move |_, args| {
        let r = (|| -> LibResult<Settings> {
            at_most(args, 3)?;
            let convert = enum_option(args, 1, &ON_OFF)?;
            let ratio = integer_option(args, 2, 0, i32::MAX as i64)?;
            let safe = integer_option(args, 3, 0, i32::MAX as i64)?;
            let mut out = Settings::default();
            update(&c, |s| {
                if let Some(v) = convert {
                    s.sparse_convert = v == 1;
                }
                if let Some(v) = ratio {
                    s.sparse_ratio = v;
                }
                if let Some(v) = safe {
                    s.sparse_safe = v;
                }
                out = s.clone();
            });
            Ok(out)
        })();
        Ok(r.map(|s| {
            vec![Value::Boolean(s.sparse_convert), Value::Integer(s.sparse_ratio), Value::Integer(s.sparse_safe)]
        }))
    })?;
    let int_setting = |min: i64, max: i64, field: fn(&mut Settings) -> &mut i64| {
        let c = cfg.clone();
        function(lua, move |_, args| {
            let r = (|| -> LibResult<i64> {
                at_most(args, 1)?;
                let v = integer_option(args, 1, min, max)?;
                let mut now = 0;
                update(&c, |s| {
                    if let Some(v) = v {
                        *field(s) = v;
                    }
                    now = *field(s);
                });
                Ok(now)
            })();
            Ok(r.map(|v| vec![Value::Integer(v)]))
        })
    };
    let encode_max_depth = int_setting(1, i32::MAX as i64, |s| &mut s.encode_max_depth)?;
    let decode_max_depth = int_setting(1, i32::MAX as i64, |s| &mut s.decode_max_depth)?;
    let precision = int_setting(1, 14, |s| &mut s.precision)?;
    let enum_setting = |options: &'static [&'static str], field: fn(&mut Settings) -> &mut i64| {
        let c = cfg.clone();
        function(lua, move |lua, args| {
            let r = (|| -> LibResult<i64> {
                at_most(args, 1)?;
                let v = enum_option(args, 1, options)?;
                let mut now = 0;
                update(&c, |s| {
                    if let Some(v) = v {
                        *field(s) = v;
                    }
                    now = *field(s);
                });
                Ok(now)
            })();
            match r {
                Ok(v) => Ok(Ok(vec![enum_value(lua, v, options)?])),
                Err(e) => Ok(Err(e)),
            }
        })
    };
    let encode_invalid = enum_setting(&INVALID_NUMBERS, |s| &mut s.encode_invalid_numbers)?;
    let bool_setting = |field: fn(&mut Settings) -> &mut bool| {
        let c = cfg.clone();
        function(lua, move |_, args| {
            let r = (|| -> LibResult<bool> {
                at_most(args, 1)?;
                let v = enum_option(args, 1, &ON_OFF)?;
                let mut now = false;
                update(&c, |s| {
                    if let Some(v) = v {
                        *field(s) = v == 1;
                    }
                    now = *field(s);
                });
                Ok(now)
            })();
            Ok(r.map(|v| vec![Value::Boolean(v)]))
        })
    };
    let decode_invalid = bool_setting(|s| &mut s.decode_invalid_numbers)?;
    // The encode buffer is an allocation detail of the C library: the setting is kept and answered.
    let keep_buffer = bool_setting(|s| &mut s.keep_buffer)?;
    let t = wrap(
        lua,
        vec![
            ("encode", encode_fn),
            ("decode", decode_fn),
            ("encode_sparse_array", sparse),
            ("encode_max_depth", encode_max_depth),
            ("decode_max_depth", decode_max_depth),
            ("encode_number_precision", precision),
            ("encode_keep_buffer", keep_buffer),
            ("encode_invalid_numbers", encode_invalid),
            ("decode_invalid_numbers", decode_invalid),
        ],
    )?;
    // cjson.new(): another module table with settings of its own.
    t.raw_set("new", function(lua, |lua, _| Ok(Ok(vec![Value::Table(library(lua)?)])))?)?;
    t.raw_set("null", Value::NULL)?;
    t.raw_set("_NAME", "cjson")?;
    t.raw_set("_VERSION", "2.1.0")?;
    Ok(t)
}

/// C's `%.{precision}g`.
pub fn format_g(n: f64, precision: usize) -> String {
    if n.is_nan() {
        return if n.is_sign_negative() { "-nan" } else { "nan" }.into();
    }
    if n.is_infinite() {
        return if n < 0.0 { "-inf" } else { "inf" }.into();
    }
    let p = precision.max(1);
    let sci = format!("{:.*e}", p - 1, n);
    let (mant, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i64 = exp.parse().unwrap_or(0);
    let trim = |s: &str| -> String {
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            s.to_string()
        }
    };
    if exp < -4 || exp >= p as i64 {
        return format!("{}e{}{:02}", trim(mant), if exp < 0 { '-' } else { '+' }, exp.abs());
    }
    let decimals = (p as i64 - 1 - exp).max(0) as usize;
    trim(&format!("{:.*}", decimals, n))
}

/// `%.14g`, as Lua and lua-cjson print numbers.
pub fn format_g14(n: f64) -> String {
    format_g(n, 14)
}

fn type_of(v: &Value) -> &'static str {
    super::libargs::type_name(Some(v))
}

fn serialise_error(what: &Value, reason: &str) -> super::libargs::LibError {
    format!("Cannot serialise {}: {reason}", type_of(what)).into()
}

fn number(n: f64, what: &Value, cfg: &Settings, out: &mut Vec<u8>) -> LibResult<()> {
    if !n.is_finite() {
        match cfg.encode_invalid_numbers {
            0 => return Err(serialise_error(what, "must not be NaN or Inf")),
            1 if n.is_nan() => {
                out.extend_from_slice(b"nan");
                return Ok(());
            }
            1 => {}
            _ => {
                out.extend_from_slice(b"null");
                return Ok(());
            }
        }
    }
    out.extend_from_slice(format_g(n, cfg.precision.clamp(1, 14) as usize).as_bytes());
    Ok(())
}

fn string(bytes: &[u8], out: &mut Vec<u8>) {
    out.push(b'"');
    for &b in bytes {
        match b {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'/' => out.extend_from_slice(b"\\/"),
            0x08 => out.extend_from_slice(b"\\b"),
            b'\t' => out.extend_from_slice(b"\\t"),
            b'\n' => out.extend_from_slice(b"\\n"),
            0x0c => out.extend_from_slice(b"\\f"),
            b'\r' => out.extend_from_slice(b"\\r"),
            0..=0x1f | 0x7f => out.extend_from_slice(format!("\\u{:04x}", b).as_bytes()),
            _ => out.push(b),
        }
    }
    out.push(b'"');
}

/// The number a table key stands for, if it is a number.
fn key_number(k: &Value) -> Option<f64> {
    match k {
        Value::Integer(i) => Some(*i as f64),
        Value::Number(n) => Some(*n),
        _ => None,
    }
}

/// lua_cjson's array test: the array length, or `None` for an object.
fn array_length(t: &Table, cfg: &Settings) -> mlua::Result<LibResult<Option<usize>>> {
    // The C code keeps the largest key in an int, assigned from the double key: on x86-64 a key from 2^31
    // up becomes i32::MIN (and the table an object).
    let to_int = |k: f64| if k < 2_147_483_648.0 { k as i32 } else { i32::MIN };
    let (mut max, mut items) = (0i32, 0i64);
    for pair in t.clone().pairs::<Value, Value>() {
        let (k, _) = pair?;
        match key_number(&k) {
            Some(n) if n != 0.0 && n.floor() == n && n >= 1.0 => {
                if n > f64::from(max) {
                    max = to_int(n);
                }
                items += 1;
            }
            _ => return Ok(Ok(None)),
        }
    }
    let max = i64::from(max);
    if cfg.sparse_ratio > 0 && max > items * cfg.sparse_ratio && max > cfg.sparse_safe {
        if !cfg.sparse_convert {
            return Ok(Err(serialise_error(&Value::Table(t.clone()), "excessively sparse array")));
        }
        return Ok(Ok(None));
    }
    Ok(Ok((max > 0).then_some(max as usize)))
}

/// A table being written: an array (its length, items written) or an object (its pairs, copied into a
/// Lua table as `k1, v1, k2, v2 ...` when it opens, and pairs written). The tables wait in a Lua table
/// indexed by level, so that deep nesting needs neither Rust stack nor thousands of Rust handles.
enum Open {
    Array { len: usize, done: usize },
    Object { pairs: usize, done: usize },
}

impl Open {
    /// Lua stack slots the C encoder holds for this level while it writes a value inside it.
    fn slots(&self) -> usize {
        match self {
            Open::Array { .. } => 1,
            Open::Object { .. } => 2,
        }
    }
}

/// `cjson.encode(v)`: the JSON text of `v`.
fn encode(lua: &Lua, root: &Value, cfg: &Settings, out: &mut Vec<u8>) -> mlua::Result<LibResult<()>> {
    let levels = lua.create_table()?;
    let mut open: Vec<Open> = Vec::new();
    // The encoding C function's own stack slot (its argument).
    let mut used = 1usize;
    let mut current = root.clone();
    loop {
        match &current {
            Value::Nil => out.extend_from_slice(b"null"),
            Value::LightUserData(p) if p.0.is_null() => out.extend_from_slice(b"null"),
            Value::Boolean(b) => out.extend_from_slice(if *b { b"true" } else { b"false" }),
            Value::Integer(_) | Value::Number(_) => {
                if let Err(e) = number(key_number(&current).unwrap_or_default(), &current, cfg, out) {
                    return Ok(Err(e));
                }
            }
            Value::String(s) => string(&s.as_bytes(), out),
            Value::Table(t) => {
                let depth = open.len() as i64 + 1;
                if depth > cfg.encode_max_depth || used + 3 > MAX_C_STACK {
                    return Ok(Err(format!("Cannot serialise, excessive nesting ({depth})").into()));
                }
                let level = match array_length(t, cfg)? {
                    Err(e) => return Ok(Err(e)),
                    Ok(Some(len)) => {
                        out.push(b'[');
                        levels.raw_set(open.len() + 1, t.clone())?;
                        Open::Array { len, done: 0 }
                    }
                    Ok(None) => {
                        out.push(b'{');
                        let copy = lua.create_table()?;
                        let mut n = 0usize;
                        for pair in t.clone().pairs::<Value, Value>() {
                            let (k, v) = pair?;
                            copy.raw_set(2 * n + 1, k)?;
                            copy.raw_set(2 * n + 2, v)?;
                            n += 1;
                        }
                        levels.raw_set(open.len() + 1, copy)?;
                        Open::Object { pairs: n, done: 0 }
                    }
                };
                used += level.slots();
                open.push(level);
            }
            other => return Ok(Err(serialise_error(other, "type not supported"))),
        }
        // The next value to write, closing the tables that are complete.
        loop {
            let depth = open.len();
            let Some(level) = open.last_mut() else { return Ok(Ok(())) };
            let slots = level.slots();
            match level {
                Open::Array { len, done } if *done == *len => out.push(b']'),
                Open::Object { pairs, done } if *done == *pairs => out.push(b'}'),
                Open::Array { done, .. } => {
                    if *done > 0 {
                        out.push(b',');
                    }
                    *done += 1;
                    let t: Table = levels.raw_get(depth)?;
                    current = t.raw_get(*done)?;
                    break;
                }
                Open::Object { done, .. } => {
                    if *done > 0 {
                        out.push(b',');
                    }
                    let t: Table = levels.raw_get(depth)?;
                    let k: Value = t.raw_get(2 * *done + 1)?;
                    current = t.raw_get(2 * *done + 2)?;
                    *done += 1;
                    match &k {
                        Value::Integer(_) | Value::Number(_) => {
                            out.push(b'"');
                            if let Err(e) = number(key_number(&k).unwrap_or_default(), &k, cfg, out) {
                                return Ok(Err(e));
                            }
                            out.extend_from_slice(b"\":");
                        }
                        Value::String(s) => {
                            string(&s.as_bytes(), out);
                            out.push(b':');
                        }
                        other => return Ok(Err(serialise_error(other, "table key must be a number or string"))),
                    }
                    break;
                }
            }
            // The level is complete.
            levels.raw_set(depth, Value::Nil)?;
            open.pop();
            used -= slots;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::format_g14;

    #[test]
    fn numbers_print_as_percent_14g() {
        for (n, s) in [
            (0.0, "0"),
            (-0.0, "-0"),
            (-5000.0, "-5000"),
            (0.0003, "0.0003"),
            (1023.2, "1023.2"),
            (0.1, "0.1"),
            (1e20, "1e+20"),
            (1.5e-7, "1.5e-07"),
            (123456789012345.6, "1.2345678901235e+14"),
            (123456789012345.0, "1.2345678901234e+14"),
            (1e14, "1e+14"),
            (99999999999999.0, "99999999999999"),
            (0.00001, "1e-05"),
            (f64::INFINITY, "inf"),
        ] {
            assert_eq!(format_g14(n), s, "{n}");
        }
    }
}
