//! The benchmarks: what each thread does, with db_bench's counts, key choice and messages.

use crate::db_bench::keygen::{KeyShape, ValueData};
use crate::db_bench::random::Mt64;
use crate::engine::{Engine, EngineIter, WriteMode};
use crate::reporting::recorder::{OpType, ThreadStats};
use crate::{BenchError, Result};
use parking_lot::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// Every benchmark name `--benchmarks` accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Write `num` keys in order.
    FillSeq,
    /// Write `num` random keys (with repeats).
    FillRandom,
    /// Write each of `num` keys once, in random order.
    FillUniqueRandom,
    /// Write `num` keys in order into table files of `--ingest_keys_per_file` keys, each ingested
    /// (`crate::db_bench::fillingest`).
    FillIngest,
    /// Write `num/1000` random keys, fsync'd.
    FillSync,
    /// Write random keys over an existing database.
    Overwrite,
    /// Scan forward.
    ReadSeq,
    /// Scan backward.
    ReadReverse,
    /// Read random existing keys.
    ReadRandom,
    /// Read random absent keys.
    ReadMissing,
    /// Read random existing keys `--batch_size` at a time with MultiGet.
    MultiReadRandom,
    /// Readers plus one writer; the line reports the readers.
    ReadWhileWriting,
    /// Readers plus one thread merging (`--merge_operator`); the line reports the readers.
    ReadWhileMerging,
    /// Seek to random keys, then `--seek_nexts` steps.
    SeekRandom,
    /// seekrandom's threads plus one writer; the line reports the seekers.
    SeekRandomWhileWriting,
    /// seekrandom's threads plus one thread merging; the line reports the seekers.
    SeekRandomWhileMerging,
    /// Delete keys in order.
    DeleteSeq,
    /// Delete random keys.
    DeleteRandom,
    /// Read a random key, then write it.
    UpdateRandom,
    /// Merge an operand into a random key.
    MergeRandom,
    /// `--readwritepercent` reads, the rest writes.
    ReadRandomWriteRandom,
    /// Compact the whole key range.
    Compact,
    /// Compact every L0 file into the next level holding data.
    Compact0,
    /// Compact every file of the first level below L0 holding data into the next one holding data.
    Compact1,
    /// Print the memtables' sizes and entry counts.
    MemStats,
    /// Flush the memtables.
    Flush,
    /// Wait for background work.
    WaitForCompaction,
    /// Print the database's stats.
    Stats,
    /// Print the per-level file summary.
    LevelStats,
    /// db_bench's RandomTransaction: each operation adds one random amount to one random key of each of
    /// `--transaction_sets` sets, in a transaction (`--transaction_db`, `--optimistic_transaction_db`) or a
    /// plain batch; afterwards every set must sum to the same total.
    RandomTransaction,
}

const NAMES: &[(&str, Kind)] = &[
    ("fillseq", Kind::FillSeq),
    ("fillrandom", Kind::FillRandom),
    ("filluniquerandom", Kind::FillUniqueRandom),
    ("fillingest", Kind::FillIngest),
    ("fillsync", Kind::FillSync),
    ("overwrite", Kind::Overwrite),
    ("readseq", Kind::ReadSeq),
    ("readreverse", Kind::ReadReverse),
    ("readrandom", Kind::ReadRandom),
    ("readmissing", Kind::ReadMissing),
    ("multireadrandom", Kind::MultiReadRandom),
    ("readwhilewriting", Kind::ReadWhileWriting),
    ("readwhilemerging", Kind::ReadWhileMerging),
    ("seekrandomwhilewriting", Kind::SeekRandomWhileWriting),
    ("seekrandomwhilemerging", Kind::SeekRandomWhileMerging),
    ("seekrandom", Kind::SeekRandom),
    ("deleteseq", Kind::DeleteSeq),
    ("deleterandom", Kind::DeleteRandom),
    ("updaterandom", Kind::UpdateRandom),
    ("mergerandom", Kind::MergeRandom),
    ("readrandomwriterandom", Kind::ReadRandomWriteRandom),
    ("compact", Kind::Compact),
    ("compact0", Kind::Compact0),
    ("compact1", Kind::Compact1),
    ("memstats", Kind::MemStats),
    ("flush", Kind::Flush),
    ("waitforcompaction", Kind::WaitForCompaction),
    ("stats", Kind::Stats),
    ("levelstats", Kind::LevelStats),
    ("randomtransaction", Kind::RandomTransaction),
];

