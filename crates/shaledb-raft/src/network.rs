//! The sending side of the transport: openraft's `RaftNetworkFactory` and `RaftNetwork` over TCP.
//!
//! One connection per peer is kept in a pool shared by every client openraft makes for that peer (its
//! replication stream, its snapshot stream, the vote and read-index RPCs each get their own client). An RPC takes
//! the connection out of the pool, writes one request frame, reads one reply frame and puts the connection back.
//! If the RPC fails, or openraft drops its future (its own timeout, a replication stream stopped), the connection
//! is not returned: it is closed, so a reply meant for a cancelled request can never be read as the answer to a
//! later one. Two RPCs to the same peer at once each use a connection; only one goes back to the pool.
//!
//! How failures reach openraft (its replication loop decides what to do by the variant):
//!
//! | failure | `RPCError` | openraft then |
//! |---|---|---|
//! | connect refused, unreachable, or not within `connect_timeout`; peer answers `refused` | `Unreachable` | backs off ([`TransportConfig::backoff`]) before the next RPC to that peer |
//! | an established connection broke, or a frame failed its checks | `Network` | retries at its next tick, on a new connection |
//! | no whole reply within `io_timeout` (or openraft's longer limit for the RPC) | `Timeout` | retries at its next tick |
//! | an append too large for one frame | `PayloadTooLarge` (half the entries) | splits the append and resends at once |
//! | a vote or snapshot chunk too large (a misconfiguration) | `Network` | retries |
//! | the peer's raft refused (`RaftError`) | `RemoteError` | as openraft decides for the error |
//!
//! A pooled connection may have been closed by the peer since its last use (a restart): when such a connection
//! fails before any byte of the reply arrived, the request is sent once more on a new connection. Raft messages may
//! be delivered twice; a snapshot chunk is not resent this way, openraft's chunk loop retries it.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use openraft::error::{
    InstallSnapshotError, NetworkError, PayloadTooLarge, RPCError, RaftError, RemoteError, Timeout, Unreachable,
};
use openraft::network::{Backoff, RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse, VoteRequest,
    VoteResponse,
};
use openraft::{BasicNode, RPCTypes};
use parking_lot::Mutex;
use serde::de::DeserializeOwned;
use serde::Serialize;
use tokio::net::TcpStream;

use crate::wire::{self, Kind, WireError};
use crate::{NodeId, TypeConfig};

/// Timeouts and limits of the node-to-node transport.
#[derive(Clone, Debug)]
pub struct TransportConfig {
    /// How long a TCP connect may take before the peer counts as unreachable. Default 500 ms: on a LAN a
    /// connect takes well under a millisecond, so a longer wait only delays the backoff.
    pub connect_timeout: Duration,
    /// How long writing a frame, or reading a reply (or the rest of a frame once its first byte came), may take.
    /// Default 5 s: it covers a follower's fsync of a large append and a snapshot install; openraft's own
    /// per-RPC timeouts (the heartbeat interval for appends) usually end an RPC sooner.
    pub io_timeout: Duration,
    /// How long the listener keeps a connection that sends nothing. Default 10 min; the senders reconnect.
    pub idle_timeout: Duration,
    /// The largest frame payload sent or accepted. Default [`wire::MAX_FRAME`] (64 MiB + 1 MiB): one log entry
    /// at the log's limit fits. Both ends must agree, or appends near the limit fail.
    pub max_frame: usize,
    /// The wait before trying an unreachable peer again: starts here and doubles up to `max_backoff`. Default
    /// 100 ms.
    pub backoff: Duration,
    /// The longest wait between tries of an unreachable peer. Default 1 s: a restarted node is found again
    /// within a second.
    pub max_backoff: Duration,
    /// Dial these addresses instead of the membership's `BasicNode::addr` for these peers (an address seen from
    /// this node: a NAT, a tunnel, a fault-injecting proxy in tests). Default empty.
    pub dial_overrides: BTreeMap<NodeId, String>,
}

impl Default for TransportConfig {
    fn default() -> Self {
        TransportConfig {
            connect_timeout: Duration::from_millis(500),
            io_timeout: Duration::from_secs(5),
            idle_timeout: Duration::from_secs(600),
            max_frame: wire::MAX_FRAME,
            backoff: Duration::from_millis(100),
            max_backoff: Duration::from_secs(1),
            dial_overrides: BTreeMap::new(),
        }
    }
}

#[derive(Default)]
struct Slot {
    /// The address `conn` is connected to; a membership change may move a peer.
    addr: String,
    conn: Option<TcpStream>,
}

struct Shared {
    id: NodeId,
    config: TransportConfig,
    pool: Mutex<HashMap<NodeId, Slot>>,
}

