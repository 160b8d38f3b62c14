//! Server administration as Redis 7.0 answers it: INFO's sections, the command and error counters, CONFIG
//! GET/SET of the parameters the suites touch, SLOWLOG, LATENCY, MONITOR, MEMORY, WAIT, CLIENT LIST's
//! fields, protected mode and requirepass judged per connection. Where a reply's text is Redis's, it is
//! compared with a real redis-server 7.0 when one is installed (else that part prints why and is skipped).

use crate::helpers::{bulk as b, err, ok, redis_or_skip, start_server, Client, Resp};
use shaledb_server::server::protected_mode_denies;
use shaledb_server::Config;
use std::net::IpAddr;
use std::time::{Duration, Instant};

fn info(c: &mut Client, args: &[&str]) -> String {
    let mut a = vec!["INFO"];
    a.extend_from_slice(args);
    c.cmd(&a).text()
}

/// The `name:value` line of an INFO text.
fn field(info: &str, name: &str) -> Option<String> {
    info.lines().find_map(|l| l.strip_prefix(&format!("{name}:")).map(str::to_string))
}

#[test]
fn info_sections_default_all_and_several() {
    let (_d, server) = start_server(|_| {});
    let mut c = Client::connect(server.addr());
    c.cmd(&["SET", "k", "v"]);
    for args in [&[][..], &["default"], &["all"], &["everything"]] {
        let text = info(&mut c, args);
        for part in ["redis_version:", "used_cpu_user:", "used_memory:", "# Cluster\r\ncluster_enabled:0\r\n"] {
            assert!(text.contains(part), "INFO {args:?} lacks {part:?}");
        }
        assert!(text.contains("db0:keys=1,expires=0,avg_ttl=0"), "INFO {args:?}");
        assert!(text.contains("# Errorstats"), "INFO {args:?}");
        let all = args == ["all"] || args == ["everything"];
        assert_eq!(text.contains("rejected_calls"), all, "INFO {args:?}");
        assert_eq!(text.contains("# Commandstats"), all, "INFO {args:?}");
    }
    let cpu = info(&mut c, &["cpu"]);
    assert!(cpu.starts_with("# CPU\r\nused_cpu_sys:"), "{cpu}");
    assert!(!cpu.contains("used_memory"));
    let several = info(&mut c, &["CPU", "commandSTATS", "cluster", "nosuch", "cpu"]);
    assert_eq!(several.matches("# CPU").count(), 1, "{several}");
    assert!(several.contains("cmdstat_set:calls=1,"), "{several}");
    assert!(several.find("# CPU") < several.find("# Commandstats"));
    assert!(several.find("# Commandstats") < several.find("# Cluster"));
    let both = info(&mut c, &["cpu", "all"]);
    assert_eq!(both.matches("used_cpu_user_children").count(), 1);
    assert!(both.contains("master_repl_offset") && both.contains("rejected_calls"));
    let dflt = info(&mut c, &["cpu", "default"]);
    assert!(dflt.contains("used_memory") && !dflt.contains("rejected_calls"));
    assert_eq!(info(&mut c, &["nosuch"]), "");
}

#[test]
fn command_and_error_stats_count_calls_rejections_failures() {
    let (_d, server) = start_server(|_| {});
    let mut c = Client::connect(server.addr());
    assert_eq!(c.cmd(&["CONFIG", "RESETSTAT"]), ok());
    c.cmd(&["SET", "foo", "1"]);
    c.cmd(&["GET", "foo"]);
    assert!(matches!(c.cmd(&["LPUSH", "foo", "x"]), Resp::Error(_)));
    assert!(matches!(c.cmd(&["GET"]), Resp::Error(_)));
    assert!(matches!(c.cmd(&["NOSUCHCOMMAND"]), Resp::Error(_)));
    c.cmd(&["MULTI"]);
    c.cmd(&["SET", "a", "1"]);
    c.cmd(&["EXPIRE", "a", "100"]);
    assert!(matches!(c.cmd(&["EXEC"]), Resp::Array(_)));
    c.cmd(&["CONFIG", "GET", "maxclients"]);
    let stats = info(&mut c, &["commandstats"]);
    let line = |name: &str| field(&stats, &format!("cmdstat_{name}")).unwrap_or_default();
    assert!(line("set").starts_with("calls=2,"), "{stats}");
    assert!(
        line("get").starts_with("calls=1,") && line("get").ends_with(",rejected_calls=1,failed_calls=0"),
        "{stats}"
    );
    assert!(line("lpush").ends_with("rejected_calls=0,failed_calls=1"), "{stats}");
    for name in ["multi", "exec", "expire", "config|get", "config|resetstat"] {
        assert!(line(name).starts_with("calls=1,"), "{name}: {stats}");
    }
    assert!(line("get").contains(",usec_per_call="), "{stats}");
    let errors = info(&mut c, &["errorstats"]);
    assert_eq!(field(&errors, "errorstat_ERR").as_deref(), Some("count=2"), "{errors}");
    assert_eq!(field(&errors, "errorstat_WRONGTYPE").as_deref(), Some("count=1"), "{errors}");
    assert_eq!(field(&info(&mut c, &["stats"]), "total_error_replies").as_deref(), Some("3"));
    assert_eq!(c.cmd(&["CONFIG", "RESETSTAT"]), ok());
    assert_eq!(info(&mut c, &["errorstats"]), "# Errorstats\r\n");
    let stats = info(&mut c, &["commandstats"]);
    assert!(!stats.contains("cmdstat_set"), "{stats}");
}

