//! db_bench-compatible benchmarks for ShaleDB: the workloads, their reports (db_bench's text, JSON, plots),
//! the suites made of db_bench steps (RocksDB's benchmark.sh sequence and the merge-operator comparison), the
//! table suites that run engine against engine, and a RESP load generator.
//!
//! The `shaledb bench` command is a thin shell over [`run_bench`], [`db_bench::suite::run_suite`], the table
//! suites' `run_*` functions and [`resp::run_resp`]. Keys, values, per-thread seeds and output lines follow
//! db_bench so that the two tools write the same data and their outputs are read by the same scripts; see
//! `BENCHMARKS.md` beside this crate for the columns and how each is computed.
//!
//! # Map
//!
//! | module | what it holds |
//! |---|---|
//! | [`db_bench`] | db_bench's flags, workloads and runner ([`run_bench`]); suites of db_bench steps |
//! | [`engine`] | the [`Engine`] trait the benchmarks drive; ShaleDB's engine, and RocksDB's (feature `rocksdb`) |
//! | [`table_suites`] | sysbench OLTP, the insert benchmark, the ForestDB pattern; their table layer and harness |
//! | [`resp`] | the RESP load generator (`shaledb bench resp`) against a server on this machine |
//! | [`reporting`] | latency histograms, the per-run recorder, db_bench's text and JSON, and the plots |

pub mod db_bench;
pub mod engine;
pub mod reporting;
pub mod resp;
pub mod table_suites;

pub use db_bench::flags::BenchFlags;
pub use db_bench::runner::{run_bench, Runner};
pub use engine::{
    with_engine, Engine, EngineBatch, EngineIter, EngineKind, EngineSample, EngineSstWriter, EngineVisitor,
    IterOptions, WriteMode,
};
pub use reporting::report::BenchResult;

/// Errors of the benchmark tool.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BenchError {
    /// The command line did not parse (clap's message names the flag).
    #[error("{0}")]
    Usage(String),
    /// A flag has a value the tool cannot use.
    #[error("invalid value for --{flag}: {msg}")]
    BadFlag {
        /// The flag, without dashes.
        flag: String,
        /// What is wrong and what is accepted.
        msg: String,
    },
    /// The database failed.
    #[error("{what}: {cause}")]
    Engine {
        /// The benchmark or step and the operation.
        what: String,
        /// The engine's error (in the message, so not also a `source()`: a chain prints each cause once).
        cause: engine::EngineError,
    },
    /// A file of the tool (report, JSON, plot) could not be written.
    #[error("{what} {path}: {cause}")]
    Io {
        /// What was being done.
        what: &'static str,
        /// The file.
        path: std::path::PathBuf,
        /// The error (in the message, not also a `source()`).
        cause: std::io::Error,
    },
    /// Drawing a plot failed.
    #[error("plot {path}: {msg}")]
    Plot {
        /// The file.
        path: std::path::PathBuf,
        /// The backend's message.
        msg: String,
    },
}

impl BenchError {
    pub(crate) fn engine(what: impl Into<String>, source: engine::EngineError) -> BenchError {
        BenchError::Engine { what: what.into(), cause: source }
    }
}

/// Result of this crate's functions.
pub type Result<T> = std::result::Result<T, BenchError>;

#[cfg(test)]
mod error_tests {
    use super::*;
    use std::error::Error as _;

    /// Each cause is printed once by a chain printer: it is in the message or it is the `source()`, never both.
    #[test]
    fn errors_carry_their_cause_once() {
        let io = BenchError::Io {
            what: "writing JSON to",
            path: "/x/y.json".into(),
            cause: std::io::Error::new(std::io::ErrorKind::NotFound, "no such directory"),
        };
        assert_eq!(io.to_string(), "writing JSON to /x/y.json: no such directory");
        assert!(io.source().is_none());
        let table = table_suites::table::TableError::Engine("disk full".into());
        assert_eq!(table.to_string(), "disk full");
        assert!(table.source().is_none(), "transparent: the engine error's own source, which has none");
    }
}
