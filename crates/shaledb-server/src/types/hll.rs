//! HyperLogLog on the engine: a string value in Redis's own representation, so PFADD, PFCOUNT and PFMERGE
//! give Redis's estimates and a value copied between the two servers (GET/SET, DUMP of a string) means the
//! same thing on both.
//!
//! The value (facts of Redis 7.0's format; the code here is our own):
//!
//! ```text
//! hll      := "HYLL" encoding:u8 reserved:3 card:8 registers
//! encoding := 0 (dense) | 1 (sparse)
//! card     := the cached cardinality, little endian; bit 7 of its last byte set = stale
//! dense    := 16384 registers of 6 bits, packed little-endian-first (exactly 12288 bytes)
//! sparse   := opcode*, covering exactly 16384 registers
//! opcode   := ZERO  00xxxxxx            run of 1..64 zero registers
//!           | XZERO 01xxxxxx yyyyyyyy   run of 1..16384 zero registers (14-bit length - 1)
//!           | VAL   1vvvvvxx            run of 1..4 registers of value 1..32
//! ```
//!
//! An element is hashed with MurmurHash64A (seed `0xadc83b19`): the low 14 bits pick the register, the
//! position of the first 1 bit in the other 50 (from the low end, plus one) is the candidate value. A sparse
//! value becomes dense when a register needs a value above 32 or the value would outgrow
//! [`WriteCtx::hll_sparse_max_bytes`] (Redis's `hll-sparse-max-bytes`). The estimate is Ertl's improved estimator over the
//! registers' histogram, as in Redis 7.0.
//!
//! Corrupt values: a string that is not a HyperLogLog (short, wrong magic, unknown encoding, a dense value of
//! the wrong length) is [`Error::NotHll`]; sparse opcodes that do not cover exactly 16384 registers are
//! [`Error::Corrupt`]. Neither ever panics: every byte read is bounds-checked (a byte past the end reads as
//! 0, which is what Redis reads there: the string's terminating NUL).

use crate::keys::Meta;
use crate::store::{self, ReadCtx, WriteCtx};
use crate::types::string;
use bytes::Bytes;

/// Header bytes: magic, encoding, reserved, cached cardinality.
pub const HDR: usize = 16;
/// Registers of a HyperLogLog (2^14).
pub const REGISTERS: usize = 1 << 14;
const P: u32 = 14;
const Q: usize = 64 - P as usize;
const REG_BITS: usize = 6;
const REG_MAX: u8 = (1 << REG_BITS) - 1;
/// The length of a dense value.
pub const DENSE_SIZE: usize = HDR + (REGISTERS * REG_BITS).div_ceil(8);
/// Encoding byte of a dense value (frozen: Redis's format).
pub const DENSE: u8 = 0;
/// Encoding byte of a sparse value (frozen: Redis's format).
pub const SPARSE: u8 = 1;
const SEED: u64 = 0xadc8_3b19;
const VAL_MAX_VALUE: u8 = 32;
const VAL_MAX_LEN: usize = 4;
const ZERO_MAX_LEN: usize = 64;
const XZERO_MAX_LEN: usize = 16384;
const ALPHA_INF: f64 = 0.721_347_520_444_481_7;

/// `hll-sparse-max-bytes`'s default: the longest a sparse value may grow before it becomes dense. A server's
/// own value is [`WriteCtx::hll_sparse_max_bytes`] (CONFIG SET changes it per server).
pub const DEFAULT_SPARSE_MAX_BYTES: u64 = 3000;

/// Why a HyperLogLog operation failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The store failed (another type, corrupt meta value, failed read).
    #[error(transparent)]
    Store(#[from] store::Error),
    /// A string that is not a HyperLogLog (Redis answers with a WRONGTYPE code).
    #[error("Key is not a valid HyperLogLog string value.")]
    NotHll,
    /// A sparse HyperLogLog whose opcodes are inconsistent.
    #[error("Corrupted HLL object detected")]
    Corrupt,
}

