//! Unit tests of the keyspace commands' helpers (`commands::keys`).

use super::*;
use bytes::Bytes;

#[test]
fn glob_matches_like_redis() {
    let m = |p: &str, s: &str| glob_match(p.as_bytes(), s.as_bytes());
    assert!(m("*", ""));
    assert!(m("*", "anything"));
    assert!(m("h?llo", "hello") && m("h?llo", "hallo") && !m("h?llo", "hllo"));
    assert!(m("h*llo", "hllo") && m("h*llo", "heeeello") && !m("h*llo", "hellox"));
    assert!(m("h[ae]llo", "hello") && m("h[ae]llo", "hallo") && !m("h[ae]llo", "hillo"));
    assert!(m("h[^e]llo", "hallo") && !m("h[^e]llo", "hello"));
    assert!(m("h[a-b]llo", "hbllo") && !m("h[a-b]llo", "hcllo"));
    assert!(m("h[b-a]llo", "hallo"), "a reversed range is swapped");
    assert!(m("h\\*llo", "h*llo") && !m("h\\*llo", "hello"));
    assert!(m("[\\]]", "]") && m("[\\-]", "-"));
    assert!(m("a*b*c", "axxbyyc") && !m("a*b*c", "axxbyy"));
    assert!(m("**a", "a") && m("*a*", "bab"));
    assert!(m("user:*:name", "user:42:name") && !m("user:*:name", "user:42:age"));
    assert!(!m("abc", "ab") && !m("ab", "abc"));
    assert!(m("[abc", "a"), "an unterminated set ends with the pattern");
    assert!(m("a[-]", "a-"));
    // Long inputs stay fast (no exponential backtracking).
    let s = "a".repeat(5000);
    assert!(!glob_match(b"*a*a*a*a*a*a*a*a*a*b", s.as_bytes()));
}

#[test]
fn literal_prefixes() {
    assert_eq!(literal_prefix(b"user:*"), b"user:");
    assert_eq!(literal_prefix(b"a\\*b?"), b"a*b");
    assert_eq!(literal_prefix(b"[ab]x"), b"");
    assert_eq!(keys::prefix_end(b"ab"), Some(b"ac".to_vec()));
    assert_eq!(keys::prefix_end(b"a\xff"), Some(b"b".to_vec()));
    assert_eq!(keys::prefix_end(b"\xff"), None);
}

#[test]
fn cursor_table_is_bounded_and_lru() {
    let mut c = Cursors::default();
    let first = c.insert(0, Bytes::from_static(b"k0"));
    assert!(first != 0 && first < (1 << 63));
    let mut ids = vec![first];
    for i in 1..MAX_CURSORS + 10 {
        if i == MAX_CURSORS / 2 {
            // Touch the first: it survives the evictions that follow.
            assert!(c.get(first).is_some());
        }
        ids.push(c.insert(1, Bytes::from(format!("k{i}"))));
    }
    assert_eq!(c.len(), MAX_CURSORS);
    assert_eq!(c.get(first), Some((0, Bytes::from_static(b"k0"))));
    assert!(c.get(ids[1]).is_none());
    assert!(c.get(*ids.last().unwrap()).is_some());
}

#[test]
fn cursors_resume_only_their_own_database() {
    let mut c = Cursors::default();
    assert_eq!(c.resume(0, 3), Ok(None));
    let id = c.insert(3, Bytes::from_static(b"next"));
    assert_eq!(c.resume(id, 3), Ok(Some(Bytes::from_static(b"next"))));
    let invalid = Err(Reply::err("invalid cursor"));
    assert_eq!(c.resume(id, 4), invalid);
    assert_eq!(c.resume(id.wrapping_add(1), 3), invalid);
}

#[test]
fn bounds_parse() {
    assert_eq!(parse_bound(&Bytes::from_static(b"-")), Some(Bound::Min));
    assert_eq!(parse_bound(&Bytes::from_static(b"+")), Some(Bound::Max));
    assert_eq!(parse_bound(&Bytes::from_static(b"[a")), Some(Bound::Incl(Bytes::from_static(b"a"))));
    assert_eq!(parse_bound(&Bytes::from_static(b"(")), Some(Bound::Excl(Bytes::new())));
    assert_eq!(parse_bound(&Bytes::from_static(b"a")), None);
    assert_eq!(parse_bound(&Bytes::from_static(b"")), None);
    assert_eq!(parse_bound(&Bytes::from_static(b"-x")), None);
}
