//! DUMP and RESTORE against a real redis-server: values of every type, with seeded random contents sized to
//! reach each encoding Redis picks (listpack, intset, quicklist, hash table, skiplist, LZF-compressed
//! strings, streams with consumer groups), DUMPed by redis-server and RESTOREd by shaledb and the other way
//! round, then read back from both and compared; the error replies compared with Redis's; mutated payloads
//! (checksum fixed up) answered with OK or `Bad data format`, never a crash; restored values durable across a
//! restart. redis-server missing: the comparisons print why and return (the only skip).

use crate::helpers::{connect, redis_or_skip, start_server, Rng};
use redis::Value;
use shaledb_server::{Config, RunningServer};

/// The generator's value shapes for DUMP payloads.
trait Shapes {
    fn element(&mut self) -> Vec<u8>;
    fn size(&mut self) -> usize;
}

impl Shapes for Rng {
    /// An element: short text, an integer (the integer encodings), binary bytes, or a long value.
    fn element(&mut self) -> Vec<u8> {
        match self.below(10) {
            0..=3 => format!("m{}", self.below(100_000)).into_bytes(),
            4..=5 => (self.next() as i64 >> self.below(64)).to_string().into_bytes(),
            6..=7 => (0..self.below(20)).map(|_| self.next() as u8).collect(),
            8 => "xy".repeat(10 + self.below(200) as usize).into_bytes(),
            _ => (0..100 + self.below(3000)).map(|_| b'a' + self.below(26) as u8).collect(),
        }
    }

    /// A size: mostly small (packed encodings), sometimes past Redis's thresholds (128, 512 entries).
    fn size(&mut self) -> usize {
        if self.chance(70) {
            1 + self.below(20) as usize
        } else {
            100 + self.below(600) as usize
        }
    }
}

fn seed() -> u64 {
    std::env::var("SHALEDB_DUMP_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(1, |d| d.as_nanos() as u64)
    })
}

fn run(con: &mut redis::Connection, args: &[&[u8]]) -> redis::RedisResult<Value> {
    let mut c = redis::cmd(std::str::from_utf8(args[0]).expect("command name"));
    for a in &args[1..] {
        c.arg(*a);
    }
    c.query(con)
}

fn must(con: &mut redis::Connection, args: &[&[u8]]) -> Value {
    run(con, args).unwrap_or_else(|e| {
        panic!("{:?} failed: {e}", args.iter().map(|a| String::from_utf8_lossy(a)).collect::<Vec<_>>())
    })
}

/// The reply as a string for comparisons (errors as their line).
fn reply_text(r: redis::RedisResult<Value>) -> String {
    match r {
        Ok(v) => format!("{v:?}"),
        Err(e) => format!("-{} {}", e.code().unwrap_or("?"), e.detail().unwrap_or("")),
    }
}

fn dump(con: &mut redis::Connection, key: &str) -> Vec<u8> {
    match must(con, &[b"DUMP", key.as_bytes()]) {
        Value::BulkString(p) => p,
        other => panic!("DUMP {key}: {other:?}"),
    }
}

fn flat(v: Value) -> Vec<Value> {
    match v {
        Value::Array(items) => items,
        other => panic!("not an array: {other:?}"),
    }
}

/// `field value` pairs of a RESP2 map reply, keeping the named fields.
fn fields(v: Value, keep: &[&str]) -> Vec<(String, Value)> {
    let items = flat(v);
    items
        .chunks(2)
        .filter_map(|p| match &p[0] {
            Value::BulkString(k) if keep.contains(&String::from_utf8_lossy(k).as_ref()) => {
                Some((String::from_utf8_lossy(k).into_owned(), p[1].clone()))
            }
            _ => None,
        })
        .collect()
}

fn sorted_pairs(v: Value) -> Vec<Vec<Value>> {
    let mut pairs: Vec<Vec<Value>> = flat(v).chunks(2).map(|c| c.to_vec()).collect();
    pairs.sort_by_key(|p| format!("{p:?}"));
    pairs
}

