//! Row locks (SKELETON, issue 13: being written).

/// The row locks of one table.
#[derive(Debug, Default)]
pub struct RowLocks {}
