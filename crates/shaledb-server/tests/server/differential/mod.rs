//! The differential test: the same seeded random sequence of commands sent to a real redis-server and to the
//! in-process shaledb server, the replies compared one by one.
//!
//! - redis-server (7.0 is the reference) is started by the test on a free loopback port with
//!   `--save "" --appendonly no` in a temporary directory (`helpers::redis_or_skip`); where it is not installed
//!   the test prints why and returns (the only skip).
//! - One family of commands at a time (strings, keys and expiry, hashes, lists, sets, sorted sets, streams
//!   with explicit ids, MULTI/EXEC/WATCH, bits, SORT and databases, stream consumer groups, scripts and
//!   functions, ACL), each over a small key space so commands collide, with a few keys
//!   of other types for WRONGTYPE paths. Before a family runs, `COMMAND INFO` asks shaledb which of its
//!   commands exist: a command shaledb lacks is left out (and listed), and a family whose core commands are
//!   all missing is skipped with its reason printed, so the suite passes on a tree without a type and
//!   exercises it once the type is there.
//! - Budget: `SHALEDB_TORTURE_BUDGET` commands per family (default 5,000); seed: `SHALEDB_DIFF_SEED`
//!   (default: from the clock, printed); `SHALEDB_DIFF_FAMILY`: only the families whose name contains it. A mismatch fails with the seed, the family, the command's index, the
//!   command and both replies.
//! - After each family the whole state of its keys is read from both servers and compared.
//!
//! What is normalized (legitimately nondeterministic or implementation-specific), and nothing else:
//! - replies whose order Redis leaves to its hash tables (SMEMBERS, SINTER/SUNION/SDIFF, HKEYS, HVALS,
//!   HGETALL, KEYS) are compared as sorted multisets;
//! - SCAN, HSCAN, SSCAN, ZSCAN: the driver iterates to cursor 0 on each server and compares the sorted,
//!   deduplicated sets of items (cursors and page sizes are the implementation's);
//! - SRANDMEMBER, HRANDFIELD, ZRANDMEMBER (random picks) are compared by shape: same reply type and length;
//!   SPOP is only sent with a count above any set's size (it then pops everything, deterministically);
//!   SPOP without a count is left out because its choice changes the state;
//! - TTL, PTTL, EXPIRETIME, PEXPIRETIME: the two servers read their clocks at different instants, so a
//!   positive value is compared as "positive" (-1 and -2 exactly). Expiries are either far (1,000 s) or in
//!   the past, so whether a key exists never depends on timing;
//! - XPENDING's extended form and XINFO CONSUMERS: idle times become 0 (the rest, delivery counts included,
//!   is exact);
//! - ACL LIST and ACL GETUSER: Redis 7.0 prints the single-command rules of a user in the order of its command
//!   hash table, whose hash seed is random per process, so each rule string is compared as a sorted list of
//!   words (which rules, not their order), less the rules naming ShaleDB's own `SHALEDB.*` commands;
//! - left out: OBJECT ENCODING, INFO, DEBUG, RANDOMKEY, XINFO (radix-tree statistics), XADD `*` ids (the
//!   clock), and in the strings and hashes families float increments that are not exact binary fractions
//!   (the bits family sends any: both servers compute INCRBYFLOAT and HINCRBYFLOAT in long double).
//!
//! This file has the shared types and the driver; `generate.rs` has the command generators; both servers are
//! started by the helpers of the test crate.

#![allow(clippy::useless_vec)] // `cmd![..]` builds the owned argument lists the driver keeps.

use crate::helpers::{redis_or_skip, start_server, Client, Resp, Rng};
use std::collections::HashSet;
use std::net::SocketAddr;
use std::time::Instant;

// ---------------------------------------------------------------------------------------------------------
// Random generation

/// How two replies are compared.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Cmp {
    Exact,
    /// An array compared as a sorted multiset.
    Sorted,
    /// A flat array of pairs compared as a sorted multiset of pairs.
    SortedPairs,
    /// Random picks: the same reply type and length.
    Shape,
    /// TTL-like: a positive integer is "positive".
    Ttl,
    /// XPENDING's extended form and XINFO CONSUMERS: the idle times (milliseconds since a clock reading)
    /// become 0, wherever they are.
    Idle,
    /// ACL LIST and ACL GETUSER: every string as a sorted list of words.
    AclWords,
    /// A SCAN-family command iterated to the end; the cursor is the argument at this index; `pairs`: items
    /// are field/value or member/score pairs.
    Scan {
        cursor_at: usize,
        pairs: bool,
    },
}

