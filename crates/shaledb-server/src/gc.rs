//! The collector: deletes the member records of dead collection versions (keys.rs has the layout).
//!
//! A version is *dead* when the meta value of the user key its registry record names (`db 0x02 version ->
//! user_key`) does not hold that version: the key was deleted, expired, overwritten (SET over a hash, a
//! STORE form), renamed away (RENAME rewrites the registry record, so a renamed collection stays alive),
//! moved, or its last member was removed. Nothing can reach a dead version again (versions are never
//! reused), so its records can go at leisure.
//!
//! Two sources of work:
//! - prompt: the versions a group's commands removed (`WriteCtx::dropped`: DEL, UNLINK, EXPIRE in the past,
//!   expiry on access, the sweeper, emptied collections, RENAME/COPY/STORE overwrites, MOVE), handed over by
//!   the commit step after the group is durable ([`Collector::enqueue`]);
//! - slow: a pass over the registry of every database, in steps of [`PASS_STEP`] records, that finds what
//!   the prompt path cannot know about (a blind SET over a hash, versions of a process killed before their
//!   reclaim, a failed group). A pass starts every [`PASS_INTERVAL`] (or at once after [`Collector::kick`]).
//!
//! Deleting goes through the commit step like client writes, as the internal command [`RECLAIM`], one
//! bounded step at a time: a step re-checks that the version is dead (in the commit step, so no command
//! can revive it meanwhile), deletes at most [`RECLAIM_STEP`] member records from where the previous step
//! stopped and, when none are left, deletes the registry record in the same batch. A client's write waits
//! at most for one such step, whatever the size of the collection being reclaimed.

use crate::commands::{cmd, Spec};
use crate::commit::Store;
use crate::keys::{self, Coll, DATABASES, KIND_REGISTRY};
use crate::resp::{Args, Reply};
use crate::store::WriteCtx;
use bytes::Bytes;
use parking_lot::{Condvar, Mutex};
use shaledb::ReadOptions;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Most member records one [`RECLAIM`] step deletes.
pub const RECLAIM_STEP: usize = 1000;
/// Registry records one step of the slow pass examines.
pub const PASS_STEP: usize = 1000;
/// Pause between the end of a slow pass and the start of the next.
pub const PASS_INTERVAL: Duration = Duration::from_secs(30);
/// Most versions waiting in the prompt queue; beyond it they are left to the slow pass.
pub const MAX_QUEUE: usize = 1 << 20;

/// The collector's queue and counters (`INFO` shows the counters).
#[derive(Default)]
pub struct Collector {
    queue: Mutex<VecDeque<(u8, u64)>>,
    wake: Condvar,
    kicked: AtomicBool,
    /// Dead versions whose records are all gone.
    pub versions_reclaimed: AtomicU64,
    /// Member records deleted.
    pub records_deleted: AtomicU64,
    /// Slow passes completed.
    pub passes: AtomicU64,
    /// Dead versions reclaimed since the start or the last `CONFIG RESETSTAT` (`lazyfreed_objects`).
    lazyfreed: AtomicU64,
    /// Versions taken from the queue and not yet reclaimed (0 or 1: one collector thread). Counted as pending,
    /// so `lazyfree_pending_objects` reaches 0 only once `lazyfreed_objects` counts them, as Redis's do.
    working: AtomicU64,
}

impl Collector {
    /// Hands over versions a successful group removed.
    pub fn enqueue(&self, versions: impl Iterator<Item = (u8, u64)>) {
        let mut q = self.queue.lock();
        let before = q.len();
        for v in versions {
            if q.len() < MAX_QUEUE {
                q.push_back(v);
            }
        }
        if q.len() > before {
            self.wake.notify_one();
        }
    }

    /// Starts a slow pass now (tests, and `DEBUG`-style use).
    pub fn kick(&self) {
        self.kicked.store(true, Ordering::Release);
        let _q = self.queue.lock();
        self.wake.notify_one();
    }

    /// Dead versions reclaimed since the start or the last [`Collector::reset_lazyfreed`]
    /// (`lazyfreed_objects` of `INFO memory`).
    pub fn lazyfreed_objects(&self) -> u64 {
        self.lazyfreed.load(Ordering::Relaxed)
    }

    /// `CONFIG RESETSTAT`.
    pub fn reset_lazyfreed(&self) {
        self.lazyfreed.store(0, Ordering::Relaxed);
    }

    /// Versions waiting in the prompt queue or being reclaimed from it.
    pub fn pending(&self) -> usize {
        let q = self.queue.lock();
        q.len() + self.working.load(Ordering::Acquire) as usize
    }
}

