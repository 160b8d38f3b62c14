//! Client-side caching (`CLIENT TRACKING`), as Redis 7.0 has it.
//!
//! - The table ([`Tracking`], in the [`Store`]) maps each key a tracking client read (default mode) to the
//!   ids of those clients, and each BCAST prefix to its clients. Keys are names only: a key read in one
//!   database is invalidated by a write of that name in any database, as in Redis.
//! - Reads: a connection with tracking on registers the keys of each read-only command it runs *before* the
//!   command reads ([`before_command`]), so a write that commits after the read always finds them. A
//!   connection with tracking off pays one relaxed atomic load per command and takes no lock.
//! - Writes: the commit step records the name of every meta key a group writes (and the key arguments of
//!   a command that wrote only member records, [`after_write`]) while some client tracks anything
//!   ([`Tracking::active`], read once per group); when no client does, writes record nothing. Once the
//!   group is durable, and before its writers are answered, [`deliver`] turns those names into messages:
//!   one per key to every default-mode client that read it (the key then leaves the table), one per BCAST
//!   prefix with every key of the group under it, and a null invalidation for FLUSHDB and FLUSHALL.
//! - Delivery: each connection has an [`Inbox`] (in its `ClientEntry`); messages go to the tracking client's
//!   own inbox or to its REDIRECT target's. The connection writes them (in its own protocol) before the next
//!   reply it writes and whenever it is idle ([`drain`]), so a client that sees a write acknowledged sees the
//!   invalidation before any later reply; a client's own write's invalidation follows that write's reply.
//!
//! NB: a key read while tracking is being switched on, by a read concurrent with a group already running,
//! may miss that group's invalidation (the group decided at its start that nobody tracks anything).
//!
//! [`Store`]: crate::commit::Store

use crate::commands::{flags, Spec};
use crate::resp::{Args, Reply};
use crate::server::{Session, Shared};
use crate::store::WriteCtx;
use bytes::{Bytes, BytesMut};
use parking_lot::Mutex;
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

/// The Pub/Sub channel a RESP2 REDIRECT target receives invalidations on.
pub const CHANNEL: &[u8] = b"__redis__:invalidate";

/// Most bytes of messages an inbox holds unwritten before its connection is closed (a client that stops
/// reading cannot make the server buffer without bound).
const INBOX_LIMIT: usize = 32 << 20;

/// `tracking-table-max-keys`'s default, as Redis's.
const DEFAULT_MAX_KEYS: u64 = 1_000_000;

/// One message waiting for a connection.
#[derive(Debug, Clone, PartialEq)]
pub enum Message {
    /// These keys changed (`None`: every key, FLUSHDB and FLUSHALL). `redirected`: sent on behalf of
    /// another client (a RESP2 connection then receives it as a Pub/Sub message when it is subscribed).
    Invalidate { keys: Option<Vec<Bytes>>, redirected: bool },
    /// The REDIRECT target of this client is gone (its id).
    RedirBroken(u64),
}

impl Message {
    fn size(&self) -> usize {
        match self {
            Message::Invalidate { keys: Some(k), .. } => 32 + k.iter().map(|k| k.len() + 16).sum::<usize>(),
            _ => 32,
        }
    }
}

#[derive(Debug, Default)]
struct Queue {
    messages: Vec<Message>,
    bytes: usize,
    overflowed: bool,
}

/// A connection's invalidation messages not yet written.
#[derive(Debug, Default)]
pub struct Inbox {
    queue: Mutex<Queue>,
    /// Set with every push, cleared when drained: the check before each command, without a lock.
    pending: AtomicBool,
    /// Wakes the connection's wait for input (shared with its `ClientEntry`, which wakes it on kill and
    /// shutdown too).
    pub wake: Arc<crate::wakeup::Wakeup>,
    /// The connection ended: a client redirecting here has a broken redirection.
    closed: AtomicBool,
}

impl Inbox {
    fn push(&self, m: Message) {
        if self.closed.load(Ordering::Acquire) {
            return;
        }
        {
            let mut q = self.queue.lock();
            if q.overflowed {
                return;
            }
            q.bytes += m.size();
            if q.bytes > INBOX_LIMIT {
                q.overflowed = true;
                q.messages.clear();
            } else {
                q.messages.push(m);
            }
        }
        self.pending.store(true, Ordering::Release);
        self.wake.wake();
    }

