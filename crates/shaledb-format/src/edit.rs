//! Version edits: the records of the MANIFEST.
//!
//! ```text
//! manifest     := log record*                        ; log.rs framing; each record holds one edit
//! edit         := field*
//! field        := tag:varint32 body
//! body         := [tag 1]  comparator:lp_slice       ; UTF-8 name of the key order ("shaledb.bytewise")
//!               | [tag 2]  format_version:varint32
//!               | [tag 3]  log_number:varint64       ; WALs numbered below it are obsolete
//!               | [tag 4]  next_file_number:varint64
//!               | [tag 5]  last_sequence:varint64
//!               | [tag 6]  deleted_file
//!               | [tag 7]  new_file                  ; a file without range tombstones
//!               | [tag 8]  blob_file_addition        ; format 4
//!               | [tag 9]  blob_file_garbage         ; format 4
//!               | [tag 10] new_file num_range_deletions:varint64   ; a file with some (> 0); format version 3
//!               | [tag 11] family:varint32           ; the column family the edit is about (absent: 0); format 5
//!               | [tag 12] family_add:lp_slice       ; creates family `family` named so (UTF-8, 1..=255 bytes)
//!               | [tag 13] family_drop:varint32      ; drops family `family` (body: 0, reserved)
//!               | [tag 14] max_family:varint32       ; the largest family id ever handed out
//!               | [tag 0x2001] db_id:lp_slice        ; the database's identity: exactly 16 bytes
//!               | [tag with bit 0x2000 set, unknown] opaque:lp_slice   ; safe to ignore: skipped
//! deleted_file := level:varint32 number:varint64
//! new_file     := level:varint32 number:varint64 file_size:varint64
//!                 smallest:lp_slice largest:lp_slice  ; internal keys, smallest <= largest
//!                 smallest_seq:varint64 largest_seq:varint64 num_entries:varint64 num_deletions:varint64
//! blob_file_addition := number:varint64 record_count:varint64 record_bytes:varint64 file_size:varint64
//! blob_file_garbage  := number:varint64 record_count:varint64 record_bytes:varint64  ; added to the file's garbage
//! ```
//!
//! Tags are FROZEN; tag 0 is reserved. Tags 1 to 5, 11 to 14 and 0x2001 appear at most once per edit, tags 6 to 10 any
//! number of times; tags 12 and 13 need tag 11 with a family other than 0 (the default family is never added or
//! dropped) and exclude each other; the files, blob files and log number of an edit belong to its family; a blob file's garbage never exceeds its records (`record_count`/`record_bytes` of its addition); `level < 64`. An unknown tag without the safe-to-ignore bit is corruption: the edit was written by a
//! newer version whose meaning this one cannot honour. A later version adds an optional field by giving it a tag
//! with the bit set and an `lp_slice` body, which older versions skip.

use crate::coding::{self, Decoder};
use crate::ikey;
use crate::{Error, Result};
use std::cmp::Ordering;

/// Metadata of one SST, as recorded in the MANIFEST.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct FileMeta {
    /// File number: the SST lives at `<number:06>.sst`.
    pub number: u64,
    /// Size in bytes.
    pub file_size: u64,
    /// Smallest internal key in the file.
    pub smallest: Vec<u8>,
    /// Largest internal key in the file.
    pub largest: Vec<u8>,
    /// Smallest sequence number in the file.
    pub smallest_seq: u64,
    /// Largest sequence number in the file.
    pub largest_seq: u64,
    /// Entries in the file (all kinds).
    pub num_entries: u64,
    /// Deletion entries in the file.
    pub num_deletions: u64,
    /// Range tombstones in the file's range-deletion block (format version 3). A file holding any is recorded
    /// with tag 10, so a build that predates range deletions refuses the MANIFEST rather than read past them.
    pub num_range_deletions: u64,
}

impl FileMeta {
    /// User key of `smallest`.
    pub fn smallest_user_key(&self) -> &[u8] {
        ikey::user_key(&self.smallest)
    }
    /// User key of `largest`.
    pub fn largest_user_key(&self) -> &[u8] {
        ikey::user_key(&self.largest)
    }
}

/// Field tags of an encoded [`VersionEdit`]. FROZEN: never renumber or reuse.
pub mod tag {
    /// Name of the key order.
    pub const COMPARATOR: u32 = 1;
    /// On-disk format version the database was written with.
    pub const FORMAT_VERSION: u32 = 2;
    /// WALs numbered below it are obsolete.
    pub const LOG_NUMBER: u32 = 3;
    /// Next file number to hand out.
    pub const NEXT_FILE_NUMBER: u32 = 4;
    /// Last sequence number used.
    pub const LAST_SEQUENCE: u32 = 5;
    /// A file removed from a level.
    pub const DELETED_FILE: u32 = 6;
    /// A file added to a level.
    pub const NEW_FILE: u32 = 7;
    /// A blob file joined the database (format 4).
    pub const BLOB_FILE_ADDITION: u32 = 8;
    /// Records of a blob file that no table references any more (format 4).
    pub const BLOB_FILE_GARBAGE: u32 = 9;
    /// A file added to a level that holds range tombstones: `new_file` followed by their count (format
    /// version 3). Not safe to ignore: a reader that skipped it would bring deleted keys back.
    pub const NEW_FILE_WITH_RANGE_DELS: u32 = 10;
    /// The column family the edit is about; absent means the default family, 0 (format 5).
    pub const FAMILY: u32 = 11;
    /// Creates the edit's family under this name (format 5).
    pub const FAMILY_ADD: u32 = 12;
    /// Drops the edit's family (format 5).
    pub const FAMILY_DROP: u32 = 13;
    /// The largest family id ever handed out, so that a dropped family's id is never reused (format 5).
    pub const MAX_FAMILY: u32 = 14;
    /// Set in the tag of an optional field (body: an `lp_slice`) that a reader not knowing it may skip.
    pub const SAFE_TO_IGNORE: u32 = 0x2000;
    /// The database's identity (16 bytes). Optional and safe to ignore: MANIFESTs written before it existed
    /// lack it, and a build that predates it skips it.
    pub const DB_ID: u32 = SAFE_TO_IGNORE | 1;
}

