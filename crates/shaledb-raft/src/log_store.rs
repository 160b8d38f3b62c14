//! openraft's log store on an engine database of its own.
//!
//! Keys (default column family; docs/format/raft-log.md):
//!
//! ```text
//! 0x00 'v'            -> record(vote)        ; the vote
//! 0x00 'c'            -> record(log_id)      ; the last committed log id openraft told us
//! 0x00 'p'            -> record(log_id)      ; the last purged log id: entries up to it are gone
//! 0x01 index:fixed64be -> record(entry)      ; one entry per index, big-endian so keys sort by index
//! ```
//!
//! Why a database of its own, split by a key prefix, rather than a column family of the state machine's
//! database: a snapshot install replaces the state machine's database whole, which must never touch the log,
//! and the log's writes (synced, small, deleted by range at purge) should not share a WAL and flushes with the
//! data's bulk. Inside it one family is enough: the marker keys sort before every entry, a purge is one batch
//! (marker + range deletion) so it is atomic, and a range over prefix 0x01 is the log in order.
//!
//! INVARIANT: the entries present are exactly `first..=last` with no hole, and `first` is `purged + 1` once
//! anything was purged. [`LogStore::open`] checks it (every record's checksum too), so a log with a corrupt or
//! missing entry never serves openraft: the node does not start, hence never votes. Later reads check the
//! same and return an error, which stops openraft.

use std::fmt::Debug;
use std::io;
use std::ops::{Bound, RangeBounds};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use openraft::storage::{LogFlushed, LogState, RaftLogReader, RaftLogStorage};
use openraft::{Entry, LogId, OptionalSend, StorageError, StorageIOError, Vote};
use parking_lot::Mutex;
use shaledb::{Db, Options, WriteBatch, WriteOptions};

use crate::codec::{self, Kind};
use crate::error::{blocking, Error, Result};
use crate::{NodeId, TypeConfig};

const VOTE_KEY: &[u8] = &[0x00, b'v'];
const COMMITTED_KEY: &[u8] = &[0x00, b'c'];
const PURGED_KEY: &[u8] = &[0x00, b'p'];
const ENTRY_PREFIX: u8 = 0x01;
/// The first key after every entry key.
const ENTRIES_END: &[u8] = &[ENTRY_PREFIX + 1];

fn entry_key(index: u64) -> [u8; 9] {
    let mut k = [ENTRY_PREFIX; 9];
    k[1..].copy_from_slice(&index.to_be_bytes());
    k
}

fn key_index(dir: &Path, key: &[u8]) -> Result<u64> {
    match key {
        [ENTRY_PREFIX, rest @ ..] if rest.len() == 8 => {
            let mut b = [0u8; 8];
            b.copy_from_slice(rest);
            Ok(u64::from_be_bytes(b))
        }
        _ => Err(Error::corruption(dir, format!("key {key:02x?} is not an entry key"))),
    }
}

/// What openraft's log state is made of, kept in memory after open.
#[derive(Clone, Copy, Debug, Default)]
struct Marks {
    purged: Option<LogId<NodeId>>,
    /// The index of the first entry present, `None` when the log holds no entry.
    first: Option<u64>,
    /// The last entry's id, else `purged`.
    last: Option<LogId<NodeId>>,
}

struct Shared {
    db: Db,
    dir: PathBuf,
    marks: Mutex<Marks>,
}

impl Shared {
    fn read_record<T: serde::de::DeserializeOwned>(&self, key: &[u8], kind: Kind) -> Result<Option<T>> {
        match self.db.get(key)? {
            None => Ok(None),
            Some(v) => codec::decode(kind, &v)
                .map(Some)
                .map_err(|e| Error::corruption(&self.dir, format!("{kind:?} record: {e}"))),
        }
    }

    fn decode_entry(&self, index: u64, value: &[u8]) -> Result<Entry<TypeConfig>> {
        let entry: Entry<TypeConfig> =
            codec::decode_entry(value).map_err(|e| Error::corruption(&self.dir, format!("log entry {index}: {e}")))?;
        if entry.log_id.index != index {
            return Err(Error::corruption(
                &self.dir,
                format!("log entry stored at index {index} holds index {}", entry.log_id.index),
            ));
        }
        Ok(entry)
    }

