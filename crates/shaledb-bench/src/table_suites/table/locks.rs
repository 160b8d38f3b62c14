//! Row locks: a fixed table of striped mutexes, a row's stripe chosen by hashing its index id and encoded
//! primary key. Two rows may share a stripe (then they serialise, which is only slower); one row always maps to
//! the same stripe, so two statements changing one row never interleave. A statement locking several rows takes
//! their stripes in increasing index order, each once, so any two statements wait for each other in one order and
//! never deadlock. A guard releases its stripes when dropped.

use parking_lot::{Mutex, MutexGuard};

/// Stripes in a table's lock table (a power of two).
pub const STRIPES: usize = 1024;

/// The row locks of one table.
pub struct RowLocks {
    stripes: Box<[Mutex<()>]>,
}

impl std::fmt::Debug for RowLocks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RowLocks").field("stripes", &self.stripes.len()).finish()
    }
}

impl Default for RowLocks {
    fn default() -> Self {
        RowLocks { stripes: (0..STRIPES).map(|_| Mutex::new(())).collect() }
    }
}

/// One held row lock.
#[must_use = "the lock is released when the guard is dropped"]
pub struct RowGuard<'a> {
    _guard: MutexGuard<'a, ()>,
}

/// Several held row locks.
#[must_use = "the locks are released when the guard is dropped"]
pub struct RowsGuard<'a> {
    _guards: Vec<MutexGuard<'a, ()>>,
}

impl RowsGuard<'_> {
    /// Stripes held.
    pub fn len(&self) -> usize {
        self._guards.len()
    }

    /// Whether no stripe is held.
    pub fn is_empty(&self) -> bool {
        self._guards.is_empty()
    }
}

impl RowLocks {
    /// The stripe of the row with index id `index` and encoded primary key `pk` (FNV-1a, then a final mix).
    #[inline]
    pub fn stripe(&self, index: u32, pk: &[u8]) -> usize {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for &b in index.to_be_bytes().iter().chain(pk) {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
        h ^= h >> 29;
        h = h.wrapping_mul(0xbf58_476d_1ce4_e5b9);
        h ^= h >> 32;
        (h as usize) & (self.stripes.len() - 1)
    }

    /// Locks one row, waiting for its stripe.
    pub fn lock(&self, index: u32, pk: &[u8]) -> RowGuard<'_> {
        RowGuard { _guard: self.stripes[self.stripe(index, pk)].lock() }
    }

    /// Locks the stripes listed in `stripes` (values from [`RowLocks::stripe`]): sorts and deduplicates the list
    /// in place, then takes them in increasing order. Values out of range are reduced modulo the stripe count.
    pub fn lock_stripes(&self, stripes: &mut Vec<usize>) -> RowsGuard<'_> {
        let mask = self.stripes.len() - 1;
        for s in stripes.iter_mut() {
            *s &= mask;
        }
        stripes.sort_unstable();
        stripes.dedup();
        RowsGuard { _guards: stripes.iter().map(|&s| self.stripes[s].lock()).collect() }
    }

    /// Locks every row of `pks` (encoded primary keys of index `index`) in the fixed order.
    pub fn lock_many<'k>(&self, index: u32, pks: impl IntoIterator<Item = &'k [u8]>) -> RowsGuard<'_> {
        let mut stripes: Vec<usize> = pks.into_iter().map(|pk| self.stripe(index, pk)).collect();
        self.lock_stripes(&mut stripes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn one_row_one_stripe_and_dedup() {
        let l = RowLocks::default();
        assert_eq!(l.stripe(1, b"abc"), l.stripe(1, b"abc"));
        // A row listed twice (or two rows on one stripe) is locked once: no self-deadlock.
        let g = l.lock_many(1, [&b"abc"[..], b"abc", b"x"]);
        assert!(g.len() == 1 || g.len() == 2);
        drop(g);
        let _g = l.lock(1, b"abc");
    }

    #[test]
    fn stripes_spread() {
        let l = RowLocks::default();
        let used: std::collections::HashSet<usize> = (0u32..4096).map(|i| l.stripe(7, &i.to_be_bytes())).collect();
        assert!(used.len() > STRIPES / 2, "only {} stripes used", used.len());
    }

    #[test]
    fn opposite_orders_do_not_deadlock() {
        let l = Arc::new(RowLocks::default());
        let keys: Vec<[u8; 4]> = (0u32..64).map(|i| i.to_be_bytes()).collect();
        let mut handles = Vec::new();
        for t in 0..2 {
            let l = Arc::clone(&l);
            let mut keys = keys.clone();
            if t == 1 {
                keys.reverse();
            }
            handles.push(std::thread::spawn(move || {
                for _ in 0..2000 {
                    let _g = l.lock_many(3, keys.iter().map(|k| &k[..]));
                }
            }));
        }
        for h in handles {
            h.join().expect("thread");
        }
    }
}