impl From<string::Error> for Error {
    fn from(e: string::Error) -> Error {
        match e {
            string::Error::Store(s) => Error::Store(s),
            // Only the store's errors come out of a string read or write here.
            other => Error::Store(store::Error::Corrupt(other.to_string())),
        }
    }
}

// ---------------------------------------------------------------------------------------------------------
// Hashing

/// MurmurHash64A of `data` with `seed` (Austin Appleby's 64-bit hash, little-endian reads).
pub fn murmur64a(data: &[u8], seed: u64) -> u64 {
    const M: u64 = 0xc6a4_a793_5bd1_e995;
    const R: u32 = 47;
    let mut h = seed ^ (data.len() as u64).wrapping_mul(M);
    let mut chunks = data.chunks_exact(8);
    for c in &mut chunks {
        let mut k = u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]);
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h ^= k;
        h = h.wrapping_mul(M);
    }
    let tail = chunks.remainder();
    if !tail.is_empty() {
        for (i, b) in tail.iter().enumerate() {
            h ^= (*b as u64) << (8 * i);
        }
        h = h.wrapping_mul(M);
    }
    h ^= h >> R;
    h = h.wrapping_mul(M);
    h ^= h >> R;
    h
}

/// The register an element goes to and the value it proposes (1..=51).
pub fn pattern(ele: &[u8]) -> (usize, u8) {
    let hash = murmur64a(ele, SEED);
    let index = (hash & (REGISTERS as u64 - 1)) as usize;
    let rest = (hash >> P) | (1u64 << Q);
    (index, rest.trailing_zeros() as u8 + 1)
}

// ---------------------------------------------------------------------------------------------------------
// Dense registers

/// Register `i` of the packed dense registers `regs`.
pub fn dense_get(regs: &[u8], i: usize) -> u8 {
    let byte = i * REG_BITS / 8;
    let fb = (i * REG_BITS) & 7;
    let b0 = regs.get(byte).copied().unwrap_or(0) as u16;
    let b1 = regs.get(byte + 1).copied().unwrap_or(0) as u16;
    (((b0 >> fb) | (b1 << (8 - fb))) & REG_MAX as u16) as u8
}

/// Sets register `i` of the packed dense registers `regs` to `v` (at most 63).
pub fn dense_set(regs: &mut [u8], i: usize, v: u8) {
    let byte = i * REG_BITS / 8;
    let fb = (i * REG_BITS) & 7;
    let v = (v & REG_MAX) as u16;
    if let Some(b) = regs.get_mut(byte) {
        *b &= !((REG_MAX as u16) << fb) as u8;
        *b |= (v << fb) as u8;
    }
    if let Some(b) = regs.get_mut(byte + 1) {
        *b &= !((REG_MAX as u16) >> (8 - fb)) as u8;
        *b |= (v >> (8 - fb)) as u8;
    }
}

/// Raises register `i` to `v` if it is lower; true if it changed.
fn dense_raise(regs: &mut [u8], i: usize, v: u8) -> bool {
    if v > dense_get(regs, i) {
        dense_set(regs, i, v);
        true
    } else {
        false
    }
}

// ---------------------------------------------------------------------------------------------------------
// Sparse opcodes

/// One decoded sparse opcode: its length in bytes, the registers it covers and their value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Op {
    bytes: usize,
    run: usize,
    value: u8,
}

/// The opcode at `p` of `s` (a byte past the end reads as 0).
fn op_at(s: &[u8], p: usize) -> Op {
    let b = s.get(p).copied().unwrap_or(0);
    if b & 0xc0 == 0 {
        Op { bytes: 1, run: (b & 0x3f) as usize + 1, value: 0 }
    } else if b & 0xc0 == 0x40 {
        let lo = s.get(p + 1).copied().unwrap_or(0) as usize;
        Op { bytes: 2, run: ((((b & 0x3f) as usize) << 8) | lo) + 1, value: 0 }
    } else {
        Op { bytes: 1, run: (b & 0x3) as usize + 1, value: ((b >> 2) & 0x1f) + 1 }
    }
}

