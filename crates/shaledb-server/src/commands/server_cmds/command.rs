//! COMMAND (COUNT, INFO, DOCS, LIST, GETKEYS, HELP): the command table as clients read it.

use super::glob_match;
use super::text;
use crate::commands::flags::*;
use crate::commands::{help_reply, sub_arity, unknown_subcommand, Spec};
use crate::resp::{Args, Reply};
use crate::server::{Session, Shared};

use super::facts::{self, BeginSearch, CommandFacts, FindKeys, KeySpec};

fn strs(items: &[&str]) -> Vec<Reply> {
    items.iter().map(|s| Reply::Simple((*s).into())).collect()
}

fn map(pairs: Vec<(&'static str, Reply)>) -> Reply {
    Reply::Map(pairs.into_iter().map(|(k, v)| (Reply::bulk(k), v)).collect())
}

fn key_spec(k: &KeySpec) -> Reply {
    let begin = match k.begin_search {
        BeginSearch::Index(i) => {
            map(vec![("type", Reply::bulk("index")), ("spec", map(vec![("index", Reply::Int(i))]))])
        }
        BeginSearch::Keyword { keyword, startfrom } => map(vec![
            ("type", Reply::bulk("keyword")),
            ("spec", map(vec![("keyword", Reply::bulk(keyword)), ("startfrom", Reply::Int(startfrom))])),
        ]),
        BeginSearch::Unknown => map(vec![("type", Reply::bulk("unknown")), ("spec", map(Vec::new()))]),
    };
    let find = match k.find_keys {
        FindKeys::Range { lastkey, keystep, limit } => map(vec![
            ("type", Reply::bulk("range")),
            (
                "spec",
                map(vec![
                    ("lastkey", Reply::Int(lastkey)),
                    ("keystep", Reply::Int(keystep)),
                    ("limit", Reply::Int(limit)),
                ]),
            ),
        ]),
        FindKeys::Keynum { keynumidx, firstkey, keystep } => map(vec![
            ("type", Reply::bulk("keynum")),
            (
                "spec",
                map(vec![
                    ("keynumidx", Reply::Int(keynumidx)),
                    ("firstkey", Reply::Int(firstkey)),
                    ("keystep", Reply::Int(keystep)),
                ]),
            ),
        ]),
        FindKeys::Unknown => map(vec![("type", Reply::bulk("unknown")), ("spec", map(Vec::new()))]),
    };
    let mut pairs = Vec::new();
    if let Some(notes) = k.notes {
        pairs.push(("notes", Reply::bulk(notes)));
    }
    pairs.push(("flags", Reply::Set(strs(k.flags))));
    pairs.push(("begin_search", begin));
    pairs.push(("find_keys", find));
    map(pairs)
}

/// One command's `COMMAND INFO` entry from its facts; `spec` (a top-level command) decides the arity and
/// the flags this server acts on, `container` (its name) which subcommands are listed.
fn info_from_facts(f: &CommandFacts, spec: Option<&Spec>, container: &str) -> Reply {
    let (arity, flags) = match spec {
        Some(spec) => (spec.arity, facts::reply_flags(spec, f)),
        None => (f.arity, f.flags.to_vec()),
    };
    let subs: Vec<Reply> = facts::subcommands(container, f).map(|s| info_from_facts(s, None, container)).collect();
    Reply::Array(vec![
        Reply::bulk(f.name),
        Reply::Int(arity as i64),
        Reply::Set(strs(&flags)),
        Reply::Int(f.first_key as i64),
        Reply::Int(f.last_key as i64),
        Reply::Int(f.step as i64),
        Reply::Set(strs(f.acl_categories)),
        Reply::Set(f.tips.iter().map(|t| Reply::bulk(*t)).collect()),
        Reply::Set(f.key_specs.iter().map(key_spec).collect()),
        if subs.is_empty() { Reply::Set(Vec::new()) } else { Reply::Array(subs) },
    ])
}

/// `COMMAND INFO` of a command of this server: Redis's facts for Redis's commands, the `Spec` for this
/// server's own (`SHALEDB.RANGE`).
fn command_info(spec: &Spec) -> Reply {
    if let Some(f) = facts::lookup(spec.name) {
        return info_from_facts(f, Some(spec), spec.name);
    }
    let flag_names: Vec<&str> = NAMES.iter().filter(|(f, _)| spec.flags & f != 0).map(|(_, n)| *n).collect();
    let key_specs = if spec.first_key > 0 {
        // One range of keys from `first_key` to `last_key` (from the end when negative).
        let lastkey = if spec.last_key < 0 { spec.last_key as i64 } else { (spec.last_key - spec.first_key) as i64 };
        let access = facts::own_key_flags(spec);
        vec![key_spec(&KeySpec {
            notes: None,
            flags: access,
            begin_search: BeginSearch::Index(spec.first_key as i64),
            find_keys: FindKeys::Range { lastkey, keystep: spec.step as i64, limit: 0 },
        })]
    } else {
        Vec::new()
    };
    Reply::Array(vec![
        Reply::bulk(spec.name),
        Reply::Int(spec.arity as i64),
        Reply::Set(strs(&flag_names)),
        Reply::Int(spec.first_key as i64),
        Reply::Int(spec.last_key as i64),
        Reply::Int(spec.step as i64),
        Reply::Set(crate::acl::universe().category_names(spec.name).into_iter().map(Reply::Simple).collect()),
        Reply::Set(Vec::new()),
        Reply::Set(key_specs),
        Reply::Set(Vec::new()),
    ])
}

/// `COMMAND INFO name`: a command, or a subcommand by its full name (`config|get`).
fn info_by_name(name: &[u8]) -> Reply {
    let lower = String::from_utf8_lossy(name).to_ascii_lowercase();
    match lower.split_once('|') {
        None => crate::commands::lookup(name).map_or(Reply::NilArray, command_info),
        Some((top, _)) => {
            let sub = crate::commands::lookup(top.as_bytes())
                .and_then(|spec| facts::lookup(spec.name).map(|f| (spec, f)))
                .and_then(|(spec, f)| facts::subcommands(spec.name, f).find(|s| s.name == lower).map(|s| (spec, s)));
            sub.map_or(Reply::NilArray, |(spec, s)| info_from_facts(s, None, spec.name))
        }
    }
}

/// `COMMAND DOCS` of a command: this server's own one-line summary, then the plain facts of Redis's entry
/// (since, group, doc flags, deprecated since), in Redis's order. Redis's prose (summaries, complexities,
/// histories, argument descriptions) is not repeated.
fn command_docs(spec: &Spec) -> Reply {
    let mut doc = vec![(Reply::bulk("summary"), Reply::bulk(spec.summary))];
    match facts::lookup(spec.name).and_then(|f| f.docs.as_ref()) {
        Some(d) => {
            doc.push((Reply::bulk("since"), Reply::bulk(d.since)));
            doc.push((Reply::bulk("group"), Reply::bulk(d.group)));
            if !d.doc_flags.is_empty() {
                doc.push((Reply::bulk("doc_flags"), Reply::Set(strs(d.doc_flags))));
            }
            if let Some(v) = d.deprecated_since {
                doc.push((Reply::bulk("deprecated_since"), Reply::bulk(v)));
            }
        }
        None if spec.flags & EXTENSION != 0 => doc.push((Reply::bulk("group"), Reply::bulk("shaledb"))),
        None => {}
    }
    Reply::Map(doc)
}

/// The keys of a command line (`COMMAND GETKEYS`), in order.
#[cfg(test)]
pub(super) fn keys_of(_spec: &Spec, args: &[bytes::Bytes]) -> Vec<bytes::Bytes> {
    match facts::getkeys(args) {
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
            Reply::Array(args[2..].iter().map(|n| info_by_name(n)).collect())
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
            if args.len() < 4 {
                return sub_arity("command", &sub);
            }
            let line = &args[2..];
            let found = match facts::getkeys(line) {
                Ok(found) => found,
                Err(e) => return Reply::err(e.text()),
            };
            if sub == b"getkeys" {
                Reply::Array(found.into_iter().map(|(i, _)| Reply::Bulk(line[i].clone())).collect())
            } else {
                Reply::Array(
                    found
                        .into_iter()
                        .map(|(i, flags)| Reply::Array(vec![Reply::Bulk(line[i].clone()), Reply::Set(strs(&flags))]))
                        .collect(),
                )
            }
        }
        _ => unknown_subcommand("COMMAND", &args[1]),
    }
}
