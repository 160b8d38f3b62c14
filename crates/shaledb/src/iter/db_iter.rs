//! The user-facing iterator: one snapshot's key/value view over internal entries.
//!
//! Per user key the newest entry with `seq <= snapshot` decides: a value is yielded, a deletion hides the
//! key, merge operands are combined with the value (or deletion, or nothing) below them.
//!
//! Forward, the inner iterator rests on the entry that decided the current key; when that entry is a plain
//! value, `key()`/`value()` borrow it without copying. Backward, the inner iterator rests on the last entry
//! *before* the current key (all of the key's versions have to be read, oldest to newest, to decide it), so
//! the key and value are copied into reusable buffers. Direction switches re-seek around the current key.

use crate::lookup::{no_merge_operator, MEMTABLE};
use crate::merge::MergeOperator;
use crate::prefix::PrefixScope;
use crate::ttl::{self, Ttl};
use shaledb_format::ikey::{self, ParsedKey, ValueKind, KIND_FOR_SEEK, MAX_SEQUENCE};
use shaledb_format::iter::InternalIterator;
use shaledb_vfs::{Error, Result};
use std::any::Any;
use std::path::PathBuf;
use std::sync::Arc;

/// Entries of one user key a forward step reads one by one before it seeks past the rest (RocksDB's
/// `max_sequential_skip_in_iterations`, default 8): a key rewritten a million times in the memtable costs
/// one seek, not a million steps, to pass.
const MAX_SEQUENTIAL_SKIP: usize = 8;

/// Rebuilds a cursor's view at the latest sequence and current version: its internal iterator, sequence and
/// pin (see [`Cursor::refresh`]).
pub(crate) type RefreshFn =
    Box<dyn Fn() -> Result<(Box<dyn InternalIterator>, u64, Box<dyn Any + Send + Sync>)> + Send + Sync>;

/// Where `key()`/`value()` come from.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Current {
    /// Not positioned on a key.
    None,
    /// The inner iterator's entry (forward, plain value).
    Inner,
    /// `key_buf` / `value_buf`.
    Saved,
}

/// A cursor over the user keys and values of the database as of one snapshot, within optional bounds: RocksDB's
/// `Iterator`, for seek-heavy work (many seeks on one view, stepping both ways without copying each entry).
/// For a plain scan, [`crate::Db::iter`], [`crate::Db::range`] and [`crate::Db::prefix`] return a Rust
/// [`Iterator`] instead.
///
/// Obtained from [`crate::Db::cursor`]; it keeps the memtables, tables and snapshot it reads alive until
/// dropped. Positioning calls (`seek*`, `next`, `prev`) never fail directly: after an error [`Cursor::valid`]
/// is false and [`Cursor::status`] returns the error.
///
/// ```
/// # let dir = tempfile::tempdir().unwrap();
/// # let db = shaledb::Db::open(dir.path(), shaledb::Options::default())?;
/// for k in ["a", "b", "c", "d"] {
///     db.put(k, k.to_uppercase())?;
/// }
/// let mut cursor = db.cursor();
/// cursor.seek("b"); // the first key >= "b"
/// assert_eq!((cursor.key(), cursor.value()), (&b"b"[..], &b"B"[..]));
/// cursor.next();
/// assert_eq!(cursor.key(), b"c");
/// cursor.seek_for_prev("bz"); // the last key <= "bz"
/// assert_eq!(cursor.key(), b"b");
/// cursor.prev();
/// cursor.prev();
/// assert!(!cursor.valid()); // stepped off the front
/// cursor.status()?; // why it stopped: the end, or an error
/// # Ok::<(), shaledb::Error>(())
/// ```
pub struct Cursor {
    inner: Box<dyn InternalIterator>,
    seq: u64,
    merge: Option<Arc<dyn MergeOperator>>,
    lower: Option<Vec<u8>>,
    upper: Option<Vec<u8>>,
    forward: bool,
    current: Current,
    error: Option<Error>,
    key_buf: Vec<u8>,
    value_buf: Vec<u8>,
    /// Merge operands of the current key, concatenated; `op_ends[i]` ends operand `i`.
    ops: Vec<u8>,
    op_ends: Vec<usize>,
    /// Where the newest merge operand of the key being merged is stored, for the error if the merge
    /// operator rejects the operands.
    merge_at: Option<(PathBuf, u64)>,
    /// Scratch internal key for seeks.
    seek_buf: Vec<u8>,
    /// [`crate::ReadOptions::prefix_same_as_start`]: the scope shared with the sources, and the bounds the
    /// caller gave (`lower`/`upper` narrow to the prefix's range while a seek is confined to it).
    prefix: Option<Confinement>,
    /// `None` when the cursor cannot be refreshed (it reads a snapshot, or a read-only database).
    refresh: Option<RefreshFn>,
    /// TTL mode (`crate::ttl`): values lose their timestamp; expired ones are skipped when asked.
    ttl: Option<TtlView>,
    /// Resolves blob references (kind `0x11`) to their values.
    blobs: Option<Arc<crate::blob::BlobFiles>>,
    /// `ReadTier::BlockCacheOnly`: blob references are not read.
    blobs_cache_only: bool,
    /// Backward: `value_buf` holds a blob reference not yet resolved.
    blob_pending: bool,
    /// Declared last so the iterators above drop before what they read from.
    _pin: Box<dyn Any + Send + Sync>,
}

