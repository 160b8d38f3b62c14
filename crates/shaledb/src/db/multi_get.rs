//! MultiGet: a batch of point lookups over one view, with table probes sorted, coalesced and read in parallel.
//!
//! The batch pins one super version and one sequence (as `get` does, `pin_view`), sorts its keys once and
//! folds duplicates into one lookup. Each key probes the memtables, newest first, through its own
//! [`GetState`] (the state `get` uses, so merge operands, deletions and snapshots behave exactly alike).
//! The keys still undecided go down the levels together:
//!
//! - level 0, file by file, newest first (a key may be in several files; the newer must be read first);
//! - each deeper level at once: every file of the level with keys in its range, at most one per key.
//!
//! In a round, each table's bloom filter is checked per key before any block read; the table's index is
//! walked once for all its keys ([`Table::locate_blocks`]); keys that fall in the same data block share one
//! load; the blocks not in the block cache but in the operating system's page cache are read at once by the
//! caller (`preadv2(RWF_NOWAIT)`, [`Table::try_read_data_block_cached`]); the rest, the reads that wait on the
//! device, are read in parallel (the first by the caller, the others by a small shared pool of reader threads),
//! so the misses of a round overlap instead of waiting one after another (docs/perf/multiget-nowait.md).
//!
//! Measured (release build, 2-core VM, 200,000 keys compacted, `--use_direct_reads --cache_size=0`, the
//! numbers in ARCHITECTURE.md): 32-key batches cost 13.7 us per key against 30.5 us for one `get` per key; 32
//! reader threads instead of 8 gained nothing there (the device, not the pool, sets the pace) and slowed batches
//! served from the page cache, hence 8.

use super::Db;
use crate::lookup::GetState;
use crate::options::{Options, ReadOptions, ReadTier};
use crate::prefix::table_may_contain;
use crate::stats::Counters;
use crossbeam_channel::{Receiver, Sender};
use shaledb_format::block::{Block, BlockIter, KeyOrder};
use shaledb_format::bloom;
use shaledb_format::edit::FileMeta;
use shaledb_format::ikey::{self, KIND_FOR_SEEK};
use shaledb_format::iter::InternalIterator;
use shaledb_format::table::{BlockHandle, Readahead, Table, TableIterOptions};
use shaledb_vfs::{Error, Result};
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

/// Reader threads shared by every database of the process for the cache misses of batch lookups.
const READ_THREADS: usize = 8;

/// One distinct key of the batch.
struct Probe<'a> {
    key: &'a [u8],
    hash: u64,
    /// The internal key a seek for `key` at the batch's sequence targets.
    lookup: Vec<u8>,
    state: GetState<'a>,
}

/// A data block wanted by a round: from the cache, or to read.
enum Slot {
    Cached(Arc<Block>),
    Miss,
    Read(Result<Arc<Block>>),
}

/// One table's part of a round: the table and the probes (indices, ascending key) it is searched for.
struct TableProbes<'v> {
    meta: &'v FileMeta,
    probes: Vec<usize>,
}

impl Db {
    /// The values of `keys`, read from one consistent view, in the order of `keys` (RocksDB's `MultiGet`).
    /// Each result is what [`Db::get`] would return for that key at the moment of the call: `Ok(Some(value))`,
    /// `Ok(None)` when absent or deleted, or that key's error (one key's I/O or corruption error does not fail
    /// the others). Duplicate keys are allowed and get equal results.
    ///
    /// Faster than a loop of `get` when keys miss the memtables: the keys are sorted once, each table's index
    /// is searched once per batch, keys in one data block read it once, and blocks not cached are read in
    /// parallel.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = shaledb::Db::open(dir.path(), shaledb::Options::default())?;
    /// db.put("a", "1")?;
    /// db.put("c", "3")?;
    /// let got = db.multi_get(["c", "b", "a", "c"]);
    /// let got: Vec<Option<Vec<u8>>> = got.into_iter().collect::<Result<_, _>>()?;
    /// assert_eq!(got, [Some(b"3".to_vec()), None, Some(b"1".to_vec()), Some(b"3".to_vec())]);
    /// # Ok::<(), shaledb::Error>(())
    /// ```
    pub fn multi_get<K: AsRef<[u8]>>(&self, keys: impl IntoIterator<Item = K>) -> Vec<Result<Option<Vec<u8>>>> {
        self.multi_get_opt(&ReadOptions::default(), keys)
    }

