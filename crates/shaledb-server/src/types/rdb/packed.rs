//! The packed encodings a payload may embed as one string: listpack (read and written), ziplist, intset
//! and zipmap (read only). Every length is checked against the bytes that remain; a malformed encoding is
//! `Err(what)`, never a panic.
//!
//! ```text
//! listpack := total:u32le count:u16le (65535: unknown) lp_entry* 0xff          total = whole size
//! lp_entry := enc data backlen            backlen: size of enc+data, 7 bits a byte, most significant
//!                                          first, every byte but the first with 0x80 set
//! enc      := 0xxxxxxx uint7 | 10llllll str6 | 110vvvvv v:u8 int13 | 1110llll l:u8 str12
//!           | 0xf0 len:u32le str32 | 0xf1 int16le | 0xf2 int24le | 0xf3 int32le | 0xf4 int64le
//! ziplist  := bytes:u32le tail:u32le count:u16le zl_entry* 0xff
//! zl_entry := prevlen (u8 < 254 | 0xfe u32le) enc data
//! enc      := 00llllll | 01llllll l:u8 (big-endian) | 0x80 len:u32be      string
//!           | 0xc0 i16le | 0xd0 i32le | 0xe0 i64le | 0xf0 i24le | 0xfe i8 | 0xf1..0xfd (value enc-0xf1)
//! intset   := width:u32le (2|4|8) count:u32le value{count} (little-endian, signed, ascending)
//! zipmap   := count:u8 (key value)* 0xff   key := len str   value := len free:u8 str byte{free}
//!             len := u8 (< 254) | 0xfe u32le
//! ```

/// One element of a packed encoding: packed encodings store integers apart from strings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Item<'a> {
    Int(i64),
    Str(&'a [u8]),
}

impl Item<'_> {
    /// The element as Redis hands it out: integers as their decimal text.
    pub fn to_vec(self) -> Vec<u8> {
        match self {
            Item::Int(v) => v.to_string().into_bytes(),
            Item::Str(s) => s.to_vec(),
        }
    }

    /// The element as an integer (a string only in Redis's canonical decimal form).
    pub fn as_i64(self) -> Option<i64> {
        match self {
            Item::Int(v) => Some(v),
            Item::Str(s) => canonical_i64(s),
        }
    }
}

/// `s` as an i64 if it is one in canonical form (what Redis stores as an integer): no sign but a leading
/// `-`, no leading zeros, no `-0`, within the i64 range.
pub fn canonical_i64(s: &[u8]) -> Option<i64> {
    if s.is_empty() || s.len() > 20 {
        return None;
    }
    let v: i64 = std::str::from_utf8(s).ok()?.parse().ok()?;
    (v.to_string().as_bytes() == s).then_some(v)
}

type Res<T> = Result<T, &'static str>;

fn u16le(b: &[u8]) -> u16 {
    u16::from_le_bytes([b[0], b[1]])
}

fn u32le(b: &[u8]) -> u32 {
    u32::from_le_bytes([b[0], b[1], b[2], b[3]])
}

/// Sign-extends the low `bits` bits of `v`.
fn sign_extend(v: u64, bits: u32) -> i64 {
    let shift = 64 - bits;
    ((v << shift) as i64) >> shift
}

fn le_int(b: &[u8]) -> i64 {
    let mut v = 0u64;
    for (i, &x) in b.iter().enumerate() {
        v |= (x as u64) << (8 * i);
    }
    sign_extend(v, 8 * b.len() as u32)
}

// ---------------------------------------------------------------------------------------------------------
// Listpack

/// The size of the backlen that follows an entry of `len` bytes.
fn backlen_size(len: usize) -> usize {
    match len {
        0..=127 => 1,
        128..=16382 => 2,
        16383..=2097150 => 3,
        2097151..=268435454 => 4,
        _ => 5,
    }
}

fn push_backlen(out: &mut Vec<u8>, len: usize) {
    let n = backlen_size(len);
    for i in (0..n).rev() {
        let b = ((len >> (7 * i)) & 127) as u8;
        out.push(if i == n - 1 { b } else { b | 128 });
    }
}