impl Kind {
    /// The benchmark called `name`.
    pub fn from_name(name: &str) -> Option<Kind> {
        NAMES.iter().find(|(n, _)| *n == name).map(|(_, k)| *k)
    }

    /// The name.
    pub fn name(self) -> &'static str {
        NAMES.iter().find(|(_, k)| *k == self).map_or("?", |(n, _)| n)
    }

    /// All names, comma-separated.
    pub fn known() -> String {
        NAMES.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", ")
    }

    /// Fill benchmarks start from an empty database (db_bench's `fresh_db`).
    pub fn fresh_db(self) -> bool {
        matches!(self, Kind::FillSeq | Kind::FillRandom | Kind::FillUniqueRandom | Kind::FillSync | Kind::FillIngest)
    }

    /// Steps without worker threads or a result line.
    pub fn is_meta(self) -> bool {
        matches!(
            self,
            Kind::Flush
                | Kind::WaitForCompaction
                | Kind::Stats
                | Kind::LevelStats
                | Kind::Compact0
                | Kind::Compact1
                | Kind::MemStats
        )
    }

    /// Benchmarks with one extra thread writing (or merging) in the background while the others measure.
    pub fn has_background_writer(self) -> bool {
        matches!(
            self,
            Kind::ReadWhileWriting
                | Kind::ReadWhileMerging
                | Kind::SeekRandomWhileWriting
                | Kind::SeekRandomWhileMerging
        )
    }

    /// Whether the benchmark runs with `--num_column_families` > 1. Those that do not read through one
    /// iterator (db_bench scans and seeks in the default family only, which with N families holds a
    /// N-th of the keys), run transactions or ingest files, or compact one level of one family.
    pub fn runs_with_families(self) -> bool {
        !matches!(
            self,
            Kind::ReadSeq
                | Kind::ReadReverse
                | Kind::SeekRandom
                | Kind::SeekRandomWhileWriting
                | Kind::SeekRandomWhileMerging
                | Kind::RandomTransaction
                | Kind::FillIngest
                | Kind::Compact0
                | Kind::Compact1
        )
    }

    /// Benchmarks that, with `--num_column_families` > 1, use every family here (key number k in family
    /// k % N, as the fills put it there) where db_bench 7.8 uses the default family only.
    pub fn families_beyond_db_bench(self) -> bool {
        matches!(
            self,
            Kind::MultiReadRandom
                | Kind::DeleteSeq
                | Kind::DeleteRandom
                | Kind::UpdateRandom
                | Kind::ReadRandomWriteRandom
                | Kind::ReadWhileWriting
                | Kind::ReadWhileMerging
                | Kind::Compact
        )
    }

    /// Benchmarks that need `--merge_operator`.
    pub fn needs_merge_operator(self) -> bool {
        matches!(self, Kind::MergeRandom | Kind::ReadWhileMerging | Kind::SeekRandomWhileMerging)
    }
}

/// db_bench's message for `kind` from the merged counters. NB: db_bench shows one thread's counts; the
/// totals over all threads are shown here.
pub fn message(kind: Kind, m: &crate::reporting::recorder::Merged) -> String {
    match kind {
        Kind::ReadRandom
        | Kind::ReadMissing
        | Kind::MultiReadRandom
        | Kind::ReadWhileWriting
        | Kind::ReadWhileMerging
        | Kind::SeekRandom
        | Kind::SeekRandomWhileWriting
        | Kind::SeekRandomWhileMerging => {
            format!("({} of {} found)", m.found, m.reads)
        }
        Kind::UpdateRandom => format!("( updates:{} found:{})", m.updates, m.found),
        Kind::MergeRandom => format!("( updates:{})", m.updates),
        Kind::ReadRandomWriteRandom => {
            format!("( reads:{} writes:{} total:{} found:{})", m.reads, m.writes, m.reads + m.writes, m.found)
        }
        _ => m.message.clone(),
    }
}

/// db_bench's `Duration`: a count of operations, or a time limit when `--duration` applies.
pub struct Budget {
    max_ops: u64,
    deadline: Option<Instant>,
    ops: u64,
}

