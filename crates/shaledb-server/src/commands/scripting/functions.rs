//! FUNCTION LOAD / DELETE / FLUSH / LIST / STATS / KILL / HELP, FCALL and FCALL_RO.
//!
//! A library is the text FUNCTION LOAD received: a `#!lua name=<lib>` line, then Lua code that calls
//! `redis.register_function` for each function (a name and a callback, or a table with `function_name`,
//! `callback`, `flags` and `description`). Loading runs that code once, in the functions' own VM, with a
//! deadline of [`LOAD_TIMEOUT_MS`]; the callbacks stay in the VM. Libraries are durable: FUNCTION LOAD,
//! DELETE and FLUSH write their records (`types/scripts.rs`) in the command's group, and the server loads
//! every stored library on the first command that needs them.
//!
//! FUNCTION DUMP and FUNCTION RESTORE use Redis's payload (`types/rdb`: each library's code after the RDB
//! function opcode, then the RDB version and a CRC-64), so libraries move between redis-server and ShaleDB.

use super::lua::{self, Registered};
use super::{scripts_of, split_keys, Scripts};
use crate::commands::{help_reply, server_cmds::glob_match, sub_arity, unknown_subcommand};
use crate::resp::{Args, Reply};
use crate::store::WriteCtx;
use crate::types::scripts as store;
use bytes::Bytes;
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::Ordering;

/// Longest a library's code may run while it loads.
pub const LOAD_TIMEOUT_MS: u64 = 500;

/// FUNCTION RESTORE's policy toward the libraries already loaded.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Restore {
    Append,
    Replace,
    Flush,
}

/// What a FUNCTION RESTORE changed: the libraries removed, and the libraries added with their code.
struct Restored {
    removed: Vec<String>,
    added: Vec<(String, Vec<u8>)>,
}

/// One loaded library.
struct Library {
    code: Bytes,
    functions: Vec<Registered>,
}

/// The functions' VM and every library loaded in it.
pub struct Libraries {
    vm: lua::Vm,
    libs: BTreeMap<String, Library>,
    /// Function name, lower case (function names are case-insensitive, as in Redis) -> its library.
    owner: HashMap<String, String>,
}

/// A library's `#!<engine> name=<name>` line: `(engine, name, length of the line)`.
fn metadata(code: &[u8]) -> Result<(String, String, usize), String> {
    if !code.starts_with(b"#!") {
        return Err("Missing library metadata".into());
    }
    let Some(len) = code.iter().position(|&b| b == b'\n') else { return Err("Invalid library metadata".into()) };
    let line = String::from_utf8_lossy(&code[..len]);
    let words = split_words(&line);
    let mut parts = words.iter().map(String::as_str);
    let Some(engine) = parts.next() else { return Err("Invalid library metadata".into()) };
    let engine = engine[2..].to_string();
    let mut name = None;
    for part in parts {
        if part.len() >= 5 && part[..5].eq_ignore_ascii_case("name=") {
            if name.is_some() {
                return Err("Invalid metadata value, name argument was given multiple times".into());
            }
            name = Some(part[5..].to_string());
            continue;
        }
        return Err(format!("Invalid metadata value given: {part}"));
    }
    let Some(name) = name else { return Err("Library name was not given".into()) };
    Ok((engine, name, len))
}

/// The words of a header line: split at spaces outside quotes, the quotes removed (`name="foo"` is
/// `name=foo`), as Redis splits it.
fn split_words(line: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut in_word = false;
    let mut quote: Option<char> = None;
    for ch in line.chars() {
        match quote {
            Some(q) if ch == q => quote = None,
            Some(_) => cur.push(ch),
            None if ch == '"' || ch == '\'' => {
                quote = Some(ch);
                in_word = true;
            }
            None if ch.is_ascii_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut cur));
                    in_word = false;
                }
            }
            None => {
                cur.push(ch);
                in_word = true;
            }
        }
    }
    if in_word {
        words.push(cur);
    }
    words
}

