//! WAL damage under each recovery mode (D5): truncations and bit flips at every offset of the last records,
//! appended zeros and garbage, damage in the middle of a multi-block WAL, damage in an older WAL while a
//! newer one exists. The expected outcome of each case is [`expected`], the table of docs/durability.md.
//!
//! Fixture: write `i` is a batch putting `wkey(2i)` and `wkey(2i+1)` to value `i`, so the recovered records
//! can be read back from the keys, and a batch split in two shows as exactly one of its keys.

use crate::torn_tails::{record_bounds, wal_paths};
use crate::{open_on, watch_background_panics};
use shaledb::{Options, WalRecoveryMode, WriteBatch};
use shaledb_format::batch::BatchRep;
use shaledb_format::log::{Writer, BLOCK_SIZE};
use shaledb_testkit::workload::tiny_options;
use shaledb_testkit::MemFs;
use shaledb_vfs::Fs;
use std::path::PathBuf;
use std::sync::Arc;

const MODES: [WalRecoveryMode; 4] = [
    WalRecoveryMode::PointInTime,
    WalRecoveryMode::TolerateCorruptedTailRecords,
    WalRecoveryMode::AbsoluteConsistency,
    WalRecoveryMode::SkipAnyCorruptedRecords,
];

fn wkey(i: usize) -> Vec<u8> {
    format!("w{i:06}").into_bytes()
}

fn wvalue(i: usize, len: usize) -> Vec<u8> {
    let mut v = format!("{i:06}:").into_bytes();
    v.resize(len.max(v.len()), b'a' + (i % 26) as u8);
    v
}

fn opts(mode: WalRecoveryMode) -> Options {
    Options { write_buffer_size: 4 << 20, wal_recovery_mode: mode, ..tiny_options(Arc::new(MemFs::new())) }
}

/// A database killed with `n` records of `value_len`-byte values in its one WAL.
struct Fixture {
    fs: MemFs,
    wal: PathBuf,
    data: Vec<u8>,
    bounds: Vec<(u64, u64)>,
    value_len: usize,
}

impl Fixture {
    fn new(n: usize, value_len: usize) -> Fixture {
        let fs = MemFs::new();
        let db = open_on(&fs, &opts(WalRecoveryMode::PointInTime)).unwrap();
        for i in 0..n {
            let mut b = WriteBatch::new();
            b.put(wkey(2 * i), wvalue(i, value_len)).put(wkey(2 * i + 1), wvalue(i, value_len));
            db.write(&b).unwrap();
        }
        let fs2 = fs.deep_clone();
        drop(db);
        let wals = wal_paths(&fs2);
        let [wal] = wals.as_slice() else { panic!("expected one WAL, found {wals:?}") };
        let data = fs2.read_file(wal).unwrap();
        let bounds = record_bounds(&data, wal);
        assert_eq!(bounds.len(), n);
        Fixture { wal: wal.clone(), fs: fs2, data, bounds, value_len }
    }

    /// Index of the record holding byte `at`.
    fn record_at(&self, at: usize) -> usize {
        self.bounds.iter().position(|(s, e)| (*s as usize..*e as usize).contains(&at)).expect("offset inside a record")
    }

    /// Opens a copy whose WAL holds `data` under `mode`.
    fn recover(&self, data: &[u8], mode: WalRecoveryMode, extra: &[(PathBuf, Vec<u8>)]) -> Outcome {
        let fs = self.fs.deep_clone();
        fs.write_file(&self.wal, data);
        for (p, d) in extra {
            fs.write_file(p, d);
        }
        outcome(&fs, mode, self.value_len)
    }
}

/// What an open recovered: the records (by index), or a corruption error.
#[derive(Debug, PartialEq, Eq)]
enum Outcome {
    Records(Vec<usize>),
    Corruption,
}

