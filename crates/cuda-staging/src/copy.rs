//! Host copies into and out of pinned memory.
//!
//! Into pinned memory that the DMA engine reads next, uploads of 32 KiB and more use
//! non-temporal (streaming) stores: bytes written with ordinary stores sit dirty in
//! the CPU caches and the following DMA pays for snooping them. On the 32-core H200 host
//! (one thread, copy plus DMA, `copy_probe stores`, five runs) streaming stores were
//! never more than 0.1 µs behind from 32 KiB: up to 4 µs ahead from 32 to 150 KiB,
//! 1.9 to 6.1 µs ahead at 256 and 512 KiB. Under 32 KiB they lost by up to 5.7 µs in
//! two runs of three (24 KiB: 15.6-16.2 against 9.9-11.3 µs) and tied in the third,
//! so smaller uploads use ordinary stores ([`STREAMING_MIN_BYTES`]).
//!
//! Out of pinned memory (downloads) the copy uses ordinary stores: streaming ones
//! into the caller's memory measured slower (4.7 MiB: 245 against 203 µs). In a
//! tight loop, a pipelined download's copy-out also flushes the pinned lines it read
//! ([`copy_out`]), where the CPU has `clflushopt` (asked once, through CPUID).
//!
//! x86-64 always has SSE2's `movntdq`; elsewhere every copy is a plain one. Wider
//! streaming stores bought nothing on our host: 64 KiB at 19.5 GB/s with SSE2, 19.1
//! with AVX2, 20.1 with AVX-512, so SSE2 it stays, with no feature detection.
//!
//! The window is ordinary pinned memory, not write-combined
//! (`CU_MEMHOSTALLOC_WRITECOMBINED`, read back with `movntdqa` streaming loads). A
//! DMA into write-combined memory finds no cached lines to invalidate, so it looked
//! like a cure for the slow DMA described at [`copy_out`]. On the 16-core H200 host
//! (one thread, p50 of 200, two runs) it changed nothing:
//!
//! | | ordinary pinned | write-combined |
//! |---|---:|---:|
//! | DMA of 1 MiB, nothing cached | 26.2, 27.1 µs | 26.3, 27.4 µs |
//! | download of 1 MiB, DMA then copy-out | 70.9, 80.0 µs | 97.0, 105.9 µs |
//! | download of 4915200 B | 499.6, 502.6 µs | 532.4, 535.7 µs |
//! | download of 16 MiB | 1716, 2022 µs | 1818, 2351 µs |
//!
//! Plain loads from the write-combined buffer ran at cache speed (1 MiB in
//! 36-45 µs), so this guest maps it write-back. A DMA into 1 MiB that the CPU
//! had just read took 43.4 and 47.7 µs, against 26.2 and 27.1 µs.

use crate::pool::Pool;
use crate::StagingPod;
use cuda_core::{Error, Result};

/// Below this, a host copy runs on the calling thread alone.
const PARALLEL_MIN_BYTES: usize = 64 << 10;
/// Each extra copy thread gets at least this much.
const PARALLEL_PART_MIN_BYTES: usize = 16 << 10;

/// The threads a host copy of `len` bytes is split over when up to `threads` may
/// take part (the caller included): one below [`PARALLEL_MIN_BYTES`], else one per
/// [`PARALLEL_PART_MIN_BYTES`], at most `threads`.
pub(crate) fn copy_parts(len: usize, threads: usize) -> usize {
    if len < PARALLEL_MIN_BYTES {
        1
    } else {
        (len / PARALLEL_PART_MIN_BYTES).clamp(1, threads.max(1))
    }
}

/// How one transfer's host copies run: on the calling thread, or split with the
/// process-wide pool over up to `threads` threads (the caller included).
#[derive(Clone, Copy)]
pub(crate) struct Copier<'a> {
    pool: Option<&'a Pool>,
    threads: usize,
    /// Transfers are coming back to back: wake parked helpers whatever the size.
    back_to_back: bool,
    /// Copy-outs flush what they read (see [`copy_out`]).
    flush_copy_out: bool,
}

