//! The expected-state file of the stress test: what the database must hold, kept outside the process so that
//! it survives a SIGKILL.
//!
//! ```text
//! file     := header snapshot* journal*
//! header   := "shaledb-stress-expected v1 keys=" <n> "\n"
//! snapshot := "S " <key> " " (<hex> | "-") "\n"          ; the value of a key when the run started
//! journal  := "I " <tid> " " <op> (";" <op>)* "\n"        ; intent: written before the write is sent
//!           | "A " <tid> "\n"                            ; acknowledgement: written after it returned
//! op       := "P" <key> ":" <hex> | "D" <key> | "M" <key> ":" <hex>   ; put, delete, merge (stringappend)
//!           | "R" <key> "-" <key>                       ; range deletion of keys [first, second)
//! ```
//!
//! Each line is one `write(2)` on a file opened for appending, so it reaches the page cache (and survives a
//! process kill) before the database write it announces is sent, or after the one it acknowledges returned.
//! A writer holds the locks of every key its write touches from before its intent to after its
//! acknowledgement, so the journal order of the writes to one key is their real order, and after a kill each
//! thread has at most one write in flight: an intent without an acknowledgement. A last line cut short is
//! ignored (its write was never sent, or its acknowledgement is treated as missing).

use crate::history::show;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};

/// One update of a stress write; keys are indexes into the key space.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Op {
    /// Sets the key.
    Put(u32, Vec<u8>),
    /// Removes the key.
    Delete(u32),
    /// Appends `,operand` (or sets it when absent): the `stringappend` merge operator.
    Merge(u32, Vec<u8>),
    /// Removes every key in `[first, second)` with one range deletion (`Db::delete_range`).
    DeleteRange(u32, u32),
}

impl Op {
    /// The key index (a range deletion's first key).
    pub fn key(&self) -> u32 {
        match self {
            Op::Put(k, _) | Op::Delete(k) | Op::Merge(k, _) | Op::DeleteRange(k, _) => *k,
        }
    }

    /// The key indexes the update touches.
    pub fn keys(&self) -> std::ops::Range<u32> {
        match self {
            Op::DeleteRange(b, e) => *b..(*e).max(*b),
            op => op.key()..op.key() + 1,
        }
    }

    /// True when every key the update touches is below `keys`.
    fn in_range(&self, keys: u32) -> bool {
        match self {
            Op::DeleteRange(b, e) => b <= e && *e <= keys,
            op => op.key() < keys,
        }
    }

    /// The value of the key after this update, given its value before.
    pub fn apply(&self, old: Option<&[u8]>) -> Option<Vec<u8>> {
        match self {
            Op::Put(_, v) => Some(v.clone()),
            Op::Delete(_) | Op::DeleteRange(..) => None,
            Op::Merge(_, operand) => {
                let mut v = old.map(<[u8]>::to_vec).unwrap_or_default();
                if old.is_some() {
                    v.push(b',');
                }
                v.extend_from_slice(operand);
                Some(v)
            }
        }
    }

    fn encode(&self, out: &mut String) {
        match self {
            Op::Put(k, v) => {
                let _ = write!(out, "P{k}:{}", hex(v));
            }
            Op::Delete(k) => {
                let _ = write!(out, "D{k}");
            }
            Op::Merge(k, v) => {
                let _ = write!(out, "M{k}:{}", hex(v));
            }
            Op::DeleteRange(b, e) => {
                let _ = write!(out, "R{b}-{e}");
            }
        }
    }

    fn decode(s: &str) -> Option<Op> {
        let (tag, rest) = s.split_at_checked(1)?;
        match tag {
            "D" => Some(Op::Delete(rest.parse().ok()?)),
            "R" => {
                let (b, e) = rest.split_once('-')?;
                Some(Op::DeleteRange(b.parse().ok()?, e.parse().ok()?))
            }
            "P" | "M" => {
                let (k, v) = rest.split_once(':')?;
                let (k, v) = (k.parse().ok()?, unhex(v)?);
                Some(if tag == "P" { Op::Put(k, v) } else { Op::Merge(k, v) })
            }
            _ => None,
        }
    }
}

