//! List commands and blocking pops against a running server.

use crate::helpers::{
    connect, e, encode, i, q, s, start_everysec as start_server, start_server as start_always, v, Client, Resp,
    WRONGTYPE,
};
use rand::{Rng, SeedableRng};
use redis::{FromRedisValue, Value};
use std::collections::VecDeque;
use std::time::{Duration, Instant};

#[test]
fn push_pop_range_index() {
    let (srv, _dir) = start_server();
    let c = &mut connect(&srv);
    assert_eq!(i(c, &["RPUSH", "l", "a", "b", "c"]), 3);
    assert_eq!(i(c, &["LPUSH", "l", "z", "y"]), 5);
    assert_eq!(v(c, &["LRANGE", "l", "0", "-1"]), ["y", "z", "a", "b", "c"]);
    assert_eq!(v(c, &["LRANGE", "l", "-2", "100"]), ["b", "c"]);
    assert!(v(c, &["LRANGE", "l", "3", "1"]).is_empty());
    assert!(v(c, &["LRANGE", "missing", "0", "-1"]).is_empty());
    assert_eq!(i(c, &["LLEN", "l"]), 5);
    assert_eq!(i(c, &["LLEN", "missing"]), 0);
    assert_eq!(s(c, &["LINDEX", "l", "0"]).as_deref(), Some("y"));
    assert_eq!(s(c, &["LINDEX", "l", "-1"]).as_deref(), Some("c"));
    assert_eq!(s(c, &["LINDEX", "l", "5"]), None);
    assert_eq!(s(c, &["LINDEX", "missing", "x"]), None);
    assert_eq!(e(c, &["LINDEX", "l", "x"]), "ERR value is not an integer or out of range");
    assert_eq!(s(c, &["LPOP", "l"]).as_deref(), Some("y"));
    assert_eq!(s(c, &["RPOP", "l"]).as_deref(), Some("c"));
    assert_eq!(v(c, &["LPOP", "l", "2"]), ["z", "a"]);
    assert!(v(c, &["LPOP", "l", "0"]).is_empty());
    assert_eq!(q::<Value>(c, &["LPOP", "missing", "2"]), Value::Nil);
    assert_eq!(e(c, &["LPOP", "l", "-1"]), "ERR value is out of range, must be positive");
    assert_eq!(v(c, &["RPOP", "l", "9"]), ["b"]);
    assert_eq!(i(c, &["EXISTS", "l"]), 0, "an emptied list is deleted");
    assert_eq!(i(c, &["LPUSHX", "l", "a"]), 0);
    assert_eq!(i(c, &["RPUSHX", "l", "a"]), 0);
    assert_eq!(i(c, &["RPUSH", "l", "a"]), 1);
    assert_eq!(i(c, &["RPUSHX", "l", "b", "c"]), 3);
    assert_eq!(i(c, &["LPUSHX", "l", "0"]), 4);
    assert_eq!(v(c, &["LRANGE", "l", "0", "-1"]), ["0", "a", "b", "c"]);
    assert_eq!(s(c, &["TYPE", "l"]).as_deref(), Some("list"));
}

