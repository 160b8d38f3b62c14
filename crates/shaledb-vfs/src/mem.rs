//! An in-memory [`Fs`] for crash and fault tests.
//!
//! [`MemFs`] models the three places a byte can be, so tests can cut the power at any point and check what
//! the engine recovers:
//!
//! - *appended*: in the writer's user-space buffer; lost when the process dies ([`MemFs::kill_process`]);
//! - *flushed*: handed to the "operating system"; survives a process kill, lost at a power loss unless synced;
//! - *synced*: durable; survives [`MemFs::power_loss`]. A writer's `sync` makes its flushed bytes durable, and
//!   so does a [`SyncHandle`](crate::SyncHandle) from it, for the bytes flushed before the handle's `sync` began.
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
//! Links and directories: [`Fs::hard_link`] adds a second live name of the same inode (durable after a
//! `sync_dir` of its parent, counted and failed as an [`FsOp::Create`]). A directory rename moves everything
//! below it in the live namespace at once, and in the durable one when the new name's parent is synced; a
//! power loss before that moves it back. [`Fs::remove_dir`] (an [`FsOp::Remove`]) removes an empty directory.
//!
//! Faults: [`MemFs::set_faults`] makes the n-th operation of one class ([`FsOp`]) fail with `EIO` or
//! `ENOSPC`, once or from then on. A failed operation changes nothing (a failed flush appends nothing and keeps
//! the writer's buffer, as the POSIX writer does).
//!
//! Crash points: [`MemFs::record_before`] keeps a copy of the whole file system just before chosen operations,
//! so one run of a workload yields every crash point of interest, including those inside background jobs.

mod fault;
mod handles;

use fault::ActiveFault;
pub use fault::{FaultError, FaultPlan, FsOp};
use handles::{MemLock, MemRandom, MemWritable};

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

/// Chooses the operations before which [`MemFs::record_before`] keeps a copy: `(class, path, index)`, where
/// `index` counts every operation since recording started, from 1.
type Selector = Arc<dyn Fn(FsOp, &Path, u64) -> bool + Send + Sync>;

struct Recorder {
    select: Selector,
    seen: u64,
    taken: Vec<(State, FsOp, PathBuf, u64, u64)>,
}

impl std::fmt::Debug for Recorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recorder").field("seen", &self.seen).field("taken", &self.taken.len()).finish()
    }
}

/// A copy of a [`MemFs`] taken by [`MemFs::record_before`] just before an operation ran.
#[derive(Debug)]
pub struct Recorded {
    /// The file system as a crash at that moment leaves it to the OS (see [`MemFs::deep_clone`]): apply
    /// [`MemFs::power_loss`] to it for a power cut, or use it as is for a process kill.
    pub fs: MemFs,
    /// The operation about to run.
    pub op: FsOp,
    /// Its path.
    pub path: PathBuf,
    /// Its index among the operations seen since recording started, from 1.
    pub index: u64,
    /// The last value given to [`MemFs::set_tag`] (e.g. how many writes the test had acknowledged).
    pub tag: u64,
}

#[derive(Debug, Default)]
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
    /// Set by the test, copied into each [`Recorded`].
    tag: u64,
    /// Operations failed by fault plans so far.
    faults_fired: u64,
    recorder: Option<Recorder>,
    /// Directory renames `(from, to)` not yet made durable by a [`Fs::sync_dir`] on `to`'s parent: a power
    /// loss moves the directory back.
    dir_renames: Vec<(PathBuf, PathBuf)>,
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

/// `path` moved from under `from` to under `to`; `None` when it is not `from` or below it.
fn rebase(path: &Path, from: &Path, to: &Path) -> Option<PathBuf> {
    let rest = path.strip_prefix(from).ok()?;
    Some(if rest.as_os_str().is_empty() { to.to_path_buf() } else { to.join(rest) })
}

