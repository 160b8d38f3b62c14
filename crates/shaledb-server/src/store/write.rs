//! [`WriteCtx`]: what a write command sees in the commit step, the engine through the group's pending
//! writes ([`Overlay`]), and those writes.

use super::{coll_of_type, Error, ReadCounts, ReadCtx, Watches};
use crate::keys;
use bytes::Bytes;
use shaledb::{Db, ReadOptions, WriteBatch, WriteOptions};
use std::collections::BTreeMap;
use std::sync::Arc;

/// The commit step's writes of the current group that are not in the engine yet: engine key -> value
/// (`None`: deleted). Reads in the commit step look here first, so a command (and every command of an
/// `EXEC`) sees the writes before it without applying them: a group's writes reach the engine as one batch
/// (one WAL record), all or nothing after a crash.
pub type Overlay = BTreeMap<Vec<u8>, Option<Vec<u8>>>;

/// Whether some client waits for keys to get elements (the wake-up registry of blocked clients,
/// `blocking.rs`): [`WriteCtx::signal_key`] records nothing while none does.
pub trait Waiters: Send + Sync {
    /// True when some client is blocked.
    fn has_waiters(&self) -> bool;
    /// True when some client is blocked in XREADGROUP (which a deleted or overwritten key ends).
    fn has_group_readers(&self) -> bool {
        false
    }
}

/// Where a replica group member's commit step sends a batch instead of writing the engine (issue 43): it
/// proposes the batch, with the tables to ingest before it (issue 44, `tables.rs`), and returns once it is
/// committed and applied (the state machine wrote it), or why not.
pub type ProposeFn = Box<dyn FnMut(&WriteBatch, Vec<Vec<u8>>) -> Result<(), String> + Send>;

/// Why the pending writes did not reach the engine.
enum PendingFailure {
    /// The engine's write failed.
    Engine(shaledb::Error),
    /// The replica group did not commit the proposal (the reason, as the commit step answers it).
    Proposal(String),
}

/// What a write command sees: reads of the engine through the group's pending writes, and those writes, in
/// the commit step.
/// The engine a [`WriteCtx`] writes to: borrowed (tests, tools) or shared (the server's commit step).
pub enum DbRef<'a> {
    Borrowed(&'a Db),
    Shared(Arc<Db>),
}

impl std::ops::Deref for DbRef<'_> {
    type Target = Db;
    fn deref(&self) -> &Db {
        match self {
            DbRef::Borrowed(d) => d,
            DbRef::Shared(d) => d,
        }
    }
}

