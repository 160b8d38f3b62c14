//! `shaledb bench resp` flags and their checks. Every bad value is a [`BenchError::BadFlag`] naming the
//! flag, which the command turns into exit status 2.

use super::workloads::{Hotspot, Workload};
use crate::BenchError;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;

/// Most simulated clients (connections), as obigstore's `bm_write -concurrency` was run with.
pub const MAX_CONCURRENCY: usize = 256;

/// Flags of `shaledb bench resp`.
#[derive(clap::Args, Clone, Debug, serde::Serialize)]
pub struct RespFlags {
    /// Server address: loopback only (127.0.0.1, ::1 or localhost).
    #[arg(long, default_value = "127.0.0.1")]
    pub host: String,
    /// Server port.
    #[arg(long, default_value_t = 6379)]
    pub port: u16,
    /// Password sent with AUTH on every connection.
    #[arg(long)]
    #[serde(skip)]
    pub password: Option<String>,
    /// Comma-separated workloads, run in order: write-hotspot, write-seq, write-uniform, read-random,
    /// read-range.
    #[arg(long, visible_alias = "workload", default_value = "write-seq,read-random,read-range")]
    pub benchmarks: String,
    /// write-hotspot: `P:H`, a fraction P of the writes go to H hot keys (H may be written 2^k); the rest
    /// are uniform over --keys.
    #[arg(long, default_value = "0.99999:2^13")]
    pub hotspot: String,
    /// Key space of write-uniform and write-hotspot's cold writes, and the working set of read-random and
    /// read-range (key numbers 0..N, the keys write-seq writes first).
    #[arg(long, default_value_t = 1_000_000)]
    pub keys: u64,
    /// Requests per workload (each carries --multi keys; a range read is one request).
    #[arg(long, default_value_t = 100_000)]
    pub num: u64,
    /// Seconds per workload instead of --num (0: use --num).
    #[arg(long, default_value_t = 0)]
    pub duration: u64,
    /// Simulated clients, one connection each (1..=256).
    #[arg(long, short = 'c', default_value_t = 50)]
    pub concurrency: usize,
    /// Requests each client sends before reading their replies.
    #[arg(long, short = 'P', default_value_t = 1)]
    pub pipeline: usize,
    /// Keys per request: MSET of N pairs for writes, MGET of N keys for reads.
    #[arg(long, default_value_t = 1)]
    pub multi: usize,
    /// Fixed arrival rate, keys per second across all clients (0: as fast as possible). Latency is measured
    /// from each request's intended send time, so a stall is not hidden by the clients waiting on it.
    #[arg(long, default_value_t = 0.0)]
    pub rate: f64,
    /// Value bytes.
    #[arg(long, visible_alias = "value_size", default_value_t = 32)]
    pub value_size: usize,
    /// Fraction of each value that is random; the rest repeats it (0.5: half redundant, as obigstore's
    /// payloads and db_bench's --compression_ratio).
    #[arg(long, visible_alias = "compression_ratio", default_value_t = 0.5)]
    pub compression_ratio: f64,
    /// Key bytes (db_bench's layout: the key number big-endian, padded with '0').
    #[arg(long, visible_alias = "key_size", default_value_t = 16)]
    pub key_size: usize,
    /// read-range: concurrent scanners (the workload's concurrency).
    #[arg(long, default_value_t = 16)]
    pub scanners: usize,
    /// read-range: keys per range read.
    #[arg(long, visible_alias = "scan_len", default_value_t = 512)]
    pub scan_len: usize,
    /// Seed of the key choice and values; the same seed writes the same data.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Client threads, each running its share of the connections on one event loop.
    #[arg(long, default_value_t = 1)]
    pub threads: usize,
    /// Write workloads: send `WAIT N --wait-timeout` after each write (two replies per request), as a client
    /// of a primary with replicas does to know its write reached N replicas. A request's latency runs to
    /// WAIT's reply, which must count at least N replicas. 0: no WAIT.
    #[arg(long, default_value_t = 0)]
    pub wait_replicas: u32,
    /// WAIT's timeout in milliseconds (0: wait for ever, as Redis's `WAIT N 0`).
    #[arg(long, default_value_t = 0)]
    pub wait_timeout: u64,
    /// Route by hash slot, as cluster clients do: the slot -> master table is read from `CLUSTER SLOTS` at the
    /// start, and each client sends each request to its key's slot's master (a connection per master). A
    /// `-MOVED` reply updates the table (read again at most once a second); `-CLUSTERDOWN` or a lost
    /// connection sends that master's next connection to the next node `CLUSTER NODES` listed. Requests so
    /// answered are counted as redirected (their outcome is unknown), not as errors. With several masters,
    /// read-range and --multi above 1 are refused (they span slots).
    #[arg(long)]
    pub cluster: bool,
    /// Put every key in one of hash slots 0..N-1 only: each key is prefixed with a hash tag `{t}` chosen for
    /// its slot (key number modulo N), so a cluster's slots 0..N-1 hold all the data, as large slots do on a
    /// large database (a slot move's cost per GiB is measured this way: scripts/compare-cluster --slots-used).
    /// Keys are then longer than --key-size by the tag. 0: keys as db_bench makes them.
    #[arg(long, default_value_t = 0)]
    pub hash_slots: u32,
    /// Seconds between progress lines (ops/s, p50, p99) on stderr; 0 prints none.
    #[arg(long, visible_alias = "stats_interval_seconds", default_value_t = 1)]
    pub stats_interval_seconds: u64,
    /// Write every figure as JSON to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Draw the plots of `shaledb bench` (throughput and latency over time) into this directory.
    #[arg(long, visible_alias = "plot")]
    pub plot_dir: Option<PathBuf>,
}

