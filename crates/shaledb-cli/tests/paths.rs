//! Issue 39, "no surprises": every command that reads a path it did not create checks it first and refuses in
//! one line (exit 1, or 2 where documented), creating nothing. The real binary on real directories; each case
//! compares the directory tree before and after.

use std::path::{Path, PathBuf};
use std::process::Command;

mod common;
use common::{ok, p, shaledb};

/// Every path under `root` (relative, sorted) with the contents of the files: what a refusal must leave as it
/// was.
fn tree(root: &Path) -> Vec<(PathBuf, Option<Vec<u8>>)> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<(PathBuf, Option<Vec<u8>>)>) {
        let Ok(entries) = std::fs::read_dir(dir) else { return };
        for e in entries {
            let path = e.unwrap().path();
            let rel = path.strip_prefix(root).unwrap().to_path_buf();
            if path.is_dir() {
                out.push((rel, None));
                walk(root, &path, out);
            } else {
                out.push((rel, Some(std::fs::read(&path).unwrap())));
            }
        }
    }
    let mut out = Vec::new();
    walk(root, root, &mut out);
    out.sort();
    out
}

/// Runs `args`, which must exit with `code` printing one line on stderr (and nothing on stdout) that contains
/// every one of `wanted`, and must leave the tree under `root` as it was. Returns the line.
fn refused(root: &Path, args: &[&str], code: i32, wanted: &[&str]) -> String {
    let before = tree(root);
    let (got, out, err) = shaledb(args);
    assert_eq!(got, Some(code), "{args:?}: {out}{err}");
    assert!(out.is_empty(), "{args:?}: printed on stdout: {out}");
    assert_eq!(err.lines().count(), 1, "{args:?}: not one line: {err}");
    for w in wanted {
        assert!(err.contains(w), "{args:?}: {w:?} not in: {err}");
    }
    assert_eq!(tree(root), before, "{args:?} changed the directory tree");
    err.trim_end().to_string()
}

/// A database at `path` holding `k` = `v`, written by the binary.
fn make_db(path: &Path) {
    ok(&["put", "--create-if-missing", p(path), "k", "v"]);
}

#[test]
fn backup_commands_refuse_a_path_that_does_not_exist_creating_nothing() {
    let tmp = shaledb_testkit::tempdir();
    let root = tmp.path();
    let missing = root.join("backups");
    let target = root.join("restored");
    let m = p(&missing);
    for args in [
        vec!["backup", "list", m],
        vec!["backup", "verify", m],
        vec!["backup", "verify", m, "1"],
        vec!["backup", "restore", m, "1", p(&target)],
        vec!["backup", "purge", m, "--keep", "1"],
        vec!["backup", "delete", m, "1"],
    ] {
        let line = refused(root, &args, 1, &["error: ", &format!("{m} does not exist"), "shaledb backup create"]);
        assert!(line.starts_with("error: "), "{line}");
    }
    assert!(!missing.exists() && !target.exists());
}

#[test]
fn backup_commands_refuse_a_directory_that_is_not_a_backup_directory() {
    let tmp = shaledb_testkit::tempdir();
    let root = tmp.path();
    let plain = root.join("plain");
    std::fs::create_dir(&plain).unwrap();
    std::fs::write(plain.join("notes.txt"), b"mine").unwrap();
    let file = root.join("afile");
    std::fs::write(&file, b"text").unwrap();
    refused(root, &["backup", "list", p(&plain)], 1, &["is not a backup directory", "no meta/, shared/, private/"]);
    refused(root, &["backup", "verify", p(&plain), "1"], 1, &["is not a backup directory"]);
    refused(root, &["backup", "delete", p(&plain), "1"], 1, &["is not a backup directory"]);
    refused(root, &["backup", "list", p(&file)], 1, &["is not a directory"]);
}

