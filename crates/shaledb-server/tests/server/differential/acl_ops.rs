//! The ACL family of the differential test: two users built up rule by rule with ACL SETUSER (passwords, key
//! and channel patterns, read/write key permissions, commands, categories and subcommands, selectors, resets
//! and invalid rules), read back with ACL GETUSER, LIST and USERS, checked with ACL DRYRUN, and tried for real on
//! the second connection (AUTH, then commands that are allowed or refused, then back to `default`). The
//! `default` user is never changed, so the driver's connections keep working.

use super::{Cmp, Op, Rng};

const USERS: &[&str] = &["u1", "u2"];

/// SETUSER rules, valid and not. `#...` is the SHA-256 of "pw2".
const RULES: &[&str] = &[
    "on",
    "off",
    "nopass",
    "resetpass",
    ">pw1",
    ">pw2",
    "<pw1",
    "#93915a0a4bf8f634cb1856494dd4304472ad46b9827f541f76b6761c49cc55b0",
    "!93915a0a4bf8f634cb1856494dd4304472ad46b9827f541f76b6761c49cc55b0",
    "~k*",
    "~k1",
    "%R~r*",
    "%W~w*",
    "%RW~b*",
    "allkeys",
    "resetkeys",
    "&chan*",
    "allchannels",
    "resetchannels",
    "+get",
    "-get",
    "+set",
    "+@read",
    "-@write",
    "+@string",
    "-@dangerous",
    "+@all",
    "-@all",
    "allcommands",
    "nocommands",
    "+config|get",
    "-config|set",
    "+client|getname",
    "reset",
    "clearselectors",
    "+nosuch",
    "+@nosuchcat",
    "~",
    "bogus",
    ">",
    "%X~x*",
    "+get|sub",
];

/// Commands a user may or may not run (DRYRUN and for real).
fn command(r: &mut Rng) -> Vec<String> {
    match r.below(10) {
        0 => cmd!["GET", r.pick(&["k1", "r1", "w1", "b1", "s1", "x"])],
        1 => cmd!["SET", r.pick(&["k1", "r1", "w1", "b1", "s1"]), "v"],
        2 => cmd!["COPY", r.pick(&["r1", "k1"]), r.pick(&["w1", "b1"])],
        3 => cmd!["CONFIG", "GET", "maxmemory"],
        4 => cmd!["CONFIG", "SET", "maxmemory-policy", "noeviction"],
        5 => cmd!["PUBLISH", r.pick(&["chan1", "other"]), "m"],
        6 => cmd!["CLIENT", "GETNAME"],
        7 => cmd!["STRLEN", "k1"],
        8 => cmd!["LPUSH", r.pick(&["w1", "k1"]), "a"],
        _ => cmd!["PING"],
    }
}

pub(crate) fn gen_acl(r: &mut Rng) -> Vec<Op> {
    let u = r.pick(USERS);
    let exact = |args: Vec<String>| Op { conn: 0, args, cmp: Cmp::Exact };
    match r.below(12) {
        0..=3 => {
            let mut a = cmd!["ACL", "SETUSER", u];
            for _ in 0..r.range(1, 4) {
                a.push(r.pick(RULES).into());
            }
            if r.chance(15) {
                // A selector: one argument with its rules inside the parentheses.
                a.push(r.pick(&["(~s* +set)", "(%R~r* +@read)", "(+get ~x*)"]).into());
            }
            vec![exact(a)]
        }
        4 => vec![Op {
            conn: 0,
            args: cmd!["ACL", "GETUSER", r.pick(&["u1", "u2", "default", "nouser"])],
            cmp: Cmp::AclWords,
        }],
        5 => vec![Op { conn: 0, args: cmd!["ACL", "LIST"], cmp: Cmp::AclWords }],
        6 => vec![exact(cmd!["ACL", "USERS"])],
        7 | 8 => {
            let mut a = cmd!["ACL", "DRYRUN", r.pick(&["u1", "u2", "nouser"])];
            a.extend(command(r));
            vec![exact(a)]
        }
        9 => {
            // For real, on the second connection, then back to `default` (nopass: any password).
            let mut ops =
                vec![Op { conn: 1, args: cmd!["AUTH", u, r.pick(&["pw1", "pw2", "wrong"])], cmp: Cmp::Exact }];
            for _ in 0..r.range(1, 3) {
                ops.push(Op { conn: 1, args: command(r), cmp: Cmp::Exact });
            }
            ops.push(Op { conn: 1, args: cmd!["ACL", "WHOAMI"], cmp: Cmp::Exact });
            ops.push(Op { conn: 1, args: cmd!["AUTH", "default", "any"], cmp: Cmp::Exact });
            ops
        }
        10 if r.chance(20) => vec![exact(cmd!["ACL", "DELUSER", u, r.pick(&["u2", "nouser"])])],
        10 => vec![Op {
            conn: 0,
            // Not `read`: it lists shaledb's own SHALEDB.RANGE too.
            args: cmd!["ACL", "CAT", r.pick(&["string", "hash", "list", "nosuch", "pubsub"])],
            cmp: Cmp::Sorted,
        }],
        _ => vec![exact(cmd!["ACL", "WHOAMI"])],
    }
}