/// Length of a database identity ([`VersionEdit::db_id`]; also stored in every table's properties).
pub const DB_ID_LEN: usize = 16;

/// Levels are numbered below this.
pub const MAX_LEVELS: u32 = 64;

/// The largest file number the format allows (inclusive). File numbers share the 56-bit range of sequence
/// numbers, so a counter read from disk can always be incremented without wrapping; a number above this, in a
/// MANIFEST field or a file name, is out of range (corruption, or a file that is not ours), never wrapped.
pub const MAX_FILE_NUMBER: u64 = crate::ikey::MAX_SEQUENCE;

/// Name of the bytewise key order, recorded in the first edit of every MANIFEST.
pub const BYTEWISE_COMPARATOR: &str = "shaledb.bytewise";

/// A change to the set of live files and counters; one MANIFEST record. The first record of a MANIFEST is a
/// full snapshot of the version.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct VersionEdit {
    /// Name of the key order ([`BYTEWISE_COMPARATOR`]).
    pub comparator: Option<String>,
    /// On-disk format version ([`crate::FORMAT_VERSION`]).
    pub format_version: Option<u32>,
    /// WALs numbered below this are obsolete.
    pub log_number: Option<u64>,
    /// Next file number to hand out.
    pub next_file_number: Option<u64>,
    /// Last sequence number used.
    pub last_sequence: Option<u64>,
    /// Files removed: (level, file number).
    pub deleted_files: Vec<(u32, u64)>,
    /// Files added: (level, metadata).
    pub new_files: Vec<(u32, FileMeta)>,
    /// The database's random identity, recorded in the first edit of every MANIFEST (absent in MANIFESTs
    /// written before identities existed).
    pub db_id: Option<[u8; DB_ID_LEN]>,
    /// Blob files added (format 4).
    pub blob_files: Vec<BlobFileAddition>,
    /// Garbage found in blob files (format 4), added to what earlier edits recorded.
    pub blob_garbage: Vec<BlobFileGarbage>,
    /// The column family whose files, blob files and log number the edit changes (`None`: the default, 0).
    pub family: Option<u32>,
    /// Creates [`VersionEdit::family`] under this name.
    pub family_add: Option<String>,
    /// Drops [`VersionEdit::family`].
    pub family_drop: bool,
    /// The largest family id ever handed out.
    pub max_family: Option<u32>,
}

/// The longest column family name, in bytes.
pub const MAX_FAMILY_NAME_LEN: usize = 255;

/// Checks a column family name: 1 to [`MAX_FAMILY_NAME_LEN`] bytes of UTF-8; `Err` holds the reason.
pub fn check_family_name(name: &str) -> std::result::Result<(), String> {
    if name.is_empty() || name.len() > MAX_FAMILY_NAME_LEN {
        return Err(format!("column family name of {} bytes (1 to {MAX_FAMILY_NAME_LEN} allowed)", name.len()));
    }
    Ok(())
}

/// Checks the family fields of an edit (tags 11 to 13 together); `Err` holds the reason.
fn check_family_fields(e: &VersionEdit) -> std::result::Result<(), String> {
    let fam = e.family.unwrap_or(0);
    if (e.family_add.is_some() || e.family_drop) && fam == 0 {
        return Err("the default column family (0) is never added or dropped".into());
    }
    if e.family_add.is_some() && e.family_drop {
        return Err(format!("column family {fam} is both added and dropped in one edit"));
    }
    if let Some(name) = &e.family_add {
        check_family_name(name)?;
    }
    if e.max_family.is_some_and(|m| fam > m) {
        return Err(format!("column family {fam} is above the largest id handed out ({:?})", e.max_family));
    }
    Ok(())
}

/// A blob file as the MANIFEST records its addition: what it holds, for garbage accounting.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct BlobFileAddition {
    /// File number: the file lives at `<number:06>.blob`.
    pub number: u64,
    /// Records in the file.
    pub record_count: u64,
    /// Bytes of its records (headers, keys and values).
    pub record_bytes: u64,
    /// Size of the file.
    pub file_size: u64,
}

/// Records of a blob file that became garbage (no table references them any more).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct BlobFileGarbage {
    /// The blob file's number.
    pub number: u64,
    /// Records that became garbage.
    pub record_count: u64,
    /// Their bytes (as counted in [`BlobFileAddition::record_bytes`]).
    pub record_bytes: u64,
}

fn check_blob(number: u64, count: u64, bytes: u64, size: Option<u64>) -> std::result::Result<(), String> {
    if number > MAX_FILE_NUMBER {
        return Err(format!("blob file number {number} is past the largest the format allows ({MAX_FILE_NUMBER})"));
    }
    if bytes > MAX_FILE_SIZE || size.is_some_and(|s| s > MAX_FILE_SIZE || bytes > s) || count > bytes {
        return Err(format!("blob file {number}: {count} records of {bytes} bytes in a file of {size:?} bytes"));
    }
    Ok(())
}

