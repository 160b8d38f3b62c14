//! Server commands: INFO, CONFIG, TIME, COMMAND, SHUTDOWN, LASTSAVE, BGSAVE, SAVE, MONITOR, SLOWLOG, LATENCY,
//! MEMORY, ROLE, REPLICAOF, SLAVEOF, MODULE, LOLWUT, WAIT.
//!
//! Files by role: this one has the command table, CONFIG, TIME, SHUTDOWN, WAIT and [`Introspection`] (what
//! the connections record about each command they run); `info.rs` INFO, `command.rs` COMMAND, `save.rs`
//! SAVE, BGSAVE and LASTSAVE (checkpoints), `glob.rs` the glob matcher, `stats.rs` the per-command and
//! per-error counters, `slowlog.rs` SLOWLOG, `latency.rs` LATENCY, `monitor.rs` MONITOR, `memory.rs` MEMORY,
//! `pause.rs` CLIENT PAUSE and UNPAUSE, `role.rs` ROLE and REPLICAOF, `module.rs` MODULE, `lolwut.rs` LOLWUT,
//! `facts.rs` what `COMMAND INFO` and `COMMAND GETKEYS` say of each command (from `facts_data.rs`, generated
//! by `scripts/gen-command-facts` from redis-server's `COMMAND` reply).

use super::{help_reply, sub_arity, unknown_subcommand, Spec};
use crate::config::{Config, SetError};
use crate::resp::{Args, Reply};
use crate::server::{Session, Shared};
use bytes::Bytes;
use std::sync::atomic::Ordering;
use std::time::Duration;

pub mod cluster;
mod command;
pub(crate) mod facts;
mod facts_data;
mod glob;
mod info;
pub(crate) mod keyspecs;
pub mod latency;
mod lolwut;
mod memory;
mod module;
pub mod monitor;
pub mod pause;
mod role;
mod save;
pub mod slot_moves;
pub mod slowlog;
pub mod stats;

use command::command;
pub use glob::glob_match;
use info::info;
pub use info::keyspace_scan;
use save::{bgsave, lastsave, save};
pub use save::{SaveState, Saves};

pub static COMMANDS: &[Spec] = &[
    cmd! { "info", -1, LOADING | STALE, [0, 0, 0], Conn(info), "Returns information and statistics about the server." },
    cmd! { "config", -2, ADMIN | NOSCRIPT | LOADING | STALE, [0, 0, 0], Conn(config), "A container for server configuration commands (GET, SET, RESETSTAT, REWRITE)." },
    cmd! { "time", 1, LOADING | STALE | FAST, [0, 0, 0], Conn(time), "Returns the server time." },
    cmd! { "command", -1, LOADING | STALE, [0, 0, 0], Conn(command), "Returns detailed information about all commands (COUNT, INFO, DOCS, LIST, GETKEYS)." },
    cmd! { "shutdown", -1, ADMIN | NOSCRIPT | LOADING | STALE, [0, 0, 0], Conn(shutdown), "Stops the server: in-flight commands finish, the WAL is synced, the engine is closed." },
    cmd! { "lastsave", 1, LOADING | STALE | FAST, [0, 0, 0], Conn(lastsave), "Returns the Unix time of the last successful SAVE or BGSAVE checkpoint (or of the start)." },
    cmd! { "bgsave", -1, ADMIN | NOSCRIPT, [0, 0, 0], Conn(bgsave), "Writes a checkpoint of the database into <dir>/checkpoints/<unix-time> in the background." },
    cmd! { "save", 1, ADMIN | NOSCRIPT, [0, 0, 0], Conn(save), "Writes a checkpoint of the database into <dir>/checkpoints/<unix-time> (a copy: every acknowledged write is already durable)." },
    cmd! { "monitor", 1, ADMIN | NOSCRIPT | LOADING | STALE, [0, 0, 0], Conn(monitor::monitor), "Streams every command the server runs to this connection." },
    cmd! { "slowlog", -2, ADMIN | LOADING | STALE, [0, 0, 0], Conn(slowlog::slowlog), "A container for slow log commands (GET, LEN, RESET, HELP)." },
    cmd! { "latency", -2, ADMIN | NOSCRIPT | LOADING | STALE, [0, 0, 0], Conn(latency::latency), "A container for latency diagnostics commands (LATEST, HISTORY, RESET, DOCTOR, GRAPH, HISTOGRAM, HELP)." },
    cmd! { "memory", -2, READONLY, [0, 0, 0], Conn(memory::memory), "A container for memory diagnostics commands (USAGE, STATS, DOCTOR, MALLOC-STATS, PURGE, HELP)." },
    cmd! { "role", 1, NOSCRIPT | LOADING | STALE | FAST, [0, 0, 0], Conn(role::role), "Returns the replication role: a master without replicas, or in a replica group (--cluster-enabled yes) master on the leader and slave elsewhere." },
    cmd! { "replicaof", 3, ADMIN | NOSCRIPT | STALE, [0, 0, 0], Conn(role::replicaof), "NO ONE: OK (already a master); following another server is refused (no replication)." },
    cmd! { "slaveof", 3, ADMIN | NOSCRIPT | STALE, [0, 0, 0], Conn(role::replicaof), "The old name of REPLICAOF." },
    cmd! { "module", -2, ADMIN | NOSCRIPT, [0, 0, 0], Conn(module::module), "LIST: no modules (this server loads none); LOAD, LOADEX and UNLOAD are refused." },
    cmd! { "lolwut", -1, READONLY | FAST, [0, 0, 0], Conn(lolwut::lolwut), "Returns the server's version line." },
    cmd! { "cluster", -2, 0, [0, 0, 0], Conn(cluster::cluster_cmd), "A replica group member (--cluster-enabled yes): the group as one shard owning all 16384 slots (INFO, SLOTS, SHARDS, NODES, MYID, KEYSLOT, SHALEDB-INIT). Otherwise: cluster support is disabled, as Redis with cluster-enabled no." },
    cmd! { "asking", 1, FAST, [0, 0, 0], Conn(cluster::conn_mode), "A replica group member: OK (one shard, no slot migrations). Otherwise: cluster support is disabled." },
    cmd! { "readonly", 1, LOADING | STALE | FAST, [0, 0, 0], Conn(cluster::conn_mode), "A replica group member: reads on a replica run on its (possibly stale) state. Otherwise: cluster support is disabled." },
    cmd! { "readwrite", 1, LOADING | STALE | FAST, [0, 0, 0], Conn(cluster::conn_mode), "A replica group member: reads on a replica are redirected to the leader again. Otherwise: cluster support is disabled." },
    cmd! { "wait", 3, NOSCRIPT, [0, 0, 0], Conn(wait), "Waits for the writes to reach replicas: with none, answers 0 (at once for 0 replicas, after the timeout otherwise)." },
];

