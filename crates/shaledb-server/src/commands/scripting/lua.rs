//! The Lua bridge: one sandboxed Lua 5.1 VM (EVAL scripts or FUNCTION libraries), the conversions between
//! replies and Lua values as Redis documents them, and `redis.call`/`redis.pcall` in the commit step's
//! [`WriteCtx`].
//!
//! Conversions (RESP2, the default of a script; `redis.setresp(3)` switches the reply-to-Lua direction):
//! - reply to Lua: integer -> number, bulk -> string, nil bulk and nil array -> false, array -> table,
//!   status -> `{ok=...}`, error -> `{err=...}`; with RESP3 also map -> `{map=...}`, set -> `{set=...}`,
//!   double -> `{double=...}`, boolean -> boolean, null -> nil;
//! - Lua to reply: number -> integer (converted as C casts a double on x86-64: truncated, `i64::MIN` when
//!   out of range or NaN), string -> bulk, true -> 1, false and nil -> nil bulk,
//!   `{err=...}` -> error, `{ok=...}` -> status, `{double=...}`, `{map=...}`, `{set=...}`, any other table
//!   -> array of its elements 1..n, stopping at the first nil.
//!
//! The environment (prelude.lua) removes everything that reaches files, the process or other chunks, runs
//! scripts with read-only views of the globals and libraries (`Attempt to modify a readonly table`, `Script
//! attempted to access nonexistent global variable`), and turns every failure into Redis's error text. A
//! count hook (every [`HOOK_EVERY`] instructions) stops a script when SCRIPT KILL / FUNCTION KILL asked, or a
//! library's load past its deadline; the VM's memory is capped at [`MEMORY_LIMIT`] bytes, so a script that
//! allocates without bound gets an error, never the server's memory.
//!
//! Libraries Redis loads and this VM has: base, table, string, math, `bit` (LuaBitOp's functions, in Rust)
//! `cjson` (`cjson.rs`), `cmsgpack` (`cmsgpack.rs`) and `struct` (`structlib.rs`), written here with the
//! behaviour, byte formats and error texts of the C libraries Redis loads. Their functions, and the
//! `redis.*` helpers, are C functions to scripts (trampoline.rs), as in Redis: an error they raise names the
//! script's line also when the script calls them in tail position (`return cjson.decode(x)`).

use super::Control;
use crate::commands::{flags, lookup, Handler};
use crate::resp::{Args, Reply};
use crate::store::WriteCtx;
use bytes::Bytes;
use mlua::{Function, HookTriggers, Lua, LuaOptions, StdLib, Table, Value, Variadic, VmState};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Bytes of memory one VM may hold (its scripts' tables and strings, the compiled scripts): past it an
/// allocation fails and the script gets an error.
pub const MEMORY_LIMIT: usize = 256 << 20;
/// VM instructions between two runs of the hook (kill requests, load deadline).
pub const HOOK_EVERY: u32 = 10_000;
/// Deepest nesting of tables converted to a reply (a table that contains itself stops here).
const MAX_DEPTH: usize = 200;

/// Chunk name of EVAL scripts and of FUNCTION libraries (error messages say `user_script:1:` /
/// `user_function:1:`).
pub const EVAL_CHUNK: &str = "@user_script";
pub const FUNCTION_CHUNK: &str = "@user_function";

/// One function a library registered.
pub struct Registered {
    pub name: String,
    pub description: Option<String>,
    pub flags: Vec<String>,
    pub callback: Function,
}

/// How a script runs.
pub struct RunOpts<'a> {
    /// What error messages name: the script's SHA1, or the function's name.
    pub name: &'a str,
    /// Writes are refused (EVAL_RO, FCALL_RO, the `no-writes` flag).
    pub read_only: bool,
    /// A function (keys and args as arguments), or an EVAL script (KEYS and ARGV as globals).
    pub is_function: bool,
    /// The script declares `allow-cross-slot-keys`: on a cluster member its commands may touch keys of any
    /// slot its group serves, not only the first slot it touched (Redis's rule).
    pub cross_slot: bool,
}

/// A cluster member's script run (issue 44): the slot its keys are held to, as Redis holds them: the slot of
/// the declared keys, else of the first key a command touches.
struct SlotRule {
    slot: std::cell::Cell<Option<u16>>,
    cross_slot: bool,
}

/// One Lua VM with the scripting environment.
pub struct Vm {
    lua: Lua,
    /// The table only Rust and the prelude hold (`call`, `run`, `load`, `loading`, `resp`, `env` ...).
    h: Table,
    env: Table,
    control: Arc<Control>,
}

/// Sets the VM's hook to run every `every` instructions. Once a kill is requested the hook runs at every
/// instruction, so a script that catches the error with `pcall` meets it again at its next instruction
/// outside the `pcall`.
fn install_hook(lua: &Lua, control: Arc<Control>, every: u32) -> mlua::Result<()> {
    lua.set_hook(HookTriggers::new().every_nth_instruction(every), move |lua, _| {
        if control.kill.load(Ordering::Acquire) {
            if every != 1 {
                install_hook(lua, control.clone(), 1)?;
            }
            return Err(mlua::Error::runtime("Script killed by user with SCRIPT KILL..."));
        }
        let deadline = control.load_deadline_ms.load(Ordering::Acquire);
        if deadline != 0 && crate::store::now_ms() > deadline {
            return Err(mlua::Error::runtime("FUNCTION LOAD timeout"));
        }
        Ok(VmState::Continue)
    })
}

