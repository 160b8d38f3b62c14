//! How Redis keys are laid out on the engine (docs/format/server-keys.md is the grammar, plus expiry, SCAN
//! cursors, collections and SHALEDB.RANGE; keep them in step).
//!
//! ```text
//! engine key    := meta_key | member_key | registry_key | layout_key | library_key | cluster_key | counter_key
//! meta_key      := db:u8 0x00 pos                       one per Redis key, whatever its type
//! pos           := user_key                             standalone server (keys in key order)
//!                | slot:u16be user_key                  cluster member (keys slot first; slot = CRC16 slot)
//! member_key    := db:u8 0x01 version:u64be sub:u8 member_part
//! registry_key  := db:u8 0x02 version:u64be              -> user_key: every collection version that may
//!                                                          still have member records
//! version       := counter:u64                          standalone server
//!                | slot:u16 counter:u48                 cluster member (the slot of the collection's key)
//! layout_key    := 0xff "shaledb-server-layout"          -> layout_value: the layout marker (layout.rs)
//! library_key   := 0xfe "shaledb-function:" name         -> library code: a FUNCTION library (types/scripts.rs)
//! cluster_key   := 0xfd "shaledb-cluster-map"            -> the cluster map, on a cluster member (cluster/map.rs)
//! counter_key   := 0xfc "shaledb-next-version"           -> counter:u64be, the next version counter, on a
//!                                                          cluster member
//! meta_value    := head:u8 expire_at_ms:u64be? payload
//! head          := type:u4 (0x80 if expire_at_ms follows) (low nibble = type)
//! type          := 0x1 string | 0x2 hash | 0x3 list | 0x4 set | 0x5 zset | 0x6 stream   (frozen)
//! payload       := the string's bytes (type string) | coll_header (other types)
//! coll_header   := version:u64be size:u64be extra       extra: per type (see the type's section)
//! sub           := 0x00 member record (no list) | 0x01 zset score index | 0x02.. per type (list: nodes) (frozen)
//! ```
//!
//! One engine key per Redis key, holding the type and the expiry, makes `TYPE`, `EXISTS`, `TTL` and the
//! `WRONGTYPE` check one point lookup, and a scan of `db 0x00` lists the keyspace of a database in key order
//! (SCAN, KEYS, DBSIZE). Strings keep their value inline, so GET and SET touch one engine key and a string
//! costs one byte of overhead (nine with an expiry).
//!
//! Collections keep a header in their meta value (Kvrocks' metadata: a version and the member count) and
//! one engine record per member under `member_key`, keyed by the collection's *version*, not its name. A
//! version is a number never used before by any collection of the server (a counter, recovered at start
//! from the registry), so:
//! - deleting, expiring or overwriting a collection is one write (the meta key): the old version's members
//!   become unreachable at once, and a background collector (`gc.rs`) deletes them later;
//! - RENAME moves only the meta value (and rewrites one registry record), whatever the collection's size;
//! - the members of one collection are one contiguous, ordered range, so range reads are ordered scans.
//!
//! The registry (`db 0x02 version -> user_key`) is written when a version is created, in the same batch, and
//! deleted by the collector in the batch that deletes the version's last member records. The collector
//! walks it: a version whose user key's meta value no longer holds that version is dead.
use bytes::Bytes;

/// Number of logical databases (`SELECT 0..=15`, Redis's `databases 16`).
pub const DATABASES: u8 = 16;

/// Frozen on-disk tags.
pub const KIND_META: u8 = 0x00;
pub const KIND_MEMBER: u8 = 0x01;
pub const KIND_REGISTRY: u8 = 0x02;

/// `sub` byte of member keys: the member record of every type.
pub const SUB_MEMBER: u8 = 0x00;
/// `sub` byte of member keys: the score index of sorted sets (`score:u64be(sortable) member -> empty`).
pub const SUB_SCORE: u8 = 0x01;

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

