//! `shaledb`: the command-line tool. One module per subcommand; `bench` runs db_bench-compatible
//! benchmarks and the seed suites on an embedded database.

mod backup;
mod bench;
mod cluster;
mod db_bench_alias;
mod dump;
mod ingest;
mod keys;
mod repair;
mod spelling;
#[cfg(feature = "stress")]
mod stress;
mod verify;

use clap::{CommandFactory, FromArgMatches, Subcommand};
use std::process::ExitCode;

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// ShaleDB command-line tool.
#[derive(clap::Parser, Debug)]
#[command(name = "shaledb", about, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Benchmarks with db_bench's flags and output (`shaledb bench --benchmarks=fillrandom,readrandom`),
    /// suites that compare engines (`shaledb bench suite rocksdb|merge|sysbench|insert|forestdb`) and RESP
    /// server workloads (`shaledb bench resp`).
    Bench(Box<bench::BenchCommand>),
    /// Print the contents of an SST (properties, index, entries), a WAL (records, batches, sequence numbers)
    /// or a MANIFEST (version edits, the resulting LSM shape), like RocksDB's sst_dump and ldb.
    Dump(dump::Args),
    /// Check every checksum of every live file and the MANIFEST's consistency; exit 1 on any problem.
    Verify(verify::Args),
    /// Print the value of a key (`ldb get`); exit 1 with "NotFound" when it is absent.
    Get(keys::GetArgs),
    /// Set a key (`ldb put`).
    Put(keys::PutArgs),
    /// Delete a key (`ldb delete`).
    Delete(keys::DeleteArgs),
    /// Print `KEY ==> VALUE` for the keys in a range, in order or reversed (`ldb scan`).
    Scan(keys::ScanArgs),
    /// Write every key/value of the plain database SRC as a Redis string into a new server's directory DEST
    /// (database 0, or `--db N`), for `shaledb server --dir DEST`.
    ImportStrings(keys::ImportArgs),
    /// Print the names of the database's column families, the default one first (`ldb list_column_families`).
    ListColumnFamilies(keys::ListFamiliesArgs),
    /// Create a column family with the database's recorded options (`ldb create_column_family`).
    CreateColumnFamily(keys::FamilyArgs),
    /// Drop a column family and, once unreferenced, its files (`ldb drop_column_family`).
    DropColumnFamily(keys::FamilyArgs),
    /// Rebuild CURRENT of a damaged database from the newest MANIFEST that replays cleanly with all its
    /// tables present (like RocksDB's RepairDB, limited to what can be proven). Deletes nothing.
    Repair(repair::Args),
    /// Write a consistent, openable copy of the database DB into the new directory DIR (tables hard linked),
    /// while it may be written (RocksDB's Checkpoint).
    Checkpoint(backup::CheckpointArgs),
    /// Incremental backups: `backup create DB BACKUP_DIR`, `list BACKUP_DIR`, `verify BACKUP_DIR [ID]`,
    /// `restore BACKUP_DIR ID TARGET`, `purge BACKUP_DIR --keep N`, `delete BACKUP_DIR ID`.
    #[command(subcommand)]
    Backup(backup::BackupCommand),
    /// `sst write OUTPUT INPUT`: write the sorted `KEY<TAB>VALUE` lines of INPUT as an SST for `ingest`.
    #[command(subcommand)]
    Sst(ingest::SstCommand),
    /// Add SSTs written by `sst write` to the database DB atomically (RocksDB's IngestExternalFile).
    Ingest(ingest::IngestArgs),
    /// A Redis-protocol server on a database directory (redis-cli, redis-benchmark and client libraries
    /// work against it), durable by default: a write is acknowledged after its fsync (group commit).
    Server(shaledb_server::ServerArgs),
    /// Replica groups of servers started with --cluster-enabled yes, sharing the 16384 slots: `cluster create
    /// HOST:PORT ... --replicas 2` (redis-cli --cluster create's arguments; 6 nodes make two groups of three).
    #[command(subcommand)]
    Cluster(cluster::ClusterCommand),
    /// Make `DIR/db_bench` a link to this binary: run as `db_bench`, it is `shaledb bench`, so RocksDB's
    /// tools/benchmark.sh (which runs `./db_bench`) drives ShaleDB unchanged.
    InstallDbBench(db_bench_alias::Args),
    /// db_stress-style random operations on a directory, checked against an expected-state file that
    /// survives the process (for kill -9 testing).
    #[cfg(feature = "stress")]
    Stress(stress::Args),
    /// db_stress-style random operations (not in this build: it was built without the `stress` feature).
    #[cfg(not(feature = "stress"))]
    Stress {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, hide = true)]
        args: Vec<String>,
    },
}

/// Turns transparent huge pages off for this process unless `MIMALLOC_ALLOW_THP` is set (then mimalloc's own
/// reading of it decides). mimalloc advises huge pages on its arenas (`madvise(MADV_HUGEPAGE)`), so even where
/// the system's THP mode is `madvise` each first touch of a 2 MiB region zeroes a whole huge page, and can stop
/// to compact memory for one, inside whichever request first touches it: in seekrandom, while the block cache
/// fills, those faults were the reads above the 99.9th percentile (docs/perf/huge-pages.md). Redis turns THP off
/// for its own process the same way (`disable-thp`); glibc's malloc, which RocksDB's db_bench uses, does not ask
/// for huge pages.
fn huge_pages_off_unless_asked(mimalloc_allow_thp: Option<&std::ffi::OsStr>) {
    if mimalloc_allow_thp.is_some() {
        return;
    }
    #[cfg(target_os = "linux")]
    if let Err(e) = rustix::thread::disable_transparent_huge_pages(true) {
        // Only a kernel without the prctl refuses it; the process then runs as before, with a word why.
        eprintln!("warning: could not turn transparent huge pages off for this process: {e}");
    }
}