    /// [`Db::multi_get`] with read options: every key is read at the snapshot in `opts` (or at one sequence
    /// taken for the whole batch), with its checksum and cache choices.
    ///
    /// ```
    /// use shaledb::ReadOptions;
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = shaledb::Db::open(dir.path(), shaledb::Options::default())?;
    /// db.put("x", "old")?;
    /// let then = ReadOptions { snapshot: Some(db.snapshot()), ..ReadOptions::default() };
    /// db.put("x", "new")?;
    /// db.put("y", "born later")?;
    /// let got = db.multi_get_opt(&then, ["x", "y"]);
    /// assert_eq!(got[0].as_ref().unwrap().as_deref(), Some(&b"old"[..]));
    /// assert_eq!(got[1].as_ref().unwrap(), &None);
    /// # Ok::<(), shaledb::Error>(())
    /// ```
    pub fn multi_get_opt<K: AsRef<[u8]>>(
        &self,
        opts: &ReadOptions,
        keys: impl IntoIterator<Item = K>,
    ) -> Vec<Result<Option<Vec<u8>>>> {
        let fam = self.inner.default.clone();
        self.multi_get_family(&fam, opts, keys)
    }

    /// [`Db::multi_get_opt`] in column family `cf`.
    pub fn multi_get_cf<K: AsRef<[u8]>>(
        &self,
        opts: &ReadOptions,
        cf: &super::ColumnFamily,
        keys: impl IntoIterator<Item = K>,
    ) -> Vec<Result<Option<Vec<u8>>>> {
        self.multi_get_family(&cf.fam, opts, keys)
    }

    fn multi_get_family<K: AsRef<[u8]>>(
        &self,
        fam: &super::family::Family,
        opts: &ReadOptions,
        keys: impl IntoIterator<Item = K>,
    ) -> Vec<Result<Option<Vec<u8>>>> {
        let keys: Vec<K> = keys.into_iter().collect();
        match keys.as_slice() {
            [] => return Vec::new(),
            // Nothing to sort, share or overlap: `get` is the same lookup without the batch's bookkeeping.
            [key] => {
                let mut out = Vec::new();
                let found = self.get_into_family(fam, opts, key.as_ref(), &mut out);
                return vec![found.map(|f| f.then_some(out))];
            }
            _ => {}
        }
        let inner = &self.inner;
        let (sv, seq) = self.pin_view_of(fam, opts);
        Counters::add(&inner.counters.gets, keys.len() as u64);

        // Sort once; equal keys share one probe.
        let mut order: Vec<usize> = (0..keys.len()).collect();
        order.sort_by(|&a, &b| keys[a].as_ref().cmp(keys[b].as_ref()));
        let merge = fam.opts.merge_operator.as_ref();
        let mut probes: Vec<Probe> = Vec::with_capacity(keys.len());
        let mut probe_of = vec![0usize; keys.len()];
        for &i in &order {
            let key = keys[i].as_ref();
            if probes.last().is_none_or(|p| p.key != key) {
                let mut lookup = Vec::with_capacity(key.len() + ikey::TRAILER_LEN);
                ikey::append_internal_key(&mut lookup, key, seq, KIND_FOR_SEEK);
                let mut state = GetState::with_buffer(key, seq, merge, Vec::new())
                    .with_blobs(&inner.blobs)
                    .cache_only(opts.read_tier == ReadTier::BlockCacheOnly);
                state.cover_with(super::read::mem_range_cover(&sv, key, seq));
                probes.push(Probe { key, hash: bloom::key_hash(key), lookup, state });
            }
            probe_of[i] = probes.len() - 1;
        }

        for p in &mut probes {
            if sv.mem.may_contain(p.hash) {
                sv.mem.get(p.key, p.hash, seq, &mut p.state);
            }
            for m in &sv.imm {
                if p.state.is_done() {
                    break;
                }
                if m.may_contain(p.hash) {
                    m.get(p.key, p.hash, seq, &mut p.state);
                }
            }
            if p.state.is_done() {
                Counters::add(&inner.counters.memtable_hits, 1);
            }
        }

        let v = &sv.version;
        for f in v.files(0) {
            let in_range: Vec<usize> = (0..probes.len())
                .filter(|&i| {
                    let p = &probes[i];
                    !p.state.is_done() && f.smallest_user_key() <= p.key && p.key <= f.largest_user_key()
                })
                .collect();
            if !in_range.is_empty() {
                self.probe_round(&fam.opts, opts, vec![TableProbes { meta: f, probes: in_range }], &mut probes);
            }
        }
        for level in 1..v.num_levels() {
            let mut round: Vec<TableProbes> = Vec::new();
            for (i, p) in probes.iter().enumerate() {
                if p.state.is_done() {
                    continue;
                }
                let Some(f) = v.file_for_key(level, p.key) else { continue };
                match round.last_mut() {
                    Some(t) if t.meta.number == f.number => t.probes.push(i),
                    _ => round.push(TableProbes { meta: f, probes: vec![i] }),
                }
            }
            if !round.is_empty() {
                self.probe_round(&fam.opts, opts, round, &mut probes);
            }
        }

        // Finish each distinct key once, then hand its result to every input position asking for it.
        let mut results: Vec<Option<Result<Option<Vec<u8>>>>> = Vec::with_capacity(probes.len());
        for p in probes {
            let mut out = Vec::new();
            let key = p.key;
            let r = p
                .state
                .finish_into(&mut out)
                .and_then(|found| self.ttl_read(opts, key, found, &mut out))
                .map(|found| found.then_some(out));
            if let Ok(Some(_)) = r {
                Counters::add(&inner.counters.gets_found, 1);
            }
            results.push(Some(r));
        }
        let mut uses = vec![0usize; results.len()];
        for &p in &probe_of {
            uses[p] += 1;
        }
        probe_of
            .iter()
            .map(|&p| {
                uses[p] -= 1;
                let r = if uses[p] == 0 { results[p].take() } else { results[p].clone() };
                r.unwrap_or_else(|| Err(Error::InvalidArgument("multi_get: a result was taken twice".into())))
            })
            .collect()
    }

