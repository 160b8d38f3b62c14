//! Connection commands: PING, ECHO, QUIT, SELECT, AUTH, HELLO, RESET, CLIENT.

use super::{arg_i64, either, help_reply, sub_arity, unknown_subcommand, Spec};
use crate::keys::DATABASES;
use crate::resp::{Args, Reply};
use crate::server::{ClientEntry, Session, Shared};
use bytes::Bytes;
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;

pub static COMMANDS: &[Spec] = &[
    cmd! { "ping", -1, FAST | STALE, [0, 0, 0], Conn(ping), "Returns the server's liveliness response." },
    cmd! { "echo", 2, FAST, [0, 0, 0], Conn(echo), "Returns the given string." },
    cmd! { "quit", -1, FAST | NO_AUTH | STALE | LOADING | NOSCRIPT, [0, 0, 0], Conn(quit), "Closes the connection." },
    cmd! { "select", 2, FAST | LOADING | STALE, [0, 0, 0], Conn(select), "Changes the selected database." },
    cmd! { "auth", -2, FAST | NO_AUTH | STALE | LOADING | NOSCRIPT, [0, 0, 0], Conn(auth), "Authenticates the connection." },
    cmd! { "hello", -1, FAST | NO_AUTH | STALE | LOADING | NOSCRIPT, [0, 0, 0], Conn(hello), "Handshakes with the server (protocol version, AUTH, SETNAME)." },
    cmd! { "reset", 1, FAST | NO_AUTH | STALE | LOADING | NOSCRIPT, [0, 0, 0], Conn(reset), "Resets the connection (database 0, RESP2, unauthenticated, no name)." },
    cmd! { "client", -2, STALE | LOADING | NOSCRIPT, [0, 0, 0], Conn(client), "A container for client connection commands (ID, INFO, LIST, KILL, SETNAME, GETNAME, SETINFO ...)." },
];

fn ping(_: &mut Session, _: &Shared, args: &Args) -> Reply {
    match args.len() {
        1 => Reply::Simple("PONG".into()),
        2 => Reply::Bulk(args[1].clone()),
        _ => super::wrong_arity("ping"),
    }
}

fn echo(_: &mut Session, _: &Shared, args: &Args) -> Reply {
    Reply::Bulk(args[1].clone())
}

fn quit(s: &mut Session, _: &Shared, _: &Args) -> Reply {
    s.close_after_reply = true;
    Reply::Ok
}

fn select(s: &mut Session, _: &Shared, args: &Args) -> Reply {
    match arg_i64(&args[1]) {
        Ok(n) if (0..DATABASES as i64).contains(&n) => {
            s.db_index = n as u8;
            Reply::Ok
        }
        Ok(_) => Reply::err("DB index is out of range"),
        Err(e) => e,
    }
}

/// Checks a user name and password (AUTH, HELLO AUTH): `None` is the `default` user of `AUTH <password>`,
/// which Redis refuses while that user needs no password.
fn check_password(s: &mut Session, shared: &Shared, user: Option<&[u8]>, pass: &[u8]) -> Reply {
    if user.is_none() && shared.acl.default_user().get().nopass {
        return Reply::err(
            "AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?",
        );
    }
    super::acl::authenticate(s, shared, user.unwrap_or(b"default"), pass)
}

fn auth(s: &mut Session, shared: &Shared, args: &Args) -> Reply {
    match args.len() {
        2 => check_password(s, shared, None, &args[1]),
        3 => check_password(s, shared, Some(&args[1]), &args[2]),
        _ => super::syntax_error(),
    }
}