impl Vm {
    /// A new VM with Redis's libraries and the sandbox; `control` is polled by its hook.
    pub fn new(control: Arc<Control>) -> mlua::Result<Vm> {
        let lua = Lua::new_with(StdLib::TABLE | StdLib::STRING | StdLib::MATH, LuaOptions::new())?;
        let globals = lua.globals();
        globals.raw_set("bit", bit_library(&lua)?)?;
        globals.raw_set("cjson", super::cjson::library(&lua)?)?;
        globals.raw_set("cmsgpack", super::cmsgpack::library(&lua)?)?;
        globals.raw_set("struct", super::structlib::library(&lua)?)?;
        let h = lua.create_table()?;
        h.raw_set(
            "sha1hex",
            lua.create_function(|_, s: mlua::LuaString| {
                Ok(sha1_smol::Sha1::from(&*s.as_bytes()).digest().to_string())
            })?,
        )?;
        h.raw_set(
            "log",
            lua.create_function(|_, (level, msg): (i64, mlua::LuaString)| {
                let tag = ["debug", "verbose", "notice", "warning"].get(level as usize).copied().unwrap_or("notice");
                eprintln!("# script ({tag}): {}", String::from_utf8_lossy(&msg.as_bytes()));
                Ok(())
            })?,
        )?;
        // Lua functions of the prelude seen by scripts as C functions (the `redis.*` helpers).
        h.raw_set("cwrap", lua.create_function(|lua, f: Function| super::trampoline::plain_wrapper(lua, f))?)?;
        let c = control.clone();
        h.raw_set("handler", lua.create_function(move |lua, e: Value| error_handler(lua, e, &c))?)?;
        // redis.call / redis.pcall: C functions (trampoline.rs) hand over their arguments in a table.
        let by_table = |raise: bool| {
            lua.create_function(move |lua, (t, n): (Table, i64)| {
                if n > 64 {
                    return redis_call_table(lua, &t, n, raise);
                }
                let words = (1..=n).map(|i| t.raw_get::<Value>(i)).collect::<mlua::Result<Vec<Value>>>()?;
                redis_call(lua, Variadic::from_iter(words), raise)
            })
        };
        lua.set_named_registry_value(super::trampoline::CALL_KEY.to_str().unwrap_or_default(), by_table(true)?)?;
        lua.set_named_registry_value(super::trampoline::PCALL_KEY.to_str().unwrap_or_default(), by_table(false)?)?;
        let (call, pcall) = super::trampoline::functions(&lua)?;
        h.raw_set("rcall", call)?;
        h.raw_set("rpcall", pcall)?;
        // redis.acl_check_cmd: may the script's caller run these words? (no ACL log entry, as in Redis)
        let c = control.clone();
        h.raw_set(
            "aclcheck",
            lua.create_function(move |lua, words: Variadic<Value>| -> mlua::Result<(Option<bool>, Option<String>)> {
                let words = match to_words(&words) {
                    Ok(w) if w.is_empty() => {
                        return Ok((None, Some("Please specify at least one argument for this redis lib call".into())))
                    }
                    Ok(w) => w,
                    Err(msg) => return Ok((None, Some(msg.into()))),
                };
                let Some(spec) = lookup(&words[0]) else {
                    return Ok((None, Some("Invalid command passed to redis.acl_check_cmd()".into())));
                };
                let client = lua.app_data_ref::<ScriptClient>().map_or(0, |c| c.0);
                let allowed = match c.observers.get().and_then(|o| o.acl.as_ref()) {
                    Some(acl) => acl.allows_script(client, spec, &words),
                    None => true,
                };
                Ok((Some(allowed), None))
            })?,
        )?;
        h.raw_set(
            "running",
            lua.create_function(|lua, ()| Ok(!matches!(lua.named_registry_value(CALL)?, Value::Nil)))?,
        )?;
        lua.load(include_str!("prelude.lua")).set_name("=shaledb").call::<()>((h.clone(), globals))?;
        let env: Table = h.raw_get("env")?;
        install_hook(&lua, control.clone(), HOOK_EVERY)?;
        lua.set_memory_limit(MEMORY_LIMIT)?;
        Ok(Vm { lua, h, env, control })
    }

    /// Compiles `code` (text only, never bytecode) as chunk `chunk` in the sandbox, or the compiler's
    /// message (`user_script:1: ...`).
    pub fn compile(&self, code: &[u8], chunk: &str) -> Result<Function, String> {
        self.lua
            .load(code)
            .set_name(chunk)
            .set_mode(mlua::chunk::ChunkMode::Text)
            .set_environment(self.env.clone())
            .into_function()
            .map_err(|e| match e {
                mlua::Error::SyntaxError { message, .. } => message,
                other => other.to_string(),
            })
    }

    /// Runs a library's compiled code: the functions it registered, or the error text (Redis's err
    /// string: `ERR user_function:1: ...`).
    pub fn load_library(&self, code: &Function) -> Result<Vec<Registered>, String> {
        let loading = self.lua.create_table().map_err(|e| e.to_string())?;
        let fns = self.lua.create_table().map_err(|e| e.to_string())?;
        let order = self.lua.create_table().map_err(|e| e.to_string())?;
        loading.raw_set("fns", fns.clone()).map_err(|e| e.to_string())?;
        loading.raw_set("order", order.clone()).map_err(|e| e.to_string())?;
        self.h.raw_set("loading", loading).map_err(|e| e.to_string())?;
        let load: Function = self.h.raw_get("load").map_err(|e| e.to_string())?;
        let r = load.call::<(bool, Value)>(code.clone());
        let _ = self.h.raw_set("loading", Value::Nil);
        let (ok, v) = r.map_err(|e| e.to_string())?;
        if !ok {
            return Err(error_text(&v));
        }
        let mut out = Vec::new();
        for name in order.sequence_values::<String>() {
            let name = name.map_err(|e| e.to_string())?;
            let f: Table = fns.raw_get(name.as_str()).map_err(|e| e.to_string())?;
            let flags: Table = f.raw_get("flags").map_err(|e| e.to_string())?;
            out.push(Registered {
                description: f.raw_get("desc").map_err(|e| e.to_string())?,
                flags: flags.sequence_values::<String>().collect::<mlua::Result<_>>().map_err(|e| e.to_string())?,
                callback: f.raw_get("cb").map_err(|e| e.to_string())?,
                name,
            });
        }
        Ok(out)
    }

