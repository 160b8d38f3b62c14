//! [`Watches`]: the keys clients WATCH. [`WriteCtx`](super::WriteCtx) reports every write of a meta key to
//! it; WATCH, UNWATCH and EXEC (`commands/multi.rs`) register, forget and check keys, all on the commit
//! thread.

use bytes::Bytes;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};

/// WATCHes sent while a script runs past `busy-reply-threshold` (Redis serves WATCH then): the connection
/// answers at once and posts the keys here; the commit step, busy with the script, registers them before
/// the next write it records and before its next command ([`super::WriteCtx::take_watch_inbox`]), so a
/// write of the script after the WATCH makes the watcher's EXEC fail and one before it does not, as in
/// Redis.
#[derive(Debug, Default)]
pub struct WatchInbox {
    /// Some request waits (the one check each write makes).
    any: AtomicBool,
    /// `(client, database, user keys)`, in arrival order.
    queue: parking_lot::Mutex<Vec<(u64, u8, Vec<Bytes>)>>,
}

impl WatchInbox {
    /// Client `client` watches `keys` of database `db`.
    pub fn post(&self, client: u64, db: u8, keys: Vec<Bytes>) {
        self.queue.lock().push((client, db, keys));
        self.any.store(true, Ordering::Release);
    }

    /// The requests waiting, in order (none left behind).
    pub fn take(&self) -> Vec<(u64, u8, Vec<Bytes>)> {
        if !self.any.load(Ordering::Acquire) {
            return Vec::new();
        }
        let mut q = self.queue.lock();
        self.any.store(false, Ordering::Release);
        std::mem::take(&mut *q)
    }
}

/// The keys clients watch, owned by the commit step (see `commands/multi.rs` for WATCH and EXEC).
#[derive(Debug, Default)]
pub struct Watches {
    /// Meta engine key -> the clients watching it, each with "the key was expired at WATCH time".
    keys: HashMap<Vec<u8>, Vec<(u64, bool)>>,
    /// Client id -> its watched keys and whether one of them changed.
    clients: HashMap<u64, ClientWatches>,
}

#[derive(Debug, Default)]
struct ClientWatches {
    keys: Vec<Vec<u8>>,
    dirty: bool,
}

impl Watches {
    /// True when no client watches anything (the fast path of every write).
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// Client `client` watches the meta key `meta_key` (`expired`: it holds an expired value now).
    pub fn watch(&mut self, client: u64, meta_key: Vec<u8>, expired: bool) {
        let c = self.clients.entry(client).or_default();
        if c.keys.contains(&meta_key) {
            return;
        }
        self.keys.entry(meta_key.clone()).or_default().push((client, expired));
        c.keys.push(meta_key);
    }

    /// Forgets every key `client` watches.
    pub fn unwatch(&mut self, client: u64) {
        let Some(c) = self.clients.remove(&client) else { return };
        for k in c.keys {
            if let Some(list) = self.keys.get_mut(&k) {
                list.retain(|(id, _)| *id != client);
                if list.is_empty() {
                    self.keys.remove(&k);
                }
            }
        }
    }

    /// The meta key `meta_key` was written (`exists`: a value was stored, not deleted): every client
    /// watching it is dirty, except that deleting a key that was already expired at WATCH time is no change
    /// (the key then counts as missing).
    pub fn touch(&mut self, meta_key: &[u8], exists: bool) {
        let Some(list) = self.keys.get_mut(meta_key) else { return };
        for (client, expired) in list.iter_mut() {
            if *expired && !exists {
                *expired = false;
                continue;
            }
            if let Some(c) = self.clients.get_mut(client) {
                c.dirty = true;
            }
        }
    }

    /// At EXEC: unwatches `client`'s keys. `None` when one of them changed; otherwise the keys that were
    /// alive at WATCH time (EXEC checks that none has expired since).
    pub fn take_for_exec(&mut self, client: u64) -> Option<Vec<Vec<u8>>> {
        let Some(c) = self.clients.get(&client) else { return Some(Vec::new()) };
        let dirty = c.dirty;
        let alive: Vec<Vec<u8>> = c
            .keys
            .iter()
            .filter(|k| self.keys.get(*k).and_then(|l| l.iter().find(|(id, _)| *id == client)).is_some_and(|(_, e)| !e))
            .cloned()
            .collect();
        self.unwatch(client);
        if dirty {
            None
        } else {
            Some(alive)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{WatchInbox, Watches};
    use bytes::Bytes;

    #[test]
    fn the_inbox_hands_over_its_requests_once_in_order() {
        let inbox = WatchInbox::default();
        assert!(inbox.take().is_empty());
        inbox.post(7, 0, vec![Bytes::from_static(b"a")]);
        inbox.post(8, 2, vec![Bytes::from_static(b"b"), Bytes::from_static(b"c")]);
        let got = inbox.take();
        assert_eq!(got.iter().map(|(c, db, k)| (*c, *db, k.len())).collect::<Vec<_>>(), [(7, 0, 1), (8, 2, 2)]);
        assert!(inbox.take().is_empty());
    }

    #[test]
    fn touch_marks_watchers_dirty_and_unwatch_leaves_nothing() {
        let mut w = Watches::default();
        assert!(w.is_empty());
        w.watch(1, b"\0\0a".to_vec(), false);
        w.watch(1, b"\0\0a".to_vec(), false);
        w.watch(2, b"\0\0a".to_vec(), false);
        w.watch(2, b"\0\0b".to_vec(), false);
        w.touch(b"\0\0b", true);
        assert_eq!(w.take_for_exec(1), Some(vec![b"\0\0a".to_vec()]));
        assert_eq!(w.take_for_exec(2), None);
        assert!(w.is_empty());
        // A client that watches nothing may always run.
        w.watch(2, b"\0\0a".to_vec(), false);
        w.touch(b"\0\0a", true);
        assert_eq!(w.take_for_exec(3), Some(vec![]));
    }

    #[test]
    fn deleting_a_key_expired_at_watch_is_no_change_but_writing_it_is() {
        let mut w = Watches::default();
        w.watch(1, b"k".to_vec(), true);
        w.touch(b"k", false);
        // Now it counts as a missing key that is alive-checked no more.
        assert_eq!(w.take_for_exec(1), Some(vec![b"k".to_vec()]));
        w.watch(1, b"k".to_vec(), true);
        w.touch(b"k", true);
        assert_eq!(w.take_for_exec(1), None);
        w.watch(1, b"k".to_vec(), true);
        w.unwatch(1);
        assert!(w.is_empty());
    }
}
