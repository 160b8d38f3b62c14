//! The workloads of seed 001 (obigstore's `bm_write` and `bm_read`) as RESP requests, and the check of
//! every reply.
//!
//! Keys are db_bench's ([`make_key`]: the key number big-endian, padded with `'0'` to `--key-size`), so key
//! order follows key-number order and `write-seq` writes ascending keys. A value is a function of its key
//! number and the seed ([`value_for`]): a random printable run of `value_size * compression_ratio` bytes
//! repeated to fill the value, so each 32-byte payload is half redundant as obigstore's are, and a test
//! (or a later run with the same seed) can tell what a key must hold.
//!
//! | workload | request | key numbers |
//! |---|---|---|
//! | write-seq | `SET k v` / `MSET k1 v1 ...` | request r writes `r*multi .. r*multi+multi` |
//! | write-uniform | same | uniform in `0..keys` |
//! | write-hotspot | same | with probability P one of H hot keys (random 64-bit numbers), else uniform |
//! | read-random | `GET k` / `MGET k1 ...` | uniform in `0..keys` |
//! | read-range | [`RANGE_COMMAND`] | from a uniform start in `0..keys-scan_len`, `scan_len` pairs forward |

use super::proto::{push_arg, push_header, Reply};
use crate::db_bench::keygen::{append_key, make_key};
use crate::reporting::recorder::OpType;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::sync::Arc;

/// The ordered range read, a ShaleDB extension (Redis has no such command): its name.
pub const RANGE_COMMAND: &str = "SHALEDB.RANGE";

/// Appends one range request reading up to `count` pairs forward from `start_key` (inclusive) to the end
/// of the keyspace: `SHALEDB.RANGE [<start> + COUNT <count>`, bounds as ZRANGEBYLEX writes them. The
/// reply is a flat array `key1 val1 key2 val2 ...` in key order. This function and [`RANGE_COMMAND`] are
/// the only places that know the command's shape.
pub fn push_range_request(out: &mut Vec<u8>, start_key: &[u8], count: usize, scratch: &mut Vec<u8>) {
    push_header(out, 6);
    push_arg(out, RANGE_COMMAND.as_bytes());
    scratch.clear();
    scratch.push(b'[');
    scratch.extend_from_slice(start_key);
    push_arg(out, scratch);
    push_arg(out, b"+");
    push_arg(out, b"COUNT");
    push_arg(out, count.to_string().as_bytes());
    push_arg(out, b"WITHVALUES");
}

/// Whether an error reply says the server does not know the command (Redis's wording, which ShaleDB
/// keeps): the workload is then not applicable to that server rather than failed.
pub fn is_unknown_command(err: &[u8]) -> bool {
    err.starts_with(b"ERR unknown command")
}

/// One workload of the seed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Workload {
    /// Writes concentrated on a few hot keys (`--hotspot P:H`).
    WriteHotspot,
    /// Writes of ascending keys.
    WriteSeq,
    /// Writes of uniformly random keys.
    WriteUniform,
    /// Point reads of random keys over the working set.
    ReadRandom,
    /// Ordered range reads.
    ReadRange,
}

impl Workload {
    /// The name `--benchmarks` takes and reports print.
    pub fn name(self) -> &'static str {
        match self {
            Workload::WriteHotspot => "write-hotspot",
            Workload::WriteSeq => "write-seq",
            Workload::WriteUniform => "write-uniform",
            Workload::ReadRandom => "read-random",
            Workload::ReadRange => "read-range",
        }
    }

    /// Parses a name (`write_seq` is accepted too).
    pub fn from_name(s: &str) -> Option<Workload> {
        Some(match s.replace('_', "-").to_ascii_lowercase().as_str() {
            "write-hotspot" => Workload::WriteHotspot,
            "write-seq" => Workload::WriteSeq,
            "write-uniform" => Workload::WriteUniform,
            "read-random" => Workload::ReadRandom,
            "read-range" => Workload::ReadRange,
            _ => return None,
        })
    }

    /// Whether it writes.
    pub fn is_write(self) -> bool {
        matches!(self, Workload::WriteHotspot | Workload::WriteSeq | Workload::WriteUniform)
    }

    /// The recorder's kind of operation.
    pub fn op_type(self) -> OpType {
        match self {
            Workload::ReadRandom => OpType::Read,
            Workload::ReadRange => OpType::Seek,
            _ => OpType::Write,
        }
    }
}

