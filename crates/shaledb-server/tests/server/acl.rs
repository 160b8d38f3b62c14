//! ACL: users and their rules (SETUSER, GETUSER, LIST, DELUSER ...), AUTH and HELLO with a user name, the
//! NOPERM refusals for commands, keys and channels, the ACL log, the aclfile, requirepass as the default
//! user's password; and the comparison with a real redis-server of the rule texts, the refusals and every
//! category's commands.

use crate::helpers::{bulk as b, err, ok, redis_or_skip, start_server, Client, Resp};
use std::collections::BTreeSet;

fn texts(r: Resp) -> Vec<String> {
    r.array().into_iter().map(|x| x.text()).collect()
}

fn nocmd(name: &str) -> Resp {
    err(&format!("NOPERM this user has no permissions to run the '{name}' command"))
}

const NOKEY: &str = "NOPERM this user has no permissions to access one of the keys used as arguments";
const NOCHANNEL: &str = "NOPERM this user has no permissions to access one of the channels used as arguments";
const WRONGPASS: &str = "WRONGPASS invalid username-password pair or user is disabled.";

#[test]
fn users_commands_keys_and_channels_are_enforced() {
    let (_d, server) = start_server(|_| {});
    let mut admin = Client::connect(server.addr());
    assert_eq!(admin.cmd(&["ACL", "WHOAMI"]), b("default"));
    assert_eq!(
        admin.cmd(&[
            "ACL",
            "SETUSER",
            "alice",
            "on",
            ">secret",
            "~app:*",
            "%R~ro:*",
            "&news",
            "+@string",
            "-set",
            "+publish",
            "+subscribe"
        ]),
        ok()
    );
    let mut c = Client::connect(server.addr());
    assert_eq!(c.cmd(&["AUTH", "alice", "wrong"]), err(WRONGPASS));
    assert_eq!(c.cmd(&["AUTH", "alice", "secret"]), ok());
    assert_eq!(c.cmd(&["ACL", "WHOAMI"]), nocmd("acl|whoami"));
    assert_eq!(c.cmd(&["INCR", "app:n"]), Resp::Int(1));
    assert_eq!(c.cmd(&["SET", "app:x", "1"]), nocmd("set"));
    assert_eq!(c.cmd(&["GET", "other"]), err(NOKEY));
    assert_eq!(c.cmd(&["GET", "ro:1"]), Resp::Nil);
    assert_eq!(c.cmd(&["APPEND", "ro:1", "x"]), err(NOKEY));
    assert_eq!(c.cmd(&["HSET", "app:h", "f", "v"]), nocmd("hset"));
    assert_eq!(c.cmd(&["PUBLISH", "news", "m"]), Resp::Int(0));
    assert_eq!(c.cmd(&["PUBLISH", "sport", "m"]), err(NOCHANNEL));
    assert_eq!(c.cmd(&["SUBSCRIBE", "news", "sport"]), err(NOCHANNEL));
    // Inside MULTI a refused command fails the transaction.
    assert_eq!(c.cmd(&["MULTI"]), nocmd("multi"));

    // CLIENT LIST names the user; the log has the refusals, newest first.
    let list = admin.cmd(&["CLIENT", "LIST"]).text();
    assert!(list.contains("user=alice") && list.contains("user=default"), "{list}");
    let log = admin.cmd(&["ACL", "LOG", "1"]).array();
    let Resp::Array(entry) = &log[0] else { panic!("{log:?}") };
    let fields: Vec<String> = entry.iter().step_by(2).map(|f| f.text()).collect();
    assert_eq!(fields, ["count", "reason", "context", "object", "username", "age-seconds", "client-info"]);
    assert_eq!((&entry[3], &entry[7], &entry[9]), (&b("command"), &b("multi"), &b("alice")));
    assert_eq!(admin.cmd(&["ACL", "LOG", "RESET"]), ok());
    assert_eq!(admin.cmd(&["ACL", "LOG"]), Resp::Array(vec![]));

    // A change applies to connected clients at once.
    assert_eq!(admin.cmd(&["ACL", "SETUSER", "alice", "+hset"]), ok());
    assert_eq!(c.cmd(&["HSET", "app:h", "f", "v"]), Resp::Int(1));
    // DRYRUN answers for the user without running anything.
    assert_eq!(
        admin.cmd(&["ACL", "DRYRUN", "alice", "SET", "app:x", "1"]),
        b("This user has no permissions to run the 'set' command")
    );
    assert_eq!(
        admin.cmd(&["ACL", "DRYRUN", "alice", "GET", "zz"]),
        b("This user has no permissions to access the 'zz' key")
    );
    assert_eq!(admin.cmd(&["ACL", "DRYRUN", "alice", "GET", "app:1"]), ok());
    assert_eq!(admin.cmd(&["ACL", "DRYRUN", "nobody", "GET", "a"]), err("ERR User 'nobody' not found"));

    // Deleting the user disconnects its clients.
    assert_eq!(admin.cmd(&["ACL", "DELUSER", "alice", "ghost"]), Resp::Int(1));
    assert!(c.closed());
    assert_eq!(admin.cmd(&["ACL", "DELUSER", "default"]), err("ERR The 'default' user cannot be removed"));
    assert_eq!(texts(admin.cmd(&["ACL", "USERS"])), ["default"]);
}

