//! Clients blocked on keys: BLPOP, BRPOP, BLMOVE, BRPOPLPUSH, BLMPOP, BZPOPMIN, BZPOPMAX, BZMPOP, XREAD BLOCK
//! and XREADGROUP BLOCK.
//!
//! A blocking command is an ordinary command that never waits by itself (inside MULTI it answers at once,
//! as in Redis). Outside MULTI the connection sends its first try to the commit step together with a
//! [`Waiter`] (the command, its database, a reply channel) that is in no queue yet:
//!
//! 1. The commit step runs the first try like any write (a blocking read, XREAD BLOCK, runs there too);
//!    when it finds nothing (a nil reply), `Registry::park_if_empty` appends the waiter to the FIFO queue
//!    of every key it waits on *in the same step*, before the next command of the group runs. So the
//!    queues hold waiters in the order their commands reached the commit step, which is the server's one
//!    order of commands (Redis's: clients blocked on a key are served in the order their commands arrived),
//!    and no write can slip between a first try and its parking (a push after it wakes it; a DEL after a
//!    blocked XREADGROUP ends it).
//!    NB: parking after the first try's reply came back to the connection (as this module once did) let
//!    two clients that sent BLPOP back to back park in either order, and let a push or a DEL run between
//!    a first try and its parking.
//! 2. Every write that makes a key poppable (a push, LMOVE's destination, XADD) calls
//!    [`WriteCtx::signal_key`]; when the group is durable (after its fsync under `appendfsync always`),
//!    the commit step marks those keys ready (`Registry::mark_ready`).
//! 3. After each group the commit step runs `serve`: for every ready key, it re-executes the commands of
//!    the key's waiters in FIFO order (Redis's order: the client blocked first is served first) as one new
//!    group, removing each served waiter from every queue; when a list command finds the key empty again the
//!    key's remaining waiters stay. The replies are sent only once that group is durable: a popped element is
//!    never acknowledged before its removal is on disk, and never lost.
//! 4. The connection waits for its reply, its timeout, its socket closing, CLIENT KILL or shutdown. Unless
//!    the reply came, it removes its waiter (`Registry::cancel`); if the commit step had already taken the
//!    waiter, the reply is on its way and the connection waits for it instead, so an element is delivered
//!    exactly once. A client that disconnects while blocked leaves no waiter behind, and a waiter whose
//!    connection went away without cancelling (its reply channel closed) is dropped, never served.
//!
//! `$` in XREAD BLOCK is resolved to the stream's last id before the first try, as Redis does.

use crate::commands::{flags, Handler, Spec};
use crate::commit::{Job, Store};
use crate::config::Appendfsync;
use crate::keys::Type;
use crate::resp::{Args, Reply};
use crate::server::{Session, Shared};
use crate::store::{now_ms, ReadCtx, Waiters, WriteCtx};
use bytes::{Bytes, BytesMut};
use parking_lot::Mutex;
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;
use tokio::sync::oneshot;

/// A blocked client's command.
pub struct Waiter {
    id: u64,
    db: u8,
    spec: &'static Spec,
    args: Args,
    keys: Vec<Bytes>,
    tx: Mutex<Option<oneshot::Sender<Reply>>>,
}

#[derive(Default)]
struct Inner {
    /// FIFO queues of waiters per `(db, key)`, in the order their commands' first tries ran on the commit
    /// thread.
    by_key: HashMap<(u8, Bytes), VecDeque<Arc<Waiter>>>,
    /// Keys whose waiters the commit step should try to serve.
    ready: Vec<(u8, Bytes)>,
    /// Keys written (deleted, overwritten) while XREADGROUP clients wait on them: only those waiters run
    /// again (a blocked XREADGROUP ends when its stream or group is gone; the others keep waiting, as in
    /// Redis).
    gone: Vec<(u8, Bytes)>,
}

/// The wake-up registry (one per server, in [`Store`]).
#[derive(Default)]
pub struct Registry {
    inner: Mutex<Inner>,
    /// Blocked clients (so writes skip signalling when there are none).
    waiters: AtomicUsize,
    /// Blocked XREADGROUP clients (so writes of meta keys skip signalling when there are none).
    group_readers: AtomicUsize,
    /// Clients blocked on something other than keys (WAIT), for `blocked_clients`.
    other_blocked: AtomicUsize,
    next_id: AtomicU64,
}

