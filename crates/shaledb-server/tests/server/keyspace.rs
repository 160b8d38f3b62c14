//! Keyspace, string, expiry, SCAN, SHALEDB.RANGE and MULTI/EXEC commands against a running server.

use crate::helpers::{cmd, connect, e, i, q, s, start_everysec as start_server, NOT_INT, SYNTAX};
use redis::Value;
use std::collections::HashSet;
use std::time::{Duration, Instant};

#[test]
fn set_and_its_options() {
    let (srv, _dir) = start_server();
    let c = &mut connect(&srv);
    assert_eq!(s(c, &["SET", "k", "v"]).as_deref(), Some("OK"));
    assert_eq!(s(c, &["GET", "k"]).as_deref(), Some("v"));
    assert_eq!(s(c, &["GET", "missing"]), None);
    // NX / XX
    assert_eq!(s(c, &["SET", "k", "v2", "NX"]), None);
    assert_eq!(s(c, &["GET", "k"]).as_deref(), Some("v"));
    assert_eq!(s(c, &["SET", "new", "x", "XX"]), None);
    assert_eq!(i(c, &["EXISTS", "new"]), 0);
    assert_eq!(s(c, &["SET", "k", "v2", "XX"]).as_deref(), Some("OK"));
    // GET
    assert_eq!(s(c, &["SET", "k", "v3", "GET"]).as_deref(), Some("v2"));
    assert_eq!(s(c, &["SET", "fresh", "a", "GET"]), None);
    assert_eq!(s(c, &["SET", "k", "v4", "NX", "GET"]).as_deref(), Some("v3"));
    assert_eq!(s(c, &["GET", "k"]).as_deref(), Some("v3"));
    // Expiry options
    assert_eq!(s(c, &["SET", "e", "v", "EX", "100"]).as_deref(), Some("OK"));
    let t = i(c, &["TTL", "e"]);
    assert!((99..=100).contains(&t), "{t}");
    assert_eq!(s(c, &["SET", "e", "v", "PX", "100000"]).as_deref(), Some("OK"));
    assert!(i(c, &["PTTL", "e"]) > 99_000);
    let now_s = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
    let at = (now_s + 1000).to_string();
    assert_eq!(s(c, &["SET", "e", "v", "EXAT", &at]).as_deref(), Some("OK"));
    assert_eq!(i(c, &["EXPIRETIME", "e"]), now_s as i64 + 1000);
    let pat = ((now_s + 2000) * 1000).to_string();
    assert_eq!(s(c, &["SET", "e", "v", "PXAT", &pat]).as_deref(), Some("OK"));
    assert_eq!(i(c, &["PEXPIRETIME", "e"]), (now_s as i64 + 2000) * 1000);
    // KEEPTTL keeps it; a plain SET drops it.
    assert_eq!(s(c, &["SET", "e", "w", "KEEPTTL"]).as_deref(), Some("OK"));
    assert_eq!(i(c, &["PEXPIRETIME", "e"]), (now_s as i64 + 2000) * 1000);
    assert_eq!(s(c, &["SET", "e", "w"]).as_deref(), Some("OK"));
    assert_eq!(i(c, &["TTL", "e"]), -1);
    // An absolute time in the past: OK, and the key is gone.
    assert_eq!(s(c, &["SET", "e", "v", "PXAT", "1"]).as_deref(), Some("OK"));
    assert_eq!(i(c, &["EXISTS", "e"]), 0);
    // Errors
    for bad in [
        vec!["SET", "k", "v", "NX", "XX"],
        vec!["SET", "k", "v", "EX", "10", "PX", "10"],
        vec!["SET", "k", "v", "KEEPTTL", "EX", "10"],
        vec!["SET", "k", "v", "EX"],
        vec!["SET", "k", "v", "BOGUS"],
        vec!["SET", "k", "v", "PERSIST"],
    ] {
        assert_eq!(e(c, &bad), SYNTAX, "{bad:?}");
    }
    assert_eq!(e(c, &["SET", "k", "v", "EX", "0"]), "ERR invalid expire time in 'set' command");
    assert_eq!(e(c, &["SET", "k", "v", "PX", "-5"]), "ERR invalid expire time in 'set' command");
    assert_eq!(e(c, &["SET", "k", "v", "EX", "9223372036854775"]), "ERR invalid expire time in 'set' command");
    assert_eq!(e(c, &["SET", "k", "v", "EX", "ten"]), NOT_INT);
    assert_eq!(e(c, &["SET", "k"]), "ERR wrong number of arguments for 'set' command");
    assert_eq!(s(c, &["GET", "k"]).as_deref(), Some("v3"), "failed SETs changed nothing");
}

#[test]
fn setnx_setex_psetex_getset_getdel_getex() {
    let (srv, _dir) = start_server();
    let c = &mut connect(&srv);
    assert_eq!(i(c, &["SETNX", "a", "1"]), 1);
    assert_eq!(i(c, &["SETNX", "a", "2"]), 0);
    assert_eq!(s(c, &["GET", "a"]).as_deref(), Some("1"));
    assert_eq!(s(c, &["SETEX", "b", "100", "v"]).as_deref(), Some("OK"));
    assert!((99..=100).contains(&i(c, &["TTL", "b"])));
    assert_eq!(e(c, &["SETEX", "b", "0", "v"]), "ERR invalid expire time in 'setex' command");
    assert_eq!(e(c, &["SETEX", "b", "-1", "v"]), "ERR invalid expire time in 'setex' command");
    assert_eq!(s(c, &["PSETEX", "p", "100000", "v"]).as_deref(), Some("OK"));
    assert!(i(c, &["PTTL", "p"]) > 99_000);
    assert_eq!(e(c, &["PSETEX", "p", "0", "v"]), "ERR invalid expire time in 'psetex' command");
    // GETSET drops the TTL.
    assert_eq!(s(c, &["GETSET", "b", "w"]).as_deref(), Some("v"));
    assert_eq!(i(c, &["TTL", "b"]), -1);
    assert_eq!(s(c, &["GETSET", "nope", "w"]), None);
    assert_eq!(s(c, &["GETDEL", "b"]).as_deref(), Some("w"));
    assert_eq!(i(c, &["EXISTS", "b"]), 0);
    assert_eq!(s(c, &["GETDEL", "b"]), None);
    // GETEX
    assert_eq!(s(c, &["GETEX", "a"]).as_deref(), Some("1"));
    assert_eq!(s(c, &["GETEX", "a", "EX", "100"]).as_deref(), Some("1"));
    assert!((99..=100).contains(&i(c, &["TTL", "a"])));
    assert_eq!(s(c, &["GETEX", "a", "PERSIST"]).as_deref(), Some("1"));
    assert_eq!(i(c, &["TTL", "a"]), -1);
    assert_eq!(s(c, &["GETEX", "a", "PX", "100000"]).as_deref(), Some("1"));
    assert!(i(c, &["PTTL", "a"]) > 99_000);
    assert_eq!(s(c, &["GETEX", "a", "PXAT", "1"]).as_deref(), Some("1"));
    assert_eq!(i(c, &["EXISTS", "a"]), 0);
    assert_eq!(s(c, &["GETEX", "none", "EX", "5"]), None);
    assert_eq!(e(c, &["GETEX", "a", "EX", "1", "PERSIST"]), SYNTAX);
    assert_eq!(e(c, &["GETEX", "a", "NX"]), SYNTAX);
    // As Redis: the key is looked up before the expiry's value is read (nil for a missing key).
    assert_eq!(s(c, &["GETEX", "a", "EX", "0"]), None);
    q::<()>(c, &["SET", "a", "1"]);
    assert_eq!(e(c, &["GETEX", "a", "EX", "0"]), "ERR invalid expire time in 'getex' command");
    // Wrong types do not apply: nothing but strings exists yet, so only the arity and syntax paths.
    assert_eq!(e(c, &["GETSET", "a"]), "ERR wrong number of arguments for 'getset' command");
}

