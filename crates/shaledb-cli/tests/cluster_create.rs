//! `shaledb cluster create` (issue 43) with the real binary: three `shaledb server --cluster-enabled yes`
//! processes on 127.0.0.1 formed into one replica group (one group owning every slot, with a map, issue 44), the
//! node count checked against `--replicas`, and a second create refused.

mod common;

use common::cluster::{cmd, start_answering};

#[test]
fn cluster_create_forms_one_group_of_three_servers() {
    let tmp = tempfile::tempdir().unwrap();
    let (nodes, addrs) = start_answering(tmp.path(), 3);
    let a: Vec<&str> = addrs.iter().map(String::as_str).collect();

    // Node counts that are not whole groups of N+1 are refused before anything is sent.
    let (code, _, err) = common::shaledb(&["cluster", "create", a[0], a[1], a[2], "--replicas", "1"]);
    assert_eq!(code, Some(1));
    assert!(err.contains("a multiple of 2"), "{err}");
    let (code, _, err) = common::shaledb(&["cluster", "create", a[0], a[1], "--replicas", "2"]);
    assert_eq!(code, Some(1), "{err}");

    let out = common::ok(&["cluster", "create", a[0], a[1], a[2], "--replicas", "2", "--timeout", "30"]);
    assert!(out.contains("[OK] All 3 nodes agree about slots configuration."), "{out}");
    assert!(out.contains("[OK] All 16384 slots covered."), "{out}");
    for n in &nodes {
        let info = cmd(n.port, &["CLUSTER", "INFO"]).unwrap();
        assert!(info.contains("cluster_state:ok") && info.contains("cluster_known_nodes:3"), "{info}");
    }
    // A write through the leader, found by ROLE.
    let leader = nodes.iter().find(|n| cmd(n.port, &["ROLE"]).is_some_and(|r| r.starts_with("*3"))).expect("a leader");
    assert_eq!(cmd(leader.port, &["SET", "k", "v"]).as_deref(), Some("+OK"));
    assert_eq!(cmd(leader.port, &["GET", "k"]).as_deref(), Some("v"));

    // A second create finds the nodes in a group already.
    let (code, _, err) = common::shaledb(&["cluster", "create", a[0], a[1], a[2], "--replicas", "2"]);
    assert_eq!(code, Some(1));
    assert!(err.contains("already a member"), "{err}");
}
