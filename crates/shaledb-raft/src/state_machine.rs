//! openraft's state machine on an engine database, replaced whole when a snapshot is installed.
//!
//! Files under the state machine's root directory:
//!
//! ```text
//! CURRENT         "data-" generation:decimal "\n": the live data directory, replaced durably (temp + rename)
//! data-<gen>/     an engine database: the applied data in its families, and the family `raft_applied`
//!                 holding "applied" -> record(log_id) and "membership" -> record(membership)
//! snapshot        the last snapshot built or installed, as an archive (snapshot.rs)
//! checkpoint/     a checkpoint being packed (removed when done, or at open)
//! *.tmp           files being replaced (removed at open)
//! ```
//!
//! Applying an entry is one engine batch: the proposal's records, then the applied log id (and membership)
//! in `raft_applied`, last so they win on any key the proposal also wrote. A proposal with tables (a slot
//! copied in, issue 44) has them ingested first (`Shared::ingest_tables`). The engine applies a batch all or
//! nothing and recovers a prefix of its writes (docs/durability.md, D3), so after any crash the data and the
//! applied id agree: an entry is never applied twice nor skipped; openraft re-applies from the log whatever
//! came after the recovered applied id. Apply writes are not synced for that reason; building a snapshot
//! syncs the WAL, since openraft may then purge the log up to the snapshot.
//!
//! Installing a snapshot, crash-safely: the archive is unpacked into `data-<gen+1>` (each file synced, then
//! the directory), opened and checked (its applied id must be the snapshot's), and only then does CURRENT
//! switch to it by temp file + fsync + rename + directory fsync. A crash before the rename leaves the old
//! generation live and the new one an orphan; after it, the old one is the orphan: open removes every
//! `data-*` that CURRENT does not name.

use std::io::Cursor;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use openraft::storage::{RaftSnapshotBuilder, RaftStateMachine, Snapshot};
use openraft::{
    BasicNode, Entry, EntryPayload, LogId, OptionalSend, RaftLogId, StorageError, StorageIOError, StoredMembership,
};
use parking_lot::Mutex;
use shaledb::ingest::IngestExternalFileOptions;
use shaledb::{ColumnFamily, ColumnFamilyDescriptor, Db, Fs, Options, WriteBatch};

use crate::codec::{self, Kind};
use crate::error::{blocking, Error, Result};
use crate::snapshot::{self, Meta};
use crate::{NodeId, Response, TypeConfig};

/// The column family of the state machine's database that holds the applied log id and membership.
pub const APPLIED_FAMILY: &str = "raft_applied";
const APPLIED_KEY: &[u8] = b"applied";
const MEMBERSHIP_KEY: &[u8] = b"membership";
const CURRENT: &str = "CURRENT";
const SNAPSHOT: &str = "snapshot";
const CHECKPOINT: &str = "checkpoint";

type Membership = StoredMembership<NodeId, BasicNode>;

struct Live {
    generation: u64,
    db: Arc<Db>,
    cf: ColumnFamily,
    applied: Option<LogId<NodeId>>,
    membership: Membership,
    /// Snapshots built since open, for unique snapshot ids.
    built: u64,
}

struct Shared {
    root: PathBuf,
    fs: Arc<dyn Fs>,
    opts: Options,
    live: Mutex<Live>,
    /// Tables ingested from proposals since open, and their bytes.
    ingested: [AtomicU64; 2],
}

fn data_dir_name(generation: u64) -> String {
    format!("data-{generation}")
}

fn parse_current(root: &Path, text: &[u8]) -> Result<u64> {
    std::str::from_utf8(text)
        .ok()
        .and_then(|t| t.strip_prefix("data-"))
        .and_then(|t| t.strip_suffix('\n'))
        .filter(|t| !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()))
        .and_then(|t| t.parse::<u64>().ok())
        .ok_or_else(|| Error::corruption(root, format!("{CURRENT} holds {text:?}, not \"data-<generation>\\n\"")))
}

