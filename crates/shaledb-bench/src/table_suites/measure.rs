//! The counters the table suites' per-operation columns are computed from ([`OpCost`]): the engine's
//! ([`EngineDelta`]) and these process-wide figures: bytes read from and written to storage
//! (`/proc/self/io` `read_bytes`, `write_bytes`: what reached the block layer, O_DIRECT included, page-cache
//! hits excluded) and CPU time of every thread (`/proc/self/stat` utime + stime). Both engines run in this
//! process one at a time, so a delta over a test is that engine's work, background flushes and compactions
//! included.

use crate::engine::EngineSample;
use std::path::Path;

/// Clock ticks per second of `/proc/<pid>/stat` times: Linux's USER_HZ, 100 on every architecture's ABI.
pub const USER_HZ: f64 = 100.0;

/// A reading of the process counters; a field is `None` when its /proc file cannot be read or parsed.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ProcSample {
    /// `read_bytes` of /proc/self/io.
    pub read_bytes: Option<u64>,
    /// `write_bytes` of /proc/self/io.
    pub write_bytes: Option<u64>,
    /// utime + stime of /proc/self/stat, seconds.
    pub cpu_secs: Option<f64>,
}

/// The counters now.
pub fn sample() -> ProcSample {
    let io = std::fs::read_to_string("/proc/self/io").ok();
    let stat = std::fs::read_to_string("/proc/self/stat").ok();
    ProcSample {
        read_bytes: io.as_deref().and_then(|s| io_field(s, "read_bytes")),
        write_bytes: io.as_deref().and_then(|s| io_field(s, "write_bytes")),
        cpu_secs: stat.as_deref().and_then(cpu_ticks).map(|t| t as f64 / USER_HZ),
    }
}

/// A `name: value` line of `/proc/<pid>/io`.
pub fn io_field(text: &str, name: &str) -> Option<u64> {
    text.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        if k.trim() == name {
            v.trim().parse().ok()
        } else {
            None
        }
    })
}

/// utime + stime (fields 14 and 15) of a `/proc/<pid>/stat` line, in ticks. The command name (field 2) may
/// hold spaces and parentheses, so fields are counted after its last `)`.
pub fn cpu_ticks(stat: &str) -> Option<u64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut f = rest.split_whitespace();
    // After ')': field 3 (state) is index 0, so field 14 is index 11 and field 15 index 12.
    let utime: u64 = f.nth(11)?.parse().ok()?;
    let stime: u64 = f.next()?.parse().ok()?;
    utime.checked_add(stime)
}

/// What changed between two samples.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct ProcDelta {
    /// Bytes read from storage.
    pub read_bytes: Option<u64>,
    /// Bytes written to storage.
    pub write_bytes: Option<u64>,
    /// CPU seconds, all threads.
    pub cpu_secs: Option<f64>,
}

impl ProcDelta {
    /// `after - before` (saturating: a counter never goes back, but a failed read must not underflow).
    pub fn between(before: &ProcSample, after: &ProcSample) -> ProcDelta {
        let d = |a: Option<u64>, b: Option<u64>| Some(a?.saturating_sub(b?));
        ProcDelta {
            read_bytes: d(after.read_bytes, before.read_bytes),
            write_bytes: d(after.write_bytes, before.write_bytes),
            cpu_secs: match (after.cpu_secs, before.cpu_secs) {
                (Some(a), Some(b)) => Some((a - b).max(0.0)),
                _ => None,
            },
        }
    }
}

/// Engine counters that changed during a test or step.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct EngineDelta {
    /// Block cache hits.
    pub block_cache_hits: u64,
    /// Block cache misses.
    pub block_cache_misses: u64,
    /// Bloom filter checks.
    pub bloom_checked: u64,
    /// Bloom filter checks that avoided a read.
    pub bloom_useful: u64,
    /// Bytes written by flushes.
    pub flush_bytes: u64,
    /// Bytes read by compactions.
    pub compaction_bytes_read: u64,
    /// Bytes written by compactions.
    pub compaction_bytes_written: u64,
    /// WAL bytes appended.
    pub wal_bytes: u64,
    /// Time writers were stalled, microseconds.
    pub stall_micros: u64,
}

