//! The command generators of the differential test, one per family: each returns a random sequence of
//! [`Op`]s (the command, the connection that sends it, how its replies are compared) over the family's small
//! key space.

use super::{op, Cmp, Op, Rng};

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
pub(super) const OTHER: &str = "str";

fn val(r: &mut Rng) -> String {
    r.pick(VALUES).to_string()
}

// ---- strings

pub(super) fn gen_strings(r: &mut Rng) -> Vec<Op> {
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

pub(super) const ANY_KEYS: &[&str] = &["k0", "k1", "k2", "k3", "k4"];

pub(super) fn gen_keys(r: &mut Rng) -> Vec<Op> {
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
                let opt = r.pick(&["NX", "XX", "GT", "LT", "BAD"]);
                if matches!(opt, "GT" | "LT") && r.chance(70) {
                    // A TTL no other command sets: two servers whose clocks tick between two EXPIREs of the same
                    // TTL at different moments would compare equal expiries on one side only.
                    a[2] = (10_000 + r.below(1_000_000)).to_string();
                }
                a.push(opt.into());
            }
            a
        }
        12 => match r.below(2) {
            0 => cmd!["PEXPIRE", k, "1500000"],
            _ => cmd!["PEXPIREAT", k, r.pick(&["1", "4102444800000", "x"])],
        },
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

pub(super) const HASH_KEYS: &[&str] = &["h0", "h1", "h2"];
const FIELDS: &[&str] = &["f0", "f1", "f2", "f3", "f4", "f5"];
/// HINCRBYFLOAT's fields (small numbers only, as [`FLOAT_KEYS`]).
const FLOAT_FIELDS: &[&str] = &["ff0", "ff1"];

pub(super) fn gen_hashes(r: &mut Rng) -> Vec<Op> {
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

pub(super) const LIST_KEYS: &[&str] = &["l0", "l1", "l2"];

pub(super) fn gen_lists(r: &mut Rng) -> Vec<Op> {
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
        16 => match r.below(3) {
            0 => cmd!["RPOPLPUSH", k, k2],
            _ => {
                let mut a = cmd!["LMPOP", r.pick(&["2", "1", "0", "3"]), k, k2, r.pick(&["LEFT", "RIGHT", "UP"])];
                if r.chance(60) {
                    a.extend(cmd!["COUNT", r.pick(&["1", "2", "100", "0", "x"])]);
                }
                a
            }
        },
        // Blocking forms rarely: on empty lists both servers wait out the 10 ms timeout.
        17 if r.chance(15) => cmd![r.pick(&["BLPOP", "BRPOP"]), k, k2, "0.01"],
        18 if r.chance(15) => match r.below(3) {
            0 => cmd!["BLMOVE", k, k2, lr(r), lr(r), "0.01"],
            1 => cmd!["BRPOPLPUSH", k, k2, "0.01"],
            _ => cmd!["BLMPOP", "0.01", "2", k, k2, lr(r), "COUNT", r.range(1, 4)],
        },
        17 | 18 => cmd!["LRANGE", k, "0", "-1"],
        19 => cmd!["DEL", k],
        20 => cmd!["TYPE", k],
        _ => cmd!["EXPIRE", k, "1000"],
    };
    vec![op(a)]
}

// ---- sets

pub(super) const SET_KEYS: &[&str] = &["set0", "set1", "set2", "set3"];
const MEMBERS: &[&str] = &["1", "2", "3", "10", "-5", "a", "b", "c", "dd"];