pub struct WriteCtx<'a> {
    pub db: DbRef<'a>,
    /// The database (`SELECT`) of the command being executed.
    pub db_index: u8,
    /// The group's clock: one `now` for every command of a group (expiry decisions agree inside it).
    pub now_ms: u64,
    /// The group's writes not yet applied.
    pending: Overlay,
    /// Approximate bytes of `pending` (keys, values and a per-entry overhead).
    pending_bytes: usize,
    /// Reused to write `pending` to the engine.
    batch: WriteBatch,
    /// The group already applied part of its writes (so the final step must sync even if `pending` is empty).
    applied: bool,
    /// The first engine error of the group: the group is not acknowledged.
    failed: Option<String>,
    /// How the database orders its keys (keys.rs): set once, before the first group.
    pub keyspace: keys::Keyspace,
    /// The counter of the next collection version to hand out (see keys.rs; the version is
    /// [`keys::Keyspace::version_for`] of it); loaded by [`WriteCtx::load_versions`].
    next_version: u64,
    /// Collection versions removed by this group's commands, for the collector to reclaim early:
    /// `(db, version)`.
    pub dropped: Vec<(u8, u64)>,
    /// Scratch for building engine keys.
    pub key_buf: Vec<u8>,
    /// Scratch for building values.
    val_buf: Vec<u8>,
    /// The wake-up registry of blocked clients (`blocking.rs`); `None` outside the commit step.
    pub(crate) wake: Option<Arc<dyn Waiters>>,
    /// Keys this group made poppable or readable for blocked clients: `(db, key)` (see
    /// [`WriteCtx::signal_key`]); handed to the registry once the group is durable.
    pub(crate) signals: Vec<(u8, Bytes)>,
    /// `stream-node-max-entries` for this group (the commit step copies it from
    /// [`crate::commit::Store::stream_node_max_entries`] before each group; 0: no limit).
    pub stream_node_max_entries: u64,
    /// `hll-sparse-max-bytes` for this group (copied from [`crate::commit::Store::hll_sparse_max_bytes`] before
    /// each group, like `stream_node_max_entries`).
    pub hll_sparse_max_bytes: u64,
    /// Keys this group deleted, overwrote or changed while a client was blocked in XREADGROUP: `(db, key)`;
    /// handed to the registry once the group is durable (a blocked XREADGROUP ends when its stream is gone).
    pub(crate) gone: Vec<(u8, Bytes)>,
    /// The keys clients WATCH (commands/multi.rs): every write of a meta key is reported to it.
    pub watches: Watches,
    /// Engine writes recorded so far, and how many of them were meta keys (for WATCH: a command that wrote
    /// only member records is reported by its key arguments).
    writes: u64,
    meta_writes: u64,
    /// Where the commit step knows collections have no live member records, learnt from its pops
    /// (dead.rs); only the commit step's context records any.
    pub(crate) dead: crate::dead::DeadRanges,
    /// The server's scripting state (`commands/scripting`), opaque to storage; `None` outside the commit
    /// thread.
    pub scripts: Option<Arc<dyn std::any::Any + Send + Sync>>,
    /// The keyspace-notification classes recorded for this group (`notify.rs`; copied from
    /// [`crate::commit::Store::notify_flags`] before each group, 0 when no event is published).
    pub notify_flags: u32,
    /// The events this group's commands produced, in order; handed to Pub/Sub once the group is durable.
    pub(crate) events: Vec<crate::notify::Event>,
    /// A key the running command replaces as a whole (a STORE destination that held a value): storing it
    /// is no `new` key, as Redis overwrites such a key in place. Set and cleared around the store.
    pub replacing: Option<Bytes>,
    /// Some client tracks keys (`tracking.rs`; set by the commit step before each group): written keys
    /// are recorded in `touched`. False: nothing is recorded.
    pub tracking: bool,
    /// The client whose command runs (0: the server itself), for CLIENT TRACKING's NOLOOP.
    pub client: u64,
    /// The keys written while `tracking`, in order; turned into invalidations once the group is durable.
    pub(crate) touched: Vec<crate::tracking::Touch>,
    /// The script running called a read-only command (it then tracks its declared keys, `tracking.rs`).
    pub script_read: bool,
    /// WATCHes answered by their connections while a script ran (`watches.rs`); `None` outside the commit
    /// thread.
    pub watch_inbox: Option<Arc<super::WatchInbox>>,
    /// [`crate::commit::Store::expiry_paused_until`] (CLIENT PAUSE); `None` outside the commit step.
    pub expiry_paused_until: Option<Arc<std::sync::atomic::AtomicU64>>,
    /// Where this context and its views count their reads ([`WriteCtx::count_reads`]); `None`: not counted.
    counts: Option<Arc<ReadCounts>>,
    /// A replica group member's commit step (issue 43): every batch is proposed through this instead of
    /// written to the engine, which only the state machine writes. A cut of the group before its end (the
    /// group's memory bound, FLUSHDB's steps: [`WriteCtx::apply_pending`]) is a proposal of its own that is
    /// committed and applied before the group goes on, so the commands after it read its effects from the
    /// engine; reads of keys written since the last cut come from the pending writes as always. `None`: the
    /// engine is written directly.
    pub propose: Option<ProposeFn>,
    /// A cluster member's commit step (issue 44): whether this member's group serves a slot now (owns it and
    /// is not moving it). Scripts check every key they touch against it, declared or not. `None`: every slot.
    pub serves_slot: Option<Arc<dyn Fn(u16) -> bool + Send + Sync>>,
    /// A cluster member's commit step (issue 44): every engine write is shown to it, for the slots being
    /// copied out before their move (cluster/copy.rs). `None`: nothing is recorded.
    pub copy_tracker: Option<Arc<crate::cluster::copy::Tracker>>,
    /// A cluster member's commit step (issue 44): slots being copied in whose records the next proposal
    /// carries as tables rather than in its batch (`tables.rs`); set by the import command, cleared once
    /// proposed.
    pub table_slots: Vec<u16>,
}

/// Bytes counted per pending entry besides its key and value (map node, batch record header).
const PENDING_ENTRY_OVERHEAD: usize = 48;

impl<'a> WriteCtx<'a> {
    pub fn new(db: &'a Db) -> WriteCtx<'a> {
        Self::with_db(DbRef::Borrowed(db))
    }

    /// A context that owns its handle on the engine (the server's commit step, which moves between the
    /// runtime's thread and the blocking pool).
    pub fn shared(db: Arc<Db>) -> WriteCtx<'static> {
        WriteCtx::with_db(DbRef::Shared(db))
    }

