//! Blob files: large values kept out of the tables (key-value separation, RocksDB's integrated BlobDB).
//!
//! ```text
//! blob_file  := header record* footer
//! header     := magic:fixed64 version:u8 compression:u8 db_id:16 bytes header_crc:fixed32   ; 30 bytes
//! record     := key_len:fixed32 value_len:fixed32 record_crc:fixed32 key value
//! footer     := footer_magic:fixed64 record_count:fixed64 value_bytes:fixed64 footer_crc:fixed32 ; 28 bytes
//! blob_index := file_number:varint64 offset:varint64 size:varint64 compression:u8  ; a table value of kind 0x11
//! ```
//!
//! - `magic` is the bytes `SHALEBLB`, `footer_magic` the bytes `SHBLBEND`, `version` 1.
//! - `compression` is the [`CompressionType`] byte every value of the file is stored with (`0` none); a value
//!   the codec could not shrink is still stored with it (the codec's output), so one byte says how to read all.
//! - `header_crc`, `record_crc` and `footer_crc` are masked crc32c: of the header's bytes before it, of
//!   `key_len value_len key value`, and of the footer's bytes before it.
//! - `value_len` counts the stored (compressed) bytes; `value_bytes` in the footer sums them.
//! - A `blob_index` names the file, the offset of the record's first byte and the stored value's size; a reader
//!   knows the key it looks up, so it reads `12 + key_len + size` bytes at once and checks length, checksum
//!   and key. Its `compression` byte repeats the file's.
//! - A file without its footer was never referenced by a MANIFEST (blob files are synced, footer included,
//!   before the edit that adds them), so it is a leftover. Readers check the header at open, `verify` the footer.
//!
//! Values FROZEN once written: the magics, the version, the layout above.

use crate::coding::{self, Decoder};
use crate::compress::{self, CompressionType};
use crate::crc;
use crate::edit::{BlobFileAddition, BlobFileGarbage, DB_ID_LEN};
use crate::{Error, Result};
use shaledb_vfs::{RandomAccessFile, WritableFile};
use std::path::Path;
use std::sync::Arc;

/// First eight bytes of every blob file ("SHALEBLB" little-endian). FROZEN.
pub const HEADER_MAGIC: u64 = u64::from_le_bytes(*b"SHALEBLB");
/// First eight bytes of the footer ("SHBLBEND"). FROZEN.
pub const FOOTER_MAGIC: u64 = u64::from_le_bytes(*b"SHBLBEND");
/// Version of the blob file layout. FROZEN.
pub const BLOB_FILE_VERSION: u8 = 1;
/// Bytes in the header.
pub const HEADER_LEN: usize = 8 + 1 + 1 + DB_ID_LEN + 4;
/// Bytes in the footer.
pub const FOOTER_LEN: usize = 8 + 8 + 8 + 4;
/// Bytes before a record's key.
pub const RECORD_HEADER_LEN: usize = 12;
/// The largest value a record may hold (stored bytes), as the table format bounds one entry.
pub const MAX_BLOB_LEN: u64 = 1 << 32;

/// Where a value lives in a blob file: the value of a table entry of kind `0x11`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlobIndex {
    /// The blob file's number (`NNNNNN.blob`).
    pub file_number: u64,
    /// Offset of the record's first byte.
    pub offset: u64,
    /// Stored (compressed) size of the value.
    pub size: u64,
    /// How the value is stored.
    pub compression: CompressionType,
}

impl BlobIndex {
    /// Appends the encoding.
    pub fn encode(&self, out: &mut Vec<u8>) {
        coding::put_varint64(out, self.file_number);
        coding::put_varint64(out, self.offset);
        coding::put_varint64(out, self.size);
        out.push(self.compression as u8);
    }

    /// Decodes a blob index; `None` when the bytes are not one (the caller names file and offset).
    pub fn decode(value: &[u8]) -> Option<BlobIndex> {
        let mut d = Decoder::new(value);
        let file_number = d.varint64()?;
        let offset = d.varint64()?;
        let size = d.varint64()?;
        let compression = CompressionType::from_u8(d.u8()?)?;
        if !d.is_empty() || size > MAX_BLOB_LEN || file_number > crate::edit::MAX_FILE_NUMBER {
            return None;
        }
        Some(BlobIndex { file_number, offset, size, compression })
    }

