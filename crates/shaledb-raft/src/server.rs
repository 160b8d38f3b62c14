//! The receiving side of the transport: a TCP listener that hands each request frame to `openraft::Raft`.
//!
//! Each connection is served by a task of its own, one request at a time, in order: read a frame, check it is
//! a request meant for this node, call `Raft::append_entries`, `Raft::vote` or `Raft::install_snapshot` (openraft
//! 0.9's chunked snapshot receive: with `SnapshotData = Cursor<Vec<u8>>` its default `full_snapshot` sends
//! `InstallSnapshotRequest` chunks, which `Raft::install_snapshot` reassembles and installs on the last one), and
//! write the reply. Any frame that fails its checks (length over the limit, version, kind, checksum, payload) ends
//! the connection: nothing in it can be trusted after a bad frame. A request for another node id gets a `refused`
//! frame and the connection closes, so a sender that dialled a stale address backs off instead of feeding the wrong
//! node.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use openraft::error::{InstallSnapshotError, RaftError};
use openraft::raft::{AppendEntriesRequest, InstallSnapshotRequest, VoteRequest};
use openraft::Raft;
use serde::Serialize;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::network::TransportConfig;
use crate::wire::{self, Kind, WireError};
use crate::{NodeId, TypeConfig};

/// Counters of the listening side, for metrics.
#[derive(Debug, Default)]
pub struct ListenerStats {
    /// Connections accepted.
    pub accepted: AtomicU64,
    /// Requests served.
    pub requests: AtomicU64,
    /// Connections closed because a frame failed its checks (or was not a request).
    pub bad_frames: AtomicU64,
    /// Requests refused because they named another node id.
    pub misdirected: AtomicU64,
}

/// The running listener. Dropping it without [`Listener::shutdown`] stops it too (its tasks are aborted).
pub struct Listener {
    stop: watch::Sender<bool>,
    task: Option<tokio::task::JoinHandle<()>>,
    stats: Arc<ListenerStats>,
}

impl Listener {
    /// Serves `socket` for node `id`'s `raft` until shut down.
    pub fn spawn(socket: TcpListener, id: NodeId, raft: Raft<TypeConfig>, config: TransportConfig) -> Listener {
        let (stop, stopped) = watch::channel(false);
        let stats = Arc::new(ListenerStats::default());
        let task = tokio::spawn(accept_loop(socket, id, raft, config, stopped, stats.clone()));
        Listener { stop, task: Some(task), stats }
    }

    /// The listener's counters.
    pub fn stats(&self) -> &ListenerStats {
        &self.stats
    }

    /// Closes the listening socket and every connection, and waits for the tasks to end.
    pub async fn shutdown(&mut self) {
        let _ = self.stop.send(true);
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

async fn accept_loop(
    socket: TcpListener,
    id: NodeId,
    raft: Raft<TypeConfig>,
    config: TransportConfig,
    mut stopped: watch::Receiver<bool>,
    stats: Arc<ListenerStats>,
) {
    // Dropped at the end of this function: aborts every connection task, closing its socket.
    let mut conns = JoinSet::new();
    loop {
        tokio::select! {
            _ = stopped.changed() => break,
            accepted = socket.accept() => {
                let Ok((stream, _peer)) = accepted else {
                    // EMFILE and the like: wait a moment rather than spin, then keep serving.
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                    continue;
                };
                stats.accepted.fetch_add(1, Ordering::Relaxed);
                let _ = stream.set_nodelay(true);
                conns.spawn(serve(stream, id, raft.clone(), config.clone(), stats.clone()));
            }
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
        }
    }
    drop(socket);
    conns.shutdown().await;
}

fn reply<T: Serialize>(kind: Kind, value: &T, limit: usize) -> Result<Vec<u8>, WireError> {
    wire::encode(kind, value, limit)
}

async fn serve(
    mut stream: TcpStream,
    id: NodeId,
    raft: Raft<TypeConfig>,
    config: TransportConfig,
    stats: Arc<ListenerStats>,
) {
    let limit = config.max_frame;
    loop {
        let (kind, payload) =
            match wire::read_frame(&mut stream, limit, Some(config.idle_timeout), config.io_timeout).await {
                Ok(f) => f,
                Err(WireError::Closed | WireError::Timeout(_)) => return,
                Err(WireError::Io(_)) => return,
                Err(_) => {
                    stats.bad_frames.fetch_add(1, Ordering::Relaxed);
                    return;
                }
            };
        let out = match handle(kind, &payload, id, &raft, limit).await {
            Ok(out) => out,
            Err(Handled::Misdirected(frame)) => {
                stats.misdirected.fetch_add(1, Ordering::Relaxed);
                let _ = wire::write_frame(&mut stream, &frame, config.io_timeout).await;
                return;
            }
            Err(Handled::Bad) => {
                stats.bad_frames.fetch_add(1, Ordering::Relaxed);
                return;
            }
        };
        stats.requests.fetch_add(1, Ordering::Relaxed);
        if wire::write_frame(&mut stream, &out, config.io_timeout).await.is_err() {
            return;
        }
    }
}

enum Handled {
    /// A request for another node: the `refused` frame to send before closing.
    Misdirected(Vec<u8>),
    /// Not a request, or a payload that does not decode (or a reply that cannot be encoded).
    Bad,
}

fn addressed<T: serde::de::DeserializeOwned>(
    kind: Kind,
    payload: &[u8],
    id: NodeId,
    limit: usize,
) -> Result<T, Handled> {
    let (to, req) = wire::decode_payload::<(NodeId, T)>(kind, payload).map_err(|_| Handled::Bad)?;
    if to != id {
        let why = format!("this is node {id}, not node {to}");
        return Err(reply(Kind::Refused, &why, limit).map_or(Handled::Bad, Handled::Misdirected));
    }
    Ok(req)
}

async fn handle(
    kind: Kind,
    payload: &[u8],
    id: NodeId,
    raft: &Raft<TypeConfig>,
    limit: usize,
) -> Result<Vec<u8>, Handled> {
    let out = match kind {
        Kind::AppendEntries => {
            let req: AppendEntriesRequest<TypeConfig> = addressed(kind, payload, id, limit)?;
            let res: Result<_, RaftError<NodeId>> = raft.append_entries(req).await;
            reply(kind.reply(), &res, limit)
        }
        Kind::Vote => {
            let req: VoteRequest<NodeId> = addressed(kind, payload, id, limit)?;
            let res: Result<_, RaftError<NodeId>> = raft.vote(req).await;
            reply(kind.reply(), &res, limit)
        }
        Kind::InstallSnapshot => {
            let req: InstallSnapshotRequest<TypeConfig> = addressed(kind, payload, id, limit)?;
            let res: Result<_, RaftError<NodeId, InstallSnapshotError>> = raft.install_snapshot(req).await;
            reply(kind.reply(), &res, limit)
        }
        Kind::AppendEntriesReply | Kind::VoteReply | Kind::InstallSnapshotReply | Kind::Refused => {
            return Err(Handled::Bad)
        }
    };
    out.map_err(|_| Handled::Bad)
}
