//! Write stalls: whether the LSM's shape stops or slows writes now, for the write path (`write.rs`, which
//! acts on it) and for the event listeners (`on_stall_conditions_changed`, told when the condition changes).

use super::family::FamilyState;
use super::{DbInner, State};
use crate::listener::{Deferred, WriteStallCondition, WriteStallInfo};
use crate::options::Options;
use crate::stats::StallCause;

/// What the state asks of writes.
pub(crate) struct Assessment {
    /// The families whose active memtable is full: the next write switches them (or waits).
    pub(crate) mem_full: Vec<u32>,
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
/// Every family's assessment (each under its own options) folded into one: the families whose memtable is
/// full, and the first stop and slowdown cause found, the default family first.
pub(crate) fn assess_all(st: &mut State) -> Assessment {
    let mut all = Assessment { mem_full: Vec::new(), stop: None, slow: None };
    let State { fams, vs, .. } = st;
    for (id, f) in fams.iter_mut() {
        let Some(v) = vs.current_of(*id) else { continue };
        let (l0, pending) = f.shape.get(v, &f.fam);
        let a = assess(l0, pending, f, &f.fam.opts);
        if a.mem_full {
            all.mem_full.push(*id);
        }
        all.stop = all.stop.or(a.stop);
        all.slow = all.slow.or(a.slow);
    }
    all
}

/// One family's part of [`assess_all`].
struct One {
    mem_full: bool,
    stop: Option<StallCause>,
    slow: Option<StallCause>,
}

/// `l0`: L0 files (sorted runs under universal compaction; none under FIFO, which has no L0 stalls, as in
/// RocksDB); `pending`: the pending compaction bytes (0 without limits), both from [`ShapeMemo`](super::family::ShapeMemo).
fn assess(l0: Option<usize>, pending: u64, f: &FamilyState, o: &Options) -> One {
    let mem_full = f.mem.approximate_memory_usage() >= o.write_buffer_size;
    let auto = !o.disable_auto_compactions;
    let stop = if mem_full && f.imm.len() + 1 >= o.max_write_buffer_number {
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
    } else if f.imm.len() + 1 >= o.max_write_buffer_number && o.max_write_buffer_number > 3 {
        Some(StallCause::MemtableSlowdown)
    } else {
        None
    };
    One { mem_full, stop, slow }
}

/// Records the condition `a` (or the state's, when `None`) and queues a listener event when it changed.
/// REQUIRES: `st` locked.
pub(crate) fn note(inner: &DbInner, st: &mut State, a: Option<&Assessment>) {
    if !inner.listeners.any() {
        return;
    }
    let current = match a {
        Some(a) => a.condition(),
        None => assess_all(st).condition(),
    };
    if current != st.stall {
        let previous = std::mem::replace(&mut st.stall, current);
        inner.listeners.defer(Deferred::Stall(WriteStallInfo { current, previous }));
        inner.bg_cv.notify_all();
    }
}
