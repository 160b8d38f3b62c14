//! The blob side of one flush or compaction run: which values go to blob files, which blob references are
//! relocated by garbage collection, and the garbage the run leaves behind.

use super::{decode_index, BlobFiles};
use crate::identity::DbId;
use shaledb_format::blob::{BlobFileWriter, ReadWindow};
use shaledb_format::compress::CompressionType;
use shaledb_format::edit::{BlobFileAddition, BlobFileGarbage};
use shaledb_format::filenames;
use shaledb_vfs::{Fs, Result, WriteHints};
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

/// How a run treats values and blob references (from [`crate::Options`] and the version the run starts from).
pub(crate) struct BlobConfig<'a> {
    /// Reads the values of blob references that must be resolved or relocated.
    pub files: &'a BlobFiles,
    /// The database directory (new blob files go there).
    pub dir: &'a Path,
    /// Written into each new blob file's header.
    pub db_id: DbId,
    /// `enable_blob_files`: values of at least `min_blob_size` bytes go to blob files.
    pub enable: bool,
    /// `min_blob_size`.
    pub min_blob_size: u64,
    /// `blob_file_size`: a blob file is closed once it reaches this size.
    pub blob_file_size: u64,
    /// `blob_compression_type`.
    pub compression: CompressionType,
    /// Garbage collection: references into blob files numbered below this are relocated (0: none).
    pub gc_below: u64,
    /// `blob_compaction_readahead_size`: blob values the run reads are read through windows this large.
    pub readahead: u64,
}

/// What a run did to blob files: the files it wrote and the garbage it left in older ones.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct BlobOutput {
    /// New blob files, synced.
    pub additions: Vec<BlobFileAddition>,
    /// References the inputs held that the outputs do not keep, per blob file.
    pub garbage: Vec<BlobFileGarbage>,
    /// Bytes of the new blob files.
    pub bytes_written: u64,
    /// References relocated by garbage collection.
    pub relocated: u64,
}

/// How an output version is written.
pub(crate) enum Emit<'b> {
    /// As it is.
    Keep,
    /// As a blob index (kind `0x11`) with these bytes.
    Index(&'b [u8]),
    /// As a plain value with these bytes (a relocated blob below `min_blob_size`, or with blob files off).
    Inline(&'b [u8]),
}

/// The blob state of one run.
pub(crate) struct BlobSink<'a> {
    cfg: &'a BlobConfig<'a>,
    fs: &'a dyn Fs,
    current: Option<BlobFileWriter>,
    created: Vec<PathBuf>,
    out: BlobOutput,
    /// References met in the inputs and kept in the outputs: blob file -> (records, record bytes).
    refs_in: BTreeMap<u64, (u64, u64)>,
    refs_out: BTreeMap<u64, (u64, u64)>,
    index_buf: Vec<u8>,
    value_buf: Vec<u8>,
    /// Read-ahead windows per blob file read (with `readahead`).
    windows: HashMap<u64, ReadWindow>,
}