    /// Bytes of the record this index points to, for a key of `key_len` bytes.
    pub fn record_len(&self, key_len: usize) -> u64 {
        RECORD_HEADER_LEN as u64 + key_len as u64 + self.size
    }
}

/// A live blob file as the MANIFEST's edits add up: its addition and the garbage recorded since.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct BlobFileMeta {
    /// What the file holds.
    pub addition: BlobFileAddition,
    /// Records no table references any more.
    pub garbage_count: u64,
    /// Their bytes.
    pub garbage_bytes: u64,
}

impl BlobFileMeta {
    /// A file just added: no garbage yet.
    pub fn new(addition: BlobFileAddition) -> BlobFileMeta {
        BlobFileMeta { addition, garbage_count: 0, garbage_bytes: 0 }
    }

    /// Adds `g` to the garbage; `Err` (the reason) when it would pass the file's records.
    pub fn add_garbage(&mut self, g: &BlobFileGarbage) -> std::result::Result<(), String> {
        let count = self.garbage_count.checked_add(g.record_count).filter(|&c| c <= self.addition.record_count);
        let bytes = self.garbage_bytes.checked_add(g.record_bytes).filter(|&b| b <= self.addition.record_bytes);
        match (count, bytes) {
            (Some(c), Some(b)) => {
                self.garbage_count = c;
                self.garbage_bytes = b;
                Ok(())
            }
            _ => Err(format!(
                "garbage of blob file {} would pass its {} records of {} bytes",
                g.number, self.addition.record_count, self.addition.record_bytes
            )),
        }
    }

    /// True when every record is garbage: no table references the file, so it leaves the version (RocksDB's
    /// rule: a blob file is dropped once all its blobs are garbage).
    pub fn is_obsolete(&self) -> bool {
        self.garbage_count >= self.addition.record_count
    }

    /// Garbage as a fraction of the file's bytes (0 for an empty file).
    pub fn garbage_ratio(&self) -> f64 {
        if self.addition.record_bytes == 0 {
            return 0.0;
        }
        self.garbage_bytes as f64 / self.addition.record_bytes as f64
    }
}

/// Applies an edit's blob additions and garbage to `files`, dropping files that became all garbage; returns the
/// problems (an addition of a live number, garbage for a file not live or past its records). The one fold of
/// blob edits, for the engine's versions and for MANIFEST replay.
pub fn apply_edit(
    files: &mut std::collections::BTreeMap<u64, BlobFileMeta>,
    additions: &[BlobFileAddition],
    garbage: &[BlobFileGarbage],
) -> Vec<String> {
    let mut problems = Vec::new();
    for a in additions {
        if files.insert(a.number, BlobFileMeta::new(*a)).is_some() {
            problems.push(format!("edit adds blob file {} twice", a.number));
        }
    }
    for g in garbage {
        match files.get_mut(&g.number) {
            Some(m) => {
                if let Err(p) = m.add_garbage(g) {
                    problems.push(p);
                }
            }
            None => problems.push(format!("edit records garbage of blob file {}, which is not live", g.number)),
        }
    }
    files.retain(|_, m| !m.is_obsolete());
    problems
}

/// What a finished blob file holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct BlobFileSummary {
    /// Records written.
    pub record_count: u64,
    /// Sum of the records' sizes (header, key and value), the unit of blob garbage accounting.
    pub record_bytes: u64,
    /// Size of the file.
    pub file_size: u64,
}

/// Writes one blob file: header at creation, records, footer and `fdatasync` at [`BlobFileWriter::finish`].
pub struct BlobFileWriter {
    file: Box<dyn WritableFile>,
    number: u64,
    compression: CompressionType,
    offset: u64,
    summary: BlobFileSummary,
    value_bytes: u64,
    buf: Vec<u8>,
    packed: Vec<u8>,
}

