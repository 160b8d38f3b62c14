//! `shaledb verify PATH`: reads every live file of a database and reports each problem with its file and offset:
//!
//! - CURRENT names a MANIFEST;
//! - every MANIFEST record is intact (a damaged last record is reported too: it is what a torn append leaves,
//!   but also what a flipped bit in a synced edit looks like) and decodes, and the edits apply: no file deleted
//!   that is not there, no overlap in a sorted level, no file numbered at or above the next file number;
//! - every live table exists with its recorded size, passes [`Table::verify`] (every block's checksum, key
//!   order, index and properties), and holds the key range and entry count the MANIFEST records;
//! - the WAL the MANIFEST names exists, and every live WAL's records are intact write batches with rising
//!   sequence numbers;
//! - `lost/` is empty: every file there is what a recovery could not replay (docs/durability.md D10), reported
//!   as a problem until an operator has dealt with it and removed the directory.
//!
//! Files that are not ShaleDB's are listed as notes, never as problems (the engine leaves them alone).
//!
//! Verify takes the LOCK like any opener and nothing else writes: a database open elsewhere changes under the
//! reader (compactions remove files, the MANIFEST grows) and would show false problems, so verify refuses it.
//! `--live` checks such a database on a best-effort basis from a pinned view: the MANIFEST named by CURRENT is
//! copied and the tables it names are hard-linked into a directory next to the database (so a compaction that
//! removes them does not matter), retrying when a file vanished in between; WALs, being written, are skipped.
//!
//! Exit code 0 when nothing is wrong, 1 when anything is, 2 when verify refused (not a database, open
//! elsewhere, the view could not be pinned), with a one-line message.

use shaledb_format::edit::FileMeta;
use shaledb_format::filenames::{self, FileKind};
use shaledb_format::log::{LogRead, Reader};
use shaledb_format::manifest::{self, EditRead, LiveFiles};
use shaledb_format::table::{Table, TableReadOptions};
use shaledb_format::wal::{self, BatchRead};
use shaledb_vfs::{Error, Fs, PosixFs, ReadHints};
use std::fmt;
use std::path::{Path, PathBuf};

mod blob;

/// Arguments of `shaledb verify`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The database directory.
    pub path: PathBuf,
    /// Print what was checked, not only the problems.
    #[arg(long, short)]
    pub verbose: bool,
    /// Best-effort check of a database open in another process, from a pinned copy of its MANIFEST and tables.
    #[arg(long)]
    pub live: bool,
    /// Print at most this many problems, then their count (0: all). The exit code and the summary count all.
    #[arg(long, default_value_t = 20)]
    pub max_problems: usize,
}

/// Runs `shaledb verify`; the exit code is 0 when the database is sound, 1 when a problem was found, 2 when
/// verify refused to run (the reason printed in one line).
pub fn run(args: Args) -> anyhow::Result<i32> {
    let report = if args.live { verify_live(&args.path) } else { verify_locked(&PosixFs::new(), &args.path) };
    let report = match report {
        Ok(r) => r,
        Err(msg) => {
            eprintln!("verify: {msg}");
            return Ok(2);
        }
    };
    if args.verbose {
        for line in &report.checked {
            println!("ok   {line}");
        }
    }
    for n in &report.notes {
        println!("note {n}");
    }
    let shown = if args.max_problems == 0 { report.problems.len() } else { args.max_problems };
    for p in report.problems.iter().take(shown) {
        println!("BAD  {p}");
    }
    if report.problems.len() > shown {
        println!(
            "...  {} more problems not shown (--max-problems {}; 0 shows all)",
            report.problems.len() - shown,
            args.max_problems
        );
    }
    println!(
        "verify: {} problem{} in {} ({} checks passed)",
        report.problems.len(),
        if report.problems.len() == 1 { "" } else { "s" },
        args.path.display(),
        report.checked.len()
    );
    Ok(if report.problems.is_empty() { 0 } else { 1 })
}

