//! DUMP payloads: one value in Redis 7.0's RDB object encoding, as `DUMP` writes it and `RESTORE` reads it,
//! so values move between shaledb server and redis-server (and MIGRATE or `redis-cli --cluster` between
//! them) in either direction.
//!
//! ```text
//! payload  := object rdb_version:u16le crc:u64le
//!             rdb_version <= 10; crc = CRC-64/Jones (reflected, init 0) of everything before it
//! object   := type:u8 body                            (the types of reader::kind, frozen by Redis)
//! len      := 00vvvvvv | 01vvvvvv v:u8 | 0x80 u32be | 0x81 u64be
//! string   := len byte{len} | 0xc0 i8 | 0xc1 i16le | 0xc2 i32le | 0xc3 clen:len ulen:len lzf{clen}
//! body     := string                                   0  string
//!           | len string{len}                          1  list, 2  set
//!           | len (string score_text){len}             3  sorted set (score: u8 length then text;
//!                                                         253 NaN, 254 +inf, 255 -inf)
//!           | len (string string){len}                 4  hash
//!           | len (string f64le){len}                  5  sorted set, binary scores
//!           | string                                   9  zipmap hash, 10 ziplist list, 11 intset set,
//!                                                         12 ziplist sorted set, 13 ziplist hash,
//!                                                         16 listpack hash, 17 listpack sorted set
//!           | len string{len}                          14 quicklist of ziplists
//!           | len (container:len string){len}          18 quicklist: 1 plain element, 2 listpack
//!           | stream                                   15, 19 (v2 adds first id, max deleted, added)
//! stream   := len (node_key:string(16 bytes: ms:u64be seq:u64be) listpack:string){len}
//!             length:len last:id [first:id max_deleted:id entries_added:len]
//!             len group{len}
//! group    := name:string last:id [entries_read:len (2^64-1: unknown)]
//!             len (id:16 bytes delivered_ms:u64le deliveries:len){len}
//!             len (name:string seen_ms:u64le len id:16 bytes{len}){len}
//! node lp  := count deleted nfields field{nfields} 0  entry*
//! entry    := flags ms_diff seq_diff (values{nfields} | n (field value){n}) lp_count
//!             flags: 1 deleted, 2 same fields as the master entry; lp_count: the entry's other elements
//! ```
//!
//! The packed encodings (listpack, ziplist, intset, zipmap) are in `packed.rs`. DUMP writes strings raw,
//! lists as quicklists of listpacks, sets, sorted sets and hashes as plain sequences, streams as type 19;
//! RESTORE reads every type Redis 7.0 reads except modules. A payload is hostile input: every length is
//! checked against the bytes left before it sizes anything, and anything malformed is
//! [`Error::BadFormat`] (what Redis answers `Bad data format` to). Empty collections, duplicate members and
//! NaN scores are refused, as Redis does; so are stream entries above the stream's last id and pending
//! entries without a consumer (Redis only catches those with `sanitize-dump-payload yes`).

mod crc64;
mod lzf;
pub mod packed;
pub mod reader;
mod store;
mod writer;

pub use store::{check_sizes, read, restore};

use crate::types::stream::{Entry, Id};
use crate::types::{coll, hash, list, stream, string, zset};

/// The RDB version DUMP writes and the highest RESTORE accepts (Redis 7.0's).
pub const RDB_VERSION: u16 = 10;

/// A value as a payload carries it.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    String(Vec<u8>),
    List(Vec<Vec<u8>>),
    Set(Vec<Vec<u8>>),
    ZSet(Vec<(Vec<u8>, f64)>),
    Hash(Vec<(Vec<u8>, Vec<u8>)>),
    Stream(Box<StreamValue>),
}

/// A stream: its live entries in id order, the header fields Redis keeps, its consumer groups.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct StreamValue {
    pub entries: Vec<Entry>,
    pub last: Id,
    pub max_deleted: Id,
    pub entries_added: u64,
    pub groups: Vec<GroupValue>,
}

/// A consumer group: its pending entries in id order, each with its consumer, and its consumers
/// `(name, seen_ms)`.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct GroupValue {
    pub name: Vec<u8>,
    pub last: Id,
    /// `None`: unknown (Redis's -1).
    pub entries_read: Option<u64>,
    pub pending: Vec<Pending>,
    pub consumers: Vec<(Vec<u8>, u64)>,
}

/// A pending entry of a group.
#[derive(Clone, Debug, PartialEq)]
pub struct Pending {
    pub id: Id,
    pub delivered_ms: u64,
    pub deliveries: u64,
    pub consumer: Vec<u8>,
}

