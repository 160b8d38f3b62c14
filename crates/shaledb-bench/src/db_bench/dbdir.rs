//! What a database directory given on the command line (`--db`) holds before a run, and the rule for
//! deleting what is there: bench deletes an existing database only when bench made the directory itself (its
//! temporary directory, or a suite's own directory within one run), or when `--use_existing_db=0` is given
//! on the command line. Without the flag a `--db` holding a database is refused before anything is done;
//! files that are not a database's are never deleted.

use crate::engine::{with_engine, Engine, EngineKind, EngineVisitor};
use crate::{BenchError, Result};
use std::path::{Path, PathBuf};

/// What a directory holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Contents {
    /// Nothing at the path.
    Missing,
    /// An empty directory (a lone `LOCK` counts as empty: a failed open leaves one).
    Empty,
    /// A database (of either engine, see `holds_database`); `files` entries in all.
    Database {
        /// Entries in the directory.
        files: usize,
    },
    /// Entries, none of them a database's marker: their names, sorted.
    Other(Vec<String>),
}

/// What to do with the directory before opening a database in it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Prepare {
    /// Open it as it is.
    Keep,
    /// Delete the database there first; `announce`: the user asked for it, so say so (once, with the count).
    Delete {
        /// Print one line saying what was deleted.
        announce: bool,
    },
}

/// Whether the entries `names` of `dir` are a database's, ShaleDB's or RocksDB's alike: a CURRENT naming a
/// MANIFEST that is there, an IDENTITY, or a MANIFEST (a database whose CURRENT was lost, which `shaledb
/// repair` brings back). A CURRENT alone, naming nothing there, is another program's file.
fn holds_database(dir: &Path, names: &[String]) -> bool {
    let has = |n: &str| names.iter().any(|x| x == n);
    let current_names_manifest = has("CURRENT")
        && std::fs::read(dir.join("CURRENT")).is_ok_and(|c| {
            let name = String::from_utf8_lossy(&c).trim_end().to_string();
            name.starts_with("MANIFEST-") && !name.contains('/') && has(&name)
        });
    current_names_manifest || has("IDENTITY") || names.iter().any(|n| n.starts_with("MANIFEST-"))
}

/// Reads what `path` holds; a path that is not a directory is an error naming `--{flag}`.
pub fn inspect(path: &Path, flag: &str) -> Result<Contents> {
    let rd = match std::fs::read_dir(path) {
        Ok(rd) => rd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Contents::Missing),
        Err(_) if path.exists() && !path.is_dir() => {
            return Err(BenchError::BadFlag {
                flag: flag.into(),
                msg: format!("{} is not a directory", path.display()),
            })
        }
        Err(cause) => return Err(BenchError::Io { what: "reading the directory", path: path.into(), cause }),
    };
    let mut names = Vec::new();
    for entry in rd {
        let entry =
            entry.map_err(|cause| BenchError::Io { what: "reading the directory", path: path.into(), cause })?;
        names.push(entry.file_name().to_string_lossy().into_owned());
    }
    names.sort_unstable();
    Ok(if names.iter().all(|n| n == "LOCK") {
        Contents::Empty
    } else if holds_database(path, &names) {
        Contents::Database { files: names.len() }
    } else {
        Contents::Other(names)
    })
}

/// Up to 5 names, then how many more.
fn some_names(names: &[String]) -> String {
    let mut s = names.iter().take(5).cloned().collect::<Vec<_>>().join(", ");
    if names.len() > 5 {
        s.push_str(&format!(" and {} more", names.len() - 5));
    }
    s
}

/// Who is asking: `shaledb bench` (which can run on an existing database) or a suite (which always loads
/// its own data, so only `--use_existing_db=0` applies).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Caller {
    /// `shaledb bench`.
    Bench,
    /// `shaledb bench suite ...`.
    Suite,
}

/// Decides what happens to `path` (given by `--{flag}`) before a run, given `--use_existing_db` as the
/// command line has it (`None`: not given) and whether bench made the directory itself (`own`). Refuses, in
/// one line, a directory holding a database when the flag is not given, and any directory holding files that
/// are not a database's whatever the flag says (bench neither deletes them nor puts a database among them).
pub fn prepare(path: &Path, flag: &str, use_existing_db: Option<bool>, own: bool, caller: Caller) -> Result<Prepare> {
    if own && use_existing_db != Some(true) {
        return Ok(Prepare::Delete { announce: false });
    }
    match inspect(path, flag)? {
        Contents::Missing | Contents::Empty => Ok(Prepare::Keep),
        Contents::Database { .. } if use_existing_db == Some(true) => Ok(Prepare::Keep),
        Contents::Database { .. } if use_existing_db == Some(false) => Ok(Prepare::Delete { announce: true }),
        Contents::Database { .. } if caller == Caller::Suite => Err(BenchError::Usage(format!(
            "{} holds a database; pass --use_existing_db=0 to delete it first (the suite loads its own data), or \
             choose another --{flag}",
            path.display()
        ))),
        Contents::Database { .. } => Err(BenchError::Usage(format!(
            "{} holds a database; pass --use_existing_db=1 to benchmark on it, or --use_existing_db=0 to delete it \
             first",
            path.display()
        ))),
        Contents::Other(names) => Err(BenchError::BadFlag {
            flag: flag.into(),
            msg: format!(
                "{} holds files that are not a database ({}); bench uses an empty or new directory, or one holding \
                 a database, and never deletes other files: choose another --{flag}",
                path.display(),
                some_names(&names)
            ),
        }),
    }
}

