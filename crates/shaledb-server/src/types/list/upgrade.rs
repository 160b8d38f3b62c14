//! Keyspace format version 1 to 2: every list from one record per element (`sub 0x00`, part `index:u64be`) to
//! the nodes of [`super::node`] (`sub 0x02`).
//!
//! The server runs [`convert_lists`] on a database whose layout marker says "1" (or one from before the
//! marker) before it serves anything, then writes the marker "2". Each list is converted from its head in
//! chunks of whole nodes, at most [`CHUNK_NODES`] nodes (about 10,000 elements) per synced batch, which
//! writes the chunk's node records and deletes its old element records together. So a crash at any point
//! leaves every list either converted (no `sub 0x00` record left) or with its old records exactly at the
//! indexes not yet converted, starting at a node boundary: the next start resumes there. The meta value
//! (head, tail, size) does not change.

use super::node::{ext_part, is_external, live, node_of, node_part, K, SUB_NODE};
use crate::keys::{self, Coll, Type, DATABASES, SUB_MEMBER};
use shaledb::{Db, ReadOptions, WriteBatch, WriteOptions};

/// Most nodes converted per batch (312 nodes: at most 9,984 elements).
pub const CHUNK_NODES: u64 = 10_000 / K;

/// What a conversion did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Converted {
    /// Lists that still had element records of version 1.
    pub lists: u64,
    /// Elements moved into nodes.
    pub elements: u64,
    /// Synced batches written.
    pub batches: u64,
    /// False when it stopped at `max_batches` with work left.
    pub complete: bool,
}

/// Converts every list of every database (0..=15) of `db` to nodes, each chunk one synced batch; stops
/// after `max_batches` batches when given (tests of a conversion cut short). A list whose records do not
/// match its header is an error naming the key; nothing of that list's current chunk is written.
pub fn convert_lists(db: &Db, max_batches: Option<u64>) -> Result<Converted, String> {
    let mut done = Converted { complete: true, ..Converted::default() };
    for dbi in 0..DATABASES {
        let lower = keys::meta_prefix(dbi).to_vec();
        let upper = keys::meta_end(dbi).to_vec();
        let mut it = db.cursor_opt(&ReadOptions {
            iterate_lower_bound: Some(lower.clone()),
            iterate_upper_bound: Some(upper),
            fill_cache: false,
            ..ReadOptions::default()
        });
        it.seek(&lower);
        while it.valid() {
            let is_list = keys::decode_meta(it.value()).is_ok_and(|m| m.typ == Type::List);
            if is_list {
                let user_key = it.key()[2..].to_vec();
                let c = Coll::decode(it.value())
                    .ok()
                    .flatten()
                    .ok_or_else(|| format!("list {:?} of database {dbi}: corrupt meta value", show(&user_key)))?;
                let left = max_batches.map(|m| m.saturating_sub(done.batches));
                let (elements, batches, complete) = convert_one(db, dbi, &c, left)
                    .map_err(|why| format!("list {:?} of database {dbi}: {why}", show(&user_key)))?;
                if batches > 0 {
                    done.lists += 1;
                }
                done.elements += elements;
                done.batches += batches;
                if !complete {
                    done.complete = false;
                    return Ok(done);
                }
            }
            it.next();
        }
        it.status().map_err(|e| format!("reading the keys of database {dbi}: {e}"))?;
    }
    Ok(done)
}

fn show(key: &[u8]) -> String {
    String::from_utf8_lossy(key).into_owned()
}

/// Converts the list `c` of database `dbi` from its first index still held by a version-1 record: `(elements
/// moved, batches written, finished)`; stops unfinished when `max_batches` is used up.
fn convert_one(db: &Db, dbi: u8, c: &Coll, max_batches: Option<u64>) -> Result<(u64, u64, bool), String> {
    let (h, t) = super::bounds(c);
    if t < h || t - h != c.size {
        return Err("head and tail disagree with the size".into());
    }
    let old_prefix = keys::sub_prefix(dbi, c.version, SUB_MEMBER);
    let old_upper = keys::prefix_end(&old_prefix).unwrap_or_default();
    let read_err = |e: shaledb::Error| format!("reading its records: {e}");
    let (mut elements, mut batches) = (0u64, 0u64);
    loop {
        // The first index still held by a version-1 record.
        let mut it = db.cursor_opt(&ReadOptions {
            iterate_lower_bound: Some(old_prefix.to_vec()),
            iterate_upper_bound: Some(old_upper.clone()),
            fill_cache: false,
            ..ReadOptions::default()
        });
        it.seek(old_prefix);
        if !it.valid() {
            it.status().map_err(read_err)?;
            return Ok((elements, batches, true));
        }
        if max_batches.is_some_and(|m| batches >= m) {
            return Ok((elements, batches, false));
        }
        let a = index_of(it.key()).ok_or("an element record with a bad index")?;
        if a < h || a >= t || (a != h && a % K != 0) {
            return Err(format!("an element record at index {a} outside the list or after a partial conversion"));
        }
        let end = t.min(node_of(a).saturating_add(CHUNK_NODES).saturating_mul(K));
        // The chunk [a, end): read its records in order, every index present.
        let mut values = Vec::with_capacity((end - a) as usize);
        let mut batch = WriteBatch::new();
        while it.valid() && values.len() as u64 != end - a {
            let want = a + values.len() as u64;
            if index_of(it.key()) != Some(want) {
                return Err(format!("the element record at index {want} is missing"));
            }
            batch.delete(it.key());
            values.push(it.value().to_vec());
            it.next();
        }
        it.status().map_err(read_err)?;
        if values.len() as u64 != end - a {
            return Err(format!("the element records stop before index {end}"));
        }
        drop(it);
        for n in node_of(a)..=node_of(end - 1) {
            let (first, last) = live(n, h, t);
            let node_values = &values[(first - a) as usize..(last - a) as usize];
            let raw = super::node::encode(node_values.iter().map(Vec::as_slice));
            batch.put(keys::member_key(dbi, c.version, SUB_NODE, &node_part(n)), raw);
            for (i, v) in node_values.iter().enumerate() {
                if is_external(v) {
                    let slot = ((first + i as u64) % K) as u8;
                    batch.put(keys::member_key(dbi, c.version, SUB_NODE, &ext_part(n, slot)), v);
                }
            }
        }
        db.write_opt(&WriteOptions { sync: true, ..WriteOptions::default() }, &batch)
            .map_err(|e| format!("writing its nodes: {e}"))?;
        elements += end - a;
        batches += 1;
    }
}

/// The index of a version-1 element record (`db 0x01 version 0x00 index:u64be`).
fn index_of(engine_key: &[u8]) -> Option<u64> {
    let p = engine_key.get(11..)?;
    (p.len() == 8).then(|| keys::be_u64(p))
}
