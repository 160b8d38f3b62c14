//! Server configuration: command-line flags (`shaledb server --port ...`), a Redis-style config file
//! (`--config FILE`), and the values `CONFIG GET/SET` read and change at run time.
//!
//! The config file is read as Redis 7.0 reads redis.conf: `directive value...` lines, `#` starts a comment
//! line, values may be "double quoted" (with escapes) or 'single quoted', `include FILE` reads another file
//! in place, and repeated directives add up where Redis's do (`save`, `client-output-buffer-limit`,
//! `rename-command`, `user`). Every directive of Redis 7.0 is known ([`redis`] lists their names):
//!
//! - the ones this server honours take effect: `port`, `bind` (its first address), `dir`, `appendfsync`,
//!   `requirepass`, `maxclients`, `timeout`, `protected-mode`, `proto-max-bulk-len`,
//!   `client-query-buffer-limit`, `databases` (16 is the only value: the server has 16);
//! - the others are accepted, stored (`CONFIG GET` shows them) and named in one warning at start, since they
//!   change nothing here; those whose value says what this server does anyway (`appendonly yes`, `save ""`,
//!   `daemonize no`, `maxmemory 0` ...) are not named. `daemonize yes` is accepted too and the server stays
//!   in the foreground (forking a process that already runs threads is unsafe, and a daemon would lose the
//!   start's errors): run it under a supervisor (systemd, or `&` in a shell);
//! - a directive that is not Redis 7.0's is an error naming its line, as is a bad value for a directive this
//!   server honours (or a yes/no or numeric one it stores).
//!
//! Flags given on the command line win over the file.

use crate::resp::Limits;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

pub mod redis;

/// Redis's `appendfsync`: when a write is acknowledged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Appendfsync {
    /// After the WAL record holding it is fsynced (group commit). The default.
    Always,
    /// After it reached the WAL (write(2)); the WAL is fsynced once a second.
    Everysec,
    /// After it reached the WAL; fsync is left to the OS and to memtable switches.
    No,
}

impl Appendfsync {
    pub fn name(self) -> &'static str {
        match self {
            Appendfsync::Always => "always",
            Appendfsync::Everysec => "everysec",
            Appendfsync::No => "no",
        }
    }

    pub fn parse(s: &str) -> Option<Appendfsync> {
        match s.to_ascii_lowercase().as_str() {
            "always" => Some(Appendfsync::Always),
            "everysec" => Some(Appendfsync::Everysec),
            "no" => Some(Appendfsync::No),
            _ => None,
        }
    }

    pub(crate) fn from_u8(b: u8) -> Appendfsync {
        match b {
            0 => Appendfsync::Always,
            1 => Appendfsync::Everysec,
            _ => Appendfsync::No,
        }
    }

    pub(crate) fn to_u8(self) -> u8 {
        match self {
            Appendfsync::Always => 0,
            Appendfsync::Everysec => 1,
            Appendfsync::No => 2,
        }
    }
}

