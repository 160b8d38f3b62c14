//! The commit step that makes writes durable, and the [`Store`] that owns it with the engine.
//!
//! Reads run on the connection's task (the engine's read path takes no global lock). Every write command goes
//! to the commit step as part of a [`Job`] (a connection's run of consecutive write commands). The step takes
//! every job waiting, executes their commands in arrival order into one `WriteBatch`, writes it with one WAL
//! record and, under `appendfsync always`, one fsync, and only then answers every job: group commit across
//! all connections.
//!
//! In the server the step is a task on the runtime's one thread ([`spawn_commit_task`]), run after the
//! connections woken in the same turn, as Redis's `beforeSleep` runs after its event handlers: no write
//! crosses to another thread and back. A group that runs a script, a function or a transaction runs on the
//! blocking pool instead, so the other clients get `BUSY` and can send `SCRIPT KILL` while it runs. Tools and
//! tests that run no runtime start the store with its own thread, `shaledb-commit` ([`Store::start`]). Either
//! way one step runs at a time, in submission order.
//!
//! Executing writes in one step also makes read-modify-write commands (INCR, APPEND, SETRANGE, GETSET, SET
//! NX/XX/GET ...) atomic without any lock: they read the engine (the state after every earlier group) and,
//! when they touch a key already written in the current group, the batch so far is applied first (without a
//! sync; the group's final write or sync covers it), so they always read their predecessors' effects.
//!
//! A failed write or fsync is never acknowledged: every command of the failed group is answered with a
//! `MISCONF` error, the server turns read-only (the engine refuses every later write, D6) and says why in
//! its log and in `INFO persistence`. Reads go on.
//!
//! The commit step runs write commands (their handlers, `commands/`) on the storage contexts of `store/`
//! ([`WriteCtx`]); `store/` knows nothing of commands, replies or this module.

