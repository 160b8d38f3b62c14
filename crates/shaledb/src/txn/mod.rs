//! Transactions, as RocksDB's `TransactionDB` (pessimistic) and `OptimisticTransactionDB` offer them.
//!
//! A [`Transaction`] buffers its writes (reads through it see them: read-your-writes) and applies them at
//! [`Transaction::commit`] as one atomic [`WriteBatch`]; [`Transaction::rollback`] (or dropping it) discards
//! them. Savepoints roll back part of a transaction. Isolation comes from one of two disciplines:
//!
//! - **Pessimistic** ([`TransactionDb`]): every key a transaction writes, or reads with
//!   [`Transaction::get_for_update`], is locked exclusively until it commits or rolls back, so another
//!   transaction wanting it waits (up to `lock_timeout`, then `TimedOut`); a wait that would close a cycle of
//!   waiting transactions fails at once with `Busy` (deadlock detection). Keys are locked in hashed stripes:
//!   transactions on different keys never wait on each other. Writes through [`TransactionDb::put`] and the
//!   like lock too, as single-write transactions. With a snapshot (`set_snapshot`), locking a key that was
//!   written after the snapshot fails with `Busy` (RocksDB's snapshot validation), so a transaction never
//!   overwrites a change it could not see.
//! - **Optimistic** ([`OptimisticTransactionDb`]): nothing is locked while the transaction runs; each key it
//!   writes or reads with `get_for_update` is noted with the sequence number it was read at (its snapshot's, or
//!   the latest at that moment), and `commit` fails with `Busy` when any of those keys has a newer entry by
//!   then (another writer changed it). Validation and the write are atomic against every other write through
//!   the same `OptimisticTransactionDb` (transactions and its plain writes alike) by per-key stripes, taken in
//!   one global order, never by one database-wide lock.
//!
//! Every transaction holds a snapshot (an internal one when `set_snapshot` is off) from its start to its end:
//! compaction then keeps the sequence numbers of entries written after it, which validation compares against.
//!
//! Range deletions: neither transaction database offers `delete_range` (RocksDB refuses it on both with
//! `NotSupported`: a range cannot be locked key by key). A `Db::delete_range` through [`TransactionDb::db`] takes
//! no lock, so it is safe only while no transaction touches the range; an optimistic transaction that read a key
//! the range deletes fails its commit with `Busy`, since validation counts a covering tombstone as a change.
//!
//! Not offered (yet): iterators over a transaction's view (use `get`), shared (read) locks, two-phase commit
//! (`Prepare`), and transactions across column families (ShaleDB has one).

mod locks;
#[cfg(test)]
mod tests;

use crate::batch::WriteBatch;
use crate::options::{ReadOptions, WriteOptions};
use crate::snapshot::Snapshot;
use crate::{ColumnFamily, Db, Options};
use locks::LockManager;
use parking_lot::Mutex;
use shaledb_vfs::{Error, Result};
use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Options of a [`TransactionDb`] (RocksDB's `TransactionDBOptions`).
#[derive(Clone, Debug)]
pub struct TransactionDbOptions {
    /// How long a transaction waits for a key's lock before `TimedOut`, unless its own
    /// [`TransactionOptions::lock_timeout`] says otherwise; `None`: no limit. Default: 1 s (RocksDB's
    /// `transaction_lock_timeout`).
    pub transaction_lock_timeout: Option<Duration>,
    /// The same for writes outside transactions ([`TransactionDb::put`] and the like). Default: 1 s (RocksDB's
    /// `default_lock_timeout`).
    pub default_lock_timeout: Option<Duration>,
}

impl Default for TransactionDbOptions {
    fn default() -> Self {
        TransactionDbOptions {
            transaction_lock_timeout: Some(Duration::from_secs(1)),
            default_lock_timeout: Some(Duration::from_secs(1)),
        }
    }
}

/// Options of one transaction (RocksDB's `TransactionOptions` / `OptimisticTransactionOptions`).
#[derive(Clone, Debug, Default)]
pub struct TransactionOptions {
    /// Take a snapshot at the start: [`Transaction::get`] reads at it, and a key written by someone else
    /// after it cannot be written or locked by this transaction (`Busy`). Default: `false`.
    pub set_snapshot: bool,
    /// Pessimistic transactions: refuse a lock wait that would deadlock (`Busy`) instead of waiting for the
    /// timeout. Default: `false`, as RocksDB's `deadlock_detect`.
    pub deadlock_detect: bool,
    /// Pessimistic transactions: the lock wait limit, overriding the database's
    /// `transaction_lock_timeout`. Default: `None` (the database's).
    pub lock_timeout: Option<Duration>,
}

/// A database whose transactions lock the keys they write (RocksDB's `TransactionDB`). Reads go through
/// [`TransactionDb::db`]; writes go through a [`Transaction`] or this type's own `put`/`delete`/`merge`/
/// `write`, which lock like one-write transactions.
pub struct TransactionDb {
    db: Db,
    opts: TransactionDbOptions,
    locks: LockManager,
    next_id: AtomicU64,
}

impl std::fmt::Debug for TransactionDb {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TransactionDb").field("opts", &self.opts).finish_non_exhaustive()
    }
}

