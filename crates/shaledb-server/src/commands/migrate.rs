//! MIGRATE: moves keys to another server (shaledb or redis-server) as DUMP payloads, with RESTORE.
//!
//! `MIGRATE host port key|"" destination-db timeout [COPY] [REPLACE] [AUTH password] [AUTH2 username password]
//! [KEYS key ...]`, in Redis 7.0's steps and replies:
//! 1. the options (syntax errors), then timeout and destination-db as integers (a timeout `<= 0` is 1000 ms);
//! 2. the keys that exist are read and dumped (none: `+NOKEY`);
//! 3. a fresh connection to the target (timeout for the connect), then AUTH / AUTH2, SELECT and one RESTORE
//!    per key (its TTL in ms, `REPLACE` if asked) are written in one go, and their one-line replies read, each
//!    within the timeout;
//! 4. the keys the target acknowledged are deleted here (unless COPY) by one DEL job in the commit step:
//!    durable, and acknowledged after fsync like any write.
//!
//! The network part runs on the connection's task (`server.rs` awaits [`run`]), never in the commit step, and
//! only this client waits for it. Target connections are not cached (INFO's `migrate_cached_sockets` is 0):
//! each MIGRATE connects, and closes when done.
//!
//! Redis blocks every client while it migrates; here only the migrating client waits, so another client can
//! write a key between step 2 and step 4. Deleting it then would lose that acknowledged write (the target has
//! the older value). So the keys are watched (the WATCH registry, under an id of MIGRATE's own) before they
//! are read, and step 4 deletes them only if none was written since, in the same commit-thread step as the
//! check; otherwise nothing is deleted and MIGRATE answers an error saying the keys were copied, not moved.
//!
//! Inside MULTI or a script MIGRATE is refused (a transaction runs in the commit step, which never waits on
//! the network).

use super::{arg_i64, syntax_error, Spec};
use crate::commit::Job;
use crate::resp::{Args, Reply};
use crate::server::{Session, Shared};
use crate::store::{now_ms, ReadCtx};
use crate::types::rdb;
use bytes::{BufMut, Bytes, BytesMut};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

pub static COMMANDS: &[Spec] = &[
    cmd! { "migrate", -6, WRITE, [3, 3, 1], Conn(migrate_here), "Atomically transfers a key from one Redis instance to another." },
];

/// The longest reply line read from the target (Redis reads into a 1 KiB buffer; a longer line is an error
/// text that is cut).
const MAX_LINE: u64 = 1024;

/// Bytes written to the target per timed write.
const WRITE_CHUNK: usize = 64 * 1024;

/// What one MIGRATE asks for, once its arguments are checked.
#[derive(Debug, PartialEq, Eq)]
pub struct Plan {
    pub host: String,
    pub port: Bytes,
    pub db: i64,
    pub timeout: Duration,
    pub copy: bool,
    pub replace: bool,
    /// `(username, password)`: AUTH gives no user name, AUTH2 does.
    pub auth: Option<(Option<Bytes>, Bytes)>,
    pub keys: Vec<Bytes>,
}

/// The arguments checked in Redis's order: options first, then the timeout and the database number.
pub fn parse(args: &[Bytes]) -> Result<Plan, Reply> {
    let mut copy = false;
    let mut replace = false;
    let mut auth = None;
    let mut keys = vec![args[3].clone()];
    let mut j = 6;
    while j < args.len() {
        let a = &args[j];
        let more = args.len() - 1 - j;
        if a.eq_ignore_ascii_case(b"copy") {
            copy = true;
        } else if a.eq_ignore_ascii_case(b"replace") {
            replace = true;
        } else if a.eq_ignore_ascii_case(b"auth") {
            if more == 0 {
                return Err(syntax_error());
            }
            auth = Some((None, args[j + 1].clone()));
            j += 1;
        } else if a.eq_ignore_ascii_case(b"auth2") {
            if more < 2 {
                return Err(syntax_error());
            }
            auth = Some((Some(args[j + 1].clone()), args[j + 2].clone()));
            j += 2;
        } else if a.eq_ignore_ascii_case(b"keys") {
            if !args[3].is_empty() {
                return Err(Reply::err(
                    "When using MIGRATE KEYS option, the key argument must be set to the empty string",
                ));
            }
            keys = args[j + 1..].to_vec();
            break;
        } else {
            return Err(syntax_error());
        }
        j += 1;
    }
    let timeout = arg_i64(&args[5])?;
    let db = arg_i64(&args[4])?;
    let timeout = if timeout <= 0 { 1000 } else { timeout as u64 };
    Ok(Plan {
        host: String::from_utf8_lossy(&args[1]).into_owned(),
        port: args[2].clone(),
        db,
        timeout: Duration::from_millis(timeout),
        copy,
        replace,
        auth,
        keys,
    })
}

