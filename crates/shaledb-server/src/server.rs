//! The listener, one task per connection, sessions, and shutdown.
//!
//! A connection reads into its buffer, parses every complete request in it (pipelining), executes them in
//! order and writes all their replies with one write. Consecutive write commands go to the commit thread as
//! one job; a read after a write waits for that job first, so a client always reads its own writes.

use crate::commands::{self, flags, Handler, Spec};
use crate::config::Config;
use crate::resp::{Args, Parser, ProtocolError, Reply};
use crate::store::{now_ms, Job, ReadCtx, Store};
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

/// Why the server could not start or stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error("{0}")]
    Config(String),
    #[error("opening the database in {dir}: {source}")]
    Open { dir: String, source: shaledb::Error },
    #[error("listening on {addr}: {source}")]
    Listen { addr: String, source: std::io::Error },
    #[error("starting the runtime: {0}")]
    Runtime(std::io::Error),
    #[error("closing the database: {0}")]
    Close(shaledb::Error),
}

/// Most requests executed per round before their replies are written.
const MAX_BATCH: usize = 1024;
/// Replies gathered before they are written even if requests remain (bounds a connection's output buffer).
const MAX_OUTPUT: usize = 16 << 20;

/// Server-wide counters (`INFO stats`).
#[derive(Default, Debug)]
pub struct ServerStats {
    pub connections_received: AtomicU64,
    pub rejected_connections: AtomicU64,
    pub commands_processed: AtomicU64,
    pub net_input_bytes: AtomicU64,
    pub net_output_bytes: AtomicU64,
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
    pub last_command: Mutex<&'static str>,
    pub last_active: Mutex<Instant>,
    /// Set by `CLIENT KILL`; the connection closes at its next chance.
    pub killed: AtomicBool,
    pub kill: Notify,
}

/// Everything connections share.
pub struct Shared {
    pub store: Arc<Store>,
    pub config: RwLock<Config>,
    pub clients: Mutex<HashMap<u64, Arc<ClientEntry>>>,
    pub next_client_id: AtomicU64,
    pub started: Instant,
    pub stats: ServerStats,
    /// Set to `true` to stop the server (SHUTDOWN, SIGTERM, [`RunningServer::shutdown`]).
    pub shutdown: watch::Sender<bool>,
    /// The address the listener is bound to.
    pub local_addr: SocketAddr,
}

impl Shared {
    /// Asks the server to stop: no new connections, in-flight commands finish, the engine is closed.
    pub fn request_shutdown(&self) {
        let _ = self.shutdown.send(true);
    }
}

/// One connection's state.
#[derive(Debug)]
pub struct Session {
    pub id: u64,
    pub addr: SocketAddr,
    pub db_index: u8,
    pub authenticated: bool,
    /// RESP version for replies (2 until `HELLO 3`).
    pub proto: u8,
    pub name: Option<bytes::Bytes>,
    /// Close once the replies of this round are written (QUIT, CLIENT KILL of itself).
    pub close_after_reply: bool,
    pub entry: Arc<ClientEntry>,
    /// The transaction being queued (between MULTI and EXEC/DISCARD).
    pub multi: Option<commands::multi::MultiState>,
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

fn runtime() -> Result<tokio::runtime::Runtime, ServerError> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("shaledb-net")
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

/// Checks the configuration, opens the database and binds the listener.
async fn bind(config: Config) -> Result<(Arc<Shared>, TcpListener), ServerError> {
    if !is_loopback(&config.bind) && config.requirepass.is_none() && config.protected_mode {
        return Err(ServerError::Config(format!(
            "refusing to listen on {} without a password (protected mode): set --requirepass, or \
             --protected-mode no if the network is trusted",
            config.bind
        )));
    }
    if config.maxclients == 0 {
        return Err(ServerError::Config("--maxclients must be at least 1".into()));
    }
    let db = open_db(&config)?;
    let addr = format!("{}:{}", config.bind, config.port);
    let listener = match TcpListener::bind(&addr).await {
        Ok(l) => l,
        Err(source) => {
            let _ = db.close();
            return Err(ServerError::Listen { addr, source });
        }
    };
    let local_addr = listener.local_addr().map_err(|source| ServerError::Listen { addr: addr.clone(), source })?;
    let store = Store::start(db, config.appendfsync);
    eprintln!(
        "# shaledb server {} on {} (dir {}, appendfsync {})",
        env!("CARGO_PKG_VERSION"),
        local_addr,
        config.dir.display(),
        config.appendfsync.name()
    );
    let (shutdown, _) = watch::channel(false);
    let shared = Arc::new(Shared {
        store,
        config: RwLock::new(config),
        clients: Mutex::new(HashMap::new()),
        next_client_id: AtomicU64::new(1),
        started: Instant::now(),
        stats: ServerStats::default(),
        shutdown,
        local_addr,
    });
    Ok((shared, listener))
}

/// Opens (creating if missing) the database directory; a directory holding anything else is refused.
fn open_db(config: &Config) -> Result<Db, ServerError> {
    let dir = config.dir.clone();
    let err = |source| ServerError::Open { dir: dir.display().to_string(), source };
    Db::open(&dir, Options { create_if_missing: true, ..Options::default() }).map_err(err)
}

/// Accepts connections until shutdown, then drains and closes everything.
async fn serve(shared: Arc<Shared>, listener: TcpListener) -> Result<(), ServerError> {
    let mut stop = shared.shutdown.subscribe();
    let mut tasks = tokio::task::JoinSet::new();
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
                tasks.spawn(async move { connection(s, stream, addr).await });
            }
            Some(_) = tasks.join_next(), if !tasks.is_empty() => {}
        }
    }
    drop(listener);
    // In-flight commands finish; idle connections see the shutdown and close.
    while tasks.join_next().await.is_some() {}
    shared.store.shutdown();
    eprintln!("# shutting down: the commit thread is drained, closing the database");
    let db = shared.store.db.clone();
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