impl<'a> BlobSink<'a> {
    pub(crate) fn new(cfg: &'a BlobConfig<'a>, fs: &'a dyn Fs) -> BlobSink<'a> {
        BlobSink {
            cfg,
            fs,
            current: None,
            created: Vec::new(),
            out: BlobOutput::default(),
            refs_in: BTreeMap::new(),
            refs_out: BTreeMap::new(),
            index_buf: Vec::new(),
            value_buf: Vec::new(),
            windows: HashMap::new(),
        }
    }

    /// Notes a blob reference of the run's input (a version of `key` with kind `0x11`).
    pub(crate) fn note_input(&mut self, key: &[u8], raw: &[u8]) -> Result<()> {
        let index = decode_index(raw, None)?;
        let e = self.refs_in.entry(index.file_number).or_default();
        e.0 += 1;
        e.1 += index.record_len(key.len());
        Ok(())
    }

    /// Reads the value a blob reference names (for a merge over it or the compaction filter).
    pub(crate) fn resolve(&mut self, key: &[u8], raw: &[u8], out: &mut Vec<u8>) -> Result<()> {
        self.cfg.files.resolve_ahead(key, raw, out, &mut self.windows, self.cfg.readahead)
    }

    /// Decides how a surviving version is written: a large value goes to a blob file, a reference into a
    /// file being collected is relocated, any other reference is kept (and counted as still live).
    pub(crate) fn emit(
        &mut self,
        key: &[u8],
        is_index: bool,
        value: &[u8],
        new_file: &dyn Fn() -> Result<(u64, PathBuf)>,
    ) -> Result<Emit<'_>> {
        if is_index {
            let index = decode_index(value, None)?;
            if index.file_number >= self.cfg.gc_below {
                let e = self.refs_out.entry(index.file_number).or_default();
                e.0 += 1;
                e.1 += index.record_len(key.len());
                return Ok(Emit::Keep);
            }
            let mut v = std::mem::take(&mut self.value_buf);
            self.resolve(key, value, &mut v)?;
            self.out.relocated += 1;
            if !self.wants(&v) {
                self.value_buf = v;
                return Ok(Emit::Inline(&self.value_buf));
            }
            self.store(key, &v, new_file)?;
            self.value_buf = v;
            return Ok(Emit::Index(&self.index_buf));
        }
        if !self.wants(value) {
            return Ok(Emit::Keep);
        }
        self.store(key, value, new_file)?;
        Ok(Emit::Index(&self.index_buf))
    }

    fn wants(&self, value: &[u8]) -> bool {
        self.cfg.enable && value.len() as u64 >= self.cfg.min_blob_size
    }

    /// Appends `value` to the current blob file (starting one when none is open), leaving its index in
    /// `index_buf`; closes the file once it reaches `blob_file_size`.
    fn store(&mut self, key: &[u8], value: &[u8], new_file: &dyn Fn() -> Result<(u64, PathBuf)>) -> Result<()> {
        if self.current.is_none() {
            let (number, _) = new_file()?;
            let path = filenames::blob(self.cfg.dir, number);
            self.created.push(path.clone());
            let file = self.fs.create_with(&path, WriteHints::default())?;
            self.current = Some(BlobFileWriter::new(file, number, self.cfg.compression, &self.cfg.db_id)?);
        }
        let Some(w) = self.current.as_mut() else { return Ok(()) };
        let index = w.add(key, value)?;
        self.index_buf.clear();
        index.encode(&mut self.index_buf);
        if w.file_size() >= self.cfg.blob_file_size {
            self.finish_current()?;
        }
        Ok(())
    }

    fn finish_current(&mut self) -> Result<()> {
        let Some(w) = self.current.take() else { return Ok(()) };
        let number = w.number();
        let s = w.finish()?;
        self.out.bytes_written += s.file_size;
        self.out.additions.push(BlobFileAddition {
            number,
            record_count: s.record_count,
            record_bytes: s.record_bytes,
            file_size: s.file_size,
        });
        Ok(())
    }

    /// Closes (and syncs) the open blob file and returns what the run did.
    pub(crate) fn finish(&mut self) -> Result<BlobOutput> {
        self.finish_current()?;
        for (&number, &(count, bytes)) in &self.refs_in {
            let (kept_count, kept_bytes) = self.refs_out.get(&number).copied().unwrap_or_default();
            let (record_count, record_bytes) = (count.saturating_sub(kept_count), bytes.saturating_sub(kept_bytes));
            if record_count > 0 {
                self.out.garbage.push(BlobFileGarbage { number, record_count, record_bytes });
            }
        }
        Ok(std::mem::take(&mut self.out))
    }

    /// Abandons the run: removes every blob file it created (errors ignored: such files are in no version,
    /// so the next open removes them as leftovers).
    pub(crate) fn discard(&mut self) {
        self.current = None;
        for path in self.created.drain(..) {
            let _ = self.fs.remove(&path);
        }
    }
}