#[test]
fn set_insert_rem_trim_pos() {
    let (srv, _dir) = start_server();
    let c = &mut connect(&srv);
    assert_eq!(e(c, &["LSET", "l", "0", "x"]), "ERR no such key");
    i(c, &["RPUSH", "l", "a", "b", "c", "b", "a"]);
    assert_eq!(s(c, &["LSET", "l", "-1", "A"]).as_deref(), Some("OK"));
    assert_eq!(e(c, &["LSET", "l", "5", "x"]), "ERR index out of range");
    assert_eq!(i(c, &["LINSERT", "l", "BEFORE", "b", "x"]), 6);
    assert_eq!(i(c, &["LINSERT", "l", "after", "A", "y"]), 7);
    assert_eq!(i(c, &["LINSERT", "l", "after", "nope", "y"]), -1);
    assert_eq!(i(c, &["LINSERT", "missing", "after", "a", "y"]), 0);
    assert_eq!(e(c, &["LINSERT", "l", "middle", "a", "y"]), "ERR syntax error");
    assert_eq!(v(c, &["LRANGE", "l", "0", "-1"]), ["a", "x", "b", "c", "b", "A", "y"]);
    assert_eq!(i(c, &["LREM", "l", "-1", "b"]), 1);
    assert_eq!(v(c, &["LRANGE", "l", "0", "-1"]), ["a", "x", "b", "c", "A", "y"]);
    assert_eq!(i(c, &["LREM", "l", "0", "nope"]), 0);
    assert_eq!(i(c, &["LREM", "missing", "0", "a"]), 0);
    assert_eq!(e(c, &["LREM", "l", "x", "a"]), "ERR value is not an integer or out of range");
    assert_eq!(s(c, &["LTRIM", "l", "1", "-2"]).as_deref(), Some("OK"));
    assert_eq!(v(c, &["LRANGE", "l", "0", "-1"]), ["x", "b", "c", "A"]);
    assert_eq!(s(c, &["LTRIM", "l", "5", "10"]).as_deref(), Some("OK"));
    assert_eq!(i(c, &["EXISTS", "l"]), 0);
    i(c, &["RPUSH", "p", "a", "b", "c", "1", "2", "3", "c", "c"]);
    assert_eq!(q::<Option<i64>>(c, &["LPOS", "p", "c"]), Some(2));
    assert_eq!(q::<Option<i64>>(c, &["LPOS", "p", "c", "RANK", "2"]), Some(6));
    assert_eq!(q::<Option<i64>>(c, &["LPOS", "p", "c", "RANK", "-1"]), Some(7));
    assert_eq!(q::<Vec<i64>>(c, &["LPOS", "p", "c", "COUNT", "0"]), [2, 6, 7]);
    assert_eq!(q::<Vec<i64>>(c, &["LPOS", "p", "c", "COUNT", "2", "RANK", "-1"]), [7, 6]);
    assert_eq!(q::<Vec<i64>>(c, &["LPOS", "p", "c", "COUNT", "0", "MAXLEN", "3"]), [2]);
    assert_eq!(q::<Option<i64>>(c, &["LPOS", "p", "zz"]), None);
    assert!(q::<Vec<i64>>(c, &["LPOS", "missing", "c", "COUNT", "1"]).is_empty());
    assert!(e(c, &["LPOS", "p", "c", "RANK", "0"]).starts_with("ERR RANK can't be zero"));
    assert_eq!(e(c, &["LPOS", "p", "c", "COUNT", "-1"]), "ERR COUNT can't be negative");
    assert_eq!(e(c, &["LPOS", "p", "c", "MAXLEN", "-1"]), "ERR MAXLEN can't be negative");
    assert_eq!(e(c, &["LPOS", "p", "c", "COUNT"]), "ERR syntax error");
}

#[test]
fn move_and_mpop() {
    let (srv, _dir) = start_server();
    let c = &mut connect(&srv);
    i(c, &["RPUSH", "a", "1", "2", "3"]);
    assert_eq!(s(c, &["LMOVE", "a", "b", "LEFT", "RIGHT"]).as_deref(), Some("1"));
    assert_eq!(s(c, &["RPOPLPUSH", "a", "b"]).as_deref(), Some("3"));
    assert_eq!(v(c, &["LRANGE", "b", "0", "-1"]), ["3", "1"]);
    assert_eq!(s(c, &["LMOVE", "b", "b", "LEFT", "RIGHT"]).as_deref(), Some("3"));
    assert_eq!(v(c, &["LRANGE", "b", "0", "-1"]), ["1", "3"]);
    assert_eq!(s(c, &["LMOVE", "a", "a", "RIGHT", "LEFT"]).as_deref(), Some("2"));
    assert_eq!(v(c, &["LRANGE", "a", "0", "-1"]), ["2"]);
    assert_eq!(s(c, &["LMOVE", "missing", "b", "LEFT", "LEFT"]), None);
    assert_eq!(e(c, &["LMOVE", "a", "b", "UP", "LEFT"]), "ERR syntax error");
    q::<()>(c, &["SET", "str", "x"]);
    assert_eq!(e(c, &["LMOVE", "a", "str", "LEFT", "LEFT"]), WRONGTYPE);
    assert_eq!(v(c, &["LRANGE", "a", "0", "-1"]), ["2"], "nothing popped when the destination is wrong");
    assert_eq!(
        q::<(String, Vec<String>)>(c, &["LMPOP", "2", "missing", "b", "RIGHT", "COUNT", "5"]),
        ("b".to_string(), vec!["3".to_string(), "1".to_string()])
    );
    assert_eq!(q::<Value>(c, &["LMPOP", "1", "missing", "LEFT"]), Value::Nil);
    assert_eq!(e(c, &["LMPOP", "0", "a", "LEFT"]), "ERR numkeys should be greater than 0");
    assert_eq!(e(c, &["LMPOP", "1", "a", "LEFT", "COUNT", "0"]), "ERR count should be greater than 0");
    assert_eq!(e(c, &["LMPOP", "2", "a", "LEFT"]), "ERR syntax error");
}

