//! One client connection on tokio, and a join of many connections' futures on one thread.
//!
//! A simulated client is one TCP connection: it writes a batch of requests (its pipeline) from a reused
//! buffer with one write, then reads until every reply of the batch has been parsed. Replies are parsed in
//! place in the read buffer ([`super::proto::parse_reply`]).
//!
//! Each client thread runs its connections as futures of one task on a current-thread runtime, joined by
//! [`join_all`]: a connection's waker queues only that connection, so a wake-up polls the connections that
//! have something to do, not all of them. That keeps the futures borrowing the benchmark's shared state
//! (no `'static` tasks), as the engine benchmarks' scoped threads do.

use super::proto::{parse_reply, push_command, Reply};
use bytes::{Buf, BytesMut};
use parking_lot::Mutex;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Why a connection stopped.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The socket failed.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// The server closed the connection.
    #[error("the server closed the connection")]
    Closed,
    /// A reply broke the protocol.
    #[error(transparent)]
    Protocol(#[from] super::proto::ProtocolError),
    /// Connecting or authenticating did not finish in time.
    #[error("timed out after {0:?}")]
    Timeout(Duration),
    /// The server refused the connection's setup (AUTH).
    #[error("{0}")]
    Refused(String),
}

/// One connection with its buffers.
#[derive(Debug)]
pub struct Conn {
    stream: TcpStream,
    /// Replies read and not yet consumed.
    pub rbuf: BytesMut,
    /// Requests to send.
    pub wbuf: Vec<u8>,
}

/// Time allowed for connecting and AUTH.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

impl Conn {
    /// Connects, and authenticates with `password` when given.
    pub async fn connect(addr: SocketAddr, password: Option<&str>) -> Result<Conn, ClientError> {
        let setup = async {
            let stream = TcpStream::connect(addr).await?;
            stream.set_nodelay(true)?;
            let mut c = Conn { stream, rbuf: BytesMut::with_capacity(16 << 10), wbuf: Vec::with_capacity(4 << 10) };
            if let Some(pw) = password {
                push_command(&mut c.wbuf, &[b"AUTH", pw.as_bytes()]);
                c.flush().await?;
                c.expect_ok("AUTH").await?;
            }
            Ok(c)
        };
        match tokio::time::timeout(CONNECT_TIMEOUT, setup).await {
            Ok(r) => r,
            Err(_) => Err(ClientError::Timeout(CONNECT_TIMEOUT)),
        }
    }

    async fn expect_ok(&mut self, what: &str) -> Result<(), ClientError> {
        loop {
            let res = match parse_reply(&self.rbuf)? {
                Some((Reply::Simple(b"OK"), n)) => Ok(n),
                Some((Reply::Error(e), _)) => {
                    Err(ClientError::Refused(format!("{what}: {}", String::from_utf8_lossy(e))))
                }
                Some((other, _)) => Err(ClientError::Refused(format!("{what}: unexpected reply {other:?}"))),
                None => {
                    self.read_more().await?;
                    continue;
                }
            };
            let n = res?;
            self.rbuf.advance(n);
            return Ok(());
        }
    }

    /// Writes everything in the write buffer and clears it.
    pub async fn flush(&mut self) -> Result<(), ClientError> {
        self.stream.write_all(&self.wbuf).await?;
        self.wbuf.clear();
        Ok(())
    }

    /// Reads what the socket has into the read buffer (at least one byte).
    pub async fn read_more(&mut self) -> Result<(), ClientError> {
        if self.rbuf.capacity() - self.rbuf.len() < 4096 {
            self.rbuf.reserve(16 << 10);
        }
        match self.stream.read_buf(&mut self.rbuf).await? {
            0 => Err(ClientError::Closed),
            _ => Ok(()),
        }
    }
}

/// One command on a blocking connection of its own (setup queries such as `CLUSTER NODES`): the reply's text
/// (a bulk or simple string), or why not.
pub fn query_blocking(addr: SocketAddr, password: Option<&str>, args: &[&[u8]]) -> Result<String, String> {
    query_blocking_with(addr, password, args, |reply| {
        Ok(match reply {
            Reply::Bulk(b) | Reply::Simple(b) => String::from_utf8_lossy(b).into_owned(),
            other => format!("{other:?}"),
        })
    })
}

