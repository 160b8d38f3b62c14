//! The `cjson` table scripts see: `cjson.encode`, `cjson.decode`, `cjson.null` and the settings Redis's
//! scripts call (`encode_max_depth`, `decode_max_depth`, `encode_invalid_numbers`, `encode_keep_buffer`),
//! with lua-cjson's conventions: a table whose keys are exactly 1..n is an array, any other an object
//! (number keys written as strings), an empty table `{}`, numbers as `%.14g`, `null` as `cjson.null`.
//! Parsing and string escaping are serde_json's.

use mlua::{Lua, Table, Value};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

#[derive(Debug)]
struct Settings {
    encode_max_depth: AtomicUsize,
    decode_max_depth: AtomicUsize,
    invalid_numbers: AtomicBool,
}

/// The `cjson` library of one VM.
pub fn library(lua: &Lua) -> mlua::Result<Table> {
    let cfg = Arc::new(Settings {
        encode_max_depth: AtomicUsize::new(1000),
        decode_max_depth: AtomicUsize::new(1000),
        invalid_numbers: AtomicBool::new(false),
    });
    let t = lua.create_table()?;
    t.raw_set("null", Value::NULL)?;
    let c = cfg.clone();
    t.raw_set(
        "encode",
        lua.create_function(move |_, v: Value| {
            let mut out = String::new();
            encode(&v, 1, &c, &mut out)?;
            Ok(out)
        })?,
    )?;
    let c = cfg.clone();
    t.raw_set(
        "decode",
        lua.create_function(move |lua, s: mlua::LuaString| {
            let parsed: serde_json::Value = serde_json::from_slice(&s.as_bytes())
                .map_err(|e| mlua::Error::runtime(format!("Expected value but found invalid JSON: {e}")))?;
            to_lua(lua, &parsed, 1, c.decode_max_depth.load(Ordering::Relaxed))
        })?,
    )?;
    let c = cfg.clone();
    t.raw_set(
        "encode_max_depth",
        lua.create_function(move |_, n: Option<usize>| {
            if let Some(n) = n {
                c.encode_max_depth.store(n.max(1), Ordering::Relaxed);
            }
            Ok(c.encode_max_depth.load(Ordering::Relaxed))
        })?,
    )?;
    let c = cfg.clone();
    t.raw_set(
        "decode_max_depth",
        lua.create_function(move |_, n: Option<usize>| {
            if let Some(n) = n {
                c.decode_max_depth.store(n.max(1), Ordering::Relaxed);
            }
            Ok(c.decode_max_depth.load(Ordering::Relaxed))
        })?,
    )?;
    let c = cfg;
    t.raw_set(
        "encode_invalid_numbers",
        lua.create_function(move |_, on: Option<bool>| {
            if let Some(on) = on {
                c.invalid_numbers.store(on, Ordering::Relaxed);
            }
            Ok(c.invalid_numbers.load(Ordering::Relaxed))
        })?,
    )?;
    // The encode buffer is not kept between calls here: the setting is accepted and changes nothing.
    t.raw_set("encode_keep_buffer", lua.create_function(|_, on: Option<bool>| Ok(on.unwrap_or(true)))?)?;
    Ok(t)
}

