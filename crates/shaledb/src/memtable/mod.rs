//! The memtable: a concurrent skiplist of internal keys holding the writes of one WAL (or, with
//! [`MemTableRep::Vector`], an append-only vector sorted once when the memtable is flushed).
//!
//! Each entry's bytes, `internal_key ++ value`, are copied into the memtable's [`Arena`] (large chunks,
//! bump-allocated); the skiplist's nodes live there too, each right before its entry (`skiplist.rs`).
//! Iterators hold the skiplist, which holds the arena, so an owning, `'static` [`MemTableIter`] reads entries
//! in place without copying them or counting references.
//!
//! Entries are never removed: a memtable only grows until it is flushed and dropped whole.

mod arena;
mod skiplist;

use crate::lookup::GetState;
use crate::options::MemTableRep;
use arena::{Arena, Span};
use parking_lot::RwLock;
use shaledb_format::ikey::{self, ValueKind, KIND_FOR_SEEK, MAX_SEQUENCE, TRAILER_LEN};
use shaledb_format::iter::InternalIterator;
use shaledb_format::prefix::PrefixExtractor;
use shaledb_format::Result;
use skiplist::BATCH;
use std::cmp::Ordering;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering as AtomicOrdering};
use std::sync::Arc;

/// Bytes charged per entry on top of its key and value: the skiplist node before it in the arena (the 40-byte
/// [`Rec`], a height word, a tower of 1.33 links on average, alignment padding). An estimate, like RocksDB's
/// arena usage.
const ENTRY_OVERHEAD: usize = 64;

/// Buckets of an [`MemTableRep::IndexedSkipList`] memtable's point index: one per 128 bytes of the write
/// buffer (about one per entry of small values, fewer for larger ones), 64 to 1M of them (8 bytes each).
fn index_buckets(write_buffer_size: usize) -> usize {
    (write_buffer_size / 128).clamp(64, 1 << 20)
}

/// A key as the skiplist compares it: a user key and a trailer, possibly not contiguous in memory, so a
/// lookup can probe without building an internal key.
trait KeyView {
    fn user_key(&self) -> &[u8];
    fn trailer(&self) -> u64;
    /// The first 16 bytes of the user key, as two big-endian numbers, zero-padded: see [`key_prefix`].
    fn prefix(&self) -> Prefix;
}

/// The first 16 bytes of a user key, as two big-endian numbers (compared in order: the pair orders like
/// the bytes).
type Prefix = (u64, u64);

/// The first 16 bytes of `user_key` as two big-endian numbers, zero-padded.
///
/// INVARIANT: when two keys' prefixes differ, they order the keys as a bytewise comparison does (a shorter key
/// padded with zeros can only tie with, never pass, a longer key it is a prefix of). Comparing prefixes first
/// decides most skiplist comparisons without touching the entry's heap buffer (one cache miss saved per node).
/// Sixteen bytes, not eight: common keys share their first eight bytes (db_bench's zero-padded 16-byte
/// numbers, redis-benchmark's `key:0000...`, the server's database and tag bytes before the user key), and
/// an eight-byte prefix then decides nothing.
#[inline]
fn key_prefix(user_key: &[u8]) -> Prefix {
    let mut b = [0u8; 16];
    let n = user_key.len().min(16);
    b[..n].copy_from_slice(&user_key[..n]);
    let (hi, lo) = b.split_at(8);
    let word = |s: &[u8]| {
        let mut w = [0u8; 8];
        w.copy_from_slice(s);
        u64::from_be_bytes(w)
    };
    (word(hi), word(lo))
}

/// Generic rather than over `&dyn KeyView`, so the skiplist's comparisons of two entries are inlined rather
/// than six virtual calls each.
#[inline]
fn cmp_views<A: KeyView + ?Sized, B: KeyView + ?Sized>(a: &A, b: &B) -> Ordering {
    // Same order as `ikey::compare`: user key ascending, trailer descending.
    match a.prefix().cmp(&b.prefix()) {
        Ordering::Equal => {}
        o => return o,
    }
    match a.user_key().cmp(b.user_key()) {
        Ordering::Equal => b.trailer().cmp(&a.trailer()),
        o => o,
    }
}

/// A lookup key that borrows its user key.
struct Probe<'a> {
    user_key: &'a [u8],
    trailer: u64,
    prefix: Prefix,
}