fn hello(s: &mut Session, shared: &Shared, args: &Args) -> Reply {
    let mut proto = s.proto;
    let mut i = 1;
    if let Some(v) = args.get(1) {
        match arg_i64(v) {
            Ok(2) => proto = 2,
            Ok(3) => proto = 3,
            Ok(_) => return Reply::error("NOPROTO unsupported protocol version"),
            Err(_) => return Reply::err("Protocol version is not an integer or out of range"),
        }
        i = 2;
    }
    let mut setname = None;
    while i < args.len() {
        let opt = args[i].to_ascii_lowercase();
        if opt == b"auth" && i + 2 < args.len() {
            let r = check_password(s, shared, Some(&args[i + 1]), &args[i + 2]);
            if r.is_error() {
                return r;
            }
            i += 3;
        } else if opt == b"setname" && i + 1 < args.len() {
            setname = Some(args[i + 1].clone());
            i += 2;
        } else {
            return Reply::err(format!("Syntax error in HELLO option '{}'", String::from_utf8_lossy(&args[i])));
        }
    }
    if !s.authenticated {
        return Reply::error("NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time");
    }
    if let Some(n) = setname {
        if !valid_name(&n) {
            return Reply::err("Client names cannot contain spaces, newlines or special characters.");
        }
        s.set_name(Some(n));
    }
    s.set_proto(proto);
    Reply::Map(vec![
        (Reply::bulk("server"), Reply::bulk("redis")),
        (Reply::bulk("version"), Reply::bulk(crate::REDIS_VERSION)),
        (Reply::bulk("proto"), Reply::Int(proto as i64)),
        (Reply::bulk("id"), Reply::Int(s.id as i64)),
        (Reply::bulk("mode"), Reply::bulk("standalone")),
        (Reply::bulk("role"), Reply::bulk("master")),
        (Reply::bulk("modules"), Reply::Array(vec![])),
    ])
}

/// Client names and library names: printable ASCII without spaces (Redis's rule).
fn valid_name(n: &[u8]) -> bool {
    n.iter().all(|&c| c > b' ' && c <= b'~')
}

/// `RESET`: back to database 0, RESP2, no name, replies on, no transaction, no WATCH, no subscriptions, and
/// unauthenticated when a password is set.
fn reset(s: &mut Session, shared: &Shared, _: &Args) -> Reply {
    s.db_index = 0;
    s.set_proto(2);
    s.set_name(None);
    s.replies_off = false;
    s.skip_next_reply = false;
    s.multi = None;
    crate::commands::multi::unwatch_session(s, shared);
    crate::commands::pubsub::unsubscribe_all(s, shared);
    if s.monitor.take().is_some() {
        shared.intro.monitors.remove(s.id);
    }
    if s.entry.tracking.is_on() {
        shared.store.tracking.disable(s.id, &s.entry.tracking);
    }
    // CLIENT NO-EVICT survives RESET in Redis 7.0 (its flag is not among those RESET clears).
    s.entry.no_touch.store(false, Ordering::Relaxed);
    s.authenticated = !shared.acl.auth_required();
    let default = shared.acl.default_user();
    *s.entry.user.lock() = None;
    s.user = default;
    shared.acl.forget_client(s.id);
    Reply::Simple("RESET".into())
}

const CLIENT_HELP: &[&str] = &[
    "CLIENT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "GETNAME",
    "    Return the name of the current connection.",
    "ID",
    "    Return the ID of the current connection.",
    "INFO",
    "    Return information about the current client connection.",
    "KILL <ip:port>",
    "    Kill connection made from <ip:port>.",
    "KILL <option> <value> [<option> <value> [...]]",
    "    Kill connections. Options are:",
    "    * ADDR (<ip:port>|<unixsocket>:0)",
    "      Kill connections made from the specified address",
    "    * LADDR (<ip:port>|<unixsocket>:0)",
    "      Kill connections made to specified local address",
    "    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
    "      Kill connections by type.",
    "    * USER <username>",
    "      Kill connections authenticated by <username>.",
    "    * SKIPME (YES|NO)",
    "      Skip killing current connection (default: yes).",
    "    * ID <client-id>",
    "      Kill connections by client id.",
    "    * MAXAGE <maxage>",
    "      Kill connections older than the specified age.",
    "LIST [options ...]",
    "    Return information about client connections. Options:",
    "    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
    "      Return clients of specified type.",
    "    * ID <client-id> [<client-id> ...]",
    "      Return clients of specified IDs only.",
    "NO-EVICT (ON|OFF)",
    "    Accepted; this server never evicts.",
    "NO-TOUCH (ON|OFF)",
    "    Accepted; this server keeps no access times.",
    "PAUSE <timeout> [WRITE|ALL]",
    "    Hold every client's commands (WRITE: only those that may write) for <timeout> milliseconds.",
    "REPLY (ON|OFF|SKIP)",
    "    Control the replies sent to the current connection.",
    "SETNAME <name>",
    "    Assign the name <name> to the current connection.",
    "SETINFO <option> <value>",
    "    Set client meta attr. Options are:",
    "    * LIB-NAME: the client lib name.",
    "    * LIB-VER: the client lib version.",
    "TRACKING (ON|OFF) [REDIRECT <id>] [BCAST] [PREFIX <prefix> [...]] [OPTIN] [OPTOUT] [NOLOOP]",
    "    Client-side caching: be sent invalidation messages for the keys this client reads (or, with BCAST,",
    "    for every key under the prefixes), here or on the connection REDIRECT names.",
    "CACHING (YES|NO)",
    "    In OPTIN (OPTOUT) mode: track (do not track) the keys of the next command or transaction.",
    "GETREDIR",
    "    The id of the client receiving this client's invalidations (0: itself, -1: tracking is off).",
    "TRACKINGINFO",
    "    This client's tracking mode, redirection and BCAST prefixes.",
    "UNPAUSE",
    "    End the pause in force at once.",
    "UNBLOCK <clientid> [TIMEOUT|ERROR]",
    "    No client is ever blocked here: answers 0.",
    "HELP",
    "    Print this help.",
];

