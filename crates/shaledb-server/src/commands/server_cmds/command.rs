//! COMMAND (COUNT, INFO, DOCS, LIST, GETKEYS, HELP): the command table as clients read it.

use super::glob_match;
use super::text;
use crate::commands::flags::*;
use crate::commands::{help_reply, sub_arity, unknown_subcommand, Spec};
use crate::resp::{Args, Reply};
use crate::server::{Session, Shared};

fn flag_names(spec: &Spec) -> Vec<&'static str> {
    let mut names: Vec<&'static str> = NAMES.iter().filter(|(f, _)| spec.flags & f != 0).map(|(_, n)| *n).collect();
    if super::keyspecs::movable(spec.name) {
        names.push("movablekeys");
    }
    names
}

/// ACL categories: Redis 7.0's for its commands, from the flags for this server's own (`crate::acl`).
fn acl_categories(spec: &Spec) -> Vec<String> {
    crate::acl::universe().category_names(spec.name)
}

fn command_info(spec: &Spec) -> Reply {
    let key_specs = if spec.first_key > 0 {
        // Redis 7's key spec: keys start at `first_key`, run to `last_key` (relative to the end when < 0) in
        // steps of `step`.
        let lastkey = if spec.last_key < 0 { spec.last_key as i64 } else { (spec.last_key - spec.first_key) as i64 };
        let access = if spec.is_write() || spec.flags & WRITE != 0 { "RW" } else { "RO" };
        vec![Reply::Map(vec![
            (Reply::bulk("flags"), Reply::Set(vec![Reply::Simple(access.into())])),
            (
                Reply::bulk("begin_search"),
                Reply::Map(vec![
                    (Reply::bulk("type"), Reply::bulk("index")),
                    (Reply::bulk("spec"), Reply::Map(vec![(Reply::bulk("index"), Reply::Int(spec.first_key as i64))])),
                ]),
            ),
            (
                Reply::bulk("find_keys"),
                Reply::Map(vec![
                    (Reply::bulk("type"), Reply::bulk("range")),
                    (
                        Reply::bulk("spec"),
                        Reply::Map(vec![
                            (Reply::bulk("lastkey"), Reply::Int(lastkey)),
                            (Reply::bulk("keystep"), Reply::Int(spec.step as i64)),
                            (Reply::bulk("limit"), Reply::Int(0)),
                        ]),
                    ),
                ]),
            ),
        ])]
    } else {
        Vec::new()
    };
    Reply::Array(vec![
        Reply::bulk(spec.name),
        Reply::Int(spec.arity as i64),
        Reply::Set(flag_names(spec).into_iter().map(|f| Reply::Simple(f.into())).collect()),
        Reply::Int(spec.first_key as i64),
        Reply::Int(spec.last_key as i64),
        Reply::Int(spec.step as i64),
        Reply::Set(acl_categories(spec).into_iter().map(Reply::Simple).collect()),
        Reply::Set(Vec::new()),
        Reply::Array(key_specs),
        Reply::Array(super::subcommands::of(spec).iter().map(command_info).collect()),
    ])
}

fn command_docs(spec: &Spec) -> Reply {
    let mut doc = vec![(Reply::bulk("summary"), Reply::bulk(spec.summary))];
    if spec.flags & EXTENSION != 0 {
        doc.push((Reply::bulk("group"), Reply::bulk("shaledb")));
    }
    Reply::Map(doc)
}

/// The keys of a command line (`COMMAND GETKEYS`), in order.
#[cfg(test)]
pub(super) fn keys_of(spec: &Spec, args: &[bytes::Bytes]) -> Vec<bytes::Bytes> {
    match super::keyspecs::find(spec, args) {
        Ok(found) => found.into_iter().filter_map(|(i, _)| args.get(i).cloned()).collect(),
        Err(_) => Vec::new(),
    }
}

const COMMAND_HELP: &[&str] = &[
    "COMMAND <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "(no subcommand)",
    "    Return details about all commands.",
    "COUNT",
    "    Return the total number of commands in this server.",
    "LIST [FILTERBY (MODULE <module-name>|ACLCAT <category>|PATTERN <pattern>)]",
    "    Return a list of all commands in this server.",
    "INFO [<command-name> ...]",
    "    Return details about multiple commands.",
    "DOCS [<command-name> ...]",
    "    Return documentation details about multiple commands.",
    "GETKEYS <full-command>",
    "    Return the keys from a full command.",
    "HELP",
    "    Print this help.",
];

