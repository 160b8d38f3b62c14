//! Range tombstones (`Db::delete_range`): a tombstone `[begin, end)` at sequence `s` hides every entry of a key
//! in the range whose sequence is below `s`, for readers at or after `s`.
//!
//! Tombstones are kept as written (they may overlap) and *fragmented* for reads, as RocksDB's
//! `FragmentedRangeTombstoneList` and Pebble's `keyspan.Fragmenter` do: the key space is cut at every begin and
//! end into disjoint fragments, each carrying the sequence numbers of all tombstones that cover it, newest
//! first. A point read then costs one binary search over the fragments plus one over the fragment's sequences,
//! whatever the number of keys the tombstones delete.

use std::collections::BTreeMap;
use std::sync::Arc;

/// One range tombstone as written: `[begin, end)` deleted at `seq`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct RangeTombstone {
    pub(crate) begin: Vec<u8>,
    pub(crate) end: Vec<u8>,
    pub(crate) seq: u64,
}

/// A piece of the key space `[start, end)` covered by the tombstones whose sequence numbers are `seqs`
/// (descending, no duplicates). INVARIANT: `start < end`, `seqs` not empty.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Fragment {
    pub(crate) start: Vec<u8>,
    pub(crate) end: Vec<u8>,
    pub(crate) seqs: Vec<u64>,
}

impl Fragment {
    /// The newest tombstone sequence visible at `read_seq` (`<= read_seq`), if any.
    pub(crate) fn visible_seq(&self, read_seq: u64) -> Option<u64> {
        // Descending: the first one at or below `read_seq`.
        let i = self.seqs.partition_point(|&s| s > read_seq);
        self.seqs.get(i).copied()
    }
}

/// Fragmented tombstones: disjoint fragments in key order. INVARIANT: `frags[i].end <= frags[i + 1].start`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Fragments {
    frags: Vec<Fragment>,
    /// The largest sequence of any fragment (0 when empty).
    max_seq: u64,
}

