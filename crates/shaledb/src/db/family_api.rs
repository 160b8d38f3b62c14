//! The column family API of [`Db`]: opening with families, creating, dropping and listing them, and the
//! `_cf` variants of the reads and writes (family.rs has the model).

use super::family::{ColumnFamily, Family, FamilyState};
use super::{compact, flush, obsolete, write, Db, DbInner, SuperVersion};
use crate::filenames;
use crate::iter::{Cursor, Iter, KeyRange};
use crate::memtable::MemTable;
use crate::options::family::{family_options, ColumnFamilyDescriptor};
use crate::options::limits::check_len;
use crate::options::{Options, ReadOptions, WriteOptions};
use crate::version_set::{VersionSet, DEFAULT_FAMILY_NAME};
use shaledb_format::batch::BatchRep;
use shaledb_format::edit::{check_family_name, VersionEdit};
use shaledb_format::ikey::ValueKind;
use shaledb_vfs::{Error, Result};
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// Refuses a batch naming a family that does not exist (never created, or dropped) or that a handle of another
/// database named, or merging in a family without a merge operator.
pub(super) fn check_batch_families(inner: &DbInner, batch: &crate::WriteBatch) -> Result<()> {
    let st = inner.state.lock();
    for &(id, token) in &batch.families {
        if token != inner.default.db_token || st.fams.get(&id).is_none_or(|f| f.fam.db_token != token) {
            return Err(Error::InvalidArgument(format!(
                "the batch names column family {id} through a handle of another database, or one since dropped"
            )));
        }
    }
    for e in batch.rep.iter() {
        let e = e?;
        if e.family == 0 {
            continue;
        }
        let Some(f) = st.fams.get(&e.family) else {
            return Err(Error::InvalidArgument(format!("column family {} does not exist (dropped?)", e.family)));
        };
        if e.kind == ValueKind::Merge && f.fam.opts.merge_operator.is_none() {
            return Err(Error::InvalidArgument(format!(
                "merge in column family {:?} needs its Options::merge_operator to be set",
                f.fam.name
            )));
        }
    }
    Ok(())
}

/// After a family was created or dropped (durably, under `state`): the text of a new OPTIONS file listing the
/// live families, and the numbers of the file and its temp file, taken from the counter under `state`.
fn options_file_text(inner: &DbInner, st: &mut super::State) -> Result<(String, u64, u64)> {
    let number = st.vs.new_file_number()?;
    let temp = st.vs.new_file_number()?;
    let named: Vec<(&str, &Options)> =
        st.fams.values().filter(|f| f.fam.id != 0).map(|f| (f.fam.name.as_str(), &f.fam.opts)).collect();
    Ok((crate::options_file::render(&inner.opts, &named), number, temp))
}

/// Writes the OPTIONS file of [`options_file_text`] (temp file, fsync, rename, directory fsync, the older ones
/// beyond the newest two removed: D14), holding `options_file` but neither `wal` nor `state`. A failure is
/// returned to the caller of `after`, whose change stands (it is in the MANIFEST); the next open writes the
/// file.
fn write_options_file(inner: &DbInner, after: &str, pending: Result<(String, u64, u64)>) -> Result<()> {
    let written = pending.and_then(|(text, number, temp)| {
        crate::options_file::write_numbered(inner.fs.as_ref(), &inner.dir, &text, number, temp)
    });
    match written {
        Ok((name, removed)) => {
            inner.info_log.log(format_args!("{after}: wrote {name}; removed {removed:?}"));
            Ok(())
        }
        Err(e) => {
            inner.info_log.log(format_args!(
                "{after}: done, but writing its OPTIONS file failed (the next open writes one): {e}"
            ));
            Err(e)
        }
    }
}

fn check_live(inner: &DbInner, cf: &ColumnFamily) -> Result<()> {
    if cf.fam.db_token != inner.default.db_token {
        return Err(Error::InvalidArgument(format!("column family {:?} is a handle of another database", cf.fam.name)));
    }
    if cf.fam.is_dropped() {
        return Err(Error::InvalidArgument(format!("column family {:?} was dropped", cf.fam.name)));
    }
    Ok(())
}

