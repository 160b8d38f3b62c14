//! The listener, one task per connection, sessions, and shutdown.
//!
//! A connection reads into its buffer, parses every complete request in it (pipelining), executes them in
//! order and writes all their replies with one write. Consecutive write commands go to the commit step as
//! one job; a read after a write waits for that job first, so a client always reads its own writes.

use crate::commands::{self, flags, Handler, Spec};
use crate::commit::{Job, Store};
use crate::config::Config;
use crate::resp::{Args, Parser, ProtocolError, Reply};
use bytes::BytesMut;
use parking_lot::{Mutex, RwLock};
use shaledb::{Db, Options};
use std::collections::{HashMap, VecDeque};
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, Notify};

use commands::server_cmds::monitor;

/// How long a command on a slot frozen for a move waits for the hand-over before it is answered `-TRYAGAIN`.
const FROZEN_WAIT: Duration = Duration::from_secs(2);

/// Why the server could not start or stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error("{0}")]
    Config(String),
    #[error("opening the database in {dir}: {cause}")]
    Open { dir: String, cause: shaledb::Error },
    #[error("listening on {addr}: {cause}")]
    Listen { addr: String, cause: std::io::Error },
    #[error("starting the runtime: {0}")]
    Runtime(std::io::Error),
    #[error("closing the database: {0}")]
    Close(shaledb::Error),
}

/// Most requests executed per round before their replies are written.
const MAX_BATCH: usize = 1024;
/// Replies gathered before they are written even if requests remain (bounds a connection's output buffer).
const MAX_OUTPUT: usize = 16 << 20;
/// Bytes of replies a client has not read yet above which its connection stops running and reading its
/// requests until they drain (the client's own writes then block: back-pressure, not a disconnect).
/// Redis has no such cap under its default `client-output-buffer-limit normal 0 0 0` and buffers without
/// bound; this one keeps a client that never reads to about this much server memory (plus one round's
/// replies, 16 MiB). A configured normal-class hard or soft limit disconnects as in Redis.
pub const MAX_PENDING_OUTPUT: usize = 64 << 20;
/// Messages of a subscription (pub/sub, MONITOR, tracking) move into the connection's output only while less
/// than this waits there: the rest stays in the subscription's own queue, where its limit applies
/// (`client-output-buffer-limit pubsub`, the tracking inbox cap), so a subscriber that stops reading is
/// disconnected by that limit rather than held in the output buffer.
const DRAIN_BELOW: usize = 1 << 20;
/// Free room a connection's read buffer has before each read (Redis's `PROTO_IOBUF_LEN`).
const READ_CHUNK: usize = 16 << 10;
/// A client idle this long gives its empty read buffer back (`qbuf=0 qbuf-free=0` in CLIENT LIST), as Redis
/// frees the query buffer of a client idle for more than 2 seconds.
const QUERY_BUFFER_IDLE: Duration = Duration::from_secs(2);

/// Server-wide counters (`INFO stats`).
#[derive(Default, Debug)]
pub struct ServerStats {
    pub connections_received: AtomicU64,
    pub rejected_connections: AtomicU64,
    pub commands_processed: AtomicU64,
    pub net_input_bytes: AtomicU64,
    pub net_output_bytes: AtomicU64,
    /// Commands processed during the last whole second (`instantaneous_ops_per_sec`).
    pub ops_last_second: AtomicU64,
    /// Read commands that needed the disk, so ran again on tokio's blocking pool (`reads_offloaded`, issue 41).
    pub reads_offloaded: AtomicU64,
}

impl ServerStats {
    /// `CONFIG RESETSTAT`.
    pub fn reset(&self) {
        for c in [
            &self.connections_received,
            &self.rejected_connections,
            &self.commands_processed,
            &self.net_input_bytes,
            &self.net_output_bytes,
            &self.ops_last_second,
            &self.reads_offloaded,
        ] {
            c.store(0, Ordering::Relaxed);
        }
    }
}

/// A connected client as `CLIENT LIST` shows it.
#[derive(Debug)]
pub struct ClientEntry {
    pub id: u64,
    pub addr: SocketAddr,
    pub laddr: SocketAddr,
    pub created: Instant,
    pub name: Mutex<Option<bytes::Bytes>>,
    pub db: AtomicUsize,
    /// The last command run, and its subcommand for a container command (`cmd=client|list`).
    pub last_command: Mutex<(&'static str, Option<bytes::Bytes>)>,
    /// Bytes of the request being run, while it runs (`qbuf=` of `CLIENT LIST` for the client asking).
    pub qbuf: AtomicUsize,
    /// Bytes of replies waiting for the client to read them (`omem=` of `CLIENT LIST`); kept up to date
    /// only while some wait, so the request path does not write it.
    pub omem: AtomicUsize,
    /// Free room in the connection's read buffer (`qbuf-free=`), as of its last wait for input.
    pub qbuf_free: AtomicUsize,
    pub last_active: Mutex<Instant>,
    /// Set by `CLIENT KILL`; the connection closes at its next chance.
    pub killed: AtomicBool,
    /// Wakes a blocking command's wait (BLPOP ..., WAIT, CLIENT PAUSE) when the client is killed: a permit, so a
    /// wait that starts after the kill ends at once.
    pub kill: Notify,
    /// Wakes the connection's own wait for input: on kill, on shutdown and (through its tracking inbox, which
    /// shares it) on an invalidation message. Separate from `kill`, whose permit must stay for a blocking
    /// command's wait; lock-free, because the connection polls it on every request (`wakeup.rs`).
    pub wake: Arc<crate::wakeup::Wakeup>,
    /// Set with `wake` by the server's once-a-second check when the client idled long enough to give back its
    /// read buffer.
    pub buffer_check: AtomicBool,
    /// While the client is blocked (BLPOP, XREAD BLOCK, WAIT ...): `CLIENT UNBLOCK` sends through it
    /// (`true`: answer with the UNBLOCKED error, `false`: as on a timeout).
    pub unblock: Mutex<Option<tokio::sync::oneshot::Sender<bool>>>,
    /// The socket's file descriptor (-1 where there is none).
    pub fd: i64,
    /// `CLIENT SETINFO LIB-NAME / LIB-VER`.
    pub lib_name: Mutex<Option<bytes::Bytes>>,
    pub lib_ver: Mutex<Option<bytes::Bytes>>,
    /// RESP version (`resp=` in `CLIENT LIST`).
    pub resp: std::sync::atomic::AtomicU8,
    /// `CLIENT NO-EVICT on` (flag `e`), `CLIENT NO-TOUCH on` (flag `T`): accepted; there is no eviction and
    /// no LRU clock to leave untouched.
    pub no_evict: AtomicBool,
    pub no_touch: AtomicBool,
    /// The user the client authenticated as (`None`: `default`), for `CLIENT LIST` and for closing the
    /// connections of a deleted user.
    pub user: Mutex<Option<Arc<crate::acl::UserHandle>>>,
    /// CLIENT TRACKING: the mode as the connection sees it, and its inbox of invalidation messages.
    pub tracking: crate::tracking::ClientTracking,
}

impl ClientEntry {
    pub fn new(id: u64, addr: SocketAddr, laddr: SocketAddr, fd: i64) -> ClientEntry {
        let tracking = crate::tracking::ClientTracking::default();
        ClientEntry {
            id,
            addr,
            laddr,
            created: Instant::now(),
            name: Mutex::new(None),
            db: AtomicUsize::new(0),
            last_command: Mutex::new(("NULL", None)),
            qbuf: AtomicUsize::new(0),
            omem: AtomicUsize::new(0),
            qbuf_free: AtomicUsize::new(0),
            last_active: Mutex::new(Instant::now()),
            killed: AtomicBool::new(false),
            kill: Notify::new(),
            wake: tracking.inbox.wake.clone(),
            buffer_check: AtomicBool::new(false),
            unblock: Mutex::new(None),
            fd,
            lib_name: Mutex::new(None),
            lib_ver: Mutex::new(None),
            resp: std::sync::atomic::AtomicU8::new(2),
            no_evict: AtomicBool::new(false),
            no_touch: AtomicBool::new(false),
            user: Mutex::new(None),
            tracking,
        }
    }

    /// Marks the client as blocked until the returned receiver is dropped: `CLIENT UNBLOCK` answers
    /// through it. Call [`ClientEntry::end_block`] when the wait ends.
    pub fn begin_block(&self) -> tokio::sync::oneshot::Receiver<bool> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        *self.unblock.lock() = Some(tx);
        rx
    }

    /// The client is no longer blocked.
    pub fn end_block(&self) {
        self.unblock.lock().take();
    }

    /// `CLIENT UNBLOCK`: true if the client was blocked (it then answers as on a timeout, or with the
    /// UNBLOCKED error when `error`).
    pub fn unblock(&self, error: bool) -> bool {
        self.unblock.lock().take().is_some_and(|tx| tx.send(error).is_ok())
    }

