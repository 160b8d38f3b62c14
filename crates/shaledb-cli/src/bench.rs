//! `shaledb bench`: db_bench's benchmarks and flags on an embedded ShaleDB, `shaledb bench suite`, and
//! `shaledb bench resp` (key-value workloads against a RESP server on this machine).

use shaledb_bench::db_bench::flags::BenchFlags;
use shaledb_bench::db_bench::suite::{run_suite, SuiteArgs, SuiteKind};
use shaledb_bench::table_suites::forestdb::{run_forestdb, ForestdbArgs};
use shaledb_bench::table_suites::insertbench::{run_insert, InsertArgs};
use shaledb_bench::table_suites::sysbench::{run_sysbench, SysbenchArgs};
use shaledb_bench::{with_engine, Engine, EngineVisitor};
use std::io::Write;

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
    /// A suite of benchmarks with its summary table: `rocksdb` (RocksDB's benchmark.sh: bulkload, overwrite,
    /// readwhilewriting, readrandom), `merge` (counter updates by read-modify-write against a merge
    /// operator), `sysbench` (sysbench's OLTP tests on tables stored as keys), `insert` (the insert
    /// benchmark, iibench, on the same tables) or `forestdb` (ForestDB's benchmark: load, overwrites, point
    /// and range queries beside a writer).
    Suite(SuiteCommand),
    /// Drive a RESP server on this machine (ShaleDB's or Redis) with key-value workloads: write-hotspot,
    /// write-seq, write-uniform, read-random, read-range (n/a against Redis).
    Resp(shaledb_bench::resp::RespFlags),
}

/// `shaledb bench suite <name>`.
#[derive(clap::Args, Debug)]
pub struct SuiteCommand {
    #[command(subcommand)]
    which: SuiteWhich,
}

#[derive(clap::Subcommand, Debug)]
enum SuiteWhich {
    /// RocksDB's benchmark.sh sequence: bulkload, overwrite, readwhilewriting, readrandom, and its summary
    /// table.
    Rocksdb(SuiteArgs),
    /// Counter updates: updaterandom (read, add, write back) against mergerandom (a uint64add merge
    /// operand).
    Merge(SuiteArgs),
    /// sysbench's OLTP tests (point, range and IN-list reads; updates, inserts, deletes) on tables stored as
    /// keys, engine against engine.
    Sysbench(SysbenchArgs),
    /// The insert benchmark (iibench): a table with 3 secondary indexes loaded at concurrency x padding,
    /// then covering range queries beside a rate-limited inserter, engine against engine.
    Insert(InsertArgs),
    /// ForestDB's benchmark pattern (load, ows, pqw, rqw, pq, rq, owa at 1 and N threads, the
    /// database size after every step), cached and IO-bound, engine against engine.
    Forestdb(ForestdbArgs),
}

struct SuiteRun<'a> {
    args: &'a SuiteArgs,
    out: &'a mut dyn Write,
}

impl EngineVisitor for SuiteRun<'_> {
    type Output = shaledb_bench::Result<()>;
    fn visit<E: Engine>(self) -> Self::Output {
        run_suite::<E>(self.args, self.out).map(|_| ())
    }
}

struct BenchRun<'a> {
    flags: &'a BenchFlags,
    out: &'a mut dyn Write,
}

impl EngineVisitor for BenchRun<'_> {
    type Output = shaledb_bench::Result<()>;
    fn visit<E: Engine>(self) -> Self::Output {
        shaledb_bench::run_bench::<E>(self.flags, self.out).map(|_| ())
    }
}

/// Runs the command, printing db_bench's output to stdout.
pub fn run(cmd: BenchCommand) -> anyhow::Result<()> {
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    match cmd.sub {
        Some(BenchSub::Suite(SuiteCommand { which })) => {
            let (kind, mut args) = match which {
                SuiteWhich::Rocksdb(args) => (SuiteKind::Rocksdb, args),
                SuiteWhich::Merge(args) => (SuiteKind::Merge, args),
                SuiteWhich::Sysbench(args) => {
                    run_sysbench(&args, &mut out)?;
                    return Ok(());
                }
                SuiteWhich::Insert(args) => {
                    run_insert(&args, &mut out)?;
                    return Ok(());
                }
                SuiteWhich::Forestdb(args) => {
                    run_forestdb(&args, &mut out)?;
                    return Ok(());
                }
            };
            args.suite = kind;
            // Several engines run one after the other on fresh databases, in the order given.
            for engine in args.engine.clone() {
                let _ = writeln!(out, "\n##### engine: {} #####", engine.flag_name());
                with_engine(engine, SuiteRun { args: &args, out: &mut out })??;
                // The next engine runs on the database this suite made at --db.
                args.db_made_by_bench = true;
            }
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
            with_engine(cmd.flags.engine, BenchRun { flags: &cmd.flags, out: &mut out })??;
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
