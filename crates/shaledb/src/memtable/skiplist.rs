//! The skiplist memtable's structure: a concurrent, insert-only skiplist whose nodes live in the memtable's
//! [`Arena`] (LevelDB's and RocksDB's `InlineSkipList` design), each node followed by its entry's bytes.
//!
//! One arena reservation per entry holds the node (its [`Rec`], its height and its tower of links) and the
//! entry, so an insert allocates nothing from the heap, a flushed memtable frees a few chunks, and a reader
//! walks from node to node with plain loads: no reference counts, no epochs, nothing to free while it reads.
//! Nothing is ever removed, which is what makes that safe.
//!
//! Inserts may run on several threads at once (`allow_concurrent_memtable_write`). An insert finds the node's
//! predecessor and successor on every level, then links the node in from the bottom level up, each level with
//! one compare-and-swap on the predecessor's link; a failed swap (another insert linked a node there first)
//! searches that level again from the same predecessor, which still precedes the key because nodes are never
//! removed. Keys are unique (sequence numbers are), so no two nodes compare equal.
//!
//! Memory order: a node's fields and its entry's bytes are written before the node is linked anywhere, and
//! each link is published with `Release`; readers load links with `Acquire`, so a node a reader reaches is
//! complete. A node is reachable at level `i` only after its links of levels `0..=i` are set.
//!
//! INVARIANT: every node pointer reachable from [`SkipList::head`] points into the skiplist's arena, which the
//! skiplist holds (and so every iterator holding the skiplist holds) alive. So does every pointer in the
//! point index below.
//!
//! **The point index** ([`crate::MemTableRep::IndexedSkipList`]): a hash table from user key to the node of the
//! key's newest entry, so that a point lookup reads two or three cache lines instead of descending the
//! skiplist (one cache miss per level of a large memtable). Each node then has one more word after its tower,
//! `hnext`, chaining the nodes of one bucket; a bucket holds one node per user key. Writers of a bucket take
//! one of [`INDEX_LOCKS`] striped locks, after the node is linked into the skiplist, and either append the node
//! (a key new to the memtable) or put it in the place of the key's node when its trailer is larger (a newer
//! entry; an older one, inserted late by a concurrent write, leaves the newer in place). The replaced node keeps
//! its `hnext`, so a reader standing on it walks on. Readers take no lock: they load links with `Acquire`,
//! and a node and its `hnext` are written before a `Release` store publishes it. The write path publishes a
//! sequence number only after every insert at or below it returned, so a reader at sequence `s` finds every
//! key with an entry at or below `s`, and the node it finds is the key's newest entry at or below `s` whenever
//! that node's own sequence is at most `s` (otherwise it descends the skiplist, as without the index).

#![allow(unsafe_code)]

use super::arena::{Arena, Span};
use super::{cmp_views, key_prefix, KeyView, Rec};
use parking_lot::Mutex;
use shaledb_format::ikey::TRAILER_LEN;
use std::cell::Cell;
use std::cmp::Ordering;
use std::ptr::{self, NonNull};
use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering as AtomicOrdering};
use std::sync::Arc;

/// The tallest tower. With a branching factor of 4, 12 levels index 4^12 = 16M entries well; 20 leaves room
/// for any memtable.
const MAX_HEIGHT: usize = 20;

/// A node's header; its tower of `height` links (`AtomicPtr<Node>`) follows it in the same reservation, then
/// the entry's bytes. The head node's `rec` is never read.
#[repr(C)]
struct Node {
    rec: Rec,
    height: usize,
}

/// Where a node's tower starts: right after the header (a multiple of 8, the links' alignment).
const TOWER: usize = std::mem::size_of::<Node>();
const _: () =
    assert!(TOWER.is_multiple_of(std::mem::align_of::<AtomicPtr<Node>>()) && std::mem::align_of::<Node>() <= 8);