    /// Asks the connection to close at its next chance (`CLIENT KILL`).
    pub fn kill(&self) {
        self.killed.store(true, Ordering::Release);
        self.kill.notify_one();
        self.wake.wake();
    }
}

/// Everything connections share.
pub struct Shared {
    pub store: Arc<Store>,
    /// Reads run from memory first and go to the blocking pool when they need the disk (`--read-offload`,
    /// issue 41); false: every read runs on the connection's task, disk reads included.
    pub read_offload: bool,
    pub config: RwLock<Config>,
    pub clients: Mutex<HashMap<u64, Arc<ClientEntry>>>,
    pub next_client_id: AtomicU64,
    pub started: Instant,
    pub stats: ServerStats,
    /// Set to `true` to stop the server (SHUTDOWN, SIGTERM, [`RunningServer::shutdown`]).
    pub shutdown: watch::Sender<bool>,
    /// The address the listener was bound to at start.
    pub local_addr: SocketAddr,
    /// The port the listener is bound to now (`CONFIG SET port` moves it; `INFO server`).
    pub listen_port: std::sync::atomic::AtomicU16,
    /// A listener `CONFIG SET port` / `bind` opened, for the accept loop to take in place of its own.
    new_listener: Mutex<Option<TcpListener>>,
    new_listener_ready: Notify,
    /// Pub/Sub channels and patterns (in memory; the store's, which publishes keyspace events there).
    pub pubsub: Arc<commands::pubsub::Registry>,
    /// SAVE and BGSAVE checkpoints (`LASTSAVE`, `INFO persistence`).
    pub saves: Arc<commands::server_cmds::Saves>,
    /// Command counters, slow log, latency monitor, MONITOR clients.
    pub intro: commands::server_cmds::Introspection,
    /// ACL users, their permissions and the ACL log.
    pub acl: Arc<crate::acl::Acl>,
    /// CLIENT PAUSE: the pause in force, which a connection waits out before running a command it holds.
    pub pause: commands::server_cmds::pause::Pause,
}

impl Shared {
    /// Asks the server to stop: no new connections, in-flight commands finish, the engine is closed.
    pub fn request_shutdown(&self) {
        // A script in an endless loop would hold the commit step (and so the shutdown) forever.
        self.store.scripts.abort_for_shutdown();
        let _ = self.shutdown.send(true);
        // Connections wait on their own wake-up, not on the shutdown signal (see `connection`).
        for c in self.clients.lock().values() {
            c.wake.wake();
        }
    }

    /// Disconnects another client (`CLIENT KILL`, ACL changes): it leaves `CLIENT LIST` and `INFO clients` at
    /// once, as in Redis, and its task closes the socket at its next chance.
    pub fn disconnect(&self, c: &ClientEntry) {
        c.kill();
        self.clients.lock().remove(&c.id);
    }
}

/// One connection's state.
#[derive(Debug)]
pub struct Session {
    pub id: u64,
    pub addr: SocketAddr,
    pub db_index: u8,
    pub authenticated: bool,
    /// The user the connection runs as (`default` until AUTH / HELLO AUTH).
    pub user: Arc<crate::acl::UserHandle>,
    /// RESP version for replies (2 until `HELLO 3`).
    pub proto: u8,
    pub name: Option<bytes::Bytes>,
    /// Close once the replies of this round are written (QUIT, CLIENT KILL of itself).
    pub close_after_reply: bool,
    /// Close without writing anything more (SHUTDOWN: Redis sends no reply).
    pub close_now: bool,
    /// `CLIENT REPLY OFF`: no reply is sent until `CLIENT REPLY ON`.
    pub replies_off: bool,
    /// `CLIENT REPLY SKIP`: the next command's reply is not sent.
    pub skip_next_reply: bool,
    /// `CLIENT REPLY SKIP` was this command: its own reply is not sent either.
    pub skip_this_reply: bool,
    /// `CLIENT REPLY ON` was this command: its reply is sent even right after a `CLIENT REPLY SKIP`.
    pub force_reply: bool,
    pub entry: Arc<ClientEntry>,
    /// The transaction being queued (between MULTI and EXEC/DISCARD).
    pub multi: Option<commands::multi::MultiState>,
    /// The client watches keys (WATCH): the commit step holds them until EXEC, DISCARD, UNWATCH, RESET or
    /// the connection's end.
    pub watching: bool,
    /// Pub/Sub subscriptions and the queue of messages to write (commands/pubsub.rs).
    pub pubsub: Option<Box<commands::pubsub::State>>,
    /// MONITOR: the queue of command lines to write (commands/server_cmds/monitor.rs).
    pub monitor: Option<Arc<commands::server_cmds::monitor::Feed>>,
    /// `READONLY` (a replica group member, issue 43): reads on a member that does not lead run on its own,
    /// possibly stale, state instead of being redirected to the leader. `READWRITE` clears it.
    pub readonly: bool,
    /// A replica group member: the log index of this connection's last write (the leader's highest committed
    /// index when its reply came back), what `WAIT` waits for the followers to match.
    pub wait_index: u64,
    /// A cluster member inside MULTI: the slot of the keys queued so far (they must share one, as in Redis
    /// Cluster, or the command is answered `-CROSSSLOT` and the transaction fails).
    pub multi_slot: Option<u16>,
}

impl Session {
    /// Sets the client name (`CLIENT SETNAME`, `HELLO ... SETNAME`); `None` clears it.
    pub fn set_name(&mut self, name: Option<bytes::Bytes>) {
        *self.entry.name.lock() = name.clone();
        self.name = name;
    }

    pub fn set_proto(&mut self, proto: u8) {
        self.proto = proto;
        self.entry.resp.store(proto, Ordering::Relaxed);
    }
}

/// A server started in this process (for tests and embedding).
pub struct RunningServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
    thread: Option<std::thread::JoinHandle<Result<(), ServerError>>>,
}

impl RunningServer {
    /// Opens the database, binds, and serves on a background thread. `config.port = 0` picks a free port.
    pub fn start(config: Config) -> Result<RunningServer, ServerError> {
        let (tx, rx) = std::sync::mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("shaledb-server".into())
            .spawn(move || {
                let rt = runtime()?;
                rt.block_on(async move {
                    let (shared, listener) = match bind(config).await {
                        Ok(x) => x,
                        Err(e) => {
                            let msg = e.to_string();
                            let _ = tx.send(Err(e));
                            return Err(ServerError::Config(msg));
                        }
                    };
                    let _ = tx.send(Ok(shared.clone()));
                    serve(shared, listener).await
                })
            })
            .map_err(ServerError::Runtime)?;
        match rx.recv() {
            Ok(Ok(shared)) => Ok(RunningServer { addr: shared.local_addr, shared, thread: Some(thread) }),
            Ok(Err(e)) => {
                let _ = thread.join();
                Err(e)
            }
            Err(_) => match thread.join() {
                Ok(Err(e)) => Err(e),
                _ => Err(ServerError::Config("the server thread stopped before it started".into())),
            },
        }
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }

    /// Stops the server as SHUTDOWN does and waits for it.
    pub fn shutdown(mut self) -> Result<(), ServerError> {
        self.shared.request_shutdown();
        self.join()
    }

    /// Waits until the server stops by itself (SHUTDOWN).
    pub fn join(&mut self) -> Result<(), ServerError> {
        match self.thread.take().map(|t| t.join()) {
            Some(Ok(r)) => r,
            Some(Err(_)) => Err(ServerError::Config("the server thread panicked".into())),
            None => Ok(()),
        }
    }
}

impl Drop for RunningServer {
    fn drop(&mut self) {
        if self.thread.is_some() {
            self.shared.request_shutdown();
            let _ = self.join();
        }
    }
}

