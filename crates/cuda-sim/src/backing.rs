//! The bytes of one device allocation, kept in chunks that are stored only once they
//! hold differing bytes.
//!
//! A chunk whose bytes are all equal (fresh memory, or memory a memset or a copy of
//! such a chunk filled whole) is one byte. The GPU tests keep streams busy with
//! device-to-device copies of 256 MiB between buffers that were never written; those
//! cost neither memory nor time here, while a buffer the host filled holds its bytes.

use std::sync::{Mutex, MutexGuard};

use crate::table::lock;

/// Bytes per chunk.
pub const CHUNK: usize = 64 << 10;

/// One chunk: all one byte, or its bytes.
enum Chunk {
    Uniform(u8),
    Bytes(Box<[u8]>),
}

impl Chunk {
    /// The chunk's bytes, made writable (a uniform chunk is spelled out first).
    fn bytes(&mut self) -> &mut [u8] {
        if let Chunk::Uniform(b) = *self {
            *self = Chunk::Bytes(vec![b; CHUNK].into_boxed_slice());
        }
        match self {
            Chunk::Bytes(v) => v,
            Chunk::Uniform(_) => unreachable!("spelled out above"),
        }
    }
}

/// An allocation's bytes.
pub struct Backing {
    len: usize,
    chunks: Mutex<Vec<Chunk>>,
}

/// A piece of a range that lies inside one chunk: (chunk index, offset in it, length).
fn pieces(offset: usize, len: usize) -> impl Iterator<Item = (usize, usize, usize)> {
    let end = offset + len;
    let mut at = offset;
    std::iter::from_fn(move || {
        if at >= end {
            return None;
        }
        let (c, o) = (at / CHUNK, at % CHUNK);
        let n = (CHUNK - o).min(end - at);
        at += n;
        Some((c, o, n))
    })
}

impl Backing {
    /// `len` bytes, all `fresh`.
    pub fn new(len: usize, fresh: u8) -> Backing {
        let count = len.div_ceil(CHUNK);
        let mut chunks = Vec::new();
        chunks.resize_with(count, || Chunk::Uniform(fresh));
        Backing {
            len,
            chunks: Mutex::new(chunks),
        }
    }

    /// The allocation's length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    fn chunks(&self) -> MutexGuard<'_, Vec<Chunk>> {
        lock(&self.chunks)
    }

    /// Copies `len` bytes from `offset` into `dst`.
    ///
    /// # Safety
    /// 1. `dst` is valid for writes of `len` bytes and overlaps no other allocation's
    ///    backing (it is host memory).
    /// 2. `offset + len <= self.len()`.
    pub unsafe fn read(&self, offset: usize, dst: *mut u8, len: usize) {
        let chunks = self.chunks();
        let mut out = dst;
        for (c, o, n) in pieces(offset, len) {
            match &chunks[c] {
                // SAFETY: `out..out + n` lies inside `dst..dst + len` (condition 1).
                Chunk::Uniform(b) => unsafe { std::ptr::write_bytes(out, *b, n) },
                // SAFETY: as above; `o + n <= CHUNK` by `pieces`, and the chunk is ours.
                Chunk::Bytes(v) => unsafe {
                    std::ptr::copy_nonoverlapping(v.as_ptr().add(o), out, n)
                },
            }
            // SAFETY: stays within (or one past) `dst..dst + len`.
            out = unsafe { out.add(n) };
        }
    }

    /// Copies `len` bytes from `src` to `offset`.
    ///
    /// # Safety
    /// 1. `src` is valid for reads of `len` bytes (host memory).
    /// 2. `offset + len <= self.len()`.
    pub unsafe fn write(&self, offset: usize, src: *const u8, len: usize) {
        let mut chunks = self.chunks();
        let mut from = src;
        for (c, o, n) in pieces(offset, len) {
            let bytes = chunks[c].bytes();
            // SAFETY: `from..from + n` lies inside `src..src + len` (condition 1); the
            // chunk's bytes are ours and hold `o + n` bytes.
            unsafe { std::ptr::copy_nonoverlapping(from, bytes.as_mut_ptr().add(o), n) };
            // SAFETY: stays within (or one past) `src..src + len`.
            from = unsafe { from.add(n) };
        }
    }

    /// Fills `count` elements of `pattern.len()` bytes from `offset` with `pattern`.
    /// `offset + count * pattern.len() <= self.len()`.
    pub fn fill(&self, offset: usize, count: usize, pattern: &[u8]) {
        let len = count * pattern.len();
        let uniform = pattern.iter().all(|&b| b == pattern[0]);
        let mut chunks = self.chunks();
        for (c, o, n) in pieces(offset, len) {
            if uniform && n == CHUNK {
                chunks[c] = Chunk::Uniform(pattern[0]);
                continue;
            }
            let bytes = chunks[c].bytes();
            // The pattern's phase at this piece's first byte.
            let phase = (c * CHUNK + o - offset) % pattern.len();
            for (k, b) in bytes[o..o + n].iter_mut().enumerate() {
                *b = pattern[(phase + k) % pattern.len()];
            }
        }
    }

    /// Copies `len` bytes from `src` at `src_offset` to `self` at `dst_offset` (the
    /// two may be the same allocation; overlapping ranges copy as `memmove` does).
    /// Both ranges lie inside their allocations.
    pub fn copy_from(&self, dst_offset: usize, src: &Backing, src_offset: usize, len: usize) {
        if std::ptr::eq(self, src) {
            let mut chunks = self.chunks();
            let mut tmp = vec![0u8; len.min(CHUNK)];
            // memmove: copy back to front when the destination lies after the source.
            let starts: Vec<usize> = (0..len).step_by(CHUNK).collect();
            let order: Box<dyn Iterator<Item = &usize>> = if dst_offset > src_offset {
                Box::new(starts.iter().rev())
            } else {
                Box::new(starts.iter())
            };
            for &at in order {
                let n = CHUNK.min(len - at);
                read_locked(&chunks, src_offset + at, &mut tmp[..n]);
                write_locked(&mut chunks, dst_offset + at, &tmp[..n]);
            }
            return;
        }
        // Two allocations: lock in address order, so that two copies in opposite
        // directions cannot deadlock.
        let (mut dst, src_chunks);
        if (self as *const Backing) < (src as *const Backing) {
            dst = self.chunks();
            src_chunks = src.chunks();
        } else {
            src_chunks = src.chunks();
            dst = self.chunks();
        }
        let mut done = 0;
        while done < len {
            let (sc, so) = ((src_offset + done) / CHUNK, (src_offset + done) % CHUNK);
            let (dc, doff) = ((dst_offset + done) / CHUNK, (dst_offset + done) % CHUNK);
            let n = (CHUNK - so).min(CHUNK - doff).min(len - done);
            match &src_chunks[sc] {
                Chunk::Uniform(b) if n == CHUNK => dst[dc] = Chunk::Uniform(*b),
                Chunk::Uniform(b) => dst[dc].bytes()[doff..doff + n].fill(*b),
                Chunk::Bytes(v) => dst[dc].bytes()[doff..doff + n].copy_from_slice(&v[so..so + n]),
            }
            done += n;
        }
    }
}

