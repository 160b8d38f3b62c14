//! The `LOG` file: one human-readable line per event an operator may need after the fact (each open with its
//! options and what recovery found and dropped, each flush and compaction, each background error and switch to
//! read-only).
//!
//! ```text
//! LOG        := line*
//! line       := timestamp " " message "\n"      ; message never holds a newline
//! timestamp  := YYYY "-" MM "-" DD "T" hh ":" mm ":" ss "." micros{6} "Z"   ; UTC
//! ```
//!
//! Each open appends to the existing `LOG`, starting with a line `---- opened by pid P ----`, so that short
//! runs (one `shaledb put` each) share one file. `LOG` is rotated only by size: an open that finds it at
//! `max_log_file_size` or more, or a line that would take it past that size while the database runs, renames it
//! to `LOG.old.N` (N one above the highest present) and starts a new one. At most `keep_log_file_num` old files
//! are kept, the lowest numbers removed first. (A file system that cannot append to an existing file,
//! `Fs::open_append`, gets a new `LOG` at each open, the previous one rotated.)
//!
//! Logging never fails a database operation: every write is attempted once and an error is swallowed. The log
//! is a diagnostic; turning a full or failing disk under `LOG` into failed puts, or retrying (and stalling a
//! flush that holds the state lock) on every line, would make an aid to the operator a cause of unavailability.
//! The data files have their own error handling (D6), which is what reports a failing disk.
//!
//! Lock order: the logger's mutex is a leaf, taken last (callers may hold `state`), never held while taking
//! another lock.

use crate::filenames::{self, FileKind};
use crate::picker::CompactionTask;
use crate::stats::CompactionStats;
use parking_lot::Mutex;
use shaledb_format::edit::{FileMeta, VersionEdit};
use shaledb_vfs::{Fs, WritableFile};
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

pub(crate) struct InfoLog {
    fs: Arc<dyn Fs>,
    dir: PathBuf,
    max_size: u64,
    keep: usize,
    file: Mutex<Option<Box<dyn WritableFile>>>,
}

impl InfoLog {
    /// Continues the `LOG` of `dir` (a new one when there is none, or when it has reached `max_size`: then the
    /// previous one is rotated), and writes the line that opens this session. Never fails: when the file cannot
    /// be opened or created, the returned logger writes nothing.
    pub(crate) fn open(fs: Arc<dyn Fs>, dir: &Path, max_size: u64, keep: usize) -> InfoLog {
        let log = InfoLog { fs, dir: dir.to_path_buf(), max_size, keep, file: Mutex::new(None) };
        let (file, cut) = match log.continue_file() {
            Some((f, cut)) => (Some(f), cut),
            None => (log.start_new_file(), false),
        };
        *log.file.lock() = file;
        if cut {
            // A line a crash cut short ends here, so that the session line starts a line of its own (one byte:
            // the file is below the cap, so this never rotates it).
            log.write_line("\n".to_string());
        }
        log.log(format_args!("---- opened by pid {} ----", std::process::id()));
        log
    }

    /// The existing `LOG` opened for appending while it is below the size cap, and whether its last line lacks
    /// its newline. `None`: no `LOG`, a full one, or a file system that cannot append.
    fn continue_file(&self) -> Option<(Box<dyn WritableFile>, bool)> {
        let current = filenames::info_log(&self.dir);
        let size = self.fs.file_size(&current).ok()?;
        if size >= self.max_size {
            return None;
        }
        let cut = size > 0 && {
            let mut last = [0u8; 1];
            let read = self.fs.open(&current, shaledb_vfs::ReadHints::default());
            read.and_then(|f| f.read_exact_at(&mut last, size - 1)).map_or(true, |()| last[0] != b'\n')
        };
        Some((self.fs.open_append(&current).ok()?, cut))
    }