fn encode_header(compression: CompressionType, db_id: &[u8; DB_ID_LEN]) -> Vec<u8> {
    let mut h = Vec::with_capacity(HEADER_LEN);
    coding::put_fixed64(&mut h, HEADER_MAGIC);
    h.push(BLOB_FILE_VERSION);
    h.push(compression as u8);
    h.extend_from_slice(db_id);
    let c = crc::mask(crc::value(&h));
    coding::put_fixed32(&mut h, c);
    h
}

impl BlobFileWriter {
    /// Starts blob file `number` in `file` (empty), writing its header.
    pub fn new(
        mut file: Box<dyn WritableFile>,
        number: u64,
        compression: CompressionType,
        db_id: &[u8; DB_ID_LEN],
    ) -> Result<BlobFileWriter> {
        file.append(&encode_header(compression, db_id))?;
        Ok(BlobFileWriter {
            file,
            number,
            compression,
            offset: HEADER_LEN as u64,
            summary: BlobFileSummary::default(),
            value_bytes: 0,
            buf: Vec::new(),
            packed: Vec::new(),
        })
    }

    /// Appends one record and returns its index.
    pub fn add(&mut self, key: &[u8], value: &[u8]) -> Result<BlobIndex> {
        let stored: &[u8] = if self.compression == CompressionType::None {
            value
        } else {
            if !compress::compress(self.compression, 0, value, &mut self.packed) {
                return Err(Error::InvalidArgument(format!(
                    "blob_compression_type {} failed on a {}-byte value",
                    self.compression,
                    value.len()
                )));
            }
            &self.packed
        };
        if stored.len() as u64 > MAX_BLOB_LEN || key.len() as u64 > u32::MAX as u64 {
            return Err(Error::InvalidArgument(format!("a {}-byte value does not fit a blob record", stored.len())));
        }
        self.buf.clear();
        coding::put_fixed32(&mut self.buf, key.len() as u32);
        coding::put_fixed32(&mut self.buf, stored.len() as u32);
        let c = crc::extend(crc::extend(crc::value(&self.buf), key), stored);
        coding::put_fixed32(&mut self.buf, crc::mask(c));
        self.buf.extend_from_slice(key);
        self.buf.extend_from_slice(stored);
        self.file.append(&self.buf)?;
        let index = BlobIndex {
            file_number: self.number,
            offset: self.offset,
            size: stored.len() as u64,
            compression: self.compression,
        };
        self.offset += self.buf.len() as u64;
        self.summary.record_count += 1;
        self.summary.record_bytes += self.buf.len() as u64;
        self.value_bytes += stored.len() as u64;
        Ok(index)
    }

    /// Bytes written so far (header and records).
    pub fn file_size(&self) -> u64 {
        self.offset
    }

    /// The file's number.
    pub fn number(&self) -> u64 {
        self.number
    }

    /// Writes the footer and syncs the file.
    pub fn finish(mut self) -> Result<BlobFileSummary> {
        let mut f = Vec::with_capacity(FOOTER_LEN);
        coding::put_fixed64(&mut f, FOOTER_MAGIC);
        coding::put_fixed64(&mut f, self.summary.record_count);
        coding::put_fixed64(&mut f, self.value_bytes);
        let c = crc::mask(crc::value(&f));
        coding::put_fixed32(&mut f, c);
        self.file.append(&f)?;
        self.file.flush()?;
        self.file.sync()?;
        self.summary.file_size = self.offset + FOOTER_LEN as u64;
        Ok(self.summary)
    }
}

/// A read-ahead buffer over one blob file ([`BlobFileReader::read_ahead`]).
#[derive(Debug, Default)]
pub struct ReadWindow {
    /// The file the buffer holds bytes of (`None`: empty).
    number: Option<u64>,
    /// File offset of `data[0]`.
    start: u64,
    data: Vec<u8>,
}

/// Reads records of one blob file (shared by readers: every read is a positioned read).
pub struct BlobFileReader {
    file: Arc<dyn RandomAccessFile>,
    number: u64,
    compression: CompressionType,
    size: u64,
}

