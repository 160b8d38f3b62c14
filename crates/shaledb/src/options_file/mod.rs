//! OPTIONS files (docs/format/options.md): every read-write [`crate::Db::open`] writes the options it opened
//! with as `OPTIONS-NNNNNN`, [`crate::Db::create_column_family`] and [`crate::Db::drop_column_family`] write a
//! new one listing the live families, and [`Options::load_latest`] reads the newest back with every family's
//! options (RocksDB's `LoadLatestOptions`).
//!
//! ```text
//! file     := line* ; every line ends with "\n"
//! line     := ws* ( comment | section | option )? ws* comment?
//! comment  := "#" any*                      ; a "#" not escaped by "\" starts a comment
//! section  := "[" title "]"
//! title    := "Version" | "DBOptions" | "CFOptions " family | "TableOptions/BlockBasedTable " family
//! family   := "\"" ( char | "\" escape )* "\""  ; char: any but "\"", "\", "#", a control character
//! escape   := "\\" | "\"" | "#" | ":" | "n" | "r" | "t" | "u{" hex{1,6} "}"
//! option   := name ws* "=" ws* value        ; name := [A-Za-z0-9_]+, at most once per section
//! sections := Version DBOptions CFOptions"default" TableOptions"default" ( CFOptions"x" TableOptions"x" )*
//! ```
//!
//! `[Version]`, `[DBOptions]` and the default family's two sections appear once each, in that order, then a
//! `[CFOptions "x"]` and `[TableOptions/BlockBasedTable "x"]` pair per named family, in id order, no family
//! twice (since version 1.2). A family name is any name `check_family_name` allows (1 to 255 bytes of UTF-8),
//! quoted as `family` says. `[Version]` holds `shaledb_version` (informational) and
//! `options_file_version=MAJOR.MINOR`: a major other than [`FORMAT_MAJOR`] is refused (`NotSupported`); a file
//! of the same major and a newer minor may hold options this version does not know (they are ignored), an
//! older minor may lack options added since (they take their defaults). A file of this very version must hold
//! every option and nothing else, so a file cut at a line boundary is an error too. The option names, their
//! sections and the values are listed in [`fields`]: RocksDB's names where ShaleDB has the option. A named
//! family's sections hold every option of the default's; those that are the database's and not the family's
//! (`num_levels`, `ttl_mode`, `block_cache`, ...: not in `FAMILY_OWN_FIELDS`) must equal the default's.
//!
//! Writing (D14): the file is written under a temp name (`NNNNNN.dbtmp`), fsynced, renamed to
//! `OPTIONS-NNNNNN` and the directory fsynced, so a crash leaves the old file or the new one, never half of
//! one. Both numbers come from the version set's counter; the options file's number may be above the
//! counter the MANIFEST records, so open steps the counter over existing OPTIONS files (`files.rs`). The
//! newest [`KEEP_OPTIONS_FILES`] are kept, the older removed.

mod fields;
#[cfg(test)]
mod tests;
mod text;

