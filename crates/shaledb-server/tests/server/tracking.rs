//! CLIENT TRACKING: invalidation messages as RESP3 pushes and, through REDIRECT, as Pub/Sub messages to a
//! RESP2 subscriber; BCAST, OPTIN/OPTOUT, NOLOOP; the tracking commands' replies and errors; INFO's figures
//! and `tracking-table-max-keys`; and the messages of a sequence of commands compared with redis-server's.

use crate::helpers::{redis_or_skip, start_server, Client, Resp};
use std::net::SocketAddr;

fn b(s: &str) -> Resp {
    Resp::Bulk(s.as_bytes().to_vec())
}

fn ok() -> Resp {
    Resp::Simple("OK".into())
}

/// The RESP3 push `invalidate [keys]` (`None`: the null of FLUSHDB / FLUSHALL).
fn inv(keys: Option<&[&str]>) -> Resp {
    Resp::Push(vec![b("invalidate"), keys.map_or(Resp::Nil, |k| Resp::Array(k.iter().map(|k| b(k)).collect()))])
}

/// The RESP2 Pub/Sub message a REDIRECT target subscribed to `__redis__:invalidate` receives.
fn inv_message(keys: Option<&[&str]>) -> Resp {
    Resp::Array(vec![
        b("message"),
        b("__redis__:invalidate"),
        keys.map_or(Resp::Nil, |k| Resp::Array(k.iter().map(|k| b(k)).collect())),
    ])
}

fn resp3(addr: SocketAddr) -> Client {
    let mut c = Client::connect(addr);
    assert!(matches!(c.cmd(&["HELLO", "3"]), Resp::Map(_)));
    c
}

fn id_of(c: &mut Client) -> String {
    match c.cmd(&["CLIENT", "ID"]) {
        Resp::Int(n) => n.to_string(),
        other => panic!("CLIENT ID answered {other:?}"),
    }
}

/// Sends PING and returns what arrives before its PONG (the messages already queued for `c`).
fn pending(c: &mut Client) -> Vec<Resp> {
    c.send(&["PING"]);
    let mut out = Vec::new();
    loop {
        match c.read().expect("a reply") {
            Resp::Simple(p) if p == "PONG" => return out,
            // RESP2 subscribed mode answers PING as a message.
            Resp::Array(v) if v.first() == Some(&b("pong")) => return out,
            other => out.push(other),
        }
    }
}

