//! Whether a transfer's host memory is page-locked: the driver's answer
//! (`cuPointerGetAttributes`, about 0.1 µs), remembered per direction for the same
//! range for the next [`MEMO_USES`] transfers, which is safe either way: a wrong
//! answer only picks a slower route ([`crate::routing`]).

use std::ffi::c_void;

use cuda_core::{query_host_memory, Context, HostMemory};

use crate::direction::{Direction, PerDirection};

/// A buffer's memo of the last page-lock answers, one per direction.
#[derive(Clone, Debug, Default)]
pub(crate) struct PageLocks {
    memo: PerDirection<LockMemo>,
}

/// The last page-lock answer for one direction's host range.
#[derive(Clone, Copy, Debug, Default)]
struct LockMemo {
    addr: usize,
    bytes: usize,
    page_locked: bool,
    /// Answers served from the memo since the driver was last asked.
    served: u32,
}

/// The driver is asked again after this many answers from the memo.
const MEMO_USES: u32 = 64;

impl PageLocks {
    /// Whether `[host, host + bytes)` is page-locked, from the memo when the same
    /// range was asked about recently. A stale answer is safe either way: a
    /// page-locked range taken for pageable is staged, and a pageable one taken for
    /// page-locked goes through the driver's copy, which handles any memory; it only
    /// costs speed, for at most [`MEMO_USES`] transfers.
    pub(crate) fn page_locked(
        &mut self,
        ctx: &Context,
        direction: Direction,
        host: *const u8,
        bytes: usize,
    ) -> bool {
        let mut memo = self.memo.get(direction);
        if memo.addr == host as usize && memo.bytes == bytes && memo.served < MEMO_USES {
            memo.served += 1;
            self.memo.set(direction, memo);
            return memo.page_locked;
        }
        let page_locked = range_is_page_locked(ctx, host, bytes);
        self.memo.set(
            direction,
            LockMemo {
                addr: host as usize,
                bytes,
                page_locked,
                served: 0,
            },
        );
        page_locked
    }
}

/// The page-lock range rule: all of `[host, host + bytes)` is page-locked when the
/// block the driver reports for `host` holds the whole range (one driver call), or,
/// where the driver reports no block, when the first and the last byte are both
/// page-locked (two). Two registrations side by side with a gap between them must
/// not pass for one range; the block answer catches that, the two-ends fallback
/// cannot, which is why the block comes first. `false` for an empty range.
pub(crate) fn range_is_page_locked(ctx: &Context, host: *const u8, bytes: usize) -> bool {
    if bytes == 0 {
        return false;
    }
    let Some(end) = (host as usize).checked_add(bytes) else {
        return false;
    };
    match query_host_memory(ctx, host.cast::<c_void>()) {
        HostMemory::Other => false,
        HostMemory::PageLocked { block: Some(b) } => block_holds(&b, host as usize, end),
        HostMemory::PageLocked { block: None } => matches!(
            query_host_memory(ctx, host.wrapping_add(bytes - 1).cast::<c_void>()),
            HostMemory::PageLocked { .. }
        ),
    }
}

/// Whether `block` holds all of `start..end`.
pub(crate) fn block_holds(block: &std::ops::Range<usize>, start: usize, end: usize) -> bool {
    block.start <= start && end <= block.end && start < end
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_block_holds_only_ranges_inside_it() {
        let b = 0x1000..0x3000;
        assert!(block_holds(&b, 0x1000, 0x3000), "the whole block");
        assert!(block_holds(&b, 0x1fff, 0x2000), "one byte inside");
        assert!(block_holds(&b, 0x2fff, 0x3000), "the last byte");
        assert!(!block_holds(&b, 0x2fff, 0x3001), "one byte past the end");
        assert!(
            !block_holds(&b, 0x0fff, 0x1001),
            "one byte before the start"
        );
        assert!(!block_holds(&b, 0x3000, 0x3001), "just after");
        assert!(!block_holds(&b, 0x2000, 0x2000), "an empty range");
    }
}
