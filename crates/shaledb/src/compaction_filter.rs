//! Compaction filters: a user callback that keeps, removes or changes values while compactions rewrite them
//! (RocksDB's `CompactionFilter::FilterV2`).
//!
//! **What the filter sees.** For each user key a compaction writes, the filter is called at most once, with the
//! key's *newest* version in the compaction's input, and only when that version
//!
//! - is a value ([`crate::Db::put`]): never a tombstone, and never a merge operand (RocksDB can also hand
//!   operands to `FilterV2` as `kMergeOperand`; ShaleDB does not, so a key whose newest version is an
//!   operand is left alone until a compaction has folded its operands into a value, which the filter then
//!   sees); and
//! - is newer than every live snapshot: a version some snapshot can read is never filtered, so a snapshot's
//!   view never changes (RocksDB's rule before 6.0, when `IgnoreSnapshots()` could be false; later RocksDB
//!   filters regardless of snapshots). Older versions of the key are not shown to the filter (as in RocksDB):
//!   they are either hidden by the newest one and dropped, or kept for a snapshot.
//!
//! Flushes do not call the filter (RocksDB's default, `FilterTableFileCreation(kFlush)` false): a value is
//! filtered the first time a compaction rewrites it. A manual compaction ([`crate::Db::compact_range`]) with a
//! filter (or TTL mode) never moves a file down without rewriting it, as in RocksDB, so every value it passes
//! over is filtered; and it starts by rewriting the files of the last non-empty level in its range in place,
//! so values already at the bottom are filtered too (RocksDB's default for `CompactRange` with a filter,
//! `BottommostLevelCompaction::kIfHaveCompactionFilter`). Automatic compactions filter what they rewrite.
//!
//! **Decisions.** [`Decision::Keep`] writes the version unchanged. [`Decision::ChangeValue`] writes the new
//! value under the same sequence number. [`Decision::Remove`] turns the version into a deletion, as RocksDB
//! does: a deletion still hides the older versions of the key that lie in lower levels, and like any deletion
//! it is dropped where that is safe, that is in a bottommost compaction with nothing older below it. (Dropping
//! the version outright above the bottom would resurrect an older version stored further down.) Removing a
//! key written with [`crate::Db::single_delete`] mixes a deletion into its history, which that contract
//! forbids; as in RocksDB, do not remove such keys from a filter.
//!
//! **Failures.** A filter that panics does not corrupt anything: the compaction stops, removes the files it
//! wrote, and returns `Error::InvalidArgument` naming the filter; the background-error rules then apply (the
//! database turns read-only until reopened, see docs/durability.md). A changed value larger than an entry can
//! hold ([`crate::options::limits::MAX_KEY_VALUE_BYTES`]) fails the compaction the same way.
//!
//! ```
//! use shaledb::compaction_filter::{CompactionFilter, Decision, FilterContext};
//! use shaledb::{Db, Options};
//! use std::sync::Arc;
//!
//! /// Drops every key starting with `tmp:`.
//! struct DropTemporary;
//! impl CompactionFilter for DropTemporary {
//!     fn name(&self) -> &str {
//!         "drop-temporary"
//!     }
//!     fn filter(&self, _cx: &FilterContext, key: &[u8], _value: &[u8]) -> Decision {
//!         if key.starts_with(b"tmp:") { Decision::Remove } else { Decision::Keep }
//!     }
//! }
//!
//! # let dir = tempfile::tempdir().unwrap();
//! let db = Db::open(dir.path(), Options { compaction_filter: Some(Arc::new(DropTemporary)), ..Options::default() })?;
//! db.put("tmp:1", "x")?;
//! db.put("keep", "y")?;
//! db.flush()?;
//! db.compact_range(None, None)?;
//! assert_eq!(db.get("tmp:1")?, None);
//! assert_eq!(db.get("keep")?, Some(b"y".to_vec()));
//! # Ok::<(), shaledb::Error>(())
//! ```

use crate::ttl::Ttl;
use shaledb_vfs::{Error, Result};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

/// What to do with a value (RocksDB's `CompactionFilter::Decision`, the variants ShaleDB implements).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Write the version unchanged.
    Keep,
    /// Delete the key: the version becomes a deletion (dropped where a deletion may be; see the module docs).
    Remove,
    /// Write this value instead, under the same sequence number.
    ChangeValue(Vec<u8>),
}

/// The compaction a filter call belongs to (RocksDB's `CompactionFilter::Context`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FilterContext {
    /// The level the compaction's inputs come from (RocksDB passes this `level` to `FilterV2`).
    pub level: usize,
    /// The level the outputs go to.
    pub output_level: usize,
    /// Every table file of the database is an input.
    pub is_full_compaction: bool,
    /// Started by [`crate::Db::compact_range`] or [`crate::Db::compact_level`].
    pub is_manual_compaction: bool,
    /// No data below the output level overlaps the compaction: a deletion written here hides nothing and is
    /// dropped.
    pub bottommost: bool,
}

/// A user callback run by compactions on the newest value of each key (see the module documentation).
///
/// Called from background threads, possibly from several compactions at once: implementations must be
/// `Send + Sync`, and should be fast and deterministic (a compaction may be retried after a failure).
pub trait CompactionFilter: Send + Sync {
    /// A name for logs and errors.
    fn name(&self) -> &str;
    /// Decides about `value`, the newest version of `key`.
    fn filter(&self, cx: &FilterContext, key: &[u8], value: &[u8]) -> Decision;
}

/// Runs `filter`, turning a panic into an error naming it.
pub(crate) fn call(filter: &dyn CompactionFilter, cx: &FilterContext, key: &[u8], value: &[u8]) -> Result<Decision> {
    catch_unwind(AssertUnwindSafe(|| filter.filter(cx, key, value))).map_err(|panic| {
        let msg = panic
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_default();
        Error::InvalidArgument(format!("compaction filter {:?} panicked: {msg}", filter.name()))
    })
}

/// The filtering of one compaction job: the user's filter, TTL mode's built-in one, or both.
pub(crate) struct JobFilter {
    /// The job's context, handed to the user's filter.
    pub cx: FilterContext,
    /// `Options::compaction_filter`.
    pub user: Option<Arc<dyn CompactionFilter>>,
    /// `Options::ttl`, with the time fixed when the job started.
    pub ttl: Option<(Ttl, u32)>,
}

impl JobFilter {
    /// The filter of a job with context `cx` under `opts`; `None` when there is nothing to run.
    pub(crate) fn for_job(opts: &crate::Options, cx: FilterContext) -> Option<JobFilter> {
        let ttl = opts.ttl.as_ref().map(|t| (t.clone(), t.now()));
        (ttl.is_some() || opts.compaction_filter.is_some()).then(|| JobFilter {
            cx,
            user: opts.compaction_filter.clone(),
            ttl,
        })
    }

    /// The decision about `value`, the newest version of `key`.
    pub(crate) fn decide(&self, key: &[u8], value: &[u8]) -> Result<Decision> {
        match (&self.ttl, &self.user) {
            (Some((ttl, now)), user) => crate::ttl::filter(ttl, *now, user.as_deref(), &self.cx, key, value),
            (None, Some(user)) => call(user.as_ref(), &self.cx, key, value),
            (None, None) => Ok(Decision::Keep),
        }
    }
}