impl Copier<'static> {
    /// Copies on up to `threads` threads: with the process-wide pool when more than
    /// one, else on the calling thread alone.
    pub(crate) fn with_threads(threads: usize) -> Copier<'static> {
        Copier {
            pool: if threads > 1 {
                crate::pool::global().map(|p| &**p)
            } else {
                None
            },
            threads: threads.max(1),
            back_to_back: false,
            flush_copy_out: false,
        }
    }
}

impl<'a> Copier<'a> {
    /// Whether a helper thread is awake to take part of a copy now.
    pub(crate) fn helpers_awake(&self) -> bool {
        self.pool.is_some_and(|p| p.awake() > 0)
    }

    /// The same, for a transfer that is `back_to_back` with the ones before it:
    /// then every split copy wakes parked helpers (they are spinning for the next
    /// ones), where otherwise only copies of at least the pool's wake size do.
    pub(crate) fn back_to_back(self, back_to_back: bool) -> Copier<'a> {
        Copier {
            back_to_back,
            ..self
        }
    }

    /// The same, with copy-outs that flush the pinned lines they read when `flush`
    /// (see [`copy_out`] for when that pays).
    pub(crate) fn flushing(self, flush: bool) -> Copier<'a> {
        Copier {
            flush_copy_out: flush,
            ..self
        }
    }

    /// The same, with at most `threads` threads.
    pub(crate) fn at_most(self, threads: usize) -> Copier<'a> {
        Copier {
            threads: self.threads.min(threads).max(1),
            ..self
        }
    }

    /// Copies `src` into `dst` (equal lengths; a shorter one bounds the copy), with
    /// streaming stores when `streaming`.
    pub(crate) fn copy(&self, dst: &mut [u8], src: &[u8], streaming: bool) {
        let kind = if streaming {
            CopyKind::Streaming
        } else {
            CopyKind::Plain
        };
        self.run(dst, src, kind);
    }

    /// Copies `src`, pinned memory a DMA just filled, into `dst` (equal lengths; a
    /// shorter one bounds the copy), flushing what it read when so configured
    /// ([`Copier::flushing`]).
    pub(crate) fn copy_out(&self, dst: &mut [u8], src: &[u8]) {
        self.run(dst, src, self.out_kind());
    }

    /// How a copy-out copies: flushing what it read when so configured.
    fn out_kind(&self) -> CopyKind {
        if self.flush_copy_out {
            CopyKind::OutOfPinned
        } else {
            CopyKind::Plain
        }
    }

    /// Copies `len` bytes of pinned memory at `src`, which a DMA is filling, into
    /// `dst[..len]` once `landed` (the wait for that DMA) returns `Ok`; returns its
    /// error, copying nothing, when it fails. Split over the pool, the copy is
    /// published before `landed` runs, so the helpers prefetch their part of `dst`
    /// during the DMA and start the moment it lands (`pool/gate.rs`).
    ///
    /// # Safety
    /// 1. `len <= dst.len()`.
    /// 2. Once `landed` returned `Ok`, `src` is readable for `len` bytes and nothing
    ///    writes it until this returns; it does not overlap `dst`.
    pub(crate) unsafe fn copy_out_after(
        &self,
        dst: &mut [u8],
        src: *const u8,
        len: usize,
        landed: impl FnOnce() -> Result<()>,
    ) -> Result<()> {
        let kind = self.out_kind();
        let parts = copy_parts(len, self.threads);
        match self.pool {
            // SAFETY: `dst` holds `len` bytes (condition 1) and its `&mut` borrow
            // lasts until the pool returns; condition 2 passes through.
            Some(pool) if parts > 1 => unsafe {
                pool.copy_after(
                    dst.as_mut_ptr(),
                    src,
                    len,
                    kind,
                    parts,
                    self.back_to_back,
                    landed,
                )
            },
            _ => {
                landed()?;
                // SAFETY: as above; `landed` returned `Ok`.
                unsafe { kind.copy(dst.as_mut_ptr(), src, len) };
                Ok(())
            }
        }
    }

    /// Copies `kind`-wise, split over the pool when the copy is large enough and
    /// helpers are allowed, else on the calling thread.
    fn run(&self, dst: &mut [u8], src: &[u8], kind: CopyKind) {
        let len = dst.len().min(src.len());
        let parts = copy_parts(len, self.threads);
        match self.pool {
            Some(pool) if parts > 1 => {
                // SAFETY: both slices hold `len` bytes; `&mut` and `&` cannot overlap;
                // the borrows last until the pool returns, every part done.
                unsafe {
                    pool.copy(
                        dst.as_mut_ptr(),
                        src.as_ptr(),
                        len,
                        kind,
                        parts,
                        self.back_to_back,
                    )
                }
            }
            // SAFETY: as above.
            _ => unsafe { kind.copy(dst.as_mut_ptr(), src.as_ptr(), len) },
        }
    }
}

