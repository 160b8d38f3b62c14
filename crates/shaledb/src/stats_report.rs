//! The `stats` and `levelstats` text reports, in RocksDB's layout, so that tools scraping RocksDB's output
//! (db_bench's `benchmark.sh` and the like) read ours unchanged.
//!
//! Contract with those tools (whitespace-separated fields, 1-based like awk):
//!
//! - Level rows start with two spaces and `L<n>`, the sum row with ` Sum`. Fields: 1 level, 2
//!   `files/compacting`, 3 size, 4 size unit (`KB`, `MB` or `GB`), 5 score, 6 `Read(GB)`, 7 `Rn(GB)`,
//!   8 `Rnp1(GB)`, 9 `Write(GB)`, 10 `Wnew(GB)`, 11 `Moved(GB)`, 12 `W-Amp`, 13 `Rd(MB/s)`, 14 `Wr(MB/s)`,
//!   15 `Comp(sec)`, 16 `CompMergeCPU(sec)`, 17 `Comp(cnt)`, 18 `Avg(sec)`, 19 `KeyIn`, 20 `KeyDrop`.
//! - `Uptime(secs): <total> total, <interval> interval`.
//! - `Cumulative stall: <H:M:S> H:M:S, <percent> percent`.
//!
//! Column meanings follow RocksDB's wiki ("Compaction Stats and DB Status"): figures are attributed to the
//! output level (flushes to L0); `Read = Rn + Rnp1`; `Wnew = Write - Rnp1`; a level's `W-Amp` is
//! `Write / Rn` (1.0 for L0, whose writes are flushes); the sum row's `W-Amp` is all compaction and flush
//! writes over flushed bytes. `CompMergeCPU(sec)` is the CPU time of the threads that ran the jobs.

use crate::stats::{CompactionStats, LevelStats, Statistics};
use std::fmt::Write as _;

const KB: f64 = 1024.0;
const MB: f64 = 1024.0 * 1024.0;
const GB: f64 = 1024.0 * 1024.0 * 1024.0;

/// The column header of the compaction table.
const HEADER: &str = "Level    Files   Size     Score Read(GB)  Rn(GB) Rnp1(GB) Write(GB) Wnew(GB) Moved(GB) W-Amp \
                      Rd(MB/s) Wr(MB/s) Comp(sec) CompMergeCPU(sec) Comp(cnt) Avg(sec) KeyIn KeyDrop";

/// The full report (`stats`): the compaction table, then cumulative and interval figures.
///
/// `interval` is the snapshot taken at the previous report; the `Interval` lines show the difference. Without
/// it the interval covers the whole uptime, as in RocksDB's first report.
pub(crate) fn format_stats(s: &Statistics, interval: Option<&Statistics>) -> String {
    let mut out = format_level_stats(s);
    blob_line(&mut out, s);
    let prev = interval.cloned().unwrap_or_default();
    let int_secs = (s.uptime_secs - prev.uptime_secs).max(0.0);
    let _ = writeln!(out, "Uptime(secs): {:.1} total, {:.1} interval", s.uptime_secs, int_secs);
    let _ = writeln!(
        out,
        "Flush(GB): cumulative {:.3}, interval {:.3}",
        s.flush_bytes as f64 / GB,
        s.flush_bytes.saturating_sub(prev.flush_bytes) as f64 / GB
    );
    let cum = sum_levels(&s.levels);
    let before = sum_levels(&prev.levels);
    let delta = diff(&cum, &before);
    compaction_line(&mut out, "Cumulative", &cum, s.uptime_secs);
    compaction_line(&mut out, "Interval", &delta, int_secs);
    let k = &s.stalls;
    let _ = writeln!(
        out,
        "Stalls(count): {} level0_slowdown, {} level0_slowdown_with_compaction, {} level0_numfiles, {} \
         level0_numfiles_with_compaction, {} stop for pending_compaction_bytes, {} slowdown for \
         pending_compaction_bytes, {} memtable_compaction, {} memtable_slowdown, interval {} total count",
        k.level0_slowdown,
        k.level0_slowdown_with_compaction,
        k.level0_numfiles,
        k.level0_numfiles_with_compaction,
        k.stop_for_pending_compaction_bytes,
        k.slowdown_for_pending_compaction_bytes,
        k.memtable_compaction,
        k.memtable_slowdown,
        k.total().saturating_sub(prev.stalls.total()),
    );
    let _ = writeln!(out);
    let _ = writeln!(out, "** DB Stats **");
    db_lines(&mut out, "Cumulative", s, &Statistics::default(), s.uptime_secs);
    db_lines(&mut out, "Interval", s, &prev, int_secs);
    out
}