#[test]
fn mget_mset_msetnx() {
    let (srv, _dir) = start_server();
    let c = &mut connect(&srv);
    assert_eq!(s(c, &["MSET", "a", "1", "b", "2", "c", "3"]).as_deref(), Some("OK"));
    let v: Vec<Option<String>> = q(c, &["MGET", "a", "nope", "c", "a"]);
    assert_eq!(v, vec![Some("1".into()), None, Some("3".into()), Some("1".into())]);
    assert_eq!(e(c, &["MSET", "a", "1", "b"]), "ERR wrong number of arguments for 'mset' command");
    assert_eq!(e(c, &["MSETNX", "a", "1", "b"]), "ERR wrong number of arguments for 'msetnx' command");
    // MSETNX: all or none.
    assert_eq!(i(c, &["MSETNX", "x", "1", "a", "9"]), 0);
    assert_eq!(i(c, &["EXISTS", "x"]), 0);
    assert_eq!(s(c, &["GET", "a"]).as_deref(), Some("1"));
    assert_eq!(i(c, &["MSETNX", "x", "1", "y", "2"]), 1);
    let v: Vec<Option<String>> = q(c, &["MGET", "x", "y"]);
    assert_eq!(v, vec![Some("1".into()), Some("2".into())]);
    // MSET drops TTLs.
    q::<()>(c, &["SET", "t", "v", "EX", "100"]);
    q::<()>(c, &["MSET", "t", "w"]);
    assert_eq!(i(c, &["TTL", "t"]), -1);
}

#[test]
fn append_strlen_getrange_setrange() {
    let (srv, _dir) = start_server();
    let c = &mut connect(&srv);
    assert_eq!(i(c, &["APPEND", "s", "Hello"]), 5);
    assert_eq!(i(c, &["APPEND", "s", " World"]), 11);
    assert_eq!(i(c, &["STRLEN", "s"]), 11);
    assert_eq!(i(c, &["STRLEN", "none"]), 0);
    assert_eq!(s(c, &["GETRANGE", "s", "0", "4"]).as_deref(), Some("Hello"));
    assert_eq!(s(c, &["GETRANGE", "s", "-5", "-1"]).as_deref(), Some("World"));
    assert_eq!(s(c, &["GETRANGE", "s", "0", "-1"]).as_deref(), Some("Hello World"));
    assert_eq!(s(c, &["GETRANGE", "s", "5", "100"]).as_deref(), Some(" World"));
    assert_eq!(s(c, &["GETRANGE", "s", "-1", "-5"]).as_deref(), Some(""));
    assert_eq!(s(c, &["GETRANGE", "s", "100", "200"]).as_deref(), Some(""));
    assert_eq!(s(c, &["GETRANGE", "none", "0", "-1"]).as_deref(), Some(""));
    assert_eq!(e(c, &["GETRANGE", "s", "a", "1"]), NOT_INT);
    assert_eq!(i(c, &["SETRANGE", "s", "6", "Redis"]), 11);
    assert_eq!(s(c, &["GET", "s"]).as_deref(), Some("Hello Redis"));
    assert_eq!(i(c, &["SETRANGE", "pad", "3", "x"]), 4);
    assert_eq!(q::<Vec<u8>>(c, &["GET", "pad"]), b"\0\0\0x".to_vec());
    assert_eq!(i(c, &["SETRANGE", "empty", "10", ""]), 0);
    assert_eq!(i(c, &["EXISTS", "empty"]), 0);
    assert_eq!(i(c, &["SETRANGE", "s", "100", ""]), 11);
    assert_eq!(e(c, &["SETRANGE", "s", "-1", "x"]), "ERR offset is out of range");
    assert_eq!(
        e(c, &["SETRANGE", "s", "536870911", "xy"]),
        "ERR string exceeds maximum allowed size (proto-max-bulk-len)"
    );
    // Within Redis's limit but beyond what the engine stores as one entry: a clear error for this command
    // only; the commands around it in the same pipeline are applied.
    let mut p = redis::pipe();
    p.cmd("SET").arg("before").arg("1");
    p.cmd("SETRANGE").arg("big").arg(200_000_000).arg("x");
    p.cmd("SET").arg("after").arg("2");
    let r: Vec<Value> = p.query(c).unwrap_or_else(|e| vec![Value::SimpleString(e.to_string())]);
    let text = format!("{r:?}");
    assert!(text.contains("too large"), "{text}");
    assert_eq!(s(c, &["GET", "before"]).as_deref(), Some("1"));
    assert_eq!(s(c, &["GET", "after"]).as_deref(), Some("2"));
    assert_eq!(i(c, &["EXISTS", "big"]), 0);
    // APPEND keeps the TTL.
    q::<()>(c, &["SET", "t", "a", "EX", "100"]);
    assert_eq!(i(c, &["APPEND", "t", "b"]), 2);
    assert!(i(c, &["TTL", "t"]) > 0);
}

