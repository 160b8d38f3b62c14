//! `cjson.decode` as the lua_cjson 2.1 that Redis loads behaves: the same tokens and token names, the same
//! error texts and character positions, numbers read by C's `strtod` (`decode_invalid_numbers` on: `+5`,
//! `0x10`, `007`, `inf`, `nan`), the input read as a C string (a zero byte ends it), strings kept as bytes
//! (no UTF-8 check), `\uXXXX` escapes and surrogate pairs written as UTF-8, `null` as `cjson.null`.
//!
//! Nesting is limited as lua_cjson limits it: `decode_max_depth` levels, and the Lua stack a C function may
//! use (8,000 slots: an array level holds one, an object level two while it reads a value). Tables are
//! built without recursion, so the limit is the only bound on depth.

use crate::commands::scripting::libargs::{byte_at, strtod, LibError, LibResult};
use mlua::{Lua, Table, Value};

/// Slots of the Lua stack a C function may use (Lua 5.1's `LUAI_MAXCSTACK`).
const MAX_C_STACK: usize = 8000;

/// Decoder settings (`cjson.decode_max_depth`, `cjson.decode_invalid_numbers`).
#[derive(Debug, Clone, Copy)]
pub struct DecodeCfg {
    pub max_depth: usize,
    pub invalid_numbers: bool,
}

/// A token; `String` holds the bytes' range in the decoder's scratch buffer.
#[derive(Debug, Clone, PartialEq)]
enum Tok {
    ObjBegin,
    ObjEnd,
    ArrBegin,
    ArrEnd,
    Str,
    Num(f64),
    Bool(bool),
    Null,
    Colon,
    Comma,
    End,
    Error(&'static str),
}

impl Tok {
    /// What an error message says was found.
    fn name(&self) -> &'static str {
        match self {
            Tok::ObjBegin => "T_OBJ_BEGIN",
            Tok::ObjEnd => "T_OBJ_END",
            Tok::ArrBegin => "T_ARR_BEGIN",
            Tok::ArrEnd => "T_ARR_END",
            Tok::Str => "T_STRING",
            Tok::Num(_) => "T_NUMBER",
            Tok::Bool(_) => "T_BOOLEAN",
            Tok::Null => "T_NULL",
            Tok::Colon => "T_COLON",
            Tok::Comma => "T_COMMA",
            Tok::End => "T_END",
            Tok::Error(what) => what,
        }
    }
}

struct Lexer<'a> {
    data: &'a [u8],
    pos: usize,
    cfg: DecodeCfg,
    /// The bytes of the last string token.
    text: Vec<u8>,
}

/// A token and the index its error messages name (0-based).
type Token = (Tok, usize);

fn hex_digit(b: u8) -> Option<u32> {
    match b {
        b'0'..=b'9' => Some(u32::from(b - b'0')),
        _ => match b | 0x20 {
            c @ b'a'..=b'f' => Some(u32::from(c - b'a') + 10),
            _ => None,
        },
    }
}