/// A cursor's prefix confinement: the scope it shares with its sources and the caller's own bounds.
struct Confinement {
    scope: Arc<PrefixScope>,
    lower: Option<Vec<u8>>,
    upper: Option<Vec<u8>>,
}

impl std::fmt::Debug for Cursor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cursor")
            .field("seq", &self.seq)
            .field("valid", &self.valid())
            .field("forward", &self.forward)
            .field("error", &self.error)
            .finish_non_exhaustive()
    }
}

impl Cursor {
    /// An unpositioned iterator over `inner` (internal entries of all sources, merged) as of `seq`.
    /// `lower` is inclusive and `upper` exclusive; `pin` is held until the iterator drops.
    pub(crate) fn new(
        inner: Box<dyn InternalIterator>,
        seq: u64,
        merge: Option<Arc<dyn MergeOperator>>,
        lower: Option<Vec<u8>>,
        upper: Option<Vec<u8>>,
        pin: Box<dyn Any + Send + Sync>,
    ) -> Cursor {
        Cursor {
            inner,
            // A read bound, not an entry's number: no entry is newer than MAX_SEQUENCE, so reading as of a
            // larger number is exactly reading as of MAX_SEQUENCE.
            seq: seq.min(MAX_SEQUENCE),
            merge,
            lower,
            upper,
            forward: true,
            current: Current::None,
            error: None,
            key_buf: Vec::new(),
            value_buf: Vec::new(),
            ops: Vec::new(),
            op_ends: Vec::new(),
            merge_at: None,
            seek_buf: Vec::new(),
            prefix: None,
            refresh: None,
            ttl: None,
            blobs: None,
            blobs_cache_only: false,
            blob_pending: false,
            _pin: pin,
        }
    }

    /// Resolves blob references through `blobs`; with `cache_only` (`ReadTier::BlockCacheOnly`) a blob
    /// reference stops the cursor with [`Error::Incomplete`] instead of being read.
    pub(crate) fn with_blobs(mut self, blobs: Arc<crate::blob::BlobFiles>, cache_only: bool) -> Cursor {
        self.blobs = Some(blobs);
        self.blobs_cache_only = cache_only;
        self
    }

    /// Reads the value the blob reference `raw` names for `key_buf` into `value_buf`; false (with the error
    /// recorded) when it cannot.
    fn resolve_blob(&mut self, raw: &[u8]) -> bool {
        let Some(blobs) = &self.blobs else {
            self.error = Some(Error::InvalidArgument("a blob reference met by a cursor without blob files".into()));
            return false;
        };
        if self.blobs_cache_only {
            self.error = Some(Error::Incomplete("a value is in a blob file".into()));
            return false;
        }
        let mut out = std::mem::take(&mut self.value_buf);
        let r = blobs.resolve(&self.key_buf, raw, None, &mut out);
        self.value_buf = out;
        match r {
            Ok(()) => true,
            Err(e) => {
                self.error = Some(e);
                false
            }
        }
    }

