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
//! into the caller's memory measured slower (4.7 MiB: 245 against 203 µs).
//!
//! A copy-out that flushed the pinned lines it read (`clflushopt`), so the next DMA
//! into them need not invalidate them in the CPU caches, won back to back only with
//! 16 copy threads (4915200 B: 121-138 against 174-177 µs). With the default four
//! it lost: on the 16-core H200 host, back to back, variants interleaved, 4915200 B
//! took 386 µs flushing against 240 µs plain, and 1 MiB 81 against 69 µs, so it was
//! removed.
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

use crate::pool::{Pool, Share};
use crate::routing::Direction;
use crate::StagingPod;
use cuda_core::{Error, Result};

/// Below this, a host copy runs on the calling thread alone.
pub(crate) const PARALLEL_MIN_BYTES: usize = 64 << 10;
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
/// process-wide pool over up to `threads` threads (the caller included), `helpers`
/// of them pool helpers, awake or woken for it (`tuning::helpers_to_wake`).
#[derive(Clone, Copy)]
pub(crate) struct Copier<'a> {
    pool: Option<&'a Pool>,
    threads: usize,
    /// Pool helpers each copy enlists: free ones that are awake first, then parked
    /// ones it wakes.
    helpers: usize,
    /// Transfers come back to back (or low-latency mode keeps helpers awake).
    hot: bool,
    /// This is the transfer's last copy ([`Copier::last`]).
    last: bool,
}

impl Copier<'static> {
    /// Copies on the calling thread alone.
    pub(crate) fn solo() -> Copier<'static> {
        Copier {
            pool: None,
            threads: 1,
            helpers: 0,
            hot: false,
            last: false,
        }
    }

    /// For a transfer whose largest host copy is `copy_bytes`, moving `direction`,
    /// on up to `threads` threads (the caller included): with as many pool helpers
    /// as `tuning::helpers_to_wake` gives (none for a small copy after a gap), and no
    /// more than the machine has idle cores ([`Pool::idle_cores`]); `hot` when
    /// transfers come back to back or low-latency mode keeps helpers awake.
    pub(crate) fn for_transfer(
        threads: usize,
        copy_bytes: usize,
        direction: Direction,
        hot: bool,
    ) -> Copier<'static> {
        let threads = match direction {
            Direction::HostToDevice => threads,
            Direction::DeviceToHost => threads.min(crate::tuning::DOWNLOAD_THREADS),
        }
        .max(1);
        let mut helpers = crate::tuning::helpers_to_wake(copy_bytes, threads, direction, hot);
        if helpers == 0 {
            return Copier {
                threads,
                ..Copier::solo()
            };
        }
        let Some(pool) = crate::pool::global() else {
            return Copier {
                threads,
                ..Copier::solo()
            };
        };
        // The pool's own spinning helpers count as running, but are free to help.
        helpers = helpers.min(pool.idle_cores() + pool.awake());
        Copier {
            pool: Some(pool),
            threads,
            helpers,
            hot,
            last: false,
        }
    }
}

impl<'a> Copier<'a> {
    /// A copier over `pool` with up to `threads` threads, `helpers` of them pool
    /// helpers (for tests: what `for_transfer` would pick depends on the machine).
    #[cfg(test)]
    pub(crate) fn over(pool: &'a Pool, threads: usize, helpers: usize) -> Copier<'a> {
        Copier {
            pool: Some(pool),
            threads,
            helpers,
            hot: false,
            last: false,
        }
    }

    /// Pool helpers each copy enlists.
    pub(crate) fn helpers(&self) -> usize {
        self.helpers
    }

    /// The same, for the transfer's last copy when `last` (helpers park after it
    /// unless transfers come back to back).
    pub(crate) fn last(self, last: bool) -> Copier<'a> {
        Copier { last, ..self }
    }

    /// Wakes the helpers this transfer's copies will want now, ahead of its first
    /// copy (a pipelined download's first copy-out waits for a chunk's DMA): they
    /// spin for `tuning::PREWAKE_HOLD`, then park again if no copy came.
    pub(crate) fn prewake(&self) {
        if let Some(pool) = self.pool {
            if self.helpers > 0 {
                pool.heat(
                    self.helpers,
                    pool.deadline_in(crate::tuning::PREWAKE_HOLD),
                    true,
                );
            }
        }
    }

    /// The same, with at most `threads` threads.
    pub(crate) fn at_most(self, threads: usize) -> Copier<'a> {
        let threads = self.threads.min(threads).max(1);
        Copier {
            threads,
            helpers: self.helpers.min(threads - 1),
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
    /// shorter one bounds the copy).
    pub(crate) fn copy_out(&self, dst: &mut [u8], src: &[u8]) {
        self.run(dst, src, CopyKind::Plain);
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
        let kind = CopyKind::Plain;
        match self.split(len) {
            // SAFETY: `dst` holds `len` bytes (condition 1) and its `&mut` borrow
            // lasts until the pool returns; condition 2 passes through.
            Some((pool, threads)) => unsafe {
                pool.copy_after(
                    dst.as_mut_ptr(),
                    src,
                    len,
                    kind,
                    self.publication(threads),
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

    /// The pool and the threads (the caller included) a copy of `len` bytes is split
    /// over, or `None` when the calling thread copies it alone.
    fn split(&self, len: usize) -> Option<(&'a Pool, usize)> {
        let threads = copy_parts(len, self.threads);
        match self.pool {
            Some(pool) if threads > 1 && self.helpers > 0 => Some((pool, threads)),
            _ => None,
        }
    }

    /// The threads a copy of `len` bytes runs on, the caller included: 1, or the
    /// caller and the pool helpers it enlists ([`Copier::copy`] and the others split
    /// it this way). For the `tracing` feature's spans.
    #[cfg_attr(not(any(feature = "tracing", test)), allow(dead_code))]
    pub(crate) fn threads_for(&self, len: usize) -> usize {
        self.split(len)
            .map_or(1, |(_, threads)| 1 + self.enlisted(threads))
    }

    /// Pool helpers a copy split over `threads` threads enlists.
    fn enlisted(&self, threads: usize) -> usize {
        self.helpers.min(threads - 1)
    }

    /// How a copy split over `threads` threads is shared out.
    fn publication(&self, threads: usize) -> Share {
        Share {
            threads,
            helpers: self.enlisted(threads),
            // Helpers linger for the next copy of this transfer, and after its last
            // one only when the next transfer is coming right away.
            linger_ns: if self.last && !self.hot {
                0
            } else {
                crate::tuning::LINGER.as_nanos() as u64
            },
            // Helpers woken for this transfer arrive tens of µs late: small parts
            // leave them work. Spinning ones take theirs at once, and each part
            // claimed is a cache line passed between cores.
            parts_per_thread: if self.hot {
                1
            } else {
                crate::tuning::PARTS_PER_THREAD
            },
        }
    }

    /// Copies `kind`-wise, split over the pool when the copy is large enough and
    /// helpers are allowed, else on the calling thread.
    fn run(&self, dst: &mut [u8], src: &[u8], kind: CopyKind) {
        let len = dst.len().min(src.len());
        match self.split(len) {
            Some((pool, threads)) => {
                // SAFETY: both slices hold `len` bytes; `&mut` and `&` cannot overlap;
                // the borrows last until the pool returns, every part done.
                unsafe {
                    pool.copy(
                        dst.as_mut_ptr(),
                        src.as_ptr(),
                        len,
                        kind,
                        self.publication(threads),
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
