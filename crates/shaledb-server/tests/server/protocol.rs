//! Protocol, limits, security, connection and server commands, over loopback TCP. Every wait is bounded (the
//! clients' 10-second socket timeouts, and explicit deadlines).

use crate::helpers::{bulk, err, ok, raw, start_server, Client, Resp};
use shaledb_server::server::check_protected_mode;
use shaledb_server::{Config, RunningServer};
use std::io::{Read, Write};
use std::time::{Duration, Instant};

/// Sends raw bytes and expects one error reply starting with `want`, then a closed connection.
fn expect_error_and_close(server: &RunningServer, input: &[u8], want: &str) {
    let mut c = Client::connect(server.addr());
    c.r.get_mut().write_all(input).expect("send");
    match c.read() {
        Some(Resp::Error(e)) => assert!(e.starts_with(want), "got {e:?}, want {want:?}"),
        other => panic!("got {other:?}, want an error {want:?}"),
    }
    assert!(c.closed(), "the connection stays open after {want:?}");
}

#[test]
fn bulk_over_proto_max_bulk_len_is_an_error_and_closes() {
    let (_d, server) = start_server(|c| c.limits.max_bulk_len = 1 << 20);
    expect_error_and_close(&server, b"*2\r\n$3\r\nGET\r\n$1048577\r\n", "ERR Protocol error: invalid bulk length");
    // At the limit is fine.
    let mut c = Client::connect(server.addr());
    let v = "x".repeat(1 << 20);
    assert_eq!(c.cmd(&["SET", "k", &v]), ok());
    assert_eq!(c.cmd(&["GET", "k"]), Resp::Bulk(v.into_bytes()));
}

#[test]
fn multibulk_count_over_the_limit_is_an_error_and_closes() {
    let (_d, server) = start_server(|c| c.limits.max_multibulk_len = 100);
    expect_error_and_close(&server, b"*101\r\n", "ERR Protocol error: invalid multibulk length");
    expect_error_and_close(&server, b"*1\r\n+PING\r\n", "ERR Protocol error: expected '$', got '+'");
    expect_error_and_close(&server, b"*abc\r\n", "ERR Protocol error: invalid multibulk length");
    expect_error_and_close(&server, b"SET k \"v\r\n", "ERR Protocol error: unbalanced quotes in request");
}

#[test]
fn query_buffer_over_the_limit_is_an_error_and_closes() {
    let (_d, server) = start_server(|c| c.query_buffer_limit = 64 << 10);
    let mut c = Client::connect(server.addr());
    let mut input = b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1000000\r\n".to_vec();
    input.extend(std::iter::repeat_n(b'v', 200 << 10));
    // The server may close while we are still writing: a failed write is fine, the error must be readable.
    let _ = c.r.get_mut().write_all(&input);
    match c.read() {
        Some(Resp::Error(e)) => assert!(e.contains("query buffer"), "{e}"),
        other => panic!("no query buffer error: {other:?}"),
    }
    assert!(c.closed());
    // Others are not affected.
    assert_eq!(Client::connect(server.addr()).cmd(&["PING"]), Resp::Simple("PONG".into()));
}

#[test]
fn maxclients_refuses_the_one_too_many() {
    let (_d, server) = start_server(|c| c.maxclients = 2);
    let mut a = Client::connect(server.addr());
    let mut b = Client::connect(server.addr());
    assert_eq!(a.cmd(&["PING"]), Resp::Simple("PONG".into()));
    assert_eq!(b.cmd(&["PING"]), Resp::Simple("PONG".into()));
    let mut c = Client::connect(server.addr());
    assert_eq!(c.read(), Some(err("ERR max number of clients reached")));
    assert!(c.closed());
    drop(a);
    // The slot is freed once the server noticed the close.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let mut d = Client::connect(server.addr());
        d.send(&["PING"]);
        match d.read() {
            Some(Resp::Simple(p)) if p == "PONG" => break,
            _ if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
            other => panic!("no slot after a client left: {other:?}"),
        }
    }
    assert_eq!(b.cmd(&["CLIENT", "ID"]), Resp::Int(2));
}

