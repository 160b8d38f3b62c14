//! Subcompactions: one large compaction split by key range into pieces that run on their own threads
//! (`Options::max_subcompactions`, RocksDB's option of that name).
//!
//! Which jobs are split ([`should_split`]), as RocksDB 7.8's `Compaction::ShouldFormSubcompactions`:
//! under leveled compaction a job reading level 0, or a manual one (`compact_range`), into a level below 0;
//! under universal compaction a merge into a level below 0; never under FIFO, never a trivial move or a drop.
//! An automatic Ln -> Ln+1 job (n >= 1) is not split, as in RocksDB: it already reads one file of Ln and the
//! few of Ln+1 under it, and several such jobs run at once on the `max_background_jobs` threads.
//!
//! Where the cuts go ([`choose_boundaries`], after RocksDB's `CompactionJob::GenSubcompactionBoundaries`):
//! every input table contributes one *anchor* per data block, the user key of the block's index separator
//! with the block's size ([`table_anchors`]; a table whose index cannot be read contributes one anchor, its
//! largest key with its file size). The anchors of all inputs are sorted by key (duplicates dropped) and
//! walked in order adding up sizes; each time the sum passes the next multiple of the target piece size
//! (the inputs' total over `max_subcompactions`, but at least one output file, `min_piece_bytes`) that
//! anchor's key becomes a boundary. Anchors of different files overlap, so the sums are an estimate, as in
//! RocksDB.
//!
//! A boundary `b` splits the key space *after* `b`: a piece holds the user keys in `(previous boundary, b]`
//! ([`Piece`]). RocksDB's pieces are `[b_i, b_i+1)`; ShaleDB cuts after the key instead so that a range
//! tombstone crossing a boundary is split at `b ++ 0x00`, the first key after `b`, exactly as an output file
//! cut splits it ([`super::range_del`]): the left piece's last file then ends at `b` itself and the right
//! piece's first file starts past it, so the files of the output level never overlap. One user key's
//! versions are always in one piece.

use crate::options::limits::MAX_SUBCOMPACTIONS;
use crate::picker::{CompactionReason, CompactionTask};
use crate::range_del::{Fragment, Fragments};
use shaledb_format::block::{BlockIter, KeyOrder};
use shaledb_format::edit::FileMeta;
use shaledb_format::ikey::{self, ValueKind, KIND_FOR_SEEK, MAX_SEQUENCE};
use shaledb_format::iter::InternalIterator;
use shaledb_format::table::{BlockHandle, Table};
use shaledb_vfs::Result;
use std::path::Path;

/// Checks `max_subcompactions` (in `1..=MAX_SUBCOMPACTIONS`).
pub(crate) fn validate_options(o: &crate::Options) -> Result<()> {
    if !(1..=MAX_SUBCOMPACTIONS).contains(&o.max_subcompactions) {
        return Err(shaledb_vfs::Error::InvalidArgument(format!(
            "max_subcompactions must be in 1..={MAX_SUBCOMPACTIONS} (one thread per piece of a compaction), got {}",
            o.max_subcompactions
        )));
    }
    Ok(())
}

/// True when `task` may be split into subcompactions under `o` (see the module documentation).
pub(crate) fn should_split(task: &CompactionTask, o: &crate::Options) -> bool {
    use crate::compaction_style::CompactionStyle;
    if o.max_subcompactions <= 1 || task.drop_only || task.trivial_move || task.output_level == 0 {
        return false;
    }
    match o.compaction_style {
        CompactionStyle::Level => task.level == 0 || task.reason == CompactionReason::ManualCompaction,
        CompactionStyle::Universal => true,
        CompactionStyle::Fifo => false,
    }
}

/// A point of an input table: its data up to `user_key` takes about `size` bytes from the previous anchor.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Anchor {
    /// A user key (a block's index separator: at or after the block's last key, before the next block's).
    pub user_key: Vec<u8>,
    /// Bytes of the block ending at it.
    pub size: u64,
}

