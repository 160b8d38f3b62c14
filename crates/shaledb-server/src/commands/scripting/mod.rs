//! Lua scripting: EVAL, EVALSHA, EVAL_RO, EVALSHA_RO, SCRIPT, and (`functions.rs`) FUNCTION, FCALL,
//! FCALL_RO.
//!
//! A script runs in the commit step as ONE write command, like EXEC: its `redis.call`s execute on the
//! group's [`WriteCtx`] in order (a read sees the script's own writes), no other write can come between
//! them, its writes go into the group's one batch and its reply is sent after that batch's fsync. A script
//! that fails half-way keeps the writes it made, as in Redis.
//!
//! The VMs (`lua.rs`) live in [`Scripts`], one per server (in the `Store`), and only the commit step
//! touches them. The connection side sees only what [`intercept`] needs, in atomics and a small lock: which
//! script runs since when (for `-BUSY` once it ran past `busy-reply-threshold`, and FUNCTION STATS), and the
//! kill request the VM's hook polls (SCRIPT KILL, FUNCTION KILL, SHUTDOWN). SCRIPT KILL and FUNCTION
//! KILL/STATS are answered on the connection's task, since the commit step is busy with the script.
//!
//! The script cache (SCRIPT LOAD, EVAL) is per process and not persisted, as Redis's; function libraries
//! are durable (`types/scripts.rs`), loaded on the first command that needs them.

pub mod cjson;
pub mod cmsgpack;
pub mod functions;
pub mod libargs;
pub mod lua;
pub mod structlib;
pub mod trampoline;

use super::{help_reply, sub_arity, unknown_subcommand, Spec};
use crate::resp::{Args, Reply};
use crate::server::{Session, Shared};
use crate::store::WriteCtx;
use bytes::Bytes;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

pub static COMMANDS: &[Spec] = &[
    cmd! { "eval", -3, NOSCRIPT | STALE, [0, 0, 0], Write(eval), "Executes a server-side Lua script." },
    cmd! { "evalsha", -3, NOSCRIPT | STALE, [0, 0, 0], Write(evalsha), "Executes a server-side Lua script by SHA1 digest." },
    cmd! { "eval_ro", -3, NOSCRIPT | STALE | READONLY, [0, 0, 0], Write(eval_ro), "Executes a read-only server-side Lua script." },
    cmd! { "evalsha_ro", -3, NOSCRIPT | STALE | READONLY, [0, 0, 0], Write(evalsha_ro), "Executes a read-only server-side Lua script by SHA1 digest." },
    cmd! { "script", -2, NOSCRIPT, [0, 0, 0], Write(script), "A container for Lua scripts management commands." },
    cmd! { "fcall", -3, NOSCRIPT | STALE, [0, 0, 0], Write(functions::fcall), "Invokes a function." },
    cmd! { "fcall_ro", -3, NOSCRIPT | STALE | READONLY, [0, 0, 0], Write(functions::fcall_ro), "Invokes a read-only function." },
    cmd! { "function", -2, NOSCRIPT, [0, 0, 0], Write(functions::function), "A container for function commands." },
];

/// Default of `busy-reply-threshold` (`lua-time-limit`), milliseconds.
pub const DEFAULT_BUSY_REPLY_THRESHOLD_MS: u64 = 5000;

/// `busy-reply-threshold` (alias `lua-time-limit`) in milliseconds, as CONFIG SET left it: after a script
/// ran this long, other clients get `-BUSY` (0: never). The configuration keeps the two names apart, so
/// the one set away from the default wins, `busy-reply-threshold` first.
pub fn busy_reply_threshold_ms(config: &crate::config::Config) -> u64 {
    let read = |name: &str| config.get(name).and_then(|v| v.parse::<u64>().ok());
    match (read("busy-reply-threshold"), read("lua-time-limit")) {
        (Some(b), _) if b != DEFAULT_BUSY_REPLY_THRESHOLD_MS => b,
        (_, Some(l)) => l,
        (b, None) => b.unwrap_or(DEFAULT_BUSY_REPLY_THRESHOLD_MS),
    }
}