/// Largest file size a MANIFEST may record (256 TiB, inclusive): far above any table, and small enough that
/// the engine can add up the sizes of 65536 files without leaving `u64`.
pub const MAX_FILE_SIZE: u64 = 1 << 48;

/// Checks a counter field (`tag::LOG_NUMBER`, `tag::NEXT_FILE_NUMBER`, `tag::LAST_SEQUENCE`) against the range
/// the format allows, so that the engine can count on from it without wrapping; `Err` holds the reason.
fn check_counter(t: u32, v: u64) -> std::result::Result<(), String> {
    let (name, max) = match t {
        tag::LOG_NUMBER => ("log number", MAX_FILE_NUMBER),
        // The next number to hand out: one past the largest usable one means "all used".
        tag::NEXT_FILE_NUMBER => ("next file number", MAX_FILE_NUMBER + 1),
        tag::LAST_SEQUENCE => ("last sequence", ikey::MAX_SEQUENCE),
        _ => return Ok(()),
    };
    if v > max {
        return Err(format!("{name} {v} is past the largest the format allows ({max})"));
    }
    Ok(())
}

/// Checks what a decoder must reject in a file record; `Err` holds the reason.
fn check_file(level: u32, number: u64, meta: Option<&FileMeta>) -> std::result::Result<(), String> {
    if level >= MAX_LEVELS {
        return Err(format!("level {level} is not below {MAX_LEVELS}"));
    }
    if number > MAX_FILE_NUMBER {
        return Err(format!("file number {number} is past the largest the format allows ({MAX_FILE_NUMBER})"));
    }
    let Some(f) = meta else { return Ok(()) };
    if f.file_size > MAX_FILE_SIZE {
        return Err(format!("file {}: size {} is past {MAX_FILE_SIZE}", f.number, f.file_size));
    }
    if f.smallest_seq > f.largest_seq || f.largest_seq > ikey::MAX_SEQUENCE {
        return Err(format!(
            "file {}: sequence range {}..={} is empty or past {}",
            f.number,
            f.smallest_seq,
            f.largest_seq,
            ikey::MAX_SEQUENCE
        ));
    }
    if f.num_deletions > f.num_entries {
        return Err(format!("file {}: {} deletions among {} entries", f.number, f.num_deletions, f.num_entries));
    }
    if ikey::parse(&f.smallest).is_none() {
        return Err(format!("file {}: smallest key is not an internal key", f.number));
    }
    if ikey::parse(&f.largest).is_none() {
        return Err(format!("file {}: largest key is not an internal key", f.number));
    }
    if ikey::compare(&f.smallest, &f.largest) == Ordering::Greater {
        return Err(format!("file {}: smallest key sorts after largest key", f.number));
    }
    Ok(())
}

fn set_once<T>(slot: &mut Option<T>, value: T, at: usize, name: &str) -> Result<()> {
    if slot.is_some() {
        return Err(Error::corruption("", at as u64, format!("version edit sets {name} twice")));
    }
    *slot = Some(value);
    Ok(())
}

impl VersionEdit {
    /// Records that file `number` left `level`.
    pub fn delete_file(&mut self, level: u32, number: u64) {
        self.deleted_files.push((level, number));
    }

    /// Records that `meta` joined `level`.
    pub fn add_file(&mut self, level: u32, meta: FileMeta) {
        self.new_files.push((level, meta));
    }

    /// Checks what [`VersionEdit::decode`] would reject, so that an edit is refused before it reaches a MANIFEST
    /// that could then not be read back. Errors are [`Error::InvalidArgument`].
    pub fn validate(&self) -> Result<()> {
        let invalid = |e: String| Error::InvalidArgument(format!("version edit: {e}"));
        let files = self.deleted_files.iter().map(|&(l, n)| (l, n, None));
        let files = files.chain(self.new_files.iter().map(|(l, f)| (*l, f.number, Some(f))));
        for (level, number, meta) in files {
            check_file(level, number, meta).map_err(invalid)?;
        }
        for (t, v) in [
            (tag::LOG_NUMBER, self.log_number),
            (tag::NEXT_FILE_NUMBER, self.next_file_number),
            (tag::LAST_SEQUENCE, self.last_sequence),
        ] {
            if let Some(v) = v {
                check_counter(t, v).map_err(invalid)?;
            }
        }
        for b in &self.blob_files {
            check_blob(b.number, b.record_count, b.record_bytes, Some(b.file_size)).map_err(invalid)?;
        }
        for g in &self.blob_garbage {
            check_blob(g.number, g.record_count, g.record_bytes, None).map_err(invalid)?;
        }
        check_family_fields(self).map_err(invalid)
    }

