//! The `shaledb` tools as a user runs them: the real binary on real directories (errors, key tools, dump, flag
//! spellings, stress, version).

use std::path::Path;
use std::process::Command;

mod common;
use common::{ok, p, shaledb};

/// Issue 10: `error: destroying .../afile: I/O error during open lock on .../afile/LOCK: Not a directory (os
/// error 20): I/O error during open lock on ...: Not a directory (os error 20): Not a directory (os error 20)`.
#[test]
fn an_error_names_its_os_cause_once() {
    let tmp = shaledb_testkit::tempdir();
    let file = tmp.path().join("afile");
    std::fs::write(&file, b"a regular file").unwrap();
    let under = file.join("db");
    let os = std::io::Error::from_raw_os_error(20).to_string();
    let db_flag = format!("--db={}", p(&under));
    let runs: Vec<Vec<&str>> = vec![
        vec!["bench", &db_flag, "--benchmarks=fillseq", "--num=10", "--progress=false"],
        vec!["stress", p(&under), "--destroy", "--keys", "10"],
        vec!["put", "--create-if-missing", p(&under), "k", "v"],
    ];
    for args in runs {
        let (code, out, err) = shaledb(&args);
        assert_ne!(code, Some(0), "{args:?} succeeded: {out}{err}");
        let line = err.lines().find(|l| l.contains(&os)).unwrap_or_else(|| panic!("{args:?}: no OS cause: {err}"));
        assert_eq!(err.matches(&os).count(), 1, "{args:?}: {err}");
        assert!(line.contains("LOCK") || line.contains(p(&under)), "{args:?}: {line}");
    }
}

#[test]
fn get_put_delete_scan_as_ldb() {
    let tmp = shaledb_testkit::tempdir();
    let db = tmp.path().join("db");
    let (code, _, err) = shaledb(&["put", p(&db), "a", "1"]);
    assert_eq!(code, Some(1), "put created a database without --create-if-missing");
    assert!(err.contains("does not exist"), "{err}");
    let (code, out, err) = shaledb(&["put", "--create-if-missing", p(&db), "a", "1"]);
    assert_eq!((code, out.as_str()), (Some(0), "OK\n"), "{err}");
    for (k, v) in [("b", "2"), ("c", "3"), ("d", "4"), ("e", "5")] {
        assert_eq!(shaledb(&["put", p(&db), k, v]).0, Some(0));
    }
    let (code, out, _) = shaledb(&["get", p(&db), "c"]);
    assert_eq!((code, out.as_str()), (Some(0), "3\n"));
    assert_eq!(shaledb(&["delete", p(&db), "c"]).0, Some(0));
    let (code, out, err) = shaledb(&["get", p(&db), "c"]);
    assert_eq!(code, Some(1), "{out}");
    assert_eq!(err.trim_end(), "error: NotFound: c");
    assert!(out.is_empty());

    let (code, out, err) = shaledb(&["scan", p(&db)]);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(out, "a ==> 1\nb ==> 2\nd ==> 4\ne ==> 5\n");
    let (_, out, _) = shaledb(&["scan", p(&db), "--from", "b", "--to", "e"]);
    assert_eq!(out, "b ==> 2\nd ==> 4\n", "--to is exclusive");
    let (_, out, _) = shaledb(&["scan", p(&db), "--from", "b", "--to", "e", "--reverse"]);
    assert_eq!(out, "d ==> 4\nb ==> 2\n");
    let (_, out, _) = shaledb(&["scan", p(&db), "--reverse", "--limit", "3"]);
    assert_eq!(out, "e ==> 5\nd ==> 4\nb ==> 2\n");
    let (_, out, _) = shaledb(&["scan", p(&db), "--from", "bb", "--limit", "1"]);
    assert_eq!(out, "d ==> 4\n");
    let (_, out, _) = shaledb(&["scan", p(&db), "--limit", "0"]);
    assert_eq!(out, "");
}

