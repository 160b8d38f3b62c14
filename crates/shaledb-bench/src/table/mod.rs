//! Tables on keys, as MyRocks stores them: rows and secondary indexes as key-value entries of any
//! [`Engine`], so the table workloads (sysbench, the insert benchmark) run on ShaleDB and RocksDB alike.
//!
//! A primary-key record is `index id (u32 BE) | PK columns (order-preserving)` -> the row's other columns; a
//! secondary-index record is `index id | index columns | PK columns` -> empty. The encodings are in
//! [`encoding`] and their grammar in docs/format/table.md. Every statement is one atomic batch; statements
//! that change a row hold its lock in [`locks::RowLocks`] from the read of the old row to the write of the
//! new one, so two clients updating one row never lose an update.
//!
//! SKELETON (issue 13): signatures fixed for the sysbench suite; bodies are being written.

use crate::engine::{Engine, EngineError, WriteMode};

pub mod encoding;
pub mod locks;

/// A column's type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ColumnType {
    /// Signed 32-bit integer (`INT`).
    Int32,
    /// Unsigned 32-bit integer (`INT UNSIGNED`).
    UInt32,
    /// Signed 64-bit integer (`BIGINT`).
    Int64,
    /// Unsigned 64-bit integer (`BIGINT UNSIGNED`).
    UInt64,
    /// Fixed-length byte string (`CHAR(n)`): shorter values are padded with spaces.
    Char(u16),
    /// Variable-length byte string of at most n bytes (`VARCHAR(n)`).
    VarChar(u16),
}

/// A column.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Column {
    /// Its name.
    pub name: String,
    /// Its type.
    pub ty: ColumnType,
}

/// A value of a column.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Value {
    /// Of a signed integer column.
    Int(i64),
    /// Of an unsigned integer column.
    UInt(u64),
    /// Of a string column.
    Str(Vec<u8>),
}

/// A row: one value per column, in the table's column order.
pub type Row = Vec<Value>;

/// An index: the primary key or a secondary index.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IndexDef {
    /// The 4-byte id every key of the index starts with; unique across all tables of one database.
    pub id: u32,
    /// Its name (`PRIMARY`, `k_1`).
    pub name: String,
    /// Positions of its columns in the table.
    pub columns: Vec<usize>,
}

/// A table's schema.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TableDef {
    /// Its name (`sbtest1`).
    pub name: String,
    /// Its columns.
    pub columns: Vec<Column>,
    /// The primary key.
    pub primary: IndexDef,
    /// Secondary indexes (non-unique).
    pub secondary: Vec<IndexDef>,
}

/// Errors of the table layer.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TableError {
    /// The engine failed.
    #[error("{0}")]
    Engine(#[from] EngineError),
    /// A schema, row or key does not fit the table (wrong count or type, string too long, PK changed by an
    /// update, duplicate index id).
    #[error("{0}")]
    Invalid(String),
    /// A stored record does not decode (damaged data, or written by another schema).
    #[error("corrupt record in {table}: {msg}")]
    Corrupt {
        /// The table.
        table: String,
        /// What is wrong.
        msg: String,
    },
}

/// Result of table operations.
pub type TableResult<T> = Result<T, TableError>;

/// What a session asked of the engine, cumulative (for per-statement figures).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct SessionStats {
    /// Point reads.
    pub gets: u64,
    /// Iterator seeks.
    pub seeks: u64,
    /// Iterator steps.
    pub nexts: u64,
    /// Batches written.
    pub batches: u64,
    /// Entries written (puts and deletes).
    pub entries: u64,
    /// Key and value bytes written.
    pub bytes_written: u64,
}

/// A table: its schema and its row locks.
pub struct Table {
    def: TableDef,
    locks: locks::RowLocks,
}

impl Table {
    /// A table with schema `def`, checked (column types, index columns, distinct index ids).
    pub fn new(def: TableDef) -> TableResult<Table> {
        let _ = &def;
        todo!()
    }

    /// Its schema.
    pub fn def(&self) -> &TableDef {
        &self.def
    }

    /// The position in `def().secondary` of the secondary index named `name`.
    pub fn index_position(&self, name: &str) -> Option<usize> {
        self.def.secondary.iter().position(|i| i.name == name)
    }

    /// The row locks of this table.
    pub fn locks(&self) -> &locks::RowLocks {
        &self.locks
    }
}