fn client(s: &mut Session, shared: &Shared, args: &Args) -> Reply {
    let sub = args[1].to_ascii_lowercase();
    let argc = args.len();
    let arity = |ok: bool| if ok { None } else { Some(sub_arity("client", &sub)) };
    match sub.as_slice() {
        b"help" if argc == 2 => help_reply(CLIENT_HELP),
        b"id" => arity(argc == 2).unwrap_or(Reply::Int(s.id as i64)),
        b"getname" => arity(argc == 2).unwrap_or_else(|| s.name.clone().map_or(Reply::Nil, Reply::Bulk)),
        b"setname" => arity(argc == 3).unwrap_or_else(|| {
            let n = &args[2];
            if !valid_name(n) {
                return Reply::err("Client names cannot contain spaces, newlines or special characters.");
            }
            s.set_name((!n.is_empty()).then(|| n.clone()));
            Reply::Ok
        }),
        b"setinfo" => arity(argc == 4).unwrap_or_else(|| {
            let (attr, v) = (args[2].to_ascii_lowercase(), &args[3]);
            let slot = match attr.as_slice() {
                b"lib-name" => &s.entry.lib_name,
                b"lib-ver" => &s.entry.lib_ver,
                _ => return Reply::err(format!("Unrecognized option '{}'", String::from_utf8_lossy(&args[2]))),
            };
            if !valid_name(v) {
                return Reply::err(format!(
                    "{} cannot contain spaces, newlines or special characters.",
                    String::from_utf8_lossy(&attr)
                ));
            }
            *slot.lock() = (!v.is_empty()).then(|| v.clone());
            Reply::Ok
        }),
        b"info" => arity(argc == 2).unwrap_or_else(|| {
            let mut line = client_line(&s.entry);
            line.push('\n');
            Reply::Verbatim(line)
        }),
        b"list" => client_list(shared, args),
        b"kill" => arity(argc >= 3).unwrap_or_else(|| client_kill(s, shared, args)),
        b"pause" if argc > 4 => Reply::err(format!(
            "unknown subcommand or wrong number of arguments for '{}'. Try CLIENT HELP.",
            String::from_utf8_lossy(&args[1])
        )),
        b"pause" => arity(argc >= 3).unwrap_or_else(|| super::server_cmds::pause::client_pause(shared, args)),
        b"unpause" => arity(argc == 2).unwrap_or_else(|| super::server_cmds::pause::client_unpause(shared)),
        b"no-evict" | b"no-touch" => arity(argc == 3).unwrap_or_else(|| match either(&args[2], b"on", b"off") {
            Some(v) => {
                let flag = if sub == b"no-evict" { &s.entry.no_evict } else { &s.entry.no_touch };
                flag.store(v, Ordering::Relaxed);
                Reply::Ok
            }
            None => super::syntax_error(),
        }),
        b"reply" => arity(argc == 3).unwrap_or_else(|| {
            let mode = args[2].to_ascii_lowercase();
            match mode.as_slice() {
                b"on" => {
                    s.replies_off = false;
                    s.skip_next_reply = false;
                    s.force_reply = true;
                    Reply::Ok
                }
                b"off" => {
                    s.replies_off = true;
                    Reply::Ok
                }
                b"skip" => {
                    if !s.replies_off {
                        s.skip_next_reply = true;
                        s.skip_this_reply = true;
                    }
                    Reply::Ok
                }
                _ => super::syntax_error(),
            }
        }),
        b"tracking" => arity(argc >= 3).unwrap_or_else(|| client_tracking(s, shared, args)),
        b"caching" => arity(argc == 3).unwrap_or_else(|| client_caching(s, args)),
        b"getredir" => arity(argc == 2).unwrap_or_else(|| {
            let info = shared.store.tracking.info(s.id, &s.entry.tracking);
            Reply::Int(if info.on { info.opts.redirect as i64 } else { -1 })
        }),
        b"trackinginfo" => arity(argc == 2).unwrap_or_else(|| client_trackinginfo(s, shared)),
        b"unblock" => arity(argc == 3 || argc == 4).unwrap_or_else(|| {
            if argc == 4 && !args[3].eq_ignore_ascii_case(b"timeout") && !args[3].eq_ignore_ascii_case(b"error") {
                return Reply::err("CLIENT UNBLOCK reason should be TIMEOUT or ERROR");
            }
            let error = argc == 4 && args[3].eq_ignore_ascii_case(b"error");
            match super::arg_i64(&args[2]) {
                Ok(id) => {
                    let target = u64::try_from(id).ok().and_then(|id| shared.clients.lock().get(&id).cloned());
                    Reply::Int(target.is_some_and(|c| c.unblock(error)) as i64)
                }
                Err(e) => e,
            }
        }),
        _ => unknown_subcommand("CLIENT", &args[1]),
    }
}