#[test]
fn requirepass_is_the_default_users_password() {
    let (_d, server) = start_server(|_| {});
    let mut a = Client::connect(server.addr());
    assert_eq!(
        a.cmd(&["AUTH", "x"]),
        err("ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?")
    );
    assert_eq!(a.cmd(&["CONFIG", "SET", "requirepass", "pw"]), ok());
    let list = texts(a.cmd(&["ACL", "LIST"]));
    assert!(list[0].starts_with("user default on #") && list[0].ends_with(" ~* &* +@all"), "{list:?}");
    let mut c = Client::connect(server.addr());
    assert_eq!(c.cmd(&["GET", "k"]), err("NOAUTH Authentication required."));
    assert_eq!(c.cmd(&["AUTH", "default", "pw"]), ok());
    assert_eq!(c.cmd(&["GET", "k"]), Resp::Nil);
    // HELLO AUTH with a user of its own.
    assert_eq!(a.cmd(&["ACL", "SETUSER", "bob", "on", "nopass", "+@all", "~*"]), ok());
    let mut h = Client::connect(server.addr());
    let Resp::Array(hello) = h.cmd(&["HELLO", "2", "AUTH", "bob", "anything"]) else { panic!("HELLO") };
    assert_eq!(hello[0], b("server"));
    assert_eq!(h.cmd(&["ACL", "WHOAMI"]), b("bob"));
    assert_eq!(h.cmd(&["HELLO", "2", "AUTH", "bob2", "x"]), err(WRONGPASS));
    // A disabled user cannot log in.
    assert_eq!(a.cmd(&["ACL", "SETUSER", "bob", "off"]), ok());
    assert_eq!(Client::connect(server.addr()).cmd(&["AUTH", "bob", "x"]), err(WRONGPASS));
    assert_eq!(a.cmd(&["CONFIG", "SET", "requirepass", ""]), ok());
    assert_eq!(Client::connect(server.addr()).cmd(&["GET", "k"]), Resp::Nil);
}

#[test]
fn getuser_has_redis_shape_in_resp2_and_resp3() {
    let (_d, server) = start_server(|_| {});
    let mut c = Client::connect(server.addr());
    assert_eq!(c.cmd(&["ACL", "SETUSER", "u", "on", "~k*", "+get", "(%R~x* +set)"]), ok());
    let Resp::Array(flat) = c.cmd(&["ACL", "GETUSER", "u"]) else { panic!("RESP2 array") };
    let names: Vec<String> = flat.iter().step_by(2).map(|f| f.text()).collect();
    assert_eq!(names, ["flags", "passwords", "commands", "keys", "channels", "selectors"]);
    assert_eq!(flat[5], b("-@all +get"));
    assert_eq!(c.cmd(&["ACL", "GETUSER", "nobody"]), Resp::Nil);
    c.cmd(&["HELLO", "3"]);
    let Resp::Map(m) = c.cmd(&["ACL", "GETUSER", "u"]) else { panic!("RESP3 map") };
    assert_eq!(m[0], (b("flags"), Resp::Set(vec![b("on")])));
    let Resp::Array(sels) = &m[5].1 else { panic!("selectors") };
    assert_eq!(
        sels[0],
        Resp::Map(vec![(b("commands"), b("-@all +set")), (b("keys"), b("%R~x*")), (b("channels"), b(""))])
    );
}

