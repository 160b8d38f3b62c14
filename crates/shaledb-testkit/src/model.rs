//! The oracle of model-based tests: what the database should hold, as a `BTreeMap`.

use std::collections::BTreeMap;
use std::ops::Bound;

/// A sorted key-value map with the engine's write operations, to compare the engine against.
///
/// Keys order bytewise, as the default comparator does. A snapshot is a clone: keep it and compare reads at
/// that snapshot against it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Model {
    map: BTreeMap<Vec<u8>, Vec<u8>>,
}

/// False when `BTreeMap::range` would panic on these bounds (start after end, or an empty excluded pair); such
/// a range holds nothing.
fn bounds_ok(start: Bound<&[u8]>, end: Bound<&[u8]>) -> bool {
    match (start, end) {
        (Bound::Excluded(s), Bound::Excluded(e)) => s < e,
        (Bound::Included(s) | Bound::Excluded(s), Bound::Included(e) | Bound::Excluded(e)) => s <= e,
        _ => true,
    }
}

impl Model {
    /// An empty model.
    pub fn new() -> Model {
        Model::default()
    }

    /// Sets `key` to `value`; returns the previous value.
    pub fn put(&mut self, key: &[u8], value: &[u8]) -> Option<Vec<u8>> {
        self.map.insert(key.to_vec(), value.to_vec())
    }

    /// Removes `key`; returns the previous value.
    pub fn delete(&mut self, key: &[u8]) -> Option<Vec<u8>> {
        self.map.remove(key)
    }

    /// Removes `key` with a single deletion: for reads the same as [`Model::delete`] (the engine's contract,
    /// one put since the last single deletion, is the generator's to keep; see
    /// `workload::SingleDeleteMix`). Returns the previous value.
    pub fn single_delete(&mut self, key: &[u8]) -> Option<Vec<u8>> {
        self.map.remove(key)
    }

    /// Removes every key in `[start, end)`; returns how many there were. Nothing happens when `start >= end`.
    pub fn delete_range(&mut self, start: &[u8], end: &[u8]) -> usize {
        let doomed: Vec<Vec<u8>> =
            self.range(Bound::Included(start), Bound::Excluded(end)).map(|(k, _)| k.to_vec()).collect();
        for key in &doomed {
            self.map.remove(key);
        }
        doomed.len()
    }

    /// Applies a merge: `merge(existing, operand)` gives the new value of `key` (e.g.
    /// `|old, op| operator.full_merge(key, old, &[op])`). When it returns `None` (operands the operator rejects,
    /// which the engine reports as corruption on read) the model is left unchanged and `false` is returned.
    pub fn merge<F>(&mut self, key: &[u8], operand: &[u8], merge: F) -> bool
    where
        F: FnOnce(Option<&[u8]>, &[u8]) -> Option<Vec<u8>>,
    {
        match merge(self.get(key), operand) {
            Some(value) => {
                self.map.insert(key.to_vec(), value);
                true
            }
            None => false,
        }
    }

    /// The value of `key`.
    pub fn get(&self, key: &[u8]) -> Option<&[u8]> {
        self.map.get(key).map(Vec::as_slice)
    }

