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
use std::collections::HashSet;
use std::hash::{BuildHasher, BuildHasherDefault, DefaultHasher};
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
        store.threads.lock().extend([commit, syncer, sweeper]);
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

    fn set_read_only(&self, why: String) {
        let mut r = self.read_only.lock();
        if r.is_none() {
            eprintln!("# writes refused from now on: {why}");
            *r = Some(why);
            self.read_only_flag.store(true, Ordering::Release);
        }
    }

    fn misconf(&self) -> Reply {
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
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| commit_group(store, &mut ctx, &mut group)));
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
            r.push(match spec.handler {
                crate::commands::Handler::Write(f) => f(ctx, args),
                _ => Reply::err("internal: not a write command"),
            });
            if ctx.failed.is_some() {
                break;
            }
            if ctx.batch_bytes() >= MAX_GROUP_BYTES {
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
            for (job, r) in group.drain(..).zip(replies) {
                let _ = job.reply.send(r);
            }
        }
        Err(e) => {
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

type KeyHasher = BuildHasherDefault<DefaultHasher>;

/// What a write command sees: reads of the engine and a batch of writes, in the commit thread.
pub struct WriteCtx<'a> {
    pub db: &'a Db,
    /// The database (`SELECT`) of the command being executed.
    pub db_index: u8,
    /// The group's clock: one `now` for every command of a group (expiry decisions agree inside it).
    pub now_ms: u64,
    batch: WriteBatch,
    /// Hashes of the engine keys written by `batch` (a read of one of them applies the batch first).
    written: HashSet<u64, KeyHasher>,
    /// The group already applied part of its writes (so the final step must sync even if `batch` is empty).
    applied: bool,
    /// The first engine error of the group: the group is not acknowledged.
    failed: Option<String>,
    /// Scratch for building engine keys.
    pub key_buf: Vec<u8>,
    /// Scratch for building values.
    val_buf: Vec<u8>,
}

impl<'a> WriteCtx<'a> {
    pub fn new(db: &'a Db) -> WriteCtx<'a> {
        WriteCtx {
            db,
            db_index: 0,
            now_ms: 0,
            batch: WriteBatch::new(),
            written: HashSet::default(),
            applied: false,
            failed: None,
            key_buf: Vec::new(),
            val_buf: Vec::new(),
        }
    }

    fn begin(&mut self, now_ms: u64) {
        self.now_ms = now_ms;
        self.batch.clear();
        self.written.clear();
        self.applied = false;
        self.failed = None;
    }

    fn hash(key: &[u8]) -> u64 {
        KeyHasher::default().hash_one(key)
    }

    fn batch_bytes(&self) -> usize {
        self.batch.approximate_size()
    }

    /// Applies the batch so far (no sync: the group's final write or sync covers it). Commands that read
    /// the engine other than through [`WriteCtx::get_raw`] (iterators, read commands inside `EXEC`) call it
    /// first; long commands (FLUSHDB) call it to bound the batch.
    pub fn apply_pending(&mut self) {
        if self.batch.is_empty() || self.failed.is_some() {
            return;
        }
        if let Err(e) = self.db.write(&self.batch, &WriteOptions::default()) {
            self.failed = Some(format!("WAL write failed: {e}"));
        }
        self.applied = true;
        self.batch.clear();
        self.written.clear();
    }

    /// Writes what is left and syncs if asked. `Ok(true)` if an fsync was issued.
    fn finish(&mut self, sync: bool) -> Result<bool, String> {
        if let Some(e) = self.failed.take() {
            return Err(e);
        }
        let r = if !self.batch.is_empty() {
            self.db.write(&self.batch, &WriteOptions { sync, ..Default::default() }).map(|()| sync)
        } else if self.applied && sync {
            self.db.sync_wal().map(|()| true)
        } else {
            Ok(false)
        };
        self.batch.clear();
        self.written.clear();
        r.map_err(|e| format!("WAL write or fsync failed: {e}"))
    }

    /// Reads an engine key as of everything executed before in this group.
    pub fn get_raw(&mut self, engine_key: &[u8]) -> shaledb::Result<Option<Vec<u8>>> {
        if self.written.contains(&Self::hash(engine_key)) {
            self.apply_pending();
        }
        self.db.get(engine_key)
    }

    pub fn put_raw(&mut self, engine_key: &[u8], value: &[u8]) {
        self.written.insert(Self::hash(engine_key));
        self.batch.put(engine_key, value);
    }

    pub fn delete_raw(&mut self, engine_key: &[u8]) {
        self.written.insert(Self::hash(engine_key));
        self.batch.delete(engine_key);
    }

    /// An iterator over the engine as of everything executed before in this group (applies the batch first).
    pub fn iter(&mut self, opts: ReadOptions) -> shaledb::DbIterator {
        self.apply_pending();
        self.db.iter(opts)
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

    /// Deletes `user_key` of database `db` (whatever it holds; a missing key is no error).
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

    /// A read context on the engine as of everything executed before in this group (the batch so far is
    /// applied first): read commands inside `EXEC` run with it and see the transaction's own writes.
    pub fn read_ctx(&mut self) -> ReadCtx<'_> {
        self.apply_pending();
        ReadCtx { db: self.db, db_index: self.db_index, now_ms: self.now_ms }
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

/// What a read command sees: the engine, on the connection's task.
pub struct ReadCtx<'a> {
    pub db: &'a Db,
    pub db_index: u8,
    pub now_ms: u64,
}

impl ReadCtx<'_> {
    /// The live meta value of `user_key`, or `None` if missing or expired.
    pub fn get_meta(&self, user_key: &[u8]) -> Result<Option<(keys::Meta, Bytes)>, Reply> {
        let k = keys::meta_key(self.db_index, user_key);
        match self.db.get(&k) {
            Ok(None) => Ok(None),
            Ok(Some(v)) => match keys::decode_meta(&v) {
                Ok(m) if m.expired(self.now_ms) => Ok(None),
                Ok(m) => Ok(Some((m, Bytes::from(v)))),
                Err(e) => Err(Reply::err(e)),
            },
            Err(e) => Err(Reply::err(format!("read failed: {e}"))),
        }
    }
}
