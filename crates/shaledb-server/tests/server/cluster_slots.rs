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
    // One database, as in Redis Cluster (a slot move carries database 0 only).
    assert_eq!(c.cmd(&["SELECT", "1"]), Resp::Error("ERR SELECT is not allowed in cluster mode".into()));
    assert_eq!(c.cmd(&["SELECT", "0"]), ok());
    assert_eq!(c.cmd(&["SWAPDB", "0", "1"]), Resp::Error("ERR SWAPDB is not allowed in cluster mode".into()));
    assert_eq!(c.cmd(&["MOVE", &x, "1"]), Resp::Error("ERR MOVE is not allowed in cluster mode".into()));
    let e = c.cmd(&["COPY", &t1, &t2, "DB", "1"]);
    assert_eq!(e, Resp::Error("ERR Copying to another database is not allowed in cluster mode".into()));
    assert_eq!(c.cmd(&["MULTI"]), ok());
    assert!(matches!(c.cmd(&["SWAPDB", "0", "1"]), Resp::Error(_)));
    assert!(matches!(c.cmd(&["EXEC"]), Resp::Error(e) if e.starts_with("EXECABORT")));
    // Keys found by a command's own rule (numkeys).
    assert_eq!(c.cmd(&["EVAL", "return 1", "2", &x, &y]), cross);
    assert_eq!(c.cmd(&["EVAL", "return 1", "0"]), Resp::Int(1));
    // A key a script touches without declaring it must be this group's too.
    let set_argv = "return redis.call('SET', ARGV[1], 'v')";
    let e = c.cmd(&["EVAL", set_argv, "0", &b]);
    assert!(
        matches!(&e, Resp::Error(m) if m.contains("Script attempted to access a non local key in a cluster node")),
        "{e:?}"
    );
    assert_eq!(c.cmd(&["EVAL", set_argv, "0", &key_between(0, 8191, 2)]), ok());
    // Redis's rule within the group: every key a script touches is in one slot (the declared keys', else the
    // first touched) unless it declares allow-cross-slot-keys; no-cluster scripts and functions are refused.
    let (k1, k2) = (key_between(0, 8191, 3), key_between(0, 8191, 4));
    assert_ne!(key_slot(k1.as_bytes()), key_slot(k2.as_bytes()));
    let two = "redis.call('SET', ARGV[1], 'a') return redis.call('SET', ARGV[2], 'b')";
    let e = error_of(Some(c.cmd(&["EVAL", two, "0", &k1, &k2])));
    assert!(e.contains("Script attempted to access keys that do not hash to the same slot"), "{e}");
    let declared = "return redis.call('SET', ARGV[1], 'b')";
    let e = error_of(Some(c.cmd(&["EVAL", declared, "1", &k1, &k2])));
    assert!(e.contains("Script attempted to access keys that do not hash to the same slot"), "{e}");
    let cross = format!("#!lua flags=allow-cross-slot-keys\n{two}");
    assert_eq!(c.cmd(&["EVAL", &cross, "0", &k1, &k2]), ok());
    assert_eq!(
        c.cmd(&["EVAL", "#!lua flags=no-cluster\nreturn 1", "0"]),
        Resp::Error("ERR Can not run script on cluster, 'no-cluster' flag is set.".into())
    );
    let lib = "#!lua name=nc\nredis.register_function{function_name='nc', callback=function() return 1 end, flags={'no-cluster'}}";
    assert_eq!(c.cmd(&["FUNCTION", "LOAD", lib]), Resp::Bulk(b"nc".to_vec()));
    assert_eq!(
        c.cmd(&["FCALL", "nc", "0"]),
        Resp::Error("ERR Can not run script on cluster, 'no-cluster' flag is set.".into())
    );

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

    // PUBLISH reaches the subscribers of every node; a shard channel belongs to its slot's group, whose members
    // (a follower too) take SSUBSCRIBE and SPUBLISH, and the others send them there.
    let mut sub = crate::helpers::Client::connect(nodes[f2].addr());
    assert_eq!(sub.cmd(&["SUBSCRIBE", "news"]).array().len(), 3);
    let shard = key_between(8192, 16383, 0);
    let other = key_between(0, 8191, 0);
    let mut ssub = crate::helpers::Client::connect(nodes[f2].addr());
    let e = error_of(Some(ssub.cmd(&["SSUBSCRIBE", &other])));
    assert!(e.starts_with(&format!("MOVED {} 127.0.0.1:{}", key_slot(other.as_bytes()), nodes[0].port)), "{e}");
    let e = error_of(Some(ssub.cmd(&["SSUBSCRIBE", &shard, &other])));
    assert!(e.starts_with("CROSSSLOT"), "{e}");
    let e = error_of(Some(c.cmd(&["SPUBLISH", &shard, "wrong group"])));
    assert!(e.starts_with(&format!("MOVED {} ", key_slot(shard.as_bytes()))), "{e}");
    assert_eq!(ssub.cmd(&["SSUBSCRIBE", &shard]).array().len(), 3);
    assert_eq!(c.cmd(&["PUBLISH", "news", "from group 1"]), Resp::Int(0), "no subscriber on this node");
    let got = sub.read().expect("the message published on another group's node").array();
    assert_eq!(got[2], Resp::Bulk(b"from group 1".to_vec()), "{got:?}");
    let mut p2 = crate::helpers::Client::connect(nodes[l2].addr());
    assert_eq!(p2.cmd(&["SPUBLISH", &shard, "same group"]), Resp::Int(0));
    let got = ssub.read().expect("the shard message from the group's leader").array();
    assert_eq!(got[2], Resp::Bulk(b"same group".to_vec()), "{got:?}");
    let info = c.cmd(&["INFO", "cluster"]).text();
    assert_eq!(info_field(&info, "cluster_publish_dropped").as_deref(), Some("0"), "{info}");

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

