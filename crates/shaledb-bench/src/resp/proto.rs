//! The client side of RESP: requests encoded as arrays of bulk strings into a reused buffer, and an
//! incremental reply parser for every RESP2 and RESP3 type.
//!
//! ```text
//! reply     := simple | error | integer | bulk | array        (RESP2)
//!            | null | boolean | double | bignum | bloberr | verbatim | map | set | push | attribute reply
//! simple    := '+' line            error := '-' line           integer := ':' line
//! bulk      := '$' len CRLF bytes CRLF | '$-1' CRLF            array   := '*' count CRLF reply{count} | '*-1' CRLF
//! null      := '_' CRLF            boolean := '#' ('t'|'f') CRLF   double := ',' line   bignum := '(' line
//! bloberr   := '!' len CRLF bytes CRLF                         verbatim := '=' len CRLF fmt ':' bytes CRLF
//! map       := '%' count CRLF (reply reply){count}             set := '~' count CRLF reply{count}
//! push      := '>' count CRLF reply{count}                     attribute := '|' count CRLF (reply reply){count}
//! ```
//!
//! The parser borrows from the input: a bulk string is a slice of the read buffer, so a reply costs no
//! allocation unless it is an aggregate. It answers `Ok(None)` while a reply is incomplete (split at any
//! byte across reads) and checks every length before it uses it: bulk lengths up to [`MAX_BULK`], element
//! counts up to [`MAX_ELEMENTS`], nesting up to [`MAX_DEPTH`].

use std::fmt;

/// Largest bulk string accepted (Redis's default `proto-max-bulk-len`).
pub const MAX_BULK: usize = 512 << 20;
/// Most elements of one aggregate reply.
pub const MAX_ELEMENTS: usize = 1 << 24;
/// Deepest nesting of aggregates.
pub const MAX_DEPTH: usize = 32;

/// One parsed reply; strings borrow from the read buffer.
#[derive(Clone, Debug, PartialEq)]
pub enum Reply<'a> {
    /// `+OK`.
    Simple(&'a [u8]),
    /// `-ERR ...` or `!len` (a blob error).
    Error(&'a [u8]),
    /// `:n`.
    Integer(i64),
    /// `$len` (and `=len` verbatim strings, without their format prefix).
    Bulk(&'a [u8]),
    /// `$-1`, `*-1` or `_`.
    Null,
    /// `#t` / `#f`.
    Boolean(bool),
    /// `,1.5` (also `inf`, `-inf`, `nan`).
    Double(f64),
    /// `(12345...`, kept as its digits.
    BigNumber(&'a [u8]),
    /// `*n` (and `~n` sets).
    Array(Vec<Reply<'a>>),
    /// `%n`: key/value pairs.
    Map(Vec<(Reply<'a>, Reply<'a>)>),
    /// `>n`: an out-of-band message (client tracking, pub/sub), not the answer to a request.
    Push(Vec<Reply<'a>>),
}

/// A reply that breaks the protocol: the connection cannot be used any more.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProtocolError(pub String);

impl fmt::Display for ProtocolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "protocol error: {}", self.0)
    }
}

impl std::error::Error for ProtocolError {}

fn perr<T>(msg: impl Into<String>) -> Result<T, ProtocolError> {
    Err(ProtocolError(msg.into()))
}

/// Parses one reply from the start of `buf`: `Ok(Some((reply, bytes used)))`, or `Ok(None)` when `buf`
/// holds only part of it.
pub fn parse_reply(buf: &[u8]) -> Result<Option<(Reply<'_>, usize)>, ProtocolError> {
    let mut pos = 0;
    match parse_at(buf, &mut pos, 0)? {
        Some(r) => Ok(Some((r, pos))),
        None => Ok(None),
    }
}

/// The line starting at `*pos` (without CRLF); advances past the CRLF.
fn line<'a>(buf: &'a [u8], pos: &mut usize) -> Result<Option<&'a [u8]>, ProtocolError> {
    let rest = buf.get(*pos..).unwrap_or(&[]);
    let Some(nl) = rest.iter().position(|&b| b == b'\n') else {
        if rest.len() > 64 << 10 {
            return perr("a reply line longer than 64 KiB without a newline");
        }
        return Ok(None);
    };
    if nl == 0 || rest.get(nl - 1) != Some(&b'\r') {
        return perr("a line ends with LF but no CR");
    }
    *pos += nl + 1;
    Ok(rest.get(..nl - 1))
}