async fn connection(shared: Arc<Shared>, mut stream: TcpStream, addr: SocketAddr) {
    let _ = stream.set_nodelay(true);
    let (maxclients, requirepass, limits, query_limit, timeout) = {
        let c = shared.config.read();
        (c.maxclients, c.requirepass.is_some(), c.limits, c.query_buffer_limit, c.timeout)
    };
    let id = shared.next_client_id.fetch_add(1, Ordering::Relaxed);
    let entry = Arc::new(ClientEntry {
        id,
        addr,
        laddr: stream.local_addr().unwrap_or(shared.local_addr),
        created: Instant::now(),
        name: Mutex::new(None),
        db: AtomicUsize::new(0),
        last_command: Mutex::new("NULL"),
        last_active: Mutex::new(Instant::now()),
        killed: AtomicBool::new(false),
        kill: Notify::new(),
    });
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
        authenticated: !requirepass,
        proto: 2,
        name: None,
        close_after_reply: false,
        entry: entry.clone(),
        multi: None,
    };
    let mut stop = shared.shutdown.subscribe();
    let mut parser = Parser::new(limits);
    let mut rbuf = BytesMut::with_capacity(16 << 10);
    let mut wbuf = BytesMut::with_capacity(16 << 10);
    let mut queue: VecDeque<Args> = VecDeque::new();
    'conn: loop {
        // Parse what the buffer holds (up to a round's worth).
        let mut protocol_error: Option<ProtocolError> = None;
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
        if !queue.is_empty() {
            execute(&mut session, &shared, &mut queue, &mut wbuf).await;
        }
        if let Some(e) = &protocol_error {
            if queue.is_empty() {
                Reply::err(format!("Protocol error: {e}")).encode(session.proto, &mut wbuf);
                let _ = write_out(&shared, &mut stream, &mut wbuf).await;
                break 'conn;
            }
        }
        if !wbuf.is_empty() && write_out(&shared, &mut stream, &mut wbuf).await.is_err() {
            break 'conn;
        }
        if session.close_after_reply || entry.killed.load(Ordering::Acquire) {
            break 'conn;
        }
        if !queue.is_empty() || protocol_error.is_some() {
            continue;
        }
        if rbuf.len() + parser.held_bytes() > query_limit {
            Reply::err("Protocol error: query buffer limit reached, closing the connection")
                .encode(session.proto, &mut wbuf);
            let _ = write_out(&shared, &mut stream, &mut wbuf).await;
            eprintln!("# closing client {addr}: query buffer over {query_limit} bytes");
            break 'conn;
        }
        if *stop.borrow() && !parser.in_request() && rbuf.is_empty() {
            break 'conn;
        }
        if rbuf.capacity() - rbuf.len() < 4096 {
            rbuf.reserve(16 << 10);
        }
        let idle = async {
            match timeout {
                Some(t) => tokio::time::sleep(t).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            r = stream.read_buf(&mut rbuf) => match r {
                Ok(0) | Err(_) => break 'conn,
                Ok(n) => {
                    shared.stats.net_input_bytes.fetch_add(n as u64, Ordering::Relaxed);
                }
            },
            _ = entry.kill.notified() => break 'conn,
            _ = stop.changed() => {
                // Finish requests already received, then close.
                if rbuf.is_empty() && !parser.in_request() {
                    break 'conn;
                }
            }
            _ = idle => break 'conn,
        }
    }
    shared.clients.lock().remove(&id);
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

