//! How Redis keys are laid out on the engine (docs/format/server-keys.md is the grammar, plus expiry, SCAN
//! cursors and SHALEDB.RANGE; keep them in step).
//!
//! ```text
//! engine key   := meta_key | member_key
//! meta_key     := db:u8 0x00 user_key                  one per Redis key, whatever its type
//! member_key   := db:u8 0x01 ...                        collection members (hashes, lists, sets, zsets,
//!                                                       streams); laid out by the data-types issue
//! meta_value   := head:u8 expire_at_ms:u64be? payload
//! head         := type:u4 (0x80 if expire_at_ms follows) (low nibble = type)
//! type         := 0x1 string | 0x2 hash | 0x3 list | 0x4 set | 0x5 zset | 0x6 stream   (frozen)
//! payload      := the string's bytes (type string); the collection header (other types)
//! ```
//!
//! One engine key per Redis key, holding the type and the expiry, makes `TYPE`, `EXISTS`, `TTL` and the
//! `WRONGTYPE` check one point lookup, and a scan of `db 0x00` lists the keyspace of a database in key order
//! (SCAN, KEYS, DBSIZE). Strings keep their value inline, so GET and SET touch one engine key and a string
//! costs one byte of overhead (nine with an expiry). Collections keep a header here (Kvrocks' metadata) and
//! their members under `member_key`s, versioned so that deleting a collection is one write.

use bytes::Bytes;

/// Number of logical databases (`SELECT 0..=15`, Redis's `databases 16`).
pub const DATABASES: u8 = 16;

/// Frozen on-disk tags.
pub const KIND_META: u8 = 0x00;
pub const KIND_MEMBER: u8 = 0x01;

/// Redis value types (frozen on-disk values).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Type {
    String = 0x1,
    Hash = 0x2,
    List = 0x3,
    Set = 0x4,
    ZSet = 0x5,
    Stream = 0x6,
}

impl Type {
    pub fn from_u8(b: u8) -> Option<Type> {
        Some(match b {
            0x1 => Type::String,
            0x2 => Type::Hash,
            0x3 => Type::List,
            0x4 => Type::Set,
            0x5 => Type::ZSet,
            0x6 => Type::Stream,
            _ => return None,
        })
    }

    /// The name `TYPE` answers.
    pub fn name(self) -> &'static str {
        match self {
            Type::String => "string",
            Type::Hash => "hash",
            Type::List => "list",
            Type::Set => "set",
            Type::ZSet => "zset",
            Type::Stream => "stream",
        }
    }
}

const HAS_EXPIRE: u8 = 0x80;

/// The engine key of `user_key` in database `db`, written into `out` (cleared first).
pub fn meta_key_into(db: u8, user_key: &[u8], out: &mut Vec<u8>) {
    out.clear();
    out.reserve(user_key.len() + 2);
    out.push(db);
    out.push(KIND_META);
    out.extend_from_slice(user_key);
}

/// The engine key of `user_key` in database `db`.
pub fn meta_key(db: u8, user_key: &[u8]) -> Vec<u8> {
    let mut k = Vec::new();
    meta_key_into(db, user_key, &mut k);
    k
}

/// The prefix shared by every meta key of database `db`.
pub fn meta_prefix(db: u8) -> [u8; 2] {
    [db, KIND_META]
}

/// The exclusive upper bound of the meta keys of database `db` (the first key after them).
pub fn meta_end(db: u8) -> [u8; 2] {
    [db, KIND_META + 1]
}

/// The user key of a meta key (`None` if `engine_key` is not a meta key of `db`).
pub fn user_key(db: u8, engine_key: &[u8]) -> Option<&[u8]> {
    engine_key.strip_prefix(&meta_prefix(db)[..])
}

/// A stored value that does not follow the grammar above (a damaged or foreign database).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("corrupt value in the keyspace: {0}")]
pub struct BadValue(pub &'static str);

/// A decoded meta value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Meta {
    pub typ: Type,
    /// Absolute expiry, Unix milliseconds.
    pub expire_at_ms: Option<u64>,
    /// Offset of the payload in the stored value.
    pub payload_at: usize,
}

impl Meta {
    /// True when the key has expired at `now_ms` (Redis: expired when `expire_at <= now`... strictly, a key
    /// with `expire_at == now` is expired).
    pub fn expired(&self, now_ms: u64) -> bool {
        self.expire_at_ms.is_some_and(|t| t <= now_ms)
    }
}

/// Decodes the head of a meta value.
pub fn decode_meta(v: &[u8]) -> Result<Meta, BadValue> {
    let &head = v.first().ok_or(BadValue("empty value"))?;
    let typ = Type::from_u8(head & 0x0f).ok_or(BadValue("unknown type tag"))?;
    if head & !(0x0f | HAS_EXPIRE) != 0 {
        return Err(BadValue("unknown flag bits"));
    }
    if head & HAS_EXPIRE != 0 {
        let t = v.get(1..9).ok_or(BadValue("truncated expiry"))?;
        let mut b = [0u8; 8];
        b.copy_from_slice(t);
        Ok(Meta { typ, expire_at_ms: Some(u64::from_be_bytes(b)), payload_at: 9 })
    } else {
        Ok(Meta { typ, expire_at_ms: None, payload_at: 1 })
    }
}

/// Writes the head of a meta value (type and optional expiry) into `out` (cleared first).
pub fn encode_head_into(typ: Type, expire_at_ms: Option<u64>, out: &mut Vec<u8>) {
    out.clear();
    match expire_at_ms {
        Some(t) => {
            out.push(typ as u8 | HAS_EXPIRE);
            out.extend_from_slice(&t.to_be_bytes());
        }
        None => out.push(typ as u8),
    }
}

/// A whole string value.
pub fn encode_string(value: &[u8], expire_at_ms: Option<u64>) -> Vec<u8> {
    let mut v = Vec::with_capacity(value.len() + 9);
    encode_head_into(Type::String, expire_at_ms, &mut v);
    v.extend_from_slice(value);
    v
}

/// The payload of a stored value as a zero-copy slice.
pub fn payload(stored: Bytes, meta: &Meta) -> Bytes {
    stored.slice(meta.payload_at.min(stored.len())..)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_with_and_without_expiry() {
        let v = encode_string(b"hello", None);
        let m = decode_meta(&v).unwrap();
        assert_eq!((m.typ, m.expire_at_ms, &v[m.payload_at..]), (Type::String, None, &b"hello"[..]));
        let v = encode_string(b"", Some(1234));
        let m = decode_meta(&v).unwrap();
        assert_eq!((m.typ, m.expire_at_ms, &v[m.payload_at..]), (Type::String, Some(1234), &b""[..]));
        assert!(m.expired(1234) && !m.expired(1233));
    }

    #[test]
    fn bad_values_are_errors() {
        assert!(decode_meta(b"").is_err());
        assert!(decode_meta(&[0x07]).is_err());
        assert!(decode_meta(&[0x81, 0, 0]).is_err());
        assert!(decode_meta(&[0x41]).is_err());
    }

    #[test]
    fn meta_keys_sort_by_database_then_key() {
        assert!(meta_key(0, b"zzz") < meta_key(1, b""));
        assert_eq!(user_key(3, &meta_key(3, b"k")), Some(&b"k"[..]));
        assert_eq!(user_key(2, &meta_key(3, b"k")), None);
    }
}
