//! Server commands: INFO, CONFIG, TIME, COMMAND, SHUTDOWN, LASTSAVE, BGSAVE, SAVE.
//!
//! Files by role: this one has the command table, CONFIG, TIME and SHUTDOWN; `info.rs` INFO, `command.rs`
//! COMMAND, `save.rs` SAVE, BGSAVE and LASTSAVE (checkpoints), `glob.rs` the glob matcher.

use super::{help_reply, sub_arity, unknown_subcommand, Spec};
use crate::config::SetError;
use crate::resp::{Args, Reply};
use crate::server::{Session, Shared};

mod command;
mod glob;
mod info;
mod save;

use command::command;
pub use glob::glob_match;
use info::info;
pub use info::keyspace_scan;
use save::{bgsave, lastsave, save};
pub use save::{SaveState, Saves};

pub static COMMANDS: &[Spec] = &[
    cmd! { "info", -1, LOADING | STALE, [0, 0, 0], Conn(info), "Returns information and statistics about the server." },
    cmd! { "config", -2, ADMIN | NOSCRIPT | LOADING | STALE, [0, 0, 0], Conn(config), "A container for server configuration commands (GET, SET, RESETSTAT, REWRITE)." },
    cmd! { "time", 1, LOADING | STALE | FAST, [0, 0, 0], Conn(time), "Returns the server time." },
    cmd! { "command", -1, LOADING | STALE, [0, 0, 0], Conn(command), "Returns detailed information about all commands (COUNT, INFO, DOCS, LIST, GETKEYS)." },
    cmd! { "shutdown", -1, ADMIN | NOSCRIPT | LOADING | STALE, [0, 0, 0], Conn(shutdown), "Stops the server: in-flight commands finish, the WAL is synced, the engine is closed." },
    cmd! { "lastsave", 1, LOADING | STALE | FAST, [0, 0, 0], Conn(lastsave), "Returns the Unix time of the last successful SAVE or BGSAVE checkpoint (or of the start)." },
    cmd! { "bgsave", -1, ADMIN | NOSCRIPT, [0, 0, 0], Conn(bgsave), "Writes a checkpoint of the database into <dir>/checkpoints/<unix-time> in the background." },
    cmd! { "save", 1, ADMIN | NOSCRIPT, [0, 0, 0], Conn(save), "Writes a checkpoint of the database into <dir>/checkpoints/<unix-time> (a copy: every acknowledged write is already durable)." },
];

fn text(a: &[u8]) -> String {
    String::from_utf8_lossy(a).into_owned()
}

// ---------------------------------------------------------------------------------------------------------
// Glob patterns (CONFIG GET, COMMAND LIST FILTERBY PATTERN)
// ---------------------------------------------------------------------------------------------------------
// INFO
// ---------------------------------------------------------------------------------------------------------
// CONFIG

const CONFIG_HELP: &[&str] = &[
    "CONFIG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "GET <pattern>",
    "    Return parameters matching the glob-like <pattern> and their values.",
    "SET <directive> <value>",
    "    Set the configuration <directive> to <value>.",
    "RESETSTAT",
    "    Reset statistics reported by the INFO command.",
    "REWRITE",
    "    Rewrite the configuration file.",
    "HELP",
    "    Print this help.",
];

fn config(_: &mut Session, shared: &Shared, args: &Args) -> Reply {
    let sub = args[1].to_ascii_lowercase();
    match sub.as_slice() {
        b"help" if args.len() == 2 => help_reply(CONFIG_HELP),
        b"get" => {
            if args.len() < 3 {
                return sub_arity("config", &sub);
            }
            let cfg = shared.config.read();
            let mut pairs = Vec::new();
            for name in crate::config::parameter_names() {
                if args[2..].iter().any(|p| glob_match(p, name.as_bytes(), true)) {
                    let v = if name == "appendfsync" {
                        shared.store.appendfsync().name().to_string()
                    } else {
                        cfg.get(name).unwrap_or_default()
                    };
                    pairs.push((Reply::bulk(name), Reply::bulk(v)));
                }
            }
            Reply::Map(pairs)
        }
        b"set" => {
            if args.len() < 4 {
                return sub_arity("config", &sub);
            }
            if !args.len().is_multiple_of(2) {
                return super::syntax_error();
            }
            config_set(shared, &args[2..])
        }
        b"resetstat" => {
            if args.len() != 2 {
                return sub_arity("config", &sub);
            }
            shared.stats.reset();
            Reply::Ok
        }
        b"rewrite" => {
            if args.len() != 2 {
                return sub_arity("config", &sub);
            }
            config_rewrite(shared)
        }
        _ => unknown_subcommand("CONFIG", &args[1]),
    }
}

