//! Asking the CPU to fetch memory for writing ahead of a copy into it.
//!
//! A gated copy-out's helpers (`pool/gate.rs`) prefetch their part of the
//! destination while the DMA they wait for is still running, so the copy that
//! follows writes lines already owned by their cache. On x86-64 this is
//! `prefetchw` where the CPU has it (CPUID `0x8000_0001`, ECX bit 8, asked once),
//! else `prefetcht0`; elsewhere nothing. A prefetch never faults and changes no
//! memory.

/// Bytes between two prefetches: one cache line.
const LINE_BYTES: usize = 64;

/// Asks the CPU to bring `[ptr, ptr + len)` into this core's cache, for writing
/// where it can.
pub(crate) fn prefetch_for_write(ptr: *const u8, len: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        let write = has_prefetchw();
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

/// Whether the CPU has `prefetchw` (CPUID `0x8000_0001`, ECX bit 8), asked once.
#[cfg(target_arch = "x86_64")]
fn has_prefetchw() -> bool {
    static HAS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *HAS.get_or_init(|| {
        // Leaf 0x8000_0000 reports the highest extended leaf. Safe intrinsics from
        // Rust 1.94 on, `unsafe` before: see `copy::has_clflushopt`.
        #[allow(unused_unsafe)]
        // SAFETY: every x86-64 CPU has the CPUID instruction.
        unsafe {
            std::arch::x86_64::__cpuid(0x8000_0000).eax >= 0x8000_0001
                && std::arch::x86_64::__cpuid(0x8000_0001).ecx & (1 << 8) != 0
        }
    })
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

    /// `prefetchw` is used only where the kernel reports it too (Linux, x86-64: the
    /// flag is `3dnowprefetch`). Not the other way round: Linux reports the flag
    /// on every 64-bit AMD CPU, even where a hypervisor masks the CPUID bit.
    #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
    #[test]
    fn prefetchw_is_used_only_where_the_kernel_reports_it() {
        let info = std::fs::read_to_string("/proc/cpuinfo").expect("Linux has /proc/cpuinfo");
        let flags = info
            .lines()
            .find(|l| l.starts_with("flags"))
            .unwrap_or_default();
        let kernel = flags.split_whitespace().any(|f| f == "3dnowprefetch");
        assert!(
            !has_prefetchw() || kernel,
            "CPUID says prefetchw, /proc/cpuinfo does not"
        );
    }
}