fn text(a: &[u8]) -> String {
    String::from_utf8_lossy(a).into_owned()
}

// ---------------------------------------------------------------------------------------------------------
// Glob patterns (CONFIG GET, COMMAND LIST FILTERBY PATTERN)
// ---------------------------------------------------------------------------------------------------------
// INFO
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
        b"help" if args.len() == 2 => help_reply(CONFIG_HELP),
        b"get" => {
            if args.len() < 3 {
                return sub_arity("config", &sub);
            }
            let cfg = shared.config.read();
            let mut pairs = Vec::new();
            for name in crate::config::parameter_names() {
                // A hidden parameter answers only to its exact name, as in Redis.
                let matches = |p: &Bytes| {
                    let is_glob = p.iter().any(|c| matches!(c, b'*' | b'?' | b'['));
                    if is_glob && crate::config::redis::HIDDEN.contains(&name) {
                        return false;
                    }
                    glob_match(p, name.as_bytes(), true)
                };
                if args[2..].iter().any(matches) {
                    let v = if name == "appendfsync" {
                        shared.store.appendfsync().name().to_string()
                    } else {
                        cfg.get(name).unwrap_or_default()
                    };
                    pairs.push((Reply::bulk(name), Reply::bulk(v)));
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
            shared.intro.commands.reset();
            shared.store.gc.reset_lazyfreed();
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
    let mut notify_classes = None;
    for pair in pairs.chunks(2) {
        let name = text(&pair[0]).to_ascii_lowercase();
        if seen.contains(&name) {
            return Reply::err(format!(
                "CONFIG SET failed (possibly related to argument '{name}') - duplicate parameter"
            ));
        }
        match next.set_value(&name, &text(&pair[1]), false) {
            Ok(()) => {
                if name == "notify-keyspace-events" {
                    // The classes as given: the text CONFIG GET shows drops `n` next to `A`, as Redis's does.
                    notify_classes = crate::notify::parse(&pair[1]);
                }
                seen.push(name)
            }
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
    // A new port or bind address: the listener moves now, or nothing of this CONFIG SET applies.
    if next.port != cfg.port || next.bind != cfg.bind {
        let port_changed = next.port != cfg.port;
        if let Err(why) = crate::server::rebind(shared, &next.bind, next.port, port_changed) {
            let name = if port_changed { "port" } else { "bind" };
            return Reply::err(format!("CONFIG SET failed (possibly related to argument '{name}') - {why}"));
        }
    }
    shared.store.set_appendfsync(next.appendfsync);
    shared.intro.apply(&next);
    apply_knobs(&shared.store, &next, |name| seen.iter().any(|s| s == name));
    if let Some(classes) = notify_classes {
        shared.store.notify_flags.store(classes, std::sync::atomic::Ordering::Relaxed);
    }
    // requirepass is the default user's password, as in Redis.
    if seen.iter().any(|n| n == "requirepass") {
        shared.acl.set_requirepass(next.requirepass.as_deref());
    }
    *cfg = next;
    Reply::Ok
}

/// Hands the parameters that size data to the commit step, which reads them once per group:
/// `hll-sparse-max-bytes`, `stream-node-max-entries` and `notify-keyspace-events`, each per server. `named` says which parameters to
/// hand over: those a CONFIG SET named, or at start those differing from the default.
pub(crate) fn apply_knobs(store: &crate::commit::Store, cfg: &crate::config::Config, named: impl Fn(&str) -> bool) {
    let number = |name: &str| {
        if !named(name) {
            return None;
        }
        cfg.get(name).as_deref().and_then(crate::config::parse_memory)
    };
    if let Some(n) = number("hll-sparse-max-bytes") {
        store.hll_sparse_max_bytes.store(n, std::sync::atomic::Ordering::Relaxed);
    }
    if let Some(n) = number("stream-node-max-entries") {
        store.stream_node_max_entries.store(n, std::sync::atomic::Ordering::Relaxed);
    }
    if let Some(n) = number("tracking-table-max-keys") {
        store.tracking.set_max_keys(n);
    }
    // The access clock's LFU settings (OBJECT FREQ); the clock starts with the server.
    let knob = |name: &str| cfg.get(name).unwrap_or_default();
    crate::access::configure(
        &*store.db() as *const shaledb::Db as usize,
        &knob("maxmemory-policy"),
        knob("lfu-log-factor").parse().unwrap_or(10),
        knob("lfu-decay-time").parse().unwrap_or(1),
    );
    crate::access::start();
    if named("notify-keyspace-events") {
        let flags = cfg.get("notify-keyspace-events").and_then(|v| crate::notify::parse(v.as_bytes()));
        store.notify_flags.store(flags.unwrap_or(0), std::sync::atomic::Ordering::Relaxed);
    }
}

fn config_rewrite(shared: &Shared) -> Reply {
    let cfg = shared.config.read().clone();
    let Some(path) = cfg.config_file.clone() else {
        return Reply::err("The server is running without a config file");
    };
    let mut cfg = cfg;
    cfg.appendfsync = shared.store.appendfsync();
    let result = rewrite_config_file(&path, &cfg);
    match result {
        Ok(()) => Reply::Ok,
        Err(e) => {
            eprintln!("# CONFIG REWRITE of {} failed: {e}", path.display());
            Reply::err(format!("Rewriting config file: {e}"))
        }
    }
}

/// CONFIG REWRITE's file work: the rewritten text to a temporary file, synced, renamed over the file, the
/// directory synced.
fn rewrite_config_file(path: &std::path::Path, cfg: &Config) -> std::io::Result<()> {
    let old = std::fs::read_to_string(path)?;
    let new = cfg.rewrite_file(&old);
    let tmp = path.with_extension("rewrite.tmp");
    {
        use std::io::Write;
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(new.as_bytes())?;
        f.sync_all()?;
    }
    std::fs::rename(&tmp, path)?;
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::File::open(dir)?.sync_all()?;
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------------------
// TIME, SHUTDOWN

fn time(_: &mut Session, _: &Shared, _: &Args) -> Reply {
    let d = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    Reply::Array(vec![Reply::bulk(d.as_secs().to_string()), Reply::bulk(d.subsec_micros().to_string())])
}

/// `SHUTDOWN [NOSAVE|SAVE] [NOW] [FORCE] [ABORT]`: stops the server as SIGTERM does and closes this
/// connection without a reply (as Redis does). SAVE and NOSAVE make no difference: every acknowledged write
/// is already durable, the WAL is synced and the engine closed either way (SHUTDOWN SAVE writes no checkpoint:
/// send SAVE first for one).
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

// ---------------------------------------------------------------------------------------------------------
// WAIT

/// What `WAIT numreplicas timeout` does on a server without replicas (the arguments checked in Redis's
/// order): `Ok(None)` answers 0 at once (no replica asked for), `Ok(Some(t))` answers 0
/// after `t` (`None` inside: never, until the client is killed, as Redis's `WAIT 1 0` blocks for good).
pub fn wait_plan(args: &Args) -> Result<Option<Option<Duration>>, Reply> {
    let replicas = super::arg_i64(&args[1])?;
    let timeout = match crate::resp::parse_i64(&args[2]) {
        Some(t) if t < 0 => return Err(Reply::err("timeout is negative")),
        Some(t) => t as u64,
        None => return Err(Reply::err("timeout is not an integer or out of range")),
    };
    if replicas <= 0 {
        return Ok(None);
    }
    Ok(Some((timeout > 0).then(|| Duration::from_millis(timeout))))
}

/// `WAIT`'s arguments in a replica group (Redis's checks and errors): the replicas wanted and the timeout
/// (`None`: 0, forever).
pub fn wait_args(args: &Args) -> Result<(i64, Option<Duration>), Reply> {
    let replicas = super::arg_i64(&args[1])?;
    let timeout = match crate::resp::parse_i64(&args[2]) {
        Some(t) if t < 0 => return Err(Reply::err("timeout is negative")),
        Some(t) => t as u64,
        None => return Err(Reply::err("timeout is not an integer or out of range")),
    };
    Ok((replicas, (timeout > 0).then(|| Duration::from_millis(timeout))))
}

/// WAIT where it cannot block (the connection runs the blocking case itself, see `server.rs`; inside MULTI it
/// answers at once, as Redis does): in a replica group, the members that hold the connection's writes now.
fn wait(s: &mut Session, shared: &Shared, args: &Args) -> Reply {
    if let Some(c) = shared.store.cluster() {
        let Some(n) = c.replicas_at(s.wait_index) else {
            return Reply::err(crate::cluster::WAIT_ON_REPLICA);
        };
        return match wait_args(args) {
            Ok(_) => Reply::Int(n),
            Err(e) => e,
        };
    }
    match wait_plan(args) {
        Ok(_) => Reply::Int(0),
        Err(e) => e,
    }
}

// ---------------------------------------------------------------------------------------------------------
// What connections record about the commands they run

/// The server-wide records of the commands run: their counters, the slow log, the latency monitor and the
/// MONITOR clients. Connections call [`Introspection::ran`] after each command.
///
/// The counters and the MONITOR clients are shared (`Arc`) so that code running commands away from a
/// connection (a script's `redis.call` in the commit step) can record them too:
/// `commands.record(spec, sub, time, &reply)` and `monitors.feed(db, Origin::Script, args)`.
#[derive(Default)]
pub struct Introspection {
    pub commands: std::sync::Arc<stats::CommandStats>,
    pub slowlog: slowlog::SlowLog,
    pub latency: latency::LatencyMonitor,
    pub monitors: std::sync::Arc<monitor::Monitors>,
}

/// A command that shows itself to MONITOR before it runs, so that what a script runs follows it.
pub fn monitored_before(spec: &Spec) -> bool {
    matches!(spec.name, "eval" | "evalsha" | "eval_ro" | "evalsha_ro" | "fcall" | "fcall_ro")
}

impl Introspection {
    /// Takes the values of the parameters it follows (`slowlog-*`, `latency-*`) from `cfg`.
    pub fn apply(&self, cfg: &Config) {
        let num = |name: &str| cfg.get(name).and_then(|v| v.parse::<i64>().ok());
        if let Some(v) = num("slowlog-log-slower-than") {
            self.slowlog.slower_than.store(v, Ordering::Relaxed);
        }
        if let Some(v) = num("slowlog-max-len") {
            self.slowlog.set_max_len(v.max(0) as u64);
        }
        if let Some(v) = num("latency-monitor-threshold") {
            self.latency.threshold_ms.store(v.max(0) as u64, Ordering::Relaxed);
        }
        let tracking = cfg.get("latency-tracking").is_none_or(|v| v == "yes");
        self.commands.latency_tracking.store(tracking, Ordering::Relaxed);
    }

    /// Records a command that ran for `d` and answered `reply`: its counters, the slow log and the latency
    /// monitor (unless `blocking`: its time was mostly waiting), and MONITOR. `args` is `None` when the
    /// caller did not keep them (then only the counters are updated).
    pub fn ran(
        &self,
        s: &Session,
        spec: &'static Spec,
        args: Option<&[Bytes]>,
        d: Duration,
        reply: &Reply,
        blocking: bool,
    ) {
        let sub = if stats::is_container(spec.name) { args.and_then(|a| a.get(1)).map(|b| &b[..]) } else { None };
        self.commands.record(spec, sub, d, reply);
        if !blocking {
            let event = if spec.flags & super::flags::FAST != 0 { "fast-command" } else { "command" };
            self.latency.offer(event, d);
        }
        let Some(args) = args else { return };
        if !blocking {
            self.slowlog.offer(s, args, d);
        }
        if spec.flags & super::flags::ADMIN == 0 && !monitored_before(spec) {
            self.monitors.feed(s.db_index, monitor::Origin::Client(&s.addr), args);
        }
    }

    /// True when the arguments of the commands should be kept for [`Introspection::ran`] (a command may go
    /// to the slow log, or someone monitors).
    pub fn wants_args(&self) -> bool {
        self.monitors.active() || self.slowlog.slower_than.load(Ordering::Relaxed) >= 0
    }
}

#[cfg(test)]
mod tests;