impl TransactionDb {
    /// Opens (or creates, per `opts`) the database at `path` for pessimistic transactions.
    pub fn open(path: impl AsRef<Path>, opts: Options, txn_opts: TransactionDbOptions) -> Result<TransactionDb> {
        Ok(TransactionDb::from_db(Db::open(path, opts)?, txn_opts))
    }

    /// Wraps an open database. Every write must go through the returned value from then on, or the locks
    /// protect nothing.
    pub fn from_db(db: Db, opts: TransactionDbOptions) -> TransactionDb {
        TransactionDb { db, opts, locks: LockManager::new(), next_id: AtomicU64::new(1) }
    }

    /// The database, for reads (`get`, iterators, snapshots, properties).
    pub fn db(&self) -> &Db {
        &self.db
    }

    /// The database without the transaction layer (to close it, or to go on without transactions).
    pub fn into_db(self) -> Db {
        self.db
    }

    /// Starts a pessimistic transaction whose commit writes with `write_opts`.
    pub fn begin(&self, write_opts: &WriteOptions, opts: &TransactionOptions) -> Transaction<'_> {
        let timeout = match opts.lock_timeout {
            Some(t) => Some(t),
            None => self.opts.transaction_lock_timeout,
        };
        // Deadlock detection is a property of the waiting side: every waiter records its wait, and a
        // transaction that detects checks for a cycle before it waits.
        let mode = Mode::Pessimistic { locks: &self.locks, timeout, detect: opts.deadlock_detect };
        Transaction::new(&self.db, self.next_id.fetch_add(1, Ordering::Relaxed), mode, write_opts, opts)
    }

    /// A put as a one-write transaction: waits for the key's lock (`default_lock_timeout`).
    pub fn put(&self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> Result<()> {
        let mut t = self.single();
        t.put(key, value)?;
        t.commit()
    }

    /// A delete as a one-write transaction.
    pub fn delete(&self, key: impl AsRef<[u8]>) -> Result<()> {
        let mut t = self.single();
        t.delete(key)?;
        t.commit()
    }

    /// A merge as a one-write transaction.
    pub fn merge(&self, key: impl AsRef<[u8]>, operand: impl AsRef<[u8]>) -> Result<()> {
        let mut t = self.single();
        t.merge(key, operand)?;
        t.commit()
    }

    fn single(&self) -> Transaction<'_> {
        let mode = Mode::Pessimistic { locks: &self.locks, timeout: self.opts.default_lock_timeout, detect: false };
        let opts = TransactionOptions::default();
        Transaction::new(&self.db, self.next_id.fetch_add(1, Ordering::Relaxed), mode, &WriteOptions::default(), &opts)
    }
}