/// One client's connection to the tables of one engine: reusable buffers and batch, the write mode, and
/// counters. Not shared between threads (each client thread has its own).
pub struct Session<'e, E: Engine> {
    engine: &'e E,
    mode: WriteMode,
    batch: E::Batch,
    stats: SessionStats,
}

impl<'e, E: Engine> Session<'e, E> {
    /// A session writing with `mode`.
    pub fn new(engine: &'e E, mode: WriteMode) -> Session<'e, E> {
        Session { engine, mode, batch: engine.new_batch(), stats: SessionStats::default() }
    }

    /// The engine.
    pub fn engine(&self) -> &'e E {
        self.engine
    }

    /// Counters since the session began.
    pub fn stats(&self) -> SessionStats {
        self.stats
    }

    /// Inserts `row` with its index entries in one batch; `false` (and nothing written) when a row with its
    /// primary key exists.
    pub fn insert(&mut self, t: &Table, row: &[Value]) -> TableResult<bool> {
        let _ = (t, row, self.mode);
        todo!()
    }

    /// Inserts `rows` in one batch (a multi-row INSERT, as sysbench's prepare issues); the count inserted.
    /// Rows whose primary key exists are skipped.
    pub fn insert_many(&mut self, t: &Table, rows: &[Row]) -> TableResult<usize> {
        let _ = (t, rows);
        todo!()
    }

    /// Reads the row with primary key `pk` into `out`; `false` when absent.
    pub fn get(&mut self, t: &Table, pk: &[Value], out: &mut Row) -> TableResult<bool> {
        let _ = (t, pk, out);
        todo!()
    }

    /// Calls `f` for each row with `lo <= PK <= hi` in PK order until `f` returns `false`; the count visited.
    pub fn range_pk(
        &mut self,
        t: &Table,
        lo: &[Value],
        hi: &[Value],
        f: &mut dyn FnMut(&Row) -> bool,
    ) -> TableResult<usize> {
        let _ = (t, lo, hi, f);
        todo!()
    }

    /// Calls `f` for each row whose columns of secondary index `index` (a position in `def().secondary`)
    /// equal `key`, in index order (then PK order), until `f` returns `false`; the count visited. Each match
    /// is an index entry followed by a point read of its row.
    pub fn lookup(
        &mut self,
        t: &Table,
        index: usize,
        key: &[Value],
        f: &mut dyn FnMut(&Row) -> bool,
    ) -> TableResult<usize> {
        let _ = (t, index, key, f);
        todo!()
    }

    /// As [`Session::lookup`] for index values in `lo..=hi`.
    pub fn range_index(
        &mut self,
        t: &Table,
        index: usize,
        lo: &[Value],
        hi: &[Value],
        f: &mut dyn FnMut(&Row) -> bool,
    ) -> TableResult<usize> {
        let _ = (t, index, lo, hi, f);
        todo!()
    }

    /// Updates the row with primary key `pk`: under its lock, reads it, lets `f` change it (not its primary
    /// key), and writes the new row and the index entries that changed (the old ones removed with
    /// SingleDelete where the engine has it) in one batch. `false` when no such row.
    pub fn update(&mut self, t: &Table, pk: &[Value], f: &mut dyn FnMut(&mut Row)) -> TableResult<bool> {
        let _ = (t, pk, f);
        todo!()
    }

    /// As [`Session::update`] for every listed primary key, in one batch under all their locks (taken in a
    /// fixed order, so statements never deadlock); the count updated.
    pub fn update_many(&mut self, t: &Table, pks: &[Vec<Value>], f: &mut dyn FnMut(&mut Row)) -> TableResult<usize> {
        let _ = (t, pks, f);
        todo!()
    }

    /// Deletes the row with primary key `pk` and its index entries in one batch; `false` when no such row.
    pub fn delete(&mut self, t: &Table, pk: &[Value]) -> TableResult<bool> {
        let _ = (t, pk);
        todo!()
    }

    /// Reads every row of the table in PK order (a full scan of the PK index) without filling the block
    /// cache, with `readahead_size` bytes of iterator readahead (0: the engine's policy), calling `f` for
    /// each; the count read.
    pub fn full_scan(&mut self, t: &Table, readahead_size: usize, f: &mut dyn FnMut(&Row)) -> TableResult<u64> {
        let _ = (t, readahead_size, f);
        todo!()
    }
}