/// How a host copy writes its bytes and leaves its source.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CopyKind {
    /// Ordinary loads and stores.
    Plain,
    /// Streaming stores (into pinned memory the DMA engine reads next).
    Streaming,
    /// Out of pinned memory the DMA engine writes next, flushing what it read
    /// ([`copy_out`]).
    OutOfPinned,
}

impl CopyKind {
    /// Copies `len` bytes this way.
    ///
    /// # Safety
    /// 1. As [`copy`].
    pub(crate) unsafe fn copy(self, dst: *mut u8, src: *const u8, len: usize) {
        // SAFETY: condition 1 passes through.
        unsafe {
            match self {
                CopyKind::Plain => copy(dst, src, len, false),
                CopyKind::Streaming => copy(dst, src, len, true),
                CopyKind::OutOfPinned => copy_out(dst, src, len),
            }
        }
    }
}

/// Copies `src` into `dst` the way [`StagingBuffer::upload`](crate::StagingBuffer::upload)
/// writes its pinned memory: from 32 KiB with non-temporal (streaming) stores where
/// the CPU has them (x86-64), so the DMA that reads `dst` next finds no dirty cache
/// lines to snoop; below that with ordinary stores, which the driver's handling of
/// small copies prefers. For a producer filling the slice of
/// [`StagingBuffer::upload_with`](crate::StagingBuffer::upload_with) from memory it
/// already holds; elsewhere a plain copy.
///
/// Lengths that differ are an [`Error::LengthMismatch`]; nothing is copied.
///
/// ```
/// let src = vec![1.5f32; 4096];
/// let mut dst = vec![0f32; 4096];
/// cuda_staging::copy_for_dma(&mut dst, &src).unwrap();
/// assert_eq!(dst, src);
/// assert!(cuda_staging::copy_for_dma(&mut dst[..10], &src).is_err());
/// ```
pub fn copy_for_dma<T: StagingPod>(dst: &mut [T], src: &[T]) -> Result<()> {
    same_lengths("copy_for_dma", dst.len(), src.len())?;
    let bytes = std::mem::size_of_val(src);
    // SAFETY: both slices hold `bytes` bytes; `&mut` and `&` cannot overlap.
    unsafe {
        copy(
            dst.as_mut_ptr().cast(),
            src.as_ptr().cast(),
            bytes,
            streams(bytes),
        )
    };
    Ok(())
}

/// `src` into `dst` always with streaming stores (x86-64, from 4 KiB), whatever the
/// size: for `copy_probe`, which times them against ordinary stores. Not part of the
/// API. Lengths that differ are an [`Error::LengthMismatch`]; nothing is copied.
#[doc(hidden)]
pub fn copy_streaming(dst: &mut [u8], src: &[u8]) -> Result<()> {
    same_lengths("copy_streaming", dst.len(), src.len())?;
    // SAFETY: both slices hold `src.len()` bytes; `&mut` and `&` cannot overlap.
    unsafe { copy(dst.as_mut_ptr(), src.as_ptr(), src.len(), true) };
    Ok(())
}

