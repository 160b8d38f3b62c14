//! TTL mode: RocksDB's `DBWithTTL`. Every value written carries the time it was written; compactions drop
//! values older than the TTL; reads strip the time and, when asked, hide expired values.
//!
//! ```text
//! stored_value := user_value timestamp:fixed32   ; timestamp: Unix seconds at write, little-endian
//! ```
//!
//! The same layout as RocksDB's `DBWithTTL` (a 4-byte timestamp appended to the value; RocksDB writes it in
//! the same little-endian fixed32 encoding). Deletions, single deletions and keys carry no timestamp.
//! Documented in `docs/format/ttl.md`.
//!
//! - **Turning it on.** [`Options::ttl`](crate::Options::ttl) (or [`Db::open_with_ttl`]) opens the database in
//!   TTL mode. A database must always be opened in the same mode: ShaleDB does not record the mode on disk
//!   (nor does RocksDB), so a TTL database opened without it returns values with their 4-byte timestamp, and a
//!   plain database opened with it reports values shorter than 4 bytes as corruption and strips 4 bytes from
//!   the others. TTL mode with a merge operator is refused (`InvalidArgument`): RocksDB wraps the operator to
//!   strip and re-append timestamps, which ShaleDB does not do yet.
//! - **Expiry.** A value written at `t` is *expired* at `now` when `ttl.seconds > 0` and `t + seconds < now`
//!   (RocksDB's `IsStale`). `seconds == 0` never expires (RocksDB: `ttl <= 0`).
//! - **Compaction.** A built-in compaction filter removes expired values (turning them into deletions,
//!   dropped at the bottom; see [`crate::compaction_filter`] for which versions a filter sees: the newest one,
//!   newer than every snapshot). It then runs the user's [`Options::compaction_filter`](crate::Options) on the
//!   value without its timestamp; a changed value keeps the original timestamp, as in RocksDB.
//! - **Reads.** `get`, `multi_get` and iterators return values without the timestamp. By default they also
//!   return expired values until a compaction removes them (RocksDB's behaviour);
//!   [`ReadOptions::hide_expired`](crate::ReadOptions::hide_expired) hides them instead, so reads give the
//!   same answer before and after a compaction.
//! - **Clock.** [`Ttl::clock`] gives the time for both writes and expiry: inject a [`Clock`] in tests.
//!   Timestamps are 32-bit seconds: a clock past 2106 is clamped to `u32::MAX`.

use crate::compaction_filter::{self, CompactionFilter, Decision, FilterContext};
use crate::Db;
use shaledb_format::batch::BatchRep;
use shaledb_format::ikey::ValueKind;
use shaledb_vfs::{Error, Result};
use std::path::Path;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

/// Bytes of the timestamp appended to every value in TTL mode.
pub const TIMESTAMP_LEN: usize = 4;

/// A source of the current time, in Unix seconds.
pub trait Clock: Send + Sync {
    /// Seconds since the Unix epoch.
    fn now_secs(&self) -> u64;
}

/// The system's wall clock.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_secs(&self) -> u64 {
        SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
    }
}

/// TTL mode settings (see the module documentation).
#[derive(Clone)]
pub struct Ttl {
    /// Values older than this many seconds expire; 0: never.
    pub seconds: u32,
    /// The time source for write timestamps and expiry. Default: [`SystemClock`].
    pub clock: Arc<dyn Clock>,
}

impl Ttl {
    /// A TTL of `seconds` on the system clock.
    pub fn new(seconds: u32) -> Ttl {
        Ttl { seconds, clock: Arc::new(SystemClock) }
    }

    /// The current time as a timestamp (clamped to 32 bits).
    pub(crate) fn now(&self) -> u32 {
        u32::try_from(self.clock.now_secs()).unwrap_or(u32::MAX)
    }

    /// True when a value stamped `ts` has expired at `now`.
    pub(crate) fn expired(&self, ts: u32, now: u32) -> bool {
        self.seconds > 0 && u64::from(ts) + u64::from(self.seconds) < u64::from(now)
    }
}

impl std::fmt::Debug for Ttl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ttl").field("seconds", &self.seconds).finish_non_exhaustive()
    }
}

/// The timestamp of a stored value and the length of its user part; `None` when it is too short to hold one.
pub(crate) fn split(stored: &[u8]) -> Option<(usize, u32)> {
    let at = stored.len().checked_sub(TIMESTAMP_LEN)?;
    let ts = stored.get(at..).and_then(|b| <[u8; 4]>::try_from(b).ok())?;
    Some((at, u32::from_le_bytes(ts)))
}

/// The error for a stored value without room for its timestamp.
pub(crate) fn too_short(key: &[u8], len: usize) -> Error {
    Error::corruption(
        "",
        0,
        format!(
            "TTL mode: the value of key {:?} is {len} bytes, shorter than its {TIMESTAMP_LEN}-byte timestamp \
             (was the database written without TTL mode?)",
            String::from_utf8_lossy(key)
        ),
    )
}

/// Read side: turns a stored value into what the user sees. Returns `false` (and clears `value`) when the
/// value is expired and `hide_expired` is set.
pub(crate) fn strip(ttl: &Ttl, hide_expired: bool, now: u32, key: &[u8], value: &mut Vec<u8>) -> Result<bool> {
    let Some((len, ts)) = split(value) else { return Err(too_short(key, value.len())) };
    if hide_expired && ttl.expired(ts, now) {
        value.clear();
        return Ok(false);
    }
    value.truncate(len);
    Ok(true)
}