impl Db {
    /// Opens the database in `path` as [`Db::open`] does, with the column families of `families` taking their
    /// options, and creates those that do not exist yet (RocksDB's `create_missing_column_families`). Families
    /// of the database not listed are opened too, with `opts` (RocksDB refuses to open without them; reading
    /// one written with a merge operator then needs it in `opts`). The default family always takes `opts`:
    /// listing `"default"` is an error. Get handles with [`Db::column_family`].
    ///
    /// As the default family's options are checked against the newest OPTIONS file (docs/format/options.md),
    /// so is each live family's: a descriptor whose merge operator differs from the one recorded for that family
    /// (or has none where one is recorded) is `InvalidArgument` naming the family, before anything is written;
    /// a family not listed, opened with `opts`, is refused only for a merge operator of another name.
    /// [`Options::load_latest`] returns every family's recorded options
    /// ([`crate::LoadedOptions::column_family_descriptors`]) to reopen with exactly them.
    ///
    /// ```
    /// use shaledb::{ColumnFamilyDescriptor, Db, Options};
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let path = dir.path();
    /// let small = Options { write_buffer_size: 1 << 20, ..Options::default() };
    /// let db = Db::open_with_column_families(path, Options::default(), vec![ColumnFamilyDescriptor::new("logs", small)])?;
    /// let logs = db.column_family("logs").expect("created at open");
    /// db.put_cf(&logs, "2026-11-24", "started")?;
    /// db.close()?;
    /// assert_eq!(Db::list_column_families(path, Options::default())?, ["default", "logs"]);
    /// # Ok::<(), shaledb::Error>(())
    /// ```
    pub fn open_with_column_families(
        path: impl AsRef<Path>,
        opts: Options,
        families: Vec<ColumnFamilyDescriptor>,
    ) -> Result<Db> {
        check_descriptors(&families)?;
        let inner = super::open::open(path.as_ref(), opts, &families)?;
        let db = Db { inner };
        for d in &families {
            if db.column_family(&d.name).is_none() {
                db.create_column_family(&d.name, d.options.clone())?;
            }
        }
        Ok(db)
    }

    /// The names of the column families of the database in `path`, the default family first, then in the
    /// order they were created. Reads the MANIFEST only; the database may be open elsewhere.
    pub fn list_column_families(path: impl AsRef<Path>, opts: Options) -> Result<Vec<String>> {
        let dir = path.as_ref();
        if !opts.fs.exists(&filenames::current(dir)) {
            return Err(Error::InvalidArgument(format!("{} holds no database", dir.display())));
        }
        let vs = VersionSet::recover(dir, &opts)?;
        Ok(vs.families().values().map(|f| f.name.clone()).collect())
    }

