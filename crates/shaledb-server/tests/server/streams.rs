//! Stream commands (XADD ... XINFO STREAM, XREAD BLOCK) and consumer groups (XGROUP, XREADGROUP with BLOCK,
//! XACK, XPENDING, XCLAIM, XAUTOCLAIM, XINFO GROUPS/CONSUMERS/STREAM FULL) against a running server.

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
    assert_eq!(q::<String>(c, &["XGROUP", "CREATE", "s", "g", "0"]), "OK");
    assert_eq!(field_of(&q::<Vec<Value>>(c, &["XINFO", "STREAM", "s"]), "groups"), Value::Int(1));
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

/// The value after `name` in a flat field/value reply (XINFO's maps in RESP2).
fn field_of(reply: &[Value], name: &str) -> Value {
    let at = reply
        .iter()
        .position(|v| String::from_redis_value(v).ok().as_deref() == Some(name))
        .unwrap_or_else(|| panic!("no field {name} in {reply:?}"));
    reply[at + 1].clone()
}

fn id_list(v: &Value) -> Vec<String> {
    let rows: Vec<Value> = FromRedisValue::from_redis_value(v).unwrap();
    rows.iter()
        .map(|r| match r {
            Value::Array(x) => String::from_redis_value(&x[0]).unwrap(),
            other => String::from_redis_value(other).unwrap(),
        })
        .collect()
}

/// Waits until `n` clients are blocked on the server.
fn wait_blocked(srv: &shaledb_server::RunningServer, n: usize) {
    let reg = srv.shared().store.blocking.clone();
    let deadline = Instant::now() + Duration::from_secs(5);
    while reg.blocked_clients() != n && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(reg.blocked_clients(), n);
}

