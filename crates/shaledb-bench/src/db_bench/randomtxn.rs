//! db_bench's `randomtransaction` bookkeeping: the counters its keys hold and RandomTransactionVerify. The
//! workload itself is `Ctx::random_transaction` (workloads.rs); the transactions run in the engine
//! ([`crate::engine::Engine::random_transaction`]).

use crate::db_bench::random::Mt64;
use crate::db_bench::workloads::{err, Budget, Ctx};
use crate::engine::{Engine, EngineBatch, EngineIter, TxnOutcome, TxnStep};
use crate::reporting::recorder::{OpType, ThreadStats};
use crate::{BenchError, Result};

impl<E: Engine> Ctx<'_, E> {
    /// db_bench's RandomTransaction (`RandomTransactionInserter`): an amount in 1..=100; the sets in a random
    /// order; in each, the key `NNNN` (the set's number, from 1, in 4 digits) followed by a random key number in
    /// decimal, read (half the time with `get_for_update`) and written back increased by the amount. One
    /// transaction in 20 is rolled back instead of committed. db_bench's pessimistic transactions also go through
    /// `Prepare` nine times in ten (two-phase commit, which ShaleDB does not have) and single-delete three keys
    /// in four (here: delete); neither changes what is written.
    pub(crate) fn random_transaction(&self, ts: &mut ThreadStats<'_>, rng: &mut Mt64) -> Result<()> {
        let mut budget = Budget::new(self.duration, self.readwrites);
        let sets = self.transaction_sets as usize;
        let (mut done, mut aborts) = (0u64, 0u64);
        let mut order: Vec<usize> = (0..sets).collect();
        let mut keys: Vec<Vec<u8>> = vec![Vec::new(); sets];
        let mut gfu = vec![false; sets];
        let mut value = Vec::new();
        while !budget.done(1) {
            let incr = rng.next_u64() % 100 + 1;
            for i in (1..sets).rev() {
                order.swap(i, (rng.next_u64() % (i as u64 + 1)) as usize);
            }
            for (slot, &set) in order.iter().enumerate() {
                keys[slot] = format!("{:04}{}", set + 1, rng.next_u64() % self.num).into_bytes();
                gfu[slot] = self.transactions && rng.next_u64().is_multiple_of(2);
            }
            if self.transactions {
                let rollback = rng.next_u64().is_multiple_of(20);
                let step = TxnStep { keys: &keys, get_for_update: &gfu, incr, rollback };
                match self.db.random_transaction(self.mode, &step).map_err(|e| err("transaction", self.kind, e))? {
                    TxnOutcome::Committed | TxnOutcome::RolledBack => done += 1,
                    TxnOutcome::Aborted => aborts += 1,
                }
            } else {
                let mut batch = self.db.new_batch();
                for key in &keys {
                    let n = if self.get(ts, 0, key, &mut value)? { parse_counter(key, &value)? } else { 0 };
                    batch.put(key, (n + incr).to_string().as_bytes());
                }
                self.db.write(self.mode, &batch).map_err(|e| err("write", self.kind, e))?;
                done += 1;
            }
            ts.bytes += keys.iter().map(|k| k.len() as u64 + 3).sum::<u64>();
            ts.finished_ops(1, OpType::Others);
        }
        ts.message = if self.transactions {
            format!("( transactions:{done} aborts:{aborts})")
        } else {
            format!("( batches:{done} )")
        };
        Ok(())
    }
}

/// A randomtransaction counter: a decimal number.
pub(crate) fn parse_counter(key: &[u8], value: &[u8]) -> Result<u64> {
    decode_counter(key, value).map_err(|msg| BenchError::engine("randomtransaction", msg.into()))
}

/// A counter's value, or why the value is not one (naming the key), for callers with their own error type.
pub(crate) fn decode_counter(key: &[u8], value: &[u8]) -> std::result::Result<u64, String> {
    std::str::from_utf8(value).ok().and_then(|s| s.parse::<u64>().ok()).ok_or_else(|| {
        format!("key {} holds {:?}, not a decimal number", String::from_utf8_lossy(key), String::from_utf8_lossy(value))
    })
}

/// db_bench's RandomTransactionVerify: every set's keys sum to the same total (each transaction added one
/// amount to one key of every set). Returns the sums, set 1 first.
pub fn random_transaction_sums<E: Engine>(db: &E, sets: u64) -> Result<Vec<u64>> {
    let mut sums = Vec::with_capacity(sets as usize);
    for set in 1..=sets {
        let (lower, upper) = (format!("{set:04}"), format!("{:04}", set + 1));
        // Keys of set 9999 end before ":" (the byte after '9').
        let upper = if set == 9999 { "9999:".to_string() } else { upper };
        let mut it = db.iter(Some(lower.as_bytes()), Some(upper.as_bytes()));
        it.seek_to_first();
        let mut total = 0u64;
        while it.valid() {
            total = total.wrapping_add(parse_counter(it.key(), it.value())?);
            it.next();
        }
        it.status().map_err(|e| BenchError::engine("randomtransaction verify", e))?;
        sums.push(total);
    }
    Ok(sums)
}