    fn with_db(db: DbRef<'a>) -> WriteCtx<'a> {
        WriteCtx {
            db,
            db_index: 0,
            now_ms: 0,
            pending: Overlay::new(),
            pending_bytes: 0,
            batch: WriteBatch::new(),
            applied: false,
            failed: None,
            keyspace: keys::Keyspace::Ordered,
            next_version: 1,
            dropped: Vec::new(),
            key_buf: Vec::new(),
            val_buf: Vec::new(),
            wake: None,
            signals: Vec::new(),
            stream_node_max_entries: crate::types::stream::NODE_MAX_ENTRIES,
            hll_sparse_max_bytes: crate::types::hll::DEFAULT_SPARSE_MAX_BYTES,
            gone: Vec::new(),
            watches: Default::default(),
            writes: 0,
            meta_writes: 0,
            dead: Default::default(),
            scripts: None,
            notify_flags: 0,
            events: Vec::new(),
            replacing: None,
            tracking: false,
            client: 0,
            touched: Vec::new(),
            script_read: false,
            watch_inbox: None,
            expiry_paused_until: None,
            counts: None,
            propose: None,
            serves_slot: None,
            copy_tracker: None,
            table_slots: Vec::new(),
        }
    }

    /// Counts the reads of this context and of its views from now on (tests that bound a command's
    /// reads); returns the totals to sample.
    pub fn count_reads(&mut self) -> Arc<ReadCounts> {
        self.counts.get_or_insert_with(Default::default).clone()
    }

    /// Client `client` WATCHes `user_key` of database `db`, as of everything executed before in this group.
    pub fn watch_key(&mut self, client: u64, db: u8, user_key: &[u8]) -> Result<(), Error> {
        let mk = self.keyspace.meta_key(db, user_key);
        let expired = match self.get_raw(&mk) {
            Ok(Some(v)) => keys::decode_meta(&v).is_ok_and(|m| m.expired(self.now_ms)),
            Ok(None) => false,
            Err(e) => return Err(Error::read(e)),
        };
        self.watches.watch(client, mk, expired);
        Ok(())
    }

    /// True while CLIENT PAUSE holds expiry: no expired key may be deleted for being expired.
    pub fn expiry_paused(&self) -> bool {
        self.expiry_paused_until
            .as_ref()
            .is_some_and(|u| super::now_ms() < u.load(std::sync::atomic::Ordering::Acquire))
    }

    /// Registers the WATCHes posted to the inbox since the last call (see [`super::WatchInbox`]); called
    /// before each command of a group and before each write of a meta key.
    pub fn take_watch_inbox(&mut self) {
        let Some(inbox) = &self.watch_inbox else { return };
        for (client, db, keys) in inbox.take() {
            for k in keys {
                // A read failure leaves the key unwatched; the engine then refuses every later write anyway.
                let _ = self.watch_key(client, db, &k);
            }
        }
    }

    /// Sets the next collection version above every version in the registry of every database (at start,
    /// before the first group). A version whose registry record is gone has no member records left, so
    /// handing it out again could not resurrect anything; starting above the largest is simply clearer.
    pub fn load_versions(&mut self) -> shaledb::Result<()> {
        let mut next = 1u64;
        if self.keyspace == keys::Keyspace::Slots {
            // The counter record (written with every new version) is the answer; the registry walk below
            // stays for a database without one.
            if let Some(v) = self.db.get(keys::NEXT_VERSION_KEY)? {
                if let Ok(b) = <[u8; 8]>::try_from(&v[..]) {
                    self.next_version = u64::from_be_bytes(b).max(1);
                    return Ok(());
                }
            }
        }
        for db in 0..keys::DATABASES {
            let lower = vec![db, keys::KIND_REGISTRY];
            let upper = vec![db, keys::KIND_REGISTRY + 1];
            let mut it = self.db.cursor_opt(&ReadOptions {
                iterate_lower_bound: Some(lower),
                iterate_upper_bound: Some(upper),
                ..ReadOptions::default()
            });
            it.seek_to_last();
            // `Ordered`: the last version is the largest counter. `Slots`: versions are `slot counter`, so
            // the largest counter of each slot is the last version of the slot; one seek per slot that
            // holds any (from the last slot down).
            while it.valid() && it.key().len() == 10 {
                let v = keys::be_u64(&it.key()[2..10]);
                next = next.max(self.keyspace.counter_of(v).saturating_add(1));
                let slot = v >> keys::VERSION_SLOT_SHIFT;
                if self.keyspace == keys::Keyspace::Ordered || slot == 0 {
                    break;
                }
                it.seek_for_prev(keys::registry_key(db, (slot << keys::VERSION_SLOT_SHIFT) - 1));
            }
            it.status()?;
        }
        self.next_version = next;
        Ok(())
    }

    pub(crate) fn begin(&mut self, now_ms: u64) {
        self.now_ms = now_ms;
        self.pending.clear();
        self.pending_bytes = 0;
        self.applied = false;
        self.failed = None;
        self.signals.clear();
        self.gone.clear();
        self.events.clear();
        self.replacing = None;
        // The collector took `dropped` after the last successful group (commit_group); a failed group's
        // versions are left to the collector's slow pass.
        self.dropped.clear();
    }

    /// Records that `user_key` (current database) got elements a blocked client may take (a push to a list,
    /// XADD): once this group is durable, the commit step serves the clients blocked on it. Free when no
    /// client is blocked.
    pub fn signal_key(&mut self, user_key: &[u8]) {
        if self.wake.as_ref().is_some_and(|w| w.has_waiters()) {
            self.signals.push((self.db_index, Bytes::copy_from_slice(user_key)));
        }
    }

    /// Records the keyspace event `event` of class `class` (`notify.rs`) on `user_key` of the current
    /// database; published once the group is durable. Free when that class is not configured.
    pub fn notify(&mut self, class: u32, event: &'static str, user_key: &[u8]) {
        self.notify_in(self.db_index, class, event, user_key);
    }

    /// [`WriteCtx::notify`] for a key of database `db` (MOVE, COPY ... DB).
    pub fn notify_in(&mut self, db: u8, class: u32, event: &'static str, user_key: &[u8]) {
        if self.notify_flags & class != 0 {
            let key = Bytes::copy_from_slice(user_key);
            self.events.push(crate::notify::Event { db, event, key, flags: self.notify_flags });
        }
    }

    /// [`WriteCtx::notify`], then the `del` event when `user_key` no longer exists (a command that removed
    /// the last element of a collection, which is then deleted).
    pub fn notify_emptied(&mut self, class: u32, event: &'static str, user_key: &[u8]) {
        if self.notify_flags == 0 {
            return;
        }
        self.notify(class, event, user_key);
        if self.notify_flags & crate::notify::GENERIC != 0 && !self.stored_now(user_key) {
            self.notify(crate::notify::GENERIC, "del", user_key);
        }
    }

    /// True when `user_key` (current database) has a meta value as of this group's writes so far (expired
    /// or not).
    pub fn stored_now(&mut self, user_key: &[u8]) -> bool {
        let k = self.keyspace.meta_key(self.db_index, user_key);
        matches!(self.get_raw(&k), Ok(Some(_)))
    }

    /// Takes the events recorded since the group began (the commit step, once the group is durable).
    pub(crate) fn take_events(&mut self) -> Vec<crate::notify::Event> {
        std::mem::take(&mut self.events)
    }

    /// Approximate bytes of the group's pending writes.
    pub fn pending_bytes(&self) -> usize {
        self.pending_bytes
    }

    /// Writes `pending` to the engine as one batch (or proposes it, [`WriteCtx::propose`]) and clears it.
    /// `Err`: why, as the group's failure says it.
    fn write_pending(&mut self, sync: bool) -> Result<(), PendingFailure> {
        self.batch.clear();
        let slots = std::mem::take(&mut self.table_slots);
        let tables = match (&self.propose, slots.is_empty()) {
            (Some(_), false) => match super::tables::take(&mut self.pending, &slots, self.db.options()) {
                Ok(t) => t,
                Err(e) => {
                    self.pending.clear();
                    self.pending_bytes = 0;
                    return Err(PendingFailure::Proposal(format!("ERR {e}")));
                }
            },
            _ => Vec::new(),
        };
        for (k, v) in &self.pending {
            match v {
                Some(v) => self.batch.put(k, v),
                None => self.batch.delete(k),
            };
        }
        let r = match &mut self.propose {
            Some(propose) => propose(&self.batch, tables).map_err(PendingFailure::Proposal),
            None => self
                .db
                .write_opt(&WriteOptions { sync, ..Default::default() }, &self.batch)
                .map_err(PendingFailure::Engine),
        };
        self.batch.clear();
        self.pending.clear();
        self.pending_bytes = 0;
        r
    }

    /// Applies the group's writes so far (no sync: the group's final write or sync covers it). Only ever
    /// called between commands (the commit loop bounds a group's memory with it; FLUSHDB steps with it):
    /// reads never need it, and calling it inside a command would split that command's writes.
    pub fn apply_pending(&mut self) {
        if self.pending.is_empty() || self.failed.is_some() {
            return;
        }
        match self.write_pending(false) {
            Ok(()) => {}
            Err(PendingFailure::Engine(e)) => self.failed = Some(format!("WAL write failed: {e}")),
            Err(PendingFailure::Proposal(why)) => self.failed = Some(why),
        }
        self.applied = true;
    }

    /// Writes what is left and syncs if asked. `Ok(true)` if an fsync was issued.
    pub(crate) fn finish(&mut self, sync: bool) -> Result<bool, String> {
        // The group's accesses reach the access clock before anyone hears of the group.
        crate::access::apply_deferred();
        if let Some(e) = self.failed.take() {
            self.pending.clear();
            self.pending_bytes = 0;
            return Err(e);
        }
        if !self.pending.is_empty() {
            // A proposal is synced on a majority's logs: no fsync of the engine's WAL is counted for it.
            return match self.write_pending(sync) {
                Ok(()) => Ok(sync && self.propose.is_none()),
                Err(PendingFailure::Engine(e)) => Err(format!("WAL write or fsync failed: {e}")),
                Err(PendingFailure::Proposal(why)) => Err(why),
            };
        }
        if let (false, Some(propose)) = (self.applied, &mut self.propose) {
            // A group whose writes came to nothing (a DEL of a missing key, an SREM of no member) is answered
            // from this member's state, as a read is, so it needs what a read needs: the empty batch asks the
            // replica group to confirm that this member still leads (the read lease, else a read-index round;
            // `Cluster::propose_blocking`) and proposes nothing. Without it a leader cut off from its majority
            // answered `DEL k` with 0 after the majority's new leader had acknowledged `SET k`.
            self.batch.clear();
            return propose(&self.batch, Vec::new()).map(|()| false);
        }
        if self.applied && sync && self.propose.is_none() {
            return self.db.sync_wal().map(|()| true).map_err(|e| format!("WAL write or fsync failed: {e}"));
        }
        Ok(false)
    }

    /// Fails the group on purpose: none of its pending writes reach the engine and its commands are answered
    /// as for a failed write (a script stopped half-way by SHUTDOWN, whose writes must not land in part).
    pub fn abandon(&mut self, why: String) {
        if self.failed.is_none() {
            self.failed = Some(why);
        }
    }

    /// True when the group failed (its commands are not acknowledged).
    pub fn failed(&self) -> bool {
        self.failed.is_some()
    }

    /// Reads an engine key as of everything executed before in this group.
    pub fn get_raw(&mut self, engine_key: &[u8]) -> shaledb::Result<Option<Vec<u8>>> {
        if let Some(c) = &self.counts {
            c.get();
        }
        match self.pending.get(engine_key) {
            Some(v) => Ok(v.clone()),
            None => self.db.get(engine_key),
        }
    }

    /// `(writes, meta key writes)` recorded since the start: compare before and after a command.
    pub fn write_counts(&self) -> (u64, u64) {
        (self.writes, self.meta_writes)
    }

    fn record(&mut self, engine_key: &[u8], value: Option<&[u8]>) {
        self.note_write(engine_key, value);
        match self.pending.get_mut(engine_key) {
            Some(slot) => match (slot, value) {
                (Some(old), Some(v)) => {
                    old.clear();
                    old.extend_from_slice(v);
                }
                (slot, v) => *slot = v.map(<[u8]>::to_vec),
            },
            None => {
                self.pending.insert(engine_key.to_vec(), value.map(<[u8]>::to_vec));
            }
        }
    }

    /// [`WriteCtx::record`] of a put whose value the caller hands over (no copy of it).
    fn record_vec(&mut self, engine_key: &[u8], value: Vec<u8>) {
        self.note_write(engine_key, Some(&value));
        match self.pending.get_mut(engine_key) {
            Some(slot) => *slot = Some(value),
            None => {
                self.pending.insert(engine_key.to_vec(), Some(value));
            }
        }
    }

    /// What every write of the group records besides the pending write itself: the counts, WATCH, the access
    /// clock, tracking, blocked XREADGROUPs, the pending bytes.
    fn note_write(&mut self, engine_key: &[u8], value: Option<&[u8]>) {
        self.writes += 1;
        if let Some(t) = &self.copy_tracker {
            t.note(engine_key);
        }
        if engine_key.get(1) == Some(&keys::KIND_META) {
            self.take_watch_inbox();
            self.meta_writes += 1;
            if let (Some(&db), Some(user_key)) = (engine_key.first(), self.keyspace.user_key_any(engine_key)) {
                crate::access::record_write(&*self.db as *const Db as usize, db, user_key, value.is_some());
            }
            if !self.watches.is_empty() {
                self.watches.touch(engine_key, value.is_some());
            }
            if self.tracking {
                if let Some(user_key) = self.keyspace.user_key_any(engine_key) {
                    let key = Bytes::copy_from_slice(user_key);
                    self.touched.push(crate::tracking::Touch::Key { seq: self.meta_writes, client: self.client, key });
                }
            }
            // A key deleted, overwritten or changed in type may end a blocked XREADGROUP (Redis answers it
            // with an error): its XREADGROUP waiters run again once the group is durable.
            if self.wake.as_ref().is_some_and(|w| w.has_group_readers()) {
                if let (Some(&db), Some(user_key)) = (engine_key.first(), self.keyspace.user_key_any(engine_key)) {
                    self.gone.push((db, Bytes::copy_from_slice(user_key)));
                }
            }
        }
        self.pending_bytes += engine_key.len() + value.map_or(0, <[u8]>::len) + PENDING_ENTRY_OVERHEAD;
    }

    pub fn put_raw(&mut self, engine_key: &[u8], value: &[u8]) {
        self.record(engine_key, Some(value));
    }

    pub fn delete_raw(&mut self, engine_key: &[u8]) {
        self.record(engine_key, None);
    }

    /// An engine iterator that does NOT see this group's pending writes: for FLUSHDB's steps, which apply
    /// the pending writes between steps themselves. Everything else reads with [`WriteCtx::view`].
    pub fn iter_applied(&mut self, opts: ReadOptions) -> shaledb::Cursor {
        self.apply_pending();
        self.db.cursor_opt(&opts)
    }

    /// The live meta value of `user_key` in the current database: `(meta, stored)`, or `None` if missing or
    /// expired (an expired key is deleted as part of this group, as Redis does on access).
    pub fn get_meta(&mut self, user_key: &[u8]) -> Result<Option<(keys::Meta, Bytes)>, Error> {
        self.get_meta_in(self.db_index, user_key)
    }

    /// [`WriteCtx::get_meta`] in database `db` (MOVE, COPY ... DB).
    pub fn get_meta_in(&mut self, db: u8, user_key: &[u8]) -> Result<Option<(keys::Meta, Bytes)>, Error> {
        let mut k = std::mem::take(&mut self.key_buf);
        self.keyspace.meta_key_into(db, user_key, &mut k);
        let r = self.get_raw(&k);
        let out = match r {
            Ok(None) => Ok(None),
            Ok(Some(v)) => match keys::decode_meta(&v) {
                Ok(m) if m.expired(self.now_ms) => {
                    if let Ok(Some(c)) = keys::Coll::decode(&v) {
                        self.dropped.push((db, c.version));
                    }
                    self.delete_raw(&k);
                    self.notify_in(db, crate::notify::EXPIRED, "expired", user_key);
                    Ok(None)
                }
                Ok(m) => {
                    crate::access::defer_touch(&*self.db as *const Db as usize, db, user_key, true);
                    Ok(Some((m, Bytes::from(v))))
                }
                Err(e) => Err(Error::Corrupt(e.to_string())),
            },
            Err(e) => Err(Error::read(e)),
        };
        self.key_buf = k;
        out
    }
}

impl WriteCtx<'_> {
    /// Stores `stored` (a whole meta value: head and payload) as `user_key` of database `db`, unless the
    /// engine could not hold it: then nothing is written and the command gets the error (the group goes on).
    pub fn put_meta_in(&mut self, db: u8, user_key: &[u8], stored: &[u8]) -> Result<(), Error> {
        check_entry_size(user_key.len(), stored.len())?;
        let mut k = std::mem::take(&mut self.key_buf);
        self.keyspace.meta_key_into(db, user_key, &mut k);
        if self.notify_flags & (crate::notify::NEW | crate::notify::EXPIRED) != 0 {
            self.notify_created(db, user_key, &k);
        }
        self.put_raw(&k, stored);
        self.key_buf = k;
        // As Redis's dbAdd: a list, sorted set or stream stored under a key by any command (RENAME, MOVE,
        // COPY, SORT ... STORE, RESTORE) may serve the clients blocked on it. Free when none is blocked.
        if self.wake.as_ref().is_some_and(|w| w.has_waiters())
            && keys::decode_meta(stored)
                .is_ok_and(|m| matches!(m.typ, keys::Type::List | keys::Type::ZSet | keys::Type::Stream))
        {
            self.signals.push((db, Bytes::copy_from_slice(user_key)));
        }
        Ok(())
    }

