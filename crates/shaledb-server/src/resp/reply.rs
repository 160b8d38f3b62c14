//! RESP2/RESP3 replies: [`Reply`] and its encoder (see the module doc of `resp` for the degraded shapes).

use bytes::{Bytes, BytesMut};
use std::fmt::Write as _;

/// A reply, encoded for the connection's protocol version. Two replies are equal when they have the same
/// shape and values; a [`Reply::Bulks`] equals the [`Reply::Array`] of the same bulk strings (they are the
/// same bytes on the wire).
#[derive(Clone, Debug)]
pub enum Reply {
    /// `+OK`.
    Ok,
    /// A status line (`+PONG`, `+QUEUED`); must not contain CR or LF.
    Simple(String),
    /// An error line; the text starts with its code (`ERR ...`, `WRONGTYPE ...`).
    Error(String),
    Int(i64),
    Bulk(Bytes),
    /// A missing value: `$-1` (RESP2) / `_` (RESP3).
    Nil,
    /// A missing array: `*-1` (RESP2) / `_` (RESP3).
    NilArray,
    Array(Vec<Reply>),
    /// A map: a flat array of 2n in RESP2.
    Map(Vec<(Reply, Reply)>),
    /// A set: an array in RESP2.
    Set(Vec<Reply>),
    /// A double: a bulk string in RESP2.
    Double(f64),
    /// A boolean: the integer 1/0 in RESP2.
    Bool(bool),
    /// A verbatim string (`=len\r\ntxt:...`): a bulk string in RESP2.
    Verbatim(String),
    /// Pairs (ZRANGE ... WITHSCORES, ZPOPMIN with a count): one flat array of 2n items in RESP2, an array
    /// of n two-item arrays in RESP3, as Redis 7 sends them.
    Pairs(Vec<(Reply, Reply)>),
    /// An out-of-band push (`>`: Pub/Sub messages and confirmations): an array in RESP2.
    Push(Vec<Reply>),
    /// An array of bulk strings encoded as it is built (LRANGE): one buffer instead of a `Reply` and an
    /// allocation per element. The same bytes in RESP2 and RESP3.
    Bulks(Bulks),
}

/// An array of bulk strings, kept in its wire form (`$len\r\nbytes\r\n` per element) as they are pushed; it
/// is written out with one copy. [`Reply::Bulks`] holds it; [`Bulks::iter`] gives the elements back (a
/// script's `redis.call`).
#[derive(Clone, Default, PartialEq)]
pub struct Bulks {
    enc: Vec<u8>,
    len: usize,
}

impl std::fmt::Debug for Bulks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter().map(Bytes::copy_from_slice)).finish()
    }
}

impl PartialEq for Reply {
    fn eq(&self, other: &Reply) -> bool {
        use Reply as R;
        match (self, other) {
            (R::Ok, R::Ok) | (R::Nil, R::Nil) | (R::NilArray, R::NilArray) => true,
            (R::Simple(a), R::Simple(b)) | (R::Error(a), R::Error(b)) | (R::Verbatim(a), R::Verbatim(b)) => a == b,
            (R::Int(a), R::Int(b)) => a == b,
            (R::Bulk(a), R::Bulk(b)) => a == b,
            (R::Array(a), R::Array(b)) | (R::Set(a), R::Set(b)) | (R::Push(a), R::Push(b)) => a == b,
            (R::Map(a), R::Map(b)) | (R::Pairs(a), R::Pairs(b)) => a == b,
            (R::Double(a), R::Double(b)) => a == b,
            (R::Bool(a), R::Bool(b)) => a == b,
            (R::Bulks(a), R::Bulks(b)) => a == b,
            (R::Bulks(a), R::Array(b)) | (R::Array(b), R::Bulks(a)) => {
                a.len() == b.len() && a.iter().zip(b).all(|(x, y)| matches!(y, R::Bulk(y) if y[..] == *x))
            }
            _ => false,
        }
    }
}

impl Bulks {
    /// An empty array with room for about `bytes` bytes of elements.
    pub fn with_capacity(bytes: usize) -> Bulks {
        Bulks { enc: Vec::with_capacity(bytes), len: 0 }
    }

