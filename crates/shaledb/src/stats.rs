//! Statistics: counters updated on the hot paths (relaxed atomics) and per-level compaction figures updated
//! once per flush or compaction (under a mutex). [`Statistics`] is the typed snapshot users read; the text
//! report in RocksDB's layout is built from it by `stats_report`.

use parking_lot::Mutex;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::OnceLock;
use std::time::Instant;

/// A distribution of values in RocksDB's histogram buckets (upper bounds 1, 2, 3, 4, 6, 10, 15, 22, ...:
/// each about 1.5x the one before, cut to two significant digits), with the exact count, sum, minimum and
/// maximum. Percentiles interpolate within a bucket and stay within the recorded minimum and maximum, as
/// RocksDB's `HistogramStat::Percentile` does.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Histogram {
    count: u64,
    sum: u64,
    min: u64,
    max: u64,
    /// Values per bucket; empty until the first value.
    buckets: Vec<u64>,
}

/// Upper bounds (inclusive) of the buckets, RocksDB's: 1, 2, then each about 1.5x the previous, rounded down
/// to two significant digits. Shared with the bench's latency histograms, which print in the same buckets.
pub fn bucket_limits() -> &'static [u64] {
    static LIMITS: OnceLock<Vec<u64>> = OnceLock::new();
    LIMITS.get_or_init(|| {
        let mut v = vec![1u64, 2];
        let mut val = 2.0f64;
        loop {
            val *= 1.5;
            if val > u64::MAX as f64 {
                break;
            }
            let mut b = val as u64;
            let mut pow = 1u64;
            while b / 10 > 10 {
                b /= 10;
                pow *= 10;
            }
            v.push(b * pow);
        }
        v.push(u64::MAX);
        v
    })
}

impl Histogram {
    /// Records one value.
    pub fn record(&mut self, v: u64) {
        let limits = bucket_limits();
        if self.buckets.is_empty() {
            self.buckets = vec![0; limits.len()];
            self.min = v;
        }
        let i = limits.partition_point(|&l| l < v).min(limits.len() - 1);
        if let Some(b) = self.buckets.get_mut(i) {
            *b += 1;
        }
        self.count += 1;
        self.sum = self.sum.saturating_add(v);
        self.min = self.min.min(v);
        self.max = self.max.max(v);
    }

    /// Values recorded.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// Their sum.
    pub fn sum(&self) -> u64 {
        self.sum
    }

    /// The smallest (0 when empty).
    pub fn min(&self) -> u64 {
        self.min
    }

    /// The largest (0 when empty).
    pub fn max(&self) -> u64 {
        self.max
    }

    /// The `p`-th percentile (0..=100): linear within its bucket, clamped to `[min, max]`; 0 when empty.
    pub fn percentile(&self, p: f64) -> f64 {
        if self.count == 0 {
            return 0.0;
        }
        let limits = bucket_limits();
        let threshold = self.count as f64 * (p.clamp(0.0, 100.0) / 100.0);
        let mut cumulative = 0u64;
        for (i, &n) in self.buckets.iter().enumerate() {
            cumulative += n;
            if cumulative as f64 >= threshold && n > 0 {
                let left = if i == 0 { 0 } else { limits.get(i - 1).copied().unwrap_or(0) };
                let right = limits.get(i).copied().unwrap_or(u64::MAX);
                let before = (cumulative - n) as f64;
                let pos = ((threshold - before) / n as f64).clamp(0.0, 1.0);
                let r = left as f64 + (right as f64 - left as f64) * pos;
                return r.clamp(self.min as f64, self.max as f64);
            }
        }
        self.max as f64
    }
}

/// Compaction figures of one level (flushes count as compactions into L0), as RocksDB's Compaction Stats
/// table shows them. Attributed to the *output* level.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CompactionStats {
    /// Wall time spent, microseconds.
    pub micros: u64,
    /// CPU time of the thread that ran the job, microseconds (`CompMergeCPU`).
    pub cpu_micros: u64,
    /// Bytes read from the input level (`Rn`).
    pub bytes_read_input_level: u64,
    /// Bytes read from the output level (`Rnp1`).
    pub bytes_read_output_level: u64,
    /// Bytes written to new files (`Write`).
    pub bytes_written: u64,
    /// Bytes moved by trivial moves (`Moved`).
    pub bytes_moved: u64,
    /// Input files from the input level.
    pub files_in_input_level: u64,
    /// Input files from the output level.
    pub files_in_output_level: u64,
    /// Files written.
    pub files_out: u64,
    /// Entries read (`KeyIn`).
    pub records_in: u64,
    /// Entries dropped: shadowed versions, tombstones at the bottom, combined merge operands (`KeyDrop`).
    pub records_dropped: u64,
    /// Number of jobs (`Comp(cnt)`).
    pub count: u64,
    /// Violations of the [`crate::Db::single_delete`] contract met (RocksDB's `num_single_del_mismatch`): a
    /// single deletion next to another one, a deletion or a merge operand of the same key, or two puts of a key
    /// that has a single deletion in the same job. The results are undefined; each job logs how many it met.
    pub single_delete_mismatches: u64,
    /// Entries a [`crate::CompactionFilter`] (or TTL expiry) removed or changed.
    pub records_filtered: u64,
    /// Pieces the jobs ran as ([`crate::Options::max_subcompactions`]; RocksDB logs `num_subcompactions` per
    /// job): 1 per unsplit job, 0 for flushes, trivial moves and drops.
    pub subcompactions: u64,
}