/// Everything a client can read of `key`, normalized where Redis leaves the order to its hash tables.
fn state(con: &mut redis::Connection, key: &str) -> String {
    let k = key.as_bytes();
    let typ = match must(con, &[b"TYPE", k]) {
        Value::SimpleString(t) => t,
        other => panic!("TYPE: {other:?}"),
    };
    let body = match typ.as_str() {
        "string" => format!("{:?}", must(con, &[b"GET", k])),
        "list" => format!("{:?}", must(con, &[b"LRANGE", k, b"0", b"-1"])),
        "set" => {
            let mut m = flat(must(con, &[b"SMEMBERS", k]));
            m.sort_by_key(|v| format!("{v:?}"));
            format!("{m:?}")
        }
        "zset" => format!("{:?}", must(con, &[b"ZRANGE", k, b"0", b"-1", b"WITHSCORES"])),
        "hash" => format!("{:?}", sorted_pairs(must(con, &[b"HGETALL", k]))),
        "stream" => {
            let entries = must(con, &[b"XRANGE", k, b"-", b"+"]);
            let info = fields(
                must(con, &[b"XINFO", b"STREAM", k]),
                &["length", "last-generated-id", "max-deleted-entry-id", "entries-added", "recorded-first-entry-id"],
            );
            let mut out = format!("{entries:?} {info:?}");
            for g in flat(must(con, &[b"XINFO", b"GROUPS", k])) {
                let g = fields(g, &["name", "consumers", "pending", "last-delivered-id", "entries-read", "lag"]);
                let Value::BulkString(name) = &g[0].1 else { panic!("group name: {g:?}") };
                let name = name.clone();
                let pending = must(con, &[b"XPENDING", k, &name, b"-", b"+", b"1000"]);
                // Idle times tick: keep id, consumer and delivery count.
                let pending: Vec<Value> = flat(pending)
                    .into_iter()
                    .map(|p| {
                        let p = flat(p);
                        Value::Array(vec![p[0].clone(), p[1].clone(), p[3].clone()])
                    })
                    .collect();
                let consumers: Vec<_> = flat(must(con, &[b"XINFO", b"CONSUMERS", k, &name]))
                    .into_iter()
                    .map(|c| fields(c, &["name", "pending"]))
                    .collect();
                out.push_str(&format!(" group {g:?} {pending:?} {consumers:?}"));
            }
            out
        }
        other => panic!("unexpected type {other}"),
    };
    format!("{typ}: {body}")
}

/// Builds a random value of `typ` as `key` on `con` (any server), with the commands a client would use.
fn build(con: &mut redis::Connection, rng: &mut Rng, typ: usize, key: &str) {
    let k = key.as_bytes();
    must(con, &[b"DEL", k]);
    match typ {
        0 => {
            let v = rng.element();
            must(con, &[b"SET", k, &v]);
        }
        1 => {
            for _ in 0..rng.size() {
                let e = rng.element();
                must(con, &[if rng.chance(50) { b"RPUSH" } else { b"LPUSH" }, k, &e]);
            }
        }
        2 => {
            let ints = rng.chance(40);
            for _ in 0..rng.size() {
                let m = if ints { rng.below(1 << 40).to_string().into_bytes() } else { rng.element() };
                must(con, &[b"SADD", k, &m]);
            }
        }
        3 => {
            for _ in 0..rng.size() {
                let score = match rng.below(6) {
                    0 => "inf".to_string(),
                    1 => "-inf".to_string(),
                    2 => format!("{}", rng.below(1000) as f64 / 8.0 - 50.0),
                    3 => format!("{}", rng.next() as i64 >> 12),
                    _ => format!("{}", rng.below(100)),
                };
                let m = rng.element();
                must(con, &[b"ZADD", k, score.as_bytes(), &m]);
            }
        }
        4 => {
            for _ in 0..rng.size() {
                let (f, v) = (rng.element(), rng.element());
                must(con, &[b"HSET", k, &f, &v]);
            }
        }
        _ => {
            let n = rng.size() as u64;
            let mut ms = 1 + rng.below(1000);
            let mut ids = Vec::new();
            for i in 0..n {
                ms += rng.below(3);
                let id = format!("{ms}-{i}");
                let mut args: Vec<Vec<u8>> = vec![b"XADD".to_vec(), k.to_vec(), id.clone().into_bytes()];
                let nf = if rng.chance(60) { 1 } else { 1 + rng.below(4) };
                for j in 0..nf {
                    args.push(if rng.chance(70) { format!("f{j}").into_bytes() } else { rng.element() });
                    args.push(rng.element());
                }
                let refs: Vec<&[u8]> = args.iter().map(|a| a.as_slice()).collect();
                must(con, &refs);
                ids.push(id);
            }
            for _ in 0..rng.below(4) {
                let id = &ids[rng.below(ids.len() as u64) as usize];
                must(con, &[b"XDEL", k, id.as_bytes()]);
            }
            for g in 0..rng.below(3) {
                let group = format!("g{g}");
                must(con, &[b"XGROUP", b"CREATE", k, group.as_bytes(), b"0"]);
                for c in 0..1 + rng.below(3) {
                    let count = (1 + rng.below(5)).to_string();
                    let consumer = format!("c{c}");
                    must(
                        con,
                        &[
                            b"XREADGROUP",
                            b"GROUP",
                            group.as_bytes(),
                            consumer.as_bytes(),
                            b"COUNT",
                            count.as_bytes(),
                            b"STREAMS",
                            k,
                            b">",
                        ],
                    );
                }
                if rng.chance(50) {
                    let id = &ids[rng.below(ids.len() as u64) as usize];
                    must(con, &[b"XACK", k, group.as_bytes(), id.as_bytes()]);
                }
            }
        }
    }
}

