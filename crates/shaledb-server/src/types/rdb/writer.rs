//! Writes a [`Value`] as the RDB object Redis 7.0 would write for it, choosing the encodings every Redis
//! since 7.0 reads: strings raw (integers in 1, 2 or 4 bytes, as Redis does; never compressed), lists as a
//! quicklist of listpacks, sets, sorted sets (binary scores) and hashes as plain sequences, streams as
//! listpack nodes with their consumer groups (`STREAM_LISTPACKS_2`).

use super::packed::{canonical_i64, ListpackWriter};
use super::reader::{kind, CONTAINER_PACKED, CONTAINER_PLAIN, FLAG_SAMEFIELDS};
use super::{StreamValue, Value};
use crate::types::stream::{Entry, Id};

/// A list's listpack node holds at most this many elements or bytes (Redis's `list-max-listpack-size -2`
/// is 8 KiB); an element of 1 GiB or more gets a plain node of its own.
const LIST_NODE_ITEMS: usize = 128;
const LIST_NODE_BYTES: usize = 8 << 10;
const PLAIN_THRESHOLD: usize = 1 << 30;

/// A stream node holds at most this many entries or bytes (`stream-node-max-entries`, `-max-bytes`).
const STREAM_NODE_ENTRIES: usize = 100;
const STREAM_NODE_BYTES: usize = 4096;

pub fn len(out: &mut Vec<u8>, n: u64) {
    if n < 1 << 6 {
        out.push(n as u8);
    } else if n < 1 << 14 {
        out.push(0x40 | (n >> 8) as u8);
        out.push(n as u8);
    } else if n <= u32::MAX as u64 {
        out.push(0x80);
        out.extend_from_slice(&(n as u32).to_be_bytes());
    } else {
        out.push(0x81);
        out.extend_from_slice(&n.to_be_bytes());
    }
}

pub fn string(out: &mut Vec<u8>, s: &[u8]) {
    if s.len() <= 11 {
        if let Some(v) = canonical_i64(s) {
            if let Ok(b) = i8::try_from(v) {
                out.push(0xc0);
                out.push(b as u8);
                return;
            } else if let Ok(h) = i16::try_from(v) {
                out.push(0xc1);
                out.extend_from_slice(&h.to_le_bytes());
                return;
            } else if let Ok(w) = i32::try_from(v) {
                out.push(0xc2);
                out.extend_from_slice(&w.to_le_bytes());
                return;
            }
        }
    }
    len(out, s.len() as u64);
    out.extend_from_slice(s);
}

fn id(out: &mut Vec<u8>, i: Id) {
    len(out, i.ms);
    len(out, i.seq);
}

/// The object: its type byte and body.
pub fn object(out: &mut Vec<u8>, v: &Value) {
    match v {
        Value::String(s) => {
            out.push(kind::STRING);
            string(out, s);
        }
        Value::List(items) => {
            out.push(kind::LIST_QUICKLIST_2);
            let mut nodes: Vec<(u64, Vec<u8>)> = Vec::new();
            let mut lp = ListpackWriter::new();
            for it in items {
                if it.len() >= PLAIN_THRESHOLD {
                    if !lp.is_empty() {
                        nodes.push((CONTAINER_PACKED, std::mem::take(&mut lp).finish()));
                    }
                    nodes.push((CONTAINER_PLAIN, it.clone()));
                    continue;
                }
                if !lp.is_empty() && (lp.len() >= LIST_NODE_ITEMS || lp.bytes() + it.len() > LIST_NODE_BYTES) {
                    nodes.push((CONTAINER_PACKED, std::mem::take(&mut lp).finish()));
                }
                lp.push(it);
            }
            if !lp.is_empty() {
                nodes.push((CONTAINER_PACKED, lp.finish()));
            }
            len(out, nodes.len() as u64);
            for (container, blob) in nodes {
                len(out, container);
                string(out, &blob);
            }
        }
        Value::Set(members) => {
            out.push(kind::SET);
            len(out, members.len() as u64);
            for m in members {
                string(out, m);
            }
        }
        Value::ZSet(items) => {
            out.push(kind::ZSET_2);
            len(out, items.len() as u64);
            for (m, s) in items {
                string(out, m);
                out.extend_from_slice(&s.to_bits().to_le_bytes());
            }
        }
        Value::Hash(pairs) => {
            out.push(kind::HASH);
            len(out, pairs.len() as u64);
            for (f, v) in pairs {
                string(out, f);
                string(out, v);
            }
        }
        Value::Stream(s) => {
            out.push(kind::STREAM_LISTPACKS_2);
            stream(out, s);
        }
    }
}