/// `CLIENT TRACKING on|off [REDIRECT id] [BCAST] [PREFIX p ...] [OPTIN] [OPTOUT] [NOLOOP]`, with Redis's
/// checks in Redis's order (the options first, then ON/OFF, then the mode checks).
fn client_tracking(s: &mut Session, shared: &Shared, args: &Args) -> Reply {
    let mut opts = crate::tracking::Options::default();
    let mut target = None;
    let mut j = 3;
    while j < args.len() {
        let more = j + 1 < args.len();
        let a = &args[j];
        if a.eq_ignore_ascii_case(b"redirect") && more {
            j += 1;
            if opts.redirect != 0 {
                return Reply::err("A client can only redirect to a single other client");
            }
            let id = match arg_i64(&args[j]) {
                Ok(id) => id,
                Err(e) => return e,
            };
            let entry =
                u64::try_from(id).ok().filter(|id| *id != 0).and_then(|id| shared.clients.lock().get(&id).cloned());
            let Some(entry) = entry else {
                return Reply::err("The client ID you want redirect to does not exist");
            };
            opts.redirect = entry.id;
            target = Some(entry.tracking.inbox.clone());
        } else if a.eq_ignore_ascii_case(b"bcast") {
            opts.bcast = true;
        } else if a.eq_ignore_ascii_case(b"optin") {
            opts.optin = true;
        } else if a.eq_ignore_ascii_case(b"optout") {
            opts.optout = true;
        } else if a.eq_ignore_ascii_case(b"noloop") {
            opts.noloop = true;
        } else if a.eq_ignore_ascii_case(b"prefix") && more {
            j += 1;
            opts.prefixes.push(args[j].clone());
        } else {
            return super::syntax_error();
        }
        j += 1;
    }
    match either(&args[2], b"on", b"off") {
        Some(true) => {
            if !opts.bcast && !opts.prefixes.is_empty() {
                return Reply::err("PREFIX option requires BCAST mode to be enabled");
            }
            match shared.store.tracking.enable(s.id, &s.entry.tracking, target, opts) {
                Ok(()) => Reply::Ok,
                Err(e) => Reply::err(e),
            }
        }
        Some(false) => {
            shared.store.tracking.disable(s.id, &s.entry.tracking);
            Reply::Ok
        }
        None => super::syntax_error(),
    }
}

/// `CLIENT CACHING yes|no`: in OPTIN (OPTOUT) mode, the next command's keys are (are not) tracked.
fn client_caching(s: &mut Session, args: &Args) -> Reply {
    let me = &s.entry.tracking;
    if !me.is_on() {
        return Reply::err(
            "CLIENT CACHING can be called only when the client is in tracking mode with OPTIN or OPTOUT mode enabled",
        );
    }
    let optin = crate::tracking::opt_mode(me);
    match either(&args[2], b"yes", b"no") {
        Some(true) if optin == Some(true) => crate::tracking::set_caching(me),
        Some(true) => return Reply::err("CLIENT CACHING YES is only valid when tracking is enabled in OPTIN mode."),
        Some(false) if optin == Some(false) => crate::tracking::set_caching(me),
        Some(false) => return Reply::err("CLIENT CACHING NO is only valid when tracking is enabled in OPTOUT mode."),
        None => return super::syntax_error(),
    }
    Reply::Ok
}