#[test]
fn config_set_checks_like_redis_and_get_answers_under_the_name_asked() {
    let (_d, server) = start_server(|_| {});
    let mut c = Client::connect(server.addr());
    let get = |c: &mut Client, n: &str| c.cmd(&["CONFIG", "GET", n]).array();
    for (name, value, shown) in [
        ("list-max-ziplist-size", "-3", "-3"),
        ("list-compress-depth", "2", "2"),
        ("set-max-intset-entries", "1", "1"),
        ("zset-max-ziplist-entries", "7", "7"),
        ("zset-max-ziplist-value", "1kb", "1024"),
        ("hash-max-ziplist-value", "16", "16"),
        ("stream-node-max-bytes", "1mb", "1048576"),
        ("hll-sparse-max-bytes", "100", "100"),
        ("lua-time-limit", "100", "100"),
        ("slowlog-log-slower-than", "-1", "-1"),
        ("maxmemory-policy", "ALLKEYS-LRU", "allkeys-lru"),
        ("latency-tracking-info-percentiles", "0.0 50.0 99.90", "0 50 99.9"),
        ("maxmemory-clients", "10%", "10%"),
        ("maxmemory-clients", "1mb", "1048576"),
        ("protected-mode", "no", "no"),
    ] {
        assert_eq!(c.cmd(&["CONFIG", "SET", name, value]), ok(), "{name}");
        assert_eq!(get(&mut c, name), vec![b(name), b(shown)], "{name}");
    }
    // An alias and its parameter share the value; a glob lists each name once.
    assert_eq!(get(&mut c, "list-max-listpack-size"), vec![b("list-max-listpack-size"), b("-3")]);
    assert_eq!(get(&mut c, "busy-reply-threshold"), vec![b("busy-reply-threshold"), b("100")]);
    let all = get(&mut c, "*");
    let names: Vec<&Resp> = all.iter().step_by(2).collect();
    let mut unique = names.clone();
    unique.dedup();
    assert_eq!(names.len(), unique.len());
}

