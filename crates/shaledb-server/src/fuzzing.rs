//! Fuzz drivers that run a whole server: the `commands` target (arbitrary command lines through the real
//! dispatch, argument parsing and storage) and the `scripts` target (Lua scripts through the scripting bridge:
//! `redis.call`/`pcall` with arbitrary arguments, the Lua-to-RESP and RESP-to-Lua conversions, `cjson`, `bit`).
//!
//! Each driver owns a [`RunningServer`] on 127.0.0.1 and one client connection; an input is decoded into
//! commands, sent one at a time, and every reply must arrive within [`REPLY_TIMEOUT`] as one well-formed RESP2
//! or RESP3 frame. After each input the client is `RESET` and the data flushed, so inputs do not depend on each
//! other. A panic anywhere in the process (a server thread too: libFuzzer aborts on any panic) or a missing or
//! malformed reply is a finding. The decoding is deterministic, so an input replays the same commands (as long
//! as the command table is the same).
//!
//! Commands that would make the single client wait forever or leave the test's loopback server are never sent
//! at the top level (blocking commands, the SUBSCRIBE modes, SHUTDOWN, MIGRATE, REPLICAOF, CONFIG SET,
//! CLIENT PAUSE/KILL/REPLY ...): see `denied`. Inside scripts everything but those leaving the machine is
//! allowed: the bridge itself must refuse what scripts may not run.

use crate::config::Config;
use crate::server::RunningServer;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::time::Duration;

/// How long one reply may take before the driver reports a stuck server.
pub const REPLY_TIMEOUT: Duration = Duration::from_secs(30);

/// Most commands decoded from one input.
const MAX_COMMANDS: usize = 48;
/// Most arguments of one command (its name excluded).
const MAX_ARGS: usize = 10;
/// Deepest reply nesting the reader accepts (scripts can return nested tables).
const MAX_DEPTH: usize = 256;
/// Largest bulk reply the reader accepts (the server's `proto-max-bulk-len` is 1 MiB in the harness).
const MAX_BULK: usize = 64 << 20;

/// Tokens the decoder can pick as an argument: key names (some sharing a hash tag), numbers at the edges, and the
/// keywords Redis commands take.
const TOKENS: &[&str] = &[
    "k0",
    "k1",
    "k2",
    "{t}a",
    "{t}b",
    "0",
    "1",
    "-1",
    "2",
    "3",
    "10",
    "100",
    "-100",
    "1.5",
    "-0.5",
    "inf",
    "-inf",
    "+inf",
    "nan",
    "1e308",
    "9223372036854775807",
    "-9223372036854775808",
    "18446744073709551615",
    "4294967296",
    "*",
    "$",
    ">",
    "+",
    "-",
    "0-0",
    "0-1",
    "1-1",
    "(1",
    "[a",
    "(a",
    "#",
    "~",
    "=",
    "EX",
    "PX",
    "EXAT",
    "PXAT",
    "KEEPTTL",
    "NX",
    "XX",
    "GT",
    "LT",
    "CH",
    "INCR",
    "GET",
    "LIMIT",
    "COUNT",
    "MATCH",
    "TYPE",
    "WITHSCORES",
    "WITHSCORE",
    "BYSCORE",
    "BYLEX",
    "REV",
    "STORE",
    "ALPHA",
    "ASC",
    "DESC",
    "BY",
    "BLOCK",
    "STREAMS",
    "GROUP",
    "MKSTREAM",
    "ID",
    "JUSTID",
    "IDLE",
    "TIME",
    "RETRYCOUNT",
    "FORCE",
    "MAXLEN",
    "MINID",
    "NOMKSTREAM",
    "ENTRIESREAD",
    "WEIGHTS",
    "AGGREGATE",
    "SUM",
    "MIN",
    "MAX",
    "LEFT",
    "RIGHT",
    "BEFORE",
    "AFTER",
    "RANK",
    "MAXLEN",
    "WITHMATCHLEN",
    "MINMATCHLEN",
    "LEN",
    "IDX",
    "BIT",
    "BYTE",
    "OVERFLOW",
    "WRAP",
    "SAT",
    "FAIL",
    "SET",
    "INCRBY",
    "u8",
    "i16",
    "u63",
    "i64",
    "AND",
    "OR",
    "XOR",
    "NOT",
    "FROMMEMBER",
    "FROMLONLAT",
    "BYRADIUS",
    "BYBOX",
    "m",
    "km",
    "WITHCOORD",
    "WITHDIST",
    "WITHHASH",
    "ANY",
    "STOREDIST",
    "REPLACE",
    "ABSTTL",
    "FREQ",
    "DB",
    "COPY",
    "ENCODING",
    "IDLETIME",
    "REFCOUNT",
    "USAGE",
    "SAMPLES",
    "HELP",
    "ASYNC",
    "SYNC",
    "FULL",
    "CONSUMERS",
    "GROUPS",
    "STREAM",
    "CREATE",
    "SETID",
    "DESTROY",
    "CREATECONSUMER",
    "DELCONSUMER",
    "LIB",
    "RESET",
    "LATEST",
    "HISTORY",
    "GETKEYS",
    "INFO",
    "DOCS",
    "LIST",
    "ID",
    "SETNAME",
    "GETNAME",
    "3",
    "2",
];