/// The compaction table alone (`levelstats`): header, one row per level holding files or having compacted,
/// and the sum row.
pub(crate) fn format_level_stats(s: &Statistics) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "** Compaction Stats [default] **");
    let _ = writeln!(out, "{HEADER}");
    let _ = writeln!(out, "{}", "-".repeat(HEADER.len()));
    for l in &s.levels {
        let c = &l.compaction;
        if l.files == 0 && c.count == 0 && c.bytes_written == 0 && c.bytes_moved == 0 {
            continue;
        }
        let w_amp = if c.bytes_read_input_level > 0 {
            c.bytes_written as f64 / c.bytes_read_input_level as f64
        } else if l.level == 0 && c.bytes_written > 0 {
            1.0
        } else {
            0.0
        };
        row(&mut out, &format!("L{}", l.level), l.files, l.files_being_compacted, l.bytes, l.score, c, w_amp);
    }
    let sum = sum_levels(&s.levels);
    let files: u64 = s.levels.iter().map(|l| l.files).sum();
    let busy: u64 = s.levels.iter().map(|l| l.files_being_compacted).sum();
    let bytes: u64 = s.levels.iter().map(|l| l.bytes).sum();
    let w_amp = if s.flush_bytes > 0 { sum.bytes_written as f64 / s.flush_bytes as f64 } else { 0.0 };
    row(&mut out, "Sum", files, busy, bytes, 0.0, &sum, w_amp);
    out
}

/// RocksDB's blob line, between the compaction table and `Uptime(secs)`: `Blob file count: <n>, total size:
/// <GB> GB, garbage size: <GB> GB, space amp: <x>` (benchmark.sh's blob_sz is its `$7 $8`). Space amp is the
/// files' bytes over their live bytes, 0.0 with no live bytes.
fn blob_line(out: &mut String, s: &Statistics) {
    let live = s.blob_file_bytes.saturating_sub(s.blob_garbage_bytes);
    let amp = if live > 0 { s.blob_file_bytes as f64 / live as f64 } else { 0.0 };
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "Blob file count: {}, total size: {:.1} GB, garbage size: {:.1} GB, space amp: {amp:.1}",
        s.blob_file_count,
        s.blob_file_bytes as f64 / GB,
        s.blob_garbage_bytes as f64 / GB
    );
    let _ = writeln!(out);
}

fn sum_levels(levels: &[LevelStats]) -> CompactionStats {
    let mut sum = CompactionStats::default();
    for l in levels {
        sum.add(&l.compaction);
    }
    sum
}

fn diff(a: &CompactionStats, b: &CompactionStats) -> CompactionStats {
    CompactionStats {
        micros: a.micros.saturating_sub(b.micros),
        cpu_micros: a.cpu_micros.saturating_sub(b.cpu_micros),
        bytes_read_input_level: a.bytes_read_input_level.saturating_sub(b.bytes_read_input_level),
        bytes_read_output_level: a.bytes_read_output_level.saturating_sub(b.bytes_read_output_level),
        bytes_written: a.bytes_written.saturating_sub(b.bytes_written),
        bytes_moved: a.bytes_moved.saturating_sub(b.bytes_moved),
        files_in_input_level: a.files_in_input_level.saturating_sub(b.files_in_input_level),
        files_in_output_level: a.files_in_output_level.saturating_sub(b.files_in_output_level),
        files_out: a.files_out.saturating_sub(b.files_out),
        records_in: a.records_in.saturating_sub(b.records_in),
        records_dropped: a.records_dropped.saturating_sub(b.records_dropped),
        count: a.count.saturating_sub(b.count),
        single_delete_mismatches: a.single_delete_mismatches.saturating_sub(b.single_delete_mismatches),
        records_filtered: a.records_filtered.saturating_sub(b.records_filtered),
        subcompactions: a.subcompactions.saturating_sub(b.subcompactions),
    }
}

/// Size with a unit token that is always present, so the fields after it keep their positions.
fn human_bytes(b: u64) -> String {
    let b = b as f64;
    if b >= GB {
        format!("{:.2} GB", b / GB)
    } else if b >= MB {
        format!("{:.2} MB", b / MB)
    } else {
        format!("{:.2} KB", b / KB)
    }
}

/// A count in one token: exact below 10 000, else K/M/G/T-suffixed.
fn human_count(n: u64) -> String {
    const STEPS: [(u64, &str); 4] = [(1_000_000_000_000, "T"), (1_000_000_000, "G"), (1_000_000, "M"), (1_000, "K")];
    for (unit, suffix) in STEPS {
        if n >= unit.saturating_mul(10) {
            return format!("{}{suffix}", n / unit);
        }
    }
    n.to_string()
}