/// Two groups of one server each (directories `PREFIX0`, `PREFIX1` under `root`), each leading its group: the
/// nodes, their ids and their `host:port@bus` addresses.
fn two_one_node_groups(root: &std::path::Path, prefix: &str) -> (Vec<NodeProc>, Vec<String>, Vec<String>) {
    let mut nodes: Vec<NodeProc> = (0..2).map(|i| spawn_node(&root.join(format!("{prefix}{i}")))).collect();
    for n in &mut nodes {
        wait_answering(n, Duration::from_secs(20));
    }
    let ids = node_ids(&nodes);
    let addrs: Vec<String> = nodes.iter().map(|n| format!("127.0.0.1:{}@{}", n.port, n.bus)).collect();
    for i in 0..2 {
        let init = init_command(&ids[i..=i], &addrs[i..=i]);
        let a: Vec<&str> = init.iter().map(String::as_str).collect();
        assert_eq!(try_cmd(nodes[i].addr(), &a), Some(ok()));
        poll(WAIT, "the group leads", || is_master(nodes[i].addr()).then_some(()));
    }
    (nodes, ids, addrs)
}

/// A slot moved by hand with the move commands while a client INCRs a key in it and others push to a list
/// and write a hash there: every acknowledged INCR is counted in the value the new owner holds (the freeze is
/// ordered with the writes: none is applied on the source after the export read it), writes refused during
/// the move say `-TRYAGAIN`, and the refusals of the move commands say why.
#[test]
fn cluster_slot_move_keeps_every_acknowledged_write() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let (nodes, ids, addrs) = two_one_node_groups(tmp.path(), "m");
    let map = |epoch: u64, g1: &str, g2: &str, moving: &str| {
        format!(
            "epoch {epoch}\ngroup 1 {g1}\nnode 1 {} {}\ngroup 2 {g2}\nnode 2 {} {}\n{moving}",
            ids[0], addrs[0], ids[1], addrs[1]
        )
    };
    let setmap = |i: usize, gid: &str, text: &str| try_cmd(nodes[i].addr(), &["CLUSTER", "SHALEDB-SETMAP", gid, text]);
    let m1 = map(1, "0-8191", "8192-16383", "");
    assert_eq!(setmap(0, "1", &m1), Some(ok()));
    assert_eq!(setmap(1, "2", &m1), Some(ok()));

    // Slot 100 moves from group 1 to group 2.
    let slot: u16 = 100;
    let k = |name: &str| format!("{{{}}}{name}", key_in(slot));
    let (counter, list, hash) = (k("n"), k("l"), k("h"));
    let mut c = crate::helpers::Client::connect(nodes[0].addr());
    assert_eq!(c.cmd(&["HSET", &hash, "f", "1"]), Resp::Int(1));
    assert_eq!(c.cmd(&["SET", &k("ttl"), "v", "PX", "600000"]), ok());

    // The move commands refuse out of turn.
    let e = error_of(try_cmd(nodes[0].addr(), &["CLUSTER", "SHALEDB-EXPORT", "100", "", "10"]));
    assert!(e.contains("not moving from this group"), "{e}");
    let e = error_of(try_cmd(nodes[1].addr(), &["CLUSTER", "SHALEDB-IMPORT", "100", "1"]));
    assert!(e.contains("not moving to this group"), "{e}");
    let e = error_of(try_cmd(nodes[0].addr(), &["CLUSTER", "SHALEDB-DROPSLOT", "100"]));
    assert!(e.contains("its keys stay"), "{e}");
    let e = error_of(try_cmd(nodes[0].addr(), &["CLUSTER", "SHALEDB-EXPORT", "100", ""]));
    assert!(e.contains("wrong number of arguments"), "{e}");

    // Writers, until told to stop: each counts what was acknowledged.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writer = |key: String, op: &'static str| {
        let stop = stop.clone();
        let addrs = [nodes[0].addr(), nodes[1].addr()];
        std::thread::spawn(move || {
            let (mut acked, mut retried, mut at) = (0u64, 0u64, 0usize);
            let mut c = crate::helpers::Client::connect(addrs[at]);
            let deadline = std::time::Instant::now() + Duration::from_secs(60);
            while !stop.load(std::sync::atomic::Ordering::Relaxed) && std::time::Instant::now() < deadline {
                let r = match op {
                    "incr" => c.cmd(&["INCR", &key]),
                    _ => c.cmd(&["RPUSH", &key, "x"]),
                };
                match r {
                    Resp::Int(_) => acked += 1,
                    Resp::Error(e) if e.starts_with("TRYAGAIN") => {
                        retried += 1;
                        std::thread::sleep(Duration::from_millis(2));
                    }
                    Resp::Error(e) if e.starts_with("MOVED") => {
                        at = 1 - at;
                        c = crate::helpers::Client::connect(addrs[at]);
                    }
                    other => panic!("{op} {key}: {other:?}"),
                }
            }
            (acked, retried)
        })
    };
    // A client blocked on a key of the slot.
    let blocked = {
        let (addr, key) = (nodes[0].addr(), k("q"));
        std::thread::spawn(move || crate::helpers::Client::connect(addr).cmd(&["BLPOP", &key, "20"]))
    };
    let w1 = writer(counter.clone(), "incr");
    let w2 = writer(list.clone(), "rpush");
    std::thread::sleep(Duration::from_millis(300));

    let m2 = map(2, "0-8191", "8192-16383", "moving 100 1 2\n");
    assert_eq!(setmap(1, "2", &m2), Some(ok()));
    assert_eq!(setmap(0, "1", &m2), Some(ok()));
    // The blocked client is sent away rather than left waiting for a push that cannot come.
    let r = blocked.join().expect("blocked client");
    assert!(matches!(&r, Resp::Error(e) if e.starts_with("TRYAGAIN")), "{r:?}");
    // Frozen: a write is refused, a read still served by the owner.
    assert!(matches!(c.cmd(&["HSET", &hash, "g", "2"]), Resp::Error(e) if e.starts_with("TRYAGAIN")));
    assert_eq!(c.cmd(&["HGET", &hash, "f"]), Resp::Bulk(b"1".to_vec()));
    let mut d = crate::helpers::Client::connect(nodes[1].addr());
    assert!(matches!(d.cmd(&["HGET", &hash, "f"]), Resp::Error(e) if e.starts_with("TRYAGAIN")));
    std::thread::sleep(Duration::from_millis(200));

    // A write sent now waits for the hand-over (under FROZEN_WAIT) and is then sent on with -MOVED instead of
    // answered -TRYAGAIN.
    let late = {
        let (addr, key) = (nodes[0].addr(), k("late"));
        std::thread::spawn(move || crate::helpers::Client::connect(addr).cmd(&["SET", &key, "v"]))
    };
    // A byte budget of 0 is refused.
    let e = error_of(try_cmd(nodes[0].addr(), &["CLUSTER", "SHALEDB-EXPORT", "100", "", "2", "0"]));
    assert!(e.contains("byte budget"), "{e}");
    // The slot's keys into group 2: at most two per chunk, or one where the byte budget (1) stops the export
    // after its first key.
    let (mut after, mut first, mut moved, mut chunks) = (String::new(), true, 0i64, 0);
    loop {
        let budget: &[&str] = if chunks % 2 == 0 { &[] } else { &["1"] };
        let mut a = vec!["CLUSTER", "SHALEDB-EXPORT", "100", &after, "2"];
        a.extend_from_slice(budget);
        let r = try_cmd(nodes[0].addr(), &a).expect("export").array();
        chunks += 1;
        let next = r[0].clone().text();
        // Payloads are binary: passed on as bytes.
        let raw: Vec<Vec<u8>> = r[1]
            .clone()
            .array()
            .into_iter()
            .map(|x| match x {
                Resp::Bulk(b) => b,
                o => panic!("{o:?}"),
            })
            .collect();
        assert_eq!(raw.len() % 3, 0);
        assert!(raw.len() <= if budget.is_empty() { 6 } else { 3 }, "{} items under {budget:?}", raw.len());
        let mut args: Vec<Vec<u8>> = vec![
            b"CLUSTER".to_vec(),
            b"SHALEDB-IMPORT".to_vec(),
            b"100".to_vec(),
            if first { b"1".to_vec() } else { b"0".to_vec() },
        ];
        args.extend(raw);
        let refs: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
        match d.cmd_bytes(&refs) {
            Resp::Int(n) => moved += n,
            other => panic!("import: {other:?}"),
        }
        first = false;
        if next.is_empty() {
            break;
        }
        after = next;
    }
    assert_eq!(moved, 4, "the counter, the list, the hash and the key with a TTL");
    assert!(chunks >= 3, "{chunks} exports");

    let m3 = map(3, "0-99,101-8191", "100,8192-16383", "");
    assert_eq!(setmap(0, "1", &m3), Some(ok()));
    assert_eq!(setmap(1, "2", &m3), Some(ok()));
    assert_eq!(
        late.join().expect("the late writer"),
        Resp::Error(format!("MOVED 100 127.0.0.1:{}", nodes[1].port)),
        "held during the freeze, then sent to the new owner"
    );
    assert_eq!(try_cmd(nodes[0].addr(), &["CLUSTER", "SHALEDB-DROPSLOT", "100"]), Some(Resp::Int(4)));
    std::thread::sleep(Duration::from_millis(300));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let (incrs, incr_retries) = w1.join().expect("incr writer");
    let (pushes, _) = w2.join().expect("push writer");
    assert!(incr_retries > 0, "the writer met the freeze");

    // On the new owner: every acknowledged write, and nothing else.
    assert_eq!(d.cmd(&["GET", &counter]), Resp::Bulk(incrs.to_string().into_bytes()));
    assert_eq!(d.cmd(&["LLEN", &list]), Resp::Int(pushes as i64));
    assert_eq!(d.cmd(&["HGET", &hash, "f"]), Resp::Bulk(b"1".to_vec()));
    assert!(matches!(d.cmd(&["PTTL", &k("ttl")]), Resp::Int(t) if t > 500_000), "the expiry moved with the key");
    assert_eq!(d.cmd(&["CLUSTER", "COUNTKEYSINSLOT", "100"]), Resp::Int(4));
    assert_eq!(c.cmd(&["CLUSTER", "COUNTKEYSINSLOT", "100"]), Resp::Int(0), "dropped from the old owner");
    assert_eq!(c.cmd(&["GET", &counter]), Resp::Error(format!("MOVED 100 127.0.0.1:{}", nodes[1].port)));
}

