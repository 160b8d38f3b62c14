//! What a group's leader writes to the slots it copies before their move (issue 44, docs/cluster.md "Moving
//! slots"). While the map says `copying SLOT ME TO`, the slot is served as usual and the slot's keys are
//! copied to the target without a freeze; every engine key the commit step writes in the slot is recorded
//! here, so that after the freeze (`moving`) only those keys are copied again (the catch-up).
//!
//! A record is only as good as the leadership that kept it: it is started by the commit step executing the
//! map that introduces the copy (`CLUSTER SHALEDB-SETMAP`), stamped with the leader's term, and answered
//! ([`Tracker::dirty`]) only while this member still leads in that term, so no write made under another
//! leader can be missing from it. Anything else (a leader change, a restart, more than [`MAX_KEYS`] keys) is
//! answered with why, and the coordinator copies the whole slot again under the freeze.
//!
//! Keys are recorded as the engine writes them (a cluster member's keyspace is slot first, keys.rs): a meta
//! key names its slot and user key; a member record names its collection's version, whose top bits are the
//! slot; the version's user key is found in the registry when the record is read. So a write of any kind
//! (a command, a script's undeclared key, expiry, FLUSHALL) is seen.

use crate::keys::{self, KIND_MEMBER, KIND_META};
use bytes::Bytes;
use parking_lot::Mutex;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// Most keys (and collection versions) one slot's record holds; past it the record is given up and the slot
/// copied whole under the freeze.
pub const MAX_KEYS: usize = 100_000;

/// One slot's record.
#[derive(Default, Debug)]
struct Record {
    /// The leader's term when the copy began.
    term: u64,
    keys: HashSet<Bytes>,
    versions: HashSet<u64>,
    overflow: bool,
}

/// The records of the slots this member copies, shared by the commit step (which writes them) and the
/// connections that answer the coordinator.
#[derive(Default, Debug)]
pub struct Tracker {
    /// Some record exists (the commit step's check of every write is one load when none does).
    active: AtomicBool,
    /// The term of the commit step's current group (see [`Tracker::begin_group`]).
    term: AtomicU64,
    records: Mutex<HashMap<u16, Record>>,
}

/// What a slot's record holds once the slot is frozen.
#[derive(Debug, PartialEq)]
pub struct Dirty {
    pub keys: Vec<Bytes>,
    pub versions: Vec<u64>,
}

impl Tracker {
    /// The commit step, before a group on the leader: a term other than the last one's (this member led
    /// again after another did) drops every record, as writes of the other leader are not in them.
    pub fn begin_group(&self, term: u64) {
        if self.term.swap(term, Ordering::AcqRel) != term {
            self.records.lock().clear();
            self.active.store(false, Ordering::Release);
        }
    }

    /// The commit step executed a map copying `slots` from this group: each gets a new, empty record of the
    /// current term (a record already there is kept: the same map sent again).
    pub fn start(&self, slots: impl IntoIterator<Item = u16>) {
        let term = self.term.load(Ordering::Acquire);
        let mut r = self.records.lock();
        for s in slots {
            r.entry(s).or_insert_with(|| Record { term, ..Record::default() });
        }
        self.active.store(!r.is_empty(), Ordering::Release);
    }

    /// After a group: keeps the records of the slots `keep` says this group still copies or moves out.
    pub fn retain(&self, keep: impl Fn(u16) -> bool) {
        if !self.active.load(Ordering::Acquire) {
            return;
        }
        let mut r = self.records.lock();
        r.retain(|s, _| keep(*s));
        self.active.store(!r.is_empty(), Ordering::Release);
    }

