//! The memory a queued operation can use: [`DeviceSlice`] / [`DeviceSliceMut`] on the
//! device, [`PageLockedSlice`] / [`PageLockedSliceMut`] on the host.
//!
//! The traits are sealed: only this crate's types implement them, because each of
//! them carries the [tracker](crate::tracking) that makes queued operations sound.
//! Page-locked host memory qualifies only when the borrow checker cannot end its life
//! while a copy is queued: [`PinnedBuffer`](crate::PinnedBuffer) and its views, and a
//! [`HostRegistration`](crate::HostRegistration) of `'static` memory. A registration of
//! borrowed memory could be `mem::forget`-ed, ending the borrow while the DMA still
//! runs; use the `_sync` copies of [`Stream`](crate::Stream) for it, which wait before
//! returning.

use bytemuck::Pod;
use cuda_sys::CUdeviceptr;

use crate::context::Context;
use crate::tracking::Tracker;

pub(crate) mod sealed {
    /// Implemented by this crate's memory types only.
    pub trait Sealed {}
}

/// What a queued operation needs to know about device memory. Its fields are private
/// to this crate.
pub struct DeviceAccess<'a> {
    pub(crate) ptr: CUdeviceptr,
    pub(crate) ctx: &'a Context,
    pub(crate) tracker: &'a Tracker,
}

/// What a queued operation needs to know about page-locked host memory. Its fields
/// are private to this crate.
pub struct HostAccess<'a> {
    pub(crate) ptr: *mut u8,
    /// The allocation's tracker.
    pub(crate) root: &'a Tracker,
    /// A view's own tracker, where it has one.
    pub(crate) region: Option<&'a Tracker>,
}

/// Device memory that queued operations may read: a [`DeviceBuffer`](crate::DeviceBuffer)
/// or a view of one.
pub trait DeviceSlice<T: Pod>: sealed::Sealed {
    /// Number of elements.
    fn len(&self) -> usize;

    /// Whether it holds no element.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// For this crate's queued operations.
    #[doc(hidden)]
    fn device_access(&self) -> DeviceAccess<'_>;
}

/// Device memory that queued operations may write.
pub trait DeviceSliceMut<T: Pod>: DeviceSlice<T> {}

/// Page-locked host memory that queued copies may read, and whose accessors and
/// `Drop` wait for them.
pub trait PageLockedSlice<T: Pod>: sealed::Sealed {
    /// Number of elements.
    fn len(&self) -> usize;

    /// Whether it holds no element.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// For this crate's queued operations.
    #[doc(hidden)]
    fn host_access(&self) -> HostAccess<'_>;
}

/// Page-locked host memory that queued copies may write.
pub trait PageLockedSliceMut<T: Pod>: PageLockedSlice<T> {}

/// `range` of a buffer of `len` elements as `start..end`, or
/// [`Error::OutOfRange`](crate::Error::OutOfRange) naming `op`.
pub(crate) fn checked_range(
    op: &'static str,
    range: impl std::ops::RangeBounds<usize>,
    len: usize,
) -> crate::Result<std::ops::Range<usize>> {
    use std::ops::Bound;
    let start = match range.start_bound() {
        Bound::Included(&s) => Some(s),
        Bound::Excluded(&s) => s.checked_add(1),
        Bound::Unbounded => Some(0),
    };
    let end = match range.end_bound() {
        Bound::Included(&e) => e.checked_add(1),
        Bound::Excluded(&e) => Some(e),
        Bound::Unbounded => Some(len),
    };
    match (start, end) {
        (Some(start), Some(end)) if start <= end && end <= len => Ok(start..end),
        (start, end) => Err(crate::Error::OutOfRange {
            op,
            start: start.unwrap_or(usize::MAX),
            end: end.unwrap_or(usize::MAX),
            len,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::checked_range;
    use crate::Error;

    #[test]
    fn ranges_inside_the_buffer_pass_and_others_name_the_numbers() {
        assert_eq!(checked_range("x", .., 10).unwrap(), 0..10);
        assert_eq!(checked_range("x", 2..=4, 10).unwrap(), 2..5);
        assert_eq!(checked_range("x", 10.., 10).unwrap(), 10..10);
        assert_eq!(
            checked_range("x", 4..11, 10).unwrap_err(),
            Error::OutOfRange {
                op: "x",
                start: 4,
                end: 11,
                len: 10
            }
        );
        let (start, end) = (5, 4);
        assert!(checked_range("x", start..end, 10).is_err(), "reversed");
        assert!(
            checked_range("x", ..=usize::MAX, 10).is_err(),
            "end overflows"
        );
    }
}
