//! Keyspace notifications (Redis's `notify-keyspace-events`): the event classes, their text form, and the
//! events a group of writes produced.
//!
//! A write command records its events with [`crate::store::WriteCtx::notify`] while it runs on the commit
//! thread; they stay with the group and are published (`__keyspace@<db>__:<key>` with the event name as the
//! message, `__keyevent@<db>__:<event>` with the key as the message) only once the group is durable and its
//! writers were answered, in the order the writes were applied. A group that fails publishes nothing.
//!
//! The commit step reads the configured classes once per group; while they are empty (the default),
//! recording an event is one test of an integer.
//!
//! The class letters, their meaning and the canonical text `CONFIG GET` prints are Redis 7.0's:
//! `K` keyspace channel, `E` keyevent channel, `g` generic (DEL, EXPIRE, RENAME ...), `$` string, `l` list,
//! `s` set, `h` hash, `z` sorted set, `x` expired, `e` evicted, `t` stream, `m` key miss, `d` module, `n` new
//! key, `A` all of `g$lshzxetd`.

use crate::commit::Store;
use crate::resp::Reply;
use crate::store::{Misses, ReadCtx};
use bytes::{BufMut, Bytes, BytesMut};
use std::sync::atomic::Ordering;

/// `K`: publish on `__keyspace@<db>__:<key>`.
pub const KEYSPACE: u32 = 1 << 0;
/// `E`: publish on `__keyevent@<db>__:<event>`.
pub const KEYEVENT: u32 = 1 << 1;
/// `g`: generic commands (DEL, EXPIRE, RENAME, COPY, MOVE, RESTORE ...).
pub const GENERIC: u32 = 1 << 2;
/// `$`: string commands.
pub const STRING: u32 = 1 << 3;
/// `l`: list commands.
pub const LIST: u32 = 1 << 4;
/// `s`: set commands.
pub const SET: u32 = 1 << 5;
/// `h`: hash commands.
pub const HASH: u32 = 1 << 6;
/// `z`: sorted set commands.
pub const ZSET: u32 = 1 << 7;
/// `x`: a key expired (lazily or by the sweeper).
pub const EXPIRED: u32 = 1 << 8;
/// `e`: a key evicted (this server never evicts; accepted for compatibility).
pub const EVICTED: u32 = 1 << 9;
/// `t`: stream commands.
pub const STREAM: u32 = 1 << 10;
/// `m`: a read looked up a key that is missing or expired (`keymiss`, published by [`run_read`] and
/// [`crate::store::WriteCtx::run_read`]).
pub const KEY_MISS: u32 = 1 << 11;
/// `d`: module events (no modules here; accepted for compatibility).
pub const MODULE: u32 = 1 << 13;
/// `n`: a key was created.
pub const NEW: u32 = 1 << 14;
/// `A`: every class but `m` and `n`.
pub const ALL: u32 = GENERIC | STRING | LIST | SET | HASH | ZSET | EXPIRED | EVICTED | STREAM | MODULE;

/// The error text of a bad class letter (Redis's, for clients that match on it).
pub const BAD_CLASS: &str = "Invalid event class character. Use 'Ag$lshzxeKEtmdn'.";

/// The classes of a `notify-keyspace-events` value; `None` for a letter that names none.
pub fn parse(classes: &[u8]) -> Option<u32> {
    let mut flags = 0;
    for c in classes {
        flags |= match c {
            b'A' => ALL,
            b'g' => GENERIC,
            b'$' => STRING,
            b'l' => LIST,
            b's' => SET,
            b'h' => HASH,
            b'z' => ZSET,
            b'x' => EXPIRED,
            b'e' => EVICTED,
            b'K' => KEYSPACE,
            b'E' => KEYEVENT,
            b't' => STREAM,
            b'm' => KEY_MISS,
            b'd' => MODULE,
            b'n' => NEW,
            _ => return None,
        };
    }
    Some(flags)
}

/// The canonical text of `flags`, as `CONFIG GET notify-keyspace-events` prints it (`A` when every class of
/// it is set, else the classes one by one in a fixed order; then `K`, `E`, `m`).
pub fn format(flags: u32) -> String {
    let mut s = String::new();
    if flags & ALL == ALL {
        s.push('A');
    } else {
        for (bit, c) in [
            (GENERIC, 'g'),
            (STRING, '$'),
            (LIST, 'l'),
            (SET, 's'),
            (HASH, 'h'),
            (ZSET, 'z'),
            (EXPIRED, 'x'),
            (EVICTED, 'e'),
            (STREAM, 't'),
            (MODULE, 'd'),
            (NEW, 'n'),
        ] {
            if flags & bit != 0 {
                s.push(c);
            }
        }
    }
    for (bit, c) in [(KEYSPACE, 'K'), (KEYEVENT, 'E'), (KEY_MISS, 'm')] {
        if flags & bit != 0 {
            s.push(c);
        }
    }
    s
}

/// The classes the commit step records for a group: none unless a channel kind (`K` or `E`) is on, since
/// an event with neither is published nowhere.
pub fn effective(flags: u32) -> u32 {
    if flags & (KEYSPACE | KEYEVENT) == 0 {
        0
    } else {
        flags
    }
}