    fn take(&self) -> (Vec<Message>, bool) {
        self.pending.store(false, Ordering::Release);
        let mut q = self.queue.lock();
        q.bytes = 0;
        (std::mem::take(&mut q.messages), q.overflowed)
    }

    /// True once the connection ended.
    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }
}

/// A connection's tracking state as the connection sees it (in its `ClientEntry`).
#[derive(Debug, Default)]
pub struct ClientTracking {
    /// Where this connection's messages (its own, or other clients' redirected here) wait.
    pub inbox: Arc<Inbox>,
    /// Tracking is on (the only thing a connection with tracking off ever reads).
    on: AtomicBool,
    /// Default mode (neither BCAST nor OPTIN/OPTOUT suppressing it): reads are registered.
    remembers: AtomicBool,
    optin: AtomicBool,
    optout: AtomicBool,
    /// `CLIENT CACHING yes|no` was given for the next command (or transaction).
    caching: AtomicBool,
    /// The REDIRECT client id (0: none), for `CLIENT LIST`.
    redirect: AtomicU64,
}

impl ClientTracking {
    /// True while `CLIENT TRACKING on` is in effect.
    pub fn is_on(&self) -> bool {
        self.on.load(Ordering::Relaxed)
    }

    /// The flags `CLIENT LIST` shows for tracking: `t` (on) and `B` (BCAST).
    pub fn list_flags(&self) -> &'static str {
        match (self.is_on(), self.remembers.load(Ordering::Relaxed)) {
            (false, _) => "",
            (true, true) => "t",
            (true, false) => "tB",
        }
    }

    /// `redir=` of `CLIENT LIST`: the REDIRECT id, 0 without one, -1 when tracking is off.
    pub fn list_redirect(&self) -> i64 {
        if self.is_on() {
            self.redirect.load(Ordering::Relaxed) as i64
        } else {
            -1
        }
    }
}

/// The options of `CLIENT TRACKING on`.
#[derive(Debug, Default, Clone)]
pub struct Options {
    pub redirect: u64,
    pub bcast: bool,
    pub optin: bool,
    pub optout: bool,
    pub noloop: bool,
    pub prefixes: Vec<Bytes>,
}

/// A tracking client, in the table.
#[derive(Debug)]
struct Tracker {
    own: Arc<Inbox>,
    /// The REDIRECT target's inbox (`opts.redirect != 0`).
    target: Option<Arc<Inbox>>,
    opts: Options,
    broken: bool,
}

#[derive(Debug, Default)]
struct Table {
    /// Key -> ids of the default-mode clients that read it.
    keys: HashMap<Bytes, Vec<u64>>,
    /// Client ids over every key of `keys` (`tracking_total_items`).
    items: u64,
    /// BCAST prefix -> its clients.
    prefixes: BTreeMap<Bytes, Vec<u64>>,
    clients: HashMap<u64, Tracker>,
}

/// What the commit step saw written while some client tracked something.
#[derive(Debug, Clone)]
pub enum Touch {
    /// `key` was written by client `client` (0: the server itself, as the expiry sweep); `seq` is the
    /// writer's meta-write count at that point (FLUSHDB drops the touches it made itself).
    Key { seq: u64, client: u64, key: Bytes },
    /// A database was flushed by client `client`.
    Flush { client: u64 },
}

/// The tracking table and the tracking clients.
#[derive(Debug)]
pub struct Tracking {
    /// Clients with tracking on (`tracking_clients`; writes record nothing while it is 0).
    clients_on: AtomicUsize,
    /// `tracking-table-max-keys` (0: no limit).
    max_keys: AtomicU64,
    table: Mutex<Table>,
}

impl Default for Tracking {
    fn default() -> Self {
        Tracking {
            clients_on: AtomicUsize::new(0),
            max_keys: AtomicU64::new(DEFAULT_MAX_KEYS),
            table: Mutex::default(),
        }
    }
}

/// `INFO`'s tracking figures.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub struct Figures {
    pub keys: usize,
    pub items: u64,
    pub prefixes: usize,
    pub clients: usize,
}

/// `CLIENT TRACKINGINFO` and `CLIENT GETREDIR` of one client.
#[derive(Debug, Default, Clone)]
pub struct Info {
    pub on: bool,
    pub opts: Options,
    pub caching: bool,
    pub broken: bool,
}