#[test]
fn consumer_groups_read_ack_and_pending() {
    let (srv, _dir) = start_server();
    let c = &mut connect(&srv);
    for n in 1..=4 {
        q::<String>(c, &["XADD", "s", &format!("{n}-0"), "f", &n.to_string()]);
    }
    assert_eq!(q::<String>(c, &["XGROUP", "CREATE", "s", "g", "0"]), "OK");
    assert_eq!(e(c, &["XGROUP", "CREATE", "s", "g", "0"]), "BUSYGROUP Consumer Group name already exists");
    assert!(
        e(c, &["XGROUP", "CREATE", "nos", "g", "$"]).starts_with("ERR The XGROUP subcommand requires the key to exist")
    );
    assert_eq!(q::<String>(c, &["XGROUP", "CREATE", "made", "g", "$", "MKSTREAM"]), "OK");
    assert_eq!(i(c, &["XLEN", "made"]), 0);
    assert_eq!(e(c, &["XGROUP", "SETID", "s", "nog", "0"]), "NOGROUP No such consumer group 'nog' for key name 's'");
    assert_eq!(
        e(c, &["XGROUP", "CREATE", "s", "g3", "0", "ENTRIESREAD", "-5"]),
        "ERR value for ENTRIESREAD must be positive or -1"
    );
    assert_eq!(
        e(c, &["XREADGROUP", "GROUP", "nog", "c", "STREAMS", "s", ">"]),
        "NOGROUP No such key 's' or consumer group 'nog' in XREADGROUP with GROUP option"
    );
    assert!(e(c, &["XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", "$"]).starts_with("ERR The $ ID is meaningless"));
    assert_eq!(
        e(c, &["XREADGROUP", "COUNT", "1", "NOACK", "STREAMS", "s", ">"]),
        "ERR Missing GROUP option for XREADGROUP"
    );
    assert_eq!(
        e(c, &["XREAD", "GROUP", "g", "c", "STREAMS", "s", ">"]),
        "ERR The GROUP option is only supported by XREADGROUP. You called XREAD instead."
    );
    // `>` delivers new entries and records them as pending for the reader.
    let r: Vec<(String, Vec<Entry>)> = q(c, &["XREADGROUP", "GROUP", "g", "alice", "COUNT", "2", "STREAMS", "s", ">"]);
    assert_eq!(ids(&r[0].1), ["1-0", "2-0"]);
    let r: Vec<(String, Vec<Entry>)> = q(c, &["XREADGROUP", "GROUP", "g", "bob", "STREAMS", "s", ">"]);
    assert_eq!(ids(&r[0].1), ["3-0", "4-0"]);
    assert_eq!(q::<Value>(c, &["XREADGROUP", "GROUP", "g", "bob", "STREAMS", "s", ">"]), Value::Nil);
    // An id reads the consumer's own history.
    let r: Vec<(String, Vec<Entry>)> = q(c, &["XREADGROUP", "GROUP", "g", "alice", "STREAMS", "s", "0"]);
    assert_eq!(ids(&r[0].1), ["1-0", "2-0"]);
    let summary: Vec<Value> = q(c, &["XPENDING", "s", "g"]);
    assert_eq!(summary[0], Value::Int(4));
    assert_eq!(String::from_redis_value(&summary[1]).unwrap(), "1-0");
    assert_eq!(String::from_redis_value(&summary[2]).unwrap(), "4-0");
    let per: Vec<(String, String)> = FromRedisValue::from_redis_value(&summary[3]).unwrap();
    assert_eq!(per, [("alice".to_string(), "2".to_string()), ("bob".to_string(), "2".to_string())]);
    let rows: Vec<(String, String, i64, i64)> = q(c, &["XPENDING", "s", "g", "-", "+", "10", "alice"]);
    assert_eq!(
        rows.iter().map(|r| (r.0.as_str(), r.1.as_str(), r.3)).collect::<Vec<_>>(),
        [("1-0", "alice", 2), ("2-0", "alice", 2)]
    );
    let rows: Vec<(String, String, i64, i64)> = q(c, &["XPENDING", "s", "g", "(1-0", "+", "2"]);
    assert_eq!(rows.iter().map(|r| r.0.as_str()).collect::<Vec<_>>(), ["2-0", "3-0"]);
    assert_eq!(q::<Vec<Value>>(c, &["XPENDING", "s", "g", "IDLE", "99999999", "-", "+", "10"]), vec![]);
    assert_eq!(e(c, &["XPENDING", "s", "nog"]), "NOGROUP No such key 's' or consumer group 'nog'");
    // XACK: the key and group first (a missing one is 0), then every id, then the acknowledgements.
    assert_eq!(i(c, &["XACK", "s", "nog", "1-0", "bad"]), 0);
    assert_eq!(e(c, &["XACK", "s", "g", "1-0", "bad"]), "ERR Invalid stream ID specified as stream command argument");
    assert_eq!(i(c, &["XACK", "s", "g", "1-0", "3-0", "9-0"]), 2);
    assert_eq!(i(c, &["XACK", "s", "g", "1-0"]), 0);
    let rows: Vec<(String, String, i64, i64)> = q(c, &["XPENDING", "s", "g", "-", "+", "10"]);
    assert_eq!(rows.iter().map(|r| r.0.as_str()).collect::<Vec<_>>(), ["2-0", "4-0"]);
    // A deleted entry shows in the history as an id without fields.
    assert_eq!(i(c, &["XDEL", "s", "2-0"]), 1);
    let r: Value = q(c, &["XREADGROUP", "GROUP", "g", "alice", "STREAMS", "s", "0"]);
    let Value::Array(streams) = r else { panic!("{r:?}") };
    let Value::Array(pair) = &streams[0] else { panic!() };
    assert_eq!(pair[1], Value::Array(vec![Value::Array(vec![Value::BulkString(b"2-0".to_vec()), Value::Nil])]));
    // NOACK delivers without recording.
    q::<String>(c, &["XADD", "s", "5-0", "f", "5"]);
    let r: Vec<(String, Vec<Entry>)> = q(c, &["XREADGROUP", "GROUP", "g", "carol", "NOACK", "STREAMS", "s", ">"]);
    assert_eq!(ids(&r[0].1), ["5-0"]);
    assert_eq!(q::<Vec<Value>>(c, &["XPENDING", "s", "g", "-", "+", "10", "carol"]), vec![]);
    // DELCONSUMER drops the consumer's pending entries; SETID moves the group back.
    assert_eq!(i(c, &["XGROUP", "DELCONSUMER", "s", "g", "bob"]), 1);
    assert_eq!(i(c, &["XGROUP", "DELCONSUMER", "s", "g", "bob"]), 0);
    assert_eq!(i(c, &["XGROUP", "CREATECONSUMER", "s", "g", "dave"]), 1);
    assert_eq!(i(c, &["XGROUP", "CREATECONSUMER", "s", "g", "dave"]), 0);
    assert_eq!(q::<String>(c, &["XGROUP", "SETID", "s", "g", "-"]), "OK");
    let r: Vec<(String, Vec<Entry>)> = q(c, &["XREADGROUP", "GROUP", "g", "dave", "STREAMS", "s", ">"]);
    assert_eq!(ids(&r[0].1), ["1-0", "3-0", "4-0", "5-0"]);
    assert_eq!(i(c, &["XGROUP", "DESTROY", "s", "g"]), 1);
    assert_eq!(i(c, &["XGROUP", "DESTROY", "s", "g"]), 0);
    assert_eq!(q::<Vec<Value>>(c, &["XINFO", "GROUPS", "s"]), vec![]);
    q::<String>(c, &["SET", "str", "x"]);
    let wt = "WRONGTYPE Operation against a key holding the wrong kind of value";
    assert_eq!(e(c, &["XREADGROUP", "GROUP", "g", "c", "STREAMS", "str", ">"]), wt);
    assert_eq!(e(c, &["XGROUP", "CREATE", "str", "g", "0"]), wt);
    assert_eq!(e(c, &["XACK", "str", "g", "1-0"]), wt);
    assert_eq!(e(c, &["XPENDING", "str", "g"]), wt);
}

