//! The skeleton the engine-comparison suites share ([`crate::forestdb`], [`crate::insertbench`],
//! [`crate::sysbench`]): each resolves its seed and database directory with [`SuiteDir`], checks its engines
//! with [`check_available`], prints its run header with [`print_options`] and a heading per configuration
//! with [`print_heading`], opens and removes each engine's database with [`open_engine`] and [`remove_db`],
//! rewrites its JSON after each configuration with [`save_json`] and ends with [`finish`] (the JSON once
//! more, then the plots). Figures are printed with [`opt`] and [`human_bytes`]; the plots' SVG/PNG pairs
//! and bar charts are in [`crate::plot`].
//!
//! What differs per suite (its configurations, steps, tables and plots) stays in the suite's own module.

use crate::engine::{Engine, EngineKind};
use crate::flags::BenchFlags;
use crate::table::TableError;
use crate::{BenchError, Result};
use std::io::Write;
use std::path::{Path, PathBuf};

/// A seed from the clock (odd, never 0), for `--seed 0`.
pub fn clock_seed() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(1, |d| d.as_nanos() as u64 | 1)
}

/// `seed`, or [`clock_seed`] when it is 0.
pub fn resolve_seed(seed: u64) -> u64 {
    if seed != 0 {
        seed
    } else {
        clock_seed()
    }
}

/// The directory under which a suite puts each engine's database: `--db`, or a new temporary directory
/// under the current one, removed when this is dropped.
pub struct SuiteDir {
    path: PathBuf,
    _tmp: Option<tempfile::TempDir>,
}

