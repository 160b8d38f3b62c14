use super::*;
use shaledb_format::ikey::make_internal_key;

fn collect_forward(it: &mut MemTableIter) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut out = Vec::new();
    it.seek_to_first();
    while it.valid() {
        out.push((it.key().to_vec(), it.value().to_vec()));
        it.next();
    }
    out
}

/// Two threads adding `per_thread` entries each to `m`: thread `t`'s `i`th is key `k{(i * 7919 + t * 13) %
/// 3000:05}` at sequence `1000 + 2i + t`, its value `value(key, seq)`.
fn two_writers(
    m: &Arc<MemTable>,
    per_thread: u64,
    value: fn(&str, u64) -> Vec<u8>,
) -> Vec<std::thread::JoinHandle<()>> {
    (0..2u64)
        .map(|t| {
            let m = Arc::clone(m);
            std::thread::spawn(move || {
                for i in 0..per_thread {
                    let seq = 1000 + i * 2 + t;
                    let key = format!("k{:05}", (i * 7919 + t * 13) % 3000);
                    m.add(seq, ValueKind::Value, key.as_bytes(), &value(&key, seq));
                }
            })
        })
        .collect()
}

/// Waits for the writers, tells the readers to stop, waits for them (a reader's panic fails the test).
fn join_writers_then_readers(
    writers: Vec<std::thread::JoinHandle<()>>,
    stop: &std::sync::atomic::AtomicBool,
    readers: Vec<std::thread::JoinHandle<()>>,
) {
    for w in writers {
        w.join().unwrap();
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for r in readers {
        r.join().unwrap();
    }
}

/// `m.get` with the key's hash computed here.
fn get_into(m: &MemTable, key: &[u8], seq: u64, st: &mut GetState<'_>) {
    m.get(key, shaledb_format::bloom::key_hash(key), seq, st)
}

#[test]
fn ordered_by_user_key_then_newest_first() {
    let m = Arc::new(MemTable::new(7));
    assert!(m.is_empty());
    m.add(1, ValueKind::Value, b"b", b"b1");
    m.add(3, ValueKind::Value, b"a", b"a3");
    m.add(2, ValueKind::Deletion, b"a", b"");
    m.add(4, ValueKind::Merge, b"b", b"m4");
    assert_eq!(m.id(), 7);
    assert_eq!(m.len(), 4);
    assert!(m.approximate_memory_usage() >= 4 * ENTRY_OVERHEAD);
    let got = collect_forward(&mut m.iter());
    let want = vec![
        (make_internal_key(b"a", 3, ValueKind::Value), b"a3".to_vec()),
        (make_internal_key(b"a", 2, ValueKind::Deletion), b"".to_vec()),
        (make_internal_key(b"b", 4, ValueKind::Merge), b"m4".to_vec()),
        (make_internal_key(b"b", 1, ValueKind::Value), b"b1".to_vec()),
    ];
    assert_eq!(got, want);
}

/// Keys around the 8- and 16-byte prefix boundaries (shorter keys, shared prefixes, 0x00 and 0xff
/// bytes) iterate in bytewise order, then newest first.
#[test]
fn prefix_comparison_agrees_with_bytewise_order() {
    let mut keys: Vec<Vec<u8>> = Vec::new();
    for len in [0usize, 1, 7, 8, 9, 15, 16, 17, 24] {
        for fill in [0x00u8, 0x01, 0x7f, 0xff] {
            let mut k = b"key:00000000000000000000".to_vec();
            k.truncate(len);
            keys.push(k.clone());
            if len > 0 {
                k[len - 1] = fill;
                keys.push(k.clone());
                k.push(fill);
                keys.push(k);
            }
        }
    }
    let m = Arc::new(MemTable::new(1));
    for (i, k) in keys.iter().enumerate() {
        m.add(i as u64 + 1, ValueKind::Value, k, b"");
    }
    let got: Vec<(Vec<u8>, u64)> = collect_forward(&mut m.iter())
        .into_iter()
        .map(|(ik, _)| (ikey::user_key(&ik).to_vec(), ikey::trailer(&ik) >> 8))
        .collect();
    let mut want: Vec<(Vec<u8>, u64)> = keys.iter().enumerate().map(|(i, k)| (k.clone(), i as u64 + 1)).collect();
    want.sort_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)));
    assert_eq!(got, want);
}