/// The field names of an entry (its pairs' even elements).
fn fields(e: &Entry) -> impl Iterator<Item = &[u8]> + '_ {
    e.pairs.iter().step_by(2).map(|b| &b[..])
}

/// One node: `entries` (all live) after `master` = the first one's id.
fn stream_node(entries: &[Entry]) -> Vec<u8> {
    let master = &entries[0];
    let nfields = master.pairs.len() / 2;
    let mut lp = ListpackWriter::new();
    lp.push_int(entries.len() as i64);
    lp.push_int(0);
    lp.push_int(nfields as i64);
    for f in fields(master) {
        lp.push(f);
    }
    lp.push_int(0);
    for e in entries {
        let same = e.pairs.len() / 2 == nfields && fields(e).eq(fields(master));
        lp.push_int(if same { FLAG_SAMEFIELDS } else { 0 });
        lp.push_int(e.id.ms.wrapping_sub(master.id.ms) as i64);
        lp.push_int(e.id.seq.wrapping_sub(master.id.seq) as i64);
        let n = (e.pairs.len() / 2) as i64;
        if same {
            for v in e.pairs.iter().skip(1).step_by(2) {
                lp.push(v);
            }
            lp.push_int(n + 3);
        } else {
            lp.push_int(n);
            for p in e.pairs.chunks_exact(2) {
                lp.push(&p[0]);
                lp.push(&p[1]);
            }
            lp.push_int(2 * n + 4);
        }
    }
    lp.finish()
}

fn stream(out: &mut Vec<u8>, s: &StreamValue) {
    // Split into nodes by entry count and approximate size.
    let mut nodes: Vec<&[Entry]> = Vec::new();
    let mut start = 0;
    let mut bytes = 0usize;
    for (i, e) in s.entries.iter().enumerate() {
        let size: usize = e.pairs.iter().map(|p| p.len() + 2).sum::<usize>() + 8;
        if i > start && (i - start >= STREAM_NODE_ENTRIES || bytes + size > STREAM_NODE_BYTES) {
            nodes.push(&s.entries[start..i]);
            start = i;
            bytes = 0;
        }
        bytes += size;
    }
    if start < s.entries.len() {
        nodes.push(&s.entries[start..]);
    }
    len(out, nodes.len() as u64);
    for n in nodes {
        string(out, &n[0].id.part());
        string(out, &stream_node(n));
    }
    len(out, s.entries.len() as u64);
    id(out, s.last);
    id(out, s.entries.first().map_or(Id::default(), |e| e.id));
    id(out, s.max_deleted);
    len(out, s.entries_added);
    len(out, s.groups.len() as u64);
    for g in &s.groups {
        string(out, &g.name);
        id(out, g.last);
        len(out, g.entries_read.unwrap_or(u64::MAX));
        len(out, g.pending.len() as u64);
        for p in &g.pending {
            out.extend_from_slice(&p.id.part());
            out.extend_from_slice(&p.delivered_ms.to_le_bytes());
            len(out, p.deliveries);
        }
        len(out, g.consumers.len() as u64);
        for (name, seen) in &g.consumers {
            string(out, name);
            out.extend_from_slice(&seen.to_le_bytes());
            let owned: Vec<&Id> = g.pending.iter().filter(|p| &p.consumer == name).map(|p| &p.id).collect();
            len(out, owned.len() as u64);
            for i in owned {
                out.extend_from_slice(&i.part());
            }
        }
    }
}
