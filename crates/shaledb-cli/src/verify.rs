//! `shaledb verify PATH`: reads every live file of a database without opening it (nothing is written, no lock
//! is taken) and reports each problem with its file and offset:
//!
//! - CURRENT names a MANIFEST;
//! - every MANIFEST record is intact (a damaged last record is reported too: it is what a torn append leaves,
//!   but also what a flipped bit in a synced edit looks like) and decodes, and the edits apply: no file deleted
//!   that is not there, no overlap in a sorted level, no file numbered at or above the next file number;
//! - every live table exists with its recorded size, passes [`Table::verify`] (every block's checksum, key
//!   order, index and properties), and holds the key range and entry count the MANIFEST records;
//! - the WAL the MANIFEST names exists, and every live WAL's records are intact write batches with rising
//!   sequence numbers.
//!
//! Exit code 0 when nothing is wrong, 1 when anything is.

use shaledb_format::batch::BatchRep;
use shaledb_format::edit::{FileMeta, VersionEdit, BYTEWISE_COMPARATOR};
use shaledb_format::ikey;
use shaledb_format::iter::InternalIterator;
use shaledb_format::log::{LogRead, Reader};
use shaledb_format::table::{Table, TableReadOptions};
use shaledb_vfs::{Error, Fs, PosixFs, ReadHints};
use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

/// Arguments of `shaledb verify`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The database directory.
    pub path: PathBuf,
    /// Print what was checked, not only the problems.
    #[arg(long, short)]
    pub verbose: bool,
}