/// The error texts of CONFIG SET, SLOWLOG, LATENCY, MEMORY, WAIT and CLIENT KILL, compared with a real
/// redis-server 7.0.
#[test]
fn error_replies_match_redis() {
    let Some(redis) = redis_or_skip() else { return };
    let (_d, server) = start_server(|_| {});
    let mut theirs = Client::connect(redis.addr);
    let mut ours = Client::connect(server.addr());
    let cases: &[&[&str]] = &[
        &["CONFIG", "SET", "slowlog-max-len", "-1"],
        &["CONFIG", "SET", "slowlog-log-slower-than", "-2"],
        &["CONFIG", "SET", "hz", "x"],
        &["CONFIG", "SET", "maxmemory", "-1"],
        &["CONFIG", "SET", "maxmemory", "10x"],
        &["CONFIG", "SET", "maxmemory-policy", "lru"],
        &["CONFIG", "SET", "loglevel", "loud"],
        &["CONFIG", "SET", "active-defrag-cycle-min", "100"],
        &["CONFIG", "SET", "set-max-intset-entries", "-1"],
        &["CONFIG", "SET", "latency-tracking-info-percentiles", "101"],
        &["CONFIG", "SET", "latency-tracking-info-percentiles", "a"],
        &["CONFIG", "SET", "maxmemory-clients", "101%"],
        &["CONFIG", "SET", "unixsocketperm", "999"],
        &["CONFIG", "SET", "list-max-ziplist-size", "2147483648"],
        &["CONFIG", "SET", "activedefrag", "maybe"],
        &["CONFIG", "SET", "nosuch", "1"],
        &["CONFIG", "SET", "daemonize", "yes"],
        &["SLOWLOG", "GET", "-2"],
        &["SLOWLOG", "GET", "x"],
        &["SLOWLOG", "LEN", "x"],
        &["SLOWLOG", "NOSUCH"],
        &["SLOWLOG", "RESET"],
        &["SLOWLOG", "LEN"],
        &["LATENCY", "HELP", "xxx"],
        &["LATENCY", "NOSUCH"],
        &["LATENCY", "GRAPH", "command"],
        &["LATENCY", "HISTORY", "blabla"],
        &["LATENCY", "RESET", "blabla"],
        &["LATENCY", "LATEST"],
        &["MEMORY", "USAGE", "missing"],
        &["MEMORY", "USAGE", "k", "SAMPLES", "-1"],
        &["MEMORY", "USAGE", "k", "SAMPLES", "x"],
        &["MEMORY", "USAGE", "k", "FOO"],
        &["MEMORY", "NOSUCH"],
        &["MEMORY", "USAGE"],
        &["MEMORY", "PURGE"],
        &["WAIT", "0", "0"],
        &["WAIT", "-1", "0"],
        &["WAIT", "1", "-1"],
        &["WAIT", "x", "0"],
        &["WAIT", "1", "x"],
        &["WAIT", "x", "-1"],
        &["CLIENT", "KILL", "USER", "wrong_user"],
        &["CLIENT", "KILL", "ID", "0"],
        &["UNSUBSCRIBE"],
        &["PUNSUBSCRIBE"],
    ];
    for args in cases {
        assert_eq!(ours.cmd(args), theirs.cmd(args), "{args:?}");
    }
}

#[test]
fn slowlog_records_trims_and_resets() {
    let (_d, server) = start_server(|_| {});
    let mut c = Client::connect(server.addr());
    assert_eq!(c.cmd(&["SLOWLOG", "LEN"]), Resp::Int(0));
    assert_eq!(c.cmd(&["CONFIG", "SET", "slowlog-log-slower-than", "0"]), ok());
    c.cmd(&["SLOWLOG", "RESET"]);
    c.cmd(&["CLIENT", "SETNAME", "me"]);
    c.cmd(&["SET", "k", &"x".repeat(200)]);
    let mut many = vec!["SADD", "s"];
    let members: Vec<String> = (0..40).map(|i| i.to_string()).collect();
    many.extend(members.iter().map(String::as_str));
    c.cmd(&many);
    let entries = c.cmd(&["SLOWLOG", "GET", "2"]).array();
    assert_eq!(entries.len(), 2);
    let newest = entries[0].clone().array();
    assert_eq!(newest.len(), 6);
    let args = newest[3].clone().array();
    assert_eq!(args.len(), 32);
    assert_eq!(args[31], b("... (11 more arguments)"));
    assert_eq!(newest[5], b("me"));
    let older = entries[1].clone().array();
    let set_args = older[3].clone().array();
    assert_eq!(set_args[2].text(), format!("{}... (72 more bytes)", "x".repeat(128)));
    let (Resp::Int(id_new), Resp::Int(id_old)) = (&newest[0], &older[0]) else { panic!("ids") };
    assert!(id_new > id_old);
    assert!(matches!(c.cmd(&["SLOWLOG", "LEN"]), Resp::Int(n) if n >= 4));
    // max-len trims; -1 disables; GET -1 gives all.
    assert_eq!(c.cmd(&["CONFIG", "SET", "slowlog-max-len", "3"]), ok());
    assert_eq!(c.cmd(&["SLOWLOG", "GET", "-1"]).array().len(), 3);
    assert_eq!(c.cmd(&["SLOWLOG", "RESET"]), ok());
    assert_eq!(c.cmd(&["CONFIG", "SET", "slowlog-log-slower-than", "-1"]), ok());
    c.cmd(&["PING"]);
    // SLOWLOG RESET itself was logged (the threshold was 0), nothing after the threshold became -1.
    assert_eq!(c.cmd(&["SLOWLOG", "LEN"]), Resp::Int(1));
    // AUTH's arguments are never logged.
    assert_eq!(c.cmd(&["CONFIG", "SET", "slowlog-log-slower-than", "0"]), ok());
    c.cmd(&["AUTH", "secret"]);
    let entry = c.cmd(&["SLOWLOG", "GET", "1"]).array()[0].clone().array();
    assert_eq!(entry[3].clone().array(), vec![b("AUTH"), b("(redacted)")]);
}

