//! [`ReadCtx`]: what a read command sees, and the merged scans of the engine and the commit step's pending
//! writes ([`Scan`], [`Members`]).

use super::{coll_of_type, Error, Overlay, ReadCounts};
use crate::keys;
use bytes::Bytes;
use shaledb::{Db, ReadOptions, ReadTier};
use std::sync::atomic::{AtomicBool, Ordering};

/// What a read command sees: the engine (on the connection's task), or, in the commit step, the engine
/// through the group's pending writes ([`WriteCtx::view`](super::WriteCtx::view)).
pub struct ReadCtx<'a> {
    pub db: &'a Db,
    /// How the database orders its keys (a standalone server's or a cluster member's, keys.rs).
    pub keyspace: keys::Keyspace,
    pub db_index: u8,
    pub now_ms: u64,
    /// The commit step's pending writes (reads inside `EXEC`); `None` on connections.
    pub(super) overlay: Option<&'a Overlay>,
    /// Reads as of this snapshot (see [`ReadCtx::pinned`]).
    pub(super) snapshot: Option<shaledb::Snapshot>,
    /// Where a lookup that finds no live key reports it (Redis's `keymiss` event); `None` while the `m`
    /// class is off.
    pub(super) misses: Option<&'a Misses>,
    /// Where reads are counted (tests bounding a command's reads); `None`: not counted.
    pub(super) counts: Option<&'a ReadCounts>,
    /// A run on the connection's task that must not touch the disk ([`CacheOnly`]); `None`: reads go to the
    /// files as needed and accesses are recorded at once.
    pub(super) cache_only: Option<&'a CacheOnly>,
}

/// A read command's run on the connection's task with `ReadTier::BlockCacheOnly` (issue 41): every engine
/// read of the run answers from memory or fails with the engine's `Incomplete`, which the run records here
/// (whatever the command then makes of the error: the reply of such a run is never sent). The run's accesses
/// (the access clock's touches) wait here too, applied only by [`CacheOnly::finish`] once the run is known
/// to answer, so a command rerun with disk I/O records them once.
#[derive(Default)]
pub struct CacheOnly {
    incomplete: AtomicBool,
    /// `(engine address, key id)` of each access, in order ([`crate::access::key_id`]).
    touches: parking_lot::Mutex<Touches>,
}

/// The accesses of a run: the first one inline, so a single-key read (GET, HGET ...) allocates nothing.
#[derive(Default)]
struct Touches {
    first: Option<(usize, u64)>,
    rest: Vec<(usize, u64)>,
}

impl CacheOnly {
    /// Whether a read of the run needed the disk: its reply must be thrown away and the command rerun.
    pub fn incomplete(&self) -> bool {
        self.incomplete.load(Ordering::Relaxed)
    }

    /// The run answers: records its accesses.
    pub fn finish(self) {
        let t = self.touches.into_inner();
        for (server, id) in t.first.into_iter().chain(t.rest) {
            crate::access::touch_id(server, id, true);
        }
    }

    fn touch(&self, server: usize, id: u64) {
        let mut t = self.touches.lock();
        match t.first {
            None => t.first = Some((server, id)),
            Some(_) => t.rest.push((server, id)),
        }
    }

    fn note(&self, e: &shaledb::Error) {
        if e.is_incomplete() {
            self.incomplete.store(true, Ordering::Relaxed);
        }
    }
}

/// The keys the lookups of one command found missing or expired, in order: `(database, key)`. Whoever ran
/// the command publishes them as `keymiss` events (`notify.rs`), as Redis does for every read lookup
/// (`lookupKeyRead`) of a key it does not hold.
#[derive(Default)]
pub struct Misses(parking_lot::Mutex<Vec<(u8, Bytes)>>);

impl Misses {
    fn push(&self, db: u8, user_key: &[u8]) {
        self.0.lock().push((db, Bytes::copy_from_slice(user_key)));
    }

    /// The misses recorded so far, in order; leaves none behind.
    pub fn take(&self) -> Vec<(u8, Bytes)> {
        std::mem::take(&mut *self.0.lock())
    }
}

