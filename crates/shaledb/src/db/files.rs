//! Which files in a database directory are ours, and what open and destroy may do with them (docs/durability.md
//! D9, ARCHITECTURE.md "Files").
//!
//! - A directory without CURRENT receives a new database only when it holds nothing but `LOCK` and a valid
//!   `IDENTITY` (whose id is then kept). Our MANIFESTs or tables without CURRENT are a damaged database (repair
//!   it); anything else is someone else's directory. Either way open refuses and changes nothing.
//! - At open, before anything is written, files of ours that no recovered state needs are removed: tables not
//!   in the MANIFEST, old MANIFESTs and temp files numbered below the MANIFEST's counter, tables above it whose
//!   properties carry this database's id and their own number, and WALs below the log number. A name that is
//!   not exactly ours, or a number above the counter that cannot be proven ours, is left alone, and the counter
//!   steps over it.

use crate::filenames::{self, FileKind};
use crate::identity::{self, DbId};
use crate::version::Version;
use crate::version_set::VersionSet;
use shaledb_format::table::{Table, TableReadOptions};
use shaledb_vfs::{Error, Fs, ReadHints, Result};
use std::collections::HashSet;
use std::path::Path;

/// `names` for an error message: sorted, at most ten, then how many more.
pub(crate) fn list_names<S: AsRef<str>>(names: &[S]) -> String {
    let mut v: Vec<&str> = names.iter().map(|s| s.as_ref()).collect();
    // MANIFESTs first: they say the most about what the directory is.
    v.sort_unstable_by_key(|n| (!n.starts_with(filenames::MANIFEST_PREFIX), *n));
    let shown = v.iter().take(10).copied().collect::<Vec<_>>().join(", ");
    match v.len().checked_sub(10) {
        Some(more) if more > 0 => format!("{shown} and {more} more"),
        _ => shown,
    }
}

/// What a directory without CURRENT holds when a new database may be created in it.
pub(crate) struct FreshDir {
    /// The id of a valid IDENTITY, to keep.
    pub(crate) id: Option<DbId>,
    /// What an interrupted creation of ours left (MANIFEST-000001 recording no file, CURRENT's temp file):
    /// no write was ever acknowledged in such a database, since open returns only once CURRENT exists.
    pub(crate) creation_leftovers: Vec<String>,
}

/// True when MANIFEST-`number` is what an interrupted creation leaves: the first MANIFEST, recording no
/// file (possibly torn or empty: the creation never synced it).
fn is_creation_manifest(fs: &dyn Fs, dir: &Path, number: u64) -> bool {
    if number != 1 {
        return false;
    }
    let Ok(data) = fs.read_all(&dir.join(filenames::manifest_name(number))) else { return false };
    let mut reader = shaledb_format::log::Reader::new(data, dir.join(filenames::manifest_name(number)));
    loop {
        match reader.next() {
            shaledb_format::log::LogRead::Record { data, .. } => {
                match shaledb_format::edit::VersionEdit::decode(&data) {
                    Ok(e) if e.new_files.is_empty() && e.deleted_files.is_empty() => {}
                    _ => return false,
                }
            }
            shaledb_format::log::LogRead::Damage(d) => return d.at_tail,
            shaledb_format::log::LogRead::Eof => return true,
        }
    }
}

/// Decides whether `dir`, which has no CURRENT, may receive a new database (see [`FreshDir`]).
pub(crate) fn check_fresh_dir(fs: &dyn Fs, dir: &Path, names: &[String]) -> Result<FreshDir> {
    let (mut ours, mut other) = (Vec::new(), Vec::new());
    let mut fresh = FreshDir { id: None, creation_leftovers: Vec::new() };
    for name in names {
        match filenames::parse(name) {
            // The LOG of an earlier attempt tells nothing about ownership of data; it is kept (rotated).
            Some(FileKind::Lock | FileKind::InfoLog | FileKind::OldInfoLog(_)) => {}
            Some(FileKind::Identity) => match identity::read(fs, dir)? {
                Some(i) => fresh.id = Some(i),
                None => other.push(name.as_str()),
            },
            Some(FileKind::Manifest(n)) if is_creation_manifest(fs, dir, n) => {
                fresh.creation_leftovers.push(name.clone())
            }
            Some(FileKind::Temp(n)) if temp_is_ours(fs, dir, n) => fresh.creation_leftovers.push(name.clone()),
            // An OPTIONS file is written only once CURRENT exists: without CURRENT, a damaged database.
            Some(FileKind::Manifest(_) | FileKind::Table(_) | FileKind::Blob(_) | FileKind::Options(_)) => {
                ours.push(name.as_str())
            }
            _ => other.push(name.as_str()),
        }
    }
    if !ours.is_empty() || (!other.is_empty() && !fresh.creation_leftovers.is_empty()) {
        ours.extend(fresh.creation_leftovers.iter().map(String::as_str));
        let all: Vec<&str> = ours.iter().chain(&other).copied().collect();
        return Err(Error::corruption(
            filenames::current(dir),
            0,
            format!(
                "CURRENT is missing but the directory holds ShaleDB files ({}): an existing, damaged database, left \
                 as it is. Run `shaledb repair {}` (shaledb::repair) to rebuild CURRENT from the newest MANIFEST \
                 that replays cleanly",
                list_names(&all),
                dir.display()
            ),
        ));
    }
    if !other.is_empty() {
        return Err(Error::InvalidArgument(format!(
            "{} holds no ShaleDB database (no CURRENT) and is not empty: {}. Refusing to create a database among \
             files that are not ours; nothing was changed",
            dir.display(),
            list_names(&other)
        )));
    }
    Ok(fresh)
}

