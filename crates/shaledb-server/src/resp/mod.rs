//! RESP2/RESP3 requests and replies.
//!
//! Requests (what clients send) are either a multibulk or an inline command:
//!
//! ```text
//! request   := multibulk | inline
//! multibulk := '*' count CRLF bulk{count}          count in 0..=max_multibulk_len ('*-1' and '*0' are empty)
//! bulk      := '$' len CRLF byte{len} CRLF          len in 0..=max_bulk_len
//! inline    := (any byte but '\n'){0,max_inline_len} '\n'   split into words like a shell (quotes, escapes);
//!                                                           a trailing '\r' is dropped; an empty line is skipped
//! ```
//!
//! The parser is incremental: it keeps the arguments of a multibulk already received, so a frame split at any
//! byte across reads is parsed once, and a bulk payload is split off the read buffer (`BytesMut::split_to`)
//! without a copy. Every number is checked against [`Limits`] before it sizes anything. A protocol error is
//! final: the connection answers it and closes, as Redis does.
//!
//! Replies ([`Reply`]) are encoded in the protocol the connection negotiated with `HELLO` (2 by default);
//! RESP3-only types degrade to their RESP2 shapes (map -> flat array, double -> bulk string, null -> `$-1`).

use bytes::{Buf, Bytes, BytesMut};
use std::fmt::Write as _;

/// Hard limits of the request parser (Redis's `proto-max-bulk-len` and friends).
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Largest bulk string, in bytes. Redis: `proto-max-bulk-len`, 512 MB.
    pub max_bulk_len: usize,
    /// Most arguments in one multibulk. Redis accepts up to 2^31-1; we default to 1M, which no real command
    /// needs to exceed (MSET of 500K pairs) and which bounds the per-request vector.
    pub max_multibulk_len: usize,
    /// Longest inline command line, in bytes (Redis: 64 KB).
    pub max_inline_len: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits { max_bulk_len: 512 << 20, max_multibulk_len: 1 << 20, max_inline_len: 64 << 10 }
    }
}

/// A broken request: answered with `-ERR Protocol error: ...` and the connection is closed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProtocolError {
    #[error("invalid multibulk length")]
    MultibulkLength,
    #[error("invalid bulk length")]
    BulkLength,
    #[error("expected '$', got '{0}'")]
    ExpectedDollar(char),
    #[error("too big inline request")]
    InlineTooBig,
    #[error("too big mbulk count string")]
    CountTooBig,
    #[error("unbalanced quotes in request")]
    UnbalancedQuotes,
    #[error("bulk string not terminated by CRLF")]
    MissingCrlf,
}

/// One request: the command name and its arguments, each a slice of the read buffer.
pub type Args = Vec<Bytes>;

/// Incremental request parser; one per connection.
#[derive(Debug, Default)]
pub struct Parser {
    limits: Limits,
    /// A multibulk in progress: arguments still expected and those received.
    pending: Option<(usize, Args)>,
    /// Length of the bulk whose header was consumed but whose payload has not fully arrived.
    bulk_len: Option<usize>,
    /// Bytes of the arguments held in `pending` (they count towards the client's query buffer limit).
    held: usize,
}

/// Longest `*<count>` or `$<len>` header line we accept before its CRLF (Redis: 64 KB for any line; a number
/// never needs more than 20 digits).
const MAX_HEADER: usize = 32;

impl Parser {
    pub fn new(limits: Limits) -> Parser {
        Parser { limits, pending: None, bulk_len: None, held: 0 }
    }

    /// Changes the limits (CONFIG SET proto-max-bulk-len); they apply from the next header parsed.
    pub fn set_limits(&mut self, limits: Limits) {
        self.limits = limits;
    }

    /// Bytes of a partial request the parser holds outside the read buffer.
    pub fn held_bytes(&self) -> usize {
        self.held
    }

    /// True when part of a request has been consumed from the buffer but the request is not complete.
    pub fn in_request(&self) -> bool {
        self.pending.is_some()
    }

    /// Bytes the parser knows it still needs for the bulk in progress (a hint to size the next read).
    pub fn wanted(&self) -> usize {
        self.bulk_len.map_or(0, |n| n + 2)
    }

