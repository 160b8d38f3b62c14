//! A reusable read buffer whose bytes start at an address aligned for `O_DIRECT`.

/// Alignment of direct I/O buffers in memory, and of direct writes' offsets and lengths. 4096 covers devices
/// with 512-byte and 4096-byte logical blocks. Direct reads round their offsets and lengths to the alignment
/// the file system reports for the file (`statx`'s `STATX_DIOALIGN`, usually 512), and to this where it
/// reports none.
pub const DIRECT_IO_ALIGN: usize = 4096;

/// A growable buffer for positional reads, reused across reads so that the read path does not allocate
/// once it has grown to its working size. Its storage starts at a [`DIRECT_IO_ALIGN`]-aligned address;
/// [`AlignedBuf::data`] is the part the last read filled.
#[derive(Default)]
pub struct AlignedBuf {
    mem: Vec<u8>,
    /// Index of the first aligned byte of `mem` (fixed while `mem` is not reallocated).
    base: usize,
    /// `data()` is `mem[base + start .. base + start + len]`.
    start: usize,
    len: usize,
}

impl std::fmt::Debug for AlignedBuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AlignedBuf").field("capacity", &self.capacity()).field("len", &self.len).finish()
    }
}

impl AlignedBuf {
    /// An empty buffer (allocates on first use).
    pub fn new() -> AlignedBuf {
        AlignedBuf::default()
    }

    /// Bytes the buffer can hold from its aligned start without growing.
    pub fn capacity(&self) -> usize {
        self.mem.len().saturating_sub(self.base)
    }

    /// Makes room for `total` bytes from the aligned start and returns them for a read to fill, recording
    /// that afterwards `data()` will be the `len` bytes at `start` of them (REQUIRES: `start + len <= total`).
    /// Grows (never shrinks) the allocation; the contents are whatever the previous reads left.
    pub fn prepare(&mut self, total: usize, start: usize, len: usize) -> &mut [u8] {
        debug_assert!(start.saturating_add(len) <= total);
        if self.capacity() < total {
            // Replace rather than resize: the old contents are not needed and the new block must be aligned.
            self.mem = Vec::new();
            self.mem = vec![0u8; total + DIRECT_IO_ALIGN];
            self.base = (self.mem.as_ptr() as usize).wrapping_neg() % DIRECT_IO_ALIGN;
        }
        self.start = start.min(total);
        self.len = len.min(total - self.start);
        &mut self.mem[self.base..self.base + total]
    }

    /// Prepares a plain read of `len` bytes at the aligned start (no rounding) and returns them to fill;
    /// `data()` is then those bytes.
    pub fn fill(&mut self, len: usize) -> &mut [u8] {
        self.prepare(len, 0, len)
    }

    /// The bytes the last read filled (empty before any).
    pub fn data(&self) -> &[u8] {
        let from = self.base + self.start;
        self.mem.get(from..from + self.len).unwrap_or_default()
    }

    /// Forgets the last read's bytes (`data()` becomes empty), keeping the allocation.
    pub fn clear(&mut self) {
        self.len = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn storage_is_aligned_and_reused() {
        let mut b = AlignedBuf::new();
        assert!(b.data().is_empty());
        let s = b.prepare(10_000, 100, 50);
        assert_eq!(s.len(), 10_000);
        assert_eq!(s.as_ptr() as usize % DIRECT_IO_ALIGN, 0);
        s[100..150].copy_from_slice(&[7u8; 50]);
        assert_eq!(b.data(), &[7u8; 50][..]);
        let cap = b.capacity();
        let p = b.fill(4096).as_ptr();
        assert_eq!(p as usize % DIRECT_IO_ALIGN, 0);
        assert_eq!(b.capacity(), cap, "a smaller read reuses the allocation");
        assert_eq!(b.data().len(), 4096);
        b.clear();
        assert!(b.data().is_empty());
        assert_eq!(b.prepare(1 << 20, 0, 1 << 20).as_ptr() as usize % DIRECT_IO_ALIGN, 0);
    }
}