/// Link `level` of `node`.
///
/// # Safety
/// `node` is a node of a live skiplist (or its head) and `level < node.height`.
#[inline]
unsafe fn link<'a>(node: *const Node, level: usize) -> &'a AtomicPtr<Node> {
    // SAFETY: (the caller's) the tower of `height` initialized links follows the header in the node's
    // reservation, which outlives the reference (the arena is alive while the skiplist is).
    unsafe { &*node.cast::<u8>().add(TOWER).cast::<AtomicPtr<Node>>().add(level) }
}

/// The entry of a node that is not the head.
///
/// # Safety
/// `node` is a non-null, non-head node of a live skiplist.
#[inline]
unsafe fn rec<'a>(node: *const Node) -> &'a Rec {
    // SAFETY: (the caller's) the node was fully written before it became reachable.
    unsafe { &(*node).rec }
}

/// Asks the CPU to start loading the first three cache lines at `node` (its header, its tower and the start of
/// its entry): a cursor calls it for the node after the one it moves to, so that the cache miss of the next step
/// overlaps the caller's work on this one. Nodes are in insertion order in the arena, so a walk in key order
/// of randomly inserted keys misses the cache at every node; that miss was a third of a scan's time.
#[inline]
fn prefetch(node: *const Node) {
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    if !node.is_null() {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        let p = node.cast::<i8>();
        // SAFETY: a prefetch is a hint that never faults, whatever the address; `wrapping_add` computes the
        // addresses without asserting they are in bounds.
        unsafe {
            _mm_prefetch::<_MM_HINT_T0>(p);
            _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(64));
            _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(128));
        }
    }
    #[cfg(not(all(target_arch = "x86_64", not(miri))))]
    let _ = node;
}

/// Asks the CPU to start loading the first cache line at `node` (its header: the entry's key prefix, which
/// decides most comparisons), for a descent's next step.
#[inline]
fn prefetch_header(node: *const Node) {
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    if !node.is_null() {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        // SAFETY: a prefetch is a hint that never faults, whatever the address.
        unsafe { _mm_prefetch::<_MM_HINT_T0>(node.cast::<i8>()) };
    }
    #[cfg(not(all(target_arch = "x86_64", not(miri))))]
    let _ = node;
}

/// Most entries [`SkipList::insert_batch`] descends for at once.
pub(super) const BATCH: usize = 8;

thread_local! {
    /// Each thread's state for drawing tower heights (xorshift64*), seeded from the cell's address.
    static HEIGHT_RNG: Cell<u64> = const { Cell::new(0) };
}

/// A random height from 1 to `MAX_HEIGHT`, each level a quarter as likely as the one below.
fn random_height() -> usize {
    HEIGHT_RNG.with(|c| {
        let mut x = c.get();
        if x == 0 {
            x = (c as *const Cell<u64> as u64) ^ 0x9E37_79B9_7F4A_7C15;
        }
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        c.set(x);
        let r = x.wrapping_mul(0x2545_F491_4F6C_DD1D);
        // Two bits per level: a level is added while they are both zero.
        let levels = 1 + (r.trailing_zeros() as usize / 2);
        levels.min(MAX_HEIGHT)
    })
}

/// Striped locks of the point index's writers.
const INDEX_LOCKS: usize = 64;

/// The point index: buckets of nodes chained through their `hnext` word (see the module's documentation).
struct PointIndex {
    buckets: Box<[AtomicPtr<Node>]>,
    mask: usize,
    locks: Box<[Mutex<()>]>,
}

impl PointIndex {
    fn new(buckets: usize) -> PointIndex {
        let n = buckets.next_power_of_two();
        // Zeroed memory from the allocator stays untouched (and not resident) until a bucket is used.
        let layout = std::alloc::Layout::array::<AtomicPtr<Node>>(n).expect("at most 1M buckets");
        // SAFETY: `layout` has a non-zero size (n >= 1); the allocation is checked for null; an all-zero
        // `AtomicPtr` is a valid null pointer, so the `n` elements are initialized; the box frees it with the
        // same layout (the global allocator, `[AtomicPtr<Node>; n]`'s).
        let buckets = unsafe {
            let p = std::alloc::alloc_zeroed(layout).cast::<AtomicPtr<Node>>();
            if p.is_null() {
                std::alloc::handle_alloc_error(layout);
            }
            Box::from_raw(ptr::slice_from_raw_parts_mut(p, n))
        };
        PointIndex { buckets, mask: n - 1, locks: (0..INDEX_LOCKS).map(|_| Mutex::new(())).collect() }
    }

