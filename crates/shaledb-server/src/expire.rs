//! Expiry in the background, and the keyspace counts `INFO keyspace` prints.
//!
//! Reads never see an expired key (`ReadCtx::get_meta` hides it) and a write that touches one deletes it
//! (`WriteCtx::get_meta`). A key nobody touches again would stay on disk forever, so a sweeper thread walks
//! the meta keys of every database in key order, a bounded step at a time (like Redis's active expire
//! cycle): every [`SWEEP_INTERVAL`] it examines up to [`SWEEP_KEYS`] keys from where the previous step
//! stopped (wrapping around at the end), and sends the expired ones it found to the commit step as one
//! conditional delete ([`SWEEP`]), which checks the expiry again there, so a key set again meanwhile is kept.
//! When a step found mostly expired keys it goes on at once (at most [`MAX_STEPS_PER_ROUND`] steps), as
//! Redis repeats its cycle while more than a quarter of the sampled keys were expired.
//!
//! Unlike Redis, which samples a dictionary holding only the keys with an expiry, the sweep reads every key:
//! a database of N keys is swept once every N / 2,000 seconds when idle of expired keys. Memory stays bounded
//! either way; only disk space of expired, untouched keys is reclaimed that slowly.

use crate::commands::{cmd, Spec};
use crate::commit::Store;
use crate::keys::{self, DATABASES, KIND_META};
use crate::resp::{Args, Reply};
use crate::store::{now_ms, WriteCtx};
use bytes::Bytes;
use shaledb::ReadOptions;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// Pause between sweep steps.
pub const SWEEP_INTERVAL: Duration = Duration::from_millis(100);
/// Keys examined per step.
pub const SWEEP_KEYS: usize = 200;
/// Steps one round may run back to back while they keep finding expired keys.
pub const MAX_STEPS_PER_ROUND: usize = 16;

/// The conditional delete the sweeper sends: `args[1..]` are user keys of the job's database; each is
/// deleted only if it is still expired when the commit step executes it. Not in the command table:
/// clients cannot call it.
pub static SWEEP: Spec = cmd! { "shaledb.expire-sweep", -1, WRITE, [1, -1, 1], Write(sweep_delete), "Deletes the given keys if they are expired (internal)." };

fn sweep_delete(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    let mut deleted = 0;
    // A CLIENT PAUSE that began after the sweeper looked: the keys stay until it ends.
    if ctx.expiry_paused() {
        return Reply::Int(0);
    }
    for k in &args[1..] {
        let mut key = ctx.keyspace.meta_key(ctx.db_index, k);
        match ctx.get_raw(&key) {
            Ok(Some(v)) => {
                if keys::decode_meta(&v).is_ok_and(|m| m.expired(ctx.now_ms)) {
                    if let Ok(Some(c)) = keys::Coll::decode(&v) {
                        ctx.dropped.push((ctx.db_index, c.version));
                    }
                    ctx.delete_raw(&key);
                    ctx.notify(crate::notify::EXPIRED, "expired", k);
                    deleted += 1;
                }
            }
            Ok(None) => {}
            Err(e) => return Reply::err(format!("read failed: {e}")),
        }
        key.clear();
    }
    Reply::Int(deleted)
}

/// Starts the sweeper thread; it stops when the store shuts down.
pub(crate) fn spawn(store: Arc<Store>) -> JoinHandle<()> {
    std::thread::Builder::new()
        .name("shaledb-expire".into())
        .spawn(move || {
            let mut sweeper = Sweeper::default();
            while !store.stopping() {
                std::thread::sleep(SWEEP_INTERVAL);
                if store.read_only_reason().is_some() || store.expiry_paused() {
                    continue;
                }
                for _ in 0..MAX_STEPS_PER_ROUND {
                    if store.stopping() {
                        break;
                    }
                    let (examined, expired) = sweeper.step(&store, SWEEP_KEYS);
                    if examined == 0 || expired * 4 <= examined {
                        break;
                    }
                }
            }
        })
        .expect("spawn the expire thread")
}

/// Where the sweep goes on from.
#[derive(Default, Debug)]
pub struct Sweeper {
    /// The engine key the next step starts at (empty: the beginning).
    next: Vec<u8>,
    /// Keys deleted so far (for tests and stats).
    pub deleted: u64,
}

