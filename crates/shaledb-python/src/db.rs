//! `shaledb.DB` and `shaledb.ColumnFamily`: a family handle carries the data methods (get, put, iterate, ...);
//! `DB` is the default family's handle plus the database-wide methods (open, close, snapshots, families,
//! checkpoints, batches).

use std::borrow::Cow;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use pyo3::exceptions::{PyKeyError, PyTypeError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyTuple};
use shaledb::{ColumnFamilyDescriptor, ReadOptions, WriteOptions};

use crate::batch::WriteBatch;
use crate::iter::{Iterator, Mode};
use crate::options::Options;
use crate::snapshot::Snapshot;
use crate::{bytes_arg, engine_err, opt_bytes_arg, Cell, NotFound};

/// Read options for a read at `snapshot` (the latest state when `None`).
pub(crate) fn read_opts(snapshot: Option<&Snapshot>) -> PyResult<ReadOptions> {
    let mut ro = ReadOptions::default();
    if let Some(s) = snapshot {
        ro.snapshot = Some(s.engine_snapshot()?);
    }
    Ok(ro)
}

/// `get` shared by families and snapshots.
pub(crate) fn get_value<'py>(
    py: Python<'py>,
    cell: &Cell,
    cf: &shaledb::ColumnFamily,
    key: &Bound<'py, PyAny>,
    snapshot: Option<&Snapshot>,
) -> PyResult<Option<Bound<'py, PyBytes>>> {
    let key = bytes_arg(key, "key")?;
    let ro = match snapshot {
        None => None,
        some => Some(read_opts(some)?),
    };
    let got = py.allow_threads(|| {
        cell.with(|db| match &ro {
            None => db.get_cf(cf, &key),
            Some(ro) => db.get_cf_opt(ro, cf, &key),
        })
    })?;
    Ok(got.map(|v| PyBytes::new(py, &v)))
}

/// `get(key, default)` shared by families and snapshots: the value, or `default` when `key` is absent.
pub(crate) fn get_or_default<'py>(
    py: Python<'py>,
    cell: &Cell,
    cf: &shaledb::ColumnFamily,
    key: &Bound<'py, PyAny>,
    default: Option<Bound<'py, PyAny>>,
    snapshot: Option<&Snapshot>,
) -> PyResult<Option<Bound<'py, PyAny>>> {
    match get_value(py, cell, cf, key, snapshot)? {
        Some(v) => Ok(Some(v.into_any())),
        None => Ok(default),
    }
}

/// `obj[key]` shared by families and snapshots: the value (KeyError when absent); for a list or tuple of
/// keys, `multi_get` of them.
pub(crate) fn get_item<'py>(
    py: Python<'py>,
    cell: &Cell,
    cf: &shaledb::ColumnFamily,
    key: &Bound<'py, PyAny>,
    snapshot: Option<&Snapshot>,
) -> PyResult<Bound<'py, PyAny>> {
    if key.is_instance_of::<PyList>() || key.is_instance_of::<PyTuple>() {
        return Ok(multi_get_values(py, cell, cf, key, snapshot)?.into_any());
    }
    match get_value(py, cell, cf, key, snapshot)? {
        Some(v) => Ok(v.into_any()),
        None => Err(PyKeyError::new_err(key.clone().unbind())),
    }
}

/// `multi_get` shared by families and snapshots: a list of values, `None` for each key not found.
pub(crate) fn multi_get_values<'py>(
    py: Python<'py>,
    cell: &Cell,
    cf: &shaledb::ColumnFamily,
    keys: &Bound<'py, PyAny>,
    snapshot: Option<&Snapshot>,
) -> PyResult<Bound<'py, PyList>> {
    if keys.is_instance_of::<pyo3::types::PyString>() || keys.is_instance_of::<PyBytes>() {
        return Err(PyTypeError::new_err("multi_get takes a list of bytes keys, not one key"));
    }
    let objs: Vec<Bound<'py, PyAny>> = keys.try_iter()?.collect::<PyResult<_>>()?;
    let keys: Vec<Cow<'_, [u8]>> = objs.iter().map(|k| bytes_arg(k, "key")).collect::<PyResult<_>>()?;
    let ro = read_opts(snapshot)?;
    let got = py.allow_threads(|| cell.with(|db| Ok(db.multi_get_cf(&ro, cf, keys.iter()))))?;
    let mut out = Vec::with_capacity(got.len());
    for r in got {
        out.push(r.map_err(engine_err)?.map(|v| PyBytes::new(py, &v)));
    }
    PyList::new(py, out)
}