impl std::fmt::Debug for BlobFileReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BlobFileReader").field("path", &self.file.path()).field("size", &self.size).finish()
    }
}

impl BlobFileReader {
    /// Opens blob file `number`: checks its header (and, with `db_id`, that the file is this database's).
    pub fn open(file: Arc<dyn RandomAccessFile>, number: u64, db_id: Option<&[u8; DB_ID_LEN]>) -> Result<Self> {
        let size = file.len();
        let path = file.path().to_path_buf();
        let bad = |offset: u64, what: String| Error::corruption(&path, offset, what);
        if size < (HEADER_LEN + FOOTER_LEN) as u64 {
            return Err(bad(0, format!("blob file of {size} bytes is shorter than its header and footer")));
        }
        let mut h = [0u8; HEADER_LEN];
        file.read_exact_at(&mut h, 0)?;
        let (body, stored_crc) = h.split_at(HEADER_LEN - 4);
        if coding::get_fixed32(stored_crc) != Some(crc::mask(crc::value(body))) {
            return Err(bad(0, "blob file header checksum mismatch".into()));
        }
        if coding::get_fixed64(body) != Some(HEADER_MAGIC) {
            return Err(bad(0, "not a blob file (bad magic)".into()));
        }
        if body[8] != BLOB_FILE_VERSION {
            return Err(bad(8, format!("blob file version {} is not {BLOB_FILE_VERSION}", body[8])));
        }
        let compression =
            CompressionType::from_u8(body[9]).ok_or_else(|| bad(9, format!("unknown compression {}", body[9])))?;
        if let Some(id) = db_id {
            if &body[10..10 + DB_ID_LEN] != id {
                return Err(bad(10, "blob file belongs to another database (identity differs)".into()));
            }
        }
        Ok(BlobFileReader { file, number, compression, size })
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        self.file.path()
    }

    /// Reads the value `index` points to for `key` into `out` (replaced), checking the record's length,
    /// checksum and key: every mismatch is `Corruption` naming this file and the record's offset.
    pub fn read(&self, key: &[u8], index: &BlobIndex, out: &mut Vec<u8>) -> Result<()> {
        let len = self.check_index(key, index)?;
        let mut rec = vec![0u8; len as usize];
        self.file.read_exact_at(&mut rec, index.offset)?;
        self.decode_record(key, index, &rec, out)
    }

    /// [`BlobFileReader::read`] through `window`, a read-ahead buffer of this file: a record outside it is
    /// read with the `readahead` bytes that follow (RocksDB's `blob_compaction_readahead_size`), so records
    /// read in file order (a compaction's garbage collection) cost one read per window, not one each.
    pub fn read_ahead(
        &self,
        key: &[u8],
        index: &BlobIndex,
        out: &mut Vec<u8>,
        window: &mut ReadWindow,
        readahead: u64,
    ) -> Result<()> {
        let len = self.check_index(key, index)?;
        let inside = index.offset >= window.start
            && index.offset + len <= window.start + window.data.len() as u64
            && window.number == Some(self.number);
        if !inside {
            // Within the records (checked by `check_index`), never past them.
            let body_end = self.size - FOOTER_LEN as u64;
            let want = len.max(readahead).min(body_end - index.offset);
            window.data.resize(want as usize, 0);
            self.file.read_exact_at(&mut window.data, index.offset)?;
            (window.start, window.number) = (index.offset, Some(self.number));
        }
        let at = (index.offset - window.start) as usize;
        self.decode_record(key, index, &window.data[at..at + len as usize], out)
    }

    /// Checks that `index` can name a record of this file for a key of `key.len()` bytes; the record's length.
    fn check_index(&self, key: &[u8], index: &BlobIndex) -> Result<u64> {
        let bad = |what: String| Error::corruption(self.file.path(), index.offset, what);
        if index.file_number != self.number {
            return Err(bad(format!("blob index names file {}, read from {}", index.file_number, self.number)));
        }
        let len = index.record_len(key.len());
        let end = index.offset.checked_add(len).filter(|&e| e <= self.size - FOOTER_LEN as u64);
        if index.offset < HEADER_LEN as u64 || end.is_none() {
            return Err(bad(format!("blob record of {len} bytes does not fit in a {}-byte file", self.size)));
        }
        if index.compression != self.compression {
            return Err(bad("blob index compression differs from its file's".into()));
        }
        Ok(len)
    }

