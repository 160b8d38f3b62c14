//! CLIENT PAUSE and CLIENT UNPAUSE: a server-wide pause, until a deadline or CLIENT UNPAUSE, of every
//! command (`ALL`, the default) or of the commands that may write (`WRITE`).
//!
//! A paused command waits on its own connection's task just before it runs (the commands before it in the
//! pipeline have run and their writes are sent), so nothing is half done while the pause lasts, and every
//! client, the one that asked included, is held, as in Redis. A second pause merges with the first: the later
//! deadline and the stronger mode win. Either mode also holds expiry: the sweeper deletes no expired key until
//! the pause ends (reads still see such a key as missing), as Redis stops active and passive expiry.

use super::super::arg_i64;
use crate::commands::Spec;
use crate::resp::{Args, Reply};
use crate::server::{Session, Shared};
use parking_lot::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use tokio::sync::{watch, Notify};

/// The commands Redis flags `may-replicate`: they can write without being write commands.
const MAY_WRITE: &[&str] = &["eval", "evalsha", "fcall", "publish", "spublish", "pfcount"];

/// The pause in force, if any.
#[derive(Default)]
pub struct Pause {
    /// A pause was set and not yet seen ended: the one check every command makes without the lock.
    on: AtomicBool,
    state: Mutex<State>,
    /// Told when a pause ends early (CLIENT UNPAUSE) or changes.
    changed: Notify,
}

#[derive(Default, Clone, Copy)]
struct State {
    /// When the pause ends; `None` when there is none.
    end: Option<Instant>,
    /// `ALL` (true) or `WRITE` (false).
    all: bool,
}

impl Pause {
    /// Starts or extends a pause until `end`.
    pub fn pause(&self, end: Instant, all: bool) {
        let mut st = self.state.lock();
        let now = Instant::now();
        match st.end {
            Some(old) if old > now => {
                st.end = Some(old.max(end));
                st.all |= all;
            }
            _ => *st = State { end: Some(end), all },
        }
        self.on.store(true, Ordering::Release);
        drop(st);
        self.changed.notify_waiters();
    }

    /// Ends the pause at once.
    pub fn unpause(&self) {
        let mut st = self.state.lock();
        *st = State::default();
        self.on.store(false, Ordering::Release);
        drop(st);
        self.changed.notify_waiters();
    }

    /// True if a pause may be in force (false once one was seen ended).
    pub fn is_on(&self) -> bool {
        self.on.load(Ordering::Acquire)
    }

    /// True if the pause in force holds a command (`may_write`: it may write).
    pub fn holds(&self, may_write: bool) -> bool {
        self.until(may_write).is_some()
    }

    /// The deadline a command must wait for, if the pause in force holds it.
    fn until(&self, may_write: bool) -> Option<Instant> {
        let mut st = self.state.lock();
        let Some(end) = st.end.filter(|e| *e > Instant::now()) else {
            *st = State::default();
            self.on.store(false, Ordering::Release);
            return None;
        };
        (st.all || may_write).then_some(end)
    }

    /// Waits while a pause holds a command (`may_write`: it may write), or until the server stops.
    pub async fn wait(&self, may_write: bool, shutdown: &watch::Sender<bool>) {
        if !self.holds(may_write) {
            return;
        }
        let mut stop = shutdown.subscribe();
        loop {
            let changed = self.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            let Some(end) = self.until(may_write) else { return };
            if *stop.borrow() {
                return;
            }
            tokio::select! {
                _ = &mut changed => {}
                _ = tokio::time::sleep_until(end.into()) => {}
                _ = stop.changed() => {}
            }
        }
    }
}

/// True if a `WRITE` pause holds `spec` run by `s` with `args`: a write, a command that may write, or an
/// EXEC whose transaction holds one.
pub fn may_write(s: &Session, shared: &Shared, spec: &Spec, args: &Args) -> bool {
    if spec.name == "exec" {
        return s.multi.as_ref().is_some_and(|m| {
            m.cmds
                .iter()
                .any(|a| a.first().and_then(|n| crate::commands::lookup(n)).is_some_and(|c| writes(shared, c, a)))
        });
    }
    writes(shared, spec, args)
}

/// A write, or a command that may write. An EVAL, EVALSHA or FCALL whose script or function declares
/// `no-writes` is a read, as Redis takes a script's declared flags for the command's (an EVALSHA or FCALL
/// that cannot be judged at once, while a script runs, counts as a write).
fn writes(shared: &Shared, spec: &Spec, args: &Args) -> bool {
    let no_writes = match (spec.name, args.get(1)) {
        ("eval", Some(body)) => crate::commands::scripting::eval_declares_no_writes(body),
        ("evalsha", Some(sha)) => shared.store.scripts.declares_no_writes(false, sha) == Some(true),
        ("fcall", Some(name)) => shared.store.scripts.declares_no_writes(true, name) == Some(true),
        // Run in the commit step here, but neither write nor may-replicate in Redis: not held.
        ("eval_ro" | "evalsha_ro" | "fcall_ro" | "script", _) => true,
        ("function", Some(sub)) => {
            !["load", "delete", "flush", "restore"].iter().any(|w| sub.eq_ignore_ascii_case(w.as_bytes()))
        }
        _ => false,
    };
    !no_writes && (spec.is_write() || spec.flags & crate::commands::flags::WRITE != 0 || MAY_WRITE.contains(&spec.name))
}

/// `CLIENT PAUSE timeout [WRITE|ALL]` (argc 3 or 4, checked by the caller).
pub fn client_pause(shared: &Shared, args: &Args) -> Reply {
    let all = match args.get(3) {
        None => true,
        Some(m) if m.eq_ignore_ascii_case(b"write") => false,
        Some(m) if m.eq_ignore_ascii_case(b"all") => true,
        Some(_) => return Reply::err("CLIENT PAUSE mode must be WRITE or ALL"),
    };
    let ms = match arg_i64(&args[2]) {
        Ok(ms) => ms,
        Err(_) => return Reply::err("timeout is not an integer or out of range"),
    };
    if ms < 0 {
        return Reply::err("timeout is negative");
    }
    // A deadline past what the clock can hold is a pause until CLIENT UNPAUSE (about 35,000 years).
    let now = Instant::now();
    let end = now.checked_add(Duration::from_millis(ms as u64)).unwrap_or(now + Duration::from_secs(1 << 40));
    shared.pause.pause(end, all);
    // Both modes stop expiry too (Redis neither actively nor passively expires keys while paused).
    let until = crate::store::now_ms().saturating_add(ms as u64);
    shared.store.pause_expiry(until);
    Reply::Ok
}

/// `CLIENT UNPAUSE`.
pub fn client_unpause(shared: &Shared) -> Reply {
    shared.pause.unpause();
    shared.store.pause_expiry(0);
    Reply::Ok
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pause_merges_to_the_later_end_and_the_stronger_mode() {
        let p = Pause::default();
        assert!(!p.holds(true) && !p.is_on());
        let now = Instant::now();
        p.pause(now + Duration::from_secs(60), false);
        assert!(p.holds(true) && p.is_on());
        assert!(!p.holds(false), "WRITE holds reads not");
        p.pause(now + Duration::from_secs(1), true);
        assert_eq!(p.until(false), Some(now + Duration::from_secs(60)));
        p.unpause();
        assert!(!p.holds(true) && !p.is_on());
        // An ended pause does not hold (and is forgotten), and a new one replaces it whole.
        p.pause(now, true);
        assert!(!p.holds(false) && !p.is_on());
        p.pause(now + Duration::from_secs(60), false);
        assert!(!p.holds(false));
    }
}