impl Lexer<'_> {
    fn at(&self, i: usize) -> u8 {
        byte_at(self.data, i)
    }

    fn hex4(&self, at: usize) -> Option<u32> {
        (0..4).try_fold(0u32, |acc, k| hex_digit(self.at(at + k)).map(|d| acc << 4 | d))
    }

    /// lua_cjson's test for what strict JSON would refuse as a number (a leading `+`, a hexadecimal or
    /// zero-led number, `inf`, `nan`).
    fn is_invalid_number(&self) -> bool {
        let mut p = self.pos;
        if self.at(p) == b'+' {
            return true;
        }
        if self.at(p) == b'-' {
            p += 1;
        }
        let c = self.at(p);
        if c == b'0' {
            let c2 = self.at(p + 1);
            return c2 | 0x20 == b'x' || c2.is_ascii_digit();
        }
        // The C code compares a signed char: bytes from 0x80 count as "at most '9'".
        if c <= b'9' || c >= 0x80 {
            return false;
        }
        let word = self.data.get(p..p + 3);
        word.is_some_and(|w| w.eq_ignore_ascii_case(b"inf") || w.eq_ignore_ascii_case(b"nan"))
    }

    fn number(&mut self) -> Token {
        let start = self.pos;
        match strtod(&self.data[start.min(self.data.len())..]) {
            Some((v, used)) => {
                self.pos += used;
                (Tok::Num(v), start)
            }
            None => (Tok::Error("invalid number"), start),
        }
    }

    /// Appends the UTF-8 of the `\u` escape at `pos` (one code unit or a surrogate pair) and moves past it.
    fn unicode_escape(&mut self) -> bool {
        let Some(mut cp) = self.hex4(self.pos + 2) else { return false };
        let mut len = 6;
        if cp & 0xF800 == 0xD800 {
            if cp & 0x400 != 0 || self.at(self.pos + 6) != b'\\' || self.at(self.pos + 7) != b'u' {
                return false;
            }
            let Some(low) = self.hex4(self.pos + 8) else { return false };
            if low & 0xFC00 != 0xDC00 {
                return false;
            }
            cp = (((cp & 0x3FF) << 10) | (low & 0x3FF)) + 0x10000;
            len = 12;
        }
        // Code points here are at most 0x10FFFF: the UTF-8 forms of up to four bytes.
        match cp {
            0..=0x7F => self.text.push(cp as u8),
            0x80..=0x7FF => self.text.extend([(cp >> 6) as u8 | 0xC0, (cp & 0x3F) as u8 | 0x80]),
            0x800..=0xFFFF => {
                self.text.extend([(cp >> 12) as u8 | 0xE0, ((cp >> 6) & 0x3F) as u8 | 0x80, (cp & 0x3F) as u8 | 0x80])
            }
            _ => self.text.extend([
                (cp >> 18) as u8 | 0xF0,
                ((cp >> 12) & 0x3F) as u8 | 0x80,
                ((cp >> 6) & 0x3F) as u8 | 0x80,
                (cp & 0x3F) as u8 | 0x80,
            ]),
        }
        self.pos += len;
        true
    }

    fn string(&mut self) -> Token {
        let start = self.pos;
        self.pos += 1;
        self.text.clear();
        loop {
            let c = self.at(self.pos);
            match c {
                b'"' => break,
                0 => return (Tok::Error("unexpected end of string"), self.pos),
                b'\\' => {
                    let unescaped = match self.at(self.pos + 1) {
                        b'u' => {
                            if self.unicode_escape() {
                                continue;
                            }
                            return (Tok::Error("invalid unicode escape code"), self.pos);
                        }
                        b'"' => b'"',
                        b'\\' => b'\\',
                        b'/' => b'/',
                        b'b' => 0x08,
                        b'f' => 0x0c,
                        b'n' => b'\n',
                        b'r' => b'\r',
                        b't' => b'\t',
                        _ => return (Tok::Error("invalid escape code"), self.pos),
                    };
                    self.text.push(unescaped);
                    self.pos += 2;
                }
                _ => {
                    self.text.push(c);
                    self.pos += 1;
                }
            }
        }
        self.pos += 1;
        (Tok::Str, start)
    }

    fn next(&mut self) -> Token {
        while matches!(self.at(self.pos), b' ' | b'\t' | b'\n' | b'\r') {
            self.pos += 1;
        }
        let start = self.pos;
        let single = match self.at(start) {
            b'{' => Some(Tok::ObjBegin),
            b'}' => Some(Tok::ObjEnd),
            b'[' => Some(Tok::ArrBegin),
            b']' => Some(Tok::ArrEnd),
            b',' => Some(Tok::Comma),
            b':' => Some(Tok::Colon),
            0 => return (Tok::End, start),
            _ => None,
        };
        if let Some(t) = single {
            self.pos += 1;
            return (t, start);
        }
        let rest = &self.data[start.min(self.data.len())..];
        match self.at(start) {
            b'"' => self.string(),
            b'-' | b'0'..=b'9' => {
                if !self.cfg.invalid_numbers && self.is_invalid_number() {
                    return (Tok::Error("invalid number"), start);
                }
                self.number()
            }
            b'f' | b'i' | b'I' | b'n' | b'N' | b't' | b'+' => {
                if rest.starts_with(b"true") {
                    self.pos += 4;
                    (Tok::Bool(true), start)
                } else if rest.starts_with(b"false") {
                    self.pos += 5;
                    (Tok::Bool(false), start)
                } else if rest.starts_with(b"null") {
                    self.pos += 4;
                    (Tok::Null, start)
                } else if self.cfg.invalid_numbers && self.is_invalid_number() {
                    self.number()
                } else {
                    (Tok::Error("invalid token"), start)
                }
            }
            _ => (Tok::Error("invalid token"), start),
        }
    }
}