    /// Before `user_key` (engine key `meta_key`) of database `db` is stored: the `expired` event of the value
    /// it replaces if that had expired (a blind write such as SET reads nothing), and the `new` event when
    /// no live value was there. Only called while one of those classes is on.
    fn notify_created(&mut self, db: u8, user_key: &[u8], meta_key: &[u8]) {
        let live = match self.get_raw(meta_key) {
            Ok(Some(v)) => match keys::decode_meta(&v) {
                Ok(m) if m.expired(self.now_ms) => {
                    self.notify_in(db, crate::notify::EXPIRED, "expired", user_key);
                    false
                }
                _ => true,
            },
            _ => false,
        };
        let replaced = db == self.db_index && self.replacing.as_deref() == Some(user_key);
        if !live && !replaced {
            self.notify_in(db, crate::notify::NEW, "new", user_key);
        }
    }

    /// Stores a string (with its expiry) as `user_key` of the current database; see [`WriteCtx::put_meta_in`].
    pub fn put_string(&mut self, user_key: &[u8], value: &[u8], expire_at_ms: Option<u64>) -> Result<(), Error> {
        check_entry_size(user_key.len(), value.len() + 9)?;
        let mut v = std::mem::take(&mut self.val_buf);
        keys::encode_head_into(keys::Type::String, expire_at_ms, &mut v);
        v.extend_from_slice(value);
        let r = self.put_meta_in(self.db_index, user_key, &v);
        if v.capacity() <= 1 << 20 {
            self.val_buf = v;
        }
        r
    }

