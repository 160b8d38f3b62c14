//! [`Iter`]: a [`Cursor`] as a double-ended Rust iterator of owned pairs, and [`KeyRange`]: the key ranges
//! [`crate::Db::range`] accepts.

use super::Cursor;
use shaledb_vfs::Result;
use std::iter::FusedIterator;
use std::ops::{self, Bound};

/// A range of keys: what [`crate::Db::range`] takes. Implemented for every range expression whose bounds are
/// byte strings of one type `K: AsRef<[u8]>` (`b"a"..b"z"`, `"a"..="m"`, `key..`, `..end`, `..`,
/// `Vec<u8>`/`String`/`&[u8]` bounds) and for a pair of [`Bound`]s.
///
/// Why not `impl RangeBounds<K>`: for `b"a"..b"z"` the compiler cannot choose between `K = &[u8; 1]` and
/// `K = [u8; 1]` (std implements `RangeBounds<T>` for `Range<&T>` too), so the most common form would need a
/// type annotation. This trait names the range types themselves, so every form infers.
///
/// Both ends of `a..b` have one type: `b"a"..b"zz"` mixes `&[u8; 1]` and `&[u8; 2]` and does not compile;
/// write `"a".."zz"`, or slice both ends (`&b"a"[..]..&b"zz"[..]`).
///
/// Sealed: implemented by ShaleDB only.
pub trait KeyRange: sealed::Sealed {
    /// The start and end bounds as byte strings.
    fn key_bounds(&self) -> (Bound<&[u8]>, Bound<&[u8]>);
}

mod sealed {
    pub trait Sealed {}
}

fn as_bytes<K: AsRef<[u8]>>(b: Bound<&K>) -> Bound<&[u8]> {
    match b {
        Bound::Included(k) => Bound::Included(k.as_ref()),
        Bound::Excluded(k) => Bound::Excluded(k.as_ref()),
        Bound::Unbounded => Bound::Unbounded,
    }
}

macro_rules! key_range {
    ($($ty:ty),*) => {$(
        impl<K: AsRef<[u8]>> sealed::Sealed for $ty {}
        impl<K: AsRef<[u8]>> KeyRange for $ty {
            fn key_bounds(&self) -> (Bound<&[u8]>, Bound<&[u8]>) {
                (as_bytes(ops::RangeBounds::start_bound(self)), as_bytes(ops::RangeBounds::end_bound(self)))
            }
        }
    )*};
}

key_range!(
    ops::Range<K>,
    ops::RangeInclusive<K>,
    ops::RangeFrom<K>,
    ops::RangeTo<K>,
    ops::RangeToInclusive<K>,
    (Bound<K>, Bound<K>)
);

impl sealed::Sealed for ops::RangeFull {}
impl KeyRange for ops::RangeFull {
    fn key_bounds(&self) -> (Bound<&[u8]>, Bound<&[u8]>) {
        (Bound::Unbounded, Bound::Unbounded)
    }
}

/// The iterator bounds (inclusive lower, exclusive upper) of `range` within the bounds already set in `lower`
/// and `upper`: the intersection of the two.
pub(crate) fn narrow_bounds(range: &impl KeyRange, lower: &mut Option<Vec<u8>>, upper: &mut Option<Vec<u8>>) {
    let (start, end) = range.key_bounds();
    let start = match start {
        Bound::Included(k) => Some(k.to_vec()),
        // The smallest key greater than k: k followed by a zero byte.
        Bound::Excluded(k) => Some([k, &[0]].concat()),
        Bound::Unbounded => None,
    };
    let end = match end {
        Bound::Excluded(k) => Some(k.to_vec()),
        // The smallest key greater than k is the exclusive bound that admits k.
        Bound::Included(k) => Some([k, &[0]].concat()),
        Bound::Unbounded => None,
    };
    if let Some(s) = start {
        if lower.as_ref().is_none_or(|l| s > *l) {
            *lower = Some(s);
        }
    }
    if let Some(e) = end {
        if upper.as_ref().is_none_or(|u| e < *u) {
            *upper = Some(e);
        }
    }
}

/// The exclusive upper bound of the keys starting with `prefix`: the prefix with its trailing 0xff bytes
/// dropped and its last byte incremented; `None` (no bound) when the prefix is empty or all 0xff.
pub(crate) fn prefix_upper_bound(prefix: &[u8]) -> Option<Vec<u8>> {
    let keep = prefix.iter().rposition(|&b| b != 0xff)?;
    let mut upper = prefix[..=keep].to_vec();
    upper[keep] += 1;
    Some(upper)
}

