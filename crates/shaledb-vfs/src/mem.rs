//! An in-memory [`Fs`] for crash and fault tests.
//!
//! [`MemFs`] models the three places a byte can be, so tests can cut the power at any point and check what
//! the engine recovers:
//!
//! - *appended*: in the writer's user-space buffer; lost when the process dies ([`MemFs::kill_process`]);
//! - *flushed*: handed to the "operating system"; survives a process kill, lost at a power loss unless synced;
//! - *synced*: durable; survives [`MemFs::power_loss`].
//!
//! Directory entries follow the same rule one level up: a create, rename or remove changes the live namespace
//! at once, the durable namespace only when [`Fs::sync_dir`] runs on the parent. Files are inodes, so a renamed
//! or removed file keeps its contents under its durable name until the directory is synced, and a file removed
//! while open stays readable through the open handle.
//!
//! Simplifications, all on the side of the engine under test: directories themselves are durable as soon as
//! [`Fs::create_dir_all`] returns; a writer buffers every append until `flush`/`sync` (the POSIX one may write
//! large appends early, which only ever leaves *more* data after a kill); a file truncated by re-`create` and
//! not synced since comes back from a power loss with its last synced contents, whatever was written after.
//!
//! Faults: [`MemFs::set_faults`] makes the n-th operation of one class ([`FsOp`]) fail with `EIO` or
//! `ENOSPC`, once or from then on. A failed operation changes nothing (a failed flush appends nothing and keeps
//! the writer's buffer, as the POSIX writer does).

use crate::{Error, FileLock, Fs, RandomAccessFile, ReadHints, Result, WritableFile};
use parking_lot::Mutex;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

/// Granularity of a torn write in [`PowerLoss::KeepRandomPages`]: the page size of the page cache.
const PAGE: usize = 4096;

/// What a power loss does to data that was flushed but not synced.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum PowerLoss {
    /// Unsynced bytes vanish: every file is cut back to its last synced length.
    DropUnsynced,
    /// Each 4 KiB page (aligned to file offsets) of a file's unsynced tail survives independently with
    /// probability `keep_probability`. A lost page before a kept one reads as zeros (a hole), so a later page
    /// can survive while an earlier one does not, as after a real torn write-back.
    KeepRandomPages {
        /// Chance, in `[0, 1]`, that one page survives. Out-of-range values are clamped.
        keep_probability: f64,
    },
    /// The unsynced tail keeps its length but its bytes are replaced by random ones (blocks allocated, data
    /// never written).
    GarbleUnsynced,
}

/// Classes of file-system operations, for [`MemFs::op_count`] and [`FaultPlan`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FsOp {
    /// [`RandomAccessFile::read_exact_at`].
    Read,
    /// A flush of a writer's buffer to the OS (from [`WritableFile::flush`] or [`WritableFile::sync`]); counted
    /// only when the buffer holds bytes, as only then a `write(2)` happens.
    Write,
    /// [`WritableFile::sync`] (the `fdatasync(2)` part).
    Sync,
    /// [`Fs::create`].
    Create,
    /// [`Fs::rename`].
    Rename,
    /// [`Fs::remove`].
    Remove,
    /// [`Fs::sync_dir`].
    SyncDir,
    /// [`Fs::open`].
    Open,
}

impl FsOp {
    /// Every class, in declaration order.
    pub const ALL: [FsOp; 8] =
        [FsOp::Read, FsOp::Write, FsOp::Sync, FsOp::Create, FsOp::Rename, FsOp::Remove, FsOp::SyncDir, FsOp::Open];

    fn index(self) -> usize {
        match self {
            FsOp::Read => 0,
            FsOp::Write => 1,
            FsOp::Sync => 2,
            FsOp::Create => 3,
            FsOp::Rename => 4,
            FsOp::Remove => 5,
            FsOp::SyncDir => 6,
            FsOp::Open => 7,
        }
    }
}

/// The operating-system error an injected fault returns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultError {
    /// `EIO`: a generic I/O error.
    Eio,
    /// `ENOSPC`: no space left on device ([`Error::is_no_space`] is true).
    Enospc,
}

impl FaultError {
    fn to_io(self) -> std::io::Error {
        std::io::Error::from_raw_os_error(match self {
            FaultError::Eio => libc::EIO,
            FaultError::Enospc => libc::ENOSPC,
        })
    }
}

/// Which operation to fail, for [`MemFs::set_faults`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FaultPlan {
    /// The class of operation that fails.
    pub op: FsOp,
    /// Which one fails: 1-based, counted from the moment the plan is set (0 is treated as 1).
    pub nth: u64,
    /// When true, every later operation of the class fails too (a full disk, a dead device).
    pub persistent: bool,
    /// The error returned.
    pub error: FaultError,
}

impl FaultPlan {
    /// Fails only the `nth` operation of class `op`.
    pub fn once(op: FsOp, nth: u64, error: FaultError) -> FaultPlan {
        FaultPlan { op, nth, persistent: false, error }
    }

    /// Fails the `nth` operation of class `op` and every later one.
    pub fn from_nth(op: FsOp, nth: u64, error: FaultError) -> FaultPlan {
        FaultPlan { op, nth, persistent: true, error }
    }
}

#[derive(Clone, Debug)]
struct ActiveFault {
    plan: FaultPlan,
    seen: u64,
}

#[derive(Clone, Debug, Default)]
struct Inode {
    /// Contents as the OS sees them: every flushed byte.
    data: Vec<u8>,
    /// INVARIANT: `synced_len <= data.len()`; `data[..synced_len]` is durable unless `durable_override` is set.
    synced_len: usize,
    /// Set when the file was truncated (re-created) after its last sync: the durable contents are then these
    /// bytes, not a prefix of `data`.
    durable_override: Option<Vec<u8>>,
    /// Open readers and writers of the current "process"; an unlinked inode lives while this is non-zero.
    handles: usize,
}

impl Inode {
    fn truncate(&mut self) {
        // A file never synced has empty durable contents, the same as a prefix of whatever comes next.
        if self.durable_override.is_none() && self.synced_len > 0 {
            let mut synced = std::mem::take(&mut self.data);
            synced.truncate(self.synced_len);
            self.durable_override = Some(synced);
        }
        self.data.clear();
        self.synced_len = 0;
    }