fn write_opts(sync: bool) -> WriteOptions {
    WriteOptions { sync, ..WriteOptions::default() }
}

/// A column family: a key space of its own in the database, with the same data methods as ``DB`` (which is
/// the handle of the default family). Get one with ``DB.create_column_family`` or ``DB.get_column_family``.
/// Valid until the database is closed or the family dropped.
#[pyclass(subclass, frozen, module = "shaledb")]
pub struct ColumnFamily {
    pub(crate) cell: Arc<Cell>,
    pub(crate) cf: shaledb::ColumnFamily,
}

impl ColumnFamily {
    /// `put` and `merge`: converts `key` and `value`, then runs `write` on them in this family with the GIL
    /// released.
    fn write_pair(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
        write: impl FnOnce(&shaledb::Db, &shaledb::ColumnFamily, &[u8], &[u8]) -> shaledb::Result<()> + Send,
    ) -> PyResult<()> {
        let key = bytes_arg(key, "key")?;
        let value = bytes_arg(value, "value")?;
        let (cell, cf) = (&self.cell, &self.cf);
        py.allow_threads(|| cell.with(|db| write(db, cf, &key, &value)))
    }
}

#[pymethods]
impl ColumnFamily {
    /// The family's name (``"default"`` for ``DB``).
    #[getter]
    fn name(&self) -> &str {
        self.cf.name()
    }