/// Deletes the migrated keys in the commit step if none of them was written since MIGRATE watched them (not
/// in the table): `args` = `migrate-del watcher-id key...`.
pub static GUARDED_DEL_JOB: Spec = cmd! { "migrate-del", -3, 0, [0, 0, 0], Write(guarded_del), "Deletes migrated keys unless one changed (internal)." };

/// The error MIGRATE answers when a key it sent was written by another client before it could be deleted.
pub const CHANGED_WHILE_MIGRATING: &str =
    "ERR a key was written by another client while MIGRATE ran: the keys were copied to the target, not moved";

fn guarded_del(ctx: &mut crate::store::WriteCtx<'_>, args: &Args) -> Reply {
    let Some(id) = std::str::from_utf8(&args[1]).ok().and_then(|a| a.parse::<u64>().ok()) else {
        return Reply::err("internal: malformed migrate-del");
    };
    if ctx.watches.take_for_exec(id).is_none() {
        return Reply::error(CHANGED_WHILE_MIGRATING);
    }
    let Some(del) = super::lookup(b"del") else { return Reply::err("internal: no DEL") };
    let super::Handler::Write(h) = del.handler else { return Reply::err("internal: DEL is not a write") };
    let mut words = Vec::with_capacity(args.len() - 1);
    words.push(Bytes::from_static(b"DEL"));
    words.extend(args[2..].iter().cloned());
    h(ctx, &words)
}

/// The watcher id MIGRATE uses for client `id`: the high bit set, so it never meets a client's own WATCH.
fn watcher(id: u64) -> u64 {
    id | 1 << 63
}

/// Submits one internal job and waits for its reply.
async fn job(s: &Session, shared: &Shared, spec: &'static Spec, words: Vec<Bytes>) -> Reply {
    let (tx, rx) = tokio::sync::oneshot::channel();
    let job = Job { db_index: s.db_index, cmds: vec![(spec, words)], reply: tx, block: None, client: s.id };
    if !shared.store.submit(job) {
        return Reply::err("the server is shutting down");
    }
    match rx.await {
        Ok(mut r) => r.pop().unwrap_or_else(|| Reply::err("internal: no reply")),
        Err(_) => Reply::err("the server is shutting down"),
    }
}

/// The table's handler, for where the connection cannot wait on the network: the arguments are checked, and
/// the command refused. Outside MULTI and scripts the connection runs [`run`] instead (`server.rs`).
fn migrate_here(_: &mut Session, _: &Shared, args: &Args) -> Reply {
    match parse(args) {
        Err(r) => r,
        Ok(_) => Reply::err("MIGRATE cannot run inside a transaction or a script on this server"),
    }
}

/// One key to send: its name, TTL in ms (0: none) and DUMP payload.
struct Outgoing {
    key: Bytes,
    ttl: u64,
    payload: Vec<u8>,
}

/// How the exchange with the target ended.
enum Outcome {
    /// The connection could not be made.
    Connect,
    /// A write failed (`writing`) or a reply did not come (`reading`); `timed_out` stops the retry. `acked` keys
    /// were restored before it happened.
    Socket { writing: bool, timed_out: bool, acked: Vec<Bytes> },
    /// Every reply came: the first error the target gave, if any, and the keys it restored.
    Done { error: Option<String>, acked: Vec<Bytes> },
}

/// `MIGRATE ...` on the connection's task: see the module's doc.
pub async fn run(s: &mut Session, shared: &Shared, args: &Args) -> Reply {
    let plan = tri!(parse(args));
    let id = Bytes::from(watcher(s.id).to_string());
    if !plan.copy {
        let mut words = vec![Bytes::from_static(b"watch"), id.clone()];
        words.extend(plan.keys.iter().cloned());
        if let e @ Reply::Error(_) = job(s, shared, &super::multi::WATCH_JOB, words).await {
            return e;
        }
    }
    let reply = migrate_keys(s, shared, &plan, id.clone()).await;
    if !plan.copy && !matches!(reply, Migrated::Deleted(_)) {
        // Nothing was deleted: forget the watch (the guarded delete forgets it itself).
        job(s, shared, &super::multi::UNWATCH_JOB, vec![Bytes::from_static(b"unwatch"), id]).await;
    }
    match reply {
        Migrated::Deleted(r) | Migrated::Kept(r) => r,
    }
}