    /// Appends the element `b`.
    pub fn push(&mut self, b: &[u8]) {
        let mut tmp = [0u8; 20];
        let digits = fmt_u64(&mut tmp, b.len() as u64);
        self.enc.reserve(b.len() + digits.len() + 5);
        self.enc.push(b'$');
        self.enc.extend_from_slice(digits);
        self.enc.extend_from_slice(b"\r\n");
        self.enc.extend_from_slice(b);
        self.enc.extend_from_slice(b"\r\n");
        self.len += 1;
    }

    /// The number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when it holds no element.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The elements, in order.
    pub fn iter(&self) -> BulksIter<'_> {
        BulksIter { rest: &self.enc }
    }

    /// The same array as one [`Reply::Bulk`] per element.
    pub fn to_replies(&self) -> Vec<Reply> {
        self.iter().map(|b| Reply::Bulk(Bytes::copy_from_slice(b))).collect()
    }
}

/// The elements of a [`Bulks`].
pub struct BulksIter<'a> {
    rest: &'a [u8],
}

impl<'a> Iterator for BulksIter<'a> {
    type Item = &'a [u8];

    fn next(&mut self) -> Option<&'a [u8]> {
        // INVARIANT: `rest` is a sequence of `$len\r\nbytes\r\n` written by `Bulks::push`.
        let rest = self.rest.strip_prefix(b"$")?;
        let nl = rest.iter().position(|&c| c == b'\r')?;
        let len: usize = std::str::from_utf8(&rest[..nl]).ok()?.parse().ok()?;
        let start = nl + 2;
        let item = rest.get(start..start + len)?;
        self.rest = rest.get(start + len + 2..)?;
        Some(item)
    }
}

impl Reply {
    pub fn error(msg: impl Into<String>) -> Reply {
        Reply::Error(msg.into())
    }

    /// `-ERR <msg>`.
    pub fn err(msg: impl std::fmt::Display) -> Reply {
        Reply::Error(format!("ERR {msg}"))
    }

    pub fn bulk(b: impl Into<Bytes>) -> Reply {
        Reply::Bulk(b.into())
    }

    pub fn is_error(&self) -> bool {
        matches!(self, Reply::Error(_))
    }

    /// Appends the reply to `out` in protocol `proto` (2 or 3).
    pub fn encode(&self, proto: u8, out: &mut BytesMut) {
        match self {
            Reply::Ok => out.extend_from_slice(b"+OK\r\n"),
            Reply::Simple(s) => line(out, b'+', s.as_bytes()),
            Reply::Error(s) => line(out, b'-', s.as_bytes()),
            Reply::Int(n) => {
                out.extend_from_slice(b":");
                push_int(out, *n);
                out.extend_from_slice(b"\r\n");
            }
            Reply::Bulk(b) => bulk(out, b),
            Reply::Nil => out.extend_from_slice(if proto >= 3 { b"_\r\n" } else { b"$-1\r\n" }),
            Reply::NilArray => out.extend_from_slice(if proto >= 3 { b"_\r\n" } else { b"*-1\r\n" }),
            Reply::Array(items) => {
                header(out, b'*', items.len());
                for r in items {
                    r.encode(proto, out);
                }
            }
            Reply::Push(items) => {
                header(out, if proto >= 3 { b'>' } else { b'*' }, items.len());
                for r in items {
                    r.encode(proto, out);
                }
            }
            Reply::Set(items) => {
                header(out, if proto >= 3 { b'~' } else { b'*' }, items.len());
                for r in items {
                    r.encode(proto, out);
                }
            }
            Reply::Map(pairs) => {
                if proto >= 3 {
                    header(out, b'%', pairs.len());
                } else {
                    header(out, b'*', pairs.len() * 2);
                }
                for (k, v) in pairs {
                    k.encode(proto, out);
                    v.encode(proto, out);
                }
            }
            Reply::Pairs(pairs) => {
                if proto >= 3 {
                    header(out, b'*', pairs.len());
                } else {
                    header(out, b'*', pairs.len() * 2);
                }
                for (a, b) in pairs {
                    if proto >= 3 {
                        out.extend_from_slice(b"*2\r\n");
                    }
                    a.encode(proto, out);
                    b.encode(proto, out);
                }
            }
            Reply::Double(d) => {
                let s = format_double(*d);
                if proto >= 3 {
                    line(out, b',', s.as_bytes());
                } else {
                    bulk(out, s.as_bytes());
                }
            }
            Reply::Bool(b) => {
                if proto >= 3 {
                    out.extend_from_slice(if *b { b"#t\r\n" } else { b"#f\r\n" });
                } else {
                    out.extend_from_slice(if *b { b":1\r\n" } else { b":0\r\n" });
                }
            }
            Reply::Bulks(b) => {
                header(out, b'*', b.len);
                out.extend_from_slice(&b.enc);
            }
            Reply::Verbatim(s) => {
                if proto >= 3 {
                    header(out, b'=', s.len() + 4);
                    out.extend_from_slice(b"txt:");
                    out.extend_from_slice(s.as_bytes());
                    out.extend_from_slice(b"\r\n");
                } else {
                    bulk(out, s.as_bytes());
                }
            }
        }
    }
}

