//! A k-way merge of internal iterators with a binary heap, in both directions.
//!
//! Forward, every child is positioned at its first entry >= the current key and the heap is a min-heap;
//! backward, every child is at its last entry <= the current key and the heap is a max-heap. Switching
//! direction re-seeks the other children around the current key (the approach of LevelDB's merger).
//!
//! With range tombstones ([`MergingIterator::with_cover_skip`]), a child that comes to the top of the heap on
//! an entry a newer tombstone covers, together with everything the child holds up to the end (start, going
//! backward) of the tombstone's fragment, is sought past that stretch before the entry is yielded (see
//! [`CoverSkip`]): a scan over deleted keys costs a seek per child and fragment, not a step per key.

use crate::iter::range_del::{CoverSkip, SkipTo};
use shaledb_format::ikey::{self, KIND_FOR_SEEK, MAX_SEQUENCE};
use shaledb_format::iter::InternalIterator;
use shaledb_vfs::{Error, Result};
use std::cmp::Ordering;
use std::path::Path;

/// Merges children into one [`InternalIterator`] in [`ikey::compare`] order. Equal keys (which unique
/// sequence numbers rule out) come out lower child index first going forward.
pub(crate) struct MergingIterator {
    children: Vec<Box<dyn InternalIterator>>,
    /// Indices of the valid children, a heap ordered by the direction; `heap[0]` is the current entry.
    heap: Vec<usize>,
    forward: bool,
    /// First error met by a child since the last seek; it makes the merge invalid.
    error: Option<Error>,
    /// Scratch copy of the current key for direction switches.
    key_buf: Vec<u8>,
    /// Seeks children past what range tombstones cover (`None`: no tombstone can cover a child's entry).
    skip: Option<CoverSkip>,
}

impl MergingIterator {
    /// A merge of `children` (each in [`ikey::compare`] order), unpositioned.
    pub(crate) fn new(children: Vec<Box<dyn InternalIterator>>) -> MergingIterator {
        let n = children.len();
        MergingIterator {
            children,
            heap: Vec::with_capacity(n),
            forward: true,
            error: None,
            key_buf: Vec::new(),
            skip: None,
        }
    }

    /// Seeks children past the stretches `skip` finds covered by range tombstones (its sources in the order
    /// of the children). The merge still yields every entry not passed over, covered or not: the
    /// `RangeDelFilter` above it decides those.
    pub(crate) fn with_cover_skip(mut self, skip: Option<CoverSkip>) -> MergingIterator {
        self.skip = skip;
        self
    }

    /// The cover-skip seeks made so far.
    #[cfg(test)]
    pub(crate) fn cover_seeks(&self) -> u64 {
        self.skip.as_ref().map_or(0, |s| s.seeks())
    }

    /// Moves the top child past what a tombstone covers there, again until the top child's entry has to
    /// be yielded. Each seek moves a child strictly in the direction of iteration, so this ends.
    fn skip_covered(&mut self) {
        loop {
            if self.error.is_some() {
                return;
            }
            let Some(&top) = self.heap.first() else { return };
            let Some(skip) = self.skip.as_mut() else { return };
            let child = &mut self.children[top];
            // Where to: an internal key, and whether it is a user key's first one (else an entry's own).
            let to_user_key = match skip.target(top, child.key(), self.forward) {
                None => return,
                Some(SkipTo::UserKey(u)) => {
                    self.key_buf.clear();
                    ikey::append_internal_key(&mut self.key_buf, u, MAX_SEQUENCE, KIND_FOR_SEEK);
                    true
                }
                Some(SkipTo::Entry(e)) => {
                    self.key_buf.clear();
                    self.key_buf.extend_from_slice(e);
                    false
                }
            };
            skip.note_seek();
            if self.forward {
                child.seek(&self.key_buf);
            } else {
                child.seek_for_prev(&self.key_buf);
                if to_user_key {
                    // To the last entry of a user key before the target's.
                    let start = ikey::user_key(&self.key_buf);
                    while child.valid() && ikey::user_key(child.key()) >= start {
                        child.prev();
                    }
                }
            }
            self.fix_top();
        }
    }

    /// True when child `a` must come out before child `b` in the current direction.
    #[inline]
    fn before(&self, a: usize, b: usize) -> bool {
        let ord = ikey::compare(self.children[a].key(), self.children[b].key());
        if self.forward {
            ord.then(a.cmp(&b)) == Ordering::Less
        } else {
            ord.then(b.cmp(&a)) == Ordering::Greater
        }
    }