/// Write side: a copy of `batch` with `now` appended to every value (puts only). Fails when a value would
/// outgrow an entry.
pub(crate) fn stamp(batch: &BatchRep, now: u32) -> Result<BatchRep> {
    let mut out = BatchRep::with_capacity(batch.approximate_size() + 4 * batch.count() as usize);
    out.set_sequence(batch.sequence());
    let mut buf = Vec::new();
    for e in batch.iter() {
        let e = e?;
        match e.kind {
            ValueKind::Value => {
                buf.clear();
                buf.extend_from_slice(e.value);
                buf.extend_from_slice(&now.to_le_bytes());
                crate::options::limits::check_len(e.key, &buf)?;
                out.push_record(e.family, ValueKind::Value, e.key, &buf);
            }
            // Deletions and range tombstones have no value to stamp.
            ValueKind::Deletion | ValueKind::SingleDeletion | ValueKind::RangeDeletion => {
                out.push_record(e.family, e.kind, e.key, e.value)
            }
            ValueKind::Merge => {
                return Err(Error::InvalidArgument("merge is not supported in TTL mode".into()));
            }
            // The batch decoder refuses the kind; a batch can never carry one.
            ValueKind::BlobIndex => {
                return Err(Error::InvalidArgument("a write batch cannot hold a blob reference".into()));
            }
        }
    }
    Ok(out)
}

/// The built-in filter of TTL mode at time `now`: removes expired values, then runs the user's filter (if any)
/// on the value without its timestamp; a changed value keeps the original timestamp.
pub(crate) fn filter(
    ttl: &Ttl,
    now: u32,
    user: Option<&dyn CompactionFilter>,
    cx: &FilterContext,
    key: &[u8],
    value: &[u8],
) -> Result<Decision> {
    let Some((len, ts)) = split(value) else { return Err(too_short(key, value.len())) };
    if ttl.expired(ts, now) {
        return Ok(Decision::Remove);
    }
    let Some(user) = user else { return Ok(Decision::Keep) };
    Ok(match compaction_filter::call(user, cx, key, &value[..len])? {
        Decision::ChangeValue(mut v) => {
            v.extend_from_slice(&ts.to_le_bytes());
            Decision::ChangeValue(v)
        }
        d => d,
    })
}

impl Db {
    /// Opens the database at `path` in TTL mode with a TTL of `ttl_seconds` on the system clock: `opts` with
    /// [`Options::ttl`](crate::Options::ttl) set (RocksDB's `DBWithTTL::Open`). See [`crate::ttl`].
    ///
    /// ```
    /// use shaledb::{Db, Options};
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = Db::open_with_ttl(dir.path(), Options::default(), 3600)?;
    /// db.put("session", "data")?;
    /// assert_eq!(db.get("session")?, Some(b"data".to_vec())); // the timestamp is stripped
    /// # Ok::<(), shaledb::Error>(())
    /// ```
    pub fn open_with_ttl(path: impl AsRef<Path>, opts: crate::Options, ttl_seconds: u32) -> Result<Db> {
        Db::open(path, crate::Options { ttl: Some(Ttl::new(ttl_seconds)), ..opts })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stamp_appends_to_values_only_and_strip_undoes_it() {
        let mut b = BatchRep::new();
        b.put(b"k", b"v");
        b.delete(b"d");
        b.single_delete(b"s");
        b.set_sequence(9);
        let s = stamp(&b, 0x0102_0304).unwrap();
        assert_eq!(s.sequence(), 9);
        let e: Vec<_> = s.iter().map(|e| e.unwrap()).collect();
        assert_eq!(e[0].value, b"v\x04\x03\x02\x01");
        assert_eq!((e[1].kind, e[2].kind), (ValueKind::Deletion, ValueKind::SingleDeletion));
        let ttl = Ttl::new(10);
        let mut v = e[0].value.to_vec();
        assert!(strip(&ttl, true, 0x0102_0304 + 10, b"k", &mut v).unwrap());
        assert_eq!(v, b"v");
        let mut v = e[0].value.to_vec();
        assert!(!strip(&ttl, true, 0x0102_0304 + 11, b"k", &mut v).unwrap());
        let mut v = e[0].value.to_vec();
        assert!(strip(&ttl, false, 0x0102_0304 + 11, b"k", &mut v).unwrap());
        assert_eq!(v, b"v");
        assert!(strip(&ttl, false, 0, b"k", &mut b"abc".to_vec()).unwrap_err().is_corruption());
        let mut m = BatchRep::new();
        m.merge(b"k", b"op");
        assert!(matches!(stamp(&m, 1), Err(Error::InvalidArgument(_))));
    }

    #[test]
    fn zero_seconds_never_expire() {
        let ttl = Ttl::new(0);
        assert!(!ttl.expired(0, u32::MAX));
        let ttl = Ttl::new(5);
        assert!(!ttl.expired(100, 105) && ttl.expired(100, 106));
        assert!(!ttl.expired(u32::MAX, u32::MAX));
    }

    #[test]
    fn grammar_matches_the_format_page() {
        shaledb_testkit::grammar::assert_module_grammar_in_doc(
            include_str!("ttl.rs"),
            include_str!("../../../docs/format/ttl.md"),
        );
    }
}
