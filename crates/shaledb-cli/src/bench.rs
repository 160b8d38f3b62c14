//! `shaledb bench`: db_bench's benchmarks and flags on an embedded ShaleDB, `shaledb bench suite`, and
//! `shaledb bench resp` (seed 001's workloads against a RESP server on this machine).

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
    /// Drive a RESP server on this machine (ShaleDB's or Redis) with seed 001's workloads: write-hotspot,
    /// write-seq, write-uniform, read-random, read-range (n/a against Redis).
    Resp(shaledb_bench::resp::RespFlags),
}

/// Runs the command, printing db_bench's output to stdout.
pub fn run(cmd: BenchCommand) -> anyhow::Result<()> {
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    match cmd.sub {
        Some(BenchSub::Suite(args)) => {
            run_suite::<ShaleDb>(&args, &mut out)?;
        }
        Some(BenchSub::Resp(flags)) => {
            let run = shaledb_bench::resp::run_resp(&flags, &mut out).map_err(resp_error)?;
            // The report is printed; a failed request still makes the exit status nonzero.
            if let Some(e) = run.failure() {
                return Err(e.into());
            }
        }
        None => {
            cmd.flags.validate()?;
            shaledb_bench::run_bench::<ShaleDb>(&cmd.flags, &mut out)?;
        }
    }
    Ok(())
}

/// Keeps a bad flag a `BenchError` so that it exits with status 2 as the other bench flags do.
fn resp_error(e: shaledb_bench::resp::RespError) -> anyhow::Error {
    match e {
        shaledb_bench::resp::RespError::Bench(b) => b.into(),
        other => other.into(),
    }
}
