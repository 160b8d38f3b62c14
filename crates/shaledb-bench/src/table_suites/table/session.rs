//! [`Session`]: one client's connection to the tables of one engine, and the statements it runs (insert, get,
//! ranges, updates, deletes, scans), each one atomic batch, holding the changed rows' locks from the read of
//! the old row to the write of the new one.

use super::{encoding, IndexDef, Row, Table, TableResult, Value};
use crate::engine::{Engine, EngineBatch, EngineIter, IterOptions, WriteMode};

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
