//! db_bench on any [`Engine`](crate::engine::Engine): its flags, workloads and runner, and the suites made of
//! db_bench steps (RocksDB's benchmark.sh sequence and the merge-operator comparison).
//!
//! - [`flags`]: `shaledb bench`'s flags, db_bench's names and defaults;
//! - [`workloads`]: what each benchmark's threads do; [`keygen`] and [`random`] make db_bench's keys, values
//!   and random numbers; [`range_dels`], `fillingest` and `randomtxn` are the workloads' parts with state of
//!   their own;
//! - [`runner`]: the `--benchmarks` list on one database, with its output;
//! - [`dbdir`]: what a `--db` given on the command line holds, and when bench may delete it;
//! - [`suite`]: `bench suite rocksdb|merge`, each step a db_bench run.

pub mod dbdir;
mod fillingest;
pub mod flags;
pub mod keygen;
pub mod random;
pub(crate) mod randomtxn;
pub mod range_dels;
pub mod runner;
pub mod suite;
pub mod workloads;