/// Every element of the listpack `lp`, validated: header size and count, each entry's encoding within
/// bounds, each backlen matching its entry, the terminator last.
pub fn listpack(lp: &[u8]) -> Res<Vec<Item<'_>>> {
    if lp.len() < 7 {
        return Err("listpack shorter than its header");
    }
    if u32le(&lp[0..4]) as usize != lp.len() {
        return Err("listpack size does not match its header");
    }
    let count = u16le(&lp[4..6]);
    let mut items = Vec::with_capacity((count as usize).min(lp.len()));
    let mut at = 6;
    loop {
        let &b = lp.get(at).ok_or("listpack without a terminator")?;
        if b == 0xff {
            break;
        }
        let rest = &lp[at..];
        let need = |n: usize| rest.get(..n).ok_or("listpack entry past the end");
        let (item, size) = match b {
            0x00..=0x7f => (Item::Int(b as i64), 1),
            0x80..=0xbf => {
                let l = (b & 0x3f) as usize;
                (Item::Str(&need(1 + l)?[1..]), 1 + l)
            }
            0xc0..=0xdf => {
                let h = need(2)?;
                let v = (((h[0] & 0x1f) as u64) << 8) | h[1] as u64;
                (Item::Int(sign_extend(v, 13)), 2)
            }
            0xe0..=0xef => {
                let h = need(2)?;
                let l = (((h[0] & 0x0f) as usize) << 8) | h[1] as usize;
                (Item::Str(&need(2 + l)?[2..]), 2 + l)
            }
            0xf0 => {
                let l = u32le(&need(5)?[1..5]) as usize;
                let end = l.checked_add(5).ok_or("listpack string length overflows")?;
                (Item::Str(&need(end)?[5..]), end)
            }
            0xf1 => (Item::Int(le_int(&need(3)?[1..3])), 3),
            0xf2 => (Item::Int(le_int(&need(4)?[1..4])), 4),
            0xf3 => (Item::Int(le_int(&need(5)?[1..5])), 5),
            0xf4 => (Item::Int(le_int(&need(9)?[1..9])), 9),
            _ => return Err("unknown listpack entry encoding"),
        };
        let bl = backlen_size(size);
        let stored = rest.get(size..size + bl).ok_or("listpack backlen past the end")?;
        let mut want = Vec::with_capacity(5);
        push_backlen(&mut want, size);
        if stored != want.as_slice() {
            return Err("listpack backlen does not match its entry");
        }
        items.push(item);
        at += size + bl;
    }
    if at != lp.len() - 1 {
        return Err("listpack data after its terminator");
    }
    if count != u16::MAX && count as usize != items.len() {
        return Err("listpack count does not match its entries");
    }
    Ok(items)
}

/// Builds a listpack, choosing each element's encoding as Redis does (canonical integers as integers).
pub struct ListpackWriter {
    buf: Vec<u8>,
    count: usize,
}

impl Default for ListpackWriter {
    fn default() -> Self {
        Self::new()
    }
}

impl ListpackWriter {
    pub fn new() -> ListpackWriter {
        ListpackWriter { buf: vec![0; 6], count: 0 }
    }

