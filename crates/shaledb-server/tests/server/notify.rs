//! Keyspace notifications and shard Pub/Sub: `notify-keyspace-events` and its classes, the events of each
//! command family, their order and durability (published once the write is durable and acknowledged, never
//! for a failed write), MULTI and scripts, expiry, a comparison of the event stream with redis-server for a
//! seeded random command sequence, and SSUBSCRIBE / SUNSUBSCRIBE / SPUBLISH / PUBSUB SHARD* against
//! redis-server in RESP2 and RESP3.

use crate::helpers::{bulk as b, redis_or_skip, start_server, Client, Resp, Rng};
use std::net::SocketAddr;
use std::time::Duration;

/// A subscriber to every channel (`PSUBSCRIBE *`).
fn subscribe_all(addr: SocketAddr) -> Client {
    let mut sub = Client::connect(addr);
    assert_eq!(sub.cmd(&["PSUBSCRIBE", "*"]), Resp::Array(vec![b("psubscribe"), b("*"), Resp::Int(1)]));
    sub
}

/// The `(channel, message)` of a `pmessage`.
pub(crate) fn pmessage(r: Resp) -> (String, String) {
    match r {
        Resp::Array(a) | Resp::Push(a) if a.len() == 4 && a[0] == b("pmessage") => (a[2].text(), a[3].text()),
        other => panic!("not a pmessage: {other:?}"),
    }
}

/// Reads messages until the keyevent message for `marker` arrives; returns those before it.
pub(crate) fn until_marker(sub: &mut Client, marker: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    loop {
        let m = pmessage(sub.read().expect("a message before the marker"));
        if m.1 == marker && m.0.starts_with("__keyevent@") {
            return out;
        }
        if m.0.ends_with(&format!("__:{marker}")) {
            continue; // the marker's keyspace message
        }
        out.push(m);
    }
}

/// The keyevent messages only, as `event key`.
fn events(ms: &[(String, String)]) -> Vec<String> {
    ms.iter().filter_map(|(c, m)| c.strip_prefix("__keyevent@0__:").map(|e| format!("{e} {m}"))).collect()
}

fn ok(c: &mut Client, args: &[&str]) {
    let r = c.cmd(args);
    assert!(!matches!(r, Resp::Error(_)), "{args:?}: {r:?}");
}

#[test]
fn config_get_shows_the_canonical_classes_and_refuses_bad_letters() {
    let (_d, server) = start_server(|_| {});
    let mut c = Client::connect(server.addr());
    let get = |c: &mut Client| c.cmd(&["CONFIG", "GET", "notify-keyspace-events"]).array()[1].text();
    assert_eq!(get(&mut c), "");
    for (set, shown) in [("gKE", "gKE"), ("$lshzxeKE", "$lshzxeKE"), ("KA", "AK"), ("EA", "AE"), ("nmK", "nKm")] {
        ok(&mut c, &["CONFIG", "SET", "notify-keyspace-events", set]);
        assert_eq!(get(&mut c), shown, "{set}");
    }
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "notify-keyspace-events", "KQ"]),
        Resp::Error(
            "ERR CONFIG SET failed (possibly related to argument 'notify-keyspace-events') - Invalid event class \
             character. Use 'Ag$lshzxeKEtmdn'."
                .into()
        )
    );
    assert_eq!(get(&mut c), "nKm");
}