/// LMOVE, RPOPLPUSH and BLMOVE with the same source and destination rotate the list in place: a one-element
/// list keeps its expiry, as in Redis (found by the differential test, seed 1795535920132485246: the emptied list
/// was written first, which deleted the key and its TTL).
#[test]
fn moving_within_one_list_keeps_its_expiry() {
    let (srv, _dir) = start_server();
    let c = &mut connect(&srv);
    for (n, args) in [
        &["LMOVE", "l", "l", "LEFT", "RIGHT"][..],
        &["RPOPLPUSH", "l", "l"],
        &["BLMOVE", "l", "l", "RIGHT", "LEFT", "0.01"],
    ]
    .into_iter()
    .enumerate()
    {
        i(c, &["DEL", "l"]);
        i(c, &["RPUSH", "l", "only"]);
        assert_eq!(i(c, &["EXPIRE", "l", "1000"]), 1);
        assert_eq!(s(c, args).as_deref(), Some("only"), "{args:?}");
        assert!(i(c, &["TTL", "l"]) > 0, "{args:?} dropped the expiry");
        assert_eq!(v(c, &["LRANGE", "l", "0", "-1"]), ["only"]);
        // With two elements the rotation moves one end to the other.
        i(c, &["RPUSH", "l", &format!("second{n}")]);
        s(c, args);
        assert_eq!(i(c, &["LLEN", "l"]), 2);
        assert!(i(c, &["TTL", "l"]) > 0);
    }
}

#[test]
fn wrong_type_and_expiry() {
    let (srv, _dir) = start_server();
    let c = &mut connect(&srv);
    q::<()>(c, &["SET", "s", "x"]);
    for args in [
        &["LPUSH", "s", "a"][..],
        &["RPUSH", "s", "a"],
        &["LPOP", "s"],
        &["LRANGE", "s", "0", "1"],
        &["LLEN", "s"],
        &["LINDEX", "s", "0"],
        &["LSET", "s", "0", "a"],
        &["LINSERT", "s", "BEFORE", "a", "b"],
        &["LREM", "s", "0", "a"],
        &["LTRIM", "s", "0", "1"],
        &["LPOS", "s", "a"],
        &["BLPOP", "s", "0.01"],
    ] {
        assert_eq!(e(c, args), WRONGTYPE, "{args:?}");
    }
    i(c, &["RPUSH", "l", "a", "b"]);
    assert_eq!(e(c, &["GET", "l"]), WRONGTYPE);
    assert_eq!(i(c, &["PEXPIRE", "l", "50"]), 1);
    std::thread::sleep(Duration::from_millis(120));
    assert_eq!(i(c, &["LLEN", "l"]), 0);
    assert!(v(c, &["LRANGE", "l", "0", "-1"]).is_empty());
    assert_eq!(i(c, &["RPUSH", "l", "c"]), 1, "an expired list is replaced by a new one");
    assert_eq!(v(c, &["LRANGE", "l", "0", "-1"]), ["c"]);
    assert_eq!(i(c, &["TTL", "l"]), -1);
}

