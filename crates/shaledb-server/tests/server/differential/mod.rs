//! The differential test: the same seeded random sequence of commands sent to a real redis-server and to the
//! in-process shaledb server, the replies compared one by one.
//!
//! - redis-server (7.0 is the reference) is started by the test on a free loopback port with
//!   `--save "" --appendonly no` in a temporary directory; where it is not installed the test prints why
//!   and returns (the only skip).
//! - One family of commands at a time (strings, keys and expiry, hashes, lists, sets, sorted sets, streams
//!   with explicit ids, MULTI/EXEC/WATCH), each over a small key space so commands collide, with a few keys
//!   of other types for WRONGTYPE paths. Before a family runs, `COMMAND INFO` asks shaledb which of its
//!   commands exist: a command shaledb lacks is left out (and listed), and a family whose core commands are
//!   all missing is skipped with its reason printed, so the suite passes on a tree without a type and
//!   exercises it once the type is there.
//! - Budget: `SHALEDB_TORTURE_BUDGET` commands per family (default 5,000); seed: `SHALEDB_DIFF_SEED`
//!   (default: from the clock, printed). A mismatch fails with the seed, the family, the command's index, the
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
//! - left out: OBJECT ENCODING, INFO, DEBUG, RANDOMKEY, XINFO (radix-tree statistics), XADD `*` ids (the
//!   clock), and float increments that are not exact binary fractions (Redis computes INCRBYFLOAT and
//!   HINCRBYFLOAT in long double: 0.1 + 0.2 prints 0.3 there and 0.30000000000000004 in f64).

#![allow(clippy::useless_vec)] // `cmd![..]` builds the owned argument lists the driver keeps.

use super::{start_server, Client, Resp};
use std::collections::HashSet;
use std::net::{SocketAddr, TcpListener};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

// ---------------------------------------------------------------------------------------------------------
// redis-server

struct RedisServer {
    child: Child,
    addr: SocketAddr,
    _dir: tempfile::TempDir,
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind a free port");
    l.local_addr().expect("local addr").port()
}

/// Starts redis-server, or says why it cannot.
fn start_redis() -> Result<RedisServer, String> {
    match Command::new("redis-server").arg("--version").output() {
        Ok(o) if o.status.success() => {}
        Ok(o) => return Err(format!("`redis-server --version` failed: {}", String::from_utf8_lossy(&o.stderr))),
        Err(e) => return Err(format!("redis-server is not installed ({e})")),
    }
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    for _ in 0..5 {
        let port = free_port();
        let child = Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .arg("--dir")
            .arg(dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("starting redis-server: {e}"))?;
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse().expect("addr");
        let mut server = RedisServer { child, addr, _dir: tempfile::tempdir().map_err(|e| e.to_string())? };
        let t = Instant::now();
        while t.elapsed() < Duration::from_secs(10) {
            if let Ok(Some(_)) = server.child.try_wait() {
                break; // the port was taken meanwhile: try another
            }
            if std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(100)).is_ok() {
                server._dir = dir;
                return Ok(server);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        drop(server);
    }
    Err("redis-server did not start listening".into())
}

// ---------------------------------------------------------------------------------------------------------
// Random generation

/// splitmix64: small, seedable, the same sequence everywhere.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    fn range(&mut self, lo: i64, hi: i64) -> i64 {
        lo + self.below((hi - lo + 1) as u64) as i64
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len() as u64) as usize]
    }
}

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

macro_rules! cmd {
    ($($a:expr),* $(,)?) => { vec![$(($a).to_string()),*] };
}

/// (No integer near the i64 limits: INCRBYFLOAT of those is where long double and f64 differ; INCRBY with
/// [`INTS`] covers the overflow errors.)
const VALUES: &[&str] = &["a", "b", "c", "hello", "", "1", "2", "-3", "10", "007", "3.5", "x y", "-0", "1e2"];
const INTS: &[&str] = &["0", "1", "-1", "2", "5", "-10", "100", "abc", "9223372036854775807", "1.5"];
/// Exact binary fractions only (see the module comment).
const FLOATS: &[&str] = &["0.5", "-1.25", "3", "1e3", "-0.75", "abc", "inf", "2.5e-1"];
const STR_KEYS: &[&str] = &["s0", "s1", "s2", "s3"];
/// INCRBYFLOAT's keys: only small numbers are stored there, so every sum is exact in f64 and in long double
/// (elsewhere APPEND and INCRBY build numbers past 2^53, where the two differ).
const FLOAT_KEYS: &[&str] = &["fl0", "fl1"];