#[test]
fn latency_histograms_and_events() {
    let (_d, server) = start_server(|_| {});
    let mut c = Client::connect(server.addr());
    assert_eq!(c.cmd(&["CONFIG", "RESETSTAT"]), ok());
    let map = |r: Resp| -> Vec<(String, Resp)> {
        let v = r.array();
        v.chunks(2).map(|p| (p[0].text(), p[1].clone())).collect()
    };
    let h = map(c.cmd(&["LATENCY", "HISTOGRAM"]));
    assert_eq!(h.len(), 1);
    assert_eq!(h[0].0, "config|resetstat");
    c.cmd(&["SET", "a", "b"]);
    c.cmd(&["SET", "c", "d"]);
    c.cmd(&["CLIENT", "ID"]);
    c.cmd(&["CLIENT", "LIST"]);
    let h = map(c.cmd(&["LATENCY", "HISTOGRAM", "set", "blabla", "client"]));
    let names: Vec<&str> = h.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["set", "client|id", "client|list"]);
    let set = h[0].1.clone().array();
    assert_eq!(set[0], b("calls"));
    assert_eq!(set[1], Resp::Int(2));
    assert_eq!(set[2], b("histogram_usec"));
    let buckets = set[3].clone().array();
    assert_eq!(buckets.last(), Some(&Resp::Int(2)), "cumulative counts end at the calls");
    assert_eq!(map(c.cmd(&["LATENCY", "HISTOGRAM", "client|id"])).len(), 1);
    // Events: none below the threshold; RESET counts the events reset.
    assert_eq!(c.cmd(&["CONFIG", "SET", "latency-monitor-threshold", "200"]), ok());
    assert_eq!(c.cmd(&["LATENCY", "LATEST"]), Resp::Array(vec![]));
    assert_eq!(c.cmd(&["LATENCY", "RESET"]), Resp::Int(0));
    assert!(!c.cmd(&["LATENCY", "DOCTOR"]).text().is_empty());
    // latency-tracking no: no histograms, no latencystats.
    assert_eq!(c.cmd(&["CONFIG", "SET", "latency-tracking", "no"]), ok());
    assert_eq!(c.cmd(&["CONFIG", "RESETSTAT"]), ok());
    c.cmd(&["GET", "a"]);
    assert_eq!(c.cmd(&["LATENCY", "HISTOGRAM", "get"]), Resp::Array(vec![]));
    assert_eq!(c.cmd(&["CONFIG", "SET", "latency-tracking", "yes"]), ok());
    c.cmd(&["GET", "a"]);
    let stats = info(&mut c, &["latencystats"]);
    let line = field(&stats, "latency_percentiles_usec_get").unwrap_or_default();
    assert!(line.starts_with("p50=") && line.contains(",p99=") && line.contains(",p99.9="), "{stats}");
}

#[test]
fn monitor_streams_commands_in_order_with_secrets_redacted() {
    let (_d, server) = start_server(|_| {});
    let mut m = Client::connect(server.addr());
    let mut c = Client::connect(server.addr());
    assert_eq!(m.cmd(&["MONITOR"]), ok());
    c.cmd(&["SELECT", "2"]);
    c.cmd(&["SET", "foo", "bar\n\"x\""]);
    c.cmd(&["GET", "foo"]);
    c.cmd(&["CONFIG", "GET", "maxclients"]); // administrative: not shown
    c.cmd(&["MULTI"]);
    c.cmd(&["SET", "a", "1"]);
    c.cmd(&["EXEC"]);
    c.cmd(&["MULTI"]);
    assert!(matches!(c.cmd(&["NOSUCH"]), Resp::Error(_))); // not shown
    assert!(matches!(c.cmd(&["EXEC"]), Resp::Error(_)));
    assert!(matches!(c.cmd(&["AUTH", "user", "pw"]), Resp::Error(_)));
    let mut lines = Vec::new();
    for _ in 0..9 {
        let Some(Resp::Simple(line)) = m.read() else { panic!("a status line") };
        lines.push(line);
    }
    // Each line: `<secs>.<usecs> [<db> <client address>] "arg" ...`, the db as it is after the command.
    let mut addr = None;
    let want = [
        (2, "\"SELECT\" \"2\""),
        (2, "\"SET\" \"foo\" \"bar\\n\\\"x\\\"\""),
        (2, "\"GET\" \"foo\""),
        (2, "\"MULTI\""),
        (2, "\"SET\" \"a\" \"1\""),
        (2, "\"EXEC\""),
        (2, "\"MULTI\""),
        (2, "\"EXEC\""),
        (2, "\"AUTH\" \"(redacted)\" \"(redacted)\""),
    ];
    for (line, (db, args)) in lines.iter().zip(want) {
        let (time, rest) = line.split_once(' ').unwrap();
        let (secs, micros) = time.split_once('.').unwrap();
        assert!(secs.parse::<u64>().is_ok() && micros.len() == 6, "{line}");
        let (who, got) = rest.split_once("] ").unwrap();
        let (d, a) = who.trim_start_matches('[').split_once(' ').unwrap();
        assert_eq!(d, db.to_string(), "{line}");
        assert_eq!(*addr.get_or_insert(a.to_string()), a, "{line}");
        assert_eq!(got, args, "{lines:?}");
    }
    drop(m);
    // Once the monitor is gone, commands go on.
    assert_eq!(c.cmd(&["PING"]), Resp::Simple("PONG".into()));
}

