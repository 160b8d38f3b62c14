//! Pub/Sub: SUBSCRIBE, UNSUBSCRIBE, PSUBSCRIBE, PUNSUBSCRIBE, PUBLISH, PUBSUB CHANNELS / NUMSUB / NUMPAT /
//! SHARDCHANNELS / SHARDNUMSUB / HELP, and Redis 7's shard channels: SSUBSCRIBE, SUNSUBSCRIBE, SPUBLISH.
//!
//! Shard channels are a namespace of their own: SPUBLISH reaches the SSUBSCRIBE subscribers of that name only
//! (never a pattern, never a SUBSCRIBE of the same name), as `smessage`; SSUBSCRIBE / SUNSUBSCRIBE confirm
//! with the count of the connection's shard subscriptions alone, the other commands with its channels and
//! patterns. On one node that is all there is to them (Redis Cluster routes them by slot).
//!
//! Keyspace notifications (`notify.rs`) are published here by the commit step, like PUBLISH.
//!
//! In memory, as in Redis: nothing of it touches the engine. The server-wide [`Registry`] maps each channel
//! and each pattern to its subscribers (behind `RwLock`s: PUBLISH only reads them). A subscribed connection
//! owns a [`Subscriber`]: a queue of messages not yet written, whose size in bytes is bounded
//! ([`OUTPUT_LIMIT`], Redis's `client-output-buffer-limit pubsub` hard limit, 32 MB): PUBLISH never waits for
//! a subscriber; it appends to the queue and wakes the connection, which writes the messages when it is
//! idle. A message that would take a queue past the limit is not queued; the subscriber is marked
//! overflowed and its connection is closed as soon as its task runs (as Redis closes a client past the
//! limit), so a slow subscriber never blocks PUBLISH and never holds more than the limit.
//!
//! RESP2: a subscribed connection (at least one channel or pattern) may only run (P)SUBSCRIBE,
//! (P)UNSUBSCRIBE, PING (answered `pong` and its argument as an array), QUIT and RESET; anything else gets
//! Redis's error. Messages and confirmations are arrays (`message`, `pmessage`, `subscribe` ...). RESP3
//! (HELLO 3): every command is allowed and messages and confirmations are push frames (`>`).
//!
//! Inside MULTI the subscription commands and PUBLISH are refused like every connection command (Redis
//! queues them).

use super::Spec;
use crate::resp::{Args, Reply};
use crate::server::{Session, Shared};
use bytes::{Bytes, BytesMut};
use parking_lot::{Mutex, RwLock};
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use tokio::sync::Notify;

/// Most bytes of messages queued for one subscriber (not yet written to its socket).
pub const OUTPUT_LIMIT: usize = 32 << 20;
/// Bytes counted per queued message besides its channel and payload.
const MESSAGE_OVERHEAD: usize = 64;

pub static COMMANDS: &[Spec] = &[
    cmd! { "subscribe", -2, PUBSUB | NOSCRIPT | LOADING | STALE, [0, 0, 0], Conn(not_routed), "Listens for messages published to channels." },
    cmd! { "unsubscribe", -1, PUBSUB | NOSCRIPT | LOADING | STALE, [0, 0, 0], Conn(not_routed), "Stops listening to messages posted to channels." },
    cmd! { "psubscribe", -2, PUBSUB | NOSCRIPT | LOADING | STALE, [0, 0, 0], Conn(not_routed), "Listens for messages published to channels that match one or more patterns." },
    cmd! { "punsubscribe", -1, PUBSUB | NOSCRIPT | LOADING | STALE, [0, 0, 0], Conn(not_routed), "Stops listening to messages published to channels that match one or more patterns." },
    cmd! { "publish", 3, PUBSUB | LOADING | STALE | FAST, [0, 0, 0], Conn(publish), "Posts a message to a channel." },
    cmd! { "pubsub", -2, 0, [0, 0, 0], Conn(pubsub), "A container for Pub/Sub commands." },
    cmd! { "ssubscribe", -2, PUBSUB | NOSCRIPT | LOADING | STALE, [1, -1, 1], Conn(not_routed), "Listens for messages published to shard channels." },
    cmd! { "sunsubscribe", -1, PUBSUB | NOSCRIPT | LOADING | STALE, [1, -1, 1], Conn(not_routed), "Stops listening to messages posted to shard channels." },
    cmd! { "spublish", 3, PUBSUB | LOADING | STALE | FAST, [1, 1, 1], Conn(spublish), "Post a message to a shard channel" },
];

