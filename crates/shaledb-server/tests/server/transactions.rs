//! MULTI / EXEC beyond WATCH (watch.rs): the commands Redis refuses inside a transaction, CONFIG queued in
//! one, and transactions that meet a script running past `busy-reply-threshold`. Each reply was checked on
//! redis-server 7.0.15.

use crate::helpers::{bulk, err, ok, start_server, Client, Resp};
use std::time::Duration;

fn queued() -> Resp {
    Resp::Simple("QUEUED".into())
}

const BUSY: &str = "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.";

#[test]
fn save_and_shutdown_inside_multi_abort_the_transaction() {
    let (_dir, server) = start_server(|_| {});
    let mut c = Client::connect(server.addr());
    for refused in ["SAVE", "SHUTDOWN"] {
        assert_eq!(c.cmd(&["MULTI"]), ok());
        assert_eq!(c.cmd(&["SET", "foo", "bar"]), queued());
        assert_eq!(c.cmd(&[refused]), err("ERR Command not allowed inside a transaction"));
        assert_eq!(c.cmd(&["EXEC"]), err("EXECABORT Transaction discarded because of previous errors."));
        assert_eq!(c.cmd(&["GET", "foo"]), Resp::Nil);
    }
    // SHUTDOWN was only refused: the server still answers.
    assert_eq!(Client::connect(server.addr()).cmd(&["PING"]), Resp::Simple("PONG".into()));
}

#[test]
fn config_queued_in_multi_runs_at_exec_in_its_place() {
    let (_dir, server) = start_server(|_| {});
    let mut c = Client::connect(server.addr());
    assert_eq!(c.cmd(&["MULTI"]), ok());
    assert_eq!(c.cmd(&["SET", "foo", "bar"]), queued());
    assert_eq!(c.cmd(&["CONFIG", "SET", "maxmemory", "bla"]), queued());
    assert_eq!(c.cmd(&["CONFIG", "SET", "busy-reply-threshold", "1234"]), queued());
    assert_eq!(c.cmd(&["GET", "foo"]), queued());
    assert_eq!(
        c.cmd(&["EXEC"]),
        Resp::Array(vec![
            ok(),
            err("ERR CONFIG SET failed (possibly related to argument 'maxmemory') - argument must be a memory value"),
            ok(),
            bulk("bar"),
        ])
    );
    assert_eq!(c.cmd(&["CONFIG", "GET", "busy-reply-threshold"]).array()[1], bulk("1234"));

    // A transaction that does not run (a WATCHed key changed) runs none of its CONFIG commands.
    let mut other = Client::connect(server.addr());
    assert_eq!(c.cmd(&["WATCH", "foo"]), ok());
    assert_eq!(other.cmd(&["SET", "foo", "changed"]), ok());
    assert_eq!(c.cmd(&["MULTI"]), ok());
    assert_eq!(c.cmd(&["CONFIG", "SET", "busy-reply-threshold", "999"]), queued());
    assert_eq!(c.cmd(&["EXEC"]), Resp::Nil);
    assert_eq!(c.cmd(&["CONFIG", "GET", "busy-reply-threshold"]).array()[1], bulk("1234"));
}

#[test]
fn flushall_while_one_client_watches_several_keys() {
    let (_dir, server) = start_server(|_| {});
    let mut c = Client::connect(server.addr());
    assert_eq!(c.cmd(&["MSET", "a", "a", "b", "b"]), ok());
    assert_eq!(c.cmd(&["WATCH", "b", "a"]), ok());
    assert_eq!(c.cmd(&["FLUSHALL"]), ok());
    assert_eq!(c.cmd(&["PING"]), Resp::Simple("PONG".into()));
    assert_eq!(c.cmd(&["MULTI"]), ok());
    assert_eq!(c.cmd(&["SET", "a", "1"]), queued());
    // FLUSHALL deleted both watched keys: the transaction does not run.
    assert_eq!(c.cmd(&["EXEC"]), Resp::Nil);
    assert_eq!(c.cmd(&["EXISTS", "a", "b"]), Resp::Int(0));
}

/// Starts `while true do end` on a client of its own and waits until the server answers BUSY.
fn start_busy_script(server: &shaledb_server::RunningServer) -> Client {
    let mut admin = Client::connect(server.addr());
    assert_eq!(admin.cmd(&["CONFIG", "SET", "busy-reply-threshold", "10"]), ok());
    let mut runner = Client::connect(server.addr());
    runner.send(&["EVAL", "while true do end", "0"]);
    for _ in 0..200 {
        if admin.cmd(&["GET", "xx"]) == err(BUSY) {
            return runner;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    panic!("the script never made the server busy");
}

fn kill_script(server: &shaledb_server::RunningServer, mut runner: Client) {
    assert_eq!(Client::connect(server.addr()).cmd(&["SCRIPT", "KILL"]), ok());
    match runner.read() {
        Some(Resp::Error(e)) => assert!(e.starts_with("ERR Script killed by user with SCRIPT KILL"), "{e}"),
        other => panic!("the killed script answered {other:?}"),
    }
}

#[test]
fn a_command_refused_busy_aborts_the_transaction() {
    let (_dir, server) = start_server(|_| {});
    let mut c = Client::connect(server.addr());
    assert_eq!(c.cmd(&["SET", "xx", "1"]), ok());
    let runner = start_busy_script(&server);
    // MULTI is allowed while busy; INCR is refused and marks the transaction.
    assert_eq!(c.cmd(&["MULTI"]), ok());
    assert_eq!(c.cmd(&["INCR", "xx"]), err(BUSY));
    kill_script(&server, runner);
    assert_eq!(c.cmd(&["INCR", "xx"]), queued());
    assert_eq!(c.cmd(&["EXEC"]), err("EXECABORT Transaction discarded because of previous errors."));
    // Nothing ran, and the connection left MULTI.
    assert_eq!(c.cmd(&["GET", "xx"]), bulk("1"));
    assert_eq!(c.cmd(&["PING", "asdf"]), bulk("asdf"));
}

#[test]
fn exec_refused_busy_discards_the_transaction() {
    let (_dir, server) = start_server(|_| {});
    let mut c = Client::connect(server.addr());
    assert_eq!(c.cmd(&["SET", "xx", "1"]), ok());
    assert_eq!(c.cmd(&["MULTI"]), ok());
    assert_eq!(c.cmd(&["INCR", "xx"]), queued());
    let runner = start_busy_script(&server);
    assert_eq!(c.cmd(&["EXEC"]), err(&format!("EXECABORT Transaction discarded because of: {BUSY}")));
    // An empty transaction's EXEC is refused the same way.
    assert_eq!(c.cmd(&["MULTI"]), ok());
    assert_eq!(c.cmd(&["EXEC"]), err(&format!("EXECABORT Transaction discarded because of: {BUSY}")));
    kill_script(&server, runner);
    assert_eq!(c.cmd(&["GET", "xx"]), bulk("1"));
    // The connection is out of MULTI: PING answers at once, EXEC has nothing to run.
    assert_eq!(c.cmd(&["PING", "asdf"]), bulk("asdf"));
    assert_eq!(c.cmd(&["EXEC"]), err("ERR EXEC without MULTI"));
}