#[test]
fn incr_family() {
    let (srv, _dir) = start_server();
    let c = &mut connect(&srv);
    assert_eq!(i(c, &["INCR", "n"]), 1);
    assert_eq!(i(c, &["INCRBY", "n", "10"]), 11);
    assert_eq!(i(c, &["DECR", "n"]), 10);
    assert_eq!(i(c, &["DECRBY", "n", "20"]), -10);
    assert_eq!(s(c, &["GET", "n"]).as_deref(), Some("-10"));
    q::<()>(c, &["SET", "n", "9223372036854775806"]);
    assert_eq!(i(c, &["INCR", "n"]), i64::MAX);
    assert_eq!(e(c, &["INCR", "n"]), "ERR increment or decrement would overflow");
    q::<()>(c, &["SET", "m", "-9223372036854775808"]);
    assert_eq!(e(c, &["DECR", "m"]), "ERR increment or decrement would overflow");
    assert_eq!(e(c, &["DECRBY", "x", "-9223372036854775808"]), "ERR decrement would overflow");
    q::<()>(c, &["SET", "s", "abc"]);
    assert_eq!(e(c, &["INCR", "s"]), NOT_INT);
    q::<()>(c, &["SET", "s", " 1"]);
    assert_eq!(e(c, &["INCR", "s"]), NOT_INT);
    assert_eq!(e(c, &["INCRBY", "n", "x"]), NOT_INT);
    // INCR keeps the TTL.
    q::<()>(c, &["SET", "t", "1", "EX", "100"]);
    assert_eq!(i(c, &["INCR", "t"]), 2);
    assert!(i(c, &["TTL", "t"]) > 0);
    // INCRBYFLOAT
    q::<()>(c, &["SET", "f", "10.50"]);
    assert_eq!(s(c, &["INCRBYFLOAT", "f", "0.1"]).as_deref(), Some("10.6"));
    assert_eq!(s(c, &["INCRBYFLOAT", "f", "-5"]).as_deref(), Some("5.6"));
    q::<()>(c, &["SET", "g", "5.0e3"]);
    assert_eq!(s(c, &["INCRBYFLOAT", "g", "2.0e2"]).as_deref(), Some("5200"));
    assert_eq!(s(c, &["INCRBYFLOAT", "newf", "3"]).as_deref(), Some("3"));
    assert_eq!(e(c, &["INCRBYFLOAT", "f", "abc"]), "ERR value is not a valid float");
    assert_eq!(e(c, &["INCRBYFLOAT", "s", "1"]), "ERR value is not a valid float");
    // Long double, as Redis: 1.7e308 + 1.7e308 is finite there; 2e4932 is not.
    q::<()>(c, &["SET", "huge", "1e4932"]);
    assert_eq!(e(c, &["INCRBYFLOAT", "huge", "1e4932"]), "ERR increment would produce NaN or Infinity");
    // As Redis 7.0: an infinite increment is a float; the sum is what is refused.
    assert_eq!(e(c, &["INCRBYFLOAT", "f", "inf"]), "ERR increment would produce NaN or Infinity");
    assert_eq!(e(c, &["INCRBYFLOAT", "f", "nan"]), "ERR value is not a valid float");
}

#[test]
fn incr_is_atomic_under_concurrency() {
    let (srv, _dir) = start_server();
    let started = Instant::now();
    std::thread::scope(|scope| {
        for _ in 0..8 {
            let srv = &srv;
            scope.spawn(move || {
                let c = &mut connect(srv);
                for _ in 0..500 {
                    let _: i64 = q(c, &["INCR", "counter"]);
                }
            });
        }
    });
    let c = &mut connect(&srv);
    assert_eq!(s(c, &["GET", "counter"]).as_deref(), Some("4000"));
    assert!(started.elapsed() < Duration::from_secs(60), "{:?}", started.elapsed());
}

#[test]
fn del_exists_type_rename_move_copy() {
    let (srv, _dir) = start_server();
    let c = &mut connect(&srv);
    q::<()>(c, &["MSET", "a", "1", "b", "2"]);
    assert_eq!(i(c, &["EXISTS", "a", "a", "b", "zz"]), 3);
    assert_eq!(s(c, &["TYPE", "a"]).as_deref(), Some("string"));
    assert_eq!(s(c, &["TYPE", "zz"]).as_deref(), Some("none"));
    assert_eq!(i(c, &["DEL", "a", "a", "zz"]), 1);
    assert_eq!(i(c, &["UNLINK", "b"]), 1);
    assert_eq!(i(c, &["EXISTS", "a", "b"]), 0);
    // RENAME keeps the TTL and overwrites.
    q::<()>(c, &["SET", "src", "v", "EX", "100"]);
    q::<()>(c, &["SET", "dst", "old"]);
    assert_eq!(s(c, &["RENAME", "src", "dst"]).as_deref(), Some("OK"));
    assert_eq!(s(c, &["GET", "dst"]).as_deref(), Some("v"));
    assert!(i(c, &["TTL", "dst"]) > 0);
    assert_eq!(i(c, &["EXISTS", "src"]), 0);
    assert_eq!(e(c, &["RENAME", "src", "x"]), "ERR no such key");
    assert_eq!(e(c, &["RENAMENX", "src", "x"]), "ERR no such key");
    assert_eq!(s(c, &["RENAME", "dst", "dst"]).as_deref(), Some("OK"));
    q::<()>(c, &["SET", "other", "o"]);
    assert_eq!(i(c, &["RENAMENX", "dst", "other"]), 0);
    assert_eq!(i(c, &["RENAMENX", "dst", "dst"]), 0);
    assert_eq!(i(c, &["RENAMENX", "dst", "fresh"]), 1);
    assert_eq!(s(c, &["GET", "fresh"]).as_deref(), Some("v"));
    // MOVE
    assert_eq!(i(c, &["MOVE", "fresh", "3"]), 1);
    assert_eq!(i(c, &["EXISTS", "fresh"]), 0);
    assert_eq!(i(c, &["MOVE", "fresh", "3"]), 0);
    assert_eq!(e(c, &["MOVE", "other", "0"]), "ERR source and destination objects are the same");
    assert_eq!(e(c, &["MOVE", "other", "16"]), "ERR DB index is out of range");
    q::<()>(c, &["SELECT", "3"]);
    assert_eq!(s(c, &["GET", "fresh"]).as_deref(), Some("v"));
    assert!(i(c, &["TTL", "fresh"]) > 0);
    q::<()>(c, &["SET", "other", "in3"]);
    q::<()>(c, &["SELECT", "0"]);
    assert_eq!(i(c, &["MOVE", "other", "3"]), 0, "the destination has the key");
    // COPY
    assert_eq!(i(c, &["COPY", "other", "cp"]), 1);
    assert_eq!(s(c, &["GET", "cp"]).as_deref(), Some("o"));
    assert_eq!(i(c, &["COPY", "other", "cp"]), 0);
    q::<()>(c, &["SET", "other", "o2"]);
    assert_eq!(i(c, &["COPY", "other", "cp", "REPLACE"]), 1);
    assert_eq!(s(c, &["GET", "cp"]).as_deref(), Some("o2"));
    assert_eq!(i(c, &["COPY", "other", "cp", "DB", "5"]), 1);
    assert_eq!(i(c, &["COPY", "nope", "cp2"]), 0);
    assert_eq!(e(c, &["COPY", "other", "other"]), "ERR source and destination objects are the same");
    assert_eq!(e(c, &["COPY", "other", "x", "BOGUS"]), SYNTAX);
    q::<()>(c, &["SELECT", "5"]);
    assert_eq!(s(c, &["GET", "cp"]).as_deref(), Some("o2"));
}