#[test]
fn hex_keys_and_values_round_trip() {
    let tmp = shaledb_testkit::tempdir();
    let db = tmp.path().join("db");
    let (code, _, err) = shaledb(&["put", "--create-if-missing", "--hex", p(&db), "0x00ff", "0x0a0D00"]);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(shaledb(&["put", "--hex", p(&db), "01", "41"]).0, Some(0));
    let (code, out, _) = shaledb(&["get", "--hex", p(&db), "0x00FF"]);
    assert_eq!((code, out.as_str()), (Some(0), "0x0A0D00\n"));
    // Without --hex the bytes are written as they are.
    let out = Command::new(env!("CARGO_BIN_EXE_shaledb")).args(["get", p(&db), "\u{1}"]).output().unwrap();
    assert_eq!(out.stdout, b"A\n");
    let (_, out, _) = shaledb(&["scan", "--hex", p(&db)]);
    assert_eq!(out, "0x00FF ==> 0x0A0D00\n0x01 ==> 0x41\n");
    let (_, out, _) = shaledb(&["scan", "--hex", p(&db), "--from", "0x01"]);
    assert_eq!(out, "0x01 ==> 0x41\n");
    let (code, _, err) = shaledb(&["get", "--hex", p(&db), "0x0"]);
    assert_eq!(code, Some(1));
    assert!(err.contains("not hexadecimal"), "{err}");
    let (code, _, err) = shaledb(&["get", "--hex", p(&db), "0x02"]);
    assert_eq!((code, err.trim_end()), (Some(1), "error: NotFound: 0x02"));
}

/// Every file under `dir` with its contents.
fn files(dir: &Path) -> Vec<(std::path::PathBuf, Vec<u8>)> {
    let mut out: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let path = e.unwrap().path();
            let data = std::fs::read(&path).unwrap_or_default();
            (path, data)
        })
        .collect();
    out.sort();
    out
}

#[test]
fn read_only_reads_a_database_open_elsewhere_and_changes_nothing() {
    let tmp = shaledb_testkit::tempdir();
    let path = tmp.path().join("db");
    let db = shaledb::Db::open(&path, shaledb::Options::default()).unwrap();
    db.put(b"k1", b"v1").unwrap();
    db.put(b"k2", b"v2").unwrap();
    // The writer holds the LOCK; its writes are in its WAL only.
    let before = files(&path);
    let (code, _, err) = shaledb(&["get", p(&path), "k1"]);
    assert_eq!(code, Some(1));
    assert!(err.contains("LOCK") || err.contains("busy"), "{err}");
    let (code, out, err) = shaledb(&["get", "--read-only", p(&path), "k1"]);
    assert_eq!((code, out.as_str()), (Some(0), "v1\n"), "{err}");
    let (code, out, err) = shaledb(&["scan", "--read-only", p(&path)]);
    assert_eq!((code, out.as_str()), (Some(0), "k1 ==> v1\nk2 ==> v2\n"), "{err}");
    let (code, _, err) = shaledb(&["get", "--read-only", p(&path), "k3"]);
    assert_eq!((code, err.trim_end()), (Some(1), "error: NotFound: k3"));
    assert!(files(&path) == before, "a read-only command changed the directory");
    db.close().unwrap();
}

#[test]
fn secondary_path_reads_a_database_open_elsewhere_keeping_its_files_apart() {
    let tmp = shaledb_testkit::tempdir();
    let (path, secondary) = (tmp.path().join("db"), tmp.path().join("follower"));
    let db = shaledb::Db::open(&path, shaledb::Options::default()).unwrap();
    db.put(b"k1", b"v1").unwrap();
    db.put(b"k2", b"v2").unwrap();
    let before = files(&path);
    let (code, out, err) = shaledb(&["get", "--secondary-path", p(&secondary), p(&path), "k2"]);
    assert_eq!((code, out.as_str()), (Some(0), "v2\n"), "{err}");
    let (code, out, err) = shaledb(&["scan", "--secondary-path", p(&secondary), p(&path)]);
    assert_eq!((code, out.as_str()), (Some(0), "k1 ==> v1\nk2 ==> v2\n"), "{err}");
    assert!(files(&path) == before, "a secondary changed the primary's directory");
    assert!(secondary.join("LOG").exists(), "the secondary's LOG is in its own directory");
    let (code, _, err) = shaledb(&["get", "--read-only", "--secondary-path", p(&secondary), p(&path), "k1"]);
    assert_eq!(code, Some(2), "{err}");
    db.close().unwrap();
}

