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
//!
//! The reply encoder is in `reply.rs`, the fuzz driver in `fuzz.rs`.

use bytes::{Buf, Bytes, BytesMut};

mod fuzz;
mod reply;

pub use fuzz::fuzz_requests;
pub use reply::{format_double, Bulks, BulksIter, Reply};

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

#[cfg(test)]
mod tests;