use crate::commands::Spec;
use crate::config::Appendfsync;
use crate::resp::{Args, Reply};
use crate::store::{now_ms, WriteCtx};
use parking_lot::Mutex;
use shaledb::Db;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// A run of write commands from one connection, answered all at once.
pub struct Job {
    pub db_index: u8,
    pub cmds: Vec<(&'static Spec, Args)>,
    pub reply: tokio::sync::oneshot::Sender<Vec<Reply>>,
    /// The first try of a blocking command (`cmds` holds just that command, a write or XREAD): if it finds
    /// nothing, the commit step parks this waiter in the same step (see `blocking.rs`).
    pub block: Option<Arc<crate::blocking::Waiter>>,
    /// The client whose commands these are (0: the server itself), for CLIENT TRACKING's NOLOOP.
    pub client: u64,
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

/// Where the store's engine database is: its own, or a replica group's state machine (issue 43).
enum Engine {
    /// The server's own database (swappable, though nothing swaps it yet).
    Own(arc_swap::ArcSwap<Db>),
    /// The state machine's live database of the raft node, which a snapshot install replaces: taken from the
    /// node for every command and group.
    Group(Arc<crate::cluster::Cluster>),
}

/// The engine and the commit step.
pub struct Store {
    engine: Engine,
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
    /// Clients blocked on keys (BLPOP, XREAD BLOCK ...), woken by the commit step (`blocking.rs`).
    pub blocking: Arc<crate::blocking::Registry>,
    /// Lua scripts and functions (`commands/scripting`).
    pub scripts: Arc<crate::commands::scripting::Scripts>,
    /// `stream-node-max-entries` (CONFIG SET stores it; each group reads it once, see
    /// [`WriteCtx::stream_node_max_entries`]).
    pub stream_node_max_entries: AtomicU64,
    /// `hll-sparse-max-bytes` (CONFIG SET stores it; each group reads it once, see
    /// [`WriteCtx::hll_sparse_max_bytes`]).
    pub hll_sparse_max_bytes: AtomicU64,
    /// `notify-keyspace-events` as classes (`notify.rs`; CONFIG SET stores it, each group reads it once).
    pub notify_flags: AtomicU32,
    /// Pub/Sub channels and patterns: keyspace events are published there.
    pub pubsub: Arc<crate::commands::pubsub::Registry>,
    /// Keyspace events of durable groups not yet published (published after their writers are answered).
    events: Mutex<Vec<crate::notify::Event>>,
    /// CLIENT TRACKING's table of tracked keys and prefixes, and its clients (`tracking.rs`).
    pub tracking: crate::tracking::Tracking,
    /// WATCHes answered while a script is busy, for the commit step to register (`store/watches.rs`).
    pub watch_inbox: Arc<crate::store::WatchInbox>,
    /// CLIENT PAUSE (WRITE or ALL) holds expiry until this wall-clock time, in ms (0: no pause): the sweeper
    /// deletes no expired key meanwhile, as Redis stops its active and passive expiry.
    pub expiry_paused_until: Arc<AtomicU64>,
    /// The jobs' receiver until the runtime's commit task takes it (a store started by
    /// [`Store::start_on_runtime`]).
    runtime_rx: Mutex<Option<crossbeam_channel::Receiver<Job>>>,
    /// Wakes the runtime's commit task when a job was submitted.
    commit_notify: tokio::sync::Notify,
    /// The runtime's commit task, awaited by [`Store::stop_commit_task`].
    commit_task: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

/// Most bytes of payload one group gathers before it is written.
const MAX_GROUP_BYTES: usize = 16 << 20;

impl Store {
    /// Starts the store with its own commit thread, `shaledb-commit` (tools and tests that run no runtime).
    pub fn start(db: Db, appendfsync: Appendfsync) -> Arc<Store> {
        Self::start_with(Engine::Own(arc_swap::ArcSwap::from_pointee(db)), appendfsync, false)
    }

    /// Starts the store for the server: writes are committed by a task on the calling tokio runtime's
    /// thread (see [`spawn_commit_task`]), which must be spawned before the first job is submitted.
    pub fn start_on_runtime(db: Db, appendfsync: Appendfsync) -> Arc<Store> {
        Self::start_with(Engine::Own(arc_swap::ArcSwap::from_pointee(db)), appendfsync, true)
    }

    /// Starts the store of a replica group member (issue 43): reads and writes go to the raft node's state
    /// machine; the commit step proposes its groups instead of writing the engine. Commit task as
    /// [`Store::start_on_runtime`].
    pub fn start_in_group(cluster: Arc<crate::cluster::Cluster>, appendfsync: Appendfsync) -> Arc<Store> {
        Self::start_with(Engine::Group(cluster), appendfsync, true)
    }

    /// The engine database: every read and write path takes it here, once per command or group (a replica
    /// group's snapshot install switches it).
    pub fn db(&self) -> Arc<Db> {
        match &self.engine {
            Engine::Own(db) => db.load_full(),
            Engine::Group(c) => c.db(),
        }
    }

    /// How the database orders its keys (keys.rs): by slot first on a cluster member (`--cluster-enabled
    /// yes`), by key on a standalone server. The layout marker records it and the server checks the two
    /// agree when it opens the database (`layout.rs`).
    pub fn keyspace(&self) -> crate::keys::Keyspace {
        match &self.engine {
            Engine::Own(_) => crate::keys::Keyspace::Ordered,
            Engine::Group(_) => crate::keys::Keyspace::Slots,
        }
    }

    /// The replica group this server is a member of (`--cluster-enabled yes`).
    pub fn cluster(&self) -> Option<&Arc<crate::cluster::Cluster>> {
        match &self.engine {
            Engine::Own(_) => None,
            Engine::Group(c) => Some(c),
        }
    }

    /// False on a replica group member that does not lead: background writers (expiry, the collector) leave
    /// the work to the leader, whose deletions reach every member through the log.
    pub fn may_write(&self) -> bool {
        self.cluster().is_none_or(|c| c.is_leader())
    }

    fn start_with(engine: Engine, appendfsync: Appendfsync, on_runtime: bool) -> Arc<Store> {
        let (tx, rx) = crossbeam_channel::unbounded::<Job>();
        let store = Arc::new(Store {
            engine,
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
            scripts: Arc::default(),
            stream_node_max_entries: AtomicU64::new(crate::types::stream::NODE_MAX_ENTRIES),
            hll_sparse_max_bytes: AtomicU64::new(crate::types::hll::DEFAULT_SPARSE_MAX_BYTES),
            notify_flags: AtomicU32::new(0),
            pubsub: Arc::default(),
            events: Mutex::new(Vec::new()),
            tracking: Default::default(),
            watch_inbox: Arc::default(),
            expiry_paused_until: Arc::default(),
            runtime_rx: Mutex::new(None),
            commit_notify: tokio::sync::Notify::new(),
            commit_task: Mutex::new(None),
        });
        let mut threads = Vec::new();
        if on_runtime {
            *store.runtime_rx.lock() = Some(rx);
        } else {
            let s = store.clone();
            threads.push(
                std::thread::Builder::new()
                    .name("shaledb-commit".into())
                    .spawn(move || commit_loop(&s, rx))
                    .expect("spawn the commit thread"),
            );
        }
        let s = store.clone();
        let syncer = std::thread::Builder::new()
            .name("shaledb-everysec".into())
            .spawn(move || everysec_loop(&s))
            .expect("spawn the everysec thread");
        let sweeper = crate::expire::spawn(store.clone());
        let collector = crate::gc::spawn(store.clone());
        threads.extend([syncer, sweeper, collector]);
        store.threads.lock().extend(threads);
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

    /// True while CLIENT PAUSE (WRITE or ALL) holds expiry (see [`Store::expiry_paused_until`]).
    pub fn expiry_paused(&self) -> bool {
        now_ms() < self.expiry_paused_until.load(Ordering::Acquire)
    }

    /// Holds expiry until `until_ms` (wall clock), or past an earlier hold's end if that is later; 0 ends
    /// any hold at once (CLIENT UNPAUSE).
    pub fn pause_expiry(&self, until_ms: u64) {
        if until_ms == 0 {
            self.expiry_paused_until.store(0, Ordering::Release);
        } else {
            self.expiry_paused_until.fetch_max(until_ms, Ordering::AcqRel);
        }
    }

    /// Keeps the keyspace events of a durable group (in order) until [`Store::publish_events`]: called by
    /// the commit step once the group's writes are durable, never for a failed group.
    pub(crate) fn stage_events(&self, ctx: &mut WriteCtx<'_>) {
        if !ctx.events.is_empty() {
            self.events.lock().append(&mut ctx.take_events());
        }
    }

    /// Publishes the staged keyspace events (after the writers of their groups were answered, so no
    /// subscriber sees an event before the write's own client sees its reply).
    pub(crate) fn publish_events(&self) {
        self.publish_events_then(&[]);
    }

    /// Publishes the staged keyspace events, then `more` (a read's `keymiss` events, on its connection).
    /// The lock is held while publishing, so the events of every write whose reply a client has seen
    /// (staged before its writers are answered) reach subscribers before the misses of that client's later
    /// reads, as in Redis's single thread.
    pub(crate) fn publish_events_then(&self, more: &[crate::notify::Event]) {
        let mut staged = self.events.lock();
        for e in staged.drain(..).chain(more.iter().cloned()) {
            for (channel, message) in e.messages() {
                self.pubsub.publish(&channel, &message);
            }
        }
    }

    /// Submits a job to the commit step. `false` when the store is shut down (the job is dropped, its
    /// reply channel closes).
    pub fn submit(&self, job: Job) -> bool {
        match self.tx.lock().as_ref() {
            Some(tx) => {
                let ok = tx.send(job).is_ok();
                self.commit_notify.notify_one();
                ok
            }
            None => false,
        }
    }

    /// Runs one write job synchronously on the caller's thread (for background tasks such as the expiry
    /// sweep; they go through the commit step like clients do). Returns `None` after shutdown.
    pub fn submit_and_wait(&self, db_index: u8, cmds: Vec<(&'static Spec, Args)>) -> Option<Vec<Reply>> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        if !self.submit(Job { db_index, cmds, reply: tx, block: None, client: 0 }) {
            return None;
        }
        rx.blocking_recv().ok()
    }

    /// Closes the job channel and waits until the runtime's commit task answered every job already
    /// submitted (a no-op for a store with a commit thread). Call before [`Store::shutdown`] on the runtime.
    pub async fn stop_commit_task(&self) {
        self.tx.lock().take();
        self.stop.store(true, Ordering::Release);
        self.commit_notify.notify_one();
        let task = self.commit_task.lock().take();
        if let Some(task) = task {
            let _ = task.await;
        }
    }

    /// Stops the commit and everysec threads after every job already submitted was answered, then syncs
    /// the WAL. The engine itself closes when the last reference to `db` is dropped.
    pub fn shutdown(&self) {
        self.tx.lock().take();
        self.commit_notify.notify_one();
        self.stop.store(true, Ordering::Release);
        let threads = std::mem::take(&mut *self.threads.lock());
        for t in threads {
            let _ = t.join();
        }
        let _ = self.db().sync_wal();
    }
}

/// Spawns the commit task of a store started by [`Store::start_on_runtime`] on the current runtime (a no-op
/// for a store with a commit thread).
///
/// The task is the runtime's last step of each turn, as Redis's `beforeSleep`: the connections woken in a turn
/// parse their requests and submit their jobs, each submission wakes this task, and the current-thread
/// scheduler runs it after the connections already woken (first in, first out). It then commits every job
/// waiting as one group, on the runtime's own thread, and the replies wake the connections for the next turn.
/// No thread hand-off: a write costs no wake-up of another thread. A group that runs a script or a function
/// (which may run for seconds, and whose clients must get `BUSY` and be able to send `SCRIPT KILL` meanwhile)
/// is committed on the blocking pool instead, while the task waits; later jobs wait in the channel.
pub fn spawn_commit_task(store: &Arc<Store>) {
    let Some(rx) = store.runtime_rx.lock().take() else { return };
    let task = tokio::spawn(commit_task(store.clone(), rx));
    *store.commit_task.lock() = Some(task);
}

async fn commit_task(store: Arc<Store>, rx: crossbeam_channel::Receiver<Job>) {
    let mut committer = Some(Committer::new(&store));
    loop {
        store.commit_notify.notified().await;
        loop {
            let first = match rx.try_recv() {
                Ok(job) => job,
                Err(crossbeam_channel::TryRecvError::Empty) => break,
                Err(crossbeam_channel::TryRecvError::Disconnected) => return,
            };
            let mut c = committer.take().unwrap_or_else(|| Committer::new(&store));
            c.gather(&store, first, &rx);
            // A replica group's groups wait for their proposal's commit: never on the runtime's thread.
            if !c.may_run_long() && store.cluster().is_none() {
                c.commit(&store);
                committer = Some(c);
                continue;
            }
            let s = store.clone();
            match tokio::task::spawn_blocking(move || {
                c.commit(&s);
                c
            })
            .await
            {
                Ok(c) => committer = Some(c),
                // `commit` catches a command's panic; one that escaped it lost the group's state.
                Err(e) => store.set_read_only(format!("internal error: the commit step failed: {e}")),
            }
        }
    }
}

fn commit_loop(store: &Store, rx: crossbeam_channel::Receiver<Job>) {
    let mut c = Committer::new(store);
    while let Ok(first) = rx.recv() {
        c.gather(store, first, &rx);
        c.commit(store);
    }
}

/// The commit step's state: the write context (kept from group to group: the version counter, the dead
/// ranges, the watched keys) and the group being gathered.
struct Committer {
    group: Vec<Job>,
    ctx: WriteCtx<'static>,
    /// A cluster member: the map its blocked clients were last checked against.
    checked_map: Option<Arc<crate::cluster::map::Stored>>,
}

/// Commands that may run for as long as their script does (`busy-reply-threshold` and SCRIPT KILL apply).
const LONG_RUNNING: &[&str] = &["eval", "evalsha", "eval_ro", "evalsha_ro", "fcall", "fcall_ro", "function", "exec"];

impl Committer {
    fn new(store: &Store) -> Committer {
        let mut ctx = WriteCtx::shared(store.db());
        ctx.keyspace = store.keyspace();
        ctx.wake = Some(store.blocking.clone());
        ctx.scripts = Some(store.scripts.clone());
        ctx.watch_inbox = Some(store.watch_inbox.clone());
        ctx.expiry_paused_until = Some(store.expiry_paused_until.clone());
        if let Some(c) = store.cluster() {
            // A replica group member: every write of this context reaches the engine through a proposal, the
            // group's final one and any cut before it (see `WriteCtx::propose`); only the state machine writes
            // the engine.
            let c = c.clone();
            let propose: crate::store::ProposeFn =
                Box::new(move |batch: &shaledb::WriteBatch, tables| c.propose_blocking(batch, tables));
            ctx.propose = Some(propose);
            let c = store.cluster().expect("checked").clone();
            ctx.serves_slot =
                Some(Arc::new(move |slot| c.map().is_none_or(|st| st.owns(slot) && st.map.moving(slot).is_none())));
            ctx.copy_tracker = Some(store.cluster().expect("checked").copies.clone());
        }
        if let Err(e) = ctx.load_versions() {
            store.set_read_only(format!("reading the collection registry failed: {e}"));
        }
        Committer { group: Vec::new(), ctx, checked_map: None }
    }

    /// Takes `first` and every job waiting behind it (up to [`Store::max_group_commands`] commands) as the
    /// next group.
    fn gather(&mut self, store: &Store, first: Job, rx: &crossbeam_channel::Receiver<Job>) {
        let mut n = first.cmds.len();
        self.group.push(first);
        while n < store.max_group_commands {
            match rx.try_recv() {
                Ok(job) => {
                    n += job.cmds.len();
                    self.group.push(job);
                }
                Err(_) => break,
            }
        }
    }

    /// The group runs a script, a function or a transaction (which may hold scripts).
    fn may_run_long(&self) -> bool {
        self.group.iter().flat_map(|j| &j.cmds).any(|(spec, _)| LONG_RUNNING.contains(&spec.name))
    }

    /// Commits the gathered group and answers its jobs.
    fn commit(&mut self, store: &Store) {
        let Committer { group, ctx, checked_map } = self;
        ctx.stream_node_max_entries = store.stream_node_max_entries.load(Ordering::Relaxed);
        ctx.hll_sparse_max_bytes = store.hll_sparse_max_bytes.load(Ordering::Relaxed);
        ctx.notify_flags = crate::notify::effective(store.notify_flags.load(Ordering::Relaxed));
        // The group's replies wait until the clients blocked on keys it pushed to are served: as in Redis,
        // whoever sees a push's reply (and any command after it) sees the blocked clients served.
        let mut answers: Vec<(tokio::sync::oneshot::Sender<Vec<Reply>>, Vec<Reply>)> = Vec::new();
        // A command that panics must not take the commit step (and every later write) with it: its group
        // is answered with an error and, since the batch state is unknown, writes are refused from then on.
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            commit_group(store, ctx, group, &mut answers);
            // Clients blocked on keys this group pushed to, now that the pushes are durable.
            crate::blocking::serve(store, ctx);
            crate::tracking::deliver(store, ctx);
        }));
        // The group is durable whatever serving did.
        for (tx, r) in answers {
            let _ = tx.send(r);
        }
        // A cluster member whose map changed (this group may have recorded one): clients blocked on a key of a
        // slot now frozen or owned elsewhere are sent on (-TRYAGAIN, -MOVED) instead of waiting for pushes
        // that can no longer come here.
        if let Some(c) = store.cluster() {
            c.reload_map();
            let now = c.map();
            let same = match (&now, &*checked_map) {
                (Some(a), Some(b)) => Arc::ptr_eq(a, b),
                (None, None) => true,
                _ => false,
            };
            if !same {
                if let Some(st) = &now {
                    store.blocking.refuse_where(|_, key| c.slot_refusal(st, crate::cluster::key_slot(key), true));
                }
                // Records of slots no longer copied or moved out of this group are done with.
                c.copies.retain(|s| now.as_ref().is_some_and(|st| st.map.transfer(s).is_some_and(|t| t.0 == st.me)));
                *checked_map = now;
            }
        }
        store.publish_events();
        if r.is_err() {
            store.set_read_only("internal error: a write command panicked (see stderr)".into());
            for job in group.drain(..) {
                let replies = job.cmds.iter().map(|_| store.misconf()).collect();
                let _ = job.reply.send(replies);
            }
        }
    }
}

/// Commits a group; the replies of a durable group are left in `answers` for the caller to send.
fn commit_group(
    store: &Store,
    ctx: &mut WriteCtx<'_>,
    group: &mut Vec<Job>,
    answers: &mut Vec<(tokio::sync::oneshot::Sender<Vec<Reply>>, Vec<Reply>)>,
) {
    if store.read_only_reason().is_some() {
        for job in group.drain(..) {
            let replies = job.cmds.iter().map(|_| store.misconf()).collect();
            let _ = job.reply.send(replies);
        }
        return;
    }
    let mode = store.appendfsync();
    if let Some(c) = store.cluster() {
        // A replica group member (issue 43). Only the leader executes writes; a member that lost the lead
        // since its clients were let through sends them to the new leader.
        if !c.is_leader() {
            for job in group.drain(..) {
                let replies = job.cmds.iter().map(|(spec, args)| c.redirect(spec, args, None)).collect();
                let _ = job.reply.send(replies);
            }
            return;
        }
        // The state machine's live database now (a snapshot install may have replaced it), and what this
        // context caches of it learnt again: other leaders may have written since this member's last group
        // (the next collection version; the dead ranges, which are forgotten). 16 seeks per group, small
        // next to the proposal's round trip.
        ctx.db = crate::store::DbRef::Shared(store.db());
        ctx.forget_dead_ranges();
        // Records of slots being copied out hold only this leadership's writes (cluster/copy.rs).
        c.copies.begin_group(c.leading_term().unwrap_or(0));
        // The cluster map as applied now (issue 44): a map recorded since a command passed the gate (a slot
        // frozen for a move, or moved away) decides, so no write lands on a slot after its freeze.
        c.reload_map();
        if let Err(e) = ctx.load_versions() {
            for job in group.drain(..) {
                let why = format!("reading the collection registry failed: {e}");
                let replies = job.cmds.iter().map(|_| Reply::err(&why)).collect();
                let _ = job.reply.send(replies);
            }
            return;
        }
    }
    ctx.begin(now_ms());
    if store.cluster().is_some() && matches!(ctx.get_raw(crate::layout::MARKER_KEY), Ok(None)) {
        // A new group's first write says what its keyspace is, through the log like every write, so every
        // member (and every snapshot) carries the marker (layout.rs, `check_member`).
        ctx.put_raw(crate::layout::MARKER_KEY, &crate::layout::marker_value_of(crate::keys::Keyspace::Slots));
    }
    ctx.tracking = store.tracking.active();
    ctx.touched.clear();
    let mut replies: Vec<Vec<Reply>> = Vec::with_capacity(group.len());
    let mut count = 0u64;
    let cluster = store.cluster().cloned();
    for job in group.iter() {
        ctx.db_index = job.db_index;
        ctx.client = job.client;
        let mut r = Vec::with_capacity(job.cmds.len());
        for (spec, args) in &job.cmds {
            count += 1;
            // A map this group held when the group began (the commit step's own map changes take effect
            // from the next group).
            if let Some(c) = &cluster {
                if let Some(refusal) = c.map().and_then(|st| c.commit_check(&st, spec, args)) {
                    r.push(refusal);
                    continue;
                }
            }
            ctx.take_watch_inbox();
            let before = ctx.write_counts();
            let reply = match spec.handler {
                crate::commands::Handler::Write(f) => f(ctx, args),
                // A blocking read's first try (XREAD BLOCK) runs here too, to be parked in the same step.
                crate::commands::Handler::Read(f) if job.block.is_some() => ctx.run_read(|v| f(v, args)),
                _ => Reply::err("internal: not a write command"),
            };
            crate::commands::multi::after_write(ctx, spec, args, before);
            crate::tracking::after_command(store, ctx, spec, args);
            if ctx.failed() {
                r.push(reply);
                break;
            }
            if let Some(w) = &job.block {
                store.blocking.park_if_empty(w, &reply);
            }
            r.push(reply);
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
            store.blocking.mark_gone(&mut ctx.gone);
            store.stage_events(ctx);
            // Invalidations reach their inboxes before the writers hear of their writes.
            crate::tracking::deliver(store, ctx);
            ctx.client = 0;
            for (job, r) in group.drain(..).zip(replies) {
                answers.push((job.reply, r));
            }
            // The versions the group removed are durable garbage now: reclaim them promptly.
            if !ctx.dropped.is_empty() {
                store.gc.enqueue(ctx.dropped.drain(..));
            }
        }
        Err(e) if store.cluster().is_some() => {
            // A proposal that failed (no leader any more, no quorum, a timeout): never an OK. The group's
            // writes may still commit (a timed-out proposal's outcome is unknown); an error says nothing
            // either way, as with any unanswered write.
            ctx.forget_dead_ranges();
            let c = store.cluster().expect("checked").clone();
            for job in group.drain(..) {
                let replies = job.cmds.iter().map(|(spec, args)| c.failure_reply(&e, spec, args)).collect();
                let _ = job.reply.send(replies);
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
        match store.db().sync_wal() {
            Ok(()) => {
                store.stats.fsyncs.fetch_add(1, Ordering::Relaxed);
                store.stats.last_fsync_unix.store(now_ms() / 1000, Ordering::Relaxed);
            }
            Err(e) => store.set_read_only(format!("WAL fsync failed: {e}")),
        }
    }
}
