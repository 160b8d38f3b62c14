//! The public write batch: several puts, deletes, single deletes, range deletions and merges applied atomically by [`crate::Db::write`].

use crate::ColumnFamily;
use shaledb_format::batch::BatchRep;
use shaledb_format::ikey::ValueKind;

/// A group of updates applied all together or not at all by [`crate::Db::write`]. Keys, values and operands
/// are anything `AsRef<[u8]>`, as for [`crate::Db::put`]; the calls chain.
///
/// ```
/// use shaledb::WriteBatch;
/// # let dir = tempfile::tempdir().unwrap();
/// # let db = shaledb::Db::open(dir.path(), shaledb::Options::default())?;
/// let mut batch = WriteBatch::new();
/// batch.put(b"a", b"1").put("b", "2").delete("c");
/// assert_eq!(batch.count(), 3);
/// db.write(&batch)?;
/// assert_eq!(db.get("b")?, Some(b"2".to_vec()));
///
/// batch.clear(); // reuse the allocation
/// assert!(batch.is_empty());
/// # Ok::<(), shaledb::Error>(())
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WriteBatch {
    pub(crate) rep: BatchRep,
    /// The column families its `_cf` calls named, as `(id, database token)`, checked by [`crate::Db::write`]
    /// against the database written to.
    pub(crate) families: Vec<(u32, u64)>,
}

impl WriteBatch {
    /// An empty batch.
    pub fn new() -> WriteBatch {
        WriteBatch { rep: BatchRep::new(), families: Vec::new() }
    }

    /// An empty batch with room for `bytes` of encoded updates.
    pub fn with_capacity(bytes: usize) -> WriteBatch {
        WriteBatch { rep: BatchRep::with_capacity(bytes), families: Vec::new() }
    }