#[test]
fn memory_usage_grows_with_the_value() {
    let (_d, server) = start_server(|_| {});
    let mut c = Client::connect(server.addr());
    assert_eq!(c.cmd(&["MEMORY", "USAGE", "missing"]), Resp::Nil);
    c.cmd(&["SET", "small", "x"]);
    c.cmd(&["SET", "big", &"x".repeat(10_000)]);
    let usage = |c: &mut Client, args: &[&str]| match c.cmd(args) {
        Resp::Int(n) => n,
        other => panic!("{args:?}: {other:?}"),
    };
    let small = usage(&mut c, &["MEMORY", "USAGE", "small"]);
    let big = usage(&mut c, &["MEMORY", "USAGE", "big"]);
    assert!(small > 0 && big > 10_000 && big < 10_200, "{small} {big}");
    for i in 0..100 {
        c.cmd(&["HSET", "h", &format!("field{i:03}"), &"v".repeat(50)]);
        c.cmd(&["ZADD", "z", &i.to_string(), &format!("member{i:03}")]);
    }
    let all = usage(&mut c, &["MEMORY", "USAGE", "h", "SAMPLES", "0"]);
    let sampled = usage(&mut c, &["MEMORY", "USAGE", "h"]);
    assert!(all > 100 * 60, "{all}");
    assert_eq!(all, sampled, "records of one size: the sample's average is exact");
    assert!(usage(&mut c, &["MEMORY", "USAGE", "z"]) > 100 * 20);
    let stats = c.cmd(&["MEMORY", "STATS"]).array();
    let keys = stats.chunks(2).find(|p| p[0] == b("keys.count")).map(|p| p[1].clone());
    assert_eq!(keys, Some(Resp::Int(4)));
    assert!(!c.cmd(&["MEMORY", "DOCTOR"]).text().is_empty());
    assert_eq!(c.cmd(&["MEMORY", "HELP"]).array().len(), 14);
}

#[test]
fn wait_answers_zero_and_waits_out_its_timeout() {
    let (_d, server) = start_server(|_| {});
    let mut c = Client::connect(server.addr());
    let t = Instant::now();
    assert_eq!(c.cmd(&["WAIT", "0", "0"]), Resp::Int(0));
    assert_eq!(c.cmd(&["WAIT", "1", "150"]), Resp::Int(0));
    assert!(t.elapsed() >= Duration::from_millis(150));
    // WAIT 1 0 blocks for good, as in Redis: CLIENT KILL ends it.
    let mut blocked = Client::connect(server.addr());
    let id = blocked.cmd(&["CLIENT", "ID"]);
    blocked.send(&["WAIT", "1", "0"]);
    std::thread::sleep(Duration::from_millis(100));
    let Resp::Int(id) = id else { panic!("id") };
    assert_eq!(c.cmd(&["CLIENT", "KILL", "ID", &id.to_string()]), Resp::Int(1));
    blocked.r.get_ref().set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    assert!(blocked.read().is_none_or(|r| r == Resp::Int(0)));
}

#[test]
fn client_list_names_the_subcommand_and_the_request_size() {
    let (_d, server) = start_server(|_| {});
    let mut c = Client::connect(server.addr());
    let list = c.cmd(&["CLIENT", "LIST"]).text();
    assert!(list.contains(" qbuf=26 ") && list.contains(" cmd=client|list "), "{list}");
    let me = c.cmd(&["CLIENT", "INFO"]).text();
    assert!(me.contains(" qbuf=26 ") && me.contains(" cmd=client|info "), "{me}");
    assert_eq!(c.cmd(&["CLIENT", "KILL", "USER", "wrong_user"]), err("ERR No such user 'wrong_user'"));
}