/// One anchor per data block of `table`, in key order; one anchor (the largest key, the file size) when the
/// index cannot be read or holds nothing.
pub(crate) fn table_anchors(table: &Table, meta: &FileMeta) -> Vec<Anchor> {
    let fallback = || vec![Anchor { user_key: meta.largest_user_key().to_vec(), size: meta.file_size }];
    let Ok((index, _)) = table.index() else { return fallback() };
    let mut it = BlockIter::new(index, KeyOrder::Internal);
    it.seek_to_first();
    let mut out = Vec::new();
    while it.valid() {
        let (Some(p), Some(h)) = (ikey::parse(it.key()), BlockHandle::decode_exact(it.value())) else {
            return fallback();
        };
        out.push(Anchor { user_key: p.user_key.to_vec(), size: h.size });
        it.next();
    }
    if it.status().is_err() || out.is_empty() {
        return fallback();
    }
    out
}

/// The boundaries splitting the inputs whose `anchors` are given into at most `max_pieces` pieces of at least
/// `min_piece_bytes` each (see the module documentation): ascending user keys, at most `max_pieces - 1` of
/// them, never the largest anchor (a piece after it would be empty). Empty: do not split.
pub(crate) fn choose_boundaries(mut anchors: Vec<Anchor>, max_pieces: usize, min_piece_bytes: u64) -> Vec<Vec<u8>> {
    if max_pieces <= 1 || anchors.len() < 2 {
        return Vec::new();
    }
    anchors.sort_by(|a, b| a.user_key.cmp(&b.user_key));
    anchors.dedup_by(|a, b| a.user_key == b.user_key);
    let total: u64 = anchors.iter().map(|a| a.size).fold(0, u64::saturating_add);
    let target = (total / max_pieces as u64).max(min_piece_bytes).max(1);
    if target >= total {
        return Vec::new();
    }
    let mut boundaries = Vec::new();
    let (mut sum, mut next) = (0u64, target);
    // The last anchor is never a boundary: nothing of the inputs lies after it.
    let Some((_, body)) = anchors.split_last() else { return boundaries };
    for a in body {
        sum = sum.saturating_add(a.size);
        if sum > next {
            next = next.saturating_add(target);
            boundaries.push(a.user_key.clone());
            if boundaries.len() + 1 >= max_pieces {
                break;
            }
        }
    }
    boundaries
}

/// One piece of a split job: the user keys in `(after, through]` (`None`: unbounded on that side).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Piece {
    /// Every key of the piece is greater than this one.
    pub after: Option<Vec<u8>>,
    /// Every key of the piece is at most this one.
    pub through: Option<Vec<u8>>,
}

impl Piece {
    /// The pieces `boundaries` (ascending) cut the key space into, in key order: `boundaries.len() + 1` of them.
    pub(crate) fn split(boundaries: &[Vec<u8>]) -> Vec<Piece> {
        let mut out = Vec::with_capacity(boundaries.len() + 1);
        let mut after: Option<Vec<u8>> = None;
        for b in boundaries {
            out.push(Piece { after: after.take(), through: Some(b.clone()) });
            after = Some(b.clone());
        }
        out.push(Piece { after, through: None });
        out
    }

    /// True when `user_key` is in the piece.
    #[cfg(test)]
    pub(crate) fn contains(&self, user_key: &[u8]) -> bool {
        self.after.as_deref().is_none_or(|a| user_key > a) && self.through.as_deref().is_none_or(|t| user_key <= t)
    }

    /// True when the file's key range (tombstones included) meets the piece.
    pub(crate) fn overlaps(&self, f: &FileMeta) -> bool {
        self.after.as_deref().is_none_or(|a| f.largest_user_key() > a)
            && self.through.as_deref().is_none_or(|t| f.smallest_user_key() <= t)
    }

