//! [`SstFileWriter`]: RocksDB's `SstFileWriter`, writing a ShaleDB table outside any database.

use crate::options::Options;
use shaledb_format::ikey::{self, ValueKind};
use shaledb_format::table::{TableBuilder, TableOptions};
use shaledb_vfs::{Error, Fs, Result};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// What [`SstFileWriter::finish`] wrote (RocksDB's `ExternalSstFileInfo`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExternalSstFileInfo {
    /// The file written.
    pub path: PathBuf,
    /// Its smallest user key.
    pub smallest_key: Vec<u8>,
    /// Its largest user key.
    pub largest_key: Vec<u8>,
    /// Entries of every kind.
    pub num_entries: u64,
    /// Size of the file in bytes.
    pub file_size: u64,
}

/// Writes a sorted table for [`crate::Db::ingest_external_file`].
///
/// Keys must be added in strictly increasing bytewise order (each user key once); a key out of order is
/// `InvalidArgument` and leaves the writer as it was. Every entry is stored with sequence number 0. The table
/// options are those `Options` give the bottommost level: `bottommost_compression` (else the last
/// `compression_per_level`, else `compression`), `bloom_bits_per_key`, `prefix_extractor`,
/// `whole_key_filtering`, `block_size`, `block_restart_interval`.
///
/// ```
/// use shaledb::ingest::{IngestExternalFileOptions, SstFileWriter};
/// use shaledb::{Db, Options};
///
/// # let dir = tempfile::tempdir().unwrap();
/// let sst = dir.path().join("bulk.sst");
/// let mut w = SstFileWriter::create(&Options::default());
/// w.open(&sst)?;
/// w.put("a", "1")?;
/// w.put("b", "2")?;
/// let info = w.finish()?;
/// assert_eq!((info.num_entries, &info.largest_key[..]), (2, &b"b"[..]));
///
/// let db = Db::open(dir.path().join("db"), Options::default())?;
/// db.ingest_external_file(&[&sst], &IngestExternalFileOptions::default())?;
/// assert_eq!(db.get("b")?, Some(b"2".to_vec()));
/// # Ok::<(), shaledb::Error>(())
/// ```
pub struct SstFileWriter {
    fs: Arc<dyn Fs>,
    table_options: TableOptions,
    open: Option<Open>,
}

/// The file being written.
struct Open {
    path: PathBuf,
    builder: TableBuilder,
    smallest: Option<Vec<u8>>,
    last: Vec<u8>,
    ikey: Vec<u8>,
}

impl std::fmt::Debug for SstFileWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SstFileWriter").field("path", &self.open.as_ref().map(|o| &o.path)).finish_non_exhaustive()
    }
}

impl SstFileWriter {
    /// A writer using `opts`' table options and file system (see the type's docs).
    pub fn create(opts: &Options) -> SstFileWriter {
        let last = opts.num_levels.saturating_sub(1);
        let mut table_options = opts.table_options(Default::default(), last, true);
        // Not written by a database: no identity, no file number, so any database may take it.
        table_options.db_id = None;
        table_options.file_number = None;
        SstFileWriter { fs: opts.fs.clone(), table_options, open: None }
    }

    /// Starts writing a new table at `path` (created, or truncated if it exists). A table still open is
    /// abandoned (its file stays, unfinished).
    pub fn open(&mut self, path: impl AsRef<Path>) -> Result<()> {
        let path = path.as_ref().to_path_buf();
        let file = self.fs.create(&path)?;
        let builder = TableBuilder::new(self.table_options.clone(), file);
        self.open = Some(Open { path, builder, smallest: None, last: Vec::new(), ikey: Vec::new() });
        Ok(())
    }

