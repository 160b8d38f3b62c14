//! [`Db::property`] and [`Db::property_int`]: RocksDB's `GetProperty` / `GetIntProperty` over the `rocksdb.*`
//! names whose figures ShaleDB tracks; and [`Db::statistics`], the same figures as one struct.

use super::family::Family;
use super::{Db, DbInner};
use crate::stats::{LevelStats, Statistics};
use crate::version::Version;
use std::collections::{BTreeMap, HashSet};
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};

/// Text properties (RocksDB's string handlers): [`Db::property_int`] answers `None` for them.
const TEXT: &[&str] = &["stats", "dbstats", "cfstats", "levelstats", "sstables", "background-error"];

impl Db {
    /// A property of the database as text, by RocksDB's name (`rocksdb.<name>`; the `shaledb.` prefix is
    /// accepted as well): RocksDB's `DB::GetProperty`. An unknown name, or a level past the last, is `None`.
    /// Every integer property of [`Db::property_int`] is answered here too, in decimal.
    ///
    /// Text properties:
    ///
    /// - `stats`: `cfstats` followed by `dbstats`, as RocksDB prints it (`shaledb bench --stats_per_interval`
    ///   and db_bench's `stats` read this).
    /// - `cfstats`: the compaction table per level, then uptime, flush, compaction and stall lines.
    /// - `dbstats`: the `** DB Stats **` block: writes, WAL and stall time, cumulative and for the interval.
    ///   The `Interval` lines of `stats`, `cfstats` and `dbstats` cover the time since the previous call of any
    ///   of the three (since open for the first): RocksDB keeps one sample per family and one for the DB; ShaleDB
    ///   has one family, so one sample.
    /// - `levelstats`: the compaction table alone.
    /// - `sstables`: the live tables per level, one line each:
    ///   ` <number>:<bytes>[<smallest seq> .. <largest seq>]['<smallest key>' .. '<largest key>']`, keys with
    ///   non-printable bytes escaped (RocksDB's `Version::DebugString` layout).
    /// - `num-files-at-level<N>`: tables in level `N` (a string property in RocksDB too).
    /// - `shaledb.background-error` (ShaleDB only): the background error that made the database read-only
    ///   (docs/durability.md D6), empty while there is none.
    ///
    /// Not offered, with why:
    ///
    /// - `is-write-stopped`, `actual-delayed-write-rate`: ShaleDB decides a stop or a delay for each write group
    ///   from the LSM's shape at that moment (db/write.rs) and keeps no write controller whose state could be
    ///   reported; any figure here would be a guess.
    /// - `block-cache-pinned-usage`: the block cache does not track which of its entries readers hold.
    /// - `num-immutable-mem-table-flushed`, `min-log-number-to-keep`, `min-obsolete-sst-number-to-keep`,
    ///   `current-super-version-number`, `is-file-deletions-enabled`, `estimate-oldest-key-time`, aggregated
    ///   and per-CF-map properties: ShaleDB has no such state (no flushed-memtable history, no file deletion
    ///   switch, one column family).
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = shaledb::Db::open(dir.path(), shaledb::Options::default())?;
    /// db.put("k", "v")?;
    /// assert_eq!(db.property("rocksdb.num-entries-active-mem-table").as_deref(), Some("1"));
    /// db.flush()?;
    /// assert_eq!(db.property("rocksdb.num-files-at-level0").as_deref(), Some("1"));
    /// assert!(db.property("rocksdb.sstables").unwrap().contains("--- level 0 ---"));
    /// assert_eq!(db.property("rocksdb.no-such-property"), None);
    /// # Ok::<(), shaledb::Error>(())
    /// ```
    pub fn property(&self, name: &str) -> Option<String> {
        self.property_in(&self.inner.default, name)
    }

    /// [`Db::property`] of column family `cf`: the memtable, table, level and compaction figures are the
    /// family's (`stats`, `dbstats` and the database-wide figures are the same as [`Db::property`]'s).
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = shaledb::Db::open(dir.path(), shaledb::Options::default())?;
    /// let logs = db.create_column_family("logs", shaledb::Options::default())?;
    /// db.put_cf(&logs, "k", "v")?;
    /// db.flush()?;
    /// assert_eq!(db.property_cf(&logs, "rocksdb.num-files-at-level0").as_deref(), Some("1"));
    /// assert_eq!(db.property("rocksdb.num-files-at-level0").as_deref(), Some("0"));
    /// assert_eq!(db.property_int_cf(&logs, "rocksdb.estimate-num-keys"), Some(1));
    /// # Ok::<(), shaledb::Error>(())
    /// ```
    pub fn property_cf(&self, cf: &super::ColumnFamily, name: &str) -> Option<String> {
        self.property_in(&cf.fam, name)
    }