    fn after_power_loss(&self, mode: PowerLoss, rng: &mut SplitMix) -> Vec<u8> {
        if let Some(durable) = &self.durable_override {
            return durable.clone();
        }
        let synced = self.synced_len.min(self.data.len());
        let (base, tail) = self.data.split_at(synced);
        let mut out = base.to_vec();
        match mode {
            PowerLoss::DropUnsynced => {}
            PowerLoss::GarbleUnsynced => out.extend(tail.iter().map(|_| rng.next_u64() as u8)),
            PowerLoss::KeepRandomPages { keep_probability } => {
                let p = if keep_probability.is_nan() { 0.0 } else { keep_probability.clamp(0.0, 1.0) };
                let mut pos = synced;
                while pos < self.data.len() {
                    let end = ((pos / PAGE + 1) * PAGE).min(self.data.len());
                    if rng.next_f64() < p {
                        out.resize(pos, 0);
                        out.extend_from_slice(&self.data[pos..end]);
                    }
                    pos = end;
                }
            }
        }
        out
    }
}

/// A small deterministic generator so that a power loss is replayable from its seed (this crate carries no
/// `rand` dependency).
struct SplitMix(u64);

impl SplitMix {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

#[derive(Clone, Debug, Default)]
struct State {
    inodes: HashMap<u64, Inode>,
    next_ino: u64,
    /// The namespace the running process sees.
    live: BTreeMap<PathBuf, u64>,
    /// The namespace a power loss leaves.
    durable: BTreeMap<PathBuf, u64>,
    dirs: BTreeSet<PathBuf>,
    locks: HashSet<PathBuf>,
    /// Bumped by every simulated crash; handles from an older epoch are dead.
    epoch: u64,
    counts: [u64; 8],
    fault: Option<ActiveFault>,
}

fn os_err(code: i32) -> std::io::Error {
    std::io::Error::from_raw_os_error(code)
}

/// Drops `.` components and doubled or trailing separators, so `a/./b` and `a//b/` name one file.
fn norm(path: &Path) -> PathBuf {
    path.components().filter(|c| !matches!(c, Component::CurDir)).collect()
}

fn parent_of(path: &Path) -> &Path {
    path.parent().unwrap_or(Path::new(""))
}

impl State {
    /// Counts an operation and fires the fault plan when it applies.
    fn begin(&mut self, op: FsOp, what: &'static str, path: &Path) -> Result<()> {
        self.counts[op.index()] += 1;
        if let Some(fault) = self.fault.as_mut() {
            if fault.plan.op == op {
                fault.seen += 1;
                let nth = fault.plan.nth.max(1);
                if fault.seen == nth || (fault.plan.persistent && fault.seen > nth) {
                    return Err(Error::io(what, path, fault.plan.error.to_io()));
                }
            }
        }
        Ok(())
    }

    fn check_alive(&self, epoch: u64, what: &'static str, path: &Path) -> Result<()> {
        if epoch == self.epoch {
            Ok(())
        } else {
            Err(Error::io(
                what,
                path,
                std::io::Error::other("handle opened before a simulated crash; the process that owned it is gone"),
            ))
        }
    }

    fn dir_exists(&self, dir: &Path) -> bool {
        dir.parent().is_none() || self.dirs.contains(dir)
    }

    fn new_inode(&mut self, inode: Inode) -> u64 {
        let ino = self.next_ino;
        self.next_ino += 1;
        self.inodes.insert(ino, inode);
        ino
    }

    /// Frees inodes that no name (live or durable) and no open handle refers to.
    fn gc(&mut self) {
        let referenced: HashSet<u64> = self.live.values().chain(self.durable.values()).copied().collect();
        self.inodes.retain(|ino, inode| inode.handles > 0 || referenced.contains(ino));
    }

    /// What a crash does to the process side: handles die, locks go with them.
    fn end_process(&mut self) {
        self.epoch += 1;
        self.locks.clear();
        for inode in self.inodes.values_mut() {
            inode.handles = 0;
        }
    }

    fn release_handle(&mut self, epoch: u64, ino: u64) {
        if epoch != self.epoch {
            return;
        }
        if let Some(inode) = self.inodes.get_mut(&ino) {
            inode.handles = inode.handles.saturating_sub(1);
            if inode.handles == 0 {
                self.gc();
            }
        }
    }

    fn flush_buffer(&mut self, ino: u64, path: &Path, buf: &mut Vec<u8>) -> Result<()> {
        if buf.is_empty() {
            return Ok(());
        }
        self.begin(FsOp::Write, "write", path)?;
        let inode = self.inodes.get_mut(&ino).ok_or_else(|| Error::io("write", path, os_err(libc::EBADF)))?;
        inode.data.append(buf);
        Ok(())
    }
}

/// An in-memory file system that simulates process kills, power losses and I/O errors.
///
/// Cloning gives another handle to the *same* file system (a test keeps one while the engine owns another);
/// [`MemFs::deep_clone`] gives an independent copy.
#[derive(Clone, Default)]
pub struct MemFs {
    state: Arc<Mutex<State>>,
}

impl std::fmt::Debug for MemFs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut d = f.debug_struct("MemFs");
        // try_lock: Debug may run from a panic message while this thread holds the lock.
        if let Some(st) = self.state.try_lock() {
            d.field("files", &st.live.len()).field("durable_files", &st.durable.len()).field("epoch", &st.epoch);
        }
        d.finish_non_exhaustive()
    }
}

impl MemFs {
    /// An empty file system (only the root directory exists).
    pub fn new() -> MemFs {
        MemFs::default()
    }

    /// Simulates the death of the process: unflushed writer buffers are lost, flushed data and the live
    /// namespace stay (the OS still has them). Every handle opened before fails from now on, and locks are
    /// released. The fault plan and operation counts are kept.
    pub fn kill_process(&self) {
        let mut st = self.state.lock();
        st.end_process();
        st.gc();
    }