/// One command on a blocking connection of its own: what `read` makes of its reply (an error reply is an
/// `Err` with its text).
pub fn query_blocking_with<T>(
    addr: SocketAddr,
    password: Option<&str>,
    args: &[&[u8]],
    read: impl FnOnce(&Reply<'_>) -> Result<T, String>,
) -> Result<T, String> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect_timeout(&addr, CONNECT_TIMEOUT).map_err(|e| e.to_string())?;
    s.set_read_timeout(Some(CONNECT_TIMEOUT)).map_err(|e| e.to_string())?;
    let mut req = Vec::new();
    if let Some(pw) = password {
        push_command(&mut req, &[b"AUTH", pw.as_bytes()]);
    }
    push_command(&mut req, args);
    s.write_all(&req).map_err(|e| e.to_string())?;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 16 << 10];
    let mut skip = usize::from(password.is_some());
    loop {
        while let Some((reply, n)) = parse_reply(&buf).map_err(|e| e.to_string())? {
            if let Reply::Error(e) = reply {
                return Err(String::from_utf8_lossy(e).into_owned());
            }
            if skip == 0 {
                return read(&reply);
            }
            skip -= 1;
            buf.drain(..n);
        }
        if buf.len() > 64 << 20 {
            return Err("a reply over 64 MiB".into());
        }
        let n = s.read(&mut chunk).map_err(|e| e.to_string())?;
        if n == 0 {
            return Err("the server closed the connection".into());
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

struct ReadyQueue {
    ready: Mutex<Vec<usize>>,
    parent: Mutex<Option<Waker>>,
}

struct ChildWaker {
    idx: usize,
    queue: Arc<ReadyQueue>,
}

impl Wake for ChildWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.queue.ready.lock().push(self.idx);
        if let Some(w) = self.queue.parent.lock().as_ref() {
            w.wake_by_ref();
        }
    }
}

/// Runs every future to completion concurrently within the calling task; returns their outputs in order.
pub async fn join_all<F: Future>(futures: Vec<F>) -> Vec<F::Output> {
    let n = futures.len();
    let queue = Arc::new(ReadyQueue { ready: Mutex::new((0..n).collect()), parent: Mutex::new(None) });
    let wakers: Vec<Waker> =
        (0..n).map(|idx| Waker::from(Arc::new(ChildWaker { idx, queue: queue.clone() }))).collect();
    let mut pending: Vec<Option<Pin<Box<F>>>> = futures.into_iter().map(|f| Some(Box::pin(f))).collect();
    let mut outputs: Vec<Option<F::Output>> = (0..n).map(|_| None).collect();
    let mut left = n;
    let mut batch = Vec::new();
    std::future::poll_fn(move |cx| {
        {
            let mut parent = queue.parent.lock();
            if !parent.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
                *parent = Some(cx.waker().clone());
            }
        }
        std::mem::swap(&mut batch, &mut *queue.ready.lock());
        for idx in batch.drain(..) {
            let (Some(slot), Some(waker)) = (pending.get_mut(idx), wakers.get(idx)) else { continue };
            let Some(fut) = slot.as_mut() else { continue };
            if let Poll::Ready(out) = fut.as_mut().poll(&mut Context::from_waker(waker)) {
                *slot = None;
                if let Some(o) = outputs.get_mut(idx) {
                    *o = Some(out);
                }
                left -= 1;
            }
        }
        if left == 0 {
            return Poll::Ready(outputs.iter_mut().filter_map(Option::take).collect());
        }
        // Futures woken while this round ran are polled after the runtime had its turn.
        if !queue.ready.lock().is_empty() {
            cx.waker().wake_by_ref();
        }
        Poll::Pending
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn join_all_runs_everything_concurrently_in_order() {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let counter = std::cell::Cell::new(0u32);
        let out = rt.block_on(join_all(
            (0..50u64)
                .map(|i| {
                    let counter = &counter;
                    async move {
                        // Later futures sleep less: they finish first, outputs stay in input order.
                        tokio::time::sleep(Duration::from_millis(50 - i)).await;
                        counter.set(counter.get() + 1);
                        i * 2
                    }
                })
                .collect(),
        ));
        assert_eq!(out, (0..50).map(|i| i * 2).collect::<Vec<_>>());
        assert_eq!(counter.get(), 50);
        let empty: Vec<std::future::Ready<u8>> = Vec::new();
        assert!(rt.block_on(join_all(empty)).is_empty());
    }
}
