//! Hashes, sets, the generic commands on collections (TYPE, OBJECT, RENAME, MOVE, COPY, expiry) and the
//! collector, against a running server.

use crate::helpers::{
    cmd, connect, e, i, q, s, start_everysec as start_server, Client, Resp, NOT_INT, SYNTAX, WRONGTYPE,
};
use std::collections::{BTreeMap, BTreeSet, HashSet};

fn set_of(con: &mut redis::Connection, args: &[&str]) -> BTreeSet<String> {
    let v: Vec<String> = q(con, args);
    let n = v.len();
    let set: BTreeSet<String> = v.into_iter().collect();
    assert_eq!(set.len(), n, "{args:?} answered duplicates");
    set
}

fn strs(v: &[&str]) -> BTreeSet<String> {
    v.iter().map(|s| s.to_string()).collect()
}

#[test]
fn hash_commands() {
    let (srv, _dir) = start_server();
    let c = &mut connect(&srv);
    assert_eq!(i(c, &["HSET", "h", "a", "1", "b", "2", "a", "3"]), 2);
    assert_eq!(s(c, &["HGET", "h", "a"]).as_deref(), Some("3"));
    assert_eq!(s(c, &["HGET", "h", "zz"]), None);
    assert_eq!(s(c, &["HGET", "nokey", "a"]), None);
    assert_eq!(e(c, &["HSET", "h", "a"]), "ERR wrong number of arguments for 'hset' command");
    assert_eq!(e(c, &["HSET", "h", "a", "1", "b"]), "ERR wrong number of arguments for 'hset' command");
    assert_eq!(e(c, &["HMSET", "h", "a", "1", "b"]), "ERR wrong number of arguments for 'hmset' command");
    assert_eq!(s(c, &["HMSET", "h", "c", "x", "d", ""]).as_deref(), Some("OK"));
    assert_eq!(i(c, &["HLEN", "h"]), 4);
    assert_eq!(i(c, &["HLEN", "nokey"]), 0);
    assert_eq!(i(c, &["HSETNX", "h", "a", "new"]), 0);
    assert_eq!(i(c, &["HSETNX", "h", "e", "5"]), 1);
    assert_eq!(s(c, &["HGET", "h", "a"]).as_deref(), Some("3"));
    let v: Vec<Option<String>> = q(c, &["HMGET", "h", "a", "zz", "d"]);
    assert_eq!(v, vec![Some("3".into()), None, Some("".into())]);
    let v: Vec<Option<String>> = q(c, &["HMGET", "nokey", "a", "b"]);
    assert_eq!(v, vec![None, None]);
    let all: BTreeMap<String, String> = q(c, &["HGETALL", "h"]);
    let want: BTreeMap<String, String> = [("a", "3"), ("b", "2"), ("c", "x"), ("d", ""), ("e", "5")]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    assert_eq!(all, want);
    let keys: Vec<String> = q(c, &["HKEYS", "h"]);
    assert_eq!(keys, vec!["a", "b", "c", "d", "e"]);
    let vals: Vec<String> = q(c, &["HVALS", "h"]);
    assert_eq!(vals, vec!["3", "2", "x", "", "5"]);
    let empty: Vec<String> = q(c, &["HGETALL", "nokey"]);
    assert!(empty.is_empty());
    assert_eq!(i(c, &["HEXISTS", "h", "a"]), 1);
    assert_eq!(i(c, &["HEXISTS", "h", "zz"]), 0);
    assert_eq!(i(c, &["HEXISTS", "nokey", "a"]), 0);
    assert_eq!(i(c, &["HSTRLEN", "h", "c"]), 1);
    assert_eq!(i(c, &["HSTRLEN", "h", "zz"]), 0);
    assert_eq!(i(c, &["HDEL", "h", "a", "a", "zz", "b"]), 2);
    assert_eq!(i(c, &["HDEL", "nokey", "a"]), 0);
    assert_eq!(i(c, &["HLEN", "h"]), 3);
    // Deleting the last field deletes the key.
    assert_eq!(i(c, &["HDEL", "h", "c", "d", "e"]), 3);
    assert_eq!(i(c, &["EXISTS", "h"]), 0);
    assert_eq!(s(c, &["TYPE", "h"]).as_deref(), Some("none"));
    // HINCRBY / HINCRBYFLOAT
    assert_eq!(i(c, &["HINCRBY", "n", "x", "5"]), 5);
    assert_eq!(i(c, &["HINCRBY", "n", "x", "-7"]), -2);
    assert_eq!(e(c, &["HINCRBY", "n", "x", "a"]), NOT_INT);
    q::<()>(c, &["HSET", "n", "s", "abc", "big", "9223372036854775807", "f", "1.5"]);
    assert_eq!(e(c, &["HINCRBY", "n", "s", "1"]), "ERR hash value is not an integer");
    assert_eq!(e(c, &["HINCRBY", "n", "f", "1"]), "ERR hash value is not an integer");
    assert_eq!(e(c, &["HINCRBY", "n", "big", "1"]), "ERR increment or decrement would overflow");
    assert_eq!(s(c, &["HINCRBYFLOAT", "n", "f", "0.1"]).as_deref(), Some("1.6"));
    assert_eq!(s(c, &["HINCRBYFLOAT", "n", "new", "2.5e3"]).as_deref(), Some("2500"));
    assert_eq!(s(c, &["HINCRBYFLOAT", "n", "x", "1"]).as_deref(), Some("-1"));
    assert_eq!(e(c, &["HINCRBYFLOAT", "n", "s", "1"]), "ERR hash value is not a float");
    assert_eq!(e(c, &["HINCRBYFLOAT", "n", "f", "abc"]), "ERR value is not a valid float");
    assert_eq!(e(c, &["HINCRBYFLOAT", "n", "f", "inf"]), "ERR value is NaN or Infinity");
    assert_eq!(i(c, &["HLEN", "n"]), 5);
    // WRONGTYPE both ways.
    q::<()>(c, &["SET", "str", "v"]);
    for args in [
        vec!["HSET", "str", "a", "1"],
        vec!["HGET", "str", "a"],
        vec!["HMGET", "str", "a"],
        vec!["HGETALL", "str"],
        vec!["HDEL", "str", "a"],
        vec!["HLEN", "str"],
        vec!["HINCRBY", "str", "a", "1"],
        vec!["HRANDFIELD", "str"],
        vec!["HSCAN", "str", "0"],
        vec!["SADD", "n", "a"],
    ] {
        assert_eq!(e(c, &args), WRONGTYPE, "{args:?}");
    }
    assert_eq!(e(c, &["GET", "n"]), WRONGTYPE);
    assert_eq!(s(c, &["TYPE", "n"]).as_deref(), Some("hash"));
}

