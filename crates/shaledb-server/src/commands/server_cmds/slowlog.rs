//! SLOWLOG: the last commands that took longer than `slowlog-log-slower-than` microseconds (in memory, at
//! most `slowlog-max-len` of them, newest first), as Redis keeps them.
//!
//! A command's time is measured around its execution on the connection's task. A write command runs on the
//! commit step with the others of its group: its time is its share of the group's (the group's wall time,
//! fsync included, divided by the commands in it). Blocking commands (BLPOP ...) are not logged: their time
//! is mostly waiting.

use super::super::{sub_arity, unknown_subcommand};
use crate::resp::{Args, Reply};
use crate::server::{Session, Shared};
use bytes::Bytes;
use parking_lot::Mutex;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::Duration;

/// Most arguments an entry keeps (the last one kept says how many more there were).
const MAX_ARGS: usize = 32;
/// Most bytes of an argument an entry keeps.
const MAX_ARG_BYTES: usize = 128;

/// One logged command.
#[derive(Debug, Clone)]
struct Entry {
    id: u64,
    unix_secs: u64,
    usec: u64,
    args: Vec<Bytes>,
    peer: String,
    name: Bytes,
}

/// The slow log.
pub struct SlowLog {
    entries: Mutex<VecDeque<Entry>>,
    next_id: AtomicU64,
    /// `slowlog-log-slower-than` (microseconds; negative: off, 0: every command).
    pub slower_than: AtomicI64,
    /// `slowlog-max-len`.
    pub max_len: AtomicU64,
}

impl Default for SlowLog {
    fn default() -> Self {
        SlowLog {
            entries: Mutex::new(VecDeque::new()),
            next_id: AtomicU64::new(0),
            slower_than: AtomicI64::new(10_000),
            max_len: AtomicU64::new(128),
        }
    }
}

/// The arguments as an entry keeps them: at most [`MAX_ARGS`], each cut at [`MAX_ARG_BYTES`], with the
/// arguments of AUTH and HELLO ... AUTH replaced by `(redacted)`.
fn kept_args(args: &[Bytes]) -> Vec<Bytes> {
    let redacted = super::monitor::redacted_positions(args);
    let n = args.len().min(MAX_ARGS);
    let mut out = Vec::with_capacity(n);
    for (i, a) in args.iter().enumerate().take(n) {
        if i == n - 1 && args.len() > MAX_ARGS {
            out.push(Bytes::from(format!("... ({} more arguments)", args.len() - MAX_ARGS + 1)));
        } else if redacted.contains(&i) {
            out.push(Bytes::from_static(b"(redacted)"));
        } else if a.len() > MAX_ARG_BYTES {
            let mut v = a[..MAX_ARG_BYTES].to_vec();
            v.extend_from_slice(format!("... ({} more bytes)", a.len() - MAX_ARG_BYTES).as_bytes());
            out.push(Bytes::from(v));
        } else {
            out.push(a.clone());
        }
    }
    out
}

impl SlowLog {
    /// True when a command that took `d` is logged.
    pub fn wants(&self, d: Duration) -> bool {
        let t = self.slower_than.load(Ordering::Relaxed);
        t >= 0 && d.as_micros() >= t as u128
    }

    /// Logs a command that took `d` if it is slow enough.
    pub fn offer(&self, s: &Session, args: &[Bytes], d: Duration) {
        if !self.wants(d) || args.first().is_some_and(|a| a.eq_ignore_ascii_case(b"exec")) {
            return;
        }
        let entry = Entry {
            id: self.next_id.fetch_add(1, Ordering::Relaxed),
            unix_secs: crate::store::now_ms() / 1000,
            usec: u64::try_from(d.as_micros()).unwrap_or(u64::MAX),
            args: kept_args(args),
            peer: s.addr.to_string(),
            name: s.name.clone().unwrap_or_default(),
        };
        let max = self.max_len.load(Ordering::Relaxed) as usize;
        let mut e = self.entries.lock();
        e.push_front(entry);
        e.truncate(max);
    }

    /// Applies a new `slowlog-max-len` at once (Redis trims on the next entry; trimming now is the same as
    /// far as a client can tell, since the dropped entries could never be shown again).
    pub fn set_max_len(&self, n: u64) {
        self.max_len.store(n, Ordering::Relaxed);
        self.entries.lock().truncate(n as usize);
    }
}

const HELP: &[&str] = &[
    "SLOWLOG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "GET [<count>]",
    "    Return top <count> entries from the slowlog (default: 10, -1 mean all).",
    "    Entries are made of:",
    "    id, timestamp, time in microseconds, arguments array, client IP and port,",
    "    client name",
    "LEN",
    "    Return the length of the slowlog.",
    "RESET",
    "    Reset the slowlog.",
    "HELP",
    "    Print this help.",
];

pub(super) fn slowlog(_: &mut Session, shared: &Shared, args: &Args) -> Reply {
    let log = &shared.intro.slowlog;
    let sub = args[1].to_ascii_lowercase();
    let argc = args.len();
    match sub.as_slice() {
        b"help" if argc == 2 => super::super::help_reply(HELP),
        b"reset" if argc == 2 => {
            log.entries.lock().clear();
            Reply::Ok
        }
        b"len" if argc == 2 => Reply::Int(log.entries.lock().len() as i64),
        b"get" if argc <= 3 => {
            let count = match args.get(2) {
                None => 10,
                Some(a) => match crate::resp::parse_i64(a) {
                    Some(-1) => usize::MAX,
                    Some(n) if n >= 0 => usize::try_from(n).unwrap_or(usize::MAX),
                    _ => return Reply::err("count should be greater than or equal to -1"),
                },
            };
            let e = log.entries.lock();
            Reply::Array(
                e.iter()
                    .take(count)
                    .map(|e| {
                        Reply::Array(vec![
                            Reply::Int(e.id as i64),
                            Reply::Int(e.unix_secs as i64),
                            Reply::Int(e.usec as i64),
                            Reply::Array(e.args.iter().cloned().map(Reply::Bulk).collect()),
                            Reply::bulk(e.peer.clone()),
                            Reply::Bulk(e.name.clone()),
                        ])
                    })
                    .collect(),
            )
        }
        b"help" | b"reset" | b"len" | b"get" => sub_arity("slowlog", &sub),
        _ => unknown_subcommand("SLOWLOG", &args[1]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_entries_are_cut_as_redis_cuts_them() {
        let args: Vec<Bytes> = (0..40).map(|i| Bytes::from(i.to_string())).collect();
        let kept = kept_args(&args);
        assert_eq!(kept.len(), 32);
        assert_eq!(kept[31], Bytes::from("... (9 more arguments)"));
        assert_eq!(kept[30], Bytes::from("30"));
        let long = vec![Bytes::from("set"), Bytes::from("k"), Bytes::from(vec![b'x'; 200])];
        let kept = kept_args(&long);
        assert_eq!(kept[2].len(), 128 + "... (72 more bytes)".len());
        assert!(kept[2].ends_with(b"... (72 more bytes)"));
        let auth = vec![Bytes::from("auth"), Bytes::from("user"), Bytes::from("pw")];
        assert_eq!(kept_args(&auth)[1..], [Bytes::from("(redacted)"), Bytes::from("(redacted)")]);
    }
}