impl CompactionStats {
    /// Adds `o` into `self`.
    pub fn add(&mut self, o: &CompactionStats) {
        self.micros += o.micros;
        self.cpu_micros += o.cpu_micros;
        self.bytes_read_input_level += o.bytes_read_input_level;
        self.bytes_read_output_level += o.bytes_read_output_level;
        self.bytes_written += o.bytes_written;
        self.bytes_moved += o.bytes_moved;
        self.files_in_input_level += o.files_in_input_level;
        self.files_in_output_level += o.files_in_output_level;
        self.files_out += o.files_out;
        self.records_in += o.records_in;
        self.records_dropped += o.records_dropped;
        self.count += o.count;
        self.single_delete_mismatches += o.single_delete_mismatches;
        self.records_filtered += o.records_filtered;
        self.subcompactions += o.subcompactions;
    }
}

/// Shape and compaction figures of one level.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LevelStats {
    /// The level.
    pub level: usize,
    /// Live files.
    pub files: u64,
    /// Of which inputs of a running compaction.
    pub files_being_compacted: u64,
    /// Live bytes.
    pub bytes: u64,
    /// Compaction score (>= 1 means the level needs compaction).
    pub score: f64,
    /// Cumulative compaction figures with this level as output.
    pub compaction: CompactionStats,
}

/// A snapshot of the database's statistics.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Statistics {
    /// Seconds since open.
    pub uptime_secs: f64,
    /// Per level, L0 first.
    pub levels: Vec<LevelStats>,
    /// Write calls (`put`, `delete`, `merge`, `write`).
    pub writes: u64,
    /// Entries written by users.
    pub keys_written: u64,
    /// Key + value bytes written by users (`ingest`).
    pub bytes_written: u64,
    /// Write groups committed (each leader's group counts once).
    pub write_groups: u64,
    /// WAL records appended (one per group that used the WAL).
    pub wal_writes: u64,
    /// WAL bytes appended.
    pub wal_bytes: u64,
    /// WAL fsyncs.
    pub wal_syncs: u64,
    /// Bytes written by flushes.
    pub flush_bytes: u64,
    /// Flushes completed.
    pub flush_count: u64,
    /// Bytes read by compactions.
    pub compaction_bytes_read: u64,
    /// Bytes written by compactions (flushes excluded).
    pub compaction_bytes_written: u64,
    /// Time writers spent delayed or stopped, microseconds.
    pub stall_micros: u64,
    /// Writes delayed by a slowdown condition.
    pub slowdown_count: u64,
    /// Times writers were stopped.
    pub stop_count: u64,
    /// The slowdowns and stops by cause, as RocksDB's `Stalls(count)` line splits them.
    pub stalls: StallCounts,
    /// Block cache hits.
    pub block_cache_hits: u64,
    /// Block cache misses.
    pub block_cache_misses: u64,
    /// Blocks read from files.
    pub blocks_read: u64,
    /// Bytes read from SST files.
    pub bytes_read: u64,
    /// Reads issued to SST files for blocks: one per block read alone, one per readahead window.
    pub table_file_reads: u64,
    /// Bytes those reads asked for (readahead windows whole, whether every block in them was used or not).
    pub table_file_bytes_read: u64,
    /// Bloom filter checks.
    pub bloom_checked: u64,
    /// Bloom filter checks that avoided a block read.
    pub bloom_useful: u64,
    /// Point lookups.
    pub gets: u64,
    /// Point lookups that found a value.
    pub gets_found: u64,
    /// Gets answered by a memtable.
    pub memtable_hits: u64,
    /// Estimated bytes compaction must rewrite to bring every level under its target.
    pub pending_compaction_bytes: u64,
    /// Bytes held by memtables.
    pub memtable_bytes: u64,
    /// Blob files of the current version (`crate::blob`; RocksDB's `Blob file count` in its stats dump).
    pub blob_file_count: u64,
    /// Their bytes on disk.
    pub blob_file_bytes: u64,
    /// Their bytes no table references any more (garbage that blob relocation has not yet removed).
    pub blob_garbage_bytes: u64,
    /// Wall time of each compaction job, microseconds (RocksDB's `rocksdb.compaction.times.micros`; trivial
    /// moves, which rewrite nothing, are not jobs here, as in RocksDB).
    pub compaction_times: Histogram,
    /// CPU time of each compaction job, microseconds (`rocksdb.compaction.times.cpu_micros`).
    pub compaction_cpu_times: Histogram,
    /// Wall time of each memtable flush, microseconds (`rocksdb.db.flush.micros`).
    pub flush_times: Histogram,
}

