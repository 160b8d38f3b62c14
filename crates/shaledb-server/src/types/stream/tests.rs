//! Unit tests of the stream storage (`types::stream`), over a commit-thread context on a temporary database.

use super::*;
use crate::types::testing::{group, temp_db};

fn pairs(xs: &[&str]) -> Vec<Bytes> {
    xs.iter().map(|x| Bytes::copy_from_slice(x.as_bytes())).collect()
}

fn id(ms: u64, seq: u64) -> Id {
    Id { ms, seq }
}

/// Adds the entries `ms-0` for each `ms` of `mss` to the stream `key`, each with the pair `n <ms>`.
fn fill(ctx: &mut WriteCtx<'_>, key: &[u8], mss: std::ops::RangeInclusive<u64>) {
    for ms in mss {
        add(ctx, key, NewId::Exact(id(ms, 0)), &pairs(&["n", &ms.to_string()]), false, None).unwrap();
    }
}

/// The ids of the whole stream `key`, in order.
fn ids(ctx: &WriteCtx<'_>, key: &[u8]) -> Vec<Id> {
    let v = ctx.view();
    let c = get(&v, key).unwrap().unwrap();
    range(&v, &c, Id::default(), Id::MAX, false, None).unwrap().into_iter().map(|e| e.id).collect()
}

#[test]
fn entries_round_trip() {
    let pairs = vec![Bytes::from("f"), Bytes::from(""), Bytes::from("g"), Bytes::from(vec![0u8; 300])];
    let v = encode_entry(7, &pairs).unwrap();
    assert_eq!(entry_node(&v).unwrap(), 7);
    assert_eq!(decode_entry(&v).unwrap(), pairs);
    assert_eq!(decode_entry(&v[..v.len() - 1]), Err(Error::Corrupt));
    assert_eq!(decode_entry(&[0u8; 5]), Err(Error::Corrupt));
}

#[test]
fn header_round_trips() {
    let mut c = Coll::new(Type::Stream, 3);
    let h = Header {
        last: Id { ms: 9, seq: 2 },
        max_deleted: Id { ms: 4, seq: 1 },
        entries_added: 12,
        tail_node: 1,
        tail_fill: 2,
    };
    h.store(&mut c);
    let d = Coll::decode(&c.encode()).unwrap().unwrap();
    assert_eq!(Header::of(&d), h);
}

#[test]
fn ids_grow_and_smaller_ones_are_refused() {
    let (_dir, db) = temp_db();
    let mut ctx = group(&db);
    ctx.begin(1000);
    let f = pairs(&["f", "v"]);
    assert_eq!(add(&mut ctx, b"s", NewId::Auto, &f, true, None).unwrap(), None, "NOMKSTREAM on no stream");
    assert_eq!(add(&mut ctx, b"s", NewId::Auto, &f, false, None).unwrap(), Some(id(1000, 0)));
    assert_eq!(add(&mut ctx, b"s", NewId::Auto, &f, false, None).unwrap(), Some(id(1000, 1)));
    assert_eq!(add(&mut ctx, b"s", NewId::Ms(1000), &f, false, None).unwrap(), Some(id(1000, 2)));
    assert_eq!(add(&mut ctx, b"s", NewId::Ms(999), &f, false, None), Err(Error::IdTooSmall));
    assert_eq!(add(&mut ctx, b"s", NewId::Exact(id(1000, 2)), &f, false, None), Err(Error::IdTooSmall));
    assert_eq!(add(&mut ctx, b"s", NewId::Exact(id(5000, 7)), &f, false, None).unwrap(), Some(id(5000, 7)));
    assert_eq!(add(&mut ctx, b"s", NewId::Exact(Id::MAX), &f, false, None).unwrap(), Some(Id::MAX));
    assert_eq!(add(&mut ctx, b"s", NewId::Auto, &f, false, None), Err(Error::IdsExhausted));
    assert_eq!(
        Error::IdTooSmall.to_string(),
        "The ID specified in XADD is equal or smaller than the target stream top item"
    );
    let v = ctx.view();
    let c = get(&v, b"s").unwrap().unwrap();
    let h = Header::of(&c);
    assert_eq!((c.size, h.last, h.entries_added), (5, Id::MAX, 5));
    let (first, last) = edges(&v, &c).unwrap();
    assert_eq!(first, Some(Entry { id: id(1000, 0), pairs: f.clone() }));
    assert_eq!(last.map(|e| e.id), Some(Id::MAX));
}

#[test]
fn deletes_keep_the_stream_and_raise_max_deleted() {
    let (_dir, db) = temp_db();
    let mut ctx = group(&db);
    fill(&mut ctx, b"s", 1..=3);
    assert_eq!(delete(&mut ctx, b"s", &[id(2, 0), id(9, 0)]).unwrap(), 1);
    assert_eq!(ids(&ctx, b"s"), [id(1, 0), id(3, 0)]);
    assert_eq!(delete(&mut ctx, b"s", &[id(1, 0), id(3, 0)]).unwrap(), 2);
    let c = get_mut(&mut ctx, b"s").unwrap().expect("an emptied stream is kept");
    let h = Header::of(&c);
    assert_eq!((c.size, h.last, h.max_deleted), (0, id(3, 0), id(3, 0)));
    assert_eq!(delete(&mut ctx, b"missing", &[id(1, 0)]).unwrap(), 0);
}

