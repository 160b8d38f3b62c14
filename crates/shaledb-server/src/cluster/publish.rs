//! PUBLISH across the cluster (issue 44): a message published on one node reaches the subscribers of every
//! node, as in Redis Cluster, where a client subscribes on one node and publishes on any (redis-py's
//! `RedisCluster` sends PUBLISH to its default node, and its pub/sub connection to the node of the channel's
//! slot). `SPUBLISH` reaches the nodes of the publisher's own group (Redis Cluster's shard channels stay in their
//! shard).
//!
//! Each node keeps one connection per other node, opened on first use, on the raft runtime: the message goes as
//! `CLUSTER SHALEDB-PUBLISH <channel> <message>` (or `SHALEDB-SPUBLISH`), which the receiver delivers to its own
//! subscribers only (it forwards nothing). The connection sends `CLIENT REPLY OFF` first, so nothing is read
//! back. Delivery is at most once, as Redis's: a message for a node that cannot be reached (down, its queue of
//! 10,000 messages full) is dropped and counted.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio::sync::mpsc;

/// Messages waiting for one node, at most.
const QUEUE: usize = 10_000;
/// How long a connection attempt to a node may take; after a failure, how long the queue is dropped before the
/// next attempt.
const CONNECT_TIMEOUT: Duration = Duration::from_millis(500);
const RETRY_AFTER: Duration = Duration::from_secs(1);

/// The forwarders, one per node address (`host:port`, the client port).
pub struct Forwarders {
    handle: tokio::runtime::Handle,
    auth: Option<String>,
    queues: parking_lot::Mutex<HashMap<String, mpsc::Sender<Vec<u8>>>>,
    /// Messages dropped (a node down or its queue full).
    pub dropped: std::sync::Arc<AtomicU64>,
}

impl Forwarders {
    pub fn new(handle: tokio::runtime::Handle, auth: Option<String>) -> Forwarders {
        Forwarders {
            handle,
            auth,
            queues: parking_lot::Mutex::new(HashMap::new()),
            dropped: std::sync::Arc::new(AtomicU64::new(0)),
        }
    }

    /// Queues `frame` (one RESP command) for the node at `addr`, starting its forwarder if it has none.
    pub fn send(&self, addr: &str, frame: Vec<u8>) {
        let mut q = self.queues.lock();
        let tx = q.entry(addr.to_string()).or_insert_with(|| {
            let (tx, rx) = mpsc::channel(QUEUE);
            self.handle.spawn(forward(addr.to_string(), self.auth.clone(), rx, self.dropped.clone()));
            tx
        });
        if tx.try_send(frame).is_err() {
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// The command frame for `words`.
pub fn frame(words: &[&[u8]]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", words.len()).into_bytes();
    for w in words {
        out.extend_from_slice(format!("${}\r\n", w.len()).as_bytes());
        out.extend_from_slice(w);
        out.extend_from_slice(b"\r\n");
    }
    out
}

/// One node's forwarder: writes every queued frame on one connection, opened (again) when needed; while the node
/// cannot be reached, what is queued is dropped.
async fn forward(
    addr: String,
    auth: Option<String>,
    mut rx: mpsc::Receiver<Vec<u8>>,
    dropped: std::sync::Arc<AtomicU64>,
) {
    let mut conn: Option<TcpStream> = None;
    let mut down_until: Option<tokio::time::Instant> = None;
    while let Some(f) = rx.recv().await {
        if down_until.is_some_and(|t| tokio::time::Instant::now() < t) {
            dropped.fetch_add(1, Ordering::Relaxed);
            continue;
        }
        if conn.is_none() {
            match tokio::time::timeout(CONNECT_TIMEOUT, open(&addr, auth.as_deref())).await {
                Ok(Ok(s)) => conn = Some(s),
                _ => {
                    down_until = Some(tokio::time::Instant::now() + RETRY_AFTER);
                    dropped.fetch_add(1, Ordering::Relaxed);
                    continue;
                }
            }
        }
        let s = conn.as_mut().expect("connected above");
        if s.write_all(&f).await.is_err() {
            conn = None;
            dropped.fetch_add(1, Ordering::Relaxed);
        }
    }
}

async fn open(addr: &str, auth: Option<&str>) -> std::io::Result<TcpStream> {
    let mut s = TcpStream::connect(addr).await?;
    s.set_nodelay(true)?;
    let mut hello = Vec::new();
    if let Some(p) = auth {
        hello.extend(frame(&[b"AUTH", p.as_bytes()]));
    }
    hello.extend(frame(&[b"CLIENT", b"REPLY", b"OFF"]));
    s.write_all(&hello).await?;
    Ok(s)
}
