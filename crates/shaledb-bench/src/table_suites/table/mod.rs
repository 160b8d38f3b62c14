//! Tables on keys, as MyRocks stores them: rows and secondary indexes as key-value entries of any
//! [`Engine`](crate::engine::Engine), so the table workloads (sysbench, the insert benchmark) run on ShaleDB
//! and RocksDB alike.
//!
//! A primary-key record is `index id (u32 BE) | PK columns (order-preserving)` -> the row's other columns; a
//! secondary-index record is `index id | index columns | PK columns` -> empty. The encodings are in
//! [`encoding`] and their grammar in docs/format/table.md. Every statement is one atomic batch; statements
//! that change a row hold its lock in [`locks::RowLocks`] from the read of the old row to the write of the
//! new one, so two clients updating one row never lose an update.
//!
//! This file holds the schema ([`TableDef`]) and [`Table`] (a schema's keys and records); the statements a
//! client runs on tables are [`Session`]'s, in `session.rs`.

use crate::engine::EngineError;

pub mod encoding;
pub mod locks;
mod session;

pub use session::{Session, SessionStats};

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

impl TableDef {
    /// sysbench's table `sbtest<n>`: `id INT` (PRIMARY, index id `2n`), `k INT` (index `k_1`, id `2n + 1`),
    /// `c CHAR(120)`, `pad CHAR(60)`; ids of different `n` never collide.
    pub fn sbtest(n: u16) -> TableDef {
        let col = |name: &str, ty| Column { name: name.into(), ty };
        let id = 2 * u32::from(n);
        TableDef {
            name: format!("sbtest{n}"),
            columns: vec![
                col("id", ColumnType::Int32),
                col("k", ColumnType::Int32),
                col("c", ColumnType::Char(120)),
                col("pad", ColumnType::Char(60)),
            ],
            primary: IndexDef { id, name: "PRIMARY".into(), columns: vec![0] },
            secondary: vec![IndexDef { id: id + 1, name: "k_1".into(), columns: vec![1] }],
        }
    }
}

/// Errors of the table layer.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TableError {
    /// The engine failed.
    #[error(transparent)]
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

/// A table: its schema and its row locks.
pub struct Table {
    def: TableDef,
    locks: locks::RowLocks,
    /// Column types, by position.
    types: Vec<ColumnType>,
    /// Whether each column is in the primary key (then it is in the key, not in the row value).
    is_pk: Vec<bool>,
    /// Primary key column types, in key order.
    pk_types: Vec<ColumnType>,
    /// Every column is in the primary key (PK records have empty values and are never rewritten).
    pk_only: bool,
}

impl std::fmt::Debug for Table {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Table").field("def", &self.def).finish_non_exhaustive()
    }
}

fn check_index(def: &TableDef, idx: &IndexDef, ids: &mut Vec<u32>, names: &mut Vec<String>) -> TableResult<()> {
    let invalid = |msg: String| Err(TableError::Invalid(format!("table {}: index {}: {msg}", def.name, idx.name)));
    if idx.columns.is_empty() {
        return invalid("no columns".into());
    }
    for (i, &c) in idx.columns.iter().enumerate() {
        if c >= def.columns.len() {
            return invalid(format!("column position {c} out of {} columns", def.columns.len()));
        }
        if idx.columns[..i].contains(&c) {
            return invalid(format!("column {} listed twice", def.columns[c].name));
        }
    }
    if ids.contains(&idx.id) {
        return invalid(format!("index id {} used twice", idx.id));
    }
    if names.contains(&idx.name) {
        return invalid("name used twice".into());
    }
    ids.push(idx.id);
    names.push(idx.name.clone());
    Ok(())
}

