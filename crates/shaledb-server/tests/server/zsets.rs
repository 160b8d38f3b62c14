//! Sorted sets against a running server: replies compared with a real redis-server 7.0 (when installed),
//! a size counter checked against a model, expiry, WRONGTYPE, ranks and ZSCAN on a set past the small size,
//! RESP3 shapes.

use crate::helpers::{redis_or_skip, start_everysec as start_server, Client, RedisServer, Resp};
use rand::{Rng, SeedableRng};
use shaledb_server::RunningServer;
use std::collections::{BTreeMap, HashSet};
use std::time::{Duration, Instant};
use tempfile::TempDir;

/// Our server and a redis-server side by side, a raw client on each, for the tests that compare replies.
struct Both {
    ours: Client,
    theirs: Client,
    /// Our server, its directory and redis-server, kept as long as the clients: bind it by name in a pattern
    /// (`..` would drop them at once).
    _servers: (RunningServer, TempDir, RedisServer),
}

/// Starts both servers; `None`, with a note, where redis-server cannot run (the comparison is then skipped).
fn both() -> Option<Both> {
    let redis = redis_or_skip()?;
    let (server, dir) = start_server();
    let ours = Client::connect(server.addr());
    let theirs = Client::connect(redis.addr);
    Some(Both { ours, theirs, _servers: (server, dir, redis) })
}

fn words(line: &str) -> Vec<&str> {
    line.split(' ').collect()
}

