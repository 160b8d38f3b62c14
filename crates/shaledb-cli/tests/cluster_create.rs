//! `shaledb cluster create` (issue 43) with the real binary: three `shaledb server --cluster-enabled yes`
//! processes on 127.0.0.1 formed into one replica group, the node count checked against `--replicas`, and a
//! second create refused.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A server process, SIGKILLed when dropped.
struct Node {
    child: Child,
    port: u16,
}

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn start(dir: &std::path::Path) -> Node {
    let (port, bus) = (free_port(), free_port());
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
    Node { child, port }
}

/// One command; the reply's first line and, for a bulk string, its body.
fn cmd(port: u16, args: &[&str]) -> Option<String> {
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

#[test]
fn cluster_create_forms_one_group_of_three_servers() {
    let tmp = tempfile::tempdir().unwrap();
    let nodes: Vec<Node> = (0..3).map(|i| start(&tmp.path().join(format!("n{i}")))).collect();
    let start_wait = Instant::now();
    for n in &nodes {
        while cmd(n.port, &["PING"]).as_deref() != Some("+PONG") {
            assert!(start_wait.elapsed() < Duration::from_secs(30), "node {} does not answer", n.port);
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    let addrs: Vec<String> = nodes.iter().map(|n| format!("127.0.0.1:{}", n.port)).collect();
    let a: Vec<&str> = addrs.iter().map(String::as_str).collect();

    // Node counts that are not one group of N+1 are refused before anything is sent.
    let (code, _, err) = common::shaledb(&["cluster", "create", a[0], a[1], a[2]]);
    assert_eq!(code, Some(1));
    assert!(err.contains("issue 44"), "{err}");
    let (code, _, err) = common::shaledb(&["cluster", "create", a[0], a[1], "--replicas", "2"]);
    assert_eq!(code, Some(1), "{err}");

    let out = common::ok(&["cluster", "create", a[0], a[1], a[2], "--replicas", "2", "--timeout", "30"]);
    assert!(out.contains("[OK] All 3 nodes agree"), "{out}");
    for n in &nodes {
        let info = cmd(n.port, &["CLUSTER", "INFO"]).unwrap();
        assert!(info.contains("cluster_state:ok") && info.contains("cluster_known_nodes:3"), "{info}");
    }
    // A write through the leader, found by ROLE.
    let leader = nodes.iter().find(|n| cmd(n.port, &["ROLE"]).is_some_and(|r| r.starts_with("*3"))).expect("a leader");
    assert_eq!(cmd(leader.port, &["SET", "k", "v"]).as_deref(), Some("+OK"));
    assert_eq!(cmd(leader.port, &["GET", "k"]).as_deref(), Some("v"));

    // A second create finds the nodes in a group already.
    let (code, _, err) = common::shaledb(&["cluster", "create", a[0], a[1], a[2], "--replicas", "2"]);
    assert_eq!(code, Some(1));
    assert!(err.contains("already a member"), "{err}");
}