impl Budget {
    /// `max_ops` operations, or `seconds` of running when non-zero.
    pub fn new(seconds: u64, max_ops: u64) -> Budget {
        let deadline = (seconds > 0).then(|| Instant::now() + Duration::from_secs(seconds));
        Budget { max_ops, deadline, ops: 0 }
    }

    /// Counts `inc` more operations; true when the budget is spent.
    #[inline]
    pub fn done(&mut self, inc: u64) -> bool {
        let prev = self.ops;
        self.ops += inc.max(1);
        match self.deadline {
            // The clock is read once per 1000 operations, as db_bench does.
            Some(d) => self.ops / 1000 != prev / 1000 && Instant::now() >= d,
            None => self.ops > self.max_ops,
        }
    }
}

/// A token bucket shared by the threads it limits (`--benchmark_write_rate_limit`).
pub struct RateLimiter {
    bytes_per_sec: u64,
    state: Mutex<(Instant, f64)>,
}

impl RateLimiter {
    /// A limiter granting `bytes_per_sec`.
    pub fn new(bytes_per_sec: u64) -> RateLimiter {
        RateLimiter { bytes_per_sec: bytes_per_sec.max(1), state: Mutex::new((Instant::now(), 0.0)) }
    }

    /// Blocks until `bytes` more may be written.
    pub fn request(&self, bytes: u64) {
        let wait = {
            let mut st = self.state.lock();
            // Credit never accumulates beyond a tenth of a second, so a pause does not allow a burst.
            let now = Instant::now();
            let elapsed = now.saturating_duration_since(st.0).as_secs_f64();
            let rate = self.bytes_per_sec as f64;
            st.1 = (st.1 - elapsed * rate).max(-rate / 10.0);
            st.0 = now;
            st.1 += bytes as f64;
            if st.1 > 0.0 {
                Duration::from_secs_f64(st.1 / rate)
            } else {
                Duration::ZERO
            }
        };
        if !wait.is_zero() {
            std::thread::sleep(wait);
        }
    }
}

/// What every worker of one benchmark shares.
pub struct Ctx<'a, E: Engine> {
    /// The database.
    pub db: &'a E,
    /// The benchmark.
    pub kind: Kind,
    /// `--num`.
    pub num: u64,
    /// Key space of this benchmark (fillsync's is `num/1000`).
    pub key_space: u64,
    /// Reads per thread.
    pub reads: u64,
    /// Writes per thread.
    pub writes: u64,
    /// Deletes per thread.
    pub deletes: u64,
    /// Iterations of the read-modify-write benchmarks per thread.
    pub readwrites: u64,
    /// Keys mergerandom uses.
    pub merge_keys: u64,
    /// `--duration`.
    pub duration: u64,
    /// Key size (readmissing's is one longer, so no key exists).
    pub key_size: usize,
    /// `--prefix_size` and `--keys_per_prefix`: how keys are shaped ([`KeyShape`]).
    pub prefix_size: usize,
    /// `--keys_per_prefix`.
    pub keys_per_prefix: u64,
    /// `--transaction_sets`.
    pub transaction_sets: u64,
    /// randomtransaction runs transactions (`--transaction_db` or `--optimistic_transaction_db`), not batches.
    pub transactions: bool,
    /// `--num_column_families`: key number k lives in family k % `families`.
    pub families: u64,
    /// `--value_size`.
    pub value_size: usize,
    /// Durability of writes.
    pub mode: WriteMode,
    /// `--seek_nexts`.
    pub seek_nexts: usize,
    /// `--batch_size`: keys per MultiGet in multireadrandom.
    pub batch_size: u64,
    /// `--multiread_stride`.
    pub multiread_stride: u64,
    /// `--reverse_iterator`.
    pub reverse: bool,
    /// `--readwritepercent`.
    pub read_percent: u32,
    /// Value bytes.
    pub values: &'a ValueData,
    /// Shared writer limit for the fill benchmarks.
    pub write_limiter: Option<&'a RateLimiter>,
    /// Range deletions while writing (`crate::db_bench::range_dels`).
    pub range_dels: Option<crate::db_bench::range_dels::RangeDelPlan>,
    /// `--benchmark_write_rate_limit` (readwhilewriting's writer has its own limiter).
    pub write_rate: u64,
    /// `--threads`: fillingest deals its files out to them in turn.
    pub threads: usize,
    /// `--ingest_keys_per_file`.
    pub ingest_keys_per_file: u64,
    /// Where fillingest writes its files (a temporary directory beside the database); `None` for the other
    /// benchmarks.
    pub ingest_dir: Option<&'a std::path::Path>,
    /// Seed base, for filluniquerandom's shuffle.
    pub seed_base: i64,
    /// Readers still running (readwhilewriting).
    pub readers_left: &'a AtomicUsize,
}

