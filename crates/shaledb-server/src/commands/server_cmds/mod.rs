//! Server commands: INFO, CONFIG, TIME, COMMAND, SHUTDOWN, LASTSAVE, BGSAVE, SAVE.

use super::flags::*;
use super::{Handler, Spec};
use crate::config::SetError;
use crate::keys;
use crate::resp::{Args, Reply};
use crate::server::{Session, Shared};
use crate::store::now_ms;
use shaledb::{Db, ReadOptions};
use std::fmt::Write as _;
use std::sync::atomic::Ordering;
use std::sync::OnceLock;

pub static COMMANDS: &[Spec] = &[
    Spec {
        name: "info",
        arity: -1,
        flags: LOADING | STALE,
        first_key: 0,
        last_key: 0,
        step: 0,
        handler: Handler::Conn(info),
        summary: "Returns information and statistics about the server.",
    },
    Spec {
        name: "config",
        arity: -2,
        flags: ADMIN | NOSCRIPT | LOADING | STALE,
        first_key: 0,
        last_key: 0,
        step: 0,
        handler: Handler::Conn(config),
        summary: "A container for server configuration commands (GET, SET, RESETSTAT, REWRITE).",
    },
    Spec {
        name: "time",
        arity: 1,
        flags: LOADING | STALE | FAST,
        first_key: 0,
        last_key: 0,
        step: 0,
        handler: Handler::Conn(time),
        summary: "Returns the server time.",
    },
    Spec {
        name: "command",
        arity: -1,
        flags: LOADING | STALE,
        first_key: 0,
        last_key: 0,
        step: 0,
        handler: Handler::Conn(command),
        summary: "Returns detailed information about all commands (COUNT, INFO, DOCS, LIST, GETKEYS).",
    },
    Spec {
        name: "shutdown",
        arity: -1,
        flags: ADMIN | NOSCRIPT | LOADING | STALE,
        first_key: 0,
        last_key: 0,
        step: 0,
        handler: Handler::Conn(shutdown),
        summary: "Stops the server: in-flight commands finish, the WAL is synced, the engine is closed.",
    },
    Spec {
        name: "lastsave",
        arity: 1,
        flags: LOADING | STALE | FAST,
        first_key: 0,
        last_key: 0,
        step: 0,
        handler: Handler::Conn(lastsave),
        summary: "Returns the Unix time of the last WAL fsync (or of the start).",
    },
    Spec {
        name: "bgsave",
        arity: -1,
        flags: ADMIN | NOSCRIPT,
        first_key: 0,
        last_key: 0,
        step: 0,
        handler: Handler::Conn(save),
        summary: "Not supported: the engine has no checkpoint yet (the WAL is the persistence).",
    },
    Spec {
        name: "save",
        arity: 1,
        flags: ADMIN | NOSCRIPT,
        first_key: 0,
        last_key: 0,
        step: 0,
        handler: Handler::Conn(save),
        summary: "Not supported: the engine has no checkpoint yet (the WAL is the persistence).",
    },
];

fn unknown_subcommand(cmd: &str, sub: &[u8]) -> Reply {
    Reply::err(format!(
        "unknown subcommand '{}'. Try {} HELP.",
        String::from_utf8_lossy(&sub[..sub.len().min(128)]),
        cmd
    ))
}

fn sub_arity(cmd: &str, sub: &[u8]) -> Reply {
    Reply::err(format!("wrong number of arguments for '{cmd}|{}' command", String::from_utf8_lossy(sub)))
}

fn text(a: &[u8]) -> String {
    String::from_utf8_lossy(a).into_owned()
}

// ---------------------------------------------------------------------------------------------------------
// Glob patterns (CONFIG GET, COMMAND LIST FILTERBY PATTERN)

