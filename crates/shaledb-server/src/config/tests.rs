//! Unit tests of the configuration: flags, the config file, `CONFIG SET` (`config.rs`).

use super::*;

#[test]
fn file_directives_quotes_and_comments() {
    let mut c = Config::default();
    c.apply_file(
        "# a comment\n\nport 7000\nbind 127.0.0.1 ::1\nrequirepass \"p w\\x21\"\nappendfsync everysec\n\
         maxclients 5\ntimeout 30\nprotected-mode no\nproto-max-bulk-len 2mb\nclient-query-buffer-limit 1gb\n\
         dir '/tmp/x y'\nsave \"\"\nappendonly yes\n",
    )
    .unwrap();
    assert_eq!((c.port, c.bind.as_str()), (7000, "127.0.0.1"));
    assert_eq!(c.requirepass.as_deref(), Some("p w!"));
    assert_eq!(c.appendfsync, Appendfsync::Everysec);
    assert_eq!((c.maxclients, c.timeout, c.protected_mode), (5, Some(Duration::from_secs(30)), false));
    assert_eq!((c.limits.max_bulk_len, c.query_buffer_limit), (2 << 20, 1 << 30));
    assert_eq!(c.dir, PathBuf::from("/tmp/x y"));
}

#[test]
fn a_bad_line_is_an_error_naming_it() {
    let mut c = Config::default();
    let (line, msg) = c.apply_file("port 1\n# ok\nloglevel notice\nloglevels notice\n").unwrap_err();
    assert_eq!(line, 4);
    assert_eq!(msg, "'loglevels notice': unknown directive (not a Redis 7.0 directive)");
    assert_eq!(c.apply_file("appendfsync sometimes").unwrap_err().0, 1);
    assert_eq!(c.apply_file("port 1 2").unwrap_err().1, "'port 1 2': wrong number of arguments");
    assert_eq!(c.apply_file("maxclients 0").unwrap_err().0, 1);
    assert_eq!(c.apply_file("databases 32").unwrap_err().0, 1);
    assert_eq!(c.apply_file("requirepass \"abc").unwrap_err().0, 1);
    // Redis's own directives that this server stores are checked as Redis checks them.
    assert_eq!(c.apply_file("\nrdbcompression maybe").unwrap_err().0, 2);
    assert_eq!(c.apply_file("hz ten").unwrap_err().0, 1);
    assert_eq!(c.apply_file("save 900").unwrap_err().0, 1);
    assert_eq!(c.apply_file("client-output-buffer-limit nobody 0 0 0").unwrap_err().0, 1);
    assert_eq!(c.apply_file("rename-command FLUSHALL").unwrap_err().0, 1);
    assert!(c.apply_file("sentinel monitor m 127.0.0.1 6379 2").unwrap_err().1.contains("Sentinel"));
}

#[test]
fn flags_win_over_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("shaledb.conf");
    std::fs::write(&path, "port 7001\nmaxclients 7\nappendfsync no\n").unwrap();
    let a = ServerArgs { config: Some(path.clone()), port: Some(7002), ..ServerArgs::default() };
    let c = Config::from_args(&a).unwrap();
    assert_eq!((c.port, c.maxclients, c.appendfsync), (7002, 7, Appendfsync::No));
    assert_eq!(c.config_file.as_deref(), Some(path.as_path()));
    std::fs::write(&path, "port 7001\nnosuch 1\n").unwrap();
    let e = Config::from_args(&a).unwrap_err().to_string();
    assert!(e.contains("line 2") && e.contains("nosuch"), "{e}");
    let missing = ServerArgs { config: Some(dir.path().join("nope.conf")), ..ServerArgs::default() };
    assert!(Config::from_args(&missing).is_err());
}