#[test]
fn aclfile_save_and_load() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("users.acl");
    std::fs::write(&path, "user carol on >pw ~c:* +@read\n").unwrap();
    let p = path.to_str().unwrap().to_string();
    let (_d, server) = start_server(|c| c.set_value("aclfile", &p, true).unwrap());
    let mut a = Client::connect(server.addr());
    assert_eq!(texts(a.cmd(&["ACL", "USERS"])), ["carol", "default"]);
    let mut carol = Client::connect(server.addr());
    assert_eq!(carol.cmd(&["AUTH", "carol", "pw"]), ok());
    assert_eq!(a.cmd(&["ACL", "SETUSER", "dave", "on", "nopass"]), ok());
    assert_eq!(a.cmd(&["ACL", "SAVE"]), ok());
    let saved = std::fs::read_to_string(&path).unwrap();
    assert!(saved.lines().any(|l| l == "user dave on nopass resetchannels -@all"), "{saved}");
    std::fs::write(&path, "user carol on >pw2\nnot a user line\n").unwrap();
    let Resp::Error(e) = a.cmd(&["ACL", "LOAD"]) else { panic!("a bad file is refused") };
    assert!(e.contains("should start with user keyword"), "{e}");
    assert_eq!(texts(a.cmd(&["ACL", "USERS"])), ["carol", "dave", "default"]);
    std::fs::write(&path, "user erin on nopass +@all ~*\n").unwrap();
    assert_eq!(a.cmd(&["ACL", "LOAD"]), ok());
    assert_eq!(texts(a.cmd(&["ACL", "USERS"])), ["default", "erin"]);
    assert!(carol.closed(), "a user replaced by LOAD loses its connections");

    let (_d2, plain) = start_server(|_| {});
    let mut c = Client::connect(plain.addr());
    let Resp::Error(e) = c.cmd(&["ACL", "SAVE"]) else { panic!("no aclfile") };
    assert!(e.starts_with("ERR This Redis instance is not configured to use an ACL file."), "{e}");
}

/// Both servers, one connection each.
fn pair() -> Option<(crate::helpers::RedisServer, tempfile::TempDir, shaledb_server::RunningServer)> {
    let r = redis_or_skip()?;
    let (d, s) = start_server(|_| {});
    Some((r, d, s))
}

/// The tokens of an `ACL LIST` line as a set: Redis orders single-command rules by its hash table.
fn tokens(line: &str) -> BTreeSet<String> {
    line.split(' ').map(str::to_string).collect()
}

#[test]
fn rules_and_refusals_match_redis() {
    let Some((redis, _d, server)) = pair() else { return };
    let rules: &[&[&str]] = &[
        &["on", ">p1", "~foo*", "%R~bar*", "%W~baz*", "&ch*", "+@hash", "-hdel", "+get"],
        &["on", "nopass", "+@all", "-@dangerous", "allkeys", "allchannels"],
        &["on", "nopass", "-@all", "+@read", "-@slow", "+client|id", "~*"],
        &["off", "#5e884898da28047151d0e56f8dc6292773603d0d6aabbd62a11ef721d1542d8a", "+@write", "+select|0"],
        &["on", "nopass", "~a*", "+get", "(~b* +set)", "(%R~c* &x +@list)"],
        &["reset", "on", "nopass", "+@all", "-config", "+config|get", "resetkeys", "%RW~k*"],
        &["+nosuch"],
        &["+@nosuch"],
        &["#short"],
        &["(~unclosed", "+get"],
        &["allkeys", "~x"],
        &["+client|list|x"],
    ];
    let mut r = Client::connect(redis.addr);
    let mut s = Client::connect(server.addr());
    for (i, rule) in rules.iter().enumerate() {
        let name = format!("u{i}");
        let mut args = vec!["ACL", "SETUSER", name.as_str()];
        args.extend_from_slice(rule);
        assert_eq!(s.cmd(&args), r.cmd(&args), "SETUSER {rule:?}");
        let (want, got) = (r.cmd(&["ACL", "GETUSER", &name]), s.cmd(&["ACL", "GETUSER", &name]));
        if want == Resp::Nil {
            assert_eq!(got, Resp::Nil);
            continue;
        }
        // GETUSER: every field equal, the command rules compared as token sets.
        let (Resp::Array(w), Resp::Array(g)) = (want, got) else { panic!("GETUSER") };
        assert_eq!(w.len(), g.len());
        for (k, (a, bb)) in w.iter().zip(&g).enumerate() {
            if k == 5 {
                assert_eq!(tokens(&a.text()), tokens(&bb.text()), "commands of {rule:?}");
            } else if k != 11 {
                assert_eq!(a, bb, "GETUSER field {k} of {rule:?}");
            }
        }
    }
    let (want, got) = (texts(r.cmd(&["ACL", "LIST"])), texts(s.cmd(&["ACL", "LIST"])));
    assert_eq!(want.len(), got.len());
    for (a, bb) in want.iter().zip(&got) {
        assert_eq!(tokens(a), tokens(bb));
    }
    // The refusals of each user, through DRYRUN and through a logged-in connection.
    let lines: &[&[&str]] = &[
        &["GET", "foo1"],
        &["GET", "zzz"],
        &["SET", "baz1", "v"],
        &["HSET", "foo1", "f", "v"],
        &["HDEL", "foo1", "f"],
        &["LPUSH", "c1", "x"],
        &["LRANGE", "c1", "0", "-1"],
        &["SET", "b1", "v"],
        &["CONFIG", "GET", "port"],
        &["CONFIG", "SET", "port", "1"],
        &["CLIENT", "ID"],
        &["PUBLISH", "ch1", "m"],
        &["PUBLISH", "x", "m"],
        &["LMOVE", "k1", "k2", "LEFT", "RIGHT"],
    ];
    for (i, _) in rules.iter().enumerate().take(6) {
        let name = format!("u{i}");
        for l in lines {
            let mut args = vec!["ACL", "DRYRUN", name.as_str()];
            args.extend_from_slice(l);
            assert_eq!(s.cmd(&args), r.cmd(&args), "DRYRUN {name} {l:?}");
        }
    }
    assert_eq!(s.cmd(&["ACL", "SETUSER", "u0", "on"]), r.cmd(&["ACL", "SETUSER", "u0", "on"]));
    let mut rc = Client::connect(redis.addr);
    let mut sc = Client::connect(server.addr());
    assert_eq!(sc.cmd(&["AUTH", "u0", "p1"]), rc.cmd(&["AUTH", "u0", "p1"]));
    for l in lines {
        assert_eq!(sc.cmd(l), rc.cmd(l), "{l:?} as u0");
    }
    assert_eq!(sc.cmd(&["AUTH", "u0", "bad"]), rc.cmd(&["AUTH", "u0", "bad"]));
}