fn open_data(opts: &Options, dir: &Path) -> Result<(Db, ColumnFamily)> {
    let db = Db::open_with_column_families(
        dir,
        opts.clone(),
        vec![ColumnFamilyDescriptor::new(APPLIED_FAMILY, opts.clone())],
    )?;
    let cf = db
        .column_family(APPLIED_FAMILY)
        .ok_or_else(|| Error::corruption(dir, format!("column family {APPLIED_FAMILY} missing after open")))?;
    Ok((db, cf))
}

fn read_applied(db: &Db, cf: &ColumnFamily, dir: &Path) -> Result<(Option<LogId<NodeId>>, Membership)> {
    let applied = match db.get_cf(cf, APPLIED_KEY)? {
        None => None,
        Some(v) => {
            Some(codec::decode(Kind::LogId, &v).map_err(|e| Error::corruption(dir, format!("applied log id: {e}")))?)
        }
    };
    let membership = match db.get_cf(cf, MEMBERSHIP_KEY)? {
        None => Membership::default(),
        Some(v) => {
            codec::decode(Kind::Membership, &v).map_err(|e| Error::corruption(dir, format!("membership: {e}")))?
        }
    };
    Ok((applied, membership))
}

fn record<T: serde::Serialize>(kind: Kind, value: &T) -> Result<Vec<u8>> {
    codec::encode(kind, value).map_err(Error::InvalidArgument)
}

/// An engine error the same entry gets on every member: the entry is rejected, not the node stopped.
fn deterministic(e: &shaledb::Error) -> bool {
    matches!(e, shaledb::Error::InvalidArgument(_) | shaledb::Error::NotSupported(_))
}

impl Shared {
    fn apply_one(&self, live: &mut Live, entry: Entry<TypeConfig>) -> Result<Response> {
        let log_id = *entry.get_log_id();
        let applied_rec = record(Kind::LogId, &log_id)?;
        let mut membership = None;
        let (mut batch, mut response) = match entry.payload {
            EntryPayload::Blank => (WriteBatch::new(), Response::Recorded),
            EntryPayload::Normal(p) => match WriteBatch::from_data(p.batch) {
                Ok(b) if p.tables.is_empty() => (b, Response::Applied),
                Ok(b) => match self.ingest_tables(live, log_id.index, &p.tables) {
                    Ok(()) => (b, Response::Applied),
                    // A table that does not read as one is the same bytes on every member (the log record's
                    // checksum holds them): refused everywhere alike.
                    Err(e) if deterministic(&e) || matches!(e, shaledb::Error::Corruption { .. }) => {
                        (WriteBatch::new(), Response::Rejected { reason: format!("ingesting its tables: {e}") })
                    }
                    Err(e) => return Err(e.into()),
                },
                Err(e) => (WriteBatch::new(), Response::Rejected { reason: e.to_string() }),
            },
            EntryPayload::Membership(m) => {
                membership = Some(Membership::new(Some(log_id), m));
                (WriteBatch::new(), Response::Recorded)
            }
        };
        let membership_rec = membership.as_ref().map(|m| record(Kind::Membership, m)).transpose()?;
        let finish = |batch: &mut WriteBatch| {
            batch.put_cf(&live.cf, APPLIED_KEY, &applied_rec);
            if let Some(rec) = &membership_rec {
                batch.put_cf(&live.cf, MEMBERSHIP_KEY, rec);
            }
        };
        finish(&mut batch);
        match live.db.write(&batch) {
            Ok(()) => {}
            Err(e) if deterministic(&e) => {
                response = Response::Rejected { reason: e.to_string() };
                let mut only_ids = WriteBatch::new();
                finish(&mut only_ids);
                live.db.write(&only_ids)?;
            }
            Err(e) => return Err(e.into()),
        }
        live.applied = Some(log_id);
        if let Some(m) = membership {
            live.membership = m;
        }
        Ok(response)
    }

