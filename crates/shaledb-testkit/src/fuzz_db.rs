//! Whole-database fuzz driver: a small database on [`MemFs`] (three flushed tables, a MANIFEST of several
//! edits, a WAL holding writes not yet flushed, CURRENT), one of its files damaged as the fuzzer's bytes say,
//! then [`Db::open`] on it and every read the engine offers.
//!
//! Input layout (every byte optional; a short input is padded with zeros):
//!
//! ```text
//! input   := file:u8 op:u8 offset:fixed32 payload:byte*
//! file    := index into the sorted names of the database directory (LOCK excluded), modulo their count
//! op      := low 2 bits: 0 overwrite at offset | 1 truncate to offset | 2 insert at offset | 3 xor at offset
//!            bits 2..3: the WAL recovery mode the open uses
//! offset  := modulo (file length + 1)
//! ```
//!
//! Properties: nothing panics; open either fails or succeeds, and after a successful open every `get` and
//! both full scans return an error or, for each key, `None` or a value once written for that key (never a
//! value that was not), and the scans see keys in strict order. A hang is caught by libFuzzer's timeout and
//! an allocation sized by a decoded length by its `-rss_limit_mb`/`-malloc_limit_mb`.

use shaledb::{Db, Options, WalRecoveryMode, WriteOptions};
use shaledb_vfs::MemFs;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::{Arc, OnceLock};

/// Where the database lives on its [`MemFs`].
const DIR: &str = "/db";
/// Keys written: `key000` to `key039`.
const KEYS: usize = 40;
/// Keys written with single deletions, put and single-deleted in alternate rounds (their contract kept):
/// `sdk00` to `sdk07`.
const SD_KEYS: usize = 8;
/// At most this many payload bytes are used.
const MAX_PAYLOAD: usize = 4096;

/// The undamaged database and, per key, every value ever written for it.
struct Base {
    fs: MemFs,
    written: BTreeMap<Vec<u8>, BTreeSet<Vec<u8>>>,
}

fn options(fs: &MemFs, mode: WalRecoveryMode) -> Options {
    Options {
        fs: Arc::new(fs.clone()),
        // Small and quiet: no background compaction, so the files on disk are exactly what the build made.
        write_buffer_size: 64 << 10,
        disable_auto_compactions: true,
        max_background_jobs: 1,
        block_cache_size: 1 << 20,
        block_size: 256,
        wal_recovery_mode: mode,
        ..Options::default()
    }
}

fn key(i: usize) -> Vec<u8> {
    format!("key{i:03}").into_bytes()
}

fn sd_key(i: usize) -> Vec<u8> {
    format!("sdk{i:02}").into_bytes()
}

/// Builds the database: three rounds of puts, deletes, single deletes and a range deletion, each flushed (three tables, a
/// MANIFEST edit each), then a fourth round synced to the WAL only, and the image taken as a process kill
/// leaves it.
fn build() -> Option<Base> {
    let fs = MemFs::new();
    let db = Db::open(DIR, options(&fs, WalRecoveryMode::PointInTime)).ok()?;
    let mut written: BTreeMap<Vec<u8>, BTreeSet<Vec<u8>>> = BTreeMap::new();
    let sync = WriteOptions { sync: true, ..WriteOptions::default() };
    for round in 0..4usize {
        for i in (round % 2..KEYS).step_by(1 + round % 3) {
            let k = key(i);
            if (i + round) % 7 == 0 {
                db.delete_opt(&sync, &k).ok()?;
            } else {
                let v = format!("{}-round{round}-{}", String::from_utf8_lossy(&k), "x".repeat(i % 9)).into_bytes();
                db.put_opt(&sync, &k, &v).ok()?;
                written.entry(k).or_default().insert(v);
            }
        }
        for i in 0..SD_KEYS {
            // Key i is put in rounds where (i + round) is even and single-deleted in the next: once per cycle.
            let k = sd_key(i);
            if (i + round) % 2 == 0 {
                let v = format!("sd-{i}-round{round}").into_bytes();
                db.put_opt(&sync, &k, &v).ok()?;
                written.entry(k).or_default().insert(v);
            } else if round > 0 {
                db.single_delete_opt(&sync, &k).ok()?;
            }
        }
        // A range deletion per round: tables with range-deletion blocks, MANIFEST records with tag 10, and one
        // in the WAL for the fuzzer to damage.
        db.delete_range_opt(&sync, key(round * 9 + 2), key(round * 9 + 5)).ok()?;
        if round < 3 {
            db.flush().ok()?;
        }
    }
    let image = fs.deep_clone();
    drop(db);
    Some(Base { fs: image, written })
}