    /// [`Db::property_int`] of column family `cf` (see [`Db::property_cf`]).
    pub fn property_int_cf(&self, cf: &super::ColumnFamily, name: &str) -> Option<u64> {
        self.int_property(&cf.fam, strip(name)?)
    }

    fn property_in(&self, fam: &Family, name: &str) -> Option<String> {
        let name = strip(name)?;
        if let Some(v) = self.int_property(fam, name) {
            return Some(v.to_string());
        }
        match name {
            "stats" | "cfstats" | "dbstats" => {
                let text = stats_text(&self.inner);
                // `format_stats` writes the family's figures, then the DB's from this header on.
                let at = text.find("** DB Stats **").unwrap_or(text.len());
                Some(match name {
                    "cfstats" => text[..at].to_string(),
                    "dbstats" => text[at..].to_string(),
                    _ => text,
                })
            }
            "levelstats" => Some(crate::stats_report::format_level_stats(&self.statistics())),
            "sstables" => Some(sstables(&fam.sv.load().version)),
            "background-error" => {
                Some(self.inner.state.lock().bg_error.as_ref().map_or(String::new(), |e| e.to_string()))
            }
            _ => {
                let level: usize = name.strip_prefix("num-files-at-level")?.parse().ok()?;
                let sv = fam.sv.load();
                (level < sv.version.num_levels()).then(|| sv.version.files(level).len().to_string())
            }
        }
    }

    /// An integer property by RocksDB's name (`rocksdb.<name>`, or `shaledb.<name>`): RocksDB's
    /// `DB::GetIntProperty`, with its meanings. `None` for an unknown name and for the text properties of
    /// [`Db::property`] (`stats`, `num-files-at-level<N>`, ...), as RocksDB answers false for them.
    ///
    /// Memtables: `num-immutable-mem-table` (immutable memtables not yet flushed), `mem-table-flush-pending`
    /// (1 when one of them waits for a flush that has not started), `cur-size-active-mem-table`,
    /// `cur-size-all-mem-tables` (active and immutable, bytes), `size-all-mem-tables` (the same figure: RocksDB
    /// adds flushed memtables iterators still hold, which ShaleDB does not track), `num-entries-active-mem-table`,
    /// `num-entries-imm-mem-tables`, `num-deletes-active-mem-table`, `num-deletes-imm-mem-tables`.
    ///
    /// Keys and files: `estimate-num-keys` (RocksDB's estimate: entries in the memtables plus the tables' entries
    /// that are not deletions less their deletions, minus twice the memtables' deletions; overwrites and merge
    /// operands count each, so it overestimates after updates), `estimate-live-data-size` (bytes of a largest set
    /// of tables whose key ranges do not overlap, taken from the last level up: RocksDB's
    /// `EstimateLiveDataSize`), `live-sst-files-size` (tables of the current version), `total-sst-files-size`
    /// (tables of every version of the family still held by a reader, each once), `estimate-table-readers-mem` (index and
    /// filter blocks the open tables hold outside the block cache), `base-level` (the level L0 compacts into).
    ///
    /// Background work: `compaction-pending` (1 when a level's compaction score is at least 1),
    /// `estimate-pending-compaction-bytes`, `num-running-compactions`, `num-running-flushes`,
    /// `background-errors` (background errors recorded since open: the first made the database read-only).
    ///
    /// Snapshots and versions: `num-snapshots`, `oldest-snapshot-time` (Unix seconds, 0 without a snapshot),
    /// `oldest-snapshot-sequence` (0 without one), `num-live-versions` (the family's versions readers still
    /// hold, the current one included).
    ///
    /// Block cache: `block-cache-capacity`, `block-cache-usage` (0 without a block cache).
    ///
    /// Blob files (`crate::blob`): `num-blob-files`, `live-blob-file-size` (bytes of the current version's blob
    /// files), `live-blob-file-garbage-size` (their bytes no table references any more).
    ///
    /// ShaleDB's own: `shaledb.recovery-dropped-records`, `shaledb.recovery-dropped-bytes` (what the WAL replay
    /// of this open did not apply; see docs/durability.md D10). With [`crate::Options::rate_limiter`] (`None`
    /// without one): `shaledb.rate-limiter-total-bytes` (bytes the limiter granted, to every database sharing
    /// it), `shaledb.rate-limiter-flush-bytes` and `shaledb.rate-limiter-compaction-bytes` (the same at high
    /// and low priority), `shaledb.rate-limiter-bytes-per-sec` (its current rate, which auto-tuning moves).
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = shaledb::Db::open(dir.path(), shaledb::Options::default())?;
    /// for i in 0..10u32 {
    ///     db.put(i.to_be_bytes(), "v")?;
    /// }
    /// assert_eq!(db.property_int("rocksdb.estimate-num-keys"), Some(10));
    /// let _snap = db.snapshot();
    /// assert_eq!(db.property_int("rocksdb.num-snapshots"), Some(1));
    /// assert_eq!(db.property_int("rocksdb.stats"), None); // a text property
    /// # Ok::<(), shaledb::Error>(())
    /// ```
    pub fn property_int(&self, name: &str) -> Option<u64> {
        self.int_property(&self.inner.default, strip(name)?)
    }