/// A message waiting to be written to a subscriber.
struct Message {
    /// The pattern it matched (`pmessage`), or `None` (`message`, or `smessage` when `shard`).
    pattern: Option<Bytes>,
    /// Published to a shard channel (SPUBLISH).
    shard: bool,
    channel: Bytes,
    payload: Bytes,
}

/// One subscribed connection's queue of messages.
pub struct Subscriber {
    id: u64,
    queue: Mutex<Queue>,
    notify: Notify,
    overflowed: AtomicBool,
}

#[derive(Default)]
struct Queue {
    messages: VecDeque<Message>,
    bytes: usize,
}

impl Subscriber {
    /// Queues a message unless that would pass the limit (then the subscriber is overflowed). True if
    /// queued.
    fn deliver(&self, pattern: Option<&Bytes>, shard: bool, channel: &Bytes, payload: &Bytes) -> bool {
        if self.overflowed.load(Ordering::Relaxed) {
            return false;
        }
        let size = channel.len() + payload.len() + pattern.map_or(0, Bytes::len) + MESSAGE_OVERHEAD;
        {
            let mut q = self.queue.lock();
            if q.bytes + size > OUTPUT_LIMIT {
                drop(q);
                self.overflowed.store(true, Ordering::Release);
                self.notify.notify_one();
                return false;
            }
            q.bytes += size;
            q.messages.push_back(Message {
                pattern: pattern.cloned(),
                shard,
                channel: channel.clone(),
                payload: payload.clone(),
            });
        }
        self.notify.notify_one();
        true
    }
}

/// Every channel and pattern with its subscribers (server-wide).
#[derive(Default)]
pub struct Registry {
    channels: RwLock<HashMap<Bytes, Vec<Arc<Subscriber>>>>,
    patterns: RwLock<HashMap<Bytes, Vec<Arc<Subscriber>>>>,
    shard: RwLock<HashMap<Bytes, Vec<Arc<Subscriber>>>>,
}

impl Registry {
    fn add(map: &RwLock<HashMap<Bytes, Vec<Arc<Subscriber>>>>, name: &Bytes, sub: &Arc<Subscriber>) {
        map.write().entry(name.clone()).or_default().push(sub.clone());
    }

    fn remove(map: &RwLock<HashMap<Bytes, Vec<Arc<Subscriber>>>>, name: &Bytes, id: u64) {
        let mut m = map.write();
        if let Some(list) = m.get_mut(name) {
            list.retain(|s| s.id != id);
            if list.is_empty() {
                m.remove(name);
            }
        }
    }

    /// The connections subscribed to a channel, pattern or shard channel that `allowed(name, is_pattern)`
    /// refuses (ACL: a user's channel permissions shrank), among `ids`.
    pub fn refused_subscribers(&self, ids: &[u64], allowed: impl Fn(&[u8], bool) -> bool) -> Vec<u64> {
        let mut out = Vec::new();
        for (map, is_pattern) in [(&self.channels, false), (&self.shard, false), (&self.patterns, true)] {
            for (name, list) in map.read().iter() {
                for s in list {
                    if ids.contains(&s.id) && !out.contains(&s.id) && !allowed(name, is_pattern) {
                        out.push(s.id);
                    }
                }
            }
        }
        out
    }

    /// Channels with at least one subscriber (`INFO stats` pubsub_channels).
    pub fn channel_count(&self) -> usize {
        self.channels.read().len()
    }

    /// Patterns with at least one subscriber (`INFO stats` pubsub_patterns).
    pub fn pattern_count(&self) -> usize {
        self.patterns.read().len()
    }

    /// Connections subscribed to at least one channel or pattern (`INFO clients` pubsub_clients).
    pub fn subscribers(&self) -> usize {
        let mut ids = std::collections::HashSet::new();
        for map in [&self.channels, &self.patterns] {
            for list in map.read().values() {
                ids.extend(list.iter().map(|s| s.id));
            }
        }
        ids.len()
    }

