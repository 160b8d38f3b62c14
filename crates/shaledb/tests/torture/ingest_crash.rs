//! Ingestion cut short (docs/durability.md D15): a copy of the file system is kept before every mutating
//! operation of one `ingest_external_file` in the database directory; each copy is crashed (process kill and
//! three kinds of power loss) and must open with every synced write and either all of the ingested data or
//! none of it. Nothing the interrupted attempt left stands in the way: no table file outside the MANIFEST
//! is left after the open, and the same ingestion then succeeds.

use crate::{mem_options, open_on};
use shaledb::ingest::{IngestExternalFileOptions, SstFileWriter};
use shaledb::{Db, Fs, WriteOptions};
use shaledb_testkit::workload::read_all;
use shaledb_testkit::{MemFs, Model, PowerLoss};
use std::path::{Path, PathBuf};

/// A database with tables and synced memtable writes; two external files (`/ext/`) of `ext_keys`.
fn setup(fs: &MemFs, ext_keys: &[(u32, u32)]) -> (Db, Vec<PathBuf>) {
    let db = open_on(fs, &mem_options(fs)).unwrap();
    let sync = WriteOptions { sync: true, ..WriteOptions::default() };
    for i in (0..400u32).step_by(3) {
        db.put_opt(&sync, format!("k{i:04}"), format!("base{i}")).unwrap();
        if i == 150 {
            db.flush().unwrap();
        }
    }
    db.compact_range(None, None).unwrap();
    for i in (200..260u32).step_by(7) {
        db.put_opt(&sync, format!("k{i:04}"), "memtable").unwrap();
    }
    fs.create_dir_all(Path::new("/ext")).unwrap();
    let mut files = Vec::new();
    for (n, &(from, to)) in ext_keys.iter().enumerate() {
        let p = PathBuf::from(format!("/ext/{n}.sst"));
        let mut w = SstFileWriter::create(&mem_options(fs));
        w.open(&p).unwrap();
        for i in from..to {
            w.put(format!("k{i:04}"), format!("ext{n}-{i}")).unwrap();
        }
        w.finish().unwrap();
        files.push(p);
    }
    (db, files)
}

/// Table files in the database directory.
fn table_files(fs: &MemFs) -> Vec<String> {
    fs.list(Path::new(crate::DB)).unwrap().into_iter().filter(|n| n.ends_with(".sst")).collect()
}

fn live_tables(db: &Db) -> usize {
    (0..7).map(|l| db.property(&format!("rocksdb.num-files-at-level{l}")).unwrap().parse::<usize>().unwrap()).sum()
}