/// What [`migrate_keys`] did: the reply, and whether the guarded delete ran (it unwatches the keys).
enum Migrated {
    Deleted(Reply),
    Kept(Reply),
}

async fn migrate_keys(s: &Session, shared: &Shared, plan: &Plan, id: Bytes) -> Migrated {
    macro_rules! tri {
        ($e:expr) => {
            match $e {
                Ok(v) => v,
                Err(e) => return Migrated::Kept(e.into()),
            }
        };
    }
    let mut out = Vec::new();
    {
        let db = shared.store.db();
        let ctx = ReadCtx::new(&db, shared.store.keyspace(), s.db_index, now_ms());
        for key in &plan.keys {
            let Some((meta, _)) = tri!(ctx.get_meta(key)) else { continue };
            let Some(value) = tri!(rdb::read(&ctx, key)) else { continue };
            let ttl = match meta.expire_at_ms {
                // Expired since it was found: not sent, as Redis skips it.
                Some(t) if t <= now_ms() => continue,
                Some(t) => (t - now_ms()).max(1),
                None => 0,
            };
            out.push(Outgoing { key: key.clone(), ttl, payload: rdb::encode(&value) });
        }
    }
    if out.is_empty() {
        return Migrated::Kept(Reply::Simple("NOKEY".into()));
    }
    let request = request(plan, &out);
    let me = Me { addr: shared.local_addr, port: shared.listen_port.load(std::sync::atomic::Ordering::Relaxed) };
    let mut outcome = exchange(plan, &request, &out, me).await;
    // A failure before the first reply, other than a timeout, is tried once more on a new connection.
    if let Outcome::Socket { timed_out: false, acked, .. } = &outcome {
        if acked.is_empty() {
            outcome = exchange(plan, &request, &out, me).await;
        }
    }
    let (reply, acked) = match outcome {
        Outcome::Connect => return Migrated::Kept(Reply::error("IOERR error or timeout connecting to the client")),
        Outcome::Socket { writing, acked, .. } => {
            let what = if writing { "writing" } else { "reading" };
            (Reply::error(format!("IOERR error or timeout {what} to target instance")), acked)
        }
        Outcome::Done { error: Some(e), acked } => {
            (Reply::err(format!("Target instance replied with error: {e}")), acked)
        }
        Outcome::Done { error: None, acked } => (Reply::Ok, acked),
    };
    if plan.copy || acked.is_empty() {
        return Migrated::Kept(reply);
    }
    let mut words = Vec::with_capacity(acked.len() + 2);
    words.push(Bytes::from_static(b"migrate-del"));
    words.push(id);
    words.extend(acked);
    match job(s, shared, &GUARDED_DEL_JOB, words).await {
        e @ Reply::Error(_) => Migrated::Deleted(e),
        _ => Migrated::Deleted(reply),
    }
}

fn put_bulk(buf: &mut BytesMut, b: &[u8]) {
    buf.put_slice(format!("${}\r\n", b.len()).as_bytes());
    buf.put_slice(b);
    buf.put_slice(b"\r\n");
}

fn put_command(buf: &mut BytesMut, words: &[&[u8]]) {
    buf.put_slice(format!("*{}\r\n", words.len()).as_bytes());
    for w in words {
        put_bulk(buf, w);
    }
}

/// AUTH, SELECT and the RESTOREs, as one RESP request.
fn request(plan: &Plan, out: &[Outgoing]) -> BytesMut {
    let mut buf = BytesMut::new();
    match &plan.auth {
        Some((Some(user), pass)) => put_command(&mut buf, &[b"AUTH", user, pass]),
        Some((None, pass)) => put_command(&mut buf, &[b"AUTH", pass]),
        None => {}
    }
    put_command(&mut buf, &[b"SELECT", plan.db.to_string().as_bytes()]);
    for o in out {
        let ttl = o.ttl.to_string();
        let mut words: Vec<&[u8]> = vec![b"RESTORE", &o.key, ttl.as_bytes(), &o.payload];
        if plan.replace {
            words.push(b"REPLACE");
        }
        put_command(&mut buf, &words);
    }
    buf
}