/// Redis's glob: `*`, `?`, `[abc]`, `[^a-z]`, `\x`. Iterative with one backtracking point per `*`, so the
/// time is bounded by pattern length x string length.
pub fn glob_match(pattern: &[u8], s: &[u8], nocase: bool) -> bool {
    let eq = |a: u8, b: u8| if nocase { a.eq_ignore_ascii_case(&b) } else { a == b };
    let (mut p, mut i) = (0usize, 0usize);
    let mut star: Option<(usize, usize)> = None;
    while i < s.len() {
        let mut matched = None;
        if p < pattern.len() {
            match pattern[p] {
                b'*' => {
                    while p < pattern.len() && pattern[p] == b'*' {
                        p += 1;
                    }
                    if p == pattern.len() {
                        return true;
                    }
                    star = Some((p, i));
                    continue;
                }
                b'?' => matched = Some(p + 1),
                b'[' => {
                    let (ok, next) = class_match(pattern, p + 1, s[i], nocase);
                    if ok {
                        matched = Some(next);
                    }
                }
                b'\\' if p + 1 < pattern.len() => {
                    if eq(pattern[p + 1], s[i]) {
                        matched = Some(p + 2);
                    }
                }
                c => {
                    if eq(c, s[i]) {
                        matched = Some(p + 1);
                    }
                }
            }
        }
        match (matched, star) {
            (Some(next), _) => {
                p = next;
                i += 1;
            }
            (None, Some((sp, si))) => {
                p = sp;
                i = si + 1;
                star = Some((sp, si + 1));
            }
            (None, None) => return false,
        }
    }
    pattern[p..].iter().all(|&c| c == b'*')
}

/// Matches `c` against the class starting after `[` at `p`; returns whether it matched and the index after `]`.
fn class_match(pattern: &[u8], mut p: usize, c: u8, nocase: bool) -> (bool, usize) {
    let fold = |x: u8| if nocase { x.to_ascii_lowercase() } else { x };
    let c = fold(c);
    let not = pattern.get(p) == Some(&b'^');
    if not {
        p += 1;
    }
    let mut hit = false;
    while p < pattern.len() && pattern[p] != b']' {
        if pattern[p] == b'\\' && p + 1 < pattern.len() {
            hit |= fold(pattern[p + 1]) == c;
            p += 2;
        } else if p + 2 < pattern.len() && pattern[p + 1] == b'-' && pattern[p + 2] != b']' {
            let (mut lo, mut hi) = (fold(pattern[p]), fold(pattern[p + 2]));
            if lo > hi {
                std::mem::swap(&mut lo, &mut hi);
            }
            hit |= (lo..=hi).contains(&c);
            p += 3;
        } else {
            hit |= fold(pattern[p]) == c;
            p += 1;
        }
    }
    // An unterminated class ends at the end of the pattern, as in Redis.
    (hit != not, (p + 1).min(pattern.len()))
}

// ---------------------------------------------------------------------------------------------------------
// INFO

/// A random 40-hex-digit id fixed for the life of the process (`run_id`, `master_replid`).
fn process_id_hex(which: usize) -> &'static str {
    static IDS: OnceLock<[String; 2]> = OnceLock::new();
    let ids = IDS.get_or_init(|| {
        let hex = || (0..40).map(|_| char::from_digit(rand::random::<u32>() % 16, 16).unwrap_or('0')).collect();
        [hex(), hex()]
    });
    &ids[which]
}

/// Unix seconds when the server started.
fn start_unix(shared: &Shared) -> u64 {
    (now_ms() / 1000).saturating_sub(shared.started.elapsed().as_secs())
}

/// The resident set size of this process, from /proc/self/status (`None` where there is no /proc).
fn rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kb: u64 = line.trim_start_matches("VmRSS:").trim().trim_end_matches("kB").trim().parse().ok()?;
    kb.checked_mul(1024)
}

fn human(bytes: u64) -> String {
    let b = bytes as f64;
    if b >= (1u64 << 30) as f64 {
        format!("{:.2}G", b / (1u64 << 30) as f64)
    } else if b >= (1u64 << 20) as f64 {
        format!("{:.2}M", b / (1u64 << 20) as f64)
    } else if b >= 1024.0 {
        format!("{:.2}K", b / 1024.0)
    } else {
        format!("{bytes}B")
    }
}

fn prop_u64(db: &Db, name: &str) -> u64 {
    db.property(name).and_then(|v| v.parse().ok()).unwrap_or(0)
}