    /// One round of table probes: `round` lists the tables to search (at most one per probe) and, for each, its
    /// undecided probes in ascending key order. Filters first, then one index walk per table, then the
    /// distinct blocks: cached ones at once, missing ones read in parallel; then each probe's entries are fed.
    fn probe_round(&self, fopts: &Options, opts: &ReadOptions, round: Vec<TableProbes>, probes: &mut [Probe]) {
        let inner = &self.inner;
        // ReadTier::BlockCacheOnly: a key whose lookup would read a file gets Incomplete, the others an answer.
        let cache_only = opts.read_tier == ReadTier::BlockCacheOnly;
        let mut slots: Vec<(Arc<Table>, BlockHandle, Slot)> = Vec::new();
        let mut slot_at: HashMap<(u64, u64), usize> = HashMap::new();
        // (probe, table, slot): what to feed once the blocks are in.
        let mut work: Vec<(usize, Arc<Table>, usize)> = Vec::new();
        for tp in round {
            // The file's range tombstones first: they apply to its own older entries and to every file below.
            match inner.tables.range_dels_in(tp.meta, cache_only) {
                Ok(Some(rd)) => {
                    for &i in &tp.probes {
                        let cover = rd.covering_seq(probes[i].key, probes[i].state.seq());
                        probes[i].state.cover_with(cover);
                    }
                }
                Ok(None) => {}
                Err(e) => {
                    for &i in &tp.probes {
                        probes[i].state.fail(e.clone());
                    }
                    continue;
                }
            }
            let table = match inner.tables.get_in(tp.meta, cache_only) {
                Ok(t) => t,
                Err(e) => {
                    for &i in &tp.probes {
                        probes[i].state.fail(e.clone());
                    }
                    continue;
                }
            };
            let mut wanted: Vec<usize> = Vec::with_capacity(tp.probes.len());
            for &i in &tp.probes {
                Counters::add(&inner.counters.bloom_checked, 1);
                if table_may_contain(fopts, &table, probes[i].key, probes[i].hash, cache_only) {
                    wanted.push(i);
                } else {
                    Counters::add(&inner.counters.bloom_useful, 1);
                }
            }
            if wanted.is_empty() {
                continue;
            }
            let targets: Vec<&[u8]> = wanted.iter().map(|&i| probes[i].lookup.as_slice()).collect();
            let handles = match table.locate_blocks(&targets, cache_only) {
                Ok(h) => h,
                Err(e) => {
                    for &i in &wanted {
                        probes[i].state.fail(e.clone());
                    }
                    continue;
                }
            };
            for (&i, h) in wanted.iter().zip(handles) {
                // None: the key sorts after every block of the table, so the table has none of its entries.
                let Some(h) = h else { continue };
                let s = *slot_at.entry((tp.meta.number, h.offset)).or_insert_with(|| {
                    let slot = match table.cached_data_block(h) {
                        Some(b) => Slot::Cached(b),
                        None => Slot::Miss,
                    };
                    slots.push((Arc::clone(&table), h, slot));
                    slots.len() - 1
                });
                work.push((i, Arc::clone(&table), s));
            }
        }

        if cache_only {
            for (t, h, slot) in &mut slots {
                if matches!(slot, Slot::Miss) {
                    let what = format!(
                        "data block at offset {} of {} is not in the block cache",
                        h.offset,
                        t.path().display()
                    );
                    *slot = Slot::Read(Err(Error::Incomplete(what)));
                }
            }
        } else {
            read_misses(&mut slots, opts.verify_checksums, opts.fill_cache);
        }

        for (i, table, s) in work {
            let (_, h, slot) = &slots[s];
            let block = match slot {
                Slot::Cached(b) | Slot::Read(Ok(b)) => Arc::clone(b),
                Slot::Read(Err(e)) => {
                    probes[i].state.fail(e.clone());
                    continue;
                }
                // `read_misses` leaves no miss behind.
                Slot::Miss => continue,
            };
            feed_from_block(&table, *h, block, opts, &mut probes[i]);
        }
    }
}