#[test]
fn an_idle_client_is_closed_after_the_timeout() {
    let (_d, server) = start_server(|c| c.timeout = Some(Duration::from_secs(1)));
    let mut c = Client::connect(server.addr());
    assert_eq!(c.cmd(&["PING"]), Resp::Simple("PONG".into()));
    let t = Instant::now();
    assert!(c.closed(), "not closed");
    assert!(t.elapsed() < Duration::from_secs(8), "closed after {:?}", t.elapsed());
}

#[test]
fn a_stalled_client_does_not_stall_the_others() {
    let (_d, server) = start_server(|_| {});
    // One sends half a frame and stops.
    let mut half = raw(server.addr());
    half.write_all(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$100\r\nabc").unwrap();
    // Another writes a big pipeline and never reads the replies (its socket buffers fill up).
    let addr = server.addr();
    let writer = std::thread::spawn(move || {
        let mut s = raw(addr);
        let ping = b"*1\r\n$4\r\nPING\r\n".repeat(4096);
        let deadline = Instant::now() + Duration::from_secs(3);
        while Instant::now() < deadline {
            if s.write_all(&ping).is_err() {
                break;
            }
        }
        s
    });
    std::thread::sleep(Duration::from_millis(300));
    let mut c = Client::connect(server.addr());
    for _ in 0..20 {
        let t = Instant::now();
        assert_eq!(c.cmd(&["PING"]), Resp::Simple("PONG".into()));
        assert!(t.elapsed() < Duration::from_secs(5), "PING took {:?}", t.elapsed());
    }
    assert_eq!(c.cmd(&["SET", "other", "v"]), ok());
    drop(writer.join().unwrap());
    drop(half);
}

#[test]
fn requirepass_noauth_wrongpass_auth_hello_quit() {
    let (_d, server) = start_server(|c| c.requirepass = Some("s3cret".into()));
    let mut c = Client::connect(server.addr());
    assert_eq!(c.cmd(&["GET", "k"]), err("NOAUTH Authentication required."));
    assert_eq!(c.cmd(&["AUTH", "nope"]), err("WRONGPASS invalid username-password pair or user is disabled."));
    assert_eq!(
        c.cmd(&["AUTH", "other", "s3cret"]),
        err("WRONGPASS invalid username-password pair or user is disabled.")
    );
    assert_eq!(c.cmd(&["AUTH", "s3cret"]), ok());
    assert_eq!(c.cmd(&["SET", "k", "v"]), ok());
    // RESET forgets the authentication.
    assert_eq!(c.cmd(&["RESET"]), Resp::Simple("RESET".into()));
    assert_eq!(c.cmd(&["GET", "k"]), err("NOAUTH Authentication required."));

    let mut h = Client::connect(server.addr());
    match h.cmd(&["HELLO", "3"]) {
        Resp::Error(e) => assert!(e.starts_with("NOAUTH"), "{e}"),
        other => panic!("{other:?}"),
    }
    match h.cmd(&["HELLO", "3", "AUTH", "default", "s3cret", "SETNAME", "me"]) {
        Resp::Map(m) => assert!(m.contains(&(bulk("proto"), Resp::Int(3)))),
        other => panic!("HELLO 3 AUTH gave {other:?}"),
    }
    assert_eq!(h.cmd(&["GET", "k"]), bulk("v"));
    assert_eq!(h.cmd(&["CLIENT", "GETNAME"]), bulk("me"));

    let mut q = Client::connect(server.addr());
    assert_eq!(q.cmd(&["QUIT"]), ok());
    assert!(q.closed());
}

#[test]
fn protected_mode_refuses_a_public_address_without_a_password_before_binding() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let cfg = Config { dir: db.clone(), bind: "0.0.0.0".into(), port: 0, ..Config::default() };
    let e = RunningServer::start(cfg.clone()).err().expect("protected mode must refuse 0.0.0.0");
    assert!(e.to_string().contains("protected mode"), "{e}");
    // Refused before anything else: the database directory was never created, so nothing was bound either.
    assert!(!db.exists());
    assert!(check_protected_mode(&Config { protected_mode: false, ..cfg.clone() }).is_ok());
    assert!(check_protected_mode(&Config { requirepass: Some("pw".into()), ..cfg.clone() }).is_ok());
    assert!(check_protected_mode(&Config { bind: "::1".into(), ..cfg.clone() }).is_ok());
    assert!(check_protected_mode(&Config { bind: "localhost".into(), ..cfg }).is_ok());
    // And a server with protected mode off still starts on loopback.
    let (_d, server) = start_server(|c| c.protected_mode = false);
    assert_eq!(Client::connect(server.addr()).cmd(&["PING"]), Resp::Simple("PONG".into()));
}

