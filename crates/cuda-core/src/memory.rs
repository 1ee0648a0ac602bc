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

/// What a queued operation needs to know about device memory: its address, its
/// length in bytes, its context, and the record of queued work that uses it
/// ([`DeviceSlice::device_access`]).
///
/// The record is private: every operation queued through this workspace (a
/// [`Stream`](crate::Stream) copy, a `cuda-staging` transfer) enters itself there, and
/// the memory's owner waits on it before the memory is read, written or freed on the
/// host. The other three are public, for handing the memory to other libraries.
#[derive(Clone, Copy)]
pub struct DeviceAccess<'a> {
    pub(crate) ptr: CUdeviceptr,
    pub(crate) bytes: usize,
    pub(crate) ctx: &'a Context,
    pub(crate) tracker: &'a Tracker,
}

impl<'a> DeviceAccess<'a> {
    /// The device address of the first byte.
    pub fn device_ptr(&self) -> CUdeviceptr {
        self.ptr
    }

    /// Length in bytes.
    pub fn byte_len(&self) -> usize {
        self.bytes
    }

    /// The context the memory lives in.
    pub fn context(&self) -> &'a Context {
        self.ctx
    }
}

impl std::fmt::Debug for DeviceAccess<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceAccess")
            .field("ptr", &format_args!("{:#x}", self.ptr))
            .field("bytes", &self.bytes)
            .finish()
    }
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

/// Device memory that queued operations may read: a [`DeviceBuffer`](crate::DeviceBuffer),
/// or a view of part of one ([`DeviceView`](crate::DeviceView), from
/// [`DeviceBuffer::slice`](crate::DeviceBuffer::slice), or a
/// [`DeviceViewMut`](crate::DeviceViewMut)).
///
/// The one way the workspace says "device memory I may read": every [`Stream`](crate::Stream)
/// operation and every `cuda-staging` transfer takes `&impl DeviceSlice<T>`, so a
/// whole buffer and a view at an offset go through the same calls, with the same
/// checks (length, context) and the same record of queued work. A view shares its
/// buffer's record: work queued on a view is waited for by the buffer's synchronous
/// copies and `Drop`, exactly as work queued on the whole buffer.
///
/// Sealed: only this crate's types implement it, because each implementation
/// carries the record of queued work that makes queued operations sound.
///
/// ```no_run
/// use cuda_core::{Context, DeviceBuffer, DeviceSlice, DeviceView};
///
/// fn describe<T: cuda_core::bytemuck::Pod>(memory: &impl DeviceSlice<T>) -> String {
///     let a = memory.device_access();
///     format!("{} elements, {} bytes at {:#x}", memory.len(), a.byte_len(), a.device_ptr())
/// }
///
/// let _ctx = Context::new(0)?;
/// let buf = DeviceBuffer::<f32>::zeroed(1024)?;
/// println!("{}", describe(&buf));
/// println!("{}", describe(&buf.slice(256..512)?));
/// let view: DeviceView<'_, f32> = DeviceView::of(&buf); // all of it, as a view
/// assert_eq!(view.len(), 1024);
/// # Ok::<(), cuda_core::Error>(())
/// ```
pub trait DeviceSlice<T: Pod>: sealed::Sealed {
    /// Number of elements.
    fn len(&self) -> usize;

    /// Whether it holds no element.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The context the memory lives in: a queued operation takes it only with a
    /// stream of the same context.
    fn context(&self) -> &Context {
        self.device_access().ctx
    }

    /// What a queued operation needs: the device address, the length in bytes, the
    /// context, and (private to this crate) the record that the operation enters
    /// itself in, so that the memory's owner waits for it before the memory is
    /// read, written or freed on the host. Work you queue yourself through the
    /// address is not recorded: synchronise it yourself.
    fn device_access(&self) -> DeviceAccess<'_>;
}

/// Device memory that queued operations may write: a [`DeviceBuffer`](crate::DeviceBuffer)
/// or a [`DeviceViewMut`](crate::DeviceViewMut) (from
/// [`DeviceBuffer::slice_mut`](crate::DeviceBuffer::slice_mut)), taken as
/// `&mut impl DeviceSliceMut<T>`, so that nothing else reads or writes the memory
/// while the operation is queued. A shared [`DeviceView`](crate::DeviceView) is not
/// one. Sealed, as [`DeviceSlice`].
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
