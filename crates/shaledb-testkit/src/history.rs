//! The crash oracle: the acknowledged writes in order, and the question every crash test asks of a
//! recovered database: is its state the state after some prefix of those writes, long enough to hold every
//! write that had to survive (D3)?

use crate::Model;
use std::collections::BTreeSet;
use std::sync::Arc;

/// One update of a [`Write`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Mutation {
    /// Sets a key.
    Put {
        /// The key.
        key: Vec<u8>,
        /// The value.
        value: Vec<u8>,
    },
    /// Removes a key.
    Delete {
        /// The key.
        key: Vec<u8>,
    },
    /// Removes a key with a single deletion (`Db::single_delete`). Generators keep its contract: the key was
    /// put exactly once since its last single deletion, and is never deleted or merged otherwise.
    SingleDelete {
        /// The key.
        key: Vec<u8>,
    },
    /// Removes every key in `[begin, end)` (`Db::delete_range`).
    DeleteRange {
        /// First key removed.
        begin: Vec<u8>,
        /// First key after the range (exclusive).
        end: Vec<u8>,
    },
    /// Records a merge operand.
    Merge {
        /// The key.
        key: Vec<u8>,
        /// The operand.
        operand: Vec<u8>,
    },
}

impl Mutation {
    /// The key the update touches (a range deletion's first key).
    pub fn key(&self) -> &[u8] {
        match self {
            Mutation::Put { key, .. }
            | Mutation::Delete { key }
            | Mutation::SingleDelete { key }
            | Mutation::Merge { key, .. } => key,
            Mutation::DeleteRange { begin, .. } => begin,
        }
    }

    /// The keys of `a` or `b` whose value the update may change: its key, or every key either holds in a range
    /// deletion's range.
    fn touched(&self, a: &Model, b: &Model) -> Vec<Vec<u8>> {
        use std::ops::Bound::{Excluded, Included};
        match self {
            Mutation::DeleteRange { begin, end } if begin < end => {
                let range = |m: &Model| -> Vec<Vec<u8>> {
                    m.range(Included(begin.as_slice()), Excluded(end.as_slice())).map(|(k, _)| k.to_vec()).collect()
                };
                let mut ks = range(a);
                ks.extend(range(b));
                ks
            }
            Mutation::DeleteRange { .. } => Vec::new(),
            m => vec![m.key().to_vec()],
        }
    }
}

/// One acknowledged call: a single put, delete or merge, or a batch (`mutations.len() > 1`, all or nothing).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Write {
    /// The updates, in order.
    pub mutations: Vec<Mutation>,
    /// Acknowledged with `sync = true`: must survive a power loss (D1).
    pub sync: bool,
    /// Sent as a `WriteBatch` even when it holds one update.
    pub batch: bool,
}

/// How a merge operand combines with the value below it, as the database's merge operator does:
/// `(key, existing, operand) -> new value`, `None` when the operator rejects the operand.
pub type MergeFn = Arc<dyn Fn(&[u8], Option<&[u8]>, &[u8]) -> Option<Vec<u8>> + Send + Sync>;

/// The `stringappend` operator with `,` as delimiter, the one the crash tests use.
pub fn string_append() -> MergeFn {
    Arc::new(|_key: &[u8], old: Option<&[u8]>, operand: &[u8]| {
        let mut v = old.map(<[u8]>::to_vec).unwrap_or_default();
        if old.is_some() {
            v.push(b',');
        }
        v.extend_from_slice(operand);
        Some(v)
    })
}

/// Applies one write to a model.
pub fn apply(model: &mut Model, write: &Write, merge: &MergeFn) {
    for m in &write.mutations {
        match m {
            Mutation::Put { key, value } => {
                model.put(key, value);
            }
            Mutation::Delete { key } => {
                model.delete(key);
            }
            Mutation::SingleDelete { key } => {
                model.single_delete(key);
            }
            Mutation::Merge { key, operand } => {
                model.merge(key, operand, |old, op| merge(key, old, op));
            }
            Mutation::DeleteRange { begin, end } => {
                model.delete_range(begin, end);
            }
        }
    }
}

/// The acknowledged writes of a run, in the order they were acknowledged (a single writer thread: the order
/// of their sequence numbers).
#[derive(Clone)]
pub struct History {
    writes: Vec<Write>,
    merge: MergeFn,
}

impl std::fmt::Debug for History {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("History").field("writes", &self.writes.len()).finish_non_exhaustive()
    }
}

impl History {
    /// An empty history whose merges combine with `merge`.
    pub fn new(merge: MergeFn) -> History {
        History { writes: Vec::new(), merge }
    }

    /// Appends an acknowledged write.
    pub fn push(&mut self, write: Write) {
        self.writes.push(write);
    }

    /// The writes so far.
    pub fn writes(&self) -> &[Write] {
        &self.writes
    }

    /// Number of writes.
    pub fn len(&self) -> usize {
        self.writes.len()
    }

    /// True when nothing was written.
    pub fn is_empty(&self) -> bool {
        self.writes.is_empty()
    }

    /// Of the first `acked` writes, how many a power loss may not take away: all up to and including the last
    /// one acknowledged with `sync` (a synced write makes every earlier write durable too, D3).
    pub fn synced_prefix(&self, acked: usize) -> usize {
        let acked = acked.min(self.writes.len());
        self.writes[..acked].iter().rposition(|w| w.sync).map_or(0, |i| i + 1)
    }

    /// The state after the first `k` writes.
    pub fn model_after(&self, k: usize) -> Model {
        let mut m = Model::new();
        for w in self.writes.iter().take(k) {
            apply(&mut m, w, &self.merge);
        }
        m
    }