/// `--hotspot P:H`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Hotspot {
    /// Fraction of writes that go to a hot key.
    pub fraction: f64,
    /// Hot keys.
    pub keys: u64,
}

/// Most hot keys (their numbers are kept in memory).
pub const MAX_HOT_KEYS: u64 = 1 << 24;

impl Hotspot {
    /// Parses `P:H` with P in (0, 1] and H in 1..=2^24, H written as a number or `2^k`.
    pub fn parse(s: &str) -> Result<Hotspot, String> {
        let (p, h) = s.split_once(':').ok_or_else(|| format!("'{s}' is not P:H (for example 0.9:8192)"))?;
        let fraction: f64 = p.trim().parse().map_err(|_| format!("'{p}' is not a fraction"))?;
        if !(fraction > 0.0 && fraction <= 1.0) {
            return Err(format!("the fraction {p} is not in (0, 1]"));
        }
        let h = h.trim();
        let keys = match h.split_once('^') {
            Some(("2", k)) => match k.parse::<u32>() {
                Ok(k) if k < 63 => 1u64 << k,
                _ => return Err(format!("'{h}' is not 2^k with k below 63")),
            },
            Some(_) => return Err(format!("'{h}' is not a count or 2^k")),
            None => h.parse::<u64>().map_err(|_| format!("'{h}' is not a count of hot keys"))?,
        };
        if !(1..=MAX_HOT_KEYS).contains(&keys) {
            return Err(format!("{keys} hot keys is not in 1..={MAX_HOT_KEYS}"));
        }
        Ok(Hotspot { fraction, keys })
    }
}

/// Writes the value of key number `key` for `seed` into `out` (cleared first): `value_size *
/// compression_ratio` (at least one) random printable bytes, repeated to fill `value_size`.
pub fn value_for(key: u64, seed: u64, value_size: usize, compression_ratio: f64, out: &mut Vec<u8>) {
    out.clear();
    if value_size == 0 {
        return;
    }
    let raw = ((value_size as f64 * compression_ratio).ceil() as usize).clamp(1, value_size);
    let mut state = seed ^ key.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    let mut word = 0u64;
    for i in 0..raw {
        if i % 8 == 0 {
            word = splitmix64(&mut state);
        }
        // 95 printable bytes ' '..='~'.
        out.push(b' ' + ((word & 0xff) % 95) as u8);
        word >>= 8;
    }
    while out.len() < value_size {
        let n = (value_size - out.len()).min(raw);
        out.extend_from_within(..n);
    }
}

fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Everything a client needs to build one workload's requests and check their replies.
#[derive(Clone, Debug)]
pub struct Plan {
    /// The workload.
    pub workload: Workload,
    /// Keys per request.
    pub multi: usize,
    /// Key bytes.
    pub key_size: usize,
    /// Value bytes.
    pub value_size: usize,
    /// Random fraction of a value.
    pub compression_ratio: f64,
    /// Seed of values and key choice.
    pub seed: u64,
    /// Key space / working set.
    pub keys: u64,
    /// Hot key numbers (write-hotspot).
    pub hot: Vec<u64>,
    /// Fraction of writes to hot keys.
    pub hot_fraction: f64,
    /// Pairs per range read.
    pub scan_len: usize,
    /// `WAIT replicas timeout-ms` after each write (write workloads with --wait-replicas).
    pub wait: Option<(u32, u64)>,
    /// That WAIT, encoded once (empty without it).
    wait_request: Vec<u8>,
    /// With --cluster: [`Plan::push_request`] records each request's hash slot in [`Scratch::slot`].
    pub slots: bool,
    /// With --hash-slots N: the hash tag of each slot 0..N-1 (`{tag}` starts key number k's key, tag k % N).
    pub tags: Arc<Vec<Vec<u8>>>,
}

