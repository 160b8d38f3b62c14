//! `shaledb.Iterator`: an engine cursor within bounds, read ahead in small batches so that one GIL release
//! serves several entries.
//!
//! The cursor reads one consistent view (a snapshot's, or the state when the iterator was made), so entries
//! read ahead are the ones a step-by-step walk would yield. A batch starts at one entry and doubles up to
//! `MAX_BATCH` entries or `MAX_BATCH_BYTES` bytes: a caller that takes one entry reads one.

use std::borrow::Cow;
use std::sync::Arc;

use parking_lot::Mutex;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyTuple};
use shaledb::Cursor;

use crate::db::read_opts;
use crate::snapshot::Snapshot;
use crate::{opt_bytes_arg, Cell, Closed, Error};

const MAX_BATCH: usize = 256;
const MAX_BATCH_BYTES: usize = 256 << 10;

/// What an iterator yields.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    Items,
    Keys,
    Values,
}

impl Mode {
    pub(crate) fn from_flags(include_key: bool, include_value: bool) -> PyResult<Mode> {
        match (include_key, include_value) {
            (true, true) => Ok(Mode::Items),
            (true, false) => Ok(Mode::Keys),
            (false, true) => Ok(Mode::Values),
            (false, false) => Err(PyValueError::new_err("include_key and include_value cannot both be False")),
        }
    }
}

/// The arguments of `iterator()`.
struct IterSpec {
    start: Option<Vec<u8>>,
    stop: Option<Vec<u8>>,
    prefix: Option<Vec<u8>>,
    reverse: bool,
    mode: Mode,
}

/// The smallest key greater than every key starting with `prefix`, if any (none when it is all 0xff).
fn prefix_end(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last != 0xff {
            end.push(last + 1);
            return Some(end);
        }
    }
    None
}

struct State {
    cursor: Option<Cursor>,
    reverse: bool,
    mode: Mode,
    lower: Option<Vec<u8>>,
    upper: Option<Vec<u8>>,
    /// Not positioned yet: the first refill seeks (to `seek_target`, else to the first entry in order).
    positioned: bool,
    seek_target: Option<Vec<u8>>,
    done: bool,
    /// Entries read ahead: `buf[ends[i-1].1..ends[i].0]` is key `i`, `buf[ends[i].0..ends[i].1]` its value
    /// (each empty when the mode does not yield it).
    buf: Vec<u8>,
    ends: Vec<(usize, usize)>,
    pos: usize,
    batch: usize,
}

impl State {
    /// Reads the next batch into `buf`. Runs with the GIL released, holding the database's read lock.
    fn refill(&mut self, cell: &Cell) -> PyResult<()> {
        self.buf.clear();
        self.ends.clear();
        self.pos = 0;
        let r = cell.with(|_db| {
            let Some(c) = self.cursor.as_mut() else { return Ok(()) };
            if !self.positioned {
                self.positioned = true;
                match (self.seek_target.take(), self.reverse) {
                    (None, false) => c.seek_to_first(),
                    (None, true) => c.seek_to_last(),
                    (Some(t), false) => {
                        if self.lower.as_deref().is_some_and(|l| t.as_slice() < l) {
                            c.seek_to_first()
                        } else {
                            c.seek(&t)
                        }
                    }
                    (Some(t), true) => {
                        if self.upper.as_deref().is_some_and(|u| t.as_slice() >= u) {
                            c.seek_to_last()
                        } else {
                            c.seek_for_prev(&t)
                        }
                    }
                }
            } else if self.reverse {
                c.prev()
            } else {
                c.next()
            }
            loop {
                if !c.valid() {
                    self.done = true;
                    return c.status();
                }
                if self.mode != Mode::Values {
                    self.buf.extend_from_slice(c.key());
                }
                let key_end = self.buf.len();
                if self.mode != Mode::Keys {
                    self.buf.extend_from_slice(c.value());
                }
                self.ends.push((key_end, self.buf.len()));
                if self.ends.len() >= self.batch || self.buf.len() >= MAX_BATCH_BYTES {
                    return Ok(());
                }
                if self.reverse {
                    c.prev()
                } else {
                    c.next()
                }
            }
        });
        self.batch = (self.batch * 2).min(MAX_BATCH);
        r
    }
}

/// An iterator over a column family's entries (``DB.iterator``, ``keys``, ``values``, ``items``). It reads
/// one consistent view and stays valid while the database is open; after ``DB.close()`` it raises
/// ``shaledb.Closed``. ``seek(key)`` repositions it: forward, at the first key ``>= key``; reverse, at the
/// last key ``<= key``. One thread at a time: a second thread stepping it at the same moment gets
/// ``shaledb.Error``.
#[pyclass(frozen, module = "shaledb")]
pub struct Iterator {
    cell: Arc<Cell>,
    state: Mutex<State>,
}

