//! Lua scripting and functions (issue 40): EVAL/EVALSHA/EVAL_RO, SCRIPT, FUNCTION, FCALL; the conversions
//! and error texts of Redis 7.0, atomicity against other clients, durable libraries, SCRIPT KILL and BUSY,
//! the memory cap, and a script's writes after a kill -9.

use crate::helpers::{connect, e, i, q, s, start_server};
use bytes::Bytes;
use redis::Value;
use shaledb::{Db, Options};
use shaledb_server::commands::lookup;
use shaledb_server::commit::Store;
use shaledb_server::resp::Reply;
use shaledb_server::store::ReadCtx;
use shaledb_server::Appendfsync;
use shaledb_vfs::MemFs;
use std::sync::Arc;
use std::time::{Duration, Instant};

#[test]
fn lua_values_and_replies_convert_as_in_redis() {
    let (_dir, server) = start_server(|_| {});
    let mut c = connect(&server);
    assert_eq!(i(&mut c, &["EVAL", "return 100.5", "0"]), 100);
    assert_eq!(s(&mut c, &["EVAL", "return 'hello'", "0"]), Some("hello".into()));
    assert_eq!(i(&mut c, &["EVAL", "return true", "0"]), 1);
    assert_eq!(s(&mut c, &["EVAL", "return false", "0"]), None);
    assert_eq!(q::<String>(&mut c, &["EVAL", "return {ok='fine'}", "0"]), "fine");
    assert_eq!(e(&mut c, &["EVAL", "return {err='MY failure'}", "0"]), "MY failure");
    let v: Value = q(&mut c, &["EVAL", "return {1,2,3,'x',nil,5}", "0"]);
    assert_eq!(v, Value::Array(vec![Value::Int(1), Value::Int(2), Value::Int(3), Value::BulkString(b"x".to_vec())]));
    // KEYS and ARGV, and replies turned into Lua values and back.
    let v: Value = q(&mut c, &["EVAL", "return {KEYS[1], ARGV[1], ARGV[2]}", "1", "k", "a", "b"]);
    assert_eq!(
        v,
        Value::Array(vec![
            Value::BulkString(b"k".to_vec()),
            Value::BulkString(b"a".to_vec()),
            Value::BulkString(b"b".to_vec())
        ])
    );
    q::<()>(&mut c, &["RPUSH", "l", "a", "b"]);
    let v: Value = q(
        &mut c,
        &[
            "EVAL",
            "return {redis.call('lrange', KEYS[1], 0, -1), redis.call('get', 'nokey'), redis.call('llen', KEYS[1])}",
            "1",
            "l",
        ],
    );
    assert_eq!(
        v,
        Value::Array(vec![
            Value::Array(vec![Value::BulkString(b"a".to_vec()), Value::BulkString(b"b".to_vec())]),
            Value::Nil,
            Value::Int(2)
        ])
    );
    assert_eq!(q::<String>(&mut c, &["EVAL", "return redis.call('set', 'x', 1)", "0"]), "OK");
    assert_eq!(
        q::<String>(&mut c, &["EVAL", "return redis.sha1hex('')", "0"]),
        "da39a3ee5e6b4b0d3255bfef95601890afd80709"
    );
    assert_eq!(e(&mut c, &["EVAL", "return redis.error_reply('MY_CODE custom')", "0"]), "MY_CODE custom");
}

#[test]
fn script_errors_read_like_redis() {
    let (_dir, server) = start_server(|_| {});
    let mut c = connect(&server);
    q::<()>(&mut c, &["SET", "str", "abc"]);
    let sha = |body: &str| sha1_smol::Sha1::from(body).digest().to_string();
    let body = "return redis.call('incr',KEYS[1])";
    assert_eq!(
        e(&mut c, &["EVAL", body, "1", "str"]),
        format!("ERR value is not an integer or out of range script: {}, on @user_script:1.", sha(body))
    );
    assert_eq!(
        e(&mut c, &["EVAL", "return redis.pcall('incr',KEYS[1])", "1", "str"]),
        "ERR value is not an integer or out of range"
    );
    assert_eq!(
        e(&mut c, &["EVAL", "return a", "0"]),
        format!(
            "ERR user_script:1: Script attempted to access nonexistent global variable 'a' script: {}, on @user_script:1.",
            sha("return a")
        )
    );
    assert!(e(&mut c, &["EVAL", "a=1", "0"]).contains("Attempt to modify a readonly table"));
    assert!(
        e(&mut c, &["EVAL", "return redis.call('nosuch')", "0"]).contains("Unknown Redis command called from script")
    );
    assert!(e(&mut c, &["EVAL", "return redis.call('get')", "0"])
        .contains("Wrong number of args calling Redis command from script"));
    for forbidden in
        ["return redis.call('multi')", "return redis.call('blpop','l',0)", "return redis.call('eval','return 1','0')"]
    {
        assert!(
            e(&mut c, &["EVAL", forbidden, "0"]).contains("This Redis command is not allowed from script"),
            "{forbidden}"
        );
    }
    assert_eq!(
        e(&mut c, &["EVAL", "return x y", "0"]),
        "ERR Error compiling script (new function): user_script:1: '<eof>' expected near 'y'"
    );
    assert_eq!(e(&mut c, &["EVAL", "return 1", "-1"]), "ERR Number of keys can't be negative");
    assert_eq!(e(&mut c, &["EVAL", "return 1", "3", "a"]), "ERR Number of keys can't be greater than number of args");
    assert_eq!(e(&mut c, &["EVAL", "return 1", "x"]), "ERR value is not an integer or out of range");
    // A script that failed keeps the writes it made before (as in Redis).
    assert!(e(&mut c, &["EVAL", "redis.call('set','kept','1'); error('late')", "0"]).contains("late"));
    assert_eq!(s(&mut c, &["GET", "kept"]), Some("1".into()));
}