    /// Forward: inner is on a blob reference, the newest visible version of its key: resolves it into the
    /// saved value.
    fn take_blob_forward(&mut self) {
        self.key_buf.clear();
        self.key_buf.extend_from_slice(ikey::user_key(self.inner.key()));
        let raw = self.inner.value().to_vec();
        if self.resolve_blob(&raw) {
            self.current = Current::Saved;
        }
    }

    /// Confines every `seek`/`seek_for_prev` to the target's prefix by `scope`'s extractor (see
    /// [`crate::ReadOptions::prefix_same_as_start`]); `scope` is shared with the sources wrapped in
    /// `PrefixFiltered`.
    pub(crate) fn confine_to_prefix(&mut self, scope: Arc<PrefixScope>) {
        self.prefix = Some(Confinement { scope, lower: self.lower.clone(), upper: self.upper.clone() });
    }

    /// Before a positioning call: with prefix confinement, narrows the bounds to the prefix of `target`
    /// (`None`: a `seek_to_first`/`seek_to_last`, never confined) or restores the caller's.
    fn scope_bounds(&mut self, target: Option<&[u8]>) {
        let Some(Confinement { scope, lower, upper }) = &self.prefix else { return };
        let ex = scope.extractor;
        match target.and_then(|t| ex.prefix(t)) {
            Some(p) => {
                scope.confine(p);
                self.lower = Some(match lower {
                    Some(l) if l.as_slice() > p => l.clone(),
                    _ => p.to_vec(),
                });
                self.upper = match (upper, ex.range_end(p)) {
                    (Some(u), Some(e)) => Some(if *u < e { u.clone() } else { e }),
                    (u, e) => u.clone().or(e),
                };
            }
            None => {
                scope.release();
                self.lower = lower.clone();
                self.upper = upper.clone();
            }
        }
    }

    /// Reads in TTL mode: values without their timestamp, expired ones skipped when `hide_expired`. The
    /// expiry time is fixed when the cursor is made, so one scan sees one consistent cut.
    pub(crate) fn with_ttl(mut self, ttl: Ttl, hide_expired: bool) -> Cursor {
        let now = ttl.now();
        self.ttl = Some(TtlView { ttl, hide_expired, now });
        self
    }

    /// TTL mode: after a move, fails on a value too short for its timestamp and steps over expired values
    /// when they are hidden (`forward`: the direction of the move).
    fn settle_ttl(&mut self, forward: bool) {
        let Some(t) = &self.ttl else { return };
        let (hide, now) = (t.hide_expired, t.now);
        while self.valid() {
            let raw = self.raw_value();
            let Some((_, ts)) = ttl::split(raw) else {
                self.error = Some(ttl::too_short(self.key(), raw.len()));
                return;
            };
            let expired = self.ttl.as_ref().is_some_and(|t| hide && t.ttl.expired(ts, now));
            if !expired {
                return;
            }
            if forward {
                self.step_next();
            } else {
                self.step_prev();
            }
        }
    }

    /// Lets [`Cursor::refresh`] rebuild the view with `f`.
    pub(crate) fn with_refresh(mut self, f: Option<RefreshFn>) -> Cursor {
        self.refresh = f;
        self
    }

