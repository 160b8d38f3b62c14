//! Range tombstones through a flush or a compaction.
//!
//! A run reads the tombstones of all its inputs at once (a memtable's, or every input table's, fragmented
//! together: [`Fragments`]) and uses them twice:
//!
//! - **Dropping covered points** ([`RunRangeDels::drops`]): a version of a key at sequence `v` covered by a
//!   tombstone at `t > v` *in the same snapshot stripe* is seen by no reader (every reader that could see `v`
//!   reads at or above `t`, and sees the deletion), so it is not written. A snapshot between them keeps it, as
//!   for a point deletion (`compaction.rs`).
//! - **Writing the tombstones that survive** into the outputs: per fragment, one sequence per stripe (the
//!   newest; an older one in the same stripe hides nothing the newest does not), and in bottommost output none
//!   from the oldest stripe (nothing older remains below for it to hide: every entry it covered was in its
//!   stripe and is dropped above). Outputs are cut between user keys; a fragment crossing a cut is split at
//!   `last ++ 0x00`, the first key after the file's last key `last`, so each file's tombstones stay inside its
//!   key range and two files of a level never overlap ([`RunRangeDels::take_through`]).
//!
//! File bounds: a file's smallest key covers its first tombstone's start and its largest key the last
//! tombstone's end. An end is exclusive and bounds are inclusive user keys: `inclusive_upper` turns `k ++
//! 0x00` (the successor of `k`, which every split produces) back into `k` exactly, and leaves any other end as
//! is, one key wider than needed. A wider bound costs at most a file probed for a key it does not hold, and
//! never breaks the level's order: the next file of the level starts past it (the picker treats bounds
//! inclusively, so a compaction that wrote such a file took every overlapping file of the output level as
//! input).

use crate::range_del::{Fragment, Fragments};
#[cfg(test)]
use shaledb_format::ikey::{self, ValueKind};
use std::collections::VecDeque;
use std::sync::Arc;

/// The tombstones of one run: the inputs' (for dropping points) and what the outputs keep, handed out to
/// output files in key order as they are finished.
pub(crate) struct RunRangeDels {
    input: Arc<Fragments>,
    snapshots: Vec<u64>,
    pending: VecDeque<Fragment>,
}

impl RunRangeDels {
    /// The run over `input` with live `snapshots` (ascending); `bottommost`: nothing lies below the output.
    pub(crate) fn new(input: Arc<Fragments>, snapshots: &[u64], bottommost: bool) -> RunRangeDels {
        let stripe = |seq: u64| snapshots.partition_point(|&s| s < seq);
        let mut pending = VecDeque::new();
        for f in input.fragments() {
            let mut seqs: Vec<u64> = Vec::with_capacity(1);
            // Descending: the first of each stripe is its newest.
            for &s in &f.seqs {
                let st = stripe(s);
                if bottommost && st == 0 {
                    continue;
                }
                if seqs.last().is_none_or(|&prev| stripe(prev) != st) {
                    seqs.push(s);
                }
            }
            if !seqs.is_empty() {
                pending.push_back(Fragment { start: f.start.clone(), end: f.end.clone(), seqs });
            }
        }
        RunRangeDels { input, snapshots: snapshots.to_vec(), pending }
    }

    /// True when the version of `user_key` at `seq` is covered by a tombstone of the inputs in the same
    /// snapshot stripe: no reader can see it.
    pub(crate) fn drops(&self, user_key: &[u8], seq: u64) -> bool {
        let Some(f) = self.input.fragment_for(user_key) else { return false };
        // Descending; the oldest tombstone newer than `seq` is the one most likely in its stripe.
        let newer = f.seqs.partition_point(|&s| s > seq);
        let Some(&t) = newer.checked_sub(1).and_then(|i| f.seqs.get(i)) else { return false };
        let stripe = |s: u64| self.snapshots.partition_point(|&x| x < s);
        stripe(t) == stripe(seq)
    }

    /// True when no tombstone is left to hand out.
    pub(crate) fn is_empty(&self) -> bool {
        self.pending.is_empty()
    }

    /// The tombstones of a file whose last point key is `last`: every fragment, or part of one, below `last ++
    /// 0x00`. The rest stays for the next file.
    pub(crate) fn take_through(&mut self, last: &[u8]) -> Vec<Fragment> {
        let mut cut = last.to_vec();
        cut.push(0);
        let mut out = Vec::new();
        while let Some(f) = self.pending.front_mut() {
            if f.start >= cut {
                break;
            }
            if f.end <= cut {
                out.extend(self.pending.pop_front());
            } else {
                out.push(Fragment { start: f.start.clone(), end: cut.clone(), seqs: f.seqs.clone() });
                f.start.clone_from(&cut);
                break;
            }
        }
        out
    }

    /// Every tombstone not handed out yet (for the run's last file).
    pub(crate) fn take_rest(&mut self) -> Vec<Fragment> {
        self.pending.drain(..).collect()
    }
}