/// One reply line, without its CRLF; `Err(timed_out)` when it did not come whole.
async fn read_line(r: &mut BufReader<TcpStream>, timeout: Duration) -> Result<Vec<u8>, bool> {
    let mut line = Vec::new();
    match tokio::time::timeout(timeout, (&mut *r).take(MAX_LINE).read_until(b'\n', &mut line)).await {
        Err(_) => return Err(true),
        Ok(Err(_)) | Ok(Ok(0)) => return Err(false),
        Ok(Ok(_)) => {}
    }
    if line.last() != Some(&b'\n') {
        // Longer than a line Redis reads: the rest is dropped.
        let mut rest = Vec::new();
        match tokio::time::timeout(timeout, r.read_until(b'\n', &mut rest)).await {
            Ok(Ok(n)) if n > 0 && rest.last() == Some(&b'\n') => {}
            Err(_) => return Err(true),
            _ => return Err(false),
        }
    } else {
        line.pop();
    }
    if line.last() == Some(&b'\r') {
        line.pop();
    }
    if line.is_empty() {
        return Err(false);
    }
    Ok(line)
}

/// The port as Redis reads it: its leading digits (none: 0), taken modulo 65536 as the resolver does;
/// `None` past what a C `int` holds.
fn atoi_port(p: &[u8]) -> Option<u16> {
    let mut n: u64 = 0;
    for c in p.iter().take_while(|c| c.is_ascii_digit()) {
        n = n * 10 + u64::from(c - b'0');
        if n > i32::MAX as u64 {
            return None;
        }
    }
    Some((n % 65536) as u16)
}

/// This server's listening address and port, to recognise a MIGRATE to itself.
#[derive(Clone, Copy)]
struct Me {
    addr: std::net::SocketAddr,
    port: u16,
}

impl Me {
    /// True when `stream` is connected to this server's own listener.
    fn is_target_of(&self, stream: &TcpStream) -> bool {
        let (Ok(peer), Ok(local)) = (stream.peer_addr(), stream.local_addr()) else { return false };
        peer.port() == self.port
            && (peer.ip() == self.addr.ip()
                || (self.addr.ip().is_unspecified() && (peer.ip().is_loopback() || peer.ip() == local.ip())))
    }
}