#[test]
fn iterators_walk_large_tables_both_ways() {
    let m = Arc::new(MemTable::new(1));
    for i in 0..1000u32 {
        m.add(u64::from(i) + 1, ValueKind::Value, format!("k{i:05}").as_bytes(), &i.to_le_bytes());
    }
    let mut it = m.iter();
    let fwd = collect_forward(&mut it);
    assert_eq!(fwd.len(), 1000);
    assert!(fwd.windows(2).all(|w| ikey::compare(&w[0].0, &w[1].0) == Ordering::Less));
    let mut back = Vec::new();
    it.seek_to_last();
    while it.valid() {
        back.push((it.key().to_vec(), it.value().to_vec()));
        it.prev();
    }
    back.reverse();
    assert_eq!(fwd, back);

    // Direction switches in the middle.
    it.seek(&make_internal_key(b"k00500", MAX_SEQUENCE, KIND_FOR_SEEK));
    for _ in 0..20 {
        it.next();
    }
    assert_eq!(ikey::user_key(it.key()), b"k00520");
    it.prev();
    assert_eq!(ikey::user_key(it.key()), b"k00519");
    it.prev();
    it.next();
    assert_eq!(ikey::user_key(it.key()), b"k00519");
    it.seek_for_prev(&make_internal_key(b"k00700x", 0, ValueKind::Deletion));
    assert_eq!(ikey::user_key(it.key()), b"k00700");
    it.next();
    assert_eq!(ikey::user_key(it.key()), b"k00701");
    it.seek(&make_internal_key(b"z", MAX_SEQUENCE, KIND_FOR_SEEK));
    assert!(!it.valid());
    it.seek_for_prev(&make_internal_key(b"a", 0, ValueKind::Deletion));
    assert!(!it.valid());
}

#[test]
fn get_respects_snapshot_and_stops_when_decided() {
    for rep in [MemTableRep::SkipList, MemTableRep::IndexedSkipList, MemTableRep::Vector] {
        get_respects_snapshot_with(rep);
    }
}

fn get_respects_snapshot_with(rep: MemTableRep) {
    let m = &MemTable::with_rep(1, 1 << 16, rep);
    m.add(1, ValueKind::Value, b"k", b"v1");
    m.add(2, ValueKind::Deletion, b"k", b"");
    m.add(3, ValueKind::Value, b"k", b"v3");
    m.add(4, ValueKind::Value, b"k2", b"other");
    let get = |seq| {
        let mut st = GetState::new(b"k", seq, None);
        get_into(m, b"k", seq, &mut st);
        (st.is_done(), st.finish().unwrap())
    };
    assert_eq!(get(0), (false, None));
    assert_eq!(get(1), (true, Some(b"v1".to_vec())));
    assert_eq!(get(2), (true, None));
    assert_eq!(get(10), (true, Some(b"v3".to_vec())));
    let mut st = GetState::new(b"j", 10, None);
    get_into(m, b"j", 10, &mut st);
    assert!(!st.is_done());
}

