//! `repair`: brings back a database whose CURRENT is missing or names a MANIFEST that cannot be used (a bad
//! restore, a copy that skipped it), by pointing CURRENT at the newest MANIFEST that replays cleanly and whose
//! live tables all exist with their recorded sizes. It removes nothing: every other file stays for the next
//! open to judge (D9).

use crate::db::files;
use crate::filenames::{self, FileKind};
use crate::identity;
use crate::options::Options;
use crate::version_set::{self, VersionSet};
use shaledb_vfs::{Error, Result};
use std::path::Path;

/// What [`repair`] found and did.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct RepairReport {
    /// The MANIFEST CURRENT now names.
    pub manifest: String,
    /// What CURRENT named before (`None` when it was missing or unreadable).
    pub previous: Option<String>,
    /// Newer MANIFESTs passed over, each with the reason.
    pub skipped: Vec<(String, String)>,
    /// True when CURRENT was rewritten (false: it already named the chosen MANIFEST).
    pub rewrote_current: bool,
}

/// Rebuilds CURRENT in the database directory `path` from the newest MANIFEST that replays cleanly and whose
/// tables exist (RocksDB's `RepairDB`, limited to what can be proven). Takes the LOCK (fails with `Busy` while
/// the database is open). Deletes nothing. Fails when no MANIFEST qualifies, naming each one and why; a
/// directory holding no MANIFEST at all is refused before the LOCK is taken, so nothing is created in it
/// (`InvalidArgument` when it holds no CURRENT either: it is no database).
pub fn repair(path: impl AsRef<Path>, opts: &Options) -> Result<RepairReport> {
    let dir = path.as_ref();
    let fs = opts.fs.clone();
    if !fs.exists(dir) {
        return Err(Error::InvalidArgument(format!("{} does not exist", dir.display())));
    }
    // Before the LOCK, so that a directory with nothing to repair is left exactly as it was.
    check_has_manifest(fs.as_ref(), dir, &fs.list(dir)?)?;
    let _lock = fs.lock(&filenames::lock(dir))?;
    let names = fs.list(dir)?;
    check_has_manifest(fs.as_ref(), dir, &names)?;
    let mut manifests: Vec<u64> = names
        .iter()
        .filter_map(|n| match filenames::parse(n) {
            Some(FileKind::Manifest(m)) => Some(m),
            _ => None,
        })
        .collect();
    manifests.sort_unstable_by(|a, b| b.cmp(a));
    let previous = fs
        .read_all(&filenames::current(dir))
        .ok()
        .and_then(|c| String::from_utf8(c).ok())
        .and_then(|s| s.strip_suffix('\n').map(str::to_string));
    let mut skipped = Vec::new();
    for number in manifests {
        let name = filenames::manifest_name(number);
        let mut vs = match VersionSet::recover_manifest(dir, opts, number) {
            Ok(vs) => vs,
            Err(e) => {
                skipped.push((name, e.to_string()));
                continue;
            }
        };
        let checked = vs.families().values().try_for_each(|f| files::check_live_files(fs.as_ref(), dir, &f.current));
        if let Err(e) = checked {
            skipped.push((name, e.to_string()));
            continue;
        }
        let rewrite = previous.as_deref() != Some(name.as_str());
        if rewrite {
            let temp = free_temp_number(&mut vs, dir, fs.as_ref())?;
            version_set::set_current(fs.as_ref(), dir, number, temp)?;
        }
        if let Some(id) = vs.db_id {
            if identity::read(fs.as_ref(), dir)? != Some(id) {
                let temp = free_temp_number(&mut vs, dir, fs.as_ref())?;
                identity::write(fs.as_ref(), dir, &id, temp)?;
            }
        }
        return Ok(RepairReport { manifest: name, previous, skipped, rewrote_current: rewrite });
    }
    let why = skipped.iter().map(|(n, e)| format!("{n}: {e}")).collect::<Vec<_>>().join("; ");
    Err(Error::corruption(dir, 0, format!("no MANIFEST replays cleanly with all its tables present: {why}")))
}

/// Refuses a directory `names` shows no MANIFEST in, saying what it holds: nothing of a database (no CURRENT
/// either), or a CURRENT without the MANIFEST it needs.
fn check_has_manifest(fs: &dyn shaledb_vfs::Fs, dir: &Path, names: &[String]) -> Result<()> {
    if names.iter().any(|n| matches!(filenames::parse(n), Some(FileKind::Manifest(_)))) {
        return Ok(());
    }
    if !fs.exists(&filenames::current(dir)) {
        return Err(Error::InvalidArgument(format!(
            "{} holds no database (no CURRENT and no MANIFEST): nothing to repair; nothing was changed",
            dir.display()
        )));
    }
    Err(Error::corruption(
        dir,
        0,
        "CURRENT exists but the directory holds no MANIFEST: nothing to repair from; nothing was changed",
    ))
}

/// A temp-file number of ours that names no existing file.
fn free_temp_number(vs: &mut VersionSet, dir: &Path, fs: &dyn shaledb_vfs::Fs) -> Result<u64> {
    loop {
        let n = vs.new_file_number()?;
        if !fs.exists(&filenames::temp(dir, n)) {
            return Ok(n);
        }
    }
}