fn overlaps(a: &[u8], b: &[u8]) -> bool {
    let n = a.len().min(b.len());
    a[..n] == b[..n]
}

impl Tracking {
    /// True when some client tracks anything (the commit step then records written keys).
    pub fn active(&self) -> bool {
        self.clients_on.load(Ordering::Acquire) > 0
    }

    /// `CLIENT TRACKING on ...` for client `id`: the checks that depend on its current mode, then the new
    /// mode. `target`: the REDIRECT client's inbox. The error is Redis's text.
    pub fn enable(
        &self,
        id: u64,
        me: &ClientTracking,
        target: Option<Arc<Inbox>>,
        opts: Options,
    ) -> Result<(), String> {
        let mut t = self.table.lock();
        let t = &mut *t;
        let current = t.clients.get(&id);
        if let Some(cur) = current {
            if cur.opts.bcast != opts.bcast {
                return Err("You can't switch BCAST mode on/off before disabling tracking for this client, and \
                            then re-enabling it with a different mode."
                    .into());
            }
        }
        if opts.bcast && (opts.optin || opts.optout) {
            return Err("OPTIN and OPTOUT are not compatible with BCAST".into());
        }
        if opts.optin && opts.optout {
            return Err("You can't specify both OPTIN mode and OPTOUT mode".into());
        }
        if let Some(cur) = current {
            if (opts.optin && cur.opts.optout) || (opts.optout && cur.opts.optin) {
                return Err("You can't switch OPTIN/OPTOUT mode before disabling tracking for this client, and \
                            then re-enabling it with a different mode."
                    .into());
            }
        }
        let existing: Vec<Bytes> = current.map(|c| c.opts.prefixes.clone()).unwrap_or_default();
        if opts.bcast {
            for (i, p) in opts.prefixes.iter().enumerate() {
                if let Some(old) = existing.iter().find(|old| overlaps(old, p)) {
                    return Err(format!(
                        "Prefix '{}' overlaps with an existing prefix '{}'. Prefixes for a single client must not \
                         overlap.",
                        String::from_utf8_lossy(p),
                        String::from_utf8_lossy(old)
                    ));
                }
                if let Some(other) = opts.prefixes[i + 1..].iter().find(|o| overlaps(p, o)) {
                    return Err(format!(
                        "Prefix '{}' overlaps with another provided prefix '{}'. Prefixes for a single client must \
                         not overlap.",
                        String::from_utf8_lossy(p),
                        String::from_utf8_lossy(other)
                    ));
                }
            }
        }
        let mut prefixes = existing;
        if opts.bcast {
            let new: Vec<Bytes> = if opts.prefixes.is_empty() { vec![Bytes::new()] } else { opts.prefixes.clone() };
            for p in new {
                let ids = t.prefixes.entry(p.clone()).or_default();
                if !ids.contains(&id) {
                    ids.push(id);
                    prefixes.push(p);
                }
            }
        }
        if t.clients.remove(&id).is_none() {
            self.clients_on.fetch_add(1, Ordering::AcqRel);
        }
        let opts = Options { prefixes, ..opts };
        me.remembers.store(!opts.bcast, Ordering::Relaxed);
        me.optin.store(opts.optin, Ordering::Relaxed);
        me.optout.store(opts.optout, Ordering::Relaxed);
        me.redirect.store(opts.redirect, Ordering::Relaxed);
        me.on.store(true, Ordering::Release);
        t.clients.insert(id, Tracker { own: me.inbox.clone(), target, opts, broken: false });
        Ok(())
    }

    /// `CLIENT TRACKING off` (and RESET, and the connection's end). The keys it read stay in the table
    /// until written or evicted, as in Redis (a client that switches tracking on again is told of them),
    /// except that the table is emptied when the last tracking client stops.
    pub fn disable(&self, id: u64, me: &ClientTracking) {
        me.on.store(false, Ordering::Release);
        me.remembers.store(false, Ordering::Relaxed);
        me.optin.store(false, Ordering::Relaxed);
        me.optout.store(false, Ordering::Relaxed);
        me.caching.store(false, Ordering::Relaxed);
        let mut t = self.table.lock();
        let Some(c) = t.clients.remove(&id) else { return };
        if self.clients_on.fetch_sub(1, Ordering::AcqRel) == 1 {
            // Nobody can be told of those keys any more, and writes stop looking for them: forget them.
            t.keys.clear();
            t.items = 0;
        }
        for p in &c.opts.prefixes {
            if let Some(ids) = t.prefixes.get_mut(p) {
                ids.retain(|x| *x != id);
                if ids.is_empty() {
                    t.prefixes.remove(p);
                }
            }
        }
    }

