//! The framing of every value the raft store keeps in the engine (docs/format/raft-log.md).
//!
//! ```text
//! record   := version:u8 kind:u8 length:fixed32 payload:byte{length} crc:fixed32
//! version  := 0x01                                  ; FROZEN; bumped on any change of this grammar or a payload
//! kind     := 0x01 entry | 0x02 vote | 0x03 log_id   ; FROZEN
//!           | 0x04 membership | 0x05 snapshot_meta   ; FROZEN
//! length   := the payload's byte count: at most MAX_PAYLOAD, and exactly the bytes between it and crc
//! payload  := postcard(openraft value of that kind)
//! crc      := crc32c(version kind length payload)
//! ```
//!
//! Integers are little-endian. A record is checked whole (size, version, kind, length, checksum) before its
//! payload is decoded, and the payload must be consumed exactly: any failure is corruption, never a value.

use serde::de::DeserializeOwned;
use serde::Serialize;

/// The format version written in every record.
pub const VERSION: u8 = 1;
/// The largest payload a record may carry (64 MiB): a bigger length is corruption, checked before any use.
pub const MAX_PAYLOAD: usize = 64 << 20;
/// Bytes around the payload: version, kind, length, crc.
pub const OVERHEAD: usize = 1 + 1 + 4 + 4;

/// What a record holds. FROZEN: the values are on disk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Kind {
    /// A log entry.
    Entry = 0x01,
    /// The vote.
    Vote = 0x02,
    /// A log id (committed, purged, applied markers).
    LogId = 0x03,
    /// The state machine's last membership.
    Membership = 0x04,
    /// A snapshot's metadata.
    SnapshotMeta = 0x05,
}

/// Encodes `value` as one record of `kind`. Fails only when the payload exceeds [`MAX_PAYLOAD`] or serde
/// refuses the value.
pub fn encode<T: Serialize>(kind: Kind, value: &T) -> Result<Vec<u8>, String> {
    let payload = postcard::to_stdvec(value).map_err(|e| format!("encoding a {kind:?} record: {e}"))?;
    if payload.len() > MAX_PAYLOAD {
        return Err(format!("a {kind:?} record of {} bytes exceeds the limit of {MAX_PAYLOAD}", payload.len()));
    }
    let mut out = Vec::with_capacity(payload.len() + OVERHEAD);
    out.push(VERSION);
    out.push(kind as u8);
    out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    out.extend_from_slice(&payload);
    let crc = crc32c::crc32c(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    Ok(out)
}

/// Decodes a record that must be of `kind`. The error says what was wrong, for the caller to name where.
pub fn decode<T: DeserializeOwned>(kind: Kind, data: &[u8]) -> Result<T, String> {
    if data.len() < OVERHEAD {
        return Err(format!("record of {} bytes is shorter than its {OVERHEAD}-byte frame", data.len()));
    }
    let (body, crc) = data.split_at(data.len() - 4);
    let stored = u32::from_le_bytes([crc[0], crc[1], crc[2], crc[3]]);
    let (version, found_kind) = (body[0], body[1]);
    if version != VERSION {
        return Err(format!("record version {version} is not the supported {VERSION}"));
    }
    let length = u32::from_le_bytes([body[2], body[3], body[4], body[5]]) as usize;
    if length > MAX_PAYLOAD {
        return Err(format!("record length {length} exceeds the limit of {MAX_PAYLOAD}"));
    }
    if length != body.len() - 6 {
        return Err(format!("record length {length} does not match the {} payload bytes present", body.len() - 6));
    }
    let actual = crc32c::crc32c(body);
    if actual != stored {
        return Err(format!("record checksum mismatch: stored {stored:#010x}, computed {actual:#010x}"));
    }
    if found_kind != kind as u8 {
        return Err(format!("record kind {found_kind:#04x} where a {kind:?} ({:#04x}) was expected", kind as u8));
    }
    let payload = &body[6..];
    let (value, rest) =
        postcard::take_from_bytes::<T>(payload).map_err(|e| format!("{kind:?} payload does not decode: {e}"))?;
    if !rest.is_empty() {
        return Err(format!("{kind:?} payload has {} bytes left over after the value", rest.len()));
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record() -> Vec<u8> {
        encode(Kind::LogId, &(7u64, 9u64)).unwrap()
    }

    #[test]
    fn round_trip() {
        assert_eq!(decode::<(u64, u64)>(Kind::LogId, &record()).unwrap(), (7, 9));
    }

    #[test]
    fn checksum_mismatch() {
        let mut r = record();
        r[7] ^= 1;
        assert!(decode::<(u64, u64)>(Kind::LogId, &r).unwrap_err().contains("checksum"));
    }

    #[test]
    fn truncated_record() {
        let r = record();
        assert!(decode::<(u64, u64)>(Kind::LogId, &r[..r.len() - 1]).unwrap_err().contains("does not match"));
        assert!(decode::<(u64, u64)>(Kind::LogId, &r[..3]).unwrap_err().contains("shorter"));
    }

    #[test]
    fn bad_version() {
        let mut r = record();
        r[0] = 2;
        assert!(decode::<(u64, u64)>(Kind::LogId, &r).unwrap_err().contains("version 2"));
    }

    #[test]
    fn wrong_kind() {
        assert!(decode::<(u64, u64)>(Kind::Vote, &record()).unwrap_err().contains("kind"));
    }

    #[test]
    fn huge_length_is_refused_before_use() {
        let mut r = record();
        r[2..6].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(decode::<(u64, u64)>(Kind::LogId, &r).unwrap_err().contains("exceeds"));
    }

    #[test]
    fn trailing_payload_bytes() {
        // A valid frame around a payload longer than the value: re-frame with the checksum fixed.
        let mut payload = postcard::to_stdvec(&(7u64, 9u64)).unwrap();
        payload.push(0);
        let mut r = vec![VERSION, Kind::LogId as u8];
        r.extend_from_slice(&(payload.len() as u32).to_le_bytes());
        r.extend_from_slice(&payload);
        let crc = crc32c::crc32c(&r);
        r.extend_from_slice(&crc.to_le_bytes());
        assert!(decode::<(u64, u64)>(Kind::LogId, &r).unwrap_err().contains("left over"));
    }
}