fn outcome(fs: &MemFs, mode: WalRecoveryMode, value_len: usize) -> Outcome {
    let db = match open_on(fs, &opts(mode)) {
        Ok(db) => db,
        Err(e) if e.is_corruption() => return Outcome::Corruption,
        Err(e) => panic!("{mode:?}: open failed with a non-corruption error: {e}"),
    };
    let mut records = Vec::new();
    let mut pending: Option<usize> = None;
    for item in db.iter() {
        let (k, v) = item.unwrap_or_else(|e| panic!("{mode:?}: scan failed: {e}"));
        let text = String::from_utf8(k).expect("fixture keys are text");
        let n: usize = text.trim_start_matches('w').parse().expect("fixture key");
        let i = n / 2;
        assert_eq!(v, wvalue(i, value_len), "{mode:?}: wrong value for {text}");
        if n.is_multiple_of(2) {
            assert!(pending.is_none(), "{mode:?}: batch {pending:?} recovered in part");
            pending = Some(i);
        } else {
            assert_eq!(pending.take(), Some(i), "{mode:?}: batch {i} recovered in part");
            records.push(i);
        }
    }
    assert!(pending.is_none(), "{mode:?}: batch {pending:?} recovered in part");
    Outcome::Records(records)
}

/// Where the damage is, for [`expected`].
#[derive(Clone, Copy, Debug)]
enum Damage {
    /// The last WAL cut inside record `d` (a torn append).
    CutInside { d: usize },
    /// Record `d` of the last WAL has a bad checksum, length or type; `last`: no intact record follows it.
    Bad { d: usize, last: bool },
    /// Zeros or garbage after the last complete record.
    TailJunk,
}

/// The contract of docs/durability.md: what each mode recovers from each damage to the newest WAL, given
/// `n` records and `later`, the records that start in a block after the damaged one (what SkipAny keeps).
fn expected(mode: WalRecoveryMode, damage: Damage, n: usize, later: &[usize]) -> Outcome {
    use WalRecoveryMode::*;
    let upto = |d: usize| Outcome::Records((0..d).collect());
    match (damage, mode) {
        (_, AbsoluteConsistency) => Outcome::Corruption,
        (Damage::TailJunk, _) => upto(n),
        (Damage::CutInside { d }, _) => upto(d),
        // Damage with intact records after it is a hole, not a torn tail: PointInTime refuses it rather than
        // drop the acknowledged writes that follow (D5, D10).
        (Damage::Bad { d, last: true }, PointInTime | TolerateCorruptedTailRecords) => upto(d),
        (Damage::Bad { last: false, .. }, PointInTime | TolerateCorruptedTailRecords) => Outcome::Corruption,
        (Damage::Bad { d, .. }, SkipAnyCorruptedRecords) => {
            Outcome::Records((0..d).chain(later.iter().copied()).collect())
        }
    }
}

fn check(f: &Fixture, data: &[u8], damage: Damage, later: &[usize], what: &str) {
    for mode in MODES {
        let want = expected(mode, damage, f.bounds.len(), later);
        let got = f.recover(data, mode, &[]);
        assert_eq!(got, want, "{what}, {mode:?} ({damage:?})");
    }
}

#[test]
fn clean_wal_recovers_everything_in_every_mode() {
    let f = Fixture::new(10, 30);
    for mode in MODES {
        assert_eq!(f.recover(&f.data, mode, &[]), Outcome::Records((0..10).collect()), "{mode:?}");
    }
}

#[test]
fn wal_cut_at_every_offset_of_the_last_records_per_mode() {
    watch_background_panics();
    let f = Fixture::new(12, 30);
    let from = f.bounds[f.bounds.len() - 3].0 as usize;
    for cut in from..f.data.len() {
        let damage = match f.bounds.iter().position(|(s, _)| *s as usize == cut) {
            // A cut between records loses nothing that was complete: a clean, shorter log.
            Some(d) => {
                for mode in MODES {
                    assert_eq!(f.recover(&f.data[..cut], mode, &[]), Outcome::Records((0..d).collect()), "{mode:?}");
                }
                continue;
            }
            None => Damage::CutInside { d: f.record_at(cut) },
        };
        check(&f, &f.data[..cut], damage, &[], &format!("cut at {cut}"));
    }
}