    /// The value of ``key``, or ``default`` when it is absent. With ``snapshot``, as of that snapshot.
    #[pyo3(signature = (key, default=None, snapshot=None))]
    fn get<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
        default: Option<Bound<'py, PyAny>>,
        snapshot: Option<PyRef<'py, Snapshot>>,
    ) -> PyResult<Option<Bound<'py, PyAny>>> {
        get_or_default(py, &self.cell, &self.cf, key, default, snapshot.as_deref())
    }

    /// ``db[key]``: the value (KeyError when absent); ``db[[k1, k2]]``: ``multi_get([k1, k2])``.
    fn __getitem__<'py>(&self, py: Python<'py>, key: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        get_item(py, &self.cell, &self.cf, key, None)
    }

    fn __setitem__(&self, py: Python<'_>, key: &Bound<'_, PyAny>, value: &Bound<'_, PyAny>) -> PyResult<()> {
        self.put(py, key, value, false)
    }

    /// ``del db[key]``: deletes ``key`` (no error when it is absent, as the engine's delete).
    fn __delitem__(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<()> {
        self.delete(py, key, false)
    }

    fn __contains__(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<bool> {
        Ok(get_value(py, &self.cell, &self.cf, key, None)?.is_some())
    }

    /// Iterates over the keys, in order (as a dict does).
    fn __iter__(&self, py: Python<'_>) -> PyResult<Iterator> {
        Iterator::from_args(py, &self.cell, &self.cf, None, Mode::Keys, None, None, None, false)
    }

    /// Sets ``key`` to ``value``. ``sync=True`` fsyncs the WAL before returning (durable across power loss);
    /// without it the write is durable across a process crash.
    #[pyo3(signature = (key, value, sync=false))]
    fn put(&self, py: Python<'_>, key: &Bound<'_, PyAny>, value: &Bound<'_, PyAny>, sync: bool) -> PyResult<()> {
        self.write_pair(py, key, value, |db, cf, key, value| {
            if sync {
                db.put_cf_opt(&write_opts(true), cf, key, value)
            } else {
                db.put_cf(cf, key, value)
            }
        })
    }

    /// Deletes ``key`` (nothing happens when it is absent).
    #[pyo3(signature = (key, sync=false))]
    fn delete(&self, py: Python<'_>, key: &Bound<'_, PyAny>, sync: bool) -> PyResult<()> {
        let key = bytes_arg(key, "key")?;
        let (cell, cf) = (&self.cell, &self.cf);
        py.allow_threads(|| cell.with(|db| db.delete_cf_opt(&write_opts(sync), cf, &key)))
    }

    /// Deletes every key in ``[start, stop)``.
    #[pyo3(signature = (start, stop, sync=false))]
    fn delete_range(
        &self,
        py: Python<'_>,
        start: &Bound<'_, PyAny>,
        stop: &Bound<'_, PyAny>,
        sync: bool,
    ) -> PyResult<()> {
        let start = bytes_arg(start, "start")?;
        let stop = bytes_arg(stop, "stop")?;
        let (cell, cf) = (&self.cell, &self.cf);
        py.allow_threads(|| {
            cell.with(|db| {
                let mut b = shaledb::WriteBatch::new();
                b.delete_range_cf(cf, &start, &stop);
                db.write_opt(&write_opts(sync), &b)
            })
        })
    }

    /// Merges ``value`` into ``key`` with the family's merge operator (``Options(merge_operator=...)``).
    #[pyo3(signature = (key, value, sync=false))]
    fn merge(&self, py: Python<'_>, key: &Bound<'_, PyAny>, value: &Bound<'_, PyAny>, sync: bool) -> PyResult<()> {
        self.write_pair(py, key, value, |db, cf, key, value| {
            if sync {
                let mut b = shaledb::WriteBatch::new();
                b.merge_cf(cf, key, value);
                db.write_opt(&write_opts(true), &b)
            } else {
                db.merge_cf(cf, key, value)
            }
        })
    }

    /// The values of ``keys`` (a list), ``None`` for each key not found; one engine call for all.
    #[pyo3(signature = (keys, snapshot=None))]
    fn multi_get<'py>(
        &self,
        py: Python<'py>,
        keys: &Bound<'py, PyAny>,
        snapshot: Option<PyRef<'py, Snapshot>>,
    ) -> PyResult<Bound<'py, PyList>> {
        multi_get_values(py, &self.cell, &self.cf, keys, snapshot.as_deref())
    }

    /// An iterator over the entries with ``start <= key < stop`` (each bound optional) whose keys start with
    /// ``prefix``, in key order or, with ``reverse``, in reverse order. Yields ``(key, value)`` tuples, or
    /// only keys (``include_value=False``), or only values (``include_key=False``). Reads one consistent
    /// view: as of ``snapshot``, or of the moment it was made.
    #[pyo3(signature = (start=None, stop=None, prefix=None, reverse=false, include_value=true, snapshot=None, include_key=true))]
    fn iterator(
        &self,
        py: Python<'_>,
        start: Option<&Bound<'_, PyAny>>,
        stop: Option<&Bound<'_, PyAny>>,
        prefix: Option<&Bound<'_, PyAny>>,
        reverse: bool,
        include_value: bool,
        snapshot: Option<PyRef<'_, Snapshot>>,
        include_key: bool,
    ) -> PyResult<Iterator> {
        let mode = Mode::from_flags(include_key, include_value)?;
        Iterator::from_args(py, &self.cell, &self.cf, snapshot.as_deref(), mode, start, stop, prefix, reverse)
    }

    /// The keys in order (same arguments as ``iterator``).
    #[pyo3(signature = (start=None, stop=None, prefix=None, reverse=false, snapshot=None))]
    fn keys(
        &self,
        py: Python<'_>,
        start: Option<&Bound<'_, PyAny>>,
        stop: Option<&Bound<'_, PyAny>>,
        prefix: Option<&Bound<'_, PyAny>>,
        reverse: bool,
        snapshot: Option<PyRef<'_, Snapshot>>,
    ) -> PyResult<Iterator> {
        Iterator::from_args(py, &self.cell, &self.cf, snapshot.as_deref(), Mode::Keys, start, stop, prefix, reverse)
    }

    /// The values in key order (same arguments as ``iterator``).
    #[pyo3(signature = (start=None, stop=None, prefix=None, reverse=false, snapshot=None))]
    fn values(
        &self,
        py: Python<'_>,
        start: Option<&Bound<'_, PyAny>>,
        stop: Option<&Bound<'_, PyAny>>,
        prefix: Option<&Bound<'_, PyAny>>,
        reverse: bool,
        snapshot: Option<PyRef<'_, Snapshot>>,
    ) -> PyResult<Iterator> {
        Iterator::from_args(py, &self.cell, &self.cf, snapshot.as_deref(), Mode::Values, start, stop, prefix, reverse)
    }

    /// The ``(key, value)`` pairs in key order (same arguments as ``iterator``).
    #[pyo3(signature = (start=None, stop=None, prefix=None, reverse=false, snapshot=None))]
    fn items(
        &self,
        py: Python<'_>,
        start: Option<&Bound<'_, PyAny>>,
        stop: Option<&Bound<'_, PyAny>>,
        prefix: Option<&Bound<'_, PyAny>>,
        reverse: bool,
        snapshot: Option<PyRef<'_, Snapshot>>,
    ) -> PyResult<Iterator> {
        Iterator::from_args(py, &self.cell, &self.cf, snapshot.as_deref(), Mode::Items, start, stop, prefix, reverse)
    }

    /// The engine property ``name`` (``"shaledb.stats"``, ``"rocksdb.num-files-at-level0"``, ...) of this
    /// family, or ``None`` when the engine does not know it.
    fn property(&self, py: Python<'_>, name: &str) -> PyResult<Option<String>> {
        let (cell, cf) = (&self.cell, &self.cf);
        py.allow_threads(|| cell.with(|db| Ok(db.property_cf(cf, name))))
    }

    /// Writes this family's memtable to a table file and waits for it.
    fn flush(&self, py: Python<'_>) -> PyResult<()> {
        let (cell, cf) = (&self.cell, &self.cf);
        py.allow_threads(|| cell.with(|db| db.flush_cf(cf)))
    }

    /// Compacts the keys in ``[start, stop]`` (both inclusive, ``None`` unbounded) down to the last level.
    #[pyo3(signature = (start=None, stop=None))]
    fn compact_range(
        &self,
        py: Python<'_>,
        start: Option<&Bound<'_, PyAny>>,
        stop: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        let start = opt_bytes_arg(start, "start")?;
        let stop = opt_bytes_arg(stop, "stop")?;
        let (cell, cf) = (&self.cell, &self.cf);
        py.allow_threads(|| cell.with(|db| db.compact_range_cf(cf, start.as_deref(), stop.as_deref())))
    }

    /// A new ``WriteBatch`` that commits to this database when its ``with`` block ends without an exception
    /// (or on ``commit()``), and is discarded on an exception. Entries go to this family unless another is
    /// named: ``batch.put(k, v, column_family=cf)``.
    #[pyo3(signature = (sync=false))]
    fn write_batch(&self, sync: bool) -> WriteBatch {
        WriteBatch::bound_to(self.cell.clone(), Some(self.cf.clone()), sync)
    }

    fn __repr__(&self) -> String {
        format!("<shaledb.ColumnFamily {:?}>", self.cf.name())
    }
}