/// How meta keys are ordered in a database: by user key (a standalone server: SCAN, KEYS and
/// `SHALEDB.RANGE` walk keys in byte order) or by hash slot first (a cluster member: the keys of one slot are
/// one range, so counting, listing, copying and dropping a slot are range reads; collection versions carry
/// their key's slot too, so a slot's member and registry records are one range each). Chosen when the
/// database is created and recorded in the layout marker (`layout.rs`); `shaledb convert-keyspace` converts
/// a database from one to the other.
///
/// A meta key is `db 0x00 pos`, where the *position* `pos` is the user key (`Ordered`) or `slot:u16be
/// user_key` (`Slots`). Scans keep positions (SCAN's cursor) and turn them into user keys with
/// [`Keyspace::user_of_pos`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Keyspace {
    #[default]
    Ordered,
    Slots,
}

/// Bits of a collection version below its slot in the `Slots` keyspace: `version := slot:u16 counter:u48`.
pub const VERSION_SLOT_SHIFT: u32 = 48;

/// The largest version counter (48 bits) in the `Slots` keyspace.
pub const VERSION_COUNTER_MAX: u64 = (1 << VERSION_SLOT_SHIFT) - 1;

impl Keyspace {
    /// The engine key of `user_key` in database `db`, written into `out` (cleared first).
    pub fn meta_key_into(self, db: u8, user_key: &[u8], out: &mut Vec<u8>) {
        out.clear();
        out.reserve(user_key.len() + 4);
        out.push(db);
        out.push(KIND_META);
        if self == Keyspace::Slots {
            out.extend_from_slice(&crate::cluster::key_slot(user_key).to_be_bytes());
        }
        out.extend_from_slice(user_key);
    }

    /// The engine key of `user_key` in database `db`.
    pub fn meta_key(self, db: u8, user_key: &[u8]) -> Vec<u8> {
        let mut k = Vec::new();
        self.meta_key_into(db, user_key, &mut k);
        k
    }

    /// The position of `user_key` among the meta keys of a database (the engine key without `db 0x00`).
    pub fn pos_of(self, user_key: &[u8]) -> Vec<u8> {
        let mut k = Vec::new();
        self.meta_key_into(0, user_key, &mut k);
        k.drain(..2);
        k
    }

    /// The engine key at position `pos` of database `db`.
    pub fn pos_key(db: u8, pos: &[u8]) -> Vec<u8> {
        let mut k = Vec::with_capacity(pos.len() + 2);
        k.push(db);
        k.push(KIND_META);
        k.extend_from_slice(pos);
        k
    }

    /// The user key at position `pos` (a position of this keyspace: callers take it from an engine key of
    /// `[db 0x00] .. [db 0x01)`). A `Slots` position too short to hold a slot (a damaged record) gives the
    /// empty key rather than a panic.
    pub fn user_of_pos(self, pos: &[u8]) -> &[u8] {
        match self {
            Keyspace::Ordered => pos,
            Keyspace::Slots => pos.get(2..).unwrap_or_default(),
        }
    }

    /// The user key of a meta key (`None` if `engine_key` is not a meta key of `db`).
    pub fn user_key(self, db: u8, engine_key: &[u8]) -> Option<&[u8]> {
        let pos = engine_key.strip_prefix(&meta_prefix(db)[..])?;
        match self {
            Keyspace::Ordered => Some(pos),
            Keyspace::Slots => pos.get(2..),
        }
    }

    /// The user key of a meta key of any database (`engine_key` is `db 0x00 pos`; `None` when too short).
    pub fn user_key_any(self, engine_key: &[u8]) -> Option<&[u8]> {
        match self {
            Keyspace::Ordered => engine_key.get(2..),
            Keyspace::Slots => engine_key.get(4..),
        }
    }

    /// The bounds `[lower, upper)` of the meta keys of `slot` in database `db` (`Slots` only: in the
    /// `Ordered` keyspace a slot's keys are spread over the whole database, and the bounds are those of the
    /// database).
    pub fn slot_meta_range(self, db: u8, slot: u16) -> (Vec<u8>, Vec<u8>) {
        match self {
            Keyspace::Ordered => (meta_prefix(db).to_vec(), meta_end(db).to_vec()),
            Keyspace::Slots => {
                let mut lo = meta_prefix(db).to_vec();
                lo.extend_from_slice(&slot.to_be_bytes());
                let mut hi = meta_prefix(db).to_vec();
                hi.extend_from_slice(&(u32::from(slot) + 1).to_be_bytes()[2..]);
                if slot == u16::MAX {
                    hi = meta_end(db).to_vec();
                }
                (lo, hi)
            }
        }
    }