const TYPES: [&str; 6] = ["string", "list", "set", "zset", "hash", "stream"];

#[test]
fn dump_and_restore_move_every_type_both_ways() {
    let Some(redis) = redis_or_skip() else { return };
    let (_dir, server) = start_server(|_| {});
    let mut r = redis::Client::open(format!("redis://{}/", redis.addr)).unwrap().get_connection().unwrap();
    let mut s = connect(&server);
    let seed = seed();
    eprintln!("dump_and_restore_move_every_type_both_ways: SHALEDB_DUMP_SEED={seed}");
    let mut rng = Rng(seed);
    for round in 0..8 {
        for (t, name) in TYPES.iter().enumerate() {
            let key = format!("k:{name}:{round}");
            let ctx = format!("seed {seed} round {round} type {name}");
            // Redis -> shaledb.
            build(&mut r, &mut rng, t, &key);
            let from_redis = dump(&mut r, &key);
            let reply = must(&mut s, &[b"RESTORE", key.as_bytes(), b"0", &from_redis, b"REPLACE"]);
            assert_eq!(reply, Value::Okay, "{ctx}");
            let want = state(&mut r, &key);
            assert_eq!(state(&mut s, &key), want, "redis -> shaledb, {ctx}");
            // shaledb -> Redis, under another key.
            let back = format!("{key}:back");
            let from_shale = dump(&mut s, &key);
            let reply = must(&mut r, &[b"RESTORE", back.as_bytes(), b"0", &from_shale]);
            assert_eq!(reply, Value::Okay, "{ctx}");
            assert_eq!(state(&mut r, &back), want, "shaledb -> redis, {ctx}");
            // A value built on shaledb moves to Redis too.
            let own = format!("{key}:own");
            build(&mut s, &mut rng, t, &own);
            let p = dump(&mut s, &own);
            must(&mut r, &[b"DEL", own.as_bytes()]);
            assert_eq!(must(&mut r, &[b"RESTORE", own.as_bytes(), b"0", &p]), Value::Okay, "{ctx}");
            assert_eq!(state(&mut r, &own), state(&mut s, &own), "shaledb-built -> redis, {ctx}");
        }
    }
}

#[test]
fn ttl_options_match_redis() {
    let Some(redis) = redis_or_skip() else { return };
    let (_dir, server) = start_server(|_| {});
    let mut r = redis::Client::open(format!("redis://{}/", redis.addr)).unwrap().get_connection().unwrap();
    let mut s = connect(&server);
    must(&mut r, &[b"RPUSH", b"src", b"a", b"b"]);
    let p = dump(&mut r, "src");
    let now_ms = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as u64;
    let abs_future = (now_ms + 100_000).to_string();
    let abs_past = (now_ms - 100_000).to_string();
    let cases: Vec<Vec<&[u8]>> = vec![
        vec![b"RESTORE", b"t1", b"50000", &p],
        vec![b"RESTORE", b"t2", abs_future.as_bytes(), &p, b"ABSTTL"],
        vec![b"RESTORE", b"t3", abs_past.as_bytes(), &p, b"ABSTTL"],
        vec![b"RESTORE", b"t4", b"2569591501", &p, b"IDLETIME", b"10"],
        vec![b"RESTORE", b"t5", b"0", &p, b"FREQ", b"100"],
    ];
    for c in &cases {
        assert_eq!(reply_text(run(&mut s, c)), reply_text(run(&mut r, c)), "{:?}", String::from_utf8_lossy(c[1]));
    }
    for key in ["t1", "t2", "t3", "t4", "t5"] {
        let a: i64 = redis::cmd("PTTL").arg(key).query(&mut r).unwrap();
        let b: i64 = redis::cmd("PTTL").arg(key).query(&mut s).unwrap();
        assert_eq!(a.signum(), b.signum(), "{key}: redis {a}, shaledb {b}");
        if a > 0 {
            assert!((a - b).abs() < 5_000, "{key}: redis {a}, shaledb {b}");
        }
    }
    // An expiry already past with REPLACE deletes the old value, as in Redis.
    for con in [&mut r, &mut s] {
        must(con, &[b"SET", b"old", b"v"]);
        assert_eq!(must(con, &[b"RESTORE", b"old", abs_past.as_bytes(), &p, b"ABSTTL", b"REPLACE"]), Value::Okay);
        assert_eq!(must(con, &[b"EXISTS", b"old"]), Value::Int(0));
    }
}