/// Arguments swapped: `backup list DB` used to make `meta/ private/ shared/` inside the database.
#[test]
fn backup_commands_refuse_a_database_directory_creating_nothing_in_it() {
    let tmp = shaledb_testkit::tempdir();
    let root = tmp.path();
    let db = root.join("db");
    make_db(&db);
    let d = p(&db);
    let is_db = format!("{d} is a database, not a backup directory");
    let hint = format!("shaledb backup create {d} BACKUP_DIR");
    for args in [
        vec!["backup", "list", d],
        vec!["backup", "verify", d],
        vec!["backup", "purge", d, "--keep", "1"],
        vec!["backup", "delete", d, "1"],
    ] {
        refused(root, &args, 1, &[&is_db, &hint]);
    }
    // Nor is a backup ever made inside a database: `backup create OTHER DB` refuses before writing to DB.
    let other = root.join("other");
    make_db(&other);
    let before = tree(&db);
    let (code, out, err) = shaledb(&["backup", "create", p(&other), d]);
    assert_eq!(code, Some(1), "{out}{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains(&is_db) && err.contains("backups go into a directory of their own"), "{err}");
    assert_eq!(tree(&db), before, "backup create wrote into a database directory");
    assert_eq!(ok(&["get", d, "k"]), "v\n");
    // What `backup create` made is read by the others.
    let bk = root.join("bk");
    ok(&["backup", "create", d, p(&bk)]);
    assert_eq!(ok(&["backup", "list", p(&bk)]).lines().count(), 2);
    assert_eq!(ok(&["backup", "verify", p(&bk)]).trim_end(), "backup 1: OK");
}

#[test]
fn key_tools_repair_and_verify_refuse_a_directory_that_holds_no_database() {
    let tmp = shaledb_testkit::tempdir();
    let root = tmp.path();
    let dir = root.join("notdb");
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(dir.join("notes.txt"), b"not a database").unwrap();
    let (sst, secondary) = (root.join("x.sst"), root.join("secondary"));
    let d = p(&dir);
    let no_db = format!("{d} holds no database");
    let line = refused(root, &["repair", d], 1, &[&format!("{no_db} (no CURRENT and no MANIFEST)")]);
    assert!(line.starts_with("error: ") && !line.contains("CURRENT at offset"), "{line}");
    for args in [
        vec!["get", d, "k"],
        vec!["scan", d],
        vec!["delete", d, "k"],
        vec!["put", d, "k", "v"],
        vec!["create-column-family", d, "cf"],
        vec!["drop-column-family", d, "cf"],
        vec!["list-column-families", d],
        vec!["get", "--read-only", d, "k"],
        vec!["scan", "--read-only", d],
        vec!["get", "--secondary-path", p(&secondary), d, "k"],
        vec!["ingest", d, p(&sst)],
    ] {
        let line = refused(root, &args, 1, &[&no_db]);
        assert!(line.starts_with("error: "), "{args:?}: {line}");
    }
    let copy = root.join("copy");
    refused(root, &["checkpoint", d, p(&copy)], 1, &[&no_db]);
    refused(root, &["backup", "create", d, p(&root.join("bk"))], 1, &[&no_db]);
    // verify's refusal is its documented exit 2 ("verify refused"), with the same promise: one line, nothing made.
    refused(root, &["verify", d], 2, &["verify: ", "is not a ShaleDB database"]);
    assert!(!dir.join("LOCK").exists());
}

#[test]
fn key_tools_and_repair_refuse_a_path_that_does_not_exist() {
    let tmp = shaledb_testkit::tempdir();
    let root = tmp.path();
    let missing = root.join("missing");
    let m = p(&missing);
    let gone = format!("{m} does not exist");
    for args in [
        vec!["repair", m],
        vec!["get", m, "k"],
        vec!["scan", m],
        vec!["delete", m, "k"],
        vec!["list-column-families", m],
        vec!["get", "--read-only", m, "k"],
    ] {
        let line = refused(root, &args, 1, &[]);
        assert!(line.starts_with("error: "), "{args:?}: {line}");
        assert!(line.contains(&gone) || line.contains(&format!("{m} holds no database")), "{args:?}: {line}");
    }
    refused(root, &["verify", m], 2, &[&gone]);
    assert!(!missing.exists());
}

/// `dump FILE` on a file that is not what its name says reports DAMAGE and exits 1.
#[test]
fn dump_exits_1_whenever_it_reports_damage() {
    let tmp = shaledb_testkit::tempdir();
    let root = tmp.path();
    for name in ["x.sst", "000007.log", "MANIFEST-000003", "short.sst"] {
        let path = root.join(name);
        let data: &[u8] = if name == "short.sst" { b"tiny" } else { b"this is a text file, not a ShaleDB file\n" };
        std::fs::write(&path, data).unwrap();
        let before = tree(root);
        let (code, out, err) = shaledb(&["dump", p(&path)]);
        assert!(out.contains("DAMAGE"), "{name}: {out}{err}");
        assert_eq!(code, Some(1), "{name}: reported DAMAGE and exited {code:?}: {out}{err}");
        assert_eq!(tree(root), before);
    }
    // `--kind` forcing another reading of a file is judged the same way.
    let (code, out, _) = shaledb(&["dump", "--kind", "sst", p(&root.join("000007.log"))]);
    assert!(out.contains("DAMAGE") && code == Some(1), "{code:?}: {out}");
    // A sound file still exits 0.
    let db = root.join("db");
    make_db(&db);
    ok(&["dump", p(&db)]);
}

/// Issue 39: `shaledb dump NOT-A-WAL.log | head` showed DAMAGE lines and exited 0, because a reader that goes
/// away (a broken pipe) counted as a clean end. It exits 1 once a DAMAGE line reached the reader.
#[test]
fn dump_exits_1_when_its_reader_stops_after_a_damage_line() {
    use std::io::BufRead;
    let tmp = shaledb_testkit::tempdir();
    let dir = tmp.path().join("damaged");
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(dir.join("CURRENT"), b"not the name of a MANIFEST\n").unwrap();
    // A listing far longer than a pipe holds, so that the dump is still writing when the reader goes.
    for i in 0..4000 {
        std::fs::write(dir.join(format!("a-file-with-a-long-name-so-that-the-listing-is-long-{i:05}.txt")), b"")
            .unwrap();
    }
    let mut child = Command::new(env!("CARGO_BIN_EXE_shaledb"))
        .args(["dump", p(&dir)])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let damage = lines.by_ref().map(Result::unwrap).find(|l| l.starts_with("DAMAGE")).expect("no DAMAGE line");
    assert!(damage.contains("does not name a MANIFEST"), "{damage}");
    drop(lines);
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(1), "stderr: {}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn sst_write_leaves_no_file_behind_on_an_error_and_never_loses_an_existing_output() {
    let tmp = shaledb_testkit::tempdir();
    let root = tmp.path();
    let (input, out) = (root.join("in.txt"), root.join("out.sst"));
    // (input, --hex, what the error says): unsorted, no tab, empty, bad hex after a good line.
    let bad_inputs = [
        ("a\t1\nc\t3\nb\t2\n", false, "in.txt:3"),
        ("a 1\n", false, "no tab"),
        ("", false, "no entries"),
        ("61\t31\n0xzz\t1\n", true, "not hexadecimal"),
    ];
    let run = |hex: bool| -> Vec<&str> {
        let mut args = vec!["sst", "write", p(&out), p(&input)];
        if hex {
            args.push("--hex");
        }
        args
    };
    // No OUTPUT before: none after.
    for (text, hex, wanted) in bad_inputs {
        std::fs::write(&input, text).unwrap();
        let line = refused(root, &run(hex), 1, &[wanted]);
        assert!(line.starts_with("error: "), "{line}");
        assert!(!out.exists());
    }
    // An OUTPUT that exists: untouched by a failed write, replaced by a complete table.
    std::fs::write(&out, b"precious").unwrap();
    for (text, hex, wanted) in bad_inputs {
        std::fs::write(&input, text).unwrap();
        refused(root, &run(hex), 1, &[wanted]);
        assert_eq!(std::fs::read(&out).unwrap(), b"precious");
    }
    std::fs::write(&input, "a\t1\nb\t2\n").unwrap();
    let printed = ok(&["sst", "write", p(&out), p(&input)]);
    assert!(printed.starts_with(&format!("{}: 2 entries", p(&out))), "{printed}");
    assert_eq!(std::fs::read_dir(root).unwrap().count(), 2, "a temporary file was left: {:?}", tree(root));
    let dumped = ok(&["dump", p(&out)]);
    assert!(dumped.contains("'a' @0 PUT => '1'") && dumped.contains("'b' @0 PUT => '2'"), "{dumped}");
    // A directory as OUTPUT is refused before anything is written.
    let sub = root.join("sub");
    std::fs::create_dir(&sub).unwrap();
    refused(root, &["sst", "write", p(&sub), p(&input)], 1, &["is a directory"]);
    // A missing INPUT too.
    refused(root, &["sst", "write", p(&root.join("new.sst")), p(&root.join("nope.txt"))], 1, &["cannot open"]);
}

/// The help's first line names no partial list of commands, and `get`'s NotFound has the prefix of every
/// other error.
#[test]
fn help_line_and_error_prefix() {
    let help = ok(&["--help"]);
    let first = help.lines().next().unwrap();
    assert_eq!(first, "The shaledb command-line tool for ShaleDB databases");
    for cmd in ["bench", "dump", "verify", "get", "repair", "backup", "sst", "ingest", "server", "stress"] {
        assert!(help.contains(&format!("\n  {cmd} ")), "{cmd} not listed in:\n{help}");
    }
    let tmp = shaledb_testkit::tempdir();
    let db = tmp.path().join("db");
    make_db(&db);
    let (code, out, err) = shaledb(&["get", p(&db), "absent"]);
    assert_eq!((code, out.as_str(), err.as_str()), (Some(1), "", "error: NotFound: absent\n"));
    let (code, _, err) = shaledb(&["get", "--read-only", "--hex", p(&db), "0x00ff"]);
    assert_eq!((code, err.as_str()), (Some(1), "error: NotFound: 0x00FF\n"));
}

/// `stress DIR --verify-only` on a directory without a database made a new one and "verified" it.
#[test]
fn stress_verify_only_refuses_a_directory_without_a_database() {
    let tmp = shaledb_testkit::tempdir();
    let root = tmp.path();
    let empty = root.join("empty");
    std::fs::create_dir(&empty).unwrap();
    let missing = root.join("missing");
    refused(root, &["stress", p(&empty), "--verify-only"], 2, &["holds no database (no CURRENT)", "creates nothing"]);
    refused(root, &["stress", p(&missing), "--verify-only"], 2, &["does not exist", "creates nothing"]);
}