fn read_locked(chunks: &[Chunk], offset: usize, out: &mut [u8]) {
    let mut at = 0;
    for (c, o, n) in pieces(offset, out.len()) {
        match &chunks[c] {
            Chunk::Uniform(b) => out[at..at + n].fill(*b),
            Chunk::Bytes(v) => out[at..at + n].copy_from_slice(&v[o..o + n]),
        }
        at += n;
    }
}

fn write_locked(chunks: &mut [Chunk], offset: usize, data: &[u8]) {
    let mut at = 0;
    for (c, o, n) in pieces(offset, data.len()) {
        chunks[c].bytes()[o..o + n].copy_from_slice(&data[at..at + n]);
        at += n;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn contents(b: &Backing) -> Vec<u8> {
        let mut v = vec![0u8; b.len()];
        // SAFETY: `v` holds the whole allocation.
        unsafe { b.read(0, v.as_mut_ptr(), v.len()) };
        v
    }

    #[test]
    fn writes_fills_and_copies_land_where_asked() {
        let len = 3 * CHUNK + 123;
        let a = Backing::new(len, 0);
        let data: Vec<u8> = (0..len).map(|i| (i * 7 + 3) as u8).collect();
        // SAFETY: `data` holds `len` bytes.
        unsafe { a.write(0, data.as_ptr(), len) };
        assert_eq!(contents(&a), data);

        let b = Backing::new(len, 0xAA);
        assert!(contents(&b).iter().all(|&x| x == 0xAA));
        b.copy_from(10, &a, CHUNK - 5, 2 * CHUNK);
        let got = contents(&b);
        assert_eq!(&got[10..10 + 2 * CHUNK], &data[CHUNK - 5..3 * CHUNK - 5]);
        assert!(got[..10]
            .iter()
            .chain(&got[10 + 2 * CHUNK..])
            .all(|&x| x == 0xAA));

        b.fill(1, 5, &[1, 2, 3, 4]);
        assert_eq!(
            &contents(&b)[..22],
            &[
                0xAA,
                1,
                2,
                3,
                4,
                1,
                2,
                3,
                4,
                1,
                2,
                3,
                4,
                1,
                2,
                3,
                4,
                1,
                2,
                3,
                4,
                data[CHUNK - 5 + 11]
            ]
        );

        // Within one allocation, overlapping both ways.
        let c = Backing::new(len, 0);
        // SAFETY: as above.
        unsafe { c.write(0, data.as_ptr(), len) };
        c.copy_from(100, &c, 0, 2 * CHUNK);
        let mut want = data.clone();
        want.copy_within(0..2 * CHUNK, 100);
        assert_eq!(contents(&c), want);
        c.copy_from(0, &c, 100, 2 * CHUNK);
        want.copy_within(100..100 + 2 * CHUNK, 0);
        assert_eq!(contents(&c), want);
    }

    #[test]
    fn whole_uniform_chunks_stay_uniform() {
        let a = Backing::new(256 << 20, 0);
        let b = Backing::new(256 << 20, 0);
        b.copy_from(0, &a, 0, 256 << 20);
        b.fill(0, 256 << 20, &[0]);
        assert!(lock(&b.chunks)
            .iter()
            .all(|c| matches!(c, Chunk::Uniform(0))));
    }
}