use crate::filenames::{self, FileKind};
use crate::options::family::ColumnFamilyDescriptor;
use crate::options::Options;
use crate::version_set::VersionSet;
use shaledb_vfs::{Error, Fs, Result};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The first line of every OPTIONS file (also how an interrupted write's temp file is recognised as ours).
pub(crate) const HEADER: &str = "# ShaleDB options file";
/// The major format version this ShaleDB writes and reads.
pub(crate) const FORMAT_MAJOR: u32 = 1;
/// The minor format version this ShaleDB writes.
/// 1: `compaction_style`, `compaction_options_universal`, `compaction_options_fifo` (a 1.0 file lacks them:
/// they load at their defaults).
/// 2: a `[CFOptions "x"]` and `[TableOptions/BlockBasedTable "x"]` pair per named column family (a 1.1 file
/// holds only the default family's).
pub(crate) const FORMAT_MINOR: u32 = 2;
/// OPTIONS files kept in a database directory (RocksDB keeps 2): the newest, and the one before it.
pub(crate) const KEEP_OPTIONS_FILES: usize = 2;
/// Largest OPTIONS file read (checked against the file size before it is read).
pub(crate) const MAX_OPTIONS_FILE_BYTES: u64 = 1 << 20;

/// What [`Options::load_latest`] read from a database's newest OPTIONS file.
///
/// A merge operator or compaction filter is recorded by its name only. `options.merge_operator` is rebuilt
/// when the name is one of [`crate::merge::builtin`]'s (`uint64add`, `stringappend` with its default
/// delimiter, `put`); a user-defined operator, and every compaction filter, cannot be rebuilt from a name:
/// `options` then leaves it `None`, and the caller sets it again (the names below say what the database was
/// opened with). Open refuses to run with a merge operator whose name differs from the recorded one.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct LoadedOptions {
    /// The options read back. Not persisted, and so at their defaults: `create_if_missing`,
    /// `error_if_exists`; `fs` is the file system the file was read from; a TTL's clock is the system clock.
    pub options: Options,
    /// The name of the merge operator the database was opened with, if any (whether or not `options` holds
    /// a rebuilt one).
    pub merge_operator_name: Option<String>,
    /// The name of the compaction filter the database was opened with, if any (never rebuilt).
    pub compaction_filter_name: Option<String>,
    /// The named column families the file lists (every live one when it was written; not the default family,
    /// whose options are `options`), in the order they were created.
    pub column_families: Vec<LoadedColumnFamily>,
    /// The file read.
    pub path: PathBuf,
}

impl LoadedOptions {
    /// The descriptors that reopen every family the file lists with the options it records:
    /// `Db::open_with_column_families(dir, loaded.options.clone(), loaded.column_family_descriptors())`. A
    /// merge operator or compaction filter that could not be rebuilt (see [`LoadedColumnFamily`]) must be set
    /// again in the descriptor's options first.
    pub fn column_family_descriptors(&self) -> Vec<ColumnFamilyDescriptor> {
        self.column_families.iter().map(|f| ColumnFamilyDescriptor::new(f.name.clone(), f.options.clone())).collect()
    }
}

/// One named column family as [`Options::load_latest`] read it from its `[CFOptions "name"]` and
/// `[TableOptions/BlockBasedTable "name"]` sections.
///
/// As for the default family ([`LoadedOptions`]), a merge operator is rebuilt only when its name is a
/// built-in one, and a compaction filter never: the names say what to set again.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct LoadedColumnFamily {
    /// The family's name.
    pub name: String,
    /// Its options: the database's options with the family's own fields (those listed at
    /// [`ColumnFamilyDescriptor::options`]) as recorded; what `ColumnFamily::options` returned.
    pub options: Options,
    /// The name of the family's merge operator, if any (whether or not `options` holds a rebuilt one).
    pub merge_operator_name: Option<String>,
    /// The name of the family's compaction filter, if any (never rebuilt).
    pub compaction_filter_name: Option<String>,
}