/// MB/s of `bytes` over `secs` (0 when no time passed).
fn rate(bytes: u64, secs: f64) -> f64 {
    if secs > 0.0 {
        bytes as f64 / MB / secs
    } else {
        0.0
    }
}

fn row(out: &mut String, name: &str, files: u64, busy: u64, bytes: u64, score: f64, c: &CompactionStats, w_amp: f64) {
    let rn = c.bytes_read_input_level as f64 / GB;
    let rnp1 = c.bytes_read_output_level as f64 / GB;
    let write = c.bytes_written as f64 / GB;
    let secs = c.micros as f64 / 1e6;
    let read_bytes = c.bytes_read_input_level.saturating_add(c.bytes_read_output_level);
    let avg = if c.count > 0 { secs / c.count as f64 } else { 0.0 };
    let files_col = format!("{files}/{busy}");
    let _ = writeln!(
        out,
        "{name:>4} {files_col:>10} {size:>10} {score:5.1} {read:8.1} {rn:7.1} {rnp1:8.1} {write:9.1} {wnew:8.1} \
         {moved:9.1} {w_amp:5.1} {rd:8.1} {wr:8.1} {secs:9.2} {cpu:17.2} {cnt:9} {avg:8.3} {kin:>5} {kdrop:>7}",
        size = human_bytes(bytes),
        read = rn + rnp1,
        wnew = write - rnp1,
        moved = c.bytes_moved as f64 / GB,
        rd = rate(read_bytes, secs),
        wr = rate(c.bytes_written, secs),
        cpu = c.cpu_micros as f64 / 1e6,
        cnt = c.count,
        kin = human_count(c.records_in),
        kdrop = human_count(c.records_dropped),
    );
}

fn compaction_line(out: &mut String, label: &str, c: &CompactionStats, secs: f64) {
    let read = c.bytes_read_input_level.saturating_add(c.bytes_read_output_level);
    let _ = writeln!(
        out,
        "{label} compaction: {:.2} GB write, {:.2} MB/s write, {:.2} GB read, {:.2} MB/s read, {:.1} seconds",
        c.bytes_written as f64 / GB,
        rate(c.bytes_written, secs),
        read as f64 / GB,
        rate(read, secs),
        c.micros as f64 / 1e6
    );
}

/// `H:M:S` with fractional seconds, e.g. `00:01:2.500`.
fn hms(micros: u64) -> String {
    let secs_total = micros / 1_000_000;
    let h = secs_total / 3600;
    let m = (secs_total / 60) % 60;
    let s = (secs_total % 60) as f64 + (micros % 1_000_000) as f64 / 1e6;
    format!("{h:02}:{m:02}:{s:.3}")
}

/// Writes, WAL and stall lines for the difference `s - prev` over `secs`.
fn db_lines(out: &mut String, label: &str, s: &Statistics, prev: &Statistics, secs: f64) {
    let writes = s.writes.saturating_sub(prev.writes);
    let keys = s.keys_written.saturating_sub(prev.keys_written);
    let groups = s.write_groups.saturating_sub(prev.write_groups);
    let ingest = s.bytes_written.saturating_sub(prev.bytes_written);
    let per_group = if groups > 0 { writes as f64 / groups as f64 } else { 0.0 };
    let _ = writeln!(
        out,
        "{label} writes: {} writes, {} keys, {} commit groups, {per_group:.1} writes per commit group, \
         ingest: {:.2} GB, {:.2} MB/s",
        human_count(writes),
        human_count(keys),
        human_count(groups),
        ingest as f64 / GB,
        rate(ingest, secs)
    );
    let wal_writes = s.wal_writes.saturating_sub(prev.wal_writes);
    let wal_syncs = s.wal_syncs.saturating_sub(prev.wal_syncs);
    let wal_bytes = s.wal_bytes.saturating_sub(prev.wal_bytes);
    // RocksDB divides by syncs + 1 so that a run without syncs prints a finite number.
    let per_sync = wal_writes as f64 / (wal_syncs + 1) as f64;
    let _ = writeln!(
        out,
        "{label} WAL: {} writes, {} syncs, {per_sync:.2} writes per sync, written: {:.2} GB, {:.2} MB/s",
        human_count(wal_writes),
        human_count(wal_syncs),
        wal_bytes as f64 / GB,
        rate(wal_bytes, secs)
    );
    let stall = s.stall_micros.saturating_sub(prev.stall_micros);
    let percent = if secs > 0.0 { stall as f64 / 1e6 / secs * 100.0 } else { 0.0 };
    let _ = writeln!(out, "{label} stall: {} H:M:S, {percent:.1} percent", hms(stall));
}

