//! ACL (SETUSER, GETUSER, DELUSER, LIST, USERS, WHOAMI, CAT, GENPASS, LOG, DRYRUN, SAVE, LOAD, HELP), and
//! the permission check every command line passes before it runs ([`check`]). The users and their rules
//! are in `crate::acl`.

use super::{help_reply, sub_arity, unknown_subcommand, Spec};
use crate::acl::{Denied, LogContext, LogReason, UserHandle};
use crate::resp::{Args, Reply};
use crate::server::{Session, Shared};
use bytes::Bytes;
use std::sync::Arc;

pub static COMMANDS: &[Spec] = &[
    cmd! { "acl", -2, NOSCRIPT | LOADING | STALE, [0, 0, 0], Conn(acl), "A container for Access List Control commands (SETUSER, GETUSER, DELUSER, LIST, CAT, LOG ...)." },
];

/// The permission check of a command line for the connection's user: `Err` is the NOPERM reply, and the
/// refusal is in the ACL log. Free of locks and allocations for a user allowed everything.
#[inline]
pub fn check(s: &Session, shared: &Shared, spec: &Spec, args: &Args) -> Result<(), Reply> {
    match s.user.check(spec, args) {
        Ok(()) => Ok(()),
        Err(denied) => Err(refuse(s, shared, spec, args, denied)),
    }
}

#[cold]
fn refuse(s: &Session, shared: &Shared, spec: &Spec, args: &Args, denied: Denied) -> Reply {
    let context = if s.multi.is_some() { LogContext::Multi } else { LogContext::Toplevel };
    let full = full_name(spec, args);
    let (reason, object, reply) = match denied {
        Denied::Command => (
            LogReason::Command,
            Bytes::from(full.clone()),
            format!("NOPERM this user has no permissions to run the '{full}' command"),
        ),
        Denied::Key(i) => (
            LogReason::Key,
            args[i].clone(),
            "NOPERM this user has no permissions to access one of the keys used as arguments".to_string(),
        ),
        Denied::Channel(i) => (
            LogReason::Channel,
            args[i].clone(),
            "NOPERM this user has no permissions to access one of the channels used as arguments".to_string(),
        ),
    };
    log(s, shared, reason, context, object, Bytes::from(s.user.name.clone()));
    Reply::error(reply)
}

/// Records a refusal (`reason`) in the ACL log.
pub fn log(s: &Session, shared: &Shared, reason: LogReason, context: LogContext, object: Bytes, username: Bytes) {
    let max = shared.config.read().get("acllog-max-len").and_then(|v| v.parse().ok()).unwrap_or(128);
    let info = super::connection::client_line(&s.entry);
    shared.acl.log(reason, context, object, username, info, max);
}

/// `name` or `name|sub` for a container command with a known subcommand.
fn full_name(spec: &Spec, args: &[Bytes]) -> String {
    let u = crate::acl::universe();
    match u.command_id(spec.name, args) {
        Some(id) => u.name(id).to_string(),
        None => spec.name.to_string(),
    }
}

/// Makes the session run as `user` (AUTH, HELLO AUTH).
pub fn set_user(s: &mut Session, shared: &Shared, user: Arc<UserHandle>) {
    shared.acl.bind_client(s.id, &user);
    *s.entry.user.lock() = Some(user.clone());
    s.user = user;
    s.authenticated = true;
}

/// Checks `user`/`pass` (AUTH and HELLO AUTH): the session runs as that user on success; a failure is
/// logged (reason `auth`) and answered with Redis's WRONGPASS.
pub fn authenticate(s: &mut Session, shared: &Shared, user: &[u8], pass: &[u8]) -> Reply {
    match shared.acl.authenticate(user, pass) {
        Some(h) => {
            set_user(s, shared, h);
            Reply::Ok
        }
        None => {
            let context = if s.multi.is_some() { LogContext::Multi } else { LogContext::Toplevel };
            log(s, shared, LogReason::Auth, context, Bytes::from_static(b"AUTH"), Bytes::copy_from_slice(user));
            Reply::error("WRONGPASS invalid username-password pair or user is disabled.")
        }
    }
}

