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
//! - a *span* `(first, last)`: no live part outside it (the ends SPOP's first pick sought, so later picks
//!   draw their random point without seeking them again; writes outside widen it).
//! - the parts *read ahead* at either end: the live parts after the ones a ZPOPMIN (ZPOPMAX) took, in
//!   order, so the next pops from that end take them without a seek; a write up to the last of them
//!   forgets them, a delete of one removes it.
//!
//! Only the commit step's context keeps ranges: it is the only writer of member records, so nothing
//! changes between a pop and what it records. Every member write inside a zone drops that zone and one at
//! or past the tail drops the tail, before the write is staged (and every delete leaves the parts read
//! ahead); a failed group forgets everything (its
//! pops may not have happened). The ranges are a shortcut, never the truth: forgetting them costs only
//! speed, so their memory is bounded by clearing them all.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::ops::Bound::{Excluded, Included, Unbounded};

/// Most zones (and parts read ahead) kept over all collections; past it everything is forgotten.
const MAX_ZONES: usize = 1 << 18;

/// The dead ranges of one collection's records of one sub-kind.
#[derive(Default, Debug)]
pub struct Ranges {
    /// Zones by their first part: `from -> to`.
    zones: BTreeMap<Vec<u8>, Vec<u8>>,
    /// No live part at or after it.
    tail: Option<Vec<u8>>,
    /// `(first, last)`: no live part before `first` or after `last` (SPOP's first pick sought them; a write
    /// outside widens them).
    span: Option<(Vec<u8>, Vec<u8>)>,
    /// The live parts next to the low end (ascending) and to the high end (descending) that a pop from that
    /// end read past what it took (ZPOPMIN, ZPOPMAX): exact, every live part between the end and the last
    /// of them is one of them, so the next pops take them without a seek. A write up to the last of them
    /// forgets them; a delete of one removes it.
    ahead: [VecDeque<Vec<u8>>; 2],
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

    /// Where a forward scan from `at` (a part in no zone) meets what is known dead: the start of the next
    /// zone, or the tail, whichever comes first; `None` when neither lies ahead. A scan bounded there and
    /// then resumed at [`Ranges::start`] of it never steps over the tombstones inside a zone.
    pub fn next_stop(&self, at: &[u8]) -> Option<&[u8]> {
        let zone = self.zones.range::<[u8], _>((Excluded(at), Unbounded)).next().map(|(from, _)| from.as_slice());
        match (zone, self.tail.as_deref()) {
            (Some(z), Some(t)) => Some(z.min(t)),
            (z, t) => z.or(t),
        }
    }

    /// The first and last members SPOP's first pick sought, widened by the writes since.
    pub fn span(&self) -> Option<(&[u8], &[u8])> {
        self.span.as_ref().map(|(f, l)| (f.as_slice(), l.as_slice()))
    }

    /// `(lo, hi)`: no live part is below `lo` or above `hi`, from the span SPOP remembered narrowed by the
    /// zone at the start and the tail (`hi` may be the tail itself, which is not live). `None` when no span
    /// is remembered, or when nothing is left between the bounds (the ranges no longer describe the set:
    /// the caller seeks the ends again).
    pub fn bounds(&self) -> Option<(Vec<u8>, Vec<u8>)> {
        let (first, last) = self.span.as_ref()?;
        let lo = match self.start(b"") {
            Start::At(p) if p > *first => p,
            Start::At(_) => first.clone(),
            Start::End => return None,
        };
        let hi = match &self.tail {
            Some(t) if t < last => t.clone(),
            _ => last.clone(),
        };
        (lo <= hi).then_some((lo, hi))
    }
}