/// What one input did: commands (or scripts) sent, and how many of them answered an error.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Tally {
    pub sent: usize,
    pub errors: usize,
}

impl Tally {
    fn count(&mut self, f: &Frame) {
        self.sent += 1;
        if matches!(f, Frame::Error(_)) {
            self.errors += 1;
        }
    }
}

/// A server and a client connection for one fuzz process.
pub struct ServerFuzzer {
    server: Option<RunningServer>,
    conn: Conn,
}

struct Conn {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
}

impl Conn {
    fn open(server: &RunningServer) -> Conn {
        let stream = TcpStream::connect(server.addr()).expect("connect to the fuzzed server");
        stream.set_read_timeout(Some(REPLY_TIMEOUT)).expect("read timeout");
        stream.set_write_timeout(Some(REPLY_TIMEOUT)).expect("write timeout");
        stream.set_nodelay(true).expect("nodelay");
        let writer = stream.try_clone().expect("clone the stream");
        Conn { reader: BufReader::new(stream), writer }
    }

    /// Sends one command and reads its one reply; panics (a finding) if none arrives or it is malformed.
    fn call(&mut self, args: &[&[u8]]) -> Frame {
        let mut out = Vec::with_capacity(64);
        out.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
        for a in args {
            out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
            out.extend_from_slice(a);
            out.extend_from_slice(b"\r\n");
        }
        self.writer.write_all(&out).unwrap_or_else(|e| panic!("sending {}: {e}", show(args)));
        loop {
            match read_frame(&mut self.reader, 0) {
                // A push (RESP3 `>`) is not the reply: keep reading.
                Ok(Frame::Push) => continue,
                Ok(f) => return f,
                Err(e) => panic!("no well-formed reply to {}: {e}", show(args)),
            }
        }
    }
}

/// What the driver needs to know of a reply.
#[derive(Debug, PartialEq)]
enum Frame {
    Simple(Vec<u8>),
    Error(Vec<u8>),
    Other,
    Push,
}

fn show(args: &[&[u8]]) -> String {
    let words: Vec<String> = args.iter().take(12).map(|a| format!("{:?}", String::from_utf8_lossy(a))).collect();
    words.join(" ")
}

fn read_line(r: &mut BufReader<TcpStream>) -> Result<Vec<u8>, String> {
    let mut line = Vec::new();
    // Bounded: a line longer than this is not a well-formed header.
    let n = r.by_ref().take(1 << 20).read_until(b'\n', &mut line).map_err(|e| e.to_string())?;
    if n == 0 {
        return Err("the server closed the connection".into());
    }
    if !line.ends_with(b"\r\n") {
        return Err(format!("a line without CRLF: {:?}", String::from_utf8_lossy(&line)));
    }
    line.truncate(line.len() - 2);
    Ok(line)
}

fn parse_len(s: &[u8]) -> Result<i64, String> {
    std::str::from_utf8(s).ok().and_then(|t| t.parse::<i64>().ok()).ok_or_else(|| format!("bad length {s:?}"))
}