/// A database whose transactions validate at commit instead of locking (RocksDB's
/// `OptimisticTransactionDB`). Reads go through [`OptimisticTransactionDb::db`]; writes through a
/// [`Transaction`] or this type's own `put`/`delete`/`merge`, so that a commit's validation and write are
/// atomic against them.
pub struct OptimisticTransactionDb {
    db: Db,
    stripes: Box<[Mutex<()>]>,
    next_id: AtomicU64,
}

impl std::fmt::Debug for OptimisticTransactionDb {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OptimisticTransactionDb").finish_non_exhaustive()
    }
}

/// Commit stripes of an [`OptimisticTransactionDb`].
const COMMIT_STRIPES: usize = 256;

fn commit_stripe(slot: &[u8]) -> usize {
    (shaledb_format::bloom::key_hash(slot) % COMMIT_STRIPES as u64) as usize
}

/// What transactions lock, track and index a key of a column family by: the family's id (4 bytes, big-endian)
/// then the key, so equal keys of different families never conflict.
fn slot(family: u32, key: &[u8]) -> Vec<u8> {
    let mut s = Vec::with_capacity(4 + key.len());
    s.extend_from_slice(&family.to_be_bytes());
    s.extend_from_slice(key);
    s
}

/// The family id and key of a [`slot`].
fn unslot(slot: &[u8]) -> (u32, &[u8]) {
    match slot.split_first_chunk::<4>() {
        Some((id, key)) => (u32::from_be_bytes(*id), key),
        None => (0, slot),
    }
}

impl OptimisticTransactionDb {
    /// Opens (or creates, per `opts`) the database at `path` for optimistic transactions.
    pub fn open(path: impl AsRef<Path>, opts: Options) -> Result<OptimisticTransactionDb> {
        Ok(OptimisticTransactionDb::from_db(Db::open(path, opts)?))
    }

    /// Wraps an open database. Every write must go through the returned value from then on.
    pub fn from_db(db: Db) -> OptimisticTransactionDb {
        OptimisticTransactionDb {
            db,
            stripes: (0..COMMIT_STRIPES).map(|_| Mutex::new(())).collect(),
            next_id: AtomicU64::new(1),
        }
    }

    /// The database, for reads.
    pub fn db(&self) -> &Db {
        &self.db
    }

    /// The database without the transaction layer.
    pub fn into_db(self) -> Db {
        self.db
    }

    /// Starts an optimistic transaction whose commit writes with `write_opts`.
    pub fn begin(&self, write_opts: &WriteOptions, opts: &TransactionOptions) -> Transaction<'_> {
        let mode = Mode::Optimistic { stripes: &self.stripes };
        Transaction::new(&self.db, self.next_id.fetch_add(1, Ordering::Relaxed), mode, write_opts, opts)
    }

    /// A put, atomic against commits touching the same key.
    pub fn put(&self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> Result<()> {
        let key = key.as_ref();
        let _g = self.stripes[commit_stripe(&slot(0, key))].lock();
        self.db.put(key, value)
    }

    /// A delete, atomic against commits touching the same key.
    pub fn delete(&self, key: impl AsRef<[u8]>) -> Result<()> {
        let key = key.as_ref();
        let _g = self.stripes[commit_stripe(&slot(0, key))].lock();
        self.db.delete(key)
    }

    /// A merge, atomic against commits touching the same key.
    pub fn merge(&self, key: impl AsRef<[u8]>, operand: impl AsRef<[u8]>) -> Result<()> {
        let key = key.as_ref();
        let _g = self.stripes[commit_stripe(&slot(0, key))].lock();
        self.db.merge(key, operand)
    }
}