/// Closes the connections of users that were deleted (the caller's own after its reply, as Redis does).
fn disconnect(s: &mut Session, shared: &Shared, gone: &[Arc<UserHandle>]) {
    if gone.is_empty() {
        return;
    }
    if gone.iter().any(|g| Arc::ptr_eq(g, &s.user)) {
        s.close_after_reply = true;
    }
    let clients: Vec<_> = shared.clients.lock().values().cloned().collect();
    for c in clients {
        if c.id == s.id {
            continue;
        }
        let of_gone = c.user.lock().as_ref().is_some_and(|u| gone.iter().any(|g| Arc::ptr_eq(g, u)));
        if of_gone {
            shared.disconnect(&c);
        }
    }
}

/// After `ACL SETUSER`: the subscribers logged in as that user whose subscriptions it no longer allows are
/// disconnected, as Redis does.
fn kill_refused_subscribers(s: &mut Session, shared: &Shared, name: &[u8]) {
    let Some(h) = shared.acl.get(name) else { return };
    let user = h.get();
    let clients: Vec<_> = shared.clients.lock().values().cloned().collect();
    let mine: Vec<_> =
        clients.into_iter().filter(|c| c.user.lock().as_ref().is_some_and(|u| Arc::ptr_eq(u, &h))).collect();
    if mine.is_empty() {
        return;
    }
    let ids: Vec<u64> = mine.iter().map(|c| c.id).collect();
    let refused = shared.pubsub.refused_subscribers(&ids, |n, p| user.channel_allowed(n, p));
    for c in mine.iter().filter(|c| refused.contains(&c.id)) {
        if c.id == s.id {
            s.close_after_reply = true;
        } else {
            shared.disconnect(c);
        }
    }
}

const ACL_HELP: &[&str] = &[
    "ACL <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "CAT [<category>]",
    "    List all commands that belong to <category>, or all command categories",
    "    when no category is specified.",
    "DELUSER <username> [<username> ...]",
    "    Delete a list of users.",
    "DRYRUN <username> <command> [<arg> ...]",
    "    Returns whether the user can execute the given command without executing the command.",
    "GETUSER <username>",
    "    Get the user's details.",
    "GENPASS [<bits>]",
    "    Generate a secure 256-bit user password. The optional `bits` argument can",
    "    be used to specify a different size.",
    "LIST",
    "    Show users details in config file format.",
    "LOAD",
    "    Reload users from the ACL file.",
    "LOG [<count> | RESET]",
    "    Show the ACL log entries.",
    "SAVE",
    "    Save the current config to the ACL file.",
    "SETUSER <username> <attribute> [<attribute> ...]",
    "    Create or modify a user with the specified attributes.",
    "USERS",
    "    List all the registered usernames.",
    "WHOAMI",
    "    Return the current connection username.",
    "HELP",
    "    Print this help.",
];

const NO_ACLFILE: &str = "This Redis instance is not configured to use an ACL file. You may want to specify users via \
                          the ACL SETUSER command and then issue a CONFIG REWRITE (assuming you have a Redis \
                          configuration file set) in order to store users in the Redis configuration.";

