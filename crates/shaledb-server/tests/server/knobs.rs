//! Parameters that CONFIG SET hands to the code using them (`stream-node-max-entries`,
//! `hll-sparse-max-bytes`), TOUCH, COMMAND GETKEYS of SORT with several STORE options, and a blocked XREAD
//! whose key turns into a list. The expected values are redis-server 7.0's (the stream cases are those of
//! its unit/type/stream).

use crate::helpers::{connect, i, q, start_server, v};

fn xadd_n(con: &mut redis::Connection, key: &str, n: usize) {
    for _ in 0..n {
        let _: String = q(con, &["xadd", key, "*", "xitem", "v"]);
    }
}

#[test]
fn stream_node_max_entries_sizes_approximate_trims() {
    let (_dir, server) = start_server(|_| {});
    let mut con = connect(&server);
    let _: () = q(&mut con, &["config", "set", "stream-node-max-entries", "10"]);
    assert_eq!(v(&mut con, &["config", "get", "stream-node-max-entries"]), ["stream-node-max-entries", "10"]);
    // Nodes of 10: a `~` trim with LIMIT 30 removes whole nodes, at most 30 entries.
    xadd_n(&mut con, "s", 100);
    let _: String = q(&mut con, &["xadd", "s", "MAXLEN", "~", "55", "LIMIT", "30", "*", "xitem", "v"]);
    assert_eq!(i(&mut con, &["xlen", "s"]), 71);
    let _: String = q(&mut con, &["xadd", "s", "MAXLEN", "~", "55", "LIMIT", "30", "*", "xitem", "v"]);
    assert_eq!(i(&mut con, &["xlen", "s"]), 62);

    // Nodes of 1: the default LIMIT of a `~` trim is 100 nodes; an exact trim has none.
    let _: () = q(&mut con, &["config", "set", "stream-node-max-entries", "1"]);
    xadd_n(&mut con, "t", 102);
    assert_eq!(i(&mut con, &["xtrim", "t", "MAXLEN", "~", "1"]), 100);
    assert_eq!(i(&mut con, &["xlen", "t"]), 2);
    xadd_n(&mut con, "u", 102);
    assert_eq!(i(&mut con, &["xtrim", "u", "MAXLEN", "1"]), 101);

    // Nodes of 2: LIMIT 1 cannot remove a whole node, LIMIT 2 removes the first.
    let _: () = q(&mut con, &["config", "set", "stream-node-max-entries", "2"]);
    xadd_n(&mut con, "w", 3);
    assert_eq!(i(&mut con, &["xtrim", "w", "MAXLEN", "~", "0", "LIMIT", "1"]), 0);
    assert_eq!(i(&mut con, &["xtrim", "w", "MAXLEN", "~", "0", "LIMIT", "2"]), 2);

    // Back to the default of 100: 100 entries fill one node, which `~` keeps whole.
    let _: () = q(&mut con, &["config", "set", "stream-node-max-entries", "100"]);
    xadd_n(&mut con, "x", 150);
    assert_eq!(i(&mut con, &["xtrim", "x", "MAXLEN", "~", "60"]), 0);
    assert_eq!(i(&mut con, &["xtrim", "x", "MAXLEN", "~", "50"]), 100);
    assert_eq!(i(&mut con, &["xlen", "x"]), 50);

    // The value is the server's own: another server still has the default.
    let (_dir2, other) = start_server(|_| {});
    let mut con2 = connect(&other);
    let _: () = q(&mut con, &["config", "set", "stream-node-max-entries", "5"]);
    xadd_n(&mut con2, "y", 20);
    assert_eq!(i(&mut con2, &["xtrim", "y", "MAXLEN", "~", "1"]), 0);
}

#[test]
fn stream_node_max_entries_from_a_config_file() {
    let (_dir, server) = start_server(|c| {
        c.set_value("stream-node-max-entries", "3", true).expect("set at start");
    });
    let mut con = connect(&server);
    xadd_n(&mut con, "s", 10);
    // Nodes of 3, 3, 3, 1: MAXLEN ~ 2 removes two of them, MAXLEN ~ 1 the third.
    assert_eq!(i(&mut con, &["xtrim", "s", "MAXLEN", "~", "2"]), 6);
    assert_eq!(i(&mut con, &["xtrim", "s", "MAXLEN", "~", "1"]), 3);
}