/// Hot-path counters.
#[derive(Debug)]
pub(crate) struct Counters {
    pub(crate) start: Instant,
    pub(crate) writes: AtomicU64,
    pub(crate) keys_written: AtomicU64,
    pub(crate) bytes_written: AtomicU64,
    pub(crate) write_groups: AtomicU64,
    pub(crate) wal_writes: AtomicU64,
    pub(crate) wal_bytes: AtomicU64,
    pub(crate) wal_syncs: AtomicU64,
    pub(crate) flush_count: AtomicU64,
    pub(crate) stall_micros: AtomicU64,
    pub(crate) slowdown_count: AtomicU64,
    pub(crate) stop_count: AtomicU64,
    /// Indexed by [`StallCause`].
    pub(crate) stall_causes: [AtomicU64; STALL_CAUSES],
    pub(crate) bloom_checked: AtomicU64,
    pub(crate) bloom_useful: AtomicU64,
    pub(crate) gets: AtomicU64,
    pub(crate) gets_found: AtomicU64,
    pub(crate) memtable_hits: AtomicU64,
    /// Background errors recorded (`rocksdb.background-errors`), the first and every later one.
    pub(crate) bg_errors: AtomicU64,
    /// Per output level.
    pub(crate) compaction: Mutex<Vec<CompactionStats>>,
    /// The sample the previous `stats` report was made from: its `Interval` lines cover what happened since
    /// (RocksDB keeps the same snapshot for its DB Stats).
    pub(crate) last_report: Mutex<Option<Statistics>>,
    /// Per-job times: compaction wall and CPU, flush wall.
    pub(crate) job_times: Mutex<[Histogram; 3]>,
}

impl Counters {
    pub(crate) fn new(num_levels: usize) -> Counters {
        Counters {
            start: Instant::now(),
            writes: AtomicU64::new(0),
            keys_written: AtomicU64::new(0),
            bytes_written: AtomicU64::new(0),
            write_groups: AtomicU64::new(0),
            wal_writes: AtomicU64::new(0),
            wal_bytes: AtomicU64::new(0),
            wal_syncs: AtomicU64::new(0),
            flush_count: AtomicU64::new(0),
            stall_micros: AtomicU64::new(0),
            slowdown_count: AtomicU64::new(0),
            stop_count: AtomicU64::new(0),
            stall_causes: Default::default(),
            bloom_checked: AtomicU64::new(0),
            bloom_useful: AtomicU64::new(0),
            gets: AtomicU64::new(0),
            gets_found: AtomicU64::new(0),
            memtable_hits: AtomicU64::new(0),
            bg_errors: AtomicU64::new(0),
            compaction: Mutex::new(vec![CompactionStats::default(); num_levels]),
            last_report: Mutex::new(None),
            job_times: Mutex::new(Default::default()),
        }
    }

    #[inline]
    pub(crate) fn add(c: &AtomicU64, n: u64) {
        c.fetch_add(n, Relaxed);
    }

    /// [`Counters::add`] for a counter that only holders of one lock change (the write path's counters, under
    /// the `wal` mutex): a load and a store rather than a locked read-modify-write, which the lone writer's
    /// put paid six times. REQUIRES: every writer of `c` holds the same lock.
    pub(crate) fn add_exclusive(c: &AtomicU64, n: u64) {
        c.store(c.load(Relaxed).wrapping_add(n), Relaxed);
    }

    /// Keeps `now` as the sample of the latest `stats` report and returns the one before it.
    pub(crate) fn swap_report_sample(&self, now: Statistics) -> Option<Statistics> {
        self.last_report.lock().replace(now)
    }

    /// Records the times of one compaction job (`s` its figures).
    pub(crate) fn record_compaction_job(&self, s: &CompactionStats) {
        let mut t = self.job_times.lock();
        t[0].record(s.micros);
        t[1].record(s.cpu_micros);
    }

    /// Records the time of one flush.
    pub(crate) fn record_flush_job(&self, s: &CompactionStats) {
        self.job_times.lock()[2].record(s.micros);
    }

    pub(crate) fn record_compaction(&self, output_level: usize, s: &CompactionStats) {
        if let Some(slot) = self.compaction.lock().get_mut(output_level) {
            slot.add(s);
        }
    }
}