    /// Appends the encoding to `out`. Only the fields present are written.
    pub fn encode(&self, out: &mut Vec<u8>) {
        use coding::{put_lp_slice, put_varint32, put_varint64};
        if let Some(c) = &self.comparator {
            put_varint32(out, tag::COMPARATOR);
            put_lp_slice(out, c.as_bytes());
        }
        if let Some(v) = self.format_version {
            put_varint32(out, tag::FORMAT_VERSION);
            put_varint32(out, v);
        }
        for (t, v) in [
            (tag::LOG_NUMBER, self.log_number),
            (tag::NEXT_FILE_NUMBER, self.next_file_number),
            (tag::LAST_SEQUENCE, self.last_sequence),
        ] {
            if let Some(v) = v {
                put_varint32(out, t);
                put_varint64(out, v);
            }
        }
        if let Some(id) = &self.db_id {
            put_varint32(out, tag::DB_ID);
            put_lp_slice(out, id);
        }
        if let Some(f) = self.family {
            put_varint32(out, tag::FAMILY);
            put_varint32(out, f);
        }
        if let Some(name) = &self.family_add {
            put_varint32(out, tag::FAMILY_ADD);
            put_lp_slice(out, name.as_bytes());
        }
        if self.family_drop {
            put_varint32(out, tag::FAMILY_DROP);
            put_varint32(out, 0);
        }
        if let Some(m) = self.max_family {
            put_varint32(out, tag::MAX_FAMILY);
            put_varint32(out, m);
        }
        for &(level, number) in &self.deleted_files {
            put_varint32(out, tag::DELETED_FILE);
            put_varint32(out, level);
            put_varint64(out, number);
        }
        for (level, f) in &self.new_files {
            let with_range_dels = f.num_range_deletions > 0;
            put_varint32(out, if with_range_dels { tag::NEW_FILE_WITH_RANGE_DELS } else { tag::NEW_FILE });
            put_varint32(out, *level);
            put_varint64(out, f.number);
            put_varint64(out, f.file_size);
            put_lp_slice(out, &f.smallest);
            put_lp_slice(out, &f.largest);
            for v in [f.smallest_seq, f.largest_seq, f.num_entries, f.num_deletions] {
                put_varint64(out, v);
            }
            if with_range_dels {
                put_varint64(out, f.num_range_deletions);
            }
        }
        for b in &self.blob_files {
            put_varint32(out, tag::BLOB_FILE_ADDITION);
            for v in [b.number, b.record_count, b.record_bytes, b.file_size] {
                put_varint64(out, v);
            }
        }
        for g in &self.blob_garbage {
            put_varint32(out, tag::BLOB_FILE_GARBAGE);
            for v in [g.number, g.record_count, g.record_bytes] {
                put_varint64(out, v);
            }
        }
    }

