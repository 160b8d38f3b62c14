//! COMMAND INFO, COMMAND, COMMAND COUNT / LIST and COMMAND GETKEYS / GETKEYSANDFLAGS against a real
//! redis-server: every command this server has is described as Redis describes it, and the keys of random
//! command lines (errors included) are the ones Redis finds.

use crate::helpers::{redis_or_skip, start_server, Client, Resp, Rng};

/// A reply with the parts Redis leaves in no fixed order sorted: the members of sets, and the subcommands
/// of a `COMMAND INFO` entry (redis-server lists them in its hash table's order, which changes by run).
/// A key spec's `notes` (a sentence of Redis's prose on about ten commands; shaledb has none) is dropped.
fn normalized(r: Resp) -> Resp {
    let is_notes =
        |r: &Resp| matches!(r, Resp::Bulk(b) if b == b"notes") || matches!(r, Resp::Simple(s) if s == "notes");
    match r {
        Resp::Array(items) if items.len() >= 2 && is_notes(&items[0]) => {
            normalized(Resp::Array(items.into_iter().skip(2).collect()))
        }
        Resp::Map(pairs) if pairs.iter().any(|(k, _)| is_notes(k)) => {
            normalized(Resp::Map(pairs.into_iter().filter(|(k, _)| !is_notes(k)).collect()))
        }
        Resp::Set(items) => {
            let mut items: Vec<Resp> = items.into_iter().map(normalized).collect();
            items.sort_by_key(|i| format!("{i:?}"));
            Resp::Set(items)
        }
        Resp::Array(items) => {
            let command_entry = items.len() == 10 && matches!(items[0], Resp::Bulk(_));
            let mut items: Vec<Resp> = items.into_iter().map(normalized).collect();
            if command_entry {
                if let Resp::Array(subs) = &mut items[9] {
                    subs.sort_by_key(|s| format!("{s:?}"));
                }
            }
            Resp::Array(items)
        }
        Resp::Map(pairs) => Resp::Map(pairs.into_iter().map(|(k, v)| (normalized(k), normalized(v))).collect()),
        other => other,
    }
}

/// The names (`get`, `config|get` ...) of every command and subcommand of the server, from COMMAND LIST.
fn command_names(c: &mut Client) -> Vec<String> {
    c.cmd(&["COMMAND", "LIST"]).array().iter().map(|n| n.text()).collect()
}

/// The first word of a `COMMAND INFO` entry.
fn entry_name(entry: &Resp) -> String {
    match entry {
        Resp::Array(items) => items[0].text(),
        other => panic!("not a command entry: {other:?}"),
    }
}

#[test]
fn command_info_matches_redis_for_every_command() {
    let Some(redis) = redis_or_skip() else { return };
    let (_dir, server) = start_server(|_| {});
    for protocol in ["2", "3"] {
        let mut ours = Client::connect(server.addr());
        let mut theirs = Client::connect(redis.addr);
        ours.cmd(&["HELLO", protocol]);
        theirs.cmd(&["HELLO", protocol]);
        let names = command_names(&mut ours);
        assert!(names.len() > 300, "COMMAND LIST: {names:?}");
        let mut compared = 0;
        for name in &names {
            if name.starts_with("shaledb.") {
                continue;
            }
            let a = normalized(ours.cmd(&["COMMAND", "INFO", name]));
            let b = normalized(theirs.cmd(&["COMMAND", "INFO", name]));
            assert_eq!(a, b, "COMMAND INFO {name} (RESP{protocol})");
            compared += 1;
        }
        assert!(compared > 300);

        // COMMAND: the same entries, one per top-level command; COUNT counts them.
        let all = ours.cmd(&["COMMAND"]).array();
        let count = ours.cmd(&["COMMAND", "COUNT"]);
        assert_eq!(count, Resp::Int(all.len() as i64));
        let redis_all: Vec<Resp> = theirs.cmd(&["COMMAND"]).array().into_iter().map(normalized).collect();
        for entry in all {
            let name = entry_name(&entry);
            if name.starts_with("shaledb.") {
                continue;
            }
            let entry = normalized(entry);
            assert!(redis_all.contains(&entry), "COMMAND entry of {name} differs from Redis's: {entry:?}");
        }
    }
}