#[test]
fn wal_bit_flip_at_every_offset_of_the_last_records_per_mode() {
    watch_background_panics();
    let f = Fixture::new(12, 30);
    let n = f.bounds.len();
    let from = f.bounds[n - 3].0 as usize;
    for at in from..f.data.len() {
        let mut data = f.data.clone();
        data[at] ^= 1 << (at % 8);
        let d = f.record_at(at);
        check(&f, &data, Damage::Bad { d, last: d == n - 1 }, &[], &format!("flip at {at}"));
    }
}

#[test]
fn zeros_or_garbage_after_the_last_record_per_mode() {
    watch_background_panics();
    let f = Fixture::new(8, 30);
    let mut junk: Vec<Vec<u8>> = [1, 6, 7, 100, 5000].iter().map(|n| vec![0u8; *n]).collect();
    let mut x = 0x2545_F491_4F6C_DD1Du64;
    for n in [1usize, 7, 33, 4096] {
        junk.push(
            (0..n)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    x as u8
                })
                .collect(),
        );
    }
    for j in junk {
        let mut data = f.data.clone();
        data.extend_from_slice(&j);
        let kind = if j.iter().all(|b| *b == 0) { "zeros" } else { "garbage" };
        check(&f, &data, Damage::TailJunk, &[], &format!("{} bytes of {kind}", j.len()));
    }
}

#[test]
fn damage_in_the_first_block_of_a_multi_block_wal_per_mode() {
    watch_background_panics();
    // 700-byte values: about 45 records per 32 KiB block, some fragmented across the block boundary.
    let f = Fixture::new(120, 700);
    assert!(f.data.len() > 2 * BLOCK_SIZE);
    let later: Vec<usize> =
        f.bounds.iter().enumerate().filter(|(_, (s, _))| *s as usize >= BLOCK_SIZE).map(|(i, _)| i).collect();
    for d in [0, 7, 20] {
        let start = f.bounds[d].0 as usize;
        // Checksum, length, type and payload bytes of record d.
        for at in [start, start + 4, start + 6, start + 50] {
            let mut data = f.data.clone();
            data[at] ^= 0x10;
            check(&f, &data, Damage::Bad { d, last: false }, &later, &format!("flip at {at} in record {d}"));
        }
    }
}

#[test]
fn damage_in_an_older_wal_while_a_newer_one_exists_per_mode() {
    watch_background_panics();
    let f = Fixture::new(10, 30);
    let n = f.bounds.len();
    // A newer WAL, as a memtable switch of a synced WAL leaves it: the next records with the next sequence numbers.
    let (newer_path, newer) = newer_wal(&f, None);
    let extra = [(newer_path, newer)];
    let all_newer: Vec<usize> = (n..n + 5).collect();
    assert_eq!(
        f.recover(&f.data, WalRecoveryMode::PointInTime, &extra),
        Outcome::Records((0..n + 5).collect()),
        "both WALs replay when intact"
    );
    // Record 4 of the older WAL damaged (intact records follow), or the older WAL torn in its last record.
    let mut flipped = f.data.clone();
    flipped[f.bounds[4].0 as usize + 9] ^= 0x01;
    let torn = &f.data[..f.bounds[n - 1].1 as usize - 3];
    for (data, d, what) in [(&flipped[..], 4, "flip in record 4"), (torn, n - 1, "older WAL torn")] {
        for mode in MODES {
            let want = match mode {
                // Replaying up to the damage would drop the newer WAL's acknowledged writes, and replaying it
                // would leave a hole (D3): refused (D5, D10).
                WalRecoveryMode::PointInTime => Outcome::Corruption,
                // The older WAL is one block: nothing of it after the damage survives the resync.
                WalRecoveryMode::SkipAnyCorruptedRecords => {
                    Outcome::Records((0..d).chain(all_newer.iter().copied()).collect())
                }
                // Damage in a WAL that is not the newest is never a torn tail.
                WalRecoveryMode::TolerateCorruptedTailRecords | WalRecoveryMode::AbsoluteConsistency => {
                    Outcome::Corruption
                }
            };
            assert_eq!(f.recover(data, mode, &extra), want, "{what}, {mode:?}");
        }
    }
}