/// Widens a file's internal-key bounds (`smallest`, `largest`; empty = unset) to cover `frags` (in key order),
/// by the format's rule ([`shaledb_format::table::range_del::widen_bounds`]).
pub(crate) fn widen_bounds(smallest: &mut Vec<u8>, largest: &mut Vec<u8>, frags: &[Fragment]) {
    let (Some(first), Some(last)) = (frags.first(), frags.last()) else { return };
    shaledb_format::table::range_del::widen_bounds(smallest, largest, &first.start, &last.end);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::range_del::RangeTombstone;

    fn t(b: &str, e: &str, seq: u64) -> RangeTombstone {
        RangeTombstone { begin: b.as_bytes().to_vec(), end: e.as_bytes().to_vec(), seq }
    }

    fn run(ts: &[RangeTombstone], snapshots: &[u64], bottommost: bool) -> RunRangeDels {
        RunRangeDels::new(Arc::new(Fragments::new(ts)), snapshots, bottommost)
    }

    fn shape(fs: &[Fragment]) -> Vec<(Vec<u8>, Vec<u8>, Vec<u64>)> {
        fs.iter().map(|f| (f.start.clone(), f.end.clone(), f.seqs.clone())).collect()
    }

    #[test]
    fn a_point_is_dropped_only_under_a_tombstone_of_its_stripe() {
        let r = run(&[t("b", "f", 10)], &[], false);
        assert!(r.drops(b"c", 9));
        assert!(!r.drops(b"c", 11), "newer than the tombstone");
        assert!(!r.drops(b"f", 1), "the end is exclusive");
        assert!(r.drops(b"b", 1), "the start is inclusive");
        // A snapshot at 7 sees the version at 5: it stays; one at 8 is above the snapshot and goes.
        let r = run(&[t("b", "f", 10)], &[7], false);
        assert!(!r.drops(b"c", 5));
        assert!(r.drops(b"c", 8));
        // Two tombstones: the older one (4) drops what is below it in its stripe.
        let r = run(&[t("b", "f", 10), t("b", "f", 4)], &[7], false);
        assert!(r.drops(b"c", 3));
        assert!(!r.drops(b"c", 5));
    }

    #[test]
    fn outputs_keep_one_sequence_per_stripe_and_none_of_the_oldest_at_the_bottom() {
        let ts = [t("a", "c", 3), t("a", "c", 5), t("a", "c", 9), t("a", "c", 12)];
        // Snapshots 4 and 10: stripes {3}, {5, 9}, {12}.
        let mut r = run(&ts, &[4, 10], false);
        assert_eq!(shape(&r.take_rest()), vec![(b"a".to_vec(), b"c".to_vec(), vec![12, 9, 3])]);
        let mut r = run(&ts, &[4, 10], true);
        assert_eq!(shape(&r.take_rest()), vec![(b"a".to_vec(), b"c".to_vec(), vec![12, 9])]);
        // Without snapshots, at the bottom, nothing is left.
        let r = run(&ts, &[], true);
        assert!(r.is_empty());
    }

    #[test]
    fn fragments_are_split_after_each_files_last_key() {
        let mut r = run(&[t("a", "m", 5), t("p", "q", 6)], &[], false);
        // A file ending at "c" takes [a, c\0); the next, ending at "p", takes [c\0, m) and [p, p\0).
        assert_eq!(shape(&r.take_through(b"c")), vec![(b"a".to_vec(), b"c\0".to_vec(), vec![5])]);
        assert_eq!(
            shape(&r.take_through(b"p")),
            vec![(b"c\0".to_vec(), b"m".to_vec(), vec![5]), (b"p".to_vec(), b"p\0".to_vec(), vec![6])]
        );
        assert_eq!(shape(&r.take_rest()), vec![(b"p\0".to_vec(), b"q".to_vec(), vec![6])]);
        assert!(r.is_empty());
    }

    #[test]
    fn bounds_cover_the_tombstones_and_stop_at_a_split() {
        let frags = [Fragment { start: b"b".to_vec(), end: b"k\0".to_vec(), seqs: vec![4] }];
        let (mut lo, mut hi) = (Vec::new(), Vec::new());
        widen_bounds(&mut lo, &mut hi, &frags);
        assert_eq!((ikey::user_key(&lo), ikey::user_key(&hi)), (&b"b"[..], &b"k"[..]));
        // Point bounds wider than the tombstones stay.
        let mut lo = ikey::make_internal_key(b"a", 3, ValueKind::Value);
        let mut hi = ikey::make_internal_key(b"z", 3, ValueKind::Value);
        widen_bounds(&mut lo, &mut hi, &frags);
        assert_eq!((ikey::user_key(&lo), ikey::user_key(&hi)), (&b"a"[..], &b"z"[..]));
        // An end not produced by a split is kept as an inclusive bound (one key wider).
        use shaledb_format::table::range_del::inclusive_upper;
        assert_eq!(inclusive_upper(b"m"), b"m");
        assert_eq!(inclusive_upper(b""), b"");
    }
}
