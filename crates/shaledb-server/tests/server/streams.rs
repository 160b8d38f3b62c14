//! Stream commands (XADD ... XINFO STREAM, XREAD BLOCK) against a running server.

use crate::helpers::{connect, e, i, q, s, start_everysec as start_server};
use redis::{FromRedisValue, Value};
use std::time::{Duration, Instant};

type Entry = (String, Vec<String>);

fn ids(entries: &[Entry]) -> Vec<&str> {
    entries.iter().map(|(id, _)| id.as_str()).collect()
}

#[test]
fn xadd_ids_and_errors() {
    let (srv, _dir) = start_server();
    let c = &mut connect(&srv);
    assert_eq!(s(c, &["XADD", "s", "1-1", "a", "1"]).as_deref(), Some("1-1"));
    assert_eq!(s(c, &["XADD", "s", "1-*", "b", "2"]).as_deref(), Some("1-2"));
    assert_eq!(s(c, &["XADD", "s", "5", "c", "3"]).as_deref(), Some("5-0"));
    assert_eq!(s(c, &["XADD", "s", "7-*", "c", "3"]).as_deref(), Some("7-0"));
    let auto = s(c, &["XADD", "s", "*", "d", "4"]).unwrap();
    let ms: u64 = auto.split('-').next().unwrap().parse().unwrap();
    assert!(ms > 1_600_000_000_000, "{auto}");
    let smaller = "ERR The ID specified in XADD is equal or smaller than the target stream top item";
    assert_eq!(e(c, &["XADD", "s", "7-1", "x", "y"]), smaller);
    assert_eq!(e(c, &["XADD", "s", "3-*", "x", "y"]), smaller);
    assert_eq!(e(c, &["XADD", "n", "0-0", "x", "y"]), "ERR The ID specified in XADD must be greater than 0-0");
    assert_eq!(e(c, &["XADD", "n", "5-x", "x", "y"]), "ERR Invalid stream ID specified as stream command argument");
    assert_eq!(e(c, &["XADD", "n", "*", "x"]), "ERR wrong number of arguments for 'xadd' command");
    assert_eq!(
        e(c, &["XADD", "n", "MAXLEN", "1", "LIMIT", "5", "*", "x", "y"]),
        "ERR syntax error, LIMIT cannot be used without the special ~ option"
    );
    assert_eq!(e(c, &["XADD", "n", "MAXLEN", "-1", "*", "x", "y"]), "ERR The MAXLEN argument must be >= 0.");
    assert_eq!(q::<Value>(c, &["XADD", "n", "NOMKSTREAM", "*", "x", "y"]), Value::Nil);
    assert_eq!(i(c, &["EXISTS", "n"]), 0);
    assert_eq!(i(c, &["XLEN", "s"]), 5);
    assert_eq!(s(c, &["TYPE", "s"]).as_deref(), Some("stream"));
    let max = "18446744073709551615-18446744073709551615";
    assert_eq!(s(c, &["XADD", "m", max, "a", "b"]).as_deref(), Some(max));
    assert_eq!(
        e(c, &["XADD", "m", "*", "a", "b"]),
        "ERR The stream has exhausted the last possible ID, unable to add more items"
    );
    q::<()>(c, &["SET", "str", "x"]);
    let wt = "WRONGTYPE Operation against a key holding the wrong kind of value";
    assert_eq!(e(c, &["XADD", "str", "*", "a", "b"]), wt);
    assert_eq!(e(c, &["XRANGE", "str", "-", "+"]), wt);
    assert_eq!(e(c, &["XREAD", "STREAMS", "str", "0"]), wt);
    assert_eq!(e(c, &["XLEN", "str"]), wt);
}

