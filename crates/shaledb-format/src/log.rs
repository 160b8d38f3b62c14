//! Record framing shared by the WAL and the MANIFEST.
//!
//! ```text
//! file     := block*                                ; every block but the last is exactly 32768 bytes
//! block    := record* trailer?
//! record   := checksum:fixed32 length:fixed16 type:u8 payload:byte{length}
//! checksum := mask(crc32c(type payload))            ; masked as in crc.rs; the length is not covered
//! fixed16  := 2 bytes little-endian
//! type     := 0x01 FULL | 0x02 FIRST | 0x03 MIDDLE | 0x04 LAST   ; FROZEN; 0x00 reserved, never written
//! trailer  := 0x00{1..6}                            ; a block tail too short to hold a 7-byte header
//! logical  := FULL | FIRST MIDDLE* LAST             ; one payload, fragments in consecutive records
//! ```
//!
//! A record never crosses a block boundary: a payload that does not fit in what is left of the block is cut into
//! fragments. A header is written whenever at least 7 bytes are left, so a fragment may carry no payload bytes.
//! Because type 0 is never written, a header of seven zero bytes marks zero-filled (preallocated or lost) space.
//!
//! Reading reports damage precisely rather than skipping it silently, because the engine's WAL recovery modes
//! (RocksDB's PointInTime, TolerateCorruptedTailRecords, AbsoluteConsistency, SkipAnyCorruptedRecords) decide
//! from the report whether the damage is an interrupted write at the tail or a hole in the middle of the log.

mod reader;
mod writer;

pub use reader::{Damage, DamageKind, LogRead, Reader};
pub use writer::Writer;

use crate::crc;

/// Size of a block; records never cross a block boundary.
pub const BLOCK_SIZE: usize = 32 * 1024;

/// Size of a record header: checksum (4), length (2), type (1).
pub const HEADER_LEN: usize = 7;

/// The type byte of a physical record. The discriminants are an on-disk format: FROZEN.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum RecordType {
    /// A whole payload in one record.
    Full = 1,
    /// The first fragment of a payload.
    First = 2,
    /// An inner fragment.
    Middle = 3,
    /// The final fragment.
    Last = 4,
}

impl RecordType {
    /// Decodes a type byte (`None` for 0, which is reserved, and for unknown values).
    pub fn from_u8(b: u8) -> Option<RecordType> {
        match b {
            1 => Some(RecordType::Full),
            2 => Some(RecordType::First),
            3 => Some(RecordType::Middle),
            4 => Some(RecordType::Last),
            _ => None,
        }
    }
}

/// The checksum stored in a header for `typ` and `payload`.
fn record_crc(typ: u8, payload: &[u8]) -> u32 {
    crc::mask(crc::extend(crc::value(&[typ]), payload))
}

#[cfg(test)]
mod tests;