/// Reads one RESP2/RESP3 frame, checking its shape.
fn read_frame(r: &mut BufReader<TcpStream>, depth: usize) -> Result<Frame, String> {
    if depth > MAX_DEPTH {
        return Err("reply nested too deep".into());
    }
    let line = read_line(r)?;
    let (&kind, rest) = line.split_first().ok_or("an empty line")?;
    match kind {
        b'+' => Ok(Frame::Simple(rest.to_vec())),
        b'-' => Ok(Frame::Error(rest.to_vec())),
        b':' | b'(' => parse_len(rest).map(|_| Frame::Other).or_else(|e| {
            // RESP3 big numbers may exceed i64: digits with an optional sign.
            let digits = rest.strip_prefix(b"-").unwrap_or(rest);
            if kind == b'(' && !digits.is_empty() && digits.iter().all(u8::is_ascii_digit) {
                Ok(Frame::Other)
            } else {
                Err(e)
            }
        }),
        b',' | b'#' | b'_' => Ok(Frame::Other),
        b'$' | b'!' | b'=' => {
            let n = parse_len(rest)?;
            if n == -1 && kind == b'$' {
                return Ok(Frame::Other);
            }
            let n = usize::try_from(n).map_err(|_| format!("negative bulk length {n}"))?;
            if n > MAX_BULK {
                return Err(format!("bulk of {n} bytes"));
            }
            let mut body = vec![0u8; n + 2];
            r.read_exact(&mut body).map_err(|e| e.to_string())?;
            if &body[n..] != b"\r\n" {
                return Err("a bulk without CRLF".into());
            }
            Ok(if kind == b'!' { Frame::Error(body[..n].to_vec()) } else { Frame::Other })
        }
        b'*' | b'~' | b'>' | b'%' | b'|' => {
            let n = parse_len(rest)?;
            if n == -1 && kind == b'*' {
                return Ok(Frame::Other);
            }
            let n = u64::try_from(n).map_err(|_| format!("negative aggregate length {n}"))?;
            let items = if kind == b'%' || kind == b'|' { n.saturating_mul(2) } else { n };
            for _ in 0..items {
                read_frame(r, depth + 1)?;
            }
            if kind == b'|' {
                // An attribute precedes the reply it describes.
                return read_frame(r, depth + 1);
            }
            Ok(if kind == b'>' { Frame::Push } else { Frame::Other })
        }
        _ => Err(format!("unknown frame type {:?}", kind as char)),
    }
}

/// Commands never sent by the `commands` target: they block the one client, change the server for the inputs
/// after (its port, directory, password, users), leave loopback, or are covered by the `scripts` target.
/// PFSELFTEST takes no input and runs for seconds: under the sanitizer on a busy core it outlasted the 30 s
/// reply timeout (the first long run's only "finding").
fn denied(name: &str, sub: Option<&[u8]>) -> bool {
    const NAMES: &[&str] = &[
        "shutdown",
        "pfselftest",
        "debug",
        "monitor",
        "quit",
        "migrate",
        "replicaof",
        "slaveof",
        "sync",
        "psync",
        "failover",
        "save",
        "bgsave",
        "bgrewriteaof",
        "module",
        "eval",
        "evalsha",
        "eval_ro",
        "evalsha_ro",
        "fcall",
        "fcall_ro",
        "function",
        "script",
        "xread",
        "xreadgroup",
        "wait",
        "waitaof",
        "subscribe",
        "psubscribe",
        "ssubscribe",
        "unsubscribe",
        "punsubscribe",
        "sunsubscribe",
        "acl",
        "auth",
    ];
    if NAMES.contains(&name) {
        return true;
    }
    let sub = sub.map(|s| s.to_ascii_lowercase());
    let sub = sub.as_deref();
    match name {
        "config" => !matches!(sub, Some(b"get") | Some(b"help")),
        "client" => {
            matches!(sub, Some(b"pause") | Some(b"kill") | Some(b"reply") | Some(b"tracking") | Some(b"unblock"))
        }
        // HELLO's AUTH would change the connection's user; the protocol switch stays allowed.
        "hello" => false,
        _ => false,
    }
}

/// Reads the input as a stream of choices.
struct Input<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> Input<'a> {
    fn byte(&mut self) -> Option<u8> {
        let b = *self.data.get(self.pos)?;
        self.pos += 1;
        Some(b)
    }

    fn bytes(&mut self, n: usize) -> &'a [u8] {
        let end = (self.pos + n).min(self.data.len());
        let s = &self.data[self.pos..end];
        self.pos = end;
        s
    }

    /// One argument: a token (most bytes) or raw input bytes (a length byte, then the bytes).
    fn arg(&mut self) -> Option<Vec<u8>> {
        let b = self.byte()?;
        if (b as usize) < 224 {
            Some(TOKENS[b as usize % TOKENS.len()].as_bytes().to_vec())
        } else {
            let n = self.byte()? as usize % 48;
            Some(self.bytes(n).to_vec())
        }
    }
}