impl Fragments {
    /// Fragments `tombstones` (any order, overlapping allowed; empty or inverted ranges are ignored).
    pub(crate) fn new<'a>(tombstones: impl IntoIterator<Item = &'a RangeTombstone>) -> Fragments {
        let mut ts: Vec<&RangeTombstone> = tombstones.into_iter().filter(|t| t.begin < t.end).collect();
        if ts.is_empty() {
            return Fragments::default();
        }
        ts.sort_by(|a, b| a.begin.cmp(&b.begin));
        let mut bounds: Vec<&[u8]> = ts.iter().flat_map(|t| [t.begin.as_slice(), t.end.as_slice()]).collect();
        bounds.sort_unstable();
        bounds.dedup();
        // Sweep the boundaries left to right; `active` holds the tombstones covering the current piece, by
        // (end, seq) so the ones ending at a boundary leave first.
        let mut active: BTreeMap<(&[u8], u64), usize> = BTreeMap::new();
        let mut next = 0;
        let mut frags = Vec::new();
        for w in bounds.windows(2) {
            let (start, end) = (w[0], w[1]);
            while next < ts.len() && ts[next].begin.as_slice() <= start {
                *active.entry((ts[next].end.as_slice(), ts[next].seq)).or_insert(0) += 1;
                next += 1;
            }
            while let Some((&(e, s), _)) = active.first_key_value() {
                if e > start {
                    break;
                }
                active.remove(&(e, s));
            }
            if active.is_empty() {
                continue;
            }
            let mut seqs: Vec<u64> = active.keys().map(|&(_, s)| s).collect();
            seqs.sort_unstable_by(|a, b| b.cmp(a));
            seqs.dedup();
            frags.push(Fragment { start: start.to_vec(), end: end.to_vec(), seqs });
        }
        Fragments::from_parts(frags)
    }

    /// Fragments the tombstones stored in a table's range-deletion block.
    pub(crate) fn from_stored(stored: &[shaledb_format::table::range_del::StoredRangeTombstone]) -> Fragments {
        let ts: Vec<RangeTombstone> =
            stored.iter().map(|t| RangeTombstone { begin: t.begin.clone(), end: t.end.clone(), seq: t.seq }).collect();
        Fragments::new(&ts)
    }

    /// Fragments the tombstones of several sources together (a compaction's inputs).
    pub(crate) fn merged<'a>(sources: impl IntoIterator<Item = &'a Fragments>) -> Fragments {
        let ts: Vec<RangeTombstone> = sources
            .into_iter()
            .flat_map(|f| &f.frags)
            .flat_map(|f| f.seqs.iter().map(|&seq| RangeTombstone { begin: f.start.clone(), end: f.end.clone(), seq }))
            .collect();
        Fragments::new(&ts)
    }

    /// Fragments already disjoint and in key order (a subcompaction's share of a job's, cut to its range).
    pub(crate) fn from_disjoint(frags: Vec<Fragment>) -> Fragments {
        debug_assert!(frags.windows(2).all(|w| w[0].end <= w[1].start));
        Fragments::from_parts(frags)
    }

    fn from_parts(frags: Vec<Fragment>) -> Fragments {
        let max_seq = frags.iter().filter_map(|f| f.seqs.first()).copied().max().unwrap_or(0);
        Fragments { frags, max_seq }
    }

    /// The largest sequence of any tombstone (0 when there is none).
    pub(crate) fn max_seq(&self) -> u64 {
        self.max_seq
    }

    /// The fragments, in key order.
    pub(crate) fn fragments(&self) -> &[Fragment] {
        &self.frags
    }

    /// True when no key is covered.
    pub(crate) fn is_empty(&self) -> bool {
        self.frags.is_empty()
    }

    /// The fragment holding `key`, if any.
    pub(crate) fn fragment_for(&self, key: &[u8]) -> Option<&Fragment> {
        let i = self.frags.partition_point(|f| f.start.as_slice() <= key);
        let f = self.frags.get(i.checked_sub(1)?)?;
        (key < f.end.as_slice()).then_some(f)
    }

    /// The sequence of the newest tombstone covering `key` visible at `read_seq`, or 0 when none: every entry
    /// of `key` with a smaller sequence is deleted for this reader. (No entry has sequence 0 below a
    /// tombstone: a tombstone takes a sequence of its own, at least 1.)
    pub(crate) fn covering_seq(&self, key: &[u8], read_seq: u64) -> u64 {
        self.fragment_for(key).and_then(|f| f.visible_seq(read_seq)).unwrap_or(0)
    }
}

/// The tombstones of several sources (memtables now; tables next) read together: a key's covering sequence is
/// the largest any source gives.
#[derive(Clone, Debug, Default)]
pub(crate) struct RangeDelView {
    sources: Vec<Arc<Fragments>>,
}

impl RangeDelView {
    /// Adds one source's fragments (skipped when empty).
    pub(crate) fn add(&mut self, f: Arc<Fragments>) {
        if !f.is_empty() {
            self.sources.push(f);
        }
    }

    /// True when no source holds a tombstone: readers skip every check.
    pub(crate) fn is_empty(&self) -> bool {
        self.sources.is_empty()
    }

    /// The newest tombstone sequence covering `key` at `read_seq` over all sources (0: none).
    pub(crate) fn covering_seq(&self, key: &[u8], read_seq: u64) -> u64 {
        self.sources.iter().map(|f| f.covering_seq(key, read_seq)).max().unwrap_or(0)
    }

