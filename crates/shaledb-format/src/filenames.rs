//! Names of the files in a database directory.
//!
//! ```text
//! CURRENT            name of the live MANIFEST, followed by "\n"
//! LOCK               advisory lock held while the database is open
//! MANIFEST-NNNNNN    log of version edits
//! NNNNNN.log         write-ahead log (one per memtable)
//! NNNNNN.sst         table
//! NNNNNN.dbtmp       temporary file (CURRENT, IDENTITY or an OPTIONS file being written); deleted at open
//! OPTIONS-NNNNNN     the options of an open (docs/format/options.md); the newest two are kept
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
//!
//! This module is the one home of these names: the engine, `shaledb dump` and `shaledb verify` all name and
//! classify files through it.

use std::path::{Path, PathBuf};

/// The prefix of a MANIFEST's name (`MANIFEST-NNNNNN`).
pub const MANIFEST_PREFIX: &str = "MANIFEST-";
/// The extension of a write-ahead log (`NNNNNN.log`).
pub const WAL_EXT: &str = "log";
/// The extension of a table (`NNNNNN.sst`).
pub const TABLE_EXT: &str = "sst";
/// Extension of blob files.
pub const BLOB_EXT: &str = "blob";
/// The prefix of an options file's name (`OPTIONS-NNNNNN`).
pub const OPTIONS_PREFIX: &str = "OPTIONS-";
/// The name of the file naming the live MANIFEST.
pub const CURRENT: &str = "CURRENT";

/// What a file in the database directory is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileKind {
    /// `CURRENT`.
    Current,
    /// `LOCK`.
    Lock,
    /// `IDENTITY`.
    Identity,
    /// `MANIFEST-NNNNNN`.
    Manifest(u64),
    /// `NNNNNN.log`.
    Wal(u64),
    /// `NNNNNN.sst`.
    Table(u64),
    /// `NNNNNN.blob`, a blob file.
    Blob(u64),
    /// `NNNNNN.dbtmp`.
    Temp(u64),
    /// `OPTIONS-NNNNNN`.
    Options(u64),
    /// `LOG`, the info log being written.
    InfoLog,
    /// `LOG.old.N`, a rotated info log.
    OldInfoLog(u64),
    /// `lost/`, the directory where recovery keeps what it could not replay.
    LostDir,
}

/// `dir/NNNNNN.log`: the WAL numbered `n`.
pub fn wal(dir: &Path, n: u64) -> PathBuf {
    dir.join(format!("{n:06}.{WAL_EXT}"))
}

/// `dir/NNNNNN.sst`: the table numbered `n`.
pub fn table(dir: &Path, n: u64) -> PathBuf {
    dir.join(format!("{n:06}.{TABLE_EXT}"))
}

/// `dir/NNNNNN.blob`: the blob file numbered `n` (docs/format/blob.md).
pub fn blob(dir: &Path, n: u64) -> PathBuf {
    dir.join(format!("{n:06}.{BLOB_EXT}"))
}

/// `MANIFEST-NNNNNN`: the name of the MANIFEST numbered `n`.
pub fn manifest_name(n: u64) -> String {
    format!("{MANIFEST_PREFIX}{n:06}")
}

/// `OPTIONS-NNNNNN`: the name of the options file numbered `n`.
pub fn options_name(n: u64) -> String {
    format!("{OPTIONS_PREFIX}{n:06}")
}

/// `dir/NNNNNN.dbtmp`: the temp file numbered `n`.
pub fn temp(dir: &Path, n: u64) -> PathBuf {
    dir.join(format!("{n:06}.dbtmp"))
}

/// `dir/CURRENT`.
pub fn current(dir: &Path) -> PathBuf {
    dir.join(CURRENT)
}

/// `dir/LOCK`.
pub fn lock(dir: &Path) -> PathBuf {
    dir.join("LOCK")
}

/// `dir/IDENTITY`.
pub fn identity(dir: &Path) -> PathBuf {
    dir.join("IDENTITY")
}

/// The number in `digits` if it is written exactly as we write numbers (`{n:06}`) and within the format's
/// range.
fn our_number(digits: &str) -> Option<u64> {
    if digits.len() < 6 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let n: u64 = digits.parse().ok()?;
    (n <= crate::edit::MAX_FILE_NUMBER && format!("{n:06}") == digits).then_some(n)
}

/// `dir/LOG`.
pub fn info_log(dir: &Path) -> PathBuf {
    dir.join("LOG")
}