    /// The mode of client `id` (`CLIENT TRACKINGINFO`, `CLIENT GETREDIR`).
    pub fn info(&self, id: u64, me: &ClientTracking) -> Info {
        let t = self.table.lock();
        match t.clients.get(&id) {
            Some(c) => {
                Info { on: true, opts: c.opts.clone(), caching: me.caching.load(Ordering::Relaxed), broken: c.broken }
            }
            None => Info::default(),
        }
    }

    /// `INFO`'s figures.
    pub fn figures(&self) -> Figures {
        let t = self.table.lock();
        Figures {
            keys: t.keys.len(),
            items: t.items,
            prefixes: t.prefixes.len(),
            clients: self.clients_on.load(Ordering::Relaxed),
        }
    }

    /// `CONFIG SET tracking-table-max-keys`: applied at once (keys over the limit are invalidated).
    pub fn set_max_keys(&self, n: u64) {
        self.max_keys.store(n, Ordering::Relaxed);
        let mut t = self.table.lock();
        self.enforce_limit(&mut t);
    }

    /// Client `id` read `keys`.
    fn remember<'k>(&self, id: u64, keys: impl Iterator<Item = &'k Bytes>) {
        let mut t = self.table.lock();
        for k in keys {
            let ids = t.keys.entry(k.clone()).or_default();
            if !ids.contains(&id) {
                ids.push(id);
                t.items += 1;
            }
        }
        self.enforce_limit(&mut t);
    }

    /// Drops keys from the table (each invalidated for its clients, as if written by nobody) until it holds
    /// at most `tracking-table-max-keys`.
    fn enforce_limit(&self, t: &mut Table) {
        let max = self.max_keys.load(Ordering::Relaxed) as usize;
        if max == 0 || t.keys.len() <= max {
            return;
        }
        let excess = t.keys.len() - max;
        let victims: Vec<Bytes> = t.keys.keys().take(excess).cloned().collect();
        for k in victims {
            invalidate_key(t, &k, 0);
        }
    }

    /// Turns a durable group's touches into messages (the commit step, before the group's writers are
    /// answered).
    pub fn invalidate(&self, touches: Vec<Touch>) {
        let mut t = self.table.lock();
        let t = &mut *t;
        // BCAST: prefix -> key -> its last writer.
        let mut bcast: BTreeMap<Bytes, BTreeMap<Bytes, u64>> = BTreeMap::new();
        for touch in touches {
            match touch {
                Touch::Key { client, key, .. } => {
                    for p in t.prefixes.keys() {
                        if key.starts_with(p) {
                            bcast.entry(p.clone()).or_default().insert(key.clone(), client);
                        }
                    }
                    invalidate_key(t, &key, client);
                }
                Touch::Flush { .. } => {
                    for c in t.clients.values_mut() {
                        send(c, Message::Invalidate { keys: None, redirected: false });
                    }
                    t.keys.clear();
                    t.items = 0;
                }
            }
        }
        for (prefix, keys) in bcast {
            let Some(ids) = t.prefixes.get(&prefix) else { continue };
            for id in ids.clone() {
                let Some(c) = t.clients.get_mut(&id) else { continue };
                let list: Vec<Bytes> = keys
                    .iter()
                    .filter(|(_, writer)| !(c.opts.noloop && **writer == id))
                    .map(|(k, _)| k.clone())
                    .collect();
                if !list.is_empty() {
                    send(c, Message::Invalidate { keys: Some(list), redirected: false });
                }
            }
        }
    }
}

/// Sends the invalidation of `key` (written by client `writer`) to the default-mode clients that read it,
/// and drops it from the table.
fn invalidate_key(t: &mut Table, key: &[u8], writer: u64) {
    let Some(ids) = t.keys.remove(key) else { return };
    t.items -= ids.len() as u64;
    for id in ids {
        let Some(c) = t.clients.get_mut(&id) else { continue };
        if c.opts.bcast || (c.opts.noloop && id == writer) {
            continue;
        }
        send(c, Message::Invalidate { keys: Some(vec![Bytes::copy_from_slice(key)]), redirected: false });
    }
}

