//! The engine behind the server, and the commit thread that makes writes durable.
//!
//! Reads run on the connection's task (the engine's read path takes no global lock). Every write command goes
//! to one dedicated commit thread as part of a [`Job`] (a connection's run of consecutive write commands). The
//! thread takes every job waiting, executes their commands in arrival order into one `WriteBatch`, writes it
//! with one WAL record and, under `appendfsync always`, one fsync, and only then answers every job: group
//! commit across all connections, and no runtime worker ever blocks on an fsync.
//!
//! Executing writes on one thread also makes read-modify-write commands (INCR, APPEND, SETRANGE, GETSET, SET
//! NX/XX/GET ...) atomic without any lock: they read the engine (the state after every earlier group) and,
//! when they touch a key already written in the current group, the batch so far is applied first (without a
//! sync; the group's final write or sync covers it), so they always read their predecessors' effects.
//!
//! A failed write or fsync is never acknowledged: every command of the failed group is answered with a
//! `MISCONF` error, the server turns read-only (the engine refuses every later write, D6) and says why in
//! its log and in `INFO persistence`. Reads go on.

use crate::commands::Spec;
use crate::keys;
use crate::resp::{Args, Reply};
use bytes::Bytes;
use parking_lot::Mutex;
use shaledb::{Db, ReadOptions, WriteBatch, WriteOptions};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Redis's `appendfsync`: when a write is acknowledged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Appendfsync {
    /// After the WAL record holding it is fsynced (group commit). The default.
    Always,
    /// After it reached the WAL (write(2)); the WAL is fsynced once a second.
    Everysec,
    /// After it reached the WAL; fsync is left to the OS and to memtable switches.
    No,
}

impl Appendfsync {
    pub fn name(self) -> &'static str {
        match self {
            Appendfsync::Always => "always",
            Appendfsync::Everysec => "everysec",
            Appendfsync::No => "no",
        }
    }

    pub fn parse(s: &str) -> Option<Appendfsync> {
        match s.to_ascii_lowercase().as_str() {
            "always" => Some(Appendfsync::Always),
            "everysec" => Some(Appendfsync::Everysec),
            "no" => Some(Appendfsync::No),
            _ => None,
        }
    }

    fn from_u8(b: u8) -> Appendfsync {
        match b {
            0 => Appendfsync::Always,
            1 => Appendfsync::Everysec,
            _ => Appendfsync::No,
        }
    }

    fn to_u8(self) -> u8 {
        match self {
            Appendfsync::Always => 0,
            Appendfsync::Everysec => 1,
            Appendfsync::No => 2,
        }
    }
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