#[derive(Clone, Copy)]
enum Mode<'a> {
    Pessimistic { locks: &'a LockManager, timeout: Option<Duration>, detect: bool },
    Optimistic { stripes: &'a [Mutex<()>] },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum OpKind {
    Put,
    Delete,
    Merge,
}

struct Op {
    kind: OpKind,
    /// The column family's id (its handle is in `Transaction::families`).
    family: u32,
    key: Vec<u8>,
    value: Vec<u8>,
}

/// Where a savepoint was set: how many writes and tracked keys the transaction had.
struct SavePoint {
    ops: usize,
    tracked: usize,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Started,
    Committed,
    RolledBack,
}

/// One transaction; see the [module documentation](crate::txn). Dropping it without `commit` rolls it back.
pub struct Transaction<'a> {
    db: &'a Db,
    id: u64,
    mode: Mode<'a>,
    write_opts: WriteOptions,
    /// The snapshot reads use and writes are validated against (`set_snapshot`).
    snapshot: Option<Snapshot>,
    /// Held from start to end: keeps the sequence numbers of newer entries from being zeroed.
    _guard: Snapshot,
    ops: Vec<Op>,
    /// The column families written or tracked, by id (the default family always).
    families: BTreeMap<u32, ColumnFamily>,
    /// [`slot`] -> indexes into `ops`, oldest first.
    index: BTreeMap<Vec<u8>, Vec<usize>>,
    /// [`slot`] -> the sequence number it was read or locked at (optimistic: validated at commit).
    tracked: HashMap<Vec<u8>, u64>,
    /// Tracked keys in the order they were first tracked (a savepoint's rollback untracks the newer ones).
    tracked_order: Vec<Vec<u8>>,
    savepoints: Vec<SavePoint>,
    state: State,
}

impl std::fmt::Debug for Transaction<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Transaction")
            .field("id", &self.id)
            .field("writes", &self.ops.len())
            .field("tracked", &self.tracked.len())
            .field("state", &self.state)
            .finish_non_exhaustive()
    }
}

impl<'a> Transaction<'a> {
    fn new(db: &'a Db, id: u64, mode: Mode<'a>, write_opts: &WriteOptions, opts: &TransactionOptions) -> Self {
        let guard = db.snapshot();
        Transaction {
            db,
            id,
            mode,
            write_opts: *write_opts,
            snapshot: opts.set_snapshot.then(|| guard.clone()),
            _guard: guard,
            ops: Vec::new(),
            families: BTreeMap::from([(0, db.default_column_family())]),
            index: BTreeMap::new(),
            tracked: HashMap::new(),
            tracked_order: Vec::new(),
            savepoints: Vec::new(),
            state: State::Started,
        }
    }

    /// The snapshot taken at the start with `set_snapshot`.
    pub fn snapshot(&self) -> Option<&Snapshot> {
        self.snapshot.as_ref()
    }

    fn check_open(&self) -> Result<()> {
        match self.state {
            State::Started => Ok(()),
            State::Committed => Err(Error::InvalidArgument("transaction already committed".into())),
            State::RolledBack => Err(Error::InvalidArgument("transaction already rolled back".into())),
        }
    }

    /// Notes the family of a `_cf` call: refused when the handle is dropped or of another database.
    fn use_family(&mut self, cf: &ColumnFamily) -> Result<u32> {
        if cf.fam.db_token != self.db.default_column_family().fam.db_token || cf.fam.is_dropped() {
            return Err(Error::InvalidArgument(format!(
                "column family {:?} is dropped or a handle of another database",
                cf.name()
            )));
        }
        self.families.entry(cf.id()).or_insert_with(|| cf.clone());
        Ok(cf.id())
    }

    /// Locks (pessimistic) or notes (optimistic) `key` of family `family` for this transaction.
    fn track(&mut self, family: u32, key: &[u8]) -> Result<()> {
        let key = &slot(family, key);
        if self.tracked.contains_key(key) {
            return Ok(());
        }
        let snap_seq = self.snapshot.as_ref().map(Snapshot::sequence);
        let seq = match self.mode {
            Mode::Pessimistic { locks, timeout, detect } => {
                locks.lock(self.id, key, timeout, detect)?;
                if let Some(s) = snap_seq {
                    if let Err(e) = self.validate(key, s) {
                        locks.unlock(self.id, key);
                        return Err(e);
                    }
                }
                snap_seq.unwrap_or(0)
            }
            Mode::Optimistic { .. } => match snap_seq {
                Some(s) => s,
                // Read now: a later entry of the key conflicts.
                None => self.db.latest_sequence(),
            },
        };
        self.tracked.insert(key.to_vec(), seq);
        self.tracked_order.push(key.to_vec());
        Ok(())
    }