    /// Deletes `user_key` of database `db` (whatever it holds; a missing key is no error). A collection's
    /// members become unreachable at once and are reclaimed by the collector.
    pub fn delete_in(&mut self, db: u8, user_key: &[u8]) {
        let mut k = std::mem::take(&mut self.key_buf);
        self.keyspace.meta_key_into(db, user_key, &mut k);
        self.delete_raw(&k);
        self.key_buf = k;
    }

    /// Deletes `user_key` of the current database.
    pub fn delete_key(&mut self, user_key: &[u8]) {
        self.delete_in(self.db_index, user_key);
    }

    /// Deletes `user_key` of database `db` whose stored meta value is `stored` (as read just before) and,
    /// when it is a collection, hands its version to the collector for a prompt reclaim.
    pub fn delete_stored(&mut self, db: u8, user_key: &[u8], stored: &[u8]) {
        if let Ok(Some(c)) = keys::Coll::decode(stored) {
            self.dropped.push((db, c.version));
        }
        self.delete_in(db, user_key);
    }

    /// Deletes `user_key` of database `db` whatever it holds (expired or not; see
    /// [`WriteCtx::delete_stored`]). Returns whether there was a meta value.
    pub fn remove_key(&mut self, db: u8, user_key: &[u8]) -> Result<bool, Error> {
        let k = self.keyspace.meta_key(db, user_key);
        match self.get_raw(&k) {
            Ok(Some(v)) => {
                self.delete_stored(db, user_key, &v);
                Ok(true)
            }
            Ok(None) => Ok(false),
            Err(e) => Err(Error::read(e)),
        }
    }

