use super::*;
use crate::compaction::tests::{e, spec, VecIter};
use crate::compaction::{write_sorted_run, OutputSpec, RunContext};
use crate::merge::{MergeOperator, StringAppend};
use crate::range_del::RangeTombstone;
use shaledb_format::ikey::ValueKind::{Deletion as D, Merge as M, Value as V};
use shaledb_format::table::TableReadOptions;
use shaledb_vfs::{Fs, PosixFs, ReadHints, WriteHints};
use std::cell::Cell;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

fn anchors(spec: &[(&str, u64)]) -> Vec<Anchor> {
    spec.iter().map(|(k, s)| Anchor { user_key: k.as_bytes().to_vec(), size: *s }).collect()
}

fn keys(b: &[Vec<u8>]) -> Vec<String> {
    b.iter().map(|k| String::from_utf8_lossy(k).into_owned()).collect()
}

#[test]
fn boundaries_split_the_anchor_sizes_evenly() {
    // Eight blocks of 100 bytes, in two files whose anchors interleave: four pieces of about 200 bytes.
    let a = anchors(&[("b", 100), ("d", 100), ("f", 100), ("h", 100), ("a", 100), ("c", 100), ("e", 100), ("g", 100)]);
    // Cumulative sums pass 200 at "c" (300), 400 at "e" (500), 600 at "g" (700).
    assert_eq!(keys(&choose_boundaries(a.clone(), 4, 1)), ["c", "e", "g"]);
    // At most max_pieces - 1 boundaries; a sum must pass the target, not reach it (400 at "d").
    assert_eq!(keys(&choose_boundaries(a.clone(), 2, 1)), ["e"]);
    // A piece holds at least min_piece_bytes (one output file): 300-byte pieces, so three of them.
    assert_eq!(keys(&choose_boundaries(a.clone(), 8, 300)), ["d", "g"]);
    // One piece, or pieces at least as large as the whole input: no split.
    assert!(choose_boundaries(a.clone(), 1, 1).is_empty());
    assert!(choose_boundaries(a.clone(), 4, 800).is_empty());
    assert!(choose_boundaries(anchors(&[("a", 1000)]), 4, 1).is_empty());
    assert!(choose_boundaries(Vec::new(), 4, 1).is_empty());
}

#[test]
fn boundaries_skip_duplicates_and_never_take_the_last_key() {
    // The same key from several files counts once (as RocksDB dedups), and a huge last block does not make
    // the largest key a boundary: nothing of the inputs lies after it.
    let a = anchors(&[("a", 10), ("a", 10), ("b", 10), ("b", 10), ("z", 1000)]);
    assert!(choose_boundaries(a, 4, 1).is_empty(), "a piece after the last key would be empty");
    let a = anchors(&[("a", 50), ("b", 50), ("c", 50), ("c", 50), ("d", 50), ("e", 50)]);
    // Deduplicated: a b c d e, 250 bytes, target 50: the sums pass 50, 100, 150 at b, c, d; e is last.
    assert_eq!(keys(&choose_boundaries(a, 5, 1)), ["b", "c", "d"]);
}

#[test]
fn pieces_cover_the_key_space_once_and_clip_tombstones_after_a_boundary() {
    let pieces = Piece::split(&[b"c".to_vec(), b"m".to_vec()]);
    assert_eq!(pieces.len(), 3);
    for k in [&b""[..], b"a", b"c", b"c\0", b"d", b"m", b"m\0", b"z", b"\xff\xff"] {
        assert_eq!(pieces.iter().filter(|p| p.contains(k)).count(), 1, "{k:?}");
    }
    assert!(pieces[0].contains(b"c") && pieces[1].contains(b"c\0") && pieces[2].contains(b"m\0"));
    let all = Fragments::new(&[
        RangeTombstone { begin: b"a".to_vec(), end: b"e".to_vec(), seq: 5 },
        RangeTombstone { begin: b"k".to_vec(), end: b"p".to_vec(), seq: 7 },
    ]);
    let frags = |p: &Piece| -> Vec<(String, String, Vec<u64>)> {
        let show = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        p.clip(&all).fragments().iter().map(|f| (show(&f.start), show(&f.end), f.seqs.clone())).collect()
    };
    // Cut at the successor of each boundary: the left piece's bound is the boundary key itself.
    assert_eq!(frags(&pieces[0]), [("a".into(), "c\0".into(), vec![5])]);
    assert_eq!(frags(&pieces[1]), [("c\0".into(), "e".into(), vec![5]), ("k".into(), "m\0".into(), vec![7])]);
    assert_eq!(frags(&pieces[2]), [("m\0".into(), "p".into(), vec![7])]);
}