/// Random pushes, pops, LINSERT, LREM, LTRIM, LSET and LMOVE against an in-memory model (the middle
/// operations shift one side or the other depending on the position).
#[test]
fn random_operations_match_a_model() {
    let (srv, _dir) = start_server();
    let c = &mut connect(&srv);
    let mut rng = rand::rngs::StdRng::seed_from_u64(12);
    let mut m: VecDeque<String> = VecDeque::new();
    let val = |rng: &mut rand::rngs::StdRng| format!("v{}", rng.gen_range(0..6));
    for step in 0..1500 {
        let op = rng.gen_range(0..10);
        match op {
            0 | 1 => {
                let x = val(&mut rng);
                let left = op == 0;
                let n = i(c, &[if left { "LPUSH" } else { "RPUSH" }, "k", &x]);
                if left {
                    m.push_front(x)
                } else {
                    m.push_back(x)
                }
                assert_eq!(n as usize, m.len());
            }
            2 => {
                let got = s(c, &["LPOP", "k"]);
                assert_eq!(got, m.pop_front());
            }
            3 => {
                let got = s(c, &["RPOP", "k"]);
                assert_eq!(got, m.pop_back());
            }
            4 => {
                let (p, x) = (val(&mut rng), val(&mut rng));
                let after = rng.gen_bool(0.5);
                let n = i(c, &["LINSERT", "k", if after { "AFTER" } else { "BEFORE" }, &p, &x]);
                let expect = match m.iter().position(|e| *e == p) {
                    _ if m.is_empty() => 0,
                    None => -1,
                    Some(at) => {
                        m.insert(at + after as usize, x);
                        m.len() as i64
                    }
                };
                assert_eq!(n, expect);
            }
            5 => {
                let x = val(&mut rng);
                let count: i64 = rng.gen_range(-2..=2);
                let n = i(c, &["LREM", "k", &count.to_string(), &x]);
                let mut removed = 0;
                let want = if count == 0 { usize::MAX } else { count.unsigned_abs() as usize };
                let idx: Vec<usize> = if count < 0 {
                    (0..m.len()).rev().filter(|&j| m[j] == x).take(want).collect()
                } else {
                    (0..m.len()).filter(|&j| m[j] == x).take(want).collect()
                };
                let mut idx = idx;
                idx.sort_unstable_by(|a, b| b.cmp(a));
                for j in idx {
                    m.remove(j);
                    removed += 1;
                }
                assert_eq!(n, removed);
            }
            6 if rng.gen_bool(0.2) => {
                let len = m.len() as i64;
                let a = rng.gen_range(-len - 2..=len + 2);
                let b = rng.gen_range(-len - 2..=len + 2);
                q::<()>(c, &["LTRIM", "k", &a.to_string(), &b.to_string()]);
                let norm = |x: i64| if x < 0 { x + len } else { x };
                let (s0, e0) = (norm(a).max(0), norm(b).min(len - 1));
                if s0 > e0 || s0 >= len {
                    m.clear();
                } else {
                    m = m.iter().skip(s0 as usize).take((e0 - s0 + 1) as usize).cloned().collect();
                }
            }
            7 if !m.is_empty() => {
                let j = rng.gen_range(0..m.len());
                let x = val(&mut rng);
                q::<()>(c, &["LSET", "k", &j.to_string(), &x]);
                m[j] = x;
            }
            8 => {
                let got = s(c, &["LMOVE", "k", "k", "LEFT", "RIGHT"]);
                if let Some(x) = m.pop_front() {
                    m.push_back(x);
                }
                assert_eq!(got.as_ref(), m.back());
            }
            _ => {}
        }
        let all = v(c, &["LRANGE", "k", "0", "-1"]);
        assert_eq!(all, m.iter().cloned().collect::<Vec<_>>(), "after step {step} (op {op})");
        assert_eq!(i(c, &["LLEN", "k"]) as usize, m.len());
        if !m.is_empty() {
            let j = rng.gen_range(0..m.len());
            assert_eq!(s(c, &["LINDEX", "k", &j.to_string()]).as_ref(), m.get(j));
        }
    }
}

#[test]
fn blocking_pop_woken_by_another_connection() {
    let (_dir, srv) = start_always(|_| {});
    let mut a = connect(&srv);
    let mut b = connect(&srv);
    let t0 = Instant::now();
    let waiter = std::thread::spawn(move || q::<Option<(String, String)>>(&mut a, &["BLPOP", "none", "q", "5"]));
    // Let it block first.
    let reg = srv.shared().store.blocking.clone();
    let deadline = Instant::now() + Duration::from_secs(5);
    while reg.blocked_clients() == 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(reg.blocked_clients(), 1);
    assert_eq!(i(&mut b, &["RPUSH", "q", "x", "y"]), 2);
    let got = waiter.join().unwrap();
    assert_eq!(got, Some(("q".into(), "x".into())));
    assert!(t0.elapsed() < Duration::from_secs(4));
    assert_eq!(v(&mut b, &["LRANGE", "q", "0", "-1"]), ["y"], "delivered exactly once");
    assert_eq!(reg.blocked_clients(), 0);
    assert_eq!(reg.watched_keys(), 0);
    // BRPOP, BLMOVE, BRPOPLPUSH, BLMPOP find data at once.
    i(&mut b, &["RPUSH", "q", "z"]);
    assert_eq!(q::<(String, String)>(&mut b, &["BRPOP", "q", "0"]), ("q".into(), "z".into()));
    assert_eq!(s(&mut b, &["BLMOVE", "q", "d", "LEFT", "LEFT", "0"]).as_deref(), Some("y"));
    assert_eq!(s(&mut b, &["BRPOPLPUSH", "d", "q", "0"]).as_deref(), Some("y"));
    assert_eq!(
        q::<(String, Vec<String>)>(&mut b, &["BLMPOP", "0", "1", "q", "LEFT", "COUNT", "3"]),
        ("q".into(), vec!["y".into()])
    );
}