#[test]
fn resp3_pushes_follow_reads_writes_and_noloop() {
    let (_dir, server) = start_server(|_| {});
    let addr = server.addr();
    let mut t = resp3(addr);
    let mut w = Client::connect(addr);
    assert_eq!(t.cmd(&["CLIENT", "TRACKING", "on"]), ok());
    assert_eq!(w.cmd(&["SET", "k", "1"]), ok());
    assert_eq!(t.cmd(&["GET", "k"]), b("1"));
    // Another client's write: the push is queued before the writer hears back.
    assert_eq!(w.cmd(&["SET", "k", "2"]), ok());
    assert_eq!(pending(&mut t), vec![inv(Some(&["k"]))]);
    // Sent once: the key left the table.
    assert_eq!(w.cmd(&["SET", "k", "3"]), ok());
    assert_eq!(pending(&mut t), Vec::<Resp>::new());
    // The client's own write: the push follows the write's reply.
    assert_eq!(t.cmd(&["HGET", "h", "f"]), Resp::Nil);
    assert_eq!(t.cmd(&["HSET", "h", "f", "v"]), Resp::Int(1));
    assert_eq!(t.read(), Some(inv(Some(&["h"]))));
    // A member-only write (an existing field) is a write of the key too.
    assert_eq!(t.cmd(&["HGET", "h", "f"]), b("v"));
    assert_eq!(w.cmd(&["HSET", "h", "f", "w"]), Resp::Int(0));
    assert_eq!(pending(&mut t), vec![inv(Some(&["h"]))]);
    // A transaction's reads are tracked, and its own writes' pushes follow EXEC's reply.
    assert_eq!(t.cmd(&["MULTI"]), ok());
    assert_eq!(t.cmd(&["GET", "m"]), Resp::Simple("QUEUED".into()));
    assert_eq!(t.cmd(&["SET", "m", "1"]), Resp::Simple("QUEUED".into()));
    assert_eq!(t.cmd(&["EXEC"]), Resp::Array(vec![Resp::Nil, ok()]));
    assert_eq!(t.read(), Some(inv(Some(&["m"]))));
    // NOLOOP: the client's own writes are not reported, other clients' are.
    assert_eq!(t.cmd(&["CLIENT", "TRACKING", "on", "NOLOOP"]), ok());
    assert_eq!(t.cmd(&["MGET", "x", "y"]), Resp::Array(vec![Resp::Nil, Resp::Nil]));
    assert_eq!(t.cmd(&["SET", "x", "1"]), ok());
    assert_eq!(w.cmd(&["SET", "y", "1"]), ok());
    assert_eq!(pending(&mut t), vec![inv(Some(&["y"]))]);
    // FLUSHALL: one null invalidation, and an empty table.
    assert_eq!(t.cmd(&["GET", "z"]), Resp::Nil);
    assert_eq!(w.cmd(&["FLUSHALL"]), ok());
    assert_eq!(pending(&mut t), vec![inv(None)]);
    let info = match t.cmd(&["INFO", "stats"]) {
        Resp::Verbatim(s) => s,
        other => other.text(),
    };
    assert!(info.contains("tracking_total_keys:0\r\n"), "{info}");
    // Tracking off: nothing more.
    assert_eq!(w.cmd(&["SET", "k", "3"]), ok());
    assert_eq!(t.cmd(&["GET", "k"]), b("3"));
    assert_eq!(t.cmd(&["CLIENT", "TRACKING", "off"]), ok());
    assert_eq!(w.cmd(&["SET", "k", "4"]), ok());
    assert_eq!(pending(&mut t), Vec::<Resp>::new());
}

