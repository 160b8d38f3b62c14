//! Reading framed records, reporting each damaged stretch precisely (kind, offset, whether intact records
//! follow) so that the engine's WAL recovery modes can tell a torn tail from a hole (the grammar is in `log.rs`).

use super::{record_crc, RecordType, BLOCK_SIZE, HEADER_LEN};
use shaledb_vfs::Error;
use std::fmt;
use std::path::{Path, PathBuf};

/// What [`Reader::next`] found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LogRead {
    /// A complete logical record; `offset` is where its first fragment's header starts.
    Record {
        /// File offset of the record's (first fragment's) header.
        offset: u64,
        /// The payload.
        data: Vec<u8>,
    },
    /// Bytes that do not form a valid record. Reading may continue.
    Damage(Damage),
    /// End of the file.
    Eof,
}

/// A damaged stretch of a log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Damage {
    /// File offset of the first byte whose data is lost: the header of the damaged record, or of the first
    /// fragment when a fragmented record is lost. Every record returned before starts and ends before it.
    pub offset: u64,
    /// What was wrong.
    pub kind: DamageKind,
    /// A human description, naming the offset of the bad bytes when it differs from `offset`.
    pub what: String,
    /// True when no intact physical record (valid type, length and checksum) starts anywhere after the damaged
    /// bytes: the damage runs to the end of the file, as a write torn by a crash leaves it.
    pub at_tail: bool,
}

/// The ways a log can be damaged.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DamageKind {
    /// A record cut off by the end of the file: a partial header, a partial payload, or fragments without their
    /// LAST. Always `at_tail`.
    TruncatedTail,
    /// The checksum does not match the type and payload.
    Checksum,
    /// The length runs past the end of its block (or past the end of the file while intact records follow).
    BadLength,
    /// The checksum is valid but the type byte is not a known record type.
    BadType,
    /// Fragments out of order: a MIDDLE or LAST without a FIRST, or a FIRST whose LAST never came.
    Fragmentation,
    /// A header of zero bytes: preallocated or zero-filled space. Consecutive zeros are reported once.
    ZeroedRegion,
}

impl fmt::Display for DamageKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            DamageKind::TruncatedTail => "truncated record at end of file",
            DamageKind::Checksum => "checksum mismatch",
            DamageKind::BadLength => "bad record length",
            DamageKind::BadType => "bad record type",
            DamageKind::Fragmentation => "bad fragmentation",
            DamageKind::ZeroedRegion => "zero-filled region",
        })
    }
}

impl Damage {
    /// The damage as an [`Error::Corruption`] naming `path` and the offset.
    pub fn to_error(&self, path: &Path) -> Error {
        let tail = if self.at_tail { " (at the tail of the log)" } else { "" };
        Error::corruption(path, self.offset, format!("log {}: {}{tail}", self.kind, self.what))
    }
}

impl fmt::Display for Damage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} at offset {}: {}", self.kind, self.offset, self.what)?;
        if self.at_tail {
            f.write_str(" (at the tail)")?;
        }
        Ok(())
    }
}

/// One physical record, or why there is none at the current position.
enum Physical {
    Record { offset: usize, typ: RecordType, start: usize, end: usize },
    Bad { offset: usize, kind: DamageKind, what: String, resync: usize, scan_from: usize },
    Eof,
}

/// Reads the logical records of a log held in memory.
pub struct Reader {
    data: Vec<u8>,
    path: PathBuf,
    pos: usize,
    /// Offset of the FIRST fragment of the record being assembled.
    frag_start: Option<usize>,
    scratch: Vec<u8>,
    last_end: usize,
    /// `(from, found)`: the first intact record at or after `from` starts at `found` (`None`: there is none).
    /// Saves rescanning a long damaged tail once per damage report.
    scan_memo: Option<(usize, Option<usize>)>,
}

fn next_block_boundary(pos: usize) -> usize {
    (pos / BLOCK_SIZE + 1) * BLOCK_SIZE
}

impl Reader {
    /// Reads `data`, the complete contents of the log at `path` (the path only names the file in errors).
    pub fn new(data: Vec<u8>, path: PathBuf) -> Reader {
        Reader { data, path, pos: 0, frag_start: None, scratch: Vec::new(), last_end: 0, scan_memo: None }
    }

    /// The path given at construction.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Offset just past the last record returned (0 before the first): the length of the intact prefix
    /// that the records returned so far occupy.
    pub fn end_of_last_record(&self) -> u64 {
        self.last_end as u64
    }

    /// Offset where the next call to [`Reader::next`] resumes: after a [`LogRead::Damage`], the end of the
    /// stretch the reader skipped. Bytes from the damage's offset up to here are not replayed.
    pub fn position(&self) -> u64 {
        self.pos as u64
    }