pub(super) fn gen_sets(r: &mut Rng) -> Vec<Op> {
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

pub(super) fn gen_zsets(r: &mut Rng) -> Vec<Op> {
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
        20 => match r.below(6) {
            0 => (cmd![r.pick(&["BZPOPMIN", "BZPOPMAX"]), k, k2, "0.01"], Cmp::Exact),
            _ => (cmd![r.pick(&["ZPOPMIN", "ZPOPMAX"]), k], Cmp::Exact),
        },
        21 => match r.below(4) {
            0 | 1 => (cmd![r.pick(&["ZPOPMIN", "ZPOPMAX"]), k, r.pick(&["0", "2", "100", "-1"])], Cmp::Exact),
            2 => {
                let mut a = cmd!["ZMPOP", "2", k, k2, r.pick(&["MIN", "MAX", "FOO"])];
                if r.chance(60) {
                    a.extend(cmd!["COUNT", r.pick(&["1", "3", "100", "0", "x"])]);
                }
                (a, Cmp::Exact)
            }
            _ => (cmd!["BZMPOP", "0.01", "2", k, k2, r.pick(&["MIN", "MAX"]), "COUNT", r.range(1, 4)], Cmp::Exact),
        },
        22 => (cmd!["ZREMRANGEBYRANK", k, r.range(-4, 2), r.range(-3, 4)], Cmp::Exact),
        23 => (cmd!["ZREMRANGEBYSCORE", k, r.pick(SCORE_MIN), r.pick(SCORE_MAX)], Cmp::Exact),
        24 => (cmd!["ZREMRANGEBYLEX", lk, r.pick(LEX_MIN), r.pick(LEX_MAX)], Cmp::Exact),
        25 if r.chance(50) => {
            // The forms that reply rather than store, and ZINTERCARD.
            let name = r.pick(&["ZUNION", "ZINTER", "ZDIFF", "ZINTERCARD"]);
            let mut a = cmd![name, r.pick(&["2", "0", "3"]), k, r.pick(ZSET_KEYS)];
            if name == "ZINTERCARD" {
                if r.chance(40) {
                    a.extend(cmd!["LIMIT", r.pick(&["0", "1", "-1"])]);
                }
            } else {
                if name != "ZDIFF" && r.chance(30) {
                    a.extend(cmd!["AGGREGATE", r.pick(&["SUM", "MIN", "MAX"])]);
                }
                ws(r, &mut a);
            }
            (a, Cmp::Exact)
        }
        25 | 26 => {
            let mut a = cmd![r.pick(&["ZUNIONSTORE", "ZINTERSTORE", "ZDIFFSTORE"]), k2, "2", k, r.pick(ZSET_KEYS)];
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
        28 => {
            let mut a = cmd!["ZRANDMEMBER", k, r.range(-4, 6)];
            if r.chance(30) {
                a.push("WITHSCORES".into());
            }
            (a, Cmp::Shape)
        }
        29 => (cmd!["DEL", k], Cmp::Exact),
        30 => (cmd!["ZRANGE", k, "0", "-1", "WITHSCORES"], Cmp::Exact),
        _ => (cmd!["EXPIRE", k, "1000"], Cmp::Exact),
    };
    vec![Op { conn: 0, args: a, cmp }]
}

// ---- streams (explicit ids only)

pub(super) const STREAM_KEYS: &[&str] = &["x0", "x1"];

fn stream_id(r: &mut Rng) -> String {
    match r.below(6) {
        0 => format!("{}", r.range(0, 60)),
        1 => format!("{}-*", r.range(0, 60)),
        2 => "0-0".into(),
        _ => format!("{}-{}", r.range(0, 60), r.range(0, 3)),
    }
}

pub(super) fn gen_streams(r: &mut Rng) -> Vec<Op> {
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

pub(super) fn gen_multi(r: &mut Rng) -> Vec<Op> {
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

// ---- bits, LCS, SUBSTR and long-double increments

/// The bit family's strings; `bl` is a list for the WRONGTYPE paths (until a BITOP overwrites it).
const BIT_KEYS: &[&str] = &["b0", "b1", "b2"];
/// Every key the bit family writes (its final state is compared).
pub(super) const BITS_FAMILY_KEYS: &[&str] = &["b0", "b1", "b2", "bl", "fl2", "h0"];
/// Any decimal or hexadecimal text: INCRBYFLOAT and HINCRBYFLOAT compute in long double on both servers.
const LD_FLOATS: &[&str] =
    &["0.1", "0.2", "-0.3", "1e-320", "0x10", "1000", "3.0e2", "-7.5", "1e300", "inf", "-inf", "nan", "abc", " 1", ""];
const FIELD_TYPES: &[&str] = &["i1", "i5", "i8", "i16", "i32", "i63", "i64", "u1", "u5", "u8", "u16", "u32", "u63"];

/// A bit offset: mostly small (the strings stay short), sometimes invalid; never near 2^32 (redis-server
/// would allocate 512 MB).
fn bit_off(r: &mut Rng) -> String {
    match r.below(20) {
        0 => r.pick(&["-1", "4294967296", "x", "#1", "1.5"]).to_string(),
        _ => r.range(0, 200).to_string(),
    }
}

fn bitfield_ops(r: &mut Rng, a: &mut Vec<String>, writes: bool) {
    for _ in 0..r.range(0, 3) {
        if r.chance(15) {
            a.push("OVERFLOW".into());
            a.push(r.pick(&["WRAP", "SAT", "FAIL", "wrap", "sat", "fail", "bad"]).into());
        }
        let sub = if writes { r.pick(&["GET", "SET", "INCRBY", "get", "incrby"]) } else { "GET" };
        a.push(sub.into());
        a.push(if r.chance(3) { r.pick(&["u64", "i65", "i0", "x8", "u"]).into() } else { r.pick(FIELD_TYPES).into() });
        a.push(match r.below(10) {
            0 => format!("#{}", r.range(0, 8)),
            1 => r.pick(&["-1", "#-1", "abc", "4294967296"]).into(),
            _ => r.range(0, 150).to_string(),
        });
        if !sub.eq_ignore_ascii_case("GET") {
            a.push(match r.below(10) {
                0 => r.pick(&["9223372036854775807", "-9223372036854775808", "abc", "1.5"]).into(),
                _ => r.range(-300, 300).to_string(),
            });
        }
    }
    if r.chance(3) {
        a.push(r.pick(&["GET", "SET", "FOO"]).into());
    }
}

pub(super) fn gen_bits(r: &mut Rng) -> Vec<Op> {
    let k = if r.chance(5) { "bl" } else { r.pick(BIT_KEYS) };
    let k2 = if r.chance(5) { "missing" } else { r.pick(BIT_KEYS) };
    let a = match r.below(22) {
        0..=3 => cmd!["SETBIT", k, bit_off(r), r.pick(&["0", "1", "1", "2", "-1", "x"])],
        4 => cmd!["GETBIT", k, bit_off(r)],
        5 | 6 => {
            let mut a = cmd!["BITCOUNT", k];
            if r.chance(70) {
                a.extend(cmd![r.range(-30, 30), r.range(-30, 30)]);
                if r.chance(50) {
                    a.push(r.pick(&["BIT", "BYTE", "bit", "bits"]).into());
                }
            } else if r.chance(10) {
                a.push("0".into());
            }
            a
        }
        7 | 8 => {
            let mut a = cmd!["BITPOS", k, r.pick(&["0", "1", "0", "1", "2", "x"])];
            if r.chance(70) {
                a.push(r.range(-30, 30).to_string());
                if r.chance(60) {
                    a.push(r.range(-30, 30).to_string());
                    if r.chance(50) {
                        a.push(r.pick(&["BIT", "BYTE", "bit", "bytes"]).into());
                    }
                }
            }
            a
        }
        9 => {
            let op = r.pick(&["AND", "OR", "XOR", "NOT", "and", "not", "NAND"]);
            let mut a = cmd!["BITOP", op, r.pick(BIT_KEYS), k];
            for _ in 0..r.below(3) {
                a.push(r.pick(&["b0", "b1", "b2", "missing", "bl"]).into());
            }
            a
        }
        10 | 11 => {
            let mut a = cmd!["BITFIELD", k];
            bitfield_ops(r, &mut a, true);
            a
        }
        12 => {
            let mut a = cmd!["BITFIELD_RO", k];
            let writes = r.chance(10);
            bitfield_ops(r, &mut a, writes);
            a
        }
        13 => {
            let mut a = cmd!["LCS", k, k2];
            match r.below(6) {
                0 => a.push("LEN".into()),
                1 => a.push("IDX".into()),
                2 => a.extend(cmd!["IDX", "WITHMATCHLEN", "MINMATCHLEN", r.range(-1, 4)]),
                3 => a.extend(cmd!["IDX", "LEN"]),
                4 => a.push(r.pick(&["MINMATCHLEN", "FOO"]).into()),
                _ => {}
            }
            a
        }
        14 => cmd![r.pick(&["SUBSTR", "GETRANGE"]), k, r.range(-10, 10), r.range(-10, 10)],
        15 => cmd!["SET", k, r.pick(&["", "a", "foobar", "\u{7f}\u{7f}", "ohmytext", "mynewtext", "1234", "x y"])],
        16 => cmd!["APPEND", k, r.pick(&["a", "bc", "\u{1}", "text"])],
        17 => match r.below(3) {
            0 => cmd!["SET", "fl2", r.pick(&["1000", "0x10", "1e4932", "abc", "-0", "2.5"])],
            _ => cmd!["INCRBYFLOAT", if r.chance(5) { "bl" } else { "fl2" }, r.pick(LD_FLOATS)],
        },
        18 => cmd!["HINCRBYFLOAT", if r.chance(5) { "bl" } else { "h0" }, r.pick(&["f", "g"]), r.pick(LD_FLOATS)],
        19 => match r.below(4) {
            0 => cmd!["GETEX", k, "EX", r.pick(&["0", "abc", "1000"])],
            1 => cmd!["GETEX", "missing", "PX", r.pick(&["0", "-5", "abc"])],
            2 => cmd!["GETEX", k, "PERSIST"],
            _ => cmd!["GETEX", k, "EX"],
        },
        20 => cmd!["RPUSH", "bl", "x"],
        _ => cmd!["DEL", k],
    };
    vec![op(a)]
}
