//! `fillingest`: a bulk load by ingestion, which db_bench 7.8 does not have (issue 17).
//!
//! The keys are fillseq's: key numbers `0..--writes` (default `--num`) in order, cut into runs of
//! `--ingest_keys_per_file` keys. Each run is written with the engine's `SstFileWriter` into a file of a
//! temporary directory beside the database (the same file system, so the files are moved in by hard link)
//! and ingested on its own (`IngestExternalFile` with `move_files`). The threads share the key space: run
//! *j* goes to thread *j* mod `--threads`, so the result line counts `--writes` operations in all, whatever
//! the number of threads (db_bench's fills count `--writes` per thread). Each key added to a file counts as
//! one write operation of its thread; the last key of a file completes once the file is written, synced and
//! ingested, so that operation's latency holds the ingestion.
//!
//! The runs never overlap each other (key numbers are big-endian, so byte order follows numeric order), and
//! each lands in the deepest level its range leaves free without a global sequence number: this is the best
//! case of a bulk load. Where the key shape does not keep the order (`--keys_per_prefix`, or key numbers
//! past `256^key_size`), each run is sorted and its duplicates dropped before it is written; such runs may
//! overlap earlier ones, which the engines place as they do any overlapping ingestion.

use crate::db_bench::workloads::{err, Ctx};
use crate::engine::{Engine, EngineSstWriter};
use crate::reporting::recorder::{OpType, ThreadStats};
use crate::Result;
use std::path::PathBuf;

impl<E: Engine> Ctx<'_, E> {
    /// Thread `ts.tid`'s runs of `fillingest`.
    pub(crate) fn fill_ingest(&self, ts: &mut ThreadStats<'_>) -> Result<()> {
        let Some(dir) = self.ingest_dir else {
            return Err(err("setup", self.kind, "no directory for the files to ingest".into()));
        };
        let per_file = self.ingest_keys_per_file.max(1);
        let total = self.writes;
        let files = total.div_ceil(per_file);
        ts.message = format!("({files} files of up to {per_file} keys)");
        let threads = self.threads.max(1) as u64;
        let mut values = self.values.generator();
        let ks = self.key_size;
        let mut keys: Vec<u8> = Vec::new();
        let mut key = Vec::with_capacity(ks);
        let mut order: Vec<usize> = Vec::new();
        let mut run = ts.tid as u64;
        while run < files {
            let first = run * per_file;
            let n = per_file.min(total - first) as usize;
            keys.clear();
            for k in first..first + n as u64 {
                self.key(k, self.num, &mut key);
                keys.extend_from_slice(&key);
            }
            order.clear();
            order.extend(0..n);
            let at = |i: usize| keys.get(i * ks..(i + 1) * ks).unwrap_or_default();
            if !(1..n).all(|i| at(i - 1) < at(i)) {
                order.sort_by(|&a, &b| at(a).cmp(at(b)));
                order.dedup_by(|a, b| at(*a) == at(*b));
            }
            let path: PathBuf = dir.join(format!("{run:08}.sst"));
            let mut w = self.db.sst_writer(&path).map_err(|e| err("sst_writer", self.kind, e))?;
            for (j, &i) in order.iter().enumerate() {
                let k = at(i);
                let v = values.generate(self.value_size);
                w.put(k, v).map_err(|e| err("sst put", self.kind, e))?;
                ts.bytes += (k.len() + v.len()) as u64;
                if j + 1 < order.len() {
                    ts.finished_ops(1, OpType::Write);
                }
            }
            w.finish().map_err(|e| err("sst finish", self.kind, e))?;
            drop(w);
            self.db.ingest(&[path]).map_err(|e| err("ingest", self.kind, e))?;
            // The file's last key completes when the file is ingested, so its latency holds the finish and
            // the ingestion. Keys dropped as duplicates still count, as a fill counts every put.
            ts.finished_ops((n + 1 - order.len()) as u64, OpType::Write);
            run += threads;
        }
        Ok(())
    }
}
