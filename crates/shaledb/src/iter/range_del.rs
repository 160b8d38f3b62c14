//! Range tombstones on the iterator path: [`RangeDelFilter`] sits between the merged sources and the
//! [`crate::iter::Cursor`] and presents every entry a visible range tombstone covers as a point deletion of the
//! same sequence number.
//!
//! Rewriting only the kind keeps the internal order (sequence numbers are unique per key, and the kind sorts
//! after the sequence), so the cursor's forward and backward logic, merges and snapshots stay as they are: a
//! covered value hides the key, covered merge operands stop at it as at a deletion. Entries newer than the
//! read's sequence pass unchanged (the cursor ignores them anyway).
//!
//! The filter still checks each entry the merge yields, but the merge no longer yields most covered ones:
//! [`CoverSkip`] lets the [`crate::iter::MergingIterator`] seek a source past a stretch a tombstone covers
//! (forward: to the fragment's end; backward: before its start) when every entry the source holds there is
//! older than the tombstone, as Pebble's and newer RocksDB's range-deletion-aware merging iterators do. A
//! scan over a deleted range then costs a seek per source and fragment instead of a step per deleted entry.
//! The entries such a seek passes over are exactly ones the filter would have turned into deletions, and a
//! covered entry hides nothing a deletion would not (every older version of its key is covered too), so the
//! cursor sees the same keys and values either way.

use crate::range_del::{Fragment, RangeDelView};
use shaledb_format::edit::FileMeta;
use shaledb_format::ikey::{self, ValueKind};
use shaledb_format::iter::InternalIterator;
use shaledb_format::Result;
use std::path::Path;
use std::sync::Arc;

/// Presents entries covered by a visible range tombstone as deletions. See the module documentation.
pub(crate) struct RangeDelFilter<I> {
    inner: I,
    view: RangeDelView,
    read_seq: u64,
    /// The rewritten key when `covered`.
    key: Vec<u8>,
    covered: bool,
}

impl<I: InternalIterator> RangeDelFilter<I> {
    /// Filters `inner` by the tombstones of `view` visible at `read_seq`.
    pub(crate) fn new(inner: I, view: RangeDelView, read_seq: u64) -> Self {
        RangeDelFilter { inner, view, read_seq, key: Vec::new(), covered: false }
    }

    fn settle(&mut self) {
        self.covered = false;
        if !self.inner.valid() {
            return;
        }
        // An unparseable key passes unchanged: the cursor reports it as corruption.
        let Some(p) = ikey::parse(self.inner.key()) else { return };
        if p.seq > self.read_seq || p.kind == ValueKind::Deletion {
            return;
        }
        if p.seq < self.view.covering_seq(p.user_key, self.read_seq) {
            self.key.clear();
            ikey::append_internal_key(&mut self.key, p.user_key, p.seq, ValueKind::Deletion);
            self.covered = true;
        }
    }
}

impl<I: InternalIterator> InternalIterator for RangeDelFilter<I> {
    fn valid(&self) -> bool {
        self.inner.valid()
    }
    fn seek_to_first(&mut self) {
        self.inner.seek_to_first();
        self.settle();
    }
    fn seek_to_last(&mut self) {
        self.inner.seek_to_last();
        self.settle();
    }
    fn seek(&mut self, target: &[u8]) {
        self.inner.seek(target);
        self.settle();
    }
    fn seek_for_prev(&mut self, target: &[u8]) {
        self.inner.seek_for_prev(target);
        self.settle();
    }
    fn next(&mut self) {
        self.inner.next();
        self.settle();
    }
    fn prev(&mut self) {
        self.inner.prev();
        self.settle();
    }
    fn key(&self) -> &[u8] {
        if self.covered {
            &self.key
        } else {
            self.inner.key()
        }
    }
    fn value(&self) -> &[u8] {
        if self.covered {
            &[]
        } else {
            self.inner.value()
        }
    }
    fn status(&self) -> Result<()> {
        self.inner.status()
    }
    fn location(&self) -> Option<(&Path, u64)> {
        self.inner.location()
    }
}

/// What the sequence numbers of one merged source are bounded by, so that [`CoverSkip`] knows when a
/// tombstone covers every entry the source holds in a stretch of keys.
pub(crate) enum SourceSeqs {
    /// No entry of the source is newer than this (a memtable, or one table).
    Max(u64),
    /// The files of a level (sorted, disjoint), each bounded by its `largest_seq`: a seek may pass over
    /// whole files without opening them, and stops at the first file that may hold an entry not covered.
    Files(Vec<Arc<FileMeta>>),
}

impl SourceSeqs {
    /// The smallest bound of any part of the source: no tombstone at or below it can cover its entries.
    fn min_bound(&self) -> u64 {
        match self {
            SourceSeqs::Max(m) => *m,
            SourceSeqs::Files(files) => files.iter().map(|f| f.largest_seq).min().unwrap_or(u64::MAX),
        }
    }
}

