//! Server configuration: command-line flags (`shaledb server --port ...`), and the values `CONFIG GET/SET`
//! read and change at run time.

use crate::resp::Limits;
use crate::store::Appendfsync;
use std::path::PathBuf;
use std::time::Duration;

/// `shaledb server` flags.
#[derive(clap::Args, Debug, Clone)]
pub struct ServerArgs {
    /// Database directory (created if missing; must hold a ShaleDB database or nothing).
    #[arg(long, default_value = "./shaledb-data")]
    pub dir: PathBuf,
    /// TCP port (0 picks a free one and prints it).
    #[arg(long, default_value_t = 6379)]
    pub port: u16,
    /// Address to listen on. A non-loopback address needs --requirepass or --protected-mode no.
    #[arg(long, default_value = "127.0.0.1")]
    pub bind: String,
    /// When a write is acknowledged: always (after its fsync, group commit), everysec, no.
    #[arg(long, default_value = "always", value_parser = parse_appendfsync)]
    pub appendfsync: Appendfsync,
    /// Password every client must give with AUTH or HELLO before other commands.
    #[arg(long)]
    pub requirepass: Option<String>,
    /// Most connected clients; one more is answered `-ERR max number of clients reached` and closed.
    #[arg(long, default_value_t = 10000)]
    pub maxclients: usize,
    /// Close a client idle for this many seconds (0 = never).
    #[arg(long, default_value_t = 0)]
    pub timeout: u64,
    /// Refuse non-loopback clients when no password is set (Redis's protected mode): yes or no.
    #[arg(long, default_value = "yes", value_parser = parse_yes_no)]
    pub protected_mode: bool,
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
        }
    }
}

impl Config {
    pub fn from_args(a: &ServerArgs) -> Config {
        Config {
            dir: a.dir.clone(),
            bind: a.bind.clone(),
            port: a.port,
            appendfsync: a.appendfsync,
            requirepass: a.requirepass.clone().filter(|p| !p.is_empty()),
            maxclients: a.maxclients,
            timeout: (a.timeout > 0).then(|| Duration::from_secs(a.timeout)),
            protected_mode: a.protected_mode,
            ..Config::default()
        }
    }
}