    /// The fragments of `all` inside the piece: `[after ++ 0x00, through ++ 0x00)`, fragments crossing an edge
    /// cut there.
    pub(crate) fn clip(&self, all: &Fragments) -> Fragments {
        let lo = self.after.as_deref().map(successor);
        let hi = self.through.as_deref().map(successor);
        let mut out: Vec<Fragment> = Vec::new();
        for f in all.fragments() {
            let start = match &lo {
                Some(lo) if f.start < *lo => lo.clone(),
                _ => f.start.clone(),
            };
            let end = match &hi {
                Some(hi) if f.end > *hi => hi.clone(),
                _ => f.end.clone(),
            };
            if start < end {
                out.push(Fragment { start, end, seqs: f.seqs.clone() });
            }
        }
        Fragments::from_disjoint(out)
    }
}

/// The first user key after `k`.
fn successor(k: &[u8]) -> Vec<u8> {
    let mut s = Vec::with_capacity(k.len() + 1);
    s.extend_from_slice(k);
    s.push(0);
    s
}

/// `inner` restricted to the entries whose user key is in a [`Piece`].
pub(crate) struct PieceIter<I> {
    inner: I,
    piece: Piece,
    /// The seek target of the piece's first key (`None`: the start of `inner`).
    first: Option<Vec<u8>>,
    /// The seek-for-prev target of the piece's last key (`None`: the end of `inner`).
    last: Option<Vec<u8>>,
    /// Positioned before the piece (after a backward move past its start).
    below: bool,
}

impl<I: InternalIterator> PieceIter<I> {
    /// `inner` restricted to `piece`; unpositioned.
    pub(crate) fn new(inner: I, piece: Piece) -> PieceIter<I> {
        let first = piece.after.as_deref().map(|a| ikey::make_internal_key(&successor(a), MAX_SEQUENCE, KIND_FOR_SEEK));
        // The last internal key of a user key: sequence 0, the smallest kind.
        let last = piece.through.as_deref().map(|t| ikey::make_internal_key(t, 0, ValueKind::Deletion));
        PieceIter { inner, piece, first, last, below: false }
    }

    /// After a backward move: notes whether `inner` went below the piece.
    fn check_below(&mut self) {
        self.below =
            self.inner.valid() && self.piece.after.as_deref().is_some_and(|a| ikey::user_key(self.inner.key()) <= a);
    }
}

impl<I: InternalIterator> InternalIterator for PieceIter<I> {
    fn valid(&self) -> bool {
        !self.below
            && self.inner.valid()
            && self.piece.through.as_deref().is_none_or(|t| ikey::user_key(self.inner.key()) <= t)
    }
    fn seek_to_first(&mut self) {
        self.below = false;
        match &self.first {
            Some(k) => self.inner.seek(k),
            None => self.inner.seek_to_first(),
        }
    }
    fn seek_to_last(&mut self) {
        match &self.last {
            Some(k) => self.inner.seek_for_prev(k),
            None => self.inner.seek_to_last(),
        }
        self.check_below();
    }
    fn seek(&mut self, target: &[u8]) {
        self.below = false;
        match &self.first {
            Some(k) if ikey::compare(target, k).is_lt() => self.inner.seek(k),
            _ => self.inner.seek(target),
        }
    }
    fn seek_for_prev(&mut self, target: &[u8]) {
        match &self.last {
            Some(k) if ikey::compare(target, k).is_gt() => self.inner.seek_for_prev(k),
            _ => self.inner.seek_for_prev(target),
        }
        self.check_below();
    }
    fn next(&mut self) {
        self.inner.next()
    }
    fn prev(&mut self) {
        self.inner.prev();
        self.check_below();
    }
    fn key(&self) -> &[u8] {
        self.inner.key()
    }
    fn value(&self) -> &[u8] {
        self.inner.value()
    }
    fn status(&self) -> Result<()> {
        self.inner.status()
    }
    fn location(&self) -> Option<(&Path, u64)> {
        self.inner.location()
    }
}

#[cfg(test)]
#[path = "subcompaction_tests.rs"]
mod tests;
