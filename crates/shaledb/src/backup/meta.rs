//! The metadata file of one backup, `meta/<id>` (docs/format/backup.md):
//!
//! ```text
//! meta      := header id timestamp sequence count file{count} checksum
//! header    := "shaledb-backup 1\n"
//! id        := "id " u64 "\n"                       same as the file's name; >= 1
//! timestamp := "timestamp " u64 "\n"                seconds since the Unix epoch, UTC
//! sequence  := "sequence " u64 "\n"                 newest write the backup holds
//! count     := "files " u64 "\n"                    at most MAX_FILES
//! file      := "file " name " " stored " " u64 " " crc "\n"
//! name      := a database file name of ours: NNNNNN.sst | NNNNNN.blob | NNNNNN.log | MANIFEST-NNNNNN
//!            | OPTIONS-NNNNNN | CURRENT | IDENTITY
//! stored    := "shared/" NNNNNN "_" crc "_" u64 ".sst"   (tables: number, crc32c, size of the file)
//!            | "shared/" NNNNNN "_" crc "_" u64 ".blob"  (blob files, the same way)
//!            | "private/" id "/" name                   (every other file)
//! crc       := 8 lowercase hex digits                   crc32c of the whole file (unmasked)
//! checksum  := "checksum " crc "\n"                     crc32c of every byte before this line
//! u64       := decimal digits, no sign, no leading zero (except "0"), at most u64::MAX
//! ```
//!
//! The whole file is checked before any field is used: its size (at most [`MAX_META_BYTES`]), the checksum,
//! then each line in order. Anything else is `Corruption` naming the file and the byte offset of the bad
//! line.

use crate::filenames::{self, FileKind};
use shaledb_vfs::{Error, Result};
use std::path::{Path, PathBuf};

/// First line of every metadata file; the number is the format version.
pub(crate) const HEADER: &str = "shaledb-backup 1";
/// Largest metadata file read (checked against the file size before it is read).
pub(crate) const MAX_META_BYTES: u64 = 64 << 20;
/// Most files one backup may list.
pub(crate) const MAX_FILES: u64 = 1_000_000;

/// One file of a backup.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct BackupFile {
    /// Its name in the database directory.
    pub(crate) name: String,
    /// Its path relative to the backup directory.
    pub(crate) stored: String,
    pub(crate) size: u64,
    pub(crate) crc: u32,
}

/// The contents of a metadata file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Meta {
    pub(crate) id: u64,
    pub(crate) timestamp: u64,
    pub(crate) sequence: u64,
    pub(crate) files: Vec<BackupFile>,
}

/// `shared/NNNNNN_crc_size.sst`: where a table is stored, shared by every backup holding the same table.
pub(crate) fn shared_path(number: u64, crc: u32, size: u64) -> String {
    format!("shared/{number:06}_{crc:08x}_{size}.sst")
}

/// `shared/NNNNNN_crc_size.blob`: where a blob file is stored, shared as tables are.
pub(crate) fn shared_blob_path(number: u64, crc: u32, size: u64) -> String {
    format!("shared/{number:06}_{crc:08x}_{size}.blob")
}

/// `private/<id>/<name>`: where a backup's other files are stored.
pub(crate) fn private_path(id: u64, name: &str) -> String {
    format!("private/{id}/{name}")
}