#[test]
fn blocking_timeouts_and_errors() {
    let (srv, _dir) = start_server();
    let c = &mut connect(&srv);
    let t0 = Instant::now();
    assert_eq!(q::<Value>(c, &["BLPOP", "none", "0.2"]), Value::Nil);
    let el = t0.elapsed();
    assert!(el >= Duration::from_millis(190) && el < Duration::from_secs(3), "{el:?}");
    assert_eq!(q::<Value>(c, &["BLMOVE", "none", "d", "LEFT", "LEFT", "0.05"]), Value::Nil);
    assert_eq!(q::<Value>(c, &["BLMPOP", "0.05", "1", "none", "LEFT"]), Value::Nil);
    assert_eq!(e(c, &["BLPOP", "k", "x"]), "ERR timeout is not a float or out of range");
    assert_eq!(e(c, &["BLPOP", "k", "-1"]), "ERR timeout is negative");
    assert_eq!(e(c, &["BLMOVE", "a", "b", "UP", "LEFT", "1"]), "ERR syntax error");
    // As Redis: a timeout whose milliseconds overflow 63 bits is "negative"; NaN is not a float.
    for t in ["inf", "-inf", "1e400", "9223372036854775807"] {
        assert_eq!(e(c, &["BLPOP", "k", t]), "ERR timeout is negative", "{t}");
    }
    assert_eq!(e(c, &["BLPOP", "k", "nan"]), "ERR timeout is not a float or out of range");
    // BLMPOP reads numkeys, the side and COUNT before the timeout.
    assert_eq!(e(c, &["BLMPOP", "x", "1", "k", "UP"]), "ERR syntax error");
    assert_eq!(e(c, &["BLMPOP", "x", "0", "k", "LEFT"]), "ERR numkeys should be greater than 0");
    assert_eq!(e(c, &["BLMPOP", "x", "1", "k", "LEFT", "COUNT", "0"]), "ERR count should be greater than 0");
    assert_eq!(e(c, &["BLMPOP", "x", "1", "k", "LEFT"]), "ERR timeout is not a float or out of range");
    let reg = srv.shared().store.blocking.clone();
    assert_eq!((reg.blocked_clients(), reg.watched_keys()), (0, 0));
    // The connection still works after a timeout.
    assert_eq!(i(c, &["RPUSH", "none", "a"]), 1);
}

#[test]
fn blocking_inside_multi_does_not_block() {
    let (srv, _dir) = start_server();
    let c = &mut connect(&srv);
    let r: Value = redis::pipe()
        .atomic()
        .cmd("BLPOP")
        .arg("none")
        .arg(0)
        .cmd("RPUSH")
        .arg("l")
        .arg("a")
        .cmd("BLPOP")
        .arg("l")
        .arg(0)
        .query(c)
        .unwrap();
    let Value::Array(items) = r else { panic!("{r:?}") };
    assert_eq!(items[0], Value::Nil);
    assert_eq!(items[1], Value::Int(1));
    assert_eq!(Vec::<String>::from_redis_value(&items[2]).unwrap(), ["l", "a"]);
    // LRANGE inside EXEC reads the transaction's own pending writes.
    let r: (i64, Vec<String>, Vec<String>) = redis::pipe()
        .atomic()
        .cmd("RPUSH")
        .arg("m")
        .arg("x")
        .arg("y")
        .arg("z")
        .cmd("LRANGE")
        .arg("m")
        .arg(1)
        .arg(-1)
        .cmd("LRANGE")
        .arg("m")
        .arg(0)
        .arg(0)
        .query(c)
        .unwrap();
    assert_eq!(r, (3, vec!["y".to_string(), "z".to_string()], vec!["x".to_string()]));
}

#[test]
fn blocked_clients_are_served_in_order_exactly_once() {
    let (_dir, srv) = start_always(|_| {});
    let reg = srv.shared().store.blocking.clone();
    let mut handles = Vec::new();
    for n in 0..3 {
        let mut con = connect(&srv);
        handles.push(std::thread::spawn(move || q::<Option<(String, String)>>(&mut con, &["BRPOP", "fifo", "10"])));
        let deadline = Instant::now() + Duration::from_secs(5);
        while reg.blocked_clients() < n + 1 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(reg.blocked_clients(), n + 1);
    }
    let mut p = connect(&srv);
    // One push of two elements: the first two waiters get them (BRPOP takes from the tail), the third waits.
    assert_eq!(i(&mut p, &["RPUSH", "fifo", "e1", "e2"]), 2);
    let deadline = Instant::now() + Duration::from_secs(5);
    while reg.blocked_clients() > 1 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(reg.blocked_clients(), 1);
    assert_eq!(i(&mut p, &["RPUSH", "fifo", "e3"]), 1);
    let got: Vec<_> = handles.into_iter().map(|h| h.join().unwrap().map(|(_, v)| v)).collect();
    assert_eq!(got, [Some("e2".to_string()), Some("e1".to_string()), Some("e3".to_string())]);
    assert_eq!(i(&mut p, &["EXISTS", "fifo"]), 0);
    assert_eq!((reg.blocked_clients(), reg.watched_keys()), (0, 0));
}

