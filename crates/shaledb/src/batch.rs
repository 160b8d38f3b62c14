//! The public write batch: several puts, deletes and merges applied atomically by [`crate::Db::write`].

use shaledb_format::batch::BatchRep;

/// A group of updates applied all together or not at all.
///
/// ```
/// let mut b = shaledb::WriteBatch::new();
/// b.put(b"a", b"1");
/// b.delete(b"b");
/// assert_eq!(b.count(), 2);
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WriteBatch {
    pub(crate) rep: BatchRep,
}

impl WriteBatch {
    /// An empty batch.
    pub fn new() -> WriteBatch {
        WriteBatch { rep: BatchRep::new() }
    }

    /// An empty batch with room for `bytes` of encoded updates.
    pub fn with_capacity(bytes: usize) -> WriteBatch {
        WriteBatch { rep: BatchRep::with_capacity(bytes) }
    }

    /// Sets `key` to `value`.
    pub fn put(&mut self, key: &[u8], value: &[u8]) -> &mut Self {
        self.rep.put(key, value);
        self
    }

    /// Removes `key`.
    pub fn delete(&mut self, key: &[u8]) -> &mut Self {
        self.rep.delete(key);
        self
    }

    /// Records a merge operand for `key` (needs `Options::merge_operator`).
    pub fn merge(&mut self, key: &[u8], operand: &[u8]) -> &mut Self {
        self.rep.merge(key, operand);
        self
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
        self.rep.clear()
    }

    /// Encoded size in bytes.
    pub fn approximate_size(&self) -> usize {
        self.rep.approximate_size()
    }
}