/// What the VMs' hook polls, set from other threads.
#[derive(Default, Debug)]
pub struct Control {
    /// Stop the running script at the next hook (SCRIPT KILL, FUNCTION KILL, SHUTDOWN).
    pub kill: AtomicBool,
    /// Unix ms after which a library's load is stopped (0: no load running).
    pub load_deadline_ms: AtomicU64,
    /// The kill came from SHUTDOWN: a script that wrote is stopped too, and its group is not written.
    pub force: AtomicBool,
    /// Where the commands a script calls are shown (MONITOR) and counted (`INFO commandstats`), once the
    /// server has set it.
    pub observers: std::sync::OnceLock<Observers>,
}

/// The server's command statistics and MONITOR feeds, which see every `redis.call` as Redis shows it.
#[derive(Clone)]
pub struct Observers {
    pub commands: Arc<crate::commands::server_cmds::stats::CommandStats>,
    pub monitors: Arc<crate::commands::server_cmds::monitor::Monitors>,
    /// The users: a script's calls are checked against its caller's permissions.
    pub acl: Option<Arc<crate::acl::Acl>>,
}

impl std::fmt::Debug for Observers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Observers").finish_non_exhaustive()
    }
}

/// The script or function running now.
struct Running {
    name: String,
    is_eval: bool,
    started: Instant,
    command: Args,
}

/// The scripting state of one server.
pub struct Scripts {
    control: Arc<Control>,
    /// The EVAL VM and the script cache (commit step only).
    eval: Mutex<Option<EvalVm>>,
    /// The functions' VM and libraries (commit step only).
    functions: Mutex<Option<functions::Libraries>>,
    running: Mutex<Option<Running>>,
    /// The running script executed a write (SCRIPT KILL then answers UNKILLABLE).
    wrote: AtomicBool,
    /// FUNCTION STATS' counts, kept here so they are answered while a function runs.
    libraries: AtomicU64,
    functions_count: AtomicU64,
    /// Scripts in the EVAL cache (`INFO memory`'s `number_of_cached_scripts`).
    cached: AtomicU64,
}

impl Default for Scripts {
    fn default() -> Scripts {
        Scripts {
            control: Arc::new(Control::default()),
            eval: Mutex::new(None),
            functions: Mutex::new(None),
            running: Mutex::new(None),
            wrote: AtomicBool::new(false),
            libraries: AtomicU64::new(0),
            functions_count: AtomicU64::new(0),
            cached: AtomicU64::new(0),
        }
    }
}

impl std::fmt::Debug for Scripts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scripts").field("control", &self.control).finish_non_exhaustive()
    }
}

impl Scripts {
    /// Stops the running script or function, even one that wrote (SHUTDOWN): its group is then not
    /// written at all, so none of the script's writes land. Nothing happens when no script runs.
    pub fn abort_for_shutdown(&self) {
        let r = self.running.lock();
        if r.is_some() {
            self.control.force.store(true, Ordering::Release);
            self.control.kill.store(true, Ordering::Release);
        }
    }

    /// Lets the commands scripts call show in MONITOR and `INFO commandstats` (the server, at its start;
    /// only the first call counts).
    pub fn set_observers(&self, observers: Observers) {
        let _ = self.control.observers.set(observers);
    }

    /// How many scripts the EVAL cache holds (`number_of_cached_scripts` of `INFO memory`); answered
    /// without waiting for a running script.
    pub fn number_of_cached_scripts(&self) -> u64 {
        self.cached.load(Ordering::Relaxed)
    }

    /// True while a script or function runs.
    pub fn is_running(&self) -> bool {
        self.running.lock().is_some()
    }

    fn begin_run(&self, name: &str, is_eval: bool, command: &Args) {
        let mut r = self.running.lock();
        self.control.kill.store(false, Ordering::Release);
        self.control.force.store(false, Ordering::Release);
        self.wrote.store(false, Ordering::Release);
        *r = Some(Running { name: name.to_string(), is_eval, started: Instant::now(), command: command.clone() });
    }