#[test]
fn each_class_emits_redis_event_names_and_masks_the_others() {
    let (_d, server) = start_server(|_| {});
    let mut c = Client::connect(server.addr());
    ok(&mut c, &["CONFIG", "SET", "notify-keyspace-events", "KEA"]);
    let mut sub = subscribe_all(server.addr());
    for cmd in [
        &["SET", "s", "1"][..],
        &["INCRBY", "s", "2"],
        &["INCRBYFLOAT", "s", "0.5"],
        &["APPEND", "s", "x"],
        &["SETRANGE", "s", "0", "y"],
        &["EXPIRE", "s", "1000"],
        &["PERSIST", "s"],
        &["RENAME", "s", "t"],
        &["COPY", "t", "u"],
        &["MOVE", "u", "1"],
        &["DEL", "t"],
        &["RPUSH", "l", "a", "b"],
        &["LPUSH", "l", "c"],
        &["LSET", "l", "0", "z"],
        &["LINSERT", "l", "BEFORE", "a", "q"],
        &["LREM", "l", "1", "q"],
        &["LTRIM", "l", "0", "1"],
        &["LMOVE", "l", "l2", "LEFT", "RIGHT"],
        &["RPOP", "l"],
        &["SADD", "st", "a", "b"],
        &["SREM", "st", "a"],
        &["SPOP", "st", "5"],
        &["HSET", "h", "f", "1"],
        &["HINCRBY", "h", "f", "1"],
        &["HINCRBYFLOAT", "h", "f", "1.5"],
        &["HDEL", "h", "f"],
        &["ZADD", "z", "1", "a", "2", "b"],
        &["ZINCRBY", "z", "1", "a"],
        &["ZREM", "z", "b"],
        &["ZPOPMIN", "z"],
        &["XADD", "x", "1-1", "f", "v"],
        &["XDEL", "x", "1-1"],
        &["SETBIT", "bits", "3", "1"],
        &["PFADD", "hll", "a"],
        &["SORT", "l2", "ALPHA", "STORE", "sorted"],
        &["SET", "zz", "end"],
    ] {
        ok(&mut c, cmd);
    }
    let got = events(&until_marker(&mut sub, "zz"));
    let want = [
        "set s",
        "incrby s",
        "incrbyfloat s",
        "append s",
        "setrange s",
        "expire s",
        "persist s",
        "rename_from s",
        "rename_to t",
        "copy_to u",
        "move_from u",
        "del t",
        "rpush l",
        "lpush l",
        "lset l",
        "linsert l",
        "lrem l",
        "ltrim l",
        "rpush l2",
        "lpop l",
        "rpop l",
        "del l",
        "sadd st",
        "srem st",
        "spop st",
        "del st",
        "hset h",
        "hincrby h",
        "hincrbyfloat h",
        "hdel h",
        "del h",
        "zadd z",
        "zincr z",
        "zrem z",
        "zpopmin z",
        "del z",
        "xadd x",
        "xdel x",
        "setbit bits",
        "pfadd hll",
        "sortstore sorted",
    ];
    assert_eq!(got, want);

    // Masks: only list events on the keyevent channel; only keyspace messages for strings.
    ok(&mut c, &["CONFIG", "SET", "notify-keyspace-events", "El"]);
    for cmd in [&["SET", "a", "1"][..], &["LPUSH", "ml", "x"], &["SADD", "ms", "x"], &["RPUSH", "ml2", "end"]] {
        ok(&mut c, cmd);
    }
    assert_eq!(pmessage(sub.read().unwrap()), ("__keyevent@0__:lpush".into(), "ml".into()));
    assert_eq!(pmessage(sub.read().unwrap()), ("__keyevent@0__:rpush".into(), "ml2".into()));
    ok(&mut c, &["CONFIG", "SET", "notify-keyspace-events", "K$"]);
    ok(&mut c, &["SELECT", "3"]);
    ok(&mut c, &["SET", "k3", "v"]);
    assert_eq!(pmessage(sub.read().unwrap()), ("__keyspace@3__:k3".into(), "set".into()));
    // `n`: new keys only, not overwrites.
    ok(&mut c, &["CONFIG", "SET", "notify-keyspace-events", "En"]);
    ok(&mut c, &["SET", "fresh", "1"]);
    ok(&mut c, &["SET", "fresh", "2"]);
    ok(&mut c, &["SET", "other", "1"]);
    assert_eq!(pmessage(sub.read().unwrap()), ("__keyevent@3__:new".into(), "fresh".into()));
    assert_eq!(pmessage(sub.read().unwrap()), ("__keyevent@3__:new".into(), "other".into()));
}