/// Why a payload could not be read or stored.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Too short, an RDB version above [`RDB_VERSION`], or a checksum mismatch.
    #[error("DUMP payload version or checksum are wrong")]
    VersionOrChecksum,
    /// The object does not follow the format (the text says where, for tests and logs).
    #[error("Bad data format")]
    BadFormat(&'static str),
    #[error(transparent)]
    Store(#[from] crate::store::Error),
    #[error(transparent)]
    Coll(#[from] coll::Error),
    #[error(transparent)]
    List(#[from] list::Error),
    #[error(transparent)]
    Hash(#[from] hash::Error),
    #[error(transparent)]
    ZSet(#[from] zset::Error),
    #[error(transparent)]
    Stream(#[from] stream::Error),
    #[error(transparent)]
    String(#[from] string::Error),
}

/// The DUMP payload of `v`.
pub fn encode(v: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    writer::object(&mut out, v);
    seal(out)
}

/// `body` with the payload footer appended: the RDB version, then the CRC-64 of everything before it.
fn seal(mut body: Vec<u8>) -> Vec<u8> {
    body.extend_from_slice(&RDB_VERSION.to_le_bytes());
    let crc = crc64::update(0, &body);
    body.extend_from_slice(&crc.to_le_bytes());
    body
}

/// The RDB opcode before a function library's code (Redis 7.0 GA's `FUNCTION2`).
const OPCODE_FUNCTION2: u8 = 245;
/// The opcode the release candidates of Redis 7.0 wrote (name, engine, description and code apart).
const OPCODE_FUNCTION_PRE_GA: u8 = 246;

/// FUNCTION DUMP's payload: for each library, the function opcode and the library's code as an RDB string,
/// then the footer.
pub fn encode_functions<'a>(codes: impl IntoIterator<Item = &'a [u8]>) -> Vec<u8> {
    let mut out = Vec::new();
    for code in codes {
        out.push(OPCODE_FUNCTION2);
        writer::string(&mut out, code);
    }
    seal(out)
}

/// The libraries' code in a FUNCTION RESTORE payload, or Redis's error text. The footer is checked first;
/// then entries are read until only the footer's 10 bytes are left, as Redis reads them.
pub fn decode_functions(payload: &[u8]) -> Result<Vec<Vec<u8>>, String> {
    verify(payload).map_err(|e| e.to_string())?;
    let mut r = reader::Reader::new(payload);
    let mut codes = Vec::new();
    while r.left() > 10 {
        let typ = r.object_type().map_err(|_| "can not read data type".to_string())?;
        match typ {
            OPCODE_FUNCTION2 => {
                codes.push(r.string().map_err(|_| "Failed loading library payload".to_string())?);
            }
            OPCODE_FUNCTION_PRE_GA => {
                return Err("Pre-GA function format not supported".into());
            }
            _ => return Err("given type is not a function".into()),
        }
    }
    Ok(codes)
}

/// Checks the footer of `payload` (version and checksum), as RESTORE does before reading anything.
pub fn verify(payload: &[u8]) -> Result<(), Error> {
    if payload.len() < 10 {
        return Err(Error::VersionOrChecksum);
    }
    let (body, crc) = payload.split_at(payload.len() - 8);
    let version = u16::from_le_bytes([body[body.len() - 2], body[body.len() - 1]]);
    if version > RDB_VERSION {
        return Err(Error::VersionOrChecksum);
    }
    let want = u64::from_le_bytes(crc.try_into().map_err(|_| Error::VersionOrChecksum)?);
    if crc64::update(0, body) != want {
        return Err(Error::VersionOrChecksum);
    }
    Ok(())
}

/// Reads the value of a payload whose footer [`verify`] accepted. As in Redis, the object is read from the
/// whole payload (a malformed object may run into the footer) and bytes after it are ignored.
pub fn decode(payload: &[u8]) -> Result<Value, Error> {
    let mut r = reader::Reader::new(payload);
    let typ = r.object_type()?;
    reader::object(typ, &mut r)
}

/// The driver of the `dump_payload` fuzz target (fuzz/fuzz_targets/dump_payload.rs), also replayed by
/// `cargo test`: `data` read as a whole payload, then as an object body inside a payload with a valid footer
/// (so mutations reach the object decoders instead of stopping at the checksum). Panics only on a finding: a
/// decoded value that does not come back equal through [`encode`] and [`decode`].
pub fn fuzz_payload(data: &[u8]) {
    let _ = verify(data).and_then(|()| decode(data));
    let mut p = data.to_vec();
    p.extend_from_slice(&RDB_VERSION.to_le_bytes());
    let crc = crc64::update(0, &p);
    p.extend_from_slice(&crc.to_le_bytes());
    if let Ok(v) = verify(&p).and_then(|()| decode(&p)) {
        let again = encode(&v);
        match verify(&again).and_then(|()| decode(&again)) {
            Ok(v2) => assert!(v2 == v, "a decoded value changed through encode and decode: {v:?} -> {v2:?}"),
            Err(e) => panic!("an encoded value does not decode: {e:?} ({v:?})"),
        }
    }
}

#[cfg(test)]
mod tests;