    /// The bucket of a key hash (`bloom::key_hash`): its middle bits, which the memtable's key filter uses for
    /// neither its word (bits 32..) nor its bit positions (bits 0..24).
    fn bucket(&self, hash: u64) -> usize {
        (hash >> 24) as usize & self.mask
    }
}

/// What the point index says of a user key.
pub(super) enum Indexed<'a> {
    /// The memtable has no entry of the key at or below the reader's sequence.
    Absent,
    /// The key's newest entry (at or below the reader's sequence, which the caller checks).
    Newest(Entries<'a>),
    /// The memtable has no point index.
    NoIndex,
}

/// The entries of one user key from its newest one on, in the skiplist's order (then the keys after it).
pub(super) struct Entries<'a> {
    list: &'a SkipList,
    node: *const Node,
}

impl Entries<'_> {
    /// The current entry.
    pub(super) fn rec(&self) -> &Rec {
        // SAFETY: `node` is a non-null, non-head node of `list` (the index holds no other).
        unsafe { rec(self.node) }
    }

    /// Calls `f` with this entry and the ones after it, in order, until it returns false.
    pub(super) fn scan(self, mut f: impl FnMut(&Rec) -> bool) {
        let mut x = self.node;
        while let Some(r) = self.list.entry(x) {
            if !f(r) {
                return;
            }
            // SAFETY: `x` is a node of this list.
            x = unsafe { link(x, 0).load(AtomicOrdering::Acquire) };
        }
    }
}

/// An insert-only concurrent skiplist of memtable entries, in internal-key order.
pub(super) struct SkipList {
    head: NonNull<Node>,
    /// The tallest tower in the list (at least 1). Read `Relaxed`: a reader that sees a height whose head link
    /// is still null just goes down a level.
    height: AtomicUsize,
    len: AtomicUsize,
    arena: Arc<Arena>,
    /// The point index, when the memtable has one.
    index: Option<PointIndex>,
}

/// A node's `hnext` word (the point index's chain), right after its tower.
///
/// # Safety
/// `node` is a non-head node of a live skiplist that has a point index.
#[inline]
unsafe fn hnext<'a>(node: *const Node) -> &'a AtomicPtr<Node> {
    // SAFETY: (the caller's) nodes of an indexed list reserve one link after their `height` links.
    unsafe { link(node, (*node).height) }
}

// SAFETY: the nodes are written once before being published with Release and never written again except their
// links, which are atomics; the arena they live in is `Sync` and outlives the list (held by it).
unsafe impl Send for SkipList {}
// SAFETY: as above.
unsafe impl Sync for SkipList {}

impl SkipList {
    /// An empty list whose nodes go in `arena`, with a point index of about `index_buckets` buckets (none
    /// when 0).
    pub(super) fn new(arena: Arc<Arena>, index_buckets: usize) -> SkipList {
        let head = Self::new_node(&arena, MAX_HEIGHT, 0);
        // SAFETY: `head` has room for a header; its `rec` is never read (an empty span stands in).
        unsafe {
            head.cast::<Node>().as_ptr().write(Node {
                rec: Rec { span: Span::from_raw(NonNull::dangling(), 0), klen: 0, prefix: (0, 0) },
                height: MAX_HEIGHT,
            });
        }
        let index = (index_buckets > 0).then(|| PointIndex::new(index_buckets));
        SkipList { head: head.cast(), height: AtomicUsize::new(1), len: AtomicUsize::new(0), arena, index }
    }

