//! Sorted-set arguments as Redis reads them (scores, score and lex ranges) and scores as Redis prints them;
//! the records and the ordered reads are in [`crate::types::zset`].

use crate::resp::Reply;
use crate::types::zset::{self, LexBound, LexRange, ScoreRange};
use bytes::Bytes;

crate::commands::coll::reply_from!(zset::Error: Store);

// ---------------------------------------------------------------------------------------------------------
// Parsing and formatting

pub(crate) fn not_float() -> Reply {
    Reply::err("value is not a valid float")
}

pub(crate) fn range_not_float() -> Reply {
    Reply::err("min or max is not a float")
}

pub(crate) fn range_not_lex() -> Reply {
    Reply::err("min or max not valid string range item")
}

/// `strtod` on the whole text as Rust reads it: decimal and `inf`/`infinity`/`nan` forms with a sign.
/// `Err(())` if the text is not a number; also tells whether the number overflowed or underflowed to zero
/// (`strtod`'s ERANGE cases).
pub(crate) fn strtod(t: &[u8]) -> Result<(f64, bool), ()> {
    let s = std::str::from_utf8(t).map_err(|_| ())?;
    let v: f64 = s.parse().map_err(|_| ())?;
    let body = s.trim_start_matches(['+', '-']);
    let named = body.bytes().next().is_some_and(|c| c.is_ascii_alphabetic());
    let overflow = v.is_infinite() && !named;
    // Underflow to zero: a mantissa with a non-zero digit that read back as 0.
    let mantissa = body.split(['e', 'E']).next().unwrap_or("");
    let underflow = v == 0.0 && mantissa.bytes().any(|c| (b'1'..=b'9').contains(&c));
    Ok((v, overflow || underflow))
}

/// A score argument as Redis reads one (ZADD, ZINCRBY, WEIGHTS): the whole text is a number, no leading
/// space, no overflow or underflow to zero, not NaN.
pub fn parse_score(a: &[u8]) -> Option<f64> {
    if a.is_empty() || a[0].is_ascii_whitespace() {
        return None;
    }
    match strtod(a) {
        Ok((v, false)) if !v.is_nan() => Some(v),
        _ => None,
    }
}

/// A bound of a score range (`zslParseRange`): `(x` exclusive, else inclusive; leading spaces are allowed,
/// an empty number is 0, overflow gives ±inf; NaN or trailing garbage is an error.
pub(crate) fn parse_range_bound(a: &[u8]) -> Option<(f64, bool)> {
    let (ex, t) = match a.first() {
        Some(b'(') => (true, &a[1..]),
        _ => (false, a),
    };
    if t.is_empty() {
        return Some((0.0, ex));
    }
    let t = trim_c_space(t);
    let (v, _) = strtod(t).ok()?;
    (!v.is_nan()).then_some((v, ex))
}

pub(crate) fn trim_c_space(t: &[u8]) -> &[u8] {
    let n = t.iter().take_while(|c| matches!(c, b' ' | b'\t' | b'\n' | b'\x0b' | b'\x0c' | b'\r')).count();
    &t[n..]
}

/// Parsing lives here, with the command layer; the range types and their walks are [`crate::types::zset`].
impl ScoreRange {
    pub fn parse(min: &[u8], max: &[u8]) -> Result<ScoreRange, Reply> {
        let (min, minex) = parse_range_bound(min).ok_or_else(range_not_float)?;
        let (max, maxex) = parse_range_bound(max).ok_or_else(range_not_float)?;
        Ok(ScoreRange { min, minex, max, maxex })
    }
}

/// A bound of a lex range: `-`, `+`, `[x` or `(x`.
fn parse_lex_bound(a: &Bytes) -> Option<LexBound> {
    match a.first() {
        Some(b'+') if a.len() == 1 => Some(LexBound::Max),
        Some(b'-') if a.len() == 1 => Some(LexBound::Min),
        Some(b'[') => Some(LexBound::Incl(a.slice(1..))),
        Some(b'(') => Some(LexBound::Excl(a.slice(1..))),
        _ => None,
    }
}

impl LexRange {
    pub fn parse(min: &Bytes, max: &Bytes) -> Result<LexRange, Reply> {
        let min = parse_lex_bound(min).ok_or_else(range_not_lex)?;
        let max = parse_lex_bound(max).ok_or_else(range_not_lex)?;
        Ok(LexRange { min, max })
    }
}