#[test]
fn a_client_that_disconnects_while_blocked_leaves_no_waiter() {
    let (srv, _dir) = start_server();
    let reg = srv.shared().store.blocking.clone();
    {
        let mut raw = Client::connect(srv.addr());
        raw.send(&["BLPOP", "gone", "0"]);
        let deadline = Instant::now() + Duration::from_secs(5);
        while reg.blocked_clients() == 0 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(reg.blocked_clients(), 1);
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    while reg.blocked_clients() > 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!((reg.blocked_clients(), reg.watched_keys()), (0, 0));
    let c = &mut connect(&srv);
    assert_eq!(i(c, &["RPUSH", "gone", "x"]), 1);
    assert_eq!(i(c, &["LLEN", "gone"]), 1, "nobody took the element");
}

#[test]
fn blmove_wakes_a_client_blocked_on_its_destination() {
    let (srv, _dir) = start_server();
    let reg = srv.shared().store.blocking.clone();
    let mut a = connect(&srv);
    let mut b = connect(&srv);
    let t1 = std::thread::spawn(move || q::<Option<String>>(&mut a, &["BLMOVE", "src", "mid", "LEFT", "LEFT", "5"]));
    let t2 = std::thread::spawn(move || q::<Option<(String, String)>>(&mut b, &["BLPOP", "mid", "5"]));
    let deadline = Instant::now() + Duration::from_secs(5);
    while reg.blocked_clients() < 2 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    let c = &mut connect(&srv);
    i(c, &["RPUSH", "src", "v"]);
    assert_eq!(t1.join().unwrap().as_deref(), Some("v"));
    assert_eq!(t2.join().unwrap(), Some(("mid".into(), "v".into())));
    assert_eq!(i(c, &["EXISTS", "src", "mid"]), 0);
}

#[test]
fn requests_pipelined_behind_a_blocked_pop_are_answered_after_it() {
    let (srv, _dir) = start_server();
    let mut raw = Client::connect(srv.addr());
    raw.send(&["BLPOP", "pl", "0.3"]);
    let reg = srv.shared().store.blocking.clone();
    let deadline = Instant::now() + Duration::from_secs(5);
    while reg.blocked_clients() == 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    // Sent while the client is blocked: read ahead, answered after the pop times out.
    raw.send(&["PING"]);
    raw.send(&["RPUSH", "pl", "a"]);
    assert_eq!(raw.read(), Some(Resp::Nil));
    assert_eq!(raw.read(), Some(Resp::Simple("PONG".into())));
    assert_eq!(raw.read(), Some(Resp::Int(1)));
    // Pipelined in one write with the blocking pop itself.
    let mut batch = encode(&[b"BLPOP", b"pl", b"0"]);
    batch.extend(encode(&[b"LLEN", b"pl"]));
    std::io::Write::write_all(raw.r.get_mut(), &batch).unwrap();
    assert_eq!(raw.read(), Some(Resp::Array(vec![Resp::Bulk(b"pl".to_vec()), Resp::Bulk(b"a".to_vec())])));
    assert_eq!(raw.read(), Some(Resp::Int(0)));
}

/// A key that holds another type when its waiters are served wakes nobody, as in Redis (the list unit's
/// "LPUSH + DEL + SET should not awake blocked client"): the client stays blocked until a list is there.
#[test]
fn a_key_of_another_type_does_not_wake_a_blocked_pop() {
    let (srv, _dir) = start_server();
    let reg = srv.shared().store.blocking.clone();
    for pop in [&["BLPOP", "bl", "5"][..], &["BLMPOP", "5", "1", "bl", "RIGHT"], &["BRPOPLPUSH", "bl", "dst", "5"]] {
        let mut raw = Client::connect(srv.addr());
        raw.send(pop);
        let deadline = Instant::now() + Duration::from_secs(5);
        while reg.blocked_clients() == 0 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(reg.blocked_clients(), 1);
        let c = &mut connect(&srv);
        let r: Value = redis::pipe()
            .atomic()
            .cmd("LPUSH")
            .arg("bl")
            .arg("a")
            .cmd("DEL")
            .arg("bl")
            .cmd("SET")
            .arg("bl")
            .arg("foo")
            .query(c)
            .unwrap();
        assert!(matches!(r, Value::Array(_)), "{r:?}");
        std::thread::sleep(Duration::from_millis(100));
        assert_eq!(reg.blocked_clients(), 1, "{pop:?} was woken by a string");
        i(c, &["DEL", "bl"]);
        assert_eq!(i(c, &["LPUSH", "bl", "b"]), 1);
        let got = raw.read().expect("the popped element");
        fn flat(r: &Resp) -> String {
            match r {
                Resp::Array(items) => items.iter().map(flat).collect::<Vec<_>>().join(" "),
                other => other.text(),
            }
        }
        let text = flat(&got);
        assert!(text.split(' ').any(|w| w == "b"), "{pop:?}: {got:?}");
        assert_eq!(reg.blocked_clients(), 0);
        i(c, &["DEL", "bl", "dst"]);
    }
}

/// A list moved into place under a key with blocked clients (RENAME here; MOVE, COPY, SORT ... STORE and
/// RESTORE store it the same way) serves them, as Redis's dbAdd does.
#[test]
fn a_list_renamed_into_place_wakes_a_blocked_pop() {
    let (srv, _dir) = start_server();
    let reg = srv.shared().store.blocking.clone();
    let mut raw = Client::connect(srv.addr());
    raw.send(&["BLPOP", "foo", "5"]);
    let deadline = Instant::now() + Duration::from_secs(5);
    while reg.blocked_clients() == 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(reg.blocked_clients(), 1);
    let c = &mut connect(&srv);
    assert_eq!(i(c, &["LPUSH", "bob", "abc", "def", "hij"]), 3);
    q::<()>(c, &["RENAME", "bob", "foo"]);
    assert_eq!(raw.read(), Some(Resp::Array(vec![Resp::Bulk(b"foo".to_vec()), Resp::Bulk(b"hij".to_vec())])));
    assert_eq!(v(c, &["LRANGE", "foo", "0", "-1"]), ["def", "abc"]);
    assert_eq!(reg.blocked_clients(), 0);
}

// ---------------------------------------------------------------------------------------------------------
// Keyspace format version 1 (one record per element) converted to nodes at start

/// The lists of the version-1 database written by [`write_v1_database`]: `(db, key, head, elements)`.
fn v1_lists() -> Vec<(u8, String, u64, Vec<String>)> {
    use shaledb_server::types::list::BASE;
    let element = |key: &str, i: usize| {
        if i % 97 == 5 {
            format!("{key}-{i}-{}", "x".repeat(600))
        } else {
            format!("{key}-{i}")
        }
    };
    let make = |key: &str, n: usize| (0..n).map(|i| element(key, i)).collect::<Vec<_>>();
    vec![
        (0, "small".to_string(), BASE - 2, make("small", 5)),
        // Longer than one conversion chunk, with a head inside a node.
        (0, "long".to_string(), BASE - 7, make("long", 25_000)),
        // Every element longer than a node keeps inline.
        (3, "wide".to_string(), BASE + 30, (0..70).map(|i| format!("{i}:{}", "w".repeat(513 + i))).collect()),
        (0, "one".to_string(), BASE, make("one", 1)),
    ]
}

/// Writes a keyspace of format version 1 by hand through the engine API: the lists of [`v1_lists`] as one
/// record per element (`db 0x01 version 0x00 index:u64be`), a string, and the marker "1".
fn write_v1_database(path: &std::path::Path) -> shaledb::Db {
    use shaledb_server::keys::{encode_string, member_key, meta_key, registry_key, Coll, Type, SUB_MEMBER};
    let db = shaledb::Db::open(path, shaledb::Options { create_if_missing: true, ..Default::default() }).unwrap();
    for (version, (dbi, key, head, elements)) in (1u64..).zip(v1_lists()) {
        let mut batch = shaledb::WriteBatch::new();
        let mut c = Coll::new(Type::List, version);
        c.size = elements.len() as u64;
        c.set_extra_u64(0, head);
        c.set_extra_u64(1, head + elements.len() as u64);
        batch.put(meta_key(dbi, key.as_bytes()), c.encode());
        batch.put(registry_key(dbi, version), key.as_bytes());
        for (i, e) in elements.iter().enumerate() {
            batch.put(member_key(dbi, version, SUB_MEMBER, &(head + i as u64).to_be_bytes()), e.as_bytes());
        }
        db.write(&batch).unwrap();
    }
    db.put(meta_key(0, b"str"), encode_string(b"plain", None)).unwrap();
    db.put(shaledb_server::layout::MARKER_KEY, b"1").unwrap();
    db
}

/// Records of sub-kind `sub` of every version in database `dbi`.
fn sub_records(db: &shaledb::Db, dbi: u8, sub: u8) -> usize {
    let mut it = db.cursor();
    it.seek([dbi, shaledb_server::keys::KIND_MEMBER]);
    let mut n = 0;
    while it.valid() && it.key().starts_with(&[dbi, shaledb_server::keys::KIND_MEMBER]) {
        n += usize::from(it.key().get(10) == Some(&sub));
        it.next();
    }
    n
}

/// Every list of [`v1_lists`] reads back exactly: LLEN, LRANGE of the whole list and of a window, LINDEX
/// of several positions.
fn assert_v1_lists_read_back(srv: &shaledb_server::RunningServer) {
    let c = &mut connect(srv);
    for (dbi, key, _, elements) in v1_lists() {
        q::<()>(c, &["SELECT", &dbi.to_string()]);
        assert_eq!(i(c, &["LLEN", &key]), elements.len() as i64, "{key}");
        assert_eq!(v(c, &["LRANGE", &key, "0", "-1"]), elements, "{key}");
        let n = elements.len();
        for p in [0, 1, n / 2, n.saturating_sub(2), n - 1, 9_983, 9_984, 9_985, 19_999] {
            if p < n {
                assert_eq!(s(c, &["LINDEX", &key, &p.to_string()]).as_deref(), Some(elements[p].as_str()), "{key} {p}");
            }
        }
        if n > 40 {
            assert_eq!(v(c, &["LRANGE", &key, "30", "40"]), elements[30..=40].to_vec(), "{key}");
        }
    }
    q::<()>(c, &["SELECT", "0"]);
    assert_eq!(s(c, &["GET", "str"]).as_deref(), Some("plain"));
    // The converted lists take writes.
    assert_eq!(i(c, &["RPUSH", "small", "new"]), 6);
    assert_eq!(s(c, &["LPOP", "small"]).as_deref(), Some("small-0"));
    assert_eq!(v(c, &["LRANGE", "small", "-2", "-1"]), ["small-4", "new"]);
}

#[test]
fn a_version_1_database_is_converted_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let db = write_v1_database(&path);
    db.close().unwrap();
    {
        let (_d, srv) = start_always(|c| c.dir = path.clone());
        assert_v1_lists_read_back(&srv);
        let db = &srv.shared().store.db();
        assert_eq!(db.get(shaledb_server::layout::MARKER_KEY).unwrap(), Some(b"2".to_vec()));
        for dbi in [0, 3] {
            assert_eq!(sub_records(db, dbi, 0x00), 0, "no version-1 element record left in db {dbi}");
            assert!(sub_records(db, dbi, 0x02) > 0);
        }
        srv.shutdown().unwrap();
    }
    // A second start finds version 2 and reads the same.
    let (_d, srv) = start_always(|c| c.dir = path.clone());
    let c = &mut connect(&srv);
    assert_eq!(i(c, &["LLEN", "long"]), 25_000);
    assert_eq!(v(c, &["LRANGE", "small", "0", "-1"]), ["small-1", "small-2", "small-3", "small-4", "new"]);
}