    /// A reservation for a node of `height` with `entry_len` bytes after its tower (and its `hnext` word when
    /// `links > height`), its `links` links set to null.
    fn new_node(arena: &Arena, links: usize, entry_len: usize) -> NonNull<u8> {
        let base = arena.reserve_aligned(TOWER + links * 8 + entry_len);
        for level in 0..links {
            // SAFETY: the reservation holds `height` links after the header, aligned (the base is 8-aligned
            // and TOWER a multiple of 8); no one else can see it yet.
            unsafe {
                base.as_ptr().add(TOWER).cast::<AtomicPtr<Node>>().add(level).write(AtomicPtr::new(ptr::null_mut()))
            };
        }
        base
    }

    fn head(&self) -> *const Node {
        self.head.as_ptr()
    }

    /// Number of entries.
    pub(super) fn len(&self) -> usize {
        self.len.load(AtomicOrdering::Relaxed)
    }

    /// Copies the entry `user_key ++ trailer ++ value` into the arena and links it in; returns its [`Rec`].
    /// Safe to call from several threads at once. REQUIRES: no entry with the same user key and trailer.
    /// `hash` is the user key's `bloom::key_hash` (used by the point index).
    pub(super) fn insert(&self, user_key: &[u8], hash: u64, trailer: u64, value: &[u8]) -> Rec {
        let (node, rec, height) = self.make_node(user_key, trailer, value);
        let top = self.raise_height(height);
        // The predecessor and successor on every level, found top-down.
        let mut prev = [self.head(); MAX_HEIGHT];
        let mut next = [ptr::null_mut::<Node>(); MAX_HEIGHT];
        let mut before = self.head();
        for level in (0..top).rev() {
            let (p, n) = self.splice_at(&rec, before, level);
            prev[level] = p;
            next[level] = n;
            before = p;
        }
        self.link_in(node, &rec, height, &mut prev, &mut next, hash);
        rec
    }

    /// [`SkipList::insert`] of several entries (`(user_key, hash, trailer, value)`, at most [`BATCH`]) at once:
    /// their descents run interleaved, one step of each in turn, each step's node prefetched a round ahead,
    /// so that the cache misses of up to [`BATCH`] descents overlap instead of following one another (a
    /// descent of a large memtable is a cache miss per level, most of a random insert's time). Then each is
    /// linked in as `insert` does: a splice that an earlier entry of the batch (or another writer) made stale
    /// fails its compare-and-swap and is searched again from its predecessor, which still precedes the key.
    pub(super) fn insert_batch(&self, entries: &[(&[u8], u64, u64, &[u8])], recs: &mut [Option<Rec>; BATCH]) {
        assert!(entries.len() <= BATCH, "a batch of {} entries, at most {BATCH}", entries.len());
        let n = entries.len();
        let mut nodes = [(ptr::null_mut::<Node>(), 0usize); BATCH];
        let mut tallest = 1;
        for (i, &(user_key, _, trailer, value)) in entries.iter().enumerate() {
            let (node, rec, height) = self.make_node(user_key, trailer, value);
            nodes[i] = (node, height);
            recs[i] = Some(rec);
            tallest = tallest.max(height);
        }
        let top = self.raise_height(tallest);
        let mut prev = [[self.head(); MAX_HEIGHT]; BATCH];
        let mut next = [[ptr::null_mut::<Node>(); MAX_HEIGHT]; BATCH];
        // Each descent's position: the node it stands on, its level, and the node after it on that level
        // (loaded and prefetched, compared on the descent's next turn); `None` when done.
        let mut at: [Option<(*const Node, usize, *mut Node)>; BATCH] = [None; BATCH];
        for slot in at.iter_mut().take(n) {
            // SAFETY: the head has every level.
            let first = unsafe { link(self.head(), top - 1).load(AtomicOrdering::Acquire) };
            prefetch_header(first);
            *slot = Some((self.head(), top - 1, first));
        }
        let mut active = n;
        while active > 0 {
            for i in 0..n {
                let Some((x, level, cand)) = at[i] else { continue };
                let Some(rec_i) = &recs[i] else { continue };
                // SAFETY: a non-null link points to a complete node.
                if !cand.is_null() && cmp_views(unsafe { rec(cand) }, rec_i) == Ordering::Less {
                    // SAFETY: `cand` was reached on `level`, so it is at least `level + 1` tall.
                    let after = unsafe { link(cand, level).load(AtomicOrdering::Acquire) };
                    prefetch_header(after);
                    at[i] = Some((cand, level, after));
                    continue;
                }
                prev[i][level] = x;
                next[i][level] = cand;
                if level == 0 {
                    at[i] = None;
                    active -= 1;
                } else {
                    // SAFETY: `x` is the head or a node reached on `level`, so it has `level - 1` too.
                    let below = unsafe { link(x, level - 1).load(AtomicOrdering::Acquire) };
                    prefetch_header(below);
                    at[i] = Some((x, level - 1, below));
                }
            }
        }
        for i in 0..n {
            let (node, height) = nodes[i];
            if let Some(rec) = &recs[i] {
                self.link_in(node, rec, height, &mut prev[i], &mut next[i], entries[i].1);
            }
        }
    }