impl KeyView for Probe<'_> {
    fn user_key(&self) -> &[u8] {
        self.user_key
    }
    fn trailer(&self) -> u64 {
        self.trailer
    }
    fn prefix(&self) -> Prefix {
        self.prefix
    }
}

impl<'a> Probe<'a> {
    /// A probe equal to the internal key `ikey` (a malformed short key probes as an empty user key with
    /// trailer 0, which sorts it last among empty keys; callers only pass keys they built).
    fn of(ikey: &'a [u8]) -> Probe<'a> {
        let user_key = ikey::user_key(ikey);
        Probe { user_key, trailer: ikey::trailer(ikey), prefix: key_prefix(user_key) }
    }
}

/// One memtable entry, `internal_key ++ value`, in its memtable's [`Arena`]; `klen = internal_key.len()`.
/// Copying one copies a pointer, not the entry.
#[derive(Clone, Copy)]
struct Rec {
    span: Span,
    klen: usize,
    prefix: Prefix,
}

impl Rec {
    /// Copies the entry into `arena`.
    fn new(arena: &Arena, user_key: &[u8], trailer: u64, value: &[u8]) -> Rec {
        let span = arena.copy_in(&[user_key, &trailer.to_le_bytes(), value]);
        Rec { span, klen: user_key.len() + TRAILER_LEN, prefix: key_prefix(user_key) }
    }

    #[inline]
    fn ikey(&self) -> &[u8] {
        &self.span.bytes()[..self.klen]
    }

    #[inline]
    fn value(&self) -> &[u8] {
        &self.span.bytes()[self.klen..]
    }
}

impl KeyView for Rec {
    #[inline]
    fn user_key(&self) -> &[u8] {
        &self.span.bytes()[..self.klen - TRAILER_LEN]
    }
    #[inline]
    fn trailer(&self) -> u64 {
        ikey::trailer(self.ikey())
    }
    #[inline]
    fn prefix(&self) -> Prefix {
        self.prefix
    }
}

impl PartialEq for Rec {
    fn eq(&self, other: &Self) -> bool {
        cmp_views(self, other) == Ordering::Equal
    }
}
impl Eq for Rec {}
impl PartialOrd for Rec {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Rec {
    fn cmp(&self, other: &Self) -> Ordering {
        cmp_views(self, other)
    }
}

/// A concurrent, append-only sorted map of internal keys to values: the writes of one WAL file.
pub(crate) struct MemTable {
    id: u64,
    rep: Rep,
    /// The entries' bytes; iterators hold it too.
    arena: Arc<Arena>,
    mem: AtomicUsize,
    /// Deletion entries added (RocksDB's `num_deletes`, for `rocksdb.estimate-num-keys`).
    deletions: AtomicUsize,
    /// The largest sequence of a point entry added (range tombstones not counted), for iterators that seek
    /// past what a newer range tombstone covers (`iter::CoverSkip`).
    largest_seq: AtomicU64,
    /// A lower bound on the sequence numbers of the entries it can hold: the first sequence number the write
    /// path could give it when it became the active memtable (0 when unknown, as for a replayed one). Intra-L0
    /// compaction merges only L0 files older than every memtable's bound (`picker::intra_l0`).
    first_seq: u64,
    filter: KeyFilter,
    /// [`crate::Options::memtable_prefix_bloom_size_ratio`]: the prefixes of the keys, by this extractor.
    prefix_filter: Option<(PrefixExtractor, KeyFilter)>,
    /// Range tombstones, apart from the point entries (never in `rep`).
    range_dels: crate::range_del::MemRangeDels,
}

enum Rep {
    Skip(Arc<skiplist::SkipList>),
    Vector(VectorRep),
}

/// [`MemTableRep::Vector`]: entries appended under a lock in arrival order; sorted once, in place, by the
/// first iterator after the memtable became immutable (the flush's).
struct VectorRep {
    state: RwLock<VecState>,
    /// No entry will be added any more (set when the memtable is switched out).
    immutable: AtomicBool,
    len: AtomicUsize,
}

enum VecState {
    Appending(Vec<Rec>),
    Sorted(Arc<[Rec]>),
}

/// The entries of `probe`'s user key visible at its sequence, newest first, from sorted `recs`.
fn sorted_range<'r>(recs: &'r [Rec], probe: &Probe<'_>) -> &'r [Rec] {
    let start = recs.partition_point(|r| cmp_views(r, probe) == Ordering::Less);
    let len = recs[start..].partition_point(|r| r.user_key() == probe.user_key);
    &recs[start..start + len]
}

impl VectorRep {
    fn push(&self, rec: Rec) {
        let mut st = self.state.write();
        match &mut *st {
            VecState::Appending(v) => v.push(rec),
            VecState::Sorted(sorted) => {
                // Not reached: entries are only added before the memtable is switched out. Kept correct
                // anyway: back to appending.
                let mut v = sorted.to_vec();
                v.push(rec);
                *st = VecState::Appending(v);
            }
        }
        self.len.fetch_add(1, AtomicOrdering::Relaxed);
    }