/// Puts `m` in the inbox of `c`, or of its REDIRECT target; a target that is gone breaks the redirection.
fn send(c: &mut Tracker, m: Message) {
    if c.opts.redirect == 0 {
        c.own.push(m);
        return;
    }
    match &c.target {
        Some(target) if !target.is_closed() => {
            let m = match m {
                Message::Invalidate { keys, .. } => Message::Invalidate { keys, redirected: true },
                other => other,
            };
            target.push(m);
        }
        _ => {
            c.broken = true;
            c.own.push(Message::RedirBroken(c.opts.redirect));
        }
    }
}

// ---------------------------------------------------------------------------------------------------------
// The connection's side

/// Before a command runs on the connection (or is sent to the commit step): a tracking client in default
/// mode registers the keys the command reads (`queued`: the commands of the EXEC about to run). Also clears
/// `CLIENT CACHING` after the command it applied to. Costs one relaxed load when tracking is off.
pub fn before_command(s: &Session, shared: &Shared, spec: &Spec, args: &Args, queued: Option<&[Args]>) {
    let me = &s.entry.tracking;
    if !me.on.load(Ordering::Relaxed) {
        return;
    }
    let caching = me.caching.load(Ordering::Relaxed);
    // OPTIN: only after CACHING yes; OPTOUT: unless after CACHING no.
    let (optin, optout) = (me.optin.load(Ordering::Relaxed), me.optout.load(Ordering::Relaxed));
    let wanted = me.remembers.load(Ordering::Relaxed) && if caching { !optout } else { !optin };
    if wanted {
        let mut keys: Vec<Bytes> = Vec::new();
        match queued {
            Some(cmds) => {
                for cmd in cmds {
                    if let Some(spec) = cmd.first().and_then(|n| crate::commands::lookup(n)) {
                        read_keys(spec, cmd, &mut keys);
                    }
                }
            }
            None => read_keys(spec, args, &mut keys),
        }
        if !keys.is_empty() {
            shared.store.tracking.remember(s.id, keys.iter());
        }
    }
    // As Redis: CACHING applies to the next command, or to the whole transaction that follows.
    if spec.name != "client" && spec.name != "multi" {
        me.caching.store(false, Ordering::Relaxed);
    }
}

/// The keys of a read-only command (not the scripts' `_RO` variants, whose keys are tracked only when the
/// script reads, nor Pub/Sub's shard channels).
fn read_keys(spec: &Spec, args: &Args, out: &mut Vec<Bytes>) {
    if spec.flags & flags::READONLY == 0 || spec.flags & flags::PUBSUB != 0 {
        return;
    }
    if matches!(spec.name, "eval_ro" | "evalsha_ro" | "fcall_ro") {
        return;
    }
    if let Ok(found) = crate::commands::server_cmds::keyspecs::find(spec, args) {
        out.extend(found.into_iter().filter_map(|(i, _)| args.get(i).cloned()));
    }
}

/// Writes the connection's waiting messages into `out`, in its protocol: RESP3 push messages, or Pub/Sub
/// messages on [`CHANNEL`] for a RESP2 connection subscribed to anything that receives them by REDIRECT;
/// nothing for a RESP2 connection otherwise (as Redis). `false` when the inbox overflowed: the connection
/// must close.
pub fn drain(s: &Session, out: &mut BytesMut) -> bool {
    let inbox = &s.entry.tracking.inbox;
    if !inbox.pending.load(Ordering::Acquire) {
        return true;
    }
    let (messages, overflowed) = inbox.take();
    if overflowed {
        eprintln!("# closing client {}: invalidation messages over {INBOX_LIMIT} bytes unread", s.addr);
        return false;
    }
    let subscribed = crate::commands::pubsub::subscribed(s);
    for m in messages {
        let reply = match m {
            Message::Invalidate { keys, redirected } => {
                let payload = keys.map_or(Reply::Nil, |k| Reply::Array(k.into_iter().map(Reply::Bulk).collect()));
                if s.proto >= 3 {
                    Reply::Push(vec![Reply::Bulk(Bytes::from_static(b"invalidate")), payload])
                } else if redirected && subscribed {
                    Reply::Push(vec![
                        Reply::Bulk(Bytes::from_static(b"message")),
                        Reply::Bulk(Bytes::from_static(CHANNEL)),
                        payload,
                    ])
                } else {
                    continue;
                }
            }
            Message::RedirBroken(id) if s.proto >= 3 => {
                Reply::Push(vec![Reply::Bulk(Bytes::from_static(b"tracking-redir-broken")), Reply::Int(id as i64)])
            }
            Message::RedirBroken(_) => continue,
        };
        reply.encode(s.proto, out);
    }
    true
}