/// `dir/LOG.old.N`.
pub fn old_info_log(dir: &Path, n: u64) -> PathBuf {
    dir.join(format!("LOG.old.{n}"))
}

/// `dir/lost`.
pub fn lost_dir(dir: &Path) -> PathBuf {
    dir.join("lost")
}

/// Classifies a directory entry; `None` for files that are not ours.
pub fn parse(name: &str) -> Option<FileKind> {
    match name {
        CURRENT => return Some(FileKind::Current),
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
    if let Some(n) = name.strip_prefix(MANIFEST_PREFIX) {
        return our_number(n).map(FileKind::Manifest);
    }
    if let Some(n) = name.strip_prefix(OPTIONS_PREFIX) {
        return our_number(n).map(FileKind::Options);
    }
    let (stem, ext) = name.split_once('.')?;
    let n = our_number(stem)?;
    match ext {
        WAL_EXT => Some(FileKind::Wal(n)),
        TABLE_EXT => Some(FileKind::Table(n)),
        BLOB_EXT => Some(FileKind::Blob(n)),
        "dbtmp" => Some(FileKind::Temp(n)),
        _ => None,
    }
}

/// The numbers of the WALs among the directory entries `names` that recovery replays, oldest first: only names
/// exactly ours, at or above the MANIFEST's `log_number` (older ones are obsolete).
pub fn live_wals(names: &[String], log_number: u64) -> Vec<u64> {
    let mut wals: Vec<u64> = names
        .iter()
        .filter_map(|n| match parse(n) {
            Some(FileKind::Wal(n)) if n >= log_number => Some(n),
            _ => None,
        })
        .collect();
    wals.sort_unstable();
    wals
}

/// The number of the MANIFEST that CURRENT's contents name: one name of ours (`MANIFEST-NNNNNN`) and a
/// newline, nothing else. `None` for anything else.
pub fn manifest_in_current(contents: &[u8]) -> Option<u64> {
    let name = std::str::from_utf8(contents).ok()?.strip_suffix('\n')?;
    match parse(name) {
        Some(FileKind::Manifest(n)) => Some(n),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn live_wals_are_ours_at_or_above_the_log_number_oldest_first() {
        let names: Vec<String> =
            ["000012.log", "000009.log", "000010.log", "7.log", "000011.sst", "0000013.log", "CURRENT"]
                .iter()
                .map(|n| n.to_string())
                .collect();
        assert_eq!(live_wals(&names, 10), vec![10, 12]);
        assert_eq!(live_wals(&names, 0), vec![9, 10, 12]);
        assert!(live_wals(&names, 13).is_empty());
    }

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
        assert_eq!(parse(&options_name(5)), Some(FileKind::Options(5)));
        assert_eq!(parse("OPTIONS-5"), None);
        assert_eq!(parse("OPTIONS-000005.dbtmp"), None);
        assert_eq!(parse("IDENTITY"), Some(FileKind::Identity));
        assert_eq!(parse("LOG"), Some(FileKind::InfoLog));
        assert_eq!(parse("LOG.old.12"), Some(FileKind::OldInfoLog(12)));
        assert_eq!(parse("LOG.old."), None);
        assert_eq!(parse("LOG.old.x1"), None);
        assert_eq!(parse("lost"), Some(FileKind::LostDir));
    }

    #[test]
    fn current_names_one_manifest_and_a_newline() {
        assert_eq!(manifest_in_current(b"MANIFEST-000012\n"), Some(12));
        for bad in [&b"MANIFEST-000012"[..], b"MANIFEST-12\n", b"MANIFEST-000012\n\n", b"000012.log\n", b"\xff\n", b""]
        {
            assert_eq!(manifest_in_current(bad), None, "{bad:?}");
        }
    }

    /// Only the exact names we write are ours: no short or over-padded numbers, nothing past the format's
    /// range (a stray `18446744073709551615.log` must never reach the file counter).
    #[test]
    fn look_alike_names_are_not_ours() {
        for name in ["7.sst", "0000007.sst", "18446744073709551615.log", "MANIFEST-7", "MANIFEST-0000012", "+00001.log"]
        {
            assert_eq!(parse(name), None, "{name}");
        }
        let max = crate::edit::MAX_FILE_NUMBER;
        assert_eq!(parse(&format!("{max}.log")), Some(FileKind::Wal(max)));
        assert_eq!(parse(&format!("{}.log", max + 1)), None);
        assert_eq!(parse("20240101.log"), Some(FileKind::Wal(20240101)));
    }
}