/// A client counted as blocked by [`Registry::count_blocked`], until dropped.
pub struct BlockedGuard<'a>(&'a Registry);

impl Drop for BlockedGuard<'_> {
    fn drop(&mut self) {
        self.0.other_blocked.fetch_sub(1, Ordering::AcqRel);
    }
}

/// What the commit step's [`WriteCtx`] asks of the registry (storage knows no blocked clients).
impl Waiters for Registry {
    fn has_waiters(&self) -> bool {
        Registry::has_waiters(self)
    }

    fn has_group_readers(&self) -> bool {
        self.group_readers.load(Ordering::Acquire) > 0
    }
}

impl Registry {
    /// True when some client is blocked.
    pub fn has_waiters(&self) -> bool {
        self.waiters.load(Ordering::Acquire) > 0
    }

    /// Blocked clients: those parked on keys and those in WAIT (Redis's `blocked_clients`).
    pub fn blocked_clients(&self) -> usize {
        self.waiters.load(Ordering::Acquire) + self.other_blocked.load(Ordering::Acquire)
    }

    /// Keys with at least one blocked client (for tests and INFO).
    pub fn watched_keys(&self) -> usize {
        self.inner.lock().by_key.len()
    }

    /// A blocking command's waiter, in no queue yet: it goes to the commit step with the command's first
    /// try ([`Job::block`]), which parks it if that try finds nothing ([`Registry::park_if_empty`]).
    fn waiter(
        &self,
        db: u8,
        spec: &'static Spec,
        args: Args,
        keys: Vec<Bytes>,
    ) -> (Arc<Waiter>, oneshot::Receiver<Reply>) {
        let (tx, rx) = oneshot::channel();
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let mut unique: Vec<Bytes> = Vec::with_capacity(keys.len());
        for k in keys {
            if !unique.contains(&k) {
                unique.push(k);
            }
        }
        (Arc::new(Waiter { id, db, spec, args, keys: unique, tx: Mutex::new(Some(tx)) }), rx)
    }

    /// The commit step, right after the first try of `w`'s command answered `first`: a try that found
    /// nothing parks `w` at the tail of the queue of each of its keys, before the group's next command
    /// runs (see the module's doc: this is what orders the waiters of a key as their commands arrived).
    pub(crate) fn park_if_empty(&self, w: &Arc<Waiter>, first: &Reply) {
        if !found_nothing(first) {
            return;
        }
        let mut inner = self.inner.lock();
        for k in &w.keys {
            inner.by_key.entry((w.db, k.clone())).or_default().push_back(w.clone());
        }
        self.waiters.fetch_add(1, Ordering::AcqRel);
        if w.spec.name == "xreadgroup" {
            self.group_readers.fetch_add(1, Ordering::AcqRel);
        }
    }