/// One event of a write: `event` happened to `key` of database `db`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    pub db: u8,
    pub event: &'static str,
    pub key: Bytes,
    /// The classes configured when the event was recorded (which channels it goes to).
    pub flags: u32,
}

impl Event {
    /// The `(channel, message)` pairs to publish, keyspace first, as the event's flags ask.
    pub fn messages(&self) -> impl Iterator<Item = (Bytes, Bytes)> + '_ {
        let space = (self.flags & KEYSPACE != 0).then(|| {
            let mut c = BytesMut::with_capacity(16 + self.key.len());
            c.put_slice(b"__keyspace@");
            c.put_slice(self.db.to_string().as_bytes());
            c.put_slice(b"__:");
            c.put_slice(&self.key);
            (c.freeze(), Bytes::from_static(self.event.as_bytes()))
        });
        let event = (self.flags & KEYEVENT != 0).then(|| {
            let mut c = BytesMut::with_capacity(16 + self.event.len());
            c.put_slice(b"__keyevent@");
            c.put_slice(self.db.to_string().as_bytes());
            c.put_slice(b"__:");
            c.put_slice(self.event.as_bytes());
            (c.freeze(), self.key.clone())
        });
        space.into_iter().chain(event)
    }
}

/// Runs read command `f` on its connection's task against database `db_index`. While the `m` class is on,
/// the keys its lookups missed are published as `keymiss` events before its reply is sent, after the
/// events of every write already answered (`Store::publish_events_then`), as Redis orders them.
pub fn run_read(store: &Store, db_index: u8, f: impl FnOnce(&ReadCtx<'_>) -> Reply) -> Reply {
    let db = store.db();
    let ctx = ReadCtx::new(&db, store.keyspace(), db_index, crate::store::now_ms());
    let flags = effective(store.notify_flags.load(Ordering::Relaxed));
    if flags & KEY_MISS == 0 {
        return f(&ctx);
    }
    let misses = Misses::default();
    let reply = f(&ctx.reporting_misses(Some(&misses)));
    let events: Vec<Event> =
        misses.take().into_iter().map(|(db, key)| Event { db, event: "keymiss", key, flags }).collect();
    if !events.is_empty() {
        store.publish_events_then(&events);
    }
    reply
}

/// [`run_read`] without disk I/O, on the connection's task (issue 41): `f` runs on a context whose engine reads
/// use `ReadTier::BlockCacheOnly`. `None` when any of them needed the disk: the run's reply, its `keymiss`
/// events and its accesses are dropped, and the caller runs the command again from the start with
/// [`run_read`] on tokio's blocking pool. `Some(reply)` otherwise, its events published and its accesses
/// recorded as [`run_read`] does: once, by the run that answers.
pub fn run_read_cached(store: &Store, db_index: u8, f: impl FnOnce(&ReadCtx<'_>) -> Reply) -> Option<Reply> {
    let run = crate::store::CacheOnly::default();
    let db = store.db();
    let ctx = ReadCtx::new(&db, store.keyspace(), db_index, crate::store::now_ms()).cache_only(&run);
    let flags = effective(store.notify_flags.load(Ordering::Relaxed));
    let misses = (flags & KEY_MISS != 0).then(Misses::default);
    let reply = f(&ctx.reporting_misses(misses.as_ref()));
    if run.incomplete() {
        return None;
    }
    run.finish();
    if let Some(misses) = misses {
        let events: Vec<Event> =
            misses.take().into_iter().map(|(db, key)| Event { db, event: "keymiss", key, flags }).collect();
        if !events.is_empty() {
            store.publish_events_then(&events);
        }
    }
    Some(reply)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_and_format_round_trip_as_redis_prints_them() {
        for (given, shown) in [
            ("gKE", "gKE"),
            ("$lshzxeKE", "$lshzxeKE"),
            ("KA", "AK"),
            ("EA", "AE"),
            ("", ""),
            ("Kn", "nK"),
            ("Am", "Am"),
            ("KEA", "AKE"),
            ("tdg", "gtd"),
        ] {
            assert_eq!(format(parse(given.as_bytes()).unwrap()), shown, "{given}");
        }
        assert_eq!(parse(b"Kq"), None);
        assert_eq!(parse(b"k"), None);
    }

    #[test]
    fn no_channel_kind_means_nothing_is_recorded() {
        assert_eq!(effective(parse(b"A").unwrap()), 0);
        assert_eq!(effective(parse(b"Kg").unwrap()), KEYSPACE | GENERIC);
    }

    #[test]
    fn messages_go_to_the_configured_channels() {
        let e = Event { db: 3, event: "set", key: Bytes::from_static(b"foo"), flags: KEYSPACE | KEYEVENT | STRING };
        let m: Vec<_> = e.messages().collect();
        assert_eq!(
            m,
            vec![
                (Bytes::from_static(b"__keyspace@3__:foo"), Bytes::from_static(b"set")),
                (Bytes::from_static(b"__keyevent@3__:set"), Bytes::from_static(b"foo")),
            ]
        );
        let e = Event { flags: KEYEVENT | STRING, ..e };
        assert_eq!(e.messages().count(), 1);
    }
}