    /// A logger that writes nothing and creates no file (a read-only open).
    pub(crate) fn without_file(fs: Arc<dyn Fs>, dir: &Path) -> InfoLog {
        InfoLog { fs, dir: dir.to_path_buf(), max_size: u64::MAX, keep: 0, file: Mutex::new(None) }
    }

    /// Appends one line. Newlines inside `msg` become spaces so that a line is an event.
    pub(crate) fn log(&self, msg: impl fmt::Display) {
        let mut line = format!("{} {msg}", timestamp(SystemTime::now()));
        if line.contains('\n') {
            line = line.replace('\n', " ");
        }
        line.push('\n');
        self.write_line(line);
    }

    /// Appends `line` (newline included), first rotating a file it would take past the size cap.
    fn write_line(&self, line: String) {
        let mut file = self.file.lock();
        if file.as_ref().is_some_and(|f| !f.is_empty() && f.len() + line.len() as u64 > self.max_size) {
            // Close the full file before renaming it; a new one takes its name.
            file.take();
            *file = self.start_new_file();
        }
        if let Some(f) = file.as_mut() {
            // Swallowed (see the module docs); a failed append may leave part of a line.
            let _ = f.append(line.as_bytes()).and_then(|()| f.flush());
        }
    }

    /// Renames an existing `LOG` to the next `LOG.old.N`, removes old files beyond `keep`, creates `LOG`.
    fn start_new_file(&self) -> Option<Box<dyn WritableFile>> {
        let current = filenames::info_log(&self.dir);
        let mut old: Vec<u64> = self
            .fs
            .list(&self.dir)
            .unwrap_or_default()
            .iter()
            .filter_map(|n| match filenames::parse(n) {
                Some(FileKind::OldInfoLog(n)) => Some(n),
                _ => None,
            })
            .collect();
        old.sort_unstable();
        if self.fs.exists(&current) {
            // A name at u64::MAX cannot be followed: then the old files are left as they are and the current
            // LOG is overwritten rather than numbers wrapping.
            if let Some(next) = old.last().map_or(Some(1), |n| n.checked_add(1)) {
                if self.fs.rename(&current, &filenames::old_info_log(&self.dir, next)).is_ok() {
                    old.push(next);
                }
            }
        }
        let excess = old.len().saturating_sub(self.keep);
        for n in old.iter().take(excess) {
            let _ = self.fs.remove(&filenames::old_info_log(&self.dir, *n));
        }
        self.fs.create(&current).ok()
    }
}

impl fmt::Debug for InfoLog {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("InfoLog").field("dir", &self.dir).finish_non_exhaustive()
    }
}

/// The LOG line of a finished flush of memtable `mem_id` (`stats.micros` covers writing the tables).
pub(crate) fn flush_line(mem_ids: &[u64], edit: &VersionEdit, stats: &CompactionStats) -> String {
    let outputs: Vec<u64> = edit.new_files.iter().map(|(_, f)| f.number).collect();
    let bytes: u64 = edit.new_files.iter().map(|(_, f)| f.file_size).sum();
    let extra = job_notes(stats);
    let what = match mem_ids {
        [id] => format!("memtable of WAL {id:06}"),
        _ => format!("memtables of WALs {mem_ids:?}"),
    };
    format!("flush: {what} -> L0 tables {outputs:?}, {bytes} bytes, {} us{extra}", stats.micros)
}

/// What a flush or compaction line adds when the job filtered entries or met single-deletion violations.
fn job_notes(stats: &CompactionStats) -> String {
    let mut extra = String::new();
    if stats.subcompactions > 1 {
        extra.push_str(&format!(", in {} subcompactions", stats.subcompactions));
    }
    if stats.records_filtered > 0 {
        extra.push_str(&format!(", {} removed or changed by the compaction filter", stats.records_filtered));
    }
    if stats.single_delete_mismatches > 0 {
        extra.push_str(&format!(
            "; WARNING: {} violations of the single_delete contract (a single deletion next to another one, a \
             deletion or a merge, or two puts of a single-deleted key): results for those keys are undefined",
            stats.single_delete_mismatches
        ));
    }
    extra
}