    /// The integer property `name` (prefix already removed) of family `fam`.
    fn int_property(&self, fam: &Family, name: &str) -> Option<u64> {
        if TEXT.contains(&name) {
            return None;
        }
        let inner = &self.inner;
        let sv = fam.sv.load();
        let v = &sv.version;
        let n = |x: usize| Some(x as u64);
        match name {
            "num-immutable-mem-table" => n(sv.imm.len()),
            "mem-table-flush-pending" => Some(u64::from(inner.state.lock().next_unclaimed(fam.id).is_some())),
            "cur-size-active-mem-table" => n(sv.mem.approximate_memory_usage()),
            // RocksDB adds flushed memtables iterators still hold; ShaleDB does not track those, so this is the
            // same figure as cur-size-all-mem-tables.
            "cur-size-all-mem-tables" | "size-all-mem-tables" => Some(memtable_bytes(&sv)),
            "num-entries-active-mem-table" => n(sv.mem.len()),
            "num-entries-imm-mem-tables" => n(sv.imm.iter().map(|m| m.len()).sum()),
            "num-deletes-active-mem-table" => n(sv.mem.num_deletions()),
            "num-deletes-imm-mem-tables" => n(sv.imm.iter().map(|m| m.num_deletions()).sum()),
            "estimate-num-keys" => {
                let mems = || std::iter::once(&sv.mem).chain(sv.imm.iter());
                let entries: u64 = mems().map(|m| m.len() as u64).sum();
                let deletes: u64 = mems().map(|m| m.num_deletions() as u64).sum();
                let files = v.levels.iter().flatten();
                let (file_dels, file_entries) =
                    files.fold((0u64, 0u64), |(d, e), f| (d + f.num_deletions, e + f.num_entries));
                let non_deletions = file_entries.saturating_sub(file_dels);
                let keys = entries + non_deletions.saturating_sub(file_dels);
                Some(keys.saturating_sub(deletes.saturating_mul(2)))
            }
            "estimate-live-data-size" => Some(live_data_size(v)),
            "live-sst-files-size" => Some(v.total_bytes()),
            "total-sst-files-size" => {
                let st = inner.state.lock();
                let mut seen = HashSet::new();
                let mut total = 0u64;
                // The family's own versions: the current one and those readers still hold.
                let held = st.live_versions.iter().filter(|(id, _)| *id == fam.id).filter_map(|(_, w)| w.upgrade());
                for ver in held.chain(st.vs.current_of(fam.id).cloned()) {
                    for f in ver.levels.iter().flatten() {
                        if seen.insert(f.number) {
                            total += f.file_size;
                        }
                    }
                }
                Some(total)
            }
            "estimate-table-readers-mem" => Some(inner.tables.readers_memory()),
            "base-level" => n(crate::picker::level_targets(v, &fam.opts).base_level),
            "compaction-pending" => {
                let busy = inner.state.lock().busy.clone();
                Some(u64::from(crate::picker::compaction_pending(v, &fam.opts, &busy)))
            }
            "estimate-pending-compaction-bytes" => Some(crate::picker::pending_compaction_bytes(v, &fam.opts)),
            "num-running-compactions" => n(inner.state.lock().running_compactions),
            "num-running-flushes" => n(inner.state.lock().running_flushes),
            "background-errors" => Some(inner.counters.bg_errors.load(Ordering::Relaxed)),
            "num-snapshots" => n(inner.snapshots.len()),
            "oldest-snapshot-time" => Some(inner.snapshots.oldest_time()),
            "oldest-snapshot-sequence" => Some(inner.snapshots.sequences().first().copied().unwrap_or(0)),
            "num-live-versions" => {
                let st = inner.state.lock();
                n(st.live_versions.iter().filter(|(id, w)| *id == fam.id && w.strong_count() > 0).count())
            }
            "block-cache-capacity" => n(inner.block_cache.as_ref().map_or(0, |c| c.capacity())),
            "block-cache-usage" => n(inner.block_cache.as_ref().map_or(0, |c| c.usage())),
            "recovery-dropped-records" => Some(inner.recovery_losses.records),
            "recovery-dropped-bytes" => Some(inner.recovery_losses.bytes),
            "rate-limiter-total-bytes" => inner.opts.rate_limiter.as_ref().map(|l| l.total_bytes_through(None)),
            "rate-limiter-flush-bytes" => {
                inner.opts.rate_limiter.as_ref().map(|l| l.total_bytes_through(Some(crate::IoPriority::High)))
            }
            "rate-limiter-compaction-bytes" => {
                inner.opts.rate_limiter.as_ref().map(|l| l.total_bytes_through(Some(crate::IoPriority::Low)))
            }
            "rate-limiter-bytes-per-sec" => inner.opts.rate_limiter.as_ref().map(|l| l.bytes_per_second()),
            _ => crate::blob::int_property(v, name),
        }
    }
}