/// The connection ended: its tracking is off and clients redirecting to it see a broken redirection.
pub fn disconnect(s: &Session, shared: &Shared) {
    let me = &s.entry.tracking;
    me.inbox.closed.store(true, Ordering::Release);
    if me.is_on() {
        shared.store.tracking.disable(s.id, me);
    }
}

/// `CLIENT CACHING yes|no` (the caller checked the mode).
pub fn set_caching(me: &ClientTracking) {
    me.caching.store(true, Ordering::Relaxed);
}

/// True when client tracking is in OPTIN (`Some(true)`) or OPTOUT (`Some(false)`) mode.
pub fn opt_mode(me: &ClientTracking) -> Option<bool> {
    if !me.is_on() {
        return None;
    }
    if me.optin.load(Ordering::Relaxed) {
        Some(true)
    } else if me.optout.load(Ordering::Relaxed) {
        Some(false)
    } else {
        None
    }
}

// ---------------------------------------------------------------------------------------------------------
// The commit step's side

/// After every write command in the commit step (with WATCH's hook, `multi::after_write`): a flush
/// replaces the touches it made by one null invalidation; a command that wrote member records only touches
/// its key arguments.
pub fn after_write(ctx: &mut WriteCtx<'_>, spec: &Spec, args: &Args, before: (u64, u64)) {
    if spec.name == "flushdb" || spec.name == "flushall" {
        // Even when nobody tracks: the table is emptied (keys read before tracking was switched off).
        ctx.touched.retain(|t| !matches!(t, Touch::Key { seq, .. } if *seq > before.1));
        let client = ctx.client;
        ctx.touched.push(Touch::Flush { client });
        return;
    }
    if !ctx.tracking {
        return;
    }
    let (writes, meta_writes) = ctx.write_counts();
    if writes == before.0 || meta_writes != before.1 {
        return;
    }
    if let Ok(found) = crate::commands::server_cmds::keyspecs::find(spec, args) {
        for (i, _) in found {
            if let Some(k) = args.get(i) {
                let (seq, client) = (meta_writes, ctx.client);
                ctx.touched.push(Touch::Key { seq, client, key: k.clone() });
            }
        }
    }
}

/// After a top-level command ran in the commit step: a script (EVAL, FCALL and their `_RO` variants) of a
/// tracking client that called a read-only command tracks the keys it declared, as Redis does.
pub fn after_command(store: &crate::commit::Store, ctx: &mut WriteCtx<'_>, spec: &Spec, args: &Args) {
    let read = std::mem::take(&mut ctx.script_read);
    if !read || !ctx.tracking || ctx.client == 0 {
        return;
    }
    if !matches!(spec.name, "eval" | "evalsha" | "eval_ro" | "evalsha_ro" | "fcall" | "fcall_ro") {
        return;
    }
    let t = &store.tracking;
    let wanted = {
        let table = t.table.lock();
        table.clients.get(&ctx.client).is_some_and(|c| !c.opts.bcast && !c.opts.optin)
    };
    if wanted {
        if let Ok(found) = crate::commands::server_cmds::keyspecs::find(spec, args) {
            let keys: Vec<Bytes> = found.into_iter().filter_map(|(i, _)| args.get(i).cloned()).collect();
            t.remember(ctx.client, keys.iter());
        }
    }
}