/// `None` when `dir` looks like a database (it holds CURRENT or a MANIFEST), else why not, in one line.
fn not_a_database(fs: &dyn Fs, dir: &Path) -> Option<String> {
    if !fs.exists(dir) {
        return Some(format!("{} does not exist", dir.display()));
    }
    let names = match fs.list(dir) {
        Ok(n) => n,
        Err(e) => return Some(format!("{} is not a readable directory: {e}", dir.display())),
    };
    let ours = names.iter().any(|n| matches!(filenames::parse(n), Some(FileKind::Current | FileKind::Manifest(_))));
    (!ours).then(|| format!("{} is not a ShaleDB database (it holds no CURRENT and no MANIFEST)", dir.display()))
}

/// Verifies the database in `dir` holding its LOCK. `Err` (one line) when `dir` is not a database or the
/// database is open elsewhere.
pub fn verify_locked(fs: &dyn Fs, dir: &Path) -> Result<Report, String> {
    if let Some(why) = not_a_database(fs, dir) {
        return Err(why);
    }
    let lock_path = filenames::lock(dir);
    let _lock = fs.lock(&lock_path).map_err(|e| match e {
        Error::Busy(_) => format!(
            "the database is open elsewhere ({} is held): close it first, or use --live for a best-effort check",
            lock_path.display()
        ),
        other => format!("cannot take {}: {other}", lock_path.display()),
    })?;
    Ok(verify_dir(fs, dir))
}

/// One thing wrong with one file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    /// The file holding the problem.
    pub file: PathBuf,
    /// Where in the file, when known.
    pub offset: Option<u64>,
    /// What is wrong.
    pub what: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut name: String =
            self.file.file_name().map_or_else(|| self.file.display().to_string(), |n| n.to_string_lossy().into());
        if self.file.parent().and_then(Path::file_name).is_some_and(|d| d == "lost") {
            name = format!("lost/{name}");
        }
        match self.offset {
            Some(o) => write!(f, "{name} at offset {o}: {}", self.what),
            None => write!(f, "{name}: {}", self.what),
        }
    }
}

/// What [`verify_dir`] found.
#[derive(Clone, Debug, Default)]
pub struct Report {
    /// One line per check that passed.
    pub checked: Vec<String>,
    /// Things worth knowing that are not problems (files that are not ours).
    pub notes: Vec<String>,
    /// Every problem found.
    pub problems: Vec<Problem>,
}

impl Report {
    fn problem(&mut self, file: &Path, offset: Option<u64>, what: impl Into<String>) {
        self.problems.push(Problem { file: file.to_path_buf(), offset, what: what.into() });
    }

    /// Records an error: a corruption names its own file and offset; anything else is put on `file`.
    fn error(&mut self, file: &Path, e: &Error) {
        match e {
            Error::Corruption { file: f, offset, what } => {
                let f = if f.as_os_str().is_empty() { file } else { f.as_path() };
                self.problem(f, Some(*offset), what.clone());
            }
            other => self.problem(file, None, other.to_string()),
        }
    }
}

/// Checks the database in `dir` on `fs`. Never fails: what cannot be read is a problem in the report.
pub fn verify_dir(fs: &dyn Fs, dir: &Path) -> Report {
    verify_inner(fs, dir, true)
}

/// [`verify_dir`]; `live_files`: also check the WALs and the directory's other entries (not in a pinned copy).
fn verify_inner(fs: &dyn Fs, dir: &Path, live_files: bool) -> Report {
    let mut report = Report::default();
    let Some(manifest_path) = read_current(fs, dir, &mut report) else { return report };
    let Some(m) = read_manifest(fs, &manifest_path, &mut report) else { return report };
    for (level, meta) in m.files() {
        check_table(fs, dir, level, meta, m.last_sequence, &mut report);
    }
    for (_, b) in m.all_blob_files() {
        blob::check_blob_file(fs, dir, b, &mut report);
    }
    if live_files {
        check_wals(fs, dir, &m, &manifest_path, &mut report);
        check_directory(fs, dir, &mut report);
    }
    report
}