/// Bytes of a super version's active and immutable memtables.
fn memtable_bytes(sv: &super::SuperVersion) -> u64 {
    std::iter::once(&sv.mem).chain(&sv.imm).map(|m| m.approximate_memory_usage() as u64).sum()
}

/// The `stats` text; takes the interval sample (the next call's `Interval` lines start here).
pub(crate) fn stats_text(inner: &super::DbInner) -> String {
    let now = inner.statistics();
    let prev = inner.counters.swap_report_sample(now.clone());
    crate::stats_report::format_stats(&now, prev.as_ref())
}

/// `name` without its `rocksdb.` or `shaledb.` prefix; `None` without either.
fn strip(name: &str) -> Option<&str> {
    name.strip_prefix("rocksdb.").or_else(|| name.strip_prefix("shaledb."))
}

/// RocksDB's `EstimateLiveDataSize`: from the last level up, the size of every table whose user-key range
/// overlaps none taken so far. Data compacted to the bottom counts once; an update still in an upper level
/// over a key range already counted is left out.
fn live_data_size(v: &Version) -> u64 {
    // Taken ranges, disjoint: largest user key -> smallest user key.
    let mut taken: BTreeMap<&[u8], &[u8]> = BTreeMap::new();
    let mut size = 0u64;
    for level in (0..v.num_levels()).rev() {
        for f in v.files(level) {
            let (lo, hi) = (f.smallest_user_key(), f.largest_user_key());
            // The first taken range ending at or after `lo` is the only one that can overlap [lo, hi].
            let overlaps = taken.range(lo..).next().is_some_and(|(_, &start)| start <= hi);
            if !overlaps {
                taken.insert(hi, lo);
                size += f.file_size;
            }
        }
    }
    size
}

/// The `sstables` text: each level's tables.
fn sstables(v: &Version) -> String {
    let mut out = String::new();
    for level in 0..v.num_levels() {
        let _ = writeln!(out, "--- level {level} ---");
        for f in v.files(level) {
            let _ = writeln!(
                out,
                " {}:{}[{} .. {}]['{}' .. '{}']",
                f.number,
                f.file_size,
                f.smallest_seq,
                f.largest_seq,
                f.smallest_user_key().escape_ascii(),
                f.largest_user_key().escape_ascii()
            );
        }
    }
    out
}

impl Db {
    /// A snapshot of the statistics.
    pub fn statistics(&self) -> Statistics {
        self.inner.statistics()
    }
}