    /// Every entry in internal-key order: the vector itself, sorted in place, once the memtable is
    /// immutable; before that a sorted copy of the entries so far (`Arc` clones, no copies of data).
    fn sorted(&self) -> Arc<[Rec]> {
        {
            let st = self.state.read();
            match &*st {
                VecState::Sorted(s) => return s.clone(),
                VecState::Appending(v) if !self.immutable.load(AtomicOrdering::Acquire) => {
                    let mut copy = v.clone();
                    drop(st);
                    copy.sort_unstable();
                    return copy.into();
                }
                VecState::Appending(_) => {}
            }
        }
        let mut st = self.state.write();
        match &mut *st {
            VecState::Sorted(s) => s.clone(),
            VecState::Appending(v) => {
                let mut v = std::mem::take(v);
                // Sequence numbers are unique per entry, so no two entries compare equal.
                v.sort_unstable();
                let sorted: Arc<[Rec]> = v.into();
                *st = VecState::Sorted(sorted.clone());
                sorted
            }
        }
    }

    fn get(&self, probe: &Probe<'_>, state: &mut GetState<'_>) {
        let hits: Vec<Rec> = {
            let st = self.state.read();
            match &*st {
                VecState::Sorted(s) => sorted_range(s, probe).to_vec(),
                VecState::Appending(v) => {
                    // Still being written: a scan for the key's entries visible at the probe's sequence.
                    let mut hits: Vec<Rec> = v
                        .iter()
                        .filter(|r| r.user_key() == probe.user_key && r.trailer() <= probe.trailer)
                        .cloned()
                        .collect();
                    hits.sort_unstable_by_key(|r| std::cmp::Reverse(r.trailer()));
                    hits
                }
            }
        };
        for rec in &hits {
            if state.feed(rec.ikey(), rec.value()) {
                return;
            }
        }
    }
}

/// A whole-key bloom filter over the memtable's user keys, so that a point lookup for a key the memtable does
/// not hold (most lookups, once data has been flushed) skips the skiplist search. One 64-bit word per key:
/// insert is one atomic `fetch_or`, lookup one load.
///
/// INVARIANT: a key's bits are set before its entry is inserted into the skiplist, so any entry a reader can
/// find has its bits visible to that reader (publication of the sequence number orders both).
struct KeyFilter {
    words: Box<[AtomicU64]>,
    mask: usize,
}

impl KeyFilter {
    fn new(bits: usize) -> KeyFilter {
        let words = (bits / 64).clamp(64, 1 << 20).next_power_of_two();
        KeyFilter { words: (0..words).map(|_| AtomicU64::new(0)).collect(), mask: words - 1 }
    }

    #[inline]
    fn probe(&self, hash: u64) -> (&AtomicU64, u64) {
        let bits =
            (1u64 << (hash & 63)) | (1 << ((hash >> 6) & 63)) | (1 << ((hash >> 12) & 63)) | (1 << ((hash >> 18) & 63));
        (&self.words[(hash >> 32) as usize & self.mask], bits)
    }

    #[inline]
    fn add(&self, hash: u64) {
        let (w, bits) = self.probe(hash);
        w.fetch_or(bits, AtomicOrdering::Relaxed);
    }

    #[inline]
    fn may_contain(&self, hash: u64) -> bool {
        let (w, bits) = self.probe(hash);
        w.load(AtomicOrdering::Relaxed) & bits == bits
    }
}

impl std::fmt::Debug for MemTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemTable")
            .field("id", &self.id)
            .field("len", &self.len())
            .field("approximate_memory_usage", &self.approximate_memory_usage())
            .finish()
    }
}