/// Where a source covered at its current entry may be moved.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum SkipTo<'a> {
    /// Forward: to the first entry of this user key or after (`seek` to the key's first internal key).
    /// Backward: to the last entry of a user key before this one.
    UserKey(&'a [u8]),
    /// Forward: `seek` to this internal key (the first entry of a file); backward: `seek_for_prev` to it
    /// (the last entry of a file).
    Entry(&'a [u8]),
}

/// Decides, for a source of a merge positioned on an entry, whether a visible range tombstone covers that
/// entry and everything the source holds from it to the end (forward) or start (backward) of the
/// tombstone's fragment, so the merge may seek the source past that stretch instead of stepping through it.
///
/// Covering is decided by sequence numbers alone, as everywhere else (`RangeDelFilter`): a tombstone at
/// `t`, visible at the read's sequence, covers the entries of its range below `t` from whatever source,
/// the tombstone's own included. A source is skipped only where its sequence bound ([`SourceSeqs`]) is
/// below `t`, so an entry newer than the tombstone (in the tombstone's own memtable or table, or in a
/// table ingested later into a deeper level) is never passed over; where the bound does not allow a
/// seek, the entries go through one by one and the filter decides each.
pub(crate) struct CoverSkip {
    view: RangeDelView,
    read_seq: u64,
    sources: Vec<SourceSeqs>,
    /// Per source: some part of it may be older than a visible tombstone (else it is never checked).
    eligible: Vec<bool>,
    /// User keys `[lo, hi)` (`hi` `None`: unbounded) no fragment touches, met last: a scan through live keys
    /// between tombstones answers each of them with two comparisons instead of a search per source.
    gap: Option<(Vec<u8>, Option<Vec<u8>>)>,
    /// Seeks made, for tests.
    seeks: u64,
}

impl CoverSkip {
    /// For a merge of sources bounded by `sources` (in the merge's child order), reading at `read_seq` with
    /// the tombstones of `view`. `None` when no source can be skipped (no tombstone is newer than every
    /// bound), so the merge pays nothing.
    pub(crate) fn new(view: RangeDelView, read_seq: u64, sources: Vec<SourceSeqs>) -> Option<CoverSkip> {
        let newest = view.max_visible_seq(read_seq);
        let eligible: Vec<bool> = sources.iter().map(|s| s.min_bound() < newest).collect();
        if !eligible.iter().any(|&e| e) {
            return None;
        }
        Some(CoverSkip { view, read_seq, sources, eligible, gap: None, seeks: 0 })
    }

    /// Seeks made so far.
    #[cfg(test)]
    pub(crate) fn seeks(&self) -> u64 {
        self.seeks
    }

    /// Counts one seek made on a target of [`CoverSkip::target`].
    pub(crate) fn note_seek(&mut self) {
        self.seeks += 1;
    }

    /// Source `source` is on the entry `key` (an internal key): where to move it past what a tombstone
    /// covers, in the direction given, or `None` when it must stay (the entry is not covered, or the source
    /// may hold an entry the tombstone does not cover right after it).
    pub(crate) fn target<'a>(&'a mut self, source: usize, key: &'a [u8], forward: bool) -> Option<SkipTo<'a>> {
        if !self.eligible.get(source).copied().unwrap_or(false) {
            return None;
        }
        let p = ikey::parse(key)?;
        if p.seq > self.read_seq {
            return None;
        }
        if let Some((lo, hi)) = &self.gap {
            if p.user_key >= lo.as_slice() && hi.as_deref().is_none_or(|h| p.user_key < h) {
                return None;
            }
        }
        if let Some(gap) = self.view.gap_around(p.user_key) {
            self.gap = Some(gap);
            return None;
        }
        let seqs = &self.sources[source];
        // The first tombstone source that allows a skip; another one may then allow a further skip from
        // where this one lands.
        self.view.covering_fragments(p.user_key, self.read_seq).filter(|&(_, t)| p.seq < t).find_map(|(frag, t)| {
            let to = if forward {
                forward_target(seqs, p.user_key, t, frag)?
            } else {
                backward_target(seqs, p.user_key, t, frag)?
            };
            // A file's first (last) entry is a target only past the current entry: two files of a level
            // may share a boundary user key, and a seek must always make progress.
            match to {
                SkipTo::Entry(e) if forward && !ikey::compare(e, key).is_gt() => None,
                SkipTo::Entry(e) if !forward && !ikey::compare(e, key).is_lt() => None,
                to => Some(to),
            }
        })
    }
}

/// Forward: a source on user key `uk` in `frag`, whose newest visible tombstone is at `t`.
fn forward_target<'a>(seqs: &'a SourceSeqs, uk: &[u8], t: u64, frag: &'a Fragment) -> Option<SkipTo<'a>> {
    let end = SkipTo::UserKey(frag.end.as_slice());
    let files = match seqs {
        SourceSeqs::Max(m) => return (*m < t).then_some(end),
        SourceSeqs::Files(files) => files,
    };
    // The source's file holding `uk` is the first one whose largest key is not below it.
    let first = files.partition_point(|f| f.largest_user_key() < uk);
    for (j, f) in files.iter().enumerate().skip(first) {
        if f.smallest_user_key() >= frag.end.as_slice() {
            break;
        }
        if f.largest_seq >= t {
            // This file may hold an entry newer than the tombstone: stop at its start (if it is past the
            // current one).
            return (j != first).then_some(SkipTo::Entry(f.smallest.as_slice()));
        }
        if f.largest_user_key() >= frag.end.as_slice() {
            break;
        }
    }
    Some(end)
}

/// Backward: a source on user key `uk` in `frag`, whose newest visible tombstone is at `t`.
fn backward_target<'a>(seqs: &'a SourceSeqs, uk: &[u8], t: u64, frag: &'a Fragment) -> Option<SkipTo<'a>> {
    let start = SkipTo::UserKey(frag.start.as_slice());
    let files = match seqs {
        SourceSeqs::Max(m) => return (*m < t).then_some(start),
        SourceSeqs::Files(files) => files,
    };
    // The source's file holding `uk` is the last one whose smallest key is not above it.
    let last = files.partition_point(|f| f.smallest_user_key() <= uk).checked_sub(1)?;
    for j in (0..=last).rev() {
        let f = &files[j];
        if f.largest_user_key() < frag.start.as_slice() {
            break;
        }
        if f.largest_seq >= t {
            return (j != last).then_some(SkipTo::Entry(f.largest.as_slice()));
        }
        if f.smallest_user_key() < frag.start.as_slice() {
            break;
        }
    }
    Some(start)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::iter::level::OpenFn;
    use crate::iter::{LevelIterator, MergingIterator, VecIter};
    use crate::range_del::{Fragments, RangeTombstone};
    use shaledb_format::ikey::make_internal_key;
    use std::sync::Mutex;

    type File<'a> = (u64, &'a [(&'a str, u64)]);
    type Entries = Vec<(Vec<u8>, Vec<u8>)>;
    type Opened = Arc<Mutex<Vec<u64>>>;

    fn ent(k: &str, seq: u64) -> (Vec<u8>, Vec<u8>) {
        (make_internal_key(k.as_bytes(), seq, ValueKind::Value), format!("{k}@{seq}").into_bytes())
    }

    /// A level of `files` (number, entries in key order) and the log of the files it opened.
    fn level(files: &[File<'_>]) -> (LevelIterator, Vec<Arc<FileMeta>>, Opened) {
        let metas: Vec<Arc<FileMeta>> = files
            .iter()
            .map(|&(n, es)| {
                Arc::new(FileMeta {
                    number: n,
                    file_size: 100,
                    smallest: ent(es[0].0, es[0].1).0,
                    largest: ent(es[es.len() - 1].0, es[es.len() - 1].1).0,
                    smallest_seq: es.iter().map(|e| e.1).min().unwrap(),
                    largest_seq: es.iter().map(|e| e.1).max().unwrap(),
                    num_entries: es.len() as u64,
                    num_deletions: 0,
                    num_range_deletions: 0,
                })
            })
            .collect();
        let data: Vec<(u64, Entries)> =
            files.iter().map(|&(n, es)| (n, es.iter().map(|&(k, s)| ent(k, s)).collect())).collect();
        let opened = Arc::new(Mutex::new(Vec::new()));
        let log = Arc::clone(&opened);
        let open: OpenFn = Arc::new(move |f: &FileMeta| {
            log.lock().unwrap().push(f.number);
            let entries = data.iter().find(|(n, _)| *n == f.number).unwrap().1.clone();
            Ok(Box::new(VecIter::new(entries)) as Box<dyn InternalIterator>)
        });
        (LevelIterator::new(metas.clone(), open), metas, opened)
    }

    fn view(ts: &[(&str, &str, u64)]) -> RangeDelView {
        let ts: Vec<RangeTombstone> = ts
            .iter()
            .map(|&(b, e, seq)| RangeTombstone { begin: b.as_bytes().to_vec(), end: e.as_bytes().to_vec(), seq })
            .collect();
        let mut v = RangeDelView::default();
        v.add(Arc::new(Fragments::new(&ts)));
        v
    }

    /// The merge of one level under `tombstones` read at `read_seq`, with cover skipping.
    fn merge(files: &[File<'_>], tombstones: &[(&str, &str, u64)], read_seq: u64) -> (MergingIterator, Opened) {
        let (it, metas, opened) = level(files);
        let skip = CoverSkip::new(view(tombstones), read_seq, vec![SourceSeqs::Files(metas)]);
        (MergingIterator::new(vec![Box::new(it)]).with_cover_skip(skip), opened)
    }

    fn walk(m: &mut MergingIterator, forward: bool) -> Vec<String> {
        let mut out = Vec::new();
        if forward {
            m.seek_to_first();
        } else {
            m.seek_to_last();
        }
        while m.valid() {
            let p = ikey::parse(m.key()).unwrap();
            out.push(format!("{}@{}", String::from_utf8_lossy(p.user_key), p.seq));
            if forward {
                m.next();
            } else {
                m.prev();
            }
        }
        m.status().unwrap();
        out
    }

    const A: &[(&str, u64)] = &[("a", 1), ("b", 2), ("c", 3)];
    const B: &[(&str, u64)] = &[("e", 4), ("f", 5)];
    const C: &[(&str, u64)] = &[("h", 1), ("i", 2), ("j", 3)];

    #[test]
    fn a_covered_stretch_is_passed_in_one_seek_without_opening_the_files_inside() {
        let (mut m, opened) = merge(&[(1, A), (2, B), (3, C)], &[("b", "i", 10)], 20);
        assert_eq!(walk(&mut m, true), ["a@1", "i@2", "j@3"]);
        assert_eq!(*opened.lock().unwrap(), [1, 3], "file 2 lies wholly in the covered stretch");
        assert_eq!(m.cover_seeks(), 1);
        opened.lock().unwrap().clear();
        assert_eq!(walk(&mut m, false), ["j@3", "i@2", "a@1"]);
        assert_eq!(*opened.lock().unwrap(), [3, 1]);
        assert_eq!(m.cover_seeks(), 2);
    }

    #[test]
    fn a_file_newer_than_the_tombstone_stops_the_seek_at_its_edge() {
        // File 2 holds e@12, newer than the tombstone: it must be yielded; f@5 in the same file goes through
        // one by one (the filter hides it).
        const B2: &[(&str, u64)] = &[("e", 12), ("f", 5)];
        let (mut m, _) = merge(&[(1, A), (2, B2), (3, C)], &[("b", "i", 10)], 20);
        assert_eq!(walk(&mut m, true), ["a@1", "e@12", "f@5", "i@2", "j@3"]);
        assert_eq!(walk(&mut m, false), ["j@3", "i@2", "f@5", "e@12", "a@1"]);
    }

    #[test]
    fn a_tombstone_the_read_cannot_see_or_older_than_the_entries_skips_nothing() {
        let (mut m, _) = merge(&[(1, A), (2, B), (3, C)], &[("b", "i", 10)], 9);
        assert_eq!(walk(&mut m, true).len(), 8);
        assert_eq!(m.cover_seeks(), 0);
        let (mut m, _) = merge(&[(1, A), (2, B), (3, C)], &[("b", "i", 3)], 20);
        assert_eq!(walk(&mut m, true), ["a@1", "b@2", "c@3", "e@4", "f@5", "h@1", "i@2", "j@3"]);
        assert_eq!(walk(&mut m, false).len(), 8);
        // b@2 is covered by the tombstone at 3, but file 1 holds c@3: no seek, each entry goes through.
        assert_eq!(m.cover_seeks(), 0);
    }

    #[test]
    fn seeks_and_direction_switches_inside_a_covered_stretch() {
        let (mut m, _) = merge(&[(1, A), (2, B), (3, C)], &[("b", "i", 10)], 20);
        m.seek(&make_internal_key(b"e", 20, ValueKind::Value));
        assert_eq!(ikey::user_key(m.key()), b"i");
        m.prev();
        assert_eq!(ikey::user_key(m.key()), b"a");
        m.next();
        assert_eq!(ikey::user_key(m.key()), b"i");
        m.seek_for_prev(&make_internal_key(b"f", 0, ValueKind::Value));
        assert_eq!(ikey::user_key(m.key()), b"a");
        m.next();
        assert_eq!(ikey::user_key(m.key()), b"i");
    }

    #[test]
    fn no_skipper_when_every_source_is_newer_than_every_tombstone() {
        assert!(CoverSkip::new(view(&[("a", "z", 5)]), 20, vec![SourceSeqs::Max(5), SourceSeqs::Max(9)]).is_none());
        assert!(CoverSkip::new(view(&[("a", "z", 5)]), 4, vec![SourceSeqs::Max(1)]).is_none(), "invisible");
        assert!(CoverSkip::new(view(&[("a", "z", 5)]), 20, vec![SourceSeqs::Max(9), SourceSeqs::Max(4)]).is_some());
    }
}