#[test]
fn nothing_is_published_while_no_class_or_channel_kind_is_on() {
    let (_d, server) = start_server(|_| {});
    let mut c = Client::connect(server.addr());
    let mut sub = subscribe_all(server.addr());
    ok(&mut c, &["SET", "a", "1"]);
    // Classes without K or E publish nothing either.
    ok(&mut c, &["CONFIG", "SET", "notify-keyspace-events", "A"]);
    ok(&mut c, &["SET", "a", "2"]);
    ok(&mut c, &["CONFIG", "SET", "notify-keyspace-events", "E$"]);
    ok(&mut c, &["SET", "b", "1"]);
    assert_eq!(pmessage(sub.read().unwrap()), ("__keyevent@0__:set".into(), "b".into()));
}

#[test]
fn failed_writes_emit_nothing() {
    let (_d, server) = start_server(|_| {});
    let mut c = Client::connect(server.addr());
    ok(&mut c, &["CONFIG", "SET", "notify-keyspace-events", "EA"]);
    let mut sub = subscribe_all(server.addr());
    ok(&mut c, &["RPUSH", "list", "a"]);
    ok(&mut c, &["SET", "str", "abc"]);
    ok(&mut c, &["SET", "zz", "start"]);
    assert_eq!(events(&until_marker(&mut sub, "zz")), ["rpush list", "set str"]);
    for cmd in [
        &["INCR", "str"][..],
        &["LPUSH", "str", "x"],
        &["SADD", "list", "x"],
        &["HSET", "list", "f", "v"],
        &["ZADD", "list", "1", "m"],
        &["XADD", "list", "1-1", "f", "v"],
        &["RENAME", "missing", "x"],
        &["EXPIRE", "str", "notanumber"],
        &["SETRANGE", "str", "-1", "x"],
    ] {
        assert!(matches!(c.cmd(cmd), Resp::Error(_)), "{cmd:?}");
    }
    // Writes that change nothing are no events either.
    for cmd in [
        &["SET", "str", "x", "NX"][..],
        &["LPUSHX", "missing", "x"],
        &["SREM", "missing", "x"],
        &["DEL", "missing"],
        &["PERSIST", "str"],
        &["LREM", "list", "1", "nothere"],
        &["HDEL", "missing", "f"],
        &["ZREM", "missing", "m"],
        &["EXPIRE", "missing", "10"],
        &["SETRANGE", "str", "0", ""],
    ] {
        assert!(!matches!(c.cmd(cmd), Resp::Error(_)), "{cmd:?}");
    }
    ok(&mut c, &["SET", "zz", "end"]);
    assert_eq!(until_marker(&mut sub, "zz"), Vec::<(String, String)>::new());
}

#[test]
fn an_event_follows_its_acknowledged_durable_write_in_write_order() {
    let (_d, server) = start_server(|_| {});
    let mut c = Client::connect(server.addr());
    ok(&mut c, &["CONFIG", "SET", "notify-keyspace-events", "E$"]);
    let mut sub = subscribe_all(server.addr());
    let mut reader = Client::connect(server.addr());
    // Pipelined writes from two connections: each connection's events come in its write order, and the
    // value an event names is already readable by anyone when the event arrives.
    let mut other = Client::connect(server.addr());
    for i in 0..200 {
        c.send(&["SET", &format!("a{i}"), &i.to_string()]);
        other.send(&["SET", &format!("b{i}"), &i.to_string()]);
    }
    let (mut next_a, mut next_b) = (0, 0);
    while next_a < 200 || next_b < 200 {
        let (ch, key) = pmessage(sub.read().expect("an event"));
        assert_eq!(ch, "__keyevent@0__:set");
        let (prefix, n) = key.split_at(1);
        let n: usize = n.parse().unwrap();
        match prefix {
            "a" => {
                assert_eq!(n, next_a);
                next_a += 1;
            }
            _ => {
                assert_eq!(n, next_b);
                next_b += 1;
            }
        }
        assert_eq!(reader.cmd(&["GET", &key]), b(&n.to_string()), "{key} announced before it is readable");
    }
    for _ in 0..200 {
        assert_eq!(c.read().unwrap(), Resp::Simple("OK".into()));
        assert_eq!(other.read().unwrap(), Resp::Simple("OK".into()));
    }
}