#[test]
fn evalsha_finds_only_cached_scripts() {
    let (_dir, server) = start_server(|_| {});
    let mut c = connect(&server);
    assert_eq!(
        e(&mut c, &["EVALSHA", "ffd632c7d33e571e9f24556ebed26c3479a87130", "0"]),
        "NOSCRIPT No matching script. Please use EVAL."
    );
    assert_eq!(e(&mut c, &["EVALSHA", "short", "0"]), "NOSCRIPT No matching script. Please use EVAL.");
    let sha: String = q(&mut c, &["SCRIPT", "LOAD", "return ARGV[1]"]);
    assert_eq!(sha, sha1_smol::Sha1::from("return ARGV[1]").digest().to_string());
    assert_eq!(s(&mut c, &["EVALSHA", &sha, "0", "v"]), Some("v".into()));
    assert_eq!(s(&mut c, &["EVALSHA", &sha.to_uppercase(), "0", "w"]), Some("w".into()));
    // EVAL caches too.
    assert_eq!(i(&mut c, &["EVAL", "return 5", "0"]), 5);
    let five = sha1_smol::Sha1::from("return 5").digest().to_string();
    assert_eq!(q::<Vec<i64>>(&mut c, &["SCRIPT", "EXISTS", &sha, &five, "0000"]), [1, 1, 0]);
    assert_eq!(server.shared().store.scripts.number_of_cached_scripts(), 2);
    assert_eq!(q::<String>(&mut c, &["SCRIPT", "FLUSH"]), "OK");
    assert_eq!(server.shared().store.scripts.number_of_cached_scripts(), 0);
    assert_eq!(q::<Vec<i64>>(&mut c, &["SCRIPT", "EXISTS", &sha, &five]), [0, 0]);
    assert!(e(&mut c, &["EVALSHA", &sha, "0"]).starts_with("NOSCRIPT"));
    assert_eq!(e(&mut c, &["SCRIPT", "FLUSH", "x"]), "ERR SCRIPT FLUSH only support SYNC|ASYNC option");
    assert_eq!(e(&mut c, &["SCRIPT", "KILL"]), "NOTBUSY No scripts in execution right now.");
    assert_eq!(e(&mut c, &["SCRIPT", "NOPE"]), "ERR unknown subcommand 'NOPE'. Try SCRIPT HELP.");
}

#[test]
fn read_only_scripts_and_functions_refuse_writes() {
    let (_dir, server) = start_server(|_| {});
    let mut c = connect(&server);
    q::<()>(&mut c, &["SET", "k", "v"]);
    assert_eq!(s(&mut c, &["EVAL_RO", "return redis.call('get', KEYS[1])", "1", "k"]), Some("v".into()));
    assert!(e(&mut c, &["EVAL_RO", "return redis.call('del', KEYS[1])", "1", "k"])
        .starts_with("ERR Write commands are not allowed from read-only scripts."));
    assert!(e(&mut c, &["EVAL", "#!lua flags=no-writes\nreturn redis.call('set','k','w')", "0"])
        .contains("Write commands are not allowed from read-only scripts."));
    assert_eq!(
        e(&mut c, &["EVAL_RO", "#!lua\nreturn 1", "0"]),
        "ERR Can not execute a script with write flag using *_ro command."
    );
    let lib = "#!lua name=rolib\nredis.register_function{function_name='rd', callback=function(keys) return redis.call('get', keys[1]) end, flags={'no-writes'}}\nredis.register_function('wr', function(keys) return redis.call('set', keys[1], 'x') end)";
    assert_eq!(q::<String>(&mut c, &["FUNCTION", "LOAD", lib]), "rolib");
    assert_eq!(s(&mut c, &["FCALL_RO", "rd", "1", "k"]), Some("v".into()));
    assert_eq!(
        e(&mut c, &["FCALL_RO", "wr", "1", "k"]),
        "ERR Can not execute a script with write flag using *_ro command."
    );
    assert_eq!(q::<String>(&mut c, &["FCALL", "wr", "1", "k"]), "OK");
    assert_eq!(s(&mut c, &["GET", "k"]), Some("x".into()));
    assert_eq!(e(&mut c, &["FCALL", "nosuch", "0"]), "ERR Function not found");
    assert_eq!(e(&mut c, &["FCALL", "rd", "x"]), "ERR Bad number of keys provided");
}

/// A script's commands run with no other client's write between them: 1000 INCRs inside one script move
/// the counter by exactly 1000 while other clients INCR it at the same time.
#[test]
fn a_script_is_atomic_against_other_clients() {
    let (_dir, server) = start_server(|c| c.appendfsync = Appendfsync::Everysec);
    let addr = server.addr();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writers: Vec<_> = (0..2)
        .map(|_| {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let client = redis::Client::open(format!("redis://{addr}/")).unwrap();
                let mut c = client.get_connection().unwrap();
                let mut n = 0i64;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let _: i64 = redis::cmd("INCR").arg("counter").query(&mut c).unwrap();
                    n += 1;
                }
                n
            })
        })
        .collect();
    let mut c = connect(&server);
    let script = "local a = tonumber(redis.call('get', KEYS[1]) or '0') \
                  for i = 1, 1000 do redis.call('incr', KEYS[1]) end \
                  return tonumber(redis.call('get', KEYS[1])) - a";
    let mut scripted = 0;
    for _ in 0..20 {
        assert_eq!(i(&mut c, &["EVAL", script, "1", "counter"]), 1000);
        scripted += 1000;
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let others: i64 = writers.into_iter().map(|w| w.join().unwrap()).sum();
    assert_eq!(i(&mut c, &["GET", "counter"]), scripted + others);
}