/// A newer WAL as a memtable switch leaves it, holding records n..n+5 of `f`'s `n`. `unsynced`: `None` when the
/// older WAL was synced at the switch (no marker, as every WAL before markers); `Some(synced)` when it held
/// unsynced bytes: a `Predecessor` marker naming it and its length first, and with `synced` a `Synced` marker
/// covering it after the first record (a synced write, `sync_wal` or a flush synced it meanwhile).
fn newer_wal(f: &Fixture, unsynced: Option<bool>) -> (PathBuf, Vec<u8>) {
    use shaledb_format::wal::WalMarker;
    let n = f.bounds.len();
    let number: u64 = f.wal.file_stem().and_then(|s| s.to_str()).and_then(|s| s.parse().ok()).unwrap();
    let newer_path = f.wal.with_file_name(format!("{:06}.log", number + 1));
    let scratch = MemFs::new();
    scratch.create_dir_all(crate::db_path()).unwrap();
    let mut w = Writer::new(scratch.create(&newer_path).unwrap());
    if unsynced.is_some() {
        w.add_record(&WalMarker::Predecessor { number, length: f.data.len() as u64 }.encode()).unwrap();
    }
    for i in n..n + 5 {
        let mut b = BatchRep::new();
        b.put(&wkey(2 * i), &wvalue(i, f.value_len));
        b.put(&wkey(2 * i + 1), &wvalue(i, f.value_len));
        b.set_sequence(2 * i as u64 + 1);
        w.add_record(b.data()).unwrap();
        if unsynced == Some(true) && i == n {
            w.add_record(&WalMarker::Synced { through: number }.encode()).unwrap();
        }
    }
    w.flush().unwrap();
    (newer_path.clone(), scratch.read_file(&newer_path).unwrap())
}

#[test]
fn an_older_wal_switched_out_unsynced_per_mode() {
    watch_background_panics();
    let f = Fixture::new(10, 30);
    let n = f.bounds.len();
    let all_newer: Vec<usize> = (n..n + 5).collect();
    let upto = |d: usize| Outcome::Records((0..d).collect());
    let with_newer = |d: usize| Outcome::Records((0..d).chain(all_newer.iter().copied()).collect());
    for synced in [false, true] {
        let extra = [newer_wal(&f, Some(synced))];
        for mode in MODES {
            assert_eq!(f.recover(&f.data, mode, &extra), with_newer(n), "both WALs intact, synced {synced}, {mode:?}");
        }
        // What a power loss leaves of the older WAL's unsynced tail: its last record torn, or the file cut at a
        // record boundary (the marker's length tells), or a hole (record 4 flipped, intact records after it).
        let torn = &f.data[..f.bounds[n - 1].1 as usize - 3];
        let cut = &f.data[..f.bounds[n - 3].1 as usize];
        let mut flipped = f.data.clone();
        flipped[f.bounds[4].0 as usize + 9] ^= 0x01;
        for (data, d, what) in
            [(torn, n - 1, "torn"), (cut, n - 2, "cut at a record boundary"), (&flipped[..], 4, "hole")]
        {
            for mode in MODES {
                use WalRecoveryMode::*;
                let hole = what == "hole";
                let want = match mode {
                    AbsoluteConsistency => Outcome::Corruption,
                    // The older WAL was synced in full (the marker says so): its damage lost acknowledged writes.
                    PointInTime | TolerateCorruptedTailRecords if synced || hole => Outcome::Corruption,
                    // An unsynced tail cut by a power loss: the records before it are a prefix of the writes;
                    // the newer WAL's must not be replayed after a gap (D3).
                    PointInTime | TolerateCorruptedTailRecords => upto(d),
                    SkipAnyCorruptedRecords => with_newer(d),
                };
                assert_eq!(f.recover(data, mode, &extra), want, "older WAL {what}, synced marker {synced}, {mode:?}");
            }
        }
    }
}
