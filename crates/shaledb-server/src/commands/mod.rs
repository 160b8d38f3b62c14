//! The command table: name, arity, flags and key positions as `COMMAND INFO` reports them, and the handler.
//!
//! Three kinds of handler, by where they run:
//! - [`Handler::Conn`]: connection and server commands (PING, AUTH, SELECT, CLIENT, CONFIG, INFO ...), on the
//!   connection's task, with its [`Session`];
//! - [`Handler::Read`]: reads of the keyspace, on the connection's task;
//! - [`Handler::Write`]: anything that writes, in the commit step (see `commit.rs`), which makes them
//!   atomic with respect to each other.
//!
//! One module per family adds its commands to [`TABLE`], one `cmd!` line each.

/// `tri!(expr)`: the value of an `Ok`, or return the `Err` (a reply, or a storage error turned into the reply
/// Redis gives) from the command handler.
macro_rules! tri {
    ($e:expr) => {
        match $e {
            Ok(v) => v,
            Err(r) => return r.into(),
        }
    };
}

/// `cmd! { "name", arity, FLAGS, [first_key, last_key, step], Kind(handler), "summary" }`: one [`Spec`], in one
/// line of a `COMMANDS` table.
///
/// - `arity` is Redis's: `n` exactly n words (name included), `-n` at least n;
/// - `FLAGS` are the names of [`flags`] joined with `|` (no import needed), or `0`;
/// - the key positions are `[0, 0, 0]` for a command without keys;
/// - `Kind` is the [`Handler`] variant: `Conn`, `Read` or `Write`.
///
/// Written with braces, `cmd! { ... }`, so rustfmt leaves each line as it is.
macro_rules! cmd {
    (
        $name:literal, $arity:expr, $flags:expr, [$first:expr, $last:expr, $step:expr], $kind:ident($h:expr),
        $summary:literal $(,)?
    ) => {
        $crate::commands::Spec {
            name: $name,
            arity: $arity,
            flags: {
                #[allow(unused_imports)]
                use $crate::commands::flags::*;
                $flags
            },
            first_key: $first,
            last_key: $last,
            step: $step,
            handler: $crate::commands::Handler::$kind($h),
            summary: $summary,
        }
    };
}
pub(crate) use cmd;

pub mod acl;
pub mod bits;
pub mod coll;
pub mod connection;
pub mod dump;
pub mod geo;
pub mod hashes;
pub mod hll;
pub mod keys;
pub mod lists;
pub mod migrate;
pub mod multi;
pub mod pubsub;
pub mod scripting;
pub mod server_cmds;
pub mod sets;
pub mod sort;
pub mod streams;
pub mod strings;
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
    bits::COMMANDS,
    keys::COMMANDS,
    multi::COMMANDS,
    hashes::COMMANDS,
    sets::COMMANDS,
    lists::COMMANDS,
    streams::COMMANDS,
    zsets::COMMANDS,
    pubsub::COMMANDS,
    sort::COMMANDS,
    geo::COMMANDS,
    hll::COMMANDS,
    scripting::COMMANDS,
    dump::COMMANDS,
    migrate::COMMANDS,
    acl::COMMANDS,
];

/// The command index, hashed with FNV-1a: its keys are the fixed table's names, so a client cannot choose
/// colliding keys, and a name of a few bytes hashes in a few dozen instructions where the default SipHash
/// took about 160 on every request (issue 41, docs/perf/request-cpu.md).
type Index = HashMap<&'static str, &'static Spec, std::hash::BuildHasherDefault<Fnv1a>>;

fn index() -> &'static Index {
    static INDEX: OnceLock<Index> = OnceLock::new();
    INDEX.get_or_init(|| TABLE.iter().flat_map(|family| family.iter()).map(|s| (s.name, s)).collect())
}

/// 64-bit FNV-1a, for [`index`].
struct Fnv1a(u64);

impl Default for Fnv1a {
    fn default() -> Fnv1a {
        Fnv1a(0xcbf2_9ce4_8422_2325)
    }
}

impl std::hash::Hasher for Fnv1a {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
    }
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

/// The reply a client gets for a storage error: the texts Redis gives where Redis has one.
impl From<crate::store::Error> for Reply {
    fn from(e: crate::store::Error) -> Reply {
        match e {
            crate::store::Error::WrongType => wrong_type(),
            other => Reply::err(other.to_string()),
        }
    }
}

/// Redis's WRONGTYPE error.
pub fn wrong_type() -> Reply {
    Reply::error("WRONGTYPE Operation against a key holding the wrong kind of value")
}

/// `ERR invalid expire time in '<cmd>' command`.
pub fn invalid_expire(cmd: &str) -> Reply {
    Reply::err(format!("invalid expire time in '{cmd}' command"))
}

pub fn syntax_error() -> Reply {
    Reply::err("syntax error")
}

pub fn not_an_integer() -> Reply {
    Reply::err("value is not an integer or out of range")
}

/// `-ERR unknown subcommand '<sub>'. Try <CMD> HELP.` (the subcommand cut at 128 bytes, as Redis does).
pub fn unknown_subcommand(cmd: &str, sub: &[u8]) -> Reply {
    Reply::err(format!(
        "unknown subcommand '{}'. Try {} HELP.",
        String::from_utf8_lossy(&sub[..sub.len().min(128)]),
        cmd
    ))
}