#[test]
fn ranges_and_reads_follow_the_ids() {
    let (_dir, db) = temp_db();
    let mut ctx = group(&db);
    fill(&mut ctx, b"s", 1..=5);
    let v = ctx.view();
    let c = get(&v, b"s").unwrap().unwrap();
    let got = |es: Vec<Entry>| es.into_iter().map(|e| e.id.ms).collect::<Vec<_>>();
    assert_eq!(got(range(&v, &c, id(2, 0), id(4, 0), false, None).unwrap()), [2, 3, 4]);
    assert_eq!(got(range(&v, &c, id(2, 0), id(4, 0), true, Some(2)).unwrap()), [4, 3]);
    assert_eq!(got(read_after(&v, &c, id(3, 0), 0).unwrap()), [4, 5]);
    assert_eq!(got(read_after(&v, &c, id(0, 0), 2).unwrap()), [1, 2]);
    assert!(read_after(&v, &c, Id::MAX, 0).unwrap().is_empty());
    assert_eq!(last_id(&v, b"s").unwrap(), id(5, 0));
    assert_eq!(last_id(&v, b"missing").unwrap(), Id::default());
}

#[test]
fn exact_trims_remove_entries_and_approximate_ones_whole_nodes() {
    let (_dir, db) = temp_db();
    let mut ctx = group(&db);
    let f = pairs(&["f", "v"]);
    // 250 entries: nodes 0 and 1 hold 100 each, node 2 holds 50.
    fill(&mut ctx, b"s", 1..=250);
    let approx = |m| Trim { threshold: Threshold::MaxLen(m), approx: true, limit: 100 * NODE_MAX_ENTRIES };
    // Removing node 0 would leave 150 < 160: nothing goes.
    assert_eq!(trim(&mut ctx, b"s", approx(160)).unwrap(), 0);
    assert_eq!(trim(&mut ctx, b"s", approx(120)).unwrap(), 100);
    assert_eq!(ids(&ctx, b"s").first(), Some(&id(101, 0)));
    let exact = Trim { threshold: Threshold::MinId(id(140, 0)), approx: false, limit: 0 };
    assert_eq!(trim(&mut ctx, b"s", exact).unwrap(), 39);
    assert_eq!(get_mut(&mut ctx, b"s").unwrap().unwrap().size, 111);
    let exact = Trim { threshold: Threshold::MaxLen(0), approx: false, limit: 0 };
    assert_eq!(trim(&mut ctx, b"s", exact).unwrap(), 111);
    assert!(ids(&ctx, b"s").is_empty());
    // An emptied stream starts a fresh node.
    add(&mut ctx, b"s", NewId::Auto, &f, false, None).unwrap();
    let c = get_mut(&mut ctx, b"s").unwrap().unwrap();
    assert_eq!((Header::of(&c).tail_node, Header::of(&c).tail_fill), (3, 1));
}

/// Every record of sub-kind `sub` of the stream `key`.
fn records(ctx: &WriteCtx<'_>, key: &[u8], sub: u8) -> usize {
    let v = ctx.view();
    let c = get(&v, key).unwrap().unwrap();
    v.members(&c, sub, None, false).count()
}