#[test]
fn protected_mode_is_judged_per_connection() {
    let cfg = Config::default();
    let public: IpAddr = "192.0.2.7".parse().unwrap();
    let mapped: IpAddr = "::ffff:127.0.0.1".parse().unwrap();
    assert!(protected_mode_denies(public, &cfg));
    assert!(!protected_mode_denies("127.0.0.1".parse().unwrap(), &cfg));
    assert!(!protected_mode_denies("::1".parse().unwrap(), &cfg));
    assert!(!protected_mode_denies(mapped, &cfg));
    assert!(!protected_mode_denies(public, &Config { protected_mode: false, ..cfg.clone() }));
    assert!(!protected_mode_denies(public, &Config { requirepass: Some("pw".into()), ..cfg.clone() }));

    // Loopback clients are served with protected mode on and no password; the switch changes at run time.
    let (_d, server) = start_server(|_| {});
    let mut c = Client::connect(server.addr());
    assert_eq!(c.cmd(&["CONFIG", "GET", "protected-mode"]).array(), vec![b("protected-mode"), b("yes")]);
    assert_eq!(c.cmd(&["CONFIG", "SET", "protected-mode", "no"]), ok());
    assert!(!server.shared().config.read().protected_mode);
    assert_eq!(c.cmd(&["CONFIG", "SET", "protected-mode", "yes"]), ok());
    assert!(server.shared().config.read().protected_mode);
}

#[test]
fn requirepass_changes_apply_to_the_next_commands() {
    let (_d, server) = start_server(|c| c.requirepass = Some("pw".into()));
    let mut admin = Client::connect(server.addr());
    assert_eq!(admin.cmd(&["AUTH", "pw"]), ok());
    let mut waiting = Client::connect(server.addr());
    assert_eq!(waiting.cmd(&["GET", "k"]), err("NOAUTH Authentication required."));
    // The password removed: nobody needs to authenticate, not even a connection from before.
    assert_eq!(admin.cmd(&["CONFIG", "SET", "requirepass", ""]), ok());
    assert_eq!(waiting.cmd(&["GET", "k"]), Resp::Nil);
    let mut fresh = Client::connect(server.addr());
    assert_eq!(fresh.cmd(&["GET", "k"]), Resp::Nil);
    // A password set again: a new connection needs it; authenticated ones stay so.
    assert_eq!(admin.cmd(&["CONFIG", "SET", "requirepass", "pw2"]), ok());
    let mut newer = Client::connect(server.addr());
    assert_eq!(newer.cmd(&["GET", "k"]), err("NOAUTH Authentication required."));
    assert_eq!(newer.cmd(&["AUTH", "pw2"]), ok());
    assert_eq!(admin.cmd(&["GET", "k"]), Resp::Nil);
}

