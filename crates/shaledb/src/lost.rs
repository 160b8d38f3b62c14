//! `lost/`: where recovery keeps the files it dropped data from, so a loss can be examined and undone by hand.
//!
//! ```text
//! lost/NNNNNN.log      a WAL recovery did not replay in full (damaged, or after the damage), byte for byte
//! lost/NNNNNN.log.K    the same name kept again with different contents (K = 1, 2, ...)
//! ```
//!
//! The engine never reads or deletes `lost/`; `shaledb verify` reports every file in it as a problem until an
//! operator removes the directory.
//!
//! A kept WAL is copied, not renamed, and before the recovery's MANIFEST is written: until that MANIFEST is
//! durable the WAL in the database directory is still needed (a crash would replay it again), and once it is
//! durable the next open deletes the WAL as obsolete. Renaming it before the MANIFEST would lose the replayed
//! prefix on a crash in between; renaming after leaves a window in which a crash lets the next open delete the
//! only copy as an orphan. The copy is synced, then `lost/` and the database directory, before the MANIFEST.

use crate::filenames;
use shaledb_vfs::{Error, Fs, Result};
use std::path::{Path, PathBuf};

/// What recovery dropped, reported by the `shaledb.recovery-dropped-*` properties and in the LOG.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Losses {
    /// Records not replayed: each damaged record counts as one (a zero-filled stretch or an orphan fragment as
    /// none) plus every intact record skipped with it or after it. Records destroyed inside a damaged stretch
    /// (a zeroed page holds many) cannot be told apart and are not counted: `bytes` covers them.
    pub(crate) records: u64,
    /// Bytes of the WALs that were not replayed.
    pub(crate) bytes: u64,
    /// The copies kept in `lost/`.
    pub(crate) kept: Vec<PathBuf>,
}

/// Copies `data`, the contents of the file `name` of the database in `dir`, into `lost/`, durably. An identical
/// copy already there (from an open that crashed after keeping it) is reused. Returns the copy's path.
pub(crate) fn keep(fs: &dyn Fs, dir: &Path, name: &str, data: &[u8]) -> Result<PathBuf> {
    let lost = filenames::lost_dir(dir);
    fs.create_dir_all(&lost)?;
    let mut k = 0u32;
    let path = loop {
        let candidate = if k == 0 { lost.join(name) } else { lost.join(format!("{name}.{k}")) };
        if !fs.exists(&candidate) {
            break candidate;
        }
        if fs.read_all(&candidate).is_ok_and(|d| d == data) {
            return Ok(candidate);
        }
        k = k.checked_add(1).ok_or_else(|| Error::InvalidArgument(format!("{} is full", lost.display())))?;
    };
    let mut f = fs.create(&path)?;
    f.append(data)?;
    f.sync()?;
    drop(f);
    fs.sync_dir(&lost)?;
    fs.sync_dir(dir)?;
    Ok(path)
}

/// Removes `lost/` and everything in it (for `destroy`).
pub(crate) fn remove_all(fs: &dyn Fs, dir: &Path) -> Result<()> {
    let lost = filenames::lost_dir(dir);
    for name in fs.list(&lost)? {
        fs.remove(&lost.join(name))?;
    }
    // Best effort, as for the database directory itself: a file system without directory removal
    // (`NotSupported`) keeps the empty directory. Through the `Fs`, never `std::fs`, so a database on another
    // file system (MemFs, a wrapper) is not reached around.
    let _ = fs.remove_dir(&lost);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use shaledb_vfs::{MemFs, PowerLoss};

    #[test]
    fn kept_copy_is_durable_and_never_overwrites_a_different_one() {
        let fs = MemFs::new();
        let dir = Path::new("/db");
        fs.create_dir_all(dir).unwrap();
        let a = keep(&fs, dir, "000007.log", b"first").unwrap();
        assert_eq!(a, dir.join("lost/000007.log"));
        // The same contents again (a crash after keeping): the same copy.
        assert_eq!(keep(&fs, dir, "000007.log", b"first").unwrap(), a);
        let b = keep(&fs, dir, "000007.log", b"other").unwrap();
        assert_eq!(b, dir.join("lost/000007.log.1"));
        fs.power_loss(PowerLoss::DropUnsynced, 0);
        assert_eq!(fs.read_file(&a).unwrap(), b"first");
        assert_eq!(fs.read_file(&b).unwrap(), b"other");
        remove_all(&fs, dir).unwrap();
        assert!(fs.list(&filenames::lost_dir(dir)).unwrap_or_default().is_empty());
    }
}