#[test]
fn a_function_library_survives_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let config = || shaledb_server::Config {
        dir: dir.path().join("db"),
        port: 0,
        bind: "127.0.0.1".into(),
        ..shaledb_server::Config::default()
    };
    let lib = "#!lua name=mylib\nredis.register_function('double', function(keys, args) return args[1] * 2 end)";
    let other = "#!lua name=gone\nredis.register_function('g', function() return 1 end)";
    {
        let server = shaledb_server::RunningServer::start(config()).unwrap();
        let mut c = connect(&server);
        assert_eq!(q::<String>(&mut c, &["FUNCTION", "LOAD", lib]), "mylib");
        assert_eq!(q::<String>(&mut c, &["FUNCTION", "LOAD", other]), "gone");
        assert_eq!(e(&mut c, &["FUNCTION", "LOAD", lib]), "ERR Library 'mylib' already exists");
        assert_eq!(q::<String>(&mut c, &["FUNCTION", "DELETE", "gone"]), "OK");
        assert_eq!(e(&mut c, &["FUNCTION", "DELETE", "gone"]), "ERR Library not found");
        assert_eq!(i(&mut c, &["FCALL", "double", "0", "21"]), 42);
        // FLUSHALL leaves functions alone, as in Redis.
        q::<()>(&mut c, &["FLUSHALL"]);
        server.shutdown().unwrap();
    }
    let server = shaledb_server::RunningServer::start(config()).unwrap();
    let mut c = connect(&server);
    assert_eq!(i(&mut c, &["FCALL", "double", "0", "5"]), 10);
    assert_eq!(e(&mut c, &["FCALL", "g", "0"]), "ERR Function not found");
    let list: Value = q(&mut c, &["FUNCTION", "LIST", "WITHCODE"]);
    let Value::Array(libs) = list else { panic!("{list:?}") };
    assert_eq!(libs.len(), 1);
    let Value::Array(fields) = &libs[0] else { panic!("{libs:?}") };
    assert_eq!(fields[1], Value::BulkString(b"mylib".to_vec()));
    assert_eq!(fields[7], Value::BulkString(lib.as_bytes().to_vec()));
    assert_eq!(q::<String>(&mut c, &["FUNCTION", "FLUSH"]), "OK");
    server.shutdown().unwrap();
    let server = shaledb_server::RunningServer::start(config()).unwrap();
    let mut c = connect(&server);
    assert_eq!(e(&mut c, &["FCALL", "double", "0", "5"]), "ERR Function not found");
    assert_eq!(q::<Vec<Value>>(&mut c, &["FUNCTION", "LIST"]), Vec::<Value>::new());
}

#[test]
fn function_load_checks_read_like_redis() {
    let (_dir, server) = start_server(|_| {});
    let mut c = connect(&server);
    let load = |c: &mut redis::Connection, code: &str| e(c, &["FUNCTION", "LOAD", code]);
    assert_eq!(load(&mut c, "return 1"), "ERR Missing library metadata");
    assert_eq!(load(&mut c, "#!lua\nx"), "ERR Library name was not given");
    assert_eq!(load(&mut c, "#!luax name=a\nx"), "ERR Engine 'luax' not found");
    assert_eq!(load(&mut c, "#!lua name=a foo=bar\nx"), "ERR Invalid metadata value given: foo=bar");
    assert!(load(&mut c, "#!lua name=a-b\n").starts_with("ERR Library names can only contain letters"));
    assert_eq!(
        load(&mut c, "#!lua name=a\nlocal x = "),
        "ERR Error compiling function: user_function:2: unexpected symbol near '<eof>'"
    );
    assert_eq!(load(&mut c, "#!lua name=a\nlocal x = 1"), "ERR No functions registered");
    assert_eq!(
        load(
            &mut c,
            "#!lua name=a\nredis.register_function('f', function() end) redis.register_function('f', function() end)"
        ),
        "ERR Error registering functions: ERR Function already exists in the library"
    );
    assert_eq!(
        q::<String>(
            &mut c,
            &["FUNCTION", "LOAD", "#!lua name=a\nredis.register_function('f', function() return 1 end)"]
        ),
        "a"
    );
    assert_eq!(
        load(&mut c, "#!lua name=b\nredis.register_function('f', function() end)"),
        "ERR Function f already exists"
    );
    // A library whose code never ends is stopped at its load deadline.
    assert!(load(&mut c, "#!lua name=slow\nwhile true do end").contains("FUNCTION LOAD timeout"));
    assert_eq!(i(&mut c, &["FCALL", "f", "0"]), 1);
    assert_eq!(e(&mut c, &["FUNCTION", "LOAD", "x", "y"]), "ERR Unknown option given: x");
    assert_eq!(e(&mut c, &["FUNCTION", "LIST", "LIBRARYNAME"]), "ERR library name argument was not given");
    assert_eq!(e(&mut c, &["FUNCTION", "FLUSH", "x"]), "ERR FUNCTION FLUSH only supports SYNC|ASYNC option");
}

/// An endless loop is stopped by SCRIPT KILL from another connection; meanwhile, past the threshold, other
/// clients get BUSY; after the kill everything answers again.
#[test]
fn script_kill_stops_an_endless_loop() {
    let (_dir, server) = start_server(|_| {});
    let addr = server.addr();
    let mut c = connect(&server);
    assert_eq!(q::<String>(&mut c, &["CONFIG", "SET", "busy-reply-threshold", "100"]), "OK");
    let looping = std::thread::spawn(move || {
        let client = redis::Client::open(format!("redis://{addr}/")).unwrap();
        let mut c = client.get_connection().unwrap();
        redis::cmd("EVAL").arg("local i = 0 while true do i = i + 1 end").arg(0).query::<Value>(&mut c)
    });
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match redis::cmd("PING").query::<String>(&mut c) {
            Err(err) if err.code() == Some("BUSY") => break,
            _ if Instant::now() > deadline => panic!("never BUSY"),
            _ => std::thread::sleep(Duration::from_millis(20)),
        }
    }
    assert_eq!(
        e(&mut c, &["FUNCTION", "KILL"]),
        "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE."
    );
    // As in Redis 7.0, FUNCTION STATS is answered only while a function (not an EVAL script) runs.
    assert_eq!(
        e(&mut c, &["FUNCTION", "STATS"]),
        "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE."
    );
    assert_eq!(q::<String>(&mut c, &["SCRIPT", "KILL"]), "OK");
    let err = looping.join().unwrap().unwrap_err();
    assert!(err.to_string().contains("Script killed by user with SCRIPT KILL"), "{err}");
    assert_eq!(q::<String>(&mut c, &["PING"]), "PONG");
    assert_eq!(e(&mut c, &["SCRIPT", "KILL"]), "NOTBUSY No scripts in execution right now.");
}