#[test]
fn expire_family_and_ttl() {
    let (srv, _dir) = start_server();
    let c = &mut connect(&srv);
    assert_eq!(i(c, &["TTL", "k"]), -2);
    assert_eq!(i(c, &["PTTL", "k"]), -2);
    assert_eq!(i(c, &["EXPIRETIME", "k"]), -2);
    assert_eq!(i(c, &["EXPIRE", "k", "100"]), 0);
    q::<()>(c, &["SET", "k", "v"]);
    assert_eq!(i(c, &["TTL", "k"]), -1);
    assert_eq!(i(c, &["PEXPIRETIME", "k"]), -1);
    assert_eq!(i(c, &["PERSIST", "k"]), 0);
    // NX / XX / GT / LT
    assert_eq!(i(c, &["EXPIRE", "k", "100", "XX"]), 0);
    assert_eq!(i(c, &["EXPIRE", "k", "100", "GT"]), 0, "no TTL counts as infinite");
    assert_eq!(i(c, &["EXPIRE", "k", "100", "LT"]), 1);
    assert_eq!(i(c, &["EXPIRE", "k", "200", "NX"]), 0);
    assert_eq!(i(c, &["EXPIRE", "k", "50", "GT"]), 0);
    assert_eq!(i(c, &["EXPIRE", "k", "200", "GT"]), 1);
    assert_eq!(i(c, &["EXPIRE", "k", "300", "LT"]), 0);
    assert_eq!(i(c, &["EXPIRE", "k", "150", "XX", "LT"]), 1);
    let t = i(c, &["TTL", "k"]);
    assert!((149..=150).contains(&t), "{t}");
    assert_eq!(i(c, &["PEXPIRE", "k", "100000"]), 1);
    assert!((99_000..=100_000).contains(&i(c, &["PTTL", "k"])));
    let now_s = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64;
    assert_eq!(i(c, &["EXPIREAT", "k", &(now_s + 500).to_string()]), 1);
    assert_eq!(i(c, &["EXPIRETIME", "k"]), now_s + 500);
    assert_eq!(i(c, &["PEXPIREAT", "k", &((now_s + 600) * 1000).to_string()]), 1);
    assert_eq!(i(c, &["PEXPIRETIME", "k"]), (now_s + 600) * 1000);
    assert_eq!(i(c, &["PERSIST", "k"]), 1);
    assert_eq!(i(c, &["TTL", "k"]), -1);
    // Errors
    assert_eq!(
        e(c, &["EXPIRE", "k", "10", "NX", "XX"]),
        "ERR NX and XX, GT or LT options at the same time are not compatible"
    );
    assert_eq!(e(c, &["EXPIRE", "k", "10", "GT", "LT"]), "ERR GT and LT options at the same time are not compatible");
    assert_eq!(e(c, &["EXPIRE", "k", "10", "YY"]), "ERR Unsupported option YY");
    assert_eq!(e(c, &["EXPIRE", "k", "abc"]), NOT_INT);
    assert_eq!(e(c, &["EXPIRE", "k", "9223372036854775807"]), "ERR invalid expire time in 'expire' command");
    assert_eq!(e(c, &["PEXPIRE", "k", "9223372036854775807"]), "ERR invalid expire time in 'pexpire' command");
    // A time in the past deletes the key.
    assert_eq!(i(c, &["EXPIRE", "k", "-1"]), 1);
    assert_eq!(i(c, &["EXISTS", "k"]), 0);
    q::<()>(c, &["SET", "k", "v"]);
    assert_eq!(i(c, &["PEXPIREAT", "k", "1"]), 1);
    assert_eq!(i(c, &["EXISTS", "k"]), 0);
}

#[test]
fn expired_keys_vanish_and_the_sweeper_removes_them() {
    let (srv, _dir) = start_server();
    let c = &mut connect(&srv);
    // Expiry 2 s out, so that a loaded machine cannot expire a key before DBSIZE counts it.
    let start = Instant::now();
    let mut p = redis::pipe();
    p.cmd("SET").arg("short").arg("v").arg("PX").arg(2000).ignore();
    p.cmd("SET").arg("keep").arg("v").ignore();
    for n in 0..300 {
        p.cmd("SET").arg(format!("bulk{n}")).arg("v").arg("PX").arg(2000).ignore();
    }
    p.query::<()>(c).unwrap();
    assert_eq!(i(c, &["DBSIZE"]), 302);
    std::thread::sleep(Duration::from_millis(2100).saturating_sub(start.elapsed()));
    assert_eq!(s(c, &["GET", "short"]), None);
    assert_eq!(i(c, &["EXISTS", "short"]), 0);
    assert_eq!(i(c, &["TTL", "short"]), -2);
    assert_eq!(i(c, &["DBSIZE"]), 1);
    let keys: Vec<String> = q(c, &["KEYS", "*"]);
    assert_eq!(keys, vec!["keep".to_string()]);
    // The sweeper deletes them from the engine itself (without any client touching them).
    let db = srv.shared().store.db();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let mut it = db.cursor();
        it.seek_to_first();
        let mut n = 0;
        while it.valid() {
            // The layout marker is an engine record of every server database, not a key.
            n += (it.key() != shaledb_server::layout::MARKER_KEY) as usize;
            it.next();
        }
        if n == 1 {
            break;
        }
        assert!(Instant::now() < deadline, "{n} engine keys left after 10 s");
        std::thread::sleep(Duration::from_millis(50));
    }
    drop(db);
    // A key re-set without expiry after it expired is kept.
    q::<()>(c, &["SET", "re", "v", "PX", "30"]);
    std::thread::sleep(Duration::from_millis(60));
    q::<()>(c, &["SET", "re", "w"]);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(s(c, &["GET", "re"]).as_deref(), Some("w"));
}

#[test]
fn scan_returns_every_key() {
    let (srv, _dir) = start_server();
    let c = &mut connect(&srv);
    let mut p = redis::pipe();
    for n in 0..1000 {
        p.cmd("SET").arg(format!("key:{n}")).arg(n).ignore();
    }
    p.query::<()>(c).unwrap();
    let mut seen = HashSet::new();
    let mut cursor = "0".to_string();
    let mut calls = 0;
    loop {
        let (next, batch): (String, Vec<String>) = q(c, &["SCAN", &cursor, "COUNT", "10"]);
        calls += 1;
        assert!(batch.len() <= 10);
        seen.extend(batch);
        assert!(next.parse::<u64>().is_ok(), "the cursor is a decimal u64: {next}");
        if next == "0" {
            break;
        }
        cursor = next;
        assert!(calls < 1000, "the scan does not end");
    }
    assert_eq!(seen.len(), 1000);
    // The redis crate's own iterator (parses the cursor as an integer).
    let all: Vec<String> = redis::Commands::scan_match::<_, String>(c, "key:1*").unwrap().collect();
    assert_eq!(all.len(), 111);
    // MATCH, TYPE, COUNT errors, invalid cursor.
    let (next, batch): (String, Vec<String>) = q(c, &["SCAN", "0", "MATCH", "key:99?", "COUNT", "1000"]);
    assert_eq!(next, "0");
    assert_eq!(batch.len(), 10);
    let (_, batch): (String, Vec<String>) = q(c, &["SCAN", "0", "TYPE", "hash", "COUNT", "2000"]);
    assert!(batch.is_empty());
    let (_, batch): (String, Vec<String>) = q(c, &["SCAN", "0", "TYPE", "string", "COUNT", "2000"]);
    assert_eq!(batch.len(), 1000);
    assert_eq!(e(c, &["SCAN", "0", "COUNT", "0"]), SYNTAX);
    assert_eq!(e(c, &["SCAN", "0", "COUNT"]), SYNTAX);
    assert_eq!(e(c, &["SCAN", "0", "BOGUS", "x"]), SYNTAX);
    assert_eq!(e(c, &["SCAN", "x"]), "ERR invalid cursor");
    assert_eq!(e(c, &["SCAN", "12345"]), "ERR invalid cursor");
    // A cursor belongs to its database.
    let (next, _): (String, Vec<String>) = q(c, &["SCAN", "0", "COUNT", "5"]);
    q::<()>(c, &["SELECT", "1"]);
    assert_eq!(e(c, &["SCAN", &next]), "ERR invalid cursor");
}