/// A score in ZSCAN's replies, as Redis 7.0 prints a small sorted set's stored score (`d2string`): an
/// integral score within ±2^62 as an integer, else as replies print doubles.
pub fn scan_score_text(d: f64) -> String {
    const LIM: f64 = (i64::MAX / 2) as f64;
    if d.is_finite() && (-LIM..=LIM).contains(&d) && d == d.trunc() {
        return format!("{}", d as i64);
    }
    crate::resp::format_double(d)
}

pub(crate) fn double(d: f64) -> Reply {
    Reply::Double(d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scores_parse_as_redis_reads_them() {
        assert_eq!(parse_score(b"1.5"), Some(1.5));
        assert_eq!(parse_score(b"-2e3"), Some(-2000.0));
        assert_eq!(parse_score(b"+inf"), Some(f64::INFINITY));
        assert_eq!(parse_score(b"-inf"), Some(f64::NEG_INFINITY));
        assert_eq!(parse_score(b"inf"), Some(f64::INFINITY));
        assert_eq!(parse_score(b"4e-320"), Some(4e-320));
        for bad in [&b"nan"[..], b"", b" 1", b"1 ", b"abc", b"1e400", b"-1e400", b"1e-400", b"1e", b"."] {
            assert_eq!(parse_score(bad), None, "{:?}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn score_ranges_parse_as_redis_reads_them() {
        let r = ScoreRange::parse(b"(1", b"5").unwrap();
        assert_eq!((r.min, r.minex, r.max, r.maxex), (1.0, true, 5.0, false));
        let r = ScoreRange::parse(b"(", b" 1").unwrap();
        assert_eq!((r.min, r.minex, r.max), (0.0, true, 1.0));
        let r = ScoreRange::parse(b"-inf", b"1e400").unwrap();
        assert_eq!((r.min, r.max), (f64::NEG_INFINITY, f64::INFINITY));
        for bad in [&b"nan"[..], b" ", b"a", b"1x", b"(nan"] {
            assert!(ScoreRange::parse(bad, b"1").is_err());
        }
        assert_eq!(ScoreRange::parse(b"1", b"1").unwrap().sortable_bounds().map(|(a, b)| b - a), Some(1));
        assert_eq!(ScoreRange::parse(b"(1", b"1").unwrap().sortable_bounds(), None);
        assert_eq!(ScoreRange::parse(b"2", b"1").unwrap().sortable_bounds(), None);
        assert!(ScoreRange::parse(b"-0", b"0").unwrap().sortable_bounds().is_some());
        assert!(ScoreRange::parse(b"(inf", b"inf").unwrap().sortable_bounds().is_none());
    }

    #[test]
    fn lex_ranges_parse_and_compare() {
        let b = |s: &str| Bytes::copy_from_slice(s.as_bytes());
        assert!(LexRange::parse(&b("a"), &b("b")).is_err());
        assert!(LexRange::parse(&b("-x"), &b("+")).is_err());
        let r = LexRange::parse(&b("[b"), &b("(d")).unwrap();
        assert!(!r.gte_min(b"a") && r.gte_min(b"b") && r.lte_max(b"c") && !r.lte_max(b"d"));
        assert!(!r.is_empty());
        assert!(LexRange::parse(&b("(b"), &b("[b")).unwrap().is_empty());
        assert!(LexRange::parse(&b("[c"), &b("[b")).unwrap().is_empty());
        assert!(LexRange::parse(&b("+"), &b("+")).unwrap().is_empty());
        assert!(!LexRange::parse(&b("-"), &b("+")).unwrap().is_empty());
        assert!(!LexRange::parse(&b("["), &b("[")).unwrap().is_empty());
    }

    #[test]
    fn zscan_scores_print_like_a_small_redis_set() {
        assert_eq!(scan_score_text(123456789012345678.0), "123456789012345680");
        assert_eq!(scan_score_text(1.5e16), "15000000000000000");
        assert_eq!(scan_score_text(1e22), "1e+22");
        assert_eq!(scan_score_text(1.1), "1.1000000000000001");
        assert_eq!(scan_score_text(-3.0), "-3");
        assert_eq!(scan_score_text(f64::INFINITY), "inf");
    }
}
