//! `shaledb.Snapshot`: a consistent read view, released by `release()`, its `with` block or garbage collection.

use std::sync::Arc;

use parking_lot::Mutex;
use pyo3::prelude::*;
use pyo3::types::{PyList, PyTuple};

use crate::db::{get_item, get_or_default, get_value, multi_get_values};
use crate::iter::{Iterator, Mode};
use crate::{Cell, Closed};

/// A consistent read view of the database: reads through it (or with ``snapshot=`` on any family's reads)
/// see exactly the writes made before ``DB.snapshot()`` returned. A context manager that releases it.
#[pyclass(frozen, module = "shaledb")]
pub struct Snapshot {
    cell: Arc<Cell>,
    cf: shaledb::ColumnFamily,
    snap: Mutex<Option<shaledb::Snapshot>>,
}

impl Snapshot {
    pub(crate) fn take(py: Python<'_>, cell: &Arc<Cell>, cf: &shaledb::ColumnFamily) -> PyResult<Snapshot> {
        let snap = py.allow_threads(|| cell.with(|db| Ok(db.snapshot())))?;
        Ok(Snapshot { cell: cell.clone(), cf: cf.clone(), snap: Mutex::new(Some(snap)) })
    }

    /// The engine's snapshot (a cheap clone); `Closed` after `release()` or the database's `close()`.
    pub(crate) fn engine_snapshot(&self) -> PyResult<shaledb::Snapshot> {
        if self.cell.is_closed() {
            return Err(crate::closed_err());
        }
        // Held only for the clone, never across a GIL release: no thread can wait on it long.
        self.snap.lock().clone().ok_or_else(|| Closed::new_err("snapshot was released"))
    }
}

#[pymethods]
impl Snapshot {
    /// The sequence number the snapshot reads at.
    #[getter]
    fn sequence(&self) -> PyResult<u64> {
        Ok(self.engine_snapshot()?.sequence())
    }

    /// The value of ``key`` in the default family as of the snapshot, or ``default``.
    #[pyo3(signature = (key, default=None))]
    fn get<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
        default: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Option<Bound<'py, PyAny>>> {
        get_or_default(py, &self.cell, &self.cf, key, default, Some(self))
    }

    fn __getitem__<'py>(&self, py: Python<'py>, key: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        get_item(py, &self.cell, &self.cf, key, Some(self))
    }

    fn __contains__(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<bool> {
        Ok(get_value(py, &self.cell, &self.cf, key, Some(self))?.is_some())
    }

    /// The values of ``keys`` as of the snapshot (``None`` for each key not found).
    fn multi_get<'py>(&self, py: Python<'py>, keys: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyList>> {
        multi_get_values(py, &self.cell, &self.cf, keys, Some(self))
    }

    /// ``DB.iterator`` over the default family as of the snapshot.
    #[pyo3(signature = (start=None, stop=None, prefix=None, reverse=false, include_value=true, include_key=true))]
    fn iterator(
        &self,
        py: Python<'_>,
        start: Option<&Bound<'_, PyAny>>,
        stop: Option<&Bound<'_, PyAny>>,
        prefix: Option<&Bound<'_, PyAny>>,
        reverse: bool,
        include_value: bool,
        include_key: bool,
    ) -> PyResult<Iterator> {
        let mode = Mode::from_flags(include_key, include_value)?;
        Iterator::from_args(py, &self.cell, &self.cf, Some(self), mode, start, stop, prefix, reverse)
    }

    /// The keys as of the snapshot.
    #[pyo3(signature = (start=None, stop=None, prefix=None, reverse=false))]
    fn keys(
        &self,
        py: Python<'_>,
        start: Option<&Bound<'_, PyAny>>,
        stop: Option<&Bound<'_, PyAny>>,
        prefix: Option<&Bound<'_, PyAny>>,
        reverse: bool,
    ) -> PyResult<Iterator> {
        Iterator::from_args(py, &self.cell, &self.cf, Some(self), Mode::Keys, start, stop, prefix, reverse)
    }

    /// The values as of the snapshot, in key order.
    #[pyo3(signature = (start=None, stop=None, prefix=None, reverse=false))]
    fn values(
        &self,
        py: Python<'_>,
        start: Option<&Bound<'_, PyAny>>,
        stop: Option<&Bound<'_, PyAny>>,
        prefix: Option<&Bound<'_, PyAny>>,
        reverse: bool,
    ) -> PyResult<Iterator> {
        Iterator::from_args(py, &self.cell, &self.cf, Some(self), Mode::Values, start, stop, prefix, reverse)
    }

    /// The ``(key, value)`` pairs as of the snapshot.
    #[pyo3(signature = (start=None, stop=None, prefix=None, reverse=false))]
    fn items(
        &self,
        py: Python<'_>,
        start: Option<&Bound<'_, PyAny>>,
        stop: Option<&Bound<'_, PyAny>>,
        prefix: Option<&Bound<'_, PyAny>>,
        reverse: bool,
    ) -> PyResult<Iterator> {
        Iterator::from_args(py, &self.cell, &self.cf, Some(self), Mode::Items, start, stop, prefix, reverse)
    }

    fn __iter__(&self, py: Python<'_>) -> PyResult<Iterator> {
        Iterator::from_args(py, &self.cell, &self.cf, Some(self), Mode::Keys, None, None, None, false)
    }

    /// Releases the snapshot (iterators made from it keep their own view); later reads through it raise
    /// ``shaledb.Closed``.
    fn release(&self) {
        let s = self.snap.lock().take();
        drop(s);
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (*_exc))]
    fn __exit__(&self, _exc: &Bound<'_, PyTuple>) -> bool {
        self.release();
        false
    }

    fn __repr__(&self) -> String {
        match self.snap.lock().as_ref() {
            Some(s) => format!("<shaledb.Snapshot sequence={}>", s.sequence()),
            None => "<shaledb.Snapshot (released)>".to_string(),
        }
    }
}
