//! Tables on keys, as MyRocks stores them: rows and secondary indexes as key-value entries of any
//! [`Engine`], so the table workloads (sysbench, the insert benchmark) run on ShaleDB and RocksDB alike.
//!
//! A primary-key record is `index id (u32 BE) | PK columns (order-preserving)` -> the row's other columns; a
//! secondary-index record is `index id | index columns | PK columns` -> empty. The encodings are in
//! [`encoding`] and their grammar in docs/format/table.md. Every statement is one atomic batch; statements
//! that change a row hold its lock in [`locks::RowLocks`] from the read of the old row to the write of the
//! new one, so two clients updating one row never lose an update.

use crate::engine::{Engine, EngineBatch, EngineError, EngineIter, IterOptions, WriteMode};

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

impl SessionStats {
    /// Adds `other`'s counts to these (a step's threads add up).
    pub fn add(&mut self, other: &SessionStats) {
        self.gets += other.gets;
        self.seeks += other.seeks;
        self.nexts += other.nexts;
        self.batches += other.batches;
        self.entries += other.entries;
        self.bytes_written += other.bytes_written;
    }
}

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

/// Copies `src` into `dst`, reusing `dst`'s string buffers.
fn copy_row(dst: &mut Row, src: &[Value]) {
    dst.truncate(src.len());
    for (i, v) in src.iter().enumerate() {
        if i == dst.len() {
            dst.push(v.clone());
            continue;
        }
        match v {
            Value::Str(s) => encoding::set_str(&mut dst[i], s),
            other => dst[i] = other.clone(),
        }
    }
}

/// One client's connection to the tables of one engine: reusable buffers and batch, the write mode, and
/// counters. Not shared between threads (each client thread has its own).
pub struct Session<'e, E: Engine> {
    engine: &'e E,
    mode: WriteMode,
    batch: E::Batch,
    stats: SessionStats,
    /// Key and value bytes added to `batch` since it was cleared.
    pending_bytes: u64,
    /// Scratch: a record key, a second key, a bound, a value read, a value written.
    key: Vec<u8>,
    key2: Vec<u8>,
    bound: Vec<u8>,
    val: Vec<u8>,
    val2: Vec<u8>,
    /// Scratch: the old and the new row of an update, a decoded row.
    old_row: Row,
    new_row: Row,
    row: Row,
    /// Scratch of multi-row statements: encoded primary keys (concatenated), their spans, lock stripes.
    keys: Vec<u8>,
    spans: Vec<(usize, usize, usize)>,
    stripes: Vec<usize>,
}

impl<'e, E: Engine> Session<'e, E> {
    /// A session writing with `mode`.
    pub fn new(engine: &'e E, mode: WriteMode) -> Session<'e, E> {
        Session {
            engine,
            mode,
            batch: engine.new_batch(),
            stats: SessionStats::default(),
            pending_bytes: 0,
            key: Vec::with_capacity(64),
            key2: Vec::with_capacity(64),
            bound: Vec::with_capacity(64),
            val: Vec::with_capacity(256),
            val2: Vec::with_capacity(256),
            old_row: Vec::new(),
            new_row: Vec::new(),
            row: Vec::new(),
            keys: Vec::new(),
            spans: Vec::new(),
            stripes: Vec::new(),
        }
    }

    /// The engine.
    pub fn engine(&self) -> &'e E {
        self.engine
    }

    /// Counters since the session began.
    pub fn stats(&self) -> SessionStats {
        self.stats
    }

    fn begin(&mut self) {
        self.batch.clear();
        self.pending_bytes = 0;
    }

    fn put(&mut self, key: &[u8], value: &[u8]) {
        self.pending_bytes += (key.len() + value.len()) as u64;
        self.batch.put(key, value);
    }

    /// Writes the statement's batch (nothing when empty).
    fn commit(&mut self) -> TableResult<()> {
        if self.batch.is_empty() {
            return Ok(());
        }
        self.engine.write(self.mode, &self.batch)?;
        self.stats.batches += 1;
        self.stats.entries += self.batch.len() as u64;
        self.stats.bytes_written += self.pending_bytes;
        self.batch.clear();
        self.pending_bytes = 0;
        Ok(())
    }

    /// Point read of `key` into `self.val`.
    fn read(&mut self, key_is_key2: bool) -> TableResult<bool> {
        self.stats.gets += 1;
        let k = if key_is_key2 { &self.key2 } else { &self.key };
        Ok(self.engine.get(k, &mut self.val)?)
    }