    /// Simulates a power loss (and reboot): the namespace reverts to the durable one and each file to its
    /// synced contents, with the unsynced tail treated as `mode` says, randomised by `seed` (the same state,
    /// mode and seed give the same result). Handles die and locks are released as in
    /// [`MemFs::kill_process`]. The fault plan and operation counts are kept.
    pub fn power_loss(&self, mode: PowerLoss, seed: u64) {
        let mut st = self.state.lock();
        st.end_process();
        let mut rng = SplitMix(seed);
        let mut survivors = HashMap::new();
        // Paths in sorted order, so the random draws are assigned to files deterministically.
        for ino in st.durable.values() {
            if survivors.contains_key(ino) {
                continue;
            }
            if let Some(inode) = st.inodes.get(ino) {
                let data = inode.after_power_loss(mode, &mut rng);
                let synced_len = data.len();
                survivors.insert(*ino, Inode { data, synced_len, durable_override: None, handles: 0 });
            }
        }
        st.inodes = survivors;
        st.live = st.durable.clone();
    }

    /// Installs a fault plan, replacing any earlier one; its count starts now.
    pub fn set_faults(&self, plan: FaultPlan) {
        self.state.lock().fault = Some(ActiveFault { plan, seen: 0 });
    }

    /// Removes the fault plan.
    pub fn clear_faults(&self) {
        self.state.lock().fault = None;
    }

    /// How many operations of class `op` were attempted since this file system was made (failed ones
    /// included, calls on dead handles excluded), e.g. to sweep a fault over every k in `1..=count`.
    pub fn op_count(&self, op: FsOp) -> u64 {
        self.state.lock().counts[op.index()]
    }

    /// An independent copy of the current state, as the OS holds it: no open handles, no locks, no writer
    /// buffers (so it looks like the moment after a process kill, with unsynced data still there for a later
    /// [`MemFs::power_loss`]). Operation counts are copied; the fault plan is not.
    pub fn deep_clone(&self) -> MemFs {
        let mut st = self.state.lock().clone();
        st.end_process();
        st.fault = None;
        st.gc();
        MemFs { state: Arc::new(Mutex::new(st)) }
    }

    /// Names of the files (not subdirectories) directly in `dir`, sorted.
    pub fn file_names(&self, dir: &Path) -> Vec<String> {
        let dir = norm(dir);
        let st = self.state.lock();
        st.live
            .keys()
            .filter(|p| parent_of(p) == dir)
            .filter_map(|p| p.file_name().and_then(|n| n.to_str()).map(str::to_string))
            .collect()
    }

    /// The flushed contents of the file at `path`, or `None` when there is none.
    pub fn read_file(&self, path: &Path) -> Option<Vec<u8>> {
        let st = self.state.lock();
        let ino = st.live.get(&norm(path))?;
        st.inodes.get(ino).map(|i| i.data.clone())
    }

    /// Test helper: sets the contents of `path` (creating it and its directories), durably and at once, with
    /// no fault or operation count involved. Meant for corrupting files between runs.
    pub fn write_file(&self, path: &Path, data: &[u8]) {
        let path = norm(path);
        let mut st = self.state.lock();
        for dir in parent_of(&path).ancestors() {
            if dir.parent().is_some() {
                st.dirs.insert(dir.to_path_buf());
            }
        }
        let inode = Inode { data: data.to_vec(), synced_len: data.len(), durable_override: None, handles: 0 };
        let ino = match st.live.get(&path).copied() {
            Some(ino) => {
                let handles = st.inodes.get(&ino).map_or(0, |i| i.handles);
                st.inodes.insert(ino, Inode { handles, ..inode });
                ino
            }
            None => st.new_inode(inode),
        };
        st.live.insert(path.clone(), ino);
        st.durable.insert(path, ino);
        st.gc();
    }
}

struct MemWritable {
    state: Arc<Mutex<State>>,
    ino: u64,
    epoch: u64,
    path: PathBuf,
    buf: Vec<u8>,
    len: u64,
}

impl WritableFile for MemWritable {
    fn append(&mut self, data: &[u8]) -> Result<()> {
        self.state.lock().check_alive(self.epoch, "write", &self.path)?;
        self.buf.extend_from_slice(data);
        self.len += data.len() as u64;
        Ok(())
    }

    fn flush(&mut self) -> Result<()> {
        let mut st = self.state.lock();
        st.check_alive(self.epoch, "write", &self.path)?;
        st.flush_buffer(self.ino, &self.path, &mut self.buf)
    }

    fn sync(&mut self) -> Result<()> {
        let mut st = self.state.lock();
        st.check_alive(self.epoch, "fdatasync", &self.path)?;
        st.flush_buffer(self.ino, &self.path, &mut self.buf)?;
        st.begin(FsOp::Sync, "fdatasync", &self.path)?;
        let inode =
            st.inodes.get_mut(&self.ino).ok_or_else(|| Error::io("fdatasync", &self.path, os_err(libc::EBADF)))?;
        inode.synced_len = inode.data.len();
        inode.durable_override = None;
        Ok(())
    }

    fn len(&self) -> u64 {
        self.len
    }

    fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for MemWritable {
    fn drop(&mut self) {
        // Like the POSIX writer, dropping does not flush: unflushed appends are lost.
        self.state.lock().release_handle(self.epoch, self.ino);
    }
}

struct MemRandom {
    state: Arc<Mutex<State>>,
    ino: u64,
    epoch: u64,
    path: PathBuf,
    len: u64,
}

impl RandomAccessFile for MemRandom {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        let mut st = self.state.lock();
        st.check_alive(self.epoch, "read", &self.path)?;
        st.begin(FsOp::Read, "read", &self.path)?;
        let data = st.inodes.get(&self.ino).map(|i| i.data.as_slice()).unwrap_or_default();
        let src = usize::try_from(offset)
            .ok()
            .and_then(|start| Some(start..start.checked_add(buf.len())?))
            .and_then(|range| data.get(range))
            .ok_or_else(|| {
                Error::io(
                    "read",
                    &self.path,
                    std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "failed to fill whole buffer"),
                )
            })?;
        buf.copy_from_slice(src);
        Ok(())
    }

    fn len(&self) -> u64 {
        self.len
    }

    fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for MemRandom {
    fn drop(&mut self) {
        self.state.lock().release_handle(self.epoch, self.ino);
    }
}

