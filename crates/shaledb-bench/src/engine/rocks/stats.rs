//! RocksDB's counters read from its text: the tickers of `Statistics::ToString()`, the Compaction Stats
//! table and the stall counts of `rocksdb.cfstats`, and the per-level work apportioned from them.

use crate::engine::LevelSample;
use std::collections::HashMap;

/// Reads the tickers of RocksDB's `Statistics::ToString()` (`rocksdb.block.cache.hit COUNT : 5`); histogram
/// lines (`name P50 : ... COUNT : n SUM : s`) are skipped.
pub fn parse_tickers(text: &str) -> HashMap<String, u64> {
    let mut m = HashMap::new();
    for line in text.lines() {
        let mut it = line.split_whitespace();
        if let (Some(name), Some("COUNT"), Some(":"), Some(v), None) =
            (it.next(), it.next(), it.next(), it.next(), it.next())
        {
            if let Ok(v) = v.parse::<u64>() {
                m.insert(name.to_string(), v);
            }
        }
    }
    m
}

/// One level's row of the Compaction Stats table.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CompactionRow {
    /// Level number.
    pub level: usize,
    /// Bytes read by compactions into the level (estimate from the text).
    pub read_est: f64,
    /// Bytes written into the level (estimate from the text).
    pub write_est: f64,
    /// `Comp(sec)`.
    pub secs: f64,
    /// `Comp(cnt)`.
    pub count: u64,
}

const GIB: f64 = 1024.0 * 1024.0 * 1024.0;
const MIB: f64 = 1024.0 * 1024.0;

/// Reads the per-level rows (`L0`, `L1`, ...) of the first `Level Files Size ...` table of `rocksdb.cfstats`.
/// The text gives bytes in GB with one decimal; below 1 GB the rate column (MB/s with one decimal) times the
/// seconds is the better estimate.
pub fn parse_compaction_stats(text: &str) -> Vec<CompactionRow> {
    let mut rows = Vec::new();
    let mut header: Option<Vec<&str>> = None;
    for line in text.lines() {
        let toks: Vec<&str> = line.split_whitespace().collect();
        if toks.first() == Some(&"Level") && toks.get(1) == Some(&"Files") {
            if header.is_some() {
                break;
            }
            header = Some(toks);
            continue;
        }
        let Some(h) = &header else { continue };
        let Some(level) = toks.first().and_then(|t| t.strip_prefix('L')).and_then(|n| n.parse::<usize>().ok()) else {
            continue;
        };
        // The Size column prints as two tokens ("63.50 MB").
        if toks.len() != h.len() + 1 {
            continue;
        }
        let col = |name: &str| -> f64 {
            h.iter()
                .position(|c| *c == name)
                .map(|j| if j > 2 { j + 1 } else { j })
                .and_then(|i| toks.get(i))
                .and_then(|v| v.parse::<f64>().ok())
                .filter(|v| v.is_finite() && *v >= 0.0)
                .unwrap_or(0.0)
        };
        let secs = col("Comp(sec)");
        let est = |gb: f64, mbps: f64| if gb >= 1.0 { gb * GIB } else { mbps * secs * MIB };
        rows.push(CompactionRow {
            level,
            read_est: est(col("Read(GB)"), col("Rd(MB/s)")),
            write_est: est(col("Write(GB)"), col("Wr(MB/s)")),
            secs,
            count: col("Comp(cnt)") as u64,
        });
    }
    rows
}

/// Splits `total` over the entries in proportion to `weights` (all to the first when every weight is 0);
/// the parts add up to `total`.
pub fn apportion(total: u64, weights: &[f64]) -> Vec<u64> {
    let mut out = vec![0u64; weights.len()];
    if weights.is_empty() || total == 0 {
        return out;
    }
    let sum: f64 = weights.iter().filter(|w| w.is_finite() && **w > 0.0).sum();
    if sum <= 0.0 {
        out[0] = total;
        return out;
    }
    let mut given = 0u64;
    let mut last = 0;
    for (i, w) in weights.iter().enumerate() {
        if w.is_finite() && *w > 0.0 {
            let part = ((total as f64) * (w / sum)).floor() as u64;
            out[i] = part.min(total - given);
            given += out[i];
            last = i;
        }
    }
    out[last] += total - given;
    out
}

