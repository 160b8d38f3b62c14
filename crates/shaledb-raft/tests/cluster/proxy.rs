//! A fault-injecting TCP proxy for one directed link between two nodes (127.0.0.1 only).
//!
//! The sender dials the proxy instead of the receiver (`TransportConfig::dial_overrides`); the proxy forwards
//! bytes both ways. Its mode can change at any time and applies to open connections and new ones:
//!
//! - `Pass`: forward.
//! - `Delay(d)`: hold each chunk `d` before forwarding it (both directions, order kept).
//! - `Drop`: close every connection and accept-then-close new ones (the receiver looks dead).
//! - `Blackhole`: accept and keep connections open, but swallow what the sender sends: one way only, the
//!   receiver hears nothing and so never answers.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinSet;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Pass,
    Delay(Duration),
    Drop,
    Blackhole,
}

pub struct Proxy {
    addr: String,
    mode: watch::Sender<Mode>,
    task: tokio::task::JoinHandle<()>,
}

impl Proxy {
    /// A proxy on a free port of 127.0.0.1 forwarding to `target`.
    pub async fn start(target: String) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind proxy");
        let addr = listener.local_addr().expect("proxy addr").to_string();
        let (mode, watch_rx) = watch::channel(Mode::Pass);
        let task = tokio::spawn(accept_loop(listener, target, watch_rx));
        Proxy { addr, mode, task }
    }

    pub fn addr(&self) -> &str {
        &self.addr
    }

    pub fn set(&self, mode: Mode) {
        self.mode.send_replace(mode);
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn accept_loop(listener: TcpListener, target: String, mode: watch::Receiver<Mode>) {
    // Aborting this task drops the set, which aborts every connection's task and closes its sockets.
    let mut conns = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let Ok((client, _)) = accepted else { continue };
                if *mode.borrow() == Mode::Drop {
                    drop(client);
                    continue;
                }
                conns.spawn(connection(client, target.clone(), mode.clone()));
            }
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
        }
    }
}

async fn connection(client: TcpStream, target: String, mut mode: watch::Receiver<Mode>) {
    let Ok(server) = TcpStream::connect(&target).await else { return };
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let (client_r, client_w) = client.into_split();
    let (server_r, server_w) = server.into_split();
    let (fwd_mode, back_mode) = (mode.clone(), mode.clone());
    let dropped = async {
        loop {
            if *mode.borrow_and_update() == Mode::Drop {
                return;
            }
            if mode.changed().await.is_err() {
                return;
            }
        }
    };
    // Whichever ends first ends the connection: both sockets close when this function returns.
    tokio::select! {
        _ = pump(client_r, server_w, fwd_mode, true) => {}
        _ = pump(server_r, client_w, back_mode, false) => {}
        _ = dropped => {}
    }
}

async fn pump(mut from: OwnedReadHalf, mut to: OwnedWriteHalf, mode: watch::Receiver<Mode>, forward: bool) {
    let mut buf = vec![0u8; 64 << 10];
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        let current = *mode.borrow();
        match current {
            Mode::Pass => {}
            Mode::Delay(d) => tokio::time::sleep(d).await,
            Mode::Drop => return,
            Mode::Blackhole if forward => continue,
            Mode::Blackhole => {}
        }
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}