    /// Reserves and writes a node of a random height for the entry; returns it, its [`Rec`] and its height.
    /// Nothing else can see it until [`SkipList::link_in`] links it.
    fn make_node(&self, user_key: &[u8], trailer: u64, value: &[u8]) -> (*mut Node, Rec, usize) {
        let height = random_height();
        let links = height + self.index.is_some() as usize;
        let entry_len = user_key.len() + TRAILER_LEN + value.len();
        let base = Self::new_node(&self.arena, links, entry_len);
        let node = base.cast::<Node>().as_ptr();
        // SAFETY: the reservation holds the entry's `entry_len` bytes after the links; nothing else sees them
        // until the node is linked (with Release).
        let rec = unsafe {
            let entry = base.as_ptr().add(TOWER + links * 8);
            let mut at = entry;
            for part in [user_key, &trailer.to_le_bytes()[..], value] {
                ptr::copy_nonoverlapping(part.as_ptr(), at, part.len());
                at = at.add(part.len());
            }
            let span = Span::from_raw(NonNull::new_unchecked(entry), entry_len);
            let rec = Rec { span, klen: user_key.len() + TRAILER_LEN, prefix: key_prefix(user_key) };
            node.write(Node { rec, height });
            rec
        };
        (node, rec, height)
    }

    /// Raises the list's height to at least `height`; returns the height to descend from.
    fn raise_height(&self, height: usize) -> usize {
        let mut top = self.height.load(AtomicOrdering::Relaxed);
        while height > top {
            match self.height.compare_exchange_weak(top, height, AtomicOrdering::Relaxed, AtomicOrdering::Relaxed) {
                Ok(_) => return height,
                Err(now) => top = now,
            }
        }
        top
    }

    /// Links `node` (of `height`) in on every level, from the bottom up, from the splice `prev`/`next` (each
    /// level below the height the descent started from; the head above it), then into the point index.
    fn link_in(
        &self,
        node: *mut Node,
        rec: &Rec,
        height: usize,
        prev: &mut [*const Node; MAX_HEIGHT],
        next: &mut [*mut Node; MAX_HEIGHT],
        hash: u64,
    ) {
        for level in 0..height {
            loop {
                // SAFETY: `node`'s tower and `prev[level]`'s have `level` (`node` is `height` tall, and
                // `prev[level]` is the head or a node reached on `level`); both live in the arena.
                let won = unsafe {
                    link(node, level).store(next[level], AtomicOrdering::Relaxed);
                    link(prev[level], level)
                        .compare_exchange(next[level], node, AtomicOrdering::Release, AtomicOrdering::Relaxed)
                        .is_ok()
                };
                if won {
                    break;
                }
                // Another insert linked a node after `prev[level]` first: search on from there.
                let (p, n) = self.splice_at(rec, prev[level], level);
                prev[level] = p;
                next[level] = n;
            }
        }
        if let Some(index) = &self.index {
            self.index_node(index, node, rec, hash);
        }
        self.len.fetch_add(1, AtomicOrdering::Relaxed);
    }