/// Connects, sends `request` and reads the replies.
async fn exchange(plan: &Plan, request: &[u8], out: &[Outgoing], me: Me) -> Outcome {
    let Some(port) = atoi_port(&plan.port) else { return Outcome::Connect };
    let stream = match tokio::time::timeout(plan.timeout, TcpStream::connect((plan.host.as_str(), port))).await {
        Ok(Ok(s)) => s,
        // Redis connects without blocking and counts the socket connected once it is writable, which a
        // refused connection is too: the refusal shows at the first write.
        Ok(Err(e)) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
            return Outcome::Socket { writing: true, timed_out: false, acked: Vec::new() }
        }
        _ => return Outcome::Connect,
    };
    if me.is_target_of(&stream) {
        // Redis, waiting on itself, can never read the reply and times out; here the RESTORE would run and the
        // DEL after it would lose the key (REPLACE into the same database). Nothing is sent; Redis's reply.
        return Outcome::Socket { writing: false, timed_out: true, acked: Vec::new() };
    }
    let _ = stream.set_nodelay(true);
    let mut r = BufReader::new(stream);
    for chunk in request.chunks(WRITE_CHUNK) {
        match tokio::time::timeout(plan.timeout, r.get_mut().write_all(chunk)).await {
            Ok(Ok(())) => {}
            Ok(Err(_)) => return Outcome::Socket { writing: true, timed_out: false, acked: Vec::new() },
            Err(_) => return Outcome::Socket { writing: true, timed_out: true, acked: Vec::new() },
        }
    }
    // AUTH's or SELECT's refusal (AUTH's first): every key then counts as refused.
    let mut head_error: Option<Vec<u8>> = None;
    if plan.auth.is_some() {
        match read_line(&mut r, plan.timeout).await {
            Ok(l) => head_error = (l[0] == b'-').then_some(l),
            Err(timed_out) => return Outcome::Socket { writing: false, timed_out, acked: Vec::new() },
        }
    }
    match read_line(&mut r, plan.timeout).await {
        Ok(l) => {
            if head_error.is_none() && l[0] == b'-' {
                head_error = Some(l);
            }
        }
        Err(timed_out) => return Outcome::Socket { writing: false, timed_out, acked: Vec::new() },
    }
    let mut target_error: Option<Vec<u8>> = None;
    let mut acked = Vec::new();
    for o in out {
        match read_line(&mut r, plan.timeout).await {
            Ok(l) if head_error.is_some() || l[0] == b'-' => {
                if target_error.is_none() {
                    target_error = Some(head_error.clone().unwrap_or(l));
                }
            }
            Ok(_) => acked.push(o.key.clone()),
            // After an error from the target, that error is the reply.
            Err(_) if target_error.is_some() => break,
            Err(timed_out) => return Outcome::Socket { writing: false, timed_out, acked },
        }
    }
    let error = target_error.map(|l| String::from_utf8_lossy(&l[1..]).into_owned());
    Outcome::Done { error, acked }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(ws: &[&str]) -> Vec<Bytes> {
        ws.iter().map(|w| Bytes::copy_from_slice(w.as_bytes())).collect()
    }

    #[test]
    fn arguments_are_checked_in_redis_order() {
        let p = parse(&words(&["migrate", "h", "6379", "k", "2", "0", "COPY", "replace", "AUTH2", "u", "p"])).unwrap();
        assert_eq!(p.timeout, Duration::from_millis(1000));
        assert_eq!((p.db, p.copy, p.replace), (2, true, true));
        assert_eq!(p.auth, Some((Some(Bytes::from("u")), Bytes::from("p"))));
        assert_eq!(p.keys, words(&["k"]));
        let p = parse(&words(&["migrate", "h", "1", "", "0", "5", "auth", "pw", "KEYS", "a", "b"])).unwrap();
        assert_eq!(
            (p.auth, p.keys, p.timeout),
            (Some((None, Bytes::from("pw"))), words(&["a", "b"]), Duration::from_millis(5))
        );
        // Options before integers: a syntax error wins over a bad timeout.
        assert_eq!(parse(&words(&["migrate", "h", "1", "k", "x", "y", "bogus"])), Err(syntax_error()));
        assert_eq!(parse(&words(&["migrate", "h", "1", "k", "0", "5", "AUTH"])), Err(syntax_error()));
        assert_eq!(parse(&words(&["migrate", "h", "1", "k", "0", "5", "AUTH2", "u"])), Err(syntax_error()));
        assert_eq!(
            parse(&words(&["migrate", "h", "1", "k", "0", "5", "KEYS", "a"])),
            Err(Reply::err("When using MIGRATE KEYS option, the key argument must be set to the empty string"))
        );
        assert_eq!(parse(&words(&["migrate", "h", "1", "k", "x", "5"])), Err(super::super::not_an_integer()));
        assert_eq!(parse(&words(&["migrate", "h", "1", "k", "0", "x"])), Err(super::super::not_an_integer()));
    }

    #[test]
    fn ports_read_like_atoi() {
        assert_eq!(atoi_port(b"6379"), Some(6379));
        assert_eq!(atoi_port(b"12ab"), Some(12));
        assert_eq!(atoi_port(b"x"), Some(0));
        assert_eq!(atoi_port(b"70000"), Some(4464));
        assert_eq!(atoi_port(b"99999999999"), None);
    }

    #[test]
    fn request_is_auth_select_then_restores() {
        let plan = parse(&words(&["migrate", "h", "1", "", "3", "5", "REPLACE", "AUTH", "pw", "KEYS", "a"])).unwrap();
        let out = [Outgoing { key: Bytes::from("a"), ttl: 7, payload: b"P".to_vec() }];
        let buf = request(&plan, &out);
        assert_eq!(
            &buf[..],
            &b"*2\r\n$4\r\nAUTH\r\n$2\r\npw\r\n*2\r\n$6\r\nSELECT\r\n$1\r\n3\r\n\
               *5\r\n$7\r\nRESTORE\r\n$1\r\na\r\n$1\r\n7\r\n$1\r\nP\r\n$7\r\nREPLACE\r\n"[..]
        );
    }
}