    /// Entries `start..end` that exist (openraft may ask outside the log), checked for holes: every index from
    /// `max(start, first)` up to the last entry or `end` must be there.
    fn entries(&self, start: u64, end: u64) -> Result<Vec<Entry<TypeConfig>>> {
        let marks = *self.marks.lock();
        let (Some(first), Some(last)) = (marks.first, marks.last) else { return Ok(Vec::new()) };
        let mut expected = start.max(first);
        let end = end.min(last.index.saturating_add(1));
        let mut out = Vec::new();
        if expected >= end {
            return Ok(out);
        }
        for kv in self.db.range(entry_key(expected).to_vec()..entry_key(end).to_vec()) {
            let (k, v) = kv?;
            let index = key_index(&self.dir, &k)?;
            if index != expected {
                return Err(Error::corruption(
                    &self.dir,
                    format!("log entry {expected} is missing (the next one present is {index})"),
                ));
            }
            out.push(self.decode_entry(index, &v)?);
            expected = index.saturating_add(1);
        }
        if expected < end {
            return Err(Error::corruption(
                &self.dir,
                format!("log entry {expected} is missing (the log ends at {})", last.index),
            ));
        }
        Ok(out)
    }

    fn last_entry_before(&self, end: u64) -> Result<Option<LogId<NodeId>>> {
        let mut it = self.db.range(vec![ENTRY_PREFIX]..entry_key(end).to_vec()).rev();
        match it.next() {
            None => Ok(None),
            Some(kv) => {
                let (k, v) = kv?;
                let index = key_index(&self.dir, &k)?;
                Ok(Some(self.decode_entry(index, &v)?.log_id))
            }
        }
    }

    fn write(&self, batch: &WriteBatch, sync: bool) -> Result<()> {
        self.db.write_opt(&WriteOptions { sync, ..WriteOptions::default() }, batch)?;
        Ok(())
    }

    /// Stores each entry at its index. openraft never leaves a hole (its contract for `append` and `truncate`;
    /// its storage suite does, on purpose, in memory): a hole is not refused here but by every read that crosses
    /// it and by [`LogStore::open`], so a log with one never serves a vote or a follower.
    fn append(&self, entries: &[Entry<TypeConfig>]) -> Result<()> {
        let (Some(first), Some(last)) = (entries.first(), entries.last()) else { return Ok(()) };
        let mut batch = WriteBatch::new();
        for e in entries {
            let rec = codec::encode(Kind::Entry, e).map_err(Error::InvalidArgument)?;
            batch.put(entry_key(e.log_id.index), rec);
        }
        // NB: synced before openraft's callback runs: an acknowledged append is on disk.
        self.write(&batch, true)?;
        let mut m = self.marks.lock();
        let lowest = entries.iter().map(|e| e.log_id.index).min().unwrap_or(first.log_id.index);
        m.first = Some(m.first.map_or(lowest, |f| f.min(lowest)));
        let highest = entries.iter().map(|e| e.log_id).max_by_key(|l| l.index).unwrap_or(last.log_id);
        if m.last.is_none_or(|l| highest.index >= l.index) {
            m.last = Some(highest);
        }
        Ok(())
    }

    fn truncate(&self, since: LogId<NodeId>) -> Result<()> {
        let mut batch = WriteBatch::new();
        batch.delete_range(entry_key(since.index), ENTRIES_END);
        self.write(&batch, true)?;
        let below = self.last_entry_before(since.index)?;
        let mut m = self.marks.lock();
        if m.first.is_some_and(|f| f >= since.index) {
            m.first = None;
        }
        m.last = below.or(m.purged);
        Ok(())
    }

    fn purge(&self, upto: LogId<NodeId>) -> Result<()> {
        let mut batch = WriteBatch::new();
        let rec = codec::encode(Kind::LogId, &upto).map_err(Error::InvalidArgument)?;
        batch.put(PURGED_KEY, rec);
        batch.delete_range([ENTRY_PREFIX], entry_key(upto.index.saturating_add(1)));
        if upto.index == u64::MAX {
            batch.delete(entry_key(u64::MAX));
        }
        self.write(&batch, true)?;
        let mut m = self.marks.lock();
        m.purged = Some(upto);
        if m.last.is_none_or(|l| l.index <= upto.index) {
            // Nothing left: openraft purges past the log after installing a snapshot.
            m.first = None;
            m.last = Some(upto);
        } else if m.first.is_some_and(|f| f <= upto.index) {
            m.first = Some(upto.index.saturating_add(1));
        }
        Ok(())
    }

