//! `shaledb bench`: db_bench's benchmarks and flags on an embedded ShaleDB, and `shaledb bench suite`.

use shaledb_bench::flags::BenchFlags;
use shaledb_bench::shale::ShaleDb;
use shaledb_bench::suite::{run_suite, SuiteArgs};

/// Arguments of `shaledb bench`: either db_bench flags, or `suite <name>` with the suite's flags.
#[derive(clap::Args, Debug)]
#[command(args_conflicts_with_subcommands = true, args_override_self = true)]
pub struct BenchCommand {
    #[command(subcommand)]
    sub: Option<BenchSub>,
    #[command(flatten)]
    flags: BenchFlags,
}

#[derive(clap::Subcommand, Debug)]
enum BenchSub {
    /// A seed report's suite: `rocksdb` (benchmark.sh bulkload, overwrite, readwhilewriting, readrandom and
    /// its summary table) or `merge` (updaterandom vs mergerandom with uint64add).
    Suite(SuiteArgs),
}

/// Runs the command, printing db_bench's output to stdout.
pub fn run(cmd: BenchCommand) -> anyhow::Result<()> {
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    match cmd.sub {
        Some(BenchSub::Suite(args)) => {
            run_suite::<ShaleDb>(&args, &mut out)?;
        }
        None => {
            cmd.flags.validate()?;
            shaledb_bench::run_bench::<ShaleDb>(&cmd.flags, &mut out)?;
        }
    }
    Ok(())
}