/// Fills the per-level work of `levels` from the Compaction Stats rows and the exact tickers: L0's write
/// bytes are the flushes; compaction output is split over L1 and below (L0 when no deeper level compacted:
/// intra-L0 compactions), compaction input over all levels, by the text's estimates.
pub fn fill_level_work(levels: &mut [LevelSample], rows: &[CompactionRow], flush: u64, read: u64, written: u64) {
    let n = levels.len();
    if n == 0 {
        return;
    }
    let mut wr = vec![0.0; n];
    let mut rd = vec![0.0; n];
    for r in rows.iter().filter(|r| r.level < n) {
        let l = &mut levels[r.level];
        l.compactions = r.count;
        l.compaction_micros = (r.secs * 1e6) as u64;
        rd[r.level] = r.read_est;
        if r.level > 0 {
            wr[r.level] = r.write_est;
        }
    }
    // With no estimate anywhere (sub-second, sub-GB work), compaction counts are the weights.
    if wr.iter().all(|w| *w <= 0.0) {
        for r in rows.iter().filter(|r| r.level > 0 && r.level < n) {
            wr[r.level] = r.count as f64;
        }
    }
    if rd.iter().all(|w| *w <= 0.0) {
        rd.clone_from(&wr);
    }
    let wparts = if wr.iter().any(|w| *w > 0.0) {
        apportion(written, &wr)
    } else {
        // Nothing compacted into L1 or below: the output stayed in L0.
        let mut v = vec![0; n];
        v[0] = written;
        v
    };
    let rparts = apportion(read, &rd);
    for (i, l) in levels.iter_mut().enumerate() {
        l.write_bytes = wparts[i] + if i == 0 { flush } else { 0 };
        l.read_bytes = rparts[i];
    }
}