/// Attempts at pinning a consistent view before giving up (each one lost a race with a compaction or a MANIFEST
/// rewrite; a handful is plenty in practice).
const PIN_ATTEMPTS: usize = 50;

/// Why one attempt at pinning failed.
enum PinError {
    /// A file vanished or was half-written between reading and pinning: try again.
    Retry(String),
    /// Pinning cannot work (no room next to the database, no hard links).
    Fatal(String),
}

/// `shaledb verify --live`: verifies a pinned view of the database in `dir`, which may be open elsewhere.
pub fn verify_live(dir: &Path) -> Result<Report, String> {
    let fs = PosixFs::new();
    if let Some(why) = not_a_database(&fs, dir) {
        return Err(why);
    }
    let name = dir.file_name().map_or_else(|| "db".into(), |n| n.to_string_lossy().into_owned());
    let parent = dir.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let pin = parent.join(format!(".{name}.verify-{}", std::process::id()));
    let mut last = String::new();
    let mut pinned = false;
    for attempt in 0..PIN_ATTEMPTS {
        let _ = std::fs::remove_dir_all(&pin);
        if let Err(e) = std::fs::create_dir(&pin) {
            return Err(format!("cannot create {} to pin the files: {e}", pin.display()));
        }
        match pin_once(&fs, dir, &pin, attempt + 1 == PIN_ATTEMPTS) {
            Ok(()) => {
                pinned = true;
                break;
            }
            Err(PinError::Retry(why)) => last = why,
            Err(PinError::Fatal(why)) => {
                let _ = std::fs::remove_dir_all(&pin);
                return Err(why);
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    if !pinned {
        let _ = std::fs::remove_dir_all(&pin);
        return Err(format!("no consistent view after {PIN_ATTEMPTS} attempts (last: {last})"));
    }
    let mut report = verify_inner(&fs, &pin, false);
    let _ = std::fs::remove_dir_all(&pin);
    // Name the database's files, not the pinned links.
    for p in &mut report.problems {
        if p.file.starts_with(&pin) {
            p.file = dir.join(p.file.file_name().unwrap_or_default());
        }
    }
    check_directory(&fs, dir, &mut report);
    report.notes.push("live check: MANIFEST and tables as of one moment; WALs (being written) not checked".into());
    Ok(report)
}

/// Copies CURRENT's MANIFEST into `pin` and hard-links the tables and blob files it names. `accept_torn`: keep a MANIFEST
/// whose last record is incomplete (else retry: it is probably being appended).
fn pin_once(fs: &dyn Fs, dir: &Path, pin: &Path, accept_torn: bool) -> Result<(), PinError> {
    let retry = |what: &str, e: std::io::Error| {
        if e.kind() == std::io::ErrorKind::NotFound {
            PinError::Retry(format!("{what} vanished"))
        } else {
            PinError::Fatal(format!("cannot pin {what}: {e}"))
        }
    };
    let current = std::fs::read(filenames::current(dir)).map_err(|e| retry("CURRENT", e))?;
    let Some(number) = filenames::manifest_in_current(&current) else {
        // Not a race: verify the copy, which reports the bad CURRENT.
        std::fs::write(filenames::current(pin), &current).map_err(|e| retry("CURRENT", e))?;
        return Ok(());
    };
    let name = &filenames::manifest_name(number);
    let manifest = std::fs::read(dir.join(name)).map_err(|e| retry(name, e))?;
    if !accept_torn {
        let mut r = Reader::new(manifest.clone(), dir.join(name));
        loop {
            match r.next() {
                LogRead::Eof => break,
                LogRead::Damage(d) if d.at_tail => return Err(PinError::Retry(format!("{name} is being appended"))),
                _ => {}
            }
        }
    }
    std::fs::write(pin.join(name), &manifest).map_err(|e| retry(name, e))?;
    std::fs::write(filenames::current(pin), &current).map_err(|e| retry("CURRENT", e))?;
    let mut scratch = Report::default();
    let Some(m) = read_manifest(fs, &pin.join(name), &mut scratch) else { return Ok(()) };
    let tables = m.files().map(|(_, meta)| (meta.number, false));
    for (number, blob) in tables.chain(m.all_blob_files().map(|(&n, _)| (n, true))) {
        let name = |d: &Path| if blob { filenames::blob(d, number) } else { filenames::table(d, number) };
        let (from, to) = (name(dir), name(pin));
        let table = to.file_name().unwrap_or_default().to_string_lossy().into_owned();
        match std::fs::hard_link(from, &to) {
            Ok(()) => {}
            // Removed by a compaction after the MANIFEST was read: a newer MANIFEST no longer names it.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(PinError::Retry(format!("{table} vanished")));
            }
            Err(e) => return Err(PinError::Fatal(format!("cannot hard-link {table} into {}: {e}", pin.display()))),
        }
    }
    Ok(())
}

/// Notes the files that are not ours; reports every file recovery kept in `lost/`.
fn check_directory(fs: &dyn Fs, dir: &Path, report: &mut Report) {
    for name in fs.list(dir).unwrap_or_default().into_iter().filter(|n| filenames::parse(n).is_none()) {
        report.notes.push(format!("{name}: not a ShaleDB file (left alone)"));
    }
    let lost = filenames::lost_dir(dir);
    if !fs.exists(&lost) {
        return;
    }
    for name in fs.list(&lost).unwrap_or_default() {
        report.problem(
            &lost.join(&name),
            None,
            "kept by a recovery that could not replay it (see LOG): its data is not in the database; remove \
             lost/ once dealt with",
        );
    }
}

fn read_current(fs: &dyn Fs, dir: &Path, report: &mut Report) -> Option<PathBuf> {
    let current = filenames::current(dir);
    let data = match fs.read_all(&current) {
        Ok(d) => d,
        Err(e) => {
            report.error(&current, &e);
            return None;
        }
    };
    match filenames::manifest_in_current(&data).map(filenames::manifest_name) {
        Some(name) => {
            report.checked.push(format!("CURRENT names {name}"));
            Some(dir.join(name))
        }
        None => {
            report.problem(
                &current,
                Some(0),
                format!("does not name a MANIFEST: {:?}", String::from_utf8_lossy(&data)),
            );
            None
        }
    }
}

fn read_manifest(fs: &dyn Fs, path: &Path, report: &mut Report) -> Option<LiveFiles> {
    let data = match fs.read_all(path) {
        Ok(d) => d,
        Err(e) => {
            report.error(path, &e);
            return None;
        }
    };
    let problems_before = report.problems.len();
    let mut m = LiveFiles::default();
    let mut reader = Reader::new(data, path.to_path_buf());
    loop {
        match manifest::next_edit(&mut reader) {
            EditRead::Eof => break,
            EditRead::Damage(d) => {
                let note = if d.at_tail { " (at the tail: a torn append, or a damaged last edit)" } else { "" };
                report.problem(path, Some(d.offset), format!("{}: {}{note}", d.kind, d.what));
            }
            EditRead::Undecodable(e) => report.error(path, &e),
            EditRead::Edit { offset, edit } => {
                for p in manifest::unsupported(&edit).into_iter().chain(m.apply(&edit)) {
                    report.problem(path, Some(offset), p.to_string());
                }
            }
        }
    }
    if m.edits == 0 {
        report.problem(path, Some(0), "holds no intact version edit");
        return None;
    }
    if m.log_number.is_none() || m.next_file_number.is_none() || m.last_sequence.is_none() {
        report.problem(path, None, "lacks the log number, next file number or last sequence");
    }
    let next = m.next_file_number.unwrap_or(u64::MAX);
    for (_, f) in m.files().filter(|(_, f)| f.number >= next) {
        report.problem(path, None, format!("file {} is numbered at or above the next file number {next}", f.number));
    }
    for (level, a, b) in m.overlaps() {
        report.problem(path, None, format!("files {a} and {b} overlap in level {level}"));
    }
    if report.problems.len() == problems_before {
        let live = m.files().count();
        report.checked.push(format!(
            "{}: {} edits, {live} live tables, log number {}, next file {}, last sequence {}",
            path.file_name().map_or_else(String::new, |n| n.to_string_lossy().into_owned()),
            m.edits,
            m.log_number.unwrap_or(0),
            m.next_file_number.unwrap_or(0),
            m.last_sequence.unwrap_or(0)
        ));
    }
    Some(m)
}

fn check_table(fs: &dyn Fs, dir: &Path, level: u32, meta: &FileMeta, last_seq: Option<u64>, report: &mut Report) {
    let path = filenames::table(dir, meta.number);
    let before = report.problems.len();
    match fs.file_size(&path) {
        Err(e) => {
            report.problem(&path, None, format!("live table (level {level}) cannot be read: {e}"));
            return;
        }
        Ok(size) if size != meta.file_size => {
            report.problem(&path, None, format!("{size} bytes, the MANIFEST records {}", meta.file_size));
        }
        Ok(_) => {}
    }
    let table = match fs.open(&path, ReadHints { sequential: true, ..ReadHints::default() }) {
        Ok(file) => Table::open(file, &TableReadOptions::default()),
        Err(e) => Err(e),
    };
    let table = match table {
        Ok(t) => t,
        Err(e) => {
            report.error(&path, &e);
            return;
        }
    };
    if let Err(e) = table.verify() {
        report.error(&path, &e);
        return;
    }
    let props = table.properties();
    if props.num_entries != meta.num_entries {
        report.problem(
            &path,
            None,
            format!("{} entries, the MANIFEST records {}", props.num_entries, meta.num_entries),
        );
    }
    if last_seq.is_some_and(|s| props.largest_seq > s) {
        report.problem(&path, None, format!("holds sequence {} beyond the last sequence", props.largest_seq));
    }
    // The recorded range covers the table's range tombstones too (docs/format/manifest.md).
    match table.recorded_range() {
        Err(e) => report.error(&path, &e),
        Ok(r) => {
            if r.smallest != meta.smallest || r.largest != meta.largest {
                report.problem(&path, None, "its first or last key differs from the range the MANIFEST records");
            }
            if r.num_range_deletions != meta.num_range_deletions {
                report.problem(
                    &path,
                    None,
                    format!(
                        "{} range tombstones, the MANIFEST records {}",
                        r.num_range_deletions, meta.num_range_deletions
                    ),
                );
            }
        }
    }
    if report.problems.len() == before {
        report.checked.push(format!(
            "{:06}.sst: level {level}, {} entries in {} blocks, {} bytes",
            meta.number, props.num_entries, props.num_data_blocks, meta.file_size
        ));
    }
}

fn check_wals(fs: &dyn Fs, dir: &Path, m: &LiveFiles, manifest: &Path, report: &mut Report) {
    let log_number = m.min_log_number().unwrap_or(0);
    let names = match fs.list(dir) {
        Ok(n) => n,
        Err(e) => {
            report.error(dir, &e);
            return;
        }
    };
    let wals = filenames::live_wals(&names, log_number);
    if log_number > 0 && !wals.contains(&log_number) {
        report.problem(
            manifest,
            None,
            format!("the WAL it names ({log_number:06}.log) is missing: an edit it depends on may have been lost"),
        );
    }
    // NB: a live WAL may hold writes at or below the MANIFEST's last sequence (those made after the memtable
    // switch and before the flush edit), so sequences are only checked to rise from one record to the next.
    let mut next_seq = 0;
    for number in wals {
        let path = filenames::wal(dir, number);
        let data = match fs.read_all(&path) {
            Ok(d) => d,
            Err(e) => {
                report.error(&path, &e);
                continue;
            }
        };
        let before = report.problems.len();
        let mut reader = Reader::new(data, path.clone());
        let mut records = 0u64;
        loop {
            match wal::next_batch(&mut reader) {
                BatchRead::Eof => break,
                BatchRead::Damage(d) => {
                    let note = if d.at_tail { " (at the tail: PointInTime recovery drops it)" } else { "" };
                    report.problem(&path, Some(d.offset), format!("{}: {}{note}", d.kind, d.what));
                }
                BatchRead::Undecodable { error, .. } => report.error(&path, &error),
                BatchRead::Marker { .. } => {}
                BatchRead::Batch { offset, batch, .. } => {
                    records += 1;
                    if batch.sequence() < next_seq {
                        report.problem(
                            &path,
                            Some(offset),
                            format!("batch sequence {} goes back (expected at least {next_seq})", batch.sequence()),
                        );
                    }
                    next_seq = next_seq.max(batch.sequence() + u64::from(batch.count()));
                }
            }
        }
        if report.problems.len() == before {
            report.checked.push(format!("{number:06}.log: {records} intact records"));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use shaledb::{Db, Options, WriteOptions};
    use shaledb_vfs::MemFs;
    use std::sync::Arc;

    fn dir() -> &'static Path {
        Path::new("/db")
    }

    fn options(fs: &MemFs) -> Options {
        Options {
            fs: Arc::new(fs.clone()),
            write_buffer_size: 1 << 20,
            block_size: 256,
            block_cache_size: 0,
            disable_auto_compactions: true,
            ..Options::default()
        }
    }

    /// A closed database: three tables (one per flush) and a WAL holding a few unflushed writes.
    fn fixture() -> MemFs {
        let fs = MemFs::new();
        let db = Db::open(dir(), options(&fs)).unwrap();
        for round in 0..3 {
            for i in 0..20 {
                db.put(format!("key{:03}", i * 3 + round).as_bytes(), format!("value{i}-{round}").as_bytes()).unwrap();
            }
            db.flush().unwrap();
        }
        for i in 0..5 {
            db.put_opt(&WriteOptions { sync: true, ..WriteOptions::default() }, format!("w{i}").as_bytes(), b"v")
                .unwrap();
        }
        let killed = fs.deep_clone();
        drop(db);
        killed
    }

    fn file(fs: &MemFs, suffix: &str) -> PathBuf {
        let names: Vec<String> = fs.file_names(dir()).into_iter().filter(|n| n.contains(suffix)).collect();
        dir().join(names.last().unwrap_or_else(|| panic!("no {suffix} file")))
    }

    fn problems_in(fs: &MemFs, path: &Path) -> Vec<Problem> {
        verify_dir(fs, dir()).problems.into_iter().filter(|p| p.file == path).collect()
    }

    #[test]
    fn clean_database_has_no_problems() {
        let fs = fixture();
        let report = verify_dir(&fs, dir());
        assert!(report.problems.is_empty(), "{:?}", report.problems);
        assert!(report.checked.len() >= 6, "{:?}", report.checked);
        assert!(report.checked.iter().any(|c| c.contains(".log: 5 intact records")), "{:?}", report.checked);
    }

    #[test]
    fn every_bit_flip_in_a_table_is_reported_with_file_and_offset() {
        let fs = fixture();
        let sst = file(&fs, ".sst");
        let data = fs.read_file(&sst).unwrap();
        for at in 0..data.len() {
            let copy = fs.deep_clone();
            let mut flipped = data.clone();
            flipped[at] ^= 1 << (at % 8);
            copy.write_file(&sst, &flipped);
            let found = problems_in(&copy, &sst);
            assert!(!found.is_empty(), "flip at {at} of {} not reported", data.len());
            assert!(found.iter().any(|p| p.offset.is_some_and(|o| o < data.len() as u64)), "flip at {at}: {found:?}");
        }
    }

    #[test]
    fn every_bit_flip_in_the_manifest_is_reported_with_file_and_offset() {
        let fs = fixture();
        let manifest = file(&fs, "MANIFEST-");
        let data = fs.read_file(&manifest).unwrap();
        for at in 0..data.len() {
            let copy = fs.deep_clone();
            let mut flipped = data.clone();
            flipped[at] ^= 1 << (at % 8);
            copy.write_file(&manifest, &flipped);
            let found = problems_in(&copy, &manifest);
            assert!(found.iter().any(|p| p.offset.is_some()), "flip at {at} of {}: {found:?}", data.len());
        }
    }

    #[test]
    fn every_bit_flip_in_the_wal_is_reported_with_file_and_offset() {
        let fs = fixture();
        let wal = file(&fs, ".log");
        let data = fs.read_file(&wal).unwrap();
        assert!(!data.is_empty());
        for at in 0..data.len() {
            let copy = fs.deep_clone();
            let mut flipped = data.clone();
            flipped[at] ^= 1 << (at % 8);
            copy.write_file(&wal, &flipped);
            let found = problems_in(&copy, &wal);
            assert!(found.iter().any(|p| p.offset.is_some()), "flip at {at} of {}: {found:?}", data.len());
        }
    }

    #[test]
    fn truncated_wal_is_reported_at_the_torn_record() {
        let fs = fixture();
        let wal = file(&fs, ".log");
        let data = fs.read_file(&wal).unwrap();
        fs.write_file(&wal, &data[..data.len() - 3]);
        let found = problems_in(&fs, &wal);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].what.contains("tail"), "{}", found[0]);
        assert!(found[0].offset.is_some_and(|o| o < data.len() as u64 - 3));
    }

    #[test]
    fn missing_or_resized_table_is_reported() {
        let fs = fixture();
        let sst = file(&fs, ".sst");
        let data = fs.read_file(&sst).unwrap();
        let grown = fs.deep_clone();
        let mut longer = data.clone();
        longer.push(0);
        grown.write_file(&sst, &longer);
        assert!(problems_in(&grown, &sst).iter().any(|p| p.what.contains("the MANIFEST records")));
        fs.remove(&sst).unwrap();
        let found = problems_in(&fs, &sst);
        assert!(found.iter().any(|p| p.what.contains("cannot be read")), "{found:?}");
    }

    #[test]
    fn missing_wal_named_by_the_manifest_is_reported() {
        let fs = fixture();
        let wal = file(&fs, ".log");
        fs.remove(&wal).unwrap();
        let manifest = file(&fs, "MANIFEST-");
        assert!(problems_in(&fs, &manifest).iter().any(|p| p.what.contains("is missing")));
    }

    #[test]
    fn bad_or_missing_current_is_reported() {
        let fs = fixture();
        let current = dir().join("CURRENT");
        fs.write_file(&current, b"MANIFEST-x\n");
        assert_eq!(problems_in(&fs, &current).len(), 1);
        fs.remove(&current).unwrap();
        let report = verify_dir(&fs, dir());
        assert_eq!(report.problems.len(), 1, "{:?}", report.problems);
        assert_eq!(report.problems[0].file, current);
    }

    #[test]
    fn verify_refuses_a_database_open_elsewhere_naming_the_lock() {
        let fs = fixture();
        let db = Db::open(dir(), options(&fs)).unwrap();
        let msg = verify_locked(&fs, dir()).expect_err("verified a database open elsewhere");
        assert!(msg.contains("open elsewhere") && msg.contains("LOCK") && !msg.contains('\n'), "{msg}");
        drop(db);
        let report = verify_locked(&fs, dir()).unwrap();
        assert!(report.problems.is_empty(), "{:?}", report.problems);
    }

    #[test]
    fn a_directory_that_is_not_a_database_is_said_in_one_line() {
        let fs = MemFs::new();
        let msg = verify_locked(&fs, dir()).unwrap_err();
        assert!(msg.ends_with("does not exist"), "{msg}");
        fs.create_dir_all(dir()).unwrap();
        fs.write_file(&dir().join("20240101.log"), b"not ours");
        fs.write_file(&dir().join("7.sst"), b"not ours either");
        let msg = verify_locked(&fs, dir()).unwrap_err();
        assert!(msg.contains("not a ShaleDB database") && !msg.contains('\n'), "{msg}");
        assert_eq!(fs.file_names(dir()).len(), 2, "verify created nothing in a directory that is not a database");
    }

    #[test]
    fn unknown_files_are_notes_not_problems() {
        let fs = fixture();
        fs.write_file(&dir().join("notes.txt"), b"an operator's file");
        fs.write_file(&dir().join("LOG.old.x"), b"not a rotated LOG");
        let report = verify_locked(&fs, dir()).unwrap();
        assert!(report.problems.is_empty(), "{:?}", report.problems);
        assert_eq!(report.notes.len(), 2, "{:?}", report.notes);
        assert!(report.notes.iter().any(|n| n.starts_with("notes.txt")), "{:?}", report.notes);
        assert!(!report.notes.iter().any(|n| n.starts_with("LOG:") || n.starts_with("CURRENT")), "{:?}", report.notes);
    }

    #[test]
    fn bit_flip_in_the_middle_of_a_wal_is_reported_through_lost_until_removed() {
        // The case: a WAL of 1000 keys with a bit flipped 10% in, opened with the one mode that opens.
        let fs = MemFs::new();
        let db = Db::open(dir(), options(&fs)).unwrap();
        for i in 0..1000 {
            db.put(format!("key{i:05}").as_bytes(), b"value").unwrap();
        }
        let killed = fs.deep_clone();
        drop(db);
        let wal = file(&killed, ".log");
        let mut data = killed.read_file(&wal).unwrap();
        let at = data.len() / 10;
        data[at] ^= 0x10;
        killed.write_file(&wal, &data);
        assert!(Db::open(dir(), options(&killed)).is_err(), "the default mode refuses a hole");
        let skip = Options { wal_recovery_mode: shaledb::WalRecoveryMode::SkipAnyCorruptedRecords, ..options(&killed) };
        drop(Db::open(dir(), skip).unwrap());
        let report = verify_locked(&killed, dir()).unwrap();
        let lost = dir().join("lost").join(wal.file_name().unwrap());
        assert_eq!(report.problems.len(), 1, "{:?}", report.problems);
        assert_eq!(report.problems[0].file, lost);
        assert!(report.problems[0].to_string().starts_with("lost/"), "{}", report.problems[0]);
        // The operator removes lost/: verify is clean again.
        killed.remove(&lost).unwrap();
        assert!(verify_locked(&killed, dir()).unwrap().problems.is_empty());
    }

    #[test]
    fn live_verify_while_another_thread_writes_reports_no_false_problems() {
        let tmp = shaledb_testkit::tempdir();
        let path = tmp.path().join("db");
        let opts = Options {
            write_buffer_size: 4096,
            target_file_size_base: 4096,
            max_bytes_for_level_base: 16 << 10,
            level0_file_num_compaction_trigger: 2,
            block_size: 256,
            ..Options::default()
        };
        let db = Arc::new(Db::open(&path, opts).unwrap());
        let writer = {
            let db = db.clone();
            std::thread::spawn(move || {
                for i in 0..6000u32 {
                    db.put(format!("key{:05}", i % 1500).as_bytes(), [b'v'; 64]).unwrap();
                }
            })
        };
        let mut runs = 0;
        while runs < 5 || !writer.is_finished() {
            let report = verify_live(&path).unwrap_or_else(|e| panic!("run {runs}: {e}"));
            assert!(report.problems.is_empty(), "run {runs}: {:?}", report.problems);
            assert!(report.checked.iter().any(|c| c.contains("MANIFEST-")), "{:?}", report.checked);
            runs += 1;
            assert!(runs < 10_000);
        }
        writer.join().unwrap();
        assert!(db.property("shaledb.num-files-at-level0").is_some());
        // The plain check refuses while the database is open; the pin directory is gone.
        assert!(verify_locked(&PosixFs::new(), &path).unwrap_err().contains("LOCK"));
        let left: Vec<_> = std::fs::read_dir(tmp.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(left, vec![std::ffi::OsString::from("db")]);
    }

    #[test]
    fn problem_display_names_file_and_offset() {
        let p = Problem { file: PathBuf::from("/db/000007.sst"), offset: Some(12), what: "checksum mismatch".into() };
        assert_eq!(p.to_string(), "000007.sst at offset 12: checksum mismatch");
        let p = Problem { offset: None, ..p };
        assert_eq!(p.to_string(), "000007.sst: checksum mismatch");
    }
}