#[test]
fn set_checks_values_like_redis() {
    let mut c = Config::default();
    assert_eq!(c.set_value("nosuch", "1", false), Err(SetError::Unknown));
    assert_eq!(c.set_value("dir", "/elsewhere", false), Err(SetError::Immutable));
    // The port and bind address move at run time (the server rebinds, server.rs).
    c.set_value("port", "7777", false).unwrap();
    assert_eq!(c.port, 7777);
    assert!(matches!(c.set_value("port", "65536", false), Err(SetError::Invalid(_))));
    assert_eq!(c.set_value("databases", "1", false), Err(SetError::Immutable));
    assert!(matches!(c.set_value("maxclients", "x", false), Err(SetError::Invalid(_))));
    assert!(matches!(c.set_value("proto-max-bulk-len", "1k", false), Err(SetError::Invalid(_))));
    c.set_value("proto-max-bulk-len", "4mb", false).unwrap();
    assert_eq!(c.get("proto-max-bulk-len").as_deref(), Some("4194304"));
    c.set_value("save", "", false).unwrap();
    c.set_value("save", "900 1", false).unwrap();
    assert_eq!(c.get("save").as_deref(), Some("900 1"));
    assert!(c.set_value("save", "900", false).is_err());
    // Redis's immutable ones stay immutable; the others are stored and read back (aliases too).
    assert_eq!(c.set_value("daemonize", "yes", false), Err(SetError::Immutable));
    c.set_value("slave-read-only", "no", false).unwrap();
    assert_eq!(c.get("replica-read-only").as_deref(), Some("no"));
    c.set_value("maxmemory", "1mb", false).unwrap();
    assert_eq!(c.get("maxmemory").as_deref(), Some("1048576"));
    c.set_value("client-output-buffer-limit", "pubsub 64mb 16mb 30", false).unwrap();
    assert_eq!(
        c.get("client-output-buffer-limit").as_deref(),
        Some("normal 0 0 0 slave 268435456 67108864 60 pubsub 67108864 16777216 30")
    );
    assert_eq!(parse_memory("2gb"), Some(2 << 30));
    assert_eq!(parse_memory("99999999999999999999gb"), None);
    assert_eq!(parse_memory("gb"), None);
}

#[test]
fn rewrite_keeps_comments_and_updates_values() {
    let mut c = Config::default();
    c.apply_file("# keep me\nmaxclients 5\nmaxclients 6\n").unwrap();
    c.set_value("maxclients", "9", false).unwrap();
    c.set_value("requirepass", "a b", false).unwrap();
    let text = c.rewrite_file("# keep me\nmaxclients 5\nmaxclients 6\n");
    assert_eq!(text, "# keep me\nmaxclients 9\n# Generated by CONFIG REWRITE\nrequirepass \"a b\"\n");
    let mut d = Config::default();
    d.apply_file(&text).unwrap();
    assert_eq!((d.maxclients, d.requirepass.as_deref()), (9, Some("a b")));
}

/// A config file holding every directive of Redis 7.0 (each parameter and alias with a valid value, the
/// file-only ones too) parses; the ones this server does not apply are named in the one warning.
#[test]
fn every_redis_7_0_directive_parses() {
    let dir = tempfile::tempdir().unwrap();
    let included = dir.path().join("included.conf");
    std::fs::write(&included, "maxclients 77\n").unwrap();
    let defaults = Config { dir: dir.path().join("db"), ..Config::default() };
    let mut text = String::new();
    for name in parameter_names() {
        let v = defaults.get(name).unwrap();
        let v = if v.is_empty() { "\"\"".to_string() } else { quote(&v) };
        text.push_str(&format!("{name} {v}\n"));
    }
    for name in redis::FILE_ONLY {
        let line = match *name {
            "include" => format!("include {}", quote(&included.display().to_string())),
            "rename-command" => "rename-command CONFIG \"\"".into(),
            "user" => "user default on nopass ~* &* +@all".into(),
            "loadmodule" => "loadmodule /usr/lib/redis/modules/none.so".into(),
            "sentinel" => continue,
            other => format!("{other} 512"),
        };
        text.push_str(&line);
        text.push('\n');
    }
    let mut c = Config::default();
    c.apply_file(&text).unwrap();
    assert_eq!(c.maxclients, 77);
    let warning = c.not_applied_warning().unwrap();
    assert!(!warning.contains('\n'));
    for name in ["tcp-backlog", "rdbcompression", "lazyfree-lazy-eviction", "rename-command", "user", "slaveof"] {
        assert!(warning.contains(&format!(" {name},")) || warning.ends_with(&format!(" {name}")), "{name}: {warning}");
    }
    // What this server does anyway is not named; what it honours is not either.
    for name in ["appendonly", "daemonize", "cluster-enabled", "maxclients", "port"] {
        assert!(!warning.contains(&format!(" {name}")), "{name}: {warning}");
    }
    // Every name of the list is one this module knows.
    for (name, _) in redis::PARAMETERS.iter().chain(redis::ALIASES) {
        assert!(redis::is_directive(name) && c.get(name).is_some(), "{name}");
    }
}