/// openraft's network factory for one node: makes a [`PeerClient`] per peer, all sharing one connection pool.
#[derive(Clone)]
pub struct Network {
    shared: Arc<Shared>,
}

impl Network {
    /// The transport of node `id`.
    pub fn new(id: NodeId, config: TransportConfig) -> Network {
        Network { shared: Arc::new(Shared { id, config, pool: Mutex::new(HashMap::new()) }) }
    }

    /// Closes every pooled connection (RPCs in flight finish on theirs and then close them).
    pub fn close_all(&self) {
        self.shared.pool.lock().clear();
    }
}

impl RaftNetworkFactory<TypeConfig> for Network {
    type Network = PeerClient;

    async fn new_client(&mut self, target: NodeId, node: &BasicNode) -> PeerClient {
        let addr = match self.shared.config.dial_overrides.get(&target) {
            Some(a) => a.clone(),
            // A server's member address is "host:port@busport": the transport dials the bus port.
            None => crate::MemberAddr::parse(&node.addr).map_or_else(|_| node.addr.clone(), |m| m.bus),
        };
        PeerClient { shared: self.shared.clone(), target, node: node.clone(), addr }
    }
}

/// openraft's network to one peer.
pub struct PeerClient {
    shared: Arc<Shared>,
    target: NodeId,
    node: BasicNode,
    addr: String,
}

/// How one exchange failed, before it is mapped to openraft's error.
enum Failure {
    /// No connection could be made, or the peer refused to serve it.
    Unreachable(String),
    /// The connection or a frame failed; `before_reply` when no byte of the reply arrived.
    Broken { error: WireError, before_reply: bool },
    /// No reply in time.
    Timeout,
}

fn io_err(what: String) -> std::io::Error {
    std::io::Error::other(what)
}

impl PeerClient {
    fn take(&self) -> Option<TcpStream> {
        let mut pool = self.shared.pool.lock();
        let slot = pool.entry(self.target).or_default();
        if slot.addr != self.addr {
            slot.addr = self.addr.clone();
            slot.conn = None;
        }
        slot.conn.take()
    }

    fn give_back(&self, conn: TcpStream) {
        let mut pool = self.shared.pool.lock();
        let slot = pool.entry(self.target).or_default();
        if slot.addr == self.addr && slot.conn.is_none() {
            slot.conn = Some(conn);
        }
    }

    async fn connect(&self) -> Result<TcpStream, Failure> {
        let limit = self.shared.config.connect_timeout;
        match tokio::time::timeout(limit, TcpStream::connect(&self.addr)).await {
            Ok(Ok(s)) => {
                // Small frames (votes, heartbeats) must not wait for Nagle's delayed ACK.
                let _ = s.set_nodelay(true);
                Ok(s)
            }
            Ok(Err(e)) => {
                Err(Failure::Unreachable(format!("connecting to node {} at {}: {e}", self.target, self.addr)))
            }
            Err(_) => Err(Failure::Unreachable(format!(
                "connecting to node {} at {}: no answer within {limit:?}",
                self.target, self.addr
            ))),
        }
    }

    /// One request and its reply on `conn`.
    async fn exchange(
        &self,
        conn: &mut TcpStream,
        frame: &[u8],
        expect: Kind,
        reply_wait: Duration,
    ) -> Result<Vec<u8>, Failure> {
        let cfg = &self.shared.config;
        if let Err(error) = wire::write_frame(conn, frame, cfg.io_timeout).await {
            return Err(match error {
                WireError::Timeout(_) => Failure::Timeout,
                error => Failure::Broken { error, before_reply: true },
            });
        }
        match wire::read_frame(conn, cfg.max_frame, Some(reply_wait), cfg.io_timeout).await {
            Ok((kind, payload)) if kind == expect => Ok(payload),
            Ok((Kind::Refused, payload)) => {
                let reason = wire::decode_payload::<String>(Kind::Refused, &payload)
                    .unwrap_or_else(|e| format!("(unreadable reason: {e})"));
                Err(Failure::Unreachable(format!("node {} at {} refused: {reason}", self.target, self.addr)))
            }
            Ok((found, _)) => Err(Failure::Broken {
                error: WireError::UnexpectedKind { found, expected: expect },
                before_reply: false,
            }),
            Err(WireError::Timeout(_)) => Err(Failure::Timeout),
            Err(WireError::Closed) => Err(Failure::Broken { error: WireError::Closed, before_reply: true }),
            Err(WireError::Io(e))
                if matches!(e.kind(), std::io::ErrorKind::ConnectionReset | std::io::ErrorKind::BrokenPipe) =>
            {
                Err(Failure::Broken { error: WireError::Io(e), before_reply: true })
            }
            Err(error) => Err(Failure::Broken { error, before_reply: false }),
        }
    }