fn int(s: &[u8]) -> Result<i64, ProtocolError> {
    std::str::from_utf8(s)
        .ok()
        .and_then(|t| t.parse::<i64>().ok())
        .map_or_else(|| perr(format!("'{}' is not an integer", String::from_utf8_lossy(s))), Ok)
}

/// A length or count: -1 means null; anything else negative or above `max` is an error.
fn length(s: &[u8], max: usize, what: &str) -> Result<Option<usize>, ProtocolError> {
    let n = int(s)?;
    if n == -1 {
        return Ok(None);
    }
    match usize::try_from(n) {
        Ok(v) if v <= max => Ok(Some(v)),
        _ => perr(format!("{what} {n} is out of range (0..={max})")),
    }
}

/// `len` bytes followed by CRLF at `*pos`.
fn blob<'a>(buf: &'a [u8], pos: &mut usize, len: usize) -> Result<Option<&'a [u8]>, ProtocolError> {
    let end = pos.checked_add(len).ok_or_else(|| ProtocolError("bulk length overflows".into()))?;
    let Some(tail) = buf.get(end..end + 2) else { return Ok(None) };
    if tail != b"\r\n" {
        return perr("a bulk string is not followed by CRLF");
    }
    let s = buf.get(*pos..end);
    *pos = end + 2;
    Ok(s)
}

macro_rules! some {
    ($e:expr) => {
        match $e {
            Some(v) => v,
            None => return Ok(None),
        }
    };
}

fn parse_at<'a>(buf: &'a [u8], pos: &mut usize, depth: usize) -> Result<Option<Reply<'a>>, ProtocolError> {
    if depth > MAX_DEPTH {
        return perr(format!("replies nested deeper than {MAX_DEPTH}"));
    }
    let Some(&kind) = buf.get(*pos) else { return Ok(None) };
    *pos += 1;
    let head = some!(line(buf, pos)?);
    Ok(Some(match kind {
        b'+' => Reply::Simple(head),
        b'-' => Reply::Error(head),
        b':' => Reply::Integer(int(head)?),
        b'(' => {
            let digits = head.strip_prefix(b"-").unwrap_or(head);
            if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
                return perr("a big number with something other than digits");
            }
            Reply::BigNumber(head)
        }
        b',' => {
            let t = std::str::from_utf8(head).map_err(|_| ProtocolError("a double that is not text".into()))?;
            Reply::Double(t.parse::<f64>().map_err(|_| ProtocolError(format!("'{t}' is not a double")))?)
        }
        b'#' => match head {
            b"t" => Reply::Boolean(true),
            b"f" => Reply::Boolean(false),
            _ => return perr("a boolean that is neither t nor f"),
        },
        b'_' => {
            if !head.is_empty() {
                return perr("a null with a payload");
            }
            Reply::Null
        }
        b'$' | b'!' | b'=' => {
            let Some(len) = length(head, MAX_BULK, "bulk length")? else {
                return if kind == b'$' { Ok(Some(Reply::Null)) } else { perr("a negative blob length") };
            };
            let s = some!(blob(buf, pos, len)?);
            match kind {
                b'$' => Reply::Bulk(s),
                b'!' => Reply::Error(s),
                _ => {
                    // Verbatim: a three-letter format and ':' before the text.
                    if s.len() < 4 || s.get(3) != Some(&b':') {
                        return perr("a verbatim string without its format prefix");
                    }
                    Reply::Bulk(s.get(4..).unwrap_or(&[]))
                }
            }
        }
        b'*' | b'~' | b'>' => {
            let Some(n) = length(head, MAX_ELEMENTS, "element count")? else {
                return if kind == b'*' { Ok(Some(Reply::Null)) } else { perr("a negative element count") };
            };
            // NB: capacity bounded by what the buffer could hold, so a hostile count allocates nothing.
            let mut v = Vec::with_capacity(n.min(buf.len() / 3 + 1));
            for _ in 0..n {
                v.push(some!(parse_at(buf, pos, depth + 1)?));
            }
            if kind == b'>' {
                Reply::Push(v)
            } else {
                Reply::Array(v)
            }
        }
        b'%' | b'|' => {
            let Some(n) = length(head, MAX_ELEMENTS, "pair count")? else { return perr("a negative pair count") };
            let mut v = Vec::with_capacity(n.min(buf.len() / 6 + 1));
            for _ in 0..n {
                let k = some!(parse_at(buf, pos, depth + 1)?);
                let val = some!(parse_at(buf, pos, depth + 1)?);
                v.push((k, val));
            }
            if kind == b'|' {
                // An attribute decorates the reply that follows it; the tool has no use for it.
                return parse_at(buf, pos, depth + 1);
            }
            Reply::Map(v)
        }
        other => return perr(format!("unknown reply type byte 0x{other:02x}")),
    }))
}

