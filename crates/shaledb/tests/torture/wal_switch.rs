//! A memtable switch no longer fsyncs the old WAL (D5, "Older WALs"): the old WAL is synced later by what needs
//! it durable, and the new one starts with a `Predecessor` marker. These tests hold a flush in its listener
//! callback, so the old WAL stays live and unsynced, and check: the markers the engine writes; that a power
//! loss cutting the old WAL recovers a prefix (the newer WAL kept in `lost/`, never replayed after the gap);
//! that a synced write syncs the old WAL first (and says so with a `Synced` marker), after which damage to the
//! old WAL is refused, not taken for a torn tail.

use crate::torn_tails::wal_paths;
use crate::{db_path, open_on, watch_background_panics};
use shaledb::listener::{EventListener, FlushJobInfo};
use shaledb::{Options, WalRecoveryMode, WriteOptions};
use shaledb_format::log::Reader;
use shaledb_format::wal::{self, BatchRead, WalMarker};
use shaledb_testkit::MemFs;
use shaledb_vfs::{Fs, PowerLoss};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(Default)]
struct Gate {
    hold: parking_lot::Mutex<bool>,
    cv: parking_lot::Condvar,
    begun: AtomicU64,
}

impl EventListener for Gate {
    fn on_flush_begin(&self, _: &FlushJobInfo) {
        self.begun.fetch_add(1, Ordering::SeqCst);
        let mut hold = self.hold.lock();
        while *hold {
            self.cv.wait(&mut hold);
        }
    }
}

fn key(i: usize) -> Vec<u8> {
    format!("k{i:04}").into_bytes()
}

fn markers(fs: &MemFs, path: &Path) -> Vec<(u64, WalMarker)> {
    let mut r = Reader::new(fs.read_file(path).unwrap(), path.to_path_buf());
    let mut out = Vec::new();
    loop {
        match wal::next_batch(&mut r) {
            BatchRead::Eof => return out,
            BatchRead::Marker { offset, marker } => out.push((offset, marker)),
            BatchRead::Batch { .. } => {}
            other => panic!("{}: {other:?}", path.display()),
        }
    }
}

fn wal_number(p: &Path) -> u64 {
    p.file_stem().and_then(|s| s.to_str()).and_then(|s| s.parse().ok()).expect("a WAL name")
}

/// The keys of `0..n` a database recovered from `fs` holds, or the open's error.
fn recovered(fs: &MemFs, n: usize) -> shaledb::Result<Vec<usize>> {
    let opts = Options { wal_recovery_mode: WalRecoveryMode::PointInTime, ..Options::default() };
    let db = open_on(fs, &opts)?;
    Ok((0..n).filter(|i| db.get(key(*i)).unwrap().is_some()).collect())
}