    /// Number of logical records whose first header (a FULL or FIRST record with an intact checksum) starts in
    /// `from..to`: the records a resync over that stretch skips although they are intact. Damage says where
    /// reading failed; this says how many good records went with it, so a recovery can report them.
    pub fn intact_records_between(&self, from: u64, to: u64) -> u64 {
        self.scan_intact(from, to, false).0
    }

    /// Offset of the first logical record (an intact FULL or FIRST record) starting at or after `from`, whether
    /// or not reading would reach it: tells "garbage after the damage" (`None`, a torn tail) from "valid
    /// records after the damage" (a hole in the log).
    pub fn next_intact_record(&self, from: u64) -> Option<u64> {
        self.scan_intact(from, u64::MAX, true).1
    }

    /// The whole log as given at construction.
    pub fn data(&self) -> &[u8] {
        &self.data
    }

    /// Counts the logical records starting in `from..to` (stopping at the first when `first_only`) and returns
    /// the count and the first one's offset.
    fn scan_intact(&self, from: u64, to: u64, first_only: bool) -> (u64, Option<u64>) {
        let to = usize::try_from(to).unwrap_or(usize::MAX).min(self.data.len());
        let mut pos = usize::try_from(from).unwrap_or(usize::MAX);
        let (mut n, mut first) = (0, None);
        while pos < to {
            if !self.intact_at(pos) {
                pos += 1;
                continue;
            }
            let (typ, length) = match self.data.get(pos..pos + HEADER_LEN) {
                Some(h) => (h[6], u16::from_le_bytes([h[4], h[5]]) as usize),
                None => break,
            };
            if matches!(RecordType::from_u8(typ), Some(RecordType::Full | RecordType::First)) {
                n += 1;
                first = first.or(Some(pos as u64));
                if first_only {
                    break;
                }
            }
            pos += HEADER_LEN + length;
        }
        (n, first)
    }