    /// Elements so far.
    pub fn len(&self) -> usize {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Bytes so far (with the header, without the terminator).
    pub fn bytes(&self) -> usize {
        self.buf.len()
    }

    pub fn push_int(&mut self, v: i64) {
        let start = self.buf.len();
        if (0..=127).contains(&v) {
            self.buf.push(v as u8);
        } else if (-4096..=4095).contains(&v) {
            let u = (v as u64) & 0x1fff;
            self.buf.push(0xc0 | (u >> 8) as u8);
            self.buf.push(u as u8);
        } else if (i16::MIN as i64..=i16::MAX as i64).contains(&v) {
            self.buf.push(0xf1);
            self.buf.extend_from_slice(&(v as i16).to_le_bytes());
        } else if (-(1 << 23)..(1 << 23)).contains(&v) {
            self.buf.push(0xf2);
            self.buf.extend_from_slice(&(v as i32).to_le_bytes()[..3]);
        } else if (i32::MIN as i64..=i32::MAX as i64).contains(&v) {
            self.buf.push(0xf3);
            self.buf.extend_from_slice(&(v as i32).to_le_bytes());
        } else {
            self.buf.push(0xf4);
            self.buf.extend_from_slice(&v.to_le_bytes());
        }
        let size = self.buf.len() - start;
        push_backlen(&mut self.buf, size);
        self.count += 1;
    }

    /// Appends a string (as an integer when it is one in canonical form). REQUIRES: `s` shorter than 4 GiB.
    pub fn push(&mut self, s: &[u8]) {
        if let Some(v) = canonical_i64(s) {
            return self.push_int(v);
        }
        let start = self.buf.len();
        let l = s.len();
        if l < 64 {
            self.buf.push(0x80 | l as u8);
        } else if l < 4096 {
            self.buf.push(0xe0 | (l >> 8) as u8);
            self.buf.push(l as u8);
        } else {
            self.buf.push(0xf0);
            self.buf.extend_from_slice(&(l as u32).to_le_bytes());
        }
        self.buf.extend_from_slice(s);
        let size = self.buf.len() - start;
        push_backlen(&mut self.buf, size);
        self.count += 1;
    }

    /// The finished listpack.
    pub fn finish(mut self) -> Vec<u8> {
        self.buf.push(0xff);
        let total = self.buf.len() as u32;
        self.buf[0..4].copy_from_slice(&total.to_le_bytes());
        let count = u16::try_from(self.count).unwrap_or(u16::MAX);
        self.buf[4..6].copy_from_slice(&count.to_le_bytes());
        self.buf
    }
}

// ---------------------------------------------------------------------------------------------------------
// Ziplist

/// Every element of the ziplist `zl`, validated: header size, tail offset and count, each entry's
/// encoding within bounds, each prevlen matching the entry before it.
pub fn ziplist(zl: &[u8]) -> Res<Vec<Item<'_>>> {
    if zl.len() < 11 {
        return Err("ziplist shorter than its header");
    }
    if u32le(&zl[0..4]) as usize != zl.len() {
        return Err("ziplist size does not match its header");
    }
    let tail = u32le(&zl[4..8]) as usize;
    let count = u16le(&zl[8..10]);
    let mut items = Vec::with_capacity((count as usize).min(zl.len()));
    let mut at = 10;
    let mut prev_size = 0usize;
    let mut last_at = 10;
    loop {
        let &b = zl.get(at).ok_or("ziplist without a terminator")?;
        if b == 0xff {
            break;
        }
        let rest = &zl[at..];
        let need = |n: usize| rest.get(..n).ok_or("ziplist entry past the end");
        let (prevlen, p) = if b < 254 {
            (b as usize, 1)
        } else if b == 254 {
            (u32le(&need(5)?[1..5]) as usize, 5)
        } else {
            return Err("bad ziplist prevlen");
        };
        if prevlen != prev_size {
            return Err("ziplist prevlen does not match the entry before");
        }
        let e = *rest.get(p).ok_or("ziplist entry past the end")?;
        let (item, size) = match e >> 6 {
            0 => {
                let l = (e & 0x3f) as usize;
                (Item::Str(&need(p + 1 + l)?[p + 1..]), p + 1 + l)
            }
            1 => {
                let h = need(p + 2)?;
                let l = (((e & 0x3f) as usize) << 8) | h[p + 1] as usize;
                (Item::Str(&need(p + 2 + l)?[p + 2..]), p + 2 + l)
            }
            2 => {
                if e != 0x80 {
                    return Err("bad ziplist string encoding");
                }
                let h = need(p + 5)?;
                let l = u32::from_be_bytes([h[p + 1], h[p + 2], h[p + 3], h[p + 4]]) as usize;
                let end = l.checked_add(p + 5).ok_or("ziplist string length overflows")?;
                (Item::Str(&need(end)?[p + 5..]), end)
            }
            _ => {
                let width = match e {
                    0xc0 => 2,
                    0xd0 => 4,
                    0xe0 => 8,
                    0xf0 => 3,
                    0xfe => 1,
                    0xf1..=0xfd => 0,
                    _ => return Err("bad ziplist integer encoding"),
                };
                if width == 0 {
                    (Item::Int((e - 0xf1) as i64), p + 1)
                } else {
                    (Item::Int(le_int(&need(p + 1 + width)?[p + 1..])), p + 1 + width)
                }
            }
        };
        items.push(item);
        last_at = at;
        prev_size = size;
        at += size;
    }
    if at != zl.len() - 1 {
        return Err("ziplist data after its terminator");
    }
    let want_tail = if items.is_empty() { 10 } else { last_at };
    if tail != want_tail {
        return Err("ziplist tail offset does not match its entries");
    }
    if count != u16::MAX && count as usize != items.len() {
        return Err("ziplist count does not match its entries");
    }
    Ok(items)
}