    /// Creates column family `name` with `opts` (the fields listed at [`ColumnFamilyDescriptor::options`] are
    /// the family's own; the rest are the database's) and returns its handle. The creation is durable (a
    /// synced MANIFEST edit, after a sync of the WAL: every write acknowledged before it is durable too) before
    /// it returns, and a new OPTIONS file then lists the family with its options (as RocksDB rewrites it; the
    /// older ones beyond the newest two removed). A name already live is `InvalidArgument`, as is a family
    /// with a different `num_levels`. An error writing the OPTIONS file is returned though the family exists
    /// ([`Db::column_family`] finds it; the next open writes the file).
    ///
    /// ```
    /// use shaledb::{merge, Db, Options};
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = Db::open(dir.path(), Options::default())?;
    /// let counters = db.create_column_family("counters", Options { merge_operator: merge::builtin("uint64add"), ..Options::default() })?;
    /// db.merge_cf(&counters, "hits", 2u64.to_le_bytes())?;
    /// db.merge_cf(&counters, "hits", 3u64.to_le_bytes())?;
    /// assert_eq!(db.get_cf(&counters, "hits")?, Some(5u64.to_le_bytes().to_vec()));
    /// assert!(db.merge("hits", 1u64.to_le_bytes()).is_err()); // the default family has no merge operator
    /// # Ok::<(), shaledb::Error>(())
    /// ```
    pub fn create_column_family(&self, name: &str, opts: Options) -> Result<ColumnFamily> {
        let inner = &self.inner;
        if inner.read_only {
            return Err(super::errors::refused("create_column_family"));
        }
        check_family_name(name).map_err(Error::InvalidArgument)?;
        let fopts = family_options(&inner.opts, &opts)?;
        let options_file = inner.options_file.lock();
        let mut wal = inner.wal.lock();
        // Every write acknowledged before the creation is durable before the creation is (D28).
        super::wal::sync_wal_locked(inner, &mut wal)?;
        let mut st = inner.state.lock();
        if let Some(c) = &st.bg_error {
            return Err(super::errors::read_only_error(c));
        }
        if st.fams.values().any(|f| f.fam.name == name) {
            return Err(Error::InvalidArgument(format!("column family {name:?} exists")));
        }
        let id = st
            .vs
            .max_family
            .checked_add(1)
            .ok_or_else(|| Error::InvalidArgument("every column family id has been used".into()))?;
        // Its records start in the current WAL.
        let edit = VersionEdit {
            family: Some(id),
            family_add: Some(name.to_string()),
            log_number: Some(wal.number),
            ..VersionEdit::default()
        };
        let version = st.vs.log_and_apply(edit).inspect_err(|e| {
            inner.set_bg_error(&mut st, e, crate::listener::BackgroundErrorReason::ManifestWrite);
        })?;
        let mem = Arc::new(MemTable::for_options(wal.number, &fopts).starting_at(wal.next_seq));
        let sv = SuperVersion { mem: mem.clone(), imm: Vec::new(), version: version.clone() };
        let fam = Arc::new(Family::new(id, name.to_string(), fopts, sv, inner.default.db_token));
        st.live_versions.push((id, Arc::downgrade(&version)));
        st.fams.insert(id, FamilyState { fam: fam.clone(), mem, imm: Vec::new(), shape: Default::default() });
        st.rebuild_mems();
        inner.info_log.log(format_args!("created column family {id} ({name:?})"));
        let pending = options_file_text(inner, &mut st);
        drop((st, wal));
        write_options_file(inner, "create_column_family", pending)?;
        drop(options_file);
        Ok(ColumnFamily { fam })
    }

    /// Drops column family `cf`: durable (a synced MANIFEST edit, after a sync of the WAL, as for creation)
    /// before it returns. Its memtables are
    /// discarded and its files deleted once no reader holds them: handles (and iterators) still read what the
    /// family held; writes through them fail. Its id is never reused. Dropping the default family is
    /// `InvalidArgument`, as is dropping twice. A new OPTIONS file then lists the live families without it; an
    /// error writing it is returned though the drop stands (the next open writes the file).
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = shaledb::Db::open(dir.path(), shaledb::Options::default())?;
    /// let tmp = db.create_column_family("tmp", shaledb::Options::default())?;
    /// db.put_cf(&tmp, "k", "v")?;
    /// db.drop_column_family(&tmp)?;
    /// assert!(db.put_cf(&tmp, "k", "v").is_err());
    /// assert!(db.column_family("tmp").is_none());
    /// # Ok::<(), shaledb::Error>(())
    /// ```
    pub fn drop_column_family(&self, cf: &ColumnFamily) -> Result<()> {
        let inner = &self.inner;
        if inner.read_only {
            return Err(super::errors::refused("drop_column_family"));
        }
        let id = cf.fam.id;
        if id == 0 {
            return Err(Error::InvalidArgument("the default column family cannot be dropped".into()));
        }
        let options_file = inner.options_file.lock();
        let mut wal = inner.wal.lock();
        // Every write acknowledged before the drop is durable before the drop is (D28).
        super::wal::sync_wal_locked(inner, &mut wal)?;
        let mut st = inner.state.lock();
        if let Some(c) = &st.bg_error {
            return Err(super::errors::read_only_error(c));
        }
        check_live(inner, cf)?;
        if !st.fams.get(&id).is_some_and(|f| Arc::ptr_eq(&f.fam, &cf.fam)) {
            return Err(Error::InvalidArgument(format!("column family {:?} was dropped", cf.fam.name)));
        }
        let before = st.vs.current_of(id).cloned();
        let edit = VersionEdit { family: Some(id), family_drop: true, ..VersionEdit::default() };
        st.vs.log_and_apply(edit).inspect_err(|e| {
            inner.set_bg_error(&mut st, e, crate::listener::BackgroundErrorReason::ManifestWrite);
        })?;
        cf.fam.dropped.store(true, Ordering::Release);
        st.fams.remove(&id);
        st.rebuild_mems();
        if let Some(v) = before {
            st.obsolete_tables.extend(v.levels.iter().flatten().map(|f| f.number));
        }
        obsolete::delete_obsolete_wals(inner, &st);
        inner.info_log.log(format_args!("dropped column family {id} ({:?})", cf.fam.name));
        inner.bg_cv.notify_all();
        let pending = options_file_text(inner, &mut st);
        drop((st, wal));
        write_options_file(inner, "drop_column_family", pending)?;
        drop(options_file);
        Ok(())
    }