    /// Puts `node` (already in the skiplist) in the point index: appended to its bucket when its user key is
    /// new there, in the place of the key's node when `node` is newer, not at all when the key's node is newer.
    fn index_node(&self, index: &PointIndex, node: *mut Node, new: &Rec, hash: u64) {
        let b = index.bucket(hash);
        let _writer = index.locks[b % INDEX_LOCKS].lock();
        let mut at = &index.buckets[b];
        loop {
            // Writers of this bucket hold its lock: the chain cannot change under this one.
            let cur = at.load(AtomicOrdering::Relaxed);
            if cur.is_null() {
                // SAFETY: `node` is a node of this indexed list, not published in the index yet.
                unsafe { hnext(node).store(ptr::null_mut(), AtomicOrdering::Relaxed) };
                at.store(node, AtomicOrdering::Release);
                return;
            }
            // SAFETY: the index holds only complete, non-head nodes of this list.
            let cur_rec = unsafe { rec(cur) };
            if cur_rec.prefix == new.prefix && cur_rec.user_key() == new.user_key() {
                if cur_rec.trailer() < new.trailer() {
                    // SAFETY: both are nodes of this indexed list; `node` is not published in the index yet.
                    unsafe { hnext(node).store(hnext(cur).load(AtomicOrdering::Relaxed), AtomicOrdering::Relaxed) };
                    at.store(node, AtomicOrdering::Release);
                }
                return;
            }
            // SAFETY: as above.
            at = unsafe { hnext(cur) };
        }
    }

    /// The point index's node for `user_key` (whose `key_prefix` is `prefix` and `bloom::key_hash` is `hash`).
    pub(super) fn indexed(&self, user_key: &[u8], prefix: super::Prefix, hash: u64) -> Indexed<'_> {
        let Some(index) = &self.index else { return Indexed::NoIndex };
        let mut cur = index.buckets[index.bucket(hash)].load(AtomicOrdering::Acquire);
        while !cur.is_null() {
            // SAFETY: the index holds only complete, non-head nodes of this list.
            let r = unsafe { rec(cur) };
            if r.prefix == prefix && r.user_key() == user_key {
                return Indexed::Newest(Entries { list: self, node: cur });
            }
            // SAFETY: as above.
            cur = unsafe { hnext(cur).load(AtomicOrdering::Acquire) };
        }
        Indexed::Absent
    }

    /// On `level`, from `before` (which precedes `key`): the last node before `key` and the first after it.
    fn splice_at<K: KeyView + ?Sized>(
        &self,
        key: &K,
        mut before: *const Node,
        level: usize,
    ) -> (*const Node, *mut Node) {
        loop {
            // SAFETY: `before` is the head or a node reached on `level` (so at least `level + 1` tall).
            let next = unsafe { link(before, level).load(AtomicOrdering::Acquire) };
            // SAFETY: a non-null link points to a complete node.
            if next.is_null() || cmp_views(key, unsafe { rec(next) }) == Ordering::Less {
                return (before, next);
            }
            before = next;
        }
    }

    /// The last node before `key` (the head when none) and the first at or after it (null when none): one
    /// descent from the top level.
    fn descend<K: KeyView + ?Sized>(&self, key: &K) -> (*const Node, *const Node) {
        let mut x = self.head();
        let mut level = self.height.load(AtomicOrdering::Relaxed) - 1;
        loop {
            // SAFETY: `x` is the head or a node reached on `level` (so at least `level + 1` tall).
            let next = unsafe { link(x, level).load(AtomicOrdering::Acquire) };
            // SAFETY: a non-null link points to a complete node.
            if !next.is_null() && cmp_views(unsafe { rec(next) }, key) == Ordering::Less {
                x = next;
            } else if level == 0 {
                return (x, next);
            } else {
                level -= 1;
            }
        }
    }

    /// The first node at or after `key`, or null.
    fn seek_node<K: KeyView + ?Sized>(&self, key: &K) -> *const Node {
        self.descend(key).1
    }

    /// The last node before `key` (the head when none).
    fn before_node<K: KeyView + ?Sized>(&self, key: &K) -> *const Node {
        self.descend(key).0
    }

    /// The last node (the head when empty).
    fn last_node(&self) -> *const Node {
        let mut x = self.head();
        let mut level = self.height.load(AtomicOrdering::Relaxed) - 1;
        loop {
            // SAFETY: as in `descend`.
            let next = unsafe { link(x, level).load(AtomicOrdering::Acquire) };
            if !next.is_null() {
                x = next;
            } else if level == 0 {
                return x;
            } else {
                level -= 1;
            }
        }
    }

    /// The entry of `node`, or `None` for null or the head.
    fn entry(&self, node: *const Node) -> Option<&Rec> {
        // SAFETY: a non-null, non-head node pointer came from this list's links.
        (!node.is_null() && node != self.head()).then(|| unsafe { rec(node) })
    }

    /// Calls `f` with the entries from the first at or after `key` on, in order, until it returns false.
    pub(super) fn scan_from<K: KeyView + ?Sized>(&self, key: &K, mut f: impl FnMut(&Rec) -> bool) {
        let mut x = self.seek_node(key);
        while let Some(r) = self.entry(x) {
            if !f(r) {
                return;
            }
            // SAFETY: `x` is a node of this list.
            x = unsafe { link(x, 0).load(AtomicOrdering::Acquire) };
        }
    }
}