/// A key of another type for the WRONGTYPE paths: a string everywhere, and each family's own keys appear
/// in the keys family.
const OTHER: &str = "str";

fn val(r: &mut Rng) -> String {
    r.pick(VALUES).to_string()
}

// ---- strings

fn gen_strings(r: &mut Rng) -> Vec<Op> {
    let k = if r.chance(5) { OTHER.to_string() } else { r.pick(STR_KEYS).to_string() };
    let k2 = r.pick(STR_KEYS);
    let a = match r.below(27) {
        0 | 1 => {
            let mut a = cmd!["SET", k, val(r)];
            if r.chance(30) {
                a.push(r.pick(&["NX", "XX"]).into());
            }
            if r.chance(20) {
                a.push("GET".into());
            }
            match r.below(5) {
                0 => a.extend(cmd!["EX", r.pick(&["1000", "0", "-5", "abc"])]),
                1 => a.extend(cmd!["PX", "1000000"]),
                2 => a.push("KEEPTTL".into()),
                _ => {}
            }
            a
        }
        2 | 3 => cmd!["GET", k],
        4 => cmd!["GETSET", k, val(r)],
        5 => cmd!["APPEND", k, val(r)],
        6 => cmd!["STRLEN", k],
        7 => cmd!["INCR", k],
        8 => cmd!["DECR", k],
        9 => cmd!["INCRBY", k, r.pick(INTS)],
        10 => cmd!["DECRBY", k, r.pick(INTS)],
        11 => match r.below(3) {
            0 => cmd!["SET", r.pick(FLOAT_KEYS), r.pick(&["0", "1.5", "-2", "abc", "10"])],
            1 => cmd!["GET", r.pick(FLOAT_KEYS)],
            _ => cmd!["INCRBYFLOAT", r.pick(FLOAT_KEYS), r.pick(FLOATS)],
        },
        12 => cmd!["SETRANGE", k, r.range(-1, 12), val(r)],
        13 => cmd!["GETRANGE", k, r.range(-6, 8), r.range(-6, 12)],
        14 => cmd!["MSET", k, val(r), k2, val(r)],
        15 => cmd!["MGET", k, k2, "missing"],
        16 => cmd!["MSETNX", k, val(r), k2, val(r)],
        17 => cmd!["SETNX", k, val(r)],
        18 => cmd!["GETDEL", k],
        19 => cmd!["SETEX", k, r.pick(&["1000", "0", "abc"]), val(r)],
        20 => cmd!["PSETEX", k, "1000000", val(r)],
        21 => match r.below(3) {
            0 => cmd!["GETEX", k, "EX", "1000"],
            1 => cmd!["GETEX", k, "PERSIST"],
            _ => cmd!["GETEX", k],
        },
        22 => cmd!["DEL", k],
        23 => cmd!["EXISTS", k, k2],
        24 => cmd!["TTL", k],
        25 => cmd!["SET", OTHER, "v"],
        _ => cmd!["TYPE", k],
    };
    let cmp = if a[0] == "TTL" { Cmp::Ttl } else { Cmp::Exact };
    vec![Op { conn: 0, args: a, cmp }]
}

// ---- keys and expiry

const ANY_KEYS: &[&str] = &["k0", "k1", "k2", "k3", "k4"];