fn sweep(ext_keys: &[(u32, u32)], opts: &IngestExternalFileOptions) {
    let fs = MemFs::new();
    let (db, files) = setup(&fs, ext_keys);
    let before = read_all(&db).unwrap();
    let tables_before: Vec<String> = table_files(&fs);
    let sizes: Vec<u64> = files.iter().map(|f| fs.file_size(f).unwrap()).collect();
    fs.record_before(|op, path, _| op.is_mutation() && path.starts_with(crate::DB));
    db.ingest_external_file(&files, opts).unwrap();
    let recorded = fs.stop_recording();
    let after = read_all(&db).unwrap();
    assert_ne!(before, after);
    drop(db);
    assert!(recorded.len() > 4, "only {} operations recorded", recorded.len());
    let (mut old, mut new) = (0, 0);
    for r in recorded {
        let what = format!("before {:?} {} (#{})", r.op, r.path.display(), r.index);
        let mut crashed = vec![(format!("kill {what}"), r.fs.deep_clone())];
        for (name, mode) in [
            ("drop unsynced", PowerLoss::DropUnsynced),
            ("random pages", PowerLoss::KeepRandomPages { keep_probability: 0.5 }),
            ("garbled", PowerLoss::GarbleUnsynced),
        ] {
            let c = r.fs.deep_clone();
            c.power_loss(mode, r.index);
            crashed.push((format!("power loss ({name}) {what}"), c));
        }
        for (what, c) in crashed {
            let db = open_on(&c, &mem_options(&c)).unwrap_or_else(|e| panic!("{what}: open: {e}"));
            let got: Model = read_all(&db).unwrap_or_else(|e| panic!("{what}: read: {e}"));
            if got == before {
                old += 1;
                // A copy that is a whole table (no identity, below the counter the first step recorded) is
                // removed by the open. One cut short cannot be read, so the open cannot prove it ours and keeps
                // it, stepping over its number, as it does with a flush's cut short (db/files.rs): only such
                // files of this ingestion, never another table, may stay.
                let left: Vec<String> = table_files(&c);
                let extra: Vec<&String> = left.iter().filter(|n| !tables_before.contains(n)).collect();
                assert!(extra.len() <= files.len() && left.len() - extra.len() <= live_tables(&db), "{what}: {left:?}");
                for name in &extra {
                    let len = c.file_size(&Path::new(crate::DB).join(name)).unwrap();
                    let whole = sizes.contains(&len);
                    assert!(!whole, "{what}: a whole copy {name} stayed");
                }
                // The interrupted attempt does not stand in the way of the next one.
                let present: Vec<&PathBuf> = files.iter().filter(|p| c.exists(p)).collect();
                if present.len() == files.len() {
                    db.ingest_external_file(&files, opts).unwrap_or_else(|e| panic!("{what}: retry: {e}"));
                    assert_eq!(read_all(&db).unwrap(), after, "{what}: retry");
                }
            } else {
                assert_eq!(got, after, "{what}: neither the state before nor the one after the ingestion");
                new += 1;
            }
            drop(db);
            // And it opens again.
            let db = open_on(&c, &mem_options(&c)).unwrap_or_else(|e| panic!("{what}: second open: {e}"));
            drop(db);
        }
    }
    eprintln!("{old} crashes without the ingestion, {new} with it");
    assert!(old > 0 && new > 0, "crash points: {old} without the ingestion, {new} with it");
}

#[test]
fn interrupted_ingestion_of_files_placed_below_the_data_is_all_or_nothing() {
    // Ranges apart from every key of the database: copied, sequence number 0.
    sweep(&[(1000, 1040), (1100, 1130)], &IngestExternalFileOptions::default());
}

#[test]
fn interrupted_ingestion_with_a_flush_and_a_global_sequence_number_is_all_or_nothing() {
    // Over the tables and the memtable: flushed, then rewritten with a global sequence number.
    sweep(&[(100, 130), (205, 240)], &IngestExternalFileOptions::default());
}

#[test]
fn interrupted_ingestion_by_hard_link_is_all_or_nothing() {
    let mv = IngestExternalFileOptions { move_files: true, ..IngestExternalFileOptions::default() };
    sweep(&[(1000, 1040), (150, 160)], &mv);
}

#[test]
fn a_linked_file_its_writer_never_synced_is_durable_once_the_ingestion_returns() {
    let fs = MemFs::new();
    let (db, files) = setup(&fs, &[(1000, 1040)]);
    // The same table written again by a writer that never syncs it (a raft member writes a proposal's table
    // this way and leaves the sync to the ingestion).
    let bytes = fs.read_all(&files[0]).unwrap();
    let unsynced = PathBuf::from("/ext/unsynced.sst");
    let mut f = fs.create(&unsynced).unwrap();
    f.append(&bytes).unwrap();
    f.flush().unwrap();
    drop(f);
    let mv = IngestExternalFileOptions { move_files: true, ..IngestExternalFileOptions::default() };
    db.ingest_external_file(&[&unsynced], &mv).unwrap();
    let after = read_all(&db).unwrap();
    drop(db);
    for (n, mode) in [PowerLoss::DropUnsynced, PowerLoss::GarbleUnsynced].into_iter().enumerate() {
        let c = fs.deep_clone();
        c.power_loss(mode, n as u64);
        let db = open_on(&c, &mem_options(&c)).unwrap_or_else(|e| panic!("{mode:?}: open: {e}"));
        assert_eq!(read_all(&db).unwrap(), after, "{mode:?}");
    }
}