    /// The version to give a new collection of `user_key` whose counter is `counter`: the counter itself
    /// (`Ordered`), or `slot << 48 | counter` (`Slots`), so the member and registry records of one slot's
    /// collections are one range each ([`version_slot_range`]).
    pub fn version_for(self, user_key: &[u8], counter: u64) -> u64 {
        match self {
            Keyspace::Ordered => counter,
            Keyspace::Slots => {
                (u64::from(crate::cluster::key_slot(user_key)) << VERSION_SLOT_SHIFT) | (counter & VERSION_COUNTER_MAX)
            }
        }
    }

    /// The counter part of `version` (what the next counter must stay above).
    pub fn counter_of(self, version: u64) -> u64 {
        match self {
            Keyspace::Ordered => version,
            Keyspace::Slots => version & VERSION_COUNTER_MAX,
        }
    }

    /// The layout marker's word for this keyspace (`layout.rs`): none for `Ordered`, `slots` for `Slots`.
    pub fn marker_word(self) -> Option<&'static str> {
        match self {
            Keyspace::Ordered => None,
            Keyspace::Slots => Some("slots"),
        }
    }

    /// What users call it in messages and options (`--to`).
    pub fn name(self) -> &'static str {
        match self {
            Keyspace::Ordered => "ordered",
            Keyspace::Slots => "slots",
        }
    }
}

/// The record holding the next version counter of a `Slots` keyspace (`counter:u64be`), outside every
/// database's range like the layout marker.
pub const NEXT_VERSION_KEY: &[u8] = b"\xfcshaledb-next-version";

/// The versions of the collections of `slot` in the `Slots` keyspace: `[slot << 48, (slot + 1) << 48)`.
pub fn version_slot_range(slot: u16) -> (u64, u64) {
    let lo = u64::from(slot) << VERSION_SLOT_SHIFT;
    (lo, lo + (1 << VERSION_SLOT_SHIFT))
}

/// The engine key of `user_key` in database `db` of the `Ordered` keyspace (tests and tools that build
/// records of a standalone server's database).
pub fn meta_key(db: u8, user_key: &[u8]) -> Vec<u8> {
    Keyspace::Ordered.meta_key(db, user_key)
}

/// The prefix shared by every meta key of database `db`.
pub fn meta_prefix(db: u8) -> [u8; 2] {
    [db, KIND_META]
}

/// The exclusive upper bound of the meta keys of database `db` (the first key after them).
pub fn meta_end(db: u8) -> [u8; 2] {
    [db, KIND_META + 1]
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

// ---------------------------------------------------------------------------------------------------------
// Collections

/// The bytes of `coll_header` before `extra`.
pub const COLL_HEADER_LEN: usize = 16;

/// A decoded collection meta value (any type but string).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Coll {
    pub typ: Type,
    /// Absolute expiry, Unix milliseconds.
    pub expire_at_ms: Option<u64>,
    /// The version its member records are keyed by.
    pub version: u64,
    /// Member count (list: element count; stream: entry count).
    pub size: u64,
    /// Type-specific fields after the header (list: head and tail indexes; stream: see types/stream.rs).
    pub extra: Vec<u8>,
}

impl Coll {
    /// A new, empty collection of `typ` with `version` (allocate one with `WriteCtx::new_version`).
    pub fn new(typ: Type, version: u64) -> Coll {
        Coll { typ, expire_at_ms: None, version, size: 0, extra: Vec::new() }
    }

    /// Decodes a stored meta value of a collection (`None` for a string: not a collection).
    pub fn decode(stored: &[u8]) -> Result<Option<Coll>, BadValue> {
        let m = decode_meta(stored)?;
        if m.typ == Type::String {
            return Ok(None);
        }
        let p = stored.get(m.payload_at..).ok_or(BadValue("truncated collection header"))?;
        if p.len() < COLL_HEADER_LEN {
            return Err(BadValue("truncated collection header"));
        }
        Ok(Some(Coll {
            typ: m.typ,
            expire_at_ms: m.expire_at_ms,
            version: be_u64(&p[0..8]),
            size: be_u64(&p[8..16]),
            extra: p[16..].to_vec(),
        }))
    }

