//! `shaledb cluster create HOST:PORT ... [--replicas N]`: forms a replica group (issue 43) of servers started
//! with `--cluster-enabled yes`, taking `redis-cli --cluster create`'s arguments. It talks RESP to the nodes:
//! `CLUSTER MYID` and `CONFIG GET cluster-port` on each, `CLUSTER SHALEDB-INIT` on the first, then `CLUSTER
//! INFO` on each until every one reports `cluster_state:ok`.
//!
//! `shaledb cluster add-node NEW_HOST:PORT EXISTING_HOST:PORT` and `shaledb cluster del-node HOST:PORT NODE_ID`
//! (alias `remove-node`) change the group's members, in redis-cli --cluster's argument order: `CLUSTER
//! SHALEDB-ADD-NODE` / `SHALEDB-REMOVE-NODE` sent to the given member, following its `-MOVED` to the leader.

use anyhow::{anyhow, bail, Context, Result};
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

#[derive(clap::Subcommand, Debug)]
pub enum ClusterCommand {
    /// Form a replica group of the servers at HOST:PORT (each started with --cluster-enabled yes and an empty
    /// --dir). `--replicas N`: groups of N+1 nodes, as redis-cli --cluster create; one group is supported.
    Create(CreateArgs),
    /// Add the server at NEW_HOST:PORT (started with --cluster-enabled yes and an empty --dir) to the group that
    /// EXISTING_HOST:PORT is a member of: it joins as a learner, catches up (a snapshot if the log it needs is
    /// purged), then becomes a voter.
    AddNode(AddNodeArgs),
    /// Remove node NODE_ID (CLUSTER MYID's 40 hex digits, as CLUSTER NODES lists it) from the group that
    /// HOST:PORT is a member of. Stop the removed node's server afterwards.
    #[command(alias = "remove-node")]
    DelNode(DelNodeArgs),
}

#[derive(clap::Args, Debug)]
pub struct AddNodeArgs {
    /// The new node's client address.
    #[arg(value_name = "NEW_HOST:PORT")]
    pub new_node: String,
    /// A member of the group (any: the command is sent on to the leader).
    #[arg(value_name = "EXISTING_HOST:PORT")]
    pub existing: String,
}

#[derive(clap::Args, Debug)]
pub struct DelNodeArgs {
    /// A member of the group (any: the command is sent on to the leader).
    #[arg(value_name = "HOST:PORT")]
    pub node: String,
    /// The id of the node to remove.
    #[arg(value_name = "NODE_ID")]
    pub node_id: String,
}

#[derive(clap::Args, Debug)]
pub struct CreateArgs {
    /// The nodes' client addresses, HOST:PORT; the first one forms the group (it is recorded with this HOST).
    #[arg(required = true, value_name = "HOST:PORT")]
    pub nodes: Vec<String>,
    /// Replicas per master: the group has N+1 nodes.
    #[arg(long, default_value_t = 0)]
    pub replicas: usize,
    /// Seconds to wait until every node reports cluster_state:ok.
    #[arg(long, default_value_t = 30)]
    pub timeout: u64,
}

pub fn run(c: ClusterCommand) -> Result<i32> {
    match c {
        ClusterCommand::Create(a) => create(&a).map(|()| 0),
        ClusterCommand::AddNode(a) => add_node(&a).map(|()| 0),
        ClusterCommand::DelNode(a) => del_node(&a).map(|()| 0),
    }
}

/// A RESP reply, as much of it as this tool reads.
#[derive(Debug, Clone, PartialEq)]
enum Reply {
    Simple(String),
    Error(String),
    Int(i64),
    Bulk(Option<Vec<u8>>),
    Array(Option<Vec<Reply>>),
}

impl Reply {
    fn text(&self) -> Option<String> {
        match self {
            Reply::Simple(s) => Some(s.clone()),
            Reply::Bulk(Some(b)) => Some(String::from_utf8_lossy(b).into_owned()),
            Reply::Int(n) => Some(n.to_string()),
            _ => None,
        }
    }
}