    fn put_record<T: serde::Serialize>(&self, key: &[u8], kind: Kind, value: &T, sync: bool) -> Result<()> {
        let rec = codec::encode(kind, value).map_err(Error::InvalidArgument)?;
        let mut batch = WriteBatch::new();
        batch.put(key, rec);
        self.write(&batch, sync)
    }
}

/// Checks the whole log (see the module's INVARIANT) and returns its marks.
fn verify(shared: &Shared) -> Result<Marks> {
    let _: Option<Vote<NodeId>> = shared.read_record(VOTE_KEY, Kind::Vote)?;
    let _: Option<LogId<NodeId>> = shared.read_record(COMMITTED_KEY, Kind::LogId)?;
    let purged: Option<LogId<NodeId>> = shared.read_record(PURGED_KEY, Kind::LogId)?;
    let mut expected = purged.map(|p| p.index.saturating_add(1));
    let (mut first, mut last) = (None, None);
    for kv in shared.db.range(vec![ENTRY_PREFIX]..ENTRIES_END.to_vec()) {
        let (k, v) = kv?;
        let index = key_index(&shared.dir, &k)?;
        if let Some(want) = expected {
            if index != want {
                return Err(Error::corruption(
                    &shared.dir,
                    format!("log entry {want} is missing (the next one present is {index})"),
                ));
            }
        }
        first = first.or(Some(index));
        last = Some(shared.decode_entry(index, &v)?.log_id);
        expected = Some(index.saturating_add(1));
    }
    if let (Some(l), Some(p)) = (last, purged) {
        if l.index <= p.index {
            return Err(Error::corruption(
                &shared.dir,
                format!("log entry {} survives its purge up to {}", l.index, p.index),
            ));
        }
    }
    Ok(Marks { purged, first, last: last.or(purged) })
}

/// The raft log of one node, on an engine database of its own. Cheap to clone: clones share the database.
#[derive(Clone)]
pub struct LogStore {
    shared: Arc<Shared>,
}

impl Debug for LogStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LogStore").field("dir", &self.shared.dir).field("marks", &*self.shared.marks.lock()).finish()
    }
}

impl LogStore {
    /// Opens (creating with `opts.create_if_missing`) the log in `dir` and checks every entry: a corrupt or
    /// missing one is [`Error::Corruption`] naming its index, and the node must not start (nor vote).
    pub fn open(dir: impl AsRef<Path>, opts: Options) -> Result<LogStore> {
        let dir = dir.as_ref().to_path_buf();
        let db = Db::open(&dir, opts)?;
        let shared = Shared { db, dir, marks: Mutex::new(Marks::default()) };
        let marks = verify(&shared)?;
        *shared.marks.lock() = marks;
        Ok(LogStore { shared: Arc::new(shared) })
    }

    /// The engine database holding the log (for tests and tools: `verify_checksums`, properties).
    pub fn db(&self) -> &Db {
        &self.shared.db
    }

    /// The vote, read from the engine.
    pub fn vote(&self) -> Result<Option<Vote<NodeId>>> {
        self.shared.read_record(VOTE_KEY, Kind::Vote)
    }

    /// The committed marker, read from the engine.
    pub fn committed(&self) -> Result<Option<LogId<NodeId>>> {
        self.shared.read_record(COMMITTED_KEY, Kind::LogId)
    }

    /// The last purged and the last log id.
    pub fn log_state(&self) -> (Option<LogId<NodeId>>, Option<LogId<NodeId>>) {
        let m = *self.shared.marks.lock();
        (m.purged, m.last)
    }

    /// Entries `start..end` that exist, checked (see [`LogStore::open`]).
    pub fn entries(&self, start: u64, end: u64) -> Result<Vec<Entry<TypeConfig>>> {
        self.shared.entries(start, end)
    }

    /// How many handles share the database (this one, its clones and readers).
    pub(crate) fn handles(&self) -> usize {
        Arc::strong_count(&self.shared)
    }

    /// Closes the database; refused while a clone or reader lives.
    pub fn close(self) -> Result<()> {
        match Arc::try_unwrap(self.shared) {
            Ok(shared) => Ok(shared.db.close()?),
            Err(_) => Err(Error::InvalidArgument("the log store is still shared (a clone or reader lives)".into())),
        }
    }
}