fn gen_keys(r: &mut Rng) -> Vec<Op> {
    let k = r.pick(ANY_KEYS);
    let k2 = r.pick(ANY_KEYS);
    let a = match r.below(26) {
        // Keys of every type (left out where shaledb lacks the command).
        0 | 1 => cmd!["SET", k, val(r)],
        2 => cmd!["RPUSH", k, "a", "b"],
        3 => cmd!["HSET", k, "f", val(r)],
        4 => cmd!["SADD", k, "m1", "m2"],
        5 => cmd!["ZADD", k, "1", "m"],
        6 => cmd!["XADD", k, format!("{}-1", r.range(1, 50)), "f", "v"],
        7 => cmd!["DEL", k, k2],
        8 => cmd!["UNLINK", k],
        9 => cmd!["EXISTS", k, k2, k],
        10 => cmd!["TYPE", k],
        11 => {
            let mut a = cmd!["EXPIRE", k, r.pick(&["1000", "2000", "-1", "0", "abc", "9223372036854775807"])];
            if r.chance(40) {
                a.push(r.pick(&["NX", "XX", "GT", "LT", "BAD"]).into());
            }
            a
        }
        12 => cmd!["PEXPIRE", k, "1500000"],
        13 => cmd!["EXPIREAT", k, r.pick(&["1", "4102444800"])],
        14 => cmd!["PERSIST", k],
        15 => cmd![r.pick(&["TTL", "PTTL", "EXPIRETIME", "PEXPIRETIME"]), k],
        16 => cmd!["RENAME", k, k2],
        17 => cmd!["RENAMENX", k, k2],
        18 => {
            let mut a = cmd!["COPY", k, k2];
            if r.chance(50) {
                a.push("REPLACE".into());
            }
            a
        }
        19 => cmd!["DBSIZE"],
        20 => cmd!["KEYS", r.pick(&["*", "k[0-2]", "k?", "nomatch*"])],
        21 => cmd!["SCAN", "0", "MATCH", r.pick(&["*", "k[13]"]), "COUNT", r.range(1, 10)],
        22 => cmd!["TOUCH", k, k2],
        23 => cmd!["SCAN", "0", "TYPE", r.pick(&["string", "list", "hash", "set", "zset", "stream"])],
        24 => cmd!["GET", k],
        _ => cmd!["INCR", k],
    };
    let cmp = match a[0].as_str() {
        "TTL" | "PTTL" | "EXPIRETIME" | "PEXPIRETIME" => Cmp::Ttl,
        "KEYS" => Cmp::Sorted,
        "SCAN" => Cmp::Scan { cursor_at: 1, pairs: false },
        _ => Cmp::Exact,
    };
    vec![Op { conn: 0, args: a, cmp }]
}

// ---- hashes

const HASH_KEYS: &[&str] = &["h0", "h1", "h2"];
const FIELDS: &[&str] = &["f0", "f1", "f2", "f3", "f4", "f5"];
/// HINCRBYFLOAT's fields (small numbers only, as [`FLOAT_KEYS`]).
const FLOAT_FIELDS: &[&str] = &["ff0", "ff1"];

fn gen_hashes(r: &mut Rng) -> Vec<Op> {
    let k = if r.chance(4) { OTHER } else { r.pick(HASH_KEYS) };
    let f = r.pick(FIELDS);
    let (a, cmp) = match r.below(20) {
        0..=2 => {
            let mut a = cmd!["HSET", k, f, val(r)];
            for _ in 0..r.below(3) {
                a.extend(cmd![r.pick(FIELDS), val(r)]);
            }
            (a, Cmp::Exact)
        }
        3 => (cmd!["HSETNX", k, f, val(r)], Cmp::Exact),
        4 => (cmd!["HGET", k, f], Cmp::Exact),
        5 => (cmd!["HMGET", k, f, r.pick(FIELDS), "nofield"], Cmp::Exact),
        6 => (cmd!["HMSET", k, f, val(r), r.pick(FIELDS), val(r)], Cmp::Exact),
        7 => (cmd!["HDEL", k, f, r.pick(FIELDS)], Cmp::Exact),
        8 => (cmd!["HGETALL", k], Cmp::SortedPairs),
        9 => (cmd!["HKEYS", k], Cmp::Sorted),
        10 => (cmd!["HVALS", k], Cmp::Sorted),
        11 => (cmd!["HLEN", k], Cmp::Exact),
        12 => (cmd!["HEXISTS", k, f], Cmp::Exact),
        13 => (cmd!["HINCRBY", k, f, r.pick(INTS)], Cmp::Exact),
        14 => match r.below(3) {
            0 => (cmd!["HSET", k, r.pick(FLOAT_FIELDS), r.pick(&["0", "1.5", "-2", "abc"])], Cmp::Exact),
            _ => (cmd!["HINCRBYFLOAT", k, r.pick(FLOAT_FIELDS), r.pick(FLOATS)], Cmp::Exact),
        },
        15 => (cmd!["HSTRLEN", k, f], Cmp::Exact),
        16 => match r.below(3) {
            0 => (cmd!["HRANDFIELD", k], Cmp::Shape),
            1 => (cmd!["HRANDFIELD", k, r.range(-5, 8)], Cmp::Shape),
            _ => (cmd!["HRANDFIELD", k, r.range(-5, 8), "WITHVALUES"], Cmp::Shape),
        },
        17 => (
            cmd!["HSCAN", k, "0", "MATCH", r.pick(&["*", "f[0-2]"]), "COUNT", r.range(1, 5)],
            Cmp::Scan { cursor_at: 2, pairs: true },
        ),
        18 => (cmd!["DEL", k], Cmp::Exact),
        _ => (cmd!["EXPIRE", k, "1000"], Cmp::Exact),
    };
    vec![Op { conn: 0, args: a, cmp }]
}