/// Most bytes of one bulk string or elements of one array this tool accepts from a node.
const MAX_LEN: usize = 16 << 20;

struct Conn {
    addr: String,
    r: BufReader<TcpStream>,
}

impl Conn {
    fn open(addr: &str) -> Result<Conn> {
        let sock = addr
            .to_socket_addrs()
            .with_context(|| format!("resolving {addr}"))?
            .next()
            .ok_or_else(|| anyhow!("{addr} resolves to no address"))?;
        let s = TcpStream::connect_timeout(&sock, Duration::from_secs(5))
            .with_context(|| format!("connecting to {addr}"))?;
        // CLUSTER SHALEDB-ADD-NODE answers once the new node caught up: at most 120 s on the server's side.
        s.set_read_timeout(Some(Duration::from_secs(150)))?;
        s.set_write_timeout(Some(Duration::from_secs(5)))?;
        Ok(Conn { addr: addr.to_string(), r: BufReader::new(s) })
    }

    fn cmd(&mut self, args: &[&str]) -> Result<Reply> {
        let mut out = format!("*{}\r\n", args.len()).into_bytes();
        for a in args {
            out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
            out.extend_from_slice(a.as_bytes());
            out.extend_from_slice(b"\r\n");
        }
        self.r.get_mut().write_all(&out).with_context(|| format!("sending {} to {}", args[0], self.addr))?;
        read_reply(&mut self.r, 0)
            .with_context(|| format!("reading the reply of {} from {}", args.join(" "), self.addr))
    }
}

fn read_line(r: &mut impl BufRead) -> Result<String> {
    let mut line = Vec::new();
    let n = std::io::Read::take(&mut *r, 64 << 10).read_until(b'\n', &mut line)?;
    if n == 0 {
        bail!("connection closed");
    }
    if !line.ends_with(b"\r\n") {
        bail!("a reply line without CRLF");
    }
    line.truncate(line.len() - 2);
    String::from_utf8(line).map_err(|_| anyhow!("a reply line that is not UTF-8"))
}

fn read_reply(r: &mut impl BufRead, depth: usize) -> Result<Reply> {
    if depth > 8 {
        bail!("a reply nested too deep");
    }
    let line = read_line(r)?;
    let (kind, rest) = line.split_at(line.char_indices().nth(1).map_or(line.len(), |(i, _)| i));
    let len = |rest: &str| -> Result<Option<usize>> {
        let n: i64 = rest.parse().map_err(|_| anyhow!("bad length '{rest}'"))?;
        if n < 0 {
            return Ok(None);
        }
        let n = usize::try_from(n).map_err(|_| anyhow!("bad length '{rest}'"))?;
        if n > MAX_LEN {
            bail!("length {n} over the limit");
        }
        Ok(Some(n))
    };
    Ok(match kind {
        "+" => Reply::Simple(rest.to_string()),
        "-" => Reply::Error(rest.to_string()),
        ":" => Reply::Int(rest.parse().map_err(|_| anyhow!("bad integer '{rest}'"))?),
        "$" => match len(rest)? {
            None => Reply::Bulk(None),
            Some(n) => {
                let mut b = vec![0u8; n + 2];
                std::io::Read::read_exact(r, &mut b)?;
                b.truncate(n);
                Reply::Bulk(Some(b))
            }
        },
        "*" => match len(rest)? {
            None => Reply::Array(None),
            Some(n) => Reply::Array(Some((0..n).map(|_| read_reply(r, depth + 1)).collect::<Result<_>>()?)),
        },
        _ => bail!("an unknown reply type '{kind}'"),
    })
}

/// The error text of an error reply, else the reply itself.
fn expect_ok(r: Reply, what: &str, addr: &str) -> Result<Reply> {
    match r {
        Reply::Error(e) => bail!("{addr}: {what}: {e}"),
        r => Ok(r),
    }
}