impl DbInner {
    /// [`Db::statistics`] (also for the stats dump, which has no `Db`).
    pub(crate) fn statistics(&self) -> Statistics {
        let inner = self;
        let c = &inner.counters;
        let v = inner.default.sv.load().version.clone();
        let busy = inner.state.lock().busy.clone();
        let comp = c.compaction.lock().clone();
        let scores = crate::picker::scores(&v, &inner.opts, &busy);
        let levels: Vec<LevelStats> = (0..v.num_levels())
            .map(|l| LevelStats {
                level: l,
                files: v.files(l).len() as u64,
                files_being_compacted: v.files(l).iter().filter(|f| busy.contains(&f.number)).count() as u64,
                bytes: v.level_bytes(l),
                score: scores.iter().find(|(lv, _)| *lv == l).map_or(0.0, |(_, s)| *s),
                compaction: comp.get(l).copied().unwrap_or_default(),
            })
            .collect();
        let flush_bytes = levels.first().map_or(0, |l| l.compaction.bytes_written);
        let comp_read: u64 =
            levels.iter().map(|l| l.compaction.bytes_read_input_level + l.compaction.bytes_read_output_level).sum();
        let comp_written: u64 = levels.iter().skip(1).map(|l| l.compaction.bytes_written).sum();
        let ld = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let jobs = c.job_times.lock().clone();
        let blobs = crate::blob::totals(&v);
        Statistics {
            uptime_secs: c.start.elapsed().as_secs_f64(),
            levels,
            writes: ld(&c.writes),
            keys_written: ld(&c.keys_written),
            bytes_written: ld(&c.bytes_written),
            write_groups: ld(&c.write_groups),
            wal_writes: ld(&c.wal_writes),
            wal_bytes: ld(&c.wal_bytes),
            wal_syncs: ld(&c.wal_syncs),
            flush_bytes,
            flush_count: ld(&c.flush_count),
            compaction_bytes_read: comp_read,
            compaction_bytes_written: comp_written,
            stall_micros: ld(&c.stall_micros),
            slowdown_count: ld(&c.slowdown_count),
            stop_count: ld(&c.stop_count),
            stalls: c.stall_counts(),
            block_cache_hits: inner.table_stats.block_cache_hits(),
            block_cache_misses: inner.table_stats.block_cache_misses(),
            blocks_read: inner.table_stats.blocks_read(),
            bytes_read: inner.table_stats.bytes_read(),
            table_file_reads: inner.table_stats.file_reads(),
            table_file_bytes_read: inner.table_stats.file_bytes_read(),
            bloom_checked: ld(&c.bloom_checked),
            bloom_useful: ld(&c.bloom_useful),
            gets: ld(&c.gets),
            gets_found: ld(&c.gets_found),
            memtable_hits: ld(&c.memtable_hits),
            pending_compaction_bytes: crate::picker::pending_compaction_bytes(&v, &inner.opts),
            memtable_bytes: {
                let st = inner.state.lock();
                let mems = st.fams.values().flat_map(|f| f.imm.iter().chain(std::iter::once(&f.mem)));
                mems.map(|m| m.approximate_memory_usage() as u64).sum()
            },
            blob_file_count: blobs.0,
            blob_file_bytes: blobs.1,
            blob_garbage_bytes: blobs.2,
            compaction_times: jobs[0].clone(),
            compaction_cpu_times: jobs[1].clone(),
            flush_times: jobs[2].clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use shaledb_format::edit::FileMeta;
    use shaledb_format::ikey::{make_internal_key, ValueKind};
    use std::sync::Arc;

    fn meta(number: u64, lo: &str, hi: &str, size: u64) -> Arc<FileMeta> {
        let ik = |k: &str| make_internal_key(k.as_bytes(), 1, ValueKind::Value);
        Arc::new(FileMeta {
            number,
            file_size: size,
            smallest: ik(lo),
            largest: ik(hi),
            smallest_seq: 1,
            largest_seq: 1,
            num_entries: 1,
            num_deletions: 0,
            num_range_deletions: 0,
        })
    }

    fn version(levels: &[&[(&str, &str, u64)]]) -> Version {
        let mut v = Version::new(levels.len());
        for (l, files) in levels.iter().enumerate() {
            for (i, (lo, hi, size)) in files.iter().enumerate() {
                v.levels[l].push(meta(10 * l as u64 + i as u64 + 1, lo, hi, *size));
            }
        }
        v
    }

    /// RocksDB's live data estimate: a key range counted in a lower level is not counted again above it.
    #[test]
    fn live_data_size_counts_each_key_range_once() {
        // L2: [a,c] 100, [e,g] 100. L1: [b,d] 50 overlaps [a,c]; [h,k] 30 overlaps nothing. L0: [x,z] 7.
        let v = version(&[&[("x", "z", 7)], &[("b", "d", 50), ("h", "k", 30)], &[("a", "c", 100), ("e", "g", 100)]]);
        assert_eq!(live_data_size(&v), 100 + 100 + 30 + 7);
        assert_eq!(live_data_size(&Version::new(7)), 0);
        // An L0 file spanning both L2 ranges overlaps them: left out.
        let v = version(&[&[("a", "z", 9)], &[], &[("a", "c", 100), ("e", "g", 100)]]);
        assert_eq!(live_data_size(&v), 200);
    }

    #[test]
    fn sstables_lists_every_level_and_file() {
        let v = version(&[&[("a\x01", "b", 7)], &[]]);
        let s = sstables(&v);
        assert_eq!(s, "--- level 0 ---\n 1:7[1 .. 1]['a\\x01' .. 'b']\n--- level 1 ---\n");
    }
}