    /// Decodes one edit (a MANIFEST record's payload). Errors are [`Error::Corruption`] with an empty file and
    /// the offset of the bad field within `data`; re-target with [`Error::in_file`].
    pub fn decode(data: &[u8]) -> Result<VersionEdit> {
        let mut d = Decoder::new(data);
        let mut e = VersionEdit::default();
        while !d.is_empty() {
            let at = d.pos();
            let bad = |what: String| Error::corruption("", at as u64, what);
            let truncated = |name: &str| bad(format!("version edit: truncated or malformed {name}"));
            let t = d.varint32().ok_or_else(|| truncated("tag"))?;
            match t {
                tag::COMPARATOR => {
                    let raw = d.lp_slice().ok_or_else(|| truncated("comparator"))?;
                    let name = std::str::from_utf8(raw).map_err(|_| bad("comparator name is not UTF-8".into()))?;
                    set_once(&mut e.comparator, name.to_string(), at, "comparator")?;
                }
                tag::FORMAT_VERSION => {
                    let v = d.varint32().ok_or_else(|| truncated("format version"))?;
                    set_once(&mut e.format_version, v, at, "format version")?;
                }
                tag::LOG_NUMBER => {
                    let v = d.varint64().ok_or_else(|| truncated("log number"))?;
                    check_counter(tag::LOG_NUMBER, v).map_err(|w| bad(format!("version edit: {w}")))?;
                    set_once(&mut e.log_number, v, at, "log number")?;
                }
                tag::NEXT_FILE_NUMBER => {
                    let v = d.varint64().ok_or_else(|| truncated("next file number"))?;
                    check_counter(tag::NEXT_FILE_NUMBER, v).map_err(|w| bad(format!("version edit: {w}")))?;
                    set_once(&mut e.next_file_number, v, at, "next file number")?;
                }
                tag::LAST_SEQUENCE => {
                    let v = d.varint64().ok_or_else(|| truncated("last sequence"))?;
                    check_counter(tag::LAST_SEQUENCE, v).map_err(|w| bad(format!("version edit: {w}")))?;
                    set_once(&mut e.last_sequence, v, at, "last sequence")?;
                }
                tag::DELETED_FILE => {
                    let (Some(level), Some(number)) = (d.varint32(), d.varint64()) else {
                        return Err(truncated("deleted file"));
                    };
                    check_file(level, number, None).map_err(|w| bad(format!("version edit: deleted file: {w}")))?;
                    e.deleted_files.push((level, number));
                }
                tag::NEW_FILE | tag::NEW_FILE_WITH_RANGE_DELS => {
                    let f = (|| {
                        let level = d.varint32()?;
                        let meta = FileMeta {
                            number: d.varint64()?,
                            file_size: d.varint64()?,
                            smallest: d.lp_slice()?.to_vec(),
                            largest: d.lp_slice()?.to_vec(),
                            smallest_seq: d.varint64()?,
                            largest_seq: d.varint64()?,
                            num_entries: d.varint64()?,
                            num_deletions: d.varint64()?,
                            num_range_deletions: if t == tag::NEW_FILE_WITH_RANGE_DELS { d.varint64()? } else { 0 },
                        };
                        Some((level, meta))
                    })();
                    let (level, meta) = f.ok_or_else(|| truncated("new file"))?;
                    check_file(level, meta.number, Some(&meta))
                        .map_err(|w| bad(format!("version edit: new file: {w}")))?;
                    e.new_files.push((level, meta));
                }
                tag::BLOB_FILE_ADDITION => {
                    let (Some(number), Some(record_count), Some(record_bytes), Some(file_size)) =
                        (d.varint64(), d.varint64(), d.varint64(), d.varint64())
                    else {
                        return Err(truncated("blob file addition"));
                    };
                    check_blob(number, record_count, record_bytes, Some(file_size))
                        .map_err(|w| bad(format!("version edit: {w}")))?;
                    e.blob_files.push(BlobFileAddition { number, record_count, record_bytes, file_size });
                }
                tag::BLOB_FILE_GARBAGE => {
                    let (Some(number), Some(record_count), Some(record_bytes)) =
                        (d.varint64(), d.varint64(), d.varint64())
                    else {
                        return Err(truncated("blob file garbage"));
                    };
                    check_blob(number, record_count, record_bytes, None)
                        .map_err(|w| bad(format!("version edit: {w}")))?;
                    e.blob_garbage.push(BlobFileGarbage { number, record_count, record_bytes });
                }
                tag::DB_ID => {
                    let raw = d.lp_slice().ok_or_else(|| truncated("database id"))?;
                    let id = <[u8; DB_ID_LEN]>::try_from(raw)
                        .map_err(|_| bad(format!("database id of {} bytes, not {DB_ID_LEN}", raw.len())))?;
                    set_once(&mut e.db_id, id, at, "database id")?;
                }
                tag::FAMILY => {
                    let v = d.varint32().ok_or_else(|| truncated("column family"))?;
                    set_once(&mut e.family, v, at, "column family")?;
                }
                tag::FAMILY_ADD => {
                    let raw = d.lp_slice().ok_or_else(|| truncated("column family name"))?;
                    let name = std::str::from_utf8(raw).map_err(|_| bad("column family name is not UTF-8".into()))?;
                    set_once(&mut e.family_add, name.to_string(), at, "column family name")?;
                }
                tag::FAMILY_DROP => {
                    let v = d.varint32().ok_or_else(|| truncated("column family drop"))?;
                    if v != 0 || e.family_drop {
                        return Err(bad(format!("version edit: column family drop with body {v} or twice")));
                    }
                    e.family_drop = true;
                }
                tag::MAX_FAMILY => {
                    let v = d.varint32().ok_or_else(|| truncated("max column family"))?;
                    set_once(&mut e.max_family, v, at, "max column family")?;
                }
                t if t & tag::SAFE_TO_IGNORE != 0 => {
                    d.lp_slice().ok_or_else(|| truncated(&format!("body of ignorable tag {t:#x}")))?;
                }
                t => {
                    return Err(bad(format!(
                        "version edit: unknown tag {t} without the safe-to-ignore bit (written by a newer version?)"
                    )))
                }
            }
        }
        check_family_fields(&e).map_err(|w| Error::corruption("", 0, format!("version edit: {w}")))?;
        Ok(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ikey::{make_internal_key, ValueKind};
    use proptest::prelude::*;

    fn meta(number: u64, lo: &[u8], hi: &[u8]) -> FileMeta {
        FileMeta {
            number,
            file_size: 4096 + number,
            smallest: make_internal_key(lo, 7, ValueKind::Value),
            largest: make_internal_key(hi, 3, ValueKind::Deletion),
            smallest_seq: 3,
            largest_seq: 7,
            num_entries: 10,
            num_deletions: 1,
            num_range_deletions: 0,
        }
    }

    #[test]
    fn files_with_range_tombstones_use_their_own_record() {
        let plain = meta(5, b"a", b"m");
        let with = FileMeta { num_range_deletions: 3, ..meta(6, b"n", b"z") };
        for (f, tag_expected) in [(plain, tag::NEW_FILE), (with, tag::NEW_FILE_WITH_RANGE_DELS)] {
            let e = VersionEdit { new_files: vec![(1, f.clone())], ..VersionEdit::default() };
            let mut buf = Vec::new();
            e.encode(&mut buf);
            assert_eq!(buf[0] as u32, tag_expected, "file {}", f.number);
            assert_eq!(VersionEdit::decode(&buf).unwrap(), e);
            // A truncated count is corruption, never a zero.
            if tag_expected == tag::NEW_FILE_WITH_RANGE_DELS {
                assert!(VersionEdit::decode(&buf[..buf.len() - 1]).is_err());
            }
        }
    }

    #[test]
    fn family_fields_roundtrip_and_their_rules_are_checked_both_ways() {
        let add = VersionEdit {
            family: Some(3),
            family_add: Some("users".into()),
            max_family: Some(3),
            ..VersionEdit::default()
        };
        assert_eq!(VersionEdit::decode(&enc(&add)).unwrap(), add);
        let drop = VersionEdit { family: Some(3), family_drop: true, ..VersionEdit::default() };
        assert_eq!(VersionEdit::decode(&enc(&drop)).unwrap(), drop);
        let bad = [
            VersionEdit { family_add: Some("x".into()), ..VersionEdit::default() },
            VersionEdit { family: Some(0), family_drop: true, ..VersionEdit::default() },
            VersionEdit { family: Some(2), family_drop: true, family_add: Some("x".into()), ..VersionEdit::default() },
            VersionEdit { family: Some(2), family_add: Some(String::new()), ..VersionEdit::default() },
            VersionEdit { family: Some(2), family_add: Some("n".repeat(256)), ..VersionEdit::default() },
            VersionEdit { family: Some(9), max_family: Some(8), ..VersionEdit::default() },
        ];
        for e in bad {
            assert!(matches!(e.validate(), Err(Error::InvalidArgument(_))), "{e:?}");
            assert!(matches!(VersionEdit::decode(&enc(&e)), Err(Error::Corruption { .. })), "{e:?}");
        }
        // A drop with a body other than 0 is corruption too.
        let mut raw = Vec::new();
        coding::put_varint32(&mut raw, tag::FAMILY);
        coding::put_varint32(&mut raw, 2);
        coding::put_varint32(&mut raw, tag::FAMILY_DROP);
        coding::put_varint32(&mut raw, 1);
        assert!(VersionEdit::decode(&raw).is_err());
    }

    fn snapshot() -> VersionEdit {
        let mut e = VersionEdit {
            comparator: Some(BYTEWISE_COMPARATOR.into()),
            format_version: Some(crate::FORMAT_VERSION),
            log_number: Some(12),
            next_file_number: Some(40),
            last_sequence: Some(u64::MAX >> 8),
            db_id: Some(*b"0123456789abcdef"),
            ..VersionEdit::default()
        };
        e.delete_file(1, 9);
        e.add_file(0, meta(20, b"a", b"m"));
        e.add_file(63, meta(21, b"k", b"k"));
        e.blob_files.push(BlobFileAddition { number: 22, record_count: 3, record_bytes: 900, file_size: 958 });
        e.blob_garbage.push(BlobFileGarbage { number: 22, record_count: 1, record_bytes: 300 });
        e
    }

    fn enc(e: &VersionEdit) -> Vec<u8> {
        let mut out = Vec::new();
        e.encode(&mut out);
        out
    }

    /// Decodes and expects corruption at `offset` whose message contains `needle`.
    fn expect_corruption(data: &[u8], offset: u64, needle: &str) {
        match VersionEdit::decode(data) {
            Err(Error::Corruption { file, offset: got, what }) => {
                assert_eq!(file.as_os_str(), "");
                assert_eq!(got, offset, "{what}");
                assert!(what.contains(needle), "{what:?} lacks {needle:?}");
            }
            other => panic!("expected corruption, got {other:?}"),
        }
    }

    /// Encoding of one field: tag, then body bytes.
    fn field(t: u32, body: &[u8]) -> Vec<u8> {
        let mut v = Vec::new();
        coding::put_varint32(&mut v, t);
        v.extend_from_slice(body);
        v
    }

    /// A new-file field written by hand: `encode` refuses (in debug builds) to write invalid files.
    fn new_file_field(level: u32, f: &FileMeta) -> Vec<u8> {
        let mut out = Vec::new();
        coding::put_varint32(&mut out, tag::NEW_FILE);
        coding::put_varint32(&mut out, level);
        coding::put_varint64(&mut out, f.number);
        coding::put_varint64(&mut out, f.file_size);
        coding::put_lp_slice(&mut out, &f.smallest);
        coding::put_lp_slice(&mut out, &f.largest);
        for v in [f.smallest_seq, f.largest_seq, f.num_entries, f.num_deletions] {
            coding::put_varint64(&mut out, v);
        }
        out
    }

    #[test]
    fn roundtrip_snapshot_and_empty() {
        let e = snapshot();
        assert_eq!(VersionEdit::decode(&enc(&e)).unwrap(), e);
        assert_eq!(VersionEdit::decode(&[]).unwrap(), VersionEdit::default());
        assert!(enc(&VersionEdit::default()).is_empty());
    }

    #[test]
    fn truncated_field() {
        let data = enc(&snapshot());
        let mut errors = 0;
        for cut in 0..data.len() {
            match VersionEdit::decode(&data[..cut]) {
                // A cut between fields is a shorter valid edit, which re-encodes to exactly the prefix.
                Ok(e) => assert_eq!(enc(&e), data[..cut], "cut at {cut}"),
                Err(e) => {
                    assert!(e.is_corruption(), "{e}");
                    errors += 1;
                }
            }
        }
        assert!(errors > data.len() / 2);
        expect_corruption(&[tag::LOG_NUMBER as u8, 0x80], 0, "log number");
        expect_corruption(&[0x80], 0, "tag");
    }

    #[test]
    fn overlong_varint() {
        let mut data = vec![tag::LAST_SEQUENCE as u8];
        data.extend([0xff; 11]);
        expect_corruption(&data, 0, "last sequence");
    }

    #[test]
    fn bad_level() {
        let mut data = enc(&VersionEdit { log_number: Some(1), ..VersionEdit::default() });
        let at = data.len() as u64;
        data.extend(field(tag::DELETED_FILE, &[64, 5]));
        expect_corruption(&data, at, "level 64");
        expect_corruption(&new_file_field(200, &meta(1, b"a", b"b")), 0, "level 200");
    }

    #[test]
    fn smallest_not_an_internal_key() {
        let mut f = meta(5, b"a", b"b");
        f.smallest = b"short".to_vec();
        expect_corruption(&new_file_field(1, &f), 0, "smallest key is not an internal key");
        let mut f = meta(5, b"a", b"b");
        let n = f.largest.len();
        f.largest[n - 8] = 9; // unknown kind byte
        expect_corruption(&new_file_field(1, &f), 0, "largest key is not an internal key");
    }

    #[test]
    fn smallest_after_largest() {
        expect_corruption(&new_file_field(1, &meta(5, b"z", b"a")), 0, "sorts after");
        // Same user key: the higher sequence sorts first, so (k, 3) > (k, 7) is disordered.
        let mut f = meta(5, b"k", b"k");
        std::mem::swap(&mut f.smallest, &mut f.largest);
        expect_corruption(&new_file_field(1, &f), 0, "sorts after");
    }

    /// One counter field: tag, varint64 body.
    fn counter_field(t: u32, v: u64) -> Vec<u8> {
        let mut body = Vec::new();
        coding::put_varint64(&mut body, v);
        field(t, &body)
    }

    #[test]
    fn edit_with_next_file_number_u64_max_is_corruption() {
        let mut data = enc(&VersionEdit { log_number: Some(1), ..VersionEdit::default() });
        let at = data.len() as u64;
        data.extend(counter_field(tag::NEXT_FILE_NUMBER, u64::MAX));
        expect_corruption(&data, at, "next file number 18446744073709551615 is past");
        // One past the largest file number is the counter of a database that used them all: accepted.
        let e = VersionEdit::decode(&counter_field(tag::NEXT_FILE_NUMBER, MAX_FILE_NUMBER + 1)).unwrap();
        assert_eq!(e.next_file_number, Some(MAX_FILE_NUMBER + 1));
        expect_corruption(&counter_field(tag::NEXT_FILE_NUMBER, MAX_FILE_NUMBER + 2), 0, "next file number");
    }

    #[test]
    fn edit_with_log_number_or_last_sequence_past_range_is_corruption() {
        assert!(VersionEdit::decode(&counter_field(tag::LOG_NUMBER, MAX_FILE_NUMBER)).is_ok());
        expect_corruption(&counter_field(tag::LOG_NUMBER, MAX_FILE_NUMBER + 1), 0, "log number");
        expect_corruption(&counter_field(tag::LOG_NUMBER, u64::MAX), 0, "log number");
        assert!(VersionEdit::decode(&counter_field(tag::LAST_SEQUENCE, ikey::MAX_SEQUENCE)).is_ok());
        expect_corruption(&counter_field(tag::LAST_SEQUENCE, ikey::MAX_SEQUENCE + 1), 0, "last sequence");
        expect_corruption(&counter_field(tag::LAST_SEQUENCE, u64::MAX), 0, "last sequence");
    }

    #[test]
    fn edit_with_file_number_past_max_is_corruption() {
        let mut body = vec![1];
        coding::put_varint64(&mut body, MAX_FILE_NUMBER + 1);
        expect_corruption(&field(tag::DELETED_FILE, &body), 0, "file number 72057594037927936 is past");
        let mut body = vec![1];
        coding::put_varint64(&mut body, u64::MAX);
        expect_corruption(&field(tag::DELETED_FILE, &body), 0, "file number");
        expect_corruption(
            &new_file_field(1, &FileMeta { number: MAX_FILE_NUMBER + 1, ..meta(5, b"a", b"b") }),
            0,
            "file number",
        );
        expect_corruption(&new_file_field(1, &FileMeta { number: u64::MAX, ..meta(5, b"a", b"b") }), 0, "file number");
        let last = FileMeta { number: MAX_FILE_NUMBER, ..meta(5, b"a", b"b") };
        assert!(VersionEdit::decode(&new_file_field(1, &last)).is_ok());
    }

    #[test]
    fn edit_with_bad_file_size_or_sequence_range_is_corruption() {
        let mut f = meta(5, b"a", b"b");
        f.file_size = MAX_FILE_SIZE + 1;
        expect_corruption(&new_file_field(1, &f), 0, "size");
        let mut f = meta(5, b"a", b"b");
        f.largest_seq = ikey::MAX_SEQUENCE + 1;
        expect_corruption(&new_file_field(1, &f), 0, "sequence range");
        let mut f = meta(5, b"a", b"b");
        (f.smallest_seq, f.largest_seq) = (8, 7);
        expect_corruption(&new_file_field(1, &f), 0, "sequence range");
        let mut f = meta(5, b"a", b"b");
        f.num_deletions = f.num_entries + 1;
        expect_corruption(&new_file_field(1, &f), 0, "deletions");
        // validate() refuses the same before an edit is written.
        let mut e = VersionEdit { next_file_number: Some(u64::MAX), ..VersionEdit::default() };
        assert!(e.validate().unwrap_err().is_invalid_argument());
        e.next_file_number = None;
        e.add_file(0, FileMeta { largest_seq: u64::MAX, ..meta(5, b"a", b"b") });
        assert!(e.validate().unwrap_err().is_invalid_argument());
    }

    #[test]
    fn duplicate_field() {
        let mut data = enc(&VersionEdit { log_number: Some(1), ..VersionEdit::default() });
        let at = data.len() as u64;
        data.extend(enc(&VersionEdit { log_number: Some(2), ..VersionEdit::default() }));
        expect_corruption(&data, at, "twice");
    }

    #[test]
    fn comparator_not_utf8() {
        expect_corruption(&field(tag::COMPARATOR, &[2, 0xff, 0xfe]), 0, "UTF-8");
    }

    #[test]
    fn unknown_tag_not_safe_to_ignore() {
        let mut data = enc(&snapshot());
        let at = data.len() as u64;
        data.extend(field(15, &[1, 0]));
        expect_corruption(&data, at, "unknown tag 15");
        expect_corruption(&field(0, &[]), 0, "unknown tag 0");
    }

    #[test]
    fn unknown_tag_safe_to_ignore_is_skipped() {
        let e = snapshot();
        let mut data = field(tag::SAFE_TO_IGNORE | 5, &[3, b'x', b'y', b'z']);
        data.extend(enc(&e));
        data.extend(field(tag::SAFE_TO_IGNORE | 1000, &[0]));
        assert_eq!(VersionEdit::decode(&data).unwrap(), e);
        // Its body must still be a whole lp_slice.
        let mut data = enc(&e);
        let at = data.len() as u64;
        data.extend(field(tag::SAFE_TO_IGNORE | 5, &[9, 1, 2]));
        expect_corruption(&data, at, "ignorable tag");
    }

    /// A MANIFEST written before identities existed has no db id and stays readable; a db id of the wrong
    /// length or given twice is corruption; a build that predates the field skips it (safe-to-ignore bit).
    #[test]
    fn db_id_is_optional_and_exactly_16_bytes() {
        let old = VersionEdit { log_number: Some(3), ..VersionEdit::default() };
        assert_eq!(VersionEdit::decode(&enc(&old)).unwrap().db_id, None);
        assert_ne!(tag::DB_ID & tag::SAFE_TO_IGNORE, 0);
        let mut short = vec![0u8; 15];
        short.insert(0, 15);
        expect_corruption(&field(tag::DB_ID, &short), 0, "database id of 15 bytes");
        let one = enc(&VersionEdit { db_id: Some([7; DB_ID_LEN]), ..VersionEdit::default() });
        let mut twice = one.clone();
        twice.extend(&one);
        expect_corruption(&twice, one.len() as u64, "twice");
    }

    #[test]
    fn validate_rejects_what_decode_rejects() {
        assert!(snapshot().validate().is_ok());
        let mut e = snapshot();
        e.delete_file(64, 1);
        assert!(e.validate().unwrap_err().is_invalid_argument());
        let mut e = snapshot();
        e.add_file(2, meta(9, b"z", b"a"));
        assert!(e.validate().unwrap_err().is_invalid_argument());
    }

    #[test]
    fn grammar_matches_docs() {
        shaledb_testkit::grammar::assert_module_grammar_in_doc(
            include_str!("edit.rs"),
            include_str!("../../../docs/format/manifest.md"),
        );
    }

    fn arb_ikey() -> impl Strategy<Value = Vec<u8>> {
        (prop::collection::vec(any::<u8>(), 0..12), 0..=ikey::MAX_SEQUENCE, 0u8..3)
            .prop_map(|(k, seq, kind)| make_internal_key(&k, seq, ValueKind::from_u8(kind).unwrap_or(ValueKind::Value)))
    }

    fn arb_meta() -> impl Strategy<Value = FileMeta> {
        let numbers = (0..=MAX_FILE_NUMBER, 0..=MAX_FILE_SIZE, 0..=ikey::MAX_SEQUENCE, 0..=ikey::MAX_SEQUENCE);
        (numbers, any::<[u64; 2]>(), arb_ikey(), arb_ikey()).prop_map(|((number, size, s1, s2), n, a, b)| {
            let (smallest, largest) = if ikey::compare(&a, &b) == Ordering::Greater { (b, a) } else { (a, b) };
            FileMeta {
                number,
                file_size: size,
                smallest,
                largest,
                smallest_seq: s1.min(s2),
                largest_seq: s1.max(s2),
                num_entries: n[0].max(n[1]),
                num_deletions: n[0].min(n[1]),
                // Both file records (tags 7 and 8) in the round trips.
                num_range_deletions: n[0] % 3,
            }
        })
    }

    proptest! {
        #[test]
        fn roundtrip_random(
            comparator in prop::option::of("[a-z.]{0,20}"),
            format_version in prop::option::of(any::<u32>()),
            counters in (
                prop::option::of(0..=MAX_FILE_NUMBER),
                prop::option::of(0..=MAX_FILE_NUMBER + 1),
                prop::option::of(0..=ikey::MAX_SEQUENCE),
            ),
            deleted_files in prop::collection::vec((0..MAX_LEVELS, 0..=MAX_FILE_NUMBER), 0..5),
            new_files in prop::collection::vec((0..MAX_LEVELS, arb_meta()), 0..5),
            db_id in prop::option::of(any::<[u8; DB_ID_LEN]>()),
            blobs in prop::collection::vec((0..=MAX_FILE_NUMBER, 0..1000u64, 0..100u64), 0..4),
            family in (prop::option::of(1..100u32), 0..3u8, "[a-z]{1,12}", prop::option::of(100..200u32)),
        ) {
            let blob_files = blobs
                .iter()
                .map(|&(number, c, extra)| BlobFileAddition {
                    number,
                    record_count: c,
                    record_bytes: c * 12 + extra,
                    file_size: c * 12 + extra + 58,
                })
                .collect();
            let blob_garbage = blobs
                .iter()
                .map(|&(number, c, extra)| BlobFileGarbage { number, record_count: c / 2, record_bytes: c * 6 + extra / 2 })
                .collect();
            let e = VersionEdit {
                comparator,
                format_version,
                log_number: counters.0,
                next_file_number: counters.1,
                last_sequence: counters.2,
                deleted_files,
                new_files,
                db_id,
                blob_files,
                blob_garbage,
                family: family.0,
                family_add: (family.0.is_some() && family.1 == 1).then(|| family.2.clone()),
                family_drop: family.0.is_some() && family.1 == 2,
                max_family: family.3,
            };
            prop_assert!(e.validate().is_ok());
            prop_assert_eq!(VersionEdit::decode(&enc(&e)).unwrap(), e);
        }

        #[test]
        fn arbitrary_bytes_never_panic(data in prop::collection::vec(any::<u8>(), 0..64)) {
            if let Ok(e) = VersionEdit::decode(&data) {
                prop_assert!(e.validate().is_ok());
            }
        }
    }
}