fn base() -> Option<&'static Base> {
    static BASE: OnceLock<Option<Base>> = OnceLock::new();
    BASE.get_or_init(build).as_ref()
}

/// Applies the mutation `data` describes to a copy of the base image; returns the copy and the recovery mode.
fn mutate(base: &Base, data: &[u8]) -> (MemFs, WalRecoveryMode) {
    let fs = base.fs.deep_clone();
    let byte = |i: usize| data.get(i).copied().unwrap_or(0);
    let mut names: Vec<String> = fs.file_names(Path::new(DIR)).into_iter().filter(|n| n != "LOCK").collect();
    names.sort();
    let mode = match (byte(1) >> 2) & 3 {
        0 => WalRecoveryMode::PointInTime,
        1 => WalRecoveryMode::TolerateCorruptedTailRecords,
        2 => WalRecoveryMode::AbsoluteConsistency,
        _ => WalRecoveryMode::SkipAnyCorruptedRecords,
    };
    if names.is_empty() {
        return (fs, mode);
    }
    let name = &names[usize::from(byte(0)) % names.len()];
    let path = Path::new(DIR).join(name);
    let mut file = fs.read_file(&path).unwrap_or_default();
    let offset = u32::from_le_bytes([byte(2), byte(3), byte(4), byte(5)]) as usize % (file.len() + 1);
    let payload = data.get(6..).unwrap_or_default();
    let payload = &payload[..payload.len().min(MAX_PAYLOAD)];
    match byte(1) & 3 {
        0 => {
            let end = offset + payload.len();
            if end > file.len() {
                file.resize(end, 0);
            }
            file[offset..end].copy_from_slice(payload);
        }
        1 => file.truncate(offset),
        2 => {
            file.splice(offset..offset, payload.iter().copied());
        }
        _ => {
            for (b, p) in file.iter_mut().skip(offset).zip(payload) {
                *b ^= p;
            }
        }
    }
    fs.write_file(&path, &file);
    (fs, mode)
}

/// Panics unless `value` was written for `key`.
fn check_written(base: &Base, key: &[u8], value: &[u8], how: &str) {
    let known = base.written.get(key).is_some_and(|vs| vs.contains(value));
    assert!(
        known,
        "{how}: {:?} returned {:?}, a value never written for it",
        String::from_utf8_lossy(key),
        String::from_utf8_lossy(value)
    );
}

/// The whole-database driver: see the module documentation.
pub fn database(data: &[u8]) {
    let Some(base) = base() else { panic!("the base database could not be built") };
    let (fs, mode) = mutate(base, data);
    open_and_read(base, &fs, mode);
}

/// Opens the database on `fs` and checks every read against what `base` wrote (see the module docs).
fn open_and_read(base: &Base, fs: &MemFs, mode: WalRecoveryMode) {
    let Ok(db) = Db::open(DIR, options(fs, mode)) else { return };
    for k in (0..KEYS).map(key).chain((0..SD_KEYS).map(sd_key)) {
        if let Ok(Some(v)) = db.get(&k) {
            check_written(base, &k, &v, "get");
        }
    }
    // Scans: at most one step per key written plus one (a scan that runs on is a bug, not damage).
    let limit = KEYS + SD_KEYS + 1;
    let mut it = db.cursor();
    it.seek_to_first();
    let mut last: Option<Vec<u8>> = None;
    let mut steps = 0;
    while it.valid() {
        check_written(base, it.key(), it.value(), "forward scan");
        assert!(last.as_deref().is_none_or(|l| l < it.key()), "forward scan out of order");
        last = Some(it.key().to_vec());
        steps += 1;
        assert!(steps <= limit, "forward scan does not end");
        it.next();
    }
    let _ = it.status();
    it.seek_to_last();
    let mut last: Option<Vec<u8>> = None;
    let mut steps = 0;
    while it.valid() {
        check_written(base, it.key(), it.value(), "backward scan");
        assert!(last.as_deref().is_none_or(|l| l > it.key()), "backward scan out of order");
        last = Some(it.key().to_vec());
        steps += 1;
        assert!(steps <= limit, "backward scan does not end");
        it.prev();
    }
    let _ = it.status();
    drop(it);
    let _ = db.verify_checksums();
    let _ = db.close();
}

