//! `shaledb`: the command-line tool. One module per subcommand; `bench` runs db_bench-compatible
//! benchmarks and the seed suites on an embedded database.

mod bench;
mod dump;
mod repair;
mod stress;
mod verify;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

/// ShaleDB command-line tool.
#[derive(Parser, Debug)]
#[command(name = "shaledb", version, about, propagate_version = true)]
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
    /// Rebuild CURRENT of a damaged database from the newest MANIFEST that replays cleanly with all its
    /// tables present (like RocksDB's RepairDB, limited to what can be proven). Deletes nothing.
    Repair(repair::Args),
    /// A Redis-protocol server on a database directory (redis-cli, redis-benchmark and client libraries
    /// work against it), durable by default: a write is acknowledged after its fsync (group commit).
    Server(shaledb_server::ServerArgs),
    /// db_stress-style random operations on a directory, checked against an expected-state file that
    /// survives the process (for kill -9 testing).
    Stress(stress::Args),
}

fn main() -> ExitCode {
    // gflags spells long flags with one dash (`-num=5`); accept that as db_bench does.
    let args =
        std::env::args().enumerate().map(|(i, a)| if i == 0 { a } else { shaledb_bench::flags::normalize_arg(a) });
    let cli = Cli::parse_from(args);
    let result = match cli.command {
        Command::Bench(cmd) => bench::run(*cmd),
        Command::Dump(a) => return tool_exit(dump::run(a)),
        Command::Verify(a) => return tool_exit(verify::run(a)),
        Command::Stress(a) => return tool_exit(stress::run(a)),
        Command::Repair(a) => return tool_exit(repair::run(a)),
        Command::Server(a) => shaledb_server::Config::from_args(&a)
            .map_err(anyhow::Error::from)
            .and_then(|c| shaledb_server::run(c).map_err(anyhow::Error::from)),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(e.downcast_ref::<shaledb_bench::BenchError>().map_or(1, exit_code))
        }
    }
}

/// Exit status of the dump/verify/stress tools: their own code, or 1 with the error printed.
fn tool_exit(r: anyhow::Result<i32>) -> ExitCode {
    match r {
        Ok(code) => ExitCode::from(u8::try_from(code).unwrap_or(1)),
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(1)
        }
    }
}

fn exit_code(e: &shaledb_bench::BenchError) -> u8 {
    match e {
        shaledb_bench::BenchError::BadFlag { .. } | shaledb_bench::BenchError::Usage(_) => 2,
        _ => 1,
    }
}