/// A run of write commands from one connection, answered all at once.
pub struct Job {
    pub db_index: u8,
    pub cmds: Vec<(&'static Spec, Args)>,
    pub reply: tokio::sync::oneshot::Sender<Vec<Reply>>,
}

/// Counters shown by `INFO persistence` and `INFO stats`.
#[derive(Default, Debug)]
pub struct CommitStats {
    /// Groups written (one WAL record each).
    pub groups: AtomicU64,
    /// Write commands executed.
    pub commands: AtomicU64,
    /// fsyncs issued by the server (group syncs and everysec syncs).
    pub fsyncs: AtomicU64,
    /// Unix seconds of the last successful fsync.
    pub last_fsync_unix: AtomicU64,
}

/// The engine and the commit thread.
pub struct Store {
    pub db: Arc<Db>,
    tx: Mutex<Option<crossbeam_channel::Sender<Job>>>,
    appendfsync: AtomicU8,
    /// Why writes are refused, once a write or fsync failed.
    read_only: Mutex<Option<String>>,
    read_only_flag: AtomicBool,
    pub stats: CommitStats,
    threads: Mutex<Vec<JoinHandle<()>>>,
    stop: Arc<AtomicBool>,
    /// Most commands one group executes before it is written (bounds the batch and the reply latency).
    pub max_group_commands: usize,
    /// The collector of dead collection versions (gc.rs).
    pub gc: crate::gc::Collector,
    /// Clients blocked on keys (BLPOP, XREAD BLOCK ...), woken by the commit thread (`blocking.rs`).
    pub blocking: Arc<crate::blocking::Registry>,
}

/// Most bytes of payload one group gathers before it is written.
const MAX_GROUP_BYTES: usize = 16 << 20;

impl Store {
    /// Starts the commit thread (and the everysec syncer) on an open database.
    pub fn start(db: Db, appendfsync: Appendfsync) -> Arc<Store> {
        let (tx, rx) = crossbeam_channel::unbounded::<Job>();
        let store = Arc::new(Store {
            db: Arc::new(db),
            tx: Mutex::new(Some(tx)),
            appendfsync: AtomicU8::new(appendfsync.to_u8()),
            read_only: Mutex::new(None),
            read_only_flag: AtomicBool::new(false),
            stats: CommitStats::default(),
            threads: Mutex::new(Vec::new()),
            stop: Arc::new(AtomicBool::new(false)),
            max_group_commands: 16 * 1024,
            gc: crate::gc::Collector::default(),
            blocking: Arc::new(crate::blocking::Registry::default()),
        });
        let s = store.clone();
        let commit = std::thread::Builder::new()
            .name("shaledb-commit".into())
            .spawn(move || commit_loop(&s, rx))
            .expect("spawn the commit thread");
        let s = store.clone();
        let syncer = std::thread::Builder::new()
            .name("shaledb-everysec".into())
            .spawn(move || everysec_loop(&s))
            .expect("spawn the everysec thread");
        let sweeper = crate::expire::spawn(store.clone());
        let collector = crate::gc::spawn(store.clone());
        store.threads.lock().extend([commit, syncer, sweeper, collector]);
        store
    }

    /// True once [`Store::shutdown`] began (background threads stop).
    pub fn stopping(&self) -> bool {
        self.stop.load(Ordering::Acquire)
    }

    pub fn appendfsync(&self) -> Appendfsync {
        Appendfsync::from_u8(self.appendfsync.load(Ordering::Relaxed))
    }

    pub fn set_appendfsync(&self, a: Appendfsync) {
        self.appendfsync.store(a.to_u8(), Ordering::Relaxed);
    }

    /// Why the server refuses writes, if it does.
    pub fn read_only_reason(&self) -> Option<String> {
        if !self.read_only_flag.load(Ordering::Acquire) {
            return None;
        }
        self.read_only.lock().clone()
    }

    pub(crate) fn set_read_only(&self, why: String) {
        let mut r = self.read_only.lock();
        if r.is_none() {
            eprintln!("# writes refused from now on: {why}");
            *r = Some(why);
            self.read_only_flag.store(true, Ordering::Release);
        }
    }

    pub(crate) fn misconf(&self) -> Reply {
        Reply::Error(format!(
            "MISCONF Errors writing to the WAL: {}; the server refuses writes until it is restarted",
            self.read_only_reason().unwrap_or_default()
        ))
    }

    /// Submits a job to the commit thread. `false` when the store is shut down (the job is dropped, its
    /// reply channel closes).
    pub fn submit(&self, job: Job) -> bool {
        match self.tx.lock().as_ref() {
            Some(tx) => tx.send(job).is_ok(),
            None => false,
        }
    }

    /// Runs one write job synchronously on the caller's thread (for background tasks such as the expiry
    /// sweep; they go through the commit thread like clients do). Returns `None` after shutdown.
    pub fn submit_and_wait(&self, db_index: u8, cmds: Vec<(&'static Spec, Args)>) -> Option<Vec<Reply>> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        if !self.submit(Job { db_index, cmds, reply: tx }) {
            return None;
        }
        rx.blocking_recv().ok()
    }

