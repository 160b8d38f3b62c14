//! Blob files in the engine (key-value separation, RocksDB's integrated BlobDB; format: docs/format/blob.md).
//!
//! - **Write.** Flush and compaction (`compaction::write_sorted_run`) pass each surviving value through a
//!   [`BlobSink`] (`sink.rs`): with [`crate::Options::enable_blob_files`], a put value of at least
//!   `min_blob_size` bytes goes to the run's current blob file (rolled at `blob_file_size`) and the table gets
//!   an entry of kind `0x11` holding its [`BlobIndex`]. Merge operands and tombstones stay in the table. The
//!   blob files are synced (footer included) before the run returns, so before the MANIFEST edit that adds
//!   them (docs/durability.md).
//! - **Read.** `get`, `multi_get`, cursors and the merge of operands over a blob base resolve a blob index
//!   through [`BlobFiles`], the per-database cache of open blob file readers. Every record is checked (length,
//!   checksum, key): a bad one is `Corruption` naming the blob file and the record's offset.
//! - **Lifecycle.** Each version holds the live blob files with the garbage the MANIFEST recorded for them
//!   (`shaledb_format::blob::BlobFileMeta`). A compaction counts, per blob file, the references its inputs held
//!   and its outputs keep; the difference is the file's new garbage, recorded in the compaction's edit. A file
//!   whose records are all garbage leaves the version (RocksDB's rule), and is deleted once no version a reader,
//!   iterator or checkpoint holds still lists it, as tables are.
//! - **Garbage collection.** With `enable_blob_garbage_collection`, a compaction rewrites the values it meets in
//!   the oldest `blob_garbage_collection_age_cutoff` fraction of the blob files into new ones (so the old files
//!   turn into garbage), and `blob_garbage_collection_force_threshold` compacts the tables referencing the
//!   oldest blob file once its garbage ratio reaches the threshold (`gc.rs`).

mod gc;
mod sink;

pub(crate) use gc::pick_forced;
pub(crate) use sink::{BlobConfig, BlobOutput, BlobSink, Emit};

use crate::identity::DbId;
use parking_lot::Mutex;
use shaledb_format::blob::{BlobFileReader, BlobIndex, ReadWindow};
use shaledb_format::filenames;
use shaledb_vfs::{Error, Fs, ReadHints, Result};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The open blob file readers of one database. A reader stays open until its file is deleted; there are few
/// blob files (each `blob_file_size`, 256 MiB by default), so the cache is not bounded by `max_open_files`.
pub(crate) struct BlobFiles {
    dir: PathBuf,
    fs: Arc<dyn Fs>,
    db_id: DbId,
    readers: Mutex<HashMap<u64, Arc<BlobFileReader>>>,
}

impl std::fmt::Debug for BlobFiles {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BlobFiles").field("dir", &self.dir).finish_non_exhaustive()
    }
}

impl BlobFiles {
    /// The blob files of the database in `dir`.
    pub(crate) fn new(dir: &Path, fs: Arc<dyn Fs>, db_id: DbId) -> BlobFiles {
        BlobFiles { dir: dir.to_path_buf(), fs, db_id, readers: Mutex::new(HashMap::new()) }
    }

    /// The reader of blob file `number`, opened (header checked) on first use.
    pub(crate) fn reader(&self, number: u64) -> Result<Arc<BlobFileReader>> {
        if let Some(r) = self.readers.lock().get(&number) {
            return Ok(r.clone());
        }
        let path = filenames::blob(&self.dir, number);
        let file = self.fs.open(&path, ReadHints::default())?;
        let r = Arc::new(BlobFileReader::open(file, number, Some(&self.db_id))?);
        self.readers.lock().insert(number, r.clone());
        Ok(r)
    }

    /// Reads the value the blob index `raw` (a table entry's value, stored at `location`) names for `key` into
    /// `out`. An index that does not decode is `Corruption` at `location`; a bad record, at the blob file.
    pub(crate) fn resolve(
        &self,
        key: &[u8],
        raw: &[u8],
        location: Option<(&Path, u64)>,
        out: &mut Vec<u8>,
    ) -> Result<()> {
        let index = decode_index(raw, location)?;
        self.reader(index.file_number)?.read(key, &index, out)
    }

    /// [`BlobFiles::resolve`] for a compaction: with `readahead > 0`, through a read-ahead window per blob
    /// file (`blob_compaction_readahead_size`), for references met in key order, so largely in file order.
    pub(crate) fn resolve_ahead(
        &self,
        key: &[u8],
        raw: &[u8],
        out: &mut Vec<u8>,
        windows: &mut HashMap<u64, ReadWindow>,
        readahead: u64,
    ) -> Result<()> {
        let index = decode_index(raw, None)?;
        let reader = self.reader(index.file_number)?;
        if readahead == 0 {
            return reader.read(key, &index, out);
        }
        let window = windows.entry(index.file_number).or_default();
        reader.read_ahead(key, &index, out, window, readahead)
    }