    /// Every engine write of the commit step (`WriteCtx::note_write`).
    pub fn note(&self, engine_key: &[u8]) {
        if !self.active.load(Ordering::Acquire) || engine_key.first() != Some(&0) {
            return;
        }
        let (slot, key, version) = match engine_key.get(1) {
            Some(&KIND_META) if engine_key.len() >= 4 => {
                (u16::from_be_bytes([engine_key[2], engine_key[3]]), Some(&engine_key[4..]), None)
            }
            Some(&KIND_MEMBER) if engine_key.len() >= 10 => {
                let v = keys::be_u64(&engine_key[2..10]);
                ((v >> keys::VERSION_SLOT_SHIFT) as u16, None, Some(v))
            }
            _ => return,
        };
        let mut r = self.records.lock();
        let Some(rec) = r.get_mut(&slot) else { return };
        if rec.overflow {
            return;
        }
        if let Some(k) = key {
            if !rec.keys.contains(k) {
                rec.keys.insert(Bytes::copy_from_slice(k));
            }
        }
        if let Some(v) = version {
            rec.versions.insert(v);
        }
        if rec.keys.len() + rec.versions.len() > MAX_KEYS {
            rec.overflow = true;
            rec.keys = HashSet::new();
            rec.versions = HashSet::new();
        }
    }

    /// What was written to `slot` since its copy began, if this member kept it: it must lead now in the term
    /// the record was started in (`leading_term`: `Some(term)` while this member leads). `Err`: why not.
    pub fn dirty(&self, slot: u16, leading_term: Option<u64>) -> Result<Dirty, String> {
        let r = self.records.lock();
        let Some(rec) = r.get(&slot) else {
            return Err(format!("no record of the writes to slot {slot} since its copy began on this member"));
        };
        if leading_term != Some(rec.term) {
            return Err(format!(
                "slot {slot}'s record was kept in term {}, and this member does not lead in it now",
                rec.term
            ));
        }
        if rec.overflow {
            return Err(format!("more than {MAX_KEYS} keys of slot {slot} were written during its copy"));
        }
        let mut keys: Vec<Bytes> = rec.keys.iter().cloned().collect();
        keys.sort_unstable();
        let mut versions: Vec<u64> = rec.versions.iter().copied().collect();
        versions.sort_unstable();
        Ok(Dirty { keys, versions })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keys::Keyspace;

    #[test]
    fn writes_to_copied_slots_are_recorded_for_the_term_that_started_them() {
        let t = Tracker::default();
        let ks = Keyspace::Slots;
        let slot_of = |k: &[u8]| crate::cluster::key_slot(k);
        let (a, b) = (b"alpha".as_slice(), b"beta".as_slice());
        assert_ne!(slot_of(a), slot_of(b));
        t.begin_group(3);
        t.note(&ks.meta_key(0, a)); // nothing recorded yet
        t.start([slot_of(a)]);
        t.note(&ks.meta_key(0, a));
        t.note(&ks.meta_key(0, b)); // another slot
        let v = ks.version_for(a, 77);
        t.note(&keys::member_key(0, v, keys::SUB_MEMBER, b"field"));
        t.note(&keys::registry_key(0, v)); // registry records are not keys
        t.note(&ks.meta_key(3, a)); // another database: not a member's
        let d = t.dirty(slot_of(a), Some(3)).unwrap();
        assert_eq!(d, Dirty { keys: vec![Bytes::from_static(b"alpha")], versions: vec![v] });
        assert!(t.dirty(slot_of(b), Some(3)).unwrap_err().contains("no record"));
        assert!(t.dirty(slot_of(a), None).unwrap_err().contains("does not lead"));
        assert!(t.dirty(slot_of(a), Some(4)).unwrap_err().contains("does not lead"));
        // The same map again keeps the record; a new term drops it.
        t.start([slot_of(a)]);
        assert_eq!(t.dirty(slot_of(a), Some(3)).unwrap().keys.len(), 1);
        t.begin_group(4);
        assert!(t.dirty(slot_of(a), Some(4)).unwrap_err().contains("no record"));
        // Dropped once the slot is no longer copied or moved out.
        t.start([slot_of(a)]);
        t.retain(|_| false);
        assert!(t.dirty(slot_of(a), Some(4)).is_err());
    }

    #[test]
    fn a_record_past_its_bound_is_given_up() {
        let t = Tracker::default();
        let ks = Keyspace::Slots;
        t.begin_group(1);
        let slot = crate::cluster::key_slot(b"{t}0");
        t.start([slot]);
        for i in 0..=MAX_KEYS {
            t.note(&ks.meta_key(0, format!("{{t}}{i}").as_bytes()));
        }
        assert!(t.dirty(slot, Some(1)).unwrap_err().contains("more than"));
    }
}
