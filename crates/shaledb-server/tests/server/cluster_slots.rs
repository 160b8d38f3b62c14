//! Slots across replica groups (issue 44): three real server processes formed into two groups (group 1 of one
//! node, group 2 of two) with `CLUSTER SHALEDB-INIT`, given a cluster map with `CLUSTER SHALEDB-SETMAP`.
//!
//! One test walks it: the map's refusals (malformed text, a map without this group, an older epoch, a
//! follower), a map leaving a slot unassigned (`cluster_state:fail`, `-CLUSTERDOWN Hash slot not served`), a
//! full map (`-MOVED` to the owning group's leader from every node, `-CROSSSLOT` for one command and across a
//! transaction, CLUSTER SLOTS/NODES/INFO listing both groups, COUNTKEYSINSLOT/GETKEYSINSLOT), and the map kept
//! across a kill -9 and restart.

use crate::helpers::cluster::{
    info_field, init_command, is_master, node_ids, poll, spawn_node, try_cmd, wait_answering, NodeProc, WAIT,
};
use crate::helpers::{ok, Resp};
use shaledb_server::cluster::key_slot;
use std::time::Duration;

/// A key of `slot` (`k0`, `k1`, ... the first that hashes there).
fn key_in(slot: u16) -> String {
    (0u32..).map(|i| format!("k{i}")).find(|k| key_slot(k.as_bytes()) == slot).expect("some key")
}

/// A key whose slot is in `lo..=hi`.
fn key_between(lo: u16, hi: u16, skip: usize) -> String {
    (0u32..)
        .map(|i| format!("key:{i}"))
        .filter(|k| (lo..=hi).contains(&key_slot(k.as_bytes())))
        .nth(skip)
        .expect("some key")
}

fn map_text(epoch: u64, g1: &str, g2: &str, ids: &[String], addrs: &[String]) -> String {
    format!(
        "epoch {epoch}\ngroup 1 {g1}\nnode 1 {} {}\ngroup 2 {g2}\nnode 2 {} {}\nnode 2 {} {}\n",
        ids[0], addrs[0], ids[1], addrs[1], ids[2], addrs[2]
    )
}

fn error_of(r: Option<Resp>) -> String {
    match r {
        Some(Resp::Error(e)) => e,
        other => panic!("expected an error, got {other:?}"),
    }
}

