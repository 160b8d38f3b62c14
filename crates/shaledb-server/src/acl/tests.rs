use super::*;
use crate::commands::lookup;

fn user(rules: &[&str]) -> Result<User, RuleError> {
    let mut u = User::new("u");
    for r in rules {
        u.apply(r.as_bytes())?;
    }
    Ok(u)
}

fn line(words: &[&str]) -> Vec<Bytes> {
    words.iter().map(|w| Bytes::copy_from_slice(w.as_bytes())).collect()
}

fn check(u: &User, words: &[&str]) -> Result<(), Denied> {
    let args = line(words);
    let spec = lookup(&args[0]).expect("a known command");
    u.check(spec, &args)
}

#[test]
fn the_default_user_is_allowed_everything_and_described_as_redis_does() {
    let d = User::default_user(None);
    assert!(d.all && d.enabled && d.nopass);
    assert_eq!(d.describe(), "on nopass ~* &* +@all");
    let d = User::default_user(Some("pw"));
    assert!(!d.nopass && d.password_ok(b"pw") && !d.password_ok(b"pw2"));
    assert_eq!(d.passwords, vec![user::hash_password(b"pw")]);
}

#[test]
fn a_new_user_is_off_with_nothing_allowed() {
    let u = User::new("bob");
    assert_eq!(u.describe(), "off resetchannels -@all");
    assert!(!u.password_ok(b""));
    assert_eq!(check(&u, &["get", "k"]), Err(Denied::Command));
}

#[test]
fn rules_describe_back_as_redis_lists_them() {
    let u = user(&["on", ">p1", "~foo*", "%R~bar*", "&ch*", "+@hash", "-hdel", "+get"]).unwrap();
    // Redis lists the single commands in its hash table's order; this server in name order.
    assert_eq!(
        u.describe(),
        format!("on #{} ~foo* %R~bar* resetchannels &ch* -@all +@hash +get -hdel", user::hash_password(b"p1"))
    );
    let u = user(&["+@all", "-@dangerous", "allkeys", "allchannels"]).unwrap();
    assert_eq!(u.describe(), "off ~* &* +@all -@dangerous");
    let u = user(&["-@all", "+select|0"]).unwrap();
    assert_eq!(u.root.describe_commands(universe()), "-@all +select|0");
    assert!(check(&u, &["select", "0"]).is_ok());
    assert_eq!(check(&u, &["select", "1"]), Err(Denied::Command));
}

#[test]
fn bad_rules_are_refused_with_redis_reasons() {
    assert_eq!(user(&["+nosuchcommand"]).unwrap_err(), RuleError::UnknownName);
    assert_eq!(user(&["+@nosuchcat"]).unwrap_err(), RuleError::UnknownName);
    assert_eq!(user(&["#abc"]).unwrap_err(), RuleError::BadHash);
    assert_eq!(user(&["<nope"]).unwrap_err(), RuleError::NoSuchPassword);
    assert_eq!(user(&["allkeys", "~foo"]).unwrap_err(), RuleError::KeyAfterAll);
    assert_eq!(user(&["allchannels", "&foo"]).unwrap_err(), RuleError::ChannelAfterAll);
    assert_eq!(user(&["+client|list|x"]).unwrap_err(), RuleError::FirstArgOfSubcommand);
    assert_eq!(user(&["+config|get|x"]).unwrap_err(), RuleError::FirstArgOfSubcommand);
    assert_eq!(user(&["+nosuch|x"]).unwrap_err(), RuleError::UnknownName);
    assert_eq!(user(&["%X~foo"]).unwrap_err(), RuleError::Syntax);
    assert_eq!(user(&["bogus"]).unwrap_err(), RuleError::Syntax);
    assert_eq!(user(&["+select|"]).unwrap_err(), RuleError::Syntax);
}