    /// Delivers a message to every subscriber of `channel` and of every matching pattern; returns how many
    /// received it.
    pub fn publish(&self, channel: &Bytes, payload: &Bytes) -> i64 {
        let mut n = 0;
        if let Some(list) = self.channels.read().get(channel) {
            for s in list {
                n += s.deliver(None, false, channel, payload) as i64;
            }
        }
        for (pattern, list) in self.patterns.read().iter() {
            if super::keys::glob_match(pattern, channel) {
                for s in list {
                    n += s.deliver(Some(pattern), false, channel, payload) as i64;
                }
            }
        }
        n
    }

    /// Delivers a message to every subscriber of the shard channel `channel` (SPUBLISH); returns how many
    /// received it.
    pub fn publish_shard(&self, channel: &Bytes, payload: &Bytes) -> i64 {
        let mut n = 0;
        if let Some(list) = self.shard.read().get(channel) {
            for s in list {
                n += s.deliver(None, true, channel, payload) as i64;
            }
        }
        n
    }

    /// Shard channels with at least one subscriber (`INFO stats` pubsubshard_channels).
    pub fn shard_channel_count(&self) -> usize {
        self.shard.read().len()
    }
}

/// A connection's subscriptions (in its [`Session`]).
pub struct State {
    sub: Arc<Subscriber>,
    /// In subscription order (UNSUBSCRIBE without arguments answers in this order).
    channels: Vec<Bytes>,
    patterns: Vec<Bytes>,
    /// Shard channels (SSUBSCRIBE), in subscription order.
    shard: Vec<Bytes>,
}

impl std::fmt::Debug for State {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("pubsub::State")
            .field("channels", &self.channels.len())
            .field("patterns", &self.patterns.len())
            .field("shard", &self.shard.len())
            .finish()
    }
}

impl State {
    /// The count SUBSCRIBE, PSUBSCRIBE and their UNSUBSCRIBEs confirm with: channels and patterns.
    fn count(&self) -> i64 {
        (self.channels.len() + self.patterns.len()) as i64
    }

    /// The count SSUBSCRIBE and SUNSUBSCRIBE confirm with: shard channels alone.
    fn shard_count(&self) -> i64 {
        self.shard.len() as i64
    }
}

/// True when the session has at least one subscription of any kind (RESP2's subscribed mode).
pub fn subscribed(s: &Session) -> bool {
    s.pubsub.as_ref().is_some_and(|p| p.count() + p.shard_count() > 0)
}

/// What a subscription command works on.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Space {
    Channels,
    Patterns,
    Shard,
}

impl Space {
    fn list(self, st: &mut State) -> &mut Vec<Bytes> {
        match self {
            Space::Channels => &mut st.channels,
            Space::Patterns => &mut st.patterns,
            Space::Shard => &mut st.shard,
        }
    }

    fn map(self, r: &Registry) -> &RwLock<HashMap<Bytes, Vec<Arc<Subscriber>>>> {
        match self {
            Space::Channels => &r.channels,
            Space::Patterns => &r.patterns,
            Space::Shard => &r.shard,
        }
    }

    fn count(self, st: &State) -> i64 {
        match self {
            Space::Shard => st.shard_count(),
            _ => st.count(),
        }
    }
}

fn confirmation(kind: &'static str, name: Option<&Bytes>, count: i64) -> Reply {
    Reply::Push(vec![
        Reply::Bulk(Bytes::from_static(kind.as_bytes())),
        name.map_or(Reply::Nil, |n| Reply::Bulk(n.clone())),
        Reply::Int(count),
    ])
}