#[test]
fn dump_names_a_missing_file_and_takes_limit_range_and_properties_only() {
    let tmp = shaledb_testkit::tempdir();
    let missing = tmp.path().join("nonexistent");
    let (code, out, err) = shaledb(&["dump", p(&missing)]);
    assert_eq!(code, Some(1), "{out}");
    assert_eq!(err.trim_end(), format!("error: {} does not exist", missing.display()));

    let path = tmp.path().join("db");
    let db = shaledb::Db::open(&path, shaledb::Options::default()).unwrap();
    for i in 0..100u32 {
        db.put(format!("k{i:03}").as_bytes(), b"v").unwrap();
    }
    db.flush().unwrap();
    db.close().unwrap();
    let sst = std::fs::read_dir(&path)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "sst"))
        .unwrap();
    let (code, out, err) = shaledb(&["dump", p(&sst), "--properties-only"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("num_entries: 100") && !out.contains("=>"), "{out}");
    let (_, out, _) = shaledb(&["dump", p(&sst), "--hex", "--from", "0x6b303130", "--to", "6B303132", "--keys-only"]);
    assert!(out.contains("'k010' @11 PUT\n  'k011' @12 PUT\n2 entries in range"), "{out}");
    let (_, out, err) = shaledb(&["dump", p(&sst), "--limit", "3"]);
    assert!(out.contains("... 97 more entries (--limit 3)"), "{out}{err}");
}

#[test]
fn dump_shows_single_deletions_in_tables_and_wals() {
    let tmp = shaledb_testkit::tempdir();
    let path = tmp.path().join("db");
    let opts = shaledb::Options { disable_auto_compactions: true, ..shaledb::Options::default() };
    let db = shaledb::Db::open(&path, opts).unwrap();
    db.single_delete("gone").unwrap();
    db.flush().unwrap();
    db.single_delete("walonly").unwrap();
    drop(db);
    let file = |ext: &str| {
        std::fs::read_dir(&path).unwrap().map(|e| e.unwrap().path()).find(|p| p.extension().is_some_and(|e| e == ext))
    };
    let (code, out, err) = shaledb(&["dump", p(&file("sst").unwrap())]);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("'gone' @1 SINGLEDEL"), "{out}");
    let wal = std::fs::read_dir(&path)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .max()
        .unwrap();
    let (code, out, err) = shaledb(&["dump", p(&wal)]);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("SINGLEDEL 'walonly' @2"), "{out}");
}

/// `dump` shows each WAL record's column family and each family's files in a MANIFEST; `verify` counts every
/// family's tables as live (none reported as an orphan).
#[test]
fn dump_and_verify_know_column_families() {
    let tmp = shaledb_testkit::tempdir();
    let path = tmp.path().join("db");
    let db = shaledb::Db::open(&path, shaledb::Options::default()).unwrap();
    let users = db.create_column_family("users", shaledb::Options::default()).unwrap();
    db.put_cf(&users, "ada", "flushed").unwrap();
    db.flush().unwrap();
    db.put_cf(&users, "grace", "walonly").unwrap();
    drop(db);
    let files = |ext: &str| -> Vec<std::path::PathBuf> {
        let mut v: Vec<_> = std::fs::read_dir(&path)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.to_string_lossy().contains(ext))
            .collect();
        v.sort();
        v
    };
    let wal = files(".log").pop().unwrap();
    let (code, out, err) = shaledb(&["dump", p(&wal)]);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("cf 1 PUT 'grace'"), "{out}");
    let manifest = files("MANIFEST-").pop().unwrap();
    let (code, out, err) = shaledb(&["dump", p(&manifest)]);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("add_column_family: users") && out.contains("column family 1 (\"users\")"), "{out}");
    assert!(out.contains("    L0: 1 files"), "the family's table under it: {out}");
    let (code, out, err) = shaledb(&["verify", p(&path)]);
    assert_eq!(code, Some(0), "{out}{err}");
}