/// `CLIENT TRACKINGINFO`: flags, redirect and prefixes.
fn client_trackinginfo(s: &Session, shared: &Shared) -> Reply {
    let info = shared.store.tracking.info(s.id, &s.entry.tracking);
    let o = &info.opts;
    let mut flags = vec![if info.on { "on" } else { "off" }];
    let named = [
        (o.bcast, "bcast"),
        (o.optin, "optin"),
        (o.optin && info.caching, "caching-yes"),
        (o.optout, "optout"),
        (o.optout && info.caching, "caching-no"),
        (o.noloop, "noloop"),
        (info.broken, "broken_redirect"),
    ];
    flags.extend(named.iter().filter(|(on, _)| *on).map(|(_, n)| *n));
    let mut prefixes = o.prefixes.clone();
    prefixes.sort();
    let bulk = |t: &'static str| Reply::Bulk(Bytes::from_static(t.as_bytes()));
    Reply::Map(vec![
        (bulk("flags"), Reply::Set(flags.into_iter().map(bulk).collect())),
        (bulk("redirect"), Reply::Int(if info.on { o.redirect as i64 } else { -1 })),
        (bulk("prefixes"), Reply::Array(prefixes.into_iter().map(Reply::Bulk).collect())),
    ])
}

/// One client as `CLIENT LIST` and `CLIENT INFO` print it (Redis 7.2's fields, in its order). Fields this
/// server does not track are printed with the value Redis prints for a client without them (0, or -1 for
/// `redir`); `qbuf` is the size of the request the client is running (the one asking sees its own, as in
/// Redis), `qbuf-free` the free room of its read buffer, `omem` the replies waiting for the client to read them; `obl` and the like are 0 because buffers
/// are not shared with the registry.
pub fn client_line(c: &ClientEntry) -> String {
    let mut flags = String::from(c.tracking.list_flags());
    if c.no_evict.load(Ordering::Relaxed) {
        flags.push('e');
    }
    if c.no_touch.load(Ordering::Relaxed) {
        flags.push('T');
    }
    if flags.is_empty() {
        flags.push('N');
    }
    let text = |b: &Option<Bytes>| b.as_ref().map(|b| String::from_utf8_lossy(b).into_owned()).unwrap_or_default();
    let cmd = {
        let (name, sub) = &*c.last_command.lock();
        match super::server_cmds::stats::full_name(name, sub.as_deref()) {
            Some(full) => full,
            None => name.to_string(),
        }
    };
    let mut line = String::with_capacity(300);
    let _ = write!(
        line,
        "id={} addr={} laddr={} fd={} name={} age={} idle={} flags={} db={} sub=0 psub=0 ssub=0 multi=-1 \
         qbuf={} qbuf-free={} argv-mem=0 multi-mem=0 rbs=0 rbp=0 obl=0 oll=0 omem={} tot-mem=0 events=r cmd={} \
         user={} redir={} resp={} lib-name={} lib-ver={}",
        c.id,
        c.addr,
        c.laddr,
        c.fd,
        text(&c.name.lock()),
        c.created.elapsed().as_secs(),
        c.last_active.lock().elapsed().as_secs(),
        flags,
        c.db.load(Ordering::Relaxed),
        c.qbuf.load(Ordering::Relaxed),
        c.qbuf_free.load(Ordering::Relaxed),
        c.omem.load(Ordering::Relaxed),
        cmd,
        c.user.lock().as_ref().map_or("default", |u| u.name.as_str()),
        c.tracking.list_redirect(),
        c.resp.load(Ordering::Relaxed),
        text(&c.lib_name.lock()),
        text(&c.lib_ver.lock()),
    );
    line
}

fn sorted_clients(shared: &Shared) -> Vec<Arc<ClientEntry>> {
    let mut v: Vec<Arc<ClientEntry>> = shared.clients.lock().values().cloned().collect();
    v.sort_by_key(|c| c.id);
    v
}