/// For each slot 0..n, the smallest decimal tag (`0`, `1`, ...) that hashes to it.
pub fn tags_for_slots(n: u32) -> Vec<Vec<u8>> {
    let mut tags: Vec<Option<Vec<u8>>> = vec![None; n as usize];
    let mut left = n as usize;
    let mut i: u64 = 0;
    while left > 0 {
        let t = i.to_string().into_bytes();
        let slot = usize::from(super::slots::key_slot(&t));
        if slot < tags.len() && tags[slot].is_none() {
            tags[slot] = Some(t);
            left -= 1;
        }
        i += 1;
    }
    tags.into_iter().map(|t| t.unwrap_or_default()).collect()
}

impl Plan {
    /// A plan; the hot set is drawn from `seed` so that every client and every run agree on it.
    pub fn new(workload: Workload, f: &super::RespFlags, hotspot: Option<Hotspot>) -> Plan {
        let (hot, hot_fraction) = match (workload, hotspot) {
            (Workload::WriteHotspot, Some(h)) => {
                let mut rng = SmallRng::seed_from_u64(f.seed ^ 0x486f_7453_706f_7473);
                ((0..h.keys).map(|_| rng.gen::<u64>()).collect(), h.fraction)
            }
            _ => (Vec::new(), 0.0),
        };
        let wait = (workload.is_write() && f.wait_replicas > 0).then_some((f.wait_replicas, f.wait_timeout));
        let mut wait_request = Vec::new();
        if let Some((replicas, timeout)) = wait {
            push_header(&mut wait_request, 3);
            push_arg(&mut wait_request, b"WAIT");
            push_arg(&mut wait_request, replicas.to_string().as_bytes());
            push_arg(&mut wait_request, timeout.to_string().as_bytes());
        }
        Plan {
            workload,
            multi: if workload == Workload::ReadRange { 1 } else { f.multi },
            key_size: f.key_size,
            value_size: f.value_size,
            compression_ratio: f.compression_ratio,
            seed: f.seed,
            keys: f.keys,
            hot,
            hot_fraction,
            scan_len: f.scan_len,
            wait,
            wait_request,
            slots: f.cluster,
            tags: Arc::new(tags_for_slots(f.hash_slots)),
        }
    }

    /// Key number `k`'s key, into `out` (cleared first): db_bench's, after its hash tag with --hash-slots.
    fn key_into(&self, k: u64, out: &mut Vec<u8>) {
        if self.tags.is_empty() {
            return make_key(k, self.key_size, out);
        }
        out.clear();
        out.push(b'{');
        out.extend_from_slice(&self.tags[(k % self.tags.len() as u64) as usize]);
        out.push(b'}');
        append_key(k, self.key_size, out);
    }

    /// Replies each request gets: two when a WAIT follows each write.
    pub fn replies_per_request(&self) -> usize {
        if self.wait.is_some() {
            2
        } else {
            1
        }
    }

    /// Checks the reply to the WAIT that follows a write: an integer of at least the replicas asked for.
    pub fn check_wait(&self, reply: &Reply<'_>) -> Result<(), String> {
        let want = self.wait.map_or(0, |(n, _)| i64::from(n));
        match reply {
            Reply::Integer(n) if *n >= want => Ok(()),
            Reply::Integer(n) => Err(format!("WAIT counted {n} replicas of the {want} asked for (timed out)")),
            Reply::Error(e) => Err(format!("WAIT: {}", e.escape_ascii())),
            _ => Err(format!("unexpected reply to WAIT: {}", brief(reply))),
        }
    }

    /// Keys one request stands for (what `--rate` and ops/s count): `multi`, or `scan_len` for a range.
    pub fn keys_per_request(&self) -> usize {
        if self.workload == Workload::ReadRange {
            self.scan_len
        } else {
            self.multi
        }
    }