/// Commands whose replies must be the same, byte for byte, on both servers.
const SCRIPT: &[&str] = &[
    "ZADD z 1 a 2 b 3 c",
    "ZADD z 1.1 d 1e-5 e 123456789012345678 f 1.5e16 g inf h -inf i -0 j 0.1 k",
    "ZRANGE z 0 -1 WITHSCORES",
    "ZADD z NX 5 a 6 new",
    "ZADD z XX CH 7 a 8 nothere",
    "ZADD z GT CH 0 b 9 c",
    "ZADD z LT CH 10 b -1 c",
    "ZADD z INCR 2.5 a",
    "ZADD z NX INCR 1 a",
    "ZADD z XX INCR 1 missing",
    "ZADD z GT INCR -1 a",
    "ZADD z LT INCR -1 a",
    "ZADD z XX GT CH 1000 a 1 nosuch",
    "ZADD z INCR -inf h",
    "ZINCRBY z -inf h",
    "ZINCRBY z 1 brandnew",
    "ZINCRBY z nan a",
    "ZINCRBY z abc a",
    "ZADD z NX XX 1 a",
    "ZADD z GT LT 1 a",
    "ZADD z NX GT 1 a",
    "ZADD z NX LT 1 a",
    "ZADD z INCR 1 a 2 b",
    "ZADD z 1 a 2",
    "ZADD z INCR GT",
    "ZADD z nan a",
    "ZADD z 1e400 a",
    "ZADD z 1e-400 a",
    "ZADD z abc a",
    "ZADD z CH",
    "ZCARD z",
    "ZSCORE z a",
    "ZSCORE z nosuch",
    "ZSCORE nokey a",
    "ZMSCORE z a nosuch b",
    "ZMSCORE nokey a b",
    "ZRANGE z 0 -1",
    "ZRANGE z 2 4 WITHSCORES",
    "ZRANGE z -3 -1",
    "ZRANGE z 5 2",
    "ZRANGE z 100 200",
    "ZRANGE z 0 x",
    "ZRANGE z 0 -1 REV WITHSCORES",
    "ZREVRANGE z 0 2 WITHSCORES",
    "ZRANGE z (1 5 BYSCORE WITHSCORES",
    "ZRANGE z 5 (1 BYSCORE REV",
    "ZRANGE z -inf +inf BYSCORE LIMIT 2 3",
    "ZRANGE z -inf +inf BYSCORE LIMIT 2 -1",
    "ZRANGE z -inf +inf BYSCORE LIMIT -1 3",
    "ZRANGE z -inf +inf BYSCORE LIMIT 0 0",
    "ZRANGE z +inf -inf BYSCORE REV LIMIT 1 2 WITHSCORES",
    "ZRANGE z 0 -1 LIMIT 0 1",
    "ZRANGE z 0 -1 BYSCORE LIMIT 0",
    "ZRANGE z 0 1 BYSCORE BYLEX",
    "ZRANGE z - + BYLEX WITHSCORES",
    "ZRANGE z 0 1 REV REV",
    "ZRANGEBYSCORE z -inf 2",
    "ZRANGEBYSCORE z -0 +0 WITHSCORES",
    "ZRANGEBYSCORE z (1 (1",
    "ZRANGEBYSCORE z (-inf (inf",
    "ZREVRANGE z -2 -1",
    "ZRANGEBYSCORE z (0 (2 WITHSCORES",
    "ZRANGEBYSCORE z ( 5",
    "ZRANGEBYSCORE z nan 5",
    "ZRANGEBYSCORE z a 5",
    "ZRANGEBYSCORE z 0 1 LIMIT a 1",
    "ZRANGEBYSCORE z 0 1 REV",
    "ZREVRANGEBYSCORE z +inf -inf WITHSCORES LIMIT 0 4",
    "ZREVRANGEBYSCORE z (3 (1",
    "ZCOUNT z -inf +inf",
    "ZCOUNT z (1 3",
    "ZCOUNT z 3 1",
    "ZCOUNT z a b",
    "ZCOUNT nokey 0 1",
    "ZRANK z a",
    "ZRANK z i",
    "ZRANK z h",
    "ZRANK z nosuch",
    "ZREVRANK z a",
    "ZREVRANK nokey a",
    "ZADD lex 0 a 0 b 0 c 0 d 0 e 0 f 0 g",
    "ZRANGEBYLEX lex - +",
    "ZRANGEBYLEX lex [b (e",
    "ZRANGEBYLEX lex (b [e LIMIT 1 2",
    "ZRANGEBYLEX lex [e [b",
    "ZRANGEBYLEX lex a b",
    "ZRANGEBYLEX lex - + WITHSCORES",
    "ZREVRANGEBYLEX lex + -",
    "ZREVRANGEBYLEX lex (f [b LIMIT 1 10",
    "ZRANGE lex [c + BYLEX",
    "ZRANGE lex + [c BYLEX REV LIMIT 0 2",
    "ZLEXCOUNT lex - +",
    "ZLEXCOUNT lex [b (d",
    "ZLEXCOUNT lex [ +",
    "ZLEXCOUNT lex x +",
    "ZADD mixed 1 b 2 a 3 d 4 c",
    "ZRANGEBYLEX mixed [b +",
    "ZRANGEBYLEX mixed - [b",
    "ZREVRANGEBYLEX mixed [c -",
    "ZLEXCOUNT mixed [a [c",
    "ZREMRANGEBYLEX lex [b [c",
    "ZRANGE lex 0 -1",
    "ZREMRANGEBYLEX lex x y",
    "ZREMRANGEBYRANK lex 0 0",
    "ZREMRANGEBYRANK lex -1 -1",
    "ZREMRANGEBYRANK lex 5 1",
    "ZREMRANGEBYRANK lex a 1",
    "ZRANGE lex 0 -1",
    "ZREMRANGEBYSCORE z (1 3",
    "ZREMRANGEBYSCORE z nan 3",
    "ZRANGE z 0 -1 WITHSCORES",
    "ZPOPMIN z",
    "ZPOPMAX z 2",
    "ZPOPMIN z 0",
    "ZPOPMIN z -1",
    "ZPOPMIN z x",
    "ZPOPMIN nokey",
    "ZPOPMIN nokey 3",
    "ZPOPMAX z 100",
    "EXISTS z",
    "ZREM lex d nosuch e",
    "ZREM nokey a",
    "ZADD s1 1 a 2 b 3 c",
    "ZADD s2 10 b 20 c 30 d",
    "SADD plain b x",
    "ZUNIONSTORE out 2 s1 s2",
    "ZRANGE out 0 -1 WITHSCORES",
    "ZUNIONSTORE out 2 s1 s2 WEIGHTS 2 0.5 AGGREGATE MAX",
    "ZRANGE out 0 -1 WITHSCORES",
    "ZINTERSTORE out 2 s1 s2 AGGREGATE MIN",
    "ZRANGE out 0 -1 WITHSCORES",
    "ZRANGE out 0 -1 WITHSCORES",
    "ZINTERSTORE out 3 s1 s2 plain",
    "ZRANGE out 0 -1 WITHSCORES",
    "ZUNIONSTORE out 2 s1 plain WEIGHTS 1 3",
    "ZRANGE out 0 -1 WITHSCORES",
    "ZUNION 2 plain s2 WITHSCORES",
    "ZADD plain 1 a",
    "LPUSH alist a",
    "ZUNIONSTORE out 2 s1 alist",
    "ZRANGESTORE alist s1 0 -1",
    "TYPE alist",
    "ZINTERSTORE out 2 s1 nokey",
    "EXISTS out",
    "ZUNION 2 s1 s2 WITHSCORES",
    "ZINTER 2 s1 s2 WITHSCORES",
    "ZINTER 2 s1 s2 WEIGHTS 1 -1",
    "ZDIFF 2 s1 s2 WITHSCORES",
    "ZDIFFSTORE out 2 s2 s1",
    "ZRANGE out 0 -1 WITHSCORES",
    "ZINTERCARD 2 s1 s2",
    "ZINTERCARD 2 s1 s2 LIMIT 1",
    "ZUNIONSTORE out 0 s1",
    "ZUNIONSTORE out -1 s1",
    "ZUNIONSTORE out 3 s1 s2",
    "ZUNIONSTORE out 1 s1 WEIGHTS",
    "ZUNIONSTORE out 1 s1 WEIGHTS x",
    "ZUNIONSTORE out 1 s1 AGGREGATE foo",
    "ZUNIONSTORE out 1 s1 WITHSCORES",
    "ZINTER 0 s1",
    "ZDIFF 1 s1 WEIGHTS 1",
    "ZADD inf 1 a",
    "ZUNIONSTORE out 2 inf inf WEIGHTS inf -inf",
    "ZRANGE out 0 -1 WITHSCORES",
    "ZRANGESTORE dst s2 0 -1",
    "ZRANGE dst 0 -1 WITHSCORES",
    "ZRANGESTORE dst s2 (10 +inf BYSCORE LIMIT 0 1",
    "ZRANGE dst 0 -1 WITHSCORES",
    "ZRANGESTORE dst nokey 0 -1",
    "EXISTS dst",
    "ZRANGESTORE dst s2 0 -1 WITHSCORES",
    "ZRANGESTORE dst s2 0 -1 LIMIT 0 1",
    "SET str x",
    "ZADD str 1 a",
    "ZRANGE str 0 -1",
    "ZSCORE str a",
    "ZCARD str",
    "ZRANK str a",
    "ZINCRBY str 1 a",
    "ZPOPMIN str",
    "ZUNIONSTORE out 2 s1 str",
    "ZRANGESTORE str s1 0 -1",
    "TYPE str",
    "ZRANGE str 0 -1 WITHSCORES",
    "ZSCAN s1 0",
    "ZSCAN s1 0 MATCH a*",
    "ZSCAN s1 0 COUNT 0",
    "ZSCAN s1 x",
    "ZSCAN nokey 0",
    "ZADD big 4611686018427387904 a 1e18 b 1e22 c 1.5 d",
    "ZSCAN big 0",
    "ZRANDMEMBER nokey",
    "ZRANDMEMBER nokey 3",
    "ZRANDMEMBER s1 0",
    "ZRANDMEMBER s1 5 WITHSCORES",
    "ZRANDMEMBER s1 x",
    "ZRANDMEMBER s1 1 foo",
    "ZRANDMEMBER s1 -9223372036854775808",
    "TYPE s1",
    // ZMPOP and BZMPOP (without blocking): arguments in Redis's order, the first existing key pops.
    "SET wt x",
    "ZADD zm 1 a 2 b 3 c 4 d",
    "ZMPOP 1 nokey MIN",
    "ZMPOP 2 nokey zm MAX COUNT 2",
    "ZMPOP 2 zm wt MIN",
    "ZMPOP 2 wt zm MIN",
    "ZMPOP 2 nokey wt MIN COUNT 2",
    "ZMPOP 0 zm MIN",
    "ZMPOP x zm MIN",
    "ZMPOP 5 zm MIN",
    "ZMPOP 1 zm FOO",
    "ZMPOP 1 zm MIN COUNT 0",
    "ZMPOP 1 zm MIN COUNT x",
    "ZMPOP 1 zm MIN COUNT 1 COUNT 1",
    "ZMPOP 1 zm MIN COUNT",
    "ZMPOP 1 zm MAX COUNT 10",
    "EXISTS zm",
    "BZMPOP 0.01 1 nokey MIN",
    "BZMPOP x 1 nokey MIN",
    "BZMPOP -1 1 nokey MIN",
    "BZMPOP inf 1 nokey MIN",
    "BZMPOP 0 0 nokey MIN",
    "BZMPOP x 1 nokey FOO",
    "BZMPOP 0 1 wt MIN",
    // ZINTERCARD: ZINTER's texts, each key's type before LIMIT.
    "ZINTERCARD 0 s1",
    "ZINTERCARD x s1",
    "ZINTERCARD 3 s1 s2",
    "ZINTERCARD 1 wt LIMIT -1",
    "ZINTERCARD 1 s1 LIMIT -1",
    "ZINTERCARD 1 s1 LIMIT x",
    "ZINTERCARD 1 s1 LIMIT",
    "ZINTERCARD 2 s1 s2 LIMIT 0",
    // WRONGTYPE before a bad WEIGHTS or AGGREGATE (issue 40).
    "ZUNIONSTORE out 2 s1 wt WEIGHTS 1 x",
    "ZINTERSTORE out 2 wt s1 AGGREGATE foo",
    "ZUNION 2 s1 wt WEIGHTS x y",
    // ZSCAN: the cursor, then the key, then the options.
    "ZSCAN nokey 0 COUNT 0",
    "ZSCAN wt 0 COUNT 0",
    "ZSCAN nokey x",
    // ZRANDMEMBER: the count's range, WITHSCORES' narrower range, before the key.
    "ZRANDMEMBER s1 -9223372036854770000 WITHSCORES",
    "ZRANDMEMBER nokey -9223372036854770000 WITHSCORES",
    "ZRANDMEMBER nokey -9223372036854775808",
    "ZRANDMEMBER wt -9223372036854775808",
    "ZRANDMEMBER nokey -9223372036854775807",
];