fn is_val(b: u8) -> bool {
    b & 0x80 != 0
}

fn val_op(value: u8, len: usize) -> u8 {
    ((value - 1) << 2) | (len as u8 - 1) | 0x80
}

fn push_zeros(out: &mut Vec<u8>, len: usize) {
    if len > ZERO_MAX_LEN {
        let l = len - 1;
        out.push((l >> 8) as u8 | 0x40);
        out.push((l & 0xff) as u8);
    } else {
        out.push(len as u8 - 1);
    }
}

/// A new, empty HyperLogLog: sparse, every register zero.
pub fn new_value() -> Vec<u8> {
    let mut v = Vec::with_capacity(HDR + 2);
    v.extend_from_slice(b"HYLL");
    v.push(SPARSE);
    v.extend_from_slice(&[0; 11]);
    let mut left = REGISTERS;
    while left > 0 {
        let n = left.min(XZERO_MAX_LEN);
        let l = n - 1;
        v.push((l >> 8) as u8 | 0x40);
        v.push((l & 0xff) as u8);
        left -= n;
    }
    v
}

/// Checks that `v` is a HyperLogLog value: long enough, the magic, a known encoding, a dense value of the
/// exact length.
pub fn validate(v: &[u8]) -> Result<(), Error> {
    if v.len() < HDR || &v[..4] != b"HYLL" || v[4] > SPARSE || (v[4] == DENSE && v.len() != DENSE_SIZE) {
        return Err(Error::NotHll);
    }
    Ok(())
}

/// Whether `v` (validated) is sparse.
pub fn is_sparse(v: &[u8]) -> bool {
    v[4] == SPARSE
}

/// The dense form of a validated value (the same value if dense already): the header is kept (magic and
/// cached cardinality), the encoding byte becomes dense.
pub fn to_dense(v: &[u8]) -> Result<Vec<u8>, Error> {
    if !is_sparse(v) {
        return Ok(v.to_vec());
    }
    let mut d = vec![0u8; DENSE_SIZE];
    d[..HDR].copy_from_slice(&v[..HDR]);
    d[4] = DENSE;
    let regs = &mut d[HDR..];
    let mut idx = 0usize;
    let mut p = HDR;
    while p < v.len() {
        let op = op_at(v, p);
        if op.value > 0 {
            if idx + op.run > REGISTERS {
                break;
            }
            for r in idx..idx + op.run {
                dense_set(regs, r, op.value);
            }
        }
        idx += op.run;
        p += op.bytes;
    }
    if idx != REGISTERS {
        return Err(Error::Corrupt);
    }
    Ok(d)
}