    /// A read view of the engine as of everything executed before in this group, pending writes included
    /// (no snapshot is needed: only the commit step writes). Read commands inside `EXEC` run with it.
    pub fn view(&self) -> ReadCtx<'_> {
        ReadCtx {
            db: &self.db,
            keyspace: self.keyspace,
            db_index: self.db_index,
            now_ms: self.now_ms,
            overlay: Some(&self.pending),
            snapshot: None,
            misses: None,
            counts: self.counts.as_deref(),
            cache_only: None,
        }
    }

    /// A write command looked up `user_key` of the current database to read it (Redis's `lookupKeyRead`
    /// inside a write: GETDEL's key, a STORE command's sources ...) and found no live key: the `keymiss`
    /// event.
    pub fn note_miss(&mut self, user_key: &[u8]) {
        self.notify(crate::notify::KEY_MISS, "keymiss", user_key);
    }

    /// Where the next event will go: pass it to [`WriteCtx::note_miss_at`].
    pub fn event_mark(&self) -> usize {
        self.events.len()
    }

    /// [`WriteCtx::note_miss`], placed before the events recorded since `mark` (a command that learnt of
    /// the miss only after writing: GETSET, SET ... GET; Redis looks the key up first).
    pub fn note_miss_at(&mut self, mark: usize, user_key: &[u8]) {
        if self.notify_flags & crate::notify::KEY_MISS != 0 {
            let key = Bytes::copy_from_slice(user_key);
            let e = crate::notify::Event { db: self.db_index, event: "keymiss", key, flags: self.notify_flags };
            self.events.insert(mark.min(self.events.len()), e);
        }
    }

    /// [`WriteCtx::get_meta`] for a key a write command only reads (see [`WriteCtx::note_miss`]).
    pub fn get_meta_to_read(&mut self, user_key: &[u8]) -> Result<Option<(keys::Meta, Bytes)>, Error> {
        let r = self.get_meta(user_key)?;
        if r.is_none() {
            self.note_miss(user_key);
        }
        Ok(r)
    }

    /// Runs read command `f` on [`WriteCtx::view`] (a read inside `EXEC`, a blocking read's first try), its
    /// lookups of missing keys recorded as `keymiss` events of this group, in order with the writes around
    /// it.
    pub fn run_read<R>(&mut self, f: impl FnOnce(&ReadCtx<'_>) -> R) -> R {
        if self.notify_flags & crate::notify::KEY_MISS == 0 {
            return f(&self.view());
        }
        let misses = super::Misses::default();
        let r = f(&self.view().reporting_misses(Some(&misses)));
        for (db, key) in misses.take() {
            self.notify_in(db, crate::notify::KEY_MISS, "keymiss", &key);
        }
        r
    }

    /// Same as [`WriteCtx::view`] (kept for the callers that read inside `EXEC`).
    pub fn read_ctx(&mut self) -> ReadCtx<'_> {
        self.view()
    }

    // -----------------------------------------------------------------------------------------------------
    // Collections (keys.rs has the layout)

    /// A version never used before: for a collection being created. Write the collection with
    /// [`WriteCtx::create_coll`], which also records the version in the registry.
    fn new_version(&mut self, user_key: &[u8]) -> u64 {
        let v = self.next_version;
        self.next_version = v.saturating_add(1);
        self.keyspace.version_for(user_key, v)
    }

    /// The live collection `user_key` of the current database if it is of type `typ`: `Ok(None)` when the
    /// key is missing (or expired: then deleted as on access), `Err(WRONGTYPE)` when it holds another type.
    pub fn get_coll(&mut self, user_key: &[u8], typ: keys::Type) -> Result<Option<keys::Coll>, Error> {
        let Some((m, stored)) = self.get_meta(user_key)? else { return Ok(None) };
        coll_of_type(&m, &stored, typ).map(Some)
    }

    /// A new, empty collection of `typ` for `user_key` of the current database, with a fresh version
    /// recorded in the registry (in this group's batch). Not stored until [`WriteCtx::put_coll`].
    pub fn create_coll(&mut self, user_key: &[u8], typ: keys::Type) -> keys::Coll {
        let version = self.new_version(user_key);
        let rk = keys::registry_key(self.db_index, version);
        self.put_raw(&rk, user_key);
        if self.keyspace == keys::Keyspace::Slots {
            // Versions carry their slot, so the largest counter is not the last registry record: it is kept
            // in a record of its own, in the same batch (a cluster member reads it before every group, as
            // another leader may have handed out versions since).
            let next = self.next_version.to_be_bytes();
            self.put_raw(keys::NEXT_VERSION_KEY, &next);
        }
        keys::Coll::new(typ, version)
    }

    /// The collection `user_key` of type `typ`, created (see [`WriteCtx::create_coll`]) when missing;
    /// `Err(WRONGTYPE)` when the key holds another type.
    pub fn get_or_create_coll(&mut self, user_key: &[u8], typ: keys::Type) -> Result<keys::Coll, Error> {
        match self.get_coll(user_key, typ)? {
            Some(c) => Ok(c),
            None => Ok(self.create_coll(user_key, typ)),
        }
    }

    /// Stores a collection's meta value as `user_key` of the current database; a collection whose size
    /// reached 0 is deleted instead (Redis never keeps an empty collection), with [`WriteCtx::drop_coll`].
    /// Call it once per command, after the member writes: the meta value and the members change in the same
    /// batch, so the size is exact after a crash.
    pub fn put_coll(&mut self, user_key: &[u8], c: &keys::Coll) -> Result<(), Error> {
        if c.size == 0 {
            self.drop_coll(user_key, c);
            return Ok(());
        }
        let mut v = std::mem::take(&mut self.val_buf);
        c.encode_into(&mut v);
        let r = self.put_meta_in(self.db_index, user_key, &v);
        self.val_buf = v;
        r
    }

    /// Deletes the collection `user_key` (its meta value) and hands its version to the collector, which
    /// deletes whatever member records are left and then its registry record.
    pub fn drop_coll(&mut self, user_key: &[u8], c: &keys::Coll) {
        self.delete_key(user_key);
        self.dropped.push((self.db_index, c.version));
        if !self.dead.is_empty() {
            self.dead.forget_collection(self.db_index, c.version);
        }
    }

    /// The dead ranges (dead.rs) the commit step learnt of `c`'s records of sub-kind `sub`.
    pub fn dead_ranges(&self, c: &keys::Coll, sub: u8) -> Option<&crate::dead::Ranges> {
        self.dead.get((self.db_index, c.version, sub))
    }

    /// Records that no part of `c`'s records of sub-kind `sub` in `[from, to]` is live: a pop staged the
    /// deletion of every one there. Commit step only.
    pub fn note_dead_zone(&mut self, c: &keys::Coll, sub: u8, from: &[u8], to: &[u8]) {
        self.dead.note_zone((self.db_index, c.version, sub), from, to);
    }

    /// Records that no part of `c`'s records of sub-kind `sub` is below `first` or above `last` (SPOP's
    /// first pick sought them). Commit step only.
    pub fn note_dead_span(&mut self, c: &keys::Coll, sub: u8, first: &[u8], last: &[u8]) {
        self.dead.note_span((self.db_index, c.version, sub), first, last);
    }

    /// Records that no part of `c`'s records of sub-kind `sub` at or after `from` is live. Commit step
    /// only.
    pub fn note_dead_tail(&mut self, c: &keys::Coll, sub: u8, from: &[u8]) {
        self.dead.note_tail((self.db_index, c.version, sub), from);
    }

    /// Forgets every dead range (a group failed: its pops may not have happened).
    pub fn forget_dead_ranges(&mut self) {
        self.dead.clear();
    }

    /// Reads a member record of collection `c` (current database).
    pub fn get_member(&mut self, c: &keys::Coll, sub: u8, part: &[u8]) -> Result<Option<Vec<u8>>, Error> {
        let mut k = std::mem::take(&mut self.key_buf);
        keys::member_key_into(self.db_index, c.version, sub, part, &mut k);
        let r = self.get_raw(&k).map_err(Error::read);
        self.key_buf = k;
        r
    }

    /// Writes a member record of collection `c` (current database), refusing one the engine could not hold.
    pub fn put_member(&mut self, c: &keys::Coll, sub: u8, part: &[u8], value: &[u8]) -> Result<(), Error> {
        check_entry_size(part.len() + 9, value.len())?;
        if !self.dead.is_empty() {
            self.dead.on_write((self.db_index, c.version, sub), part);
        }
        let mut k = std::mem::take(&mut self.key_buf);
        keys::member_key_into(self.db_index, c.version, sub, part, &mut k);
        self.put_raw(&k, value);
        self.key_buf = k;
        Ok(())
    }

    /// [`WriteCtx::put_member`] of a value the caller hands over: it becomes the pending write without a
    /// copy.
    pub fn put_member_vec(&mut self, c: &keys::Coll, sub: u8, part: &[u8], value: Vec<u8>) -> Result<(), Error> {
        check_entry_size(part.len() + 9, value.len())?;
        if !self.dead.is_empty() {
            self.dead.on_write((self.db_index, c.version, sub), part);
        }
        let mut k = std::mem::take(&mut self.key_buf);
        keys::member_key_into(self.db_index, c.version, sub, part, &mut k);
        self.record_vec(&k, value);
        self.key_buf = k;
        Ok(())
    }

    /// Records `parts`, the live parts of `c`'s records of sub-kind `sub` next to its low end (ascending) or
    /// (`high`) its high end (descending), read by a pop past what it took. Commit step only.
    pub fn note_read_ahead(&mut self, c: &keys::Coll, sub: u8, high: bool, parts: Vec<Vec<u8>>) {
        self.dead.note_ahead((self.db_index, c.version, sub), high, parts);
    }

    /// Takes the first `n` parts recorded by [`WriteCtx::note_read_ahead`] at that end, if that many are.
    pub fn take_read_ahead(&mut self, c: &keys::Coll, sub: u8, high: bool, n: usize) -> Option<Vec<Vec<u8>>> {
        if self.dead.is_empty() {
            return None;
        }
        self.dead.take_ahead((self.db_index, c.version, sub), high, n)
    }

    /// Deletes a member record of collection `c` (current database).
    pub fn delete_member(&mut self, c: &keys::Coll, sub: u8, part: &[u8]) {
        if !self.dead.is_empty() {
            self.dead.on_delete((self.db_index, c.version, sub), part);
        }
        let mut k = std::mem::take(&mut self.key_buf);
        keys::member_key_into(self.db_index, c.version, sub, part, &mut k);
        self.delete_raw(&k);
        self.key_buf = k;
    }
}

/// Refuses a user key and stored value the engine could not hold as one entry
/// (`shaledb::options::limits::MAX_KEY_VALUE_BYTES` for the engine key plus value): the command gets a clear
/// error and nothing else of the group is affected (the engine would refuse the whole batch).
pub fn check_entry_size(user_key_len: usize, stored_len: usize) -> Result<(), Error> {
    let max = shaledb::options::limits::MAX_KEY_VALUE_BYTES;
    if user_key_len.saturating_add(2).saturating_add(stored_len) > max {
        return Err(Error::TooLarge { max });
    }
    Ok(())
}