#[test]
fn keys_randomkey_dbsize_flush_and_select_isolation() {
    let (srv, _dir) = start_server();
    let c = &mut connect(&srv);
    assert_eq!(s(c, &["RANDOMKEY"]), None);
    q::<()>(c, &["MSET", "hello", "1", "hallo", "2", "hxllo", "3", "world", "4", "h*llo", "5"]);
    let mut k: Vec<String> = q(c, &["KEYS", "h?llo"]);
    k.sort();
    assert_eq!(k, vec!["h*llo", "hallo", "hello", "hxllo"]);
    let k: Vec<String> = q(c, &["KEYS", "h[ae]llo"]);
    assert_eq!(k, vec!["hallo", "hello"]);
    let k: Vec<String> = q(c, &["KEYS", "h[^e]llo"]);
    assert_eq!(k, vec!["h*llo", "hallo", "hxllo"]);
    let k: Vec<String> = q(c, &["KEYS", "h\\*llo"]);
    assert_eq!(k, vec!["h*llo"]);
    let k: Vec<String> = q(c, &["KEYS", "w*"]);
    assert_eq!(k, vec!["world"]);
    assert_eq!(i(c, &["DBSIZE"]), 5);
    for _ in 0..20 {
        let r = s(c, &["RANDOMKEY"]).unwrap();
        assert!(["hello", "hallo", "hxllo", "world", "h*llo"].contains(&r.as_str()), "{r}");
    }
    // Databases are isolated.
    q::<()>(c, &["SELECT", "1"]);
    assert_eq!(i(c, &["DBSIZE"]), 0);
    assert_eq!(s(c, &["GET", "hello"]), None);
    q::<()>(c, &["SET", "hello", "db1"]);
    q::<()>(c, &["SET", "only1", "x"]);
    q::<()>(c, &["SELECT", "0"]);
    assert_eq!(s(c, &["GET", "hello"]).as_deref(), Some("1"));
    assert_eq!(i(c, &["EXISTS", "only1"]), 0);
    // FLUSHDB empties one database only; FLUSHALL all of them.
    assert_eq!(s(c, &["FLUSHDB"]).as_deref(), Some("OK"));
    assert_eq!(i(c, &["DBSIZE"]), 0);
    q::<()>(c, &["SELECT", "1"]);
    assert_eq!(i(c, &["DBSIZE"]), 2);
    assert_eq!(e(c, &["FLUSHDB", "BOGUS"]), SYNTAX);
    q::<()>(c, &["SELECT", "2"]);
    q::<()>(c, &["SET", "x", "y"]);
    assert_eq!(s(c, &["FLUSHALL", "SYNC"]).as_deref(), Some("OK"));
    assert_eq!(i(c, &["DBSIZE"]), 0);
    q::<()>(c, &["SELECT", "1"]);
    assert_eq!(i(c, &["DBSIZE"]), 0);
    // FLUSHDB of many keys (more than one internal step).
    q::<()>(c, &["SELECT", "0"]);
    for chunk in 0..3 {
        let mut p = redis::pipe();
        for n in 0..5000 {
            p.cmd("SET").arg(format!("f{chunk}:{n}")).arg("v").ignore();
        }
        p.query::<()>(c).unwrap();
    }
    assert_eq!(i(c, &["DBSIZE"]), 15000);
    q::<()>(c, &["FLUSHDB", "ASYNC"]);
    assert_eq!(i(c, &["DBSIZE"]), 0);
}