fn valid_name(name: &str) -> bool {
    !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

impl Libraries {
    fn new(sc: &Scripts) -> Result<Libraries, String> {
        let vm = lua::Vm::new(sc.control.clone()).map_err(|e| format!("could not start the Lua VM: {e}"))?;
        Ok(Libraries { vm, libs: BTreeMap::new(), owner: HashMap::new() })
    }

    /// Compiles and runs a library's code, checks it against the libraries loaded, and installs it: its
    /// name, or Redis's error text.
    fn create(&mut self, sc: &Scripts, code: &[u8], replace: bool) -> Result<String, String> {
        let (engine, name, header) = metadata(code)?;
        if !engine.eq_ignore_ascii_case("lua") {
            return Err(format!("Engine '{engine}' not found"));
        }
        if !valid_name(&name) {
            return Err("Library names can only contain letters, numbers, or underscores(_) and must be at least one \
                 character long"
                .into());
        }
        if self.libs.contains_key(&name) && !replace {
            return Err(format!("Library '{name}' already exists"));
        }
        // The header line's newline stays, so line numbers match the user's text.
        let f = self
            .vm
            .compile(&code[header..], lua::FUNCTION_CHUNK)
            .map_err(|e| format!("Error compiling function: {e}"))?;
        sc.control.load_deadline_ms.store(crate::store::now_ms() + LOAD_TIMEOUT_MS, Ordering::Release);
        let loaded = self.vm.load_library(&f);
        sc.control.load_deadline_ms.store(0, Ordering::Release);
        let functions = loaded.map_err(|e| format!("Error registering functions: {e}"))?;
        if functions.is_empty() {
            return Err("No functions registered".into());
        }
        for f in &functions {
            if self.owner.get(&f.name.to_ascii_lowercase()).is_some_and(|lib| *lib != name) {
                return Err(format!("Function {} already exists", f.name));
            }
        }
        self.remove(&name);
        for f in &functions {
            self.owner.insert(f.name.to_ascii_lowercase(), name.clone());
        }
        self.libs.insert(name.clone(), Library { code: Bytes::copy_from_slice(code), functions });
        Ok(name)
    }

    fn remove(&mut self, name: &str) -> bool {
        match self.libs.remove(name) {
            Some(lib) => {
                for f in &lib.functions {
                    self.owner.remove(&f.name.to_ascii_lowercase());
                }
                true
            }
            None => false,
        }
    }

    /// FUNCTION RESTORE: the payload's libraries are first loaded into a VM of their own (a library that does
    /// not load, or two with one name, fail the restore before anything changes), then checked against the
    /// libraries loaded (APPEND refuses a name taken, REPLACE replaces it, FLUSH drops every library first;
    /// a function name taken by a library that stays is refused), then installed. The libraries removed and
    /// the ones added, for the caller to store.
    fn restore(&mut self, sc: &Scripts, codes: &[Vec<u8>], policy: Restore) -> Result<Restored, String> {
        let mut incoming = Libraries::new(sc)?;
        for code in codes {
            incoming.create(sc, code, false)?;
        }
        let removed: Vec<String> = match policy {
            Restore::Flush => self.libs.keys().cloned().collect(),
            Restore::Replace => incoming.libs.keys().filter(|n| self.libs.contains_key(*n)).cloned().collect(),
            Restore::Append => {
                if let Some(name) = incoming.libs.keys().find(|n| self.libs.contains_key(*n)) {
                    return Err(format!("Library {name} already exists"));
                }
                Vec::new()
            }
        };
        for (function, lib) in &incoming.owner {
            if let Some(owner) = self.owner.get(function) {
                if !removed.contains(owner) {
                    let name = incoming.libs[lib].functions.iter().find(|f| f.name.eq_ignore_ascii_case(function));
                    return Err(format!("Function {} already exists", name.map_or(function.as_str(), |f| &f.name)));
                }
            }
        }
        if policy == Restore::Flush {
            *self = incoming;
            let added = self.libs.iter().map(|(n, l)| (n.clone(), l.code.to_vec())).collect();
            return Ok(Restored { removed, added });
        }
        for name in &removed {
            self.remove(name);
        }
        let mut added = Vec::new();
        for (name, lib) in &incoming.libs {
            // Loaded once already, and every name is free: this compiles and registers the same code again, in
            // the VM the functions run in.
            self.create(sc, &lib.code, true)?;
            added.push((name.clone(), lib.code.to_vec()));
        }
        Ok(Restored { removed, added })
    }

    fn find(&self, function: &str) -> Option<&Registered> {
        let lib = self.owner.get(&function.to_ascii_lowercase())?;
        self.libs.get(lib)?.functions.iter().find(|f| f.name.eq_ignore_ascii_case(function))
    }

    fn count(&self) -> (u64, u64) {
        (self.libs.len() as u64, self.owner.len() as u64)
    }
}

impl Scripts {
    /// Whether function `name` declares `no-writes` (see [`Scripts::declares_no_writes`]).
    pub(super) fn function_declares_no_writes(&self, name: &str) -> Option<bool> {
        let guard = self.functions.try_lock()?;
        let f = guard.as_ref()?.find(name)?;
        Some(f.flags.iter().any(|f| f == "no-writes"))
    }

    /// Runs `f` with the functions' VM, loading every stored library first if this is the first use.
    fn with_functions<R>(
        &self,
        ctx: &mut WriteCtx<'_>,
        f: impl FnOnce(&mut Libraries, &mut WriteCtx<'_>) -> R,
    ) -> Result<R, Reply> {
        let mut guard = self.functions.lock();
        if guard.is_none() {
            let mut libs = Libraries::new(self).map_err(Reply::err)?;
            let stored = store::load_all(&ctx.view()).map_err(|e| Reply::err(format!("reading the functions: {e}")))?;
            for (name, code) in stored {
                if let Err(e) = libs.create(self, &code, true) {
                    eprintln!("# function library {name} could not be loaded: {e}");
                }
            }
            *guard = Some(libs);
        }
        let Some(libs) = guard.as_mut() else { return Err(Reply::err("could not start the Lua VM")) };
        let r = f(libs, ctx);
        let (l, n) = libs.count();
        self.libraries.store(l, Ordering::Relaxed);
        self.functions_count.store(n, Ordering::Relaxed);
        Ok(r)
    }
}

/// FUNCTION STATS (answered on the connection's task, so it works while a function runs).
pub fn stats(sc: &Scripts) -> Reply {
    Reply::Map(vec![
        (Reply::bulk("running_script"), sc.running_entry()),
        (
            Reply::bulk("engines"),
            Reply::Map(vec![(
                Reply::bulk("LUA"),
                Reply::Map(vec![
                    (Reply::bulk("libraries_count"), Reply::Int(sc.libraries.load(Ordering::Relaxed) as i64)),
                    (Reply::bulk("functions_count"), Reply::Int(sc.functions_count.load(Ordering::Relaxed) as i64)),
                ]),
            )]),
        ),
    ])
}

fn fcall_generic(ctx: &mut WriteCtx<'_>, args: &Args, ro: bool) -> Reply {
    let sc = tri!(scripts_of(ctx));
    let name = String::from_utf8_lossy(&args[1]).into_owned();
    let r = sc.with_functions(ctx, |libs, ctx| {
        let Some(f) = libs.find(&name) else { return Reply::err("Function not found") };
        let (keys, argv) = tri!(split_keys(args, "Bad number of keys provided"));
        let no_writes = f.flags.iter().any(|f| f == "no-writes");
        if ro && !no_writes {
            return Reply::err("Can not execute a script with write flag using *_ro command.");
        }
        if ctx.serves_slot.is_some() && f.flags.iter().any(|f| f == "no-cluster") {
            return Reply::err(super::NO_CLUSTER);
        }
        let cross_slot = f.flags.iter().any(|f| f == "allow-cross-slot-keys");
        let opts = lua::RunOpts { name: &name, read_only: ro || no_writes, is_function: true, cross_slot };
        let callback = f.callback.clone();
        sc.begin_run(&name, false, args);
        let reply = libs.vm.run(&callback, keys, argv, ctx, &opts, &sc.wrote);
        sc.end_run(ctx);
        reply
    });
    r.unwrap_or_else(|e| e)
}

pub fn fcall(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    fcall_generic(ctx, args, false)
}

pub fn fcall_ro(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    fcall_generic(ctx, args, true)
}

const FUNCTION_HELP: &[&str] = &[
    "FUNCTION <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "LOAD [REPLACE] <library code>",
    "    Loads a library of functions (its first line: #!lua name=<library name>).",
    "DELETE <library name>",
    "    Deletes a library and its functions.",
    "FLUSH [ASYNC|SYNC]",
    "    Deletes every library.",
    "LIST [LIBRARYNAME <pattern>] [WITHCODE]",
    "    Lists the libraries and their functions, with their code if asked.",
    "STATS",
    "    The running function, and the counts of libraries and functions.",
    "KILL",
    "    Stops the running function, if it has not written.",
    "DUMP",
    "    A payload of every library, for FUNCTION RESTORE here or on a Redis server.",
    "RESTORE <payload> [FLUSH|APPEND|REPLACE]",
    "    Loads the libraries of a FUNCTION DUMP payload: APPEND (the default) fails on a library name taken,",
    "    REPLACE replaces such libraries, FLUSH deletes every library first.",
    "HELP",
    "    Prints this help.",
];

/// FUNCTION and its subcommands (KILL and STATS are answered by `intercept` outside MULTI).
pub fn function(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    let sc = tri!(scripts_of(ctx));
    let sub = args[1].to_ascii_lowercase();
    let n = args.len();
    match sub.as_slice() {
        b"help" if n == 2 => help_reply(FUNCTION_HELP),
        b"stats" if n == 2 => stats(&sc),
        b"kill" if n == 2 => sc.kill(false),
        b"load" if n >= 3 => {
            let mut replace = false;
            for opt in &args[2..n - 1] {
                if opt.eq_ignore_ascii_case(b"replace") {
                    replace = true;
                } else {
                    return Reply::err(format!("Unknown option given: {}", String::from_utf8_lossy(opt)));
                }
            }
            let code = &args[n - 1];
            let r = sc.with_functions(ctx, |libs, ctx| match libs.create(&sc, code, replace) {
                Ok(name) => {
                    store::put(ctx, &name, code);
                    Reply::Bulk(Bytes::from(name))
                }
                Err(e) => Reply::err(e),
            });
            r.unwrap_or_else(|e| e)
        }
        b"delete" if n == 3 => {
            let name = String::from_utf8_lossy(&args[2]).into_owned();
            let r = sc.with_functions(ctx, |libs, ctx| {
                if libs.remove(&name) {
                    store::delete(ctx, &name);
                    Reply::Ok
                } else {
                    Reply::err("Library not found")
                }
            });
            r.unwrap_or_else(|e| e)
        }
        b"flush" if n <= 3 => {
            if n == 3 && !args[2].eq_ignore_ascii_case(b"async") && !args[2].eq_ignore_ascii_case(b"sync") {
                return Reply::err("FUNCTION FLUSH only supports SYNC|ASYNC option");
            }
            let r = sc.with_functions(ctx, |libs, ctx| {
                for name in libs.libs.keys() {
                    store::delete(ctx, name);
                }
                // A new VM: the flushed callbacks are gone with the old one.
                match Libraries::new(&sc) {
                    Ok(fresh) => {
                        *libs = fresh;
                        Reply::Ok
                    }
                    Err(e) => Reply::err(e),
                }
            });
            r.unwrap_or_else(|e| e)
        }
        b"list" => {
            let mut with_code = false;
            let mut pattern: Option<&[u8]> = None;
            let mut i = 2;
            while i < n {
                if args[i].eq_ignore_ascii_case(b"withcode") && !with_code {
                    with_code = true;
                } else if args[i].eq_ignore_ascii_case(b"libraryname") && pattern.is_none() {
                    if i + 1 >= n {
                        return Reply::err("library name argument was not given");
                    }
                    pattern = Some(&args[i + 1]);
                    i += 1;
                } else {
                    return Reply::err(format!("Unknown argument {}", String::from_utf8_lossy(&args[i])));
                }
                i += 1;
            }
            let r = sc.with_functions(ctx, |libs, _| {
                let mut out = Vec::new();
                for (name, lib) in &libs.libs {
                    if pattern.is_some_and(|p| !glob_match(p, name.as_bytes(), true)) {
                        continue;
                    }
                    out.push(list_entry(name, lib, with_code));
                }
                Reply::Array(out)
            });
            r.unwrap_or_else(|e| e)
        }
        b"dump" if n == 2 => {
            let r = sc.with_functions(ctx, |libs, _| {
                let payload = crate::types::rdb::encode_functions(libs.libs.values().map(|l| &l.code[..]));
                Reply::Bulk(Bytes::from(payload))
            });
            r.unwrap_or_else(|e| e)
        }
        b"restore" if n == 3 || n == 4 => {
            let policy = match args.get(3).map(|a| a.to_ascii_lowercase()) {
                None => Restore::Append,
                Some(p) if p == b"append" => Restore::Append,
                Some(p) if p == b"replace" => Restore::Replace,
                Some(p) if p == b"flush" => Restore::Flush,
                Some(_) => {
                    return Reply::err("Wrong restore policy given, value should be either FLUSH, APPEND or REPLACE.")
                }
            };
            let codes = match crate::types::rdb::decode_functions(&args[2]) {
                Ok(codes) => codes,
                Err(e) => return Reply::err(e),
            };
            let r = sc.with_functions(ctx, |libs, ctx| match libs.restore(&sc, &codes, policy) {
                Ok(Restored { removed, added }) => {
                    for name in removed {
                        store::delete(ctx, &name);
                    }
                    for (name, code) in added {
                        store::put(ctx, &name, &code);
                    }
                    Reply::Ok
                }
                Err(e) => Reply::err(e),
            });
            r.unwrap_or_else(|e| e)
        }
        b"flush" => Reply::err(format!(
            "unknown subcommand or wrong number of arguments for '{}'. Try FUNCTION HELP.",
            String::from_utf8_lossy(&args[1])
        )),
        b"restore" if n > 4 => Reply::err(format!(
            "unknown subcommand or wrong number of arguments for '{}'. Try FUNCTION HELP.",
            String::from_utf8_lossy(&args[1])
        )),
        b"help" | b"stats" | b"kill" | b"load" | b"delete" | b"dump" | b"restore" => sub_arity("function", &sub),
        _ => unknown_subcommand("FUNCTION", &args[1]),
    }
}

fn list_entry(name: &str, lib: &Library, with_code: bool) -> Reply {
    let functions = lib
        .functions
        .iter()
        .map(|f| {
            Reply::Map(vec![
                (Reply::bulk("name"), Reply::Bulk(Bytes::from(f.name.clone()))),
                (
                    Reply::bulk("description"),
                    f.description.as_ref().map_or(Reply::Nil, |d| Reply::Bulk(Bytes::from(d.clone()))),
                ),
                (Reply::bulk("flags"), Reply::Set(f.flags.iter().map(|fl| Reply::Simple(fl.clone())).collect())),
            ])
        })
        .collect();
    let mut entry = vec![
        (Reply::bulk("library_name"), Reply::Bulk(Bytes::from(name.to_string()))),
        (Reply::bulk("engine"), Reply::bulk("LUA")),
        (Reply::bulk("functions"), Reply::Array(functions)),
    ];
    if with_code {
        entry.push((Reply::bulk("library_code"), Reply::Bulk(lib.code.clone())));
    }
    Reply::Map(entry)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn library_headers_parse_like_redis() {
        assert_eq!(metadata(b"#!lua name=lib\ncode").unwrap(), ("lua".into(), "lib".into(), 14));
        assert_eq!(metadata(b"#!LUA NAME=x\n").unwrap().1, "x");
        assert_eq!(metadata(b"code").unwrap_err(), "Missing library metadata");
        assert_eq!(metadata(b"#!lua name=x").unwrap_err(), "Invalid library metadata");
        assert_eq!(metadata(b"#!lua\nx").unwrap_err(), "Library name was not given");
        assert_eq!(metadata(b"#!lua name=a foo=bar\n").unwrap_err(), "Invalid metadata value given: foo=bar");
        assert_eq!(
            metadata(b"#!lua name=a name=b\n").unwrap_err(),
            "Invalid metadata value, name argument was given multiple times"
        );
        assert!(valid_name("lib_1") && !valid_name("a-b") && !valid_name(""));
        assert_eq!(metadata(b"#!lua name=\"foo\"\n").unwrap().1, "foo");
        assert_eq!(split_words(" a  'b c' d\"e\" "), ["a", "b c", "de"]);
    }
}
