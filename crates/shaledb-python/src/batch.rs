//! `shaledb.WriteBatch`: entries applied all together or not at all.

use std::borrow::Cow;
use std::sync::Arc;

use parking_lot::Mutex;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyTuple;
use shaledb::WriteOptions;

use crate::db::ColumnFamily;
use crate::{bytes_arg, Cell, Error};

/// Entries (puts, deletes, merges, range deletes, in any column families) applied atomically: all of them
/// or none, even across a crash. ``DB.write_batch()`` makes one bound to the database, to use as a context
/// manager: it commits when the ``with`` block ends without an exception and is discarded on one.
/// ``WriteBatch()`` makes a free one, applied with ``DB.write(batch)``.
#[pyclass(frozen, module = "shaledb")]
pub struct WriteBatch {
    batch: Mutex<shaledb::WriteBatch>,
    /// The database `commit()` writes to, the family entries go to by default, and the `sync` flag.
    target: Option<(Arc<Cell>, bool)>,
    default_cf: Option<shaledb::ColumnFamily>,
}

/// An entry to add, with its byte arguments.
enum Entry<'a> {
    Put(Cow<'a, [u8]>, Cow<'a, [u8]>),
    Delete(Cow<'a, [u8]>),
    Merge(Cow<'a, [u8]>, Cow<'a, [u8]>),
    DeleteRange(Cow<'a, [u8]>, Cow<'a, [u8]>),
}

impl WriteBatch {
    pub(crate) fn bound_to(cell: Arc<Cell>, cf: Option<shaledb::ColumnFamily>, sync: bool) -> WriteBatch {
        WriteBatch { batch: Mutex::new(shaledb::WriteBatch::new()), target: Some((cell, sync)), default_cf: cf }
    }

    /// The family of an entry: the one named, else the batch's default (the default family when none).
    fn family(&self, cf: Option<PyRef<'_, ColumnFamily>>) -> Option<shaledb::ColumnFamily> {
        match cf {
            Some(c) => Some(c.cf.clone()),
            None => self.default_cf.clone(),
        }
    }

    /// Adds `entry` in `column_family`, else in the batch's family (the default family when none).
    fn add(&self, entry: Entry<'_>, column_family: Option<PyRef<'_, ColumnFamily>>) -> PyResult<()> {
        let cf = self.family(column_family);
        let mut b = self.batch.lock();
        match (entry, &cf) {
            (Entry::Put(k, v), Some(cf)) => b.put_cf(cf, k, v),
            (Entry::Put(k, v), None) => b.put(k, v),
            (Entry::Delete(k), Some(cf)) => b.delete_cf(cf, k),
            (Entry::Delete(k), None) => b.delete(k),
            (Entry::Merge(k, v), Some(cf)) => b.merge_cf(cf, k, v),
            (Entry::Merge(k, v), None) => b.merge(k, v),
            (Entry::DeleteRange(s, e), Some(cf)) => b.delete_range_cf(cf, s, e),
            (Entry::DeleteRange(s, e), None) => b.delete_range(s, e),
        };
        Ok(())
    }

    /// Writes the batch's entries to `cell` and empties it. The entries are taken out first, so no lock is
    /// held while the GIL is released.
    pub(crate) fn write_to(&self, py: Python<'_>, cell: &Cell, sync: bool) -> PyResult<()> {
        let b = std::mem::take(&mut *self.batch.lock());
        if b.is_empty() {
            return Ok(());
        }
        let opts = WriteOptions { sync, ..WriteOptions::default() };
        py.allow_threads(|| cell.with(|db| db.write_opt(&opts, &b)))
    }
}

#[pymethods]
impl WriteBatch {
    #[new]
    fn new() -> WriteBatch {
        WriteBatch { batch: Mutex::new(shaledb::WriteBatch::new()), target: None, default_cf: None }
    }

    /// Adds a put of ``key`` = ``value`` (in ``column_family``, else the batch's family).
    #[pyo3(signature = (key, value, column_family=None))]
    fn put(
        &self,
        key: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
        column_family: Option<PyRef<'_, ColumnFamily>>,
    ) -> PyResult<()> {
        self.add(Entry::Put(bytes_arg(key, "key")?, bytes_arg(value, "value")?), column_family)
    }

    fn __setitem__(&self, key: &Bound<'_, PyAny>, value: &Bound<'_, PyAny>) -> PyResult<()> {
        self.put(key, value, None)
    }

    fn __delitem__(&self, key: &Bound<'_, PyAny>) -> PyResult<()> {
        self.delete(key, None)
    }

    /// Adds a delete of ``key``.
    #[pyo3(signature = (key, column_family=None))]
    fn delete(&self, key: &Bound<'_, PyAny>, column_family: Option<PyRef<'_, ColumnFamily>>) -> PyResult<()> {
        self.add(Entry::Delete(bytes_arg(key, "key")?), column_family)
    }

    /// Adds a merge of ``value`` into ``key``.
    #[pyo3(signature = (key, value, column_family=None))]
    fn merge(
        &self,
        key: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
        column_family: Option<PyRef<'_, ColumnFamily>>,
    ) -> PyResult<()> {
        self.add(Entry::Merge(bytes_arg(key, "key")?, bytes_arg(value, "value")?), column_family)
    }

    /// Adds a delete of every key in ``[start, stop)``.
    #[pyo3(signature = (start, stop, column_family=None))]
    fn delete_range(
        &self,
        start: &Bound<'_, PyAny>,
        stop: &Bound<'_, PyAny>,
        column_family: Option<PyRef<'_, ColumnFamily>>,
    ) -> PyResult<()> {
        self.add(Entry::DeleteRange(bytes_arg(start, "start")?, bytes_arg(stop, "stop")?), column_family)
    }

    /// Removes every entry.
    fn clear(&self) {
        self.batch.lock().clear();
    }

    /// The number of entries.
    fn __len__(&self) -> usize {
        self.batch.lock().count() as usize
    }

    /// The approximate size of the batch's representation in bytes.
    #[getter]
    fn size(&self) -> usize {
        self.batch.lock().approximate_size()
    }

    /// Applies the entries to the database the batch was made from (``DB.write_batch()``) and empties the
    /// batch.
    fn commit(&self, py: Python<'_>) -> PyResult<()> {
        match &self.target {
            Some((cell, sync)) => self.write_to(py, cell, *sync),
            None => {
                Err(PyValueError::new_err("this WriteBatch was made with WriteBatch(): apply it with db.write(batch)"))
            }
        }
    }

    fn __enter__(slf: Py<Self>) -> PyResult<Py<Self>> {
        if slf.get().target.is_none() {
            return Err(Error::new_err("use db.write_batch() for a batch used with `with`"));
        }
        Ok(slf)
    }

    /// Commits when the block ended without an exception, else discards the entries.
    #[pyo3(signature = (*exc))]
    fn __exit__(&self, py: Python<'_>, exc: &Bound<'_, PyTuple>) -> PyResult<bool> {
        let failed = exc.len() > 0 && !exc.get_item(0)?.is_none();
        if failed {
            self.clear();
        } else {
            self.commit(py)?;
        }
        Ok(false)
    }

    fn __repr__(&self) -> String {
        format!("<shaledb.WriteBatch entries={}>", self.batch.lock().count())
    }
}