/// `Expected WHAT but found TOKEN at character N`.
fn unexpected(what: &str, (tok, index): &Token) -> LibError {
    LibError::Message(format!("Expected {what} but found {} at character {}", tok.name(), index + 1))
}

/// A table being filled: an array (next index) or an object (key of the value being read). The tables
/// themselves wait in a Lua table indexed by level: a Rust handle to each of thousands of levels would
/// exhaust the handles a VM has.
enum Open {
    Array(i64),
    Object(Vec<u8>),
}

impl Open {
    /// Lua stack slots the C decoder holds for this level while it reads a value inside it.
    fn slots(&self) -> usize {
        match self {
            Open::Array(..) => 1,
            Open::Object(..) => 2,
        }
    }
}

/// Decodes `data` (the argument, already a string) into a Lua value.
pub fn decode(lua: &Lua, data: &[u8], cfg: DecodeCfg) -> mlua::Result<LibResult<Value>> {
    if data.len() >= 2 && (data[0] == 0 || data[1] == 0) {
        return Ok(Err("JSON parser does not support UTF-16 or UTF-32".into()));
    }
    let mut lx = Lexer { data, pos: 0, cfg, text: Vec::new() };
    let mut open: Vec<Open> = Vec::new();
    let tables = lua.create_table()?;
    // The decoding C function's own stack slot (its argument).
    let mut used = 1usize;
    let mut tok = lx.next();
    let value = 'value: loop {
        // `tok` starts a value.
        let mut v = match tok.0 {
            Tok::Str => Value::String(lua.create_string(&lx.text)?),
            Tok::Num(n) => Value::Number(n),
            Tok::Bool(b) => Value::Boolean(b),
            Tok::Null => Value::NULL,
            Tok::ObjBegin | Tok::ArrBegin => {
                let is_obj = tok.0 == Tok::ObjBegin;
                let depth = open.len() + 1;
                if depth > cfg.max_depth || used + if is_obj { 3 } else { 2 } > MAX_C_STACK {
                    return Ok(Err(LibError::Message(format!(
                        "Found too many nested data structures ({depth}) at character {}",
                        lx.pos
                    ))));
                }
                let t = lua.create_table()?;
                let next = lx.next();
                let empty = if is_obj { Tok::ObjEnd } else { Tok::ArrEnd };
                if next.0 == empty {
                    Value::Table(t)
                } else if is_obj {
                    if next.0 != Tok::Str {
                        return Ok(Err(unexpected("object key string", &next)));
                    }
                    let key = lx.text.clone();
                    let colon = lx.next();
                    if colon.0 != Tok::Colon {
                        return Ok(Err(unexpected("colon", &colon)));
                    }
                    let level = Open::Object(key);
                    used += level.slots();
                    open.push(level);
                    tables.raw_set(open.len(), t)?;
                    tok = lx.next();
                    continue 'value;
                } else {
                    let level = Open::Array(1);
                    used += level.slots();
                    open.push(level);
                    tables.raw_set(open.len(), t)?;
                    tok = next;
                    continue 'value;
                }
            }
            _ => return Ok(Err(unexpected("value", &tok))),
        };
        // A complete value: store it in the innermost open table, and close tables that end here.
        loop {
            let depth = open.len();
            let Some(level) = open.last_mut() else { break 'value v };
            let t: Table = tables.raw_get(depth)?;
            match level {
                Open::Array(i) => {
                    t.raw_set(*i, v)?;
                    *i += 1;
                    let after = lx.next();
                    if after.0 == Tok::ArrEnd {
                        v = close(&mut open, &tables, &mut used)?;
                        continue;
                    }
                    if after.0 != Tok::Comma {
                        return Ok(Err(unexpected("comma or array end", &after)));
                    }
                    tok = lx.next();
                    continue 'value;
                }
                Open::Object(key) => {
                    t.raw_set(lua.create_string(&*key)?, v)?;
                    let after = lx.next();
                    if after.0 == Tok::ObjEnd {
                        v = close(&mut open, &tables, &mut used)?;
                        continue;
                    }
                    if after.0 != Tok::Comma {
                        return Ok(Err(unexpected("comma or object end", &after)));
                    }
                    let k = lx.next();
                    if k.0 != Tok::Str {
                        return Ok(Err(unexpected("object key string", &k)));
                    }
                    *key = lx.text.clone();
                    let colon = lx.next();
                    if colon.0 != Tok::Colon {
                        return Ok(Err(unexpected("colon", &colon)));
                    }
                    tok = lx.next();
                    continue 'value;
                }
            }
        }
    };
    let end = lx.next();
    if end.0 != Tok::End {
        return Ok(Err(unexpected("the end", &end)));
    }
    Ok(Ok(value))
}

