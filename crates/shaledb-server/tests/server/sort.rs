//! SORT and SORT_RO: replies compared with a real redis-server, Redis's errors and their order, STORE as a
//! write (the destination replaced or deleted, blocked clients served, all of it surviving a process kill).

use crate::helpers::{
    connect, e, i, q, redis_or_skip, start_everysec as start_server, v, Client, Resp, NOT_INT, SYNTAX, WRONGTYPE,
};
use bytes::Bytes;
use shaledb::{Db, Options};
use shaledb_server::commands::{lookup, Handler};
use shaledb_server::commit::Store;
use shaledb_server::resp::Reply;
use shaledb_server::store::ReadCtx;
use shaledb_server::Appendfsync;
use shaledb_vfs::MemFs;
use std::sync::Arc;
use std::time::Duration;

/// The data every comparison sorts: a list, a set and a sorted set of numbers, words and mixed, weights
/// as strings and hash fields, some missing.
const SETUP: &[&[&str]] = &[
    &["RPUSH", "nums", "3", "1", "2", "10", "-4.5", "1e2", "0x10", " 7"],
    &["RPUSH", "words", "pear", "apple", "fig", "banana", "apple2"],
    &["RPUSH", "dup", "b", "a", "b", "c"],
    &["RPUSH", "bad", "1", "x2", "3"],
    &["RPUSH", "nanlist", "1", "nan"],
    &["SADD", "s", "5", "3", "9", "1", "7"],
    &["SADD", "sw", "kiwi", "fig", "date"],
    &["ZADD", "z", "3", "a", "1", "b", "2", "c", "-inf", "d", "+inf", "e"],
    &["MSET", "w_3", "30", "w_1", "10", "w_2", "30", "w_10", "-1", "w_pear", "b", "w_fig", "a"],
    &["MSET", "o_3", "three", "o_1", "one", "o_10", "ten"],
    &["HSET", "h_1", "f", "100", "g", "x"],
    &["HSET", "h_2", "f", "50"],
    &["HSET", "h_3", "f", "75", "->", "arrow"],
    &["SET", "h_3->", "plain"],
    &["SET", "str", "v"],
    &["HSET", "hash", "a", "1"],
];

/// Each line: a command whose reply must be Redis's, exactly.
const CASES: &[&[&str]] = &[
    &["SORT", "nums"],
    &["SORT", "nums", "DESC"],
    &["SORT", "nums", "ALPHA"],
    &["SORT", "nums", "ALPHA", "DESC", "LIMIT", "2", "3"],
    &["SORT", "nums", "LIMIT", "0", "0"],
    &["SORT", "nums", "LIMIT", "-5", "2"],
    &["SORT", "nums", "LIMIT", "6", "100"],
    &["SORT", "nums", "LIMIT", "100", "1"],
    &["SORT", "nums", "LIMIT", "1", "-1"],
    &["SORT", "words", "ALPHA"],
    &["SORT", "words", "ALPHA", "BY", "w_*"],
    &["SORT", "words", "ALPHA", "BY", "w_*", "DESC"],
    &["SORT", "words"],
    &["SORT", "dup", "ALPHA"],
    &["SORT", "bad"],
    &["SORT", "bad", "ALPHA"],
    &["SORT", "nanlist"],
    &["SORT", "s"],
    &["SORT", "s", "DESC", "LIMIT", "1", "2"],
    &["SORT", "sw", "ALPHA"],
    &["SORT", "z"],
    &["SORT", "z", "ALPHA"],
    &["SORT", "z", "BY", "nosort"],
    &["SORT", "z", "BY", "nosort", "DESC"],
    &["SORT", "z", "BY", "nosort", "LIMIT", "1", "2"],
    &["SORT", "z", "BY", "nosort", "DESC", "LIMIT", "1", "3"],
    &["SORT", "nums", "BY", "nosort"],
    &["SORT", "nums", "BY", "nosort", "DESC", "LIMIT", "2", "3"],
    &["SORT", "nums", "BY", "nosort", "LIMIT", "5", "10"],
    &["SORT", "nums", "BY", "w_*"],
    &["SORT", "nums", "BY", "w_*", "DESC"],
    &["SORT", "nums", "BY", "w_*", "LIMIT", "1", "2"],
    &["SORT", "nums", "BY", "h_*->f"],
    &["SORT", "nums", "BY", "h_*->f", "GET", "#", "GET", "o_*", "GET", "h_*->f", "GET", "h_*->g"],
    &["SORT", "nums", "GET", "h_*->"],
    &["SORT", "nums", "GET", "h_*->->"],
    &["SORT", "nums", "GET", "nostar", "GET", "#"],
    &["SORT", "nums", "BY", "w_*", "GET", "w_*", "GET", "hash*"],
    &["SORT", "missing"],
    &["SORT", "missing", "BY", "nosort", "GET", "#"],
    &["SORT_RO", "nums", "BY", "w_*", "GET", "o_*"],
    &["SORT_RO", "z", "BY", "nosort", "DESC"],
    // Errors, and which comes first.
    &["SORT", "str"],
    &["SORT", "hash"],
    &["SORT", "str", "BOGUS"],
    &["SORT", "str", "LIMIT", "x", "1"],
    &["SORT", "nums", "LIMIT", "1"],
    &["SORT", "nums", "LIMIT", "1", "99999999999999999999"],
    &["SORT", "nums", "GET"],
    &["SORT", "nums", "BY"],
    &["SORT", "nums", "STORE"],
    &["SORT_RO", "nums", "STORE", "dst"],
    &["SORT_RO", "str"],
    &["SORT"],
    // STORE: the count, then what was stored.
    &["SORT", "nums", "STORE", "dst"],
    &["LRANGE", "dst", "0", "-1"],
    &["SORT", "nums", "BY", "w_*", "GET", "o_*", "GET", "#", "STORE", "dst"],
    &["LRANGE", "dst", "0", "-1"],
    &["SORT", "s", "BY", "nosort", "STORE", "dst"],
    &["LRANGE", "dst", "0", "-1"],
    &["SORT", "sw", "BY", "nosort", "DESC", "STORE", "dst"],
    &["LRANGE", "dst", "0", "-1"],
    &["SORT", "nums", "STORE", "str"],
    &["TYPE", "str"],
    &["SORT", "missing", "STORE", "str"],
    &["EXISTS", "str"],
    &["SORT", "nums", "LIMIT", "0", "0", "STORE", "dst"],
    &["EXISTS", "dst"],
    &["SORT", "bad", "STORE", "dst2"],
    &["EXISTS", "dst2"],
    &["SORT", "nums", "STORE", "a", "STORE", "b"],
    &["EXISTS", "a", "b"],
    &["SORT", "nums", "STORE", "nums", "DESC"],
    &["LRANGE", "nums", "0", "-1"],
    &["COMMAND", "GETKEYS", "SORT_RO", "abc"],
];