/// Checks that every live table exists with the size the MANIFEST records (`paranoid_checks`); the error
/// names each file that does not.
pub(crate) fn check_live_files(fs: &dyn Fs, dir: &Path, v: &Version) -> Result<()> {
    let mut bad = Vec::new();
    let mut first = None;
    let tables = v.levels.iter().flatten().map(|f| (filenames::table(dir, f.number), f.file_size));
    let blobs = v.blob_files.values().map(|b| (filenames::blob(dir, b.addition.number), b.addition.file_size));
    for (path, size) in tables.chain(blobs) {
        let problem = if !fs.exists(&path) {
            "missing".to_string()
        } else {
            match fs.file_size(&path)? {
                0 => format!("empty (the MANIFEST records {size} bytes)"),
                n if n != size => format!("{n} bytes, the MANIFEST records {size}"),
                _ => continue,
            }
        };
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        bad.push(format!("{name} {problem}"));
        first.get_or_insert(path);
    }
    match first {
        None => Ok(()),
        Some(path) => Err(Error::corruption(
            path,
            0,
            format!(
                "live tables do not match the MANIFEST: {}; refusing to open (paranoid_checks). Restore the \
                 files, or open with paranoid_checks = false to read what remains",
                bad.join("; ")
            ),
        )),
    }
}

/// Whether a table that is not live may be removed as a leftover of ours. Above the counter it must carry
/// `db_id` and its own number. Below it, it must also open as a ShaleDB table and carry no other identity
/// (tables from before identities existed carry none), so a look-alike the counter has stepped over stays.
fn leftover_table_is_ours(fs: &dyn Fs, dir: &Path, number: u64, below_counter: bool, db_id: Option<DbId>) -> bool {
    let path = filenames::table(dir, number);
    let Ok(file) = fs.open(&path, ReadHints::default()) else { return false };
    let Ok(t) = Table::open(file, &TableReadOptions::default()) else { return false };
    let p = t.properties();
    let own = p.file_number == Some(number) && p.db_id.is_some() && p.db_id == db_id;
    let legacy = below_counter && p.file_number.is_none() && p.db_id.is_none();
    own || legacy
}

/// Whether a blob file that is not live may be removed as a leftover of ours: its header must carry `db_id`
/// (every blob file does; a file cut short before its header was whole is ours when what it holds is a
/// prefix of our magic).
fn leftover_blob_is_ours(fs: &dyn Fs, dir: &Path, number: u64, db_id: Option<DbId>) -> bool {
    let Some(id) = db_id else { return false };
    let path = filenames::blob(dir, number);
    let Ok(file) = fs.open(&path, ReadHints::default()) else { return false };
    let mut head = vec![0u8; (file.len() as usize).min(shaledb_format::blob::HEADER_LEN)];
    if file.read_exact_at(&mut head, 0).is_err() {
        return false;
    }
    let magic = shaledb_format::blob::HEADER_MAGIC.to_le_bytes();
    if head.len() < shaledb_format::blob::HEADER_LEN {
        return magic.iter().zip(&head).all(|(a, b)| a == b);
    }
    // magic (8), version, compression, then the database id.
    head.starts_with(&magic) && head[10..10 + id.len()] == id
}

/// Whether a temp file is one of ours: what we write into one (a CURRENT line naming a MANIFEST, IDENTITY's
/// hex digits, or an OPTIONS file, which starts with its header line), possibly cut short by a crash.
fn temp_is_ours(fs: &dyn Fs, dir: &Path, number: u64) -> bool {
    let Ok(data) = fs.read_all(&filenames::temp(dir, number)) else { return false };
    let prefix = filenames::MANIFEST_PREFIX.as_bytes();
    let current_like = prefix.iter().zip(&data).all(|(a, b)| a == b)
        && data.iter().skip(prefix.len()).all(|&b| b.is_ascii_digit() || b == b'\n');
    let identity_like = data.len() <= 33 && data.iter().all(|&b| matches!(b, b'0'..=b'9' | b'a'..=b'f' | b'\n'));
    let header = crate::options_file::HEADER.as_bytes();
    let options_like = data.starts_with(header) || header.starts_with(&data);
    current_like || identity_like || options_like
}

