//! db_bench-compatible benchmarks (being written).