    /// Runs `f` with `keys` and `args` in the commit step's context: its reply (the script's value, or its
    /// error in Redis's words). `wrote` is set once a command of the script wrote.
    pub fn run(
        &self,
        f: &Function,
        keys: &[Bytes],
        args: &[Bytes],
        ctx: &mut WriteCtx<'_>,
        opts: &RunOpts<'_>,
        wrote: &AtomicBool,
    ) -> Reply {
        let db_before = ctx.db_index;
        let r = self.run_inner(f, keys, args, ctx, opts, wrote);
        ctx.db_index = db_before;
        if self.control.kill.load(Ordering::Acquire) {
            // Back to the cheap hook for the next script.
            let _ = install_hook(&self.lua, self.control.clone(), HOOK_EVERY);
        }
        let _ = self.lua.set_named_registry_value(CALL, Value::Nil);
        if self.lua.used_memory() > (64 << 20) {
            let _ = self.lua.gc_collect();
        }
        let reply = match r {
            Ok((true, v)) => lua_to_reply(&v, 0),
            Ok((false, v)) => match &v {
                Value::Table(_) => {
                    let t = error_text(&v);
                    let Value::Table(tab) = &v else { unreachable!("matched above") };
                    let source: Option<String> = tab.raw_get("source").ok();
                    let line: Option<i64> = tab.raw_get("line").ok();
                    match (source, line) {
                        (Some(s), Some(l)) => Reply::Error(format!("{t} script: {}, on {s}:{l}.", opts.name)),
                        _ => Reply::Error(t),
                    }
                }
                other => {
                    let _ = self.lua.gc_collect();
                    let msg = match other {
                        Value::String(s) => String::from_utf8_lossy(&s.as_bytes()).into_owned(),
                        _ => "execution failure".into(),
                    };
                    Reply::Error(clean(&format!("ERR Error running script {}, {}", opts.name, cut(&msg, 100))))
                }
            },
            Err(_) if self.control.kill.load(Ordering::Acquire) => {
                Reply::err("Script killed by user with SCRIPT KILL...")
            }
            Err(e) => {
                let _ = self.lua.gc_collect();
                Reply::Error(clean(&format!("ERR Error running script {}, {}", opts.name, cut(&root_message(&e), 100))))
            }
        };
        reply
    }

    fn run_inner(
        &self,
        f: &Function,
        keys: &[Bytes],
        args: &[Bytes],
        ctx: &mut WriteCtx<'_>,
        opts: &RunOpts<'_>,
        wrote: &AtomicBool,
    ) -> mlua::Result<(bool, Value)> {
        let keys_t = self
            .lua
            .create_sequence_from(keys.iter().map(|k| self.lua.create_string(k)).collect::<mlua::Result<Vec<_>>>()?)?;
        let args_t = self
            .lua
            .create_sequence_from(args.iter().map(|a| self.lua.create_string(a)).collect::<mlua::Result<Vec<_>>>()?)?;
        self.h.raw_set("resp", 2)?;
        self.lua.set_app_data(ScriptClient(ctx.client));
        let run: Function = self.h.raw_get("run")?;
        let h = self.h.clone();
        let read_only = opts.read_only;
        let control = self.control.clone();
        let rule = SlotRule {
            slot: std::cell::Cell::new(keys.first().map(|k| crate::cluster::key_slot(k))),
            cross_slot: opts.cross_slot,
        };
        self.lua.scope(|scope| {
            let call = scope.create_function_mut(|lua, ()| -> mlua::Result<(bool, Value)> {
                let resp: i64 = h.raw_get("resp").unwrap_or(2);
                let Some(CallWords(words)) = lua.remove_app_data::<CallWords>() else {
                    return Ok((false, err_table(lua, "ERR internal: a script's call lost its words")?));
                };
                match observed_dispatch(ctx, &words, read_only, wrote, &control, &rule) {
                    Err(msg) => Ok((false, err_table(lua, &format!("ERR {msg}"))?)),
                    Ok(reply) => {
                        let ok = !reply.is_error();
                        Ok((ok, reply_to_lua(lua, reply, resp == 3)?))
                    }
                }
            })?;
            self.lua.set_named_registry_value(CALL, call)?;
            let r = run.call::<(bool, Value)>((f.clone(), keys_t, args_t, opts.is_function));
            self.lua.set_named_registry_value(CALL, Value::Nil)?;
            r
        })
    }
}

/// The words of the `redis.call` being executed.
struct CallWords(Args);

/// The client whose script is running (for `redis.acl_check_cmd`).
struct ScriptClient(u64);

/// Named registry slot of the running script's command executor (set only while a script runs).
const CALL: &str = "shaledb.call";

/// `redis.call` (`raise`) and `redis.pcall`: run the command through the executor of the running script.
/// The answer is `(true, reply)`, or `(false, error table)` for a failing `redis.call`: its C function
/// (trampoline.rs) raises the table, as Redis raises it (so `pcall` catches the table, and the script's
/// `pcall` turns it into its `err` string).
/// [`redis_call`] with the words in a table of `n` entries (a call with many arguments), converted one by
/// one.
fn redis_call_table(lua: &Lua, t: &Table, n: i64, raise: bool) -> mlua::Result<(bool, Value)> {
    let mut words = Vec::with_capacity(n.clamp(0, 1 << 16) as usize);
    for i in 1..=n {
        match to_words(&[t.raw_get::<Value>(i)?]) {
            Ok(w) => words.extend(w),
            Err(msg) => return Ok(finish_call((false, err_table(lua, &format!("ERR {msg}"))?), raise)),
        }
    }
    let exec: Value = lua.named_registry_value(CALL)?;
    let r = match exec {
        Value::Function(f) => {
            lua.set_app_data(CallWords(words));
            f.call::<(bool, Value)>(())?
        }
        _ => (false, err_table(lua, "ERR redis.call/pcall can only be called inside a script invocation")?),
    };
    Ok(finish_call(r, raise))
}