#[test]
fn command_list_filters_match_redis() {
    let Some(redis) = redis_or_skip() else { return };
    let (_dir, server) = start_server(|_| {});
    let mut ours = Client::connect(server.addr());
    let mut theirs = Client::connect(redis.addr);
    let names = command_names(&mut ours);
    let filters: &[&[&str]] = &[
        &["FILTERBY", "ACLCAT", "keyspace"],
        &["FILTERBY", "ACLCAT", "SCRIPTING"],
        &["FILTERBY", "ACLCAT", "dangerous"],
        &["FILTERBY", "PATTERN", "z*"],
        &["FILTERBY", "PATTERN", "xinfo|*"],
        &["FILTERBY", "MODULE", "nosuchmodule"],
    ];
    for filter in filters {
        let line: Vec<&str> = ["COMMAND", "LIST"].iter().chain(filter.iter()).copied().collect();
        let mut a: Vec<String> =
            ours.cmd(&line).array().iter().map(|n| n.text()).filter(|n| !n.starts_with("shaledb.")).collect();
        // Redis's list, restricted to the commands this server has.
        let mut b: Vec<String> =
            theirs.cmd(&line).array().iter().map(|n| n.text()).filter(|n| names.contains(n)).collect();
        a.sort();
        b.sort();
        assert_eq!(a, b, "{line:?}");
    }
    for bad in [&["COMMAND", "LIST", "FILTERBY"][..], &["COMMAND", "LIST", "FILTERBY", "NOPE", "x"]] {
        assert_eq!(ours.cmd(bad), theirs.cmd(bad), "{bad:?}");
    }
}

/// Words a random command line is made of: keywords that move keys (STORE, KEYS, STREAMS ...), counts
/// (good, zero, negative, huge, not numbers) and plain names.
const WORDS: &[&str] = &[
    "k1",
    "k2",
    "k3",
    "0",
    "1",
    "2",
    "3",
    "-1",
    "7",
    "STORE",
    "storedist",
    "GET",
    "set",
    "incrby",
    "overflow",
    "BY",
    "LIMIT",
    "KEYS",
    "streams",
    "block",
    "count",
    "group",
    "noack",
    "",
    "auth",
    "auth2",
    "copy",
    "replace",
    "weights",
    "2x",
    " 3",
    "99999999999",
    "4294967297",
    "help",
    "usage",
    "encoding",
    "create",
    "stream",
];

#[test]
fn command_getkeys_matches_redis_on_random_lines() {
    let Some(redis) = redis_or_skip() else { return };
    let (_dir, server) = start_server(|_| {});
    let mut ours = Client::connect(server.addr());
    let mut theirs = Client::connect(redis.addr);
    let names = command_names(&mut ours);
    let mut rng = Rng(0x6b65_7973_7065_6373);
    let mut compared = 0;
    for name in names.iter().filter(|n| !n.starts_with("shaledb.")) {
        for _ in 0..40 {
            let mut line: Vec<String> = vec!["COMMAND".into(), "GETKEYS".into()];
            line.extend(name.split('|').map(String::from));
            for _ in 0..rng.below(9) {
                line.push(rng.pick(WORDS).to_string());
            }
            for sub in ["GETKEYS", "GETKEYSANDFLAGS"] {
                line[1] = sub.into();
                let words: Vec<&str> = line.iter().map(String::as_str).collect();
                let a = normalized(ours.cmd(&words));
                let b = normalized(theirs.cmd(&words));
                assert_eq!(a, b, "{words:?}");
                compared += 1;
            }
        }
    }
    assert!(compared > 20_000, "{compared} lines compared");
    // Lines that are not commands, or too short to name one.
    for line in [
        &["COMMAND", "GETKEYS"][..],
        &["COMMAND", "GETKEYS", "nosuch", "a"],
        &["COMMAND", "GETKEYS", "config", "nosuch"],
    ] {
        assert_eq!(ours.cmd(line), theirs.cmd(line), "{line:?}");
    }
}