    fn sift_down(&mut self, mut i: usize) {
        let n = self.heap.len();
        loop {
            let l = 2 * i + 1;
            if l >= n {
                return;
            }
            let r = l + 1;
            let c = if r < n && self.before(self.heap[r], self.heap[l]) { r } else { l };
            if !self.before(self.heap[c], self.heap[i]) {
                return;
            }
            self.heap.swap(i, c);
            i = c;
        }
    }

    /// Rebuilds the heap from every valid child, noting the first error of an invalid one.
    fn rebuild(&mut self) {
        self.heap.clear();
        self.error = None;
        for i in 0..self.children.len() {
            if self.children[i].valid() {
                self.heap.push(i);
            } else {
                self.note_status(i);
            }
        }
        for i in (0..self.heap.len() / 2).rev() {
            self.sift_down(i);
        }
    }

    fn note_status(&mut self, child: usize) {
        if self.error.is_none() {
            if let Err(e) = self.children[child].status() {
                self.error = Some(e);
            }
        }
    }

    /// After the top child moved: restore the heap, dropping the child if it ran out.
    fn fix_top(&mut self) {
        let Some(&top) = self.heap.first() else { return };
        if self.children[top].valid() {
            self.sift_down(0);
        } else {
            self.note_status(top);
            self.heap.swap_remove(0);
            self.sift_down(0);
        }
    }

    /// Repositions the non-current children after the current key, for forward iteration.
    fn switch_to_forward(&mut self) {
        let Some(&cur) = self.heap.first() else { return };
        self.key_buf.clear();
        self.key_buf.extend_from_slice(self.children[cur].key());
        for (i, child) in self.children.iter_mut().enumerate() {
            if i == cur {
                continue;
            }
            child.seek(&self.key_buf);
            if child.valid() && ikey::compare(child.key(), &self.key_buf) == Ordering::Equal {
                child.next();
            }
        }
        self.forward = true;
        self.children[cur].next();
        self.rebuild();
    }

    /// Repositions the non-current children before the current key, for backward iteration.
    fn switch_to_backward(&mut self) {
        let Some(&cur) = self.heap.first() else { return };
        self.key_buf.clear();
        self.key_buf.extend_from_slice(self.children[cur].key());
        for (i, child) in self.children.iter_mut().enumerate() {
            if i == cur {
                continue;
            }
            child.seek_for_prev(&self.key_buf);
            if child.valid() && ikey::compare(child.key(), &self.key_buf) == Ordering::Equal {
                child.prev();
            }
        }
        self.forward = false;
        self.children[cur].prev();
        self.rebuild();
    }
}

impl InternalIterator for MergingIterator {
    fn valid(&self) -> bool {
        self.error.is_none() && !self.heap.is_empty()
    }

    fn seek_to_first(&mut self) {
        self.children.iter_mut().for_each(|c| c.seek_to_first());
        self.forward = true;
        self.rebuild();
        self.skip_covered();
    }

    fn seek_to_last(&mut self) {
        self.children.iter_mut().for_each(|c| c.seek_to_last());
        self.forward = false;
        self.rebuild();
        self.skip_covered();
    }

    fn seek(&mut self, target: &[u8]) {
        self.children.iter_mut().for_each(|c| c.seek(target));
        self.forward = true;
        self.rebuild();
        self.skip_covered();
    }

    fn seek_for_prev(&mut self, target: &[u8]) {
        self.children.iter_mut().for_each(|c| c.seek_for_prev(target));
        self.forward = false;
        self.rebuild();
        self.skip_covered();
    }

    fn next(&mut self) {
        if !self.valid() {
            return;
        }
        if !self.forward {
            self.switch_to_forward();
        } else if let Some(&top) = self.heap.first() {
            self.children[top].next();
            self.fix_top();
        }
        self.skip_covered();
    }

    fn prev(&mut self) {
        if !self.valid() {
            return;
        }
        if self.forward {
            self.switch_to_backward();
        } else if let Some(&top) = self.heap.first() {
            self.children[top].prev();
            self.fix_top();
        }
        self.skip_covered();
    }

    fn key(&self) -> &[u8] {
        self.heap.first().map_or(&[], |&i| self.children[i].key())
    }

    fn value(&self) -> &[u8] {
        self.heap.first().map_or(&[], |&i| self.children[i].value())
    }