impl Default for RespFlags {
    fn default() -> Self {
        RespFlags {
            host: "127.0.0.1".into(),
            port: 6379,
            password: None,
            benchmarks: "write-seq,read-random,read-range".into(),
            hotspot: "0.99999:2^13".into(),
            keys: 1_000_000,
            num: 100_000,
            duration: 0,
            concurrency: 50,
            pipeline: 1,
            multi: 1,
            rate: 0.0,
            value_size: 32,
            compression_ratio: 0.5,
            key_size: 16,
            scanners: 16,
            scan_len: 512,
            seed: 1,
            threads: 1,
            wait_replicas: 0,
            wait_timeout: 0,
            cluster: false,
            hash_slots: 0,
            stats_interval_seconds: 1,
            json: None,
            plot_dir: None,
        }
    }
}

fn bad<T>(flag: &str, msg: impl Into<String>) -> Result<T, BenchError> {
    Err(BenchError::BadFlag { flag: flag.into(), msg: msg.into() })
}

/// Resolves `host` to a loopback address, refusing anything else: load runs only on this machine.
pub fn loopback_addr(host: &str, port: u16) -> Result<SocketAddr, BenchError> {
    let h = host.trim_start_matches('[').trim_end_matches(']');
    let ip = if h.eq_ignore_ascii_case("localhost") {
        IpAddr::V4(Ipv4Addr::LOCALHOST)
    } else {
        match h.parse::<IpAddr>() {
            Ok(ip) if ip.is_loopback() => ip,
            Ok(_) | Err(_) => {
                return bad(
                    "host",
                    format!("'{host}' is not a loopback address; the load tool only drives servers on this machine (127.0.0.1, ::1, localhost)"),
                )
            }
        }
    };
    Ok(SocketAddr::new(ip, port))
}