    /// Counts a client blocked on something other than keys (WAIT) in `blocked_clients` until the guard
    /// is dropped.
    pub fn count_blocked(&self) -> BlockedGuard<'_> {
        self.other_blocked.fetch_add(1, Ordering::AcqRel);
        BlockedGuard(self)
    }

    /// Removes `w` from every queue it is in (the caller holds the lock). True if it was still there.
    fn unlink(&self, inner: &mut Inner, w: &Waiter) -> bool {
        let mut found = false;
        for k in &w.keys {
            let slot = (w.db, k.clone());
            if let Some(q) = inner.by_key.get_mut(&slot) {
                if let Some(pos) = q.iter().position(|x| x.id == w.id) {
                    q.remove(pos);
                    found = true;
                }
                if q.is_empty() {
                    inner.by_key.remove(&slot);
                }
            }
        }
        if found {
            self.waiters.fetch_sub(1, Ordering::AcqRel);
            if w.spec.name == "xreadgroup" {
                self.group_readers.fetch_sub(1, Ordering::AcqRel);
            }
        }
        found
    }

    /// Ends the wait of every client blocked on a key for which `refusal` gives a reply, with that reply (a
    /// cluster member whose map moved the key's slot away or froze it: the client is sent on, as Redis
    /// Cluster unblocks clients of a slot that moved with `-MOVED`). Returns how many were ended.
    pub fn refuse_where(&self, refusal: impl Fn(u8, &[u8]) -> Option<Reply>) -> usize {
        let mut inner = self.inner.lock();
        let mut ended: Vec<(Arc<Waiter>, Reply)> = Vec::new();
        for ((db, key), q) in &inner.by_key {
            let Some(r) = refusal(*db, key) else { continue };
            for w in q {
                if !ended.iter().any(|(x, _)| x.id == w.id) {
                    ended.push((w.clone(), r.clone()));
                }
            }
        }
        for (w, _) in &ended {
            self.unlink(&mut inner, w);
        }
        drop(inner);
        let n = ended.len();
        for (w, r) in ended {
            if let Some(tx) = w.tx.lock().take() {
                let _ = tx.send(r);
            }
        }
        n
    }

    /// The client stops waiting (timeout, disconnect). `false` when the commit step already took the
    /// waiter: its reply is coming.
    fn cancel(&self, w: &Waiter) -> bool {
        let mut inner = self.inner.lock();
        self.unlink(&mut inner, w)
    }

    /// Marks keys ready (the commit step, after a durable group); drains `keys`.
    pub(crate) fn mark_ready(&self, keys: &mut Vec<(u8, Bytes)>) {
        if keys.is_empty() {
            return;
        }
        let mut inner = self.inner.lock();
        for k in keys.drain(..) {
            if inner.by_key.contains_key(&k) && !inner.ready.contains(&k) {
                inner.ready.push(k);
            }
        }
    }

    /// Marks keys written while XREADGROUP clients wait on them (the commit step, after a durable
    /// group); drains `keys`.
    pub(crate) fn mark_gone(&self, keys: &mut Vec<(u8, Bytes)>) {
        if keys.is_empty() {
            return;
        }
        let mut inner = self.inner.lock();
        for k in keys.drain(..) {
            if inner.by_key.contains_key(&k) && !inner.gone.contains(&k) {
                inner.gone.push(k);
            }
        }
    }

    /// The ready keys (every waiter runs again) and the written ones (only XREADGROUP waiters do).
    fn take_ready(&self) -> Vec<((u8, Bytes), bool)> {
        let mut inner = self.inner.lock();
        let ready = std::mem::take(&mut inner.ready);
        let gone = std::mem::take(&mut inner.gone);
        let only_groups: Vec<_> = gone.into_iter().filter(|k| !ready.contains(k)).map(|k| (k, true)).collect();
        ready.into_iter().map(|k| (k, false)).chain(only_groups).collect()
    }
}

/// True for the reply of a blocking command that found nothing (it would block).
fn found_nothing(r: &Reply) -> bool {
    matches!(r, Reply::Nil | Reply::NilArray)
}

/// Runs one command in the commit step's context, as EXEC does.
fn run_in_commit(ctx: &mut WriteCtx<'_>, spec: &'static Spec, args: &Args) -> Reply {
    match spec.handler {
        Handler::Write(f) => f(ctx, args),
        Handler::Read(f) => f(&ctx.view(), args),
        Handler::Conn(_) => Reply::err("internal: a connection command cannot block"),
    }
}

