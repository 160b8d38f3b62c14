//! The bytes of a memtable's entries, bump-allocated from large chunks (RocksDB's and Pebble's arena): one
//! allocation per chunk instead of one per entry, and a flushed memtable frees a few chunks instead of every
//! entry. Per-entry allocations also kept memory resident: the flush thread frees what the writers allocated,
//! and the allocator's pages stay resident until their owner thread collects them
//! (docs/perf/memtable-arena.md).
//!
//! One of the engine's two modules with `unsafe` code (the other is `skiplist.rs`, whose nodes live here too): a
//! [`Span`] is a raw pointer into a chunk, so that skiplist nodes and the vector memtable's slots can hold
//! entries without a reference count.
//!
//! INVARIANT (kept by the memtable module): a [`Span`] is only reachable through something that holds the
//! [`Arena`] it came from alive: the memtable itself, or one of its iterators, which hold an `Arc` of it.
//! The bytes of a span are written once, by [`Arena::copy_in`], before the span is returned, and never again.

#![allow(unsafe_code)]

use parking_lot::Mutex;
use std::mem::MaybeUninit;
use std::ptr::NonNull;

/// Append-only storage for entries' bytes, freed all at once when it drops.
pub(super) struct Arena {
    chunk_size: usize,
    inner: Mutex<Chunks>,
}

struct Chunks {
    /// Every chunk, as `Box::into_raw` gave it; freed when the arena drops. Raw pointers, not boxes: moving a
    /// `Box` asserts it is the only pointer to its memory, and the spans point into it.
    all: Vec<*mut [MaybeUninit<u8>]>,
    /// The next free byte of the current chunk (dangling before the first chunk), and how many bytes follow it.
    next: NonNull<u8>,
    left: usize,
}

// SAFETY: the pointers refer to heap chunks the arena owns. Their bytes are written only through the disjoint
// regions `reserve` hands out, and the chunks are freed once, in `Drop`, which has `&mut`.
unsafe impl Send for Chunks {}

impl Arena {
    /// Chunks of a sixteenth of the write buffer, between 16 KiB and 4 MiB: a memtable is a few dozen chunks,
    /// and a small one (tests, a family with a tiny buffer) wastes little.
    pub(super) fn for_write_buffer(write_buffer_size: usize) -> Arena {
        Arena {
            chunk_size: (write_buffer_size / 16).clamp(16 << 10, 4 << 20),
            inner: Mutex::new(Chunks { all: Vec::new(), next: NonNull::dangling(), left: 0 }),
        }
    }

    /// Copies `parts`, concatenated, into bytes no other span shares.
    pub(super) fn copy_in(&self, parts: &[&[u8]]) -> Span {
        let len = parts.iter().map(|p| p.len()).sum::<usize>();
        let ptr = self.reserve(len);
        let mut at = 0;
        for part in parts {
            // SAFETY: `reserve` returned `len` bytes that no one else writes or reads until this span is
            // returned; the parts fill them exactly (`at + part.len() <= len`), and they cannot overlap the
            // region, which was never handed out before.
            unsafe { std::ptr::copy_nonoverlapping(part.as_ptr(), ptr.as_ptr().add(at), part.len()) };
            at += part.len();
        }
        Span { ptr, len }
    }

    /// `len` bytes that no other call returns, valid until the arena drops. An entry larger than a quarter of
    /// a chunk gets a chunk of its own, so the tail left unused when a chunk runs out stays under a quarter.
    fn reserve(&self, len: usize) -> NonNull<u8> {
        if len == 0 {
            return NonNull::dangling();
        }
        let mut c = self.inner.lock();
        if len > self.chunk_size / 4 {
            return c.push(len);
        }
        if c.left < len {
            c.next = c.push(self.chunk_size);
            c.left = self.chunk_size;
        }
        let p = c.next;
        // SAFETY: `left >= len` bytes follow `next` in the current chunk, so `p + len` is in it or one past
        // its end.
        c.next = unsafe { p.add(len) };
        c.left -= len;
        p
    }

    /// `len` bytes aligned to 8, that no other call returns, valid until the arena drops: a skiplist node
    /// and its entry (`skiplist.rs`). Like [`Arena::reserve`], a large request gets a chunk of its own.
    pub(super) fn reserve_aligned(&self, len: usize) -> NonNull<u8> {
        const ALIGN: usize = 8;
        let mut c = self.inner.lock();
        if len > self.chunk_size / 4 {
            let p = c.push(len + ALIGN - 1);
            let pad = p.as_ptr().align_offset(ALIGN);
            // SAFETY: the chunk has `len + ALIGN - 1` bytes and `pad < ALIGN`, so `p + pad + len` is in it or
            // one past its end.
            return unsafe { p.add(pad) };
        }
        let mut pad = c.next.as_ptr().align_offset(ALIGN);
        if c.left < pad + len {
            c.next = c.push(self.chunk_size);
            c.left = self.chunk_size;
            pad = c.next.as_ptr().align_offset(ALIGN);
        }
        // SAFETY: `pad < ALIGN` and `len <= chunk_size / 4`, so a fresh chunk has `pad + len` bytes, and an
        // old one was just checked to have them (`left >= pad + len`): `next + pad + len` is in the current
        // chunk or one past its end.
        let p = unsafe { c.next.add(pad) };
        c.next = unsafe { p.add(len) };
        c.left -= pad + len;
        p
    }

