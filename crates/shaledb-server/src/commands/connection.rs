//! Connection commands: PING, ECHO, QUIT, SELECT, AUTH, HELLO.

use super::flags::*;
use super::{arg_i64, Handler, Spec};
use crate::keys::DATABASES;
use crate::resp::{Args, Reply};
use crate::server::{Session, Shared};

pub static COMMANDS: &[Spec] = &[
    Spec {
        name: "ping",
        arity: -1,
        flags: FAST | STALE,
        first_key: 0,
        last_key: 0,
        step: 0,
        handler: Handler::Conn(ping),
        summary: "Returns the server's liveliness response.",
    },
    Spec {
        name: "echo",
        arity: 2,
        flags: FAST,
        first_key: 0,
        last_key: 0,
        step: 0,
        handler: Handler::Conn(echo),
        summary: "Returns the given string.",
    },
    Spec {
        name: "quit",
        arity: -1,
        flags: FAST | NO_AUTH | STALE | LOADING,
        first_key: 0,
        last_key: 0,
        step: 0,
        handler: Handler::Conn(quit),
        summary: "Closes the connection.",
    },
    Spec {
        name: "select",
        arity: 2,
        flags: FAST | LOADING | STALE,
        first_key: 0,
        last_key: 0,
        step: 0,
        handler: Handler::Conn(select),
        summary: "Changes the selected database.",
    },
    Spec {
        name: "auth",
        arity: -2,
        flags: FAST | NO_AUTH | STALE | LOADING,
        first_key: 0,
        last_key: 0,
        step: 0,
        handler: Handler::Conn(auth),
        summary: "Authenticates the connection.",
    },
    Spec {
        name: "hello",
        arity: -1,
        flags: FAST | NO_AUTH | STALE | LOADING,
        first_key: 0,
        last_key: 0,
        step: 0,
        handler: Handler::Conn(hello),
        summary: "Handshakes with the server (protocol version, AUTH, SETNAME).",
    },
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

/// Checks a password against `requirepass` (the only user is `default`).
fn check_password(s: &mut Session, shared: &Shared, user: Option<&[u8]>, pass: &[u8]) -> Reply {
    let required = shared.config.read().requirepass.clone();
    let Some(required) = required else {
        return Reply::err(
            "AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?",
        );
    };
    let user_ok = user.is_none_or(|u| u == b"default");
    // Compare in constant time over the longer length so the time does not tell the prefix length.
    let a = required.as_bytes();
    let mut diff = (a.len() != pass.len()) as u8;
    for i in 0..a.len().max(pass.len()) {
        diff |= a.get(i).copied().unwrap_or(0) ^ pass.get(i).copied().unwrap_or(0);
    }
    if user_ok && diff == 0 {
        s.authenticated = true;
        Reply::Ok
    } else {
        Reply::error("WRONGPASS invalid username-password pair or user is disabled.")
    }
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
        if n.iter().any(|&c| c <= b' ' || c > b'~') {
            return Reply::err("Client names cannot contain spaces, newlines or special characters.");
        }
        s.name = Some(n);
    }
    s.proto = proto;
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