    /// Sets `key` to `value`.
    pub fn put(&mut self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> &mut Self {
        self.rep.put(key.as_ref(), value.as_ref());
        self
    }

    /// Removes `key`.
    pub fn delete(&mut self, key: impl AsRef<[u8]>) -> &mut Self {
        self.rep.delete(key.as_ref());
        self
    }

    /// Removes `key` with a single deletion: see [`crate::Db::single_delete`] for the contract (the key was put
    /// at most once since its last single deletion, and never merged or deleted with [`WriteBatch::delete`]).
    pub fn single_delete(&mut self, key: impl AsRef<[u8]>) -> &mut Self {
        self.rep.single_delete(key.as_ref());
        self
    }

    /// Deletes every key in `[begin, end)`: see [`crate::Db::delete_range`]. An inverted range (`begin > end`)
    /// makes [`crate::Db::write`] refuse the batch.
    pub fn delete_range(&mut self, begin: impl AsRef<[u8]>, end: impl AsRef<[u8]>) -> &mut Self {
        self.rep.delete_range(begin.as_ref(), end.as_ref());
        self
    }

    /// Records a merge operand for `key` (the database needs `Options::merge_operator`, or
    /// [`crate::Db::write`] refuses the batch).
    ///
    /// ```
    /// use shaledb::{merge, Db, Options, WriteBatch};
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let path = dir.path();
    /// let db = Db::open(path, Options { merge_operator: merge::builtin("stringappend"), ..Options::default() })?;
    /// let mut batch = WriteBatch::new();
    /// batch.put("log", "a").merge("log", "b");
    /// db.write(&batch)?;
    /// assert_eq!(db.get("log")?, Some(b"a,b".to_vec()));
    /// # Ok::<(), shaledb::Error>(())
    /// ```
    pub fn merge(&mut self, key: impl AsRef<[u8]>, operand: impl AsRef<[u8]>) -> &mut Self {
        self.rep.merge(key.as_ref(), operand.as_ref());
        self
    }

    /// [`WriteBatch::put`] in column family `cf`. A batch may write to several families: it is applied all
    /// or nothing, as one write.
    ///
    /// ```
    /// use shaledb::{Db, Options, WriteBatch};
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = Db::open(dir.path(), Options::default())?;
    /// let users = db.create_column_family("users", Options::default())?;
    /// let mut batch = WriteBatch::new();
    /// batch.put("count", "1").put_cf(&users, "ada", "lovelace");
    /// db.write(&batch)?;
    /// assert_eq!(db.get_cf(&users, "ada")?, Some(b"lovelace".to_vec()));
    /// assert_eq!(db.get("ada")?, None); // another family
    /// # Ok::<(), shaledb::Error>(())
    /// ```
    pub fn put_cf(&mut self, cf: &ColumnFamily, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> &mut Self {
        self.rep.push_record(cf.id(), ValueKind::Value, key.as_ref(), value.as_ref());
        self.note_family(cf);
        self
    }

    /// [`WriteBatch::delete`] in column family `cf`.
    pub fn delete_cf(&mut self, cf: &ColumnFamily, key: impl AsRef<[u8]>) -> &mut Self {
        self.rep.push_record(cf.id(), ValueKind::Deletion, key.as_ref(), &[]);
        self.note_family(cf);
        self
    }

    /// [`WriteBatch::single_delete`] in column family `cf`.
    pub fn single_delete_cf(&mut self, cf: &ColumnFamily, key: impl AsRef<[u8]>) -> &mut Self {
        self.rep.push_record(cf.id(), ValueKind::SingleDeletion, key.as_ref(), &[]);
        self.note_family(cf);
        self
    }

    /// [`WriteBatch::delete_range`] in column family `cf`.
    pub fn delete_range_cf(&mut self, cf: &ColumnFamily, begin: impl AsRef<[u8]>, end: impl AsRef<[u8]>) -> &mut Self {
        self.rep.push_record(cf.id(), ValueKind::RangeDeletion, begin.as_ref(), end.as_ref());
        self.note_family(cf);
        self
    }

    /// [`WriteBatch::merge`] in column family `cf` (the family needs a merge operator).
    pub fn merge_cf(&mut self, cf: &ColumnFamily, key: impl AsRef<[u8]>, operand: impl AsRef<[u8]>) -> &mut Self {
        self.rep.push_record(cf.id(), ValueKind::Merge, key.as_ref(), operand.as_ref());
        self.note_family(cf);
        self
    }

    fn note_family(&mut self, cf: &ColumnFamily) {
        let f = (cf.fam.id, cf.fam.db_token);
        if cf.fam.id != 0 && !self.families.contains(&f) {
            self.families.push(f);
        }
    }

    /// Number of updates.
    pub fn count(&self) -> u32 {
        self.rep.count()
    }

    /// True when the batch holds no update.
    pub fn is_empty(&self) -> bool {
        self.rep.count() == 0
    }

    /// Removes every update.
    pub fn clear(&mut self) {
        self.rep.clear();
        self.families.clear();
    }

    /// Encoded size in bytes.
    pub fn approximate_size(&self) -> usize {
        self.rep.approximate_size()
    }

    /// The encoded batch (RocksDB's `WriteBatch::Data`), in the grammar of docs/format/batch.md: what a
    /// replica group proposes and every member applies with [`WriteBatch::from_data`]. Column families are named
    /// by id, so bytes made against one database name the families of the same ids in another.
    ///
    /// ```
    /// use shaledb::WriteBatch;
    /// let mut batch = WriteBatch::new();
    /// batch.put("k", "v").delete("gone");
    /// let copy = WriteBatch::from_data(batch.data().to_vec())?;
    /// assert_eq!(copy.count(), 2);
    /// assert_eq!(copy.data(), batch.data());
    /// assert!(WriteBatch::from_data(b"short".to_vec()).unwrap_err().is_corruption());
    /// # Ok::<(), shaledb::Error>(())
    /// ```
    pub fn data(&self) -> &[u8] {
        self.rep.data()
    }

    /// A batch from bytes made by [`WriteBatch::data`] (RocksDB's `WriteBatch(rep)`), every record and the count
    /// checked first: malformed bytes are [`crate::Error::Corruption`], never a batch. The families its records
    /// name are checked by [`crate::Db::write`] against the database written to, which refuses an id it does not
    /// have.
    pub fn from_data(data: Vec<u8>) -> crate::Result<WriteBatch> {
        Ok(WriteBatch { rep: BatchRep::from_bytes(data)?, families: Vec::new() })
    }
}
