//! What the server counts about the commands it runs: calls, time, rejections and failures per command and
//! per subcommand (`INFO commandstats`), a latency histogram per command (`LATENCY HISTOGRAM`, `INFO
//! latencystats`), and error replies by their code (`INFO errorstats`, `total_error_replies`).
//!
//! Counting costs a few relaxed atomic additions per command: every command of the table has its own
//! counters, found by a binary search over the table's addresses (no lock, no allocation). Subcommands of
//! the container commands (`CONFIG GET`, `CLIENT LIST` ...) have theirs in a map behind a read-mostly lock,
//! created once per subcommand the table knows (an unknown subcommand name never adds an entry).

use crate::commands::{self, Spec};
use crate::resp::Reply;
use parking_lot::{Mutex, RwLock};
use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Buckets of a latency histogram: bucket `k` holds durations of at most `2^k` microseconds (and more than
/// `2^(k-1)`); the last one holds everything longer.
pub const BUCKETS: usize = 40;

/// Most distinct error codes counted (`INFO errorstats`); codes past it are counted in
/// `total_error_replies` only.
const MAX_ERROR_CODES: usize = 128;

/// The subcommands of Redis 7.0's container commands: what `cmdstat_<cmd>|<sub>` may name.
const SUBCOMMANDS: &[(&str, &[&str])] = &[
    (
        "acl",
        &[
            "cat", "deluser", "dryrun", "genpass", "getuser", "help", "list", "load", "log", "save", "setuser",
            "users", "whoami",
        ],
    ),
    (
        "client",
        &[
            "caching",
            "getname",
            "getredir",
            "help",
            "id",
            "info",
            "kill",
            "list",
            "no-evict",
            "no-touch",
            "pause",
            "reply",
            "setinfo",
            "setname",
            "tracking",
            "trackinginfo",
            "unblock",
            "unpause",
        ],
    ),
    (
        "cluster",
        &[
            "addslots",
            "addslotsrange",
            "bumpepoch",
            "count-failure-reports",
            "countkeysinslot",
            "delslots",
            "delslotsrange",
            "failover",
            "flushslots",
            "forget",
            "getkeysinslot",
            "help",
            "info",
            "keyslot",
            "links",
            "meet",
            "myid",
            "nodes",
            "replicas",
            "replicate",
            "reset",
            "saveconfig",
            "set-config-epoch",
            "setslot",
            "shards",
            "slaves",
            "slots",
        ],
    ),
    ("command", &["count", "docs", "getkeys", "getkeysandflags", "help", "info", "list"]),
    ("config", &["get", "help", "resetstat", "rewrite", "set"]),
    ("function", &["delete", "dump", "flush", "help", "kill", "list", "load", "restore", "stats"]),
    ("latency", &["doctor", "graph", "help", "histogram", "history", "latest", "reset"]),
    ("memory", &["doctor", "help", "malloc-stats", "purge", "stats", "usage"]),
    ("module", &["help", "list", "load", "loadex", "unload"]),
    ("object", &["encoding", "freq", "help", "idletime", "refcount"]),
    ("pubsub", &["channels", "help", "numpat", "numsub", "shardchannels", "shardnumsub"]),
    ("script", &["debug", "exists", "flush", "help", "kill", "load"]),
    ("slowlog", &["get", "help", "len", "reset"]),
    ("xgroup", &["create", "createconsumer", "delconsumer", "destroy", "help", "setid"]),
    ("xinfo", &["consumers", "groups", "help", "stream"]),
];

/// The subcommand name `cmd|sub` for a container command called with a known subcommand.
pub fn full_name(name: &str, sub: Option<&[u8]>) -> Option<String> {
    let sub = sub?;
    let (_, subs) = SUBCOMMANDS.iter().find(|(c, _)| *c == name)?;
    let lower = std::str::from_utf8(sub).ok()?.to_ascii_lowercase();
    subs.contains(&lower.as_str()).then(|| format!("{name}|{lower}"))
}

/// The full names of a container command's subcommands (`config|get` ...); none for another command.
pub fn subcommands_of(name: &str) -> Vec<String> {
    SUBCOMMANDS
        .iter()
        .find(|(c, _)| *c == name)
        .map(|(_, subs)| subs.iter().map(|s| format!("{name}|{s}")).collect())
        .unwrap_or_default()
}

/// True for a command whose statistics are kept per subcommand.
pub fn is_container(name: &str) -> bool {
    SUBCOMMANDS.iter().any(|(c, _)| *c == name)
}

/// One command's (or subcommand's) counters.
pub struct CmdStat {
    calls: AtomicU64,
    usec: AtomicU64,
    rejected: AtomicU64,
    failed: AtomicU64,
    hist: [AtomicU64; BUCKETS],
}

impl Default for CmdStat {
    fn default() -> Self {
        CmdStat {
            calls: AtomicU64::new(0),
            usec: AtomicU64::new(0),
            rejected: AtomicU64::new(0),
            failed: AtomicU64::new(0),
            hist: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }
}

/// The bucket of a duration (see [`BUCKETS`]).
pub fn bucket_of(d: Duration) -> usize {
    let us = d.as_micros().max(1);
    // The smallest k with us <= 2^k.
    let k = (128 - (us - 1).leading_zeros()) as usize;
    k.min(BUCKETS - 1)
}

impl CmdStat {
    fn record(&self, d: Duration, failed: bool, track_latency: bool) {
        self.calls.fetch_add(1, Ordering::Relaxed);
        self.usec.fetch_add(u64::try_from(d.as_micros()).unwrap_or(u64::MAX), Ordering::Relaxed);
        if failed {
            self.failed.fetch_add(1, Ordering::Relaxed);
        }
        if track_latency {
            self.hist[bucket_of(d)].fetch_add(1, Ordering::Relaxed);
        }
    }

    fn reset(&self) {
        for c in [&self.calls, &self.usec, &self.rejected, &self.failed].into_iter().chain(self.hist.iter()) {
            c.store(0, Ordering::Relaxed);
        }
    }

    fn snapshot(&self) -> Snapshot {
        Snapshot {
            calls: self.calls.load(Ordering::Relaxed),
            usec: self.usec.load(Ordering::Relaxed),
            rejected: self.rejected.load(Ordering::Relaxed),
            failed: self.failed.load(Ordering::Relaxed),
            hist: std::array::from_fn(|i| self.hist[i].load(Ordering::Relaxed)),
        }
    }
}

/// A command's counters read at one time.
#[derive(Debug, Clone)]
pub struct Snapshot {
    pub calls: u64,
    pub usec: u64,
    pub rejected: u64,
    pub failed: u64,
    pub hist: [u64; BUCKETS],
}

impl Snapshot {
    /// Calls recorded in the histogram.
    pub fn hist_total(&self) -> u64 {
        self.hist.iter().sum()
    }

    /// The upper bound, in microseconds, of the bucket holding the `p`th percentile (0 to 100) of the
    /// histogram (`None`: empty).
    pub fn percentile_usec(&self, p: f64) -> Option<u64> {
        let total = self.hist_total();
        if total == 0 {
            return None;
        }
        let want = ((p / 100.0) * total as f64).ceil().max(1.0) as u64;
        let mut seen = 0;
        for (k, n) in self.hist.iter().enumerate() {
            seen += n;
            if seen >= want {
                return Some(1u64 << k);
            }
        }
        Some(1u64 << (BUCKETS - 1))
    }

    /// `LATENCY HISTOGRAM`'s reply for this command: calls and the cumulative counts per bucket bound.
    pub fn cdf_reply(&self) -> Reply {
        let mut points = Vec::new();
        let mut cumulative = 0;
        for (k, n) in self.hist.iter().enumerate() {
            if *n > 0 {
                cumulative += n;
                points.push((Reply::Int(1i64 << k), Reply::Int(cumulative as i64)));
            }
        }
        Reply::Map(vec![
            (Reply::bulk("calls"), Reply::Int(self.hist_total() as i64)),
            (Reply::bulk("histogram_usec"), Reply::Map(points)),
        ])
    }
}

/// Every command's counters, the error codes' and the switches that say what to record.
pub struct CommandStats {
    /// The table's commands by the address of their [`Spec`], sorted by it.
    by_spec: Vec<(usize, &'static Spec, CmdStat)>,
    subs: RwLock<HashMap<String, Arc<CmdStat>>>,
    errors: Mutex<BTreeMap<String, u64>>,
    pub total_error_replies: AtomicU64,
    /// `latency-tracking`: histograms are recorded.
    pub latency_tracking: AtomicBool,
}

impl Default for CommandStats {
    fn default() -> Self {
        let mut by_spec: Vec<(usize, &'static Spec, CmdStat)> =
            commands::all().map(|s| (s as *const Spec as usize, s, CmdStat::default())).collect();
        by_spec.sort_by_key(|(a, _, _)| *a);
        CommandStats {
            by_spec,
            subs: RwLock::new(HashMap::new()),
            errors: Mutex::new(BTreeMap::new()),
            total_error_replies: AtomicU64::new(0),
            latency_tracking: AtomicBool::new(true),
        }
    }
}

/// The error code of an error reply's text: its first word when there is a space within its first 32 bytes,
/// else `ERR` (as Redis counts them).
pub fn error_code(msg: &str) -> &str {
    let head = &msg.as_bytes()[..msg.len().min(32)];
    match head.iter().position(|&b| b == b' ') {
        Some(i) if i > 0 => &msg[..i],
        _ => "ERR",
    }
}

impl CommandStats {
    fn of_spec(&self, spec: &'static Spec) -> Option<&CmdStat> {
        let addr = spec as *const Spec as usize;
        self.by_spec.binary_search_by_key(&addr, |(a, _, _)| *a).ok().map(|i| &self.by_spec[i].2)
    }

    fn of_sub(&self, full: &str) -> Arc<CmdStat> {
        if let Some(s) = self.subs.read().get(full) {
            return s.clone();
        }
        self.subs.write().entry(full.to_string()).or_default().clone()
    }

    /// Records one executed command: its time, and whether its reply was an error.
    pub fn record(&self, spec: &'static Spec, sub: Option<&[u8]>, d: Duration, reply: &Reply) {
        let failed = if let Reply::Error(msg) = reply {
            self.count_error(msg);
            true
        } else {
            false
        };
        let track = self.latency_tracking.load(Ordering::Relaxed);
        match full_name(spec.name, sub) {
            Some(full) => self.of_sub(&full).record(d, failed, track),
            None => {
                if let Some(s) = self.of_spec(spec) {
                    s.record(d, failed, track);
                }
            }
        }
    }

    /// Records a command refused before it ran (arity, authentication, MULTI queueing): a rejected call
    /// of the command when it is one, and its error.
    pub fn record_rejected(&self, spec: Option<&'static Spec>, sub: Option<&[u8]>, reply: &Reply) {
        if let Reply::Error(msg) = reply {
            self.count_error(msg);
        }
        let Some(spec) = spec else { return };
        match full_name(spec.name, sub) {
            Some(full) => {
                self.of_sub(&full).rejected.fetch_add(1, Ordering::Relaxed);
            }
            None => {
                if let Some(s) = self.of_spec(spec) {
                    s.rejected.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
    }

    /// Counts an error reply by its code.
    pub fn count_error(&self, msg: &str) {
        self.total_error_replies.fetch_add(1, Ordering::Relaxed);
        let code = error_code(msg);
        let mut errors = self.errors.lock();
        if let Some(n) = errors.get_mut(code) {
            *n += 1;
        } else if errors.len() < MAX_ERROR_CODES {
            errors.insert(code.to_string(), 1);
        }
    }

    /// `CONFIG RESETSTAT`.
    pub fn reset(&self) {
        for (_, _, s) in &self.by_spec {
            s.reset();
        }
        self.subs.write().clear();
        self.errors.lock().clear();
        self.total_error_replies.store(0, Ordering::Relaxed);
    }

    /// Every command and subcommand called at least once, by full name, in name order.
    pub fn called(&self) -> Vec<(String, Snapshot)> {
        let mut out: Vec<(String, Snapshot)> = self
            .by_spec
            .iter()
            .map(|(_, spec, s)| (spec.name.to_string(), s.snapshot()))
            .chain(self.subs.read().iter().map(|(n, s)| (n.clone(), s.snapshot())))
            .filter(|(_, s)| s.calls > 0 || s.rejected > 0)
            .collect();
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    }

    /// The counters of one command or subcommand by name (`set`, `client|id`), if it was called; a container
    /// name gives each of its subcommands called.
    pub fn named(&self, name: &str) -> Vec<(String, Snapshot)> {
        let name = name.to_ascii_lowercase();
        let prefix = format!("{name}|");
        self.called().into_iter().filter(|(n, _)| *n == name || n.starts_with(&prefix)).collect()
    }

    /// `INFO commandstats`' lines.
    pub fn write_commandstats(&self, out: &mut String) {
        for (name, s) in self.called() {
            let per_call = if s.calls == 0 { 0.0 } else { s.usec as f64 / s.calls as f64 };
            let _ = write!(
                out,
                "cmdstat_{name}:calls={},usec={},usec_per_call={per_call:.2},rejected_calls={},failed_calls={}\r\n",
                s.calls, s.usec, s.rejected, s.failed
            );
        }
    }

    /// `INFO errorstats`' lines.
    pub fn write_errorstats(&self, out: &mut String) {
        for (code, n) in self.errors.lock().iter() {
            let _ = write!(out, "errorstat_{code}:count={n}\r\n");
        }
    }

    /// `INFO latencystats`' lines at the given percentiles.
    pub fn write_latencystats(&self, percentiles: &[f64], out: &mut String) {
        if !self.latency_tracking.load(Ordering::Relaxed) {
            return;
        }
        for (name, s) in self.called() {
            if s.hist_total() == 0 {
                continue;
            }
            let parts: Vec<String> = percentiles
                .iter()
                .map(|p| format!("p{}={:.3}", trim_number(*p), s.percentile_usec(*p).unwrap_or(0) as f64))
                .collect();
            let _ = write!(out, "latency_percentiles_usec_{name}:{}\r\n", parts.join(","));
        }
    }
}

/// A number as Redis prints a percentile's name: no trailing zeros, no trailing point (`50`, `99.9`).
pub fn trim_number(p: f64) -> String {
    let s = format!("{p:.6}");
    let s = s.trim_end_matches('0');
    s.trim_end_matches('.').to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_powers_of_two_microseconds() {
        assert_eq!(bucket_of(Duration::from_nanos(10)), 0);
        assert_eq!(bucket_of(Duration::from_micros(1)), 0);
        assert_eq!(bucket_of(Duration::from_micros(2)), 1);
        assert_eq!(bucket_of(Duration::from_micros(3)), 2);
        assert_eq!(bucket_of(Duration::from_micros(1024)), 10);
        assert_eq!(bucket_of(Duration::from_micros(1025)), 11);
        assert_eq!(bucket_of(Duration::from_secs(1 << 30)), BUCKETS - 1);
    }

    #[test]
    fn error_codes_are_first_words() {
        assert_eq!(error_code("WRONGTYPE Operation against a key"), "WRONGTYPE");
        assert_eq!(error_code("ERR syntax error"), "ERR");
        assert_eq!(error_code("NOSPACEHERE"), "ERR");
        assert_eq!(error_code(&format!("{} x", "A".repeat(40))), "ERR");
    }

    #[test]
    fn counts_calls_failures_rejections_and_subcommands() {
        let st = CommandStats::default();
        let set = commands::lookup(b"set").unwrap();
        let config = commands::lookup(b"config").unwrap();
        st.record(set, None, Duration::from_micros(3), &Reply::Ok);
        st.record(set, None, Duration::from_micros(5), &Reply::error("WRONGTYPE x"));
        st.record_rejected(Some(set), None, &Reply::err("wrong number of arguments for 'set' command"));
        st.record(config, Some(b"GET"), Duration::from_micros(1), &Reply::Ok);
        st.record(config, Some(b"nosuch"), Duration::from_micros(1), &Reply::Ok);
        let mut out = String::new();
        st.write_commandstats(&mut out);
        assert!(
            out.contains("cmdstat_set:calls=2,usec=8,usec_per_call=4.00,rejected_calls=1,failed_calls=1\r\n"),
            "{out}"
        );
        assert!(out.contains("cmdstat_config|get:calls=1,"), "{out}");
        assert!(out.contains("cmdstat_config:calls=1,"), "{out}");
        let mut errs = String::new();
        st.write_errorstats(&mut errs);
        assert_eq!(errs, "errorstat_ERR:count=1\r\nerrorstat_WRONGTYPE:count=1\r\n");
        assert_eq!(st.total_error_replies.load(Ordering::Relaxed), 2);
        assert_eq!(st.named("config").len(), 2);
        let s = &st.named("set")[0].1;
        assert_eq!(s.percentile_usec(50.0), Some(4));
        assert_eq!(s.percentile_usec(100.0), Some(8));
        let mut lat = String::new();
        st.write_latencystats(&[50.0, 99.9], &mut lat);
        assert!(lat.contains("latency_percentiles_usec_set:p50=4.000,p99.9=8.000\r\n"), "{lat}");
        st.reset();
        assert!(st.called().is_empty());
        let mut errs = String::new();
        st.write_errorstats(&mut errs);
        assert!(errs.is_empty());
    }

    #[test]
    fn percentile_names_are_trimmed() {
        assert_eq!(trim_number(50.0), "50");
        assert_eq!(trim_number(99.9), "99.9");
        assert_eq!(trim_number(0.0), "0");
    }
}
