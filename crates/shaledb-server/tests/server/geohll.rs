//! GEO commands and HyperLogLog against a running server: a script of replies (errors included) compared
//! byte for byte with a real redis-server 7.0, random differential runs (GEOADD, GEOHASH, GEOPOS, GEODIST,
//! GEOSEARCH, GEORADIUS*, PFADD, PFCOUNT, PFMERGE, and the HyperLogLog string itself), corrupt values, the
//! cache bytes, and a restart.

use crate::helpers::{redis_or_skip, start_server, Client, RedisServer, Resp};
use rand::{Rng, SeedableRng};
use shaledb_server::{Config, RunningServer};
use tempfile::TempDir;

/// Our server and a redis-server side by side, a raw client on each.
struct Both {
    ours: Client,
    theirs: Client,
    _servers: (RunningServer, TempDir, RedisServer),
}

fn both() -> Option<Both> {
    let redis = redis_or_skip()?;
    let (dir, server) = start_server(|_| {});
    let ours = Client::connect(server.addr());
    let theirs = Client::connect(redis.addr);
    Some(Both { ours, theirs, _servers: (server, dir, redis) })
}

impl Both {
    /// Sends `args` to both and asserts the replies are equal; returns ours.
    fn same(&mut self, args: &[&str], context: &str) -> Resp {
        let ours = self.ours.cmd(args);
        let theirs = self.theirs.cmd(args);
        assert_eq!(ours, theirs, "{context}: {args:?}");
        ours
    }
}

fn words(line: &str) -> Vec<&str> {
    line.split(' ').collect()
}