/// A script that wrote cannot be killed; a function is killed with FUNCTION KILL.
#[test]
fn a_script_that_wrote_is_unkillable_and_functions_die_by_function_kill() {
    let (_dir, server) = start_server(|_| {});
    let addr = server.addr();
    let mut c = connect(&server);
    assert_eq!(q::<String>(&mut c, &["CONFIG", "SET", "lua-time-limit", "50"]), "OK");
    q::<String>(
        &mut c,
        &["FUNCTION", "LOAD", "#!lua name=loops\nredis.register_function('spin', function() while true do end end)"],
    );
    let spin = std::thread::spawn(move || {
        let client = redis::Client::open(format!("redis://{addr}/")).unwrap();
        let mut c = client.get_connection().unwrap();
        redis::cmd("FCALL").arg("spin").arg(0).query::<Value>(&mut c)
    });
    let deadline = Instant::now() + Duration::from_secs(10);
    while !server.shared().store.scripts.is_running() {
        assert!(Instant::now() < deadline);
        std::thread::sleep(Duration::from_millis(10));
    }
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(
        e(&mut c, &["PING"]),
        "BUSY Redis is busy running a script. You can only call FUNCTION KILL or SHUTDOWN NOSAVE."
    );
    assert_eq!(q::<String>(&mut c, &["FUNCTION", "KILL"]), "OK");
    assert!(spin.join().unwrap().unwrap_err().to_string().contains("killed by user"));

    let writer = std::thread::spawn(move || {
        let client = redis::Client::open(format!("redis://{addr}/")).unwrap();
        let mut c = client.get_connection().unwrap();
        redis::cmd("EVAL").arg("redis.call('set','w','1') while true do end").arg(0).query::<Value>(&mut c)
    });
    while !server.shared().store.scripts.is_running() {
        assert!(Instant::now() < deadline + Duration::from_secs(10));
        std::thread::sleep(Duration::from_millis(10));
    }
    std::thread::sleep(Duration::from_millis(100));
    assert!(e(&mut c, &["SCRIPT", "KILL"]).starts_with("UNKILLABLE Sorry the script already executed write commands"));
    // SHUTDOWN stops it anyway, and the half-done script's write is not acknowledged.
    server.shared().store.scripts.abort_for_shutdown();
    assert!(writer.join().unwrap().is_err());
}

#[test]
fn a_script_that_allocates_without_bound_gets_an_error() {
    let (_dir, server) = start_server(|_| {});
    let mut c = connect(&server);
    let err = e(
        &mut c,
        &["EVAL", "local t = {} local s = string.rep('x', 1024 * 1024) for i = 1, 1e9 do t[i] = s .. i end", "0"],
    );
    assert!(err.contains("not enough memory"), "{err}");
    assert_eq!(i(&mut c, &["EVAL", "return 3", "0"]), 3);
    assert_eq!(q::<String>(&mut c, &["PING"]), "PONG");
}

fn eval(body: &str, numkeys: usize, rest: &[&str]) -> (&'static shaledb_server::commands::Spec, Vec<Bytes>) {
    let mut args = vec![Bytes::from("eval"), Bytes::from(body.to_string()), Bytes::from(numkeys.to_string())];
    args.extend(rest.iter().map(|a| Bytes::from(a.to_string())));
    (lookup(b"eval").expect("EVAL exists"), args)
}

fn dbsize(store: &Store) -> Reply {
    let spec = lookup(b"dbsize").expect("DBSIZE exists");
    let shaledb_server::commands::Handler::Read(f) = spec.handler else { panic!("DBSIZE is a read") };
    f(&ReadCtx::new(&store.db(), store.keyspace(), 0, shaledb_server::store::now_ms()), &vec![Bytes::from("dbsize")])
}

/// A script's writes go to the engine as one batch: after a kill -9 they are all there (the script was
/// acknowledged) or none is (it was still running).
#[test]
fn a_scripts_writes_are_all_there_or_none_after_a_process_kill() {
    let fs = MemFs::new();
    let db = Db::open("/db", Options { fs: Arc::new(fs.clone()), ..Options::default() }).expect("open");
    let store = Store::start(db, Appendfsync::Always);
    let writes = "for i = 1, 500 do redis.call('set', 'k' .. i, i) end return 1";
    let r = store.submit_and_wait(0, vec![eval(writes, 0, &[])]).expect("answered");
    assert_eq!(r, [Reply::Int(1)]);

    // A second script writes 500 more keys, then spins: kill -9 while it runs.
    let s2 = store.clone();
    let running = std::thread::spawn(move || {
        s2.submit_and_wait(
            0,
            vec![eval("for i = 501, 1000 do redis.call('set', 'k' .. i, i) end while true do end", 0, &[])],
        )
    });
    let deadline = Instant::now() + Duration::from_secs(10);
    while !store.scripts.is_running() {
        assert!(Instant::now() < deadline);
        std::thread::sleep(Duration::from_millis(5));
    }
    std::thread::sleep(Duration::from_millis(100));
    let killed = fs.deep_clone();
    store.scripts.abort_for_shutdown();
    let r = running.join().unwrap().expect("answered");
    assert!(matches!(&r[0], Reply::Error(e) if e.starts_with("MISCONF")), "{r:?}");
    store.shutdown();
    drop(store);

    let db = Db::open("/db", Options { fs: Arc::new(killed), ..Options::default() }).expect("reopen");
    let store = Store::start(db, Appendfsync::Always);
    assert_eq!(dbsize(&store), Reply::Int(500), "the first script whole, nothing of the second");
    store.shutdown();
}

