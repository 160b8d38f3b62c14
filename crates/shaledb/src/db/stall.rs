//! Write stalls: whether the LSM's shape stops or slows writes now, for the write path (`write.rs`, which
//! acts on it) and for the event listeners (`on_stall_conditions_changed`, told when the condition changes).

use super::{DbInner, State};
use crate::listener::{Deferred, WriteStallCondition, WriteStallInfo};
use crate::options::Options;
use crate::stats::StallCause;

/// What the state asks of writes.
pub(crate) struct Assessment {
    /// The active memtable is full: the next write switches it (or waits).
    pub(crate) mem_full: bool,
    /// Writes must wait, and why.
    pub(crate) stop: Option<StallCause>,
    /// Writes are slowed to `delayed_write_rate`, and why.
    pub(crate) slow: Option<StallCause>,
}

impl Assessment {
    pub(crate) fn condition(&self) -> WriteStallCondition {
        if self.stop.is_some() {
            WriteStallCondition::Stopped
        } else if self.slow.is_some() {
            WriteStallCondition::Delayed
        } else {
            WriteStallCondition::Normal
        }
    }
}

/// Stops: the memtables are all full (always), level 0 reached `level0_stop_writes_trigger` or the pending
/// compaction bytes the hard limit (unless automatic compactions are off). Slowdowns (unless automatic
/// compactions are off): level 0 reached `level0_slowdown_writes_trigger`, the pending bytes the soft limit,
/// or, with more than 3 memtables allowed, all but the active one are waiting for a flush.
pub(crate) fn assess(st: &State, o: &Options) -> Assessment {
    let v = st.vs.current();
    // L0 files (sorted runs under universal compaction; no L0 stalls under FIFO, as in RocksDB).
    let l0 = crate::picker::l0_delay_trigger_count(v, o);
    let pending = if o.soft_pending_compaction_bytes_limit > 0 || o.hard_pending_compaction_bytes_limit > 0 {
        crate::picker::pending_compaction_bytes(v, o)
    } else {
        0
    };
    let mem_full = st.mem.approximate_memory_usage() >= o.write_buffer_size;
    let auto = !o.disable_auto_compactions;
    let stop = if mem_full && st.imm.len() + 1 >= o.max_write_buffer_number {
        Some(StallCause::MemtableStop)
    } else if auto && l0.is_some_and(|n| n >= o.level0_stop_writes_trigger) {
        Some(StallCause::L0Stop)
    } else if auto && o.hard_pending_compaction_bytes_limit > 0 && pending >= o.hard_pending_compaction_bytes_limit {
        Some(StallCause::PendingStop)
    } else {
        None
    };
    let slow = if !auto {
        None
    } else if l0.is_some_and(|n| n >= o.level0_slowdown_writes_trigger) {
        Some(StallCause::L0Slowdown)
    } else if o.soft_pending_compaction_bytes_limit > 0 && pending >= o.soft_pending_compaction_bytes_limit {
        Some(StallCause::PendingSlowdown)
    } else if st.imm.len() + 1 >= o.max_write_buffer_number && o.max_write_buffer_number > 3 {
        Some(StallCause::MemtableSlowdown)
    } else {
        None
    };
    Assessment { mem_full, stop, slow }
}

/// Records the condition `a` (or the state's, when `None`) and queues a listener event when it changed.
/// REQUIRES: `st` locked.
pub(crate) fn note(inner: &DbInner, st: &mut State, a: Option<&Assessment>) {
    if !inner.listeners.any() {
        return;
    }
    let current = match a {
        Some(a) => a.condition(),
        None => assess(st, &inner.opts).condition(),
    };
    if current != st.stall {
        let previous = std::mem::replace(&mut st.stall, current);
        inner.listeners.defer(Deferred::Stall(WriteStallInfo { current, previous }));
        inner.bg_cv.notify_all();
    }
}