    /// Parses the next complete request from the front of `buf`, consuming it. `Ok(None)` when more input is
    /// needed (what was consumed so far is kept in the parser).
    pub fn next(&mut self, buf: &mut BytesMut) -> Result<Option<Args>, ProtocolError> {
        loop {
            if self.pending.is_none() {
                // Skip empty inline lines between requests.
                match buf.first() {
                    None => return Ok(None),
                    Some(b'*') => {
                        let Some(n) = self.header(buf, ProtocolError::MultibulkLength)? else { return Ok(None) };
                        if n <= 0 {
                            continue;
                        }
                        let n = n as usize;
                        if n > self.limits.max_multibulk_len {
                            return Err(ProtocolError::MultibulkLength);
                        }
                        // The vector grows with the arguments received, not with the count announced.
                        self.pending = Some((n, Vec::with_capacity(n.min(64))));
                    }
                    Some(_) => match self.inline(buf)? {
                        Some(args) if args.is_empty() => continue,
                        other => return Ok(other),
                    },
                }
            }
            let Some((remaining, _)) = self.pending.as_ref() else { continue };
            if *remaining == 0 {
                let (_, args) = self.pending.take().unwrap_or_default();
                self.held = 0;
                return Ok(Some(args));
            }
            let len = match self.bulk_len {
                Some(len) => len,
                None => {
                    match buf.first() {
                        None => return Ok(None),
                        Some(b'$') => {}
                        Some(&c) => return Err(ProtocolError::ExpectedDollar(c as char)),
                    }
                    let Some(n) = self.header(buf, ProtocolError::BulkLength)? else { return Ok(None) };
                    if n < 0 || n as u64 > self.limits.max_bulk_len as u64 {
                        return Err(ProtocolError::BulkLength);
                    }
                    self.bulk_len = Some(n as usize);
                    n as usize
                }
            };
            if buf.len() < len + 2 {
                // Make room for the payload in steps of at most 1 MiB: a header announcing 512 MB costs
                // nothing until the bytes arrive.
                buf.reserve((len + 2 - buf.len()).min(1 << 20));
                return Ok(None);
            }
            if &buf[len..len + 2] != b"\r\n" {
                return Err(ProtocolError::MissingCrlf);
            }
            let arg = buf.split_to(len).freeze();
            buf.advance(2);
            self.bulk_len = None;
            if let Some((remaining, args)) = self.pending.as_mut() {
                self.held += arg.len() + 16;
                args.push(arg);
                *remaining -= 1;
            }
        }
    }

    /// Parses a `*N\r\n` or `$N\r\n` line at the front of `buf`; `None` if the line is incomplete.
    fn header(&self, buf: &mut BytesMut, bad: ProtocolError) -> Result<Option<i64>, ProtocolError> {
        let window = &buf[..buf.len().min(MAX_HEADER)];
        let Some(nl) = window.iter().position(|&b| b == b'\n') else {
            if buf.len() >= MAX_HEADER {
                return Err(if bad == ProtocolError::MultibulkLength { ProtocolError::CountTooBig } else { bad });
            }
            return Ok(None);
        };
        if nl < 2 || buf[nl - 1] != b'\r' {
            return Err(bad);
        }
        let n = parse_i64(&buf[1..nl - 1]).ok_or(bad)?;
        buf.advance(nl + 1);
        Ok(Some(n))
    }

    /// An inline command: one line split into words.
    fn inline(&self, buf: &mut BytesMut) -> Result<Option<Args>, ProtocolError> {
        let Some(nl) = buf.iter().position(|&b| b == b'\n') else {
            if buf.len() > self.limits.max_inline_len {
                return Err(ProtocolError::InlineTooBig);
            }
            return Ok(None);
        };
        if nl > self.limits.max_inline_len {
            return Err(ProtocolError::InlineTooBig);
        }
        let line = buf.split_to(nl + 1);
        let line = line.strip_suffix(b"\n").unwrap_or(&line);
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        split_inline(line).map(Some)
    }
}