/// Live keys and keys with an expiry per non-empty database, by a scan of each database's meta keys (keys
/// already expired at `now_ms` but not yet removed are not counted). Runs in the caller's thread: INFO
/// keyspace costs a scan of the keyspace.
pub fn keyspace_scan(db: &Db, now_ms: u64) -> shaledb::Result<Vec<(u8, u64, u64)>> {
    let mut out = Vec::new();
    for d in 0..keys::DATABASES {
        let lower = keys::meta_prefix(d).to_vec();
        let mut upper = lower.clone();
        upper[1] += 1;
        let mut it = db.cursor_opt(&ReadOptions {
            iterate_lower_bound: Some(lower.clone()),
            iterate_upper_bound: Some(upper),
            fill_cache: false,
            ..ReadOptions::default()
        });
        it.seek(&lower);
        let (mut n, mut expires) = (0u64, 0u64);
        while it.valid() {
            if let Ok(meta) = keys::decode_meta(it.value()) {
                if !meta.expired(now_ms) {
                    n += 1;
                    expires += meta.expire_at_ms.is_some() as u64;
                }
            }
            it.next();
        }
        it.status()?;
        if n > 0 {
            out.push((d, n, expires));
        }
    }
    Ok(out)
}

const DEFAULT_SECTIONS: &[&str] = &["server", "clients", "memory", "persistence", "stats", "replication", "keyspace"];

fn info(_: &mut Session, shared: &Shared, args: &Args) -> Reply {
    let mut wanted: Vec<String> = Vec::new();
    for a in &args[1..] {
        let a = text(a).to_ascii_lowercase();
        match a.as_str() {
            "default" | "all" | "everything" => wanted.extend(DEFAULT_SECTIONS.iter().map(|s| s.to_string())),
            _ => wanted.push(a),
        }
    }
    if args.len() == 1 {
        wanted.extend(DEFAULT_SECTIONS.iter().map(|s| s.to_string()));
    }
    let mut out = String::new();
    let mut done: Vec<&str> = Vec::new();
    for name in DEFAULT_SECTIONS {
        if !wanted.iter().any(|w| w == name) || done.contains(name) {
            continue;
        }
        if !out.is_empty() {
            out.push_str("\r\n");
        }
        section(shared, name, &mut out);
        done.push(name);
    }
    Reply::Verbatim(out)
}

