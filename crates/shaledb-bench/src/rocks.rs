//! RocksDB behind the bench's Engine trait (issue 13: being written).
