//! [`DeviceView`] / [`DeviceViewMut`]: parts of a [`DeviceBuffer`](crate::DeviceBuffer),
//! read-only and writable, the memory of queued copies.

use std::fmt;
use std::marker::PhantomData;
use std::ops::RangeBounds;

use bytemuck::Pod;
use cuda_sys::CUdeviceptr;

use crate::context::Context;
use crate::error::Result;
use crate::memory::{checked_range, sealed, DeviceAccess, DeviceSlice, DeviceSliceMut};
use crate::tracking::Tracker;

/// Part of a [`DeviceBuffer`](crate::DeviceBuffer), read-only: the source of queued copies. `Copy`, like
/// a shared reference.
pub struct DeviceView<'a, T: Pod> {
    ptr: CUdeviceptr,
    len: usize,
    ctx: &'a Context,
    tracker: &'a Tracker,
    _marker: PhantomData<&'a [T]>,
}

/// Part of a [`DeviceBuffer`](crate::DeviceBuffer), writable: the destination of queued copies.
pub struct DeviceViewMut<'a, T: Pod> {
    ptr: CUdeviceptr,
    len: usize,
    ctx: &'a Context,
    tracker: &'a Tracker,
    _marker: PhantomData<&'a mut [T]>,
}

macro_rules! device_view_common {
    ($ty:ident) => {
        impl<'a, T: Pod> $ty<'a, T> {
            /// The `len` elements at `ptr`, whose queued work `tracker` records.
            pub(crate) fn new(
                ptr: CUdeviceptr,
                len: usize,
                ctx: &'a Context,
                tracker: &'a Tracker,
            ) -> Self {
                $ty {
                    ptr,
                    len,
                    ctx,
                    tracker,
                    _marker: PhantomData,
                }
            }

            /// Elements `range` of this view, taking its place; [`Error::OutOfRange`]
            /// naming `op` when it does not fit.
            pub(crate) fn into_part(
                self,
                op: &'static str,
                range: impl RangeBounds<usize>,
            ) -> Result<Self> {
                let r = checked_range(op, range, self.len)?;
                Ok($ty::new(
                    elem_ptr::<T>(self.ptr, r.start),
                    r.len(),
                    self.ctx,
                    self.tracker,
                ))
            }

            /// Number of elements.
            pub fn len(&self) -> usize {
                self.len
            }

            /// Whether it holds no element.
            pub fn is_empty(&self) -> bool {
                self.len == 0
            }

            /// The device address of its first element.
            pub fn as_device_ptr(&self) -> CUdeviceptr {
                self.ptr
            }

            /// The context the memory lives in.
            pub fn context(&self) -> &Context {
                self.ctx
            }

            /// A read-only view of elements `range` of this view.
            pub fn slice(&self, range: impl RangeBounds<usize>) -> Result<DeviceView<'_, T>> {
                self.view(range)
            }

            fn view(&self, range: impl RangeBounds<usize>) -> Result<DeviceView<'a, T>> {
                DeviceView::new(self.ptr, self.len, self.ctx, self.tracker)
                    .into_part(concat!(stringify!($ty), "::slice"), range)
            }
        }

        impl<T: Pod> sealed::Sealed for $ty<'_, T> {}

        impl<T: Pod> DeviceSlice<T> for $ty<'_, T> {
            fn len(&self) -> usize {
                self.len
            }
            fn device_access(&self) -> DeviceAccess<'_> {
                DeviceAccess {
                    ptr: self.ptr,
                    // Cannot overflow: a view is part of a buffer whose byte length
                    // was checked when it was made.
                    bytes: self.len * std::mem::size_of::<T>(),
                    ctx: self.ctx,
                    tracker: self.tracker,
                }
            }
        }

        impl<T: Pod> fmt::Debug for $ty<'_, T> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.debug_struct(stringify!($ty))
                    .field("ptr", &format_args!("{:#x}", self.ptr))
                    .field("len", &self.len)
                    .finish()
            }
        }
    };
}

device_view_common!(DeviceView);

impl<T: Pod> Clone for DeviceView<'_, T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T: Pod> Copy for DeviceView<'_, T> {}
device_view_common!(DeviceViewMut);

impl<'a, T: Pod> DeviceView<'a, T> {
    /// All of `memory` (a buffer or a view) as a read-only view: the same memory and
    /// the same record of queued work, for as long as `memory` is borrowed. What
    /// generic code over [`DeviceSlice`] cuts parts from.
    pub fn of<D: DeviceSlice<T> + ?Sized>(memory: &'a D) -> DeviceView<'a, T> {
        DeviceView::from_access(memory.device_access(), memory.len())
    }

    /// The same as [`DeviceView::slice`], for as long as the buffer is borrowed
    /// rather than this view.
    pub fn subview(&self, range: impl RangeBounds<usize>) -> Result<DeviceView<'a, T>> {
        self.view(range)
    }