/// The dead ranges of every collection the commit step popped from, keyed by `(db, version, sub)`.
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

    /// Records that no live part is below `first` or above `last` (both live when sought).
    pub fn note_span(&mut self, key: (u8, u64, u8), first: &[u8], last: &[u8]) {
        if first > last {
            return;
        }
        let r = self.map.entry(key).or_default();
        r.span = Some((first.to_vec(), last.to_vec()));
    }

    /// A member record with `part` is about to be written: drops whatever range claims it dead, and widens
    /// the span to hold it.
    pub fn on_write(&mut self, key: (u8, u64, u8), part: &[u8]) {
        let Some(r) = self.map.get_mut(&key) else { return };
        if r.tail.as_deref().is_some_and(|t| part >= t) {
            r.tail = None;
        }
        if let Some((first, last)) = &mut r.span {
            if part < first.as_slice() {
                *first = part.to_vec();
            } else if part > last.as_slice() {
                *last = part.to_vec();
            }
        }
        for (end, ahead) in r.ahead.iter_mut().enumerate() {
            let inside =
                ahead.back().is_some_and(|b| if end == 0 { part <= b.as_slice() } else { part >= b.as_slice() });
            if inside {
                self.zones = self.zones.saturating_sub(ahead.len());
                ahead.clear();
            }
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

    /// A member record with `part` is about to be deleted: it leaves the parts read ahead.
    pub fn on_delete(&mut self, key: (u8, u64, u8), part: &[u8]) {
        let Some(r) = self.map.get_mut(&key) else { return };
        for ahead in &mut r.ahead {
            if let Some(i) = ahead.iter().position(|p| p.as_slice() == part) {
                ahead.remove(i);
                self.zones = self.zones.saturating_sub(1);
            }
        }
    }

    /// Records `parts`, the live parts next to the low end (ascending) or (`high`) the high end
    /// (descending) that a pop read past what it took, in place of those recorded before.
    pub fn note_ahead(&mut self, key: (u8, u64, u8), high: bool, parts: Vec<Vec<u8>>) {
        if self.zones.saturating_add(parts.len()) >= MAX_ZONES {
            self.clear();
        }
        let r = self.map.entry(key).or_default();
        let ahead = &mut r.ahead[usize::from(high)];
        self.zones = self.zones.saturating_sub(ahead.len()) + parts.len();
        *ahead = parts.into();
    }

    /// Takes the first `n` parts read ahead at the low (`high`: high) end, if that many are recorded.
    pub fn take_ahead(&mut self, key: (u8, u64, u8), high: bool, n: usize) -> Option<Vec<Vec<u8>>> {
        let ahead = &mut self.map.get_mut(&key)?.ahead[usize::from(high)];
        if n == 0 || ahead.len() < n {
            return None;
        }
        self.zones = self.zones.saturating_sub(n);
        Some(ahead.drain(..n).collect())
    }

    /// Forgets the ranges of every sub-kind of collection `version` of database `db` (it was removed).
    pub fn forget_collection(&mut self, db: u8, version: u64) {
        let mut freed = 0;
        self.map.retain(|&(d, v, _), r| {
            let keep = (d, v) != (db, version);
            if !keep {
                freed += r.zones.len() + r.ahead.iter().map(VecDeque::len).sum::<usize>();
            }
            keep
        });
        self.zones = self.zones.saturating_sub(freed);
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
    fn the_span_bounds_picks_and_widens_on_writes() {
        let mut d = DeadRanges::default();
        d.note_span(K, b"c", b"x");
        let r = |d: &DeadRanges| d.get(K).unwrap().bounds();
        assert_eq!(r(&d), Some((b"c".to_vec(), b"x".to_vec())));
        // What pops emptied at either end narrows the bounds; the span itself stays.
        d.note_zone(K, b"", b"e");
        d.note_tail(K, b"t");
        assert_eq!(r(&d), Some((b"e\0".to_vec(), b"t".to_vec())));
        assert_eq!(d.get(K).unwrap().span(), Some((&b"c"[..], &b"x"[..])));
        // Writes outside the span widen it (and drop the zone or the tail they fall in).
        d.on_write(K, b"a");
        d.on_write(K, b"z");
        assert_eq!(d.get(K).unwrap().span(), Some((&b"a"[..], &b"z"[..])));
        assert_eq!(r(&d), Some((b"a".to_vec(), b"z".to_vec())));
        // Nothing left between the bounds: the caller seeks the ends again.
        d.note_zone(K, b"", b"zz");
        assert_eq!(r(&d), None);
    }

    #[test]
    fn scans_stop_at_the_next_zone_or_the_tail() {
        let mut d = DeadRanges::default();
        d.note_zone(K, b"c", b"e");
        d.note_zone(K, b"m", b"n");
        let r = d.get(K).unwrap();
        assert_eq!(r.next_stop(b"a"), Some(&b"c"[..]));
        assert_eq!(r.next_stop(b"e\0"), Some(&b"m"[..]));
        assert_eq!(r.next_stop(b"n\0"), None);
        d.note_tail(K, b"k");
        let r = d.get(K).unwrap();
        assert_eq!(r.next_stop(b"e\0"), Some(&b"k"[..]));
        assert_eq!(r.next_stop(b"a"), Some(&b"c"[..]));
    }

    #[test]
    fn parts_read_ahead_are_taken_in_order_and_dropped_by_writes() {
        let mut d = DeadRanges::default();
        let parts = |xs: &[&str]| xs.iter().map(|x| x.as_bytes().to_vec()).collect::<Vec<_>>();
        d.note_ahead(K, false, parts(&["b", "c", "d", "e"]));
        d.note_ahead(K, true, parts(&["y", "x"]));
        assert_eq!(d.zones, 6);
        assert_eq!(d.take_ahead(K, false, 2), Some(parts(&["b", "c"])));
        assert_eq!(d.take_ahead(K, false, 3), None, "fewer than asked: the caller scans");
        // A delete of one removes it; a write past the last one leaves them; a write before it drops them.
        d.on_delete(K, b"d");
        d.on_write(K, b"f");
        assert_eq!(d.take_ahead(K, false, 1), Some(parts(&["e"])));
        d.note_ahead(K, false, parts(&["g", "h"]));
        d.on_write(K, b"g\0");
        assert_eq!(d.take_ahead(K, false, 1), None);
        // The high end is kept descending: a write at or above its last part drops it.
        assert_eq!(d.take_ahead(K, true, 1), Some(parts(&["y"])));
        d.on_write(K, b"w");
        assert_eq!(d.take_ahead(K, true, 1), Some(parts(&["x"])));
        d.note_ahead(K, true, parts(&["y", "x"]));
        d.on_write(K, b"x");
        assert_eq!(d.take_ahead(K, true, 1), None);
        d.forget_collection(0, 7);
        assert_eq!(d.zones, 0);
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
