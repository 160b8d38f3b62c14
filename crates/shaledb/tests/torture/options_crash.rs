//! An OPTIONS file cut short (D14): a copy of the file system is kept before every mutating operation of an
//! open that writes a new OPTIONS file (and removes the oldest); each copy is crashed (process kill, power loss
//! dropping what was not synced). The next open must succeed with every acknowledged write, and the newest
//! OPTIONS file must then load as the old options or the new ones, never half of a file. The same for the
//! rewrite after creating and dropping a column family: the newest file lists the families before or after.

use crate::{db_path, mem_options, open_on};
use shaledb::Options;
use shaledb_testkit::{MemFs, PowerLoss};
use std::path::Path;
use std::sync::Arc;

#[test]
fn a_crash_during_the_options_write_leaves_the_old_file_or_the_new_one() {
    let fs = MemFs::new();
    let old = Options { write_buffer_size: 24 << 10, ..mem_options(&fs) };
    let new = Options { write_buffer_size: 40 << 10, ..mem_options(&fs) };
    // Two opens: two OPTIONS files, so the crashed open also removes one.
    for _ in 0..2 {
        let db = open_on(&fs, &old).unwrap();
        db.put("k", "v").unwrap();
        db.flush().unwrap();
    }
    // The crashed open: every mutating operation of it, OPTIONS file and temp file included.
    fs.record_before(|op, _, _| op.is_mutation());
    let db = open_on(&fs, &new).unwrap();
    let recorded = fs.stop_recording();
    drop(db);
    let options_ops = recorded.iter().filter(|r| r.path.to_string_lossy().contains("dbtmp")).count();
    assert!(options_ops >= 2, "the temp file's write and rename were not recorded ({} operations)", recorded.len());
    let mut seen = std::collections::BTreeSet::new();
    for r in recorded {
        for (how, crashed) in [("kill", r.fs.deep_clone()), ("power loss", r.fs)] {
            if how == "power loss" {
                crashed.power_loss(PowerLoss::DropUnsynced, r.index);
            }
            let what = format!("{how} before {:?} {} (#{})", r.op, r.path.display(), r.index);
            let loaded = Options::load_latest_with(db_path(), Arc::new(crashed.clone()))
                .unwrap_or_else(|e| panic!("{what}: the newest OPTIONS file does not load: {e}"));
            let wbs = loaded.options.write_buffer_size;
            assert!(wbs == old.write_buffer_size || wbs == new.write_buffer_size, "{what}: {wbs}");
            seen.insert(wbs);
            // The next open works, with every acknowledged write, and cleans a leftover temp file.
            let db = open_on(&crashed, &new).unwrap_or_else(|e| panic!("{what}: {e}"));
            assert_eq!(db.get("k").unwrap().as_deref(), Some(&b"v"[..]), "{what}");
            drop(db);
            let names = crashed.file_names(Path::new("/db"));
            assert!(!names.iter().any(|n| n.ends_with(".dbtmp")), "{what}: {names:?}");
            assert_eq!(names.iter().filter(|n| n.starts_with("OPTIONS-")).count(), 2, "{what}: {names:?}");
        }
    }
    assert_eq!(seen.len(), 2, "crash points before and after the rename: {seen:?}");
}

#[test]
fn a_crash_during_create_or_drop_family_leaves_the_families_before_or_after() {
    let fs = MemFs::new();
    let o = mem_options(&fs);
    let db = open_on(&fs, &o).unwrap();
    let keep = db.create_column_family("keep", o.clone()).unwrap();
    // Every mutating operation of a create and a drop: MANIFEST edits, OPTIONS temp file, rename, removal.
    fs.record_before(|op, _, _| op.is_mutation());
    let new = db.create_column_family("new", Options { write_buffer_size: 40 << 10, ..o.clone() }).unwrap();
    db.drop_column_family(&keep).unwrap();
    let recorded = fs.stop_recording();
    drop((keep, new, db));
    let options_ops = recorded.iter().filter(|r| r.path.to_string_lossy().contains("dbtmp")).count();
    assert!(options_ops >= 4, "two OPTIONS rewrites were not recorded ({} operations)", recorded.len());
    let states: [&[&str]; 3] = [&["keep"], &["keep", "new"], &["new"]];
    let mut seen = std::collections::BTreeSet::new();
    for r in recorded {
        for (how, crashed) in [("kill", r.fs.deep_clone()), ("power loss", r.fs)] {
            if how == "power loss" {
                crashed.power_loss(PowerLoss::DropUnsynced, r.index);
            }
            let what = format!("{how} before {:?} {} (#{})", r.op, r.path.display(), r.index);
            let listed = |fs: &MemFs| -> Vec<String> {
                let loaded = Options::load_latest_with(db_path(), Arc::new(fs.clone()))
                    .unwrap_or_else(|e| panic!("{what}: the newest OPTIONS file does not load: {e}"));
                loaded.column_families.into_iter().map(|f| f.name).collect()
            };
            let before = listed(&crashed);
            assert!(states.iter().any(|s| *s == before), "{what}: {before:?}");
            seen.insert(before);
            // The next open works, and its OPTIONS file lists exactly the families the MANIFEST has.
            let db = open_on(&crashed, &o).unwrap_or_else(|e| panic!("{what}: {e}"));
            let live: Vec<String> = db.column_families().iter().skip(1).map(|c| c.name().to_string()).collect();
            drop(db);
            assert_eq!(listed(&crashed), live, "{what}");
            let names = crashed.file_names(Path::new("/db"));
            assert!(!names.iter().any(|n| n.ends_with(".dbtmp")), "{what}: {names:?}");
        }
    }
    assert_eq!(seen.len(), 3, "crash points before and after each rename: {seen:?}");
}
