//! A fault-injecting TCP proxy for one directed link between two nodes (127.0.0.1 only).
//!
//! The sender dials the proxy instead of the receiver (`TransportConfig::dial_overrides`); the proxy forwards
//! bytes both ways. Its mode can change at any time and applies to open connections and new ones.
//!
//! The forward direction (sender to receiver) is frame-aware: it reads whole request frames of the transport
//! (`version kind length payload crc`, docs/format/raft-wire.md) and decides per frame. Replies flow back as
//! bytes. Byte-level modes:
//!
//! - `Pass`: forward.
//! - `Delay(d)`: hold each request frame and each reply chunk `d` before forwarding it (order kept).
//! - `Drop`: close every connection and accept-then-close new ones (the receiver looks dead).
//! - `Blackhole`: accept and keep connections open, but swallow what the sender sends: one way only, the
//!   receiver hears nothing and so never answers.
//!
//! Message-level modes: what a lossy network and a sender that reconnects after a timeout give. TCP itself never
//! loses, duplicates or reorders within a connection, but a request sent, timed out and sent again on a new
//! connection, or an old connection's segments arriving late, do all three between connections. The choice per
//! frame is drawn from a seeded generator, so a run is reproducible up to thread timing.
//!
//! - `LoseFrames { percent }`: a request frame is swallowed with that probability; the sender's RPC times out
//!   and its transport must recover on a new connection.
//! - `Duplicate { percent, after }`: every request frame is forwarded; with that probability it is also
//!   delivered again `after` later, on a separate connection the proxy opens to the receiver, whose reply is
//!   read and discarded (a stale copy arriving again).
//! - `Reorder { percent, newer, max_hold }`: a request frame is, with that probability, held back (the sender
//!   gets no reply on its connection and times out) and delivered late on a separate connection, once `newer`
//!   later frames have passed through this proxy (or after `max_hold`): an old AppendEntries or Vote arriving
//!   after newer ones.
//!
//! - `Mixed { percent }`: a request frame is, with that probability, lost, duplicated or reordered (one of the
//!   three drawn per frame, with fixed parameters).
//!
//! Late deliveries are bounded (connect, write and reply each within `LATE_IO`) and go on after the mode
//! changes back to `Pass`, as old packets would after a network heals.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinSet;

/// Bounds each step of a late delivery (connect, write, reply).
const LATE_IO: Duration = Duration::from_secs(3);
/// Frame header: version, kind, length (wire.rs).
const HEADER: usize = 6;
/// A frame longer than this is not a frame of ours: the rest of the connection is forwarded as bytes.
const MAX_FRAME: usize = 80 << 20;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Pass,
    Delay(Duration),
    Drop,
    Blackhole,
    LoseFrames { percent: u8 },
    Duplicate { percent: u8, after: Duration },
    Reorder { percent: u8, newer: u64, max_hold: Duration },
    Mixed { percent: u8 },
}

/// What `Mixed` does to a frame it picks: one of the three faults, drawn per frame.
const MIXED: [Mode; 3] = [
    Mode::LoseFrames { percent: 100 },
    Mode::Duplicate { percent: 100, after: Duration::from_millis(25) },
    Mode::Reorder { percent: 100, newer: 2, max_hold: Duration::from_millis(300) },
];

/// What a proxy did to request frames, for the test to check that its faults really happened.
#[derive(Debug, Default)]
pub struct Stats {
    /// Request frames forwarded on their own connection.
    pub forwarded: AtomicU64,
    /// Request frames swallowed (`LoseFrames`).
    pub lost: AtomicU64,
    /// Extra copies delivered on a separate connection (`Duplicate`), counted when the receiver answered.
    pub duplicated: AtomicU64,
    /// Held frames delivered late on a separate connection (`Reorder`), counted when the receiver answered.
    pub reordered: AtomicU64,
}

impl Stats {
    pub fn snapshot(&self) -> [u64; 4] {
        [&self.forwarded, &self.lost, &self.duplicated, &self.reordered].map(|c| c.load(Ordering::Relaxed))
    }
}

/// SplitMix64: a small seeded generator (the tests carry no `rand` dependency).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn percent(&mut self, p: u8) -> bool {
        self.next() % 100 < u64::from(p)
    }
}

/// What every connection of one proxy shares.
struct Shared {
    /// Where to forward: set at start or later ([`Proxy::set_target`]).
    target: std::sync::Mutex<String>,
    rng: std::sync::Mutex<Rng>,
    stats: Arc<Stats>,
}

pub struct Proxy {
    addr: String,
    mode: watch::Sender<Mode>,
    stats: Arc<Stats>,
    shared: Arc<Shared>,
    task: tokio::task::JoinHandle<()>,
}