/// Commands whose replies must be the same, byte for byte, on both servers (errors included).
const SCRIPT: &[&str] = &[
    "GEOADD Sicily 13.361389 38.115556 Palermo 15.087269 37.502669 Catania",
    "ZRANGE Sicily 0 -1 WITHSCORES",
    "GEOADD Sicily CH 13.361389 38.115556 Palermo 15 37 Catania 12 36 New",
    "GEOADD Sicily NX 1 1 Palermo 2 2 Other",
    "GEOADD Sicily XX CH 13.5 38 Palermo 3 3 Missing",
    "GEOADD Sicily XX NX 1 1 a",
    "GEOADD Sicily CH 1 1",
    "GEOADD Sicily 1 1 a 2",
    "GEOADD Sicily foo 1 1 a",
    "GEOADD Sicily 181 1 a",
    "GEOADD Sicily 1 85.06 a",
    "GEOADD Sicily abc 1 a",
    "GEOADD Sicily 1e999 1 a",
    "GEODIST Sicily Palermo Catania",
    "GEODIST Sicily Palermo Catania km",
    "GEODIST Sicily Palermo Catania MI",
    "GEODIST Sicily Palermo Catania ft",
    "GEODIST Sicily Palermo Catania parsec",
    "GEODIST Sicily Palermo Catania km extra",
    "GEODIST Sicily Palermo Nowhere",
    "GEODIST nokey a b",
    "GEODIST Sicily Palermo Palermo",
    "GEOHASH Sicily Palermo Catania Nowhere",
    "GEOHASH nokey a",
    "GEOHASH Sicily",
    "GEOPOS Sicily Palermo Nowhere Catania",
    "GEOPOS nokey a",
    "GEORADIUS Sicily 15 37 200 km WITHDIST WITHCOORD WITHHASH ASC",
    "GEORADIUS Sicily 15 37 200 km DESC COUNT 1",
    "GEORADIUS Sicily 15 37 200 km COUNT 2 ANY",
    "GEORADIUS Sicily 15 37 200 km ANY",
    "GEORADIUS Sicily 15 37 200 km COUNT 0",
    "GEORADIUS Sicily 15 37 200 km COUNT -1",
    "GEORADIUS Sicily 15 37 200 km COUNT x",
    "GEORADIUS Sicily 15 37 200 km COUNT",
    "GEORADIUS Sicily 15 37 -1 km",
    "GEORADIUS Sicily 15 37 x km",
    "GEORADIUS Sicily 15 37 1 parsec",
    "GEORADIUS Sicily 200 37 1 km",
    "GEORADIUS Sicily 15 37 200 km STORE",
    "GEORADIUS Sicily 15 37 200 km STORE dst WITHDIST",
    "GEORADIUS Sicily 15 37 200 km STORE dst",
    "ZRANGE dst 0 -1 WITHSCORES",
    "GEORADIUS Sicily 15 37 200 km STOREDIST dst2 DESC",
    "ZRANGE dst2 0 -1 WITHSCORES",
    "GEORADIUS nokey 15 37 200 km STORE dst",
    "EXISTS dst",
    "GEORADIUS nokey 15 37 200 km",
    "GEORADIUS_RO Sicily 15 37 200 km STORE dst",
    "GEORADIUS_RO Sicily 15 37 200 km WITHDIST",
    "GEORADIUSBYMEMBER Sicily Palermo 300 km WITHDIST",
    "GEORADIUSBYMEMBER Sicily Nowhere 300 km",
    "GEORADIUSBYMEMBER nokey Nowhere x y WITHDIST",
    "GEORADIUSBYMEMBER_RO Sicily Catania 100 mi WITHCOORD",
    "GEOSEARCH Sicily FROMLONLAT 15 37 BYBOX 400 400 km ASC WITHDIST",
    "GEOSEARCH Sicily FROMMEMBER Palermo BYRADIUS 300 km DESC WITHHASH",
    "GEOSEARCH Sicily FROMMEMBER Nowhere BYRADIUS 300 km",
    "GEOSEARCH Sicily FROMLONLAT 15 37 FROMMEMBER Palermo BYRADIUS 300 km",
    "GEOSEARCH Sicily FROMLONLAT 15 37 BYRADIUS 300 km BYBOX 1 1 km",
    "GEOSEARCH Sicily BYRADIUS 300 km ASC WITHDIST",
    "GEOSEARCH Sicily FROMLONLAT 15 37 ASC",
    "geosearch Sicily FROMLONLAT 15 37 ASC WITHDIST",
    "GEOSEARCH Sicily FROMLONLAT 15 37 BYBOX 1 -1 km",
    "GEOSEARCH Sicily FROMLONLAT 15 37 BYBOX x 1 km",
    "GEOSEARCH Sicily FROMLONLAT 15 37 BYBOX 1 x km",
    "GEOSEARCH Sicily FROMLONLAT 15 37 BYRADIUS 300 km STOREDIST",
    "GEOSEARCH Sicily FROMLONLAT 15 37 BYRADIUS 300 km STORE x",
    "GEOSEARCH nokey FROMMEMBER x BYRADIUS 1 km",
    "GEOSEARCHSTORE dst Sicily FROMLONLAT 15 37 BYRADIUS 300 km",
    "ZRANGE dst 0 -1 WITHSCORES",
    "GEOSEARCHSTORE dst Sicily FROMLONLAT 15 37 BYRADIUS 300 km STOREDIST COUNT 2",
    "ZRANGE dst 0 -1 WITHSCORES",
    "GEOSEARCHSTORE dst Sicily FROMLONLAT 15 37 BYRADIUS 300 km WITHDIST",
    "GEOSEARCHSTORE dst Sicily FROMLONLAT 0 0 BYRADIUS 1 km",
    "EXISTS dst",
    "SET str x",
    "GEOADD str 1 1 a",
    "GEOPOS str a",
    "GEOSEARCH str FROMLONLAT 1 1 BYRADIUS 1 km",
    "GEORADIUS str 1 1 1 km",
    "GEODIST str a b",
    "PFADD hll",
    "GET hll",
    "PFCOUNT hll",
    "PFADD hll a b c",
    "PFADD hll a b c",
    "GET hll",
    "PFCOUNT hll",
    "GET hll",
    "PFADD hll2 c d e f",
    "PFMERGE hll3 hll hll2",
    "GET hll3",
    "PFCOUNT hll hll2",
    "PFCOUNT hll hll2 nokey",
    "PFCOUNT nokey",
    "PFDEBUG DECODE hll",
    "PFDEBUG ENCODING hll",
    "PFDEBUG TODENSE hll",
    "PFDEBUG TODENSE hll",
    "PFDEBUG ENCODING hll",
    "PFDEBUG DECODE hll",
    "PFCOUNT hll",
    "PFDEBUG NOSUCH hll",
    "PFDEBUG ENCODING nokey",
    "PFMERGE hll4 hll hll2",
    "PFCOUNT hll4",
    "PFDEBUG ENCODING hll4",
    "PFADD str a",
    "PFCOUNT str",
    "PFCOUNT hll str",
    "PFMERGE hll str",
    "PFMERGE str hll",
    "PFDEBUG GETREG str",
    "LPUSH list a",
    "PFADD list a",
    "PFCOUNT list",
    "SET fake HYLLxxxxxxxxxxxxxxxxxx",
    "PFCOUNT fake",
    "SET short HYL",
    "PFADD short a",
];

