//! What the CPU has, asked once through CPUID (x86-64): the instructions the host
//! copies use where they exist (`prefetchw` for the gated copy-out's prefetch).

/// Whether the CPU has `prefetchw` (CPUID `0x8000_0001`, ECX bit 8), asked once.
#[cfg(target_arch = "x86_64")]
pub(crate) fn has_prefetchw() -> bool {
    static HAS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    // Leaf 0x8000_0000 reports the highest extended leaf.
    *HAS.get_or_init(|| {
        cpuid(0x8000_0000).eax >= 0x8000_0001 && cpuid(0x8000_0001).ecx & (1 << 8) != 0
    })
}

/// CPUID `leaf`. The intrinsics are safe functions from Rust 1.94 on and `unsafe`
/// ones before (the workspace builds from 1.88), hence the allowed blocks.
#[cfg(target_arch = "x86_64")]
fn cpuid(leaf: u32) -> std::arch::x86_64::CpuidResult {
    #[allow(unused_unsafe)]
    // SAFETY: every x86-64 CPU has the CPUID instruction.
    unsafe {
        std::arch::x86_64::__cpuid(leaf)
    }
}

#[cfg(all(test, target_arch = "x86_64", target_os = "linux"))]
mod tests {
    use super::*;

    /// Whether the kernel lists `flag` for this CPU in `/proc/cpuinfo`.
    fn kernel_reports(flag: &str) -> bool {
        let info = std::fs::read_to_string("/proc/cpuinfo").expect("Linux has /proc/cpuinfo");
        let flags = info
            .lines()
            .find(|l| l.starts_with("flags"))
            .unwrap_or_default();
        flags.split_whitespace().any(|f| f == flag)
    }

    /// `prefetchw` is used only where the kernel reports it too (the flag is
    /// `3dnowprefetch`). Not the other way round: Linux reports the flag on every
    /// 64-bit AMD CPU, even where a hypervisor masks the CPUID bit.
    #[test]
    fn prefetchw_is_used_only_where_the_kernel_reports_it() {
        assert!(
            !has_prefetchw() || kernel_reports("3dnowprefetch"),
            "CPUID says prefetchw, /proc/cpuinfo does not"
        );
    }
}
