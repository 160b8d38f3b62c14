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

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
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
/// the nodes and their client addresses (`127.0.0.1:port`).
pub fn start_answering(root: &std::path::Path, n: usize) -> (Vec<Node>, Vec<String>) {
    let nodes: Vec<Node> = (0..n).map(|i| start(&root.join(format!("n{i}")))).collect();
    let started = std::time::Instant::now();
    for node in &nodes {
        while cmd(node.port, &["PING"]).as_deref() != Some("+PONG") {
            assert!(started.elapsed() < Duration::from_secs(30), "node {} does not answer", node.port);
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    let addrs = nodes.iter().map(|node| format!("127.0.0.1:{}", node.port)).collect();
    (nodes, addrs)
}