pub(crate) fn err(what: &str, kind: Kind, e: crate::engine::EngineError) -> BenchError {
    BenchError::engine(format!("{} {what}", kind.name()), e)
}

impl<E: Engine> Ctx<'_, E> {
    /// The key for key number `v` of a key space of `num_keys` keys, as db_bench's `GenerateKeyFromInt`.
    #[inline]
    pub(crate) fn key(&self, v: u64, num_keys: u64, out: &mut Vec<u8>) {
        KeyShape { key_size: self.key_size, prefix_size: self.prefix_size, keys_per_prefix: self.keys_per_prefix }
            .make(v, num_keys, out)
    }

    /// The column family of key number `k`: db_bench's `GetCfh(k)`, k % N (0, "default", with one family).
    #[inline]
    pub(crate) fn cf(&self, k: u64) -> usize {
        if self.families > 1 {
            (k % self.families) as usize
        } else {
            0
        }
    }

    /// A get, timed for `--statistics` when `ts` measures calls (`rocksdb.db.get.micros`, and the value's
    /// size in `rocksdb.bytes.per.read` when found).
    pub(crate) fn get(&self, ts: &mut ThreadStats<'_>, cf: usize, key: &[u8], out: &mut Vec<u8>) -> Result<bool> {
        let Some(c) = ts.calls.as_deref_mut() else {
            return self.db.get_cf(cf, key, out).map_err(|e| err("get", self.kind, e));
        };
        let t0 = Instant::now();
        let r = self.db.get_cf(cf, key, out);
        c.get.record(t0.elapsed().as_nanos() as u64);
        if let Ok(true) = r {
            c.bytes_per_read.record(out.len() as u64);
        }
        r.map_err(|e| err("get", self.kind, e))
    }

    /// Times one write call (`rocksdb.db.write.micros`) of `bytes` key and value bytes
    /// (`rocksdb.bytes.per.write`) when `ts` measures calls.
    fn timed_write(
        &self,
        ts: &mut ThreadStats<'_>,
        what: &str,
        bytes: usize,
        call: impl FnOnce() -> crate::engine::EngineResult<()>,
    ) -> Result<()> {
        let r = match ts.calls.as_deref_mut() {
            None => call(),
            Some(c) => {
                let t0 = Instant::now();
                let r = call();
                c.write.record(t0.elapsed().as_nanos() as u64);
                if r.is_ok() {
                    c.bytes_per_write.record(bytes as u64);
                }
                r
            }
        };
        r.map_err(|e| err(what, self.kind, e))
    }

    fn put(&self, ts: &mut ThreadStats<'_>, cf: usize, key: &[u8], value: &[u8]) -> Result<()> {
        self.timed_write(ts, "put", key.len() + value.len(), || self.db.put_cf(cf, self.mode, key, value))
    }

    fn delete_key(&self, ts: &mut ThreadStats<'_>, cf: usize, key: &[u8]) -> Result<()> {
        self.timed_write(ts, "delete", key.len(), || self.db.delete_cf(cf, self.mode, key))
    }

    fn merge(&self, ts: &mut ThreadStats<'_>, cf: usize, key: &[u8], operand: &[u8]) -> Result<()> {
        self.timed_write(ts, "merge", key.len() + operand.len(), || self.db.merge_cf(cf, self.mode, key, operand))
    }

    /// Runs thread `ts.tid`'s share of the benchmark.
    pub fn run_thread(&self, ts: &mut ThreadStats<'_>, rng: &mut Mt64) -> Result<()> {
        match self.kind {
            Kind::FillSeq => self.fill(ts, rng, FillOrder::Seq),
            Kind::FillRandom | Kind::FillSync | Kind::Overwrite => self.fill(ts, rng, FillOrder::Random),
            Kind::FillUniqueRandom => self.fill(ts, rng, FillOrder::Unique),
            Kind::FillIngest => self.fill_ingest(ts),
            Kind::ReadSeq => self.scan(ts, false),
            Kind::ReadReverse => self.scan(ts, true),
            Kind::ReadRandom | Kind::ReadMissing => self.read_random(ts, rng),
            Kind::MultiReadRandom => self.multi_read_random(ts, rng),
            Kind::ReadWhileWriting
            | Kind::ReadWhileMerging
            | Kind::SeekRandomWhileWriting
            | Kind::SeekRandomWhileMerging => {
                let merging = matches!(self.kind, Kind::ReadWhileMerging | Kind::SeekRandomWhileMerging);
                if ts.tid == 0 {
                    self.background_writer(ts, rng, merging)
                } else {
                    let r = if matches!(self.kind, Kind::ReadWhileWriting | Kind::ReadWhileMerging) {
                        self.read_random(ts, rng)
                    } else {
                        self.seek_random(ts, rng)
                    };
                    self.readers_left.fetch_sub(1, Ordering::AcqRel);
                    r
                }
            }
            Kind::SeekRandom => self.seek_random(ts, rng),
            Kind::DeleteSeq => self.delete(ts, rng, true),
            Kind::DeleteRandom => self.delete(ts, rng, false),
            Kind::UpdateRandom => self.update_random(ts, rng),
            Kind::MergeRandom => self.merge_random(ts, rng),
            Kind::RandomTransaction => self.random_transaction(ts, rng),
            Kind::ReadRandomWriteRandom => self.read_random_write_random(ts, rng),
            // db_bench counts no operation for compact (its report says 1, as here) and so prints no histogram:
            // the result line's time is the compaction's.
            Kind::Compact => self.db.compact_all().map_err(|e| err("compact_range", self.kind, e)),
            // The meta steps (`Kind::is_meta`): the runner does them itself, with no worker threads.
            k => {
                debug_assert!(k.is_meta(), "{k:?} has no worker code");
                Ok(())
            }
        }
    }

    fn fill(&self, ts: &mut ThreadStats<'_>, rng: &mut Mt64, order: FillOrder) -> Result<()> {
        let ops = if self.kind == Kind::FillSync { self.key_space } else { self.writes };
        if self.kind == Kind::FillSync {
            ts.message = format!("({} ops)", self.key_space);
        }
        let duration = if order == FillOrder::Random { self.duration } else { 0 };
        let mut budget = Budget::new(duration, ops);
        let shuffled = (order == FillOrder::Unique).then(|| shuffled_keys(self.key_space, self.seed_base));
        let mut values = self.values.generator();
        let mut key = Vec::with_capacity(self.key_size);
        let mut next_seq = 0u64;
        let mut written = 0u64;
        let mut range_deletions = 0u64;
        let mut next_key = |rng: &mut Mt64| match (&shuffled, order) {
            (Some(keys), _) => {
                skip_db_choice(rng);
                let k = keys.get(next_seq as usize).copied().unwrap_or(next_seq);
                next_seq += 1;
                k
            }
            (None, FillOrder::Seq) => {
                next_seq += 1;
                next_seq - 1
            }
            (None, _) => {
                skip_db_choice(rng);
                rng.next_u64() % self.key_space
            }
        };
        while !budget.done(1) {
            let k = next_key(rng);
            self.key(k, self.num, &mut key);
            let v = values.generate(self.value_size);
            let n = (v.len() + key.len()) as u64;
            if let Some(l) = self.write_limiter {
                l.request(n);
                ts.reset_last_op();
            }
            self.put(ts, self.cf(k), &key, v)?;
            ts.bytes += n;
            ts.finished_ops(1, OpType::Write);
            written += 1;
            if self.range_dels.is_some_and(|p| p.due(written)) {
                // db_bench takes the range's first key from the thread's key generator, as a write would, and
                // deletes it in the family of the key just written.
                let begin = next_key(rng);
                self.delete_range(&mut key, begin, self.cf(k))?;
                range_deletions += 1;
            }
        }
        ts.range_deletions = range_deletions;
        Ok(())
    }

    /// One range deletion of `--range_tombstone_width` keys from key number `begin` in family `cf`
    /// (`crate::db_bench::range_dels`).
    fn delete_range(&self, key: &mut Vec<u8>, begin: u64, cf: usize) -> Result<()> {
        let Some(p) = self.range_dels else { return Ok(()) };
        if p.expand {
            for off in 0..p.width {
                self.key(begin.saturating_add(off), self.num, key);
                self.db.delete_cf(cf, self.mode, key).map_err(|e| err("delete", self.kind, e))?;
            }
            return Ok(());
        }
        let mut end = Vec::with_capacity(self.key_size);
        self.key(begin, self.num, key);
        self.key(begin.saturating_add(p.width), self.num, &mut end);
        self.db.delete_range_cf(cf, self.mode, key, &end).map_err(|e| err("delete_range", self.kind, e))
    }

    fn scan(&self, ts: &mut ThreadStats<'_>, reverse: bool) -> Result<()> {
        let mut it = self.db.iter(None, None);
        if reverse {
            it.seek_to_last();
        } else {
            it.seek_to_first();
        }
        let mut i = 0;
        while i < self.reads && it.valid() {
            ts.bytes += (it.key().len() + it.value().len()) as u64;
            ts.finished_ops(1, OpType::Read);
            i += 1;
            if reverse {
                it.prev();
            } else {
                it.next();
            }
        }
        it.status().map_err(|e| err("iterator", self.kind, e))
    }

    fn read_random(&self, ts: &mut ThreadStats<'_>, rng: &mut Mt64) -> Result<()> {
        let mut budget = Budget::new(self.duration, self.reads);
        let mut key = Vec::with_capacity(self.key_size);
        let mut value = Vec::new();
        while !budget.done(1) {
            skip_db_choice(rng);
            let k = rng.next_u64() % self.num;
            self.key(k, self.num, &mut key);
            let found = self.get(ts, self.cf(k), &key, &mut value)?;
            ts.reads += 1;
            if found {
                ts.found += 1;
                ts.bytes += (key.len() + value.len()) as u64;
            }
            ts.finished_ops(1, OpType::Read);
        }
        Ok(())
    }

    /// db_bench's MultiReadRandom: batches of `--batch_size` random keys (or, with `--multiread_stride`, keys
    /// that far apart from a random first one), each read with one MultiGet and counted as that many reads.
    fn multi_read_random(&self, ts: &mut ThreadStats<'_>, rng: &mut Mt64) -> Result<()> {
        let n = self.batch_size.max(1);
        let mut budget = Budget::new(self.duration, self.reads);
        let mut keys: Vec<Vec<u8>> = (0..n).map(|_| Vec::with_capacity(self.key_size)).collect();
        let mut values: Vec<Option<Vec<u8>>> = Vec::with_capacity(n as usize);
        let mut cfs: Vec<usize> = vec![0; n as usize];
        while !budget.done(n) {
            skip_db_choice(rng);
            if self.multiread_stride > 0 {
                let stride = self.multiread_stride;
                let mut k = rng.next_u64() % self.num;
                let span = (n - 1).saturating_mul(stride);
                if k.saturating_add(span) >= self.num {
                    k = self.num.saturating_sub(n.saturating_mul(stride));
                }
                for (key, cf) in keys.iter_mut().zip(&mut cfs) {
                    self.key(k, self.num, key);
                    *cf = self.cf(k);
                    k = k.saturating_add(stride);
                }
            } else {
                for (key, cf) in keys.iter_mut().zip(&mut cfs) {
                    let k = rng.next_u64() % self.num;
                    self.key(k, self.num, key);
                    *cf = self.cf(k);
                }
            }
            let r = match ts.calls.as_deref_mut() {
                None => self.db.multi_get_cf(&cfs, &keys, &mut values),
                Some(c) => {
                    let t0 = Instant::now();
                    let r = self.db.multi_get_cf(&cfs, &keys, &mut values);
                    c.multiget.record(t0.elapsed().as_nanos() as u64);
                    r
                }
            };
            r.map_err(|e| err("multi_get", self.kind, e))?;
            ts.reads += n;
            for (k, v) in keys.iter().zip(&values) {
                if let Some(v) = v {
                    ts.found += 1;
                    ts.bytes += (k.len() + v.len()) as u64;
                }
            }
            ts.finished_ops(n, OpType::Read);
        }
        Ok(())
    }

    /// The extra thread of the `...while...` benchmarks: puts (or merges, with `merging`) random keys until the
    /// measured threads are done.
    fn background_writer(&self, ts: &mut ThreadStats<'_>, rng: &mut Mt64, merging: bool) -> Result<()> {
        ts.exclude = true;
        let limiter = (self.write_rate > 0).then(|| RateLimiter::new(self.write_rate));
        let mut values = self.values.generator();
        let mut key = Vec::with_capacity(self.key_size);
        let (mut written, mut range_deletions) = (0u64, 0u64);
        while self.readers_left.load(Ordering::Acquire) > 0 {
            skip_db_choice(rng);
            let k = rng.next_u64() % self.num;
            self.key(k, self.num, &mut key);
            let v = values.generate(self.value_size);
            if merging {
                self.merge(ts, self.cf(k), &key, v)?;
            } else {
                self.put(ts, self.cf(k), &key, v)?;
            }
            let n = (key.len() + v.len()) as u64;
            ts.bytes += n;
            ts.finished_ops(1, if merging { OpType::Merge } else { OpType::Write });
            if let Some(l) = &limiter {
                l.request(n);
            }
            written += 1;
            if self.range_dels.is_some_and(|p| p.due(written)) {
                let begin = rng.next_u64() % self.num;
                self.delete_range(&mut key, begin, self.cf(k))?;
                range_deletions += 1;
                ts.finished_ops(1, OpType::Write);
            }
        }
        ts.range_deletions = range_deletions;
        Ok(())
    }

    fn seek_random(&self, ts: &mut ThreadStats<'_>, rng: &mut Mt64) -> Result<()> {
        let mut budget = Budget::new(self.duration, self.reads);
        let mut key = Vec::with_capacity(self.key_size);
        while !budget.done(1) {
            self.key(rng.next_u64() % self.num, self.num, &mut key);
            // A new iterator per seek, as db_bench does without --use_tailing_iterator.
            let mut it = self.db.iter(None, None);
            match ts.calls.as_deref_mut() {
                Some(c) => {
                    let t0 = Instant::now();
                    it.seek(&key);
                    c.seek.record(t0.elapsed().as_nanos() as u64);
                }
                None => it.seek(&key),
            }
            ts.reads += 1;
            if it.valid() && it.key() == key.as_slice() {
                ts.found += 1;
            }
            let mut j = 0;
            while j < self.seek_nexts && it.valid() {
                ts.bytes += (it.key().len() + it.value().len()) as u64;
                if self.reverse {
                    it.prev();
                } else {
                    it.next();
                }
                j += 1;
            }
            it.status().map_err(|e| err("iterator", self.kind, e))?;
            ts.finished_ops(1, OpType::Seek);
        }
        Ok(())
    }

    fn delete(&self, ts: &mut ThreadStats<'_>, rng: &mut Mt64, seq: bool) -> Result<()> {
        let mut budget = Budget::new(if seq { 0 } else { self.duration }, self.deletes);
        let mut key = Vec::with_capacity(self.key_size);
        let mut i = 0u64;
        while !budget.done(1) {
            skip_db_choice(rng);
            let k = if seq { i } else { rng.next_u64() % self.num };
            self.key(k, self.num, &mut key);
            self.delete_key(ts, self.cf(k), &key)?;
            ts.finished_ops(1, OpType::Delete);
            i += 1;
        }
        Ok(())
    }

    fn update_random(&self, ts: &mut ThreadStats<'_>, rng: &mut Mt64) -> Result<()> {
        let mut budget = Budget::new(self.duration, self.readwrites);
        let mut values = self.values.generator();
        let mut key = Vec::with_capacity(self.key_size);
        let mut old = Vec::new();
        while !budget.done(1) {
            skip_db_choice(rng);
            let k = rng.next_u64() % self.num;
            self.key(k, self.num, &mut key);
            let found = self.get(ts, self.cf(k), &key, &mut old)?;
            ts.reads += 1;
            if found {
                ts.found += 1;
                ts.bytes += (key.len() + old.len()) as u64;
            }
            if let Some(l) = self.write_limiter {
                l.request((key.len() + if found { old.len() } else { 0 }) as u64);
            }
            let v = values.generate(self.value_size);
            self.put(ts, self.cf(k), &key, v)?;
            ts.bytes += (key.len() + v.len()) as u64;
            ts.updates += 1;
            ts.finished_ops(1, OpType::Update);
        }
        Ok(())
    }

    fn merge_random(&self, ts: &mut ThreadStats<'_>, rng: &mut Mt64) -> Result<()> {
        let mut budget = Budget::new(self.duration, self.readwrites);
        let mut values = self.values.generator();
        let mut key = Vec::with_capacity(self.key_size);
        while !budget.done(1) {
            skip_db_choice(rng);
            let k = rng.next_u64() % self.merge_keys;
            self.key(k, self.merge_keys, &mut key);
            let v = values.generate(self.value_size);
            self.merge(ts, self.cf(k), &key, v)?;
            ts.bytes += (key.len() + v.len()) as u64;
            ts.updates += 1;
            ts.finished_ops(1, OpType::Merge);
        }
        Ok(())
    }

    fn read_random_write_random(&self, ts: &mut ThreadStats<'_>, rng: &mut Mt64) -> Result<()> {
        let mut budget = Budget::new(self.duration, self.readwrites);
        let mut values = self.values.generator();
        let mut key = Vec::with_capacity(self.key_size);
        let mut value = Vec::new();
        let (mut get_weight, mut put_weight) = (0u32, 0u32);
        while !budget.done(1) {
            skip_db_choice(rng);
            let k = rng.next_u64() % self.num;
            self.key(k, self.num, &mut key);
            if get_weight == 0 && put_weight == 0 {
                get_weight = self.read_percent;
                put_weight = 100 - get_weight;
            }
            if get_weight > 0 {
                if self.get(ts, self.cf(k), &key, &mut value)? {
                    ts.found += 1;
                }
                ts.reads += 1;
                get_weight -= 1;
                ts.finished_ops(1, OpType::Read);
            } else if put_weight > 0 {
                let v = values.generate(self.value_size);
                self.put(ts, self.cf(k), &key, v)?;
                put_weight -= 1;
                ts.writes += 1;
                ts.finished_ops(1, OpType::Write);
            }
        }
        Ok(())
    }
}