fn section(shared: &Shared, name: &str, out: &mut String) {
    let cfg = shared.config.read().clone();
    let store = &shared.store;
    let stats = &shared.stats;
    match name {
        "server" => {
            let uptime = shared.started.elapsed().as_secs();
            let os = format!(
                "{} {} {}",
                if std::env::consts::OS == "linux" { "Linux" } else { std::env::consts::OS },
                std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default().trim(),
                std::env::consts::ARCH
            );
            out.push_str("# Server\r\n");
            kv(out, "redis_version", &crate::REDIS_VERSION);
            kv(out, "redis_git_sha1", &"00000000");
            kv(out, "redis_git_dirty", &0);
            kv(out, "redis_mode", &"standalone");
            kv(out, "shaledb_version", &env!("CARGO_PKG_VERSION"));
            kv(out, "os", &os);
            kv(out, "arch_bits", &usize::BITS);
            kv(out, "multiplexing_api", &"tokio");
            kv(out, "process_id", &std::process::id());
            kv(out, "run_id", &process_id_hex(0));
            kv(out, "tcp_port", &shared.local_addr.port());
            kv(out, "server_time_usec", &(now_ms() * 1000));
            kv(out, "uptime_in_seconds", &uptime);
            kv(out, "uptime_in_days", &(uptime / 86400));
            kv(out, "executable", &std::env::current_exe().map(|p| p.display().to_string()).unwrap_or_default());
            kv(
                out,
                "config_file",
                &cfg.config_file
                    .as_ref()
                    .map(|p| std::path::absolute(p).unwrap_or_else(|_| p.clone()).display().to_string())
                    .unwrap_or_default(),
            );
        }
        "clients" => {
            out.push_str("# Clients\r\n");
            kv(out, "connected_clients", &shared.clients.lock().len());
            kv(out, "maxclients", &cfg.maxclients);
            kv(out, "blocked_clients", &0);
        }
        "memory" => {
            let db = &store.db;
            let mem = prop_u64(db, "shaledb.cur-size-all-mem-tables");
            let cache = prop_u64(db, "shaledb.block-cache-usage");
            let used = mem + cache;
            let rss = rss_bytes().unwrap_or(0);
            out.push_str("# Memory\r\n");
            kv(out, "used_memory", &used);
            kv(out, "used_memory_human", &human(used));
            kv(out, "used_memory_rss", &rss);
            kv(out, "used_memory_rss_human", &human(rss));
            kv(out, "used_memory_memtables", &mem);
            kv(out, "used_memory_block_cache", &cache);
            kv(out, "block_cache_capacity", &prop_u64(db, "shaledb.block-cache-capacity"));
            kv(out, "maxmemory", &0);
            kv(out, "maxmemory_human", &"0B");
            kv(out, "maxmemory_policy", &"noeviction");
        }
        "persistence" => {
            let reason = store.read_only_reason();
            let s = &store.stats;
            let last_fsync = s.last_fsync_unix.load(Ordering::Relaxed);
            out.push_str("# Persistence\r\n");
            kv(out, "loading", &0);
            kv(out, "async_loading", &0);
            kv(out, "rdb_changes_since_last_save", &0);
            kv(out, "rdb_bgsave_in_progress", &0);
            kv(out, "rdb_last_save_time", &if last_fsync > 0 { last_fsync } else { start_unix(shared) });
            kv(out, "rdb_last_bgsave_status", &"ok");
            kv(out, "aof_enabled", &1);
            kv(out, "aof_rewrite_in_progress", &0);
            kv(out, "aof_last_write_status", &if reason.is_some() { "err" } else { "ok" });
            kv(out, "appendfsync", &store.appendfsync().name());
            kv(out, "read_only", &(reason.is_some() as u8));
            kv(out, "read_only_reason", &reason.unwrap_or_default().replace(['\r', '\n'], " "));
            kv(out, "commit_groups", &s.groups.load(Ordering::Relaxed));
            kv(out, "commit_commands", &s.commands.load(Ordering::Relaxed));
            kv(out, "commit_fsyncs", &s.fsyncs.load(Ordering::Relaxed));
            kv(out, "last_fsync_time", &last_fsync);
        }
        "stats" => {
            out.push_str("# Stats\r\n");
            kv(out, "total_connections_received", &stats.connections_received.load(Ordering::Relaxed));
            kv(out, "total_commands_processed", &stats.commands_processed.load(Ordering::Relaxed));
            kv(out, "instantaneous_ops_per_sec", &stats.ops_last_second.load(Ordering::Relaxed));
            kv(out, "total_net_input_bytes", &stats.net_input_bytes.load(Ordering::Relaxed));
            kv(out, "total_net_output_bytes", &stats.net_output_bytes.load(Ordering::Relaxed));
            kv(out, "rejected_connections", &stats.rejected_connections.load(Ordering::Relaxed));
            // The collector of dead collection versions (gc.rs).
            let gc = &shared.store.gc;
            kv(out, "gc_versions_reclaimed", &gc.versions_reclaimed.load(Ordering::Relaxed));
            kv(out, "gc_records_deleted", &gc.records_deleted.load(Ordering::Relaxed));
            kv(out, "gc_versions_queued", &gc.pending());
            kv(out, "gc_registry_passes", &gc.passes.load(Ordering::Relaxed));
        }
        "replication" => {
            out.push_str("# Replication\r\n");
            kv(out, "role", &"master");
            kv(out, "connected_slaves", &0);
            kv(out, "master_failover_state", &"no-failover");
            kv(out, "master_replid", &process_id_hex(1));
            kv(out, "master_replid2", &"0000000000000000000000000000000000000000");
            kv(out, "master_repl_offset", &0);
            kv(out, "second_repl_offset", &-1);
            kv(out, "repl_backlog_active", &0);
        }
        "keyspace" => {
            out.push_str("# Keyspace\r\n");
            let db = &store.db;
            // A scan can be long: let the runtime move other connections off this worker meanwhile.
            let counts = tokio::task::block_in_place(|| keyspace_scan(db, now_ms()));
            match counts {
                Ok(counts) => {
                    for (d, n, e) in counts {
                        kv(out, &format!("db{d}"), &format_args!("keys={n},expires={e},avg_ttl=0"));
                    }
                }
                Err(e) => kv(out, "keyspace_error", &e.to_string().replace(['\r', '\n'], " ")),
            }
        }
        _ => {}
    }
}

fn kv(out: &mut String, k: &str, v: &dyn std::fmt::Display) {
    let _ = write!(out, "{k}:{v}\r\n");
}

// ---------------------------------------------------------------------------------------------------------
// CONFIG