/// A member stores its keys slot first (docs/format/server-keys.md, "A cluster member's keyspace"): the
/// keyspace walks (SCAN, KEYS, RANDOMKEY, DBSIZE) see every key once, SHALEDB.RANGE is refused with the reason,
/// collections keep their members, and after a kill -9 and restart (the member's marker passes the start check)
/// new collections get versions of their own.
#[test]
fn cluster_member_stores_keys_slot_first() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let mut node = spawn_node(&tmp.path().join("n0"));
    wait_answering(&mut node, Duration::from_secs(20));
    let ids = node_ids(std::slice::from_ref(&node));
    let addrs = vec![format!("127.0.0.1:{}@{}", node.port, node.bus)];
    let init = init_command(&ids, &addrs);
    let init: Vec<&str> = init.iter().map(String::as_str).collect();
    assert_eq!(try_cmd(node.addr(), &init), Some(ok()));
    poll(WAIT, "the group leads", || is_master(node.addr()).then_some(()));
    let run = |n: &NodeProc, args: &[&str]| try_cmd(n.addr(), args).unwrap_or_else(|| panic!("{args:?}: no answer"));
    let mut names = Vec::new();
    for i in 0..300 {
        let (s, h) = (format!("key:{i}"), format!("hash:{i}"));
        assert_eq!(run(&node, &["SET", &s, &i.to_string()]), ok());
        assert_eq!(run(&node, &["HSET", &h, "f", &i.to_string()]), Resp::Int(1));
        names.extend([s, h]);
    }
    names.sort();
    let scan_all = |n: &NodeProc| {
        let (mut cursor, mut seen) = ("0".to_string(), Vec::new());
        for _ in 0..1000 {
            let r = run(n, &["SCAN", &cursor, "COUNT", "7"]);
            let Resp::Array(v) = r else { panic!("SCAN: {r:?}") };
            let Resp::Array(keys) = &v[1] else { panic!("SCAN keys: {v:?}") };
            seen.extend(keys.iter().map(Resp::text));
            cursor = v[0].text();
            if cursor == "0" {
                break;
            }
        }
        assert_eq!(cursor, "0", "SCAN ends");
        seen.sort();
        seen
    };
    assert_eq!(scan_all(&node), names, "SCAN returns every key exactly once");
    let Resp::Array(all) = run(&node, &["KEYS", "*"]) else { panic!("KEYS") };
    assert_eq!(all.len(), names.len());
    let Resp::Array(some) = run(&node, &["KEYS", "key:1*"]) else { panic!("KEYS") };
    assert_eq!(some.len(), names.iter().filter(|k| k.starts_with("key:1")).count(), "a MATCH prefix over every slot");
    assert!(names.contains(&run(&node, &["RANDOMKEY"]).text()));
    assert_eq!(run(&node, &["DBSIZE"]), Resp::Int(names.len() as i64));
    let e = error_of(try_cmd(node.addr(), &["SHALEDB.RANGE", "[x", "[x"]));
    assert!(e.contains("stores them by hash slot"), "{e}");

    node.kill();
    node.restart();
    wait_answering(&mut node, Duration::from_secs(20));
    poll(WAIT, "the group leads again", || is_master(node.addr()).then_some(()));
    for i in 0..300 {
        let h = format!("later:{i}");
        assert_eq!(run(&node, &["HSET", &h, "g", "new"]), Resp::Int(1));
    }
    // The collections from before the restart are intact beside the new ones (no version handed out twice).
    for i in 0..300 {
        let fields: Vec<String> =
            run(&node, &["HGETALL", &format!("hash:{i}")]).array().iter().map(Resp::text).collect();
        assert_eq!(fields, vec!["f".to_string(), i.to_string()], "hash:{i}");
    }
    assert_eq!(run(&node, &["DBSIZE"]), Resp::Int(names.len() as i64 + 300));
}