    /// Re-pins the cursor to the latest state: the newest sequence number and the current memtables and
    /// tables, keeping its read options and bounds (RocksDB's `Iterator::Refresh`). The old view is released.
    /// The position is lost: the cursor is unpositioned afterwards, as a new one; call a `seek*`.
    ///
    /// As in RocksDB 7.8, a cursor created with an explicit [`crate::ReadOptions::snapshot`] cannot be
    /// refreshed (a snapshot fixes what it reads) and neither can one of a database opened with
    /// [`crate::Db::open_read_only`] (its view is fixed at open): both return [`Error::NotSupported`] and keep
    /// their position. After the database was closed it returns [`Error::Closed`]. On error the cursor keeps
    /// its old view.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = shaledb::Db::open(dir.path(), shaledb::Options::default())?;
    /// db.put("a", "1")?;
    /// let mut cursor = db.cursor();
    /// db.put("b", "2")?; // not seen: the cursor reads the state it was created on
    /// cursor.seek_to_first();
    /// cursor.next();
    /// assert!(!cursor.valid());
    /// cursor.refresh()?;
    /// cursor.seek("b");
    /// assert_eq!(cursor.value(), b"2");
    /// # Ok::<(), shaledb::Error>(())
    /// ```
    pub fn refresh(&mut self) -> Result<()> {
        let Some(f) = &self.refresh else {
            return Err(Error::NotSupported(
                "refresh: the cursor reads an explicit snapshot or a read-only database, whose view is fixed".into(),
            ));
        };
        let (inner, seq, pin) = f()?;
        // The new iterator first, so the old one drops before the view it reads from.
        self.inner = inner;
        self._pin = pin;
        self.seq = seq.min(MAX_SEQUENCE);
        // TTL mode: the refreshed view expires values as of now.
        if let Some(t) = &mut self.ttl {
            t.now = t.ttl.now();
        }
        self.reset();
        self.forward = true;
        Ok(())
    }

    /// True when positioned on a key (and no error occurred).
    pub fn valid(&self) -> bool {
        self.current != Current::None && self.error.is_none()
    }

    /// The current user key; empty when not [`valid`](Self::valid).
    pub fn key(&self) -> &[u8] {
        match self.current {
            _ if self.error.is_some() => &[],
            Current::Inner => ikey::user_key(self.inner.key()),
            Current::Saved => &self.key_buf,
            Current::None => &[],
        }
    }

    /// The current value; empty when not [`valid`](Self::valid).
    pub fn value(&self) -> &[u8] {
        let raw = self.raw_value();
        match &self.ttl {
            Some(_) => ttl::split(raw).map_or(&[][..], |(len, _)| &raw[..len]),
            None => raw,
        }
    }

    /// The current stored value (with its timestamp in TTL mode).
    fn raw_value(&self) -> &[u8] {
        match self.current {
            _ if self.error.is_some() => &[],
            Current::Inner => self.inner.value(),
            Current::Saved => &self.value_buf,
            Current::None => &[],
        }
    }

    /// `Ok` unless an error (I/O, corruption, a merge without operator) stopped the iterator.
    pub fn status(&self) -> Result<()> {
        match &self.error {
            Some(e) => Err(e.clone()),
            None => self.inner.status(),
        }
    }

    /// Positions at the first key (>= the lower bound).
    pub fn seek_to_first(&mut self) {
        self.scope_bounds(None);
        self.reset();
        match &self.lower {
            Some(lower) => {
                build_ikey(&mut self.seek_buf, lower, self.seq, KIND_FOR_SEEK);
                self.inner.seek(&self.seek_buf);
            }
            None => self.inner.seek_to_first(),
        }
        self.forward = true;
        self.find_next_entry(false);
        self.settle_ttl(true);
    }

    /// Positions at the last key (< the upper bound).
    pub fn seek_to_last(&mut self) {
        self.scope_bounds(None);
        self.position_last();
    }

    /// Positions at the last key within the current bounds.
    fn position_last(&mut self) {
        self.reset();
        match &self.upper {
            Some(upper) => {
                // The last entry ordered before every version of `upper`.
                build_ikey(&mut self.seek_buf, upper, MAX_SEQUENCE, KIND_FOR_SEEK);
                self.inner.seek_for_prev(&self.seek_buf);
            }
            None => self.inner.seek_to_last(),
        }
        self.forward = false;
        self.find_prev_entry();
        self.settle_ttl(false);
    }

    /// Positions at the first key >= `user_key` (and >= the lower bound).
    pub fn seek(&mut self, user_key: impl AsRef<[u8]>) {
        let user_key = user_key.as_ref();
        self.scope_bounds(Some(user_key));
        self.reset();
        let target = match &self.lower {
            Some(l) if l.as_slice() > user_key => l.as_slice(),
            _ => user_key,
        };
        build_ikey(&mut self.seek_buf, target, self.seq, KIND_FOR_SEEK);
        self.inner.seek(&self.seek_buf);
        self.forward = true;
        self.find_next_entry(false);
        self.settle_ttl(true);
    }

