//! Reading a write-ahead log: its records ([`crate::log`] framing), each decoded as a write batch
//! ([`BatchRep`]) or a [`WalMarker`]. The engine's recovery, `shaledb dump` and `shaledb verify` read WALs through
//! [`next_batch`].

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
    /// A marker about the WAL before this one ([`WalMarker`]).
    Marker {
        /// File offset of the marker's record.
        offset: u64,
        /// What it says.
        marker: WalMarker,
    },
    /// An intact record (its checksum passed) that is neither a write batch nor a marker.
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
            if data.starts_with(&MARKER_HEADER) {
                return match WalMarker::decode(&data) {
                    Ok(marker) => BatchRead::Marker { offset, marker },
                    Err(what) => BatchRead::Undecodable {
                        offset,
                        error: Error::corruption(reader.path(), offset, format!("WAL marker record: {what}")),
                    },
                };
            }
            match BatchRep::from_bytes(data) {
                Ok(batch) => BatchRead::Batch { offset, size, batch },
                Err(e) => BatchRead::Undecodable { offset, error: e.in_file(reader.path(), offset) },
            }
        }
    }
}

/// The first 12 bytes of a marker record: a batch header that no write batch has (sequence `u64::MAX`, which no
/// batch may start at, and a count of 0), so a marker is never taken for a batch.
pub const MARKER_HEADER: [u8; 12] = [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0];

/// Largest WAL length a [`WalMarker::Predecessor`] may state (2^48 bytes, the bound on any file's size).
pub const MAX_WAL_LENGTH: u64 = 1 << 48;

/// What the engine records in a WAL about the WALs before it, so that recovery can tell an unsynced WAL cut
/// by a power loss (a prefix of the writes: replay stops there) from damage to a synced one (acknowledged
/// writes lost: refused). docs/format/wal.md has the grammar.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WalMarker {
    /// The first record of a WAL started while WAL `number` still held unsynced bytes: `number` was `length`
    /// bytes long when it was closed, and may be cut short by a power loss (written and synced with the new
    /// WAL's creation, before any batch in it).
    Predecessor {
        /// The WAL closed by the switch.
        number: u64,
        /// Its length then, in bytes.
        length: u64,
    },
    /// Every WAL numbered `through` or below was synced in full before this record was written.
    Synced {
        /// The highest WAL number covered.
        through: u64,
    },
}

const MARKER_PREDECESSOR: u8 = 1;
const MARKER_SYNCED: u8 = 2;

impl WalMarker {
    /// The marker's record payload.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = MARKER_HEADER.to_vec();
        match *self {
            WalMarker::Predecessor { number, length } => {
                out.push(MARKER_PREDECESSOR);
                crate::coding::put_varint64(&mut out, number);
                crate::coding::put_varint64(&mut out, length);
            }
            WalMarker::Synced { through } => {
                out.push(MARKER_SYNCED);
                crate::coding::put_varint64(&mut out, through);
            }
        }
        out
    }

    /// Decodes a payload that starts with [`MARKER_HEADER`]; every number is range-checked, and the record must
    /// end with the marker.
    pub fn decode(data: &[u8]) -> std::result::Result<WalMarker, String> {
        let max_number = crate::edit::MAX_FILE_NUMBER;
        let rest = data.strip_prefix(&MARKER_HEADER[..]).ok_or("no marker header")?;
        let mut d = crate::coding::Decoder::new(rest);
        let kind = d.u8().ok_or("no kind byte")?;
        let number = |d: &mut crate::coding::Decoder<'_>, what: &str, max: u64| {
            let v = d.varint64().ok_or_else(|| format!("{what} cut short"))?;
            if v > max {
                return Err(format!("{what} {v} is above {max}"));
            }
            Ok(v)
        };
        let marker = match kind {
            MARKER_PREDECESSOR => WalMarker::Predecessor {
                number: number(&mut d, "WAL number", max_number)?,
                length: number(&mut d, "WAL length", MAX_WAL_LENGTH)?,
            },
            MARKER_SYNCED => WalMarker::Synced { through: number(&mut d, "WAL number", max_number)? },
            other => return Err(format!("unknown marker kind {other}")),
        };
        if !d.is_empty() {
            return Err(format!("{} bytes after the marker", d.rest().len()));
        }
        Ok(marker)
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

    #[test]
    fn markers_round_trip_and_bad_ones_are_named() {
        let (fs, path) = (MemFs::new(), Path::new("/000009.log"));
        let mut w = Writer::new(fs.create(path).unwrap());
        let markers = [
            WalMarker::Predecessor { number: 7, length: 123_456 },
            WalMarker::Synced { through: 7 },
            WalMarker::Predecessor { number: crate::edit::MAX_FILE_NUMBER, length: MAX_WAL_LENGTH },
        ];
        for m in &markers {
            w.add_record(&m.encode()).unwrap();
        }
        let mut bad = WalMarker::Synced { through: 3 }.encode();
        bad.push(0);
        let mut past = MARKER_HEADER.to_vec();
        past.push(1);
        crate::coding::put_varint64(&mut past, 5);
        crate::coding::put_varint64(&mut past, MAX_WAL_LENGTH + 1);
        let mut unknown = MARKER_HEADER.to_vec();
        unknown.push(9);
        for rec in [&bad[..], &past[..], &unknown[..], &MARKER_HEADER[..]] {
            w.add_record(rec).unwrap();
        }
        w.flush().unwrap();
        let mut r = Reader::new(fs.read_file(path).unwrap(), path.to_path_buf());
        for m in markers {
            match next_batch(&mut r) {
                BatchRead::Marker { marker, .. } => assert_eq!(marker, m),
                other => panic!("{other:?}"),
            }
        }
        for want in
            ["1 bytes after the marker", "WAL length 281474976710657 is above", "unknown marker kind 9", "no kind"]
        {
            match next_batch(&mut r) {
                BatchRead::Undecodable { error, .. } => assert!(error.to_string().contains(want), "{error}"),
                other => panic!("{other:?}"),
            }
        }
        assert!(matches!(next_batch(&mut r), BatchRead::Eof));
    }
}
