//! Dead ranges: where the commit step knows a collection has no live member records, learnt from its own
//! pops, so the next pop does not step over their tombstones again.
//!
//! A pop deletes member records (ZPOPMIN from the low end of the score index, ZPOPMAX from the high end,
//! SPOP at a random point). Until compaction drops the tombstones, every later scan that starts before
//! them steps over each one: ZPOPMIN after k pops would read k tombstones to find the next member, and
//! SPOP's random seeks land in the ever wider gaps its earlier pops left (a seek picks the member after a
//! random point, so members after wide gaps go first and the gaps merge). Recording what each pop learnt
//! keeps every pop at one seek:
//!
//! - a *zone* `[from, to]` (parts, both inclusive): no live part in it. A pop that seeks from `from` and
//!   takes the first member `to` (deleting it) leaves `[from, to]` empty; zones that overlap are merged.
//!   The zone starting at the empty part covers the low end (ZPOPMIN's).
//! - a *tail* `from`: no live part `>= from` (ZPOPMAX's end, and SPOP's seeks that ran off the end).
//!
//! Only the commit step's context keeps ranges: it is the only writer of member records, so nothing
//! changes between a pop and what it records. Every member write inside a zone drops that zone and one at
//! or past the tail drops the tail, before the write is staged; a failed group forgets everything (its
//! pops may not have happened). The ranges are a shortcut, never the truth: forgetting them costs only
//! speed, so their memory is bounded by clearing them all.

use std::collections::{BTreeMap, HashMap};
use std::ops::Bound::{Included, Unbounded};

/// Most zones kept over all collections; past it everything is forgotten.
const MAX_ZONES: usize = 1 << 18;

/// The dead ranges of one collection's records of one sub-kind.
#[derive(Default, Debug)]
pub struct Ranges {
    /// Zones by their first part: `from -> to`.
    zones: BTreeMap<Vec<u8>, Vec<u8>>,
    /// No live part at or after it.
    tail: Option<Vec<u8>>,
}

/// Where a scan for the first live part at or after a target may start.
#[derive(Debug, PartialEq, Eq)]
pub enum Start {
    /// At this part (inclusive).
    At(Vec<u8>),
    /// Nothing live at or after the target.
    End,
}

impl Ranges {
    /// Where to look for the first live part `>= target`: past every zone the target falls in.
    pub fn start(&self, target: &[u8]) -> Start {
        let mut at = target.to_vec();
        // Zones never overlap, but one may end just before the next begins: follow them.
        loop {
            if self.tail.as_deref().is_some_and(|t| at.as_slice() >= t) {
                return Start::End;
            }
            match self.zones.range::<[u8], _>((Unbounded, Included(at.as_slice()))).next_back() {
                Some((_, to)) if at.as_slice() <= to.as_slice() => {
                    // Just after `to`.
                    at = to.clone();
                    at.push(0);
                }
                _ => return Start::At(at),
            }
        }
    }

    /// Where to look for the last live part (a reverse scan from the end): the tail, when known.
    pub fn tail(&self) -> Option<&[u8]> {
        self.tail.as_deref()
    }
}

/// The dead ranges of every collectiin the commit step popped from, keyed by `(db, version, sub)`.
#[derive(Default, Debug)]
pub struct DeadRanges {
    map: HashMap<(u8, u64, u8), Ranges>,
    zones: usize,
}

impl DeadRanges {
    pub fn get(&self, key: (u8, u64, u8)) -> Option<&Ranges> {
        self.map.get(&key)
    }

    /// Records that no part in `[from, to]` is live (the caller has staged the deletion of `to` and of
    /// whatever live part lay between).
    pub fn note_zone(&mut self, key: (u8, u64, u8), from: &[u8], to: &[u8]) {
        if from > to {
            return;
        }
        if self.zones >= MAX_ZONES {
            self.clear();
        }
        let r = self.map.entry(key).or_default();
        let (mut from, mut to) = (from.to_vec(), to.to_vec());
        if let Some((a, b)) = r.zones.range::<[u8], _>((Unbounded, Included(from.as_slice()))).next_back() {
            if from <= *b {
                from = a.clone();
                to = to.max(b.clone());
            }
        }
        let inside: Vec<Vec<u8>> = r
            .zones
            .range::<[u8], _>((Included(from.as_slice()), Included(to.as_slice())))
            .map(|(k, _)| k.clone())
            .collect();
        for k in inside {
            if let Some(end) = r.zones.remove(&k) {
                to = to.max(end);
                self.zones -= 1;
            }
        }
        r.zones.insert(from, to);
        self.zones += 1;
    }