pub(super) fn command(_: &mut Session, _: &Shared, args: &Args) -> Reply {
    let mut specs: Vec<&'static Spec> = crate::commands::all().collect();
    specs.sort_by_key(|s| s.name);
    let Some(sub) = args.get(1).map(|a| a.to_ascii_lowercase()) else {
        return Reply::Array(specs.iter().map(|s| command_info(s)).collect());
    };
    let named = |names: &[bytes::Bytes]| -> Vec<Option<&'static Spec>> {
        names.iter().map(|n| crate::commands::lookup(n)).collect()
    };
    match sub.as_slice() {
        b"help" if args.len() == 2 => help_reply(COMMAND_HELP),
        b"count" if args.len() == 2 => Reply::Int(specs.len() as i64),
        b"count" => sub_arity("command", &sub),
        b"info" => {
            if args.len() == 2 {
                return Reply::Array(specs.iter().map(|s| command_info(s)).collect());
            }
            Reply::Array(named(&args[2..]).into_iter().map(|s| s.map_or(Reply::NilArray, command_info)).collect())
        }
        b"docs" => {
            let list: Vec<&'static Spec> =
                if args.len() == 2 { specs } else { named(&args[2..]).into_iter().flatten().collect() };
            Reply::Map(list.into_iter().map(|s| (Reply::bulk(s.name), command_docs(s))).collect())
        }
        b"list" => {
            let filter = match args.len() {
                2 => None,
                5 if args[2].eq_ignore_ascii_case(b"filterby") => Some((args[3].to_ascii_lowercase(), &args[4])),
                _ => return crate::commands::syntax_error(),
            };
            let mut out = Vec::new();
            for s in specs {
                // The command, then its subcommands (`config|get` ...), each judged by the filter.
                let names = std::iter::once(s.name.to_string()).chain(super::stats::subcommands_of(s.name));
                for name in names {
                    let keep = match &filter {
                        None => true,
                        Some((kind, v)) => match kind.as_slice() {
                            b"module" => false,
                            b"aclcat" => {
                                let cat = text(v).to_ascii_lowercase();
                                let cats = crate::acl::universe().category_names(&name);
                                cats.iter().any(|c| c[1..] == cat)
                            }
                            b"pattern" => glob_match(v, name.as_bytes(), true),
                            _ => return crate::commands::syntax_error(),
                        },
                    };
                    if keep {
                        out.push(Reply::bulk(name));
                    }
                }
            }
            Reply::Array(out)
        }
        b"getkeys" | b"getkeysandflags" => {
            if args.len() < 3 {
                return sub_arity("command", &sub);
            }
            let Some(spec) = crate::commands::lookup(&args[2]) else { return Reply::err("Invalid command specified") };
            if !spec.arity_ok(args.len() - 2) {
                return Reply::err("Invalid number of arguments specified for command");
            }
            let line = &args[2..];
            let found = match super::keyspecs::find(spec, line) {
                Ok(found) => found,
                Err(super::keyspecs::KeysError::Invalid) => {
                    return Reply::err("Invalid arguments specified for command")
                }
            };
            if found.is_empty() {
                // A command whose keys move may have none on this line; one without key arguments is an error.
                if super::keyspecs::movable(spec.name) {
                    return Reply::Array(Vec::new());
                }
                return Reply::err("The command has no key arguments");
            }
            if sub == b"getkeys" {
                Reply::Array(found.into_iter().map(|(i, _)| Reply::Bulk(line[i].clone())).collect())
            } else {
                Reply::Array(
                    found
                        .into_iter()
                        .map(|(i, k)| {
                            let flags = super::keyspecs::key_flags(spec, line, k);
                            Reply::Array(vec![
                                Reply::Bulk(line[i].clone()),
                                Reply::Array(flags.into_iter().map(|f| Reply::Simple(f.into())).collect()),
                            ])
                        })
                        .collect(),
                )
            }
        }
        _ => unknown_subcommand("COMMAND", &args[1]),
    }
}