impl Sweeper {
    /// Examines up to `budget` meta keys from where the last step stopped and deletes the expired ones
    /// through the commit step. Returns `(keys examined, expired keys found)`.
    pub fn step(&mut self, store: &Store, budget: usize) -> (usize, usize) {
        // A replica group member that does not lead leaves expiry to the leader (its deletions come through
        // the log).
        if !store.may_write() {
            return (0, 0);
        }
        let now = now_ms();
        let mut found: Vec<(u8, Bytes)> = Vec::new();
        let mut examined = 0;
        {
            let mut it = store.db().cursor_opt(&ReadOptions { fill_cache: false, ..ReadOptions::default() });
            it.seek(&self.next);
            while it.valid() && examined < budget {
                let k = it.key();
                if k.first().is_none_or(|&d| d >= DATABASES) {
                    break;
                }
                if k.len() < 2 || k[1] != KIND_META {
                    // Collection members (or a stray key): go on at the next database's meta keys. Meta keys
                    // sort first in their database, so this never goes back.
                    examined += 1;
                    match k[0].checked_add(1).filter(|&d| d < DATABASES) {
                        Some(d) if k.len() >= 2 => it.seek(keys::meta_prefix(d)),
                        Some(_) => it.next(),
                        None => break,
                    }
                    continue;
                }
                examined += 1;
                if keys::decode_meta(it.value()).is_ok_and(|m| m.expired(now)) {
                    found.push((k[0], Bytes::copy_from_slice(store.keyspace().user_key_any(k).unwrap_or_default())));
                }
                it.next();
            }
            if it.valid() && examined >= budget {
                self.next = it.key().to_vec();
            } else {
                self.next.clear();
            }
        }
        let n = found.len();
        for db in 0..DATABASES {
            let mut args: Args = vec![Bytes::from_static(b"shaledb.expire-sweep")];
            args.extend(found.iter().filter(|(d, _)| *d == db).map(|(_, k)| k.clone()));
            if args.len() == 1 {
                continue;
            }
            if let Some(replies) = store.submit_and_wait(db, vec![(&SWEEP, args)]) {
                if let Some(Reply::Int(d)) = replies.first() {
                    self.deleted += *d as u64;
                }
            }
        }
        (examined, n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Appendfsync;
    use shaledb::{Db, Options, WriteBatch};

    fn open(dir: &std::path::Path) -> Db {
        Db::open(dir, Options { create_if_missing: true, ..Options::default() }).unwrap()
    }

    #[test]
    fn sweeper_deletes_expired_keys_only_and_counts_are_right() {
        let dir = tempfile::tempdir().unwrap();
        let db = open(dir.path());
        let mut b = WriteBatch::new();
        for i in 0..500u32 {
            let k = format!("k{i:04}");
            // Every other key expired long ago; a quarter expires far in the future; the rest never.
            let exp = match i % 4 {
                0 | 2 => Some(1),
                1 => Some(u64::MAX / 2),
                _ => None,
            };
            b.put(keys::meta_key((i % 3) as u8, k.as_bytes()), keys::encode_string(b"v", exp));
        }
        // A member key between databases must be skipped.
        b.put([1, keys::KIND_MEMBER, b'x'], b"member");
        db.write(&b).unwrap();
        let counts = crate::commands::server_cmds::keyspace_scan(&db, now_ms()).unwrap();
        let total: u64 = counts.iter().map(|c| c.1).sum();
        let with: u64 = counts.iter().map(|c| c.2).sum();
        assert_eq!((total, with), (250, 125));
        assert_eq!(counts.iter().map(|c| c.0).collect::<Vec<_>>(), vec![0, 1, 2]);

        let store = Store::start(db, Appendfsync::No);
        let mut s = Sweeper::default();
        let mut examined = 0;
        // Small steps: the cursor must carry over between them and wrap at the end.
        for _ in 0..20 {
            examined += s.step(&store, 37).0;
        }
        assert!(examined >= 500, "{examined}");
        assert_eq!(s.deleted, 250);
        let mut it = store.db().cursor();
        it.seek_to_first();
        let mut left = 0;
        while it.valid() {
            if it.key()[1] == KIND_META {
                assert!(!keys::decode_meta(it.value()).unwrap().expired(now_ms()));
                left += 1;
            }
            it.next();
        }
        assert_eq!(left, 250);
        assert!(store.db().get([1, keys::KIND_MEMBER, b'x']).unwrap().is_some());
        store.shutdown();
    }

    #[test]
    fn sweep_delete_rechecks_the_expiry() {
        let dir = tempfile::tempdir().unwrap();
        let db = open(dir.path());
        db.put(keys::meta_key(0, b"a"), keys::encode_string(b"v", Some(1))).unwrap();
        db.put(keys::meta_key(0, b"b"), keys::encode_string(b"v", None)).unwrap();
        let store = Store::start(db, Appendfsync::No);
        let args: Args = vec![Bytes::from_static(b"x"), Bytes::from_static(b"a"), Bytes::from_static(b"b")];
        let r = store.submit_and_wait(0, vec![(&SWEEP, args)]).unwrap();
        assert!(matches!(r[0], Reply::Int(1)));
        assert!(store.db().get(keys::meta_key(0, b"a")).unwrap().is_none());
        assert!(store.db().get(keys::meta_key(0, b"b")).unwrap().is_some());
        store.shutdown();
    }
}