#[test]
fn multi_exec_and_scripts_emit_the_events_of_each_command() {
    let (_d, server) = start_server(|_| {});
    let mut c = Client::connect(server.addr());
    ok(&mut c, &["CONFIG", "SET", "notify-keyspace-events", "EA"]);
    let mut sub = subscribe_all(server.addr());
    ok(&mut c, &["MULTI"]);
    for cmd in [&["SET", "m", "x"][..], &["INCR", "m"], &["LPUSH", "ml", "1"], &["DEL", "m"]] {
        assert_eq!(c.cmd(cmd), Resp::Simple("QUEUED".into()));
    }
    let replies = c.cmd(&["EXEC"]).array();
    assert!(matches!(replies[1], Resp::Error(_)));
    ok(&mut c, &["EVAL", "redis.call('set', KEYS[1], '1'); redis.call('expire', KEYS[1], 100); return 1", "1", "sk"]);
    // A transaction that does not run (its WATCHed key changed) emits nothing.
    ok(&mut c, &["WATCH", "w"]);
    let mut c2 = Client::connect(server.addr());
    ok(&mut c2, &["SET", "w", "1"]);
    ok(&mut c, &["MULTI"]);
    assert_eq!(c.cmd(&["SET", "never", "1"]), Resp::Simple("QUEUED".into()));
    assert_eq!(c.cmd(&["EXEC"]), Resp::Nil);
    ok(&mut c, &["SET", "zz", "end"]);
    assert_eq!(events(&until_marker(&mut sub, "zz")), ["set m", "lpush ml", "del m", "set sk", "expire sk", "set w"]);
}

#[test]
fn expiry_emits_expired_from_the_sweeper_and_on_write_access() {
    let (_d, server) = start_server(|_| {});
    let mut c = Client::connect(server.addr());
    ok(&mut c, &["CONFIG", "SET", "notify-keyspace-events", "Exgn$"]);
    let mut sub = subscribe_all(server.addr());
    // Background: nobody touches the key again.
    ok(&mut c, &["SET", "bg", "1", "PX", "50"]);
    assert_eq!(pmessage(sub.read().unwrap()), ("__keyevent@0__:new".into(), "bg".into()));
    assert_eq!(pmessage(sub.read().unwrap()), ("__keyevent@0__:set".into(), "bg".into()));
    assert_eq!(pmessage(sub.read().unwrap()), ("__keyevent@0__:expire".into(), "bg".into()));
    assert_eq!(pmessage(sub.read().unwrap()), ("__keyevent@0__:expired".into(), "bg".into()));
    // A write to an expired key: it expires (once), then a new key is made.
    ok(&mut c, &["SET", "fg", "1", "PX", "1"]);
    std::thread::sleep(Duration::from_millis(5));
    ok(&mut c, &["APPEND", "fg", "x"]);
    let got = events(&until_marker_after(&mut sub, &mut c));
    assert_eq!(got, ["new fg", "set fg", "expire fg", "expired fg", "new fg", "append fg"]);
}

/// Writes a marker key and reads every message before its event.
fn until_marker_after(sub: &mut Client, c: &mut Client) -> Vec<(String, String)> {
    ok(c, &["SET", "zz", "end"]);
    let mut got = until_marker(sub, "zz");
    // The marker's `new` event comes before its `set`.
    got.retain(|(ch, m)| !(m == "zz" && ch.ends_with(":new")));
    got
}

// ---------------------------------------------------------------------------------------------------------
// Against redis-server