    /// Ingests a proposal's tables into the data's default column family, before its batch is applied.
    ///
    /// The WAL is synced first, so a crash leaves the data a prefix of the applied entries even though the
    /// ingested files are durable at once and the batches before them might not be. A crash after the
    /// ingestion and before the batch (which records the applied id) re-applies this entry: the tables are
    /// ingested again over their first copy, which changes nothing, since no key of a table is written by
    /// anything else of the entry. The files are written under the root as `ingest-<index>-<n>.tmp` and moved
    /// (hard linked) into the database; what a crash leaves of them is removed at open as any `*.tmp`.
    fn ingest_tables(&self, live: &Live, index: u64, tables: &[Vec<u8>]) -> shaledb::Result<()> {
        let fs = self.fs.as_ref();
        live.db.sync_wal()?;
        let mut paths = Vec::with_capacity(tables.len());
        let written = tables.iter().enumerate().try_for_each(|(n, t)| {
            let path = self.root.join(format!("ingest-{index}-{n}.tmp"));
            paths.push(path.clone());
            // Not synced here: the ingestion syncs the copy it keeps.
            let mut f = fs.create(&path)?;
            f.append(t)?;
            f.flush()
        });
        let opts = IngestExternalFileOptions {
            move_files: true,
            verify_checksums_before_ingest: true,
            ..IngestExternalFileOptions::default()
        };
        let r = written.and_then(|()| live.db.ingest_external_file(&paths, &opts));
        if r.is_ok() {
            self.ingested[0].fetch_add(tables.len() as u64, Ordering::Relaxed);
            self.ingested[1].fetch_add(tables.iter().map(|t| t.len() as u64).sum(), Ordering::Relaxed);
        }
        for p in &paths {
            if fs.exists(p) {
                let _ = fs.remove(p);
            }
        }
        r
    }

    fn build_snapshot(&self) -> Result<(Meta, Vec<u8>)> {
        let fs = self.fs.as_ref();
        let ckpt = self.root.join(CHECKPOINT);
        snapshot::remove_tree(fs, &ckpt)?;
        let meta = {
            let mut live = self.live.lock();
            live.built += 1;
            let at = live.applied.map_or_else(|| "none".to_string(), |l| format!("{}-{}", l.leader_id, l.index));
            let meta = Meta {
                last_log_id: live.applied,
                last_membership: live.membership.clone(),
                snapshot_id: format!("{at}-g{}-{}", live.generation, live.built),
            };
            // Under the lock, so no entry is applied between the checkpoint and the ids read above.
            live.db.create_checkpoint(&ckpt)?;
            // openraft may purge the log up to this snapshot: the live data must not fall behind it in a crash.
            live.db.sync_wal()?;
            meta
        };
        let packed = snapshot::pack(fs, &meta, &ckpt)?;
        snapshot::remove_tree(fs, &ckpt)?;
        snapshot::replace_file(fs, &self.root, SNAPSHOT, &packed)?;
        Ok((meta, packed))
    }

    fn install(&self, meta: &Meta, archive: &[u8]) -> Result<()> {
        let fs = self.fs.as_ref();
        let (archived, files) = snapshot::unpack(archive, &self.root)?;
        if archived.last_log_id != meta.last_log_id || archived.last_membership != meta.last_membership {
            return Err(Error::corruption(
                &self.root,
                format!(
                    "snapshot {} holds state up to {:?}, but was announced up to {:?}",
                    meta.snapshot_id, archived.last_log_id, meta.last_log_id
                ),
            ));
        }
        let mut live = self.live.lock();
        let generation = live.generation + 1;
        let dir = self.root.join(data_dir_name(generation));
        snapshot::remove_tree(fs, &dir)?;
        fs.create_dir_all(&dir)?;
        for f in &files {
            snapshot::write_synced(fs, &dir.join(f.name), f.data)?;
        }
        fs.sync_dir(&dir)?;
        fs.sync_dir(&self.root)?;
        let (db, cf) = open_data(&self.opts, &dir)?;
        let (applied, membership) = read_applied(&db, &cf, &dir)?;
        if applied != meta.last_log_id {
            return Err(Error::corruption(
                &dir,
                format!("snapshot {} applied up to {applied:?}, not its {:?}", meta.snapshot_id, meta.last_log_id),
            ));
        }
        // The switch: from here on a crash reopens the new generation.
        snapshot::replace_file(fs, &self.root, CURRENT, format!("{}\n", data_dir_name(generation)).as_bytes())?;
        let old_dir = self.root.join(data_dir_name(live.generation));
        let old = std::mem::replace(&mut live.db, Arc::new(db));
        live.cf = cf;
        live.generation = generation;
        live.applied = applied;
        live.membership = membership;
        if let Ok(old) = Arc::try_unwrap(old) {
            // NB: the old generation is no longer CURRENT: a failed close or removal leaves an orphan that the
            // next open removes, never a state to return.
            let _ = old.close();
            let _ = snapshot::remove_tree(fs, &old_dir);
        }
        drop(live);
        snapshot::replace_file(fs, &self.root, SNAPSHOT, archive)?;
        Ok(())
    }