// ---- lists

const LIST_KEYS: &[&str] = &["l0", "l1", "l2"];

fn gen_lists(r: &mut Rng) -> Vec<Op> {
    let k = if r.chance(4) { OTHER } else { r.pick(LIST_KEYS) };
    let k2 = r.pick(LIST_KEYS);
    let lr = |r: &mut Rng| r.pick(&["LEFT", "RIGHT"]).to_string();
    let a = match r.below(22) {
        0..=2 => {
            let mut a = cmd![r.pick(&["LPUSH", "RPUSH"]), k, val(r)];
            for _ in 0..r.below(4) {
                a.push(val(r));
            }
            a
        }
        3 => cmd![r.pick(&["LPUSHX", "RPUSHX"]), k, val(r)],
        4 => cmd![r.pick(&["LPOP", "RPOP"]), k],
        5 => cmd![r.pick(&["LPOP", "RPOP"]), k, r.pick(&["0", "1", "3", "100", "-1"])],
        6 | 7 => cmd!["LRANGE", k, r.range(-8, 6), r.range(-8, 8)],
        8 => cmd!["LLEN", k],
        9 => cmd!["LINDEX", k, r.range(-6, 6)],
        10 => cmd!["LSET", k, r.range(-6, 6), val(r)],
        11 => cmd!["LINSERT", k, r.pick(&["BEFORE", "AFTER"]), val(r), val(r)],
        12 => cmd!["LREM", k, r.range(-3, 3), val(r)],
        13 => cmd!["LTRIM", k, r.range(-6, 4), r.range(-6, 8)],
        14 => {
            let mut a = cmd!["LPOS", k, val(r)];
            match r.below(4) {
                0 => a.extend(cmd!["RANK", r.pick(&["1", "-1", "2", "0"])]),
                1 => a.extend(cmd!["COUNT", r.pick(&["0", "2", "-1"])]),
                2 => a.extend(cmd!["MAXLEN", "3", "COUNT", "0"]),
                _ => {}
            }
            a
        }
        15 => cmd!["LMOVE", k, k2, lr(r), lr(r)],
        16 => cmd!["RPOPLPUSH", k, k2],
        // Blocking forms rarely: on empty lists both servers wait out the 10 ms timeout.
        17 if r.chance(15) => cmd![r.pick(&["BLPOP", "BRPOP"]), k, k2, "0.01"],
        18 if r.chance(15) => cmd!["BLMOVE", k, k2, lr(r), lr(r), "0.01"],
        17 | 18 => cmd!["LRANGE", k, "0", "-1"],
        19 => cmd!["DEL", k],
        20 => cmd!["TYPE", k],
        _ => cmd!["EXPIRE", k, "1000"],
    };
    vec![op(a)]
}

// ---- sets

const SET_KEYS: &[&str] = &["set0", "set1", "set2", "set3"];
const MEMBERS: &[&str] = &["1", "2", "3", "10", "-5", "a", "b", "c", "dd"];