/// Reads the `Stalls(count): 0 level0_slowdown, 0 level0_numfiles, ...` line of `rocksdb.cfstats` into
/// cause -> count.
pub fn parse_stall_counts(text: &str) -> HashMap<String, u64> {
    let mut m = HashMap::new();
    if let Some(line) = text.lines().find_map(|l| l.trim_start().strip_prefix("Stalls(count):")) {
        for part in line.split(',') {
            let part = part.trim();
            if let Some((n, name)) = part.split_once(' ') {
                if let Ok(v) = n.parse::<u64>() {
                    m.insert(name.trim().to_string(), v);
                }
            }
        }
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tickers_parse_and_histograms_are_skipped() {
        let text = "rocksdb.block.cache.miss COUNT : 12\nrocksdb.block.cache.hit COUNT : 3456\n\
                    rocksdb.db.get.micros P50 : 1.5 P95 : 3.0 P99 : 4.0 P100 : 9.0 COUNT : 77 SUM : 120\n\
                    rocksdb.bloom.filter.useful COUNT : 0\nnot a line\n";
        let m = parse_tickers(text);
        assert_eq!(m.get("rocksdb.block.cache.hit"), Some(&3456));
        assert_eq!(m.get("rocksdb.block.cache.miss"), Some(&12));
        assert_eq!(m.get("rocksdb.bloom.filter.useful"), Some(&0));
        assert_eq!(m.get("rocksdb.db.get.micros"), None);
        assert_eq!(m.len(), 3);
    }

    const CFSTATS: &str = "\n** Compaction Stats [default] **\n\
Level    Files   Size     Score Read(GB)  Rn(GB) Rnp1(GB) Write(GB) Wnew(GB) Moved(GB) W-Amp Rd(MB/s) Wr(MB/s) Comp(sec) CompMergeCPU(sec) Comp(cnt) Avg(sec) KeyIn KeyDrop Rblob(GB) Wblob(GB)\n\
----------------------------------------------------------------------------------------------------------------------------------------------------------------------------\n\
  L0      2/0   12.61 MB   0.5      0.0     0.0      0.0       0.1      0.1       0.0   1.0      0.0     90.5      1.30              1.10        11    0.118       0      0       0.0       0.0\n\
  L1      4/0   55.02 MB   0.2      0.2     0.1      0.1       0.2      0.1       0.0   1.4     80.0     70.0      2.50              2.30         3    0.833    2000K   100K       0.0       0.0\n\
  L2     10/0    1.20 GB   0.1      1.5     0.5      1.0       1.4      0.4       0.0   2.8     60.0     56.0     25.00             24.00         9    2.778    9000K   10K       0.0       0.0\n\
 Sum     16/0    1.27 GB   0.0      1.7     0.6      1.1       1.7      0.6       0.0   1.9     58.0     58.0     28.80             27.40        23    1.252    11M   110K       0.0       0.0\n\
 Int      0/0    0.00 KB   0.0      0.0     0.0      0.0       0.0      0.0       0.0   0.0      0.0      0.0      0.00              0.00         0    0.000       0      0       0.0       0.0\n\
\n** Compaction Stats [default] **\n\
Priority    Files   Size     Score Read(GB)  Rn(GB) Rnp1(GB) Write(GB) Wnew(GB) Moved(GB) W-Amp Rd(MB/s) Wr(MB/s) Comp(sec) CompMergeCPU(sec) Comp(cnt) Avg(sec) KeyIn KeyDrop Rblob(GB) Wblob(GB)\n\
 Low      0/0    0.00 KB   0.0      1.7     0.6      1.1       1.6      0.5       0.0   0.0     60.0     57.0     27.50             26.30        12    2.292    11M   110K       0.0       0.0\n\
Stalls(count): 3 level0_slowdown, 1 level0_slowdown_with_compaction, 2 level0_numfiles, 0 level0_numfiles_with_compaction, 0 stop for pending_compaction_bytes, 4 slowdown for pending_compaction_bytes, 0 memtable_compaction, 5 memtable_slowdown, interval 0 total count\n";

    #[test]
    fn compaction_stats_rows() {
        let rows = parse_compaction_stats(CFSTATS);
        assert_eq!(rows.len(), 3);
        assert_eq!(rows[0].level, 0);
        assert_eq!(rows[0].count, 11);
        assert!((rows[0].secs - 1.30).abs() < 1e-9);
        // Below 1 GB: MB/s x seconds.
        assert!((rows[1].write_est - 70.0 * 2.5 * MIB).abs() < 1.0);
        assert!((rows[1].read_est - 80.0 * 2.5 * MIB).abs() < 1.0);
        // From 1 GB: the GB column.
        assert!((rows[2].write_est - 1.4 * GIB).abs() < 1.0);
        assert_eq!(rows[2].count, 9);
    }

    #[test]
    fn level_work_adds_up_to_the_tickers() {
        let rows = parse_compaction_stats(CFSTATS);
        let mut levels = vec![LevelSample::default(); 7];
        fill_level_work(&mut levels, &rows, 1000, 5000, 7001);
        assert_eq!(levels[0].write_bytes, 1000);
        assert_eq!(levels.iter().map(|l| l.write_bytes).sum::<u64>(), 8001);
        assert_eq!(levels.iter().map(|l| l.read_bytes).sum::<u64>(), 5000);
        assert!(levels[2].write_bytes > levels[1].write_bytes);
        assert_eq!(levels[1].compactions, 3);
        assert_eq!(levels[2].compaction_micros, 25_000_000);
        // No compaction text at all: the output stays in L0, nothing is lost.
        let mut levels = vec![LevelSample::default(); 3];
        fill_level_work(&mut levels, &[], 10, 0, 5);
        assert_eq!(levels[0].write_bytes, 15);
    }

    #[test]
    fn apportion_is_exact() {
        assert_eq!(apportion(10, &[1.0, 1.0, 1.0]).iter().sum::<u64>(), 10);
        assert_eq!(apportion(10, &[0.0, 0.0]), vec![10, 0]);
        assert_eq!(apportion(0, &[1.0]), vec![0]);
        assert_eq!(apportion(100, &[0.0, 3.0, 1.0]), vec![0, 75, 25]);
    }

    #[test]
    fn stall_counts() {
        let m = parse_stall_counts(CFSTATS);
        assert_eq!(m.get("level0_slowdown"), Some(&3));
        assert_eq!(m.get("slowdown for pending_compaction_bytes"), Some(&4));
        assert_eq!(m.get("memtable_slowdown"), Some(&5));
    }
}