    /// The next record, damage report or end of file. After [`LogRead::Damage`] reading continues at the next
    /// block boundary (after a fragmentation error or a bad type, at the next physical record, whose framing is
    /// intact). After [`LogRead::Eof`] every call returns `Eof` again.
    // Not an `Iterator`: damage is an item that reading continues past, and `Eof` is explicit.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> LogRead {
        loop {
            match self.read_physical() {
                Physical::Eof => {
                    self.pos = self.data.len();
                    if let Some(start) = self.frag_start.take() {
                        self.scratch.clear();
                        return LogRead::Damage(Damage {
                            offset: start as u64,
                            kind: DamageKind::TruncatedTail,
                            what: format!(
                                "fragmented record starting at {start} has no LAST fragment before end of file"
                            ),
                            at_tail: true,
                        });
                    }
                    return LogRead::Eof;
                }
                Physical::Bad { offset, mut kind, mut what, resync, scan_from } => {
                    self.pos = resync;
                    let lost_from = self.frag_start.take().unwrap_or(offset);
                    self.scratch.clear();
                    if lost_from != offset {
                        what = format!("{what}, at offset {offset} inside the record starting at {lost_from}");
                    }
                    let at_tail = self.first_intact_from(scan_from).is_none();
                    if kind == DamageKind::TruncatedTail && !at_tail {
                        // A length running past the end of file while intact records follow is no torn tail.
                        kind = DamageKind::BadLength;
                    }
                    return LogRead::Damage(Damage { offset: lost_from as u64, kind, what, at_tail });
                }
                Physical::Record { offset, typ, start, end } => {
                    let payload = self.data.get(start..end).unwrap_or_default();
                    match typ {
                        RecordType::Full | RecordType::First => {
                            if let Some(lost) = self.frag_start.take() {
                                // Leave `pos` on this record: it is intact and is read by the next call.
                                self.scratch.clear();
                                return LogRead::Damage(Damage {
                                    offset: lost as u64,
                                    kind: DamageKind::Fragmentation,
                                    what: format!(
                                        "fragmented record starting at {lost} has no LAST fragment; a {typ:?} \
                                         record follows at {offset}"
                                    ),
                                    at_tail: self.first_intact_from(offset).is_none(),
                                });
                            }
                            self.pos = end;
                            if typ == RecordType::Full {
                                self.last_end = end;
                                return LogRead::Record { offset: offset as u64, data: payload.to_vec() };
                            }
                            self.frag_start = Some(offset);
                            self.scratch.clear();
                            self.scratch.extend_from_slice(payload);
                        }
                        RecordType::Middle | RecordType::Last => {
                            self.pos = end;
                            let Some(first) = self.frag_start else {
                                return LogRead::Damage(Damage {
                                    offset: offset as u64,
                                    kind: DamageKind::Fragmentation,
                                    what: format!("{typ:?} fragment without a FIRST fragment before it"),
                                    at_tail: self.first_intact_from(offset + 1).is_none(),
                                });
                            };
                            self.scratch.extend_from_slice(payload);
                            if typ == RecordType::Last {
                                self.frag_start = None;
                                self.last_end = end;
                                return LogRead::Record {
                                    offset: first as u64,
                                    data: std::mem::take(&mut self.scratch),
                                };
                            }
                        }
                    }
                }
            }
        }
    }

    /// Decodes the physical record at `self.pos` without consuming it.
    fn read_physical(&self) -> Physical {
        let len = self.data.len();
        let mut pos = self.pos;
        if BLOCK_SIZE - pos % BLOCK_SIZE < HEADER_LEN {
            pos = next_block_boundary(pos); // the trailer: not covered by any checksum, nothing to check
        }
        let Some(avail) = len.checked_sub(pos).filter(|&a| a > 0) else { return Physical::Eof };
        let header = self.data.get(pos..(pos + HEADER_LEN).min(len)).unwrap_or_default();
        if header.iter().all(|&b| b == 0) {
            let zeros = self.data.get(pos..).unwrap_or_default().iter().take_while(|&&b| b == 0).count();
            let end = pos + zeros;
            let resync = if end == len { end } else { end.next_multiple_of(BLOCK_SIZE) };
            return Physical::Bad {
                offset: pos,
                kind: DamageKind::ZeroedRegion,
                what: format!("{zeros} zero bytes where a record header belongs"),
                resync: resync.min(len),
                scan_from: pos + 1,
            };
        }
        let (Some(crc_bytes), Some(len_bytes), Some(&type_byte)) = (header.get(..4), header.get(4..6), header.get(6))
        else {
            return Physical::Bad {
                offset: pos,
                kind: DamageKind::TruncatedTail,
                what: format!("record header cut off by end of file: {avail} of {HEADER_LEN} bytes"),
                resync: len,
                scan_from: len,
            };
        };
        let stored_crc = u32::from_le_bytes([crc_bytes[0], crc_bytes[1], crc_bytes[2], crc_bytes[3]]);
        let length = u16::from_le_bytes([len_bytes[0], len_bytes[1]]) as usize;
        let room = BLOCK_SIZE - pos % BLOCK_SIZE - HEADER_LEN;
        let start = pos + HEADER_LEN;
        let end = start + length;
        if length > room {
            return Physical::Bad {
                offset: pos,
                kind: DamageKind::BadLength,
                what: format!("length {length} exceeds the {room} bytes left in its block"),
                resync: next_block_boundary(pos).min(len),
                scan_from: pos + 1,
            };
        }
        let Some(payload) = self.data.get(start..end) else {
            return Physical::Bad {
                offset: pos,
                kind: DamageKind::TruncatedTail,
                what: format!("payload cut off by end of file: {} of {length} bytes", len - start),
                resync: len,
                scan_from: pos + 1,
            };
        };
        if record_crc(type_byte, payload) != stored_crc {
            return Physical::Bad {
                offset: pos,
                kind: DamageKind::Checksum,
                what: format!("checksum mismatch in a record of length {length}"),
                resync: next_block_boundary(pos).min(len),
                scan_from: pos + 1,
            };
        }
        match RecordType::from_u8(type_byte) {
            Some(typ) => Physical::Record { offset: pos, typ, start, end },
            None => Physical::Bad {
                offset: pos,
                kind: DamageKind::BadType,
                what: format!("unknown record type {type_byte}"),
                // The checksum held, so the length is right and the next record starts at `end`.
                resync: end,
                scan_from: pos + 1,
            },
        }
    }

    /// True when an intact physical record starts at `pos`.
    pub(super) fn intact_at(&self, pos: usize) -> bool {
        let room = BLOCK_SIZE - pos % BLOCK_SIZE;
        if room < HEADER_LEN {
            return false;
        }
        let Some(h) = self.data.get(pos..pos + HEADER_LEN) else { return false };
        let length = u16::from_le_bytes([h[4], h[5]]) as usize;
        if RecordType::from_u8(h[6]).is_none() || length > room - HEADER_LEN {
            return false;
        }
        let Some(payload) = self.data.get(pos + HEADER_LEN..pos + HEADER_LEN + length) else { return false };
        record_crc(h[6], payload) == u32::from_le_bytes([h[0], h[1], h[2], h[3]])
    }

    /// Offset of the first intact physical record at or after `from`.
    fn first_intact_from(&mut self, from: usize) -> Option<usize> {
        if let Some((memo_from, found)) = self.scan_memo {
            if memo_from <= from {
                match found {
                    None => return None,
                    Some(at) if at >= from => return Some(at),
                    Some(_) => {}
                }
            }
        }
        let found = (from..self.data.len()).find(|&p| self.intact_at(p));
        self.scan_memo = Some((from, found));
        found
    }
}
