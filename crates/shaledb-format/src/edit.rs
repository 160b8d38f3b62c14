//! Version edits: the records of the MANIFEST.
//!
//! (The grammar and codec are being written; the data types below are fixed.)

use crate::ikey;

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