fn bounds(range: &impl RangeBounds<u64>) -> (u64, u64) {
    let start = match range.start_bound() {
        Bound::Included(&s) => s,
        Bound::Excluded(&s) => s.saturating_add(1),
        Bound::Unbounded => 0,
    };
    let end = match range.end_bound() {
        Bound::Included(&e) => e.saturating_add(1),
        Bound::Excluded(&e) => e,
        Bound::Unbounded => u64::MAX,
    };
    (start, end)
}

fn read_err(e: Error) -> StorageError<NodeId> {
    StorageIOError::read_logs(&e).into()
}

fn write_err(e: Error) -> StorageError<NodeId> {
    StorageIOError::write_logs(&e).into()
}

/// A reader of the log, for openraft's replication tasks.
#[derive(Clone)]
pub struct LogReader {
    shared: Arc<Shared>,
}

impl RaftLogReader<TypeConfig> for LogReader {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + OptionalSend>(
        &mut self,
        range: RB,
    ) -> std::result::Result<Vec<Entry<TypeConfig>>, StorageError<NodeId>> {
        let (start, end) = bounds(&range);
        self.shared.entries(start, end).map_err(read_err)
    }
}

impl RaftLogReader<TypeConfig> for LogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + OptionalSend>(
        &mut self,
        range: RB,
    ) -> std::result::Result<Vec<Entry<TypeConfig>>, StorageError<NodeId>> {
        let (start, end) = bounds(&range);
        self.shared.entries(start, end).map_err(read_err)
    }
}

impl RaftLogStorage<TypeConfig> for LogStore {
    type LogReader = LogReader;

    async fn get_log_state(&mut self) -> std::result::Result<LogState<TypeConfig>, StorageError<NodeId>> {
        let m = *self.shared.marks.lock();
        Ok(LogState { last_purged_log_id: m.purged, last_log_id: m.last })
    }

    async fn get_log_reader(&mut self) -> LogReader {
        LogReader { shared: self.shared.clone() }
    }

    async fn save_vote(&mut self, vote: &Vote<NodeId>) -> std::result::Result<(), StorageError<NodeId>> {
        let shared = self.shared.clone();
        let vote = *vote;
        // NB: synced: a vote given must survive any crash, or a node could vote twice in one term.
        blocking(move || shared.put_record(VOTE_KEY, Kind::Vote, &vote, true))
            .await
            .map_err(|e| StorageIOError::write_vote(&e).into())
    }

    async fn read_vote(&mut self) -> std::result::Result<Option<Vote<NodeId>>, StorageError<NodeId>> {
        self.shared.read_record(VOTE_KEY, Kind::Vote).map_err(|e| StorageIOError::read_vote(&e).into())
    }

    async fn save_committed(
        &mut self,
        committed: Option<LogId<NodeId>>,
    ) -> std::result::Result<(), StorageError<NodeId>> {
        let Some(c) = committed else { return Ok(()) };
        let shared = self.shared.clone();
        // Not synced: a lost committed marker only means openraft learns it again from the leader; the applied
        // state is kept by the state machine itself.
        blocking(move || shared.put_record(COMMITTED_KEY, Kind::LogId, &c, false)).await.map_err(write_err)
    }

    async fn read_committed(&mut self) -> std::result::Result<Option<LogId<NodeId>>, StorageError<NodeId>> {
        self.shared.read_record(COMMITTED_KEY, Kind::LogId).map_err(read_err)
    }

    async fn append<I>(
        &mut self,
        entries: I,
        callback: LogFlushed<TypeConfig>,
    ) -> std::result::Result<(), StorageError<NodeId>>
    where
        I: IntoIterator<Item = Entry<TypeConfig>> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let entries: Vec<Entry<TypeConfig>> = entries.into_iter().collect();
        let shared = self.shared.clone();
        match blocking(move || shared.append(&entries)).await {
            Ok(()) => {
                callback.log_io_completed(Ok(()));
                Ok(())
            }
            Err(e) => {
                callback.log_io_completed(Err(io::Error::other(e.to_string())));
                Err(write_err(e))
            }
        }
    }

    async fn truncate(&mut self, log_id: LogId<NodeId>) -> std::result::Result<(), StorageError<NodeId>> {
        let shared = self.shared.clone();
        blocking(move || shared.truncate(log_id)).await.map_err(write_err)
    }

    async fn purge(&mut self, log_id: LogId<NodeId>) -> std::result::Result<(), StorageError<NodeId>> {
        let shared = self.shared.clone();
        blocking(move || shared.purge(log_id)).await.map_err(write_err)
    }
}