    /// The `j`-th key number of request `req`.
    fn key_number(&self, rng: &mut SmallRng, req: u64, j: usize) -> u64 {
        match self.workload {
            Workload::WriteSeq => req.wrapping_mul(self.multi as u64).wrapping_add(j as u64),
            Workload::WriteHotspot if !self.hot.is_empty() && rng.gen::<f64>() < self.hot_fraction => {
                self.hot[rng.gen_range(0..self.hot.len())]
            }
            _ => rng.gen_range(0..self.keys),
        }
    }

    /// The slot of a request's first key, in `s` (with `slots`: a cluster routes a command by its first key).
    fn note_slot(&self, j: usize, s: &mut Scratch) {
        if self.slots && j == 0 {
            s.slot = super::slots::key_slot(&s.key);
        }
    }

    /// Appends request number `req` to `out`; returns the key and value bytes it sends. With `slots`, the
    /// slot of its (first) key is left in [`Scratch::slot`].
    pub fn push_request(&self, rng: &mut SmallRng, req: u64, out: &mut Vec<u8>, s: &mut Scratch) -> u64 {
        match self.workload {
            Workload::ReadRange => {
                let span = self.keys.saturating_sub(self.scan_len as u64).saturating_add(1);
                self.key_into(rng.gen_range(0..span), &mut s.key);
                self.note_slot(0, s);
                push_range_request(out, &s.key, self.scan_len, &mut s.value);
                0
            }
            Workload::ReadRandom => {
                push_header(out, 1 + self.multi);
                push_arg(out, if self.multi == 1 { b"GET" } else { b"MGET" });
                for j in 0..self.multi {
                    self.key_into(self.key_number(rng, req, j), &mut s.key);
                    self.note_slot(j, s);
                    push_arg(out, &s.key);
                }
                0
            }
            _ => {
                push_header(out, 1 + 2 * self.multi);
                push_arg(out, if self.multi == 1 { b"SET" } else { b"MSET" });
                for j in 0..self.multi {
                    let k = self.key_number(rng, req, j);
                    self.key_into(k, &mut s.key);
                    self.note_slot(j, s);
                    value_for(k, self.seed, self.value_size, self.compression_ratio, &mut s.value);
                    push_arg(out, &s.key);
                    push_arg(out, &s.value);
                }
                out.extend_from_slice(&self.wait_request);
                ((self.key_size + self.value_size) * self.multi) as u64
            }
        }
    }

    /// Checks one reply to this workload's request.
    pub fn check(&self, reply: &Reply<'_>) -> Outcome {
        if let Reply::Error(e) = reply {
            // Servers echo arguments (binary keys) in their errors: keep the message one printable line.
            let msg = e.escape_ascii().to_string();
            return if self.workload == Workload::ReadRange && is_unknown_command(e) {
                Outcome::Unsupported(msg)
            } else {
                Outcome::Error(msg)
            };
        }
        let unexpected = || Outcome::Error(format!("unexpected reply to {}: {}", self.workload.name(), brief(reply)));
        match self.workload {
            w if w.is_write() => match reply {
                Reply::Simple(b"OK") => Outcome::Done { ops: self.multi as u64, found: 0, bytes: 0 },
                _ => unexpected(),
            },
            Workload::ReadRandom if self.multi == 1 => match reply {
                Reply::Bulk(v) => Outcome::Done { ops: 1, found: 1, bytes: (self.key_size + v.len()) as u64 },
                Reply::Null => Outcome::Done { ops: 1, found: 0, bytes: 0 },
                _ => unexpected(),
            },
            Workload::ReadRandom => match reply {
                Reply::Array(items) if items.len() == self.multi => {
                    let (mut found, mut bytes) = (0, 0);
                    for it in items {
                        match it {
                            Reply::Bulk(v) => {
                                found += 1;
                                bytes += (self.key_size + v.len()) as u64;
                            }
                            Reply::Null => {}
                            _ => return unexpected(),
                        }
                    }
                    Outcome::Done { ops: self.multi as u64, found, bytes }
                }
                _ => unexpected(),
            },
            _ => self.check_range(reply),
        }
    }