    /// Records that no part `>= from` is live.
    pub fn note_tail(&mut self, key: (u8, u64, u8), from: &[u8]) {
        let r = self.map.entry(key).or_default();
        if r.tail.as_deref().is_none_or(|t| from < t) {
            r.tail = Some(from.to_vec());
        }
    }

    /// A member record with `part` is about to be written: drops whatever range claims it dead.
    pub fn on_write(&mut self, key: (u8, u64, u8), part: &[u8]) {
        let Some(r) = self.map.get_mut(&key) else { return };
        if r.tail.as_deref().is_some_and(|t| part >= t) {
            r.tail = None;
        }
        let hit = match r.zones.range::<[u8], _>((Unbounded, Included(part))).next_back() {
            Some((from, to)) if part <= to.as_slice() => Some(from.clone()),
            _ => None,
        };
        if let Some(from) = hit {
            r.zones.remove(&from);
            self.zones -= 1;
        }
    }

    /// Forgets the ranges of every sub-kind of collection `version` of database `db` (it was removed).
    pub fn forget_collection(&mut self, db: u8, version: u64) {
        let mut freed = 0;
        self.map.retain(|&(d, v, _), r| {
            let keep = (d, v) != (db, version);
            if !keep {
                freed += r.zones.len();
            }
            keep
        });
        self.zones -= freed;
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Forgets everything.
    pub fn clear(&mut self) {
        self.map.clear();
        self.zones = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const K: (u8, u64, u8) = (0, 7, 0);

    fn start(d: &DeadRanges, t: &[u8]) -> Start {
        d.get(K).map_or(Start::At(t.to_vec()), |r| r.start(t))
    }

    #[test]
    fn zones_skip_merge_and_are_dropped_by_writes() {
        let mut d = DeadRanges::default();
        assert_eq!(start(&d, b"c"), Start::At(b"c".to_vec()));
        d.note_zone(K, b"c", b"f");
        assert_eq!(start(&d, b"b"), Start::At(b"b".to_vec()));
        assert_eq!(start(&d, b"c"), Start::At(b"f\0".to_vec()));
        assert_eq!(start(&d, b"e"), Start::At(b"f\0".to_vec()));
        assert_eq!(start(&d, b"f"), Start::At(b"f\0".to_vec()));
        // Adjacent zones are followed; an overlapping one merges (and swallows the zones inside it).
        d.note_zone(K, b"f\0", b"h");
        assert_eq!(start(&d, b"d"), Start::At(b"h\0".to_vec()));
        d.note_zone(K, b"m", b"n");
        d.note_zone(K, b"a", b"p");
        assert_eq!(d.zones, 1);
        assert_eq!(start(&d, b"a"), Start::At(b"p\0".to_vec()));
        // A write inside a zone drops it; outside, nothing changes.
        d.on_write(K, b"q");
        assert_eq!(start(&d, b"b"), Start::At(b"p\0".to_vec()));
        d.on_write(K, b"g");
        assert_eq!(start(&d, b"b"), Start::At(b"b".to_vec()));
        assert_eq!(d.zones, 0);
        // A reversed zone is ignored.
        d.note_zone(K, b"z", b"a");
        assert_eq!(d.zones, 0);
    }

    #[test]
    fn the_tail_ends_scans_until_a_write_at_or_past_it() {
        let mut d = DeadRanges::default();
        d.note_tail(K, b"m");
        assert_eq!(start(&d, b"m"), Start::End);
        assert_eq!(start(&d, b"x"), Start::End);
        assert_eq!(start(&d, b"l"), Start::At(b"l".to_vec()));
        // A zone that reaches the tail ends the scan too.
        d.note_zone(K, b"k", b"l");
        assert_eq!(start(&d, b"k"), Start::At(b"l\0".to_vec()));
        d.note_zone(K, b"l\0", b"m");
        assert_eq!(start(&d, b"k"), Start::End);
        // A later tail only moves it down.
        d.note_tail(K, b"z");
        assert_eq!(d.get(K).unwrap().tail(), Some(&b"m"[..]));
        d.on_write(K, b"l");
        assert_eq!(start(&d, b"k"), Start::At(b"k".to_vec()));
        d.on_write(K, b"q");
        assert_eq!(d.get(K).unwrap().tail(), None);
    }

    #[test]
    fn forgetting_a_collection_keeps_the_others() {
        let mut d = DeadRanges::default();
        d.note_zone(K, b"a", b"b");
        d.note_zone((0, 8, 0), b"a", b"b");
        d.note_zone((1, 7, 0), b"a", b"b");
        d.forget_collection(0, 7);
        assert!(d.get(K).is_none());
        assert!(d.get((0, 8, 0)).is_some() && d.get((1, 7, 0)).is_some());
        assert_eq!(d.zones, 2);
        d.clear();
        assert!(d.is_empty());
    }
}