/// The sorted-set commands of SCRIPT answer as redis-server 7.0 does (skipped with a note where
/// redis-server is not installed).
#[test]
fn zset_replies_match_redis() {
    let Some(Both { mut ours, mut theirs, _servers }) = both() else { return };
    let mut diffs = Vec::new();
    for line in SCRIPT {
        let w = words(line);
        let (a, b) = (ours.cmd(&w), theirs.cmd(&w));
        if a != b {
            diffs.push(format!("{line}\n  shaledb: {a:?}\n  redis:   {b:?}"));
        }
    }
    assert!(diffs.is_empty(), "{} replies differ:\n{}", diffs.len(), diffs.join("\n"));
}

/// The same in RESP3 (pairs as two-item arrays, scores as doubles).
#[test]
fn zset_resp3_replies_match_redis() {
    let Some(Both { mut ours, mut theirs, _servers }) = both() else { return };
    ours.cmd(&["HELLO", "3"]);
    theirs.cmd(&["HELLO", "3"]);
    let script = [
        "ZADD z 1.1 a 2 b 3 c inf d",
        "ZADD z INCR 1 a",
        "ZINCRBY z 1 b",
        "ZSCORE z a",
        "ZSCORE z x",
        "ZMSCORE z a x",
        "ZRANGE z 0 -1 WITHSCORES",
        "ZRANGE z 0 -1",
        "ZRANGEBYSCORE z -inf +inf WITHSCORES LIMIT 1 2",
        "ZUNION 1 z WITHSCORES",
        "ZPOPMIN z",
        "ZPOPMAX z 2",
        "ZPOPMIN nokey",
        "ZSCAN z 0",
        "ZRANDMEMBER nokey",
        "ZADD m 1 a 2 b 3 c",
        "ZMPOP 1 m MIN COUNT 2",
        "BZMPOP 0 1 m MAX COUNT 5",
        "ZMPOP 1 m MIN",
        "BZMPOP 0.01 1 m MIN",
    ];
    for line in script {
        let w = words(line);
        assert_eq!(ours.cmd(&w), theirs.cmd(&w), "{line}");
    }
}

