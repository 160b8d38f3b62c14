//! Torn tails (D3, D5, D7): the WAL and the MANIFEST cut at every byte offset of their last records, as a
//! crash in the middle of an append leaves them. PointInTime opens every time and recovers exactly the
//! complete records.

use crate::{db_path, open_on, watch_background_panics};
use shaledb::Options;
use shaledb_format::log::{LogRead, Reader};
use shaledb_testkit::history::string_append;
use shaledb_testkit::workload::{random_write, read_all, submit, tiny_options, WorkloadConfig};
use shaledb_testkit::{rng, seed_from_env, FsOp, History, MemFs, PowerLoss};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// `(start, end)` of every logical record of a log.
pub fn record_bounds(data: &[u8], path: &Path) -> Vec<(u64, u64)> {
    let mut r = Reader::new(data.to_vec(), path.to_path_buf());
    let mut out = Vec::new();
    loop {
        match r.next() {
            LogRead::Record { offset, .. } => out.push((offset, r.end_of_last_record())),
            LogRead::Eof => return out,
            LogRead::Damage(d) => panic!("fixture log {} is damaged: {d}", path.display()),
        }
    }
}

/// The live WALs of the database on `fs`, oldest first.
pub fn wal_paths(fs: &MemFs) -> Vec<PathBuf> {
    fs.file_names(db_path()).into_iter().filter(|n| n.ends_with(".log")).map(|n| db_path().join(n)).collect()
}

/// Options under which nothing is flushed: every write stays in the one WAL.
pub fn no_flush_options() -> Options {
    Options { write_buffer_size: 4 << 20, ..tiny_options(Arc::new(MemFs::new())) }
}

#[test]
fn wal_cut_at_every_offset_of_the_last_records_recovers_exactly_the_complete_ones() {
    watch_background_panics();
    let seed = seed_from_env(0x7042_0001);
    let opts = no_flush_options();
    let fs = MemFs::new();
    let db = open_on(&fs, &opts).unwrap();
    let mut r = rng(seed);
    let cfg = WorkloadConfig { sync_one_in: 0, ..WorkloadConfig::default() };
    let mut history = History::new(string_append());
    for _ in 0..40 {
        let w = random_write(&mut r, &cfg);
        submit(&db, &w).unwrap();
        history.push(w);
    }
    let crashed = fs.deep_clone();
    drop(db);
    let wals = wal_paths(&crashed);
    let [wal] = wals.as_slice() else { panic!("expected one WAL, found {wals:?}") };
    let data = crashed.read_file(wal).unwrap();
    let bounds = record_bounds(&data, wal);
    assert_eq!(bounds.len(), history.len(), "one record per write");
    let from = bounds[bounds.len() - 4].1 as usize;
    for cut in from..=data.len() {
        let fs = crashed.deep_clone();
        fs.write_file(wal, &data[..cut]);
        let db = open_on(&fs, &opts).unwrap_or_else(|e| panic!("cut at {cut}: open failed: {e}"));
        let complete = bounds.iter().filter(|(_, end)| *end as usize <= cut).count();
        let observed = read_all(&db).unwrap_or_else(|e| panic!("cut at {cut}: scan failed: {e}"));
        assert!(observed == history.model_after(complete), "cut at {cut}: not exactly the {complete} complete records");
    }
}

#[test]
fn manifest_cut_at_every_offset_of_an_unsynced_edit_opens_with_every_acked_write() {
    watch_background_panics();
    let seed = seed_from_env(0x7042_0002);
    let opts = Options { disable_auto_compactions: true, ..tiny_options(Arc::new(MemFs::new())) };
    let fs = MemFs::new();
    // Just before a MANIFEST is synced its last edit is in the file but not durable: a crash there tears it.
    fs.record_before(|op, path, _| {
        op == FsOp::Sync && path.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("MANIFEST-"))
    });
    let db = open_on(&fs, &opts).unwrap();
    let mut r = rng(seed);
    let cfg = WorkloadConfig { sync_one_in: 0, ..WorkloadConfig::default() };
    let mut history = History::new(string_append());
    for round in 0..6 {
        for _ in 0..15 {
            let w = random_write(&mut r, &cfg);
            submit(&db, &w).unwrap();
            history.push(w);
        }
        fs.set_tag(history.len() as u64);
        db.flush().unwrap();
        if round == 3 {
            db.compact_range(None, None).unwrap();
        }
    }
    let recorded = fs.stop_recording();
    drop(db);
    assert!(recorded.len() >= 7, "one MANIFEST sync per flush and per compaction, and at open");
    let mut cuts = 0;
    for rec in &recorded {
        let full = rec.fs.read_file(&rec.path).unwrap();
        let durable = {
            let c = rec.fs.deep_clone();
            c.power_loss(PowerLoss::DropUnsynced, 0);
            c.read_file(&rec.path).map_or(0, |d| d.len())
        };
        let expected = history.model_after(rec.tag as usize);
        for cut in durable..=full.len() {
            cuts += 1;
            let fs = rec.fs.deep_clone();
            fs.write_file(&rec.path, &full[..cut]);
            let what = format!("{} cut at {cut} of {} ({} durable)", rec.path.display(), full.len(), durable);
            let db = open_on(&fs, &opts).unwrap_or_else(|e| panic!("{what}: open failed: {e}"));
            let observed = read_all(&db).unwrap_or_else(|e| panic!("{what}: scan failed: {e}"));
            assert!(observed == expected, "{what}: acknowledged writes lost or changed");
        }
    }
    assert!(cuts > 100, "only {cuts} cuts");
}

/// A power loss that writes back the WAL's pages up to a 32 KiB block boundary, or keeps the page after it
/// zeroed, in the middle of a record that spans that boundary: the record's FIRST fragment is intact and the
/// rest is gone. That is a torn tail, never "valid records follow": the intact FIRST fragment belongs to the
/// damaged record itself. (Review of issue 39: PointInTime refused to open, citing the damaged record's own
/// offset as the valid record that follows.)
#[test]
fn wal_torn_at_a_block_boundary_inside_a_record_opens_with_the_complete_records() {
    watch_background_panics();
    let opts = no_flush_options();
    let fs = MemFs::new();
    let db = open_on(&fs, &opts).unwrap();
    let value = "v".repeat(997);
    for i in 0..60 {
        db.put(format!("key{i:03}"), &value).unwrap();
    }
    let crashed = fs.deep_clone();
    drop(db);
    let wals = wal_paths(&crashed);
    let [wal] = wals.as_slice() else { panic!("expected one WAL, found {wals:?}") };
    let data = crashed.read_file(wal).unwrap();
    let bounds = record_bounds(&data, wal);
    const BLOCK: u64 = 32 << 10;
    assert!(bounds.iter().any(|&(start, end)| start < BLOCK && end > BLOCK), "a record spans the first block's end");
    let complete = bounds.iter().filter(|&&(_, end)| end <= BLOCK).count();
    let block = BLOCK as usize;
    let mut zeroed = data[..block + 4096].to_vec();
    zeroed[block..].fill(0);
    for (what, torn) in [("cut at the block boundary", data[..block].to_vec()), ("zeroed page after it", zeroed)] {
        let fs = crashed.deep_clone();
        fs.write_file(wal, &torn);
        let db = open_on(&fs, &opts).unwrap_or_else(|e| panic!("{what}: open failed: {e}"));
        for i in 0..60 {
            let got = db.get(format!("key{i:03}")).unwrap();
            assert_eq!(got.is_some(), i < complete, "{what}: key{i:03} ({complete} complete records)");
        }
    }
}