const CONFIG_HELP: &[&str] = &[
    "CONFIG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "GET <pattern>",
    "    Return parameters matching the glob-like <pattern> and their values.",
    "SET <directive> <value>",
    "    Set the configuration <directive> to <value>.",
    "RESETSTAT",
    "    Reset statistics reported by the INFO command.",
    "REWRITE",
    "    Rewrite the configuration file.",
    "HELP",
    "    Print this help.",
];

fn config(_: &mut Session, shared: &Shared, args: &Args) -> Reply {
    let sub = args[1].to_ascii_lowercase();
    match sub.as_slice() {
        b"help" if args.len() == 2 => Reply::Array(CONFIG_HELP.iter().map(|l| Reply::Simple((*l).into())).collect()),
        b"get" => {
            if args.len() < 3 {
                return sub_arity("config", &sub);
            }
            let cfg = shared.config.read();
            let mut pairs = Vec::new();
            for name in crate::config::PARAMETERS {
                if args[2..].iter().any(|p| glob_match(p, name.as_bytes(), true)) {
                    let v = if *name == "appendfsync" {
                        shared.store.appendfsync().name().to_string()
                    } else {
                        cfg.get(name).unwrap_or_default()
                    };
                    pairs.push((Reply::bulk(*name), Reply::bulk(v)));
                }
            }
            Reply::Map(pairs)
        }
        b"set" => {
            if args.len() < 4 {
                return sub_arity("config", &sub);
            }
            if !args.len().is_multiple_of(2) {
                return super::syntax_error();
            }
            config_set(shared, &args[2..])
        }
        b"resetstat" => {
            if args.len() != 2 {
                return sub_arity("config", &sub);
            }
            shared.stats.reset();
            Reply::Ok
        }
        b"rewrite" => {
            if args.len() != 2 {
                return sub_arity("config", &sub);
            }
            config_rewrite(shared)
        }
        _ => unknown_subcommand("CONFIG", &args[1]),
    }
}

/// `CONFIG SET name value [name value ...]`: all or nothing, as in Redis 7.
fn config_set(shared: &Shared, pairs: &[bytes::Bytes]) -> Reply {
    let mut cfg = shared.config.write();
    let mut next = cfg.clone();
    let mut seen = Vec::new();
    for pair in pairs.chunks(2) {
        let name = text(&pair[0]).to_ascii_lowercase();
        if seen.contains(&name) {
            return Reply::err(format!(
                "CONFIG SET failed (possibly related to argument '{name}') - duplicate parameter"
            ));
        }
        match next.set_value(&name, &text(&pair[1]), false) {
            Ok(()) => seen.push(name),
            Err(SetError::Unknown) => {
                return Reply::err(format!(
                    "Unknown option or number of arguments for CONFIG SET - '{}'",
                    text(&pair[0])
                ))
            }
            Err(SetError::Immutable) => {
                return Reply::err(format!(
                    "CONFIG SET failed (possibly related to argument '{name}') - can't set immutable config"
                ))
            }
            Err(SetError::Invalid(why)) => {
                return Reply::err(format!("CONFIG SET failed (possibly related to argument '{name}') - {why}"))
            }
        }
    }
    shared.store.set_appendfsync(next.appendfsync);
    *cfg = next;
    Reply::Ok
}

fn config_rewrite(shared: &Shared) -> Reply {
    let cfg = shared.config.read().clone();
    let Some(path) = cfg.config_file.clone() else {
        return Reply::err("The server is running without a config file");
    };
    let mut cfg = cfg;
    cfg.appendfsync = shared.store.appendfsync();
    let result = tokio::task::block_in_place(|| -> std::io::Result<()> {
        let old = std::fs::read_to_string(&path)?;
        let new = cfg.rewrite_file(&old);
        let tmp = path.with_extension("rewrite.tmp");
        {
            use std::io::Write;
            let mut f = std::fs::File::create(&tmp)?;
            f.write_all(new.as_bytes())?;
            f.sync_all()?;
        }
        std::fs::rename(&tmp, &path)?;
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::File::open(dir)?.sync_all()?;
        }
        Ok(())
    });
    match result {
        Ok(()) => Reply::Ok,
        Err(e) => {
            eprintln!("# CONFIG REWRITE of {} failed: {e}", path.display());
            Reply::err(format!("Rewriting config file: {e}"))
        }
    }
}

// ---------------------------------------------------------------------------------------------------------
// TIME, LASTSAVE, BGSAVE, SAVE, SHUTDOWN

