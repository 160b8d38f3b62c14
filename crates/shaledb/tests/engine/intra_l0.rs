//! Intra-L0 compaction (`picker/intra_l0.rs`): while L0's compaction into the base level runs, L0's newest
//! files merge into one L0 file. Reads return every key's newest version while both jobs run, after they end
//! and after a reopen; a file ingested above a memtable's data stays out of the merge until that memtable is
//! flushed.

use shaledb::ingest::{IngestExternalFileOptions, SstFileWriter};
use shaledb::listener::{CompactionJobInfo, EventListener};
use shaledb::{Db, Options};
use std::collections::BTreeMap;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

/// Holds L0-to-base compactions at their start until opened; records every finished compaction as
/// (input level, output level, input file numbers).
#[derive(Default)]
struct Gate {
    state: Mutex<GateState>,
    cv: Condvar,
}

#[derive(Default)]
struct GateState {
    open: bool,
    held: usize,
    done: Vec<(usize, usize, Vec<u64>)>,
}

impl EventListener for Gate {
    fn on_compaction_begin(&self, info: &CompactionJobInfo) {
        if info.base_input_level != 0 || info.output_level == 0 {
            return;
        }
        let mut st = self.state.lock().unwrap();
        st.held += 1;
        self.cv.notify_all();
        while !st.open {
            st = self.cv.wait(st).unwrap();
        }
    }

    fn on_compaction_completed(&self, info: &CompactionJobInfo) {
        assert!(info.error.is_none(), "compaction failed: {:?}", info.error);
        let inputs = info.input_files.iter().map(|f| f.file_number).collect();
        self.state.lock().unwrap().done.push((info.base_input_level, info.output_level, inputs));
        self.cv.notify_all();
    }
}

impl Gate {
    /// Waits (10 s at most) until `cond` holds.
    fn wait_until(&self, what: &str, cond: impl Fn(&GateState) -> bool) {
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut st = self.state.lock().unwrap();
        while !cond(&st) {
            let left = deadline.saturating_duration_since(Instant::now());
            assert!(!left.is_zero(), "timed out waiting for {what}");
            st = self.cv.wait_timeout(st, left).unwrap().0;
        }
    }

    fn intra_l0_jobs(&self) -> Vec<Vec<u64>> {
        let st = self.state.lock().unwrap();
        st.done.iter().filter(|(from, to, _)| *from == 0 && *to == 0).map(|(_, _, inputs)| inputs.clone()).collect()
    }

    fn open(&self) {
        self.state.lock().unwrap().open = true;
        self.cv.notify_all();
    }
}

/// Opens the gate when dropped, so a failing test does not leave a background thread waiting.
struct Opener(Arc<Gate>);

impl Drop for Opener {
    fn drop(&mut self) {
        self.0.open();
    }
}

fn options(gate: &Arc<Gate>) -> Options {
    Options {
        write_buffer_size: 1 << 20,
        level0_file_num_compaction_trigger: 2,
        level0_slowdown_writes_trigger: 100,
        level0_stop_writes_trigger: 200,
        max_background_jobs: 4,
        listeners: vec![gate.clone() as Arc<dyn EventListener>],
        ..crate::tiny_options()
    }
}

fn key(i: u32) -> Vec<u8> {
    format!("key{i:03}").into_bytes()
}

/// `len` bytes that compress poorly, from `seed` and `i`.
fn value(seed: u32, i: u32, len: usize) -> Vec<u8> {
    let mut x = (u64::from(seed) << 32 | u64::from(i)).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            b'a' + (x % 26) as u8
        })
        .collect()
}

/// One L0 file's worth: every key of `0..100` put, updated or deleted, depending on `round`.
fn write_round(db: &Db, model: &mut Model, round: u32) {
    for i in 0..100u32 {
        match (i + round) % 5 {
            0 => {
                db.delete(key(i)).unwrap();
                model.remove(&key(i));
            }
            1 if round % 2 == 1 => {} // left as the older files have it
            _ => {
                let v = value(round, i, 40);
                db.put(key(i), &v).unwrap();
                model.insert(key(i), v);
            }
        }
    }
    db.flush().unwrap();
}