// ---------------------------------------------------------------------------------------------------------
// Intset and zipmap

/// The members of the intset `is`: the size must match the header exactly.
pub fn intset(is: &[u8]) -> Res<Vec<i64>> {
    if is.len() < 8 {
        return Err("intset shorter than its header");
    }
    let width = u32le(&is[0..4]) as usize;
    if !matches!(width, 2 | 4 | 8) {
        return Err("bad intset width");
    }
    let count = u32le(&is[4..8]) as usize;
    if count.checked_mul(width).and_then(|n| n.checked_add(8)) != Some(is.len()) {
        return Err("intset size does not match its header");
    }
    Ok(is[8..].chunks_exact(width).map(le_int).collect())
}

/// The `(key, value)` pairs of the zipmap `zm`.
pub fn zipmap(zm: &[u8]) -> Res<Vec<(Vec<u8>, Vec<u8>)>> {
    let &count = zm.first().ok_or("empty zipmap")?;
    let mut at = 1;
    let len = |at: &mut usize| -> Res<usize> {
        let &b = zm.get(*at).ok_or("zipmap entry past the end")?;
        if b < 254 {
            *at += 1;
            Ok(b as usize)
        } else if b == 254 {
            let l = zm.get(*at + 1..*at + 5).ok_or("zipmap length past the end")?;
            *at += 5;
            Ok(u32le(l) as usize)
        } else {
            Err("bad zipmap length")
        }
    };
    let mut out = Vec::new();
    loop {
        match zm.get(at) {
            None => return Err("zipmap without a terminator"),
            Some(0xff) => break,
            Some(_) => {}
        }
        let kl = len(&mut at)?;
        let k = zm.get(at..at.saturating_add(kl)).ok_or("zipmap key past the end")?;
        at += kl;
        let vl = len(&mut at)?;
        let free = *zm.get(at).ok_or("zipmap entry past the end")? as usize;
        at += 1;
        let v = zm.get(at..at.saturating_add(vl)).ok_or("zipmap value past the end")?;
        at = at + vl + free;
        out.push((k.to_vec(), v.to_vec()));
    }
    if at != zm.len() - 1 {
        return Err("zipmap data after its terminator");
    }
    if count < 254 && count as usize != out.len() {
        return Err("zipmap count does not match its entries");
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listpack_round_trips_every_encoding() {
        let long = vec![b'z'; 5000];
        let mid = vec![b'y'; 100];
        let ints =
            [0i64, 127, 128, -1, -4096, 4095, 4096, -32768, 32767, 40000, -(1 << 23), 1 << 30, i64::MIN, i64::MAX];
        let mut w = ListpackWriter::new();
        for v in ints {
            w.push(v.to_string().as_bytes());
        }
        w.push(b"");
        w.push(b"abc");
        w.push(&mid);
        w.push(&long);
        w.push(b"007");
        w.push(b"-0");
        let lp = w.finish();
        let items = listpack(&lp).unwrap();
        let mut want: Vec<Item<'_>> = ints.iter().map(|&v| Item::Int(v)).collect();
        want.extend([
            Item::Str(b""),
            Item::Str(b"abc"),
            Item::Str(&mid),
            Item::Str(&long),
            Item::Str(b"007"),
            Item::Str(b"-0"),
        ]);
        assert_eq!(items, want);
    }

    #[test]
    fn listpack_corruptions_are_refused() {
        let mut w = ListpackWriter::new();
        w.push(b"hello");
        w.push(b"12");
        let lp = w.finish();
        let mut bad = lp.clone();
        bad[0] ^= 1;
        assert!(listpack(&bad).is_err(), "size");
        let mut bad = lp.clone();
        bad[4] = 3;
        assert!(listpack(&bad).is_err(), "count");
        let mut bad = lp.clone();
        bad[6] = 0x80 | 40;
        assert!(listpack(&bad).is_err(), "string length");
        let mut bad = lp.clone();
        bad[12] ^= 1;
        assert!(listpack(&bad).is_err(), "backlen");
        let mut bad = lp.clone();
        *bad.last_mut().unwrap() = 0;
        assert!(listpack(&bad).is_err(), "terminator");
        assert!(listpack(&lp[..5]).is_err(), "truncated");
    }

    #[test]
    fn ziplist_reads_every_encoding() {
        // Hand-built: "ab", 7 (immediate), -2 (int8), 300 (int16), 70000 (int24).
        let entries: Vec<Vec<u8>> = vec![
            vec![0x02, b'a', b'b'],
            vec![0xf1 + 7],
            vec![0xfe, 0xfe],
            [vec![0xc0], 300i16.to_le_bytes().to_vec()].concat(),
            [vec![0xf0], 70000i32.to_le_bytes()[..3].to_vec()].concat(),
        ];
        let mut body = Vec::new();
        let mut prev = 0usize;
        let mut last = 10;
        for e in &entries {
            last = 10 + body.len();
            body.push(prev as u8);
            body.extend_from_slice(e);
            prev = e.len() + 1;
        }
        let total = 10 + body.len() + 1;
        let mut zl = Vec::new();
        zl.extend_from_slice(&(total as u32).to_le_bytes());
        zl.extend_from_slice(&(last as u32).to_le_bytes());
        zl.extend_from_slice(&(entries.len() as u16).to_le_bytes());
        zl.extend_from_slice(&body);
        zl.push(0xff);
        let items = ziplist(&zl).unwrap();
        assert_eq!(items, vec![Item::Str(b"ab"), Item::Int(7), Item::Int(-2), Item::Int(300), Item::Int(70000)]);
        let mut bad = zl.clone();
        bad[4] += 1;
        assert!(ziplist(&bad).is_err(), "tail");
        let mut bad = zl.clone();
        bad[14] = 9;
        assert!(ziplist(&bad).is_err(), "prevlen");
    }

    #[test]
    fn intset_and_zipmap() {
        let mut is = Vec::new();
        is.extend_from_slice(&4u32.to_le_bytes());
        is.extend_from_slice(&2u32.to_le_bytes());
        is.extend_from_slice(&(-5i32).to_le_bytes());
        is.extend_from_slice(&70000i32.to_le_bytes());
        assert_eq!(intset(&is).unwrap(), vec![-5, 70000]);
        assert!(intset(&is[..11]).is_err());
        let zm = [1, 1, b'k', 2, 1, b'v', b'w', b'!', 0xff];
        assert_eq!(zipmap(&zm).unwrap(), vec![(b"k".to_vec(), b"vw".to_vec())]);
        assert!(zipmap(&zm[..8]).is_err());
    }

    #[test]
    fn canonical_integers() {
        assert_eq!(canonical_i64(b"0"), Some(0));
        assert_eq!(canonical_i64(b"-12"), Some(-12));
        assert_eq!(canonical_i64(b"9223372036854775807"), Some(i64::MAX));
        for s in [&b""[..], b"-0", b"01", b"+1", b" 1", b"9223372036854775808", b"1.0"] {
            assert_eq!(canonical_i64(s), None, "{s:?}");
        }
    }
}
