//! `shaledb.BackupEngine`: the engine's backup directory (incremental backups, verify, restore).

use std::path::PathBuf;

use parking_lot::Mutex;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};

use crate::db::DB;
use crate::{closed_err, engine_err};

/// A backup directory, opened (and created when missing) by ``BackupEngine(path)``; holds the directory's
/// lock until ``close()`` (or the end of its ``with`` block). Backups share the table files they have in
/// common.
#[pyclass(frozen, module = "shaledb")]
pub struct BackupEngine {
    engine: Mutex<Option<shaledb::backup::BackupEngine>>,
}

impl BackupEngine {
    /// Runs `f` on the open engine, with the GIL released.
    fn with<R: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut shaledb::backup::BackupEngine) -> shaledb::Result<R> + Send,
    ) -> PyResult<R> {
        py.allow_threads(|| {
            let mut g = self.engine.lock();
            let e = g.as_mut().ok_or_else(|| crate::Closed::new_err("backup engine is closed"))?;
            f(e).map_err(engine_err)
        })
    }
}

#[pymethods]
impl BackupEngine {
    #[new]
    fn new(py: Python<'_>, path: PathBuf) -> PyResult<BackupEngine> {
        let e = py.allow_threads(|| shaledb::backup::BackupEngine::open(&path)).map_err(engine_err)?;
        Ok(BackupEngine { engine: Mutex::new(Some(e)) })
    }

    /// Backs ``db`` up and returns the new backup's id.
    fn create_backup(&self, py: Python<'_>, db: PyRef<'_, DB>) -> PyResult<u64> {
        let cell = db.as_super().cell.clone();
        if cell.is_closed() {
            return Err(closed_err());
        }
        py.allow_threads(|| {
            let mut g = self.engine.lock();
            let e = g.as_mut().ok_or_else(|| crate::Closed::new_err("backup engine is closed"))?;
            cell.with(|db| e.create_backup(db))
        })
    }

    /// The backups, oldest first: dicts with ``id``, ``timestamp``, ``size``, ``file_count``, ``sequence``.
    fn list<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let infos = self.with(py, |e| Ok(e.list()))?;
        let out = PyList::empty(py);
        for i in infos {
            let d = PyDict::new(py);
            d.set_item("id", i.id)?;
            d.set_item("timestamp", i.timestamp)?;
            d.set_item("size", i.size)?;
            d.set_item("file_count", i.file_count)?;
            d.set_item("sequence", i.sequence)?;
            out.append(d)?;
        }
        Ok(out)
    }

    /// Checks every file of backup ``backup_id`` against its recorded size and checksum.
    fn verify(&self, py: Python<'_>, backup_id: u64) -> PyResult<()> {
        self.with(py, |e| e.verify(backup_id))
    }

    /// Restores backup ``backup_id`` into directory ``path`` (which must not hold an open database).
    fn restore(&self, py: Python<'_>, backup_id: u64, path: PathBuf) -> PyResult<()> {
        self.with(py, |e| e.restore(backup_id, &path))
    }

    /// Deletes backup ``backup_id``.
    fn delete(&self, py: Python<'_>, backup_id: u64) -> PyResult<()> {
        self.with(py, |e| e.delete(backup_id))
    }

    /// Deletes all but the newest ``keep`` backups; returns the ids deleted.
    fn purge_old(&self, py: Python<'_>, keep: usize) -> PyResult<Vec<u64>> {
        self.with(py, |e| e.purge_old(keep))
    }

    /// Releases the backup directory's lock.
    fn close(&self, py: Python<'_>) {
        let e = py.allow_threads(|| self.engine.lock().take());
        drop(e);
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (*_exc))]
    fn __exit__(&self, py: Python<'_>, _exc: &Bound<'_, PyTuple>) -> bool {
        self.close(py);
        false
    }
}