fn check(db: &Db, model: &Model, when: &str) {
    for i in 0..100u32 {
        assert_eq!(db.get(key(i)).unwrap().as_ref(), model.get(&key(i)), "{when}: key {i}");
    }
    let all: Model = db.iter().map(|r| r.unwrap()).collect();
    assert_eq!(&all, model, "{when}: scan");
}

fn l0_files(db: &Db) -> usize {
    db.property("rocksdb.num-files-at-level0").unwrap().parse().unwrap()
}

#[test]
fn newest_l0_files_merge_while_l0_compaction_runs_and_an_ingested_file_waits_for_the_memtable() {
    let tmp = shaledb_testkit::tempdir();
    let gate = Arc::new(Gate::default());
    let path = tmp.path().join("db");
    let db = Db::open(&path, options(&gate)).unwrap();
    // Declared after `db`, so dropped before it: a failed assertion opens the gate before the close waits.
    let _opener = Opener(gate.clone());
    let mut model = Model::new();

    // Two files start L0's compaction into the base level, which the gate holds.
    write_round(&db, &mut model, 0);
    write_round(&db, &mut model, 1);
    gate.wait_until("the L0 compaction to start", |st| st.held == 1);
    // Three more: five in L0, three free, under the four an intra-L0 merge needs.
    for round in 2..5 {
        write_round(&db, &mut model, round);
    }
    check(&db, &model, "five L0 files");

    // Newer versions of key000-key059 in the memtable, then a file ingested above them (key060-key099, which
    // the memtable does not hold, so no flush first): the file takes a sequence number above the memtable's
    // entries. (Sizes near the older files', so that the span rule takes all five once merging is allowed.)
    for i in 0..60u32 {
        let v = value(100, i, 50);
        db.put(key(i), &v).unwrap();
        model.insert(key(i), v);
    }
    let sst = tmp.path().join("ingest.sst");
    let mut w = SstFileWriter::create(&options(&gate));
    w.open(&sst).unwrap();
    for i in 60..100u32 {
        let v = value(200, i, 80);
        w.put(key(i), &v).unwrap();
        model.insert(key(i), v);
    }
    w.finish().unwrap();
    db.ingest_external_file(&[&sst], &IngestExternalFileOptions::default()).unwrap();
    assert_eq!(l0_files(&db), 6, "the ingested file overlaps L0, so it goes there");
    // Four free files now, but the ingested one is newer than the memtable: merged with the three below it,
    // it would carry their versions of key000-key059 above the memtable's once that is flushed. Nothing may
    // merge yet.
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(gate.intra_l0_jobs(), Vec::<Vec<u64>>::new(), "merged while a memtable was older than a file");
    check(&db, &model, "ingested above the memtable");

    // Flushed: five free files (the memtable's, the ingested one, three more) become one.
    db.flush().unwrap();
    gate.wait_until("an intra-L0 compaction", |st| st.done.iter().any(|(from, to, _)| *from == 0 && *to == 0));
    check(&db, &model, "after the intra-L0 merge");
    let jobs = gate.intra_l0_jobs();
    assert_eq!(jobs.len(), 1);
    assert_eq!(jobs[0].len(), 5, "inputs: {:?}", jobs[0]);
    assert_eq!(l0_files(&db), 3, "two held by the L0 compaction, one merged");

    // More writes on top, then let everything finish.
    write_round(&db, &mut model, 5);
    check(&db, &model, "a flush on top of the merged file");
    gate.open();
    db.wait_for_compaction().unwrap();
    check(&db, &model, "all compactions done");
    db.close().unwrap();

    let db = Db::open(&path, options(&gate)).unwrap();
    check(&db, &model, "reopened");
    db.close().unwrap();
}