/// `shaledb server` flags. A flag not given takes the config file's value, else the default shown.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct ServerArgs {
    /// A redis.conf of Redis 7.0 read at start: the directives this server honours take effect, Redis's
    /// others are accepted and named in one warning, an unknown one is an error; flags win over it.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Database directory (created if missing; must hold a ShaleDB database or nothing) [default: ./shaledb-data].
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// TCP port (0 picks a free one and prints it) [default: 6379].
    #[arg(long)]
    pub port: Option<u16>,
    /// Address to listen on. A non-loopback address needs --requirepass or --protected-mode no
    /// [default: 127.0.0.1].
    #[arg(long)]
    pub bind: Option<String>,
    /// When a write is acknowledged: always (after its fsync, group commit), everysec, no [default: always].
    #[arg(long, value_parser = parse_appendfsync)]
    pub appendfsync: Option<Appendfsync>,
    /// Password every client must give with AUTH or HELLO before other commands.
    #[arg(long)]
    pub requirepass: Option<String>,
    /// Most connected clients; one more is answered `-ERR max number of clients reached` and closed
    /// [default: 10000].
    #[arg(long)]
    pub maxclients: Option<usize>,
    /// Close a client idle for this many seconds (0 = never) [default: 0].
    #[arg(long)]
    pub timeout: Option<u64>,
    /// Refuse to listen on a non-loopback address without a password (Redis's protected mode): yes or no
    /// [default: yes].
    #[arg(long, value_parser = parse_yes_no)]
    pub protected_mode: Option<bool>,
    /// The engine's block cache in bytes (its `block_cache_size`; 0: none). Reads of blocks not in it go to
    /// the files, on tokio's blocking pool (issue 41) [default: 33554432, 32 MiB].
    #[arg(long)]
    pub block_cache_size: Option<usize>,
    /// Read table files with O_DIRECT, bypassing the operating system's page cache (the engine's
    /// `use_direct_reads`): every block-cache miss is then a device read: yes or no [default: no].
    #[arg(long, value_parser = parse_yes_no)]
    pub use_direct_reads: Option<bool>,
    /// Run each read command from memory first and, when it needs the disk, again on a thread of the
    /// blocking pool while other clients are served: yes or no (no: disk reads wait on the server's one
    /// thread, as before issue 41) [default: yes].
    #[arg(long, value_parser = parse_yes_no)]
    pub read_offload: Option<bool>,
    /// Run as a member of a replica group (issue 43; redis.conf's `cluster-enabled`): the data lives in the
    /// group's raft node under `--dir`, writes are committed on a majority: yes or no [default: no].
    #[arg(long, value_parser = parse_yes_no)]
    pub cluster_enabled: Option<bool>,
    /// The port of the node-to-node transport (redis.conf's `cluster-port`; 0: the client port + 10000, Redis
    /// Cluster's bus-port rule) [default: 0].
    #[arg(long)]
    pub cluster_port: Option<u16>,
}

fn parse_appendfsync(s: &str) -> Result<Appendfsync, String> {
    Appendfsync::parse(s).ok_or_else(|| format!("'{s}' is not one of always, everysec, no"))
}

fn parse_yes_no(s: &str) -> Result<bool, String> {
    match s.to_ascii_lowercase().as_str() {
        "yes" => Ok(true),
        "no" => Ok(false),
        _ => Err(format!("'{s}' is not yes or no")),
    }
}

/// A configuration that cannot be used (a bad config file line, a bad value).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ConfigError(pub String);

/// The server's configuration.
#[derive(Debug, Clone)]
pub struct Config {
    pub dir: PathBuf,
    pub bind: String,
    pub port: u16,
    pub appendfsync: Appendfsync,
    pub requirepass: Option<String>,
    pub maxclients: usize,
    /// Idle clients are closed after this long (`None`: never).
    pub timeout: Option<Duration>,
    pub protected_mode: bool,
    /// Parser limits (`proto-max-bulk-len`, ...).
    pub limits: Limits,
    /// Most bytes a client's unparsed input may hold (`client-query-buffer-limit`, 1 GB).
    pub query_buffer_limit: usize,
    /// The config file the server was started with (`INFO server`, `CONFIG REWRITE`).
    pub config_file: Option<PathBuf>,
    /// Values of the Redis parameters this server accepts but does not apply, by canonical name, as
    /// `CONFIG GET` prints them; a parameter not here has its default ([`redis::PARAMETERS`]).
    pub redis: BTreeMap<String, String>,
    /// The directives of the config file that change nothing here: `(name, what the warning says)`.
    pub not_applied: Vec<(String, String)>,
    /// The engine's block cache in bytes (`--block-cache-size`; `None`: the engine's default, 32 MiB).
    pub block_cache_size: Option<usize>,
    /// Read table files with O_DIRECT (`--use-direct-reads`). Default false.
    pub use_direct_reads: bool,
    /// Reads that need the disk run on the blocking pool (`--read-offload`, issue 41). Default true.
    pub read_offload: bool,
    /// Adjusts the engine's options last, just before the database is opened (embedders and tests: the file
    /// system, cache sizes). Default none.
    pub engine_options: Option<fn(&mut shaledb::Options)>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            dir: PathBuf::from("./shaledb-data"),
            bind: "127.0.0.1".into(),
            port: 6379,
            appendfsync: Appendfsync::Always,
            requirepass: None,
            maxclients: 10000,
            timeout: None,
            protected_mode: true,
            limits: Limits::default(),
            query_buffer_limit: 1 << 30,
            config_file: None,
            redis: BTreeMap::new(),
            not_applied: Vec::new(),
            block_cache_size: None,
            use_direct_reads: false,
            read_offload: true,
            engine_options: None,
        }
    }
}