/// `HOST:PORT` split (an IPv6 host in brackets).
fn split_host_port(s: &str) -> Result<(String, u16)> {
    let (host, port) = s.rsplit_once(':').ok_or_else(|| anyhow!("'{s}' is not HOST:PORT"))?;
    let port: u16 = port.parse().ok().filter(|&p| p > 0).ok_or_else(|| anyhow!("'{s}': '{port}' is not a port"))?;
    if host.is_empty() {
        bail!("'{s}' has no host");
    }
    Ok((host.to_string(), port))
}

/// The checks before anything is sent: the node count fits `--replicas`, no node twice.
fn check_layout(nodes: &[String], replicas: usize) -> Result<()> {
    let per_group = replicas.checked_add(1).ok_or_else(|| anyhow!("--replicas {replicas} is too large"))?;
    if nodes.len() != per_group {
        bail!(
            "{} node(s) given with --replicas {replicas}: a group has {per_group} nodes (--replicas N: N+1 nodes), \
             and only one group is supported; several groups sharing the slots are issue 44",
            nodes.len()
        );
    }
    for (i, n) in nodes.iter().enumerate() {
        split_host_port(n)?;
        if nodes[..i].contains(n) {
            bail!("{n} is given twice");
        }
    }
    Ok(())
}

/// The id and `host:port@busport` of the server at `n` (started with --cluster-enabled yes).
fn identify(n: &str) -> Result<(String, String)> {
    let (host, port) = split_host_port(n)?;
    let mut c = Conn::open(n)?;
    let id = expect_ok(c.cmd(&["CLUSTER", "MYID"])?, "CLUSTER MYID (is it started with --cluster-enabled yes?)", n)?
        .text()
        .ok_or_else(|| anyhow!("{n}: CLUSTER MYID gave no id"))?;
    let bus = match expect_ok(c.cmd(&["CONFIG", "GET", "cluster-port"])?, "CONFIG GET cluster-port", n)? {
        Reply::Array(Some(v)) if v.len() == 2 => v[1].text().and_then(|t| t.parse::<u16>().ok()),
        _ => None,
    }
    .filter(|&p| p > 0)
    .ok_or_else(|| anyhow!("{n}: CONFIG GET cluster-port gave no bus port"))?;
    Ok((id, format!("{host}:{port}@{bus}")))
}

/// Sends `args` to `first`, following `-MOVED <slot> <addr>` to the leader (at most 3 times).
fn to_leader(first: &str, args: &[&str]) -> Result<(String, Reply)> {
    let mut addr = first.to_string();
    for _ in 0..4 {
        let r = Conn::open(&addr)?.cmd(args)?;
        match &r {
            Reply::Error(e) if e.starts_with("MOVED ") => {
                let to = e.split_whitespace().nth(2).ok_or_else(|| anyhow!("{addr}: a bad redirect '{e}'"))?;
                println!(">>> {addr} sends it to the leader, {to}");
                addr = to.to_string();
            }
            _ => return Ok((addr, r)),
        }
    }
    bail!("{first}: still redirected after 3 hops (an election in progress? try again)")
}

fn add_node(a: &AddNodeArgs) -> Result<()> {
    split_host_port(&a.existing)?;
    if a.new_node == a.existing {
        bail!("the new node and the existing one are both {}", a.new_node);
    }
    let (id, addr) = identify(&a.new_node)?;
    println!(">>> adding {} as node {id} ({addr}); it catches up before it votes", a.new_node);
    let (leader, r) = to_leader(&a.existing, &["CLUSTER", "SHALEDB-ADD-NODE", &id, &addr])?;
    expect_ok(r, "CLUSTER SHALEDB-ADD-NODE", &leader)?;
    println!("[OK] Node {id} ({}) is a voting member of the group.", a.new_node);
    Ok(())
}