/// Appends `n` in decimal.
fn push_usize(out: &mut Vec<u8>, n: usize) {
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    let mut v = n;
    loop {
        i -= 1;
        digits[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[i..]);
}

/// Appends the header of a request of `argc` arguments; each argument then goes through [`push_arg`].
pub fn push_header(out: &mut Vec<u8>, argc: usize) {
    out.push(b'*');
    push_usize(out, argc);
    out.extend_from_slice(b"\r\n");
}

/// Appends one argument as a bulk string.
pub fn push_arg(out: &mut Vec<u8>, arg: &[u8]) {
    out.push(b'$');
    push_usize(out, arg.len());
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(arg);
    out.extend_from_slice(b"\r\n");
}

/// Appends a whole request.
pub fn push_command(out: &mut Vec<u8>, args: &[&[u8]]) {
    push_header(out, args.len());
    for a in args {
        push_arg(out, a);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(input: &[u8]) -> Reply<'_> {
        let (r, n) = parse_reply(input).unwrap().unwrap();
        assert_eq!(n, input.len(), "the whole input is one reply");
        r
    }

    #[test]
    fn resp2_types() {
        assert_eq!(one(b"+OK\r\n"), Reply::Simple(b"OK"));
        assert_eq!(one(b"-ERR bad\r\n"), Reply::Error(b"ERR bad"));
        assert_eq!(one(b":-42\r\n"), Reply::Integer(-42));
        assert_eq!(one(b"$5\r\nhe\r\no\r\n"), Reply::Bulk(b"he\r\no"));
        assert_eq!(one(b"$0\r\n\r\n"), Reply::Bulk(b""));
        assert_eq!(one(b"$-1\r\n"), Reply::Null);
        assert_eq!(one(b"*-1\r\n"), Reply::Null);
        assert_eq!(one(b"*0\r\n"), Reply::Array(vec![]));
        assert_eq!(
            one(b"*3\r\n$1\r\na\r\n$-1\r\n*1\r\n:1\r\n"),
            Reply::Array(vec![Reply::Bulk(b"a"), Reply::Null, Reply::Array(vec![Reply::Integer(1)])])
        );
    }

    #[test]
    fn resp3_types() {
        assert_eq!(one(b"_\r\n"), Reply::Null);
        assert_eq!(one(b"#t\r\n"), Reply::Boolean(true));
        assert_eq!(one(b"#f\r\n"), Reply::Boolean(false));
        assert_eq!(one(b",1.5\r\n"), Reply::Double(1.5));
        assert_eq!(one(b",-inf\r\n"), Reply::Double(f64::NEG_INFINITY));
        assert!(matches!(one(b",nan\r\n"), Reply::Double(d) if d.is_nan()));
        assert_eq!(
            one(b"(-3492890328409238509324850943850943825024385\r\n"),
            Reply::BigNumber(b"-3492890328409238509324850943850943825024385")
        );
        assert_eq!(one(b"!21\r\nSYNTAX invalid syntax\r\n"), Reply::Error(b"SYNTAX invalid syntax"));
        assert_eq!(one(b"=15\r\ntxt:Some string\r\n"), Reply::Bulk(b"Some string"));
        assert_eq!(
            one(b"%2\r\n+a\r\n:1\r\n+b\r\n_\r\n"),
            Reply::Map(vec![(Reply::Simple(b"a"), Reply::Integer(1)), (Reply::Simple(b"b"), Reply::Null)])
        );
        assert_eq!(one(b"~2\r\n+x\r\n+y\r\n"), Reply::Array(vec![Reply::Simple(b"x"), Reply::Simple(b"y")]));
        assert_eq!(
            one(b">2\r\n+invalidate\r\n*1\r\n$1\r\nk\r\n"),
            Reply::Push(vec![Reply::Simple(b"invalidate"), Reply::Array(vec![Reply::Bulk(b"k")])])
        );
        // An attribute is skipped: the reply is what follows it.
        assert_eq!(one(b"|1\r\n+ttl\r\n:3600\r\n:7\r\n"), Reply::Integer(7));
    }

    #[test]
    fn every_split_point_waits_for_more() {
        let frames: [&[u8]; 6] = [
            b"+OK\r\n",
            b"$32\r\n0123456789abcdef0123456789abcdef\r\n",
            b"*4\r\n$2\r\nk1\r\n$2\r\nv1\r\n$2\r\nk2\r\n$-1\r\n",
            b"%1\r\n=8\r\ntxt:abcd\r\n~1\r\n,2.5\r\n",
            b"|1\r\n+a\r\n+b\r\n#t\r\n",
            b"-ERR unknown command 'SHALEDB.RANGE', with args beginning with: \r\n",
        ];
        for f in frames {
            let whole = one(f);
            for cut in 0..f.len() {
                assert_eq!(parse_reply(&f[..cut]).unwrap(), None, "cut at {cut} of {:?}", String::from_utf8_lossy(f));
            }
            // Two replies back to back: the first is parsed and its length returned.
            let mut two = f.to_vec();
            two.extend_from_slice(b":1\r\n");
            let (r, n) = parse_reply(&two).unwrap().unwrap();
            assert_eq!((r, n), (whole, f.len()));
        }
    }

    #[test]
    fn malformed_replies_are_errors() {
        let bad: [&[u8]; 14] = [
            b"?x\r\n",
            b":12a\r\n",
            b"+OK\n",
            b"$-2\r\n",
            b"$3\r\nabcd\r\n",
            b"$99999999999\r\n",
            b"*-5\r\n",
            b"#x\r\n",
            b",abc\r\n",
            b"(12x\r\n",
            b"_x\r\n",
            b"=3\r\nabc\r\n",
            b"~-1\r\n",
            b"!-1\r\n",
        ];
        for b in bad {
            assert!(parse_reply(b).is_err(), "{:?} should be rejected", String::from_utf8_lossy(b));
        }
        let deep = "*1\r\n".repeat(MAX_DEPTH + 2) + ":1\r\n";
        assert!(parse_reply(deep.as_bytes()).is_err());
        // A huge count with nothing behind it waits for data and allocates next to nothing.
        assert_eq!(parse_reply(b"*16777216\r\n").unwrap(), None);
        assert!(parse_reply(b"*16777217\r\n").is_err());
        // A line that never ends is refused once it is implausibly long.
        let long = [b'+'; 70_000];
        assert!(parse_reply(&long).is_err());
    }

    #[test]
    fn requests_are_arrays_of_bulk_strings() {
        let mut out = Vec::new();
        push_command(&mut out, &[b"SET", b"key", b""]);
        assert_eq!(out, b"*3\r\n$3\r\nSET\r\n$3\r\nkey\r\n$0\r\n\r\n");
        out.clear();
        push_header(&mut out, 12);
        push_arg(&mut out, &[b'x'; 1234]);
        assert!(out.starts_with(b"*12\r\n$1234\r\nxxx"));
        assert_eq!(out.len(), 5 + 7 + 1234 + 2);
    }
}