impl SuiteDir {
    /// `db` (created if missing), or a temporary directory named `prefix...` in the current directory. Each
    /// engine's database goes in `db/<engine>` (`shaledb`, `rocksdb`): one already there is refused unless
    /// `use_existing_db` is `Some(false)` (`--use_existing_db=0`), which deletes it first, saying so once
    /// ([`crate::dbdir::claim_all`]). A `db` that is itself a database is refused (the suite would put its
    /// own databases inside it). Everything is checked before anything is created or deleted.
    pub fn create(
        db: Option<&Path>,
        prefix: &str,
        engines: &[EngineKind],
        use_existing_db: Option<bool>,
    ) -> Result<SuiteDir> {
        crate::dbdir::check_suite_flag(use_existing_db)?;
        let (path, tmp) = match db {
            Some(p) => {
                if let crate::dbdir::Contents::Database { .. } = crate::dbdir::inspect(p, "db")? {
                    return Err(BenchError::BadFlag {
                        flag: "db".into(),
                        msg: format!(
                            "{} holds a database; the suite puts each engine's database in a subdirectory of --db \
                             (<db>/shaledb, <db>/rocksdb): choose another directory",
                            p.display()
                        ),
                    });
                }
                let mut engines = engines.to_vec();
                engines.dedup();
                let paths: Vec<(EngineKind, PathBuf)> = engines.iter().map(|&k| (k, p.join(k.flag_name()))).collect();
                crate::dbdir::claim_all(&paths, use_existing_db)?;
                (p.to_path_buf(), None)
            }
            None => {
                let tmp = tempfile::Builder::new().prefix(prefix).tempdir_in(".").map_err(|source| BenchError::Io {
                    what: "creating a temporary database directory in",
                    path: ".".into(),
                    cause: source,
                })?;
                (tmp.path().to_path_buf(), Some(tmp))
            }
        };
        std::fs::create_dir_all(&path).map_err(|source| BenchError::Io {
            what: "creating the database directory",
            path: path.clone(),
            cause: source,
        })?;
        Ok(SuiteDir { path, _tmp: tmp })
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// An error naming `--engine` when an engine is not in this build.
pub fn check_available(engines: &[EngineKind]) -> Result<()> {
    match engines.iter().find(|e| !e.available()) {
        Some(e) => Err(BenchError::BadFlag {
            flag: "engine".into(),
            msg: format!(
                "{} is not in this build; build with `--features rocksdb` (needs librocksdb-dev, libclang-dev)",
                e.flag_name()
            ),
        }),
        None => Ok(()),
    }
}

/// The engine options of the run header: `heading`, then one `name value` line per option.
pub fn print_options(out: &mut dyn Write, heading: &str, options: &[(String, String)]) {
    let _ = writeln!(out, "{heading}");
    for (k, v) in options {
        let _ = writeln!(out, "  {k:<40} {v}");
    }
}

/// A section of a suite's output: a blank line, then `===== title =====`.
pub fn print_heading(out: &mut dyn Write, title: &str) {
    let _ = writeln!(out, "\n===== {title} =====");
}

/// Opens engine `E` at `path`; a failed O_DIRECT open says how to run without it.
pub fn open_engine<E: Engine>(path: &Path, f: &BenchFlags) -> Result<E> {
    E::open(path, f).map_err(|e| {
        let direct = e.to_string().contains("direct") || e.to_string().contains("O_DIRECT");
        let hint = match (f.use_direct_reads, f.use_direct_io_for_flush_and_compaction) {
            (true, false) if direct => " (this engine cannot read with O_DIRECT here: run with --use_direct_reads=0)",
            (false, true) if direct => {
                " (this engine cannot write tables with O_DIRECT here: run with \
                 --use_direct_io_for_flush_and_compaction=0)"
            }
            (true, true) if direct => {
                " (this engine cannot use O_DIRECT here: run with --use_direct_reads=0 \
                 --use_direct_io_for_flush_and_compaction=0)"
            }
            _ => "",
        };
        BenchError::engine(format!("opening {} at {}{hint}", E::name(), path.display()), e)
    })
}

/// Removes engine `E`'s database at `path`, one the suite made (or claimed with [`SuiteDir::create`]), without
/// a message; the error says `{what} {path}`.
pub fn remove_db<E: Engine>(path: &Path, what: &str) -> Result<()> {
    E::destroy(path).map(drop).map_err(|e| BenchError::engine(format!("{what} {}", path.display()), e))
}

/// Turns a table-layer error into a [`BenchError`] saying what was being done.
pub fn table_err(what: impl Into<String>) -> impl FnOnce(TableError) -> BenchError {
    let what = what.into();
    move |e| BenchError::engine(what, Box::new(e))
}

/// Writes `report` as JSON to `json`, if given (a suite calls this after each configuration, so an
/// interrupted run keeps what it measured).
pub fn save_json<T: serde::Serialize>(json: Option<&Path>, report: &T) -> Result<()> {
    match json {
        Some(p) => crate::report::write_json_file(p, report),
        None => Ok(()),
    }
}

/// The end of a suite: the JSON once more, then the plots into `plot` (if given) with a line saying how many
/// files were written.
pub fn finish<T: serde::Serialize>(
    out: &mut dyn Write,
    json: Option<&Path>,
    plot: Option<&Path>,
    report: &T,
    write_plots: impl FnOnce(&Path, &T) -> Result<Vec<PathBuf>>,
) -> Result<()> {
    save_json(json, report)?;
    if let Some(dir) = plot {
        let files = write_plots(dir, report)?;
        let _ = writeln!(out, "plots: {} files in {}", files.len(), dir.display());
    }
    Ok(())
}

/// `x` with `prec` decimals, `-` for none.
pub fn opt(v: Option<f64>, prec: usize) -> String {
    match v {
        Some(x) => format!("{x:.prec$}"),
        None => "-".into(),
    }
}

/// Human-readable bytes: 1.5 GiB, 512 MiB.
pub fn human_bytes(b: u64) -> String {
    let b = b as f64;
    if b >= (1u64 << 30) as f64 {
        format!("{:.2} GiB", b / (1u64 << 30) as f64)
    } else if b >= (1u64 << 20) as f64 {
        format!("{:.1} MiB", b / (1u64 << 20) as f64)
    } else {
        format!("{:.0} KiB", b / 1024.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn human_bytes_units() {
        assert_eq!(human_bytes(512 << 20), "512.0 MiB");
        assert_eq!(human_bytes(3 << 30), "3.00 GiB");
        assert_eq!(human_bytes(2048), "2 KiB");
    }

    #[test]
    fn opt_and_seed() {
        assert_eq!(opt(Some(1.26), 1), "1.3");
        assert_eq!(opt(None, 3), "-");
        assert_eq!(resolve_seed(7), 7);
        assert_ne!(resolve_seed(0), 0);
    }

    /// A database in `--db/<engine>` is the user's until `--use_existing_db=0` says otherwise; `--db` that is
    /// itself a database is never used as the parent of the suite's databases.
    #[test]
    fn suite_dir_refuses_a_database_it_did_not_make() {
        let dir = tempfile::tempdir().unwrap();
        let given = dir.path().join("suite");
        let db = given.join("shaledb");
        let engine: crate::shale::ShaleDb = Engine::open(&db, &BenchFlags::default()).unwrap();
        engine.put(crate::engine::WriteMode::default(), b"k", b"v").unwrap();
        engine.close().unwrap();
        let before = std::fs::read_dir(&db).unwrap().count();
        let e = SuiteDir::create(Some(&given), "unused-", &[EngineKind::Shaledb], None).err().unwrap();
        assert!(matches!(e, BenchError::Usage(_)), "{e}");
        assert!(e.to_string().contains("holds a database") && e.to_string().contains("--use_existing_db=0"), "{e}");
        assert_eq!(std::fs::read_dir(&db).unwrap().count(), before, "nothing deleted");
        let e = SuiteDir::create(Some(&db), "unused-", &[EngineKind::Shaledb], Some(false)).err().unwrap();
        assert!(e.to_string().contains("subdirectory"), "{e}");
        assert!(SuiteDir::create(Some(&given), "unused-", &[EngineKind::Shaledb], Some(true)).is_err());
        SuiteDir::create(Some(&given), "unused-", &[EngineKind::Shaledb], Some(false)).unwrap();
        assert!(!db.exists(), "deleted when asked");
        std::fs::create_dir_all(&db).unwrap();
        std::fs::write(db.join("notes.txt"), b"mine").unwrap();
        let e = SuiteDir::create(Some(&given), "unused-", &[EngineKind::Shaledb], Some(false)).err().unwrap();
        assert!(e.to_string().contains("notes.txt"), "{e}");
        assert!(db.join("notes.txt").exists());
    }

    #[test]
    fn suite_dir_creates_the_given_directory_and_options_print_aligned() {
        let dir = tempfile::tempdir().unwrap();
        let given = dir.path().join("a/b");
        let d = SuiteDir::create(Some(&given), "unused-", &[EngineKind::Shaledb], None).unwrap();
        assert!(given.is_dir() && d.path() == given);
        let mut out = Vec::new();
        print_options(&mut out, "engine options:", &[("k".into(), "v".into())]);
        assert_eq!(String::from_utf8(out).unwrap(), format!("engine options:\n  {:<40} v\n", "k"));
    }
}