/// What the C function gets: a failure raises only for `redis.call`.
fn finish_call((ok, v): (bool, Value), raise: bool) -> (bool, Value) {
    (ok || !raise, v)
}

fn redis_call(lua: &Lua, words: Variadic<Value>, raise: bool) -> mlua::Result<(bool, Value)> {
    let exec: Value = lua.named_registry_value(CALL)?;
    let r = match exec {
        Value::Function(f) => match to_words(&words) {
            Ok(words) => {
                // Handed over beside the stack: a call may have more words than a Lua call can pass.
                lua.set_app_data(CallWords(words));
                f.call::<(bool, Value)>(())?
            }
            Err(msg) => (false, err_table(lua, &format!("ERR {msg}"))?),
        },
        _ => (false, err_table(lua, "ERR redis.call/pcall can only be called inside a script invocation")?),
    };
    Ok(finish_call(r, raise))
}

/// The message of an error raised in Rust or by the VM, without mlua's traceback.
fn root_message(e: &mlua::Error) -> String {
    match e {
        mlua::Error::CallbackError { cause, .. } => root_message(cause),
        mlua::Error::RuntimeError(m) => m.clone(),
        mlua::Error::MemoryError(m) => m.clone(),
        other => other.to_string(),
    }
}

/// The error handler of every script run: turns what was raised into Redis's error table, `{err=...}`
/// with the `source` and `line` of the user's code that failed.
fn error_handler(lua: &Lua, e: Value, control: &Control) -> mlua::Result<Value> {
    let t = match e {
        Value::Table(t) => t,
        other => {
            let msg = match &other {
                Value::String(s) => s.to_string_lossy(),
                Value::Error(err) => root_message(err),
                v => v.to_string().unwrap_or_else(|_| "execution failure".into()),
            };
            let text = if control.kill.load(Ordering::Acquire) {
                "ERR Script killed by user with SCRIPT KILL...".to_string()
            } else if msg.contains("FUNCTION LOAD timeout") {
                "ERR FUNCTION LOAD timeout".to_string()
            } else {
                format!("ERR {msg}")
            };
            let t = lua.create_table()?;
            t.raw_set("err", text)?;
            t
        }
    };
    if let (Some(source), Some(line)) = user_frame(lua) {
        t.raw_set("source", source)?;
        t.raw_set("line", line)?;
    }
    Ok(Value::Table(t))
}

/// The innermost frame of the user's code on the stack (`@user_script` or `@user_function`) and its line:
/// where an error is reported.
fn user_frame(lua: &Lua) -> (Option<String>, Option<i64>) {
    for level in 0..1000 {
        let found = lua.inspect_stack(level, |d| {
            let src = d.source();
            let user = src.what != "C" && src.source.as_deref().is_some_and(|s| s.starts_with("@user_"));
            user.then(|| (src.source.as_deref().map(str::to_string), d.current_line().map(|l| l as i64)))
        });
        match found {
            None => break,
            Some(Some(frame)) => return frame,
            Some(None) => {}
        }
    }
    (None, None)
}

/// Cuts `s` at `n` bytes (on a character boundary).
fn cut(s: &str, n: usize) -> &str {
    if s.len() <= n {
        return s;
    }
    let mut end = n;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// An error text fit for one RESP line.
fn clean(s: &str) -> String {
    s.replace(['\r', '\n'], " ")
}

/// The `err` field of an error table (or the value itself), as one line.
fn error_text(v: &Value) -> String {
    match v {
        Value::Table(t) => match t.raw_get::<Value>("err") {
            Ok(Value::String(s)) => clean(&String::from_utf8_lossy(&s.as_bytes())),
            _ => "ERR unknown error".into(),
        },
        Value::String(s) => clean(&String::from_utf8_lossy(&s.as_bytes())),
        other => clean(&format!("ERR {other:?}")),
    }
}

fn err_table(lua: &Lua, text: &str) -> mlua::Result<Value> {
    let t = lua.create_table()?;
    t.raw_set("err", text)?;
    Ok(Value::Table(t))
}

/// The words of a `redis.call`: strings as they are, numbers as Redis prints them (`%.17g`).
fn to_words(vals: &[Value]) -> Result<Args, &'static str> {
    if vals.is_empty() {
        return Err("Please specify at least one argument for this redis lib call");
    }
    vals.iter()
        .map(|v| match v {
            Value::String(s) => Ok(Bytes::copy_from_slice(&s.as_bytes())),
            Value::Integer(i) => Ok(Bytes::from(i.to_string())),
            Value::Number(n) => Ok(Bytes::from(crate::resp::format_double(*n))),
            _ => Err("Lua redis lib command arguments must be strings or integers"),
        })
        .collect()
}

/// Redis commands flagged `noscript` that this server does not implement (replication and cluster
/// commands): a script calling them gets Redis's refusal rather than "unknown command".
const NOSCRIPT_ELSEWHERE: [&str; 6] = ["cluster", "sync", "psync", "replicaof", "slaveof", "failover"];