    /// For each source whose tombstones cover `key` at `read_seq`: the fragment holding `key` and the
    /// sequence of its newest tombstone visible at `read_seq`.
    pub(crate) fn covering_fragments<'a>(
        &'a self,
        key: &'a [u8],
        read_seq: u64,
    ) -> impl Iterator<Item = (&'a Fragment, u64)> + 'a {
        self.sources.iter().filter_map(move |f| {
            let frag = f.fragment_for(key)?;
            Some((frag, frag.visible_seq(read_seq)?))
        })
    }

    /// When no fragment of any source holds `key`: the widest range `[lo, hi)` around it that no fragment
    /// touches (`hi` `None`: unbounded), so a reader may answer "not covered" for the keys in it without a
    /// search. `None` when some fragment holds `key`.
    pub(crate) fn gap_around(&self, key: &[u8]) -> Option<(Vec<u8>, Option<Vec<u8>>)> {
        let mut lo: &[u8] = &[];
        let mut hi: Option<&[u8]> = None;
        for f in &self.sources {
            let i = f.frags.partition_point(|fr| fr.start.as_slice() <= key);
            if let Some(prev) = i.checked_sub(1).map(|j| &f.frags[j]) {
                if key < prev.end.as_slice() {
                    return None;
                }
                lo = lo.max(prev.end.as_slice());
            }
            if let Some(next) = f.frags.get(i) {
                hi = Some(hi.map_or(next.start.as_slice(), |h| h.min(next.start.as_slice())));
            }
        }
        Some((lo.to_vec(), hi.map(<[u8]>::to_vec)))
    }

    /// The sequence of the newest tombstone visible at `read_seq` (0: none is visible): only an entry older
    /// than it can be covered. One comparison per source, unless a source holds tombstones newer than the
    /// read (a snapshot's): then a pass over its fragments.
    pub(crate) fn max_visible_seq(&self, read_seq: u64) -> u64 {
        let visible = |f: &Arc<Fragments>| match f.max_seq() {
            m if m <= read_seq => m,
            _ => f.frags.iter().filter_map(|fr| fr.visible_seq(read_seq)).max().unwrap_or(0),
        };
        self.sources.iter().map(visible).max().unwrap_or(0)
    }
}

/// A memtable's range tombstones: appended by writers, fragmented on the first read after a change and cached
/// until the next one (RocksDB caches the fragmented list of an immutable memtable likewise).
#[derive(Default)]
pub(crate) struct MemRangeDels {
    state: parking_lot::RwLock<MemRangeState>,
    /// Tombstones added: read without the lock so a memtable without any costs readers one atomic load.
    count: std::sync::atomic::AtomicUsize,
}

#[derive(Default)]
struct MemRangeState {
    list: Vec<RangeTombstone>,
    /// The fragments of `list`; `None` after an add.
    cache: Option<Arc<Fragments>>,
}

impl MemRangeDels {
    /// Records `[begin, end)` deleted at `seq`.
    pub(crate) fn add(&self, begin: &[u8], end: &[u8], seq: u64) {
        let mut st = self.state.write();
        st.list.push(RangeTombstone { begin: begin.to_vec(), end: end.to_vec(), seq });
        st.cache = None;
        self.count.fetch_add(1, std::sync::atomic::Ordering::Release);
    }

    /// Number of tombstones added.
    pub(crate) fn len(&self) -> usize {
        self.count.load(std::sync::atomic::Ordering::Acquire)
    }