#[test]
fn own_commands_describe_their_keys_consistently() {
    let (_dir, server) = start_server(|_| {});
    let mut c = Client::connect(server.addr());
    let info = c.cmd(&["COMMAND", "INFO", "shaledb.range"]).array();
    let entry = info[0].clone().array();
    assert_eq!(entry[0].text(), "shaledb.range");
    assert_eq!((&entry[3], &entry[4], &entry[5]), (&Resp::Int(1), &Resp::Int(2), &Resp::Int(1)));
    let spec = entry[8].clone().array();
    assert_eq!(spec.len(), 1, "{spec:?}");
    let keys = c.cmd(&["COMMAND", "GETKEYSANDFLAGS", "shaledb.range", "a", "b", "COUNT", "5"]);
    let flags = Resp::Array(vec![Resp::Simple("RO".into()), Resp::Simple("access".into())]);
    assert_eq!(
        keys,
        Resp::Array(vec![
            Resp::Array(vec![Resp::Bulk(b"a".to_vec()), flags.clone()]),
            Resp::Array(vec![Resp::Bulk(b"b".to_vec()), flags]),
        ])
    );
    assert_eq!(
        c.cmd(&["COMMAND", "GETKEYS", "shaledb.range", "a"]),
        Resp::Error("ERR Invalid number of arguments specified for command".into())
    );
}

#[test]
fn command_docs_has_redis_facts_without_its_prose() {
    let Some(redis) = redis_or_skip() else { return };
    let (_dir, server) = start_server(|_| {});
    let mut ours = Client::connect(server.addr());
    let mut theirs = Client::connect(redis.addr);
    ours.cmd(&["HELLO", "3"]);
    theirs.cmd(&["HELLO", "3"]);
    // Fields that are facts; the others (summary, complexity, history, arguments ...) are prose.
    let facts = ["since", "group", "doc_flags", "deprecated_since"];
    let names: Vec<String> =
        command_names(&mut ours).into_iter().filter(|n| !n.contains('|') && !n.starts_with("shaledb.")).collect();
    for name in &names {
        let fields = |r: Resp| -> Vec<(String, Resp)> {
            let Resp::Map(mut entries) = r else { panic!("COMMAND DOCS {name}: not a map") };
            assert_eq!(entries.len(), 1, "COMMAND DOCS {name}");
            let (_, doc) = entries.remove(0);
            let Resp::Map(pairs) = doc else { panic!("COMMAND DOCS {name}: entry not a map") };
            pairs
                .into_iter()
                .map(|(k, v)| (k.text(), normalized(v)))
                .filter(|(k, _)| facts.contains(&k.as_str()))
                .collect()
        };
        let a = fields(ours.cmd(&["COMMAND", "DOCS", name]));
        let b = fields(theirs.cmd(&["COMMAND", "DOCS", name]));
        assert_eq!(a, b, "COMMAND DOCS {name}");
        assert!(a.iter().any(|(k, _)| k == "since"), "COMMAND DOCS {name}: {a:?}");
    }
}

#[test]
fn cluster_commands_answer_as_redis_without_cluster_mode() {
    let Some(redis) = redis_or_skip() else { return };
    let (_dir, server) = start_server(|_| {});
    let mut ours = Client::connect(server.addr());
    let mut theirs = Client::connect(redis.addr);
    let lines: &[&[&str]] = &[
        &["CLUSTER", "INFO"],
        &["CLUSTER", "SLOTS"],
        &["CLUSTER", "HELP"],
        &["CLUSTER", "KEYSLOT", "k"],
        &["CLUSTER", "INFO", "extra"],
        &["CLUSTER", "NOSUCH"],
        &["CLUSTER"],
        &["ASKING"],
        &["READONLY"],
        &["READWRITE"],
        &["READONLY", "x"],
        &["COMMAND", "LIST", "FILTERBY", "PATTERN", "cl*help"],
        // From a script: Redis looks a container's subcommand up and checks its arity before the call.
        &["EVAL", "return redis.pcall('cluster', 'info')", "0"],
        &["EVAL", "return redis.pcall('cluster', 'nosuch')", "0"],
        &["EVAL", "return redis.pcall('cluster', 'info', 'x')", "0"],
        &["EVAL", "return redis.pcall('readonly')", "0"],
        &["EVAL", "return redis.pcall('object', 'nosuch')", "0"],
        &["EVAL", "return redis.pcall('object', 'encoding')", "0"],
        &["EVAL", "return redis.pcall('config', 'get')", "0"],
    ];
    for line in lines {
        let (mut a, mut b) = (normalized(ours.cmd(line)), normalized(theirs.cmd(line)));
        if line[0] == "COMMAND" {
            // Redis lists commands in its hash table's order, whose seed is random per process.
            for r in [&mut a, &mut b] {
                if let Resp::Array(items) = r {
                    items.sort_by_key(|i| format!("{i:?}"));
                }
            }
        }
        assert_eq!(a, b, "{line:?}");
    }
}