#[test]
fn piece_iterator_reads_exactly_its_keys_both_ways() {
    // User keys with their sequence numbers; "m" is a deletion.
    let keyed = [("a", 3), ("c", 9), ("c", 4), ("c\0", 2), ("d", 1), ("m", 6), ("n", 7)];
    let entries: Vec<_> =
        keyed.iter().map(|&(k, seq)| if k == "m" { e(k, seq, D, "") } else { e(k, seq, V, k) }).collect();
    let user_keys = |it: &mut dyn InternalIterator, forward: bool| {
        let mut out = Vec::new();
        while it.valid() {
            let k = ikey::user_key(it.key());
            out.push(String::from_utf8_lossy(k).into_owned());
            if forward {
                it.next()
            } else {
                it.prev()
            }
        }
        out
    };
    let piece = Piece { after: Some(b"c".to_vec()), through: Some(b"m".to_vec()) };
    let mut it = PieceIter::new(crate::iter::vec::VecIter::new(entries.clone()), piece);
    it.seek_to_first();
    assert_eq!(user_keys(&mut it, true), ["c\0", "d", "m"]);
    it.seek_to_last();
    assert_eq!(user_keys(&mut it, false), ["m", "d", "c\0"]);
    it.seek(&ikey::make_internal_key(b"a", MAX_SEQUENCE, KIND_FOR_SEEK));
    assert_eq!(user_keys(&mut it, true), ["c\0", "d", "m"]);
    it.seek_for_prev(&ikey::make_internal_key(b"z", 0, D));
    assert_eq!(user_keys(&mut it, false), ["m", "d", "c\0"]);
    let first = Piece { after: None, through: Some(b"c".to_vec()) };
    let mut it = PieceIter::new(crate::iter::vec::VecIter::new(entries), first);
    it.seek_to_first();
    assert_eq!(user_keys(&mut it, true), ["a", "c", "c"]);
}

/// What a run wrote, read back: every point entry in order and the tombstones' coverage (adjacent fragments
/// with the same sequences joined, so a cut at a piece boundary does not show).
#[derive(Debug, PartialEq, Eq)]
struct Written {
    points: Vec<(Vec<u8>, u64, u8, Vec<u8>)>,
    tombstones: Vec<(Vec<u8>, Vec<u8>, Vec<u64>)>,
}