/// `CONFIG SET name value [name value ...]`: all or nothing, as in Redis 7.
fn config_set(shared: &Shared, pairs: &[bytes::Bytes]) -> Reply {
    let mut cfg = shared.config.write();
    let mut next = cfg.clone();
    let mut seen = Vec::new();
    for pair in pairs.chunks(2) {
        let name = text(&pair[0]).to_ascii_lowercase();
        if seen.contains(&name) {
            return Reply::err(format!(
                "CONFIG SET failed (possibly related to argument '{name}') - duplicate parameter"
            ));
        }
        match next.set_value(&name, &text(&pair[1]), false) {
            Ok(()) => seen.push(name),
            Err(SetError::Unknown) => {
                return Reply::err(format!(
                    "Unknown option or number of arguments for CONFIG SET - '{}'",
                    text(&pair[0])
                ))
            }
            Err(SetError::Immutable) => {
                return Reply::err(format!(
                    "CONFIG SET failed (possibly related to argument '{name}') - can't set immutable config"
                ))
            }
            Err(SetError::Invalid(why)) => {
                return Reply::err(format!("CONFIG SET failed (possibly related to argument '{name}') - {why}"))
            }
        }
    }
    shared.store.set_appendfsync(next.appendfsync);
    *cfg = next;
    Reply::Ok
}

fn config_rewrite(shared: &Shared) -> Reply {
    let cfg = shared.config.read().clone();
    let Some(path) = cfg.config_file.clone() else {
        return Reply::err("The server is running without a config file");
    };
    let mut cfg = cfg;
    cfg.appendfsync = shared.store.appendfsync();
    let result = tokio::task::block_in_place(|| -> std::io::Result<()> {
        let old = std::fs::read_to_string(&path)?;
        let new = cfg.rewrite_file(&old);
        let tmp = path.with_extension("rewrite.tmp");
        {
            use std::io::Write;
            let mut f = std::fs::File::create(&tmp)?;
            f.write_all(new.as_bytes())?;
            f.sync_all()?;
        }
        std::fs::rename(&tmp, &path)?;
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::File::open(dir)?.sync_all()?;
        }
        Ok(())
    });
    match result {
        Ok(()) => Reply::Ok,
        Err(e) => {
            eprintln!("# CONFIG REWRITE of {} failed: {e}", path.display());
            Reply::err(format!("Rewriting config file: {e}"))
        }
    }
}

// ---------------------------------------------------------------------------------------------------------
// TIME, SHUTDOWN

fn time(_: &mut Session, _: &Shared, _: &Args) -> Reply {
    let d = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    Reply::Array(vec![Reply::bulk(d.as_secs().to_string()), Reply::bulk(d.subsec_micros().to_string())])
}

/// `SHUTDOWN [NOSAVE|SAVE] [NOW] [FORCE] [ABORT]`: stops the server as SIGTERM does and closes this
/// connection without a reply (as Redis does). SAVE and NOSAVE make no difference: every acknowledged write
/// is already durable, the WAL is synced and the engine closed either way (SHUTDOWN SAVE writes no checkpoint:
/// send SAVE first for one).
fn shutdown(s: &mut Session, shared: &Shared, args: &Args) -> Reply {
    let (mut save, mut nosave, mut abort) = (false, false, false);
    for a in &args[1..] {
        match a.to_ascii_lowercase().as_slice() {
            b"save" => save = true,
            b"nosave" => nosave = true,
            b"now" | b"force" => {}
            b"abort" => abort = true,
            _ => return super::syntax_error(),
        }
    }
    if (save && nosave) || (abort && args.len() != 2) {
        return super::syntax_error();
    }
    if abort {
        return Reply::err("No shutdown in progress.");
    }
    eprintln!("# SHUTDOWN asked by client {} ({})", s.id, s.addr);
    shared.request_shutdown();
    s.close_now = true;
    Reply::Ok
}

// ---------------------------------------------------------------------------------------------------------
// COMMAND

#[cfg(test)]
mod tests;