impl MemTable {
    /// An empty memtable for the records of WAL number `id`.
    pub(crate) fn new(id: u64) -> MemTable {
        MemTable::with_capacity(id, 0)
    }

    /// An empty skiplist memtable whose key filter is sized for `write_buffer_size` bytes of entries.
    pub(crate) fn with_capacity(id: u64, write_buffer_size: usize) -> MemTable {
        MemTable::with_rep(id, write_buffer_size, MemTableRep::SkipList)
    }

    /// An empty memtable of structure `rep` whose key filter is sized for `write_buffer_size` bytes.
    pub(crate) fn with_rep(id: u64, write_buffer_size: usize, rep: MemTableRep) -> MemTable {
        let arena = Arc::new(Arena::for_write_buffer(write_buffer_size));
        let rep = match rep {
            MemTableRep::SkipList => Rep::Skip(Arc::new(skiplist::SkipList::new(arena.clone(), 0))),
            MemTableRep::IndexedSkipList => {
                Rep::Skip(Arc::new(skiplist::SkipList::new(arena.clone(), index_buckets(write_buffer_size))))
            }
            MemTableRep::Vector => Rep::Vector(VectorRep {
                state: RwLock::new(VecState::Appending(Vec::new())),
                immutable: AtomicBool::new(false),
                len: AtomicUsize::new(0),
            }),
        };
        MemTable {
            id,
            rep,
            arena,
            mem: AtomicUsize::new(0),
            deletions: AtomicUsize::new(0),
            largest_seq: AtomicU64::new(0),
            first_seq: 0,
            filter: KeyFilter::new(write_buffer_size / 8),
            prefix_filter: None,
            range_dels: Default::default(),
        }
    }

    /// An empty memtable as `opts` ask: its structure, its filters' sizes, and a prefix filter when the
    /// options have a prefix extractor and `memtable_prefix_bloom_size_ratio > 0`.
    pub(crate) fn for_options(id: u64, opts: &crate::Options) -> MemTable {
        let mut m = MemTable::with_rep(id, opts.write_buffer_size, opts.memtable_rep);
        if let Some(ex) = opts.prefix_extractor {
            if opts.memtable_prefix_bloom_size_ratio > 0.0 {
                let bits = (opts.write_buffer_size as f64 * opts.memtable_prefix_bloom_size_ratio * 8.0) as usize;
                m.prefix_filter = Some((ex, KeyFilter::new(bits)));
            }
        }
        m
    }

    /// False when no key whose prefix by `extractor` hashes to `prefix_hash` is in the memtable. True
    /// without a prefix filter, or with one of another extractor.
    #[inline]
    pub(crate) fn may_contain_prefix(&self, extractor: &PrefixExtractor, prefix_hash: u64) -> bool {
        match &self.prefix_filter {
            Some((ex, f)) if ex == extractor => f.may_contain(prefix_hash),
            _ => true,
        }
    }

    /// No entry will be added any more: a vector memtable may now sort itself in place.
    pub(crate) fn mark_immutable(&self) {
        if let Rep::Vector(v) = &self.rep {
            v.immutable.store(true, AtomicOrdering::Release);
        }
    }

    /// False when `user_key` (whose `bloom::key_hash` is `hash`) is certainly not in the table.
    #[inline]
    pub(crate) fn may_contain(&self, hash: u64) -> bool {
        self.filter.may_contain(hash)
    }

    /// The number of the WAL whose records this memtable holds.
    pub(crate) fn id(&self) -> u64 {
        self.id
    }

    /// This memtable as the one of WAL `id`: a memtable WAL replay filled, kept as a family's active memtable
    /// (`avoid_flush_during_recovery`); `id` is the oldest WAL its entries came from.
    pub(crate) fn renumbered(mut self, id: u64) -> MemTable {
        self.id = id;
        self
    }

    /// This memtable, declared to receive only entries at sequence `seq` or later (see `first_seq`).
    /// REQUIRES: no write with a smaller sequence number can still insert into it.
    pub(crate) fn starting_at(mut self, seq: u64) -> MemTable {
        self.first_seq = seq;
        self
    }

    /// A lower bound on the sequence numbers of its entries (0 when unknown).
    pub(crate) fn first_seq(&self) -> u64 {
        self.first_seq
    }