impl<'a> ReadCtx<'a> {
    /// A read context on a connection: the latest state of the engine at each read.
    pub fn new(db: &'a Db, keyspace: keys::Keyspace, db_index: u8, now_ms: u64) -> ReadCtx<'a> {
        ReadCtx {
            db,
            keyspace,
            db_index,
            now_ms,
            overlay: None,
            snapshot: None,
            misses: None,
            counts: None,
            cache_only: None,
        }
    }

    /// The same context reading only what needs no disk I/O, recording in `run` whether a read needed it
    /// (see [`CacheOnly`]).
    pub fn cache_only(self, run: &'a CacheOnly) -> ReadCtx<'a> {
        ReadCtx { cache_only: Some(run), ..self }
    }

    /// The same context, its lookups of missing keys recorded in `misses` (for the `keymiss` event).
    pub fn reporting_misses(self, misses: Option<&'a Misses>) -> ReadCtx<'a> {
        ReadCtx { misses, ..self }
    }

    /// The same context reading as of one snapshot taken now, so a command that reads a collection's meta
    /// value and then its members (HGETALL, LRANGE, ZRANGE ...) sees one state even while the commit step
    /// writes. In the commit step (a view with pending writes) nothing else writes, so no snapshot is taken.
    pub fn pinned(&self) -> ReadCtx<'a> {
        let snapshot = match (&self.snapshot, self.overlay) {
            (Some(s), _) => Some(s.clone()),
            (None, Some(_)) => None,
            (None, None) => Some(self.db.snapshot()),
        };
        ReadCtx {
            db: self.db,
            keyspace: self.keyspace,
            db_index: self.db_index,
            now_ms: self.now_ms,
            overlay: self.overlay,
            snapshot,
            misses: self.misses,
            counts: self.counts,
            cache_only: self.cache_only,
        }
    }

    fn read_options(&self) -> ReadOptions {
        let read_tier = if self.cache_only.is_some() { ReadTier::BlockCacheOnly } else { ReadTier::All };
        ReadOptions { snapshot: self.snapshot.clone(), read_tier, ..ReadOptions::default() }
    }

    /// An engine error as storage reports it; an `Incomplete` one is recorded in the run first.
    fn engine_error(&self, e: shaledb::Error) -> Error {
        if let Some(run) = self.cache_only {
            run.note(&e);
        }
        Error::read(e)
    }

    /// An engine key's value (pending writes first in the commit step).
    pub fn get_raw(&self, engine_key: &[u8]) -> Result<Option<Vec<u8>>, Error> {
        if let Some(c) = self.counts {
            c.get();
        }
        if let Some(v) = self.overlay.and_then(|o| o.get(engine_key)) {
            return Ok(v.clone());
        }
        let r = match (&self.snapshot, self.cache_only) {
            (None, None) => self.db.get(engine_key),
            _ => self.db.get_opt(&self.read_options(), engine_key),
        };
        r.map_err(|e| self.engine_error(e))
    }

    /// The live meta value of `user_key`, or `None` if missing or expired; a live key's access is recorded
    /// in the access clock (`access.rs`).
    pub fn get_meta(&self, user_key: &[u8]) -> Result<Option<(keys::Meta, Bytes)>, Error> {
        let server = self.db as *const Db as usize;
        let id = crate::access::key_id(server, self.db_index, user_key);
        // The clock's cache miss overlaps the engine's lookup.
        crate::access::prefetch(id);
        let r = self.peek_meta(user_key)?;
        if r.is_some() {
            match self.cache_only {
                Some(run) => run.touch(server, id),
                None => crate::access::touch_id(server, id, true),
            }
        }
        Ok(r)
    }

    /// [`ReadCtx::get_meta`] without recording an access (TYPE, TTL, EXISTS: Redis's `LOOKUP_NOTOUCH`).
    /// A missing or expired key is reported as a miss, as every read lookup of Redis does.
    pub fn peek_meta(&self, user_key: &[u8]) -> Result<Option<(keys::Meta, Bytes)>, Error> {
        let r = self.peek_meta_quietly(user_key)?;
        if r.is_none() {
            if let Some(m) = self.misses {
                m.push(self.db_index, user_key);
            }
        }
        Ok(r)
    }

    /// [`ReadCtx::peek_meta`] that reports no miss either (OBJECT: Redis's `LOOKUP_NONOTIFY`).
    pub fn peek_meta_quietly(&self, user_key: &[u8]) -> Result<Option<(keys::Meta, Bytes)>, Error> {
        let k = self.keyspace.meta_key(self.db_index, user_key);
        match self.get_raw(&k)? {
            None => Ok(None),
            Some(v) => match keys::decode_meta(&v) {
                Ok(m) if m.expired(self.now_ms) => Ok(None),
                Ok(m) => Ok(Some((m, Bytes::from(v)))),
                Err(e) => Err(Error::Corrupt(e.to_string())),
            },
        }
    }

    /// The live collection `user_key` if it is of type `typ`: `Ok(None)` when missing or expired,
    /// `Err(WRONGTYPE)` when it holds another type. Use it on a [`ReadCtx::pinned`] context before reading
    /// members.
    pub fn get_coll(&self, user_key: &[u8], typ: keys::Type) -> Result<Option<keys::Coll>, Error> {
        let Some((m, stored)) = self.get_meta(user_key)? else { return Ok(None) };
        coll_of_type(&m, &stored, typ).map(Some)
    }

    /// A member record of collection `c`.
    pub fn get_member(&self, c: &keys::Coll, sub: u8, part: &[u8]) -> Result<Option<Vec<u8>>, Error> {
        self.get_raw(&keys::member_key(self.db_index, c.version, sub, part))
    }

    /// The engine entries with keys in `[lower, upper)`, ascending or (`reverse`) descending, pending
    /// writes merged in (a pending delete hides the engine's entry). Errors end the iteration with an
    /// `Err` item.
    pub fn scan(&self, lower: &[u8], upper: &[u8], reverse: bool) -> Scan<'a> {
        let mut it = self.db.cursor_opt(&ReadOptions {
            iterate_lower_bound: Some(lower.to_vec()),
            iterate_upper_bound: Some(upper.to_vec()),
            fill_cache: true,
            ..self.read_options()
        });
        if reverse {
            it.seek_to_last();
        } else {
            it.seek(lower);
        }
        if let Some(c) = self.counts {
            c.seek();
        }
        let pending = match self.overlay {
            Some(o) if lower < upper => {
                Some(o.range::<[u8], _>((std::ops::Bound::Included(lower), std::ops::Bound::Excluded(upper))))
            }
            _ => None,
        };
        Scan {
            it,
            pending,
            reverse,
            peeked: None,
            advance: false,
            done: false,
            counts: self.counts,
            cache_only: self.cache_only,
        }
    }

    /// The member records of collection `c` with sub-kind `sub`, as `(part, value)` (the part is the key
    /// after `db 0x01 version sub`), in order or (`reverse`) reversed, starting at `from` (a part; inclusive;
    /// forward: the first part >= from; reverse: the last part <= from) when given.
    pub fn members(&self, c: &keys::Coll, sub: u8, from: Option<&[u8]>, reverse: bool) -> Members<'a> {
        let prefix = keys::sub_prefix(self.db_index, c.version, sub);
        let mut lower = prefix.to_vec();
        let mut upper = keys::prefix_end(&prefix).unwrap_or_default();
        if let Some(f) = from {
            if reverse {
                // Parts <= f: the upper bound is just after f.
                upper = prefix.to_vec();
                upper.extend_from_slice(f);
                upper.push(0);
            } else {
                lower.extend_from_slice(f);
            }
        }
        Members { scan: self.scan(&lower, &upper, reverse) }
    }