impl ServerFuzzer {
    /// Starts a server on `dir` (created; it should be empty or absent), `appendfsync no`, 1 MiB strings.
    pub fn start(dir: PathBuf) -> ServerFuzzer {
        let mut c = Config { dir, port: 0, bind: "127.0.0.1".into(), ..Config::default() };
        c.appendfsync = crate::Appendfsync::No;
        c.limits.max_bulk_len = 1 << 20;
        let server = RunningServer::start(c).expect("start the fuzzed server");
        let mut conn = Conn::open(&server);
        // A runaway script becomes killable quickly (see `kill_script`).
        let r = conn.call(&[b"CONFIG", b"SET", b"busy-reply-threshold", b"200"]);
        assert_eq!(r, Frame::Simple(b"OK".to_vec()), "CONFIG SET busy-reply-threshold");
        ServerFuzzer { server: Some(server), conn }
    }

    fn server(&self) -> &RunningServer {
        self.server.as_ref().expect("the server runs until drop")
    }

    /// Back to a fresh client on an empty server; checks the server still answers.
    fn cleanup(&mut self) {
        let r = self.conn.call(&[b"RESET"]);
        assert_eq!(r, Frame::Simple(b"RESET".to_vec()), "RESET after an input");
        for cmd in [&[&b"FLUSHALL"[..]][..], &[b"SCRIPT", b"FLUSH"], &[b"FUNCTION", b"FLUSH"]] {
            let r = self.conn.call(cmd);
            assert_eq!(r, Frame::Simple(b"OK".to_vec()), "{} after an input", show(cmd));
        }
    }

    /// The `commands` target: arbitrary bytes as a sequence of commands.
    pub fn run_commands(&mut self, data: &[u8]) -> Tally {
        let mut tally = Tally::default();
        for args in decode_commands(data) {
            let refs: Vec<&[u8]> = args.iter().map(|a| a.as_slice()).collect();
            let reply = self.conn.call(&refs);
            tally.count(&reply);
        }
        self.cleanup();
        tally
    }

    /// The `scripts` target: arbitrary bytes as a Lua script (built from fragments, so it always ends) with
    /// arbitrary KEYS and ARGV, run by EVAL; also loaded as a function library when it parses as one.
    pub fn run_scripts(&mut self, data: &[u8]) -> Tally {
        let mut tally = Tally::default();
        let mut input = Input { data, pos: 0 };
        let (script, argv) = build_script(&mut input);
        let nkeys = argv.len().min(2);
        let mut args: Vec<Vec<u8>> = vec![b"EVAL".to_vec(), script.clone().into_bytes(), nkeys.to_string().into()];
        args.extend(argv.iter().cloned());
        let refs: Vec<&[u8]> = args.iter().map(|a| a.as_slice()).collect();
        tally.count(&self.call_script(&refs));
        // The same body as a function: FUNCTION LOAD, then FCALL.
        let lib = format!("#!lua name=fz\nredis.register_function('f', function(KEYS, ARGV)\n{script}\nend)\n");
        if !matches!(self.conn.call(&[b"FUNCTION", b"LOAD", b"REPLACE", lib.as_bytes()]), Frame::Error(_)) {
            let mut f: Vec<Vec<u8>> = vec![b"FCALL".to_vec(), b"f".to_vec(), nkeys.to_string().into()];
            f.extend(argv);
            let refs: Vec<&[u8]> = f.iter().map(|a| a.as_slice()).collect();
            tally.count(&self.call_script(&refs));
        }
        self.cleanup();
        tally
    }

    /// Runs a script command; if it runs past the timeout, kills it from a second connection.
    fn call_script(&mut self, args: &[&[u8]]) -> Frame {
        let out = {
            let mut out = Vec::new();
            out.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
            for a in args {
                out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
                out.extend_from_slice(a);
                out.extend_from_slice(b"\r\n");
            }
            out
        };
        self.conn.writer.write_all(&out).expect("send a script");
        let stream = self.conn.reader.get_ref();
        stream.set_read_timeout(Some(Duration::from_secs(2))).expect("read timeout");
        let first = read_frame(&mut self.conn.reader, 0);
        self.conn.reader.get_ref().set_read_timeout(Some(REPLY_TIMEOUT)).expect("read timeout");
        match first {
            Ok(f) => f,
            Err(_) => {
                // Still running (the fragments do not loop, but a script can be slow): kill it.
                let mut side = Conn::open(self.server());
                for kill in [&[&b"SCRIPT"[..], b"KILL"][..], &[b"FUNCTION", b"KILL"]] {
                    side.call(kill);
                }
                read_frame(&mut self.conn.reader, 0)
                    .unwrap_or_else(|e| panic!("no reply to {} after SCRIPT KILL: {e}", show(args)))
            }
        }
    }
}

