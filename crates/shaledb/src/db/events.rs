//! Building the listener infos of flushes and compactions (listener.rs) from the jobs in flush.rs and
//! compact.rs, and calling the listeners when a job is done. Used only when `Options::listeners` is not empty.

use super::{DbInner, State};
use crate::listener::{
    table_info, CompactionJobInfo, FlushJobInfo, FlushReason, TableFileCreationInfo, TableFileCreationReason,
    TableFileInfo, WriteStallCondition,
};
use crate::memtable::MemTable;
use crate::picker::CompactionTask;
use shaledb_format::edit::VersionEdit;
use std::sync::Arc;
use std::time::Duration;

/// The info of a flush of `mems` (oldest first, at least one) about to begin. REQUIRES: `st` locked.
pub(super) fn flush_info(inner: &DbInner, st: &State, mems: &[Arc<MemTable>]) -> FlushJobInfo {
    let full = mems.iter().any(|m| m.approximate_memory_usage() >= inner.opts.write_buffer_size);
    FlushJobInfo {
        job_id: inner.listeners.next_job_id(),
        reason: if full { FlushReason::WriteBufferFull } else { FlushReason::Manual },
        memtable_id: mems.first().map_or(0, |m| m.id()),
        num_memtables: mems.len() as u64,
        num_entries: mems.iter().map(|m| m.len() as u64).sum(),
        num_deletions: mems.iter().map(|m| m.num_deletions() as u64).sum(),
        triggered_writes_slowdown: st.stall == WriteStallCondition::Delayed,
        triggered_writes_stop: st.stall == WriteStallCondition::Stopped,
        output_files: Vec::new(),
        bytes_written: 0,
        duration: Duration::ZERO,
    }
}

/// The info of a compaction about to begin.
pub(super) fn compaction_info(inner: &DbInner, task: &CompactionTask) -> CompactionJobInfo {
    let inputs = task.inputs.iter().map(|f| (task.level, f));
    let output_inputs = task.output_inputs.iter().map(|f| (task.output_level, f));
    CompactionJobInfo {
        job_id: inner.listeners.next_job_id(),
        reason: format!("{:?}", task.reason),
        base_input_level: task.level,
        output_level: task.output_level,
        input_files: inputs.chain(output_inputs).map(|(l, f)| table_info(&inner.dir, l, f)).collect(),
        output_files: Vec::new(),
        trivial_move: task.trivial_move,
        stats: Default::default(),
        error: None,
    }
}

/// The files `edit` adds, when a listener will be told (`wanted`).
pub(super) fn outputs(inner: &DbInner, wanted: bool, edit: &VersionEdit) -> Vec<TableFileInfo> {
    if !wanted {
        return Vec::new();
    }
    edit.new_files.iter().map(|(l, f)| table_info(&inner.dir, *l as usize, f)).collect()
}

fn created(inner: &DbInner, job_id: u64, reason: TableFileCreationReason, files: &[TableFileInfo]) {
    for file in files {
        let info = TableFileCreationInfo { job_id, reason, file: file.clone() };
        inner.listeners.each(|l| l.on_table_file_created(&info));
    }
}

/// Tells the listeners of a finished flush. REQUIRES: no lock held.
pub(super) fn flush_completed(inner: &Arc<DbInner>, info: &FlushJobInfo) {
    inner.listeners.deliver();
    created(inner, info.job_id, TableFileCreationReason::Flush, &info.output_files);
    inner.listeners.each(|l| l.on_flush_completed(info));
}

/// Tells the listeners of a finished (or failed) compaction. REQUIRES: no lock held.
pub(super) fn compaction_completed(inner: &Arc<DbInner>, info: &CompactionJobInfo) {
    inner.listeners.deliver();
    created(inner, info.job_id, TableFileCreationReason::Compaction, &info.output_files);
    inner.listeners.each(|l| l.on_compaction_completed(info));
}
