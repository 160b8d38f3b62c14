//! `CONFIG SET port` / `bind` at run time, as Redis 7.0 does it: the server listens on the new address and
//! closes the old listener (connected clients stay); a port it cannot bind fails the whole CONFIG SET, which
//! then changes nothing.

use crate::helpers::{bulk, err, ok, start_server, Client, Resp};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::Duration;

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn refused(addr: SocketAddr) -> bool {
    TcpStream::connect_timeout(&addr, Duration::from_secs(2)).is_err()
}

#[test]
fn config_set_port_moves_the_listener() {
    let (_dir, server) = start_server(|_| {});
    let old = server.addr();
    let mut c = Client::connect(old);
    let port = free_port();
    assert_eq!(c.cmd(&["CONFIG", "SET", "port", &port.to_string()]), ok());
    assert_eq!(c.cmd(&["CONFIG", "GET", "port"]).array()[1], bulk(&port.to_string()));
    let new: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    assert_eq!(Client::connect(new).cmd(&["PING"]), Resp::Simple("PONG".into()));
    let info = Client::connect(new).cmd(&["INFO", "server"]).text();
    assert!(info.contains(&format!("tcp_port:{port}\r\n")), "{info}");
    // The old listener is closed (the accept loop takes the new one at its next turn); this connection stays.
    let mut closed = false;
    for _ in 0..50 {
        if refused(old) {
            closed = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(closed, "the old port still accepts connections");
    assert_eq!(c.cmd(&["PING"]), Resp::Simple("PONG".into()));
}

#[test]
fn a_port_in_use_fails_the_whole_config_set() {
    let (_dir, server) = start_server(|_| {});
    let mut c = Client::connect(server.addr());
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port().to_string();
    let before = c.cmd(&["CONFIG", "GET", "maxmemory"]);
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "maxmemory", "10000001", "port", &port]),
        err("ERR CONFIG SET failed (possibly related to argument 'port') - Unable to listen on this port. Check server logs.")
    );
    // Nothing of it applied, and the server still listens where it did.
    assert_eq!(c.cmd(&["CONFIG", "GET", "maxmemory"]), before);
    assert_eq!(Client::connect(server.addr()).cmd(&["PING"]), Resp::Simple("PONG".into()));
}
