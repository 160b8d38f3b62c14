//! Bit flips in stored files (D4): for every byte of a small SST and of a MANIFEST, one bit flipped. A read
//! never returns a wrong value and never panics: each get and each scan either gives exactly what was written
//! or stops with `Corruption`; `verify_checksums` names the SST and an offset at or before the flip.

use crate::{assert_no_background_panics, db_path, open_on, watch_background_panics};
use shaledb::{CompressionType, Db, Error, Options};
use shaledb_format::table::FOOTER_LEN;
use shaledb_testkit::workload::tiny_options;
use shaledb_testkit::{MemFs, Model};
use std::path::{Path, PathBuf};
use std::sync::Arc;

fn options() -> Options {
    Options {
        write_buffer_size: 1 << 20,
        disable_auto_compactions: true,
        block_size: 256,
        compression: CompressionType::Lz4,
        // Every read goes to the file: a cached block would hide the flip from the next reader.
        block_cache_size: 0,
        ..tiny_options(Arc::new(MemFs::new()))
    }
}

fn key(i: usize) -> Vec<u8> {
    format!("key{i:04}").into_bytes()
}

/// Values compressible (every other one) or not, so that both raw and lz4 blocks are stored.
fn value(i: usize) -> Vec<u8> {
    if i.is_multiple_of(2) {
        format!("value-{i}-").repeat(4).into_bytes()
    } else {
        (0..24).map(|j| ((i * 31 + j * 17) % 251) as u8).collect()
    }
}

fn files_with(fs: &MemFs, suffix: &str) -> Vec<PathBuf> {
    fs.file_names(db_path()).into_iter().filter(|n| n.contains(suffix)).map(|n| db_path().join(n)).collect()
}

/// Writes `keys` keys in `flushes` flushes and closes the database.
fn fixture(keys: usize, flushes: usize) -> (MemFs, Model) {
    let fs = MemFs::new();
    let db = open_on(&fs, &options()).unwrap();
    let mut model = Model::new();
    for f in 0..flushes {
        for i in (f..keys).step_by(flushes) {
            db.put(key(i), value(i)).unwrap();
            model.put(&key(i), &value(i));
        }
        db.flush().unwrap();
    }
    db.close().unwrap();
    (fs, model)
}

/// Every get and a forward and a backward scan: each answer is right or a `Corruption`. Returns whether any
/// read reported corruption.
fn reads_are_right_or_corruption(db: &Db, model: &Model, keys: usize, what: &str) -> bool {
    let mut corrupt = false;
    let mut check_err = |e: Error, op: &str| {
        assert!(e.is_corruption(), "{what}: {op} failed with a non-corruption error: {e}");
        corrupt = true;
    };
    for i in 0..keys + 2 {
        match db.get(key(i)) {
            Ok(v) => assert_eq!(v.as_deref(), model.get(&key(i)), "{what}: get({i}) returned a wrong value"),
            Err(e) => check_err(e, "get"),
        }
    }
    let mut want = model.iter();
    for item in db.iter() {
        match item {
            Ok((k, v)) => {
                let expect = want.next();
                assert_eq!(Some((&k[..], &v[..])), expect, "{what}: forward scan returned a wrong entry");
            }
            Err(e) => {
                check_err(e, "scan");
                break;
            }
        }
    }
    let mut want = model.iter().rev();
    for item in db.iter().rev() {
        match item {
            Ok((k, v)) => {
                let expect = want.next();
                assert_eq!(Some((&k[..], &v[..])), expect, "{what}: backward scan returned a wrong entry");
            }
            Err(e) => {
                check_err(e, "backward scan");
                break;
            }
        }
    }
    corrupt
}

fn corruption_location(e: &Error) -> Option<(&Path, u64)> {
    match e {
        Error::Corruption { file, offset, .. } => Some((file.as_path(), *offset)),
        Error::ReadOnly { cause } => corruption_location(cause),
        _ => None,
    }
}