fn words(args: &[&str]) -> Vec<String> {
    args.iter().map(|s| s.to_string()).collect()
}

#[test]
fn sort_replies_match_redis_server() {
    let Some(redis) = redis_or_skip() else { return };
    let (srv, _dir) = start_server();
    let mut ours = Client::connect(srv.addr());
    let mut theirs = Client::connect(redis.addr);
    for c in SETUP {
        let (a, b) = (ours.cmd(c), theirs.cmd(c));
        assert_eq!(a, b, "setup {c:?}");
    }
    for c in CASES {
        let (a, b) = (ours.cmd(c), theirs.cmd(c));
        assert_eq!(a, b, "{:?}", words(c));
    }
}

#[test]
fn sort_by_patterns_limit_and_errors() {
    let (srv, _dir) = start_server();
    let c = &mut connect(&srv);
    q::<()>(c, &["RPUSH", "l", "3", "1", "2"]);
    q::<()>(c, &["MSET", "w_1", "30", "w_2", "20", "w_3", "10", "n_1", "one", "n_3", "three"]);
    q::<()>(c, &["HSET", "o_1", "w", "2"]);
    q::<()>(c, &["HSET", "o_2", "w", "3"]);
    q::<()>(c, &["HSET", "o_3", "w", "1"]);
    assert_eq!(v(c, &["SORT", "l"]), ["1", "2", "3"]);
    assert_eq!(v(c, &["SORT", "l", "DESC", "LIMIT", "0", "2"]), ["3", "2"]);
    assert_eq!(v(c, &["SORT", "l", "BY", "w_*"]), ["3", "2", "1"]);
    assert_eq!(v(c, &["SORT", "l", "BY", "o_*->w"]), ["3", "1", "2"]);
    assert_eq!(v(c, &["SORT", "l", "BY", "nosort"]), ["3", "1", "2"]);
    assert_eq!(v(c, &["SORT", "l", "BY", "nosort", "DESC", "LIMIT", "1", "5"]), ["1", "3"]);
    let got: Vec<Option<String>> = q(c, &["SORT", "l", "GET", "#", "GET", "n_*", "GET", "o_*->w"]);
    let want = [Some("1"), Some("one"), Some("2"), Some("2"), None, Some("3"), Some("3"), Some("three"), Some("1")];
    assert_eq!(got, want.map(|s| s.map(String::from)));
    // A missing weight counts as 0 (numeric); equal weights order by the element.
    assert_eq!(v(c, &["SORT", "l", "BY", "nokey_*"]), ["1", "2", "3"]);
    q::<()>(c, &["RPUSH", "bad", "1", "x"]);
    assert_eq!(e(c, &["SORT", "bad"]), "ERR One or more scores can't be converted into double");
    assert_eq!(v(c, &["SORT", "bad", "ALPHA"]), ["1", "x"]);
    q::<()>(c, &["SET", "str", "x"]);
    assert_eq!(e(c, &["SORT", "str"]), WRONGTYPE);
    // Options are read before the key's type.
    assert_eq!(e(c, &["SORT", "str", "NOPE"]), SYNTAX);
    assert_eq!(e(c, &["SORT", "str", "LIMIT", "a", "1"]), NOT_INT);
    assert_eq!(e(c, &["SORT_RO", "l", "STORE", "d"]), SYNTAX);
    assert_eq!(v(c, &["SORT_RO", "l", "BY", "w_*"]), ["3", "2", "1"]);
}