impl State {
    /// What the OS holds if the process dies now: no handles, no locks, no fault plan, no recorder.
    fn crash_copy(&self) -> State {
        let mut st = State {
            inodes: self.inodes.clone(),
            next_ino: self.next_ino,
            live: self.live.clone(),
            durable: self.durable.clone(),
            dirs: self.dirs.clone(),
            locks: HashSet::new(),
            epoch: self.epoch,
            counts: self.counts,
            fault: None,
            faults_fired: 0,
            tag: self.tag,
            recorder: None,
            dir_renames: self.dir_renames.clone(),
        };
        st.end_process();
        st.gc();
        st
    }

    /// Counts an operation, records a copy when the recorder selects it, and fires the fault plan when it
    /// applies.
    fn begin(&mut self, op: FsOp, what: &'static str, path: &Path) -> Result<()> {
        self.counts[op.index()] += 1;
        if let Some(mut rec) = self.recorder.take() {
            rec.seen += 1;
            if (rec.select)(op, path, rec.seen) {
                rec.taken.push((self.crash_copy(), op, path.to_path_buf(), rec.seen, self.tag));
            }
            self.recorder = Some(rec);
        }
        if let Some(fault) = self.fault.as_mut() {
            let path_matches = fault.plan.path_contains.is_none_or(|t| path.to_string_lossy().contains(t));
            if fault.plan.op == op && path_matches {
                fault.seen += 1;
                let nth = fault.plan.nth.max(1);
                if fault.seen == nth || (fault.plan.persistent && fault.seen > nth) {
                    self.faults_fired += 1;
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

    /// Renames directory `src` (with everything below it) to `dst`, which must not exist or be an empty
    /// directory. The live namespace changes at once; the durable one when `dst`'s parent is synced.
    fn rename_dir(&mut self, from: &Path, src: &Path, dst: &Path) -> Result<()> {
        if src == dst {
            return Ok(());
        }
        if dst.starts_with(src) {
            return Err(Error::io("rename", from, os_err(libc::EINVAL)));
        }
        if self.live.contains_key(dst) {
            return Err(Error::io("rename", from, os_err(libc::ENOTDIR)));
        }
        if self.dirs.contains(dst) && self.live.keys().chain(self.dirs.iter()).any(|p| parent_of(p) == dst) {
            return Err(Error::io("rename", from, os_err(libc::ENOTEMPTY)));
        }
        if dst.parent().is_none() || !self.dir_exists(parent_of(dst)) {
            return Err(Error::io("rename", from, os_err(libc::ENOENT)));
        }
        self.dirs.remove(dst);
        self.dirs = self.dirs.iter().map(|d| rebase(d, src, dst).unwrap_or_else(|| d.clone())).collect();
        self.live =
            std::mem::take(&mut self.live).into_iter().map(|(p, i)| (rebase(&p, src, dst).unwrap_or(p), i)).collect();
        self.dir_renames.push((src.to_path_buf(), dst.to_path_buf()));
        Ok(())
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
        // Directory renames never made durable are undone (the entries under them already are: they stayed
        // under the old name in the durable namespace).
        for (from, to) in std::mem::take(&mut st.dir_renames).into_iter().rev() {
            st.dirs = st.dirs.iter().map(|d| rebase(d, &to, &from).unwrap_or_else(|| d.clone())).collect();
        }
    }

    /// Installs a fault plan, replacing any earlier one; its count starts now.
    pub fn set_faults(&self, plan: FaultPlan) {
        self.state.lock().fault = Some(ActiveFault { plan, seen: 0 });
    }

    /// How many operations fault plans have failed so far (all plans, since this file system was made): tells
    /// a sweep whether its plan was reached.
    pub fn faults_fired(&self) -> u64 {
        self.state.lock().faults_fired
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
        let st = self.state.lock().crash_copy();
        MemFs { state: Arc::new(Mutex::new(st)) }
    }

    /// Starts keeping a copy of the file system (as [`MemFs::deep_clone`] makes it) just before each
    /// operation that `select(class, path, index)` picks, `index` counting every operation from 1 from now
    /// on. Crash points inside background work (a flush between its table and its MANIFEST edit) are reached
    /// this way. Replaces an earlier recorder and drops what it kept. `select` runs under the file system's
    /// lock: it must not call back into this file system.
    pub fn record_before<F>(&self, select: F)
    where
        F: Fn(FsOp, &Path, u64) -> bool + Send + Sync + 'static,
    {
        self.state.lock().recorder = Some(Recorder { select: Arc::new(select), seen: 0, taken: Vec::new() });
    }

    /// Stops recording and returns the copies kept, oldest first.
    pub fn stop_recording(&self) -> Vec<Recorded> {
        let Some(rec) = self.state.lock().recorder.take() else { return Vec::new() };
        rec.taken
            .into_iter()
            .map(|(st, op, path, index, tag)| Recorded {
                fs: MemFs { state: Arc::new(Mutex::new(st)) },
                op,
                path,
                index,
                tag,
            })
            .collect()
    }

    /// Sets the tag copied into every later [`Recorded`]; a test stores its progress there (operations
    /// acknowledged so far) to know what a copy must contain.
    pub fn set_tag(&self, tag: u64) {
        self.state.lock().tag = tag;
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

    fn open_append(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        let key = norm(path);
        let mut st = self.state.lock();
        st.begin(FsOp::Open, "open for append", path)?;
        let Some(ino) = st.live.get(&key).copied() else {
            let code = if st.dirs.contains(&key) { libc::EISDIR } else { libc::ENOENT };
            return Err(Error::io("open for append", path, os_err(code)));
        };
        let inode = st.inodes.entry(ino).or_default();
        inode.handles += 1;
        let len = inode.data.len() as u64;
        Ok(Box::new(MemWritable {
            state: Arc::clone(&self.state),
            ino,
            epoch: st.epoch,
            path: path.to_path_buf(),
            buf: Vec::new(),
            len,
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
        if st.dirs.contains(&src) {
            return st.rename_dir(from, &src, &dst);
        }
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

    fn hard_link(&self, from: &Path, to: &Path) -> Result<()> {
        let (src, dst) = (norm(from), norm(to));
        let mut st = self.state.lock();
        // A link creates a directory entry: counted and failed as a create.
        st.begin(FsOp::Create, "link", from)?;
        let Some(ino) = st.live.get(&src).copied() else {
            let code = if st.dirs.contains(&src) { libc::EPERM } else { libc::ENOENT };
            return Err(Error::io("link", from, os_err(code)));
        };
        if st.live.contains_key(&dst) || st.dirs.contains(&dst) || dst.parent().is_none() {
            return Err(Error::io("link", to, os_err(libc::EEXIST)));
        }
        if !st.dir_exists(parent_of(&dst)) {
            return Err(Error::io("link", to, os_err(libc::ENOENT)));
        }
        st.live.insert(dst, ino);
        Ok(())
    }

    fn remove_dir(&self, dir: &Path) -> Result<()> {
        let key = norm(dir);
        let mut st = self.state.lock();
        st.begin(FsOp::Remove, "rmdir", dir)?;
        if !st.dirs.contains(&key) {
            let code = if st.live.contains_key(&key) { libc::ENOTDIR } else { libc::ENOENT };
            return Err(Error::io("rmdir", dir, os_err(code)));
        }
        if st.live.keys().chain(st.dirs.iter()).any(|p| parent_of(p) == key) {
            return Err(Error::io("rmdir", dir, os_err(libc::ENOTEMPTY)));
        }
        st.dirs.remove(&key);
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
        // Directory renames into `dir` become durable: the durable entries below them move along.
        let (done, pending): (Vec<_>, Vec<_>) =
            std::mem::take(&mut st.dir_renames).into_iter().partition(|(_, to)| parent_of(to) == key);
        st.dir_renames = pending;
        for (from, to) in done {
            let moved: Vec<(PathBuf, u64)> =
                st.durable.iter().filter_map(|(p, i)| rebase(p, &from, &to).map(|np| (np, *i))).collect();
            st.durable.retain(|p, _| rebase(p, &from, &to).is_none());
            st.durable.extend(moved);
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
mod tests;