#[test]
fn every_bit_flip_in_an_sst_is_reported_and_never_read_as_a_value() {
    watch_background_panics();
    let keys = 40;
    let (fs, model) = fixture(keys, 1);
    let ssts = files_with(&fs, ".sst");
    let [sst] = ssts.as_slice() else { panic!("expected one table, found {ssts:?}") };
    let data = fs.read_file(sst).unwrap();
    assert!(data.len() > 1000, "the table spans several blocks: {} bytes", data.len());
    for at in 0..data.len() {
        let mut flipped = data.clone();
        flipped[at] ^= 1 << (at % 8);
        let copy = fs.deep_clone();
        copy.write_file(sst, &flipped);
        let what = format!("flip at {at} of {}", data.len());
        let db = match open_on(&copy, &options()) {
            Ok(db) => db,
            Err(e) => {
                assert!(e.is_corruption(), "{what}: open failed with a non-corruption error: {e}");
                continue;
            }
        };
        let err = db.verify_checksums().expect_err(&format!("{what}: verify_checksums found nothing"));
        let (file, offset) = corruption_location(&err).unwrap_or_else(|| panic!("{what}: not a corruption: {err}"));
        assert_eq!(file, sst.as_path(), "{what}: {err}");
        // The footer is checked as a whole (its checksum sits at its end); anything else names the start of
        // the block holding the flip, or the block whose handle the flip broke.
        let footer = (data.len() - FOOTER_LEN) as u64;
        let bound = if at as u64 >= footer { data.len() as u64 } else { at as u64 };
        assert!(offset <= bound, "{what}: reported offset {offset} is after the flip: {err}");
        reads_are_right_or_corruption(&db, &model, keys, &what);
    }
    assert_no_background_panics();
}

#[test]
fn every_bit_flip_in_a_manifest_fails_the_open_or_reads_right() {
    watch_background_panics();
    let keys = 30;
    let (fs, model) = fixture(keys, 3);
    let manifests = files_with(&fs, "MANIFEST-");
    let [manifest] = manifests.as_slice() else { panic!("expected one MANIFEST, found {manifests:?}") };
    let data = fs.read_file(manifest).unwrap();
    let mut opened = 0;
    for at in 0..data.len() {
        let mut flipped = data.clone();
        flipped[at] ^= 1 << (at % 8);
        let copy = fs.deep_clone();
        copy.write_file(manifest, &flipped);
        let what = format!("MANIFEST flip at {at} of {}", data.len());
        match open_on(&copy, &options()) {
            Ok(db) => {
                opened += 1;
                assert!(!reads_are_right_or_corruption(&db, &model, keys, &what), "{what}: open passed, reads fail");
            }
            Err(e) => {
                let (file, _) = corruption_location(&e).unwrap_or_else(|| panic!("{what}: not a corruption: {e}"));
                assert_eq!(file, manifest.as_path(), "{what}: {e}");
            }
        }
    }
    eprintln!("{opened} of {} MANIFEST flips opened (and read right)", data.len());
    assert_no_background_panics();
}

/// Minimal reproduction of a D4 violation found by the sweep above: the last MANIFEST record (a flush's edit,
/// synced, acted upon: its WAL is deleted) gets one bit flipped. Recovery takes the checksum mismatch at the
/// tail for a torn append and ignores the edit, so the flushed table becomes an orphan (deleted) and the
/// write is silently gone: `get` answers `None` instead of the value or a `Corruption` error.
#[test]
fn flipped_last_manifest_edit_is_not_mistaken_for_a_torn_write() {
    let fs = MemFs::new();
    let db = open_on(&fs, &options()).unwrap();
    db.put(b"k", b"v").unwrap();
    db.flush().unwrap();
    db.close().unwrap();
    let manifests = files_with(&fs, "MANIFEST-");
    let [manifest] = manifests.as_slice() else { panic!("expected one MANIFEST, found {manifests:?}") };
    let mut data = fs.read_file(manifest).unwrap();
    let last = data.len() - 1;
    data[last] ^= 0x01;
    fs.write_file(manifest, &data);
    match open_on(&fs, &options()) {
        Err(e) => assert!(e.is_corruption(), "{e}"),
        Ok(db) => assert_eq!(db.get(b"k").unwrap().as_deref(), Some(&b"v"[..]), "the flushed write vanished"),
    }
}