struct Op {
    /// Which of the two connections sends it.
    conn: usize,
    args: Vec<String>,
    cmp: Cmp,
}

fn op(args: Vec<String>) -> Op {
    Op { conn: 0, args, cmp: Cmp::Exact }
}

/// A command's words as `Vec<String>` (defined before `mod generate`, whose generators use it too).
macro_rules! cmd {
    ($($a:expr),* $(,)?) => { vec![$(($a).to_string()),*] };
}

mod acl_ops;
mod generate;
mod scripts;
mod sort_ops;
mod stream_groups;

use acl_ops::gen_acl;
use generate::{gen_bits, BITS_FAMILY_KEYS};
use generate::{
    gen_hashes, gen_keys, gen_lists, gen_multi, gen_sets, gen_streams, gen_strings, gen_zsets, ANY_KEYS, HASH_KEYS,
    LIST_KEYS, OTHER, SET_KEYS, STREAM_KEYS,
};
use scripts::{gen_scripts, SCRIPT_KEYS};
use sort_ops::{gen_sort, SORT_FAMILY_KEYS};
use stream_groups::{gen_stream_groups, GROUP_KEYS};

// ---------------------------------------------------------------------------------------------------------
// The driver

struct Family {
    name: &'static str,
    /// The family runs if shaledb has at least one of these.
    core: &'static [&'static str],
    gen: fn(&mut Rng) -> Vec<Op>,
    /// Keys whose final state is compared.
    keys: &'static [&'static str],
}

const FAMILIES: &[Family] = &[
    Family { name: "strings", core: &["set", "get"], gen: gen_strings, keys: &["s0", "s1", "s2", "s3", "fl0", "fl1"] },
    Family { name: "keys", core: &["del", "expire"], gen: gen_keys, keys: ANY_KEYS },
    Family { name: "hashes", core: &["hset"], gen: gen_hashes, keys: HASH_KEYS },
    Family { name: "lists", core: &["rpush", "lpush"], gen: gen_lists, keys: LIST_KEYS },
    Family { name: "sets", core: &["sadd"], gen: gen_sets, keys: SET_KEYS },
    Family { name: "sorted sets", core: &["zadd"], gen: gen_zsets, keys: &["z0", "z1", "z2", "zl0", "zl1"] },
    Family { name: "streams", core: &["xadd"], gen: gen_streams, keys: STREAM_KEYS },
    Family { name: "multi/exec/watch", core: &["multi", "watch"], gen: gen_multi, keys: &["t0", "t1", "t2"] },
    Family { name: "bits", core: &["setbit", "bitfield"], gen: gen_bits, keys: BITS_FAMILY_KEYS },
    Family { name: "sort and databases", core: &["sort", "swapdb"], gen: gen_sort, keys: SORT_FAMILY_KEYS },
    Family { name: "stream groups", core: &["xgroup", "xreadgroup"], gen: gen_stream_groups, keys: GROUP_KEYS },
    Family { name: "scripts and functions", core: &["eval", "fcall"], gen: gen_scripts, keys: SCRIPT_KEYS },
    // Last: the users it makes outlive the family.
    Family { name: "acl", core: &["acl"], gen: gen_acl, keys: &[] },
];

struct Side {
    conns: [Client; 2],
}

impl Side {
    fn new(addr: SocketAddr) -> Side {
        Side { conns: [Client::connect(addr), Client::connect(addr)] }
    }

    fn send(&mut self, conn: usize, args: &[String]) -> Resp {
        let a: Vec<&str> = args.iter().map(String::as_str).collect();
        self.conns[conn].cmd(&a)
    }

