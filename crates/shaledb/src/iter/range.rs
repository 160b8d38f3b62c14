//! [`Range`]: a [`DbIterator`] as a double-ended Rust iterator of owned pairs.

use super::DbIterator;
use shaledb_vfs::Result;

/// Which end of the range the underlying cursor last served.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Side {
    /// Not positioned yet.
    None,
    Front,
    Back,
}

/// The key/value pairs of a bounded, consistent view, in key order; also iterable from the back
/// ([`DoubleEndedIterator`]), the two ends meeting without overlap.
///
/// One cursor serves both ends: it re-seeks only when the caller alternates between them. An error is
/// yielded once as `Some(Err(..))`, after which the range is exhausted.
#[derive(Debug)]
pub struct Range {
    it: DbIterator,
    side: Side,
    /// Last key yielded from the front, saved only when the cursor leaves the front (`has_front`).
    front_key: Vec<u8>,
    has_front: bool,
    /// Last key yielded from the back (`has_back`), saved the same way.
    back_key: Vec<u8>,
    has_back: bool,
    done: bool,
}

impl Range {
    /// The range of `it`'s view within its bounds; `it`'s position is ignored.
    pub(crate) fn new(it: DbIterator) -> Range {
        Range {
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

impl Iterator for Range {
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

impl DoubleEndedIterator for Range {
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