/// Why `CONFIG SET` (or a config file line) refused a value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SetError {
    /// No such parameter.
    Unknown,
    /// Fixed for the life of the server.
    Immutable,
    /// A bad value: the reason, as Redis words it after `CONFIG SET failed (...) - `.
    Invalid(String),
}

/// The parameters this server honours, first in `CONFIG GET`'s list; [`parameter_names`] has every one.
pub const PARAMETERS: &[&str] = &[
    "appendfsync",
    "requirepass",
    "maxclients",
    "timeout",
    "proto-max-bulk-len",
    "client-query-buffer-limit",
    "port",
    "bind",
    "dir",
    "protected-mode",
    "databases",
];

/// Redis's cluster parameters this server honours (issue 43's replica groups): kept with Redis's other
/// parameters (fixed for the life of the server), read through [`Config::cluster_enabled`] and
/// [`Config::cluster_bus_port`].
pub const CLUSTER_PARAMETERS: &[&str] = &["cluster-enabled", "cluster-port"];

/// Every parameter `CONFIG GET` knows, in the order it lists them: the honoured ones, then Redis 7.0's
/// others (stored, changing nothing here) and their aliases.
pub fn parameter_names() -> impl Iterator<Item = &'static str> {
    PARAMETERS.iter().copied().chain(redis::all_names().filter(|n| !PARAMETERS.contains(n)))
}

/// Redis parameters whose value here says what this server does anyway: not named in the start's warning.
const SAME_AS_SHALEDB: &[(&str, &str)] = &[
    ("appendonly", "yes"),
    ("save", ""),
    ("maxmemory", "0"),
    ("maxmemory-policy", "noeviction"),
    ("daemonize", "no"),
    ("supervised", "no"),
    ("cluster-enabled", "no"),
];

/// Most nested `include`s (a loop of includes stops here).
const MAX_INCLUDE_DEPTH: usize = 16;

/// What reading one config file (and its includes) keeps between lines.
#[derive(Default)]
struct FileState {
    depth: usize,
    /// A `save` line was read: the next ones add to it instead of replacing the default (as Redis does).
    save_started: bool,
}

/// Smallest `proto-max-bulk-len` and `client-query-buffer-limit` Redis accepts (1 MB).
const MIN_LIMIT: u64 = 1 << 20;

/// A size as Redis writes it: a number with an optional unit (`k` 1000, `kb` 1024, `m`, `mb`, `g`, `gb`).
pub fn parse_memory(s: &str) -> Option<u64> {
    let lower = s.to_ascii_lowercase();
    let digits_end = lower.find(|c: char| !c.is_ascii_digit()).unwrap_or(lower.len());
    let (num, unit) = lower.split_at(digits_end);
    if num.is_empty() {
        return None;
    }
    let n: u64 = num.parse().ok()?;
    let mul: u64 = match unit {
        "" | "b" => 1,
        "k" => 1000,
        "kb" => 1024,
        "m" => 1000 * 1000,
        "mb" => 1024 * 1024,
        "g" => 1000 * 1000 * 1000,
        "gb" => 1024 * 1024 * 1024,
        _ => return None,
    };
    n.checked_mul(mul)
}

fn yes_no(b: bool) -> String {
    if b { "yes" } else { "no" }.into()
}

fn range_error(min: u64, max: u64) -> SetError {
    SetError::Invalid(format!("argument must be between {min} and {max} inclusive"))
}