/// A random mix of ZADD (with flags), ZINCRBY, ZREM, ZPOPMIN/ZPOPMAX (alone and in MULTI beside a ZADD past
/// the popped end) and ZREMRANGEBYSCORE on a few keys, against a model:
/// every pop's reply, the size counter (ZCARD) and the whole contents stay exact.
#[test]
fn zset_size_stays_exact_under_a_random_mix() {
    let (server, _dir) = start_server();
    let mut c = Client::connect(server.addr());
    let mut rng = rand::rngs::StdRng::seed_from_u64(0x2e7);
    let mut model: Vec<BTreeMap<String, f64>> = vec![BTreeMap::new(); 3];
    for step in 0..3000 {
        let k = rng.gen_range(0..3);
        let key = format!("k{k}");
        let m = &mut model[k];
        let member = format!("m{}", rng.gen_range(0..40));
        let score = rng.gen_range(-20..20) as f64 / 2.0;
        match rng.gen_range(0..7) {
            0 => {
                let r = c.cmd(&["ZADD", &key, &score.to_string(), &member]);
                let added = !m.contains_key(&member);
                m.insert(member, score);
                assert_eq!(r, Resp::Int(added as i64));
            }
            1 => {
                let r = c.cmd(&["ZADD", &key, "GT", "CH", &score.to_string(), &member]);
                let changed = match m.get(&member) {
                    Some(&cur) if score > cur => {
                        m.insert(member, score);
                        true
                    }
                    Some(_) => false,
                    None => {
                        m.insert(member, score);
                        true
                    }
                };
                assert_eq!(r, Resp::Int(changed as i64));
            }
            2 => {
                c.cmd(&["ZINCRBY", &key, &score.to_string(), &member]);
                *m.entry(member).or_insert(0.0) += score;
            }
            3 => {
                let r = c.cmd(&["ZREM", &key, &member]);
                assert_eq!(r, Resp::Int(m.remove(&member).is_some() as i64));
            }
            4 => {
                let n = rng.gen_range(1..4);
                let max = rng.gen_bool(0.5);
                let r = c.cmd(&[if max { "ZPOPMAX" } else { "ZPOPMIN" }, &key, &n.to_string()]).array();
                let got: Vec<String> = r.chunks(2).map(|p| p[0].text()).collect();
                let mut order: Vec<(f64, String)> = m.iter().map(|(k, v)| (*v, k.clone())).collect();
                order.sort_by(|a, b| a.0.total_cmp(&b.0).then_with(|| a.1.cmp(&b.1)));
                if max {
                    order.reverse();
                }
                let want: Vec<String> = order.into_iter().take(n).map(|(_, k)| k).collect();
                assert_eq!(got, want, "step {step}");
                for k in want {
                    m.remove(&k);
                }
            }
            5 => {
                // In one transaction: a pop, then a member added beyond the popped end, then a pop that
                // must find it (the pop bounds the first pop learnt are widened by the add).
                let max = rng.gen_bool(0.5);
                let pop = if max { "ZPOPMAX" } else { "ZPOPMIN" };
                let beyond = if max { 100.0 + score } else { -100.0 + score };
                c.cmd(&["MULTI"]);
                c.cmd(&[pop, &key]);
                c.cmd(&["ZADD", &key, &beyond.to_string(), &member]);
                c.cmd(&[pop, &key]);
                let r = c.cmd(&["EXEC"]).array();
                let mut order: Vec<(f64, String)> = m.iter().map(|(k, v)| (*v, k.clone())).collect();
                order.sort_by(|a, b| a.0.total_cmp(&b.0).then_with(|| a.1.cmp(&b.1)));
                if max {
                    order.reverse();
                }
                if let Some((_, first)) = order.first() {
                    assert_eq!(r[0].clone().array()[0].text(), *first, "step {step}");
                    m.remove(&first.clone());
                }
                let added = !m.contains_key(&member);
                assert_eq!(r[1], Resp::Int(added as i64), "step {step}");
                // The member just added is now the end the second pop takes; it leaves the set.
                m.remove(&member);
                assert_eq!(r[2].clone().array()[0].text(), member, "step {step}");
            }
            _ => {
                let (lo, hi) = (score, score + 2.0);
                let r = c.cmd(&["ZREMRANGEBYSCORE", &key, &lo.to_string(), &format!("({hi}")]);
                let gone: Vec<String> = m.iter().filter(|(_, &v)| v >= lo && v < hi).map(|(k, _)| k.clone()).collect();
                assert_eq!(r, Resp::Int(gone.len() as i64));
                for g in gone {
                    m.remove(&g);
                }
            }
        }
        if step % 100 == 0 || step == 2999 {
            for (i, m) in model.iter().enumerate() {
                let key = format!("k{i}");
                assert_eq!(c.cmd(&["ZCARD", &key]), Resp::Int(m.len() as i64), "step {step}");
                let got = c.cmd(&["ZRANGE", &key, "0", "-1", "WITHSCORES"]).array();
                let mut want: Vec<(f64, String)> = m.iter().map(|(k, v)| (*v, k.clone())).collect();
                want.sort_by(|a, b| a.0.total_cmp(&b.0).then_with(|| a.1.cmp(&b.1)));
                let got: Vec<(f64, String)> =
                    got.chunks(2).map(|p| (p[1].text().parse().unwrap(), p[0].text())).collect();
                assert_eq!(got, want, "step {step}");
                let exists = c.cmd(&["EXISTS", &key]);
                assert_eq!(exists, Resp::Int(!m.is_empty() as i64));
            }
        }
    }
}

