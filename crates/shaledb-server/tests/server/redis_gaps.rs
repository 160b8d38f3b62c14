//! Small behaviours checked against redis-server 7.0 side by side: `keymiss` notifications, XADD's `xtrim`
//! event, expiry held by CLIENT PAUSE, WATCH and the other `allow-busy` commands while a script is busy, and
//! the splitting of ACL selectors. Each test runs the same script on both servers and compares what clients
//! see (the comparison is skipped where redis-server is not installed).

use crate::helpers::{bulk as b, redis_or_skip, start_server, Client, Resp};
use crate::notify::until_marker;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// A subscriber to every channel (`PSUBSCRIBE *`).
fn subscribe_all(addr: SocketAddr) -> Client {
    let mut sub = Client::connect(addr);
    assert_eq!(sub.cmd(&["PSUBSCRIBE", "*"]), Resp::Array(vec![b("psubscribe"), b("*"), Resp::Int(1)]));
    sub
}

fn ok(c: &mut Client, args: &[&str]) {
    let r = c.cmd(args);
    assert!(!matches!(r, Resp::Error(_)), "{args:?}: {r:?}");
}

/// Runs `cmds` on a fresh keyspace of `addr` with `notify-keyspace-events` set to `classes` (which must
/// include `$` for the marker), and returns every reply and every message published meanwhile.
/// Each command with its reply, and the `(channel, message)` pairs published.
type Transcript = (Vec<(String, Resp)>, Vec<(String, String)>);

fn transcript(addr: SocketAddr, classes: &str, cmds: &[Vec<&str>]) -> Transcript {
    let mut c = Client::connect(addr);
    ok(&mut c, &["FLUSHALL"]);
    ok(&mut c, &["CONFIG", "SET", "notify-keyspace-events", classes]);
    let mut sub = subscribe_all(addr);
    let replies = cmds.iter().map(|a| (a.join(" "), c.cmd(a))).collect();
    ok(&mut c, &["SET", "zz-marker", "end"]);
    let messages = until_marker(&mut sub, "zz-marker");
    ok(&mut c, &["CONFIG", "SET", "notify-keyspace-events", ""]);
    (replies, messages)
}

fn compare(redis: SocketAddr, shale: SocketAddr, classes: &str, cmds: &[Vec<&str>]) {
    let want = transcript(redis, classes, cmds);
    let got = transcript(shale, classes, cmds);
    for (w, g) in want.0.iter().zip(&got.0) {
        assert_eq!(g, w, "reply of `{}`", w.0);
    }
    assert_eq!(got.1, want.1, "the messages published");
}

