//! A fault-injecting TCP proxy for a replica group's bus (cluster_faults.rs, cluster_linearizable.rs): one in
//! front of each node's bus port, named as the bus port in the group's member addresses, so it sees every
//! connection to its node and can delay, sever, cut (both ways) or silence (one way) each sender's traffic.

use super::cluster::{node_ids, start_group, NodeProc};
use std::collections::HashSet;
use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A group of three (helpers/cluster.rs `start_group`) whose members know each other's bus by a proxy in
/// front of it: the nodes, their proxies (same order) and their node ids (to name senders in [`Rules`]).
pub fn start_proxied_group(tmp: &Path) -> (Vec<NodeProc>, Vec<Proxy>, Vec<u64>) {
    let mut proxies: Vec<Proxy> = Vec::new();
    let nodes = start_group(tmp, |n| {
        let p = Proxy::start(n.bus);
        let port = p.port;
        proxies.push(p);
        port
    });
    let ids = node_ids(&nodes).iter().map(|h| shaledb_server::cluster::parse_node_id(h).expect("a node id")).collect();
    (nodes, proxies, ids)
}

/// Cuts node `n` off from every other node, both ways (until the rules are cleared).
pub fn isolate(proxies: &[Proxy], ids: &[u64], n: usize) {
    let others: Vec<usize> = (0..proxies.len()).filter(|&o| o != n).collect();
    proxies[n].set(|r| r.cut = others.iter().map(|&o| ids[o]).collect());
    for &o in &others {
        proxies[o].set(|r| {
            r.cut.insert(ids[n]);
        });
    }
}

/// What a [`Proxy`] does to the connections of each sender (a node id).
#[derive(Default, Clone)]
pub struct Rules {
    /// Each chunk is held this long, both ways.
    pub delay: Duration,
    /// Senders whose connections are closed (and new ones closed after their first frame).
    pub cut: HashSet<u64>,
    /// Senders whose requests are swallowed (one way: the receiver never hears them, so never answers).
    pub deaf: HashSet<u64>,
}

/// A fault-injecting TCP proxy in front of one node's bus port. Peers dial it (the group's member addresses
/// name it as the bus port), so it sees every connection to its node; it tells the sender from the first
/// frame: each request (wire.rs: `postcard(to, request)`) starts with openraft's vote, whose leader id is the
/// sender's (the leader of an append or snapshot chunk, the candidate of a vote request).
pub struct Proxy {
    /// The port peers dial instead of the node's bus port.
    pub port: u16,
    rules: Arc<Mutex<Rules>>,
    conns: Arc<Mutex<Vec<(u64, TcpStream, TcpStream)>>>,
    stop: Arc<AtomicBool>,
}

impl Proxy {
    /// A proxy on a free port of 127.0.0.1 in front of the bus port `target`.
    pub fn start(target: u16) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind proxy");
        let port = listener.local_addr().expect("addr").port();
        let p = Proxy { port, rules: Arc::default(), conns: Arc::default(), stop: Arc::new(AtomicBool::new(false)) };
        let (rules, conns, stop) = (p.rules.clone(), p.conns.clone(), p.stop.clone());
        std::thread::spawn(move || {
            for client in listener.incoming() {
                if stop.load(Ordering::Relaxed) {
                    return;
                }
                let Ok(client) = client else { continue };
                let (rules, conns) = (rules.clone(), conns.clone());
                std::thread::spawn(move || proxy_connection(client, target, rules, conns));
            }
        });
        p
    }

    /// Changes the rules; connections of senders now cut are closed at once.
    pub fn set(&self, f: impl FnOnce(&mut Rules)) {
        let rules = {
            let mut r = self.rules.lock().unwrap();
            f(&mut r);
            r.clone()
        };
        for (from, a, b) in self.conns.lock().unwrap().iter() {
            if rules.cut.contains(from) {
                let _ = a.shutdown(Shutdown::Both);
                let _ = b.shutdown(Shutdown::Both);
            }
        }
    }

    /// Closes every open connection (the senders reconnect).
    pub fn sever(&self) {
        for (_, a, b) in self.conns.lock().unwrap().drain(..) {
            let _ = a.shutdown(Shutdown::Both);
            let _ = b.shutdown(Shutdown::Both);
        }
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        let _ = TcpStream::connect(("127.0.0.1", self.port));
        self.sever();
    }
}

/// A postcard varint (LEB128) at `*at`.
fn varint(b: &[u8], at: &mut usize) -> Option<u64> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let byte = *b.get(*at)?;
        *at += 1;
        v |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Some(v);
        }
    }
    None
}

/// The first frame of a connection, and its sender's node id.
fn first_frame(s: &mut TcpStream) -> Option<(Vec<u8>, u64)> {
    let mut frame = vec![0u8; 6];
    s.read_exact(&mut frame).ok()?;
    let len = u32::from_le_bytes(frame[2..6].try_into().ok()?) as usize;
    if len > 64 << 20 {
        return None;
    }
    frame.resize(6 + len + 4, 0);
    s.read_exact(&mut frame[6..]).ok()?;
    let mut at = 6;
    let (_to, _term, from) = (varint(&frame, &mut at)?, varint(&frame, &mut at)?, varint(&frame, &mut at)?);
    Some((frame, from))
}

fn proxy_connection(
    mut client: TcpStream,
    target: u16,
    rules: Arc<Mutex<Rules>>,
    conns: Arc<Mutex<Vec<(u64, TcpStream, TcpStream)>>>,
) {
    let _ = client.set_read_timeout(Some(Duration::from_secs(10)));
    let Some((frame, from)) = first_frame(&mut client) else { return };
    let _ = client.set_read_timeout(None);
    if rules.lock().unwrap().cut.contains(&from) {
        return;
    }
    let Ok(mut server) = TcpStream::connect(("127.0.0.1", target)) else { return };
    let _ = server.set_nodelay(true);
    let _ = client.set_nodelay(true);
    let (Ok(c2), Ok(s2)) = (client.try_clone(), server.try_clone()) else { return };
    if let (Ok(c3), Ok(s3)) = (client.try_clone(), server.try_clone()) {
        conns.lock().unwrap().push((from, c3, s3));
    }
    let back_rules = rules.clone();
    // The replies: held by the delay, closed with a cut.
    std::thread::spawn(move || pump(s2, c2, from, &back_rules, false));
    if !rules.lock().unwrap().deaf.contains(&from) && server.write_all(&frame).is_err() {
        return;
    }
    pump(client, server, from, &rules, true);
}

fn pump(mut from: TcpStream, mut to: TcpStream, sender: u64, rules: &Mutex<Rules>, forward: bool) {
    let mut buf = vec![0u8; 64 << 10];
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let r = rules.lock().unwrap().clone();
        if r.cut.contains(&sender) {
            break;
        }
        if forward && r.deaf.contains(&sender) {
            continue;
        }
        if !r.delay.is_zero() {
            std::thread::sleep(r.delay);
        }
        if to.write_all(&buf[..n]).is_err() {
            break;
        }
    }
    let _ = from.shutdown(Shutdown::Both);
    let _ = to.shutdown(Shutdown::Both);
}