/// The internal write command of the collector: `args[1]` is a version (decimal) of the job's database,
/// `args[2]` the member-key suffix (after `db 0x01 version`) to go on from. Answers `-1` when the version is
/// alive (nothing done), else `[deleted, next]` with `next` nil once the version is gone (registry record
/// included). Not in the command table: clients cannot call it.
pub static RECLAIM: Spec = cmd! { "shaledb.gc-reclaim", 3, WRITE, [0, 0, 0], Write(reclaim), "Deletes member records of a dead collection version (internal)." };

/// How long past its expiry a collection whose meta value is still stored counts as alive: a read that
/// took its clock just before the expiry and its snapshot just after must still find the members.
pub const EXPIRY_GRACE_MS: u64 = 2000;

/// True when the registry record `user_key` of `version` names a key whose meta value (`meta`, as
/// stored) does not hold `version` at `now_ms` (expired for more than [`EXPIRY_GRACE_MS`] counts as not
/// holding it).
pub fn is_dead(version: u64, meta: Option<&[u8]>, now_ms: u64) -> bool {
    let Some(stored) = meta else { return true };
    match (keys::decode_meta(stored), Coll::decode(stored)) {
        (Ok(m), Ok(Some(c))) => c.version != version || m.expired(now_ms.saturating_sub(EXPIRY_GRACE_MS)),
        // A string, or a value we cannot read: the version is not in it.
        _ => true,
    }
}

fn reclaim(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    let db = ctx.db_index;
    let Some(version) = std::str::from_utf8(&args[1]).ok().and_then(|s| s.parse::<u64>().ok()) else {
        return Reply::err("bad version");
    };
    let rk = keys::registry_key(db, version);
    let user_key = match ctx.get_raw(&rk) {
        Ok(Some(k)) => k,
        // No registry record: reclaimed already.
        Ok(None) => return Reply::Array(vec![Reply::Int(0), Reply::Nil]),
        Err(e) => return Reply::err(format!("read failed: {e}")),
    };
    let meta = match ctx.get_raw(&ctx.keyspace.meta_key(db, &user_key)) {
        Ok(m) => m,
        Err(e) => return Reply::err(format!("read failed: {e}")),
    };
    if !is_dead(version, meta.as_deref(), ctx.now_ms) {
        return Reply::Int(-1);
    }
    let prefix = keys::version_prefix(db, version);
    let upper = keys::prefix_end(&prefix).unwrap_or_default();
    let mut lower = prefix.to_vec();
    lower.extend_from_slice(&args[2]);
    let found: Vec<Vec<u8>> = {
        let view = ctx.view();
        let r: Result<Vec<Vec<u8>>, Reply> = view
            .scan(&lower, &upper, false)
            .take(RECLAIM_STEP + 1)
            .map(|r| r.map(|(k, _)| k))
            .map(|r| r.map_err(Reply::from))
            .collect();
        match r {
            Ok(f) => f,
            Err(e) => return e,
        }
    };
    let more = found.len() > RECLAIM_STEP;
    let n = found.len().min(RECLAIM_STEP);
    for k in &found[..n] {
        ctx.delete_raw(k);
    }
    if more {
        let next = found[RECLAIM_STEP][prefix.len()..].to_vec();
        Reply::Array(vec![Reply::Int(n as i64), Reply::bulk(next)])
    } else {
        ctx.delete_raw(&rk);
        Reply::Array(vec![Reply::Int(n as i64), Reply::Nil])
    }
}

/// Reclaims one version through the commit step, step by step. Returns false when the store stopped.
fn reclaim_version(store: &Store, db: u8, version: u64) -> bool {
    let mut from = Bytes::new();
    loop {
        if store.stopping() || store.read_only_reason().is_some() {
            return false;
        }
        let args: Args = vec![Bytes::from_static(b"shaledb.gc-reclaim"), Bytes::from(version.to_string()), from];
        let Some(replies) = store.submit_and_wait(db, vec![(&RECLAIM, args)]) else { return false };
        match replies.into_iter().next() {
            Some(Reply::Array(r)) => {
                if let Some(Reply::Int(n)) = r.first() {
                    store.gc.records_deleted.fetch_add(*n as u64, Ordering::Relaxed);
                }
                match r.into_iter().nth(1) {
                    Some(Reply::Bulk(next)) => from = next,
                    _ => {
                        store.gc.versions_reclaimed.fetch_add(1, Ordering::Relaxed);
                        store.gc.lazyfreed.fetch_add(1, Ordering::Relaxed);
                        return true;
                    }
                }
            }
            // Alive, or an error (read failure, refused group): leave it to a later pass.
            _ => return true,
        }
    }
}