impl Meta {
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut s = format!(
            "{HEADER}\nid {}\ntimestamp {}\nsequence {}\nfiles {}\n",
            self.id,
            self.timestamp,
            self.sequence,
            self.files.len()
        );
        for f in &self.files {
            s.push_str(&format!("file {} {} {} {:08x}\n", f.name, f.stored, f.size, f.crc));
        }
        let crc = shaledb_format::crc::value(s.as_bytes());
        s.push_str(&format!("checksum {crc:08x}\n"));
        s.into_bytes()
    }

    /// Decodes the metadata file at `path` (for errors) named `id`.
    pub(crate) fn decode(data: &[u8], path: &Path, id: u64) -> Result<Meta> {
        let bad = |offset: usize, what: String| Error::corruption(path, offset as u64, what);
        if data.len() as u64 > MAX_META_BYTES {
            return Err(bad(0, format!("{} bytes, more than the {MAX_META_BYTES}-byte limit", data.len())));
        }
        // The checksum line is the last one: everything before it is covered.
        let body_end = data
            .strip_suffix(b"\n")
            .and_then(|d| d.iter().rposition(|&b| b == b'\n'))
            .map(|i| i + 1)
            .ok_or_else(|| bad(0, "truncated: no checksum line".into()))?;
        let (body, trailer) = data.split_at(body_end);
        let trailer = std::str::from_utf8(trailer).map_err(|_| bad(body_end, "checksum line is not text".into()))?;
        let stored = trailer
            .strip_prefix("checksum ")
            .and_then(|t| t.strip_suffix('\n'))
            .and_then(parse_crc)
            .ok_or_else(|| bad(body_end, format!("expected `checksum <8 hex digits>`, found {trailer:?}")))?;
        let actual = shaledb_format::crc::value(body);
        if stored != actual {
            return Err(bad(body_end, format!("checksum mismatch: stored {stored:08x}, computed {actual:08x}")));
        }
        let text = std::str::from_utf8(body).map_err(|e| bad(e.valid_up_to(), "not UTF-8 text".into()))?;
        let mut lines = Lines { text, pos: 0 };
        let (at, line) = lines.next_line(&bad)?;
        if line != HEADER {
            return Err(bad(at, format!("expected {HEADER:?} (format version 1), found {line:?}")));
        }
        let read_id = lines.field("id", &bad)?;
        if read_id != id || id == 0 {
            return Err(bad(0, format!("records backup id {read_id} but is the metadata of backup {id}")));
        }
        let timestamp = lines.field("timestamp", &bad)?;
        let sequence = lines.field("sequence", &bad)?;
        let (count_at, count) = (lines.pos, lines.field("files", &bad)?);
        if count > MAX_FILES {
            return Err(bad(count_at, format!("{count} files, more than the limit {MAX_FILES}")));
        }
        let mut files = Vec::new();
        for _ in 0..count {
            let (at, line) = lines.next_line(&bad)?;
            files.push(parse_file(line, id).map_err(|what| bad(at, format!("{what}: {line:?}")))?);
        }
        if lines.pos != text.len() {
            return Err(bad(lines.pos, format!("more lines than the {count} files announced")));
        }
        if !files.iter().any(|f| f.name == filenames::CURRENT) {
            return Err(bad(count_at, "lists no CURRENT file".into()));
        }
        Ok(Meta { id, timestamp, sequence, files })
    }
}

struct Lines<'a> {
    text: &'a str,
    pos: usize,
}

impl<'a> Lines<'a> {
    fn next_line(&mut self, bad: &dyn Fn(usize, String) -> Error) -> Result<(usize, &'a str)> {
        let rest = &self.text[self.pos..];
        let Some(end) = rest.find('\n') else {
            return Err(bad(self.pos, "truncated: a line is missing".into()));
        };
        let at = self.pos;
        self.pos += end + 1;
        Ok((at, &rest[..end]))
    }

    fn field(&mut self, key: &str, bad: &dyn Fn(usize, String) -> Error) -> Result<u64> {
        let (at, line) = self.next_line(bad)?;
        line.strip_prefix(key)
            .and_then(|v| v.strip_prefix(' '))
            .and_then(parse_u64)
            .ok_or_else(|| bad(at, format!("expected `{key} <number>`, found {line:?}")))
    }
}

/// A decimal u64 as we write it: digits only, no leading zero, no overflow.
fn parse_u64(s: &str) -> Option<u64> {
    let canonical = !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) && (s == "0" || !s.starts_with('0'));
    canonical.then(|| s.parse().ok()).flatten()
}

