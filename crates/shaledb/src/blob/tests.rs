//! The blob lifecycle's arithmetic on hand-made versions: garbage collection's age cutoff, the file forced
//! collection targets, the totals behind the blob properties, and a blob index that does not decode.

use super::{decode_index, gc, gc_cutoff, int_property, totals};
use crate::version::Version;
use crate::Options;
use shaledb_format::blob::BlobFileMeta;
use shaledb_format::edit::BlobFileAddition;
use shaledb_vfs::Error;
use std::path::Path;

/// A version holding blob files `(number, record_bytes, garbage_bytes)`, each of 10 records and a file of
/// `record_bytes + 100` bytes.
fn version_with(files: &[(u64, u64, u64)]) -> Version {
    let mut v = Version::new(7);
    for &(number, record_bytes, garbage_bytes) in files {
        let addition = BlobFileAddition { number, record_count: 10, record_bytes, file_size: record_bytes + 100 };
        let meta =
            BlobFileMeta { garbage_bytes, garbage_count: u64::from(garbage_bytes > 0), ..BlobFileMeta::new(addition) };
        v.blob_files.insert(number, meta);
    }
    v
}

fn gc_options(age_cutoff: f64, force_threshold: f64) -> Options {
    Options {
        enable_blob_garbage_collection: true,
        blob_garbage_collection_age_cutoff: age_cutoff,
        blob_garbage_collection_force_threshold: force_threshold,
        ..Options::default()
    }
}

#[test]
fn gc_cutoff_is_the_first_file_past_the_oldest_fraction_rounded_down() {
    let v = version_with(&[(10, 1000, 0), (20, 1000, 0), (30, 1000, 0), (40, 1000, 0)]);
    assert_eq!(gc_cutoff(&Options::default(), &v), 0, "collection off: nothing is old");
    assert_eq!(gc_cutoff(&gc_options(0.5, 1.0), &v), 30, "two of four files are old");
    assert_eq!(gc_cutoff(&gc_options(0.3, 1.0), &v), 20, "1.2 files round down to one");
    assert_eq!(gc_cutoff(&gc_options(0.1, 1.0), &v), 10, "0.4 files round down to none");
    assert_eq!(gc_cutoff(&gc_options(1.0, 1.0), &v), 41, "every file is old: past the newest");
    assert_eq!(gc_cutoff(&gc_options(0.5, 1.0), &Version::new(7)), 0, "no blob files");
}

#[test]
fn forced_collection_targets_the_oldest_file_only_when_old_and_garbage_enough() {
    // The oldest file is 60% garbage, the next 90%: only the oldest is ever a target.
    let v = version_with(&[(10, 1000, 600), (20, 1000, 900), (30, 1000, 0), (40, 1000, 0)]);
    assert_eq!(gc::forced_target(&gc_options(0.5, 0.5), &v), Some(10));
    assert_eq!(gc::forced_target(&gc_options(0.5, 0.6), &v), Some(10), "the threshold is inclusive");
    assert_eq!(gc::forced_target(&gc_options(0.5, 0.7), &v), None, "below the threshold");
    assert_eq!(gc::forced_target(&gc_options(0.1, 0.5), &v), None, "no file within the age cutoff");
    assert_eq!(gc::forced_target(&gc_options(0.5, 1.0), &v), None, "a threshold of 1 turns forcing off");
    let off = Options { enable_blob_garbage_collection: false, ..gc_options(0.5, 0.5) };
    assert_eq!(gc::forced_target(&off, &v), None, "collection off");
}

#[test]
fn totals_and_properties_count_files_bytes_and_garbage() {
    let v = version_with(&[(10, 1000, 600), (20, 500, 0)]);
    assert_eq!(totals(&v), (2, 1100 + 600, 600));
    assert_eq!(int_property(&v, "num-blob-files"), Some(2));
    assert_eq!(int_property(&v, "live-blob-file-size"), Some(1700));
    assert_eq!(int_property(&v, "live-blob-file-garbage-size"), Some(600));
    assert_eq!(int_property(&v, "num-files-at-level0"), None, "not a blob property");
    assert_eq!(totals(&Version::new(7)), (0, 0, 0));
}

#[test]
fn an_undecodable_blob_index_is_corruption_at_its_location() {
    let e = decode_index(b"\xff", Some((Path::new("/db/000012.sst"), 345))).unwrap_err();
    match &e {
        Error::Corruption { file, offset, what } => {
            assert_eq!((file.as_path(), *offset), (Path::new("/db/000012.sst"), 345));
            assert!(what.contains("undecodable blob index of 1 bytes"), "{what}");
        }
        other => panic!("expected corruption, got {other}"),
    }
    let e = decode_index(b"", None).unwrap_err();
    assert!(e.is_corruption(), "{e}");
    assert!(e.to_string().contains(crate::lookup::MEMTABLE), "{e}");
}
