//! Process-wide figures the per-statement columns are computed from: bytes read from and written to storage
//! (`/proc/self/io` `read_bytes`, `write_bytes`: what reached the block layer, O_DIRECT included, page-cache
//! hits excluded) and CPU time of every thread (`/proc/self/stat` utime + stime). Both engines run in this
//! process one at a time, so a delta over a test is that engine's work, background flushes and compactions
//! included.

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

/// Bytes below `dir` as `du` counts them (allocated blocks).
pub fn du_bytes(dir: &Path) -> u64 {
    crate::suite::du_k(dir).saturating_mul(1024)
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