    /// Every `k` in `lo..=hi` (clamped to the history) whose state equals `observed`, ascending.
    pub fn matching_prefixes(&self, observed: &Model, lo: usize, hi: usize) -> Vec<usize> {
        self.scan(observed, lo, hi).0
    }

    /// Checks that `observed` is the state after the first `k` writes for some `k` in `lo..=hi`, and returns
    /// the largest such `k`. The error describes the closest prefix and how it differs, for the failure
    /// message.
    pub fn check(&self, observed: &Model, lo: usize, hi: usize) -> Result<usize, String> {
        let (found, best) = self.scan(observed, lo, hi);
        if let Some(k) = found.last() {
            return Ok(*k);
        }
        let (k, diff) = best;
        let model = self.model_after(k);
        let shown: Vec<String> = diff
            .iter()
            .take(5)
            .map(|key| {
                format!(
                    "{}: expected {} got {}",
                    show(key),
                    model.get(key).map_or("absent".into(), show),
                    observed.get(key).map_or("absent".into(), show)
                )
            })
            .collect();
        Err(format!(
            "state is no prefix of the {} acknowledged writes in {lo}..={hi}; closest is {k} with {} keys differing: \
             {}",
            self.writes.len(),
            diff.len(),
            shown.join("; ")
        ))
    }

    /// Walks the prefixes `lo..=hi`, keeping the set of keys where the prefix state and `observed` differ.
    /// Returns the matching prefixes and the closest one with its differing keys.
    fn scan(&self, observed: &Model, lo: usize, hi: usize) -> (Vec<usize>, (usize, BTreeSet<Vec<u8>>)) {
        let hi = hi.min(self.writes.len());
        let lo = lo.min(hi);
        let mut state = self.model_after(lo);
        let mut diff: BTreeSet<Vec<u8>> = state
            .iter()
            .map(|(k, _)| k)
            .chain(observed.iter().map(|(k, _)| k))
            .filter(|k| state.get(k) != observed.get(k))
            .map(<[u8]>::to_vec)
            .collect();
        let mut found = Vec::new();
        let mut best = (lo, diff.clone());
        for k in lo..=hi {
            if k > lo {
                let w = &self.writes[k - 1];
                let touched: Vec<Vec<u8>> = w.mutations.iter().flat_map(|m| m.touched(&state, observed)).collect();
                apply(&mut state, w, &self.merge);
                for key in &touched {
                    if state.get(key) == observed.get(key) {
                        diff.remove(key);
                    } else {
                        diff.insert(key.clone());
                    }
                }
            }
            if diff.is_empty() {
                found.push(k);
            }
            if diff.len() < best.1.len() {
                best = (k, diff.clone());
            }
        }
        (found, best)
    }
}

/// A key or value for a failure message: text when printable, else hex; long ones cut.
pub fn show(bytes: &[u8]) -> String {
    let cut = &bytes[..bytes.len().min(24)];
    let more = if bytes.len() > cut.len() { format!("..({} bytes)", bytes.len()) } else { String::new() };
    if cut.iter().all(|b| b.is_ascii_graphic() || *b == b' ') {
        format!("{:?}{more}", String::from_utf8_lossy(cut))
    } else {
        let hex: String = cut.iter().map(|b| format!("{b:02x}")).collect();
        format!("0x{hex}{more}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put(k: &str, v: &str, sync: bool) -> Write {
        Write { mutations: vec![Mutation::Put { key: k.into(), value: v.into() }], sync, batch: false }
    }

    fn history() -> History {
        let mut h = History::new(string_append());
        h.push(put("a", "1", false));
        h.push(put("b", "1", true));
        h.push(Write {
            mutations: vec![
                Mutation::Delete { key: "a".into() },
                Mutation::Merge { key: "b".into(), operand: "2".into() },
            ],
            sync: false,
            batch: true,
        });
        h.push(put("c", "1", false));
        h
    }

    #[test]
    fn synced_prefix_counts_up_to_last_sync() {
        let h = history();
        assert_eq!(h.synced_prefix(1), 0);
        assert_eq!(h.synced_prefix(2), 2);
        assert_eq!(h.synced_prefix(4), 2);
        assert_eq!(h.synced_prefix(99), 2);
    }

    #[test]
    fn model_applies_batches_and_merges() {
        let m = history().model_after(3);
        assert_eq!(m.get(b"a"), None);
        assert_eq!(m.get(b"b"), Some(&b"1,2"[..]));
    }

    #[test]
    fn check_accepts_each_prefix_and_rejects_holes() {
        let h = history();
        for k in 0..=4 {
            assert_eq!(h.check(&h.model_after(k), 0, 4), Ok(k));
        }
        assert_eq!(h.matching_prefixes(&h.model_after(1), 2, 4), Vec::<usize>::new());
        // Write 3 without write 2 (a hole), and half of the batch: no prefix.
        let mut hole = h.model_after(1);
        hole.put(b"c", b"1");
        let err = h.check(&hole, 0, 4).unwrap_err();
        assert!(err.contains("no prefix"), "{err}");
        let mut half = h.model_after(2);
        half.delete(b"a");
        assert!(h.check(&half, 0, 4).is_err(), "a batch is all or nothing");
    }

    #[test]
    fn equal_states_match_several_prefixes() {
        let mut h = History::new(string_append());
        h.push(put("a", "1", false));
        h.push(put("a", "1", false));
        assert_eq!(h.matching_prefixes(&h.model_after(2), 0, 2), vec![1, 2]);
    }

    #[test]
    fn show_prints_text_or_hex() {
        assert_eq!(show(b"key1"), "\"key1\"");
        assert_eq!(show(&[0, 255]), "0x00ff");
        assert!(show(&[b'x'; 40]).ends_with("..(40 bytes)"));
    }
}