/// `-ERR wrong number of arguments for '<cmd>|<sub>' command`.
pub fn sub_arity(cmd: &str, sub: &[u8]) -> Reply {
    Reply::err(format!("wrong number of arguments for '{cmd}|{}' command", String::from_utf8_lossy(sub)))
}

/// The reply to `<command> HELP`: each line of `lines` as a simple string.
pub fn help_reply(lines: &[&str]) -> Reply {
    Reply::Array(lines.iter().map(|l| Reply::Simple((*l).into())).collect())
}

/// A two-way option word (`ON|OFF`, `LEFT|RIGHT` ...), ASCII case-insensitive: `Some(true)` for `yes`,
/// `Some(false)` for `no`, `None` for anything else.
pub fn either(a: &[u8], yes: &[u8], no: &[u8]) -> Option<bool> {
    if a.eq_ignore_ascii_case(yes) {
        Some(true)
    } else if a.eq_ignore_ascii_case(no) {
        Some(false)
    } else {
        None
    }
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

/// Parses a SCAN-family cursor (an unsigned decimal), or answers Redis's `invalid cursor`.
pub fn arg_cursor(a: &[u8]) -> Result<u64, Reply> {
    std::str::from_utf8(a).ok().and_then(|s| s.parse::<u64>().ok()).ok_or_else(|| Reply::err("invalid cursor"))
}

/// The arguments `numkeys key [key ...] [LIMIT limit]` of SINTERCARD and ZINTERCARD (from `args[1]`): the
/// number of keys and the limit (0: none), or the error Redis answers.
pub(crate) fn parse_intercard(args: &Args) -> Result<(usize, u64), Reply> {
    let n = crate::resp::parse_i64(&args[1]).unwrap_or(0);
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

    #[test]
    fn lookup_finds_every_command_by_its_name_in_any_case() {
        for s in all() {
            assert!(std::ptr::eq(lookup(s.name.as_bytes()).unwrap(), s), "{}", s.name);
            assert!(std::ptr::eq(lookup(s.name.to_ascii_uppercase().as_bytes()).unwrap(), s), "{}", s.name);
        }
        for missing in [&b""[..], b"g", b"gett", b"\xff\xfe", &[b'a'; 33]] {
            assert!(lookup(missing).is_none());
        }
    }

    #[test]
    fn shared_argument_helpers_answer_like_redis() {
        assert_eq!(either(b"ON", b"on", b"off"), Some(true));
        assert_eq!(either(b"Left", b"left", b"right"), Some(true));
        assert_eq!(either(b"off", b"on", b"off"), Some(false));
        assert_eq!(either(b"onn", b"on", b"off"), None);
        assert_eq!(arg_cursor(b"0"), Ok(0));
        assert_eq!(arg_cursor(b"18446744073709551615"), Ok(u64::MAX));
        for bad in [&b"-1"[..], b"1x", b"", b"18446744073709551616"] {
            assert_eq!(arg_cursor(bad), Err(Reply::err("invalid cursor")));
        }
        assert_eq!(
            unknown_subcommand("CLIENT", b"nosuch"),
            Reply::err("unknown subcommand 'nosuch'. Try CLIENT HELP.")
        );
        let long = vec![b'x'; 200];
        let Reply::Error(msg) = unknown_subcommand("CONFIG", &long) else { panic!("not an error") };
        assert!(msg.contains(&format!("'{}'", "x".repeat(128))), "{msg}");
        assert_eq!(
            sub_arity("object", b"encoding"),
            Reply::err("wrong number of arguments for 'object|encoding' command")
        );
        assert_eq!(
            help_reply(&["A", "  b"]),
            Reply::Array(vec![Reply::Simple("A".into()), Reply::Simple("  b".into())])
        );
    }

    /// One line per command, in [`all`]'s order: what `COMMAND`, `COMMAND INFO` and `COMMAND DOCS` print.
    fn render_table() -> String {
        let mut out = String::new();
        for s in all() {
            let mut names: Vec<&str> =
                flags::NAMES.iter().filter(|(bit, _)| s.flags & bit != 0).map(|(_, name)| *name).collect();
            if s.flags & flags::EXTENSION != 0 {
                names.push("extension");
            }
            let kind = match s.handler {
                Handler::Conn(_) => "conn",
                Handler::Read(_) => "read",
                Handler::Write(_) => "write",
            };
            out.push_str(&format!(
                "{} {} [{}] {} {} {} {} {}\n",
                s.name,
                s.arity,
                names.join(","),
                s.first_key,
                s.last_key,
                s.step,
                kind,
                s.summary
            ));
        }
        out
    }

    /// The command table as clients see it does not change by accident. After a deliberate change (a new
    /// command, a new flag), rewrite the snapshot with `UPDATE_SNAPSHOTS=1` and review its diff.
    #[test]
    fn command_table_matches_snapshot() {
        const PATH: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/src/commands/testdata/command_table.txt");
        let got = render_table();
        if std::env::var_os("UPDATE_SNAPSHOTS").is_some() {
            std::fs::write(PATH, &got).unwrap();
        }
        let want = std::fs::read_to_string(PATH).unwrap();
        assert_eq!(got, want, "the command table differs from {PATH}");
    }
}