#[test]
fn geo_and_hll_replies_match_redis() {
    let Some(mut b) = both() else { return };
    for line in SCRIPT {
        b.same(&words(line), "script");
    }
}

#[test]
fn corrupt_hll_values_answer_like_redis() {
    let Some(mut b) = both() else { return };
    let lines = [
        // Extra bytes at the tail of a sparse value.
        "DEL h",
        "PFADD h a b c",
        "APPEND h hello",
        "PFCOUNT h",
        "PFADD h x",
        // Broken magic, unknown encoding, a dense header on a sparse length.
        "DEL h",
        "PFADD h a b c",
        "SETRANGE h 0 0123",
        "PFCOUNT h",
        "DEL h",
        "PFADD h a b c",
        "SETRANGE h 4 x",
        "PFCOUNT h",
    ];
    for l in lines {
        b.same(&words(l), "corrupt");
    }
    // A dense header on a sparse value: encoding byte 0.
    b.same(&["DEL", "h"], "dense header");
    b.same(&["PFADD", "h", "a"], "dense header");
    b.same(&["SETRANGE", "h", "4", "\0"], "dense header");
    b.same(&["PFCOUNT", "h"], "dense header");
    // Random byte corruptions: the same reply each time (or both errors of the same kind), never a crash.
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed());
    for round in 0..300 {
        b.same(&["DEL", "h"], "fuzz");
        let n = rng.gen_range(0..400);
        let items: Vec<String> = (0..n).map(|_| rng.gen::<u32>().to_string()).collect();
        let mut add = vec!["PFADD", "h"];
        add.extend(items.iter().map(|s| s.as_str()));
        b.same(&add, "fuzz");
        let Resp::Int(len) = b.same(&["STRLEN", "h"], "fuzz") else { panic!("STRLEN") };
        for _ in 0..rng.gen_range(1..4) {
            let pos = rng.gen_range(0..len).to_string();
            // Printable bytes, so the raw client can send them as text.
            let byte = (rng.gen_range(0x21u8..0x7f) as char).to_string();
            b.same(&["SETRANGE", "h", &pos, &byte], "fuzz");
        }
        let context = format!("fuzz round {round}");
        b.same(&["PFCOUNT", "h"], &context);
        // Redis keeps the registers a failing PFADD changed before it met the corruption; ShaleDB writes
        // nothing on an error: the values are compared only after a PFADD that succeeded.
        if !matches!(b.same(&["PFADD", "h", "extra1", "extra2"], &context), Resp::Error(_)) {
            b.same(&["GET", "h"], &context);
        }
    }
}

fn seed() -> u64 {
    let s = std::env::var("SHALEDB_DIFF_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(1)
    });
    eprintln!("SHALEDB_DIFF_SEED={s}");
    s
}

/// Random PFADD/PFCOUNT/PFMERGE sequences: replies and the stored strings byte for byte (sparse opcodes,
/// promotion to dense, cache bytes).
#[test]
fn hll_random_sequences_match_redis() {
    let Some(mut b) = both() else { return };
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed());
    let keys = ["h1", "h2", "h3", "h4"];
    for step in 0..1500 {
        let ctx = format!("hll step {step}");
        let k = keys[rng.gen_range(0..keys.len())];
        match rng.gen_range(0..10) {
            0..=4 => {
                let n = if rng.gen_bool(0.1) { rng.gen_range(0..1500) } else { rng.gen_range(0..20) };
                let items: Vec<String> = (0..n).map(|_| format!("e{}", rng.gen_range(0..50_000))).collect();
                let mut args = vec!["PFADD", k];
                args.extend(items.iter().map(|s| s.as_str()));
                b.same(&args, &ctx);
            }
            5 | 6 => {
                let n = rng.gen_range(1..4);
                let mut args = vec!["PFCOUNT"];
                for _ in 0..n {
                    args.push(keys[rng.gen_range(0..keys.len())]);
                }
                b.same(&args, &ctx);
            }
            7 => {
                let mut args = vec!["PFMERGE", k];
                for _ in 0..rng.gen_range(0..3) {
                    args.push(keys[rng.gen_range(0..keys.len())]);
                }
                b.same(&args, &ctx);
            }
            8 => {
                b.same(&["PFDEBUG", "ENCODING", k], &ctx);
            }
            _ => {
                if rng.gen_bool(0.1) {
                    b.same(&["DEL", k], &ctx);
                }
            }
        }
        b.same(&["GET", k], &ctx);
    }
}