fn words(lines: &[&'static str]) -> Vec<Vec<&'static str>> {
    lines.iter().map(|l| l.split(' ').collect()).collect()
}

#[test]
fn read_lookups_of_missing_keys_publish_keymiss_as_redis_does() {
    let Some(redis) = redis_or_skip() else { return };
    let (_d, server) = start_server(|_| {});
    // Reads on the connection, reads inside MULTI, and write commands that read a key (GETDEL, SET GET,
    // the STORE commands' sources, PFMERGE, XCLAIM ...); the writes around them publish in order with the
    // misses (a DEL then a GET of the same key: `del` before `keymiss`).
    let cmds = words(&[
        "get a1",
        "mget a2 a3",
        "set s1 v",
        "get s1",
        "del s1",
        "get s1",
        "exists a4 s1",
        "type a5",
        "ttl a6",
        "object encoding a7",
        "dump a8",
        "touch a9",
        "hget a10 f",
        "lrange a11 0 -1",
        "smembers a12",
        "zrange a13 0 -1",
        "zunion 2 a14 a15",
        "zinter 1 a16",
        "zdiff 1 a17",
        "sunion a18 a19",
        "sintercard 1 a20",
        "xrange a21 - +",
        "xinfo stream a22",
        "geopos a23 m",
        "sort_ro a24",
        "bitcount a25",
        "bitfield_ro a26 get u8 0",
        "lcs a27 a28",
        "hscan a29 0",
        "getdel a30",
        "getex a31",
        "getset a32 v",
        "set a33 v get",
        "copy a34 b34",
        "sunionstore d35 a35",
        "zunionstore d36 2 a36 a36b",
        "zrangestore d37 a37 0 -1",
        "bitop or d38 a38 a38b",
        "bitfield a39 get u8 0",
        "rpush l40 1 2",
        "sort l40 by w_* get o_* store d40",
        "pfmerge d41 a41",
        "pfcount a42",
        "pfcount a43 a44",
        "georadius a45 0 0 1 km store d45",
        "geosearchstore d46 a46 fromlonlat 0 0 byradius 1 km",
        "xclaim a47 g c 0 0-1",
        "xack a48 g 0-1",
        "xautoclaim a49 g c 0 0",
        "xreadgroup group g c streams a50 >",
        "multi",
        "get a51",
        "set a52 x",
        "get a52",
        "hgetall a53",
        "exec",
        "incr a54",
        "append a55 x",
        "lpop a56",
        "del a57",
        "expire a58 10",
        "dbsize",
    ]);
    compare(redis.addr, server.addr(), "KEm$glg", &cmds);
}

#[test]
fn xadd_that_trims_publishes_xadd_then_xtrim_as_redis_does() {
    let Some(redis) = redis_or_skip() else { return };
    let (_d, server) = start_server(|_| {});
    let cmds = words(&[
        "xadd s maxlen 2 1-1 f v",
        "xadd s maxlen 2 2-1 f v",
        "xadd s maxlen 2 3-1 f v",
        "xadd s maxlen = 1 4-1 f v",
        "xadd s minid 4-1 5-1 f v",
        "xadd s minid 5-1 6-1 f v",
        "xadd s maxlen ~ 1 7-1 f v",
        "xadd s maxlen 0 8-1 f v",
        "xadd s nomkstream maxlen 0 9-1 f v",
        "xadd t nomkstream maxlen 0 1-1 f v",
        "xtrim s maxlen 0",
        "xlen s",
    ]);
    compare(redis.addr, server.addr(), "KEtgn$", &cmds);
}

/// Reads a `message` (channel, payload) if one comes within `wait`.
fn message_within(sub: &mut Client, wait: Duration) -> Option<(String, String)> {
    sub.r.get_mut().set_read_timeout(Some(wait)).expect("read timeout");
    let m = sub.read().map(|r| match r {
        Resp::Array(a) if a.len() == 3 && a[0] == b("message") => (a[1].text(), a[2].text()),
        other => panic!("not a message: {other:?}"),
    });
    sub.r.get_mut().set_read_timeout(Some(Duration::from_secs(10))).expect("read timeout");
    m
}

/// Keys past their TTL stay while CLIENT PAUSE (WRITE or ALL) is in force, read as missing, and are
/// deleted (with their `expired` events) once it ends: by CLIENT UNPAUSE under WRITE, by its timeout under
/// ALL (which holds CLIENT UNPAUSE too).
fn pause_holds_expiry(addr: SocketAddr, mode: &str) -> Vec<String> {
    let mut c = Client::connect(addr);
    ok(&mut c, &["FLUSHALL"]);
    ok(&mut c, &["CONFIG", "SET", "notify-keyspace-events", "Ex"]);
    let mut sub = Client::connect(addr);
    sub.cmd(&["SUBSCRIBE", "__keyevent@0__:expired"]);
    ok(&mut c, &["SET", "k1", "v", "PX", "50"]);
    ok(&mut c, &["SET", "k2", "v", "PX", "50"]);
    let timeout = if mode == "WRITE" { "100000" } else { "1500" };
    ok(&mut c, &["CLIENT", "PAUSE", timeout, mode]);
    // Well past the TTLs and several rounds of active expiry (Redis: 10 a second; ShaleDB's sweeper too).
    assert_eq!(message_within(&mut sub, Duration::from_millis(800)), None, "nothing expires while paused ({mode})");
    if mode == "WRITE" {
        assert_eq!(c.cmd(&["GET", "k1"]), Resp::Nil, "an expired key reads as missing");
        assert_eq!(message_within(&mut sub, Duration::from_millis(300)), None, "a read deletes nothing while paused");
        ok(&mut c, &["CLIENT", "UNPAUSE"]);
    }
    let mut expired = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    while expired.len() < 2 && Instant::now() < deadline {
        if let Some((_, key)) = message_within(&mut sub, Duration::from_secs(1)) {
            expired.push(key);
        }
    }
    ok(&mut c, &["CONFIG", "SET", "notify-keyspace-events", ""]);
    expired.sort();
    expired
}

#[test]
fn client_pause_holds_expiry_until_it_ends_as_redis_does() {
    let (_d, server) = start_server(|_| {});
    let redis = redis_or_skip();
    for mode in ["WRITE", "ALL"] {
        let got = pause_holds_expiry(server.addr(), mode);
        assert_eq!(got, ["k1", "k2"], "both keys expire once unpaused ({mode})");
        if let Some(r) = &redis {
            assert_eq!(pause_holds_expiry(r.addr, mode), got, "redis-server ({mode})");
        }
    }
}

/// A script that spins for `ARGV[1]` microseconds (by TIME), then sets `KEYS[1]` to `ARGV[2]`; with
/// `ARGV[3] == "first"` it sets it before spinning instead.
const SPIN: &str = "if ARGV[3] == 'first' then redis.call('set', KEYS[1], ARGV[2]) end \
    local t0 = redis.call('time') \
    repeat local t = redis.call('time') until (t[1] - t0[1]) * 1000000 + (t[2] - t0[2]) > tonumber(ARGV[1]) \
    if ARGV[3] ~= 'first' then redis.call('set', KEYS[1], ARGV[2]) end \
    return 1";

/// While a script runs past busy-reply-threshold: what each of `probes` answers, then the EXEC of a
/// transaction WATCHing the key the script writes (after the WATCH, or before it with `first`).
fn busy_transcript(addr: SocketAddr, when: &str) -> (Vec<(String, Resp)>, Resp, Resp) {
    let mut c = Client::connect(addr);
    ok(&mut c, &["FLUSHALL"]);
    ok(&mut c, &["CONFIG", "SET", "busy-reply-threshold", "100"]);
    ok(&mut c, &["SET", "k", "v0"]);
    let mut script = Client::connect(addr);
    script.send(&["EVAL", SPIN, "1", "k", "1500000", "by-script", when]);
    let mut w = Client::connect(addr);
    // Past the threshold: GET is refused with BUSY.
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        match w.cmd(&["GET", "k"]) {
            Resp::Error(e) if e.starts_with("BUSY") => break,
            _ if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
            other => panic!("the script never became busy: {other:?}"),
        }
    }
    let watched = w.cmd(&["WATCH", "k"]);
    let mut probes = Vec::new();
    let mut p = Client::connect(addr);
    for args in words(&[
        "ping",
        "echo x",
        "unwatch",
        "multi",
        "discard",
        "function stats",
        "script flush",
        "client id",
        "select 0",
        "hello 2",
    ]) {
        let r = p.cmd(&args);
        // HELLO's map holds the server's name and version: its shape is what is compared.
        let r = match r {
            Resp::Array(a) if args[0] == "hello" => Resp::Int(a.len() as i64),
            r => r,
        };
        probes.push((args.join(" "), r));
    }
    // Still busy after the probes (WATCH was answered during the script, not after it).
    let still = w.cmd(&["GET", "k"]);
    assert!(matches!(&still, Resp::Error(e) if e.starts_with("BUSY")), "{still:?}");
    assert_eq!(script.read(), Some(Resp::Int(1)), "the script's reply");
    probes.push(("WATCH during the script".into(), watched));
    ok(&mut w, &["MULTI"]);
    ok(&mut w, &["SET", "k", "by-exec"]);
    let exec = w.cmd(&["EXEC"]);
    let value = w.cmd(&["GET", "k"]);
    ok(&mut c, &["CONFIG", "SET", "busy-reply-threshold", "5000"]);
    (probes, exec, value)
}

#[test]
fn watch_and_the_other_allow_busy_commands_are_served_during_a_busy_script_as_in_redis() {
    let (_d, server) = start_server(|_| {});
    let redis = redis_or_skip();
    for when in ["after", "first"] {
        let got = busy_transcript(server.addr(), when);
        // The script's write after the WATCH fails the transaction; a write before it does not.
        let (exec, value) = if when == "after" {
            (Resp::Nil, "by-script")
        } else {
            (Resp::Array(vec![Resp::Simple("OK".into())]), "by-exec")
        };
        assert_eq!((&got.1, &got.2), (&exec, &b(value)), "{when}");
        if let Some(r) = &redis {
            let want = busy_transcript(r.addr, when);
            assert_eq!(got, want, "redis-server ({when})");
        }
    }
}

/// `ACL SETUSER` with selectors written in several ways: each reply, then ACL LIST and each user's
/// ACL GETUSER.
fn acl_transcript(addr: SocketAddr) -> Vec<(String, Resp)> {
    let mut c = Client::connect(addr);
    let setusers: &[&[&str]] = &[
        &["u1", "(~key* +get)"],
        &["u2", "(~a", "+get", "~b)"],
        &["u3", "(~a", "(+get", "~b)"],
        &["u4", "(~\"a b\" +set)"],
        &["u5", "(~\"a +set)"],
        &["u6", "(~x\x0b+get\t~y)"],
        &["u7", "(  )", "(~z", ")"],
        &["u8", "(~x\x0c+get)"],
        &["u9", "(~\"k\\x41\"  %R~r* \"+get\")"],
        &["u10", "(~a", "+get"],
        &["u11", "on", "(\t~p*\n+@read\r)", "nopass", "(&ch* +publish)"],
        &["u12", "('~q r' +get)"],
        &["u13", "('~q\\'s' +get)"],
        &["u14", "(~\"t\"x +get)"],
    ];
    let mut out = Vec::new();
    for args in setusers {
        let mut a = vec!["ACL", "SETUSER"];
        a.extend_from_slice(args);
        out.push((args.join(" | "), c.cmd(&a)));
    }
    let mut list = match c.cmd(&["ACL", "LIST"]) {
        Resp::Array(a) => a,
        other => panic!("ACL LIST: {other:?}"),
    };
    list.sort_by_key(|r| r.text());
    out.push(("ACL LIST".into(), Resp::Array(list)));
    for args in setusers {
        out.push((format!("ACL GETUSER {}", args[0]), c.cmd(&["ACL", "GETUSER", args[0]])));
    }
    out
}

#[test]
fn acl_selectors_are_split_as_redis_splits_them() {
    let (_d, server) = start_server(|_| {});
    let got = acl_transcript(server.addr());
    // Whitespace inside one argument separates rules; quotes group them.
    let list: Vec<String> = match got.iter().find(|(w, _)| w == "ACL LIST") {
        Some((_, Resp::Array(a))) => a.iter().map(Resp::text).collect(),
        other => panic!("ACL LIST: {other:?}"),
    };
    for line in [
        "user u1 off resetchannels -@all (~key* resetchannels -@all +get)",
        "user u2 off resetchannels -@all (~a ~b resetchannels -@all +get)",
        "user u9 off resetchannels -@all (~kA %R~r* resetchannels -@all +get)",
    ] {
        assert!(list.iter().any(|l| l == line), "{line} in {list:?}");
    }
    let Some(redis) = redis_or_skip() else { return };
    let want = acl_transcript(redis.addr);
    for (w, g) in want.iter().zip(&got) {
        assert_eq!(g, w, "{}", w.0);
    }
}

/// Under CLIENT PAUSE WRITE: an EVAL, EVALSHA or FCALL declaring `no-writes` runs (alone and inside
/// MULTI), an EVAL without a shebang waits for the pause's end, counted in `blocked_clients`.
fn pause_and_scripts(addr: SocketAddr) -> Vec<Resp> {
    let mut c = Client::connect(addr);
    let mut other = Client::connect(addr);
    ok(&mut c, &["FUNCTION", "FLUSH"]);
    let lib = "#!lua name=gapslib\nredis.register_function{function_name='ro', callback=function() return 'f' end, \
               flags={'no-writes'}}";
    ok(&mut c, &["FUNCTION", "LOAD", lib]);
    let sha = c.cmd(&["SCRIPT", "LOAD", "#!lua flags=no-writes\nreturn 'sha'"]).text();
    ok(&mut c, &["CLIENT", "PAUSE", "100000", "WRITE"]);
    let mut out = vec![other.cmd(&["EVAL", "#!lua flags=no-writes\nreturn 1", "0"])];
    out.push(other.cmd(&["EVALSHA", &sha, "0"]));
    out.push(other.cmd(&["FCALL", "ro", "0"]));
    // Neither writes nor may replicate in Redis: not held either.
    out.push(other.cmd(&["EVAL_RO", "return 4", "0"]));
    out.push(other.cmd(&["FCALL_RO", "ro", "0"]));
    out.push(other.cmd(&["SCRIPT", "EXISTS", &sha]));
    out.push(other.cmd(&["FUNCTION", "LIST", "LIBRARYNAME", "none-such"]));
    ok(&mut other, &["MULTI"]);
    out.push(other.cmd(&["EVAL", "#!lua flags=no-writes\nreturn 2", "0"]));
    out.push(other.cmd(&["EXEC"]));
    other.send(&["EVAL", "return 3", "0"]);
    let blocked = |c: &mut Client| c.cmd(&["INFO", "clients"]).text().contains("blocked_clients:1\r\n");
    let deadline = Instant::now() + Duration::from_secs(5);
    while !blocked(&mut c) {
        assert!(Instant::now() < deadline, "the EVAL without a shebang is held");
        std::thread::sleep(Duration::from_millis(20));
    }
    ok(&mut c, &["CLIENT", "UNPAUSE"]);
    out.push(other.read().expect("the held EVAL's reply"));
    ok(&mut c, &["FUNCTION", "FLUSH"]);
    out
}

#[test]
fn client_pause_write_lets_no_writes_scripts_through_as_redis_does() {
    let (_d, server) = start_server(|_| {});
    let got = pause_and_scripts(server.addr());
    assert_eq!(
        got,
        [
            Resp::Int(1),
            b("sha"),
            b("f"),
            Resp::Int(4),
            b("f"),
            Resp::Array(vec![Resp::Int(1)]),
            Resp::Array(vec![]),
            Resp::Simple("QUEUED".into()),
            Resp::Array(vec![Resp::Int(2)]),
            Resp::Int(3)
        ]
    );
    if let Some(r) = redis_or_skip() {
        assert_eq!(pause_and_scripts(r.addr), got, "redis-server");
    }
}

/// CLIENT PAUSE queued in a transaction: EXEC runs the whole transaction, then the pause holds the next
/// write of another client.
fn pause_in_multi(addr: SocketAddr) -> Vec<Resp> {
    let mut c = Client::connect(addr);
    let mut other = Client::connect(addr);
    ok(&mut c, &["DEL", "m1", "m2", "m3"]);
    let mut out = Vec::new();
    for args in [&["MULTI"][..], &["SET", "m1", "a"], &["CLIENT", "PAUSE", "100000", "WRITE"], &["SET", "m2", "b"]] {
        out.push(c.cmd(args));
    }
    out.push(c.cmd(&["EXEC"]));
    other.send(&["SET", "m3", "c"]);
    let deadline = Instant::now() + Duration::from_secs(5);
    while !c.cmd(&["INFO", "clients"]).text().contains("blocked_clients:1\r\n") {
        assert!(Instant::now() < deadline, "the SET after the transaction is held");
        std::thread::sleep(Duration::from_millis(20));
    }
    out.push(c.cmd(&["MGET", "m1", "m2", "m3"]));
    ok(&mut c, &["CLIENT", "UNPAUSE"]);
    out.push(other.read().expect("the held SET's reply"));
    out
}

#[test]
fn client_pause_in_a_transaction_starts_after_it_as_in_redis() {
    let (_d, server) = start_server(|_| {});
    let got = pause_in_multi(server.addr());
    let queued = || Resp::Simple("QUEUED".into());
    let okr = || Resp::Simple("OK".into());
    assert_eq!(
        got,
        [
            okr(),
            queued(),
            queued(),
            queued(),
            Resp::Array(vec![okr(), okr(), okr()]),
            Resp::Array(vec![b("a"), b("b"), Resp::Nil]),
            okr()
        ]
    );
    if let Some(r) = redis_or_skip() {
        assert_eq!(pause_in_multi(r.addr), got, "redis-server");
    }
}
