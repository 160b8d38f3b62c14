//! `shaledb checkpoint DB DIR` ([`shaledb::Db::create_checkpoint`]) and `shaledb backup
//! create|list|verify|restore|purge|delete` ([`shaledb::backup::BackupEngine`]).
//!
//! Only `backup create` makes a backup directory (and never inside a database directory); `list`, `verify`,
//! `restore`, `purge` and `delete` refuse a path that is not one (missing, a database, any other directory)
//! in one line, creating nothing ([`BackupEngine::open_existing`]).
//!
//! Exit codes: 0 on success; 1 on any error (the database or backup directory could not be opened, a target
//! exists, a backup fails verification, a metadata file is corrupt), printed on stderr; 2 for a usage error.
//! `backup list` prints one line per backup and exits 1 when a metadata file is corrupt (after listing the
//! others and naming it).

use anyhow::Context;
use shaledb::backup::BackupEngine;
use shaledb::{Db, Options};
use std::path::PathBuf;

/// `shaledb checkpoint DB DIR`.
#[derive(clap::Args, Debug)]
pub struct CheckpointArgs {
    /// The database directory.
    pub db: PathBuf,
    /// The new directory for the copy (must not exist; same file system for hard links).
    pub dir: PathBuf,
    /// Checkpoint a database another process holds open, from a read-only open (its WALs are copied).
    #[arg(long)]
    pub read_only: bool,
}

/// `shaledb backup ...`.
#[derive(clap::Subcommand, Debug)]
pub enum BackupCommand {
    /// Back up the database DB into BACKUP_DIR (created when missing; never a database directory); prints the
    /// new backup's id.
    Create {
        /// The database directory.
        db: PathBuf,
        /// The backup directory.
        backup_dir: PathBuf,
        /// Back up a database another process holds open, from a read-only open (its WALs are copied).
        #[arg(long)]
        read_only: bool,
    },
    /// List the backups: id, time (UTC), size in bytes, file count, newest sequence number.
    List {
        /// The backup directory, as `backup create` made it (it must exist: nothing is created).
        backup_dir: PathBuf,
    },
    /// Check the size and crc32c of every file of backup ID (of every backup without ID).
    Verify {
        /// The backup directory, as `backup create` made it (it must exist: nothing is created).
        backup_dir: PathBuf,
        /// The backup to check; all of them when absent.
        id: Option<u64>,
    },
    /// Restore backup ID into TARGET, a new or empty directory.
    Restore {
        /// The backup directory, as `backup create` made it (it must exist: nothing is created).
        backup_dir: PathBuf,
        /// The backup to restore.
        id: u64,
        /// The directory to restore into.
        target: PathBuf,
    },
    /// Delete the oldest backups, keeping the newest N.
    Purge {
        /// The backup directory, as `backup create` made it (it must exist: nothing is created).
        backup_dir: PathBuf,
        /// How many of the newest backups to keep.
        #[arg(long)]
        keep: usize,
    },
    /// Delete backup ID.
    Delete {
        /// The backup directory, as `backup create` made it (it must exist: nothing is created).
        backup_dir: PathBuf,
        /// The backup to delete.
        id: u64,
    },
}

fn open_db(path: &std::path::Path, read_only: bool) -> anyhow::Result<Db> {
    if !read_only {
        return crate::keys::open_recorded(path, false)
            .with_context(|| format!("cannot open the database {}", path.display()));
    }
    let opts = Options { create_if_missing: false, ..crate::keys::recorded_options(path)? };
    Db::open_read_only(path, opts).with_context(|| format!("cannot open the database {}", path.display()))
}

/// Runs `shaledb checkpoint`.
pub fn checkpoint(a: CheckpointArgs) -> anyhow::Result<i32> {
    let db = open_db(&a.db, a.read_only)?;
    db.create_checkpoint(&a.dir)?;
    db.close()?;
    println!("checkpoint of {} written to {}", a.db.display(), a.dir.display());
    Ok(0)
}

/// The backup directory for `backup create`, made when missing (never inside a database directory).
fn engine(dir: &std::path::Path) -> anyhow::Result<BackupEngine> {
    BackupEngine::open(dir).with_context(|| format!("cannot open the backup directory {}", dir.display()))
}

/// The backup directory for the commands that read backups: it must exist and be one; nothing is created.
/// The engine's error names the directory and what it is instead.
fn existing(dir: &std::path::Path) -> anyhow::Result<BackupEngine> {
    Ok(BackupEngine::open_existing(dir)?)
}

/// Runs `shaledb backup ...`.
pub fn run(cmd: BackupCommand) -> anyhow::Result<i32> {
    match cmd {
        BackupCommand::Create { db, backup_dir, read_only } => {
            let d = open_db(&db, read_only)?;
            let mut e = engine(&backup_dir)?;
            let id = e.create_backup(&d)?;
            d.close()?;
            let info = e.list().into_iter().find(|b| b.id == id);
            match info {
                Some(b) => {
                    println!("backup {id} created: {} files, {} bytes, sequence {}", b.file_count, b.size, b.sequence)
                }
                None => println!("backup {id} created"),
            }
            Ok(0)
        }
        BackupCommand::List { backup_dir } => {
            let e = existing(&backup_dir)?;
            println!("{:>6}  {:<24}  {:>14}  {:>6}  {:>12}", "id", "time (UTC)", "bytes", "files", "sequence");
            for b in e.list() {
                let when = std::time::UNIX_EPOCH
                    .checked_add(std::time::Duration::from_secs(b.timestamp))
                    .map_or_else(|| b.timestamp.to_string(), shaledb::ctime_utc);
                println!("{:>6}  {:<24}  {:>14}  {:>6}  {:>12}", b.id, when, b.size, b.file_count, b.sequence);
            }
            let corrupt = e.corrupt_backups();
            for (id, err) in &corrupt {
                eprintln!("backup {id} is corrupt: {err}");
            }
            Ok(if corrupt.is_empty() { 0 } else { 1 })
        }
        BackupCommand::Verify { backup_dir, id } => {
            let e = existing(&backup_dir)?;
            let ids: Vec<u64> = match id {
                Some(id) => vec![id],
                None => e.list().iter().map(|b| b.id).collect(),
            };
            let mut failed = 0;
            for id in ids {
                match e.verify(id) {
                    Ok(()) => println!("backup {id}: OK"),
                    Err(err) => {
                        failed += 1;
                        eprintln!("backup {id}: {err}");
                    }
                }
            }
            if id.is_none() {
                for (id, err) in e.corrupt_backups() {
                    failed += 1;
                    eprintln!("backup {id}: {err}");
                }
            }
            Ok(if failed == 0 { 0 } else { 1 })
        }
        BackupCommand::Restore { backup_dir, id, target } => {
            existing(&backup_dir)?.restore(id, &target)?;
            println!("backup {id} restored to {}", target.display());
            Ok(0)
        }
        BackupCommand::Purge { backup_dir, keep } => {
            let deleted = existing(&backup_dir)?.purge_old(keep)?;
            let ids: Vec<String> = deleted.iter().map(u64::to_string).collect();
            println!("deleted {} backups{}{}", ids.len(), if ids.is_empty() { "" } else { ": " }, ids.join(", "));
            Ok(0)
        }
        BackupCommand::Delete { backup_dir, id } => {
            existing(&backup_dir)?.delete(id)?;
            println!("backup {id} deleted");
            Ok(0)
        }
    }
}
