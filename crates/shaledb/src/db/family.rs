//! Column families: several LSM trees in one database, sharing its WAL, sequence numbers, block cache,
//! background threads and MANIFEST (docs/format/manifest.md, docs/format/batch.md).
//!
//! Each family has its own memtables, version (levels and blob files), options and published
//! [`SuperVersion`]; the default family (id 0, named `default`) is the one every call without a family uses.
//! A write batch may touch several families and is applied all or nothing: one WAL record, one range of
//! sequence numbers. Each family records in the MANIFEST the WAL number from which its writes are not yet in
//! its tables (its log number); recovery replays a WAL record into a family only from there, and a WAL is
//! deleted once it is below every live family's log number.

use super::SuperVersion;
use crate::memtable::MemTable;
use crate::options::Options;
use crate::version::Version;
use arc_swap::ArcSwap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};

/// One column family: what readers and the background jobs need of it.
pub(crate) struct Family {
    pub(crate) id: u32,
    pub(crate) name: String,
    /// The database's options with this family's own fields
    /// ([`family_options`](crate::options::family::family_options)).
    pub(crate) opts: Options,
    /// What readers of this family see.
    pub(crate) sv: ArcSwap<SuperVersion>,
    /// Set once the family's drop is durable: reads of a handle still work on what it held, writes fail.
    pub(crate) dropped: AtomicBool,
    /// The open database it belongs to ([`new_db_token`]): a handle of another database is refused.
    pub(crate) db_token: u64,
}

/// A number no other database opened by this process has: what tells a family handle's database apart.
pub(crate) fn new_db_token() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

impl Family {
    pub(crate) fn new(id: u32, name: String, opts: Options, sv: SuperVersion, db_token: u64) -> Family {
        Family { id, name, opts, sv: ArcSwap::from_pointee(sv), dropped: AtomicBool::new(false), db_token }
    }

    pub(crate) fn is_dropped(&self) -> bool {
        self.dropped.load(Ordering::Acquire)
    }
}

/// A family's write-side state, under the database's state mutex.
pub(crate) struct FamilyState {
    pub(crate) fam: Arc<Family>,
    pub(crate) mem: Arc<MemTable>,
    /// Immutable memtables waiting for flush, newest first.
    pub(crate) imm: Vec<Arc<MemTable>>,
    /// The stall assessment's figures of the family's current version, computed once per version.
    pub(crate) shape: ShapeMemo,
}

/// A family's level-0 count and pending compaction bytes, as of one version under one set of options, for the
/// write-stall assessment (stall.rs): both depend on nothing else, and the write path assesses stalls on every
/// write group, so they are computed once per version (walking the levels for the pending bytes cost about a
/// tenth of a small write's instructions).
/// Weak pointers, so the memo keeps neither alive; an allocation a `Weak` points to is not reused while it
/// lives, so pointer equality identifies the version and the options.
#[derive(Default)]
pub(crate) struct ShapeMemo {
    of: Option<(Weak<Version>, Weak<Family>)>,
    l0: Option<usize>,
    pending: u64,
}

impl ShapeMemo {
    /// `(l0_delay_trigger_count, pending_compaction_bytes)` of `v` under `fam`'s options.
    pub(super) fn get(&mut self, v: &Arc<Version>, fam: &Arc<Family>) -> (Option<usize>, u64) {
        let fresh = self.of.as_ref().is_some_and(|(wv, wf)| {
            std::ptr::eq(wv.as_ptr(), Arc::as_ptr(v)) && std::ptr::eq(wf.as_ptr(), Arc::as_ptr(fam))
        });
        if !fresh {
            let o = &fam.opts;
            self.l0 = crate::picker::l0_delay_trigger_count(v, o);
            self.pending = if o.soft_pending_compaction_bytes_limit > 0 || o.hard_pending_compaction_bytes_limit > 0 {
                crate::picker::pending_compaction_bytes(v, o)
            } else {
                0
            };
            self.of = Some((Arc::downgrade(v), Arc::downgrade(fam)));
        }
        (self.l0, self.pending)
    }
}

/// The memtables writes go into, by family id (sorted; the default family first): what the write leader hands
/// its group, rebuilt whenever a memtable is switched or a family created or dropped.
#[derive(Default)]
pub(crate) struct Mems(pub(crate) Vec<(u32, Arc<MemTable>)>);

impl Mems {
    /// The active memtable of family `id` (`None`: dropped meanwhile; its records are skipped, as if written
    /// before the drop, which is what recovery does with them too).
    pub(crate) fn get(&self, id: u32) -> Option<&Arc<MemTable>> {
        match self.0.first() {
            Some((0, m)) if id == 0 => Some(m),
            _ => self.0.binary_search_by_key(&id, |(i, _)| *i).ok().map(|i| &self.0[i].1),
        }
    }
}

/// A handle on a column family, from [`crate::Db::create_column_family`] or [`crate::Db::column_family`]:
/// cheap to clone, valid for the life of the database. After the family is dropped, writes through it fail
/// with `InvalidArgument`; reads see what the family held.
#[derive(Clone)]
pub struct ColumnFamily {
    pub(crate) fam: Arc<Family>,
}

impl ColumnFamily {
    /// The family's name.
    pub fn name(&self) -> &str {
        &self.fam.name
    }

    /// The family's id: 0 for the default family, never reused after a drop.
    pub fn id(&self) -> u32 {
        self.fam.id
    }

    /// The options the family was opened or created with (database-wide fields are the database's).
    pub fn options(&self) -> &Options {
        &self.fam.opts
    }
}

impl std::fmt::Debug for ColumnFamily {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ColumnFamily").field("id", &self.fam.id).field("name", &self.fam.name).finish()
    }
}