impl Config {
    /// The configuration from the flags, over the config file's values (if `--config`), over the defaults.
    pub fn from_args(a: &ServerArgs) -> Result<Config, ConfigError> {
        let mut c = Config::default();
        if let Some(path) = &a.config {
            c.load_file(path)?;
        }
        if let Some(v) = &a.dir {
            c.dir = v.clone();
        }
        if let Some(v) = a.port {
            c.port = v;
        }
        if let Some(v) = &a.bind {
            c.bind = v.clone();
        }
        if let Some(v) = a.appendfsync {
            c.appendfsync = v;
        }
        if let Some(v) = &a.requirepass {
            c.requirepass = Some(v.clone()).filter(|p| !p.is_empty());
        }
        if let Some(v) = a.maxclients {
            if v == 0 {
                return Err(ConfigError("--maxclients must be at least 1".into()));
            }
            c.maxclients = v;
        }
        if let Some(v) = a.timeout {
            c.timeout = (v > 0).then(|| Duration::from_secs(v));
        }
        if let Some(v) = a.protected_mode {
            c.protected_mode = v;
        }
        if let Some(v) = a.block_cache_size {
            c.block_cache_size = Some(v);
        }
        if let Some(v) = a.use_direct_reads {
            c.use_direct_reads = v;
        }
        if let Some(v) = a.read_offload {
            c.read_offload = v;
        }
        if let Some(v) = a.cluster_enabled {
            c.redis.insert("cluster-enabled".into(), yes_no(v));
            c.not_applied.retain(|(n, _)| n != "cluster-enabled");
        }
        if let Some(v) = a.cluster_port {
            c.redis.insert("cluster-port".into(), v.to_string());
            c.not_applied.retain(|(n, _)| n != "cluster-port");
        }
        Ok(c)
    }