/// The server's tokio runtime: one thread (the one that calls `block_on`), which runs the listener and every
/// connection's task.
///
/// Why one thread, and `current_thread` rather than `multi_thread`: the order of commands from different
/// connections. A client that writes a request on connection A and then, without waiting for the reply, one
/// on connection B expects A's to run first (Redis's event loop reads the sockets in the order the kernel
/// made them readable); Redis's tests rely on it (`$rd blpop k 0` then `r lpush k v`; a blocking XREADGROUP
/// then `r del` of its stream). That order is the order in which epoll reports the sockets, so a connection
/// task must (1) be polled in the order its socket was reported and (2) reach the commit step (submit its
/// job) in that same poll; the only other condition is that no task reads its socket before epoll reported
/// the new data, which `read_some` keeps. The multi-threaded scheduler breaks (1) twice: its LIFO slot runs
/// the task woken last first (A and B woken in one driver turn run B, A), and a second worker steals and
/// runs the other task in parallel. The current-thread scheduler runs woken tasks first in, first out, on
/// one thread. Measured with `tests/server/ordering.rs`'s rounds (a BLPOP or a blocking XREADGROUP on A, a
/// SET or DEL of its key on B right after, 400 rounds each, on the 2-core machine under a load of 5-7): the
/// multi-threaded runtime ran B first in 2-60% of the rounds (most runs 35-60%; one worker: 8-80%, as the
/// LIFO slot then always applies), the current-thread runtime with the old reads 8-81%, with `read_some` as
/// it is now in none of 14 runs, two busy loops beside it or not (redis-server 7.0.15 itself: 1-3%, 13%
/// with the busy loops). `tokio::runtime::Builder::disable_lifo_slot` (behind `--cfg tokio_unstable`) was
/// not needed: the current-thread scheduler has no LIFO slot. The cost, measured with the debug build on
/// the loaded machine (geometric means of alternated pairs, each pair within +-25%, +-50% pipelined):
/// `redis-benchmark -t ping,set,get -c 50`, six pairs, gave 1.07x the multi-threaded runtime's PING
/// (inline), 1.00x (multibulk), 1.10x SET and 1.05x GET; with `-P 16`, five pairs, 1.14x SET and 0.82x GET
/// (the commit step still does every write on its own core, but reads now share one thread).
/// NB: a command that takes long on a connection's task (a keyspace scan for INFO, KEYS, SAVE's checkpoint)
/// now holds up the other clients while it runs, as in Redis; `tokio::task::block_in_place` panics on this
/// runtime.
fn runtime() -> Result<tokio::runtime::Runtime, ServerError> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        // The blocking pool's threads (tokio's default: up to 512, started on demand, gone after 10 s idle):
        // groups with a script or EXEC, reads that needed the disk (one thread per read in flight, so at
        // most one per connection), closing the database at shutdown.
        .thread_name("shaledb-blocking")
        .build()
        .map_err(ServerError::Runtime)
}

/// Runs the server in the foreground until SHUTDOWN, SIGTERM or SIGINT (`shaledb server`).
pub fn run(config: Config) -> Result<(), ServerError> {
    let rt = runtime()?;
    rt.block_on(async move {
        let (shared, listener) = bind(config).await?;
        let s = shared.clone();
        tokio::spawn(async move {
            wait_for_signal().await;
            eprintln!("# signal received: shutting down");
            s.request_shutdown();
        });
        serve(shared, listener).await
    })
}

#[cfg(unix)]
async fn wait_for_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let (Ok(mut term), Ok(mut int)) = (signal(SignalKind::terminate()), signal(SignalKind::interrupt())) else {
        return std::future::pending().await;
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
}

#[cfg(not(unix))]
async fn wait_for_signal() {
    let _ = tokio::signal::ctrl_c().await;
}

fn is_loopback(bind: &str) -> bool {
    match bind.parse::<IpAddr>() {
        Ok(ip) => ip.is_loopback(),
        Err(_) => bind == "localhost",
    }
}

/// True when `ip` is a loopback address (an IPv4 one written as IPv6 too).
fn is_loopback_ip(ip: IpAddr) -> bool {
    ip.to_canonical().is_loopback()
}

/// Redis's protected mode for one accepted connection: a client from a non-loopback address is refused
/// while protected mode is on and no password is set. Judged on the configuration when the connection
/// arrives, so `CONFIG SET requirepass ""` or `CONFIG SET protected-mode yes` apply to the next connections.
pub fn protected_mode_denies(peer: IpAddr, config: &Config) -> bool {
    config.protected_mode && config.requirepass.is_none() && !is_loopback_ip(peer)
}

/// Redis's `-DENIED` reply to a connection refused by protected mode (the text clients show).
pub const DENIED: &str = "-DENIED Redis is running in protected mode because protected mode is enabled and no \
password is set for the default user. In this mode connections are only accepted from the loopback interface. \
If you want to connect from external computers to Redis you may adopt one of the following solutions: 1) Just \
disable protected mode sending the command 'CONFIG SET protected-mode no' from the loopback interface by \
connecting to Redis from the same host the server is running, however MAKE SURE Redis is not publicly \
accessible from internet if you do so. Use CONFIG REWRITE to make this change permanent. 2) Alternatively you \
can just disable the protected mode by editing the Redis configuration file, and setting the protected mode \
option to 'no', and then restarting the server. 3) If you started the server manually just for testing, \
restart it with the '--protected-mode no' option. 4) Setup a an authentication password for the default user. \
NOTE: You only need to do one of the above things in order for the server to start accepting connections from \
the outside.\r\n";

/// Redis's protected mode, checked before the database is opened or any socket bound: a non-loopback
/// address needs a password unless protected mode is off. (Each connection is checked again when it is
/// accepted: [`protected_mode_denies`].)
pub fn check_protected_mode(config: &Config) -> Result<(), ServerError> {
    if !is_loopback(&config.bind) && config.requirepass.is_none() && config.protected_mode {
        return Err(ServerError::Config(format!(
            "refusing to listen on {} without a password (protected mode): set --requirepass, or \
             --protected-mode no if the network is trusted",
            config.bind
        )));
    }
    Ok(())
}

/// Checks the configuration, opens the database and binds the listener.
async fn bind(config: Config) -> Result<(Arc<Shared>, TcpListener), ServerError> {
    check_protected_mode(&config)?;
    let acl = Arc::new(crate::acl::Acl::from_config(&config).map_err(ServerError::Config)?);
    if config.maxclients == 0 {
        return Err(ServerError::Config("--maxclients must be at least 1".into()));
    }
    // The listener first: a start that cannot listen (port taken) fails before the database is created or
    // opened, and leaves nothing behind.
    let addr = format!("{}:{}", config.bind, config.port);
    let listener =
        TcpListener::bind(&addr).await.map_err(|source| ServerError::Listen { addr: addr.clone(), cause: source })?;
    let local_addr =
        listener.local_addr().map_err(|source| ServerError::Listen { addr: addr.clone(), cause: source })?;
    // What this start creates is removed again if the open fails (dropped after the database).
    let created = FreshDir::note(&config.dir);
    let store = if config.cluster_enabled() {
        // A replica group member (issue 43): the data is the raft node's state machine under `dir`.
        let cluster = crate::cluster::Cluster::start(&config).await.map_err(ServerError::Config)?;
        created.keep();
        Store::start_in_group(cluster, config.appendfsync)
    } else {
        crate::cluster::check_dir(&config.dir, false).map_err(ServerError::Config)?;
        let db = open_db(&config)?;
        created.keep();
        Store::start_on_runtime(db, config.appendfsync)
    };
    eprintln!(
        "# shaledb server {} on {} (dir {}, appendfsync {})",
        env!("CARGO_PKG_VERSION"),
        local_addr,
        config.dir.display(),
        config.appendfsync.name()
    );
    if let Some(warning) = config.not_applied_warning() {
        eprintln!("{warning}");
    }
    let (shutdown, _) = watch::channel(false);
    let intro = commands::server_cmds::Introspection::default();
    intro.apply(&config);
    store.scripts.set_observers(commands::scripting::Observers {
        commands: intro.commands.clone(),
        monitors: intro.monitors.clone(),
        acl: Some(acl.clone()),
    });
    commands::server_cmds::apply_knobs(&store, &config, |name| {
        config.get(name).as_deref() != Some(crate::config::redis::default_of(name))
    });
    let pubsub = store.pubsub.clone();
    let read_offload = config.read_offload;
    let shared = Arc::new(Shared {
        store,
        read_offload,
        config: RwLock::new(config),
        clients: Mutex::new(HashMap::new()),
        next_client_id: AtomicU64::new(1),
        started: Instant::now(),
        stats: ServerStats::default(),
        shutdown,
        local_addr,
        listen_port: std::sync::atomic::AtomicU16::new(local_addr.port()),
        new_listener: Mutex::new(None),
        new_listener_ready: Notify::new(),
        pubsub,
        saves: Default::default(),
        intro,
        acl,
        pause: Default::default(),
    });
    Ok((shared, listener))
}

/// The directories and files a start creates for a new database, removed again when the start fails: the
/// database directory and its missing parents when it did not exist, or what appeared in it when it was an
/// empty directory. A directory that held anything is never touched.
struct FreshDir {
    /// The topmost directory this start will create (it did not exist).
    created_root: Option<std::path::PathBuf>,
    /// The database directory existed and was empty.
    was_empty: Option<std::path::PathBuf>,
}