impl Iterator {
    /// The iterator of a family's or a snapshot's `iterator()`, `keys()`, `values()`, `items()` or
    /// `__iter__`, from their Python arguments (checked in this order: start, stop, prefix).
    pub(crate) fn from_args(
        py: Python<'_>,
        cell: &Arc<Cell>,
        cf: &shaledb::ColumnFamily,
        snapshot: Option<&Snapshot>,
        mode: Mode,
        start: Option<&Bound<'_, PyAny>>,
        stop: Option<&Bound<'_, PyAny>>,
        prefix: Option<&Bound<'_, PyAny>>,
        reverse: bool,
    ) -> PyResult<Iterator> {
        let spec = IterSpec {
            start: opt_bytes_arg(start, "start")?.map(Cow::into_owned),
            stop: opt_bytes_arg(stop, "stop")?.map(Cow::into_owned),
            prefix: opt_bytes_arg(prefix, "prefix")?.map(Cow::into_owned),
            reverse,
            mode,
        };
        Iterator::open(py, cell, cf, spec, snapshot)
    }

    fn open(
        py: Python<'_>,
        cell: &Arc<Cell>,
        cf: &shaledb::ColumnFamily,
        spec: IterSpec,
        snapshot: Option<&Snapshot>,
    ) -> PyResult<Iterator> {
        let mut ro = read_opts(snapshot)?;
        let mut lower = spec.start;
        let mut upper = spec.stop;
        if let Some(p) = &spec.prefix {
            if lower.as_ref().is_none_or(|l| l < p) {
                lower = Some(p.clone());
            }
            if let Some(end) = prefix_end(p) {
                if upper.as_ref().is_none_or(|u| *u > end) {
                    upper = Some(end);
                }
            }
        }
        ro.iterate_lower_bound = lower.clone();
        ro.iterate_upper_bound = upper.clone();
        // Making a cursor may open table files: the GIL is released as for every engine call.
        let cursor = py.allow_threads(|| cell.with(|db| Ok(db.cursor_cf_opt(&ro, cf))))?;
        Ok(Iterator {
            cell: cell.clone(),
            state: Mutex::new(State {
                cursor: Some(cursor),
                reverse: spec.reverse,
                mode: spec.mode,
                lower,
                upper,
                positioned: false,
                seek_target: None,
                done: false,
                buf: Vec::new(),
                ends: Vec::new(),
                pos: 0,
                batch: 1,
            }),
        })
    }

    fn closed_err() -> PyErr {
        Closed::new_err("iterator used after its database was closed")
    }
}

#[pymethods]
impl Iterator {
    fn __iter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __next__(&self, py: Python<'_>) -> PyResult<Option<PyObject>> {
        if self.cell.is_closed() {
            return Err(Self::closed_err());
        }
        let Some(mut st) = self.state.try_lock() else {
            return Err(Error::new_err("iterator is in use by another thread"));
        };
        if st.pos == st.ends.len() {
            if st.done {
                return Ok(None);
            }
            let cell = &self.cell;
            let st_ref: &mut State = &mut st;
            py.allow_threads(|| st_ref.refill(cell)).map_err(
                |e| {
                    if cell.is_closed() {
                        Self::closed_err()
                    } else {
                        e
                    }
                },
            )?;
            if st.ends.is_empty() {
                return Ok(None);
            }
        }
        let start = if st.pos == 0 { 0 } else { st.ends[st.pos - 1].1 };
        let (key_end, end) = st.ends[st.pos];
        st.pos += 1;
        let out = match st.mode {
            Mode::Keys => PyBytes::new(py, &st.buf[start..key_end]).into_any().unbind(),
            Mode::Values => PyBytes::new(py, &st.buf[key_end..end]).into_any().unbind(),
            Mode::Items => {
                let k = PyBytes::new(py, &st.buf[start..key_end]);
                let v = PyBytes::new(py, &st.buf[key_end..end]);
                PyTuple::new(py, [k, v])?.into_any().unbind()
            }
        };
        Ok(Some(out))
    }

    /// Repositions the iterator: forward, at the first key ``>= key``; reverse, at the last key ``<= key``
    /// (within the iterator's bounds). Returns the iterator.
    fn seek(slf: Py<Self>, key: &Bound<'_, PyAny>) -> PyResult<Py<Self>> {
        let target = crate::bytes_arg(key, "key")?.into_owned();
        {
            let this = slf.get();
            if this.cell.is_closed() {
                return Err(Self::closed_err());
            }
            let Some(mut st) = this.state.try_lock() else {
                return Err(Error::new_err("iterator is in use by another thread"));
            };
            if st.cursor.is_none() {
                return Err(Error::new_err("iterator was closed"));
            }
            st.positioned = false;
            st.seek_target = Some(target);
            st.done = false;
            st.buf.clear();
            st.ends.clear();
            st.pos = 0;
            st.batch = 1;
        }
        Ok(slf)
    }

    /// Releases the iterator's view now (it is released anyway when the object is collected).
    fn close(&self) -> PyResult<()> {
        let Some(mut st) = self.state.try_lock() else {
            return Err(Error::new_err("iterator is in use by another thread"));
        };
        st.cursor = None;
        st.done = true;
        st.buf.clear();
        st.ends.clear();
        st.pos = 0;
        Ok(())
    }
}