fn main() -> ExitCode {
    huge_pages_off_unless_asked(std::env::var_os("MIMALLOC_ALLOW_THP").as_deref());
    // Invoked as `db_bench` (a link `shaledb install-db-bench` makes), it is `shaledb bench`: RocksDB's
    // tools/benchmark.sh runs `./db_bench` and works unchanged.
    let args = db_bench_alias::expand(std::env::args().collect());
    // bench keeps db_bench's spellings; the other commands' old spellings still work, with a warning.
    let (args, warnings) = spelling::respell(args);
    for w in &warnings {
        eprintln!("warning: {w}");
    }
    // clap keeps the version as a `&'static str`; built once per process.
    let version: &'static str = Box::leak(version().into_boxed_str());
    let matches = Cli::command().version(version).get_matches_from(args);
    let cli = match Cli::from_arg_matches(&matches) {
        Ok(c) => c,
        Err(e) => e.exit(),
    };
    let result = match cli.command {
        Command::Bench(cmd) => bench::run(*cmd),
        Command::Dump(a) => return tool_exit(dump::run(a)),
        Command::Verify(a) => return tool_exit(verify::run(a)),
        #[cfg(feature = "stress")]
        Command::Stress(a) => return tool_exit(stress::run(a)),
        #[cfg(not(feature = "stress"))]
        Command::Stress { .. } => {
            eprintln!("error: this shaledb was built without the `stress` feature (rebuild with --features stress)");
            return ExitCode::from(2);
        }
        Command::Repair(a) => return tool_exit(repair::run(a)),
        Command::Checkpoint(a) => return tool_exit(backup::checkpoint(a)),
        Command::Backup(c) => return tool_exit(backup::run(c)),
        Command::Sst(c) => return tool_exit(ingest::sst(c)),
        Command::Ingest(a) => return tool_exit(ingest::ingest(a)),
        Command::InstallDbBench(a) => return tool_exit(db_bench_alias::install(a)),
        Command::Cluster(c) => return tool_exit(cluster::run(c)),
        Command::Get(a) => return tool_exit(keys::get(a)),
        Command::Put(a) => return tool_exit(keys::put(a)),
        Command::Delete(a) => return tool_exit(keys::delete(a)),
        Command::Scan(a) => return tool_exit(keys::scan(a)),
        Command::ImportStrings(a) => return tool_exit(keys::import_strings(a)),
        Command::ListColumnFamilies(a) => return tool_exit(keys::list_families(a)),
        Command::CreateColumnFamily(a) => return tool_exit(keys::create_family(a)),
        Command::DropColumnFamily(a) => return tool_exit(keys::drop_family(a)),
        Command::Server(a) => shaledb_server::Config::from_args(&a)
            .map_err(anyhow::Error::from)
            .and_then(|c| shaledb_server::run(c).map_err(anyhow::Error::from)),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {}", error_message(&e));
            ExitCode::from(e.downcast_ref::<shaledb_bench::BenchError>().map_or(1, exit_code))
        }
    }
}

/// `shaledb --version`: the release, the commit it was built from (`shaledb::BUILD_COMMIT`, from the engine's
/// build.rs) and the on-disk format version it writes (a database written by a newer format is refused at open).
fn version() -> String {
    format!(
        "{} (commit {}, on-disk format {})",
        env!("CARGO_PKG_VERSION"),
        shaledb::BUILD_COMMIT,
        shaledb_format::FORMAT_VERSION
    )
}

/// Exit status of the dump/verify/stress tools: their own code, or 1 with the error printed.
fn tool_exit(r: anyhow::Result<i32>) -> ExitCode {
    match r {
        Ok(code) => ExitCode::from(u8::try_from(code).unwrap_or(1)),
        Err(e) => {
            eprintln!("error: {}", error_message(&e));
            ExitCode::from(1)
        }
    }
}

/// The error and its causes on one line, each cause once. ShaleDB's own error includes its cause in its message
/// and does not return it as `source()` as well; some wrappers (the bench's, the server's) do both, and
/// anyhow's `{e:#}` would print such a cause twice or three times. So a cause whose message the line already
/// holds is left out.
fn error_message(e: &anyhow::Error) -> String {
    let mut line = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if text.is_empty() || line.contains(&text) {
            continue;
        }
        if !line.is_empty() {
            line.push_str(": ");
        }
        line.push_str(&text);
    }
    line
}

fn exit_code(e: &shaledb_bench::BenchError) -> u8 {
    match e {
        shaledb_bench::BenchError::BadFlag { .. } | shaledb_bench::BenchError::Usage(_) => 2,
        _ => 1,
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::huge_pages_off_unless_asked;
    use std::ffi::OsStr;

    /// One test, so nothing else in this process flips the flag between its steps.
    #[test]
    fn huge_pages_go_off_unless_mimalloc_is_told_to_allow_them() {
        rustix::thread::disable_transparent_huge_pages(false).unwrap();
        huge_pages_off_unless_asked(Some(OsStr::new("1")));
        assert!(!rustix::thread::transparent_huge_pages_are_disabled().unwrap(), "MIMALLOC_ALLOW_THP set: left on");
        huge_pages_off_unless_asked(None);
        assert!(rustix::thread::transparent_huge_pages_are_disabled().unwrap(), "unset: turned off");
    }
}