    /// Ends the run; a script stopped by SHUTDOWN after it wrote fails the whole group (nothing of it is
    /// written: the script's writes are all there or none).
    fn end_run(&self, ctx: &mut WriteCtx<'_>) {
        let mut r = self.running.lock();
        if self.control.force.load(Ordering::Acquire) && self.wrote.load(Ordering::Acquire) {
            ctx.abandon("a script that wrote was stopped by SHUTDOWN".into());
        }
        self.control.kill.store(false, Ordering::Release);
        self.control.force.store(false, Ordering::Release);
        *r = None;
    }

    /// SCRIPT KILL (`is_eval`) or FUNCTION KILL.
    fn kill(&self, is_eval: bool) -> Reply {
        let r = self.running.lock();
        let Some(run) = r.as_ref() else { return Reply::error("NOTBUSY No scripts in execution right now.") };
        if self.wrote.load(Ordering::Acquire) {
            return Reply::error(
                "UNKILLABLE Sorry the script already executed write commands against the dataset. You can either \
                 wait the script termination or kill the server in a hard way using the SHUTDOWN NOSAVE command.",
            );
        }
        if is_eval != run.is_eval {
            return busy_error(run.is_eval);
        }
        self.control.kill.store(true, Ordering::Release);
        Reply::Ok
    }

    /// The running script's entry of FUNCTION STATS.
    fn running_entry(&self) -> Reply {
        match self.running.lock().as_ref() {
            None => Reply::Nil,
            Some(run) => Reply::Map(vec![
                (Reply::bulk("name"), Reply::Bulk(Bytes::from(run.name.clone()))),
                (Reply::bulk("command"), Reply::Array(run.command.iter().cloned().map(Reply::Bulk).collect())),
                (Reply::bulk("duration_ms"), Reply::Int(run.started.elapsed().as_millis() as i64)),
            ]),
        }
    }
}

fn busy_error(is_eval: bool) -> Reply {
    Reply::error(if is_eval {
        "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE."
    } else {
        "BUSY Redis is busy running a script. You can only call FUNCTION KILL or SHUTDOWN NOSAVE."
    })
}

/// Called by the connection for every checked command, before it runs: answers SCRIPT KILL, FUNCTION KILL
/// and FUNCTION STATS on the connection's task, and `-BUSY` to every command but Redis 7.0's `allow-busy`
/// ones (AUTH, HELLO, QUIT, RESET, MULTI, DISCARD, WATCH, UNWATCH, SHUTDOWN) while a script runs past
/// `busy-reply-threshold`. SHUTDOWN stops the running script. `None`: run the command as usual.
pub fn intercept(s: &Session, shared: &Shared, spec: &Spec, args: &Args) -> Option<Reply> {
    let sc = &shared.store.scripts;
    if s.multi.is_none() && args.len() == 2 {
        let sub = &args[1];
        match spec.name {
            "script" if sub.eq_ignore_ascii_case(b"kill") => return Some(sc.kill(true)),
            "function" if sub.eq_ignore_ascii_case(b"kill") => return Some(sc.kill(false)),
            // As Redis: FUNCTION STATS is answered while a function runs, but is BUSY under an EVAL script.
            "function" if sub.eq_ignore_ascii_case(b"stats") => {
                return Some(if busy(shared) == Some(true) { busy_error(true) } else { functions::stats(sc) })
            }
            _ => {}
        }
    }
    if spec.name == "shutdown" {
        sc.abort_for_shutdown();
        return None;
    }
    let is_eval = busy(shared)?;
    match spec.name {
        // Redis 7.0's `allow-busy` commands (SCRIPT KILL, FUNCTION KILL and STATS, SHUTDOWN were answered
        // above; REPLCONF is not served here).
        "auth" | "hello" | "quit" | "reset" | "multi" | "discard" | "watch" | "unwatch" => None,
        _ => Some(busy_error(is_eval)),
    }
}

/// `Some(is_eval)` while a script (EVAL: `true`) or function runs past `busy-reply-threshold`: other
/// clients are then answered, most of them with `-BUSY`, as Redis does while it runs one.
pub fn busy(shared: &Shared) -> Option<bool> {
    let sc = &shared.store.scripts;
    if !sc.is_running() {
        return None;
    }
    let threshold = busy_reply_threshold_ms(&shared.config.read());
    let running = sc.running.lock();
    let run = running.as_ref()?;
    if threshold == 0 || (run.started.elapsed().as_millis() as u64) < threshold {
        return None;
    }
    Some(run.is_eval)
}