    /// Forgets the reader of a deleted file.
    pub(crate) fn evict(&self, number: u64) {
        self.readers.lock().remove(&number);
    }
}

/// Checks the blob options (called by [`crate::Options::validate`]).
pub(crate) fn validate_options(o: &crate::Options) -> Result<()> {
    let bad = |m: String| Err(Error::InvalidArgument(m));
    if o.blob_compaction_readahead_size > 1 << 30 {
        return bad(format!(
            "blob_compaction_readahead_size must be at most 2^30, got {}",
            o.blob_compaction_readahead_size
        ));
    }
    if !(1024..=1 << 40).contains(&o.blob_file_size) {
        return bad(format!("blob_file_size must be in 1024..=2^40, got {}", o.blob_file_size));
    }
    if o.min_blob_size > shaledb_format::blob::MAX_BLOB_LEN {
        return bad(format!("min_blob_size must be at most 2^32, got {}", o.min_blob_size));
    }
    for (name, v) in [
        ("blob_garbage_collection_age_cutoff", o.blob_garbage_collection_age_cutoff),
        ("blob_garbage_collection_force_threshold", o.blob_garbage_collection_force_threshold),
    ] {
        if !(0.0..=1.0).contains(&v) {
            return bad(format!("{name} must be in 0..=1, got {v}"));
        }
    }
    Ok(())
}

/// The run settings of a flush (`gc_below` 0) or a compaction (`gc_below` from [`gc_cutoff`]).
pub(crate) fn config<'a>(opts: &crate::Options, files: &'a BlobFiles, dir: &'a Path, gc_below: u64) -> BlobConfig<'a> {
    BlobConfig {
        files,
        dir,
        db_id: files.db_id,
        enable: opts.enable_blob_files,
        min_blob_size: opts.min_blob_size,
        blob_file_size: opts.blob_file_size,
        compression: opts.blob_compression_type,
        gc_below,
        readahead: opts.blob_compaction_readahead_size,
    }
}

/// Garbage collection's cutoff in `version`: the blob files numbered below it are the oldest
/// `blob_garbage_collection_age_cutoff` fraction of the live ones (RocksDB rounds the count down); 0 when
/// collection is off.
pub(crate) fn gc_cutoff(opts: &crate::Options, version: &crate::version::Version) -> u64 {
    if !opts.enable_blob_garbage_collection {
        return 0;
    }
    let n = version.blob_files.len();
    let old = ((n as f64) * opts.blob_garbage_collection_age_cutoff) as usize;
    match version.blob_files.keys().nth(old) {
        Some(&first_young) => first_young,
        // Every file is old: the cutoff is past the newest.
        None => version.blob_files.keys().next_back().map_or(0, |&n| n + 1),
    }
}

/// Reads every live blob file of `v` whole: each record's checksum, the footer, and the counts against the
/// MANIFEST's addition.
pub(crate) fn verify_files(files: &BlobFiles, v: &crate::version::Version) -> Result<()> {
    for m in v.blob_files.values() {
        let a = m.addition;
        let r = files.reader(a.number)?;
        let s = r.verify()?;
        if (s.record_count, s.record_bytes, s.file_size) != (a.record_count, a.record_bytes, a.file_size) {
            return Err(Error::corruption(
                r.path(),
                0,
                format!(
                    "blob file holds {} records of {} bytes in {} bytes; the MANIFEST records {} of {} in {}",
                    s.record_count, s.record_bytes, s.file_size, a.record_count, a.record_bytes, a.file_size
                ),
            ));
        }
    }
    Ok(())
}

/// The blob files of version `v`: how many, their bytes on disk, and the bytes of those no table references.
pub(crate) fn totals(v: &crate::version::Version) -> (u64, u64, u64) {
    let files = v.blob_files.values();
    let (bytes, garbage) = files.fold((0, 0), |(b, g), m| (b + m.addition.file_size, g + m.garbage_bytes));
    (v.blob_files.len() as u64, bytes, garbage)
}

/// The blob integer properties of [`crate::Db::property_int`] (RocksDB's names without `rocksdb.`).
pub(crate) fn int_property(v: &crate::version::Version, name: &str) -> Option<u64> {
    let (count, bytes, garbage) = totals(v);
    match name {
        "num-blob-files" => Some(count),
        "live-blob-file-size" => Some(bytes),
        "live-blob-file-garbage-size" => Some(garbage),
        _ => None,
    }
}

/// Decodes a blob index stored at `location` (`None`: not from a table, which never happens for a valid one).
pub(crate) fn decode_index(raw: &[u8], location: Option<(&Path, u64)>) -> Result<BlobIndex> {
    BlobIndex::decode(raw).ok_or_else(|| {
        let what = format!("undecodable blob index of {} bytes", raw.len());
        match location {
            Some((file, offset)) => Error::corruption(file, offset, what),
            None => Error::corruption(crate::lookup::MEMTABLE, 0, what),
        }
    })
}

#[cfg(test)]
mod tests;