    /// Entries within the bounds, ascending (`.rev()` for descending, or see [`Model::range_rev`]). Bounds with
    /// start after end give nothing.
    pub fn range(
        &self,
        start: Bound<&[u8]>,
        end: Bound<&[u8]>,
    ) -> impl DoubleEndedIterator<Item = (&[u8], &[u8])> + '_ {
        bounds_ok(start, end)
            .then(|| self.map.range::<[u8], _>((start, end)))
            .into_iter()
            .flatten()
            .map(|(k, v)| (k.as_slice(), v.as_slice()))
    }

    /// Entries within the bounds, descending.
    pub fn range_rev(&self, start: Bound<&[u8]>, end: Bound<&[u8]>) -> impl Iterator<Item = (&[u8], &[u8])> + '_ {
        self.range(start, end).rev()
    }

    /// Every entry, ascending.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = (&[u8], &[u8])> + '_ {
        self.map.iter().map(|(k, v)| (k.as_slice(), v.as_slice()))
    }

    /// The first entry at or after `key` (where an iterator's `seek` lands).
    pub fn seek(&self, key: &[u8]) -> Option<(&[u8], &[u8])> {
        self.range(Bound::Included(key), Bound::Unbounded).next()
    }

    /// The last entry at or before `key` (where an iterator's `seek_for_prev` lands).
    pub fn seek_for_prev(&self, key: &[u8]) -> Option<(&[u8], &[u8])> {
        self.range(Bound::Unbounded, Bound::Included(key)).next_back()
    }

    /// A frozen copy of the current state.
    pub fn snapshot(&self) -> Model {
        self.clone()
    }

    /// Number of live keys.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// True when no key is live.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys<'a>(it: impl Iterator<Item = (&'a [u8], &'a [u8])>) -> Vec<&'a [u8]> {
        it.map(|(k, _)| k).collect()
    }

    fn abcde() -> Model {
        let mut m = Model::new();
        for k in [&b"a"[..], b"b", b"c", b"d", b"e"] {
            m.put(k, &[k[0].to_ascii_uppercase()]);
        }
        m
    }

    #[test]
    fn put_get_delete() {
        let mut m = Model::new();
        assert_eq!(m.put(b"k", b"1"), None);
        assert_eq!(m.put(b"k", b"2"), Some(b"1".to_vec()));
        assert_eq!(m.get(b"k"), Some(&b"2"[..]));
        assert_eq!(m.delete(b"k"), Some(b"2".to_vec()));
        assert_eq!(m.delete(b"k"), None);
        assert_eq!(m.get(b"k"), None);
        assert!(m.is_empty());
    }

    #[test]
    fn merge_applies_closure_to_existing_value() {
        let append = |old: Option<&[u8]>, op: &[u8]| {
            let mut v = old.map(<[u8]>::to_vec).unwrap_or_default();
            v.extend_from_slice(op);
            Some(v)
        };
        let mut m = Model::new();
        assert!(m.merge(b"k", b"x", append));
        assert!(m.merge(b"k", b"y", append));
        assert_eq!(m.get(b"k"), Some(&b"xy"[..]));
        assert!(!m.merge(b"k", b"z", |_, _| None));
        assert_eq!(m.get(b"k"), Some(&b"xy"[..]), "rejected merge changes nothing");
        assert!(!m.merge(b"absent", b"z", |_, _| None));
        assert_eq!(m.get(b"absent"), None);
    }

    #[test]
    fn range_both_ways_with_every_bound_kind() {
        let m = abcde();
        let (b, d): (&[u8], &[u8]) = (b"b", b"d");
        assert_eq!(keys(m.range(Bound::Included(b), Bound::Excluded(d))), vec![b"b", b"c"]);
        assert_eq!(keys(m.range(Bound::Excluded(b), Bound::Included(d))), vec![b"c", b"d"]);
        assert_eq!(keys(m.range_rev(Bound::Included(b), Bound::Included(d))), vec![b"d", b"c", b"b"]);
        assert_eq!(keys(m.range_rev(Bound::Unbounded, Bound::Excluded(b))), vec![b"a"]);
        assert_eq!(keys(m.range(Bound::Excluded(d), Bound::Unbounded)), vec![b"e"]);
        assert_eq!(keys(m.iter().rev()).len(), 5);
    }

    #[test]
    fn inverted_or_empty_bounds_give_nothing_instead_of_panicking() {
        let m = abcde();
        let (b, d): (&[u8], &[u8]) = (b"b", b"d");
        assert_eq!(m.range(Bound::Included(d), Bound::Included(b)).count(), 0);
        assert_eq!(m.range(Bound::Excluded(b), Bound::Excluded(b)).count(), 0);
        assert_eq!(m.range(Bound::Included(b), Bound::Excluded(b)).count(), 0);
        assert_eq!(keys(m.range(Bound::Included(b), Bound::Included(b))), vec![b"b"]);
    }

    #[test]
    fn seek_and_seek_for_prev() {
        let m = abcde();
        assert_eq!(m.seek(b"bb"), Some((&b"c"[..], &b"C"[..])));
        assert_eq!(m.seek(b"c").map(|(k, _)| k), Some(&b"c"[..]));
        assert_eq!(m.seek(b"f"), None);
        assert_eq!(m.seek_for_prev(b"bb").map(|(k, _)| k), Some(&b"b"[..]));
        assert_eq!(m.seek_for_prev(b"c").map(|(k, _)| k), Some(&b"c"[..]));
        assert_eq!(m.seek_for_prev(b""), None);
    }

    #[test]
    fn delete_range_is_half_open() {
        let mut m = abcde();
        assert_eq!(m.delete_range(b"b", b"d"), 2);
        assert_eq!(keys(m.iter()), vec![&b"a"[..], b"d", b"e"]);
        assert_eq!(m.delete_range(b"e", b"a"), 0);
        assert_eq!(m.len(), 3);
    }

    #[test]
    fn snapshot_is_frozen() {
        let mut m = abcde();
        let snap = m.snapshot();
        m.put(b"a", b"changed");
        m.delete(b"e");
        assert_eq!(snap.get(b"a"), Some(&b"A"[..]));
        assert_eq!(snap.get(b"e"), Some(&b"E"[..]));
        assert_ne!(snap, m);
    }
}