/// `%.14g`, as Lua and lua-cjson print numbers.
pub fn format_g14(n: f64) -> String {
    if n == n.trunc() && n.abs() < 1e14 {
        return format!("{}", n as i64);
    }
    let sci = format!("{:.13e}", n);
    let (mant, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    if !(-4..14).contains(&exp) {
        let mant = mant.trim_end_matches('0').trim_end_matches('.');
        return format!("{mant}e{}{:02}", if exp < 0 { '-' } else { '+' }, exp.abs());
    }
    let decimals = (13 - exp).max(0) as usize;
    let s = format!("{:.*}", decimals, n);
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

fn number(n: f64, cfg: &Settings, out: &mut String) -> mlua::Result<()> {
    if n.is_finite() {
        out.push_str(&format_g14(n));
        return Ok(());
    }
    if !cfg.invalid_numbers.load(Ordering::Relaxed) {
        return Err(mlua::Error::runtime("Cannot serialise number: must not be NaN or Infinity"));
    }
    out.push_str(if n.is_nan() {
        "nan"
    } else if n > 0.0 {
        "inf"
    } else {
        "-inf"
    });
    Ok(())
}

fn string(bytes: &[u8], out: &mut String) {
    let s = String::from_utf8_lossy(bytes);
    out.push_str(&serde_json::to_string(&*s).unwrap_or_else(|_| "\"\"".into()));
}

fn encode(v: &Value, depth: usize, cfg: &Settings, out: &mut String) -> mlua::Result<()> {
    match v {
        Value::Nil => out.push_str("null"),
        Value::LightUserData(p) if p.0.is_null() => out.push_str("null"),
        Value::Boolean(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Integer(i) => out.push_str(&i.to_string()),
        Value::Number(n) => number(*n, cfg, out)?,
        Value::String(s) => string(&s.as_bytes(), out),
        Value::Table(t) => {
            if depth > cfg.encode_max_depth.load(Ordering::Relaxed) {
                return Err(mlua::Error::runtime("Cannot serialise, excessive nesting"));
            }
            let mut max = 0usize;
            let mut count = 0usize;
            let mut array = true;
            for pair in t.pairs::<Value, Value>() {
                let (k, _) = pair?;
                count += 1;
                match k {
                    Value::Integer(i) if i >= 1 => max = max.max(i as usize),
                    Value::Number(n) if n >= 1.0 && n == n.trunc() => max = max.max(n as usize),
                    Value::String(_) | Value::Integer(_) | Value::Number(_) => array = false,
                    other => {
                        return Err(mlua::Error::runtime(format!(
                            "Cannot serialise {}: table key must be a number or string",
                            other.type_name()
                        )))
                    }
                }
            }
            if count == 0 {
                out.push_str("{}");
            } else if array && max == count {
                out.push('[');
                for i in 1..=max {
                    if i > 1 {
                        out.push(',');
                    }
                    encode(&t.raw_get::<Value>(i)?, depth + 1, cfg, out)?;
                }
                out.push(']');
            } else {
                out.push('{');
                let mut first = true;
                for pair in t.pairs::<Value, Value>() {
                    let (k, v) = pair?;
                    if !first {
                        out.push(',');
                    }
                    first = false;
                    match &k {
                        Value::String(s) => string(&s.as_bytes(), out),
                        Value::Integer(i) => string(i.to_string().as_bytes(), out),
                        Value::Number(n) => string(format_g14(*n).as_bytes(), out),
                        _ => {}
                    }
                    out.push(':');
                    encode(&v, depth + 1, cfg, out)?;
                }
                out.push('}');
            }
        }
        other => {
            return Err(mlua::Error::runtime(format!("Cannot serialise {}: type not supported", other.type_name())))
        }
    }
    Ok(())
}

fn to_lua(lua: &Lua, v: &serde_json::Value, depth: usize, max: usize) -> mlua::Result<Value> {
    use serde_json::Value as J;
    Ok(match v {
        J::Null => Value::NULL,
        J::Bool(b) => Value::Boolean(*b),
        J::Number(n) => Value::Number(n.as_f64().unwrap_or(0.0)),
        J::String(s) => Value::String(lua.create_string(s)?),
        J::Array(items) => {
            if depth > max {
                return Err(mlua::Error::runtime("Found too many nested data structures"));
            }
            let t = lua.create_table_with_capacity(items.len(), 0)?;
            for (i, item) in items.iter().enumerate() {
                t.raw_set(i + 1, to_lua(lua, item, depth + 1, max)?)?;
            }
            Value::Table(t)
        }
        J::Object(map) => {
            if depth > max {
                return Err(mlua::Error::runtime("Found too many nested data structures"));
            }
            let t = lua.create_table_with_capacity(0, map.len())?;
            for (k, item) in map {
                t.raw_set(k.as_str(), to_lua(lua, item, depth + 1, max)?)?;
            }
            Value::Table(t)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::format_g14;

    #[test]
    fn numbers_print_as_percent_14g() {
        for (n, s) in [
            (0.0, "0"),
            (-5000.0, "-5000"),
            (0.0003, "0.0003"),
            (1023.2, "1023.2"),
            (0.1, "0.1"),
            (1e20, "1e+20"),
            (1.5e-7, "1.5e-07"),
            (123456789012345.6, "1.2345678901235e+14"),
            (1e14, "1e+14"),
            (0.00001, "1e-05"),
        ] {
            assert_eq!(format_g14(n), s, "{n}");
        }
    }
}
