//! The command table: name, arity, flags and key positions as `COMMAND INFO` reports them, and the handler.
//!
//! Three kinds of handler, by where they run:
//! - [`Handler::Conn`]: connection and server commands (PING, AUTH, SELECT, CLIENT, CONFIG, INFO ...), on the
//!   connection's task, with its [`Session`];
//! - [`Handler::Read`]: reads of the keyspace, on the connection's task;
//! - [`Handler::Write`]: anything that writes, on the commit thread (see `store/mod.rs`), which makes them
//!   atomic with respect to each other.
//!
//! One module per family adds its commands to [`TABLE`].

/// `tri!(expr)`: the value of an `Ok`, or return the `Err` reply from the command handler.
macro_rules! tri {
    ($e:expr) => {
        match $e {
            Ok(v) => v,
            Err(r) => return r,
        }
    };
}

pub mod coll;
pub mod connection;
pub mod hashes;
pub mod keys;
pub mod lists;
pub mod multi;
pub mod pubsub;
pub mod server_cmds;
pub mod sets;
pub mod streams;
pub mod strings;
pub mod zset_index;
pub mod zsets;

use crate::resp::{Args, Reply};
use crate::server::{Session, Shared};
use crate::store::{ReadCtx, WriteCtx};
use std::collections::HashMap;
use std::sync::OnceLock;

pub type ConnFn = fn(&mut Session, &Shared, &Args) -> Reply;
pub type ReadFn = fn(&ReadCtx<'_>, &Args) -> Reply;
pub type WriteFn = fn(&mut WriteCtx<'_>, &Args) -> Reply;

#[derive(Clone, Copy)]
pub enum Handler {
    Conn(ConnFn),
    Read(ReadFn),
    Write(WriteFn),
}

/// Command flags (the names `COMMAND INFO` prints).
pub mod flags {
    pub const WRITE: u32 = 1;
    pub const READONLY: u32 = 1 << 1;
    pub const FAST: u32 = 1 << 2;
    /// Allowed before AUTH.
    pub const NO_AUTH: u32 = 1 << 3;
    pub const ADMIN: u32 = 1 << 4;
    pub const DENYOOM: u32 = 1 << 5;
    pub const LOADING: u32 = 1 << 6;
    pub const STALE: u32 = 1 << 7;
    pub const PUBSUB: u32 = 1 << 8;
    pub const NOSCRIPT: u32 = 1 << 9;
    /// Not a Redis command: a ShaleDB extension.
    pub const EXTENSION: u32 = 1 << 10;
    /// May block the client (BLPOP, XREAD BLOCK ...): outside MULTI the connection waits in the wake-up
    /// registry (`blocking.rs`) when the command finds nothing.
    pub const BLOCKING: u32 = 1 << 11;

    pub const NAMES: [(u32, &str); 11] = [
        (WRITE, "write"),
        (READONLY, "readonly"),
        (DENYOOM, "denyoom"),
        (ADMIN, "admin"),
        (PUBSUB, "pubsub"),
        (NOSCRIPT, "noscript"),
        (LOADING, "loading"),
        (STALE, "stale"),
        (FAST, "fast"),
        (NO_AUTH, "no_auth"),
        (BLOCKING, "blocking"),
    ];
}

/// One command.
pub struct Spec {
    /// Lower case.
    pub name: &'static str,
    /// Redis's arity: `n` exactly n words (name included), `-n` at least n.
    pub arity: i32,
    pub flags: u32,
    pub first_key: i32,
    pub last_key: i32,
    pub step: i32,
    pub handler: Handler,
    /// One line for `COMMAND DOCS`.
    pub summary: &'static str,
}

impl Spec {
    pub fn is_write(&self) -> bool {
        matches!(self.handler, Handler::Write(_))
    }

    /// True if `argc` words (name included) fit the arity.
    pub fn arity_ok(&self, argc: usize) -> bool {
        let a = self.arity;
        if a >= 0 {
            argc == a as usize
        } else {
            argc >= a.unsigned_abs() as usize
        }
    }
}

/// Every command, from every family.
pub static TABLE: &[&[Spec]] = &[
    connection::COMMANDS,
    server_cmds::COMMANDS,
    strings::COMMANDS,
    keys::COMMANDS,
    multi::COMMANDS,
    hashes::COMMANDS,
    sets::COMMANDS,
    lists::COMMANDS,
    streams::COMMANDS,
    zsets::COMMANDS,
    pubsub::COMMANDS,
];

fn index() -> &'static HashMap<&'static str, &'static Spec> {
    static INDEX: OnceLock<HashMap<&'static str, &'static Spec>> = OnceLock::new();
    INDEX.get_or_init(|| TABLE.iter().flat_map(|family| family.iter()).map(|s| (s.name, s)).collect())
}

/// Looks a command up by name, case-insensitively, without allocating for names up to 32 bytes.
pub fn lookup(name: &[u8]) -> Option<&'static Spec> {
    let mut buf = [0u8; 32];
    if name.len() > buf.len() {
        return None;
    }
    let lower = &mut buf[..name.len()];
    lower.copy_from_slice(name);
    lower.make_ascii_lowercase();
    std::str::from_utf8(lower).ok().and_then(|s| index().get(s).copied())
}