fn same_lengths(op: &'static str, dst: usize, src: usize) -> Result<()> {
    if dst == src {
        return Ok(());
    }
    Err(Error::LengthMismatch {
        op,
        host: src,
        expected: dst,
    })
}

/// Uploads (and pipeline chunks) from this size write their pinned bytes with
/// streaming stores, smaller ones with ordinary stores; see the module notes.
pub(crate) const STREAMING_MIN_BYTES: usize = 32 << 10;

/// Whether an upload of `bytes` writes its pinned bytes with streaming stores.
pub(crate) fn streams(bytes: usize) -> bool {
    bytes >= STREAMING_MIN_BYTES
}

/// Copies `len` bytes out of pinned memory that the DMA engine writes again next
/// time, and flushes each source line from the CPU caches after copying it
/// (`clflushopt`, where the CPU has it; a plain copy elsewhere). Used only for
/// pipelined downloads under 8 MiB that fit the pinned window, in a tight loop
/// ([`Copier::flushing`]).
///
/// A DMA into host lines the CPU still caches is slow: the device's writes must
/// invalidate them. On the 16-core H200 host (`frames` bench, `chunks` section,
/// p50), `download_into` of 1 MiB took 26-27 µs back to back and 43-47 µs when
/// the caller had read each result. `download`'s copy-out reads every line of the
/// window, so back to back each next download paid that. In one run, two builds
/// alternating, twice each (`download` with 16 threads into one reused destination,
/// no other transfer in between):
///
/// | bytes | plain copy-out | flushing copy-out |
/// |---:|---:|---:|
/// | 1 MiB | 43.5, 42.3 µs | 37.4, 37.3 µs |
/// | 2 MiB | 76.6, 74.6 µs | 67.6, 67.7 µs |
/// | 4915200 | 176.6, 174.4 µs | 138.0, 121.4 µs |
///
/// The flush costs more than it saves when the lines had left the caches anyway
/// or few threads copy: in the same run, the same downloads interleaved with nine
/// other buffers' took 114.5-115.4 µs plain against 130.3-155.8 µs flushing at
/// 4915200 B, and one download of 150528 B after a 2 ms sleep 28.9-32.0 µs
/// against 38.7-38.8 µs. Flushing every copy-out of three or more transfers in a
/// row (the full bench at a0f175b) slowed back-to-back downloads of 4 to 64 KiB
/// (32 KiB: 14.8 µs against 10.8 µs at 4fe1619), of 16 MiB (551 against 476 µs)
/// and 32 MiB (1599 against 738 µs), where the copy-out of the reused window
/// slots, not the DMA, is the bottleneck, while 1 to 8 MiB gained (4 MiB: 121
/// against 187 µs). Hence only pipelined downloads that fit the window, in a
/// tight loop, and under 8 MiB, where the copy-out runs on fewer threads and the
/// flush slowed 16 MiB from 354 to 531 µs (`Plan::flushes_copy_out`).
/// (`prefetchnta` reads changed nothing, `cldemote` helped less than the flush.)
///
/// # Safety
/// 1. As [`copy`].
pub(crate) unsafe fn copy_out(dst: *mut u8, src: *const u8, len: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        if len >= 4096 && crate::cpu::has_clflushopt() {
            // SAFETY: condition 1 passes through; the CPU has `clflushopt`.
            unsafe { copy_out_flushing(dst, src, len) };
            return;
        }
    }
    // SAFETY: condition 1.
    unsafe { std::ptr::copy_nonoverlapping(src, dst, len) }
}