/// Why writers were slowed down or stopped (RocksDB's `Stalls(count)` causes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum StallCause {
    L0Slowdown,
    L0SlowdownWithCompaction,
    L0Stop,
    L0StopWithCompaction,
    PendingStop,
    PendingSlowdown,
    MemtableStop,
    MemtableSlowdown,
}

pub(crate) const STALL_CAUSES: usize = 8;

impl Counters {
    /// Counts one slowdown or stop for `cause`, and for its `_with_compaction` twin when a compaction runs.
    pub(crate) fn stall(&self, cause: StallCause, compaction_running: bool) {
        Counters::add(&self.stall_causes[cause as usize], 1);
        let twin = match cause {
            StallCause::L0Slowdown => Some(StallCause::L0SlowdownWithCompaction),
            StallCause::L0Stop => Some(StallCause::L0StopWithCompaction),
            _ => None,
        };
        if let (Some(t), true) = (twin, compaction_running) {
            Counters::add(&self.stall_causes[t as usize], 1);
        }
    }

    pub(crate) fn stall_counts(&self) -> StallCounts {
        let c = |k: StallCause| self.stall_causes[k as usize].load(std::sync::atomic::Ordering::Relaxed);
        StallCounts {
            level0_slowdown: c(StallCause::L0Slowdown),
            level0_slowdown_with_compaction: c(StallCause::L0SlowdownWithCompaction),
            level0_numfiles: c(StallCause::L0Stop),
            level0_numfiles_with_compaction: c(StallCause::L0StopWithCompaction),
            stop_for_pending_compaction_bytes: c(StallCause::PendingStop),
            slowdown_for_pending_compaction_bytes: c(StallCause::PendingSlowdown),
            memtable_compaction: c(StallCause::MemtableStop),
            memtable_slowdown: c(StallCause::MemtableSlowdown),
        }
    }
}

/// Write slowdowns and stops by cause, named as in RocksDB's `Stalls(count)` line.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StallCounts {
    /// Slowdowns: L0 reached `level0_slowdown_writes_trigger` files.
    pub level0_slowdown: u64,
    /// Those of them while a compaction was running.
    pub level0_slowdown_with_compaction: u64,
    /// Stops: L0 reached `level0_stop_writes_trigger` files.
    pub level0_numfiles: u64,
    /// Those of them while a compaction was running.
    pub level0_numfiles_with_compaction: u64,
    /// Stops: pending compaction bytes reached `hard_pending_compaction_bytes_limit`.
    pub stop_for_pending_compaction_bytes: u64,
    /// Slowdowns: pending compaction bytes reached `soft_pending_compaction_bytes_limit`.
    pub slowdown_for_pending_compaction_bytes: u64,
    /// Stops: `max_write_buffer_number` memtables full, waiting for a flush.
    pub memtable_compaction: u64,
    /// Slowdowns: all but one of more than three allowed memtables full.
    pub memtable_slowdown: u64,
}

impl StallCounts {
    /// The sum benchmark.sh reports as `Nstall`: every cause, the `_with_compaction` subsets excluded.
    pub fn total(&self) -> u64 {
        self.level0_slowdown
            + self.level0_numfiles
            + self.stop_for_pending_compaction_bytes
            + self.slowdown_for_pending_compaction_bytes
            + self.memtable_compaction
            + self.memtable_slowdown
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_buckets_and_percentiles_follow_rocksdb() {
        assert_eq!(&bucket_limits()[..12], &[1, 2, 3, 4, 6, 10, 15, 22, 34, 51, 76, 110]);
        let mut h = Histogram::default();
        assert_eq!((h.count(), h.percentile(50.0)), (0, 0.0));
        for v in 1..=100u64 {
            h.record(v);
        }
        assert_eq!((h.count(), h.sum(), h.min(), h.max()), (100, 5050, 1, 100));
        // The 50th value is the 16th of the 17 in the (34, 51] bucket: 34 + 17 * 16/17.
        assert!((h.percentile(50.0) - 50.0).abs() < 1e-9, "{}", h.percentile(50.0));
        let p99 = h.percentile(99.0);
        assert!(p99 > 76.0 && p99 <= 100.0, "{p99}");
        // Never above the largest value, never below the smallest.
        assert_eq!(h.percentile(100.0), 100.0);
        let mut one = Histogram::default();
        one.record(1_000_000);
        for p in [0.0, 50.0, 95.0, 99.0, 100.0] {
            assert_eq!(one.percentile(p), 1_000_000.0, "p{p}");
        }
        one.record(u64::MAX);
        assert_eq!(one.max(), u64::MAX);
        assert_eq!(one.sum(), u64::MAX);
    }
}