/// Runs `shaledb verify`; the exit code is 0 when the database is sound, 1 when a problem was found.
pub fn run(args: Args) -> anyhow::Result<i32> {
    if !args.path.is_dir() {
        anyhow::bail!("{} is not a directory", args.path.display());
    }
    let report = verify_dir(&PosixFs::new(), &args.path);
    if args.verbose {
        for line in &report.checked {
            println!("ok   {line}");
        }
    }
    for p in &report.problems {
        println!("BAD  {p}");
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
        let name =
            self.file.file_name().map_or_else(|| self.file.display().to_string(), |n| n.to_string_lossy().into());
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

/// The live state a MANIFEST describes.
#[derive(Debug, Default)]
struct Manifest {
    levels: BTreeMap<u32, BTreeMap<u64, FileMeta>>,
    log_number: Option<u64>,
    next_file_number: Option<u64>,
    last_sequence: Option<u64>,
    edits: usize,
}

/// Checks the database in `dir` on `fs`. Never fails: what cannot be read is a problem in the report.
pub fn verify_dir(fs: &dyn Fs, dir: &Path) -> Report {
    let mut report = Report::default();
    let Some(manifest_path) = read_current(fs, dir, &mut report) else { return report };
    let Some(m) = read_manifest(fs, &manifest_path, &mut report) else { return report };
    for (level, files) in &m.levels {
        for meta in files.values() {
            check_table(fs, dir, *level, meta, m.last_sequence, &mut report);
        }
    }
    check_wals(fs, dir, &m, &manifest_path, &mut report);
    report
}

fn read_current(fs: &dyn Fs, dir: &Path, report: &mut Report) -> Option<PathBuf> {
    let current = dir.join("CURRENT");
    let data = match fs.read_all(&current) {
        Ok(d) => d,
        Err(e) => {
            report.error(&current, &e);
            return None;
        }
    };
    let name = std::str::from_utf8(&data).ok().and_then(|s| s.strip_suffix('\n')).filter(|s| {
        s.strip_prefix("MANIFEST-").is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
    });
    match name {
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

fn read_manifest(fs: &dyn Fs, path: &Path, report: &mut Report) -> Option<Manifest> {
    let data = match fs.read_all(path) {
        Ok(d) => d,
        Err(e) => {
            report.error(path, &e);
            return None;
        }
    };
    let problems_before = report.problems.len();
    let mut m = Manifest::default();
    let mut reader = Reader::new(data, path.to_path_buf());
    loop {
        match reader.next() {
            LogRead::Eof => break,
            LogRead::Damage(d) => {
                let note = if d.at_tail { " (at the tail: a torn append, or a damaged last edit)" } else { "" };
                report.problem(path, Some(d.offset), format!("{}: {}{note}", d.kind, d.what));
            }
            LogRead::Record { offset, data } => match VersionEdit::decode(&data) {
                Err(e) => report.error(path, &e.in_file(path, offset)),
                Ok(edit) => apply_edit(&mut m, &edit, path, offset, report),
            },
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
    for files in m.levels.values() {
        for f in files.values().filter(|f| f.number >= next) {
            report.problem(
                path,
                None,
                format!("file {} is numbered at or above the next file number {next}", f.number),
            );
        }
    }
    for (level, files) in m.levels.iter().filter(|(l, _)| **l > 0) {
        let mut sorted: Vec<&FileMeta> = files.values().collect();
        sorted.sort_by(|a, b| ikey::compare(&a.smallest, &b.smallest));
        for w in sorted.windows(2) {
            if w[0].largest_user_key() >= w[1].smallest_user_key() {
                report.problem(
                    path,
                    None,
                    format!("files {} and {} overlap in level {level}", w[0].number, w[1].number),
                );
            }
        }
    }
    if report.problems.len() == problems_before {
        let live: usize = m.levels.values().map(BTreeMap::len).sum();
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

fn apply_edit(m: &mut Manifest, edit: &VersionEdit, path: &Path, offset: u64, report: &mut Report) {
    m.edits += 1;
    if let Some(c) = &edit.comparator {
        if c != BYTEWISE_COMPARATOR {
            report.problem(path, Some(offset), format!("unknown comparator {c:?}"));
        }
    }
    if let Some(v) = edit.format_version {
        if v > shaledb_format::FORMAT_VERSION {
            report.problem(path, Some(offset), format!("format version {v} is newer than this build's"));
        }
    }
    for &(level, number) in &edit.deleted_files {
        if m.levels.get_mut(&level).and_then(|files| files.remove(&number)).is_none() {
            report.problem(path, Some(offset), format!("edit deletes file {number}, which is not in level {level}"));
        }
    }
    for (level, meta) in &edit.new_files {
        if m.levels.values().any(|files| files.contains_key(&meta.number)) {
            report.problem(path, Some(offset), format!("edit adds file {} twice", meta.number));
        }
        m.levels.entry(*level).or_default().insert(meta.number, meta.clone());
    }
    m.log_number = edit.log_number.or(m.log_number);
    m.next_file_number = edit.next_file_number.or(m.next_file_number);
    m.last_sequence = edit.last_sequence.or(m.last_sequence);
}

fn check_table(fs: &dyn Fs, dir: &Path, level: u32, meta: &FileMeta, last_seq: Option<u64>, report: &mut Report) {
    let path = dir.join(format!("{:06}.sst", meta.number));
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
    let mut it = table.iter(true, false);
    it.seek_to_first();
    let first = it.valid().then(|| it.key().to_vec());
    it.seek_to_last();
    let last = it.valid().then(|| it.key().to_vec());
    if let Err(e) = it.status() {
        report.error(&path, &e);
    }
    if first.as_deref() != Some(&meta.smallest[..]) || last.as_deref() != Some(&meta.largest[..]) {
        report.problem(&path, None, "its first or last key differs from the range the MANIFEST records");
    }
    if report.problems.len() == before {
        report.checked.push(format!(
            "{:06}.sst: level {level}, {} entries in {} blocks, {} bytes",
            meta.number, props.num_entries, props.num_data_blocks, meta.file_size
        ));
    }
}

fn check_wals(fs: &dyn Fs, dir: &Path, m: &Manifest, manifest: &Path, report: &mut Report) {
    let log_number = m.log_number.unwrap_or(0);
    let names = match fs.list(dir) {
        Ok(n) => n,
        Err(e) => {
            report.error(dir, &e);
            return;
        }
    };
    let mut wals: Vec<u64> = names
        .iter()
        .filter_map(|n| n.strip_suffix(".log"))
        .filter(|s| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
        .filter_map(|s| s.parse().ok())
        .filter(|n| *n >= log_number)
        .collect();
    wals.sort_unstable();
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
        let path = dir.join(format!("{number:06}.log"));
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
            match reader.next() {
                LogRead::Eof => break,
                LogRead::Damage(d) => {
                    let note = if d.at_tail { " (at the tail: PointInTime recovery drops it)" } else { "" };
                    report.problem(&path, Some(d.offset), format!("{}: {}{note}", d.kind, d.what));
                }
                LogRead::Record { offset, data } => match BatchRep::from_bytes(data) {
                    Err(e) => report.error(&path, &e.in_file(&path, offset)),
                    Ok(batch) => {
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
                },
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
    fn problem_display_names_file_and_offset() {
        let p = Problem { file: PathBuf::from("/db/000007.sst"), offset: Some(12), what: "checksum mismatch".into() };
        assert_eq!(p.to_string(), "000007.sst at offset 12: checksum mismatch");
        let p = Problem { offset: None, ..p };
        assert_eq!(p.to_string(), "000007.sst: checksum mismatch");
    }
}