/// The key tools take `--column-family` (ldb's `--column_family`); families are listed, created and dropped by
/// name; a family the database does not hold is an error naming it.
#[test]
fn key_tools_work_in_a_column_family() {
    let tmp = shaledb_testkit::tempdir();
    let db = tmp.path().join("db");
    let ok = |args: &[&str]| {
        let (code, out, err) = shaledb(args);
        assert_eq!(code, Some(0), "{args:?}: {out}{err}");
        out
    };
    ok(&["put", p(&db), "k", "default", "--create-if-missing"]);
    assert!(ok(&["create-column-family", p(&db), "users"]).starts_with("OK users (id 1)"));
    ok(&["put", p(&db), "k", "in users", "--column-family", "users"]);
    ok(&["put", p(&db), "k2", "also", "--column-family", "users"]);
    assert_eq!(ok(&["get", p(&db), "k", "--column-family", "users"]), "in users\n");
    assert_eq!(ok(&["get", p(&db), "k"]), "default\n");
    assert_eq!(ok(&["scan", p(&db), "--column-family", "users"]), "k ==> in users\nk2 ==> also\n");
    assert_eq!(
        ok(&["scan", p(&db), "--column-family", "users", "--read-only", "--reverse"]),
        "k2 ==> also\nk ==> in users\n"
    );
    ok(&["delete", p(&db), "k2", "--column-family", "users"]);
    assert_eq!(ok(&["list-column-families", p(&db)]), "default\nusers\n");
    let (code, _, err) = shaledb(&["get", p(&db), "k", "--column-family", "nope"]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("no column family \"nope\""), "{err}");
    ok(&["drop-column-family", p(&db), "users"]);
    assert_eq!(ok(&["list-column-families", p(&db)]), "default\n");
    let (code, _, err) = shaledb(&["create-column-family", p(&db), "default"]);
    assert_ne!(code, Some(0), "{err}");
}

/// The key tools open each family with the options the OPTIONS file records for it: a family whose merge
/// operator is not the default family's is read and written with its own (open refuses the database's for it).
#[test]
fn key_tools_open_each_family_with_its_recorded_options() {
    let tmp = shaledb_testkit::tempdir();
    let db = tmp.path().join("db");
    let append = shaledb::Options { merge_operator: shaledb::merge::builtin("stringappend"), ..Default::default() };
    let counters = shaledb::Options { merge_operator: shaledb::merge::builtin("uint64add"), ..Default::default() };
    let d = shaledb::Db::open_with_column_families(
        &db,
        append,
        vec![shaledb::ColumnFamilyDescriptor::new("counters", counters)],
    )
    .unwrap();
    let c = d.column_family("counters").unwrap();
    d.merge_cf(&c, "hits", 2u64.to_le_bytes()).unwrap();
    d.merge_cf(&c, "hits", 3u64.to_le_bytes()).unwrap();
    drop(c);
    d.close().unwrap();
    let (code, out, err) = shaledb(&["get", p(&db), "0x68697473", "--column-family", "counters", "--hex"]);
    assert_eq!(code, Some(0), "{out}{err}");
    assert_eq!(out, "0x0500000000000000\n");
    let (code, out, err) = shaledb(&["put", p(&db), "k", "v", "--column-family", "counters"]);
    assert_eq!(code, Some(0), "{out}{err}");
    let loaded = shaledb::Options::load_latest(&db).unwrap();
    assert_eq!(loaded.column_families[0].merge_operator_name.as_deref(), Some("uint64add"));
}

