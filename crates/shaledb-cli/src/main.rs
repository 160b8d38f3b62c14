//! `shaledb`: the command-line tool. One module per subcommand; `bench` runs db_bench-compatible
//! benchmarks and the seed suites on an embedded database.

mod bench;

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
    /// and the seed suites (`shaledb bench suite rocksdb|merge`).
    Bench(bench::BenchCommand),
}

fn main() -> ExitCode {
    // gflags spells long flags with one dash (`-num=5`); accept that as db_bench does.
    let args =
        std::env::args().enumerate().map(|(i, a)| if i == 0 { a } else { shaledb_bench::flags::normalize_arg(a) });
    let cli = Cli::parse_from(args);
    let result = match cli.command {
        Command::Bench(cmd) => bench::run(cmd),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(e.downcast_ref::<shaledb_bench::BenchError>().map_or(1, exit_code))
        }
    }
}

fn exit_code(e: &shaledb_bench::BenchError) -> u8 {
    match e {
        shaledb_bench::BenchError::BadFlag { .. } | shaledb_bench::BenchError::Usage(_) => 2,
        _ => 1,
    }
}