/// A ShaleDB database, open while this object is (or until ``close()``); a context manager that closes it.
///
/// ``DB(path, options=None, create_if_missing=None, read_only=False, column_families=None)``:
/// ``create_if_missing`` overrides ``options.create_if_missing`` (default: create); ``read_only=True`` opens
/// without taking the lock, beside a writer in another process, and refuses writes (``NotSupported``);
/// ``column_families`` maps family names to their ``Options`` (merge operators, ...): listed families are
/// created when missing; the others are opened with ``options``.
///
/// Keys and values are ``bytes``. ``DB`` is the handle of the default column family (it has every method of
/// ``ColumnFamily``) plus the database-wide methods.
#[pyclass(extends = ColumnFamily, frozen, module = "shaledb")]
pub struct DB {
    cell: Arc<Cell>,
    path: PathBuf,
    read_only: bool,
}

#[pymethods]
impl DB {
    #[new]
    #[pyo3(signature = (path, options=None, create_if_missing=None, read_only=false, column_families=None))]
    fn new(
        py: Python<'_>,
        path: PathBuf,
        options: Option<PyRef<'_, Options>>,
        create_if_missing: Option<bool>,
        read_only: bool,
        column_families: Option<HashMap<String, PyRef<'_, Options>>>,
    ) -> PyResult<PyClassInitializer<Self>> {
        let mut opts = options.map(|o| o.opts.clone()).unwrap_or_default();
        if let Some(c) = create_if_missing {
            opts.create_if_missing = c;
        }
        let families: Vec<ColumnFamilyDescriptor> = column_families
            .unwrap_or_default()
            .into_iter()
            .map(|(name, o)| ColumnFamilyDescriptor::new(name, o.opts.clone()))
            .collect();
        let p = path.clone();
        let db = py
            .allow_threads(move || match (read_only, families.is_empty()) {
                (false, true) => shaledb::Db::open(&p, opts),
                (false, false) => shaledb::Db::open_with_column_families(&p, opts, families),
                (true, true) => shaledb::Db::open_read_only(&p, opts),
                (true, false) => shaledb::Db::open_read_only_with_column_families(&p, opts, families),
            })
            .map_err(engine_err)?;
        let cf = db.default_column_family();
        let cell = Arc::new(Cell::new(db));
        Ok(PyClassInitializer::from(ColumnFamily { cell: cell.clone(), cf }).add_subclass(DB { cell, path, read_only }))
    }

