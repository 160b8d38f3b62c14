//! `shaledb cluster add-node NEW_HOST:PORT EXISTING_HOST:PORT` and `shaledb cluster del-node HOST:PORT NODE_ID`
//! (alias `remove-node`) with the real binary (issue 43): a group of three `shaledb server --cluster-enabled yes`
//! processes on 127.0.0.1 grows to four through a follower (the command follows its -MOVED to the leader) and
//! shrinks back; bad input exits 1 with the server's reason.

mod common;

use common::cluster::{cmd, start_answering};

use std::time::{Duration, Instant};

/// The ids CLUSTER NODES lists on `port`.
fn listed(port: u16) -> Vec<String> {
    cmd(port, &["CLUSTER", "NODES"])
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.split(' ').next().map(str::to_string))
        .collect()
}

#[test]
fn cluster_add_node_and_del_node() {
    let tmp = tempfile::tempdir().unwrap();
    let (nodes, addrs) = start_answering(tmp.path(), 4);
    let start_wait = Instant::now();
    let a: Vec<&str> = addrs.iter().map(String::as_str).collect();
    common::ok(&["cluster", "create", a[0], a[1], a[2], "--replicas", "2", "--timeout", "30"]);
    let leader = loop {
        if let Some(l) = nodes[..3].iter().position(|n| cmd(n.port, &["ROLE"]).is_some_and(|r| r.starts_with("*3"))) {
            break l;
        }
        assert!(start_wait.elapsed() < Duration::from_secs(60), "no leader");
        std::thread::sleep(Duration::from_millis(100));
    };
    let follower = (0..3).find(|&i| i != leader).unwrap();
    assert_eq!(cmd(nodes[leader].port, &["SET", "k", "v"]).as_deref(), Some("+OK"));

    // Added through a follower: the command reaches the leader.
    let out = common::ok(&["cluster", "add-node", a[3], a[follower]]);
    assert!(out.contains("is a voting member"), "{out}");
    let new_id = cmd(nodes[3].port, &["CLUSTER", "MYID"]).unwrap();
    assert_eq!(listed(nodes[leader].port).len(), 4);
    assert!(listed(nodes[leader].port).contains(&new_id));
    assert_eq!(cmd(nodes[3].port, &["READONLY"]).as_deref(), Some("+OK"));

    // Adding it again, removing an unknown node: exit 1 with the reason.
    let (code, _, err) = common::shaledb(&["cluster", "add-node", a[3], a[leader]]);
    assert_eq!(code, Some(1));
    assert!(err.contains("already a voter"), "{err}");
    let (code, _, err) = common::shaledb(&["cluster", "del-node", a[leader], &format!("{:040x}", 5u64)]);
    assert_eq!(code, Some(1));
    assert!(err.contains("not a member"), "{err}");
    let (code, _, err) = common::shaledb(&["cluster", "del-node", a[leader], "not-an-id"]);
    assert_eq!(code, Some(1));
    assert!(err.contains("not a node id"), "{err}");

    // Removed again (the alias), through a follower.
    let out = common::ok(&["cluster", "remove-node", a[follower], &new_id]);
    assert!(out.contains("left the group"), "{out}");
    let deadline = Instant::now() + Duration::from_secs(10);
    while listed(nodes[leader].port).len() != 3 {
        assert!(Instant::now() < deadline, "CLUSTER NODES still lists 4 nodes");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(!listed(nodes[leader].port).contains(&new_id));
}