#[test]
fn sort_store_replaces_or_deletes_the_destination_and_serves_blocked_clients() {
    let (srv, _dir) = start_server();
    let c = &mut connect(&srv);
    q::<()>(c, &["SADD", "s", "b", "c", "a"]);
    q::<()>(c, &["SET", "dst", "old"]);
    q::<()>(c, &["EXPIRE", "dst", "1000"]);
    assert_eq!(i(c, &["SORT", "s", "ALPHA", "STORE", "dst"]), 3);
    assert_eq!(v(c, &["LRANGE", "dst", "0", "-1"]), ["a", "b", "c"]);
    assert_eq!(i(c, &["TTL", "dst"]), -1, "the stored list has no TTL");
    // GET of a missing key stores an empty string.
    assert_eq!(i(c, &["SORT", "s", "ALPHA", "GET", "x_*", "STORE", "dst"]), 3);
    assert_eq!(v(c, &["LRANGE", "dst", "0", "-1"]), ["", "", ""]);
    // An empty result deletes the destination (and creates none).
    assert_eq!(i(c, &["SORT", "nokey", "STORE", "dst"]), 0);
    assert_eq!(i(c, &["EXISTS", "dst"]), 0);
    // A failed SORT leaves the destination alone.
    q::<()>(c, &["RPUSH", "dst", "keep"]);
    q::<()>(c, &["SADD", "bad", "x"]);
    assert_eq!(e(c, &["SORT", "bad", "STORE", "dst"]), "ERR One or more scores can't be converted into double");
    assert_eq!(v(c, &["LRANGE", "dst", "0", "-1"]), ["keep"]);

    // A client blocked on the destination gets the first element once SORT STORE is durable.
    let mut blocked = Client::connect(srv.addr());
    blocked.send(&["BLPOP", "target", "10"]);
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(i(c, &["SORT", "s", "ALPHA", "STORE", "target"]), 3);
    assert_eq!(blocked.read(), Some(Resp::Array(vec![Resp::Bulk(b"target".to_vec()), Resp::Bulk(b"a".to_vec())])));
    assert_eq!(v(c, &["LRANGE", "target", "0", "-1"]), ["b", "c"]);
}

fn command(words: &[&str]) -> (&'static shaledb_server::commands::Spec, Vec<Bytes>) {
    let spec = lookup(words[0].as_bytes()).expect("the command exists");
    (spec, words.iter().map(|w| Bytes::from(w.to_string())).collect())
}

fn read(store: &Store, words: &[&str]) -> Reply {
    let (spec, args) = command(words);
    let Handler::Read(f) = spec.handler else { panic!("{} is a read", words[0]) };
    f(&ReadCtx::new(&store.db(), store.keyspace(), 0, shaledb_server::store::now_ms()), &args)
}

fn bulks(items: &[&str]) -> Reply {
    Reply::Array(items.iter().map(|s| Reply::Bulk(Bytes::from(s.to_string()))).collect())
}

/// SORT ... STORE is one write of its group: acknowledged after the fsync under `appendfsync always`, and
/// after a kill -9 the destination is the stored list, whole (and a deleted destination stays deleted).
#[test]
fn sort_store_survives_a_process_kill() {
    let fs = MemFs::new();
    let db = Db::open("/db", Options { fs: Arc::new(fs.clone()), ..Options::default() }).expect("open");
    let store = Store::start(db, Appendfsync::Always);
    let run = |store: &Store, w: &[&str]| store.submit_and_wait(0, vec![command(w)]).expect("answered").remove(0);
    let many: Vec<String> = (0..500).map(|n| (n * 7919 % 1000).to_string()).collect();
    let mut push = vec!["RPUSH", "src"];
    push.extend(many.iter().map(String::as_str));
    assert_eq!(run(&store, &push), Reply::Int(500));
    assert_eq!(run(&store, &["SET", "dst", "was a string"]), Reply::Ok);
    assert_eq!(run(&store, &["SORT", "src", "DESC", "STORE", "dst"]), Reply::Int(500));
    assert_eq!(run(&store, &["RPUSH", "gone", "x"]), Reply::Int(1));
    assert_eq!(run(&store, &["SORT", "nothing", "STORE", "gone"]), Reply::Int(0));
    let before = read(&store, &["LRANGE", "dst", "0", "-1"]);

    let killed = fs.deep_clone();
    drop(store);
    let db = Db::open("/db", Options { fs: Arc::new(killed), ..Options::default() }).expect("reopen");
    let store = Store::start(db, Appendfsync::Always);
    assert_eq!(read(&store, &["LRANGE", "dst", "0", "-1"]), before);
    let mut want: Vec<i64> = many.iter().map(|s| s.parse().unwrap()).collect();
    want.sort_unstable_by(|a, b| b.cmp(a));
    let want: Vec<String> = want.iter().map(i64::to_string).collect();
    assert_eq!(before, bulks(&want.iter().map(String::as_str).collect::<Vec<_>>()));
    assert_eq!(read(&store, &["EXISTS", "gone"]), Reply::Int(0));
    store.shutdown();
}