/// Every command (for `COMMAND`, `COMMAND COUNT`).
pub fn all() -> impl Iterator<Item = &'static Spec> {
    TABLE.iter().flat_map(|family| family.iter())
}

/// `-ERR unknown command '<name>', with args beginning with: '<a1>' '<a2>' ` exactly as Redis words it.
pub fn unknown_command(args: &Args) -> Reply {
    let name = args.first().map(|n| String::from_utf8_lossy(n).into_owned()).unwrap_or_default();
    let mut msg = format!("ERR unknown command '{}', with args beginning with: ", truncate(&name));
    for a in args.iter().skip(1).take(20) {
        msg.push('\'');
        msg.push_str(&truncate(&String::from_utf8_lossy(a)));
        msg.push_str("' ");
    }
    Reply::Error(msg)
}

/// `-ERR wrong number of arguments for '<name>' command`.
pub fn wrong_arity(name: &str) -> Reply {
    Reply::Error(format!("ERR wrong number of arguments for '{name}' command"))
}

/// Redis's WRONGTYPE error.
pub fn wrong_type() -> Reply {
    Reply::error("WRONGTYPE Operation against a key holding the wrong kind of value")
}

pub fn syntax_error() -> Reply {
    Reply::err("syntax error")
}

pub fn not_an_integer() -> Reply {
    Reply::err("value is not an integer or out of range")
}

/// Long names and arguments are cut in error messages, as Redis does (128 characters).
fn truncate(s: &str) -> String {
    if s.len() <= 128 {
        return s.to_string();
    }
    let mut end = 128;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s[..end].to_string()
}

/// Parses an integer argument as Redis does (no spaces, no '+', fits an i64).
pub fn arg_i64(a: &[u8]) -> Result<i64, Reply> {
    crate::resp::parse_i64(a).ok_or_else(not_an_integer)
}

/// The arguments `numkeys key [key ...] [LIMIT limit]` of SINTERCARD and ZINTERCARD (from `args[1]`): the
/// number of keys and the limit (0: none), or the error Redis answers.
pub(crate) fn parse_intercard(args: &Args) -> Result<(usize, u64), Reply> {
    let n = arg_i64(&args[1])?;
    if n < 1 {
        return Err(Reply::err("numkeys should be greater than 0"));
    }
    if n as u64 > (args.len() - 2) as u64 {
        return Err(Reply::err("Number of keys can't be greater than number of args"));
    }
    let n = n as usize;
    let mut limit = 0u64;
    let mut j = 2 + n;
    while j < args.len() {
        if args[j].eq_ignore_ascii_case(b"LIMIT") && j + 1 < args.len() {
            match crate::resp::parse_i64(&args[j + 1]) {
                Some(l) if l >= 0 => limit = l as u64,
                _ => return Err(Reply::err("LIMIT can't be negative")),
            }
            j += 2;
        } else {
            return Err(syntax_error());
        }
    }
    Ok((n, limit))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_is_lower_case_and_unique() {
        let mut seen = std::collections::HashSet::new();
        for s in all() {
            assert_eq!(s.name, s.name.to_ascii_lowercase());
            assert!(seen.insert(s.name), "{} twice", s.name);
        }
        assert!(lookup(b"GeT").is_some());
        assert!(lookup(b"nosuchcommand").is_none());
    }
}