    fn status(&self) -> Result<()> {
        if let Some(e) = &self.error {
            return Err(e.clone());
        }
        self.children.iter().try_for_each(|c| c.status())
    }

    fn location(&self) -> Option<(&Path, u64)> {
        self.heap.first().and_then(|&i| self.children[i].location())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::iter::VecIter;
    use shaledb_format::ikey::{make_internal_key, ValueKind};

    fn ent(k: &str, seq: u64) -> (Vec<u8>, Vec<u8>) {
        (make_internal_key(k.as_bytes(), seq, ValueKind::Value), format!("{k}{seq}").into_bytes())
    }

    fn kids(sets: &[&[(&str, u64)]]) -> Vec<Box<dyn InternalIterator>> {
        sets.iter()
            .map(|s| Box::new(VecIter::new(s.iter().map(|&(k, q)| ent(k, q)).collect())) as Box<dyn InternalIterator>)
            .collect()
    }

    fn all_sorted(sets: &[&[(&str, u64)]]) -> Vec<Vec<u8>> {
        let mut v: Vec<Vec<u8>> = sets.iter().flat_map(|s| s.iter().map(|&(k, q)| ent(k, q).0)).collect();
        v.sort_by(|a, b| ikey::compare(a, b));
        v
    }

    const SETS: &[&[(&str, u64)]] =
        &[&[("a", 1), ("c", 5), ("e", 2)], &[], &[("b", 3), ("c", 7), ("f", 1)], &[("a", 9), ("d", 4), ("z", 8)]];

    #[test]
    fn merges_in_order_both_directions() {
        let want = all_sorted(SETS);
        let mut m = MergingIterator::new(kids(SETS));
        assert!(!m.valid());
        let mut got = Vec::new();
        m.seek_to_first();
        while m.valid() {
            got.push(m.key().to_vec());
            m.next();
        }
        assert_eq!(got, want);
        m.status().unwrap();
        let mut back = Vec::new();
        m.seek_to_last();
        while m.valid() {
            back.push(m.key().to_vec());
            m.prev();
        }
        back.reverse();
        assert_eq!(back, want);
    }

    #[test]
    fn direction_switches_match_the_sorted_list() {
        let want = all_sorted(SETS);
        let mut m = MergingIterator::new(kids(SETS));
        // A zig-zag walk: at each index step forward twice, back once, checking against the list.
        m.seek_to_first();
        let mut i = 0usize;
        let mut steps = 0;
        while m.valid() {
            assert_eq!(m.key(), want[i].as_slice(), "at step {steps}");
            if steps % 3 == 2 {
                m.prev();
                if i == 0 {
                    assert!(!m.valid());
                    break;
                }
                i -= 1;
            } else {
                m.next();
                i += 1;
            }
            steps += 1;
        }
        assert_eq!(i, want.len());
    }

    #[test]
    fn seeks_land_on_bounds() {
        let mut m = MergingIterator::new(kids(SETS));
        m.seek(&make_internal_key(b"c", 6, ValueKind::Value));
        assert_eq!(m.key(), ent("c", 5).0.as_slice());
        m.prev();
        assert_eq!(m.key(), ent("c", 7).0.as_slice());
        m.seek_for_prev(&make_internal_key(b"c", 6, ValueKind::Value));
        assert_eq!(m.key(), ent("c", 7).0.as_slice());
        m.next();
        assert_eq!(m.key(), ent("c", 5).0.as_slice());
        m.seek(&make_internal_key(b"zz", 1, ValueKind::Value));
        assert!(!m.valid());
        m.seek_for_prev(&make_internal_key(b"0", 1, ValueKind::Value));
        assert!(!m.valid());
        let mut empty = MergingIterator::new(Vec::new());
        empty.seek_to_first();
        assert!(!empty.valid());
        empty.status().unwrap();
    }

    #[test]
    fn child_error_invalidates_and_surfaces() {
        let good = VecIter::new(vec![ent("a", 1), ent("c", 1), ent("e", 1)]);
        let bad = VecIter::failing_at(vec![ent("b", 1), ent("d", 1)], 1);
        let mut m = MergingIterator::new(vec![Box::new(good), Box::new(bad)]);
        m.seek_to_first();
        assert_eq!(m.key(), ent("a", 1).0.as_slice());
        m.next();
        assert_eq!(m.key(), ent("b", 1).0.as_slice());
        m.next();
        assert!(!m.valid());
        assert!(m.status().unwrap_err().is_corruption());
    }
}
