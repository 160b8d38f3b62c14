//! Tests of `Cursor` and `Iter` over memtables and vector iterators, including a model-based proptest.

use super::{Cursor, Iter, MergingIterator, VecIter};
use crate::memtable::MemTable;
use crate::merge::{MergeOperator, StringAppend, UInt64Add};
use proptest::prelude::*;
use shaledb_format::ikey::{make_internal_key, ValueKind};
use shaledb_format::iter::InternalIterator;
use shaledb_vfs::Error;
use std::collections::BTreeMap;
use std::sync::Arc;

use ValueKind::{Deletion as D, Merge as M, Value as V};

type Op<'a> = (&'a str, u64, ValueKind, &'a str);

struct Setup {
    seq: u64,
    merge: Option<Arc<dyn MergeOperator>>,
    lower: Option<&'static str>,
    upper: Option<&'static str>,
}

impl Setup {
    fn at(seq: u64) -> Setup {
        Setup { seq, merge: Some(Arc::new(StringAppend::default())), lower: None, upper: None }
    }
    fn no_merge(mut self) -> Setup {
        self.merge = None;
        self
    }
    fn bounds(mut self, lower: Option<&'static str>, upper: Option<&'static str>) -> Setup {
        self.lower = lower;
        self.upper = upper;
        self
    }
    /// An iterator over `ops` spread across two memtables (alternating) merged together.
    fn over(&self, ops: &[Op<'_>]) -> Cursor {
        let mems = [Arc::new(MemTable::new(1)), Arc::new(MemTable::new(2))];
        for (i, &(k, seq, kind, v)) in ops.iter().enumerate() {
            mems[i % 2].add(seq, kind, k.as_bytes(), v.as_bytes());
        }
        let children: Vec<Box<dyn InternalIterator>> = mems.iter().map(|m| Box::new(m.iter()) as _).collect();
        self.over_inner(Box::new(MergingIterator::new(children)))
    }
    fn over_inner(&self, inner: Box<dyn InternalIterator>) -> Cursor {
        Cursor::new(
            inner,
            self.seq,
            self.merge.clone(),
            self.lower.map(|s| s.as_bytes().to_vec()),
            self.upper.map(|s| s.as_bytes().to_vec()),
            Box::new(()),
        )
    }
}

fn s(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn forward(it: &mut Cursor) -> Vec<(String, String)> {
    let mut out = Vec::new();
    it.seek_to_first();
    while it.valid() {
        out.push((s(it.key()), s(it.value())));
        it.next();
    }
    it.status().unwrap();
    out
}

fn backward(it: &mut Cursor) -> Vec<(String, String)> {
    let mut out = Vec::new();
    it.seek_to_last();
    while it.valid() {
        out.push((s(it.key()), s(it.value())));
        it.prev();
    }
    it.status().unwrap();
    out.reverse();
    out
}

fn pairs(p: &[(&str, &str)]) -> Vec<(String, String)> {
    p.iter().map(|&(k, v)| (k.to_string(), v.to_string())).collect()
}

/// Both directions must agree with `want`.
fn check(it: &mut Cursor, want: &[(&str, &str)]) {
    assert_eq!(forward(it), pairs(want), "forward");
    assert_eq!(backward(it), pairs(want), "backward");
}

const HISTORY: &[Op<'static>] = &[
    ("a", 1, V, "a1"),
    ("a", 3, V, "a3"),
    ("b", 2, V, "b2"),
    ("b", 4, D, ""),
    ("c", 5, V, "c5"),
    ("d", 1, D, ""),
    ("e", 6, V, "e6"),
    ("e", 7, D, ""),
    ("e", 8, V, "e8"),
];

#[test]
fn snapshot_visibility() {
    check(&mut Setup::at(0).over(HISTORY), &[]);
    check(&mut Setup::at(1).over(HISTORY), &[("a", "a1")]);
    check(&mut Setup::at(2).over(HISTORY), &[("a", "a1"), ("b", "b2")]);
    check(&mut Setup::at(3).over(HISTORY), &[("a", "a3"), ("b", "b2")]);
    check(&mut Setup::at(6).over(HISTORY), &[("a", "a3"), ("c", "c5"), ("e", "e6")]);
    check(&mut Setup::at(7).over(HISTORY), &[("a", "a3"), ("c", "c5")]);
    check(&mut Setup::at(100).over(HISTORY), &[("a", "a3"), ("c", "c5"), ("e", "e8")]);
}

#[test]
fn deletions_hide_everything_below() {
    let ops = [("a", 1, V, "x"), ("a", 2, D, ""), ("b", 3, D, ""), ("c", 4, V, "c"), ("c", 5, D, "")];
    check(&mut Setup::at(10).over(&ops), &[]);
    check(&mut Setup::at(4).over(&ops), &[("c", "c")]);
}

const MERGES: &[Op<'static>] = &[
    ("a", 1, V, "x"),
    ("a", 2, M, "y"),
    ("a", 3, M, "z"),
    ("b", 4, M, "p"),
    ("b", 5, M, "q"),
    ("c", 6, V, "old"),
    ("c", 7, D, ""),
    ("c", 8, M, "m"),
    ("d", 9, M, "n"),
    ("d", 10, V, "put-wins"),
];

#[test]
fn merges_combine_with_the_value_below() {
    let all = [("a", "x,y,z"), ("b", "p,q"), ("c", "m"), ("d", "put-wins")];
    check(&mut Setup::at(100).over(MERGES), &all);
    check(&mut Setup::at(2).over(MERGES), &[("a", "x,y")]);
    check(&mut Setup::at(7).over(MERGES), &[("a", "x,y,z"), ("b", "p,q")]);
    check(&mut Setup::at(9).over(MERGES), &[("a", "x,y,z"), ("b", "p,q"), ("c", "m"), ("d", "n")]);
}

#[test]
fn uint64add_counters() {
    let one = 1u64.to_le_bytes();
    let ten = 10u64.to_le_bytes();
    let m = Arc::new(MemTable::new(1));
    m.add(1, V, b"k", &ten);
    m.add(2, M, b"k", &one);
    m.add(3, M, b"k", &one);
    let mut it = Cursor::new(Box::new(m.iter()), 10, Some(Arc::new(UInt64Add)), None, None, Box::new(()));
    it.seek(b"k");
    assert_eq!(it.value(), 12u64.to_le_bytes());
    it.seek_for_prev(b"k");
    assert_eq!(it.value(), 12u64.to_le_bytes());
}

#[test]
fn merge_without_operator_fails_the_iterator() {
    let mut it = Setup::at(100).no_merge().over(MERGES);
    it.seek_to_first();
    assert!(!it.valid());
    assert!(it.status().unwrap_err().is_invalid_argument());
    // "d" has a value above its operand, so it needs no operator; "c" does.
    it.seek_to_last();
    assert_eq!(it.value(), b"put-wins");
    it.prev();
    assert!(!it.valid());
    assert!(it.status().unwrap_err().is_invalid_argument());
    // Keys without operands are still readable.
    it.seek(b"a");
    assert!(!it.valid());
    let mut it = Setup::at(100).no_merge().over(HISTORY);
    it.seek(b"c");
    assert_eq!(it.key(), b"c");
    it.status().unwrap();
}

#[test]
fn bounds_in_both_directions_and_seeks() {
    let ops: Vec<Op<'_>> =
        ["a", "b", "c", "d", "e", "f"].iter().enumerate().map(|(i, k)| (*k, i as u64 + 1, V, *k)).collect();
    let mut it = Setup::at(100).bounds(Some("b"), Some("e")).over(&ops);
    check(&mut it, &[("b", "b"), ("c", "c"), ("d", "d")]);
    it.seek(b"a");
    assert_eq!(it.key(), b"b");
    it.prev();
    assert!(!it.valid());
    it.seek(b"e");
    assert!(!it.valid());
    it.seek_for_prev(b"z");
    assert_eq!(it.key(), b"d");
    it.next();
    assert!(!it.valid());
    it.seek_for_prev(b"e");
    assert_eq!(it.key(), b"d");
    it.seek_for_prev(b"a");
    assert!(!it.valid());
    it.seek_for_prev(b"c");
    assert_eq!(it.key(), b"c");
    it.prev();
    assert_eq!(it.key(), b"b");
    it.prev();
    assert!(!it.valid());

    let mut only_upper = Setup::at(100).bounds(None, Some("c")).over(&ops);
    check(&mut only_upper, &[("a", "a"), ("b", "b")]);
    let mut only_lower = Setup::at(100).bounds(Some("dd"), None).over(&ops);
    check(&mut only_lower, &[("e", "e"), ("f", "f")]);
    let mut empty = Setup::at(100).bounds(Some("c"), Some("c")).over(&ops);
    check(&mut empty, &[]);
}

#[test]
fn seek_for_prev_lands_on_live_keys() {
    let mut it = Setup::at(100).over(HISTORY);
    it.seek_for_prev(b"c");
    assert_eq!((it.key(), it.value()), (&b"c"[..], &b"c5"[..]));
    it.seek_for_prev(b"bz");
    assert_eq!(it.key(), b"a");
    it.seek_for_prev(b"b"); // deleted
    assert_eq!((it.key(), it.value()), (&b"a"[..], &b"a3"[..]));
    it.next();
    assert_eq!(it.key(), b"c");
    it.seek(b"b");
    assert_eq!(it.key(), b"c");
    it.seek(b"d");
    assert_eq!((it.key(), it.value()), (&b"e"[..], &b"e8"[..]));
    it.seek_for_prev(b"0");
    assert!(!it.valid());
    assert_eq!(it.key(), b"");
}

#[test]
fn direction_switches_across_hidden_and_merged_keys() {
    let mut ops: Vec<Op<'_>> = HISTORY.to_vec();
    ops.extend_from_slice(&[("bb", 20, M, "o1"), ("bb", 21, M, "o2"), ("f", 22, V, "f")]);
    let mut it = Setup::at(100).over(&ops);
    let want = ["a", "bb", "c", "e", "f"];
    it.seek_to_first();
    // Forward two, back one, repeatedly; also a prev right after a merged key.
    let mut i = 0usize;
    for step in 0..12 {
        assert!(it.valid(), "step {step}");
        assert_eq!(s(it.key()), want[i], "step {step}");
        if step % 3 == 2 {
            it.prev();
            i -= 1;
        } else {
            it.next();
            i += 1;
        }
        if i == want.len() {
            assert!(!it.valid());
            break;
        }
    }
    it.seek(b"bb");
    assert_eq!(it.value(), b"o1,o2");
    it.prev();
    assert_eq!(it.key(), b"a");
    it.next();
    assert_eq!((it.key(), it.value()), (&b"bb"[..], &b"o1,o2"[..]));
    it.next();
    assert_eq!(it.key(), b"c");
    it.prev();
    assert_eq!((it.key(), it.value()), (&b"bb"[..], &b"o1,o2"[..]));
    it.next();
    assert_eq!(it.key(), b"c");
}

#[test]
fn inner_error_surfaces_in_status() {
    let entries: Vec<(Vec<u8>, Vec<u8>)> =
        ["a", "b", "c"].iter().map(|k| (make_internal_key(k.as_bytes(), 1, V), k.as_bytes().to_vec())).collect();
    let mut it = Setup::at(10).over_inner(Box::new(VecIter::failing_at(entries.clone(), 2)));
    it.seek_to_first();
    assert_eq!(it.key(), b"a");
    it.next();
    assert_eq!(it.key(), b"b");
    it.next();
    assert!(!it.valid());
    assert!(it.status().unwrap_err().is_corruption());
    let mut it = Setup::at(10).over_inner(Box::new(VecIter::failing_at(entries, 2)));
    it.seek_to_last();
    assert!(!it.valid());
    assert!(it.status().unwrap_err().is_corruption());
}

#[test]
fn unparseable_internal_key_is_corruption() {
    let mut bad = make_internal_key(b"b", 1, V);
    let n = bad.len();
    bad[n - 8] = 0x7f;
    let entries = vec![(make_internal_key(b"a", 1, V), b"a".to_vec()), (bad, b"b".to_vec())];
    let mut it = Setup::at(10).over_inner(Box::new(VecIter::new(entries)));
    it.seek_to_first();
    assert_eq!(it.key(), b"a");
    it.next();
    assert!(!it.valid());
    // The error names where the entry is stored (VecIter: "vec" at the entry's index).
    let at = |e: Error| match e {
        Error::Corruption { file, offset, .. } => (file, offset),
        other => panic!("expected corruption, got {other}"),
    };
    assert_eq!(at(it.status().unwrap_err()), ("vec".into(), 1));
    it.seek_to_last();
    assert!(!it.valid());
    assert_eq!(at(it.status().unwrap_err()), ("vec".into(), 1));
}

fn range_over(ops: &[Op<'_>], lower: Option<&'static str>, upper: Option<&'static str>) -> Iter {
    Iter::new(Setup::at(100).bounds(lower, upper).over(ops))
}

fn letters() -> Vec<Op<'static>> {
    ["a", "b", "c", "d", "e"].iter().enumerate().map(|(i, k)| (*k, i as u64 + 1, V, *k)).collect()
}

#[test]
fn range_forward_backward_and_meeting_ends() {
    let keys = |r: Iter| -> Vec<String> { r.map(|x| s(&x.unwrap().0)).collect() };
    assert_eq!(keys(range_over(&letters(), None, None)), ["a", "b", "c", "d", "e"]);
    assert_eq!(keys(range_over(&letters(), Some("b"), Some("e"))), ["b", "c", "d"]);
    let rev: Vec<String> = range_over(&letters(), Some("b"), None).rev().map(|x| s(&x.unwrap().0)).collect();
    assert_eq!(rev, ["e", "d", "c", "b"]);

    for pattern in 0u32..32 {
        // Alternate ends following the bits of `pattern`; every key must come out exactly once.
        let mut r = range_over(&letters(), None, None);
        let (mut front, mut back) = (Vec::new(), Vec::new());
        for bit in 0.. {
            let item = if pattern >> (bit % 5) & 1 == 1 { r.next_back() } else { r.next() };
            match item {
                Some(x) => {
                    let k = s(&x.unwrap().0);
                    if pattern >> (bit % 5) & 1 == 1 {
                        back.push(k)
                    } else {
                        front.push(k)
                    }
                }
                None => break,
            }
        }
        assert!(r.next().is_none() && r.next_back().is_none());
        back.reverse();
        front.extend(back);
        assert_eq!(front, ["a", "b", "c", "d", "e"], "pattern {pattern:05b}");
    }
}

#[test]
fn range_yields_an_error_once() {
    let entries: Vec<(Vec<u8>, Vec<u8>)> =
        ["a", "b", "c"].iter().map(|k| (make_internal_key(k.as_bytes(), 1, V), k.as_bytes().to_vec())).collect();
    let mut r = Iter::new(Setup::at(10).over_inner(Box::new(VecIter::failing_at(entries, 1))));
    assert_eq!(r.next().unwrap().unwrap().0, b"a");
    assert!(r.next().unwrap().unwrap_err().is_corruption());
    assert!(r.next().is_none());
    assert!(r.next_back().is_none());
}

// ---- model-based test ------------------------------------------------------------------------------------

#[derive(Debug, Clone)]
enum Act {
    First,
    Last,
    Seek(u8),
    SeekForPrev(u8),
    Next,
    Prev,
}

fn act() -> impl Strategy<Value = Act> {
    prop_oneof![
        Just(Act::First),
        Just(Act::Last),
        (0u8..10).prop_map(Act::Seek),
        (0u8..10).prop_map(Act::SeekForPrev),
        Just(Act::Next),
        Just(Act::Next),
        Just(Act::Prev),
        Just(Act::Prev),
    ]
}

fn key_of(k: u8) -> Vec<u8> {
    format!("k{k}").into_bytes()
}

/// The expected view: per key, fold the visible writes oldest first the way StringAppend merges them.
fn model(ops: &[(u8, u8, u8)], snapshot: u64, lower: Option<u8>, upper: Option<u8>) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut state: BTreeMap<Vec<u8>, Option<Vec<u8>>> = BTreeMap::new();
    for (i, &(k, kind, v)) in ops.iter().enumerate() {
        if i as u64 + 1 > snapshot {
            break;
        }
        let val = format!("v{v}").into_bytes();
        let slot = state.entry(key_of(k)).or_insert(None);
        *slot = match kind {
            0 => None,
            1 => Some(val),
            _ => Some(match slot.take() {
                Some(mut old) => {
                    old.push(b',');
                    old.extend_from_slice(&val);
                    old
                }
                None => val,
            }),
        };
    }
    state
        .into_iter()
        .filter_map(|(k, v)| v.map(|v| (k, v)))
        .filter(|(k, _)| lower.is_none_or(|l| k.as_slice() >= key_of(l).as_slice()))
        .filter(|(k, _)| upper.is_none_or(|u| k.as_slice() < key_of(u).as_slice()))
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn db_iterator_matches_model(
        ops in prop::collection::vec((0u8..10, 0u8..3, 0u8..100), 0..60),
        snap_frac in 0.0f64..1.2,
        lower in prop::option::of(0u8..10),
        upper in prop::option::of(0u8..10),
        acts in prop::collection::vec(act(), 0..40),
    ) {
        let snapshot = (ops.len() as f64 * snap_frac) as u64;
        let mems = [Arc::new(MemTable::new(1)), Arc::new(MemTable::new(2)), Arc::new(MemTable::new(3))];
        for (i, &(k, kind, v)) in ops.iter().enumerate() {
            let kind = [D, V, M][kind as usize];
            // Spread writes over sources the way memtables and levels hold them: by write order.
            mems[(i * 3) / ops.len().max(1)].add(i as u64 + 1, kind, &key_of(k), format!("v{v}").as_bytes());
        }
        let children: Vec<Box<dyn InternalIterator>> = mems.iter().map(|m| Box::new(m.iter()) as _).collect();
        let mut it = Cursor::new(
            Box::new(MergingIterator::new(children)),
            snapshot,
            Some(Arc::new(StringAppend::default())),
            lower.map(key_of),
            upper.map(key_of),
            Box::new(()),
        );
        let want = model(&ops, snapshot, lower, upper);
        let mut fwd = Vec::new();
        it.seek_to_first();
        while it.valid() {
            fwd.push((it.key().to_vec(), it.value().to_vec()));
            it.next();
        }
        prop_assert_eq!(&fwd, &want);
        let mut back = Vec::new();
        it.seek_to_last();
        while it.valid() {
            back.push((it.key().to_vec(), it.value().to_vec()));
            it.prev();
        }
        back.reverse();
        prop_assert_eq!(&back, &want);

        // Random walk against a cursor into the model.
        let mut pos: Option<usize> = None;
        for a in &acts {
            match a {
                Act::First => { it.seek_to_first(); pos = (!want.is_empty()).then_some(0); }
                Act::Last => { it.seek_to_last(); pos = want.len().checked_sub(1); }
                Act::Seek(k) => {
                    it.seek(key_of(*k));
                    let p = want.partition_point(|(wk, _)| wk.as_slice() < key_of(*k).as_slice());
                    pos = (p < want.len()).then_some(p);
                }
                Act::SeekForPrev(k) => {
                    it.seek_for_prev(key_of(*k));
                    let p = want.partition_point(|(wk, _)| wk.as_slice() <= key_of(*k).as_slice());
                    pos = p.checked_sub(1);
                }
                Act::Next => {
                    it.next();
                    pos = pos.and_then(|p| (p + 1 < want.len()).then_some(p + 1));
                }
                Act::Prev => {
                    it.prev();
                    pos = pos.and_then(|p| p.checked_sub(1));
                }
            }
            prop_assert!(it.status().is_ok());
            match pos {
                Some(p) => {
                    prop_assert!(it.valid(), "after {:?} expected {:?}", a, want[p]);
                    prop_assert_eq!((it.key(), it.value()), (want[p].0.as_slice(), want[p].1.as_slice()));
                }
                None => prop_assert!(!it.valid(), "after {:?} expected invalid", a),
            }
        }

        // The same view through Iter, alternating ends by the walk's actions.
        let mut r = Iter::new(Cursor::new(
            Box::new(MergingIterator::new(mems.iter().map(|m| Box::new(m.iter()) as _).collect())),
            snapshot,
            Some(Arc::new(StringAppend::default())),
            lower.map(key_of),
            upper.map(key_of),
            Box::new(()),
        ));
        let (mut front, mut back) = (Vec::new(), Vec::new());
        let mut i = 0;
        loop {
            let from_back = matches!(acts.get(i % acts.len().max(1)), Some(Act::Prev | Act::Last | Act::SeekForPrev(_)));
            i += 1;
            let item = if from_back { r.next_back() } else { r.next() };
            match item {
                Some(x) => {
                    let x = x.unwrap();
                    if from_back { back.push(x) } else { front.push(x) }
                }
                None => break,
            }
        }
        back.reverse();
        front.extend(back);
        prop_assert_eq!(&front, &want);
    }
}

// ---- range tombstones: cover-skipping merge against a model ------------------------------------------------

fn key2(k: u8) -> Vec<u8> {
    format!("k{k:02}").into_bytes()
}

type Entries = Vec<(Vec<u8>, Vec<u8>)>;

/// One write of the range-deletion model: key, kind (0 deletion, 1 value, 2 merge, 3 range deletion of
/// `[key, key + len)`), value, source (0: a level of files, 1: one table, 2 and 3: memtables), len.
type RdOp = (u8, u8, u8, u8, u8);

/// The expected view of `ops` (sequence `i + 1` each) at `snapshot`, within the bounds.
fn rd_model(ops: &[RdOp], snapshot: u64, lower: Option<u8>, upper: Option<u8>) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut state: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
    for (i, &(k, kind, v, _, len)) in ops.iter().enumerate() {
        if i as u64 + 1 > snapshot {
            break;
        }
        let val = format!("v{v}").into_bytes();
        match kind {
            0 => {
                state.remove(&key2(k));
            }
            1 => {
                state.insert(key2(k), val);
            }
            2 => match state.get_mut(&key2(k)) {
                Some(old) => {
                    old.push(b',');
                    old.extend_from_slice(&val);
                }
                None => {
                    state.insert(key2(k), val);
                }
            },
            _ => state
                .retain(|key, _| !(key.as_slice() >= key2(k).as_slice() && key.as_slice() < key2(k + len).as_slice())),
        }
    }
    state
        .into_iter()
        .filter(|(k, _)| lower.is_none_or(|l| k.as_slice() >= key2(l).as_slice()))
        .filter(|(k, _)| upper.is_none_or(|u| k.as_slice() < key2(u).as_slice()))
        .collect()
}

