//! Unit tests of the server commands' helpers (`commands::server_cmds`).

use super::command::keys_of;
use super::*;

#[test]
fn glob_patterns() {
    for (p, s, want) in [
        ("*", "anything", true),
        ("max*", "maxclients", true),
        ("max*", "MAXCLIENTS", true),
        ("*-len", "proto-max-bulk-len", true),
        ("a?c", "abc", true),
        ("a?c", "ac", false),
        ("[ab]x", "bx", true),
        ("[^ab]x", "bx", false),
        ("[a-c]x", "cx", true),
        ("[c-a]x", "bx", true),
        ("a\\*", "a*", true),
        ("a\\*", "ab", false),
        ("*a*b*c", "xxaxxbxxc", true),
        ("*a*b*c", "xxaxxbxx", false),
        ("[abc", "b", true),
        ("", "", true),
        ("", "a", false),
    ] {
        assert_eq!(glob_match(p.as_bytes(), s.as_bytes(), true), want, "{p} vs {s}");
    }
    assert!(!glob_match(b"MAX*", b"maxclients", false));
    // A pathological pattern ends quickly (no exponential backtracking).
    let s = "a".repeat(5000);
    assert!(!glob_match("*a*a*a*a*a*a*a*a*b".as_bytes(), s.as_bytes(), false));
}

#[test]
fn getkeys_follows_first_last_step() {
    let spec = cmd! { "mset", -3, WRITE, [1, -1, 2], Conn(time), "" };
    let args: Vec<bytes::Bytes> = ["mset", "a", "1", "b", "2"].iter().map(|s| bytes::Bytes::from(*s)).collect();
    assert_eq!(keys_of(&spec, &args), vec![bytes::Bytes::from("a"), bytes::Bytes::from("b")]);
}

#[test]
fn getkeys_reads_movable_keys_and_flags() {
    let words = |s: &str| -> Vec<bytes::Bytes> { s.split(' ').map(|w| bytes::Bytes::from(w.to_string())).collect() };
    let keys = |line: &str| {
        let a = words(line);
        let spec = crate::commands::lookup(&a[0]).unwrap();
        keys_of(spec, &a).iter().map(|k| String::from_utf8_lossy(k).into_owned()).collect::<Vec<_>>().join(" ")
    };
    assert_eq!(keys("zunionstore t 2 a b WEIGHTS 1 2"), "t a b");
    assert_eq!(keys("memory usage key"), "key");
    assert_eq!(keys("xread COUNT 2 STREAMS s1 s2 0 0"), "s1 s2");
    assert_eq!(keys("lmove k1 k2 left right"), "k1 k2");
    assert_eq!(keys("zunionstore t 5 a b"), "");
    assert_eq!(keys("sort abc store invalid store stillbad store def"), "abc def");
    assert_eq!(keys("sort abc by w_* get # limit 0 1 store d"), "abc d");
    assert_eq!(keys("sort_ro abc store x"), "abc");
    let flags = |line: &str, k: usize| {
        let a = words(line);
        let spec = crate::commands::lookup(&a[0]).unwrap();
        super::keyspecs::key_flags(spec, &a, k).join(" ")
    };
    assert_eq!(flags("set k v", 0), "OW update");
    assert_eq!(flags("set k v GET", 0), "RW access update");
    // The value "get" is no GET option (Redis looks from the fourth word on).
    assert_eq!(flags("set k get", 0), "OW update");
    assert_eq!(flags("bitfield k get u4 0 overflow sat get i8 1", 0), "RO access");
    assert_eq!(flags("bitfield k get u4 0 set u4 0 1", 0), "RW access update");
    assert_eq!(flags("bitfield k get u4", 0), "RW access update");
    assert_eq!(flags("lmove a b left right", 1), "RW insert");
    assert!(super::keyspecs::movable("zunionstore") && !super::keyspecs::movable("set"));
}
