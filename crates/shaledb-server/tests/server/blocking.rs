//! Blocked clients: the order in which the clients blocked on one key are served, blocked consumer-group
//! reads whose stream goes away, and WAIT among the blocked clients.
//!
//! The ordering tests hold the commit step busy with a script while the blocking commands arrive a few
//! milliseconds apart, so that their first tries run in one group and are answered at the same moment:
//! the clients must then be served in the order their commands arrived, not in the order their
//! connections happened to see the first try's answer.

use crate::helpers::{start_server, Client, Resp, WRONGTYPE};
use shaledb_server::RunningServer;
use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// A script that keeps the commit step busy for `ms` milliseconds.
const BUSY: &str = "local t = redis.call('TIME') local s = t[1] * 1000000 + t[2] \
                    repeat local n = redis.call('TIME') until n[1] * 1000000 + n[2] - s >= tonumber(ARGV[1]) * 1000 \
                    return 1";

/// The gap between two commands sent from different connections: wide enough that the server reads them
/// in that order even on a loaded machine (while the script spins on one core).
const GAP: Duration = Duration::from_millis(15);

fn bulk(s: &str) -> Resp {
    Resp::Bulk(s.as_bytes().to_vec())
}

/// Waits until `n` clients are blocked on keys.
fn wait_blocked(srv: &RunningServer, n: usize) {
    let reg = &srv.shared().store.blocking;
    let deadline = Instant::now() + Duration::from_secs(10);
    while reg.blocked_clients() != n && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(2));
    }
    assert_eq!(reg.blocked_clients(), n, "blocked clients");
}

/// Sends each request from its own connection, `GAP` apart, while a script holds the commit step.
fn send_while_busy(holder: &mut Client, requests: &mut [(&mut Client, Vec<String>)]) {
    let busy_ms = (requests.len() as u128 * GAP.as_millis() + 30).to_string();
    holder.send(&["EVAL", BUSY, "0", &busy_ms]);
    std::thread::sleep(Duration::from_millis(5));
    for (c, args) in requests.iter_mut() {
        let a: Vec<&str> = args.iter().map(String::as_str).collect();
        c.send(&a);
        std::thread::sleep(GAP);
    }
    assert_eq!(holder.read(), Some(Resp::Int(1)));
}

/// Before the fix, clients parked themselves after their first try's answer came back, in whatever order
/// their connections ran: 29 of 30 rounds of 8 BLPOPs were served out of order (against 0 for
/// redis-server 7.0.15 and for the fixed server).
#[test]
fn blocked_pops_are_served_in_the_order_their_commands_arrived() {
    let (_dir, srv) = start_server(|_| {});
    let n = 8;
    let mut clients: Vec<Client> = (0..n).map(|_| Client::connect(srv.addr())).collect();
    let mut holder = Client::connect(srv.addr());
    let mut pusher = Client::connect(srv.addr());
    for round in 0..12 {
        let key = format!("q{round}");
        let mut reqs: Vec<(&mut Client, Vec<String>)> = Vec::new();
        let mut kinds = Vec::new();
        for (k, c) in clients.iter_mut().enumerate() {
            // Even rounds: BLPOP only; odd rounds: a mix of the list pops, some from each end.
            let kind = if round % 2 == 0 { 0 } else { k % 4 };
            let dst = format!("dst{round}-{k}");
            let args: Vec<&str> = match kind {
                0 => vec!["BLPOP", &key, "10"],
                1 => vec!["BRPOPLPUSH", &key, &dst, "10"],
                2 => vec!["BLMOVE", &key, &dst, "LEFT", "RIGHT", "10"],
                _ => vec!["BLMPOP", "10", "1", &key, "RIGHT"],
            };
            kinds.push(kind);
            reqs.push((c, args.into_iter().map(String::from).collect()));
        }
        send_while_busy(&mut holder, &mut reqs);
        wait_blocked(&srv, n);
        let values: Vec<String> = (0..n).map(|k| format!("v{k}")).collect();
        let mut push = vec!["RPUSH", key.as_str()];
        push.extend(values.iter().map(String::as_str));
        assert_eq!(pusher.cmd(&push), Resp::Int(n as i64));
        // Redis serves the waiters in the order they blocked, each popping from its own end.
        let mut list: VecDeque<&String> = values.iter().collect();
        for (k, c) in clients.iter_mut().enumerate() {
            let want = match kinds[k] {
                0 => Resp::Array(vec![bulk(&key), bulk(list.pop_front().unwrap())]),
                1 => bulk(list.pop_back().unwrap()),
                2 => bulk(list.pop_front().unwrap()),
                _ => Resp::Array(vec![bulk(&key), Resp::Array(vec![bulk(list.pop_back().unwrap())])]),
            };
            assert_eq!(c.read(), Some(want), "round {round}, client {k} (sent in that order)");
        }
        wait_blocked(&srv, 0);
    }
}