#[test]
fn ranges_del_and_info() {
    let (srv, _dir) = start_server();
    let c = &mut connect(&srv);
    for n in 1..=5 {
        q::<String>(c, &["XADD", "s", &format!("{n}-1"), "f", &n.to_string(), "g", "x"]);
    }
    let all: Vec<Entry> = q(c, &["XRANGE", "s", "-", "+"]);
    assert_eq!(ids(&all), ["1-1", "2-1", "3-1", "4-1", "5-1"]);
    assert_eq!(all[0].1, ["f", "1", "g", "x"]);
    let r: Vec<Entry> = q(c, &["XRANGE", "s", "(2-1", "4", "COUNT", "5"]);
    assert_eq!(ids(&r), ["3-1", "4-1"]);
    let r: Vec<Entry> = q(c, &["XREVRANGE", "s", "+", "-", "COUNT", "2"]);
    assert_eq!(ids(&r), ["5-1", "4-1"]);
    let r: Vec<Entry> = q(c, &["XREVRANGE", "s", "(5-1", "(1-1"]);
    assert_eq!(ids(&r), ["4-1", "3-1", "2-1"]);
    assert_eq!(q::<Value>(c, &["XRANGE", "s", "-", "+", "COUNT", "0"]), Value::Nil);
    assert!(q::<Vec<Entry>>(c, &["XRANGE", "s", "4", "2"]).is_empty());
    assert!(q::<Vec<Entry>>(c, &["XRANGE", "missing", "-", "+"]).is_empty());
    assert_eq!(e(c, &["XRANGE", "s", "-", "(0-0"]), "ERR invalid end ID for the interval");
    assert_eq!(e(c, &["XRANGE", "s", "-", "+", "LIMIT", "1"]), "ERR syntax error");
    assert_eq!(i(c, &["XDEL", "s", "2-1", "9-9", "4-1"]), 2);
    assert_eq!(i(c, &["XDEL", "missing", "1-1"]), 0);
    assert_eq!(e(c, &["XDEL", "s", "zz"]), "ERR Invalid stream ID specified as stream command argument");
    assert_eq!(i(c, &["XLEN", "s"]), 3);
    let info: Vec<Value> = q(c, &["XINFO", "STREAM", "s"]);
    let field = |name: &str| {
        let at = info.iter().position(|v| String::from_redis_value(v).ok().as_deref() == Some(name)).unwrap();
        info[at + 1].clone()
    };
    assert_eq!(field("length"), Value::Int(3));
    assert_eq!(String::from_redis_value(&field("last-generated-id")).unwrap(), "5-1");
    assert_eq!(String::from_redis_value(&field("max-deleted-entry-id")).unwrap(), "4-1");
    assert_eq!(field("entries-added"), Value::Int(5));
    assert_eq!(String::from_redis_value(&field("recorded-first-entry-id")).unwrap(), "1-1");
    assert_eq!(field("groups"), Value::Int(0));
    let first: Entry = FromRedisValue::from_redis_value(&field("first-entry")).unwrap();
    assert_eq!(first.0, "1-1");
    let last: Entry = FromRedisValue::from_redis_value(&field("last-entry")).unwrap();
    assert_eq!(last, ("5-1".to_string(), vec!["f".into(), "5".into(), "g".into(), "x".into()]));
    assert_eq!(e(c, &["XINFO", "STREAM", "missing"]), "ERR no such key");
    // Emptied by XDEL: the stream stays, as in Redis.
    assert_eq!(i(c, &["XDEL", "s", "1-1", "3-1", "5-1"]), 3);
    assert_eq!(i(c, &["EXISTS", "s"]), 1);
    assert_eq!(i(c, &["XLEN", "s"]), 0);
    assert_eq!(e(c, &["XADD", "s", "5-1", "a", "b"]).split_whitespace().last(), Some("item"));
    assert!(e(c, &["XGROUP", "CREATE", "s", "g", "0"]).contains("not supported"));
    assert!(e(c, &["XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", ">"]).contains("not supported"));
    assert!(e(c, &["XINFO", "GROUPS", "s"]).contains("not supported"));
}

#[test]
fn trimming_exact_and_approximate() {
    let (srv, _dir) = start_server();
    let c = &mut connect(&srv);
    for n in 1..=250 {
        q::<String>(c, &["XADD", "s", &format!("{n}-1"), "f", "v"]);
    }
    // Redis removes whole nodes of 100 entries with `~`.
    assert_eq!(i(c, &["XTRIM", "s", "MAXLEN", "~", "120"]), 100);
    assert_eq!(i(c, &["XTRIM", "s", "MINID", "~", "200"]), 0);
    assert_eq!(i(c, &["XTRIM", "s", "MAXLEN", "~", "0", "LIMIT", "10"]), 0);
    assert_eq!(i(c, &["XLEN", "s"]), 150);
    assert_eq!(i(c, &["XTRIM", "s", "MAXLEN", "10"]), 140);
    let r: Vec<Entry> = q(c, &["XRANGE", "s", "-", "+", "COUNT", "1"]);
    assert_eq!(ids(&r), ["241-1"]);
    assert_eq!(i(c, &["XTRIM", "s", "MINID", "245"]), 4);
    assert_eq!(i(c, &["XTRIM", "s", "MINID", "=", "245"]), 0);
    assert_eq!(s(c, &["XADD", "s", "MAXLEN", "=", "3", "300-1", "f", "v"]).as_deref(), Some("300-1"));
    let r: Vec<Entry> = q(c, &["XRANGE", "s", "-", "+"]);
    assert_eq!(ids(&r), ["249-1", "250-1", "300-1"]);
    assert_eq!(s(c, &["XADD", "s", "MINID", "300", "301-1", "f", "v"]).as_deref(), Some("301-1"));
    assert_eq!(i(c, &["XLEN", "s"]), 2);
    assert_eq!(i(c, &["XTRIM", "missing", "MAXLEN", "0"]), 0);
    assert_eq!(e(c, &["XTRIM", "s", "MAXLEN", "0", "~"]), "ERR syntax error");
    assert_eq!(e(c, &["XTRIM", "s", "SIZE", "0"]), "ERR syntax error");
}