    /// The handle of live column family `name` (`"default"` for the default family).
    pub fn column_family(&self, name: &str) -> Option<ColumnFamily> {
        let st = self.inner.state.lock();
        st.fams.values().find(|f| f.fam.name == name).map(|f| ColumnFamily { fam: f.fam.clone() })
    }

    /// The handle of the default family (id 0), which every call without `_cf` uses.
    pub fn default_column_family(&self) -> ColumnFamily {
        ColumnFamily { fam: self.inner.default.clone() }
    }

    /// Every live column family, by id (the default family first).
    pub fn column_families(&self) -> Vec<ColumnFamily> {
        self.inner.state.lock().fams.values().map(|f| ColumnFamily { fam: f.fam.clone() }).collect()
    }

    /// [`Db::put`] in column family `cf`.
    pub fn put_cf(&self, cf: &ColumnFamily, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> Result<()> {
        self.put_cf_opt(&WriteOptions::default(), cf, key, value)
    }

    /// [`Db::put_opt`] in column family `cf`.
    pub fn put_cf_opt(
        &self,
        opts: &WriteOptions,
        cf: &ColumnFamily,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
    ) -> Result<()> {
        self.write_one(opts, cf, ValueKind::Value, key.as_ref(), value.as_ref())
    }

    /// [`Db::delete`] in column family `cf`.
    pub fn delete_cf(&self, cf: &ColumnFamily, key: impl AsRef<[u8]>) -> Result<()> {
        self.write_one(&WriteOptions::default(), cf, ValueKind::Deletion, key.as_ref(), &[])
    }

    /// [`Db::delete_opt`] in column family `cf`.
    pub fn delete_cf_opt(&self, opts: &WriteOptions, cf: &ColumnFamily, key: impl AsRef<[u8]>) -> Result<()> {
        self.write_one(opts, cf, ValueKind::Deletion, key.as_ref(), &[])
    }

    /// [`Db::single_delete`] in column family `cf` (same contract).
    pub fn single_delete_cf(&self, cf: &ColumnFamily, key: impl AsRef<[u8]>) -> Result<()> {
        self.write_one(&WriteOptions::default(), cf, ValueKind::SingleDeletion, key.as_ref(), &[])
    }

    /// [`Db::delete_range`] in column family `cf`.
    pub fn delete_range_cf(&self, cf: &ColumnFamily, begin: impl AsRef<[u8]>, end: impl AsRef<[u8]>) -> Result<()> {
        let mut b = crate::WriteBatch::new();
        b.delete_range_cf(cf, begin, end);
        check_live(&self.inner, cf)?;
        self.write(&b)
    }

    /// [`Db::merge`] in column family `cf` (which needs a merge operator).
    pub fn merge_cf(&self, cf: &ColumnFamily, key: impl AsRef<[u8]>, operand: impl AsRef<[u8]>) -> Result<()> {
        if cf.fam.opts.merge_operator.is_none() {
            return Err(Error::InvalidArgument(format!(
                "merge in column family {:?} needs its Options::merge_operator to be set",
                cf.fam.name
            )));
        }
        self.write_one(&WriteOptions::default(), cf, ValueKind::Merge, key.as_ref(), operand.as_ref())
    }

    fn write_one(
        &self,
        opts: &WriteOptions,
        cf: &ColumnFamily,
        kind: ValueKind,
        key: &[u8],
        value: &[u8],
    ) -> Result<()> {
        check_live(&self.inner, cf)?;
        check_len(key, value)?;
        let mut b = BatchRep::with_capacity(shaledb_format::batch::HEADER_LEN + key.len() + value.len() + 16);
        b.push_record(cf.fam.id, kind, key, value);
        write::write(&self.inner, b, opts)
    }

    /// [`Db::get`] in column family `cf`.
    pub fn get_cf(&self, cf: &ColumnFamily, key: impl AsRef<[u8]>) -> Result<Option<Vec<u8>>> {
        self.get_cf_opt(&ReadOptions::default(), cf, key)
    }

    /// [`Db::get_opt`] in column family `cf`.
    pub fn get_cf_opt(&self, opts: &ReadOptions, cf: &ColumnFamily, key: impl AsRef<[u8]>) -> Result<Option<Vec<u8>>> {
        let mut out = Vec::new();
        let found = self.get_into_family(&cf.fam, opts, key.as_ref(), &mut out)?;
        Ok(found.then_some(out))
    }

    /// [`Db::iter`] over column family `cf`.
    pub fn iter_cf(&self, cf: &ColumnFamily) -> Iter {
        self.iter_cf_opt(&ReadOptions::default(), cf)
    }

    /// [`Db::iter_opt`] over column family `cf`.
    pub fn iter_cf_opt(&self, opts: &ReadOptions, cf: &ColumnFamily) -> Iter {
        Iter::new(self.cursor_cf_opt(opts, cf))
    }

    /// [`Db::range_opt`] over column family `cf`.
    pub fn range_cf_opt(&self, opts: &ReadOptions, cf: &ColumnFamily, range: impl KeyRange) -> Iter {
        let mut lower = opts.iterate_lower_bound.clone();
        let mut upper = opts.iterate_upper_bound.clone();
        crate::iter::narrow_bounds(&range, &mut lower, &mut upper);
        Iter::new(self.cursor_in_family(&cf.fam, opts, lower, upper))
    }

    /// [`Db::cursor_opt`] over column family `cf`.
    pub fn cursor_cf_opt(&self, opts: &ReadOptions, cf: &ColumnFamily) -> Cursor {
        self.cursor_in_family(&cf.fam, opts, opts.iterate_lower_bound.clone(), opts.iterate_upper_bound.clone())
    }

    /// Writes column family `cf`'s memtables to L0 tables and waits for it ([`Db::flush`] flushes every
    /// family).
    pub fn flush_cf(&self, cf: &ColumnFamily) -> Result<()> {
        check_live(&self.inner, cf)?;
        flush::flush(&self.inner, Some(cf.fam.id))
    }

    /// [`Db::compact_range`] in column family `cf`.
    pub fn compact_range_cf(&self, cf: &ColumnFamily, begin: Option<&[u8]>, end: Option<&[u8]>) -> Result<()> {
        check_live(&self.inner, cf)?;
        compact::compact_range(&self.inner, cf.fam.id, begin, end)
    }
}

/// Refuses descriptors naming the default family (it takes the database's options), a bad name, or a name twice.
pub(super) fn check_descriptors(families: &[ColumnFamilyDescriptor]) -> Result<()> {
    for (i, d) in families.iter().enumerate() {
        if d.name == DEFAULT_FAMILY_NAME {
            return Err(Error::InvalidArgument(
                "the default column family takes the database's options: leave it out of the descriptors".into(),
            ));
        }
        check_family_name(&d.name).map_err(Error::InvalidArgument)?;
        if families[..i].iter().any(|o| o.name == d.name) {
            return Err(Error::InvalidArgument(format!("column family {:?} is listed twice", d.name)));
        }
    }
    Ok(())
}

/// The options of each family `families` describes, by id in `vs`, merged with the database's `opts`; a
/// described family `vs` does not hold is `InvalidArgument` (`what` names the kind of open, which cannot
/// create it).
pub(super) fn described_options(
    opts: &Options,
    vs: &VersionSet,
    families: &[ColumnFamilyDescriptor],
    what: &str,
) -> Result<std::collections::BTreeMap<u32, Options>> {
    check_descriptors(families)?;
    let mut out = std::collections::BTreeMap::new();
    for d in families {
        let Some((id, _)) = vs.families().iter().find(|(_, f)| f.name == d.name) else {
            return Err(Error::InvalidArgument(format!(
                "column family {:?} does not exist, and {what} cannot create it",
                d.name
            )));
        };
        out.insert(*id, family_options(opts, &d.options)?);
    }
    Ok(out)
}