/// Feeds `p` the entries of its key in `block` (block `h` of `table`). When the key's entries go on past the
/// block's end (many versions of one key), the rest are read through a table iterator, as `get` reads them.
fn feed_from_block(table: &Arc<Table>, h: BlockHandle, block: Arc<Block>, opts: &ReadOptions, p: &mut Probe) {
    let location = Some((table.path(), h.offset));
    let mut it = BlockIter::new(block, KeyOrder::Internal);
    it.seek(&p.lookup);
    let mut last_fed: Option<Vec<u8>> = None;
    while it.valid() {
        let k = it.key();
        if ikey::user_key(k) != p.key {
            return;
        }
        if p.state.feed_from(k, it.value(), location) {
            return;
        }
        last_fed = Some(k.to_vec());
        it.next();
    }
    if let Err(e) = it.status() {
        p.state.fail(shaledb_format::table::in_block(e, table.path(), h.offset));
        return;
    }
    // The block ended with the key undecided: its older entries may open the next block.
    let mut t = table.iter_with(&TableIterOptions {
        verify_checksums: opts.verify_checksums,
        fill_cache: opts.fill_cache,
        readahead: Readahead::Off,
        block_cache_only: opts.read_tier == ReadTier::BlockCacheOnly,
    });
    match &last_fed {
        Some(k) => {
            t.seek(k);
            if t.valid() {
                t.next();
            }
        }
        None => t.seek(&p.lookup),
    }
    while t.valid() {
        let k = t.key();
        if ikey::user_key(k) != p.key {
            break;
        }
        if p.state.feed_from(k, t.value(), t.location()) {
            return;
        }
        t.next();
    }
    if let Err(e) = t.status() {
        p.state.fail(e);
    }
}