/// Serves the waiters of the ready keys (in the commit step, after a group), each round as one durable
/// group, until no key is ready.
pub(crate) fn serve(store: &Store, ctx: &mut WriteCtx<'_>) {
    let reg = store.blocking.clone();
    if !reg.has_waiters() {
        return;
    }
    loop {
        let ready = reg.take_ready();
        if ready.is_empty() || store.read_only_reason().is_some() {
            return;
        }
        ctx.begin(now_ms());
        let mut served: Vec<(Arc<Waiter>, Reply)> = Vec::new();
        {
            let mut inner = reg.inner.lock();
            for (key, only_groups) in ready {
                let Some(queue) = inner.by_key.get(&key) else { continue };
                let waiters: Vec<Arc<Waiter>> = queue.iter().cloned().collect();
                for w in waiters {
                    if only_groups && w.spec.name != "xreadgroup" {
                        continue;
                    }
                    if w.tx.lock().as_ref().is_none_or(|tx| tx.is_closed()) {
                        // Its connection is gone (it could not cancel): serving it would lose an element.
                        reg.unlink(&mut inner, &w);
                        continue;
                    }
                    ctx.db_index = w.db;
                    if holds_other_type(ctx, w.spec, &key.1) {
                        // As Redis: a key of another type serves nobody; its waiters stay blocked.
                        continue;
                    }
                    let r = run_in_commit(ctx, w.spec, &w.args);
                    if ctx.failed() {
                        break;
                    }
                    if found_nothing(&r) {
                        // A list is empty again: later waiters would find nothing either. A stream read
                        // depends on the waiter's ids (and group): try them all.
                        if matches!(w.spec.handler, Handler::Write(_)) && w.spec.name != "xreadgroup" {
                            break;
                        }
                        continue;
                    }
                    reg.unlink(&mut inner, &w);
                    served.push((w, r));
                }
            }
        }
        let result = ctx.finish(store.appendfsync() == Appendfsync::Always);
        match result {
            Ok(synced) => {
                if synced {
                    store.stats.fsyncs.fetch_add(1, Ordering::Relaxed);
                    store.stats.last_fsync_unix.store(now_ms() / 1000, Ordering::Relaxed);
                }
                store.stats.groups.fetch_add(1, Ordering::Relaxed);
                store.stats.commands.fetch_add(served.len() as u64, Ordering::Relaxed);
                reg.mark_ready(&mut ctx.signals);
                reg.mark_gone(&mut ctx.gone);
                store.stage_events(ctx);
                for (w, r) in served {
                    if let Some(tx) = w.tx.lock().take() {
                        let _ = tx.send(r);
                    }
                }
            }
            Err(e) if store.cluster().is_some() => {
                // A replica group's proposal failed (lead or quorum lost): the served waiters get the error,
                // never an element; the store stays writable for the next leader term.
                let c = store.cluster().expect("checked").clone();
                for (w, _) in served {
                    if let Some(tx) = w.tx.lock().take() {
                        let _ = tx.send(c.failure_reply(&e, w.spec, &w.args));
                    }
                }
                return;
            }
            Err(e) => {
                store.set_read_only(e);
                for (w, _) in served {
                    if let Some(tx) = w.tx.lock().take() {
                        let _ = tx.send(store.misconf());
                    }
                }
                return;
            }
        }
    }
}

/// True when `key` holds a type other than the one the waiter's command pops or reads (Redis serves a
/// blocked list or sorted-set pop, or an XREAD, only from a key of the type it waits for: `LPUSH k; DEL k; SET k x` in one MULTI
/// wakes nobody).
fn holds_other_type(ctx: &mut WriteCtx<'_>, spec: &Spec, key: &[u8]) -> bool {
    let want = match spec.name {
        // XREADGROUP answers for itself ("the key no longer exists"); XREAD waits on while its key holds
        // another type (`DEL s; LPUSH s x` wakes nobody, as in Redis).
        "xreadgroup" => return false,
        "xread" => Type::Stream,
        "bzpopmin" | "bzpopmax" | "bzmpop" => Type::ZSet,
        _ => Type::List,
    };
    matches!(ctx.get_meta(key), Ok(Some((m, _))) if m.typ != want)
}

/// What a blocking command waits on: its keys and its timeout (`None`: forever); `None` when this call
/// does not block (XREAD without BLOCK).
fn wait_spec(spec: &Spec, args: &Args) -> Option<(Vec<Bytes>, Option<Duration>)> {
    match spec.name {
        "xread" | "xreadgroup" => crate::commands::streams::blocking_keys(args),
        "bzpopmin" | "bzpopmax" | "bzmpop" => crate::commands::zsets::blocking_keys(args),
        name => crate::commands::lists::blocking_keys(name, args),
    }
}

/// Runs a command once in the commit step (writes) or here (reads), without parking it.
async fn try_once(s: &Session, shared: &Arc<Shared>, spec: &'static Spec, args: &Args) -> Reply {
    match spec.handler {
        Handler::Write(_) => first_try(s, shared, spec, args, None).await,
        // Through `run_read`, so a missing key publishes its keymiss event as any read does.
        Handler::Read(f) => crate::notify::run_read(&shared.store, s.db_index, |ctx| f(ctx, args)),
        Handler::Conn(_) => Reply::err("internal: a connection command cannot block"),
    }
}

