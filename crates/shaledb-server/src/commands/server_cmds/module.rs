//! MODULE: this server loads no Redis modules. LIST answers the empty list; LOAD, LOADEX and UNLOAD get the
//! refusal Redis 7.0 gives under its default `enable-module-command no`.

use crate::commands::{help_reply, sub_arity, unknown_subcommand};
use crate::resp::{Args, Reply};
use crate::server::{Session, Shared};

const MODULE_HELP: &[&str] = &[
    "MODULE <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "LIST",
    "    Return the loaded modules: none, as this server loads no modules.",
    "LOAD <path> [<arg> ...]",
    "    Refused: this server loads no modules.",
    "LOADEX <path> [[CONFIG NAME VALUE] [CONFIG NAME VALUE]] [ARGS ...]",
    "    Refused: this server loads no modules.",
    "UNLOAD <name>",
    "    Refused: this server loads no modules.",
    "HELP",
    "    Print this help.",
];

/// `MODULE LIST | LOAD | LOADEX | UNLOAD | HELP`.
pub fn module(_: &mut Session, _: &Shared, args: &Args) -> Reply {
    let sub = args[1].to_ascii_lowercase();
    let argc = args.len();
    let fits = match sub.as_slice() {
        b"list" | b"help" => argc == 2,
        b"load" | b"loadex" => argc >= 3,
        b"unload" => argc == 3,
        _ => return unknown_subcommand("MODULE", &args[1]),
    };
    if !fits {
        return sub_arity("module", &sub);
    }
    match sub.as_slice() {
        b"list" => Reply::Array(Vec::new()),
        b"help" => help_reply(MODULE_HELP),
        _ => Reply::err(
            "MODULE command not allowed. If the enable-module-command option is set to \"local\", you can run it \
             from a local connection, otherwise you need to set this option in the configuration file, and then \
             restart the server.",
        ),
    }
}