impl Options {
    /// Reads the newest OPTIONS file of the database in `dir` on the operating system's file system
    /// (RocksDB's `LoadLatestOptions`): the database's options and the options of each named column family
    /// ([`LoadedOptions::column_families`]); see [`LoadedOptions`] for what is and is not rebuilt. A file
    /// written before ShaleDB recorded named families (format 1.1) lists none.
    ///
    /// Errors: `InvalidArgument` when `dir` holds no OPTIONS file (a database written before
    /// ShaleDB wrote them); `Corruption` naming the file and line for a damaged file, a bad number or an
    /// option value out of range; `NotSupported` naming the file and line for an unknown format version.
    ///
    /// ```
    /// use shaledb::{Db, Options};
    /// # let tmp = tempfile::tempdir().unwrap();
    /// # let path = tmp.path().join("db");
    /// let opts = Options { write_buffer_size: 8 << 20, ..Options::default() };
    /// drop(Db::open(&path, opts)?);
    /// let loaded = Options::load_latest(&path)?;
    /// assert_eq!(loaded.options.write_buffer_size, 8 << 20);
    /// let db = Db::open(&path, loaded.options)?;
    /// # drop(db);
    ///
    /// // With column families: reopen each with the options it had.
    /// use shaledb::{merge, ColumnFamilyDescriptor};
    /// let counters = Options { merge_operator: merge::builtin("uint64add"), ..Options::default() };
    /// let db = Db::open_with_column_families(&path, Options::default(), vec![ColumnFamilyDescriptor::new("counters", counters)])?;
    /// db.close()?;
    /// let loaded = Options::load_latest(&path)?;
    /// assert_eq!(loaded.column_families[0].name, "counters");
    /// assert_eq!(loaded.column_families[0].merge_operator_name.as_deref(), Some("uint64add"));
    /// let db = Db::open_with_column_families(&path, loaded.options.clone(), loaded.column_family_descriptors())?;
    /// # Ok::<(), shaledb::Error>(())
    /// ```
    pub fn load_latest(dir: impl AsRef<Path>) -> Result<LoadedOptions> {
        Options::load_latest_with(dir.as_ref(), shaledb_vfs::default_fs())
    }

    /// [`Options::load_latest`] on the file system `fs`, which the returned options also use.
    pub fn load_latest_with(dir: &Path, fs: Arc<dyn Fs>) -> Result<LoadedOptions> {
        let names = fs.list(dir)?;
        let Some(n) = newest(&names) else {
            return Err(Error::InvalidArgument(format!(
                "{} holds no OPTIONS file (a database written before ShaleDB wrote them, or not a database)",
                dir.display()
            )));
        };
        let path = dir.join(filenames::options_name(n));
        let mut loaded = read(fs.as_ref(), &path)?;
        loaded.options.fs = fs;
        Ok(loaded)
    }
}

/// The numbers of the OPTIONS files among the directory entries `names`, newest first.
fn numbers(names: &[String]) -> Vec<u64> {
    let mut v: Vec<u64> = names
        .iter()
        .filter_map(|n| match filenames::parse(n) {
            Some(FileKind::Options(n)) => Some(n),
            _ => None,
        })
        .collect();
    v.sort_unstable_by(|a, b| b.cmp(a));
    v
}

/// The number of the newest OPTIONS file among the directory entries `names`.
pub(crate) fn newest(names: &[String]) -> Option<u64> {
    numbers(names).first().copied()
}

/// Reads and parses the OPTIONS file at `path`.
pub(crate) fn read(fs: &dyn Fs, path: &Path) -> Result<LoadedOptions> {
    let size = fs.file_size(path)?;
    if size > MAX_OPTIONS_FILE_BYTES {
        return Err(Error::corruption(
            path,
            0,
            format!("OPTIONS file is {size} bytes, more than the {MAX_OPTIONS_FILE_BYTES} an OPTIONS file may be"),
        ));
    }
    text::parse(&fs.read_all(path)?, path)
}

/// The text of the OPTIONS file for the database options `opts` (the default family's too) and the named
/// families `families` (name and options, in id order).
pub(crate) fn render(opts: &Options, families: &[(&str, &Options)]) -> String {
    text::render(opts, families)
}

/// Step `write_options_file` of open: writes `opts` and `families` (as [`render`]) as a new OPTIONS file (temp
/// file, fsync, rename, directory fsync) and removes the OPTIONS files older than the newest
/// [`KEEP_OPTIONS_FILES`]. Returns the name written and the names removed.
pub(crate) fn write(
    fs: &dyn Fs,
    dir: &Path,
    vs: &mut VersionSet,
    opts: &Options,
    families: &[(&str, &Options)],
) -> Result<(String, Vec<String>)> {
    let number = vs.new_file_number()?;
    let temp = vs.new_file_number()?;
    write_numbered(fs, dir, &render(opts, families), number, temp)
}