/// A vector memtable answers as a skiplist one does, both while written (scan, sorted copies) and after
/// it was switched out (sorted once, in place), forward, backward and by seek.
#[test]
fn vector_rep_matches_the_skiplist_before_and_after_it_is_immutable() {
    let skip = Arc::new(MemTable::new(1));
    let vec = Arc::new(MemTable::with_rep(1, 1 << 16, MemTableRep::Vector));
    let indexed = Arc::new(MemTable::with_rep(1, 1 << 16, MemTableRep::IndexedSkipList));
    let mut seq = 0u64;
    // Keys written out of order, several versions each, all kinds.
    for round in 0..3u64 {
        for i in [7u64, 3, 9, 1, 5, 3, 0, 8] {
            seq += 1;
            let kind = match (i + round) % 3 {
                0 => ValueKind::Value,
                1 => ValueKind::Deletion,
                _ => ValueKind::Merge,
            };
            let k = format!("key{i}");
            let v = format!("v{seq}");
            skip.add(seq, kind, k.as_bytes(), v.as_bytes());
            vec.add(seq, kind, k.as_bytes(), v.as_bytes());
            indexed.add(seq, kind, k.as_bytes(), v.as_bytes());
        }
    }
    let check = |stage: &str| {
        assert_eq!(vec.len(), skip.len(), "{stage}");
        assert_eq!(collect_forward(&mut vec.iter()), collect_forward(&mut skip.iter()), "{stage}: forward");
        let back = |m: &Arc<MemTable>| {
            let mut it = m.iter();
            it.seek_to_last();
            let mut out = Vec::new();
            while it.valid() {
                out.push(it.key().to_vec());
                it.prev();
            }
            out
        };
        assert_eq!(back(&vec), back(&skip), "{stage}: backward");
        for i in 0..11u64 {
            let k = format!("key{i}");
            for at in [0, 5, 13, seq] {
                let target = make_internal_key(k.as_bytes(), at, ValueKind::Value);
                let (mut a, mut b) = (vec.iter(), skip.iter());
                a.seek(&target);
                b.seek(&target);
                assert_eq!((a.valid(), a.key()), (b.valid(), b.key()), "{stage}: seek {k}@{at}");
                a.seek_for_prev(&target);
                b.seek_for_prev(&target);
                assert_eq!((a.valid(), a.key()), (b.valid(), b.key()), "{stage}: seek_for_prev {k}@{at}");
                let get = |m: &MemTable| {
                    let mut st = GetState::new(k.as_bytes(), at, None);
                    get_into(m, k.as_bytes(), at, &mut st);
                    (st.is_done(), st.finish().ok())
                };
                assert_eq!(get(&vec), get(&skip), "{stage}: get {k}@{at}");
                assert_eq!(get(&indexed), get(&skip), "{stage}: indexed get {k}@{at}");
            }
        }
    };
    check("appending");
    vec.mark_immutable();
    check("immutable");
    // The first iterator sorted it in place: later ones share that vector.
    match &vec.rep {
        Rep::Vector(v) => assert!(matches!(&*v.state.read(), VecState::Sorted(_))),
        Rep::Skip(_) => unreachable!("built as a vector"),
    }
    check("sorted");
}

#[test]
fn concurrent_adds_from_four_threads() {
    concurrent_adds_with(MemTableRep::SkipList);
}

/// Four threads insert versions of the same keys in an order that differs from their sequence numbers; the
/// point index must still name each key's newest entry.
#[test]
fn concurrent_adds_from_four_threads_indexed() {
    concurrent_adds_with(MemTableRep::IndexedSkipList);
}

