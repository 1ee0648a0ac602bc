//! How a host copy writes its bytes into or out of pinned memory: ordinary or
//! streaming stores ([`streams`]), and the public [`copy_for_dma`].
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
//! like a cure for the slow DMA described at `Copier::copy_out` (`crate::copy`). On the 16-core H200 host
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

use crate::StagingPod;
use cuda_core::{Error, Result};

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
mod tests {
    use super::*;

    #[test]
    fn both_copies_are_exact_at_every_alignment() {
        let src: Vec<u8> = (0..20_000u32).map(|i| (i * 31 + 7) as u8).collect();
        for &len in &[
            0usize, 1, 63, 64, 65, 4095, 4096, 4097, 10_000, 12_289, 19_000,
        ] {
            for so in [0usize, 1, 3, 17] {
                for dof in [0usize, 5, 48] {
                    let mut dst = vec![0u8; 20_100];
                    // SAFETY: offsets + len stay inside both Vecs, which are distinct.
                    unsafe { copy(dst.as_mut_ptr().add(dof), src.as_ptr().add(so), len, true) };
                    assert_eq!(&dst[dof..dof + len], &src[so..so + len]);
                    assert!(dst[..dof].iter().all(|&b| b == 0));
                    assert!(dst[dof + len..].iter().all(|&b| b == 0));
                    let mut back = vec![0u8; len];
                    // SAFETY: as above.
                    unsafe { copy(back.as_mut_ptr(), dst.as_ptr().add(dof), len, false) };
                    assert_eq!(back, &src[so..so + len]);
                }
            }
        }
    }
}
