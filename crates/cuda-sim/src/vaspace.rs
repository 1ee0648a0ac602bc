//! Device addresses: a range of this process's address space reserved with no access
//! (`PROT_NONE`), from which device allocations take their addresses.
//!
//! Nothing is ever mapped there, so a host read or write through a device pointer
//! crashes (`SIGSEGV`) instead of passing, and no host allocation can ever take an
//! address that the simulator handed out as device memory: unified addressing holds,
//! and `cuPointerGetAttribute` can tell the two apart by address alone. The bytes of
//! device memory live elsewhere ([`crate::backing`]).
//!
//! Addresses are taken next-fit from a cursor that only moves forward until the
//! range is used up, so a freed address is not handed out again soon: a use after
//! free finds no allocation there and fails.

use std::collections::BTreeMap;
use std::ops::Range;

/// Bytes kept free after each allocation: neighbouring allocations never touch, so a
/// copy that runs past the end of one never lands in the next.
const GUARD_BYTES: u64 = 64 << 10;

/// Device allocations start at a multiple of this (the driver guarantees 256).
pub const ALIGN: u64 = 512;

/// One device's reserved range and the parts of it in use.
pub struct AddressSpace {
    range: Range<u64>,
    cursor: u64,
    /// Start to end (the end includes the guard) of every address range in use.
    used: BTreeMap<u64, u64>,
}

impl AddressSpace {
    /// Reserves `bytes` of address space (at least), or aborts: without it the
    /// simulator cannot keep device memory out of the host's reach.
    pub fn reserve(bytes: u64) -> AddressSpace {
        let len = bytes.next_multiple_of(1 << 21) as usize;
        // SAFETY: an anonymous, private, inaccessible mapping at an address the kernel
        // chooses: it overlaps nothing of this process and is never unmapped.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_NONE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            eprintln!(
                "cuda-sim: cannot reserve {len} bytes of address space for device memory: {}",
                std::io::Error::last_os_error()
            );
            std::process::abort();
        }
        let start = p as u64;
        AddressSpace {
            range: start..start + len as u64,
            cursor: start,
            used: BTreeMap::new(),
        }
    }

    /// Whether `addr` lies in this device's reserved range.
    pub fn contains(&self, addr: u64) -> bool {
        self.range.contains(&addr)
    }

    /// Takes an aligned address for `bytes`, or `None` when no gap is large enough.
    pub fn take(&mut self, bytes: u64) -> Option<u64> {
        let need = bytes.max(1).checked_add(GUARD_BYTES)?;
        let found = self
            .gap_from(self.cursor, need)
            .or_else(|| self.gap_from(self.range.start, need))?;
        self.used.insert(found, found + need);
        self.cursor = found + need;
        Some(found)
    }

    /// Gives back the address range that [`AddressSpace::take`] returned as `start`.
    pub fn give_back(&mut self, start: u64) {
        self.used.remove(&start);
    }

    /// The first aligned gap of `need` bytes at or after `from`.
    fn gap_from(&self, from: u64, need: u64) -> Option<u64> {
        let mut at = from.next_multiple_of(ALIGN);
        // A range that started before `from` may still cover it.
        if let Some((_, &end)) = self.used.range(..at).next_back() {
            at = at.max(end.next_multiple_of(ALIGN));
        }
        for (&start, &end) in self.used.range(at..) {
            if start.saturating_sub(at) >= need {
                break;
            }
            at = at.max(end.next_multiple_of(ALIGN));
        }
        (at.checked_add(need)? <= self.range.end).then_some(at)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_are_aligned_apart_and_not_soon_reused() {
        let mut s = AddressSpace::reserve(8 << 20);
        let a = s.take(100).unwrap();
        let b = s.take(1 << 20).unwrap();
        assert_eq!(a % ALIGN, 0);
        assert_eq!(b % ALIGN, 0);
        assert!(b >= a + 100 + GUARD_BYTES);
        s.give_back(a);
        let c = s.take(100).unwrap();
        assert!(c > b, "the cursor moves on: {a:#x} {b:#x} {c:#x}");
        // Filling up wraps around to the freed space.
        let mut rest = Vec::new();
        while let Some(p) = s.take(100) {
            rest.push(p);
        }
        assert!(
            rest.contains(&a),
            "once full, the freed first slot is used again"
        );
        assert!(rest.len() > 10);
        assert!(s.range.contains(&a) && !s.range.contains(&0));
    }
}