/// The LOG line of a finished compaction (or trivial move) described by `task` and its `edit`.
pub(crate) fn compaction_line(task: &CompactionTask, edit: &VersionEdit, stats: &CompactionStats) -> String {
    let numbers = |files: &[Arc<FileMeta>]| files.iter().map(|f| f.number).collect::<Vec<u64>>();
    let outputs: Vec<u64> = edit.new_files.iter().map(|(_, f)| f.number).collect();
    let mut extra = job_notes(stats);
    if !task.more_inputs.is_empty() {
        let more: Vec<String> = task.more_inputs.iter().map(|(l, f)| format!("L{l} #{}", f.number)).collect();
        extra.push_str(&format!("; also read {}", more.join(", ")));
    }
    format!(
        "compaction{}: L{} {:?} + L{} {:?} -> L{} {outputs:?}; read {} bytes, wrote {} bytes, moved {} bytes, {} \
         entries in, {} dropped, {} us{extra}",
        if task.drop_only {
            " (deletion)"
        } else if task.trivial_move {
            " (trivial move)"
        } else {
            ""
        },
        task.level,
        numbers(&task.inputs),
        task.output_level,
        numbers(&task.output_inputs),
        task.output_level,
        stats.bytes_read_input_level + stats.bytes_read_output_level,
        stats.bytes_written,
        stats.bytes_moved,
        stats.records_in,
        stats.records_dropped,
        stats.micros
    )
}

/// `t` in UTC as `YYYY-MM-DDThh:mm:ss.uuuuuuZ`.
fn timestamp(t: SystemTime) -> String {
    let d = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = d.as_secs();
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (y, m, day) = civil_from_days(days);
    format!("{y:04}-{m:02}-{day:02}T{:02}:{:02}:{:02}.{:06}Z", rem / 3600, rem % 3600 / 60, rem % 60, d.subsec_micros())
}