/// Which end of the range the underlying cursor last served.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Side {
    /// Not positioned yet.
    None,
    Front,
    Back,
}

/// The key/value pairs of a bounded, consistent view, in key order; also iterable from the back
/// ([`DoubleEndedIterator`]), the two ends meeting without overlap. Returned by [`crate::Db::iter`],
/// [`crate::Db::range`] and [`crate::Db::prefix`] (and their `_opt` forms).
///
/// One cursor serves both ends: it re-seeks only when the caller alternates between them. An error is
/// yielded once as `Some(Err(..))`, after which the iterator is exhausted ([`FusedIterator`]).
///
/// ```
/// # let dir = tempfile::tempdir().unwrap();
/// # let db = shaledb::Db::open(dir.path(), shaledb::Options::default())?;
/// for k in ["a", "b", "c", "d"] {
///     db.put(k, "")?;
/// }
/// let mut it = db.iter();
/// assert_eq!(it.next().transpose()?.map(|(k, _)| k), Some(b"a".to_vec()));
/// assert_eq!(it.next_back().transpose()?.map(|(k, _)| k), Some(b"d".to_vec()));
/// let rest: Vec<_> = it.map(|e| e.map(|(k, _)| k)).collect::<Result<_, _>>()?;
/// assert_eq!(rest, [b"b".to_vec(), b"c".to_vec()]);
/// # Ok::<(), shaledb::Error>(())
/// ```
#[derive(Debug)]
pub struct Iter {
    it: Cursor,
    side: Side,
    /// Last key yielded from the front, saved only when the cursor leaves the front (`has_front`).
    front_key: Vec<u8>,
    has_front: bool,
    /// Last key yielded from the back (`has_back`), saved the same way.
    back_key: Vec<u8>,
    has_back: bool,
    done: bool,
}

impl Iter {
    /// The range of `it`'s view within its bounds; `it`'s position is ignored.
    pub(crate) fn new(it: Cursor) -> Iter {
        Iter {
            it,
            side: Side::None,
            front_key: Vec::new(),
            has_front: false,
            back_key: Vec::new(),
            has_back: false,
            done: false,
        }
    }

    /// The cursor is about to leave `side`: remember where that end stands.
    fn save_side(&mut self) {
        if !self.it.valid() {
            return;
        }
        match self.side {
            Side::Front => {
                self.front_key.clear();
                self.front_key.extend_from_slice(self.it.key());
                self.has_front = true;
            }
            Side::Back => {
                self.back_key.clear();
                self.back_key.extend_from_slice(self.it.key());
                self.has_back = true;
            }
            Side::None => {}
        }
    }

    /// Yields the cursor's entry unless it is exhausted, failed, or crossed into the other end's territory.
    fn take(&mut self, crossed: bool) -> Option<Result<(Vec<u8>, Vec<u8>)>> {
        if !self.it.valid() {
            self.done = true;
            return self.it.status().err().map(Err);
        }
        if crossed {
            self.done = true;
            return None;
        }
        Some(Ok((self.it.key().to_vec(), self.it.value().to_vec())))
    }
}

impl Iterator for Iter {
    type Item = Result<(Vec<u8>, Vec<u8>)>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        match self.side {
            Side::Front => self.it.next(),
            Side::None | Side::Back => {
                self.save_side();
                if self.has_front {
                    let front = std::mem::take(&mut self.front_key);
                    self.it.seek(&front);
                    if self.it.valid() && self.it.key() == front.as_slice() {
                        self.it.next();
                    }
                    self.front_key = front;
                } else {
                    self.it.seek_to_first();
                }
                self.side = Side::Front;
            }
        }
        let crossed = self.has_back && self.it.valid() && self.it.key() >= self.back_key.as_slice();
        self.take(crossed)
    }
}

impl FusedIterator for Iter {}

impl DoubleEndedIterator for Iter {
    fn next_back(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        match self.side {
            Side::Back => self.it.prev(),
            Side::None | Side::Front => {
                self.save_side();
                if self.has_back {
                    let back = std::mem::take(&mut self.back_key);
                    self.it.seek_for_prev(&back);
                    if self.it.valid() && self.it.key() == back.as_slice() {
                        self.it.prev();
                    }
                    self.back_key = back;
                } else {
                    self.it.seek_to_last();
                }
                self.side = Side::Back;
            }
        }
        let crossed = self.has_front && self.it.valid() && self.it.key() <= self.front_key.as_slice();
        self.take(crossed)
    }
}