/// The same for sorted sets: BZPOPMIN and BZPOPMAX clients are served in the order they blocked.
#[test]
fn blocked_sorted_set_pops_are_served_in_the_order_their_commands_arrived() {
    let (_dir, srv) = start_server(|_| {});
    let n = 6;
    let mut clients: Vec<Client> = (0..n).map(|_| Client::connect(srv.addr())).collect();
    let mut holder = Client::connect(srv.addr());
    let mut pusher = Client::connect(srv.addr());
    for round in 0..6 {
        let key = format!("z{round}");
        let mut reqs: Vec<(&mut Client, Vec<String>)> = Vec::new();
        for (k, c) in clients.iter_mut().enumerate() {
            let cmd = if k % 3 == 2 { "BZPOPMAX" } else { "BZPOPMIN" };
            reqs.push((c, vec![cmd.to_string(), key.clone(), "10".to_string()]));
        }
        send_while_busy(&mut holder, &mut reqs);
        wait_blocked(&srv, n);
        let mut zadd = vec!["ZADD".to_string(), key.clone()];
        for m in 0..n {
            zadd.extend([m.to_string(), format!("m{m}")]);
        }
        let args: Vec<&str> = zadd.iter().map(String::as_str).collect();
        assert_eq!(pusher.cmd(&args), Resp::Int(n as i64));
        let mut members: VecDeque<usize> = (0..n).collect();
        for (k, c) in clients.iter_mut().enumerate() {
            let m = if k % 3 == 2 { members.pop_back() } else { members.pop_front() }.unwrap();
            let want = Resp::Array(vec![bulk(&key), bulk(&format!("m{m}")), bulk(&m.to_string())]);
            assert_eq!(c.read(), Some(want), "round {round}, client {k}");
        }
    }
}

/// Redis's list unit, "BRPOPLPUSH with multiple blocked clients": the first client's target holds a
/// string, so it is answered WRONGTYPE and the element goes to the second client.
#[test]
fn brpoplpush_to_a_wrong_type_target_answers_in_its_turn() {
    let (_dir, srv) = start_server(|_| {});
    let mut c1 = Client::connect(srv.addr());
    let mut c2 = Client::connect(srv.addr());
    let mut holder = Client::connect(srv.addr());
    let mut r = Client::connect(srv.addr());
    for round in 0..10 {
        let (src, t1, t2) = (format!("bl{round}"), format!("t1-{round}"), format!("t2-{round}"));
        assert_eq!(r.cmd(&["SET", &t1, "nolist"]), Resp::Simple("OK".into()));
        let a1 = vec!["BRPOPLPUSH".to_string(), src.clone(), t1.clone(), "10".into()];
        let a2 = vec!["BRPOPLPUSH".to_string(), src.clone(), t2.clone(), "10".into()];
        send_while_busy(&mut holder, &mut [(&mut c1, a1), (&mut c2, a2)]);
        wait_blocked(&srv, 2);
        assert_eq!(r.cmd(&["LPUSH", &src, "foo"]), Resp::Int(1));
        assert_eq!(c1.read(), Some(Resp::Error(WRONGTYPE.into())), "round {round}");
        assert_eq!(c2.read(), Some(bulk("foo")), "round {round}");
        assert_eq!(r.cmd(&["LRANGE", &t2, "0", "-1"]), Resp::Array(vec![bulk("foo")]));
        assert_eq!(r.cmd(&["EXISTS", &src]), Resp::Int(0));
    }
}

/// A DEL or SET that reaches the server right after a blocking XREADGROUP (in the same group of writes as
/// its first try) ends the wait with Redis's error: the client parked before the next write ran.
#[test]
fn a_blocked_xreadgroup_ends_when_its_stream_goes_right_after() {
    let (_dir, srv) = start_server(|_| {});
    let mut rd = Client::connect(srv.addr());
    let mut holder = Client::connect(srv.addr());
    let mut r = Client::connect(srv.addr());
    for round in 0..8 {
        let key = format!("s{round}");
        assert_eq!(r.cmd(&["XADD", &key, "666", "f", "v"]), bulk("666-0"));
        assert_eq!(r.cmd(&["XGROUP", "CREATE", &key, "g", "$"]), Resp::Simple("OK".into()));
        let read: Vec<String> = ["XREADGROUP", "GROUP", "g", "Alice", "BLOCK", "0", "STREAMS", &key, ">"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let write: Vec<String> =
            if round % 2 == 0 { vec!["DEL".into(), key.clone()] } else { vec!["SET".into(), key.clone(), "x".into()] };
        let mut other = Client::connect(srv.addr());
        send_while_busy(&mut holder, &mut [(&mut rd, read), (&mut other, write)]);
        assert_eq!(rd.read(), Some(Resp::Error("UNBLOCKED the stream key no longer exists".into())), "round {round}");
        assert!(matches!(other.read(), Some(Resp::Int(1) | Resp::Simple(_))));
        wait_blocked(&srv, 0);
    }
}

/// WAIT for replicas that never come blocks the client: INFO counts it in blocked_clients (as Redis does)
/// until CLIENT UNBLOCK ends the wait with the count of replicas reached (0).
#[test]
fn wait_counts_as_a_blocked_client() {
    let (_dir, srv) = start_server(|_| {});
    let mut w = Client::connect(srv.addr());
    let Resp::Int(id) = w.cmd(&["CLIENT", "ID"]) else { panic!("CLIENT ID") };
    let mut r = Client::connect(srv.addr());
    let blocked = |r: &mut Client| -> String {
        let info = r.cmd(&["INFO", "clients"]).text();
        info.lines().find(|l| l.starts_with("blocked_clients:")).unwrap_or_default().to_string()
    };
    assert_eq!(blocked(&mut r), "blocked_clients:0");
    w.send(&["WAIT", "1", "0"]);
    let deadline = Instant::now() + Duration::from_secs(10);
    while blocked(&mut r) != "blocked_clients:1" && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(blocked(&mut r), "blocked_clients:1");
    assert_eq!(r.cmd(&["CLIENT", "UNBLOCK", &id.to_string()]), Resp::Int(1));
    assert_eq!(w.read(), Some(Resp::Int(0)));
    assert_eq!(blocked(&mut r), "blocked_clients:0");
}