#[test]
fn a_conversion_cut_short_resumes_at_the_next_start() {
    use shaledb_server::types::list::upgrade::convert_lists;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let db = write_v1_database(&path);
    // Two synced batches, as a process killed after them leaves the database: the first two chunks of
    // "long" (the first list in key order) converted, the other lists not yet, the marker still "1".
    let done = convert_lists(&db, Some(2)).unwrap();
    assert_eq!((done.batches, done.complete), (2, false), "{done:?}");
    assert!(sub_records(&db, 0, 0x00) > 0 && sub_records(&db, 0, 0x02) > 0);
    assert_eq!(db.get(shaledb_server::layout::MARKER_KEY).unwrap(), Some(b"1".to_vec()));
    // One more batch, then a stop again.
    let more = convert_lists(&db, Some(1)).unwrap();
    assert_eq!((more.batches, more.complete), (1, false), "{more:?}");
    db.close().unwrap();
    let (_d, srv) = start_always(|c| c.dir = path.clone());
    assert_v1_lists_read_back(&srv);
    let db = &srv.shared().store.db();
    assert_eq!(sub_records(db, 0, 0x00), 0);
    assert_eq!(sub_records(db, 3, 0x00), 0);
    assert_eq!(db.get(shaledb_server::layout::MARKER_KEY).unwrap(), Some(b"2".to_vec()));
}