#[cfg(test)]
mod tests {
    use super::*;

    const G: u64 = 1 << 30;
    const M: u64 = 1 << 20;

    fn sample() -> Statistics {
        let l0 = LevelStats {
            level: 0,
            files: 2,
            files_being_compacted: 0,
            bytes: 123 * M + 460 * 1024,
            score: 0.5,
            compaction: CompactionStats {
                micros: 4_000_000,
                bytes_written: 2 * G,
                records_in: 5_000_000,
                count: 10,
                files_out: 10,
                ..CompactionStats::default()
            },
        };
        let l1 = LevelStats {
            level: 1,
            files: 4,
            files_being_compacted: 1,
            bytes: 3 * G,
            score: 1.2,
            compaction: CompactionStats {
                micros: 8_000_000,
                bytes_read_input_level: 2 * G,
                bytes_read_output_level: G,
                bytes_written: 3 * G,
                records_in: 7_000_000,
                records_dropped: 1234,
                count: 4,
                ..CompactionStats::default()
            },
        };
        let empty = LevelStats { level: 2, ..LevelStats::default() };
        Statistics {
            uptime_secs: 100.0,
            levels: vec![l0, l1, empty],
            writes: 5_000_000,
            keys_written: 5_000_000,
            bytes_written: 2 * G + G / 20,
            write_groups: 10,
            wal_writes: 10,
            wal_syncs: 0,
            wal_bytes: 2 * G,
            flush_bytes: 2 * G,
            stall_micros: 3_723_500_000,
            blob_file_count: 3,
            blob_file_bytes: 3 * G / 2,
            blob_garbage_bytes: G / 2,
            ..Statistics::default()
        }
    }