/// A cursor over `ops` spread over their sources, read at `snapshot`, through the range-deletion filter and a
/// merge that seeks past covered stretches (`skip`) or not.
fn rd_cursor(ops: &[RdOp], snapshot: u64, lower: Option<u8>, upper: Option<u8>, skip: bool) -> Cursor {
    use crate::iter::level::OpenFn;
    use crate::iter::{CoverSkip, LevelIterator, RangeDelFilter, SourceSeqs};
    use crate::range_del::{Fragments, RangeDelView, RangeTombstone};
    use shaledb_format::edit::FileMeta;

    let mut points: [Vec<(Vec<u8>, Vec<u8>)>; 4] = Default::default();
    let mut tombstones: [Vec<RangeTombstone>; 4] = Default::default();
    for (i, &(k, kind, v, src, len)) in ops.iter().enumerate() {
        let seq = i as u64 + 1;
        let src = src as usize % 4;
        match kind {
            3 => tombstones[src].push(RangeTombstone { begin: key2(k), end: key2(k + len), seq }),
            _ => {
                let kind = [D, V, M][kind as usize];
                points[src].push((make_internal_key(&key2(k), seq, kind), format!("v{v}").into_bytes()));
            }
        }
    }
    let mut view = RangeDelView::default();
    for t in &tombstones {
        view.add(Arc::new(Fragments::new(t)));
    }
    let max_seq = |es: &[(Vec<u8>, Vec<u8>)]| {
        es.iter().map(|(k, _)| shaledb_format::ikey::parse(k).unwrap().seq).max().unwrap_or(0)
    };
    // Source 0: a level whose files hold 4 keys each (disjoint, in key order).
    let mut by_file: BTreeMap<u8, Entries> = BTreeMap::new();
    for e in &points[0] {
        let k = shaledb_format::ikey::user_key(&e.0);
        let n: u8 = std::str::from_utf8(&k[1..]).unwrap().parse().unwrap();
        by_file.entry(n / 4).or_default().push(e.clone());
    }
    let mut metas = Vec::new();
    let mut data = Vec::new();
    for (n, mut es) in by_file {
        es.sort_by(|a, b| shaledb_format::ikey::compare(&a.0, &b.0));
        metas.push(Arc::new(FileMeta {
            number: u64::from(n),
            file_size: 1,
            smallest: es[0].0.clone(),
            largest: es[es.len() - 1].0.clone(),
            smallest_seq: 0,
            largest_seq: max_seq(&es),
            num_entries: es.len() as u64,
            num_deletions: 0,
            num_range_deletions: 0,
        }));
        data.push((u64::from(n), es));
    }
    let open: OpenFn = Arc::new(move |f: &FileMeta| {
        let es = data.iter().find(|(n, _)| *n == f.number).unwrap().1.clone();
        Ok(Box::new(VecIter::new(es)) as Box<dyn InternalIterator>)
    });
    let mems = [Arc::new(MemTable::new(1)), Arc::new(MemTable::new(2))];
    for (m, es) in mems.iter().zip(&points[2..]) {
        for (k, v) in es {
            let p = shaledb_format::ikey::parse(k).unwrap();
            m.add(p.seq, p.kind, p.user_key, v);
        }
    }
    let seqs = vec![
        SourceSeqs::Files(metas.clone()),
        SourceSeqs::Max(max_seq(&points[1])),
        SourceSeqs::Max(mems[0].largest_seq()),
        SourceSeqs::Max(mems[1].largest_seq()),
    ];
    let children: Vec<Box<dyn InternalIterator>> = vec![
        Box::new(LevelIterator::new(metas, open)),
        Box::new(VecIter::new(points[1].clone())),
        Box::new(mems[0].iter()),
        Box::new(mems[1].iter()),
    ];
    let mut merged = MergingIterator::new(children);
    if skip {
        merged = merged.with_cover_skip(CoverSkip::new(view.clone(), snapshot, seqs));
    }
    Cursor::new(
        Box::new(RangeDelFilter::new(merged, view, snapshot)),
        snapshot,
        Some(Arc::new(StringAppend::default())),
        lower.map(key2),
        upper.map(key2),
        Box::new(()),
    )
}

