//! LATENCY: the latency monitor (events `command` and `fast-command`: a command that took at least
//! `latency-monitor-threshold` milliseconds, 0 = off) and the per-command histograms of `stats.rs`.
//!
//! Each event keeps its last 160 samples, one per second at most (the largest of that second), and its
//! all-time maximum, in memory, as Redis does. A write command's time is its share of its commit group's
//! (see `slowlog.rs`).

use super::super::{help_reply, sub_arity, unknown_subcommand};
use crate::resp::{Args, Reply};
use crate::server::{Session, Shared};
use parking_lot::Mutex;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Samples kept per event.
const HISTORY: usize = 160;

/// One event's samples: `(unix seconds, milliseconds)`, oldest first.
#[derive(Default, Debug)]
struct Series {
    samples: std::collections::VecDeque<(u64, u64)>,
    max: u64,
}

/// The latency monitor.
#[derive(Default)]
pub struct LatencyMonitor {
    events: Mutex<BTreeMap<&'static str, Series>>,
    /// `latency-monitor-threshold` in milliseconds (0: off).
    pub threshold_ms: AtomicU64,
}

impl LatencyMonitor {
    /// Records a command's time under `event` when it reaches the threshold.
    pub fn offer(&self, event: &'static str, d: Duration) {
        let t = self.threshold_ms.load(Ordering::Relaxed);
        if t == 0 {
            return;
        }
        let ms = u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
        if ms >= t {
            self.add(event, crate::store::now_ms() / 1000, ms);
        }
    }

    fn add(&self, event: &'static str, now: u64, ms: u64) {
        let mut events = self.events.lock();
        let s = events.entry(event).or_default();
        s.max = s.max.max(ms);
        if let Some(last) = s.samples.back_mut() {
            if last.0 == now {
                last.1 = last.1.max(ms);
                return;
            }
        }
        if s.samples.len() == HISTORY {
            s.samples.pop_front();
        }
        s.samples.push_back((now, ms));
    }
}

const HELP: &[&str] = &[
    "LATENCY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "DOCTOR",
    "    Return a human readable latency analysis report.",
    "GRAPH <event>",
    "    Return an ASCII latency graph for the <event> class.",
    "HISTORY <event>",
    "    Return time-latency samples for the <event> class.",
    "LATEST",
    "    Return the latest latency samples for all events.",
    "RESET [<event> ...]",
    "    Reset latency data of one or more <event> classes.",
    "    (default: reset all data for all event classes)",
    "HISTOGRAM [COMMAND ...]",
    "    Return a cumulative distribution of latencies in the format of a histogram for the specified command names.",
    "    If no commands are specified then all histograms are replied.",
    "HELP",
    "    Print this help.",
];

pub(super) fn latency(_: &mut Session, shared: &Shared, args: &Args) -> Reply {
    let mon = &shared.intro.latency;
    let sub = args[1].to_ascii_lowercase();
    let argc = args.len();
    let event = || String::from_utf8_lossy(&args[2]).into_owned();
    match sub.as_slice() {
        b"help" if argc == 2 => help_reply(HELP),
        b"latest" if argc == 2 => Reply::Array(
            mon.events
                .lock()
                .iter()
                .filter_map(|(name, s)| {
                    let (time, ms) = *s.samples.back()?;
                    Some(Reply::Array(vec![
                        Reply::bulk(*name),
                        Reply::Int(time as i64),
                        Reply::Int(ms as i64),
                        Reply::Int(s.max as i64),
                    ]))
                })
                .collect(),
        ),
        b"history" if argc == 3 => {
            let events = mon.events.lock();
            let samples = events.get(event().as_str()).map(|s| s.samples.clone()).unwrap_or_default();
            Reply::Array(
                samples
                    .into_iter()
                    .map(|(t, ms)| Reply::Array(vec![Reply::Int(t as i64), Reply::Int(ms as i64)]))
                    .collect(),
            )
        }
        b"reset" => {
            let mut events = mon.events.lock();
            if argc == 2 {
                let n = events.len();
                events.clear();
                Reply::Int(n as i64)
            } else {
                let mut n = 0;
                for a in &args[2..] {
                    n += events.remove(String::from_utf8_lossy(a).as_ref()).is_some() as i64;
                }
                Reply::Int(n)
            }
        }
        b"graph" if argc == 3 => {
            let events = mon.events.lock();
            match events.get(event().as_str()) {
                Some(s) if !s.samples.is_empty() => Reply::Verbatim(graph(&event(), s)),
                _ => Reply::err(format!("No samples available for event '{}'", event())),
            }
        }
        b"doctor" if argc == 2 => Reply::Verbatim(doctor(shared)),
        b"histogram" => {
            let stats = &shared.intro.commands;
            let chosen = if argc == 2 {
                stats.called()
            } else {
                let mut v = Vec::new();
                for a in &args[2..] {
                    for (n, s) in stats.named(&String::from_utf8_lossy(a)) {
                        if !v.iter().any(|(m, _)| *m == n) {
                            v.push((n, s));
                        }
                    }
                }
                v
            };
            Reply::Map(
                chosen
                    .into_iter()
                    .filter(|(_, s)| s.hist_total() > 0)
                    .map(|(n, s)| (Reply::bulk(n), s.cdf_reply()))
                    .collect(),
            )
        }
        b"help" | b"latest" | b"history" | b"graph" | b"doctor" => sub_arity("latency", &sub),
        _ => unknown_subcommand("LATENCY", &args[1]),
    }
}