/// [`copy_out`] on x86-64: copies 4 KiB at a time, then flushes every cache line of
/// the source that the block touched.
///
/// # Safety
/// 1. As [`copy`].
/// 2. The CPU has `clflushopt`.
#[cfg(target_arch = "x86_64")]
unsafe fn copy_out_flushing(dst: *mut u8, src: *const u8, len: usize) {
    const BLOCK: usize = 4096;
    let mut off = 0;
    while off < len {
        let n = (len - off).min(BLOCK);
        // SAFETY: `off + n <= len` (condition 1).
        unsafe { std::ptr::copy_nonoverlapping(src.add(off), dst.add(off), n) };
        // Every line the block touched; a line shared with the next block is
        // flushed twice, which is harmless.
        let mut line = (src as usize + off) & !63;
        while line < src as usize + off + n {
            // SAFETY: the line holds at least one source byte, so it is mapped
            // (condition 1). `clflushopt` writes a dirty line back and drops it
            // from the caches without changing memory, so the partial first and
            // last lines, which may hold other bytes, keep their contents. The CPU
            // has the instruction (condition 2).
            unsafe {
                std::arch::asm!("clflushopt [{}]", in(reg) line, options(nostack, preserves_flags))
            };
            line += 64;
        }
        off += n;
    }
    // SAFETY: `sfence` has no preconditions; it orders the flushes before whatever
    // the caller does next (reporting the part done, queueing the next DMA).
    unsafe { std::arch::x86_64::_mm_sfence() };
}

/// Copies `len` bytes; with `streaming`, bypassing the caches where the CPU allows.
///
/// Streaming (non-temporal) stores are for destinations nobody reads soon from the
/// cache: pinned memory the DMA engine reads next. Below 4 KiB, and off x86-64, it
/// is a plain copy.
///
/// # Safety
/// 1. `src` is readable and `dst` writable for `len` bytes; the ranges do not overlap.
#[inline]
pub(crate) unsafe fn copy(dst: *mut u8, src: *const u8, len: usize, streaming: bool) {
    #[cfg(target_arch = "x86_64")]
    {
        if streaming && len >= 4096 {
            // SAFETY: condition 1 passes through.
            unsafe { copy_nt_x86_64(dst, src, len) };
            return;
        }
    }
    let _ = streaming;
    // SAFETY: condition 1.
    unsafe { std::ptr::copy_nonoverlapping(src, dst, len) }
}

/// # Safety
/// 1. As [`copy`].
#[cfg(target_arch = "x86_64")]
unsafe fn copy_nt_x86_64(dst: *mut u8, src: *const u8, len: usize) {
    use std::arch::x86_64::{__m128i, _mm_loadu_si128, _mm_sfence, _mm_stream_si128};

    // Head: plain copy up to the first 64-byte boundary of `dst`.
    let head = dst.align_offset(64).min(len);
    // SAFETY: `head <= len` (condition 1).
    unsafe { std::ptr::copy_nonoverlapping(src, dst, head) };
    let body = (len - head) / 64 * 64;
    let mut i = head;
    while i < head + body {
        // SAFETY: `i + 64 <= len`, so all loads and stores are in range (condition 1);
        // `dst + i` is 64-byte aligned, as `_mm_stream_si128` needs 16; loads are
        // unaligned loads. SSE2 is part of the x86-64 baseline.
        unsafe {
            let s = src.add(i).cast::<__m128i>();
            let d = dst.add(i).cast::<__m128i>();
            let a = _mm_loadu_si128(s);
            let b = _mm_loadu_si128(s.add(1));
            let c = _mm_loadu_si128(s.add(2));
            let e = _mm_loadu_si128(s.add(3));
            _mm_stream_si128(d, a);
            _mm_stream_si128(d.add(1), b);
            _mm_stream_si128(d.add(2), c);
            _mm_stream_si128(d.add(3), e);
        }
        i += 64;
    }
    // SAFETY: the tail `[i, len)` is in range (condition 1).
    unsafe { std::ptr::copy_nonoverlapping(src.add(i), dst.add(i), len - i) };
    // SAFETY: `sfence` has no preconditions; it orders the streaming stores before
    // whatever the caller does next (queueing the DMA that reads them).
    unsafe { _mm_sfence() };
}

#[cfg(test)]
mod tests;