#[test]
fn cluster_two_groups_route_by_slot_refuse_cross_slot_and_keep_their_map() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let mut nodes: Vec<NodeProc> = (0..3).map(|i| spawn_node(&tmp.path().join(format!("n{i}")))).collect();
    for n in &mut nodes {
        wait_answering(n, Duration::from_secs(20));
    }
    let ids = node_ids(&nodes);
    let addrs: Vec<String> = nodes.iter().map(|n| format!("127.0.0.1:{}@{}", n.port, n.bus)).collect();
    let run = |i: usize, args: &[String]| -> Option<Resp> {
        let a: Vec<&str> = args.iter().map(String::as_str).collect();
        try_cmd(nodes[i].addr(), &a)
    };
    assert_eq!(run(0, &init_command(&ids[..1], &addrs[..1])), Some(ok()));
    assert_eq!(run(1, &init_command(&ids[1..], &addrs[1..])), Some(ok()));
    poll(WAIT, "group 1 leads", || is_master(nodes[0].addr()).then_some(()));
    let l2 = poll(WAIT, "group 2 has a leader", || (1..3).find(|&i| is_master(nodes[i].addr())));
    let f2 = if l2 == 1 { 2 } else { 1 };
    // Without a map, each group owns every slot (issue 43's single group).
    assert_eq!(try_cmd(nodes[0].addr(), &["SET", "before", "1"]), Some(ok()));

    let setmap = |i: usize, gid: &str, text: &str| try_cmd(nodes[i].addr(), &["CLUSTER", "SHALEDB-SETMAP", gid, text]);
    // Refusals, each with its reason.
    let e = error_of(setmap(0, "1", "group 1 0-16383\n"));
    assert!(e.contains("no epoch"), "{e}");
    let e = error_of(setmap(0, "0", "epoch 1\n"));
    assert!(e.contains("not a group id"), "{e}");
    let e = error_of(setmap(0, "3", &map_text(1, "0-8191", "8192-16383", &ids, &addrs)));
    assert!(e.contains("names no group 3"), "{e}");
    let e = error_of(setmap(0, "2", &map_text(1, "0-8191", "8192-16383", &ids, &addrs)));
    assert!(e.contains("lists it in group 1"), "a map giving this group another's members: {e}");
    let e = error_of(setmap(0, "1", &map_text(1, "0-8192", "8192-16383", &ids, &addrs)));
    assert!(e.contains("slot 8192 is given to groups 1 and 2"), "{e}");
    let e = error_of(setmap(f2, "2", &map_text(1, "0-8191", "8192-16383", &ids, &addrs)));
    assert!(e.starts_with("MOVED 0 "), "a follower sends the change to its leader: {e}");
    let e = error_of(try_cmd(nodes[0].addr(), &["CLUSTER", "SHALEDB-SETMAP", "1"]));
    assert!(e.contains("wrong number of arguments"), "{e}");

    // A map leaving slot 16383 to no group.
    let partial = map_text(1, "0-8191", "8192-16382", &ids, &addrs);
    assert_eq!(setmap(0, "1", &partial), Some(ok()));
    assert_eq!(setmap(0, "1", &partial), Some(ok()), "the same map again");
    assert_eq!(setmap(l2, "2", &partial), Some(ok()));
    let info = try_cmd(nodes[0].addr(), &["CLUSTER", "INFO"]).expect("info").text();
    assert_eq!(info_field(&info, "cluster_state").as_deref(), Some("fail"), "{info}");
    assert_eq!(info_field(&info, "cluster_slots_assigned").as_deref(), Some("16383"), "{info}");
    let orphan = key_in(16383);
    assert_eq!(error_of(try_cmd(nodes[0].addr(), &["SET", &orphan, "x"])), "CLUSTERDOWN Hash slot not served");
    // An older or equal epoch cannot replace it.
    let e = error_of(setmap(0, "1", &map_text(1, "0-8191", "8192-16383", &ids, &addrs)));
    assert!(e.contains("higher epoch"), "{e}");

    // The full map, epoch 2.
    let full = map_text(2, "0-8191", "8192-16383", &ids, &addrs);
    assert_eq!(setmap(0, "1", &full), Some(ok()));
    assert_eq!(setmap(l2, "2", &full), Some(ok()));
    for n in &nodes {
        poll(WAIT, "every node reports cluster_state:ok with two groups", || {
            let t = try_cmd(n.addr(), &["CLUSTER", "INFO"])?.text();
            (info_field(&t, "cluster_state")? == "ok"
                && info_field(&t, "cluster_size")? == "2"
                && info_field(&t, "cluster_known_nodes")? == "3")
                .then_some(())
        });
    }

    // Routing: each node sends a key of the other group to that group's leader.
    let (a, b) = (key_between(0, 8191, 0), key_between(8192, 16383, 0));
    let (sa, sb) = (key_slot(a.as_bytes()), key_slot(b.as_bytes()));
    assert_eq!(try_cmd(nodes[0].addr(), &["SET", &a, "va"]), Some(ok()));
    assert_eq!(try_cmd(nodes[l2].addr(), &["SET", &b, "vb"]), Some(ok()));
    let to_g2 = format!("MOVED {sb} 127.0.0.1:{}", nodes[l2].port);
    poll(WAIT, "group 1 learns group 2's leader", || {
        (try_cmd(nodes[0].addr(), &["GET", &b]) == Some(Resp::Error(to_g2.clone()))).then_some(())
    });
    let to_g1 = format!("MOVED {sa} 127.0.0.1:{}", nodes[0].port);
    for i in [l2, f2] {
        assert_eq!(try_cmd(nodes[i].addr(), &["GET", &a]), Some(Resp::Error(to_g1.clone())));
    }
    // A follower after READONLY serves its own group's slots, and still sends the others on.
    let mut r = crate::helpers::Client::connect(nodes[f2].addr());
    assert_eq!(r.cmd(&["READONLY"]), ok());
    poll(WAIT, "the follower has the write", || (r.cmd(&["GET", &b]) == Resp::Bulk(b"vb".to_vec())).then_some(()));
    assert_eq!(r.cmd(&["GET", &a]), Resp::Error(to_g1.clone()));

    // Keys of one command, and of one transaction, share a slot.
    let cross = Resp::Error("CROSSSLOT Keys in request don't hash to the same slot".into());
    let (x, y) = (key_in(1), key_in(2));
    assert_eq!(try_cmd(nodes[0].addr(), &["MSET", &x, "1", &y, "2"]), Some(cross.clone()));
    let tagged = key_between(0, 8191, 1);
    let (t1, t2) = (format!("{{{tagged}}}1"), format!("{{{tagged}}}2"));
    assert_eq!(try_cmd(nodes[0].addr(), &["MSET", &t1, "1", &t2, "2"]), Some(ok()));
    let mut c = crate::helpers::Client::connect(nodes[0].addr());
    assert_eq!(c.cmd(&["MULTI"]), ok());
    assert_eq!(c.cmd(&["SET", &x, "1"]), Resp::Simple("QUEUED".into()));
    assert_eq!(c.cmd(&["SET", &y, "2"]), cross);
    assert!(matches!(c.cmd(&["EXEC"]), Resp::Error(e) if e.starts_with("EXECABORT")));
    assert_eq!(c.cmd(&["MULTI"]), ok(), "a new transaction starts with no slot");
    assert_eq!(c.cmd(&["SET", &y, "2"]), Resp::Simple("QUEUED".into()));
    assert_eq!(c.cmd(&["EXEC"]), Resp::Array(vec![ok()]));
    // Keys found by a command's own rule (numkeys).
    assert_eq!(c.cmd(&["EVAL", "return 1", "2", &x, &y]), cross);
    assert_eq!(c.cmd(&["EVAL", "return 1", "0"]), Resp::Int(1));

    // What the tools read: both groups, each with its leader first.
    let slots = c.cmd(&["CLUSTER", "SLOTS"]).array();
    assert_eq!(slots.len(), 2, "{slots:?}");
    let r0 = slots[0].clone().array();
    let r1 = slots[1].clone().array();
    assert_eq!(&r0[..2], &[Resp::Int(0), Resp::Int(8191)]);
    assert_eq!(r0.len(), 3);
    assert_eq!(&r1[..2], &[Resp::Int(8192), Resp::Int(16383)]);
    assert_eq!(r1.len(), 4);
    assert_eq!(r1[2].clone().array()[1], Resp::Int(i64::from(nodes[l2].port)), "group 2's leader first");
    let lines = c.cmd(&["CLUSTER", "NODES"]).text();
    assert_eq!(lines.lines().count(), 3, "{lines}");
    assert!(lines.lines().any(|l| l.starts_with(&ids[l2]) && l.contains(" master - ") && l.ends_with(" 8192-16383")));
    assert!(lines.lines().any(|l| l.starts_with(&ids[0]) && l.contains("myself,master") && l.ends_with(" 0-8191")));
    assert_eq!(c.cmd(&["CLUSTER", "SHARDS"]).array().len(), 2);
    assert_eq!(c.cmd(&["CLUSTER", "COUNTKEYSINSLOT", &sa.to_string()]), Resp::Int(1));
    assert_eq!(
        c.cmd(&["CLUSTER", "GETKEYSINSLOT", &sa.to_string(), "10"]),
        Resp::Array(vec![Resp::Bulk(a.clone().into_bytes())])
    );
    assert_eq!(c.cmd(&["CLUSTER", "COUNTKEYSINSLOT", "16384"]), Resp::Error("ERR Invalid slot".into()));
    assert_eq!(c.cmd(&["CLUSTER", "GETKEYSINSLOT", "1", "-1"]), Resp::Error("ERR Invalid number of keys".into()));
    let group = c.cmd(&["CLUSTER", "SHALEDB-GROUP"]).array();
    assert_eq!(&group[..2], &[Resp::Int(1), Resp::Int(2)]);

    // The map is part of the group's state: a crash and restart keeps it.
    nodes[0].kill();
    nodes[0].restart();
    wait_answering(&mut nodes[0], Duration::from_secs(20));
    poll(WAIT, "the restarted node leads group 1 again, with its map", || {
        let t = try_cmd(nodes[0].addr(), &["CLUSTER", "INFO"])?.text();
        (info_field(&t, "cluster_state")? == "ok").then_some(())
    });
    assert_eq!(try_cmd(nodes[0].addr(), &["GET", &a]), Some(Resp::Bulk(b"va".to_vec())));
    assert_eq!(try_cmd(nodes[0].addr(), &["GET", &b]), Some(Resp::Error(to_g2)));
}