/// Raises register `index` of the sparse value `v` to `count` in place, as Redis's sparse update does
/// (splitting the opcode that covers it, then merging equal neighbours); promotes `v` to dense when the
/// value is too large for a VAL opcode or the result would pass `max_bytes`. Returns whether a register
/// changed.
fn sparse_set(v: &mut Vec<u8>, index: usize, count: u8, max_bytes: u64) -> Result<bool, Error> {
    if count > VAL_MAX_VALUE {
        return promote(v, index, count);
    }
    // Step 1: the opcode covering `index`.
    let end = v.len();
    let mut p = HDR;
    let mut first = 0usize;
    let mut prev: Option<usize> = None;
    let mut op = Op { bytes: 0, run: 0, value: 0 };
    while p < end {
        op = op_at(v, p);
        if index < first + op.run {
            break;
        }
        prev = Some(p);
        p += op.bytes;
        first += op.run;
    }
    if op.run == 0 || p >= end {
        return Err(Error::Corrupt);
    }
    let is_val_op = is_val(v[p]);
    // Step 2: the trivial cases, else the replacement sequence.
    let mut updated_in_place = false;
    if is_val_op {
        if op.value >= count {
            return Ok(false);
        }
        if op.run == 1 {
            v[p] = val_op(count, 1);
            updated_in_place = true;
        }
    } else if op.bytes == 1 && op.run == 1 {
        v[p] = val_op(count, 1);
        updated_in_place = true;
    }
    if !updated_in_place {
        let last = first + op.run - 1;
        let mut seq = Vec::with_capacity(5);
        if is_val_op {
            if index != first {
                seq.push(val_op(op.value, index - first));
            }
            seq.push(val_op(count, 1));
            if index != last {
                seq.push(val_op(op.value, last - index));
            }
        } else {
            if index != first {
                push_zeros(&mut seq, index - first);
            }
            seq.push(val_op(count, 1));
            if index != last {
                push_zeros(&mut seq, last - index);
            }
        }
        // Step 3: put the sequence in place of the opcode, unless the value would grow too long.
        let old_len = op.bytes.min(end - p);
        if seq.len() > old_len && (v.len() + seq.len() - old_len) as u64 > max_bytes {
            return promote(v, index, count);
        }
        v.splice(p..p + old_len, seq);
    }
    // Step 4: merge adjacent VAL opcodes of equal value, up to 5 opcodes from the previous one.
    let mut p = prev.unwrap_or(HDR);
    let mut scan = 5;
    while p < v.len() && scan > 0 {
        scan -= 1;
        let b = v[p];
        if b & 0xc0 == 0x40 {
            p += 2;
            continue;
        }
        if b & 0xc0 == 0 {
            p += 1;
            continue;
        }
        if p + 1 < v.len() && is_val(v[p + 1]) {
            let (a, c) = (op_at(v, p), op_at(v, p + 1));
            if a.value == c.value && a.run + c.run <= VAL_MAX_LEN {
                v[p + 1] = val_op(a.value, a.run + c.run);
                v.remove(p);
                continue;
            }
        }
        p += 1;
    }
    invalidate_cache(v);
    Ok(true)
}

/// Turns the sparse value `v` dense and raises register `index` to `count` (which must raise it).
fn promote(v: &mut Vec<u8>, index: usize, count: u8) -> Result<bool, Error> {
    *v = to_dense(v)?;
    dense_raise(&mut v[HDR..], index, count);
    Ok(true)
}

/// Raises register `index` of the validated value `v` to `count` if lower; true if it changed.
pub fn set_register(v: &mut Vec<u8>, index: usize, count: u8, sparse_max_bytes: u64) -> Result<bool, Error> {
    if is_sparse(v) {
        sparse_set(v, index, count, sparse_max_bytes)
    } else {
        Ok(dense_raise(&mut v[HDR..], index, count))
    }
}

/// Adds `ele` to the validated value `v`; true if a register changed (the cache is not touched).
pub fn add_element(v: &mut Vec<u8>, ele: &[u8], sparse_max_bytes: u64) -> Result<bool, Error> {
    let (index, count) = pattern(ele);
    set_register(v, index, count, sparse_max_bytes)
}

// ---------------------------------------------------------------------------------------------------------
// Cached cardinality, estimate, merge

/// Marks the cached cardinality stale.
pub fn invalidate_cache(v: &mut [u8]) {
    if let Some(b) = v.get_mut(15) {
        *b |= 0x80;
    }
}

/// The cached cardinality, if it is valid.
pub fn cached(v: &[u8]) -> Option<u64> {
    let card: [u8; 8] = v.get(8..16)?.try_into().ok()?;
    (card[7] & 0x80 == 0).then(|| u64::from_le_bytes(card))
}

/// Stores `card` as the cached cardinality.
pub fn set_cached(v: &mut [u8], card: u64) {
    if let Some(c) = v.get_mut(8..16) {
        c.copy_from_slice(&card.to_le_bytes());
    }
}

fn sigma(mut x: f64) -> f64 {
    if x == 1.0 {
        return f64::INFINITY;
    }
    let mut y = 1.0;
    let mut z = x;
    loop {
        x *= x;
        let prev = z;
        z += x * y;
        y += y;
        if prev == z {
            return z;
        }
    }
}

