//! Reading a write-ahead log: its records ([`crate::log`] framing), each decoded as a write batch
//! ([`BatchRep`]). The engine's recovery, `shaledb dump` and `shaledb verify` read WALs through [`next_batch`].

use crate::batch::BatchRep;
use crate::log::{Damage, LogRead, Reader};
use crate::Error;

/// What [`next_batch`] read.
#[derive(Debug)]
pub enum BatchRead {
    /// A write batch.
    Batch {
        /// File offset of the batch's record.
        offset: u64,
        /// The record's payload size in bytes.
        size: usize,
        /// The batch.
        batch: BatchRep,
    },
    /// An intact record (its checksum passed) that is not a write batch.
    Undecodable {
        /// File offset of the record.
        offset: u64,
        /// Why it does not decode, naming the WAL and `offset`.
        error: Error,
    },
    /// Bytes that do not form a record. Reading may continue.
    Damage(Damage),
    /// The end of the WAL.
    Eof,
}

/// Reads the next record of the WAL `reader` reads, and decodes it.
pub fn next_batch(reader: &mut Reader) -> BatchRead {
    match reader.next() {
        LogRead::Eof => BatchRead::Eof,
        LogRead::Damage(d) => BatchRead::Damage(d),
        LogRead::Record { offset, data } => {
            let size = data.len();
            match BatchRep::from_bytes(data) {
                Ok(batch) => BatchRead::Batch { offset, size, batch },
                Err(e) => BatchRead::Undecodable { offset, error: e.in_file(reader.path(), offset) },
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::Writer;
    use shaledb_vfs::{Fs, MemFs};
    use std::path::Path;

    #[test]
    fn next_batch_decodes_records_and_names_the_ones_that_do_not_decode() {
        let (fs, path) = (MemFs::new(), Path::new("/000007.log"));
        let mut w = Writer::new(fs.create(path).unwrap());
        let mut batch = crate::batch::BatchRep::new();
        batch.put(b"k", b"v");
        batch.set_sequence(5);
        w.add_record(batch.data()).unwrap();
        w.add_record(b"short").unwrap();
        w.flush().unwrap();
        let mut r = Reader::new(fs.read_file(path).unwrap(), path.to_path_buf());
        match next_batch(&mut r) {
            BatchRead::Batch { offset: 0, size, batch: b } => {
                assert_eq!((size, b.sequence(), b.count()), (batch.data().len(), 5, 1));
            }
            other => panic!("{other:?}"),
        }
        match next_batch(&mut r) {
            BatchRead::Undecodable { offset, error: Error::Corruption { file, offset: at, .. } } => {
                assert!(offset > 0 && at == offset && file == path, "{offset} {at} {file:?}");
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(next_batch(&mut r), BatchRead::Eof));
    }
}