    /// Stops the commit and everysec threads after every job already submitted was answered, then syncs
    /// the WAL. The engine itself is closed by [`Store::close`].
    pub fn shutdown(&self) {
        self.tx.lock().take();
        self.stop.store(true, Ordering::Release);
        let threads = std::mem::take(&mut *self.threads.lock());
        for t in threads {
            let _ = t.join();
        }
        let _ = self.db.sync_wal();
    }
}

fn commit_loop(store: &Store, rx: crossbeam_channel::Receiver<Job>) {
    let mut group: Vec<Job> = Vec::new();
    let mut ctx = WriteCtx::new(&store.db);
    ctx.wake = Some(store.blocking.clone());
    if let Err(e) = ctx.load_versions() {
        store.set_read_only(format!("reading the collection registry failed: {e}"));
    }
    while let Ok(first) = rx.recv() {
        group.push(first);
        let mut n = group[0].cmds.len();
        while n < store.max_group_commands {
            match rx.try_recv() {
                Ok(job) => {
                    n += job.cmds.len();
                    group.push(job);
                }
                Err(_) => break,
            }
        }
        // A command that panics must not take the commit thread (and every later write) with it: its group
        // is answered with an error and, since the batch state is unknown, writes are refused from then on.
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            commit_group(store, &mut ctx, &mut group);
            // Clients blocked on keys this group pushed to, now that the pushes are durable.
            crate::blocking::serve(store, &mut ctx);
        }));
        if r.is_err() {
            store.set_read_only("internal error: a write command panicked (see stderr)".into());
            for job in group.drain(..) {
                let replies = job.cmds.iter().map(|_| store.misconf()).collect();
                let _ = job.reply.send(replies);
            }
        }
    }
}

fn commit_group(store: &Store, ctx: &mut WriteCtx<'_>, group: &mut Vec<Job>) {
    if store.read_only_reason().is_some() {
        for job in group.drain(..) {
            let replies = job.cmds.iter().map(|_| store.misconf()).collect();
            let _ = job.reply.send(replies);
        }
        return;
    }
    let mode = store.appendfsync();
    ctx.begin(now_ms());
    let mut replies: Vec<Vec<Reply>> = Vec::with_capacity(group.len());
    let mut count = 0u64;
    for job in group.iter() {
        ctx.db_index = job.db_index;
        let mut r = Vec::with_capacity(job.cmds.len());
        for (spec, args) in &job.cmds {
            count += 1;
            let before = ctx.write_counts();
            r.push(match spec.handler {
                crate::commands::Handler::Write(f) => f(ctx, args),
                _ => Reply::err("internal: not a write command"),
            });
            crate::commands::multi::after_write(ctx, spec, args, before);
            if ctx.failed() {
                break;
            }
            if ctx.pending_bytes() >= MAX_GROUP_BYTES {
                ctx.apply_pending();
            }
        }
        replies.push(r);
    }
    let result = ctx.finish(mode == Appendfsync::Always);
    store.stats.groups.fetch_add(1, Ordering::Relaxed);
    store.stats.commands.fetch_add(count, Ordering::Relaxed);
    match result {
        Ok(synced) => {
            if synced {
                store.stats.fsyncs.fetch_add(1, Ordering::Relaxed);
                store.stats.last_fsync_unix.store(now_ms() / 1000, Ordering::Relaxed);
            }
            store.blocking.mark_ready(&mut ctx.signals);
            for (job, r) in group.drain(..).zip(replies) {
                let _ = job.reply.send(r);
            }
            // The versions the group removed are durable garbage now: reclaim them promptly.
            if !ctx.dropped.is_empty() {
                store.gc.enqueue(ctx.dropped.drain(..));
            }
        }
        Err(e) => {
            ctx.forget_dead_ranges();
            store.set_read_only(e);
            for job in group.drain(..) {
                let replies = job.cmds.iter().map(|_| store.misconf()).collect();
                let _ = job.reply.send(replies);
            }
        }
    }
}

fn everysec_loop(store: &Store) {
    let mut last = Instant::now();
    while !store.stop.load(Ordering::Acquire) {
        std::thread::sleep(Duration::from_millis(50));
        if last.elapsed() < Duration::from_secs(1) {
            continue;
        }
        last = Instant::now();
        if store.appendfsync() != Appendfsync::Everysec || store.read_only_reason().is_some() {
            continue;
        }
        match store.db.sync_wal() {
            Ok(()) => {
                store.stats.fsyncs.fetch_add(1, Ordering::Relaxed);
                store.stats.last_fsync_unix.store(now_ms() / 1000, Ordering::Relaxed);
            }
            Err(e) => store.set_read_only(format!("WAL fsync failed: {e}")),
        }
    }
}