/// [`dispatch`], shown to MONITOR (`[db lua]`, after the script's own command) and
/// counted in the command statistics like a command a client sent. Calls refused before running are
/// neither shown nor counted.
fn observed_dispatch(
    ctx: &mut WriteCtx<'_>,
    words: &Args,
    read_only: bool,
    wrote: &AtomicBool,
    control: &Control,
    rule: &SlotRule,
) -> Result<Reply, String> {
    let Some(obs) = control.observers.get() else { return dispatch(ctx, words, read_only, wrote, rule) };
    // ACL: after the checks of the command itself (unknown, arity, not allowed in scripts), as Redis orders.
    if let (Some(acl), Some(spec)) = (&obs.acl, lookup(&words[0])) {
        if spec.arity_ok(words.len()) && spec.flags & (flags::NOSCRIPT | flags::BLOCKING) == 0 {
            acl.check_script(ctx.client, spec, words)?;
        }
    }
    let db = ctx.db_index;
    let started = std::time::Instant::now();
    let r = dispatch(ctx, words, read_only, wrote, rule);
    if let (Some(spec), Ok(reply)) = (lookup(&words[0]), &r) {
        if spec.flags & flags::ADMIN == 0 {
            obs.monitors.feed(db, crate::commands::server_cmds::monitor::Origin::Script, words);
        }
        let sub = if crate::commands::server_cmds::stats::is_container(spec.name) {
            words.get(1).map(|b| &b[..])
        } else {
            None
        };
        obs.commands.record(spec, sub, started.elapsed(), reply);
    }
    r
}

/// Executes one command of a script in the commit step: its reply, or the error text (without its code)
/// for the checks a script's call fails before running.
fn dispatch(
    ctx: &mut WriteCtx<'_>,
    words: &Args,
    read_only: bool,
    wrote: &AtomicBool,
    rule: &SlotRule,
) -> Result<Reply, String> {
    let Some(spec) = lookup(&words[0]) else {
        // Redis commands this server does not have, which Redis refuses in scripts anyway.
        if NOSCRIPT_ELSEWHERE.iter().any(|n| words[0].eq_ignore_ascii_case(n.as_bytes())) {
            return Err("This Redis command is not allowed from script".into());
        }
        return Err("Unknown Redis command called from script".into());
    };
    if !spec.arity_ok(words.len()) {
        return Err("Wrong number of args calling Redis command from script".into());
    }
    // A container's subcommand is looked up and its arity checked first, as Redis's command lookup does.
    if words.len() >= 2 && crate::commands::server_cmds::stats::is_container(spec.name) {
        match crate::commands::server_cmds::facts::subcommand_fits(spec.name, words) {
            None => return Err("Unknown Redis command called from script".into()),
            Some(false) => return Err("Wrong number of args calling Redis command from script".into()),
            Some(true) => {}
        }
        if crate::commands::server_cmds::facts::subcommand_has_flag(spec.name, words, "noscript") {
            return Err("This Redis command is not allowed from script".into());
        }
    }
    if spec.name == "xread" || spec.name == "xreadgroup" {
        if words.iter().any(|w| w.eq_ignore_ascii_case(b"block")) {
            return Ok(Reply::err(format!("{} command is not allowed with BLOCK option from scripts", spec.name)));
        }
    } else if spec.flags & (flags::NOSCRIPT | flags::BLOCKING) != 0 {
        return Err("This Redis command is not allowed from script".into());
    }
    if read_only && spec.flags & flags::WRITE != 0 {
        return Err("Write commands are not allowed from read-only scripts.".into());
    }
    // A cluster member (issue 44): a script touches only keys of slots its group serves, declared or not (a
    // key of another group's slot, or of one frozen for a move, would be written where no client finds it).
    if let Some(serves) = &ctx.serves_slot {
        if let Some(r) = crate::cluster::one_database_refusal(spec, words) {
            return Err(match r {
                Reply::Error(e) => e.trim_start_matches("ERR ").to_string(),
                _ => "This Redis command is not allowed from script".into(),
            });
        }
        match crate::cluster::slot_of(spec, words) {
            Err(_) => {
                return Err(format!(
                    "Command '{}' in script attempted to access keys that do not hash to the same slot",
                    spec.name
                ))
            }
            Ok(Some(slot)) if !serves(slot) => {
                return Err("Script attempted to access a non local key in a cluster node".into())
            }
            Ok(Some(slot)) if !rule.cross_slot => match rule.slot.get() {
                None => rule.slot.set(Some(slot)),
                Some(s) if s != slot => {
                    return Err("Script attempted to access keys that do not hash to the same slot".into())
                }
                Some(_) => {}
            },
            Ok(_) => {}
        }
    }
    Ok(match spec.handler {
        Handler::Write(f) => {
            let before = ctx.write_counts();
            let r = f(ctx, words);
            crate::commands::multi::after_write(ctx, spec, words, before);
            if ctx.write_counts().0 != before.0 {
                wrote.store(true, Ordering::Release);
            }
            r
        }
        Handler::Read(f) => {
            // CLIENT TRACKING: a script that reads tracks the keys it declared (`tracking.rs`).
            ctx.script_read = true;
            // Missing keys publish keymiss in order with the script's writes, as in Redis.
            ctx.run_read(|view| f(view, words))
        }
        Handler::Conn(_) => match spec.name {
            "ping" if words.len() == 1 => Reply::Simple("PONG".into()),
            "ping" if words.len() == 2 => Reply::Bulk(words[1].clone()),
            "echo" => Reply::Bulk(words[1].clone()),
            "cluster" => crate::commands::server_cmds::cluster::reply(words),
            "asking" | "readonly" | "readwrite" => crate::commands::server_cmds::cluster::disabled_reply(),
            "select" => match crate::resp::parse_i64(&words[1]) {
                Some(i) if (0..crate::keys::DATABASES as i64).contains(&i) => {
                    ctx.db_index = i as u8;
                    Reply::Ok
                }
                Some(_) => Reply::err("DB index is out of range"),
                None => Reply::err("value is not an integer or out of range"),
            },
            "time" => {
                let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
                Reply::Array(vec![
                    Reply::Bulk(Bytes::from(now.as_secs().to_string())),
                    Reply::Bulk(Bytes::from(now.subsec_micros().to_string())),
                ])
            }
            _ => return Err("This Redis command is not allowed from script".into()),
        },
    })
}