/// Debian's stock redis.conf of Redis 7.0, in the parts that matter: repeated and multi-word directives,
/// `daemonize yes`, quoted values; `include` reads a file in place and its errors name both lines.
#[test]
fn redis_conf_grammar_repeats_quotes_and_includes() {
    let dir = tempfile::tempdir().unwrap();
    let inc = dir.path().join("inc.conf");
    std::fs::write(&inc, "# included\ntimeout 5\nnosuch yes\n").unwrap();
    let mut c = Config::default();
    c.apply_file(
        "bind 127.0.0.1 -::1\ndaemonize yes\nsave 900 1\nsave 300 10\nproc-title-template \"{title} {listen-addr}\"\n\
         client-output-buffer-limit replica 256mb 64mb 60\nclient-output-buffer-limit pubsub 32mb 8mb 60\n\
         rename-command FLUSHALL \"\"\nrename-command KEYS ''\noom-score-adj-values 0 200 800\nappendonly no\n",
    )
    .unwrap();
    assert_eq!(c.bind, "127.0.0.1");
    assert_eq!(c.get("save").as_deref(), Some("900 1 300 10"));
    assert_eq!(c.get("proc-title-template").as_deref(), Some("{title} {listen-addr}"));
    assert_eq!(c.get("oom-score-adj-values").as_deref(), Some("0 200 800"));
    assert_eq!(
        c.get("client-output-buffer-limit").as_deref(),
        Some("normal 0 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60")
    );
    let w = c.not_applied_warning().unwrap();
    for want in [
        "bind (only 127.0.0.1 is used)",
        "daemonize yes (the server stays in the foreground",
        "save (",
        "appendonly no",
    ] {
        assert!(w.contains(want), "{want}: {w}");
    }
    assert_eq!(w.matches("rename-command").count(), 1, "{w}");
    // `save ""` clears; CONFIG REWRITE's one-line forms read back.
    c.apply_file("save \"\"\n").unwrap();
    assert_eq!(c.get("save").as_deref(), Some(""));
    c.apply_file("save \"60 100\"\n").unwrap();
    assert_eq!(c.get("save").as_deref(), Some("60 100"));
    let (line, msg) = c.apply_file(&format!("port 1\ninclude {}\n", inc.display())).unwrap_err();
    assert_eq!(line, 2);
    assert!(msg.contains("line 3") && msg.contains("nosuch"), "{msg}");
    assert_eq!(c.timeout, Some(Duration::from_secs(5)));
    // An include loop stops with an error, not a stack overflow.
    let looped = dir.path().join("loop.conf");
    std::fs::write(&looped, format!("include {}\n", looped.display())).unwrap();
    let (_, msg) = Config::default().apply_file(&format!("include {}\n", looped.display())).unwrap_err();
    assert!(msg.contains("nested more than"), "{msg}");
}

#[test]
fn rewrite_keeps_repeated_file_only_lines_and_stored_values() {
    let mut c = Config::default();
    let old = "rename-command A B\nrename-command C D\nsave 900 1\nsave 60 5\nslave-read-only yes\n";
    c.apply_file(old).unwrap();
    c.set_value("replica-read-only", "no", false).unwrap();
    c.set_value("hz", "20", false).unwrap();
    let text = c.rewrite_file(old);
    assert_eq!(
        text,
        "rename-command A B\nrename-command C D\nsave \"900 1 60 5\"\nslave-read-only no\n\
         # Generated by CONFIG REWRITE\nhz 20\n"
    );
    let mut d = Config::default();
    d.apply_file(&text).unwrap();
    assert_eq!((d.get("save"), d.get("hz")), (c.get("save"), Some("20".into())));
}

/// Replica groups (issue 43): `cluster-enabled` and `cluster-port` from the file or the flags, the bus port
/// (port + 10000 unless set, refused above 65535), and what CONFIG GET shows.
#[test]
fn cluster_mode_settings() {
    let mut c = Config::default();
    assert!(!c.cluster_enabled());
    assert_eq!(c.get("cluster-enabled").as_deref(), Some("no"));
    c.apply_file("cluster-enabled yes\nport 7000\n").unwrap();
    assert!(c.cluster_enabled());
    assert!(c.not_applied_warning().is_none(), "{:?}", c.not_applied_warning());
    assert_eq!(c.cluster_bus_port().unwrap(), 17000);
    assert_eq!(c.get("cluster-port").as_deref(), Some("17000"));
    c.apply_file("cluster-port 7100\n").unwrap();
    assert_eq!(c.cluster_bus_port().unwrap(), 7100);
    let c = Config { port: 60000, ..Config::default() };
    let e = c.cluster_bus_port().unwrap_err().to_string();
    assert!(e.contains("70000") && e.contains("--cluster-port"), "{e}");
    let args = ServerArgs { cluster_enabled: Some(true), cluster_port: Some(9999), ..ServerArgs::default() };
    let c = Config::from_args(&args).unwrap();
    assert!(c.cluster_enabled());
    assert_eq!(c.cluster_bus_port().unwrap(), 9999);
    // Fixed for the life of the server.
    let mut c = Config::default();
    assert_eq!(c.set_value("cluster-enabled", "yes", false), Err(SetError::Immutable));
    assert_eq!(c.set_value("cluster-port", "7", false), Err(SetError::Immutable));
}