#[test]
fn claims_and_autoclaim() {
    let (srv, _dir) = start_server();
    let c = &mut connect(&srv);
    for n in 1..=5 {
        q::<String>(c, &["XADD", "s", &format!("{n}-0"), "f", &n.to_string()]);
    }
    q::<String>(c, &["XGROUP", "CREATE", "s", "g", "0"]);
    q::<Value>(c, &["XREADGROUP", "GROUP", "g", "alice", "COUNT", "4", "STREAMS", "s", ">"]);
    std::thread::sleep(Duration::from_millis(30));
    // Not idle enough: nothing moves.
    assert_eq!(q::<Vec<Value>>(c, &["XCLAIM", "s", "g", "bob", "60000", "1-0"]), vec![]);
    let got: Vec<Entry> = q(c, &["XCLAIM", "s", "g", "bob", "10", "1-0", "2-0", "9-0"]);
    assert_eq!(ids(&got), ["1-0", "2-0"]);
    let rows: Vec<(String, String, i64, i64)> = q(c, &["XPENDING", "s", "g", "-", "+", "10", "bob"]);
    assert_eq!(rows.iter().map(|r| (r.0.as_str(), r.3)).collect::<Vec<_>>(), [("1-0", 2), ("2-0", 2)]);
    // JUSTID leaves the delivery count; RETRYCOUNT sets it; TIME sets the delivery time; FORCE creates.
    let got: Vec<String> =
        q(c, &["XCLAIM", "s", "g", "carol", "0", "1-0", "5-0", "FORCE", "JUSTID", "RETRYCOUNT", "7", "TIME", "1000"]);
    assert_eq!(got, ["1-0", "5-0"]);
    let rows: Vec<(String, String, i64, i64)> = q(c, &["XPENDING", "s", "g", "-", "+", "10", "carol"]);
    assert_eq!(rows.iter().map(|r| (r.0.as_str(), r.3)).collect::<Vec<_>>(), [("1-0", 7), ("5-0", 7)]);
    assert!(rows[0].2 > 1_000_000, "delivered at t=1000 ms: idle since then");
    assert_eq!(q::<Vec<Value>>(c, &["XPENDING", "s", "g", "-", "+", "10", "bob"]).len(), 1);
    assert_eq!(e(c, &["XCLAIM", "s", "g", "bob", "0", "1-0", "FOO"]), "ERR Unrecognized XCLAIM option 'FOO'");
    assert_eq!(e(c, &["XCLAIM", "s", "g", "bob", "x", "1-0"]), "ERR Invalid min-idle-time argument for XCLAIM");
    assert_eq!(
        e(c, &["XCLAIM", "s", "g", "bob", "0", "1-0", "IDLE", "x"]),
        "ERR Invalid IDLE option argument for XCLAIM"
    );
    assert_eq!(e(c, &["XCLAIM", "s", "nog", "bob", "0", "1-0"]), "NOGROUP No such key 's' or consumer group 'nog'");
    // LASTID moves the group's last id forward only.
    q::<Value>(c, &["XCLAIM", "s", "g", "bob", "0", "2-0", "LASTID", "9-0"]);
    let groups: Vec<Vec<Value>> = q(c, &["XINFO", "GROUPS", "s"]);
    assert_eq!(String::from_redis_value(&field_of(&groups[0], "last-delivered-id")).unwrap(), "9-0");
    // XAUTOCLAIM: a deleted entry leaves the PEL and is named in the third element.
    assert_eq!(i(c, &["XDEL", "s", "1-0"]), 1);
    let r: Vec<Value> = q(c, &["XAUTOCLAIM", "s", "g", "dave", "0", "0", "COUNT", "2"]);
    assert_eq!(String::from_redis_value(&r[0]).unwrap(), "3-0", "where to continue");
    assert_eq!(id_list(&r[1]), ["2-0"]);
    assert_eq!(id_list(&r[2]), ["1-0"]);
    let r: Vec<Value> = q(c, &["XAUTOCLAIM", "s", "g", "dave", "0", "3-0", "JUSTID"]);
    assert_eq!(String::from_redis_value(&r[0]).unwrap(), "0-0", "the end");
    assert_eq!(id_list(&r[1]), ["3-0", "4-0", "5-0"]);
    assert_eq!(r[2], Value::Array(vec![]));
    assert_eq!(e(c, &["XAUTOCLAIM", "s", "g", "dave", "0", "0", "COUNT", "0"]), "ERR COUNT must be > 0");
    assert_eq!(e(c, &["XAUTOCLAIM", "s", "g", "dave", "0", "0", "FOO"]), "ERR syntax error");
    let consumers: Vec<Vec<Value>> = q(c, &["XINFO", "CONSUMERS", "s", "g"]);
    let names: Vec<String> =
        consumers.iter().map(|m| String::from_redis_value(&field_of(m, "name")).unwrap()).collect();
    assert_eq!(names, ["alice", "bob", "carol", "dave"]);
    assert_eq!(field_of(&consumers[3], "pending"), Value::Int(4));
}

