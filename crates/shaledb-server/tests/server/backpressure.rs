//! A client that writes before it reads: the server keeps reading while replies wait to be written, as
//! Redis does (its "PIPELINING stresser"), and a client that never reads is held to a bounded amount of
//! server memory: past `MAX_PENDING_OUTPUT` bytes of unread replies the connection stops reading (the
//! client's writes block) instead of buffering without end; a configured `client-output-buffer-limit
//! normal` disconnects as in Redis.

use crate::helpers::{encode, ok, raw, start_server, Client, Resp};
use shaledb_server::server::MAX_PENDING_OUTPUT;
use std::io::{BufReader, Read, Write};
use std::time::{Duration, Instant};

#[test]
fn a_pipeline_is_written_whole_before_any_reply_is_read() {
    let (_dir, server) = start_server(|_| {});
    let mut stream = raw(server.addr());
    stream.set_write_timeout(Some(Duration::from_secs(60))).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    // 40,000 requests (about 20 MB, and as many bytes of replies) written before one reply is read: more
    // than the socket buffers hold both ways, so a server that stops reading while its replies wait would
    // block this write for good.
    const N: usize = 20_000;
    let value = |i: usize| format!("{i:0>1000}");
    let mut requests = Vec::with_capacity(N * 1100);
    for i in 0..N {
        let k = format!("key:{i}");
        requests.extend(encode(&[b"SET", k.as_bytes(), value(i).as_bytes()]));
        requests.extend(encode(&[b"GET", k.as_bytes()]));
    }
    stream.write_all(&requests).expect("the server reads the whole pipeline");
    let mut c = Client { r: BufReader::with_capacity(1 << 16, stream) };
    for i in 0..N {
        assert_eq!(c.read(), Some(ok()), "SET #{i}");
        assert_eq!(c.read(), Some(Resp::Bulk(value(i).into_bytes())), "GET #{i}");
    }
}

/// The bytes of replies the server holds for client `id` (its pending output, `omem=` of CLIENT LIST).
fn pending_output(server: &shaledb_server::RunningServer, id: u64) -> usize {
    let clients = server.shared().clients.lock();
    clients.get(&id).map(|c| c.omem.load(std::sync::atomic::Ordering::Relaxed)).unwrap_or(0)
}

#[test]
fn a_client_that_never_reads_is_held_to_bounded_server_memory() {
    let (_dir, server) = start_server(|_| {});
    let mut setup = Client::connect(server.addr());
    let big = "x".repeat(1 << 20);
    assert_eq!(setup.cmd(&["SET", "big", &big]), ok());

    let mut c = Client::connect(server.addr());
    let id = match c.cmd(&["CLIENT", "ID"]) {
        Resp::Int(id) => id as u64,
        other => panic!("CLIENT ID answered {other:?}"),
    };
    // 300 GETs of a 1 MiB value: 300 MiB of replies, asked for in 6 KB that the socket takes at once.
    const GETS: usize = 300;
    let mut requests = Vec::new();
    for _ in 0..GETS {
        requests.extend(encode(&[b"GET", b"big"]));
    }
    c.r.get_mut().write_all(&requests).unwrap();
    // The server runs GETs until the unread replies pass the cap, then waits for the client.
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut last = 0;
    loop {
        let now = pending_output(&server, id);
        if now >= MAX_PENDING_OUTPUT && now == last {
            break;
        }
        assert!(Instant::now() < deadline, "the pending output never settled (now {now} bytes)");
        last = now;
        std::thread::sleep(Duration::from_millis(200));
    }
    // Bounded: the cap, plus one round's replies and what the kernel would not take.
    let held = pending_output(&server, id);
    assert!(held < MAX_PENDING_OUTPUT + (24 << 20), "{held} bytes of replies held for a client that does not read");
    // Other clients are served meanwhile.
    assert_eq!(setup.cmd(&["PING"]), Resp::Simple("PONG".into()));
    // Back-pressure, not a disconnect: once the client reads, every reply comes, in order.
    let mut value = vec![0u8; big.len()];
    for i in 0..GETS {
        let mut header = String::new();
        while !header.ends_with("\r\n") {
            let mut b = [0u8; 1];
            c.r.read_exact(&mut b).unwrap();
            header.push(b[0] as char);
        }
        assert_eq!(header, format!("${}\r\n", big.len()), "reply #{i}");
        c.r.read_exact(&mut value).unwrap();
        assert!(value.iter().all(|&b| b == b'x'));
        let mut crlf = [0u8; 2];
        c.r.read_exact(&mut crlf).unwrap();
    }
    assert_eq!(c.cmd(&["PING"]), Resp::Simple("PONG".into()));
    assert_eq!(pending_output(&server, id), 0);
}

#[test]
fn the_normal_class_hard_limit_disconnects_a_client_that_does_not_read() {
    let (_dir, server) = start_server(|_| {});
    let mut setup = Client::connect(server.addr());
    assert_eq!(setup.cmd(&["CONFIG", "SET", "client-output-buffer-limit", "normal 4mb 0 0"]), ok());
    assert_eq!(setup.cmd(&["SET", "big", &"y".repeat(1 << 20)]), ok());
    let mut c = Client::connect(server.addr());
    let mut requests = Vec::new();
    for _ in 0..64 {
        requests.extend(encode(&[b"GET", b"big"]));
    }
    c.r.get_mut().write_all(&requests).unwrap();
    // The server closes the connection once more than 4 MB of replies wait; reading then ends early.
    std::thread::sleep(Duration::from_millis(500));
    let mut got = 0usize;
    let mut buf = vec![0u8; 1 << 16];
    loop {
        match c.r.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => got += n,
        }
    }
    assert!(got < 64 << 20, "all {got} bytes of replies came: the limit did not apply");
    assert_eq!(setup.cmd(&["PING"]), Resp::Simple("PONG".into()));
}
