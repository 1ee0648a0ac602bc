//! 2-D regions of device memory: the traits [`DeviceSlice2d`] / [`DeviceSlice2dMut`]
//! that 2-D copies take, and the views [`DeviceView2d`] / [`DeviceView2dMut`] that lay
//! rows over linear device memory (a [`DeviceBuffer`](crate::DeviceBuffer) or a view
//! of one) with a pitch of the caller's choice. A
//! [`PitchedBuffer`](crate::PitchedBuffer) implements both traits itself.

use std::fmt;
use std::marker::PhantomData;

use bytemuck::Pod;
use cuda_sys::CUdeviceptr;

use crate::context::Context;
use crate::error::Result;
use crate::layout_2d::Layout2d;
use crate::memory::{DeviceSlice, DeviceSliceMut};
use crate::tracking::Tracker;

pub(crate) mod sealed {
    /// Implemented by this crate's 2-D memory types only (a trait of its own, so
    /// the 1-D traits' list of implementors stays as it was).
    pub trait Sealed2d {}
}

/// What a queued 2-D operation needs to know about device memory. Its fields are
/// private to this crate.
pub struct Device2dAccess<'a> {
    pub(crate) ptr: CUdeviceptr,
    pub(crate) ctx: &'a Context,
    pub(crate) tracker: &'a Tracker,
    pub(crate) layout: Layout2d,
}

/// A 2-D region of device memory that queued operations may read: `height` rows of
/// `width` elements, `pitch_bytes` apart. Implemented by
/// [`PitchedBuffer`](crate::PitchedBuffer), [`DeviceView2d`] and [`DeviceView2dMut`].
pub trait DeviceSlice2d<T: Pod>: sealed::Sealed2d {
    /// Elements per row.
    fn width(&self) -> usize;

    /// Rows.
    fn height(&self) -> usize;

    /// Bytes from the start of one row to the start of the next.
    fn pitch_bytes(&self) -> usize;

    /// The context the memory lives in.
    fn context(&self) -> &Context;

    /// The shape of the rows, in bytes.
    fn layout(&self) -> Layout2d {
        self.device_2d_access().layout
    }

    /// The same rows as bytes (`width * size_of::<T>()` of them per row), read-only:
    /// for copies between element types of one size in bytes.
    fn as_bytes_2d(&self) -> DeviceView2d<'_, u8> {
        DeviceView2d::from_access(self.device_2d_access())
    }

    /// For this crate's queued operations.
    #[doc(hidden)]
    fn device_2d_access(&self) -> Device2dAccess<'_>;
}

/// A 2-D region of device memory that queued operations may write (its rows only:
/// the padding between them is never written).
pub trait DeviceSlice2dMut<T: Pod>: DeviceSlice2d<T> {
    /// The same rows as bytes, writable.
    fn as_bytes_2d_mut(&mut self) -> DeviceView2dMut<'_, u8> {
        DeviceView2dMut::from_access(self.device_2d_access())
    }
}

/// Rows laid over linear device memory, read-only: the source of 2-D copies.
/// `Copy`, like a shared reference.
///
/// ```no_run
/// use cuda_core::{Context, DeviceBuffer, DeviceSlice2d, DeviceView2d};
///
/// let _ctx = Context::new(0)?;
/// // 3 rows of 17 f32, each starting 128 bytes after the one before.
/// let d = DeviceBuffer::<f32>::zeroed(3 * 32)?;
/// let rows = DeviceView2d::new(&d, 17, 3, 128)?;
/// assert_eq!((rows.width(), rows.height(), rows.pitch_bytes()), (17, 3, 128));
/// # Ok::<(), cuda_core::Error>(())
/// ```
pub struct DeviceView2d<'a, T: Pod> {
    ptr: CUdeviceptr,
    width: usize,
    layout: Layout2d,
    ctx: &'a Context,
    tracker: &'a Tracker,
    _marker: PhantomData<&'a [T]>,
}

/// Rows laid over linear device memory, writable: the destination of 2-D copies,
/// which write the rows and leave the padding between them alone.
pub struct DeviceView2dMut<'a, T: Pod> {
    ptr: CUdeviceptr,
    width: usize,
    layout: Layout2d,
    ctx: &'a Context,
    tracker: &'a Tracker,
    _marker: PhantomData<&'a mut [T]>,
}

/// The width in elements of `T` of rows of `row_bytes` (0 for a zero-sized `T`).
fn width_of<T>(row_bytes: usize) -> usize {
    row_bytes.checked_div(std::mem::size_of::<T>()).unwrap_or(0)
}