    /// The database's directory.
    #[getter]
    fn path(&self) -> PathBuf {
        self.path.clone()
    }

    /// Whether the database was opened with ``read_only=True``.
    #[getter]
    fn read_only(&self) -> bool {
        self.read_only
    }

    /// Whether ``close()`` was called.
    #[getter]
    fn closed(&self) -> bool {
        self.cell.is_closed()
    }

    /// Flushes the memtables, syncs, stops background work and releases the lock. Later calls on the
    /// database, its families, snapshots and iterators raise ``shaledb.Closed``. Closing twice does nothing.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        let cell = &self.cell;
        py.allow_threads(|| cell.close())
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (*_exc))]
    fn __exit__(&self, py: Python<'_>, _exc: &Bound<'_, PyTuple>) -> PyResult<bool> {
        self.close(py)?;
        Ok(false)
    }

    /// A consistent read view of the database as of now; pass it as ``snapshot=`` or read through it.
    fn snapshot(slf: PyRef<'_, Self>, py: Python<'_>) -> PyResult<Snapshot> {
        let base = slf.as_super();
        Snapshot::take(py, &base.cell, &base.cf)
    }

    /// Applies ``batch`` atomically (all of its entries or none, even across a crash).
    #[pyo3(signature = (batch, sync=false))]
    fn write(&self, py: Python<'_>, batch: PyRef<'_, WriteBatch>, sync: bool) -> PyResult<()> {
        batch.write_to(py, &self.cell, sync)
    }

    /// Writes every family's memtable to table files and waits for it.
    fn flush(&self, py: Python<'_>) -> PyResult<()> {
        let cell = &self.cell;
        py.allow_threads(|| cell.with(|db| db.flush()))
    }

    /// fsyncs the WAL: every write acknowledged so far survives a power loss.
    fn sync_wal(&self, py: Python<'_>) -> PyResult<()> {
        let cell = &self.cell;
        py.allow_threads(|| cell.with(|db| db.sync_wal()))
    }

    /// Creates column family ``name`` with ``options`` and returns its handle.
    #[pyo3(signature = (name, options=None))]
    fn create_column_family(
        &self,
        py: Python<'_>,
        name: &str,
        options: Option<PyRef<'_, Options>>,
    ) -> PyResult<ColumnFamily> {
        let opts = options.map(|o| o.opts.clone()).unwrap_or_default();
        let cell = &self.cell;
        let cf = py.allow_threads(|| cell.with(|db| db.create_column_family(name, opts)))?;
        Ok(ColumnFamily { cell: self.cell.clone(), cf })
    }

    /// The handle of column family ``name``; ``shaledb.NotFound`` when there is none.
    fn get_column_family(&self, py: Python<'_>, name: &str) -> PyResult<ColumnFamily> {
        let cell = &self.cell;
        let cf = py.allow_threads(|| cell.with(|db| Ok(db.column_family(name))))?;
        match cf {
            Some(cf) => Ok(ColumnFamily { cell: self.cell.clone(), cf }),
            None => Err(NotFound::new_err(format!("no column family named {name:?}"))),
        }
    }

    /// Drops column family ``name`` (its handles then fail with ``InvalidArgument``).
    fn drop_column_family(&self, py: Python<'_>, name: &str) -> PyResult<()> {
        let cf = self.get_column_family(py, name)?;
        let cell = &self.cell;
        py.allow_threads(|| cell.with(|db| db.drop_column_family(&cf.cf)))
    }

    /// The names of the database's column families, ``"default"`` first.
    fn column_family_names(&self, py: Python<'_>) -> PyResult<Vec<String>> {
        let cell = &self.cell;
        py.allow_threads(|| cell.with(|db| Ok(db.column_families().iter().map(|c| c.name().to_string()).collect())))
    }

    /// The names of the column families of the (open or closed) database at ``path``.
    #[staticmethod]
    #[pyo3(signature = (path, options=None))]
    fn list_column_families(
        py: Python<'_>,
        path: PathBuf,
        options: Option<PyRef<'_, Options>>,
    ) -> PyResult<Vec<String>> {
        let opts = options.map(|o| o.opts.clone()).unwrap_or_default();
        py.allow_threads(|| shaledb::Db::list_column_families(&path, opts)).map_err(engine_err)
    }

    /// Makes an openable copy of the database in the new directory ``path`` (hard links where it can).
    fn checkpoint(&self, py: Python<'_>, path: PathBuf) -> PyResult<()> {
        let cell = &self.cell;
        py.allow_threads(|| cell.with(|db| db.create_checkpoint(&path)))
    }

    /// Backs the database up into backup directory ``backup_dir`` (created if needed; see ``BackupEngine``)
    /// and returns the new backup's id.
    fn create_backup(&self, py: Python<'_>, backup_dir: PathBuf) -> PyResult<u64> {
        let cell = &self.cell;
        py.allow_threads(|| {
            cell.with(|db| {
                let mut engine = shaledb::backup::BackupEngine::open(&backup_dir)?;
                engine.create_backup(db)
            })
        })
    }

    /// Verifies the checksum of every block of every live table file.
    fn verify_checksums(&self, py: Python<'_>) -> PyResult<()> {
        let cell = &self.cell;
        py.allow_threads(|| cell.with(|db| db.verify_checksums()))
    }

    /// Waits until no compaction is pending or running.
    fn wait_for_compaction(&self, py: Python<'_>) -> PyResult<()> {
        let cell = &self.cell;
        py.allow_threads(|| cell.with(|db| db.wait_for_compaction()))
    }

    /// The database's identity (32 hex digits).
    #[getter]
    fn identity(&self, py: Python<'_>) -> PyResult<String> {
        let cell = &self.cell;
        py.allow_threads(|| cell.with(|db| Ok(db.identity())))
    }

    fn __repr__(&self) -> String {
        let state = if self.cell.is_closed() { " (closed)" } else { "" };
        format!("<shaledb.DB {:?}{state}>", self.path.display().to_string())
    }
}

/// Removes the ShaleDB database at ``path`` (it must not be open) and returns the names of the files removed.
#[pyfunction]
pub fn destroy(py: Python<'_>, path: PathBuf) -> PyResult<Vec<String>> {
    py.allow_threads(|| shaledb::destroy(&path)).map_err(engine_err)
}