/// Deletes with engine `E` what [`prepare`] said to delete, saying so when the user asked for it.
pub fn apply<E: Engine>(path: &Path, prepare: Prepare) -> Result<()> {
    if let Prepare::Delete { announce } = prepare {
        let files = E::destroy(path).map_err(|e| BenchError::engine(format!("deleting {}", path.display()), e))?;
        if announce {
            eprintln!("{}", deleted_line(path, files));
        }
    }
    Ok(())
}

/// For a suite, before it makes `path` its own: refuses a database there unless `--use_existing_db=0`, then
/// deletes it (with engine `E`, saying so once).
pub fn claim<E: Engine>(path: &Path, use_existing_db: Option<bool>) -> Result<()> {
    let p = prepare(path, "db", use_existing_db, false, Caller::Suite)?;
    apply::<E>(path, p)
}

struct Claim<'a> {
    path: &'a Path,
    use_existing_db: Option<bool>,
}

impl EngineVisitor for Claim<'_> {
    type Output = Result<()>;
    fn visit<E: Engine>(self) -> Result<()> {
        claim::<E>(self.path, self.use_existing_db)
    }
}

/// [`claim`] for an engine chosen at run time; every path is checked before any is deleted.
pub fn claim_all(paths: &[(EngineKind, PathBuf)], use_existing_db: Option<bool>) -> Result<()> {
    for (_, p) in paths {
        prepare(p, "db", use_existing_db, false, Caller::Suite)?;
    }
    for (kind, p) in paths {
        with_engine(*kind, Claim { path: p, use_existing_db })??;
    }
    Ok(())
}

/// A suite's `--use_existing_db`: only 0 (delete what is at `--db` first) is meaningful.
pub fn check_suite_flag(use_existing_db: Option<bool>) -> Result<()> {
    if use_existing_db == Some(true) {
        return Err(BenchError::BadFlag {
            flag: "use_existing_db".into(),
            msg: "a suite loads its own data; only --use_existing_db=0 (delete the database at --db first) applies"
                .into(),
        });
    }
    Ok(())
}

/// The one line said when `--use_existing_db=0` deleted a database.
pub fn deleted_line(path: &Path, files: usize) -> String {
    format!("bench: deleted the database in {} ({files} files), as --use_existing_db=0 asks", path.display())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir_with(names: &[&str]) -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        for n in names {
            std::fs::write(d.path().join(n), b"x").unwrap();
        }
        d
    }

    #[test]
    fn inspect_tells_databases_from_other_files() {
        let d = dir_with(&[]);
        assert_eq!(inspect(&d.path().join("none"), "db").unwrap(), Contents::Missing);
        assert_eq!(inspect(d.path(), "db").unwrap(), Contents::Empty);
        assert_eq!(inspect(dir_with(&["LOCK"]).path(), "db").unwrap(), Contents::Empty);
        let db = dir_with(&["MANIFEST-000002", "000003.log", "LOCK"]);
        std::fs::write(db.path().join("CURRENT"), b"MANIFEST-000002\n").unwrap();
        assert_eq!(inspect(db.path(), "db").unwrap(), Contents::Database { files: 4 });
        // Another program's CURRENT, naming no MANIFEST: not a database.
        let other = dir_with(&["CURRENT", "20240101.log"]);
        assert_eq!(
            inspect(other.path(), "db").unwrap(),
            Contents::Other(vec!["20240101.log".into(), "CURRENT".into()])
        );
        assert_eq!(inspect(dir_with(&["IDENTITY"]).path(), "db").unwrap(), Contents::Database { files: 1 });
        let other = dir_with(&["notes.txt", "a.csv"]);
        assert_eq!(inspect(other.path(), "db").unwrap(), Contents::Other(vec!["a.csv".into(), "notes.txt".into()]));
        let file = other.path().join("notes.txt");
        assert!(inspect(&file, "db").unwrap_err().to_string().contains("--db"));
    }

    #[test]
    fn a_database_is_deleted_only_when_asked_or_when_bench_made_it() {
        let db = dir_with(&["CURRENT", "MANIFEST-000002"]);
        let p = db.path();
        let e = prepare(p, "db", None, false, Caller::Bench).unwrap_err();
        assert!(matches!(e, BenchError::Usage(_)), "{e}");
        let msg = e.to_string();
        assert!(
            msg.contains("holds a database")
                && msg.contains("--use_existing_db=1")
                && msg.contains("--use_existing_db=0")
        );
        assert_eq!(prepare(p, "db", Some(false), false, Caller::Bench).unwrap(), Prepare::Delete { announce: true });
        assert_eq!(prepare(p, "db", Some(true), false, Caller::Bench).unwrap(), Prepare::Keep);
        assert_eq!(prepare(p, "db", None, true, Caller::Bench).unwrap(), Prepare::Delete { announce: false });
        let empty = dir_with(&[]);
        assert_eq!(prepare(empty.path(), "db", None, false, Caller::Bench).unwrap(), Prepare::Keep);
        assert_eq!(prepare(&empty.path().join("new"), "db", Some(false), false, Caller::Bench).unwrap(), Prepare::Keep);
        let e = prepare(p, "db", None, false, Caller::Suite).unwrap_err().to_string();
        assert!(e.contains("--use_existing_db=0") && !e.contains("--use_existing_db=1"), "{e}");
        assert!(check_suite_flag(Some(true)).is_err() && check_suite_flag(Some(false)).is_ok());
    }

    #[test]
    fn other_files_are_never_to_be_deleted() {
        let d = dir_with(&["notes.txt"]);
        for flag in [None, Some(false), Some(true)] {
            let e = prepare(d.path(), "db", flag, false, Caller::Bench).unwrap_err().to_string();
            assert!(e.contains("notes.txt") && e.contains("never deletes other files"), "{e}");
        }
    }
}