#[test]
fn xinfo_lag_xsetid_and_check_order() {
    let (srv, _dir) = start_server();
    let c = &mut connect(&srv);
    for n in 1..=5 {
        q::<String>(c, &["XADD", "x", &format!("{n}-0"), "data", &n.to_string()]);
    }
    q::<String>(c, &["XGROUP", "CREATE", "x", "g1", "0"]);
    let group = |c: &mut redis::Connection| -> Vec<Value> {
        let full: Vec<Value> = q(c, &["XINFO", "STREAM", "x", "FULL"]);
        let groups: Vec<Vec<Value>> = FromRedisValue::from_redis_value(&field_of(&full, "groups")).unwrap();
        groups[0].clone()
    };
    assert_eq!((field_of(&group(c), "entries-read"), field_of(&group(c), "lag")), (Value::Nil, Value::Int(5)));
    q::<Value>(c, &["XREADGROUP", "GROUP", "g1", "c1", "COUNT", "1", "STREAMS", "x", ">"]);
    assert_eq!((field_of(&group(c), "entries-read"), field_of(&group(c), "lag")), (Value::Int(1), Value::Int(4)));
    q::<Value>(c, &["XREADGROUP", "GROUP", "g1", "c1", "STREAMS", "x", ">"]);
    q::<String>(c, &["XADD", "x", "6-0", "data", "6"]);
    assert_eq!((field_of(&group(c), "entries-read"), field_of(&group(c), "lag")), (Value::Int(5), Value::Int(1)));
    let g = group(c);
    assert_eq!(field_of(&g, "pel-count"), Value::Int(5));
    let full: Vec<Value> = q(c, &["XINFO", "STREAM", "x", "FULL", "COUNT", "2"]);
    assert_eq!(full.len(), 18);
    assert_eq!(id_list(&field_of(&full, "entries")), ["1-0", "2-0"]);
    let groups: Vec<Vec<Value>> = FromRedisValue::from_redis_value(&field_of(&full, "groups")).unwrap();
    assert_eq!(id_list(&field_of(&groups[0], "pending")), ["1-0", "2-0"]);
    // XSETID and its checks.
    assert_eq!(
        e(c, &["XSETID", "x", "5-0"]),
        "ERR The ID specified in XSETID is smaller than the target stream top item"
    );
    assert_eq!(
        e(c, &["XSETID", "x", "9-0", "ENTRIESADDED", "1"]),
        "ERR The entries_added specified in XSETID is smaller than the target stream length"
    );
    assert_eq!(
        e(c, &["XSETID", "x", "9-0", "MAXDELETEDID", "10-0"]),
        "ERR The ID specified in XSETID is smaller than the provided max_deleted_entry_id"
    );
    assert_eq!(e(c, &["XSETID", "missing", "9-0"]), "ERR no such key");
    assert_eq!(q::<String>(c, &["XSETID", "x", "9-0", "ENTRIESADDED", "20", "MAXDELETEDID", "7-0"]), "OK");
    let info: Vec<Value> = q(c, &["XINFO", "STREAM", "x"]);
    assert_eq!(String::from_redis_value(&field_of(&info, "last-generated-id")).unwrap(), "9-0");
    assert_eq!(String::from_redis_value(&field_of(&info, "max-deleted-entry-id")).unwrap(), "7-0");
    assert_eq!(field_of(&info, "entries-added"), Value::Int(20));
    assert_eq!(e(c, &["XADD", "x", "8-0", "a", "b"]).split_whitespace().last(), Some("item"));
    // The key's type before the ids (Redis's order).
    q::<String>(c, &["SET", "str", "v"]);
    let wt = "WRONGTYPE Operation against a key holding the wrong kind of value";
    assert_eq!(e(c, &["XDEL", "str", "5-*", "0-1"]), wt);
    assert_eq!(i(c, &["XDEL", "missing", "5-*"]), 0);
    assert_eq!(e(c, &["XDEL", "x", "5-*"]), "ERR Invalid stream ID specified as stream command argument");
    assert_eq!(e(c, &["XSETID", "str", "1-0"]), wt);
}