fn parse_crc(s: &str) -> Option<u32> {
    (s.len() == 8 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')))
        .then(|| u32::from_str_radix(s, 16).ok())
        .flatten()
}

fn parse_file(line: &str, id: u64) -> std::result::Result<BackupFile, String> {
    let mut parts = line.split(' ');
    let (Some("file"), Some(name), Some(stored), Some(size), Some(crc), None) =
        (parts.next(), parts.next(), parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err("expected `file <name> <stored> <size> <crc>`".into());
    };
    let size = parse_u64(size).ok_or("size is not a number")?;
    let crc = parse_crc(crc).ok_or("crc is not 8 lowercase hex digits")?;
    let expected = match filenames::parse(name) {
        Some(FileKind::Table(n)) => shared_path(n, crc, size),
        Some(FileKind::Blob(n)) => shared_blob_path(n, crc, size),
        Some(
            FileKind::Wal(_) | FileKind::Manifest(_) | FileKind::Options(_) | FileKind::Current | FileKind::Identity,
        ) => private_path(id, name),
        _ => return Err(format!("{name:?} is not a database file a backup holds")),
    };
    if stored != expected {
        return Err(format!("stored path {stored:?} should be {expected:?}"));
    }
    Ok(BackupFile { name: name.to_string(), stored: stored.to_string(), size, crc })
}

/// `dir/meta/<id>`.
pub(crate) fn meta_path(dir: &Path, id: u64) -> PathBuf {
    dir.join("meta").join(id.to_string())
}

/// The id a metadata file's name gives, when it is a committed one (`meta/<id>`, canonical digits, >= 1).
pub(crate) fn parse_meta_name(name: &str) -> Option<u64> {
    parse_u64(name).filter(|&id| id > 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Meta {
        Meta {
            id: 3,
            timestamp: 1_700_000_000,
            sequence: 42,
            files: vec![
                BackupFile {
                    name: "000007.sst".into(),
                    stored: shared_path(7, 0xdead_beef, 100),
                    size: 100,
                    crc: 0xdead_beef,
                },
                BackupFile {
                    name: "MANIFEST-000005".into(),
                    stored: private_path(3, "MANIFEST-000005"),
                    size: 60,
                    crc: 1,
                },
                BackupFile { name: "CURRENT".into(), stored: private_path(3, "CURRENT"), size: 16, crc: 2 },
            ],
        }
    }

    fn decode(data: &[u8]) -> Result<Meta> {
        Meta::decode(data, Path::new("/b/meta/3"), 3)
    }

    /// Re-encodes a body edited by `f` with a valid checksum.
    fn with_body(f: impl Fn(String) -> String) -> Vec<u8> {
        let text = String::from_utf8(sample().encode()).unwrap();
        let body = &text[..text.rfind("checksum").unwrap()];
        let body = f(body.to_string());
        format!("{body}checksum {:08x}\n", shaledb_format::crc::value(body.as_bytes())).into_bytes()
    }

    fn assert_corrupt(r: Result<Meta>, needle: &str) {
        match r {
            Err(e @ Error::Corruption { .. }) => {
                let s = e.to_string();
                assert!(s.contains("/b/meta/3") && s.contains(needle), "{s}");
            }
            other => panic!("expected corruption ({needle}), got {other:?}"),
        }
    }

    #[test]
    fn meta_roundtrip() {
        assert_eq!(decode(&sample().encode()).unwrap(), sample());
    }

    #[test]
    fn meta_checksum_mismatch_is_corruption() {
        let mut data = sample().encode();
        data[30] ^= 1;
        assert_corrupt(decode(&data), "checksum mismatch");
    }

    #[test]
    fn meta_truncated_is_corruption() {
        let data = sample().encode();
        for cut in [0, 1, 20, data.len() - 1] {
            assert!(matches!(decode(&data[..cut]), Err(Error::Corruption { .. })), "cut at {cut}");
        }
    }

    #[test]
    fn meta_bad_numbers_are_corruption() {
        assert_corrupt(decode(&with_body(|b| b.replace("files 3", "files 99999999999"))), "limit");
        assert_corrupt(decode(&with_body(|b| b.replace("files 3", "files 4"))), "missing");
        assert_corrupt(decode(&with_body(|b| b.replace("files 3", "files 2"))), "more lines");
        assert_corrupt(decode(&with_body(|b| b.replace("sequence 42", "sequence 99999999999999999999"))), "sequence");
        assert_corrupt(decode(&with_body(|b| b.replace("sequence 42", "sequence 042"))), "sequence");
        assert_corrupt(decode(&with_body(|b| b.replace(" 100 ", " -1 "))), "size");
        assert_corrupt(decode(&with_body(|b| b.replace("id 3", "id 4"))), "backup id 4");
    }

    #[test]
    fn meta_paths_outside_the_backup_are_corruption() {
        assert_corrupt(
            decode(&with_body(|b| b.replace("private/3/CURRENT", "private/3/../../etc/passwd"))),
            "stored path",
        );
        assert_corrupt(decode(&with_body(|b| b.replace("file CURRENT", "file ../CURRENT"))), "not a database file");
        assert_corrupt(decode(&with_body(|b| b.replace("_100.sst", "_101.sst"))), "stored path");
        assert_corrupt(decode(&with_body(|b| b.replace("shaledb-backup 1", "shaledb-backup 2"))), "format version");
    }

    #[test]
    fn meta_names_are_canonical_ids() {
        assert_eq!(parse_meta_name("12"), Some(12));
        for bad in ["0", "012", "12.tmp", "", "x", "99999999999999999999"] {
            assert_eq!(parse_meta_name(bad), None, "{bad}");
        }
    }
}