#[test]
fn hello_3_replies_in_resp3() {
    let (_d, server) = start_server(|_| {});
    let mut c = Client::connect(server.addr());
    c.send(&["HELLO", "3"]);
    let mut first = [0u8; 1];
    c.r.read_exact(&mut first).unwrap();
    assert_eq!(first[0], b'%', "HELLO 3 is not a RESP3 map");
    let mut c2 = Client::connect(server.addr());
    match c2.cmd(&["HELLO", "3"]) {
        Resp::Map(m) => {
            assert!(m.contains(&(bulk("server"), bulk("redis"))));
            assert!(m.contains(&(bulk("role"), bulk("master"))));
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(c2.cmd(&["GET", "missing"]), Resp::Nil);
    match c2.cmd(&["CONFIG", "GET", "maxclients"]) {
        Resp::Map(m) => assert_eq!(m, vec![(bulk("maxclients"), bulk("10000"))]),
        other => panic!("{other:?}"),
    }
    assert_eq!(c2.cmd(&["HELLO", "4"]), err("NOPROTO unsupported protocol version"));
}

#[test]
fn inline_commands_and_a_pipeline_of_1000_pings() {
    let (_d, server) = start_server(|_| {});
    let mut c = Client::connect(server.addr());
    c.r.get_mut().write_all(b"PING\r\nSET greeting \"hello world\"\r\n\r\nGET greeting\n").unwrap();
    assert_eq!(c.read(), Some(Resp::Simple("PONG".into())));
    assert_eq!(c.read(), Some(ok()));
    assert_eq!(c.read(), Some(bulk("hello world")));
    let mut batch = Vec::new();
    for i in 0..1000 {
        if i % 2 == 0 {
            batch.extend_from_slice(b"*1\r\n$4\r\nPING\r\n");
        } else {
            batch.extend_from_slice(format!("*2\r\n$4\r\nPING\r\n${}\r\n{i}\r\n", i.to_string().len()).as_bytes());
        }
    }
    c.r.get_mut().write_all(&batch).unwrap();
    for i in 0..1000 {
        let want = if i % 2 == 0 { Resp::Simple("PONG".into()) } else { bulk(&i.to_string()) };
        assert_eq!(c.read(), Some(want), "reply {i}");
    }
    assert_eq!(c.cmd(&["NOSUCH", "a", "b"]), err("ERR unknown command 'NOSUCH', with args beginning with: 'a' 'b' "));
}

#[test]
fn shutdown_stops_the_server_and_a_restart_keeps_the_data() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = Config { dir: dir.path().join("db"), port: 0, ..Config::default() };
    let mut server = RunningServer::start(cfg.clone()).unwrap();
    let mut c = Client::connect(server.addr());
    for i in 0..50 {
        assert_eq!(c.cmd(&["SET", &format!("k{i}"), &format!("v{i}")]), ok());
    }
    assert_eq!(c.cmd(&["SHUTDOWN", "ABORT"]), err("ERR No shutdown in progress."));
    assert_eq!(c.cmd(&["SHUTDOWN", "BOGUS"]), err("ERR syntax error"));
    c.send(&["SHUTDOWN", "NOSAVE"]);
    assert_eq!(c.read(), None, "SHUTDOWN has no reply");
    server.join().expect("a clean stop");
    // The engine's lock goes with the last handle on the server's state.
    drop(server);
    let server = RunningServer::start(cfg).unwrap();
    let mut c = Client::connect(server.addr());
    for i in 0..50 {
        assert_eq!(c.cmd(&["GET", &format!("k{i}")]), bulk(&format!("v{i}")));
    }
}

#[test]
fn client_commands() {
    let (_d, server) = start_server(|_| {});
    let mut a = Client::connect(server.addr());
    let mut b = Client::connect(server.addr());
    let Resp::Int(a_id) = a.cmd(&["CLIENT", "ID"]) else { panic!() };
    let Resp::Int(b_id) = b.cmd(&["CLIENT", "ID"]) else { panic!() };
    assert_eq!(a.cmd(&["CLIENT", "GETNAME"]), Resp::Nil);
    assert_eq!(a.cmd(&["CLIENT", "SETNAME", "alpha"]), ok());
    assert_eq!(
        a.cmd(&["CLIENT", "SETNAME", "has space"]),
        err("ERR Client names cannot contain spaces, newlines or special characters.")
    );
    assert_eq!(a.cmd(&["CLIENT", "GETNAME"]), bulk("alpha"));
    assert_eq!(a.cmd(&["CLIENT", "SETINFO", "LIB-NAME", "mylib"]), ok());
    assert_eq!(a.cmd(&["CLIENT", "SETINFO", "bogus", "x"]), err("ERR Unrecognized option 'bogus'"));
    assert_eq!(a.cmd(&["CLIENT", "NO-EVICT", "on"]), ok());
    assert_eq!(a.cmd(&["CLIENT", "NO-TOUCH", "maybe"]), err("ERR syntax error"));
    assert_eq!(a.cmd(&["SELECT", "3"]), ok());
    let info = a.cmd(&["CLIENT", "INFO"]).text();
    for field in [
        format!("id={a_id} "),
        format!("addr={} ", a.r.get_ref().local_addr().unwrap()),
        format!("laddr={} ", server.addr()),
        " name=alpha ".into(),
        " flags=e ".into(),
        " db=3 ".into(),
        " cmd=client|info ".into(),
        " resp=2 ".into(),
        " lib-name=mylib ".into(),
        " redir=-1 ".into(),
    ] {
        assert!(info.contains(&field), "{field:?} not in {info:?}");
    }
    assert!(info.ends_with('\n'));
    let list = a.cmd(&["CLIENT", "LIST"]).text();
    assert_eq!(list.lines().count(), 2, "{list}");
    assert!(list.lines().next().unwrap().starts_with(&format!("id={} ", a_id.min(b_id))), "sorted by id");
    let only_b = a.cmd(&["CLIENT", "LIST", "ID", &b_id.to_string()]).text();
    assert!(only_b.starts_with(&format!("id={b_id} ")) && only_b.lines().count() == 1);
    assert_eq!(a.cmd(&["CLIENT", "TRACKING", "on"]), ok());
    assert_eq!(a.cmd(&["CLIENT", "TRACKING", "off"]), ok());
    assert_eq!(a.cmd(&["CLIENT", "NOSUCH"]), err("ERR unknown subcommand 'NOSUCH'. Try CLIENT HELP."));

    // REPLY OFF / SKIP / ON.
    assert_eq!(a.cmd(&["SELECT", "0"]), ok());
    a.send(&["CLIENT", "REPLY", "OFF"]);
    a.send(&["SET", "quiet", "1"]);
    a.send(&["PING"]);
    a.send(&["CLIENT", "REPLY", "ON"]);
    assert_eq!(a.read(), Some(ok()));
    a.send(&["CLIENT", "REPLY", "SKIP"]);
    a.send(&["GET", "quiet"]);
    a.send(&["ECHO", "after"]);
    assert_eq!(a.read(), Some(bulk("after")));
    assert_eq!(a.cmd(&["GET", "quiet"]), bulk("1"));

    // KILL: new form by ID (skips nobody else), by ADDR, old form, and of oneself.
    let mut c = Client::connect(server.addr());
    let Resp::Int(c_id) = c.cmd(&["CLIENT", "ID"]) else { panic!() };
    assert_eq!(a.cmd(&["CLIENT", "KILL", "ID", &c_id.to_string()]), Resp::Int(1));
    // Gone from CLIENT LIST in the very next command, before its socket has closed (redis-py's test_client_kill).
    let list = a.cmd(&["CLIENT", "LIST"]).text();
    assert!(!list.lines().any(|l| l.starts_with(&format!("id={c_id} "))), "{list}");
    assert!(c.closed());
    assert_eq!(a.cmd(&["CLIENT", "KILL", "ID", "0"]), err("ERR client-id should be greater than 0"));
    assert_eq!(a.cmd(&["CLIENT", "KILL", "ID", &a_id.to_string()]), Resp::Int(0), "SKIPME yes by default");
    let mut d = Client::connect(server.addr());
    assert_eq!(d.cmd(&["PING"]), Resp::Simple("PONG".into()));
    let d_addr = d.r.get_ref().local_addr().unwrap().to_string();
    assert_eq!(a.cmd(&["CLIENT", "KILL", "ADDR", &d_addr]), Resp::Int(1));
    assert!(d.closed());
    let b_addr = b.r.get_ref().local_addr().unwrap().to_string();
    assert_eq!(a.cmd(&["CLIENT", "KILL", &b_addr]), ok());
    assert!(b.closed());
    assert_eq!(a.cmd(&["CLIENT", "KILL", "127.0.0.1:1"]), err("ERR No such client"));
    let mut e = Client::connect(server.addr());
    let e_laddr = server.addr().to_string();
    assert_eq!(e.cmd(&["CLIENT", "KILL", "LADDR", &e_laddr, "SKIPME", "no", "ID", &a_id.to_string()]), Resp::Int(1));
    assert!(a.closed());
    let e_addr = e.r.get_ref().local_addr().unwrap().to_string();
    assert_eq!(e.cmd(&["CLIENT", "KILL", &e_addr]), ok(), "killing oneself replies first");
    assert!(e.closed());
}

#[test]
fn reset_goes_back_to_the_defaults() {
    let (_d, server) = start_server(|_| {});
    let mut c = Client::connect(server.addr());
    assert!(matches!(c.cmd(&["HELLO", "3", "SETNAME", "x"]), Resp::Map(_)));
    assert_eq!(c.cmd(&["SELECT", "5"]), ok());
    assert_eq!(c.cmd(&["SET", "in5", "v"]), ok());
    assert_eq!(c.cmd(&["RESET"]), Resp::Simple("RESET".into()));
    // Back to RESP2 (a nil is `$-1`), database 0, no name.
    assert_eq!(c.cmd(&["GET", "in5"]), Resp::Nil);
    assert_eq!(c.cmd(&["CLIENT", "GETNAME"]), Resp::Nil);
    c.send(&["GET", "in5"]);
    let mut line = String::new();
    std::io::BufRead::read_line(&mut c.r, &mut line).unwrap();
    assert_eq!(line, "$-1\r\n");
}

#[test]
fn info_config_time_command_and_save() {
    let (_d, server) = start_server(|_| {});
    let mut c = Client::connect(server.addr());
    assert_eq!(c.cmd(&["SET", "a", "1"]), ok());
    assert_eq!(c.cmd(&["SELECT", "2"]), ok());
    assert_eq!(c.cmd(&["SET", "b", "1"]), ok());
    assert_eq!(c.cmd(&["SET", "c", "1"]), ok());
    let info = c.cmd(&["INFO"]).text();
    for want in [
        "# Server\r\n",
        "redis_mode:standalone\r\n",
        &format!("tcp_port:{}\r\n", server.addr().port()),
        &format!("process_id:{}\r\n", std::process::id()),
        "# Clients\r\nconnected_clients:1\r\n",
        "maxclients:10000\r\n",
        "# Memory\r\n",
        "maxmemory_policy:noeviction\r\n",
        "# Persistence\r\nloading:0\r\n",
        "aof_enabled:1\r\n",
        "aof_last_write_status:ok\r\n",
        "appendfsync:always\r\n",
        "# Stats\r\n",
        "# Replication\r\nrole:master\r\n",
        "connected_slaves:0\r\n",
        "# Keyspace\r\ndb0:keys=1,expires=0,avg_ttl=0\r\ndb2:keys=2,expires=0,avg_ttl=0\r\n",
    ] {
        assert!(info.contains(want), "{want:?} not in INFO:\n{info}");
    }
    let rss: u64 = info.lines().find_map(|l| l.strip_prefix("used_memory_rss:")).unwrap().parse().unwrap();
    assert!(rss > 0);
    let only = c.cmd(&["INFO", "replication", "CLIENTS"]).text();
    assert!(only.contains("# Replication") && only.contains("# Clients") && !only.contains("# Server"), "{only}");
    assert!(c.cmd(&["INFO", "everything"]).text().contains("# Keyspace"));

    // CONFIG GET with patterns; SET live, errors as Redis words them.
    let got = c.cmd(&["CONFIG", "GET", "appendfsync", "max*"]).array();
    let names: Vec<String> = got.iter().step_by(2).map(|r| r.text()).collect();
    assert_eq!(
        names,
        [
            "appendfsync",
            "maxclients",
            "maxmemory",
            "maxmemory-clients",
            "maxmemory-eviction-tenacity",
            "maxmemory-policy",
            "maxmemory-samples"
        ]
    );
    assert_eq!(c.cmd(&["CONFIG", "GET", "save"]).array(), vec![bulk("save"), bulk("")]);
    assert_eq!(c.cmd(&["CONFIG", "GET", "databases"]).array(), vec![bulk("databases"), bulk("16")]);
    assert_eq!(c.cmd(&["CONFIG", "SET", "appendfsync", "everysec"]), ok());
    assert_eq!(server.shared().store.appendfsync().name(), "everysec");
    assert!(c.cmd(&["INFO", "persistence"]).text().contains("appendfsync:everysec\r\n"));
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "nosuch", "1"]),
        err("ERR Unknown option or number of arguments for CONFIG SET - 'nosuch'")
    );
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "databases", "32"]),
        err("ERR CONFIG SET failed (possibly related to argument 'databases') - can't set immutable config")
    );
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "appendfsync", "sometimes"]),
        err("ERR CONFIG SET failed (possibly related to argument 'appendfsync') - argument(s) must be one of the following: always, everysec, no")
    );
    // All or nothing.
    assert!(matches!(c.cmd(&["CONFIG", "SET", "maxclients", "50", "databases", "32"]), Resp::Error(_)));
    assert_eq!(c.cmd(&["CONFIG", "GET", "maxclients"]).array()[1], bulk("10000"));
    assert_eq!(c.cmd(&["CONFIG", "SET", "maxclients", "50", "timeout", "0"]), ok());
    assert_eq!(c.cmd(&["CONFIG", "GET", "maxclients"]).array()[1], bulk("50"));
    assert_eq!(c.cmd(&["CONFIG", "REWRITE"]), err("ERR The server is running without a config file"));
    assert_eq!(c.cmd(&["CONFIG", "RESETSTAT"]), ok());

    let t = c.cmd(&["TIME"]).array();
    let secs: u64 = t[0].text().parse().unwrap();
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
    assert!(secs.abs_diff(now) <= 2);
    assert!(t[1].text().parse::<u32>().unwrap() < 1_000_000);

    let Resp::Int(count) = c.cmd(&["COMMAND", "COUNT"]) else { panic!() };
    assert_eq!(c.cmd(&["COMMAND"]).array().len() as i64, count);
    let info = c.cmd(&["COMMAND", "INFO", "get", "nosuch"]).array();
    assert_eq!(info[1], Resp::Nil);
    let get = info[0].clone().array();
    assert_eq!(get.len(), 10);
    assert_eq!(
        (get[0].text(), &get[1], &get[3], &get[4], &get[5]),
        ("get".into(), &Resp::Int(2), &Resp::Int(1), &Resp::Int(1), &Resp::Int(1))
    );
    assert!(c.cmd(&["COMMAND", "LIST"]).array().contains(&bulk("config")));
    // Subcommands are listed too, as in Redis 7.0 (`client|list` ...).
    let cl = c.cmd(&["COMMAND", "LIST", "FILTERBY", "PATTERN", "cl*"]).array();
    assert!(cl.contains(&bulk("client")) && cl.contains(&bulk("client|list")), "{cl:?}");
    assert!(cl.iter().all(|n| n.text().starts_with("client") || n.text().starts_with("cluster")), "{cl:?}");
    assert_eq!(c.cmd(&["COMMAND", "GETKEYS", "SET", "k", "v"]).array(), vec![bulk("k")]);
    assert_eq!(c.cmd(&["COMMAND", "GETKEYS", "PING", "x"]), err("ERR The command has no key arguments"));
    // COMMAND GETKEYS needs a command and at least one argument (Redis 7.0's arity of -4).
    assert_eq!(
        c.cmd(&["COMMAND", "GETKEYS", "PING"]),
        err("ERR wrong number of arguments for 'command|getkeys' command")
    );
    let docs = c.cmd(&["COMMAND", "DOCS", "ping"]).array();
    assert_eq!(docs[0], bulk("ping"));

    // Before any SAVE, LASTSAVE is the start's time (config_save.rs tests SAVE and BGSAVE).
    let Resp::Int(last) = c.cmd(&["LASTSAVE"]) else { panic!() };
    assert!((last as u64).abs_diff(now) < 60);
}
