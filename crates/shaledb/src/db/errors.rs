//! The refusals and the sticky background error that many parts of `db/` return. A leaf: it imports nothing
//! from the other files of `db/`, so that any of them can use it without tying them together.

use crate::filenames;
use shaledb_vfs::{Error, Result};
use std::path::Path;
use std::sync::Arc;

/// The error of every write to a database opened with [`crate::Db::open_read_only`].
pub(crate) fn refused(what: &str) -> Error {
    Error::NotSupported(format!(
        "{what}: the database was opened read-only (Db::open_read_only or Db::open_as_secondary)"
    ))
}

/// Refuses a read-only or secondary open of `dir` unless it holds a database (a CURRENT file).
pub(super) fn check_exists(fs: &dyn shaledb_vfs::Fs, dir: &Path) -> Result<()> {
    if !fs.exists(dir) {
        return Err(Error::InvalidArgument(format!("{} does not exist (read-only or secondary open)", dir.display())));
    }
    if !fs.exists(&filenames::current(dir)) {
        return Err(Error::InvalidArgument(format!("{} holds no database (no CURRENT)", dir.display())));
    }
    Ok(())
}

/// The error every write reports once a background failure made the database read-only (D6).
pub(crate) fn read_only_error(cause: &Arc<Error>) -> Error {
    Error::ReadOnly { cause: cause.clone() }
}

/// `Ok` unless a background error is set (`State::bg_error`): then the read-only error naming it.
pub(super) fn check_error(bg_error: &Option<Arc<Error>>) -> Result<()> {
    match bg_error {
        Some(c) => Err(read_only_error(c)),
        None => Ok(()),
    }
}
