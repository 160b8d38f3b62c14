//! MULTI, EXEC, DISCARD (no WATCH yet).
//!
//! MULTI starts queuing in the connection's [`Session`]: every later command that passes the checks (known,
//! right arity, authenticated) is answered `+QUEUED`; one that fails them is answered its error and marks the
//! transaction, whose EXEC then answers `EXECABORT`. EXEC sends the queued commands to the commit thread as
//! ONE write command ([`EXEC_JOB`]), which executes them in order: writes into the group's batch, reads
//! against the engine after the batch so far is applied, so the transaction sees its own writes and no other
//! write can come between its commands. Its reply is the array of their replies.
//!
//! Connection commands inside MULTI: PING and ECHO are queued and answered at EXEC (as Redis does); QUIT and
//! RESET act at once (as in Redis); every other connection or server command (SELECT, AUTH, HELLO,
//! CLIENT ...) is refused at queue time with an error that aborts the transaction, so the session state a
//! queued command would change never diverges from what the commit thread executes.
//!
//! Other clients' reads may see a transaction's first writes before its last ones when the transaction
//! reads its own writes or grows past the group's batch limit (the batch so far is applied to the engine);
//! writers never interleave.

use super::flags::*;
use super::{Handler, Spec};
use crate::resp::{Args, Reply};
use crate::server::{Session, Shared};
use crate::store::WriteCtx;
use bytes::Bytes;

pub static COMMANDS: &[Spec] = &[
    Spec {
        name: "multi",
        arity: 1,
        flags: NOSCRIPT | LOADING | STALE | FAST,
        first_key: 0,
        last_key: 0,
        step: 0,
        handler: Handler::Conn(multi),
        summary: "Starts a transaction.",
    },
    Spec {
        name: "exec",
        arity: 1,
        flags: NOSCRIPT | LOADING | STALE,
        first_key: 0,
        last_key: 0,
        step: 0,
        handler: Handler::Conn(exec_outside),
        summary: "Executes all commands in a transaction.",
    },
    Spec {
        name: "discard",
        arity: 1,
        flags: NOSCRIPT | LOADING | STALE | FAST,
        first_key: 0,
        last_key: 0,
        step: 0,
        handler: Handler::Conn(discard),
        summary: "Discards a transaction.",
    },
];

/// The queued transaction's commands run on the commit thread as this one write command (not in the table:
/// clients cannot call it). `args[1..]` holds each queued command as its word count then its words.
pub static EXEC_JOB: Spec = Spec {
    name: "exec",
    arity: -1,
    flags: WRITE,
    first_key: 0,
    last_key: 0,
    step: 0,
    handler: Handler::Write(exec_in_commit),
    summary: "Executes a transaction's commands (internal).",
};

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
    /// Answer this (queued, refused, or a transaction's end that needs no commit thread).
    Reply(Reply),
}

/// A command failed its checks: inside MULTI that aborts the transaction.
pub fn queue_failed(s: &mut Session) {
    if let Some(m) = s.multi.as_mut() {
        m.dirty = true;
    }
}

/// Routes a checked command through the session's transaction state.
pub fn intercept(s: &mut Session, spec: &'static Spec, args: Args) -> Step {
    let Some(m) = s.multi.as_mut() else { return Step::Run(spec, args) };
    match spec.name {
        "exec" => {
            let m = s.multi.take().unwrap_or_default();
            if m.dirty {
                return Step::Reply(Reply::error("EXECABORT Transaction discarded because of previous errors."));
            }
            if m.cmds.is_empty() {
                return Step::Reply(Reply::Array(vec![]));
            }
            Step::Run(&EXEC_JOB, encode(m.cmds))
        }
        "discard" | "multi" | "quit" | "reset" => Step::Run(spec, args),
        "ping" | "echo" => queue(m, args),
        _ if matches!(spec.handler, Handler::Conn(_)) => {
            m.dirty = true;
            Step::Reply(Reply::err(format!("Command '{}' is not allowed inside MULTI", spec.name)))
        }
        _ => queue(m, args),
    }
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

fn encode(cmds: Vec<Args>) -> Args {
    let mut out: Args = Vec::with_capacity(1 + cmds.iter().map(|c| c.len() + 1).sum::<usize>());
    out.push(Bytes::from_static(b"exec"));
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

fn discard(s: &mut Session, _: &Shared, _: &Args) -> Reply {
    match s.multi.take() {
        Some(_) => Reply::Ok,
        None => Reply::err("DISCARD without MULTI"),
    }
}

/// EXEC reaches its connection handler only outside MULTI (inside, [`intercept`] turns it into
/// [`EXEC_JOB`]).
fn exec_outside(s: &mut Session, _: &Shared, _: &Args) -> Reply {
    match s.multi.take() {
        None => Reply::err("EXEC without MULTI"),
        Some(_) => Reply::err("EXEC could not run: the transaction was not routed to the commit thread"),
    }
}

/// Runs a transaction's commands on the commit thread.
fn exec_in_commit(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    let mut replies = Vec::new();
    let mut i = 1;
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
            Handler::Write(f) => f(ctx, &cmd),
            Handler::Read(f) => f(&ctx.read_ctx(), &cmd),
            Handler::Conn(_) => match spec.name {
                "ping" if cmd.len() == 1 => Reply::Simple("PONG".into()),
                "ping" if cmd.len() == 2 => Reply::Bulk(cmd[1].clone()),
                "echo" if cmd.len() == 2 => Reply::Bulk(cmd[1].clone()),
                _ => Reply::err(format!("Command '{}' is not allowed inside MULTI", spec.name)),
            },
        });
    }
    Reply::Array(replies)
}
