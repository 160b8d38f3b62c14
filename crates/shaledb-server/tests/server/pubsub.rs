//! Pub/Sub: subscriptions, messages, subscribed mode in RESP2, push frames in RESP3, PUBSUB introspection,
//! cleanup when a subscriber goes away, and a slow subscriber that neither blocks PUBLISH nor grows without
//! bound. Replies as redis-server 7.0 gives them.

use crate::helpers::{bulk as b, connect, start_server, Client, Resp};
use std::time::{Duration, Instant};

fn arr(items: Vec<Resp>) -> Resp {
    Resp::Array(items)
}

/// Polls `f` until it is true (at most 5 seconds).
fn eventually(mut f: impl FnMut() -> bool) -> bool {
    let t = Instant::now();
    while t.elapsed() < Duration::from_secs(5) {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    false
}

#[test]
fn subscribe_publish_and_subscribed_mode_in_resp2() {
    let (_d, server) = start_server(|_| {});
    let mut sub = Client::connect(server.addr());
    let mut p = Client::connect(server.addr());
    sub.send(&["SUBSCRIBE", "a", "b", "a"]);
    for (ch, n) in [("a", 1), ("b", 2), ("a", 2)] {
        assert_eq!(sub.read().unwrap(), arr(vec![b("subscribe"), b(ch), Resp::Int(n)]));
    }
    assert_eq!(p.cmd(&["PUBLISH", "a", "hello"]), Resp::Int(1));
    assert_eq!(p.cmd(&["PUBLISH", "nobody", "x"]), Resp::Int(0));
    assert_eq!(sub.read().unwrap(), arr(vec![b("message"), b("a"), b("hello")]));

    assert_eq!(
        sub.cmd(&["GET", "x"]),
        Resp::Error(
            "ERR Can't execute 'get': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in \
             this context"
                .into()
        )
    );
    assert_eq!(sub.cmd(&["PING"]), arr(vec![b("pong"), b("")]));
    assert_eq!(sub.cmd(&["PING", "hi"]), arr(vec![b("pong"), b("hi")]));

    // A pattern: a client matching by channel and by pattern receives the message twice.
    assert_eq!(sub.cmd(&["PSUBSCRIBE", "a*"]), arr(vec![b("psubscribe"), b("a*"), Resp::Int(3)]));
    assert_eq!(p.cmd(&["PUBLISH", "a", "m"]), Resp::Int(2));
    let mut got = vec![sub.read().unwrap(), sub.read().unwrap()];
    got.sort_by_key(|r| format!("{r:?}"));
    assert_eq!(got, vec![arr(vec![b("message"), b("a"), b("m")]), arr(vec![b("pmessage"), b("a*"), b("a"), b("m")])]);
    assert_eq!(p.cmd(&["PUBLISH", "abc", "z"]), Resp::Int(1));
    assert_eq!(sub.read().unwrap(), arr(vec![b("pmessage"), b("a*"), b("abc"), b("z")]));

    // UNSUBSCRIBE without arguments: every channel, in subscription order; then nil once none is left.
    sub.send(&["UNSUBSCRIBE"]);
    assert_eq!(sub.read().unwrap(), arr(vec![b("unsubscribe"), b("a"), Resp::Int(2)]));
    assert_eq!(sub.read().unwrap(), arr(vec![b("unsubscribe"), b("b"), Resp::Int(1)]));
    assert_eq!(sub.cmd(&["UNSUBSCRIBE"]), arr(vec![b("unsubscribe"), Resp::Nil, Resp::Int(1)]));
    assert_eq!(sub.cmd(&["PUNSUBSCRIBE", "a*", "q"]), arr(vec![b("punsubscribe"), b("a*"), Resp::Int(0)]));
    assert_eq!(sub.read().unwrap(), arr(vec![b("punsubscribe"), b("q"), Resp::Int(0)]));
    // Out of subscribed mode: everything runs again.
    assert_eq!(sub.cmd(&["PING"]), Resp::Simple("PONG".into()));
    assert_eq!(sub.cmd(&["GET", "x"]), Resp::Nil);
    assert_eq!(sub.cmd(&["PUNSUBSCRIBE"]), arr(vec![b("punsubscribe"), Resp::Nil, Resp::Int(0)]));
}

#[test]
fn resp3_subscribers_get_push_frames_and_may_run_any_command() {
    let (_d, server) = start_server(|_| {});
    let mut sub = Client::connect(server.addr());
    let mut p = Client::connect(server.addr());
    assert!(matches!(sub.cmd(&["HELLO", "3"]), Resp::Map(_)));
    assert_eq!(sub.cmd(&["SUBSCRIBE", "ch"]), Resp::Push(vec![b("subscribe"), b("ch"), Resp::Int(1)]));
    assert_eq!(sub.cmd(&["SET", "k", "v"]), Resp::Simple("OK".into()));
    assert_eq!(sub.cmd(&["PING"]), Resp::Simple("PONG".into()));
    assert_eq!(p.cmd(&["PUBLISH", "ch", "x"]), Resp::Int(1));
    assert_eq!(sub.read().unwrap(), Resp::Push(vec![b("message"), b("ch"), b("x")]));
    assert_eq!(sub.cmd(&["GET", "k"]), b("v"));
    // RESET leaves subscribed mode and drops the subscriptions.
    assert_eq!(sub.cmd(&["RESET"]), Resp::Simple("RESET".into()));
    assert_eq!(p.cmd(&["PUBLISH", "ch", "x"]), Resp::Int(0));
}

#[test]
fn pubsub_channels_numsub_numpat_and_errors() {
    let (_d, server) = start_server(|_| {});
    let mut s1 = Client::connect(server.addr());
    let mut s2 = Client::connect(server.addr());
    let mut c = Client::connect(server.addr());
    assert_eq!(c.cmd(&["PUBSUB", "CHANNELS"]), arr(vec![]));
    assert_eq!(c.cmd(&["PUBSUB", "NUMPAT"]), Resp::Int(0));
    s1.send(&["SUBSCRIBE", "news", "sport"]);
    s1.read();
    s1.read();
    s2.cmd(&["SUBSCRIBE", "news"]);
    s2.cmd(&["PSUBSCRIBE", "n*"]);
    s1.cmd(&["PSUBSCRIBE", "n*"]);
    assert_eq!(c.cmd(&["PUBSUB", "CHANNELS"]), arr(vec![b("news"), b("sport")]));
    assert_eq!(c.cmd(&["PUBSUB", "CHANNELS", "s*"]), arr(vec![b("sport")]));
    assert_eq!(
        c.cmd(&["PUBSUB", "NUMSUB", "news", "sport", "none"]),
        arr(vec![b("news"), Resp::Int(2), b("sport"), Resp::Int(1), b("none"), Resp::Int(0)])
    );
    assert_eq!(c.cmd(&["PUBSUB", "NUMSUB"]), arr(vec![]));
    assert_eq!(c.cmd(&["PUBSUB", "NUMPAT"]), Resp::Int(1));
    assert_eq!(c.cmd(&["PUBLISH", "news", "n"]), Resp::Int(4));
    assert_eq!(
        c.cmd(&["PUBSUB", "CHANNELS", "x", "y"]),
        Resp::Error("ERR unknown subcommand or wrong number of arguments for 'CHANNELS'. Try PUBSUB HELP.".into())
    );
    assert_eq!(c.cmd(&["PUBSUB", "foo"]), Resp::Error("ERR unknown subcommand 'foo'. Try PUBSUB HELP.".into()));
    assert_eq!(
        c.cmd(&["PUBSUB", "NUMPAT", "x"]),
        Resp::Error("ERR wrong number of arguments for 'pubsub|numpat' command".into())
    );
    assert_eq!(c.cmd(&["PUBLISH", "a"]), Resp::Error("ERR wrong number of arguments for 'publish' command".into()));
    assert_eq!(c.cmd(&["SUBSCRIBE"]), Resp::Error("ERR wrong number of arguments for 'subscribe' command".into()));

    // A subscriber that disconnects leaves nothing behind.
    drop(s1);
    drop(s2);
    assert!(eventually(|| c.cmd(&["PUBSUB", "NUMSUB", "news"]) == arr(vec![b("news"), Resp::Int(0)])));
    assert_eq!(c.cmd(&["PUBSUB", "NUMPAT"]), Resp::Int(0));
    assert_eq!(c.cmd(&["PUBSUB", "CHANNELS"]), arr(vec![]));
}

#[test]
fn redis_crate_pubsub_flow() {
    let (_d, server) = start_server(|_| {});
    let mut con = connect(&server);
    let mut publisher = connect(&server);
    let mut ps = con.as_pubsub();
    ps.subscribe("orders").unwrap();
    ps.psubscribe("ord*").unwrap();
    ps.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let n: i64 = redis::cmd("PUBLISH").arg("orders").arg("o-1").query(&mut publisher).unwrap();
    assert_eq!(n, 2);
    let mut seen = Vec::new();
    for _ in 0..2 {
        let m = ps.get_message().unwrap();
        seen.push((m.get_channel_name().to_string(), m.get_payload::<String>().unwrap(), m.from_pattern()));
    }
    seen.sort();
    assert_eq!(seen, vec![("orders".into(), "o-1".into(), false), ("orders".into(), "o-1".into(), true)]);
    ps.unsubscribe("orders").unwrap();
    ps.punsubscribe("ord*").unwrap();
    drop(ps);
    let v: Option<String> = redis::cmd("GET").arg("k").query(&mut con).unwrap();
    assert_eq!(v, None);
}

#[test]
fn a_slow_subscriber_does_not_block_publish_and_is_disconnected_past_the_limit() {
    let (_d, server) = start_server(|_| {});
    let mut slow = Client::connect(server.addr());
    let mut p = Client::connect(server.addr());
    slow.cmd(&["SUBSCRIBE", "firehose"]);
    // The subscriber reads nothing while 48 MB are published: more than the 32 MB queue limit plus what the
    // sockets buffer. Every PUBLISH is answered at once.
    let payload = "x".repeat(100 << 10);
    let total = 480;
    let started = Instant::now();
    let mut delivered = 0;
    for _ in 0..total {
        match p.cmd(&["PUBLISH", "firehose", &payload]) {
            Resp::Int(n) => delivered += n,
            other => panic!("{other:?}"),
        }
    }
    assert!(started.elapsed() < Duration::from_secs(60));
    assert!(delivered < total, "every message was queued: the limit did not apply");
    // The subscriber gets what was queued before the limit, then the connection is closed.
    let mut received = 0;
    while let Some(m) = slow.read() {
        assert_eq!(m.array()[0], b("message"));
        received += 1;
        assert!(received <= total);
    }
    assert!(received < total);
    assert!(eventually(|| p.cmd(&["PUBSUB", "NUMSUB", "firehose"]) == arr(vec![b("firehose"), Resp::Int(0)])));
}