/// A slot copied while its group serves writes, then frozen, then only what was written meanwhile copied
/// again (the catch-up, cluster/copy.rs): writers never meet `-TRYAGAIN` during the copy, and every write they
/// saw acknowledged, a member-only write (LSET), a deletion and a new key all reach the new owner. A slot frozen
/// without a copy first has no record: `NOTRACKED`.
#[test]
fn cluster_slot_copy_then_catch_up_keeps_every_acknowledged_write() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let (nodes, ids, addrs) = two_one_node_groups(tmp.path(), "c");
    let map = |epoch: u64, g1: &str, g2: &str, extra: &str| {
        format!(
            "epoch {epoch}\ngroup 1 {g1}\nnode 1 {} {}\ngroup 2 {g2}\nnode 2 {} {}\n{extra}",
            ids[0], addrs[0], ids[1], addrs[1]
        )
    };
    let setmap = |i: usize, gid: &str, text: &str| try_cmd(nodes[i].addr(), &["CLUSTER", "SHALEDB-SETMAP", gid, text]);
    let both = |text: &str| {
        assert_eq!(setmap(1, "2", text), Some(ok()));
        assert_eq!(setmap(0, "1", text), Some(ok()));
    };
    both(&map(1, "0-8191", "8192-16383", ""));
    let k = |name: &str| format!("{{{}}}{name}", key_in(100));
    let (counter, list, gone, born) = (k("n"), k("l"), k("gone"), k("born"));
    let mut c = crate::helpers::Client::connect(nodes[0].addr());
    assert_eq!(c.cmd(&["RPUSH", &list, "a", "b", "c"]), Resp::Int(3));
    assert_eq!(c.cmd(&["SET", &gone, "here before the copy"]), ok());
    let mut d = crate::helpers::Client::connect(nodes[1].addr());
    // EXPORT's or EXPORT-DIRTY's items imported into group 2.
    let import = |d: &mut crate::helpers::Client, items: Resp, first: bool| -> i64 {
        let mut args: Vec<Vec<u8>> = vec![
            b"CLUSTER".to_vec(),
            b"SHALEDB-IMPORT".to_vec(),
            b"100".to_vec(),
            vec![if first { b'1' } else { b'0' }],
        ];
        args.extend(items.array().into_iter().map(|x| match x {
            Resp::Bulk(b) => b,
            o => panic!("{o:?}"),
        }));
        let refs: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
        match d.cmd_bytes(&refs) {
            Resp::Int(n) => n,
            other => panic!("import: {other:?}"),
        }
    };

    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let incrs = {
        let (stop, addrs, key) = (stop.clone(), [nodes[0].addr(), nodes[1].addr()], counter.clone());
        std::thread::spawn(move || {
            let (mut acked, mut tryagain, mut at) = (0u64, 0u64, 0usize);
            let mut c = crate::helpers::Client::connect(addrs[at]);
            let deadline = std::time::Instant::now() + Duration::from_secs(60);
            while !stop.load(std::sync::atomic::Ordering::Relaxed) && std::time::Instant::now() < deadline {
                match c.cmd(&["INCR", &key]) {
                    Resp::Int(_) => acked += 1,
                    Resp::Error(e) if e.starts_with("TRYAGAIN") => tryagain += 1,
                    Resp::Error(e) if e.starts_with("MOVED") => {
                        at = 1 - at;
                        c = crate::helpers::Client::connect(addrs[at]);
                    }
                    other => panic!("INCR: {other:?}"),
                }
            }
            (acked, tryagain)
        })
    };
    std::thread::sleep(Duration::from_millis(200));

    // 1-2: copying; the whole slot copied while group 1 serves it.
    both(&map(2, "0-8191", "8192-16383", "copying 100 1 2\n"));
    let r = try_cmd(nodes[0].addr(), &["CLUSTER", "SHALEDB-EXPORT", "100", "", "1000"]).expect("export").array();
    assert_eq!(r[0].clone().text(), "", "one chunk");
    assert_eq!(import(&mut d, r[1].clone(), true), 3, "the counter, the list and the key to delete");
    // Writes meanwhile: served at once.
    assert_eq!(c.cmd(&["LSET", &list, "1", "B"]), ok());
    assert_eq!(c.cmd(&["DEL", &gone]), Resp::Int(1));
    assert_eq!(c.cmd(&["SET", &born, "written during the copy"]), ok());
    std::thread::sleep(Duration::from_millis(200));

    // 3-4: frozen; only what was written since the copy began copied again.
    both(&map(3, "0-8191", "8192-16383", "moving 100 1 2\n"));
    let dirty = try_cmd(nodes[0].addr(), &["CLUSTER", "SHALEDB-EXPORT-DIRTY", "100"]).expect("export-dirty");
    let names: Vec<String> = dirty.clone().array().chunks(3).map(|t| t[0].clone().text()).collect();
    let mut want = vec![counter.clone(), list.clone(), gone.clone(), born.clone()];
    want.sort();
    assert_eq!(names, want, "the keys written since the copy began");
    let gone_item: Vec<Resp> = dirty.clone().array().chunks(3).find(|t| t[0].clone().text() == gone).unwrap().to_vec();
    assert_eq!(gone_item[1], Resp::Bulk(b"-1".to_vec()), "a deleted key travels as a deletion");
    assert_eq!(import(&mut d, dirty, false), 4);

    // 5-6: handed over, the old copy dropped.
    both(&map(4, "0-99,101-8191", "100,8192-16383", ""));
    assert_eq!(try_cmd(nodes[0].addr(), &["CLUSTER", "SHALEDB-DROPSLOT", "100"]), Some(Resp::Int(3)));
    std::thread::sleep(Duration::from_millis(200));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let (acked, tryagain) = incrs.join().expect("incr writer");
    assert!(acked > 0);
    println!("INCR acknowledged {acked}, refused -TRYAGAIN {tryagain} (only while frozen)");
    assert_eq!(d.cmd(&["GET", &counter]), Resp::Bulk(acked.to_string().into_bytes()), "every acknowledged INCR");
    let got: Vec<String> = d.cmd(&["LRANGE", &list, "0", "-1"]).array().iter().map(Resp::text).collect();
    assert_eq!(got, ["a", "B", "c"], "the member-only write");
    assert_eq!(d.cmd(&["EXISTS", &gone]), Resp::Int(0));
    assert_eq!(d.cmd(&["GET", &born]), Resp::Bulk(b"written during the copy".to_vec()));

    // A slot frozen without a copy first: no record to answer from.
    both(&map(5, "0-99,101-8191", "100,8192-16383", "moving 200 1 2\n"));
    let e = error_of(try_cmd(nodes[0].addr(), &["CLUSTER", "SHALEDB-EXPORT-DIRTY", "200"]));
    assert!(e.starts_with("NOTRACKED"), "{e}");
    let e = error_of(try_cmd(nodes[0].addr(), &["CLUSTER", "SHALEDB-EXPORT-DIRTY", "300"]));
    assert!(e.contains("not frozen for a move from this group"), "{e}");
}