    /// The member records of collection `c` with sub-kind `sub` in order from the part `from` (inclusive)
    /// up to the part `until` (exclusive; the end when `None`): a scan that must not step over the records
    /// past a known end.
    pub fn members_until(&self, c: &keys::Coll, sub: u8, from: &[u8], until: Option<&[u8]>) -> Members<'a> {
        let prefix = keys::sub_prefix(self.db_index, c.version, sub);
        let lower = [&prefix[..], from].concat();
        let upper = match until {
            Some(u) => [&prefix[..], u].concat(),
            None => keys::prefix_end(&prefix).unwrap_or_default(),
        };
        Members { scan: self.scan(&lower, &upper, false) }
    }
}

impl ReadCtx<'_> {
    /// Calls `f` with the values of up to `limit` member records of `c` with sub-kind `sub`, in order from
    /// the part `from` (inclusive), and returns how many it visited. On a connection (no pending writes) it
    /// reads the engine's iterator directly, without copying keys: LRANGE's scan.
    pub fn for_member_values(
        &self,
        c: &keys::Coll,
        sub: u8,
        from: &[u8],
        limit: usize,
        mut f: impl FnMut(&[u8]),
    ) -> Result<usize, Error> {
        let mut n = 0;
        if self.overlay.is_some() {
            for r in self.members(c, sub, Some(from), false).take(limit) {
                f(&r?.1);
                n += 1;
            }
            return Ok(n);
        }
        let prefix = keys::sub_prefix(self.db_index, c.version, sub);
        let mut lower = prefix.to_vec();
        lower.extend_from_slice(from);
        let upper = keys::prefix_end(&prefix).unwrap_or_default();
        let mut it = self.db.cursor_opt(&ReadOptions {
            iterate_lower_bound: Some(lower.clone()),
            iterate_upper_bound: Some(upper),
            fill_cache: true,
            ..self.read_options()
        });
        it.seek(&lower);
        if let Some(c) = self.counts {
            c.seek();
        }
        while n < limit && it.valid() {
            f(it.value());
            n += 1;
            it.next();
            if let Some(c) = self.counts {
                c.step();
            }
        }
        it.status().map_err(|e| self.engine_error(e))?;
        Ok(n)
    }
}