/// Lowercase hex.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().fold(String::with_capacity(bytes.len() * 2), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok()).collect()
}

/// The state recorded in an expected-state file.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Expected {
    /// Size of the key space.
    pub keys: u32,
    /// The value of each key after every acknowledged write (index = key).
    pub acked: Vec<Option<Vec<u8>>>,
    /// Writes announced but not acknowledged when the writer died: each may or may not be in the database,
    /// all of its updates or none.
    pub in_flight: Vec<Vec<Op>>,
}

impl Expected {
    /// A key space of `keys` absent keys.
    pub fn new(keys: u32) -> Expected {
        Expected { keys, acked: vec![None; keys as usize], in_flight: Vec::new() }
    }

    /// Reads a file; `Ok(None)` when it does not exist.
    pub fn load(path: &Path) -> std::io::Result<Option<Expected>> {
        let text = match std::fs::read(path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        let bad = |line: usize, what: &str| {
            std::io::Error::new(std::io::ErrorKind::InvalidData, format!("{}: line {line}: {what}", path.display()))
        };
        let text = String::from_utf8_lossy(&text);
        let complete = text.rfind('\n').map_or("", |end| &text[..end]);
        let mut lines = complete.split('\n').enumerate();
        let keys: u32 = lines
            .next()
            .and_then(|(_, h)| h.strip_prefix("shaledb-stress-expected v1 keys="))
            .and_then(|n| n.parse().ok())
            .ok_or_else(|| bad(1, "not an expected-state file"))?;
        let mut e = Expected::new(keys);
        let mut pending: BTreeMap<u32, Vec<Op>> = BTreeMap::new();
        for (i, line) in lines {
            let n = i + 1;
            let (tag, rest) = line.split_once(' ').ok_or_else(|| bad(n, "malformed line"))?;
            match tag {
                "S" => {
                    let (k, v) = rest.split_once(' ').ok_or_else(|| bad(n, "malformed snapshot line"))?;
                    let k: usize = k.parse().map_err(|_| bad(n, "bad key"))?;
                    let v = if v == "-" { None } else { Some(unhex(v).ok_or_else(|| bad(n, "bad value"))?) };
                    *e.acked.get_mut(k).ok_or_else(|| bad(n, "key out of range"))? = v;
                }
                "I" => {
                    let (tid, ops) = rest.split_once(' ').ok_or_else(|| bad(n, "malformed intent"))?;
                    let tid: u32 = tid.parse().map_err(|_| bad(n, "bad thread id"))?;
                    let ops: Option<Vec<Op>> = ops.split(';').map(Op::decode).collect();
                    let ops = ops.filter(|o| o.iter().all(|op| op.in_range(keys))).ok_or_else(|| bad(n, "bad op"))?;
                    if pending.insert(tid, ops).is_some() {
                        return Err(bad(n, "a second intent of a thread before the acknowledgement of its first"));
                    }
                }
                "A" => {
                    let tid: u32 = rest.parse().map_err(|_| bad(n, "bad thread id"))?;
                    let ops = pending.remove(&tid).ok_or_else(|| bad(n, "acknowledgement without an intent"))?;
                    e.apply(&ops);
                }
                _ => return Err(bad(n, "unknown line")),
            }
        }
        e.in_flight = pending.into_values().collect();
        Ok(Some(e))
    }

    /// Applies an acknowledged write.
    pub fn apply(&mut self, ops: &[Op]) {
        for op in ops {
            for k in op.keys() {
                if let Some(slot) = self.acked.get_mut(k as usize) {
                    *slot = op.apply(slot.as_deref());
                }
            }
        }
    }

    /// Compares the database's values (`actual[key]`) with what must be there; returns the problems found.
    /// Every key holds its acknowledged value, or the value an in-flight write gives it, and each in-flight
    /// write shows in all of its keys or in none.
    pub fn check(&self, actual: &[Option<Vec<u8>>]) -> Vec<String> {
        let mut problems = Vec::new();
        // What each in-flight write would make of its keys, applied to the acknowledged state.
        let mut after: Vec<BTreeMap<u32, Option<Vec<u8>>>> = Vec::new();
        for ops in &self.in_flight {
            let mut m: BTreeMap<u32, Option<Vec<u8>>> = BTreeMap::new();
            for op in ops {
                for k in op.keys() {
                    let Some(acked) = self.acked.get(k as usize) else { continue };
                    let old = m.get(&k).cloned().unwrap_or_else(|| acked.clone());
                    m.insert(k, op.apply(old.as_deref()));
                }
            }
            after.push(m);
        }
        for (k, want) in self.acked.iter().enumerate() {
            let got = actual.get(k).cloned().flatten();
            let allowed = got == *want || after.iter().any(|m| m.get(&(k as u32)).is_some_and(|v| *v == got));
            if !allowed {
                problems.push(format!(
                    "key {k}: database holds {} but the expected state is {}{}",
                    got.as_deref().map_or("nothing".into(), show),
                    want.as_deref().map_or("nothing".into(), show),
                    if after.iter().any(|m| m.contains_key(&(k as u32))) { " (or an in-flight write)" } else { "" }
                ));
            }
        }
        for (i, m) in after.iter().enumerate() {
            let got = |k: &u32| actual.get(*k as usize).cloned().flatten();
            let all_old = m.keys().all(|k| got(k) == self.acked[*k as usize]);
            let all_new = m.iter().all(|(k, v)| got(k) == *v);
            if !all_old && !all_new {
                problems.push(format!("in-flight write {i} on keys {:?} is in the database in part", m.keys()));
            }
        }
        problems
    }

    /// Writes `values` as the snapshot of a fresh file at `path` (temp file, fsync, rename, directory fsync),
    /// and returns the journal to append to.
    pub fn start(path: &Path, values: &[Option<Vec<u8>>]) -> std::io::Result<Journal> {
        let tmp = path.with_extension("expected.tmp");
        let mut text = format!("shaledb-stress-expected v1 keys={}\n", values.len());
        for (k, v) in values.iter().enumerate() {
            match v {
                Some(v) => {
                    let _ = writeln!(text, "S {k} {}", hex(v));
                }
                None => {
                    let _ = writeln!(text, "S {k} -");
                }
            }
        }
        {
            let mut f = std::fs::File::create(&tmp)?;
            f.write_all(text.as_bytes())?;
            f.sync_all()?;
        }
        std::fs::rename(&tmp, path)?;
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::File::open(dir)?.sync_all()?;
        }
        let file = std::fs::OpenOptions::new().append(true).open(path)?;
        Ok(Journal { file: std::sync::Mutex::new(file), path: path.to_path_buf() })
    }
}