    fn current_snapshot(&self) -> Result<Option<(Meta, Vec<u8>)>> {
        let path = self.root.join(SNAPSHOT);
        if !self.fs.exists(&path) {
            return Ok(None);
        }
        let bytes = self.fs.read_all(&path)?;
        let (meta, _) = snapshot::unpack(&bytes, &self.root)?;
        Ok(Some((meta, bytes)))
    }
}

/// The state machine of one node. Cheap to clone: clones share the live database.
#[derive(Clone)]
pub struct StateMachine {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for StateMachine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let live = self.shared.live.lock();
        f.debug_struct("StateMachine")
            .field("root", &self.shared.root)
            .field("generation", &live.generation)
            .field("applied", &live.applied)
            .finish()
    }
}

impl StateMachine {
    /// Opens (creating when missing) the state machine under `root`, its databases opened with `opts` (and on
    /// `opts.fs`), and removes what a crash left behind: data generations CURRENT does not name, temp files
    /// and a half-made checkpoint.
    pub fn open(root: impl AsRef<Path>, opts: Options) -> Result<StateMachine> {
        let root = root.as_ref().to_path_buf();
        let fs = opts.fs.clone();
        fs.create_dir_all(&root)?;
        let current = root.join(CURRENT);
        let generation = if fs.exists(&current) { parse_current(&root, &fs.read_all(&current)?)? } else { 0 };
        let live_name = data_dir_name(generation);
        for name in fs.list(&root)? {
            let path = root.join(&name);
            if (name.starts_with("data-") && name != live_name) || name == CHECKPOINT {
                snapshot::remove_tree(fs.as_ref(), &path)?;
            } else if name.ends_with(".tmp") {
                fs.remove(&path)?;
            }
        }
        let dir = root.join(&live_name);
        let (db, cf) = open_data(&opts, &dir)?;
        if !fs.exists(&current) {
            snapshot::replace_file(fs.as_ref(), &root, CURRENT, format!("{live_name}\n").as_bytes())?;
        }
        let (applied, membership) = read_applied(&db, &cf, &dir)?;
        let live = Live { generation, db: Arc::new(db), cf, applied, membership, built: 0 };
        let ingested = [AtomicU64::new(0), AtomicU64::new(0)];
        Ok(StateMachine { shared: Arc::new(Shared { root, fs, opts, live: Mutex::new(live), ingested }) })
    }

    /// The live data database. After a snapshot install a new one is live: take it again, do not keep it.
    pub fn db(&self) -> Arc<Db> {
        self.shared.live.lock().db.clone()
    }

    /// The last applied log id and membership.
    pub fn applied(&self) -> (Option<LogId<NodeId>>, Membership) {
        let live = self.shared.live.lock();
        (live.applied, live.membership.clone())
    }

    /// Tables ingested from proposals since open, and their bytes.
    pub fn tables_ingested(&self) -> (u64, u64) {
        (self.shared.ingested[0].load(Ordering::Relaxed), self.shared.ingested[1].load(Ordering::Relaxed))
    }