/// `t` in UTC as C's `ctime` writes it, without the newline: `Tue Nov 24 02:55:00 2026` (the `Date:` line of
/// db_bench's header, which RocksDB's benchmark.sh reads).
pub fn ctime_utc(t: SystemTime) -> String {
    const DAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
    const MONTHS: [&str; 12] = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
    let secs = t.duration_since(UNIX_EPOCH).unwrap_or_default().as_secs();
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (y, m, day) = civil_from_days(days);
    format!(
        "{} {} {day:2} {:02}:{:02}:{:02} {y}",
        DAYS[(days % 7) as usize],
        MONTHS[(m as usize).clamp(1, 12) - 1],
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// Year, month, day of the `days`-th day after 1970-01-01 (proleptic Gregorian; the era arithmetic of
/// H. Hinnant's `civil_from_days`, written for unsigned days).
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z % 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;
    use shaledb_vfs::{FaultError, FaultPlan, FsOp, MemFs};
    use std::time::Duration;

    fn dir() -> &'static Path {
        Path::new("/db")
    }

    fn mem() -> MemFs {
        let fs = MemFs::new();
        fs.create_dir_all(dir()).unwrap();
        fs
    }

    fn text(fs: &MemFs, name: &str) -> String {
        String::from_utf8(fs.read_file(&dir().join(name)).unwrap_or_default()).unwrap()
    }

    #[test]
    fn grammars_match_docs() {
        // Both modules' grammars are blocks of the one format page.
        let doc = include_str!("../../../docs/format/info-log-and-lost.md");
        for src in [include_str!("info_log.rs"), include_str!("lost.rs")] {
            shaledb_testkit::grammar::assert_module_grammar_in_doc(src, doc);
        }
    }

    #[test]
    fn ctime_matches_c() {
        // date -u -d @1795488900 '+%a %b %e %H:%M:%S %Y'
        assert_eq!(ctime_utc(UNIX_EPOCH + Duration::from_secs(1_795_488_900)), "Tue Nov 24 02:55:00 2026");
        assert_eq!(ctime_utc(UNIX_EPOCH), "Thu Jan  1 00:00:00 1970");
    }

    #[test]
    fn timestamps_are_utc_calendar_dates() {
        assert_eq!(timestamp(UNIX_EPOCH), "1970-01-01T00:00:00.000000Z");
        // 2000-02-29 (a leap day) 12:34:56.789 UTC.
        let t = UNIX_EPOCH + Duration::from_millis(951_827_696_789);
        assert_eq!(timestamp(t), "2000-02-29T12:34:56.789000Z");
        let t = UNIX_EPOCH + Duration::from_secs(1_798_761_599); // 2026-12-31 23:59:59
        assert_eq!(timestamp(t), "2026-12-31T23:59:59.000000Z");
    }

    #[test]
    fn lines_are_timestamped_and_one_per_event() {
        let fs = mem();
        let log = InfoLog::open(Arc::new(fs.clone()), dir(), 1 << 20, 3);
        log.log("first");
        log.log(format_args!("second\nwith a newline"));
        let t = text(&fs, "LOG");
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 3, "{t}");
        assert!(lines[0].ends_with(&format!("Z ---- opened by pid {} ----", std::process::id())), "{t}");
        assert!(lines[1].ends_with("Z first") && lines[1].len() == 27 + 6, "{t}");
        assert!(lines[2].ends_with("second with a newline"), "{t}");
    }

    #[test]
    fn log_rotates_at_the_size_cap_and_keeps_only_the_newest_old_files() {
        let fs = mem();
        let log = InfoLog::open(Arc::new(fs.clone()), dir(), 200, 2);
        for i in 0..40 {
            log.log(format_args!("event {i:03} padding padding padding"));
        }
        let names = fs.file_names(dir());
        let old: Vec<&String> = names.iter().filter(|n| n.starts_with("LOG.old.")).collect();
        assert_eq!(old.len(), 2, "{names:?}");
        for name in names.iter().filter(|n| n.starts_with("LOG")) {
            assert!(fs.read_file(&dir().join(name)).unwrap().len() <= 200, "{name} over the cap");
        }
        // The newest events are in LOG, the ones just before in the highest-numbered old file.
        assert!(text(&fs, "LOG").contains("event 039"));
        let newest_old = names.iter().filter_map(|n| n.strip_prefix("LOG.old.")?.parse::<u64>().ok()).max().unwrap();
        assert!(!text(&fs, &format!("LOG.old.{newest_old}")).contains("event 039"));
        assert!(!text(&fs, &format!("LOG.old.{newest_old}")).is_empty());
    }

    fn old_logs(fs: &MemFs) -> Vec<String> {
        fs.file_names(dir()).into_iter().filter(|n| n.starts_with("LOG.old.")).collect()
    }

    #[test]
    fn each_open_appends_to_the_log_after_a_session_line() {
        let fs = mem();
        InfoLog::open(Arc::new(fs.clone()), dir(), 1 << 20, 5).log("session one");
        InfoLog::open(Arc::new(fs.clone()), dir(), 1 << 20, 5).log("session two");
        let t = text(&fs, "LOG");
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 4, "{t}");
        for (i, want) in ["---- opened by pid", "session one", "---- opened by pid", "session two"].iter().enumerate() {
            assert!(lines[i].contains(want), "line {i} lacks {want:?}:\n{t}");
        }
        assert!(old_logs(&fs).is_empty(), "{:?}", fs.file_names(dir()));
    }

    #[test]
    fn many_short_sessions_share_one_log() {
        let fs = mem();
        for i in 0..15 {
            InfoLog::open(Arc::new(fs.clone()), dir(), 1 << 20, 10).log(format_args!("put {i}"));
        }
        assert!(old_logs(&fs).is_empty(), "{:?}", fs.file_names(dir()));
        let t = text(&fs, "LOG");
        assert_eq!(t.lines().filter(|l| l.contains("---- opened by pid")).count(), 15, "{t}");
        assert!(t.contains("put 0") && t.contains("put 14"), "{t}");
    }

    #[test]
    fn an_open_rotates_a_log_that_reached_the_size_cap() {
        let fs = mem();
        // 300 bytes of earlier sessions, against a 256-byte cap.
        fs.write_file(&dir().join("LOG"), &[b"2026-01-01T00:00:00.000000Z old\n".as_slice(); 10].concat()[..300]);
        InfoLog::open(Arc::new(fs.clone()), dir(), 256, 3).log("new session");
        assert_eq!(old_logs(&fs), vec!["LOG.old.1".to_string()]);
        assert_eq!(text(&fs, "LOG.old.1").len(), 300, "the full LOG is kept as it was");
        let t = text(&fs, "LOG");
        assert!(t.lines().next().is_some_and(|l| l.contains("---- opened by pid")) && t.contains("new session"), "{t}");
        assert!(!t.contains(" old"), "{t}");
        // Below the cap, the next open appends again; rotations keep at most `keep` old files.
        for i in 0..20 {
            InfoLog::open(Arc::new(fs.clone()), dir(), 256, 3).log(format_args!("session {i} padding padding padding"));
        }
        assert_eq!(old_logs(&fs).len(), 3, "{:?}", fs.file_names(dir()));
        for name in fs.file_names(dir()).iter().filter(|n| n.starts_with("LOG")) {
            assert!(
                fs.read_file(&dir().join(name)).unwrap().len() <= 256 || name == "LOG.old.1",
                "{name} over the cap"
            );
        }
        assert!(text(&fs, "LOG").contains("session 19"));
    }

    #[test]
    fn a_line_cut_by_a_crash_is_ended_before_the_session_line() {
        let fs = mem();
        fs.write_file(&dir().join("LOG"), b"2026-01-01T00:00:00.000000Z flush: memtable of WAL 0000");
        InfoLog::open(Arc::new(fs.clone()), dir(), 1 << 20, 3).log("after");
        let t = text(&fs, "LOG");
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 3, "{t}");
        assert!(
            lines[0].ends_with("WAL 0000") && lines[1].contains("---- opened by pid") && lines[2].ends_with(" after")
        );
    }

    #[test]
    fn write_errors_are_swallowed() {
        let fs = mem();
        let log = InfoLog::open(Arc::new(fs.clone()), dir(), 1 << 20, 5);
        fs.set_faults(FaultPlan::from_nth(FsOp::Write, 1, FaultError::Enospc));
        log.log("lost line");
        fs.clear_faults();
        log.log("kept line");
        assert!(text(&fs, "LOG").contains("kept line"));
        // A LOG that cannot even be created gives a logger that writes nothing, never an error.
        let fresh = mem();
        fresh.set_faults(FaultPlan::from_nth(FsOp::Create, 1, FaultError::Eio));
        let log = InfoLog::open(Arc::new(fresh.clone()), dir(), 1 << 20, 5);
        log.log("nowhere");
        fresh.clear_faults();
        assert!(fresh.file_names(dir()).is_empty(), "{:?}", fresh.file_names(dir()));
        // One that exists but cannot be opened for appending is rotated, and the new one written.
        fs.set_faults(FaultPlan::once(FsOp::Open, 2, FaultError::Eio));
        InfoLog::open(Arc::new(fs.clone()), dir(), 1 << 20, 5).log("after a failed reopen");
        fs.clear_faults();
        assert!(text(&fs, "LOG.old.1").contains("kept line"));
        assert!(text(&fs, "LOG").contains("after a failed reopen"));
    }
}
