//! Names of the files in a database directory.
//!
//! ```text
//! CURRENT            name of the live MANIFEST, followed by "\n"
//! LOCK               advisory lock held while the database is open
//! MANIFEST-NNNNNN    log of version edits
//! NNNNNN.log         write-ahead log (one per memtable)
//! NNNNNN.sst         table
//! NNNNNN.dbtmp       temporary file (CURRENT or IDENTITY being replaced); deleted at open
//! IDENTITY           the database's identity: 32 lowercase hex digits and "\n"
//! LOG                human-readable event log (info_log.rs); LOG.old.N its rotated predecessors
//! lost/              files recovery dropped data from, kept for the operator (lost.rs); never deleted by us
//! ```
//! All numbers come from one counter (`next_file_number` in the MANIFEST), so no two files share a number.
//!
//! A name is ours only in the exact form we write: the number zero-padded to six digits (more digits only
//! when needed, never a leading zero beyond the padding) and at most `MAX_FILE_NUMBER`. `7.sst`,
//! `0000007.sst` and `18446744073709551615.log` are not ours: [`parse`] returns `None` for them, so open never
//! replays, deletes or numbers from them.

use std::path::{Path, PathBuf};

/// What a file in the database directory is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FileKind {
    Current,
    Lock,
    Identity,
    Manifest(u64),
    Wal(u64),
    Table(u64),
    Temp(u64),
    /// `LOG`, the info log being written.
    InfoLog,
    /// `LOG.old.N`, a rotated info log.
    OldInfoLog(u64),
    /// `lost/`, the directory where recovery keeps what it could not replay.
    LostDir,
}

pub(crate) fn wal(dir: &Path, n: u64) -> PathBuf {
    dir.join(format!("{n:06}.log"))
}

pub(crate) fn table(dir: &Path, n: u64) -> PathBuf {
    dir.join(format!("{n:06}.sst"))
}

pub(crate) fn manifest_name(n: u64) -> String {
    format!("MANIFEST-{n:06}")
}

pub(crate) fn temp(dir: &Path, n: u64) -> PathBuf {
    dir.join(format!("{n:06}.dbtmp"))
}

pub(crate) fn current(dir: &Path) -> PathBuf {
    dir.join("CURRENT")
}

pub(crate) fn lock(dir: &Path) -> PathBuf {
    dir.join("LOCK")
}

pub(crate) fn identity(dir: &Path) -> PathBuf {
    dir.join("IDENTITY")
}

/// The number in `digits` if it is written exactly as we write numbers (`{n:06}`) and within the format's
/// range.
fn our_number(digits: &str) -> Option<u64> {
    if digits.len() < 6 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let n: u64 = digits.parse().ok()?;
    (n <= shaledb_format::edit::MAX_FILE_NUMBER && format!("{n:06}") == digits).then_some(n)
}

pub(crate) fn info_log(dir: &Path) -> PathBuf {
    dir.join("LOG")
}

pub(crate) fn old_info_log(dir: &Path, n: u64) -> PathBuf {
    dir.join(format!("LOG.old.{n}"))
}

pub(crate) fn lost_dir(dir: &Path) -> PathBuf {
    dir.join("lost")
}

/// Classifies a directory entry; `None` for files that are not ours.
pub(crate) fn parse(name: &str) -> Option<FileKind> {
    match name {
        "CURRENT" => return Some(FileKind::Current),
        "LOCK" => return Some(FileKind::Lock),
        "IDENTITY" => return Some(FileKind::Identity),
        "LOG" => return Some(FileKind::InfoLog),
        "lost" => return Some(FileKind::LostDir),
        _ => {}
    }
    if let Some(n) = name.strip_prefix("LOG.old.") {
        return (!n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
            .then(|| n.parse().ok())
            .flatten()
            .map(FileKind::OldInfoLog);
    }
    if let Some(n) = name.strip_prefix("MANIFEST-") {
        return our_number(n).map(FileKind::Manifest);
    }
    let (stem, ext) = name.split_once('.')?;
    let n = our_number(stem)?;
    match ext {
        "log" => Some(FileKind::Wal(n)),
        "sst" => Some(FileKind::Table(n)),
        "dbtmp" => Some(FileKind::Temp(n)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_roundtrip() {
        let d = Path::new("/db");
        assert_eq!(parse(wal(d, 7).file_name().unwrap().to_str().unwrap()), Some(FileKind::Wal(7)));
        assert_eq!(parse(table(d, 123456789).file_name().unwrap().to_str().unwrap()), Some(FileKind::Table(123456789)));
        assert_eq!(parse(&manifest_name(3)), Some(FileKind::Manifest(3)));
        assert_eq!(parse("CURRENT"), Some(FileKind::Current));
        assert_eq!(parse("000001.dbtmp"), Some(FileKind::Temp(1)));
        assert_eq!(parse("foo.sst"), None);
        assert_eq!(parse("MANIFEST-x"), None);
        assert_eq!(parse("IDENTITY"), Some(FileKind::Identity));
        assert_eq!(parse("LOG"), Some(FileKind::InfoLog));
        assert_eq!(parse("LOG.old.12"), Some(FileKind::OldInfoLog(12)));
        assert_eq!(parse("LOG.old."), None);
        assert_eq!(parse("LOG.old.x1"), None);
        assert_eq!(parse("lost"), Some(FileKind::LostDir));
    }

    /// Only the exact names we write are ours: no short or over-padded numbers, nothing past the format's
    /// range (a stray `18446744073709551615.log` must never reach the file counter).
    #[test]
    fn look_alike_names_are_not_ours() {
        for name in ["7.sst", "0000007.sst", "18446744073709551615.log", "MANIFEST-7", "MANIFEST-0000012", "+00001.log"]
        {
            assert_eq!(parse(name), None, "{name}");
        }
        let max = shaledb_format::edit::MAX_FILE_NUMBER;
        assert_eq!(parse(&format!("{max}.log")), Some(FileKind::Wal(max)));
        assert_eq!(parse(&format!("{}.log", max + 1)), None);
        assert_eq!(parse("20240101.log"), Some(FileKind::Wal(20240101)));
    }
}