    /// The live data generation (0 until a snapshot is installed).
    pub fn generation(&self) -> u64 {
        self.shared.live.lock().generation
    }

    /// How many handles share the state machine (this one, its clones and snapshot builders).
    pub(crate) fn handles(&self) -> usize {
        Arc::strong_count(&self.shared)
    }

    /// Closes the live database (flushing nothing more than the engine's close does).
    pub fn close(self) -> Result<()> {
        let shared = Arc::try_unwrap(self.shared).map_err(|_| {
            Error::InvalidArgument("the state machine is still shared (a clone or builder lives)".into())
        })?;
        let live = shared.live.into_inner();
        match Arc::try_unwrap(live.db) {
            Ok(db) => Ok(db.close()?),
            Err(_) => Err(Error::InvalidArgument("the data database is still shared (a db() handle lives)".into())),
        }
    }
}

fn sm_write_err(e: Error) -> StorageError<NodeId> {
    StorageIOError::write_state_machine(&e).into()
}

fn snapshot_err(e: Error) -> StorageError<NodeId> {
    StorageIOError::write_snapshot(None, &e).into()
}

/// Builds snapshots for openraft: an engine checkpoint of the live database, packed.
pub struct SnapshotBuilder {
    shared: Arc<Shared>,
}

impl RaftSnapshotBuilder<TypeConfig> for SnapshotBuilder {
    async fn build_snapshot(&mut self) -> std::result::Result<Snapshot<TypeConfig>, StorageError<NodeId>> {
        let shared = self.shared.clone();
        let (meta, packed) = blocking(move || shared.build_snapshot()).await.map_err(snapshot_err)?;
        Ok(Snapshot { meta, snapshot: Box::new(Cursor::new(packed)) })
    }
}

impl RaftStateMachine<TypeConfig> for StateMachine {
    type SnapshotBuilder = SnapshotBuilder;

    async fn applied_state(
        &mut self,
    ) -> std::result::Result<(Option<LogId<NodeId>>, Membership), StorageError<NodeId>> {
        Ok(self.applied())
    }

    async fn apply<I>(&mut self, entries: I) -> std::result::Result<Vec<Response>, StorageError<NodeId>>
    where
        I: IntoIterator<Item = Entry<TypeConfig>> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let entries: Vec<Entry<TypeConfig>> = entries.into_iter().collect();
        let shared = self.shared.clone();
        blocking(move || {
            let mut live = shared.live.lock();
            entries.into_iter().map(|e| shared.apply_one(&mut live, e)).collect::<Result<Vec<_>>>()
        })
        .await
        .map_err(sm_write_err)
    }

    async fn get_snapshot_builder(&mut self) -> SnapshotBuilder {
        SnapshotBuilder { shared: self.shared.clone() }
    }

    async fn begin_receiving_snapshot(&mut self) -> std::result::Result<Box<Cursor<Vec<u8>>>, StorageError<NodeId>> {
        Ok(Box::new(Cursor::new(Vec::new())))
    }

    async fn install_snapshot(
        &mut self,
        meta: &Meta,
        snapshot: Box<Cursor<Vec<u8>>>,
    ) -> std::result::Result<(), StorageError<NodeId>> {
        let shared = self.shared.clone();
        let meta = meta.clone();
        let archive = snapshot.into_inner();
        blocking(move || shared.install(&meta, &archive))
            .await
            .map_err(|e| StorageIOError::write_snapshot(None, &e).into())
    }

    async fn get_current_snapshot(
        &mut self,
    ) -> std::result::Result<Option<Snapshot<TypeConfig>>, StorageError<NodeId>> {
        let shared = self.shared.clone();
        let found = blocking(move || shared.current_snapshot())
            .await
            .map_err(|e| StorageError::from(StorageIOError::read_snapshot(None, &e)))?;
        Ok(found.map(|(meta, bytes)| Snapshot { meta, snapshot: Box::new(Cursor::new(bytes)) }))
    }
}