fn del_node(a: &DelNodeArgs) -> Result<()> {
    split_host_port(&a.node)?;
    let (leader, r) = to_leader(&a.node, &["CLUSTER", "SHALEDB-REMOVE-NODE", &a.node_id])?;
    expect_ok(r, "CLUSTER SHALEDB-REMOVE-NODE", &leader)?;
    println!("[OK] Node {} left the group; stop its server (its directory is no longer a member's).", a.node_id);
    Ok(())
}

fn create(a: &CreateArgs) -> Result<()> {
    check_layout(&a.nodes, a.replicas)?;
    let mut members = Vec::new();
    for n in &a.nodes {
        let (id, addr) = identify(n)?;
        let info = expect_ok(Conn::open(n)?.cmd(&["CLUSTER", "INFO"])?, "CLUSTER INFO", n)?.text().unwrap_or_default();
        if info.lines().any(|l| l.trim() == "cluster_size:1") {
            bail!("{n} is already a member of a group (CLUSTER INFO shows cluster_size:1)");
        }
        println!(">>> {n}: node {id}, {addr}");
        members.push((id, addr));
    }
    let mut init: Vec<&str> = vec!["CLUSTER", "SHALEDB-INIT"];
    for (id, addr) in &members {
        init.push(id);
        init.push(addr);
    }
    let first = &a.nodes[0];
    expect_ok(Conn::open(first)?.cmd(&init)?, "CLUSTER SHALEDB-INIT", first)?;
    println!(">>> group formed on {first}; waiting for every node to report cluster_state:ok");
    let deadline = Instant::now() + Duration::from_secs(a.timeout);
    let mut waiting: Vec<&String> = a.nodes.iter().collect();
    while !waiting.is_empty() {
        let mut still = Vec::new();
        for n in waiting {
            let ok = Conn::open(n)
                .and_then(|mut c| c.cmd(&["CLUSTER", "INFO"]))
                .ok()
                .and_then(|r| r.text())
                .is_some_and(|t| t.lines().any(|l| l.trim() == "cluster_state:ok"));
            if !ok {
                still.push(n);
            }
        }
        waiting = still;
        if waiting.is_empty() {
            break;
        }
        if Instant::now() >= deadline {
            let names: Vec<&str> = waiting.iter().map(|s| s.as_str()).collect();
            bail!("after {} s these nodes do not report cluster_state:ok: {}", a.timeout, names.join(", "));
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    println!("[OK] All {} nodes agree: one shard owns all 16384 slots.", a.nodes.len());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_counts_must_be_one_group() {
        let n = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert!(check_layout(&n(&["h:1", "h:2", "h:3"]), 2).is_ok());
        let e = check_layout(&n(&["h:1", "h:2", "h:3"]), 0).unwrap_err().to_string();
        assert!(e.contains("issue 44"), "{e}");
        assert!(check_layout(&n(&["h:1", "h:2", "h:3", "h:4", "h:5", "h:6"]), 1).is_err());
        assert!(check_layout(&n(&["h:1", "h:1"]), 1).unwrap_err().to_string().contains("twice"));
        assert!(check_layout(&n(&["h1", "h:2"]), 1).unwrap_err().to_string().contains("HOST:PORT"));
    }

    #[test]
    fn replies_parse() {
        let mut r =
            std::io::Cursor::new(b"*2\r\n$12\r\ncluster-port\r\n$5\r\n17000\r\n-ERR x\r\n:5\r\n+OK\r\n".to_vec());
        let a = read_reply(&mut r, 0).unwrap();
        assert_eq!(
            a,
            Reply::Array(Some(vec![Reply::Bulk(Some(b"cluster-port".to_vec())), Reply::Bulk(Some(b"17000".to_vec()))]))
        );
        assert_eq!(read_reply(&mut r, 0).unwrap(), Reply::Error("ERR x".into()));
        assert_eq!(read_reply(&mut r, 0).unwrap(), Reply::Int(5));
        assert_eq!(read_reply(&mut r, 0).unwrap(), Reply::Simple("OK".into()));
        assert!(read_reply(&mut std::io::Cursor::new(b"$99999999999\r\n".to_vec()), 0).is_err());
    }
}