impl EngineDelta {
    /// `after - before`, saturating.
    pub fn between(b: &EngineSample, a: &EngineSample) -> EngineDelta {
        EngineDelta {
            block_cache_hits: a.block_cache_hits.saturating_sub(b.block_cache_hits),
            block_cache_misses: a.block_cache_misses.saturating_sub(b.block_cache_misses),
            bloom_checked: a.bloom_checked.saturating_sub(b.bloom_checked),
            bloom_useful: a.bloom_useful.saturating_sub(b.bloom_useful),
            flush_bytes: a.flush_bytes.saturating_sub(b.flush_bytes),
            compaction_bytes_read: a.compaction_bytes_read.saturating_sub(b.compaction_bytes_read),
            compaction_bytes_written: a.compaction_bytes_written.saturating_sub(b.compaction_bytes_written),
            wal_bytes: a.wal_bytes.saturating_sub(b.wal_bytes),
            stall_micros: a.stall_micros.saturating_sub(b.stall_micros),
        }
    }
}

/// What a test or step cost per operation, from the process and engine counters over it: the per-operation
/// columns of the sysbench and ForestDB tables.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct OpCost {
    /// Storage bytes read per operation.
    pub read_bytes_per_op: Option<f64>,
    /// Storage bytes written per operation (flushes, compactions and WAL included).
    pub write_bytes_per_op: Option<f64>,
    /// CPU microseconds per operation, every thread of the process.
    pub cpu_us_per_op: Option<f64>,
    /// The process counters' deltas.
    pub process: ProcDelta,
    /// The engine counters' deltas.
    pub engine: EngineDelta,
}

impl OpCost {
    /// The counters' deltas, with the per-operation figures for `ops` operations.
    pub fn new(process: ProcDelta, engine: EngineDelta, ops: u64) -> OpCost {
        let mut c = OpCost { process, engine, ..OpCost::default() };
        c.set_per_op(ops);
        c
    }

    /// Fills the per-operation figures from `process` and `ops` (at least 1).
    pub fn set_per_op(&mut self, ops: u64) {
        let n = ops.max(1) as f64;
        self.read_bytes_per_op = self.process.read_bytes.map(|b| b as f64 / n);
        self.write_bytes_per_op = self.process.write_bytes.map(|b| b as f64 / n);
        self.cpu_us_per_op = self.process.cpu_secs.map(|s| s * 1e6 / n);
    }
}

/// Bytes below `dir` as `du` counts them (allocated blocks).
pub fn du_bytes(dir: &Path) -> u64 {
    du_k(dir).saturating_mul(1024)
}

/// `du -s -k` of `dir`: allocated 1 KiB blocks of every file below it.
pub fn du_k(dir: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    let mut total = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else { continue };
        for entry in rd.flatten() {
            let Ok(md) = entry.metadata() else { continue };
            total += md.blocks() * 512 / 1024;
            if md.is_dir() {
                stack.push(entry.path());
            }
        }
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_proc_io() {
        let text = "rchar: 100\nwchar: 200\nsyscr: 3\nsyscw: 4\nread_bytes: 4096\nwrite_bytes: 8192\n\
                    cancelled_write_bytes: 0\n";
        assert_eq!(io_field(text, "read_bytes"), Some(4096));
        assert_eq!(io_field(text, "write_bytes"), Some(8192));
        assert_eq!(io_field(text, "missing"), None);
        assert_eq!(io_field("read_bytes: x\n", "read_bytes"), None);
    }

    #[test]
    fn parses_proc_stat_with_an_awkward_name() {
        // Fields 14 and 15 are 7 and 5; the name holds a space and a ')'.
        let line = "1234 (a b) c) S 1 2 3 4 5 6 7 8 9 10 7 5 0 0 20 0 3 0 100 200 300";
        assert_eq!(cpu_ticks(line), Some(12));
        assert_eq!(cpu_ticks("garbage"), None);
        assert_eq!(cpu_ticks("1 (x) S 1 2"), None);
    }

    #[test]
    fn this_process_has_counters() {
        let a = sample();
        let mut x = 0u64;
        for i in 0..2_000_000u64 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        std::hint::black_box(x);
        let b = sample();
        let d = ProcDelta::between(&a, &b);
        assert!(a.cpu_secs.is_some(), "/proc/self/stat unreadable");
        assert!(d.cpu_secs.unwrap() >= 0.0);
        // /proc/self/io needs task I/O accounting; where it exists the deltas are defined.
        if a.read_bytes.is_some() {
            assert!(d.read_bytes.is_some() && d.write_bytes.is_some());
        }
        let none = ProcDelta::between(&ProcSample::default(), &b);
        assert_eq!(none.read_bytes, None);
    }

    #[test]
    fn du_counts_files() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("f"), vec![1u8; 100_000]).unwrap();
        let n = du_bytes(dir.path());
        assert!(n >= 100_000, "{n}");
    }
}