/// Polls `INFO` until `name` reads `want` (or panics after 10 s).
fn wait_field(c: &mut Client, section: &str, name: &str, want: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let got = field(&info(c, &[section]), name);
        if got.as_deref() == Some(want) {
            return;
        }
        assert!(Instant::now() < deadline, "{name} is {got:?}, want {want}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn info_counts_blocked_clients_cached_scripts_and_lazy_frees() {
    let (_d, server) = start_server(|_| {});
    let mut c = Client::connect(server.addr());
    assert_eq!(field(&info(&mut c, &["clients"]), "blocked_clients").as_deref(), Some("0"));
    let mut blocked = Client::connect(server.addr());
    blocked.send(&["BLPOP", "list", "0"]);
    wait_field(&mut c, "clients", "blocked_clients", "1");
    assert_eq!(c.cmd(&["RPUSH", "list", "a"]), Resp::Int(1));
    assert_eq!(blocked.read(), Some(Resp::Array(vec![b("list"), b("a")])));
    wait_field(&mut c, "clients", "blocked_clients", "0");

    let memory = |c: &mut Client, name: &str| field(&info(c, &["memory"]), name);
    assert_eq!(memory(&mut c, "number_of_cached_scripts").as_deref(), Some("0"));
    c.cmd(&["SCRIPT", "LOAD", "return 1"]);
    c.cmd(&["EVAL", "return 2", "0"]);
    assert_eq!(memory(&mut c, "number_of_cached_scripts").as_deref(), Some("2"));
    assert_eq!(c.cmd(&["SCRIPT", "FLUSH"]), ok());
    assert_eq!(memory(&mut c, "number_of_cached_scripts").as_deref(), Some("0"));

    assert_eq!(field(&info(&mut c, &["stats"]), "migrate_cached_sockets").as_deref(), Some("0"));

    // A deleted hash's fields are removed by the collector: one object freed lazily.
    assert!(memory(&mut c, "lazyfree_pending_objects").is_some_and(|v| v.parse::<u64>().is_ok()));
    assert_eq!(memory(&mut c, "lazyfreed_objects").as_deref(), Some("0"));
    let mut hset = vec!["HSET".to_string(), "h".into()];
    for i in 0..200 {
        hset.extend([format!("f{i}"), format!("v{i}")]);
    }
    let hset: Vec<&str> = hset.iter().map(String::as_str).collect();
    assert_eq!(c.cmd(&hset), Resp::Int(200));
    assert_eq!(c.cmd(&["UNLINK", "h"]), Resp::Int(1));
    wait_field(&mut c, "memory", "lazyfreed_objects", "1");
    wait_field(&mut c, "memory", "lazyfree_pending_objects", "0");
    assert_eq!(c.cmd(&["CONFIG", "RESETSTAT"]), ok());
    assert_eq!(memory(&mut c, "lazyfreed_objects").as_deref(), Some("0"));
}

/// Redis's lazyfree test waits for `lazyfree_pending_objects` to reach 0 and then expects the object counted
/// in `lazyfreed_objects`: a version the collector is still reclaiming (several steps, here 5,000 fields at
/// 1,000 records a step) counts as pending until it is counted as freed.
#[test]
fn lazyfree_pending_reaches_zero_only_once_the_object_is_counted_freed() {
    let (_d, server) = start_server(|_| {});
    let mut c = Client::connect(server.addr());
    for round in 0..3 {
        assert_eq!(c.cmd(&["CONFIG", "RESETSTAT"]), ok());
        for chunk in 0..5 {
            let mut hset = vec!["HSET".to_string(), "h".into()];
            for i in 0..1000 {
                hset.extend([format!("f{chunk}-{i}"), "v".into()]);
            }
            let hset: Vec<&str> = hset.iter().map(String::as_str).collect();
            assert_eq!(c.cmd(&hset), Resp::Int(1000));
        }
        assert_eq!(c.cmd(&["UNLINK", "h"]), Resp::Int(1));
        wait_field(&mut c, "memory", "lazyfree_pending_objects", "0");
        assert_eq!(field(&info(&mut c, &["memory"]), "lazyfreed_objects").as_deref(), Some("1"), "round {round}");
    }
}

#[test]
fn client_unblock_ends_a_blocked_command_as_a_timeout_or_an_error() {
    let (_d, server) = start_server(|_| {});
    let mut c = Client::connect(server.addr());
    let mut blocked = Client::connect(server.addr());
    let Resp::Int(id) = blocked.cmd(&["CLIENT", "ID"]) else { panic!("CLIENT ID") };
    let id = id.to_string();
    // Not blocked: nothing to unblock.
    assert_eq!(c.cmd(&["CLIENT", "UNBLOCK", &id]), Resp::Int(0));
    assert_eq!(c.cmd(&["CLIENT", "UNBLOCK", "999999", "ERROR"]), Resp::Int(0));
    assert_eq!(c.cmd(&["CLIENT", "UNBLOCK", &id, "NOW"]), err("ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR"));
    c.cmd(&["XADD", "s", "1-0", "f", "v"]);
    c.cmd(&["XGROUP", "CREATE", "s", "g", "$"]);
    let blocking: [&[&str]; 6] = [
        &["BLPOP", "l", "0"],
        &["BLMOVE", "l", "l2", "LEFT", "RIGHT", "0"],
        &["BZPOPMIN", "z", "0"],
        &["BZMPOP", "0", "1", "z", "MIN"],
        &["XREAD", "BLOCK", "0", "STREAMS", "s", "$"],
        &["XREADGROUP", "GROUP", "g", "c1", "BLOCK", "0", "STREAMS", "s", ">"],
    ];
    for cmd in blocking {
        for (how, want) in [("TIMEOUT", Resp::Nil), ("ERROR", err("UNBLOCKED client unblocked via CLIENT UNBLOCK"))] {
            blocked.send(cmd);
            wait_field(&mut c, "clients", "blocked_clients", "1");
            assert_eq!(c.cmd(&["CLIENT", "UNBLOCK", &id, how]), Resp::Int(1), "{cmd:?} {how}");
            assert_eq!(blocked.read(), Some(want), "{cmd:?} {how}");
            wait_field(&mut c, "clients", "blocked_clients", "0");
            assert_eq!(c.cmd(&["CLIENT", "UNBLOCK", &id, how]), Resp::Int(0), "{cmd:?} {how}");
        }
    }
    // The unblocked clients left no waiter: a push stays in the list.
    assert_eq!(c.cmd(&["RPUSH", "l", "x"]), Resp::Int(1));
    assert_eq!(c.cmd(&["LLEN", "l"]), Resp::Int(1));
    assert_eq!(blocked.cmd(&["PING"]), Resp::Simple("PONG".into()));
    // WAIT for a replica: TIMEOUT answers the replicas that acknowledged (none).
    let unblocked = err("UNBLOCKED client unblocked via CLIENT UNBLOCK");
    for (how, want) in [(Some("TIMEOUT"), Resp::Int(0)), (Some("ERROR"), unblocked), (None, Resp::Int(0))] {
        blocked.send(&["WAIT", "1", "0"]);
        let mut unblock = vec!["CLIENT", "UNBLOCK", &id];
        unblock.extend(how);
        let deadline = Instant::now() + Duration::from_secs(10);
        while c.cmd(&unblock) != Resp::Int(1) {
            assert!(Instant::now() < deadline, "WAIT never blocked");
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(blocked.read(), Some(want), "WAIT {how:?}");
    }
}

#[test]
fn script_calls_show_in_monitor_and_in_command_stats() {
    let (_d, server) = start_server(|_| {});
    let mut m = Client::connect(server.addr());
    let mut c = Client::connect(server.addr());
    assert_eq!(c.cmd(&["CONFIG", "RESETSTAT"]), ok());
    assert_eq!(m.cmd(&["MONITOR"]), ok());
    let script = "redis.call('set', KEYS[1], ARGV[1]) return redis.call('get', KEYS[1])";
    assert_eq!(c.cmd(&["EVAL", script, "1", "foo", "bar"]), b("bar"));
    let mut lines = Vec::new();
    for _ in 0..3 {
        let Some(Resp::Simple(line)) = m.read() else { panic!("a status line") };
        lines.push(line.split_once(' ').unwrap().1.to_string());
    }
    assert!(lines[0].ends_with(&format!("\"EVAL\" \"{script}\" \"1\" \"foo\" \"bar\"")), "{lines:?}");
    assert!(!lines[0].starts_with("[0 lua]"), "{lines:?}");
    assert_eq!(lines[1], "[0 lua] \"set\" \"foo\" \"bar\"", "{lines:?}");
    assert_eq!(lines[2], "[0 lua] \"get\" \"foo\"", "{lines:?}");
    drop(m);
    let stats = info(&mut c, &["commandstats"]);
    for name in ["set", "get", "eval"] {
        let line = field(&stats, &format!("cmdstat_{name}")).unwrap_or_default();
        assert!(line.starts_with("calls=1,"), "{name}: {stats}");
    }
}

/// A client idle for two seconds gives back its read buffer (Redis's clientsCron does the same; here the
/// server's once-a-second check wakes the connection), and the connection still serves it afterwards.
#[test]
fn an_idle_client_gives_back_its_read_buffer() {
    let (_dir, server) = start_server(|_| {});
    let mut idle = Client::connect(server.addr());
    assert_eq!(idle.cmd(&["PING"]), Resp::Simple("PONG".into()));
    let id = match idle.cmd(&["CLIENT", "ID"]) {
        Resp::Int(id) => id,
        other => panic!("CLIENT ID answered {other:?}"),
    };
    let mut other = Client::connect(server.addr());
    let line = |c: &mut Client| c.cmd(&["CLIENT", "LIST", "ID", &id.to_string()]).text();
    assert!(!line(&mut other).contains(" qbuf-free=0 "), "a fresh connection has room to read into");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let l = line(&mut other);
        if l.contains(" qbuf-free=0 ") {
            break;
        }
        assert!(Instant::now() < deadline, "the idle client still holds its buffer after 10 s: {l}");
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(idle.cmd(&["PING"]), Resp::Simple("PONG".into()));
    assert_eq!(idle.cmd(&["SET", "k", "v"]), ok());
    assert_eq!(idle.cmd(&["GET", "k"]), b("v"));
}