/// A script that catches the kill with `pcall` is stopped all the same.
#[test]
fn script_kill_stops_a_loop_that_catches_errors() {
    let (_dir, server) = start_server(|_| {});
    let addr = server.addr();
    let looping = std::thread::spawn(move || {
        let client = redis::Client::open(format!("redis://{addr}/")).unwrap();
        let mut c = client.get_connection().unwrap();
        redis::cmd("EVAL")
            .arg("local f = function() while 1 do redis.call('ping') end end while 1 do pcall(f) end")
            .arg(0)
            .query::<Value>(&mut c)
    });
    let deadline = Instant::now() + Duration::from_secs(10);
    while !server.shared().store.scripts.is_running() {
        assert!(Instant::now() < deadline);
        std::thread::sleep(Duration::from_millis(10));
    }
    let mut c = connect(&server);
    assert_eq!(q::<String>(&mut c, &["SCRIPT", "KILL"]), "OK");
    let err = looping.join().unwrap().unwrap_err();
    assert!(err.to_string().contains("Script killed by user with SCRIPT KILL"), "{err}");
    assert_eq!(i(&mut c, &["EVAL", "return 1", "0"]), 1);
}

/// FUNCTION DUMP and FUNCTION RESTORE: payloads move libraries from redis-server to ShaleDB and back, with
/// Redis's policies (APPEND refuses a taken library name, REPLACE replaces it, FLUSH starts from nothing),
/// Redis's errors, and nothing changed by a restore that fails.
#[test]
fn function_dump_and_restore_move_libraries_to_and_from_redis() {
    let Some(redis) = crate::helpers::redis_or_skip() else { return };
    let (_dir, server) = start_server(|_| {});
    let mut r = redis::Client::open(format!("redis://{}/", redis.addr)).unwrap().get_connection().unwrap();
    let mut c = connect(&server);
    let lib1 = "#!lua name=lib1\nredis.register_function('f1', function() return 1 end)";
    let lib2 = "#!lua name=lib2\nredis.register_function('f2', function(keys, args) return args[1] end)";
    for con in [&mut r, &mut c] {
        q::<()>(con, &["FUNCTION", "FLUSH"]);
        assert_eq!(q::<String>(con, &["FUNCTION", "LOAD", lib1]), "lib1");
        assert_eq!(q::<String>(con, &["FUNCTION", "LOAD", lib2]), "lib2");
    }
    let from_redis: Vec<u8> = q(&mut r, &["FUNCTION", "DUMP"]);
    let from_shaledb: Vec<u8> = q(&mut c, &["FUNCTION", "DUMP"]);
    // Not the same bytes: Redis lists its libraries in hash order and compresses long code with LZF (which
    // ShaleDB reads); each server restores the other's payload below.
    assert_ne!(from_shaledb.len(), 0);

    let restore = |con: &mut redis::Connection, payload: &[u8], policy: Option<&str>| -> Result<(), String> {
        let mut cmd = redis::cmd("FUNCTION");
        cmd.arg("RESTORE").arg(payload);
        if let Some(p) = policy {
            cmd.arg(p);
        }
        cmd.query::<()>(con).map_err(|e| e.detail().unwrap_or_default().to_string())
    };
    // Both libraries are taken: Redis names the first it meets in its hash order, ShaleDB the first by name.
    let taken = |e: String| e == "Library lib1 already exists" || e == "Library lib2 already exists";
    for (con, payload) in [(&mut c, &from_redis), (&mut r, &from_shaledb)] {
        // APPEND (the default) refuses a library name taken; nothing changes.
        assert!(taken(restore(con, payload, None).unwrap_err()));
        assert!(taken(restore(con, payload, Some("APPEND")).unwrap_err()));
        assert_eq!(restore(con, payload, Some("REPLACE")), Ok(()));
        q::<()>(con, &["FUNCTION", "FLUSH"]);
        assert_eq!(restore(con, payload, None), Ok(()));
        assert_eq!(i(con, &["FCALL", "f1", "0"]), 1);
        assert_eq!(s(con, &["FCALL", "f2", "0", "x"]), Some("x".into()));
        // A library of another name that registers a function taken: refused, whatever the policy.
        let clash = "#!lua name=other\nredis.register_function('f1', function() return 2 end)";
        q::<()>(con, &["FUNCTION", "DELETE", "lib1"]);
        q::<String>(con, &["FUNCTION", "LOAD", clash]);
        assert_eq!(restore(con, payload, Some("REPLACE")).unwrap_err(), "Function f1 already exists");
        assert_eq!(i(con, &["FCALL", "f1", "0"]), 2);
        // FLUSH drops every library first, the clashing one included.
        assert_eq!(restore(con, payload, Some("FLUSH")), Ok(()));
        assert_eq!(i(con, &["FCALL", "f1", "0"]), 1);
        let listed: Vec<Value> = q(con, &["FUNCTION", "LIST"]);
        assert_eq!(listed.len(), 2);
    }
    // Errors, the same text on both servers.
    let mut bad = from_redis.clone();
    let last = bad.len() - 1;
    bad[last] ^= 1;
    for con in [&mut r, &mut c] {
        assert_eq!(restore(con, &bad, None).unwrap_err(), "DUMP payload version or checksum are wrong");
        assert_eq!(
            restore(con, &from_redis, Some("MERGE")).unwrap_err(),
            "Wrong restore policy given, value should be either FLUSH, APPEND or REPLACE."
        );
    }
    // A well-formed payload of a key is not a function.
    let key_payload: Vec<u8> = {
        q::<()>(&mut r, &["SET", "k", "v"]);
        q(&mut r, &["DUMP", "k"])
    };
    assert_eq!(restore(&mut r, &key_payload, None).unwrap_err(), "given type is not a function");
    assert_eq!(restore(&mut c, &key_payload, None).unwrap_err(), "given type is not a function");
    // Restored libraries are stored like loaded ones (the restart test above shows those are durable).
    q::<()>(&mut c, &["FUNCTION", "FLUSH"]);
    assert_eq!(restore(&mut c, &from_redis, None), Ok(()));
    let listed: Vec<Value> = q(&mut c, &["FUNCTION", "LIST"]);
    assert_eq!(listed.len(), 2);
}