/// An owning cursor over a [`SkipList`]: it holds the list (and so its arena) and a node pointer.
/// Forward steps follow a link; backward steps search from the top, as the list has no back links.
pub(super) struct Cursor {
    list: Arc<SkipList>,
    /// The current node; null when not valid.
    node: *const Node,
}

// SAFETY: the cursor reads immutable node fields and atomic links of a list it keeps alive; the list is
// `Send + Sync`.
unsafe impl Send for Cursor {}
// SAFETY: as above; `&Cursor` only reads.
unsafe impl Sync for Cursor {}

impl Cursor {
    pub(super) fn new(list: Arc<SkipList>) -> Cursor {
        Cursor { list, node: ptr::null() }
    }

    pub(super) fn current(&self) -> Option<&Rec> {
        self.list.entry(self.node)
    }

    pub(super) fn valid(&self) -> bool {
        !self.node.is_null()
    }

    pub(super) fn seek_to_first(&mut self) {
        // SAFETY: the head has every level.
        self.node = unsafe { link(self.list.head(), 0).load(AtomicOrdering::Acquire) };
        self.prefetch_next();
    }

    /// Prefetches the node after the current one (see [`prefetch`]).
    #[inline]
    fn prefetch_next(&self) {
        if !self.node.is_null() {
            // SAFETY: a valid cursor's node is a node of its list.
            prefetch(unsafe { link(self.node, 0).load(AtomicOrdering::Relaxed) });
        }
    }

    pub(super) fn seek_to_last(&mut self) {
        let last = self.list.last_node();
        self.node = if last == self.list.head() { ptr::null() } else { last };
    }

    /// At the first entry at or after `key`.
    pub(super) fn seek<K: KeyView + ?Sized>(&mut self, key: &K) {
        self.node = self.list.seek_node(key);
        self.prefetch_next();
    }

    /// At the last entry at or before `key`.
    pub(super) fn seek_for_prev<K: KeyView + ?Sized>(&mut self, key: &K) {
        let at = self.list.seek_node(key);
        if self.list.entry(at).is_some_and(|r| cmp_views(r, key) == Ordering::Equal) {
            self.node = at;
        } else {
            self.set_before(key);
        }
    }

    pub(super) fn next(&mut self) {
        if !self.node.is_null() {
            // SAFETY: a valid cursor's node is a node of its list.
            self.node = unsafe { link(self.node, 0).load(AtomicOrdering::Acquire) };
            self.prefetch_next();
        }
    }

    pub(super) fn prev(&mut self) {
        if let Some(r) = self.current().copied() {
            self.set_before(&r);
        }
    }

    fn set_before<K: KeyView + ?Sized>(&mut self, key: &K) {
        let before = self.list.before_node(key);
        self.node = if before == self.list.head() { ptr::null() } else { before };
    }
}