/// The encoding byte of a HyperLogLog string (`HYLL` then 0 dense, 1 sparse).
fn hll_encoding(con: &mut redis::Connection, key: &str) -> u8 {
    let raw: Vec<u8> = q(con, &["get", key]);
    assert_eq!(&raw[..4], b"HYLL");
    raw[4]
}

#[test]
fn hll_sparse_max_bytes_decides_when_a_value_turns_dense() {
    let (_dir, server) = start_server(|_| {});
    let mut con = connect(&server);
    let elements: Vec<String> = (0..40).map(|n| format!("e{n}")).collect();
    let pfadd = |con: &mut redis::Connection, key: &str| {
        let mut args = vec!["pfadd", key];
        args.extend(elements.iter().map(String::as_str));
        let _: i64 = q(con, &args);
    };
    // Forty registers set take well over 30 bytes of sparse opcodes.
    let _: () = q(&mut con, &["config", "set", "hll-sparse-max-bytes", "30"]);
    assert_eq!(v(&mut con, &["config", "get", "hll-sparse-max-bytes"]), ["hll-sparse-max-bytes", "30"]);
    pfadd(&mut con, "small");
    // Per server: another server in this process keeps its own default of 3000.
    let (_dir2, other) = start_server(|_| {});
    let mut con2 = connect(&other);
    pfadd(&mut con2, "other");
    assert_eq!(hll_encoding(&mut con2, "other"), 1, "sparse on a server with the default");
    let _: () = q(&mut con, &["config", "set", "hll-sparse-max-bytes", "3000"]);
    pfadd(&mut con, "large");
    assert_eq!(hll_encoding(&mut con, "small"), 0, "dense past 30 bytes");
    assert_eq!(hll_encoding(&mut con, "large"), 1, "sparse under 3000 bytes");
    assert_eq!(i(&mut con, &["pfcount", "small"]), i(&mut con, &["pfcount", "large"]));
}

#[test]
fn touch_counts_existing_keys() {
    let (_dir, server) = start_server(|_| {});
    let mut con = connect(&server);
    let _: () = q(&mut con, &["set", "key1", "1"]);
    let _: i64 = q(&mut con, &["rpush", "key2", "a"]);
    assert_eq!(i(&mut con, &["touch", "key0", "key1", "key2", "key3"]), 2);
    assert_eq!(i(&mut con, &["touch", "key1", "key1"]), 2);
    assert_eq!(i(&mut con, &["touch", "nothing"]), 0);
    assert_eq!(crate::helpers::e(&mut con, &["touch"]), "ERR wrong number of arguments for 'touch' command");
}

#[test]
fn sort_getkeys_names_only_the_last_store() {
    let (_dir, server) = start_server(|_| {});
    let mut con = connect(&server);
    assert_eq!(
        v(&mut con, &["command", "getkeys", "sort", "abc", "store", "invalid", "store", "stillbad", "store", "def"]),
        ["abc", "def"]
    );
    assert_eq!(v(&mut con, &["command", "getkeys", "sort", "abc", "by", "store", "get", "#"]), ["abc"]);
    assert_eq!(v(&mut con, &["command", "getkeys", "touch", "a", "b"]), ["a", "b"]);
}

/// An XREAD reply: per stream, its name and its entries (id, fields and values).
type XreadReply = Vec<(String, Vec<(String, Vec<String>)>)>;

#[test]
fn blocked_xread_waits_while_its_key_holds_another_type() {
    let (_dir, server) = start_server(|_| {});
    let mut con = connect(&server);
    let reg = server.shared().store.blocking.clone();
    let mut reader = connect(&server);
    let h = std::thread::spawn(move || -> XreadReply {
        q(&mut reader, &["xread", "block", "20000", "streams", "s1", "$"])
    });
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while reg.blocked_clients() < 1 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    assert_eq!(reg.blocked_clients(), 1);
    // A list under the key wakes nobody (Redis answers no WRONGTYPE here)...
    let _: i64 = q(&mut con, &["lpush", "s1", "foo", "bar"]);
    std::thread::sleep(std::time::Duration::from_millis(100));
    assert_eq!(reg.blocked_clients(), 1, "still blocked");
    // ...the stream that replaces it does.
    let _: i64 = q(&mut con, &["del", "s1"]);
    let id: String = q(&mut con, &["xadd", "s1", "*", "new", "abcd1234"]);
    let got = h.join().expect("reader");
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].0, "s1");
    assert_eq!(got[0].1, vec![(id, vec!["new".to_string(), "abcd1234".to_string()])]);
}