/// Runs the subscription commands (each may answer several replies) and enforces RESP2's subscribed mode.
/// `None`: the command runs as usual. Called for every checked command before MULTI queuing.
pub fn intercept(s: &mut Session, shared: &Shared, spec: &'static Spec, args: &Args) -> Option<Vec<Reply>> {
    let is_sub = matches!(
        spec.name,
        "subscribe" | "unsubscribe" | "psubscribe" | "punsubscribe" | "ssubscribe" | "sunsubscribe"
    );
    if s.proto < 3 && subscribed(s) {
        match spec.name {
            "ping" => {
                let arg = args.get(1).cloned().unwrap_or_default();
                return Some(vec![Reply::Array(vec![Reply::Bulk(Bytes::from_static(b"pong")), Reply::Bulk(arg)])]);
            }
            "quit" | "reset" => return None,
            _ if is_sub => {}
            _ => {
                return Some(vec![Reply::err(format!(
                    "Can't execute '{}': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed \
                     in this context",
                    spec.name
                ))])
            }
        }
    }
    if !is_sub || s.multi.is_some() {
        return None;
    }
    let names = &args[1..];
    let space = match spec.name {
        "psubscribe" | "punsubscribe" => Space::Patterns,
        "ssubscribe" | "sunsubscribe" => Space::Shard,
        _ => Space::Channels,
    };
    let map = space.map(&shared.pubsub);
    let mut replies = Vec::with_capacity(names.len().max(1));
    if spec.name.ends_with("unsubscribe") {
        let kind = match space {
            Space::Channels => "unsubscribe",
            Space::Patterns => "punsubscribe",
            Space::Shard => "sunsubscribe",
        };
        let Some(st) = s.pubsub.as_mut() else {
            // Never subscribed: one confirmation per name asked (count 0), or one with a nil name.
            if names.is_empty() {
                return Some(vec![confirmation(kind, None, 0)]);
            }
            return Some(names.iter().map(|n| confirmation(kind, Some(n), 0)).collect());
        };
        let targets: Vec<Bytes> = if names.is_empty() { space.list(st).clone() } else { names.to_vec() };
        if targets.is_empty() {
            let count = space.count(st);
            return Some(vec![confirmation(kind, None, count)]);
        }
        for name in &targets {
            let list = space.list(st);
            if let Some(i) = list.iter().position(|c| c == name) {
                list.remove(i);
                Registry::remove(map, name, st.sub.id);
            }
            replies.push(confirmation(kind, Some(name), space.count(st)));
        }
        return Some(replies);
    }
    let kind = match space {
        Space::Channels => "subscribe",
        Space::Patterns => "psubscribe",
        Space::Shard => "ssubscribe",
    };
    let st = s.pubsub.get_or_insert_with(|| {
        Box::new(State {
            sub: Arc::new(Subscriber {
                id: s.id,
                queue: Mutex::new(Queue::default()),
                notify: Notify::new(),
                overflowed: AtomicBool::new(false),
            }),
            channels: Vec::new(),
            patterns: Vec::new(),
            shard: Vec::new(),
        })
    });
    for name in names {
        let list = space.list(st);
        if !list.contains(name) {
            list.push(name.clone());
            Registry::add(map, name, &st.sub);
        }
        replies.push(confirmation(kind, Some(name), space.count(st)));
    }
    Some(replies)
}

/// Drops every subscription of the session (RESET, the connection's end).
pub fn unsubscribe_all(s: &mut Session, shared: &Shared) {
    if let Some(st) = s.pubsub.take() {
        for c in &st.channels {
            Registry::remove(&shared.pubsub.channels, c, st.sub.id);
        }
        for p in &st.patterns {
            Registry::remove(&shared.pubsub.patterns, p, st.sub.id);
        }
        for c in &st.shard {
            Registry::remove(&shared.pubsub.shard, c, st.sub.id);
        }
    }
}

/// The session's subscriber, if it ever subscribed (the connection waits on it for messages).
pub fn subscriber(s: &Session) -> Option<Arc<Subscriber>> {
    s.pubsub.as_ref().map(|p| p.sub.clone())
}

/// Resolves when `sub` has messages to write or overflowed; never without a subscriber.
pub async fn ready(sub: Option<Arc<Subscriber>>) {
    match sub {
        Some(s) => s.notify.notified().await,
        None => std::future::pending().await,
    }
}

/// Moves the queued messages into `out` (in the session's protocol). `false` when the subscriber overflowed
/// its limit: the connection must close.
pub fn drain(s: &Session, out: &mut BytesMut) -> bool {
    let Some(st) = s.pubsub.as_ref() else { return true };
    if st.sub.overflowed.load(Ordering::Acquire) {
        eprintln!(
            "# closing client {}: pubsub output over {OUTPUT_LIMIT} bytes (client-output-buffer-limit pubsub)",
            s.addr
        );
        return false;
    }
    let messages = {
        let mut q = st.sub.queue.lock();
        q.bytes = 0;
        std::mem::take(&mut q.messages)
    };
    for m in messages {
        let kind: &'static [u8] = if m.shard { b"smessage" } else { b"message" };
        let reply = match m.pattern {
            None => {
                Reply::Push(vec![Reply::Bulk(Bytes::from_static(kind)), Reply::Bulk(m.channel), Reply::Bulk(m.payload)])
            }
            Some(p) => Reply::Push(vec![
                Reply::Bulk(Bytes::from_static(b"pmessage")),
                Reply::Bulk(p),
                Reply::Bulk(m.channel),
                Reply::Bulk(m.payload),
            ]),
        };
        reply.encode(s.proto, out);
    }
    true
}