/// The scripting state of the server whose commit step runs `ctx`.
fn scripts_of(ctx: &WriteCtx<'_>) -> Result<Arc<Scripts>, Reply> {
    ctx.scripts
        .clone()
        .and_then(|a| a.downcast::<Scripts>().ok())
        .ok_or_else(|| Reply::err("scripting is not available on this context"))
}

/// The EVAL VM and its script cache.
struct EvalVm {
    vm: lua::Vm,
    /// SHA1 (lower-case hex) -> the compiled script and its shebang flags.
    scripts: HashMap<String, Cached>,
}

struct Cached {
    f: mlua::Function,
    flags: ScriptFlags,
}

/// The flags of a script's `#!lua flags=...` line (or of a function's registration).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct ScriptFlags {
    /// The script has a shebang line (Redis then applies its flags instead of the compatible defaults).
    pub shebang: bool,
    pub no_writes: bool,
    /// `no-cluster`: refused on a cluster member.
    pub no_cluster: bool,
    /// `allow-cross-slot-keys`.
    pub cross_slot: bool,
}

/// Redis's refusal of a script or function declaring `no-cluster` on a cluster node.
pub(super) const NO_CLUSTER: &str = "Can not run script on cluster, 'no-cluster' flag is set.";

/// The flags a script or function may declare.
pub const KNOWN_FLAGS: [&str; 5] = ["no-writes", "allow-oom", "allow-stale", "no-cluster", "allow-cross-slot-keys"];

/// Whether an EVAL of `body` declares that it writes nothing (`#!lua flags=no-writes`): Redis then takes
/// it for a read (CLIENT PAUSE WRITE does not hold it). A script without a shebang may write.
pub fn eval_declares_no_writes(body: &[u8]) -> bool {
    shebang(body).is_ok_and(|(f, _)| f.shebang && f.no_writes)
}

/// Parses an EVAL script's shebang line: its flags and the length of the line (without its newline, which
/// stays in the compiled code so line numbers do not move).
fn shebang(body: &[u8]) -> Result<(ScriptFlags, usize), Reply> {
    if !body.starts_with(b"#!") {
        return Ok((ScriptFlags::default(), 0));
    }
    let Some(len) = body.iter().position(|&b| b == b'\n') else { return Err(Reply::err("Invalid script shebang")) };
    let line = String::from_utf8_lossy(&body[..len]);
    let mut parts = line.split_ascii_whitespace();
    match parts.next() {
        Some("#!lua") => {}
        Some(other) => return Err(Reply::err(format!("Unexpected engine in script shebang: {other}"))),
        None => return Err(Reply::err("Invalid engine in script shebang")),
    }
    let mut flags = ScriptFlags { shebang: true, ..ScriptFlags::default() };
    for part in parts {
        let Some(list) = part.strip_prefix("flags=") else {
            return Err(Reply::err(format!("Unknown lua shebang option: {part}")));
        };
        for f in list.split(',').filter(|f| !f.is_empty()) {
            if !KNOWN_FLAGS.contains(&f) {
                return Err(Reply::err(format!("Unexpected flag in script shebang: {f}")));
            }
            match f {
                "no-writes" => flags.no_writes = true,
                "no-cluster" => flags.no_cluster = true,
                "allow-cross-slot-keys" => flags.cross_slot = true,
                _ => {}
            }
        }
    }
    Ok((flags, len))
}

fn sha1_hex(body: &[u8]) -> String {
    sha1_smol::Sha1::from(body).digest().to_string()
}