struct MemLock {
    state: Arc<Mutex<State>>,
    key: PathBuf,
    epoch: u64,
}

impl FileLock for MemLock {}

impl Drop for MemLock {
    fn drop(&mut self) {
        let mut st = self.state.lock();
        // A lock from before a crash must not release the one the reopened database took since.
        if st.epoch == self.epoch {
            st.locks.remove(&self.key);
        }
    }
}

impl Fs for MemFs {
    fn create(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        let key = norm(path);
        let mut st = self.state.lock();
        st.begin(FsOp::Create, "create", path)?;
        if st.dirs.contains(&key) || key.parent().is_none() {
            return Err(Error::io("create", path, os_err(libc::EISDIR)));
        }
        if !st.dir_exists(parent_of(&key)) {
            return Err(Error::io("create", path, os_err(libc::ENOENT)));
        }
        let ino = match st.live.get(&key).copied() {
            Some(ino) => ino,
            None => {
                let ino = st.new_inode(Inode::default());
                st.live.insert(key, ino);
                ino
            }
        };
        let inode = st.inodes.entry(ino).or_default();
        inode.truncate();
        inode.handles += 1;
        Ok(Box::new(MemWritable {
            state: Arc::clone(&self.state),
            ino,
            epoch: st.epoch,
            path: path.to_path_buf(),
            buf: Vec::new(),
            len: 0,
        }))
    }