    /// Positions at the last key <= `user_key` (and < the upper bound).
    pub fn seek_for_prev(&mut self, user_key: impl AsRef<[u8]>) {
        let user_key = user_key.as_ref();
        self.scope_bounds(Some(user_key));
        if self.upper.as_deref().is_some_and(|u| user_key >= u) {
            self.position_last();
            return;
        }
        self.reset();
        // Every version of `user_key` sorts at or before `(user_key, 0, Deletion)`.
        build_ikey(&mut self.seek_buf, user_key, 0, ValueKind::Deletion);
        self.inner.seek_for_prev(&self.seek_buf);
        self.forward = false;
        self.find_prev_entry();
        self.settle_ttl(false);
    }

    /// Moves to the next key. No effect unless [`valid`](Self::valid).
    pub fn next(&mut self) {
        self.step_next();
        self.settle_ttl(true);
    }

    /// Moves to the previous key. No effect unless [`valid`](Self::valid).
    pub fn prev(&mut self) {
        self.step_prev();
        self.settle_ttl(false);
    }

    fn step_next(&mut self) {
        if !self.valid() {
            return;
        }
        if !self.forward {
            // Inner rests before the current key: move it to the current key's newest version, then skip
            // all of its versions.
            build_ikey(&mut self.seek_buf, &self.key_buf, self.seq, KIND_FOR_SEEK);
            self.inner.seek(&self.seek_buf);
            self.forward = true;
        } else if self.current == Current::Inner {
            self.key_buf.clear();
            self.key_buf.extend_from_slice(ikey::user_key(self.inner.key()));
            self.inner.next();
        }
        // After a merge inner already rests past the operands (on an older version of the key, or beyond),
        // and `key_buf` holds the key.
        self.find_next_entry(true);
    }

    fn step_prev(&mut self) {
        if !self.valid() {
            return;
        }
        if self.forward {
            if self.current == Current::Inner {
                self.key_buf.clear();
                self.key_buf.extend_from_slice(ikey::user_key(self.inner.key()));
            }
            // Inner must rest on the last entry before every version of the current key.
            build_ikey(&mut self.seek_buf, &self.key_buf, MAX_SEQUENCE, KIND_FOR_SEEK);
            self.inner.seek_for_prev(&self.seek_buf);
            while self.inner.valid() && ikey::user_key(self.inner.key()) >= self.key_buf.as_slice() {
                self.inner.prev();
            }
            self.forward = false;
        }
        self.find_prev_entry();
    }

    fn reset(&mut self) {
        self.error = None;
        self.current = Current::None;
    }

    /// True when inner is on an entry; otherwise records inner's error, if any.
    fn inner_on_entry(&mut self) -> bool {
        if self.inner.valid() {
            return true;
        }
        if let Err(e) = self.inner.status() {
            self.error = Some(e);
        }
        false
    }

    fn fail_bad_key(&mut self) {
        let len = self.inner.key().len();
        self.error = Some(self.corruption_here(format!("unparseable internal key of {len} bytes during iteration")));
    }

    /// A `Corruption` naming where inner's current entry is stored: its file and block offset, or the
    /// memtable. REQUIRES: inner is valid.
    fn corruption_here(&self, what: String) -> Error {
        match self.inner.location() {
            Some((file, offset)) => Error::corruption(file, offset, what),
            None => Error::corruption(MEMTABLE, 0, what),
        }
    }

