//! `shaledb.Options`: the engine's `Options`, set and read by the engine's option names.

use pyo3::exceptions::{PyAttributeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use shaledb::{CompressionType, PrefixExtractor};

/// Options of a database or column family, by the engine's option names (the names of RocksDB's options):
/// ``Options(write_buffer_size=64 << 20, compression="zstd", merge_operator="uint64add")``, or set them as
/// attributes (``opts.bloom_bits_per_key = 10``). ``Options.names()`` lists every name accepted.
///
/// ``merge_operator`` takes a built-in operator's name (``"uint64add"``, ``"stringappend"``,
/// ``"stringappend:<delimiter>"``, ``"put"``); ``compression``, ``bottommost_compression`` and
/// ``blob_compression_type`` take ``"none"``, ``"snappy"``, ``"lz4"`` or ``"zstd"``; ``prefix_extractor``
/// takes ``"fixed:<n>"``, ``"capped:<n>"`` or RocksDB's names (``"rocksdb.FixedPrefix.<n>"``).
#[pyclass(module = "shaledb")]
#[derive(Clone)]
pub struct Options {
    pub(crate) opts: shaledb::Options,
}

macro_rules! fields {
    ($($kind:ident: $($name:ident),* ;)*) => {
        const NAMES: &[&str] = &[$($(stringify!($name),)*)* "compression", "bottommost_compression",
            "blob_compression_type", "merge_operator", "prefix_extractor"];

        fn get_plain(o: &shaledb::Options, name: &str, py: Python<'_>) -> Option<PyObject> {
            match name {
                $($(stringify!($name) => Some(o.$name.into_pyobject(py).ok()?.to_owned().into_any().unbind()),)*)*
                _ => None,
            }
        }

        fn set_plain(o: &mut shaledb::Options, name: &str, v: &Bound<'_, PyAny>) -> Option<PyResult<()>> {
            match name {
                $($(stringify!($name) => Some(v.extract::<$kind>().map(|x| o.$name = x).map_err(|e| {
                    PyTypeError::new_err(format!("option {}: expected {}: {e}", stringify!($name), stringify!($kind)))
                })),)*)*
                _ => None,
            }
        }
    };
}

fields! {
    bool: create_if_missing, error_if_exists, paranoid_checks, level_compaction_dynamic_level_bytes,
        disable_auto_compactions, cache_index_and_filter_blocks, use_direct_reads,
        use_direct_io_for_flush_and_compaction, advise_random_on_open, allow_concurrent_memtable_write,
        whole_key_filtering, avoid_flush_during_recovery, avoid_flush_during_shutdown, enable_blob_files,
        enable_blob_garbage_collection;
    usize: write_buffer_size, max_write_buffer_number, level0_file_num_compaction_trigger,
        level0_slowdown_writes_trigger, level0_stop_writes_trigger, num_levels, max_background_jobs, block_size,
        block_restart_interval, block_cache_size, compaction_readahead_size, max_auto_readahead_size,
        keep_log_file_num;
    u64: max_bytes_for_level_base, target_file_size_base, target_file_size_multiplier, delayed_write_rate,
        soft_pending_compaction_bytes_limit, hard_pending_compaction_bytes_limit, bytes_per_sync,
        wal_bytes_per_sync, max_total_wal_size, max_manifest_file_size, max_log_file_size, min_blob_size,
        blob_file_size, blob_compaction_readahead_size;
    f64: max_bytes_for_level_multiplier, bloom_bits_per_key, memtable_prefix_bloom_size_ratio,
        blob_garbage_collection_age_cutoff, blob_garbage_collection_force_threshold;
    i32: compression_level, block_cache_shard_bits, max_open_files;
    u32: max_subcompactions, stats_dump_period_sec;
}

fn compression(name: &str, v: &Bound<'_, PyAny>) -> PyResult<CompressionType> {
    let s: String = v.extract().map_err(|_| PyTypeError::new_err(format!("option {name}: expected a str")))?;
    CompressionType::parse(&s).ok_or_else(|| {
        PyValueError::new_err(format!("option {name}: unknown compression {s:?} (none, snappy, lz4, zstd)"))
    })
}

fn prefix_extractor(s: &str) -> Option<PrefixExtractor> {
    let n = |t: &str| t.parse::<usize>().ok();
    if let Some(t) = s.strip_prefix("fixed:") {
        return n(t).map(PrefixExtractor::Fixed);
    }
    if let Some(t) = s.strip_prefix("capped:") {
        return n(t).map(PrefixExtractor::Capped);
    }
    PrefixExtractor::parse(s)
}

impl Options {
    fn set(&mut self, name: &str, v: &Bound<'_, PyAny>) -> PyResult<()> {
        if let Some(r) = set_plain(&mut self.opts, name, v) {
            return r;
        }
        let o = &mut self.opts;
        match name {
            "compression" => o.compression = compression(name, v)?,
            "blob_compression_type" => o.blob_compression_type = compression(name, v)?,
            "bottommost_compression" => {
                o.bottommost_compression = if v.is_none() { None } else { Some(compression(name, v)?) }
            }
            "merge_operator" => {
                o.merge_operator = if v.is_none() {
                    None
                } else {
                    let s: String = v.extract().map_err(|_| {
                        PyTypeError::new_err(
                            "option merge_operator: expected the name of a built-in operator (str) or None",
                        )
                    })?;
                    Some(shaledb::merge::builtin(&s).ok_or_else(|| {
                        PyValueError::new_err(format!(
                            "option merge_operator: unknown operator {s:?} (uint64add, stringappend, stringappend:<delimiter>, put)"
                        ))
                    })?)
                }
            }
            "prefix_extractor" => {
                o.prefix_extractor = if v.is_none() {
                    None
                } else {
                    let s: String = v
                        .extract()
                        .map_err(|_| PyTypeError::new_err("option prefix_extractor: expected a str or None"))?;
                    Some(prefix_extractor(&s).ok_or_else(|| {
                        PyValueError::new_err(format!(
                            "option prefix_extractor: {s:?} is not fixed:<n>, capped:<n> or rocksdb.FixedPrefix.<n>"
                        ))
                    })?)
                }
            }
            _ => {
                return Err(PyAttributeError::new_err(format!("Options has no option {name:?} (see Options.names())")))
            }
        }
        Ok(())
    }

    fn get(&self, name: &str, py: Python<'_>) -> PyResult<PyObject> {
        if let Some(v) = get_plain(&self.opts, name, py) {
            return Ok(v);
        }
        let o = &self.opts;
        let s = |x: Option<String>| -> PyResult<PyObject> { Ok(x.into_pyobject(py)?.into_any().unbind()) };
        match name {
            "compression" => s(Some(o.compression.name().to_string())),
            "blob_compression_type" => s(Some(o.blob_compression_type.name().to_string())),
            "bottommost_compression" => s(o.bottommost_compression.map(|c| c.name().to_string())),
            "merge_operator" => s(o.merge_operator.as_ref().map(|m| m.name().to_string())),
            "prefix_extractor" => s(o.prefix_extractor.as_ref().map(|p| p.name())),
            _ => Err(PyAttributeError::new_err(format!("Options has no option {name:?} (see Options.names())"))),
        }
    }
}

#[pymethods]
impl Options {
    #[new]
    #[pyo3(signature = (**kwargs))]
    fn new(kwargs: Option<&Bound<'_, PyDict>>) -> PyResult<Self> {
        let mut o = Options { opts: shaledb::Options::default() };
        if let Some(kw) = kwargs {
            for (k, v) in kw.iter() {
                let name: String = k.extract()?;
                o.set(&name, &v)?;
            }
        }
        Ok(o)
    }

    fn __getattr__(&self, name: &str, py: Python<'_>) -> PyResult<PyObject> {
        self.get(name, py)
    }

    fn __setattr__(&mut self, name: &str, value: &Bound<'_, PyAny>) -> PyResult<()> {
        self.set(name, value)
    }

    /// Every option name ``Options`` accepts.
    #[staticmethod]
    fn names(py: Python<'_>) -> PyResult<Bound<'_, PyList>> {
        PyList::new(py, NAMES)
    }

    /// The options as a dict of name to value.
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        for n in NAMES {
            d.set_item(n, self.get(n, py)?)?;
        }
        Ok(d)
    }

    /// A copy of these options.
    fn copy(&self) -> Self {
        self.clone()
    }

    fn __repr__(&self) -> String {
        let o = &self.opts;
        format!(
            "Options(write_buffer_size={}, compression={:?}, merge_operator={:?}, ...)",
            o.write_buffer_size,
            o.compression.name(),
            o.merge_operator.as_ref().map(|m| m.name().to_string())
        )
    }
}