    /// `Busy` when the key of `slot` has an entry newer than `seq`.
    fn validate(&self, slot: &[u8], seq: u64) -> Result<()> {
        let (family, key) = unslot(slot);
        let Some(cf) = self.families.get(&family) else { return Ok(()) };
        match self.db.newest_sequence_in(&cf.fam, key)? {
            Some(newest) if newest > seq => Err(Error::Busy(format!(
                "write conflict: the key was written at sequence {newest}, after this transaction read it at {seq}"
            ))),
            _ => Ok(()),
        }
    }

    fn push(&mut self, kind: OpKind, family: u32, key: &[u8], value: &[u8]) {
        self.index.entry(slot(family, key)).or_default().push(self.ops.len());
        self.ops.push(Op { kind, family, key: key.to_vec(), value: value.to_vec() });
    }

    /// Writes `key` = `value` in this transaction (locking the key when pessimistic).
    pub fn put(&mut self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> Result<()> {
        self.write(OpKind::Put, 0, key.as_ref(), value.as_ref())
    }

    /// Deletes `key` in this transaction.
    pub fn delete(&mut self, key: impl AsRef<[u8]>) -> Result<()> {
        self.write(OpKind::Delete, 0, key.as_ref(), &[])
    }

    /// Merges `operand` into `key` in this transaction (needs the database's merge operator).
    pub fn merge(&mut self, key: impl AsRef<[u8]>, operand: impl AsRef<[u8]>) -> Result<()> {
        self.write(OpKind::Merge, 0, key.as_ref(), operand.as_ref())
    }

    /// [`Transaction::put`] in column family `cf`: one transaction may write to several families, committed as
    /// one batch; locks and conflicts are per family and key.
    pub fn put_cf(&mut self, cf: &ColumnFamily, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> Result<()> {
        let family = self.use_family(cf)?;
        self.write(OpKind::Put, family, key.as_ref(), value.as_ref())
    }

    /// [`Transaction::delete`] in column family `cf`.
    pub fn delete_cf(&mut self, cf: &ColumnFamily, key: impl AsRef<[u8]>) -> Result<()> {
        let family = self.use_family(cf)?;
        self.write(OpKind::Delete, family, key.as_ref(), &[])
    }

    /// [`Transaction::merge`] in column family `cf` (needs the family's merge operator).
    pub fn merge_cf(&mut self, cf: &ColumnFamily, key: impl AsRef<[u8]>, operand: impl AsRef<[u8]>) -> Result<()> {
        let family = self.use_family(cf)?;
        self.write(OpKind::Merge, family, key.as_ref(), operand.as_ref())
    }

    fn write(&mut self, kind: OpKind, family: u32, key: &[u8], value: &[u8]) -> Result<()> {
        self.check_open()?;
        if kind == OpKind::Merge && self.merge_operator(family).is_none() {
            return Err(Error::InvalidArgument("merge needs Options::merge_operator to be set".into()));
        }
        self.track(family, key)?;
        self.push(kind, family, key, value);
        Ok(())
    }

    fn merge_operator(&self, family: u32) -> Option<Arc<dyn crate::merge::MergeOperator>> {
        self.families.get(&family).and_then(|cf| cf.fam.opts.merge_operator.clone())
    }

    /// Reads `key` as this transaction sees it: its own writes over the database at its snapshot (with
    /// `set_snapshot`) or at the latest state.
    pub fn get(&self, key: impl AsRef<[u8]>) -> Result<Option<Vec<u8>>> {
        let opts = ReadOptions { snapshot: self.snapshot.clone(), ..ReadOptions::default() };
        self.get_opt(&opts, key)
    }

    /// [`Transaction::get`] reading the database as `opts` say (RocksDB's `Transaction::Get` with read
    /// options: its snapshot, if any, is the one read).
    pub fn get_opt(&self, opts: &ReadOptions, key: impl AsRef<[u8]>) -> Result<Option<Vec<u8>>> {
        self.read(opts, 0, key.as_ref())
    }

    /// [`Transaction::get`] in column family `cf`.
    pub fn get_cf(&self, cf: &ColumnFamily, key: impl AsRef<[u8]>) -> Result<Option<Vec<u8>>> {
        let opts = ReadOptions { snapshot: self.snapshot.clone(), ..ReadOptions::default() };
        self.get_cf_opt(&opts, cf, key)
    }

    /// [`Transaction::get_opt`] in column family `cf`.
    pub fn get_cf_opt(&self, opts: &ReadOptions, cf: &ColumnFamily, key: impl AsRef<[u8]>) -> Result<Option<Vec<u8>>> {
        self.check_open()?;
        let key = key.as_ref();
        if !self.families.contains_key(&cf.id()) {
            // Nothing of this family written here: the database's value.
            return self.db.get_cf_opt(opts, cf, key);
        }
        self.read(opts, cf.id(), key)
    }

    fn read(&self, opts: &ReadOptions, family: u32, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.check_open()?;
        let Some(cf) = self.families.get(&family) else {
            return Err(Error::InvalidArgument(format!("column family {family} is not used by this transaction")));
        };
        let Some(idx) = self.index.get(&slot(family, key)) else { return self.db.get_cf_opt(opts, cf, key) };
        // Newest write first: a put or delete decides; merge operands above it are combined onto it.
        let mut operands: Vec<&[u8]> = Vec::new();
        let mut base: Option<Option<Vec<u8>>> = None;
        for &i in idx.iter().rev() {
            let op = &self.ops[i];
            match op.kind {
                OpKind::Put => {
                    base = Some(Some(op.value.clone()));
                    break;
                }
                OpKind::Delete => {
                    base = Some(None);
                    break;
                }
                OpKind::Merge => operands.push(&op.value),
            }
        }
        if operands.is_empty() {
            return Ok(base.flatten());
        }
        let existing = match base {
            Some(b) => b,
            None => self.db.get_cf_opt(opts, cf, key)?,
        };
        operands.reverse();
        let Some(m) = self.merge_operator(family) else {
            return Err(Error::InvalidArgument("merge needs Options::merge_operator to be set".into()));
        };
        m.full_merge(key, existing.as_deref(), &operands).map(Some).ok_or_else(|| {
            Error::InvalidArgument(format!("merge operator {} rejected this transaction's operands", m.name()))
        })
    }

    /// Reads `key` and claims it: pessimistic transactions lock it (so no one else writes it until this
    /// transaction ends), optimistic ones note it (so `commit` fails if someone else writes it first).
    pub fn get_for_update(&mut self, key: impl AsRef<[u8]>) -> Result<Option<Vec<u8>>> {
        self.check_open()?;
        let key = key.as_ref();
        self.track(0, key)?;
        self.get(key)
    }

    /// [`Transaction::get_for_update`] in column family `cf`.
    pub fn get_for_update_cf(&mut self, cf: &ColumnFamily, key: impl AsRef<[u8]>) -> Result<Option<Vec<u8>>> {
        self.check_open()?;
        let family = self.use_family(cf)?;
        let key = key.as_ref();
        self.track(family, key)?;
        self.get_cf(cf, key)
    }

    /// Marks a point [`rollback_to_savepoint`](Self::rollback_to_savepoint) returns to.
    pub fn set_savepoint(&mut self) {
        self.savepoints.push(SavePoint { ops: self.ops.len(), tracked: self.tracked_order.len() });
    }

    /// Undoes every write since the last savepoint and removes it; keys first locked (or noted) since then are
    /// released. `InvalidArgument` when there is no savepoint (RocksDB's `NotFound`).
    pub fn rollback_to_savepoint(&mut self) -> Result<()> {
        self.check_open()?;
        let Some(sp) = self.savepoints.pop() else {
            return Err(Error::InvalidArgument("no savepoint to roll back to".into()));
        };
        self.ops.truncate(sp.ops);
        self.index.clear();
        for (i, op) in self.ops.iter().enumerate() {
            self.index.entry(slot(op.family, &op.key)).or_default().push(i);
        }
        for key in self.tracked_order.split_off(sp.tracked) {
            self.tracked.remove(&key);
            if let Mode::Pessimistic { locks, .. } = self.mode {
                locks.unlock(self.id, &key);
            }
        }
        Ok(())
    }

    /// Number of writes buffered.
    pub fn num_writes(&self) -> usize {
        self.ops.len()
    }

    /// Applies the transaction's writes atomically. Optimistic: `Busy` (and nothing written) when a key it
    /// wrote or read for update changed since. Either way the transaction is over afterwards (a failed
    /// optimistic commit is rolled back: start a new transaction to retry).
    pub fn commit(mut self) -> Result<()> {
        self.check_open()?;
        let mut batch = WriteBatch::with_capacity(self.ops.iter().map(|o| o.key.len() + o.value.len() + 12).sum());
        for op in &self.ops {
            let Some(cf) = self.families.get(&op.family) else { continue };
            match op.kind {
                OpKind::Put => batch.put_cf(cf, &op.key, &op.value),
                OpKind::Delete => batch.delete_cf(cf, &op.key),
                OpKind::Merge => batch.merge_cf(cf, &op.key, &op.value),
            };
        }
        let result = match self.mode {
            Mode::Pessimistic { .. } => {
                // An empty commit with `sync` still syncs, as an empty synced `Db::write` does: every write
                // acknowledged before it is durable when it returns.
                if batch.is_empty() && !self.write_opts.sync {
                    Ok(())
                } else {
                    self.db.write_opt(&self.write_opts, &batch)
                }
            }
            Mode::Optimistic { stripes } => {
                // Every stripe of a tracked key, in one global order (so two commits never wait on each other
                // in a cycle), held across validation and write.
                let mut ids: Vec<usize> = self.tracked.keys().map(|k| commit_stripe(k)).collect();
                ids.sort_unstable();
                ids.dedup();
                let _held: Vec<_> = ids.iter().map(|&i| stripes[i].lock()).collect();
                let mut r = Ok(());
                for (key, &seq) in &self.tracked {
                    if let Err(e) = self.validate(key, seq) {
                        r = Err(e);
                        break;
                    }
                }
                match r {
                    Ok(()) if !batch.is_empty() || self.write_opts.sync => self.db.write_opt(&self.write_opts, &batch),
                    other => other,
                }
            }
        };
        match result {
            Ok(()) => {
                self.state = State::Committed;
                self.release();
                Ok(())
            }
            Err(e) => {
                self.finish_rollback();
                Err(e)
            }
        }
    }

    /// Discards every write and releases every lock; the transaction is over.
    pub fn rollback(mut self) -> Result<()> {
        self.check_open()?;
        self.finish_rollback();
        Ok(())
    }

    fn finish_rollback(&mut self) {
        self.ops.clear();
        self.index.clear();
        self.state = State::RolledBack;
        self.release();
    }

    fn release(&mut self) {
        if let Mode::Pessimistic { locks, .. } = self.mode {
            for key in &self.tracked_order {
                locks.unlock(self.id, key);
            }
        }
        self.tracked.clear();
        self.tracked_order.clear();
        self.savepoints.clear();
    }
}

impl Drop for Transaction<'_> {
    fn drop(&mut self) {
        if self.state == State::Started {
            self.finish_rollback();
        }
    }
}