#[test]
fn hrandfield_and_hscan() {
    let (srv, _dir) = start_server();
    let c = &mut connect(&srv);
    assert_eq!(s(c, &["HRANDFIELD", "nokey"]), None);
    let v: Vec<String> = q(c, &["HRANDFIELD", "nokey", "3"]);
    assert!(v.is_empty());
    q::<()>(c, &["HSET", "h", "a", "1", "b", "2", "c", "3"]);
    let f = s(c, &["HRANDFIELD", "h"]).unwrap();
    assert!(["a", "b", "c"].contains(&f.as_str()));
    assert_eq!(set_of(c, &["HRANDFIELD", "h", "10"]), strs(&["a", "b", "c"]));
    assert_eq!(set_of(c, &["HRANDFIELD", "h", "2"]).len(), 2);
    let v: Vec<String> = q(c, &["HRANDFIELD", "h", "0"]);
    assert!(v.is_empty());
    let v: Vec<String> = q(c, &["HRANDFIELD", "h", "-7"]);
    assert_eq!(v.len(), 7);
    assert!(v.iter().all(|f| ["a", "b", "c"].contains(&f.as_str())));
    let v: Vec<String> = q(c, &["HRANDFIELD", "h", "-4", "WITHVALUES"]);
    assert_eq!(v.len(), 8);
    for p in v.chunks(2) {
        assert_eq!(s(c, &["HGET", "h", &p[0]]).as_deref(), Some(p[1].as_str()));
    }
    assert_eq!(e(c, &["HRANDFIELD", "h", "1", "x"]), SYNTAX);
    assert_eq!(e(c, &["HRANDFIELD", "h", "1", "WITHVALUES", "x"]), SYNTAX);
    assert_eq!(e(c, &["HRANDFIELD", "h", "x"]), NOT_INT);
    // Redis's order: the count's range, the options, WITHVALUES' narrower range, then the key.
    assert_eq!(e(c, &["HRANDFIELD", "nokey", "-9223372036854770000", "WITHVALUES"]), "ERR value is out of range");
    assert_eq!(e(c, &["HRANDFIELD", "h", "-9223372036854770000", "WITHVALUES"]), "ERR value is out of range");
    assert_eq!(
        e(c, &["HRANDFIELD", "nokey", "-9223372036854775808"]),
        "ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807"
    );
    assert_eq!(e(c, &["HRANDFIELD", "nokey", "1", "x"]), SYNTAX);
    let v: Vec<String> = q(c, &["HRANDFIELD", "nokey", "-9223372036854775807"]);
    assert!(v.is_empty());
    // HSCAN and SSCAN: the cursor, then the key, then the options.
    let v: (String, Vec<String>) = q(c, &["HSCAN", "nokey", "0", "COUNT", "0"]);
    assert_eq!(v, ("0".to_string(), vec![]));
    let v: (String, Vec<String>) = q(c, &["SSCAN", "nokey", "0", "BOGUS"]);
    assert_eq!(v, ("0".to_string(), vec![]));
    assert_eq!(e(c, &["HSCAN", "nokey", "x", "COUNT", "0"]), "ERR invalid cursor");
    assert_eq!(e(c, &["HSCAN", "h", "0", "COUNT", "0"]), SYNTAX);
    // A large hash: distinct picks (random seeks), repetitions, and HSCAN with cursors.
    let mut args = vec!["HSET".to_string(), "big".to_string()];
    for n in 0..3000 {
        args.push(format!("f{n:05}"));
        args.push(n.to_string());
    }
    let a: Vec<&str> = args.iter().map(String::as_str).collect();
    assert_eq!(i(c, &a), 3000);
    let picked = set_of(c, &["HRANDFIELD", "big", "50"]);
    assert_eq!(picked.len(), 50);
    let picked = set_of(c, &["HRANDFIELD", "big", "2000"]);
    assert_eq!(picked.len(), 2000);
    let v: Vec<String> = q(c, &["HRANDFIELD", "big", "-100", "WITHVALUES"]);
    assert_eq!(v.len(), 200);
    for p in v.chunks(2) {
        assert_eq!(format!("f{:05}", p[1].parse::<u32>().unwrap()), p[0]);
    }
    // Picks spread over the whole range (a seek never sticks to one region).
    let mut firsts = HashSet::new();
    for _ in 0..20 {
        let f = s(c, &["HRANDFIELD", "big"]).unwrap();
        firsts.insert(f[..3].to_string());
    }
    assert!(firsts.len() >= 2, "{firsts:?}");
    let mut seen = HashSet::new();
    let mut cursor = "0".to_string();
    let mut calls = 0;
    loop {
        let (next, items): (String, Vec<String>) = q(c, &["HSCAN", "big", &cursor, "COUNT", "100", "MATCH", "f*"]);
        calls += 1;
        assert!(items.len() <= 200);
        for p in items.chunks(2) {
            assert!(seen.insert(p[0].clone()), "{} twice", p[0]);
        }
        if next == "0" {
            break;
        }
        cursor = next;
        assert!(calls < 100);
    }
    assert_eq!(seen.len(), 3000);
    assert!(calls >= 30);
    // MATCH filters; a small hash comes back whole with cursor 0.
    let (next, items): (String, Vec<String>) = q(c, &["HSCAN", "h", "0", "MATCH", "[ab]"]);
    assert_eq!((next.as_str(), items), ("0", vec!["a".into(), "1".into(), "b".into(), "2".into()]));
    let (next, items): (String, Vec<String>) = q(c, &["HSCAN", "nokey", "0"]);
    assert_eq!((next.as_str(), items.len()), ("0", 0));
    assert_eq!(e(c, &["HSCAN", "h", "abc"]), "ERR invalid cursor");
    assert_eq!(e(c, &["HSCAN", "h", "12345"]), "ERR invalid cursor");
    assert_eq!(e(c, &["HSCAN", "h", "0", "COUNT", "0"]), SYNTAX);
    assert_eq!(e(c, &["HSCAN", "h", "0", "MATCH"]), SYNTAX);
}