/// CRC-64/Jones, for building payloads with a correct footer around a wrong body.
fn crc64(data: &[u8]) -> u64 {
    let mut crc = 0u64;
    for &b in data {
        crc ^= b as u64;
        for _ in 0..8 {
            crc = if crc & 1 == 1 { (crc >> 1) ^ 0x95ac_9329_ac4b_c9b5 } else { crc >> 1 };
        }
    }
    crc
}

fn with_footer(body: &[u8]) -> Vec<u8> {
    let mut p = body.to_vec();
    p.extend_from_slice(&10u16.to_le_bytes());
    let crc = crc64(&p);
    p.extend_from_slice(&crc.to_le_bytes());
    p
}

#[test]
fn errors_match_redis() {
    let Some(redis) = redis_or_skip() else { return };
    let (_dir, server) = start_server(|_| {});
    let mut r = redis::Client::open(format!("redis://{}/", redis.addr)).unwrap().get_connection().unwrap();
    let mut s = connect(&server);
    for con in [&mut r, &mut s] {
        must(con, &[b"SET", b"busy", b"x"]);
        must(con, &[b"SADD", b"aset", b"x"]);
    }
    let good = dump(&mut r, "busy");
    let mut flipped = good.clone();
    *flipped.last_mut().unwrap() ^= 0x40;
    let mut v11 = good[..good.len() - 10].to_vec();
    v11.extend_from_slice(&11u16.to_le_bytes());
    let crc = crc64(&v11);
    v11.extend_from_slice(&crc.to_le_bytes());
    let bad_body = with_footer(&[0, 9, b'a']);
    let unknown_type = with_footer(&[42, 1, b'a']);
    let empty_list = with_footer(&[18, 0]);
    let cases: Vec<Vec<&[u8]>> = vec![
        vec![b"RESTORE", b"busy", b"0", &good],
        vec![b"RESTORE", b"busy", b"0", b"..."],
        vec![b"RESTORE", b"busy", b"-1", &good],
        vec![b"RESTORE", b"new", b"-1", &good],
        vec![b"RESTORE", b"new", b"1.5", &good],
        vec![b"RESTORE", b"new", b"0", b"..."],
        vec![b"RESTORE", b"new", b"0", b""],
        vec![b"RESTORE", b"new", b"0", &flipped],
        vec![b"RESTORE", b"new", b"0", &v11],
        vec![b"RESTORE", b"new", b"0", &bad_body],
        vec![b"RESTORE", b"new", b"0", &unknown_type],
        vec![b"RESTORE", b"new", b"0", &empty_list],
        vec![b"RESTORE", b"new", b"0", &good, b"bogus"],
        vec![b"RESTORE", b"new", b"0", &good, b"IDLETIME"],
        vec![b"RESTORE", b"new", b"0", &good, b"IDLETIME", b"-5"],
        vec![b"RESTORE", b"new", b"0", &good, b"IDLETIME", b"x"],
        vec![b"RESTORE", b"new", b"0", &good, b"FREQ", b"256"],
        vec![b"RESTORE", b"new", b"0", &good, b"FREQ", b"1", b"IDLETIME", b"1"],
        vec![b"RESTORE", b"aset", b"0", &good, b"REPLACE"],
        vec![b"RESTORE", b"new"],
        vec![b"DUMP"],
        vec![b"DUMP", b"nosuchkey"],
        vec![b"DUMP", b"a", b"b"],
    ];
    for c in &cases {
        let shown: Vec<_> = c.iter().map(|a| String::from_utf8_lossy(&a[..a.len().min(12)]).into_owned()).collect();
        assert_eq!(reply_text(run(&mut s, c)), reply_text(run(&mut r, c)), "{shown:?}");
    }
    assert_eq!(state(&mut s, "aset"), state(&mut r, "aset"));
}