impl FreshDir {
    fn note(dir: &std::path::Path) -> FreshDir {
        let mut fresh = FreshDir { created_root: None, was_empty: None };
        match std::fs::read_dir(dir) {
            Ok(mut entries) => {
                if entries.next().is_none() {
                    fresh.was_empty = Some(dir.to_path_buf());
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let abs = std::path::absolute(dir).unwrap_or_else(|_| dir.to_path_buf());
                let mut root = abs.clone();
                while let Some(parent) = root.parent() {
                    if parent.as_os_str().is_empty() || parent.exists() {
                        break;
                    }
                    root = parent.to_path_buf();
                }
                fresh.created_root = Some(root);
            }
            Err(_) => {}
        }
        fresh
    }

    /// The start succeeded: keep everything.
    fn keep(mut self) {
        self.created_root = None;
        self.was_empty = None;
    }
}

impl Drop for FreshDir {
    fn drop(&mut self) {
        if let Some(root) = self.created_root.take() {
            if root.exists() {
                let _ = std::fs::remove_dir_all(&root);
            }
        }
        if let Some(dir) = self.was_empty.take() {
            if let Ok(entries) = std::fs::read_dir(&dir) {
                for e in entries.flatten() {
                    let p = e.path();
                    let _ = if p.is_dir() { std::fs::remove_dir_all(&p) } else { std::fs::remove_file(&p) };
                }
            }
        }
    }
}

/// Opens (creating if missing) the database directory; a directory holding anything else is refused.
fn open_db(config: &Config) -> Result<Db, ServerError> {
    let dir = config.dir.clone();
    let err = |source| ServerError::Open { dir: dir.display().to_string(), cause: source };
    let mut opts = Options {
        create_if_missing: true,
        use_direct_reads: config.use_direct_reads,
        // Commands read the keys they write (meta records, counters, collection members) and clients read
        // what they just wrote: point lookups in the memtables are the common case (docs/perf/memtable-point-index.md).
        memtable_rep: shaledb::MemTableRep::IndexedSkipList,
        ..Options::default()
    };
    if let Some(n) = config.block_cache_size {
        opts.block_cache_size = n;
    }
    if let Some(tune) = config.engine_options {
        tune(&mut opts);
    }
    // A plain database (`shaledb put`, the engine API) is refused before anything is written (layout.rs).
    crate::layout::check_before_open(&dir, &opts).map_err(ServerError::Config)?;
    let db = Db::open(&dir, opts).map_err(err)?;
    if let Err(why) = crate::layout::mark_on_open(&db, &dir) {
        let _ = db.close();
        return Err(ServerError::Config(why));
    }
    Ok(db)
}

/// `CONFIG SET port` / `bind` at run time, as Redis does it: binds the new address now (so a port in use is
/// an error of the CONFIG SET, which then changes nothing) and hands the listener to the accept loop, which
/// closes the old one. Connections already accepted stay. `Err`: Redis's text for the failure (the cause
/// is logged). REQUIRES: called on the server's runtime.
pub fn rebind(shared: &Shared, bind: &str, port: u16, port_changed: bool) -> Result<(), &'static str> {
    let failed = if port_changed {
        "Unable to listen on this port. Check server logs."
    } else {
        "Failed to bind to specified addresses."
    };
    if port == 0 {
        // Redis closes its TCP listener for port 0; this server has no other way in, so it keeps it.
        eprintln!("# CONFIG SET port 0: refused (this server listens only on TCP)");
        return Err(failed);
    }
    let addr = format!("{bind}:{port}");
    let listener = std::net::TcpListener::bind(&addr)
        .and_then(|l| l.set_nonblocking(true).map(|()| l))
        .and_then(TcpListener::from_std)
        .map_err(|e| {
            eprintln!("# CONFIG SET: could not listen on {addr}: {e}");
            failed
        })?;
    let port = listener.local_addr().map(|a| a.port()).unwrap_or(port);
    eprintln!("# listening on {addr} (CONFIG SET)");
    *shared.new_listener.lock() = Some(listener);
    shared.listen_port.store(port, Ordering::Relaxed);
    shared.new_listener_ready.notify_one();
    Ok(())
}