fn gen_sets(r: &mut Rng) -> Vec<Op> {
    let k = if r.chance(4) { OTHER } else { r.pick(SET_KEYS) };
    let k2 = r.pick(SET_KEYS);
    let k3 = r.pick(SET_KEYS);
    let m = r.pick(MEMBERS);
    let (a, cmp) = match r.below(22) {
        0..=3 => {
            let mut a = cmd!["SADD", k, m];
            for _ in 0..r.below(4) {
                a.push(r.pick(MEMBERS).into());
            }
            (a, Cmp::Exact)
        }
        4 => (cmd!["SREM", k, m, r.pick(MEMBERS)], Cmp::Exact),
        5 => (cmd!["SMEMBERS", k], Cmp::Sorted),
        6 => (cmd!["SISMEMBER", k, m], Cmp::Exact),
        7 => (cmd!["SMISMEMBER", k, m, r.pick(MEMBERS)], Cmp::Exact),
        8 => (cmd!["SCARD", k], Cmp::Exact),
        9 => (cmd!["SPOP", k, "1000"], Cmp::Sorted),
        10 => (cmd!["SRANDMEMBER", k, r.range(-5, 12)], Cmp::Shape),
        11 => (cmd!["SRANDMEMBER", k], Cmp::Shape),
        12 => (cmd!["SMOVE", k, k2, m], Cmp::Exact),
        13 => (cmd![r.pick(&["SINTER", "SUNION", "SDIFF"]), k, k2, k3], Cmp::Sorted),
        14 | 15 => (cmd![r.pick(&["SINTERSTORE", "SUNIONSTORE", "SDIFFSTORE"]), k, k2, k3], Cmp::Exact),
        16 => {
            let mut a = cmd!["SINTERCARD", r.pick(&["2", "1", "0", "3"]), k2, k3];
            if r.chance(50) {
                a.extend(cmd!["LIMIT", r.pick(&["0", "1", "2", "-1"])]);
            }
            (a, Cmp::Exact)
        }
        17 => (
            cmd!["SSCAN", k, "0", "MATCH", r.pick(&["*", "[abc]"]), "COUNT", r.range(1, 5)],
            Cmp::Scan { cursor_at: 2, pairs: false },
        ),
        18 => (cmd!["DEL", k], Cmp::Exact),
        19 => (cmd!["SPOP", k, "0"], Cmp::Exact),
        _ => (cmd!["EXPIRE", k, "1000"], Cmp::Exact),
    };
    vec![Op { conn: 0, args: a, cmp }]
}

// ---- sorted sets

const ZSET_KEYS: &[&str] = &["z0", "z1", "z2"];
/// Sorted sets whose scores are all 0 (the BYLEX commands need that to be meaningful).
const LEX_KEYS: &[&str] = &["zl0", "zl1"];
const SCORES: &[&str] = &["0", "1", "1.5", "-2", "10", "-inf", "+inf", "3", "abc"];
const SCORE_MIN: &[&str] = &["-inf", "0", "(1", "1.5", "-2", "(3", "abc"];
const SCORE_MAX: &[&str] = &["+inf", "10", "(10", "1", "3", "(1.5"];
const LEX_MIN: &[&str] = &["-", "[a", "(b", "[c", "(a", "[", "x"];
const LEX_MAX: &[&str] = &["+", "[c", "(dd", "[b", "(a"];

