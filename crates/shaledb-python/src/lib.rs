//! The `shaledb` Python package: ShaleDB's public engine API wrapped with pyo3 (docs/python.md).
//!
//! Nothing of the engine is reimplemented here: each method converts its arguments, releases the GIL, makes
//! one engine call and converts the result. Threading rules that keep it free of deadlocks:
//! - a lock of this crate (the database cell's `RwLock`, an iterator's or backup engine's `Mutex`) is only
//!   ever waited for with the GIL released, or taken with `try_lock` while holding it;
//! - the engine is only called with the GIL released.

use std::borrow::Cow;
use std::sync::atomic::{AtomicBool, Ordering};

use parking_lot::RwLock;
use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyTypeError};
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyBytes, PyString};

mod backup;
mod batch;
mod db;
mod iter;
mod options;
mod snapshot;

create_exception!(shaledb, Error, PyException, "Base class of every error ShaleDB raises.");
create_exception!(shaledb, IoError, Error, "An operating-system I/O call failed (the engine's `Io` error).");
create_exception!(shaledb, Corruption, Error, "Stored data failed a checksum or format check.");
create_exception!(shaledb, InvalidArgument, Error, "An argument or option was invalid.");
create_exception!(shaledb, Busy, Error, "A resource is held by someone else (the LOCK of an open database).");
create_exception!(
    shaledb,
    ReadOnly,
    Error,
    "The database refuses writes after an earlier write or background failure."
);
create_exception!(shaledb, NotSupported, Error, "Valid, but not supported here (a write to a read-only open).");
create_exception!(shaledb, Closed, Error, "The database (or the object used) was closed.");
create_exception!(shaledb, TimedOut, Error, "A wait passed its limit.");
create_exception!(shaledb, NotFound, Error, "A named object (a column family, a backup) does not exist.");

/// The Python exception for an engine error, with the engine's message.
pub(crate) fn engine_err(e: shaledb::Error) -> PyErr {
    let msg = e.to_string();
    match e {
        shaledb::Error::Io { .. } => IoError::new_err(msg),
        shaledb::Error::Corruption { .. } => Corruption::new_err(msg),
        shaledb::Error::InvalidArgument(_) => InvalidArgument::new_err(msg),
        shaledb::Error::Busy(_) => Busy::new_err(msg),
        shaledb::Error::ReadOnly { .. } => ReadOnly::new_err(msg),
        shaledb::Error::NotSupported(_) => NotSupported::new_err(msg),
        shaledb::Error::Closed => Closed::new_err(msg),
        shaledb::Error::TimedOut(_) => TimedOut::new_err(msg),
        #[allow(unreachable_patterns)] // the engine's error enum is non_exhaustive
        _ => Error::new_err(msg),
    }
}

pub(crate) fn closed_err() -> PyErr {
    Closed::new_err("database is closed")
}

/// An open database shared by its `DB` object and every handle, snapshot, iterator and batch made from it.
/// `close()` takes the write lock, so it waits for the engine calls in flight; every call takes the read lock
/// (with the GIL released) and finds `None` once the database is closed.
pub(crate) struct Cell {
    db: RwLock<Option<shaledb::Db>>,
    closed: AtomicBool,
}

impl Cell {
    pub(crate) fn new(db: shaledb::Db) -> Cell {
        Cell { db: RwLock::new(Some(db)), closed: AtomicBool::new(false) }
    }

    /// Runs `f` on the open database. Call with the GIL released.
    pub(crate) fn with<R>(&self, f: impl FnOnce(&shaledb::Db) -> shaledb::Result<R>) -> PyResult<R> {
        let guard = self.db.read();
        match guard.as_ref() {
            Some(db) => f(db).map_err(engine_err),
            None => Err(closed_err()),
        }
    }

    /// Whether `close()` has started (safe to ask holding the GIL: takes no lock).
    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// Closes the database; later calls fail with `Closed`. Call with the GIL released. Closing twice is a no-op.
    pub(crate) fn close(&self) -> PyResult<()> {
        self.closed.store(true, Ordering::Release);
        let db = self.db.write().take();
        match db {
            Some(db) => db.close().map_err(engine_err),
            None => Ok(()),
        }
    }
}

/// The bytes of a key or value argument: `bytes` (borrowed, no copy) or `bytearray` (copied). A `str` is
/// refused with a TypeError saying to encode it, as plyvel does.
pub(crate) fn bytes_arg<'a>(obj: &'a Bound<'_, PyAny>, what: &str) -> PyResult<Cow<'a, [u8]>> {
    if let Ok(b) = obj.downcast::<PyBytes>() {
        return Ok(Cow::Borrowed(b.as_bytes()));
    }
    if let Ok(b) = obj.downcast::<PyByteArray>() {
        return Ok(Cow::Owned(b.to_vec()));
    }
    if obj.is_instance_of::<PyString>() {
        return Err(PyTypeError::new_err(format!(
            "{what} must be bytes, not str: encode it first (for example {what}.encode())"
        )));
    }
    let ty = obj.get_type().name().map(|n| n.to_string()).unwrap_or_else(|_| "?".into());
    Err(PyTypeError::new_err(format!("{what} must be bytes, not {ty}")))
}

/// An optional bytes argument (`None` is absent).
pub(crate) fn opt_bytes_arg<'a>(obj: Option<&'a Bound<'_, PyAny>>, what: &str) -> PyResult<Option<Cow<'a, [u8]>>> {
    match obj {
        Some(o) if !o.is_none() => bytes_arg(o, what).map(Some),
        _ => Ok(None),
    }
}

/// ShaleDB, an embedded LSM-tree key-value engine. See `help(shaledb.DB)`.
#[pymodule]
#[pyo3(name = "shaledb")]
fn shaledb_module(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("ENGINE_COMMIT", shaledb::BUILD_COMMIT)?;
    m.add("Error", py.get_type::<Error>())?;
    m.add("IoError", py.get_type::<IoError>())?;
    m.add("Corruption", py.get_type::<Corruption>())?;
    m.add("InvalidArgument", py.get_type::<InvalidArgument>())?;
    m.add("Busy", py.get_type::<Busy>())?;
    m.add("ReadOnly", py.get_type::<ReadOnly>())?;
    m.add("NotSupported", py.get_type::<NotSupported>())?;
    m.add("Closed", py.get_type::<Closed>())?;
    m.add("TimedOut", py.get_type::<TimedOut>())?;
    m.add("NotFound", py.get_type::<NotFound>())?;
    m.add_class::<options::Options>()?;
    m.add_class::<db::ColumnFamily>()?;
    m.add_class::<db::DB>()?;
    m.add_class::<snapshot::Snapshot>()?;
    m.add_class::<iter::Iterator>()?;
    m.add_class::<batch::WriteBatch>()?;
    m.add_class::<backup::BackupEngine>()?;
    m.add_function(wrap_pyfunction!(db::destroy, m)?)?;
    Ok(())
}