fn time(_: &mut Session, _: &Shared, _: &Args) -> Reply {
    let d = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    Reply::Array(vec![Reply::bulk(d.as_secs().to_string()), Reply::bulk(d.subsec_micros().to_string())])
}

fn lastsave(_: &mut Session, shared: &Shared, _: &Args) -> Reply {
    let last = shared.store.stats.last_fsync_unix.load(Ordering::Relaxed);
    Reply::Int(if last > 0 { last } else { start_unix(shared) } as i64)
}

fn save(_: &mut Session, _: &Shared, args: &Args) -> Reply {
    let name = text(&args[0]).to_ascii_uppercase();
    Reply::err(format!(
        "{name} is not supported: the engine has no checkpoint yet; every acknowledged write is in the WAL \
         (fsynced as appendfsync says)"
    ))
}

/// `SHUTDOWN [NOSAVE|SAVE] [NOW] [FORCE] [ABORT]`: stops the server as SIGTERM does and closes this
/// connection without a reply (as Redis does). SAVE and NOSAVE make no difference: there is no snapshot,
/// the WAL is synced and the engine closed either way.
fn shutdown(s: &mut Session, shared: &Shared, args: &Args) -> Reply {
    let (mut save, mut nosave, mut abort) = (false, false, false);
    for a in &args[1..] {
        match a.to_ascii_lowercase().as_slice() {
            b"save" => save = true,
            b"nosave" => nosave = true,
            b"now" | b"force" => {}
            b"abort" => abort = true,
            _ => return super::syntax_error(),
        }
    }
    if (save && nosave) || (abort && args.len() != 2) {
        return super::syntax_error();
    }
    if abort {
        return Reply::err("No shutdown in progress.");
    }
    eprintln!("# SHUTDOWN asked by client {} ({})", s.id, s.addr);
    shared.request_shutdown();
    s.close_now = true;
    Reply::Ok
}

// ---------------------------------------------------------------------------------------------------------
// COMMAND

fn flag_names(spec: &Spec) -> Vec<&'static str> {
    NAMES.iter().filter(|(f, _)| spec.flags & f != 0).map(|(_, n)| *n).collect()
}

/// ACL categories derived from the flags (Redis's rules: write/read, fast or slow, admin is dangerous).
fn acl_categories(spec: &Spec) -> Vec<&'static str> {
    let mut c = Vec::new();
    if spec.flags & WRITE != 0 || spec.is_write() {
        c.push("@write");
    }
    if spec.flags & READONLY != 0 {
        c.push("@read");
    }
    if spec.flags & ADMIN != 0 {
        c.push("@admin");
        c.push("@dangerous");
    }
    c.push(if spec.flags & FAST != 0 { "@fast" } else { "@slow" });
    if spec.first_key > 0 {
        c.push("@keyspace");
    }
    if matches!(spec.handler, Handler::Conn(_)) && spec.flags & ADMIN == 0 {
        c.push("@connection");
    }
    c
}

fn command_info(spec: &Spec) -> Reply {
    let key_specs = if spec.first_key > 0 {
        // Redis 7's key spec: keys start at `first_key`, run to `last_key` (relative to the end when < 0) in
        // steps of `step`.
        let lastkey = if spec.last_key < 0 { spec.last_key as i64 } else { (spec.last_key - spec.first_key) as i64 };
        let access = if spec.is_write() { "RW" } else { "RO" };
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
        Reply::Set(acl_categories(spec).into_iter().map(|c| Reply::Simple(c.into())).collect()),
        Reply::Set(Vec::new()),
        Reply::Array(key_specs),
        Reply::Array(Vec::new()),
    ])
}

fn command_docs(spec: &Spec) -> Reply {
    let mut doc = vec![(Reply::bulk("summary"), Reply::bulk(spec.summary))];
    if spec.flags & EXTENSION != 0 {
        doc.push((Reply::bulk("group"), Reply::bulk("shaledb")));
    }
    Reply::Map(doc)
}