#[test]
fn keys_are_checked_by_read_and_write_access() {
    let u = user(&["+@all", "%R~r*", "%W~w*", "~rw*"]).unwrap();
    assert!(check(&u, &["get", "r1"]).is_ok());
    assert_eq!(check(&u, &["set", "r1", "v"]), Err(Denied::Key(1)));
    assert!(check(&u, &["set", "w1", "v"]).is_ok());
    assert_eq!(check(&u, &["get", "w1"]), Err(Denied::Key(1)));
    assert!(check(&u, &["incr", "rw1"]).is_ok());
    assert_eq!(check(&u, &["incr", "r1"]), Err(Denied::Key(1)));
    // LMOVE reads and deletes from its source, inserts into its destination.
    assert_eq!(check(&u, &["lmove", "rw1", "r2", "left", "right"]), Err(Denied::Key(2)));
    assert!(check(&u, &["mget", "r1", "rw2"]).is_ok());
    assert_eq!(check(&u, &["mget", "r1", "x"]), Err(Denied::Key(2)));
}

#[test]
fn channels_are_checked_literally_and_patterns_exactly() {
    let u = user(&["+@all", "allkeys", "&news.*"]).unwrap();
    assert!(check(&u, &["publish", "news.a", "m"]).is_ok());
    assert_eq!(check(&u, &["publish", "sport", "m"]), Err(Denied::Channel(1)));
    assert_eq!(check(&u, &["subscribe", "news.a", "x"]), Err(Denied::Channel(2)));
    assert!(check(&u, &["psubscribe", "news.*"]).is_ok());
    assert_eq!(check(&u, &["psubscribe", "news.a*"]), Err(Denied::Channel(1)));
}

#[test]
fn subcommands_and_categories() {
    let u = user(&["-@all", "+client|id", "+@string"]).unwrap();
    assert!(check(&u, &["client", "id"]).is_ok());
    assert_eq!(check(&u, &["client", "kill", "1.2.3.4:5"]), Err(Denied::Command));
    assert!(check(&u, &["get", "k"]).is_err(), "no keys allowed");
    let u = user(&["+@all", "-client", "allkeys"]).unwrap();
    assert_eq!(check(&u, &["client", "id"]), Err(Denied::Command));
    // AUTH needs no permission.
    let u = user(&[]).unwrap();
    assert!(check(&u, &["auth", "a", "b"]).is_ok());
}

#[test]
fn selectors_allow_what_any_of_them_allows() {
    let merged = user::merge_selectors(&line(&["on", "(~x*", "+set)", "+get"])).unwrap();
    assert_eq!(merged, vec![b"on".to_vec(), b"(~x* +set)".to_vec(), b"+get".to_vec()]);
    assert_eq!(user::merge_selectors(&line(&["(~x*", "+set"])), Err(0));
    let mut u = User::new("s");
    for op in &merged {
        u.apply(op).unwrap();
    }
    u.apply(b"~k*").unwrap();
    assert!(check(&u, &["set", "x1", "v"]).is_ok());
    assert!(check(&u, &["get", "k1"]).is_ok());
    // The root selector denies the command, the other the key: the key is the more relevant refusal.
    assert_eq!(check(&u, &["set", "y", "v"]), Err(Denied::Key(1)));
    assert_eq!(u.describe(), "on ~k* resetchannels -@all +get (~x* resetchannels -@all +set)");
    u.apply(b"clearselectors").unwrap();
    assert_eq!(check(&u, &["set", "x1", "v"]), Err(Denied::Command));
}

#[test]
fn setuser_is_all_or_nothing_and_load_replaces_users() {
    let acl = Acl::new(None);
    acl.set_user(b"alice", &line(&["on", ">pw", "+get", "~*"])).unwrap();
    let err = acl.set_user(b"alice", &line(&["-get", "+nosuch"])).unwrap_err();
    assert_eq!(err, "Error in ACL SETUSER modifier '+nosuch': Unknown command or category name in ACL");
    let h = acl.get(b"alice").unwrap();
    assert!(h.check(lookup(b"get").unwrap(), &line(&["get", "k"])).is_ok(), "unchanged by the failed SETUSER");
    assert!(acl.authenticate(b"alice", b"pw").is_some() && acl.authenticate(b"alice", b"x").is_none());

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("users.acl");
    let path = path.to_str().unwrap();
    acl.save(path).unwrap();
    let text = std::fs::read_to_string(path).unwrap();
    assert!(text.contains("user alice on #") && text.contains("user default on nopass ~* &* +@all"), "{text}");
    let other = Acl::new(Some("x"));
    other.set_user(b"bob", &line(&["on"])).unwrap();
    let gone = other.load(path).unwrap();
    assert_eq!(gone.len(), 1);
    assert!(gone[0].is_removed());
    let names: Vec<String> = other.users().iter().map(|h| h.name.clone()).collect();
    assert_eq!(names, ["alice", "default"]);
    assert!(!other.auth_required());

    std::fs::write(path, "user a on\nbogus line\nuser a off\n").unwrap();
    let e = other.load(path).unwrap_err().0;
    assert!(e.contains(":2 should start with user keyword") && e.contains("Duplicate user 'a'"), "{e}");
    assert_eq!(other.users().len(), 2, "a refused file changes nothing");
}

