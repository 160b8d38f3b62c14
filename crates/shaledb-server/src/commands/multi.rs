//! MULTI, EXEC, DISCARD, WATCH, UNWATCH.
//!
//! MULTI starts queuing in the connection's [`Session`]: every later command that passes the checks (known,
//! right arity, authenticated) is answered `+QUEUED`; one that fails them is answered its error and marks the
//! transaction, whose EXEC then answers `EXECABORT`. EXEC sends the queued commands to the commit step as
//! ONE write command ([`EXEC_JOB`]), which executes them in order: writes into the group's batch, reads
//! against the engine after the batch so far is applied, so the transaction sees its own writes and no other
//! write can come between its commands. Its reply is the array of their replies.
//!
//! Connection commands inside MULTI: PING and ECHO are queued and answered at EXEC (as Redis does); QUIT and
//! RESET act at once (as in Redis); CONFIG is queued and run by the connection right after the EXEC job
//! committed ([`runs_after_commit`]); SAVE and SHUTDOWN are refused as Redis refuses them (`no-multi`); every
//! other connection or server command (SELECT, AUTH, HELLO, CLIENT ...) is refused at queue time with an
//! error that aborts the transaction, so the session state a queued command would change never diverges
//! from what the commit step executes. A command refused with BUSY while a script runs too long aborts
//! the transaction too, and an EXEC refused so answers `EXECABORT` naming why ([`exec_refused`]).
//!
//! Other clients' reads may see a transaction's first writes before its last ones when the transaction
//! reads its own writes or grows past the group's batch limit (the batch so far is applied to the engine);
//! writers never interleave.
//!
//! WATCH (optimistic locking, as Redis 7.0 does it). The registry of watched keys ([`Watches`]) lives in the
//! commit step's [`WriteCtx`], and everything that reads or changes it runs there, so it needs no lock
//! at all and no other key is ever locked:
//! - WATCH runs in the commit step ([`WATCH_JOB`]) and is answered after the group it ran in reached the
//!   engine, so a write executed before it is visible to the client's next read and every write executed
//!   after it is reported to the registry: no write falls between the two;
//! - every write of a meta key (`db 0x00 user_key`: SET, DEL, EXPIRE, a collection's size, RENAME's both
//!   keys, FLUSHDB's deletes ...) is reported by `WriteCtx::record` to [`Watches::touch`], which marks
//!   every client watching that key dirty. A command that wrote only member records (LSET, HSET of an
//!   existing field) is reported by its key arguments ([`after_write`]). When nobody watches anything, the
//!   cost is one `is_empty` test per meta key written;
//! - EXEC ([`EXEC_JOB`]) answers a nil array, executing nothing, when its client is dirty or when a key that
//!   was alive at WATCH time has expired since (Redis 7.0 counts that as a change). A key already expired
//!   at WATCH time whose deletion (lazy or by the sweeper) is then reported is not a change, as in Redis;
//!   writing it again is;
//! - EXEC (with or without running), DISCARD, RESET, UNWATCH and the connection's end unwatch every key of
//!   the client ([`unwatch_session`], ordered after the client's earlier jobs since the commit step's
//!   channel is FIFO). WATCH inside MULTI is refused (and does not abort the transaction), as in Redis.
//!
//! [`Watches`]: crate::store::Watches
//! [`Watches::touch`]: crate::store::Watches::touch

use super::{Handler, Spec};
use crate::commit::Job;
use crate::resp::{Args, Reply};
use crate::server::{Session, Shared};
use crate::store::WriteCtx;
use bytes::Bytes;

pub static COMMANDS: &[Spec] = &[
    cmd! { "multi", 1, NOSCRIPT | LOADING | STALE | FAST, [0, 0, 0], Conn(multi), "Starts a transaction." },
    cmd! { "exec", 1, NOSCRIPT | LOADING | STALE, [0, 0, 0], Conn(exec_outside), "Executes all commands in a transaction." },
    cmd! { "discard", 1, NOSCRIPT | LOADING | STALE | FAST, [0, 0, 0], Conn(discard), "Discards a transaction." },
    cmd! { "watch", -2, NOSCRIPT | LOADING | STALE | FAST, [1, -1, 1], Conn(watch_outside), "Monitors changes to keys to determine the execution of a transaction." },
    cmd! { "unwatch", 1, NOSCRIPT | LOADING | STALE | FAST, [0, 0, 0], Conn(unwatch), "Forgets about watched keys of a transaction." },
];

/// WATCH runs in the commit step as this command (not in the table): `args` = `watch client-id key...`.
pub static WATCH_JOB: Spec =
    cmd! { "watch", -3, 0, [0, 0, 0], Write(watch_in_commit), "Registers watched keys (internal)." };