    fn open(&self, path: &Path, _hints: ReadHints) -> Result<Arc<dyn RandomAccessFile>> {
        let key = norm(path);
        let mut st = self.state.lock();
        st.begin(FsOp::Open, "open", path)?;
        let Some(ino) = st.live.get(&key).copied() else {
            let code = if st.dirs.contains(&key) { libc::EISDIR } else { libc::ENOENT };
            return Err(Error::io("open", path, os_err(code)));
        };
        let inode = st.inodes.entry(ino).or_default();
        inode.handles += 1;
        let len = inode.data.len() as u64;
        Ok(Arc::new(MemRandom { state: Arc::clone(&self.state), ino, epoch: st.epoch, path: path.to_path_buf(), len }))
    }

    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        let (src, dst) = (norm(from), norm(to));
        let mut st = self.state.lock();
        st.begin(FsOp::Rename, "rename", from)?;
        let Some(ino) = st.live.get(&src).copied() else {
            return Err(Error::io("rename", from, os_err(libc::ENOENT)));
        };
        if st.dirs.contains(&dst) || dst.parent().is_none() {
            return Err(Error::io("rename", from, os_err(libc::EISDIR)));
        }
        if !st.dir_exists(parent_of(&dst)) {
            return Err(Error::io("rename", from, os_err(libc::ENOENT)));
        }
        if src == dst {
            return Ok(());
        }
        st.live.remove(&src);
        st.live.insert(dst, ino);
        st.gc();
        Ok(())
    }

    fn remove(&self, path: &Path) -> Result<()> {
        let key = norm(path);
        let mut st = self.state.lock();
        st.begin(FsOp::Remove, "remove", path)?;
        if st.live.remove(&key).is_none() {
            let code = if st.dirs.contains(&key) { libc::EISDIR } else { libc::ENOENT };
            return Err(Error::io("remove", path, os_err(code)));
        }
        st.gc();
        Ok(())
    }

    fn list(&self, dir: &Path) -> Result<Vec<String>> {
        let key = norm(dir);
        let st = self.state.lock();
        if !st.dir_exists(&key) {
            let code = if st.live.contains_key(&key) { libc::ENOTDIR } else { libc::ENOENT };
            return Err(Error::io("readdir", dir, os_err(code)));
        }
        let mut names: Vec<String> = st
            .live
            .keys()
            .chain(st.dirs.iter())
            .filter(|p| parent_of(p) == key)
            .filter_map(|p| p.file_name().and_then(|n| n.to_str()).map(str::to_string))
            .collect();
        names.sort();
        Ok(names)
    }

    fn create_dir_all(&self, dir: &Path) -> Result<()> {
        let key = norm(dir);
        let mut st = self.state.lock();
        let missing: Vec<PathBuf> = key.ancestors().filter(|d| d.parent().is_some()).map(Path::to_path_buf).collect();
        if missing.iter().any(|d| st.live.contains_key(d)) {
            return Err(Error::io("mkdir", dir, os_err(libc::ENOTDIR)));
        }
        st.dirs.extend(missing);
        Ok(())
    }

    fn sync_dir(&self, dir: &Path) -> Result<()> {
        let key = norm(dir);
        let mut st = self.state.lock();
        st.begin(FsOp::SyncDir, "fsync dir", dir)?;
        if !st.dir_exists(&key) {
            return Err(Error::io("open dir", dir, os_err(libc::ENOENT)));
        }
        st.durable.retain(|p, _| parent_of(p) != key);
        let entries: Vec<(PathBuf, u64)> =
            st.live.iter().filter(|(p, _)| parent_of(p) == key).map(|(p, i)| (p.clone(), *i)).collect();
        st.durable.extend(entries);
        st.gc();
        Ok(())
    }

    fn exists(&self, path: &Path) -> bool {
        let key = norm(path);
        let st = self.state.lock();
        st.live.contains_key(&key) || st.dir_exists(&key)
    }

    fn file_size(&self, path: &Path) -> Result<u64> {
        let key = norm(path);
        let st = self.state.lock();
        match st.live.get(&key) {
            Some(ino) => Ok(st.inodes.get(ino).map_or(0, |i| i.data.len() as u64)),
            None if st.dir_exists(&key) => Ok(0),
            None => Err(Error::io("stat", path, os_err(libc::ENOENT))),
        }
    }

    fn lock(&self, path: &Path) -> Result<Box<dyn FileLock>> {
        let key = norm(path);
        let mut st = self.state.lock();
        if st.dirs.contains(&key) || key.parent().is_none() {
            return Err(Error::io("open lock", path, os_err(libc::EISDIR)));
        }
        if !st.dir_exists(parent_of(&key)) {
            return Err(Error::io("open lock", path, os_err(libc::ENOENT)));
        }
        if st.locks.contains(&key) {
            return Err(Error::Busy(format!("{} is already locked by this process", path.display())));
        }
        if !st.live.contains_key(&key) {
            let ino = st.new_inode(Inode::default());
            st.live.insert(key.clone(), ino);
        }
        st.locks.insert(key.clone());
        Ok(Box::new(MemLock { state: Arc::clone(&self.state), key, epoch: st.epoch }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::PosixFs;

    fn p(s: &str) -> PathBuf {
        PathBuf::from(s)
    }

    /// A MemFs with directory `/db` made.
    fn fs_with_db() -> MemFs {
        let fs = MemFs::new();
        fs.create_dir_all(&p("/db")).unwrap();
        fs
    }

    fn write_synced(fs: &MemFs, path: &Path, data: &[u8]) {
        let mut w = fs.create(path).unwrap();
        w.append(data).unwrap();
        w.sync().unwrap();
    }

    // The scenarios of the POSIX tests, run against both implementations: MemFs must behave as the OS does.

    fn scenario_write_read_rename_list(fs: &dyn Fs, dir: &Path) {
        let a = dir.join("a");
        let mut w = fs.create(&a).unwrap();
        w.append(b"hello ").unwrap();
        w.append(b"world").unwrap();
        assert_eq!(w.len(), 11);
        w.sync().unwrap();
        drop(w);
        assert_eq!(fs.read_all(&a).unwrap(), b"hello world");
        assert_eq!(fs.file_size(&a).unwrap(), 11);
        let b = dir.join("b");
        fs.rename(&a, &b).unwrap();
        fs.sync_dir(dir).unwrap();
        assert!(!fs.exists(&a));
        assert!(fs.exists(&b));
        assert_eq!(fs.list(dir).unwrap(), vec!["b".to_string()]);
        let r = fs.open(&b, ReadHints::default()).unwrap();
        assert_eq!(r.len(), 11);
        let mut buf = [0u8; 5];
        r.read_exact_at(&mut buf, 6).unwrap();
        assert_eq!(&buf, b"world");
        let err = r.read_exact_at(&mut buf, 9).unwrap_err();
        assert!(err.is_io());
        assert!(r.read_exact_at(&mut buf, u64::MAX).is_err());
        fs.remove(&b).unwrap();
        assert!(fs.list(dir).unwrap().is_empty());
        assert!(fs.remove(&b).unwrap_err().is_io());
    }

    fn scenario_lock(fs: &dyn Fs, dir: &Path) {
        let lock = dir.join("LOCK");
        let l = fs.lock(&lock).unwrap();
        assert!(fs.exists(&lock), "lock creates the file");
        assert!(fs.lock(&lock).err().unwrap().is_busy());
        drop(l);
        fs.lock(&lock).unwrap();
    }

    fn scenario_missing_paths(fs: &dyn Fs, dir: &Path) {
        let missing = dir.join("nonexistent").join("x");
        let err = fs.open(&missing, ReadHints::default()).err().unwrap();
        assert!(err.is_io());
        assert!(err.to_string().contains("nonexistent"));
        assert!(fs.create(&missing).is_err(), "parent directory missing");
        assert!(fs.list(&dir.join("nonexistent")).is_err());
        assert!(fs.file_size(&missing).is_err());
        assert!(!fs.exists(&missing));
        fs.create_dir_all(&dir.join("nonexistent")).unwrap();
        drop(fs.create(&missing).unwrap());
        assert!(fs.exists(&missing));
        assert_eq!(fs.list(dir).unwrap(), vec!["nonexistent".to_string()]);
    }

    fn scenario_rename_replaces(fs: &dyn Fs, dir: &Path) {
        let (from, to) = (dir.join("CURRENT.tmp"), dir.join("CURRENT"));
        for (path, data) in [(&to, &b"old"[..]), (&from, &b"new"[..])] {
            let mut w = fs.create(path).unwrap();
            w.append(data).unwrap();
            w.flush().unwrap();
        }
        fs.rename(&from, &to).unwrap();
        assert_eq!(fs.read_all(&to).unwrap(), b"new");
        assert_eq!(fs.list(dir).unwrap(), vec!["CURRENT".to_string()]);
        // Re-creating truncates.
        drop(fs.create(&to).unwrap());
        assert_eq!(fs.file_size(&to).unwrap(), 0);
    }

    #[test]
    fn posix_scenarios_hold_for_both_implementations() {
        type Scenario = fn(&dyn Fs, &Path);
        let scenarios: [Scenario; 4] =
            [scenario_write_read_rename_list, scenario_lock, scenario_missing_paths, scenario_rename_replaces];
        for scenario in scenarios {
            let dir = tempfile::tempdir().unwrap();
            scenario(&PosixFs::new(), dir.path());
            let mem = fs_with_db();
            scenario(&mem, Path::new("/db"));
        }
    }

    #[test]
    fn unflushed_appends_are_lost_at_kill_flushed_ones_survive() {
        let fs = fs_with_db();
        let mut w = fs.create(&p("/db/log")).unwrap();
        w.append(b"flushed").unwrap();
        w.flush().unwrap();
        w.append(b"buffered").unwrap();
        assert_eq!(fs.read_file(&p("/db/log")).unwrap(), b"flushed");
        fs.kill_process();
        assert_eq!(fs.read_file(&p("/db/log")).unwrap(), b"flushed");
        assert_eq!(fs.file_names(&p("/db")), vec!["log".to_string()], "the OS namespace survives a kill");
    }

    #[test]
    fn dropping_a_writer_does_not_flush() {
        let fs = fs_with_db();
        let mut w = fs.create(&p("/db/f")).unwrap();
        w.append(b"lost").unwrap();
        drop(w);
        assert_eq!(fs.read_file(&p("/db/f")).unwrap(), b"");
    }

    #[test]
    fn power_loss_keeps_exactly_the_synced_prefix() {
        let fs = fs_with_db();
        fs.sync_dir(&p("/db")).unwrap();
        let mut w = fs.create(&p("/db/log")).unwrap();
        fs.sync_dir(&p("/db")).unwrap();
        w.append(b"synced;").unwrap();
        w.sync().unwrap();
        w.append(b"flushed;").unwrap();
        w.flush().unwrap();
        w.append(b"buffered").unwrap();
        fs.power_loss(PowerLoss::DropUnsynced, 1);
        assert_eq!(fs.read_file(&p("/db/log")).unwrap(), b"synced;");
    }

    #[test]
    fn create_is_durable_only_after_dir_sync() {
        let fs = fs_with_db();
        write_synced(&fs, &p("/db/a"), b"data");
        fs.power_loss(PowerLoss::DropUnsynced, 0);
        assert_eq!(fs.read_file(&p("/db/a")), None, "file synced, directory not");

        write_synced(&fs, &p("/db/a"), b"data");
        fs.sync_dir(&p("/db")).unwrap();
        fs.power_loss(PowerLoss::DropUnsynced, 0);
        assert_eq!(fs.read_file(&p("/db/a")).unwrap(), b"data");
    }

    #[test]
    fn rename_is_durable_only_after_dir_sync() {
        let fs = fs_with_db();
        fs.write_file(&p("/db/CURRENT"), b"MANIFEST-1");
        write_synced(&fs, &p("/db/CURRENT.tmp"), b"MANIFEST-2");
        fs.rename(&p("/db/CURRENT.tmp"), &p("/db/CURRENT")).unwrap();
        assert_eq!(fs.read_file(&p("/db/CURRENT")).unwrap(), b"MANIFEST-2");
        let snapshot = fs.deep_clone();
        fs.power_loss(PowerLoss::DropUnsynced, 0);
        assert_eq!(fs.read_file(&p("/db/CURRENT")).unwrap(), b"MANIFEST-1");
        assert_eq!(fs.file_names(&p("/db")), vec!["CURRENT".to_string()]);

        snapshot.sync_dir(&p("/db")).unwrap();
        snapshot.power_loss(PowerLoss::DropUnsynced, 0);
        assert_eq!(snapshot.read_file(&p("/db/CURRENT")).unwrap(), b"MANIFEST-2");
        assert_eq!(snapshot.file_names(&p("/db")), vec!["CURRENT".to_string()]);
    }

    #[test]
    fn rename_across_directories_needs_both_synced() {
        let fs = fs_with_db();
        fs.create_dir_all(&p("/db/archive")).unwrap();
        fs.write_file(&p("/db/old.log"), b"x");
        fs.rename(&p("/db/old.log"), &p("/db/archive/old.log")).unwrap();
        fs.sync_dir(&p("/db/archive")).unwrap();
        let only_target = fs.deep_clone();
        only_target.power_loss(PowerLoss::DropUnsynced, 0);
        // Both names exist: the source directory still holds its entry. Hard links are what a real FS shows.
        assert_eq!(only_target.read_file(&p("/db/old.log")).unwrap(), b"x");
        assert_eq!(only_target.read_file(&p("/db/archive/old.log")).unwrap(), b"x");
        fs.sync_dir(&p("/db")).unwrap();
        fs.power_loss(PowerLoss::DropUnsynced, 0);
        assert_eq!(fs.read_file(&p("/db/old.log")), None);
        assert_eq!(fs.read_file(&p("/db/archive/old.log")).unwrap(), b"x");
    }

    #[test]
    fn remove_is_durable_only_after_dir_sync() {
        let fs = fs_with_db();
        fs.write_file(&p("/db/000001.sst"), b"table");
        fs.remove(&p("/db/000001.sst")).unwrap();
        assert!(!fs.exists(&p("/db/000001.sst")));
        let unsynced = fs.deep_clone();
        unsynced.power_loss(PowerLoss::DropUnsynced, 0);
        assert_eq!(unsynced.read_file(&p("/db/000001.sst")).unwrap(), b"table", "resurrected");

        fs.sync_dir(&p("/db")).unwrap();
        fs.power_loss(PowerLoss::DropUnsynced, 0);
        assert!(!fs.exists(&p("/db/000001.sst")));
    }

    #[test]
    fn removed_file_stays_readable_through_open_handle() {
        let fs = fs_with_db();
        fs.write_file(&p("/db/t"), b"abc");
        let r = fs.open(&p("/db/t"), ReadHints::default()).unwrap();
        fs.remove(&p("/db/t")).unwrap();
        fs.sync_dir(&p("/db")).unwrap();
        let mut buf = [0u8; 3];
        r.read_exact_at(&mut buf, 0).unwrap();
        assert_eq!(&buf, b"abc");
        drop(r);
        assert!(fs.state.lock().inodes.is_empty(), "unlinked inode freed with its last handle");
    }

    #[test]
    fn recreated_file_reverts_to_old_contents_until_synced() {
        let fs = fs_with_db();
        fs.write_file(&p("/db/OPTIONS"), b"old options");
        let mut w = fs.create(&p("/db/OPTIONS")).unwrap();
        w.append(b"new").unwrap();
        w.flush().unwrap();
        let before_sync = fs.deep_clone();
        w.sync().unwrap();
        before_sync.power_loss(PowerLoss::KeepRandomPages { keep_probability: 1.0 }, 3);
        assert_eq!(before_sync.read_file(&p("/db/OPTIONS")).unwrap(), b"old options");
        fs.power_loss(PowerLoss::DropUnsynced, 0);
        assert_eq!(fs.read_file(&p("/db/OPTIONS")).unwrap(), b"new");
    }

    /// A durable file with one synced page and `pages` unsynced ones, page i filled with byte `i + 1`.
    fn torn_candidate(pages: usize) -> MemFs {
        let fs = fs_with_db();
        let mut w = fs.create(&p("/db/wal")).unwrap();
        fs.sync_dir(&p("/db")).unwrap();
        w.append(&[0xAA; PAGE]).unwrap();
        w.sync().unwrap();
        for i in 0..pages {
            w.append(&[i as u8 + 1; PAGE]).unwrap();
        }
        w.flush().unwrap();
        fs
    }

    fn after_loss(fs: &MemFs, mode: PowerLoss, seed: u64) -> Vec<u8> {
        let copy = fs.deep_clone();
        copy.power_loss(mode, seed);
        copy.read_file(&p("/db/wal")).unwrap()
    }

    #[test]
    fn random_page_keep_is_seeded_and_replayable() {
        let fs = torn_candidate(16);
        let mode = PowerLoss::KeepRandomPages { keep_probability: 0.5 };
        let outcomes: Vec<Vec<u8>> = (0..20).map(|seed| after_loss(&fs, mode, seed)).collect();
        for (seed, outcome) in outcomes.iter().enumerate() {
            assert_eq!(&after_loss(&fs, mode, seed as u64), outcome, "seed {seed} replays");
            assert_eq!(outcome.get(..PAGE), Some(&[0xAA; PAGE][..]), "synced page always survives");
            assert_eq!(outcome.len() % PAGE, 0);
            for (i, page) in outcome.chunks(PAGE).enumerate().skip(1) {
                assert!(page == [i as u8; PAGE] || page == [0; PAGE], "page {i} is either kept or a hole");
            }
        }
        assert!(outcomes.windows(2).any(|w| w[0] != w[1]), "different seeds give different tears");
        // A torn tail: some outcome keeps a later page while an earlier one is lost.
        assert!(outcomes.iter().any(|o| o.chunks(PAGE).skip(1).any(|pg| pg == [0; PAGE])));
        assert_eq!(after_loss(&fs, PowerLoss::KeepRandomPages { keep_probability: 0.0 }, 9).len(), PAGE);
        assert_eq!(after_loss(&fs, PowerLoss::KeepRandomPages { keep_probability: 1.0 }, 9).len(), 17 * PAGE);
    }

    #[test]
    fn random_page_keep_splits_at_page_boundaries_not_at_sync_point() {
        let fs = fs_with_db();
        let mut w = fs.create(&p("/db/wal")).unwrap();
        fs.sync_dir(&p("/db")).unwrap();
        w.append(&[1; 100]).unwrap();
        w.sync().unwrap();
        w.append(&[2; PAGE]).unwrap();
        w.flush().unwrap();
        let lens: BTreeSet<usize> = (0..40)
            .map(|seed| after_loss(&fs, PowerLoss::KeepRandomPages { keep_probability: 0.5 }, seed).len())
            .collect();
        // Pages [100, 4096) and [4096, 4196): the file ends at 100, 4096 or 4196.
        assert!(lens.is_subset(&BTreeSet::from([100, PAGE, PAGE + 100])));
        assert!(lens.len() >= 2);
    }

    #[test]
    fn garble_replaces_the_unsynced_tail() {
        let fs = torn_candidate(2);
        let out = after_loss(&fs, PowerLoss::GarbleUnsynced, 5);
        assert_eq!(out.len(), 3 * PAGE);
        assert_eq!(&out[..PAGE], &[0xAA; PAGE][..]);
        assert_ne!(&out[PAGE..2 * PAGE], &[1; PAGE][..]);
        assert_eq!(out, after_loss(&fs, PowerLoss::GarbleUnsynced, 5));
    }

    #[test]
    fn nth_fault_fires_exactly_once() {
        let fs = fs_with_db();
        let mut w = fs.create(&p("/db/f")).unwrap();
        fs.set_faults(FaultPlan::once(FsOp::Write, 3, FaultError::Eio));
        for chunk in [b"1", b"2"] {
            w.append(chunk).unwrap();
            w.flush().unwrap();
        }
        w.append(b"3").unwrap();
        let err = w.flush().unwrap_err();
        assert!(err.is_io() && !err.is_no_space());
        assert_eq!(fs.read_file(&p("/db/f")).unwrap(), b"12", "a failed write appends nothing");
        w.flush().unwrap();
        w.append(b"4").unwrap();
        w.flush().unwrap();
        assert_eq!(fs.read_file(&p("/db/f")).unwrap(), b"1234");
        assert_eq!(fs.op_count(FsOp::Write), 5);
    }

    #[test]
    fn persistent_fault_fails_every_later_op() {
        let fs = fs_with_db();
        fs.write_file(&p("/db/f"), b"abc");
        let r = fs.open(&p("/db/f"), ReadHints::default()).unwrap();
        let mut buf = [0u8; 1];
        r.read_exact_at(&mut buf, 0).unwrap();
        // Counting starts when the plan is set.
        fs.set_faults(FaultPlan::from_nth(FsOp::Read, 2, FaultError::Eio));
        r.read_exact_at(&mut buf, 0).unwrap();
        for _ in 0..3 {
            assert!(r.read_exact_at(&mut buf, 0).is_err());
        }
        fs.clear_faults();
        r.read_exact_at(&mut buf, 0).unwrap();
        assert_eq!(fs.op_count(FsOp::Read), 6);
    }

    #[test]
    fn enospc_shows_as_no_space() {
        let fs = fs_with_db();
        let mut w = fs.create(&p("/db/f")).unwrap();
        w.append(b"x").unwrap();
        fs.set_faults(FaultPlan::from_nth(FsOp::Write, 1, FaultError::Enospc));
        let err = w.sync().unwrap_err();
        assert!(err.is_no_space(), "{err}");
        assert_eq!(fs.op_count(FsOp::Sync), 0, "sync stopped at its flush");
    }

    #[test]
    fn failed_sync_makes_nothing_durable() {
        let fs = fs_with_db();
        let mut w = fs.create(&p("/db/f")).unwrap();
        fs.sync_dir(&p("/db")).unwrap();
        w.append(b"x").unwrap();
        fs.set_faults(FaultPlan::once(FsOp::Sync, 1, FaultError::Eio));
        assert!(w.sync().is_err());
        assert_eq!(fs.read_file(&p("/db/f")).unwrap(), b"x", "the write reached the OS");
        fs.power_loss(PowerLoss::DropUnsynced, 0);
        assert_eq!(fs.read_file(&p("/db/f")).unwrap(), b"");
    }

    #[test]
    fn failed_namespace_ops_change_nothing() {
        let fs = fs_with_db();
        fs.write_file(&p("/db/a"), b"a");
        fs.set_faults(FaultPlan::from_nth(FsOp::Rename, 1, FaultError::Eio));
        assert!(fs.rename(&p("/db/a"), &p("/db/b")).is_err());
        fs.set_faults(FaultPlan::from_nth(FsOp::Remove, 1, FaultError::Eio));
        assert!(fs.remove(&p("/db/a")).is_err());
        fs.set_faults(FaultPlan::from_nth(FsOp::Create, 1, FaultError::Enospc));
        assert!(fs.create(&p("/db/c")).err().unwrap().is_no_space());
        fs.set_faults(FaultPlan::from_nth(FsOp::Open, 1, FaultError::Eio));
        assert!(fs.open(&p("/db/a"), ReadHints::default()).is_err());
        assert!(fs.read_all(&p("/db/a")).is_err());
        assert_eq!(fs.file_names(&p("/db")), vec!["a".to_string()]);

        fs.clear_faults();
        fs.rename(&p("/db/a"), &p("/db/b")).unwrap();
        fs.set_faults(FaultPlan::once(FsOp::SyncDir, 1, FaultError::Eio));
        assert!(fs.sync_dir(&p("/db")).is_err());
        fs.power_loss(PowerLoss::DropUnsynced, 0);
        assert_eq!(fs.file_names(&p("/db")), vec!["a".to_string()], "failed dir sync made nothing durable");
    }

    #[test]
    fn op_count_counts_each_class() {
        let fs = fs_with_db();
        let mut w = fs.create(&p("/db/f")).unwrap();
        w.flush().unwrap(); // empty: no write(2)
        w.append(b"x").unwrap();
        w.sync().unwrap();
        w.sync().unwrap();
        drop(w);
        fs.sync_dir(&p("/db")).unwrap();
        fs.rename(&p("/db/f"), &p("/db/g")).unwrap();
        fs.read_all(&p("/db/g")).unwrap();
        fs.remove(&p("/db/g")).unwrap();
        let counts: Vec<u64> = FsOp::ALL.iter().map(|op| fs.op_count(*op)).collect();
        // Read, Write, Sync, Create, Rename, Remove, SyncDir, Open
        assert_eq!(counts, vec![1, 1, 2, 1, 1, 1, 1, 1]);
    }

    #[test]
    fn handles_are_dead_after_kill() {
        let fs = fs_with_db();
        fs.write_file(&p("/db/r"), b"abc");
        let r = fs.open(&p("/db/r"), ReadHints::default()).unwrap();
        let mut w = fs.create(&p("/db/w")).unwrap();
        w.append(b"x").unwrap();
        fs.kill_process();
        let mut buf = [0u8; 1];
        assert!(r.read_exact_at(&mut buf, 0).unwrap_err().is_io());
        assert!(w.append(b"y").unwrap_err().is_io());
        assert!(w.flush().unwrap_err().is_io());
        assert!(w.sync().unwrap_err().is_io());
        assert_eq!(fs.read_file(&p("/db/w")).unwrap(), b"");
        assert_eq!(fs.op_count(FsOp::Read), 0, "calls on dead handles are not counted");
        // The new "process" works normally.
        let r2 = fs.open(&p("/db/r"), ReadHints::default()).unwrap();
        r2.read_exact_at(&mut buf, 2).unwrap();
        assert_eq!(&buf, b"c");
    }

    #[test]
    fn handles_are_dead_after_power_loss() {
        let fs = fs_with_db();
        let mut w = fs.create(&p("/db/w")).unwrap();
        fs.power_loss(PowerLoss::GarbleUnsynced, 7);
        assert!(w.append(b"y").is_err());
        assert!(w.sync().is_err());
    }

    #[test]
    fn crash_releases_locks_and_stale_lock_drop_keeps_new_one() {
        for crash in [|fs: &MemFs| fs.kill_process(), |fs: &MemFs| fs.power_loss(PowerLoss::DropUnsynced, 0)] {
            let fs = fs_with_db();
            let stale = fs.lock(&p("/db/LOCK")).unwrap();
            crash(&fs);
            let fresh = fs.lock(&p("/db/LOCK")).unwrap();
            drop(stale);
            assert!(fs.lock(&p("/db/LOCK")).err().unwrap().is_busy());
            drop(fresh);
            fs.lock(&p("/db/LOCK")).unwrap();
        }
    }

    #[test]
    fn deep_clone_is_independent() {
        let fs = fs_with_db();
        fs.write_file(&p("/db/a"), b"1");
        let _lock = fs.lock(&p("/db/LOCK")).unwrap();
        fs.set_faults(FaultPlan::from_nth(FsOp::Create, 1, FaultError::Eio));
        let copy = fs.deep_clone();
        copy.write_file(&p("/db/a"), b"2");
        drop(copy.create(&p("/db/b")).unwrap()); // no fault plan in the copy
        copy.lock(&p("/db/LOCK")).unwrap(); // no locks in the copy
        assert_eq!(fs.read_file(&p("/db/a")).unwrap(), b"1");
        assert!(!fs.exists(&p("/db/b")));
        assert!(fs.create(&p("/db/b")).is_err());
    }

    #[test]
    fn write_file_is_durable_at_once() {
        let fs = MemFs::new();
        fs.write_file(&p("/x/y/z"), b"bytes");
        assert!(fs.exists(&p("/x/y")));
        fs.power_loss(PowerLoss::DropUnsynced, 0);
        assert_eq!(fs.read_file(&p("/x/y/z")).unwrap(), b"bytes");
        assert_eq!(fs.list(&p("/x")).unwrap(), vec!["y".to_string()]);
        assert_eq!(fs.file_names(&p("/x")), Vec::<String>::new());
    }

    #[test]
    fn paths_are_normalised() {
        let fs = fs_with_db();
        fs.write_file(&p("/db/./a"), b"1");
        assert_eq!(fs.read_file(&p("/db//a")).unwrap(), b"1");
        assert_eq!(fs.list(&p("/db/")).unwrap(), vec!["a".to_string()]);
    }

    #[test]
    fn mem_fs_works_as_shared_dyn_fs() {
        let fs = fs_with_db();
        let engine: Arc<dyn Fs> = Arc::new(fs.clone());
        let mut w = engine.create(&p("/db/f")).unwrap();
        w.append(b"via engine").unwrap();
        w.flush().unwrap();
        assert_eq!(fs.read_file(&p("/db/f")).unwrap(), b"via engine");
        assert!(format!("{fs:?}").contains("MemFs"));
    }
}