/// The commit thread's writes of the current group that are not in the engine yet: engine key -> value
/// (`None`: deleted). Reads in the commit thread look here first, so a command (and every command of an
/// `EXEC`) sees the writes before it without applying them: a group's writes reach the engine as one batch
/// (one WAL record), all or nothing after a crash.
pub type Overlay = BTreeMap<Vec<u8>, Option<Vec<u8>>>;

/// What a write command sees: reads of the engine through the group's pending writes, and those writes, in
/// the commit thread.
pub struct WriteCtx<'a> {
    pub db: &'a Db,
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
    /// The next collection version to hand out (see keys.rs); loaded by [`WriteCtx::load_versions`].
    next_version: u64,
    /// Collection versions removed by this group's commands, for the collector to reclaim early:
    /// `(db, version)`.
    pub dropped: Vec<(u8, u64)>,
    /// Scratch for building engine keys.
    pub key_buf: Vec<u8>,
    /// Scratch for building values.
    val_buf: Vec<u8>,
    /// The wake-up registry of blocked clients (`blocking.rs`); `None` outside the commit thread.
    pub(crate) wake: Option<Arc<crate::blocking::Registry>>,
    /// Keys this group made poppable or readable for blocked clients: `(db, key)` (see
    /// [`WriteCtx::signal_key`]); handed to the registry once the group is durable.
    pub(crate) signals: Vec<(u8, Bytes)>,
    /// The keys clients WATCH (commands/multi.rs): every write of a meta key is reported to it.
    pub watches: crate::commands::multi::Watches,
    /// Engine writes recorded so far, and how many of them were meta keys (for WATCH: a command that wrote
    /// only member records is reported by its key arguments).
    writes: u64,
    meta_writes: u64,
    /// Where the commit thread knows collections have no live member records, learnt from its pops
    /// (dead.rs); only the commit thread's context records any.
    pub(crate) dead: crate::dead::DeadRanges,
}

/// Bytes counted per pending entry besides its key and value (map node, batch record header).
const PENDING_ENTRY_OVERHEAD: usize = 48;