/// The key positions of a command line (`COMMAND GETKEYS`).
fn keys_of(spec: &Spec, args: &[bytes::Bytes]) -> Vec<bytes::Bytes> {
    if spec.first_key <= 0 || spec.step <= 0 {
        return Vec::new();
    }
    let argc = args.len() as i64;
    let last = if spec.last_key < 0 { argc + spec.last_key as i64 } else { (spec.last_key as i64).min(argc - 1) };
    let mut out = Vec::new();
    let mut i = spec.first_key as i64;
    while i <= last && i < argc {
        out.push(args[i as usize].clone());
        i += spec.step as i64;
    }
    out
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

fn command(_: &mut Session, _: &Shared, args: &Args) -> Reply {
    let mut specs: Vec<&'static Spec> = super::all().collect();
    specs.sort_by_key(|s| s.name);
    let Some(sub) = args.get(1).map(|a| a.to_ascii_lowercase()) else {
        return Reply::Array(specs.iter().map(|s| command_info(s)).collect());
    };
    let named =
        |names: &[bytes::Bytes]| -> Vec<Option<&'static Spec>> { names.iter().map(|n| super::lookup(n)).collect() };
    match sub.as_slice() {
        b"help" if args.len() == 2 => Reply::Array(COMMAND_HELP.iter().map(|l| Reply::Simple((*l).into())).collect()),
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
                _ => return super::syntax_error(),
            };
            let mut out = Vec::new();
            for s in specs {
                let keep = match &filter {
                    None => true,
                    Some((kind, v)) => match kind.as_slice() {
                        b"module" => false,
                        b"aclcat" => {
                            let cat = text(v).to_ascii_lowercase();
                            acl_categories(s).iter().any(|c| c[1..] == cat)
                        }
                        b"pattern" => glob_match(v, s.name.as_bytes(), true),
                        _ => return super::syntax_error(),
                    },
                };
                if keep {
                    out.push(Reply::bulk(s.name));
                }
            }
            Reply::Array(out)
        }
        b"getkeys" | b"getkeysandflags" => {
            if args.len() < 3 {
                return sub_arity("command", &sub);
            }
            let Some(spec) = super::lookup(&args[2]) else { return Reply::err("Invalid command specified") };
            if !spec.arity_ok(args.len() - 2) {
                return Reply::err("Invalid number of arguments specified for command");
            }
            let keys = keys_of(spec, &args[2..]);
            if keys.is_empty() {
                return Reply::err("The command has no key arguments");
            }
            if sub == b"getkeys" {
                Reply::Array(keys.into_iter().map(Reply::Bulk).collect())
            } else {
                let access = if spec.is_write() { "RW" } else { "RO" };
                Reply::Array(
                    keys.into_iter()
                        .map(|k| Reply::Array(vec![Reply::Bulk(k), Reply::Array(vec![Reply::Simple(access.into())])]))
                        .collect(),
                )
            }
        }
        _ => unknown_subcommand("COMMAND", &args[1]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn glob_patterns() {
        for (p, s, want) in [
            ("*", "anything", true),
            ("max*", "maxclients", true),
            ("max*", "MAXCLIENTS", true),
            ("*-len", "proto-max-bulk-len", true),
            ("a?c", "abc", true),
            ("a?c", "ac", false),
            ("[ab]x", "bx", true),
            ("[^ab]x", "bx", false),
            ("[a-c]x", "cx", true),
            ("[c-a]x", "bx", true),
            ("a\\*", "a*", true),
            ("a\\*", "ab", false),
            ("*a*b*c", "xxaxxbxxc", true),
            ("*a*b*c", "xxaxxbxx", false),
            ("[abc", "b", true),
            ("", "", true),
            ("", "a", false),
        ] {
            assert_eq!(glob_match(p.as_bytes(), s.as_bytes(), true), want, "{p} vs {s}");
        }
        assert!(!glob_match(b"MAX*", b"maxclients", false));
        // A pathological pattern ends quickly (no exponential backtracking).
        let s = "a".repeat(5000);
        assert!(!glob_match("*a*a*a*a*a*a*a*a*b".as_bytes(), s.as_bytes(), false));
    }

    #[test]
    fn getkeys_follows_first_last_step() {
        let spec = Spec {
            name: "mset",
            arity: -3,
            flags: WRITE,
            first_key: 1,
            last_key: -1,
            step: 2,
            handler: Handler::Conn(time),
            summary: "",
        };
        let args: Vec<bytes::Bytes> = ["mset", "a", "1", "b", "2"].iter().map(|s| bytes::Bytes::from(*s)).collect();
        assert_eq!(keys_of(&spec, &args), vec![bytes::Bytes::from("a"), bytes::Bytes::from("b")]);
    }
}
