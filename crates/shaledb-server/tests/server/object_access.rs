//! OBJECT IDLETIME, OBJECT FREQ and TOUCH on the access clock (`access.rs`): reads and writes record an
//! access, TYPE/TTL/EXISTS/OBJECT do not, TOUCH does; FREQ answers under an LFU `maxmemory-policy` only,
//! IDLETIME under any other.

use crate::helpers::{connect, e, i, q, start_server};
use std::time::Duration;

#[test]
fn idle_time_counts_from_the_last_read_or_write() {
    let (_dir, server) = start_server(|_| {});
    let mut c = connect(&server);
    q::<()>(&mut c, &["SET", "foo", "bar"]);
    q::<()>(&mut c, &["RPUSH", "list", "a"]);
    q::<()>(&mut c, &["SET", "other", "x"]);
    assert!(i(&mut c, &["OBJECT", "IDLETIME", "foo"]) <= 1);
    assert_eq!(q::<Option<i64>>(&mut c, &["OBJECT", "IDLETIME", "missing"]), None);
    std::thread::sleep(Duration::from_millis(2200));
    // Lookups that do not count as an access.
    q::<i64>(&mut c, &["TTL", "foo"]);
    q::<String>(&mut c, &["TYPE", "foo"]);
    q::<i64>(&mut c, &["EXISTS", "foo"]);
    q::<i64>(&mut c, &["PTTL", "list"]);
    q::<Option<String>>(&mut c, &["OBJECT", "ENCODING", "foo"]);
    assert!(i(&mut c, &["OBJECT", "IDLETIME", "foo"]) >= 2);
    assert!(i(&mut c, &["OBJECT", "IDLETIME", "list"]) >= 2);
    // A read, a write, a read inside a script and TOUCH each count.
    q::<Option<String>>(&mut c, &["GET", "foo"]);
    assert!(i(&mut c, &["OBJECT", "IDLETIME", "foo"]) < 2);
    q::<i64>(&mut c, &["RPUSH", "list", "b"]);
    assert!(i(&mut c, &["OBJECT", "IDLETIME", "list"]) < 2);
    assert_eq!(i(&mut c, &["TOUCH", "other", "nokey", "other"]), 2);
    assert!(i(&mut c, &["OBJECT", "IDLETIME", "other"]) < 2);
    std::thread::sleep(Duration::from_millis(2200));
    q::<Option<String>>(&mut c, &["EVAL", "return redis.call('get', KEYS[1])", "1", "foo"]);
    assert!(i(&mut c, &["OBJECT", "IDLETIME", "foo"]) < 2);
    assert!(i(&mut c, &["OBJECT", "IDLETIME", "other"]) >= 2);
    // A key deleted and created again starts afresh.
    q::<i64>(&mut c, &["DEL", "other"]);
    q::<()>(&mut c, &["SET", "other", "y"]);
    assert!(i(&mut c, &["OBJECT", "IDLETIME", "other"]) < 2);
}

#[test]
fn freq_needs_an_lfu_policy_and_grows_with_accesses() {
    let (_dir, server) = start_server(|_| {});
    let mut c = connect(&server);
    q::<()>(&mut c, &["SET", "k", "v"]);
    assert_eq!(
        e(&mut c, &["OBJECT", "FREQ", "k"]),
        "ERR An LFU maxmemory policy is not selected, access frequency not tracked. Please note that when \
         switching between policies at runtime LRU and LFU data will take some time to adjust."
    );
    q::<()>(&mut c, &["CONFIG", "SET", "maxmemory-policy", "allkeys-lfu"]);
    assert_eq!(
        e(&mut c, &["OBJECT", "IDLETIME", "k"]),
        "ERR An LFU maxmemory policy is selected, idle time not tracked. Please note that when switching \
         between policies at runtime LRU and LFU data will take some time to adjust."
    );
    assert_eq!(q::<Option<i64>>(&mut c, &["OBJECT", "FREQ", "missing"]), None);
    let before = i(&mut c, &["OBJECT", "FREQ", "k"]);
    for _ in 0..200 {
        q::<Option<String>>(&mut c, &["GET", "k"]);
    }
    let after = i(&mut c, &["OBJECT", "FREQ", "k"]);
    // Logarithmic: 200 hits with lfu-log-factor 10 raise the counter by a few steps, far from 255.
    assert!(after > before && after < 64, "{before} -> {after}");
    q::<()>(&mut c, &["CONFIG", "SET", "maxmemory-policy", "noeviction"]);
    assert!(i(&mut c, &["OBJECT", "IDLETIME", "k"]) < 5);
    // Another server in the same process keeps its own policy.
    let (_dir2, other) = start_server(|_| {});
    let mut c2 = connect(&other);
    q::<()>(&mut c2, &["SET", "k", "v"]);
    q::<()>(&mut c, &["CONFIG", "SET", "maxmemory-policy", "volatile-lfu"]);
    assert!(i(&mut c2, &["OBJECT", "IDLETIME", "k"]) < 5);
    assert!(i(&mut c, &["OBJECT", "FREQ", "k"]) >= 1);
}