fn tau(mut x: f64) -> f64 {
    if x == 0.0 || x == 1.0 {
        return 0.0;
    }
    let mut y = 1.0;
    let mut z = 1.0 - x;
    loop {
        x = x.sqrt();
        let prev = z;
        y *= 0.5;
        z -= (1.0 - x) * (1.0 - x) * y;
        if prev == z {
            return z / 3.0;
        }
    }
}

/// The estimate from a histogram of register values (index: value, 0..=63).
fn estimate(histo: &[u64; 64]) -> u64 {
    let m = REGISTERS as f64;
    let mut z = m * tau((m - histo[Q + 1] as f64) / m);
    for j in (1..=Q).rev() {
        z += histo[j] as f64;
        z *= 0.5;
    }
    z += m * sigma(histo[0] as f64 / m);
    (ALPHA_INF * m * m / z).round() as u64
}

/// The histogram of a validated value's registers; `Corrupt` when sparse opcodes do not cover exactly
/// 16384 registers.
fn histogram(v: &[u8]) -> Result<[u64; 64], Error> {
    let mut h = [0u64; 64];
    if is_sparse(v) {
        let mut idx = 0usize;
        let mut p = HDR;
        while p < v.len() {
            let op = op_at(v, p);
            h[op.value as usize] += op.run as u64;
            idx += op.run;
            p += op.bytes;
        }
        if idx != REGISTERS {
            return Err(Error::Corrupt);
        }
    } else {
        let regs = &v[HDR..];
        for i in 0..REGISTERS {
            h[dense_get(regs, i) as usize] += 1;
        }
    }
    Ok(h)
}

/// The estimated cardinality of a validated value (ignoring its cache).
pub fn count_value(v: &[u8]) -> Result<u64, Error> {
    Ok(estimate(&histogram(v)?))
}

/// The estimate of unpacked registers (one byte each).
pub fn count_registers(regs: &[u8; REGISTERS]) -> u64 {
    let mut h = [0u64; 64];
    for r in regs {
        h[(*r & 63) as usize] += 1;
    }
    estimate(&h)
}

/// Raises each of `max` to the matching register of the validated value `v`.
pub fn merge_into(max: &mut [u8; REGISTERS], v: &[u8]) -> Result<(), Error> {
    if !is_sparse(v) {
        let regs = &v[HDR..];
        for (i, m) in max.iter_mut().enumerate() {
            *m = (*m).max(dense_get(regs, i));
        }
        return Ok(());
    }
    let mut i = 0usize;
    let mut p = HDR;
    while p < v.len() {
        let op = op_at(v, p);
        if op.value > 0 {
            if i + op.run > REGISTERS {
                break;
            }
            for m in &mut max[i..i + op.run] {
                *m = (*m).max(op.value);
            }
        }
        i += op.run;
        p += op.bytes;
    }
    if i != REGISTERS {
        return Err(Error::Corrupt);
    }
    Ok(())
}

/// The sparse opcodes of a validated sparse value as PFDEBUG DECODE prints them (`z:N`, `Z:N`, `v:V,N`).
pub fn decode_sparse(v: &[u8]) -> String {
    let mut parts = Vec::new();
    let mut p = HDR;
    while p < v.len() {
        let op = op_at(v, p);
        parts.push(if op.value > 0 {
            format!("v:{},{}", op.value, op.run)
        } else if op.bytes == 2 {
            format!("Z:{}", op.run)
        } else {
            format!("z:{}", op.run)
        });
        p += op.bytes;
    }
    parts.join(" ")
}

// ---------------------------------------------------------------------------------------------------------
// On the engine

/// A stored HyperLogLog: the string's meta (for its expiry) and its validated value.
pub struct Stored {
    pub meta: Meta,
    pub value: Vec<u8>,
}