/// Reads every `Slot::Miss` of `slots`. One miss is read here; more are shared between this thread and the
/// reader pool, each thread taking the next unread block, so the reads overlap and the caller never waits on
/// a pool busy with another batch (it reads whatever is left itself).
///
/// Blocks the operating system's page cache holds are read first, here, without waiting
/// ([`Table::try_read_data_block_cached`]): handing a read that takes microseconds to another thread costs more
/// than the read (a wake-up and two context switches on a machine with few cores), so only the reads that must
/// wait on the device go to the pool.
fn read_misses(slots: &mut [(Arc<Table>, BlockHandle, Slot)], verify: bool, fill_cache: bool) {
    let mut misses: Vec<usize> = Vec::new();
    for (s, (t, h, slot)) in slots.iter_mut().enumerate() {
        if !matches!(slot, Slot::Miss) {
            continue;
        }
        match t.try_read_data_block_cached(*h, verify, fill_cache) {
            Ok(Some(b)) => *slot = Slot::Read(Ok(b)),
            Ok(None) => misses.push(s),
            Err(e) => *slot = Slot::Read(Err(e)),
        }
    }
    match misses.len() {
        0 => return,
        1 => {
            let (t, h, slot) = &mut slots[misses[0]];
            *slot = Slot::Read(t.read_data_block(*h, verify, fill_cache));
            return;
        }
        _ => {}
    }
    let batch = Arc::new(ReadBatch {
        items: misses.iter().map(|&s| (Arc::clone(&slots[s].0), slots[s].1)).collect(),
        next: AtomicUsize::new(0),
        verify,
        fill_cache,
    });
    let (tx, rx): (Sender<BlockRead>, Receiver<BlockRead>) = crossbeam_channel::unbounded();
    if let Some(pool) = read_pool() {
        for _ in 0..(misses.len() - 1).min(pool.threads) {
            let (b, tx) = (Arc::clone(&batch), tx.clone());
            // A pool that cannot take the job leaves its share to this thread.
            let _ = pool.jobs.send(Box::new(move || b.run(&tx)));
        }
    }
    batch.run(&tx);
    drop(tx);
    for _ in 0..misses.len() {
        // Every item is claimed exactly once and its claimer always sends its result; the channel ends only
        // after every sender is gone, i.e. after every claimed item was sent.
        let Ok((k, r)) = rx.recv() else { break };
        slots[misses[k]].2 = Slot::Read(r);
    }
    // Defensive: had a reader thread died with a claimed item, read it here rather than lose it.
    for &s in &misses {
        let (t, h, slot) = &mut slots[s];
        if matches!(slot, Slot::Miss) {
            *slot = Slot::Read(t.read_data_block(*h, verify, fill_cache));
        }
    }
}

/// A miss read: its index in [`ReadBatch::items`] and the block or the error.
type BlockRead = (usize, Result<Arc<Block>>);

/// The cache misses of one round, claimed one at a time by the threads reading them.
struct ReadBatch {
    items: Vec<(Arc<Table>, BlockHandle)>,
    next: AtomicUsize,
    verify: bool,
    fill_cache: bool,
}

impl ReadBatch {
    fn run(&self, tx: &Sender<BlockRead>) {
        loop {
            let k = self.next.fetch_add(1, Ordering::Relaxed);
            let Some((t, h)) = self.items.get(k) else { return };
            // The receiver may be gone only if the caller's thread unwound; nothing is left to tell then.
            let _ = tx.send((k, t.read_data_block(*h, self.verify, self.fill_cache)));
        }
    }
}

type Job = Box<dyn FnOnce() + Send>;

/// The reader threads (started on the first batch with two misses or more; they live as long as the process,
/// like RocksDB's `Env` thread pools).
struct ReadPool {
    jobs: Sender<Job>,
    threads: usize,
}

fn read_pool() -> Option<&'static ReadPool> {
    static POOL: OnceLock<Option<ReadPool>> = OnceLock::new();
    POOL.get_or_init(|| {
        let (tx, rx) = crossbeam_channel::unbounded::<Job>();
        let mut threads = 0;
        for n in 0..READ_THREADS {
            let rx = rx.clone();
            let spawned = std::thread::Builder::new().name(format!("shaledb-mget-{n}")).spawn(move || {
                for job in rx.iter() {
                    job();
                }
            });
            if spawned.is_ok() {
                threads += 1;
            }
        }
        // No thread: the caller reads every miss itself.
        (threads > 0).then_some(ReadPool { jobs: tx, threads })
    })
    .as_ref()
}