    /// A SCAN-family command iterated to cursor 0: its items, sorted and deduplicated (pairs as pairs).
    fn scan_all(&mut self, conn: usize, args: &[String], cursor_at: usize, pairs: bool) -> Resp {
        let mut a = args.to_vec();
        let mut items: Vec<Vec<Resp>> = Vec::new();
        for _ in 0..10_000 {
            let reply = self.send(conn, &a);
            let Resp::Array(mut parts) = reply else { return reply };
            if parts.len() != 2 {
                return Resp::Array(parts);
            }
            let page = parts.pop().expect("two parts").array();
            let cursor = parts.pop().expect("two parts").text();
            if pairs {
                items.extend(page.chunks(2).map(|c| c.to_vec()));
            } else {
                items.extend(page.into_iter().map(|x| vec![x]));
            }
            if cursor == "0" {
                let mut keyed: Vec<(String, Vec<Resp>)> = items.into_iter().map(|i| (format!("{i:?}"), i)).collect();
                keyed.sort_by(|x, y| x.0.cmp(&y.0));
                keyed.dedup_by(|x, y| x.0 == y.0);
                return Resp::Array(keyed.into_iter().flat_map(|(_, i)| i).collect());
            }
            a[cursor_at] = cursor;
        }
        Resp::Error("the scan did not end within 10,000 calls".into())
    }
}

/// A reply for humans: bulk strings as text.
fn show(r: &Resp) -> String {
    match r {
        Resp::Bulk(b) => format!("{:?}", String::from_utf8_lossy(b)),
        Resp::Array(v) | Resp::Set(v) | Resp::Push(v) => {
            format!("[{}]", v.iter().map(show).collect::<Vec<_>>().join(", "))
        }
        other => format!("{other:?}"),
    }
}

fn sort_key(r: &Resp) -> String {
    format!("{r:?}")
}

/// The reply as compared (see the module comment).
fn normalize(r: Resp, cmp: Cmp) -> Resp {
    match (cmp, r) {
        (Cmp::Sorted, Resp::Array(mut v) | Resp::Set(mut v)) => {
            v.sort_by_key(sort_key);
            Resp::Array(v)
        }
        (Cmp::SortedPairs, Resp::Array(v)) => {
            let mut pairs: Vec<Vec<Resp>> = v.chunks(2).map(|c| c.to_vec()).collect();
            pairs.sort_by_key(|p| format!("{p:?}"));
            Resp::Array(pairs.into_iter().flatten().collect())
        }
        (Cmp::Shape, Resp::Array(v)) => Resp::Simple(format!("array of {}", v.len())),
        (Cmp::Shape, Resp::Bulk(_)) => Resp::Simple("bulk".into()),
        (Cmp::Ttl, Resp::Int(n)) if n > 0 => Resp::Simple("positive".into()),
        (Cmp::Idle, r) => without_idle_times(r),
        (Cmp::AclWords, r) => sorted_words(r),
        (_, r) => r,
    }
}

/// XPENDING's `[id, consumer, idle, deliveries]` entries and the `idle`/`inactive` fields of XINFO CONSUMERS
/// with their times set to 0.
fn without_idle_times(r: Resp) -> Resp {
    let Resp::Array(mut v) = r else { return r };
    let is_bulk = |r: &Resp| matches!(r, Resp::Bulk(_));
    if v.len() == 4 && is_bulk(&v[0]) && is_bulk(&v[1]) && matches!(v[2], Resp::Int(_)) {
        v[2] = Resp::Int(0);
        return Resp::Array(v);
    }
    for i in 1..v.len() {
        if matches!(&v[i - 1], Resp::Bulk(b) if b == b"idle" || b == b"inactive") && matches!(v[i], Resp::Int(_)) {
            v[i] = Resp::Int(0);
        }
    }
    Resp::Array(v.into_iter().map(without_idle_times).collect())
}

/// Every bulk string of `r`, at any depth, with its words sorted.
fn sorted_words(r: Resp) -> Resp {
    match r {
        Resp::Bulk(b) => {
            let text = String::from_utf8_lossy(&b).into_owned();
            // ShaleDB's own commands (SHALEDB.RANGE, in @read) have no counterpart in Redis.
            let mut words: Vec<&str> = text.split_whitespace().filter(|w| !w[1..].starts_with("shaledb.")).collect();
            words.sort_unstable();
            Resp::Bulk(words.join(" ").into_bytes())
        }
        Resp::Array(v) => Resp::Array(v.into_iter().map(sorted_words).collect()),
        other => other,
    }
}