    /// Forward: from inner's position, finds the first key with a visible, live newest version. With
    /// `skipping`, versions of the key in `key_buf` are passed over first (they are older than the key
    /// just left).
    fn find_next_entry(&mut self, mut skipping: bool) {
        self.current = Current::None;
        // Entries stepped over in a row without deciding a key.
        let mut stepped = 0usize;
        while self.inner_on_entry() {
            let Some(p) = ikey::parse(self.inner.key()) else { return self.fail_bad_key() };
            if self.upper.as_deref().is_some_and(|u| p.user_key >= u) {
                return;
            }
            let newer = p.seq > self.seq;
            if newer || (skipping && p.user_key == self.key_buf.as_slice()) {
                stepped += 1;
                if stepped <= MAX_SEQUENTIAL_SKIP {
                    self.inner.next();
                    continue;
                }
                // A key with many versions (a counter, a collection's metadata): one seek past them
                // instead of a step per version. Newer than the snapshot: to the key's newest visible
                // version. Hidden by a deletion or shadowed: past the key's oldest possible version.
                stepped = 0;
                if newer {
                    build_ikey(&mut self.seek_buf, p.user_key, self.seq, KIND_FOR_SEEK);
                } else {
                    build_ikey(&mut self.seek_buf, p.user_key, 0, ValueKind::Deletion);
                }
                self.inner.seek(&self.seek_buf);
                continue;
            }
            match p.kind {
                ValueKind::Value => {
                    self.current = Current::Inner;
                    return;
                }
                ValueKind::BlobIndex => {
                    self.take_blob_forward();
                    return;
                }
                ValueKind::Deletion | ValueKind::SingleDeletion => {
                    self.key_buf.clear();
                    self.key_buf.extend_from_slice(p.user_key);
                    skipping = true;
                    self.inner.next();
                }
                // `ikey::parse` never yields it for a point entry.
                ValueKind::RangeDeletion => return self.fail_bad_key(),
                ValueKind::Merge => {
                    self.key_buf.clear();
                    self.key_buf.extend_from_slice(p.user_key);
                    self.merge_forward();
                    return;
                }
            }
        }
    }

    /// Forward: inner is on the newest visible version of `key_buf`, a merge operand. Collects operands
    /// down to a value or deletion (leaving inner on it) or the end of the key, and merges them.
    fn merge_forward(&mut self) {
        self.ops.clear();
        self.op_ends.clear();
        self.ops.extend_from_slice(self.inner.value());
        self.op_ends.push(self.ops.len());
        self.merge_at = self.inner.location().map(|(f, o)| (f.to_path_buf(), o));
        self.inner.next();
        let mut base = false;
        while self.inner_on_entry() {
            let Some(p) = ikey::parse(self.inner.key()) else { return self.fail_bad_key() };
            if p.user_key != self.key_buf.as_slice() {
                break;
            }
            match p.kind {
                ValueKind::Merge => {
                    self.ops.extend_from_slice(self.inner.value());
                    self.op_ends.push(self.ops.len());
                    self.inner.next();
                }
                ValueKind::Value => {
                    self.value_buf.clear();
                    self.value_buf.extend_from_slice(self.inner.value());
                    base = true;
                    break;
                }
                ValueKind::BlobIndex => {
                    let raw = self.inner.value().to_vec();
                    if !self.resolve_blob(&raw) {
                        return;
                    }
                    base = true;
                    break;
                }
                ValueKind::Deletion | ValueKind::SingleDeletion => break,
                ValueKind::RangeDeletion => return self.fail_bad_key(),
            }
        }
        if self.error.is_some() {
            return;
        }
        // Stored newest first; the operator takes them oldest first.
        self.apply_merge(base, true);
    }

    /// Combines the collected operands (newest first when `newest_first`, else oldest first) with
    /// `value_buf` when `base`, leaving the result in `value_buf` and the iterator on `key_buf`.
    fn apply_merge(&mut self, base: bool, newest_first: bool) {
        let Some(op) = &self.merge else {
            self.error = Some(no_merge_operator());
            return;
        };
        let mut operands: Vec<&[u8]> = Vec::with_capacity(self.op_ends.len());
        let mut start = 0;
        for &end in &self.op_ends {
            operands.push(&self.ops[start..end]);
            start = end;
        }
        if newest_first {
            operands.reverse();
        }
        let existing = base.then_some(self.value_buf.as_slice());
        match op.full_merge(&self.key_buf, existing, &operands) {
            Some(v) => {
                self.value_buf = v;
                self.current = Current::Saved;
            }
            None => {
                let (file, offset) = self.merge_at.take().unwrap_or_else(|| (PathBuf::from(MEMTABLE), 0));
                self.error = Some(Error::corruption(
                    file,
                    offset,
                    format!("merge operator {} rejected the operands of a key during iteration", op.name()),
                ));
            }
        }
    }