fn strs(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

#[test]
fn shaledb_range_reads_in_order() {
    let (srv, _dir) = start_server();
    let c = &mut connect(&srv);
    q::<()>(c, &["MSET", "a", "1", "b", "2", "c", "3", "d", "4", "e", "5"]);
    let r: Vec<String> = q(c, &["SHALEDB.RANGE", "-", "+"]);
    assert_eq!(r, strs(&["a", "b", "c", "d", "e"]));
    let r: Vec<String> = q(c, &["SHALEDB.RANGE", "[b", "[d"]);
    assert_eq!(r, strs(&["b", "c", "d"]));
    let r: Vec<String> = q(c, &["SHALEDB.RANGE", "(b", "(d"]);
    assert_eq!(r, strs(&["c"]));
    let r: Vec<String> = q(c, &["SHALEDB.RANGE", "[b", "+", "COUNT", "2", "WITHVALUES"]);
    assert_eq!(r, strs(&["b", "2", "c", "3"]));
    let r: Vec<String> = q(c, &["SHALEDB.RANGE", "+", "-", "REV", "COUNT", "3"]);
    assert_eq!(r, strs(&["e", "d", "c"]));
    let r: Vec<String> = q(c, &["SHALEDB.RANGE", "[d", "(a", "REV", "WITHVALUES"]);
    assert_eq!(r, strs(&["d", "4", "c", "3", "b", "2"]));
    let r: Vec<String> = q(c, &["SHALEDB.RANGE", "(d", "[b", "REV"]);
    assert_eq!(r, strs(&["c", "b"]));
    let r: Vec<String> = q(c, &["SHALEDB.RANGE", "[bb", "[cc"]);
    assert_eq!(r, strs(&["c"]));
    let r: Vec<String> = q(c, &["SHALEDB.RANGE", "[d", "[b"]);
    assert!(r.is_empty(), "start after end");
    let r: Vec<String> = q(c, &["SHALEDB.RANGE", "-", "+", "COUNT", "0"]);
    assert!(r.is_empty());
    // Expired keys are skipped; other databases are not seen.
    q::<()>(c, &["SET", "bb", "x", "PX", "20"]);
    q::<()>(c, &["SELECT", "1"]);
    q::<()>(c, &["SET", "ba", "other db"]);
    q::<()>(c, &["SELECT", "0"]);
    std::thread::sleep(Duration::from_millis(50));
    let r: Vec<String> = q(c, &["SHALEDB.RANGE", "[b", "[c"]);
    assert_eq!(r, strs(&["b", "c"]));
    // Paging: go on from the last key returned.
    let mut got = Vec::new();
    let mut from = "-".to_string();
    loop {
        let r: Vec<String> = q(c, &["SHALEDB.RANGE", &from, "+", "COUNT", "2"]);
        if r.is_empty() {
            break;
        }
        from = format!("({}", r.last().unwrap());
        got.extend(r);
    }
    assert_eq!(got, strs(&["a", "b", "c", "d", "e"]));
    assert_eq!(e(c, &["SHALEDB.RANGE", "a", "+"]), "ERR min or max not valid string range item");
    assert_eq!(e(c, &["SHALEDB.RANGE", "-", "+", "COUNT", "-1"]), "ERR COUNT must be between 0 and 100000");
    assert_eq!(e(c, &["SHALEDB.RANGE", "-", "+", "BOGUS"]), SYNTAX);
}

#[test]
fn multi_exec_discard() {
    let (srv, _dir) = start_server();
    let c = &mut connect(&srv);
    assert_eq!(e(c, &["EXEC"]), "ERR EXEC without MULTI");
    assert_eq!(e(c, &["DISCARD"]), "ERR DISCARD without MULTI");
    // A transaction sees its own writes and returns every reply.
    assert_eq!(s(c, &["MULTI"]).as_deref(), Some("OK"));
    assert_eq!(e(c, &["MULTI"]), "ERR MULTI calls can not be nested");
    assert_eq!(s(c, &["SET", "a", "1"]).as_deref(), Some("QUEUED"));
    assert_eq!(s(c, &["INCR", "a"]).as_deref(), Some("QUEUED"));
    assert_eq!(s(c, &["GET", "a"]).as_deref(), Some("QUEUED"));
    assert_eq!(s(c, &["PING"]).as_deref(), Some("QUEUED"));
    let r: Value = q(c, &["EXEC"]);
    assert_eq!(
        r,
        Value::Array(vec![
            Value::Okay,
            Value::Int(2),
            Value::BulkString(b"2".to_vec()),
            Value::SimpleString("PONG".into())
        ])
    );
    // An empty transaction.
    q::<()>(c, &["MULTI"]);
    assert_eq!(q::<Value>(c, &["EXEC"]), Value::Array(vec![]));
    // DISCARD drops the queue.
    q::<()>(c, &["MULTI"]);
    q::<()>(c, &["SET", "a", "discarded"]);
    assert_eq!(s(c, &["DISCARD"]).as_deref(), Some("OK"));
    assert_eq!(s(c, &["GET", "a"]).as_deref(), Some("2"));
    assert_eq!(e(c, &["EXEC"]), "ERR EXEC without MULTI");
    // An unknown command or a wrong arity while queuing aborts the EXEC.
    q::<()>(c, &["MULTI"]);
    q::<()>(c, &["SET", "a", "x"]);
    assert!(e(c, &["NOSUCHCMD", "1"]).starts_with("ERR unknown command 'NOSUCHCMD'"));
    assert_eq!(e(c, &["EXEC"]), "EXECABORT Transaction discarded because of previous errors.");
    assert_eq!(s(c, &["GET", "a"]).as_deref(), Some("2"));
    q::<()>(c, &["MULTI"]);
    assert_eq!(e(c, &["GET"]), "ERR wrong number of arguments for 'get' command");
    assert_eq!(e(c, &["EXEC"]), "EXECABORT Transaction discarded because of previous errors.");
    // SELECT inside MULTI is refused and aborts (documented).
    q::<()>(c, &["MULTI"]);
    assert_eq!(e(c, &["SELECT", "1"]), "ERR Command 'select' is not allowed inside MULTI");
    assert_eq!(e(c, &["EXEC"]), "EXECABORT Transaction discarded because of previous errors.");
    // A run-time error does not stop the others (Redis semantics).
    q::<()>(c, &["SET", "s", "abc"]);
    q::<()>(c, &["MULTI"]);
    q::<()>(c, &["INCR", "s"]);
    q::<()>(c, &["SET", "after", "ok"]);
    let r = cmd(&["EXEC"]).query::<Value>(c);
    assert!(r.is_err(), "{r:?}");
    assert_eq!(s(c, &["GET", "after"]).as_deref(), Some("ok"));
    // The redis crate's atomic pipeline.
    let (x, y): (i64, i64) = redis::pipe().atomic().cmd("INCR").arg("t").cmd("INCR").arg("t").query(c).unwrap();
    assert_eq!((x, y), (1, 2));
}

#[test]
fn transactions_do_not_interleave() {
    // Two keys always moved together inside MULTI; a concurrent reader transaction must always see them
    // equal.
    let (srv, _dir) = start_server();
    let c = &mut connect(&srv);
    q::<()>(c, &["MSET", "x", "0", "y", "0"]);
    std::thread::scope(|scope| {
        for _ in 0..4 {
            scope.spawn(|| {
                let c = &mut connect(&srv);
                for _ in 0..100 {
                    let _: (i64, i64) =
                        redis::pipe().atomic().cmd("INCR").arg("x").cmd("INCR").arg("y").query(c).unwrap();
                }
            });
        }
        scope.spawn(|| {
            let c = &mut connect(&srv);
            for _ in 0..200 {
                let (x, y): (i64, i64) =
                    redis::pipe().atomic().cmd("GET").arg("x").cmd("GET").arg("y").query(c).unwrap();
                assert_eq!(x, y);
            }
        });
    });
    assert_eq!(s(c, &["GET", "x"]).as_deref(), Some("400"));
    assert_eq!(s(c, &["GET", "y"]).as_deref(), Some("400"));
}

#[test]
fn other_types_answer_wrongtype() {
    let (srv, _dir) = start_server();
    let c = &mut connect(&srv);
    assert_eq!(i(c, &["HSET", "h", "f", "v"]), 1);
    const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";
    assert_eq!(s(c, &["TYPE", "h"]).as_deref(), Some("hash"));
    for args in [
        vec!["GET", "h"],
        vec!["SET", "h", "v", "GET"],
        vec!["GETSET", "h", "v"],
        vec!["GETDEL", "h"],
        vec!["GETEX", "h"],
        vec!["APPEND", "h", "x"],
        vec!["STRLEN", "h"],
        vec!["GETRANGE", "h", "0", "1"],
        vec!["SETRANGE", "h", "0", "x"],
        vec!["INCR", "h"],
        vec!["INCRBYFLOAT", "h", "1"],
    ] {
        assert_eq!(e(c, &args), WRONGTYPE, "{args:?}");
    }
    let v: Vec<Option<String>> = q(c, &["MGET", "h"]);
    assert_eq!(v, vec![None]);
    assert_eq!(s(c, &["RENAME", "h", "h2"]).as_deref(), Some("OK"));
    assert_eq!(s(c, &["RENAME", "h2", "h"]).as_deref(), Some("OK"));
    assert_eq!(i(c, &["SETNX", "h", "v"]), 0);
    assert_eq!(i(c, &["EXPIRE", "h", "100"]), 1);
    assert!(i(c, &["TTL", "h"]) > 0);
    assert_eq!(s(c, &["TYPE", "h"]).as_deref(), Some("hash"));
    let (_, keys): (String, Vec<String>) = q(c, &["SCAN", "0", "TYPE", "hash"]);
    assert_eq!(keys, vec!["h".to_string()]);
    let r: Vec<String> = q(c, &["SHALEDB.RANGE", "-", "+"]);
    assert!(r.is_empty(), "the range read returns strings only");
    // A plain SET overwrites whatever type was there (Redis semantics).
    assert_eq!(s(c, &["SET", "h", "v"]).as_deref(), Some("OK"));
    assert_eq!(s(c, &["GET", "h"]).as_deref(), Some("v"));
}

// ---------------------------------------------------------------------------------------------------------
// SWAPDB, and COPY/MOVE/RENAME of a stream with consumer groups

mod swap_and_copy {
    use crate::helpers::{connect, e, i, q, s, start_everysec as start_server, Client, Resp};
    use bytes::Bytes;
    use redis::Value;
    use shaledb::{Db, Options};
    use shaledb_server::commands::{lookup, Handler, Spec};
    use shaledb_server::commit::Store;
    use shaledb_server::resp::Reply;
    use shaledb_server::store::ReadCtx;
    use shaledb_server::Appendfsync;
    use shaledb_vfs::MemFs;
    use std::sync::Arc;
    use std::time::Duration;

    fn command(words: &[&str]) -> (&'static Spec, Vec<Bytes>) {
        let spec = lookup(words[0].as_bytes()).expect("the command exists");
        (spec, words.iter().map(|w| Bytes::from(w.to_string())).collect())
    }

    fn read(store: &Store, db: u8, words: &[&str]) -> Reply {
        let (spec, args) = command(words);
        let Handler::Read(f) = spec.handler else { panic!("{} is a read", words[0]) };
        f(&ReadCtx::new(&store.db(), store.keyspace(), db, shaledb_server::store::now_ms()), &args)
    }

    fn run(store: &Store, db: u8, words: &[&str]) -> Reply {
        store.submit_and_wait(db, vec![command(words)]).expect("answered").remove(0)
    }

    /// What a database holds, read back whole: one reply per key and type.
    fn contents(store: &Store, db: u8) -> Vec<Reply> {
        vec![
            read(store, db, &["KEYS", "*"]),
            read(store, db, &["GET", "str"]),
            read(store, db, &["LRANGE", "list", "0", "-1"]),
            read(store, db, &["HGETALL", "hash"]),
            read(store, db, &["SMEMBERS", "set"]),
            read(store, db, &["ZRANGE", "zset", "0", "-1", "WITHSCORES"]),
            read(store, db, &["XRANGE", "stream", "-", "+"]),
            read(store, db, &["XPENDING", "stream", "g"]),
            read(store, db, &["PEXPIRETIME", "str"]),
        ]
    }

    fn fill(store: &Store, db: u8, tag: &str) {
        let val = |s: &str| format!("{tag}{s}");
        assert_eq!(run(store, db, &["SET", "str", &val("s"), "PX", "100000000"]), Reply::Ok);
        assert!(matches!(run(store, db, &["RPUSH", "list", &val("1"), &val("2")]), Reply::Int(2)));
        assert!(matches!(run(store, db, &["HSET", "hash", "f", &val("v")]), Reply::Int(1)));
        assert!(matches!(run(store, db, &["SADD", "set", &val("a"), &val("b")]), Reply::Int(2)));
        assert!(matches!(run(store, db, &["ZADD", "zset", "1", &val("m")]), Reply::Int(1)));
        assert!(matches!(run(store, db, &["XADD", "stream", "1-1", "f", &val("x")]), Reply::Bulk(_)));
        assert_eq!(run(store, db, &["XGROUP", "CREATE", "stream", "g", "0"]), Reply::Ok);
        assert!(matches!(
            run(store, db, &["XREADGROUP", "GROUP", "g", "c", "STREAMS", "stream", ">"]),
            Reply::Array(_)
        ));
    }

    /// SWAPDB moves every type (a stream's consumer groups included) between the two databases in one
    /// write: acknowledged after the fsync, and after a kill -9 the swap is whole; the collections moved
    /// stay writable and keep their members.
    #[test]
    fn swapdb_swaps_every_type_whole_and_survives_a_process_kill() {
        let fs = MemFs::new();
        let db = Db::open("/db", Options { fs: Arc::new(fs.clone()), ..Options::default() }).expect("open");
        let store = Store::start(db, Appendfsync::Always);
        fill(&store, 0, "zero-");
        fill(&store, 5, "five-");
        assert!(matches!(run(&store, 5, &["SET", "only5", "x"]), Reply::Ok));
        let (was0, was5) = (contents(&store, 0), contents(&store, 5));
        assert_ne!(was0, was5);
        assert_eq!(run(&store, 3, &["SWAPDB", "0", "5"]), Reply::Ok);
        assert_eq!(contents(&store, 5), was0);
        assert_eq!(contents(&store, 0), was5);
        assert_eq!(run(&store, 0, &["RPUSH", "list", "after"]), Reply::Int(3));
        let now0 = contents(&store, 0);

        let killed = fs.deep_clone();
        drop(store);
        let db = Db::open("/db", Options { fs: Arc::new(killed), ..Options::default() }).expect("reopen");
        let store = Store::start(db, Appendfsync::Always);
        assert_eq!(contents(&store, 5), was0);
        assert_eq!(contents(&store, 0), now0);
        assert_eq!(read(&store, 0, &["LINDEX", "list", "-1"]), Reply::Bulk(Bytes::from("after")));
        // Swapping back restores both, and new collections still get fresh versions.
        assert_eq!(run(&store, 0, &["SWAPDB", "5", "0"]), Reply::Ok);
        assert_eq!(contents(&store, 0), was0);
        assert_eq!(run(&store, 0, &["SADD", "fresh", "m"]), Reply::Int(1));
        assert_eq!(read(&store, 5, &["SMEMBERS", "set"]), was5[4]);
        store.shutdown();
    }

    #[test]
    fn swapdb_errors_watch_and_blocked_clients() {
        let (srv, _dir) = start_server();
        let c = &mut connect(&srv);
        assert_eq!(e(c, &["SWAPDB", "x", "1"]), "ERR invalid first DB index");
        assert_eq!(e(c, &["SWAPDB", "1", "2147483648"]), "ERR invalid second DB index");
        assert_eq!(e(c, &["SWAPDB", "0", "16"]), "ERR DB index is out of range");
        assert_eq!(e(c, &["SWAPDB", "-1", "0"]), "ERR DB index is out of range");
        assert_eq!(e(c, &["SWAPDB", "0"]), "ERR wrong number of arguments for 'swapdb' command");
        q::<()>(c, &["SET", "k", "v"]);
        assert_eq!(s(c, &["SWAPDB", "0", "0"]).as_deref(), Some("OK"));
        assert_eq!(s(c, &["GET", "k"]).as_deref(), Some("v"));

        // A watched key that exists in either database is touched; one missing from both is not.
        let exec_runs = |c: &mut redis::Connection| -> bool {
            q::<()>(c, &["MULTI"]);
            q::<()>(c, &["PING"]);
            !matches!(q::<Value>(c, &["EXEC"]), Value::Nil)
        };
        q::<()>(c, &["WATCH", "k"]);
        assert_eq!(s(c, &["SWAPDB", "0", "1"]).as_deref(), Some("OK"));
        assert!(!exec_runs(c), "k left database 0");
        assert_eq!(s(c, &["GET", "k"]), None);
        q::<()>(c, &["WATCH", "k"]);
        assert_eq!(s(c, &["SWAPDB", "0", "1"]).as_deref(), Some("OK"));
        assert!(!exec_runs(c), "k came back to database 0");
        q::<()>(c, &["WATCH", "nowhere"]);
        assert_eq!(s(c, &["SWAPDB", "0", "1"]).as_deref(), Some("OK"));
        assert!(exec_runs(c), "a key missing from both databases did not change");
        // A stale key replaced by nothing is no change either.
        q::<()>(c, &["SELECT", "2"]);
        q::<()>(c, &["SET", "stale", "x", "PX", "1"]);
        std::thread::sleep(Duration::from_millis(5));
        q::<()>(c, &["WATCH", "stale"]);
        assert_eq!(s(c, &["SWAPDB", "2", "3"]).as_deref(), Some("OK"));
        assert!(exec_runs(c), "an expired key replaced by nothing");
        assert_eq!(i(c, &["DBSIZE"]), 0);
        q::<()>(c, &["SELECT", "3"]);
        assert_eq!(i(c, &["DBSIZE"]), 0, "the expired key was not carried over");

        // A client blocked on a key of database 9 is served when SWAPDB brings a list there.
        q::<()>(c, &["SELECT", "1"]);
        q::<()>(c, &["RPUSH", "bk", "hello"]);
        let mut blocked = Client::connect(srv.addr());
        assert_eq!(blocked.cmd(&["SELECT", "9"]), Resp::Simple("OK".into()));
        blocked.send(&["BRPOP", "bk", "10"]);
        std::thread::sleep(Duration::from_millis(200));
        assert_eq!(s(c, &["SWAPDB", "1", "9"]).as_deref(), Some("OK"));
        assert_eq!(blocked.read(), Some(Resp::Array(vec![Resp::Bulk(b"bk".to_vec()), Resp::Bulk(b"hello".to_vec())])));
        q::<()>(c, &["SELECT", "9"]);
        assert_eq!(i(c, &["EXISTS", "bk"]), 0, "the element was popped");
    }

    /// COPY, MOVE and RENAME carry a stream's consumer groups (their pending entries and consumers) along;
    /// a copy is independent of its source.
    #[test]
    fn copy_move_rename_keep_consumer_groups() {
        let (srv, _dir) = start_server();
        let c = &mut connect(&srv);
        for id in ["1-1", "1-2", "1-3"] {
            q::<()>(c, &["XADD", "x", id, "f", "v"]);
        }
        q::<()>(c, &["XGROUP", "CREATE", "x", "g", "0"]);
        q::<()>(c, &["XREADGROUP", "GROUP", "g", "alice", "COUNT", "2", "STREAMS", "x", ">"]);
        let groups: Value = q(c, &["XINFO", "GROUPS", "x"]);
        let pending: Value = q(c, &["XPENDING", "x", "g"]);
        assert_eq!(i(c, &["COPY", "x", "y"]), 1);
        assert_eq!(q::<Value>(c, &["XINFO", "GROUPS", "y"]), groups);
        assert_eq!(q::<Value>(c, &["XPENDING", "y", "g"]), pending);
        // Independent: acking in the copy leaves the source's PEL.
        assert_eq!(i(c, &["XACK", "y", "g", "1-1"]), 1);
        assert_eq!(q::<Value>(c, &["XPENDING", "x", "g"]), pending);
        assert_eq!(i(c, &["COPY", "x", "x", "DB", "4"]), 1);
        assert_eq!(i(c, &["MOVE", "y", "7"]), 1);
        assert_eq!(s(c, &["RENAME", "x", "z"]).as_deref(), Some("OK"));
        assert_eq!(q::<Value>(c, &["XINFO", "GROUPS", "z"]), groups);
        q::<()>(c, &["SELECT", "4"]);
        assert_eq!(q::<Value>(c, &["XPENDING", "x", "g"]), pending);
        q::<()>(c, &["SELECT", "7"]);
        let moved: Value = q(c, &["XPENDING", "y", "g"]);
        assert_ne!(moved, pending, "the copy's ack moved with it");
        assert_eq!(i(c, &["XLEN", "y"]), 3);
    }

    /// RESET and OBJECT answer as Redis 7.0 does; commands check the key's type before their other
    /// arguments where Redis does (XDEL, the sorted-set algebra).
    #[test]
    fn reset_object_and_type_before_arguments() {
        let (srv, _dir) = start_server();
        let c = &mut connect(&srv);
        q::<()>(c, &["CLIENT", "SETNAME", "me"]);
        q::<()>(c, &["CLIENT", "NO-EVICT", "on"]);
        q::<()>(c, &["SELECT", "3"]);
        q::<()>(c, &["SET", "w", "1"]);
        q::<()>(c, &["WATCH", "w"]);
        q::<()>(c, &["MULTI"]);
        q::<()>(c, &["SET", "queued", "x"]);
        assert_eq!(s(c, &["RESET"]).as_deref(), Some("RESET"));
        assert_eq!(e(c, &["EXEC"]), "ERR EXEC without MULTI");
        assert_eq!(s(c, &["CLIENT", "GETNAME"]), None);
        let info = s(c, &["CLIENT", "INFO"]).unwrap();
        assert!(info.contains(" db=0 ") && info.contains(" flags=e "), "{info}");
        assert_eq!(i(c, &["EXISTS", "w"]), 0, "back in database 0");
        q::<()>(c, &["SELECT", "3"]);
        assert_eq!(i(c, &["EXISTS", "queued"]), 0, "the transaction was discarded");
        // WATCH is gone: a later transaction runs whatever happens to w.
        q::<()>(c, &["SET", "w", "2"]);
        q::<()>(c, &["MULTI"]);
        q::<()>(c, &["PING"]);
        assert_eq!(q::<Vec<String>>(c, &["EXEC"]), ["PONG"]);

        q::<()>(c, &["SET", "n", "12345"]);
        q::<()>(c, &["RPUSH", "l", "a"]);
        assert_eq!(s(c, &["OBJECT", "ENCODING", "n"]).as_deref(), Some("int"));
        assert_eq!(s(c, &["OBJECT", "ENCODING", "l"]).as_deref(), Some("quicklist"));
        assert_eq!(s(c, &["OBJECT", "ENCODING", "missing"]), None);
        assert_eq!(i(c, &["OBJECT", "REFCOUNT", "l"]), 1);
        assert_eq!(
            e(c, &["OBJECT", "FREQ", "l"]),
            "ERR An LFU maxmemory policy is not selected, access frequency not tracked. Please note that when \
             switching between policies at runtime LRU and LFU data will take some time to adjust."
        );
        assert_eq!(e(c, &["OBJECT", "NOPE", "l"]), "ERR unknown subcommand 'NOPE'. Try OBJECT HELP.");
        assert_eq!(e(c, &["OBJECT", "REFCOUNT"]), "ERR wrong number of arguments for 'object|refcount' command");
        let help: Vec<String> = q(c, &["OBJECT", "HELP"]);
        assert_eq!(help[0], "OBJECT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:");

        const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";
        assert_eq!(e(c, &["XDEL", "n", "5-*", "0-1"]), WRONGTYPE);
        assert_eq!(i(c, &["XDEL", "nostream", "5-*"]), 0);
        q::<()>(c, &["XADD", "x", "1-1", "f", "v"]);
        assert_eq!(e(c, &["XDEL", "x", "5-*"]), "ERR Invalid stream ID specified as stream command argument");
        assert_eq!(e(c, &["ZINTERSTORE", "d", "1", "n", "WEIGHTS", "x"]), WRONGTYPE);
        assert_eq!(e(c, &["ZUNIONSTORE", "d", "2", "missing", "l", "AGGREGATE", "foo"]), WRONGTYPE);
        assert_eq!(e(c, &["ZUNION", "1", "n", "AGGREGATE", "foo"]), WRONGTYPE);
        assert_eq!(e(c, &["ZINTERSTORE", "d", "1", "missing", "WEIGHTS", "x"]), "ERR weight value is not a float");
        assert_eq!(e(c, &["ZUNION", "1", "missing", "AGGREGATE", "foo"]), "ERR syntax error");
    }
}