macro_rules! view_2d_common {
    ($ty:ident) => {
        impl<'a, T: Pod> $ty<'a, T> {
            /// The view of what `access` describes, as rows of `T` (whose size in
            /// bytes divides the rows': checked by the caller).
            pub(crate) fn from_access(access: Device2dAccess<'a>) -> Self {
                $ty {
                    ptr: access.ptr,
                    width: width_of::<T>(access.layout.row_bytes()),
                    layout: access.layout,
                    ctx: access.ctx,
                    tracker: access.tracker,
                    _marker: PhantomData,
                }
            }

            /// The device address of the first row.
            pub fn as_device_ptr(&self) -> CUdeviceptr {
                self.ptr
            }
        }

        impl<T: Pod> sealed::Sealed2d for $ty<'_, T> {}

        impl<T: Pod> DeviceSlice2d<T> for $ty<'_, T> {
            fn width(&self) -> usize {
                self.width
            }
            fn height(&self) -> usize {
                self.layout.height()
            }
            fn pitch_bytes(&self) -> usize {
                self.layout.pitch_bytes()
            }
            fn context(&self) -> &Context {
                self.ctx
            }
            fn device_2d_access(&self) -> Device2dAccess<'_> {
                Device2dAccess {
                    ptr: self.ptr,
                    ctx: self.ctx,
                    tracker: self.tracker,
                    layout: self.layout,
                }
            }
        }

        impl<T: Pod> fmt::Debug for $ty<'_, T> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.debug_struct(stringify!($ty))
                    .field("ptr", &format_args!("{:#x}", self.ptr))
                    .field("width", &self.width)
                    .field("height", &self.layout.height())
                    .field("pitch_bytes", &self.layout.pitch_bytes())
                    .finish()
            }
        }
    };
}

view_2d_common!(DeviceView2d);
view_2d_common!(DeviceView2dMut);

impl<'a, T: Pod> DeviceView2d<'a, T> {
    /// `height` rows of `width` elements of `mem`, each row starting `pitch_bytes`
    /// after the one before, from `mem`'s first element.
    ///
    /// Errors, before any driver call: [`crate::Error::PitchTooSmall`] when a row
    /// is longer than the pitch, [`crate::Error::RegionOutOfBounds`] when the rows
    /// reach past the end of `mem` (the last row needs no padding after it),
    /// [`crate::Error::SizeOverflow`] / [`crate::Error::InvalidArgument`] when the
    /// byte counts overflow.
    pub fn new(
        mem: &'a impl DeviceSlice<T>,
        width: usize,
        height: usize,
        pitch_bytes: usize,
    ) -> Result<DeviceView2d<'a, T>> {
        let op = "DeviceView2d::new";
        let layout = checked_layout::<T>(op, mem.len(), width, height, pitch_bytes)?;
        let a = mem.device_access();
        Ok(DeviceView2d {
            ptr: a.ptr,
            width,
            layout,
            ctx: a.ctx,
            tracker: a.tracker,
            _marker: PhantomData,
        })
    }
}

impl<'a, T: Pod> DeviceView2dMut<'a, T> {
    /// `height` rows of `width` elements of `mem`, writable; see
    /// [`DeviceView2d::new`], whose errors it shares.
    pub fn new(
        mem: &'a mut impl DeviceSliceMut<T>,
        width: usize,
        height: usize,
        pitch_bytes: usize,
    ) -> Result<DeviceView2dMut<'a, T>> {
        let op = "DeviceView2dMut::new";
        let layout = checked_layout::<T>(op, mem.len(), width, height, pitch_bytes)?;
        let a = mem.device_access();
        Ok(DeviceView2dMut {
            ptr: a.ptr,
            width,
            layout,
            ctx: a.ctx,
            tracker: a.tracker,
            _marker: PhantomData,
        })
    }
}

/// The layout of `height` rows of `width` elements `pitch_bytes` apart in memory of
/// `len` elements of `T`, checked.
fn checked_layout<T>(
    op: &'static str,
    len: usize,
    width: usize,
    height: usize,
    pitch_bytes: usize,
) -> Result<Layout2d> {
    let what = "the 2-D view of device memory";
    let layout = Layout2d::new::<T>(op, what, width, height, pitch_bytes)?;
    // Cannot overflow for memory that exists; checked all the same.
    let len_bytes = crate::byte_len::<T>(op, len)?;
    layout.check_fits(op, what, len_bytes)?;
    Ok(layout)
}

impl<T: Pod> Clone for DeviceView2d<'_, T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T: Pod> Copy for DeviceView2d<'_, T> {}

impl<T: Pod> DeviceSlice2dMut<T> for DeviceView2dMut<'_, T> {}
