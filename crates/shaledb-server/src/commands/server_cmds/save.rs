//! SAVE, BGSAVE and LASTSAVE: a checkpoint of the served database ([`shaledb::Db::create_checkpoint`]).
//!
//! Every acknowledged write is already in the WAL (fsynced as `appendfsync` says), so a save is a copy, not a
//! durability step. SAVE writes the copy into a new directory, `<dir>/checkpoints/<unix-seconds>` (with
//! `-2`, `-3` ... appended when that name is taken: nothing existing is ever overwritten or removed), and
//! answers when it is complete; BGSAVE does the same on a thread of its own. The copy is a whole database
//! directory: `shaledb server --dir <that directory>` serves it (tables are hard links to the live ones, so it
//! costs little space until compaction replaces them). LASTSAVE and `INFO persistence` report the time of the
//! last one that succeeded (the start's time before any), whether one is running, and where the last went.

use crate::resp::{Args, Reply};
use crate::server::{Session, Shared};
use parking_lot::{Condvar, Mutex};
use shaledb::Db;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The state of saves (`LASTSAVE`, `INFO persistence`).
#[derive(Debug, Default)]
pub struct Saves {
    state: Mutex<SaveState>,
    idle: Condvar,
}

/// What `INFO persistence` shows of saves.
#[derive(Debug, Default, Clone)]
pub struct SaveState {
    /// A save is running (SAVE or BGSAVE).
    pub in_progress: bool,
    /// Unix seconds of the last save that succeeded (0: none yet).
    pub last_ok_unix: u64,
    /// The last save failed (and why).
    pub last_error: Option<String>,
    /// Where the last successful save went.
    pub last_dir: Option<PathBuf>,
}

impl Saves {
    pub fn state(&self) -> SaveState {
        self.state.lock().clone()
    }

    /// Waits until no save is running (the server's shutdown, before the engine is closed).
    pub fn wait_idle(&self) {
        let mut s = self.state.lock();
        while s.in_progress {
            self.idle.wait(&mut s);
        }
    }

    /// Marks a save as started; false when one is already running.
    fn begin(&self) -> bool {
        let mut s = self.state.lock();
        !std::mem::replace(&mut s.in_progress, true)
    }

    fn finish(&self, result: &Result<PathBuf, String>) {
        let mut s = self.state.lock();
        s.in_progress = false;
        match result {
            Ok(dir) => {
                s.last_ok_unix = crate::store::now_ms() / 1000;
                s.last_error = None;
                s.last_dir = Some(dir.clone());
            }
            Err(e) => s.last_error = Some(e.clone()),
        }
        self.idle.notify_all();
    }
}

/// A fresh directory name under `<dir>/checkpoints`: `<unix-seconds>`, or `<unix-seconds>-N` when taken.
fn fresh_target(db_dir: &Path) -> std::io::Result<PathBuf> {
    let parent = db_dir.join("checkpoints");
    std::fs::create_dir_all(&parent)?;
    let secs = crate::store::now_ms() / 1000;
    for n in 1u32.. {
        let name = if n == 1 { secs.to_string() } else { format!("{secs}-{n}") };
        let target = parent.join(&name);
        let staging = parent.join(format!("{name}.tmp"));
        if !target.exists() && !staging.exists() {
            return Ok(target);
        }
    }
    Err(std::io::Error::other("no free checkpoint name"))
}

/// Writes one checkpoint; the directory it went to, or why it failed.
fn checkpoint(db: &Db, db_dir: &Path) -> Result<PathBuf, String> {
    let target = fresh_target(db_dir).map_err(|e| format!("creating {}/checkpoints: {e}", db_dir.display()))?;
    db.create_checkpoint(&target).map_err(|e| format!("checkpoint into {}: {e}", target.display()))?;
    Ok(std::path::absolute(&target).unwrap_or(target))
}

fn report(cmd: &str, result: &Result<PathBuf, String>) {
    match result {
        Ok(dir) => eprintln!("# {cmd}: checkpoint written to {} (shaledb server --dir serves it)", dir.display()),
        Err(e) => eprintln!("# {cmd} failed: {e}"),
    }
}

/// `SAVE`: a checkpoint, answered when complete.
pub(super) fn save(_: &mut Session, shared: &Shared, _: &Args) -> Reply {
    if !shared.saves.begin() {
        return Reply::err("Background save already in progress");
    }
    let dir = shared.config.read().dir.clone();
    let db = shared.store.db();
    // The other clients wait while it runs, as Redis's do during SAVE.
    let result = checkpoint(&db, &dir);
    drop(db);
    report("SAVE", &result);
    shared.saves.finish(&result);
    match result {
        Ok(_) => Reply::Ok,
        Err(e) => Reply::err(format!("SAVE failed: {e}")),
    }
}

/// `BGSAVE [SCHEDULE]`: a checkpoint on a thread of its own.
pub(super) fn bgsave(_: &mut Session, shared: &Shared, args: &Args) -> Reply {
    match args.get(1) {
        None => {}
        Some(a) if args.len() == 2 && a.eq_ignore_ascii_case(b"schedule") => {}
        Some(_) => return super::super::syntax_error(),
    }
    if !shared.saves.begin() {
        return Reply::err("Background save already in progress");
    }
    let dir = shared.config.read().dir.clone();
    let db = shared.store.db();
    let saves: Arc<Saves> = shared.saves.clone();
    let spawned = std::thread::Builder::new().name("shaledb-bgsave".into()).spawn({
        let saves = saves.clone();
        move || {
            let result = checkpoint(&db, &dir);
            // The engine is released before the save is marked done: shutdown waits for it, then closes.
            drop(db);
            report("BGSAVE", &result);
            saves.finish(&result);
        }
    });
    match spawned {
        Ok(_) => Reply::Simple("Background saving started".into()),
        Err(e) => {
            let result = Err(format!("starting the background save: {e}"));
            saves.finish(&result);
            Reply::err(format!("BGSAVE failed: starting a thread: {e}"))
        }
    }
}

/// `LASTSAVE`: Unix time of the last successful save, or of the start before any.
pub(super) fn lastsave(_: &mut Session, shared: &Shared, _: &Args) -> Reply {
    Reply::Int(last_save_unix(shared) as i64)
}

/// The time `LASTSAVE` and `rdb_last_save_time` report.
pub(super) fn last_save_unix(shared: &Shared) -> u64 {
    match shared.saves.state().last_ok_unix {
        0 => super::info::start_unix(shared),
        t => t,
    }
}