fn acl(s: &mut Session, shared: &Shared, args: &Args) -> Reply {
    let sub = args[1].to_ascii_lowercase();
    let argc = args.len();
    let arity = |ok: bool| if ok { None } else { Some(sub_arity("acl", &sub)) };
    match sub.as_slice() {
        b"setuser" => arity(argc >= 3).unwrap_or_else(|| {
            let r = setuser(shared, args);
            if r == Reply::Ok {
                kill_refused_subscribers(s, shared, &args[2]);
            }
            r
        }),
        b"deluser" => arity(argc >= 3).unwrap_or_else(|| {
            if args[2..].iter().any(|n| &n[..] == b"default") {
                return Reply::err("The 'default' user cannot be removed");
            }
            let gone = shared.acl.delete(&args[2..]);
            disconnect(s, shared, &gone);
            Reply::Int(gone.len() as i64)
        }),
        b"getuser" => arity(argc == 3).unwrap_or_else(|| getuser(shared, &args[2])),
        b"list" => arity(argc == 2).unwrap_or_else(|| {
            Reply::Array(
                shared
                    .acl
                    .users()
                    .iter()
                    .map(|h| Reply::bulk(format!("user {} {}", h.name, h.get().describe())))
                    .collect(),
            )
        }),
        b"users" => arity(argc == 2)
            .unwrap_or_else(|| Reply::Array(shared.acl.users().iter().map(|h| Reply::bulk(h.name.clone())).collect())),
        b"whoami" => arity(argc == 2).unwrap_or_else(|| Reply::bulk(s.user.name.clone())),
        b"cat" | b"genpass" | b"log" if argc > 3 => Reply::err(format!(
            "unknown subcommand or wrong number of arguments for '{}'. Try ACL HELP.",
            String::from_utf8_lossy(&args[1][..args[1].len().min(128)])
        )),
        b"cat" => cat(args),
        b"genpass" => genpass(args),
        b"log" => log_cmd(shared, args),
        b"dryrun" => arity(argc >= 4).unwrap_or_else(|| dryrun(shared, args)),
        b"save" | b"load" => arity(argc == 2).unwrap_or_else(|| {
            let path = shared.config.read().get("aclfile").unwrap_or_default();
            if path.is_empty() {
                return Reply::err(NO_ACLFILE);
            }
            if sub == b"save" {
                match shared.acl.save(&path) {
                    Ok(()) => Reply::Ok,
                    Err(e) => {
                        eprintln!("# ACL SAVE to {path}: {e}");
                        Reply::err(
                            "There was an error trying to save the ACLs. Please check the server logs for more \
                             information",
                        )
                    }
                }
            } else {
                match shared.acl.load(&path) {
                    Ok(gone) => {
                        disconnect(s, shared, &gone);
                        Reply::Ok
                    }
                    Err(e) => Reply::err(e.0),
                }
            }
        }),
        b"help" => arity(argc == 2).unwrap_or_else(|| help_reply(ACL_HELP)),
        _ => unknown_subcommand("ACL", &args[1]),
    }
}

fn setuser(shared: &Shared, args: &Args) -> Reply {
    let name = &args[2];
    if name.iter().any(|&c| c.is_ascii_whitespace() || c == 0) {
        return Reply::err("Usernames can't contain spaces or null characters");
    }
    match shared.acl.set_user(name, &args[3..]) {
        Ok(()) => Reply::Ok,
        Err(e) => Reply::err(e),
    }
}

fn selector_fields(s: &crate::acl::user::Selector) -> Vec<(Reply, Reply)> {
    let u = crate::acl::universe();
    vec![
        (Reply::bulk("commands"), Reply::bulk(s.describe_commands(u))),
        (Reply::bulk("keys"), Reply::bulk(s.describe_keys())),
        (Reply::bulk("channels"), Reply::bulk(s.describe_channels())),
    ]
}

fn getuser(shared: &Shared, name: &[u8]) -> Reply {
    let Some(h) = shared.acl.get(name) else { return Reply::Nil };
    let u = h.get();
    let mut fields = vec![
        (Reply::bulk("flags"), Reply::Set(u.flag_names().into_iter().map(Reply::bulk).collect())),
        (Reply::bulk("passwords"), Reply::Array(u.passwords.iter().map(|p| Reply::bulk(p.clone())).collect())),
    ];
    fields.extend(selector_fields(&u.root));
    fields.push((
        Reply::bulk("selectors"),
        Reply::Array(u.selectors.iter().map(|s| Reply::Map(selector_fields(s))).collect()),
    ));
    Reply::Map(fields)
}