/// Where the slow pass goes on.
struct Pass {
    /// The next registry key to examine (`None`: no pass in progress).
    next: Option<Vec<u8>>,
    last_end: Instant,
}

impl Pass {
    /// Examines up to [`PASS_STEP`] registry records of one database and reclaims the dead versions among
    /// them.
    fn step(&mut self, store: &Store) {
        if !store.may_write() {
            // The pass waits here (its place kept) until this member leads, without spinning.
            std::thread::sleep(Duration::from_millis(100));
            return;
        }
        let Some(start) = self.next.take() else { return };
        let Some(&db) = start.first().filter(|&&d| d < DATABASES) else { return };
        let now = crate::store::now_ms();
        let mut dead: Vec<(u8, u64)> = Vec::new();
        let mut next = None;
        {
            let mut it = store.db().cursor_opt(&ReadOptions {
                fill_cache: false,
                iterate_lower_bound: Some(vec![db, KIND_REGISTRY]),
                iterate_upper_bound: Some(vec![db, KIND_REGISTRY + 1]),
                ..ReadOptions::default()
            });
            it.seek(&start);
            let mut examined = 0;
            while it.valid() {
                let k = it.key();
                if examined >= PASS_STEP {
                    next = Some(k.to_vec());
                    break;
                }
                examined += 1;
                if k.len() == 10 {
                    let version = keys::be_u64(&k[2..10]);
                    let meta = store.db().get(store.keyspace().meta_key(db, it.value())).ok().flatten();
                    if is_dead(version, meta.as_deref(), now) {
                        dead.push((db, version));
                    }
                }
                it.next();
            }
        }
        for (db, v) in dead {
            if !reclaim_version(store, db, v) {
                return;
            }
        }
        self.next = match next {
            Some(n) => Some(n),
            None if db + 1 < DATABASES => Some(vec![db + 1, KIND_REGISTRY]),
            None => {
                store.gc.passes.fetch_add(1, Ordering::Relaxed);
                self.last_end = Instant::now();
                None
            }
        };
    }
}

/// Starts the collector thread; it stops when the store shuts down.
pub(crate) fn spawn(store: Arc<Store>) -> JoinHandle<()> {
    std::thread::Builder::new()
        .name("shaledb-gc".into())
        .spawn(move || {
            let mut pass = Pass { next: None, last_end: Instant::now() };
            while !store.stopping() {
                let job = {
                    let mut q = store.gc.queue.lock();
                    if q.is_empty() && pass.next.is_none() && !store.gc.kicked.load(Ordering::Acquire) {
                        store.gc.wake.wait_for(&mut q, Duration::from_millis(100));
                    }
                    let job = q.pop_front();
                    // Under the queue's lock, so `pending` never sees the job in neither place.
                    if job.is_some() {
                        store.gc.working.fetch_add(1, Ordering::AcqRel);
                    }
                    job
                };
                if let Some((db, v)) = job {
                    // A replica group member that does not lead leaves reclaiming to the leader.
                    if store.read_only_reason().is_none() && store.may_write() {
                        reclaim_version(&store, db, v);
                    }
                    store.gc.working.fetch_sub(1, Ordering::AcqRel);
                    continue;
                }
                if store.read_only_reason().is_some() {
                    continue;
                }
                let kicked = store.gc.kicked.swap(false, Ordering::AcqRel);
                if pass.next.is_none() && (kicked || pass.last_end.elapsed() >= PASS_INTERVAL) {
                    pass.next = Some(vec![0, KIND_REGISTRY]);
                }
                pass.step(&store);
            }
        })
        .expect("spawn the collector thread")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keys::Type;

    #[test]
    fn deadness_follows_the_meta_value() {
        let mut c = Coll::new(Type::Hash, 7);
        c.size = 1;
        let live = c.encode();
        assert!(!is_dead(7, Some(&live), 100));
        assert!(is_dead(8, Some(&live), 100), "another version");
        assert!(is_dead(7, None, 100), "deleted");
        assert!(is_dead(7, Some(&keys::encode_string(b"x", None)), 100), "overwritten by a string");
        c.expire_at_ms = Some(50);
        assert!(is_dead(7, Some(&c.encode()), 50 + EXPIRY_GRACE_MS), "expired");
        assert!(!is_dead(7, Some(&c.encode()), 49 + EXPIRY_GRACE_MS), "expired, within the grace");
        assert!(!is_dead(7, Some(&c.encode()), 49));
        assert!(is_dead(7, Some(&[0x02, 1]), 100), "unreadable");
    }
}