/// Removes, at the start of open and before anything is written, the files of ours that the recovered state
/// does not need (leftovers of an interrupted flush, compaction or recovery), and records in
/// `vs.foreign_numbers` the numbers of look-alike files that cannot be proven ours. Returns the names removed.
pub(crate) fn remove_leftovers(fs: &dyn Fs, dir: &Path, vs: &mut VersionSet, names: &[String]) -> Result<Vec<String>> {
    let counter = vs.next_file_number;
    let live: HashSet<u64> = vs.live_numbers();
    let mut removed = Vec::new();
    for name in names {
        let remove = match filenames::parse(name) {
            Some(FileKind::Table(n) | FileKind::Blob(n)) if live.contains(&n) => false,
            Some(FileKind::Blob(n)) => leftover_blob_is_ours(fs, dir, n, vs.db_id),
            Some(FileKind::Table(n)) => leftover_table_is_ours(fs, dir, n, n < counter, vs.db_id),
            Some(FileKind::Manifest(n)) => n != vs.manifest_number() && n < counter,
            Some(FileKind::Temp(n)) => temp_is_ours(fs, dir, n),
            // WALs below the log number hold nothing the tables lack; the others are replayed.
            Some(FileKind::Wal(n)) => n < vs.min_log_number(),
            _ => false,
        };
        if remove {
            fs.remove(&dir.join(name))?;
            removed.push(name.clone());
            continue;
        }
        // Kept and not live: its number is never handed out, whatever it is. (An OPTIONS file's number may be
        // above the MANIFEST's counter: it is taken after the open's MANIFEST is written.)
        if let Some(
            FileKind::Table(n) | FileKind::Blob(n) | FileKind::Manifest(n) | FileKind::Temp(n) | FileKind::Options(n),
        ) = filenames::parse(name)
        {
            if !live.contains(&n) && n != vs.manifest_number() {
                vs.foreign_numbers.insert(n);
            }
        }
    }
    Ok(removed)
}

/// Removes, at the end of open, the files the new state no longer needs: the WALs just replayed, tables not
/// live, MANIFESTs other than the new one and temp files, each only when its number is below the counter
/// and not one found unproven at the start.
pub(crate) fn remove_obsolete(fs: &dyn Fs, dir: &Path, vs: &VersionSet, replayed_wals: &[u64]) -> Result<Vec<String>> {
    let mut removed = Vec::new();
    let live: HashSet<u64> = vs.live_numbers();
    let counter = vs.next_file_number;
    for name in fs.list(dir)? {
        let remove = match filenames::parse(&name) {
            Some(FileKind::Wal(n)) => replayed_wals.contains(&n) && n < vs.min_log_number(),
            Some(FileKind::Table(n) | FileKind::Blob(n)) => {
                !live.contains(&n) && n < counter && !vs.foreign_numbers.contains(&n)
            }
            Some(FileKind::Manifest(n)) => n != vs.manifest_number() && n < counter && !vs.foreign_numbers.contains(&n),
            Some(FileKind::Temp(n)) => n < counter && !vs.foreign_numbers.contains(&n),
            _ => false,
        };
        if remove {
            fs.remove(&dir.join(&name))?;
            removed.push(name);
        }
    }
    Ok(removed)
}

/// True when `dir` holds a ShaleDB database: CURRENT naming a MANIFEST that exists, or a valid IDENTITY.
fn holds_database(fs: &dyn Fs, dir: &Path) -> bool {
    let current = fs.read_all(&filenames::current(dir)).ok();
    let manifest = current.as_deref().and_then(filenames::manifest_in_current);
    manifest.is_some_and(|n| fs.exists(&dir.join(filenames::manifest_name(n))))
        || matches!(identity::read(fs, dir), Ok(Some(_)))
}

/// `destroy_with`: removes our files from a directory that holds a database or nothing; returns their names.
pub(crate) fn destroy(dir: &Path, fs: &dyn Fs) -> Result<Vec<String>> {
    if !fs.exists(dir) {
        return Ok(Vec::new());
    }
    let names = fs.list(dir)?;
    let empty = names.iter().all(|n| n == "LOCK");
    if !empty && !holds_database(fs, dir) {
        return Err(Error::InvalidArgument(format!(
            "{} does not hold a ShaleDB database (no CURRENT naming a MANIFEST, no IDENTITY) and is not empty: {}. \
             Refusing to destroy it; nothing was removed",
            dir.display(),
            list_names(&names)
        )));
    }
    let lock = fs.lock(&filenames::lock(dir))?;
    let mut removed = Vec::new();
    for name in fs.list(dir)? {
        match filenames::parse(&name) {
            None | Some(FileKind::Lock) => {}
            Some(FileKind::LostDir) => {
                crate::lost::remove_all(fs, dir)?;
                removed.push(name);
            }
            Some(_) => {
                fs.remove(&dir.join(&name))?;
                removed.push(name);
            }
        }
    }
    drop(lock);
    if fs.remove(&filenames::lock(dir)).is_ok() {
        removed.push("LOCK".to_string());
    }
    // Best effort: a directory holding other files stays.
    let _ = std::fs::remove_dir(dir);
    removed.sort_unstable();
    Ok(removed)
}