impl Scripts {
    /// Whether the script EVALSHA `sha` runs, or the function FCALL `name` calls, declares `no-writes` (so
    /// CLIENT PAUSE WRITE lets it through, as Redis does). `None` when that cannot be told without waiting
    /// (a script is running, the functions are not loaded yet) or the script or function is unknown.
    pub fn declares_no_writes(&self, fcall: bool, name: &[u8]) -> Option<bool> {
        if fcall {
            return self.function_declares_no_writes(&String::from_utf8_lossy(name));
        }
        let sha = String::from_utf8_lossy(name).to_ascii_lowercase();
        let guard = self.eval.try_lock()?;
        let cached = guard.as_ref()?.scripts.get(&sha)?;
        Some(cached.flags.shebang && cached.flags.no_writes)
    }

    fn note_cached(&self, ev: &EvalVm) {
        self.cached.store(ev.scripts.len() as u64, Ordering::Relaxed);
    }

    /// Runs `f` with the EVAL VM (created on first use, or again after SCRIPT FLUSH).
    fn with_eval<R>(&self, f: impl FnOnce(&mut EvalVm) -> Result<R, Reply>) -> Result<R, Reply> {
        let mut guard = self.eval.lock();
        if guard.is_none() {
            let vm = lua::Vm::new(self.control.clone())
                .map_err(|e| Reply::err(format!("could not start the Lua VM: {e}")))?;
            *guard = Some(EvalVm { vm, scripts: HashMap::new() });
        }
        match guard.as_mut() {
            Some(ev) => f(ev),
            None => Err(Reply::err("could not start the Lua VM")),
        }
    }
}

/// Compiles `body` into the cache (if it is not there): its SHA1.
fn cache_script(ev: &mut EvalVm, body: &[u8]) -> Result<String, Reply> {
    let sha = sha1_hex(body);
    if ev.scripts.contains_key(&sha) {
        return Ok(sha);
    }
    let (flags, skip) = shebang(body)?;
    let f = ev
        .vm
        .compile(&body[skip..], lua::EVAL_CHUNK)
        .map_err(|e| Reply::err(format!("Error compiling script (new function): {e}")))?;
    ev.scripts.insert(sha.clone(), Cached { f, flags });
    Ok(sha)
}

/// `numkeys` of EVAL/FCALL (`args[2]`): the keys and the other arguments.
pub(crate) fn split_keys<'a>(args: &'a Args, bad_number: &str) -> Result<(&'a [Bytes], &'a [Bytes]), Reply> {
    let n = match crate::resp::parse_i64(&args[2]) {
        Some(n) => n,
        None => return Err(Reply::err(bad_number)),
    };
    if n > (args.len() - 3) as i64 {
        return Err(Reply::err("Number of keys can't be greater than number of args"));
    }
    if n < 0 {
        return Err(Reply::err("Number of keys can't be negative"));
    }
    let n = n as usize;
    Ok((&args[3..3 + n], &args[3 + n..]))
}

fn eval_generic(ctx: &mut WriteCtx<'_>, args: &Args, by_sha: bool, ro: bool) -> Reply {
    let sc = tri!(scripts_of(ctx));
    if by_sha && args[1].len() != 40 {
        return noscript();
    }
    let (keys, argv) = tri!(split_keys(args, "value is not an integer or out of range"));
    let r = sc.with_eval(|ev| {
        let sha = if by_sha {
            String::from_utf8_lossy(&args[1]).to_ascii_lowercase()
        } else {
            let sha = cache_script(ev, &args[1])?;
            sc.note_cached(ev);
            sha
        };
        let Some(cached) = ev.scripts.get(&sha) else { return Err(noscript()) };
        if ro && cached.flags.shebang && !cached.flags.no_writes {
            return Err(Reply::err("Can not execute a script with write flag using *_ro command."));
        }
        if cached.flags.no_cluster && ctx.serves_slot.is_some() {
            return Err(Reply::err(NO_CLUSTER));
        }
        let opts = lua::RunOpts {
            name: &sha,
            read_only: ro || cached.flags.no_writes,
            is_function: false,
            cross_slot: cached.flags.cross_slot,
        };
        sc.begin_run(&sha, true, args);
        let reply = ev.vm.run(&cached.f, keys, argv, ctx, &opts, &sc.wrote);
        sc.end_run(ctx);
        Ok(reply)
    });
    r.unwrap_or_else(|e| e)
}