fn concurrent_adds_with(rep: MemTableRep) {
    // Fewer under Miri, which runs them a thousand times slower.
    const PER_THREAD: u64 = if cfg!(miri) { 60 } else { 2000 };
    const KEYS: u64 = if cfg!(miri) { 15 } else { 500 };
    let m = Arc::new(MemTable::with_rep(1, 1 << 16, rep));
    let threads: Vec<_> = (0..4u64)
        .map(|t| {
            let m = Arc::clone(&m);
            std::thread::spawn(move || {
                for i in 0..PER_THREAD {
                    let seq = i * 4 + t + 1;
                    let key = format!("key{:04}", i % KEYS);
                    m.add(seq, ValueKind::Value, key.as_bytes(), &seq.to_le_bytes());
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(m.len() as u64, 4 * PER_THREAD);
    let all = collect_forward(&mut m.iter());
    assert_eq!(all.len() as u64, 4 * PER_THREAD);
    assert!(all.windows(2).all(|w| ikey::compare(&w[0].0, &w[1].0) == Ordering::Less));
    for (k, v) in &all {
        let p = ikey::parse(k).unwrap();
        assert_eq!(v.as_slice(), &p.seq.to_le_bytes());
    }
    // Each key's newest write is the one with the largest sequence number.
    for i in 0..KEYS {
        let key = format!("key{i:04}");
        let mut st = GetState::new(key.as_bytes(), MAX_SEQUENCE, None);
        get_into(&m, key.as_bytes(), MAX_SEQUENCE, &mut st);
        let newest = (0..4 * PER_THREAD).filter(|s| (s / 4) % KEYS == i).max().unwrap() + 1;
        assert_eq!(st.finish().unwrap(), Some(newest.to_le_bytes().to_vec()));
    }
}

/// Readers walking and seeking while two threads insert: every entry they reach is complete (its value is
/// its sequence number), in order, and entries present before a walk started are all seen by it.
#[test]
fn readers_see_complete_ordered_entries_while_threads_insert() {
    const BASE: u64 = if cfg!(miri) { 20 } else { 200 };
    const PER_THREAD: u64 = if cfg!(miri) { 80 } else { 5000 };
    let m = Arc::new(MemTable::new(1));
    for i in 0..BASE {
        m.add(i + 1, ValueKind::Value, format!("base{i:04}").as_bytes(), &(i + 1).to_le_bytes());
    }
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writers = two_writers(&m, PER_THREAD, |_, seq| seq.to_le_bytes().to_vec());
    let readers: Vec<_> = (0..2)
        .map(|r| {
            let (m, stop) = (Arc::clone(&m), Arc::clone(&stop));
            std::thread::spawn(move || {
                let mut walks = 0;
                while walks < 3 || !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    walks += 1;
                    let mut it = m.iter();
                    let mut seen = Vec::new();
                    if r == 0 {
                        it.seek_to_first();
                        while it.valid() {
                            seen.push((it.key().to_vec(), it.value().to_vec()));
                            it.next();
                        }
                    } else {
                        it.seek_to_last();
                        while it.valid() {
                            seen.push((it.key().to_vec(), it.value().to_vec()));
                            it.prev();
                        }
                        seen.reverse();
                    }
                    assert!(seen.windows(2).all(|w| ikey::compare(&w[0].0, &w[1].0) == Ordering::Less));
                    for (k, v) in &seen {
                        assert_eq!(v.as_slice(), &ikey::parse(k).unwrap().seq.to_le_bytes());
                    }
                    let base = seen.iter().filter(|(k, _)| ikey::user_key(k).starts_with(b"base")).count();
                    assert_eq!(base as u64, BASE);
                }
            })
        })
        .collect();
    join_writers_then_readers(writers, &stop, readers);
    assert_eq!(m.len() as u64, BASE + 2 * PER_THREAD);
}

#[test]
// The filter has no `unsafe`; 60K inserts and probes take Miri most of an hour.
#[cfg_attr(miri, ignore)]
fn key_filter_has_no_false_negatives_and_rejects_most_absent_keys() {
    let m = MemTable::with_capacity(1, 1 << 20);
    for i in 0..20_000u32 {
        m.add(u64::from(i) + 1, ValueKind::Value, format!("key{i}").as_bytes(), b"v");
    }
    for i in 0..20_000u32 {
        assert!(m.may_contain(shaledb_format::bloom::key_hash(format!("key{i}").as_bytes())), "key{i}");
    }
    let false_pos = (0..20_000u32)
        .filter(|i| m.may_contain(shaledb_format::bloom::key_hash(format!("absent{i}").as_bytes())))
        .count();
    assert!(false_pos < 2_000, "{false_pos} false positives of 20000");
}

#[test]
fn range_tombstones_are_kept_apart_from_the_point_entries() {
    let m = Arc::new(MemTable::new(1));
    assert!(m.range_tombstones().is_none());
    m.add(1, ValueKind::RangeDeletion, b"b", b"d");
    assert!(!m.is_empty(), "a memtable holding only a range tombstone has something to flush");
    assert_eq!((m.len(), m.num_range_deletions()), (0, 1));
    let mut it = m.iter();
    it.seek_to_first();
    assert!(!it.valid(), "no point entry");
    m.add(2, ValueKind::Value, b"c", b"v");
    m.add(3, ValueKind::RangeDeletion, b"a", b"c");
    let f = m.range_tombstones().unwrap();
    assert_eq!(f.covering_seq(b"c", 10), 1);
    assert_eq!(f.covering_seq(b"b", 10), 3);
    assert_eq!(f.covering_seq(b"b", 2), 1);
    assert_eq!(f.covering_seq(b"d", 10), 0);
    // The point lookup itself does not apply them: the read path does (`GetState::cover_with`).
    let mut st = GetState::new(b"c", 10, None);
    get_into(&m, b"c", 10, &mut st);
    assert_eq!(st.finish().unwrap(), Some(b"v".to_vec()));
}

/// An iterator keeps the entries' bytes (the memtable's arena) after the last other reference to the memtable
/// is gone, for both structures, and entries larger than an arena chunk read back whole.
#[test]
fn iterators_outlive_the_memtable_and_its_arena() {
    for rep in [MemTableRep::SkipList, MemTableRep::Vector] {
        let m = Arc::new(MemTable::with_rep(1, 64 << 10, rep));
        let big = vec![0xabu8; 100 << 10];
        for i in 0..500u64 {
            let v = if i == 250 { big.clone() } else { format!("v{i}").into_bytes() };
            m.add(i + 1, ValueKind::Value, format!("k{i:04}").as_bytes(), &v);
        }
        m.mark_immutable();
        let mut it = m.iter();
        drop(m);
        let got = collect_forward(&mut it);
        assert_eq!(got.len(), 500, "{rep:?}");
        for (i, (k, v)) in got.iter().enumerate() {
            assert_eq!(k, &make_internal_key(format!("k{i:04}").as_bytes(), i as u64 + 1, ValueKind::Value));
            let want = if i == 250 { big.clone() } else { format!("v{i}").into_bytes() };
            assert_eq!(v, &want, "{rep:?} entry {i}");
        }
    }
}

/// The point index answers every lookup as the skiplist's descent does: random keys (some sharing long
/// prefixes, so buckets hold several), every kind of entry, read at every sequence number, on a memtable
/// small enough that buckets chain many keys.
#[test]
fn indexed_gets_agree_with_the_descent_at_every_sequence() {
    let plain = MemTable::with_rep(1, 1 << 12, MemTableRep::SkipList);
    let indexed = MemTable::with_rep(1, 1 << 12, MemTableRep::IndexedSkipList);
    let mut x: u64 = 0x2545_F491_4F6C_DD1D;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let n: u64 = if cfg!(miri) { 150 } else { 3000 };
    let key = |r: u64| format!("a-long-shared-prefix-{:03}", r % 211).into_bytes();
    for seq in 1..=n {
        let r = next();
        let kind = match r % 5 {
            0 => ValueKind::Deletion,
            1 => ValueKind::Merge,
            _ => ValueKind::Value,
        };
        let k = key(r >> 8);
        let v = format!("v{seq}");
        plain.add(seq, kind, &k, v.as_bytes());
        indexed.add(seq, kind, &k, v.as_bytes());
    }
    let step = if cfg!(miri) { 37 } else { 7 };
    for i in 0..230u64 {
        let k = key(i);
        for at in (0..=n + 1).step_by(step).chain([n, MAX_SEQUENCE]) {
            let get = |m: &MemTable| {
                let mut st = GetState::new(&k, at, None);
                get_into(m, &k, at, &mut st);
                (st.is_done(), st.finish().ok())
            };
            assert_eq!(get(&indexed), get(&plain), "get {}@{at}", String::from_utf8_lossy(&k));
        }
    }
}

/// Point lookups through the index while two threads insert: every value found is a complete entry of the
/// key asked for, and a key written before the readers started is always found.
#[test]
fn indexed_gets_while_threads_insert() {
    const PER_THREAD: u64 = if cfg!(miri) { 80 } else { 20_000 };
    let m = Arc::new(MemTable::with_rep(1, 1 << 16, MemTableRep::IndexedSkipList));
    for i in 0..100u64 {
        m.add(i + 1, ValueKind::Value, format!("k{i:05}").as_bytes(), format!("k{i:05}@{}", i + 1).as_bytes());
    }
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writers = two_writers(&m, PER_THREAD, |key, seq| format!("{key}@{seq}").into_bytes());
    let readers: Vec<_> = (0..2u64)
        .map(|r| {
            let (m, stop) = (Arc::clone(&m), Arc::clone(&stop));
            std::thread::spawn(move || {
                let mut round = 0u64;
                while round < 3 || !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    round += 1;
                    for i in (r..3000).step_by(7) {
                        let key = format!("k{i:05}");
                        let mut st = GetState::new(key.as_bytes(), MAX_SEQUENCE, None);
                        get_into(&m, key.as_bytes(), MAX_SEQUENCE, &mut st);
                        match st.finish().unwrap() {
                            Some(v) => assert!(v.starts_with(format!("{key}@").as_bytes()), "{key}"),
                            None => assert!(i >= 100, "{key} was written before the readers started"),
                        }
                    }
                }
            })
        })
        .collect();
    join_writers_then_readers(writers, &stop, readers);
    // Each key's newest entry is found at the end.
    for i in 0..3000u64 {
        let key = format!("k{i:05}");
        let newest = (0..2u64)
            .flat_map(|t| {
                (0..PER_THREAD).filter(move |j| (j * 7919 + t * 13) % 3000 == i).map(move |j| 1000 + j * 2 + t)
            })
            .max()
            .or((i < 100).then_some(i + 1));
        let mut st = GetState::new(key.as_bytes(), MAX_SEQUENCE, None);
        get_into(&m, key.as_bytes(), MAX_SEQUENCE, &mut st);
        assert_eq!(st.finish().unwrap(), newest.map(|s| format!("{key}@{s}").into_bytes()), "{key}");
    }
}

/// Entries added in batches (interleaved descents) make the same memtable as entries added one by one:
/// same entries in the same order, same answers to gets, on both skiplist structures; batches hold the same
/// key more than once, deletions, merges and a range tombstone.
#[test]
fn batched_adds_make_the_same_memtable_as_single_adds() {
    for rep in [MemTableRep::SkipList, MemTableRep::IndexedSkipList, MemTableRep::Vector] {
        let one = Arc::new(MemTable::with_rep(1, 1 << 14, rep));
        let many = Arc::new(MemTable::with_rep(1, 1 << 14, rep));
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        let n: u64 = if cfg!(miri) { 120 } else { 4000 };
        let entries: Vec<(u64, ValueKind, Vec<u8>, Vec<u8>)> = (1..=n)
            .map(|seq| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let kind = match x % 7 {
                    0 => ValueKind::Deletion,
                    1 => ValueKind::Merge,
                    2 if seq % 97 == 0 => ValueKind::RangeDeletion,
                    _ => ValueKind::Value,
                };
                let key = format!("key{:04}", (x >> 8) % 500).into_bytes();
                let value =
                    if kind == ValueKind::RangeDeletion { b"key9".to_vec() } else { format!("v{seq}").into_bytes() };
                (seq, kind, key, value)
            })
            .collect();
        for (seq, kind, k, v) in &entries {
            one.add(*seq, *kind, k, v);
        }
        // Batches of varying sizes, up to and past the skiplist's.
        let mut rest = &entries[..];
        let mut size = 1;
        while !rest.is_empty() {
            let take = size.min(rest.len());
            let batch: Vec<(u64, ValueKind, &[u8], &[u8])> =
                rest[..take].iter().map(|(s, k, key, v)| (*s, *k, &key[..], &v[..])).collect();
            many.add_batch(&batch);
            rest = &rest[take..];
            size = size % 19 + 1;
        }
        assert_eq!(many.len(), one.len(), "{rep:?}");
        assert_eq!(many.approximate_memory_usage(), one.approximate_memory_usage(), "{rep:?}");
        assert_eq!((many.largest_seq(), many.num_deletions()), (one.largest_seq(), one.num_deletions()), "{rep:?}");
        assert_eq!(collect_forward(&mut many.iter()), collect_forward(&mut one.iter()), "{rep:?}");
        for i in 0..500u64 {
            let k = format!("key{i:04}");
            for at in [n / 3, n / 2, n, MAX_SEQUENCE] {
                let get = |m: &MemTable| {
                    let mut st = GetState::new(k.as_bytes(), at, None);
                    get_into(m, k.as_bytes(), at, &mut st);
                    (st.is_done(), st.finish().ok())
                };
                assert_eq!(get(&many), get(&one), "{rep:?}: get {k}@{at}");
            }
        }
        let frags = |m: &MemTable| m.range_tombstones().map(|f| format!("{f:?}"));
        assert_eq!(frags(&many), frags(&one), "{rep:?}");
    }
}

/// Four threads add batches whose keys interleave (so splices go stale under each other): every entry lands,
/// in order, and each key's newest entry is found.
#[test]
fn concurrent_batched_adds() {
    for rep in [MemTableRep::SkipList, MemTableRep::IndexedSkipList] {
        const PER_THREAD: u64 = if cfg!(miri) { 48 } else { 4000 };
        const KEYS: u64 = if cfg!(miri) { 15 } else { 700 };
        let m = Arc::new(MemTable::with_rep(1, 1 << 16, rep));
        let threads: Vec<_> = (0..4u64)
            .map(|t| {
                let m = Arc::clone(&m);
                std::thread::spawn(move || {
                    let mut i = 0;
                    while i < PER_THREAD {
                        let n = (1 + (i + t) % 12).min(PER_THREAD - i);
                        let items: Vec<(u64, Vec<u8>)> = (i..i + n)
                            .map(|j| (j * 4 + t + 1, format!("key{:04}", (j * 31 + t * 7) % KEYS).into_bytes()))
                            .collect();
                        let batch: Vec<(u64, ValueKind, &[u8], &[u8])> =
                            items.iter().map(|(seq, k)| (*seq, ValueKind::Value, &k[..], &b"v"[..])).collect();
                        m.add_batch(&batch);
                        i += n;
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(m.len() as u64, 4 * PER_THREAD, "{rep:?}");
        let all = collect_forward(&mut m.iter());
        assert_eq!(all.len() as u64, 4 * PER_THREAD, "{rep:?}");
        assert!(all.windows(2).all(|w| ikey::compare(&w[0].0, &w[1].0) == Ordering::Less), "{rep:?}");
        for key in 0..KEYS {
            let k = format!("key{key:04}");
            let newest = (0..4u64)
                .flat_map(|t| {
                    (0..PER_THREAD).filter(move |j| (j * 31 + t * 7) % KEYS == key).map(move |j| j * 4 + t + 1)
                })
                .max();
            let Some(newest) = newest else { continue };
            let mut it = m.iter();
            it.seek(&make_internal_key(k.as_bytes(), MAX_SEQUENCE, KIND_FOR_SEEK));
            assert_eq!(ikey::parse(it.key()).unwrap().seq, newest, "{rep:?} {k}");
            let mut st = GetState::new(k.as_bytes(), MAX_SEQUENCE, None);
            get_into(&m, k.as_bytes(), MAX_SEQUENCE, &mut st);
            assert_eq!(st.finish().unwrap(), Some(b"v".to_vec()), "{rep:?} {k}");
        }
    }
}