fn rd_op() -> impl Strategy<Value = RdOp> {
    // Range deletions often and wide, so stretches of several files and sources are covered.
    (0u8..20, prop_oneof![1 => Just(0u8), 4 => Just(1u8), 1 => Just(2u8), 2 => Just(3u8)], 0u8..100, 0u8..4, 1u8..12)
}

fn rd_act() -> impl Strategy<Value = Act> {
    prop_oneof![
        Just(Act::First),
        Just(Act::Last),
        (0u8..32).prop_map(Act::Seek),
        (0u8..32).prop_map(Act::SeekForPrev),
        Just(Act::Next),
        Just(Act::Next),
        Just(Act::Prev),
        Just(Act::Prev),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    /// Range tombstones over a level of files, a table and two memtables, sources assigned at random (so a
    /// tombstone's own source, older ones and newer ones all hold covered and uncovered entries): a cursor over
    /// the cover-skipping merge reads what the model says, in full scans both ways and in a random walk of
    /// seeks, seek_for_prevs and steps, with and without bounds, at any snapshot; and so does the merge
    /// without skipping.
    #[test]
    fn cover_skipping_merge_matches_model(
        ops in prop::collection::vec(rd_op(), 0..80),
        snap_frac in 0.0f64..1.2,
        lower in prop::option::of(0u8..32),
        upper in prop::option::of(0u8..32),
        acts in prop::collection::vec(rd_act(), 0..40),
    ) {
        let snapshot = (ops.len() as f64 * snap_frac) as u64;
        let want = rd_model(&ops, snapshot, lower, upper);
        for skip in [true, false] {
            let mut it = rd_cursor(&ops, snapshot, lower, upper, skip);
            let mut fwd = Vec::new();
            it.seek_to_first();
            while it.valid() {
                fwd.push((it.key().to_vec(), it.value().to_vec()));
                it.next();
            }
            prop_assert!(it.status().is_ok());
            prop_assert_eq!(&fwd, &want, "forward, skip {}", skip);
            let mut back = Vec::new();
            it.seek_to_last();
            while it.valid() {
                back.push((it.key().to_vec(), it.value().to_vec()));
                it.prev();
            }
            back.reverse();
            prop_assert_eq!(&back, &want, "backward, skip {}", skip);
            let mut pos: Option<usize> = None;
            for a in &acts {
                match a {
                    Act::First => { it.seek_to_first(); pos = (!want.is_empty()).then_some(0); }
                    Act::Last => { it.seek_to_last(); pos = want.len().checked_sub(1); }
                    Act::Seek(k) => {
                        it.seek(key2(*k));
                        let p = want.partition_point(|(wk, _)| wk.as_slice() < key2(*k).as_slice());
                        pos = (p < want.len()).then_some(p);
                    }
                    Act::SeekForPrev(k) => {
                        it.seek_for_prev(key2(*k));
                        let p = want.partition_point(|(wk, _)| wk.as_slice() <= key2(*k).as_slice());
                        pos = p.checked_sub(1);
                    }
                    Act::Next => {
                        it.next();
                        pos = pos.and_then(|p| (p + 1 < want.len()).then_some(p + 1));
                    }
                    Act::Prev => {
                        it.prev();
                        pos = pos.and_then(|p| p.checked_sub(1));
                    }
                }
                prop_assert!(it.status().is_ok());
                match pos {
                    Some(p) => {
                        prop_assert!(it.valid(), "after {:?} expected {:?} (skip {})", a, want[p], skip);
                        prop_assert_eq!((it.key(), it.value()), (want[p].0.as_slice(), want[p].1.as_slice()));
                    }
                    None => prop_assert!(!it.valid(), "after {:?} expected invalid (skip {})", a, skip),
                }
            }
        }
    }
}