/// Unwatches every key of a client in the commit step (not in the table): `args` = `unwatch client-id`.
pub static UNWATCH_JOB: Spec =
    cmd! { "unwatch", 2, 0, [0, 0, 0], Write(unwatch_in_commit), "Unregisters a client's watched keys (internal)." };

/// The queued transaction's commands run in the commit step as this one write command (not in the table:
/// clients cannot call it). `args[1]` is the client id (for its watched keys), then `args[2..]` holds each
/// queued command as its word count then its words.
pub static EXEC_JOB: Spec =
    cmd! { "exec", -1, WRITE, [0, 0, 0], Write(exec_in_commit), "Executes a transaction's commands (internal)." };

/// Most commands one transaction may queue.
pub const MAX_QUEUED: usize = 100_000;
/// Most bytes of arguments one transaction may queue.
pub const MAX_QUEUED_BYTES: usize = 256 << 20;

/// A transaction being queued.
#[derive(Debug, Default)]
pub struct MultiState {
    pub cmds: Vec<Args>,
    pub bytes: usize,
    /// A command failed to queue: EXEC answers EXECABORT.
    pub dirty: bool,
}

/// What the connection does with a command.
pub enum Step {
    /// Execute it as usual.
    Run(&'static Spec, Args),
    /// Answer this (queued, refused, or a transaction's end that needs no commit step).
    Reply(Reply),
}

/// A command failed its checks: inside MULTI that aborts the transaction.
pub fn queue_failed(s: &mut Session) {
    if let Some(m) = s.multi.as_mut() {
        m.dirty = true;
    }
}

/// Routes a checked command through the session's transaction state.
pub fn intercept(s: &mut Session, shared: &Shared, spec: &'static Spec, args: Args) -> Step {
    if spec.name == "watch" {
        if s.multi.is_some() {
            return Step::Reply(Reply::err("WATCH inside MULTI is not allowed"));
        }
        s.watching = true;
        // While a script runs past busy-reply-threshold the commit step is taken: answer now, and let it
        // register the keys before its next write (Redis serves WATCH between the script's steps).
        if crate::commands::scripting::busy(shared).is_some() {
            shared.store.watch_inbox.post(s.id, s.db_index, args.into_iter().skip(1).collect());
            return Step::Reply(Reply::Ok);
        }
        let mut a: Args = Vec::with_capacity(args.len() + 1);
        a.push(Bytes::from_static(b"watch"));
        a.push(Bytes::from(s.id.to_string()));
        a.extend(args.into_iter().skip(1));
        return Step::Run(&WATCH_JOB, a);
    }
    let Some(m) = s.multi.as_mut() else { return Step::Run(spec, args) };
    match spec.name {
        "exec" => {
            let m = s.multi.take().unwrap_or_default();
            if m.dirty {
                unwatch_session(s, shared);
                return Step::Reply(Reply::error("EXECABORT Transaction discarded because of previous errors."));
            }
            if m.cmds.is_empty() && !s.watching {
                return Step::Reply(Reply::Array(vec![]));
            }
            s.watching = false;
            Step::Run(&EXEC_JOB, encode(s.id, m.cmds))
        }
        "discard" | "multi" | "quit" | "reset" => Step::Run(spec, args),
        // Redis's `no-multi` commands: refused, and the transaction is aborted.
        "save" | "shutdown" | "sync" | "psync" => {
            m.dirty = true;
            Step::Reply(Reply::err("Command not allowed inside a transaction"))
        }
        "ping" | "echo" | "unwatch" => queue(m, args),
        name if runs_after_commit(name, &args) => queue(m, args),
        _ if matches!(spec.handler, Handler::Conn(_)) => {
            m.dirty = true;
            Step::Reply(Reply::err(format!("Command '{}' is not allowed inside MULTI", spec.name)))
        }
        _ => queue(m, args),
    }
}

/// Connection commands a transaction may queue although they cannot run in the commit step: they change
/// server state only (no key), so the connection runs them, in queue order, right after the transaction's
/// data commands committed, and puts each reply in its place ([`run_after_commit`]). A transaction that did
/// not run (a changed WATCHed key) runs none of them. NB: the data commands of the same transaction do not
/// see their effect, whatever their place in the queue.
/// CLIENT PAUSE and UNPAUSE are among them: as in Redis, a pause queued in a transaction starts once the
/// whole transaction has run.
pub fn runs_after_commit(name: &str, args: &Args) -> bool {
    name == "config"
        || (name == "client"
            && args.get(1).is_some_and(|s| s.eq_ignore_ascii_case(b"pause") || s.eq_ignore_ascii_case(b"unpause")))
}

/// After an EXEC job answered `reply`: runs the queued commands [`runs_after_commit`] names on the
/// connection and replaces their slots in the reply array with their replies.
pub fn run_after_commit(s: &mut Session, shared: &Shared, queued: &[Args], reply: &mut Reply) {
    let Reply::Array(results) = reply else { return };
    for (cmd, slot) in queued.iter().zip(results.iter_mut()) {
        let Some(spec) = cmd.first().and_then(|n| super::lookup(n)) else { continue };
        if let (Handler::Conn(f), true) = (spec.handler, runs_after_commit(spec.name, cmd)) {
            *slot = f(s, shared, cmd);
        }
    }
}

/// Redis's answer to an EXEC refused before it ran (BUSY, NOAUTH ...): the transaction is discarded and the
/// refusal is named in an `EXECABORT` error.
pub fn exec_refused(s: &mut Session, shared: &Shared, refusal: &Reply) -> Reply {
    s.multi = None;
    unwatch_session(s, shared);
    let why = match refusal {
        Reply::Error(e) => e.as_str(),
        _ => "",
    };
    Reply::error(format!("EXECABORT Transaction discarded because of: {why}"))
}

fn queue(m: &mut MultiState, args: Args) -> Step {
    let bytes: usize = args.iter().map(|a| a.len() + 16).sum();
    if m.cmds.len() >= MAX_QUEUED || m.bytes + bytes > MAX_QUEUED_BYTES {
        m.dirty = true;
        return Step::Reply(Reply::err(format!(
            "too many commands queued in MULTI (at most {MAX_QUEUED} commands and {MAX_QUEUED_BYTES} bytes)"
        )));
    }
    m.bytes += bytes;
    m.cmds.push(args);
    Step::Reply(Reply::Simple("QUEUED".into()))
}

fn encode(client: u64, cmds: Vec<Args>) -> Args {
    let mut out: Args = Vec::with_capacity(2 + cmds.iter().map(|c| c.len() + 1).sum::<usize>());
    out.push(Bytes::from_static(b"exec"));
    out.push(Bytes::from(client.to_string()));
    for c in cmds {
        out.push(Bytes::from(c.len().to_string()));
        out.extend(c);
    }
    out
}

fn multi(s: &mut Session, _: &Shared, _: &Args) -> Reply {
    if s.multi.is_some() {
        return Reply::err("MULTI calls can not be nested");
    }
    s.multi = Some(MultiState::default());
    Reply::Ok
}

fn discard(s: &mut Session, shared: &Shared, _: &Args) -> Reply {
    match s.multi.take() {
        Some(_) => {
            unwatch_session(s, shared);
            Reply::Ok
        }
        None => Reply::err("DISCARD without MULTI"),
    }
}

/// EXEC reaches its connection handler only outside MULTI (inside, [`intercept`] turns it into
/// [`EXEC_JOB`]).
fn exec_outside(s: &mut Session, _: &Shared, _: &Args) -> Reply {
    match s.multi.take() {
        None => Reply::err("EXEC without MULTI"),
        Some(_) => Reply::err("EXEC could not run: the transaction was not routed to the commit step"),
    }
}

/// Runs a transaction's commands in the commit step, unless a key its client watches changed (then a nil
/// array, and nothing runs).
/// The queued command lines of an `EXEC_JOB`'s arguments (a malformed count ends the list).
pub fn queued_lines(args: &Args) -> Vec<&[Bytes]> {
    let mut out = Vec::new();
    let mut i = 2;
    while i < args.len() {
        match std::str::from_utf8(&args[i]).ok().and_then(|s| s.parse::<usize>().ok()) {
            Some(n) if n >= 1 && n < args.len() - i => {
                out.push(&args[i + 1..i + 1 + n]);
                i += 1 + n;
            }
            _ => break,
        }
    }
    out
}

fn exec_in_commit(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    let Some(client) = args.get(1).and_then(|a| parse_id(a)) else {
        return Reply::err("internal: malformed transaction");
    };
    if !ctx.watches.is_empty() && !watched_unchanged(ctx, client) {
        return Reply::NilArray;
    }
    let mut replies = Vec::new();
    let mut i = 2;
    while i < args.len() {
        let n = match std::str::from_utf8(&args[i]).ok().and_then(|s| s.parse::<usize>().ok()) {
            Some(n) if n >= 1 && n < args.len() - i => n,
            _ => return Reply::err("internal: malformed transaction"),
        };
        let cmd: Args = args[i + 1..i + 1 + n].to_vec();
        i += 1 + n;
        let Some(spec) = super::lookup(&cmd[0]) else {
            replies.push(super::unknown_command(&cmd));
            continue;
        };
        replies.push(match spec.handler {
            Handler::Write(f) => {
                let before = ctx.write_counts();
                let r = f(ctx, &cmd);
                after_write(ctx, spec, &cmd, before);
                r
            }
            Handler::Read(f) => ctx.run_read(|v| f(v, &cmd)),
            Handler::Conn(_) => match spec.name {
                "ping" if cmd.len() == 1 => Reply::Simple("PONG".into()),
                "ping" if cmd.len() == 2 => Reply::Bulk(cmd[1].clone()),
                "echo" if cmd.len() == 2 => Reply::Bulk(cmd[1].clone()),
                // EXEC unwatched everything already.
                "unwatch" => Reply::Ok,
                // Run by the connection once this job is durable ([`run_after_commit`]); this is its slot.
                name if runs_after_commit(name, &cmd) => Reply::Nil,
                _ => Reply::err(format!("Command '{}' is not allowed inside MULTI", spec.name)),
            },
        });
    }
    Reply::Array(replies)
}

/// True when EXEC of `client` may run (and its keys are unwatched either way).
fn watched_unchanged(ctx: &mut WriteCtx<'_>, client: u64) -> bool {
    let Some(alive) = ctx.watches.take_for_exec(client) else { return false };
    let view = ctx.view();
    !alive.iter().any(|k| {
        matches!(view.get_raw(k), Ok(Some(v)) if crate::keys::decode_meta(&v).is_ok_and(|m| m.expired(view.now_ms)))
    })
}

fn parse_id(a: &[u8]) -> Option<u64> {
    std::str::from_utf8(a).ok()?.parse().ok()
}

/// WATCH reaches its connection handler only if [`intercept`] did not route it (it always does).
fn watch_outside(_: &mut Session, _: &Shared, _: &Args) -> Reply {
    Reply::err("WATCH could not run: it was not routed to the commit step")
}

fn unwatch(s: &mut Session, shared: &Shared, _: &Args) -> Reply {
    unwatch_session(s, shared);
    Reply::Ok
}

/// Unwatches every key of the session's client (EXECABORT, DISCARD, UNWATCH, RESET, the connection's end):
/// a job sent to the commit step without waiting for its answer. The commit step's channel is FIFO, so
/// it is executed before any later command of the same connection.
pub fn unwatch_session(s: &mut Session, shared: &Shared) {
    if std::mem::take(&mut s.watching) {
        let (tx, _) = tokio::sync::oneshot::channel();
        let args = vec![Bytes::from_static(b"unwatch"), Bytes::from(s.id.to_string())];
        shared.store.submit(Job {
            db_index: s.db_index,
            cmds: vec![(&UNWATCH_JOB, args)],
            reply: tx,
            block: None,
            client: s.id,
        });
    }
}

fn watch_in_commit(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    let Some(client) = args.get(1).and_then(|a| parse_id(a)) else { return Reply::err("internal: malformed WATCH") };
    for k in &args[2..] {
        if let Err(e) = ctx.watch_key(client, ctx.db_index, k) {
            return Reply::err(format!("read failed: {e}"));
        }
    }
    Reply::Ok
}

fn unwatch_in_commit(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    if let Some(client) = args.get(1).and_then(|a| parse_id(a)) {
        ctx.watches.unwatch(client);
    }
    Reply::Ok
}

/// Called by the commit step after every write command: a command that wrote member records but no meta
/// key (those are reported as they are written) touches the keys among its arguments (the command table's
/// first key, last key and step).
pub fn after_write(ctx: &mut WriteCtx<'_>, spec: &Spec, args: &Args, before: (u64, u64)) {
    crate::tracking::after_write(ctx, spec, args, before);
    if ctx.watches.is_empty() {
        return;
    }
    let (writes, meta_writes) = ctx.write_counts();
    if writes == before.0 || meta_writes != before.1 || spec.first_key <= 0 || spec.step <= 0 {
        return;
    }
    let n = args.len() as i64;
    let first = spec.first_key as i64;
    let last = if spec.last_key < 0 { n + spec.last_key as i64 } else { (spec.last_key as i64).min(n - 1) };
    let mut i = first;
    while i <= last && i < n {
        let mk = ctx.keyspace.meta_key(ctx.db_index, &args[i as usize]);
        ctx.watches.touch(&mk, true);
        i += spec.step as i64;
    }
}