#[test]
fn the_log_groups_repeats() {
    let acl = Acl::new(None);
    for _ in 0..3 {
        acl.log(LogReason::Key, LogContext::Toplevel, Bytes::from("k"), Bytes::from("u"), String::new(), 128);
    }
    acl.log(LogReason::Command, LogContext::Multi, Bytes::from("get"), Bytes::from("u"), String::new(), 128);
    let e = acl.log_entries(10);
    assert_eq!(e.len(), 2);
    assert_eq!((e[0].reason, e[1].count), (LogReason::Command, 3));
    acl.log(LogReason::Auth, LogContext::Toplevel, Bytes::from("AUTH"), Bytes::from("x"), String::new(), 2);
    assert_eq!(acl.log_entries(10).len(), 2);
    acl.log_reset();
    assert!(acl.log_entries(10).is_empty());
}

#[test]
fn every_served_command_has_categories() {
    let u = universe();
    for spec in crate::commands::all() {
        let id = u.id(spec.name.as_bytes()).unwrap();
        assert!(u.categories(id) != 0, "{} has no category", spec.name);
    }
}

#[test]
fn selector_rules_split_on_c_spaces_and_quotes_as_redis_does() {
    let split = |s: &str| user::split_selector_rules(s.as_bytes());
    let words = |w: &[&str]| w.iter().map(|s| s.as_bytes().to_vec()).collect::<Vec<_>>();
    assert_eq!(split("~key* +get"), words(&["~key*", "+get"]));
    assert_eq!(split(" \t~a\n\r+get  "), words(&["~a", "+get"]));
    // Quotes group, with their escapes; a quote may open inside a rule.
    assert_eq!(split("~\"a b\" +set"), words(&["~a b", "+set"]));
    assert_eq!(split("~\"k\\x41\\n\" '+g\\'t'"), words(&["~kA\n", "+g't"]));
    assert_eq!(split("~x\"y z\""), words(&["~xy z"]));
    // \v and \f lead a rule off but do not end one (so `~x\v+get` is one pattern, refused for its space).
    assert_eq!(split("\x0b~x\x0b+get"), words(&["~x\x0b+get"]));
    // Unbalanced quotes, or a closing quote not ending its rule: no rules at all.
    assert!(split("~\"a +set").is_empty());
    assert!(split("~'a' +set '").is_empty());
    assert!(split("~\"t\"x +get").is_empty());
    // The text ends at a NUL byte, as a C string.
    assert_eq!(split("~a\0 +get"), words(&["~a"]));
    let mut u = User::new("v");
    assert_eq!(u.apply(b"(~x\x0b+get)"), Err(RuleError::Syntax));
    u.apply(b"(~\"a +set)").unwrap();
    assert_eq!(u.describe(), "off resetchannels -@all (resetchannels -@all)");
}

#[test]
fn an_opening_argument_restarts_a_selector_left_open() {
    let merged = user::merge_selectors(&line(&["(~a", "(+get", "~b)", "on"])).unwrap();
    assert_eq!(merged, vec![b"(+get ~b)".to_vec(), b"on".to_vec()]);
    let merged = user::merge_selectors(&line(&["(~a", "(+get)", ")"])).unwrap();
    // An argument ending in `)` closes the open selector, whatever it starts with.
    assert_eq!(merged, vec![b"(~a (+get)".to_vec(), b")".to_vec()]);
    assert_eq!(user::merge_selectors(&line(&["(~a", "(+get"])), Err(1));
}