    /// Sends `frame` and returns the reply's payload, on the pooled connection or a new one.
    async fn round_trip(
        &self,
        frame: &[u8],
        expect: Kind,
        resend: bool,
        reply_wait: Duration,
    ) -> Result<Vec<u8>, Failure> {
        if let Some(mut conn) = self.take() {
            match self.exchange(&mut conn, frame, expect, reply_wait).await {
                Ok(reply) => {
                    self.give_back(conn);
                    return Ok(reply);
                }
                Err(Failure::Broken { before_reply: true, .. }) if resend => {}
                Err(other) => return Err(other),
            }
        }
        let mut conn = self.connect().await?;
        let reply = self.exchange(&mut conn, frame, expect, reply_wait).await?;
        self.give_back(conn);
        Ok(reply)
    }

    async fn call<Req, Resp, E>(
        &self,
        kind: Kind,
        action: RPCTypes,
        req: &Req,
        option: &RPCOption,
        too_large: impl FnOnce() -> Option<PayloadTooLarge>,
    ) -> Result<Resp, RPCError<NodeId, BasicNode, RaftError<NodeId, E>>>
    where
        Req: Serialize,
        Resp: DeserializeOwned,
        E: std::error::Error + DeserializeOwned,
    {
        let frame = match wire::encode(kind, &(self.target, req), self.shared.config.max_frame) {
            Ok(f) => f,
            Err(e @ WireError::TooLarge { .. }) => {
                return Err(match too_large() {
                    Some(hint) => RPCError::PayloadTooLarge(hint),
                    None => RPCError::Network(NetworkError::new(&e)),
                })
            }
            Err(e) => return Err(RPCError::Network(NetworkError::new(&e))),
        };
        let resend = kind != Kind::InstallSnapshot;
        // The reply may take as long as openraft allows the RPC (a snapshot's last chunk installs before it is
        // answered), and at least `io_timeout`; openraft cancels the RPC at its own limit anyway.
        let reply_wait = self.shared.config.io_timeout.max(option.hard_ttl());
        let payload = match self.round_trip(&frame, kind.reply(), resend, reply_wait).await {
            Ok(p) => p,
            Err(Failure::Unreachable(why)) => return Err(RPCError::Unreachable(Unreachable::new(&io_err(why)))),
            Err(Failure::Broken { error, .. }) => return Err(RPCError::Network(NetworkError::new(&error))),
            Err(Failure::Timeout) => {
                return Err(RPCError::Timeout(Timeout {
                    action,
                    id: self.shared.id,
                    target: self.target,
                    timeout: reply_wait,
                }))
            }
        };
        match wire::decode_payload::<Result<Resp, RaftError<NodeId, E>>>(kind.reply(), &payload) {
            Ok(Ok(resp)) => Ok(resp),
            Ok(Err(remote)) => {
                Err(RPCError::RemoteError(RemoteError::new_with_node(self.target, self.node.clone(), remote)))
            }
            Err(e) => {
                // The frame passed its checksum but not its decoding: this connection cannot be trusted either.
                self.shared.pool.lock().remove(&self.target);
                Err(RPCError::Network(NetworkError::new(&e)))
            }
        }
    }
}

impl RaftNetwork<TypeConfig> for PeerClient {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<AppendEntriesResponse<NodeId>, RPCError<NodeId, BasicNode, RaftError<NodeId>>> {
        let entries = rpc.entries.len() as u64;
        self.call(Kind::AppendEntries, RPCTypes::AppendEntries, &rpc, &option, || {
            // Half as many entries fit better; one entry always fits (the log refuses larger ones).
            (entries > 1).then(|| PayloadTooLarge::new_entries_hint(entries / 2))
        })
        .await
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<InstallSnapshotResponse<NodeId>, RPCError<NodeId, BasicNode, RaftError<NodeId, InstallSnapshotError>>>
    {
        // A chunk is at most `Config::snapshot_max_chunk_size` (3 MiB by default), far below the frame limit; a
        // configuration that makes it larger fails here as a network error (openraft 0.9 keeps the byte hint
        // of `PayloadTooLarge` to itself).
        self.call(Kind::InstallSnapshot, RPCTypes::InstallSnapshot, &rpc, &option, || None).await
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<NodeId>,
        option: RPCOption,
    ) -> Result<VoteResponse<NodeId>, RPCError<NodeId, BasicNode, RaftError<NodeId>>> {
        self.call(Kind::Vote, RPCTypes::Vote, &rpc, &option, || None).await
    }

    fn backoff(&self) -> Backoff {
        let (first, max) = (self.shared.config.backoff, self.shared.config.max_backoff);
        Backoff::new(std::iter::successors(Some(first), move |d| Some((*d * 2).min(max))))
    }
}