impl Drop for ServerFuzzer {
    fn drop(&mut self) {
        if let Some(s) = self.server.take() {
            let _ = s.shutdown();
        }
    }
}

/// The commands an input of the `commands` target stands for: per command a byte choosing the name among
/// `allowed_names`, a byte giving the argument count (modulo `MAX_ARGS + 1`), then each argument (see
/// `Input::arg`). Denied commands are dropped.
pub fn decode_commands(data: &[u8]) -> Vec<Vec<Vec<u8>>> {
    let names = allowed_names();
    let mut input = Input { data, pos: 0 };
    let mut out = Vec::new();
    for _ in 0..MAX_COMMANDS {
        let (Some(c), Some(n)) = (input.byte(), input.byte()) else { break };
        let name = names[c as usize % names.len()];
        let mut args: Vec<Vec<u8>> = vec![name.as_bytes().to_vec()];
        for _ in 0..(n as usize % (MAX_ARGS + 1)) {
            match input.arg() {
                Some(a) => args.push(a),
                None => break,
            }
        }
        if !denied(name, args.get(1).map(|a| a.as_slice())) {
            out.push(args);
        }
    }
    out
}

/// The input that [`decode_commands`] reads back as `cmds` (for seeding a corpus), or `None` if a command is
/// not one the target sends or an argument is longer than a raw argument can be.
pub fn encode_commands(cmds: &[&[&[u8]]]) -> Option<Vec<u8>> {
    let names = allowed_names();
    let mut out = Vec::new();
    for cmd in cmds {
        let (name, args) = cmd.split_first()?;
        let lower = String::from_utf8(name.to_ascii_lowercase()).ok()?;
        let c = names.iter().position(|n| *n == lower)?;
        if c > 255 || args.len() > MAX_ARGS {
            return None;
        }
        out.push(c as u8);
        out.push(args.len() as u8);
        for a in args.iter() {
            match TOKENS.iter().position(|t| t.as_bytes() == *a) {
                Some(i) if i < 224 => out.push(i as u8),
                _ if a.len() < 48 => {
                    out.extend_from_slice(&[224, a.len() as u8]);
                    out.extend_from_slice(a);
                }
                _ => return None,
            }
        }
    }
    Some(out)
}

/// The commands the `commands` target picks from, in table order.
fn allowed_names() -> Vec<&'static str> {
    crate::commands::all()
        .filter(|s| s.flags & crate::commands::flags::BLOCKING == 0)
        .map(|s| s.name)
        .filter(|n| !denied(n, None) || *n == "config" || *n == "client")
        .collect()
}

/// Script fragments: each is a statement using `a` (the previous result), ARGV and KEYS; none loops.
const STATEMENTS: &[&str] = &[
    "a = redis.call(@C, unpack(ARGV))",
    "a = redis.pcall(@C, unpack(ARGV))",
    "a = redis.call(@C, KEYS[1], ARGV[3])",
    "a = redis.pcall(@C, KEYS[1], ARGV[3], ARGV[4])",
    "a = redis.pcall(@C, a)",
    "a = redis.pcall(@C, KEYS[1], a, ARGV[3])",
    "a = cjson.encode(a)",
    "a = cjson.decode(ARGV[3] or '')",
    "a = pcall(cjson.decode, ARGV[4] or 'x')",
    "a = redis.sha1hex(tostring(a))",
    "a = {a, ARGV[3], {ARGV[4], 1.5, -2}, true, false}",
    "a = {err = tostring(a)}",
    "a = {ok = tostring(a)}",
    "a = redis.error_reply(tostring(a))",
    "a = redis.status_reply(tostring(a))",
    "a = bit.band(tonumber(ARGV[3]) or 0, 255)",
    "a = bit.tohex(tonumber(ARGV[4]) or 1)",
    "a = tonumber(ARGV[3])",
    "a = #tostring(a)",
    "redis.setresp(3)",
    "redis.setresp(2)",
    "a = pcall(redis.setresp, tonumber(ARGV[3]) or 4)",
    "a = {tonumber(ARGV[3]) or 0, {double = tonumber(ARGV[4]) or 0.5}}",
    "a = {map = {x = ARGV[3]}}",
    "a = {set = {y = true}}",
    "a = {big_number = ARGV[3]}",
    "a = redis.pcall('SET', KEYS[1], tostring(a))",
    "a = redis.pcall('GET', KEYS[1])",
    "a = pcall(redis.call, @C)",
    "a = redis.pcall('HSET', KEYS[2], ARGV[3] or 'f', tostring(a))",
    "a = redis.pcall('HGETALL', KEYS[2])",
    "a = pcall(error, a)",
    "error(tostring(a))",
    "a = string.sub(tostring(a), 1, 8)",
    "a = type(a)",
    "redis.set_repl(redis.REPL_ALL)",
    "a = redis.pcall('ZADD', KEYS[1], ARGV[3] or '1', ARGV[4] or 'm')",
    "a = redis.pcall('XADD', KEYS[1], '*', 'f', tostring(a))",
    "a = redis.pcall('LPUSH', KEYS[1], tostring(a))",
    "a = redis.pcall('LRANGE', KEYS[1], 0, -1)",
];