/// Executes queued requests in order, appending their replies to `out`, until the queue is empty or the
/// output is large enough to write first.
async fn execute(s: &mut Session, shared: &Arc<Shared>, queue: &mut VecDeque<Args>, out: &mut BytesMut) {
    let mut pending: Vec<(&'static Spec, Args)> = Vec::new();
    let mut pending_db = s.db_index;
    while let Some(args) = queue.pop_front() {
        shared.stats.commands_processed.fetch_add(1, Ordering::Relaxed);
        let spec = match check(s, &args) {
            Ok(spec) => spec,
            Err(reply) => {
                commands::multi::queue_failed(s);
                flush_writes(s, shared, &mut pending, pending_db, out).await;
                reply.encode(s.proto, out);
                continue;
            }
        };
        *s.entry.last_command.lock() = spec.name;
        let (spec, args) = match commands::multi::intercept(s, spec, args) {
            commands::multi::Step::Run(spec, args) => (spec, args),
            commands::multi::Step::Reply(reply) => {
                flush_writes(s, shared, &mut pending, pending_db, out).await;
                reply.encode(s.proto, out);
                continue;
            }
        };
        if let Handler::Write(_) = spec.handler {
            if pending.is_empty() {
                pending_db = s.db_index;
            }
            pending.push((spec, args));
            if pending.len() >= MAX_BATCH {
                flush_writes(s, shared, &mut pending, pending_db, out).await;
            }
            continue;
        }
        flush_writes(s, shared, &mut pending, pending_db, out).await;
        let reply = match spec.handler {
            Handler::Conn(f) => f(s, shared, &args),
            Handler::Read(f) => f(&ReadCtx { db: &shared.store.db, db_index: s.db_index, now_ms: now_ms() }, &args),
            Handler::Write(_) => unreachable!("handled above"),
        };
        reply.encode(s.proto, out);
        if s.close_after_reply || out.len() >= MAX_OUTPUT {
            break;
        }
    }
    flush_writes(s, shared, &mut pending, pending_db, out).await;
    *s.entry.last_active.lock() = Instant::now();
    s.entry.db.store(s.db_index as usize, Ordering::Relaxed);
    if s.close_after_reply {
        queue.clear();
    }
}

/// Looks the command up and checks arity and authentication.
fn check(s: &Session, args: &Args) -> Result<&'static Spec, Reply> {
    let Some(name) = args.first() else { return Err(Reply::err("empty command")) };
    let Some(spec) = commands::lookup(name) else { return Err(commands::unknown_command(args)) };
    if !spec.arity_ok(args.len()) {
        return Err(commands::wrong_arity(spec.name));
    }
    if !s.authenticated && spec.flags & flags::NO_AUTH == 0 {
        return Err(Reply::error("NOAUTH Authentication required."));
    }
    Ok(spec)
}

/// Sends the pending write commands to the commit thread as one job and encodes its replies.
async fn flush_writes(
    s: &Session,
    shared: &Arc<Shared>,
    pending: &mut Vec<(&'static Spec, Args)>,
    db_index: u8,
    out: &mut BytesMut,
) {
    if pending.is_empty() {
        return;
    }
    let n = pending.len();
    let (tx, rx) = tokio::sync::oneshot::channel();
    let job = Job { db_index, cmds: std::mem::take(pending), reply: tx };
    let replies = if shared.store.submit(job) { rx.await.ok() } else { None };
    match replies {
        Some(replies) => {
            for r in replies {
                r.encode(s.proto, out);
            }
        }
        None => {
            for _ in 0..n {
                Reply::err("the server is shutting down").encode(s.proto, out);
            }
        }
    }
}
