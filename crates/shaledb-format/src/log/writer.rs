//! Writing framed records: fragments cut at block boundaries, trailers, and a writer poisoned by its first
//! error (the grammar is in `log.rs`).

use super::{record_crc, RecordType, BLOCK_SIZE, HEADER_LEN};
use shaledb_vfs::{Error, Result, SyncHandle, WritableFile};
use std::path::Path;

/// Appends framed records to a file.
///
/// After an I/O error the file may hold part of a record, and the file's user-space buffer may still hold bytes
/// the failed call did not write. The writer is then poisoned: every later call returns the first error and
/// never touches the file again, so a record whose write failed is never written (or synced) later by a retry,
/// a flush or a close (issue 9: a put that had returned an error became durable at close, and the rewritten
/// buffer left a checksum error mid-file). A reader reports what the failed call left as damage at the tail.
pub struct Writer {
    file: Box<dyn WritableFile>,
    /// The first error, once one happened.
    failed: Option<Error>,
}

impl Writer {
    /// Wraps `file`. When the file already holds bytes, new records continue its block layout.
    pub fn new(file: Box<dyn WritableFile>) -> Writer {
        Writer { file, failed: None }
    }

    /// True once a call has failed: the writer will not write again.
    pub fn is_poisoned(&self) -> bool {
        self.failed.is_some()
    }

    /// Runs `op` on the file unless the writer is poisoned; poisons it when `op` fails.
    fn guarded<T>(&mut self, op: impl FnOnce(&mut Self) -> Result<T>) -> Result<T> {
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        op(self).inspect_err(|e| self.failed = Some(e.clone()))
    }

    /// Appends `payload` as one logical record (fragmented as needed). Does not flush.
    pub fn add_record(&mut self, payload: &[u8]) -> Result<()> {
        self.guarded(|w| w.add_record_unguarded(payload))
    }

    fn add_record_unguarded(&mut self, payload: &[u8]) -> Result<()> {
        // Derived from the file length rather than tracked, so that it cannot drift from what the file holds.
        let mut block_offset = (self.file.len() % BLOCK_SIZE as u64) as usize;
        let mut left = payload;
        let mut first = true;
        loop {
            let room = BLOCK_SIZE - block_offset;
            if room < HEADER_LEN {
                const ZEROS: [u8; HEADER_LEN] = [0; HEADER_LEN];
                self.file.append(&ZEROS[..room])?;
                block_offset = 0;
            }
            let avail = BLOCK_SIZE - block_offset - HEADER_LEN;
            let n = left.len().min(avail);
            let (frag, rest) = left.split_at(n);
            let last = rest.is_empty();
            let typ = match (first, last) {
                (true, true) => RecordType::Full,
                (true, false) => RecordType::First,
                (false, false) => RecordType::Middle,
                (false, true) => RecordType::Last,
            };
            self.emit(typ, frag)?;
            block_offset += HEADER_LEN + n;
            left = rest;
            first = false;
            if last {
                return Ok(());
            }
        }
    }

    /// REQUIRES: `payload.len()` fits in what is left of the current block (so in 16 bits).
    fn emit(&mut self, typ: RecordType, payload: &[u8]) -> Result<()> {
        let mut header = [0u8; HEADER_LEN];
        header[..4].copy_from_slice(&record_crc(typ as u8, payload).to_le_bytes());
        header[4..6].copy_from_slice(&(payload.len() as u16).to_le_bytes());
        header[6] = typ as u8;
        self.file.append(&header)?;
        self.file.append(payload)
    }

    /// Hands every appended byte to the operating system (survives a process kill).
    pub fn flush(&mut self) -> Result<()> {
        self.guarded(|w| w.file.flush())
    }

    /// Flushes, then makes the file contents durable (`fdatasync`).
    pub fn sync(&mut self) -> Result<()> {
        self.guarded(|w| w.file.sync())
    }

    /// A handle that fdatasyncs the file without this writer ([`WritableFile::sync_handle`]), covering the bytes
    /// flushed before its `sync` begins: [`Writer::flush`] first. A poisoned writer gives its error: what it
    /// left in the file must not be made durable.
    pub fn sync_handle(&self) -> Result<Box<dyn SyncHandle>> {
        match &self.failed {
            Some(e) => Err(e.clone()),
            None => self.file.sync_handle(),
        }
    }

    /// Bytes written to the file so far, framing included.
    pub fn len(&self) -> u64 {
        self.file.len()
    }

    /// True when the file holds no bytes.
    pub fn is_empty(&self) -> bool {
        self.file.len() == 0
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        self.file.path()
    }
}
