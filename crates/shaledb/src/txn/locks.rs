//! The pessimistic transactions' lock manager: exclusive per-key locks in hashed stripes, waits bounded by a
//! timeout, and deadlock detection over the wait-for graph.
//!
//! A key's lock lives in one of [`STRIPES`] stripes (by the key's hash), each a mutex over a map of locked
//! keys and a condition variable: taking or releasing a lock touches only its stripe, so transactions on
//! unrelated keys never wait on each other. A transaction that must wait records the edge `waiter -> holder`
//! in the wait-for graph (a map: a waiting transaction waits for one holder at a time); when following the
//! holders' own edges leads back to the waiter, waiting would never end, and the lock request fails at once
//! with `Busy` (RocksDB's `Status::Busy` with subcode `kDeadlock`), leaving every lock in place. Lock order:
//! a stripe's mutex, then the graph's; never the other way round.

use parking_lot::{Condvar, Mutex};
use shaledb_vfs::{Error, Result};
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// Number of lock stripes.
pub(crate) const STRIPES: usize = 64;

/// Edges of the wait-for graph followed before a deadlock check gives up (RocksDB's
/// `deadlock_detect_depth`, 50): a longer chain is treated as no deadlock and left to the timeout.
const DETECT_DEPTH: usize = 50;

struct Stripe {
    /// Locked key -> id of the transaction holding it.
    held: Mutex<HashMap<Vec<u8>, u64>>,
    released: Condvar,
}

/// Exclusive key locks for the transactions of one [`crate::TransactionDb`].
pub(crate) struct LockManager {
    stripes: Box<[Stripe]>,
    /// Waiting transaction -> the transaction holding the lock it waits for. Every waiter records its edge,
    /// so a transaction that detects deadlocks sees cycles through ones that do not.
    waits: Mutex<HashMap<u64, u64>>,
}

fn stripe_of(key: &[u8]) -> usize {
    (shaledb_format::bloom::key_hash(key) % STRIPES as u64) as usize
}

impl LockManager {
    pub(crate) fn new() -> LockManager {
        let stripes = (0..STRIPES).map(|_| Stripe { held: Mutex::new(HashMap::new()), released: Condvar::new() });
        LockManager { stripes: stripes.collect(), waits: Mutex::new(HashMap::new()) }
    }

    /// Locks `key` for transaction `txn`, waiting at most `timeout` (`None`: no limit) for its holder to
    /// release it. `Ok(true)`: newly locked; `Ok(false)`: `txn` held it already. `TimedOut` when the wait
    /// passes `timeout`; with `detect`, `Busy` when waiting would close a cycle of waiting transactions.
    pub(crate) fn lock(&self, txn: u64, key: &[u8], timeout: Option<Duration>, detect: bool) -> Result<bool> {
        let stripe = &self.stripes[stripe_of(key)];
        let deadline = timeout.map(|t| Instant::now() + t);
        let mut held = stripe.held.lock();
        loop {
            let holder = match held.get(key) {
                None => {
                    held.insert(key.to_vec(), txn);
                    return Ok(true);
                }
                Some(&h) if h == txn => return Ok(false),
                Some(&h) => h,
            };
            {
                let mut waits = self.waits.lock();
                if detect && closes_cycle(&waits, txn, holder) {
                    return Err(Error::Busy(format!(
                        "deadlock: transaction {txn} would wait for transaction {holder}, which waits (through \
                         others) for {txn}"
                    )));
                }
                waits.insert(txn, holder);
            }
            let timed_out = match deadline {
                Some(d) => stripe.released.wait_until(&mut held, d).timed_out(),
                None => {
                    stripe.released.wait(&mut held);
                    false
                }
            };
            self.waits.lock().remove(&txn);
            if timed_out && held.get(key).is_some_and(|&h| h != txn) {
                let waited = timeout.unwrap_or_default();
                return Err(Error::TimedOut(format!(
                    "lock on a key held by transaction {holder} not released within {} ms",
                    waited.as_millis()
                )));
            }
        }
    }

    /// Releases `key` if `txn` holds it.
    pub(crate) fn unlock(&self, txn: u64, key: &[u8]) {
        let stripe = &self.stripes[stripe_of(key)];
        let mut held = stripe.held.lock();
        if held.get(key) == Some(&txn) {
            held.remove(key);
            stripe.released.notify_all();
        }
    }

    /// Transactions waiting for a lock now.
    #[cfg(test)]
    pub(crate) fn num_waiting(&self) -> usize {
        self.waits.lock().len()
    }

    /// Keys locked now.
    #[cfg(test)]
    pub(crate) fn num_locked(&self) -> usize {
        self.stripes.iter().map(|s| s.held.lock().len()).sum()
    }
}

/// Whether the edge `waiter -> holder` closes a cycle in the wait-for graph `waits`.
fn closes_cycle(waits: &HashMap<u64, u64>, waiter: u64, holder: u64) -> bool {
    let mut cur = holder;
    for _ in 0..DETECT_DEPTH {
        if cur == waiter {
            return true;
        }
        match waits.get(&cur) {
            Some(&next) => cur = next,
            None => return false,
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn a_held_lock_times_out_and_is_granted_once_released() {
        let m = Arc::new(LockManager::new());
        assert!(m.lock(1, b"k", None, true).unwrap());
        assert!(!m.lock(1, b"k", None, true).unwrap(), "re-entrant");
        let e = m.lock(2, b"k", Some(Duration::from_millis(20)), true).unwrap_err();
        assert!(matches!(e, Error::TimedOut(_)), "{e}");
        assert!(m.lock(2, b"other", Some(Duration::ZERO), true).unwrap(), "other keys are free");
        let m2 = m.clone();
        let waiter = std::thread::spawn(move || m2.lock(2, b"k", Some(Duration::from_secs(10)), true));
        std::thread::sleep(Duration::from_millis(20));
        m.unlock(1, b"k");
        assert!(waiter.join().unwrap().unwrap());
        m.unlock(1, b"k"); // not the holder: no effect
        assert_eq!(m.num_locked(), 2);
    }

    #[test]
    fn a_cycle_of_waits_is_refused_as_a_deadlock() {
        let m = Arc::new(LockManager::new());
        m.lock(1, b"a", None, true).unwrap();
        m.lock(2, b"b", None, true).unwrap();
        let m2 = m.clone();
        // 1 waits for 2 (b), without detecting; then 2 asking for a (held by 1) closes the cycle.
        let t1 = std::thread::spawn(move || m2.lock(1, b"b", Some(Duration::from_secs(10)), false));
        while !m.waits.lock().contains_key(&1) {
            std::thread::yield_now();
        }
        let e = m.lock(2, b"a", Some(Duration::from_secs(10)), true).unwrap_err();
        assert!(matches!(e, Error::Busy(ref s) if s.contains("deadlock")), "{e}");
        m.unlock(2, b"b");
        assert!(t1.join().unwrap().unwrap());
    }

    #[test]
    fn without_detection_a_deadlock_ends_by_timeout() {
        let m = Arc::new(LockManager::new());
        m.lock(1, b"a", None, false).unwrap();
        m.lock(2, b"b", None, false).unwrap();
        let m2 = m.clone();
        let t1 = std::thread::spawn(move || m2.lock(1, b"b", Some(Duration::from_millis(50)), false));
        let e = m.lock(2, b"a", Some(Duration::from_millis(50)), false).unwrap_err();
        assert!(matches!(e, Error::TimedOut(_)), "{e}");
        assert!(matches!(t1.join().unwrap(), Err(Error::TimedOut(_)) | Ok(true)));
    }
}