#[test]
fn xread_and_block() {
    let (srv, _dir) = start_server();
    let c = &mut connect(&srv);
    q::<String>(c, &["XADD", "a", "1-1", "f", "1"]);
    q::<String>(c, &["XADD", "a", "2-1", "f", "2"]);
    q::<String>(c, &["XADD", "b", "1-1", "g", "1"]);
    let r: Vec<(String, Vec<Entry>)> = q(c, &["XREAD", "COUNT", "1", "STREAMS", "a", "b", "1-1", "0"]);
    assert_eq!(r.len(), 2);
    assert_eq!((r[0].0.as_str(), ids(&r[0].1)), ("a", vec!["2-1"]));
    assert_eq!((r[1].0.as_str(), ids(&r[1].1)), ("b", vec!["1-1"]));
    assert_eq!(q::<Value>(c, &["XREAD", "STREAMS", "a", "$"]), Value::Nil);
    assert_eq!(q::<Value>(c, &["XREAD", "STREAMS", "missing", "0"]), Value::Nil);
    let unbalanced = "ERR Unbalanced XREAD list of streams: for each stream key an ID or '$' must be specified.";
    assert_eq!(e(c, &["XREAD", "STREAMS", "a", "b", "0"]), unbalanced);
    assert_eq!(e(c, &["XREAD", "BLOCK", "-1", "STREAMS", "a", "0"]), "ERR timeout is negative");
    assert_eq!(e(c, &["XREAD", "BLOCK", "x", "STREAMS", "a", "0"]), "ERR timeout is not an integer or out of range");
    // Timeout.
    let t0 = Instant::now();
    assert_eq!(q::<Value>(c, &["XREAD", "BLOCK", "150", "STREAMS", "a", "$"]), Value::Nil);
    assert!(t0.elapsed() >= Duration::from_millis(140));
    // Woken by an XADD of another connection; `$` means entries after the block began.
    let reg = srv.shared().store.blocking.clone();
    let mut w1 = connect(&srv);
    let mut w2 = connect(&srv);
    let h1 = std::thread::spawn(move || q::<Value>(&mut w1, &["XREAD", "BLOCK", "5000", "STREAMS", "a", "$"]));
    let h2 = std::thread::spawn(move || q::<Value>(&mut w2, &["XREAD", "BLOCK", "0", "STREAMS", "zz", "a", "$", "$"]));
    let deadline = Instant::now() + Duration::from_secs(5);
    while reg.blocked_clients() < 2 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(reg.blocked_clients(), 2);
    q::<String>(c, &["XADD", "a", "3-1", "f", "3"]);
    for h in [h1, h2] {
        let r: Vec<(String, Vec<Entry>)> = FromRedisValue::from_redis_value(&h.join().unwrap()).unwrap();
        assert_eq!(r.len(), 1);
        assert_eq!((r[0].0.as_str(), ids(&r[0].1)), ("a", vec!["3-1"]), "both readers get the entry");
    }
    assert_eq!((reg.blocked_clients(), reg.watched_keys()), (0, 0));
    // Inside MULTI, XREAD BLOCK does not block.
    let r: Value =
        redis::pipe().atomic().cmd("XREAD").arg("BLOCK").arg(0).arg("STREAMS").arg("a").arg("$").query(c).unwrap();
    assert_eq!(r, Value::Array(vec![Value::Nil]));
}

#[test]
fn streams_expire() {
    let (srv, _dir) = start_server();
    let c = &mut connect(&srv);
    q::<String>(c, &["XADD", "s", "1-1", "f", "1"]);
    assert_eq!(i(c, &["PEXPIRE", "s", "50"]), 1);
    std::thread::sleep(Duration::from_millis(120));
    assert_eq!(i(c, &["XLEN", "s"]), 0);
    assert_eq!(i(c, &["EXISTS", "s"]), 0);
    assert_eq!(s(c, &["XADD", "s", "1-1", "f", "1"]).as_deref(), Some("1-1"), "a new stream: ids start over");
}