    /// The fragmented tombstones (`None` when there are none).
    pub(crate) fn fragments(&self) -> Option<Arc<Fragments>> {
        if self.len() == 0 {
            return None;
        }
        if let Some(f) = &self.state.read().cache {
            return Some(Arc::clone(f));
        }
        let mut st = self.state.write();
        if st.cache.is_none() {
            st.cache = Some(Arc::new(Fragments::new(&st.list)));
        }
        st.cache.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(b: &str, e: &str, seq: u64) -> RangeTombstone {
        RangeTombstone { begin: b.as_bytes().to_vec(), end: e.as_bytes().to_vec(), seq }
    }

    fn shape(f: &Fragments) -> Vec<(String, String, Vec<u64>)> {
        f.frags
            .iter()
            .map(|f| (String::from_utf8_lossy(&f.start).into(), String::from_utf8_lossy(&f.end).into(), f.seqs.clone()))
            .collect()
    }

    fn s(a: &str, b: &str, seqs: &[u64]) -> (String, String, Vec<u64>) {
        (a.into(), b.into(), seqs.to_vec())
    }

    #[test]
    fn overlapping_tombstones_are_cut_at_every_boundary() {
        let f = Fragments::new(&[t("a", "e", 5), t("c", "g", 9), t("x", "z", 1)]);
        assert_eq!(shape(&f), vec![s("a", "c", &[5]), s("c", "e", &[9, 5]), s("e", "g", &[9]), s("x", "z", &[1])]);
    }

    #[test]
    fn nested_and_identical_ranges_merge_their_sequences() {
        let f = Fragments::new(&[t("a", "z", 3), t("m", "n", 7), t("a", "z", 4), t("a", "z", 3)]);
        assert_eq!(shape(&f), vec![s("a", "m", &[4, 3]), s("m", "n", &[7, 4, 3]), s("n", "z", &[4, 3])]);
    }

    #[test]
    fn empty_and_inverted_ranges_delete_nothing() {
        assert!(Fragments::new(&[t("b", "b", 3), t("c", "a", 4)]).is_empty());
        let f = Fragments::new(&[t("b", "b", 3), t("a", "c", 2)]);
        assert_eq!(shape(&f), vec![s("a", "c", &[2])]);
    }

    #[test]
    fn covering_seq_is_half_open_and_respects_the_read_sequence() {
        let f = Fragments::new(&[t("b", "d", 5), t("c", "f", 9)]);
        assert_eq!(f.covering_seq(b"a", 100), 0);
        assert_eq!(f.covering_seq(b"b", 100), 5);
        assert_eq!(f.covering_seq(b"c", 100), 9);
        assert_eq!(f.covering_seq(b"c", 8), 5, "the newer tombstone is invisible at 8");
        assert_eq!(f.covering_seq(b"c", 4), 0);
        assert_eq!(f.covering_seq(b"e\xff", 9), 9);
        assert_eq!(f.covering_seq(b"f", 100), 0, "end is exclusive");
        assert_eq!(f.covering_seq(b"", 100), 0);
    }

    #[test]
    fn view_takes_the_newest_over_sources() {
        let mut v = RangeDelView::default();
        assert!(v.is_empty());
        v.add(Arc::new(Fragments::default()));
        assert!(v.is_empty());
        v.add(Arc::new(Fragments::new(&[t("a", "m", 4)])));
        v.add(Arc::new(Fragments::new(&[t("k", "z", 2)])));
        assert_eq!(v.covering_seq(b"l", 10), 4);
        assert_eq!(v.covering_seq(b"m", 10), 2);
        assert_eq!(v.covering_seq(b"l", 3), 2);
    }

    #[test]
    fn gaps_lie_between_the_fragments_of_every_source() {
        let mut v = RangeDelView::default();
        v.add(Arc::new(Fragments::new(&[t("c", "e", 4), t("m", "p", 2)])));
        v.add(Arc::new(Fragments::new(&[t("g", "h", 9)])));
        let g = |k: &str| v.gap_around(k.as_bytes()).map(|(lo, hi)| (s_(&lo), hi.map(|h| s_(&h))));
        assert_eq!(g("a"), Some(("".into(), Some("c".into()))));
        assert_eq!(g("c"), None);
        assert_eq!(g("e"), Some(("e".into(), Some("g".into()))));
        assert_eq!(g("h"), Some(("h".into(), Some("m".into()))));
        assert_eq!(g("p"), Some(("p".into(), None)));
        assert_eq!(g("o"), None);
        assert_eq!(RangeDelView::default().gap_around(b"x"), Some((Vec::new(), None)));
    }

    fn s_(b: &[u8]) -> String {
        String::from_utf8_lossy(b).into_owned()
    }

    /// Against a brute force: for random tombstones, `covering_seq` equals the newest visible one containing
    /// the key.
    #[test]
    fn matches_brute_force() {
        let mut rng = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        };
        for _ in 0..200 {
            let n = (next() % 8) as usize;
            let ts: Vec<RangeTombstone> = (0..n)
                .map(|i| {
                    let a = (b'a' + (next() % 10) as u8) as char;
                    let b = (b'a' + (next() % 10) as u8) as char;
                    t(&a.to_string(), &b.to_string(), i as u64 + 1 + next() % 3)
                })
                .collect();
            let f = Fragments::new(&ts);
            for k in b'a'..=b'k' {
                for read in 0..12 {
                    let key = [k];
                    let want = ts
                        .iter()
                        .filter(|t| t.begin.as_slice() <= &key[..] && &key[..] < t.end.as_slice() && t.seq <= read)
                        .map(|t| t.seq)
                        .max()
                        .unwrap_or(0);
                    assert_eq!(f.covering_seq(&key, read), want, "{ts:?} key {k} read {read}");
                }
            }
        }
    }
}