    /// Inserts an entry. Safe to call from many threads at once.
    /// REQUIRES: `(user_key, seq)` is not in the table yet (sequence numbers are unique per entry) and
    /// `seq <= MAX_SEQUENCE`.
    ///
    /// No input reaches this with a larger `seq`: WAL replay takes its numbers from batches that
    /// `BatchRep::from_bytes` checked (`sequence + count - 1 <= MAX_SEQUENCE`, else corruption) on top of a
    /// `last_sequence` the MANIFEST decoder checked, and the write path refuses a group that would pass it
    /// (`commit_group`). Were it violated anyway, storing the entry under any other number would return wrong
    /// data, so this stops instead of clamping.
    pub(crate) fn add(&self, seq: u64, kind: ValueKind, user_key: &[u8], value: &[u8]) {
        assert!(seq <= MAX_SEQUENCE, "memtable entry at sequence {seq} past {MAX_SEQUENCE}");
        if kind == ValueKind::RangeDeletion {
            // `[user_key, value)`: kept apart and fragmented on read (`range_del`).
            self.range_dels.add(user_key, value, seq);
            let charge = user_key.len() + value.len() + ENTRY_OVERHEAD;
            self.mem.fetch_add(charge, AtomicOrdering::Relaxed);
            return;
        }
        let trailer = ikey::pack_trailer(seq, kind);
        let hash = self.filter_key(user_key);
        let rec = match &self.rep {
            Rep::Skip(list) => list.insert(user_key, hash, trailer, value),
            Rep::Vector(v) => {
                let rec = Rec::new(&self.arena, user_key, trailer, value);
                v.push(rec);
                rec
            }
        };
        self.account(rec.span.len() + ENTRY_OVERHEAD, seq, (kind == ValueKind::Deletion) as usize);
    }

    /// Adds `user_key` to the whole-key filter and its prefix to the prefix filter; returns its
    /// `bloom::key_hash`. Before the entry is inserted (the filter's invariant).
    #[inline]
    fn filter_key(&self, user_key: &[u8]) -> u64 {
        let hash = shaledb_format::bloom::key_hash(user_key);
        self.filter.add(hash);
        if let Some((ex, f)) = &self.prefix_filter {
            if let Some(prefix) = ex.prefix(user_key) {
                f.add(shaledb_format::bloom::key_hash(prefix));
            }
        }
        hash
    }

    /// Charges `bytes` of inserted entries, the largest sequence among them and their deletion count.
    #[inline]
    fn account(&self, bytes: usize, largest_seq: u64, deletions: usize) {
        self.mem.fetch_add(bytes, AtomicOrdering::Relaxed);
        // Before the write's sequence is published (the write path publishes after every insert of its
        // group, with Release), so a reader that loaded the published sequence and then this sees every
        // visible entry's sequence at or below the value it reads.
        self.largest_seq.fetch_max(largest_seq, AtomicOrdering::Relaxed);
        if deletions > 0 {
            self.deletions.fetch_add(deletions, AtomicOrdering::Relaxed);
        }
    }

    /// [`MemTable::add`] of several entries, `(seq, kind, user_key, value)`: a skiplist memtable inserts
    /// them [`BATCH`] at a time with their descents interleaved (`SkipList::insert_batch`), which overlaps
    /// their cache misses. The same REQUIRES as `add`, for each entry.
    pub(crate) fn add_batch(&self, entries: &[(u64, ValueKind, &[u8], &[u8])]) {
        let Rep::Skip(list) = &self.rep else {
            entries.iter().for_each(|&(seq, kind, k, v)| self.add(seq, kind, k, v));
            return;
        };
        for chunk in entries.chunks(BATCH) {
            if chunk.len() == 1 || chunk.iter().any(|e| e.1 == ValueKind::RangeDeletion) {
                chunk.iter().for_each(|&(seq, kind, k, v)| self.add(seq, kind, k, v));
                continue;
            }
            let mut items: [(&[u8], u64, u64, &[u8]); BATCH] = [(&[], 0, 0, &[]); BATCH];
            for (item, &(seq, kind, user_key, value)) in items.iter_mut().zip(chunk) {
                assert!(seq <= MAX_SEQUENCE, "memtable entry at sequence {seq} past {MAX_SEQUENCE}");
                *item = (user_key, self.filter_key(user_key), ikey::pack_trailer(seq, kind), value);
            }
            let mut recs = [None; BATCH];
            list.insert_batch(&items[..chunk.len()], &mut recs);
            let bytes: usize = recs.iter().flatten().map(|r| r.span.len() + ENTRY_OVERHEAD).sum();
            let top = chunk.iter().map(|e| e.0).max().unwrap_or(0);
            self.account(bytes, top, chunk.iter().filter(|e| e.1 == ValueKind::Deletion).count());
        }
    }