    /// Backward: inner rests on the last (oldest) version of some key, or is exhausted. Finds the nearest
    /// key at or before it with a visible, live newest version, leaving inner before all of its versions.
    fn find_prev_entry(&mut self) {
        self.current = Current::None;
        while self.inner_on_entry() {
            let Some(p) = ikey::parse(self.inner.key()) else { return self.fail_bad_key() };
            if self.upper.as_deref().is_some_and(|u| p.user_key >= u) {
                self.inner.prev();
                continue;
            }
            if self.lower.as_deref().is_some_and(|l| p.user_key < l) {
                return;
            }
            self.key_buf.clear();
            self.key_buf.extend_from_slice(p.user_key);
            if self.decide_backward() {
                return;
            }
            if self.error.is_some() {
                return;
            }
        }
    }

    /// Reads the versions of `key_buf` from oldest to newest (inner ends before them) and decides the key.
    /// True when it has a value (then `value_buf` holds it and the iterator is positioned).
    fn decide_backward(&mut self) -> bool {
        // What the newest visible version read so far says.
        let mut last: Option<ValueKind> = None;
        // A value lies below the operands collected since the last value/deletion.
        let mut base = false;
        self.blob_pending = false;
        self.ops.clear();
        self.op_ends.clear();
        while self.inner_on_entry() {
            let Some(ParsedKey { user_key, seq, kind }) = ikey::parse(self.inner.key()) else {
                self.fail_bad_key();
                return false;
            };
            if user_key != self.key_buf.as_slice() {
                break;
            }
            if seq <= self.seq {
                match kind {
                    ValueKind::Value | ValueKind::BlobIndex => {
                        self.value_buf.clear();
                        self.value_buf.extend_from_slice(self.inner.value());
                        // A reference is resolved only if it decides the key (below).
                        self.blob_pending = kind == ValueKind::BlobIndex;
                        base = true;
                        self.ops.clear();
                        self.op_ends.clear();
                    }
                    ValueKind::Deletion | ValueKind::SingleDeletion => {
                        base = false;
                        self.ops.clear();
                        self.op_ends.clear();
                    }
                    ValueKind::Merge => {
                        self.ops.extend_from_slice(self.inner.value());
                        self.op_ends.push(self.ops.len());
                        // Backward, the last operand met is the newest.
                        self.merge_at = self.inner.location().map(|(f, o)| (f.to_path_buf(), o));
                    }
                    ValueKind::RangeDeletion => {
                        self.fail_bad_key();
                        return false;
                    }
                }
                last = Some(kind);
            }
            self.inner.prev();
        }
        if self.error.is_some() {
            return false;
        }
        if base && self.blob_pending && last.is_some_and(|k| k != ValueKind::Deletion && k != ValueKind::SingleDeletion)
        {
            let raw = std::mem::take(&mut self.value_buf);
            if !self.resolve_blob(&raw) {
                return false;
            }
        }
        self.blob_pending = false;
        match last {
            Some(ValueKind::Value | ValueKind::BlobIndex) => {
                self.current = Current::Saved;
                true
            }
            Some(ValueKind::Merge) => {
                self.apply_merge(base, false);
                self.current == Current::Saved
            }
            Some(ValueKind::Deletion | ValueKind::SingleDeletion | ValueKind::RangeDeletion) | None => false,
        }
    }
}

/// A cursor's TTL-mode settings.
struct TtlView {
    ttl: Ttl,
    hide_expired: bool,
    now: u32,
}

fn build_ikey(buf: &mut Vec<u8>, user_key: &[u8], seq: u64, kind: ValueKind) {
    buf.clear();
    ikey::append_internal_key(buf, user_key, seq, kind);
}