/// A random write over a small key space (so commands collide and types clash); deterministic in effect
/// (no random pops, no expiry that could pass during the run).
fn random_write(r: &mut Rng, stream_id: &mut u64) -> Vec<String> {
    let keys = ["k1", "k2", "k3", "k4"];
    let k = r.pick(&keys).to_string();
    let k2 = r.pick(&keys).to_string();
    let m = r.pick(&["a", "b", "c"]).to_string();
    let n = (r.next() % 5).to_string();
    let w = |xs: &[&str]| xs.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    match r.next() % 44 {
        0 => w(&["SET", &k, &n]),
        1 => w(&["SETNX", &k, &n]),
        2 => w(&["APPEND", &k, &m]),
        3 => w(&["INCRBY", &k, &n]),
        4 => w(&["INCRBYFLOAT", &k, "0.5"]),
        5 => w(&["SETRANGE", &k, &n, &m]),
        6 => w(&["GETDEL", &k]),
        7 => w(&["GETSET", &k, &m]),
        8 => w(&["MSET", &k, "1", &k2, "2"]),
        9 => w(&["DEL", &k, &k2]),
        10 => w(&["EXPIRE", &k, "1000"]),
        11 => w(&["PERSIST", &k]),
        12 => w(&["RENAME", &k, &k2]),
        13 => w(&["RENAMENX", &k, &k2]),
        14 => w(&["COPY", &k, &k2, "REPLACE"]),
        15 => w(&["LPUSH", &k, &m, &n]),
        16 => w(&["RPUSH", &k, &m]),
        17 => w(&["LPOP", &k]),
        18 => w(&["RPOP", &k, "2"]),
        19 => w(&["LINSERT", &k, "AFTER", &m, "x"]),
        20 => w(&["LREM", &k, "0", &m]),
        21 => w(&["LTRIM", &k, "1", "-1"]),
        22 => w(&["LMOVE", &k, &k2, "LEFT", "RIGHT"]),
        23 => w(&["SADD", &k, &m, &n]),
        24 => w(&["SREM", &k, &m]),
        25 => w(&["SMOVE", &k, &k2, &m]),
        26 => w(&["SINTERSTORE", &k, &k2, "k3"]),
        27 => w(&["SUNIONSTORE", &k, &k2]),
        28 => w(&["HSET", &k, &m, &n]),
        29 => w(&["HSETNX", &k, &m, &n]),
        30 => w(&["HDEL", &k, &m]),
        31 => w(&["HINCRBY", &k, &m, &n]),
        32 => w(&["ZADD", &k, &n, &m]),
        33 => w(&["ZINCRBY", &k, "1", &m]),
        34 => w(&["ZREM", &k, &m]),
        35 => w(&["ZPOPMAX", &k]),
        36 => w(&["ZREMRANGEBYSCORE", &k, "0", "2"]),
        37 => w(&["ZUNIONSTORE", &k, "2", &k2, "k3"]),
        38 => {
            *stream_id += 1;
            w(&["XADD", &k, &format!("{stream_id}-0"), "f", &m])
        }
        39 => w(&["XTRIM", &k, "MAXLEN", "1"]),
        40 => w(&["SETBIT", &k, &n, "1"]),
        41 => w(&["PFADD", &k, &m]),
        42 => w(&["SORT", &k, "ALPHA", "STORE", &k2]),
        _ => w(&["HINCRBYFLOAT", &k, &m, "1.5"]),
    }
}

#[test]
fn the_event_stream_matches_redis_server_for_a_random_sequence() {
    let Some(redis) = redis_or_skip() else { return };
    let (_d, server) = start_server(|_| {});
    let seed = std::env::var("SHALEDB_DIFF_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64
    });
    println!("seed {seed}");
    let mut streams = Vec::new();
    for addr in [redis.addr, server.addr()] {
        let mut c = Client::connect(addr);
        ok(&mut c, &["FLUSHALL"]);
        ok(&mut c, &["CONFIG", "SET", "notify-keyspace-events", "KEAn"]);
        let mut sub = subscribe_all(addr);
        let mut r = Rng(seed);
        let mut stream_id = 0;
        let mut replies = Vec::new();
        for _ in 0..600 {
            let cmd = random_write(&mut r, &mut stream_id);
            let args: Vec<&str> = cmd.iter().map(String::as_str).collect();
            replies.push((cmd.join(" "), c.cmd(&args)));
        }
        ok(&mut c, &["SET", "zz", "end"]);
        let mut got = until_marker(&mut sub, "zz");
        got.retain(|(ch, m)| !(ch.ends_with(":new") && m == "zz"));
        streams.push((replies, got));
    }
    let (shale, redis_side) = (streams.pop().unwrap(), streams.pop().unwrap());
    // Where the replies differ, the events cannot be compared: name the first such command.
    for ((cmd, a), (_, b)) in redis_side.0.iter().zip(&shale.0) {
        let same = match (a, b) {
            (Resp::Error(x), Resp::Error(y)) => x.split(' ').next() == y.split(' ').next(),
            _ => a == b,
        };
        assert!(same, "seed {seed}: `{cmd}` answered {a:?} by redis-server, {b:?} by shaledb");
    }
    for (i, (a, b)) in redis_side.1.iter().zip(&shale.1).enumerate() {
        let around = |v: &[(String, String)]| v[i.saturating_sub(4)..(i + 4).min(v.len())].to_vec();
        assert_eq!(
            a,
            b,
            "seed {seed}: event {i} differs (redis-server first); around it:\n{:?}\n{:?}",
            around(&redis_side.1),
            around(&shale.1)
        );
    }
    assert_eq!(redis_side.1.len(), shale.1.len(), "seed {seed}: event counts differ");
}

