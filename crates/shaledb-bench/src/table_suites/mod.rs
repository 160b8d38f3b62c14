//! The table suites: engine-against-engine benchmarks on tables stored as keys, each configuration run on every
//! engine on a fresh database.
//!
//! - [`sysbench`]: sysbench OLTP (point, range and IN-list reads; updates, inserts, deletes) on the sbtest
//!   tables (from seed 002, the MyRocks sysbench report);
//! - [`insertbench`]: the insert benchmark (iibench): loads into a table with three secondary indexes, then
//!   range queries beside a rate-limited inserter (from seed 003);
//! - [`forestdb`]: ForestDB's benchmark pattern on plain keys: load, overwrites, point and range queries beside
//!   a writer, the database size after each step (from seed 003);
//! - [`table`]: the table layer sysbench and the insert benchmark store their rows with;
//! - [`harness`]: what the three share: database directories, the engine loop, option listings, report
//!   tables and plots.

pub mod forestdb;
pub mod harness;
pub mod insertbench;
pub mod measure;
pub mod sysbench;
pub mod table;
#[cfg(test)]
mod test_support;
