//! MONITOR: every command the server runs, streamed to the clients that asked, one status line each in
//! Redis's format: `+<unix seconds>.<microseconds> [<db> <client address>] "arg" "arg" ...`.
//!
//! A command is shown once it ran (a transaction's commands when EXEC runs them, between `multi` and
//! `exec`); administrative commands (CONFIG, SHUTDOWN ...) are not shown, as in Redis, and the secrets of
//! AUTH, HELLO ... AUTH and MIGRATE ... AUTH/AUTH2 are shown as `(redacted)`. A command that fails its checks
//! (unknown, wrong arity, refused inside MULTI) is not shown.
//!
//! Each monitoring client has a queue of lines bounded in bytes ([`OUTPUT_LIMIT`]); the command's task
//! appends and wakes the client's task, which writes them when it is idle. A client whose queue is full is
//! closed (as Redis closes a client past its output limit), so a slow monitor never slows commands down.
//! When nobody monitors, a command pays one atomic load.

use crate::resp::{Args, Reply};
use crate::server::{Session, Shared};
use bytes::{Bytes, BytesMut};
use parking_lot::{Mutex, RwLock};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use tokio::sync::Notify;

/// Most bytes of lines queued for one monitoring client (Redis counts a monitor as a replica:
/// `client-output-buffer-limit replica` is 256 MB hard; this is smaller, a monitor is a human's tool).
pub const OUTPUT_LIMIT: usize = 64 << 20;

/// One monitoring client's queue.
pub struct Feed {
    id: u64,
    queue: Mutex<(VecDeque<Bytes>, usize)>,
    notify: Notify,
    overflowed: AtomicBool,
}

impl std::fmt::Debug for Feed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("monitor::Feed").field("id", &self.id).finish()
    }
}

impl Feed {
    fn push(&self, line: &Bytes) {
        if self.overflowed.load(Ordering::Relaxed) {
            return;
        }
        {
            let mut q = self.queue.lock();
            if q.1 + line.len() > OUTPUT_LIMIT {
                drop(q);
                self.overflowed.store(true, Ordering::Release);
                self.notify.notify_one();
                return;
            }
            q.1 += line.len();
            q.0.push_back(line.clone());
        }
        self.notify.notify_one();
    }
}

/// The monitoring clients.
#[derive(Default)]
pub struct Monitors {
    feeds: RwLock<Vec<Arc<Feed>>>,
    count: AtomicUsize,
}

/// Who ran a command, as the line shows it.
pub enum Origin<'a> {
    /// A client, by its address.
    Client(&'a std::net::SocketAddr),
    /// A script (`[<db> lua]`).
    Script,
}

impl Monitors {
    /// True when at least one client monitors.
    pub fn active(&self) -> bool {
        self.count.load(Ordering::Relaxed) > 0
    }

    fn add(&self, id: u64) -> Arc<Feed> {
        let feed = Arc::new(Feed {
            id,
            queue: Mutex::new((VecDeque::new(), 0)),
            notify: Notify::new(),
            overflowed: AtomicBool::new(false),
        });
        let mut f = self.feeds.write();
        f.push(feed.clone());
        self.count.store(f.len(), Ordering::Relaxed);
        feed
    }

    /// Stops feeding the client `id` (it closed).
    pub fn remove(&self, id: u64) {
        let mut f = self.feeds.write();
        f.retain(|x| x.id != id);
        self.count.store(f.len(), Ordering::Relaxed);
    }

    /// Shows a command to every monitoring client (a no-op when there is none).
    pub fn feed(&self, db: u8, origin: Origin<'_>, args: &[Bytes]) {
        if !self.active() {
            return;
        }
        let line = Bytes::from(line(db, origin, args, now_us()));
        for f in self.feeds.read().iter() {
            f.push(&line);
        }
    }
}