/// A set past the small size: ranks from both ends, ranges by index near either end, and a ZSCAN that
/// pages with a cursor and returns every member exactly once.
#[test]
fn zset_ranks_ranges_and_scan_on_a_larger_set() {
    let (server, _dir) = start_server();
    let mut c = Client::connect(server.addr());
    let n = 1000;
    let mut args: Vec<String> = vec!["ZADD".into(), "big".into()];
    for i in 0..n {
        args.push(format!("{}", i as f64 * 0.5 - 100.0));
        args.push(format!("m{i:04}"));
    }
    let a: Vec<&str> = args.iter().map(String::as_str).collect();
    assert_eq!(c.cmd(&a), Resp::Int(n));
    for i in [0, 1, 499, 500, 998, 999] {
        assert_eq!(c.cmd(&["ZRANK", "big", &format!("m{i:04}")]), Resp::Int(i));
        assert_eq!(c.cmd(&["ZREVRANK", "big", &format!("m{i:04}")]), Resp::Int(n - 1 - i));
    }
    let r = c.cmd(&["ZRANGE", "big", "-3", "-1"]).array();
    assert_eq!(r.iter().map(Resp::text).collect::<Vec<_>>(), ["m0997", "m0998", "m0999"]);
    let r = c.cmd(&["ZRANGE", "big", "2", "3", "REV"]).array();
    assert_eq!(r.iter().map(Resp::text).collect::<Vec<_>>(), ["m0997", "m0996"]);
    let r = c.cmd(&["ZRANGE", "big", "10", "11"]).array();
    assert_eq!(r.iter().map(Resp::text).collect::<Vec<_>>(), ["m0010", "m0011"]);
    let mut seen = HashSet::new();
    let mut cursor = "0".to_string();
    let mut calls = 0;
    loop {
        let r = c.cmd(&["ZSCAN", "big", &cursor, "COUNT", "100"]).array();
        cursor = r[0].text();
        for p in r[1].clone().array().chunks(2) {
            assert!(seen.insert(p[0].text()), "{} twice", p[0].text());
        }
        calls += 1;
        assert!(calls < 100, "ZSCAN does not end");
        if cursor == "0" {
            break;
        }
    }
    assert_eq!(seen.len(), n as usize);
    assert!(calls > 5, "a large set is scanned in pages");
    let r = c.cmd(&["ZRANDMEMBER", "big", "5", "WITHSCORES"]).array();
    assert_eq!(r.len(), 10);
    let distinct: HashSet<String> = r.chunks(2).map(|p| p[0].text()).collect();
    assert_eq!(distinct.len(), 5);
    let r = c.cmd(&["ZRANDMEMBER", "big", "-20"]).array();
    assert_eq!(r.len(), 20);
    assert_eq!(c.cmd(&["ZCARD", "big"]), Resp::Int(n));
    // DEL is one write, whatever the size; the key is gone at once.
    assert_eq!(c.cmd(&["DEL", "big"]), Resp::Int(1));
    assert_eq!(c.cmd(&["ZCARD", "big"]), Resp::Int(0));
    assert_eq!(c.cmd(&["ZRANGE", "big", "0", "-1"]), Resp::Array(vec![]));
}