#[test]
fn a_wal_switched_out_unsynced_recovers_as_a_prefix_until_a_synced_write_syncs_it() {
    watch_background_panics();
    let fs = MemFs::new();
    let gate = Arc::new(Gate::default());
    *gate.hold.lock() = true;
    let opts = Options { listeners: vec![gate.clone()], ..Options::default() };
    let db = Arc::new(open_on(&fs, &opts).unwrap());
    let (unsynced, synced) = (WriteOptions::default(), WriteOptions { sync: true, ..WriteOptions::default() });
    // The old WAL: writes 0..=50 synced by write 50, then 51..100 unsynced.
    for i in 0..100 {
        db.put_opt(&if i == 50 { synced } else { unsynced }, key(i), b"v").unwrap();
    }
    // The switch: a flush, held in its callback, so the old WAL stays live.
    let flusher = {
        let db = db.clone();
        std::thread::spawn(move || db.flush())
    };
    let start = Instant::now();
    while gate.begun.load(Ordering::SeqCst) == 0 {
        assert!(start.elapsed() < Duration::from_secs(20), "the flush never began");
        std::thread::sleep(Duration::from_millis(1));
    }
    let wals = wal_paths(&fs);
    let [old, new] = wals.as_slice() else { panic!("two WALs expected: {wals:?}") };
    let old_len = fs.read_file(old).unwrap().len() as u64;
    assert_eq!(
        markers(&fs, new),
        vec![(0, WalMarker::Predecessor { number: wal_number(old), length: old_len })],
        "the new WAL begins by naming the old one, which the switch left unsynced"
    );
    // Writes 100..150 go to the new WAL, unsynced.
    for i in 100..150 {
        db.put_opt(&unsynced, key(i), b"v").unwrap();
    }

    // A power loss now: the old WAL is cut back to write 50, and the new one is gone: the switch does not
    // fsync the directory (the first WAL sync after it does), so the new WAL's name was never durable.
    let lost = fs.deep_clone();
    lost.power_loss(PowerLoss::DropUnsynced, 1);
    assert!(!lost.exists(new), "the switch made the new WAL's name durable");
    let synced_len = lost.read_file(old).unwrap().len();
    assert!((synced_len as u64) < old_len, "the switch did not sync the old WAL");
    assert_eq!(recovered(&lost, 150).unwrap(), (0..=50).collect::<Vec<_>>());

    // The write-back reached the new WAL but not the old one's tail: replaying the new WAL after the gap would
    // be a hole (D3), so recovery stops at the gap and keeps the new WAL in lost/.
    let reordered = fs.deep_clone();
    reordered.kill_process();
    let full = reordered.read_file(old).unwrap();
    reordered.write_file(old, &full[..synced_len]);
    assert_eq!(recovered(&reordered, 150).unwrap(), (0..=50).collect::<Vec<_>>());
    let new_name = new.file_name().unwrap().to_string_lossy().into_owned();
    let lost_dir = db_path().join("lost");
    assert!(reordered.file_names(&lost_dir).contains(&new_name), "{:?}", reordered.file_names(&lost_dir));

    // A synced write syncs the old WAL first and records that in the new one; it fsyncs the directory before
    // the new WAL, whose name would otherwise take the synced write with it.
    db.put_opt(&synced, key(150), b"v").unwrap();
    let ms = markers(&fs, new);
    assert_eq!(ms.len(), 2, "{ms:?}");
    assert_eq!(ms[1].1, WalMarker::Synced { through: wal_number(old) });
    let lost = fs.deep_clone();
    lost.power_loss(PowerLoss::DropUnsynced, 2);
    assert_eq!(recovered(&lost, 151).unwrap(), (0..=150).collect::<Vec<_>>());
    // Damage to the old WAL's last record is no torn tail any more: it was synced, and the marker says so.
    let flipped = fs.deep_clone();
    flipped.kill_process();
    let mut data = flipped.read_file(old).unwrap();
    let at = data.len() - 3;
    data[at] ^= 0x10;
    flipped.write_file(old, &data);
    let e = recovered(&flipped, 151).unwrap_err();
    assert!(e.is_corruption() && e.to_string().contains("synced in full"), "{e}");

    *gate.hold.lock() = false;
    gate.cv.notify_all();
    flusher.join().unwrap().unwrap();
    // Once its memtable is flushed, the old WAL is obsolete: gone, never synced for nothing.
    assert!(!fs.exists(old), "the old WAL outlived its flush");
}

/// The switch leaves the new WAL's name to the first WAL sync after it: a synced write into a WAL created by a
/// switch survives a power loss, and an unsynced one may go with the file. The old WAL here was synced whole
/// before the switch, so no older WAL is left to sync (whose path would sync the directory too), and the flush
/// is held before it writes its table (whose creation syncs the directory as well).
#[test]
fn the_first_synced_write_into_a_new_wal_makes_its_name_durable() {
    watch_background_panics();
    let fs = MemFs::new();
    let gate = Arc::new(Gate::default());
    *gate.hold.lock() = true;
    let opts = Options { listeners: vec![gate.clone()], ..Options::default() };
    let db = Arc::new(open_on(&fs, &opts).unwrap());
    let synced = WriteOptions { sync: true, ..WriteOptions::default() };
    db.put_opt(&synced, key(0), b"v").unwrap();
    let flusher = {
        let db = db.clone();
        std::thread::spawn(move || db.flush())
    };
    let start = Instant::now();
    while gate.begun.load(Ordering::SeqCst) == 0 {
        assert!(start.elapsed() < Duration::from_secs(20), "the flush never began");
        std::thread::sleep(Duration::from_millis(1));
    }
    let wals = wal_paths(&fs);
    let [_, new] = wals.as_slice() else { panic!("two WALs expected: {wals:?}") };
    assert!(markers(&fs, new).is_empty(), "the old WAL was synced: no Predecessor marker");
    db.put(key(1), b"v").unwrap();
    let lost = fs.deep_clone();
    lost.power_loss(PowerLoss::DropUnsynced, 3);
    assert!(!lost.exists(new), "nothing synced the new WAL's name yet");
    assert_eq!(recovered(&lost, 3).unwrap(), vec![0]);

    db.put_opt(&synced, key(2), b"v").unwrap();
    let lost = fs.deep_clone();
    lost.power_loss(PowerLoss::DropUnsynced, 4);
    assert!(lost.exists(new), "the synced write made the new WAL's name durable");
    assert_eq!(recovered(&lost, 3).unwrap(), vec![0, 1, 2]);

    *gate.hold.lock() = false;
    gate.cv.notify_all();
    flusher.join().unwrap().unwrap();
}