impl Proxy {
    /// A proxy on a free port of 127.0.0.1 forwarding to `target` (may be set later: until then connections are
    /// closed at once); `seed` drives its message-level faults.
    pub async fn start(target: String, seed: u64) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind proxy");
        let addr = listener.local_addr().expect("proxy addr").to_string();
        let (mode, watch_rx) = watch::channel(Mode::Pass);
        let stats = Arc::new(Stats::default());
        let shared = Arc::new(Shared {
            target: std::sync::Mutex::new(target),
            rng: std::sync::Mutex::new(Rng(seed)),
            stats: stats.clone(),
        });
        let task = tokio::spawn(accept_loop(listener, shared.clone(), watch_rx));
        Proxy { addr, mode, stats, shared, task }
    }

    /// Forwards new connections (and late deliveries) to `target` from now on.
    pub fn set_target(&self, target: &str) {
        *self.shared.target.lock().expect("target") = target.to_string();
    }

    pub fn addr(&self) -> &str {
        &self.addr
    }

    pub fn set(&self, mode: Mode) {
        self.mode.send_replace(mode);
    }

    pub fn stats(&self) -> &Stats {
        &self.stats
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn accept_loop(listener: TcpListener, shared: Arc<Shared>, mode: watch::Receiver<Mode>) {
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
                conns.spawn(connection(client, shared.clone(), mode.clone()));
            }
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
        }
    }
}

async fn connection(client: TcpStream, shared: Arc<Shared>, mut mode: watch::Receiver<Mode>) {
    let target = shared.target.lock().expect("target").clone();
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
        _ = forward_frames(client_r, server_w, fwd_mode, shared) => {}
        _ = pump_back(server_r, client_w, back_mode) => {}
        _ = dropped => {}
    }
}

/// Reads one whole frame; `None` at the end of the stream or on anything that is not a frame of ours.
async fn read_frame(from: &mut OwnedReadHalf) -> Option<Vec<u8>> {
    let mut frame = vec![0u8; HEADER];
    from.read_exact(&mut frame).await.ok()?;
    let length = u32::from_le_bytes([frame[2], frame[3], frame[4], frame[5]]) as usize;
    if length > MAX_FRAME {
        return None;
    }
    frame.resize(HEADER + length + 4, 0);
    from.read_exact(&mut frame[HEADER..]).await.ok()?;
    Some(frame)
}

/// Sender to receiver, one request frame at a time, as the mode says.
async fn forward_frames(
    mut from: OwnedReadHalf,
    mut to: OwnedWriteHalf,
    mode: watch::Receiver<Mode>,
    shared: Arc<Shared>,
) {
    while let Some(frame) = read_frame(&mut from).await {
        let mut current = *mode.borrow();
        let draw = |p: u8| shared.rng.lock().expect("rng").percent(p);
        if let Mode::Mixed { percent } = current {
            current = if draw(percent) {
                let pick = shared.rng.lock().expect("rng").next() % MIXED.len() as u64;
                MIXED[pick as usize]
            } else {
                Mode::Pass
            };
        }
        match current {
            Mode::Pass | Mode::Mixed { .. } => {}
            Mode::Delay(d) => tokio::time::sleep(d).await,
            Mode::Drop => return,
            Mode::Blackhole => continue,
            Mode::LoseFrames { percent } => {
                if draw(percent) {
                    shared.stats.lost.fetch_add(1, Ordering::Relaxed);
                    continue;
                }
            }
            Mode::Duplicate { percent, after } => {
                if draw(percent) {
                    let (shared, copy) = (shared.clone(), frame.clone());
                    tokio::spawn(async move {
                        tokio::time::sleep(after).await;
                        if deliver_late(&shared, &copy).await {
                            shared.stats.duplicated.fetch_add(1, Ordering::Relaxed);
                        }
                    });
                }
            }
            Mode::Reorder { percent, newer, max_hold } => {
                if draw(percent) {
                    let shared = shared.clone();
                    tokio::spawn(async move {
                        let held_at = shared.stats.forwarded.load(Ordering::Relaxed);
                        let since = Instant::now();
                        while shared.stats.forwarded.load(Ordering::Relaxed) < held_at + newer
                            && since.elapsed() < max_hold
                        {
                            tokio::time::sleep(Duration::from_millis(5)).await;
                        }
                        if deliver_late(&shared, &frame).await {
                            shared.stats.reordered.fetch_add(1, Ordering::Relaxed);
                        }
                    });
                    continue;
                }
            }
        }
        if to.write_all(&frame).await.is_err() {
            return;
        }
        shared.stats.forwarded.fetch_add(1, Ordering::Relaxed);
    }
    // Not a frame of ours (or the end): forward whatever else comes as bytes.
    let _ = tokio::io::copy(&mut from, &mut to).await;
}

/// Delivers `frame` on a connection of its own and reads (then drops) the reply. True when a reply came.
async fn deliver_late(shared: &Shared, frame: &[u8]) -> bool {
    let target = shared.target.lock().expect("target").clone();
    let Ok(Ok(mut s)) = tokio::time::timeout(LATE_IO, TcpStream::connect(&target)).await else { return false };
    let _ = s.set_nodelay(true);
    if !matches!(tokio::time::timeout(LATE_IO, s.write_all(frame)).await, Ok(Ok(()))) {
        return false;
    }
    let mut header = [0u8; HEADER];
    matches!(tokio::time::timeout(LATE_IO, s.read_exact(&mut header)).await, Ok(Ok(_)))
}

/// Receiver to sender: replies as bytes.
async fn pump_back(mut from: OwnedReadHalf, mut to: OwnedWriteHalf, mode: watch::Receiver<Mode>) {
    let mut buf = vec![0u8; 64 << 10];
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        let current = *mode.borrow();
        match current {
            Mode::Delay(d) => tokio::time::sleep(d).await,
            Mode::Drop => return,
            _ => {}
        }
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}