    /// Bytes taken from the allocator.
    #[cfg(test)]
    pub(super) fn allocated(&self) -> usize {
        self.inner.lock().all.iter().map(|c| c.len()).sum()
    }
}

impl Chunks {
    fn push(&mut self, len: usize) -> NonNull<u8> {
        let raw = Box::into_raw(Box::<[u8]>::new_uninit_slice(len));
        self.all.push(raw);
        // SAFETY: `Box::into_raw` never returns null.
        unsafe { NonNull::new_unchecked(raw.cast::<u8>()) }
    }
}

impl Drop for Chunks {
    fn drop(&mut self) {
        for c in self.all.drain(..) {
            // SAFETY: every chunk came from `Box::into_raw` and is freed only here, once.
            drop(unsafe { Box::from_raw(c) });
        }
    }
}

/// An entry's bytes in an [`Arena`]. See the module's invariant for how long they live.
#[derive(Clone, Copy)]
pub(super) struct Span {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: a span is a shared, read-only view of bytes written before it existed and never written again.
unsafe impl Send for Span {}
// SAFETY: as above: reading the same immutable bytes from several threads at once is safe.
unsafe impl Sync for Span {}

impl Span {
    #[inline]
    pub(super) fn bytes(&self) -> &[u8] {
        // SAFETY: `len` bytes at `ptr` were written by `Arena::copy_in` before this span existed and are never
        // written again; the arena holding them outlives every span (the module's invariant). A zero-length
        // span is a dangling, aligned pointer, which `from_raw_parts` accepts.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }

    #[inline]
    pub(super) fn len(&self) -> usize {
        self.len
    }

    /// The span of `len` bytes at `ptr`.
    ///
    /// # Safety
    /// The bytes are in an [`Arena`]'s chunk, were reserved by one call that gave them to no one else, are
    /// written before the span is read and never written again, and the module's invariant holds for the span.
    #[inline]
    pub(super) unsafe fn from_raw(ptr: NonNull<u8>, len: usize) -> Span {
        Span { ptr, len }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_keep_their_bytes_across_chunks_and_large_entries_get_their_own() {
        let a = Arena::for_write_buffer(0);
        assert_eq!(a.chunk_size, 16 << 10);
        let mut spans = Vec::new();
        for i in 0..2000u32 {
            let v = vec![(i % 251) as u8; (i % 37) as usize];
            spans.push((i, a.copy_in(&[&i.to_le_bytes(), &v])));
        }
        let big = vec![7u8; 5000];
        let b = a.copy_in(&[&big]);
        let empty = a.copy_in(&[&[], &[]]);
        for (i, s) in &spans {
            let bytes = s.bytes();
            assert_eq!(&bytes[..4], &i.to_le_bytes());
            assert!(bytes[4..].iter().all(|&x| x == (i % 251) as u8));
            assert_eq!(bytes.len(), 4 + (i % 37) as usize);
        }
        assert_eq!(b.bytes(), &big[..]);
        assert_eq!(empty.bytes(), b"");
        // 2000 entries of 4-40 bytes fill a few 16 KiB chunks; the 5000-byte entry (over a quarter chunk) has
        // its own allocation of exactly its size.
        let total: usize = spans.iter().map(|(_, s)| s.len()).sum();
        let allocated = a.allocated();
        assert!(allocated >= total + 5000, "{allocated} < {total} + 5000");
        assert!(allocated <= total + 5000 + 2 * (16 << 10), "{allocated} wastes more than two chunks");
        assert_eq!((allocated - 5000) % (16 << 10), 0);
    }

    #[test]
    fn chunk_size_follows_the_write_buffer_within_bounds() {
        assert_eq!(Arena::for_write_buffer(64 << 20).chunk_size, 4 << 20);
        assert_eq!(Arena::for_write_buffer(16 << 20).chunk_size, 1 << 20);
        assert_eq!(Arena::for_write_buffer(1 << 30).chunk_size, 4 << 20);
        assert_eq!(Arena::for_write_buffer(4096).chunk_size, 16 << 10);
    }

    #[test]
    fn concurrent_copies_get_disjoint_bytes() {
        let a = std::sync::Arc::new(Arena::for_write_buffer(0));
        let handles: Vec<_> = (0..4u8)
            .map(|t| {
                let a = a.clone();
                std::thread::spawn(move || {
                    (0..3000).map(|i| (i, a.copy_in(&[&[t; 9], &[i as u8; 3]]))).collect::<Vec<_>>()
                })
            })
            .collect();
        for (t, h) in handles.into_iter().enumerate() {
            for (i, s) in h.join().unwrap() {
                let mut want = vec![t as u8; 9];
                want.extend_from_slice(&[i as u8; 3]);
                assert_eq!(s.bytes(), &want[..]);
            }
        }
    }
}