/// The commands of `names` shaledb lacks (COMMAND INFO answers nil for them).
fn missing_on_shaledb(c: &mut Client, names: &[String]) -> HashSet<String> {
    let mut out = HashSet::new();
    for n in names {
        match c.cmd(&["COMMAND", "INFO", n]) {
            Resp::Array(v) if matches!(v.first(), Some(Resp::Array(_))) => {}
            _ => {
                out.insert(n.clone());
            }
        }
    }
    out
}

/// The whole state of `keys`, read the same way on both servers.
fn dump(side: &mut Side, keys: &[&str]) -> Vec<(String, Resp)> {
    let mut out = Vec::new();
    for k in keys.iter().chain(std::iter::once(&OTHER)) {
        let t = side.send(0, &cmd!["TYPE", k]);
        let content = match t.text().as_str() {
            "string" => side.send(0, &cmd!["GET", k]),
            "list" => side.send(0, &cmd!["LRANGE", k, "0", "-1"]),
            "hash" => normalize(side.send(0, &cmd!["HGETALL", k]), Cmp::SortedPairs),
            "set" => normalize(side.send(0, &cmd!["SMEMBERS", k]), Cmp::Sorted),
            "zset" => side.send(0, &cmd!["ZRANGE", k, "0", "-1", "WITHSCORES"]),
            "stream" => {
                Resp::Array(vec![side.send(0, &cmd!["XRANGE", k, "-", "+"]), side.send(0, &cmd!["XINFO", "GROUPS", k])])
            }
            _ => Resp::Nil,
        };
        let ttl = normalize(side.send(0, &cmd!["TTL", k]), Cmp::Ttl);
        out.push((format!("{k}: {}", t.text()), Resp::Array(vec![content, ttl])));
    }
    out
}

fn budget() -> usize {
    std::env::var("SHALEDB_TORTURE_BUDGET").ok().and_then(|v| v.parse().ok()).unwrap_or(5_000)
}

fn seed() -> u64 {
    std::env::var("SHALEDB_DIFF_SEED").ok().and_then(|v| v.parse().ok()).unwrap_or_else(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(1, |d| d.as_nanos() as u64)
    })
}

/// Every command name a family can generate (for the probe).
fn names_of(f: &Family, seed: u64) -> Vec<String> {
    let mut r = Rng(seed);
    let mut names: HashSet<String> = f.core.iter().map(|s| s.to_string()).collect();
    for _ in 0..5_000 {
        for o in (f.gen)(&mut r) {
            if o.args[0] != "NOSUCHCOMMAND" {
                names.insert(o.args[0].to_ascii_lowercase());
            }
        }
    }
    let mut v: Vec<String> = names.into_iter().collect();
    v.sort();
    v
}