impl RespFlags {
    /// The workloads of `--benchmarks`, in order.
    pub fn workloads(&self) -> Result<Vec<Workload>, BenchError> {
        let mut v = Vec::new();
        for name in self.benchmarks.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            match Workload::from_name(name) {
                Some(w) => v.push(w),
                None => {
                    return bad(
                        "benchmarks",
                        format!(
                        "unknown workload '{name}' (write-hotspot, write-seq, write-uniform, read-random, read-range)"
                    ),
                    )
                }
            }
        }
        if v.is_empty() {
            return bad("benchmarks", "no workload given");
        }
        Ok(v)
    }

    /// The parsed `--hotspot`.
    pub fn hotspot(&self) -> Result<Hotspot, BenchError> {
        Hotspot::parse(&self.hotspot).map_or_else(|msg| bad("hotspot", msg), Ok)
    }

    /// The server's address (loopback only).
    pub fn addr(&self) -> Result<SocketAddr, BenchError> {
        loopback_addr(&self.host, self.port)
    }

    /// Checks every flag; the error names the first bad one.
    pub fn validate(&self) -> Result<(), BenchError> {
        self.addr()?;
        let workloads = self.workloads()?;
        if !(1..=MAX_CONCURRENCY).contains(&self.concurrency) {
            return bad("concurrency", format!("{} is not in 1..={MAX_CONCURRENCY}", self.concurrency));
        }
        if !(1..=MAX_CONCURRENCY).contains(&self.scanners) {
            return bad("scanners", format!("{} is not in 1..={MAX_CONCURRENCY}", self.scanners));
        }
        if !(1..=10_000).contains(&self.pipeline) {
            return bad("pipeline", format!("{} is not in 1..=10000", self.pipeline));
        }
        if !(1..=100_000).contains(&self.multi) {
            return bad("multi", format!("{} is not in 1..=100000", self.multi));
        }
        if !(1..=1_000_000).contains(&self.scan_len) {
            return bad("scan-len", format!("{} is not in 1..=1000000", self.scan_len));
        }
        if !(1..=64).contains(&self.threads) {
            return bad("threads", format!("{} is not in 1..=64", self.threads));
        }
        if !(1..=(1 << 20)).contains(&self.key_size) {
            return bad("key-size", format!("{} is not in 1..=1048576", self.key_size));
        }
        if self.value_size > 64 << 20 {
            return bad("value-size", format!("{} is above 64 MiB", self.value_size));
        }
        if !(self.compression_ratio > 0.0 && self.compression_ratio <= 1.0) {
            return bad("compression-ratio", format!("{} is not in (0, 1]", self.compression_ratio));
        }
        if self.wait_replicas > 1000 {
            return bad("wait-replicas", format!("{} is not in 0..=1000", self.wait_replicas));
        }
        if self.wait_timeout > 0 && self.wait_replicas == 0 {
            return bad("wait-timeout", "given without --wait-replicas");
        }
        if self.wait_replicas > 0 && !workloads.iter().any(|w| w.is_write()) {
            return bad("wait-replicas", "WAIT follows writes; no write workload is selected");
        }
        if self.hash_slots > 16384 {
            return bad("hash-slots", format!("{} is not in 0..=16384", self.hash_slots));
        }
        if self.keys == 0 {
            return bad("keys", "the key space needs at least one key");
        }
        if self.num == 0 && self.duration == 0 {
            return bad("num", "0 requests and no --duration: nothing to run");
        }
        if self.duration > 7 * 24 * 3600 {
            return bad("duration", "more than a week");
        }
        if !self.rate.is_finite() || self.rate < 0.0 {
            return bad("rate", format!("{} is not a rate (keys per second, 0 for unlimited)", self.rate));
        }
        // The per-request payload must fit what a server accepts in one request.
        let request_bytes = (self.key_size as u128 + self.value_size as u128 + 32) * self.multi as u128;
        if request_bytes > 512 << 20 {
            return bad("multi", format!("{} keys of this size make a request over 512 MiB", self.multi));
        }
        if workloads.contains(&Workload::WriteHotspot) {
            self.hotspot()?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(f: RespFlags) -> String {
        match f.validate() {
            Ok(()) => "ok".into(),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn defaults_are_valid() {
        assert_eq!(check(RespFlags::default()), "ok");
    }

    #[test]
    fn concurrency_out_of_range() {
        let e = check(RespFlags { concurrency: 0, ..RespFlags::default() });
        assert_eq!(e, "invalid value for --concurrency: 0 is not in 1..=256");
        let e = check(RespFlags { concurrency: 1000, ..RespFlags::default() });
        assert_eq!(e, "invalid value for --concurrency: 1000 is not in 1..=256");
        assert_eq!(check(RespFlags { concurrency: 256, ..RespFlags::default() }), "ok");
    }

    #[test]
    fn only_loopback_hosts() {
        for h in ["127.0.0.1", "::1", "[::1]", "localhost", "LOCALHOST", "127.0.0.2"] {
            assert_eq!(check(RespFlags { host: h.into(), ..RespFlags::default() }), "ok", "{h}");
        }
        for h in ["10.0.0.1", "0.0.0.0", "::", "192.168.1.1", "example.com", "8.8.8.8", ""] {
            let e = check(RespFlags { host: h.into(), ..RespFlags::default() });
            assert!(e.starts_with("invalid value for --host:") && e.contains("loopback"), "{h}: {e}");
        }
    }

    #[test]
    fn hotspot_specs() {
        let with = |s: &str| {
            check(RespFlags { hotspot: s.into(), benchmarks: "write-hotspot".into(), ..RespFlags::default() })
        };
        assert_eq!(with("0.9:8192"), "ok");
        assert_eq!(with("1:1"), "ok");
        assert_eq!(with("0.99999:2^13"), "ok");
        for s in ["0.9", "1.5:10", "0:10", "-0.1:10", "0.9:0", "0.9:x", "nan:5", "0.9:2^64", ":", "0.5:2^"] {
            let e = with(s);
            assert!(e.starts_with("invalid value for --hotspot:"), "{s}: {e}");
        }
        // Not checked when no workload uses it.
        assert_eq!(check(RespFlags { hotspot: "junk".into(), ..RespFlags::default() }), "ok");
    }

    #[test]
    fn other_bad_values() {
        let d = RespFlags::default;
        assert!(check(RespFlags { benchmarks: "write-seq,fillrandom".into(), ..d() })
            .contains("unknown workload 'fillrandom'"));
        assert!(check(RespFlags { benchmarks: ",".into(), ..d() }).contains("--benchmarks"));
        assert!(check(RespFlags { pipeline: 0, ..d() }).contains("--pipeline"));
        assert!(check(RespFlags { multi: 0, ..d() }).contains("--multi"));
        assert!(check(RespFlags { keys: 0, ..d() }).contains("--keys"));
        assert!(check(RespFlags { rate: -1.0, ..d() }).contains("--rate"));
        assert!(check(RespFlags { rate: f64::NAN, ..d() }).contains("--rate"));
        assert!(check(RespFlags { num: 0, ..d() }).contains("--num"));
        assert_eq!(check(RespFlags { num: 0, duration: 1, ..d() }), "ok");
        assert!(check(RespFlags { scanners: 300, ..d() }).contains("--scanners"));
        assert!(check(RespFlags { compression_ratio: 0.0, ..d() }).contains("--compression-ratio"));
        assert!(check(RespFlags { value_size: 1 << 30, ..d() }).contains("--value-size"));
        assert!(check(RespFlags { multi: 100_000, value_size: 32 << 20, ..d() }).contains("--multi"));
        assert!(check(RespFlags { wait_timeout: 5, ..d() }).contains("--wait-timeout"));
        assert!(check(RespFlags { wait_replicas: 5000, ..d() }).contains("--wait-replicas"));
        assert!(check(RespFlags { wait_replicas: 1, benchmarks: "read-random".into(), ..d() })
            .contains("no write workload"));
        assert_eq!(check(RespFlags { wait_replicas: 1, wait_timeout: 100, ..d() }), "ok");
    }
}