/// Seed inputs: for each file of the base image, an untouched open, a truncation to half, a byte overwrite
/// in the middle and a bit flip near the end, under each recovery mode in turn.
pub fn seeds() -> Vec<Vec<u8>> {
    let Some(base) = base() else { return Vec::new() };
    let mut names: Vec<(String, usize)> = base
        .fs
        .file_names(Path::new(DIR))
        .into_iter()
        .filter(|n| n != "LOCK")
        .map(|n| {
            let len = base.fs.read_file(&Path::new(DIR).join(&n)).map_or(0, |d| d.len());
            (n, len)
        })
        .collect();
    names.sort();
    let mut out = vec![Vec::new()];
    for (i, (_, len)) in names.iter().enumerate() {
        let file = i as u8;
        let mode = (i as u8 % 4) << 2;
        let at = |n: usize| (n as u32).to_le_bytes();
        let input = |op: u8, off: [u8; 4], payload: &[u8]| {
            let mut v = vec![file, op | mode];
            v.extend_from_slice(&off);
            v.extend_from_slice(payload);
            v
        };
        out.push(input(1, at(len / 2), b""));
        out.push(input(0, at(len / 2), b"\xff\x00\x7f"));
        out.push(input(3, at(len.saturating_sub(3)), b"\x01"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base_has_every_kind_of_file() {
        let base = base().expect("build");
        let names = base.fs.file_names(Path::new(DIR));
        for want in ["CURRENT", "MANIFEST-", ".log", ".sst"] {
            assert!(names.iter().any(|n| n.contains(want)), "{want} missing from {names:?}");
        }
        assert!(names.iter().filter(|n| n.ends_with(".sst")).count() >= 3, "{names:?}");
    }

    #[test]
    fn untouched_database_reads_every_key() {
        let base = base().expect("build");
        let (fs, mode) = mutate(base, &[0, 3 << 2, 0, 0, 0, 0]); // xor with nothing: unchanged
        let db = Db::open(DIR, options(&fs, mode)).expect("open");
        let found = (0..KEYS).filter(|&i| db.get(key(i)).expect("get").is_some()).count();
        assert!(found > KEYS / 2, "{found} keys");
        // After the last round (3, in the WAL only), single-delete key i is present exactly when it was put
        // in that round, when i + 3 is even.
        for i in 0..SD_KEYS {
            let got = db.get(sd_key(i)).expect("get");
            assert_eq!(got.is_some(), (i + 3) % 2 == 0, "sdk{i:02}: {got:?}");
        }
        database(&[]);
    }

    /// The oracle is not vacuous: a WAL record that passes its checksum but puts a value never written
    /// (what a forged or misdirected write would look like) is caught by the read checks.
    #[test]
    fn a_value_never_written_fails_the_driver() {
        use shaledb_format::batch::BatchRep;
        use shaledb_format::log::Writer;
        use shaledb_vfs::Fs;
        let base = base().expect("build");
        let fs = base.fs.deep_clone();
        let mut b = BatchRep::new();
        b.put(&key(1), b"never written");
        b.set_sequence(1 << 40);
        let mut w = Writer::new(fs.create(&Path::new(DIR).join("999999.log")).expect("create"));
        w.add_record(b.data()).expect("append");
        w.sync().expect("sync");
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            open_and_read(base, &fs, WalRecoveryMode::PointInTime)
        }));
        let msg = caught.expect_err("the driver accepted a value never written");
        let msg = msg.downcast_ref::<String>().cloned().unwrap_or_default();
        assert!(msg.contains("a value never written"), "{msg}");
    }

    #[test]
    fn seeds_and_junk_pass_the_driver() {
        for s in seeds() {
            database(&s);
        }
        database(&[0xff; 64]);
    }
}