fn noscript() -> Reply {
    Reply::error("NOSCRIPT No matching script. Please use EVAL.")
}

fn eval(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    eval_generic(ctx, args, false, false)
}

fn evalsha(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    eval_generic(ctx, args, true, false)
}

fn eval_ro(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    eval_generic(ctx, args, false, true)
}

fn evalsha_ro(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    eval_generic(ctx, args, true, true)
}

const SCRIPT_HELP: &[&str] = &[
    "SCRIPT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "EXISTS <sha1> [<sha1> ...]",
    "    For each SHA1 digest, 1 if the script cache holds it, else 0.",
    "FLUSH [ASYNC|SYNC]",
    "    Empties the script cache (always synchronously).",
    "KILL",
    "    Stops the running script, if it has not written.",
    "LOAD <script>",
    "    Compiles the script into the cache; replies its SHA1 digest.",
    "HELP",
    "    Prints this help.",
];

/// SCRIPT LOAD / EXISTS / FLUSH / KILL / HELP (KILL is answered by [`intercept`] outside MULTI).
fn script(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    let sc = tri!(scripts_of(ctx));
    let sub = args[1].to_ascii_lowercase();
    let n = args.len();
    match sub.as_slice() {
        b"help" if n == 2 => help_reply(SCRIPT_HELP),
        b"load" if n == 3 => match sc.with_eval(|ev| cache_script(ev, &args[2]).inspect(|_| sc.note_cached(ev))) {
            Ok(sha) => Reply::Bulk(Bytes::from(sha)),
            Err(e) => e,
        },
        b"exists" if n >= 3 => {
            let cache = sc.eval.lock();
            Reply::Array(
                args[2..]
                    .iter()
                    .map(|sha| {
                        let sha = String::from_utf8_lossy(sha).to_ascii_lowercase();
                        Reply::Int(cache.as_ref().is_some_and(|ev| ev.scripts.contains_key(&sha)) as i64)
                    })
                    .collect(),
            )
        }
        b"flush" if n <= 3 => {
            if n == 3 && !args[2].eq_ignore_ascii_case(b"async") && !args[2].eq_ignore_ascii_case(b"sync") {
                return Reply::err("SCRIPT FLUSH only support SYNC|ASYNC option");
            }
            *sc.eval.lock() = None;
            sc.cached.store(0, Ordering::Relaxed);
            Reply::Ok
        }
        b"kill" if n == 2 => sc.kill(true),
        b"debug" if n == 3 => Reply::err("SCRIPT DEBUG is not supported by this server"),
        b"help" | b"load" | b"exists" | b"flush" | b"kill" | b"debug" => sub_arity("script", &sub),
        _ => unknown_subcommand("SCRIPT", &args[1]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shebang_lines_parse_like_redis() {
        assert_eq!(shebang(b"return 1").unwrap(), (ScriptFlags::default(), 0));
        assert_eq!(shebang(b"#!lua\nreturn 1").unwrap(), (ScriptFlags { shebang: true, ..ScriptFlags::default() }, 5));
        assert_eq!(
            shebang(b"#!lua flags=no-writes,allow-stale\nreturn 1").unwrap(),
            (ScriptFlags { shebang: true, no_writes: true, ..ScriptFlags::default() }, 33)
        );
        assert_eq!(shebang(b"#!lua flags=\nx").unwrap().0, ScriptFlags { shebang: true, ..ScriptFlags::default() });
        assert_eq!(
            shebang(b"#!lua flags=no-cluster,allow-cross-slot-keys\nx").unwrap().0,
            ScriptFlags { shebang: true, no_cluster: true, cross_slot: true, ..ScriptFlags::default() }
        );
        let err = |b: &[u8]| match shebang(b) {
            Err(Reply::Error(e)) => e,
            other => panic!("{other:?}"),
        };
        assert!(err(b"#!python\n").contains("Unexpected engine in script shebang"));
        assert!(err(b"#!lua foo=bar\n").contains("Unknown lua shebang option"));
        assert!(err(b"#!lua flags=no-writes,nope\n").contains("Unexpected flag in script shebang"));
    }
}