/// Builds a script from the input: statements chosen from [`STATEMENTS`] (with `@C` a command name chosen by
/// the input, any command of the table, blocking and no-script ones included: the bridge must refuse or
/// run them without waiting), ending in `return a`; then the arguments.
fn build_script(input: &mut Input<'_>) -> (String, Vec<Vec<u8>>) {
    let all: Vec<&'static str> = crate::commands::all()
        .map(|s| s.name)
        .filter(|n| {
            !matches!(
                *n,
                "shutdown"
                    | "migrate"
                    | "replicaof"
                    | "slaveof"
                    | "sync"
                    | "psync"
                    | "failover"
                    | "debug"
                    | "pfselftest"
            )
        })
        .collect();
    let mut s = String::from("local a = nil\n");
    let count = input.byte().map_or(0, |b| b as usize % 12);
    for _ in 0..count {
        let (Some(st), Some(c)) = (input.byte(), input.byte()) else { break };
        let stmt = STATEMENTS[st as usize % STATEMENTS.len()];
        let name = all[c as usize % all.len()];
        s.push_str(&stmt.replace("@C", &format!("'{name}'")));
        s.push('\n');
    }
    s.push_str("return a\n");
    let nargs = input.byte().map_or(0, |b| b as usize % 6);
    let mut argv = Vec::new();
    for _ in 0..nargs {
        match input.arg() {
            Some(a) => argv.push(a),
            None => break,
        }
    }
    // At least the two keys the statements name.
    while argv.len() < 2 {
        argv.push(format!("k{}", argv.len()).into_bytes());
    }
    (s, argv)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scripts_are_built_from_fragments_only() {
        let data: Vec<u8> = (0..=255u8).cycle().take(600).collect();
        let (script, argv) = build_script(&mut Input { data: &data, pos: 0 });
        assert!(script.starts_with("local a = nil\n") && script.ends_with("return a\n"), "{script}");
        assert!(!script.contains("while") && !script.contains("repeat"), "{script}");
        assert!(argv.len() >= 2);
    }

    #[test]
    fn encoded_commands_decode_back() {
        let cmds: &[&[&[u8]]] = &[
            &[b"SET", b"k0", b"hello world", b"EX", b"100"],
            &[b"zadd", b"{t}a", b"1.5", b"m"],
            &[b"XADD", b"k1", b"*", b"f", b"v"],
            &[b"CONFIG", b"GET", b"maxmemory"],
        ];
        let data = encode_commands(cmds).expect("encodable");
        let back = decode_commands(&data);
        let want: Vec<Vec<Vec<u8>>> = cmds
            .iter()
            .map(|c| {
                let mut v: Vec<Vec<u8>> = c.iter().map(|a| a.to_vec()).collect();
                v[0] = v[0].to_ascii_lowercase();
                v
            })
            .collect();
        assert_eq!(back, want);
        assert_eq!(encode_commands(&[&[b"SHUTDOWN"]]), None);
        // A denied subcommand decodes to nothing.
        let data = encode_commands(&[&[b"CONFIG", b"SET", b"port", b"1"]]).expect("encodable");
        assert!(decode_commands(&data).is_empty());
    }

    #[test]
    fn the_commands_target_never_picks_a_denied_command() {
        let names = allowed_names();
        assert!(names.len() > 150, "{} commands", names.len());
        for n in ["shutdown", "migrate", "blpop", "eval", "subscribe", "xread"] {
            assert!(!names.contains(&n), "{n}");
        }
        assert!(denied("config", Some(b"SET")) && !denied("config", Some(b"get")));
        assert!(denied("client", Some(b"Pause")) && !denied("client", Some(b"id")));
    }
}