/// [`write`] of the text `text` with the file's number and the temp file's number given: a secondary instance
/// numbers the OPTIONS files of its own directory itself (`db/secondary.rs`), holding no file counter there,
/// and creating or dropping a family takes its numbers under the state lock and writes after releasing it
/// (`db/family_api.rs`).
pub(crate) fn write_numbered(
    fs: &dyn Fs,
    dir: &Path,
    text: &str,
    number: u64,
    temp: u64,
) -> Result<(String, Vec<String>)> {
    let name = filenames::options_name(number);
    crate::atomic_file::replace_file(fs, dir, &dir.join(&name), text.as_bytes(), temp)?;
    let numbers = numbers(&fs.list(dir)?);
    let mut removed = Vec::new();
    for &old in numbers.iter().skip(KEEP_OPTIONS_FILES) {
        let old_name = filenames::options_name(old);
        fs.remove(&dir.join(&old_name))?;
        removed.push(old_name);
    }
    Ok((name, removed))
}

/// Step `check_recorded_options` of open, before anything is written: the options that cannot read the data
/// the database holds are refused with `InvalidArgument` naming both sides and the file.
///
/// - A merge operator other than the recorded one: merge operands written by one operator are read by the
///   other. Adding a merge operator to a database recorded without one is fine, and so is opening without
///   one where one is recorded, as RocksDB allows (RocksDB's benchmark.sh opens readrandom without the
///   operator its readwhilewriting set): a read meeting a merge operand then fails naming the missing
///   operator, and the OPTIONS file this open writes keeps the recorded name ([`keep_recorded_operators`]),
///   so a later open with another operator is still refused.
/// - TTL mode on where the file records it off, or off where it records it on: TTL-mode values carry a
///   timestamp suffix (`crate::ttl`) that the other mode would return as data or cut from plain values. The
///   TTL's length may change.
///
/// A different prefix extractor is not refused: each table records the extractor it was built with and is
/// only filtered by prefix under that same extractor (`crate::prefix`), so reads are right under any.
///
/// `Db::open_read_only` does not check (another process may be replacing the file meanwhile). A database with
/// no OPTIONS file (written before ShaleDB wrote them) opens without checks. A newest file that cannot be read
/// fails the open with its error under `paranoid_checks`; without, the checks are skipped and the returned
/// note says why (for the LOG). Returns the file read, for [`check_families`] once the MANIFEST says which
/// families are live.
pub(crate) fn check_recorded(
    dir: &Path,
    opts: &Options,
    names: &[String],
) -> Result<(Option<LoadedOptions>, Option<String>)> {
    // With `error_if_exists` the open is refused anyway, for that reason.
    let Some(n) = newest(names).filter(|_| !opts.error_if_exists) else { return Ok((None, None)) };
    let path = dir.join(filenames::options_name(n));
    let recorded = match read(opts.fs.as_ref(), &path) {
        Ok(r) => r,
        Err(e) if !opts.paranoid_checks => {
            return Ok((None, Some(format!("options checks skipped (paranoid_checks is false): {e}"))));
        }
        Err(e) => return Err(e),
    };
    check_merge_operator(&path, "", recorded.merge_operator_name.as_deref(), opts)?;
    let mode = |on: bool| if on { "on" } else { "off" };
    if recorded.options.ttl.is_some() != opts.ttl.is_some() {
        return Err(Error::InvalidArgument(format!(
            "{} records TTL mode {}, but the database is opened with TTL mode {}: TTL-mode values carry a \
             timestamp the other mode cannot read; open with the recorded mode",
            path.display(),
            mode(recorded.options.ttl.is_some()),
            mode(opts.ttl.is_some())
        )));
    }
    Ok((Some(recorded), None))
}