/// db_bench draws a number per operation to pick one of several databases before drawing the key, even
/// with a single database; drawing it too keeps the key sequence identical to db_bench's for a seed.
#[inline]
fn skip_db_choice(rng: &mut Mt64) {
    rng.next_u64();
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum FillOrder {
    Seq,
    Random,
    Unique,
}

/// Every key number below `n` once, in an order fixed by `seed` (every thread gets the same order, as in
/// db_bench).
pub fn shuffled_keys(n: u64, seed: i64) -> Vec<u64> {
    let mut v: Vec<u64> = (0..n).collect();
    let mut rng = Mt64::new(seed as u64);
    for i in (1..v.len()).rev() {
        let j = (rng.next_u64() % (i as u64 + 1)) as usize;
        v.swap(i, j);
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_round_trips() {
        for (n, k) in NAMES {
            assert_eq!(Kind::from_name(n), Some(*k));
            assert_eq!(k.name(), *n);
        }
        assert_eq!(Kind::from_name("fillrandomx"), None);
    }

    #[test]
    fn budget_counts_operations() {
        let mut b = Budget::new(0, 3);
        let mut n = 0;
        while !b.done(1) {
            n += 1;
        }
        assert_eq!(n, 3);
    }

    #[test]
    fn budget_by_time_ignores_the_count() {
        // The clock starts before the budget's deadline is set, so the elapsed time cannot fall short of it.
        let start = Instant::now();
        let mut b = Budget::new(1, 1);
        let mut n = 0u64;
        while !b.done(1) {
            n += 1;
        }
        assert!(n > 1);
        assert!(start.elapsed() >= Duration::from_secs(1));
    }

    #[test]
    fn shuffle_is_a_permutation() {
        let mut v = shuffled_keys(1000, 7);
        assert_ne!(v, (0..1000).collect::<Vec<_>>());
        v.sort_unstable();
        assert_eq!(v, (0..1000).collect::<Vec<_>>());
        assert_eq!(shuffled_keys(50, 3), shuffled_keys(50, 3));
    }

    #[test]
    fn rate_limiter_paces_writes() {
        let l = RateLimiter::new(100_000);
        let start = Instant::now();
        for _ in 0..20 {
            l.request(1_000);
        }
        // 20 KB at 100 KB/s: about 0.2 s (less the initial tenth-second of credit).
        assert!(start.elapsed() >= Duration::from_millis(90), "{:?}", start.elapsed());
    }
}
