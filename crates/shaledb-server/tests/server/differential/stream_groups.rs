//! The stream consumer-group family of the differential test: groups created, moved and destroyed, entries
//! read by two consumers on two connections, acknowledged, claimed and auto-claimed, over two streams with
//! explicit ids, with the pending lists and the groups' counters compared after every command.

use super::{Cmp, Op, Rng, OTHER};

pub(crate) const GROUP_KEYS: &[&str] = &["g0", "g1"];
const GROUPS: &[&str] = &["grp1", "grp2", "nogroup"];
const CONSUMERS: &[&str] = &["alice", "bob", "carol"];

/// An id at or near the entries this family writes (ms 1..40, seq 0..2), or one of the special ids.
fn id(r: &mut Rng) -> String {
    match r.below(10) {
        0 => "0-0".into(),
        1 => "0".into(),
        2 => "$".into(),
        3 => "bad".into(),
        _ => format!("{}-{}", r.range(1, 40), r.range(0, 2)),
    }
}

/// Two or three concrete ids, for XACK, XCLAIM and XDEL.
fn ids(r: &mut Rng, a: &mut Vec<String>) {
    for _ in 0..r.range(1, 3) {
        a.push(format!("{}-{}", r.range(1, 40), r.range(0, 2)));
    }
}

pub(crate) fn gen_stream_groups(r: &mut Rng) -> Vec<Op> {
    let k = if r.chance(4) { OTHER } else { r.pick(GROUP_KEYS) };
    let g = if r.chance(5) { "nogroup" } else { r.pick(&GROUPS[..2]) };
    let c = r.pick(CONSUMERS);
    let conn = r.below(2) as usize;
    let (a, cmp) = match r.below(24) {
        0..=4 => {
            let mut a = cmd!["XADD", k];
            if r.chance(10) {
                a.extend(cmd!["MAXLEN", r.pick(&["2", "5"])]);
            }
            a.extend(cmd![format!("{}-{}", r.range(1, 40), r.range(0, 2)), "f", r.range(0, 100)]);
            (a, Cmp::Exact)
        }
        5 | 6 => {
            let mut a = cmd!["XGROUP", "CREATE", k, g, id(r)];
            if r.chance(30) {
                a.push("MKSTREAM".into());
            }
            if r.chance(20) {
                a.extend(cmd!["ENTRIESREAD", r.pick(&["0", "2", "-1", "-5", "x"])]);
            }
            (a, Cmp::Exact)
        }
        7 => {
            let mut a = cmd!["XGROUP", "SETID", k, g, id(r)];
            if r.chance(20) {
                a.extend(cmd!["ENTRIESREAD", r.pick(&["0", "3", "-1"])]);
            }
            (a, Cmp::Exact)
        }
        8 if r.chance(30) => (cmd!["XGROUP", "DESTROY", k, g], Cmp::Exact),
        8 => (cmd!["XGROUP", r.pick(&["CREATECONSUMER", "DELCONSUMER"]), k, g, c], Cmp::Exact),
        9..=12 => {
            let mut a = cmd!["XREADGROUP", "GROUP", g, c];
            if r.chance(70) {
                a.extend(cmd!["COUNT", r.pick(&["1", "2", "5", "0"])]);
            }
            if r.chance(10) {
                a.push("NOACK".into());
            }
            let from = match r.below(4) {
                0 => "0".to_string(),
                1 => format!("{}-0", r.range(1, 40)),
                _ => ">".to_string(),
            };
            if r.chance(20) {
                // Two streams at once (the other may lack the group).
                let k2 = r.pick(GROUP_KEYS);
                a.extend(cmd!["STREAMS", k, k2, from.clone(), from]);
            } else {
                a.extend(cmd!["STREAMS", k, from]);
            }
            (a, Cmp::Exact)
        }
        13 | 14 => {
            let mut a = cmd!["XACK", k, g];
            ids(r, &mut a);
            (a, Cmp::Exact)
        }
        15 => (cmd!["XPENDING", k, g], Cmp::Exact),
        16 => {
            let mut a = cmd!["XPENDING", k, g];
            if r.chance(20) {
                a.extend(cmd!["IDLE", "0"]);
            }
            a.extend(cmd![r.pick(&["-", "5-0", "(3-0"]), r.pick(&["+", "30-1"]), r.pick(&["10", "1", "0", "-1"])]);
            if r.chance(40) {
                a.push(c.into());
            }
            (a, Cmp::Idle)
        }
        17 | 18 => {
            let mut a = cmd!["XCLAIM", k, g, c, r.pick(&["0", "0", "-1", "x"])];
            ids(r, &mut a);
            for opt in ["JUSTID", "FORCE"] {
                if r.chance(15) {
                    a.push(opt.into());
                }
            }
            if r.chance(15) {
                a.extend(cmd!["RETRYCOUNT", r.pick(&["0", "7"])]);
            }
            if r.chance(10) {
                a.extend(cmd!["LASTID", format!("{}-0", r.range(1, 40))]);
            }
            (a, Cmp::Exact)
        }
        19 => {
            let mut a = cmd!["XAUTOCLAIM", k, g, c, "0", r.pick(&["0-0", "10-0", "-", "x"])];
            if r.chance(60) {
                a.extend(cmd!["COUNT", r.pick(&["1", "3", "100", "0"])]);
            }
            if r.chance(20) {
                a.push("JUSTID".into());
            }
            (a, Cmp::Exact)
        }
        20 => (cmd!["XINFO", "GROUPS", k], Cmp::Exact),
        21 => (cmd!["XINFO", "CONSUMERS", k, g], Cmp::Idle),
        22 => match r.below(4) {
            0 => {
                let mut a = cmd!["XDEL", k];
                ids(r, &mut a);
                (a, Cmp::Exact)
            }
            1 => (cmd!["XTRIM", k, "MAXLEN", r.pick(&["1", "3"])], Cmp::Exact),
            2 => {
                let mut a = cmd!["XSETID", k, format!("{}-{}", r.range(1, 60), r.range(0, 2))];
                if r.chance(30) {
                    a.extend(cmd!["ENTRIESADDED", r.pick(&["50", "1"]), "MAXDELETEDID", "2-0"]);
                }
                (a, Cmp::Exact)
            }
            _ => (cmd!["DEL", k], Cmp::Exact),
        },
        _ => (cmd!["XRANGE", k, "-", "+"], Cmp::Exact),
    };
    vec![Op { conn, args: a, cmp }]
}