/// Step `check_family_options` of open, once the MANIFEST is recovered and before anything else is written:
/// each named family that is live (`live`) and that `recorded` lists is checked as [`check_recorded`] checks
/// the default family's merge operator, the error naming the family. A family of `descs` takes its
/// descriptor's options; one not listed takes the database's `opts`, and is then refused only for a merge
/// operator of another name (opened without one, its merge operands cannot be read, which reads report,
/// as before families were recorded). A family `recorded` does not list (created by a crash-interrupted
/// `create_column_family` before its OPTIONS file) is not checked; one it lists that is not live (dropped
/// before the crash) is ignored.
pub(crate) fn check_families(
    recorded: &LoadedOptions,
    live: &[&str],
    opts: &Options,
    descs: &[ColumnFamilyDescriptor],
) -> Result<()> {
    for f in recorded.column_families.iter().filter(|f| live.contains(&f.name.as_str())) {
        let theirs = f.merge_operator_name.as_deref();
        let whose = format!(" for column family {:?}", f.name);
        let theirs_opts = descs.iter().find(|d| d.name == f.name).map_or(opts, |d| &d.options);
        check_merge_operator(&recorded.path, &whose, theirs, theirs_opts)?;
    }
    Ok(())
}

/// Refuses opening with `opts`'s merge operator where `theirs` is recorded (`whose` names the family): one of
/// another name, or none when `none_refused`.
fn check_merge_operator(path: &Path, whose: &str, theirs: Option<&str>, opts: &Options) -> Result<()> {
    let Some(theirs) = theirs else { return Ok(()) };
    let Some(ours) = opts.merge_operator.as_ref().map(|m| m.name()) else { return Ok(()) };
    if ours == theirs {
        return Ok(());
    }
    let opened = if whose.is_empty() { "the database is opened" } else { "it is opened" };
    Err(Error::InvalidArgument(format!(
        "{} records merge_operator {theirs:?}{whose}, but {opened} with {ours:?}: merge operands written by \
         one operator cannot be read by another; open with the recorded operator (or with none)",
        path.display(),
    )))
}

/// Stands in for a recorded merge operator this open runs without, so that the OPTIONS file it writes still
/// names it (see [`keep_recorded_operators`]). Only rendered, never given to a database; were it asked to
/// merge, it fails the merge, as a missing operator does.
#[derive(Debug)]
struct RecordedName(String);

impl crate::merge::MergeOperator for RecordedName {
    fn name(&self) -> &str {
        &self.0
    }
    fn full_merge(&self, _key: &[u8], _existing: Option<&[u8]>, _operands: &[&[u8]]) -> Option<Vec<u8>> {
        None
    }
}

/// The options the OPTIONS file of this open records: `opts` and `named` as opened, except that a family
/// opened without a merge operator where `recorded` names one keeps that name, so that a later open with
/// another operator is refused as before (the data still holds the recorded operator's operands).
pub(crate) fn keep_recorded_operators(
    recorded: Option<&LoadedOptions>,
    opts: &Options,
    named: &[(String, Options)],
) -> (Options, Vec<(String, Options)>) {
    let keep = |o: &Options, name: Option<&String>| -> Options {
        let mut o = o.clone();
        if o.merge_operator.is_none() {
            if let Some(n) = name {
                o.merge_operator = Some(std::sync::Arc::new(RecordedName(n.clone())));
            }
        }
        o
    };
    let Some(rec) = recorded else { return (opts.clone(), named.to_vec()) };
    let default = keep(opts, rec.merge_operator_name.as_ref());
    let families = named
        .iter()
        .map(|(n, o)| {
            let theirs = rec.column_families.iter().find(|f| &f.name == n).and_then(|f| f.merge_operator_name.as_ref());
            (n.clone(), keep(o, theirs))
        })
        .collect();
    (default, families)
}