#[test]
fn old_flag_spellings_still_work_and_warn() {
    let tmp = shaledb_testkit::tempdir();
    let db = tmp.path().join("db");
    let small = ["--keys", "50", "--ops", "50", "--threads", "1"];
    let mut old = vec!["stress", "--path", p(&db), "--destroy"];
    old.extend(small);
    let (code, out, err) = shaledb(&old);
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(out.contains("stress: ok"), "{out}");
    assert_eq!(err.matches("warning:").count(), 1, "{err}");
    assert!(err.contains("`stress --path DB` is the old spelling"), "{err}");
    let (code, out, err) = shaledb(&["stress", &format!("--path={}", p(&db)), "--verify_only", "--keys", "50"]);
    assert_eq!(code, Some(0), "{out}{err}");
    assert_eq!(err.matches("warning:").count(), 2, "{err}");
    assert!(err.contains("use `--verify-only`"), "{err}");

    // The current spellings: no warning.
    let (code, out, err) = shaledb(&["stress", p(&db), "--verify-only", "--keys", "50"]);
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(!err.contains("warning:"), "{err}");
    let (code, _, err) = shaledb(&["dump", p(&db), "--keys_only", "--limit", "1"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(err.contains("warning: `--keys_only` is the old spelling") && err.contains("`--keys-only`"), "{err}");
}

/// Issue 10: `stress --path` on a database it did not create printed one FAIL line per key (126,330 lines).
#[test]
fn stress_refuses_a_database_it_did_not_create_in_one_line() {
    let tmp = shaledb_testkit::tempdir();
    let path = tmp.path().join("bench-db");
    let db = shaledb::Db::open(&path, shaledb::Options::default()).unwrap();
    for i in 0..500u32 {
        db.put(format!("{i:016}").as_bytes(), b"value").unwrap();
    }
    db.close().unwrap();
    for extra in [&["--verify-only"][..], &[], &["--destroy"]] {
        let mut args = vec!["stress", p(&path), "--keys", "100", "--ops", "10"];
        args.extend(extra);
        let (code, out, err) = shaledb(&args);
        assert_eq!(code, Some(2), "{extra:?}: {out}{err}");
        assert_eq!(err.lines().count(), 1, "{extra:?}: {err}");
        assert!(err.contains("is not a stress database") && err.contains("0000000000000000"), "{err}");
        assert!(!out.contains("FAIL"), "{out}");
    }
    // Nothing was destroyed or written.
    let db = shaledb::Db::open_read_only(&path, shaledb::Options::default()).unwrap();
    assert_eq!(db.get(b"0000000000000499").unwrap().as_deref(), Some(&b"value"[..]));
    assert!(!tmp.path().join("bench-db.expected").exists());

    // The driver's own keys without their expected-state file: refused too.
    let sdb = tmp.path().join("stress-db");
    assert_eq!(shaledb(&["stress", p(&sdb), "--keys", "50", "--ops", "50", "--threads", "1"]).0, Some(0));
    std::fs::remove_file(tmp.path().join("stress-db.expected")).unwrap();
    let (code, _, err) = shaledb(&["stress", p(&sdb), "--keys", "50", "--verify-only"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("not a stress database") && err.contains("no expected-state file"), "{err}");
}

#[test]
fn repeated_failures_are_capped_with_a_count() {
    let tmp = shaledb_testkit::tempdir();
    let sdb = tmp.path().join("stress-db");
    let (code, _, err) = shaledb(&["stress", p(&sdb), "--keys", "100", "--ops", "200", "--threads", "1"]);
    assert_eq!(code, Some(0), "{err}");
    // Every key changed behind the driver's back, with the options the stress database records (its merge
    // operator: open refuses another).
    let db = shaledb::Db::open(&sdb, shaledb::Options::load_latest(&sdb).unwrap().options).unwrap();
    for k in 0..100u32 {
        db.put(format!("s{k:08}").as_bytes(), b"changed").unwrap();
    }
    db.close().unwrap();
    let (code, out, _) = shaledb(&["stress", p(&sdb), "--keys", "100", "--verify-only"]);
    assert_eq!(code, Some(1), "{out}");
    assert_eq!(out.matches("stress: FAIL").count(), 20, "{out}");
    assert!(out.contains("stress: ... 80 more problems not shown (--max-problems 20; 0 shows all)"), "{out}");
    assert!(out.contains("stress: verification failed: 100 problems"), "{out}");
    let (_, out, _) = shaledb(&["stress", p(&sdb), "--keys", "100", "--verify-only", "--max-problems", "0"]);
    assert_eq!(out.matches("stress: FAIL").count(), 100, "{out}");

    // verify: three tables gone, at most one printed.
    let path = tmp.path().join("db");
    let opts = shaledb::Options { disable_auto_compactions: true, ..shaledb::Options::default() };
    let db = shaledb::Db::open(&path, opts).unwrap();
    for round in 0..3 {
        db.put(format!("k{round}").as_bytes(), b"v").unwrap();
        db.flush().unwrap();
    }
    db.close().unwrap();
    for e in std::fs::read_dir(&path).unwrap() {
        let f = e.unwrap().path();
        if f.extension().is_some_and(|x| x == "sst") {
            std::fs::remove_file(f).unwrap();
        }
    }
    let (code, out, err) = shaledb(&["verify", p(&path), "--max-problems", "1"]);
    assert_eq!(code, Some(1), "{out}{err}");
    assert_eq!(out.matches("BAD  ").count(), 1, "{out}");
    let problems: usize = out.split("verify: ").nth(1).unwrap().split(' ').next().unwrap().parse().unwrap();
    assert!(problems >= 3, "{out}");
    assert!(out.contains(&format!("...  {} more problems not shown", problems - 1)), "{out}");
}

#[test]
fn version_names_the_release_the_commit_and_the_format() {
    let (code, out, err) = shaledb(&["--version"]);
    assert_eq!(code, Some(0), "{err}");
    let commit = Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map_or_else(|| "unknown".to_string(), |o| String::from_utf8_lossy(&o.stdout).trim().to_string());
    assert_eq!(
        out.trim_end(),
        format!(
            "shaledb {} (commit {commit}, on-disk format {})",
            env!("CARGO_PKG_VERSION"),
            shaledb_format::FORMAT_VERSION
        )
    );
    let (_, sub, _) = shaledb(&["get", "--version"]);
    assert_eq!(sub.trim_end(), out.trim_end().replacen("shaledb", "shaledb-get", 1));
}

/// The check reads with the driver's own options: its merges (stringappend) do not stop the scan early.
#[test]
fn stress_finds_a_foreign_key_behind_its_merges() {
    let tmp = shaledb_testkit::tempdir();
    let sdb = tmp.path().join("stress-db");
    let (code, _, err) = shaledb(&["stress", p(&sdb), "--keys", "100", "--ops", "300", "--threads", "1"]);
    assert_eq!(code, Some(0), "{err}");
    let opts =
        shaledb::Options { merge_operator: shaledb::merge::builtin("stringappend"), ..shaledb::Options::default() };
    let db = shaledb::Db::open(&sdb, opts).unwrap();
    for k in 0..100u32 {
        db.merge(format!("s{k:08}").as_bytes(), b"x").unwrap();
    }
    db.put(b"zzz", b"not ours").unwrap();
    db.close().unwrap();
    let (code, out, err) = shaledb(&["stress", p(&sdb), "--keys", "100", "--verify-only"]);
    assert_eq!(code, Some(2), "{out}{err}");
    assert!(err.contains("not a stress database") && err.contains("\"zzz\""), "{err}");
}

#[test]
fn checkpoint_and_backup_commands() {
    let tmp = shaledb_testkit::tempdir();
    let (db, ckpt, bk) = (tmp.path().join("db"), tmp.path().join("ckpt"), tmp.path().join("bk"));
    ok(&["put", "--create-if-missing", p(&db), "a", "1"]);
    ok(&["checkpoint", p(&db), p(&ckpt)]);
    assert_eq!(ok(&["get", p(&ckpt), "a"]), "1\n");
    // An existing target: exit 1, named.
    let (code, _, err) = shaledb(&["checkpoint", p(&db), p(&ckpt)]);
    assert_eq!(code, Some(1));
    assert!(err.contains("already exists") && err.contains(p(&ckpt)), "{err}");
    assert!(ok(&["backup", "create", p(&db), p(&bk)]).starts_with("backup 1 created"));
    ok(&["put", p(&db), "b", "2"]);
    assert!(ok(&["backup", "create", p(&db), p(&bk)]).starts_with("backup 2 created"));
    let list = ok(&["backup", "list", p(&bk)]);
    assert_eq!(list.lines().count(), 3, "{list}");
    assert!(list.lines().nth(2).unwrap().trim_start().starts_with("2 "), "{list}");
    let verify = ok(&["backup", "verify", p(&bk)]);
    assert!(verify.contains("backup 1: OK") && verify.contains("backup 2: OK"), "{verify}");
    let restored = tmp.path().join("restored");
    ok(&["backup", "restore", p(&bk), "1", p(&restored)]);
    assert_eq!(ok(&["get", p(&restored), "a"]), "1\n");
    assert_eq!(shaledb(&["get", p(&restored), "b"]).0, Some(1), "backup 1 predates b");
    // Restore refuses a non-empty target.
    let (code, _, err) = shaledb(&["backup", "restore", p(&bk), "2", p(&restored)]);
    assert_eq!(code, Some(1));
    assert!(err.contains("not empty"), "{err}");
    assert!(ok(&["backup", "purge", p(&bk), "--keep", "1"]).contains("deleted 1 backups: 1"));
    let (code, _, err) = shaledb(&["backup", "verify", p(&bk), "1"]);
    assert_eq!(code, Some(1));
    assert!(err.contains("no backup 1"), "{err}");
    // A damaged table: verify exits 1 naming it.
    let shared = bk.join("shared");
    let table = std::fs::read_dir(&shared).unwrap().flatten().next().unwrap().path();
    let mut data = std::fs::read(&table).unwrap();
    data[0] ^= 0xff;
    std::fs::write(&table, &data).unwrap();
    let (code, _, err) = shaledb(&["backup", "verify", p(&bk), "2"]);
    assert_eq!(code, Some(1));
    assert!(err.contains(table.file_name().unwrap().to_str().unwrap()), "{err}");
    // A corrupt metadata file: list names it and exits 1.
    std::fs::write(bk.join("meta").join("2"), b"garbage\n").unwrap();
    let (code, _, err) = shaledb(&["backup", "list", p(&bk)]);
    assert_eq!(code, Some(1));
    assert!(err.contains("meta/2"), "{err}");
    // Usage errors exit 2.
    assert_eq!(shaledb(&["backup", "purge", p(&bk)]).0, Some(2));
    ok(&["backup", "delete", p(&bk), "2"]);
    assert_eq!(ok(&["backup", "list", p(&bk)]).lines().count(), 1);
}

#[test]
fn sst_write_and_ingest_commands() {
    let tmp = shaledb_testkit::tempdir();
    let (db, input, sst) = (tmp.path().join("db"), tmp.path().join("in.txt"), tmp.path().join("x.sst"));
    std::fs::write(&input, "a\t1\nb\t2\nc\t\n").unwrap();
    let out = ok(&["sst", "write", p(&sst), p(&input)]);
    assert!(out.contains("3 entries"), "{out}");
    ok(&["put", "--create-if-missing", p(&db), "z", "old"]);
    ok(&["ingest", p(&db), p(&sst)]);
    assert_eq!(ok(&["get", p(&db), "b"]), "2\n");
    assert_eq!(ok(&["get", p(&db), "c"]), "\n");
    // Hex input.
    let (hin, hsst) = (tmp.path().join("h.txt"), tmp.path().join("h.sst"));
    std::fs::write(&hin, "0x7a\t0x6e6577\n").unwrap();
    ok(&["sst", "write", "--hex", p(&hsst), p(&hin)]);
    ok(&["ingest", p(&db), p(&hsst)]);
    assert_eq!(ok(&["get", p(&db), "z"]), "new\n");
    // Unsorted input: exit 1, the line named.
    std::fs::write(&input, "a\t1\nc\t3\nb\t2\n").unwrap();
    let (code, _, err) = shaledb(&["sst", "write", p(&sst), p(&input)]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("in.txt:3") && err.contains("sorted"), "{err}");
    std::fs::write(&input, "a 1\n").unwrap();
    let (code, _, err) = shaledb(&["sst", "write", p(&sst), p(&input)]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("in.txt:1") && err.contains("no tab"), "{err}");
    std::fs::write(&input, "").unwrap();
    let (code, _, err) = shaledb(&["sst", "write", p(&sst), p(&input)]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("no entries"), "{err}");
}

/// Every refusal of `sst write` leaves the output's directory as it was: no OUTPUT (not even an empty one)
/// and no temporary file when OUTPUT did not exist, and an existing OUTPUT byte for byte unchanged; OUTPUT
/// naming the input itself is refused before anything is written.
#[test]
fn sst_write_refusals_leave_no_file_behind() {
    let tmp = shaledb_testkit::tempdir();
    let dir = tmp.path().join("out");
    std::fs::create_dir(&dir).unwrap();
    let listing = || {
        let mut v: Vec<String> =
            std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
        v.sort();
        v
    };
    let input = tmp.path().join("in.txt");
    let sst = dir.join("x.sst");
    let bad_inputs: [(&str, &str); 5] = [
        ("b\t1\na\t2\n", "sorted"),
        ("a\t1\na\t2\n", "sorted"),
        ("a 1\n", "no tab"),
        ("", "no entries"),
        ("zz\t1\nxx\n", "no tab"),
    ];
    for (text, why) in bad_inputs {
        std::fs::write(&input, text).unwrap();
        let (code, _, err) = shaledb(&["sst", "write", p(&sst), p(&input)]);
        assert_eq!(code, Some(1), "{text:?}: {err}");
        assert!(err.contains(why), "{text:?}: {err}");
        assert!(listing().is_empty(), "{text:?} left {:?}", listing());
    }
    let (code, _, err) = shaledb(&["sst", "write", p(&sst), p(&tmp.path().join("missing.txt"))]);
    assert_eq!(code, Some(1), "{err}");
    assert!(listing().is_empty(), "a missing input left {:?}", listing());
    // A hex input with bad hex, after good lines: the partial table is removed too.
    std::fs::write(&input, "0x61\t0x31\n0x62\tnothex\n").unwrap();
    let (code, _, err) = shaledb(&["sst", "write", "--hex", p(&sst), p(&input)]);
    assert_eq!(code, Some(1), "{err}");
    assert!(listing().is_empty(), "bad hex left {:?}", listing());
    // An existing OUTPUT survives a refusal unchanged.
    std::fs::write(&input, "a\t1\n").unwrap();
    ok(&["sst", "write", p(&sst), p(&input)]);
    let before = std::fs::read(&sst).unwrap();
    std::fs::write(&input, "b\t1\na\t2\n").unwrap();
    assert_eq!(shaledb(&["sst", "write", p(&sst), p(&input)]).0, Some(1));
    assert_eq!(std::fs::read(&sst).unwrap(), before);
    assert_eq!(listing(), vec!["x.sst".to_string()]);
    // OUTPUT is the input: refused, the input kept.
    let same = dir.join("same.txt");
    std::fs::write(&same, "a\t1\n").unwrap();
    let (code, _, err) = shaledb(&["sst", "write", p(&same), p(&same)]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("is the input file"), "{err}");
    assert_eq!(std::fs::read_to_string(&same).unwrap(), "a\t1\n");
    assert_eq!(listing(), vec!["same.txt".to_string(), "x.sst".to_string()]);
}

/// OPTIONS files: the key tools and `checkpoint` open a database with the options its newest OPTIONS file
/// records, so a database written with a built-in merge operator is read by them (open refuses another
/// operator, and the defaults have none), and the checkpoint carries the OPTIONS file.
#[test]
fn key_tools_open_with_the_recorded_options() {
    let tmp = shaledb_testkit::tempdir();
    let db_path = tmp.path().join("db");
    let opts = shaledb::Options { merge_operator: shaledb::merge::builtin("stringappend"), ..Default::default() };
    let db = shaledb::Db::open(&db_path, opts).unwrap();
    db.merge("k", "a").unwrap();
    db.merge("k", "b").unwrap();
    db.close().unwrap();
    let (code, out, err) = shaledb(&["get", p(&db_path), "k"]);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(out.trim_end(), "a,b");
    let ck = tmp.path().join("ck");
    let (code, _, err) = shaledb(&["checkpoint", p(&db_path), p(&ck)]);
    assert_eq!(code, Some(0), "{err}");
    let names: Vec<String> =
        std::fs::read_dir(&ck).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    assert!(names.iter().any(|n| n.starts_with("OPTIONS-")), "{names:?}");
}
