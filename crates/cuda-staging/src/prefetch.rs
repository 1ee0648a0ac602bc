//! Asking the CPU to fetch memory for writing ahead of a copy into it.
//!
//! A gated copy-out's helpers (`pool/gate.rs`) prefetch their part of the
//! destination while the DMA they wait for is still running, so the copy that
//! follows writes lines already owned by their cache. On x86-64 this is
//! `prefetchw` where the CPU has it (`cpu::has_prefetchw`),
//! else `prefetcht0`; elsewhere nothing. A prefetch never faults and changes no
//! memory.

/// Bytes between two prefetches: one cache line. Only x86-64 prefetches.
#[cfg(target_arch = "x86_64")]
const LINE_BYTES: usize = 64;

/// Asks the CPU to bring `[ptr, ptr + len)` into this core's cache, for writing
/// where it can.
pub(crate) fn prefetch_for_write(ptr: *const u8, len: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        let write = crate::cpu::has_prefetchw();
        let mut off = 0;
        while off < len {
            let p = ptr.wrapping_add(off);
            if write {
                // SAFETY: `prefetchw` reads and writes no memory and never faults,
                // whatever the address; the CPU has it (checked above).
                unsafe {
                    std::arch::asm!(
                        "prefetchw [{}]",
                        in(reg) p,
                        options(nostack, preserves_flags, readonly)
                    )
                };
            } else {
                // The intrinsic is a safe function from Rust 1.94 on and an `unsafe`
                // one before (the workspace builds from 1.88), hence the allowed block.
                #[allow(unused_unsafe)]
                // SAFETY: `prefetcht0` (SSE, in every x86-64 CPU) never faults.
                unsafe {
                    std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p.cast())
                };
            }
            off += LINE_BYTES;
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (ptr, len);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefetching_changes_nothing_and_never_faults() {
        let buf: Vec<u8> = (0..10_000u32).map(|i| (i * 7) as u8).collect();
        let before = buf.clone();
        prefetch_for_write(buf.as_ptr(), buf.len());
        prefetch_for_write(buf.as_ptr().wrapping_add(3), 5);
        prefetch_for_write(std::ptr::null(), 4096);
        assert_eq!(buf, before);
    }
}