fn cat(args: &Args) -> Reply {
    let Some(name) = args.get(2) else {
        return Reply::Array(crate::acl::CATEGORY_NAMES.iter().map(|c| Reply::bulk(*c)).collect());
    };
    let Some(bit) = crate::acl::category_bit(name) else {
        return Reply::err(format!("Unknown category '{}'", String::from_utf8_lossy(&name[..name.len().min(128)])));
    };
    Reply::Array(crate::acl::universe().in_category(bit).into_iter().map(|n| Reply::bulk(n.to_string())).collect())
}

fn genpass(args: &Args) -> Reply {
    const MAX_BITS: i64 = 4096;
    let bits = match args.get(2) {
        Some(a) => match super::arg_i64(a) {
            Ok(b) => b,
            Err(e) => return e,
        },
        None => 256,
    };
    if bits <= 0 || bits > MAX_BITS {
        return Reply::err(format!(
            "ACL GENPASS argument must be the number of bits for the output password, a positive number up to \
             {MAX_BITS}"
        ));
    }
    let chars = ((bits + 3) / 4) as usize;
    let mut raw = vec![0u8; chars.div_ceil(2)];
    {
        use rand::RngCore;
        rand::rngs::OsRng.fill_bytes(&mut raw);
    }
    let mut hex: String = raw.iter().map(|b| format!("{b:02x}")).collect();
    hex.truncate(chars);
    Reply::bulk(hex)
}

fn log_cmd(shared: &Shared, args: &Args) -> Reply {
    let mut count = 10usize;
    if let Some(a) = args.get(2) {
        if a.eq_ignore_ascii_case(b"reset") {
            shared.acl.log_reset();
            return Reply::Ok;
        }
        match super::arg_i64(a) {
            Ok(n) => count = n.max(0) as usize,
            Err(e) => return e,
        }
    }
    let now = std::time::Instant::now();
    Reply::Array(
        shared
            .acl
            .log_entries(count)
            .into_iter()
            .map(|e| {
                let reason = match e.reason {
                    LogReason::Command => "command",
                    LogReason::Key => "key",
                    LogReason::Channel => "channel",
                    LogReason::Auth => "auth",
                };
                let context = match e.context {
                    LogContext::Toplevel => "toplevel",
                    LogContext::Multi => "multi",
                    LogContext::Lua => "lua",
                };
                let age = now.duration_since(e.created).as_millis() as f64 / 1000.0;
                Reply::Map(vec![
                    (Reply::bulk("count"), Reply::Int(e.count as i64)),
                    (Reply::bulk("reason"), Reply::bulk(reason)),
                    (Reply::bulk("context"), Reply::bulk(context)),
                    (Reply::bulk("object"), Reply::Bulk(e.object)),
                    (Reply::bulk("username"), Reply::Bulk(e.username)),
                    (Reply::bulk("age-seconds"), Reply::Double(age)),
                    (Reply::bulk("client-info"), Reply::bulk(e.client_info)),
                ])
            })
            .collect(),
    )
}

fn dryrun(shared: &Shared, args: &Args) -> Reply {
    let Some(h) = shared.acl.get(&args[2]) else {
        return Reply::err(format!("User '{}' not found", String::from_utf8_lossy(&args[2])));
    };
    let line = &args[3..];
    let Some(spec) = super::lookup(&line[0]) else {
        return Reply::err(format!("Command '{}' not found", String::from_utf8_lossy(&line[0])));
    };
    let full = full_name(spec, line);
    if !spec.arity_ok(line.len()) {
        return Reply::err(format!("wrong number of arguments for '{full}' command"));
    }
    match h.get().check(spec, line) {
        Ok(()) => Reply::Ok,
        Err(Denied::Command) => Reply::bulk(format!("This user has no permissions to run the '{full}' command")),
        Err(Denied::Key(i)) => Reply::bulk(format!(
            "This user has no permissions to access the '{}' key",
            String::from_utf8_lossy(&line[i])
        )),
        Err(Denied::Channel(i)) => Reply::bulk(format!(
            "This user has no permissions to access the '{}' channel",
            String::from_utf8_lossy(&line[i])
        )),
    }
}