fn gen_zsets(r: &mut Rng) -> Vec<Op> {
    let k = if r.chance(4) { OTHER } else { r.pick(ZSET_KEYS) };
    let k2 = r.pick(ZSET_KEYS);
    let lk = r.pick(LEX_KEYS);
    let m = r.pick(MEMBERS);
    let ws = |r: &mut Rng, a: &mut Vec<String>| {
        if r.chance(50) {
            a.push("WITHSCORES".into());
        }
    };
    let (a, cmp) = match r.below(32) {
        0..=3 => {
            let mut a = cmd!["ZADD", k];
            for f in ["NX", "XX", "GT", "LT", "CH"] {
                if r.chance(12) {
                    a.push(f.into());
                }
            }
            let incr = r.chance(10);
            if incr {
                a.push("INCR".into());
            }
            a.extend(cmd![r.pick(SCORES), m]);
            if !incr {
                for _ in 0..r.below(3) {
                    a.extend(cmd![r.pick(SCORES), r.pick(MEMBERS)]);
                }
            }
            (a, Cmp::Exact)
        }
        4 => (cmd!["ZADD", lk, "0", m, "0", r.pick(MEMBERS)], Cmp::Exact),
        5 => (cmd!["ZREM", k, m, r.pick(MEMBERS)], Cmp::Exact),
        6 => (cmd!["ZSCORE", k, m], Cmp::Exact),
        7 => (cmd!["ZMSCORE", k, m, r.pick(MEMBERS)], Cmp::Exact),
        8 => (cmd!["ZINCRBY", k, r.pick(&["1", "-0.5", "2.5", "inf", "abc"]), m], Cmp::Exact),
        9 => (cmd!["ZCARD", k], Cmp::Exact),
        10 => (cmd!["ZCOUNT", k, r.pick(SCORE_MIN), r.pick(SCORE_MAX)], Cmp::Exact),
        11 => (cmd!["ZLEXCOUNT", lk, r.pick(LEX_MIN), r.pick(LEX_MAX)], Cmp::Exact),
        12 => (cmd![r.pick(&["ZRANK", "ZREVRANK"]), k, m], Cmp::Exact),
        13 | 14 => {
            let mut a = match r.below(4) {
                0 => cmd!["ZRANGE", k, r.range(-5, 4), r.range(-5, 6)],
                1 => cmd!["ZRANGE", k, r.pick(SCORE_MIN), r.pick(SCORE_MAX), "BYSCORE"],
                2 => cmd!["ZRANGE", lk, r.pick(LEX_MIN), r.pick(LEX_MAX), "BYLEX"],
                _ => cmd!["ZRANGE", k, r.pick(SCORE_MAX), r.pick(SCORE_MIN), "BYSCORE", "REV"],
            };
            if a.len() == 4 && r.chance(30) {
                a.push("REV".into());
            }
            if a.len() > 4 && r.chance(40) {
                a.extend(cmd!["LIMIT", r.range(-1, 3), r.range(-1, 4)]);
            }
            if a[1] != lk {
                ws(r, &mut a);
            }
            (a, Cmp::Exact)
        }
        15 => {
            let mut a = cmd!["ZRANGEBYSCORE", k, r.pick(SCORE_MIN), r.pick(SCORE_MAX)];
            ws(r, &mut a);
            if r.chance(30) {
                a.extend(cmd!["LIMIT", r.range(0, 2), r.range(-1, 3)]);
            }
            (a, Cmp::Exact)
        }
        16 => {
            let mut a = cmd!["ZREVRANGEBYSCORE", k, r.pick(SCORE_MAX), r.pick(SCORE_MIN)];
            ws(r, &mut a);
            (a, Cmp::Exact)
        }
        17 => {
            let mut a = cmd![r.pick(&["ZRANGEBYLEX", "ZREVRANGEBYLEX"]), lk];
            if a[0] == "ZRANGEBYLEX" {
                a.extend(cmd![r.pick(LEX_MIN), r.pick(LEX_MAX)]);
            } else {
                a.extend(cmd![r.pick(LEX_MAX), r.pick(LEX_MIN)]);
            }
            if r.chance(30) {
                a.extend(cmd!["LIMIT", r.range(0, 2), r.range(-1, 3)]);
            }
            (a, Cmp::Exact)
        }
        18 => {
            let mut a = cmd!["ZREVRANGE", k, r.range(-5, 4), r.range(-5, 6)];
            ws(r, &mut a);
            (a, Cmp::Exact)
        }
        19 => (cmd!["ZRANGESTORE", k2, k, r.range(-3, 2), r.range(-2, 5)], Cmp::Exact),
        20 => (cmd![r.pick(&["ZPOPMIN", "ZPOPMAX"]), k], Cmp::Exact),
        21 => (cmd![r.pick(&["ZPOPMIN", "ZPOPMAX"]), k, r.pick(&["0", "2", "100", "-1"])], Cmp::Exact),
        22 => (cmd!["ZREMRANGEBYRANK", k, r.range(-4, 2), r.range(-3, 4)], Cmp::Exact),
        23 => (cmd!["ZREMRANGEBYSCORE", k, r.pick(SCORE_MIN), r.pick(SCORE_MAX)], Cmp::Exact),
        24 => (cmd!["ZREMRANGEBYLEX", lk, r.pick(LEX_MIN), r.pick(LEX_MAX)], Cmp::Exact),
        25 | 26 => {
            let mut a = cmd![r.pick(&["ZUNIONSTORE", "ZINTERSTORE"]), k2, "2", k, r.pick(ZSET_KEYS)];
            if r.chance(30) {
                a.extend(cmd!["WEIGHTS", r.pick(&["1", "2", "-1"]), r.pick(&["0.5", "3"])]);
            }
            if r.chance(30) {
                a.extend(cmd!["AGGREGATE", r.pick(&["SUM", "MIN", "MAX"])]);
            }
            (a, Cmp::Exact)
        }
        27 => (
            cmd!["ZSCAN", k, "0", "MATCH", r.pick(&["*", "[abc]"]), "COUNT", r.range(1, 5)],
            Cmp::Scan { cursor_at: 2, pairs: true },
        ),
        28 => (cmd!["ZRANDMEMBER", k, r.range(-4, 6)], Cmp::Shape),
        29 => (cmd!["DEL", k], Cmp::Exact),
        30 => (cmd!["ZRANGE", k, "0", "-1", "WITHSCORES"], Cmp::Exact),
        _ => (cmd!["EXPIRE", k, "1000"], Cmp::Exact),
    };
    vec![Op { conn: 0, args: a, cmp }]
}