/// A merged, bounded scan: see [`ReadCtx::scan`].
pub struct Scan<'a> {
    it: shaledb::Cursor,
    pending: Option<std::collections::btree_map::Range<'a, Vec<u8>, Option<Vec<u8>>>>,
    reverse: bool,
    /// The next pending entry not yet merged.
    peeked: Option<(&'a Vec<u8>, &'a Option<Vec<u8>>)>,
    /// The engine's entry was used: step past it before the next item. Stepping only when the next item
    /// is asked for spares a scan that takes one item (a pop, a pick) a step of the engine's cursor.
    advance: bool,
    done: bool,
    counts: Option<&'a ReadCounts>,
    cache_only: Option<&'a CacheOnly>,
}

impl Scan<'_> {
    fn peek_pending(&mut self) -> Option<(&Vec<u8>, &Option<Vec<u8>>)> {
        if self.peeked.is_none() {
            if let Some(p) = self.pending.as_mut() {
                self.peeked = if self.reverse { p.next_back() } else { p.next() };
            }
        }
        self.peeked
    }

    fn step_engine(&mut self) {
        if let Some(c) = self.counts {
            c.step();
        }
        if self.reverse {
            self.it.prev();
        } else {
            self.it.next();
        }
    }
}

impl Iterator for Scan<'_> {
    type Item = Result<(Vec<u8>, Vec<u8>), Error>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if self.done {
                return None;
            }
            if self.advance {
                self.advance = false;
                self.step_engine();
            }
            let engine = self.it.valid().then(|| self.it.key().to_vec());
            if engine.is_none() {
                if let Err(e) = self.it.status() {
                    self.done = true;
                    if let Some(run) = self.cache_only {
                        run.note(&e);
                    }
                    return Some(Err(Error::read(e)));
                }
            }
            let reverse = self.reverse;
            let pending = self.peek_pending().map(|(k, v)| (k.clone(), v.clone()));
            // Which comes first in the scan's direction: the engine's key or the pending one.
            let take_pending = match (&engine, &pending) {
                (None, None) => {
                    self.done = true;
                    return None;
                }
                (None, Some(_)) => true,
                (Some(_), None) => false,
                (Some(e), Some((p, _))) => {
                    if p == e {
                        // The pending write replaces the engine's entry.
                        self.advance = true;
                        true
                    } else {
                        (p < e) != reverse
                    }
                }
            };
            if take_pending {
                self.peeked = None;
                if let Some(c) = self.counts {
                    c.step();
                }
                let (k, v) = pending.expect("checked above");
                match v {
                    Some(v) => return Some(Ok((k, v))),
                    None => continue,
                }
            }
            let k = engine.expect("checked above");
            let v = self.it.value().to_vec();
            self.advance = true;
            return Some(Ok((k, v)));
        }
    }
}

/// Member records of one collection: see [`ReadCtx::members`]. Items are `(part, value)`.
pub struct Members<'a> {
    scan: Scan<'a>,
}

impl Iterator for Members<'_> {
    type Item = Result<(Vec<u8>, Vec<u8>), Error>;

    fn next(&mut self) -> Option<Self::Item> {
        Some(self.scan.next()?.map(|(mut k, v)| {
            k.drain(..11.min(k.len()));
            (k, v)
        }))
    }
}