/// A command's reply as the script sees it.
fn reply_to_lua(lua: &Lua, r: Reply, resp3: bool) -> mlua::Result<Value> {
    Ok(match r {
        Reply::Ok => status(lua, "OK")?,
        Reply::Simple(s) => status(lua, &s)?,
        Reply::Error(e) => err_table(lua, e.trim_end_matches(['\r', '\n']))?,
        Reply::Int(i) => Value::Integer(i),
        Reply::Bulk(b) => Value::String(lua.create_string(&b)?),
        Reply::Verbatim(s) => Value::String(lua.create_string(&s)?),
        Reply::Nil | Reply::NilArray => {
            if resp3 {
                Value::Nil
            } else {
                Value::Boolean(false)
            }
        }
        Reply::Array(items) | Reply::Push(items) => seq(lua, items, resp3)?,
        Reply::Bulks(b) => {
            let t = lua.create_table_with_capacity(b.len(), 0)?;
            for (i, v) in b.iter().enumerate() {
                t.raw_set(i + 1, lua.create_string(v)?)?;
            }
            Value::Table(t)
        }
        Reply::Set(items) => {
            if resp3 {
                let t = lua.create_table()?;
                for i in items {
                    t.raw_set(reply_to_lua(lua, i, resp3)?, true)?;
                }
                wrap(lua, "set", Value::Table(t))?
            } else {
                seq(lua, items, resp3)?
            }
        }
        Reply::Map(pairs) | Reply::Pairs(pairs) => {
            if resp3 {
                let t = lua.create_table()?;
                for (k, v) in pairs {
                    t.raw_set(reply_to_lua(lua, k, resp3)?, reply_to_lua(lua, v, resp3)?)?;
                }
                wrap(lua, "map", Value::Table(t))?
            } else {
                let t = lua.create_table()?;
                for (k, v) in pairs {
                    t.raw_push(reply_to_lua(lua, k, resp3)?)?;
                    t.raw_push(reply_to_lua(lua, v, resp3)?)?;
                }
                Value::Table(t)
            }
        }
        Reply::Double(d) => {
            if resp3 {
                wrap(lua, "double", Value::Number(d))?
            } else {
                Value::String(lua.create_string(crate::resp::format_double(d))?)
            }
        }
        Reply::Bool(b) => {
            if resp3 {
                Value::Boolean(b)
            } else {
                Value::Integer(b as i64)
            }
        }
    })
}

fn status(lua: &Lua, s: &str) -> mlua::Result<Value> {
    wrap(lua, "ok", Value::String(lua.create_string(s)?))
}

fn wrap(lua: &Lua, field: &str, v: Value) -> mlua::Result<Value> {
    let t = lua.create_table()?;
    t.raw_set(field, v)?;
    Ok(Value::Table(t))
}

fn seq(lua: &Lua, items: Vec<Reply>, resp3: bool) -> mlua::Result<Value> {
    let t = lua.create_table_with_capacity(items.len(), 0)?;
    for (i, item) in items.into_iter().enumerate() {
        // A nil inside an array (RESP3) leaves a hole, as in Redis.
        t.raw_set(i + 1, reply_to_lua(lua, item, resp3)?)?;
    }
    Ok(Value::Table(t))
}

/// A script's value as the reply its client gets.
pub fn lua_to_reply(v: &Value, depth: usize) -> Reply {
    if depth > MAX_DEPTH {
        return Reply::err("reached lua stack limit");
    }
    match v {
        Value::String(s) => Reply::Bulk(Bytes::copy_from_slice(&s.as_bytes())),
        Value::Boolean(true) => Reply::Int(1),
        Value::Integer(i) => Reply::Int(*i),
        Value::Number(n) => Reply::Int(super::libargs::c_i64(*n)),
        Value::Table(t) => {
            if let Ok(Value::String(e)) = t.raw_get::<Value>("err") {
                return Reply::Error(clean(&String::from_utf8_lossy(&e.as_bytes())));
            }
            if let Ok(Value::String(s)) = t.raw_get::<Value>("ok") {
                return Reply::Simple(String::from_utf8_lossy(&s.as_bytes()).replace(['\r', '\n'], " "));
            }
            if let Ok(Value::Number(d)) = t.raw_get::<Value>("double") {
                return Reply::Double(d);
            }
            if let Ok(Value::Integer(d)) = t.raw_get::<Value>("double") {
                return Reply::Double(d as f64);
            }
            if let Ok(Value::Table(m)) = t.raw_get::<Value>("map") {
                let mut pairs = Vec::new();
                for (k, v) in m.pairs::<Value, Value>().flatten() {
                    pairs.push((lua_to_reply(&k, depth + 1), lua_to_reply(&v, depth + 1)));
                }
                return Reply::Map(pairs);
            }
            if let Ok(Value::Table(s)) = t.raw_get::<Value>("set") {
                let mut items = Vec::new();
                for (k, _) in s.pairs::<Value, Value>().flatten() {
                    items.push(lua_to_reply(&k, depth + 1));
                }
                return Reply::Set(items);
            }
            let mut items = Vec::new();
            let mut i = 1usize;
            loop {
                match t.raw_get::<Value>(i) {
                    Ok(Value::Nil) | Err(_) => break,
                    Ok(v) => items.push(lua_to_reply(&v, depth + 1)),
                }
                i += 1;
            }
            Reply::Array(items)
        }
        _ => Reply::Nil,
    }
}