/// A sorted set with a TTL expires as a whole; a new set under the same key starts empty.
#[test]
fn zset_expires() {
    let (server, _dir) = start_server();
    let mut c = Client::connect(server.addr());
    assert_eq!(c.cmd(&["ZADD", "e", "1", "a", "2", "b"]), Resp::Int(2));
    assert_eq!(c.cmd(&["PEXPIRE", "e", "100"]), Resp::Int(1));
    assert_eq!(c.cmd(&["ZADD", "e", "3", "c"]), Resp::Int(1));
    let ttl = c.cmd(&["PTTL", "e"]);
    assert!(matches!(ttl, Resp::Int(t) if t > 0 && t <= 100), "{ttl:?}");
    std::thread::sleep(Duration::from_millis(250));
    assert_eq!(c.cmd(&["ZCARD", "e"]), Resp::Int(0));
    assert_eq!(c.cmd(&["TYPE", "e"]), Resp::Simple("none".into()));
    assert_eq!(c.cmd(&["ZSCORE", "e", "a"]), Resp::Nil);
    assert_eq!(c.cmd(&["ZADD", "e", "5", "z"]), Resp::Int(1));
    let r = c.cmd(&["ZRANGE", "e", "0", "-1", "WITHSCORES"]).array();
    assert_eq!(r.iter().map(Resp::text).collect::<Vec<_>>(), ["z", "5"]);
    assert_eq!(c.cmd(&["TTL", "e"]), Resp::Int(-1));
}