/// `CLIENT LIST [TYPE normal|master|replica|pubsub] [ID id ...]`.
fn client_list(shared: &Shared, args: &Args) -> Reply {
    let mut ids: Option<Vec<u64>> = None;
    let mut normal = true;
    let mut i = 2;
    while i < args.len() {
        let opt = args[i].to_ascii_lowercase();
        if opt == b"type" && i + 1 < args.len() {
            match args[i + 1].to_ascii_lowercase().as_slice() {
                b"normal" => normal = true,
                b"master" | b"replica" | b"slave" | b"pubsub" => normal = false,
                _ => return Reply::err(format!("Unknown client type '{}'", String::from_utf8_lossy(&args[i + 1]))),
            }
            i += 2;
        } else if opt == b"id" && i + 1 < args.len() {
            let mut v = Vec::new();
            for a in &args[i + 1..] {
                match super::arg_i64(a) {
                    Ok(n) if n > 0 => v.push(n as u64),
                    _ => return Reply::err("Invalid client ID"),
                }
            }
            ids = Some(v);
            i = args.len();
        } else {
            return super::syntax_error();
        }
    }
    let mut out = String::new();
    if normal {
        for c in sorted_clients(shared) {
            if ids.as_ref().is_none_or(|ids| ids.contains(&c.id)) {
                out.push_str(&client_line(&c));
                out.push('\n');
            }
        }
    }
    Reply::Verbatim(out)
}

/// Which clients a `CLIENT KILL` names.
#[derive(Default)]
struct KillFilter {
    id: Option<u64>,
    addr: Option<String>,
    laddr: Option<String>,
    user: Option<Vec<u8>>,
    /// `TYPE` other than normal: matches nobody here (no replicas, no pub/sub).
    no_normal: bool,
    maxage: Option<u64>,
    skipme: bool,
}

impl KillFilter {
    fn matches(&self, c: &ClientEntry, me: u64) -> bool {
        let addr_is = |want: &Option<String>, a: SocketAddr| want.as_ref().is_none_or(|w| *w == a.to_string());
        !(self.no_normal || (self.skipme && c.id == me))
            && self.id.is_none_or(|id| id == c.id)
            && addr_is(&self.addr, c.addr)
            && addr_is(&self.laddr, c.laddr)
            && self
                .user
                .as_ref()
                .is_none_or(|u| u.as_slice() == c.user.lock().as_ref().map_or(&b"default"[..], |h| h.name.as_bytes()))
            && self.maxage.is_none_or(|m| c.created.elapsed().as_secs() >= m)
    }
}

/// `CLIENT KILL ip:port` (old form: `+OK` or `No such client`, may kill the caller) and
/// `CLIENT KILL <filter> <value> ...` (new form: the number killed; the caller is skipped unless SKIPME no).
fn client_kill(s: &mut Session, shared: &Shared, args: &Args) -> Reply {
    let old_form = args.len() == 3;
    let mut f = KillFilter { skipme: !old_form, ..KillFilter::default() };
    if old_form {
        f.addr = Some(String::from_utf8_lossy(&args[2]).into_owned());
    } else {
        if !args.len().is_multiple_of(2) {
            return super::syntax_error();
        }
        for pair in args[2..].chunks(2) {
            let (opt, v) = (pair[0].to_ascii_lowercase(), &pair[1]);
            match opt.as_slice() {
                b"id" => match super::arg_i64(v) {
                    Ok(n) if n > 0 => f.id = Some(n as u64),
                    _ => return Reply::err("client-id should be greater than 0"),
                },
                b"addr" => f.addr = Some(String::from_utf8_lossy(v).into_owned()),
                b"laddr" => f.laddr = Some(String::from_utf8_lossy(v).into_owned()),
                b"user" if shared.acl.get(v).is_none() => {
                    return Reply::err(format!("No such user '{}'", String::from_utf8_lossy(v)))
                }
                b"user" => f.user = Some(v.to_vec()),
                b"type" => match v.to_ascii_lowercase().as_slice() {
                    b"normal" => {}
                    b"master" | b"replica" | b"slave" | b"pubsub" => f.no_normal = true,
                    _ => return Reply::err(format!("Unknown client type '{}'", String::from_utf8_lossy(v))),
                },
                b"skipme" => match v.to_ascii_lowercase().as_slice() {
                    b"yes" => f.skipme = true,
                    b"no" => f.skipme = false,
                    _ => return super::syntax_error(),
                },
                b"maxage" => match super::arg_i64(v) {
                    Ok(n) if n >= 0 => f.maxage = Some(n as u64),
                    _ => return super::not_an_integer(),
                },
                _ => return super::syntax_error(),
            }
        }
    }
    let mut killed = 0;
    for c in sorted_clients(shared) {
        if f.matches(&c, s.id) {
            killed += 1;
            if c.id == s.id {
                // Ourselves: the reply goes out first, then the connection closes.
                s.close_after_reply = true;
            } else {
                shared.disconnect(&c);
            }
        }
    }
    match (old_form, killed) {
        (true, 0) => Reply::err("No such client"),
        (true, _) => Reply::Ok,
        (false, n) => Reply::Int(n),
    }
}