/// The commands of each category, as both servers list them, over the commands both serve.
#[test]
fn acl_cat_matches_redis() {
    let Some((redis, _d, server)) = pair() else { return };
    let mut r = Client::connect(redis.addr);
    let mut s = Client::connect(server.addr());
    let cats = texts(r.cmd(&["ACL", "CAT"]));
    assert_eq!(texts(s.cmd(&["ACL", "CAT"])), cats);
    let ours: BTreeSet<String> =
        texts(s.cmd(&["COMMAND", "LIST"])).into_iter().map(|c| c.to_ascii_lowercase()).collect();
    let theirs: BTreeSet<String> =
        texts(r.cmd(&["COMMAND", "LIST"])).into_iter().map(|c| c.to_ascii_lowercase()).collect();
    let served = |name: &str| {
        let top = name.split('|').next().unwrap_or(name);
        ours.contains(top) && theirs.contains(top)
    };
    for cat in &cats {
        let want: BTreeSet<String> = texts(r.cmd(&["ACL", "CAT", cat])).into_iter().filter(|n| served(n)).collect();
        let got: BTreeSet<String> = texts(s.cmd(&["ACL", "CAT", cat])).into_iter().filter(|n| served(n)).collect();
        assert_eq!(got, want, "ACL CAT {cat}");
    }
    assert_eq!(s.cmd(&["ACL", "CAT", "nosuch"]), r.cmd(&["ACL", "CAT", "nosuch"]));
    // COMMAND INFO's categories agree for every command both serve.
    for name in &ours {
        let (Resp::Array(w), Resp::Array(g)) = (r.cmd(&["COMMAND", "INFO", name]), s.cmd(&["COMMAND", "INFO", name]))
        else {
            panic!("COMMAND INFO")
        };
        if let (Some(Resp::Array(wi)), Some(Resp::Array(gi))) = (w.first(), g.first()) {
            let set = |v: &Resp| -> BTreeSet<String> { v.clone().array().into_iter().map(|x| x.text()).collect() };
            assert_eq!(set(&gi[6]), set(&wi[6]), "COMMAND INFO {name} categories");
        }
    }
}

#[test]
fn scripts_ask_acl_check_cmd_about_their_callers_permissions() {
    let (_d, server) = start_server(|_| {});
    let mut admin = Client::connect(server.addr());
    assert_eq!(admin.cmd(&["ACL", "SETUSER", "bob", "on", ">123", "+@scripting", "+set", "~x*"]), ok());
    let mut bob = Client::connect(server.addr());
    assert_eq!(bob.cmd(&["AUTH", "bob", "123"]), ok());
    let check = |c: &mut Client, script: &str| c.cmd(&["EVAL", script, "0"]);
    // true comes back as 1, false as nil (Lua's boolean conversion).
    assert_eq!(check(&mut bob, "return redis.acl_check_cmd('set','xx',1)"), Resp::Int(1));
    assert_eq!(check(&mut bob, "return redis.acl_check_cmd('hset','xx','f',1)"), Resp::Nil);
    assert_eq!(check(&mut bob, "return redis.acl_check_cmd('set','yy',1)"), Resp::Nil);
    match check(&mut bob, "return redis.acl_check_cmd('invalid-cmd','arg')") {
        Resp::Error(e) => assert!(e.contains("Invalid command passed to redis.acl_check_cmd()"), "{e}"),
        other => panic!("{other:?}"),
    }
    // The default user may run anything; the check itself leaves no ACL LOG entry.
    assert_eq!(check(&mut admin, "return redis.acl_check_cmd('hset','yy','f',1)"), Resp::Int(1));
    assert_eq!(admin.cmd(&["ACL", "LOG"]), Resp::Array(vec![]));
}