/// A chart of an event's samples: one column per sample (oldest left), `#` up to its height on a scale of
/// the largest sample, and the seconds since each sample under it.
fn graph(event: &str, s: &Series) -> String {
    const ROWS: u64 = 4;
    let max = s.samples.iter().map(|x| x.1).max().unwrap_or(0).max(1);
    let min = s.samples.iter().map(|x| x.1).min().unwrap_or(0);
    let now = crate::store::now_ms() / 1000;
    let mut out = String::new();
    let _ = writeln!(out, "{event} - high {max} ms, low {min} ms (all time high {} ms)", s.max);
    let _ = writeln!(out, "{}", "-".repeat(s.samples.len().max(20)));
    for row in (1..=ROWS).rev() {
        let line: String = s.samples.iter().map(|x| if x.1 * ROWS >= row * max { '#' } else { ' ' }).collect();
        let _ = writeln!(out, "{line}");
    }
    let ages: String = s
        .samples
        .iter()
        .map(|x| {
            let age = now.saturating_sub(x.0);
            match age {
                0..=59 => 's',
                60..=3599 => 'm',
                _ => 'h',
            }
        })
        .collect();
    let _ = writeln!(out, "{ages}");
    let _ = writeln!(out, "(columns: samples, oldest left; last row: age in s(econds), m(inutes), h(ours))");
    out
}

/// A short report on the events and on what the server records.
fn doctor(shared: &Shared) -> String {
    let mon = &shared.intro.latency;
    let threshold = mon.threshold_ms.load(Ordering::Relaxed);
    let events = mon.events.lock();
    let mut out = String::new();
    if threshold == 0 {
        out.push_str(
            "The latency monitor is off (latency-monitor-threshold is 0): no latency event is recorded. \
             Turn it on with CONFIG SET latency-monitor-threshold <milliseconds>.\n",
        );
    } else if events.is_empty() {
        let _ = writeln!(
            out,
            "No latency event of at least {threshold} ms was recorded since the start or the last LATENCY RESET."
        );
    } else {
        let _ = writeln!(out, "Latency events of at least {threshold} ms recorded:");
        for (i, (name, s)) in events.iter().enumerate() {
            let n = s.samples.len().max(1) as u64;
            let avg = s.samples.iter().map(|x| x.1).sum::<u64>() / n;
            let first = s.samples.front().map_or(0, |x| x.0);
            let _ = writeln!(
                out,
                "{}. {name}: {} latency spikes (average {avg} ms, worst {} ms) since unix time {first}.",
                i + 1,
                s.samples.len(),
                s.max
            );
        }
        out.push_str(
            "\nA `command` or `fast-command` event is a command that ran for at least the threshold. A write \
             command's time includes its share of the commit group's write and fsync: with appendfsync always, \
             slow fsyncs show here (see INFO persistence's commit_fsyncs). Look at SLOWLOG GET for the commands.\n",
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_sample_per_second_and_a_bounded_history() {
        let m = LatencyMonitor::default();
        m.add("command", 10, 5);
        m.add("command", 10, 9);
        m.add("command", 10, 7);
        {
            let e = m.events.lock();
            let s = &e["command"];
            assert_eq!(s.samples.iter().copied().collect::<Vec<_>>(), vec![(10, 9)]);
            assert_eq!(s.max, 9);
        }
        for t in 11..400 {
            m.add("command", t, 1);
        }
        let e = m.events.lock();
        let s = &e["command"];
        assert_eq!(s.samples.len(), HISTORY);
        assert_eq!(s.samples.back(), Some(&(399, 1)));
        assert_eq!(s.max, 9);
        let g = graph("command", s);
        assert!(g.starts_with("command - high 1 ms, low 1 ms (all time high 9 ms)\n"), "{g}");
    }

    #[test]
    fn nothing_is_recorded_below_the_threshold_or_when_off() {
        let m = LatencyMonitor::default();
        m.offer("command", Duration::from_secs(1));
        assert!(m.events.lock().is_empty());
        m.threshold_ms.store(100, Ordering::Relaxed);
        m.offer("command", Duration::from_millis(99));
        assert!(m.events.lock().is_empty());
        m.offer("fast-command", Duration::from_millis(100));
        assert_eq!(m.events.lock()["fast-command"].max, 100);
    }
}