/// Pops the innermost open table: its value.
fn close(open: &mut Vec<Open>, tables: &Table, used: &mut usize) -> mlua::Result<Value> {
    let depth = open.len();
    if let Some(level) = open.pop() {
        *used -= level.slots();
    }
    let t: Value = tables.raw_get(depth)?;
    tables.raw_set(depth, Value::Nil)?;
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    const CFG: DecodeCfg = DecodeCfg { max_depth: 1000, invalid_numbers: true };

    fn run(lua: &Lua, json: &[u8]) -> Result<String, String> {
        let show: mlua::Function = lua
            .load(
                r#"
                local function show(v)
                  if type(v) == 'table' then
                    local ks = {}
                    for k in pairs(v) do ks[#ks + 1] = k end
                    table.sort(ks, function(a, b) return tostring(a) < tostring(b) end)
                    local o = {}
                    for _, k in ipairs(ks) do o[#o + 1] = tostring(k) .. '=' .. show(v[k]) end
                    return '{' .. table.concat(o, ',') .. '}'
                  elseif type(v) == 'userdata' then return 'null'
                  elseif type(v) == 'string' then return string.format('%q', v) end
                  return tostring(v)
                end
                return show
            "#,
            )
            .eval()
            .unwrap();
        match decode(lua, json, CFG).unwrap() {
            Ok(v) => Ok(show.call::<String>(v).unwrap()),
            Err(LibError::Message(m)) => Err(m),
            Err(other) => Err(format!("{other:?}")),
        }
    }

    #[test]
    fn values_decode_as_lua_cjson_gives_them() {
        let lua = Lua::new();
        assert_eq!(run(&lua, b"[1,2,3]"), Ok("{1=1,2=2,3=3}".into()));
        assert_eq!(
            run(&lua, br#" {"a": [true, false, null], "b": {"c": "d"}} "#),
            Ok(r#"{a={1=true,2=false,3=null},b={c="d"}}"#.into())
        );
        assert_eq!(run(&lua, b"[]"), Ok("{}".into()));
        assert_eq!(run(&lua, b"{}"), Ok("{}".into()));
        assert_eq!(run(&lua, br#"{"a":1,"a":2}"#), Ok("{a=2}".into()));
        assert_eq!(run(&lua, b"+5"), Ok("5".into()));
        assert_eq!(run(&lua, b"0x10"), Ok("16".into()));
        assert_eq!(run(&lua, b"007"), Ok("7".into()));
        assert_eq!(run(&lua, b"-1.5e3"), Ok("-1500".into()));
        assert_eq!(run(&lua, b"[inf, -Infinity, nan]"), Ok("{1=inf,2=-inf,3=nan}".into()));
        assert_eq!(run(&lua, b"[1]\0 junk"), Ok("{1=1}".into()));
    }

    #[test]
    fn non_utf8_bytes_are_kept() {
        let lua = Lua::new();
        let Ok(Value::String(s)) = decode(&lua, b"\"a\xffb\"", CFG).unwrap() else { panic!("not a string") };
        assert_eq!(&*s.as_bytes(), b"a\xffb");
        let Ok(Value::String(s)) = decode(&lua, br#""\u0000x""#, CFG).unwrap() else { panic!("not a string") };
        assert_eq!(&*s.as_bytes(), b"\0x");
        let escapes = br#""\u00e9\u20ac\ud83d\ude00\/\b\f\n\r\t\"\\""#;
        let Ok(Value::String(s)) = decode(&lua, escapes, CFG).unwrap() else { panic!("not a string") };
        assert_eq!(&*s.as_bytes(), "\u{e9}\u{20ac}\u{1f600}/\u{8}\u{c}\n\r\t\"\\".as_bytes());
    }

    #[test]
    fn errors_name_the_token_and_its_character() {
        let lua = Lua::new();
        let err = |j: &[u8]| run(&lua, j).unwrap_err();
        assert_eq!(err(b"[1,2"), "Expected comma or array end but found T_END at character 5");
        assert_eq!(err(b""), "Expected value but found T_END at character 1");
        assert_eq!(err(b"[1] x"), "Expected the end but found invalid token at character 5");
        assert_eq!(err(br#"{"a" 1}"#), "Expected colon but found T_NUMBER at character 6");
        assert_eq!(err(br#""ab\q""#), "Expected value but found invalid escape code at character 4");
        assert_eq!(err(br#""\u12x4""#), "Expected value but found invalid unicode escape code at character 2");
        assert_eq!(err(br#""\udc00""#), "Expected value but found invalid unicode escape code at character 2");
        assert_eq!(err(br#""\ud800\u0041""#), "Expected value but found invalid unicode escape code at character 2");
        assert_eq!(err(b"\"abc"), "Expected value but found unexpected end of string at character 5");
        assert_eq!(err(b"[-]"), "Expected value but found invalid number at character 2");
        assert_eq!(err(b"tru"), "Expected value but found invalid token at character 1");
        assert_eq!(err(b"{1:2}"), "Expected object key string but found T_NUMBER at character 2");
        assert_eq!(err(br#"{"a":1 "b":2}"#), "Expected comma or object end but found T_STRING at character 8");
        assert_eq!(err(b"[1,]"), "Expected value but found T_ARR_END at character 4");
        assert_eq!(err(b"]"), "Expected value but found T_ARR_END at character 1");
        assert_eq!(err(b"\xc3\xa9"), "Expected value but found invalid token at character 1");
        assert_eq!(err(b"a\0"), "JSON parser does not support UTF-16 or UTF-32");
        assert_eq!(err(b"\0a"), "JSON parser does not support UTF-16 or UTF-32");
    }

    #[test]
    fn nesting_is_bounded() {
        let lua = Lua::new();
        let deep = |n: usize| [vec![b'['; n], vec![b']'; n]].concat();
        assert!(run(&lua, &deep(1000)).is_ok());
        assert_eq!(
            run(&lua, &deep(1001)).unwrap_err(),
            "Found too many nested data structures (1001) at character 1001"
        );
        let cfg = DecodeCfg { max_depth: 100_000, invalid_numbers: true };
        // Past the C stack of the C decoder: an array level holds one slot.
        let Err(LibError::Message(m)) = decode(&lua, &deep(20_000), cfg).unwrap() else { panic!("no error") };
        assert_eq!(m, "Found too many nested data structures (7999) at character 7999");
        let objects = br#"{"a":"#.repeat(5000);
        let Err(LibError::Message(m)) = decode(&lua, &objects, cfg).unwrap() else { panic!("no error") };
        assert_eq!(m, "Found too many nested data structures (4000) at character 19996");
    }
}