/// The Unix time in microseconds.
fn now_us() -> u64 {
    let d = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

/// The positions of the arguments a log shows as `(redacted)`: AUTH's, HELLO's after AUTH, MIGRATE's
/// after AUTH (one) or AUTH2 (two).
pub fn redacted_positions(args: &[Bytes]) -> Vec<usize> {
    let Some(name) = args.first() else { return Vec::new() };
    if name.eq_ignore_ascii_case(b"auth") {
        return (1..args.len()).collect();
    }
    let mut out = Vec::new();
    if name.eq_ignore_ascii_case(b"hello") {
        if let Some(i) = args.iter().position(|a| a.eq_ignore_ascii_case(b"auth")) {
            out.extend((i + 1..args.len()).take(2));
        }
    } else if name.eq_ignore_ascii_case(b"migrate") {
        for (i, a) in args.iter().enumerate().skip(6) {
            if a.eq_ignore_ascii_case(b"auth") {
                out.extend((i + 1..args.len()).take(1));
            } else if a.eq_ignore_ascii_case(b"auth2") {
                out.extend((i + 1..args.len()).take(2));
            }
        }
    }
    out
}

/// An argument quoted as Redis shows it: in double quotes, `\\`, `\"`, `\n`, `\r`, `\t`, `\a`, `\b`
/// escaped, other bytes outside printable ASCII as `\xHH`.
pub fn quote_into(out: &mut Vec<u8>, a: &[u8]) {
    out.push(b'"');
    for &b in a {
        match b {
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'"' => out.extend_from_slice(b"\\\""),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            0x07 => out.extend_from_slice(b"\\a"),
            0x08 => out.extend_from_slice(b"\\b"),
            0x20..=0x7e => out.push(b),
            _ => out.extend_from_slice(format!("\\x{b:02x}").as_bytes()),
        }
    }
    out.push(b'"');
}

/// The status line for one command at `now_us` (Unix microseconds), CRLF included.
fn line(db: u8, origin: Origin<'_>, args: &[Bytes], now_us: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(48 + args.iter().map(|a| a.len() + 3).sum::<usize>());
    let who = match origin {
        Origin::Client(a) => a.to_string(),
        Origin::Script => "lua".to_string(),
    };
    out.extend_from_slice(format!("+{}.{:06} [{db} {who}] ", now_us / 1_000_000, now_us % 1_000_000).as_bytes());
    let redacted = redacted_positions(args);
    for (i, a) in args.iter().enumerate() {
        if i > 0 {
            out.push(b' ');
        }
        if redacted.contains(&i) {
            quote_into(&mut out, b"(redacted)");
        } else {
            quote_into(&mut out, a);
        }
    }
    out.extend_from_slice(b"\r\n");
    out
}

pub(super) fn monitor(s: &mut Session, shared: &Shared, _: &Args) -> Reply {
    if s.monitor.is_none() {
        s.monitor = Some(shared.intro.monitors.add(s.id));
    }
    Reply::Ok
}

/// The session's feed, if it monitors (the connection waits on it for lines).
pub fn feed_of(s: &Session) -> Option<Arc<Feed>> {
    s.monitor.clone()
}

/// Resolves when the feed has lines to write or overflowed; never without a feed.
pub async fn ready(feed: Option<Arc<Feed>>) {
    match feed {
        Some(f) => f.notify.notified().await,
        None => std::future::pending().await,
    }
}

/// Moves the queued lines into `out`. `false` when the feed overflowed its limit: the connection must close.
pub fn drain(s: &Session, out: &mut BytesMut) -> bool {
    let Some(f) = s.monitor.as_ref() else { return true };
    if f.overflowed.load(Ordering::Acquire) {
        eprintln!("# closing client {}: MONITOR output over {OUTPUT_LIMIT} bytes", s.addr);
        return false;
    }
    let lines = {
        let mut q = f.queue.lock();
        q.1 = 0;
        std::mem::take(&mut q.0)
    };
    for l in lines {
        out.extend_from_slice(&l);
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(words: &[&str]) -> Vec<Bytes> {
        words.iter().map(|w| Bytes::from(w.to_string())).collect()
    }

    #[test]
    fn lines_look_like_redis_lines() {
        let addr: std::net::SocketAddr = "127.0.0.1:5000".parse().unwrap();
        let l = line(3, Origin::Client(&addr), &args(&["set", "k", "a \"b\"\n\x01é"]), 1_700_000_000_000_042);
        assert_eq!(
            String::from_utf8(l).unwrap(),
            "+1700000000.000042 [3 127.0.0.1:5000] \"set\" \"k\" \"a \\\"b\\\"\\n\\x01\\xc3\\xa9\"\r\n"
        );
        let l = line(0, Origin::Script, &args(&["get", "k"]), 1_000_000);
        assert_eq!(String::from_utf8(l).unwrap(), "+1.000000 [0 lua] \"get\" \"k\"\r\n");
    }

    #[test]
    fn secrets_are_redacted() {
        assert_eq!(redacted_positions(&args(&["AUTH", "u", "p"])), vec![1, 2]);
        assert_eq!(redacted_positions(&args(&["hello", "2", "AUTH", "u", "p"])), vec![3, 4]);
        assert_eq!(redacted_positions(&args(&["migrate", "h", "1", "k", "9", "5000", "AUTH2", "u", "p"])), vec![7, 8]);
        assert_eq!(redacted_positions(&args(&["migrate", "h", "1", "k", "9", "5000", "AUTH", "p"])), vec![7]);
        assert!(redacted_positions(&args(&["get", "auth"])).is_empty());
    }

    #[test]
    fn a_full_feed_overflows_instead_of_growing() {
        let m = Monitors::default();
        assert!(!m.active());
        let f = m.add(7);
        assert!(m.active());
        let big = Bytes::from(vec![b'x'; OUTPUT_LIMIT / 2 + 1]);
        f.push(&big);
        assert!(!f.overflowed.load(Ordering::Relaxed));
        f.push(&big);
        assert!(f.overflowed.load(Ordering::Relaxed));
        assert_eq!(f.queue.lock().0.len(), 1);
        m.remove(7);
        assert!(!m.active());
    }
}