// ---- streams (explicit ids only)

const STREAM_KEYS: &[&str] = &["x0", "x1"];

fn stream_id(r: &mut Rng) -> String {
    match r.below(6) {
        0 => format!("{}", r.range(0, 60)),
        1 => format!("{}-*", r.range(0, 60)),
        2 => "0-0".into(),
        _ => format!("{}-{}", r.range(0, 60), r.range(0, 3)),
    }
}

fn gen_streams(r: &mut Rng) -> Vec<Op> {
    let k = if r.chance(4) { OTHER } else { r.pick(STREAM_KEYS) };
    let range_id = |r: &mut Rng| -> String {
        match r.below(5) {
            0 => "-".into(),
            1 => "+".into(),
            2 => format!("({}", r.range(0, 60)),
            _ => format!("{}", r.range(0, 60)),
        }
    };
    let a = match r.below(14) {
        0..=4 => {
            let mut a = cmd!["XADD", k];
            match r.below(6) {
                0 => a.extend(cmd!["MAXLEN", r.pick(&["0", "2", "5", "-1"])]),
                1 => a.extend(cmd!["MINID", format!("{}", r.range(0, 40))]),
                2 => a.push("NOMKSTREAM".into()),
                _ => {}
            }
            a.push(stream_id(r));
            a.extend(cmd![r.pick(FIELDS), val(r)]);
            if r.chance(30) {
                a.extend(cmd![r.pick(FIELDS), val(r)]);
            }
            a
        }
        5 => cmd!["XLEN", k],
        6 | 7 => {
            let mut a = cmd!["XRANGE", k, range_id(r), range_id(r)];
            if r.chance(40) {
                a.extend(cmd!["COUNT", r.pick(&["0", "1", "3", "-1"])]);
            }
            a
        }
        8 => {
            let mut a = cmd!["XREVRANGE", k, range_id(r), range_id(r)];
            if r.chance(40) {
                a.extend(cmd!["COUNT", r.pick(&["1", "3"])]);
            }
            a
        }
        9 => cmd!["XDEL", k, format!("{}-{}", r.range(0, 60), r.range(0, 2)), format!("{}-0", r.range(0, 60))],
        10 => match r.below(2) {
            0 => cmd!["XTRIM", k, "MAXLEN", r.pick(&["0", "1", "3", "-1", "abc"])],
            _ => cmd!["XTRIM", k, "MINID", format!("{}", r.range(0, 60))],
        },
        11 => cmd!["XREAD", "COUNT", r.pick(&["1", "2", "10"]), "STREAMS", k, format!("{}-0", r.range(0, 60))],
        12 => cmd!["DEL", k],
        _ => cmd!["XRANGE", k, "-", "+"],
    };
    vec![op(a)]
}

