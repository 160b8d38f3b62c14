//! Short runs of the real `shaledb` binary (issue 39): each `shaledb put` wrote its own table and rotated the
//! LOG (after 15 puts: 13 tables, LOG.old.20..29). Now writes stay in the WAL until a memtable fills or an open
//! finds 4 WALs, and each run appends to the one LOG.

use std::path::Path;

mod common;
use common::ok;

fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> =
        std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    v.sort();
    v
}

#[test]
fn fifteen_puts_leave_one_log_and_no_table_per_put() {
    let tmp = shaledb_testkit::tempdir();
    let db = tmp.path().join("db");
    let path = db.to_str().unwrap();
    for i in 0..15 {
        let (k, v) = (format!("k{i:02}"), format!("v{i}"));
        let mut args = vec!["put"];
        if i == 0 {
            args.push("--create-if-missing");
        }
        args.extend([path, &k, &v]);
        ok(&args);
    }
    let files = names(&db);
    assert!(files.contains(&"LOG".to_string()), "{files:?}");
    assert!(!files.iter().any(|n| n.starts_with("LOG.old.")), "{files:?}");
    let log = std::fs::read_to_string(db.join("LOG")).unwrap();
    assert_eq!(log.lines().filter(|l| l.contains("---- opened by pid")).count(), 15, "{log}");
    // An open flushes only once it finds 4 WALs (the 5th, 9th and 13th puts): 3 tables, not one per put.
    let tables: Vec<&String> = files.iter().filter(|n| n.ends_with(".sst")).collect();
    assert!(tables.len() <= 3, "{files:?}");
    let wals: Vec<&String> = files.iter().filter(|n| n.ends_with(".log")).collect();
    assert!((1..=4).contains(&wals.len()), "{files:?}");
    for i in 0..15 {
        assert_eq!(ok(&["get", path, &format!("k{i:02}")]).trim_end(), format!("v{i}"));
        // A read-only open sees the writes still in the WALs too.
        assert_eq!(ok(&["get", "--read-only", path, &format!("k{i:02}")]).trim_end(), format!("v{i}"));
    }
    // Deletes and family creations are short runs too: still one LOG, and the values they leave.
    ok(&["delete", path, "k00"]);
    ok(&["create-column-family", path, "extra"]);
    ok(&["put", "--column-family", "extra", path, "fk", "fv"]);
    let files = names(&db);
    assert!(!files.iter().any(|n| n.starts_with("LOG.old.")), "{files:?}");
    assert!(files.iter().filter(|n| n.ends_with(".sst")).count() <= 4, "{files:?}");
    let scan = ok(&["scan", path]);
    assert!(!scan.contains("k00") && scan.contains("k01") && scan.contains("k14"), "{scan}");
    assert_eq!(ok(&["get", "--column-family", "extra", path, "fk"]).trim_end(), "fv");
}