    /// Checks the record `rec` (read for `index`) and decodes its value into `out`.
    fn decode_record(&self, key: &[u8], index: &BlobIndex, rec: &[u8], out: &mut Vec<u8>) -> Result<()> {
        let bad = |what: String| Error::corruption(self.file.path(), index.offset, what);
        let (key_len, value_len) = (coding::get_fixed32(rec), coding::get_fixed32(&rec[4..]));
        if key_len != Some(key.len() as u32) || value_len.map(u64::from) != Some(index.size) {
            return Err(bad("blob record lengths differ from its index".into()));
        }
        let c = crc::extend(crc::value(&rec[..8]), &rec[RECORD_HEADER_LEN..]);
        if coding::get_fixed32(&rec[8..]) != Some(crc::mask(c)) {
            return Err(bad("blob record checksum mismatch".into()));
        }
        let (rkey, value) = rec[RECORD_HEADER_LEN..].split_at(key.len());
        if rkey != key {
            return Err(bad("blob record holds another key".into()));
        }
        match self.compression {
            CompressionType::None => {
                out.clear();
                out.extend_from_slice(value);
            }
            c => {
                *out = compress::decompress(c, value).map_err(|e| bad(format!("blob value: {e}")))?;
            }
        }
        Ok(())
    }

    /// Reads the whole file, one record at a time: every record's checksum and the footer's counts. Returns
    /// the summary, or `Corruption` naming the file and the offset of the first bad record.
    pub fn verify(&self) -> Result<BlobFileSummary> {
        let path = self.file.path();
        let body_end = self.size - FOOTER_LEN as u64;
        let mut summary = BlobFileSummary { file_size: self.size, ..BlobFileSummary::default() };
        let mut value_bytes = 0u64;
        let mut at = HEADER_LEN as u64;
        let mut rec = Vec::new();
        while at < body_end {
            let bad = |what: &str| Error::corruption(path, at, what.to_string());
            if body_end - at < RECORD_HEADER_LEN as u64 {
                return Err(bad("truncated blob record header"));
            }
            let mut h = [0u8; RECORD_HEADER_LEN];
            self.file.read_exact_at(&mut h, at)?;
            let (k, v) = (coding::get_fixed32(&h).unwrap_or(0), coding::get_fixed32(&h[4..]).unwrap_or(0));
            let len = RECORD_HEADER_LEN as u64 + k as u64 + v as u64;
            if len > body_end - at {
                return Err(bad("blob record runs past the footer"));
            }
            // Bounded by the file's size, checked just above.
            rec.resize((len as usize) - RECORD_HEADER_LEN, 0);
            self.file.read_exact_at(&mut rec, at + RECORD_HEADER_LEN as u64)?;
            let c = crc::extend(crc::value(&h[..8]), &rec);
            if coding::get_fixed32(&h[8..]) != Some(crc::mask(c)) {
                return Err(bad("blob record checksum mismatch"));
            }
            summary.record_count += 1;
            summary.record_bytes += len;
            value_bytes += v as u64;
            at += len;
        }
        let mut f = [0u8; FOOTER_LEN];
        self.file.read_exact_at(&mut f, body_end)?;
        let bad = |what: &str| Error::corruption(path, body_end, what.to_string());
        if coding::get_fixed32(&f[24..]) != Some(crc::mask(crc::value(&f[..24]))) {
            return Err(bad("blob file footer checksum mismatch"));
        }
        if coding::get_fixed64(&f) != Some(FOOTER_MAGIC) {
            return Err(bad("blob file footer has a bad magic"));
        }
        let counts = (coding::get_fixed64(&f[8..]), coding::get_fixed64(&f[16..]));
        if counts != (Some(summary.record_count), Some(value_bytes)) {
            return Err(bad("blob file footer counts differ from its records"));
        }
        Ok(summary)
    }
}

#[cfg(test)]
mod tests;