#[test]
fn redirect_to_a_resp2_subscriber_and_a_broken_redirection() {
    let (_dir, server) = start_server(|_| {});
    let addr = server.addr();
    let mut sub = Client::connect(addr);
    let sub_id = id_of(&mut sub);
    assert_eq!(
        sub.cmd(&["SUBSCRIBE", "__redis__:invalidate"]),
        Resp::Array(vec![b("subscribe"), b("__redis__:invalidate"), Resp::Int(1)])
    );
    let mut t = resp3(addr);
    let mut w = Client::connect(addr);
    assert_eq!(
        t.cmd(&["CLIENT", "TRACKING", "on", "REDIRECT", "999999"]),
        Resp::Error("ERR The client ID you want redirect to does not exist".into())
    );
    assert_eq!(t.cmd(&["CLIENT", "TRACKING", "on", "REDIRECT", &sub_id]), ok());
    assert_eq!(t.cmd(&["CLIENT", "GETREDIR"]), Resp::Int(sub_id.parse().unwrap()));
    assert_eq!(t.cmd(&["GET", "a"]), Resp::Nil);
    assert_eq!(w.cmd(&["SET", "a", "1"]), ok());
    assert_eq!(sub.read(), Some(inv_message(Some(&["a"]))));
    assert_eq!(t.cmd(&["GET", "a"]), b("1"));
    assert_eq!(w.cmd(&["FLUSHDB"]), ok());
    assert_eq!(sub.read(), Some(inv_message(None)));
    // The target goes away: the tracking client (RESP3) is told at its next invalidation.
    assert_eq!(sub.cmd(&["QUIT"]), ok());
    assert!(sub.closed());
    assert_eq!(t.cmd(&["GET", "a"]), Resp::Nil);
    // The target's connection may take a moment to end.
    let mut got = Vec::new();
    for i in 0..100 {
        assert_eq!(w.cmd(&["SET", "a", &i.to_string()]), ok());
        got = pending(&mut t);
        if !got.is_empty() {
            break;
        }
        assert_eq!(t.cmd(&["GET", "a"]), b(&i.to_string()));
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert_eq!(got, vec![Resp::Push(vec![b("tracking-redir-broken"), Resp::Int(sub_id.parse().unwrap())])]);
    let Resp::Map(info) = t.cmd(&["CLIENT", "TRACKINGINFO"]) else { panic!("not a map") };
    assert_eq!(info[0], (b("flags"), Resp::Set(vec![b("on"), b("broken_redirect")])));
}

#[test]
fn bcast_optin_optout_and_their_errors() {
    let (_dir, server) = start_server(|_| {});
    let addr = server.addr();
    let mut t = resp3(addr);
    let mut w = Client::connect(addr);
    let err = |s: &str| Resp::Error(format!("ERR {s}"));
    assert_eq!(
        t.cmd(&["CLIENT", "TRACKING", "on", "PREFIX", "a"]),
        err("PREFIX option requires BCAST mode to be enabled")
    );
    assert_eq!(
        t.cmd(&["CLIENT", "TRACKING", "on", "BCAST", "OPTIN"]),
        err("OPTIN and OPTOUT are not compatible with BCAST")
    );
    assert_eq!(
        t.cmd(&["CLIENT", "TRACKING", "on", "OPTIN", "OPTOUT"]),
        err("You can't specify both OPTIN mode and OPTOUT mode")
    );
    assert_eq!(t.cmd(&["CLIENT", "TRACKING", "on", "bogus"]), err("syntax error"));
    assert_eq!(t.cmd(&["CLIENT", "TRACKING", "maybe"]), err("syntax error"));
    assert_eq!(
        t.cmd(&["CLIENT", "CACHING", "yes"]),
        err("CLIENT CACHING can be called only when the client is in tracking mode with OPTIN or OPTOUT mode enabled")
    );
    assert_eq!(t.cmd(&["CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "a:", "PREFIX", "b:"]), ok());
    assert_eq!(
        t.cmd(&["CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "a"]),
        err("Prefix 'a' overlaps with an existing prefix 'a:'. Prefixes for a single client must not overlap.")
    );
    assert_eq!(
        t.cmd(&["CLIENT", "TRACKING", "on"]),
        err("You can't switch BCAST mode on/off before disabling tracking for this client, and then re-enabling it with a different mode.")
    );
    // One message per prefix, with every key of the write under it (a transaction's writes together).
    assert_eq!(w.cmd(&["MULTI"]), ok());
    for k in ["b:2", "a:1", "c:1", "b:1"] {
        assert_eq!(w.cmd(&["INCR", k]), Resp::Simple("QUEUED".into()));
    }
    assert!(matches!(w.cmd(&["EXEC"]), Resp::Array(_)));
    assert_eq!(pending(&mut t), vec![inv(Some(&["a:1"])), inv(Some(&["b:1", "b:2"]))]);
    let Resp::Map(info) = t.cmd(&["CLIENT", "TRACKINGINFO"]) else { panic!("not a map") };
    assert_eq!(
        info,
        vec![
            (b("flags"), Resp::Set(vec![b("on"), b("bcast")])),
            (b("redirect"), Resp::Int(0)),
            (b("prefixes"), Resp::Array(vec![b("a:"), b("b:")])),
        ]
    );
    assert_eq!(t.cmd(&["CLIENT", "TRACKING", "off"]), ok());
    // OPTIN: only the command after CLIENT CACHING yes is tracked.
    assert_eq!(t.cmd(&["CLIENT", "TRACKING", "on", "OPTIN"]), ok());
    assert_eq!(
        t.cmd(&["CLIENT", "CACHING", "no"]),
        err("CLIENT CACHING NO is only valid when tracking is enabled in OPTOUT mode.")
    );
    assert_eq!(t.cmd(&["GET", "p"]), Resp::Nil);
    assert_eq!(t.cmd(&["CLIENT", "CACHING", "yes"]), ok());
    assert_eq!(t.cmd(&["GET", "q"]), Resp::Nil);
    assert_eq!(t.cmd(&["GET", "r"]), Resp::Nil);
    assert_eq!(w.cmd(&["MSET", "p", "1", "q", "1", "r", "1"]), ok());
    assert_eq!(pending(&mut t), vec![inv(Some(&["q"]))]);
    assert_eq!(
        t.cmd(&["CLIENT", "TRACKING", "on", "OPTOUT"]),
        err("You can't switch OPTIN/OPTOUT mode before disabling tracking for this client, and then re-enabling it with a different mode.")
    );
    assert_eq!(t.cmd(&["CLIENT", "TRACKING", "off"]), ok());
    // OPTOUT: every read is tracked but the one after CLIENT CACHING no.
    assert_eq!(t.cmd(&["CLIENT", "TRACKING", "on", "OPTOUT"]), ok());
    assert_eq!(t.cmd(&["CLIENT", "CACHING", "no"]), ok());
    assert_eq!(t.cmd(&["GET", "p"]), b("1"));
    assert_eq!(t.cmd(&["GET", "q"]), b("1"));
    assert_eq!(w.cmd(&["MSET", "p", "2", "q", "2"]), ok());
    assert_eq!(pending(&mut t), vec![inv(Some(&["q"]))]);
    // RESET switches tracking off.
    assert_eq!(t.cmd(&["RESET"]), Resp::Simple("RESET".into()));
    assert_eq!(t.cmd(&["CLIENT", "GETREDIR"]), Resp::Int(-1));
}

#[test]
fn info_figures_and_the_table_limit() {
    let (_dir, server) = start_server(|_| {});
    let addr = server.addr();
    let mut sub = Client::connect(addr);
    let sub_id = id_of(&mut sub);
    assert!(matches!(sub.cmd(&["SUBSCRIBE", "__redis__:invalidate"]), Resp::Array(_)));
    let mut t = Client::connect(addr);
    let mut other = Client::connect(addr);
    assert_eq!(t.cmd(&["CLIENT", "TRACKING", "on", "REDIRECT", &sub_id]), ok());
    assert_eq!(other.cmd(&["CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "p:"]), ok());
    for i in 0..10 {
        assert_eq!(t.cmd(&["GET", &format!("k{i}")]), Resp::Nil);
    }
    assert!(matches!(other.cmd(&["GET", "k0"]), Resp::Nil));
    let info = |c: &mut Client| -> String {
        match c.cmd(&["INFO"]) {
            Resp::Bulk(s) => String::from_utf8(s).unwrap(),
            other => other.text(),
        }
    };
    let text = info(&mut t);
    for want in ["tracking_total_keys:10\r\n", "tracking_total_items:10\r\n", "tracking_total_prefixes:1\r\n"] {
        assert!(text.contains(want), "{want} not in {text}");
    }
    assert!(text.contains("tracking_clients:2\r\n"), "{text}");
    assert_eq!(t.cmd(&["CONFIG", "SET", "tracking-table-max-keys", "3"]), ok());
    let mut evicted = Vec::new();
    for _ in 0..7 {
        match sub.read() {
            Some(Resp::Array(v)) if v.len() == 3 => evicted.push(v[2].clone()),
            other => panic!("not an invalidation: {other:?}"),
        }
    }
    assert_eq!(evicted.len(), 7);
    assert!(info(&mut t).contains("tracking_total_keys:3\r\n"));
    assert_eq!(
        t.cmd(&["CONFIG", "GET", "tracking-table-max-keys"]),
        Resp::Array(vec![b("tracking-table-max-keys"), b("3")])
    );
}

/// The same sequence on redis-server and on shaledb server: what a RESP3 tracking client, a RESP2
/// subscriber receiving a redirected client's invalidations, and a BCAST client with NOLOOP receive after
/// each step must be the same.
#[test]
fn invalidations_of_a_sequence_match_redis() {
    let Some(redis) = redis_or_skip() else { return };
    let (_dir, shale) = start_server(|c| c.appendfsync = shaledb_server::Appendfsync::No);
    let want = run_sequence(redis.addr);
    let got = run_sequence(shale.addr());
    // The comparison means something only if the sequence makes redis-server send messages.
    let messages: usize = want.iter().map(|s| s.1.len() - 1 + s.2.len() + s.3.len() + s.4.len()).sum();
    assert!(messages >= 12, "only {messages} messages from redis-server: {want:?}");
    assert_eq!(got.len(), want.len());
    for (g, w) in got.iter().zip(&want) {
        assert_eq!(g, w, "step {} differs", w.0);
    }
}

/// Who runs a step of [`run_sequence`].
#[derive(Clone, Copy)]
enum Who {
    Tracker,
    Redirected,
    Bcast,
    Writer,
}

/// One step's record: its label, the reply of the client that ran it (with the tracker's own pushes), then what
/// the tracker, the redirect subscriber and the BCAST client received.
type StepRecord = (String, Vec<Resp>, Vec<Resp>, Vec<Resp>, Vec<Resp>);

fn run_sequence(addr: SocketAddr) -> Vec<StepRecord> {
    let mut tracker = resp3(addr);
    let mut sub = Client::connect(addr);
    let sub_id = id_of(&mut sub);
    assert!(matches!(sub.cmd(&["SUBSCRIBE", "__redis__:invalidate"]), Resp::Array(_)));
    let mut redirected = Client::connect(addr);
    let mut bcast = resp3(addr);
    let mut writer = Client::connect(addr);
    assert_eq!(writer.cmd(&["FLUSHALL"]), ok());
    assert_eq!(tracker.cmd(&["CLIENT", "TRACKING", "on"]), ok());
    assert_eq!(redirected.cmd(&["CLIENT", "TRACKING", "on", "REDIRECT", &sub_id]), ok());
    assert_eq!(bcast.cmd(&["CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "u:", "PREFIX", "v:", "NOLOOP"]), ok());
    let _ = pending(&mut tracker);
    let _ = pending(&mut bcast);
    use Who::*;
    let steps: &[(Who, &[&str])] = &[
        (Writer, &["MSET", "a", "1", "b", "2", "u:1", "x", "v:1", "y"]),
        (Tracker, &["MGET", "a", "b", "c"]),
        (Redirected, &["GET", "a"]),
        (Redirected, &["HGETALL", "h"]),
        (Writer, &["SET", "a", "3"]),
        (Writer, &["DEL", "b", "c"]),
        (Tracker, &["GET", "a"]),
        (Writer, &["HSET", "h", "f", "1"]),
        (Redirected, &["HGET", "h", "f"]),
        (Writer, &["HSET", "h", "f", "2"]),
        (Bcast, &["SET", "u:2", "own"]),
        (Writer, &["INCR", "u:2"]),
        (Tracker, &["EXISTS", "a", "l"]),
        (Writer, &["RPUSH", "l", "1", "2"]),
        (Tracker, &["LRANGE", "l", "0", "-1"]),
        (Writer, &["LSET", "l", "0", "z"]),
        (Writer, &["RENAME", "a", "v:2"]),
        (Tracker, &["GET", "v:2"]),
        (Tracker, &["SET", "v:2", "mine"]),
        (Redirected, &["GET", "e"]),
        (Writer, &["SET", "e", "1", "PX", "50"]),
        (Redirected, &["GET", "e"]),
        (Tracker, &["SCARD", "s"]),
        (Writer, &["MULTI"]),
        (Writer, &["SADD", "s", "m"]),
        (Writer, &["SET", "u:3", "1"]),
        (Writer, &["EXEC"]),
        (Tracker, &["GET", "n"]),
        (Redirected, &["GET", "n"]),
        (Writer, &["FLUSHDB"]),
    ];
    let mut out = Vec::new();
    for (i, (who, args)) in steps.iter().enumerate() {
        let c = match who {
            Tracker => &mut tracker,
            Redirected => &mut redirected,
            Bcast => &mut bcast,
            Writer => &mut writer,
        };
        c.send(args);
        let mut reply = vec![c.read().expect("a reply")];
        // A client's own push follows its reply: collect it with the others below.
        if args[0] == "SET" && args[1] == "e" {
            // Let the key expire (its deletion is reported too, by the expiry sweep or on access).
            std::thread::sleep(std::time::Duration::from_millis(300));
        }
        if matches!(who, Tracker) {
            reply.extend(pending(&mut tracker));
        }
        let t = if matches!(who, Tracker) { Vec::new() } else { pending(&mut tracker) };
        let s = pending(&mut sub);
        let bc = pending(&mut bcast);
        out.push((format!("{i}: {args:?}"), reply, t, s, bc));
    }
    out
}
