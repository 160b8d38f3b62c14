//! Replica-group helpers for the `shaledb cluster` tests: `shaledb server --cluster-enabled yes` processes on
//! 127.0.0.1 and a minimal RESP client.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// A server process, SIGKILLed when dropped.
pub struct Node {
    pub child: Child,
    pub port: u16,
    pub bus: u16,
}

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A free loopback port below the ephemeral range (`shaledb_testkit::net::free_port`).
pub fn free_port() -> u16 {
    shaledb_testkit::net::free_port()
}

pub fn start(dir: &std::path::Path) -> Node {
    start_on(dir, free_port(), free_port())
}

/// A node on given ports (a restart after a kill keeps the member's addresses).
pub fn start_on(dir: &std::path::Path, port: u16, bus: u16) -> Node {
    let child = Command::new(env!("CARGO_BIN_EXE_shaledb"))
        .arg("server")
        .arg("--dir")
        .arg(dir)
        .args(["--port", &port.to_string(), "--cluster-enabled", "yes", "--cluster-port", &bus.to_string()])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn shaledb server");
    Node { child, port, bus }
}

/// One command; the reply's first line and, for a bulk string, its body.
pub fn cmd(port: u16, args: &[&str]) -> Option<String> {
    let s = TcpStream::connect_timeout(&([127, 0, 0, 1], port).into(), Duration::from_millis(500)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    let mut req = format!("*{}\r\n", args.len());
    for a in args {
        req.push_str(&format!("${}\r\n{a}\r\n", a.len()));
    }
    (&s).write_all(req.as_bytes()).ok()?;
    let mut r = BufReader::new(s);
    let mut line = String::new();
    r.read_line(&mut line).ok()?;
    if let Some(n) = line.strip_prefix('$').and_then(|n| n.trim().parse::<usize>().ok()) {
        let mut body = vec![0u8; n + 2];
        r.read_exact(&mut body).ok()?;
        return Some(String::from_utf8_lossy(&body[..n]).into_owned());
    }
    Some(line.trim_end().to_string())
}

/// Starts `n` nodes in directories `n0`, `n1` ... under `root` and waits (at most 30 s) until each answers PING;
/// the nodes and their client addresses (`127.0.0.1:port`). A node whose process ends before it answers (its
/// port taken by another process after [`free_port`] found it free) is started again on new ports, up to three
/// times; then the test fails with its exit status.
pub fn start_answering(root: &std::path::Path, n: usize) -> (Vec<Node>, Vec<String>) {
    let mut nodes: Vec<Node> = (0..n).map(|i| start(&root.join(format!("n{i}")))).collect();
    let started = std::time::Instant::now();
    for (i, node) in nodes.iter_mut().enumerate() {
        let mut restarts = 0;
        while cmd(node.port, &["PING"]).as_deref() != Some("+PONG") {
            if let Ok(Some(status)) = node.child.try_wait() {
                assert!(restarts < 3, "node {i} (port {}) ended before it answered: {status}", node.port);
                restarts += 1;
                *node = start(&root.join(format!("n{i}")));
                continue;
            }
            assert!(started.elapsed() < Duration::from_secs(30), "node {} does not answer", node.port);
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    let addrs = nodes.iter().map(|node| format!("127.0.0.1:{}", node.port)).collect();
    (nodes, addrs)
}

/// A whole RESP2 reply.
#[derive(Debug, Clone, PartialEq)]
pub enum Resp {
    Simple(String),
    Err(String),
    Int(i64),
    Bulk(Option<String>),
    Array(Option<Vec<Resp>>),
}

impl Resp {
    /// A simple or bulk string's text, an integer's digits.
    pub fn text(&self) -> Option<String> {
        match self {
            Resp::Simple(s) | Resp::Bulk(Some(s)) => Some(s.clone()),
            Resp::Int(n) => Some(n.to_string()),
            _ => None,
        }
    }

    pub fn int(&self) -> Option<i64> {
        match self {
            Resp::Int(n) => Some(*n),
            _ => None,
        }
    }

    /// An array's elements (empty for anything else).
    pub fn items(&self) -> &[Resp] {
        match self {
            Resp::Array(Some(v)) => v,
            _ => &[],
        }
    }
}

fn read_resp(r: &mut impl BufRead, depth: usize) -> Option<Resp> {
    if depth > 16 {
        return None;
    }
    let mut line = String::new();
    r.read_line(&mut line).ok()?;
    let line = line.strip_suffix("\r\n")?;
    let (kind, rest) = line.split_at(1.min(line.len()));
    Some(match kind {
        "+" => Resp::Simple(rest.to_string()),
        "-" => Resp::Err(rest.to_string()),
        ":" => Resp::Int(rest.parse().ok()?),
        "$" => match rest.parse::<i64>().ok()? {
            n if n < 0 => Resp::Bulk(None),
            n => {
                let mut body = vec![0u8; n as usize + 2];
                r.read_exact(&mut body).ok()?;
                Resp::Bulk(Some(String::from_utf8_lossy(&body[..n as usize]).into_owned()))
            }
        },
        "*" => match rest.parse::<i64>().ok()? {
            n if n < 0 => Resp::Array(None),
            n => Resp::Array(Some((0..n).map(|_| read_resp(r, depth + 1)).collect::<Option<_>>()?)),
        },
        _ => return None,
    })
}

/// One command and its whole reply; `None` when the node does not answer.
pub fn query(port: u16, args: &[&str]) -> Option<Resp> {
    let s = TcpStream::connect_timeout(&([127, 0, 0, 1], port).into(), Duration::from_millis(500)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    let mut req = format!("*{}\r\n", args.len());
    for a in args {
        req.push_str(&format!("${}\r\n{a}\r\n", a.len()));
    }
    (&s).write_all(req.as_bytes()).ok()?;
    read_resp(&mut BufReader::new(s), 0)
}

/// Whether the node on `port` is a master by ROLE (a leader of its group).
pub fn is_master(port: u16) -> bool {
    query(port, &["ROLE"]).is_some_and(|r| r.items().first().and_then(Resp::text).as_deref() == Some("master"))
}

/// The index in `nodes` of the one ROLE calls master, waiting up to `limit` for one; `None` after that.
pub fn wait_master(nodes: &[&Node], limit: Duration) -> Option<usize> {
    let started = std::time::Instant::now();
    loop {
        if let Some(i) = nodes.iter().position(|n| is_master(n.port)) {
            return Some(i);
        }
        if started.elapsed() >= limit {
            return None;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A command sent to `port` that follows `-MOVED <slot> <host:port>` (at most 3 hops, loopback only): the
/// final reply.
pub fn query_following(port: u16, args: &[&str]) -> Option<Resp> {
    let mut port = port;
    for _ in 0..4 {
        match query(port, args)? {
            Resp::Err(e) if e.starts_with("MOVED ") => {
                port = e.rsplit(':').next()?.parse().ok()?;
            }
            r => return Some(r),
        }
    }
    None
}
