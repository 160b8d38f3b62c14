//! Server configuration: command-line flags (`shaledb server --port ...`), a Redis-style config file
//! (`--config FILE`), and the values `CONFIG GET/SET` read and change at run time.
//!
//! The config file holds `directive value...` lines as redis.conf does: `#` starts a comment line, values may
//! be "double quoted" (with escapes) or 'single quoted'. The directives are the flags' names: `port`, `bind`
//! (its first address is used), `dir`, `appendfsync`, `requirepass`, `maxclients`, `timeout`,
//! `protected-mode`, `proto-max-bulk-len`, `client-query-buffer-limit`, plus the fixed ones Redis clients
//! know (`appendonly yes`, `save ""`, `databases 16`, `maxmemory 0`, `maxmemory-policy noeviction`), accepted
//! when they say what this server does. An unknown directive or a bad value stops the start, naming the line.
//! Flags given on the command line win over the file.

use crate::resp::Limits;
use crate::store::Appendfsync;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// `shaledb server` flags. A flag not given takes the config file's value, else the default shown.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct ServerArgs {
    /// Redis-style config file (`directive value` lines) read at start; flags win over it.
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

/// Every parameter `CONFIG GET` knows, in the order it lists them.
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
    "save",
    "appendonly",
    "databases",
    "maxmemory",
    "maxmemory-policy",
];

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

    /// Applies a config file's text; the error names the line (1-based) and why.
    pub fn apply_file(&mut self, text: &str) -> Result<(), (usize, String)> {
        for (no, line) in text.lines().enumerate() {
            let no = no + 1;
            let Some((name, args)) = parse_line(line).map_err(|e| (no, e))? else { continue };
            self.apply_directive(&name, &args).map_err(|e| (no, format!("'{}': {e}", line.trim())))?;
        }
        Ok(())
    }

    /// One `directive value...` line of a config file.
    fn apply_directive(&mut self, name: &str, args: &[String]) -> Result<(), String> {
        let name = name.to_ascii_lowercase();
        match name.as_str() {
            // Redis's bind takes several addresses: the first is used.
            "bind" if !args.is_empty() => {
                self.bind = args[0].clone();
                Ok(())
            }
            "save" if args.iter().all(|a| a.is_empty()) => Ok(()),
            _ if args.len() != 1 => {
                if PARAMETERS.contains(&name.as_str()) {
                    Err("wrong number of arguments".into())
                } else {
                    Err("unknown directive".into())
                }
            }
            _ => match self.set_value(&name, &args[0], true) {
                Ok(()) => Ok(()),
                Err(SetError::Unknown) => Err("unknown directive".into()),
                Err(SetError::Immutable) => Err("can't be set".into()),
                Err(SetError::Invalid(why)) => Err(why),
            },
        }
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
            // Fixed: no snapshots (the WAL is the persistence), always the append-only log, 16 databases,
            // no memory limit, never evicts.
            "save" => String::new(),
            "appendonly" => "yes".into(),
            "databases" => crate::keys::DATABASES.to_string(),
            "maxmemory" => "0".into(),
            "maxmemory-policy" => "noeviction".into(),
            _ => return None,
        })
    }

    /// Sets a parameter (`CONFIG SET`, or a config file line when `at_start`). The caller applies the live
    /// effects (`appendfsync` on the commit thread).
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
            "port" | "bind" | "dir" | "protected-mode" if at_start => match name {
                "port" => self.port = value.parse().map_err(|_| range_error(0, 65535))?,
                "bind" => self.bind = value.to_string(),
                "dir" => self.dir = PathBuf::from(value),
                _ => {
                    self.protected_mode =
                        parse_yes_no(value).map_err(|_| SetError::Invalid("argument must be 'yes' or 'no'".into()))?
                }
            },
            "port" | "bind" | "dir" | "protected-mode" | "databases" => return Err(SetError::Immutable),
            // The fixed ones: accepted when they say what this server does.
            "save" | "appendonly" | "maxmemory" | "maxmemory-policy" => {
                let ok = match name {
                    "save" => value.trim().is_empty(),
                    "appendonly" => value.eq_ignore_ascii_case("yes"),
                    "maxmemory" => parse_memory(value) == Some(0),
                    _ => value.eq_ignore_ascii_case("noeviction"),
                };
                if !ok {
                    return Err(SetError::Invalid(
                        match name {
                            "save" => {
                                "this server has no snapshots: every write goes to the WAL (only \"\" is accepted)"
                            }
                            "appendonly" => "this server always writes the WAL (only yes is accepted)",
                            "maxmemory" => "this server never evicts keys (only 0 is accepted)",
                            _ => "this server never evicts keys (only noeviction is accepted)",
                        }
                        .into(),
                    ));
                }
            }
            _ => return Err(SetError::Unknown),
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
            if !seen.insert(name.clone()) {
                continue;
            }
            match self.get(&name) {
                Some(v) => out.push_str(&format!("{name} {}\n", quote(&v))),
                None => {
                    out.push_str(line);
                    out.push('\n');
                }
            }
        }
        let mut header = false;
        for name in PARAMETERS {
            if seen.contains(*name) || self.get(name) == defaults.get(name) {
                continue;
            }
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
mod tests {
    use super::*;

    #[test]
    fn file_directives_quotes_and_comments() {
        let mut c = Config::default();
        c.apply_file(
            "# a comment\n\nport 7000\nbind 127.0.0.1 ::1\nrequirepass \"p w\\x21\"\nappendfsync everysec\n\
             maxclients 5\ntimeout 30\nprotected-mode no\nproto-max-bulk-len 2mb\nclient-query-buffer-limit 1gb\n\
             dir '/tmp/x y'\nsave \"\"\nappendonly yes\n",
        )
        .unwrap();
        assert_eq!((c.port, c.bind.as_str()), (7000, "127.0.0.1"));
        assert_eq!(c.requirepass.as_deref(), Some("p w!"));
        assert_eq!(c.appendfsync, Appendfsync::Everysec);
        assert_eq!((c.maxclients, c.timeout, c.protected_mode), (5, Some(Duration::from_secs(30)), false));
        assert_eq!((c.limits.max_bulk_len, c.query_buffer_limit), (2 << 20, 1 << 30));
        assert_eq!(c.dir, PathBuf::from("/tmp/x y"));
    }

    #[test]
    fn a_bad_line_is_an_error_naming_it() {
        let mut c = Config::default();
        let (line, msg) = c.apply_file("port 1\n# ok\nloglevel notice\n").unwrap_err();
        assert_eq!(line, 3);
        assert!(msg.contains("unknown directive"), "{msg}");
        assert_eq!(c.apply_file("appendfsync sometimes").unwrap_err().0, 1);
        assert_eq!(c.apply_file("port 1 2").unwrap_err().1, "'port 1 2': wrong number of arguments");
        assert_eq!(c.apply_file("maxclients 0").unwrap_err().0, 1);
        assert_eq!(c.apply_file("appendonly no").unwrap_err().0, 1);
        assert_eq!(c.apply_file("requirepass \"abc").unwrap_err().0, 1);
    }

    #[test]
    fn flags_win_over_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("shaledb.conf");
        std::fs::write(&path, "port 7001\nmaxclients 7\nappendfsync no\n").unwrap();
        let a = ServerArgs { config: Some(path.clone()), port: Some(7002), ..ServerArgs::default() };
        let c = Config::from_args(&a).unwrap();
        assert_eq!((c.port, c.maxclients, c.appendfsync), (7002, 7, Appendfsync::No));
        assert_eq!(c.config_file.as_deref(), Some(path.as_path()));
        std::fs::write(&path, "port 7001\nnosuch 1\n").unwrap();
        let e = Config::from_args(&a).unwrap_err().to_string();
        assert!(e.contains("line 2") && e.contains("nosuch"), "{e}");
        let missing = ServerArgs { config: Some(dir.path().join("nope.conf")), ..ServerArgs::default() };
        assert!(Config::from_args(&missing).is_err());
    }

    #[test]
    fn set_checks_values_like_redis() {
        let mut c = Config::default();
        assert_eq!(c.set_value("nosuch", "1", false), Err(SetError::Unknown));
        assert_eq!(c.set_value("port", "1", false), Err(SetError::Immutable));
        assert_eq!(c.set_value("databases", "1", false), Err(SetError::Immutable));
        assert!(matches!(c.set_value("maxclients", "x", false), Err(SetError::Invalid(_))));
        assert!(matches!(c.set_value("proto-max-bulk-len", "1k", false), Err(SetError::Invalid(_))));
        c.set_value("proto-max-bulk-len", "4mb", false).unwrap();
        assert_eq!(c.get("proto-max-bulk-len").as_deref(), Some("4194304"));
        c.set_value("save", "", false).unwrap();
        assert!(c.set_value("save", "900 1", false).is_err());
        assert_eq!(parse_memory("2gb"), Some(2 << 30));
        assert_eq!(parse_memory("99999999999999999999gb"), None);
        assert_eq!(parse_memory("gb"), None);
    }

    #[test]
    fn rewrite_keeps_comments_and_updates_values() {
        let mut c = Config::default();
        c.apply_file("# keep me\nmaxclients 5\nmaxclients 6\n").unwrap();
        c.set_value("maxclients", "9", false).unwrap();
        c.set_value("requirepass", "a b", false).unwrap();
        let text = c.rewrite_file("# keep me\nmaxclients 5\nmaxclients 6\n");
        assert_eq!(text, "# keep me\nmaxclients 9\n# Generated by CONFIG REWRITE\nrequirepass \"a b\"\n");
        let mut d = Config::default();
        d.apply_file(&text).unwrap();
        assert_eq!((d.maxclients, d.requirepass.as_deref()), (9, Some("a b")));
    }
}