    /// The stored meta value.
    pub fn encode_into(&self, out: &mut Vec<u8>) {
        encode_head_into(self.typ, self.expire_at_ms, out);
        out.extend_from_slice(&self.version.to_be_bytes());
        out.extend_from_slice(&self.size.to_be_bytes());
        out.extend_from_slice(&self.extra);
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(9 + COLL_HEADER_LEN + self.extra.len());
        self.encode_into(&mut v);
        v
    }

    /// `extra` read as big-endian u64s at 8-byte slot `i` (0 when absent).
    pub fn extra_u64(&self, i: usize) -> u64 {
        self.extra.get(i * 8..i * 8 + 8).map_or(0, be_u64)
    }

    /// Sets the 8-byte slot `i` of `extra`, growing it with zeros as needed.
    pub fn set_extra_u64(&mut self, i: usize, v: u64) {
        if self.extra.len() < i * 8 + 8 {
            self.extra.resize(i * 8 + 8, 0);
        }
        self.extra[i * 8..i * 8 + 8].copy_from_slice(&v.to_be_bytes());
    }
}

/// A big-endian u64 from exactly 8 bytes (callers slice first).
pub fn be_u64(b: &[u8]) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[..8]);
    u64::from_be_bytes(a)
}

/// The prefix of every member key of `version` in database `db`: `db 0x01 version`.
pub fn version_prefix(db: u8, version: u64) -> [u8; 10] {
    let mut p = [0u8; 10];
    p[0] = db;
    p[1] = KIND_MEMBER;
    p[2..].copy_from_slice(&version.to_be_bytes());
    p
}

/// The prefix of the member keys of `version` with sub-kind `sub`: `db 0x01 version sub`.
pub fn sub_prefix(db: u8, version: u64, sub: u8) -> [u8; 11] {
    let mut p = [0u8; 11];
    p[..10].copy_from_slice(&version_prefix(db, version));
    p[10] = sub;
    p
}

/// A member key: `db 0x01 version sub part`, written into `out` (cleared first).
pub fn member_key_into(db: u8, version: u64, sub: u8, part: &[u8], out: &mut Vec<u8>) {
    out.clear();
    out.reserve(11 + part.len());
    out.extend_from_slice(&sub_prefix(db, version, sub));
    out.extend_from_slice(part);
}

pub fn member_key(db: u8, version: u64, sub: u8, part: &[u8]) -> Vec<u8> {
    let mut k = Vec::new();
    member_key_into(db, version, sub, part, &mut k);
    k
}

/// The exclusive upper bound of a prefix: the prefix with its last byte incremented (carrying), or `None`
/// when every byte is 0xff (no bound).
pub fn prefix_end(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut p = prefix.to_vec();
    while let Some(last) = p.pop() {
        if last < 0xff {
            p.push(last + 1);
            return Some(p);
        }
    }
    None
}

/// The registry key of `version` in database `db`.
pub fn registry_key(db: u8, version: u64) -> [u8; 10] {
    let mut p = [0u8; 10];
    p[0] = db;
    p[1] = KIND_REGISTRY;
    p[2..].copy_from_slice(&version.to_be_bytes());
    p
}

/// A sorted-set score as 8 bytes whose unsigned big-endian order is the numeric order of the scores
/// (-inf < negatives < -0 = +0 < positives < +inf). `-0.0` is stored as `+0.0`; NaN is never stored (Redis
/// refuses it).
pub fn score_to_sortable(score: f64) -> [u8; 8] {
    let score = if score == 0.0 { 0.0 } else { score };
    let bits = score.to_bits();
    let key = if bits >> 63 == 1 { !bits } else { bits | (1 << 63) };
    key.to_be_bytes()
}

