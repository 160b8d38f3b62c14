//! Bulk loading: [`SstFileWriter`] writes sorted tables outside a database, and
//! [`crate::Db::ingest_external_file`] adds them to one atomically (RocksDB's `SstFileWriter` and
//! `IngestExternalFile`).
//!
//! A file written by [`SstFileWriter`] is a normal ShaleDB table (docs/format/sst.md) whose every entry has
//! sequence number 0, written with the table options an [`crate::Options`] gives its bottommost level
//! (compression, bloom filter, prefix extractor). It carries no database identity and no file number, so any
//! database may ingest it. The ingestion protocol is described on [`crate::Db::ingest_external_file`] and in
//! ARCHITECTURE.md ("The path of an ingestion").
mod writer;

pub use writer::{ExternalSstFileInfo, SstFileWriter};

/// How [`crate::Db::ingest_external_file`] adds files (RocksDB's `IngestExternalFileOptions`).
///
/// RocksDB's `ingest_behind` (place the files below every level, with sequence number 0, for databases
/// opened with `allow_ingest_behind`) is left out: ShaleDB keeps no reserved bottom level for it, so it
/// cannot offer the option's guarantee; `write_global_seqno` is moot (see
/// [`crate::Db::ingest_external_file`]: a global sequence number is written into the entries of the copy).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IngestExternalFileOptions {
    /// Hard link the files into the database directory instead of copying them, and remove the originals
    /// once the ingestion succeeded (RocksDB's `move_files`). A file that needs a global sequence number is
    /// rewritten, not linked. Default false.
    pub move_files: bool,
    /// With `move_files`, copy a file whose hard link fails (another file system) instead of failing
    /// (RocksDB's `failed_move_fall_back_to_copy`). Default true.
    pub failed_move_fall_back_to_copy: bool,
    /// While a snapshot is live, give the ingested files a global sequence number newer than every write, so
    /// that reads at the snapshot (taken before the ingestion) never see them (RocksDB's
    /// `snapshot_consistency`). Default true.
    pub snapshot_consistency: bool,
    /// Allow a global sequence number at all: without it, an ingestion that needs one (its files overlap
    /// data of the database, or a snapshot is live with `snapshot_consistency`) fails with
    /// `InvalidArgument` and changes nothing (RocksDB's `allow_global_seqno`). Default true.
    pub allow_global_seqno: bool,
    /// When a file's key range overlaps a memtable, flush the memtables first, holding writes meanwhile;
    /// without it, such an ingestion fails with `InvalidArgument` (RocksDB's `allow_blocking_flush`).
    /// Default true.
    pub allow_blocking_flush: bool,
    /// Read every block of every file and check its checksum before anything is changed (RocksDB's
    /// `verify_checksums_before_ingest`). Without it only the footer, index, properties and the first and
    /// last entries are read. Default false.
    pub verify_checksums_before_ingest: bool,
}

impl Default for IngestExternalFileOptions {
    fn default() -> Self {
        IngestExternalFileOptions {
            move_files: false,
            failed_move_fall_back_to_copy: true,
            snapshot_consistency: true,
            allow_global_seqno: true,
            allow_blocking_flush: true,
            verify_checksums_before_ingest: false,
        }
    }
}