    /// Feeds `state` the entries of `user_key` (whose `bloom::key_hash` is `hash`) visible at `seq`, newest
    /// first, until it is done.
    pub(crate) fn get(&self, user_key: &[u8], hash: u64, seq: u64, state: &mut GetState<'_>) {
        let probe = Probe {
            user_key,
            // A read bound, not an entry: no entry is newer than MAX_SEQUENCE, so reading "as of" any larger
            // number is exactly reading as of MAX_SEQUENCE.
            trailer: ikey::pack_trailer(seq.min(MAX_SEQUENCE), KIND_FOR_SEEK),
            prefix: key_prefix(user_key),
        };
        let list = match &self.rep {
            Rep::Skip(list) => list,
            Rep::Vector(v) => return v.get(&probe, state),
        };
        let feed = |rec: &Rec| rec.user_key() == user_key && !state.feed(rec.ikey(), rec.value());
        match list.indexed(user_key, probe.prefix, hash) {
            skiplist::Indexed::Absent => {}
            // The key's newest entry is visible: it is where the descent would have stopped.
            skiplist::Indexed::Newest(at) if at.rec().trailer() <= probe.trailer => at.scan(feed),
            // Newer than the reader (or no index): the descent finds the newest entry it may see.
            _ => list.scan_from(&probe, feed),
        }
    }

    /// An iterator over all entries in internal-key order; it keeps the memtable alive.
    pub(crate) fn iter(self: &Arc<Self>) -> MemTableIter {
        match &self.rep {
            Rep::Skip(list) => MemTableIter::Skip(SkipIter { cursor: skiplist::Cursor::new(Arc::clone(list)) }),
            Rep::Vector(v) => {
                let recs = v.sorted();
                MemTableIter::Vector(VecIter { pos: recs.len(), recs, _arena: Arc::clone(&self.arena) })
            }
        }
    }

    /// Bytes used by the entries, as compared with `write_buffer_size`.
    pub(crate) fn approximate_memory_usage(&self) -> usize {
        self.mem.load(AtomicOrdering::Relaxed)
    }

    /// Number of entries.
    pub(crate) fn len(&self) -> usize {
        match &self.rep {
            Rep::Skip(list) => list.len(),
            Rep::Vector(v) => v.len.load(AtomicOrdering::Relaxed),
        }
    }

    /// The largest sequence of a point entry added so far (0 when none). Every entry visible at a sequence
    /// loaded (Acquire) before this call has a sequence at or below the value returned.
    pub(crate) fn largest_seq(&self) -> u64 {
        self.largest_seq.load(AtomicOrdering::Relaxed)
    }

    /// Number of deletion entries.
    pub(crate) fn num_deletions(&self) -> usize {
        self.deletions.load(AtomicOrdering::Relaxed)
    }

    /// True when no entry and no range tombstone was added.
    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0 && self.range_dels.len() == 0
    }

    /// The range tombstones, fragmented; `None` when the memtable holds none.
    pub(crate) fn range_tombstones(&self) -> Option<Arc<crate::range_del::Fragments>> {
        self.range_dels.fragments()
    }

    /// Number of range tombstones added.
    #[cfg(test)]
    pub(crate) fn num_range_deletions(&self) -> usize {
        self.range_dels.len()
    }
}

/// An owning iterator over a [`MemTable`] of either structure.
pub(crate) enum MemTableIter {
    Skip(SkipIter),
    Vector(VecIter),
}

/// An owning iterator over a vector memtable's sorted entries (binary search to seek).
pub(crate) struct VecIter {
    recs: Arc<[Rec]>,
    /// Keeps the entries' bytes alive (see [`Arena`]).
    _arena: Arc<Arena>,
    /// `recs.len()` when not valid.
    pos: usize,
}