impl Table {
    /// A table with schema `def`, checked (column types, index columns, distinct index ids).
    pub fn new(def: TableDef) -> TableResult<Table> {
        if def.columns.is_empty() {
            return Err(TableError::Invalid(format!("table {}: no columns", def.name)));
        }
        for (i, c) in def.columns.iter().enumerate() {
            if def.columns[..i].iter().any(|d| d.name == c.name) {
                return Err(TableError::Invalid(format!("table {}: column {} defined twice", def.name, c.name)));
            }
        }
        let (mut ids, mut names) = (Vec::new(), Vec::new());
        check_index(&def, &def.primary, &mut ids, &mut names)?;
        for idx in &def.secondary {
            check_index(&def, idx, &mut ids, &mut names)?;
        }
        let types: Vec<ColumnType> = def.columns.iter().map(|c| c.ty).collect();
        let mut is_pk = vec![false; types.len()];
        for &c in &def.primary.columns {
            is_pk[c] = true;
        }
        let pk_types = def.primary.columns.iter().map(|&c| types[c]).collect();
        let pk_only = is_pk.iter().all(|&p| p);
        Ok(Table { def, locks: locks::RowLocks::default(), types, is_pk, pk_types, pk_only })
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

    fn corrupt(&self, e: encoding::DecodeError) -> TableError {
        TableError::Corrupt { table: self.def.name.clone(), msg: e.0 }
    }

    fn invalid(&self, msg: impl std::fmt::Display) -> TableError {
        TableError::Invalid(format!("table {}: {msg}", self.def.name))
    }

    /// Checks that `row` is a row of this table.
    pub fn check_row(&self, row: &[Value]) -> TableResult<()> {
        if row.len() != self.types.len() {
            return Err(self.invalid(format_args!(
                "row of {} values, table has {} columns",
                row.len(),
                self.types.len()
            )));
        }
        for (i, (ty, v)) in self.types.iter().zip(row).enumerate() {
            encoding::check_value(*ty, v)
                .map_err(|m| self.invalid(format_args!("column {}: {m}", self.def.columns[i].name)))?;
        }
        Ok(())
    }

    /// Checks `vals` as the first `vals.len()` columns of index `idx` (1 to all of them) and appends
    /// `id | encoded vals` to `out` (cleared first).
    fn index_prefix(&self, idx: &IndexDef, vals: &[Value], out: &mut Vec<u8>) -> TableResult<()> {
        if vals.is_empty() || vals.len() > idx.columns.len() {
            return Err(self.invalid(format_args!(
                "index {} has {} columns, {} values given",
                idx.name,
                idx.columns.len(),
                vals.len()
            )));
        }
        out.clear();
        encoding::encode_index_id(idx.id, out);
        for (&c, v) in idx.columns.iter().zip(vals) {
            let ty = self.types[c];
            encoding::check_value(ty, v).map_err(|m| {
                self.invalid(format_args!("index {} column {}: {m}", idx.name, self.def.columns[c].name))
            })?;
            encoding::encode_key_value(ty, v, out);
        }
        Ok(())
    }

    /// The primary-key record key of primary key `pk` (all PK columns) into `out`.
    pub fn pk_key(&self, pk: &[Value], out: &mut Vec<u8>) -> TableResult<()> {
        if pk.len() != self.def.primary.columns.len() {
            return Err(self.invalid(format_args!(
                "primary key has {} columns, {} values given",
                self.def.primary.columns.len(),
                pk.len()
            )));
        }
        self.index_prefix(&self.def.primary, pk, out)
    }

    /// The primary-key record key of `row` (checked) into `out`.
    fn row_pk_key(&self, row: &[Value], out: &mut Vec<u8>) {
        out.clear();
        encoding::encode_index_id(self.def.primary.id, out);
        for &c in &self.def.primary.columns {
            encoding::encode_key_value(self.types[c], &row[c], out);
        }
    }

    /// The key of `row`'s entry in secondary index `idx` into `out`: `id | index columns | PK columns`.
    /// REQUIRES: `row` passed [`Table::check_row`] or was decoded by [`Table::decode_record`].
    pub(crate) fn index_entry_key(&self, idx: &IndexDef, row: &[Value], out: &mut Vec<u8>) {
        out.clear();
        encoding::encode_index_id(idx.id, out);
        for &c in idx.columns.iter().chain(&self.def.primary.columns) {
            encoding::encode_key_value(self.types[c], &row[c], out);
        }
    }

    /// The row value of `row` into `out`. REQUIRES: as [`Table::index_entry_key`].
    pub(crate) fn row_value(&self, row: &[Value], out: &mut Vec<u8>) {
        out.clear();
        encoding::encode_row_value(&self.types, &self.is_pk, row, out);
    }

    /// Decodes a primary-key record into `row` (resized to the column count, its string buffers reused).
    pub fn decode_record(&self, key: &[u8], value: &[u8], row: &mut Row) -> TableResult<()> {
        row.resize(self.types.len(), Value::Int(0));
        let id = encoding::decode_index_id(key).map_err(|e| self.corrupt(e))?;
        if id != self.def.primary.id {
            return Err(self.corrupt(encoding::DecodeError(format!(
                "primary key record with index id {id}, expected {}",
                self.def.primary.id
            ))));
        }
        let mut k = &key[4..];
        for &c in &self.def.primary.columns {
            encoding::decode_key_value(self.types[c], &mut k, &mut row[c]).map_err(|e| self.corrupt(e))?;
        }
        if !k.is_empty() {
            return Err(self.corrupt(encoding::DecodeError(format!("{} bytes after the primary key", k.len()))));
        }
        encoding::decode_row_value(&self.types, &self.is_pk, value, row).map_err(|e| self.corrupt(e))
    }

    /// The encoded primary key at the end of secondary entry `key` of `idx` (checked: it decodes and fills the
    /// key exactly).
    fn entry_pk_suffix<'k>(&self, idx: &IndexDef, key: &'k [u8]) -> TableResult<&'k [u8]> {
        let mut pos = 4usize;
        if key.len() < pos {
            return Err(self.corrupt(encoding::DecodeError("index entry shorter than its index id".into())));
        }
        for &c in &idx.columns {
            pos += encoding::key_value_len(self.types[c], &key[pos..]).map_err(|e| self.corrupt(e))?;
        }
        let start = pos;
        for ty in &self.pk_types {
            pos += encoding::key_value_len(*ty, &key[pos..]).map_err(|e| self.corrupt(e))?;
        }
        if pos != key.len() {
            return Err(self.corrupt(encoding::DecodeError(format!(
                "{} bytes after the primary key in an entry of index {}",
                key.len() - pos,
                idx.name
            ))));
        }
        Ok(&key[start..])
    }
}

#[cfg(test)]
mod tests;