#[test]
fn group_reads_claims_and_acks_keep_the_pel_and_its_index_in_step() {
    use groups::{
        ack, claim, consumer_pending, consumers, create_group, delete_consumer, destroy_group, groups, nack,
        read_group, stream_and_group, Claim, Refused, Start, SUB_CONSUMER, SUB_CONSUMER_PEL, SUB_PEL,
    };
    let (_dir, db) = temp_db();
    let mut ctx = group(&db);
    ctx.begin(5000);
    fill(&mut ctx, b"s", 1..=4);
    assert_eq!(create_group(&mut ctx, b"s", b"g", Start::Id(Id::default()), false, None).unwrap(), Ok(()));
    assert_eq!(create_group(&mut ctx, b"s", b"g", Start::Last, false, None).unwrap(), Err(Refused::Exists));
    assert_eq!(create_group(&mut ctx, b"nos", b"g", Start::Last, false, None).unwrap(), Err(Refused::NoKey));
    let (c, g) = stream_and_group(&mut ctx, b"s", b"g").unwrap().unwrap();
    let got = read_group(&mut ctx, &c, g, b"alice", None, 3, false).unwrap().unwrap();
    assert_eq!(got.iter().map(|d| d.0.ms).collect::<Vec<_>>(), [1, 2, 3]);
    let (c, g) = stream_and_group(&mut ctx, b"s", b"g").unwrap().unwrap();
    assert_eq!((g.last, g.entries_read), (id(3, 0), Some(3)));
    // History: alice's own pending entries after an id, each delivered once more.
    let got = read_group(&mut ctx, &c, g.clone(), b"alice", Some(id(1, 0)), 0, false).unwrap().unwrap();
    assert_eq!(got.iter().map(|d| d.0.ms).collect::<Vec<_>>(), [2, 3]);
    assert_eq!(nack(&ctx.view(), &c, b"g", id(2, 0)).unwrap().unwrap().deliveries, 2);
    // A claim moves one entry to bob: the group PEL keeps 3 entries, the index follows the owner.
    let o = Claim { retry_count: Some(9), ..Claim::default() };
    let claimed = claim(&mut ctx, &c, g.clone(), b"bob", &[id(2, 0), id(4, 0)], o).unwrap();
    assert_eq!(claimed.iter().map(|d| d.0).collect::<Vec<_>>(), [id(2, 0)], "4-0 was never delivered");
    let v = ctx.view();
    assert_eq!(consumer_pending(&v, &c, b"g", b"alice", Id::default(), Id::MAX, 10).unwrap(), [id(1, 0), id(3, 0)]);
    assert_eq!(consumer_pending(&v, &c, b"g", b"bob", Id::default(), Id::MAX, 10).unwrap(), [id(2, 0)]);
    assert_eq!(nack(&v, &c, b"g", id(2, 0)).unwrap().unwrap().deliveries, 9);
    drop(v);
    assert_eq!((records(&ctx, b"s", SUB_PEL), records(&ctx, b"s", SUB_CONSUMER_PEL)), (3, 3));
    assert_eq!(ack(&mut ctx, &c, b"g", &[id(1, 0), id(1, 0), id(9, 0)]).unwrap(), 1);
    assert_eq!(delete_consumer(&mut ctx, &c, b"g", b"alice").unwrap(), Some(1));
    assert_eq!(delete_consumer(&mut ctx, &c, b"g", b"alice").unwrap(), None);
    assert_eq!((records(&ctx, b"s", SUB_PEL), records(&ctx, b"s", SUB_CONSUMER_PEL)), (1, 1));
    assert_eq!(consumers(&ctx.view(), &c, b"g").unwrap().iter().map(|k| &k.name[..]).collect::<Vec<_>>(), [b"bob"]);
    // Destroying the group leaves none of its records; another group's stay.
    create_group(&mut ctx, b"s", b"h", Start::Last, false, None).unwrap().unwrap();
    assert!(destroy_group(&mut ctx, &c, b"g").unwrap());
    assert!(!destroy_group(&mut ctx, &c, b"g").unwrap());
    for sub in [SUB_PEL, SUB_CONSUMER_PEL, SUB_CONSUMER] {
        assert_eq!(records(&ctx, b"s", sub), 0, "sub {sub}");
    }
    assert_eq!(groups(&ctx.view(), &c).unwrap().iter().map(|g| &g.name[..]).collect::<Vec<_>>(), [b"h"]);
}

#[test]
fn entries_read_and_lag_follow_redis_rules() {
    use groups::Counters;
    let g = |last: Id, read: Option<u64>| groups::Group { name: Bytes::from("g"), last, entries_read: read };
    // 5 entries added, none deleted.
    let k = Counters { length: 5, entries_added: 5, last: id(5, 0), max_deleted: Id::default(), first: id(1, 0) };
    assert_eq!(k.lag(&g(Id::default(), None)), Some(5));
    assert_eq!(k.lag(&g(id(1, 0), Some(1))), Some(4));
    assert_eq!(k.distance(id(1, 0)), Some(1));
    assert_eq!(k.distance(id(5, 0)), Some(5));
    assert_eq!(k.distance(id(3, 0)), None, "inside the stream: unknown without reading");
    assert_eq!(k.distance(id(6, 0)), None);
    // 3-0 deleted: a group behind the tombstone has no known lag.
    let k = Counters { length: 4, entries_added: 5, last: id(5, 0), max_deleted: id(3, 0), first: id(1, 0) };
    assert_eq!(k.lag(&g(Id::default(), None)), None);
    assert_eq!(k.lag(&g(id(5, 0), Some(5))), Some(0));
    // An empty stream that had one entry: nothing to read.
    let k = Counters { length: 0, entries_added: 1, last: id(1, 0), max_deleted: id(1, 0), first: Id::default() };
    assert_eq!(k.lag(&g(Id::default(), None)), Some(0));
    let k =
        Counters { length: 0, entries_added: 0, last: Id::default(), max_deleted: Id::default(), first: Id::default() };
    assert_eq!(k.lag(&g(Id::default(), None)), Some(0));
    // ENTRIESREAD set past the entries added (XGROUP CREATE ... ENTRIESREAD 7 on a stream of one entry).
    let k = Counters { length: 1, entries_added: 1, last: id(1, 0), max_deleted: Id::default(), first: id(1, 0) };
    assert_eq!(k.lag(&g(Id::default(), Some(7))), Some(-6));
}