/// A seeded random sequence of sorted-set commands (every option, bounds exclusive or not, LIMIT, REV,
/// stores, errors) sent to both servers, the replies compared one by one. Sets stay small (Redis's small
/// encoding), so even lex ranges over unequal scores and ZSCAN have one defined answer.
#[test]
fn zset_random_commands_match_redis() {
    let Some(Both { mut ours, mut theirs, _servers }) = both() else { return };
    let seed: u64 = std::env::var("ZSET_DIFF_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(0x25e7);
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    const SCORES: &[&str] = &["0", "1", "-1", "2.5", "-2.5", "1e3", "0.1", "inf", "-inf", "+inf", "3", "-0", "7"];
    const BOUNDS: &[&str] = &["-inf", "+inf", "0", "(0", "1", "(1", "2.5", "(2.5", "-1", "(-1", "5", "(inf", "x"];
    const LEX: &[&str] = &["-", "+", "[a", "(a", "[c", "(c", "[f", "(f", "[", "(", "[m3", "(m1", "x"];
    const FLAGS: &[&str] = &["NX", "XX", "GT", "LT", "CH", "INCR"];
    let mut diffs = Vec::new();
    for _ in 0..2500 {
        let key = ["a", "b", "c", "lex"][rng.gen_range(0..4)].to_string();
        let member = |rng: &mut rand::rngs::StdRng| format!("m{}", rng.gen_range(0..12));
        let score = |rng: &mut rand::rngs::StdRng| SCORES[rng.gen_range(0..SCORES.len())].to_string();
        let bound = |rng: &mut rand::rngs::StdRng| BOUNDS[rng.gen_range(0..BOUNDS.len())].to_string();
        let lex = |rng: &mut rand::rngs::StdRng| LEX[rng.gen_range(0..LEX.len())].to_string();
        let idx = |rng: &mut rand::rngs::StdRng| rng.gen_range(-8..8).to_string();
        let mut w: Vec<String> = Vec::new();
        match rng.gen_range(0..22) {
            0..=3 => {
                w.push("ZADD".into());
                w.push(key.clone());
                for f in FLAGS {
                    if rng.gen_bool(0.15) {
                        w.push(f.to_string());
                    }
                }
                for _ in 0..rng.gen_range(1..4) {
                    // The lex key keeps equal scores, as lex ranges want.
                    w.push(if key == "lex" { "0".into() } else { score(&mut rng) });
                    w.push(member(&mut rng));
                }
            }
            4 => w.extend(["ZINCRBY".into(), key.clone(), score(&mut rng), member(&mut rng)]),
            5 => w.extend(["ZREM".into(), key.clone(), member(&mut rng), member(&mut rng)]),
            6 => w.extend(["ZSCORE".into(), key.clone(), member(&mut rng)]),
            7 => w.extend(["ZMSCORE".into(), key.clone(), member(&mut rng), member(&mut rng)]),
            8 => w.extend([["ZRANK", "ZREVRANK"][rng.gen_range(0..2)].into(), key.clone(), member(&mut rng)]),
            9 => w.extend(["ZCOUNT".into(), key.clone(), bound(&mut rng), bound(&mut rng)]),
            10 => w.extend(["ZLEXCOUNT".into(), key.clone(), lex(&mut rng), lex(&mut rng)]),
            11 => {
                w.extend(["ZRANGE".into(), key.clone()]);
                match rng.gen_range(0..3) {
                    0 => w.extend([idx(&mut rng), idx(&mut rng)]),
                    1 => w.extend([bound(&mut rng), bound(&mut rng), "BYSCORE".into()]),
                    _ => w.extend([lex(&mut rng), lex(&mut rng), "BYLEX".into()]),
                }
                if rng.gen_bool(0.4) {
                    w.push("REV".into());
                }
                if rng.gen_bool(0.3) {
                    w.extend(["LIMIT".into(), rng.gen_range(-1..4).to_string(), rng.gen_range(-1..4).to_string()]);
                }
                if rng.gen_bool(0.4) {
                    w.push("WITHSCORES".into());
                }
            }
            12 => {
                let c = ["ZRANGEBYSCORE", "ZREVRANGEBYSCORE"][rng.gen_range(0..2)];
                w.extend([c.into(), key.clone(), bound(&mut rng), bound(&mut rng)]);
                if rng.gen_bool(0.4) {
                    w.push("WITHSCORES".into());
                }
                if rng.gen_bool(0.3) {
                    w.extend(["LIMIT".into(), rng.gen_range(-1..4).to_string(), rng.gen_range(-1..4).to_string()]);
                }
            }
            13 => {
                let c = ["ZRANGEBYLEX", "ZREVRANGEBYLEX"][rng.gen_range(0..2)];
                w.extend([c.into(), key.clone(), lex(&mut rng), lex(&mut rng)]);
                if rng.gen_bool(0.3) {
                    w.extend(["LIMIT".into(), rng.gen_range(-1..4).to_string(), rng.gen_range(-1..4).to_string()]);
                }
            }
            14 => {
                w.extend(["ZREVRANGE".into(), key.clone(), idx(&mut rng), idx(&mut rng)]);
                if rng.gen_bool(0.5) {
                    w.push("WITHSCORES".into());
                }
            }
            15 => {
                w.extend([["ZPOPMIN", "ZPOPMAX"][rng.gen_range(0..2)].into(), key.clone()]);
                if rng.gen_bool(0.6) {
                    w.push(rng.gen_range(-1..4).to_string());
                }
            }
            16 => w.extend(["ZREMRANGEBYRANK".into(), key.clone(), idx(&mut rng), idx(&mut rng)]),
            17 => w.extend(["ZREMRANGEBYSCORE".into(), key.clone(), bound(&mut rng), bound(&mut rng)]),
            18 => w.extend(["ZREMRANGEBYLEX".into(), key.clone(), lex(&mut rng), lex(&mut rng)]),
            19 => {
                let c = ["ZUNIONSTORE", "ZINTERSTORE", "ZDIFFSTORE"][rng.gen_range(0..3)];
                w.extend([c.into(), ["a", "b", "c", "d"][rng.gen_range(0..4)].into(), "2".into()]);
                w.extend([["a", "b", "c"][rng.gen_range(0..3)].into(), ["a", "b", "c"][rng.gen_range(0..3)].into()]);
                if c != "ZDIFFSTORE" && rng.gen_bool(0.5) {
                    w.extend(["WEIGHTS".into(), rng.gen_range(-2..3).to_string(), "0.5".into()]);
                }
                if c != "ZDIFFSTORE" && rng.gen_bool(0.5) {
                    w.extend(["AGGREGATE".into(), ["SUM", "MIN", "MAX"][rng.gen_range(0..3)].into()]);
                }
            }
            20 => {
                w.extend(["ZRANGESTORE".into(), "d".into(), key.clone(), bound(&mut rng), bound(&mut rng)]);
                w.push("BYSCORE".into());
            }
            _ => {
                w.extend(["ZCARD".into(), key.clone()]);
            }
        }
        let a: Vec<&str> = w.iter().map(String::as_str).collect();
        let (x, y) = (ours.cmd(&a), theirs.cmd(&a));
        if x != y {
            diffs.push(format!("{}\n  shaledb: {x:?}\n  redis:   {y:?}", w.join(" ")));
        }
    }
    for k in ["a", "b", "c", "d", "lex"] {
        let a = ["ZRANGE", k, "0", "-1", "WITHSCORES"];
        assert_eq!(ours.cmd(&a), theirs.cmd(&a), "final contents of {k}");
        assert_eq!(ours.cmd(&["ZSCAN", k, "0"]), theirs.cmd(&["ZSCAN", k, "0"]), "ZSCAN of {k}");
    }
    assert!(
        diffs.is_empty(),
        "{} replies differ, the first ones:\n{}",
        diffs.len(),
        diffs[..diffs.len().min(8)].join("\n")
    );
}

/// ZINCRBY and ZADD INCR from many connections at once lose no update; a transaction sees its own writes.
#[test]
fn zset_concurrent_increments_and_multi() {
    let (server, _dir) = start_server();
    let addr = server.addr();
    let threads: Vec<_> = (0..4)
        .map(|t| {
            std::thread::spawn(move || {
                let mut c = Client::connect(addr);
                for i in 0..150 {
                    let r = if (i + t) % 2 == 0 {
                        c.cmd(&["ZINCRBY", "ctr", "1", "hits"])
                    } else {
                        c.cmd(&["ZADD", "ctr", "INCR", "1", "hits"])
                    };
                    assert!(matches!(r, Resp::Bulk(_)), "{r:?}");
                }
            })
        })
        .collect();
    for t in threads {
        t.join().expect("a client thread");
    }
    let mut c = Client::connect(addr);
    assert_eq!(c.cmd(&["ZSCORE", "ctr", "hits"]).text(), "600");
    assert_eq!(c.cmd(&["ZCARD", "ctr"]), Resp::Int(1));
    assert_eq!(c.cmd(&["MULTI"]), Resp::Simple("OK".into()));
    for w in
        [&["ZADD", "tx", "1", "a", "2", "b"][..], &["ZRANGE", "tx", "0", "-1"], &["ZPOPMIN", "tx"], &["ZCARD", "tx"]]
    {
        assert_eq!(c.cmd(w), Resp::Simple("QUEUED".into()));
    }
    let r = c.cmd(&["EXEC"]).array();
    assert_eq!(r[0], Resp::Int(2));
    assert_eq!(r[1].clone().array().iter().map(Resp::text).collect::<Vec<_>>(), ["a", "b"]);
    assert_eq!(r[2].clone().array().iter().map(Resp::text).collect::<Vec<_>>(), ["a", "1"]);
    assert_eq!(r[3], Resp::Int(1));
}

/// BZPOPMIN answers at once when a set has members, times out with a nil array, and a blocked client is
/// woken by a ZADD from another connection.
#[test]
fn bzpop_blocks_and_is_woken_by_zadd() {
    let (server, _dir) = start_server();
    let addr = server.addr();
    let mut c = Client::connect(addr);
    c.cmd(&["ZADD", "q", "2", "b", "1", "a"]);
    let r = c.cmd(&["BZPOPMIN", "none", "q", "0"]).array();
    assert_eq!(r.iter().map(Resp::text).collect::<Vec<_>>(), ["q", "a", "1"]);
    let r = c.cmd(&["BZPOPMAX", "q", "0"]).array();
    assert_eq!(r.iter().map(Resp::text).collect::<Vec<_>>(), ["q", "b", "2"]);
    assert_eq!(c.cmd(&["EXISTS", "q"]), Resp::Int(0));
    let t = Instant::now();
    assert_eq!(c.cmd(&["BZPOPMIN", "q", "0.1"]), Resp::Nil);
    assert!(t.elapsed() >= Duration::from_millis(90));
    assert_eq!(c.cmd(&["BZPOPMIN", "q", "x"]), Resp::Error("ERR timeout is not a float or out of range".into()));
    assert_eq!(c.cmd(&["BZPOPMIN", "q", "-1"]), Resp::Error("ERR timeout is negative".into()));
    c.cmd(&["SET", "s", "x"]);
    assert!(matches!(c.cmd(&["BZPOPMIN", "s", "0"]), Resp::Error(e) if e.starts_with("WRONGTYPE")));
    let waiter = std::thread::spawn(move || {
        let mut w = Client::connect(addr);
        w.cmd(&["BZPOPMAX", "q", "5"])
    });
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(c.cmd(&["ZADD", "q", "7", "x", "3", "y"]), Resp::Int(2));
    let r = waiter.join().expect("the blocked client").array();
    assert_eq!(r.iter().map(Resp::text).collect::<Vec<_>>(), ["q", "x", "7"]);
    assert_eq!(c.cmd(&["ZCARD", "q"]), Resp::Int(1));
}

/// BZMPOP answers at once when a set has members, times out with a nil array, and a blocked client is
/// woken by a ZADD from another connection; a key that meanwhile holds another type wakes nobody.
#[test]
fn bzmpop_blocks_and_is_woken_by_zadd() {
    let (server, _dir) = start_server();
    let addr = server.addr();
    let mut c = Client::connect(addr);
    c.cmd(&["ZADD", "q", "2", "b", "1", "a", "3", "c"]);
    let r = c.cmd(&["BZMPOP", "0", "2", "none", "q", "MIN", "COUNT", "2"]).array();
    assert_eq!(r[0].text(), "q");
    let pairs: Vec<Vec<String>> =
        r[1].clone().array().into_iter().map(|p| p.array().iter().map(Resp::text).collect()).collect();
    assert_eq!(pairs, [["a", "1"], ["b", "2"]]);
    let t = Instant::now();
    assert_eq!(c.cmd(&["BZMPOP", "0.1", "1", "none", "MAX"]), Resp::Nil);
    assert!(t.elapsed() >= Duration::from_millis(90));
    let reg = server.shared().store.blocking.clone();
    let waiter = std::thread::spawn(move || {
        let mut w = Client::connect(addr);
        w.cmd(&["BZMPOP", "5", "1", "w", "MAX", "COUNT", "10"])
    });
    let deadline = Instant::now() + Duration::from_secs(5);
    while reg.blocked_clients() == 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(reg.blocked_clients(), 1);
    // Created, deleted and replaced by a string in one transaction: the waiter stays blocked.
    assert_eq!(c.cmd(&["MULTI"]), Resp::Simple("OK".into()));
    for w in [&["ZADD", "w", "1", "x"][..], &["DEL", "w"], &["SET", "w", "s"]] {
        c.cmd(w);
    }
    c.cmd(&["EXEC"]);
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(reg.blocked_clients(), 1);
    c.cmd(&["DEL", "w"]);
    assert_eq!(c.cmd(&["ZADD", "w", "7", "x", "3", "y"]), Resp::Int(2));
    let r = waiter.join().expect("the blocked client").array();
    assert_eq!(r[0].text(), "w");
    let pairs: Vec<Vec<String>> =
        r[1].clone().array().into_iter().map(|p| p.array().iter().map(Resp::text).collect()).collect();
    assert_eq!(pairs, [["x", "7"], ["y", "3"]]);
    assert_eq!(c.cmd(&["EXISTS", "w"]), Resp::Int(0));
    assert_eq!(reg.blocked_clients(), 0);
}