#[test]
fn mutated_payloads_answer_ok_or_bad_data_format() {
    let (_dir, server) = start_server(|_| {});
    let mut s = connect(&server);
    let seed = seed();
    eprintln!("mutated_payloads_answer_ok_or_bad_data_format: SHALEDB_DUMP_SEED={seed}");
    let mut rng = Rng(seed);
    let mut payloads = Vec::new();
    for (t, name) in TYPES.iter().enumerate() {
        for i in 0..3 {
            let key = format!("src:{name}:{i}");
            build(&mut s, &mut rng, t, &key);
            payloads.push(dump(&mut s, &key));
        }
    }
    let (mut ok, mut refused) = (0, 0);
    for n in 0..1500 {
        let p = &payloads[rng.below(payloads.len() as u64) as usize];
        let mut body = p[..p.len() - 10].to_vec();
        for _ in 0..1 + rng.below(4) {
            let at = rng.below(body.len() as u64) as usize;
            body[at] ^= 1 + rng.below(255) as u8;
        }
        if rng.chance(20) {
            body.truncate(rng.below(body.len() as u64 + 1) as usize);
        }
        let key = format!("m{n}");
        match run(&mut s, &[b"RESTORE", key.as_bytes(), b"0", &with_footer(&body)]) {
            Ok(Value::Okay) => {
                ok += 1;
                // Whatever was accepted reads back and DUMPs again.
                state(&mut s, &key);
                dump(&mut s, &key);
            }
            Ok(other) => panic!("seed {seed} #{n}: {other:?}"),
            Err(e) => {
                assert_eq!(e.detail(), Some("Bad data format"), "seed {seed} #{n}: {e}");
                refused += 1;
            }
        }
    }
    eprintln!("mutated payloads: {ok} accepted, {refused} refused");
    assert_eq!(must(&mut s, &[b"PING"]), Value::SimpleString("PONG".into()));
}

#[test]
fn restored_values_survive_a_restart_and_restore_runs_in_exec() {
    let dir = tempfile::tempdir().unwrap();
    let config = || Config { dir: dir.path().join("db"), port: 0, bind: "127.0.0.1".into(), ..Config::default() };
    let mut rng = Rng(7);
    let mut want = Vec::new();
    {
        let server = RunningServer::start(config()).unwrap();
        let mut s = connect(&server);
        for (t, name) in TYPES.iter().enumerate() {
            build(&mut s, &mut rng, t, &format!("src:{name}"));
            let p = dump(&mut s, &format!("src:{name}"));
            // Inside MULTI/EXEC, with another write to the same key.
            redis::cmd("MULTI").query::<()>(&mut s).unwrap();
            redis::cmd("RESTORE").arg(format!("dst:{name}")).arg(0).arg(&p[..]).query::<()>(&mut s).unwrap();
            redis::cmd("EXPIRE").arg(format!("dst:{name}")).arg(100_000).query::<()>(&mut s).unwrap();
            let replies: Vec<Value> = redis::cmd("EXEC").query(&mut s).unwrap();
            assert_eq!(replies, vec![Value::Okay, Value::Int(1)]);
            want.push((name, state(&mut s, &format!("src:{name}"))));
        }
        server.shutdown().unwrap();
    }
    let server = RunningServer::start(config()).unwrap();
    let mut s = connect(&server);
    for (name, st) in want {
        let got = state(&mut s, &format!("dst:{name}"));
        assert_eq!(got.split_once(": ").map(|x| x.1), st.split_once(": ").map(|x| x.1), "{name}");
        let ttl: i64 = redis::cmd("TTL").arg(format!("dst:{name}")).query(&mut s).unwrap();
        assert!(ttl > 0, "{name}: TTL {ttl}");
    }
    server.shutdown().unwrap();
}

#[test]
fn dump_payload_fuzz_corpus_replays_without_panics() {
    let fuzz = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fuzz");
    let mut inputs = Vec::new();
    for dir in ["corpus/dump_payload", "regressions/dump_payload"] {
        let Ok(entries) = std::fs::read_dir(fuzz.join(dir)) else { continue };
        for e in entries {
            let p = e.expect("read the corpus directory").path();
            if p.is_file() {
                inputs.push(p);
            }
        }
    }
    inputs.sort();
    assert!(inputs.len() >= 10, "fuzz/corpus/dump_payload holds {} inputs", inputs.len());
    for p in &inputs {
        let data = std::fs::read(p).expect("read a corpus file");
        if std::panic::catch_unwind(|| shaledb_server::types::rdb::fuzz_payload(&data)).is_err() {
            panic!("the dump_payload driver panicked on {}", p.display());
        }
    }
}