    fn check_range(&self, reply: &Reply<'_>) -> Outcome {
        let mut pairs: Vec<(&[u8], &[u8])> = Vec::new();
        match reply {
            Reply::Array(items) if items.len() % 2 == 0 => {
                for kv in items.chunks_exact(2) {
                    match kv {
                        [Reply::Bulk(k), Reply::Bulk(v)] => pairs.push((k, v)),
                        _ => return Outcome::Error(format!("a range reply holds {}", brief(reply))),
                    }
                }
            }
            Reply::Map(items) => {
                for kv in items {
                    match kv {
                        (Reply::Bulk(k), Reply::Bulk(v)) => pairs.push((k, v)),
                        _ => return Outcome::Error(format!("a range reply holds {}", brief(reply))),
                    }
                }
            }
            _ => return Outcome::Error(format!("unexpected reply to read-range: {}", brief(reply))),
        }
        if pairs.len() > self.scan_len {
            return Outcome::Error(format!("a range read of {} returned {} pairs", self.scan_len, pairs.len()));
        }
        if pairs.windows(2).any(|w| w[0].0 >= w[1].0) {
            return Outcome::Error("a range reply's keys are not in ascending order".into());
        }
        let bytes = pairs.iter().map(|(k, v)| (k.len() + v.len()) as u64).sum();
        let n = pairs.len() as u64;
        Outcome::Done { ops: n, found: n, bytes }
    }
}

/// A short description of a reply for error messages.
pub fn brief(r: &Reply<'_>) -> String {
    let s = format!("{r:?}");
    if s.len() > 120 {
        let cut = (0..=117).rev().find(|&i| s.is_char_boundary(i)).unwrap_or(0);
        format!("{}...", &s[..cut])
    } else {
        s
    }
}

/// What a reply meant.
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    /// Success: keys written or read (range: pairs returned), of which found, key+value bytes read.
    Done {
        /// Keys.
        ops: u64,
        /// Keys found (reads).
        found: u64,
        /// Bytes read.
        bytes: u64,
    },
    /// An error reply or a reply of the wrong shape.
    Error(String),
    /// The server does not have the command (the range extension against Redis).
    Unsupported(String),
}

/// Per-client buffers reused across requests.
#[derive(Default, Debug)]
pub struct Scratch {
    key: Vec<u8>,
    value: Vec<u8>,
    slot: u16,
}

