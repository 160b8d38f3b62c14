//! The framing of every value the raft store keeps in the engine (docs/format/raft-log.md).
//!
//! ```text
//! record   := version:u8 kind:u8 length:fixed32 payload:byte{length} crc:fixed32
//! version  := 0x02                                  ; FROZEN; bumped on any change of this grammar or a payload
//!           | 0x01                                  ; read only: an entry whose proposal is a batch alone
//! kind     := 0x01 entry | 0x02 vote | 0x03 log_id   ; FROZEN
//!           | 0x04 membership | 0x05 snapshot_meta   ; FROZEN
//! length   := the payload's byte count: at most MAX_PAYLOAD, and exactly the bytes between it and crc
//! payload  := postcard(openraft value of that kind)
//! crc      := crc32c(version kind length payload)
//! ```
//!
//! Integers are little-endian. A record is checked whole (size, version, kind, length, checksum) before its
//! payload is decoded, and the payload must be consumed exactly: any failure is corruption, never a value.
//!
//! Version 2 added the proposal's `tables` (ingested SSTs). Every other payload is the same in both versions,
//! so version 1 records are read as they are, and a version 1 entry's proposal as one with no tables
//! ([`decode_entry`]): a log written before the change opens unchanged.

use serde::de::DeserializeOwned;
use serde::Serialize;

/// The format version written in every record.
pub const VERSION: u8 = 2;
/// The version before [`Proposal::tables`] existed: still read.
pub const VERSION_1: u8 = 1;
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

/// Checks a record's frame (size, version, length, checksum, kind) and returns its version and payload.
fn check_frame(kind: Kind, data: &[u8]) -> Result<(u8, &[u8]), String> {
    if data.len() < OVERHEAD {
        return Err(format!("record of {} bytes is shorter than its {OVERHEAD}-byte frame", data.len()));
    }
    let (body, crc) = data.split_at(data.len() - 4);
    let stored = u32::from_le_bytes([crc[0], crc[1], crc[2], crc[3]]);
    let (version, found_kind) = (body[0], body[1]);
    if version != VERSION && version != VERSION_1 {
        return Err(format!("record version {version} is not a supported one ({VERSION_1} or {VERSION})"));
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
    Ok((version, &body[6..]))
}

fn from_payload<T: DeserializeOwned>(kind: Kind, payload: &[u8]) -> Result<T, String> {
    let (value, rest) =
        postcard::take_from_bytes::<T>(payload).map_err(|e| format!("{kind:?} payload does not decode: {e}"))?;
    if !rest.is_empty() {
        return Err(format!("{kind:?} payload has {} bytes left over after the value", rest.len()));
    }
    Ok(value)
}

/// Decodes a record that must be of `kind` (not [`Kind::Entry`]: [`decode_entry`]). The error says what was
/// wrong, for the caller to name where.
pub fn decode<T: DeserializeOwned>(kind: Kind, data: &[u8]) -> Result<T, String> {
    let (version, payload) = check_frame(kind, data)?;
    if kind == Kind::Entry && version == VERSION_1 {
        return Err("a version 1 entry record is read with decode_entry".into());
    }
    from_payload(kind, payload)
}

/// A version 1 entry: openraft's `Entry` (log id, then payload) whose `Normal` payload was a batch alone.
/// Field and variant order are openraft 0.9's, which postcard's encoding follows.
#[derive(serde::Deserialize)]
struct EntryV1 {
    log_id: openraft::LogId<crate::NodeId>,
    payload: PayloadV1,
}

#[derive(serde::Deserialize)]
enum PayloadV1 {
    Blank,
    Normal(ProposalV1),
    Membership(openraft::Membership<crate::NodeId, openraft::BasicNode>),
}

#[derive(serde::Deserialize)]
struct ProposalV1 {
    #[serde(deserialize_with = "crate::byte_string::deserialize")]
    batch: Vec<u8>,
}

/// Decodes a log entry record of either version.
pub fn decode_entry(data: &[u8]) -> Result<openraft::Entry<crate::TypeConfig>, String> {
    let (version, payload) = check_frame(Kind::Entry, data)?;
    if version == VERSION {
        return from_payload(Kind::Entry, payload);
    }
    let old: EntryV1 = from_payload(Kind::Entry, payload)?;
    let payload = match old.payload {
        PayloadV1::Blank => openraft::EntryPayload::Blank,
        PayloadV1::Normal(p) => openraft::EntryPayload::Normal(crate::Proposal { batch: p.batch, tables: Vec::new() }),
        PayloadV1::Membership(m) => openraft::EntryPayload::Membership(m),
    };
    Ok(openraft::Entry { log_id: old.log_id, payload })
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
        r[0] = 3;
        assert!(decode::<(u64, u64)>(Kind::LogId, &r).unwrap_err().contains("version 3"));
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

    fn frame(version: u8, kind: Kind, payload: &[u8]) -> Vec<u8> {
        let mut r = vec![version, kind as u8];
        r.extend_from_slice(&(payload.len() as u32).to_le_bytes());
        r.extend_from_slice(payload);
        let crc = crc32c::crc32c(&r);
        r.extend_from_slice(&crc.to_le_bytes());
        r
    }

    #[test]
    fn version_1_entries_read_as_proposals_without_tables() {
        let mut batch = shaledb::WriteBatch::new();
        batch.put(b"k", b"v");
        let log_id = openraft::LogId::new(openraft::CommittedLeaderId::new(3, 1), 9);
        let entry: openraft::Entry<crate::TypeConfig> =
            openraft::Entry { log_id, payload: openraft::EntryPayload::Normal(crate::Proposal::new(&batch)) };
        // Version 2's payload is version 1's plus the empty `tables` (one varint 0) at its end.
        let v2 = postcard::to_stdvec(&entry).unwrap();
        assert_eq!(v2.last(), Some(&0));
        let v1 = frame(VERSION_1, Kind::Entry, &v2[..v2.len() - 1]);
        assert_eq!(decode_entry(&v1).unwrap(), entry);
        assert_eq!(decode_entry(&encode(Kind::Entry, &entry).unwrap()).unwrap(), entry);
        // The generic decoder does not misread a version 1 entry, and a version 1 record of another kind reads.
        assert!(decode::<openraft::Entry<crate::TypeConfig>>(Kind::Entry, &v1).unwrap_err().contains("decode_entry"));
        let id = frame(VERSION_1, Kind::LogId, &postcard::to_stdvec(&(7u64, 9u64)).unwrap());
        assert_eq!(decode::<(u64, u64)>(Kind::LogId, &id).unwrap(), (7, 9));
        // A version 2 entry with tables keeps them.
        let with = openraft::Entry::<crate::TypeConfig> {
            log_id,
            payload: openraft::EntryPayload::Normal(crate::Proposal::with_tables(&batch, vec![vec![1, 2, 3]])),
        };
        assert_eq!(decode_entry(&encode(Kind::Entry, &with).unwrap()).unwrap(), with);
    }
}