/// The HyperLogLog `key` through the group's view: `None` when missing; WRONGTYPE for another type,
/// [`Error::NotHll`] for a string that is not one.
pub fn load_mut(ctx: &mut WriteCtx<'_>, key: &[u8]) -> Result<Option<Stored>, Error> {
    let Some((meta, stored)) = string::get_stored_mut(ctx, key)? else { return Ok(None) };
    let value = crate::keys::payload(stored, &meta).to_vec();
    validate(&value)?;
    Ok(Some(Stored { meta, value }))
}

/// [`load_mut`] on a connection's view.
pub fn load(ctx: &ReadCtx<'_>, key: &[u8]) -> Result<Option<Bytes>, Error> {
    let Some(v) = string::get(ctx, key)? else { return Ok(None) };
    validate(&v)?;
    Ok(Some(v))
}

/// Writes `value` back as `key`, keeping the expiry `meta` had.
pub fn save(ctx: &mut WriteCtx<'_>, key: &[u8], meta: Option<&Meta>, value: &[u8]) -> Result<(), Error> {
    Ok(string::put(ctx, key, value, meta.and_then(|m| m.expire_at_ms))?)
}

/// PFADD: adds `elements` to the HyperLogLog `key`, creating it when missing. True if the key was created
/// or a register changed (then the cache is invalidated and the value written).
pub fn add<E: AsRef<[u8]>>(ctx: &mut WriteCtx<'_>, key: &[u8], elements: &[E]) -> Result<bool, Error> {
    let (meta, mut value, mut updated) = match load_mut(ctx, key)? {
        Some(s) => (Some(s.meta), s.value, false),
        None => (None, new_value(), true),
    };
    for e in elements {
        updated |= add_element(&mut value, e.as_ref(), ctx.hll_sparse_max_bytes)?;
    }
    if updated {
        invalidate_cache(&mut value);
        save(ctx, key, meta.as_ref(), &value)?;
    }
    Ok(updated)
}

/// PFCOUNT: the estimate of one HyperLogLog (from its cache, else computed and cached in the value), or of
/// the union of several (missing keys count as empty).
pub fn count<K: AsRef<[u8]>>(ctx: &mut WriteCtx<'_>, keys: &[K]) -> Result<u64, Error> {
    if let [key] = keys {
        let key = key.as_ref();
        let Some(mut s) = load_mut(ctx, key)? else {
            ctx.note_miss(key);
            return Ok(0);
        };
        if let Some(c) = cached(&s.value) {
            return Ok(c);
        }
        let card = count_value(&s.value)?;
        set_cached(&mut s.value, card);
        save(ctx, key, Some(&s.meta), &s.value)?;
        return Ok(card);
    }
    let mut max = [0u8; REGISTERS];
    for k in keys {
        match load_mut(ctx, k.as_ref())? {
            Some(s) => merge_into(&mut max, &s.value)?,
            None => ctx.note_miss(k.as_ref()),
        }
    }
    Ok(count_registers(&max))
}

/// PFMERGE: the union of `dst` and `srcs` stored as `dst` (dense when any input is dense).
pub fn merge<K: AsRef<[u8]>>(ctx: &mut WriteCtx<'_>, dst: &[u8], srcs: &[K]) -> Result<(), Error> {
    let mut max = [0u8; REGISTERS];
    let mut use_dense = false;
    let mut dest = None;
    for (i, k) in std::iter::once(dst).chain(srcs.iter().map(|k| k.as_ref())).enumerate() {
        let Some(s) = load_mut(ctx, k)? else {
            ctx.note_miss(k);
            continue;
        };
        use_dense |= !is_sparse(&s.value);
        merge_into(&mut max, &s.value)?;
        if i == 0 {
            dest = Some(s);
        }
    }
    let (meta, mut value) = match dest {
        Some(s) => (Some(s.meta), s.value),
        None => (None, new_value()),
    };
    if use_dense {
        value = to_dense(&value)?;
    }
    for (j, m) in max.iter().enumerate() {
        if *m > 0 {
            // As in Redis, a failed sparse update here (a corrupt destination) is not reported: the
            // destination was checked whole by `merge_into` above.
            let _ = set_register(&mut value, j, *m, ctx.hll_sparse_max_bytes);
        }
    }
    invalidate_cache(&mut value);
    save(ctx, dst, meta.as_ref(), &value)
}