/// A double as Redis 7.0 replies it (`addReplyDouble`): `inf`, `-inf`, `nan`, else C's `%.17g` (17
/// significant digits, trailing zeros dropped, exponent form below 1e-4 and from 1e17): `1.5`, `3`,
/// `1.1000000000000001`, `1.0000000000000001e-05`, `1e+22`.
pub fn format_double(d: f64) -> String {
    if d.is_nan() {
        return "nan".into();
    }
    if d.is_infinite() {
        return if d > 0.0 { "inf" } else { "-inf" }.into();
    }
    if d == 0.0 {
        return if d.is_sign_negative() { "-0" } else { "0" }.into();
    }
    // 17 significant digits, correctly rounded (Rust formats the exact binary value, as glibc does).
    let sci = format!("{:.16e}", d.abs());
    let (mant, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let digits: String = mant.chars().filter(char::is_ascii_digit).collect();
    let mut s = String::with_capacity(26);
    if d < 0.0 {
        s.push('-');
    }
    if !(-4..17).contains(&exp) {
        let t = digits.trim_end_matches('0');
        s.push_str(&t[..1]);
        if t.len() > 1 {
            s.push('.');
            s.push_str(&t[1..]);
        }
        let _ = write!(s, "e{}{:02}", if exp < 0 { '-' } else { '+' }, exp.unsigned_abs());
    } else if exp >= 0 {
        let point = exp as usize + 1;
        s.push_str(&digits[..point]);
        let frac = digits[point..].trim_end_matches('0');
        if !frac.is_empty() {
            s.push('.');
            s.push_str(frac);
        }
    } else {
        s.push_str("0.");
        for _ in 0..(-exp - 1) {
            s.push('0');
        }
        s.push_str(digits.trim_end_matches('0'));
    }
    s
}

fn line(out: &mut BytesMut, tag: u8, s: &[u8]) {
    out.reserve(s.len() + 3);
    out.extend_from_slice(&[tag]);
    // A status or error line must stay one line: CR/LF become spaces.
    if s.iter().any(|&c| c == b'\r' || c == b'\n') {
        out.extend(s.iter().map(|&c| if c == b'\r' || c == b'\n' { b' ' } else { c }));
    } else {
        out.extend_from_slice(s);
    }
    out.extend_from_slice(b"\r\n");
}

fn header(out: &mut BytesMut, tag: u8, n: usize) {
    out.extend_from_slice(&[tag]);
    push_int(out, n as i64);
    out.extend_from_slice(b"\r\n");
}

fn bulk(out: &mut BytesMut, b: &[u8]) {
    out.reserve(b.len() + 16);
    header(out, b'$', b.len());
    out.extend_from_slice(b);
    out.extend_from_slice(b"\r\n");
}

/// The decimal digits of `v`, written at the end of `tmp`.
fn fmt_u64(tmp: &mut [u8; 20], mut v: u64) -> &[u8] {
    let mut i = tmp.len();
    loop {
        i -= 1;
        tmp[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    &tmp[i..]
}

fn push_int(out: &mut BytesMut, n: i64) {
    let mut tmp = [0u8; 20];
    let digits = fmt_u64(&mut tmp, n.unsigned_abs());
    if n < 0 {
        out.extend_from_slice(b"-");
    }
    out.extend_from_slice(digits);
}