fn coord(rng: &mut impl Rng, lo: f64, hi: f64) -> String {
    format!("{:.6}", rng.gen_range(lo..hi))
}

/// Random places and searches: GEOADD, GEOHASH, GEOPOS, GEODIST, GEOSEARCH (circle and box, orders, COUNT,
/// ANY, the WITH* options), GEORADIUS and GEOSEARCHSTORE, compared exactly.
#[test]
fn geo_random_searches_match_redis() {
    let Some(mut b) = both() else { return };
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed());
    for round in 0..40 {
        b.same(&["DEL", "pts", "dst"], "reset");
        // A cluster around a random centre, so searches find something, plus a few anywhere.
        let (clon, clat): (f64, f64) = (rng.gen_range(-179.0..179.0), rng.gen_range(-84.0..84.0));
        let spread: f64 = [0.01, 0.5, 5.0][rng.gen_range(0..3)];
        let mut names = Vec::new();
        let mut args: Vec<String> = vec!["GEOADD".into(), "pts".into()];
        for j in 0..rng.gen_range(1..120) {
            let (lon, lat) = if rng.gen_bool(0.9) {
                (
                    (clon + rng.gen_range(-spread..spread)).clamp(-180.0, 180.0),
                    (clat + rng.gen_range(-spread..spread)).clamp(-85.05, 85.05),
                )
            } else {
                (rng.gen_range(-180.0..180.0), rng.gen_range(-85.05..85.05))
            };
            args.push(format!("{lon:.6}"));
            args.push(format!("{lat:.6}"));
            let name = format!("p{j}");
            args.push(name.clone());
            names.push(name);
        }
        let refs: Vec<&str> = args.iter().map(|s| s.as_str()).collect();
        let ctx = format!("geo round {round}");
        b.same(&refs, &ctx);
        b.same(&["ZRANGE", "pts", "0", "-1", "WITHSCORES"], &ctx);
        let mut q: Vec<&str> = vec!["GEOHASH", "pts"];
        q.extend(names.iter().map(|s| s.as_str()));
        q.push("missing");
        b.same(&q, &ctx);
        q[0] = "GEOPOS";
        b.same(&q, &ctx);
        for _ in 0..10 {
            let (a, c) = (&names[rng.gen_range(0..names.len())], &names[rng.gen_range(0..names.len())]);
            let unit = ["m", "km", "mi", "ft"][rng.gen_range(0..4)];
            b.same(&["GEODIST", "pts", a, c, unit], &ctx);
        }
        for _ in 0..25 {
            let mut s: Vec<String> = vec!["GEOSEARCH".into(), "pts".into()];
            if rng.gen_bool(0.5) {
                s.extend(["FROMMEMBER".into(), names[rng.gen_range(0..names.len())].clone()]);
            } else {
                s.extend([
                    "FROMLONLAT".into(),
                    coord(&mut rng, (clon - spread).max(-180.0), (clon + spread).min(180.0)),
                    coord(&mut rng, (clat - spread).max(-85.0), (clat + spread).min(85.0)),
                ]);
            }
            let km = spread * 111.0;
            if rng.gen_bool(0.5) {
                s.extend(["BYRADIUS".into(), format!("{:.3}", rng.gen_range(0.0..km * 2.0)), "km".into()]);
            } else {
                s.extend([
                    "BYBOX".into(),
                    format!("{:.3}", rng.gen_range(0.0..km * 3.0)),
                    format!("{:.3}", rng.gen_range(0.0..km * 3.0)),
                    "km".into(),
                ]);
            }
            match rng.gen_range(0..3) {
                0 => s.push("ASC".into()),
                1 => s.push("DESC".into()),
                _ => {}
            }
            // COUNT without ASC/DESC sorts too (and ANY keeps the scan order): only with an order the
            // result is independent of ties.
            if rng.gen_bool(0.3) {
                s.extend(["COUNT".into(), rng.gen_range(1..10).to_string()]);
                if rng.gen_bool(0.3) {
                    s.push("ANY".into());
                }
            }
            for w in ["WITHDIST", "WITHHASH", "WITHCOORD"] {
                if rng.gen_bool(0.4) {
                    s.push(w.into());
                }
            }
            let refs: Vec<&str> = s.iter().map(|x| x.as_str()).collect();
            b.same(&refs, &ctx);
            // The same search stored, and the result read back.
            let mut st: Vec<String> = vec!["GEOSEARCHSTORE".into(), "dst".into()];
            st.extend(s[1..].iter().filter(|w| !w.starts_with("WITH")).cloned());
            if rng.gen_bool(0.5) {
                st.push("STOREDIST".into());
            }
            let refs: Vec<&str> = st.iter().map(|x| x.as_str()).collect();
            b.same(&refs, &ctx);
            b.same(&["ZRANGE", "dst", "0", "-1", "WITHSCORES"], &ctx);
        }
        let r = format!("{:.3}", rng.gen_range(0.0..spread * 300.0));
        let lon = format!("{clon:.6}");
        let lat = format!("{clat:.6}");
        b.same(&["GEORADIUS", "pts", &lon, &lat, &r, "km", "WITHDIST", "ASC"], &ctx);
        b.same(&["GEORADIUS_RO", "pts", &lon, &lat, &r, "km", "WITHCOORD", "DESC", "COUNT", "5"], &ctx);
        b.same(&["GEORADIUSBYMEMBER", "pts", &names[0], &r, "km", "STOREDIST", "dst"], &ctx);
        b.same(&["ZRANGE", "dst", "0", "-1", "WITHSCORES"], &ctx);
    }
}

