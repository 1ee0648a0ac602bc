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

/// The direction of a transfer, for per-direction routing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Direction {
    /// Host to device (`upload`).
    HostToDevice,
    /// Device to host (`download`).
    DeviceToHost,
}

/// One value for uploads and one for downloads.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct PerDirection<T> {
    /// For [`Direction::HostToDevice`].
    pub upload: T,
    /// For [`Direction::DeviceToHost`].
    pub download: T,
}

impl<T: Copy> PerDirection<T> {
    /// The same value for both directions.
    pub const fn both(v: T) -> PerDirection<T> {
        PerDirection {
            upload: v,
            download: v,
        }
    }

    /// The value for `direction`.
    pub fn get(&self, direction: Direction) -> T {
        match direction {
            Direction::HostToDevice => self.upload,
            Direction::DeviceToHost => self.download,
        }
    }

    /// Sets the value for `direction`.
    pub fn set(&mut self, direction: Direction, v: T) {
        match direction {
            Direction::HostToDevice => self.upload = v,
            Direction::DeviceToHost => self.download = v,
        }
    }

    /// `self` with the value for `direction` replaced by `v`.
    pub fn with(mut self, direction: Direction, v: T) -> PerDirection<T> {
        self.set(direction, v);
        self
    }
}

/// Default lower routing bounds: below them `upload` / `download` hand the copy to
/// the driver. For uploads under 32 KiB the driver's pageable path is as fast as a
/// DMA from pinned memory, so a host copy can only add to it (32-core H200 host,
/// `copy_probe small`, interleaved: 16 KiB 9.87 µs pageable, 9.80 raw pinned,
/// 9.8-10.0 copy plus DMA at best); from 32 KiB staging wins (32 KiB: 10.1-11.4
/// against 10.7-12.1 µs; 48 KiB: 11.4-12.8 against 14.0-14.9). The 16-core
/// single-GPU H200 host agrees: staging 0.92-0.97x the driver from 4 to 24 KiB,
/// 1.02-1.06x at 32 KiB. Downloads gain from staging at every size.
pub const DEFAULT_STAGE_MIN_BYTES: PerDirection<usize> = PerDirection {
    upload: 32 << 10,
    download: 0,
};

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

/// The routing bounds of one buffer, and its memo of the last page-lock answers.
#[derive(Clone, Debug)]
pub(crate) struct Routing {
    pub(crate) min: PerDirection<usize>,
    pub(crate) max: PerDirection<usize>,
    /// Paced transfers the caller would copy alone go to the driver
    /// (`StagingConfig::driver_after_gap`).
    pub(crate) driver_after_gap: bool,
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

impl Default for Routing {
    fn default() -> Self {
        Routing {
            min: DEFAULT_STAGE_MIN_BYTES,
            max: PerDirection::both(usize::MAX),
            driver_after_gap: true,
            memo: PerDirection::default(),
        }
    }
}

impl Routing {
    /// Whether pageable transfers of `bytes` are staged.
    pub(crate) fn stages(&self, direction: Direction, bytes: usize) -> bool {
        within_bounds(self.min, self.max, direction, bytes)
    }

    /// The route of a transfer of `bytes` from or into `host`. Below the lower bound
    /// the page-lock query is skipped: the driver's path is as fast for page-locked
    /// memory as for pageable there.
    pub(crate) fn route(
        &mut self,
        ctx: &Context,
        direction: Direction,
        host: *const u8,
        bytes: usize,
    ) -> Route {
        if bytes < self.min.get(direction) {
            Route::Driver
        } else if self.page_locked(ctx, direction, host, bytes) {
            Route::PageLocked
        } else if !self.stages(direction, bytes) {
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

/// Whether `bytes` moving `direction` lie within the routing bounds `min..=max`
/// (staged, unless the rule after a gap hands them to the driver).
pub(crate) fn within_bounds(
    min: PerDirection<usize>,
    max: PerDirection<usize>,
    direction: Direction,
    bytes: usize,
) -> bool {
    bytes >= min.get(direction) && bytes <= max.get(direction)
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
        let mut r = Routing::default();
        let h2d = Direction::HostToDevice;
        assert!(!r.stages(h2d, 4096));
        assert!(!r.stages(h2d, (32 << 10) - 1));
        assert!(r.stages(h2d, 32 << 10));
        assert!(r.stages(h2d, 64 << 20));
        assert!(r.stages(Direction::DeviceToHost, 1));
        r.max = PerDirection::both(crate::DEFAULT_AUTO_STAGE_MAX_BYTES);
        r.min = PerDirection::both(0);
        assert!(r.stages(h2d, 1));
        assert!(r.stages(h2d, 512 << 10));
        assert!(!r.stages(h2d, (512 << 10) + 1));
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