    /// Reads a config file into this configuration.
    pub fn load_file(&mut self, path: &Path) -> Result<(), ConfigError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| ConfigError(format!("reading the config file {}: {e}", path.display())))?;
        self.apply_file(&text)
            .map_err(|(line, msg)| ConfigError(format!("bad directive in {} line {line}: {msg}", path.display())))?;
        self.config_file = Some(path.to_path_buf());
        Ok(())
    }

    /// Applies a config file's text; the error names the line (1-based) and why. An `include`d file's
    /// error names the `include` line and, in the message, the included file's line.
    pub fn apply_file(&mut self, text: &str) -> Result<(), (usize, String)> {
        self.apply_text(text, &mut FileState::default())
    }

    fn apply_text(&mut self, text: &str, state: &mut FileState) -> Result<(), (usize, String)> {
        for (no, line) in text.lines().enumerate() {
            let no = no + 1;
            let Some((name, args)) = parse_line(line).map_err(|e| (no, e))? else { continue };
            self.apply_directive(&name, &args, state).map_err(|e| (no, format!("'{}': {e}", line.trim())))?;
        }
        Ok(())
    }

    /// The one warning the start prints for the directives that change nothing here (`None`: there are none).
    pub fn not_applied_warning(&self) -> Option<String> {
        if self.not_applied.is_empty() {
            return None;
        }
        let list: Vec<&str> = self.not_applied.iter().map(|(_, text)| text.as_str()).collect();
        Some(format!(
            "# warning: {} Redis directive(s) of the config file accepted but not applied by ShaleDB (CONFIG GET \
             shows their values): {}",
            list.len(),
            list.join(", ")
        ))
    }

    /// Notes a directive that changes nothing here, once per name, unless its value is what this server
    /// does anyway.
    fn note_not_applied(&mut self, name: &str, value: &str) {
        let canonical = redis::canonical(name).unwrap_or(name);
        if SAME_AS_SHALEDB.iter().any(|(n, v)| *n == canonical && value.eq_ignore_ascii_case(v)) {
            self.not_applied.retain(|(n, _)| n != name);
            return;
        }
        let text = match canonical {
            "daemonize" => "daemonize yes (the server stays in the foreground: run it under a supervisor)".into(),
            "appendonly" => "appendonly no (every write goes to the WAL)".into(),
            "save" => "save (no snapshots: SAVE and BGSAVE make a checkpoint when asked)".into(),
            "maxmemory" | "maxmemory-policy" => format!("{name} (no eviction: keys live on disk)"),
            _ => name.to_string(),
        };
        match self.not_applied.iter_mut().find(|(n, _)| n == name) {
            Some(entry) => entry.1 = text,
            None => self.not_applied.push((name.to_string(), text)),
        }
    }

    /// One `directive value...` line of a config file.
    fn apply_directive(&mut self, name: &str, args: &[String], state: &mut FileState) -> Result<(), String> {
        let name = name.to_ascii_lowercase();
        let wrong_args = || Err("wrong number of arguments".to_string());
        match name.as_str() {
            "include" => {
                let [path] = args else { return wrong_args() };
                return self.include(path, state);
            }
            "sentinel" => return Err("a Redis Sentinel directive: this is not a Sentinel".into()),
            "rename-command" if args.len() != 2 => return wrong_args(),
            "user" | "loadmodule" if args.is_empty() => return wrong_args(),
            "rename-command" | "user" | "loadmodule" => {
                self.note_not_applied(&name, "");
                return Ok(());
            }
            // Deprecated: Redis 7.0 accepts and ignores them too.
            "lua-replicate-commands" | "list-max-ziplist-entries" | "list-max-ziplist-value" => {
                if args.len() != 1 {
                    return wrong_args();
                }
                self.note_not_applied(&name, &args[0]);
                return Ok(());
            }
            // Redis listens on every address given (a leading `-` marks one that may be missing): the first
            // is used here.
            "bind" => {
                let Some(first) = args.first() else { return wrong_args() };
                self.bind = first.trim_start_matches('-').to_string();
                self.not_applied.retain(|(n, _)| n != "bind");
                if args.len() > 1 {
                    let text = format!("bind (only {} is used)", self.bind);
                    self.not_applied.push(("bind".into(), text));
                }
                return Ok(());
            }
            _ => {}
        }
        let Some(canonical) = redis::canonical(&name) else {
            return Err("unknown directive (not a Redis 7.0 directive)".into());
        };
        let value = if redis::MULTI_WORD.contains(&canonical) {
            // Separate words, or one quoted value holding them (as CONFIG REWRITE writes it).
            let joined = args.join(" ");
            if canonical == "save" {
                // The file's first `save` replaces the default, the next ones add to it; `save ""` clears.
                let before = if std::mem::replace(&mut state.save_started, true) {
                    self.get("save").unwrap_or_default()
                } else {
                    String::new()
                };
                if joined.trim().is_empty() {
                    String::new()
                } else {
                    format!("{before} {joined}").trim().to_string()
                }
            } else {
                joined
            }
        } else {
            let [value] = args else { return wrong_args() };
            value.clone()
        };
        match self.set_value(canonical, &value, true) {
            Ok(()) => {}
            Err(SetError::Unknown) => return Err("unknown directive (not a Redis 7.0 directive)".into()),
            Err(SetError::Immutable) => return Err("can't be set".into()),
            Err(SetError::Invalid(why)) => return Err(why),
        }
        if !PARAMETERS.contains(&canonical) && !CLUSTER_PARAMETERS.contains(&canonical) {
            let stored = self.get(canonical).unwrap_or_default();
            self.note_not_applied(&name, &stored);
        }
        Ok(())
    }

    /// `include FILE`: the file's directives, in place.
    fn include(&mut self, path: &str, state: &mut FileState) -> Result<(), String> {
        if state.depth >= MAX_INCLUDE_DEPTH {
            return Err(format!("includes nested more than {MAX_INCLUDE_DEPTH} deep (does a file include itself?)"));
        }
        let text = std::fs::read_to_string(path).map_err(|e| format!("reading {path}: {e}"))?;
        state.depth += 1;
        let r = self.apply_text(&text, state);
        state.depth -= 1;
        r.map_err(|(line, msg)| format!("in {path} line {line}: {msg}"))
    }

    /// True when the server runs as a member of a replica group (`cluster-enabled yes`).
    pub fn cluster_enabled(&self) -> bool {
        self.redis.get("cluster-enabled").is_some_and(|v| v.eq_ignore_ascii_case("yes"))
    }

    /// The port of the node-to-node transport: `cluster-port`, or (when 0) the client port + 10000, Redis
    /// Cluster's bus-port rule; a result above 65535 is refused.
    pub fn cluster_bus_port(&self) -> Result<u16, ConfigError> {
        let set: u32 = self.redis.get("cluster-port").and_then(|v| v.parse().ok()).unwrap_or(0);
        if set != 0 {
            return u16::try_from(set).map_err(|_| ConfigError(format!("cluster-port {set} is above 65535")));
        }
        let bus = u32::from(self.port) + 10000;
        u16::try_from(bus).map_err(|_| {
            ConfigError(format!(
                "the cluster bus port would be port {} + 10000 = {bus}, above 65535: choose a port up to 55535 or \
                 set --cluster-port",
                self.port
            ))
        })
    }

    /// The value of a parameter as `CONFIG GET` prints it (`None`: no such parameter).
    pub fn get(&self, name: &str) -> Option<String> {
        Some(match name {
            "appendfsync" => self.appendfsync.name().into(),
            "requirepass" => self.requirepass.clone().unwrap_or_default(),
            "maxclients" => self.maxclients.to_string(),
            "timeout" => self.timeout.map_or(0, |t| t.as_secs()).to_string(),
            "proto-max-bulk-len" => self.limits.max_bulk_len.to_string(),
            "client-query-buffer-limit" => self.query_buffer_limit.to_string(),
            "port" => self.port.to_string(),
            "bind" => self.bind.clone(),
            "dir" => std::path::absolute(&self.dir).unwrap_or_else(|_| self.dir.clone()).display().to_string(),
            "protected-mode" => yes_no(self.protected_mode),
            "databases" => crate::keys::DATABASES.to_string(),
            // In a replica group: the bus port in use (what `shaledb cluster create` dials).
            "cluster-port" if self.cluster_enabled() => match self.cluster_bus_port() {
                Ok(p) => p.to_string(),
                Err(_) => "0".into(),
            },
            // Redis's others: the value stored, else the default (they change nothing here).
            _ => {
                let canonical = redis::canonical(name)?;
                self.redis.get(canonical).cloned().unwrap_or_else(|| redis::default_of(canonical).to_string())
            }
        })
    }

    /// Sets a parameter (`CONFIG SET`, or a config file line when `at_start`). The caller applies the live
    /// effects (`appendfsync` in the commit step).
    pub fn set_value(&mut self, name: &str, value: &str, at_start: bool) -> Result<(), SetError> {
        let invalid_int = || SetError::Invalid("argument couldn't be parsed into an integer".into());
        match name {
            "appendfsync" => {
                self.appendfsync = Appendfsync::parse(value).ok_or_else(|| {
                    SetError::Invalid("argument(s) must be one of the following: always, everysec, no".into())
                })?;
            }
            "requirepass" => self.requirepass = Some(value.to_string()).filter(|p| !p.is_empty()),
            "maxclients" => {
                let n: u64 = value.parse().map_err(|_| invalid_int())?;
                if n == 0 || n > i64::MAX as u64 {
                    return Err(range_error(1, i64::MAX as u64));
                }
                self.maxclients = n.try_into().map_err(|_| range_error(1, usize::MAX as u64))?;
            }
            "timeout" => {
                let n: u64 = value.parse().map_err(|_| invalid_int())?;
                if n > i32::MAX as u64 {
                    return Err(range_error(0, i32::MAX as u64));
                }
                self.timeout = (n > 0).then(|| Duration::from_secs(n));
            }
            "proto-max-bulk-len" | "client-query-buffer-limit" => {
                let n =
                    parse_memory(value).ok_or_else(|| SetError::Invalid("argument must be a memory value".into()))?;
                if !(MIN_LIMIT..=i64::MAX as u64).contains(&n) {
                    return Err(range_error(MIN_LIMIT, i64::MAX as u64));
                }
                let n: usize = n.try_into().map_err(|_| range_error(MIN_LIMIT, usize::MAX as u64))?;
                if name == "proto-max-bulk-len" {
                    self.limits.max_bulk_len = n;
                } else {
                    self.query_buffer_limit = n;
                }
            }
            // Checked on every accepted connection (server.rs), so it may change at run time.
            "protected-mode" => {
                self.protected_mode =
                    parse_yes_no(value).map_err(|_| SetError::Invalid("argument must be 'yes' or 'no'".into()))?
            }
            // At run time CONFIG SET moves the listener (server.rs, `rebind`).
            "port" => self.port = value.parse().map_err(|_| range_error(0, 65535))?,
            "bind" => self.bind = value.to_string(),
            "dir" if at_start => self.dir = PathBuf::from(value),
            "databases" if at_start => {
                let n: u64 = value.parse().map_err(|_| invalid_int())?;
                if n != u64::from(crate::keys::DATABASES) {
                    return Err(SetError::Invalid(format!(
                        "this server has {} databases (only {} is accepted)",
                        crate::keys::DATABASES,
                        crate::keys::DATABASES
                    )));
                }
            }
            // Fixed for the life of the server; setting the value it already has changes nothing (as a client
            // restoring what `CONFIG GET *` gave it does).
            "dir" | "databases" if self.get(name).as_deref() == Some(value) => {}
            "dir" | "databases" => return Err(SetError::Immutable),
            // Redis's others: checked, stored and shown by CONFIG GET; they change nothing here.
            _ => {
                let canonical = redis::canonical(name).ok_or(SetError::Unknown)?;
                if !at_start && redis::IMMUTABLE.contains(&canonical) {
                    return Err(SetError::Immutable);
                }
                let old = self.get(canonical).unwrap_or_default();
                let v = redis::normalise(canonical, value, &old).map_err(SetError::Invalid)?;
                self.redis.insert(canonical.to_string(), v);
            }
        }
        Ok(())
    }

    /// The config file rewritten with the current values (`CONFIG REWRITE`): lines of directives this
    /// server manages get their current value (a repeated one is dropped), comments and blank lines stay,
    /// and the parameters whose value differs from the default but that the file did not name are appended.
    pub fn rewrite_file(&self, old: &str) -> String {
        let defaults = Config { dir: self.dir.clone(), ..Config::default() };
        let mut seen = std::collections::HashSet::new();
        let mut out = String::new();
        for line in old.lines() {
            let name = match parse_line(line) {
                Ok(Some((name, _))) => name.to_ascii_lowercase(),
                _ => {
                    out.push_str(line);
                    out.push('\n');
                    continue;
                }
            };
            // Lines that are not parameters (`include`, `rename-command`, `user` ...) stay as they are.
            let Some(v) = self.get(&name) else {
                out.push_str(line);
                out.push('\n');
                continue;
            };
            let canonical = redis::canonical(&name).unwrap_or(&name).to_string();
            if !seen.insert(canonical) {
                continue;
            }
            out.push_str(&format!("{name} {}\n", quote(&v)));
        }
        let mut header = false;
        let canonical_names = PARAMETERS.iter().copied().chain(redis::PARAMETERS.iter().map(|(n, _)| *n));
        for name in canonical_names {
            if seen.contains(name) || self.get(name) == defaults.get(name) {
                continue;
            }
            seen.insert(name.to_string());
            if !header {
                out.push_str("# Generated by CONFIG REWRITE\n");
                header = true;
            }
            out.push_str(&format!("{name} {}\n", quote(&self.get(name).unwrap_or_default())));
        }
        out
    }
}

