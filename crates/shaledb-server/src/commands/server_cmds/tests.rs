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