    /// The same memory as bytes (any bytes make valid elements: `T: Pod`), for
    /// copies that cut it at byte offsets.
    pub fn into_bytes(self) -> DeviceView<'a, u8> {
        DeviceView::new(
            self.ptr,
            self.len * std::mem::size_of::<T>(),
            self.ctx,
            self.tracker,
        )
    }

    fn from_access(a: DeviceAccess<'a>, len: usize) -> DeviceView<'a, T> {
        DeviceView::new(a.ptr, len, a.ctx, a.tracker)
    }
}

impl<'a, T: Pod> DeviceViewMut<'a, T> {
    /// All of `memory` (a buffer or a writable view) as a writable view: the same
    /// memory and the same record of queued work, for as long as `memory` is
    /// borrowed exclusively. What generic code over [`DeviceSliceMut`] cuts parts
    /// from.
    pub fn of<D: DeviceSliceMut<T> + ?Sized>(memory: &'a mut D) -> DeviceViewMut<'a, T> {
        let len = memory.len();
        let a = memory.device_access();
        DeviceViewMut::new(a.ptr, len, a.ctx, a.tracker)
    }

    /// The same memory as bytes, writable (any bytes make valid elements: `T: Pod`).
    pub fn into_bytes(self) -> DeviceViewMut<'a, u8> {
        DeviceViewMut::new(
            self.ptr,
            self.len * std::mem::size_of::<T>(),
            self.ctx,
            self.tracker,
        )
    }

    /// Elements `range` of this view, writable, taking the view's place.
    pub fn into_slice_mut(self, range: impl RangeBounds<usize>) -> Result<DeviceViewMut<'a, T>> {
        self.into_part("DeviceViewMut::into_slice_mut", range)
    }

    /// A writable view of elements `range` of this view.
    pub fn slice_mut(&mut self, range: impl RangeBounds<usize>) -> Result<DeviceViewMut<'_, T>> {
        DeviceViewMut::new(self.ptr, self.len, self.ctx, self.tracker)
            .into_part("DeviceViewMut::slice_mut", range)
    }

    /// Two writable views, of elements `..mid` and `mid..` of this view: two parts
    /// to fill at once, for example both in one
    /// `cuda_staging::UploadBatch`. [`crate::Error::OutOfRange`] when `mid > len`.
    pub fn split_at_mut(
        &mut self,
        mid: usize,
    ) -> Result<(DeviceViewMut<'_, T>, DeviceViewMut<'_, T>)> {
        DeviceViewMut::new(self.ptr, self.len, self.ctx, self.tracker)
            .into_halves("DeviceViewMut::split_at_mut", mid)
    }

    /// Elements `..mid` and `mid..` of this view, taking its place; the halves share
    /// its record of queued work (they are parts of one buffer).
    /// [`crate::Error::OutOfRange`] naming `op` when `mid > len`.
    pub(crate) fn into_halves(self, op: &'static str, mid: usize) -> Result<(Self, Self)> {
        checked_range(op, ..mid, self.len)?;
        Ok((
            DeviceViewMut::new(self.ptr, mid, self.ctx, self.tracker),
            DeviceViewMut::new(
                elem_ptr::<T>(self.ptr, mid),
                self.len - mid,
                self.ctx,
                self.tracker,
            ),
        ))
    }
}

// SAFETY: a view is a borrow of a `DeviceBuffer`: shared views allow reads only,
// a mutable view is exclusive, as for `&[T]` / `&mut [T]`.
unsafe impl<T: Pod + Sync> Send for DeviceView<'_, T> {}
// SAFETY: as above.
unsafe impl<T: Pod + Sync> Sync for DeviceView<'_, T> {}
// SAFETY: as above.
unsafe impl<T: Pod + Send> Send for DeviceViewMut<'_, T> {}
// SAFETY: as above; `&DeviceViewMut` allows reads only.
unsafe impl<T: Pod + Sync> Sync for DeviceViewMut<'_, T> {}

impl<T: Pod> DeviceSliceMut<T> for DeviceViewMut<'_, T> {}

/// The device address of element `i` (in range: checked by the caller).
fn elem_ptr<T>(base: CUdeviceptr, i: usize) -> CUdeviceptr {
    base + (i * std::mem::size_of::<T>()) as CUdeviceptr
}