    /// Adds `key` = `value`.
    pub fn put(&mut self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> Result<()> {
        self.add(key.as_ref(), ValueKind::Value, value.as_ref())
    }

    /// Adds a deletion of `key` (it hides older values of the key when ingested over them).
    pub fn delete(&mut self, key: impl AsRef<[u8]>) -> Result<()> {
        self.add(key.as_ref(), ValueKind::Deletion, &[])
    }

    /// Adds a merge operand for `key`. The database ingesting the file needs a merge operator to read it.
    pub fn merge(&mut self, key: impl AsRef<[u8]>, operand: impl AsRef<[u8]>) -> Result<()> {
        self.add(key.as_ref(), ValueKind::Merge, operand.as_ref())
    }

    /// Entries added so far to the open table (0 when none is open).
    pub fn num_entries(&self) -> u64 {
        self.open.as_ref().map_or(0, |o| o.builder.num_entries())
    }

    fn add(&mut self, key: &[u8], kind: ValueKind, value: &[u8]) -> Result<()> {
        let Some(o) = self.open.as_mut() else {
            return Err(Error::InvalidArgument("SstFileWriter: no file open (call open first)".into()));
        };
        crate::options::limits::check_len(key, value)?;
        if o.smallest.is_some() && key <= &o.last[..] {
            return Err(Error::InvalidArgument(format!(
                "SstFileWriter: keys must be added in strictly increasing order: {} after {}",
                show(key),
                show(&o.last)
            )));
        }
        o.ikey.clear();
        ikey::append_internal_key(&mut o.ikey, key, 0, kind);
        o.builder.add(&o.ikey, value)?;
        if o.smallest.is_none() {
            o.smallest = Some(key.to_vec());
        }
        o.last.clear();
        o.last.extend_from_slice(key);
        Ok(())
    }

    /// Writes the rest of the table, syncs it and returns what it holds. A table without entries is
    /// `InvalidArgument`, as in RocksDB (its file is left unfinished); so is a call without an open file.
    pub fn finish(&mut self) -> Result<ExternalSstFileInfo> {
        let Some(o) = self.open.take() else {
            return Err(Error::InvalidArgument("SstFileWriter: no file open (call open first)".into()));
        };
        let Some(smallest) = o.smallest else {
            o.builder.abandon();
            return Err(Error::InvalidArgument(format!(
                "SstFileWriter: cannot create a table without entries ({})",
                o.path.display()
            )));
        };
        let props = o.builder.finish()?;
        Ok(ExternalSstFileInfo {
            path: o.path,
            smallest_key: smallest,
            largest_key: o.last,
            num_entries: props.num_entries,
            file_size: props.file_size,
        })
    }
}

/// A key for an error message: text when printable, else hex.
fn show(key: &[u8]) -> String {
    if key.iter().all(|b| b.is_ascii_graphic() || *b == b' ') {
        format!("{:?}", String::from_utf8_lossy(key))
    } else {
        key.iter().map(|b| format!("{b:02x}")).collect::<String>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use shaledb_format::iter::InternalIterator;
    use shaledb_format::table::{Table, TableReadOptions};
    use shaledb_vfs::ReadHints;

    fn writer(dir: &Path) -> (SstFileWriter, PathBuf) {
        let path = dir.join("x.sst");
        let mut w = SstFileWriter::create(&Options::default());
        w.open(&path).unwrap();
        (w, path)
    }

    #[test]
    fn keys_out_of_order_or_repeated_are_refused_and_leave_the_writer_usable() {
        let dir = tempfile::tempdir().unwrap();
        let (mut w, _) = writer(dir.path());
        w.put("b", "1").unwrap();
        for bad in ["a", "b"] {
            let e = w.put(bad, "x").unwrap_err();
            assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
            assert!(e.to_string().contains("strictly increasing"), "{e}");
        }
        assert!(matches!(w.delete("a"), Err(Error::InvalidArgument(_))));
        w.put("c", "3").unwrap();
        let info = w.finish().unwrap();
        assert_eq!((info.smallest_key, info.largest_key, info.num_entries), (b"b".to_vec(), b"c".to_vec(), 2));
    }

    #[test]
    fn finish_without_entries_or_without_a_file_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let (mut w, _) = writer(dir.path());
        assert!(matches!(w.finish(), Err(Error::InvalidArgument(m)) if m.contains("without entries")));
        assert!(matches!(w.finish(), Err(Error::InvalidArgument(m)) if m.contains("no file open")));
        assert!(matches!(w.put("k", "v"), Err(Error::InvalidArgument(_))));
    }

    #[test]
    fn a_finished_file_reads_back_as_a_table_with_every_entry_at_sequence_zero() {
        let dir = tempfile::tempdir().unwrap();
        let (mut w, path) = writer(dir.path());
        w.put("a", "1").unwrap();
        w.delete("b").unwrap();
        w.merge("c", "+").unwrap();
        for i in 0..500u32 {
            w.put(format!("d{i:05}"), vec![b'v'; 100]).unwrap();
        }
        let info = w.finish().unwrap();
        assert_eq!(info.path, path);
        assert_eq!(info.num_entries, 503);
        assert_eq!(info.file_size, std::fs::metadata(&path).unwrap().len());
        assert_eq!((&info.smallest_key[..], &info.largest_key[..]), (&b"a"[..], &b"d00499"[..]));
        let fs = shaledb_vfs::default_fs();
        let t = Table::open(fs.open(&path, ReadHints::default()).unwrap(), &TableReadOptions::default()).unwrap();
        t.verify().unwrap();
        let p = t.properties();
        assert_eq!((p.num_entries, p.num_deletions, p.num_merges), (503, 1, 1));
        assert_eq!((p.smallest_seq, p.largest_seq, p.db_id, p.file_number), (0, 0, None, None));
        let mut it = t.iter(true, false);
        it.seek_to_first();
        let mut got = Vec::new();
        while it.valid() {
            let k = ikey::parse(it.key()).unwrap();
            got.push((k.user_key.to_vec(), k.seq, k.kind, it.value().to_vec()));
            it.next();
        }
        it.status().unwrap();
        assert_eq!(got.len(), 503);
        assert_eq!(got[0], (b"a".to_vec(), 0, ValueKind::Value, b"1".to_vec()));
        assert_eq!(got[1], (b"b".to_vec(), 0, ValueKind::Deletion, Vec::new()));
        assert_eq!(got[2], (b"c".to_vec(), 0, ValueKind::Merge, b"+".to_vec()));
        assert!(got[3..]
            .iter()
            .all(|(k, s, kind, v)| k.starts_with(b"d") && *s == 0 && *kind == ValueKind::Value && v.len() == 100));
    }

    #[test]
    fn the_bottommost_compression_and_the_prefix_extractor_of_the_options_are_used() {
        let dir = tempfile::tempdir().unwrap();
        let opts = Options {
            compression: crate::CompressionType::None,
            bottommost_compression: Some(crate::CompressionType::Zstd),
            prefix_extractor: Some(crate::PrefixExtractor::Fixed(2)),
            ..Options::default()
        };
        let path = dir.path().join("y.sst");
        let mut w = SstFileWriter::create(&opts);
        w.open(&path).unwrap();
        for i in 0..100u32 {
            w.put(format!("k{i:04}"), "v".repeat(200)).unwrap();
        }
        w.finish().unwrap();
        let fs = shaledb_vfs::default_fs();
        let t = Table::open(fs.open(&path, ReadHints::default()).unwrap(), &TableReadOptions::default()).unwrap();
        assert_eq!(t.properties().compression, crate::CompressionType::Zstd);
        assert_eq!(t.properties().prefix_extractor, Some(crate::PrefixExtractor::Fixed(2)));
    }
}
