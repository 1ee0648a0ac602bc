//! Which way `upload` / `download` move a transfer: through the pinned buffer,
//! straight from or into the caller's page-locked memory, or through the driver's
//! pageable path.
//!
//! Routing is per direction. A transfer below the lower bound
//! ([`DEFAULT_STAGE_MIN_BYTES`]: uploads under 32 KiB, which the driver copies inline
//! as fast as a DMA from pinned memory) or above the upper one (none by default) goes
//! to the driver. Otherwise the driver is asked whether the host range is
//! page-locked (a [`crate::PinnedBuffer`], a [`crate::HostRegistration`], another
//! library's pinned memory; one call of about 0.1 µs), and a page-locked range is
//! DMA'd straight from or into. The answer is remembered for the same range for the
//! next [`MEMO_USES`] transfers, which is safe either way: a wrong answer only picks
//! a slower route. Everything else is staged, except a paced transfer (after a gap
//! or within a frame's few, not in a tight loop) that the caller would copy alone,
//! from `tuning::DRIVER_AFTER_GAP_MIN_BYTES` (every upload, downloads over 512 KiB),
//! which goes to the driver. `StagingBuffer::calibrate` sets the bounds from measurements;
//! `set_auto_stage_max_bytes` sets one fixed upper bound and no lower one.

use std::ffi::c_void;

use cuda_core::{query_host_memory, Context, HostMemory};

use crate::config::StagingConfig;
use crate::direction::{Direction, PerDirection};

/// How `upload` / `download` move one transfer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Route {
    /// The driver's own copy from or into the caller's pageable memory.
    Driver,
    /// DMA straight from or into the caller's page-locked memory.
    PageLocked,
    /// Through the pinned buffer.
    Staged,
}

/// A buffer's memo of the last page-lock answers, one per direction.
#[derive(Clone, Debug, Default)]
pub(crate) struct Routing {
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

impl Routing {
    /// The route of a transfer of `bytes` from or into `host`. Below the lower bound
    /// the page-lock query is skipped: the driver's path is as fast for page-locked
    /// memory as for pageable there.
    pub(crate) fn route(
        &mut self,
        config: &StagingConfig,
        ctx: &Context,
        direction: Direction,
        host: *const u8,
        bytes: usize,
    ) -> Route {
        if bytes < config.stage_min_bytes.get(direction) {
            Route::Driver
        } else if self.page_locked(ctx, direction, host, bytes) {
            Route::PageLocked
        } else if !config.stages(direction, bytes) {
            Route::Driver
        } else {
            Route::Staged
        }
    }

    /// Whether `[host, host + bytes)` is page-locked, from the memo when the same
    /// range was asked about recently. A stale answer is safe either way: a
    /// page-locked range taken for pageable is staged, and a pageable one taken for
    /// page-locked goes through the driver's copy, which handles any memory; it only
    /// costs speed, for at most [`MEMO_USES`] transfers.
    fn page_locked(
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

    #[test]
    fn default_routing_hands_small_uploads_to_the_driver() {
        let mut c = StagingConfig::default();
        let h2d = Direction::HostToDevice;
        assert!(!c.stages(h2d, 4096));
        assert!(!c.stages(h2d, (32 << 10) - 1));
        assert!(c.stages(h2d, 32 << 10));
        assert!(c.stages(h2d, 64 << 20));
        assert!(c.stages(Direction::DeviceToHost, 1));
        c.stage_max_bytes = PerDirection::both(crate::DEFAULT_AUTO_STAGE_MAX_BYTES);
        c.stage_min_bytes = PerDirection::both(0);
        assert!(c.stages(h2d, 1));
        assert!(c.stages(h2d, 512 << 10));
        assert!(!c.stages(h2d, (512 << 10) + 1));
    }

    #[test]
    fn per_direction_values_are_read_and_set_by_direction() {
        let mut p = PerDirection::both(3usize);
        p.set(Direction::DeviceToHost, 9);
        assert_eq!(p.get(Direction::HostToDevice), 3);
        assert_eq!(p.get(Direction::DeviceToHost), 9);
        assert_eq!(
            p,
            PerDirection {
                upload: 3,
                download: 9
            }
        );
    }
}