impl Scratch {
    /// The hash slot of the last request's first key (when the plan computes slots).
    pub fn slot(&self) -> u16 {
        self.slot
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resp::proto::parse_reply;

    #[test]
    fn values_are_half_redundant_and_deterministic() {
        let mut a = Vec::new();
        value_for(7, 1, 32, 0.5, &mut a);
        assert_eq!(a.len(), 32);
        assert_eq!(a[..16], a[16..]);
        assert!(a.iter().all(|b| (b' '..=b'~').contains(b)));
        let mut b = Vec::new();
        value_for(7, 1, 32, 0.5, &mut b);
        assert_eq!(a, b);
        value_for(8, 1, 32, 0.5, &mut b);
        assert_ne!(a, b);
        value_for(7, 2, 32, 0.5, &mut b);
        assert_ne!(a, b);
        value_for(1, 1, 20_000, 0.5, &mut b);
        assert_eq!(b.len(), 20_000);
        assert_eq!(b[..10_000], b[10_000..]);
        value_for(1, 1, 0, 0.5, &mut b);
        assert!(b.is_empty());
        value_for(1, 1, 5, 1.0, &mut b);
        assert_eq!(b.len(), 5);
    }

    fn plan(w: Workload, multi: usize) -> Plan {
        let f = super::super::RespFlags { multi, keys: 1000, scan_len: 4, ..Default::default() };
        Plan::new(w, &f, Hotspot::parse("0.5:4").ok())
    }

    fn parsed(bytes: &[u8]) -> Vec<Vec<u8>> {
        let (r, n) = parse_reply(bytes).unwrap().unwrap();
        assert_eq!(n, bytes.len());
        match r {
            Reply::Array(v) => v
                .into_iter()
                .map(|x| match x {
                    Reply::Bulk(b) => b.to_vec(),
                    other => panic!("{other:?}"),
                })
                .collect(),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn hash_slots_put_every_key_in_the_first_slots() {
        let tags = tags_for_slots(64);
        assert_eq!(tags.len(), 64);
        for (slot, t) in tags.iter().enumerate() {
            assert_eq!(usize::from(super::super::slots::key_slot(t)), slot);
        }
        let f = super::super::RespFlags { keys: 10_000, hash_slots: 64, cluster: true, ..Default::default() };
        let p = Plan::new(Workload::WriteSeq, &f, None);
        let mut rng = SmallRng::seed_from_u64(1);
        let (mut out, mut s) = (Vec::new(), Scratch::default());
        let mut seen = std::collections::BTreeSet::new();
        for req in 0..1000 {
            out.clear();
            p.push_request(&mut rng, req, &mut out, &mut s);
            assert!(s.slot < 64, "{:?} in slot {}", s.key, s.slot);
            seen.insert(s.slot);
        }
        assert_eq!(seen.len(), 64, "every slot gets keys");
        assert!(tags_for_slots(0).is_empty());
    }

    #[test]
    fn write_seq_requests() {
        let p = plan(Workload::WriteSeq, 3);
        let mut rng = SmallRng::seed_from_u64(1);
        let (mut out, mut s) = (Vec::new(), Scratch::default());
        assert_eq!(p.push_request(&mut rng, 2, &mut out, &mut s), 3 * 48);
        let args = parsed(&out);
        assert_eq!(args.len(), 7);
        assert_eq!(args[0], b"MSET");
        let mut k = Vec::new();
        let mut v = Vec::new();
        for (j, n) in (6..9u64).enumerate() {
            make_key(n, 16, &mut k);
            value_for(n, 1, 32, 0.5, &mut v);
            assert_eq!(args[1 + 2 * j], k);
            assert_eq!(args[2 + 2 * j], v);
        }
        let p = plan(Workload::WriteUniform, 1);
        out.clear();
        p.push_request(&mut rng, 0, &mut out, &mut s);
        assert_eq!(parsed(&out)[0], b"SET");
    }

    #[test]
    fn requests_carry_their_slot() {
        let f = super::super::RespFlags { keys: 1000, cluster: true, multi: 2, ..Default::default() };
        let mut rng = SmallRng::seed_from_u64(1);
        let (mut out, mut s) = (Vec::new(), Scratch::default());
        for w in [Workload::WriteUniform, Workload::ReadRandom, Workload::WriteSeq] {
            let p = Plan::new(w, &f, None);
            let mut seen = std::collections::HashSet::new();
            for r in 0..50 {
                out.clear();
                p.push_request(&mut rng, r, &mut out, &mut s);
                // The first key is the command's second argument.
                let first = &parsed(&out)[1];
                assert_eq!(s.slot(), crate::resp::slots::key_slot(first), "{w:?}");
                seen.insert(s.slot());
            }
            assert!(seen.len() > 40, "{w:?}: {} slots", seen.len());
        }
    }

    #[test]
    fn hotspot_writes_hit_the_hot_set() {
        let p = plan(Workload::WriteHotspot, 1);
        assert_eq!(p.hot.len(), 4);
        let mut rng = SmallRng::seed_from_u64(3);
        let (mut out, mut s, mut hot) = (Vec::new(), Scratch::default(), 0);
        let hot_keys: Vec<Vec<u8>> = p
            .hot
            .iter()
            .map(|&n| {
                let mut k = Vec::new();
                make_key(n, 16, &mut k);
                k
            })
            .collect();
        for r in 0..2000 {
            out.clear();
            p.push_request(&mut rng, r, &mut out, &mut s);
            if hot_keys.contains(&parsed(&out)[1]) {
                hot += 1;
            }
        }
        // Half go to the hot keys (plus the rare cold key that is hot by chance: none in 0..1000).
        assert!((850..1150).contains(&hot), "{hot}");
    }

    #[test]
    fn read_requests_and_replies() {
        let p = plan(Workload::ReadRandom, 2);
        let mut rng = SmallRng::seed_from_u64(1);
        let (mut out, mut s) = (Vec::new(), Scratch::default());
        p.push_request(&mut rng, 0, &mut out, &mut s);
        let args = parsed(&out);
        assert_eq!((args.len(), args[0].as_slice()), (3, &b"MGET"[..]));
        let ok = Reply::Array(vec![Reply::Bulk(b"abc"), Reply::Null]);
        assert_eq!(p.check(&ok), Outcome::Done { ops: 2, found: 1, bytes: 19 });
        assert!(matches!(p.check(&Reply::Array(vec![Reply::Null])), Outcome::Error(_)));
        assert!(matches!(p.check(&Reply::Integer(1)), Outcome::Error(_)));
        let p = plan(Workload::ReadRandom, 1);
        assert_eq!(p.check(&Reply::Null), Outcome::Done { ops: 1, found: 0, bytes: 0 });
        assert_eq!(p.check(&Reply::Error(b"ERR x")), Outcome::Error("ERR x".into()));
        let w = plan(Workload::WriteSeq, 1);
        assert_eq!(w.check(&Reply::Simple(b"OK")), Outcome::Done { ops: 1, found: 0, bytes: 0 });
        assert!(matches!(w.check(&Reply::Simple(b"QUEUED")), Outcome::Error(_)));
        // An unknown command on a write is an error, not "n/a".
        assert!(matches!(w.check(&Reply::Error(b"ERR unknown command 'MSET'")), Outcome::Error(_)));
    }

    #[test]
    fn range_requests_and_replies() {
        let p = plan(Workload::ReadRange, 1);
        let mut rng = SmallRng::seed_from_u64(1);
        let (mut out, mut s) = (Vec::new(), Scratch::default());
        p.push_request(&mut rng, 0, &mut out, &mut s);
        let args = parsed(&out);
        assert_eq!(args[0], RANGE_COMMAND.as_bytes());
        assert_eq!(args[1][0], b'[');
        assert_eq!(args[1].len(), 17);
        assert_eq!(&args[2..], &[b"+".to_vec(), b"COUNT".to_vec(), b"4".to_vec(), b"WITHVALUES".to_vec()]);
        let ok = Reply::Array(vec![Reply::Bulk(b"a"), Reply::Bulk(b"1"), Reply::Bulk(b"b"), Reply::Bulk(b"22")]);
        assert_eq!(p.check(&ok), Outcome::Done { ops: 2, found: 2, bytes: 5 });
        let map = Reply::Map(vec![(Reply::Bulk(b"a"), Reply::Bulk(b"1"))]);
        assert_eq!(p.check(&map), Outcome::Done { ops: 1, found: 1, bytes: 2 });
        let unordered = Reply::Array(vec![Reply::Bulk(b"b"), Reply::Bulk(b"1"), Reply::Bulk(b"a"), Reply::Bulk(b"2")]);
        assert!(matches!(p.check(&unordered), Outcome::Error(_)));
        assert!(matches!(p.check(&Reply::Array(vec![Reply::Bulk(b"a")])), Outcome::Error(_)));
        let too_many = Reply::Array((0..10).map(|_| Reply::Bulk(b"x")).collect());
        assert!(matches!(p.check(&too_many), Outcome::Error(_)));
        let unknown = Reply::Error(b"ERR unknown command 'SHALEDB.RANGE', with args beginning with: '[k' ");
        assert!(matches!(p.check(&unknown), Outcome::Unsupported(_)));
        assert_eq!(p.check(&Reply::Array(vec![])), Outcome::Done { ops: 0, found: 0, bytes: 0 });
    }
}