/// Runs a command once in the commit step; with `block`, the commit step parks that waiter in the
/// same step if the command finds nothing.
async fn first_try(
    s: &Session,
    shared: &Arc<Shared>,
    spec: &'static Spec,
    args: &Args,
    block: Option<Arc<Waiter>>,
) -> Reply {
    let (tx, rx) = oneshot::channel();
    let job = Job { db_index: s.db_index, cmds: vec![(spec, args.clone())], reply: tx, block, client: s.id };
    let replies = if shared.store.submit(job) { rx.await.ok() } else { None };
    replies.and_then(|mut r| r.pop()).unwrap_or_else(|| Reply::err("the server is shutting down"))
}

/// Most bytes read ahead from a blocked client's socket (its next requests) while it waits.
const MAX_READ_AHEAD: usize = 1 << 20;

/// Executes a command flagged [`flags::BLOCKING`] outside MULTI: once, then, if it found nothing, parked
/// until it is served, times out, or the client goes away. Bytes the client sends meanwhile are kept in
/// `rbuf` (its next requests); a closed socket sets `close_now`.
pub async fn execute(
    s: &mut Session,
    shared: &Arc<Shared>,
    spec: &'static Spec,
    args: Args,
    stream: &mut TcpStream,
    rbuf: &mut BytesMut,
) -> Reply {
    debug_assert!(spec.flags & flags::BLOCKING != 0);
    // XREAD BLOCK: `$` becomes the stream's current last id.
    let args = if spec.name == "xread" {
        let db = shared.store.db();
        let ctx = ReadCtx::new(&db, shared.store.keyspace(), s.db_index, now_ms());
        match crate::commands::streams::resolve_dollar(&ctx, args) {
            Ok(a) => a,
            Err(r) => return r,
        }
    } else {
        args
    };
    let Some((keys, timeout)) = wait_spec(spec, &args) else {
        // Malformed, or XREAD without BLOCK: it never blocks.
        return try_once(s, shared, spec, &args).await;
    };
    if matches!(spec.handler, Handler::Read(_)) && shared.store.read_only_reason().is_some() {
        // Writes are refused (the commit step answers every job with MISCONF): XREAD BLOCK reads here,
        // and answers at once, since no entry can come.
        return try_once(s, shared, spec, &args).await;
    }
    let reg = shared.store.blocking.clone();
    // Open to CLIENT UNBLOCK before the commit step may park the client (and INFO count it as blocked).
    let mut unblock = s.entry.begin_block();
    let (w, mut rx) = reg.waiter(s.db_index, crate::commands::streams::waiting_spec(spec), args.clone(), keys);
    let first = first_try(s, shared, spec, &args, Some(w.clone())).await;
    if !found_nothing(&first) {
        // Not parked (or parked by a group whose write then failed: unlink it).
        reg.cancel(&w);
        s.entry.end_block();
        return first;
    }
    let mut stop = shared.shutdown.subscribe();
    let entry = s.entry.clone();
    let sleep = async {
        match timeout {
            Some(t) => tokio::time::sleep(t).await,
            None => std::future::pending().await,
        }
    };
    tokio::pin!(sleep);
    // Why the wait ended without a reply: `true` if the client is gone.
    let gone;
    // `Some(error)`: CLIENT UNBLOCK ended the wait.
    let mut unblocked = None;
    loop {
        tokio::select! {
            r = &mut rx => {
                s.entry.end_block();
                return r.unwrap_or_else(|_| Reply::err("the server is shutting down"));
            }
            _ = &mut sleep => { gone = false; break; }
            u = &mut unblock => { unblocked = u.ok(); gone = false; break; }
            r = stream.read_buf(rbuf), if rbuf.len() < MAX_READ_AHEAD => match r {
                Ok(0) | Err(_) => { gone = true; break; }
                Ok(n) => {
                    shared.stats.net_input_bytes.fetch_add(n as u64, Ordering::Relaxed);
                }
            },
            _ = entry.kill.notified() => { gone = true; break; }
            _ = stop.wait_for(|v| *v) => { gone = false; break; }
        }
    }
    s.entry.end_block();
    if gone {
        s.close_now = true;
    }
    if reg.cancel(&w) {
        return match unblocked {
            Some(true) => crate::server::unblocked_error(),
            _ => Reply::NilArray,
        };
    }
    // The commit step took the waiter: its reply (after the fsync) is coming.
    rx.await.unwrap_or_else(|_| Reply::err("the server is shutting down"))
}