    fn line<'a>(report: &'a str, prefix: &str) -> Vec<&'a str> {
        let l = report.lines().find(|l| l.starts_with(prefix)).unwrap_or_else(|| panic!("no {prefix:?} line"));
        l.split_whitespace().collect()
    }

    fn num(fields: &[&str], awk_pos: usize) -> f64 {
        fields[awk_pos - 1].parse().unwrap_or_else(|_| panic!("field ${awk_pos} of {fields:?} is not a number"))
    }

    #[test]
    fn benchmark_sh_fields_sit_where_it_reads_them() {
        let r = format_stats(&sample(), None);
        let l0 = line(&r, "  L0");
        assert_eq!(l0[1], "2/0");
        assert_eq!((num(&l0, 3), l0[3]), (123.45, "MB"));
        assert_eq!(num(&l0, 5), 0.5);
        assert_eq!(num(&l0, 9), 2.0); // Write(GB)
        assert_eq!(num(&l0, 12), 1.0); // W-Amp of flushes
        assert_eq!(l0.len(), 20);
        let sum = line(&r, " Sum");
        assert_eq!(sum[1], "6/1");
        assert_eq!((num(&sum, 3), sum[3]), (3.12, "GB"));
        assert_eq!(num(&sum, 9), 5.0); // Write(GB): flush + compaction
        assert_eq!(num(&sum, 12), 2.5); // 5 GB written / 2 GB flushed
        assert_eq!(sum.len(), 20);
        let up = line(&r, "Uptime(secs)");
        assert_eq!(num(&up, 2), 100.0);
        // blob_sz: `$7 $8` of the blob line, the comma after the unit dropped.
        let blob = line(&r, "Blob file count:");
        assert_eq!((num(&blob, 7), blob[7]), (1.5, "GB,"));
        assert_eq!(blob[3], "3,");
        assert_eq!(blob[10], "0.5");
        assert_eq!(blob[14], "1.5"); // space amp: 1.5 GB of files, 1 GB live
        let stall = line(&r, "Cumulative stall");
        assert_eq!(stall[2], "01:02:3.500");
        assert_eq!(num(&stall, 5), 3723.5 / 100.0 * 100.0);
        assert!(!r.contains("  L2"), "empty levels are not listed:\n{r}");
    }

    #[test]
    fn level_rows_follow_rocksdb_definitions() {
        let r = format_level_stats(&sample());
        assert!(r.starts_with("** Compaction Stats [default] **\nLevel    Files   Size     Score Read(GB)"));
        let l1 = line(&r, "  L1");
        assert_eq!(l1[1], "4/1");
        assert_eq!(num(&l1, 6), 3.0); // Read = Rn + Rnp1
        assert_eq!((num(&l1, 7), num(&l1, 8)), (2.0, 1.0));
        assert_eq!(num(&l1, 10), 2.0); // Wnew = Write - Rnp1
        assert_eq!(num(&l1, 12), 1.5); // W-Amp = Write / Rn
        assert_eq!(num(&l1, 13), 384.0); // 3 GB read in 8 s
        assert_eq!(num(&l1, 15), 8.0);
        assert_eq!(num(&l1, 17), 4.0);
        assert_eq!(num(&l1, 18), 2.0);
        assert_eq!(l1[18], "7000K");
        assert_eq!(l1[19], "1234");
    }

    #[test]
    fn cumulative_and_interval_lines() {
        let now = sample();
        let mut before = sample();
        before.uptime_secs = 60.0;
        before.writes = 4_000_000;
        before.flush_bytes = G;
        before.levels[1].compaction.bytes_written = G;
        before.stall_micros = 0;
        let r = format_stats(&now, Some(&before));
        assert_eq!(line(&r, "Uptime(secs)"), vec!["Uptime(secs):", "100.0", "total,", "40.0", "interval"]);
        assert_eq!(line(&r, "Flush(GB)"), vec!["Flush(GB):", "cumulative", "2.000,", "interval", "1.000"]);
        let cw = line(&r, "Cumulative writes");
        assert_eq!(&cw[2..9], &["5000K", "writes,", "5000K", "keys,", "10", "commit", "groups,"]);
        assert_eq!(cw[9], "500000.0");
        let iw = line(&r, "Interval writes");
        assert_eq!(iw[2], "1000K");
        let cc = line(&r, "Cumulative compaction");
        assert_eq!((cc[2], cc[8], cc[14]), ("5.00", "3.00", "12.0"));
        let ic = line(&r, "Interval compaction");
        assert_eq!(ic[2], "2.00");
        let wal = line(&r, "Cumulative WAL");
        assert_eq!((wal[2], wal[4], wal[6]), ("10", "0", "10.00"));
        let istall = line(&r, "Interval stall");
        assert_eq!((istall[2], istall[4]), ("01:02:3.500", "9308.8"));
    }

    #[test]
    fn units_and_counts() {
        assert_eq!(human_bytes(0), "0.00 KB");
        assert_eq!(human_bytes(1536), "1.50 KB");
        assert_eq!(human_bytes(5 * M), "5.00 MB");
        assert_eq!(human_bytes(3 * G / 2), "1.50 GB");
        assert_eq!(human_count(9999), "9999");
        assert_eq!(human_count(10_000), "10K");
        assert_eq!(human_count(12_345_678), "12M");
        assert_eq!(hms(0), "00:00:0.000");
    }

    /// The `Interval` lines of the `stats` property cover what happened since the previous call, not since open.
    #[test]
    fn second_stats_report_shows_only_the_interval() {
        use crate::{Db, Options};
        let fs = std::sync::Arc::new(shaledb_vfs::MemFs::new());
        let db = Db::open("/db", Options { fs, ..Options::default() }).unwrap();
        for i in 0..30u32 {
            db.put(format!("k{i:03}").as_bytes(), b"v").unwrap();
        }
        let first = db.property("rocksdb.stats").unwrap();
        // The first report's interval is the whole uptime.
        assert_eq!(line(&first, "Cumulative writes")[2], "30");
        assert_eq!(line(&first, "Interval writes")[2], "30");
        for i in 0..12u32 {
            db.put(format!("j{i:03}").as_bytes(), b"v").unwrap();
        }
        let second = db.property("shaledb.stats").unwrap();
        assert_eq!(line(&second, "Cumulative writes")[2], "42");
        assert_eq!(line(&second, "Interval writes")[2], "12", "{second}");
        assert_eq!(line(&second, "Interval WAL")[2], "12", "{second}");
        // `levelstats` and `statistics()` do not move the interval.
        db.property("shaledb.levelstats").unwrap();
        db.statistics();
        db.put(b"last", b"v").unwrap();
        let third = db.property("shaledb.stats").unwrap();
        assert_eq!(line(&third, "Interval writes")[2], "1", "{third}");
        db.close().unwrap();
    }

    #[test]
    fn empty_statistics_still_print_every_line() {
        let r = format_stats(&Statistics::default(), None);
        for prefix in [
            "** Compaction Stats",
            " Sum",
            "Blob file count: 0",
            "Uptime(secs)",
            "Cumulative writes",
            "Cumulative stall",
        ] {
            line(&r, prefix);
        }
        assert_eq!(line(&r, " Sum").len(), 20);
    }
}