    /// Adds the records of `row` (checked, PK record key in `self.key`) to the batch.
    fn add_row(&mut self, t: &Table, row: &[Value]) {
        let mut val = std::mem::take(&mut self.val2);
        t.row_value(row, &mut val);
        let key = std::mem::take(&mut self.key);
        self.put(&key, &val);
        self.key = key;
        let mut ik = std::mem::take(&mut self.key2);
        for idx in &t.def.secondary {
            t.index_entry_key(idx, row, &mut ik);
            self.put(&ik, &[]);
        }
        self.key2 = ik;
        self.val2 = val;
    }

    /// Inserts `row` with its index entries in one batch; `false` (and nothing written) when a row with its
    /// primary key exists.
    pub fn insert(&mut self, t: &Table, row: &[Value]) -> TableResult<bool> {
        t.check_row(row)?;
        t.row_pk_key(row, &mut self.key);
        let _lock = t.locks.lock(t.def.primary.id, &self.key[4..]);
        if self.read(false)? {
            return Ok(false);
        }
        self.begin();
        self.add_row(t, row);
        self.commit()?;
        Ok(true)
    }

    /// Encodes the primary keys into `self.keys` and `self.spans` (`(start, end, position in the list)`),
    /// sorted by key with duplicates removed (the first listed kept), and their lock stripes into
    /// `self.stripes`.
    fn collect_keys<'v>(&mut self, t: &Table, pks: impl Iterator<Item = &'v [Value]>, rows: bool) -> TableResult<()> {
        self.keys.clear();
        self.spans.clear();
        for pk in pks {
            let start = self.keys.len();
            if rows {
                t.check_row(pk)?;
                t.row_pk_key(pk, &mut self.key);
            } else {
                t.pk_key(pk, &mut self.key)?;
            }
            self.keys.extend_from_slice(&self.key);
            self.spans.push((start, self.keys.len(), self.spans.len()));
        }
        let keys = &self.keys;
        // Stable: among equal keys the first listed stays first (and is the one kept).
        self.spans.sort_by(|a, b| keys[a.0..a.1].cmp(&keys[b.0..b.1]));
        self.spans.dedup_by(|a, b| keys[a.0..a.1] == keys[b.0..b.1]);
        self.stripes.clear();
        let id = t.def.primary.id;
        self.stripes.extend(self.spans.iter().map(|s| t.locks.stripe(id, &keys[s.0 + 4..s.1])));
        Ok(())
    }

    /// Inserts `rows` in one batch (a multi-row INSERT, as sysbench's prepare issues); the count inserted.
    /// Rows whose primary key exists are skipped.
    pub fn insert_many(&mut self, t: &Table, rows: &[Row]) -> TableResult<usize> {
        self.collect_keys(t, rows.iter().map(|r| &r[..]), true)?;
        let _locks = t.locks.lock_stripes(&mut self.stripes);
        self.begin();
        let mut inserted = 0;
        for i in 0..self.spans.len() {
            let (a, b, pos) = self.spans[i];
            self.key.clear();
            self.key.extend_from_slice(&self.keys[a..b]);
            if self.read(false)? {
                continue;
            }
            self.add_row(t, &rows[pos]);
            inserted += 1;
        }
        self.commit()?;
        Ok(inserted)
    }

    /// Reads the row with primary key `pk` into `out`; `false` when absent.
    pub fn get(&mut self, t: &Table, pk: &[Value], out: &mut Row) -> TableResult<bool> {
        t.pk_key(pk, &mut self.key)?;
        if !self.read(false)? {
            return Ok(false);
        }
        t.decode_record(&self.key, &self.val, out)?;
        Ok(true)
    }

    /// Sets `self.key` to `lower` and `self.bound` to the exclusive upper bound for values `lo..=hi` of `idx`;
    /// `false` when the range is empty.
    fn bounds(&mut self, t: &Table, idx: &IndexDef, lo: &[Value], hi: &[Value]) -> TableResult<bool> {
        t.index_prefix(idx, lo, &mut self.key)?;
        t.index_prefix(idx, hi, &mut self.key2)?;
        if !encoding::prefix_successor(&self.key2, &mut self.bound) {
            // Unreachable for ids below u32::MAX (the id is the first byte that can grow); the whole key space
            // past `lower` otherwise.
            self.bound.clear();
        }
        Ok(self.bound.is_empty() || self.key < self.bound)
    }

    /// Calls `f` for each row with `lo <= PK <= hi` in PK order until `f` returns `false`; the count visited.
    /// `lo` and `hi` may give the first columns of the primary key only (a prefix range).
    pub fn range_pk(
        &mut self,
        t: &Table,
        lo: &[Value],
        hi: &[Value],
        f: &mut dyn FnMut(&Row) -> bool,
    ) -> TableResult<usize> {
        if !self.bounds(t, &t.def.primary, lo, hi)? {
            return Ok(0);
        }
        let engine = self.engine;
        let upper = if self.bound.is_empty() { None } else { Some(&self.bound[..]) };
        let mut it = engine.iter_with(&IterOptions::bounded(Some(&self.key), upper));
        it.seek(&self.key);
        self.stats.seeks += 1;
        let mut n = 0;
        while it.valid() {
            t.decode_record(it.key(), it.value(), &mut self.row)?;
            n += 1;
            if !f(&self.row) {
                break;
            }
            it.next();
            self.stats.nexts += 1;
        }
        it.status()?;
        Ok(n)
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
        self.range_index(t, index, key, key, f)
    }

    /// As [`Session::lookup`] for index values in `lo..=hi` (`lo`, `hi`: the first columns of the index, one
    /// to all). There is no snapshot across the index scan and the point reads (as with MyRocks at READ
    /// COMMITTED): an entry whose row is gone by the time of its point read (deleted concurrently), or whose
    /// row's index columns changed meanwhile, is skipped.
    pub fn range_index(
        &mut self,
        t: &Table,
        index: usize,
        lo: &[Value],
        hi: &[Value],
        f: &mut dyn FnMut(&Row) -> bool,
    ) -> TableResult<usize> {
        let Some(idx) = t.def.secondary.get(index) else {
            return Err(t.invalid(format_args!("no secondary index at position {index}")));
        };
        if !self.bounds(t, idx, lo, hi)? {
            return Ok(0);
        }
        let engine = self.engine;
        let upper = if self.bound.is_empty() { None } else { Some(&self.bound[..]) };
        let mut it = engine.iter_with(&IterOptions::bounded(Some(&self.key), upper));
        it.seek(&self.key);
        self.stats.seeks += 1;
        let mut n = 0;
        while it.valid() {
            let suffix = t.entry_pk_suffix(idx, it.key())?;
            self.key2.clear();
            encoding::encode_index_id(t.def.primary.id, &mut self.key2);
            self.key2.extend_from_slice(suffix);
            if self.read(true)? {
                t.decode_record(&self.key2, &self.val, &mut self.row)?;
                // The point read sees the newest row, the iterator an older state: a row whose entry moved
                // meanwhile (an update of its index columns) is skipped, so every row passed to `f` matches.
                t.index_entry_key(idx, &self.row, &mut self.val2);
                if self.val2[..] == *it.key() {
                    n += 1;
                    if !f(&self.row) {
                        break;
                    }
                }
            }
            it.next();
            self.stats.nexts += 1;
        }
        it.status()?;
        Ok(n)
    }

    /// Under the caller's lock of the row whose PK record key is in `self.key`: reads it, applies `f`, and adds
    /// the changed records to the batch. `false` when no such row. An update that changes nothing writes
    /// nothing (as MySQL skips unchanged rows) but counts as done.
    fn update_locked(&mut self, t: &Table, f: &mut dyn FnMut(&mut Row)) -> TableResult<bool> {
        if !self.read(false)? {
            return Ok(false);
        }
        t.decode_record(&self.key, &self.val, &mut self.old_row)?;
        copy_row(&mut self.new_row, &self.old_row);
        f(&mut self.new_row);
        t.check_row(&self.new_row)?;
        t.row_pk_key(&self.new_row, &mut self.key2);
        if self.key2 != self.key {
            return Err(t.invalid("an update may not change the primary key"));
        }
        t.row_value(&self.new_row, &mut self.val2);
        if self.val2 == self.val {
            return Ok(true);
        }
        let (key, val) = (std::mem::take(&mut self.key), std::mem::take(&mut self.val2));
        self.put(&key, &val);
        (self.key, self.val2) = (key, val);
        // Secondary entries: only those whose key changed are rewritten. The old entry is removed with
        // SingleDelete, valid because an index entry is put exactly once between its deletions: it is put when
        // its row is inserted (the PK was absent, so no entry of that row existed: delete removed them all) or
        // when an update changes the entry's key (so the old key is deleted and the new key did not exist:
        // it differs from the row's current entry, and entries of other rows differ by their PK suffix); an
        // update leaving the entry's key alone does not write it. All of this happens under the row's lock, so
        // no two statements interleave on one row's entries.
        let (mut old_k, mut new_k) = (std::mem::take(&mut self.bound), std::mem::take(&mut self.key2));
        for idx in &t.def.secondary {
            t.index_entry_key(idx, &self.old_row, &mut old_k);
            t.index_entry_key(idx, &self.new_row, &mut new_k);
            if old_k != new_k {
                self.pending_bytes += old_k.len() as u64;
                self.batch.single_delete(&old_k);
                self.put(&new_k, &[]);
            }
        }
        (self.bound, self.key2) = (old_k, new_k);
        Ok(true)
    }

    /// Updates the row with primary key `pk`: under its lock, reads it, lets `f` change it (not its primary
    /// key), and writes the new row and the index entries that changed (the old ones removed with
    /// SingleDelete where the engine has it) in one batch. `false` when no such row.
    pub fn update(&mut self, t: &Table, pk: &[Value], f: &mut dyn FnMut(&mut Row)) -> TableResult<bool> {
        t.pk_key(pk, &mut self.key)?;
        let _lock = t.locks.lock(t.def.primary.id, &self.key[4..]);
        self.begin();
        let found = self.update_locked(t, f);
        if found.is_err() {
            self.begin();
        }
        let found = found?;
        self.commit()?;
        Ok(found)
    }

    /// As [`Session::update`] for every listed primary key, in one batch under all their locks (taken in a
    /// fixed order, so statements never deadlock); the count updated. A key listed twice is updated once (as
    /// `UPDATE ... WHERE id IN (1, 1)` does); rows are updated in PK order.
    pub fn update_many(&mut self, t: &Table, pks: &[Vec<Value>], f: &mut dyn FnMut(&mut Row)) -> TableResult<usize> {
        self.collect_keys(t, pks.iter().map(|p| &p[..]), false)?;
        let _locks = t.locks.lock_stripes(&mut self.stripes);
        self.begin();
        let mut n = 0;
        for i in 0..self.spans.len() {
            let (a, b, _) = self.spans[i];
            self.key.clear();
            self.key.extend_from_slice(&self.keys[a..b]);
            match self.update_locked(t, f) {
                Ok(true) => n += 1,
                Ok(false) => {}
                Err(e) => {
                    self.begin();
                    return Err(e);
                }
            }
        }
        self.commit()?;
        Ok(n)
    }

    /// Deletes the row with primary key `pk` and its index entries in one batch; `false` when no such row.
    ///
    /// The PK record is removed with Delete, not SingleDelete: updates put the same PK record key again and
    /// again, and SingleDelete over several puts is undefined (an older put would reappear once the
    /// SingleDelete and the newest put cancel in a compaction). The exception is a table whose columns are all
    /// in the primary key: its PK record's value is always empty, an update can change nothing (the PK may not
    /// change), so the record is put once between deletions and SingleDelete is valid. This is MyRocks' rule
    /// (facebook/mysql-5.6 issue 64, "Using SingleDelete() in MyRocks": all secondary indexes, and primary
    /// indexes of tables with primary key columns only, with read-modify-write, never blind writes).
    /// Secondary entries: SingleDelete (see the argument in `update_locked`).
    pub fn delete(&mut self, t: &Table, pk: &[Value]) -> TableResult<bool> {
        t.pk_key(pk, &mut self.key)?;
        let _lock = t.locks.lock(t.def.primary.id, &self.key[4..]);
        if !self.read(false)? {
            return Ok(false);
        }
        t.decode_record(&self.key, &self.val, &mut self.old_row)?;
        self.begin();
        self.pending_bytes += self.key.len() as u64;
        if t.pk_only {
            self.batch.single_delete(&self.key);
        } else {
            self.batch.delete(&self.key);
        }
        let mut ik = std::mem::take(&mut self.key2);
        for idx in &t.def.secondary {
            t.index_entry_key(idx, &self.old_row, &mut ik);
            self.pending_bytes += ik.len() as u64;
            self.batch.single_delete(&ik);
        }
        self.key2 = ik;
        self.commit()?;
        Ok(true)
    }

    /// A covering range scan of secondary index `index` (a position in `def().secondary`): calls `f` for each
    /// entry from the first whose index columns are `>= lo` (`lo`: the first columns of the index, one to all)
    /// to the end of the index, in index order, until `f` returns `false`; the count visited. `f` gets the
    /// entry's index columns followed by its primary-key columns, decoded from the entry's key alone: no point
    /// read of the row (what `SELECT <index columns> ... ORDER BY <index columns> LIMIT n` costs on MyRocks
    /// when the index covers the query, as the insert benchmark's queries do).
    pub fn scan_index(
        &mut self,
        t: &Table,
        index: usize,
        lo: &[Value],
        f: &mut dyn FnMut(&Row) -> bool,
    ) -> TableResult<usize> {
        let Some(idx) = t.def.secondary.get(index) else {
            return Err(t.invalid(format_args!("no secondary index at position {index}")));
        };
        t.index_prefix(idx, lo, &mut self.key)?;
        self.key2.clear();
        encoding::encode_index_id(idx.id, &mut self.key2);
        let has_upper = encoding::prefix_successor(&self.key2, &mut self.bound);
        let engine = self.engine;
        let upper = if has_upper { Some(&self.bound[..]) } else { None };
        let mut it = engine.iter_with(&IterOptions::bounded(Some(&self.key), upper));
        it.seek(&self.key);
        self.stats.seeks += 1;
        let width = idx.columns.len() + t.def.primary.columns.len();
        self.row.resize(width, Value::Int(0));
        let mut n = 0;
        while it.valid() {
            let key = it.key();
            let mut k = key.get(4..).unwrap_or_default();
            for (slot, &c) in idx.columns.iter().chain(&t.def.primary.columns).enumerate() {
                encoding::decode_key_value(t.types[c], &mut k, &mut self.row[slot]).map_err(|e| t.corrupt(e))?;
            }
            if !k.is_empty() || key.len() < 4 {
                return Err(t.corrupt(encoding::DecodeError(format!(
                    "{} bytes after the primary key in an entry of index {}",
                    k.len(),
                    idx.name
                ))));
            }
            n += 1;
            if !f(&self.row) {
                break;
            }
            it.next();
            self.stats.nexts += 1;
        }
        it.status()?;
        Ok(n)
    }

    /// Entries and key + value bytes of one index (`None`: the primary key; `Some(i)`: `def().secondary[i]`),
    /// counted by a scan of its key range that does not fill the block cache: the logical size of the index,
    /// for engines that have no approximate size of a key range behind [`Engine`].
    pub fn index_extent(&mut self, t: &Table, index: Option<usize>) -> TableResult<(u64, u64)> {
        let idx = match index {
            None => &t.def.primary,
            Some(i) => {
                t.def.secondary.get(i).ok_or_else(|| t.invalid(format_args!("no secondary index at position {i}")))?
            }
        };
        self.key.clear();
        encoding::encode_index_id(idx.id, &mut self.key);
        let has_upper = encoding::prefix_successor(&self.key, &mut self.bound);
        let engine = self.engine;
        let opts = IterOptions {
            lower: Some(&self.key),
            upper: if has_upper { Some(&self.bound) } else { None },
            readahead_size: 0,
            fill_cache: false,
        };
        let mut it = engine.iter_with(&opts);
        it.seek(&self.key);
        self.stats.seeks += 1;
        let (mut n, mut bytes) = (0u64, 0u64);
        while it.valid() {
            n += 1;
            bytes += (it.key().len() + it.value().len()) as u64;
            it.next();
            self.stats.nexts += 1;
        }
        it.status()?;
        Ok((n, bytes))
    }

    /// Reads every row of the table in PK order (a full scan of the PK index) without filling the block
    /// cache, with `readahead_size` bytes of iterator readahead (0: the engine's policy), calling `f` for
    /// each; the count read.
    pub fn full_scan(&mut self, t: &Table, readahead_size: usize, f: &mut dyn FnMut(&Row)) -> TableResult<u64> {
        self.key.clear();
        encoding::encode_index_id(t.def.primary.id, &mut self.key);
        let has_upper = encoding::prefix_successor(&self.key, &mut self.bound);
        let engine = self.engine;
        let opts = IterOptions {
            lower: Some(&self.key),
            upper: if has_upper { Some(&self.bound) } else { None },
            readahead_size,
            fill_cache: false,
        };
        let mut it = engine.iter_with(&opts);
        it.seek(&self.key);
        self.stats.seeks += 1;
        let mut n = 0u64;
        while it.valid() {
            t.decode_record(it.key(), it.value(), &mut self.row)?;
            n += 1;
            f(&self.row);
            it.next();
            self.stats.nexts += 1;
        }
        it.status()?;
        Ok(n)
    }
}

#[cfg(test)]
mod tests;