/// Accepts connections until shutdown, then drains and closes everything.
async fn serve(shared: Arc<Shared>, mut listener: TcpListener) -> Result<(), ServerError> {
    crate::commit::spawn_commit_task(&shared.store);
    let mut stop = shared.shutdown.subscribe();
    let mut tasks = tokio::task::JoinSet::new();
    let mut second = tokio::time::interval(Duration::from_secs(1));
    let mut last_count = 0u64;
    loop {
        tokio::select! {
            _ = stop.wait_for(|s| *s) => break,
            accepted = listener.accept() => {
                let (stream, addr) = match accepted {
                    Ok(x) => x,
                    Err(e) => {
                        // Out of file descriptors and the like: wait a little rather than spin.
                        eprintln!("# accept failed: {e}");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                shared.stats.connections_received.fetch_add(1, Ordering::Relaxed);
                let s = shared.clone();
                // Ids in accept order, as Redis gives them (taken in the task, two connections accepted
                // back to back could swap theirs).
                let id = shared.next_client_id.fetch_add(1, Ordering::Relaxed);
                tasks.spawn(async move { connection(s, stream, addr, id).await });
            }
            Some(_) = tasks.join_next(), if !tasks.is_empty() => {}
            _ = shared.new_listener_ready.notified() => {
                // CONFIG SET port / bind: the old listener closes here.
                if let Some(new) = shared.new_listener.lock().take() {
                    listener = new;
                }
            }
            _ = second.tick() => {
                let n = shared.stats.commands_processed.load(Ordering::Relaxed);
                shared.stats.ops_last_second.store(n.saturating_sub(last_count), Ordering::Relaxed);
                last_count = n;
                ask_idle_clients_to_release_buffers(&shared);
            }
        }
    }
    drop(listener);
    // In-flight commands finish; idle connections see the shutdown and close.
    while tasks.join_next().await.is_some() {}
    shared.store.stop_commit_task().await;
    shared.store.shutdown();
    eprintln!("# shutting down: the commit step is drained, closing the database");
    if let Some(cluster) = shared.store.cluster().cloned() {
        // A BGSAVE still writing its checkpoint holds the engine: it finishes first; the node then stops
        // (its log is synced on every append, so nothing acknowledged depends on this stop).
        let saves = shared.saves.clone();
        let _ = tokio::task::spawn_blocking(move || saves.wait_idle()).await;
        cluster.shutdown().await;
        eprintln!("# bye");
        return Ok(());
    }
    let db = shared.store.db();
    let saves = shared.saves.clone();
    // A BGSAVE still writing its checkpoint holds the engine: it finishes first.
    let db = tokio::task::spawn_blocking(move || {
        saves.wait_idle();
        db
    })
    .await
    .map_err(|e| ServerError::Config(format!("waiting for a background save: {e}")))?;
    tokio::task::spawn_blocking(move || match Arc::try_unwrap(db) {
        Ok(db) => db.close(),
        // Someone still holds the engine (an embedding test): flush and let the last owner close it.
        Err(db) => db.flush(),
    })
    .await
    .map_err(|e| ServerError::Config(format!("closing the database: {e}")))?
    .map_err(ServerError::Close)?;
    eprintln!("# bye");
    Ok(())
}

/// Wakes each client idle for [`QUERY_BUFFER_IDLE`] that still holds read-buffer room, so its connection gives
/// the buffer back (Redis's clientsCron does the same). Done here once a second for all clients rather than by
/// a timer in every connection, which was polled on every request (issue 41).
fn ask_idle_clients_to_release_buffers(shared: &Shared) {
    let clients = shared.clients.lock();
    for c in clients.values() {
        if c.qbuf_free.load(Ordering::Relaxed) > 0 && c.last_active.lock().elapsed() >= QUERY_BUFFER_IDLE {
            c.buffer_check.store(true, Ordering::Release);
            c.wake.wake();
        }
    }
}

async fn connection(shared: Arc<Shared>, mut stream: TcpStream, addr: SocketAddr, id: u64) {
    let _ = stream.set_nodelay(true);
    let (maxclients, requirepass, limits, denied) = {
        let c = shared.config.read();
        (c.maxclients, c.requirepass.is_some(), c.limits, protected_mode_denies(addr.ip(), &c))
    };
    if denied {
        shared.stats.rejected_connections.fetch_add(1, Ordering::Relaxed);
        let _ = stream.write_all(DENIED.as_bytes()).await;
        return;
    }
    #[cfg(unix)]
    let fd = std::os::fd::AsRawFd::as_raw_fd(&stream) as i64;
    #[cfg(not(unix))]
    let fd = -1;
    let entry = Arc::new(ClientEntry::new(id, addr, stream.local_addr().unwrap_or(shared.local_addr), fd));
    let admitted = {
        let mut clients = shared.clients.lock();
        let ok = clients.len() < maxclients;
        if ok {
            clients.insert(id, entry.clone());
        }
        ok
    };
    if !admitted {
        shared.stats.rejected_connections.fetch_add(1, Ordering::Relaxed);
        let _ = stream.write_all(b"-ERR max number of clients reached\r\n").await;
        return;
    }
    let mut session = Session {
        id,
        addr,
        db_index: 0,
        authenticated: !requirepass && !shared.acl.auth_required(),
        user: shared.acl.default_user(),
        proto: 2,
        name: None,
        close_after_reply: false,
        close_now: false,
        replies_off: false,
        skip_next_reply: false,
        skip_this_reply: false,
        force_reply: false,
        entry: entry.clone(),
        multi: None,
        watching: false,
        pubsub: None,
        monitor: None,
        readonly: false,
        wait_index: 0,
        multi_slot: None,
    };
    let stop = shared.shutdown.subscribe();
    let mut parser = Parser::new(limits);
    let mut rbuf = BytesMut::with_capacity(16 << 10);
    let mut wbuf = BytesMut::with_capacity(16 << 10);
    let mut queue: VecDeque<Args> = VecDeque::new();
    // Kept across requests so its vectors keep their room (always empty between `execute` calls).
    let mut pending = Pending::default();
    // When the pending replies first went over the soft output limit (`client-output-buffer-limit normal`).
    let mut over_soft_since: Option<Instant> = None;
    let mut published_omem = 0;
    let mut published_qbuf_free = 0;
    // The read buffer was given back while the client idled (it gets room again when input comes).
    let mut released = false;
    let mut buffer_ticked = false;
    let mut idle_since = Instant::now();
    'conn: loop {
        // Replies the client has not read yet past the cap: neither run nor read more until they drain.
        let backlog = wbuf.len() >= MAX_PENDING_OUTPUT;
        let mut protocol_error: Option<ProtocolError> = None;
        let mut read_while_blocked = false;
        if !backlog {
            // Parse what the buffer holds (up to a round's worth).
            while queue.len() < MAX_BATCH {
                match parser.next(&mut rbuf) {
                    Ok(Some(args)) => queue.push_back(args),
                    Ok(None) => break,
                    Err(e) => {
                        protocol_error = Some(e);
                        break;
                    }
                }
            }
            // A blocked command (BLPOP ...) reads the client's next requests into `rbuf` while it waits.
            let unparsed = rbuf.len();
            if !queue.is_empty() {
                execute(&mut session, &shared, &mut queue, &mut pending, &mut wbuf, &mut stream, &mut rbuf).await;
            }
            read_while_blocked = rbuf.len() > unparsed;
        }
        if let Some(e) = &protocol_error {
            if queue.is_empty() {
                Reply::err(format!("Protocol error: {e}")).encode(session.proto, &mut wbuf);
                let _ = write_out_before_close(&shared, &mut stream, &mut wbuf).await;
                break 'conn;
            }
        }
        // What the socket takes now is written; the rest waits while the loop goes on reading.
        if !wbuf.is_empty() && write_some(&shared, &stream, &mut wbuf).is_err() {
            break 'conn;
        }
        if session.close_after_reply || session.close_now || entry.killed.load(Ordering::Acquire) {
            if !entry.killed.load(Ordering::Acquire) {
                let _ = write_out_before_close(&shared, &mut stream, &mut wbuf).await;
            }
            break 'conn;
        }
        if !wbuf.is_empty() && over_output_limit(&shared, wbuf.len(), &mut over_soft_since) {
            eprintln!(
                "# closing client id={id} addr={addr}: {} bytes of replies not read, over \
                 client-output-buffer-limit normal",
                wbuf.len()
            );
            break 'conn;
        }
        if !backlog && (!queue.is_empty() || protocol_error.is_some() || read_while_blocked) {
            continue;
        }
        // CONFIG SET applies to connected clients too.
        let (limits, query_limit, timeout) = {
            let c = shared.config.read();
            (c.limits, c.query_buffer_limit, c.timeout)
        };
        parser.set_limits(limits);
        if rbuf.len() + parser.held_bytes() > query_limit {
            Reply::err("Protocol error: query buffer limit reached, closing the connection")
                .encode(session.proto, &mut wbuf);
            let _ = write_out_before_close(&shared, &mut stream, &mut wbuf).await;
            eprintln!("# closing client {addr}: query buffer over {query_limit} bytes");
            break 'conn;
        }
        if *stop.borrow() && !parser.in_request() && rbuf.is_empty() {
            break 'conn;
        }
        // Room for a full read of READ_CHUNK bytes (as Redis sizes its query buffer), except in a buffer
        // released while the client idles (read_some gives it room again when input comes).
        if !released && rbuf.capacity() - rbuf.len() < READ_CHUNK {
            rbuf.reserve(READ_CHUNK);
        }
        if rbuf.capacity() - rbuf.len() != published_qbuf_free {
            published_qbuf_free = rbuf.capacity() - rbuf.len();
            entry.qbuf_free.store(published_qbuf_free, Ordering::Relaxed);
        }
        // The idle timeout counts from the last wake-up that was not the buffer check's tick.
        if timeout.is_some() && !std::mem::take(&mut buffer_ticked) {
            idle_since = Instant::now();
        }
        let idle = async {
            match timeout {
                Some(t) => tokio::time::sleep_until((idle_since + t).into()).await,
                None => std::future::pending().await,
            }
        };
        if wbuf.len() != published_omem {
            published_omem = wbuf.len();
            entry.omem.store(published_omem, Ordering::Relaxed);
        }
        let reading = wbuf.len() < MAX_PENDING_OUTPUT;
        let draining = wbuf.len() < DRAIN_BELOW;
        // Invalidations that came while replies were backed up (their wake-up was taken then).
        if draining && !crate::tracking::drain(&session, &mut wbuf) {
            break 'conn;
        }
        let (mut rd, wr) = stream.split();
        tokio::select! {
            r = read_some(&mut rd, &mut rbuf), if reading => match r {
                Ok(0) | Err(_) => break 'conn,
                Ok(n) => {
                    released = false;
                    shared.stats.net_input_bytes.fetch_add(n as u64, Ordering::Relaxed);
                }
            },
            r = wr.as_ref().writable(), if !wbuf.is_empty() => {
                if r.is_err() || write_some(&shared, wr.as_ref(), &mut wbuf).is_err() {
                    break 'conn;
                }
            }
            // CLIENT KILL, the server's shutdown (judged at the top of the loop), CLIENT TRACKING's messages:
            // one lock-free wake-up instead of a waiter on each (issue 41: this wait is polled per request).
            _ = entry.wake.wait() => {
                if entry.killed.load(Ordering::Acquire) {
                    break 'conn;
                }
                if entry.buffer_check.swap(false, Ordering::AcqRel) {
                    buffer_ticked = true;
                    if rbuf.is_empty()
                        && rbuf.capacity() > 0
                        && !parser.in_request()
                        && entry.last_active.lock().elapsed() >= QUERY_BUFFER_IDLE
                    {
                        rbuf = BytesMut::new();
                        released = true;
                    }
                }
                if draining && !crate::tracking::drain(&session, &mut wbuf) {
                    break 'conn;
                }
            }
            _ = commands::pubsub::ready(commands::pubsub::subscriber(&session)), if draining => {
                if !commands::pubsub::drain(&session, &mut wbuf) {
                    break 'conn;
                }
            }
            _ = monitor::ready(monitor::feed_of(&session)), if draining => {
                if !monitor::drain(&session, &mut wbuf) {
                    break 'conn;
                }
            }
            _ = idle => break 'conn,
        }
    }
    commands::multi::unwatch_session(&mut session, &shared);
    commands::pubsub::unsubscribe_all(&mut session, &shared);
    crate::tracking::disconnect(&session, &shared);
    if session.monitor.take().is_some() {
        shared.intro.monitors.remove(id);
    }
    shared.clients.lock().remove(&id);
    shared.acl.forget_client(id);
}

/// Reads what the socket has into `rbuf`, waiting until it has something.
///
/// Through `AsyncRead` (tokio's `poll_read`), which forgets the socket's readiness after a read that did not
/// fill the buffer: the next read then waits for epoll to report new data rather than trying the socket
/// at once. NB: a read that does not wait (`readable()` then `try_read_buf`, as this function once did)
/// takes a request that arrived after another connection's, while that connection's task waits in the run
/// queue with the earlier request, and submits it first (see [`runtime`]: 8-81% of the rounds of
/// `tests/server/ordering.rs` reordered, 0 with this read).
async fn read_some(rd: &mut tokio::net::tcp::ReadHalf<'_>, rbuf: &mut BytesMut) -> std::io::Result<usize> {
    if rbuf.capacity() - rbuf.len() < READ_CHUNK {
        rbuf.reserve(READ_CHUNK);
    }
    rd.read_buf(rbuf).await
}

/// Writes what the socket takes now without waiting; the rest of `wbuf` stays for later. An error means
/// the connection is gone.
fn write_some(shared: &Shared, stream: &TcpStream, wbuf: &mut BytesMut) -> std::io::Result<()> {
    while !wbuf.is_empty() {
        match stream.try_write(wbuf) {
            Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
            Ok(n) => {
                shared.stats.net_output_bytes.fetch_add(n as u64, Ordering::Relaxed);
                bytes::Buf::advance(wbuf, n);
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    // A large burst's buffer is not kept for the connection's life.
    if wbuf.capacity() > (4 << 20) {
        *wbuf = BytesMut::with_capacity(16 << 10);
    }
    Ok(())
}

/// True when the replies waiting for the client (`pending` bytes) are over `client-output-buffer-limit
/// normal` as Redis judges it: over the hard limit, or over the soft one for longer than its seconds (0: no
/// such limit). Called only while replies wait, so the configuration is not read on the request path.
fn over_output_limit(shared: &Shared, pending: usize, over_soft_since: &mut Option<Instant>) -> bool {
    let Some(value) = shared.config.read().get("client-output-buffer-limit") else { return false };
    let Some((hard, soft, secs)) = normal_output_limits(&value) else { return false };
    let pending = pending as u64;
    if hard > 0 && pending >= hard {
        return true;
    }
    if soft > 0 && pending >= soft {
        let since = *over_soft_since.get_or_insert_with(Instant::now);
        return since.elapsed() > Duration::from_secs(secs);
    }
    *over_soft_since = None;
    false
}

/// The `normal` class of a `client-output-buffer-limit` value (`class hard soft seconds ...`, bytes).
fn normal_output_limits(value: &str) -> Option<(u64, u64, u64)> {
    let words: Vec<&str> = value.split_whitespace().collect();
    let group = words.chunks(4).find(|g| g.len() == 4 && g[0].eq_ignore_ascii_case("normal"))?;
    Some((group[1].parse().ok()?, group[2].parse().ok()?, group[3].parse().ok()?))
}

/// Writes every pending reply before the connection closes (QUIT, a protocol error ...), giving a client
/// that does not read a few seconds at most.
async fn write_out_before_close(shared: &Shared, stream: &mut TcpStream, wbuf: &mut BytesMut) -> std::io::Result<()> {
    match tokio::time::timeout(Duration::from_secs(5), write_out(shared, stream, wbuf)).await {
        Ok(r) => r,
        Err(_) => Err(std::io::ErrorKind::TimedOut.into()),
    }
}

async fn write_out(shared: &Shared, stream: &mut TcpStream, wbuf: &mut BytesMut) -> std::io::Result<()> {
    let n = wbuf.len();
    let r = stream.write_all(wbuf).await;
    shared.stats.net_output_bytes.fetch_add(n as u64, Ordering::Relaxed);
    wbuf.clear();
    if wbuf.capacity() > (4 << 20) {
        *wbuf = BytesMut::with_capacity(16 << 10);
    }
    r
}

/// The bytes a request takes on the wire in RESP (`qbuf=` of `CLIENT LIST` while it runs).
fn request_bytes(args: &Args) -> usize {
    let digits = |n: usize| n.checked_ilog10().unwrap_or(0) as usize + 1;
    3 + digits(args.len()) + args.iter().map(|a| 5 + digits(a.len()) + a.len()).sum::<usize>()
}

/// Executes queued requests in order, appending their replies to `out`, until the queue is empty or the
/// output is large enough to write first. Each command is timed and recorded ([`Shared::intro`]).
async fn execute(
    s: &mut Session,
    shared: &Arc<Shared>,
    queue: &mut VecDeque<Args>,
    pending: &mut Pending,
    out: &mut BytesMut,
    stream: &mut TcpStream,
    rbuf: &mut BytesMut,
) {
    let intro = &shared.intro;
    while let Some(args) = queue.pop_front() {
        // CLIENT TRACKING: invalidations that arrived so far go before this command's reply.
        if !crate::tracking::drain(s, out) {
            s.close_now = true;
            break;
        }
        shared.stats.commands_processed.fetch_add(1, Ordering::Relaxed);
        // CLIENT REPLY OFF / SKIP: the command runs, its reply is dropped.
        let skipped = std::mem::take(&mut s.skip_next_reply);
        let silent = s.replies_off || skipped;
        let spec = match check(s, shared, &args) {
            Ok(spec) => spec,
            Err(reply) => {
                let known = args.first().and_then(|n| commands::lookup(n));
                intro.commands.record_rejected(known, args.get(1).map(|a| &a[..]), &reply);
                commands::multi::queue_failed(s);
                // An EXEC refused (NOAUTH ...) discards the transaction, as Redis does.
                let reply = match known {
                    Some(k) if k.name == "exec" && s.multi.is_some() => {
                        commands::multi::exec_refused(s, shared, &reply)
                    }
                    _ => reply,
                };
                pending.flush(s, shared, out).await;
                if !silent {
                    reply.encode(s.proto, out);
                }
                continue;
            }
        };
        {
            let sub =
                (commands::server_cmds::stats::is_container(spec.name) && args.len() > 1).then(|| args[1].clone());
            *s.entry.last_command.lock() = (spec.name, sub);
        }
        // A replica group member (issue 43): data commands run on the leader, or are sent there (-MOVED);
        // reads on the leader outside the lease wait for a read-index round first.
        if let Some(cluster) = shared.store.cluster() {
            if s.multi.is_none() {
                s.multi_slot = None;
            }
            // The keys' slot (issue 44): one per command, and one per transaction; one database only.
            let slot = match crate::cluster::one_database_refusal(spec, &args) {
                Some(r) => Err(r),
                None => crate::cluster::slot_of(spec, &args),
            };
            let slot = slot.and_then(|slot| match (slot, s.multi.is_some()) {
                (Some(x), true) => match s.multi_slot {
                    Some(y) if y != x => Err(Reply::error(crate::cluster::CROSSSLOT)),
                    _ => {
                        s.multi_slot = Some(x);
                        Ok(Some(x))
                    }
                },
                (slot, _) => Ok(slot),
            });
            let mut refusal = match slot.as_ref().map(|slot| cluster.gate(spec, &args, s.readonly, *slot)) {
                Err(r) => Some(r.clone()),
                Ok(crate::cluster::Gate::Go) => None,
                Ok(crate::cluster::Gate::Refuse(r)) => Some(r),
                Ok(crate::cluster::Gate::Linearize) => {
                    // The writes before it are answered first (they renew the lease as they commit).
                    pending.flush(s, shared, out).await;
                    cluster.linearize(spec, &args).await.err()
                }
            };
            // A slot frozen for a move (issue 44): the command waits for the hand-over (a move's freeze lasts
            // the copy of its slots, usually well under a second) and is then run here or sent on with -MOVED,
            // as a client would have to retry it anyway; -TRYAGAIN only once FROZEN_WAIT has passed. Clients
            // that do not retry TRYAGAIN (go-redis pipelines) then see a short delay instead of an error.
            if let (Some(Reply::Error(e)), Ok(sl)) = (&refusal, &slot) {
                if e.starts_with("TRYAGAIN") {
                    pending.flush(s, shared, out).await;
                    let until = Instant::now() + FROZEN_WAIT;
                    while Instant::now() < until {
                        tokio::time::sleep(Duration::from_millis(10)).await;
                        match cluster.gate(spec, &args, s.readonly, *sl) {
                            crate::cluster::Gate::Refuse(Reply::Error(e)) if e.starts_with("TRYAGAIN") => {}
                            crate::cluster::Gate::Refuse(r) => {
                                refusal = Some(r);
                                break;
                            }
                            crate::cluster::Gate::Go => {
                                refusal = None;
                                break;
                            }
                            crate::cluster::Gate::Linearize => {
                                refusal = cluster.linearize(spec, &args).await.err();
                                break;
                            }
                        }
                    }
                }
            }
            if let Some(reply) = refusal {
                commands::multi::queue_failed(s);
                let reply = if spec.name == "exec" && s.multi.is_some() {
                    commands::multi::exec_refused(s, shared, &reply)
                } else {
                    reply
                };
                pending.flush(s, shared, out).await;
                intro.commands.record_rejected(Some(spec), args.get(1).map(|a| &a[..]), &reply);
                if !silent {
                    reply.encode(s.proto, out);
                }
                continue;
            }
        }
        let started = Instant::now();
        // -BUSY while a script runs too long; SCRIPT KILL, FUNCTION KILL/STATS on this task. (SHUTDOWN
        // inside MULTI is only refused: it must not stop a running script.)
        let busy = if s.multi.is_some() && spec.name == "shutdown" {
            None
        } else {
            commands::scripting::intercept(s, shared, spec, &args)
        };
        if let Some(mut reply) = busy {
            // Inside MULTI a refusal aborts the transaction; a refused EXEC discards it at once.
            if s.multi.is_some() && matches!(reply, Reply::Error(_)) {
                if spec.name == "exec" {
                    reply = commands::multi::exec_refused(s, shared, &reply);
                } else {
                    commands::multi::queue_failed(s);
                }
            }
            pending.flush(s, shared, out).await;
            intro.ran(s, spec, Some(&args), started.elapsed(), &reply, false);
            if !silent {
                reply.encode(s.proto, out);
            }
            continue;
        }
        // CLIENT PAUSE: a held command waits here, after the commands before it have run.
        if shared.pause.is_on() && shared.pause.holds(commands::server_cmds::pause::may_write(s, shared, spec, &args)) {
            pending.flush(s, shared, out).await;
            if !out.is_empty() && write_out(shared, stream, out).await.is_err() {
                s.close_now = true;
                break;
            }
            // A held client counts in INFO's blocked_clients, as Redis counts its postponed clients.
            let _blocked = shared.store.blocking.count_blocked();
            shared.pause.wait(commands::server_cmds::pause::may_write(s, shared, spec, &args), &shared.shutdown).await;
        }
        if let Some(replies) = commands::pubsub::intercept(s, shared, spec, &args) {
            pending.flush(s, shared, out).await;
            let reply = replies.first().cloned().unwrap_or(Reply::Ok);
            intro.ran(s, spec, Some(&args), started.elapsed(), &reply, false);
            // Subscription confirmations are pushes: sent even under CLIENT REPLY OFF, as in Redis.
            for r in replies {
                if !silent || matches!(r, Reply::Push(_)) {
                    r.encode(s.proto, out);
                }
            }
            continue;
        }
        // EXEC: its queued commands are recorded one by one with their replies.
        let queued: Option<Vec<Args>> =
            if spec.name == "exec" { s.multi.as_ref().map(|m| m.cmds.clone()) } else { None };
        let in_multi = s.multi.is_some();
        let user_spec = spec;
        // Kept only where the command leaves this function's hands (a write's job, a blocking wait, MULTI).
        let keep = spec.name == "exec"
            || (intro.wants_args() && (in_multi || spec.is_write() || spec.flags & flags::BLOCKING != 0));
        let user_args = keep.then(|| args.clone());
        let (spec, args) = match commands::multi::intercept(s, shared, spec, args) {
            commands::multi::Step::Run(spec, args) => (spec, args),
            commands::multi::Step::Reply(reply) => {
                pending.flush(s, shared, out).await;
                let queued_ok = matches!(&reply, Reply::Simple(q) if q == "QUEUED");
                if user_spec.name == "exec" || !in_multi {
                    intro.ran(s, user_spec, user_args.as_deref(), started.elapsed(), &reply, false);
                } else if !queued_ok {
                    intro.commands.record_rejected(Some(user_spec), None, &reply);
                }
                if !silent {
                    reply.encode(s.proto, out);
                }
                continue;
            }
        };
        // CLIENT TRACKING: the keys this command (or this EXEC's commands) reads, before it reads them.
        crate::tracking::before_command(s, shared, spec, &args, queued.as_deref());
        // BLPOP, XREAD BLOCK ...: may park the client until served or timed out (blocking.rs).
        if spec.flags & flags::BLOCKING != 0 {
            pending.flush(s, shared, out).await;
            // The replies before it reach the client before the wait.
            if !out.is_empty() && write_out(shared, stream, out).await.is_err() {
                s.close_now = true;
                break;
            }
            let started = Instant::now();
            let reply = crate::blocking::execute(s, shared, spec, args, stream, rbuf).await;
            note_wait_index(s, shared);
            if s.close_now {
                break;
            }
            intro.ran(s, user_spec, user_args.as_deref(), started.elapsed(), &reply, true);
            if !silent {
                reply.encode(s.proto, out);
            }
            continue;
        }
        if let Handler::Write(_) = spec.handler {
            // EVAL, FCALL ...: shown before the commands the script calls.
            if commands::server_cmds::monitored_before(spec) && intro.monitors.active() {
                pending.flush(s, shared, out).await;
                intro.monitors.feed(s.db_index, monitor::Origin::Client(&s.addr), &args);
            }
            if pending.cmds.is_empty() {
                pending.db_index = s.db_index;
                // The job takes the vector: size the next one for this round's writes at once.
                pending.cmds.reserve(queue.len() + 1);
            }
            pending.cmds.push((spec, args));
            pending.silent.push(silent);
            pending.records.push(Record { spec: user_spec, args: user_args, queued });
            if pending.cmds.len() >= MAX_BATCH {
                pending.flush(s, shared, out).await;
            }
            continue;
        }
        pending.flush(s, shared, out).await;
        if commands::server_cmds::monitored_before(spec) {
            intro.monitors.feed(s.db_index, monitor::Origin::Client(&s.addr), &args);
        }
        s.entry.qbuf.store(request_bytes(&args), Ordering::Relaxed);
        let started = Instant::now();
        let reply = match spec.handler {
            Handler::Conn(_) if spec.name == "wait" && shared.store.cluster().is_some() => {
                let c = shared.store.cluster().expect("checked").clone();
                match commands::server_cmds::wait_args(&args) {
                    _ if !c.is_leader() => Reply::err(crate::cluster::WAIT_ON_REPLICA),
                    Err(e) => e,
                    Ok((want, timeout)) => {
                        // The replies before it reach the client before the wait.
                        if write_out(shared, stream, out).await.is_err() {
                            s.close_now = true;
                            break;
                        }
                        wait_replicas(s, shared, &c, want, timeout).await
                    }
                }
            }
            Handler::Conn(_)
                if spec.name == "cluster" && commands::server_cmds::cluster::is_membership_change(&args) =>
            {
                // Adding a node waits for it to catch up: on the raft runtime, while the other connections go on.
                if write_out(shared, stream, out).await.is_err() {
                    s.close_now = true;
                    break;
                }
                commands::server_cmds::cluster::membership_change(shared, &args).await
            }
            Handler::Conn(f) if spec.name == "wait" => match commands::server_cmds::wait_plan(&args) {
                Ok(Some(timeout)) => {
                    // The replies before it reach the client before the wait.
                    if write_out(shared, stream, out).await.is_err() {
                        s.close_now = true;
                        break;
                    }
                    match wait_for(s, shared, timeout).await {
                        Some(true) => unblocked_error(),
                        _ => Reply::Int(0),
                    }
                }
                _ => f(s, shared, &args),
            },
            Handler::Conn(_) if spec.name == "migrate" => {
                // The replies before it reach the client before it waits on the target.
                if write_out(shared, stream, out).await.is_err() {
                    s.close_now = true;
                    break;
                }
                let reply = commands::migrate::run(s, shared, &args).await;
                note_wait_index(s, shared);
                reply
            }
            Handler::Conn(f) => f(s, shared, &args),
            // Issue 41: from memory on this task, or, when that needs the disk, again on the blocking pool
            // while the other connections go on; this connection waits for it, so its replies keep their order.
            Handler::Read(f) if shared.read_offload => {
                match crate::notify::run_read_cached(&shared.store, s.db_index, |ctx| f(ctx, &args)) {
                    Some(reply) => reply,
                    None => offload_read(shared, s.db_index, f, args.clone()).await,
                }
            }
            Handler::Read(f) => crate::notify::run_read(&shared.store, s.db_index, |ctx| f(ctx, &args)),
            Handler::Write(_) => unreachable!("handled above"),
        };
        s.entry.qbuf.store(0, Ordering::Relaxed);
        if s.close_now {
            break;
        }
        intro.ran(s, spec, Some(&args), started.elapsed(), &reply, spec.name == "wait");
        // Judged after the command: CLIENT REPLY ON is answered, CLIENT REPLY OFF / SKIP are not.
        let skip_this = std::mem::take(&mut s.skip_this_reply);
        let forced = std::mem::take(&mut s.force_reply);
        if forced || (!skipped && !s.replies_off && !skip_this) {
            reply.encode(s.proto, out);
        }
        if s.close_after_reply || out.len() >= MAX_OUTPUT {
            break;
        }
    }
    pending.flush(s, shared, out).await;
    *s.entry.last_active.lock() = Instant::now();
    s.entry.db.store(s.db_index as usize, Ordering::Relaxed);
    if s.close_after_reply || s.close_now {
        queue.clear();
    }
}

/// Runs read command `f` again from the start on tokio's blocking pool, reading the files as needed, after its
/// run from memory needed the disk (`notify::run_read_cached`): the disk reads wait there, not on the runtime's
/// thread. Its `keymiss` events and accesses are recorded by this run, the one that answers.
async fn offload_read(shared: &Arc<Shared>, db_index: u8, f: commands::ReadFn, args: Args) -> Reply {
    shared.stats.reads_offloaded.fetch_add(1, Ordering::Relaxed);
    let sh = Arc::clone(shared);
    let run = tokio::task::spawn_blocking(move || crate::notify::run_read(&sh.store, db_index, |ctx| f(ctx, &args)));
    match run.await {
        Ok(reply) => reply,
        // A panic in the command unwinds here, as it would have on this task.
        Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
        Err(_) => Reply::err("the read was cancelled (the server is shutting down)"),
    }
}

/// The reply of a blocked command ended by `CLIENT UNBLOCK id ERROR`.
pub fn unblocked_error() -> Reply {
    Reply::error("UNBLOCKED client unblocked via CLIENT UNBLOCK")
}

/// `WAIT` with replicas asked for: no replica will ever acknowledge, so it waits out its timeout (`None`:
/// until the client is killed or the server stops). `Some(error)` when `CLIENT UNBLOCK` ended it.
async fn wait_for(s: &Session, shared: &Shared, timeout: Option<Duration>) -> Option<bool> {
    let mut unblock = s.entry.begin_block();
    let _counted = shared.store.blocking.count_blocked();
    let r = wait_or_unblock(s, shared, timeout, &mut unblock).await;
    s.entry.end_block();
    r
}

async fn wait_or_unblock(
    s: &Session,
    shared: &Shared,
    timeout: Option<Duration>,
    unblock: &mut tokio::sync::oneshot::Receiver<bool>,
) -> Option<bool> {
    let mut stop = shared.shutdown.subscribe();
    let sleep = async {
        match timeout {
            Some(t) => tokio::time::sleep(t).await,
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        _ = sleep => None,
        _ = s.entry.kill.notified() => {
            s.entry.kill.notify_one();
            None
        }
        _ = stop.wait_for(|v| *v) => None,
        u = unblock => u.ok(),
    }
}

/// In a replica group: after a command that may have written (a group of writes, a blocking command however
/// it was served, MIGRATE's delete), the index `WAIT` waits for is at least the last one committed here, which
/// is at or past that write's.
fn note_wait_index(s: &mut Session, shared: &Shared) {
    if let Some(c) = shared.store.cluster() {
        s.wait_index = s.wait_index.max(c.last_index());
    }
}

/// `WAIT numreplicas timeout` on a replica group's leader: how many other members hold this connection's
/// last write ([`Session::wait_index`]), once `want` do or when `timeout` ends (`None`: never; client kill,
/// CLIENT UNBLOCK and shutdown end it as they end the plain WAIT).
async fn wait_replicas(
    s: &Session,
    shared: &Shared,
    c: &crate::cluster::Cluster,
    want: i64,
    timeout: Option<Duration>,
) -> Reply {
    let count = |c: &crate::cluster::Cluster| c.replicas_at(s.wait_index).unwrap_or(0);
    let now = count(c);
    if now >= want {
        return Reply::Int(now);
    }
    let mut unblock = s.entry.begin_block();
    let _counted = shared.store.blocking.count_blocked();
    let mut stop = shared.shutdown.subscribe();
    let mut metrics = c.metrics_stream();
    let deadline = timeout.map(|t| tokio::time::Instant::now() + t);
    let sleep = async {
        match deadline {
            Some(d) => tokio::time::sleep_until(d).await,
            None => std::future::pending().await,
        }
    };
    tokio::pin!(sleep);
    let reply = loop {
        tokio::select! {
            _ = &mut sleep => break Reply::Int(count(c)),
            _ = s.entry.kill.notified() => {
                s.entry.kill.notify_one();
                break Reply::Int(count(c));
            }
            _ = stop.wait_for(|v| *v) => break Reply::Int(count(c)),
            u = &mut unblock => match u {
                Ok(true) => break unblocked_error(),
                _ => break Reply::Int(count(c)),
            },
            changed = metrics.changed() => {
                let n = count(c);
                if changed.is_err() || n >= want {
                    break Reply::Int(n);
                }
            }
        }
    };
    s.entry.end_block();
    reply
}

/// What a write command of a pending job needs recorded once it ran (see [`Shared::intro`]).
struct Record {
    /// The command the client sent (EXEC, WATCH: not the internal job that runs them).
    spec: &'static Spec,
    /// Its arguments, when kept (slow log, MONITOR).
    args: Option<Args>,
    /// EXEC's queued commands.
    queued: Option<Vec<Args>>,
}

/// Write commands waiting to go to the commit step as one job.
#[derive(Default)]
struct Pending {
    cmds: Vec<(&'static Spec, Args)>,
    /// Per command: its reply is not sent (CLIENT REPLY OFF / SKIP).
    silent: Vec<bool>,
    records: Vec<Record>,
    db_index: u8,
}

impl Pending {
    /// Sends the pending write commands to the commit step as one job and encodes their replies.
    async fn flush(&mut self, s: &mut Session, shared: &Arc<Shared>, out: &mut BytesMut) {
        if self.cmds.is_empty() {
            return;
        }
        let n = self.cmds.len();
        let (tx, rx) = tokio::sync::oneshot::channel();
        let job =
            Job { db_index: self.db_index, cmds: std::mem::take(&mut self.cmds), reply: tx, block: None, client: s.id };
        let started = Instant::now();
        let replies = if shared.store.submit(job) { rx.await.ok() } else { None };
        note_wait_index(s, shared);
        let mut replies = replies.unwrap_or_else(|| vec![Reply::err("the server is shutting down"); n]);
        // A transaction's CONFIG ... runs here, once its data commands are durable.
        for (r, rec) in replies.iter_mut().zip(&self.records) {
            if let Some(queued) = &rec.queued {
                commands::multi::run_after_commit(s, shared, queued, r);
            }
        }
        // Each command's time: its share of the group's.
        let share = started.elapsed() / n.max(1) as u32;
        for (r, rec) in replies.iter().zip(&self.records) {
            record_write(s, shared, rec, r, share);
        }
        for (r, quiet) in replies.iter().zip(self.silent.iter().chain(std::iter::repeat(&false))) {
            if !quiet {
                r.encode(s.proto, out);
            }
        }
        self.silent.clear();
        self.records.clear();
        // CLIENT TRACKING: the invalidations of this client's own writes follow their replies.
        if !crate::tracking::drain(s, out) {
            s.close_now = true;
        }
    }
}

/// Records a write command (or an EXEC and the commands it ran) after its job.
fn record_write(s: &Session, shared: &Shared, rec: &Record, reply: &Reply, share: Duration) {
    let intro = &shared.intro;
    if let (Some(queued), Reply::Array(results)) = (&rec.queued, reply) {
        let each = share / (queued.len().max(1) as u32);
        for (args, r) in queued.iter().zip(results) {
            if let Some(spec) = args.first().and_then(|n| commands::lookup(n)) {
                intro.ran(s, spec, Some(args), each, r, false);
            }
        }
    }
    intro.ran(s, rec.spec, rec.args.as_deref(), share, reply, false);
}

/// Looks the command up and checks arity and authentication. A connection that has not authenticated
/// needs to while a password is set (judged on the current configuration, as Redis judges it on the
/// default user's: once `CONFIG SET requirepass ""` removed it, nobody needs to).
fn check(s: &Session, shared: &Shared, args: &Args) -> Result<&'static Spec, Reply> {
    let Some(name) = args.first() else { return Err(Reply::err("empty command")) };
    let Some(spec) = commands::lookup(name) else { return Err(commands::unknown_command(args)) };
    if !spec.arity_ok(args.len()) {
        return Err(commands::wrong_arity(spec.name));
    }
    if !s.authenticated && spec.flags & flags::NO_AUTH == 0 && shared.acl.auth_required() {
        return Err(Reply::error("NOAUTH Authentication required."));
    }
    commands::acl::check(s, shared, spec, args)?;
    Ok(spec)
}

#[cfg(test)]
mod fresh_dir_tests {
    use super::FreshDir;

    #[test]
    fn a_failed_start_removes_only_what_it_created() {
        let tmp = tempfile::tempdir().unwrap();
        // A missing directory (and its missing parents) is removed whole.
        let db = tmp.path().join("a").join("b").join("db");
        let guard = FreshDir::note(&db);
        std::fs::create_dir_all(&db).unwrap();
        std::fs::write(db.join("CURRENT"), b"x").unwrap();
        drop(guard);
        assert!(!tmp.path().join("a").exists());
        // An empty directory is emptied again, and stays.
        let empty = tmp.path().join("empty");
        std::fs::create_dir(&empty).unwrap();
        let guard = FreshDir::note(&empty);
        std::fs::write(empty.join("LOCK"), b"").unwrap();
        std::fs::create_dir(empty.join("lost")).unwrap();
        drop(guard);
        assert!(empty.is_dir() && std::fs::read_dir(&empty).unwrap().next().is_none());
        // A directory that held anything is left as it is.
        let full = tmp.path().join("full");
        std::fs::create_dir(&full).unwrap();
        std::fs::write(full.join("mine"), b"").unwrap();
        let guard = FreshDir::note(&full);
        std::fs::write(full.join("LOCK"), b"").unwrap();
        drop(guard);
        assert!(full.join("mine").exists() && full.join("LOCK").exists());
        // A start that succeeded keeps everything.
        let kept = tmp.path().join("kept");
        let guard = FreshDir::note(&kept);
        std::fs::create_dir(&kept).unwrap();
        guard.keep();
        assert!(kept.is_dir());
    }
}