#[test]
fn hincrby_loses_no_update_under_concurrency() {
    let (srv, _dir) = start_server();
    let threads: Vec<_> = (0..8)
        .map(|_| {
            let mut c = connect(&srv);
            std::thread::spawn(move || {
                for _ in 0..200 {
                    let _: i64 = q(&mut c, &["HINCRBY", "h", "n", "1"]);
                    let _: i64 = q(&mut c, &["SADD", "s", &rand_member()]);
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let c = &mut connect(&srv);
    assert_eq!(s(c, &["HGET", "h", "n"]).as_deref(), Some("1600"));
    let members: Vec<String> = q(c, &["SMEMBERS", "s"]);
    assert_eq!(i(c, &["SCARD", "s"]), members.len() as i64);
}

fn rand_member() -> String {
    format!("m{}", rand::random::<u16>() % 500)
}

#[test]
fn set_commands() {
    let (srv, _dir) = start_server();
    let c = &mut connect(&srv);
    assert_eq!(i(c, &["SADD", "s", "a", "b", "c", "a"]), 3);
    assert_eq!(i(c, &["SADD", "s", "a", "d"]), 1);
    assert_eq!(i(c, &["SCARD", "s"]), 4);
    assert_eq!(i(c, &["SCARD", "nokey"]), 0);
    assert_eq!(set_of(c, &["SMEMBERS", "s"]), strs(&["a", "b", "c", "d"]));
    assert!(set_of(c, &["SMEMBERS", "nokey"]).is_empty());
    assert_eq!(i(c, &["SISMEMBER", "s", "a"]), 1);
    assert_eq!(i(c, &["SISMEMBER", "s", "z"]), 0);
    assert_eq!(i(c, &["SISMEMBER", "nokey", "z"]), 0);
    let v: Vec<i64> = q(c, &["SMISMEMBER", "s", "a", "z", "d"]);
    assert_eq!(v, vec![1, 0, 1]);
    let v: Vec<i64> = q(c, &["SMISMEMBER", "nokey", "a"]);
    assert_eq!(v, vec![0]);
    assert_eq!(i(c, &["SREM", "s", "a", "z", "a"]), 1);
    assert_eq!(i(c, &["SREM", "nokey", "a"]), 0);
    // SPOP
    assert_eq!(s(c, &["SPOP", "nokey"]), None);
    let v: Vec<String> = q(c, &["SPOP", "nokey", "3"]);
    assert!(v.is_empty());
    assert_eq!(e(c, &["SPOP", "s", "-1"]), "ERR value is out of range, must be positive");
    assert_eq!(e(c, &["SPOP", "s", "1", "2"]), SYNTAX);
    let v: Vec<String> = q(c, &["SPOP", "s", "0"]);
    assert!(v.is_empty());
    let p = s(c, &["SPOP", "s"]).unwrap();
    assert!(["b", "c", "d"].contains(&p.as_str()));
    assert_eq!(i(c, &["SISMEMBER", "s", &p]), 0);
    assert_eq!(i(c, &["SCARD", "s"]), 2);
    let v = set_of(c, &["SPOP", "s", "5"]);
    assert_eq!(v.len(), 2);
    assert_eq!(i(c, &["EXISTS", "s"]), 0, "popping every member deletes the set");
    // SRANDMEMBER
    q::<()>(c, &["SADD", "r", "x", "y", "z"]);
    assert_eq!(s(c, &["SRANDMEMBER", "nokey"]), None);
    let v: Vec<String> = q(c, &["SRANDMEMBER", "nokey", "-3"]);
    assert!(v.is_empty());
    assert_eq!(set_of(c, &["SRANDMEMBER", "r", "5"]), strs(&["x", "y", "z"]));
    assert_eq!(set_of(c, &["SRANDMEMBER", "r", "2"]).len(), 2);
    let v: Vec<String> = q(c, &["SRANDMEMBER", "r", "-10"]);
    assert_eq!(v.len(), 10);
    assert!(v.iter().all(|m| ["x", "y", "z"].contains(&m.as_str())));
    assert_eq!(e(c, &["SRANDMEMBER", "r", "x"]), NOT_INT);
    // The count's range is checked before the key; a missing key answers an empty array whatever it is.
    let range = "ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807";
    assert_eq!(e(c, &["SRANDMEMBER", "nokey", "-9223372036854775808"]), range);
    assert_eq!(e(c, &["SRANDMEMBER", "r", "-9223372036854775808"]), range);
    let v: Vec<String> = q(c, &["SRANDMEMBER", "nokey", "-9223372036854775807"]);
    assert!(v.is_empty());
    assert_eq!(e(c, &["SPOP", "r", "x"]), "ERR value is out of range, must be positive");
    assert_eq!(i(c, &["SCARD", "r"]), 3);
    // SMOVE
    assert_eq!(i(c, &["SMOVE", "r", "r2", "x"]), 1);
    assert_eq!(i(c, &["SMOVE", "r", "r2", "x"]), 0);
    assert_eq!(i(c, &["SMOVE", "nokey", "r2", "x"]), 0);
    assert_eq!(i(c, &["SMOVE", "r", "r", "y"]), 1);
    assert_eq!(i(c, &["SMOVE", "r", "r", "x"]), 0);
    assert_eq!(set_of(c, &["SMEMBERS", "r2"]), strs(&["x"]));
    q::<()>(c, &["SET", "str", "v"]);
    assert_eq!(e(c, &["SMOVE", "r", "str", "y"]), WRONGTYPE);
    assert_eq!(e(c, &["SMOVE", "str", "r", "y"]), WRONGTYPE);
    assert_eq!(i(c, &["SMOVE", "nokey", "str", "y"]), 0);
    q::<()>(c, &["SMOVE", "r", "r2", "y"]);
    q::<()>(c, &["SMOVE", "r", "r2", "z"]);
    assert_eq!(i(c, &["EXISTS", "r"]), 0);
    assert_eq!(i(c, &["SCARD", "r2"]), 3);
    for args in [
        vec!["SADD", "str", "a"],
        vec!["SMEMBERS", "str"],
        vec!["SCARD", "str"],
        vec!["SPOP", "str"],
        vec!["SRANDMEMBER", "str"],
        vec!["SINTER", "r2", "str"],
        vec!["SINTER", "nokey", "str"],
        vec!["SUNION", "r2", "str"],
        vec!["SDIFF", "r2", "str"],
        vec!["SINTERCARD", "2", "r2", "str"],
        vec!["SSCAN", "str", "0"],
        vec!["SSCAN", "str", "0", "COUNT", "0"],
    ] {
        assert_eq!(e(c, &args), WRONGTYPE, "{args:?}");
    }
}

/// SPOP past the small size (one seek per member, skipping what earlier pops emptied), interleaved with
/// SADD of popped members (back inside an emptied range), SREM and MULTI, against a model: every popped
/// member was in the set, the contents and SCARD stay exact, and popping to the end returns every
/// remaining member once.
#[test]
fn spop_interleaved_with_writes_keeps_the_set_exact() {
    use rand::{Rng, SeedableRng};
    let (srv, _dir) = start_server();
    let c = &mut connect(&srv);
    let mut rng = rand::rngs::StdRng::seed_from_u64(0x5e7);
    let mut model: BTreeSet<String> = BTreeSet::new();
    let name = |i: u32| format!("element:{i:06}");
    let mut add = cmd(&["SADD", "big"]);
    for i in 0..3000 {
        add.arg(name(i));
        model.insert(name(i));
    }
    let _: i64 = add.query(c).unwrap();
    for step in 0..2500 {
        match rng.gen_range(0..10) {
            0..=5 => {
                let n = rng.gen_range(1..4);
                let got: Vec<String> = q(c, &["SPOP", "big", &n.to_string()]);
                assert_eq!(got.len(), n.min(model.len()), "step {step}");
                for m in got {
                    assert!(model.remove(&m), "step {step}: popped {m}, not a member (or twice)");
                }
            }
            6 | 7 => {
                let m = name(rng.gen_range(0..3000));
                assert_eq!(i(c, &["SADD", "big", &m]), model.insert(m) as i64, "step {step}");
            }
            8 => {
                let m = name(rng.gen_range(0..3000));
                assert_eq!(i(c, &["SREM", "big", &m]), model.remove(&m) as i64, "step {step}");
            }
            _ => {
                let m = name(rng.gen_range(0..3000));
                let (popped, added): (Vec<String>, i64) = redis::pipe()
                    .atomic()
                    .cmd("SPOP")
                    .arg("big")
                    .arg(1)
                    .cmd("SADD")
                    .arg("big")
                    .arg(&m)
                    .query(c)
                    .unwrap();
                for p in popped {
                    assert!(model.remove(&p), "step {step}: popped {p}");
                }
                assert_eq!(added, model.insert(m) as i64, "step {step}");
            }
        }
        if step % 250 == 0 {
            assert_eq!(i(c, &["SCARD", "big"]), model.len() as i64, "step {step}");
            assert_eq!(set_of(c, &["SMEMBERS", "big"]), model, "step {step}");
        }
    }
    while let Some(m) = s(c, &["SPOP", "big"]) {
        assert!(model.remove(&m), "popped {m}, not a member (or twice)");
    }
    assert!(model.is_empty(), "{} members never popped", model.len());
    assert_eq!(i(c, &["EXISTS", "big"]), 0);
}

#[test]
fn set_algebra_and_store_forms() {
    let (srv, _dir) = start_server();
    let c = &mut connect(&srv);
    q::<()>(c, &["SADD", "a", "1", "2", "3", "4"]);
    q::<()>(c, &["SADD", "b", "3", "4", "5"]);
    q::<()>(c, &["SADD", "c", "4", "6"]);
    assert_eq!(set_of(c, &["SINTER", "a", "b"]), strs(&["3", "4"]));
    assert_eq!(set_of(c, &["SINTER", "a", "b", "c"]), strs(&["4"]));
    assert_eq!(set_of(c, &["SINTER", "a"]), strs(&["1", "2", "3", "4"]));
    assert_eq!(set_of(c, &["SINTER", "a", "a"]), strs(&["1", "2", "3", "4"]));
    assert!(set_of(c, &["SINTER", "a", "nokey"]).is_empty());
    assert_eq!(set_of(c, &["SUNION", "a", "b", "nokey"]), strs(&["1", "2", "3", "4", "5"]));
    assert_eq!(set_of(c, &["SDIFF", "a", "b"]), strs(&["1", "2"]));
    assert_eq!(set_of(c, &["SDIFF", "a", "b", "c"]), strs(&["1", "2"]));
    assert_eq!(set_of(c, &["SDIFF", "a", "nokey"]), strs(&["1", "2", "3", "4"]));
    assert!(set_of(c, &["SDIFF", "nokey", "a"]).is_empty());
    assert!(set_of(c, &["SDIFF", "a", "a"]).is_empty());
    assert_eq!(i(c, &["SINTERCARD", "2", "a", "b"]), 2);
    assert_eq!(i(c, &["SINTERCARD", "2", "a", "b", "LIMIT", "1"]), 1);
    assert_eq!(i(c, &["SINTERCARD", "2", "a", "b", "LIMIT", "0"]), 2);
    assert_eq!(i(c, &["SINTERCARD", "1", "nokey"]), 0);
    assert_eq!(e(c, &["SINTERCARD", "0", "a"]), "ERR numkeys should be greater than 0");
    assert_eq!(e(c, &["SINTERCARD", "3", "a", "b"]), "ERR Number of keys can't be greater than number of args");
    assert_eq!(e(c, &["SINTERCARD", "1", "a", "LIMIT", "-1"]), "ERR LIMIT can't be negative");
    assert_eq!(e(c, &["SINTERCARD", "1", "a", "LIMIT", "x"]), "ERR LIMIT can't be negative");
    assert_eq!(e(c, &["SINTERCARD", "1", "a", "b"]), SYNTAX);
    // STORE forms overwrite any type, and an empty result deletes the destination.
    q::<()>(c, &["SET", "dst", "string"]);
    assert_eq!(i(c, &["SINTERSTORE", "dst", "a", "b"]), 2);
    assert_eq!(set_of(c, &["SMEMBERS", "dst"]), strs(&["3", "4"]));
    assert_eq!(i(c, &["SUNIONSTORE", "dst", "dst", "c"]), 3);
    assert_eq!(set_of(c, &["SMEMBERS", "dst"]), strs(&["3", "4", "6"]));
    assert_eq!(i(c, &["SDIFFSTORE", "dst", "a", "dst"]), 2);
    assert_eq!(set_of(c, &["SMEMBERS", "dst"]), strs(&["1", "2"]));
    assert_eq!(i(c, &["SINTERSTORE", "dst", "a", "nokey"]), 0);
    assert_eq!(i(c, &["EXISTS", "dst"]), 0);
    q::<()>(c, &["SET", "str", "v"]);
    assert_eq!(e(c, &["SUNIONSTORE", "dst", "a", "str"]), WRONGTYPE);
    // SSCAN over a set bigger than one step.
    let mut args = vec!["SADD".to_string(), "big".to_string()];
    args.extend((0..1000).map(|n| format!("m{n}")));
    let a: Vec<&str> = args.iter().map(String::as_str).collect();
    assert_eq!(i(c, &a), 1000);
    let mut seen = HashSet::new();
    let mut cursor = "0".to_string();
    for _ in 0..1000 {
        let (next, items): (String, Vec<String>) = q(c, &["SSCAN", "big", &cursor, "COUNT", "37"]);
        for m in items {
            assert!(seen.insert(m));
        }
        if next == "0" {
            break;
        }
        cursor = next;
    }
    assert_eq!(seen.len(), 1000);
    let (next, items): (String, Vec<String>) = q(c, &["SSCAN", "a", "0", "MATCH", "[12]"]);
    assert_eq!((next.as_str(), items), ("0", vec!["1".to_string(), "2".to_string()]));
    // Random picks from a large set: distinct, and SPOP keeps the count exact.
    assert_eq!(set_of(c, &["SRANDMEMBER", "big", "30"]).len(), 30);
    let popped = set_of(c, &["SPOP", "big", "100"]);
    assert_eq!(popped.len(), 100);
    assert_eq!(i(c, &["SCARD", "big"]), 900);
    let left = set_of(c, &["SMEMBERS", "big"]);
    assert_eq!(left.len(), 900);
    assert!(left.is_disjoint(&popped));
}

#[test]
fn generic_commands_on_collections() {
    let (srv, _dir) = start_server();
    let c = &mut connect(&srv);
    q::<()>(c, &["HSET", "h", "a", "1", "b", "2"]);
    q::<()>(c, &["SADD", "s", "x", "y"]);
    q::<()>(c, &["SET", "n", "12345"]);
    q::<()>(c, &["SET", "short", "hello"]);
    q::<()>(c, &["SET", "long", &"x".repeat(45)]);
    assert_eq!(s(c, &["TYPE", "h"]).as_deref(), Some("hash"));
    assert_eq!(s(c, &["TYPE", "s"]).as_deref(), Some("set"));
    let (_, keys): (String, Vec<String>) = q(c, &["SCAN", "0", "TYPE", "set", "COUNT", "100"]);
    assert_eq!(keys, vec!["s".to_string()]);
    let (_, keys): (String, Vec<String>) = q(c, &["SCAN", "0", "TYPE", "hash", "COUNT", "100"]);
    assert_eq!(keys, vec!["h".to_string()]);
    // OBJECT
    assert_eq!(s(c, &["OBJECT", "ENCODING", "h"]).as_deref(), Some("hashtable"));
    assert_eq!(s(c, &["OBJECT", "ENCODING", "s"]).as_deref(), Some("hashtable"));
    assert_eq!(s(c, &["OBJECT", "ENCODING", "n"]).as_deref(), Some("int"));
    assert_eq!(s(c, &["OBJECT", "ENCODING", "short"]).as_deref(), Some("embstr"));
    assert_eq!(s(c, &["OBJECT", "ENCODING", "long"]).as_deref(), Some("raw"));
    assert_eq!(s(c, &["OBJECT", "ENCODING", "nokey"]), None);
    assert_eq!(i(c, &["OBJECT", "REFCOUNT", "h"]), 1);
    assert!(e(c, &["OBJECT", "FREQ", "h"]).starts_with("ERR An LFU maxmemory policy is not selected"));
    assert!(i(c, &["OBJECT", "IDLETIME", "h"]) < 5);
    assert_eq!(e(c, &["OBJECT", "FOO", "h"]), "ERR unknown subcommand 'FOO'. Try OBJECT HELP.");
    assert_eq!(e(c, &["OBJECT", "ENCODING"]), "ERR wrong number of arguments for 'object|encoding' command");
    let help: Vec<String> = q(c, &["OBJECT", "HELP"]);
    assert!(help.len() > 5 && help[0].starts_with("OBJECT <subcommand>"));
    // RENAME moves a collection whole and overwrites the destination; RENAMENX refuses an existing one.
    q::<()>(c, &["SADD", "other", "o"]);
    assert_eq!(s(c, &["RENAME", "h", "h2"]).as_deref(), Some("OK"));
    let all: BTreeMap<String, String> = q(c, &["HGETALL", "h2"]);
    assert_eq!(all.len(), 2);
    assert_eq!(i(c, &["EXISTS", "h"]), 0);
    assert_eq!(i(c, &["RENAMENX", "h2", "other"]), 0);
    assert_eq!(s(c, &["RENAME", "h2", "other"]).as_deref(), Some("OK"));
    assert_eq!(s(c, &["TYPE", "other"]).as_deref(), Some("hash"));
    assert_eq!(s(c, &["HGET", "other", "a"]).as_deref(), Some("1"));
    // The registry names the new key.
    let db = &srv.shared().store.db();
    let stored = db.get(shaledb_server::keys::meta_key(0, b"other")).unwrap().unwrap();
    let coll = shaledb_server::keys::Coll::decode(&stored).unwrap().unwrap();
    assert_eq!(db.get(shaledb_server::keys::registry_key(0, coll.version)).unwrap().as_deref(), Some(&b"other"[..]));
    // COPY: an independent copy (new version), with its TTL; REPLACE; to another database.
    q::<()>(c, &["EXPIRE", "s", "1000"]);
    assert_eq!(i(c, &["COPY", "s", "s2"]), 1);
    assert!(i(c, &["TTL", "s2"]) > 0);
    q::<()>(c, &["SADD", "s2", "z"]);
    assert_eq!(set_of(c, &["SMEMBERS", "s"]), strs(&["x", "y"]));
    assert_eq!(set_of(c, &["SMEMBERS", "s2"]), strs(&["x", "y", "z"]));
    assert_eq!(i(c, &["COPY", "other", "s2"]), 0);
    assert_eq!(i(c, &["COPY", "other", "s2", "REPLACE"]), 1);
    assert_eq!(s(c, &["HGET", "s2", "b"]).as_deref(), Some("2"));
    assert_eq!(i(c, &["COPY", "s", "s", "DB", "4"]), 1);
    // MOVE a collection: gone here, whole there.
    assert_eq!(i(c, &["MOVE", "other", "4"]), 1);
    assert_eq!(i(c, &["EXISTS", "other"]), 0);
    q::<()>(c, &["SELECT", "4"]);
    assert_eq!(s(c, &["HGET", "other", "a"]).as_deref(), Some("1"));
    assert_eq!(set_of(c, &["SMEMBERS", "s"]), strs(&["x", "y"]));
    q::<()>(c, &["HSET", "other", "c", "3"]);
    assert_eq!(i(c, &["HLEN", "other"]), 3);
    q::<()>(c, &["SELECT", "0"]);
    assert_eq!(s(c, &["HGET", "s2", "c"]), None, "the copy in db 0 is independent of the moved hash");
    // EXPIRE / PERSIST / TTL / DEL on a collection.
    assert_eq!(i(c, &["PERSIST", "s"]), 1);
    assert_eq!(i(c, &["TTL", "s"]), -1);
    assert_eq!(i(c, &["PEXPIRE", "s", "50"]), 1);
    assert!(i(c, &["PTTL", "s"]) > 0);
    std::thread::sleep(std::time::Duration::from_millis(120));
    assert_eq!(i(c, &["SCARD", "s"]), 0);
    assert_eq!(i(c, &["EXISTS", "s"]), 0);
    assert_eq!(i(c, &["SADD", "s", "fresh"]), 1, "a new set, not the expired one");
    assert_eq!(set_of(c, &["SMEMBERS", "s"]), strs(&["fresh"]));
    assert_eq!(i(c, &["EXPIRE", "s", "-1"]), 1);
    assert_eq!(i(c, &["EXISTS", "s"]), 0);
    assert_eq!(i(c, &["DEL", "s2", "nokey"]), 1);
    assert_eq!(i(c, &["HLEN", "s2"]), 0);
    // A SET over a collection replaces it (Redis semantics).
    q::<()>(c, &["SADD", "t", "a"]);
    q::<()>(c, &["SET", "t", "v"]);
    assert_eq!(s(c, &["GET", "t"]).as_deref(), Some("v"));
    assert_eq!(e(c, &["SCARD", "t"]), WRONGTYPE);
}

/// Every engine key under a version's member prefix (and its registry record) in database 0.
fn version_records(srv: &shaledb_server::RunningServer, version: u64) -> usize {
    let db = &srv.shared().store.db();
    let prefix = shaledb_server::keys::version_prefix(0, version);
    let mut it = db.cursor_opt(&shaledb::ReadOptions {
        iterate_lower_bound: Some(prefix.to_vec()),
        iterate_upper_bound: shaledb_server::keys::prefix_end(&prefix),
        ..Default::default()
    });
    it.seek(prefix);
    let mut n = 0;
    while it.valid() {
        n += 1;
        it.next();
    }
    n + db.get(shaledb_server::keys::registry_key(0, version)).unwrap().is_some() as usize
}

fn version_of(srv: &shaledb_server::RunningServer, key: &str) -> u64 {
    let stored = srv.shared().store.db().get(shaledb_server::keys::meta_key(0, key.as_bytes())).unwrap().unwrap();
    shaledb_server::keys::Coll::decode(&stored).unwrap().unwrap().version
}

fn wait_reclaimed(srv: &shaledb_server::RunningServer, version: u64) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while version_records(srv, version) > 0 {
        assert!(std::time::Instant::now() < deadline, "version {version} not reclaimed");
        srv.shared().store.gc.kick();
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

#[test]
fn the_collector_reclaims_dead_versions_only() {
    let (srv, _dir) = start_server();
    let c = &mut connect(&srv);
    // A 200k-field hash, built 1000 fields per command.
    for chunk in 0..200 {
        let mut args = vec!["HSET".to_string(), "big".to_string()];
        for n in chunk * 1000..(chunk + 1) * 1000 {
            args.push(format!("field:{n}"));
            args.push("v".into());
        }
        let a: Vec<&str> = args.iter().map(String::as_str).collect();
        assert_eq!(i(c, &a), 1000);
    }
    q::<()>(c, &["SADD", "live", "a", "b", "c"]);
    q::<()>(c, &["HSET", "renamed", "f", "v"]);
    q::<()>(c, &["SADD", "blind", "a", "b"]);
    let big = version_of(&srv, "big");
    let live = version_of(&srv, "live");
    let renamed = version_of(&srv, "renamed");
    let blind = version_of(&srv, "blind");
    assert_eq!(version_records(&srv, big), 200_001);
    // DEL answers at once: one write, whatever the size.
    let t = std::time::Instant::now();
    assert_eq!(i(c, &["DEL", "big"]), 1);
    let del_time = t.elapsed();
    assert_eq!(i(c, &["EXISTS", "big"]), 0);
    q::<()>(c, &["RENAME", "renamed", "renamed2"]);
    // A blind SET over a set: only the slow pass finds it.
    q::<()>(c, &["SET", "blind", "now a string"]);
    wait_reclaimed(&srv, big);
    wait_reclaimed(&srv, blind);
    srv.shared().store.db().compact_range(None, None).unwrap();
    assert_eq!(version_records(&srv, big), 0);
    assert_eq!(version_records(&srv, blind), 0);
    // Live collections are untouched, renamed ones included.
    assert_eq!(version_records(&srv, live), 4);
    assert_eq!(version_records(&srv, renamed), 2);
    assert_eq!(set_of(c, &["SMEMBERS", "live"]), strs(&["a", "b", "c"]));
    assert_eq!(s(c, &["HGET", "renamed2", "f"]).as_deref(), Some("v"));
    let gc = &srv.shared().store.gc;
    assert!(gc.versions_reclaimed.load(std::sync::atomic::Ordering::Relaxed) >= 2);
    assert!(gc.records_deleted.load(std::sync::atomic::Ordering::Relaxed) >= 200_002);
    let info: String = q(c, &["INFO", "stats"]);
    assert!(info.contains("gc_versions_reclaimed:"), "{info}");
    println!("DEL of a 200k-field hash took {del_time:?}");
}

#[test]
fn collections_survive_a_restart_and_orphans_are_reclaimed() {
    use shaledb_server::keys::{member_key, registry_key, SUB_MEMBER};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    const GHOST: u64 = 999_999;
    let h;
    {
        let (_d, srv) = crate::helpers::start_server(|c| c.dir = path.clone());
        let c = &mut connect(&srv);
        q::<()>(c, &["HSET", "h", "a", "1", "b", "2"]);
        q::<()>(c, &["SADD", "s", "x"]);
        h = version_of(&srv, "h");
        // What a process killed before its reclaim leaves: a registry record and members, no meta value.
        let db = &srv.shared().store.db();
        db.put(registry_key(0, GHOST), b"ghost").unwrap();
        db.put(member_key(0, GHOST, SUB_MEMBER, b"m"), b"").unwrap();
        srv.shutdown().unwrap();
    }
    let (_d, srv) = crate::helpers::start_server(|c| c.dir = path.clone());
    let c = &mut connect(&srv);
    assert_eq!(i(c, &["HLEN", "h"]), 2);
    assert_eq!(s(c, &["HGET", "h", "b"]).as_deref(), Some("2"));
    assert_eq!(set_of(c, &["SMEMBERS", "s"]), strs(&["x"]));
    // Versions go on above every version in the registry.
    q::<()>(c, &["SADD", "new", "y"]);
    assert!(version_of(&srv, "new") > GHOST);
    wait_reclaimed(&srv, GHOST);
    assert_eq!(version_records(&srv, h), 3);
}

/// Replies the TCL units of Redis check: SINTERCARD's numkeys text, HRANDFIELD's RESP3 shapes (one
/// `[field, value]` pair per pick with WITHVALUES, a flat array of fields without).
#[test]
fn random_picks_and_intercard_answer_as_redis() {
    let (srv, _dir) = start_server();
    let c = &mut connect(&srv);
    q::<()>(c, &["SADD", "s", "a", "b"]);
    for n in ["0", "a", "-1"] {
        assert_eq!(e(c, &["SINTERCARD", n, "s"]), "ERR numkeys should be greater than 0", "{n}");
    }
    assert_eq!(e(c, &["SINTERCARD", "2", "s"]), "ERR Number of keys can't be greater than number of args");
    assert_eq!(e(c, &["SINTERCARD", "1", "s", "LIMIT", "-1"]), "ERR LIMIT can't be negative");
    let mut raw = Client::connect(srv.addr());
    raw.cmd(&["HELLO", "3"]);
    raw.cmd(&["HSET", "h", "a", "1", "b", "2", "c", "3"]);
    for count in ["3", "-5"] {
        let r = raw.cmd(&["HRANDFIELD", "h", count, "WITHVALUES"]).array();
        assert_eq!(r.len(), count.trim_start_matches('-').parse::<usize>().unwrap());
        for pair in r {
            let p: Vec<String> = pair.array().iter().map(Resp::text).collect();
            let want = match p[0].as_str() {
                "a" => "1",
                "b" => "2",
                _ => "3",
            };
            assert_eq!(p[1], want, "{p:?}");
        }
        let r = raw.cmd(&["HRANDFIELD", "h", count]).array();
        assert!(r.iter().all(|f| matches!(f, Resp::Bulk(_))), "{r:?}");
    }
}
