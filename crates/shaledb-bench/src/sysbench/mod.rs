//! Seed 002's sysbench suite on the table layer (SKELETON, issue 13: being written).

use crate::Result;
use std::io::Write;

/// `shaledb bench suite sysbench` arguments.
#[derive(clap::Args, Clone, Debug, serde::Serialize)]
#[command(rename_all = "snake_case")]
pub struct SysbenchArgs {
    /// Engines, alternated per configuration: shaledb, rocksdb (comma-separated).
    #[arg(long, value_enum, value_delimiter = ',', default_value = "shaledb")]
    pub engine: Vec<crate::engine::EngineKind>,
}

/// Runs the suite, printing its tables to `out`.
pub fn run_sysbench(a: &SysbenchArgs, out: &mut dyn Write) -> Result<()> {
    let _ = (a, out);
    Err(crate::BenchError::Usage("sysbench: not built yet".into()))
}