fn not_routed(_: &mut Session, _: &Shared, args: &Args) -> Reply {
    let name = String::from_utf8_lossy(&args[0]).to_ascii_lowercase();
    Reply::err(format!("Command '{name}' is not allowed inside MULTI"))
}

fn publish(_: &mut Session, shared: &Shared, args: &Args) -> Reply {
    // A cluster member passes the message on to every other node (issue 44); the count is this node's
    // receivers, as in Redis Cluster.
    if let Some(c) = shared.store.cluster() {
        c.forward_publish(false, &args[1], &args[2]);
    }
    Reply::Int(shared.pubsub.publish(&args[1], &args[2]))
}

fn spublish(_: &mut Session, shared: &Shared, args: &Args) -> Reply {
    if let Some(c) = shared.store.cluster() {
        c.forward_publish(true, &args[1], &args[2]);
    }
    Reply::Int(shared.pubsub.publish_shard(&args[1], &args[2]))
}

/// `CLUSTER SHALEDB-PUBLISH|SHALEDB-SPUBLISH <channel> <message>`: a message another node published, for this
/// node's subscribers only (nothing is passed on).
pub fn deliver_forwarded(shared: &Shared, shard: bool, channel: &bytes::Bytes, message: &bytes::Bytes) -> Reply {
    Reply::Int(if shard {
        shared.pubsub.publish_shard(channel, message)
    } else {
        shared.pubsub.publish(channel, message)
    })
}

const HELP: &[&str] = &[
    "PUBSUB <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "CHANNELS [<pattern>]",
    "    Return the currently active channels matching a <pattern> (default: '*').",
    "NUMPAT",
    "    Return number of subscriptions to patterns.",
    "NUMSUB [<channel> ...]",
    "    Return the number of subscribers for the specified channels, excluding",
    "    pattern subscriptions(default: no channels).",
    "SHARDCHANNELS [<pattern>]",
    "    Return the currently active shard level channels matching a <pattern> (default: '*').",
    "SHARDNUMSUB [<shardchannel> ...]",
    "    Return the number of subscribers for the specified shard level channel(s)",
    "HELP",
    "    Prints this help.",
];

fn pubsub(_: &mut Session, shared: &Shared, args: &Args) -> Reply {
    let sub = String::from_utf8_lossy(&args[1]).to_ascii_lowercase();
    match (sub.as_str(), args.len()) {
        (which @ ("channels" | "shardchannels"), 2 | 3) => {
            let map = if which == "channels" { &shared.pubsub.channels } else { &shared.pubsub.shard };
            let mut names: Vec<Bytes> = map
                .read()
                .keys()
                .filter(|c| args.get(2).is_none_or(|p| super::keys::glob_match(p, c)))
                .cloned()
                .collect();
            names.sort();
            Reply::Array(names.into_iter().map(Reply::Bulk).collect())
        }
        (which @ ("numsub" | "shardnumsub"), _) => {
            let m = if which == "numsub" { &shared.pubsub.channels } else { &shared.pubsub.shard }.read();
            let mut out = Vec::with_capacity(2 * (args.len() - 2));
            for c in &args[2..] {
                out.push(Reply::Bulk(c.clone()));
                out.push(Reply::Int(m.get(c).map_or(0, Vec::len) as i64));
            }
            Reply::Array(out)
        }
        ("numpat", 2) => Reply::Int(shared.pubsub.patterns.read().len() as i64),
        ("numpat", _) => super::sub_arity("pubsub", b"numpat"),
        ("help", 2) => super::help_reply(HELP),
        ("channels", _) | ("shardchannels", _) | ("help", _) => Reply::err(format!(
            "unknown subcommand or wrong number of arguments for '{}'. Try PUBSUB HELP.",
            String::from_utf8_lossy(&args[1])
        )),
        _ => super::unknown_subcommand("PUBSUB", &args[1]),
    }
}