/// A decimal integer as RESP writes it (optional '-', digits, no '+', no leading spaces), without overflow.
pub fn parse_i64(s: &[u8]) -> Option<i64> {
    let (neg, digits) = match s.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, s),
    };
    if digits.is_empty() || digits.len() > 19 {
        return None;
    }
    // As Redis's string2ll: no leading zero ("007", "-0" are not integers), "0" itself is.
    if digits[0] == b'0' && (digits.len() > 1 || neg) {
        return None;
    }
    let mut v: i64 = 0;
    for &d in digits {
        if !d.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?.checked_sub((d - b'0') as i64)?;
    }
    if neg {
        Some(v)
    } else {
        v.checked_neg()
    }
}

/// Splits a line into words as an inline command is split (also used for config file lines).
pub fn split_words(line: &[u8]) -> Result<Args, ProtocolError> {
    split_inline(line)
}

/// Splits an inline command line into words: whitespace separates; "double quotes" take \n \r \t \b \a \\ \"
/// and \xHH escapes; 'single quotes' take \' only. A closing quote must be followed by a space or the end.
fn split_inline(line: &[u8]) -> Result<Args, ProtocolError> {
    let mut args = Vec::new();
    let mut i = 0;
    while i < line.len() {
        while i < line.len() && line[i].is_ascii_whitespace() {
            i += 1;
        }
        if i >= line.len() {
            break;
        }
        let mut word = Vec::new();
        match line[i] {
            b'"' => {
                i += 1;
                loop {
                    let Some(&c) = line.get(i) else { return Err(ProtocolError::UnbalancedQuotes) };
                    i += 1;
                    match c {
                        b'"' => break,
                        b'\\' => {
                            let Some(&e) = line.get(i) else { return Err(ProtocolError::UnbalancedQuotes) };
                            i += 1;
                            match e {
                                b'n' => word.push(b'\n'),
                                b'r' => word.push(b'\r'),
                                b't' => word.push(b'\t'),
                                b'b' => word.push(8),
                                b'a' => word.push(7),
                                b'x' if line.len() >= i + 2
                                    && line[i].is_ascii_hexdigit()
                                    && line[i + 1].is_ascii_hexdigit() =>
                                {
                                    let hex = |c: u8| (c as char).to_digit(16).unwrap_or(0) as u8;
                                    word.push(hex(line[i]) * 16 + hex(line[i + 1]));
                                    i += 2;
                                }
                                other => word.push(other),
                            }
                        }
                        other => word.push(other),
                    }
                }
                if line.get(i).is_some_and(|c| !c.is_ascii_whitespace()) {
                    return Err(ProtocolError::UnbalancedQuotes);
                }
            }
            b'\'' => {
                i += 1;
                loop {
                    let Some(&c) = line.get(i) else { return Err(ProtocolError::UnbalancedQuotes) };
                    i += 1;
                    match c {
                        b'\'' => break,
                        b'\\' if line.get(i) == Some(&b'\'') => {
                            word.push(b'\'');
                            i += 1;
                        }
                        other => word.push(other),
                    }
                }
                if line.get(i).is_some_and(|c| !c.is_ascii_whitespace()) {
                    return Err(ProtocolError::UnbalancedQuotes);
                }
            }
            _ => {
                while i < line.len() && !line[i].is_ascii_whitespace() {
                    word.push(line[i]);
                    i += 1;
                }
            }
        }
        args.push(Bytes::from(word));
    }
    Ok(args)
}

/// A reply, encoded for the connection's protocol version.
#[derive(Clone, Debug, PartialEq)]
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