#[test]
fn shard_channels_answer_as_redis_server_in_resp2_and_resp3() {
    let Some(redis) = redis_or_skip() else { return };
    let (_d, server) = start_server(|_| {});
    let mut transcripts = Vec::new();
    for addr in [redis.addr, server.addr()] {
        let mut t: Vec<Resp> = Vec::new();
        for proto in ["2", "3"] {
            let mut sub = Client::connect(addr);
            let mut p = Client::connect(addr);
            if proto == "3" {
                assert!(matches!(sub.cmd(&["HELLO", "3"]), Resp::Map(_)));
            }
            sub.send(&["SSUBSCRIBE", "s1", "s2", "s1"]);
            for _ in 0..3 {
                t.push(sub.read().unwrap());
            }
            t.push(sub.cmd(&["SUBSCRIBE", "s1"]));
            t.push(sub.cmd(&["PSUBSCRIBE", "s*"]));
            t.push(p.cmd(&["SPUBLISH", "s1", "hello"]));
            t.push(sub.read().unwrap());
            t.push(p.cmd(&["PUBLISH", "s1", "plain"]));
            let mut two = vec![sub.read().unwrap(), sub.read().unwrap()];
            two.sort_by_key(|r| format!("{r:?}"));
            t.extend(two);
            t.push(p.cmd(&["SPUBLISH", "nobody", "x"]));
            // Redis lists the channels in its hash table's order.
            let mut names = p.cmd(&["PUBSUB", "SHARDCHANNELS"]).array();
            names.sort_by_key(Resp::text);
            t.push(Resp::Array(names));
            t.push(p.cmd(&["PUBSUB", "SHARDCHANNELS", "*2"]));
            t.push(p.cmd(&["PUBSUB", "SHARDNUMSUB", "s1", "s2", "none"]));
            t.push(p.cmd(&["PUBSUB", "NUMSUB", "s1"]));
            t.push(p.cmd(&["PUBSUB", "SHARDCHANNELS", "a", "b"]));
            t.push(sub.cmd(&["SUNSUBSCRIBE", "s2", "nope"]));
            t.push(sub.read().unwrap());
            if proto == "2" {
                t.push(sub.cmd(&["GET", "x"]));
            }
            sub.send(&["SUNSUBSCRIBE"]);
            t.push(sub.read().unwrap());
            t.push(sub.cmd(&["SUNSUBSCRIBE"]));
            t.push(sub.cmd(&["UNSUBSCRIBE"]));
            t.push(sub.cmd(&["PUNSUBSCRIBE"]));
            t.push(sub.cmd(&["PING"]));
        }
        transcripts.push(t);
    }
    let shale = transcripts.pop().unwrap();
    let redis_side = transcripts.pop().unwrap();
    for (i, (a, b)) in redis_side.iter().zip(&shale).enumerate() {
        assert_eq!(a, b, "reply {i} differs (redis-server first)");
    }
    assert_eq!(redis_side.len(), shale.len());
}