impl<'a> WriteCtx<'a> {
    pub fn new(db: &'a Db) -> WriteCtx<'a> {
        WriteCtx {
            db,
            db_index: 0,
            now_ms: 0,
            pending: Overlay::new(),
            pending_bytes: 0,
            batch: WriteBatch::new(),
            applied: false,
            failed: None,
            next_version: 1,
            dropped: Vec::new(),
            key_buf: Vec::new(),
            val_buf: Vec::new(),
            wake: None,
            signals: Vec::new(),
            watches: Default::default(),
            writes: 0,
            meta_writes: 0,
            dead: Default::default(),
        }
    }

    /// Sets the next collection version above every version in the registry of every database (at start,
    /// before the first group). A version whose registry record is gone has no member records left, so
    /// handing it out again could not resurrect anything; starting above the largest is simply clearer.
    pub fn load_versions(&mut self) -> shaledb::Result<()> {
        let mut next = 1u64;
        for db in 0..keys::DATABASES {
            let lower = vec![db, keys::KIND_REGISTRY];
            let upper = vec![db, keys::KIND_REGISTRY + 1];
            let mut it = self.db.cursor_opt(&ReadOptions {
                iterate_lower_bound: Some(lower),
                iterate_upper_bound: Some(upper),
                ..ReadOptions::default()
            });
            it.seek_to_last();
            if it.valid() && it.key().len() == 10 {
                next = next.max(keys::be_u64(&it.key()[2..10]).saturating_add(1));
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
        // The collector took `dropped` after the last successful group (commit_group); a failed group's
        // versions are left to the collector's slow pass.
        self.dropped.clear();
    }

    /// Records that `user_key` (current database) got elements a blocked client may take (a push to a list,
    /// XADD): once this group is durable, the commit thread serves the clients blocked on it. Free when no
    /// client is blocked.
    pub fn signal_key(&mut self, user_key: &[u8]) {
        if self.wake.as_ref().is_some_and(|w| w.has_waiters()) {
            self.signals.push((self.db_index, Bytes::copy_from_slice(user_key)));
        }
    }

    /// Approximate bytes of the group's pending writes.
    pub fn pending_bytes(&self) -> usize {
        self.pending_bytes
    }

    /// Writes `pending` to the engine as one batch and clears it.
    fn write_pending(&mut self, sync: bool) -> shaledb::Result<()> {
        self.batch.clear();
        for (k, v) in &self.pending {
            match v {
                Some(v) => self.batch.put(k, v),
                None => self.batch.delete(k),
            };
        }
        let r = self.db.write_opt(&WriteOptions { sync, ..Default::default() }, &self.batch);
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
        if let Err(e) = self.write_pending(false) {
            self.failed = Some(format!("WAL write failed: {e}"));
        }
        self.applied = true;
    }

    /// Writes what is left and syncs if asked. `Ok(true)` if an fsync was issued.
    pub(crate) fn finish(&mut self, sync: bool) -> Result<bool, String> {
        if let Some(e) = self.failed.take() {
            self.pending.clear();
            self.pending_bytes = 0;
            return Err(e);
        }
        let r = if !self.pending.is_empty() {
            self.write_pending(sync).map(|()| sync)
        } else if self.applied && sync {
            self.db.sync_wal().map(|()| true)
        } else {
            Ok(false)
        };
        r.map_err(|e| format!("WAL write or fsync failed: {e}"))
    }

    /// True when the group failed (its commands are not acknowledged).
    pub fn failed(&self) -> bool {
        self.failed.is_some()
    }

    /// Reads an engine key as of everything executed before in this group.
    pub fn get_raw(&mut self, engine_key: &[u8]) -> shaledb::Result<Option<Vec<u8>>> {
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
        self.writes += 1;
        if engine_key.get(1) == Some(&keys::KIND_META) {
            self.meta_writes += 1;
            if !self.watches.is_empty() {
                self.watches.touch(engine_key, value.is_some());
            }
        }
        self.pending_bytes += engine_key.len() + value.map_or(0, <[u8]>::len) + PENDING_ENTRY_OVERHEAD;
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
    pub fn get_meta(&mut self, user_key: &[u8]) -> Result<Option<(keys::Meta, Bytes)>, Reply> {
        self.get_meta_in(self.db_index, user_key)
    }

    /// [`WriteCtx::get_meta`] in database `db` (MOVE, COPY ... DB).
    pub fn get_meta_in(&mut self, db: u8, user_key: &[u8]) -> Result<Option<(keys::Meta, Bytes)>, Reply> {
        let mut k = std::mem::take(&mut self.key_buf);
        keys::meta_key_into(db, user_key, &mut k);
        let r = self.get_raw(&k);
        let out = match r {
            Ok(None) => Ok(None),
            Ok(Some(v)) => match keys::decode_meta(&v) {
                Ok(m) if m.expired(self.now_ms) => {
                    if let Ok(Some(c)) = keys::Coll::decode(&v) {
                        self.dropped.push((db, c.version));
                    }
                    self.delete_raw(&k);
                    Ok(None)
                }
                Ok(m) => Ok(Some((m, Bytes::from(v)))),
                Err(e) => Err(Reply::err(e)),
            },
            Err(e) => Err(Reply::err(format!("read failed: {e}"))),
        };
        self.key_buf = k;
        out
    }
}

impl WriteCtx<'_> {
    /// Stores `stored` (a whole meta value: head and payload) as `user_key` of database `db`, unless the
    /// engine could not hold it: then nothing is written and the command gets the error (the group goes on).
    pub fn put_meta_in(&mut self, db: u8, user_key: &[u8], stored: &[u8]) -> Result<(), Reply> {
        check_entry_size(user_key.len(), stored.len())?;
        let mut k = std::mem::take(&mut self.key_buf);
        keys::meta_key_into(db, user_key, &mut k);
        self.put_raw(&k, stored);
        self.key_buf = k;
        Ok(())
    }

    /// Stores a string (with its expiry) as `user_key` of the current database; see [`WriteCtx::put_meta_in`].
    pub fn put_string(&mut self, user_key: &[u8], value: &[u8], expire_at_ms: Option<u64>) -> Result<(), Reply> {
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
        keys::meta_key_into(db, user_key, &mut k);
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
    pub fn remove_key(&mut self, db: u8, user_key: &[u8]) -> Result<bool, Reply> {
        let k = keys::meta_key(db, user_key);
        match self.get_raw(&k) {
            Ok(Some(v)) => {
                self.delete_stored(db, user_key, &v);
                Ok(true)
            }
            Ok(None) => Ok(false),
            Err(e) => Err(Reply::err(format!("read failed: {e}"))),
        }
    }

    /// A read view of the engine as of everything executed before in this group, pending writes included
    /// (no snapshot is needed: only the commit thread writes). Read commands inside `EXEC` run with it.
    pub fn view(&self) -> ReadCtx<'_> {
        ReadCtx {
            db: self.db,
            db_index: self.db_index,
            now_ms: self.now_ms,
            overlay: Some(&self.pending),
            snapshot: None,
        }
    }

    /// Same as [`WriteCtx::view`] (kept for the callers that read inside `EXEC`).
    pub fn read_ctx(&mut self) -> ReadCtx<'_> {
        self.view()
    }

    // -----------------------------------------------------------------------------------------------------
    // Collections (keys.rs has the layout)

    /// A version never used before: for a collection being created. Write the collection with
    /// [`WriteCtx::create_coll`], which also records the version in the registry.
    fn new_version(&mut self) -> u64 {
        let v = self.next_version;
        self.next_version = v.saturating_add(1);
        v
    }

    /// The live collection `user_key` of the current database if it is of type `typ`: `Ok(None)` when the
    /// key is missing (or expired: then deleted as on access), `Err(WRONGTYPE)` when it holds another type.
    pub fn get_coll(&mut self, user_key: &[u8], typ: keys::Type) -> Result<Option<keys::Coll>, Reply> {
        let Some((m, stored)) = self.get_meta(user_key)? else { return Ok(None) };
        if m.typ != typ {
            return Err(crate::commands::wrong_type());
        }
        match keys::Coll::decode(&stored) {
            Ok(Some(c)) => Ok(Some(c)),
            Ok(None) => Err(crate::commands::wrong_type()),
            Err(e) => Err(Reply::err(e)),
        }
    }

    /// A new, empty collection of `typ` for `user_key` of the current database, with a fresh version
    /// recorded in the registry (in this group's batch). Not stored until [`WriteCtx::put_coll`].
    pub fn create_coll(&mut self, user_key: &[u8], typ: keys::Type) -> keys::Coll {
        let version = self.new_version();
        let rk = keys::registry_key(self.db_index, version);
        self.put_raw(&rk, user_key);
        keys::Coll::new(typ, version)
    }

    /// The collection `user_key` of type `typ`, created (see [`WriteCtx::create_coll`]) when missing;
    /// `Err(WRONGTYPE)` when the key holds another type.
    pub fn get_or_create_coll(&mut self, user_key: &[u8], typ: keys::Type) -> Result<keys::Coll, Reply> {
        match self.get_coll(user_key, typ)? {
            Some(c) => Ok(c),
            None => Ok(self.create_coll(user_key, typ)),
        }
    }

    /// Stores a collection's meta value as `user_key` of the current database; a collection whose size
    /// reached 0 is deleted instead (Redis never keeps an empty collection), with [`WriteCtx::drop_coll`].
    /// Call it once per command, after the member writes: the meta value and the members change in the same
    /// batch, so the size is exact after a crash.
    pub fn put_coll(&mut self, user_key: &[u8], c: &keys::Coll) -> Result<(), Reply> {
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

    /// The dead ranges (dead.rs) the commit thread learnt of `c`'s records of sub-kind `sub`.
    pub fn dead_ranges(&self, c: &keys::Coll, sub: u8) -> Option<&crate::dead::Ranges> {
        self.dead.get((self.db_index, c.version, sub))
    }

    /// Records that no part of `c`'s records of sub-kind `sub` in `[from, to]` is live: a pop staged the
    /// deletion of every one there. Commit thread only.
    pub fn note_dead_zone(&mut self, c: &keys::Coll, sub: u8, from: &[u8], to: &[u8]) {
        self.dead.note_zone((self.db_index, c.version, sub), from, to);
    }

    /// Records that no part of `c`'s records of sub-kind `sub` at or after `from` is live. Commit thread
    /// only.
    pub fn note_dead_tail(&mut self, c: &keys::Coll, sub: u8, from: &[u8]) {
        self.dead.note_tail((self.db_index, c.version, sub), from);
    }

    /// Forgets every dead range (a group failed: its pops may not have happened).
    pub fn forget_dead_ranges(&mut self) {
        self.dead.clear();
    }

    /// Reads a member record of collection `c` (current database).
    pub fn get_member(&mut self, c: &keys::Coll, sub: u8, part: &[u8]) -> Result<Option<Vec<u8>>, Reply> {
        let mut k = std::mem::take(&mut self.key_buf);
        keys::member_key_into(self.db_index, c.version, sub, part, &mut k);
        let r = self.get_raw(&k).map_err(|e| Reply::err(format!("read failed: {e}")));
        self.key_buf = k;
        r
    }

    /// Writes a member record of collection `c` (current database), refusing one the engine could not hold.
    pub fn put_member(&mut self, c: &keys::Coll, sub: u8, part: &[u8], value: &[u8]) -> Result<(), Reply> {
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

    /// Deletes a member record of collection `c` (current database).
    pub fn delete_member(&mut self, c: &keys::Coll, sub: u8, part: &[u8]) {
        let mut k = std::mem::take(&mut self.key_buf);
        keys::member_key_into(self.db_index, c.version, sub, part, &mut k);
        self.delete_raw(&k);
        self.key_buf = k;
    }
}

/// Refuses a user key and stored value the engine could not hold as one entry
/// (`shaledb::options::limits::MAX_KEY_VALUE_BYTES` for the engine key plus value): the command gets a clear
/// error and nothing else of the group is affected (the engine would refuse the whole batch).
pub fn check_entry_size(user_key_len: usize, stored_len: usize) -> Result<(), Reply> {
    let max = shaledb::options::limits::MAX_KEY_VALUE_BYTES;
    if user_key_len.saturating_add(2).saturating_add(stored_len) > max {
        return Err(Reply::err(format!(
            "key plus value too large: ShaleDB stores at most {max} bytes of key and value per key"
        )));
    }
    Ok(())
}

/// What a read command sees: the engine (on the connection's task), or, in the commit thread, the engine
/// through the group's pending writes ([`WriteCtx::view`]).
pub struct ReadCtx<'a> {
    pub db: &'a Db,
    pub db_index: u8,
    pub now_ms: u64,
    /// The commit thread's pending writes (reads inside `EXEC`); `None` on connections.
    overlay: Option<&'a Overlay>,
    /// Reads as of this snapshot (see [`ReadCtx::pinned`]).
    snapshot: Option<shaledb::Snapshot>,
}

impl<'a> ReadCtx<'a> {
    /// A read context on a connection: the latest state of the engine at each read.
    pub fn new(db: &'a Db, db_index: u8, now_ms: u64) -> ReadCtx<'a> {
        ReadCtx { db, db_index, now_ms, overlay: None, snapshot: None }
    }

    /// The same context reading as of one snapshot taken now, so a command that reads a collection's meta
    /// value and then its members (HGETALL, LRANGE, ZRANGE ...) sees one state even while the commit thread
    /// writes. In the commit thread (a view with pending writes) nothing else writes, so no snapshot is taken.
    pub fn pinned(&self) -> ReadCtx<'a> {
        let snapshot = match (&self.snapshot, self.overlay) {
            (Some(s), _) => Some(s.clone()),
            (None, Some(_)) => None,
            (None, None) => Some(self.db.snapshot()),
        };
        ReadCtx { db: self.db, db_index: self.db_index, now_ms: self.now_ms, overlay: self.overlay, snapshot }
    }

    fn read_options(&self) -> ReadOptions {
        ReadOptions { snapshot: self.snapshot.clone(), ..ReadOptions::default() }
    }

    /// An engine key's value (pending writes first in the commit thread).
    pub fn get_raw(&self, engine_key: &[u8]) -> Result<Option<Vec<u8>>, Reply> {
        if let Some(v) = self.overlay.and_then(|o| o.get(engine_key)) {
            return Ok(v.clone());
        }
        let r = match &self.snapshot {
            Some(_) => self.db.get_opt(&self.read_options(), engine_key),
            None => self.db.get(engine_key),
        };
        r.map_err(|e| Reply::err(format!("read failed: {e}")))
    }

    /// The live meta value of `user_key`, or `None` if missing or expired.
    pub fn get_meta(&self, user_key: &[u8]) -> Result<Option<(keys::Meta, Bytes)>, Reply> {
        let k = keys::meta_key(self.db_index, user_key);
        match self.get_raw(&k)? {
            None => Ok(None),
            Some(v) => match keys::decode_meta(&v) {
                Ok(m) if m.expired(self.now_ms) => Ok(None),
                Ok(m) => Ok(Some((m, Bytes::from(v)))),
                Err(e) => Err(Reply::err(e)),
            },
        }
    }

    /// The live collection `user_key` if it is of type `typ`: `Ok(None)` when missing or expired,
    /// `Err(WRONGTYPE)` when it holds another type. Use it on a [`ReadCtx::pinned`] context before reading
    /// members.
    pub fn get_coll(&self, user_key: &[u8], typ: keys::Type) -> Result<Option<keys::Coll>, Reply> {
        let Some((m, stored)) = self.get_meta(user_key)? else { return Ok(None) };
        if m.typ != typ {
            return Err(crate::commands::wrong_type());
        }
        match keys::Coll::decode(&stored) {
            Ok(Some(c)) => Ok(Some(c)),
            Ok(None) => Err(crate::commands::wrong_type()),
            Err(e) => Err(Reply::err(e)),
        }
    }

    /// A member record of collection `c`.
    pub fn get_member(&self, c: &keys::Coll, sub: u8, part: &[u8]) -> Result<Option<Vec<u8>>, Reply> {
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
        let pending = match self.overlay {
            Some(o) if lower < upper => {
                Some(o.range::<[u8], _>((std::ops::Bound::Included(lower), std::ops::Bound::Excluded(upper))))
            }
            _ => None,
        };
        Scan { it, pending, reverse, peeked: None, done: false }
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
    ) -> Result<usize, Reply> {
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
        while n < limit && it.valid() {
            f(it.value());
            n += 1;
            it.next();
        }
        it.status().map_err(|e| Reply::err(format!("read failed: {e}")))?;
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
    done: bool,
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
        if self.reverse {
            self.it.prev();
        } else {
            self.it.next();
        }
    }
}

impl Iterator for Scan<'_> {
    type Item = Result<(Vec<u8>, Vec<u8>), Reply>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if self.done {
                return None;
            }
            let engine = self.it.valid().then(|| self.it.key().to_vec());
            if engine.is_none() {
                if let Err(e) = self.it.status() {
                    self.done = true;
                    return Some(Err(Reply::err(format!("read failed: {e}"))));
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
                        self.step_engine();
                        true
                    } else {
                        (p < e) != reverse
                    }
                }
            };
            if take_pending {
                self.peeked = None;
                let (k, v) = pending.expect("checked above");
                match v {
                    Some(v) => return Some(Ok((k, v))),
                    None => continue,
                }
            }
            let k = engine.expect("checked above");
            let v = self.it.value().to_vec();
            self.step_engine();
            return Some(Ok((k, v)));
        }
    }
}

/// Member records of one collection: see [`ReadCtx::members`]. Items are `(part, value)`.
pub struct Members<'a> {
    scan: Scan<'a>,
}

impl Iterator for Members<'_> {
    type Item = Result<(Vec<u8>, Vec<u8>), Reply>;

    fn next(&mut self) -> Option<Self::Item> {
        Some(self.scan.next()?.map(|(mut k, v)| {
            k.drain(..11.min(k.len()));
            (k, v)
        }))
    }
}

#[cfg(test)]
mod tests;