fn push_int(out: &mut BytesMut, n: i64) {
    let mut tmp = [0u8; 20];
    let mut i = tmp.len();
    let mut v = n.unsigned_abs();
    loop {
        i -= 1;
        tmp[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    if n < 0 {
        out.extend_from_slice(b"-");
    }
    out.extend_from_slice(&tmp[i..]);
}

/// The fuzz driver of the `resp` target (and its corpus replay on stable): arbitrary bytes go through a
/// [`Parser`] with small limits, fed in pieces whose sizes the first bytes choose, and every request parsed is
/// looked up in the command table and checked for arity, as a connection does (no engine). Checks, by
/// panicking (which the fuzzer reports): the requests and the error are the same whatever the split, and
/// neither the read buffer nor the parser ever holds more than the input plus a bounded slack.
pub fn fuzz_requests(data: &[u8]) {
    let limits = Limits { max_bulk_len: 1 << 16, max_multibulk_len: 1 << 10, max_inline_len: 1 << 12 };
    let (seed, input) = match data.split_first() {
        Some((&s, rest)) => (s, rest),
        None => (0, data),
    };
    let whole = parse_in_pieces(limits, input, &[]);
    // Piece sizes 1..=16 from the input itself, cycling through the seed.
    let sizes: Vec<usize> = input.iter().take(64).map(|&b| 1 + ((b ^ seed) as usize % 16)).collect();
    let split = parse_in_pieces(limits, input, &sizes);
    assert_eq!(whole, split, "a different result when the input arrives in pieces");
    if let Ok(requests) = &whole.0 {
        let mut out = BytesMut::new();
        for args in requests {
            let reply = match args.first().and_then(|n| crate::commands::lookup(n)) {
                None => crate::commands::unknown_command(args),
                Some(spec) if !spec.arity_ok(args.len()) => crate::commands::wrong_arity(spec.name),
                Some(_) => Reply::Ok,
            };
            reply.encode(2, &mut out);
        }
    }
}

/// Parses `input` fed in pieces of `sizes` (cycled; all at once when empty): every request parsed, then the
/// protocol error if one stopped it, and whether the input ended inside a request. Asserts the memory bounds.
#[allow(clippy::type_complexity)] // A test helper's one result: (requests, error, ended inside a request).
fn parse_in_pieces(
    limits: Limits,
    input: &[u8],
    sizes: &[usize],
) -> (Result<Vec<Args>, (Vec<Args>, ProtocolError)>, bool) {
    let mut p = Parser::new(limits);
    let mut buf = BytesMut::new();
    let mut out = Vec::new();
    let mut fed = 0;
    let mut i = 0;
    // Slack: one reservation step for a bulk in progress plus what BytesMut rounds up to.
    let slack = (1 << 20) + 2 * limits.max_bulk_len + 4096;
    while fed < input.len() || i == 0 {
        let n = if sizes.is_empty() { input.len() } else { sizes[i % sizes.len()] };
        let end = (fed + n).min(input.len());
        buf.extend_from_slice(&input[fed..end]);
        fed = end;
        i += 1;
        loop {
            match p.next(&mut buf) {
                Ok(Some(args)) => out.push(args),
                Ok(None) => break,
                Err(e) => return (Err((out, e)), p.in_request()),
            }
        }
        assert!(
            buf.capacity() <= fed + slack && p.held_bytes() <= fed + 16 * (limits.max_multibulk_len + 1),
            "memory beyond the input: buffer {} held {} fed {fed}",
            buf.capacity(),
            p.held_bytes()
        );
        if fed >= input.len() {
            break;
        }
    }
    (Ok(out), p.in_request() || !buf.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_all(input: &[u8]) -> Result<Vec<Args>, ProtocolError> {
        let mut p = Parser::default();
        let mut buf = BytesMut::from(input);
        let mut out = Vec::new();
        while let Some(a) = p.next(&mut buf)? {
            out.push(a);
        }
        Ok(out)
    }

    use proptest::prelude::*;

    /// Encodes requests as multibulks, as every client library sends them.
    fn encode_multibulk(reqs: &[Vec<Vec<u8>>]) -> Vec<u8> {
        let mut out = Vec::new();
        for r in reqs {
            out.extend_from_slice(format!("*{}\r\n", r.len()).as_bytes());
            for a in r {
                out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
                out.extend_from_slice(a);
                out.extend_from_slice(b"\r\n");
            }
        }
        out
    }

    /// Feeds `input` in pieces cut at `cuts` (sorted offsets), parsing after each piece as a connection does.
    fn parse_split(limits: Limits, input: &[u8], cuts: &[usize]) -> Result<Vec<Args>, ProtocolError> {
        let mut p = Parser::new(limits);
        let mut buf = BytesMut::new();
        let mut out = Vec::new();
        let mut at = 0;
        let mut ends: Vec<usize> = cuts.iter().map(|&c| c.min(input.len())).collect();
        ends.sort_unstable();
        ends.push(input.len());
        for end in ends {
            if end < at {
                continue;
            }
            buf.extend_from_slice(&input[at..end]);
            at = end;
            while let Some(a) = p.next(&mut buf)? {
                out.push(a);
            }
        }
        assert!(buf.is_empty() && !p.in_request() && p.held_bytes() == 0, "left over after complete input");
        Ok(out)
    }

    fn arg() -> impl Strategy<Value = Vec<u8>> {
        prop_oneof![
            3 => proptest::collection::vec(any::<u8>(), 0..40),
            1 => proptest::collection::vec(any::<u8>(), 200..3000),
            1 => Just(b"\r\n*1\r\n$3\r\n".to_vec()),
        ]
    }

    fn requests() -> impl Strategy<Value = Vec<Vec<Vec<u8>>>> {
        proptest::collection::vec(proptest::collection::vec(arg(), 1..6), 1..12)
    }

    /// A word that splits as itself: no whitespace, no quote first.
    fn plain_word() -> impl Strategy<Value = Vec<u8>> {
        proptest::collection::vec(
            any::<u8>().prop_filter("plain", |c| !c.is_ascii_whitespace() && !matches!(*c, b'"' | b'\'' | b'*')),
            1..20,
        )
    }

    /// Any bytes, written as a double-quoted inline word with escapes.
    fn quote(word: &[u8]) -> Vec<u8> {
        let mut q = vec![b'"'];
        for &c in word {
            match c {
                b'"' => q.extend_from_slice(b"\\\""),
                b'\\' => q.extend_from_slice(b"\\\\"),
                b'\n' => q.extend_from_slice(b"\\n"),
                b'\r' => q.extend_from_slice(b"\\r"),
                b'\t' => q.extend_from_slice(b"\\t"),
                c if c.is_ascii_graphic() || c == b' ' => q.push(c),
                c => q.extend_from_slice(format!("\\x{c:02x}").as_bytes()),
            }
        }
        q.push(b'"');
        q
    }

    fn bytes(v: &[Vec<u8>]) -> Args {
        v.iter().map(|a| Bytes::copy_from_slice(a)).collect()
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

        #[test]
        fn multibulk_requests_split_anywhere_parse_back(reqs in requests(), cuts in proptest::collection::vec(any::<usize>(), 0..40)) {
            let input = encode_multibulk(&reqs);
            let cuts: Vec<usize> = cuts.iter().map(|c| c % (input.len() + 1)).collect();
            let got = parse_split(Limits::default(), &input, &cuts).unwrap();
            let want: Vec<Args> = reqs.iter().map(|r| bytes(r)).collect();
            prop_assert_eq!(got, want);
        }

        #[test]
        fn byte_at_a_time_parses_back(reqs in requests()) {
            let input = encode_multibulk(&reqs);
            let cuts: Vec<usize> = (0..input.len()).collect();
            let got = parse_split(Limits::default(), &input, &cuts).unwrap();
            prop_assert_eq!(got, reqs.iter().map(|r| bytes(r)).collect::<Vec<_>>());
        }

        #[test]
        fn inline_requests_round_trip(
            lines in proptest::collection::vec(proptest::collection::vec((plain_word(), any::<bool>(), proptest::collection::vec(any::<u8>(), 0..12)), 1..6), 1..8),
            crlf in any::<bool>(),
            cuts in proptest::collection::vec(any::<usize>(), 0..20),
        ) {
            let mut input = Vec::new();
            let mut want = Vec::new();
            for line in &lines {
                let mut words = Vec::new();
                for (i, (plain, quoted, raw)) in line.iter().enumerate() {
                    if i > 0 {
                        input.extend_from_slice(if i % 2 == 0 { b"  " } else { b" \t" });
                    }
                    if *quoted {
                        input.extend_from_slice(&quote(raw));
                        words.push(raw.clone());
                    } else {
                        input.extend_from_slice(plain);
                        words.push(plain.clone());
                    }
                }
                input.extend_from_slice(if crlf { b"\r\n" } else { b"\n" });
                want.push(bytes(&words));
            }
            let cuts: Vec<usize> = cuts.iter().map(|c| c % (input.len() + 1)).collect();
            prop_assert_eq!(parse_split(Limits::default(), &input, &cuts).unwrap(), want);
        }

        #[test]
        fn malformed_frames_give_their_error_wherever_split(
            kind in 0usize..9,
            n in 1usize..1000,
            c in any::<u8>(),
            good in requests(),
            cuts in proptest::collection::vec(any::<usize>(), 0..10),
        ) {
            let small = Limits { max_bulk_len: 1000, max_multibulk_len: 1000, max_inline_len: 1000 };
            let (bad, want): (Vec<u8>, ProtocolError) = match kind {
                0 => (format!("*{n}x\r\n").into_bytes(), ProtocolError::MultibulkLength),
                1 => (format!("*{}\r\n", 1000 + n).into_bytes(), ProtocolError::MultibulkLength),
                2 => (format!("*1\r\n${}\r\n", 1000 + n).into_bytes(), ProtocolError::BulkLength),
                3 => (format!("*1\r\n$-{n}\r\n").into_bytes(), ProtocolError::BulkLength),
                4 => {
                    let c = if c == b'$' { b'+' } else { c };
                    let mut v = b"*2\r\n$1\r\na\r\n".to_vec();
                    v.push(c);
                    v.extend_from_slice(b"3\r\n");
                    (v, ProtocolError::ExpectedDollar(c as char))
                }
                5 => {
                    let mut v = format!("*1\r\n${}\r\n", n % 100).into_bytes();
                    v.extend(std::iter::repeat_n(b'a', n % 100 + 1));
                    v.extend_from_slice(b"\r\n");
                    (v, ProtocolError::MissingCrlf)
                }
                6 => (format!("*{}", "9".repeat(MAX_HEADER + n % 50)).into_bytes(), ProtocolError::CountTooBig),
                7 => (vec![b'x'; 1001 + n], ProtocolError::InlineTooBig),
                _ => (format!("set k \"{}\n", "v".repeat(n % 20)).into_bytes(), ProtocolError::UnbalancedQuotes),
            };
            // Good requests first: they parse; then the bad frame's error, whatever the split.
            let good: Vec<Vec<Vec<u8>>> = good.into_iter().map(|r| r.into_iter().map(|a| a[..a.len().min(100)].to_vec()).collect()).collect();
            let mut input = encode_multibulk(&good);
            let good_len = good.len();
            input.extend_from_slice(&bad);
            let cuts: Vec<usize> = cuts.iter().map(|x| x % (input.len() + 1)).collect();
            let mut p = Parser::new(small);
            let mut buf = BytesMut::new();
            let mut parsed = 0;
            let mut err = None;
            let mut ends = cuts.clone();
            ends.sort_unstable();
            ends.push(input.len());
            let mut at = 0;
            'feed: for end in ends {
                buf.extend_from_slice(&input[at..end.max(at)]);
                at = end.max(at);
                loop {
                    match p.next(&mut buf) {
                        Ok(Some(_)) => parsed += 1,
                        Ok(None) => break,
                        Err(e) => { err = Some(e); break 'feed; }
                    }
                }
            }
            prop_assert_eq!(parsed, good_len);
            prop_assert_eq!(err, Some(want));
        }

        #[test]
        fn garbage_never_panics_and_stays_bounded(data in proptest::collection::vec(any::<u8>(), 0..4096)) {
            fuzz_requests(&data);
        }

        #[test]
        fn framed_garbage_never_panics(parts in proptest::collection::vec(prop_oneof![
            Just(b"*".to_vec()), Just(b"$".to_vec()), Just(b"\r\n".to_vec()), Just(b"\n".to_vec()),
            Just(b"-1".to_vec()), Just(b"3".to_vec()), Just(b"\"".to_vec()), Just(b"'".to_vec()),
            Just(b"\\x4".to_vec()), Just(b" ".to_vec()), Just(b"99999999999999999999".to_vec()),
            proptest::collection::vec(any::<u8>(), 0..8),
        ], 0..200), seed in any::<u8>()) {
            let mut data = vec![seed];
            data.extend(parts.concat());
            fuzz_requests(&data);
        }
    }

    #[test]
    fn a_huge_announced_bulk_costs_nothing_until_it_arrives() {
        let mut p = Parser::default();
        let mut buf = BytesMut::from(&b"*2\r\n$3\r\nSET\r\n$536870912\r\nab"[..]);
        assert_eq!(p.next(&mut buf), Ok(None));
        assert!(buf.capacity() <= (1 << 20) + 64, "reserved {}", buf.capacity());
        assert_eq!(p.wanted(), (512 << 20) + 2);
        assert!(p.in_request());
    }

    #[test]
    fn a_huge_announced_count_allocates_for_what_arrives() {
        let mut p = Parser::default();
        let mut buf = BytesMut::from(&b"*1048576\r\n$1\r\na\r\n"[..]);
        assert_eq!(p.next(&mut buf), Ok(None));
        assert!(p.held_bytes() < 100);
    }

    #[test]
    fn multibulk_and_inline() {
        let got = parse_all(b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\nPING\r\n\r\nset a \"b c\\x41\"\r\n").unwrap();
        assert_eq!(got.len(), 3);
        assert_eq!(got[0], vec![Bytes::from("GET"), Bytes::from("k")]);
        assert_eq!(got[1], vec![Bytes::from("PING")]);
        assert_eq!(got[2], vec![Bytes::from("set"), Bytes::from("a"), Bytes::from("b cA")]);
    }

    #[test]
    fn malformed_frames_are_errors() {
        assert_eq!(parse_all(b"*x\r\n"), Err(ProtocolError::MultibulkLength));
        assert_eq!(parse_all(b"*1\r\n$-5\r\n"), Err(ProtocolError::BulkLength));
        assert_eq!(parse_all(b"*1\r\n+OK\r\n"), Err(ProtocolError::ExpectedDollar('+')));
        assert_eq!(parse_all(b"*1\r\n$1\r\nabc"), Err(ProtocolError::MissingCrlf));
        assert_eq!(parse_all(b"set \"abc\r\n"), Err(ProtocolError::UnbalancedQuotes));
        assert_eq!(parse_all(b"*99999999999999999999999999999999999"), Err(ProtocolError::CountTooBig));
        assert_eq!(parse_all(b"*1\r\n$536870913\r\n"), Err(ProtocolError::BulkLength));
    }

    #[test]
    fn doubles_print_as_redis_7_0_does() {
        let cases = [
            (1.5, "1.5"),
            (3.0, "3"),
            (-2.0, "-2"),
            (1.1, "1.1000000000000001"),
            (0.1, "0.10000000000000001"),
            (1e-5, "1.0000000000000001e-05"),
            (1e-4, "0.0001"),
            (123.456, "123.456"),
            (1e22, "1e+22"),
            (1.5e16, "15000000000000000"),
            (1e17, "1e+17"),
            (123456789012345678.0, "1.2345678901234568e+17"),
            (1e300, "1.0000000000000001e+300"),
            (f64::MIN_POSITIVE, "2.2250738585072014e-308"),
            (5e-324, "4.9406564584124654e-324"),
            (f64::MAX, "1.7976931348623157e+308"),
            (0.30000000000000004, "0.30000000000000004"),
            (-0.0, "-0"),
            (0.0, "0"),
            (f64::INFINITY, "inf"),
            (f64::NEG_INFINITY, "-inf"),
        ];
        for (d, want) in cases {
            assert_eq!(format_double(d), want, "{d:e}");
        }
    }

    #[test]
    fn replies_in_both_protocols() {
        let r = Reply::Map(vec![(Reply::bulk("a"), Reply::Int(-12)), (Reply::bulk("b"), Reply::Nil)]);
        let mut out = BytesMut::new();
        r.encode(2, &mut out);
        assert_eq!(&out[..], b"*4\r\n$1\r\na\r\n:-12\r\n$1\r\nb\r\n$-1\r\n");
        out.clear();
        r.encode(3, &mut out);
        assert_eq!(&out[..], b"%2\r\n$1\r\na\r\n:-12\r\n$1\r\nb\r\n_\r\n");
        out.clear();
        let p = Reply::Pairs(vec![(Reply::bulk("a"), Reply::Double(1.5))]);
        p.encode(2, &mut out);
        assert_eq!(&out[..], b"*2\r\n$1\r\na\r\n$3\r\n1.5\r\n");
        out.clear();
        p.encode(3, &mut out);
        assert_eq!(&out[..], b"*1\r\n*2\r\n$1\r\na\r\n,1.5\r\n");
        out.clear();
        Reply::Int(i64::MIN).encode(2, &mut out);
        assert_eq!(&out[..], b":-9223372036854775808\r\n");
    }
}