// ---- MULTI / EXEC / WATCH (two connections)

/// A command of the deterministic kinds (exact replies) for transaction bodies.
fn body_command(r: &mut Rng) -> Vec<String> {
    let k = r.pick(&["t0", "t1", "t2"]);
    match r.below(10) {
        0 | 1 => cmd!["SET", k, val(r)],
        2 => cmd!["GET", k],
        3 => cmd!["INCR", k],
        4 => cmd!["APPEND", k, val(r)],
        5 => cmd!["DEL", k],
        6 => cmd!["RPUSH", k, val(r)],
        7 => cmd!["HSET", k, "f", val(r)],
        8 => cmd!["EXISTS", k],
        _ => cmd!["MGET", "t0", "t1", "t2"],
    }
}

fn gen_multi(r: &mut Rng) -> Vec<Op> {
    let mut ops = Vec::new();
    let watched = r.pick(&["t0", "t1", "t2"]);
    let watch = r.chance(60);
    if watch {
        ops.push(op(cmd!["WATCH", watched]));
        match r.below(4) {
            // Another client writes the watched key, another key, or nothing; or this client writes it.
            0 => ops.push(Op { conn: 1, args: cmd!["SET", watched, val(r)], cmp: Cmp::Exact }),
            1 => ops.push(Op { conn: 1, args: cmd!["SET", "other", val(r)], cmp: Cmp::Exact }),
            2 => ops.push(op(cmd!["INCR", watched])),
            _ => {}
        }
        if r.chance(20) {
            ops.push(op(cmd!["UNWATCH"]));
        }
    }
    ops.push(op(cmd!["MULTI"]));
    for _ in 0..r.below(5) {
        ops.push(op(body_command(r)));
    }
    match r.below(12) {
        0 => ops.push(op(cmd!["NOSUCHCOMMAND", "x"])),
        1 => ops.push(op(cmd!["GET"])),
        2 => ops.push(op(cmd!["MULTI"])),
        3 => ops.push(op(cmd!["WATCH", "t0"])),
        _ => {}
    }
    if r.chance(10) {
        ops.push(op(cmd!["DISCARD"]));
        ops.push(op(cmd!["EXEC"]));
    } else {
        ops.push(op(cmd!["EXEC"]));
    }
    if r.chance(5) {
        ops.push(op(cmd!["DISCARD"]));
    }
    ops
}

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
        (_, r) => r,
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
            "stream" => side.send(0, &cmd!["XRANGE", k, "-", "+"]),
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
    let redis = match start_redis() {
        Ok(r) => r,
        Err(why) => {
            println!("differential test skipped: {why}");
            eprintln!("differential test skipped: {why}");
            return;
        }
    };
    let (_dir, shale) = start_server(|c| c.appendfsync = shaledb_server::Appendfsync::No);
    let seed = seed();
    let budget = budget();
    eprintln!(
        "differential test: seed {seed} (SHALEDB_DIFF_SEED), {budget} commands per family (SHALEDB_TORTURE_BUDGET)"
    );
    let mut rs = Side::new(redis.addr);
    let mut ss = Side::new(shale.addr());
    let mut ran = 0;
    for (fi, fam) in FAMILIES.iter().enumerate() {
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
            assert_eq!(side.send(0, &cmd!["FLUSHALL"]), Resp::Simple("OK".into()));
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
                     shaledb: {}\nreproduce: SHALEDB_DIFF_SEED={seed} SHALEDB_TORTURE_BUDGET={budget}\nthe \
                     commands before it:\n  {}",
                    fam.name,
                    o.conn,
                    o.args,
                    show(&want),
                    show(&got),
                    recent.iter().cloned().collect::<Vec<_>>().join("\n  ")
                );
            }
        }
        let (want, got) = (dump(&mut rs, fam.keys), dump(&mut ss, fam.keys));
        assert_eq!(want, got, "final state differs (seed {seed}, family {})", fam.name);
        eprintln!("  {}: {sent} commands, every reply equal ({:?})", fam.name, t.elapsed());
        ran += 1;
    }
    assert!(ran >= 3, "strings, keys and multi/exec/watch always run");
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