/// LuaBitOp's `bit` library (the one Redis loads): 32-bit operations on numbers, its arguments read as
/// `luaL_checknumber` reads them (a number or a string holding one, else `number expected, got TYPE`).
fn bit_library(lua: &Lua) -> mlua::Result<Table> {
    use super::libargs::{function, library, to_number, type_error, LibResult};
    /// Argument `n`'s low 32 bits, as LuaBitOp takes them: the number plus 2^52+2^51 (rounded to an
    /// integer, to nearest even), the low word of its representation.
    fn barg(args: &[Value], n: usize) -> LibResult<u32> {
        match to_number(args.get(n - 1)) {
            Some(x) => Ok((x + 6_755_399_441_055_744.0).to_bits() as u32),
            None => Err(type_error(args, n, "number")),
        }
    }
    fn ret(b: u32) -> LibResult<Vec<Value>> {
        Ok(vec![Value::Integer(i64::from(b as i32))])
    }
    type Op = fn(&[Value]) -> LibResult<Vec<Value>>;
    fn fold(args: &[Value], op: fn(u32, u32) -> u32) -> LibResult<Vec<Value>> {
        let mut b = barg(args, 1)?;
        // LuaBitOp reads the other arguments from the last one down.
        for i in (2..=args.len()).rev() {
            b = op(b, barg(args, i)?);
        }
        ret(b)
    }
    fn shift(args: &[Value], op: fn(u32, u32) -> u32) -> LibResult<Vec<Value>> {
        let b = barg(args, 1)?;
        let n = barg(args, 2)? & 31;
        ret(op(b, n))
    }
    let ops: Vec<(&'static str, Op)> = vec![
        ("tobit", |a| ret(barg(a, 1)?)),
        ("bnot", |a| ret(!barg(a, 1)?)),
        ("band", |a| fold(a, |x, y| x & y)),
        ("bor", |a| fold(a, |x, y| x | y)),
        ("bxor", |a| fold(a, |x, y| x ^ y)),
        ("lshift", |a| shift(a, |b, n| b << n)),
        ("rshift", |a| shift(a, |b, n| b >> n)),
        ("arshift", |a| shift(a, |b, n| ((b as i32) >> n) as u32)),
        ("rol", |a| shift(a, u32::rotate_left)),
        ("ror", |a| shift(a, u32::rotate_right)),
        ("bswap", |a| ret(barg(a, 1)?.swap_bytes())),
    ];
    let mut fns = Vec::new();
    for (name, op) in ops {
        fns.push((name, function(lua, move |_, args| Ok(op(args)))?));
    }
    let tohex = function(lua, |lua, args| {
        let b = match barg(args, 1) {
            Ok(b) => b,
            Err(e) => return Ok(Err(e)),
        };
        let n = if args.len() < 2 {
            8
        } else {
            match barg(args, 2) {
                Ok(n) => n as i32,
                Err(e) => return Ok(Err(e)),
            }
        };
        let (n, upper) = if n < 0 { (n.wrapping_neg(), true) } else { (n, false) };
        // -2^31 negated stays negative; LuaBitOp built by Redis's compiler writes 8 digits for it.
        let n = if n < 0 { 8 } else { n.min(8) as usize };
        let hex = if upper { format!("{b:08X}") } else { format!("{b:08x}") };
        Ok(Ok(vec![Value::String(lua.create_string(&hex[8 - n..])?)]))
    })?;
    fns.push(("tohex", tohex));
    library(lua, fns)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vm() -> Vm {
        Vm::new(Arc::new(Control::default())).unwrap()
    }

    fn eval(vm: &Vm, code: &str) -> Reply {
        let (_dir, db) = crate::types::testing::temp_db();
        let mut ctx = WriteCtx::new(&db);
        ctx.begin(1);
        let f = match vm.compile(code.as_bytes(), EVAL_CHUNK) {
            Ok(f) => f,
            Err(e) => return Reply::Error(format!("compile: {e}")),
        };
        let opts = RunOpts { name: "t", read_only: false, is_function: false, cross_slot: false };
        vm.run(&f, &[], &[], &mut ctx, &opts, &AtomicBool::new(false))
    }

    #[test]
    fn lua_values_become_replies_as_redis_converts_them() {
        let vm = vm();
        assert_eq!(eval(&vm, "return 100.5"), Reply::Int(100));
        assert_eq!(eval(&vm, "return -3.9"), Reply::Int(-3));
        assert_eq!(eval(&vm, "return 'hi'"), Reply::Bulk(Bytes::from("hi")));
        assert_eq!(eval(&vm, "return true"), Reply::Int(1));
        assert_eq!(eval(&vm, "return false"), Reply::Nil);
        assert_eq!(eval(&vm, "return nil"), Reply::Nil);
        assert_eq!(eval(&vm, "return {ok='fine'}"), Reply::Simple("fine".into()));
        assert_eq!(eval(&vm, "return {err='MY fail'}"), Reply::Error("MY fail".into()));
        assert_eq!(
            eval(&vm, "return {1,2,3,'x',nil,5}"),
            Reply::Array(vec![Reply::Int(1), Reply::Int(2), Reply::Int(3), Reply::Bulk(Bytes::from("x"))])
        );
        assert_eq!(eval(&vm, "return redis.status_reply('x')"), Reply::Simple("x".into()));
        assert_eq!(eval(&vm, "return redis.error_reply('MY_CODE m')"), Reply::Error("MY_CODE m".into()));
        assert_eq!(eval(&vm, "return redis.error_reply('-X y')"), Reply::Error("X y".into()));
        assert_eq!(
            eval(&vm, "return redis.sha1hex('Pizza & Mandolino')"),
            Reply::Bulk(Bytes::from("74822d82031af7493c20eefa13bd07ec4fada82f"))
        );
        assert_eq!(eval(&vm, "local t = {}; t[1] = t; return 1"), Reply::Int(1));
        let Reply::Array(nested) = eval(&vm, "local t = {}; t[1] = t; return t") else { panic!("not an array") };
        assert_eq!(nested.len(), 1);
        assert_eq!(eval(&vm, "return bit.band(0xff, 0x0f)"), Reply::Int(15));
        assert_eq!(eval(&vm, "return bit.tohex(255, 4)"), Reply::Bulk(Bytes::from("00ff")));
    }

    #[test]
    fn library_errors_name_the_callers_line_as_c_functions_do() {
        let vm = vm();
        let positioned = |msg: &str, line: u32| {
            Reply::Error(format!("ERR user_script:{line}: {msg} script: t, on @user_script:{line}."))
        };
        let decode_err = "Expected comma or array end but found T_END at character 5";
        // Tail position keeps the script's frame, as a C function called by a tail call does in Lua 5.1.
        assert_eq!(eval(&vm, "return cjson.decode('[1,2')"), positioned(decode_err, 1));
        assert_eq!(eval(&vm, "\nlocal v = cjson.decode('[1,2')"), positioned(decode_err, 2));
        assert_eq!(
            eval(&vm, "return bit.band('x')"),
            positioned("bad argument #1 to 'band' (number expected, got string)", 1)
        );
        assert_eq!(
            eval(&vm, "local f = struct.pack return f('q')"),
            positioned("bad argument #1 to 'f' (invalid format option 'q')", 1)
        );
        assert_eq!(
            eval(&vm, "return cjson.encode(function() end)"),
            positioned("Cannot serialise function: type not supported", 1)
        );
        // Under pcall, level 1 is pcall itself: no position, and no name for the function.
        assert_eq!(
            eval(&vm, "local ok, e = pcall(struct.pack, 'q') return e"),
            Reply::Bulk(Bytes::from("bad argument #1 to '?' (invalid format option 'q')"))
        );
        assert_eq!(
            eval(&vm, "local ok, e = pcall(cjson.decode, '[1,2') return e"),
            Reply::Bulk(Bytes::from(decode_err))
        );
        // The redis.* helpers raise error tables: no position, the suffix names the script's line.
        assert_eq!(
            eval(&vm, "return redis.sha1hex()"),
            Reply::Error("ERR wrong number of arguments script: t, on @user_script:1.".into())
        );
        // Redis's pcall hands back an error table's text.
        assert_eq!(
            eval(&vm, "local ok, e = pcall(redis.call, 'nosuch') return e"),
            Reply::Bulk(Bytes::from("ERR Unknown Redis command called from script"))
        );
        assert_eq!(
            eval(&vm, "local ok, e = pcall(redis.sha1hex) return e"),
            Reply::Bulk(Bytes::from("ERR wrong number of arguments"))
        );
        // Numbers out of the integer range convert as C casts on x86-64.
        assert_eq!(eval(&vm, "return 0/0"), Reply::Int(i64::MIN));
        assert_eq!(eval(&vm, "return 1e300"), Reply::Int(i64::MIN));
        assert_eq!(eval(&vm, "return -2^63"), Reply::Int(i64::MIN));
        assert_eq!(eval(&vm, "return cjson.decode('+5')"), Reply::Int(5));
    }

    #[test]
    fn the_sandbox_refuses_globals_and_files() {
        let vm = vm();
        assert_eq!(
            eval(&vm, "return a"),
            Reply::Error(
                "ERR user_script:1: Script attempted to access nonexistent global variable 'a' script: t, on \
                 @user_script:1."
                    .into()
            )
        );
        assert_eq!(
            eval(&vm, "a = 1"),
            Reply::Error("ERR user_script:1: Attempt to modify a readonly table script: t, on @user_script:1.".into())
        );
        for name in ["os", "io", "loadfile", "dofile", "require", "print"] {
            let r = eval(&vm, &format!("return {name}"));
            assert!(matches!(&r, Reply::Error(e) if e.contains("nonexistent global")), "{name}: {r:?}");
        }
        let r = eval(&vm, "string.rep = nil");
        assert!(matches!(&r, Reply::Error(e) if e.contains("readonly table")), "{r:?}");
        let r = eval(&vm, "return x y");
        assert!(matches!(&r, Reply::Error(e) if e.starts_with("compile: user_script:1:")), "{r:?}");
        assert_eq!(
            eval(&vm, "error('boom')"),
            Reply::Error("ERR user_script:1: boom script: t, on @user_script:1.".into())
        );
        assert_eq!(
            eval(&vm, "\n\nerror({err='MY boom'})"),
            Reply::Error("MY boom script: t, on @user_script:3.".into())
        );
    }

    #[test]
    fn unbounded_allocation_is_an_error_and_the_vm_lives_on() {
        let vm = vm();
        let r = eval(&vm, "local t = {} local s = string.rep('x', 1024*1024) for i = 1, 1e9 do t[i] = s .. i end");
        assert!(matches!(&r, Reply::Error(e) if e.contains("not enough memory")), "{r:?}");
        assert_eq!(eval(&vm, "return 7"), Reply::Int(7));
    }

    #[test]
    fn commands_run_on_the_context_and_errors_read_like_redis() {
        let vm = vm();
        assert_eq!(eval(&vm, "return redis.call('set','k','v')"), Reply::Simple("OK".into()));
        let r = eval(&vm, "redis.call('set','k','v'); return redis.call('get','k')");
        assert_eq!(r, Reply::Bulk(Bytes::from("v")));
        assert_eq!(
            eval(&vm, "return redis.call('nosuch')"),
            Reply::Error("ERR Unknown Redis command called from script script: t, on @user_script:1.".into())
        );
        assert_eq!(
            eval(&vm, "return redis.call('get')"),
            Reply::Error(
                "ERR Wrong number of args calling Redis command from script script: t, on @user_script:1.".into()
            )
        );
        assert_eq!(
            eval(&vm, "return redis.call('multi')"),
            Reply::Error("ERR This Redis command is not allowed from script script: t, on @user_script:1.".into())
        );
        assert_eq!(
            eval(&vm, "return redis.call()"),
            Reply::Error(
                "ERR Please specify at least one argument for this redis lib call script: t, on @user_script:1.".into()
            )
        );
        assert_eq!(
            eval(&vm, "redis.call('set','s','abc'); return redis.pcall('incr','s')"),
            Reply::Error("ERR value is not an integer or out of range".into())
        );
        assert_eq!(eval(&vm, "return redis.call('incrby','n', 2.0)"), Reply::Int(2));
    }
}