/// Once a group is durable (the commit step, before its writers are answered): its touches become
/// messages.
pub fn deliver(store: &crate::commit::Store, ctx: &mut WriteCtx<'_>) {
    if !ctx.touched.is_empty() {
        store.tracking.invalidate(std::mem::take(&mut ctx.touched));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client() -> ClientTracking {
        ClientTracking::default()
    }

    fn key(seq: u64, client: u64, k: &str) -> Touch {
        Touch::Key { seq, client, key: Bytes::copy_from_slice(k.as_bytes()) }
    }

    fn taken(c: &ClientTracking) -> Vec<Message> {
        c.inbox.take().0
    }

    fn keys(v: &[&str]) -> Option<Vec<Bytes>> {
        Some(v.iter().map(|k| Bytes::copy_from_slice(k.as_bytes())).collect())
    }

    #[test]
    fn default_mode_sends_once_per_read_and_noloop_skips_own_writes() {
        let t = Tracking::default();
        let (a, b) = (client(), client());
        t.enable(1, &a, None, Options::default()).unwrap();
        t.enable(2, &b, None, Options { noloop: true, ..Options::default() }).unwrap();
        assert!(t.active());
        let k = Bytes::from_static(b"k");
        t.remember(1, [&k].into_iter());
        t.remember(2, [&k].into_iter());
        t.remember(2, [&k].into_iter());
        assert_eq!(t.figures(), Figures { keys: 1, items: 2, prefixes: 0, clients: 2 });
        t.invalidate(vec![key(1, 2, "k"), key(2, 2, "k")]);
        assert_eq!(taken(&a), vec![Message::Invalidate { keys: keys(&["k"]), redirected: false }]);
        assert!(taken(&b).is_empty());
        assert_eq!(t.figures().keys, 0);
        t.disable(1, &a);
        t.disable(2, &b);
        assert!(!t.active());
    }

    #[test]
    fn bcast_groups_keys_per_prefix_and_checks_overlaps() {
        let t = Tracking::default();
        let a = client();
        let opts = |p: &[&str]| Options {
            bcast: true,
            prefixes: p.iter().map(|s| Bytes::copy_from_slice(s.as_bytes())).collect(),
            ..Options::default()
        };
        let e = t.enable(1, &a, None, opts(&["FOOBAR", "FOO"])).unwrap_err();
        assert!(e.starts_with("Prefix 'FOOBAR' overlaps with another provided prefix 'FOO'"), "{e}");
        t.enable(1, &a, None, opts(&["a:", "b:"])).unwrap();
        let e = t.enable(1, &a, None, opts(&["a"])).unwrap_err();
        assert!(e.starts_with("Prefix 'a' overlaps with an existing prefix 'a:'"), "{e}");
        let e = t.enable(1, &a, None, Options::default()).unwrap_err();
        assert!(e.starts_with("You can't switch BCAST mode"), "{e}");
        t.invalidate(vec![key(1, 9, "b:2"), key(2, 9, "a:1"), key(3, 9, "c:1"), key(4, 9, "b:1")]);
        assert_eq!(
            taken(&a),
            vec![
                Message::Invalidate { keys: keys(&["a:1"]), redirected: false },
                Message::Invalidate { keys: keys(&["b:1", "b:2"]), redirected: false },
            ]
        );
        assert_eq!(t.figures().prefixes, 2);
        t.disable(1, &a);
        assert_eq!(t.figures().prefixes, 0);
    }

    #[test]
    fn redirect_to_a_closed_inbox_is_broken_and_flush_reaches_everyone() {
        let t = Tracking::default();
        let (a, target) = (client(), client());
        t.enable(1, &a, Some(target.inbox.clone()), Options { redirect: 7, ..Options::default() }).unwrap();
        let k = Bytes::from_static(b"k");
        t.remember(1, [&k].into_iter());
        t.invalidate(vec![Touch::Flush { client: 0 }]);
        assert_eq!(taken(&target), vec![Message::Invalidate { keys: None, redirected: true }]);
        assert_eq!(t.figures().keys, 0);
        target.inbox.closed.store(true, Ordering::Release);
        t.remember(1, [&k].into_iter());
        t.invalidate(vec![key(1, 0, "k")]);
        assert_eq!(taken(&a), vec![Message::RedirBroken(7)]);
        assert!(t.info(1, &a).broken);
    }

    #[test]
    fn the_table_limit_evicts_with_an_invalidation() {
        let t = Tracking::default();
        let a = client();
        t.enable(1, &a, None, Options { noloop: true, ..Options::default() }).unwrap();
        let ks: Vec<Bytes> = (0..10).map(|i| Bytes::from(format!("k{i}"))).collect();
        t.remember(1, ks.iter());
        t.set_max_keys(3);
        assert_eq!(t.figures().keys, 3);
        assert_eq!(taken(&a).len(), 7);
        t.set_max_keys(0);
        t.remember(1, ks.iter());
        assert_eq!(t.figures().keys, 10);
    }
}