#[test]
fn blocking_xreadgroup_edge_cases() {
    let (srv, _dir) = start_server();
    let c = &mut connect(&srv);
    q::<String>(c, &["XGROUP", "CREATE", "s", "g", "$", "MKSTREAM"]);
    // A timeout answers nil; an id other than `>` never blocks.
    let t0 = Instant::now();
    assert_eq!(q::<Value>(c, &["XREADGROUP", "GROUP", "g", "a", "BLOCK", "100", "STREAMS", "s", ">"]), Value::Nil);
    assert!(t0.elapsed() >= Duration::from_millis(90));
    let r: Vec<(String, Vec<Entry>)> = q(c, &["XREADGROUP", "GROUP", "g", "a", "BLOCK", "0", "STREAMS", "s", "0"]);
    assert_eq!(r, [("s".to_string(), vec![])]);
    // BLOCK 0 is served by the next XADD, and the entry is pending for the reader.
    let mut w = connect(&srv);
    let h = std::thread::spawn(move || {
        q::<Value>(&mut w, &["XREADGROUP", "GROUP", "g", "a", "BLOCK", "0", "STREAMS", "s", ">"])
    });
    wait_blocked(&srv, 1);
    q::<String>(c, &["XADD", "s", "7-0", "f", "v"]);
    let r: Vec<(String, Vec<Entry>)> = FromRedisValue::from_redis_value(&h.join().unwrap()).unwrap();
    assert_eq!(ids(&r[0].1), ["7-0"]);
    assert_eq!(q::<Vec<Value>>(c, &["XPENDING", "s", "g", "-", "+", "10", "a"]).len(), 1);
    // The group destroyed, the key deleted or overwritten while blocked: errors, as in Redis.
    let cases: [(&[&str], &str); 3] = [
        (&["XGROUP", "DESTROY", "s", "g"], "NOGROUP the consumer group this client was blocked on no longer exists"),
        (&["DEL", "s"], "UNBLOCKED the stream key no longer exists"),
        (&["SET", "s", "x"], "UNBLOCKED the stream key no longer exists"),
    ];
    for (change, expected) in cases {
        q::<()>(c, &["DEL", "s"]);
        q::<String>(c, &["XGROUP", "CREATE", "s", "g", "$", "MKSTREAM"]);
        let mut w = connect(&srv);
        let h = std::thread::spawn(move || {
            e(&mut w, &["XREADGROUP", "GROUP", "g", "a", "BLOCK", "0", "STREAMS", "s", ">"])
        });
        wait_blocked(&srv, 1);
        q::<Value>(c, change);
        assert_eq!(h.join().unwrap(), expected, "after {change:?}");
        wait_blocked(&srv, 0);
    }
    // A plain XREAD stays blocked when its stream is deleted, and reads the stream made again.
    q::<()>(c, &["DEL", "s"]);
    q::<String>(c, &["XADD", "s", "5-0", "f", "v"]);
    let mut w = connect(&srv);
    let h = std::thread::spawn(move || q::<Value>(&mut w, &["XREAD", "BLOCK", "0", "STREAMS", "s", "$"]));
    wait_blocked(&srv, 1);
    q::<()>(c, &["DEL", "s"]);
    std::thread::sleep(Duration::from_millis(50));
    wait_blocked(&srv, 1);
    q::<String>(c, &["XADD", "s", "6-0", "f", "w"]);
    let r: Vec<(String, Vec<Entry>)> = FromRedisValue::from_redis_value(&h.join().unwrap()).unwrap();
    assert_eq!(ids(&r[0].1), ["6-0"]);
}