impl InternalIterator for VecIter {
    fn valid(&self) -> bool {
        self.pos < self.recs.len()
    }
    fn seek_to_first(&mut self) {
        self.pos = 0;
    }
    fn seek_to_last(&mut self) {
        self.pos = self.recs.len().checked_sub(1).unwrap_or(self.recs.len());
    }
    fn seek(&mut self, target: &[u8]) {
        let probe = Probe::of(target);
        self.pos = self.recs.partition_point(|r| cmp_views(r, &probe) == Ordering::Less);
    }
    fn seek_for_prev(&mut self, target: &[u8]) {
        let probe = Probe::of(target);
        let after = self.recs.partition_point(|r| cmp_views(r, &probe) != Ordering::Greater);
        self.pos = after.checked_sub(1).unwrap_or(self.recs.len());
    }
    fn next(&mut self) {
        if self.pos < self.recs.len() {
            self.pos += 1;
        }
    }
    fn prev(&mut self) {
        self.pos = if self.pos == 0 || self.pos >= self.recs.len() { self.recs.len() } else { self.pos - 1 };
    }
    fn key(&self) -> &[u8] {
        self.recs.get(self.pos).map_or(&[], Rec::ikey)
    }
    fn value(&self) -> &[u8] {
        self.recs.get(self.pos).map_or(&[], Rec::value)
    }
    fn status(&self) -> Result<()> {
        Ok(())
    }
}

impl InternalIterator for MemTableIter {
    fn valid(&self) -> bool {
        match self {
            MemTableIter::Skip(i) => i.valid(),
            MemTableIter::Vector(i) => i.valid(),
        }
    }
    fn seek_to_first(&mut self) {
        match self {
            MemTableIter::Skip(i) => i.seek_to_first(),
            MemTableIter::Vector(i) => i.seek_to_first(),
        }
    }
    fn seek_to_last(&mut self) {
        match self {
            MemTableIter::Skip(i) => i.seek_to_last(),
            MemTableIter::Vector(i) => i.seek_to_last(),
        }
    }
    fn seek(&mut self, target: &[u8]) {
        match self {
            MemTableIter::Skip(i) => i.seek(target),
            MemTableIter::Vector(i) => i.seek(target),
        }
    }
    fn seek_for_prev(&mut self, target: &[u8]) {
        match self {
            MemTableIter::Skip(i) => i.seek_for_prev(target),
            MemTableIter::Vector(i) => i.seek_for_prev(target),
        }
    }
    fn next(&mut self) {
        match self {
            MemTableIter::Skip(i) => i.next(),
            MemTableIter::Vector(i) => i.next(),
        }
    }
    fn prev(&mut self) {
        match self {
            MemTableIter::Skip(i) => i.prev(),
            MemTableIter::Vector(i) => i.prev(),
        }
    }
    fn key(&self) -> &[u8] {
        match self {
            MemTableIter::Skip(i) => i.key(),
            MemTableIter::Vector(i) => i.key(),
        }
    }
    fn value(&self) -> &[u8] {
        match self {
            MemTableIter::Skip(i) => i.value(),
            MemTableIter::Vector(i) => i.value(),
        }
    }
    fn status(&self) -> Result<()> {
        Ok(())
    }
}

/// An owning iterator over a skiplist memtable: a cursor that holds the list (and so the entries' arena).
/// Forward steps follow a link; backward steps search from the top, as the list has no back links.
pub(crate) struct SkipIter {
    cursor: skiplist::Cursor,
}

impl InternalIterator for SkipIter {
    fn valid(&self) -> bool {
        self.cursor.valid()
    }

    fn seek_to_first(&mut self) {
        self.cursor.seek_to_first();
    }

    fn seek_to_last(&mut self) {
        self.cursor.seek_to_last();
    }

    fn seek(&mut self, target: &[u8]) {
        self.cursor.seek(&Probe::of(target));
    }

    fn seek_for_prev(&mut self, target: &[u8]) {
        self.cursor.seek_for_prev(&Probe::of(target));
    }

    fn next(&mut self) {
        self.cursor.next();
    }

    fn prev(&mut self) {
        self.cursor.prev();
    }

    fn key(&self) -> &[u8] {
        self.cursor.current().map_or(&[], Rec::ikey)
    }

    fn value(&self) -> &[u8] {
        self.cursor.current().map_or(&[], Rec::value)
    }

    fn status(&self) -> Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests;