/// A value as a config file writes it: bare when it is a plain word, else double-quoted with escapes.
fn quote(v: &str) -> String {
    if !v.is_empty() && v.chars().all(|c| c.is_ascii_graphic() && c != '"' && c != '\'' && c != '\\') {
        return v.to_string();
    }
    let mut q = String::from("\"");
    for c in v.chars() {
        match c {
            '"' => q.push_str("\\\""),
            '\\' => q.push_str("\\\\"),
            '\n' => q.push_str("\\n"),
            '\r' => q.push_str("\\r"),
            '\t' => q.push_str("\\t"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => q.push_str(&format!("\\x{:02x}", c as u32)),
            c => q.push(c),
        }
    }
    q.push('"');
    q
}

/// One config file line: `None` for a blank or comment line, else the directive and its arguments, split
/// as redis.conf is (quotes and escapes as in inline commands).
fn parse_line(line: &str) -> Result<Option<(String, Vec<String>)>, String> {
    let t = line.trim();
    if t.is_empty() || t.starts_with('#') {
        return Ok(None);
    }
    let words = crate::resp::split_words(t.as_bytes()).map_err(|_| "unbalanced quotes in configuration line")?;
    let mut words = words.into_iter().map(|w| String::from_utf8_lossy(&w).into_owned());
    let Some(name) = words.next() else { return Ok(None) };
    Ok(Some((name, words.collect())))
}

#[cfg(test)]
mod tests;
