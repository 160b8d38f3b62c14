//! The payload codec: payloads redis-server 7.0.15 wrote (DUMP), round trips of every type, the legacy
//! encodings RESTORE accepts, each way a payload can be wrong, and mutated payloads (never a panic).

use super::*;
use crate::types::stream::{Entry, Id};
use bytes::Bytes;
use proptest::prelude::*;

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
}

fn b(s: &str) -> Vec<u8> {
    s.as_bytes().to_vec()
}

fn read_payload(p: &[u8]) -> Result<Value, Error> {
    verify(p)?;
    decode(p)
}

/// A payload around a hand-made object body (a valid footer).
fn wrap(body: &[u8]) -> Vec<u8> {
    let mut out = body.to_vec();
    out.extend_from_slice(&RDB_VERSION.to_le_bytes());
    let crc = crc64::update(0, &out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

fn sorted<T: Ord + Clone>(v: &[T]) -> Vec<T> {
    let mut v = v.to_vec();
    v.sort();
    v
}

#[test]
fn payloads_written_by_redis_7_0_decode() {
    let got = |hex: &str| read_payload(&unhex(hex)).unwrap();
    assert_eq!(got("00c139300a009d94ea2793fc08b9"), Value::String(b("12345")));
    assert_eq!(
        got("00c31240640a6162636465666768696a61e04e0901696a0a00d485292a1f2eff66"),
        Value::String(b(&"abcdefghij".repeat(10)))
    );
    assert_eq!(
        got("120102151500000005008161028162020101dffb02c12c02ff0a006be158a1e865c788"),
        Value::List(vec![b("a"), b("b"), b("1"), b("-5"), b("300")])
    );
    let Value::Set(s) = got("0b0e02000000030000000100020003000a00a5025ce26d6e4d1b") else { panic!("not a set") };
    assert_eq!(sorted(&s), vec![b("1"), b("2"), b("3")]);
    let Value::Set(s) = got("02030163016101620a00d51bc2f0968e69c3") else { panic!("not a set") };
    assert_eq!(sorted(&s), vec![b("a"), b("b"), b("c")]);
    assert_eq!(
        got("111d1d0000000600816302842d696e660581610283312e35048162020201ff0a0017dce91ab8436c89"),
        Value::ZSet(vec![(b("c"), f64::NEG_INFINITY), (b("a"), 1.5), (b("b"), 2.0)])
    );
    assert_eq!(
        got("10151500000004008266310382763103826632030201ff0a005c5ea813feec1ff5"),
        Value::Hash(vec![(b("f1"), b("v1")), (b("f2"), b("2"))])
    );
    let st = "130110000000000000000100000000000000013f3f000000180002010101010181660200010201000100018176020401030100\
              010101817702040100010101dfff0202018167028178028168028179020801ff02020001010102030103677270010181ffff\
              ffffffffffff010000000000000001000000000000000130b71528a2010000010105616c69636530b71528a2010000010000\
              00000000000100000000000000010a0078b94968950a93df";
    let Value::Stream(s) = got(st) else { panic!("not a stream") };
    let bs = |x: &str| Bytes::copy_from_slice(x.as_bytes());
    assert_eq!(
        s.entries,
        vec![
            Entry { id: Id { ms: 1, seq: 1 }, pairs: vec![bs("f"), bs("v")] },
            Entry { id: Id { ms: 2, seq: 0 }, pairs: vec![bs("g"), bs("x"), bs("h"), bs("y")] },
        ]
    );
    assert_eq!((s.last, s.max_deleted, s.entries_added), (Id { ms: 2, seq: 0 }, Id { ms: 1, seq: 2 }, 3));
    assert_eq!(s.groups.len(), 1);
    let g = &s.groups[0];
    assert_eq!((g.name.as_slice(), g.last, g.entries_read), (&b"grp"[..], Id { ms: 1, seq: 1 }, None));
    assert_eq!(g.pending.len(), 1);
    assert_eq!(
        (g.pending[0].id, g.pending[0].deliveries, g.pending[0].consumer.as_slice()),
        (Id { ms: 1, seq: 1 }, 1, &b"alice"[..])
    );
    assert_eq!(g.consumers.iter().map(|c| c.0.clone()).collect::<Vec<_>>(), vec![b("alice")]);
    // What ShaleDB writes for the same stream reads back the same.
    assert_eq!(read_payload(&encode(&Value::Stream(s.clone()))).unwrap(), Value::Stream(s));
}

fn sample_values() -> Vec<Value> {
    let big = vec![b'q'; 20_000];
    let bs = |x: &[u8]| Bytes::copy_from_slice(x);
    let mut entries = Vec::new();
    for i in 0..250u64 {
        let pairs = if i % 7 == 0 {
            vec![bs(b"other"), bs(format!("{i}").as_bytes())]
        } else {
            vec![bs(b"f"), bs(format!("v{i}").as_bytes()), bs(b"n"), bs(format!("{}", i * 1000).as_bytes())]
        };
        entries.push(Entry { id: Id { ms: 1000 + i / 3, seq: i % 3 }, pairs });
    }
    let last = entries.last().unwrap().id;
    vec![
        Value::String(b("")),
        Value::String(b("-7")),
        Value::String(b("2147483648")),
        Value::String(big.clone()),
        Value::List((0..1000).map(|i| format!("e{i}").into_bytes()).chain([big.clone(), b("42")]).collect()),
        Value::Set(vec![b("1"), b("x"), big.clone()]),
        Value::ZSet(vec![(b("a"), 1.0), (b("b"), f64::INFINITY), (b("c"), -0.5)]),
        Value::Hash(vec![(b("f"), big.clone()), (b("g"), b("12"))]),
        Value::Stream(Box::default()),
        Value::Stream(Box::new(StreamValue {
            entries: entries.clone(),
            last,
            max_deleted: Id { ms: 3, seq: 4 },
            entries_added: 300,
            groups: vec![GroupValue {
                name: b("g1"),
                last: Id { ms: 1001, seq: 0 },
                entries_read: Some(4),
                pending: vec![
                    Pending { id: entries[0].id, delivered_ms: 5, deliveries: 2, consumer: b("bob") },
                    Pending { id: entries[1].id, delivered_ms: 6, deliveries: 1, consumer: b("amy") },
                ],
                consumers: vec![(b("amy"), 9), (b("bob"), 10), (b("cid"), 11)],
            }],
        })),
    ]
}

#[test]
fn every_type_round_trips() {
    for v in sample_values() {
        let p = encode(&v);
        assert_eq!(read_payload(&p).unwrap(), v);
    }
}

#[test]
fn legacy_encodings_are_read() {
    // RDB_TYPE_LIST (plain), with an int8 and an int32 string.
    let body = [&[1u8, 3, 0xc0, 0xff, 0xc2][..], &100000i32.to_le_bytes(), &[1, b'z']].concat();
    assert_eq!(read_payload(&wrap(&body)).unwrap(), Value::List(vec![b("-1"), b("100000"), b("z")]));
    // RDB_TYPE_ZSET with text scores, infinities included.
    let body = [3u8, 3, 1, b'a', 3, b'1', b'.', b'5', 1, b'b', 254, 1, b'c', 255];
    assert_eq!(
        read_payload(&wrap(&body)).unwrap(),
        Value::ZSet(vec![(b("a"), 1.5), (b("b"), f64::INFINITY), (b("c"), f64::NEG_INFINITY)])
    );
    // A zipmap hash.
    let zm = [1u8, 1, b'k', 1, 0, b'v', 0xff];
    let body = [&[9u8, zm.len() as u8][..], &zm].concat();
    assert_eq!(read_payload(&wrap(&body)).unwrap(), Value::Hash(vec![(b("k"), b("v"))]));
    // A quicklist (v1) of one ziplist holding "ab" and 5.
    let zl = [&17u32.to_le_bytes()[..], &14u32.to_le_bytes(), &2u16.to_le_bytes(), &[0, 2, b'a', b'b', 4, 0xf6, 0xff]]
        .concat();
    let body = [&[14u8, 1, zl.len() as u8][..], &zl].concat();
    assert_eq!(read_payload(&wrap(&body)).unwrap(), Value::List(vec![b("ab"), b("5")]));
    // A quicklist (v2) with a plain node.
    let body = [18u8, 1, 1, 3, b'x', b'y', b'z'];
    assert_eq!(read_payload(&wrap(&body)).unwrap(), Value::List(vec![b("xyz")]));
}

#[test]
fn footer_errors() {
    let good = encode(&Value::String(b("hello")));
    assert!(matches!(verify(&good[..9]), Err(Error::VersionOrChecksum)));
    let mut bad = good.clone();
    *bad.last_mut().unwrap() ^= 1;
    assert!(matches!(verify(&bad), Err(Error::VersionOrChecksum)), "checksum");
    let mut newer = good[..good.len() - 10].to_vec();
    newer.extend_from_slice(&11u16.to_le_bytes());
    let crc = crc64::update(0, &newer);
    newer.extend_from_slice(&crc.to_le_bytes());
    assert!(matches!(verify(&newer), Err(Error::VersionOrChecksum)), "version 11");
    let mut older = good[..good.len() - 10].to_vec();
    older.extend_from_slice(&9u16.to_le_bytes());
    let crc = crc64::update(0, &older);
    older.extend_from_slice(&crc.to_le_bytes());
    assert!(verify(&older).is_ok(), "version 9");
}

#[test]
fn bad_bodies_are_refused() {
    let cases: &[(&str, &[u8])] = &[
        ("no type", &[]),
        ("unknown type", &[8, 0]),
        ("module", &[7, 0]),
        ("string past the end", &[0, 20, b'a']),
        ("bad length encoding", &[0, 0x82]),
        ("empty list", &[1, 0]),
        ("empty set", &[2, 0]),
        ("duplicate set member", &[2, 2, 1, b'a', 1, b'a']),
        ("duplicate hash field", &[4, 2, 1, b'a', 1, b'1', 1, b'a', 1, b'2']),
        ("NaN score", &[3, 1, 1, b'a', 253]),
        ("huge count", &[2, 0x81, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]),
        ("lzf lies about its size", &[0, 0xc3, 2, 10, 0, b'a']),
        ("bad quicklist container", &[18, 1, 3, 1, b'a']),
        ("empty plain node", &[18, 1, 1, 0]),
        ("odd hash listpack", &[16, 10, 10, 0, 0, 0, 1, 0, 0x81, b'a', 2, 0xff]),
    ];
    for (what, body) in cases {
        match read_payload(&wrap(body)) {
            Err(Error::BadFormat(_)) => {}
            other => panic!("{what}: {other:?}"),
        }
    }
}

#[test]
fn stream_node_corruptions_are_refused() {
    let Value::Stream(s) = &sample_values()[9] else { panic!("not a stream") };
    let good = encode(&Value::Stream(s.clone()));
    // Entry beyond the last id.
    let mut s2 = (**s).clone();
    s2.last = Id { ms: 1, seq: 0 };
    assert!(matches!(read_payload(&encode(&Value::Stream(Box::new(s2)))), Err(Error::BadFormat(_))));
    // A pending entry whose consumer is not listed.
    let mut s3 = (**s).clone();
    s3.groups[0].consumers.retain(|c| c.0 != b"bob");
    assert!(matches!(read_payload(&encode(&Value::Stream(Box::new(s3)))), Err(Error::BadFormat(_))));
    // No truncation of the body reads as the stream (the footer rebuilt so only the body is wrong; the
    // object may run into the footer, as in Redis).
    let body = &good[..good.len() - 10];
    let whole = Value::Stream(s.clone());
    for cut in 1..body.len() {
        assert!(!matches!(read_payload(&wrap(&body[..cut])), Ok(v) if v == whole), "cut at {cut}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    /// A mutated payload (bytes flipped, the footer recomputed so the body is what gets read) decodes to
    /// some value or to BadFormat, never a panic; what decodes encodes and decodes to itself.
    #[test]
    fn mutated_payloads_never_panic(which in 0usize..10, flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..6), cut in any::<prop::sample::Index>(), truncate in any::<bool>()) {
        let v = &sample_values()[which];
        let p = encode(v);
        let mut body = p[..p.len() - 10].to_vec();
        for (at, x) in &flips {
            let i = at.index(body.len());
            body[i] ^= x;
        }
        if truncate {
            body.truncate(cut.index(body.len() + 1));
        }
        match read_payload(&wrap(&body)) {
            Ok(v2) => prop_assert_eq!(read_payload(&encode(&v2)).unwrap(), v2),
            Err(Error::BadFormat(_)) => {}
            Err(e) => prop_assert!(false, "unexpected error {e:?}"),
        }
    }

    /// Random bytes as a body: an error or a value, never a panic.
    #[test]
    fn random_bodies_never_panic(body in prop::collection::vec(any::<u8>(), 0..300)) {
        let _ = read_payload(&wrap(&body));
    }
}

#[test]
fn values_stored_and_read_back_through_the_engine() {
    use crate::store::ReadCtx;
    use crate::types::testing::{group, temp_db};
    let (_dir, db) = temp_db();
    let values = sample_values();
    {
        let mut ctx = group(&db);
        for (i, v) in values.iter().enumerate() {
            let key = format!("k{i}");
            let expire = (i % 2 == 0).then_some(ctx.now_ms + 100_000);
            restore(&mut ctx, key.as_bytes(), v, expire).unwrap();
        }
        ctx.finish(true).unwrap();
    }
    let r = ReadCtx::new(&db, crate::keys::Keyspace::Ordered, 0, crate::store::now_ms());
    for (i, v) in values.iter().enumerate() {
        let got = read(&r, format!("k{i}").as_bytes()).unwrap().unwrap();
        let norm = |v: &Value| match v.clone() {
            Value::Set(mut s) => {
                s.sort();
                Value::Set(s)
            }
            Value::ZSet(mut z) => {
                z.sort_by(|a, b| a.1.total_cmp(&b.1).then(a.0.cmp(&b.0)));
                Value::ZSet(z)
            }
            Value::Hash(mut h) => {
                h.sort();
                Value::Hash(h)
            }
            Value::Stream(mut s) => {
                for g in &mut s.groups {
                    // Consumers' seen times are not restored (see store.rs).
                    for c in &mut g.consumers {
                        c.1 = 0;
                    }
                }
                Value::Stream(s)
            }
            other => other,
        };
        assert_eq!(norm(&got), norm(v), "k{i}");
        let meta = r.get_meta(format!("k{i}").as_bytes()).unwrap().unwrap().0;
        assert_eq!(meta.expire_at_ms.is_some(), i % 2 == 0, "k{i} expiry");
    }
}

/// A stream payload of RDB version 9 (type 15, no read counters), as Redis 5 DUMPs it: entries 5-0 and
/// 6-0 left of six added (3-0 deleted, then trimmed to two), group `g1` delivered up to 5-0 (four
/// pending entries), group `g2` at 0-0. Redis 7.0 estimates each group's entries-read as it loads it.
#[test]
fn a_legacy_stream_gets_estimated_read_counters() {
    let p = "0f011000000000000000010000000000000000c3404a40571657000000230002010401010184646174610500010301002001\
             0381610204200a0001400a0062600a0002400a0063600a4022018164200a4039200a0065600a0005400a0066200a00ff0206\
             0002026731050004000000000000000100000000000000003ef783437a01000001000000000000000200000000000000003e\
             f783437a01000001000000000000000400000000000000003ef783437a01000001000000000000000500000000000000003e\
             f783437a0100000101036331313ef783437a0100000400000000000000010000000000000000000000000000000200000000\
             0000000000000000000000040000000000000000000000000000000500000000000000000267320000000009003d52ef6867\
             521dfa";
    let Value::Stream(s) = read_payload(&unhex(p)).unwrap() else { panic!("not a stream") };
    assert_eq!(s.entries.iter().map(|e| e.id).collect::<Vec<_>>(), [Id { ms: 5, seq: 0 }, Id { ms: 6, seq: 0 }]);
    assert_eq!((s.last, s.max_deleted, s.entries_added), (Id { ms: 6, seq: 0 }, Id::default(), 2));
    let got: Vec<_> = s.groups.iter().map(|g| (g.name.as_slice(), g.last, g.entries_read)).collect();
    assert_eq!(
        got,
        [
            // Its last id is the first entry's: the count of entries up to it is known.
            (&b"g1"[..], Id { ms: 5, seq: 0 }, Some(1)),
            // Before the first entry: none read.
            (&b"g2"[..], Id::default(), Some(0)),
        ]
    );
    assert_eq!(s.groups[0].pending.len(), 4);
}