fn run_pieces(
    input: &[(Vec<u8>, Vec<u8>)],
    all: &Fragments,
    pieces: &[Piece],
    snaps: &[u64],
    s: &OutputSpec,
) -> Written {
    let dir = tempfile::tempdir().unwrap();
    let fs = PosixFs::new();
    let next = Cell::new(10u64);
    let new_file = || {
        let n = next.get();
        next.set(n + 1);
        Ok((n, dir.path().join(format!("{n:06}.sst"))))
    };
    let merge: Arc<dyn MergeOperator> = Arc::new(StringAppend::new(b","));
    let stop = AtomicBool::new(false);
    let mut files = Vec::new();
    for p in pieces {
        let cx = RunContext {
            fs: &fs,
            write_hints: WriteHints::default(),
            new_file: &new_file,
            snapshots: snaps,
            merge: Some(&merge),
            bottommost: true,
            stop: &stop,
            filter: None,
            range_dels: Some(Arc::new(p.clip(all))),
            blob: None,
        };
        let mut it = PieceIter::new(VecIter::new(input.to_vec()), p.clone());
        files.extend(write_sorted_run(&mut it, s, &cx).unwrap().files);
    }
    // The files of all pieces together are in order and never overlap, as one level's files must be.
    for w in files.windows(2) {
        assert!(w[0].largest_user_key() < w[1].smallest_user_key(), "{:?} overlaps {:?}", w[0], w[1]);
    }
    let mut points = Vec::new();
    let mut stored = Vec::new();
    for f in &files {
        let path = dir.path().join(format!("{:06}.sst", f.number));
        let t = Table::open(fs.open(&path, ReadHints::default()).unwrap(), &TableReadOptions::default()).unwrap();
        for r in t.range_tombstones().unwrap() {
            // Every tombstone lies inside its file's bounds.
            assert!(f.smallest_user_key() <= r.begin.as_slice(), "{r:?} in {f:?}");
            assert!(shaledb_format::table::range_del::inclusive_upper(&r.end) <= f.largest_user_key());
            stored.push(RangeTombstone { begin: r.begin, end: r.end, seq: r.seq });
        }
        let mut it = t.iter(true, false);
        it.seek_to_first();
        while it.valid() {
            let p = ikey::parse(it.key()).unwrap();
            points.push((p.user_key.to_vec(), p.seq, p.kind as u8, it.value().to_vec()));
            it.next();
        }
    }
    let mut tombstones: Vec<(Vec<u8>, Vec<u8>, Vec<u64>)> = Vec::new();
    for f in Fragments::new(&stored).fragments() {
        match tombstones.last_mut() {
            Some(last) if last.1 == f.start && last.2 == f.seqs => last.1.clone_from(&f.end),
            _ => tombstones.push((f.start.clone(), f.end.clone(), f.seqs.clone())),
        }
    }
    Written { points, tombstones }
}

/// A split job writes what the unsplit one writes: the same entries (shadowed versions, merges, snapshot
/// stripes and covered points resolved alike) and the same tombstone coverage, split between pieces.
#[test]
fn split_run_writes_the_same_content_as_the_unsplit_one() {
    let mut input = Vec::new();
    for i in 0..400u64 {
        let k = format!("key{:04}", i * 7 % 400);
        input.push(e(&k, 1000 + i, V, &format!("v{i}-{}", "x".repeat((i % 50) as usize))));
        if i % 3 == 0 {
            input.push(e(&k, 3000 + i, M, &format!("m{i}")));
        }
        if i % 11 == 0 {
            input.push(e(&k, 5000 + i, D, ""));
        }
    }
    let ts = [("key0010", "key0150", 2500), ("key0100", "key0300", 4000), ("key0290", "key0399", 6000)];
    let all = Fragments::new(
        &ts.iter()
            .map(|(b, e, s)| RangeTombstone { begin: b.as_bytes().to_vec(), end: e.as_bytes().to_vec(), seq: *s })
            .collect::<Vec<_>>(),
    );
    let snaps = [1500, 3500, 5200];
    let s = spec(2048);
    let whole = run_pieces(&input, &all, &[Piece::default()], &snaps, &s);
    assert!(!whole.points.is_empty() && !whole.tombstones.is_empty());
    // Boundaries inside tombstones, on existing keys and between keys.
    let b = |k: &str| k.as_bytes().to_vec();
    for bounds in [vec![b("key0120")], vec![b("key0050"), b("key0200"), b("key0295x")], vec![b("a"), b("zzz")]] {
        let split = run_pieces(&input, &all, &Piece::split(&bounds), &snaps, &s);
        assert_eq!(split, whole, "boundaries {:?}", keys(&bounds));
    }
}