/// The payloads of `cmsgpack.pack` and `struct.pack`, what `unpack` gives back and the errors of bad input,
/// compared with a real redis-server 7.0 byte for byte.
#[test]
fn cmsgpack_and_struct_payloads_match_redis() {
    let Some(redis) = crate::helpers::redis_or_skip() else { return };
    let (_dir, server) = start_server(|_| {});
    let mut r = redis::Client::open(format!("redis://{}/", redis.addr)).unwrap().get_connection().unwrap();
    let mut c = connect(&server);
    // Values are returned hex-encoded, so a payload compares byte for byte, and unpacked values with their
    // Lua types.
    let prelude = r#"
        local function hex(s) local h = '' for i = 1, #s do h = h .. string.format('%02x', s:byte(i)) end return h end
        local function show(v)
          if type(v) == 'table' then
            local ks = {}
            for k in pairs(v) do ks[#ks + 1] = k end
            table.sort(ks, function(a, b) return tostring(a) < tostring(b) end)
            local o = {}
            for _, k in ipairs(ks) do o[#o + 1] = tostring(k) .. '=' .. show(v[k]) end
            return '{' .. table.concat(o, ',') .. '}'
          elseif type(v) == 'string' then return 's:' .. hex(v) end
          return type(v) .. ':' .. tostring(v)
        end
        local function all(...)
          local o = {}
          for i = 1, select('#', ...) do o[i] = show((select(i, ...))) end
          return table.concat(o, ' ')
        end
    "#;
    let cases = [
        // cmsgpack.pack: every integer width, floats and doubles, strings, arrays and maps, nesting.
        "cmsgpack.pack(0, 1, 127, 128, 255, 256, 65535, 65536, 4294967295, 4294967296, 2^53)",
        "cmsgpack.pack(-1, -32, -33, -128, -129, -32768, -32769, -2147483648, -2147483649, -2^63)",
        "cmsgpack.pack(0.1, 1.5, -0.0, 1/0, -1/0, 2^63, 2^64, 1e300, 3.25e-5)",
        "cmsgpack.pack('', 'abc', string.rep('x', 31), string.rep('y', 32), string.rep('z', 300), string.rep('w', 70000))",
        "cmsgpack.pack({}, {1, 2, 3}, {1, nil, 3}, {a = 1}, {[1] = 1, [3] = 3}, {[0] = 1}, {[1.5] = 2}, {[2^31] = 1})",
        "cmsgpack.pack(true, false, nil, cjson.null, {x = {y = {z = {'deep'}}}}, {1, 2, x = 3})",
        "(function() local t = {} for i = 1, 20 do t[i] = i * 1000 end return cmsgpack.pack(t) end)()",
        "(function() local t = {} for i = 1, 20 do t['k' .. i] = i end return cmsgpack.pack(t) end)()",
        "(function() local a = {y = 5} local b = {x = a} a.x = b return cmsgpack.pack(a) end)()",
        // unpack, unpack_one, unpack_limit.
        "all(cmsgpack.unpack(cmsgpack.pack({a = 1, b = {1, 2, {c = 0.5}}, d = true}, 'x', -7, 2^40)))",
        "all(cmsgpack.unpack_one(cmsgpack.pack(1, 2, 'x')))",
        "all(cmsgpack.unpack_one(cmsgpack.pack(1, 2, 'x'), 1))",
        "all(cmsgpack.unpack_limit(cmsgpack.pack(1, 2, 'x'), 2))",
        "all(cmsgpack.unpack_limit(cmsgpack.pack(1, 2, 'x'), 0, 0))",
        "all(cmsgpack.unpack_limit(cmsgpack.pack(1, 2, 'x'), 5, 1))",
        "all(cmsgpack.unpack('\\207\\255\\255\\255\\255\\255\\255\\255\\255', '\\202\\63\\192\\0\\0'))",
        "all(cmsgpack.unpack(''))",
        "all(cmsgpack.unpack(12))",
        // Bad input: errors, never a crash.
        "cmsgpack.unpack('\\193')",
        "cmsgpack.unpack('\\219\\255\\255\\255\\255ab')",
        "cmsgpack.unpack('\\221\\255\\255\\255\\255\\1')",
        "cmsgpack.unpack('\\145\\145\\145')",
        "cmsgpack.unpack('\\129\\192\\1')",
        "cmsgpack.unpack()",
        "cmsgpack.pack()",
        "cmsgpack.unpack_one('\\1', -1)",
        "cmsgpack.unpack_one('\\1', 5)",
        "cmsgpack.unpack_limit('\\1')",
        "cmsgpack.unpack_limit('\\1', 'x')",
        // struct.
        "struct.pack('>i <i', 258, -2)",
        "struct.pack('b B h H l L T', -1, 255, -2, 65535, -3, 2^40, 7)",
        "struct.pack('i16 >I16 i3 i0', -1, 2^40, -5, 9)",
        "struct.pack('!4 b i !2 b i3 h ! b d', 1, 2, 3, 4, 5, 6, 7)",
        "struct.pack('f d >f >d', 1.5, 0.1, 1.5, 0.1)",
        "struct.pack('c3 s c0 x', 'abcdef', 'xy', 'zz')",
        "struct.pack('i c i L l', '12', 12, 1.9, 2^64, 0/0)",
        "all(struct.unpack('>i <i', '\\0\\0\\1\\2\\255\\255\\255\\255'))",
        "all(struct.unpack('b B h H l L T', struct.pack('b B h H l L T', -1, 255, -2, 65535, -3, 2^40, 7)))",
        "all(struct.unpack('i16 I16 >i16 I9', string.rep('\\255', 16 * 3 + 9)))",
        "all(struct.unpack('!4 b i f d', struct.pack('!4 b i f d', 1, 2, 1.5, 0.1)))",
        "all(struct.unpack('b c0 s x', '\\3abcxy\\0\\0'))",
        "all(struct.unpack('c2 c0', '3\\0abc'))",
        "all(struct.unpack('b', 'ab', 2))",
        "all(struct.unpack('', 'ab', -1))",
        "all(struct.size('b i d !8 b d'), struct.size('c10 x i3'), struct.size('z y'))",
        "struct.unpack('c0', 'abc')",
        "struct.unpack('s', 'abc')",
        "struct.unpack('i', 'ab')",
        "struct.unpack('b', 'ab', 0)",
        "struct.unpack('b', 'ab', -1)",
        "struct.unpack('b c0', '\\200abc')",
        "struct.unpack('c9999999', 'abc')",
        "struct.pack('?')",
        "struct.size('s')",
        "struct.size('c0')",
        "struct.size('i33')",
        "struct.pack('!3')",
        "struct.pack('c5', 'ab')",
        "struct.pack('i')",
        "struct.pack('s', {})",
        "struct.pack('c99999999999', 'a')",
        "struct.pack()",
        // Both tables are read-only.
        "(function() cmsgpack.pack = nil end)()",
        "(function() struct.x = 1 end)()",
    ];
    for case in cases {
        let script = format!("{prelude}\nlocal v = {case}\nif type(v) == 'string' and v:sub(1, 2) ~= 's:' and not v:find(' ') then return hex(v) end\nreturn v");
        let run = |con: &mut redis::Connection| -> Result<Value, String> {
            redis::cmd("EVAL").arg(&script).arg(0).query::<Value>(con).map_err(|e| {
                // The script's SHA names the same script on both servers; the message is what differs.
                format!("{:?} {}", e.code(), e.detail().unwrap_or_default())
            })
        };
        let (theirs, ours) = (run(&mut r), run(&mut c));
        assert_eq!(ours, theirs, "{case}");
    }
}

/// The Lua libraries' values and errors (cjson, bit, struct, cmsgpack, the `redis.*` helpers, numbers
/// returned to the client) compared with a real redis-server 7.0, reply for reply and byte for byte: error
/// texts with their `user_script:N:` position and `script: ..., on @user_script:N.` suffix, in tail
/// position (`return lib.f(x)`), in a local (`local v = lib.f(x)`) and under `pcall` (no position).
#[test]
fn lua_library_values_and_errors_match_redis() {
    let Some(redis) = crate::helpers::redis_or_skip() else { return };
    let (_dir, server) = start_server(|_| {});
    let mut r = redis::Client::open(format!("redis://{}/", redis.addr)).unwrap().get_connection().unwrap();
    let mut c = connect(&server);
    let cases = [
        // Numbers returned to the client: C's double-to-integer cast.
        "return 0/0",
        "return 1e300",
        "return -1e300",
        "return 2^63",
        "return -2^63",
        "return 2^53 + 0.5",
        "return -3.9",
        // cjson.decode: values.
        "return cjson.decode('+5')",
        "return cjson.decode('0x10')",
        "return cjson.decode('-0x1p4')",
        "return cjson.decode('007')",
        "return cjson.decode('1e5000')",
        "return cjson.decode('NaN')",
        "return cjson.decode('[inf, -Infinity]')",
        "return cjson.decode(123)",
        "return cjson.decode(0.1)",
        "return cjson.decode(1e300)",
        "return cjson.decode('9223372036854775807')",
        "return cjson.decode('  \\t\\n\\r 5 ')",
        "return cjson.decode('[1]\\0 x')",
        "return cjson.decode('[1, 2.5, \"x\", true, false]')",
        "local t = cjson.decode('[1,[2,{\"a\":[3]}],\"x\"]') return {t[1], t[2][1], t[2][2].a[1], t[3]}",
        "local t = cjson.decode('{\"a\":null,\"b\":[null]}') return {t.a == cjson.null, t.b[1] == cjson.null, #t.b}",
        "local t = cjson.decode('{\"a\":1,\"a\":2}') return t.a",
        "return cjson.decode('\"\\\\u00e9\\\\u20ac\\\\ud83d\\\\ude00\\\\/\\\\b\\\\f\\\\n\\\\r\\\\t\\\\\"\\\\\\\\\"')",
        "return cjson.decode('\"a\\\\u0000b\"')",
        "return cjson.decode('\"\\255\\254\"')",
        "return #cjson.decode(string.rep('[', 1000) .. string.rep(']', 1000))",
        // cjson.decode: errors, tail and non-tail.
        "return cjson.decode('[1,2')",
        "local v = cjson.decode('[1,2') return v",
        "local v = cjson.decode('')",
        "return cjson.decode('[1] x')",
        "return cjson.decode('{\"a\" 1}')",
        "return cjson.decode('\"ab\\\\q\"')",
        "return cjson.decode('\"\\\\ud800\"')",
        "return cjson.decode('\"\\\\udc00\"')",
        "return cjson.decode('\"\\\\ud800\\\\u0041\"')",
        "return cjson.decode('\"\\\\u12\"')",
        "return cjson.decode('\"abc')",
        "return cjson.decode('[-]')",
        "return cjson.decode('nul')",
        "return cjson.decode('\\f5')",
        "return cjson.decode('a\\0')",
        "return cjson.decode('{\"a\":1,}')",
        "return cjson.decode('{\"a\":1 \"b\"}')",
        "return cjson.decode('[1 2]')",
        "return cjson.decode('[1,]')",
        "return cjson.decode('{1:2}')",
        "return cjson.decode('\\195\\169')",
        "return cjson.decode(string.rep('[', 1001) .. string.rep(']', 1001))",
        "return cjson.decode(string.rep('{\"a\":', 1001))",
        "cjson.decode_max_depth(100000) return cjson.decode(string.rep('[', 9000))",
        "cjson.decode_max_depth(100000) return cjson.decode(string.rep('{\"a\":', 5000))",
        "return cjson.decode({})",
        "return cjson.decode(nil)",
        "return cjson.decode()",
        "return cjson.decode('1', '2')",
        "local f = cjson.decode; local v = f({})",
        "local ok, e = pcall(cjson.decode, '[1,2') return e",
        "local ok, e = pcall(cjson.decode, {}) return e",
        "return cjson.decode:x()",
        // cjson.encode and the settings.
        "return cjson.encode(function() end)",
        "local v = cjson.encode(function() end)",
        "local ok, e = pcall(cjson.encode, function() end) return e",
        "return cjson.encode()",
        "return cjson.encode('a/b\\1\\127\\195\\169\"\\\\')",
        "return cjson.encode({1, nil, 3})",
        "return cjson.encode({[1] = 1, [20] = 2})",
        "return cjson.encode({1, 2, x = 3})",
        "return cjson.encode({[1.5] = 1})",
        "return cjson.encode({[true] = 1})",
        "return cjson.encode({[2^40] = 1})",
        "return cjson.encode({[-1] = 1, [0] = 2})",
        "return cjson.encode({[1] = 1, [2] = 2, [30] = 3})",
        "local c = cjson.new() c.encode_number_precision(2) return {c.encode(3.14159), cjson.encode(3.14159)}",
        "return cjson.encode(123456789012345)",
        "return cjson.encode({0.1, -0.0, 1e300, 2^53})",
        "return cjson.encode(0/0)",
        "return cjson.encode({cjson.null, true, false, {}})",
        "local t = {} t[1] = t return cjson.encode(t)",
        "local t = {} t.a = t return cjson.encode(t)",
        "return cjson.decode_max_depth(0)",
        "return cjson.decode_max_depth('x')",
        "return cjson.decode_max_depth(5, 6)",
        "return cjson.encode_invalid_numbers('null')",
        "return cjson.encode_invalid_numbers('zz')",
        "cjson.encode_invalid_numbers(true) return cjson.encode({0/0, 1/0, -1/0})",
        "return {cjson.encode_sparse_array()}",
        "return cjson.decode_invalid_numbers()",
        "cjson.decode_invalid_numbers(false) return cjson.decode('+5')",
        "return cjson.encode_keep_buffer()",
        "cjson.encode_number_precision(3) return cjson.encode(3.14159)",
        // bit.
        "return bit.band('x')",
        "return bit.band()",
        "return bit.bxor(1, {})",
        "local ok, e = pcall(bit.band, 1, 'x', 'y') return e",
        "return bit:band(1)",
        "return bit.rshift(1)",
        "return bit.tohex('x')",
        "return bit.tohex(255, nil)",
        "return {bit.tohex(1, 0), bit.tohex(-1), bit.tohex(-1, -9), bit.tohex(0x1234, 3), bit.tohex(0xabc, -4)}",
        "return {bit.tobit(0.5), bit.tobit(1.5), bit.tobit(2.5), bit.tobit(2^40 + 3), bit.tobit(-1.5), bit.tobit(2^60)}",
        "return {bit.band('0x10', ' 31 '), bit.bor(1, 2, 4, '8'), bit.bnot(0), bit.bswap(0x12345678)}",
        "return {bit.lshift(1, 33), bit.rshift(-1, 28), bit.arshift(-256, 4), bit.rol(0x12345678, 4), bit.ror(0x12345678, 4)}",
        // struct and cmsgpack errors.
        "return struct.pack('q')",
        "local v = struct.pack('q')",
        "local ok, e = pcall(struct.pack, 'q') return e",
        "return struct.unpack('i', 'ab')",
        "return cmsgpack.unpack('\\193')",
        "local v = cmsgpack.unpack('\\193')",
        "local ok, e = pcall(cmsgpack.unpack, '\\193') return e",
        "return cmsgpack.unpack({})",
        "return cmsgpack.pack()",
        // The redis.* helpers.
        "return redis.sha1hex()",
        "local x = redis.sha1hex()",
        "local ok, e = pcall(redis.sha1hex) return e",
        "return redis.sha1hex(12)",
        "return redis.log()",
        "return redis.setresp(5)",
        "return redis.error_reply()",
        "return redis.status_reply()",
        "return redis.acl_check_cmd()",
        // Redis's pcall returns an error table's `err` string.
        "local ok, e = pcall(redis.call, 'nosuch') return e",
        "local ok, e = pcall(function() return redis.call('nosuch') end) return e",
        "local ok, e = pcall(function() redis.call('set', 'k', 'v') return redis.call('incr', 'k') end) return e",
        "local ok, e = pcall(error, {err = 'X y'}) return e",
        "local ok, e = pcall(error, {x = 5}) return type(e)",
        "local ok, e = pcall(function() error('lvl2', 2) end) return e",
        "return {pcall(function() return 1, 2 end)}",
        "return redis.call('nosuch')",
        "return bit.tohex(1, 2^31)",
        // Positions on later lines.
        "\n\nreturn cjson.decode('[')",
        "\nlocal t = {}\nt.x = bit.band({})",
    ];
    let run = |con: &mut redis::Connection, script: &str| -> Result<Value, String> {
        redis::cmd("EVAL").arg(script).arg(0).query::<Value>(con).map_err(|e| {
            // The script's SHA names the same script on both servers; the message is what differs.
            format!("{:?} {}", e.code(), e.detail().unwrap_or_default())
        })
    };
    let mut differences = Vec::new();
    for case in cases {
        let (theirs, ours) = (run(&mut r, case), run(&mut c, case));
        if ours != theirs {
            differences.push(format!("{case}\n  redis:   {theirs:?}\n  shaledb: {ours:?}"));
        }
    }
    assert!(
        differences.is_empty(),
        "{} of {} scripts differ:\n{}",
        differences.len(),
        cases.len(),
        differences.join("\n")
    );
}