#[test]
fn replies_match_redis_server_command_by_command() {
    let Some(redis) = redis_or_skip() else { return };
    let (_dir, shale) = start_server(|c| c.appendfsync = shaledb_server::Appendfsync::No);
    let seed = seed();
    let budget = budget();
    eprintln!(
        "differential test: seed {seed} (SHALEDB_DIFF_SEED), {budget} commands per family (SHALEDB_TORTURE_BUDGET)"
    );
    let mut rs = Side::new(redis.addr);
    let mut ss = Side::new(shale.addr());
    let mut ran = 0;
    let only = std::env::var("SHALEDB_DIFF_FAMILY").ok();
    for (fi, fam) in FAMILIES.iter().enumerate() {
        if only.as_ref().is_some_and(|o| !fam.name.contains(o.as_str())) {
            continue;
        }
        let names = names_of(fam, seed);
        let missing = missing_on_shaledb(&mut ss.conns[0], &names);
        if fam.core.iter().all(|c| missing.contains(*c)) {
            eprintln!("  {}: SKIPPED, shaledb has none of {:?} in this tree", fam.name, fam.core);
            continue;
        }
        let mut left_out: Vec<&String> = missing.iter().collect();
        left_out.sort();
        if !left_out.is_empty() {
            eprintln!("  {}: commands shaledb lacks, left out: {left_out:?}", fam.name);
        }
        for side in [&mut rs, &mut ss] {
            for c in 0..2 {
                side.send(c, &cmd!["RESET"]);
            }
            for flush in [cmd!["FLUSHALL"], cmd!["SCRIPT", "FLUSH"], cmd!["FUNCTION", "FLUSH"]] {
                assert_eq!(side.send(0, &flush), Resp::Simple("OK".into()));
            }
        }
        let mut r = Rng(seed ^ (fi as u64 + 1).wrapping_mul(0x1234_5678_9abc_def1));
        let mut sent = 0usize;
        let mut index = 0usize;
        let mut recent: std::collections::VecDeque<String> = std::collections::VecDeque::new();
        let t = Instant::now();
        while sent < budget {
            for o in (fam.gen)(&mut r) {
                index += 1;
                // NOSUCHCOMMAND is unknown on both on purpose.
                if o.args[0] != "NOSUCHCOMMAND" && missing.contains(&o.args[0].to_ascii_lowercase()) {
                    continue;
                }
                sent += 1;
                if recent.len() == 30 {
                    recent.pop_front();
                }
                recent.push_back(format!("#{index} c{} {:?}", o.conn, o.args));
                let (want, got) = match o.cmp {
                    Cmp::Scan { cursor_at, pairs } => {
                        (rs.scan_all(o.conn, &o.args, cursor_at, pairs), ss.scan_all(o.conn, &o.args, cursor_at, pairs))
                    }
                    cmp => (normalize(rs.send(o.conn, &o.args), cmp), normalize(ss.send(o.conn, &o.args), cmp)),
                };
                assert!(
                    want == got,
                    "MISMATCH (seed {seed}, family {}, command #{index}, connection {}): {:?}\n  redis:   {}\n  \
                     shaledb: {}\nreproduce: SHALEDB_DIFF_SEED={seed} SHALEDB_TORTURE_BUDGET={budget} \
                     SHALEDB_DIFF_FAMILY='{}'\nthe \
                     commands before it:\n  {}",
                    fam.name,
                    o.conn,
                    o.args,
                    show(&want),
                    show(&got),
                    fam.name,
                    recent.iter().cloned().collect::<Vec<_>>().join("\n  ")
                );
            }
        }
        let (want, got) = (dump(&mut rs, fam.keys), dump(&mut ss, fam.keys));
        assert_eq!(want, got, "final state differs (seed {seed}, family {})", fam.name);
        eprintln!("  {}: {sent} commands, every reply equal ({:?})", fam.name, t.elapsed());
        ran += 1;
    }
    assert!(ran >= 3 || only.is_some(), "strings, keys and multi/exec/watch always run");
}

#[test]
fn normalization_is_only_what_the_module_says() {
    // Sorted compares multisets, not sets: a duplicate counts.
    let a = Resp::Array(vec![Resp::Bulk(b"b".to_vec()), Resp::Bulk(b"a".to_vec())]);
    let b = Resp::Array(vec![Resp::Bulk(b"a".to_vec()), Resp::Bulk(b"b".to_vec())]);
    assert_eq!(normalize(a.clone(), Cmp::Sorted), normalize(b.clone(), Cmp::Sorted));
    assert_ne!(normalize(a.clone(), Cmp::Exact), normalize(b, Cmp::Exact));
    let dup = Resp::Array(vec![Resp::Bulk(b"a".to_vec()), Resp::Bulk(b"a".to_vec())]);
    assert_ne!(normalize(a, Cmp::Sorted), normalize(dup, Cmp::Sorted));
    // TTL: only positive values lose their value.
    assert_eq!(normalize(Resp::Int(5), Cmp::Ttl), normalize(Resp::Int(999), Cmp::Ttl));
    assert_ne!(normalize(Resp::Int(-1), Cmp::Ttl), normalize(Resp::Int(-2), Cmp::Ttl));
    // Pairs stay pairs.
    let p1 = Resp::Array(["f2", "1", "f1", "2"].iter().map(|s| Resp::Bulk(s.as_bytes().to_vec())).collect());
    let p2 = Resp::Array(["f1", "1", "f2", "2"].iter().map(|s| Resp::Bulk(s.as_bytes().to_vec())).collect());
    assert_ne!(normalize(p1, Cmp::SortedPairs), normalize(p2, Cmp::SortedPairs));
}