/// The append side of an expected-state file. Shared by the writer threads.
#[derive(Debug)]
pub struct Journal {
    file: std::sync::Mutex<std::fs::File>,
    path: PathBuf,
}

impl Journal {
    fn line(&self, line: &str) -> std::io::Result<()> {
        // One write(2) per line: the line is in the page cache when this returns.
        // A writer that panicked mid-line poisons nothing worth keeping: the file is append-only.
        self.file.lock().unwrap_or_else(std::sync::PoisonError::into_inner).write_all(line.as_bytes())
    }

    /// Records that thread `tid` is about to send `ops`.
    pub fn intent(&self, tid: u32, ops: &[Op]) -> std::io::Result<()> {
        let mut s = format!("I {tid} ");
        for (i, op) in ops.iter().enumerate() {
            if i > 0 {
                s.push(';');
            }
            op.encode(&mut s);
        }
        s.push('\n');
        self.line(&s)
    }

    /// Records that thread `tid`'s write returned successfully.
    pub fn ack(&self, tid: u32) -> std::io::Result<()> {
        self.line(&format!("A {tid}\n"))
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn journal_roundtrip_with_in_flight_and_torn_last_line() {
        let dir = crate::tempdir();
        let path = dir.path().join("x.expected");
        assert_eq!(Expected::load(&path).unwrap(), None);
        let j = Expected::start(&path, &[None, Some(b"a".to_vec()), None]).unwrap();
        j.intent(0, &[Op::Put(0, b"v".to_vec()), Op::Merge(1, b"m".to_vec())]).unwrap();
        j.ack(0).unwrap();
        j.intent(1, &[Op::Delete(1)]).unwrap();
        j.intent(0, &[Op::Put(2, vec![0, 255])]).unwrap();
        j.ack(0).unwrap();
        std::fs::OpenOptions::new().append(true).open(&path).unwrap().write_all(b"A 1").unwrap();
        let e = Expected::load(&path).unwrap().unwrap();
        assert_eq!(e.keys, 3);
        assert_eq!(e.acked, vec![Some(b"v".to_vec()), Some(b"a,m".to_vec()), Some(vec![0, 255])]);
        assert_eq!(e.in_flight, vec![vec![Op::Delete(1)]], "the torn acknowledgement does not count");
    }

    #[test]
    fn check_allows_acked_or_whole_in_flight_writes_only() {
        let mut e = Expected::new(3);
        e.apply(&[Op::Put(0, b"a".to_vec()), Op::Put(1, b"b".to_vec())]);
        e.in_flight = vec![vec![Op::Put(0, b"x".to_vec()), Op::Delete(1)]];
        let a = |v: &str| Some(v.as_bytes().to_vec());
        assert!(e.check(&[a("a"), a("b"), None]).is_empty());
        assert!(e.check(&[a("x"), None, None]).is_empty());
        let half = e.check(&[a("x"), a("b"), None]);
        assert_eq!(half.len(), 1, "{half:?}");
        assert!(half[0].contains("in part"));
        let lost = e.check(&[None, a("b"), None]);
        assert!(lost.iter().any(|p| p.starts_with("key 0:")), "{lost:?}");
        assert!(!e.check(&[a("a"), a("b"), a("?")]).is_empty(), "an unexpected key");
    }

    #[test]
    fn range_deletions_journal_and_check_every_key_of_their_range() {
        let dir = crate::tempdir();
        let path = dir.path().join("r.expected");
        let a = |v: &str| Some(v.as_bytes().to_vec());
        let j = Expected::start(&path, &[a("0"), a("1"), a("2"), a("3")]).unwrap();
        j.intent(0, &[Op::DeleteRange(1, 3)]).unwrap();
        j.ack(0).unwrap();
        j.intent(1, &[Op::DeleteRange(0, 4)]).unwrap();
        let e = Expected::load(&path).unwrap().unwrap();
        assert_eq!(e.acked, vec![a("0"), None, None, a("3")]);
        assert_eq!(e.in_flight, vec![vec![Op::DeleteRange(0, 4)]]);
        assert!(e.check(&[a("0"), None, None, a("3")]).is_empty(), "the in-flight one absent");
        assert!(e.check(&[None, None, None, None]).is_empty(), "the in-flight one whole");
        assert!(!e.check(&[None, None, None, a("3")]).is_empty(), "the in-flight one in part");
        std::fs::write(&path, "shaledb-stress-expected v1 keys=4\nI 0 R2-5\n").unwrap();
        assert!(Expected::load(&path).is_err(), "a range past the key space");
    }

    #[test]
    fn malformed_files_are_errors() {
        let dir = crate::tempdir();
        let path = dir.path().join("bad.expected");
        std::fs::write(&path, "something else\n").unwrap();
        assert!(Expected::load(&path).is_err());
        std::fs::write(&path, "shaledb-stress-expected v1 keys=2\nA 0\n").unwrap();
        assert!(Expected::load(&path).is_err(), "acknowledgement without intent");
        std::fs::write(&path, "shaledb-stress-expected v1 keys=2\nI 0 P7:00\n").unwrap();
        assert!(Expected::load(&path).is_err(), "key out of range");
    }
}