/// PFSELFTEST: checks register access and the estimator's error on `n` elements against both encodings.
/// `Err` holds the reason, as Redis words it after `TESTFAILED`.
pub fn self_test(n: u64, seed: u64) -> Result<(), String> {
    let mut rng = seed | 1;
    let mut next = || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let mut regs = vec![0u8; DENSE_SIZE - HDR];
    let mut bytes = vec![0u8; REGISTERS];
    for _ in 0..10 {
        for (i, b) in bytes.iter_mut().enumerate() {
            *b = (next() & REG_MAX as u64) as u8;
            dense_set(&mut regs, i, *b);
        }
        for (i, b) in bytes.iter().enumerate() {
            let got = dense_get(&regs, i);
            if got != *b {
                return Err(format!("Register {i} should be {b} but is {got}"));
            }
        }
    }
    let mut dense = new_value();
    dense = to_dense(&dense).map_err(|e| e.to_string())?;
    let mut sparse = new_value();
    let relerr = 1.04 / (REGISTERS as f64).sqrt();
    let base = next();
    let mut checkpoint = 1u64;
    for j in 1..=n {
        let ele = (j ^ base).to_le_bytes();
        add_element(&mut dense, &ele, DEFAULT_SPARSE_MAX_BYTES).map_err(|e| e.to_string())?;
        add_element(&mut sparse, &ele, DEFAULT_SPARSE_MAX_BYTES).map_err(|e| e.to_string())?;
        if j != checkpoint {
            continue;
        }
        if j < DEFAULT_SPARSE_MAX_BYTES / 2 && !is_sparse(&sparse) {
            return Err("sparse encoding not used".into());
        }
        let (cd, cs) =
            (count_value(&dense).map_err(|e| e.to_string())?, count_value(&sparse).map_err(|e| e.to_string())?);
        if cd != cs {
            return Err("dense/sparse disagree".into());
        }
        let abserr = (checkpoint as i64 - cd as i64).unsigned_abs();
        let maxerr = if j == 10 { 1 } else { (relerr * 6.0 * checkpoint as f64).ceil() as u64 };
        if abserr > maxerr {
            return Err(format!("Too big error. card:{checkpoint} abserr:{abserr}"));
        }
        checkpoint *= 10;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sparse_with(elements: &[&str]) -> Vec<u8> {
        let mut v = new_value();
        for e in elements {
            add_element(&mut v, e.as_bytes(), DEFAULT_SPARSE_MAX_BYTES).unwrap();
        }
        v
    }

    #[test]
    fn patterns_match_redis() {
        // The register and value redis-server 7.0 sets for these elements (PFADD then PFDEBUG GETREG).
        for (e, reg, val) in [
            ("a", 12711, 2),
            ("hello", 9216, 1),
            ("", 5938, 2),
            ("abcdefgh", 1383, 1),
            ("abcdefghijklmnopq", 4271, 1),
            ("1234567", 10327, 3),
        ] {
            assert_eq!(pattern(e.as_bytes()), (reg, val), "{e:?}");
        }
    }

    #[test]
    fn empty_value_is_one_xzero_run() {
        let v = new_value();
        assert_eq!(v.len(), HDR + 2);
        assert_eq!(&v[HDR..], &[0x7f, 0xff]);
        assert_eq!(decode_sparse(&v), "Z:16384");
        assert_eq!(count_value(&v).unwrap(), 0);
        validate(&v).unwrap();
    }

    #[test]
    fn dense_registers_do_not_disturb_neighbours() {
        let mut regs = vec![0u8; DENSE_SIZE - HDR];
        for i in 0..REGISTERS {
            dense_set(&mut regs, i, (i % 64) as u8);
        }
        for i in 0..REGISTERS {
            assert_eq!(dense_get(&regs, i), (i % 64) as u8, "register {i}");
        }
        assert!(self_test(2000, 7).is_ok());
    }

    #[test]
    fn sparse_and_dense_estimates_agree() {
        let elements: Vec<String> = (0..500).map(|i| format!("e{i}")).collect();
        let refs: Vec<&str> = elements.iter().map(|s| s.as_str()).collect();
        let sparse = sparse_with(&refs);
        assert!(is_sparse(&sparse));
        let dense = to_dense(&sparse).unwrap();
        assert_eq!(dense.len(), DENSE_SIZE);
        assert_eq!(count_value(&sparse).unwrap(), count_value(&dense).unwrap());
        let c = count_value(&dense).unwrap() as i64;
        assert!((c - 500).abs() < 25, "{c}");
        let mut max = [0u8; REGISTERS];
        merge_into(&mut max, &sparse).unwrap();
        assert_eq!(count_registers(&max), c as u64);
    }

    #[test]
    fn sparse_promotes_past_max_bytes() {
        let mut v = new_value();
        let mut i = 0;
        while is_sparse(&v) {
            sparse_set(&mut v, i * 7 % REGISTERS, 1 + (i % 30) as u8, 300).unwrap();
            assert!(is_sparse(&v) && v.len() <= 300 || v.len() == DENSE_SIZE);
            i += 1;
        }
        assert_eq!(v.len(), DENSE_SIZE);
        // A value above 32 promotes at once.
        let mut w = new_value();
        assert!(sparse_set(&mut w, 5, 40, 3000).unwrap());
        assert_eq!(w.len(), DENSE_SIZE);
        assert_eq!(dense_get(&w[HDR..], 5), 40);
    }

    #[test]
    fn corrupt_values_are_errors_not_panics() {
        assert_eq!(validate(b"HYLL"), Err(Error::NotHll));
        let mut v = sparse_with(&["a", "b", "c"]);
        v[4] = 2;
        assert_eq!(validate(&v), Err(Error::NotHll));
        v[4] = DENSE;
        assert_eq!(validate(&v), Err(Error::NotHll));
        // Extra opcodes at the tail: more than 16384 registers.
        let mut t = sparse_with(&["a", "b", "c"]);
        t.extend_from_slice(b"hello");
        assert_eq!(count_value(&t), Err(Error::Corrupt));
        let mut max = [0u8; REGISTERS];
        assert_eq!(merge_into(&mut max, &t), Err(Error::Corrupt));
        assert_eq!(to_dense(&t), Err(Error::Corrupt));
        // A truncated XZERO and every single-byte corruption: no panic anywhere.
        let base = sparse_with(&["x", "y", "z", "w"]);
        for pos in HDR..base.len() {
            for b in [0u8, 0x3f, 0x40, 0x7f, 0x80, 0xff] {
                let mut c = base.clone();
                c[pos] = b;
                let _ = count_value(&c);
                let _ = to_dense(&c);
                for e in ["p", "q", "r"] {
                    let _ = add_element(&mut c, e.as_bytes(), DEFAULT_SPARSE_MAX_BYTES);
                }
            }
            let mut short = base.clone();
            short.truncate(pos);
            let _ = count_value(&short);
            let _ = add_element(&mut short, b"k", DEFAULT_SPARSE_MAX_BYTES);
        }
    }

    #[test]
    fn cache_bytes_follow_redis() {
        assert_eq!(cached(&new_value()), Some(0));
        let mut v = sparse_with(&["a"]);
        assert_eq!(cached(&v), None, "a sparse update invalidates the cache");
        assert_eq!(cached(&v), None);
        set_cached(&mut v, 3);
        assert_eq!(cached(&v), Some(3));
        assert_eq!(v[15], 0);
    }
}