/// Without a redis-server: the replies the TCL unit checks, a write through the cache, PFCOUNT's cache bytes
/// and values that survive a restart.
#[test]
fn hll_and_geo_survive_a_restart() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cfg = || Config { dir: dir.path().join("db"), port: 0, bind: "127.0.0.1".into(), ..Config::default() };
    let server = RunningServer::start(cfg()).expect("start");
    let mut c = Client::connect(server.addr());
    assert_eq!(c.cmd(&["PFADD", "h", "a", "b", "c"]), Resp::Int(1));
    assert_eq!(c.cmd(&["PFCOUNT", "h"]), Resp::Int(3));
    // PFCOUNT stored the estimate in the cache: the last cache byte has its "stale" bit clear.
    assert_eq!(c.cmd(&["GETRANGE", "h", "15", "15"]), Resp::Bulk(vec![0]));
    assert_eq!(c.cmd(&["PFADD", "h", "a", "b", "c"]), Resp::Int(0));
    assert_eq!(c.cmd(&["GETRANGE", "h", "15", "15"]), Resp::Bulk(vec![0]));
    assert_eq!(c.cmd(&["PFADD", "h", "1", "2", "3"]), Resp::Int(1));
    assert_eq!(c.cmd(&["GETRANGE", "h", "15", "15"]), Resp::Bulk(vec![0x80]));
    assert_eq!(c.cmd(&["GEOADD", "g", "13.361389", "38.115556", "Palermo"]), Resp::Int(1));
    assert_eq!(c.cmd(&["EXPIRE", "h", "1000"]), Resp::Int(1));
    assert_eq!(c.cmd(&["PFADD", "h", "more"]), Resp::Int(1));
    drop(c);
    server.shutdown().expect("shutdown");
    let server = RunningServer::start(cfg()).expect("restart");
    let mut c = Client::connect(server.addr());
    assert_eq!(c.cmd(&["PFCOUNT", "h"]), Resp::Int(7));
    let Resp::Int(ttl) = c.cmd(&["TTL", "h"]) else { panic!("TTL") };
    assert!(ttl > 900, "PFADD kept the expiry: {ttl}");
    assert_eq!(c.cmd(&["GEOHASH", "g", "Palermo"]), Resp::Array(vec![Resp::Bulk(b"sqc8b49rny0".to_vec())]));
    assert_eq!(c.cmd(&["PFDEBUG", "GETREG", "h"]).array().len(), 16384);
    assert_eq!(c.cmd(&["PFDEBUG", "ENCODING", "h"]), Resp::Simple("dense".into()));
    drop(c);
    server.shutdown().expect("shutdown");
}