/// The inverse of [`score_to_sortable`].
pub fn sortable_to_score(b: [u8; 8]) -> f64 {
    let key = u64::from_be_bytes(b);
    let bits = if key >> 63 == 1 { key & !(1 << 63) } else { !key };
    f64::from_bits(bits)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slot_first_keyspace_puts_each_slot_in_one_range() {
        let ks = Keyspace::Slots;
        for key in [&b"a"[..], b"user:1000", b"{tag}x", b"", b"\xff\xff"] {
            let slot = crate::cluster::key_slot(key);
            let mk = ks.meta_key(0, key);
            let (lo, hi) = ks.slot_meta_range(0, slot);
            assert!(lo <= mk && mk < hi, "{key:?}");
            assert_eq!(ks.user_key(0, &mk), Some(key));
            assert_eq!(ks.user_key_any(&mk), Some(key));
            assert_eq!(ks.user_of_pos(&mk[2..]), key);
            assert_eq!(ks.pos_of(key), mk[2..].to_vec());
            assert_eq!(Keyspace::pos_key(0, &ks.pos_of(key)), mk);
            // Versions of the slot's collections fall in its version range.
            let v = ks.version_for(key, 12345);
            let (vlo, vhi) = version_slot_range(slot);
            assert!((vlo..vhi).contains(&v));
            assert_eq!(ks.counter_of(v), 12345);
        }
        // Consecutive slots' ranges touch; the last one ends at the database's end.
        assert_eq!(ks.slot_meta_range(0, 7).1, ks.slot_meta_range(0, 8).0);
        assert_eq!(ks.slot_meta_range(0, 16383).1, vec![0, KIND_META, 0x40, 0x00]);
        assert!(ks.slot_meta_range(0, 16383).1 <= meta_end(0).to_vec());
        // The ordered keyspace is the user key itself.
        let o = Keyspace::Ordered;
        assert_eq!(o.meta_key(2, b"k"), vec![2, KIND_META, b'k']);
        assert_eq!(o.version_for(b"k", 9), 9);
        // A damaged slot-first key shorter than a slot gives no user key rather than a panic.
        assert_eq!(ks.user_key(0, &[0, KIND_META, 1]), None);
        assert_eq!(ks.user_of_pos(&[1]), b"");
    }

    #[test]
    fn grammar_matches_docs() {
        shaledb_testkit::grammar::assert_module_grammar_in_doc(
            include_str!("keys.rs"),
            include_str!("../../../docs/format/server-keys.md"),
        );
    }

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
    fn collection_headers_round_trip() {
        let mut c = Coll::new(Type::List, 7);
        c.size = 3;
        c.expire_at_ms = Some(99);
        c.set_extra_u64(1, 42);
        let v = c.encode();
        assert_eq!(Coll::decode(&v).unwrap(), Some(c.clone()));
        assert_eq!(c.extra_u64(1), 42);
        assert_eq!(c.extra_u64(0), 0);
        assert_eq!(Coll::decode(&encode_string(b"x", None)).unwrap(), None);
        assert!(Coll::decode(&[0x02, 0, 0]).is_err());
    }

    #[test]
    fn member_keys_of_one_version_are_one_range() {
        let a = member_key(1, 5, SUB_MEMBER, b"zzz");
        let b = member_key(1, 6, SUB_MEMBER, b"");
        assert!(a < b);
        let p = version_prefix(1, 5);
        assert!(a.starts_with(&p));
        assert!(prefix_end(&p).unwrap().as_slice() <= b.as_slice());
        assert_eq!(prefix_end(&[1, 0xff]), Some(vec![2]));
        assert_eq!(prefix_end(&[0xff]), None);
        assert!(meta_key(1, b"\xff\xff") < registry_key(1, 0).to_vec());
    }

    #[test]
    fn scores_sort_numerically() {
        let xs = [
            f64::NEG_INFINITY,
            -1e300,
            -2.5,
            -1.0,
            -f64::MIN_POSITIVE,
            0.0,
            f64::MIN_POSITIVE,
            1.0,
            3.25,
            1e300,
            f64::INFINITY,
        ];
        for w in xs.windows(2) {
            assert!(score_to_sortable(w[0]) < score_to_sortable(w[1]), "{} < {}", w[0], w[1]);
        }
        for x in xs {
            assert_eq!(sortable_to_score(score_to_sortable(x)), x);
        }
        assert_eq!(score_to_sortable(-0.0), score_to_sortable(0.0));
    }

    #[test]
    fn meta_keys_sort_by_database_then_key() {
        assert!(meta_key(0, b"zzz") < meta_key(1, b""));
        assert_eq!(Keyspace::Ordered.user_key(3, &meta_key(3, b"k")), Some(&b"k"[..]));
        assert_eq!(Keyspace::Ordered.user_key(2, &meta_key(3, b"k")), None);
    }
}
