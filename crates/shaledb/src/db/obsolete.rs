//! Deleting obsolete files while the database runs: tables and blob files that no live version references
//! any more, taken under the state lock and removed without it, and WALs below every family's log number.
//! (What an open or `destroy` removes is `files.rs`.)

use super::{DbInner, State};
use crate::filenames;
use crate::listener::{Deferred, TableFileDeletionInfo};
use std::collections::HashSet;

/// Takes the obsolete tables and blob files that no live version references any more out of `st`, evicted
/// from their caches, for [`remove_files`] to delete with the state lock released: unlinking a 64 MiB table
/// took tens of milliseconds on this project's disk, and every write group's leader takes that lock.
/// REQUIRES: `st` locked.
pub(crate) fn obsolete_files(inner: &DbInner, st: &mut State) -> Vec<Doomed> {
    let mut doomed: Vec<Doomed> = take_obsolete_blobs(inner, st).into_iter().map(Doomed::Blob).collect();
    if st.obsolete_tables.is_empty() {
        return doomed;
    }
    st.live_versions.retain(|(_, w)| w.strong_count() > 0);
    let mut live: HashSet<u64> = HashSet::new();
    for (_, w) in &st.live_versions {
        if let Some(v) = w.upgrade() {
            live.extend(v.levels.iter().flatten().map(|f| f.number));
        }
    }
    for f in st.vs.families().values() {
        live.extend(f.current.levels.iter().flatten().map(|f| f.number));
    }
    let mut keep = Vec::new();
    for n in std::mem::take(&mut st.obsolete_tables) {
        if live.contains(&n) {
            keep.push(n);
        } else {
            inner.tables.evict(n);
            doomed.push(Doomed::Table(n));
        }
    }
    st.obsolete_tables = keep;
    doomed
}

/// A file [`obsolete_files`] took: no version lists it and no cache holds it, and its number is never used
/// again, so it may be removed without the state lock.
pub(crate) enum Doomed {
    Table(u64),
    Blob(u64),
}

/// Removes the files [`obsolete_files`] took; a table's removal is told to the listeners. A failed removal
/// leaves a leftover that the next open removes as an orphan. REQUIRES: `state` not held.
pub(crate) fn remove_files(inner: &DbInner, doomed: Vec<Doomed>) {
    for d in doomed {
        match d {
            Doomed::Blob(n) => {
                let _ = inner.fs.remove(&filenames::blob(&inner.dir, n));
            }
            Doomed::Table(n) => {
                let path = filenames::table(&inner.dir, n);
                let r = inner.fs.remove(&path);
                let info = TableFileDeletionInfo { file_number: n, path, error: r.err() };
                inner.listeners.defer(Deferred::Deleted(info));
            }
        }
    }
}

/// Old WALs: every one below the smallest log number of any family. REQUIRES: `st` locked.
pub(crate) fn delete_obsolete_wals(inner: &DbInner, st: &State) {
    for path in obsolete_wals(inner, st) {
        let _ = inner.fs.remove(&path);
    }
}

/// The WALs [`delete_obsolete_wals`] deletes (none while a checkpoint or backup copies WALs: the next flush
/// after it deletes them). A WAL never comes back into use, so they may be removed after `st` is released.
/// REQUIRES: `st` locked.
pub(super) fn obsolete_wals(inner: &DbInner, st: &State) -> Vec<std::path::PathBuf> {
    if st.wal_pins > 0 {
        return Vec::new();
    }
    let min_log = st.vs.min_log_number();
    let names = inner.fs.list(&inner.dir).unwrap_or_default();
    names
        .into_iter()
        .filter(|name| matches!(filenames::parse(name), Some(filenames::FileKind::Wal(n)) if n < min_log))
        .map(|name| inner.dir.join(name))
        .collect()
}

/// Takes the blob files that left the current version once no live version (a reader's, an iterator's, a
/// checkpoint's) lists them, evicted from the blob reader cache: the caller removes them with the state lock
/// released ([`remove_files`]). REQUIRES: `st` locked.
fn take_obsolete_blobs(inner: &DbInner, st: &mut State) -> Vec<u64> {
    if st.vs.obsolete_blobs.is_empty() {
        return Vec::new();
    }
    st.live_versions.retain(|(_, w)| w.strong_count() > 0);
    let mut live: std::collections::HashSet<u64> =
        st.vs.families().values().flat_map(|f| f.current.blob_files.keys().copied()).collect();
    for v in st.live_versions.iter().filter_map(|(_, w)| w.upgrade()) {
        live.extend(v.blob_files.keys());
    }
    let mut keep = Vec::new();
    let mut doomed = Vec::new();
    for n in std::mem::take(&mut st.vs.obsolete_blobs) {
        if live.contains(&n) {
            keep.push(n);
        } else {
            inner.blobs.evict(n);
            doomed.push(n);
        }
    }
    st.vs.obsolete_blobs = keep;
    doomed
}
